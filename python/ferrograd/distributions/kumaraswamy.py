"""The Kumaraswamy distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .cauchy import _half_expand
from .gumbel import EULER_GAMMA
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Kumaraswamy"]


def _moment(a: Tensor, b: Tensor, n: int) -> Tensor:
    """``E[X^n] = b B(1 + n / a, b)``."""
    t = 1 + n / a
    return b * (t.lgamma() + b.lgamma() - (t + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on (0, 1) with shapes ``concentration1`` (a) and
    ``concentration0`` (b): density ``a b x^(a - 1) (1 - x^a)^(b - 1)``.

    As PyTorch, ``(1 - u^(1/b))^(1/a)`` for ``u`` uniform; ``rsample`` is reparameterised.
    ``mode`` is ``((a - 1) / (a b - 1))^(1/a)`` (NaN unless ``a >= 1`` and ``b >= 1``).
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(
        self,
        concentration1: Tensor | float,
        concentration0: Tensor | float,
        validate_args: bool | None = None,
    ) -> None:
        self.concentration1, self.concentration0 = broadcast_all(
            concentration1, concentration0, who="Kumaraswamy"
        )
        base = Uniform(
            _core.zeros_like(self.concentration0), _core.ones_like(self.concentration0), validate_args=False
        )
        super().__init__(base, self._make_transforms(), validate_args=validate_args)

    def _make_transforms(self) -> list[Any]:
        return [
            PowerTransform(self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(self.concentration1.reciprocal()),
        ]

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Kumaraswamy:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.concentration1 = self.concentration1.expand(*shape)
        new.concentration0 = self.concentration0.expand(*shape)
        out = _half_expand(self, shape, new)
        out.transforms = new._make_transforms()
        return out  # type: ignore[no-any-return]

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return a.log() + b.log() + (a - 1) * value.log() + (b - 1) * (-value.pow(a)).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (1 - value.pow(self.concentration1)).pow(self.concentration0)

    def icdf(self, value: Tensor) -> Tensor:
        return (1 - (1 - value).pow(self.concentration0.reciprocal())).pow(self.concentration1.reciprocal())

    @property
    def mean(self) -> Tensor:
        return _moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        log_mode = ((a - 1).log() - (a * b - 1).log()) / a
        bad = (a < 1).logical_or(b < 1)
        return _core.where(bad, _core.full_like(log_mode, math.nan), log_mode.exp())

    @property
    def variance(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return _moment(a, b, 2) - _moment(a, b, 1).pow(2)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        t1 = 1 - a.reciprocal()
        t0 = 1 - b.reciprocal()
        h_b = (b + 1).digamma() + EULER_GAMMA
        return t0 + t1 * h_b - a.log() - b.log()
