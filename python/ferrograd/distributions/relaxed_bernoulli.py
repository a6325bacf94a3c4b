"""The relaxed (Concrete / Gumbel-softmax) Bernoulli distributions."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .distribution import Distribution, lazy_property
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import broadcast_all, clamp_probs, logits_to_probs, probs_to_logits

Tensor = _core.Tensor

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


def _temperature(temperature: Tensor | float, like: Tensor) -> Tensor:
    if isinstance(temperature, Tensor):
        return temperature.to(like.dtype) if temperature.dtype != like.dtype else temperature
    if not isinstance(temperature, numbers.Number):
        raise TypeError(f"temperature must be a Tensor or a number, got {type(temperature).__name__}")
    return _core.tensor(float(temperature), dtype=like.dtype, device=like.device)


class LogitRelaxedBernoulli(Distribution):
    """The logit of a :class:`RelaxedBernoulli` sample: ``(logit(u) + logits) / temperature``
    for ``u`` uniform (reparameterised). Give exactly one of ``probs`` and ``logits``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError(
                f"{type(self).__name__}: either `probs` or `logits` must be specified, but not both"
            )
        if probs is not None:
            (self.probs,) = broadcast_all(probs, who=type(self).__name__)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits, who=type(self).__name__)
            self._param = self.logits
        self.temperature = _temperature(temperature, self._param)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LogitRelaxedBernoulli:
        """This distribution with its parameter expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.temperature = self.temperature
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
        """``log(p / (1 - p))``."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:  # type: ignore[override]
        """The probability of the (unrelaxed) 1."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter."""
        return tuple(self._param.shape)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(*shape))
        u = clamp_probs(_core.rand(shape, dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = self.logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """A continuous relaxation of :class:`Bernoulli` on (0, 1) (the binary Concrete
    distribution): ``sigmoid`` of a :class:`LogitRelaxedBernoulli` sample. Low
    ``temperature`` pushes samples towards 0 and 1; ``rsample`` is reparameterised."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> RelaxedBernoulli:
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = type(self).__new__(type(self)) if _instance is None else _instance
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def temperature(self) -> Tensor:
        """The relaxation temperature."""
        return self.base_dist.temperature  # type: ignore[attr-defined]

    @property
    def logits(self) -> Tensor:
        """The logits of the unrelaxed Bernoulli."""
        return self.base_dist.logits  # type: ignore[attr-defined]

    @property
    def probs(self) -> Tensor:
        """The probability of the unrelaxed 1."""
        return self.base_dist.probs  # type: ignore[attr-defined]
