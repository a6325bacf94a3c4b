"""The gamma-function family for all real ``x``: ``lgamma``, ``digamma`` and ``polygamma`` of any
order, composed of registry ops. Imported through :mod:`ferrograd._tensor_extras` (whose helpers
it uses), which re-exports them."""

from __future__ import annotations

import math

from . import _core
from ._tensor_extras import _need_tensor, _to_float, _where_safe, _wide, signbit
from .distributions import _special

Tensor = _core.Tensor
# ---------------------------------------------------------------------------
# Gamma-function family (all real x)
# ---------------------------------------------------------------------------


def _reflect(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The split the reflection formulas below 0.5 use: ``(refl, xp, xn, r)`` with ``refl =
    x < 0.5``, ``xp`` / ``xn`` the arguments of the direct and reflected branches (each set to
    a harmless value where the other applies), and ``r = xn - round(xn)``, exact, so that
    ``sin(pi x) = ±sin(pi r)`` is exactly 0 at the poles."""
    refl = x < 0.5
    xp = _where_safe(refl, x, 1.0)
    xn = _where_safe(~refl, x, 0.0)
    return refl, xp, xn, xn - xn.round()


@_wide
def lgamma(input: Tensor) -> Tensor:
    """``log|Gamma(x)|`` for all real ``x`` (the reflection formula below 0.5; +inf at
    the poles 0, -1, -2, ... and at ±inf)."""
    x = _to_float(_need_tensor("lgamma", "input", input))
    refl, xp, xn, r = _reflect(x)
    s = (r * math.pi).sin().abs()
    neg = math.log(math.pi) - s.log() - _special.lgamma(1 - xn)
    out = _core.where(refl, neg, _special.lgamma(xp))
    return _core.where(x.isinf(), math.inf, out)


@_wide
def digamma(input: Tensor) -> Tensor:
    """``d/dx log Gamma(x)`` for all real ``x`` (reflection ``psi(1 - x) - pi / tan(pi x)``
    below 0.5; ``-inf`` at +0.0 and ``+inf`` at -0.0, NaN at the negative integers, as PyTorch)."""
    x = _to_float(_need_tensor("digamma", "input", input))
    refl, xp, xn, r = _reflect(x)
    pole = r == 0
    rs = _where_safe(pole, r, 0.25)
    neg = _special.digamma(1 - xn) - math.pi / (rs * math.pi).tan()
    neg = _core.where(pole, math.nan, neg)
    out = _core.where(refl, neg, _special.digamma(xp))
    return _core.where(x == 0, _core.where(signbit(x), math.inf, -math.inf), out)


_SHIFT = 8
_TRIGAMMA_COEFFS = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730)


def _trigamma_pos(x: Tensor) -> Tensor:
    """``psi'(x)`` for ``x > 0``: the recurrence up to ``z = x + 8``, then the asymptotic
    series ``1/z + 1/(2 z**2) + sum_k B_2k / z**(2k+1)``."""
    shift = (x * x).reciprocal()
    for k in range(1, _SHIFT):
        # one node for x + k: two equal ones are merged by a compiled graph's CSE, whose
        # gradient then sums the square's two paths in another order than eager mode
        xk = x + k
        shift = shift + (xk * xk).reciprocal()
    z = x + _SHIFT
    inv = z.reciprocal()
    inv2 = inv * inv
    series = inv2 * _TRIGAMMA_COEFFS[-1]
    for c in reversed(_TRIGAMMA_COEFFS[:-1]):
        series = (series + c) * inv2
    return shift + inv + inv2 * 0.5 + series * inv


# B_2j / (2j)! for the Euler-Maclaurin tail of the Hurwitz zeta function
_ZETA_TAIL = tuple(
    b / math.factorial(2 * j)
    for j, b in enumerate(
        (
            1 / 6,
            -1 / 30,
            1 / 42,
            -1 / 30,
            5 / 66,
            -691 / 2730,
            7 / 6,
            -3617 / 510,
            43867 / 798,
            -174611 / 330,
        ),
        start=1,
    )
)


def _polygamma_pos(n: int, x: Tensor) -> Tensor:
    """``psi^(n)(x)`` for ``n >= 2`` and ``x > 0``: ``(-1)^(n+1) n! zeta(n + 1, x)``, the sum's
    first ``8 + n`` terms written out and the rest by Euler-Maclaurin at ``z = x + 8 + n``."""
    s = n + 1
    shift = 8 + n
    total = x.reciprocal() ** s
    for k in range(1, shift):
        total = total + (x + k).reciprocal() ** s
    z = x + shift
    inv = z.reciprocal()
    inv2 = inv * inv
    zs1 = inv ** (s - 1)
    zs = zs1 * inv
    tail = zs1 * (1 / (s - 1)) + zs * 0.5
    power = zs * inv  # z^(-s - 2j + 1) for j = 1
    rising = float(s)  # s (s + 1) ... (s + 2j - 2)
    for j, c in enumerate(_ZETA_TAIL, start=1):
        tail = tail + power * (c * rising)
        power = power * inv2
        rising *= (s + 2 * j - 1) * (s + 2 * j)
    return (total + tail) * ((-1) ** (n + 1) * math.factorial(n))


def _cot_derivative(n: int, c: Tensor) -> Tensor:
    """``d^n/dx^n cot(x)`` as a polynomial in ``c = cot(x)``: ``Q_0 = c``,
    ``Q_(k+1) = -(1 + c^2) Q_k'`` (coefficients by power, found here in Python)."""
    q = [0, 1]
    for _ in range(n):
        dq = [i * q[i] for i in range(1, len(q))]  # Q'
        nxt = [0] * (len(dq) + 2)
        for i, a in enumerate(dq):  # -(1 + c^2) Q'
            nxt[i] -= a
            nxt[i + 2] -= a
        q = nxt
    out = c * 0.0 + float(q[-1])
    for a in reversed(q[:-1]):
        out = out * c + float(a)
    return out


@_wide
def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of ``digamma``, any ``n >= 0``.

    Below 0.5 (``n >= 2``) the reflection ``psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1)
    Q_n(cot(pi x))``; at the poles 0, -1, -2, ... ``(-1)^(n+1) inf`` (the limit from the right,
    as PyTorch and SciPy give it for ``n >= 2``). At ``+inf``: 0 (SciPy's value; PyTorch 2.15
    gives NaN for ``n >= 2``); at ``-inf`` NaN for every ``n >= 1``: the poles leave no limit
    (PyTorch gives NaN for ``n = 1``, but +-inf for ``n >= 2``, as SciPy does).

    At the poles (0, -1, -2, ...) ``polygamma(1, x)`` is ``inf``, the limit from both sides
    and SciPy's value. PyTorch 2.15 gives ``inf`` at 0 but large finite numbers at the negative
    integers (1.6e32 at -2.0 in float64, 3.2e14 in float32): its reflection formula divides
    by ``sin(pi * x)**2``, which rounds to ~1e-31 there instead of 0. Here the sine is taken
    of ``x - round(x)``, exactly 0 at an integer, so the pole is ``inf``."""
    x = _to_float(_need_tensor("polygamma", "input", input))
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise RuntimeError(f"polygamma(): n must be a non-negative int, got {n!r}")
    if n == 0:
        return digamma(x)
    refl, xp, xn, r = _reflect(x)
    if n >= 2:
        pole = r == 0
        rs = _where_safe(pole, r, 0.25)
        # cot(pi r): cos / sin near the poles, tan(pi (1/2 - |r|)) near the half-integers, where
        # it is exactly 0 (cos(pi / 2) would leave 6e-17, which pi^(n+1) Q_n scales up)
        small = rs.abs() < 0.25
        rc = _where_safe(small, rs, 0.25)
        c = _core.where(
            small,
            (rs * math.pi).cos() / (rs * math.pi).sin(),
            ((0.5 - rc.abs()) * math.pi).tan() * rc.sign(),
        )
        neg = _polygamma_pos(n, 1 - xn) * float((-1) ** n) - _cot_derivative(n, c) * math.pi ** (n + 1)
        neg = _core.where(pole, (-1) ** (n + 1) * math.inf, neg)
        return _core.where(refl, neg, _polygamma_pos(n, xp))
    s = (r * math.pi).sin()
    neg = (math.pi**2) / (s * s) - _trigamma_pos(1 - xn)
    return _core.where(refl, neg, _trigamma_pos(xp))
