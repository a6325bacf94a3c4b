"""``ferrograd.special``: PyTorch's ``torch.special`` namespace.

The functions that ferrograd already has elsewhere are the same objects here
(``special.gammaln is ferrograd.lgamma``, ``special.expit`` is ``sigmoid``); the
others are composed in Python of registry ops, as ``_tensor_extras`` composes
``erfinv`` and ``lgamma``: they run on every device and in every mode those ops do
(eager, autograd to any order, captured graphs, the GPU). One-tensor functions
compute in float64 on the CPU (float32 on the GPU) and round once to the input's
float dtype; integers give float32.

Numerical choices:

- ``erfcx(x) = exp(x**2) erfc(x)``: Laplace's continued fraction without its
  ``exp(-x**2)`` factor in the tail, so it neither underflows nor overflows there.
- ``log_ndtr(x)`` below -1 is ``log(erfcx(-x/sqrt 2) / 2) - x**2/2``, accurate for any
  negative ``x`` (where ``ndtr`` itself underflows, from about -38 in float64);
  above, ``log1p(-ndtr(-x))``.
- ``ndtri`` refines a rational first guess with Newton steps on ``log_ndtr`` (whose
  slope ``sqrt(2/pi) / erfcx(-x/sqrt 2)`` never underflows), symmetric about 1/2 so that
  both tails keep their precision.
- ``i0``/``i1`` (and the exponentially scaled ``i0e``/``i1e``): the power series up to
  ``|x| = 20`` and the asymptotic expansion beyond, each with enough terms for float64.
- ``zeta(x, q)``: the first terms of the Hurwitz sum written out, the rest by
  Euler-Maclaurin.

Importing this module also installs the PyTorch names that live outside
``torch.special``: ``ferrograd.logit``/``Tensor.logit``, ``ferrograd.i0``/``Tensor.i0``
and ``ferrograd.mvlgamma``/``Tensor.mvlgamma``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

from . import _capture, _core
from ._surface_more import erfc, exp2
from ._tensor_extras import (
    _ERFC_P,
    _ZETA_TAIL,
    _as_method,
    _broadcast_shape,
    _float_pair,
    _need_tensor,
    _odd,
    _poly,
    _to_float,
    _where_safe,
    _wide,
    digamma,
    erfinv,
    lgamma,
    polygamma,
    sinc,
    xlogy,
)

Tensor = _core.Tensor
_Number = int | float | bool

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
    "zeta",
]

# Aliases: the same objects as the top-level functions.
erf = Tensor.erf
expm1 = Tensor.expm1
log1p = Tensor.log1p
expit = Tensor.sigmoid
softmax = Tensor.softmax
log_softmax = Tensor.log_softmax
logsumexp = Tensor.logsumexp
psi = digamma
gammaln = lgamma

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_LOG_PI = math.log(math.pi)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round to ``decimals`` decimal places, halves to even (as ``torch.round``): for
    ``decimals != 0`` the input is scaled by ``10**decimals``, rounded and scaled back."""
    x = _need_tensor("special.round", "input", input)
    if isinstance(decimals, bool) or not isinstance(decimals, int):
        raise TypeError(f"special.round(): decimals must be an int, got {type(decimals).__name__}")
    if decimals == 0 or not x.dtype.is_floating_point:
        return x.round()
    if decimals > 0:
        scale = 10.0**decimals
        return (x * scale).round() / scale
    scale = 10.0 ** (-decimals)
    return (x / scale).round() * scale


# ---------------------------------------------------------------------------
# Logistic and entropy
# ---------------------------------------------------------------------------


@_wide
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``. With ``eps``, ``p`` is first clamped to ``[eps, 1 - eps]`` (so the
    gradient is 0 outside it), as PyTorch does; NaN stays NaN. Near 1/2 it is computed as
    ``log1p((2p - 1) / (1 - p))``, which keeps its relative precision where the result is small."""
    x = _to_float(_need_tensor("logit", "input", input))
    if eps is not None:
        if not isinstance(eps, int | float) or isinstance(eps, bool):
            raise TypeError(f"logit(): eps must be a float or None, got {type(eps).__name__}")
        x = _core.where(x.isnan(), x, x.clamp(float(eps), 1.0 - float(eps)))
    mid = (x - 0.5).abs() < 0.25
    xm = _where_safe(~mid, x, 0.5)
    xo = _where_safe(mid, x, 0.1)
    near = ((xm * 2 - 1) / (1 - xm)).log1p()
    far = (xo / (1 - xo)).log()
    return _core.where(mid, near, far)


@_wide
def entr(input: Tensor) -> Tensor:
    """The entropy term ``-x log x`` for ``x > 0``, 0 at 0, ``-inf`` below 0 (NaN stays NaN)."""
    x = _to_float(_need_tensor("entr", "input", input))
    pos = x > 0
    xs = _where_safe(~pos, x, 1.0)
    out = _core.where(pos, -(xs * xs.log()), 0.0)
    out = _core.where(x < 0, -math.inf, out)
    return _core.where(x.isnan(), x, out)


def xlog1py(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """``input * log1p(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    x, y = _float_pair("xlog1py", input, other)
    zero = (x == 0) & ((y <= -1) | (y == math.inf))
    return x * _core.where(zero, 0.0, _where_safe(zero, y, 0.0).log1p())


# ---------------------------------------------------------------------------
# Error function and the normal distribution
# ---------------------------------------------------------------------------


# Terms of the continued fraction for erfcx (the same fraction as erfc's, float64 from z = 2).
_ERFCX_CF_TERMS = 60


def _erfcx_cf(z: Tensor) -> Tensor:
    """``exp(z**2) erfc(z) = 1/sqrt(pi) / (z + (1/2)/(z + 1/(z + (3/2)/(z + ...))))`` for ``z >= 2``."""
    acc = z
    for k in range(_ERFCX_CF_TERMS, 0, -1):
        acc = z + (k * 0.5) / acc
    return _INV_SQRT_PI / acc


# erfc's float32 tail fit, t exp(-z^2 + P(t)), without the exp(-z^2): exp(z^2) erfc(z)
# to a relative 1.2e-7 for z >= 0.
def _erfcx_fit(z: Tensor) -> Tensor:
    t = (z * 0.5 + 1).reciprocal()
    return t * _poly(t, _ERFC_P).exp()


def _erfcx(x: Tensor) -> Tensor:
    wide = x.dtype == _core.float64
    cut = 2.0 if wide else 0.5
    tail = x >= cut
    xt = _where_safe(~tail, x, cut)
    xn = _where_safe(tail, x, 0.0)
    far = _erfcx_cf(xt) if wide else _erfcx_fit(xt)
    near = (xn * xn).exp() * erfc(xn)
    out = _core.where(tail, far, near)
    return _core.where(x == math.inf, 0.0, out)


@_wide
def erfcx(input: Tensor) -> Tensor:
    """The scaled complementary error function ``exp(x**2) erfc(x)``: finite and accurate
    for large ``x`` (about ``1 / (x sqrt(pi))``), where ``erfc`` underflows; ``inf`` for very
    negative ``x``, where ``exp(x**2)`` overflows."""
    return _erfcx(_to_float(_need_tensor("erfcx", "input", input)))


@_wide
def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2``, as ``erfc(-x / sqrt 2) / 2`` so
    that the lower tail keeps its relative precision."""
    x = _to_float(_need_tensor("ndtr", "input", input))
    return erfc(x * -_SQRT_HALF) * 0.5


def _log_ndtr(x: Tensor) -> Tensor:
    low = x < -1.0
    xl = _where_safe(~low, x, -2.0)
    xh = _where_safe(low, x, 0.0)
    lower = (_erfcx(xl * -_SQRT_HALF) * 0.5).log() - xl * xl * 0.5
    upper = (erfc(xh * _SQRT_HALF) * -0.5).log1p()
    return _core.where(low, lower, upper)


@_wide
def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``, accurate for all ``x``: below -1 as ``log(erfcx(-x/sqrt 2) / 2) - x**2/2``
    (finite down to where ``x**2`` overflows, though ``ndtr`` underflows from about -38), above
    as ``log1p(-erfc(x/sqrt 2) / 2)`` (small and accurate for large ``x``)."""
    return _log_ndtr(_to_float(_need_tensor("log_ndtr", "input", input)))


# Abramowitz and Stegun 26.2.23: for 0 < q <= 1/2, with t = sqrt(-2 log q),
# ndtri(q) ~ -(t - (c0 + c1 t + c2 t^2) / (1 + d1 t + d2 t^2 + d3 t^3)), |error| < 4.5e-4.
_NDTRI_C = (2.515517, 0.802853, 0.010328)
_NDTRI_D = (1.0, 1.432788, 0.189269, 0.001308)
_NDTRI_NEWTON = 3


@_wide
def ndtri(input: Tensor) -> Tensor:
    """The inverse of :func:`ndtr` on [0, 1] (``-inf`` at 0, ``inf`` at 1, NaN outside).

    For ``q = min(p, 1 - p)`` (``1 - p`` is exact for ``p >= 1/2``) a rational first guess
    (to 4.5e-4) is refined by Newton steps on ``log_ndtr(x) = log q``, whose slope
    ``sqrt(2/pi) / erfcx(-x/sqrt 2)`` is finite in the far tail; the result is negated for
    ``p > 1/2``. The guess carries no gradient and the steps do, so the gradient converges
    to ``1 / pdf(x)`` at every order."""
    p = _to_float(_need_tensor("ndtri", "input", input))
    upper = p > 0.5
    q = _core.where(upper, 1 - p, p)
    inside = (q > 0) & (p <= 1)
    qs = _where_safe(~inside, q, 0.25)
    logq = qs.log()
    q0 = qs.detach()
    t = (q0.log() * -2.0).sqrt()
    guess = -(t - _poly(t, _NDTRI_C) / _poly(t, _NDTRI_D))
    x = guess
    for _ in range(_NDTRI_NEWTON):
        slope = _SQRT_2_OVER_PI / _erfcx(x * -_SQRT_HALF)
        x = x - (_log_ndtr(x) - logq) / slope
    x = _core.where(upper, -x, x)
    # Near 1/2 the residual is taken as erf(x/sqrt 2)/2 - (p - 1/2), both exact to their own
    # magnitude, so that the small result keeps its relative precision.
    central = (p - 0.5).abs() < 0.3
    pc = _where_safe(~central, p, 0.5)
    xc = _core.where(upper, -guess, guess)
    xc = _where_safe(~central, xc, 0.0)
    for _ in range(_NDTRI_NEWTON):
        pdf = (xc * xc * -0.5).exp() * (_SQRT_2_OVER_PI * 0.5)
        xc = xc - ((xc * _SQRT_HALF).erf() * 0.5 - (pc - 0.5)) / pdf
    x = _core.where(central, xc, x)
    x = _core.where(p == 0, -math.inf, x)
    x = _core.where(p == 1, math.inf, x)
    return _core.where((p < 0) | (p > 1) | p.isnan(), math.nan, x)


# ---------------------------------------------------------------------------
# Gamma family
# ---------------------------------------------------------------------------


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_{j < p} lgamma(x - j/2)``. As in PyTorch, every element
    must exceed ``(p - 1) / 2``: checked on the CPU in eager mode (not on the GPU, where it
    would read the values back, nor while a graph is captured)."""
    x = _to_float(_need_tensor("multigammaln", "input", input))
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise RuntimeError(f"multigammaln(): p has to be an int greater than or equal to 1, got {p!r}")
    if not _capture.is_capturing() and str(x.device) == "cpu" and x.numel() > 0:
        if not bool((x > (p - 1) / 2).all()):
            raise RuntimeError(
                f"multigammaln(): all elements of input (shape {tuple(x.shape)}, {x.dtype}) must be "
                f"greater than (p-1)/2 = {(p - 1) / 2}"
            )
    out = lgamma(x)
    for j in range(1, p):
        out = out + lgamma(x - j * 0.5)
    return out + p * (p - 1) * 0.25 * _LOG_PI


def _hurwitz(s: Tensor, q: Tensor) -> Tensor:
    """``sum_k (q + k)**-s`` for ``s > 1``: the first 9 terms, then Euler-Maclaurin at ``z = q + 9``."""
    n = 9
    total = q.abs().pow(-s)
    for k in range(1, n):
        total = total + (q + k).abs().pow(-s)
    z = q + n
    inv = z.reciprocal()
    inv2 = inv * inv
    zs = z.pow(-s)
    tail = zs * z / (s - 1) + zs * 0.5
    power = zs * inv
    rising = s
    for j, c in enumerate(_ZETA_TAIL, start=1):
        tail = tail + power * rising * c
        power = power * inv2
        rising = rising * (s + (2 * j - 1)) * (s + 2 * j)
    return total + tail


def zeta(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """The Hurwitz zeta function ``sum_{k >= 0} (other + k) ** -input`` for ``input > 1`` and
    ``other > 0`` (``inf`` at ``input == 1``, NaN for ``input < 1``; for ``other <= 0``
    ``inf`` at the integers, as PyTorch and Cephes give it, and NaN otherwise)."""
    s, q = _float_pair("zeta", input, other)
    _broadcast_shape("zeta", tuple(s.shape), tuple(q.shape))
    if s.dtype == q.dtype and s.dtype.is_floating_point:
        out_dt = s.dtype
    else:
        out_dt = _core.float64 if _core.float64 in (s.dtype, q.dtype) else _core.float32
    on_cpu = str(s.device) == "cpu" and str(q.device) == "cpu"
    work = _core.float64 if on_cpu else out_dt
    s64, q64 = s.to(work), q.to(work)
    ok = (s64 > 1) & (q64 > 0)
    ss = _where_safe(~ok, s64, 2.0)
    qs = _where_safe(~ok, q64, 1.0)
    out = _hurwitz(ss, qs)
    out = _core.where(ok, out, math.nan)
    out = _core.where((s64 == 1) | ((q64 <= 0) & (q64 == q64.floor()) & (s64 > 1)), math.inf, out)
    out = _core.where((q64 == math.inf) & (s64 > 1), 0.0, out)
    # s = inf: q**-s is inf below 1, 1 at 1 and 0 above
    s_inf = _core.where(q64 < 1, math.inf, _core.where(q64 == 1, 1.0, 0.0))
    out = _core.where((s64 == math.inf) & (q64 > 0), s_inf, out)
    return out.to(out_dt)


# ---------------------------------------------------------------------------
# Modified Bessel functions of the first kind, orders 0 and 1
# ---------------------------------------------------------------------------

_BESSEL_CUT = 20.0
# I0(x) = sum_k (x^2/4)^k / (k!)^2, I1(x) = x/2 sum_k (x^2/4)^k / (k! (k+1)!): positive terms,
# 60 of them make the remaining ones smaller than 1e-18 of the sum for |x| <= 20.
_SERIES_TERMS = 60


def _series(y: Tensor, order: int) -> Tensor:
    """``sum_k y^k / (k! (k + order)!)`` term by term (each term the previous one times
    ``y / (k (k + order))``), not by Horner's rule: Horner's gradient carries ``y^k`` for the
    inner terms, which overflows float32 (``y = 100`` at ``x = 20``) and gave NaN."""
    term = _core.ones_like(y)
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * y * (1.0 / (k * (k + order)))
        total = total + term
    return total


def _asymptotic(nu: int) -> tuple[float, ...]:
    """Coefficients of ``I_nu(x) exp(-x) sqrt(2 pi x) ~ sum_k (-1)^k a_k(nu) / x^k``,
    ``a_k = prod_{j <= k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)``, up to the first term below
    1e-18 at ``x = 20`` (the series diverges; its smallest term there is 5e-19)."""
    out = [1.0]
    a = 1.0
    for k in range(1, 60):
        a *= (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8)
        out.append((-1) ** k * a)
        if abs(a) / _BESSEL_CUT**k < 1e-18:
            break
    return tuple(out)


_I0_ASYM = _asymptotic(0)
_I1_ASYM = _asymptotic(1)


def _bessel_parts(x: Tensor, order: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(large, series, scaled_asymptotic)`` for ``x >= 0``: ``series`` is ``I_order(x)`` for
    ``x <= 20``, ``scaled_asymptotic`` is ``I_order(x) exp(-x)`` above (each fed a safe value
    where the other applies)."""
    large = x > _BESSEL_CUT
    xs = _where_safe(large, x, 1.0)
    xl = _where_safe(~large, x, 2 * _BESSEL_CUT)
    y = xs * xs * 0.25
    series = _series(y, order)
    if order == 1:
        series = series * xs * 0.5
    inv = xl.reciprocal()
    coeffs = _I0_ASYM if order == 0 else _I1_ASYM
    scaled = _poly(inv, coeffs) * (xl * (2 * math.pi)).rsqrt()
    scaled = _core.where(xl == math.inf, 0.0, scaled)
    return large, series, scaled


def _bessel(x: Tensor, order: int, scaled: bool) -> Tensor:
    """``I_order(x)`` (times ``exp(-x)`` if ``scaled``) for ``x >= 0``."""
    large, series, asym = _bessel_parts(x, order)
    xs = _where_safe(large, x, 0.0)
    xl = _where_safe(~large, x, 0.0)
    if scaled:
        return _core.where(large, asym, series * (-xs).exp())
    h = (xl * 0.5).exp()  # exp(x) = h * h: finite while I(x) is, though exp(x) overflows first
    out = _core.where(large, (asym * h) * h, series)
    return _core.where(x == math.inf, math.inf, out)


def _bessel_any(fn: str, input: Tensor, order: int, scaled: bool) -> Tensor:
    x = _to_float(_need_tensor(fn, "input", input))
    if order == 1:
        return _odd(x, lambda a: _bessel(a, 1, scaled))
    neg = x < 0
    return _bessel(_core.where(neg, -x, x), 0, scaled)


@_wide
def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind, order 0 (even; ``inf`` at ±inf)."""
    return _bessel_any("i0", input, 0, False)


@_wide
def i0e(input: Tensor) -> Tensor:
    """``i0(x) * exp(-|x|)``: finite for all ``x`` (0 at ±inf)."""
    return _bessel_any("i0e", input, 0, True)


@_wide
def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind, order 1 (odd; ±inf at ±inf)."""
    return _bessel_any("i1", input, 1, False)


@_wide
def i1e(input: Tensor) -> Tensor:
    """``i1(x) * exp(-|x|)`` (odd, 0 at ±inf)."""
    return _bessel_any("i1e", input, 1, True)


# ---------------------------------------------------------------------------
# PyTorch names outside torch.special
# ---------------------------------------------------------------------------


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """``torch.mvlgamma``: :func:`multigammaln`."""
    return multigammaln(input, p)


_TOP_LEVEL: dict[str, Callable[..., Any]] = {"logit": logit, "i0": i0, "mvlgamma": mvlgamma}


def _install() -> None:
    """Add ``logit``, ``i0`` and ``mvlgamma`` to ``ferrograd`` and as ``Tensor`` methods
    (never replacing a name that is already there)."""
    pkg = sys.modules[__name__.rpartition(".")[0]]
    for name, fn in _TOP_LEVEL.items():
        if not hasattr(pkg, name):
            setattr(pkg, name, fn)
        if name not in Tensor.__dict__:
            setattr(Tensor, name, _as_method(fn, name))


_install()
