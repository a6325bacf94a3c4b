"""``Graph.to_html`` opened in a real browser (headless Chromium).

For the README's ``train_step`` and the W6 GPT training step (the model of
``benches/workloads_train.py``), the page is loaded from ``file://`` and
its DOM, after the page's own script has laid the graph out, is checked:
no box overlaps another, every box sits inside the group drawn around it,
every edge starts and ends on the boundary of a drawn box, the drawing with
its groups closed fits a 1600 px wide window, the slowest box is the
reddest, the GPT step shows its four blocks, embeddings, head, backward
pass and optimizer as closed boxes, and a block opens to its attention and
MLP. Screenshots (and the pages) are written to ``target/graph-view/``
(``FG_GRAPH_VIEW_DIR`` elsewhere).

Needs Debian's ``chromium`` (``.ci/run`` installs it): skipped without it,
except in CI (``CI`` set), where a missing browser fails the test.
"""

from __future__ import annotations

import html.parser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import pytest

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 1600
_NOT_CI = ("", "0", "false", "no", "off")  # CI values that mean no CI, as tests/conftest.py reads them


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no chromium on PATH (apt-get install chromium): the graph view is not checked in a browser"
    if os.environ.get("CI", "").strip().lower() not in _NOT_CI:
        pytest.fail(f"{reason} — CI must run this test (.ci/run installs chromium)")
    print(f"\nskipped: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def out_dir() -> Path:
    d = Path(os.environ.get("FG_GRAPH_VIEW_DIR", ROOT / "target" / "graph-view"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _browse(page: Path, fragment: str, tmp: Path, screenshot: Path | None = None) -> str:
    """The page's DOM after its scripts ran (and a screenshot if asked), in a 1600 px wide window."""
    exe = _chromium()
    args = [
        exe,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",  # containers with a small /dev/shm
        "--hide-scrollbars",
        "--no-first-run",
        "--allow-file-access-from-files",
        f"--user-data-dir={tmp / 'profile'}",
        f"--window-size={WIDTH},1000",
    ]
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    if screenshot is not None:
        r = subprocess.run([*args, f"--screenshot={screenshot}", url], capture_output=True, timeout=120)
        assert screenshot.exists() and screenshot.stat().st_size > 10_000, r.stderr.decode()[-2000:]
    r = subprocess.run([*args, "--dump-dom", url], capture_output=True, timeout=120)
    dom = r.stdout.decode()
    assert r.returncode == 0 and "</svg>" in dom, r.stderr.decode()[-2000:]
    return dom


class _Drawing(html.parser.HTMLParser):
    """Boxes (nodes), groups (clusters) and edges of the page's SVG."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, dict] = {}
        self.clusters: dict[str, dict] = {}
        self.edges: list[dict] = []
        self.svg: dict[str, str] = {}
        self.panel: list[str] = []
        self._open: dict | None = None
        self._in_panel = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "svg" and a.get("id") == "graph":
            self.svg = a
        elif tag == "g" and ("node" in cls or "cluster" in cls):
            item = {"id": a["data-id"], "parent": a.get("data-parent", ""), "class": cls, "attrs": a}
            (self.nodes if "node" in cls else self.clusters)[a["data-id"]] = item
            self._open = item
        elif tag == "rect" and self._open is not None and "rect" not in self._open:
            self._open["rect"] = tuple(float(a[k]) for k in ("x", "y", "width", "height"))
            self._open["fill"] = a.get("fill", "")
            self._open = None
        elif tag == "path" and "edge" in cls:
            pts = [tuple(float(c) for c in p.split(",")) for p in a["data-points"].split()]
            self.edges.append({"from": a["data-from"], "to": a["data-to"], "points": pts})
        if tag == "div" and a.get("id") == "panel":
            self._in_panel = 1
        elif self._in_panel and tag == "div":
            self._in_panel += 1

    def handle_endtag(self, tag: str) -> None:
        if self._in_panel and tag == "div":
            self._in_panel -= 1

    def handle_data(self, data: str) -> None:
        if self._in_panel:
            self.panel.append(data)


def _drawing(dom: str) -> _Drawing:
    d = _Drawing()
    d.feed(dom)
    assert d.nodes, "the page drew no boxes"
    return d


def _overlap(a: tuple, b: tuple) -> float:
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return min(w, h)


def _on_boundary(p: tuple, r: tuple, tol: float = 1.5) -> bool:
    x, y = p
    inside = r[0] - tol <= x <= r[0] + r[2] + tol and r[1] - tol <= y <= r[1] + r[3] + tol
    near = min(abs(x - r[0]), abs(x - r[0] - r[2]), abs(y - r[1]), abs(y - r[1] - r[3])) <= tol
    return inside and near


def _check_geometry(d: _Drawing) -> None:
    """No two boxes overlap; boxes and groups sit inside their group; edges end on boxes."""
    boxes = list(d.nodes.values())
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert _overlap(a["rect"], b["rect"]) <= 0.5, f"{a['id']} overlaps {b['id']}"
    for item in [*boxes, *d.clusters.values()]:
        if item["parent"]:
            assert item["parent"] in d.clusters, f"{item['id']}: its group {item['parent']} is not drawn"
            outer, inner = d.clusters[item["parent"]]["rect"], item["rect"]
            assert outer[0] <= inner[0] + 0.5 and inner[0] + inner[2] <= outer[0] + outer[2] + 0.5, item["id"]
            assert outer[1] <= inner[1] + 0.5 and inner[1] + inner[3] <= outer[1] + outer[3] + 0.5, item["id"]
    # Sibling groups do not overlap either.
    cl = list(d.clusters.values())
    for i, a in enumerate(cl):
        for b in cl[i + 1 :]:
            if a["parent"] == b["parent"]:
                assert _overlap(a["rect"], b["rect"]) <= 0.5, f"group {a['id']} overlaps {b['id']}"
    assert d.edges, "no edges drawn"
    for e in d.edges:
        assert e["from"] in d.nodes and e["to"] in d.nodes, f"edge {e} does not join two drawn boxes"
        assert _on_boundary(e["points"][0], d.nodes[e["from"]]["rect"]), f"edge {e} does not start on its box"
        assert _on_boundary(e["points"][-1], d.nodes[e["to"]]["rect"]), f"edge {e} does not end on its box"


def _check_heat(d: _Drawing) -> None:
    """The box with the most time is drawn in the darkest (reddest) fill."""
    timed = [n for n in d.nodes.values() if n["attrs"].get("data-time")]
    assert timed, "no box carries a measured time"
    light = {n["id"]: int(re.search(r"(\d+)%\)$", n["fill"]).group(1)) for n in timed}
    slowest = max(timed, key=lambda n: float(n["attrs"]["data-time"]))
    assert light[slowest["id"]] == min(light.values()), (slowest["id"], light)


def _fits(d: _Drawing) -> float:
    w = float(d.svg["data-layout-width"])
    assert w <= WIDTH, f"the drawing with its groups closed is {w:.0f} px wide"
    return w


def readme_step():
    """The README's training step (its model, optimizer and train_step)."""
    fg.manual_seed(0)
    x, y = fg.randn(256, 64), fg.randint(0, 10, (256,))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = fg.optim.Adam(model.parameters(), lr=2e-3)

    @fg.compile
    def train_step(xb, yb):
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return train_step, (x[:64], y[:64])


def gpt_step():
    """W6's GPT training step (benches/workloads_train.py: 4 blocks of width 256, AdamW), batch 2."""
    spec = importlib.util.spec_from_file_location("workloads_train", ROOT / "benches" / "workloads_train.py")
    wt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wt)
    model = wt._loaded(fg, wt.gpt_model, wt.gpt_params())
    opt = fg.optim.AdamW(
        model.parameters(), lr=wt.ADAMW_LR, betas=wt.ADAMW_BETAS, eps=wt.ADAMW_EPS, weight_decay=wt.ADAMW_WD
    )
    loss_of = wt._gpt_loss(fg)

    @fg.compile
    def train(x, y):
        opt.zero_grad()
        value = loss_of(model(x), y)
        value.backward()
        opt.step()
        return value

    x, y = (fg.from_numpy(a) for a in wt.gpt_data(n=1, batch=2)[0])
    return train, (x, y)


def test_readme_train_step_in_chromium(out_dir, tmp_path):
    _chromium()
    t0 = time.perf_counter()
    step, args = readme_step()
    g = step.graph(*args)
    g.profile(*args)
    page = out_dir / "readme_train_step.html"
    g.to_html(str(page), title="README train_step")
    d = _drawing(_browse(page, "", tmp_path, out_dir / "readme_train_step.png"))
    _check_geometry(d)
    _check_heat(d)
    w = _fits(d)
    ids = set(d.nodes)
    # The model's three layers, the backward pass and the update are closed boxes.
    for gid in ("forward/0", "forward/1", "forward/2", "backward", "optimizer"):
        assert f"g:{gid}" in ids, (gid, sorted(ids))
    # Inputs sit beside their first use (parameters inside their layer's box), not in a row of sixteen.
    assert sum(1 for n in d.nodes.values() if "arg" in n["class"] or "ref" in n["class"]) == 2
    rows: dict[float, int] = {}
    for n in d.nodes.values():
        rows[round(n["rect"][1])] = rows.get(round(n["rect"][1]), 0) + 1
    assert max(rows.values()) <= 3, rows
    # A node's panel: its shapes, source line, module and measured time.
    lin = next(i for i, n in enumerate(_page_nodes(page)) if n["kind"] == "op" and n["label"] == "linear")
    panel = " ".join(_drawing(_browse(page, f"select={lin}", tmp_path)).panel)
    for want in ("float32[64, 128]", "test_graph_view_browser.py:", "0 (Linear)", "forward", " ms"):
        assert want in panel, (want, panel)
    # Every group open: the backward pass's 14 ops and the update drawn without overlaps.
    d2 = _drawing(_browse(page, "expand=all", tmp_path, out_dir / "readme_train_step_open.png"))
    _check_geometry(d2)
    assert len(d2.nodes) == len(_page_nodes(page))
    print(f"\nREADME train_step: {len(ids)} boxes, {w:.0f} px wide, {time.perf_counter() - t0:.1f} s")


def test_gpt_step_in_chromium(out_dir, tmp_path):
    _chromium()
    t0 = time.perf_counter()
    step, args = gpt_step()
    g = step.graph(*args)
    g.profile(*args)
    page = out_dir / "w6_gpt_step.html"
    g.to_html(str(page), title="W6 GPT training step")
    d = _drawing(_browse(page, "", tmp_path, out_dir / "w6_gpt_step.png"))
    _check_geometry(d)
    _check_heat(d)
    w = _fits(d)
    ids = set(d.nodes)
    # Four closed blocks, the embeddings, the head, the backward pass and the optimizer.
    closed = {"forward/h.0", "forward/h.1", "forward/h.2", "forward/h.3", "forward/wte", "forward/wpe"}
    closed |= {"forward/lm_head", "backward", "optimizer"}
    for gid in closed:
        assert f"g:{gid}" in ids, (gid, sorted(ids))
    assert not any(i.startswith("g:forward/h.0.") for i in ids)  # nothing of a closed block shows
    assert len(ids) <= 25, sorted(ids)
    # Block 0 opened: its attention and MLP (closed), inside the block's group.
    d0 = _drawing(_browse(page, "expand=forward/h.0", tmp_path, out_dir / "w6_gpt_step_block0.png"))
    _check_geometry(d0)
    for gid in ("forward/h.0.attn", "forward/h.0.mlp", "forward/h.0.ln_1", "forward/h.0.ln_2"):
        assert f"g:{gid}" in d0.nodes, (gid, sorted(d0.nodes))
        assert d0.nodes[f"g:{gid}"]["parent"] == "c:forward/h.0"
    assert "g:forward/h.1" in d0.nodes
    # Attention opened too: its ops, the causal mask beside them.
    d1 = _drawing(_browse(page, "expand=forward/h.0.attn", tmp_path))
    _check_geometry(d1)
    inside = [n for n in d1.nodes.values() if n["parent"] == "c:forward/h.0.attn"]
    labels = {_page_nodes(page)[int(n["id"][1:])]["label"] for n in inside if n["id"].startswith("n")}
    assert {"softmax", "matmul"} <= labels, labels
    # Every group open (all 324 nodes and 167 inputs): still no overlap, every edge on its boxes.
    d2 = _drawing(_browse(page, "expand=all", tmp_path))
    _check_geometry(d2)
    assert not any(i.startswith("g:") for i in d2.nodes)
    assert sum(1 for i in d2.nodes if i.startswith("n")) == len(_page_nodes(page))
    print(
        f"\nW6 GPT step: {g.num_nodes} nodes in {len(ids)} boxes, {w:.0f} px wide, {time.perf_counter() - t0:.1f} s"
    )


def _page_nodes(page: Path) -> list[dict]:
    text = page.read_text(encoding="utf-8")
    m = re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))["nodes"]


# A script the test appends to a copy of the page: after the page's own script has
# drawn the graph, it drives the page with real DOM events (clicks on a closed
# group, on its title, on an op box, on "fit"; a wheel turn; a mouse drag) and
# writes what each did into <pre id="interaction">, which the dumped DOM carries.
_INTERACTION = """
<script>
(() => {
  const out = {};
  const svg = document.getElementById("graph");
  const view = document.getElementById("viewport");
  const q = (sel) => document.querySelector(sel);
  const click = (target, detail = 1) =>
    target.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true, detail }));
  const transform = () => view.getAttribute("transform");
  const GID = "@GID@";
  const OP = "@OP@";
  // 1. a click on a closed group opens it: its box gives way to a drawn group of its members
  const box = q(`g.node[data-id="g:${GID}"]`);
  out.closedBefore = !!box;
  if (box) click(box.querySelector("rect"));
  out.openedCluster = !!q(`g.cluster[data-id="c:${GID}"]`);
  out.boxGone = !q(`g.node[data-id="g:${GID}"]`);
  out.members = document.querySelectorAll(`g.node[data-parent="c:${GID}"]`).length;
  out.panelAfterOpen = document.getElementById("panel").textContent;
  // 2. a click on an op box shows its panel
  const op = q(`g.node[data-id="${OP}"]`);
  if (op) click(op.querySelector("rect"));
  out.selected = document.getElementById("panel").getAttribute("data-node");
  out.opId = op ? op.getAttribute("data-id") : null;
  out.panelText = document.getElementById("panel").textContent;
  // 3. a click on the group's title closes it again
  const title = q(`g.cluster[data-id="c:${GID}"] text.ctitle`);
  if (title) click(title);
  out.closedAgain = !!q(`g.node[data-id="g:${GID}"]`) && !q(`g.cluster[data-id="c:${GID}"]`);
  // 4. a wheel turn zooms about the pointer; 5. a drag pans by the distance moved
  const r = svg.getBoundingClientRect();
  out.t0 = transform();
  svg.dispatchEvent(new WheelEvent("wheel", { bubbles: true, cancelable: true, deltaY: -300,
    clientX: r.left + 200, clientY: r.top + 150 }));
  out.t1 = transform();
  svg.dispatchEvent(new MouseEvent("mousedown", { bubbles: true, clientX: r.left + 100, clientY: r.top + 100 }));
  window.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: r.left + 160, clientY: r.top + 130 }));
  window.dispatchEvent(new MouseEvent("mouseup", { bubbles: true }));
  out.t2 = transform();
  // 6. "fit" shows the whole drawing at most 1:1
  click(document.getElementById("fit"));
  out.t3 = transform();
  const pre = document.createElement("pre");
  pre.id = "interaction";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def _transform(t: str) -> tuple[float, float, float]:
    m = re.fullmatch(r"translate\(([-\d.]+),([-\d.]+)\) scale\(([-\d.]+)\)", t)
    assert m, t
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def test_page_answers_clicks_wheel_and_drag(out_dir, tmp_path):
    """The README step's page driven by DOM events (not by URL fragments): a closed
    layer opens on a click and closes on its title, an op box shows its panel with
    measured time and bytes, the wheel zooms about the pointer, a drag pans, and
    "fit" brings the whole drawing back at most 1:1."""
    _chromium()
    step, args = readme_step()
    g = step.graph(*args)
    prof = g.profile(*args)
    page = out_dir / "readme_train_step_events.html"
    g.to_html(str(page), title="README train_step")
    driven = tmp_path / "driven.html"
    text = page.read_text(encoding="utf-8")
    nodes = _page_nodes(page)
    op = next(i for i, n in enumerate(nodes) if n["kind"] == "op" and n["group"] == "forward/0")
    script = _INTERACTION.replace("@GID@", "forward/0").replace("@OP@", f"n{op}")
    driven.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
    dom = _browse(driven, "", tmp_path)
    m = re.search(r'<pre id="interaction">(.*?)</pre>', dom, re.S)
    assert m, "the interaction script did not run"
    got = json.loads(html.unescape(m.group(1)))
    assert got["closedBefore"] and got["openedCluster"] and got["boxGone"], got
    assert got["members"] >= 2, got  # the Linear's op and its parameters
    # the opened group's panel: its module type, op count and measured bytes
    for want in ("0 · Linear", "ops1", "allocated (measured)"):
        assert want in got["panelAfterOpen"], (want, got["panelAfterOpen"])
    assert got["selected"] == got["opId"] and got["opId"], got
    assert got["opId"] == f"n{op}"
    node = nodes[op]
    for want in ("float32[", " ms", "allocated (measured)", "held after (measured)"):
        assert want in got["panelText"], (want, got["panelText"])
    assert got["closedAgain"], got
    x0, y0, s0 = _transform(got["t0"])
    x1, y1, s1 = _transform(got["t1"])
    x2, y2, s2 = _transform(got["t2"])
    assert s1 > s0 * 1.2, (got["t0"], got["t1"])  # zoomed in
    # the point under the pointer (200, 150) stays put while zooming
    assert abs((200 - x1) / s1 - (200 - x0) / s0) < 0.5 and abs((150 - y1) / s1 - (150 - y0) / s0) < 0.5
    assert (round(x2 - x1), round(y2 - y1), s2) == (60, 30, s1), (got["t1"], got["t2"])
    assert _transform(got["t3"])[2] <= 1.0
    # the node's measured bytes are the profile's figures
    assert node["allocated"] == prof[node["index"]]["bytes_allocated"]
    assert node["live"] == prof[node["index"]]["bytes_held"]
