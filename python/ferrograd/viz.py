"""Visualising the autograd graph behind a tensor (Graphviz DOT)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from . import _core

__all__ = ["dot", "render"]


def _fmt_shape(s) -> str:
    return "(" + ", ".join(str(d) for d in s) + ")"


def dot(tensor: _core.Tensor, params: dict[str, Any] | None = None) -> str:
    """Graphviz DOT text of the backward graph that produced ``tensor``.

    Op nodes show their name and output shapes; leaves show as blue boxes,
    labelled with their name when ``params`` (e.g. ``dict(model.named_parameters())``)
    contains them; the output is drawn in green.
    """
    names = {}
    shapes = {}
    for name, p in (params or {}).items():
        if p._autograd_id:
            names[p._autograd_id] = name
            shapes[p._autograd_id] = tuple(p.shape)
    lines = [
        "digraph autograd {",
        '  node [fontname="Helvetica", fontsize=10, style=filled, fillcolor=white, shape=box];',
        "  rankdir=BT;",
    ]
    out_id = "out"
    lines.append(
        f'  {out_id} [label="output\\n{_fmt_shape(tensor.shape)} {tensor.dtype.name}", fillcolor="#c8f0c8"];'
    )
    root = tensor.grad_fn
    if root is None:
        lines.append("}")
        return "\n".join(lines)
    seen: set[int] = set()
    stack = [root]
    lines.append(f"  n{root._id} -> {out_id};")
    while stack:
        n = stack.pop()
        if n._id in seen:
            continue
        seen.add(n._id)
        if n.name() == "AccumulateGrad":
            label = names.get(n._id, "leaf")
            shape = shapes.get(n._id)
            extra = f"\\n{_fmt_shape(shape)}" if shape else ""
            lines.append(f'  n{n._id} [label="{label}{extra}", fillcolor="#c8dcf0"];')
        else:
            outs = ", ".join(_fmt_shape(s) for s in n.output_shapes)
            lines.append(f'  n{n._id} [label="{n.name()}\\n{outs}"];')
        for child, _ in n.next_functions:
            if child is None:
                continue
            lines.append(f"  n{child._id} -> n{n._id};")
            stack.append(child)
    lines.append("}")
    return "\n".join(lines)


def render(tensor: _core.Tensor, path: str, params: dict[str, Any] | None = None) -> str:
    """Write the graph as SVG or PNG (by ``path``'s extension); needs the ``graphviz`` package and ``dot``."""
    try:
        import graphviz  # noqa: PLC0415
    except ImportError as e:
        raise RuntimeError(
            "viz.render needs the Python package 'graphviz' (pip install graphviz); viz.dot() works without it"
        ) from e
    if shutil.which("dot") is None:
        raise RuntimeError(
            "viz.render needs the Graphviz 'dot' program on PATH (e.g. apt-get install graphviz); "
            "viz.dot() works without it"
        )
    base, ext = os.path.splitext(path)
    fmt = ext.lstrip(".") or "svg"
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(f"viz.render: unsupported format {fmt!r}; use .svg, .png or .pdf")
    src = graphviz.Source(dot(tensor, params))
    return src.render(base, format=fmt, cleanup=True)
