"""``ferrograd.special`` (``torch.special``) and ``logit``/``i0``/``mvlgamma``.

Values are checked against SciPy in float64 over wide ranges with the tails, ±inf, NaN,
0 and the poles; PyTorch's own conventions (``logit``'s ``eps`` clamp, ``entr(-1) = -inf``,
``xlog1py(0, -1) = 0``, ``special.round``'s ``decimals``) against stored PyTorch references
(``scripts/make_special_references.py``, which records the version). Float32 results are
compared with the float64 ones, gradients with finite differences in float64.
"""

from __future__ import annotations

from pathlib import Path

import ferrograd as fg
import ferrograd.special as special
import numpy as np
import pytest
import scipy.special as sp

REF = Path(__file__).parent / "fixtures" / "parity" / "special.npz"
INF, NAN = np.inf, np.nan

# Wide grid with the tails, the branch points (0.5, 2 for erfc/erfcx, -1 for log_ndtr, 20 for
# the Bessel functions), the overflow edges of exp and the special values.
X_WIDE = np.concatenate(
    [
        np.linspace(-45.0, 45.0, 361),
        np.geomspace(1e-12, 1e3, 60),
        -np.geomspace(1e-12, 1e3, 60),
        [
            -1e300,
            -1e5,
            -709.0,
            -39.0,
            -38.0,
            -26.0,
            -2.0,
            -1.0,
            -0.5,
            0.0,
            -0.0,
            0.5,
            2.0,
            19.999,
            20.0,
            20.001,
        ],
        [26.0, 27.0, 700.0, 712.0, 1e5, 1e300, INF, -INF, NAN],
    ]
)
P_GRID = np.concatenate(
    [
        [0.0, 1.0, -0.1, 1.1, NAN, 0.5, 0.2, 0.8, 1e-300, 5e-324],
        np.geomspace(1e-300, 0.5, 120),
        1 - np.geomspace(2**-53, 0.5, 60),
        np.linspace(0.01, 0.99, 99),
    ]
)


def t64(a, **kw) -> fg.Tensor:
    return fg.tensor(np.asarray(a, dtype=np.float64), **kw)


def check(got, want, rtol: float, atol: float = 0.0, what: str = "") -> None:
    """Equal NaN/inf pattern, otherwise ``|got - want| <= atol + rtol |want|``."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN pattern")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: infinities")
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=atol, err_msg=what)


def _unscaled(scaled):
    """``I(x)`` from SciPy's exponentially scaled ``I(x) exp(-|x|)``, times ``exp(|x|/2)`` twice:
    finite up to where ``I`` itself overflows (SciPy's ``i0(712)`` is inf, but ``I0(712)`` is
    2.5e307). At ±inf the limit, ±inf: SciPy 1.17, NumPy's ``i0`` and PyTorch 2.15 give NaN
    there for ``i0`` and ``i1`` (exp(inf) times a scaled 0); ferrograd departs from them."""

    def ref(x):
        h = np.exp(np.abs(x) / 2)
        out = (scaled(x) * h) * h
        return np.where(np.isinf(x), np.sign(x) * INF if scaled is sp.i1e else INF, out)

    return ref


# (name, scipy reference, rtol in float64, atol). rtol: the compositions are within a few
# hundred ulp except where noted; erfc and erfcx between 0.5 and 2 (x < -2.8 for ndtr) use
# exp(x^2) (1 - erf(x)), whose cancellation costs up to 5e-14 relatively; atol covers the
# subnormal range where SciPy's ndtr flushes to 0 (ours keeps the subnormal).
UNARY = [
    ("erfcx", sp.erfcx, 1e-13, 0.0),
    ("ndtr", sp.ndtr, 1e-13, 1e-300),
    ("log_ndtr", sp.log_ndtr, 1e-13, 1e-300),
    ("i0", _unscaled(sp.i0e), 5e-15, 0.0),
    ("i0e", sp.i0e, 5e-15, 0.0),
    ("i1", _unscaled(sp.i1e), 5e-15, 0.0),
    ("i1e", sp.i1e, 5e-15, 0.0),
    ("entr", sp.entr, 1e-15, 0.0),
]


@pytest.mark.covers(*(f"torch.special.{u[0]}" for u in UNARY))
@pytest.mark.parametrize("name,ref,rtol,atol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float64_against_scipy(name, ref, rtol, atol):
    fn = getattr(special, name)
    with np.errstate(all="ignore"):
        want = ref(X_WIDE)
    check(fn(t64(X_WIDE)).numpy(), want, rtol, atol, name)


def test_probability_functions_float64():
    # ndtri: the residual of the Newton steps carries erfcx's error (5e-14 near x = -2.8)
    # divided by the slope; relative 2e-13 covers it. Near 1/2, where the result is small,
    # the absolute error is a few 1e-17.
    with np.errstate(all="ignore"):
        check(special.ndtri(t64(P_GRID)).numpy(), sp.ndtri(P_GRID), 2e-13, 1e-16, "ndtri")
        check(special.logit(t64(P_GRID)).numpy(), sp.logit(P_GRID), 1e-15, 0.0, "logit")
    # ndtri inverts ndtr in the lower tail (above 1/2 ndtr(x) rounds to within 1e-16 of 1,
    # which leaves few digits of x); the upper one follows by symmetry, checked above
    x = np.concatenate([np.linspace(-37.0, 1.0, 77), [-1e-5, 1e-5]])
    back = special.ndtri(special.ndtr(t64(x))).numpy()
    check(back, x, 1e-12, 3e-16, "ndtri(ndtr(x))")


def test_binary_and_multigammaln_float64():
    a, b = np.meshgrid([0.0, -0.0, 1.0, -2.5, 3e5, INF, NAN], [-2.0, -1.0, -0.5, 0.0, 1e-20, 3.0, INF, NAN])
    with np.errstate(all="ignore"):
        check(special.xlog1py(t64(a), t64(b)).numpy(), sp.xlog1py(a, b), 1e-15, 0.0, "xlog1py")
    s, q = np.meshgrid(
        np.concatenate([np.linspace(1.001, 60.0, 40), [0.5, 1.0, 1.5, 2.0]]),
        np.concatenate([np.geomspace(1e-3, 1e3, 25), [0.0, -1.0, -3.0, INF]]),
    )
    # Euler-Maclaurin with 9 terms written out: within 1e-14 of SciPy
    check(special.zeta(t64(s), t64(q)).numpy(), sp.zeta(s, q), 1e-14, 0.0, "zeta")
    x = np.concatenate([np.linspace(2.0001, 40.0, 50), [1e3, INF]])
    for p in (1, 2, 5):
        want = np.array([sp.multigammaln(v, p) for v in x])
        # atol: lgamma's absolute error near its root at 2 (2e-15 at 2.0001)
        check(special.multigammaln(t64(x), p).numpy(), want, 1e-14, 1e-14, f"multigammaln p={p}")
    # scalar arguments broadcast as in PyTorch
    check(special.zeta(t64([2.0, 3.0]), 1.0).numpy(), sp.zeta([2.0, 3.0], 1.0), 1e-14)
    check(special.xlog1py(2.0, t64([0.5])).numpy(), sp.xlog1py(2.0, [0.5]), 1e-15)


FUNCS32 = ["erfcx", "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr", "logit", "ndtri"]


@pytest.mark.parametrize("dtype,rtol", [("float32", 2.4e-7), ("float16", 1e-3), ("bfloat16", 8e-3)])
def test_low_precision_is_the_rounded_float64_result(dtype, rtol):
    """On the CPU a float32/float16 input is computed in float64 and rounded once: within one
    rounding (half an ulp, relative) of the float64 result on the same (rounded) input."""
    dt = getattr(fg, dtype)
    for name in FUNCS32:
        xs = P_GRID if name in ("logit", "ndtri") else X_WIDE
        x = fg.tensor(xs, dtype=fg.float64).to(dt)
        got = getattr(special, name)(x)
        assert got.dtype == dt, (name, got.dtype)
        want = getattr(special, name)(x.to(fg.float64)).to(dt)
        # compare as float64, relative to the float64 value where both are normal numbers
        g, w = got.to(fg.float64).numpy(), want.to(fg.float64).numpy()
        check(g, w, rtol, float(fg.finfo(dt).tiny), f"{name} {dtype}")
    z = special.zeta(fg.tensor([2.0, 4.5], dtype=dt), fg.tensor([1.0, 3.0], dtype=dt))
    assert z.dtype == dt
    check(z.to(fg.float64).numpy(), sp.zeta([2.0, 4.5], [1.0, 3.0]).astype(np.float32), rtol)
    ints = special.i0(fg.tensor([0, 1, 2]))
    assert ints.dtype == fg.float32
    check(ints.numpy(), sp.i0([0.0, 1.0, 2.0]), 1e-7)


def test_pytorch_edge_values():
    """PyTorch's conventions, from the stored references (version recorded in the file)."""
    ref = np.load(REF)
    assert str(ref["torch_version"]).startswith("2.")
    fns = {
        "logit_eps": lambda x: special.logit(x, eps=0.1),
        "logit_eps_small": lambda x: fg.logit(x, eps=1e-6),
        "logit": fg.logit,
        "entr": special.entr,
        "xlog1py": special.xlog1py,
        "xlogy": special.xlogy,
        "ndtri": special.ndtri,
        "log_ndtr": special.log_ndtr,
        "erfcx": special.erfcx,
        "ndtr": special.ndtr,
        "i0e": special.i0e,
        "i1e": special.i1e,
        "round2": lambda x: special.round(x, decimals=2),
        "round_m2": lambda x: special.round(x, decimals=-2),
        "multigammaln3": lambda x: special.multigammaln(x, 3),
        "softmax_f32": lambda x: special.softmax(x.reshape(2, 3), 1, dtype=fg.float32).to(fg.float64),
        "log_softmax_0": lambda x: special.log_softmax(x.reshape(2, 3), 0),
    }
    for name, fn in fns.items():
        x = t64(ref[f"{name}/x"], requires_grad=f"{name}/grad" in ref.files)
        args = [x] if f"{name}/y" not in ref.files else [x, t64(ref[f"{name}/y"])]
        out = fn(*args)
        rtol = 1e-6 if name == "softmax_f32" else 1e-13
        check(out.detach().numpy().reshape(-1), ref[f"{name}/out"], rtol, 0.0, name)
        if f"{name}/grad" in ref.files:
            (g,) = fg.autograd.grad(out.sum(), x)
            check(g.numpy(), ref[f"{name}/grad"], 1e-12, 0.0, f"{name} grad")


def test_aliases_and_top_level_names():
    assert special.gammaln is fg.lgamma
    assert special.psi is fg.digamma is special.digamma
    assert special.expit is fg.sigmoid
    for name in (
        "erf",
        "erfc",
        "erfinv",
        "expm1",
        "exp2",
        "log1p",
        "polygamma",
        "xlogy",
        "sinc",
        "softmax",
        "log_softmax",
        "logsumexp",
    ):
        assert getattr(special, name) is getattr(fg, name), name
    assert fg.special is special
    x = t64([0.2, 0.7, 3.0])
    check(fg.logit(x[:2]).numpy(), sp.logit([0.2, 0.7]), 1e-15)
    check(x[:2].logit(eps=0.25).numpy(), sp.logit([0.25, 0.7]), 1e-15)
    check(fg.i0(x).numpy(), sp.i0(x.numpy()), 1e-15)
    check(x.i0().numpy(), sp.i0(x.numpy()), 1e-15)
    check(fg.mvlgamma(x[2:], 2).numpy(), [sp.multigammaln(3.0, 2)], 1e-15)
    check(x[2:].mvlgamma(p=2).numpy(), [sp.multigammaln(3.0, 2)], 1e-15)
    check(special.round(t64([0.5, 1.5, -2.5])).numpy(), [0.0, 2.0, -2.0], 0.0)
    check(special.polygamma(1, x).numpy(), sp.polygamma(1, x.numpy()), 1e-12)
    # the aliases compute what SciPy does (their own accuracy is tested with the top-level names)
    v = np.array([-3.0, -0.5, 0.0, 0.25, 2.5])
    tv = t64(v)
    check(special.erf(tv).numpy(), sp.erf(v), 1e-14)
    check(special.erfc(tv).numpy(), sp.erfc(v), 1e-13)
    check(special.erfinv(t64(v / 4)).numpy(), sp.erfinv(v / 4), 1e-12)
    check(special.expm1(tv).numpy(), sp.expm1(v), 1e-14)
    check(special.exp2(tv).numpy(), sp.exp2(v), 1e-14)
    check(special.log1p(t64(v + 3.5)).numpy(), np.log1p(v + 3.5), 1e-14)
    check(special.sinc(tv).numpy(), np.sinc(v), 1e-14, 1e-16)
    check(special.logsumexp(tv, 0).numpy(), sp.logsumexp(v), 1e-14)
    check(special.gammaln(tv).numpy(), sp.gammaln(v), 1e-12)


GRAD_POINTS = {
    "logit": [0.01, 0.3, 0.5, 0.7, 0.99],
    "entr": [0.1, 1.0, 3.0],
    "erfcx": [-3.0, -0.3, 0.7, 1.5, 2.5, 30.0],
    "ndtr": [-5.0, -1.0, 0.0, 2.0],
    "log_ndtr": [-50.0, -5.0, -1.5, -0.5, 0.0, 3.0],
    "ndtri": [1e-3, 0.01, 0.3, 0.5, 0.9, 0.999],
    "i0": [-25.0, -3.0, 0.0, 0.5, 19.0, 21.0],
    "i0e": [-25.0, -3.0, 0.5, 19.0, 21.0],
    "i1": [-25.0, -3.0, 0.0, 0.5, 19.0, 21.0],
    "i1e": [-25.0, -3.0, 0.5, 19.0, 21.0],
}


@pytest.mark.parametrize("name", sorted(GRAD_POINTS))
def test_gradcheck(name):
    fn = getattr(special, name)
    x = t64(GRAD_POINTS[name], requires_grad=True)
    assert fg.autograd.gradcheck(fn, (x,))
    if name in ("i0", "i1e", "log_ndtr", "ndtri", "logit"):
        assert fg.autograd.gradgradcheck(fn, (x,))


def test_gradcheck_binary_and_derivative_identities():
    a = t64([0.5, 2.0, -1.0], requires_grad=True)
    b = t64([0.3, -0.5, 4.0], requires_grad=True)
    assert fg.autograd.gradcheck(special.xlog1py, (a, b))
    s = t64([1.5, 3.0, 7.0], requires_grad=True)
    q = t64([0.5, 2.0, 10.0], requires_grad=True)
    assert fg.autograd.gradcheck(special.zeta, (s, q))
    m = t64([1.2, 3.0, 7.0], requires_grad=True)
    assert fg.autograd.gradcheck(lambda v: special.multigammaln(v, 3), (m,))
    # i0' = i1 and i1' = i0 - i1/x, through the composition (series and asymptotic branch)
    x = t64([-30.0, -2.0, 0.0, 0.7, 19.5, 20.5, 80.0], requires_grad=True)
    (g0,) = fg.autograd.grad(special.i0(x).sum(), x)
    check(g0.numpy(), sp.i1(x.detach().numpy()), 1e-14, 1e-300)
    xn = x.detach().numpy()
    (g1,) = fg.autograd.grad(special.i1e(x).sum(), x)
    want = sp.i0e(xn) - sp.i1e(xn) * (np.sign(xn) + 1.0 / np.where(xn == 0, 1.0, xn))
    want[xn == 0] = 0.5
    check(g1.numpy(), want, 1e-13)


def test_compiled_matches_eager():
    def f(a):
        return special.i1e(a) + special.log_ndtr(a) + special.erfcx(a) * special.entr(a.abs())

    def g(p):
        return special.ndtri(p) + special.logit(p, eps=1e-3) + special.xlog1py(p, p)

    a = t64([-30.0, -3.0, -0.5, 0.0, 0.2, 2.5, 25.0])
    p = t64([1e-5, 0.2, 0.5, 0.9, 0.9999])
    np.testing.assert_array_equal(fg.compile(f)(a).numpy(), f(a).numpy())
    np.testing.assert_array_equal(fg.compile(g)(p).numpy(), g(p).numpy())


@pytest.mark.skipif(not fg.gpu.is_available(), reason="no WebGPU adapter for the GPU parity check")
def test_gpu_float32_against_scipy():
    """The GPU has no float64: the compositions run in float32 there. Tolerances: the GPU's
    exp is allowed 3 + 2|x| ulp (WGSL), which shows in i0/i1 near |x| = 30 (2e-6) and in
    the float32 erfc fit of the tails (ndtr below -6: exp(-x^2) of a rounded x^2; 8e-6 on
    lavapipe, up to 1.5e-5 by the WGSL bound at x = -13, hence 5e-5)."""
    xs = np.concatenate([np.linspace(-30.0, 30.0, 121), [0.0, INF, -INF, NAN]]).astype(np.float32)
    x64 = xs.astype(np.float64)
    tol = {"erfcx": 5e-5, "ndtr": 5e-5, "log_ndtr": 5e-5, "i0": 1e-5, "i0e": 1e-5, "i1": 1e-5, "i1e": 1e-5}
    with np.errstate(all="ignore"):
        for name, rtol in tol.items():
            got = getattr(special, name)(fg.tensor(xs).to("gpu")).cpu().numpy()
            ref = {"i0": _unscaled(sp.i0e), "i1": _unscaled(sp.i1e)}.get(name, getattr(sp, name))
            want = ref(x64).astype(np.float32)
            check(got, want, rtol, 1e-37, f"{name} on the GPU")
        ps = np.concatenate([np.geomspace(1e-30, 0.5, 30), np.linspace(0.5, 0.999, 20), [0.0, 1.0]]).astype(
            np.float32
        )
        got = special.ndtri(fg.tensor(ps).to("gpu")).cpu().numpy()
        check(got, sp.ndtri(ps.astype(np.float64)), 1e-5, 1e-6, "ndtri on the GPU")
        got = special.logit(fg.tensor(ps).to("gpu")).cpu().numpy()
        check(got, sp.logit(ps.astype(np.float64)), 1e-6, 1e-7, "logit on the GPU")


def test_bad_input_raises_clearly():
    with pytest.raises(TypeError, match="i0"):
        special.i0([1.0])
    with pytest.raises(RuntimeError, match=r"multigammaln.*\(p-1\)/2"):
        special.multigammaln(t64([0.5, 3.0]), 3)
    with pytest.raises(RuntimeError, match="multigammaln.*p"):
        special.multigammaln(t64([3.0]), 0)
    with pytest.raises(RuntimeError, match=r"zeta.*\(2,\).*\(3,\)"):
        special.zeta(fg.ones(2), fg.ones(3))
    with pytest.raises(TypeError, match="logit.*eps"):
        special.logit(t64([0.5]), eps="0.1")
    with pytest.raises(TypeError, match="round.*decimals"):
        special.round(t64([0.5]), decimals=1.5)
    with pytest.raises(TypeError, match="xlog1py"):
        special.xlog1py(1.0, 2.0)
