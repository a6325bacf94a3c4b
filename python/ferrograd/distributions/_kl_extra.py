"""Closed-form KL divergences for the distributions of the extended set (Cauchy, Gumbel,
half-normal, geometric, Pareto, continuous Bernoulli, low-rank multivariate normal) and
the exponential-gamma pairs, registered with :func:`register_kl` on import."""

from __future__ import annotations

import math

from .. import _core, linalg
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import EULER_GAMMA, Gumbel
from .half_normal import HalfNormal
from .kl import _infinite_like, _kl_mvn_mvn, register_kl
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .pareto import Pareto
from .utils import LOG_SQRT_2PI

Tensor = _core.Tensor

__all__: list[str] = []


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    # Chyzak and Nielsen (2019)
    num = (p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)
    return (num / (4 * p.scale * q.scale)).log()


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ratio = p.scale / q.scale
    a = q.loc / q.scale
    b = p.loc / q.scale
    t1 = -ratio.log() - a + b
    t2 = ratio * EULER_GAMMA
    t3 = (a + (1 + ratio).lgamma() - b).exp()
    return t1 + t2 + t3 - (1 + EULER_GAMMA)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - var_ratio.log())


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    out = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    # infinite where p puts mass below q's support
    return _core.where(p.scale < q.scale, _infinite_like(out), out)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p: ContinuousBernoulli, q: ContinuousBernoulli) -> Tensor:
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._log_normalizer() + (-p.probs).log1p()
    t3 = -q._log_normalizer() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> Tensor:
    ratio = q.rate / p.rate
    a = q.concentration
    return -a * ratio.log() + ratio + a.lgamma() + a * EULER_GAMMA - (1 + EULER_GAMMA)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Laplace, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Normal, q: Laplace) -> Tensor:
    # E_p|x - m| for x ~ N(mu, s^2): s sqrt(2/pi) exp(-d^2 / 2s^2) + d erf(d / (s sqrt 2))
    d = p.loc - q.loc
    s = p.scale
    mean_abs = (
        s * math.sqrt(2 / math.pi) * (-(d.pow(2)) / (2 * s.pow(2))).exp() + d * (d / (s * math.sqrt(2))).erf()
    )
    neg_entropy = -(0.5 + LOG_SQRT_2PI + s.log())
    return neg_entropy + (2 * q.scale).log() + mean_abs / q.scale


def _as_mvn(d: LowRankMultivariateNormal) -> MultivariateNormal:
    """The same normal distribution with a dense Cholesky factor."""
    return MultivariateNormal(d.loc, scale_tril=linalg.cholesky(d.covariance_matrix), validate_args=False)


def _check_event(p: object, q: object) -> None:
    pe, qe = p.event_shape, q.event_shape  # type: ignore[attr-defined]
    if pe != qe:
        raise ValueError(f"KL({type(p).__name__} || {type(q).__name__}): event shapes differ, {pe} vs {qe}")


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p: LowRankMultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _check_event(p, q)
    return _kl_mvn_mvn(_as_mvn(p), _as_mvn(q))


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p: LowRankMultivariateNormal, q: MultivariateNormal) -> Tensor:
    _check_event(p, q)
    return _kl_mvn_mvn(_as_mvn(p), q)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p: MultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _check_event(p, q)
    return _kl_mvn_mvn(p, _as_mvn(q))
