"""Adam and AdamW."""

from __future__ import annotations

from typing import Any

from .. import _capture, _core
from .optimizer import Optimizer, ParamsT, Tensor, _check, _num

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    r"""Adam, with PyTorch's update rule.

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when
    ``maximize``)::

        g = g + weight_decay * p                          # if weight_decay != 0
        m = lerp(m, g, 1 - beta1)
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                             # if amsgrad (v_max is used below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with
    ``amsgrad``, ``max_exp_avg_sq`` (tensors of the parameter's shape and
    dtype). All parameters of a group are updated by one fused Rust call.
    """

    _decoupled = False

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    _slot_options = frozenset({"lr", "betas", "eps", "weight_decay"})

    def _validate_group(self, group: dict[str, Any]) -> None:
        lr, eps, wd = _num(group, "lr"), _num(group, "eps"), _num(group, "weight_decay")
        _check(lr >= 0.0, f"Invalid learning rate: {group['lr']}")
        _check(eps >= 0.0, f"Invalid epsilon value: {group['eps']}")
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair of floats, got {betas!r}")
        for i, b in enumerate(betas):
            b = _num({"betas": b}, "betas")
            _check(0.0 <= b < 1.0, f"Invalid beta parameter at index {i}: {betas[i]}")
        _check(wd >= 0.0, f"Invalid weight_decay value: {group['weight_decay']}")

    def _update_group(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        states: list[dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        amsgrad = bool(group["amsgrad"])
        new_states = []
        for p, s in zip(params, states, strict=True):
            s = dict(s) if s else {}
            if "step" not in s:
                s["step"] = 0
                s["exp_avg"] = self._zeros_like(p)
                s["exp_avg_sq"] = self._zeros_like(p)
            if amsgrad and "max_exp_avg_sq" not in s:
                s["max_exp_avg_sq"] = self._zeros_like(p)
            new_states.append(s)
        beta1, beta2 = group["betas"]
        steps = [int(s["step"]) + 1 for s in new_states]
        dyn = self._dynamic(
            group,
            {
                "lr": lambda g: float(g["lr"]),
                "beta1": lambda g: float(g["betas"][0]),
                "beta2": lambda g: float(g["betas"][1]),
                "eps": lambda g: float(g["eps"]),
                "weight_decay": lambda g: float(g["weight_decay"]),
            },
        )
        if dyn is not None:
            # Captured: step counts are read at every run and advanced after it.
            st = _capture.current()
            for i, p in enumerate(params):
                dyn.append(("step", i, st.slot(lambda p=p: self.state[p]["step"] + 1)))
        _core._adam_step(
            params,
            grads,
            [s["exp_avg"] for s in new_states],
            [s["exp_avg_sq"] for s in new_states],
            [s["max_exp_avg_sq"] for s in new_states] if amsgrad else [],
            steps,
            float(group["lr"]),
            float(beta1),
            float(beta2),
            float(group["eps"]),
            float(group["weight_decay"]),
            amsgrad,
            bool(group["maximize"]),
            self._decoupled,
            dynamic=dyn,
        )
        if dyn is not None:
            self._after_run(lambda ps=list(params): self._advance_steps(ps))
            return new_states
        for s, t in zip(new_states, steps, strict=True):
            s["step"] = t
        return new_states

    def _advance_steps(self, params: list[Tensor]) -> None:
        for p in params:
            self.state[p]["step"] += 1


class AdamW(Adam):
    r"""Adam with decoupled weight decay (PyTorch's AdamW).

    As :class:`Adam`, except that weight decay shrinks the parameter directly
    before the update, ``p = p * (1 - lr * weight_decay)``, instead of being
    added to the gradient. The default ``weight_decay`` is ``1e-2``.
    """

    _decoupled = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
