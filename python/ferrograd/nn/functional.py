# ruff: noqa: F401 - re-exports
"""Layer-style functions, as in ``torch.nn.functional``.

The layer ops (convolution, pooling, normalisation, activations, dropout,
padding) bind to registry ops; losses, ``batch_norm``, ``embedding``,
``one_hot`` and ``scaled_dot_product_attention`` compose registry ops, so
their gradients come from the core's VJPs.
"""

from __future__ import annotations

import math

from .. import _capture, _core
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


def _check_class_targets(fn: str, input: Tensor, target: Tensor, ignore_index: int, bounds: bool = True) -> int:
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
    expected = shape[:cdim] + shape[cdim + 1:]
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


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d²`` where ``d = |input - target| < delta``, else ``delta (d - 0.5 delta)``, reduced."""
    _elementwise_prelude("huber_loss", input, target, reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = (input - target).abs()
    loss = _core.where(d < delta, d.square() * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss, reduction)


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

    Rows at ``padding_idx`` are returned as stored but receive no gradient.
    """
    fn = "embedding"
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "weight", weight)
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError(f"{fn}: max_norm, scale_grad_by_freq and sparse are not supported")
    if input.dtype not in _INT_DTYPES:
        raise TypeError(f"{fn}: indices must have an integer dtype (int32 or int64), got {input.dtype}")
    if weight.dim() != 2:
        raise ValueError(f"{fn}: weight must be 2-D (num_embeddings, embedding_dim), got {tuple(weight.shape)}")
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
    return out


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalisation over ``(N, C, *)`` input, per channel ``C``.

    In training (or without running statistics) the batch mean and biased
    variance over every dim but 1 normalise the input, and the running
    statistics, if given, are updated in place:
    ``running = (1 - momentum) * running + momentum * batch_stat`` (the
    unbiased batch variance for ``running_var``). Otherwise the running
    statistics normalise. Then ``* weight + bias`` per channel.
    """
    fn = "batch_norm"
    _check_float(fn, "input", input)
    if input.dim() < 2:
        raise ValueError(f"{fn}: expected input of shape (N, C, *), got {tuple(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(
                f"{fn}: {name} must have shape ({c},) for input of shape {tuple(input.shape)}, "
                f"got {tuple(t.shape)}"
            )
    shape = (1, c) + (1,) * (input.dim() - 2)
    dims = (0,) + tuple(range(2, input.dim()))
    if training:
        n = input.numel() // c if c else 0
        if n <= 1:
            raise ValueError(
                f"{fn}: expected more than 1 value per channel when training, got input size {tuple(input.shape)}"
            )
        mean = input.mean(dims)
        var = input.var(dims, correction=0)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype) * momentum)
                if running_var is not None:
                    # `* n / (n - 1)`, not `* (n / (n - 1))`: integer sizes stay
                    # symbolic in a graph captured with a dynamic batch, a float
                    # computed from them would keep the size it was traced at.
                    unbiased = var.detach().to(running_var.dtype) * n / (n - 1)
                    running_var.mul_(1 - momentum).add_(unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"{fn}: running_mean and running_var are needed when training=False")
        mean, var = running_mean, running_var
    out = (input - mean.reshape(shape)) * (var + eps).rsqrt().reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """Divide ``input`` by its ``p``-norm along ``dim`` (at least ``eps``)."""
    _check_float("normalize", "input", input)
    norm = input.abs().pow(p).sum(dim, keepdim=True).pow(1.0 / p)
    return input / norm.clamp(min=eps)


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
            t.unsqueeze(-3).expand(*t.shape[:-2], hq // hk, *t.shape[-2:]).reshape(
                tuple(t.shape[:-3]) + (hq,) + tuple(t.shape[-2:]))
            for t in (key, value)
        )
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                      "scaled_dot_product_attention")[0]


__all__ = sorted(n for n in dir() if not n.startswith("_") and n not in ("Tensor", "annotations", "math", "no_grad"))
