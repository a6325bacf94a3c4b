"""The categorical distribution over ``{0, ..., K - 1}``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .distribution import Distribution, lazy_property
from .utils import broadcast_shapes, finfo_max, logits_to_probs, probs_to_logits

Tensor = _core.Tensor

__all__ = ["Categorical"]


class Categorical(Distribution):
    """A draw of one of ``K`` categories, as ``torch.distributions.Categorical``.

    ``probs`` (non-negative, normalised over the last dimension) or
    ``logits`` (unnormalised log-probabilities) has shape ``batch_shape +
    (K,)``; give exactly one. Samples are int64 category indices of shape
    ``sample_shape + batch_shape``. ``log_prob`` and ``entropy`` are
    differentiable in the parameter (the policy-gradient idiom
    ``-(dist.log_prob(a) * R).sum().backward()`` works).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(
        self,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: either `probs` or `logits` must be specified, but not both")
        given = probs if probs is not None else logits
        name = "probs" if probs is not None else "logits"
        if not isinstance(given, Tensor):
            raise ValueError(f"Categorical: `{name}` must be a Tensor, got {type(given).__name__}")
        if given.ndim < 1:
            raise ValueError(
                f"Categorical: `{name}` must be at least one-dimensional, got shape {tuple(given.shape)}"
            )
        if not given.dtype.is_floating_point:
            given = given.to(_core.float32)
        if probs is not None:
            self.probs = given / given.sum(-1, keepdim=True)
        else:
            self.logits = given - given.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = int(given.shape[-1])
        super().__init__(tuple(given.shape[:-1]), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Categorical:
        """This distribution with its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        k = self._num_events
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*shape, k)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*shape, k)
            new._param = new.logits
        new._num_events = k
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:  # type: ignore[override]
        """Normalised log-probabilities (``log`` of the clamped probabilities)."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:  # type: ignore[override]
        """The probability of each category."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter: ``batch_shape + (K,)``."""
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return _core.full(
            self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device
        )

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return _core.full(
            self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device
        )

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        n = 1
        for s in shape[: len(shape) - len(self._batch_shape)]:
            n *= s
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            if n == 0 or probs_2d.shape[0] == 0:
                return _core.zeros(shape, dtype=_core.int64, device=probs_2d.device)
            draws = _core.multinomial(probs_2d, n, True)  # (batch, n)
            return draws.T.reshape(*shape)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        logits = self.logits
        batch = tuple(logits.shape[:-1])
        shape = broadcast_shapes(tuple(value.shape[:-1]), batch)
        index = value.expand(*shape, 1)
        return logits.expand(*shape, self._num_events).gather(-1, index).squeeze(-1)

    def entropy(self) -> Tensor:
        lowest = -finfo_max(self.logits.dtype)
        logits = self.logits.clamp(min=lowest)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = _core.arange(self._num_events, device=self._param.device)
        values = values.reshape(-1, *([1] * len(self._batch_shape)))
        if expand:
            values = values.expand(-1, *self._batch_shape)
        return values
