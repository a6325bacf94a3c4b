"""SparseAdam."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .. import _core, _sparse_rows
from ._composed import _ComposedOptimizer
from .optimizer import ParamsT, Tensor, _check, _num

__all__ = ["SparseAdam"]


class SparseAdam(_ComposedOptimizer):
    r"""Adam for embedding tables with "sparse" gradients, with PyTorch's update rule.

    ferrograd has no sparse tensors: ``nn.Embedding(sparse=True)`` (or ``F.embedding(...,
    sparse=True)``) gives its weight a dense gradient and records which rows were looked up
    since that gradient was last cleared (rows at ``padding_idx`` left out). Those rows are the
    rows PyTorch's sparse gradient lists, and only they are updated: at step ``t`` (1-based,
    per parameter, counted over every step), for each recorded row ``r`` with gradient ``g``
    (``-g`` when ``maximize``)::

        m[r] = m[r] + (1 - beta1) * (g[r] - m[r])
        v[r] = v[r] + (1 - beta2) * (g[r]^2 - v[r])
        p[r] = p[r] - lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m[r] / (sqrt(v[r]) + eps)

    Other rows' parameters and moments stay as they are. A parameter whose gradient came from
    anywhere else (no recorded rows) raises ``RuntimeError``, as PyTorch raises for a dense
    gradient. State per parameter: ``step`` (int), ``exp_avg`` and ``exp_avg_sq`` (dense,
    like the parameter).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        maximize: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        lr, eps = _num(group, "lr"), _num(group, "eps")
        _check(lr >= 0.0, f"Invalid learning rate: {group['lr']}")
        _check(eps >= 0.0, f"Invalid epsilon value: {group['eps']}")
        bs = group["betas"]
        if not isinstance(bs, (tuple, list)) or len(bs) != 2:
            raise ValueError(f"betas must be a pair of floats, got {bs!r}")
        for i, b in enumerate(bs):
            v = _num({"betas": b}, "betas")
            _check(0.0 <= v < 1.0, f"Invalid beta parameter at index {i}: {b}")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients (to None, or zero in place) and forget their recorded rows: a
        zeroed sparse gradient lists no rows in PyTorch either."""
        super().zero_grad(set_to_none)
        for group in self.param_groups:
            for p in group["params"]:
                _sparse_rows.clear(p)

    def _init_state(self, group: dict[str, Any], p: Tensor) -> dict[str, Any]:
        return {"step": 0, "exp_avg": self._zeros_like(p), "exp_avg_sq": self._zeros_like(p)}

    def _update_group(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        states: list[dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        for i, p in enumerate(params):
            if _sparse_rows.rows(p) is None:
                raise RuntimeError(
                    f"SparseAdam does not support dense gradients: parameter {i} (shape {tuple(p.shape)}, "
                    f"dtype {p.dtype}) has a gradient not produced by an embedding lookup with "
                    "sparse=True; consider Adam instead"
                )
        return super()._update_group(group, params, grads, states)

    def _update_param(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any]) -> None:
        host_rows = _sparse_rows.rows(p)
        assert host_rows is not None
        if host_rows.size == 0:
            return
        beta1, beta2 = (float(b) for b in group["betas"])
        rows = _core.tensor(host_rows, dtype=_core.int64, device=p.device)
        m_all, v_all = state["exp_avg"], state["exp_avg_sq"]
        gr = g.index_select(0, rows)
        m_old, v_old = m_all.index_select(0, rows), v_all.index_select(0, rows)
        # PyTorch's order of operations: the update values first, then the old values added back.
        m_upd = (gr - m_old) * (1.0 - beta1)
        v_upd = (gr * gr - v_old) * (1.0 - beta2)
        m_all.index_add_(0, rows, m_upd)
        v_all.index_add_(0, rows, v_upd)
        numer = m_upd + m_old
        denom = (v_upd + v_old).sqrt() + float(group["eps"])
        t = int(state["step"])
        step_size = float(group["lr"]) * math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)
        p.index_add_(0, rows, (numer / denom) * (-step_size))
