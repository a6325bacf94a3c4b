"""Op-table specs of the composed ``multilabel_margin_loss`` and
``triplet_margin_with_distance_loss`` (default distance), against NumPy float64."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, values

F = fg.nn.functional

SUM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}
REDUCTIONS = ["mean", "sum", "none"]


def _reduce(loss, reduction):
    if reduction == "mean":
        return np.asarray(loss.mean())
    if reduction == "sum":
        return np.asarray(loss.sum())
    return loss


def _g(sample):
    return lambda draw, dtype: sample(draw, "float64", grad=True)


def _mlm_sample(draw, dtype, grad=False):
    c = draw(st.integers(2, 5))
    two_d = draw(st.booleans())
    n = draw(st.integers(1, 3))
    shape = (n, c) if two_d else (c,)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = []
    for _ in range(n if two_d else 1):
        k = int(rng.integers(0, c + 1))  # how many labels before the -1
        row = np.full(c, -1, dtype=np.int64)
        row[:k] = rng.permutation(c)[:k]
        if k < c - 1:
            row[k + 1 :] = rng.integers(0, c, size=c - k - 1)  # ignored after the -1
        rows.append(row)
    target = np.stack(rows) if two_d else rows[0]
    return [values(draw, shape, dtype)], {"target": target, "reduction": draw(st.sampled_from(REDUCTIONS))}


def _mlm_np(x, target, reduction):
    xx = x.reshape(-1, x.shape[-1]).astype(np.float64)
    tt = np.asarray(target).reshape(xx.shape)
    c = xx.shape[1]
    loss = np.zeros(xx.shape[0])
    for r in range(xx.shape[0]):
        labels = []
        for y in tt[r]:
            if y < 0:
                break
            labels.append(int(y))
        for y in labels:
            for i in range(c):
                if i not in labels:
                    loss[r] += max(0.0, 1.0 - (xx[r, y] - xx[r, i]))
    loss = loss / c
    if x.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def _mlm_fg(x, target, reduction):
    return F.multilabel_margin_loss(x, fg.tensor(target), reduction=reduction)


def _tmd_sample(draw, dtype, grad=False):
    n = draw(st.integers(1, 3))
    d = draw(st.integers(1, 4))
    return [values(draw, (n, d), dtype) for _ in range(3)], {
        "margin": draw(st.sampled_from([1.0, 0.5])),
        "swap": draw(st.booleans()),
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _tmd_np(a, p, n, margin, swap, reduction):
    def dist(u, v):
        return np.sqrt(((u.astype(np.float64) - v + 1e-6) ** 2).sum(-1))

    dn = dist(a, n)
    if swap:
        dn = np.minimum(dn, dist(p, n))
    return _reduce(np.maximum(dist(a, p) - dn + margin, 0.0), reduction)


def _tmd_fg(a, p, n, margin, swap, reduction):
    return F.triplet_margin_with_distance_loss(a, p, n, margin=margin, swap=swap, reduction=reduction)


SPECS: list[OpSpec] = [
    OpSpec(
        "multilabel_margin_loss",
        _mlm_fg,
        _mlm_np,
        _mlm_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_mlm_sample),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "triplet_margin_with_distance_loss",
        _tmd_fg,
        _tmd_np,
        _tmd_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_tmd_sample),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]
