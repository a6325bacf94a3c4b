"""Adadelta."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._composed import _check_common, _ComposedOptimizer, _decay
from .optimizer import ParamsT, Tensor, _check, _num

__all__ = ["Adadelta"]


class Adadelta(_ComposedOptimizer):
    r"""Adadelta, with PyTorch's update rule.

    With gradient ``g`` (``-g`` when ``maximize``)::

        g = g + weight_decay * p                          # if weight_decay != 0
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta

    State per parameter: ``step`` (int), ``square_avg`` (``v``) and
    ``acc_delta`` (``u``), tensors of the parameter's shape and dtype.
    ``foreach``, ``capturable`` and ``differentiable`` are accepted for
    compatibility; the update is the same either way (``differentiable=True``
    is refused: steps record no autograd history).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            capturable=capturable,
            maximize=maximize,
            differentiable=differentiable,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        _check_common(group)
        rho = _num(group, "rho")
        _check(0.0 <= rho <= 1.0, f"Invalid rho value: {group['rho']}")
        _check(not group.get("differentiable", False), "Adadelta: differentiable=True is not supported")

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        return {"step": 0, "square_avg": self._zeros_like(p), "acc_delta": self._zeros_like(p)}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        rho, eps, lr = float(group["rho"]), float(group["eps"]), float(group["lr"])
        g = _decay(group, p, g)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(g * g, alpha=1.0 - rho)
        std = (square_avg + eps).sqrt_()
        delta = (acc_delta + eps).sqrt_().div_(std).mul_(g)
        acc_delta.mul_(rho).add_(delta * delta, alpha=1.0 - rho)
        p.add_(delta, alpha=-lr)
