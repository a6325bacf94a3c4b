"""The Bernoulli distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .distribution import Distribution, lazy_property
from .utils import broadcast_all, logits_to_probs, probs_to_logits

Tensor = _core.Tensor

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """A coin flip: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0.

    Give exactly one of ``probs`` and ``logits``. Samples are 0./1. in the
    parameter's dtype; ``sample`` is not differentiable (no ``rsample``).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean  # type: ignore[assignment]
    has_enumerate_support = True

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: either `probs` or `logits` must be specified, but not both")
        if probs is not None:
            (self.probs,) = broadcast_all(probs, who="Bernoulli")
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits, who="Bernoulli")
            param = self.logits
        self._param = param
        super().__init__(tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Bernoulli:
        """This distribution with its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*shape)
            new._param = new.logits
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self) -> Tensor:  # type: ignore[override]
        """``log(p / (1 - p))``, with ``p`` clamped away from 0 and 1."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:  # type: ignore[override]
        """The probability of a 1."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter."""
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return _core.where(self.probs == 0.5, _core.full_like(mode, float("nan")), mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return _core.bernoulli(self.probs.expand(*shape).contiguous())

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits = self.logits
        return value * logits - logits.softplus()

    def entropy(self) -> Tensor:
        logits = self.logits
        return logits.softplus() - self.probs * logits

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = _core.tensor([0.0, 1.0], dtype=self._param.dtype, device=self._param.device)
        values = values.reshape(2, *([1] * len(self._batch_shape)))
        if expand:
            values = values.expand(2, *self._batch_shape)
        return values
