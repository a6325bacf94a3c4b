"""ASGD (averaged stochastic gradient descent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _core
from ._composed import _ComposedOptimizer
from .optimizer import ParamsT, Tensor, _check, _num

__all__ = ["ASGD"]


class ASGD(_ComposedOptimizer):
    r"""Averaged stochastic gradient descent, with PyTorch's update rule.

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when
    ``maximize``) and the state's ``eta`` (``lr`` at the first step) and
    ``mu`` (1 at the first step)::

        g = g + weight_decay * p                          # if weight_decay != 0
        p = p * (1 - lambd * eta) - eta * g
        ax = p if mu == 1 else ax + mu * (p - ax)         # the running average
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)

    The average ``ax`` is in ``optimizer.state[p]["ax"]`` (averaging starts
    after ``t0`` steps). State per parameter: ``step`` (int), ``eta`` and
    ``mu`` (Python floats; PyTorch keeps 0-d tensors, which
    :meth:`load_state_dict` accepts) and ``ax``. ``foreach``, ``capturable``
    and ``differentiable`` are accepted for compatibility
    (``differentiable=True`` is refused).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            lambd=lambd,
            alpha=alpha,
            t0=t0,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        for key, label in (("lr", "learning rate"), ("lambd", "lambd value"), ("alpha", "alpha value")):
            _check(_num(group, key) >= 0.0, f"Invalid {label}: {group[key]}")
        _num(group, "t0")
        _check(_num(group, "weight_decay") >= 0.0, f"Invalid weight_decay value: {group['weight_decay']}")
        _check(not group.get("differentiable", False), "ASGD: differentiable=True is not supported")

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        return {"step": 0, "eta": float(group["lr"]), "mu": 1.0, "ax": self._zeros_like(p)}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        lr, lambd = float(group["lr"]), float(group["lambd"])
        wd = float(group["weight_decay"])
        if wd != 0.0:
            g = g.add(p, alpha=wd)
        eta, mu = float(state["eta"]), float(state["mu"])
        p.mul_(1.0 - lambd * eta)
        p.add_(g, alpha=-eta)
        ax = state["ax"]
        if mu != 1.0:
            ax.add_((p - ax).mul_(mu))
        else:
            ax.copy_(p)
        t = state["step"]
        state["eta"] = lr / ((1.0 + lambd * lr * t) ** float(group["alpha"]))
        state["mu"] = 1.0 / max(1.0, t - float(group["t0"]))

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a state dict (see :meth:`Optimizer.load_state_dict`); ``eta`` and ``mu``
        saved as one-element tensors (as PyTorch saves them) are read as floats."""
        if isinstance(state_dict, Mapping) and isinstance(state_dict.get("state"), Mapping):
            state = {}
            for k, st in state_dict["state"].items():
                if isinstance(st, Mapping):
                    st = dict(st)
                    for name in ("eta", "mu"):
                        v = st.get(name)
                        if isinstance(v, _core.Tensor):
                            if v.numel() != 1:
                                raise ValueError(
                                    f"ASGD: loaded state '{name}' of parameter {k!r} must have one element, "
                                    f"got shape {tuple(v.shape)}"
                                )
                            st[name] = float(v.item())
                state[k] = st
            state_dict = {**state_dict, "state": state}
        super().load_state_dict(state_dict)
