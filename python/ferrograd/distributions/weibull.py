"""The Weibull distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .cauchy import _half_expand
from .exponential import Exponential
from .gumbel import EULER_GAMMA
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    """The Weibull distribution with ``scale`` λ and shape ``concentration`` k: density
    ``(k / λ) (x / λ)^(k - 1) exp(-(x / λ)^k)`` on ``x >= 0``.

    As PyTorch, an ``Exponential(1)`` draw raised to ``1 / k`` and scaled by λ;
    ``rsample`` is reparameterised. ``mode`` is 0 for ``k <= 1`` (the density's
    maximum; PyTorch's formula gives other values there).
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(
        self, scale: Tensor | float, concentration: Tensor | float, validate_args: bool | None = None
    ) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration, who="Weibull")
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(_core.ones_like(self.scale), validate_args=False)
        transforms = [PowerTransform(self.concentration_reciprocal), AffineTransform(0, self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Weibull:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.scale = self.scale.expand(*shape)
        new.concentration = self.concentration.expand(*shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        out = _half_expand(self, shape, new)
        out.transforms = [PowerTransform(new.concentration_reciprocal), AffineTransform(0, new.scale)]
        return out  # type: ignore[no-any-return]

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(-(value / self.scale).pow(self.concentration)).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        return self.scale * (-(-value).log1p()).pow(self.concentration_reciprocal)

    @property
    def mean(self) -> Tensor:
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self) -> Tensor:
        k = self.concentration
        ratio = ((k - 1) / k).clamp(min=0.0)
        return self.scale * ratio.pow(self.concentration_reciprocal)

    @property
    def variance(self) -> Tensor:
        r = self.concentration_reciprocal
        return self.scale.pow(2) * ((1 + 2 * r).lgamma().exp() - (2 * (1 + r).lgamma()).exp())

    def entropy(self) -> Tensor:
        r = self.concentration_reciprocal
        return EULER_GAMMA * (1 - r) + (self.scale * r).log() + 1
