"""Reductions at the end of fused kernels.

The fusion pass lets a sum or mean of a fused group's value join the group's
kernel (one pass over the elements computes the elementwise outputs and the
reduction) when the kernel is large enough, the result small enough, nothing
in the group reads the result, and the graph runs on the CPU. Results must
match eager and NumPy, with the same sums on any number of threads.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ops(graph) -> list[str]:
    return [n["op"] for n in graph.nodes()]


def _fused_with_reduction(graph) -> int:
    return sum(1 for n in graph.nodes() if n["op"] == "fused" and ("sum" in n["attrs"] or "mean" in n["attrs"]))


def _close(got, want, dtype):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    scale = np.sqrt(np.sum(np.square(want)) / max(want.size, 1)) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * (scale + 1.0))


CASES = [
    # (shape of a, shape of b, dims, keepdim, mean)
    ((256, 128), (256, 128), (0,), False, False),  # bias-gradient sums: reduced dims lead
    ((256, 128), (128,), (1,), False, False),  # reduced dims follow (b broadcast)
    ((64, 32, 16), (64, 32, 16), (0, 1), True, True),
    ((64, 32, 16), (64, 32, 16), (1,), False, False),  # reduced dim in the middle: walked
    ((64, 1, 512), (64, 32, 512), (0, 2), False, True),  # broadcast input, walked
    ((300, 77), (300, 77), None, False, False),  # everything
    ((1 << 18,), (1 << 18,), (0,), False, True),  # one long row, split into parts
    ((4096, 64), (4096, 64), (0,), True, False),  # many rows, split into parts
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa, sb, dims, keepdim, mean", CASES)
def test_fused_reduction_matches_eager_and_numpy(sa, sb, dims, keepdim, mean, dtype):
    an, bn = _rand(*sa, seed=1, dtype=dtype), _rand(*sb, seed=2, dtype=dtype)

    def f(a, b):
        y = a * b + 1.0
        r = y.mean(dim=dims, keepdim=keepdim) if mean else y.sum(dim=dims, keepdim=keepdim)
        return y, r

    a, b = fg.tensor(an), fg.tensor(bn)
    cf = fg.compile(f)
    y, r = cf(a, b)
    assert _fused_with_reduction(cf.graph(a, b)) == 1, _ops(cf.graph(a, b))
    ye, re_ = f(a, b)
    np.testing.assert_array_equal(y.numpy(), ye.numpy())
    yn = an * bn + 1.0
    rn = (yn.astype(np.float64).mean if mean else yn.astype(np.float64).sum)(axis=dims, keepdims=keepdim)
    assert r.shape == re_.shape == rn.shape
    assert r.dtype == re_.dtype
    _close(r.numpy(), rn, dtype)
    _close(r.numpy(), re_.numpy(), dtype)


def test_fused_reductions_are_the_same_on_any_number_of_threads():
    an, bn = _rand(1 << 17, 8, seed=3), _rand(1 << 17, 8, seed=4)
    cf = fg.compile(lambda a, b: ((a - b).exp().sum(dim=0), (a * b).mean()))
    a, b = fg.tensor(an), fg.tensor(bn)
    old = fg.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            fg.set_num_threads(n)
            results.append([t.numpy() for t in cf(a, b)])
    finally:
        fg.set_num_threads(old)
    assert _fused_with_reduction(cf.graph(a, b)) == 2
    for other in results[1:]:
        for x, y in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(x, y)


def test_ops_reading_a_fused_reduction_stay_outside_its_kernel():
    an = _rand(256, 128, seed=5)

    def f(a):
        y = a * 2.0
        return y - y.sum()  # `sub` needs the finished sum: a kernel of its own

    a = fg.tensor(an)
    cf = fg.compile(f)
    nodes = cf.graph(a).nodes()
    assert [n["op"] for n in nodes] == ["fused", "sub"]
    assert "mul, sum" in nodes[0]["attrs"]
    _close(cf(a).numpy(), an * 2.0 - (an.astype(np.float64) * 2.0).sum(), np.float32)


def test_small_kernels_keep_their_reduction_as_a_node():
    # Below MIN_REDUCED_KERNEL elements the interpreter's set-up costs more than the pass.
    a, b = fg.tensor(_rand(8, 32)), fg.tensor(_rand(8, 32, seed=1))
    cf = fg.compile(lambda a, b: (a * b + 1.0).sum(dim=0))
    assert "sum" in _ops(cf.graph(a, b))
    assert _fused_with_reduction(cf.graph(a, b)) == 0


def test_fused_reduction_with_the_fuse_pass_off_gives_the_same_result():
    an, bn = _rand(512, 64, seed=6), _rand(64, seed=7)

    def f(a, b):
        return (a * b).relu().sum(dim=0)

    a, b = fg.tensor(an), fg.tensor(bn)
    on, off = fg.compile(f), fg.compile(f, passes={"fuse": False})
    assert _fused_with_reduction(on.graph(a, b)) == 1 and "sum" in _ops(off.graph(a, b))
    _close(on(a, b).numpy(), off(a, b).numpy(), np.float32)


def test_dynamic_batch_of_zero_gives_zero_sums_and_nan_means():
    f = fg.compile(lambda x: ((x * 3.0).sum(dim=0), (x + 1.0).mean(dim=0)), dynamic=True)
    s, m = f(fg.tensor(_rand(1024, 32)))
    assert _fused_with_reduction(f.graph(fg.tensor(_rand(1024, 32)))) == 2
    s, m = f(fg.zeros(0, 32))
    assert f.stats.traces == 1
    np.testing.assert_array_equal(s.numpy(), np.zeros(32, np.float32))
    assert np.isnan(m.numpy()).all()
    x = _rand(700, 32, seed=8)
    s, m = f(fg.tensor(x))
    _close(s.numpy(), (x.astype(np.float64) * 3.0).sum(0), np.float32)
    _close(m.numpy(), (x.astype(np.float64) + 1.0).mean(0), np.float32)


def test_training_step_with_fused_bias_gradients_matches_eager():
    rng = np.random.default_rng(9)
    w1, w2 = rng.standard_normal((256, 64)).astype(np.float32), rng.standard_normal((10, 256)).astype(np.float32)
    xs, ys = rng.standard_normal((128, 64)).astype(np.float32), rng.integers(0, 10, 128)

    def make():
        m = fg.nn.Sequential(fg.nn.Linear(64, 256), fg.nn.ReLU(), fg.nn.Linear(256, 10))
        with fg.no_grad():
            m[0].weight.copy_(fg.tensor(w1))
            m[2].weight.copy_(fg.tensor(w2))
            m[0].bias.fill_(0.1)
            m[2].bias.fill_(-0.1)
        return m

    models = [make(), make()]
    opts = [fg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in models]

    def step(m, o, x, y):
        o.zero_grad()
        loss = fg.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        return loss

    compiled = fg.compile(lambda x, y: step(models[0], opts[0], x, y))
    x, y = fg.tensor(xs), fg.tensor(ys)
    for _ in range(3):
        lc = compiled(x, y)
        le = step(models[1], opts[1], x, y)
        _close(lc.numpy(), le.numpy(), np.float32)
    assert _fused_with_reduction(compiled.graph(x, y)) >= 1
    for pc, pe in zip(models[0].parameters(), models[1].parameters(), strict=True):
        _close(pc.numpy(), pe.numpy(), np.float32)
        _close(pc.grad.numpy(), pe.grad.numpy(), np.float32)


def test_saved_graph_with_fused_reductions_loads_and_runs(tmp_path):
    an, bn = _rand(256, 128, seed=10), _rand(256, 128, seed=11)
    cf = fg.compile(lambda a, b: ((a * b).sum(dim=0), (a - b).abs().mean(dim=1, keepdim=True)))
    a, b = fg.tensor(an), fg.tensor(bn)
    g = cf.graph(a, b)
    assert _fused_with_reduction(g) == 2
    g.save(tmp_path / "r.fgraph")
    loaded = fg.load_graph(tmp_path / "r.fgraph")
    for x, y in zip(loaded(a, b), cf(a, b), strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.skipif(not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}")
def test_cpu_graph_with_fused_reductions_runs_when_loaded_on_the_gpu(tmp_path):
    an, bn = _rand(256, 128, seed=12), _rand(256, 128, seed=13)
    cf = fg.compile(lambda a, b: ((a * b + 1.0).sum(dim=0), (a * b + 1.0).mean()))
    a, b = fg.tensor(an), fg.tensor(bn)
    g = cf.graph(a, b)
    assert _fused_with_reduction(g) >= 1
    g.save(tmp_path / "r.fgraph")
    on_gpu = fg.load_graph(tmp_path / "r.fgraph", device="gpu")
    got = on_gpu(a.to("gpu"), b.to("gpu"))
    for x, y in zip(got, cf(a, b), strict=True):
        assert x.device.type == "gpu" if hasattr(x.device, "type") else str(x.device) == "gpu"
        np.testing.assert_allclose(x.to("cpu").numpy(), y.numpy(), rtol=2e-5, atol=2e-4)
