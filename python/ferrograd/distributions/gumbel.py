"""The Gumbel (type-I extreme value) distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .cauchy import _half_expand
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .uniform import Uniform
from .utils import broadcast_all, eps, tiny

Tensor = _core.Tensor

__all__ = ["Gumbel"]

EULER_GAMMA = 0.57721566490153286060651209008240243


class Gumbel(TransformedDistribution):
    """The Gumbel distribution with location ``loc`` and scale ``scale``: density
    ``exp(-(z + exp(-z))) / scale`` with ``z = (x - loc) / scale``.

    As PyTorch, a uniform draw pushed through ``loc - scale * log(-log(u))``;
    ``rsample`` is reparameterised.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale, who="Gumbel")
        dt = self.loc.dtype
        low = _core.full_like(self.loc, tiny(dt))
        high = _core.full_like(self.loc, 1 - eps(dt))
        base = Uniform(low, high, validate_args=False)
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=-1.0),
            ExpTransform().inv,
            AffineTransform(loc=self.loc, scale=-self.scale),
        ]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Gumbel:
        """This distribution with ``loc`` and ``scale`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.loc, new.scale = self.loc.expand(*shape), self.scale.expand(*shape)
        out = _half_expand(self, shape, new)
        out.transforms = self.transforms[:3] + [AffineTransform(loc=new.loc, scale=-new.scale)]
        return out  # type: ignore[no-any-return]

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc - self.scale * (-value.log()).log()

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * EULER_GAMMA

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + EULER_GAMMA)
