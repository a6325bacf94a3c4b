"""NAdam (Adam with Nesterov momentum)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ._composed import _check_common, _ComposedOptimizer, _decay
from .optimizer import ParamsT, Tensor, _check, _is_tensor, _num

__all__ = ["NAdam"]


class NAdam(_ComposedOptimizer):
    r"""NAdam, with PyTorch's update rule.

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when
    ``maximize``) and ``psi = momentum_decay``::

        p = p * (1 - lr * weight_decay)                   # if decoupled_weight_decay
        g = g + weight_decay * p                          # otherwise, if weight_decay != 0
        mu_t = beta1 * (1 - 0.5 * 0.96**(t * psi)); mu_next = beta1 * (1 - 0.5 * 0.96**((t + 1) * psi))
        prod = prod * mu_t                                # the product of mu_1 .. mu_t
        m = lerp(m, g, 1 - beta1)
        v = beta2 * v + (1 - beta2) * g * g
        d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - prod) * g / d - lr * mu_next / (1 - prod * mu_next) * m / d

    State per parameter: ``step`` (int), ``mu_product`` (float), ``exp_avg``
    (``m``) and ``exp_avg_sq`` (``v``). ``foreach``, ``capturable`` and
    ``differentiable`` are accepted for compatibility (``differentiable=True``
    is refused).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
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
            momentum_decay=momentum_decay,
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
        _check(
            _num(group, "momentum_decay") >= 0.0, f"Invalid momentum_decay value: {group['momentum_decay']}"
        )
        _check(not group.get("differentiable", False), "NAdam: differentiable=True is not supported")

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """As :meth:`Optimizer.load_state_dict`; a one-element tensor ``mu_product``
        (PyTorch's layout) is read as a float."""
        state = state_dict.get("state") if isinstance(state_dict, Mapping) else None
        if isinstance(state, Mapping):
            fixed = {}
            for k, st in state.items():
                if isinstance(st, Mapping) and _is_tensor(st.get("mu_product")):
                    mp = st["mu_product"]
                    if mp.numel() != 1:
                        raise ValueError(
                            f"loaded state 'mu_product' of parameter {k!r} must have one element, "
                            f"got shape {tuple(mp.shape)}"
                        )
                    st = {**st, "mu_product": float(mp.item())}
                fixed[k] = st
            state_dict = {**state_dict, "state": fixed}
        super().load_state_dict(state_dict)

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        return {
            "step": 0,
            "mu_product": 1.0,
            "exp_avg": self._zeros_like(p),
            "exp_avg_sq": self._zeros_like(p),
        }

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        beta1, beta2 = (float(b) for b in group["betas"])
        lr, eps, psi = float(group["lr"]), float(group["eps"]), float(group["momentum_decay"])
        t = state["step"]
        g = _decay(group, p, g, decoupled=bool(group["decoupled_weight_decay"]))
        mu = beta1 * (1.0 - 0.5 * math.pow(0.96, t * psi))
        mu_next = beta1 * (1.0 - 0.5 * math.pow(0.96, (t + 1) * psi))
        mu_product = float(state["mu_product"]) * mu
        state["mu_product"] = mu_product
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.add_(g - exp_avg, alpha=1.0 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1.0 - beta2)
        denom = exp_avg_sq.div(1.0 - beta2**t).sqrt_().add_(eps)
        p.add_(g / denom, alpha=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.add_(exp_avg / denom, alpha=-lr * mu_next / (1.0 - mu_product * mu_next))
