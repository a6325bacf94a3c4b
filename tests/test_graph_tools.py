"""Inspecting captured graphs: DOT and HTML drawings, per-node profiles,
memory plans and compile statistics."""

from __future__ import annotations

import html.parser
import shutil
import subprocess

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


def test_to_dot_renders_in_graphviz(tmp_path):
    # The DOT text is valid for Graphviz: every node and edge comes out in the SVG.
    dot_exe = shutil.which("dot")
    if dot_exe is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz): the DOT text is not rendered")
    f = fg.compile(lambda x, w: (x @ w).relu().sum())
    g = f.graph(fg.randn(4, 3), fg.randn(3, 2))
    r = subprocess.run([dot_exe, "-Tsvg"], input=g.to_dot(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('class="node"') >= g.num_nodes
    assert r.stdout.count('class="edge"') == sum(len(n["inputs"]) for n in g.nodes()) + len(g.outputs)
    assert "float32[4, 2]" in r.stdout


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


def test_profile_measures_bytes_per_node():
    # x @ w allocates its float32[256, 512] result (512 KiB); the transposed view
    # of it allocates nothing; the sum allocates its small result. What the run
    # holds after the matmul includes its result.
    a, w = fg.randn(256, 64), fg.randn(64, 512)

    @fg.compile
    def f(a, w):
        y = a @ w
        return y.t().sum(0)

    g = f.graph(a, w)
    prof = g.profile(a, w)
    ops = [p["op"] for p in prof]
    mm = prof[ops.index("matmul")]
    assert mm["bytes_allocated"] >= 256 * 512 * 4, mm
    assert mm["bytes_allocated"] < 2 * 256 * 512 * 4, mm  # the result, not more than scratch of its size
    assert mm["bytes_held"] >= 256 * 512 * 4, mm
    views = [p for p in prof if p["op"] in ("transpose", "permute")]
    assert views and all(p["bytes_allocated"] == 0 for p in views), prof
    assert '"measuredBytes":true' in g.to_html()
    assert "KiB" in g.to_dot() or "MiB" in g.to_dot()  # the matmul's label carries its bytes


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
    f = fg.compile(lambda x: (x + 1.0).exp(), dynamic=True)
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
    kinds = [n["effect"] for n in g.nodes()]
    assert "view" in kinds  # the weights' transposes
    assert s.kernels_per_call == sum(k != "view" for k in kinds) < g.num_nodes
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


def _allocations_of(f, *args):
    before = fg.memory_stats()["cpu.allocations"]
    out = f(*args)
    return out, fg.memory_stats()["cpu.allocations"] - before


def test_fused_kernel_writes_into_a_dying_intermediate():
    # matmul makes a buffer that only the fused relu/mul/add/exp reads: the
    # kernel writes its result there, so one call allocates one buffer.
    f = fg.compile(lambda x, w: ((x @ w).relu() * 2.0 + 1.0).exp())
    x, w = fg.randn(64, 32), fg.randn(32, 48)
    f(x, w)
    m = f.graph(x, w).memory_plan()
    assert m["in_place"] == 1 and m["allocations"] == 1
    assert m["peak_bytes"] == 64 * 48 * 4
    out, allocs = _allocations_of(f, x, w)
    assert allocs == 1
    want = ((x.numpy() @ w.numpy()).clip(0) * 2.0 + 1.0).astype(np.float32)
    np.testing.assert_allclose(out.numpy(), np.exp(want), rtol=1e-5)
    # Without the fusion pass nothing is reused in place.
    unfused = fg.compile(lambda x, w: ((x @ w).relu() * 2.0 + 1.0).exp(), passes={"fuse": False})
    assert unfused.graph(x, w).memory_plan()["in_place"] == 0
    # Nor with the in-place pass off: the kernel writes a buffer of its own.
    fresh = fg.compile(lambda x, w: ((x @ w).relu() * 2.0 + 1.0).exp(), passes={"inplace": False})
    m = fresh.graph(x, w).memory_plan()
    assert m["in_place"] == 0 and m["allocations"] == 2
    np.testing.assert_array_equal(fresh(x, w).numpy(), out.numpy())


def test_no_in_place_write_into_arguments_kept_values_or_live_intermediates():
    x = fg.randn(32, 16)
    keep = x.numpy().copy()
    f = fg.compile(lambda x: (x * 2.0).exp())
    f(x)
    assert f.graph(x).memory_plan()["in_place"] == 0  # an argument is the caller's
    np.testing.assert_array_equal(x.numpy(), keep)

    w = fg.randn(16, 16)

    def both(x, w):
        h = x @ w
        return (h.relu() * 3.0).exp(), h  # h is returned: never overwritten

    g = fg.compile(both)
    a, h = g(x, w)
    assert g.graph(x, w).memory_plan()["in_place"] == 0
    np.testing.assert_allclose(h.numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        a.numpy(), np.exp(np.maximum(h.numpy(), 0) * 3.0), rtol=1e-5, atol=1e-6
    )

    def later(x, w):
        h = x @ w
        return (h.tanh() + 1.0) @ h.T  # h is read again (through a view) after the fused node

    c = fg.compile(later)
    hn = x.numpy() @ w.numpy()
    np.testing.assert_allclose(
        c(x, w).numpy(), (np.tanh(hn) + 1.0) @ hn.T, rtol=1e-4, atol=1e-4
    )
    assert c.graph(x, w).memory_plan()["in_place"] == 0


def test_training_step_reuses_buffers_in_place_and_matches_eager():
    fg.manual_seed(0)
    x, y = fg.randn(16, 8, dtype=fg.float64), fg.randn(16, 4, dtype=fg.float64)

    def make():
        fg.manual_seed(1)
        model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))
        model.to(fg.float64)
        return model, fg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step_fn(model, opt):
        def step(x, y):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        return step

    em, eo = make()
    cm, co = make()
    eager = step_fn(em, eo)
    compiled = fg.compile(step_fn(cm, co))
    for _ in range(3):
        le, lc = eager(x, y), compiled(x, y)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-10, atol=1e-12)
    for pe, pc in zip(em.parameters(), cm.parameters(), strict=True):
        np.testing.assert_allclose(pc.numpy(), pe.numpy(), rtol=1e-10, atol=1e-12)
    m = compiled.graph(x, y).memory_plan()
    # The fused loss gradient and activation gradients write into dying buffers.
    assert m["in_place"] >= 2


def test_independent_branches_run_as_pairs_and_match_eager():
    fg.manual_seed(3)
    a, b = fg.randn(128, 256, dtype=fg.float64), fg.randn(128, 256, dtype=fg.float64)
    w1, w2 = fg.randn(256, 192, dtype=fg.float64), fg.randn(256, 192, dtype=fg.float64)

    def two(a, b, w1, w2):
        return (a @ w1).tanh() + (b @ w2).sigmoid()

    f = fg.compile(two)
    got = f(a, b, w1, w2)
    g = f.graph(a, b, w1, w2)
    pairs = g.parallel_pairs()
    ops = [n["op"] for n in g.nodes()]
    assert [(ops[i], ops[j]) for i, j in pairs] == [("matmul", "matmul")]
    np.testing.assert_allclose(got.numpy(), two(a, b, w1, w2).numpy(), rtol=1e-12, atol=1e-12)
    # The profile still times every node.
    assert len(g.profile(a, b, w1, w2)) == g.num_nodes
    # With the parallel pass off the branches run one after the other.
    serial = fg.compile(two, passes={"parallel": False})
    assert serial.graph(a, b, w1, w2).parallel_pairs() == []
    np.testing.assert_array_equal(serial(a, b, w1, w2).numpy(), got.numpy())
    # One thread: the pair runs one after the other, with the same result.
    n = fg.get_num_threads()
    try:
        fg.set_num_threads(1)
        np.testing.assert_array_equal(f(a, b, w1, w2).numpy(), got.numpy())
    finally:
        fg.set_num_threads(n)


def test_no_pairs_for_dependent_small_or_effectful_nodes():
    x, w = fg.randn(128, 128), fg.randn(128, 128)
    chain = fg.compile(lambda x, w: ((x @ w) @ w) @ w)
    chain(x, w)
    assert chain.graph(x, w).parallel_pairs() == []  # each matmul needs the last
    s, t = fg.randn(4, 4), fg.randn(4, 4)
    small = fg.compile(lambda s, t: (s @ t) + (t @ s))
    small(s, t)
    assert small.graph(s, t).parallel_pairs() == []  # too small to hand off

    def noisy(x, w):
        h = x @ w
        d = fg.nn.functional.dropout(x, 0.5, True)  # a random draw between the two
        return h + d @ w

    r = fg.compile(noisy)
    r(x, w)
    g = r.graph(x, w)
    ops = [n["op"] for n in g.nodes()]
    for i, j in g.parallel_pairs():
        assert not any(ops[k] in ("dropout", "dropout_mask", "bernoulli") for k in range(i, j + 1))


def test_dump_shows_the_graph_before_and_after_the_passes():
    x = fg.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4))

    def f(x):
        y = (x.exp() * 1.0 + 0.0).t().t()  # identities simplify removes
        return (y.exp() * 2.0 + y).sum(1)

    cf = fg.compile(f)
    np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-6)
    g = cf.graph(x)
    before, after = g.dump(optimized=False), g.dump()
    for op in ("mul", "add", "transpose", "exp", "sum"):
        assert op in before, before
    assert "transpose" not in after and "fused" in after, after
    reports = g.passes
    names = [r["pass"] for r in reports]
    assert {"simplify", "fuse"} <= set(names), reports
    simp = reports[names.index("simplify")]
    assert simp["nodes_after"] < simp["nodes_before"] and "identities removed" in simp["detail"], simp
    fuse = reports[names.index("fuse")]
    assert fuse["nodes_after"] < fuse["nodes_before"], fuse
