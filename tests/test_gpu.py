"""The WebGPU device: moves, round trips, batching, the buffer pool, errors, autograd.

Runs on whatever adapter wgpu finds (in CI: Mesa's software Vulkan driver);
skips, with the reason, where no adapter exists. Sizes stay small: software
drivers cost tens of microseconds per dispatch.
"""

from __future__ import annotations

import os

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)


@pytest.fixture(scope="module", autouse=True)
def adapter():
    i = fg.gpu.info()
    print(f"\nGPU tests on {i['name']} (backend {i['backend']}, {i['device_type']})")
    return i


def test_info_reports_adapter_and_limits(adapter):
    assert adapter["name"] and adapter["backend"]
    lim = adapter["limits"]
    assert lim["max_compute_workgroups_per_dimension"] >= 65535
    assert lim["max_storage_buffers_per_shader_stage"] >= 4
    assert isinstance(adapter["features"], list)
    for k in ("uploads", "downloads", "submits", "waits", "buffers_in_use", "buffers_cached"):
        assert isinstance(fg.gpu.stats()[k], int)


def test_fma_peak_is_measured_on_the_device():
    before = fg.gpu.stats()["downloads"]
    peak = fg.gpu.fma_peak(seconds=0.01, repeats=2)
    assert np.isfinite(peak) and peak > 0.0
    # Timed on the device alone: nothing is read back.
    assert fg.gpu.stats()["downloads"] == before
    for bad in (dict(seconds=0.0), dict(seconds=60.0), dict(repeats=0)):
        with pytest.raises(ValueError, match="fma_peak"):
            fg.gpu.fma_peak(**bad)


def test_queued_ops_remember_the_users_line():
    """A device error surfacing at the next sync names the ops queued since the
    last one and the source line each was first queued at."""
    import inspect

    fg.gpu.synchronize()
    x = fg.ones(8, device="gpu")
    line = inspect.currentframe().f_lineno + 1
    y = x * 3.0  # noqa: F841 - queued, not read
    pending = dict(fg._core._gpu_pending_ops())
    assert "mul" in pending, pending
    assert pending["mul"] == f"{__file__}:{line}"
    fg.gpu.synchronize()
    assert fg._core._gpu_pending_ops() == []


def _loop_limit():
    lim = fg.gpu.info()["loop_limit"]
    if lim is None:
        pytest.skip("this adapter does not stop long shader loops (info()['loop_limit'] is None)")
    return lim


def test_work_past_the_loop_limit_is_split_or_refused():
    """Where the driver stops loops (lavapipe: 65535 iterations per invocation),
    full sums and matmul split their work, and kernels that cannot raise."""
    lim = _loop_limit()
    n = 2_000_000  # one workgroup would walk 31,250 elements per thread
    assert fg.ones(n, device="gpu").sum().item() == float(n)
    assert fg.ones(n, device="gpu").amax().item() == 1.0
    assert fg.ones(n, device="gpu").mean().item() == pytest.approx(1.0)
    # A strided view reduced whole goes through a dense copy.
    assert fg.ones(2, n, device="gpu").t().sum().item() == float(2 * n)
    k = lim + 4465
    a, b = fg.ones(2, k, device="gpu"), fg.ones(k, 3, device="gpu")
    np.testing.assert_array_equal((a @ b).numpy(), np.full((2, 3), float(k), np.float32))
    # Row reductions over rows longer than the limit allows: the longest
    # reduced dim is cut into slices whose partial results are combined.
    rows = (np.arange(2 * 6_000_000, dtype=np.int64) % 7 - 3).reshape(2, 6_000_000)
    cpu_rows = fg.tensor(rows.astype(np.float32))
    gpu_rows = cpu_rows.to("gpu")
    np.testing.assert_array_equal(gpu_rows.sum(1).numpy(), rows.sum(1).astype(np.float32))
    np.testing.assert_allclose(gpu_rows.mean(1).numpy(), rows.mean(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(gpu_rows.amax(1).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(gpu_rows.amin(1, keepdim=True).numpy(), [[-3.0], [-3.0]])
    np.testing.assert_array_equal((gpu_rows > -3).all(1).numpy(), [False, False])
    np.testing.assert_array_equal((gpu_rows > 2).any(1).numpy(), [True, True])
    ints = gpu_rows.to(fg.int32)
    np.testing.assert_array_equal(ints.sum(1).numpy(), rows.sum(1).astype(np.int32))
    assert ints.sum(1).dtype == cpu_rows.to(fg.int32).sum(1).dtype
    np.testing.assert_allclose(ints.float().mean(1).numpy(), rows.mean(1), atol=1e-6)
    # The long dim in the middle, reduced with another dim; a strided view.
    mid = gpu_rows.reshape(2, 3_000_000, 2).permute(0, 2, 1)
    np.testing.assert_array_equal(mid.sum((1, 2)).numpy(), rows.sum(1).astype(np.float32))
    np.testing.assert_array_equal(
        mid.sum(2).numpy(), rows.reshape(2, 3_000_000, 2).sum(1).astype(np.float32)
    )
    # Two-pass reductions over such rows: the mean or max first, then the rest.
    np.testing.assert_allclose(gpu_rows.var(1).numpy(), cpu_rows.var(1).numpy(), rtol=1e-5)
    np.testing.assert_allclose(gpu_rows.std(1, correction=0).numpy(), cpu_rows.std(1, correction=0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(gpu_rows.logsumexp(1).numpy(), cpu_rows.logsumexp(1).numpy(), rtol=1e-5)
    # Arg-reductions over such rows merge slices in order (first occurrence wins).
    np.testing.assert_array_equal(gpu_rows.argmax(1).numpy(), rows.argmax(1))
    late = rows.astype(np.float32)
    late[0, 5_999_990], late[1, 4_000_001] = 9.0, -9.0
    late[1, 5_500_000] = np.nan
    gl = fg.tensor(late).to("gpu")
    vals, idx = gl.max(1)
    np.testing.assert_array_equal(idx.numpy(), fg.tensor(late).max(1)[1].numpy())
    np.testing.assert_array_equal(vals.numpy(), fg.tensor(late).max(1)[0].numpy())
    np.testing.assert_array_equal(gl.argmin(1).numpy(), fg.tensor(late).argmin(1).numpy())
    # Scans along lines past the limit run in slices, each carrying the last
    # result of the slices before it.
    assert fg.ones(3 * lim + 10, device="gpu").cumsum(0)[-1].item() == 3 * lim + 10
    ints = (np.arange(3 * (lim + 7), dtype=np.int64) % 5 - 2).reshape(3, lim + 7)
    got = fg.tensor(ints).to("gpu").t().cumsum(0).t().numpy()  # a strided view
    np.testing.assert_array_equal(got, ints.cumsum(1))
    # Factors of 2 and 1/2: every running product (1, 2 or 4) is exact, and
    # the carries between slices are not all 1.
    fl = np.tile(np.array([2, 2, 0.5, 0.5, 1], np.float32), (2 * lim + 5) // 5)
    np.testing.assert_array_equal(fg.tensor(fl).to("gpu").cumprod(0).numpy(), np.cumprod(fl))
    # A convolution's weight gradient over more images than one pass may walk:
    # done a few images at a time, the parts added.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((160, 2, 28, 28)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    grads = []
    for dev in ("cpu", "gpu"):
        wt = fg.tensor(w).to(dev).requires_grad_()
        fg.conv2d(fg.tensor(x).to(dev), wt, padding=1).sum().backward()
        grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-2)


def test_row_kernels_past_the_loop_limit_decompose():
    """Softmax, layer norm and cross entropy (and their gradients) whose rows
    would pass the driver's loop limit run as reductions and elementwise ops
    that split, and match the CPU."""
    _loop_limit()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 1_500_000)).astype(np.float32)
    grads = {}
    for dev in ("cpu", "gpu"):
        xt = fg.tensor(x).to(dev).requires_grad_()
        w = fg.tensor(np.linspace(0.5, 1.5, 1_500_000, dtype=np.float32)).to(dev).requires_grad_()
        sm = xt.softmax(1)
        lsm = xt.log_softmax(1)
        ln = fg.nn.functional.layer_norm(xt, (1_500_000,), weight=w)
        cot = fg.tensor(np.cos(np.arange(x.size, dtype=np.float32)).reshape(x.shape)).to(dev)
        ((sm * cot).sum() * 1e5 + (lsm * cot).sum() + (ln * cot).sum()).backward()
        grads[dev] = (sm.detach().numpy(), lsm.detach().numpy(), ln.detach().numpy(), xt.grad.numpy(), w.grad.numpy())
    for got, want in zip(grads["gpu"], grads["cpu"], strict=True):
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * scale)
    # Cross entropy over 20,000 classes: one thread per row would walk them 4 times.
    logits = rng.standard_normal((3, 20_000)).astype(np.float32)
    target = np.array([0, 19_999, 777])
    res = {}
    for dev in ("cpu", "gpu"):
        z = fg.tensor(logits).to(dev).requires_grad_()
        loss = fg.nn.functional.cross_entropy(z, fg.tensor(target).to(dev))
        loss.backward()
        res[dev] = (loss.item(), z.grad.numpy())
    assert res["gpu"][0] == pytest.approx(res["cpu"][0], rel=1e-5)
    np.testing.assert_allclose(res["gpu"][1], res["cpu"][1], rtol=1e-4, atol=1e-9)


def test_int64_scalars_outside_32_bits_are_refused():
    x = fg.tensor([1, 2], dtype=fg.int64).to("gpu")
    for bad in (lambda: fg.full((2,), 2**40, dtype=fg.int64, device="gpu"),
                lambda: x + 2**33,
                lambda: x.fill_(2**35),
                lambda: x == 2**32):
        with pytest.raises(ValueError, match="does not fit the 32-bit integers"):
            bad().numpy()
    np.testing.assert_array_equal(x.numpy(), [1, 2])  # the failed fill_ left x alone
    # Bounds beyond 32 bits clamp nothing, as on the CPU.
    np.testing.assert_array_equal(x.clamp(max=2**33).numpy(), [1, 2])
    np.testing.assert_array_equal(x.clamp(min=-(2**40)).numpy(), [1, 2])
    np.testing.assert_array_equal((x + (2**31 - 3)).numpy(), [2**31 - 2, 2**31 - 1])


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "bool"])
def test_round_trip(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5 - 2).astype(dtype)
    g = fg.tensor(a).to("gpu")
    assert str(g.device) == "gpu" and g.dtype.name == dtype and g.shape == (2, 3, 4)
    np.testing.assert_array_equal(g.numpy(), a)
    np.testing.assert_array_equal(g.cpu().numpy(), a)
    np.testing.assert_array_equal(g.to("cpu").numpy(), a)
    assert g.tolist() == a.tolist()
    assert g[1, 2, 3].item() == a[1, 2, 3].item()
    # views read back through the same path
    np.testing.assert_array_equal(g.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(g[:, ::2, 1:].numpy(), a[:, ::2, 1:])


def test_devices_and_factories():
    assert str(fg.device("webgpu")) == "gpu"
    z = fg.zeros(2, 3, device="gpu")
    o = fg.ones(4, dtype=fg.int32, device="gpu")
    f = fg.full((2, 2), 7.5, device="gpu")
    t = fg.tensor([1, 2, 3], device="gpu")
    r = fg.arange(5, device="gpu")
    e = fg.eye(3, device="gpu")
    zl = fg.zeros_like(f)
    for x in (z, o, f, t, r, e, zl):
        assert str(x.device) == "gpu"
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(o.numpy(), np.ones(4, np.int32))
    np.testing.assert_array_equal(f.numpy(), np.full((2, 2), 7.5, np.float32))
    np.testing.assert_array_equal(t.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(r.numpy(), np.arange(5))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, dtype=np.float32))
    assert "device='gpu'" in repr(f)
    assert "7.5" in str(f)


def test_unsupported_dtypes_are_type_errors():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64)
    with pytest.raises(TypeError, match="float64 is not supported on the gpu device"):
        x.to("gpu")
    # converting on the way works
    g = x.to("gpu", dtype=fg.float32)
    assert g.dtype == fg.float32 and str(g.device) == "gpu"
    with pytest.raises(ValueError, match="int64 value 4294967296 does not fit"):
        fg.tensor([2**32]).to("gpu")


def test_mixing_devices_names_both():
    a = fg.ones(3)
    b = fg.ones(3, device="gpu")
    with pytest.raises(RuntimeError, match=r"cpu.*gpu|gpu.*cpu"):
        a + b
    with pytest.raises(RuntimeError, match=r"cpu.*gpu|gpu.*cpu"):
        fg.matmul(a.reshape(1, 3), b.reshape(3, 1))


# CPU-only ops, each an open gap with its reason; the set may only shrink (it is empty now).
NO_GPU_KERNEL_YET: dict[str, str] = {}


def test_every_registry_op_has_a_gpu_kernel():
    """Every op lists the gpu device for float32 at least, except the open gaps of
    NO_GPU_KERNEL_YET (the GPU op-table run checks that every listed cell really runs)."""
    reg = fg.registry()
    cpu_only = sorted(o["name"] for o in reg if "gpu" not in o["devices"])
    assert cpu_only == sorted(NO_GPU_KERNEL_YET), "update NO_GPU_KERNEL_YET: it lists exactly the CPU-only ops"
    no_f32 = sorted(o["name"] for o in reg if "float32" in o["dtypes"] and "float32" not in o["gpu_dtypes"])
    assert no_f32 == sorted(NO_GPU_KERNEL_YET)


def test_registry_gpu_column():
    """The (op, dtype, device) table: what the device stores, minus ops without kernels
    (the GPU op-table run checks every cell against what really runs)."""
    assert fg.supports("add", fg.float32, "gpu") and fg.supports("add", fg.int64, "gpu")
    assert fg.supports("matmul", "float32", "gpu") and fg.supports("matmul", "float64", "cpu")
    assert not fg.supports("matmul", "float64", "gpu"), "WGSL has no float64"
    assert fg.supports("add", fg.float16, "gpu") and fg.supports("matmul", fg.bfloat16, "gpu")
    reg = {o["name"]: o for o in fg.registry()}
    assert reg["conv2d"]["devices"] == ["cpu", "gpu"]
    assert set(reg["conv2d"]["gpu_dtypes"]) == set(reg["conv2d"]["dtypes"]) - {"float64"}
    stored = {"float32", "float16", "bfloat16", "int32", "int64", "bool"}
    for name, o in reg.items():
        assert set(o["gpu_dtypes"]) <= set(o["dtypes"]) & stored, name


def test_elementwise_reduce_matmul_softmax_match_cpu():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    ga, gb = fg.tensor(a, device="gpu"), fg.tensor(b, device="gpu")
    ca, cb = fg.tensor(a), fg.tensor(b)

    def same(g, c, tol=1e-5):
        assert str(g.device) == "gpu"
        np.testing.assert_allclose(g.numpy(), c.numpy(), rtol=tol, atol=tol)

    same(ga * gb + 1.5, ca * cb + 1.5)
    same((ga.exp() - ga.tanh()) / (gb.abs() + 1), (ca.exp() - ca.tanh()) / (cb.abs() + 1))
    same(ga.sum(), ca.sum())
    same(ga.sum(dim=(0, 2)), ca.sum(dim=(0, 2)))
    same(ga.mean(dim=1, keepdim=True), ca.mean(dim=1, keepdim=True))
    same(ga.amax(dim=-1), ca.amax(dim=-1))
    same(fg.softmax(ga, dim=1), fg.softmax(ca, dim=1))
    same(fg.log_softmax(ga, dim=-1), fg.log_softmax(ca, dim=-1))
    same(ga @ gb, ca @ cb)
    same(ga.transpose(1, 2) @ ga, ca.transpose(1, 2) @ ca, 1e-4)
    same(fg.where(ga > 0, ga, gb), fg.where(ca > 0, ca, cb))
    np.testing.assert_array_equal((ga > 0).numpy(), (ca > 0).numpy())
    # strided inputs: a transposed, a flipped and a broadcast operand
    same(ga.transpose(0, 2).flip(0) + gb.reshape(5, 1, 1), ca.transpose(0, 2).flip(0) + cb.reshape(5, 1, 1))
    # in place
    gc = ga.clone()
    gc += 1
    gc.relu_()
    cc = ca.clone()
    cc += 1
    cc.relu_()
    same(gc, cc)


def test_large_launch_splits_workgroups():
    # 65,535 workgroups of 256 threads cover 16.7M elements; one row per workgroup
    # in reductions: 70,000 rows need a second grid dimension.
    x = fg.ones(70_000, 3, device="gpu")
    s = x.sum(dim=1)
    assert s.shape == (70_000,)
    v = s.numpy()
    assert v.min() == 3 and v.max() == 3


def test_many_small_ops_batch_into_few_submits():
    x = fg.ones(8, device="gpu")
    fg.gpu.synchronize()
    s0 = fg.gpu.stats()
    for _ in range(1000):
        x = x * 1.0001 + 0.0
    s1 = fg.gpu.stats()
    assert s1["submits"] - s0["submits"] == 0, "ops must queue without submitting"
    assert s1["downloads"] == s0["downloads"]
    v = x.numpy()
    s2 = fg.gpu.stats()
    assert s2["submits"] - s0["submits"] <= 2
    np.testing.assert_allclose(v, np.full(8, 1.0001**1000, np.float32), rtol=1e-4)


def test_long_run_does_not_grow_the_pool():
    def burst():
        x = fg.ones(64, device="gpu")
        for _ in range(200):
            x = (x * 0.5 + 1.0).relu()
        return x.sum().item()

    burst()
    fg.gpu.synchronize()
    s1 = fg.gpu.stats()
    for _ in range(5):
        burst()
        fg.gpu.synchronize()
    s2 = fg.gpu.stats()
    assert s2["buffers_created"] == s1["buffers_created"], (s1, s2)
    assert s2["buffers_in_use"] <= s1["buffers_in_use"]


def test_mlp_forward_backward_matches_cpu():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((8, 5)).astype(np.float32)
    w1 = rng.standard_normal((5, 16)).astype(np.float32) * 0.5
    b1 = rng.standard_normal((16,)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((16, 3)).astype(np.float32) * 0.5

    def run(device):
        x = fg.tensor(xs, device=device)
        p = [fg.tensor(a, device=device, requires_grad=True) for a in (w1, b1, w2)]
        h = (x @ p[0] + p[1]).relu()
        out = fg.log_softmax(h @ p[2], dim=1)
        loss = -out.mean() + (h * h).sum() * 0.01
        loss.backward()
        return loss, [q.grad for q in p]

    lc, gc = run("cpu")
    lg, gg = run("gpu")
    np.testing.assert_allclose(lg.item(), lc.item(), rtol=1e-5)
    for a, b in zip(gg, gc, strict=True):
        assert str(a.device) == "gpu"
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_module_to_gpu_and_back():
    fg.manual_seed(0)
    m = fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.ReLU(), fg.nn.Linear(8, 2))
    x = fg.randn(3, 4)
    want = m(x).detach().numpy()
    m.to("gpu")
    assert all(str(p.device) == "gpu" and isinstance(p, fg.nn.Parameter) for p in m.parameters())
    out = m(x.to("gpu"))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    out.sum().backward()
    assert all(str(p.grad.device) == "gpu" for p in m.parameters())
    m.to("cpu")
    assert all(str(p.device) == "cpu" for p in m.parameters())
    np.testing.assert_allclose(m(x).detach().numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU", "GRUCell", "LSTMCell"])
def test_recurrent_layers_on_the_gpu_start_from_zeros_there(kind):
    # Without an initial state the layers made their zeros on the CPU, so
    # every recurrent layer on the GPU failed with "found cpu and gpu".
    fg.manual_seed(0)
    m = getattr(fg.nn, kind)(3, 5)
    x = fg.randn(2, 4, 3) if not kind.endswith("Cell") else fg.randn(4, 3)
    want = [t.detach().numpy() for t in _flat(m(x))]
    m.to("gpu")
    got = [t.cpu().numpy() for t in _flat(m(x.to("gpu")))]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _flat(out):
    return [t for o in out for t in _flat(o)] if isinstance(out, (tuple, list)) else [out]


def test_grad_flows_back_across_devices():
    x = fg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = (x.to("gpu") * 2).relu().sum()
    y.backward()
    assert str(x.grad.device) == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0])


def test_random_draws_the_cpu_numbers():
    # Normals go through the device's ln/sin/cos: within a few ulp (see
    # test_gpu_random.py); everything else is bit for bit.
    fg.manual_seed(123)
    c = fg.randn(7, 3)
    fg.manual_seed(123)
    g = fg.randn(7, 3, device="gpu")
    np.testing.assert_allclose(g.numpy(), c.numpy(), rtol=1e-6, atol=1e-6)
    for make in (
        lambda d: fg.rand(5, device=d),
        lambda d: fg.randint(0, 10, (6,), device=d),
        lambda d: fg.randperm(9, device=d),
    ):
        fg.manual_seed(123)
        c = make("cpu")
        fg.manual_seed(123)
        g = make("gpu")
        assert str(g.device) == "gpu"
        np.testing.assert_array_equal(g.numpy(), c.numpy())
    x = fg.ones(200)
    fg.manual_seed(5)
    c = fg.nn.functional.dropout(x, 0.3, training=True)
    fg.manual_seed(5)
    g = fg.nn.functional.dropout(x.to("gpu"), 0.3, training=True)
    np.testing.assert_allclose(g.numpy(), c.numpy(), rtol=1e-6)


def test_bernoulli_and_multinomial_draw_the_cpu_numbers():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(4, 50)).astype(np.float32)
    w = rng.uniform(0.1, 1.0, size=(3, 6)).astype(np.float32)
    draws = (
        lambda d: fg.bernoulli(fg.tensor(p, device=d)),
        lambda d: fg.multinomial(fg.tensor(w, device=d), 4, replacement=True),
        lambda d: fg.multinomial(fg.tensor(w, device=d), 5),
        lambda d: fg.multinomial(fg.tensor(w[0], device=d), 3),
        lambda d: fg.zeros(4, 50, dtype=fg.int64, device=d).bernoulli_(fg.tensor(p, device=d)),
        lambda d: fg.zeros(50, 4, device=d).T.bernoulli_(fg.tensor(p, device=d)),
    )
    for make in draws:
        fg.manual_seed(11)
        c = make("cpu")
        fg.manual_seed(11)
        g = make("gpu")
        assert str(g.device) == "gpu" and g.dtype == c.dtype and g.shape == c.shape
        np.testing.assert_array_equal(g.numpy(), c.numpy())
    # The generator advanced by the same amount on both devices.
    fg.manual_seed(11)
    for make in draws:
        make("gpu")
    after_gpu = fg.rand(3).numpy()
    fg.manual_seed(11)
    for make in draws:
        make("cpu")
    np.testing.assert_array_equal(after_gpu, fg.rand(3).numpy())


def test_bad_probabilities_raise_and_write_nothing():
    x = fg.full((2, 3), 7.0, device="gpu")
    bad = fg.tensor([[0.5, 1.5, 0.0], [0.1, 0.2, 0.3]], device="gpu")
    with pytest.raises(ValueError, match=r"bernoulli.*\[0, 1\].*1\.5"):
        x.bernoulli_(bad)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 7.0, np.float32))
    with pytest.raises(ValueError, match=r"multinomial.*sums to 0"):
        fg.multinomial(fg.zeros(2, 3, device="gpu"), 1)
    with pytest.raises(ValueError, match=r"multinomial.*non-negative"):
        fg.multinomial(fg.tensor([[1.0, -1.0]], device="gpu"), 1)


def test_argmax_and_layer_norm_match_cpu():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    a[1, 2] = a[1, 4] = 9.0  # ties: the first index wins
    ga, ca = fg.tensor(a, device="gpu"), fg.tensor(a)
    for d in (0, 1):
        np.testing.assert_array_equal(ga.argmax(dim=d).numpy(), ca.argmax(dim=d).numpy())
        np.testing.assert_array_equal(ga.argmin(dim=d).numpy(), ca.argmin(dim=d).numpy())
    v, i = ga.max(dim=1)
    cv, ci = ca.max(dim=1)
    np.testing.assert_array_equal(v.numpy(), cv.numpy())
    np.testing.assert_array_equal(i.numpy(), ci.numpy())
    assert ga.argmax().item() == ca.argmax().item()
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    ln = fg.nn.functional.layer_norm
    got = ln(ga, (6,), fg.tensor(w, device="gpu"), fg.tensor(b, device="gpu"))
    want = ln(ca, (6,), fg.tensor(w), fg.tensor(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ln(ga, (6,)).numpy(), ln(ca, (6,)).numpy(), rtol=1e-5, atol=1e-5)


def test_host_only_accessors_refuse_gpu_tensors():
    g = fg.ones(3, device="gpu")
    with pytest.raises(RuntimeError, match="no host address"):
        g.data_ptr()
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        np.asarray(g)  # no zero-copy view of device memory (as PyTorch)
    np.testing.assert_array_equal(g.numpy(), np.ones(3, np.float32))


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: fg.optim.SGD(ps, lr=0.1),
        lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda ps: fg.optim.Adam(ps, lr=0.01),
        lambda ps: fg.optim.AdamW(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True, weight_decay=0.01),
        lambda ps: fg.optim.RMSprop(ps, lr=0.01, alpha=0.3, centered=True, maximize=True),
    ],
    ids=["sgd", "sgd-nesterov-wd", "adam", "adamw-amsgrad", "rmsprop", "rmsprop-centered-momentum-wd",
         "rmsprop-low-alpha-maximize"],
)
def test_training_steps_match_cpu(make):
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((16, 4)).astype(np.float32)
    ys = rng.standard_normal((16, 1)).astype(np.float32)

    def train(device):
        fg.manual_seed(0)
        m = fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.Tanh(), fg.nn.Linear(8, 1)).to(device)
        opt = make(list(m.parameters()))
        x, y = fg.tensor(xs, device=device), fg.tensor(ys, device=device)
        for _ in range(5):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
        return [p.detach().cpu().numpy() for p in m.parameters()], loss.item()

    pc, lc = train("cpu")
    pg, lg = train("gpu")
    np.testing.assert_allclose(lg, lc, rtol=1e-4)
    for a, b in zip(pg, pc, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_functional_helpers_keep_to_the_gpu():
    """Helpers that make tensors of their own make them on their inputs' device."""
    import ferrograd.nn.functional as F

    t = fg.tensor([0, 2, 1, 2])
    np.testing.assert_array_equal(F.one_hot(t.to("gpu"), 3).numpy(), F.one_hot(t, 3).numpy())
    q = fg.randn(2, 2, 5, 4)
    want = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    got = F.scaled_dot_product_attention(q.to("gpu"), q.to("gpu"), q.to("gpu"), is_causal=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    grads = [fg.randn(3, 4), fg.randn(5)]
    ps = []
    for dev in ("cpu", "gpu"):
        p = [fg.zeros(g.shape, device=dev, requires_grad=True) for g in grads]
        for x, g in zip(p, grads, strict=True):
            x.grad = g.clone().to(dev)  # clipping scales it in place
        norm = fg.nn.utils.clip_grad_norm_(p, 1.0)
        ps.append((float(norm), [x.grad.numpy() for x in p]))
    assert abs(ps[0][0] - ps[1][0]) < 1e-5 * ps[0][0]
    for a, b in zip(ps[0][1], ps[1][1], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)


def test_sync_debug_mode_waits_for_every_kernel():
    """FG_GPU_SYNC=1 (for debugging device errors) submits and waits for each kernel as
    it is queued, so an error surfaces in the op that caused it; results are unchanged."""
    import subprocess
    import sys

    script = (
        "import ferrograd as fg, numpy as np\n"
        "x = fg.arange(12, dtype=fg.float32, device='gpu').reshape(3, 4)\n"
        "s0 = fg.gpu.stats()\n"
        "y = (x * 2 + 1).exp().sum(1)\n"
        "s1 = fg.gpu.stats()\n"
        "d = s1['dispatches'] - s0['dispatches']\n"
        "assert d >= 3 and s1['submits'] - s0['submits'] >= d and s1['waits'] - s0['waits'] >= d, (s0, s1)\n"
        "assert s1['pending_dispatches'] == 0\n"
        "want = np.exp(np.arange(12, dtype=np.float32).reshape(3, 4) * 2 + 1).sum(1)\n"
        "np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, FG_GPU_SYNC="1")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


FACTORY_DTYPES = ["float32", "float16", "bfloat16", "int32", "int64", "bool"]
FACTORIES = {
    "zeros": lambda d, dev, s: fg.zeros(*s, dtype=d, device=dev),
    "ones": lambda d, dev, s: fg.ones(s, dtype=d, device=dev),
    "full": lambda d, dev, s: fg.full(s, True if d == fg.bool else 3, dtype=d, device=dev),
    "empty": lambda d, dev, s: fg.empty(s, dtype=d, device=dev).fill_(1),
    "arange": lambda d, dev, s: fg.arange(0, 2 * max(1, int(np.prod(s))), 2, dtype=d, device=dev),
    "linspace": lambda d, dev, s: fg.linspace(-3, 5, int(np.prod(s)), dtype=d, device=dev),
    "eye": lambda d, dev, s: fg.eye(s[0] if s else 3, 4, dtype=d, device=dev),
    "rand": lambda d, dev, s: fg.rand(*s, dtype=d, device=dev),
    "randn": lambda d, dev, s: fg.randn(s, dtype=d, device=dev),
    "randint": lambda d, dev, s: fg.randint(-5, 9, s, dtype=d, device=dev),
    "normal": lambda d, dev, s: fg.normal(1.5, 2.0, size=s, dtype=d, device=dev),
    "randperm": lambda d, dev, s: fg.randperm(max(1, int(np.prod(s))), dtype=d, device=dev),
    "zeros_like": lambda d, dev, s: fg.zeros_like(fg.ones(s, device=dev), dtype=d),
    "full_like": lambda d, dev, s: fg.full_like(fg.ones(s, device=dev), 7, dtype=d),
    "rand_like": lambda d, dev, s: fg.rand_like(fg.ones(s, device=dev), dtype=d),
    "randn_like": lambda d, dev, s: fg.randn_like(fg.ones(s, device=dev), dtype=d),
    "randint_like": lambda d, dev, s: fg.randint_like(fg.ones(s, device=dev), 11, dtype=d),
}


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 1, 4)])
@pytest.mark.parametrize("dtype", FACTORY_DTYPES)
@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_match_the_cpu(name, dtype, shape):
    """Every factory made on the device equals the same call on the CPU (the same
    seed gives the same random numbers), without reading anything back; a call
    the CPU refuses (a random float factory asked for integers) the GPU refuses
    the same way."""
    if name == "eye" and len(shape) == 0:
        shape = (3,)
    d = getattr(fg, dtype)
    make = FACTORIES[name]
    fg.manual_seed(11)
    try:
        want = make(d, "cpu", shape)
    except (TypeError, ValueError, RuntimeError) as e:
        fg.manual_seed(11)
        with pytest.raises(type(e)):
            make(d, "gpu", shape)
        return
    before = fg.gpu.stats()["downloads"]
    fg.manual_seed(11)
    got = make(d, "gpu", shape)
    assert fg.gpu.stats()["downloads"] == before, "a factory read the device back"
    assert str(got.device) == "gpu" and got.dtype == want.dtype and got.shape == want.shape
    w, g = want.float().numpy() if dtype == "bfloat16" else want.numpy(), (
        got.float().numpy() if dtype == "bfloat16" else got.numpy())
    if dtype in ("float32", "float16", "bfloat16") and name in ("linspace", "randn", "normal", "randn_like"):
        np.testing.assert_allclose(g, w, rtol=1e-6 if dtype == "float32" else 1e-2, atol=1e-6)
    else:
        np.testing.assert_array_equal(g, w)


def test_int64_factories_outside_32_bits_are_refused():
    for make in (lambda: fg.arange(2**31, 2**31 + 5, dtype=fg.int64, device="gpu"),
                 lambda: fg.randint(0, 2**33, (64,), dtype=fg.int64, device="gpu"),
                 lambda: fg.linspace(0, 2**32, 3, dtype=fg.int64, device="gpu"),
                 lambda: fg.full((2,), -(2**31) - 1, dtype=fg.int64, device="gpu")):
        with pytest.raises(ValueError, match="32-bit integers"):
            make().numpy()
    edge = fg.arange(2**31 - 3, 2**31, dtype=fg.int64, device="gpu")
    np.testing.assert_array_equal(edge.numpy(), [2**31 - 3, 2**31 - 2, 2**31 - 1])
