"""TensorBoard logs: captured graphs and scalars, in TensorBoard's own event format.

::

    writer = fg.tensorboard.SummaryWriter("runs/exp1")
    writer.add_graph(step.graph(x, y))      # a captured graph: the Graphs tab
    for i, loss in enumerate(losses):
        writer.add_scalar("loss", loss, i)  # the Scalars tab
    writer.close()

Needs the ``tensorboard`` package (its protocol buffers and event-file
writer); without it, creating a writer raises ``ImportError`` saying so.
Graph nodes are named by op and number (``linear_3``) under name scopes
that TensorBoard draws as boxes that open: the module that recorded them
(``h/0/attn/c_attn/linear_8``, as ``named_modules()`` names it), inside
``backward/`` and ``optimizer/`` for the gradient and update parts of a
training step. Parameters sit in their module's scope under their
``state_dict`` names (``h/0/attn/c_attn/weight``); optimizer state in
``optimizer/``. Nodes carry their attributes, source line (``source``),
output shapes (``_output_shapes``) and dtypes; fused kernels list their ops.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

__all__ = ["SummaryWriter"]

_TF_DTYPE = {
    "bool": 10,  # DT_BOOL
    "uint8": 4,
    "int8": 6,
    "int16": 5,
    "int32": 3,
    "int64": 9,
    "float16": 19,
    "bfloat16": 14,
    "float32": 1,
    "float64": 2,
}


def _clean(name: str) -> str:
    """A name TensorBoard accepts as one path component."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name) or "_"


def _scope(module: str, region: str) -> str:
    """``backward/h/0/attn/`` for a module path and region (``""`` at the top of the forward pass)."""
    parts = [] if region == "forward" else [region]
    parts += [_clean(p) for p in module.split(".") if p]
    return "".join(p + "/" for p in parts)


class SummaryWriter:
    """Writes TensorBoard event files under ``log_dir`` (``add_graph``,
    ``add_scalar``, ``flush``, ``close``; also a context manager)."""

    def __init__(self, log_dir: str | os.PathLike[str] = "runs", flush_secs: int = 10) -> None:
        try:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as e:
            raise ImportError("fg.tensorboard needs the tensorboard package: pip install tensorboard") from e
        self.log_dir = os.fspath(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        self._w = EventFileWriter(self.log_dir, flush_secs=flush_secs)

    def add_scalar(
        self, tag: str, value: Any, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        """Log one scalar (a number or a one-element tensor) under ``tag`` at ``global_step``."""
        from tensorboard.compat.proto import event_pb2, summary_pb2

        v = float(value.item() if hasattr(value, "item") else value)
        summ = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=v)])
        ev = event_pb2.Event(wall_time=walltime or time.time(), step=int(global_step or 0), summary=summ)
        self._w.add_event(ev)

    def add_graph(self, graph: Any) -> None:
        """Log a captured graph (an ``fg.Graph``: ``compiled.graph(*args)``,
        an explicit graph, or a loaded one) for TensorBoard's Graphs tab."""
        from tensorboard.compat.proto import (
            attr_value_pb2,
            event_pb2,
            graph_pb2,
            node_def_pb2,
            tensor_shape_pb2,
            versions_pb2,
        )

        from ._capture import split_location

        g = graph._built() if hasattr(graph, "_built") else graph
        known = graph._input_names() if hasattr(graph, "_input_names") else {}
        values = g.values()
        names: dict[int, str] = {}
        g_nodes = g.nodes()
        first_use: dict[int, tuple[str, str]] = {}
        for n in g_nodes:
            _, module, region = split_location(n["loc"])
            for v in n["inputs"]:
                first_use.setdefault(v, (module, region))

        def shape_proto(v: int) -> Any:
            dims = []
            for d in values[v]["shape"]:
                s = str(d)
                dims.append(
                    tensor_shape_pb2.TensorShapeProto.Dim(size=int(s))
                    if s.isdigit()
                    else tensor_shape_pb2.TensorShapeProto.Dim(size=-1, name=s)
                )
            return tensor_shape_pb2.TensorShapeProto(dim=dims)

        def attrs_for(outs: list[int], extra: dict[str, str]) -> dict[str, Any]:
            a = {
                "_output_shapes": attr_value_pb2.AttrValue(
                    list=attr_value_pb2.AttrValue.ListValue(shape=[shape_proto(o) for o in outs])
                )
            }
            if outs:
                a["dtype"] = attr_value_pb2.AttrValue(type=_TF_DTYPE.get(values[outs[0]]["dtype"], 0))
            for k, v in extra.items():
                a[k] = attr_value_pb2.AttrValue(s=v.encode())
            return a

        nodes = []
        for inp in g.inputs():
            v = inp["value"]
            kind = inp["kind"]
            label = inp.get("name") or known.get(v)
            if kind == "arg":
                name = "inputs/" + _clean(label or f"input{inp['position']}")
            elif label:
                # a parameter in its module's scope (h/0/attn/c_attn/weight); other
                # named state (optimizer moments) where it is first used
                module, region = first_use.get(v, ("", "forward"))
                leaf = label[len(module) + 1 :] if module and label.startswith(module + ".") else label
                name = _scope(module, region) + _clean(leaf)
            else:
                name = f"state/{kind}{v}"
            names[v] = name
            nodes.append(
                node_def_pb2.NodeDef(
                    name=name,
                    op="Placeholder" if kind == "arg" else ("VariableV2" if kind == "ref" else "Const"),
                    attr=attrs_for([v], {}),
                )
            )
        for i, n in enumerate(g_nodes):
            source, module, region = split_location(n["loc"])
            name = f"{_scope(module, region)}{n['op']}_{i}"
            extra = {"attrs": n["attrs"] or "", "effect": n["effect"]}
            if source:
                extra["source"] = source
            if module:
                extra["module"] = module
            nodes.append(
                node_def_pb2.NodeDef(
                    name=name,
                    op=n["op"],
                    input=[names[v] for v in n["inputs"] if v in names],
                    attr=attrs_for(list(n["outputs"]), extra),
                )
            )
            for k, o in enumerate(n["outputs"]):
                names[o] = name if k == 0 else f"{name}:{k}"
        for k, v in enumerate(g.outputs):
            nodes.append(node_def_pb2.NodeDef(name=f"outputs/output{k}", op="Identity", input=[names[v]]))
        gd = graph_pb2.GraphDef(node=nodes, versions=versions_pb2.VersionDef(producer=22))
        self._w.add_event(event_pb2.Event(wall_time=time.time(), graph_def=gd.SerializeToString()))

    def flush(self) -> None:
        """Write buffered events to disk."""
        self._w.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._w.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
