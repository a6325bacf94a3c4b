"""``lgamma`` and ``digamma`` for positive arguments, composed of tensor ops.

Both shift the argument up by ``_SHIFT`` with the recurrences
``lgamma(x) = lgamma(x + n) - sum_k log(x + k)`` and
``digamma(x) = digamma(x + n) - sum_k 1 / (x + k)``, then apply the
asymptotic (Stirling) series, whose truncation error at ``x + n >= 8`` is
below ``1e-13``. They are differentiable (autograd differentiates the
composition, so ``lgamma``'s gradient is an accurate ``digamma``), and
valid for ``x > 0`` only, which is all the distributions here need.
"""

from __future__ import annotations

import math

from .. import _core

Tensor = _core.Tensor

__all__ = ["digamma", "lbeta", "lgamma"]

_SHIFT = 8
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Stirling's series for lgamma: sum_k B_2k / (2k (2k - 1) z^(2k - 1))
_LGAMMA_COEFFS = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)
# The asymptotic series of digamma: -sum_k B_2k / (2k z^2k)
_DIGAMMA_COEFFS = (-1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760)


def lgamma(x: Tensor) -> Tensor:
    """``log(Gamma(x))`` for ``x > 0`` (NaN elsewhere)."""
    shift = x.log()
    for k in range(1, _SHIFT):
        shift = shift + (x + k).log()
    z = x + _SHIFT
    inv = z.reciprocal()
    inv2 = inv * inv
    series = _LGAMMA_COEFFS[-1]
    for c in reversed(_LGAMMA_COEFFS[:-1]):
        series = series * inv2 + c
    stirling = (z - 0.5) * z.log() - z + _HALF_LOG_2PI + series * inv
    return stirling - shift


def digamma(x: Tensor) -> Tensor:
    """``d/dx log(Gamma(x))`` for ``x > 0`` (NaN elsewhere)."""
    shift = x.reciprocal()
    for k in range(1, _SHIFT):
        shift = shift + (x + k).reciprocal()
    z = x + _SHIFT
    inv2 = (z * z).reciprocal()
    series = _DIGAMMA_COEFFS[-1]
    for c in reversed(_DIGAMMA_COEFFS[:-1]):
        series = series * inv2 + c
    return z.log() - 0.5 * z.reciprocal() + series * inv2 - shift


def lbeta(a: Tensor, b: Tensor) -> Tensor:
    """``log(B(a, b)) = lgamma(a) + lgamma(b) - lgamma(a + b)``."""
    return lgamma(a) + lgamma(b) - lgamma(a + b)
