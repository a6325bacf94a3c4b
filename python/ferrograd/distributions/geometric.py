"""The geometric distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .distribution import Distribution, lazy_property
from .utils import broadcast_all, clamp_probs, logits_to_probs, probs_to_logits, tiny

Tensor = _core.Tensor

__all__ = ["Geometric"]


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli trials with success
    probability ``probs`` (or ``sigmoid(logits)``; give exactly one): ``P(k) = (1 - p)^k p``
    for ``k = 0, 1, ...``. Samples are floats; there is no ``rsample``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer  # type: ignore[assignment]

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Geometric: either `probs` or `logits` must be specified, but not both")
        if probs is not None:
            (self.probs,) = broadcast_all(probs, who="Geometric")
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits, who="Geometric")
            param = self.logits
        super().__init__(tuple(param.shape), validate_args=validate_args)
        if probs is not None and self._validate_args and bool((self.probs == 0).any()):
            raise ValueError(
                f"Expected parameter probs (Tensor of shape {tuple(self.probs.shape)}) of distribution "
                f"Geometric to be positive: a success probability of 0 gives no distribution"
            )

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Geometric:
        """This distribution with its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*shape)
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self) -> Tensor:  # type: ignore[override]
        """``log(p / (1 - p))``."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:  # type: ignore[override]
        """The success probability."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self) -> Tensor:
        return self.probs.reciprocal() - 1

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (self.probs.reciprocal() - 1) / self.probs

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            p = self.probs
            u = _core.rand(shape, dtype=p.dtype, device=p.device).clamp(min=tiny(p.dtype))
            return (u.log() / (-p).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        p = self.probs
        value = value.to(p.dtype) if value.dtype != p.dtype else value
        # k log(1 - p) is 0 for k = 0 even when p = 1
        p_safe = _core.where(
            (value == 0).logical_and(p == 1), _core.zeros_like(p * value), p * _core.ones_like(value)
        )
        return value * (-p_safe).log1p() + p.log()

    def entropy(self) -> Tensor:
        p = clamp_probs(self.probs)
        logits = p.log() - (-p).log1p()
        # binary cross-entropy of logits against p, divided by p
        bce = logits.softplus() - p * logits
        return bce / p
