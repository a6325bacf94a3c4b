"""The Fisher-Snedecor (F) distribution."""

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

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom: the law of
    ``(V1 / df1) / (V2 / df2)`` for independent ``Vi ~ Chi2(dfi)``.

    ``rsample`` is reparameterised (through reparameterised gamma draws). ``mean`` is NaN
    for ``df2 <= 2``, ``mode`` for ``df1 <= 2``, ``variance`` for ``df2 <= 4`` (as PyTorch).
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive  # type: ignore[assignment]
    has_rsample = True

    def __init__(self, df1: Tensor | float, df2: Tensor | float, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2, who="FisherSnedecor")
        super().__init__(tuple(self.df1.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> FisherSnedecor:
        """This distribution with ``df1`` and ``df2`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.df1, new.df2 = self.df1.expand(*shape), self.df2.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        d2 = self.df2
        return _core.where(d2 > 2, d2 / (d2 - 2), _core.full_like(d2, math.nan))

    @property
    def mode(self) -> Tensor:
        d1, d2 = self.df1, self.df2
        m = (d1 - 2) / d1 * d2 / (d2 + 2)
        return _core.where(d1 > 2, m, _core.full_like(m, math.nan))

    @property
    def variance(self) -> Tensor:
        d1, d2 = self.df1, self.df2
        v = 2 * d2.pow(2) * (d1 + d2 - 2) / (d1 * (d2 - 2).pow(2) * (d2 - 4))
        return _core.where(d2 > 4, v, _core.full_like(v, math.nan))

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        s = _shape(sample_shape)
        t = tiny(self.df1.dtype)
        x1 = (standard_gamma(0.5 * self.df1, s) / self.df1).clamp(min=t)
        x2 = (standard_gamma(0.5 * self.df2, s) / self.df2).clamp(min=t)
        return (x1 / x2).clamp(min=t)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        h1, h2 = 0.5 * self.df1, 0.5 * self.df2
        ratio = self.df1 / self.df2
        t1 = (h1 + h2).lgamma() - h1.lgamma() - h2.lgamma()
        t2 = h1 * ratio.log() + (h1 - 1) * value.log()
        t3 = (h1 + h2) * (ratio * value).log1p()
        return t1 + t2 - t3
