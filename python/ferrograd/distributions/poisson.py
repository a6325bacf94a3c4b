"""The Poisson distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from ._gamma_sampling import sample_poisson
from ._special import lgamma
from .distribution import Distribution, _shape
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Poisson"]


class Poisson(Distribution):
    """The Poisson distribution with mean ``rate``: ``P(k) = rate^k exp(-rate) / k!``.

    Samples are counts in the rate's (floating) dtype, drawn on the CPU in
    float64 (inversion below rate 10, transformed rejection above); there is
    no ``rsample``. ``log_prob`` is differentiable in ``rate``.
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer  # type: ignore[assignment]

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate, who="Poisson")
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Poisson:
        """This distribution with ``rate`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.rate = self.rate.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        with no_grad():
            return sample_poisson(self.rate, _shape(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate = self.rate
        value = value.to(rate.dtype) if value.dtype != rate.dtype else value
        # xlogy(value, rate): 0 where value == 0 (also when rate == 0)
        safe = _core.where(value == 0, _core.ones_like(rate * value), rate * _core.ones_like(value))
        return value * safe.log() - rate - lgamma(value + 1)
