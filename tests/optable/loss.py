"""Op-table specs for the loss family: the fused ``cross_entropy``.

Targets, class weights and the options travel in the keyword arguments as
NumPy arrays and plain values, so they keep their dtype whatever dtype the
logits are tested in. Samples cover ``(C,)``, ``(N, C)`` and ``(N, C, d...)``
logits (zero-size included), ignored targets, weights, label smoothing and
the three reductions; the reference is a float64 log-softmax + NLL in NumPy.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, values

TOL = {"float32": (2e-5, 2e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}


def _sample_ce(draw, dtype, grad=False):
    nd = draw(st.integers(1, 4))
    hi = 4 if grad else 5
    shape = tuple(draw(st.integers(1 if grad else 0, hi)) for _ in range(nd))
    if grad and nd == 4:
        shape = shape[:3]
    dt = "float64" if grad else dtype
    x = values(draw, shape, dt, -4.0, 4.0)
    cdim = 1 if x.ndim >= 2 else 0
    c = shape[cdim]
    tshape = shape[:cdim] + shape[cdim + 1:]
    ignore = draw(st.sampled_from([-100, 1, 7]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if c:
        t = rng.integers(0, c, size=tshape)
        t = np.where(rng.random(tshape) < 0.2, ignore, t)
    else:
        t = np.full(tshape, ignore)
    t = np.asarray(t, dtype=draw(st.sampled_from([np.int64, np.int32])))
    w = None
    if draw(st.booleans()):
        w = values(draw, (c,), "float64", 0.25, 2.0)
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    if grad and reduction == "mean" and t.size and (t == ignore).all():
        # Every target ignored: the mean is 0/0 = NaN (as in PyTorch), a value
        # with no derivative to compare; the forward check keeps this case.
        t.flat[0] = 0  # class 0 exists here (c >= 1) and is never the ignore index
    return [x], {
        "target": t,
        "weight": w,
        "ignore_index": ignore,
        "reduction": reduction,
        "label_smoothing": draw(st.sampled_from([0.0, 0.0, 0.1, 0.5])),
    }


def _ce_fg(x, target, weight, ignore_index, reduction, label_smoothing):
    w = None if weight is None else fg.tensor(weight, dtype=x.dtype, device=x.device)
    return fg.nn.functional.cross_entropy(
        x, fg.tensor(target, device=x.device), weight=w, ignore_index=ignore_index, reduction=reduction,
        label_smoothing=label_smoothing,
    )


def _ce_np(x, target, weight, ignore_index, reduction, label_smoothing):
    x = np.asarray(x, np.float64)
    cdim = 1 if x.ndim >= 2 else 0
    c = x.shape[cdim]
    xm = np.moveaxis(x, cdim, -1)  # (..., C)
    t = np.asarray(target)
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    if c:
        m = np.max(xm, axis=-1, keepdims=True)
        logp = xm - m - np.log(np.sum(np.exp(xm - m), axis=-1, keepdims=True))
        picked = np.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
        smooth = -(logp * w).sum(-1)
    else:
        picked = np.zeros(t.shape)
        smooth = np.zeros(t.shape)
    wt = np.where(keep, w[safe] if c else 0.0, 0.0)
    loss = (1 - label_smoothing) * (-picked * wt) + label_smoothing / max(c, 1) * np.where(keep, smooth, 0.0)
    loss = np.where(keep, loss, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(loss.sum() / wt.sum())


SPECS: list[OpSpec] = [
    # float32: the gradient at the target, w·(p - 1), takes p = exp(x - lse) from the
    # forward's float32 lse; the roundings of lse and of x - lse (u·|lse|, |lse| up to
    # ~5.4 for these logits) are relative errors of p that 1 does not cancel, times the
    # class weight (up to 2). float16/bfloat16 compute it in float32.
    OpSpec("cross_entropy", _ce_fg, _ce_np, _sample_ce, dtypes=FLOATS, tol=TOL,
           grad_sample=lambda draw, dtype: _sample_ce(draw, dtype, grad=True), grad_examples=10,
           grad_args=(0,), lowp_grad_factor={"float32": 8.0}),
]
