"""Student's t distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from ._gamma_sampling import standard_gamma
from .distribution import Distribution, _shape
from .utils import broadcast_all, tiny

Tensor = _core.Tensor

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, location ``loc`` and
    scale ``scale``.

    ``rsample`` is reparameterised (also in ``df``): ``loc + scale * Z / sqrt(V / df)``
    with ``Z`` standard normal and ``V ~ Chi2(df)`` a reparameterised gamma draw.
    ``mean`` is NaN for ``df <= 1``; ``variance`` is infinite for ``1 < df <= 2`` and NaN
    for ``df <= 1``.
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self,
        df: Tensor | float,
        loc: Tensor | float = 0.0,
        scale: Tensor | float = 1.0,
        validate_args: bool | None = None,
    ) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale, who="StudentT")
        super().__init__(tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> StudentT:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.df, new.loc, new.scale = (t.expand(*shape) for t in (self.df, self.loc, self.scale))
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return _core.where(self.df > 1, self.loc, _core.full_like(self.loc, math.nan))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2).clamp(min=tiny(df.dtype))
        out = _core.where(df > 2, finite, _core.full_like(finite, math.inf))
        return _core.where(df > 1, out, _core.full_like(finite, math.nan))

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        z = _core.randn(shape, dtype=self.df.dtype, device=self.df.device)
        v = 2 * standard_gamma(0.5 * self.df, _shape(sample_shape))  # Chi2(df)
        return self.loc + self.scale * z * (v / self.df).clamp(min=tiny(v.dtype)).rsqrt()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * df.log()
            + 0.5 * math.log(math.pi)
            + (0.5 * df).lgamma()
            - (0.5 * (df + 1.0)).lgamma()
        )
        return -0.5 * (df + 1.0) * (y.pow(2) / df).log1p() - z

    def entropy(self) -> Tensor:
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return (
            self.scale.log()
            + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma() - (0.5 * df).digamma())
            + 0.5 * df.log()
            + lbeta
        )
