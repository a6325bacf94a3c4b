"""RAdam (rectified Adam)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ._composed import _check_common, _ComposedOptimizer, _decay
from .optimizer import ParamsT, Tensor, _check

__all__ = ["RAdam"]


class RAdam(_ComposedOptimizer):
    r"""RAdam, with PyTorch's update rule.

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when
    ``maximize``) and ``rho_inf = 2 / (1 - beta2) - 1``::

        p = p * (1 - lr * weight_decay)                   # if decoupled_weight_decay
        g = g + weight_decay * p                          # otherwise, if weight_decay != 0
        m = lerp(m, g, 1 - beta1)
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t > 5:                                     # the variance is tractable: rectify
            r = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p = p - lr * m_hat * r * sqrt(1 - beta2**t) / (sqrt(v) + eps)
        else:                                             # an SGD-with-momentum step
            p = p - lr * m_hat

    State per parameter: ``step`` (int), ``exp_avg`` (``m``) and
    ``exp_avg_sq`` (``v``). ``foreach``, ``capturable`` and
    ``differentiable`` are accepted for compatibility (``differentiable=True``
    is refused).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        _check_common(group, betas=True)
        _check(not group.get("differentiable", False), "RAdam: differentiable=True is not supported")

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        return {"step": 0, "exp_avg": self._zeros_like(p), "exp_avg_sq": self._zeros_like(p)}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        beta1, beta2 = (float(b) for b in group["betas"])
        lr, eps = float(group["lr"]), float(group["eps"])
        t = state["step"]
        g = _decay(group, p, g, decoupled=bool(group["decoupled_weight_decay"]))
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.add_(g - exp_avg, alpha=1.0 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1.0 - beta2)
        bias1, bias2 = 1.0 - beta1**t, 1.0 - beta2**t
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        rho_t = rho_inf - 2.0 * t * beta2**t / bias2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            denom = exp_avg_sq.sqrt().add_(eps)
            p.add_(exp_avg / denom, alpha=-lr * rect * math.sqrt(bias2) / bias1)
        else:
            p.add_(exp_avg, alpha=-lr / bias1)
