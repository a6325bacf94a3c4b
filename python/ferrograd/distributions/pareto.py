"""The Pareto (type I) distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .cauchy import _half_expand
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Pareto"]


class Pareto(TransformedDistribution):
    """The Pareto distribution with ``scale`` x_m and shape ``alpha``: density
    ``alpha x_m^alpha / x^(alpha + 1)`` on ``x >= x_m``.

    As PyTorch, ``scale * exp(E)`` with ``E ~ Exponential(alpha)``; ``rsample`` is
    reparameterised. ``mean`` is infinite for ``alpha <= 1``, ``variance`` for ``alpha <= 2``.
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    has_rsample = True  # type: ignore[assignment]

    def __init__(
        self, scale: Tensor | float, alpha: Tensor | float, validate_args: bool | None = None
    ) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha, who="Pareto")
        base = Exponential(self.alpha, validate_args=False)
        super().__init__(base, [ExpTransform(), AffineTransform(0, self.scale)], validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Pareto:
        """This distribution with ``scale`` and ``alpha`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.scale, new.alpha = self.scale.expand(*shape), self.alpha.expand(*shape)
        out = _half_expand(self, shape, new)
        out.transforms = [ExpTransform(), AffineTransform(0, new.scale)]
        return out  # type: ignore[no-any-return]

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1.0)
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2.0)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lp = self.alpha.log() + self.alpha * self.scale.log() - (self.alpha + 1) * value.log()
        return _core.where(value >= self.scale, lp, _core.full_like(lp, -math.inf))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (self.scale / value).pow(self.alpha)

    def icdf(self, value: Tensor) -> Tensor:
        return self.scale * (-(-value).log1p() / self.alpha).exp()

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + self.alpha.reciprocal() + 1
