"""Eager autograd: the classic examples, graph semantics, memory and errors."""

import gc
import weakref

import ferrograd as fg
import numpy as np
import pytest


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


# ---------------------------------------------------------------------------
# The examples everyone starts from
# ---------------------------------------------------------------------------

def test_scalar_product_example():
    a = fg.tensor(15.0, requires_grad=True)
    b = fg.tensor(20.0, requires_grad=True)
    c = a * b
    assert c.item() == 300.0
    c.backward()
    assert a.grad.item() == 20.0
    assert b.grad.item() == 15.0


def test_dot_product_example():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = fg.tensor([4.0, 5.0, 6.0], requires_grad=True)
    loss = (x * y).sum()
    assert loss.item() == 32.0
    loss.backward()
    assert x.grad.tolist() == [4.0, 5.0, 6.0]
    assert y.grad.tolist() == [1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------
# API surface
# ---------------------------------------------------------------------------

def test_leaf_and_grad_fn():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    assert a.is_leaf and not b.is_leaf
    assert a.grad_fn is None
    assert b.grad_fn.name() == "MulBackward"
    (nxt, idx), (other, _) = b.grad_fn.next_functions
    assert nxt.name() == "AccumulateGrad" and idx == 0
    c = fg.tensor([1.0])
    assert c.is_leaf and not c.requires_grad and (c * 2).grad_fn is None


def test_requires_grad_only_for_floats():
    with pytest.raises(TypeError, match="floating point"):
        fg.tensor([1, 2]).requires_grad_()
    x = fg.tensor([1.0]).requires_grad_()
    assert x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad


def test_grad_accumulates_and_can_be_reset():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * 2 * np.array([1.0, 2.0]))
    x.grad = None
    assert x.grad is None
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_backward_non_scalar_needs_gradient():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="scalar outputs"):
        y.backward()
    y.backward(fg.tensor([1.0, 10.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        fg.tensor([1.0]).sum().backward()


def test_retain_graph_and_freed_graph_error():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_grad_on_non_leaf():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * 3 * np.array([1.0, 2.0]))
    assert h.retains_grad


def test_detach_and_no_grad():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d._shares_storage(x)
    with fg.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    with fg.no_grad():
        with fg.enable_grad():
            z = x * 2
    assert z.requires_grad

    @fg.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    fg.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        fg.set_grad_enabled(True)
    assert fg.is_grad_enabled()


def test_detach_in_place():
    x = fg.tensor([1.0], requires_grad=True)
    y = x * 2
    y.detach_()
    assert not y.requires_grad and y.grad_fn is None


def test_grad_mode_is_thread_local():
    import threading

    seen = {}

    def worker():
        seen["enabled"] = fg.is_grad_enabled()

    with fg.no_grad():
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    assert seen["enabled"] is True


def test_hooks_can_replace_gradient_and_be_removed():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    calls = []

    def hook(g):
        calls.append(g.tolist())
        return g * 10

    h = x.register_hook(hook)
    (x * 2).sum().backward()
    assert calls == [[2.0, 2.0]]
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_hook_on_non_leaf_and_exception_propagates():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])

    z = x * 3

    def bad(g):
        raise KeyError("from hook")

    z.register_hook(bad)
    with pytest.raises(KeyError, match="from hook"):
        z.sum().backward()


def test_autograd_grad_and_allow_unused():
    x = t64([1.0, 2.0])
    y = t64([3.0, 4.0])
    out = (x * x).sum()
    (gx,) = fg.autograd.grad(out, [x], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [2.0, 4.0])
    assert x.grad is None  # grad() does not accumulate
    with pytest.raises(RuntimeError, match="allow_unused"):
        fg.autograd.grad(out, [x, y], retain_graph=True)
    gx, gy = fg.autograd.grad(out, [x, y], allow_unused=True)
    assert gy is None


def test_second_derivative_of_cube():
    x = t64(2.0)
    y = x * x * x
    (g,) = fg.autograd.grad(y, x, create_graph=True)
    assert g.item() == pytest.approx(12.0)
    (gg,) = fg.autograd.grad(g, x)
    assert gg.item() == pytest.approx(12.0)  # d²/dx² x³ = 6x


def test_hessian_vector_product():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    A = fg.tensor(a + a.T, dtype=fg.float64)
    x = t64(rng.standard_normal(3))
    v = fg.tensor(rng.standard_normal(3), dtype=fg.float64)
    f = (x * (A * x).sum(dim=1)).sum() * 0.5  # ½ xᵀAx
    (g,) = fg.autograd.grad(f, x, create_graph=True)
    (hv,) = fg.autograd.grad((g * v).sum(), x)
    np.testing.assert_allclose(hv.numpy(), (a + a.T) @ v.numpy(), rtol=1e-10)


def test_func_transforms():
    f = lambda x: (x * x * x).sum()  # noqa: E731
    x = t64([1.0, 2.0], requires_grad=False)
    np.testing.assert_allclose(fg.func.grad(f)(x).numpy(), [3.0, 12.0])
    v, g = fg.func.value_and_grad(f)(x)
    assert v.item() == pytest.approx(9.0)
    out, vjp_fn = fg.func.vjp(lambda t: t * t, x)
    (gv,) = vjp_fn(fg.tensor([1.0, 1.0], dtype=fg.float64))
    np.testing.assert_allclose(gv.numpy(), [2.0, 4.0])
    J = fg.func.jacobian(lambda t: t * t, x)
    np.testing.assert_allclose(J.numpy(), np.diag([2.0, 4.0]))


def test_in_place_on_leaf_requiring_grad_raises():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x += 1
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    with fg.no_grad():
        x += 1
    np.testing.assert_array_equal(x.numpy(), [2.0, 3.0])


def test_in_place_modification_of_saved_tensor_is_detected():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * y  # saves y
    with fg.no_grad():
        y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_in_place_on_non_leaf_keeps_gradient_correct():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y += 1
    y.mul_(3)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])


def test_broadcast_gradients_reduce_to_input_shape():
    a = t64(np.ones((3, 1)))
    b = t64(np.arange(4.0))
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 6.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 3.0))


def test_view_gradients():
    x = t64(np.arange(12.0).reshape(3, 4))
    y = x[1:, ::2].T.reshape(-1) * fg.tensor([1.0, 2.0, 3.0, 4.0], dtype=fg.float64)
    y.sum().backward()
    expect = np.zeros((3, 4))
    expect[1, 0], expect[2, 0], expect[1, 2], expect[2, 2] = 1, 2, 3, 4
    np.testing.assert_allclose(x.grad.numpy(), expect)


def test_long_chain_backward_has_no_recursion_limit():
    x = fg.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.item() == 1.0
    del y
    gc.collect()


def test_dropping_output_frees_graph():
    x = fg.tensor(np.ones(1000, np.float32), requires_grad=True)
    y = (x * 2).exp()
    node = y.grad_fn
    ref = weakref.ref(node) if hasattr(node, "__weakref__") else None
    del node
    before = fg.memory_stats()["cpu.in_use_bytes"]
    del y
    gc.collect()
    after = fg.memory_stats()["cpu.in_use_bytes"]
    assert after <= before
    assert ref is None or ref() is None


def test_build_and_drop_many_graphs_returns_memory():
    x = fg.tensor(np.ones(4096, np.float32), requires_grad=True)
    for _ in range(100):
        ((x * 2).exp() * x).sum()
    gc.collect()
    base = fg.memory_stats()["cpu.in_use_bytes"]
    for _ in range(10_000):
        ((x * 2).exp() * x).sum()
    gc.collect()
    assert fg.memory_stats()["cpu.in_use_bytes"] <= base + 64 * 1024


def test_non_differentiable_outputs():
    x = fg.tensor([1.0, -2.0], requires_grad=True)
    m = x > 0
    assert not m.requires_grad
    assert m.grad_fn is None


def test_gradcheck_detects_wrong_gradient():
    x = t64([0.3, -0.7])
    assert fg.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
    # floor at an integer: the analytic gradient is 0, the finite difference is 1/(2·eps).
    step = t64([1.0, 2.0])
    with pytest.raises(AssertionError, match="mismatch"):
        fg.autograd.gradcheck(lambda t: t.floor().sum(), (step,))


def test_viz_dot_lists_ops_and_leaves():
    w = fg.tensor([[1.0, 2.0]], requires_grad=True)
    x = fg.tensor([3.0, 4.0])
    y = (w * x).tanh().sum()
    text = fg.viz.dot(y, params={"weight": w})
    assert text.startswith("digraph")
    for name in ("MulBackward", "TanhBackward", "weight", "(1, 2)"):
        assert name in text


def test_viz_render_reports_missing_pieces(tmp_path):
    import importlib.util
    import shutil

    y = (fg.tensor([1.0], requires_grad=True) * 2).sum()
    if importlib.util.find_spec("graphviz") is None or shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="graphviz|dot"):
            fg.viz.render(y, str(tmp_path / "g.svg"))
    else:
        out = fg.viz.render(y, str(tmp_path / "g.svg"))
        assert out.endswith(".svg")


# ---------------------------------------------------------------------------
# In-place writes through views
# ---------------------------------------------------------------------------

def test_in_place_on_a_view_updates_the_base_history():
    a = t64(np.ones((2, 3)))
    y = a * 2
    y[0].mul_(3)
    assert y.grad_fn.name() == "CopySlices"
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[6, 6, 6], [2, 2, 2]])


def test_view_taken_before_the_base_is_written_sees_the_write():
    a = t64(np.ones((2, 3)))
    y = a * 2
    v = y[0]
    y.mul_(3)
    v.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[6, 6, 6], [0, 0, 0]])


def test_in_place_through_nested_views_and_sibling_views():
    a = t64(np.arange(6.0).reshape(2, 3))
    y = a * 2
    w = y.t()[1:][0]          # y[:, 1]
    w.add_(a[0, 0] * 5)
    sib = y[:, 1]             # a sibling view created after the write
    (y.sum() + sib.sum()).backward()
    expect = np.full((2, 3), 2.0)
    expect[:, 1] += 2.0       # sib reads y[:, 1] = 2 a[:, 1] + 5 a00
    expect[0, 0] += 10 + 10   # from y.sum() and sib.sum()
    np.testing.assert_array_equal(a.grad.numpy(), expect)


def test_in_place_on_view_with_itself_as_operand():
    x = t64([1.0, 2.0, 3.0])
    b = x * 1
    v = b[:2]
    v.mul_(v)
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 4, 1])


def test_in_place_on_a_view_of_a_leaf_raises_unless_no_grad():
    a = t64(np.ones(3))
    with pytest.raises(RuntimeError, match="view of a leaf"):
        a[0:2].add_(1)
    np.testing.assert_array_equal(a.detach().numpy(), [1, 1, 1])
    with fg.no_grad():
        a[0:2].add_(1)
    np.testing.assert_array_equal(a.detach().numpy(), [2, 2, 1])


def test_in_place_view_writes_match_finite_differences():
    x = t64(np.random.default_rng(0).standard_normal((3, 4)))

    def f(x):
        y = x.sin() + 0.5  # (exp would save its output, which the writes below change)
        y[1:, ::2].mul_(x[:2, 1::2])
        y.t()[0].copy_(x[:, 3] ** 2)
        return (y * y).sum()

    fg.autograd.gradcheck(f, (x,))
    fg.autograd.gradgradcheck(f, (x,))


def test_graphs_with_view_writes_are_freed():
    x = fg.tensor(np.ones(4096, np.float32), requires_grad=True)

    def step():
        y = x * 2
        y[:100].mul_(3)
        v = y[200:]
        y.add_(1)
        return (v.sum() + y.sum())

    for _ in range(50):
        step()
    gc.collect()
    base = fg.memory_stats()["cpu.in_use_bytes"]
    for _ in range(2000):
        step()
    gc.collect()
    assert fg.memory_stats()["cpu.in_use_bytes"] <= base + 64 * 1024


def test_leaf_hook_sees_the_summed_gradient_once_and_runs_for_autograd_grad():
    x = t64([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()) or g.clamp(max=4.0))
    (x * 2 + x * 3).sum().backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [5, 5])
    np.testing.assert_array_equal(x.grad.numpy(), [4, 4])   # the hook's result, clamped once
    (g,) = fg.autograd.grad((x * 7).sum(), x)
    assert len(seen) == 2
    np.testing.assert_array_equal(g.numpy(), [4, 4])


def test_hook_on_dropped_non_leaf_still_runs():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    y = x * 2
    y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    z = y.sum()
    del y  # the hook lives on y's grad_fn, as in PyTorch
    z.backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])


def test_removed_non_leaf_hook_does_not_run():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    h = y.register_hook(lambda g: g * 100)
    h.remove()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_backward_releases_the_gil():
    import threading
    import time

    # float64 and n = 1000: a backward of tens of milliseconds even where
    # float32 products run at hundreds of GFLOP/s.
    a = fg.randn(1000, 1000, dtype=fg.float64, requires_grad=True)
    b = fg.randn(1000, 1000, dtype=fg.float64)
    loss = (a @ b @ b @ b).sum()
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        c0, t0 = count[0], time.perf_counter()
        time.sleep(0.2)
        rate_free = (count[0] - c0) / (time.perf_counter() - t0)  # the spinner alone, main asleep
        c0, t0 = count[0], time.perf_counter()
        loss.backward()
        dt = time.perf_counter() - t0
        during = count[0] - c0
    finally:
        stop.set()
        t.join()
    assert a.grad is not None
    # Holding the GIL for the whole backward would allow at most one switch
    # interval (5 ms) of spinning; releasing it lets the spinner run throughout.
    assert dt > 0.02, "backward too short to tell"
    assert during > 0.2 * rate_free * dt, (during, rate_free, dt)


@pytest.mark.parametrize("name", ["relu_", "silu_", "sigmoid_", "tanh_", "exp_", "neg_", "sqrt_", "log_"])
def test_unary_inplace_on_non_leaf_is_differentiable(name):
    # The in-place op overwrites the tensor its VJP would save: the gradient
    # must still equal the out-of-place op's.
    x0 = np.array([0.3, 1.7, 0.9, 2.5])
    x = fg.tensor(x0, dtype=fg.float64, requires_grad=True)
    y = x * 1.0
    getattr(y, name)()
    (y * y).sum().backward()
    x2 = fg.tensor(x0, dtype=fg.float64, requires_grad=True)
    z = getattr(x2 * 1.0, name.rstrip("_"))()
    (z * z).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), z.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12)


def test_repr_shows_requires_grad_and_grad_fn():
    x = fg.ones(2, requires_grad=True)
    assert repr(x).endswith("requires_grad=True)")
    assert "grad_fn=<MulBackward" in repr(x * 2)
    assert "requires_grad" not in repr(fg.ones(2)) and "grad_fn" not in repr((x * 2).detach())
