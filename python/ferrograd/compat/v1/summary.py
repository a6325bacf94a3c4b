"""``tf.summary``: scalar and histogram summaries, ``merge_all`` and ``FileWriter``.

A summary op is a tensor whose fetched value is a serialized TensorBoard
``Summary`` (bytes), as in TF; ``FileWriter.add_summary`` writes it into an
event file with :class:`ferrograd.tensorboard.SummaryWriter`, and
``FileWriter(logdir, graph)`` / ``add_graph`` log the recorded graph for
TensorBoard's Graphs tab. Needs the ``tensorboard`` package.
"""

from __future__ import annotations

import os
import re
import struct
import time
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _ops
from ._framework import Graph, Tensor, _convert, float32, get_default_graph
from ._variables import GraphKeys

__all__ = ["FileWriter", "histogram", "image", "merge", "merge_all", "scalar"]


def _clean(name: str) -> str:
    """A tag with the characters TensorBoard refuses (``:`` of ``var.name``...) made ``_``, as TF1 cleans it."""
    return re.sub(r"[^-/\w.]", "_", name).lstrip("/")


def _tag(g: Graph, name: str, family: str | None = None) -> str:
    """The summary's op name and tag, as TF1 makes them: a name scope of ``name`` in the current
    one, made unique in the graph (so a second ``loss``, or one after a ``Loss`` scope, is
    ``loss_1``), with ``family/`` before it."""
    name = _clean(name)
    if family is None:
        return g._unique(name)
    family = _clean(family)
    return f"{family}/{g._unique(f'{family}/{name}')}"


def _scalar_bytes(tag: str, value: Any) -> bytes:
    from tensorboard.compat.proto import summary_pb2

    arr = np.asarray(value)
    if arr.size != 1:
        raise ValueError(f"tf.summary.scalar {tag!r}: the value must be a scalar, got shape {arr.shape}")
    v = summary_pb2.Summary.Value(tag=tag, simple_value=float(arr.reshape(())))
    return summary_pb2.Summary(value=[v]).SerializeToString()


def _histogram_bytes(tag: str, value: Any) -> bytes:
    from tensorboard.compat.proto import summary_pb2

    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size:
        counts, edges = np.histogram(arr, bins=30)
        limits, buckets = edges[1:].tolist(), counts.astype(np.float64).tolist()
        lo, hi = float(arr.min()), float(arr.max())
    else:
        limits, buckets, lo, hi = [], [], 0.0, 0.0
    histo = summary_pb2.HistogramProto(
        min=lo,
        max=hi,
        num=float(arr.size),
        sum=float(arr.sum()),
        sum_squares=float((arr * arr).sum()),
        bucket_limit=limits,
        bucket=buckets,
    )
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=histo)]).SerializeToString()


def _png(img: np.ndarray) -> bytes:
    """``img`` (height, width, channels; uint8) as PNG bytes (8-bit, no filtering)."""
    h, w, c = img.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    rows = b"".join(b"\x00" + img[r].tobytes() for r in range(h))
    header = struct.pack(">IIBBBBB", w, h, 8, {1: 0, 2: 4, 3: 2, 4: 6}[c], 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _to_uint8(img: np.ndarray) -> np.ndarray:
    """TF1's image-summary scaling of one float image: all values >= 0: the largest becomes 255;
    any negative: 0 maps to 127, scaled so the smallest is 0 or the largest 255."""
    if img.dtype == np.uint8:
        return img
    x = np.nan_to_num(img.astype(np.float64))
    lo, hi = float(x.min()), float(x.max())
    if lo >= 0:
        scale = 255.0 / hi if hi > 0 else 0.0
        out = x * scale
    else:
        scale = 127.0 / builtins_max(-lo, hi) if builtins_max(-lo, hi) > 0 else 0.0
        out = x * scale + 127.0
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


builtins_max = max


def _image_bytes(tag: str, value: Any, max_outputs: int) -> bytes:
    from tensorboard.compat.proto import summary_pb2

    arr = np.asarray(value)
    n = min(int(max_outputs), arr.shape[0])
    values = []
    for i in range(n):
        img = _to_uint8(arr[i])
        h, w, c = img.shape
        im = summary_pb2.Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=_png(img))
        t = f"{tag}/image" if max_outputs == 1 else f"{tag}/image/{i}"
        values.append(summary_pb2.Summary.Value(tag=t, image=im))
    return summary_pb2.Summary(value=values).SerializeToString()


def _summary(
    kind: str, name: str, tensor: Any, collections: Sequence[str] | None, family: str | None
) -> Tensor:
    x = _convert(tensor)
    g = x._graph
    tag = _tag(g, name, family)
    if kind == "scalar":
        t = g._apply(lambda v: v.to(float32._fg).clone(), (x,), "ScalarSummary", tag, exact=True)
        post = _scalar_bytes
    else:
        t = g._apply(lambda v: v.to(float32._fg).reshape(-1), (x,), "HistogramSummary", tag, exact=True)
        post = _histogram_bytes
    t._post = lambda val, _tag=tag, _f=post: _f(_tag, val)  # type: ignore[attr-defined]
    for c in collections if collections is not None else [GraphKeys.SUMMARIES]:
        g.add_to_collection(c, t)
    return t


def scalar(
    name: str, tensor: Any, collections: Sequence[str] | None = None, family: str | None = None
) -> Tensor:
    """A summary of one number; fetching it gives a serialized ``Summary``."""
    return _summary("scalar", name, tensor, collections, family)


def image(
    name: str,
    tensor: Any,
    max_outputs: int = 3,
    collections: Sequence[str] | None = None,
    family: str | None = None,
) -> Tensor:
    """An image summary of the first ``max_outputs`` images of ``tensor`` (``[batch, height,
    width, channels]``, 1, 3 or 4 channels; float images scaled as TF1 scales them, uint8 as they are),
    written as PNG under the tags ``<name>/image/<i>`` (``<name>/image`` for one)."""
    x = _convert(tensor)
    shape = x._shape
    if shape is not None and (len(shape) != 4 or shape[-1] not in (1, 3, 4, None)):
        raise ValueError(
            f"tf.summary.image {name!r}: the tensor must be [batch, height, width, channels] with 1, 3 or 4 "
            f"channels, got {x.name} of shape {shape} ({x.dtype.name})"
        )
    if int(max_outputs) < 1:
        raise ValueError(f"tf.summary.image {name!r}: max_outputs must be at least 1, got {max_outputs}")
    g = x._graph
    tag = _tag(g, name, family)
    u8 = x.dtype.name == "uint8"
    t = g._apply(
        lambda v: v.clone() if u8 else v.to(float32._fg).clone(), (x,), "ImageSummary", tag, exact=True
    )
    t._post = lambda val, _tag=tag, _n=int(max_outputs), _u8=u8: _image_bytes(  # type: ignore[attr-defined]
        _tag, np.asarray(val, dtype=np.uint8) if _u8 else val, _n
    )
    for c in collections if collections is not None else [GraphKeys.SUMMARIES]:
        g.add_to_collection(c, t)
    return t


def histogram(
    name: str, values: Any, collections: Sequence[str] | None = None, family: str | None = None
) -> Tensor:
    """A histogram summary of every element of ``values``."""
    return _summary("histogram", name, values, collections, family)


class _Merged:
    """Several summaries fetched together into one serialized ``Summary``."""

    def __init__(self, parts: list[Any], graph: Graph) -> None:
        self._parts = parts
        self.graph = graph
        self.name = "Merge/MergeSummary:0"

    def _merge(self, values: list[bytes]) -> bytes:
        from tensorboard.compat.proto import summary_pb2

        out = summary_pb2.Summary()
        for v in values:
            if isinstance(v, (bytes, bytearray)):
                out.MergeFromString(bytes(v))
        return out.SerializeToString()

    def eval(self, feed_dict: Any = None, session: Any = None) -> bytes:
        """The merged summary in ``session`` (the default one when omitted)."""
        from ._framework import get_default_session

        sess = session or get_default_session()
        if sess is None:
            raise ValueError("No default session is registered")
        return sess.run(self, feed_dict=feed_dict)

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' (a merge of {len(self._parts)} summaries)>"


def merge(inputs: Sequence[Any], collections: Sequence[str] | None = None, name: str | None = None) -> Any:
    """One summary holding all of ``inputs``."""
    parts: list[Any] = []
    for i in inputs:
        parts.extend(i._parts if isinstance(i, _Merged) else [i])
    return _Merged(parts, get_default_graph())


def merge_all(key: str = GraphKeys.SUMMARIES, scope: str | None = None, name: str | None = None) -> Any:
    """All summaries of the collection ``key`` merged, or None when there are none."""
    parts = get_default_graph().get_collection(key, scope)
    return merge(parts) if parts else None


class FileWriter:
    """Writes summaries and graphs as TensorBoard event files under ``logdir``."""

    def __init__(
        self,
        logdir: str,
        graph: Any = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        graph_def: Any = None,
        filename_suffix: str | None = None,
        session: Any = None,
    ) -> None:
        from ...tensorboard import SummaryWriter

        self._logdir = os.fspath(logdir)
        self._w = SummaryWriter(self._logdir, flush_secs=flush_secs)
        if graph is not None:
            self.add_graph(graph)

    def get_logdir(self) -> str:
        """The directory written to."""
        return self._logdir

    def add_summary(self, summary: Any, global_step: int | None = None) -> None:
        """Write a fetched summary (bytes or a ``Summary`` proto) at ``global_step``."""
        from tensorboard.compat.proto import event_pb2, summary_pb2

        if isinstance(summary, (bytes, bytearray)):
            proto = summary_pb2.Summary()
            proto.ParseFromString(bytes(summary))
        elif isinstance(summary, np.ndarray) and summary.dtype == object:
            proto = summary_pb2.Summary()
            proto.ParseFromString(bytes(summary.item()))
        else:
            proto = summary
        ev = event_pb2.Event(wall_time=time.time(), step=int(global_step or 0), summary=proto)
        self._w._w.add_event(ev)

    def add_graph(self, graph: Any, global_step: int | None = None, graph_def: Any = None) -> None:
        """Log ``graph`` (a ``tf.Graph``, e.g. ``sess.graph``) for the Graphs tab."""
        if isinstance(graph, Graph):
            ep = graph._build(frozenset())
            self._w.add_graph(ep.fgg)
        else:
            self._w.add_graph(graph)

    def add_event(self, event: Any) -> None:
        """Write a raw ``Event`` proto."""
        self._w._w.add_event(event)

    def flush(self) -> None:
        """Write buffered events to disk."""
        self._w.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._w.close()

    def reopen(self) -> None:
        """Start a new event file after :meth:`close`."""
        from ...tensorboard import SummaryWriter

        self._w = SummaryWriter(self._logdir)

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


del _ops
