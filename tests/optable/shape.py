"""Op-table specs for the shape family: views, reshape/flatten, contiguous/clone, as_strided."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import ALL, OpSpec, shapes, values


def _x(draw, dtype, min_dims=0, max_dims=4, min_side=0, max_side=5):
    return values(draw, draw(shapes(min_dims, max_dims, min_side, max_side)), dtype)


def _ones_shape(draw, min_dims=0, max_dims=4):
    """Shapes rich in size-1 dims (for squeeze/expand)."""
    n = draw(st.integers(min_dims, max_dims))
    return tuple(draw(st.sampled_from([1, 1, 0, 2, 3])) for _ in range(n))


def _factor_shape(draw, numel: int):
    """A random shape with ``numel`` elements (0 → some dim is 0)."""
    if numel == 0:
        n = draw(st.integers(1, 3))
        s = [draw(st.integers(0, 3)) for _ in range(n)]
        s[draw(st.integers(0, n - 1))] = 0
        return s
    factors = []
    m, p = numel, 2
    while m > 1:
        while m % p == 0:
            factors.append(p)
            m //= p
        p += 1
    k = draw(st.integers(0, 4))
    dims = [1] * k if k else []
    if not dims:
        return [numel] if numel != 1 or draw(st.booleans()) else []
    for f in factors:
        dims[draw(st.integers(0, k - 1))] *= f
    return dims


def _reshape_sample(draw, dtype):
    x = _x(draw, dtype)
    target = _factor_shape(draw, x.size)
    if x.size > 0 and target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    form = draw(st.sampled_from(["varargs", "tuple"]))
    return [x], {"shape": tuple(target), "form": form}


def _call_shape(method):
    def fn(x, shape, form):
        return method(x, *shape) if form == "varargs" else method(x, shape)
    return fn


def _np_reshape(x, shape, form):
    return x.reshape(shape)


def _permute_sample(draw, dtype):
    x = _x(draw, dtype)
    dims = [int(d) for d in draw(st.permutations(range(x.ndim)))]
    dims = [d - x.ndim if draw(st.booleans()) else d for d in dims]
    return [x], {"dims": tuple(dims), "form": draw(st.sampled_from(["varargs", "tuple"]))}


def _permute_fg(x, dims, form):
    if form == "varargs":
        return x.permute(*dims)
    return fg.permute(x, dims)


def _dim(draw, ndim, extra=0):
    return draw(st.integers(-ndim - extra, ndim - 1 + extra))


def _transpose_sample(draw, dtype):
    x = _x(draw, dtype, min_dims=1)
    return [x], {"d0": _dim(draw, x.ndim), "d1": _dim(draw, x.ndim),
                 "form": draw(st.sampled_from(["transpose", "swapaxes", "fn"]))}


def _transpose_fg(x, d0, d1, form):
    if form == "swapaxes":
        return x.swapaxes(d0, d1)
    if form == "fn":
        return fg.transpose(x, d0, d1)
    return x.transpose(d0, d1)


def _squeeze_sample(draw, dtype):
    x = values(draw, _ones_shape(draw), dtype)
    mode = draw(st.sampled_from(["all", "int", "tuple"]))
    if mode == "all" or x.ndim == 0:
        return [x], {"dim": None}
    if mode == "int":
        return [x], {"dim": _dim(draw, x.ndim)}
    dims = draw(st.lists(st.integers(0, x.ndim - 1), unique=True, max_size=x.ndim))
    return [x], {"dim": tuple(dims)}


def _squeeze_fg(x, dim):
    return x.squeeze() if dim is None else x.squeeze(dim)


def _squeeze_np(x, dim):
    if dim is None:
        return x.reshape([s for s in x.shape if s != 1])
    dims = dim if isinstance(dim, tuple) else (dim,)
    drop = {d % x.ndim for d in dims if x.shape[d % x.ndim] == 1}
    return x.reshape([s for i, s in enumerate(x.shape) if i not in drop])


def _unsqueeze_sample(draw, dtype):
    x = _x(draw, dtype, max_dims=3)
    return [x], {"dim": draw(st.integers(-x.ndim - 1, x.ndim))}


def _expand_sample(draw, dtype):
    x = values(draw, _ones_shape(draw, max_dims=3), dtype)
    lead = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2)))]
    sizes = list(lead)
    for s in x.shape:
        if s == 1:
            sizes.append(draw(st.sampled_from([1, 2, 3, -1, 0])))
        else:
            sizes.append(draw(st.sampled_from([s, -1])))
    form = draw(st.sampled_from(["varargs", "tuple"]))
    return [x], {"shape": tuple(sizes), "form": form}


def _expand_np(x, shape, form):
    lead = len(shape) - x.ndim
    target = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    return np.broadcast_to(x, target)


def _broadcast_to_sample(draw, dtype):
    arr = values(draw, _ones_shape(draw, max_dims=3), dtype)
    target = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2)))]
    target += [draw(st.sampled_from([1, 2, 3, 0])) if s == 1 else s for s in arr.shape]
    return [arr], {"shape": tuple(target)}


def _flatten_sample(draw, dtype):
    x = _x(draw, dtype)
    if x.ndim == 0:
        return [x], {}
    a = draw(st.integers(-x.ndim, x.ndim - 1))
    b = draw(st.integers(-x.ndim, x.ndim - 1))
    a, b = sorted([a % x.ndim, b % x.ndim])
    kw = {}
    if draw(st.booleans()):
        kw["start_dim"] = a - x.ndim if draw(st.booleans()) else a
    if draw(st.booleans()):
        kw["end_dim"] = b - x.ndim if draw(st.booleans()) else b
    if kw.get("start_dim", 0) % x.ndim > kw.get("end_dim", -1) % x.ndim:
        kw.pop("end_dim")
    return [x], kw


def _flatten_np(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:])


def _narrow_sample(draw, dtype):
    x = _x(draw, dtype, min_dims=1)
    dim = _dim(draw, x.ndim)
    n = x.shape[dim]
    start = draw(st.integers(0, n))
    length = draw(st.integers(0, n - start))
    if start < n and draw(st.booleans()):
        start -= n  # negative start counts from the end
    return [x], {"dim": dim, "start": start, "length": length}


def _narrow_np(x, dim, start, length):
    d = dim % x.ndim
    s = start % x.shape[d] if start < 0 else start
    idx = [slice(None)] * x.ndim
    idx[d] = slice(s, s + length)
    return x[tuple(idx)]


def _select_sample(draw, dtype):
    x = _x(draw, dtype, min_dims=1, min_side=1)
    dim = _dim(draw, x.ndim)
    n = x.shape[dim]
    return [x], {"dim": dim, "index": draw(st.integers(-n, n - 1)),
                 "form": draw(st.sampled_from(["method", "getitem"]))}


def _select_fg(x, dim, index, form):
    if form == "getitem":
        return x[(slice(None),) * (dim % x.ndim) + (index,)]
    return x.select(dim, index)


def _select_np(x, dim, index, form):
    return np.take(x, index, axis=dim)


def _slice_sample(draw, dtype):
    x = _x(draw, dtype, min_dims=1, max_side=7)
    dim = draw(st.integers(0, x.ndim - 1))
    n = x.shape[dim]
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    return [x], {"dim": dim, "start": draw(bound), "stop": draw(bound),
                 "step": draw(st.sampled_from([None, 1, 2, 3]))}


def _slice_key(dim, start, stop, step):
    return (slice(None),) * dim + (slice(start, stop, step),)


SLICE = OpSpec(
    "slice",
    lambda x, dim, start, stop, step: x[_slice_key(dim, start, stop, step)],
    lambda x, dim, start, stop, step: x[_slice_key(dim, start, stop, step)],
    _slice_sample, dtypes=ALL,
)


def _flip_sample(draw, dtype):
    x = _x(draw, dtype)
    dims = draw(st.lists(st.integers(0, max(x.ndim - 1, 0)), unique=True, max_size=x.ndim)) if x.ndim else []
    dims = [d - x.ndim if draw(st.booleans()) else d for d in dims]
    return [x], {"dims": tuple(dims), "form": draw(st.sampled_from(["varargs", "tuple"]))}


def _flip_fg(x, dims, form):
    return x.flip(*dims) if form == "varargs" else fg.flip(x, list(dims))


def _contiguous_fg(x):
    y = x.contiguous()
    assert y.is_contiguous(), "contiguous() returned a non-contiguous tensor"
    if x.is_contiguous():
        assert y._shares_storage(x), "contiguous() copied an already contiguous tensor"
    return y


def _clone_fg(x):
    y = x.clone()
    assert not y._shares_storage(x), "clone() shares its input's storage"
    assert y.is_contiguous()
    return y


def _as_strided_sample(draw, dtype):
    x = _x(draw, dtype, min_dims=1, min_side=1)
    n = x.size
    k = draw(st.integers(0, 3))
    size = [draw(st.integers(0, 3)) for _ in range(k)]
    stride = [draw(st.integers(0, 3)) for _ in range(k)]
    span = sum((s - 1) * t for s, t in zip(size, stride, strict=True) if s > 0)
    if any(s == 0 for s in size):
        span = 0
    if span >= n:
        size = [min(s, 1) for s in size]
        span = 0
    offset = draw(st.integers(0, n - 1 - span))
    return [x], {"size": tuple(size), "stride": tuple(stride), "offset": offset}


def _as_strided_np(x, size, stride, offset):
    flat = x.reshape(-1)
    if not size:
        return flat[offset].copy()
    idx = np.full(size, offset, dtype=np.int64)
    for d, (s, t) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[d] = s
        idx = idx + (np.arange(s) * t).reshape(shape)
    return flat[idx]


SPECS = [
    # view of a non-contiguous input can legitimately fail (tests/test_views.py covers strided views)
    OpSpec("view", _call_shape(fg.Tensor.view), _np_reshape, _reshape_sample, dtypes=ALL, noncontig=False),
    OpSpec("reshape", _call_shape(fg.Tensor.reshape), _np_reshape, _reshape_sample, dtypes=ALL),
    OpSpec("permute", _permute_fg, lambda x, dims, form: np.transpose(x, dims), _permute_sample, dtypes=ALL),
    OpSpec("transpose", _transpose_fg, lambda x, d0, d1, form: np.swapaxes(x, d0, d1), _transpose_sample,
           dtypes=ALL),
    OpSpec("squeeze", _squeeze_fg, _squeeze_np, _squeeze_sample, dtypes=ALL),
    OpSpec("unsqueeze", lambda x, dim: x.unsqueeze(dim), lambda x, dim: np.expand_dims(x, dim),
           _unsqueeze_sample, dtypes=ALL),
    OpSpec("expand", _call_shape(fg.Tensor.expand), _expand_np, _expand_sample, dtypes=ALL),
    OpSpec("broadcast_to", lambda x, shape: fg.broadcast_to(x, list(shape)),
           lambda x, shape: np.broadcast_to(x, shape), _broadcast_to_sample, dtypes=ALL),
    OpSpec("flatten", lambda x, **kw: x.flatten(**kw), _flatten_np, _flatten_sample, dtypes=ALL),
    OpSpec("narrow", lambda x, dim, start, length: x.narrow(dim, start, length), _narrow_np, _narrow_sample,
           dtypes=ALL),
    OpSpec("select", _select_fg, _select_np, _select_sample, dtypes=ALL),
    SLICE,
    OpSpec("flip", _flip_fg, lambda x, dims, form: np.flip(x, dims) if dims else x, _flip_sample, dtypes=ALL),
    OpSpec("contiguous", _contiguous_fg, lambda x: x, lambda draw, d: ([_x(draw, d)], {}), dtypes=ALL),
    OpSpec("clone", _clone_fg, lambda x: x, lambda draw, d: ([_x(draw, d)], {}), dtypes=ALL),
    # as_strided addresses storage, so it is checked on contiguous inputs only
    OpSpec("as_strided", lambda x, size, stride, offset: x.as_strided(size, stride, offset), _as_strided_np,
           _as_strided_sample, dtypes=ALL, noncontig=False),
]
