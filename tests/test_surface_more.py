"""The functions of ``ferrograd._surface_more`` beyond what the op table checks: exports and
methods, ``inference_mode``, ``as_tensor``/``logspace``, accuracy of ``sinh``/``cosh``/
``erfc`` at the ends of their ranges, argument errors, in-place forms, the random draws,
``Tensor.cuda`` and refusal to capture ``unique``. Expected values come from PyTorch's
documented behaviour (checked against PyTorch 2.x) or from SciPy/NumPy in float64."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest
import scipy.special as sp
from ferrograd import _surface_more as sm


def T(x, dtype=fg.float64, **kw):
    return fg.tensor(np.asarray(x, dtype=np.float64), dtype=dtype, **kw)


def vals(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# ---------------------------------------------------------------------------
# Exports and methods
# ---------------------------------------------------------------------------


def test_functions_exported_and_methods_installed():
    for name in sm.__all__:
        assert getattr(fg, name) is getattr(sm, name), name
        assert name in fg.__all__, name
    for name in sm.METHODS:
        assert hasattr(fg.Tensor, name), name
    x = T([[3.0, -1.0], [2.0, 5.0]])
    np.testing.assert_array_equal(vals(x.rot90()), vals(fg.rot90(x)))
    np.testing.assert_array_equal(vals(x.movedim(0, 1)), vals(x.moveaxis(0, 1)))
    np.testing.assert_allclose(vals(x.norm()), math.sqrt(39.0))
    np.testing.assert_allclose(vals(x.norm(1, 0)), [5.0, 6.0])
    assert x.nelement() == 4 and fg.numel(x) == 4
    v, m = x.var_mean(1)
    np.testing.assert_allclose(vals(v), [8.0, 4.5])
    np.testing.assert_allclose(vals(m), [1.0, 3.5])


def test_install_keeps_core_methods():
    saved = fg.Tensor.clamp
    sm.METHODS["clamp"] = lambda *a, **k: None
    try:
        sm.install()
        assert fg.Tensor.clamp is saved
    finally:
        del sm.METHODS["clamp"]


def test_predicates():
    assert fg.is_tensor(fg.ones(1)) and not fg.is_tensor([1.0]) and not fg.is_tensor(np.ones(1))
    assert fg.is_floating_point(fg.ones(1)) and not fg.is_floating_point(fg.ones(1, dtype=fg.int64))
    with pytest.raises(TypeError, match=r"is_floating_point\(\)"):
        fg.is_floating_point(1.0)


# ---------------------------------------------------------------------------
# inference_mode
# ---------------------------------------------------------------------------


def test_inference_mode_context_and_decorators():
    w = fg.ones(2, requires_grad=True)
    assert not fg.is_inference_mode_enabled()
    with fg.inference_mode():
        y = w * 2
        assert fg.is_inference_mode_enabled() and not fg.is_grad_enabled()
    assert not y.requires_grad
    assert fg.is_grad_enabled() and not fg.is_inference_mode_enabled()

    @fg.inference_mode()
    def f(x):
        return x * 3

    @fg.inference_mode
    def g(x):
        return x * 3

    assert not f(w).requires_grad and not g(w).requires_grad
    assert f.__name__ == "f" and g.__name__ == "g"
    with fg.inference_mode(False):
        assert (w * 2).requires_grad and not fg.is_inference_mode_enabled()


def test_inference_mode_restores_on_error():
    with pytest.raises(ValueError), fg.inference_mode():
        raise ValueError("boom")
    assert fg.is_grad_enabled() and not fg.is_inference_mode_enabled()


# ---------------------------------------------------------------------------
# Creation
# ---------------------------------------------------------------------------


def test_as_tensor():
    t = fg.ones(2)
    assert fg.as_tensor(t) is t
    assert fg.as_tensor(t, dtype=fg.float64).dtype == fg.float64
    a = np.ones(3)
    shared = fg.as_tensor(a)
    a[0] = 5.0  # shares the array's memory, as torch.as_tensor
    assert shared.dtype == fg.float64 and vals(shared)[0] == 5.0
    assert fg.as_tensor(a, dtype=fg.float32).dtype == fg.float32
    assert fg.as_tensor([1, 2]).dtype == fg.int64
    assert fg.as_tensor(3.7, dtype=fg.int64).item() == 3


def test_logspace():
    np.testing.assert_array_equal(fg.logspace(0, 3, 4, dtype=fg.int64).numpy(), [1, 10, 100, 1000])
    x = fg.logspace(0, 2, 3)
    assert x.dtype == fg.float32
    np.testing.assert_allclose(vals(x), [1.0, 10.0, 100.0])
    np.testing.assert_allclose(
        vals(fg.logspace(-2, 2, 5, base=2.0, dtype=fg.float64)), 2.0 ** np.linspace(-2, 2, 5)
    )
    assert tuple(fg.logspace(0, 1, 0).shape) == (0,)
    np.testing.assert_allclose(vals(fg.logspace(1, 1, 1)), [10.0])
    assert fg.logspace(0, 1, 3, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match=r"logspace\(\): number of steps must be non-negative"):
        fg.logspace(0, 1, -1)


# ---------------------------------------------------------------------------
# Elementwise accuracy at the ends of the range
# ---------------------------------------------------------------------------


def test_sinh_cosh_large_and_tiny():
    x64 = np.array([1e-300, 1e-8, 0.5, 1.0, 20.0, 700.0, 709.5, 710.0, 710.4, 711.0])
    for fn, ref in ((fg.sinh, np.sinh), (fg.cosh, np.cosh)):
        for sign in (1.0, -1.0):
            with np.errstate(over="ignore"):
                want = ref(sign * x64)
            np.testing.assert_allclose(vals(fn(T(sign * x64))), want, rtol=1e-14)
    x32 = np.array([1e-20, 1e-4, 0.9, 1.1, 88.0, 89.0, 89.4, 90.0], np.float32)
    with np.errstate(over="ignore"):
        for fn, ref in ((fg.sinh, np.sinh), (fg.cosh, np.cosh)):
            got = vals(fn(fg.tensor(x32)))
            want = ref(x32.astype(np.float64)).astype(np.float32)
            np.testing.assert_allclose(got, want, rtol=2e-7)
    assert math.isinf(fg.sinh(fg.tensor([90.0])).item())  # past float32's largest value
    x = T([0.0, 1e-3, -2.0]).requires_grad_()
    fg.sinh(x).sum().backward()
    np.testing.assert_allclose(vals(x.grad), np.cosh([0.0, 1e-3, -2.0]), rtol=1e-14)
    y = T([0.0, 1e-3, -2.0]).requires_grad_()
    fg.cosh(y).sum().backward()
    np.testing.assert_allclose(vals(y.grad), np.sinh([0.0, 1e-3, -2.0]), rtol=1e-12)


def test_erfc_tail_accuracy():
    x = np.concatenate([np.linspace(-6, 6, 49), [1.99, 2.0, 2.01, 2.99, 3.0, 8.0, 15.0, 26.0, 30.0]])
    want = sp.erfc(x)
    np.testing.assert_allclose(vals(fg.erfc(T(x))), want, rtol=2e-13, atol=0)
    got32 = vals(fg.erfc(fg.tensor(x.astype(np.float32))))
    np.testing.assert_allclose(got32, sp.erfc(x.astype(np.float32).astype(np.float64)), rtol=3e-7, atol=1e-44)
    assert fg.erfc(T([math.inf])).item() == 0.0 and fg.erfc(T([-math.inf])).item() == 2.0
    assert math.isnan(fg.erfc(T([math.nan])).item())
    xs = T([-1.0, 0.4, 3.5, 6.0]).requires_grad_()
    fg.erfc(xs).sum().backward()
    np.testing.assert_allclose(
        vals(xs.grad), -2 / math.sqrt(math.pi) * np.exp(-(np.array([-1.0, 0.4, 3.5, 6.0]) ** 2)), rtol=1e-10
    )


def test_log10_exact_powers_in_float32():
    np.testing.assert_array_equal(vals(fg.log10(fg.tensor([1.0, 10.0, 1000.0, 1e-3]))), [0.0, 1.0, 3.0, -3.0])
    assert fg.log10(fg.tensor([10, 100])).dtype == fg.float32


def test_fmod_edges():
    np.testing.assert_array_equal(
        fg.fmod(fg.tensor([-3, 3, 7, -7]), fg.tensor([2, -2, -3, 3])).numpy(), [-1, 1, 1, -1]
    )
    out = vals(fg.fmod(T([1.0, -1.0, math.inf, 2.0]), math.inf))
    np.testing.assert_array_equal(out[[0, 1, 3]], [1.0, -1.0, 2.0])
    assert math.isnan(out[2])
    assert math.isnan(fg.fmod(T([1.0]), 0.0).item())
    assert fg.fmod(fg.tensor([1, 2]), 1.5).dtype == fg.float32
    with pytest.raises(RuntimeError, match=r"fmod\(\): integer division by zero"):
        fg.fmod(fg.tensor([3]), fg.tensor([0]))
    x = T([5.5, -5.5])
    x.fmod_(2.0)
    np.testing.assert_array_equal(vals(x), [1.5, -1.5])


def test_fmax_fmin_copysign():
    a, b = T([1.0, math.nan, 3.0, math.nan]), T([math.nan, 2.0, 2.0, math.nan])
    np.testing.assert_array_equal(vals(fg.fmax(a, b)), [1.0, 2.0, 3.0, math.nan])
    np.testing.assert_array_equal(vals(fg.fmin(a, b)), [1.0, 2.0, 2.0, math.nan])
    assert fg.fmax(fg.tensor([1, 2]), fg.tensor([1.5, 1.0])).dtype == fg.float32
    np.testing.assert_array_equal(
        vals(fg.copysign(T([1.0, 2.0, -3.0]), T([-0.0, 0.0, 2.0]))), [-1.0, 2.0, 3.0]
    )
    c = fg.copysign(fg.tensor([1, 2]), -1)
    assert c.dtype == fg.float32 and c.tolist() == [-1.0, -2.0]


# ---------------------------------------------------------------------------
# Argument errors name the op
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, err, pattern",
    [
        (lambda: fg.take(fg.arange(6), fg.tensor([6])), IndexError, r"take\(\).*out of bounds"),
        (lambda: fg.take(fg.arange(6), fg.tensor([0.5])), TypeError, r"take\(\): index must be an integer"),
        (lambda: fg.fliplr(fg.arange(3)), RuntimeError, r"fliplr\(\): input must be at least 2-D"),
        (lambda: fg.flipud(fg.tensor(1)), RuntimeError, r"flipud\(\): input must be at least 1-D"),
        (lambda: fg.rot90(fg.arange(3)), RuntimeError, r"rot90\(\): expected a tensor of at least 2 dims"),
        (lambda: fg.rot90(fg.ones(2, 2), 1, [0, 0]), RuntimeError, r"rot90\(\): rotation dims must differ"),
        (lambda: fg.rot90(fg.ones(2, 2), 1, [0]), RuntimeError, r"rot90\(\): expected 2 rotation dims"),
        (lambda: fg.norm(fg.arange(3)), RuntimeError, r"norm\(\): expected a floating-point input"),
        (lambda: fg.norm(fg.ones(2, 2), "abc"), RuntimeError, r"norm\(\): order 'abc' is not supported"),
        (
            lambda: fg.norm(fg.ones(2, 2, 2), "fro", (0, 1, 2)),
            RuntimeError,
            r"norm\(\): p='fro' needs exactly 2",
        ),
        (lambda: fg.norm(fg.ones(2, 2, 2), "nuc"), RuntimeError, r"norm\(\): p='nuc' needs exactly 2 dims"),
        (
            lambda: fg.quantile(fg.ones(3), 1.5),
            RuntimeError,
            r"quantile\(\): q must be in the range \[0, 1\]",
        ),
        (
            lambda: fg.quantile(fg.ones(3), fg.tensor([0.5, 2.0])),
            RuntimeError,
            r"q values must be in the range",
        ),
        (
            lambda: fg.quantile(fg.arange(3), 0.5),
            RuntimeError,
            r"quantile\(\): input tensor must be either float",
        ),
        (
            lambda: fg.quantile(fg.zeros(0), 0.5),
            RuntimeError,
            r"quantile\(\): input tensor must be non-empty",
        ),
        (lambda: fg.quantile(fg.ones(3), T([0.5])), RuntimeError, r"q \(float64\) must have the same dtype"),
        (lambda: fg.quantile(fg.ones(3), fg.tensor([[0.5]])), RuntimeError, r"q must be a scalar or 1-D"),
        (
            lambda: fg.nanquantile(fg.ones(3), 0.5, interpolation="bad"),
            RuntimeError,
            r"nanquantile\(\): interp",
        ),
        (lambda: fg.zeros(3, 2).index_add(0, fg.tensor([0, 3]), fg.ones(2, 2)), IndexError, r"index_add\(\)"),
        (
            lambda: fg.zeros(3, 2).index_add(0, fg.tensor([0, 1]), fg.ones(2, 3)),
            RuntimeError,
            r"source shape",
        ),
        (
            lambda: fg.zeros(3, 2).index_add(0, fg.tensor([0, 1]), fg.ones(2, 2, dtype=fg.float64)),
            RuntimeError,
            r"index_add\(\): input \(float32\) and source \(float64\)",
        ),
        (
            lambda: fg.zeros(2, 3).masked_scatter(fg.ones(2, 3, dtype=fg.bool), fg.arange(3.0)),
            RuntimeError,
            r"masked_scatter\(\): the mask selects 6 elements but source has only 3",
        ),
        (
            lambda: fg.zeros(2, 3).masked_scatter(fg.ones(3, 3, dtype=fg.bool), fg.arange(9.0)),
            RuntimeError,
            r"masked_scatter\(\)",
        ),
        (
            lambda: fg.zeros(2, 3).masked_scatter(fg.ones(2, 3), fg.arange(9.0)),
            TypeError,
            r"mask must be a bool",
        ),
        (
            lambda: fg.mode(fg.zeros(2, 0), 1),
            IndexError,
            r"mode\(\): expected reduction dim 1 to have non-zero",
        ),
        (lambda: fg.movedim(fg.ones(2, 3), (0, 0), (1, 0)), RuntimeError, r"movedim\(\): repeated dim"),
        (lambda: fg.movedim(fg.ones(2, 3), 0, 2), IndexError, r"movedim\(\): dim 2 is out of range"),
        (lambda: fg.movedim(fg.ones(2, 3), (0, 1), 0), RuntimeError, r"same number of dims"),
        (lambda: fg.ones(2, 6).unflatten(1, (4, -1)), RuntimeError, r"unflatten\(\): sizes \[4, -1\]"),
        (lambda: fg.ones(2, 6).unflatten(1, (4, 2)), RuntimeError, r"unflatten\(\): sizes \[4, 2\]"),
        (lambda: fg.cartesian_prod(fg.ones(2, 2)), RuntimeError, r"cartesian_prod\(\): expected 1-D"),
        (
            lambda: fg.broadcast_tensors(fg.ones(2), fg.ones(3)),
            RuntimeError,
            r"broadcast_tensors\(\): shapes",
        ),
        (lambda: fg.hstack([]), RuntimeError, r"hstack\(\): expected a non-empty list"),
        (lambda: fg.vstack([fg.ones(2), 3]), TypeError, r"vstack\(\): argument 'tensors\[1\]'"),
        (lambda: fg.unique(fg.tensor(1.0), dim=0), IndexError, r"unique\(\): dim 0 given for a 0-d tensor"),
        (lambda: fg.unique(fg.zeros(2, 0), dim=0), RuntimeError, r"unique\(\): input of shape \(2, 0\)"),
    ],
)
def test_errors(call, err, pattern):
    with pytest.raises(err, match=pattern):
        call()


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def test_quantile_shapes_and_nan():
    x = fg.arange(12.0).reshape(3, 4)
    q = fg.tensor([0.2, 0.9])
    assert tuple(fg.quantile(x, q, dim=1, keepdim=True).shape) == (2, 3, 1)
    assert tuple(fg.quantile(x, q, dim=1).shape) == (2, 3)
    assert tuple(fg.quantile(x, 0.5, keepdim=True).shape) == (1, 1)
    assert tuple(fg.quantile(x, fg.tensor(0.5)).shape) == ()
    assert math.isclose(x.quantile(0.3).item(), 3.3, rel_tol=1e-6)
    assert math.isnan(fg.quantile(fg.tensor([1.0, math.nan, 3.0]), 0.5).item())
    assert fg.nanquantile(fg.tensor([1.0, math.nan, 3.0]), 0.5).item() == 2.0
    assert math.isnan(fg.nanquantile(fg.tensor([math.nan]), 0.5).item())
    # ties go to the even order statistic with "nearest", as round-half-to-even
    got = fg.quantile(fg.arange(6.0), fg.tensor([0.1, 0.3, 0.5]), interpolation="nearest")
    np.testing.assert_array_equal(vals(got), [0.0, 2.0, 2.0])
    y = T([4.0, 1.0, 3.0, 2.0]).requires_grad_()
    fg.quantile(y, 0.5).backward()  # halfway between the order statistics 2 and 3
    np.testing.assert_array_equal(vals(y.grad), [0.0, 0.0, 0.5, 0.5])


def test_mode_ties_and_index():
    v, i = fg.mode(fg.tensor([[1, 2, 2, 3, 3], [5, 5, 1, 1, 0]]), 1)
    assert v.tolist() == [2, 1] and i.tolist() == [2, 3]  # the smallest of the most frequent, last index
    r = fg.mode(fg.tensor([2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0]))
    assert (r.values.item(), r.indices.item()) == (1.0, 6)
    v, i = fg.mode(fg.tensor([[1, 2], [2, 2], [1, 1]]), 0, True)
    assert tuple(v.shape) == (1, 2) and v.tolist() == [[1, 2]] and i.tolist() == [[2, 1]]
    v, i = fg.mode(fg.tensor(5.0))
    assert v.item() == 5.0 and i.item() == 0


def test_unique_outputs_and_capture():
    x = fg.tensor([[3, 1], [2, 1], [3, 3]])
    u, inv, cnt = fg.unique(x, return_inverse=True, return_counts=True)
    assert u.tolist() == [1, 2, 3] and inv.tolist() == [[2, 0], [1, 0], [2, 2]] and cnt.tolist() == [2, 1, 3]
    assert x.unique(sorted=False).tolist() == [1, 2, 3]
    assert fg.unique(fg.tensor([True, False, True])).tolist() == [False, True]
    e, ei, ec = fg.unique(fg.zeros(0), return_inverse=True, return_counts=True)
    assert e.numel() == 0 and ei.numel() == 0 and ec.numel() == 0
    assert not fg.unique(T([1.0, 1.0]).requires_grad_()).requires_grad
    rows, rinv, rcnt = fg.unique(x, dim=0, return_inverse=True, return_counts=True)
    assert (
        rows.tolist() == [[2, 1], [3, 1], [3, 3]]
        and rinv.tolist() == [1, 0, 2]
        and rcnt.tolist() == [1, 1, 1]
    )
    c, ci, cc = fg.unique_consecutive(
        fg.tensor([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True, return_counts=True
    )
    assert (
        c.tolist() == [1, 2, 3, 1, 2]
        and ci.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
        and cc.tolist() == [2, 2, 1, 2, 1]
    )
    assert x.unique_consecutive(dim=1).tolist() == [[3, 1], [2, 1], [3, 3]]
    with pytest.raises(fg.TraceError, match=r"unique\(\): its output length depends on the input's values"):
        fg.compile(lambda t: fg.unique(t))(x)
    with pytest.raises(fg.TraceError, match=r"unique_consecutive\(\)"):
        fg.compile(lambda t: fg.unique_consecutive(t))(x)


# ---------------------------------------------------------------------------
# In-place forms and gradients through indexing
# ---------------------------------------------------------------------------


def test_index_add_and_masked_scatter_inplace_and_grad():
    a = fg.zeros(3, 2)
    out = a.index_add_(0, fg.tensor([0, 2, 0]), fg.ones(3, 2), alpha=2)
    assert out is a and a.tolist() == [[4.0, 4.0], [0.0, 0.0], [2.0, 2.0]]
    b = fg.zeros(2, 3)
    b.masked_scatter_(fg.tensor([True, False, True]), fg.arange(10.0))
    assert b.tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]]
    src = T([1.0, 2.0, 3.0]).requires_grad_()
    base = T([0.0, 0.0, 0.0, 0.0]).requires_grad_()
    y = fg.index_add(base, 0, fg.tensor([1, 1, 3]), src, alpha=3)
    (y * T([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(vals(src.grad), [6.0, 6.0, 12.0])
    np.testing.assert_array_equal(vals(base.grad), [1.0, 2.0, 3.0, 4.0])
    s = T([5.0, 6.0, 7.0]).requires_grad_()
    m = fg.tensor([False, True, True, False])
    z = fg.masked_scatter(T([1.0, 1.0, 1.0, 1.0]), m, s)
    assert z.tolist() == [1.0, 5.0, 6.0, 1.0]
    (z * T([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(vals(s.grad), [2.0, 3.0, 0.0])


def test_joining_shapes():
    assert fg.hstack([fg.tensor(1), fg.tensor([2, 3])]).tolist() == [1, 2, 3]
    assert tuple(fg.dstack([fg.tensor(1)]).shape) == (1, 1, 1)
    assert tuple(fg.column_stack([fg.tensor([1, 2]), fg.ones(2, 2, dtype=fg.int64)]).shape) == (2, 3)
    assert fg.row_stack is fg.vstack
    a, b = fg.atleast_2d(fg.tensor(1.0), fg.ones(3))
    assert tuple(a.shape) == (1, 1) and tuple(b.shape) == (1, 3)
    assert tuple(fg.atleast_1d([fg.tensor(1.0)])[0].shape) == (1,)
    assert tuple(fg.cartesian_prod(fg.tensor([1, 2]), fg.tensor([3]), fg.tensor([7, 8])).shape) == (4, 3)
    assert tuple(fg.argwhere(fg.tensor(3)).shape) == (1, 0)


# ---------------------------------------------------------------------------
# Random draws
# ---------------------------------------------------------------------------


def test_dropout_functional():
    x = fg.ones(4000)
    assert fg.dropout(x, 0.5, False).tolist() == x.tolist()
    fg.manual_seed(0)
    y = vals(fg.dropout(x, 0.25, True))
    assert set(np.unique(y)) <= {0.0, float(np.float32(1.0 / 0.75))}
    assert 0.2 < float((y == 0).mean()) < 0.3


def test_poisson():
    fg.manual_seed(1)
    rate = fg.tensor([0.5, 4.0, 30.0]).reshape(3, 1).expand(3, 4000).contiguous()
    k = fg.poisson(rate)
    assert k.dtype == fg.float32 and tuple(k.shape) == (3, 4000)
    kv = vals(k)
    assert np.all(kv == np.round(kv)) and np.all(kv >= 0)
    np.testing.assert_allclose(kv.mean(1), [0.5, 4.0, 30.0], rtol=0.08)
    assert not fg.poisson(rate.requires_grad_()).requires_grad
    with pytest.raises(RuntimeError, match=r"poisson\(\): expected a floating-point rate"):
        fg.poisson(fg.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match=r"poisson\(\): a generator"):
        fg.poisson(fg.ones(2), generator=fg.Generator())


# ---------------------------------------------------------------------------
# Tensor.cuda
# ---------------------------------------------------------------------------


def test_cuda_without_adapter(monkeypatch):
    monkeypatch.setattr(fg.gpu, "is_available", lambda: False)
    monkeypatch.setattr(fg.gpu, "unavailable_reason", lambda: "no adapter found")
    with pytest.raises(RuntimeError, match=r"Tensor.cuda\(\): no GPU adapter.*no adapter found"):
        fg.ones(2).cuda()
    with pytest.raises(RuntimeError, match=r"Tensor.cuda\(\): ferrograd has one GPU device"):
        fg.ones(2).cuda(3)


def test_cuda_moves_to_gpu():
    if not fg.gpu.is_available():
        pytest.skip(f"no GPU adapter: {fg.gpu.unavailable_reason()}")
    g = fg.tensor([1.0, 2.0]).cuda()
    assert str(g.device) == "gpu" and g.tolist() == [1.0, 2.0]
    assert str(fg.ones(1).cuda(0).device) == "gpu"
