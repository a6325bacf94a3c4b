"""Op-table specs for more functions composed in Python of registry ops (``composed=True``):
``embedding_bag``, ``cummax``/``cummin``, ``unfold``/``fold`` and the composed ``linalg``
functions.

Each runs through every column like a registry op. The references are float64 NumPy
loops over PyTorch's documented definitions (one bag, one window, one prefix at a
time), never the composition itself. Index arrays and flags travel in the kwargs
(flags as 0/1 ints: the drivers read a Python bool among the kwargs as a mask index).
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import ALL, FLOATS, INTS, OpSpec, shapes, values, with_specials

F = fg.nn.functional

# Compositions round at every step: the low precisions get composed.py's tolerances.
TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
SUM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}


def _exact(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` in ``dtype`` (bfloat16: float32 values exact in bfloat16, by truncation)."""
    if dtype != "bfloat16":
        return np.asarray(a).astype(dtype)
    a = np.asarray(a, np.float32)
    return (a.view(np.uint32) & 0xFFFF0000).view(np.float32)


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


# ---------------------------------------------------------------------------
# embedding_bag
# ---------------------------------------------------------------------------


def _bag_sample(draw, dtype, grad=False):
    rng = _rng(draw)
    rows = draw(st.integers(1, 5))
    dim = draw(st.integers(1 if grad else 0, 3))
    mode = draw(st.sampled_from(["sum", "mean", "max"]))
    weight = values(draw, (rows, dim), dtype)
    two_d = draw(st.booleans())
    kw = {"mode": mode, "padding_idx": None, "include_last_offset": 0, "offsets": None}
    if two_d:
        shape = (draw(st.integers(0 if not grad else 1, 3)), draw(st.integers(0 if not grad else 1, 3)))
        idx = rng.integers(0, rows, size=shape)
    else:
        n = draw(st.integers(0 if not grad else 1, 7))
        idx = rng.integers(0, rows, size=(n,))
        bags = draw(st.integers(0 if n == 0 else 1, 4))
        cuts = np.sort(rng.integers(0, n + 1, size=max(bags - 1, 0)))
        offs = np.concatenate([[0], cuts]).astype(np.int64) if bags else np.zeros((0,), np.int64)
        if draw(st.booleans()) and bags:
            kw["include_last_offset"] = 1
            offs = np.concatenate([offs, [n]]).astype(np.int64)
        kw["offsets"] = offs
    kw["input"] = idx.astype(np.int64)
    if draw(st.booleans()):
        kw["padding_idx"] = int(draw(st.integers(-rows, rows - 1)))
    arrays = [weight]
    if mode == "sum" and draw(st.booleans()):
        arrays.append(values(draw, idx.shape, dtype, 0.0, 2.0))
    if grad and mode == "max":
        # No ties between different rows: the gradient picks one row per bag and column.
        weight = (rng.permutation(rows * dim).reshape(rows, dim) * 0.37 - 1.0).astype(weight.dtype)
        arrays[0] = weight
    return arrays, kw


def _bag_fg(weight, psw=None, *, input, offsets, mode, padding_idx, include_last_offset):
    dev = weight.device
    return F.embedding_bag(
        fg.tensor(input, device=dev),
        weight,
        None if offsets is None else fg.tensor(offsets, device=dev),
        mode=mode,
        per_sample_weights=psw,
        include_last_offset=bool(include_last_offset),
        padding_idx=padding_idx,
    )


def _bag_np(weight, psw=None, *, input, offsets, mode, padding_idx, include_last_offset):
    rows, dim = weight.shape
    pad = None if padding_idx is None else padding_idx % rows
    if input.ndim == 2:
        bags = [(r * input.shape[1], (r + 1) * input.shape[1]) for r in range(input.shape[0])]
        flat = input.reshape(-1)
        w = None if psw is None else psw.reshape(-1)
    else:
        flat, w = input, psw
        o = list(offsets)
        if not include_last_offset:
            o = o + [len(flat)]
        bags = [(o[b], o[b + 1]) for b in range(len(o) - 1)]
    out = np.zeros((len(bags), dim))
    for b, (lo, hi) in enumerate(bags):
        members = [i for i in range(lo, hi) if flat[i] != pad]
        if not members:
            continue
        vecs = np.stack([weight[flat[i]] * (1.0 if w is None else w[i]) for i in members])
        out[b] = {"sum": vecs.sum(0), "mean": vecs.mean(0), "max": vecs.max(0)}[mode]
    return out


SPECS: list[OpSpec] = [
    OpSpec(
        "embedding_bag",
        _bag_fg,
        _bag_np,
        _bag_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _bag_sample(draw, "float64", grad=True),
        grad_examples=10,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]


# ---------------------------------------------------------------------------
# cummax / cummin
# ---------------------------------------------------------------------------


def _cum_sample(draw, dtype, grad=False):
    shape = draw(shapes(1 if grad else 0, 3, 1 if grad else 0, 5))
    rng = _rng(draw)
    if grad:
        # Distinct values: a tie moves the selected index under a finite-difference step.
        a = (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.41 - 1.5).astype(np.float64)
    elif dtype == "bool":
        a = np.asarray(rng.random(shape) < 0.5)
    else:
        # Few distinct values, so ties are common; NaN and infinities for the float dtypes.
        a = np.asarray(rng.integers(-2, 3, size=shape)).astype(dtype if dtype != "bfloat16" else "float32")
        a = with_specials(draw, a, dtype, p=0.15)
    dim = draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
    return [a], {"dim": dim}


def _cum_np(mode):
    def ref(a, dim):
        a = np.asarray(a)
        if a.ndim == 0:
            return a.copy(), np.zeros((), np.int64)
        moved = np.moveaxis(a, dim, -1)
        vals = np.empty_like(moved)
        idx = np.zeros(moved.shape, np.int64)
        for pos in np.ndindex(moved.shape[:-1]):
            best, at = None, 0
            for k, x in enumerate(moved[pos]):
                # PyTorch's rule: take x when it is NaN, or when the running value is not NaN
                # and x is at least as extreme (so ties give the latest index).
                if (
                    best is None
                    or np.isnan(x)
                    or (not np.isnan(best) and (x >= best if mode == "max" else x <= best))
                ):
                    best, at = x, k
                vals[pos + (k,)] = best
                idx[pos + (k,)] = at
        return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)

    return ref


for _mode in ("max", "min"):
    SPECS.append(
        OpSpec(
            f"cum{_mode}",
            getattr(fg, f"cum{_mode}"),
            _cum_np(_mode),
            _cum_sample,
            dtypes=ALL,
            ref_in_dtype=True,
            out_dtype=lambda dtype: (dtype, "int64"),
            composed=True,
            grad_sample=lambda draw, dtype: _cum_sample(draw, "float64", grad=True),
            grad_snap=False,
        )
    )


# ---------------------------------------------------------------------------
# unfold / fold: one window at a time
# ---------------------------------------------------------------------------


def _geom_sample(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    # Spatial sizes at least one dilated kernel (less padding) so some block fits.
    size = tuple(max(1, d[i] * (k[i] - 1) + 1 - 2 * p[i]) + draw(st.integers(0, 2)) for i in range(2))
    kw = {
        "kernel_size": k if draw(st.booleans()) else k[0],
        "dilation": d,
        "padding": p,
        "stride": s,
    }
    if isinstance(kw["kernel_size"], int):
        k = (k[0], k[0])
        size = tuple(max(size[i], d[i] * (k[i] - 1) + 1 - 2 * p[i], 1) for i in range(2))
    return k, d, p, s, size, kw


def _windows(size, k, d, p, s):
    """(block row, block col) counts and, per (ki, kj), the padded-plane start of each block."""
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    return (hp, wp), ((hp - d[0] * (k[0] - 1) - 1) // s[0] + 1, (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1)


def _unfold_sample(draw, dtype):
    k, d, p, s, size, kw = _geom_sample(draw)
    lead = (draw(st.integers(0, 2)),) if draw(st.booleans()) else ()
    x = values(draw, (*lead, draw(st.integers(1, 2)), *size), dtype)
    return [x], kw


def _np_pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _unfold_np(x, kernel_size, dilation, padding, stride):
    k, d, p, s = map(_np_pair, (kernel_size, dilation, padding, stride))
    batched = x.ndim == 4
    xb = x if batched else x[None]
    n, c, h, w = xb.shape
    (hp, wp), (bh, bw) = _windows((h, w), k, d, p, s)
    padded = np.zeros((n, c, hp, wp), dtype=x.dtype)
    padded[:, :, p[0] : p[0] + h, p[1] : p[1] + w] = xb
    out = np.zeros((n, c * k[0] * k[1], bh * bw), dtype=x.dtype)
    for ch in range(c):
        for ki in range(k[0]):
            for kj in range(k[1]):
                row = (ch * k[0] + ki) * k[1] + kj
                for bi in range(bh):
                    for bj in range(bw):
                        out[:, row, bi * bw + bj] = padded[
                            :, ch, bi * s[0] + ki * d[0], bj * s[1] + kj * d[1]
                        ]
    return out if batched else out[0]


def _fold_sample(draw, dtype):
    k, d, p, s, size, kw = _geom_sample(draw)
    _, (bh, bw) = _windows(size, k, d, p, s)
    lead = (draw(st.integers(0, 2)),) if draw(st.booleans()) else ()
    cols = values(draw, (*lead, draw(st.integers(1, 2)) * k[0] * k[1], bh * bw), dtype)
    return [cols], {"output_size": size, **kw}


def _fold_np(cols, output_size, kernel_size, dilation, padding, stride):
    k, d, p, s = map(_np_pair, (kernel_size, dilation, padding, stride))
    batched = cols.ndim == 3
    cb = cols if batched else cols[None]
    n, ck, _ = cb.shape
    c = ck // (k[0] * k[1])
    h, w = output_size
    (hp, wp), (bh, bw) = _windows((h, w), k, d, p, s)
    plane = np.zeros((n, c, hp, wp), dtype=cols.dtype)
    for ch in range(c):
        for ki in range(k[0]):
            for kj in range(k[1]):
                row = (ch * k[0] + ki) * k[1] + kj
                for bi in range(bh):
                    for bj in range(bw):
                        plane[:, ch, bi * s[0] + ki * d[0], bj * s[1] + kj * d[1]] += cb[:, row, bi * bw + bj]
    out = plane[:, :, p[0] : p[0] + h, p[1] : p[1] + w]
    return out if batched else out[0]


SPECS += [
    OpSpec(
        "unfold",
        lambda x, **kw: F.unfold(x, **kw),
        _unfold_np,
        _unfold_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "fold",
        lambda x, **kw: F.fold(x, **kw),
        _fold_np,
        _fold_sample,
        dtypes=FLOATS + INTS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]


# ---------------------------------------------------------------------------
# the weight-norm and spectral-norm parametrizations (nn.utils.parametrizations)
# ---------------------------------------------------------------------------

_PZ = fg.nn.utils.parametrizations


def _wn_sample(draw, dtype):
    shape = draw(shapes(1, 3, 1, 4))
    dim = draw(st.sampled_from([None, *range(len(shape))]))
    v = _exact(values(draw, shape, dtype, 0.5, 2.0) * np.where(_rng(draw).random(shape) < 0.5, -1, 1), dtype)
    gshape = () if dim is None else tuple(s if i == dim else 1 for i, s in enumerate(shape))
    g = values(draw, gshape, dtype, -2.0, 2.0)
    return [g, v], {"dim": dim}


def _wn_np(g, v, dim):
    if dim is None:
        norm = np.sqrt((v**2).sum())
    else:
        axes = tuple(i for i in range(v.ndim) if i != dim)
        norm = np.sqrt((v**2).sum(axis=axes, keepdims=True))
    return v * g / norm


def _sn_sample(draw, dtype):
    shape = draw(shapes(2, 3, 1, 4))
    dim = draw(st.integers(0, len(shape) - 1))
    w = values(draw, shape, dtype, -2.0, 2.0)
    mat = np.moveaxis(w.astype(np.float64), dim, 0).reshape(shape[dim], -1)
    # v near the top right-singular vector and u = W v / |W v|: sigma = u . W v is close to the
    # largest singular value, far from 0 (as after power iteration), so the quotient is well
    # conditioned.
    _, _, vt = np.linalg.svd(mat)
    v = vt[0] + 0.1 * _rng(draw).normal(size=vt.shape[1])
    v /= np.linalg.norm(v)
    u = mat @ v
    u /= np.linalg.norm(u)
    return [w, _exact(u, dtype), _exact(v, dtype)], {"dim": dim}


def _sn_fg(w, u, v, dim):
    sn = _PZ._SpectralNorm(w.detach(), dim=dim)
    sn._u, sn._v = u, v
    return sn.eval()(w)


def _sn_np(w, u, v, dim):
    mat = np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)
    return w / (u @ mat @ v)


SPECS += [
    OpSpec(
        "weight_norm",
        lambda g, v, dim: _PZ._WeightNorm(dim)(g, v),
        _wn_np,
        _wn_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "spectral_norm",
        _sn_fg,
        _sn_np,
        _sn_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        expand=False,
        grad_snap=False,  # u and v are placed relative to the weight
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]


# ---------------------------------------------------------------------------
# fg.linalg: norms and products against NumPy; elimination against np.linalg
# ---------------------------------------------------------------------------

L = fg.linalg
WIDE = ("float32", "float64")
# Elimination and products of well-conditioned matrices (condition numbers below ~10).
LIN_TOL = {"float32": (1e-4, 1e-4)}
VORDS = [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), -1, -2.5]


def _vnorm_sample(draw, dtype):
    ordv = draw(st.sampled_from(VORDS))
    positive = ordv < 0 or ordv == float("inf")
    shape = draw(shapes(0, 3, 1 if positive else 0, 4))
    x = values(draw, shape, dtype)
    if ordv < 0:  # no zeros: |x|^ord would be infinite
        x = _exact(np.where(np.abs(x) < 0.25, 0.5, x), dtype)
    nd = len(shape)
    dim = None
    if nd and draw(st.booleans()):
        dims = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        dim = dims[0] - nd if len(dims) == 1 else tuple(dims)
    return [x], {"ord": ordv, "dim": dim, "keepdim": draw(st.booleans())}


def _vnorm_np(x, ord, dim, keepdim):  # noqa: A002
    axes = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else dim)
    if x.ndim == 0:
        axes = ()
    a = np.abs(x)
    if ord == float("inf"):
        out = a.max(axis=axes, keepdims=keepdim) if axes else a
    elif ord == float("-inf"):
        out = a.min(axis=axes, keepdims=keepdim) if axes else a
    elif ord == 0:
        out = (x != 0).sum(axis=axes, keepdims=keepdim).astype(np.float64)
    else:
        out = (a**ord).sum(axis=axes, keepdims=keepdim) ** (1.0 / ord)
    return np.asarray(out, np.float64)


def _mnorm_sample(draw, dtype):
    ordv = draw(st.sampled_from(["fro", float("inf"), float("-inf"), 1, -1]))
    shape = (*draw(shapes(0, 2, 0, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return [values(draw, shape, dtype)], {"ord": ordv, "keepdim": draw(st.booleans())}


def _mnorm_np(a, ord, keepdim):  # noqa: A002
    out = np.linalg.norm(a, ord, axis=(-2, -1), keepdims=keepdim)
    return np.asarray(out, np.float64)


def _vecdot_sample(draw, dtype):
    lead = draw(shapes(0, 2, 0, 3))
    n = draw(st.integers(0, 4))
    other = lead[draw(st.integers(0, len(lead))) :]
    return [values(draw, (*lead, n), dtype), values(draw, (*other, n), dtype)], {}


def _cross_sample(draw, dtype):
    lead = draw(shapes(0, 2, 0, 3))
    other = lead[draw(st.integers(0, len(lead))) :]
    return [values(draw, (*lead, 3), dtype), values(draw, (*other, 3), dtype)], {}


def _well_conditioned(draw, dtype, batch=True, spd=False, n_min=1):
    """A batch of matrices ``P (R + (n + 1) I)`` with ``P`` a row permutation (so partial
    pivoting has rows to swap), or SPD matrices ``R R' + n I``."""
    lead = draw(shapes(0, 2, 0, 2)) if batch else ()
    n = draw(st.integers(n_min, 4))
    r = values(draw, (*lead, n, n), "float64", -1.0, 1.0)
    if spd:
        a = r @ np.swapaxes(r, -1, -2) + n * np.eye(n)
    else:
        perm = _rng(draw).permutation(n)
        a = (r + (n + 1) * np.eye(n))[..., perm, :]
    return _exact(a, dtype), lead, n


def _inv_sample(draw, dtype):
    a, _, _ = _well_conditioned(draw, dtype)
    return [a], {}


def _solve_sample(draw, dtype):
    a, lead, n = _well_conditioned(draw, dtype)
    left = draw(st.booleans())
    if draw(st.booleans()):  # a batch of vectors (left only: PyTorch's vector case)
        b_shape, left = (*lead, n), True
    else:
        k = draw(st.integers(1, 3))
        b_shape = (*lead, n, k) if left else (*lead, k, n)
    return [a, values(draw, b_shape, dtype)], {"left": left}


def _solve_np(a, b, left):
    if not left:
        return np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    if b.ndim == a.ndim - 1:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _det_sample(draw, dtype):
    a, lead, n = _well_conditioned(draw, dtype, n_min=0)
    if draw(st.booleans()) and n > 1:
        a = a.copy()
        a[..., -1, :] = a[..., 0, :] * 2.0  # singular: the determinant is 0
    return [a], {}


def _matpow_sample(draw, dtype):
    a, _, n = _well_conditioned(draw, dtype)
    return [_exact(a / (n + 1), dtype)], {"n": draw(st.integers(-2, 4))}


def _multidot_sample(draw, dtype):
    k = draw(st.integers(2, 4))
    dims = [draw(st.integers(1, 3)) for _ in range(k + 1)]
    mats = [values(draw, (dims[i], dims[i + 1]), dtype) for i in range(k)]
    if draw(st.booleans()):
        mats[0] = mats[0][0]
    if draw(st.booleans()):
        mats[-1] = mats[-1][:, 0]
    return mats, {}


def _cholesky_sample(draw, dtype):
    a, _, _ = _well_conditioned(draw, dtype, spd=True)
    return [a], {"upper": draw(st.booleans())}


def _chol_np(a, upper):
    lo = np.linalg.cholesky(a)
    return np.swapaxes(lo, -1, -2) if upper else lo


SPECS += [
    OpSpec(
        "linalg.vector_norm",
        lambda x, **kw: L.vector_norm(x, **kw),
        _vnorm_np,
        _vnorm_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.matrix_norm",
        lambda a, **kw: L.matrix_norm(a, **kw),
        _mnorm_np,
        _mnorm_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.vecdot",
        lambda x, y: L.vecdot(x, y),
        lambda x, y: (x * y).sum(-1),
        _vecdot_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.cross",
        lambda x, y: L.cross(x, y),
        lambda x, y: np.cross(x, y),
        _cross_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.matrix_power",
        lambda a, n: L.matrix_power(a, n),
        lambda a, n: np.linalg.matrix_power(a, n),
        _matpow_sample,
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        expand=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.multi_dot",
        lambda *ms: L.multi_dot(ms),
        lambda *ms: np.linalg.multi_dot(ms),
        _multidot_sample,
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.inv",
        lambda a: L.inv(a),
        np.linalg.inv,
        _inv_sample,
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        expand=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.solve",
        lambda a, b, left: L.solve(a, b, left=left),
        _solve_np,
        _solve_sample,
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        expand=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.det",
        lambda a: L.det(a),
        np.linalg.det,
        _det_sample,
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        expand=False,
        grad_sample=lambda draw, dtype: _inv_sample(draw, "float64"),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.slogdet",
        lambda a: tuple(L.slogdet(a)),
        lambda a: tuple(np.linalg.slogdet(a)),
        _inv_sample,  # nonsingular: a rounded singular matrix has a tiny, signed determinant
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        expand=False,
        grad_sample=lambda draw, dtype: _inv_sample(draw, "float64"),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "linalg.cholesky",
        lambda a, upper: L.cholesky(a, upper=upper),
        _chol_np,
        _cholesky_sample,
        dtypes=WIDE,
        tol=LIN_TOL,
        composed=True,
        expand=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]


def _cdist_sample(draw, dtype):
    lead = draw(shapes(0, 2, 0, 2))
    m = draw(st.integers(0, 3))
    x1 = values(draw, (*lead, draw(st.integers(0, 3)), m), dtype)
    x2 = values(draw, (*lead[draw(st.integers(0, len(lead))) :], draw(st.integers(0, 3)), m), dtype)
    return [x1, x2], {"p": draw(st.sampled_from([2.0, 1.0, 3.0, 0.5, 0.0, float("inf")]))}


def _cdist_np(x1, x2, p):
    d = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if d.shape[-1] == 0:
        return np.zeros(d.shape[:-1])
    if p == float("inf"):
        return d.max(-1)
    if p == 0:
        return (d != 0).sum(-1).astype(np.float64)
    return (d**p).sum(-1) ** (1.0 / p)


SPECS += [
    OpSpec(
        "cdist",
        lambda x1, x2, p: fg.cdist(x1, x2, p),
        _cdist_np,
        _cdist_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "logdet",
        lambda a: fg.logdet(a),
        lambda a: np.log(np.linalg.det(a)),
        _inv_sample,  # nonsingular, either sign (NaN where negative)
        dtypes=WIDE,
        tol={"float32": (1e-4, 1e-4)},
        composed=True,
        expand=False,
        # positive determinants: log is differentiable there
        grad_sample=lambda draw, dtype: ([_well_conditioned(draw, "float64", spd=True)[0]], {}),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]
