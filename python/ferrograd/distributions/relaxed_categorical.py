"""The relaxed (Concrete / Gumbel-softmax) one-hot categorical distributions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .relaxed_bernoulli import _temperature
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import clamp_probs

Tensor = _core.Tensor

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The log of a :class:`RelaxedOneHotCategorical` sample (the ExpConcrete
    distribution): ``log_softmax((logits + g) / temperature)`` with ``g`` Gumbel noise
    (reparameterised). Give exactly one of ``probs`` and ``logits`` (last dimension: the
    ``K`` categories)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self.temperature = _temperature(temperature, self._categorical._param)
        k = self._categorical._num_events
        super().__init__(self._categorical.batch_shape, (k,), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> ExpRelaxedCategorical:
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, tuple(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def logits(self) -> Tensor:
        """The normalised log-probabilities of the categories."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """The probabilities of the categories."""
        return self._categorical.probs

    @property
    def param_shape(self) -> tuple[int, ...]:
        """The shape of the parameter."""
        return tuple(self._categorical._param.shape)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        logits = self.logits
        u = clamp_probs(_core.rand(shape, dtype=logits.dtype, device=logits.device))
        gumbels = -(-u.log()).log()
        scores = (logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        k = self._categorical._num_events
        t = self.temperature
        log_scale = math.lgamma(k) + (k - 1) * t.log()
        score = self.logits - value * t
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A continuous relaxation of :class:`OneHotCategorical` on the simplex (the
    Concrete / Gumbel-softmax distribution): ``softmax((logits + g) / temperature)`` with
    ``g`` Gumbel noise. Low ``temperature`` pushes samples towards one-hot vectors;
    ``rsample`` is reparameterised."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex  # type: ignore[assignment]
    has_rsample = True  # type: ignore[assignment]

    def __init__(
        self,
        temperature: Tensor | float,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> RelaxedOneHotCategorical:
        """This distribution with its parameter expanded to ``batch_shape``."""
        new = type(self).__new__(type(self)) if _instance is None else _instance
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def temperature(self) -> Tensor:
        """The relaxation temperature."""
        return self.base_dist.temperature  # type: ignore[attr-defined,no-any-return]

    @property
    def logits(self) -> Tensor:
        """The normalised log-probabilities of the categories."""
        return self.base_dist.logits  # type: ignore[attr-defined,no-any-return]

    @property
    def probs(self) -> Tensor:
        """The probabilities of the categories."""
        return self.base_dist.probs  # type: ignore[attr-defined,no-any-return]
