"""The gamma distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from ._gamma_sampling import standard_gamma
from ._special import digamma, lgamma
from .distribution import Distribution, _shape
from .utils import broadcast_all, tiny

Tensor = _core.Tensor

__all__ = ["Gamma"]


def regularized_gamma_p(a: Tensor, x: Tensor) -> Tensor:
    """The regularised lower incomplete gamma function ``P(a, x)`` (``x >= 0``), as the
    series ``sum_n x^(a + n) e^(-x) / Gamma(a + n + 1)`` summed in log space over enough
    terms to pass the largest ``x`` (the terms are positive, so the sum is stable for
    every ``x``); composed of differentiable ops, so gradients flow to ``a`` and ``x``."""
    a, x = a * _core.ones_like(x), x * _core.ones_like(a)
    if x.numel() == 0:
        return x
    xmax = float(x.max().item())
    gap = float((x - a).clamp(min=0.0).max().item())
    n_terms = int(math.ceil(gap + 12.0 * math.sqrt(max(xmax, float(a.max().item()), 1.0)) + 40.0))
    k = _core.arange(1, n_terms, dtype=a.dtype, device=a.device)
    au = a.unsqueeze(-1)
    zero = _core.zeros((*a.shape, 1), dtype=a.dtype, device=a.device)
    log_rising = _core.cat([zero, (au + k).log().cumsum(-1)], -1)  # sum_{k<=n} log(a + k)
    n = _core.arange(n_terms, dtype=a.dtype, device=a.device)
    positive = x > 0
    xs = _core.where(positive, x, _core.ones_like(x))  # log 0 kept out of the graph
    log_t = (au + n) * xs.log().unsqueeze(-1) - xs.unsqueeze(-1) - lgamma(a + 1.0).unsqueeze(-1) - log_rising
    p = log_t.logsumexp(-1).exp().clamp(max=1.0)
    return _core.where(positive, p, _core.zeros_like(p))


class Gamma(Distribution):
    """The gamma distribution with shape ``concentration`` and inverse scale ``rate``:
    density ``rate^a x^(a-1) exp(-rate x) / Gamma(a)`` on ``x > 0``.

    ``rsample`` is reparameterised: exact draws (made on the CPU in float64)
    whose gradient with respect to ``concentration`` is the implicit
    reparameterisation gradient ``-(dF/da) / pdf``, computed from a series of
    the incomplete gamma function (its cost grows with the largest draw).
    ``cdf`` is the regularised incomplete gamma function from the same series
    (relative accuracy in the lower tail, about 1e-10 absolute near 1).
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self, concentration: Tensor | float, rate: Tensor | float, validate_args: bool | None = None
    ) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate, who="Gamma")
        super().__init__(tuple(self.concentration.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Gamma:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.concentration, new.rate = self.concentration.expand(*shape), self.rate.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        x = standard_gamma(self.concentration, _shape(sample_shape)) / self.rate
        return x.clamp(min=tiny(x.dtype))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return a * b.log() + (a - 1) * value.log() - b * value - lgamma(a)

    def cdf(self, value: Tensor) -> Tensor:
        """``P(concentration, rate * value)``, the regularised incomplete gamma function."""
        if self._validate_args:
            self._validate_sample(value)
        return regularized_gamma_p(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + lgamma(a) + (1.0 - a) * digamma(a)
