"""The half-normal distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .cauchy import _half_expand, _outside_to_neg_inf
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

Tensor = _core.Tensor

__all__ = ["HalfNormal"]


class HalfNormal(TransformedDistribution):
    """``|X|`` for ``X ~ Normal(0, scale)``: density ``sqrt(2 / pi) / scale * exp(-x^2 / (2 scale^2))``
    on ``x >= 0``. ``rsample`` is reparameterised."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base = Normal(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> HalfNormal:
        """This distribution with ``scale`` expanded to ``batch_shape``."""
        return _half_expand(self, batch_shape, _instance)  # type: ignore[no-any-return]

    @property
    def scale(self) -> Tensor:
        """The scale of the underlying normal distribution."""
        return self.base_dist.scale  # type: ignore[attr-defined,no-any-return]

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value.abs()) + math.log(2)
        return _outside_to_neg_inf(value, lp)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
