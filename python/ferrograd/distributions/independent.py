"""Reinterpret batch dimensions of a distribution as event dimensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .distribution import Distribution
from .utils import sum_rightmost

Tensor = _core.Tensor

__all__ = ["Independent"]


class Independent(Distribution):
    """``base_distribution`` with its ``reinterpreted_batch_ndims`` rightmost
    batch dimensions treated as event dimensions: ``log_prob`` and
    ``entropy`` sum over them. ``Independent(Normal(loc, scale), 1)`` with
    ``loc`` of shape ``(B, n)`` is a batch of ``B`` diagonal Gaussians on
    ``R^n``."""

    arg_constraints: dict[str, constraints.Constraint] = {}

    def __init__(
        self,
        base_distribution: Distribution,
        reinterpreted_batch_ndims: int,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(base_distribution, Distribution):
            raise TypeError(
                f"Independent: base_distribution must be a Distribution, got {type(base_distribution).__name__}"
            )
        n = reinterpreted_batch_ndims
        shape = base_distribution.batch_shape + base_distribution.event_shape
        if isinstance(n, bool) or not isinstance(n, int) or n < 0 or n > len(base_distribution.batch_shape):
            raise ValueError(
                f"Independent: expected 0 <= reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {n} vs {len(base_distribution.batch_shape)}"
            )
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(
            shape[: len(shape) - event_dim], shape[len(shape) - event_dim :], validate_args=validate_args
        )

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Independent:
        """This distribution with its base expanded to ``batch_shape`` (plus the reinterpreted dimensions)."""
        n = self.reinterpreted_batch_ndims
        base_batch = self.base_dist.batch_shape
        base = self.base_dist.expand(tuple(batch_shape) + base_batch[len(base_batch) - n :])
        return Independent(base, n, validate_args=False)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self) -> bool:  # type: ignore[override]
        return self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        s = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            return constraints.independent(s, self.reinterpreted_batch_ndims)
        return s

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> Tensor:
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Independent: enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
