"""The negative binomial distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from ._gamma_sampling import sample_poisson, standard_gamma
from .distribution import Distribution, _shape, lazy_property
from .utils import broadcast_all, logits_to_probs, probs_to_logits

Tensor = _core.Tensor

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    """The number of successes before ``total_count`` failures of Bernoulli trials whose
    success probability is ``probs`` (or ``sigmoid(logits)``; give exactly one), as
    ``torch.distributions.NegativeBinomial``: ``P(k) = C(k + r - 1, k) p^k (1 - p)^r``.
    ``total_count`` may be any non-negative real. Samples (floats) are drawn as a
    Poisson with a gamma-distributed rate; there is no ``rsample``."""

    arg_constraints = {
        "total_count": constraints.nonnegative,
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer  # type: ignore[assignment]

    def __init__(
        self,
        total_count: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("NegativeBinomial: either `probs` or `logits` must be specified, but not both")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs, who="NegativeBinomial")
            param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits, who="NegativeBinomial")
            param = self.logits
        super().__init__(tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> NegativeBinomial:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.total_count = self.total_count.expand(*shape)
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
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / (-self.logits).sigmoid()

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        with no_grad():
            s = _shape(sample_shape)
            rate = standard_gamma(self.total_count, s) * self.logits.exp()
            return sample_poisson(rate)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        r, logits = self.total_count, self.logits
        value = value.to(r.dtype) if value.dtype != r.dtype else value
        log_unnorm = r * (-logits).sigmoid().log() + value * logits.sigmoid().log()
        # log C(k + r - 1, k); 0 when k + r = 0 (the mass of a total_count of 0 sits at 0)
        rv = r + value
        zero = rv == 0
        safe_rv = _core.where(zero, _core.ones_like(rv), rv)
        log_norm = -safe_rv.lgamma() + (1 + value).lgamma() + r.lgamma()
        log_norm = _core.where(zero, _core.zeros_like(log_norm), log_norm)
        return log_unnorm - log_norm
