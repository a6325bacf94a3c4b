"""RMSprop."""

from __future__ import annotations

from typing import Any

from .. import _core
from .optimizer import Optimizer, ParamsT, Tensor, _check, _num

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop, with PyTorch's update rule.

    With gradient ``g`` (``-g`` when ``maximize``)::

        g = g + weight_decay * p                          # if weight_decay != 0
        s = alpha * s + (1 - alpha) * g * g
        a = lerp(a, g, 1 - alpha); d = sqrt(s - a * a) + eps   # if centered
        d = sqrt(s) + eps                                 # otherwise
        b = momentum * b + g / d; p = p - lr * b          # if momentum > 0
        p = p - lr * g / d                                # otherwise

    State per parameter: ``step`` (int), ``square_avg``, and
    ``momentum_buffer`` (momentum > 0) and ``grad_avg`` (centered). All
    parameters of a group are updated by one fused Rust call.
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            maximize=maximize,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    _slot_options = frozenset({"lr", "alpha", "eps", "weight_decay", "momentum"})

    def _baked_options(self) -> dict[str, Any]:
        # Whether momentum is positive decides whether the step keeps buffers.
        return {**super()._baked_options(), "['momentum'] > 0": lambda g: float(g["momentum"]) > 0}

    def _validate_group(self, group: dict[str, Any]) -> None:
        lr, eps, alpha = _num(group, "lr"), _num(group, "eps"), _num(group, "alpha")
        momentum, wd = _num(group, "momentum"), _num(group, "weight_decay")
        _check(lr >= 0.0, f"Invalid learning rate: {group['lr']}")
        _check(eps >= 0.0, f"Invalid epsilon value: {group['eps']}")
        _check(momentum >= 0.0, f"Invalid momentum value: {group['momentum']}")
        _check(wd >= 0.0, f"Invalid weight_decay value: {group['weight_decay']}")
        _check(alpha >= 0.0, f"Invalid alpha value: {group['alpha']}")

    def _update_group(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        states: list[dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        use_buf = float(group["momentum"]) > 0
        centered = bool(group["centered"])
        new_states = []
        for p, s in zip(params, states, strict=True):
            s = dict(s) if s else {}
            if "step" not in s:
                s["step"] = 0
                s["square_avg"] = self._zeros_like(p)
            if use_buf and "momentum_buffer" not in s:
                s["momentum_buffer"] = self._zeros_like(p)
            if centered and "grad_avg" not in s:
                s["grad_avg"] = self._zeros_like(p)
            new_states.append(s)
        dyn = self._dynamic(
            group,
            {
                "lr": lambda g: float(g["lr"]),
                "alpha": lambda g: float(g["alpha"]),
                "eps": lambda g: float(g["eps"]),
                "weight_decay": lambda g: float(g["weight_decay"]),
                "momentum": lambda g: float(g["momentum"]),
            },
        )
        _core._rmsprop_step(
            params,
            grads,
            [s["square_avg"] for s in new_states],
            [s["momentum_buffer"] for s in new_states] if use_buf else [],
            [s["grad_avg"] for s in new_states] if centered else [],
            float(group["lr"]),
            float(group["alpha"]),
            float(group["eps"]),
            float(group["weight_decay"]),
            float(group["momentum"]),
            centered,
            bool(group["maximize"]),
            dynamic=dyn,
        )
        if dyn is not None:
            self._after_run(lambda ps=list(params): self._advance_steps(ps))
            return new_states
        for s in new_states:
            s["step"] = int(s["step"]) + 1
        return new_states

    def _advance_steps(self, params: list[Tensor]) -> None:
        for p in params:
            self.state[p]["step"] += 1
