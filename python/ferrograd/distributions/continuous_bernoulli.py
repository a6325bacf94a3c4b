"""The continuous Bernoulli distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .distribution import Distribution, lazy_property
from .utils import broadcast_all, clamp_probs, logits_to_probs, probs_to_logits

Tensor = _core.Tensor

__all__ = ["ContinuousBernoulli"]

_LIMS = (0.499, 0.501)


class ContinuousBernoulli(Distribution):
    """The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham,
    2019): density ``C(p) p^x (1 - p)^(1 - x)`` with the normaliser
    ``C(p) = 2 atanh(1 - 2p) / (1 - 2p)`` (``C(1/2) = 2``), parameterised by ``probs``
    or ``logits`` (give exactly one).

    Near ``p = 1/2``, where the closed forms lose precision, the normaliser, mean and
    variance switch to Taylor expansions, and ``cdf``/``icdf`` to the uniform ones (inside
    ``lims``, as PyTorch; the latter are off by less than 1e-3 there). ``rsample`` is
    reparameterised (the inverse CDF of a uniform draw).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        lims: tuple[float, float] = _LIMS,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError(
                "ContinuousBernoulli: either `probs` or `logits` must be specified, but not both"
            )
        if probs is not None:
            (self.probs,) = broadcast_all(probs, who="ContinuousBernoulli")
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits, who="ContinuousBernoulli")
            param = self.logits
        self._lims = lims
        super().__init__(tuple(param.shape), validate_args=validate_args)
        if probs is not None:
            self.probs = clamp_probs(self.probs)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> ContinuousBernoulli:
        """This distribution with its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new._lims = self._lims
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
        """The parameter in (0, 1)."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]).logical_or(self.probs >= self._lims[1])

    def _cut_probs(self) -> Tensor:
        return _core.where(
            self._outside_unstable_region(), self.probs, _core.full_like(self.probs, self._lims[0])
        )

    def _log_normalizer(self) -> Tensor:
        """``log C(p)``."""
        cut = self._cut_probs()
        below = _core.where(cut <= 0.5, cut, _core.zeros_like(cut))
        above = _core.where(cut >= 0.5, cut, _core.ones_like(cut))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - _core.where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log()
        )
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return _core.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return _core.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        v = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return _core.where(self._outside_unstable_region(), v, taylor)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _core.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits = self.logits
        # -BCE(logits, value) = value * logits - softplus(logits)
        return value * logits - logits.softplus() + self._log_normalizer()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = _core.where(self._outside_unstable_region(), cdfs, value * _core.ones_like(cdfs))
        zero, one = _core.zeros_like(unbounded), _core.ones_like(unbounded)
        return _core.where(value <= 0.0, zero, _core.where(value >= 1.0, one, unbounded))

    def icdf(self, value: Tensor) -> Tensor:
        cut = self._cut_probs()
        inv = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (cut.log() - (-cut).log1p())
        return _core.where(self._outside_unstable_region(), inv, value * _core.ones_like(inv))

    def entropy(self) -> Tensor:
        log0 = (-self.probs).log1p()
        log1 = self.probs.log()
        return self.mean * (log0 - log1) - self._log_normalizer() - log0
