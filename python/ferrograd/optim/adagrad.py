"""Adagrad."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._composed import _check_common, _ComposedOptimizer, _decay
from .optimizer import ParamsT, Tensor, _check, _num

__all__ = ["Adagrad"]


class Adagrad(_ComposedOptimizer):
    r"""Adagrad, with PyTorch's update rule.

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when
    ``maximize``)::

        g = g + weight_decay * p                          # if weight_decay != 0
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (sqrt(s) + eps)

    State per parameter: ``step`` (int) and ``sum`` (``s``, starting at
    ``initial_accumulator_value``), created by the constructor as in
    PyTorch. ``foreach``, ``differentiable`` and ``fused`` are accepted for
    compatibility (``differentiable=True`` and ``fused=True`` are refused).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self._init_state(group, p)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        _check_common(group)
        _check(_num(group, "lr_decay") >= 0.0, f"Invalid lr_decay value: {group['lr_decay']}")
        init = _num(group, "initial_accumulator_value")
        _check(init >= 0.0, f"Invalid initial_accumulator_value value: {group['initial_accumulator_value']}")
        _check(not group.get("differentiable", False), "Adagrad: differentiable=True is not supported")
        _check(not group.get("fused", False), "Adagrad: fused=True is not supported")

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        s = self._zeros_like(p)
        init = float(group["initial_accumulator_value"])
        if init != 0.0:
            s.fill_(init)
        return {"step": 0, "sum": s}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        g = _decay(group, p, g)
        clr = float(group["lr"]) / (1.0 + (state["step"] - 1) * float(group["lr_decay"]))
        acc = state["sum"]
        acc.add_(g * g)
        std = acc.sqrt().add_(float(group["eps"]))
        p.add_(g / std, alpha=-clr)
