"""More ``torch.nn.functional`` names composed of registry ops: 1-D and adaptive-max pooling,
power-average pooling, the shrink/threshold activations, alpha dropout, channel shuffle,
``pdist`` and the Poisson, Gaussian, hinge-embedding, multi-margin and soft-margin losses.

Re-exported by :mod:`ferrograd.nn.functional`; every function is a composition, so its
gradient (and its GPU and captured forms) come from the parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

from .. import _autocast as _amp
from .. import _capture, _core
from .functional import (
    _check_float,
    _check_p,
    _check_reduction,
    _check_same_shape,
    _check_tensor,
    _dtype_value,
    _in_float32,
    _legacy_reduction,
    _maybe_inplace,
    _reduce,
    _vector_norm,
    adaptive_avg_pool2d,
    avg_pool2d,
    max_pool2d,
)

Tensor = _core.Tensor

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "alpha_dropout",
    "avg_pool1d",
    "channel_shuffle",
    "gaussian_nll_loss",
    "hardshrink",
    "hinge_embedding_loss",
    "lp_pool1d",
    "lp_pool2d",
    "max_pool1d",
    "multi_margin_loss",
    "pdist",
    "poisson_nll_loss",
    "soft_margin_loss",
    "softshrink",
    "threshold",
]


def _host_checks(t: Tensor) -> bool:
    """Whether value checks may read ``t``: on the CPU and outside capture (on a GPU they
    would cost a device read per call)."""
    return str(t.device) == "cpu" and not _capture.is_capturing()


def _one(fn: str, name: str, v: int | Sequence[int]) -> int:
    """A 1-D pooling argument: an int or a 1-tuple."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{fn}: {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    return int(cast(int, v))


def _pool1d_input(fn: str, input: Tensor) -> None:
    _check_tensor(fn, "input", input)
    if input.dim() not in (2, 3):
        raise ValueError(f"{fn}: expected 2-D (C, L) or 3-D (N, C, L) input, got shape {tuple(input.shape)}")


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------


def max_pool1d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)`` (``stride`` defaults to ``kernel_size``);
    with ``return_indices`` also the positions of the maxima along ``L``."""
    fn = "max_pool1d"
    _pool1d_input(fn, input)
    k = _one(fn, "kernel_size", kernel_size)
    s = k if stride is None or stride == [] or stride == () else _one(fn, "stride", stride)
    p, d = _one(fn, "padding", padding), _one(fn, "dilation", dilation)
    out = max_pool2d(
        input.unsqueeze(-2),
        (1, k),
        (1, s),
        (0, p),
        (1, d),
        ceil_mode=ceil_mode,
        return_indices=return_indices,
    )
    if isinstance(out, tuple):
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)`` (``stride`` defaults to ``kernel_size``)."""
    fn = "avg_pool1d"
    _pool1d_input(fn, input)
    k = _one(fn, "kernel_size", kernel_size)
    s = k if stride is None or stride == [] or stride == () else _one(fn, "stride", stride)
    p = _one(fn, "padding", padding)
    out = avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad, None)
    return out.squeeze(-2)


def adaptive_avg_pool1d(input: Tensor, output_size: int | Sequence[int]) -> Tensor:
    """Average-pool ``(N, C, L)`` or ``(C, L)`` to length ``output_size``: bin ``i`` averages
    ``floor(i*L/out) .. ceil((i+1)*L/out)``."""
    fn = "adaptive_avg_pool1d"
    _pool1d_input(fn, input)
    o = _one(fn, "output_size", output_size)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


def _bins(n_in: int, n_out: int) -> list[tuple[int, int]]:
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def _adaptive_out(fn: str, input: Tensor, output_size: int | Sequence[int | None]) -> tuple[int, int]:
    _check_tensor(fn, "input", input)
    if input.dim() not in (3, 4):
        raise ValueError(
            f"{fn}: expected 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {tuple(input.shape)}"
        )
    size: list[Any]
    if isinstance(output_size, int):
        size = [output_size, output_size]
    else:
        size = list(output_size)
        if len(size) != 2:
            raise ValueError(f"{fn}: output_size must be an int or a pair, got {output_size!r}")
    h, w = input.shape[-2], input.shape[-1]
    oh = h if size[0] is None else int(size[0])
    ow = w if size[1] is None else int(size[1])
    if oh < 0 or ow < 0 or (h == 0 and oh) or (w == 0 and ow):
        raise ValueError(f"{fn}: cannot pool input {tuple(input.shape)} to output size ({oh}, {ow})")
    return oh, ow


def adaptive_max_pool2d(
    input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Max-pool ``(N, C, H, W)`` or ``(C, H, W)`` to ``output_size`` (``None`` keeps that size):
    bin ``(i, j)`` covers rows ``floor(i*H/oh) .. ceil((i+1)*H/oh)`` and likewise columns.
    With ``return_indices`` also the flat ``h * W + w`` positions of the maxima."""
    fn = "adaptive_max_pool2d"
    oh, ow = _adaptive_out(fn, input, output_size)
    h, w = input.shape[-2], input.shape[-1]
    if oh and ow and h % oh == 0 and w % ow == 0:
        kern = (h // oh, w // ow)
        return max_pool2d(input, kern, kern, 0, 1, ceil_mode=False, return_indices=return_indices)
    lead = tuple(input.shape[:-2])
    if oh == 0 or ow == 0:
        out = _core.zeros(lead + (oh, ow), dtype=input.dtype, device=input.device)
        idx = _core.zeros(lead + (oh, ow), dtype=_core.int64, device=input.device)
        return (out, idx) if return_indices else out
    vals, inds = [], []
    for hs, he in _bins(h, oh):
        row_v, row_i = [], []
        for ws, we in _bins(w, ow):
            win = input.narrow(-2, hs, he - hs).narrow(-1, ws, we - ws).reshape(lead + (-1,))
            v, li = win.max(-1)
            row_v.append(v)
            if return_indices:
                # Row and column within the window, by float32 division (exact for window
                # sizes below 2^24): integer floor division would read the device's values.
                ww = we - ws
                r = (li.to(_core.float32) / float(ww)).floor().to(_core.int64)
                row_i.append((r + hs) * w + (li - r * ww + ws))
        vals.append(_core.stack(row_v, -1))
        if return_indices:
            inds.append(_core.stack(row_i, -1))
    out = _core.stack(vals, -2)
    return (out, _core.stack(inds, -2)) if return_indices else out


def adaptive_max_pool1d(
    input: Tensor, output_size: int | Sequence[int], return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Max-pool ``(N, C, L)`` or ``(C, L)`` to length ``output_size`` (bins as
    :func:`adaptive_max_pool2d`); with ``return_indices`` also the positions along ``L``."""
    fn = "adaptive_max_pool1d"
    _pool1d_input(fn, input)
    o = _one(fn, "output_size", output_size)
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), return_indices)
    if isinstance(out, tuple):
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def _lp_finish(out: Tensor, norm_type: float, area: int) -> Tensor:
    # sign(s) * relu(|s|) keeps the (possibly negative, odd-power) window sums, as PyTorch does.
    return (out.sign() * out.abs().relu()).mul(float(area)).pow(1.0 / norm_type)


@_in_float32("input")
def lp_pool2d(
    input: Tensor,
    norm_type: float,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    ceil_mode: bool = False,
) -> Tensor:
    """Power-average pooling over ``(N, C, H, W)``: ``(Σ_window x^p)^(1/p)`` per window
    (``p = norm_type``; ``stride`` defaults to ``kernel_size``)."""
    fn = "lp_pool2d"
    _check_float(fn, "input", input)
    if input.dim() not in (3, 4):
        raise ValueError(f"{fn}: expected 3-D or 4-D input, got shape {tuple(input.shape)}")
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    s = (kh, kw) if stride is None else stride
    out = avg_pool2d(input.pow(float(norm_type)), (kh, kw), s, 0, ceil_mode, True, None)
    return _lp_finish(out, float(norm_type), kh * kw)


@_in_float32("input")
def lp_pool1d(
    input: Tensor,
    norm_type: float,
    kernel_size: int,
    stride: int | Sequence[int] | None = None,
    ceil_mode: bool = False,
) -> Tensor:
    """Power-average pooling over ``(N, C, L)``: ``(Σ_window x^p)^(1/p)`` per window."""
    fn = "lp_pool1d"
    _check_float(fn, "input", input)
    _pool1d_input(fn, input)
    k = _one(fn, "kernel_size", kernel_size)
    out = avg_pool1d(input.pow(float(norm_type)), k, stride, 0, ceil_mode)
    return _lp_finish(out, float(norm_type), k)


# ---------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------


def _check_lambd(fn: str, lambd: float) -> None:
    if lambd < 0:
        raise ValueError(f"{fn}: lambda must be greater or equal to 0, but found to be {lambd}")


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - λ`` where ``x > λ``, ``x + λ`` where ``x < -λ``, else 0."""
    fn = "softshrink"
    _check_float(fn, "input", input)
    _check_lambd(fn, lambd)
    lam = float(lambd)
    return _core.where(input > lam, input - lam, _core.where(input < -lam, input + lam, input * 0.0))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > λ``, else 0."""
    fn = "hardshrink"
    _check_float(fn, "input", input)
    lam = float(lambd)
    keep = (input > lam).logical_or(input < -lam)
    return _core.where(keep, input, input * 0.0)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    _check_tensor("threshold", "input", input)
    out = _core.where(input > threshold, input, _core.full_like(input, value))
    return _maybe_inplace(input, out, inplace)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the ``C`` channels of ``(N, C, *)`` into ``groups`` and interleave them
    (``(g, C/g)`` transposed to ``(C/g, g)``)."""
    fn = "channel_shuffle"
    _check_tensor(fn, "input", input)
    if input.dim() < 3:
        raise ValueError(f"{fn}: expects input to have at least 3 dimensions, got shape {tuple(input.shape)}")
    if groups <= 0:
        raise ValueError(
            f"{fn}: number of groups to divide channels in must be positive. Value of groups:{groups}"
        )
    n, c, *rest = input.shape
    if c % groups:
        raise ValueError(f"{fn}: number of channels {c} must be divisible by groups {groups}")
    x = input.reshape((n, groups, c // groups, *rest)).transpose(1, 2)
    return x.reshape((n, c, *rest))


_ALPHA = 1.7580993408473766  # -SELU scale * alpha: the value dropped units take


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that keeps a SELU network's zero mean and unit variance: dropped elements
    become ``-α'`` (``α' ≈ 1.7581``) and the result is scaled and shifted by ``a, b`` with
    ``a = ((1 - p)(1 + p α'²))^(-1/2)``. Off (identity) unless ``training``."""
    fn = "alpha_dropout"
    _check_p(fn, p)
    _check_float(fn, "input", input)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return _maybe_inplace(input, input * 0.0, inplace)
    q = _dtype_value(1.0 - p, input.dtype)
    keep = _core.empty(tuple(input.shape), dtype=input.dtype, device=input.device).bernoulli(q)
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p))
    b = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    return _maybe_inplace(input, input * (keep * a) + b, inplace)


# ---------------------------------------------------------------------------
# distances
# ---------------------------------------------------------------------------


@_in_float32("input")
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between the rows of ``(N, M)`` input, pairs ``i < j`` in
    row-major order: ``N (N - 1) / 2`` values (a zero distance has a zero gradient)."""
    fn = "pdist"
    _check_float(fn, "input", input)
    if input.dim() != 2:
        raise ValueError(f"{fn}: only supports 2D tensors, got: {input.dim()}D (shape {tuple(input.shape)})")
    if p < 0:
        raise ValueError(f"{fn}: only supports non-negative p values, got {p}")
    n = input.shape[0]
    rows = [i for i in range(n) for _ in range(i + 1, n)]
    cols = [j for i in range(n) for j in range(i + 1, n)]
    if not rows:
        # No pairs: an empty result still tied to the input (so it takes part in autograd).
        return (input.sum() * 0.0).expand((0,))
    dev = input.device
    ri = _core.tensor(rows, dtype=_core.int64, device=dev)
    ci = _core.tensor(cols, dtype=_core.int64, device=dev)
    d = input.index_select(0, ri) - input.index_select(0, ci)
    return _vector_norm(d, float(p), 1, False)


# ---------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------


def _loss_prelude(fn: str, input: Tensor, target: Tensor, reduction: str) -> None:
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_tensor(fn, "target", target)


@_in_float32("input", "target")
@_amp.f32("input", "target")
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: bool | None = None,
    eps: float = 1e-8,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of ``target`` under ``Poisson(λ)``: ``exp(x) - t x`` with
    ``log_input`` (``x = log λ``), else ``x - t log(x + eps)``; ``full`` adds Stirling's
    ``t log t - t + ½ log(2π t)`` where ``t > 1``."""
    fn = "poisson_nll_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _loss_prelude(fn, input, target, reduction)
    _check_same_shape(fn, input, target)
    target = target.to(input.dtype)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        t = _core.where(big, target, 2.0)
        stirling = t * t.log() - t + 0.5 * (t * (2 * math.pi)).log()
        loss = loss + _core.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def _gaussian_var(fn: str, input: Tensor, var: Tensor | float) -> Tensor:
    if not isinstance(var, Tensor):
        if float(var) < 0:
            raise ValueError(f"{fn}: var has negative entry/entries")
        return _core.full_like(input, float(var))
    _check_float(fn, "var", var)
    vs, xs = tuple(var.shape), tuple(input.shape)
    if vs != xs:
        if xs[:-1] == vs:
            return var.unsqueeze(-1)
        # One dim of var may be 1 where the input's is not (a variance shared along it).
        if not (len(vs) == len(xs) and sum(y for x, y in zip(xs, vs, strict=True) if x != y) == 1):
            raise ValueError(f"{fn}: var is of incorrect size: var {vs} for input {xs}")
    if _host_checks(var) and bool((var < 0).any()):
        raise ValueError(f"{fn}: var has negative entry/entries")
    return var


@_in_float32("input", "target", "var")
def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of ``target`` under ``N(input, var)``:
    ``½ (log max(var, eps) + (input - target)² / max(var, eps))`` (+ ``½ log 2π`` with
    ``full``). ``var`` has the input's shape, or lacks (or has 1 for) its last dim. The
    clamp to ``eps`` passes the gradient through unchanged, as PyTorch's does."""
    fn = "gaussian_nll_loss"
    _loss_prelude(fn, input, target, reduction)
    _check_float(fn, "target", target)
    var = _gaussian_var(fn, input, var)
    try:
        _broadcast_shape(tuple(input.shape), tuple(target.shape))
    except ValueError:
        raise ValueError(
            f"{fn}: target {tuple(target.shape)} must broadcast with input {tuple(input.shape)}"
        ) from None
    v = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (v.log() + (input - target).square() / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError("shapes do not broadcast")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


@_in_float32("input")
@_amp.f32("input", "target")
def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1`` (other target
    values get both terms, as PyTorch's), reduced."""
    fn = "hinge_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _loss_prelude(fn, input, target, reduction)
    try:
        _broadcast_shape(tuple(input.shape), tuple(target.shape))
    except ValueError:
        raise ValueError(
            f"{fn}: target {tuple(target.shape)} must broadcast with input {tuple(input.shape)}"
        ) from None
    margin_term = _core.where(target != 1, (input.neg() + margin).clamp(min=0.0), 0.0)
    self_term = _core.where(target != -1, input, 0.0)
    return _reduce(margin_term + self_term, reduction)


@_in_float32("input", "weight")
@_amp.f32("input", "target", "weight")
def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss over ``(N, C)`` or ``(C,)`` scores with class-index ``target``:
    ``Σ_{j ≠ y} w_y max(0, margin - x_y + x_j)^p / C`` per sample (``p`` 1 or 2), reduced."""
    fn = "multi_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _loss_prelude(fn, input, target, reduction)
    if p not in (1, 2):
        raise ValueError(f"{fn}: only p == 1 and p == 2 supported, got p={p}")
    if input.dim() not in (1, 2) or input.shape[-1] == 0:
        raise ValueError(
            f"{fn}: expected non-empty 1-D (C,) or 2-D (N, C) input, got shape {tuple(input.shape)}"
        )
    if target.dtype not in (_core.int32, _core.int64):
        raise TypeError(f"{fn}: target must have an integer dtype (int32 or int64), got {target.dtype}")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    n, c = x.shape
    want = (n,) if input.dim() == 2 else ((), (1,))
    ok = tuple(target.shape) == want if input.dim() == 2 else tuple(target.shape) in want
    if not ok:
        raise ValueError(
            f"{fn}: inconsistent target size: target {tuple(target.shape)} for input {tuple(input.shape)}"
        )
    t = target.reshape((n, 1)).to(_core.int64)
    if t.numel() and _host_checks(t):
        bad = (t < 0).logical_or(t >= c)
        if bool(bad.any()):
            raise IndexError(
                f"{fn}: target {int(t.masked_select(bad)[0])} is out of bounds for {c} classes "
                f"(input shape {tuple(input.shape)})"
            )
    xy = x.gather(1, t)
    z = (x - xy + margin).clamp(min=0.0)
    if p == 2:
        z = z.square()
    cls = _core.arange(c, device=x.device).reshape((1, c))
    z = _core.where(cls == t, 0.0, z)
    if weight is not None:
        _check_float(fn, "weight", weight)
        if tuple(weight.shape) != (c,):
            raise ValueError(f"{fn}: weight must be 1-D with {c} elements, got shape {tuple(weight.shape)}")
        z = z * weight.index_select(0, t.reshape((n,))).reshape((n, 1))
    loss = z.sum(1) / c
    if input.dim() == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


@_in_float32("input", "target")
@_amp.f32("input", "target")
def soft_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Two-class logistic loss ``log(1 + exp(-y x))`` with ``y`` of ±1, reduced."""
    fn = "soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _loss_prelude(fn, input, target, reduction)
    _check_same_shape(fn, input, target)
    loss = (target.to(input.dtype).neg() * input).softplus()
    return _reduce(loss, reduction)
