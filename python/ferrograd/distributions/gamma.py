"""The gamma distribution."""

from __future__ import annotations

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


class Gamma(Distribution):
    """The gamma distribution with shape ``concentration`` and inverse scale ``rate``:
    density ``rate^a x^(a-1) exp(-rate x) / Gamma(a)`` on ``x > 0``.

    ``rsample`` is reparameterised: exact draws (made on the CPU in float64)
    whose gradient with respect to ``concentration`` is the implicit
    reparameterisation gradient ``-(dF/da) / pdf``, computed from a series of
    the incomplete gamma function (its cost grows with the largest draw).
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

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + lgamma(a) + (1.0 - a) * digamma(a)
