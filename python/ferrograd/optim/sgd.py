"""Stochastic gradient descent (with momentum, dampening, Nesterov and weight decay)."""

from __future__ import annotations

from typing import Any

from .. import _capture, _core
from .optimizer import Optimizer, ParamsT, Tensor, _check, _num

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent, with PyTorch's update rule.

    For each parameter ``p`` with gradient ``g`` (``-g`` when ``maximize``)::

        g = g + weight_decay * p                          # if weight_decay != 0
        b = g                                             # first step, if momentum != 0
        b = momentum * b + (1 - dampening) * g            # later steps
        g = g + momentum * b if nesterov else b           # if momentum != 0
        p = p - lr * g

    State per parameter: ``momentum_buffer`` (None while ``momentum == 0``).
    All parameters of a group are updated by one fused Rust call.
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    _slot_options = frozenset({"lr", "momentum", "dampening", "weight_decay"})

    def _baked_options(self) -> dict[str, Any]:
        # Whether momentum is 0 decides whether the step keeps buffers at all.
        return {**super()._baked_options(), "['momentum'] != 0": lambda g: float(g["momentum"]) != 0}

    def _validate_group(self, group: dict[str, Any]) -> None:
        lr, momentum, wd = _num(group, "lr"), _num(group, "momentum"), _num(group, "weight_decay")
        dampening = _num(group, "dampening")
        _check(lr >= 0.0, f"Invalid learning rate: {group['lr']}")
        _check(momentum >= 0.0, f"Invalid momentum value: {group['momentum']}")
        _check(wd >= 0.0, f"Invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"]:
            _check(
                momentum > 0 and dampening == 0, "Nesterov momentum requires a momentum and zero dampening"
            )

    def _update_group(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        states: list[dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        if float(group["momentum"]) == 0:
            bufs: list = [None] * len(states)  # no momentum: the step reads no buffer
        else:
            bufs = [None if s is None else s.get("momentum_buffer") for s in states]
        dyn = self._dynamic(
            group,
            {
                "lr": lambda g: float(g["lr"]),
                "momentum": lambda g: float(g["momentum"]),
                "dampening": lambda g: float(g["dampening"]),
                "weight_decay": lambda g: float(g["weight_decay"]),
            },
        )
        if dyn is not None and float(group["momentum"]) != 0:
            # Captured: buffers must exist before the graph runs; a fresh one
            # starts from the gradient at the first run (a slot says which are fresh).
            fresh = getattr(self, "_fresh_buffers", None)
            if fresh is None:
                fresh = self._fresh_buffers = set()
            st = _capture.current()
            for i, (p, b) in enumerate(zip(params, bufs, strict=True)):
                if b is None:
                    bufs[i] = self._zeros_like(p)
                    fresh.add(id(p))
                pid = id(p)
                dyn.append(("first", i, st.slot(lambda pid=pid, fr=fresh: 1.0 if pid in fr else 0.0)))
            ids = [id(p) for p in params]
            st.after_run.append(lambda fr=fresh, ids=ids: fr.difference_update(ids))
        new_bufs = _core._sgd_step(
            params,
            grads,
            bufs,
            float(group["lr"]),
            float(group["momentum"]),
            float(group["dampening"]),
            bool(group["nesterov"]),
            float(group["weight_decay"]),
            bool(group["maximize"]),
            dynamic=dyn,
        )
        out = []
        for s, b in zip(states, new_bufs, strict=True):
            if s is None:
                s = {"momentum_buffer": b}
            else:
                s["momentum_buffer"] = b
            out.append(s)
        return out
