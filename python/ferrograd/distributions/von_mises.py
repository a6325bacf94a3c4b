"""The von Mises (circular normal) distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["VonMises"]

_SERIES_MAX = 15.0  # below: the power series; above: the asymptotic expansion
_SERIES_TERMS = 60
_ASYMPTOTIC_TERMS = 14


def _log_bessel_i(x: Tensor, order: int) -> Tensor:
    """``log I_order(x)`` for ``x > 0`` and ``order`` 0 or 1, composed of differentiable ops:
    the power series ``sum_k (x/2)^(2k+n) / (k! (k+n)!)`` up to ``x = 15`` (60 terms), the
    large-argument expansion ``e^x / sqrt(2 pi x) sum_k (-1)^k a_k(n) / x^k`` above it
    (14 terms); both are accurate to about 1e-12 relative in float64."""
    n = order
    xs = x.clamp(max=_SERIES_MAX)
    q = (xs / 2).pow(2)
    term = (xs / 2).pow(n) / math.factorial(n) if n else _core.ones_like(xs)
    total = term
    for k in range(_SERIES_TERMS):
        term = term * q / ((k + 1) * (k + 1 + n))
        total = total + term
    log_series = total.log()
    xa = x.clamp(min=_SERIES_MAX)
    mu = 4.0 * n * n
    # a_k(n) (-1)^k = prod_j -(mu - (2j - 1)^2) / (8 j)
    coeff = 1.0
    inv = xa.reciprocal()
    acc = _core.ones_like(xa)
    power = _core.ones_like(xa)
    for k in range(1, _ASYMPTOTIC_TERMS + 1):
        coeff *= -(mu - (2 * k - 1) ** 2) / (k * 8.0)
        power = power * inv
        acc = acc + coeff * power
    log_asym = xa - 0.5 * (2 * math.pi * xa).log() + acc.log()
    return _core.where(x <= _SERIES_MAX, log_series, log_asym)


def _rejection_sample(
    loc: Tensor, concentration: Tensor, proposal_r: Tensor, shape: tuple[int, ...]
) -> Tensor:
    """Best and Fisher's (1979) wrapped-Cauchy rejection sampler, in float64."""
    done = _core.zeros(shape, dtype=_core.bool)
    x = _core.zeros(shape, dtype=_core.float64)
    while not bool(done.all()):
        u = _core.rand((3, *shape), dtype=_core.float64)
        u1, u2, u3 = u[0], u[1], u[2]
        z = (math.pi * u1).cos()
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0).logical_or((c / u2).log() + 1 - c >= 0)
        new = accept.logical_and(done.logical_not())
        x = _core.where(new, (u3 - 0.5).sign() * f.clamp(min=-1.0, max=1.0).acos(), x)
        done = done.logical_or(accept)
    return (x + math.pi + loc).remainder(2 * math.pi) - math.pi


class VonMises(Distribution):
    """The von Mises distribution on the circle with mean direction ``loc`` and
    ``concentration`` κ: density ``exp(κ cos(x - loc)) / (2 pi I0(κ))`` on [-pi, pi).

    ``sample`` uses Best and Fisher's rejection scheme (in float64 on the CPU, as
    PyTorch, whose scheme this is); there is no ``rsample``. ``variance`` is the circular
    variance ``1 - I1(κ) / I0(κ)``.
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real  # type: ignore[assignment]
    has_rsample = False

    def __init__(
        self, loc: Tensor | float, concentration: Tensor | float, validate_args: bool | None = None
    ) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration, who="VonMises")
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> VonMises:
        """This distribution with ``loc`` and ``concentration`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.loc, new.concentration = self.loc.expand(*shape), self.concentration.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        """The circular mean ``loc``."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        """The circular variance ``1 - I1(κ) / I0(κ)``."""
        k = self.concentration
        return 1 - (_log_bessel_i(k, 1) - _log_bessel_i(k, 0)).exp()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return k * (value - self.loc).cos() - math.log(2 * math.pi) - _log_bessel_i(k, 0)

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            k = self.concentration.detach().cpu().to(_core.float64)
            loc = self.loc.detach().cpu().to(_core.float64)
            tau = 1 + (1 + 4 * k.pow(2)).sqrt()
            rho = (tau - (2 * tau).sqrt()) / (2 * k)
            r = (1 + rho.pow(2)) / (2 * rho)
            r = _core.where(k < 1e-5, k.reciprocal() + k, r)  # the small-κ limit
            out = _rejection_sample(loc.expand(*shape), k.expand(*shape), r.expand(*shape), shape)
            out = out.to(self.loc.dtype)
            return out.to(self.loc.device) if out.device != self.loc.device else out
