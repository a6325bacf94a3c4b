"""KL divergences between distributions of different families, for the pairs PyTorch
registers (registered with :func:`register_kl` on import).

Each finite one is ``-H(p) - E_p[log q(x)]`` with the expectation in closed form from
p's moments (mean, variance, ``E[log x]``, ``E[exp(-x / s)]``); a pair where ``p`` puts
mass outside ``q``'s support is infinite (for ``Uniform`` ``p``, where its interval leaves
the support).
"""

from __future__ import annotations

import math
from typing import Any

from .. import _core
from ._special import digamma, lbeta
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .continuous_bernoulli import ContinuousBernoulli
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import EULER_GAMMA, Gumbel
from .kl import register_kl
from .laplace import Laplace
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform
from .utils import LOG_SQRT_2PI, broadcast_shapes

Tensor = _core.Tensor

__all__: list[str] = []

_p: type[Distribution]
_q: type[Distribution]


def _inf(p: Distribution, q: Distribution) -> Tensor:
    like = p.mean
    shape = broadcast_shapes(tuple(p.batch_shape), tuple(q.batch_shape))
    return _core.full(shape, math.inf, dtype=like.dtype, device=like.device)


def _where_inf(cond: Tensor, value: Tensor) -> Tensor:
    return _core.where(cond, _core.full_like(value, math.inf), value)


def _xlogx(x: Tensor) -> Tensor:
    """``x log x`` with ``0 log 0 = 0``."""
    safe = _core.where(x > 0, x, _core.ones_like(x))
    return x * safe.log()


def _mean_log(p: Any) -> Tensor:
    """``E_p[log x]`` for the laws on the positive reals."""
    if isinstance(p, Beta):
        return digamma(p.concentration1) - digamma(p.concentration1 + p.concentration0)
    if isinstance(p, Exponential):
        return -EULER_GAMMA - p.rate.log()
    if isinstance(p, Gamma):
        return digamma(p.concentration) - p.rate.log()
    if isinstance(p, Pareto):
        return p.scale.log() + p.alpha.reciprocal()
    if isinstance(p, Uniform):  # for low >= 0
        return (_xlogx(p.high) - _xlogx(p.low)) / (p.high - p.low) - 1
    raise TypeError(type(p).__name__)


def _mean_exp_neg(p: Any, s: Tensor) -> Tensor:
    """``E_p[exp(-x / s)]``."""
    t = s.reciprocal()
    if isinstance(p, Exponential):
        return p.rate / (p.rate + t)
    if isinstance(p, Gamma):
        return (p.rate / (p.rate + t)).pow(p.concentration)
    if isinstance(p, Normal):
        return (-p.loc * t + 0.5 * (p.scale * t).pow(2)).exp()
    if isinstance(p, Uniform):
        return s * ((-p.low * t).exp() - (-p.high * t).exp()) / (p.high - p.low)
    raise TypeError(type(p).__name__)


# ---------------------------------------------------------------- q normal


def _kl_to_normal(p: Any, q: Normal) -> Tensor:
    second = p.variance + (p.mean - q.loc).pow(2)
    return -p.entropy() + q.scale.log() + LOG_SQRT_2PI + second / (2 * q.scale.pow(2))


for _p in (Beta, ContinuousBernoulli, Exponential, Gamma, Gumbel, Pareto, Uniform):
    register_kl(_p, Normal)(_kl_to_normal)


# ----------------------------------------------------------- q exponential


def _kl_to_exponential(p: Any, q: Exponential) -> Tensor:
    out = -p.entropy() - q.rate.log() + q.rate * p.mean
    if isinstance(p, Uniform):
        out = _where_inf(p.low < 0, out)
    return out


for _p in (Beta, ContinuousBernoulli, Pareto, Uniform):
    register_kl(_p, Exponential)(_kl_to_exponential)


# ---------------------------------------------------------------- q gamma


def _kl_to_gamma(p: Any, q: Gamma) -> Tensor:
    a, b = q.concentration, q.rate
    expected = a * b.log() - a.lgamma() + (a - 1) * _mean_log(p) - b * p.mean
    out = -p.entropy() - expected
    if isinstance(p, Uniform):
        out = _where_inf(p.low < 0, out)
    return out


for _p in (Beta, Pareto, Uniform):
    register_kl(_p, Gamma)(_kl_to_gamma)


# --------------------------------------------------------------- q gumbel


def _kl_to_gumbel(p: Any, q: Gumbel) -> Tensor:
    z_mean = (p.mean - q.loc) / q.scale
    exp_neg_z = (q.loc / q.scale).exp() * _mean_exp_neg(p, q.scale)
    return -p.entropy() + q.scale.log() + z_mean + exp_neg_z


for _p in (Exponential, Gamma, Normal, Uniform):
    register_kl(_p, Gumbel)(_kl_to_gumbel)


# ------------------------------------------------------- q on a bounded set


@register_kl(Beta, Uniform)
@register_kl(ContinuousBernoulli, Uniform)
def _kl_unit_to_uniform(p: Any, q: Uniform) -> Tensor:
    out = -p.entropy() + (q.high - q.low).log()
    return _where_inf((q.low > 0).logical_or(q.high < 1), out)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Uniform, q: Beta) -> Tensor:
    a, b = q.concentration1, q.concentration0
    width = p.high - p.low
    mean_log = (_xlogx(p.high) - _xlogx(p.low)) / width - 1
    mean_log1m = (_xlogx(1 - p.low) - _xlogx(1 - p.high)) / width - 1
    out = -width.log() - (a - 1) * mean_log - (b - 1) * mean_log1m + lbeta(a, b)
    return _where_inf((p.low < 0).logical_or(p.high > 1), out)


def _cb_expected_log(p: Any, q: ContinuousBernoulli) -> Tensor:
    return p.mean * q.logits + (-q.probs).log1p() + q._log_normalizer()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p: Beta, q: ContinuousBernoulli) -> Tensor:
    return -p.entropy() - _cb_expected_log(p, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p: Uniform, q: ContinuousBernoulli) -> Tensor:
    out = -p.entropy() - _cb_expected_log(p, q)
    return _where_inf((p.low < 0).logical_or(p.high > 1), out)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Uniform, q: Pareto) -> Tensor:
    expected = q.alpha.log() + q.alpha * q.scale.log() - (q.alpha + 1) * _mean_log(p)
    return _where_inf(p.low < q.scale, -p.entropy() - expected)


# ---------------------------------------------------------------- discrete


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> Tensor:
    # E_p[log q] = -rate + P(1) log rate (lgamma(1) = lgamma(2) = 0)
    return -p.entropy() + q.rate - p.probs * q.rate.log()


def _kl_infinite(p: Distribution, q: Distribution) -> Tensor:
    return _inf(p, q)


# p's support is not inside q's
for _p, _q in (
    (Beta, Pareto),
    (ContinuousBernoulli, Pareto),
    (Exponential, Beta),
    (Exponential, ContinuousBernoulli),
    (Exponential, Pareto),
    (Exponential, Uniform),
    (Gamma, Beta),
    (Gamma, ContinuousBernoulli),
    (Gamma, Pareto),
    (Gamma, Uniform),
    (Gumbel, Beta),
    (Gumbel, ContinuousBernoulli),
    (Gumbel, Exponential),
    (Gumbel, Gamma),
    (Gumbel, Pareto),
    (Gumbel, Uniform),
    (Laplace, Beta),
    (Laplace, ContinuousBernoulli),
    (Laplace, Exponential),
    (Laplace, Gamma),
    (Laplace, Pareto),
    (Laplace, Uniform),
    (Normal, Beta),
    (Normal, ContinuousBernoulli),
    (Normal, Exponential),
    (Normal, Gamma),
    (Normal, Pareto),
    (Normal, Uniform),
    (Pareto, Beta),
    (Pareto, ContinuousBernoulli),
    (Pareto, Uniform),
    (Poisson, Bernoulli),
    (Poisson, Binomial),
):
    register_kl(_p, _q)(_kl_infinite)
