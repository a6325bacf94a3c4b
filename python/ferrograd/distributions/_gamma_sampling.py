"""Samplers for the gamma family and the Poisson distribution, and the
reparameterisation gradient of standard gamma draws.

Draws are made on the CPU in float64 from ferrograd's default generator
(so ``manual_seed`` makes them reproducible on any device) and converted
to the parameter's dtype and device. Rejection loops draw fresh candidates
for every element and keep the first accepted one.
"""

from __future__ import annotations

import math

from .. import _core
from .._grad_mode import no_grad
from ._special import digamma, lgamma

Tensor = _core.Tensor

__all__ = ["sample_poisson", "standard_gamma"]

_TINY64 = 2.2250738585072014e-308
_MAX_ROUNDS = 10_000
_GRAD_CHUNK = 4096


def _cpu64(t: Tensor) -> Tensor:
    t = t.detach()
    if t.device != _core.device("cpu"):
        t = t.to("cpu")
    return t.to(_core.float64) if t.dtype != _core.float64 else t


def _sample_standard_gamma64(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) draws (float64, CPU) by Marsaglia and Tsang's method;
    ``alpha < 1`` is boosted: ``G(alpha) = G(alpha + 1) * U ** (1 / alpha)``."""
    shape = tuple(alpha.shape)
    boost = alpha < 1.0
    a = _core.where(boost, alpha + 1.0, alpha)
    d = a - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    out = _core.zeros(shape, dtype=_core.float64)
    done = _core.zeros(shape, dtype=_core.bool)
    for _ in range(_MAX_ROUNDS):
        z = _core.randn(shape, dtype=_core.float64)
        u = _core.rand(shape, dtype=_core.float64)
        v = (1.0 + c * z) ** 3
        ok = (v > 0).logical_and(u.log() < 0.5 * z * z + d - d * v + d * v.clamp(min=_TINY64).log())
        out = _core.where(ok.logical_and(done.logical_not()), d * v, out)
        done = done.logical_or(ok)
        if bool(done.all()):
            break
    u = _core.rand(shape, dtype=_core.float64)
    boosted = (out.log() + u.log() / alpha).exp()
    return _core.where(boost, boosted, out).clamp(min=_TINY64)


def _standard_gamma_grad64(alpha: Tensor, x: Tensor) -> Tensor:
    """``dx/dalpha`` of a Gamma(alpha, 1) draw ``x`` at a fixed CDF value (implicit
    reparameterisation): ``-(dP(alpha, x)/dalpha) / pdf(x)``.

    The regularised incomplete gamma function is the series ``P(alpha, x) =
    sum_n t_n`` with ``log t_n = (alpha + n) log x - x - lgamma(alpha + 1) -
    sum_{k=1..n} log(alpha + k)``, summed in log space over enough terms to
    pass the largest draw; its derivative in ``alpha`` is ``sum_n t_n (log x -
    digamma(alpha + 1) - sum_{k=1..n} 1 / (alpha + k))``."""
    if alpha.numel() == 0:
        return _core.zeros_like(alpha)
    xmax = float(x.max().item())
    gap = float((x - alpha).clamp(min=0.0).max().item())
    n_terms = int(math.ceil(gap + 12.0 * math.sqrt(max(xmax, float(alpha.max().item()), 1.0)) + 40.0))
    k = _core.arange(1, n_terms, dtype=_core.float64)
    a = alpha.unsqueeze(-1)
    logx = x.log()
    zero = _core.zeros((*alpha.shape, 1), dtype=_core.float64)
    ak = a + k
    log_rising = _core.cat([zero, ak.log().cumsum(-1)], -1)  # sum_{k<=n} log(alpha + k)
    harmonic = _core.cat([zero, ak.reciprocal().cumsum(-1)], -1)  # sum_{k<=n} 1 / (alpha + k)
    n = _core.arange(n_terms, dtype=_core.float64)
    log_t = (a + n) * logx.unsqueeze(-1) - x.unsqueeze(-1) - lgamma(alpha + 1.0).unsqueeze(-1) - log_rising
    log_p = log_t.logsumexp(-1)
    weights = (log_t - log_p.unsqueeze(-1)).exp()
    dlogp = logx - digamma(alpha + 1.0) - (weights * harmonic).sum(-1)
    log_pdf = (alpha - 1.0) * logx - x - lgamma(alpha)
    return -(log_p - log_pdf).exp() * dlogp


def standard_gamma(alpha: Tensor, sample_shape: tuple[int, ...] = ()) -> Tensor:
    """Reparameterised Gamma(alpha, 1) draws of shape ``sample_shape + alpha.shape``:
    the values are exact draws; the gradient with respect to ``alpha`` is the
    implicit reparameterisation gradient."""
    shape = tuple(sample_shape) + tuple(alpha.shape)
    a64 = _cpu64(alpha).expand(*shape).contiguous()
    with no_grad():
        x64 = _sample_standard_gamma64(a64)
    x = x64.to(alpha.dtype)
    if alpha.device != x.device:
        x = x.to(alpha.device)
    if not (alpha.requires_grad and _core.is_grad_enabled()):
        return x
    with no_grad():
        # in chunks, bounding the (elements x series terms) temporaries
        fa, fx = a64.reshape(-1), x64.reshape(-1)
        parts = [
            _standard_gamma_grad64(fa[i : i + _GRAD_CHUNK], fx[i : i + _GRAD_CHUNK])
            for i in range(0, fa.numel(), _GRAD_CHUNK)
        ]
        dxda = (_core.cat(parts, 0) if parts else fa).reshape(*shape).to(alpha.dtype)
        if alpha.device != dxda.device:
            dxda = dxda.to(alpha.device)
    # value x; gradient dxda with respect to alpha (the difference term is zero)
    return x + (alpha - alpha.detach()) * dxda


def sample_poisson(rate: Tensor, sample_shape: tuple[int, ...] = ()) -> Tensor:
    """Poisson draws of shape ``sample_shape + rate.shape`` (float, like PyTorch's):
    sequential inversion for rates below 10, Hormann's transformed rejection
    (PTRS) above."""
    shape = tuple(sample_shape) + tuple(rate.shape)
    lam = _cpu64(rate).expand(*shape).contiguous()
    with no_grad():
        small = lam < 10.0
        # inversion: the smallest k with u <= F(k)
        ls = _core.where(small, lam, _core.zeros_like(lam))
        u = _core.rand(shape, dtype=_core.float64)
        p = (-ls).exp()
        cdf = p
        k_small = _core.zeros(shape, dtype=_core.float64)
        for i in range(1, 200):
            more = (u > cdf).logical_and(small)
            if not bool(more.any()):
                break
            k_small = k_small + more.to(_core.float64)
            p = p * ls / i
            cdf = cdf + p
        # PTRS for the large rates
        big = small.logical_not()
        out = k_small
        if bool(big.any()):
            lb = _core.where(big, lam, _core.full_like(lam, 10.0))
            slam, loglam = lb.sqrt(), lb.log()
            b = 0.931 + 2.53 * slam
            a = -0.059 + 0.02483 * b
            log_invalpha = (1.1239 + 1.1328 / (b - 3.4)).log()
            vr = 0.9277 - 3.6224 / (b - 2.0)
            k_big = _core.zeros(shape, dtype=_core.float64)
            done = small
            for _ in range(_MAX_ROUNDS):
                uu = _core.rand(shape, dtype=_core.float64) - 0.5
                v = _core.rand(shape, dtype=_core.float64)
                us = 0.5 - uu.abs()
                k = ((2.0 * a / us + b) * uu + lb + 0.43).floor()
                quick = (us >= 0.07).logical_and(v <= vr)
                rejected = (k < 0).logical_or((us < 0.013).logical_and(v > us))
                kk = k.clamp(min=0.0)
                lhs = v.log() + log_invalpha - (a / (us * us) + b).log()
                slow = rejected.logical_not().logical_and(lhs <= -lb + kk * loglam - lgamma(kk + 1.0))
                ok = quick.logical_or(slow)
                k_big = _core.where(ok.logical_and(done.logical_not()), k, k_big)
                done = done.logical_or(ok)
                if bool(done.all()):
                    break
            out = _core.where(big, k_big, k_small)
    out = out.to(rate.dtype)
    return out.to(rate.device) if rate.device != out.device else out
