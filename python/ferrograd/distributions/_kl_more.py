"""Closed-form KL divergences for the exponential, Laplace, binomial, one-hot categorical
and transformed distributions (registered with :func:`register_kl` on import)."""

from __future__ import annotations

from .. import _core
from .binomial import Binomial
from .exponential import Exponential
from .kl import _infinite_like, kl_divergence, register_kl
from .laplace import Laplace
from .one_hot_categorical import OneHotCategorical
from .transformed_distribution import TransformedDistribution
from .utils import sum_rightmost

Tensor = _core.Tensor

__all__: list[str] = []


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    dist = (p.loc - q.loc).abs()
    return -scale_ratio.log() + dist / q.scale + scale_ratio * (-dist / p.scale).exp() - 1


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _core.where(p.total_count > q.total_count, _infinite_like(kl), kl)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return kl_divergence(p._categorical, q._categorical)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: TransformedDistribution, q: TransformedDistribution) -> Tensor:
    if p.transforms != q.transforms:
        raise NotImplementedError(
            "KL between TransformedDistributions with different transforms is not implemented"
        )
    if p.event_shape != q.event_shape:
        raise NotImplementedError(
            "KL between TransformedDistributions with different event shapes is not implemented"
        )
    extra = len(p.event_shape) - len(p.base_dist.event_shape)
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra)
