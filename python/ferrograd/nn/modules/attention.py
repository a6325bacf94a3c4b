"""``MultiheadAttention``, as ``torch.nn.MultiheadAttention``."""

from __future__ import annotations

import math
from typing import Any

from ... import _core
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module

Tensor = _core.Tensor

__all__ = ["MultiheadAttention"]


def _additive_mask(mask: Tensor, dtype: Any, name: str) -> Tensor:
    """A float mask to add to the scores: bool ``True`` (= do not attend) becomes -inf."""
    if mask.dtype == _core.bool:
        return _core.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    if mask.dtype.is_floating_point:
        return mask.to(dtype)
    raise TypeError(f"MultiheadAttention: {name} must be bool or floating point, got {mask.dtype}")


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention with input and output projections.

    ``forward(query, key, value)`` takes ``(L, N, E)``, ``(S, N, kdim)``,
    ``(S, N, vdim)`` (or batch first with ``batch_first=True``, or
    unbatched ``(L, E)``) and returns ``(attn_output, attn_weights)``;
    weights are ``(N, L, S)`` averaged over heads (``(N, H, L, S)`` with
    ``average_attn_weights=False``) or None when ``need_weights=False``.

    Masks follow PyTorch's MultiheadAttention convention: in a bool
    ``attn_mask`` (``(L, S)`` or ``(N*num_heads, L, S)``) or
    ``key_padding_mask`` (``(N, S)``), True marks a position that may NOT
    be attended to; float masks are added to the scores. ``is_causal=True``
    without an ``attn_mask`` builds the causal mask.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"MultiheadAttention: embed_dim and num_heads must be > 0, got {embed_dim} and {num_heads}"
            )
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
            )
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        dtype = dtype or _core.get_default_dtype()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_core.empty((3 * embed_dim, embed_dim), dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(_core.empty((embed_dim, embed_dim), dtype=dtype))
            self.k_proj_weight = Parameter(_core.empty((embed_dim, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(_core.empty((embed_dim, self.vdim), dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_core.empty((3 * embed_dim,), dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self._reset_parameters()
        if device is not None:
            self.to(device)

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _projections(self) -> tuple[Tensor, Tensor, Tensor, Any, Any, Any]:
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            wq, wk, wv = self.in_proj_weight.chunk(3, 0)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        if self.in_proj_bias is not None:
            bq, bk, bv = (
                self.in_proj_bias.narrow(0, 0, e),
                self.in_proj_bias.narrow(0, e, e),
                self.in_proj_bias.narrow(0, 2 * e, e),
            )
        else:
            bq = bk = bv = None
        return wq, wk, wv, bq, bk, bv

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; returns ``(output, weights or None)``."""
        name = "MultiheadAttention"
        batched = query.dim() == 3
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise ValueError(
                f"{name}: query, key and value must all be 3-D (batched) or 2-D (unbatched), got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        # now (N, L, E), (N, S, kdim), (N, S, vdim)
        n, L, e = query.shape
        s = key.shape[1]
        if e != self.embed_dim:
            raise ValueError(
                f"{name}: expected query embedding size {self.embed_dim}, got {tuple(query.shape)}"
            )
        if key.shape[0] != n or value.shape[0] != n or value.shape[1] != s:
            raise ValueError(
                f"{name}: key and value must match the query batch and each other's length, got query "
                f"{tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)} (batch first)"
            )
        h, hd = self.num_heads, self.head_dim
        wq, wk, wv, bq, bk, bv = self._projections()
        q = F.linear(query, wq, bq).reshape((n, L, h, hd)).permute(0, 2, 1, 3)
        k = F.linear(key, wk, bk).reshape((n, s, h, hd)).permute(0, 2, 1, 3)
        v = F.linear(value, wv, bv).reshape((n, s, h, hd)).permute(0, 2, 1, 3)

        mask: Tensor | None = None
        if attn_mask is None and is_causal:
            attn_mask = _core.ones((L, s), dtype=_core.bool).tril().logical_not()
        if attn_mask is not None:
            am = _additive_mask(attn_mask, q.dtype, "attn_mask")
            if am.dim() == 2:
                if tuple(am.shape) != (L, s):
                    raise ValueError(f"{name}: 2-D attn_mask must have shape {(L, s)}, got {tuple(am.shape)}")
            elif am.dim() == 3:
                if tuple(am.shape) != (n * h, L, s):
                    raise ValueError(
                        f"{name}: 3-D attn_mask must have shape {(n * h, L, s)}, got {tuple(am.shape)}"
                    )
                am = am.reshape((n, h, L, s))
            else:
                raise ValueError(f"{name}: attn_mask must be 2-D or 3-D, got {tuple(am.shape)}")
            mask = am
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, s):
                raise ValueError(
                    f"{name}: key_padding_mask must have shape {(n, s)}, got {tuple(key_padding_mask.shape)}"
                )
            kpm = _additive_mask(key_padding_mask, q.dtype, "key_padding_mask").reshape((n, 1, 1, s))
            mask = kpm if mask is None else mask + kpm

        p = self.dropout if self.training else 0.0
        out, weights = F._attention(q, k, v, mask, p, False, None, name)
        out = self.out_proj(out.permute(0, 2, 1, 3).reshape((n, L, e)))
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
