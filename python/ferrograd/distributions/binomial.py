"""The binomial distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from ._special import lgamma
from .distribution import Distribution, lazy_property
from .utils import broadcast_all, logits_to_probs, probs_to_logits

Tensor = _core.Tensor

__all__ = ["Binomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    # max(x, 0) with gradient 1/2 at 0 (as PyTorch's)
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """The number of successes in ``total_count`` independent trials of probability
    ``probs`` (or ``sigmoid(logits)``); give exactly one of ``probs`` and ``logits``.

    ``total_count`` (a non-negative integer, or a tensor of them broadcasting with the
    parameter) is not differentiable; ``log_prob`` and ``entropy`` are in the parameter.
    Samples are counts in the parameter's dtype, drawn as sums of Bernoulli trials.
    """

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(
        self,
        total_count: Tensor | int = 1,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Binomial: either `probs` or `logits` must be specified, but not both")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs, who="Binomial")
            self.total_count = self.total_count.to(self.probs.dtype)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits, who="Binomial")
            self.total_count = self.total_count.to(self.logits.dtype)
            self._param = self.logits
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Binomial:
        """This distribution with ``total_count`` and its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.total_count = self.total_count.expand(*shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*shape)
            new._param = new.logits
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.integer_interval(0, self.total_count)

    @lazy_property
    def logits(self) -> Tensor:  # type: ignore[override]
        """``log(p / (1 - p))``, with ``p`` clamped away from 0 and 1."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:  # type: ignore[override]
        """The success probability of one trial."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter."""
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            n = self.total_count
            most = int(n.max()) if n.numel() else 0
            if most == 0:
                return _core.zeros(shape, dtype=self.probs.dtype, device=self.probs.device)
            probs = self.probs.expand(*shape).unsqueeze(-1).expand(*shape, most).contiguous()
            trials = _core.bernoulli(probs)
            live = _core.arange(most, device=probs.device).to(probs.dtype) < n.expand(*shape).unsqueeze(-1)
            return (trials * live.to(probs.dtype)).sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        value = value.to(logits.dtype) if value.dtype != logits.dtype else value
        log_norm = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() - lgamma(n + 1)
        return value * logits - lgamma(value + 1) - lgamma(n - value + 1) - log_norm

    def entropy(self) -> Tensor:
        n = self.total_count
        most = int(n.max()) if n.numel() else 0
        if n.numel() and not bool((n == most).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self.total_count
        most = int(n.max()) if n.numel() else 0
        if n.numel() and not bool((n == most).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = _core.arange(1 + most, device=self._param.device).to(self._param.dtype)
        values = values.reshape(-1, *([1] * len(self._batch_shape)))
        if expand:
            values = values.expand(-1, *self._batch_shape)
        return values
