"""Op-table specs for the Tensor functions composed in Python of registry ops
(``ferrograd._tensor_extras``: ``lerp``, ``addmm``, ``erfinv``, ``searchsorted``, ...).

Each runs through every column like a registry op. The references are float64
NumPy/SciPy functions (``np.kron``, ``np.tensordot``, ``scipy.special.erfinv``,
``np.logaddexp.accumulate``, ...) or, where NumPy has none, a direct loop over
PyTorch's documented definition, never the composition itself.

Boolean flags travel as 0/1 ints in the kwargs: the drivers read a Python bool
among the kwargs as a boolean mask index (a data-dependent shape).
"""

from __future__ import annotations

import warnings

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
    broadcastable_shapes,
    shapes,
    values,
    with_specials,
)

# Compositions of several ops: tolerances for the low precisions as composed.py's.
TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
# Matrix products and reductions in the low precisions (sums of up to a few dozen terms).
MM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
# Float32 VJPs of compositions add the roundings of every step; float16/bfloat16 ones here
# run in float32 and round once (``_opmath``) or are single registry ops.
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}


def _b(flag) -> bool:
    return bool(flag)


def _unary(lo=-3.0, hi=3.0, specials=True, max_dims=4, **kw):
    def sample(draw, dtype):
        a = values(draw, draw(shapes(0, max_dims)), dtype, lo, hi)
        return [with_specials(draw, a, dtype) if specials else a], dict(kw)

    return sample


def _binary(lo=-3.0, hi=3.0, specials=True):
    def sample(draw, dtype):
        sa, sb = broadcastable_pair(draw)
        a, b = values(draw, sa, dtype, lo, hi), values(draw, sb, dtype, lo, hi)
        if specials:
            a, b = with_specials(draw, a, dtype), with_specials(draw, b, dtype)
        return [a, b], {}

    return sample


def _grad_unary(lo, hi, edges=()):
    """Float64 gradient samples in [lo, hi], with some elements set to ``edges``."""

    def sample(draw, dtype):
        a = values(draw, draw(shapes(0, 2, 1, 4)), "float64", lo, hi)
        if edges and a.size:
            rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
            mask = rng.random(a.shape) < 0.3
            a[mask] = rng.choice(np.asarray(edges, np.float64), size=int(mask.sum()))
        return [a], {}

    return sample


# ---------------------------------------------------------------------------
# lerp and the matrix products
# ---------------------------------------------------------------------------


def _lerp_sample(draw, dtype, grad=False):
    dt = "float64" if grad else dtype
    s = broadcastable_shapes(draw, 3, 0, 3, 4)
    a, b = values(draw, s[0], dt), values(draw, s[1], dt)
    edges = np.array([0.0, 1.0, 0.5, -0.5, 0.25, 1.5])
    if draw(st.booleans()):
        w = values(draw, s[2], dt, -0.5, 1.5)
        if w.size and draw(st.booleans()):
            rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
            w = np.where(rng.random(w.shape) < 0.5, edges[rng.integers(0, 6, w.shape)], w).astype(w.dtype)
        return [a, b, w], {}
    return [a, b], {"weight": float(draw(st.sampled_from([0.0, 1.0, 0.3, 0.5, 0.75, -0.25])))}


def _lerp_fg(a, b, *w, weight=None):
    return fg.lerp(a, b, w[0] if w else weight)


def _lerp_np(a, b, *w, weight=None):
    w = w[0] if w else weight
    return a + w * (b - a)


def _mm_sample(kind):
    def sample(draw, dtype):
        n, m, p, bt = (draw(st.integers(0 if kind != "addmv" else 1, 4)) for _ in range(4))
        if kind == "addmm":
            mats, target = [(n, m), (m, p)], (n, p)
        elif kind == "addmv":
            mats, target = [(n, m), (m,)], (n,)
        elif kind == "baddbmm":
            mats, target = [(bt, n, m), (bt, m, p)], (bt, n, p)
        else:
            mats, target = [(bt, n, m), (bt, m, p)], (n, p)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        ish = tuple(s if rng.random() < 0.7 else 1 for s in target)[int(rng.integers(0, len(target) + 1)) :]
        arrays = [values(draw, ish, dtype, -2.0, 2.0)] + [values(draw, s, dtype, -2.0, 2.0) for s in mats]
        return arrays, {
            "beta": draw(st.sampled_from([1.0, 0.0, 0.5, -2.0])),
            "alpha": draw(st.sampled_from([1.0, 0.5, -1.5])),
        }

    return sample


def _mm_np(kind):
    def ref(inp, m1, m2, beta, alpha):
        if kind == "addmm":
            prod = m1 @ m2
        elif kind == "addmv":
            prod = m1 @ m2
        elif kind == "baddbmm":
            prod = np.matmul(m1, m2)
        else:
            prod = np.matmul(m1, m2).sum(0) if m1.shape[0] else np.zeros((m1.shape[1], m2.shape[2]))
        out = alpha * prod
        return out if beta == 0 else out + beta * inp

    return ref


def _mm_fg(kind):
    fn = getattr(fg, kind)
    return lambda inp, m1, m2, beta, alpha: fn(inp, m1, m2, beta=beta, alpha=alpha)


def _tensordot_sample(draw, dtype):
    k = draw(st.integers(0, 2))
    contracted = tuple(draw(st.integers(1, 3)) for _ in range(k))
    fa = draw(shapes(0, 2, 0, 3))
    fb = draw(shapes(0, 2, 0, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # dims as an int: a's last k with b's first k
        return [values(draw, fa + contracted, dtype), values(draw, contracted + fb, dtype)], {"dims": k}
    na, nb = len(fa) + k, len(fb) + k
    pa, pb = rng.permutation(na), rng.permutation(nb)
    sa, sb = [0] * na, [0] * nb
    da, db = [int(v) for v in pa[:k]], [int(v) for v in pb[:k]]
    for i, d in enumerate(da):
        sa[d] = contracted[i]
    for i, d in enumerate(db):
        sb[d] = contracted[i]
    for d, s in zip(pa[k:], fa, strict=True):
        sa[d] = s
    for d, s in zip(pb[k:], fb, strict=True):
        sb[d] = s
    return [values(draw, tuple(sa), dtype), values(draw, tuple(sb), dtype)], {"dims": [da, db]}


def _cross_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw, 0, 3, 4)
    nd = max(len(sa), len(sb)) + 1
    d = draw(st.integers(0, nd - 1))
    sa = (1,) * (nd - 1 - len(sa)) + sa
    sb = (1,) * (nd - 1 - len(sb)) + sb
    sa, sb = sa[:d] + (3,) + sa[d:], sb[:d] + (3,) + sb[d:]
    first3 = next(i for i, s in enumerate(np.broadcast_shapes(sa, sb)) if s == 3)
    dim = draw(st.sampled_from([d, d - nd] + ([None] if first3 == d else [])))
    return [values(draw, sa, dtype), values(draw, sb, dtype)], {"dim": dim}


def _cross_np(a, b, dim):
    if dim is None:
        dim = next(i for i, s in enumerate(np.broadcast_shapes(a.shape, b.shape)) if s == 3)
    return np.cross(a, b, axisa=dim, axisb=dim, axisc=dim)


def _kron_sample(draw, dtype):
    return [values(draw, draw(shapes(0, 3, 0, 3)), dtype), values(draw, draw(shapes(0, 3, 0, 3)), dtype)], {}


# ---------------------------------------------------------------------------
# Reductions and scans
# ---------------------------------------------------------------------------


def _reduce_sample(min_side=0, specials=False):
    def sample(draw, dtype):
        shape = draw(shapes(0, 3, min_side, 4))
        a = values(draw, shape, dtype)
        if specials:
            a = with_specials(draw, a, dtype, p=0.3)
        nd = len(shape)
        choice = draw(st.integers(0, 2)) if nd else 0
        if choice == 0:
            dim = None
        elif choice == 1:
            dim = draw(st.integers(-nd, nd - 1))
        else:
            dim = tuple(sorted(set(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd)))))
        return [a], {"dim": dim, "keepdim": draw(st.integers(0, 1))}

    return sample


def _varmean_sample(draw, dtype):
    (a,), kw = _reduce_sample(min_side=2)(draw, dtype)
    kw["correction"] = draw(st.sampled_from([0, 1]))
    return [a], kw


def _varmean_np(std):
    def ref(a, dim, keepdim, correction):
        v = a.var(axis=dim, ddof=correction, keepdims=bool(keepdim))
        return (np.sqrt(v) if std else v), a.mean(axis=dim, keepdims=bool(keepdim))

    return ref


def _varmean_fg(name):
    fn = getattr(fg, name)
    return lambda a, dim, keepdim, correction: fn(a, dim, keepdim=_b(keepdim), correction=correction)


def _count_nz_sample(draw, dtype):
    shape = draw(shapes(0, 3, 0, 4))
    a = values(draw, shape, dtype, -1.0, 1.0)
    if dtype in FLOATS:
        a = np.where(np.abs(a) < 0.4, 0.0, a).astype(a.dtype)
    nd = len(shape)
    dim = None
    if nd and draw(st.booleans()):
        dim = draw(
            st.sampled_from([draw(st.integers(-nd, nd - 1)), tuple(range(nd))[: draw(st.integers(1, nd))]])
        )
    return [a], {"dim": dim}


def _lcse_sample(draw, dtype, grad=False):
    shape = draw(shapes(1, 3, 1 if grad else 0, 5 if not grad else 4))
    spread = draw(st.sampled_from([3.0, 50.0]))
    a = values(draw, shape, "float64" if grad else dtype, -spread, spread)
    if not grad:
        a = with_specials(draw, a, dtype, p=0.15)
    return [a], {"dim": draw(st.integers(-len(shape), len(shape) - 1))}


def _lcse_np(a, dim):
    with np.errstate(all="ignore"):
        return np.logaddexp.accumulate(a, axis=dim)


def _diff_sample(draw, dtype):
    shape = draw(shapes(1, 3, 0, 5))
    nd = len(shape)
    dim = draw(st.integers(-nd, nd - 1))
    arrays = [values(draw, shape, dtype)]
    kw = {"n": draw(st.integers(0, 3)), "dim": dim, "which": draw(st.sampled_from(["", "p", "a", "pa"]))}
    for _ in kw["which"]:
        s = list(shape)
        s[dim] = draw(st.integers(0, 2))
        arrays.append(values(draw, tuple(s), dtype))
    return arrays, kw


def _diff_fg(x, *extra, n, dim, which):
    ex = dict(zip(which, extra, strict=True))
    return fg.diff(x, n, dim, prepend=ex.get("p"), append=ex.get("a"))


def _diff_np(x, *extra, n, dim, which):
    ex = dict(zip(which, extra, strict=True))
    kw = {k: ex[c] for c, k in (("p", "prepend"), ("a", "append")) if c in ex}
    return np.diff(x, n=n, axis=dim, **kw)


def _nan_sample(draw, dtype):
    (a,), kw = _reduce_sample(specials=False)(draw, dtype)
    if a.size:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        a = np.where(rng.random(a.shape) < 0.3, np.nan, a).astype(a.dtype)
    return [a], kw


def _nan_fg(name):
    fn = getattr(fg, name)
    return lambda a, dim, keepdim: fn(a, dim, _b(keepdim))


def _nan_np(fn):
    def ref(a, dim, keepdim):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: NaN, as in PyTorch
            return np.asarray(fn(a, axis=dim, keepdims=bool(keepdim)))

    return ref


def _nan_to_num_sample(draw, dtype):
    a = with_specials(draw, values(draw, draw(shapes()), dtype), dtype, p=0.4)
    kw = {"nan": draw(st.sampled_from([0.0, -1.5]))}
    if draw(st.booleans()):
        kw["posinf"] = 7.0
    if draw(st.booleans()):
        kw["neginf"] = -8.0
    return [a], {"dt": dtype, **kw}


_MAX = {"float64": np.finfo(np.float64).max, "float32": np.finfo(np.float32).max, "float16": 65504.0}
_MAX["bfloat16"] = 3.3895313892515355e38


def _nan_to_num_np(a, dt, nan, posinf=None, neginf=None):
    big = _MAX.get(dt, 0.0)
    return np.nan_to_num(
        a, nan=nan, posinf=big if posinf is None else posinf, neginf=-big if neginf is None else neginf
    )


# ---------------------------------------------------------------------------
# Shape
# ---------------------------------------------------------------------------


def _tile_sample(draw, dtype):
    shape = draw(shapes(0, 3, 0, 3))
    reps = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 4))))
    return [values(draw, shape, dtype)], {"dims": reps}


def _meshgrid_sample(draw, dtype):
    k = draw(st.integers(1, 3))
    arrays = [values(draw, (draw(st.integers(0, 4)),), dtype) for _ in range(k)]
    return arrays, {"indexing": draw(st.sampled_from(["ij", "xy"]))}


def _ri_sample(draw, dtype):
    shape = draw(shapes(0, 3, 0, 3))
    nd = len(shape)
    dim = draw(st.sampled_from([None] + list(range(-nd, nd))))
    arrays = [values(draw, shape, dtype)]
    if draw(st.booleans()):
        return arrays, {"dim": dim, "repeats": draw(st.integers(0, 3))}
    n = int(np.prod(shape)) if dim is None else (shape[dim] if nd else 1)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    reps = rng.integers(0, 4, size=n).astype(np.int64)
    arrays.append(reps)
    return arrays, {"dim": dim, "repeats": None, "output_size": int(reps.sum())}


def _ri_fg(x, *r, dim, repeats, output_size=None):
    return fg.repeat_interleave(x, r[0] if r else repeats, dim, output_size=output_size)


def _ri_np(x, *r, dim, repeats, output_size=None):
    return np.repeat(x, r[0] if r else repeats, axis=dim)


def _diag_embed_sample(draw, dtype):
    shape = draw(shapes(1, 3, 0, 3))
    nd = len(shape) + 1
    d1 = draw(st.integers(-nd, nd - 1))
    d2 = draw(st.sampled_from([d for d in range(-nd, nd) if d % nd != d1 % nd]))
    return [values(draw, shape, dtype)], {"offset": draw(st.integers(-2, 2)), "dim1": d1, "dim2": d2}


def _diag_embed_np(x, offset, dim1, dim2):
    n = x.shape[-1]
    m = n + abs(offset)
    out = np.zeros(x.shape[:-1] + (m, m), dtype=x.dtype)
    for i in range(n):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = x[..., i]
    nd = x.ndim + 1
    return np.moveaxis(out, (nd - 2, nd - 1), (dim1 % nd, dim2 % nd))


# ---------------------------------------------------------------------------
# Searching and counting
# ---------------------------------------------------------------------------


def _search_sample(draw, dtype):
    lead = draw(shapes(0, 2, 1, 3)) if draw(st.booleans()) else ()
    m = draw(st.integers(0, 5))
    seq = np.sort(values(draw, lead + (m,), dtype, -3.0, 3.0), axis=-1)
    if lead:
        v = values(draw, lead + (draw(st.integers(0, 4)),), dtype, -4.0, 4.0)
    else:
        v = values(draw, draw(shapes(0, 2, 0, 4)), dtype, -4.0, 4.0)
    if v.size and seq.size and draw(st.booleans()):  # values equal to boundaries (ties)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        flat = seq.reshape(-1)
        v = (
            np.where(rng.random(v.shape) < 0.5, flat[rng.integers(0, flat.size, v.shape)], v)
            if not lead
            else v
        )
        v = v.astype(seq.dtype)
    return [seq, v], {"right": draw(st.integers(0, 1)), "out_int32": draw(st.integers(0, 1))}


def _search_np(seq, v, right, out_int32):
    side = "right" if right else "left"
    if seq.ndim == 1:
        out = np.searchsorted(seq, v, side=side)
    else:
        out = np.empty(v.shape, dtype=np.int64)
        for idx in np.ndindex(*seq.shape[:-1]):
            out[idx] = np.searchsorted(seq[idx], v[idx], side=side)
    return np.asarray(out).astype(np.int32 if out_int32 else np.int64)


def _bucketize_sample(draw, dtype):
    m = draw(st.integers(0, 5))
    bnd = np.sort(values(draw, (m,), dtype, -3.0, 3.0))
    v = values(draw, draw(shapes(0, 3, 0, 4)), dtype, -4.0, 4.0)
    return [v, bnd], {"right": draw(st.integers(0, 1)), "out_int32": draw(st.integers(0, 1))}


def _bincount_sample(draw, dtype):
    n = draw(st.integers(0, 8))
    x = values(draw, (n,), dtype, 0, 6)
    kw = {
        "minlength": draw(st.sampled_from([0, 3, 10])),
        "wdt": draw(st.sampled_from(["", "float32", "float64"])),
    }
    if kw["wdt"]:
        return [x, values(draw, (n,), kw["wdt"], -2.0, 2.0)], kw
    return [x], kw


def _bincount_np(x, *w, minlength, wdt):
    return np.bincount(x, weights=w[0] if w else None, minlength=minlength)


def _histc_sample(draw, dtype):
    a = values(draw, draw(shapes(0, 2, 0, 6)), dtype, -3.0, 3.0)
    rng_kind = draw(st.sampled_from(["data", "given"]))
    if rng_kind == "data" and a.size and draw(st.booleans()):
        a = np.full_like(a, a.reshape(-1)[0])  # all equal: the range becomes [v - 1, v + 1]
    lo, hi = (0, 0) if rng_kind == "data" else (-2.0, draw(st.sampled_from([1.0, 2.5])))
    return [a], {"bins": draw(st.integers(1, 6)), "min": lo, "max": hi}


def _histc_np(a, bins, min, max):  # noqa: A002 - PyTorch's argument names
    x = a.reshape(-1)
    dt = x.dtype.type
    if min == max:
        lo, hi = (x.min(), x.max()) if x.size else (dt(0), dt(0))
        if lo == hi:
            lo, hi = lo - dt(1), hi + dt(1)
    else:
        lo, hi = dt(min), dt(max)
    out = np.zeros(bins, dtype=x.dtype)
    for v in x:
        if lo <= v <= hi:
            k = int((v - lo) * dt(bins) / (hi - lo))
            out[_min(k, bins - 1)] += 1
    return out


def _min(a, b):
    return a if a < b else b


def _isin_sample(draw, dtype):
    a = values(draw, draw(shapes(0, 3, 0, 4)), dtype, -3.0, 3.0)
    t = values(draw, draw(shapes(0, 2, 0, 4)), dtype, -3.0, 3.0)
    if a.size and t.size and dtype not in ("bool",):
        t.reshape(-1)[0] = a.reshape(-1)[-1]
    return [a, t], {"invert": draw(st.integers(0, 1))}


def _isclose_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw)
    a = with_specials(draw, values(draw, sa, dtype), dtype)
    b = values(draw, sb, dtype)
    full = np.broadcast_shapes(sa, sb)
    if dtype in ("float16", "float32", "float64") and full == sb and draw(st.booleans()):
        # near a: relative differences around the tolerances (bfloat16 carriers must stay exact)
        eps = draw(st.sampled_from([1e-7, 1e-4, 1e-2]))
        b = (np.broadcast_to(a, sb) * (1 + eps)).astype(a.dtype)
    b = with_specials(draw, b, dtype)
    rtol, atol = draw(st.sampled_from([(1e-5, 1e-8), (1e-3, 0.0), (0.0, 0.0), (0.0, 0.1)]))
    return [a, b], {"rtol": rtol, "atol": atol, "equal_nan": draw(st.integers(0, 1))}


def _isclose_np(a, b, rtol, atol, equal_nan):
    if a.dtype == np.bool_:
        return np.broadcast_to(a == b, np.broadcast_shapes(a.shape, b.shape))
    if rtol == 0 and atol == 0:
        eq = a == b
        return eq | (np.isnan(a) & np.isnan(b)) if equal_nan and a.dtype.kind == "f" else eq
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=bool(equal_nan))


def _allclose_np(a, b, rtol, atol, equal_nan):
    return np.asarray(bool(_isclose_np(a, b, rtol, atol, equal_nan).all()))


def _equal_sample(draw, dtype):
    # Same shapes only: a shape mismatch is decided without reading values (False, even in a
    # captured graph); tests/test_tensor_compose.py covers it.
    shape = draw(shapes(0, 3, 0, 3))
    a = with_specials(draw, values(draw, shape, dtype), dtype, p=0.1)
    b = a.copy() if draw(st.booleans()) else values(draw, shape, dtype)
    return [a, b], {}


def _equal_np(a, b):
    return np.asarray(a.shape == b.shape and bool(np.all(a == b)))


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------


def _clamp1_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw)
    a = values(draw, sa, dtype)
    if draw(st.booleans()):
        return [a, values(draw, sb, dtype)], {}
    return [a], {"bound": draw(st.sampled_from([0, 0.5, 2] if dtype == "uint8" else [-1, 0.5, 2]))}


def _clamp1_fg(name):
    fn = getattr(fg, name)
    return lambda a, *b, bound=None: fn(a, b[0] if b else bound)


def _xlogy_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw)
    x = values(draw, sa, dtype)
    if x.size:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        x = np.where(rng.random(x.shape) < 0.3, 0.0, x).astype(x.dtype)
    y = with_specials(draw, values(draw, sb, dtype, 0.0, 4.0), dtype)
    return [x, y], {}


def _xlogy_grad_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw, 0, 2, 3)
    return [values(draw, sa, "float64"), values(draw, sb, "float64", 0.2, 4.0)], {}


def _heaviside_sample(draw, dtype):
    sa, sb = broadcastable_pair(draw)
    a = values(draw, sa, dtype, -2.0, 2.0)
    return [a, values(draw, sb, dtype)], {}


def _signbit_sample(draw, dtype):
    a = values(draw, draw(shapes()), dtype)
    if dtype in FLOATS and a.size:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        spec = np.array([0.0, -0.0, np.inf, -np.inf], dtype=np.float64)
        a = np.where(rng.random(a.shape) < 0.4, spec[rng.integers(0, 4, a.shape)], a).astype(a.dtype)
    return [a], {}


def _int_to_f32(dtype):
    return dtype if dtype in FLOATS else "float32"


def _poly_sample(draw, dtype):
    a = with_specials(draw, values(draw, draw(shapes()), dtype, -4.5, 8.0), dtype)
    return [a], {"n": draw(st.integers(0, 4))}


def _polygamma_ref(a, n):
    """SciPy's polygamma, but NaN at -inf for n >= 1: the poles at every negative integer leave
    no limit there (PyTorch 2.15 gives NaN for n = 1 and +-inf for n >= 2; SciPy +-inf)."""
    out = np.asarray(sp.polygamma(n, a), dtype=np.float64)
    return np.where(np.isneginf(a) & (n >= 1), np.nan, out)


def _gamma_grad_sample(draw, dtype):
    a = values(draw, draw(shapes(0, 2, 1, 4)), "float64", -3.5, 6.0)
    a = np.where(np.abs(a - np.round(a)) < 0.1, a + 0.3, a)  # away from the poles
    return [a], {}



def _lgamma_ref(a):
    """``log|Gamma(a)|`` as C's ``lgamma`` and PyTorch give it: scipy's ``gammaln`` returns
    -inf at -inf, where ``lgamma(-inf)`` is +inf (C99 F.9.5.4, ``math.lgamma``)."""
    return np.where(np.isneginf(a), np.inf, sp.gammaln(a))

SPECS: list[OpSpec] = [
    OpSpec(
        "lerp",
        _lerp_fg,
        _lerp_np,
        _lerp_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _lerp_sample(draw, dtype, grad=True),
        grad_snap=False,
    ),
    *(
        OpSpec(
            kind,
            _mm_fg(kind),
            _mm_np(kind),
            _mm_sample(kind),
            dtypes=FLOATS,
            tol=MM_TOL,
            composed=True,
            lowp_grad_factor=COMPOSED_LOWP,
        )
        for kind in ("addmm", "addmv", "baddbmm", "addbmm")
    ),
    OpSpec(
        "tensordot",
        lambda a, b, dims: fg.tensordot(a, b, dims),
        lambda a, b, dims: np.tensordot(a, b, dims),
        _tensordot_sample,
        dtypes=FLOATS,
        tol=MM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "kron",
        lambda a, b: fg.kron(a, b),
        np.kron,
        _kron_sample,
        dtypes=NUMERIC,
        ref_in_dtype=False,
        composed=True,
    ),
    OpSpec(
        "cross",
        lambda a, b, dim: fg.cross(a, b, dim),
        _cross_np,
        _cross_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
    ),
    OpSpec(
        "clamp_min",
        _clamp1_fg("clamp_min"),
        lambda a, *b, bound=None: np.maximum(a, b[0] if b else bound),
        _clamp1_sample,
        dtypes=NUMERIC,
        composed=True,
        out_dtype=lambda dt, **kw: dt if dt in FLOATS or isinstance(kw.get("bound", 1), int) else "float32",
    ),
    OpSpec(
        "clamp_max",
        _clamp1_fg("clamp_max"),
        lambda a, *b, bound=None: np.minimum(a, b[0] if b else bound),
        _clamp1_sample,
        dtypes=NUMERIC,
        composed=True,
        out_dtype=lambda dt, **kw: dt if dt in FLOATS or isinstance(kw.get("bound", 1), int) else "float32",
    ),
    OpSpec(
        "var_mean",
        _varmean_fg("var_mean"),
        _varmean_np(False),
        _varmean_sample,
        dtypes=FLOATS,
        tol=MM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "std_mean",
        _varmean_fg("std_mean"),
        _varmean_np(True),
        _varmean_sample,
        dtypes=FLOATS,
        tol=MM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "logaddexp",
        lambda a, b: fg.logaddexp(a, b),
        np.logaddexp,
        _binary(-5.0, 5.0),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "logaddexp2",
        lambda a, b: fg.logaddexp2(a, b),
        np.logaddexp2,
        _binary(-5.0, 5.0),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "hypot",
        lambda a, b: fg.hypot(a, b),
        np.hypot,
        _binary(),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "isclose",
        lambda a, b, rtol, atol, equal_nan: fg.isclose(a, b, rtol, atol, _b(equal_nan)),
        _isclose_np,
        _isclose_sample,
        dtypes=ALL,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "allclose",
        lambda a, b, rtol, atol, equal_nan: fg.allclose(a, b, rtol, atol, _b(equal_nan)),
        _allclose_np,
        _isclose_sample,
        dtypes=ALL,
        composed=True,
        differentiable=False,
        data_dependent=True,  # returns a Python bool read from the values
        noncontig=False,
    ),
    OpSpec(
        "equal",
        lambda a, b: fg.equal(a, b),
        _equal_np,
        _equal_sample,
        dtypes=ALL,
        composed=True,
        differentiable=False,
        data_dependent=True,  # returns a Python bool read from the values
        noncontig=False,
    ),
    OpSpec("diff", _diff_fg, _diff_np, _diff_sample, dtypes=ALL, ref_in_dtype=True, composed=True),
    OpSpec(
        "count_nonzero",
        lambda a, dim: fg.count_nonzero(a, dim),
        lambda a, dim: np.asarray(np.count_nonzero(a, axis=dim), dtype=np.int64),
        _count_nz_sample,
        dtypes=ALL,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "nan_to_num",
        lambda a, dt, **kw: fg.nan_to_num(a, **kw),
        _nan_to_num_np,
        _nan_to_num_sample,
        dtypes=FLOATS,
        composed=True,
    ),
    OpSpec(
        "nansum",
        _nan_fg("nansum"),
        _nan_np(np.nansum),
        _nan_sample,
        dtypes=FLOATS,
        tol=MM_TOL,
        composed=True,
    ),
    OpSpec(
        "nanmean",
        _nan_fg("nanmean"),
        _nan_np(np.nanmean),
        _nan_sample,
        dtypes=FLOATS,
        tol=MM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "tile",
        lambda a, dims: fg.tile(a, dims),
        lambda a, dims: np.tile(a, dims),
        _tile_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "meshgrid",
        lambda *a, indexing: fg.meshgrid(*a, indexing=indexing),
        lambda *a, indexing: tuple(np.meshgrid(*a, indexing=indexing)),
        _meshgrid_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec("repeat_interleave", _ri_fg, _ri_np, _ri_sample, dtypes=ALL, ref_in_dtype=True, composed=True),
    OpSpec(
        "trace",
        lambda a: fg.trace(a),
        lambda a: np.asarray(np.trace(a)),
        lambda draw, dtype: ([values(draw, (draw(st.integers(0, 4)), draw(st.integers(0, 4))), dtype)], {}),
        dtypes=NUMERIC,
        tol=MM_TOL,
        composed=True,
        out_dtype=lambda dt: dt if dt in FLOATS else "int64",
    ),
    OpSpec(
        "diag_embed",
        lambda a, **kw: fg.diag_embed(a, **kw),
        _diag_embed_np,
        _diag_embed_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "logcumsumexp",
        lambda a, dim: fg.logcumsumexp(a, dim),
        _lcse_np,
        _lcse_sample,
        dtypes=FLOATS,
        tol={"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)},
        composed=True,
        grad_sample=lambda draw, dtype: _lcse_sample(draw, dtype, grad=True),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "searchsorted",
        lambda s, v, right, out_int32: fg.searchsorted(s, v, right=_b(right), out_int32=_b(out_int32)),
        _search_np,
        _search_sample,
        dtypes=NUMERIC,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "bucketize",
        lambda v, b, right, out_int32: fg.bucketize(v, b, right=_b(right), out_int32=_b(out_int32)),
        lambda v, b, right, out_int32: _search_np(b, v, right, out_int32),
        _bucketize_sample,
        dtypes=NUMERIC,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "bincount",
        lambda x, *w, minlength, wdt: fg.bincount(x, w[0] if w else None, minlength),
        _bincount_np,
        _bincount_sample,
        dtypes=INTS,
        composed=True,
        differentiable=False,
        data_dependent=True,  # the output length is max(input) + 1
        out_dtype=lambda dt, minlength, wdt: wdt or "int64",
    ),
    OpSpec(
        "histc",
        lambda a, **kw: fg.histc(a, **kw),
        _histc_np,
        _histc_sample,
        dtypes=("float32", "float64"),
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "isin",
        lambda a, t, invert: fg.isin(a, t, invert=_b(invert)),
        lambda a, t, invert: np.isin(a, t, invert=bool(invert)),
        _isin_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "signbit",
        lambda a: fg.signbit(a),
        lambda a: np.zeros(a.shape, bool) if a.dtype == np.bool_ else np.signbit(a),
        _signbit_sample,
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
    OpSpec("frac", lambda a: fg.frac(a), lambda a: a - np.trunc(a), _unary(), dtypes=FLOATS, composed=True),
    OpSpec(
        "xlogy",
        lambda a, b: fg.xlogy(a, b),
        sp.xlogy,
        _xlogy_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=_xlogy_grad_sample,
        grad_snap=False,
    ),
    # The gradient's cos and sin take pi x rounded to float32, an argument error up to
    # u pi |x| (4.5 u at x = 1.43, where the quotient rule's two terms nearly cancel: 4.06 u
    # of |v| there, above the default 4): the composed functionals' factor.
    OpSpec("sinc", lambda a: fg.sinc(a), np.sinc, _unary(), dtypes=FLOATS, tol=TOL, composed=True,
           lowp_grad_factor=COMPOSED_LOWP),
    OpSpec(
        "deg2rad",
        lambda a: fg.deg2rad(a),
        np.deg2rad,
        _unary(-360.0, 360.0),
        dtypes=NUMERIC,
        composed=True,
        out_dtype=_int_to_f32,
    ),
    OpSpec(
        "rad2deg",
        lambda a: fg.rad2deg(a),
        np.rad2deg,
        _unary(),
        dtypes=NUMERIC,
        tol={"float32": (1e-5, 1e-4)},
        composed=True,
        out_dtype=_int_to_f32,
    ),
    OpSpec(
        "heaviside",
        lambda a, v: fg.heaviside(a, v),
        np.heaviside,
        _heaviside_sample,
        dtypes=NUMERIC,
        ref_in_dtype=True,
        out_dtype=lambda dt: dt,
        composed=True,
        differentiable=False,
    ),
    # Inverse trigonometric and hyperbolic functions: inputs across the domain, its edges
    # and beyond (NaN); gradients checked up to the edges (0.999 for atanh's 1/(1 - x²)).
    OpSpec(
        "asin",
        lambda a: fg.asin(a),
        np.arcsin,
        _unary(-1.05, 1.05),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        out_dtype=_int_to_f32,
        grad_sample=_grad_unary(-0.99, 0.99, (0.0, 0.98, -0.98)),
        grad_snap=False,
    ),
    OpSpec(
        "acos",
        lambda a: fg.acos(a),
        np.arccos,
        _unary(-1.05, 1.05),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        out_dtype=_int_to_f32,
        grad_sample=_grad_unary(-0.99, 0.99, (0.0, 0.98, -0.98)),
        grad_snap=False,
    ),
    OpSpec(
        "atan",
        lambda a: fg.atan(a),
        np.arctan,
        _unary(-20.0, 20.0),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        out_dtype=_int_to_f32,
        grad_sample=_grad_unary(-10.0, 10.0, (0.0,)),
        grad_snap=False,
    ),
    OpSpec(
        "asinh",
        lambda a: fg.asinh(a),
        np.arcsinh,
        _unary(-1e4, 1e4),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        out_dtype=_int_to_f32,
        grad_sample=_grad_unary(-50.0, 50.0, (0.0, 1e-3, -1e-3)),
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "acosh",
        lambda a: fg.acosh(a),
        np.arccosh,
        _unary(0.9, 1e4),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        out_dtype=_int_to_f32,
        grad_sample=_grad_unary(1.05, 50.0, (1.01, 1e3)),
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "atanh",
        lambda a: fg.atanh(a),
        np.arctanh,
        _unary(-1.05, 1.05),
        dtypes=NUMERIC,
        tol=TOL,
        composed=True,
        out_dtype=_int_to_f32,
        grad_sample=_grad_unary(-0.99, 0.99, (0.0, 0.999, -0.999)),
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "erfinv",
        lambda a: fg.erfinv(a),
        sp.erfinv,
        _unary(-1.02, 1.02),
        dtypes=FLOATS,
        tol={
            "float64": (1e-10, 1e-12),
            "float32": (1e-5, 1e-6),
            "float16": (2e-3, 2e-3),
            "bfloat16": (1.6e-2, 1e-2),
        },
        composed=True,
        grad_sample=_grad_unary(-0.99, 0.99, (0.0, 0.95, -0.95)),
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "lgamma",
        lambda a: fg.lgamma(a),
        _lgamma_ref,
        _unary(-4.5, 8.0),
        dtypes=FLOATS,
        tol={
            "float64": (1e-10, 1e-12),
            "float32": (1e-5, 1e-5),
            "float16": (2e-3, 2e-3),
            "bfloat16": (1.6e-2, 1e-2),
        },
        composed=True,
        grad_sample=_gamma_grad_sample,
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "digamma",
        lambda a: fg.digamma(a),
        sp.digamma,
        _unary(-4.5, 8.0),
        dtypes=FLOATS,
        tol={
            "float64": (1e-10, 1e-12),
            "float32": (1e-5, 1e-5),
            "float16": (2e-3, 2e-3),
            "bfloat16": (1.6e-2, 1e-2),
        },
        composed=True,
        grad_sample=_gamma_grad_sample,
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "polygamma",
        lambda a, n: fg.polygamma(n, a),
        _polygamma_ref,
        _poly_sample,
        dtypes=FLOATS,
        tol={
            "float64": (1e-10, 1e-12),
            "float32": (1e-5, 1e-5),
            "float16": (2e-3, 2e-3),
            "bfloat16": (1.6e-2, 1e-2),
        },
        composed=True,
        grad_sample=lambda draw, dtype: (_gamma_grad_sample(draw, dtype)[0], {"n": draw(st.integers(0, 3))}),
        grad_snap=False,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]


def _shift_sample(draw, dtype):
    """An integer tensor and a shift count below its width: a Python int, or a tensor of the
    same dtype that broadcasts with it."""
    bits = min(8 * np.dtype(dtype).itemsize, 63)  # counts of 63+ are clamped to 62 (documented)
    sa, sb = broadcastable_pair(draw)
    x = values(draw, sa, dtype, -100, 100)
    if draw(st.booleans()):
        return [x], {"n": draw(st.integers(0, bits - 1))}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return [x, np.asarray(rng.integers(0, bits, size=sb).astype(dtype))], {}


def _shift_np(fn):
    def ref(x, *n, **kw):
        return np.asarray(fn(x, n[0] if n else x.dtype.type(kw["n"])))

    return ref


SPECS += [
    OpSpec(
        "bitwise_left_shift",
        lambda x, *n, **kw: x << (n[0] if n else kw["n"]),
        _shift_np(np.left_shift),
        _shift_sample,
        dtypes=INTS,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
    OpSpec(
        "bitwise_right_shift",
        lambda x, *n, **kw: fg.bitwise_right_shift(x, n[0] if n else kw["n"]),
        _shift_np(np.right_shift),
        _shift_sample,
        dtypes=INTS,
        ref_in_dtype=True,
        composed=True,
        differentiable=False,
    ),
]
