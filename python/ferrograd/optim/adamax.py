"""Adamax."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._composed import _check_common, _ComposedOptimizer, _decay
from .optimizer import ParamsT, Tensor, _check

__all__ = ["Adamax"]


class Adamax(_ComposedOptimizer):
    r"""Adamax (Adam with the infinity norm), with PyTorch's update rule.

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when
    ``maximize``)::

        g = g + weight_decay * p                          # if weight_decay != 0
        m = lerp(m, g, 1 - beta1)
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    State per parameter: ``step`` (int), ``exp_avg`` (``m``) and ``exp_inf``
    (``u``). ``foreach``, ``differentiable`` and ``capturable`` are accepted
    for compatibility (``differentiable=True`` is refused).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        _check_common(group, betas=True)
        _check(not group.get("differentiable", False), "Adamax: differentiable=True is not supported")

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        return {"step": 0, "exp_avg": self._zeros_like(p), "exp_inf": self._zeros_like(p)}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        beta1, beta2 = (float(b) for b in group["betas"])
        g = _decay(group, p, g)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.add_(g - exp_avg, alpha=1.0 - beta1)
        exp_inf.copy_(exp_inf.mul_(beta2).maximum(g.abs().add_(float(group["eps"]))))
        clr = float(group["lr"]) / (1.0 - beta1 ** state["step"])
        p.add_(exp_avg / exp_inf, alpha=-clr)
