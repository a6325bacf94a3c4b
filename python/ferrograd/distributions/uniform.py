"""The continuous uniform distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _capture, _core
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Uniform"]


class Uniform(Distribution):
    """The uniform distribution on the half-open interval ``[low, high)``.

    ``rsample`` is reparameterised: ``low + (high - low) * u`` with ``u``
    uniform on ``[0, 1)``.
    """

    arg_constraints = {
        "low": constraints.dependent,
        "high": constraints.dependent,
    }
    has_rsample = True

    def __init__(self, low: Tensor | float, high: Tensor | float, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high, who="Uniform")
        super().__init__(tuple(self.low.shape), validate_args=validate_args)
        if self._validate_args and not _capture.is_capturing() and not bool((self.low < self.high).all()):
            raise ValueError(
                f"Uniform is not defined when low >= high: expected parameter low (Tensor of shape "
                f"{tuple(self.low.shape)}) to be below high everywhere, got low={self.low}, high={self.high}"
            )

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Uniform:
        """This distribution with ``low`` and ``high`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.low, new.high = self.low.expand(*shape), self.high.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.half_open_interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return self.high * float("nan")

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _core.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value).logical_and(self.high > value).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0.0, max=1.0)

    def icdf(self, value: Tensor) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()
