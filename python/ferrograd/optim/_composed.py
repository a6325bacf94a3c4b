"""The base of the optimizers whose update is composed of tensor ops.

``Adadelta``, ``Adagrad``, ``Adamax``, ``NAdam`` and ``RAdam`` have no fused
Rust kernel: their step applies PyTorch's single-tensor update rule with
in-place tensor ops under ``no_grad`` (parameters and state tensors keep
their identity), one parameter at a time, on whatever device the parameter
lives. Their steps run eagerly only: calling ``step()`` while a graph is
being captured raises :class:`ferrograd.TraceError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import _capture, _core
from .optimizer import Optimizer, Tensor, _check, _num

__all__: list[str] = []


class _ComposedOptimizer(Optimizer):
    """An optimizer updating each parameter with eager, in-place tensor ops.

    Subclasses implement :meth:`_init_state` (the state of a parameter at
    its first step) and :meth:`_update_param` (one in-place update).
    """

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient (see the class's update rule).

        ``closure`` (optional) re-evaluates the model and returns the loss; it
        runs with gradients enabled before the update and its result is
        returned.
        """
        if _capture.is_capturing():
            raise _core.TraceError(
                f"{type(self).__name__}.step() cannot be captured into a graph: its update is composed "
                "of eager tensor ops; call it outside the compiled function"
            )
        return super().step(closure)

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        """The state of parameter ``p`` before its first step."""
        raise NotImplementedError

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        """Update ``p`` and ``state`` in place from gradient ``g`` (``step`` already advanced)."""
        raise NotImplementedError

    def _update_group(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        states: list[dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        name = type(self).__name__
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            if tuple(g.shape) != tuple(p.shape) or g.dtype != p.dtype or g.device != p.device:
                raise ValueError(
                    f"{name}.step: parameter {i} has shape {tuple(p.shape)}, dtype {p.dtype} on {p.device}, "
                    f"but its gradient has shape {tuple(g.shape)}, dtype {g.dtype} on {g.device}"
                )
        new_states = []
        for p, g, s in zip(params, grads, states, strict=True):
            s = dict(s) if s else {}
            if "step" not in s:
                s.update(self._init_state(group, p))
                s.setdefault("step", 0)
            s["step"] = int(s["step"]) + 1
            if group.get("maximize", False):
                g = g.neg()
            self._update_param(group, p, g, s)
            new_states.append(s)
        return new_states


def _check_common(group: Mapping[str, Any], *, betas: bool = False) -> None:
    """PyTorch's checks of ``lr``, ``eps``, ``weight_decay`` and (optionally) ``betas``."""
    lr, eps, wd = _num(group, "lr"), _num(group, "eps"), _num(group, "weight_decay")
    _check(lr >= 0.0, f"Invalid learning rate: {group['lr']}")
    _check(eps >= 0.0, f"Invalid epsilon value: {group['eps']}")
    _check(wd >= 0.0, f"Invalid weight_decay value: {group['weight_decay']}")
    if betas:
        bs = group["betas"]
        if not isinstance(bs, (tuple, list)) or len(bs) != 2:
            raise ValueError(f"betas must be a pair of floats, got {bs!r}")
        for i, b in enumerate(bs):
            v = _num({"betas": b}, "betas")
            _check(0.0 <= v < 1.0, f"Invalid beta parameter at index {i}: {b}")


def _decay(group: dict[str, Any], p: Tensor, g: Tensor, decoupled: bool = False) -> Tensor:
    """Apply weight decay: shrink ``p`` in place (decoupled) or return ``g + wd * p``."""
    wd = float(group["weight_decay"])
    if wd == 0.0:
        return g
    if decoupled:
        p.mul_(1.0 - float(group["lr"]) * wd)
        return g
    return g.add(p, alpha=wd)
