"""Inspecting captured graphs: DOT and HTML drawings, per-node profiles,
memory plans and compile statistics."""

from __future__ import annotations

import html.parser

import ferrograd as fg
import ferrograd.nn as nn
import numpy as np
import pytest


def mlp_step():
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = fg.optim.SGD(model.parameters(), lr=0.1)

    @fg.compile
    def step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def test_to_dot_lists_every_node_and_edge():
    f = fg.compile(lambda x, w: (x @ w).relu().sum())
    g = f.graph(fg.randn(4, 3), fg.randn(3, 2))
    dot = g.to_dot()
    assert dot.startswith("digraph ferrograd {") and dot.rstrip().endswith("}")
    for k, n in enumerate(g.nodes()):
        assert f"n{k} [label=" in dot
        assert n["op"] in dot
    # Every node input is drawn as an edge.
    edges = sum(len(n["inputs"]) for n in g.nodes())
    assert dot.count(" -> n") == edges
    assert "float32[4, 2]" in dot


class _Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v:
                self.srcs.append(v)

    def handle_data(self, data):
        self.text.append(data)


def test_to_html_is_self_contained_and_shows_profile(tmp_path):
    step = mlp_step()
    x, y = fg.randn(32, 8), fg.randn(32, 4)
    g = step.graph(x, y)
    prof = g.profile(x, y)
    assert len(prof) == g.num_nodes
    assert all(p["seconds"] >= 0.0 for p in prof)
    assert sum(p["seconds"] for p in prof) > 0.0
    path = tmp_path / "g.html"
    page = g.to_html(str(path), title="mlp step")
    assert path.read_text(encoding="utf-8") == page
    p = _Collect()
    p.feed(page)
    assert "svg" in p.tags and "table" in p.tags
    assert p.srcs == []  # nothing loaded from elsewhere
    text = "".join(p.text)
    assert "mlp step" in text
    assert "sgd_step" in text
    assert "linear" in text or "matmul" in text
    assert " ms" in text  # node times after profile()
    assert "test_graph_tools.py" in text  # source lines of the captured ops


def test_profile_runs_the_graph_like_a_call():
    # Profiling an optimizer step performs the step, as running it does.
    step = mlp_step()
    x, y = fg.randn(16, 8), fg.randn(16, 4)
    first = float(step(x, y).item())
    step.graph(x, y).profile(x, y)
    third = float(step(x, y).item())
    assert third < first


def test_memory_plan_peak_is_below_total_and_matches_a_hand_count():
    # y = ((x * 2) + 1).exp() with passes off: three float32[1000] temporaries,
    # each freed after its single use, so at most two are alive at once.
    f = fg.compile(lambda x: ((x * 2.0) + 1.0).exp(), passes={"fuse": False})
    x = fg.randn(1000)
    g = f.graph(x)
    m = g.memory_plan()
    assert m["allocations"] == 3
    assert m["total_bytes"] == 3 * 4000
    assert m["peak_bytes"] == 2 * 4000
    assert m["input_bytes"] == 4000
    assert m["output_bytes"] == 4000
    assert m["live_after"][-1] == 4000  # the output stays
    # Fused, the chain is one kernel writing one buffer.
    fused = fg.compile(lambda x: ((x * 2.0) + 1.0).exp()).graph(x).memory_plan()
    assert fused["allocations"] == 1 and fused["peak_bytes"] == 4000


def test_memory_plan_of_symbolic_graph_needs_sizes():
    f = fg.compile(lambda x: (x + 1.0).sum(), dynamic=True)
    x = fg.randn(10, 4)
    g = f.graph(x)
    with pytest.raises(ValueError, match="symbolic dimensions"):
        g.memory_plan()
    small = g.memory_plan(fg.randn(10, 4))
    big = g.memory_plan(fg.randn(1000, 4))
    assert big["peak_bytes"] > small["peak_bytes"]


def test_compile_stats_count_kernels_and_allocations():
    step = mlp_step()
    x, y = fg.randn(16, 8), fg.randn(16, 4)
    step(x, y)
    step(x, y)
    s = step.stats
    assert s.calls == 2 and s.traces == 1 and s.graph_breaks == 0
    g = step.graph(x, y)
    assert s.kernels_per_call == g.num_nodes
    assert s.allocations_per_call == g.memory_plan()["allocations"]
    assert 0 < s.allocations_per_call <= s.kernels_per_call


def test_explicit_graph_profile_with_feed():
    g = fg.Graph()
    with g:
        a = fg.placeholder(fg.float32, shape=(None,), name="a")
        b = (a * a).sum()
    prof = g.profile(feed={a: np.arange(5, dtype=np.float32)})
    assert [p["op"] for p in prof] == [n["op"] for n in g.nodes()]
    with pytest.raises(ValueError, match="placeholder 'a'"):
        g.profile(feed={})
    assert b is not None
