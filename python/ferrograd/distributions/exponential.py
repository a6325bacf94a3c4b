"""The exponential distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Exponential"]


class Exponential(Distribution):
    """The exponential distribution with ``rate`` λ: density ``λ exp(-λ x)`` for ``x >= 0``.

    ``rsample`` is reparameterised: ``-log(1 - u) / rate`` with ``u`` uniform in [0, 1).
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative  # type: ignore[assignment]
    has_rsample = True

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate, who="Exponential")
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Exponential:
        """This distribution with ``rate`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.rate = self.rate.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _core.rand(shape, dtype=self.rate.dtype, device=self.rate.device)
        return (-u).log1p().neg() / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return (-value).log1p().neg() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()
