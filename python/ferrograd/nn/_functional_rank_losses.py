"""Ranking and embedding losses: margin ranking, triplet margin, cosine embedding and
multi-label soft margin.

Re-exported by :mod:`ferrograd.nn.functional`; composed of registry ops.
"""

from __future__ import annotations

from .. import _autocast as _amp
from .. import _core
from .functional import (
    _check_float,
    _check_reduction,
    _check_same_shape,
    _check_tensor,
    _in_float32,
    _legacy_reduction,
    _reduce,
    logsigmoid,
    pairwise_distance,
)

Tensor = _core.Tensor

# ---------------------------------------------------------------------------
# ranking and embedding losses
# ---------------------------------------------------------------------------


@_in_float32("input1", "input2", "target")
@_amp.f32("input1", "input2", "target")
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)`` with ``target`` of ±1, reduced."""
    fn = "margin_ranking_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        _check_float(fn, name, t)
    if not input1.dim() == input2.dim() == target.dim():
        raise ValueError(
            f"{fn}: all input tensors should have the same dimension but got sizes: input1: "
            f"{tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)}"
        )
    loss = (target.neg() * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction)


@_in_float32("anchor", "positive", "negative")
@_amp.f32("anchor", "positive", "negative")
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the ``pairwise_distance``, reduced.

    ``swap=True`` uses ``min(d(a, n), d(p, n))`` as the negative distance.
    """
    fn = "triplet_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_float(fn, name, t)
    if not anchor.dim() == positive.dim() == negative.dim():
        raise ValueError(
            f"{fn}: the anchor, positive, and negative tensors are expected to have the same number of "
            f"dimensions, but got: anchor {anchor.dim()}D, positive {positive.dim()}D, and negative "
            f"{negative.dim()}D inputs"
        )
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    loss = (d_pos - d_neg + margin).clamp(min=0.0)
    return _reduce(loss, reduction)


@_in_float32("input1", "input2")
@_amp.f32("input1", "input2", "target")
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where ``target == -1``.

    ``input1``/``input2`` are ``(N, D)`` (``target`` ``(N,)``) or ``(D,)``
    (``target`` 0-d); the cosine uses ``sqrt((|x1|² + 1e-12)(|x2|² + 1e-12))``.
    """
    fn = "cosine_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input1", input1)
    _check_float(fn, "input2", input2)
    _check_tensor(fn, "target", target)
    if input1.dim() not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise ValueError(
            f"{fn}: input1 and input2 must be 1-D or 2-D of the same shape, got {tuple(input1.shape)} "
            f"and {tuple(input2.shape)}"
        )
    if target.dim() != input1.dim() - 1 or (target.dim() == 1 and target.shape[0] != input1.shape[0]):
        raise ValueError(
            f"{fn}: {input1.dim()}D target tensor expected to have {input1.dim() - 1} dims matching the "
            f"batch of the inputs {tuple(input1.shape)}, got target {tuple(target.shape)}"
        )
    d = input1.dim() - 1
    prod = (input1 * input2).sum(d)
    mag1 = input1.square().sum(d) + 1e-12
    mag2 = input2.square().sum(d) + 1e-12
    cos = prod / (mag1 * mag2).sqrt()
    pos = _core.where(target == 1, 1.0 - cos, 0.0)
    neg = _core.where(target == -1, (cos - margin).clamp(min=0.0), 0.0)
    return _reduce(pos + neg, reduction)


@_in_float32("input", "target", "weight")
def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-label one-vs-all logistic loss: ``-mean_c(t log σ(x) + (1 - t) log σ(-x))`` per sample, reduced.

    ``weight`` (broadcast to the input) rescales each class's term.
    """
    fn = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(fn, reduction)
    _check_float(fn, "input", input)
    _check_float(fn, "target", target)
    _check_same_shape(fn, input, target)
    if input.dim() == 0:
        raise ValueError(f"{fn}: input must have at least 1 dimension (the classes), got a 0-d tensor")
    loss = (target * logsigmoid(input) + (1 - target) * logsigmoid(input.neg())).neg()
    if weight is not None:
        _check_float(fn, "weight", weight)
        loss = loss * weight
    cdim = input.dim() - 1
    loss = loss.sum(cdim) / input.shape[cdim]
    return _reduce(loss, reduction)
