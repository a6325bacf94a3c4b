"""Adafactor."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .. import _core
from .._dtype_info import finfo
from ._composed import _ComposedOptimizer
from .optimizer import ParamsT, Tensor, _check, _num

__all__ = ["Adafactor"]


class Adafactor(_ComposedOptimizer):
    r"""Adafactor (Shazeer & Stern, 2018), with PyTorch's update rule (``torch.optim.Adafactor``).

    At step ``t`` (1-based, per parameter), with gradient ``g`` (``-g`` when ``maximize``),
    ``b = t ** beta2_decay``, ``rho = min(lr, 1 / sqrt(t))`` and ``eps1, eps2 = eps``
    (``eps1`` None: the machine epsilon of the parameter's dtype)::

        alpha = max(eps2, rms(p)) * rho
        p = p * (1 - lr * weight_decay)
        # a parameter of 2 or more dims keeps factored second moments of its last two dims:
        row_var = lerp(row_var, mean(g**2, dim=-1, keepdim=True), b)
        col_var = lerp(col_var, mean(g**2, dim=-2, keepdim=True), b)
        v = row_var @ col_var / max(mean(row_var, dim=-2, keepdim=True), eps1)
        # a vector (or scalar) keeps a full one:  v = variance = lerp(variance, g**2, b)
        u = g / sqrt(max(v, eps1**2))
        p = p - alpha / max(1, rms(u) / d) * u

    State per parameter: ``step`` (int) and ``row_var``/``col_var`` (shaped like the
    parameter with its last, resp. second-to-last, dim 1) or ``variance``. ``foreach`` is
    accepted for compatibility.
    """

    #: ``row_var``/``col_var`` are not shaped like their parameter.
    _state_shaped_like_params = False

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            beta2_decay=beta2_decay,
            eps=eps,
            d=d,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        _check(_num(group, "lr") >= 0.0, f"Learning rate should be >= 0 but is: {group['lr']}")
        _check(
            _num(group, "beta2_decay") <= 0.0, f"beta2_decay should be <= 0 but is: {group['beta2_decay']}"
        )
        eps = group["eps"]
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise ValueError(f"Adafactor: eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None:
            _check(_num({"eps": eps[0]}, "eps") >= 0.0, f"epsilon1 should be >= 0 but is: {eps[0]}")
        _check(_num({"eps": eps[1]}, "eps") >= 0.0, f"epsilon2 should be >= 0 but is: {eps[1]}")
        _check(_num(group, "d") >= 1.0, f"Clipping threshold d should be >= 1 but is: {group['d']}")
        _check(
            _num(group, "weight_decay") >= 0.0, f"weight_decay should be >= 0 but is: {group['weight_decay']}"
        )

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        if p.dim() > 1:
            shape = list(p.shape)
            row, col = shape[:-1] + [1], shape[:-2] + [1, shape[-1]]
            return {
                "step": 0,
                "row_var": _core.zeros(tuple(row), dtype=p.dtype, device=p.device),
                "col_var": _core.zeros(tuple(col), dtype=p.dtype, device=p.device),
            }
        return {"step": 0, "variance": self._zeros_like(p)}

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        lr, wd, d = float(group["lr"]), float(group["weight_decay"]), float(group["d"])
        eps1, eps2 = group["eps"]
        eps1 = finfo(p.dtype).eps if eps1 is None else float(eps1)
        t = float(state["step"])
        b = t ** float(group["beta2_decay"])
        rho = min(lr, 1.0 / math.sqrt(t))
        n = max(p.numel(), 1)
        alpha = max(float(eps2), float(p.norm(2).item()) / math.sqrt(n)) * rho
        if wd != 0.0:
            p.mul_(1.0 - lr * wd)
        g2 = g * g
        if p.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(g2.mean(-1, keepdim=True), b)
            col_var.lerp_(g2.mean(-2, keepdim=True), b)
            var = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=eps1)
        else:
            variance = state["variance"]
            variance.lerp_(g2, b)
            var = variance
        update = var.clamp(min=eps1 * eps1).rsqrt() * g
        denom = max(1.0, float(update.norm(2).item()) / (math.sqrt(n) * d))
        p.add_(update, alpha=-alpha / denom)
