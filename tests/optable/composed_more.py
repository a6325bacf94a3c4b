"""Op-table specs for the functions of ``ferrograd._surface_more`` (``composed=True``):
elementwise math (``fmod``, ``exp2``, ``log10``, ``sinh``, ``cosh``, ``erfc``,
``fmax``/``fmin``, ``copysign``), joining and rearranging (``hstack``, ``rot90``,
``movedim``, ...), indexing (``take``, ``index_add``, ``masked_scatter``, ``argwhere``),
reductions (``norm``, ``quantile``/``nanquantile``, ``mode``) and ``unique``.

Each runs through every column like a registry op. References are float64 NumPy/SciPy
functions (``np.fmod``, ``np.quantile``, ``np.rot90``, ``scipy.special.erfc``, ...) or a
loop over PyTorch's documented definition (``mode``, ``index_add``, ``masked_scatter``),
never the composition itself. Index arrays and masks travel in the kwargs under names
the drivers do not read as indexing keys (``idx``, ``m``); flags as 0/1 ints.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import scipy.special as sp
from hypothesis import strategies as st

from ._spec import (
    ALL,
    FLOATS,
    INTS,
    NUMERIC,
    OpSpec,
    broadcastable_pair,
    shapes,
    values,
    with_specials,
)

TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
SUM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}
F32 = ("float32", "float64")


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _distinct(draw, shape, lo=-2.0, step=0.37) -> np.ndarray:
    """Float64 values with no ties (a permutation of a grid), for gradient checks of order statistics."""
    rng = _rng(draw)
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * step + lo).astype(np.float64)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------


def _unary(lo, hi, specials=True):
    def sample(draw, dtype):
        a = values(draw, draw(shapes(0, 3)), dtype, lo, hi)
        return [with_specials(draw, a, dtype) if specials else a], {}

    return sample


def _grad_unary(lo, hi):
    def sample(draw, dtype):
        return [values(draw, draw(shapes(0, 2, 1, 4)), "float64", lo, hi)], {}

    return sample


def _binary(lo=-3.0, hi=3.0, specials=True, nonzero_b=False):
    def sample(draw, dtype):
        sa, sb = broadcastable_pair(draw, 0, 3)
        a, b = values(draw, sa, dtype, lo, hi), values(draw, sb, dtype, lo, hi)
        if nonzero_b and dtype in INTS:
            b = np.where(b == 0, 1, b).astype(b.dtype)
        if specials:
            a, b = with_specials(draw, a, dtype), with_specials(draw, b, dtype)
        return [a, b], {}

    return sample


def _fmod_grad_sample(draw, dtype):
    rng = _rng(draw)
    shape = draw(shapes(0, 2, 1, 3))
    b = rng.uniform(0.8, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    # quotients k + f with |f| in (0.15, 0.85): away from fmod's jumps at whole quotients
    q = rng.integers(-3, 4, size=shape) + rng.uniform(0.15, 0.85, size=shape) * rng.choice(
        [-1, 1], size=shape
    )
    return [np.asarray(q * b, np.float64), np.asarray(b, np.float64)], {}


def _copysign_grad_sample(draw, dtype):
    rng = _rng(draw)
    sa, sb = broadcastable_pair(draw, 0, 2, 3)
    a = rng.uniform(0.3, 2.0, size=sa) * rng.choice([-1.0, 1.0], size=sa)
    b = rng.uniform(0.5, 2.0, size=sb) * rng.choice([-1.0, 1.0], size=sb)
    return [np.asarray(a), np.asarray(b)], {}


def _fext_np(pick):
    def ref(a, b):
        return pick(a, b)

    return ref


SPECS: list[OpSpec] = [
    OpSpec(
        "fmod",
        lambda a, b: fg.fmod(a, b),
        np.fmod,
        _binary(nonzero_b=True),
        dtypes=NUMERIC,
        tol=TOL,
        ref_in_dtype=False,
        composed=True,
        grad_sample=_fmod_grad_sample,
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "exp2",
        lambda a: fg.exp2(a),
        np.exp2,
        _unary(-5.0, 5.0),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        grad_sample=_grad_unary(-3.0, 3.0),
    ),
    OpSpec(
        "log10",
        lambda a: fg.log10(a),
        np.log10,
        _unary(0.01, 100.0),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        grad_sample=_grad_unary(0.1, 10.0),
    ),
    OpSpec(
        "sinh",
        lambda a: fg.sinh(a),
        np.sinh,
        _unary(-10.0, 10.0),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        grad_sample=_grad_unary(-3.0, 3.0),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "cosh",
        lambda a: fg.cosh(a),
        np.cosh,
        _unary(-10.0, 10.0),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        grad_sample=_grad_unary(-3.0, 3.0),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "erfc",
        lambda a: fg.erfc(a),
        sp.erfc,
        _unary(-4.0, 9.0),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        grad_sample=_grad_unary(-2.0, 5.0),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "fmax",
        lambda a, b: fg.fmax(a, b),
        _fext_np(np.fmax),
        _binary(),
        dtypes=NUMERIC,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "fmin",
        lambda a, b: fg.fmin(a, b),
        _fext_np(np.fmin),
        _binary(),
        dtypes=NUMERIC,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "copysign",
        lambda a, b: fg.copysign(a, b),
        np.copysign,
        _binary(),
        dtypes=NUMERIC,
        composed=True,
        grad_sample=_copysign_grad_sample,
        grad_snap=False,
        out_dtype=lambda dt: dt if dt in FLOATS else "float32",
    ),
]


# ---------------------------------------------------------------------------
# Joining and rearranging
# ---------------------------------------------------------------------------


def _stack_sample(kind):
    def sample(draw, dtype):
        nd = draw(st.integers(0, 3))
        base = list(draw(shapes(nd, nd, 1, 3)))
        k = draw(st.integers(1, 3))
        axis = {"hstack": 0 if nd <= 1 else 1, "vstack": 0, "dstack": 2, "column_stack": 1}[kind]
        arrays = []
        for _ in range(k):
            s = list(base)
            if kind == "hstack" and nd >= 1:
                s[axis] = draw(st.integers(0, 3))
            elif kind == "vstack" and nd >= 2:
                s[0] = draw(st.integers(0, 3))
            elif kind == "dstack" and nd >= 3:
                s[2] = draw(st.integers(0, 3))
            elif kind == "column_stack" and nd == 2:
                s[1] = draw(st.integers(0, 3))
            arrays.append(values(draw, tuple(s), dtype))
        if kind == "column_stack" and nd > 2:
            arrays = [a.reshape(a.shape[0], -1) for a in arrays]
        return arrays, {}

    return sample


def _rot90_sample(draw, dtype):
    shape = draw(shapes(2, 4, 0, 4))
    nd = len(shape)
    d0 = draw(st.integers(-nd, nd - 1))
    d1 = draw(st.integers(-nd, nd - 1).filter(lambda d: d % nd != d0 % nd))
    return [values(draw, shape, dtype)], {"k": draw(st.integers(-5, 5)), "dims": [d0, d1]}


def _movedim_sample(draw, dtype):
    shape = draw(shapes(0, 4, 0, 4))
    nd = len(shape)
    rng = _rng(draw)
    if nd == 0:
        return [values(draw, shape, dtype)], {"source": [], "destination": []}
    k = int(rng.integers(1, nd + 1))
    src = [int(d) - (nd if rng.random() < 0.3 else 0) for d in rng.permutation(nd)[:k]]
    dst = [int(d) for d in rng.permutation(nd)[:k]]
    if k == 1 and draw(st.booleans()):
        return [values(draw, shape, dtype)], {"source": src[0], "destination": dst[0]}
    return [values(draw, shape, dtype)], {"source": src, "destination": dst}


def _unflatten_sample(draw, dtype):
    shape = list(draw(shapes(1, 3, 0, 3)))
    d = draw(st.integers(0, len(shape) - 1))
    parts = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 3)))]
    shape[d] = int(np.prod(parts)) * draw(st.sampled_from([1, 0]) if draw(st.booleans()) else st.just(1))
    sizes = list(parts)
    if shape[d] == 0:
        sizes[0] = 0
    elif draw(st.booleans()):
        sizes[draw(st.integers(0, len(sizes) - 1))] = -1
    return [values(draw, tuple(shape), dtype)], {
        "dim": d - (len(shape) if draw(st.booleans()) else 0),
        "sizes": sizes,
    }


def _unflatten_np(a, dim, sizes):
    d = dim % a.ndim
    known = int(np.prod([s for s in sizes if s != -1]))
    sizes = [a.shape[d] // known if s == -1 else s for s in sizes]  # from the dim alone
    return a.reshape(a.shape[:d] + tuple(sizes) + a.shape[d + 1 :])


def _cart_sample(draw, dtype):
    k = draw(st.integers(1, 3))
    return [values(draw, (draw(st.integers(0, 3)),), dtype) for _ in range(k)], {}


def _cart_np(*arrays):
    if len(arrays) == 1:
        return arrays[0]
    grids = np.meshgrid(*arrays, indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], 1)


def _bt_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw, 0, 3)
    return [values(draw, sa, dtype), values(draw, sb, dtype)], {}


def _flip_sample(min_dims):
    def sample(draw, dtype):
        return [values(draw, draw(shapes(min_dims, 4, 0, 4)), dtype)], {}

    return sample


for _kind, _np in (
    ("hstack", np.hstack),
    ("vstack", np.vstack),
    ("dstack", np.dstack),
    ("column_stack", np.column_stack),
):
    SPECS.append(
        OpSpec(
            _kind,
            (lambda fn: lambda *ts: fn(list(ts)))(getattr(fg, _kind)),
            (lambda fn: lambda *arrays: fn(list(arrays)))(_np),
            _stack_sample(_kind),
            dtypes=ALL,
            ref_in_dtype=True,
            composed=True,
        )
    )

SPECS += [
    OpSpec(
        "fliplr",
        lambda a: fg.fliplr(a),
        np.fliplr,
        _flip_sample(2),
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "flipud",
        lambda a: fg.flipud(a),
        np.flipud,
        _flip_sample(1),
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "rot90",
        lambda a, k, dims: fg.rot90(a, k, dims),
        lambda a, k, dims: np.rot90(a, k, dims),
        _rot90_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "movedim",
        lambda a, source, destination: fg.movedim(a, source, destination),
        lambda a, source, destination: np.moveaxis(a, source, destination),
        _movedim_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "unflatten",
        lambda a, dim, sizes: fg.unflatten(a, dim, sizes),
        _unflatten_np,
        _unflatten_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "cartesian_prod",
        lambda *ts: fg.cartesian_prod(*ts),
        _cart_np,
        _cart_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "broadcast_tensors",
        lambda a, b: fg.broadcast_tensors(a, b),
        lambda a, b: tuple(np.broadcast_arrays(a, b)),
        _bt_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "atleast_3d",
        lambda a: fg.atleast_3d(a),
        np.atleast_3d,
        _flip_sample(0),
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
]


# ---------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------


def _take_sample(draw, dtype):
    shape = draw(shapes(0, 3, 1, 4))
    n = int(np.prod(shape))
    rng = _rng(draw)
    ishape = draw(shapes(0, 2, 0, 4))
    return [values(draw, shape, dtype)], {"idx": rng.integers(-n, n, size=ishape).astype(np.int64)}


def _index_add_sample(draw, dtype, grad=False):
    shape = list(draw(shapes(1, 3, 1, 4)))
    d = draw(st.integers(0, len(shape) - 1))
    rng = _rng(draw)
    k = draw(st.integers(0 if not grad else 1, 5))
    idx = rng.integers(0, shape[d], size=k).astype(np.int64)
    sshape = list(shape)
    sshape[d] = k
    dt = "float64" if grad else dtype
    alpha = draw(st.sampled_from([1, 2, -1])) if dtype in INTS else draw(st.sampled_from([1, 2, -1, 0.5]))
    return [values(draw, tuple(shape), dt), values(draw, tuple(sshape), dt)], {
        "dim": d - (len(shape) if draw(st.booleans()) else 0),
        "idx": idx,
        "alpha": alpha,
    }


def _index_add_np(a, src, dim, idx, alpha):
    out = np.array(a, copy=True)
    d = dim % a.ndim
    om, sm = np.moveaxis(out, d, 0), np.moveaxis(src, d, 0)
    for j, i in enumerate(idx):
        om[i] = om[i] + alpha * sm[j]
    return out


def _masked_scatter_sample(draw, dtype, grad=False):
    shape = draw(shapes(0, 3, 0 if not grad else 1, 4))
    rng = _rng(draw)
    mshape = shape[int(rng.integers(0, len(shape) + 1)) :]
    mshape = tuple(s if rng.random() < 0.7 else 1 for s in mshape)
    m = rng.random(mshape) < 0.5
    need = int(np.broadcast_to(m, shape).sum())
    k = need + int(rng.integers(0, 3))
    if grad:
        k = max(k, 1)
    dt = "float64" if grad else dtype
    return [values(draw, shape, dt), values(draw, (k,), dt)], {"m": np.asarray(m)}


def _masked_scatter_np(a, src, m):
    out = np.array(a, copy=True)
    mb = np.broadcast_to(m, a.shape)
    out[mb] = src.reshape(-1)[: int(mb.sum())]
    return out


SPECS += [
    OpSpec(
        "take",
        lambda a, idx: fg.take(a, fg.tensor(idx, device=a.device)),
        lambda a, idx: np.take(a, idx),
        _take_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "index_add",
        lambda a, s, dim, idx, alpha: fg.index_add(a, dim, fg.tensor(idx, device=a.device), s, alpha=alpha),
        _index_add_np,
        _index_add_sample,
        dtypes=NUMERIC,
        tol=SUM_TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _index_add_sample(draw, "float64", grad=True),
    ),
    OpSpec(
        "masked_scatter",
        lambda a, s, m: fg.masked_scatter(a, fg.tensor(m, device=a.device), s),
        _masked_scatter_np,
        _masked_scatter_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
        grad_sample=lambda draw, dtype: _masked_scatter_sample(draw, "float64", grad=True),
    ),
    OpSpec(
        "argwhere",
        lambda a: fg.argwhere(a),
        np.argwhere,
        lambda draw, dtype: ([values(draw, draw(shapes(0, 3)), dtype, -1.0, 1.0)], {}),
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
        data_dependent=True,  # one row per nonzero element
    ),
]


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

_NORM_PS = ["fro", None, 1, 2, 3, 0.5, np.inf, -np.inf, 0]


def _norm_sample(draw, dtype, grad=False):
    shape = draw(shapes(0 if not grad else 1, 3, 0 if not grad else 1, 4))
    nd = len(shape)
    p = draw(st.sampled_from(_NORM_PS))
    rng = _rng(draw)
    kind = draw(
        st.sampled_from(["none", "int", "pair"] if nd >= 2 else (["none", "int"] if nd else ["none"]))
    )
    if kind == "int":
        dim = int(rng.integers(-nd, nd))
    elif kind == "pair":
        a, b = rng.permutation(nd)[:2]
        dim = [int(a), int(b)]
    else:
        dim = None
    if grad:
        x = _distinct(draw, shape, 0.3, 0.41) * rng.choice([-1.0, 1.0], size=shape)
        if p == 0:
            p = 2
    else:
        x = values(draw, shape, dtype)
    return [x], {"p": p, "dim": dim, "keepdim": int(draw(st.booleans()))}


def _norm_np(a, p, dim, keepdim):
    axis = None if dim is None else (dim if isinstance(dim, int) else tuple(dim))
    x = np.abs(a)
    if p in ("fro", None):
        p = 2
    with np.errstate(divide="ignore"):
        if p == np.inf:
            return np.max(x, axis=axis, keepdims=bool(keepdim), initial=0.0)
        if p == -np.inf:
            return np.min(x, axis=axis, keepdims=bool(keepdim), initial=np.inf)
        if p == 0:
            return np.sum(x != 0, axis=axis, keepdims=bool(keepdim)).astype(np.float64)
        return np.sum(x**p, axis=axis, keepdims=bool(keepdim)) ** (1.0 / p)


_QS = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
_INTERP = ["linear", "lower", "higher", "midpoint", "nearest"]


def _quantile_sample(nan_ok):
    def sample(draw, dtype, grad=False):
        shape = draw(shapes(0, 3, 1, 5))
        nd = len(shape)
        dim = draw(st.sampled_from([None] + list(range(-nd, nd))))
        if grad:
            x = _distinct(draw, shape)
        else:
            # few distinct values (ties), NaN now and then
            x = np.asarray(_rng(draw).integers(-3, 4, size=shape)).astype(dtype) * 0.5
            if nan_ok and draw(st.booleans()) and x.size:
                x = np.array(x, copy=True)
                x[_rng(draw).random(shape) < 0.3] = np.nan
        if draw(st.booleans()):
            q = draw(st.sampled_from(_QS))
        else:
            q = draw(st.lists(st.sampled_from(_QS), min_size=0, max_size=3))
        return [x], {
            "q": q,
            "dim": dim,
            "keepdim": int(draw(st.booleans())),
            "interpolation": draw(st.sampled_from(_INTERP)),
        }

    return sample


def _quantile_fg(name):
    fn = getattr(fg, name)

    def run(a, q, dim, keepdim, interpolation):
        qq = fg.tensor(q, dtype=a.dtype, device=a.device) if isinstance(q, list) else q
        return fn(a, qq, dim, bool(keepdim), interpolation=interpolation)

    return run


def _quantile_np(name):
    fn = getattr(np, name)

    def ref(a, q, dim, keepdim, interpolation):
        import warnings

        if isinstance(q, list) and not q:
            shape = np.quantile(np.zeros(a.shape), 0.5, axis=dim, keepdims=bool(keepdim)).shape
            return np.zeros((0,) + shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.asarray(fn(a, q, axis=dim, keepdims=bool(keepdim), method=interpolation))

    return ref


def _mode_sample(draw, dtype, grad=False):
    shape = draw(shapes(0, 3, 1, 5))
    nd = len(shape)
    dim = draw(st.integers(-max(nd, 1), max(nd, 1) - 1))
    if grad:
        x = _distinct(draw, shape)
    elif dtype == "bool":
        x = np.asarray(_rng(draw).random(shape) < 0.5)
    else:
        x = np.asarray(_rng(draw).integers(-2, 3, size=shape)).astype(
            dtype if dtype != "bfloat16" else "float32"
        )
    return [x], {"dim": dim, "keepdim": int(draw(st.booleans()))}


def _mode_np(a, dim, keepdim):
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    moved = np.moveaxis(a, dim, -1)
    vals = np.empty(moved.shape[:-1], a.dtype)
    idx = np.empty(moved.shape[:-1], np.int64)
    for pos in np.ndindex(moved.shape[:-1]):
        row = list(moved[pos])
        best = min(set(row), key=lambda v: (-row.count(v), v))
        vals[pos] = best
        idx[pos] = max(i for i, v in enumerate(row) if v == best)
    if keepdim:
        vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
    return vals, idx


SPECS += [
    OpSpec(
        "norm",
        lambda a, p, dim, keepdim: fg.norm(a, p, dim, bool(keepdim)),
        _norm_np,
        _norm_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _norm_sample(draw, "float64", grad=True),
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "quantile",
        _quantile_fg("quantile"),
        _quantile_np("quantile"),
        _quantile_sample(True),
        dtypes=F32,
        composed=True,
        grad_sample=lambda draw, dtype: _quantile_sample(False)(draw, "float64", grad=True),
        grad_snap=False,
    ),
    OpSpec(
        "nanquantile",
        _quantile_fg("nanquantile"),
        _quantile_np("nanquantile"),
        _quantile_sample(True),
        dtypes=F32,
        composed=True,
        grad_sample=lambda draw, dtype: _quantile_sample(False)(draw, "float64", grad=True),
        grad_snap=False,
    ),
    OpSpec(
        "mode",
        lambda a, dim, keepdim: fg.mode(a, dim, bool(keepdim)),
        _mode_np,
        _mode_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
        out_dtype=lambda dtype: (dtype, "int64"),
        grad_sample=lambda draw, dtype: _mode_sample(draw, "float64", grad=True),
        grad_snap=False,
    ),
]


# ---------------------------------------------------------------------------
# unique (eager only)
# ---------------------------------------------------------------------------


def _unique_sample(draw, dtype):
    shape = draw(shapes(0, 3, 0, 5))
    rng = _rng(draw)
    if dtype == "bool":
        x = np.asarray(rng.random(shape) < 0.5)
    else:
        # few distinct values, so that slices repeat too
        x = np.asarray(rng.integers(-1, 2, size=shape)).astype(dtype if dtype != "bfloat16" else "float32")
    dim = None
    if len(shape) and (int(np.prod(shape)) or shape[0] == 0) and draw(st.booleans()):
        d = draw(st.integers(0, len(shape) - 1))
        others = [s for i, s in enumerate(shape) if i != d]
        if shape[d] == 0 or all(others):
            dim = d - (len(shape) if draw(st.booleans()) else 0)
    return [x], {
        "return_inverse": int(draw(st.booleans())),
        "return_counts": int(draw(st.booleans())),
        "dim": dim,
    }


def _unique_fg(name):
    fn = getattr(fg, name)

    def run(a, return_inverse, return_counts, dim):
        return fn(a, return_inverse=bool(return_inverse), return_counts=bool(return_counts), dim=dim)

    return run


def _unique_np(consecutive):
    def ref(a, return_inverse, return_counts, dim):
        if dim is None:
            slices = [np.asarray(v) for v in a.reshape(-1)]
        else:
            slices = [np.asarray(v) for v in np.moveaxis(a, dim, 0)]
        keys = [tuple(s.reshape(-1).tolist()) for s in slices]
        if consecutive:
            distinct = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]
            inverse = np.cumsum([i == 0 or k != keys[i - 1] for i, k in enumerate(keys)]) - 1
            counts = [len(list(g)) for g in _groups(keys)]
        else:
            distinct = sorted(set(keys))
            inverse = [distinct.index(k) for k in keys]
            counts = [keys.count(k) for k in distinct]
        if dim is None:
            values = np.array([k[0] for k in distinct], a.dtype)
        else:
            rest = np.moveaxis(a, dim, 0).shape[1:]
            values = np.array(distinct, a.dtype).reshape((len(distinct), *rest))
            values = np.moveaxis(values, 0, dim)
        out = [values]
        if return_inverse:
            inv = np.asarray(inverse, np.int64).reshape(-1)
            out.append(inv.reshape(a.shape) if dim is None else inv)
        if return_counts:
            out.append(np.asarray(counts, np.int64).reshape(-1))
        return out[0] if len(out) == 1 else tuple(out)

    return ref


def _groups(keys):
    out: list[list] = []
    for i, k in enumerate(keys):
        if i == 0 or k != keys[i - 1]:
            out.append([])
        out[-1].append(k)
    return out


for _name, _consecutive in (("unique", False), ("unique_consecutive", True)):
    SPECS.append(
        OpSpec(
            _name,
            _unique_fg(_name),
            _unique_np(_consecutive),
            _unique_sample,
            dtypes=ALL,
            ref_in_dtype=True,
            composed=True,
            differentiable=False,
            data_dependent=True,  # the number of distinct values
        )
    )
