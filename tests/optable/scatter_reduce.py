"""Op-table specs for ``scatter_reduce`` / ``scatter_reduce_`` (registry ops) and
``index_reduce`` / ``index_reduce_`` (composed of ``scatter_reduce`` in Python).

The reference is a float64 (integers: the input dtype, wrapping) loop over PyTorch's
documented definition: every slot an index names holds the reduction of the source
values sent to it, in row-major order, and of its own value when ``include_self``;
``mean`` divides by that count (integers round down). Gradient samples draw distinct
values (no ties for ``amax``/``amin``, no zeros for ``prod``); the tie and zero rules of
the gradients are checked against stored PyTorch references in
``tests/test_scatter_reduce.py``. Flags travel as 0/1 ints.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, NUMERIC, OpSpec, shapes, values

REDUCES = ("sum", "prod", "mean", "amax", "amin")
INDEX_REDUCES = ("prod", "mean", "amax", "amin")
TOL = {"float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}


def _reduce(vals: list, reduce: str, dt: np.dtype):
    if dt.kind == "f":
        a = np.asarray(vals, dtype=np.float64)
        return {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](a)
    a = [int(v) for v in vals]
    wrap = lambda v: np.array(v).astype(np.int64).astype(dt)  # noqa: E731 - two's complement wrap
    if reduce in ("sum", "mean"):
        s = wrap(sum(a))
        return s if reduce == "sum" else np.floor_divide(s, np.array(len(a), dtype=dt))
    if reduce == "prod":
        p = 1
        for v in a:
            p = int(wrap(p * v))
        return p
    return max(a) if reduce == "amax" else min(a)


def scatter_reduce_np(x, src, dim, index, reduce, include_self):
    """PyTorch's definition of ``x.scatter_reduce(dim, index, src, reduce, include_self)``."""
    x1 = x.reshape(1) if x.ndim == 0 else x
    s1 = src.reshape(1) if src.ndim == 0 else src
    i1 = index.reshape(1) if index.ndim == 0 else index
    d = dim % x1.ndim
    groups: dict[tuple, list] = {}
    for pos in np.ndindex(*i1.shape):
        tgt = list(pos)
        tgt[d] = int(i1[pos])
        groups.setdefault(tuple(tgt), []).append(s1[pos])
    out = np.array(x1, copy=True)
    for tgt, vals in groups.items():
        if include_self:
            vals = [x1[tgt], *vals]
        out[tgt] = _reduce(vals, reduce, x.dtype)
    return out.reshape(x.shape)


def _distinct(draw, shape, lo=-1.9, step=0.37):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = int(np.prod(shape))
    v = rng.permutation(n) * step + lo
    v = np.where(np.abs(v) < 0.1, v + 0.2, v)  # away from zero (prod)
    return v.reshape(shape).astype(np.float64)


def _sample(grad=False):
    def sample(draw, dtype):
        shape = list(draw(shapes(0 if not grad else 1, 3, 1, 4)))
        nd = max(len(shape), 1)
        d = draw(st.integers(0, nd - 1))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        s1 = shape or [1]
        ishape = [draw(st.integers(0 if not grad else 1, s)) for s in s1]
        ishape[d] = draw(st.integers(0 if not grad else 1, 4)) if shape else 1
        idx = rng.integers(0, s1[d], size=ishape).astype(np.int64)
        sshape = [s + draw(st.integers(0, 1)) for s in ishape]
        if not shape:  # 0-d self, index and src
            idx, sshape = idx.reshape(()), []
        if grad:
            n = int(np.prod(shape)) + int(np.prod(sshape))
            v = _distinct(draw, (n,))
            x, src = v[: int(np.prod(shape))].reshape(shape), v[int(np.prod(shape)) :].reshape(sshape)
        else:
            x, src = values(draw, tuple(shape), dtype), values(draw, tuple(sshape), dtype)
        return [x, src], {
            "dim": d - (nd if draw(st.booleans()) else 0),
            "index": idx,
            "reduce": draw(st.sampled_from(REDUCES)),
            "include_self": int(draw(st.booleans())),
        }

    return sample


def _fg(x, src, dim, index, reduce, include_self):
    return fg.scatter_reduce(
        x, dim, fg.tensor(index, device=x.device), src, reduce, include_self=bool(include_self)
    )


def _fg_inplace(x, src, dim, index, reduce, include_self):
    y = x.clone()
    r = y.scatter_reduce_(
        dim, fg.tensor(index, device=x.device), src, reduce, include_self=bool(include_self)
    )
    assert r is y
    return y


def _index_sample(grad=False):
    def sample(draw, dtype):
        shape = list(draw(shapes(1, 3, 1, 4)))
        d = draw(st.integers(0, len(shape) - 1))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        k = draw(st.integers(0 if not grad else 1, 5))
        idx = rng.integers(0, shape[d], size=k).astype(np.int64)
        sshape = list(shape)
        sshape[d] = k
        if grad:
            v = _distinct(draw, (int(np.prod(shape)) + int(np.prod(sshape)),))
            x, src = v[: int(np.prod(shape))].reshape(shape), v[int(np.prod(shape)) :].reshape(sshape)
        else:
            x, src = values(draw, tuple(shape), dtype), values(draw, tuple(sshape), dtype)
        return [x, src], {
            "dim": d - (len(shape) if draw(st.booleans()) else 0),
            "idx": idx,
            "reduce": draw(st.sampled_from(INDEX_REDUCES)),
            "include_self": int(draw(st.booleans())),
        }

    return sample


def index_reduce_np(x, src, dim, idx, reduce, include_self):
    """PyTorch's definition of ``x.index_reduce(dim, idx, src, reduce, include_self)``: slot
    ``idx[j]`` of dim ``dim`` takes ``src``'s slice ``j``."""
    d = dim % x.ndim
    full = np.broadcast_to(idx.reshape([-1 if k == d else 1 for k in range(x.ndim)]), src.shape)
    return scatter_reduce_np(x, src, d, full, reduce, include_self)


def _fg_index(x, src, dim, idx, reduce, include_self):
    return fg.index_reduce(
        x, dim, fg.tensor(idx, device=x.device), src, reduce, include_self=bool(include_self)
    )


def _fg_index_inplace(x, src, dim, idx, reduce, include_self):
    y = x.clone()
    r = y.index_reduce_(dim, fg.tensor(idx, device=x.device), src, reduce, include_self=bool(include_self))
    assert r is y
    return y


_common = dict(dtypes=NUMERIC, ref_in_dtype=True, tol=TOL, grad_snap=False, grad_examples=8)
# Products of several rounded values: a few more roundings than one op's.
_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}

SPECS = [
    OpSpec(
        "scatter_reduce",
        _fg,
        scatter_reduce_np,
        _sample(),
        grad_sample=_sample(True),
        lowp_grad_factor=_LOWP,
        **_common,
    ),
    OpSpec(
        "scatter_reduce_",
        _fg_inplace,
        scatter_reduce_np,
        _sample(),
        grad_sample=_sample(True),
        lowp_grad_factor=_LOWP,
        **_common,
    ),
    OpSpec(
        "index_reduce",
        _fg_index,
        index_reduce_np,
        _index_sample(),
        grad_sample=_index_sample(True),
        composed=True,
        lowp_grad_factor=_LOWP,
        **_common,
    ),
    OpSpec(
        "index_reduce_",
        _fg_index_inplace,
        index_reduce_np,
        _index_sample(),
        grad_sample=_index_sample(True),
        composed=True,
        lowp_grad_factor=_LOWP,
        **_common,
    ),
]

assert set(FLOATS) <= set(NUMERIC)
