"""``tf.summary``: scalar and histogram summaries, ``merge_all`` and ``FileWriter``.

A summary op is a tensor whose fetched value is a serialized TensorBoard
``Summary`` (bytes), as in TF; ``FileWriter.add_summary`` writes it into an
event file with :class:`ferrograd.tensorboard.SummaryWriter`, and
``FileWriter(logdir, graph)`` / ``add_graph`` log the recorded graph for
TensorBoard's Graphs tab. Needs the ``tensorboard`` package.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _ops
from ._framework import Graph, Tensor, _convert, float32, get_default_graph
from ._variables import GraphKeys

__all__ = ["FileWriter", "histogram", "merge", "merge_all", "scalar"]


def _tag(g: Graph, name: str) -> str:
    return "/".join([*g._name_stack, name]) if g._name_stack else name


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


def _summary(
    kind: str, name: str, tensor: Any, collections: Sequence[str] | None, family: str | None
) -> Tensor:
    x = _convert(tensor)
    g = x._graph
    tag = _tag(g, name if family is None else f"{family}/{name}")
    if kind == "scalar":
        t = g._apply(lambda v: v.to(float32._fg).clone(), (x,), "ScalarSummary", name)
        post = _scalar_bytes
    else:
        t = g._apply(lambda v: v.to(float32._fg).reshape(-1), (x,), "HistogramSummary", name)
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
