"""The Cauchy (Lorentz) distribution and the half-Cauchy distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Cauchy", "HalfCauchy"]


class Cauchy(Distribution):
    """The Cauchy distribution with median ``loc`` and half-width ``scale``: density
    ``1 / (pi scale (1 + ((x - loc) / scale)^2))``. Its mean and variance do not exist
    (``mean`` is NaN, ``variance`` infinite, as in PyTorch).

    ``rsample`` is reparameterised: ``loc + scale * tan(pi (u - 1/2))`` with ``u`` uniform.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real  # type: ignore[assignment]
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale, who="Cauchy")
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Cauchy:
        """This distribution with ``loc`` and ``scale`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.loc, new.scale = self.loc.expand(*shape), self.scale.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return _core.full_like(self.loc, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return _core.full_like(self.loc, math.inf)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _core.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * (math.pi * (u - 0.5)).tan()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - z.pow(2).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


def _half_expand(self: TransformedDistribution, batch_shape: Sequence[int], _instance: Any) -> Any:
    """``TransformedDistribution.expand`` into ``_instance`` (a new instance of ``self``'s class
    when ``None``), for the subclasses that keep their own parameters."""
    new = object.__new__(type(self)) if _instance is None else _instance
    return TransformedDistribution.expand(self, batch_shape, _instance=new)


def _outside_to_neg_inf(value: Tensor, log_prob: Tensor) -> Tensor:
    return _core.where(value >= 0, log_prob, _core.full_like(log_prob, -math.inf))


class HalfCauchy(TransformedDistribution):
    """``|X|`` for ``X ~ Cauchy(0, scale)``: density ``2 / (pi scale (1 + (x / scale)^2))``
    on ``x >= 0``. ``rsample`` is reparameterised."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base = Cauchy(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> HalfCauchy:
        """This distribution with ``scale`` expanded to ``batch_shape``."""
        return _half_expand(self, batch_shape, _instance)  # type: ignore[no-any-return]

    @property
    def scale(self) -> Tensor:
        """The scale of the underlying Cauchy distribution."""
        return self.base_dist.scale  # type: ignore[attr-defined,no-any-return]

    @property
    def mean(self) -> Tensor:
        return _core.full_like(self.scale, math.inf)

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return _core.full_like(self.scale, math.inf)

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
