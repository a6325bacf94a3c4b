"""Compiled graphs on the WebGPU device.

A function or training step traced with GPU tensors runs as a GPU graph:
its fused elementwise groups become generated WGSL kernels, its constants are
copied to the device once, its dispatches queue into the shared command
encoder (no submit or host read inside a run) and fused outputs may be
written over dying intermediates. Results must match eager execution on the
GPU (and the CPU) within float32 tolerances.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

TOL = {"rtol": 2e-5, "atol": 2e-6}


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _fused_nodes(graph) -> list[dict]:
    return [n for n in graph.nodes() if n["op"] == "fused"]


def test_fused_chain_runs_as_one_kernel_and_matches_eager():
    xs, ys, zs = _rand(64, 33, seed=1), _rand(64, 33, seed=2), _rand(33, seed=3)

    def f(x, y, b):
        h = x * y + b  # broadcast bias
        g = 0.5 * h * (1.0 + fg.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        return g.sigmoid() - g.exp().clamp(max=4.0), h > 0

    x, y, b = (fg.tensor(a, device="gpu") for a in (xs, ys, zs))
    cf = fg.compile(f)
    got = cf(x, y, b)
    want = f(x, y, b)
    cpu = f(*(fg.tensor(a) for a in (xs, ys, zs)))
    g = cf.graph(x, y, b)
    fused = _fused_nodes(g)
    assert len(fused) == 1, g.dump()
    for o, w, c in zip(got, want, cpu, strict=True):
        assert str(o.device) == "gpu" and o.dtype == w.dtype
        if o.dtype == fg.bool:
            np.testing.assert_array_equal(o.numpy(), w.numpy())
            np.testing.assert_array_equal(o.numpy(), c.numpy())
        else:
            np.testing.assert_allclose(o.numpy(), w.numpy(), **TOL)
            np.testing.assert_allclose(o.numpy(), c.numpy(), rtol=1e-4, atol=1e-5)
    assert cf.stats.graph_breaks == 0 and cf.stats.traces == 1


def test_runs_queue_without_submits_or_host_reads():
    x = fg.tensor(_rand(256, seed=4), device="gpu")

    @fg.compile
    def step(v):
        return ((v * 1.5 - 0.25).relu() + v.abs()).sum()

    step(x)  # trace
    fg.gpu.synchronize()
    s0 = fg.gpu.stats()
    outs = [step(x) for _ in range(50)]
    s1 = fg.gpu.stats()
    assert s1["submits"] == s0["submits"], "a compiled run must not submit on its own"
    assert s1["downloads"] == s0["downloads"] and s1["uploads"] == s0["uploads"]
    assert s1["dispatches"] > s0["dispatches"]
    want = float(((x * 1.5 - 0.25).relu() + x.abs()).sum().item())
    for o in outs[-2:]:
        np.testing.assert_allclose(o.item(), want, rtol=1e-5)


def test_constants_and_factories_land_on_the_gpu():
    x = fg.tensor(_rand(4, 3, seed=5), device="gpu")

    @fg.compile
    def f(v):
        w = fg.tensor([1.0, -2.0, 0.5])  # Python data: a constant of the graph
        z = fg.zeros_like(v) + 2.0  # a factory following its input's device
        return v * w.to(v.device) + z, fg.ones(3, device=v.device).sum()

    a, s = f(x)
    assert str(a.device) == "gpu" and str(s.device) == "gpu"
    np.testing.assert_allclose(a.numpy(), x.numpy() * np.array([1, -2, 0.5], np.float32) + 2, **TOL)
    assert s.item() == 3.0
    a2, _ = f(x)  # replay: the plan's constants are already on the device
    np.testing.assert_array_equal(a2.numpy(), a.numpy())


def test_python_list_constant_is_copied_to_the_device():
    x = fg.tensor(_rand(2, 3, seed=6), device="gpu")

    @fg.compile
    def f(v):
        return v + fg.tensor([[1.0, 2.0, 3.0]], device="cpu").to("gpu")

    np.testing.assert_allclose(f(x).numpy(), x.numpy() + np.array([[1, 2, 3]], np.float32), **TOL)


def test_python_data_made_on_the_argument_device_while_tracing():
    """``fg.tensor(data, device=x.device)`` in a traced function: the data is a constant
    of the graph and the copy to the device is captured (it used to fail, moving the
    traced constant's shape-only value to the device)."""
    x = fg.tensor(_rand(2, 3, seed=7), device="gpu")

    @fg.compile
    def f(v):
        y = v + fg.tensor([1.0, 2.0, 3.0], device=v.device)
        y[fg.tensor([1], device=v.device)] = 0.0
        return y

    want = x.numpy() + np.array([1, 2, 3], np.float32)
    want[1] = 0
    for _ in range(2):
        out = f(x)
        assert str(out.device) == "gpu"
        np.testing.assert_allclose(out.numpy(), want, **TOL)
    np.testing.assert_allclose(f(x.cpu()).numpy(), want, **TOL)


def test_changing_the_argument_device_retraces():
    xs = _rand(5, seed=7)

    @fg.compile
    def f(v):
        return (v * 2.0 + 1.0).tanh()

    g = f(fg.tensor(xs, device="gpu"))
    c = f(fg.tensor(xs))
    assert str(g.device) == "gpu" and str(c.device) == "cpu"
    assert f.stats.traces == 2
    np.testing.assert_allclose(g.numpy(), c.numpy(), rtol=1e-5, atol=1e-6)


def test_wrong_device_argument_to_a_gpu_graph_is_a_clear_error():
    x = fg.tensor(_rand(3, seed=8), device="gpu")
    graph = fg.compile(lambda v: v.exp() + 1.0).graph(x)
    with pytest.raises(RuntimeError, match=r"on device cpu where the graph runs on gpu"):
        graph.profile(fg.tensor(_rand(3, seed=8)))
    assert graph.profile(x)  # the right device runs


def test_more_tensors_than_a_kernel_may_bind_fall_back_to_unfused():
    # One fused group reading more tensors than a WGSL kernel may bind.
    limit = fg.gpu.info()["limits"]["max_storage_buffers_per_shader_stage"]
    n = min(limit + 1, 64)
    arrs = [_rand(7, seed=10 + i) for i in range(n)]

    def f(*vs):
        acc = vs[0] * 0.5
        for v in vs[1:]:
            acc = acc + v * 0.5
        return acc.tanh()

    ts = [fg.tensor(a, device="gpu") for a in arrs]
    cf = fg.compile(f)
    got = cf(*ts)
    fused = _fused_nodes(cf.graph(*ts))
    assert fused and len(fused[0]["inputs"]) >= n, "expected one fused group over all inputs"
    want = np.tanh(sum(a * np.float32(0.5) for a in arrs))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.numpy(), f(*ts).numpy(), **TOL)


def test_fused_outputs_reuse_dying_buffers_on_the_gpu():
    x = fg.tensor(_rand(128, 64, seed=11), device="gpu")
    w = fg.tensor(_rand(64, 64, seed=12) * 0.1, device="gpu")

    def f(v, m):
        h = (v @ m).tanh() * 2.0 - 1.0  # fused over the matmul's dying output
        return (h @ m).sigmoid() + 0.5

    cf = fg.compile(f)
    got = cf(x, w)
    plan = cf.graph(x, w).memory_plan()
    assert plan["in_place"] >= 1, plan
    np.testing.assert_allclose(got.numpy(), f(x, w).numpy(), rtol=1e-5, atol=1e-6)
    # the reused buffers did not corrupt later runs
    np.testing.assert_allclose(cf(x, w).numpy(), got.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: fg.optim.Adam(ps, lr=0.01),
    ],
    ids=["sgd-momentum", "adam"],
)
def test_compiled_training_step_matches_eager_on_the_gpu(make):
    xs, ys = _rand(32, 6, seed=13), _rand(32, 2, seed=14)

    def build():
        fg.manual_seed(0)
        m = fg.nn.Sequential(fg.nn.Linear(6, 16), fg.nn.GELU(), fg.nn.Linear(16, 16), fg.nn.Tanh(), fg.nn.Linear(16, 2)).to("gpu")
        return m, make(list(m.parameters()))

    x, y = fg.tensor(xs, device="gpu"), fg.tensor(ys, device="gpu")
    results = []
    for compiled in (False, True):
        m, opt = build()

        def step(a, b, m=m, opt=opt):
            opt.zero_grad()
            loss = ((m(a) - b) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = fg.compile(step) if compiled else step
        losses = [run(x, y) for _ in range(4)]
        if compiled:
            assert run.stats.graph_breaks == 0 and run.stats.traces == 1
            assert _fused_nodes(run.graph(x, y)), "the step should hold fused kernels"
            fg.gpu.synchronize()
            s0 = fg.gpu.stats()
            losses.append(run(x, y))
            s1 = fg.gpu.stats()
            assert s1["downloads"] == s0["downloads"] and s1["submits"] == s0["submits"]
        else:
            losses.append(run(x, y))
        results.append(([v.item() for v in losses], [p.detach().cpu().numpy() for p in m.parameters()]))
        assert all(str(p.device) == "gpu" for p in m.parameters())
    (le, pe), (lc, pc) = results
    np.testing.assert_allclose(lc, le, rtol=1e-4)
    for a, b in zip(pc, pe, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_session_with_gpu_placeholders():
    w = fg.tensor(_rand(3, 2, seed=20), device="gpu")
    with fg.Graph() as g:
        x = fg.placeholder(fg.float32, (None, 3), name="x", device="gpu")
        assert str(x.device) == "gpu"
        y = (x @ w).relu()
        (gx,) = fg.gradients(y.sum(), [x])
    for n in (5, 2):  # the symbolic batch dim
        xs = _rand(n, 3, seed=21 + n)
        with fg.Session(g) as s:
            got, grad = s.run([y, gx], feed={x: xs})
        assert str(got.device) == "gpu" and str(grad.device) == "gpu"
        want = np.maximum(xs @ w.numpy(), 0)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad.numpy(), (want > 0).astype(np.float32) @ w.numpy().T, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="cpu.*gpu"):
        fg.Session(g).run(y, feed={x: fg.tensor(xs)})  # a CPU tensor for a GPU placeholder
    with pytest.raises(TypeError, match="float64"):
        with fg.Graph():
            fg.placeholder(fg.float64, (2,), device="gpu")


@pytest.mark.parametrize("pool", ["avg", "adaptive"])
def test_training_step_through_average_pooling_captures_on_the_gpu(pool):
    # The pooling gradients built their constant factors for the device the
    # gradient was on, which while tracing is the shape-only one: on a GPU
    # graph average pooling's float64 factors were refused and adaptive
    # pooling's matrices stayed on the CPU.
    def make():
        fg.manual_seed(4)
        p = fg.nn.AvgPool2d(2) if pool == "avg" else fg.nn.AdaptiveAvgPool2d((2, 3))
        return fg.nn.Sequential(fg.nn.Conv2d(2, 3, 3), p, fg.nn.Flatten()).to("gpu")

    em, cm = make(), make()
    x = fg.tensor(_rand(3, 2, 8, 9, seed=5), device="gpu")

    def step_of(m):
        def step(x):
            m.zero_grad()
            loss = (m(x) ** 2).mean()
            loss.backward()
            return loss

        return step

    cstep = fg.compile(step_of(cm))
    for _ in range(2):
        np.testing.assert_allclose(cstep(x).cpu().numpy(), step_of(em)(x).cpu().numpy(), **TOL)
        for pe, pc in zip(em.parameters(), cm.parameters(), strict=True):
            np.testing.assert_allclose(pc.grad.cpu().numpy(), pe.grad.cpu().numpy(), **TOL)
