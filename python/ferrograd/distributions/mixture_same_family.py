"""``MixtureSameFamily``: a mixture whose components are one batched distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .categorical import Categorical
from .distribution import Distribution, _shape

Tensor = _core.Tensor

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """A mixture of ``K`` components of one family, as
    ``torch.distributions.MixtureSameFamily``: ``mixture_distribution`` (a
    :class:`Categorical` with batch shape ``B`` over ``K`` categories) picks the
    component; ``component_distribution`` has batch shape ``B + (K,)``, its rightmost
    batch dimension indexing the components. The mixture has batch shape ``B`` and the
    components' event shape. ``log_prob`` is ``logsumexp_k(log w_k + log p_k(x))``;
    samples are not reparameterised (there is no ``rsample``).
    """

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = False

    def __init__(
        self,
        mixture_distribution: Categorical,
        component_distribution: Distribution,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(
                "MixtureSameFamily: mixture_distribution must be a Categorical, got "
                f"{type(mixture_distribution).__name__}"
            )
        if not isinstance(component_distribution, Distribution):
            raise ValueError(
                "MixtureSameFamily: component_distribution must be a Distribution, got "
                f"{type(component_distribution).__name__}"
            )
        mix_batch = tuple(mixture_distribution.batch_shape)
        comp_batch = tuple(component_distribution.batch_shape)
        if len(comp_batch) < 1:
            raise ValueError(
                "MixtureSameFamily: component_distribution needs a batch dimension indexing the components, "
                f"got batch_shape {comp_batch}"
            )
        cdbs = comp_batch[:-1]
        for i, (a, b) in enumerate(zip(reversed(mix_batch), reversed(cdbs), strict=False)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(
                    f"MixtureSameFamily: mixture_distribution batch_shape {mix_batch} does not match "
                    f"component_distribution batch_shape {comp_batch} (dimension -{i + 1})"
                )
        k = mixture_distribution._num_events
        if comp_batch[-1] != k:
            raise ValueError(
                f"MixtureSameFamily: mixture_distribution has {k} components but component_distribution's "
                f"rightmost batch dimension has {comp_batch[-1]}"
            )
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> MixtureSameFamily:
        """This mixture with its batch expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new._component_distribution = self._component_distribution.expand(shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return self._component_distribution.support

    @property
    def mixture_distribution(self) -> Categorical:
        """The distribution over the components."""
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        """The batched component distributions."""
        return self._component_distribution

    def _pad_mixture(self, t: Tensor) -> Tensor:
        """Mixture weights of shape ``B + (K,)`` with ``event_ndims`` trailing 1s."""
        for _ in range(self._event_ndims):
            t = t.unsqueeze(-1)
        return t

    @property
    def mean(self) -> Tensor:
        probs = self._pad_mixture(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        """By the law of total variance: ``E[Var] + Var[E]`` over the components."""
        probs = self._pad_mixture(self._mixture_distribution.probs)
        d = -1 - self._event_ndims
        comp_mean = self._component_distribution.mean
        mean_cond_var = (probs * self._component_distribution.variance).sum(d)
        var_cond_mean = (probs * (comp_mean - self.mean.unsqueeze(d)).pow(2)).sum(d)
        return mean_cond_var + var_cond_mean

    def _pad(self, value: Tensor) -> Tensor:
        return value.unsqueeze(-1 - self._event_ndims)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob_x = self._component_distribution.log_prob(self._pad(value))
        log_mix = self._mixture_distribution.logits.log_softmax(-1)
        return (log_prob_x + log_mix).logsumexp(-1)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cdf_x = self._component_distribution.cdf(self._pad(value))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        with no_grad():
            s = _shape(sample_shape)
            mix_dist = self._mixture_distribution
            if tuple(mix_dist.batch_shape) != tuple(self.batch_shape):
                mix_dist = mix_dist.expand(self.batch_shape)
            mix = mix_dist.sample(s)  # S + B, int64
            comp = self._component_distribution.sample(s)  # S + B + (K,) + E
            ar = _core.arange(self._num_component, device=mix.device)
            onehot = self._pad_mixture((mix.unsqueeze(-1) == ar).to(comp.dtype))  # S + B + (K,) + 1s
            return (comp * onehot).sum(-1 - self._event_ndims)
