"""The beta distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from ._gamma_sampling import standard_gamma
from ._special import digamma, lbeta
from .distribution import Distribution, _shape
from .utils import broadcast_all, eps

Tensor = _core.Tensor

__all__ = ["Beta"]


class Beta(Distribution):
    """The beta distribution on ``(0, 1)`` with shapes ``concentration1`` (alpha) and
    ``concentration0`` (beta).

    ``rsample`` is reparameterised: ``X / (X + Y)`` with ``X``, ``Y``
    reparameterised gamma draws (see :class:`Gamma`).
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self,
        concentration1: Tensor | float,
        concentration0: Tensor | float,
        validate_args: bool | None = None,
    ) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0, who="Beta")
        super().__init__(tuple(self.concentration1.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Beta:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.concentration1 = self.concentration1.expand(*shape)
        new.concentration0 = self.concentration0.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        """``(a - 1) / (a + b - 2)`` with ``a - 1`` and ``b - 1`` clamped at 0; when both
        shapes are below 1, the end with the larger shape (as PyTorch)."""
        a, b = self.concentration1, self.concentration0
        am1, bm1 = (a - 1).clamp(min=0.0), (b - 1).clamp(min=0.0)
        both_small = (a < 1).logical_and(b < 1)
        corner = (a > b).to(a.dtype)
        return _core.where(both_small, corner, am1 / (am1 + bm1))

    @property
    def variance(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = a + b
        return a * b / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = _shape(sample_shape)
        x = standard_gamma(self.concentration1, shape)
        y = standard_gamma(self.concentration0, shape)
        e = eps(x.dtype)
        return (x / (x + y)).clamp(min=e, max=1.0 - e)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (a - 1) * value.log() + (b - 1) * (-value).log1p() - lbeta(a, b)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = a + b
        return lbeta(a, b) - (a - 1) * digamma(a) - (b - 1) * digamma(b) + (total - 2) * digamma(total)
