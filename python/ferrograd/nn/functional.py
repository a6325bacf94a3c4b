# ruff: noqa: F401 - re-exports
"""Layer-style functions, as in ``torch.nn.functional``.

The layer ops (convolution, pooling, normalisation, activations, dropout,
padding) bind to registry ops; losses, ``batch_norm``, ``embedding``,
``one_hot`` and ``scaled_dot_product_attention`` compose registry ops, so
their gradients come from the core's VJPs.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from .. import _autocast as _amp
from .. import _capture, _core, _sparse_rows
from .._core import (
    adaptive_avg_pool2d,
    avg_pool2d,
    conv1d,
    conv2d,
    layer_norm,
    linear,
    max_pool2d,
    rms_norm,
)
from .._grad_mode import no_grad
from ._conv_transpose import conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from ._ctc import ctc_loss
from ._grid_sample import affine_grid, grid_sample

_T = _core.Tensor
Tensor = _core.Tensor

relu = _T.relu
sigmoid = _T.sigmoid
tanh = _T.tanh
silu = _T.silu
gelu = _T.gelu
elu = _T.elu
leaky_relu = _T.leaky_relu
softplus = _T.softplus
softmax = _T.softmax
log_softmax = _T.log_softmax

dropout = _core.dropout

pad = _core.pad

_INT_DTYPES = (_core.int32, _core.int64)
_REDUCTIONS = ("mean", "sum", "none")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """Map the deprecated ``size_average``/``reduce`` flags onto ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_reduction(fn: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_tensor(fn: str, name: str, x: object) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: {name} must be a Tensor, got {type(x).__name__}")


def _check_float(fn: str, name: str, x: Tensor) -> None:
    _check_tensor(fn, name, x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{fn}: {name} must have a floating point dtype, got {x.dtype}")


def _check_same_shape(fn: str, input: Tensor, target: Tensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"{fn}: target shape {tuple(target.shape)} must match input shape {tuple(input.shape)}"
        )


def _safe_log(x: Tensor) -> Tensor:
    """``log(x)`` clamped below at -100 (PyTorch's BCE convention), with finite gradients at 0."""
    pos = x > 0
    safe = _core.where(pos, x, 1.0)
    return _core.where(pos, safe.log(), -100.0).clamp(min=-100.0)


def _check_class_targets(
    fn: str, input: Tensor, target: Tensor, ignore_index: int, bounds: bool = True
) -> int:
    """Validate class-index ``target`` for ``input`` (classes on dim 1, or dim 0 when 1-D); return C.

    ``bounds=False`` leaves the range check of the values to a fused op that makes it itself.
    """
    if input.dim() == 0:
        raise ValueError(f"{fn}: input must have at least 1 dimension (the classes), got a 0-d tensor")
    if target.dtype not in _INT_DTYPES:
        raise TypeError(
            f"{fn}: class-index target must have an integer dtype (int32 or int64), got {target.dtype}"
        )
    cdim = 1 if input.dim() >= 2 else 0
    shape = tuple(input.shape)
    expected = shape[:cdim] + shape[cdim + 1 :]
    if tuple(target.shape) != expected:
        raise ValueError(
            f"{fn}: expected target of shape {expected} for input of shape {shape} "
            f"(classes on dim {cdim}), got target of shape {tuple(target.shape)}"
        )
    n_classes = shape[cdim]
    # (Inside a captured graph the values are unknown here; the gather kernel checks them at run time.)
    if bounds and target.numel() and not _capture.is_capturing():
        bad = ((target < 0).logical_or(target >= n_classes)).logical_and(target != ignore_index)
        if bool(bad.any()):
            first = int(target.masked_select(bad)[0])
            raise IndexError(
                f"{fn}: target {first} is out of bounds for {n_classes} classes (input shape {shape})"
            )
    return n_classes


def _check_weight(fn: str, weight: Tensor | None, n_classes: int) -> None:
    if weight is None:
        return
    _check_float(fn, "weight", weight)
    if tuple(weight.shape) != (n_classes,):
        raise ValueError(
            f"{fn}: weight must be a 1-D tensor of {n_classes} elements (one per class), "
            f"got shape {tuple(weight.shape)}"
        )


def _class_shape(input: Tensor, n: int) -> tuple[int, ...]:
    """Shape that puts a per-class vector of length ``n`` on the class dim of ``input``."""
    cdim = 1 if input.dim() >= 2 else 0
    return tuple(n if d == cdim else 1 for d in range(input.dim()))


def _nll(
    logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str
) -> tuple[Tensor, Tensor, Tensor]:
    """Negative log-likelihood of class-index targets: (reduced loss, keep mask, per-element weights)."""
    cdim = 1 if logp.dim() >= 2 else 0
    keep = target != ignore_index
    safe = target.masked_fill(keep.logical_not(), 0)
    picked = logp.gather(cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    if weight is not None:
        w = weight.index_select(0, safe.flatten()).reshape(tuple(target.shape))
        w = w.masked_fill(keep.logical_not(), 0.0)
        loss = (picked * w).neg()
    else:
        w = keep.to(logp.dtype)
        loss = picked.neg()
    loss = loss.masked_fill(keep.logical_not(), 0.0)
    if reduction == "mean":
        return loss.sum() / w.sum(), keep, w
    if reduction == "sum":
        return loss.sum(), keep, w
    return loss, keep, w


# ---------------------------------------------------------------------------
# classification losses
# ---------------------------------------------------------------------------


@_amp.f32("input", "weight")
def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices, given log-probabilities ``input``.

    ``input`` is ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)``; ``target``
    holds class indices (int32/int64) of the input's shape without the
    class dim. ``loss_i = -weight[t_i] * input[i, t_i]`` (0 where
    ``t_i == ignore_index``); ``'mean'`` divides by the summed weights of
    the kept targets.
    """
    fn = "nll_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_tensor(fn, "target", target)
    n_classes = _check_class_targets(fn, input, target, ignore_index)
    _check_weight(fn, weight, n_classes)
    return _nll(input, target, weight, ignore_index, reduction)[0]


@_amp.f32("input", "target", "weight")
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy between logits ``input`` and ``target``, as ``torch.nn.functional.cross_entropy``.

    ``input`` is ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)`` (unnormalised
    logits). ``target`` is either class indices (int32/int64, the input's
    shape without the class dim; ``ignore_index`` entries contribute
    nothing) or class probabilities (floating, the input's shape).
    ``weight`` rescales each class; ``label_smoothing`` mixes the target
    with the uniform distribution. With class indices and ``'mean'``, the
    sum is divided by the summed weights of the kept targets.
    """
    fn = "cross_entropy"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_tensor(fn, "target", target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if input.dim() == 0:
        raise ValueError(f"{fn}: input must have at least 1 dimension (the classes), got a 0-d tensor")
    cdim = 1 if input.dim() >= 2 else 0
    n_classes = input.shape[cdim]
    if not target.dtype.is_floating_point and (weight is None or not weight.requires_grad):
        # Class indices: the fused registry op (log-softmax + NLL and its
        # gradient in one pass each), which also checks the target bounds.
        _check_class_targets(fn, input, target, ignore_index, bounds=False)
        _check_weight(fn, weight, n_classes)
        return _core.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)
    logp = input.log_softmax(cdim)

    if target.dtype.is_floating_point:  # class probabilities
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(
                f"{fn}: probability target must have the input's shape {tuple(input.shape)}, "
                f"got {tuple(target.shape)}"
            )
        _check_weight(fn, weight, n_classes)
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        if weight is not None:
            logp = logp * weight.reshape(_class_shape(input, n_classes))
        loss = (logp * target).sum(cdim).neg()
        return _reduce(loss, reduction)

    n_classes = _check_class_targets(fn, input, target, ignore_index)
    _check_weight(fn, weight, n_classes)
    nll, keep, w = _nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing <= 0:
        return nll
    if weight is not None:
        smooth = (logp * weight.reshape(_class_shape(input, n_classes))).sum(cdim).neg()
    else:
        smooth = logp.sum(cdim).neg()
    smooth = smooth.masked_fill(keep.logical_not(), 0.0)
    if reduction == "mean":
        smooth = smooth.sum() / w.sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)


@_amp.f32("input", "target", "weight")
def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross entropy of probabilities ``input`` in [0, 1] against ``target`` (same shape).

    ``loss = -weight * (t * log(x) + (1 - t) * log(1 - x))`` with each log
    clamped at -100, as PyTorch. ``weight`` broadcasts to the input.
    """
    fn = "binary_cross_entropy"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_float(fn, "target", target)
    _check_same_shape(fn, input, target)
    if input.numel() and not _capture.is_capturing() and bool(((input < 0).logical_or(input > 1)).any()):
        raise ValueError(f"{fn}: all elements of input should be between 0 and 1")
    loss = (target * _safe_log(input) + (1 - target) * _safe_log(1 - input)).neg()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@_amp.f32("input", "target", "weight", "pos_weight")
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Sigmoid + binary cross entropy in one numerically stable expression.

    ``loss = (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)``
    (which is ``-[pos_weight * t * log σ(x) + (1 - t) * log(1 - σ(x))]``),
    times ``weight``. ``pos_weight`` broadcasts along the last (class) dim.
    """
    fn = "binary_cross_entropy_with_logits"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_float(fn, "target", target)
    _check_same_shape(fn, input, target)
    sp = softplus(input.neg())
    if pos_weight is not None:
        _check_float(fn, "pos_weight", pos_weight)
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * sp
    else:
        loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------------
# regression losses
# ---------------------------------------------------------------------------


def _elementwise_prelude(fn: str, input: Tensor, target: Tensor, reduction: str) -> None:
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_float(fn, "target", target)
    _check_same_shape(fn, input, target)


@_amp.f32("input", "target")
def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Squared error ``(input - target)²``, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _elementwise_prelude("mse_loss", input, target, reduction)
    return _reduce((input - target).square(), reduction)


@_amp.f32("input", "target")
def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Absolute error ``|input - target|``, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _elementwise_prelude("l1_loss", input, target, reduction)
    return _reduce((input - target).abs(), reduction)


@_amp.f32("input", "target")
def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 d² / beta`` where ``d = |input - target| < beta``, else ``d - 0.5 beta``, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _elementwise_prelude("smooth_l1_loss", input, target, reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    loss = _core.where(d < beta, d.square() * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction)


@_amp.f32("input", "target")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d²`` where ``d = |input - target| < delta``, else ``delta (d - 0.5 delta)``, reduced."""
    _elementwise_prelude("huber_loss", input, target, reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = (input - target).abs()
    loss = _core.where(d < delta, d.square() * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss, reduction)


@_amp.f32("input", "target")
def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """KL divergence with log-probabilities ``input``: ``target * (log(target) - input)``.

    ``log_target=True`` takes ``target`` as log-probabilities too.
    ``reduction='batchmean'`` divides the sum by the batch size (the
    mathematically correct KL); ``'mean'`` averages over all elements.
    """
    fn = "kl_div"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"{fn}: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}")
    _check_float(fn, "input", input)
    _check_float(fn, "target", target)
    _check_same_shape(fn, input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        pos = target > 0
        safe = _core.where(pos, target, 1.0)
        loss = _core.where(pos, target * (safe.log() - input), 0.0)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.dim() else 1)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------------
# layers that compose ops
# ---------------------------------------------------------------------------


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot encode integer ``tensor`` into a new trailing dim of ``num_classes`` (int64).

    ``num_classes=-1`` uses ``max(tensor) + 1``.
    """
    fn = "one_hot"
    _check_tensor(fn, "tensor", tensor)
    if tensor.dtype not in _INT_DTYPES:
        raise TypeError(f"{fn}: tensor must have an integer dtype (int32 or int64), got {tensor.dtype}")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise ValueError(f"{fn}: can not infer the number of classes of an empty tensor")
        num_classes = int(tensor.max()) + 1
    elif num_classes < 1:
        raise ValueError(f"{fn}: num_classes must be positive or -1, got {num_classes}")
    if tensor.numel() and not _capture.is_capturing():
        bad = (tensor < 0).logical_or(tensor >= num_classes)
        if bool(bad.any()):
            raise IndexError(
                f"{fn}: class value {int(tensor.masked_select(bad)[0])} is out of range for "
                f"num_classes={num_classes}"
            )
    classes = _core.arange(num_classes, dtype=_core.int64, device=tensor.device)
    return (tensor.long().unsqueeze(-1) == classes).long()


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Look up rows of ``weight`` at the integer indices ``input``: shape ``input.shape + (dim,)``.

    Rows at ``padding_idx`` are returned as stored but receive no gradient. With ``sparse=True``
    the weight's gradient stays dense (ferrograd has no sparse tensors), and the looked-up rows
    are recorded as the rows that gradient covers, which :class:`ferrograd.optim.SparseAdam`
    updates (see ``ferrograd._sparse_rows``); it cannot be captured into a graph.
    """
    fn = "embedding"
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "weight", weight)
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(f"{fn}: max_norm and scale_grad_by_freq are not supported")
    if sparse and _capture.is_capturing():
        raise _core.TraceError(
            f"{fn}: sparse=True records the looked-up rows on the host and cannot be captured into a graph"
        )
    if input.dtype not in _INT_DTYPES:
        raise TypeError(f"{fn}: indices must have an integer dtype (int32 or int64), got {input.dtype}")
    if weight.dim() != 2:
        raise ValueError(
            f"{fn}: weight must be 2-D (num_embeddings, embedding_dim), got {tuple(weight.shape)}"
        )
    n = weight.shape[0]
    if input.numel() and not _capture.is_capturing():
        # Checked on the host: a GPU index tensor that was uploaded still has its
        # host copy there (no device read); one computed on the device is read once.
        host = input.cpu()
        bad = (host < 0).logical_or(host >= n)
        if bool(bad.any()):
            raise IndexError(
                f"{fn}: index {int(host.masked_select(bad)[0])} is out of range for "
                f"{n} embeddings (weight shape {tuple(weight.shape)})"
            )
    out = weight.index_select(0, input.flatten()).reshape(tuple(input.shape) + (weight.shape[1],))
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"{fn}: padding_idx {padding_idx} must be within num_embeddings ({n})")
        padding_idx %= n
        is_pad = (input == padding_idx).unsqueeze(-1)
        out = _core.where(is_pad, out.detach(), out)
    if sparse and weight.requires_grad and _core.is_grad_enabled():
        rows = input.cpu().numpy().reshape(-1).astype(np.int64) % n
        if padding_idx is not None:
            rows = rows[rows != padding_idx]
        _sparse_rows.record(weight, rows)
    return out


_BAG_MODES = ("sum", "mean", "max")


def _bag_host_checks(fn: str, idx: Tensor, offs: Tensor | None, n_rows: int, include_last: bool) -> None:
    """Range checks of indices and offsets, read on the host (skipped while capturing)."""
    if _capture.is_capturing():
        return
    host = idx.cpu()
    if host.numel():
        bad = (host < 0).logical_or(host >= n_rows)
        if bool(bad.any()):
            raise IndexError(
                f"{fn}: index {int(host.masked_select(bad)[0])} is out of range for {n_rows} embeddings"
            )
    if offs is None or offs.numel() == 0:
        return
    o = offs.cpu().to(_core.int64)
    n = idx.numel()
    if int(o[0]) != 0:
        raise ValueError(f"{fn}: offsets[0] must be 0 (the first bag starts at index 0), got {int(o[0])}")
    if o.numel() > 1 and bool((o[1:] < o[:-1]).any()):
        raise ValueError(f"{fn}: offsets must be non-decreasing, got {o.tolist()}")
    if int(o[-1]) > n:
        raise ValueError(f"{fn}: offsets[-1] = {int(o[-1])} is past the end of input (size {n})")
    if include_last and int(o[-1]) != n:
        raise ValueError(
            f"{fn}: with include_last_offset=True the last offset must equal the input size {n}, "
            f"got {int(o[-1])}"
        )


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sums, means or maxima of bags of rows of ``weight``, without building the
    ``(bags, length, dim)`` lookup.

    ``input`` is either 2-D ``(B, L)`` (each row one bag of ``L`` indices; ``offsets``
    must be ``None``) or 1-D with ``offsets``: bag ``b`` holds ``input[offsets[b]:
    offsets[b + 1]]`` (the last bag runs to the end; with ``include_last_offset`` the
    offsets have one more entry, the input size, and there are ``len(offsets) - 1``
    bags). Returns ``(B, embedding_dim)``. ``per_sample_weights`` (same shape as
    ``input``, ``mode="sum"`` only) scales each looked-up row. Entries equal to
    ``padding_idx`` are left out of their bag (and of a mean's count). An empty bag
    gives zeros in every mode.

    Built of registry ops, so gradients (to ``weight`` and ``per_sample_weights``) are
    those of the parts. 2-D input reduces the ``(B, L, dim)`` lookup along ``L``. 1-D
    input compares positions with the offsets for a ``(B, n)`` membership matrix
    (O(B·n) memory, and no computed index read back from a GPU): sums and means are its
    product with the looked-up rows, maxima a segmented scan of ``maximum`` over doubling
    strides read at each bag's last element. A non-finite weight in one bag can turn
    other bags' sums NaN there (``0 * inf`` in the product), unlike PyTorch.
    """
    fn = "embedding_bag"
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "weight", weight)
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError(f"{fn}: max_norm, scale_grad_by_freq and sparse are not supported")
    if mode not in _BAG_MODES:
        raise ValueError(f"{fn}: mode must be one of {_BAG_MODES}, got {mode!r}")
    if input.dtype not in _INT_DTYPES:
        raise TypeError(f"{fn}: input must have an integer dtype (int32 or int64), got {input.dtype}")
    if weight.dim() != 2:
        raise ValueError(
            f"{fn}: weight must be 2-D (num_embeddings, embedding_dim), got {tuple(weight.shape)}"
        )
    if not weight.dtype.is_floating_point:
        raise TypeError(f"{fn}: weight must have a float dtype, got {weight.dtype}")
    n_rows, dim = weight.shape
    if per_sample_weights is not None:
        _check_tensor(fn, "per_sample_weights", per_sample_weights)
        if mode != "sum":
            raise NotImplementedError(
                f"{fn}: per_sample_weights is only supported for mode='sum', got mode={mode!r}"
            )
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(
                f"{fn}: per_sample_weights must have input's shape {tuple(input.shape)}, "
                f"got {tuple(per_sample_weights.shape)}"
            )
        if per_sample_weights.dtype != weight.dtype:
            raise TypeError(
                f"{fn}: per_sample_weights ({per_sample_weights.dtype}) must have weight's dtype ({weight.dtype})"
            )
    if padding_idx is not None:
        if not -n_rows <= padding_idx < n_rows:
            raise ValueError(f"{fn}: padding_idx {padding_idx} must be within num_embeddings ({n_rows})")
        padding_idx %= n_rows
    dev = weight.device
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"{fn}: offsets must be None for 2-D input (each row is a bag), got a tensor")
        _bag_host_checks(fn, input, None, n_rows, False)
        bags, length = input.shape
        rows = weight.index_select(0, input.reshape(-1).to(dev)).reshape(bags, length, dim)
        keep = None if padding_idx is None else (input.to(dev) != padding_idx).unsqueeze(2)
        if mode == "max":
            if length == 0:
                return _core.zeros((bags, dim), dtype=weight.dtype, device=dev)
            if keep is not None:
                rows = _core.where(keep, rows, float("-inf"))
            top = rows.max(1)[0]
            if keep is None:
                return top
            return _core.where(keep.any(1), top, 0.0)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.to(dev).unsqueeze(2)
        if keep is not None:
            rows = _core.where(keep, rows, 0.0)
        out = rows.sum(1)
        if mode == "mean":
            count = length if keep is None else keep.to(weight.dtype).sum(1).clamp(min=1.0)
            out = out / count if length else out
        return out
    if input.dim() != 1:
        raise ValueError(
            f"{fn}: input must be 1-D (with offsets) or 2-D (B, L), got shape {tuple(input.shape)}"
        )
    if offsets is None:
        raise ValueError(f"{fn}: 1-D input needs offsets (the start of each bag)")
    _check_tensor(fn, "offsets", offsets)
    if offsets.dim() != 1 or offsets.dtype not in _INT_DTYPES:
        raise ValueError(
            f"{fn}: offsets must be a 1-D integer tensor, got shape {tuple(offsets.shape)} {offsets.dtype}"
        )
    _bag_host_checks(fn, input, offsets, n_rows, include_last_offset)
    n = input.numel()
    idx = input.to(dev)
    offs = offsets.to(_core.int64).to(dev)
    if include_last_offset:
        if offs.numel() == 0:
            raise ValueError(f"{fn}: include_last_offset=True needs at least one offset")
        bags = offs.numel() - 1
        starts, ends = offs[:bags], offs[1:]
    else:
        bags = offs.numel()
        starts = offs
        ends = _core.cat([offs[1:], _core.full((min(bags, 1),), n, dtype=_core.int64, device=dev)])
    # Membership (bags, n) from comparisons only: no computed index is read back to the host.
    pos = _core.arange(n, dtype=_core.int64, device=dev)
    member = (starts.unsqueeze(1) <= pos).logical_and(pos < ends.unsqueeze(1))
    keep = None if padding_idx is None else (idx != padding_idx)
    if keep is not None:
        member = member.logical_and(keep)
    rows = weight.index_select(0, idx)
    if mode == "max":
        if n == 0:
            return _core.zeros((bags, dim), dtype=weight.dtype, device=dev)
        if keep is not None:
            rows = _core.where(keep.unsqueeze(1), rows, float("-inf"))
        # Segmented inclusive scan: after the step of stride s each row holds the maximum of
        # the (up to) 2s rows of its bag ending at it; a bag's maximum sits at its last row.
        seg = (starts.unsqueeze(0) <= pos.unsqueeze(1)).to(_core.int64).sum(1)
        s = 1
        while s < n:
            prev = _core.cat(
                [_core.full((s, dim), float("-inf"), dtype=rows.dtype, device=dev), rows[: n - s]]
            )
            same = _core.cat([_core.zeros((s,), dtype=_core.bool, device=dev), seg[s:] == seg[: n - s]])
            # Strictly greater: on a tie the earlier row stays, so the gradient goes to the first
            # maximal row of the bag (as PyTorch's and the 2-D path's max do), not half to each.
            rows = _core.where(same.unsqueeze(1).logical_and(prev >= rows), prev, rows)
            s *= 2
        # Rows whose bag prefix is all padding hold -inf: zero them so the one-hot pick stays finite.
        rows = _core.where(rows == float("-inf"), 0.0, rows)
        last = (pos == (ends - 1).unsqueeze(1)).logical_and(member.any(1, keepdim=True))
        return last.to(weight.dtype).matmul(rows)
    sel = member.to(weight.dtype)
    if per_sample_weights is not None:
        sel = sel * per_sample_weights.to(dev)
    out = sel.matmul(rows)
    if mode == "mean":
        out = out / member.to(weight.dtype).sum(1, keepdim=True).clamp(min=1.0)
    return out


# ---------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------


def _attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    fn: str,
) -> tuple[Tensor, Tensor]:
    """``softmax(q kᵀ * scale + mask) v`` and the attention weights."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_float(fn, name, t)
        if t.dim() < 2:
            raise ValueError(f"{fn}: {name} must have at least 2 dims (..., L, E), got {tuple(t.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"{fn}: query and key must have the same embedding size, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"{fn}: key and value must have the same sequence length, got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = query.matmul(key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{fn}: pass either attn_mask or is_causal=True, not both")
        causal = _core.ones((L, S), dtype=_core.bool, device=scores.device).tril()
        scores = scores.masked_fill(causal.logical_not(), -math.inf)
    elif attn_mask is not None:
        _check_tensor(fn, "attn_mask", attn_mask)
        if attn_mask.dtype == _core.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        elif attn_mask.dtype.is_floating_point:
            scores = scores + attn_mask
        else:
            raise TypeError(f"{fn}: attn_mask must be bool or floating point, got {attn_mask.dtype}")
    attn = scores.softmax(-1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return attn.matmul(value), attn


@_amp.lower("query", "key", "value", "attn_mask")
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key.T * scale + mask) @ value`` over ``(..., L, E)``/``(..., S, E)``/``(..., S, Ev)``.

    ``scale`` defaults to ``1/sqrt(E)``. ``attn_mask`` is a bool mask
    (True = may attend) or a float mask added to the scores, broadcast to
    ``(..., L, S)``; ``is_causal`` masks future positions (top-left
    aligned lower triangle). ``dropout_p`` applies dropout to the weights.
    A fully masked row gives NaN, as PyTorch's reference implementation.
    With ``enable_gqa``, key/value heads (dim -3) are shared by groups of
    query heads (grouped-query attention).
    """
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk or value.shape[-3] != hk:
            raise ValueError(
                f"scaled_dot_product_attention: with enable_gqa the query heads ({hq}) must be a multiple "
                f"of the key/value heads ({hk}, {value.shape[-3]})"
            )
        key, value = (
            t.unsqueeze(-3)
            .expand(*t.shape[:-2], hq // hk, *t.shape[-2:])
            .reshape(tuple(t.shape[:-3]) + (hq,) + tuple(t.shape[-2:]))
            for t in (key, value)
        )
    return _attention(
        query, key, value, attn_mask, dropout_p, is_causal, scale, "scaled_dot_product_attention"
    )[0]


# ---------------------------------------------------------------------------
# float16/bfloat16 compositions compute in float32
# ---------------------------------------------------------------------------

_LOWP = (_core.float16, _core.bfloat16)


def _in_float32(*names: str) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Run a composition in float32 when its ``names`` arguments are float16/bfloat16 tensors,
    rounding the result to that dtype once (as the core's fused ops do): its steps then round
    at float32 precision, forward and backward (the casts' VJPs round the gradients once)."""

    def wrap(f: Callable[..., Tensor]) -> Callable[..., Tensor]:
        sig = inspect.signature(f)

        @functools.wraps(f)
        def run(*args: object, **kwargs: object) -> Tensor:
            bound = sig.bind(*args, **kwargs)
            low = None
            for n in names:
                v = bound.arguments.get(n)
                if isinstance(v, Tensor) and v.dtype in _LOWP:
                    low = low or v.dtype
                    bound.arguments[n] = v.float()
            out = f(*bound.args, **bound.kwargs)
            return out.to(low) if low is not None and out.dtype == _core.float32 else out

        return run

    return wrap


# ---------------------------------------------------------------------------
# channel dropout
# ---------------------------------------------------------------------------


def _check_p(fn: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{fn}: dropout probability has to be between 0 and 1, but got {p}")


def _dtype_value(v: float, dtype) -> float:
    """``v`` rounded to the float ``dtype`` (nearest, ties to even; bfloat16 through float32, as
    ``full`` rounds it), computed in Python so that nothing is recorded under capture."""
    if dtype == _core.float64:
        return float(v)
    if dtype == _core.float16:
        return float(np.float16(v))
    f = np.float32(v)
    if dtype == _core.bfloat16:
        u = int(np.asarray(f).view(np.uint32))
        if f == f:  # NaN stays NaN
            u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return float(np.asarray(u, dtype=np.uint32).view(np.float32))
    return float(f)


def _feature_dropout(input: Tensor, p: float, inplace: bool) -> Tensor:
    """Zero whole channels of ``(N, C, *)``: one draw per (n, c), survivors scaled by ``1/(1-p)``."""
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    if p == 1.0:
        mask = _core.zeros(mask_shape, dtype=input.dtype, device=input.device)
    else:
        # A scalar probability (1 - p rounded to the dtype on the host): per-element
        # probabilities held on a device would be read back to validate them (a download
        # per call); the scalar draws the same mask from the same stream on every device.
        q = _dtype_value(1.0 - p, input.dtype)
        keep = _core.empty(mask_shape, dtype=input.dtype, device=input.device).bernoulli(q)
        mask = keep / (1.0 - p)
    return input.mul_(mask) if inplace else input * mask


def _channel_dropout(
    fn: str,
    input: Tensor,
    p: float,
    training: bool,
    inplace: bool,
    batched_dim: int,
    strict: bool,
    unbatched: bool = True,
) -> Tensor:
    """Channel dropout of ``batched_dim``-D input; ``batched_dim - 1`` dims are one unbatched sample
    when ``unbatched``. Other ranks raise when ``strict``, else warn (as PyTorch) and drop slices of dim 1."""
    _check_p(fn, p)
    _check_float(fn, "input", input)
    nd = input.dim()
    if nd not in (batched_dim - 1, batched_dim):
        msg = (
            f"{fn}: expected {batched_dim - 1}-D (unbatched) or {batched_dim}-D (batched) input, "
            f"got {nd}-D input of shape {tuple(input.shape)}"
        )
        if strict or nd < 2:
            raise ValueError(msg)
        warnings.warn(msg + "; whole slices along dim 1 are dropped", UserWarning, stacklevel=3)
    if not training or p == 0.0:
        return input
    if nd == batched_dim - 1 and unbatched:
        out = _feature_dropout(input.unsqueeze(0), p, inplace)
        return input if inplace else out.squeeze(0)
    return _feature_dropout(input, p, inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` (or unbatched ``(C, L)``) input with probability ``p``.

    Survivors are scaled by ``1/(1-p)``; with ``training=False`` the input
    is returned unchanged.
    """
    return _channel_dropout("dropout1d", input, p, training, inplace, 3, strict=True)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` input with probability ``p`` (survivors ``* 1/(1-p)``).

    As PyTorch, a 3-D input is taken as ``(N, C, L)`` (channel-wise 1-D
    dropout, with a warning): use ``dropout1d`` for that, or add the batch
    dim of an unbatched ``(C, H, W)`` sample.
    """
    if isinstance(input, Tensor) and input.dim() == 3:
        warnings.warn(
            "dropout2d: received a 3-D input; as PyTorch, it is taken as (N, C, L) and whole (n, c) rows "
            "are dropped (use dropout1d for that, or add a batch dim to an unbatched (C, H, W) sample)",
            UserWarning,
            stacklevel=2,
        )
    return _channel_dropout("dropout2d", input, p, training, inplace, 4, strict=False, unbatched=False)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``) input with probability ``p``."""
    return _channel_dropout("dropout3d", input, p, training, inplace, 5, strict=False)


# ---------------------------------------------------------------------------
# activations composed of ops
# ---------------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _maybe_inplace(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    return input.copy_(out) if inplace else out


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``clamp(x, min_val, max_val)``."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return _maybe_inplace(input, input.clamp(min=min_val, max=max_val), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``clamp(x + 3, 0, 6) / 6``: a piecewise-linear sigmoid."""
    return _maybe_inplace(input, (input + 3.0).clamp(min=0.0, max=6.0) / 6.0, inplace)


@_in_float32("input")
def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * clamp(x + 3, 0, 6) / 6`` (MobileNetV3's hard swish)."""
    return _maybe_inplace(input, input * (input + 3.0).clamp(min=0.0, max=6.0) / 6.0, inplace)


@_in_float32("input")
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _maybe_inplace(input, input * softplus(input).tanh(), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants (alpha ≈ 1.6733, scale ≈ 1.0507)."""
    return _maybe_inplace(input, elu(input, _SELU_ALPHA) * _SELU_SCALE, inplace)


@_in_float32("input")
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise ValueError("celu: alpha cannot be 0")
    # x <= 0 takes the exponential branch (so the gradient at 0 is 1, as
    # PyTorch's); its argument is clamped so that large x give no inf there.
    neg = (input.clamp(max=0.0) / alpha).expm1() * alpha
    out = input.where(input.gt(0), neg)
    return _maybe_inplace(input, out, inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``."""
    return softplus(input.neg()).neg()


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input.softsign()


@_in_float32("input")
def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def softmin(input: Tensor, dim: int | None = None, dtype: object = None) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    if dim is None:
        raise ValueError("softmin: dim must be given (implicit dim choice is deprecated in PyTorch)")
    x = input if dtype is None else input.to(dtype)
    return x.neg().softmax(dim)


@_in_float32("input")
def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: split ``input`` in halves ``a, b`` along ``dim``; ``a * sigmoid(b)``."""
    _check_float("glu", "input", input)
    if input.dim() == 0:
        raise ValueError("glu: does not support scalars (0-d input)")
    n = input.shape[dim]
    if n % 2:
        raise ValueError(
            f"glu: halving dimension must be even, but dimension {dim} is size {n} (input {tuple(input.shape)})"
        )
    a, b = input.narrow(dim, 0, n // 2), input.narrow(dim, n // 2, n // 2)
    return a * b.sigmoid()


@_amp.lower("input", "weight")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x``; ``weight`` has 1 or ``C`` (= ``input.shape[1]``) elements."""
    fn = "prelu"
    _check_float(fn, "input", input)
    _check_float(fn, "weight", weight)
    n = weight.numel()
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.dim() > 1 or n not in (1, channels):
        raise ValueError(
            f"{fn}: weight must be 1-D with 1 or {channels} elements (the channels on dim 1 of input "
            f"{tuple(input.shape)}), got shape {tuple(weight.shape)}"
        )
    if n == 1:
        w = weight.reshape(())
    else:
        w = weight.reshape((channels,) + (1,) * (input.dim() - 2))
    return _core.where(input > 0, input, input * w)


# ---------------------------------------------------------------------------
# normalisation composed of ops
# ---------------------------------------------------------------------------


@_in_float32("input", "weight", "bias")
def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each channel of each sample of ``(N, C, *)`` input over its spatial dims.

    With ``use_input_stats`` the per-(n, c) mean and biased variance
    normalise, and the running statistics (shape ``(C,)``), if given, are
    updated in place with the batch average of those statistics
    (``running = (1 - momentum) * running + momentum * stat``, the unbiased
    variance for ``running_var``). Otherwise the running statistics
    normalise. Then ``* weight + bias`` per channel.
    """
    fn = "instance_norm"
    _check_float(fn, "input", input)
    if input.dim() < 3:
        raise ValueError(
            f"{fn}: expected input of shape (N, C, *) with spatial dims, got {tuple(input.shape)}"
        )
    c = input.shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(
                f"{fn}: {name} must have shape ({c},) for input of shape {tuple(input.shape)}, got {tuple(t.shape)}"
            )
    shape = (1, c) + (1,) * (input.dim() - 2)
    dims = tuple(range(2, input.dim()))
    if use_input_stats:
        n = math.prod(input.shape[2:])
        if n <= 1:
            raise ValueError(
                f"{fn}: expected more than 1 spatial element when training, got input size {tuple(input.shape)}"
            )
        mean = input.mean(dims, keepdim=True)
        var = input.var(dims, correction=0, keepdim=True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    m = mean.detach().reshape(tuple(input.shape[:2])).mean(0).to(running_mean.dtype)
                    running_mean.mul_(1 - momentum).add_(m * momentum)
                if running_var is not None:
                    v = (
                        var.detach().reshape(tuple(input.shape[:2])).mean(0).to(running_var.dtype)
                        * n
                        / (n - 1)
                    )
                    running_var.mul_(1 - momentum).add_(v * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"{fn}: running_mean and running_var are needed when use_input_stats=False")
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    out = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@_in_float32("input", "weight", "bias")
def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise ``(N, C, *)`` input over groups of ``C / num_groups`` channels (and all spatial dims).

    Mean and biased variance per (sample, group); then ``* weight + bias``
    per channel.
    """
    fn = "group_norm"
    _check_float(fn, "input", input)
    if input.dim() < 2:
        raise ValueError(f"{fn}: expected input of shape (N, C, *), got {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ValueError(
            f"{fn}: expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {tuple(input.shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"{fn}: {name} must have shape ({c},), got {tuple(t.shape)}")
    per_group = (c // num_groups) * math.prod(input.shape[2:])
    x = input.reshape((n, num_groups, per_group))
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, correction=0, keepdim=True)
    out = ((x - mean) * (var + eps).rsqrt()).reshape(tuple(input.shape))
    shape = (1, c) + (1,) * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@_in_float32("input")
def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """Divide each element by ``(k + alpha / size * Σ x²)^beta``, the sum over ``size`` neighbouring channels.

    The window on channel ``c`` spans ``c - size//2 .. c + (size-1)//2``,
    zero-padded at the edges (as PyTorch's average pooling over channels).
    """
    fn = "local_response_norm"
    _check_float(fn, "input", input)
    if input.dim() < 3:
        raise ValueError(f"{fn}: expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if size < 1:
        raise ValueError(f"{fn}: size must be a positive integer, got {size}")
    if input.numel() == 0:
        return input.clone()
    c = input.shape[1]
    sq = input.square()
    before, after = size // 2, (size - 1) // 2
    zshape = list(input.shape)
    parts = []
    if before:
        zshape[1] = before
        parts.append(_core.zeros(tuple(zshape), dtype=input.dtype, device=input.device))
    parts.append(sq)
    if after:
        zshape[1] = after
        parts.append(_core.zeros(tuple(zshape), dtype=input.dtype, device=input.device))
    padded = _core.cat(parts, 1) if len(parts) > 1 else sq
    total = padded.narrow(1, 0, c)
    for j in range(1, size):
        total = total + padded.narrow(1, j, c)
    div = (total * (alpha / size) + k).pow(beta)
    return input / div


# ---------------------------------------------------------------------------
# distances and bilinear
# ---------------------------------------------------------------------------


def _broadcast_pair(fn: str, x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
    _check_float(fn, "x1", x1)
    _check_float(fn, "x2", x2)
    try:
        shape = tuple(np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape)))
    except ValueError:
        raise ValueError(
            f"{fn}: x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} must broadcast together"
        ) from None
    if x1.dtype != x2.dtype:
        raise TypeError(f"{fn}: x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
    return x1.broadcast_to(shape), x2.broadcast_to(shape)


def _vector_norm(x: Tensor, p: float, dim: int, keepdim: bool) -> Tensor:
    """The ``p``-norm along ``dim``, with a zero (not NaN) gradient at a zero vector."""
    if p == math.inf:
        return x.abs().amax(dim, keepdim=keepdim)
    if p == -math.inf:
        return x.abs().amin(dim, keepdim=keepdim)
    if p == 0:
        return (x != 0).to(x.dtype).sum(dim, keepdim=keepdim)
    s = x.square().sum(dim, keepdim=keepdim) if p == 2 else x.abs().pow(p).sum(dim, keepdim=keepdim)
    pos = s > 0
    safe = _core.where(pos, s, 1.0)
    root = safe.sqrt() if p == 2 else safe.pow(1.0 / p)
    return _core.where(pos, root, 0.0)


@_in_float32("x1", "x2")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``Σ x1·x2 / (max(‖x1‖, eps) · max(‖x2‖, eps))`` along ``dim`` (inputs broadcast together)."""
    fn = "cosine_similarity"
    x1, x2 = _broadcast_pair(fn, x1, x2)
    nd = x1.dim()
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise IndexError(f"{fn}: dim {dim} is out of range for inputs of shape {tuple(x1.shape)}")
    e2 = float(eps) * float(eps)
    n1 = x1.square().sum(dim, keepdim=True).clamp(min=e2).sqrt()
    n2 = x2.square().sum(dim, keepdim=True).clamp(min=e2).sqrt()
    return ((x1 / n1) * (x2 / n2)).sum(dim)


@_in_float32("x1", "x2")
def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """``‖x1 - x2 + eps‖_p`` along the last dim (inputs broadcast together)."""
    fn = "pairwise_distance"
    x1, x2 = _broadcast_pair(fn, x1, x2)
    if x1.dim() == 0:
        raise ValueError(f"{fn}: inputs must have at least 1 dimension, got 0-d tensors")
    return _vector_norm(x1 - x2 + eps, float(p), x1.dim() - 1, keepdim)


@_in_float32("input1", "input2", "weight", "bias")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y_o = Σ_ij x1_i W_oij x2_j + b_o`` over ``(*, in1)``, ``(*, in2)``, weight ``(out, in1, in2)``."""
    fn = "bilinear"
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        _check_float(fn, name, t)
    if weight.dim() != 3:
        raise ValueError(f"{fn}: weight must be 3-D (out, in1, in2), got {tuple(weight.shape)}")
    out_f, in1, in2 = weight.shape
    if input1.dim() == 0 or input1.shape[-1] != in1 or input2.dim() == 0 or input2.shape[-1] != in2:
        raise ValueError(
            f"{fn}: input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)} must end in {in1} and {in2} "
            f"features (weight {tuple(weight.shape)})"
        )
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ValueError(
            f"{fn}: input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)} must have the same batch dims"
        )
    if bias is not None and tuple(bias.shape) != (out_f,):
        raise ValueError(f"{fn}: bias must have shape ({out_f},), got {tuple(bias.shape)}")
    w = weight.permute(1, 0, 2).reshape((in1, out_f * in2))
    tmp = input1.matmul(w).reshape(tuple(input1.shape[:-1]) + (out_f, in2))
    out = (tmp * input2.unsqueeze(-2)).sum(-1)
    return out + bias if bias is not None else out


from ._functional_fold import *  # noqa: E402, F403 - unfold / fold
from ._functional_more import *  # noqa: E402, F403 - more composed functionals
from ._functional_nn_more import *  # noqa: E402, F403 - margin losses, fractional pooling, MHA
from ._functional_random import *  # noqa: E402, F403 - random functionals
from ._functional_rank_losses import *  # noqa: E402, F403 - ranking and embedding losses
from ._functional_resample import *  # noqa: E402, F403 - pixel shuffle, interpolate
from ._pool3d import *  # noqa: E402, F403 - 3-D pooling and max-unpooling

_NOT_EXPORTED = (
    "Callable",
    "functools",
    "inspect",
    "Sequence",
    "Tensor",
    "annotations",
    "math",
    "no_grad",
    "np",
    "warnings",
)
__all__ = sorted(n for n in dir() if not n.startswith("_") and n not in _NOT_EXPORTED)
