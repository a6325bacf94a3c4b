"""Drawing captured graphs: Graphviz DOT text, an annotated listing and a self-contained HTML page.

All read only the graph's inspection lists (``inputs()``, ``nodes()``,
``values()``, ``outputs``), so they show exactly what runs. Each node's
``loc`` carries its source line, the module path that recorded it and its
region (forward, backward, optimizer): see :func:`ferrograd._capture.split_location`.

The HTML page is one file that works from ``file://``: the graph as JSON,
the layered layout of dagre (``_vendor/dagre.js``, MIT, inlined) and the
page's own script (``_graphview.js``). The layout runs in the browser, so
that collapsing or expanding a group (a module, a region) lays the graph out
again, as TensorBoard's and Netron's viewers do.
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any

from ._capture import split_location

__all__ = ["annotate_dump", "page_model", "to_dot", "to_html"]

_DTYPE_BYTES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "float32": 4,
    "int64": 8,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
_REGION_TITLE = {"forward": "forward", "backward": "backward (gradients)", "optimizer": "optimizer update"}


def _type(v: dict) -> str:
    return f"{v['dtype']}[{', '.join(str(d) for d in v['shape'])}]"


def _bytes(v: dict) -> int | None:
    n = 1
    for d in v["shape"]:
        s = str(d)
        if not s.isdigit():
            return None
        n *= int(s)
    size = _DTYPE_BYTES.get(v["dtype"])
    return None if size is None else n * size


def _short(attrs: str, limit: int = 60) -> str:
    return attrs if len(attrs) <= limit else attrs[: limit - 1] + "…"


# -- the listing ---------------------------------------------------------------

_NODE_LINE = re.compile(r"^(?P<body>\s+.*\(node \d+\))  # (?P<loc>.*)$")
_INPUT_LINE = re.compile(r"^(?P<body>\s+%(?P<v>\d+): .* = input\((?P<kind>\w+)[^)]*\))$")


def annotate_dump(text: str, names: dict[int, str], types: dict[str, str]) -> str:
    """The core's listing with inputs named (``# 0.weight``) and nodes grouped
    under comment lines naming their region and module."""
    out: list[str] = []
    last: tuple[str, str] | None = None
    for line in text.splitlines():
        m = _INPUT_LINE.match(line)
        if m is not None:
            name = names.get(int(m.group("v")))
            out.append(f"{line}  # {name}" if name and f'"{name}"' not in line else line)
            continue
        m = _NODE_LINE.match(line)
        if m is None:
            out.append(line)
            continue
        source, module, region = split_location(m.group("loc"))
        if (region, module) != last:
            indent = m.group("body")[: len(m.group("body")) - len(m.group("body").lstrip())]
            head = f"{indent}# {region}"
            if module:
                head += f": {module}" + (f" ({types[module]})" if module in types else "")
            out.append(head)
            last = (region, module)
        out.append(f"{m.group('body')}  # {source}" if source else m.group("body"))
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


# -- the model the page draws --------------------------------------------------


def page_model(
    g: Any,
    times: list[float] | None = None,
    names: dict[int, str] | None = None,
    types: dict[str, str] | None = None,
    memory: tuple[list[int], list[int]] | None = None,
) -> dict:
    """The graph as the page's JSON: nodes (inputs and ops, each in a group),
    groups (regions and modules, nested, each collapsed or expanded at first)
    and value edges. ``times`` and ``memory`` (bytes allocated by each node and
    bytes held after it) come from a profiled run."""
    allocated, live = memory if memory is not None else (None, None)
    names = names or {}
    types = types or {}
    values = g.values()
    g_nodes = g.nodes()
    groups: dict[str, dict] = {}

    def group(region: str, module: str) -> str | None:
        """The id of the group of (region, module), made with its ancestors."""
        gid = region
        if gid not in groups:
            groups[gid] = {
                "id": gid,
                "parent": None,
                "label": _REGION_TITLE[region],
                "kind": "region",
                "type": "",
                # the forward pass is open at first; the backward pass and the update are one box each
                "open": region == "forward",
            }
        if not module:
            return gid
        parts = module.split(".")
        for k in range(len(parts)):
            path = ".".join(parts[: k + 1])
            child = f"{region}/{path}"
            if child not in groups:
                cls = types.get(path, "")
                groups[child] = {
                    "id": child,
                    "parent": gid,
                    "label": path,
                    "kind": "module",
                    "type": cls,
                    # containers (ModuleList, Sequential) are open: their members show as boxes
                    "open": cls in _CONTAINERS,
                }
            gid = child
        return gid

    nodes: list[dict] = []
    producer: dict[int, int] = {}
    consumers: dict[int, list[int]] = {}
    op_nodes: list[dict] = []
    for i, n in enumerate(g_nodes):
        source, module, region = split_location(n["loc"])
        outs = [values[o] for o in n["outputs"]]
        b = [_bytes(v) for v in outs]
        op_nodes.append(
            {
                "id": f"n{i}",
                "index": i,
                "kind": "op",
                "label": n["op"],
                "attrs": n["attrs"],
                "effect": n["effect"],
                "fused": n["op"] == "fused",
                "ins": [_type(values[v]) for v in n["inputs"]],
                "outs": [_type(v) for v in outs],
                "source": source,
                "module": module,
                "moduleType": types.get(module, ""),
                "region": region,
                "group": group(region, module),
                "time": times[i] if times is not None and i < len(times) else None,
                "bytes": None if any(x is None for x in b) else sum(x for x in b if x is not None),
                "allocated": allocated[i] if allocated is not None and i < len(allocated) else None,
                "live": live[i] if live is not None and i < len(live) else None,
            }
        )
        for v in n["inputs"]:
            consumers.setdefault(v, []).append(i)
    copies: dict[tuple[int, str | None], int] = {}  # (constant, group) -> its node there
    for k, inp in enumerate(g.inputs()):
        v = inp["value"]
        kind = inp["kind"]
        name = inp.get("name") or names.get(v)
        if not name:
            name = f"input {inp['position']}" if kind == "arg" else f"{kind} %{v}"
        users = consumers.get(v, [])
        if kind == "const" and users:
            # a constant is drawn beside each group that reads it (the causal
            # mask in every attention block), not once with edges across the page
            where = list(dict.fromkeys(op_nodes[u]["group"] for u in users))
        elif kind == "ref" and users:
            # a parameter or state tensor sits with its first use; the optimizer's
            # state (two moments per parameter) in a group of its own inside the update
            first = op_nodes[users[0]]
            where = [first["group"] if first["region"] != "optimizer" else group("optimizer", "") + "/state"]
            if where[0] == "optimizer/state" and where[0] not in groups:
                groups[where[0]] = {
                    "id": where[0],
                    "parent": "optimizer",
                    "label": "optimizer state",
                    "kind": "state",
                    "type": "",
                    "open": False,
                }
        else:
            where = [_common_group([op_nodes[u]["group"] for u in users], groups)]
        for j, gid in enumerate(where):
            if kind == "const":
                copies[(v, gid)] = len(nodes)
            nodes.append(_input_node(f"i{k}" if j == 0 else f"i{k}.{j}", kind, name, values[v], gid))
        producer[v] = len(nodes) - len(where)
    base = len(nodes)
    for i, n in enumerate(g_nodes):
        for o in n["outputs"]:
            producer[o] = base + i
    nodes.extend(op_nodes)
    edges = []
    for i, n in enumerate(g_nodes):
        froms = []
        for v in n["inputs"]:
            src = copies.get((v, op_nodes[i]["group"]), producer.get(v))
            if src is not None:
                edges.append({"from": src, "to": base + i, "type": _type(values[v])})
                p = nodes[src]
                froms.append(p["label"] if p["kind"] != "op" else f"{p['label']} (node {p['index']})")
            else:
                froms.append("")
        op_nodes[i]["from"] = froms
    outputs = [producer[o] for o in g.outputs if o in producer]
    if [k for k, gr in groups.items() if gr["kind"] == "region"] == ["forward"]:
        # a graph with no backward pass or update: no box around the whole of it
        del groups["forward"]
        for gr in groups.values():
            if gr["parent"] == "forward":
                gr["parent"] = None
        for n in nodes:
            if n["group"] == "forward":
                n["group"] = None
    _drop_empty_groups(groups, nodes)
    return {
        "nodes": nodes,
        "edges": edges,
        "groups": list(groups.values()),
        "outputs": outputs,
        "profiled": times is not None,
        "total": sum(times) if times is not None else None,
        "measuredBytes": allocated is not None,
        "peakLive": max(live, default=0) if live is not None else None,
    }


def _input_node(nid: str, kind: str, name: str, v: dict, gid: str | None) -> dict:
    return {
        "id": nid,
        "kind": kind,
        "label": name,
        "attrs": "",
        "effect": "",
        "fused": False,
        "ins": [],
        "outs": [_type(v)],
        "source": None,
        "module": "",
        "moduleType": "",
        "region": "",
        "group": gid,
        "time": None,
        "bytes": _bytes(v),
        "allocated": None,
        "live": None,
    }


def _common_group(gids: list[str | None], groups: dict[str, dict]) -> str | None:
    """The innermost group holding all of ``gids`` (None: the top level)."""
    if not gids:
        return None

    def chain(gid: str | None) -> list[str]:
        out = []
        while gid is not None:
            out.append(gid)
            gid = groups[gid]["parent"]
        return out[::-1]

    common = chain(gids[0])
    for gid in gids[1:]:
        c = chain(gid)
        k = 0
        while k < min(len(common), len(c)) and common[k] == c[k]:
            k += 1
        common = common[:k]
    return common[-1] if common else None


def _drop_empty_groups(groups: dict[str, dict], nodes: list[dict]) -> None:
    """Fold away a group whose only content is one child group (``h`` of
    ``h.0`` when only block 0 ran): its child takes its place."""
    changed = True
    while changed:
        changed = False
        members: dict[str | None, int] = {}
        for n in nodes:
            members[n["group"]] = members.get(n["group"], 0) + 1
        for gr in groups.values():
            members[gr["parent"]] = members.get(gr["parent"], 0) + 1
        for gid, gr in list(groups.items()):
            if gr["kind"] == "module" and members.get(gid, 0) == 1:
                kids = [c for c in groups.values() if c["parent"] == gid]
                if len(kids) == 1:
                    kids[0]["parent"] = gr["parent"]
                    del groups[gid]
                    changed = True
                    break


# -- Graphviz ------------------------------------------------------------------


def to_dot(
    g: Any,
    times: list[float] | None = None,
    names: dict[int, str] | None = None,
    types: dict[str, str] | None = None,
    memory: tuple[list[int], list[int]] | None = None,
) -> str:
    """The graph in Graphviz DOT: inputs, nodes (op, output types, source line),
    typed edges, one cluster per region and module.

    Edge types are external labels (``xlabel``), placed after the layout: as
    ordinary labels each would be a node of its own in ``dot``'s ranking, which
    made a GPT training step take over 30 s to lay out instead of about 5.
    Graphs of more than 150 nodes also bound ``dot``'s crossing-reduction
    passes (``mclimit``)."""
    m = page_model(g, times, names, types, memory)

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    lines = [
        "digraph ferrograd {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    if sum(1 for n in m["nodes"] if n["kind"] == "op") > 150:
        lines.append("  mclimit=0.5;")
    kids: dict[str | None, list[str]] = {}
    for gr in m["groups"]:
        kids.setdefault(gr["parent"], []).append(gr["id"])
    members: dict[str | None, list[int]] = {}
    for k, n in enumerate(m["nodes"]):
        members.setdefault(n["group"], []).append(k)
    gindex = {gr["id"]: k for k, gr in enumerate(m["groups"])}

    def emit(gid: str | None, indent: str) -> None:
        for k in members.get(gid, []):
            n = m["nodes"][k]
            label = n["label"]
            if n["attrs"]:
                label += "\n" + _short(n["attrs"], 40)
            label += "\n" + ", ".join(n["outs"][:2])
            if n["source"]:
                label += "\n" + n["source"]
            if n["time"] is not None:
                label += f"\n{n['time'] * 1e3:.3f} ms"
            if n["allocated"]:
                label += f", {_mib(n['allocated'])}"
            shape = "box" if n["kind"] == "op" else "ellipse"
            fill = "#dff3ff" if n["fused"] else ("#ffffff" if n["kind"] == "op" else "#d8ecff")
            lines.append(f"{indent}{n['id']} [label={q(label)}, shape={shape}, fillcolor={q(fill)}];")
        for child in kids.get(gid, []):
            gr = m["groups"][gindex[child]]
            title = gr["label"] + (f" ({gr['type']})" if gr["type"] else "")
            lines.append(f"{indent}subgraph cluster_{gindex[child]} {{")
            lines.append(f'{indent}  label={q(title)}; style=rounded; color="#999999";')
            emit(child, indent + "  ")
            lines.append(f"{indent}}}")

    emit(None, "  ")
    for e in m["edges"]:
        a, b = m["nodes"][e["from"]]["id"], m["nodes"][e["to"]]["id"]
        lines.append(f"  {a} -> {b} [xlabel={q(e['type'])}, fontsize=9];")
    for k, b in enumerate(m["outputs"]):
        lines.append(f'  out{k} [label="output {k}", shape=plaintext];')
        lines.append(f"  {m['nodes'][b]['id']} -> out{k};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- the page ------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _asset(*parts: str) -> str:
    with open(os.path.join(_HERE, *parts), encoding="utf-8") as f:
        return f.read()


def _script(js: str) -> str:
    """JavaScript safe to inline in a classic ``<script>`` element."""
    return js.replace("</", "<\\/")


def to_html(
    g: Any,
    path: str | None = None,
    times: list[float] | None = None,
    title: str = "ferrograd graph",
    names: dict[int, str] | None = None,
    types: dict[str, str] | None = None,
    memory: tuple[list[int], list[int]] | None = None,
) -> str:
    """A self-contained HTML page drawing the graph (see the module's doc);
    written to ``path`` if given. Returns the page."""
    m = page_model(g, times, names, types, memory)
    m["title"] = title
    # dagre.js is an ES module ending in one export statement; inlined as a classic script
    dagre = re.sub(r"^export const \{[^}]*\} = dagre;\s*$", "", _asset("_vendor", "dagre.js"), flags=re.M)
    data = json.dumps(m, separators=(",", ":")).replace("</", "<\\/")
    e = html.escape
    summary = f"{len(g.inputs())} inputs, {g.num_nodes} nodes, {len(g.outputs)} outputs"
    if times is not None:
        summary += f"; profiled run: {sum(times) * 1e3:.3f} ms in nodes"
    if memory is not None:
        summary += f", {_mib(sum(memory[0]))} allocated, at most {_mib(max(memory[1], default=0))} held"
    rows = "\n".join(
        f"<tr><td>{n['index']}</td><td>{e(n['label'])}</td><td><code>{e(n['attrs'])}</code></td>"
        f"<td>{e(', '.join(n['outs']))}</td><td>{e(n['region'])} {e(n['module'])}</td>"
        f"<td>{e(n['source'] or '')}</td><td>{_ms(n['time'])}</td></tr>"
        for n in m["nodes"]
        if n["kind"] == "op"
    )
    page = _PAGE.format(
        rows=rows,
        title=e(title),
        summary=e(summary),
        css=_asset("_graphview.css"),
        data=data,
        dagre=_script(dagre),
        script=_script(_asset("_graphview.js")),
    )
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    return page


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{css}</style></head><body>
<header><h1>{title}</h1><span class="summary">{summary}</span>
<span class="tools"><button id="fit" type="button">fit</button><button id="collapse" type="button">collapse all</button>
<button id="expand" type="button">expand all</button></span>
<span class="legend" id="legend"></span></header>
<main><div id="canvas"><svg id="graph" xmlns="http://www.w3.org/2000/svg"><g id="viewport"></g></svg></div>
<aside><div id="panel"><p class="hint">Click a node for its details; click a box with a ▸ to open it, the ▾ of an
open group to close it. Drag to pan, wheel to zoom.</p></div>
<details id="all"><summary>every node as a table</summary><table><tr><th>node</th><th>op</th><th>attributes</th>
<th>types</th><th>module</th><th>source</th><th>time</th></tr>
{rows}</table></details></aside></main>
<script id="graph-data" type="application/json">{data}</script>
<script>{dagre}</script>
<script>{script}</script>
</body></html>
"""


def _mib(b: int) -> str:
    return f"{b / 2**20:.2f} MiB" if b >= 2**20 else f"{b / 1024:.1f} KiB"


def _ms(t: float | None) -> str:
    return "" if t is None else f"{t * 1e3:.3f} ms"
