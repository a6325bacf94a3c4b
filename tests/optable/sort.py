"""Op-table specs of the sort family (one op definition: ``src/kernel/sort.rs``).

Inputs hold distinct values (a shuffled range, exact in every dtype), so the
indices are unambiguous and the gradient has no ties; bool inputs tie, and
the reference is NumPy's stable sort, which is ferrograd's order (equal
values keep their input order). Ties and NaN have their own tests in
``tests/test_sort.py``.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import ALL, FLOATS, OpSpec, shapes

_B = st.booleans()


def _distinct(draw, dtype, nonempty_dim=False):
    """A tensor of distinct values (ints -62..62 at most: exact in bfloat16) and a dim."""
    shape = draw(shapes(max_dims=3, min_side=1 if nonempty_dim else 0))
    n = int(np.prod(shape, dtype=np.int64))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == "bool":
        x = np.asarray(rng.random(shape) < 0.5)
    else:
        x = (rng.permutation(n) - n // 2).reshape(shape)
        x = np.asarray(
            x.astype(np.float32) * 0.5 if dtype in FLOATS else x,
            dtype=np.float32 if dtype == "bfloat16" else dtype,
        )
    nd = len(shape)
    return x, draw(st.integers(-max(nd, 1), max(nd, 1) - 1))


def _order(x, dim, descending):
    """NumPy's stable order along ``dim`` (ferrograd's: ties keep input order)."""
    if x.ndim == 0:
        return np.asarray(0, dtype=np.int64)
    if descending and x.dtype.kind in "iu" and x.dtype.itemsize < 8:  # -x may wrap: negate in int64
        x = x.astype(np.int64)
    key = (~x if x.dtype == np.bool_ else -x) if descending else x
    return np.argsort(key, axis=dim, kind="stable").astype(np.int64)


def _sort_np(x, dim=-1, descending=False, stable=False):
    i = _order(x, dim, descending)
    if x.ndim == 0:
        return x.copy(), i
    return np.take_along_axis(x, i, axis=dim), i


def _sort_sample(draw, dtype):
    x, dim = _distinct(draw, dtype)
    return [x], {"dim": dim, "descending": draw(_B), "stable": draw(_B)}


def _topk_np(x, k, dim=-1, largest=True, sorted=True):
    v, i = _sort_np(x, dim, largest)
    if x.ndim == 0:
        return v, i
    sl = [slice(None)] * x.ndim
    sl[dim] = slice(0, k)
    return v[tuple(sl)], i[tuple(sl)]


def _topk_sample(draw, dtype):
    x, dim = _distinct(draw, dtype)
    n = x.shape[dim] if x.ndim else 1
    k = draw(st.integers(1 if x.ndim == 0 else 0, n))
    return [x], {"k": k, "dim": dim, "largest": draw(_B)}


def _kth_np(x, k, dim=-1, keepdim=False):
    v, i = _sort_np(x, dim)
    if x.ndim == 0:
        return v, i
    v, i = np.take(v, [k - 1], axis=dim), np.take(i, [k - 1], axis=dim)
    return (v, i) if keepdim else (np.squeeze(v, dim), np.squeeze(i, dim))


def _kth_sample(draw, dtype):
    x, dim = _distinct(draw, dtype, nonempty_dim=True)
    n = x.shape[dim] if x.ndim else 1
    return [x], {"k": draw(st.integers(1, n)), "dim": dim, "keepdim": draw(_B)}


def _median_np(x, dim=None, keepdim=False):
    if dim is None:
        return np.sort(x.reshape(-1), kind="stable")[(x.size - 1) // 2]
    n = x.shape[dim] if x.ndim else 1
    return _kth_np(x, (n - 1) // 2 + 1, dim, keepdim)


def _median_sample(draw, dtype):
    x, dim = _distinct(draw, dtype, nonempty_dim=True)
    if draw(_B):
        return [x], {}
    return [x], {"dim": dim, "keepdim": draw(_B)}


def _pair(f):
    def run(*a, **kw):
        r = f(*a, **kw)
        return tuple(r) if isinstance(r, tuple) else r

    return run


def _median_out(d, dim=None, keepdim=False):
    return d if dim is None else (d, "int64")


_PAIR = lambda d, **kw: (d, "int64")  # noqa: E731

SPECS = [
    OpSpec(
        "sort",
        _pair(fg.sort),
        _sort_np,
        _sort_sample,
        dtypes=ALL,
        out_dtype=_PAIR,
        ref_in_dtype=True,
        grad_examples=8,
    ),
    OpSpec(
        "argsort",
        fg.argsort,
        lambda x, **kw: _sort_np(x, **kw)[1],
        _sort_sample,
        dtypes=ALL,
        out_dtype="int64",
        ref_in_dtype=True,
    ),
    OpSpec(
        "msort",
        fg.msort,
        lambda x: _sort_np(x, 0)[0],
        lambda draw, d: ([_distinct(draw, d)[0]], {}),
        dtypes=ALL,
        ref_in_dtype=True,
        out_dtype=lambda d: d,
        grad_examples=8,
    ),
    OpSpec(
        "topk",
        _pair(fg.topk),
        _topk_np,
        _topk_sample,
        dtypes=ALL,
        out_dtype=_PAIR,
        ref_in_dtype=True,
        grad_examples=8,
    ),
    OpSpec(
        "kthvalue",
        _pair(fg.kthvalue),
        _kth_np,
        _kth_sample,
        dtypes=ALL,
        out_dtype=_PAIR,
        ref_in_dtype=True,
        grad_examples=8,
    ),
    OpSpec(
        "median",
        _pair(fg.median),
        _median_np,
        _median_sample,
        dtypes=ALL,
        out_dtype=_median_out,
        ref_in_dtype=True,
        grad_examples=8,
    ),
    OpSpec(
        "nanmedian",
        _pair(fg.nanmedian),
        _median_np,
        _median_sample,
        dtypes=ALL,
        out_dtype=_median_out,
        ref_in_dtype=True,
        grad_examples=8,
    ),
]
