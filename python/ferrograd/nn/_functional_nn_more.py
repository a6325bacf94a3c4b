"""More ``torch.nn.functional`` names composed of registry ops: the multilabel margin and
triplet-with-distance losses, fractional max pooling, the cross-map LRN of ``CrossMapLRN2d``
and ``multi_head_attention_forward`` (the functional form of ``nn.MultiheadAttention``).

Re-exported by :mod:`ferrograd.nn.functional`; each is a composition, so its gradient comes
from the parts. Integer arguments that only select elements (``multilabel_margin_loss``'s
target, fractional pooling's windows) are read on the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _core
from .functional import (
    _attention,
    _check_float,
    _check_reduction,
    _check_tensor,
    _legacy_reduction,
    _reduce,
    dropout,
    linear,
    pairwise_distance,
)

Tensor = _core.Tensor

__all__ = [
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "multi_head_attention_forward",
    "multilabel_margin_loss",
    "triplet_margin_with_distance_loss",
]


def multilabel_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class multi-label hinge loss over ``(C,)`` or ``(N, C)`` scores.

    ``target`` has the input's shape and holds class indices, ended by the first ``-1``;
    per sample the loss is ``Σ_j Σ_{i ∉ targets} max(0, 1 - (x[y_j] - x[i])) / C``, then reduced.
    """
    fn = "multilabel_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_tensor(fn, "target", target)
    if target.dtype not in (_core.int32, _core.int64):
        raise TypeError(f"{fn}: target must have an integer dtype (int64), got {target.dtype}")
    if input.dim() not in (1, 2) or input.shape[-1] == 0:
        raise ValueError(
            f"{fn}: expected non-empty 1-D (C,) or 2-D (N, C) input, got shape {tuple(input.shape)}"
        )
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"{fn}: inconsistent target size: target {tuple(target.shape)} for input {tuple(input.shape)}"
        )
    x = input if input.dim() == 2 else input.unsqueeze(0)
    n, c = x.shape
    t = np.asarray(target.detach().cpu().numpy(), dtype=np.int64).reshape(n, c)
    valid = np.zeros((n, c), dtype=bool)
    is_target = np.zeros((n, c), dtype=bool)
    for r in range(n):
        for j in range(c):
            y = int(t[r, j])
            if y < 0:
                break
            if y >= c:
                raise IndexError(
                    f"{fn}: target {y} is out of bounds for {c} classes (input {tuple(input.shape)})"
                )
            valid[r, j] = True
            is_target[r, y] = True
    idx = _core.tensor(np.where(valid, t, 0), dtype=_core.int64, device=x.device)
    xy = x.gather(1, idx)  # (N, C): the score of each listed target
    diff = (x.unsqueeze(1) - xy.unsqueeze(2) + 1.0).clamp(min=0.0)  # (N, T, C)
    mask = (valid[:, :, None] & ~is_target[:, None, :]).astype(np.float64)
    loss = (diff * _core.tensor(mask, dtype=x.dtype, device=x.device)).sum((1, 2)) / c
    if input.dim() == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with a user distance ``d`` (default
    ``pairwise_distance``); ``swap`` uses ``min(d(a, n), d(p, n))`` as the negative distance."""
    fn = "triplet_margin_with_distance_loss"
    _check_reduction(fn, reduction)
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_tensor(fn, name, t)
    if margin <= 0:
        raise ValueError(f"{fn}: margin must be greater than 0, got {margin}")
    dims = {anchor.dim(), positive.dim(), negative.dim()}
    if len(dims) != 1:
        raise RuntimeError(
            f"{fn}: anchor, positive and negative must have the same number of dimensions, got shapes "
            f"{tuple(anchor.shape)}, {tuple(positive.shape)}, {tuple(negative.shape)}"
        )
    d = distance_function if distance_function is not None else pairwise_distance
    dist_pos = d(anchor, positive)
    dist_neg = d(anchor, negative)
    if swap:
        dist_neg = dist_neg.minimum(d(positive, negative))
    loss = (dist_pos - dist_neg + margin).clamp(min=0.0)
    return _reduce(loss, reduction)


def _pair(fn: str, name: str, v: Any) -> tuple[Any, Any]:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{fn}: {name} must be a number or a pair, got {v!r}")
        return v[0], v[1]
    return v, v


def _intervals(sample: Any, size: int, out: int, k: int) -> np.ndarray:
    """The window starts of fractional pooling along one dim (PyTorch's sequence, computed
    in the sample's precision)."""
    seq = np.zeros(out, dtype=np.int64)
    if out > 1:
        ft = type(sample)
        alpha = ft(size - k) / ft(out - 1)
        for i in range(out - 1):
            seq[i] = int((ft(i) + sample) * alpha) - int(sample * alpha)
    if out > 0:
        seq[out - 1] = size - k
    return seq


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size: int | Sequence[int],
    output_size: int | Sequence[int] | None = None,
    output_ratio: float | Sequence[float] | None = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Fractional max pooling (Graham, 2014) over ``(N, C, H, W)`` or ``(C, H, W)``: returns
    ``(output, indices)``, indices flat over ``H * W``. ``_random_samples`` (``(N, C, 2)`` in
    ``[0, 1)``: width, height) fixes the pseudo-random windows; by default they are drawn."""
    fn = "fractional_max_pool2d"
    _check_float(fn, "input", input)
    if input.dim() not in (3, 4):
        raise ValueError(f"{fn}: expected 3D or 4D input, got shape {tuple(input.shape)}")
    kh, kw = (int(v) for v in _pair(fn, "kernel_size", kernel_size))
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    if output_size is None:
        if output_ratio is None:
            raise ValueError(
                f"{fn}: fractional_max_pool2d requires specifying either an output_size or an output_ratio"
            )
        rh, rw = (float(v) for v in _pair(fn, "output_ratio", output_ratio))
        if not (0 < rh < 1 and 0 < rw < 1):
            raise ValueError(f"{fn}: output_ratio must be in (0, 1), got {output_ratio!r}")
        oh, ow = int(h * rh), int(w * rw)
    else:
        oh, ow = (int(v) for v in _pair(fn, "output_size", output_size))
    if kh <= 0 or kw <= 0 or oh <= 0 or ow <= 0:
        raise ValueError(f"{fn}: kernel_size and output_size must be positive, got {(kh, kw)} and {(oh, ow)}")
    if oh + kh - 1 > h or ow + kw - 1 > w:
        raise ValueError(
            f"{fn}: output size {(oh, ow)} + kernel size {(kh, kw)} - 1 is too large for input {tuple(input.shape)}"
        )
    if _random_samples is None:
        _random_samples = _core.rand((n, c, 2), dtype=x.dtype)
    if tuple(_random_samples.shape) != (n, c, 2):
        raise ValueError(
            f"{fn}: _random_samples must have shape {(n, c, 2)}, got {tuple(_random_samples.shape)}"
        )
    ft = np.float64 if x.dtype == _core.float64 else np.float32
    samples = np.asarray(_random_samples.detach().cpu().numpy()).astype(ft)
    win = np.empty((n, c, oh, ow, kh * kw), dtype=np.int64)
    dh, dw = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    for b in range(n):
        for ch in range(c):
            sw = _intervals(samples[b, ch, 0], w, ow, kw)
            sh = _intervals(samples[b, ch, 1], h, oh, kh)
            rows = sh[:, None, None, None] + dh[None, None]
            cols = sw[None, :, None, None] + dw[None, None]
            win[b, ch] = (rows * w + cols).reshape(oh, ow, kh * kw)
    idx = _core.tensor(win.reshape(n, c, -1), dtype=_core.int64, device=x.device)
    vals = x.reshape((n, c, h * w)).gather(2, idx).reshape((n, c, oh, ow, kh * kw))
    out, arg = vals.max(4)
    flat = idx.reshape((n, c, oh, ow, kh * kw)).gather(4, arg.unsqueeze(4)).squeeze(4)
    if not batched:
        out, flat = out.squeeze(0), flat.squeeze(0)
    return out, flat


def fractional_max_pool2d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    output_size: int | Sequence[int] | None = None,
    output_ratio: float | Sequence[float] | None = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """Fractional max pooling (see :func:`fractional_max_pool2d_with_indices`); returns the
    output, or ``(output, indices)`` with ``return_indices=True``."""
    out, idx = fractional_max_pool2d_with_indices(
        input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
    return (out, idx) if return_indices else out


def _cross_map_window(channels: int, size: int) -> np.ndarray:
    """``M[c, j] = 1`` when channel ``j`` enters channel ``c``'s sum in ``CrossMapLRN2d``
    (the running-window recurrence of PyTorch's implementation, kept exactly)."""
    pre_pad = int((size - 1) / 2 + 1)
    m = np.zeros((channels, channels))
    m[0, : min(pre_pad, channels)] = 1.0
    for c in range(1, channels):
        m[c] = m[c - 1]
        if c < channels - pre_pad + 1:
            m[c, c + pre_pad - 1] += 1.0
        if c > pre_pad:
            m[c, c - pre_pad] -= 1.0
    return m


def _cross_map_lrn2d(input: Tensor, size: int, alpha: float, beta: float, k: float) -> Tensor:
    """``x * (k + alpha / size * Σ_window x²)^-beta`` over channels of a 4-D input."""
    fn = "CrossMapLRN2d"
    _check_float(fn, "input", input)
    if input.dim() != 4:
        raise ValueError(
            f"{fn}: expected input to be 4D, got {input.dim()}D instead (shape {tuple(input.shape)})"
        )
    c = input.shape[1]
    m = _core.tensor(_cross_map_window(c, size), dtype=input.dtype, device=input.device)
    sq = input.square().permute(0, 2, 3, 1)  # (N, H, W, C)
    scale = (sq @ m.T).permute(0, 3, 1, 2) * (alpha / size) + k
    return input * scale.pow(-beta)


def _proj(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    return linear(x, w, b)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention on sequence-first ``(L, N, E)`` query and ``(S, N, E)`` key/value
    (or unbatched ``(L, E)``), as ``torch.nn.functional.multi_head_attention_forward``.

    Returns ``(attn_output (L, N, E), weights)``: weights ``(N, L, S)`` averaged over heads
    (``(N, H, L, S)`` with ``average_attn_weights=False``) or None without ``need_weights``.
    In bool masks True marks a position that may not be attended to; float masks are added.
    ``bias_k``/``bias_v`` append a learned key/value, ``add_zero_attn`` a zero one; ``static_k``
    and ``static_v`` (``(N * H, S, E / H)``) replace the projected keys and values.
    """
    fn = "multi_head_attention_forward"
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_float(fn, name, t)
    batched = query.dim() == 3
    if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(
            f"{fn}: query, key and value must all be 3-D (L, N, E) or 2-D (unbatched), got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise ValueError(
            f"{fn}: was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}"
        )
    if num_heads <= 0 or embed_dim % num_heads != 0:
        raise ValueError(f"{fn}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key.shape[:2] != value.shape[:2] or key.shape[1] != bsz:
        raise ValueError(
            f"{fn}: key {tuple(key.shape)} and value {tuple(value.shape)} must match each other's length and "
            f"the query batch (query {tuple(query.shape)})"
        )
    h = num_heads
    hd = embed_dim // h
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(f"{fn}: use_separate_proj_weight is True but q/k/v_proj_weight is None")
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if in_proj_weight is None:
            raise ValueError(f"{fn}: use_separate_proj_weight is False but in_proj_weight is None")
        wq, wk, wv = in_proj_weight.chunk(3, 0)
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias.chunk(3, 0)
    else:
        bq = bk = bv = None
    q = _proj(query, wq, bq)
    k = _proj(key, wk, bk)
    v = _proj(value, wv, bv)

    mask: Tensor | None = None
    if attn_mask is None and is_causal:
        raise RuntimeError(f"{fn}: need attn_mask if specifying the is_causal hint")
    if attn_mask is not None:
        mask = _additive(fn, attn_mask, q.dtype, "attn_mask")
        if mask.dim() == 2:
            mask = mask.unsqueeze(0)
        elif mask.dim() != 3:
            raise ValueError(f"{fn}: attn_mask must be 2-D or 3-D, got shape {tuple(attn_mask.shape)}")
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{fn}: bias cannot be added to static key or value")
        k = _core.cat([k, bias_k.reshape((1, 1, embed_dim)).expand((1, bsz, embed_dim))], 0)
        v = _core.cat([v, bias_v.reshape((1, 1, embed_dim)).expand((1, bsz, embed_dim))], 0)
        mask = None if mask is None else _pad_last(mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    elif (bias_k is None) != (bias_v is None):
        raise ValueError(f"{fn}: bias_k and bias_v must both be given or both be None")

    # (L, N, E) -> (N * H, L, hd)
    q = q.reshape((tgt_len, bsz * h, hd)).transpose(0, 1)
    k = k.reshape((k.shape[0], bsz * h, hd)).transpose(0, 1) if static_k is None else static_k
    v = v.reshape((v.shape[0], bsz * h, hd)).transpose(0, 1) if static_v is None else static_v
    if tuple(k.shape[::2]) != (bsz * h, hd) or tuple(v.shape[::2]) != (bsz * h, hd):
        raise ValueError(
            f"{fn}: static_k/static_v must have shape ({bsz * h}, S, {hd}), got {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if add_zero_attn:
        k = _core.cat([k, _core.zeros((bsz * h, 1, hd), dtype=k.dtype, device=k.device)], 1)
        v = _core.cat([v, _core.zeros((bsz * h, 1, hd), dtype=v.dtype, device=v.device)], 1)
        mask = None if mask is None else _pad_last(mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    src_len = k.shape[1]
    if mask is not None and tuple(mask.shape[-2:]) != (tgt_len, src_len):
        raise ValueError(f"{fn}: attn_mask must end in ({tgt_len}, {src_len}), got shape {tuple(mask.shape)}")
    if mask is not None and mask.shape[0] not in (1, bsz * h):
        raise ValueError(
            f"{fn}: 3-D attn_mask must have {bsz * h} rows on dim 0, got shape {tuple(mask.shape)}"
        )
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ValueError(
                f"{fn}: key_padding_mask must have shape {(bsz, src_len)}, got {tuple(key_padding_mask.shape)}"
            )
        kpm = _additive(fn, key_padding_mask, q.dtype, "key_padding_mask").reshape((bsz, 1, 1, src_len))
        kpm = kpm.expand((bsz, h, 1, src_len)).reshape((bsz * h, 1, src_len))
        mask = kpm if mask is None else mask + kpm

    p = dropout_p if training else 0.0
    q4 = q.reshape((bsz, h, tgt_len, hd))
    k4 = k.reshape((bsz, h, src_len, hd))
    v4 = v.reshape((bsz, h, src_len, hd))
    m4 = None
    if mask is not None:
        m4 = (
            mask.reshape((1, 1, tgt_len, src_len))
            if mask.shape[0] == 1
            else mask.reshape((bsz, h, tgt_len, src_len))
        )
    out, weights = _attention(q4, k4, v4, m4, 0.0, False, None, fn)
    if p > 0.0:
        weights = dropout(weights, p, True)
        out = weights @ v4
    out = out.permute(2, 0, 1, 3).reshape((tgt_len, bsz, embed_dim))
    out = linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.mean(1)
    if not batched:
        weights = weights.squeeze(0)
    return out, weights


def _additive(fn: str, mask: Tensor, dtype: Any, name: str) -> Tensor:
    """A float mask to add to the scores: bool True (= do not attend) becomes -inf."""
    if mask.dtype == _core.bool:
        return _core.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    if mask.dtype.is_floating_point:
        return mask.to(dtype)
    raise TypeError(f"{fn}: {name} must be bool or floating point, got {mask.dtype}")


def _pad_last(mask: Tensor) -> Tensor:
    """Append one column (a zero, or False) on the last dim of a mask."""
    pad = _core.zeros((*mask.shape[:-1], 1), dtype=mask.dtype, device=mask.device)
    return _core.cat([mask, pad], mask.dim() - 1)
