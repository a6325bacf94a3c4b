"""Op-table specs for the index family (advanced indexing, gather/scatter,
nonzero) and the join family (cat, stack, split, pad, ...).

The gradient column uses the same samplers with a ``cap`` on the number of
elements (``grad_sample=partial(sampler, cap=N)``), and for the ops whose
repeated targets have an unspecified winner (``setitem``, ``index_put_``
without ``accumulate``, ``scatter``) keys without repeats.

Index arrays and other integer arguments travel in the keyword arguments as
NumPy arrays, so they keep their integer dtype whatever dtype the data is
tested in. Ops returning several tensors are compared through the
concatenation of their flattened pieces (their shapes are checked in
``tests/test_index.py``).
"""

from __future__ import annotations

from functools import partial

import ferrograd as fg
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from ._spec import ALL, OpSpec, shapes, values

# ---------------------------------------------------------------------------
# Keys for x[key]
# ---------------------------------------------------------------------------


def _variant(draw, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``base`` (leading dims dropped, dims set to 1)."""
    n = draw(st.integers(0, len(base)))
    s = list(base[len(base) - n:])
    for i in range(len(s)):
        if draw(st.booleans()):
            s[i] = 1
    return tuple(s)


def _fit(shape, cap: int | None):
    """``shape`` with its largest sides shrunk until it has at most ``cap`` elements."""
    s = list(shape)
    while cap is not None and s and int(np.prod(s)) > cap:
        s[int(np.argmax(s))] -= 1
    return tuple(s)


@st.composite
def index_keys(draw, shape: tuple[int, ...], allow_mask: bool = True):
    """A NumPy key for an array of ``shape`` mixing ints, slices, None, an
    ellipsis, integer arrays (broadcasting together, negative values
    included) and at most one boolean mask. Returns a tuple."""
    nd = len(shape)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_used = draw(st.integers(0, nd))
    use_ell = draw(st.booleans())
    n_head = draw(st.integers(0, n_used)) if use_ell else n_used
    head = list(range(n_head))
    tail = list(range(nd - (n_used - n_head), nd))

    mask_used = [not allow_mask]

    def plan(dims):
        out, i = [], 0
        while i < len(dims):
            k = draw(st.sampled_from(["int", "slice", "array", "array", "mask"]))
            if k == "mask" and not mask_used[0]:
                mask_used[0] = True
                m = draw(st.integers(1, min(2, len(dims) - i)))
                out.append(("mask", dims[i:i + m]))
                i += m
                continue
            if k == "mask":
                k = "array"
            if k in ("int", "array") and shape[dims[i]] == 0:
                k = "slice"
            out.append((k, [dims[i]]))
            i += 1
        return out

    items = plan(head) + ([("ellipsis", [])] if use_ell else []) + plan(tail)
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), ("none", []))
    if draw(st.booleans()) and any(k == "array" for k, _ in items):
        items.insert(draw(st.integers(0, len(items))), ("true", []))
    # Materialise: the mask first, since the arrays must broadcast with its count.
    key = [None] * len(items)
    count = None
    for j, (k, dims) in enumerate(items):
        if k == "mask":
            m = rng.random([shape[d] for d in dims]) < 0.5
            key[j] = m
            count = int(m.sum())
    base = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    for j, (k, dims) in enumerate(items):
        if k == "int":
            n = shape[dims[0]]
            key[j] = int(rng.integers(-n, n))
        elif k == "slice":
            n = shape[dims[0]]
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2])))
            key[j] = slice(start, stop, step)
        elif k == "none":
            key[j] = None
        elif k == "ellipsis":
            key[j] = Ellipsis
        elif k == "true":
            key[j] = True
        elif k == "array":
            n = shape[dims[0]]
            if count is not None:
                s = draw(st.sampled_from([(), (1,), (count,)]))
            else:
                s = _variant(draw, base)
            dt = draw(st.sampled_from([np.int64, np.int32]))
            key[j] = rng.integers(-n, n, size=s).astype(dt)
    return tuple(key)


def fg_key(key, how: int = 0, device=None):
    """The ferrograd form of a NumPy key: arrays as tensors (how=0, on
    ``device``), NumPy arrays (how=1) or nested lists (how=2, except empty arrays)."""
    out = []
    for k in key:
        if isinstance(k, np.ndarray):
            if how == 0:
                k = fg.tensor(k, device=device)
            elif how == 2 and k.size > 0 and k.ndim > 0:
                k = k.tolist()
        out.append(k)
    return tuple(out)


def _sample_getitem(draw, dtype, cap=None):
    shape = _fit(draw(shapes(0, 4, 0, 5)), cap)
    x = values(draw, shape, dtype)
    key = draw(index_keys(shape))
    return [x], {"key": key, "how": draw(st.integers(0, 2))}


def _flat_targets(shape, key) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[key]


def _sample_setitem(draw, dtype, cap=None):
    shape = _fit(draw(shapes(0, 4, 0, 5)), cap)
    x = values(draw, shape, dtype)
    key = draw(index_keys(shape))
    targets = _flat_targets(shape, key)
    if np.unique(targets).size != targets.size:
        # Repeated targets: every write stores the same value. Their gradient is
        # unspecified (each occurrence gets it), so the gradient column avoids them.
        assume(cap is None)
        vshape = ()
    else:
        rs = targets.shape
        vshape = rs[len(rs) - draw(st.integers(0, len(rs))):]
        if cap is not None and draw(st.booleans()):
            vshape = (1,) + vshape  # an extra leading 1-dim is dropped when broadcasting
    v = values(draw, vshape, dtype)
    return [x, v], {"key": key}


def _setitem_fg(x, v, key):
    y = x.clone()
    y[fg_key(key, 0, x.device)] = v
    return y


def _setitem_np(x, v, key):
    y = x.copy()
    y[key] = v
    return y


# ---------------------------------------------------------------------------
# Samplers for the named ops
# ---------------------------------------------------------------------------


def _dim(draw, nd):
    return draw(st.integers(-nd, nd - 1)) if nd else 0


def _ints(draw, lo, hi, size):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.integers(lo, hi, size=size).astype(np.int64)


def _sample_index_put(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3, 1, 5)), cap)
    x = values(draw, shape, dtype)
    k = draw(st.integers(1, len(shape)))
    acc = draw(st.booleans())
    n = draw(st.integers(0, 6))
    idx = tuple(_ints(draw, -shape[d], shape[d], (n,)) for d in range(k))
    if not acc:
        # Unique target rows, so the order of writes does not matter.
        flat = np.ravel_multi_index(tuple(i % shape[d] for d, i in enumerate(idx)), shape[:k])
        _, first = np.unique(flat, return_index=True)
        idx = tuple(i[np.sort(first)] for i in idx)
    vshape = (len(idx[0]),) + tuple(shape[k:])
    v = values(draw, vshape, dtype)
    return [x, v], {"indices": idx, "accumulate": acc}


def _index_put_fg(x, v, indices, accumulate):
    y = x.clone()
    y.index_put_(tuple(fg.tensor(i, device=x.device) for i in indices), v, accumulate=accumulate)
    return y


def _index_put_np(x, v, indices, accumulate):
    y = x.copy()
    if accumulate:
        np.add.at(y, indices, v.astype(y.dtype))
    else:
        y[indices] = v
    return y


def _sample_x(min_dims=0, max_dims=4):
    def sample(draw, dtype):
        return [values(draw, draw(shapes(min_dims, max_dims)), dtype)], {}
    return sample


def _sample_masked_select(draw, dtype, cap=None):
    shape = _fit(draw(shapes(0, 3)), cap)
    x = values(draw, shape, dtype)
    mshape = _variant(draw, shape)
    if draw(st.booleans()):
        x, mshape = values(draw, _variant(draw, shape), dtype), shape
    mask = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(mshape) < 0.5
    return [x], {"mask": mask}


def _masked_select_np(x, mask):
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _sample_index_select(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3)), cap)
    x = values(draw, shape, dtype)
    d = _dim(draw, len(shape))
    n = shape[d]
    m = draw(st.integers(0, 6)) if n else 0
    return [x], {"dim": d, "index": _ints(draw, -n, max(n, 1), (m,)) if n else np.zeros(0, np.int64)}


def _sample_gather(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3)), cap)
    x = values(draw, shape, dtype)
    d = _dim(draw, len(shape))
    ishape = [draw(st.integers(0, s)) for s in shape]
    ishape[d] = draw(st.integers(0, 4)) if shape[d] else 0
    return [x], {"dim": d, "index": _ints(draw, 0, max(shape[d], 1), ishape)}


def _gather_np(x, dim, index):
    sub = tuple(slice(0, s) if k != dim % x.ndim else slice(None) for k, s in enumerate(index.shape))
    return np.take_along_axis(x[sub], index, axis=dim)


def _sample_take_along_dim(draw, dtype, cap=None):
    if draw(st.booleans()):
        shape = _fit(draw(shapes(0, 3)), cap)
        x = values(draw, shape, dtype)
        n = int(np.prod(shape))
        ish = draw(shapes(0, 2))
        idx = _ints(draw, 0, n, ish) if n else np.zeros((0,), np.int64)
        return [x], {"indices": idx, "dim": None}
    shape = _fit(draw(shapes(1, 3, 1)), cap)
    d = _dim(draw, len(shape))
    xs, ish = list(_variant_full(draw, shape)), list(_variant_full(draw, shape))
    xs[d] = shape[d]
    ish[d] = draw(st.integers(0, 4))
    x = values(draw, tuple(xs), dtype)
    return [x], {"indices": _ints(draw, 0, shape[d], ish), "dim": d}


def _variant_full(draw, shape):
    return tuple(1 if draw(st.booleans()) else s for s in shape)


def _take_along_np(x, indices, dim):
    if dim is None:
        return np.take_along_axis(x.ravel(), indices.ravel(), 0)
    return np.take_along_axis(x, indices, axis=dim)


def _sample_scatter(unique: bool, cap=None):
    def sample(draw, dtype):
        shape = _fit(draw(shapes(1, 3)), cap)
        x = values(draw, shape, dtype)
        d = _dim(draw, len(shape))
        n = shape[d]
        ishape = [draw(st.integers(0, s)) for s in shape]
        ishape[d] = draw(st.integers(0, n if unique else 5)) if n else 0
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if unique:
            # A distinct target per line: the first entries of random permutations along d.
            r = rng.random([n if k == d % len(shape) else s for k, s in enumerate(ishape)])
            idx = np.argsort(r, axis=d)[tuple(slice(0, s) for s in ishape)]
        else:
            idx = rng.integers(0, max(n, 1), size=ishape)
        sshape = tuple(s + draw(st.integers(0, 1)) for s in ishape)
        src = values(draw, sshape, dtype)
        return [x, src], {"dim": d, "index": idx.astype(np.int64)}
    return sample


def _scatter_np(accumulate):
    def f(x, src, dim, index):
        y = x.copy()
        coords = list(np.indices(index.shape, sparse=False))
        coords[dim % x.ndim] = index
        vals = src[tuple(slice(0, s) for s in index.shape)].astype(y.dtype)
        if accumulate:
            np.add.at(y, tuple(coords), vals)
        else:
            y[tuple(coords)] = vals
        return y
    return f


def _inplace(method):
    def f(x, src, dim, index):
        y = x.clone()
        r = getattr(y, method)(dim, fg.tensor(index, device=x.device), src)
        assert r is y
        return y
    return f


def _sample_cat(stack: bool, cap=None):
    def sample(draw, dtype):
        shape = _fit(draw(shapes(1, 3)), cap)
        d = _dim(draw, len(shape) + (1 if stack else 0))
        k = draw(st.integers(1, 3))
        xs = []
        for _ in range(k):
            s = list(shape)
            if not stack:
                s[d] = draw(st.integers(0, 3))
            xs.append(values(draw, tuple(s), dtype))
        return xs, {"dim": d}
    return sample


def _flat_cat(pieces):
    return fg.cat([p.reshape(-1) for p in pieces]) if pieces else None


def _np_flat_cat(pieces):
    return np.concatenate([p.ravel() for p in pieces])


def _split_sizes(n, arg):
    if isinstance(arg, int):
        if arg == 0:
            return [0]
        k = max(-(-n // arg), 1)
        return [min(arg, n - i * arg) for i in range(k)]
    return list(arg)


def _sample_split(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3)), cap)
    x = values(draw, shape, dtype)
    d = _dim(draw, len(shape))
    n = shape[d]
    if draw(st.booleans()):
        arg = draw(st.integers(1, 4)) if n else draw(st.integers(0, 3))
    else:
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
        arg = [b - a for a, b in zip([0] + cuts, cuts + [n], strict=True)]
    return [x], {"arg": arg, "dim": d}


def _split_fg(x, arg, dim):
    pieces = fg.split(x, arg, dim)
    sizes = _split_sizes(x.shape[dim], arg)
    assert [p.shape[dim] for p in pieces] == sizes
    return _flat_cat(pieces)


def _split_np(x, arg, dim):
    sizes = _split_sizes(x.shape[dim], arg)
    return _np_flat_cat(np.split(x, np.cumsum(sizes)[:-1], axis=dim))


def _sample_chunk(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3)), cap)
    return [values(draw, shape, dtype)], {"chunks": draw(st.integers(1, 4)), "dim": _dim(draw, len(shape))}


def _chunk_np(x, chunks, dim):
    n = x.shape[dim]
    size = -(-n // chunks)
    return _split_np(x, size if n else [0] * chunks, dim)


def _sample_unbind(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3, 1)), cap)
    return [values(draw, shape, dtype)], {"dim": _dim(draw, len(shape))}


def _sample_diagonal(draw, dtype, cap=None):
    shape = _fit(draw(shapes(2, 4)), cap)
    nd = len(shape)
    d1 = _dim(draw, nd)
    d2 = draw(st.sampled_from([d for d in range(nd) if d != d1 % nd]))
    return [values(draw, shape, dtype)], {"offset": draw(st.integers(-3, 3)), "dim1": d1, "dim2": d2}


def _sample_diag(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 2)), cap)
    return [values(draw, shape, dtype)], {"k": draw(st.integers(-3, 3))}


def _sample_repeat(draw, dtype, cap=None):
    shape = _fit(draw(shapes(0, 3)), cap)
    reps = tuple(draw(st.integers(0, 3)) for _ in range(len(shape) + draw(st.integers(0, 2))))
    return [values(draw, shape, dtype)], {"reps": reps}


def _sample_roll(draw, dtype, cap=None):
    shape = _fit(draw(shapes(0, 3)), cap)
    x = values(draw, shape, dtype)
    if not shape or draw(st.booleans()):
        return [x], {"shifts": draw(st.integers(-7, 7)), "dims": None}
    k = draw(st.integers(1, len(shape)))
    dims = tuple(draw(st.permutations(range(len(shape))))[:k])
    shifts = tuple(draw(st.integers(-7, 7)) for _ in dims)
    return [x], {"shifts": shifts, "dims": dims}


def _sample_pad(draw, dtype, cap=None):
    shape = _fit(draw(shapes(1, 3, 0, 5)), cap)
    x = values(draw, shape, dtype)
    mode = draw(st.sampled_from(["constant", "constant", "reflect", "replicate", "circular"]))
    k = draw(st.integers(1, len(shape)))
    pads = []
    for i in range(k):
        n = shape[len(shape) - 1 - i]
        for _ in range(2):
            if mode == "constant":
                pads.append(draw(st.integers(-n, 3)))
            elif mode == "reflect":
                pads.append(draw(st.integers(0, max(n - 1, 0))))
            elif mode == "circular":
                pads.append(draw(st.integers(0, n)))
            else:
                pads.append(draw(st.integers(0, 3)) if n else 0)
        if mode == "constant" and n + pads[-1] + pads[-2] < 0:
            pads[-1] = pads[-2] = 0
    value = draw(st.sampled_from([0, 1] if dtype == "bool" else [0, 1, -2])) if mode == "constant" else 0
    return [x], {"pad": tuple(pads), "mode": mode, "value": value}


def _pad_np(x, pad, mode, value):
    nd = x.ndim
    widths = [[0, 0] for _ in range(nd)]
    for i in range(len(pad) // 2):
        widths[nd - 1 - i] = [pad[2 * i], pad[2 * i + 1]]
    crop = tuple(slice(max(-a, 0), x.shape[d] - max(-b, 0)) for d, (a, b) in enumerate(widths))
    x = x[crop]
    w = [(max(a, 0), max(b, 0)) for a, b in widths]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    if mode == "constant":
        return np.pad(x, w, mode="constant", constant_values=np.array(value).astype(x.dtype))
    return np.pad(x, w, mode=np_mode)


def _grad_sample_repeat(draw, dtype):
    """Small inputs and repeats (the analytic Jacobian backpropagates once per output element)."""
    shape = _fit(draw(shapes(0, 3)), 12)
    reps = tuple(draw(st.integers(0, 2)) for _ in range(len(shape) + draw(st.integers(0, 1))))
    return [values(draw, shape, dtype)], {"reps": reps}


def _sample_tri(draw, dtype, cap=None):
    shape = _fit(draw(shapes(2, 4)), cap)
    return [values(draw, shape, dtype)], {"diagonal": draw(st.integers(-4, 4))}


SPECS: list[OpSpec] = [
    OpSpec("getitem", lambda x, key, how: x[fg_key(key, how, x.device)], lambda x, key, how: x[key],
           _sample_getitem, dtypes=ALL, ref_in_dtype=True, max_examples=60,
           grad_sample=partial(_sample_getitem, cap=40), grad_examples=15),
    OpSpec("setitem", _setitem_fg, _setitem_np, _sample_setitem, dtypes=ALL, ref_in_dtype=True,
           max_examples=60, grad_sample=partial(_sample_setitem, cap=40), grad_examples=15),
    OpSpec("index_put_", _index_put_fg, _index_put_np, _sample_index_put, dtypes=ALL,
           ref_in_dtype=True, tol={"float16": (5e-3, 5e-3), "bfloat16": (3e-2, 3e-2)},
           grad_sample=partial(_sample_index_put, cap=30), grad_examples=10),
    OpSpec("nonzero", lambda x: x.nonzero(), lambda x: np.argwhere(x), _sample_x(), dtypes=ALL,
           ref_in_dtype=True),
    OpSpec("masked_select", lambda x, mask: x.masked_select(fg.tensor(mask, device=x.device)), _masked_select_np,
           _sample_masked_select, dtypes=ALL, ref_in_dtype=True,
           grad_sample=partial(_sample_masked_select, cap=40)),
    OpSpec("index_select", lambda x, dim, index: fg.index_select(x, dim, fg.tensor(index, device=x.device)),
           lambda x, dim, index: np.take(x, index, axis=dim), _sample_index_select, dtypes=ALL,
           ref_in_dtype=True, grad_sample=partial(_sample_index_select, cap=40)),
    OpSpec("gather", lambda x, dim, index: fg.gather(x, dim, fg.tensor(index, device=x.device)), _gather_np,
           _sample_gather, dtypes=ALL, ref_in_dtype=True, grad_sample=partial(_sample_gather, cap=40)),
    OpSpec("take_along_dim", lambda x, indices, dim: fg.take_along_dim(x, fg.tensor(indices, device=x.device), dim),
           _take_along_np, _sample_take_along_dim, dtypes=ALL, ref_in_dtype=True,
           grad_sample=partial(_sample_take_along_dim, cap=40)),
    OpSpec("scatter_add", lambda x, src, dim, index: fg.scatter_add(x, dim, fg.tensor(index, device=x.device), src),
           _scatter_np(True), _sample_scatter(False), dtypes=ALL, ref_in_dtype=True,
           tol={"float16": (5e-3, 5e-3), "bfloat16": (3e-2, 3e-2)},
           grad_sample=_sample_scatter(False, cap=20)),
    OpSpec("scatter_add_", _inplace("scatter_add_"), _scatter_np(True), _sample_scatter(False),
           dtypes=ALL, ref_in_dtype=True, tol={"float16": (5e-3, 5e-3), "bfloat16": (3e-2, 3e-2)},
           grad_sample=_sample_scatter(False, cap=20)),
    OpSpec("scatter", lambda x, src, dim, index: fg.scatter(x, dim, fg.tensor(index, device=x.device), src),
           _scatter_np(False), _sample_scatter(True), dtypes=ALL, ref_in_dtype=True,
           grad_sample=_sample_scatter(True, cap=20)),
    OpSpec("scatter_", _inplace("scatter_"), _scatter_np(False), _sample_scatter(True), dtypes=ALL,
           ref_in_dtype=True, grad_sample=_sample_scatter(True, cap=20)),
    OpSpec("cat", lambda *xs, dim: fg.cat(list(xs), dim), lambda *xs, dim: np.concatenate(xs, dim),
           _sample_cat(False), dtypes=ALL, ref_in_dtype=True, grad_sample=_sample_cat(False, cap=12)),
    OpSpec("stack", lambda *xs, dim: fg.stack(list(xs), dim), lambda *xs, dim: np.stack(xs, dim),
           _sample_cat(True), dtypes=ALL, ref_in_dtype=True, grad_sample=_sample_cat(True, cap=16)),
    OpSpec("split", _split_fg, _split_np, _sample_split, dtypes=ALL, ref_in_dtype=True, view_check=False,
           grad_sample=partial(_sample_split, cap=40)),
    OpSpec("chunk", lambda x, chunks, dim: _flat_cat(fg.chunk(x, chunks, dim)), _chunk_np,
           _sample_chunk, dtypes=ALL, ref_in_dtype=True, view_check=False,
           grad_sample=partial(_sample_chunk, cap=40)),
    OpSpec("unbind", lambda x, dim: fg.stack(list(fg.unbind(x, dim))),
           lambda x, dim: np.stack([np.take(x, i, axis=dim) for i in range(x.shape[dim])]),
           _sample_unbind, dtypes=ALL, ref_in_dtype=True, view_check=False,
           grad_sample=partial(_sample_unbind, cap=40)),
    OpSpec("diagonal", lambda x, offset, dim1, dim2: fg.diagonal(x, offset, dim1, dim2),
           lambda x, offset, dim1, dim2: np.diagonal(x, offset, dim1, dim2), _sample_diagonal,
           dtypes=ALL, ref_in_dtype=True, grad_sample=partial(_sample_diagonal, cap=40)),
    OpSpec("diag", lambda x, k: fg.diag(x, k), lambda x, k: np.diag(x, k), _sample_diag, dtypes=ALL,
           ref_in_dtype=True, grad_sample=partial(_sample_diag, cap=12)),
    OpSpec("repeat", lambda x, reps: x.repeat(*reps) if reps else x.repeat(()),
           lambda x, reps: np.tile(x, reps) if reps else x.copy(), _sample_repeat, dtypes=ALL,
           ref_in_dtype=True, grad_sample=_grad_sample_repeat),
    OpSpec("roll", lambda x, shifts, dims: fg.roll(x, shifts, dims),
           lambda x, shifts, dims: np.roll(x, shifts, axis=dims), _sample_roll, dtypes=ALL,
           ref_in_dtype=True, grad_sample=partial(_sample_roll, cap=40)),
    OpSpec("pad", lambda x, pad, mode, value: fg.nn.functional.pad(x, pad, mode, value), _pad_np,
           _sample_pad, dtypes=ALL, ref_in_dtype=True, grad_sample=partial(_sample_pad, cap=30),
           grad_examples=10),
    OpSpec("tril", lambda x, diagonal: fg.tril(x, diagonal), lambda x, diagonal: np.tril(x, diagonal),
           _sample_tri, dtypes=ALL, ref_in_dtype=True, grad_sample=partial(_sample_tri, cap=40)),
    OpSpec("triu", lambda x, diagonal: fg.triu(x, diagonal), lambda x, diagonal: np.triu(x, diagonal),
           _sample_tri, dtypes=ALL, ref_in_dtype=True, grad_sample=partial(_sample_tri, cap=40)),
]
