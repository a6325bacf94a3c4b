"""The Tensor functions composed of registry ops (``ferrograd._tensor_extras``), beyond
what the op table checks: methods against functions, argument errors, empty and
non-finite inputs, gradients at the edges of each domain, accuracy against SciPy
in float64, and refusal to capture what has a data-dependent output shape."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest
import scipy.special as sp
from ferrograd import _tensor_extras as te


def T(x, dtype=fg.float64, **kw):
    return fg.tensor(np.asarray(x, dtype=np.float64), dtype=dtype, **kw)


def grads(fn, *xs):
    """The gradients of ``fn(*xs).sum()`` with respect to every tensor in ``xs``."""
    leaves = [x.detach().requires_grad_() for x in xs]
    return fg.autograd.grad(fn(*leaves).sum(), leaves)


def vals(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# ---------------------------------------------------------------------------
# Methods and functions
# ---------------------------------------------------------------------------

rng = np.random.default_rng(0)
M = T(rng.uniform(-0.9, 0.9, (3, 3)))
P = T(rng.uniform(0.5, 2.0, (3, 3)))
V3 = T(rng.uniform(-1, 1, (2, 3)))
IDX = fg.tensor([0, 2, 2, 5])

# method name -> (self, args, kwargs)
METHOD_CASES = {
    "lerp": (M, (P, 0.3), {}),
    "addmm": (M, (M, P), {"beta": 0.5, "alpha": 2.0}),
    "addmv": (M[0], (M, P[0]), {}),
    "baddbmm": (M.unsqueeze(0), (M.unsqueeze(0), P.unsqueeze(0)), {}),
    "addbmm": (M, (M.unsqueeze(0), P.unsqueeze(0)), {}),
    "kron": (M, (P,), {}),
    "cross": (V3, (V3.flip(1),), {"dim": 1}),
    "clamp_min": (M, (0.1,), {}),
    "clamp_max": (M, (0.1,), {}),
    "logaddexp": (M, (P,), {}),
    "logaddexp2": (M, (P,), {}),
    "hypot": (M, (P,), {}),
    "xlogy": (M, (P,), {}),
    "sinc": (M, (), {}),
    "deg2rad": (M, (), {}),
    "rad2deg": (M, (), {}),
    "frac": (M * 3, (), {}),
    "signbit": (M, (), {}),
    "heaviside": (M, (P,), {}),
    "nan_to_num": (M, (), {"nan": 1.0}),
    "asin": (M, (), {}),
    "acos": (M, (), {}),
    "atan": (M, (), {}),
    "asinh": (M, (), {}),
    "acosh": (P + 1, (), {}),
    "atanh": (M, (), {}),
    "erfinv": (M, (), {}),
    "lgamma": (M, (), {}),
    "digamma": (M, (), {}),
    "isclose": (M, (P,), {}),
    "count_nonzero": (M, (), {"dim": 0}),
    "nansum": (M, (1,), {}),
    "nanmean": (M, (1,), {}),
    "logcumsumexp": (M, (1,), {}),
    "cummax": (M, (1,), {}),
    "cummin": (M, (0,), {}),
    "trace": (M, (), {}),
    "diff": (M, (), {"n": 2, "dim": 0}),
    "repeat_interleave": (M, (2,), {"dim": 1}),
    "diag_embed": (M, (), {"offset": 1}),
    "bincount": (IDX, (), {"minlength": 8}),
    "histc": (M, (), {"bins": 4}),
    "bitwise_left_shift": (IDX, (2,), {}),
    "bitwise_right_shift": (IDX * 9, (fg.tensor([1, 2, 0, 3]),), {}),
}
ALIASES = {
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
}


@pytest.mark.parametrize("name", sorted(METHOD_CASES))
def test_method_equals_function(name):
    self_, args, kw = METHOD_CASES[name]
    got = getattr(self_, name)(*args, **kw)
    want = getattr(fg, name)(self_, *args, **kw)
    if isinstance(want, tuple):  # (values, indices): cummax, cummin
        assert type(got) is type(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(vals(g), vals(w))
            assert g.dtype == w.dtype
        return
    np.testing.assert_array_equal(vals(got), vals(want))
    assert got.dtype == want.dtype


def test_every_method_has_a_case_and_a_function():
    plain = (
        {n for n in te.METHODS if not n.endswith("_")}
        - set(ALIASES)
        - {"tile", "polygamma", "bucketize", "allclose", "equal"}
    )
    assert plain == set(METHOD_CASES)
    for name in te.METHODS:
        assert hasattr(fg.Tensor, name), name
    for name in te.__all__:
        assert getattr(fg, name) is getattr(te, name), name
        assert name in fg.__all__


def test_methods_with_other_call_forms():
    x = T([[1.0, 2.0]])
    np.testing.assert_array_equal(vals(x.tile(2, 1)), vals(fg.tile(x, (2, 1))))
    np.testing.assert_array_equal(vals(x.tile((2,))), np.tile(vals(x), 2))
    np.testing.assert_array_equal(vals(x.polygamma(1)), vals(fg.polygamma(1, x)))
    np.testing.assert_array_equal(x.bucketize(T([1.5])).numpy(), fg.bucketize(x, T([1.5])).numpy())
    for alias, name in ALIASES.items():
        assert getattr(fg, alias) is getattr(fg, name)
        assert getattr(fg.Tensor, alias) is getattr(fg.Tensor, name)
    assert x.allclose(x + 1e-12) is True and x.equal(x) is True


def test_install_keeps_core_methods():
    """Methods the core defines are never replaced by a composed one."""
    saved = fg.Tensor.clamp
    te.METHODS["clamp"] = lambda *a, **k: None
    try:
        te.install()
        assert fg.Tensor.clamp is saved
    finally:
        del te.METHODS["clamp"]


def test_inplace_methods():
    ema = T([0.0, 10.0])
    p = T([1.0, 20.0])
    with fg.no_grad():
        out = ema.lerp_(p, 0.1)
    assert out is ema
    np.testing.assert_allclose(vals(ema), [0.1, 11.0])
    x = T([math.nan, math.inf, -1.0])
    x.nan_to_num_(posinf=5.0)
    np.testing.assert_array_equal(vals(x), [0.0, 5.0, -1.0])
    y = T([-1.0, 3.0])
    y.clamp_min_(0.0).clamp_max_(2.0)
    np.testing.assert_array_equal(vals(y), [0.0, 2.0])


# ---------------------------------------------------------------------------
# Argument errors name the function, the shapes and the dtypes
# ---------------------------------------------------------------------------

ERRORS = [
    (lambda: fg.lerp(T([1.0]), T([1.0], fg.float32), 0.5), RuntimeError, r"lerp\(\).*end.*float64.*float32"),
    (lambda: fg.lerp(fg.tensor([1]), fg.tensor([2]), 0.5), RuntimeError, r"lerp\(\).*floating-point.*int64"),
    (lambda: fg.lerp([1.0], T([1.0]), 0.5), TypeError, r"lerp\(\): argument 'input' must be a Tensor"),
    (
        lambda: fg.addmm(T(np.ones((2, 2))), T(np.ones(2)), T(np.ones((2, 2)))),
        RuntimeError,
        r"addmm\(\): mat1 must be a matrix, got shape \(2,\)",
    ),
    (
        lambda: fg.addmm(T(np.ones((3, 2))), T(np.ones((2, 2))), T(np.ones((2, 2)))),
        RuntimeError,
        r"addmm\(\): input of shape \(3, 2\) does not broadcast to \(2, 2\)",
    ),
    (
        lambda: fg.addbmm(T(np.ones((2, 2))), T(np.ones((2, 2, 3))), T(np.ones((3, 3, 2)))),
        RuntimeError,
        r"addbmm\(\): batch1 \(2, 2, 3\) and batch2 \(3, 3, 2\)",
    ),
    (
        lambda: fg.tensordot(T(np.ones((2, 3))), T(np.ones((4, 2))), 1),
        RuntimeError,
        r"tensordot\(\): contracted dims differ in size: a\(2, 3\) dim 1 has 3, b\(4, 2\) dim 0 has 4",
    ),
    (
        lambda: fg.cross(T(np.ones((2, 4))), T(np.ones((2, 4)))),
        RuntimeError,
        r"cross\(\): no dimension of size 3",
    ),
    (
        lambda: fg.cross(T(np.ones((3, 2))), T(np.ones((3, 2))), dim=1),
        RuntimeError,
        r"cross\(\): dimension 1 .* has size 2",
    ),
    (
        lambda: fg.cross(T(np.ones((2, 3))), T(np.ones((4, 3)))),
        RuntimeError,
        r"cross\(\): shapes \(2, 3\) and \(4, 3\) cannot be broadcast",
    ),
    (lambda: fg.isclose(T([1.0]), T([1.0], fg.float32)), RuntimeError, r"isclose\(\).*float64.*float32"),
    (lambda: fg.isclose(T([1.0]), T([1.0]), rtol=-1), RuntimeError, r"isclose\(\): rtol and atol"),
    (lambda: fg.diff(T([1.0, 2.0]), n=-1), RuntimeError, r"diff\(\): order n must be non-negative"),
    (lambda: fg.diff(T(1.0)), RuntimeError, r"diff\(\): expected at least one dimension"),
    (
        lambda: fg.diff(T(np.ones((2, 3))), prepend=T(np.ones((3, 1)))),
        RuntimeError,
        r"diff\(\): prepend of shape \(3, 1\) must match input \(2, 3\)",
    ),
    (lambda: fg.meshgrid(T(np.ones((2, 2)))), RuntimeError, r"meshgrid\(\): expected 0-d or 1-d.*\(2, 2\)"),
    (
        lambda: fg.meshgrid(T([1.0]), fg.tensor([1])),
        RuntimeError,
        r"meshgrid\(\).*same dtype.*float64.*int64",
    ),
    (lambda: fg.meshgrid(T([1.0]), indexing="yx"), ValueError, r"meshgrid\(\): indexing"),
    (
        lambda: fg.repeat_interleave(T([1.0, 2.0]), fg.tensor([1, 2, 3])),
        RuntimeError,
        r"repeat_interleave\(\): repeats has 3 entries but input\(2,\) has 2",
    ),
    (
        lambda: fg.repeat_interleave(T([1.0, 2.0]), fg.tensor([1, -1])),
        RuntimeError,
        r"repeat_interleave\(\): repeats must be non-negative",
    ),
    (
        lambda: fg.repeat_interleave(T([1.0]), -2),
        RuntimeError,
        r"repeat_interleave\(\): repeats must be non-negative",
    ),
    (
        lambda: fg.repeat_interleave(T([1.0, 2.0]), T([1.0, 2.0])),
        RuntimeError,
        r"repeat_interleave\(\): repeats must be an int or a 1-d integer tensor, got float64",
    ),
    (
        lambda: fg.searchsorted(T(np.ones((2, 3))), T(np.ones((3, 2)))),
        RuntimeError,
        r"searchsorted\(\): sorted_sequence\(2, 3\) and input\(3, 2\)",
    ),
    (lambda: fg.searchsorted(T([1.0]), T([1.0]), side="middle"), RuntimeError, r"searchsorted\(\): side"),
    (lambda: fg.searchsorted(T([1.0]), T([1.0]), side="left", right=True), RuntimeError, r"contradicts"),
    (
        lambda: fg.bucketize(T([1.0]), T(np.ones((2, 2)))),
        RuntimeError,
        r"bucketize\(\): boundaries must be 1-d",
    ),
    (
        lambda: fg.bincount(T([1.0, 2.0])),
        RuntimeError,
        r"bincount\(\): expected a 1-d integer tensor, got float64",
    ),
    (lambda: fg.bincount(fg.tensor([1, -2])), RuntimeError, r"bincount\(\): the input must be non-negative"),
    (
        lambda: fg.bincount(fg.tensor([1, 2]), T([1.0])),
        RuntimeError,
        r"bincount\(\): weights of shape \(1,\)",
    ),
    (lambda: fg.histc(T([1.0]), min=2, max=1), RuntimeError, r"histc\(\): max must be larger than min"),
    (
        lambda: fg.histc(fg.tensor([1]), bins=3),
        RuntimeError,
        r"histc\(\): expected a floating-point input, got int64",
    ),
    (lambda: fg.polygamma(-1, T([1.0])), RuntimeError, r"polygamma\(\): n must be a non-negative int, got -1"),
    (lambda: fg.trace(T([1.0, 2.0])), RuntimeError, r"trace\(\): expected a matrix, got shape \(2,\)"),
    (lambda: fg.diag_embed(T([1.0]), dim1=0, dim2=-2), RuntimeError, r"diag_embed\(\): diagonal dimensions"),
    (
        lambda: fg.nanmean(fg.tensor([1, 2])),
        RuntimeError,
        r"nanmean\(\): expected a floating-point input, got int64",
    ),
    (lambda: fg.frac(fg.tensor([1])), RuntimeError, r"frac\(\): expected a floating-point tensor"),
    (lambda: fg.heaviside(T([1.0]), T([1.0], fg.float32)), RuntimeError, r"heaviside\(\).*float64.*float32"),
    (lambda: fg.logcumsumexp(T([1.0]), 1), IndexError, r"logcumsumexp\(\): dim 1 is out of range"),
    (lambda: fg.xlogy(1.0, 2.0), TypeError, r"xlogy\(\): expected at least one Tensor"),
]


@pytest.mark.parametrize(
    "call,exc,pattern", ERRORS, ids=[p.split("\\(")[0] + str(i) for i, (_, _, p) in enumerate(ERRORS)]
)
def test_argument_errors(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------
# Empty, infinite and NaN inputs
# ---------------------------------------------------------------------------


def test_empty_inputs():
    e = T(np.zeros((0, 3)))
    assert fg.lerp(e, e, 0.5).shape == (0, 3)
    assert fg.logcumsumexp(e, 0).shape == (0, 3)
    assert fg.logcumsumexp(T(np.zeros((2, 0))), 1).shape == (2, 0)
    assert fg.nansum(e).item() == 0.0
    assert math.isnan(fg.nanmean(e).item())
    assert fg.diff(e, dim=0).shape == (0, 3) and fg.diff(e, n=5, dim=1).shape == (0, 0)
    assert fg.tile(e, (2, 2)).shape == (0, 6)
    assert fg.repeat_interleave(T([1.0, 2.0]), fg.tensor([0, 0])).shape == (0,)
    assert fg.searchsorted(T([]), T([1.0, 2.0])).tolist() == [0, 0]
    assert fg.bincount(fg.tensor([], dtype=fg.int64), minlength=3).tolist() == [0, 0, 0]
    assert fg.bincount(fg.tensor([], dtype=fg.int64)).shape == (0,)
    assert fg.histc(T([]), bins=3).tolist() == [0.0, 0.0, 0.0]
    assert fg.isin(T([]), T([1.0])).shape == (0,)
    assert fg.isin(T([1.0, 2.0]), T([])).tolist() == [False, False]
    assert fg.count_nonzero(e).item() == 0
    assert fg.trace(e).item() == 0.0
    assert fg.addmm(T(np.zeros((2, 4))), T(np.zeros((2, 0))), T(np.zeros((0, 4)))).tolist() == [[0.0] * 4] * 2
    assert fg.kron(e, T(np.ones((2, 2)))).shape == (0, 6)
    assert fg.equal(e, T(np.zeros((0, 3)))) and not fg.equal(e, T(np.zeros((3, 0))))
    assert all(g.shape == (0, 3) for g in fg.meshgrid(T([]), T([1.0, 2.0, 3.0])))


def test_nan_functions():
    x = T([[math.nan, 1.0, 2.0], [math.nan, math.nan, math.nan]])
    np.testing.assert_array_equal(vals(fg.nansum(x, 1)), [3.0, 0.0])
    got = vals(fg.nanmean(x, 1))
    assert got[0] == 1.5 and math.isnan(got[1])
    # NaN is no number: its gradient is 0, the others' is 1 (nansum) or 1/count (nanmean)
    (g,) = grads(lambda v: fg.nansum(v), x)
    np.testing.assert_array_equal(vals(g), [[0, 1, 1], [0, 0, 0]])
    (g,) = grads(lambda v: fg.nanmean(v, 1)[:1], x)
    np.testing.assert_array_equal(vals(g), [[0, 0.5, 0.5], [0, 0, 0]])
    y = fg.nan_to_num(T([math.nan, math.inf, -math.inf, 2.0], fg.float16))
    assert y.dtype == fg.float16 and vals(y).tolist() == [0.0, 65504.0, -65504.0, 2.0]
    (g,) = grads(lambda v: fg.nan_to_num(v), T([math.nan, math.inf, 3.0]))
    np.testing.assert_array_equal(vals(g), [0, 0, 1])
    assert fg.nan_to_num(fg.tensor([1, 2])).tolist() == [1, 2]


def test_logaddexp_infinities_and_gradients():
    a = T([-math.inf, -math.inf, math.inf, 0.0, 1000.0, -1000.0])
    b = T([-math.inf, 0.0, math.inf, 0.0, 1000.0, -1000.0])
    np.testing.assert_array_equal(vals(fg.logaddexp(a, b)), np.logaddexp(vals(a), vals(b)))
    np.testing.assert_array_equal(vals(fg.logaddexp2(a, b)), np.logaddexp2(vals(a), vals(b)))
    ga, gb = grads(fg.logaddexp, a, b)
    # sigmoid(a - b) and sigmoid(b - a); no NaN where an input is -inf
    np.testing.assert_array_equal(vals(ga)[1:], [0.0, 0.5, 0.5, 0.5, 0.5])
    np.testing.assert_array_equal(vals(gb)[1:], [1.0, 0.5, 0.5, 0.5, 0.5])
    assert np.isfinite(vals(ga)[0]) and np.isfinite(vals(gb)[0])
    x = T([3.0, 1.0])
    y = T([0.5, -2.0])
    ga, gb = grads(fg.logaddexp2, x, y)
    s = 1 / (1 + 2.0 ** (vals(y) - vals(x)))
    np.testing.assert_allclose(vals(ga), s, rtol=1e-14)
    np.testing.assert_allclose(vals(gb), 1 - s, rtol=1e-14)


def test_logcumsumexp_spread_and_infinities():
    x = T([[-1000.0, 0.0, -math.inf, 700.0], [-math.inf, -math.inf, 1.0, 2.0]])
    want = np.logaddexp.accumulate(vals(x), axis=1)
    np.testing.assert_allclose(vals(fg.logcumsumexp(x, 1)), want, rtol=1e-15)
    (g,) = grads(lambda v: fg.logcumsumexp(v, 1), x)
    assert np.isfinite(vals(g)).all()
    # d/dx_j sum_i lse(x_0..x_i) = sum_{i >= j} exp(x_j - lse(x_0..x_i)); 0 for x_j = -inf
    xv = vals(x)[0]
    want_g = [sum(np.exp(xv[j] - want[0][i]) for i in range(j, 4)) for j in range(4)]
    np.testing.assert_allclose(vals(g)[0], want_g, rtol=1e-14)


def test_hypot_range_and_infinities():
    a = T([3e200, 3e-200, 0.0, math.inf, math.nan, -5.0])
    b = T([4e200, 4e-200, 0.0, math.nan, -math.inf, 12.0])
    np.testing.assert_allclose(vals(fg.hypot(a, b)), np.hypot(vals(a), vals(b)), rtol=1e-15)
    h = fg.hypot(T([300.0], fg.float16), T([400.0], fg.float16))
    assert h.dtype == fg.float16 and vals(h).tolist() == [500.0]
    ga, gb = grads(fg.hypot, T([3.0, -1.0]), T([4.0, -1.0]))
    np.testing.assert_allclose(vals(ga), [0.6, -(0.5**0.5)], rtol=1e-15)
    np.testing.assert_allclose(vals(gb), [0.8, -(0.5**0.5)], rtol=1e-15)


# ---------------------------------------------------------------------------
# Gradients at the edges
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("w", [0.0, 1.0, 0.5, -0.5, 1.5])
def test_lerp_gradients_at_weight_edges(w):
    s, e = T([1.0, -2.0]), T([4.0, 3.0])
    for weight in (w, T([w, w])):
        out = fg.lerp(s, e, weight)
        np.testing.assert_array_equal(vals(out), vals(s) + w * (vals(e) - vals(s)))
        if isinstance(weight, fg.Tensor):
            gs, ge, gw = grads(fg.lerp, s, e, weight)
            np.testing.assert_array_equal(vals(gw), vals(e) - vals(s))
        else:
            gs, ge = grads(lambda a, b, weight=weight: fg.lerp(a, b, weight), s, e)
        np.testing.assert_array_equal(vals(gs), [1 - w] * 2)
        np.testing.assert_array_equal(vals(ge), [w] * 2)
    assert vals(fg.lerp(T([0.1]), T([0.7]), 1.0)).tolist() == [0.7]  # weight 1 gives end exactly


def test_inverse_functions_near_their_edges():
    x = T([0.999999, -0.999999, 1 - 2**-40, 0.5, 0.0])
    xv = vals(x)
    for fn, ref, dref in (
        (fg.atanh, np.arctanh, lambda v: 1 / ((1 - v) * (1 + v))),
        (fg.asin, np.arcsin, lambda v: 1 / np.sqrt((1 - v) * (1 + v))),
        (fg.acos, np.arccos, lambda v: -1 / np.sqrt((1 - v) * (1 + v))),
        (fg.erfinv, sp.erfinv, None),
    ):
        got = vals(fn(x))
        if fn is fg.erfinv:
            # Newton steps on erf: erf near ±1 resolves 2^-53 absolutely, so the error is
            # bounded by that over erf'(x) (the conditioning of erfinv itself)
            bound = 4 * 2.0**-53 / (2 / np.sqrt(np.pi) * np.exp(-(ref(xv) ** 2)))
            assert (np.abs(got - ref(xv)) <= bound + 1e-15 * np.abs(ref(xv))).all(), got - ref(xv)
        else:
            np.testing.assert_allclose(got, ref(xv), rtol=2e-15, err_msg=fn.__name__)
        (g,) = grads(fn, x)
        # (erfinv: the derivative at the value computed, 1/erf'(erfinv(y)))
        dwant = np.sqrt(np.pi) / 2 * np.exp(got**2) if fn is fg.erfinv else dref(xv)
        np.testing.assert_allclose(vals(g), dwant, rtol=1e-9, err_msg=fn.__name__)
    edges = T([1.0, -1.0, 1.5, -1.5])
    for fn in (fg.atanh, fg.erfinv):
        np.testing.assert_array_equal(vals(fn(edges)), [math.inf, -math.inf, math.nan, math.nan])
    np.testing.assert_array_equal(vals(fg.asin(edges)), [math.pi / 2, -math.pi / 2, math.nan, math.nan])
    np.testing.assert_array_equal(vals(fg.acos(edges)), [0.0, math.pi, math.nan, math.nan])


def test_odd_functions_have_the_right_slope_at_zero():
    z = T([0.0, -0.0])
    for fn, slope in (
        (fg.asinh, 1.0),
        (fg.atanh, 1.0),
        (fg.erfinv, math.sqrt(math.pi) / 2),
        (fg.asin, 1.0),
        (fg.atan, 1.0),
    ):
        (g,) = grads(fn, z)
        np.testing.assert_allclose(vals(g), [slope, slope], rtol=1e-15, err_msg=fn.__name__)
    (g,) = grads(fg.sinc, z)
    np.testing.assert_array_equal(vals(g), [0.0, 0.0])
    assert vals(fg.sinc(z)).tolist() == [1.0, 1.0]
    assert np.signbit(vals(fg.asinh(T([-0.0])))).all()  # -0.0 stays -0.0


def test_large_arguments():
    big = T([1e300, -1e300, 1e10])
    np.testing.assert_allclose(vals(fg.asinh(big)), np.arcsinh(vals(big)), rtol=1e-15)
    np.testing.assert_allclose(
        vals(fg.acosh(T([1e300, 1 + 1e-15]))), np.arccosh([1e300, 1 + 1e-15]), rtol=1e-15
    )
    (g,) = grads(fg.asinh, T([1e10, 3.0]))
    np.testing.assert_allclose(vals(g), 1 / np.sqrt(1 + np.array([1e10, 3.0]) ** 2), rtol=1e-14)
    h = fg.asinh(T([60000.0], fg.float16))
    assert math.isfinite(vals(h)[0]) and abs(vals(h)[0] - np.arcsinh(60000.0)) < 1e-2


def test_xlogy_at_zero():
    x, y = T([0.0, 0.0, 0.0, 2.0]), T([0.0, 3.0, math.nan, 3.0])
    np.testing.assert_array_equal(vals(fg.xlogy(x, y)), sp.xlogy(vals(x), vals(y)))
    gx, gy = grads(fg.xlogy, T([0.0, 2.0]), T([3.0, 4.0]))
    np.testing.assert_allclose(vals(gx), np.log([3.0, 4.0]), rtol=1e-15)  # log(y) even at x = 0
    np.testing.assert_allclose(vals(gy), [0.0, 0.5], rtol=1e-15)
    assert vals(fg.xlogy(T([0.0]), math.inf)).tolist() == [0.0]


def test_gamma_family_accuracy():
    x = np.concatenate([np.linspace(-9.7, 30.3, 160), [1e-6, -1e-6, 1.0, 2.0, 0.5]])
    t = T(x)
    np.testing.assert_allclose(vals(fg.lgamma(t)), sp.gammaln(x), rtol=1e-12, atol=5e-14)
    np.testing.assert_allclose(vals(fg.digamma(t)), sp.digamma(x), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(vals(fg.polygamma(1, t)), sp.polygamma(1, x), rtol=1e-12)
    poles = T([0.0, -1.0, -3.0, -0.0, math.inf, -math.inf])
    assert vals(fg.lgamma(poles)).tolist() == [math.inf] * 6
    d = vals(fg.digamma(poles))
    assert d[0] == -math.inf and d[3] == math.inf and d[4] == math.inf and np.isnan(d[[1, 2, 5]]).all()
    # float32 computed in float64 and rounded once: exact zeros at 1 and 2, as PyTorch
    assert vals(fg.lgamma(fg.tensor([1.0, 2.0]))).tolist() == [0.0, 0.0]
    np.testing.assert_allclose(vals(fg.lgamma(fg.tensor([-3.5, 0.1]))), sp.gammaln([-3.5, 0.1]), rtol=1e-7)
    (g,) = grads(fg.lgamma, T([-2.5, 0.3, 7.0]))
    np.testing.assert_allclose(vals(g), sp.digamma([-2.5, 0.3, 7.0]), rtol=1e-12)


def test_erfinv_accuracy():
    y = np.concatenate([np.linspace(-0.9999, 0.9999, 301), [1e-300, -1e-20, 0.7, 0.7000001]])
    np.testing.assert_allclose(vals(fg.erfinv(T(y))), sp.erfinv(y), rtol=1e-12, atol=1e-300)
    y32 = fg.erfinv(T(y, fg.float32))
    np.testing.assert_allclose(vals(y32), sp.erfinv(y.astype(np.float32)), rtol=2e-6)


def test_low_precision_runs_wide():
    """float16/bfloat16 compositions compute in float32 and round once; the special
    functions (erfinv, the gamma family) compute in float64 on the CPU."""
    x = np.array([0.3, -0.7, 0.95, 0.99])
    for dt in (fg.float16, fg.bfloat16):
        for fn, wide in (
            (fg.asin, fg.float32),
            (fg.atanh, fg.float32),
            (fg.asinh, fg.float32),
            (fg.erfinv, fg.float64),
            (fg.lgamma, fg.float64),
        ):
            low = fn(T(x, dt))
            assert low.dtype == dt
            want = fn(T(x, dt).to(wide)).to(dt)
            np.testing.assert_array_equal(vals(low.float()), vals(want.float()), err_msg=fn.__name__)


def test_integer_inputs_become_float32():
    for fn in (fg.asin, fg.atan, fg.sinc, fg.deg2rad, fg.erfinv, fg.lgamma):
        assert fn(fg.tensor([0, 1])).dtype == fg.float32, fn.__name__
    assert fg.logaddexp(fg.tensor([0]), fg.tensor([0])).dtype == fg.float32


# ---------------------------------------------------------------------------
# PyTorch semantics worth pinning
# ---------------------------------------------------------------------------


def test_semantics():
    assert fg.allclose(T([1.0]), T([1.0 + 1e-9])) is True
    assert fg.allclose(T([math.nan]), T([math.nan])) is False
    assert fg.allclose(T([math.nan]), T([math.nan]), equal_nan=True) is True
    assert fg.equal(T([1.0, 2.0]), T([[1.0, 2.0]])) is False
    assert fg.equal(T([math.nan]), T([math.nan])) is False
    x = fg.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal(
        fg.repeat_interleave(x, fg.tensor([1, 2]), dim=0).numpy(), [[1, 2], [3, 4], [3, 4]]
    )
    np.testing.assert_array_equal(fg.repeat_interleave(fg.tensor([2, 0, 1])).numpy(), [0, 0, 2])
    np.testing.assert_array_equal(fg.repeat_interleave(x, fg.tensor(2)).numpy(), np.repeat(x.numpy(), 2))
    # a one-element repeats tensor applies to every slice
    np.testing.assert_array_equal(
        fg.repeat_interleave(x, fg.tensor([2]), dim=1).numpy(), np.repeat(x.numpy(), 2, 1)
    )
    gx, gy = fg.meshgrid([T([1.0, 2.0, 3.0]), T([4.0, 5.0])], indexing="xy")
    assert gx.shape == (2, 3) and vals(gy)[:, 0].tolist() == [4.0, 5.0]
    assert fg.meshgrid(T([1.0, 2.0]), T([3.0]))[0].shape == (2, 1)  # default "ij"
    assert (
        fg.searchsorted(T([1.0, 2.0, 3.0]), 2.0).tolist() == 1
        and fg.searchsorted(T([1.0, 2.0]), 2.0, side="right").tolist() == 2
    )
    assert fg.searchsorted(T([1.0, 2.0]), T([math.nan])).tolist() == [2]  # NaN sorts last
    assert fg.searchsorted(T([3.0, 1.0, 2.0]), T([2.5]), sorter=fg.tensor([1, 2, 0])).tolist() == [2]
    assert fg.searchsorted(T([1.0]), T([1.0]), out_int32=True).dtype == fg.int32
    assert fg.bincount(fg.tensor([1, 1]), weights=T([0.5, 0.25], fg.float16)).dtype == fg.float64
    assert fg.bincount(fg.tensor([1, 1]), weights=T([0.5, 0.25], fg.float32)).dtype == fg.float32
    assert fg.histc(T([1.0, 2.0, 1.0, 2.5]), bins=4).tolist() == [2.0, 0.0, 1.0, 1.0]
    assert fg.histc(T([5.0, 5.0]), bins=2).tolist() == [0.0, 2.0]  # range [4, 6]
    assert fg.histc(T([-1.0, 0.0, 1.0, 2.0]), bins=2, min=0, max=1).tolist() == [1.0, 1.0]
    v, m = fg.var_mean(T([[1.0, 2.0], [3.0, 5.0]]), 1)
    assert vals(v).tolist() == [0.5, 2.0] and vals(m).tolist() == [1.5, 4.0]
    s, m = fg.std_mean(T([1.0, 3.0]), False)  # the (input, unbiased) form
    assert vals(s) == 1.0 and vals(m) == 2.0
    assert fg.cross(T(np.eye(3)), T(np.roll(np.eye(3), 1, 0))).shape == (3, 3)
    assert fg.count_nonzero(fg.tensor([[0, 1], [2, 3]]), dim=(0, 1)).item() == 3
    assert fg.tensordot(T(np.ones((2, 3))), T(np.ones((3, 2))), dims=0).shape == (2, 3, 3, 2)
    assert fg.tensordot(T(np.ones((2, 3))), T(np.ones((3, 2))), dims=fg.tensor([[1], [0]])).shape == (2, 2)
    assert fg.signbit(fg.tensor([True])).tolist() == [False]
    assert fg.isin(fg.tensor([1, 2, 3]), 2).tolist() == [False, True, False]
    assert fg.diag_embed(T([1.0, 2.0]), -1).tolist() == [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    # beta=0 ignores input (NaN there does not propagate)
    assert fg.addmm(T([[math.nan]]), T([[2.0]]), T([[3.0]]), beta=0).tolist() == [[6.0]]
    assert fg.diag_embed(T([math.inf])).tolist() == [[math.inf]]  # no inf * 0


# ---------------------------------------------------------------------------
# Graph capture
# ---------------------------------------------------------------------------


def test_bincount_refuses_capture():
    x = fg.tensor([0, 1, 1])
    with pytest.raises(fg.TraceError, match=r"bincount\(\): the output length depends on the input's values"):
        fg.compile(lambda t: fg.bincount(t))(x)


def test_repeat_interleave_capture_needs_output_size():
    x, r = T([1.0, 2.0, 3.0]), fg.tensor([2, 0, 1])
    with pytest.raises(fg.TraceError, match=r"repeat_interleave\(\).*pass output_size"):
        fg.compile(lambda a, b: fg.repeat_interleave(a, b))(x, r)
    f = fg.compile(lambda a, b: fg.repeat_interleave(a, b, output_size=3))
    for _ in range(2):
        assert vals(f(x, r)).tolist() == [1.0, 1.0, 3.0]
    assert f.stats.traces == 1


def test_compositions_capture_with_gradients():
    """Value-independent compositions capture, gradients included (no host reads while tracing)."""

    def fn(a, b):
        a = a.detach().requires_grad_()
        y = fg.erfinv(a * 0.5) + fg.logcumsumexp(b, 0).sum() + fg.histc(b, bins=3).sum()
        y = y + fg.searchsorted(fg.tensor([0.0, 1.0], dtype=fg.float64), a).sum()
        return fg.autograd.grad(y.sum(), [a])[0]

    a, b = T([0.1, -0.4]), T([3.0, 1.0, -2.0])
    want = fn(a, b)
    f = fg.compile(fn)
    np.testing.assert_array_equal(vals(f(a, b)), vals(want))
    np.testing.assert_array_equal(vals(f(a, b)), vals(want))


def test_polygamma_at_infinities_as_pytorch():
    """trigamma has no limit at -inf (a pole at every negative integer): NaN there, as PyTorch
    2.15 gives for float32 and float64 (SciPy says inf); 0 at +inf, inf at the pole 0."""
    for dtype in (fg.float32, fg.float64):
        got = vals(fg.polygamma(1, fg.tensor([-math.inf, math.inf, 0.0, math.nan], dtype=dtype)))
        assert np.isnan(got[0]) and got[1] == 0.0 and got[2] == math.inf and np.isnan(got[3]), (dtype, got)


def test_polygamma_is_inf_at_the_negative_integers():
    """trigamma's poles at 0, -1, -2, ... are inf (both one-sided limits, SciPy's value), in
    float32 and float64. A deliberate difference: PyTorch 2.15 gives inf at 0 only, and
    7.3e31, 1.6e32, 6.6e32 at -3, -2, -1 in float64 (1.7e16, 3.2e14, 1.3e15 in float32), a
    rounding artefact of ``sin(pi * x)`` in its reflection formula."""
    x = np.array([-4.0, -3.0, -2.0, -1.0, 0.0])
    assert (sp.polygamma(1, x) == math.inf).all()
    for dtype in (fg.float32, fg.float64):
        got = vals(fg.polygamma(1, fg.tensor(x.tolist(), dtype=dtype)))
        assert (got == math.inf).all(), (dtype, got)
        # next to a pole the values stay finite and right
        t = fg.tensor((x[:4] + 1e-3).tolist(), dtype=dtype)
        near = vals(t).astype(np.float64)  # the float32 inputs as rounded
        np.testing.assert_allclose(
            vals(fg.polygamma(1, t)), sp.polygamma(1, near), rtol=1e-5 if dtype == fg.float32 else 1e-10
        )


def test_polygamma_higher_orders_accuracy():
    """n = 2..6 against SciPy over both sides of the reflection, the poles ``(-1)^(n+1) inf``
    as PyTorch and SciPy give them, 0 at +inf. At a negative half-integer ``-k - 1/2`` an even
    order equals its value at ``k + 3/2`` exactly (the recurrence's terms cancel in pairs),
    which the reflection keeps; SciPy's and PyTorch's sums lose 2e-8 of it at -7.5 for n = 6."""
    x = np.concatenate([np.linspace(-9.7, 30.3, 161), [-2.5, -0.5, 1e-6, -1e-6, 0.5, 1e3]])
    for n in range(2, 7):
        np.testing.assert_allclose(
            vals(fg.polygamma(n, T(x))), sp.polygamma(n, x), rtol=1e-10, err_msg=str(n)
        )
        if n % 2 == 0:
            half = np.array([-7.5, -6.5, -3.5, -0.5])
            got, want = vals(fg.polygamma(n, T(half))), vals(fg.polygamma(n, T(1 - half)))
            np.testing.assert_allclose(got, want, rtol=1e-14, err_msg=str(n))
        got = vals(fg.polygamma(n, T([0.0, -1.0, -4.0, math.inf])))
        assert got[:3].tolist() == [(-1) ** (n + 1) * math.inf] * 3 and got[3] == 0.0, (n, got)


def test_polygamma_compiled_gradient_equals_eager_exactly():
    """trigamma's recurrence once built ``(x + k) * (x + k)`` from two equal nodes; a compiled
    graph's CSE merged them and its gradient summed the paths in another order (1 ulp off
    eager at x = 3.462..., found by the op table's compiled column with other samples)."""
    x0 = np.random.default_rng(0).uniform(-4.5, 8.0, 64)

    def fn(x):
        return fg.polygamma(1, x)

    grads = []
    for f in (fn, fg.compile(fn)):
        x = fg.tensor(x0).requires_grad_()
        (f(x) * fg.tensor(np.linspace(1.0, 2.0, 64))).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])


def test_sinc_float32_gradient_near_zero():
    """sinc's float32 gradient within the op table's low-precision bound, 16 u (|g| + |v|), and
    within 4 u (|g| + |v|) below |x| = 1/2: the quotient's gradient cos(pi x)/x - sin(pi x)/(pi x^2)
    cancelled terms of size 1/x there (2,700 u at x = 0.001; the ``sinc-grad-float32`` cell
    failed at x = 0.178 with other samples); the series used there has no such terms."""
    x32 = np.concatenate([np.linspace(-3, 3, 6001), np.geomspace(1e-6, 0.5, 200)]).astype(np.float32)
    x = x32.astype(np.float64)
    px = np.pi * x
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(x == 0, 0.0, (np.cos(px) * px - np.sin(px)) / (px * x))
    t = fg.tensor(x32).requires_grad_()
    (g,) = fg.autograd.grad([fg.sinc(t)], [t], [fg.ones_like(t)])
    units = np.abs(g.numpy().astype(np.float64) - want) / (2.0**-24 * (np.abs(want) + 1.0))
    assert units.max() <= 16 and units[np.abs(x) < 0.5].max() <= 4, (units.max(), units[np.abs(x) < 0.5].max())


# ---------------------------------------------------------------------------
# cummax / cummin
# ---------------------------------------------------------------------------


def test_cummax_cummin_ties_take_the_latest_index_and_nan_propagates():
    x = T([1.0, 3.0, 3.0, 2.0, math.nan, 5.0, math.nan, 0.0])
    v, i = fg.cummax(x, 0)
    assert i.tolist() == [0, 1, 2, 2, 4, 4, 6, 6]
    np.testing.assert_array_equal(vals(v), [1, 3, 3, 3, math.nan, math.nan, math.nan, math.nan])
    r = x.cummin(0)
    assert type(r).__name__ == "cummin" and r._fields == ("values", "indices")
    assert r.indices.tolist() == [0, 0, 0, 0, 4, 4, 6, 6]


def test_cummax_gradient_goes_to_the_selected_elements():
    (g,) = grads(lambda a: fg.cummax(a, 1).values, T([[1.0, 3.0, 2.0, 4.0], [5.0, 1.0, 2.0, 0.0]]))
    np.testing.assert_array_equal(vals(g), [[1, 2, 0, 1], [4, 0, 0, 0]])


def test_cummax_errors_name_the_op():
    with pytest.raises((IndexError, ValueError), match="cummax"):
        fg.cummax(T([1.0, 2.0]), 1)
    with pytest.raises(TypeError, match="cummin"):
        fg.cummin([1.0, 2.0], 0)
