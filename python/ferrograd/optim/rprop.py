"""Rprop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _core
from ._composed import _ComposedOptimizer
from .optimizer import ParamsT, Tensor, _check, _num

__all__ = ["Rprop"]


class Rprop(_ComposedOptimizer):
    r"""Resilient backpropagation, with PyTorch's update rule.

    Only the sign of the gradient is used. Each element keeps its own step
    size, started at ``lr``. At every step, with gradient ``g`` (``-g`` when
    ``maximize``) and the previous step's (masked) gradient ``prev``::

        s = sign(g * prev)
        step_size *= etaplus where s > 0, etaminus where s < 0   # (1 where s == 0)
        step_size = clamp(step_size, step_sizes[0], step_sizes[1])
        g = 0 where s < 0                     # no move after a sign change
        p = p - sign(g) * step_size
        prev = g

    State per parameter: ``step`` (int), ``prev`` and ``step_size``.
    ``foreach``, ``capturable`` and ``differentiable`` are accepted for
    compatibility (``differentiable=True`` is refused).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            etas=etas,
            step_sizes=step_sizes,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        lr = _num(group, "lr")
        _check(lr >= 0.0, f"Invalid learning rate: {group['lr']}")
        for key in ("etas", "step_sizes"):
            v = group[key]
            if not isinstance(v, (tuple, list)) or len(v) != 2:
                raise ValueError(f"Rprop: {key} must be a pair of floats, got {v!r}")
            for x in v:
                _num({key: x}, key)
        em, ep = (float(x) for x in group["etas"])
        _check(0.0 < em < 1.0 < ep, f"Invalid eta values: {group['etas'][0]}, {group['etas'][1]}")
        lo, hi = (float(x) for x in group["step_sizes"])
        _check(
            0.0 <= lo <= hi, f"Rprop: invalid step_sizes {tuple(group['step_sizes'])}: need 0 <= min <= max"
        )
        _check(not group.get("differentiable", False), "Rprop: differentiable=True is not supported")

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        step_size = self._zeros_like(p)
        step_size.fill_(float(group["lr"]))
        return {"step": 0, "prev": self._zeros_like(p), "step_size": step_size}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        etaminus, etaplus = (float(x) for x in group["etas"])
        lo, hi = (float(x) for x in group["step_sizes"])
        prev, step_size = state["prev"], state["step_size"]
        s = (g * prev).sign()
        # The factor in the parameter's dtype (1 where the product is 0).
        factor = _core.where(s > 0, etaplus, _core.where(s < 0, etaminus, _core.ones_like(s)))
        step_size.mul_(factor).clamp_(lo, hi)
        # 0 < etaminus < 1 < etaplus, so "factor == etaminus" is "s < 0".
        g = _core.where(s < 0, _core.zeros_like(g), g)
        p.sub_(g.sign() * step_size)
        prev.copy_(g)
