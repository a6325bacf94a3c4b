"""``kl_divergence(p, q)`` and the registry of its closed forms."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .. import _core
from ._special import digamma, lbeta, lgamma
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .gamma import Gamma
from .independent import Independent
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis, _half_log_det, _tril_solve
from .normal import Normal
from .poisson import Poisson
from .uniform import Uniform
from .utils import sum_rightmost

Tensor = _core.Tensor

__all__ = ["kl_divergence", "register_kl"]

KLFn = Callable[[Any, Any], Tensor]
_KL_REGISTRY: dict[tuple[type, type], KLFn] = {}
_KL_MEMOIZE: dict[tuple[type, type], KLFn | None] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[KLFn], KLFn]:
    """Decorator registering ``fn(p, q)`` as ``KL(p || q)`` for ``p`` an instance of
    ``type_p`` and ``q`` of ``type_q`` (subclasses included; the most specific
    registration wins)::

        @register_kl(Normal, Normal)
        def kl_normal_normal(p, q): ...
    """
    for t in (type_p, type_q):
        if not isinstance(t, type) or not issubclass(t, Distribution):
            raise TypeError(f"register_kl: expected a subclass of Distribution, got {t!r}")

    def decorator(fn: KLFn) -> KLFn:
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn

    return decorator


def _dispatch(type_p: type, type_q: type) -> KLFn | None:
    key = (type_p, type_q)
    if key in _KL_MEMOIZE:
        return _KL_MEMOIZE[key]
    best: tuple[tuple[int, int], KLFn] | None = None
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    for (sp, sq), fn in _KL_REGISTRY.items():
        if sp in mro_p and sq in mro_q:
            rank = (mro_p.index(sp), mro_q.index(sq))
            if best is None or sum(rank) < sum(best[0]) or (sum(rank) == sum(best[0]) and rank < best[0]):
                best = (rank, fn)
    out = None if best is None else best[1]
    _KL_MEMOIZE[key] = out
    return out


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    r"""The Kullback-Leibler divergence ``KL(p || q) = E_p[log p(x) - log q(x)]``,
    one value per batch element, from the closed form registered for the
    pair's types. ``NotImplementedError`` when none is registered."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p of type {type(p).__name__} and q of type {type(q).__name__}"
        )
    return fn(p, q)


def _infinite_like(t: Tensor) -> Tensor:
    return _core.full_like(t, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    # p log(p/q) + (1-p) log((1-p)/(1-q)), with log p = -softplus(-l), log(1-p) = -softplus(l)
    t1 = p.probs * ((-q.logits).softplus() - (-p.logits).softplus())
    t2 = (1 - p.probs) * (q.logits.softplus() - p.logits.softplus())
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = _core.where(q.probs.expand_as(t) == 0, _infinite_like(t), t)
    t = _core.where(p.probs.expand_as(t) == 0, _core.zeros_like(t), t)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low).logical_or(q.high < p.high)
    return _core.where(outside, _infinite_like(result), result)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            f"KL(MultivariateNormal || MultivariateNormal): event shapes differ, {p.event_shape} vs {q.event_shape}"
        )
    n = p.event_shape[0]
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    # tr(Sq^{-1} Sp) = ||Lq^{-1} Lp||_F^2: solve for each column of Lp (the rows of Lp^T)
    trace = _tril_solve(lq.unsqueeze(-3), lp.transpose(-1, -2)).pow(2).sum(-1).sum(-1)
    maha = _batch_mahalanobis(lq, q.loc - p.loc)
    out = _half_log_det(lq) - _half_log_det(lp) + 0.5 * (trace + maha - n)
    shape = p.batch_shape if len(p.batch_shape) >= len(q.batch_shape) else q.batch_shape
    return out.expand(*shape) if shape and tuple(out.shape) != shape else out


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "KL(Independent || Independent) needs equal reinterpreted_batch_ndims, got "
            f"{p.reinterpreted_batch_ndims} and {q.reinterpreted_batch_ndims}"
        )
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    a1, b1, a2, b2 = p.concentration, p.rate, q.concentration, q.rate
    return a2 * (b1 / b2).log() + lgamma(a2) - lgamma(a1) + (a1 - a2) * digamma(a1) + (b2 - b1) * (a1 / b1)


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    t = a1 + b1
    return (
        lbeta(a2, b2)
        - lbeta(a1, b1)
        + (a1 - a2) * digamma(a1)
        + (b1 - b2) * digamma(b1)
        + (a2 - a1 + b2 - b1) * digamma(t)
    )


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    a, b = p.concentration, q.concentration
    a0 = a.sum(-1)
    t1 = lgamma(a0) - lgamma(a).sum(-1) - lgamma(b.sum(-1)) + lgamma(b).sum(-1)
    return t1 + ((a - b) * (digamma(a) - digamma(a0).unsqueeze(-1))).sum(-1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)
