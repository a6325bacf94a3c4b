"""Drawing captured graphs: Graphviz DOT text and a self-contained HTML page.

Both read only the graph's inspection lists (``inputs()``, ``nodes()``,
``values()``, ``outputs``), so they show exactly what runs. The HTML page
needs no network and no Graphviz: nodes are laid out in layers by their
depth (longest path from an input) and drawn as inline SVG, with a table
of every node underneath (op, attributes, types, source line and, after
``Graph.profile``, its time).
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["to_dot", "to_html"]

_KIND_COLOR = {"arg": "#d8ecff", "ref": "#fff1c9", "const": "#eeeeee", "grad": "#f5dcff"}
_EFFECT_COLOR = {"pure": "#ffffff", "view": "#eef7ee", "mutates": "#ffe0dc", "random": "#fff6dc"}
_FUSED_COLOR = "#dff3ff"


def _type(v: dict) -> str:
    return f"{v['dtype']}[{', '.join(str(d) for d in v['shape'])}]"


def _short(attrs: str, limit: int = 60) -> str:
    return attrs if len(attrs) <= limit else attrs[: limit - 1] + "…"


def _model(g: Any, times: list[float] | None) -> dict:
    """Boxes and edges of the graph: one box per input and per node."""
    values = g.values()
    boxes: list[dict] = []
    producer: dict[int, int] = {}
    for k, inp in enumerate(g.inputs()):
        name = inp.get("name") or f"{inp['kind']}{k}"
        producer[inp["value"]] = len(boxes)
        boxes.append(
            {
                "id": f"i{k}",
                "title": f"{inp['kind']}: {name}",
                "sub": _type(values[inp["value"]]),
                "fill": _KIND_COLOR.get(inp["kind"], "#ffffff"),
                "ins": [],
                "loc": None,
                "attrs": "",
                "op": inp["kind"],
                "time": None,
                "outs": [inp["value"]],
            }
        )
    for i, n in enumerate(g.nodes()):
        fused = n["op"] == "fused"
        for o in n["outputs"]:
            producer[o] = len(boxes)
        outs = [values[o] for o in n["outputs"]]
        boxes.append(
            {
                "id": f"n{i}",
                "title": n["op"],
                "sub": ", ".join(_type(v) for v in outs[:2]) + (" …" if len(outs) > 2 else ""),
                "fill": _FUSED_COLOR if fused else _EFFECT_COLOR.get(n["effect"], "#ffffff"),
                "ins": list(n["inputs"]),
                "loc": n["loc"],
                "attrs": n["attrs"],
                "op": n["op"],
                "time": times[i] if times is not None and i < len(times) else None,
                "outs": list(n["outputs"]),
                "effect": n["effect"],
            }
        )
    edges = []
    for b, box in enumerate(boxes):
        for v in box["ins"]:
            if v in producer:
                edges.append((producer[v], b, _type(values[v])))
    return {"boxes": boxes, "edges": edges, "outputs": [producer.get(o) for o in g.outputs]}


def to_dot(g: Any, times: list[float] | None = None) -> str:
    """The graph in Graphviz DOT: inputs, nodes (op, output types, source line), typed edges."""
    m = _model(g, times)

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
        "digraph ferrograd {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    for box in m["boxes"]:
        label = box["title"]
        if box["attrs"]:
            label += "\n" + _short(box["attrs"], 40)
        label += "\n" + box["sub"]
        if box["loc"]:
            label += "\n" + box["loc"]
        if box["time"] is not None:
            label += f"\n{box['time'] * 1e3:.3f} ms"
        shape = "ellipse" if box["id"].startswith("i") else "box"
        lines.append(f"  {box['id']} [label={q(label)}, shape={shape}, fillcolor={q(box['fill'])}];")
    for a, b, t in m["edges"]:
        lines.append(f"  {m['boxes'][a]['id']} -> {m['boxes'][b]['id']} [label={q(t)}, fontsize=9];")
    for k, b in enumerate(m["outputs"]):
        if b is not None:
            lines.append(f'  out{k} [label="output {k}", shape=plaintext];')
            lines.append(f"  {m['boxes'][b]['id']} -> out{k};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _layout(m: dict) -> tuple[list[tuple[float, float]], float, float]:
    """Layered positions: a box's layer is one more than its deepest input's."""
    n = len(m["boxes"])
    depth = [0] * n
    for a, b, _ in m["edges"]:  # edges go from earlier to later boxes
        depth[b] = max(depth[b], depth[a] + 1)
    layers: dict[int, list[int]] = {}
    for b in range(n):
        layers.setdefault(depth[b], []).append(b)
    w, h, gx, gy = 190.0, 54.0, 24.0, 46.0
    pos = [(0.0, 0.0)] * n
    width = max((len(v) for v in layers.values()), default=1) * (w + gx) + gx
    for d, row in layers.items():
        off = (width - len(row) * (w + gx) + gx) / 2
        for k, b in enumerate(row):
            pos[b] = (off + k * (w + gx), gy + d * (h + gy))
    height = (max(layers, default=0) + 1) * (h + gy) + gy
    return pos, width, height


def to_html(
    g: Any, path: str | None = None, times: list[float] | None = None, title: str = "ferrograd graph"
) -> str:
    """A self-contained HTML page drawing the graph (inline SVG, no scripts
    from the network) with a table of its nodes; written to ``path`` if given.
    Returns the page."""
    m = _model(g, times)
    pos, width, height = _layout(m)
    w, h = 190.0, 54.0
    e = html.escape
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        'font-family="Helvetica,Arial,sans-serif">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#777"/></marker></defs>',
    ]
    for a, b, t in m["edges"]:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        svg.append(
            f'<line x1="{x1 + w / 2:.1f}" y1="{y1 + h:.1f}" x2="{x2 + w / 2:.1f}" y2="{y2:.1f}" '
            f'stroke="#999" marker-end="url(#arrow)"><title>{e(t)}</title></line>'
        )
    outputs = {b for b in m["outputs"] if b is not None}
    for b, box in enumerate(m["boxes"]):
        x, y = pos[b]
        tip = "\n".join(
            s for s in (box["title"], box["attrs"], box["sub"], box["loc"] or "", _ms(box["time"])) if s
        )
        stroke = "#c0392b" if b in outputs else "#555"
        rx = 24 if box["id"].startswith("i") else 6
        svg.append(f'<g id="{box["id"]}"><title>{e(tip)}</title>')
        svg.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.0f}" height="{h:.0f}" rx="{rx}" '
            f'fill="{box["fill"]}" stroke="{stroke}" stroke-width="{2 if b in outputs else 1}"/>'
        )
        svg.append(
            f'<text x="{x + w / 2:.1f}" y="{y + 20:.1f}" text-anchor="middle" font-size="13" '
            f'font-weight="bold">{e(_short(box["title"], 26))}</text>'
        )
        sub = box["sub"] + (f" · {_ms(box['time'])}" if box["time"] is not None else "")
        svg.append(
            f'<text x="{x + w / 2:.1f}" y="{y + 40:.1f}" text-anchor="middle" font-size="10">{e(_short(sub, 34))}</text>'
        )
        svg.append("</g>")
    svg.append("</svg>")
    rows = []
    for box in m["boxes"]:
        if not box["id"].startswith("n"):
            continue
        rows.append(
            "<tr>"
            f"<td>{e(box['id'][1:])}</td><td>{e(box['op'])}</td><td><code>{e(box['attrs'])}</code></td>"
            f"<td>{e(', '.join('%' + str(v) for v in box['ins']))}</td>"
            f"<td>{e(', '.join('%' + str(v) for v in box['outs']))}</td>"
            f"<td>{e(box['sub'])}</td><td>{e(box.get('effect', ''))}</td><td>{e(box['loc'] or '')}</td>"
            f"<td>{e(_ms(box['time']))}</td></tr>"
        )
    total = sum(b["time"] for b in m["boxes"] if b["time"] is not None)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 12px; margin-top: 1.5em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }}
th {{ background: #f2f2f2; }}
code {{ font-size: 11px; white-space: pre-wrap; word-break: break-all; }}
.legend span {{ display: inline-block; padding: 2px 8px; margin-right: 6px; border: 1px solid #999; border-radius: 4px; }}
.scroll {{ overflow: auto; border: 1px solid #ddd; max-height: 80vh; }}
</style></head><body>
<h1>{e(title)}</h1>
<p>{len(g.inputs())} inputs, {g.num_nodes} nodes, {len(g.outputs)} outputs{
        f"; profiled run: {total * 1e3:.3f} ms in nodes" if times is not None else ""
    }.</p>
<p class="legend"><span style="background:{_KIND_COLOR["arg"]}">argument</span><span
style="background:{_KIND_COLOR["ref"]}">captured tensor</span><span style="background:{
        _KIND_COLOR["const"]
    }">constant</span><span
style="background:{_FUSED_COLOR}">fused kernel</span><span style="background:{
        _EFFECT_COLOR["view"]
    }">view</span><span
style="background:{_EFFECT_COLOR["mutates"]}">in-place write</span><span style="background:{
        _EFFECT_COLOR["random"]
    }">random</span><span
style="border:2px solid #c0392b">output</span></p>
<div class="scroll">{"".join(svg)}</div>
<table><tr><th>node</th><th>op</th><th>attributes</th><th>inputs</th><th>outputs</th><th>types</th><th>effect</th>
<th>source</th><th>time</th></tr>
{"".join(rows)}
</table></body></html>
"""
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    return page


def _ms(t: float | None) -> str:
    return "" if t is None else f"{t * 1e3:.3f} ms"
