"""The one-hot categorical distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .categorical import Categorical
from .distribution import Distribution

Tensor = _core.Tensor

__all__ = ["OneHotCategorical"]


class OneHotCategorical(Distribution):
    """A :class:`Categorical` draw written as a one-hot vector of length ``K``.

    ``probs`` or ``logits`` (exactly one) has shape ``batch_shape + (K,)``; samples have
    shape ``sample_shape + batch_shape + (K,)`` in the parameter's dtype, with one 1 per
    vector. No ``rsample``; ``log_prob`` and ``entropy`` are differentiable in the parameter.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot  # type: ignore[assignment]
    has_enumerate_support = True

    def __init__(
        self,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        batch = self._categorical.batch_shape
        event = tuple(self._categorical.param_shape[-1:])
        super().__init__(batch, event, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> OneHotCategorical:
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = type(self).__new__(type(self))
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, tuple(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def probs(self) -> Tensor:
        """The probability of each category."""
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        """Normalised log-probabilities."""
        return self._categorical.logits

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter: ``batch_shape + (K,)``."""
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs

    @property
    def mode(self) -> Tensor:
        probs = self._categorical.probs
        k = int(probs.shape[-1])
        return probs.argmax(-1).unsqueeze(-1).eq(_core.arange(k, device=probs.device)).to(probs.dtype)

    @property
    def variance(self) -> Tensor:
        p = self._categorical.probs
        return p * (1 - p)

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        probs = self._categorical.probs
        k = int(probs.shape[-1])
        idx = self._categorical.sample(sample_shape)
        return idx.unsqueeze(-1).eq(_core.arange(k, device=probs.device)).to(probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        probs = self._categorical.probs
        k = int(probs.shape[-1])
        values = _core.eye(k, dtype=probs.dtype, device=probs.device)
        values = values.reshape(k, *([1] * len(self.batch_shape)), k)
        if expand:
            values = values.expand(k, *self.batch_shape, k)
        return values

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
