"""The Dirichlet distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from ._gamma_sampling import standard_gamma
from ._special import digamma, lgamma
from .distribution import Distribution, _shape
from .utils import eps

Tensor = _core.Tensor

__all__ = ["Dirichlet"]


class Dirichlet(Distribution):
    """The Dirichlet distribution on the probability simplex, with ``concentration``
    of shape ``batch_shape + (K,)`` (all positive).

    ``rsample`` is reparameterised: independent reparameterised gamma draws
    (see :class:`Gamma`) normalised to sum to one.
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex  # type: ignore[assignment]
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if not isinstance(concentration, Tensor) or concentration.ndim < 1:
            raise ValueError("Dirichlet: `concentration` must be a Tensor of at least one dimension")
        if not concentration.dtype.is_floating_point:
            concentration = concentration.to(_core.float32)
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Dirichlet:
        """This distribution with its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.concentration = self.concentration.expand(*shape, *self._event_shape)
        Distribution.__init__(new, shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        c = (self.concentration - 1).clamp(min=0.0)
        return c / c.sum(-1, keepdim=True)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        total = c.sum(-1, keepdim=True)
        return c * (total - c) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        g = standard_gamma(self.concentration, _shape(sample_shape))
        e = eps(g.dtype)
        return (g / g.sum(-1, keepdim=True)).clamp(min=e, max=1.0 - e)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ((c - 1) * value.log()).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    def entropy(self) -> Tensor:
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (
            lgamma(c).sum(-1) - lgamma(total) - (k - total) * digamma(total) - ((c - 1) * digamma(c)).sum(-1)
        )
