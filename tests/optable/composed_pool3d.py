"""Op-table specs for 3-D pooling and max-unpooling (``composed=True``): ``max_pool3d``,
``avg_pool3d``, ``adaptive_avg_pool3d``, ``adaptive_max_pool3d`` and ``max_unpool1d/2d/3d``.

The references are float64 NumPy loops over PyTorch's documented definitions (one output
position, one window at a time), never the composition itself. Flags travel in the kwargs as
0/1 ints.
"""

from __future__ import annotations

import itertools

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, values
from .composed_nn_more import _bins, _distinct, _out_len

F = fg.nn.functional

TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
SUM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}


def _g(sample):
    return lambda draw, dtype: sample(draw, "float64", grad=True)


def _window(o, k, s, p, d, n):
    """Input positions of window ``o`` along one dim (those inside ``[0, n)``)."""
    return [c for c in (o * s - p + t * d for t in range(k)) if 0 <= c < n]


# ---------------------------------------------------------------------------
# max_pool3d / avg_pool3d
# ---------------------------------------------------------------------------


def _pool3d_sample(avg: bool):
    def sample(draw, dtype, grad=False):
        uniform = draw(st.booleans())
        k = tuple(draw(st.integers(1, 3)) for _ in range(3))
        if uniform:
            k = (k[0],) * 3
        s = tuple(draw(st.integers(1, 3)) for _ in range(3))
        p = tuple(draw(st.integers(0, kk // 2)) for kk in k)
        if uniform:
            p = (p[0],) * 3
        d = (1, 1, 1) if avg else tuple(draw(st.integers(1, 2)) for _ in range(3))
        sp = tuple(
            draw(st.integers(lo := max(1, dd * (kk - 1) + 1 - 2 * pp), max(lo, 5 if not grad else 4)))
            for kk, pp, dd in zip(k, p, d, strict=True)
        )
        batch = draw(st.sampled_from([(), (1,), (2,)] if grad else [(), (0,), (1,), (2,)]))
        shape = batch + (draw(st.integers(1, 2)),) + sp
        x = values(draw, shape, dtype) if avg else _distinct(draw, shape, dtype)
        kw = {
            "kernel_size": k[0] if uniform else k,
            "stride": s if draw(st.booleans()) else None,
            "padding": p[0] if uniform else p,
            "ceil_mode": int(draw(st.booleans())),
        }
        if avg:
            kw["count_include_pad"] = int(draw(st.booleans()))
            kw["divisor_override"] = draw(st.sampled_from([None, None, 3]))
        else:
            kw["dilation"] = d
        return [x], kw

    return sample


def _three(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v)


def _max_pool3d_np(x, kernel_size, stride, padding, ceil_mode, dilation):
    k, p, d = _three(kernel_size), _three(padding), _three(dilation)
    s = k if stride is None else _three(stride)
    dims = x.shape[-3:]
    out_sp = tuple(
        _out_len(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(dims, k, s, p, d, strict=True)
    )
    lead = x.shape[:-3]
    out = np.full(lead + out_sp, -np.inf)
    idx = np.zeros(lead + out_sp, np.int64)
    flat = x.reshape(lead + (int(np.prod(dims)),))
    for o in itertools.product(*(range(n) for n in out_sp)):
        wins = [_window(o[i], k[i], s[i], p[i], d[i], dims[i]) for i in range(3)]
        pos = [(a * dims[1] + b) * dims[2] + c for a in wins[0] for b in wins[1] for c in wins[2]]
        if pos:
            w = flat[..., pos]
            out[(...,) + o] = w.max(-1)
            idx[(...,) + o] = np.asarray(pos)[w.argmax(-1)]
    return out, idx


def _max_pool3d_fg(x, kernel_size, stride, padding, ceil_mode, dilation):
    return F.max_pool3d(x, kernel_size, stride, padding, dilation, bool(ceil_mode), return_indices=True)


def _max_pool3d_sample(draw, dtype, grad=False):
    """Inputs where every window covers an input element (a window over padding only, which
    dilation allows, has no maximum to index)."""
    while True:
        arrays, kw = _pool3d_sample(False)(draw, dtype, grad=grad)
        if np.isfinite(_max_pool3d_np(arrays[0].astype(np.float64), **kw)[0]).all():
            return arrays, kw


def _avg_pool3d_np(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, p = _three(kernel_size), _three(padding)
    s = k if stride is None else _three(stride)
    dims = x.shape[-3:]
    out_sp = tuple(_out_len(n, kk, ss, pp, 1, ceil_mode) for n, kk, ss, pp in zip(dims, k, s, p, strict=True))
    out = np.zeros(x.shape[:-3] + out_sp)
    for o in itertools.product(*(range(n) for n in out_sp)):
        sl, padded, real = [], 1, 1
        for i in range(3):
            a = o[i] * s[i] - p[i]
            b = min(a + k[i], dims[i] + p[i])
            padded *= b - a
            a, b = max(a, 0), min(b, dims[i])
            real *= b - a
            sl.append(slice(a, b))
        div = divisor_override or (padded if count_include_pad else real)
        out[(...,) + o] = x[(...,) + tuple(sl)].sum((-3, -2, -1)) / div
    return out


def _avg_pool3d_fg(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return F.avg_pool3d(
        x, kernel_size, stride, padding, bool(ceil_mode), bool(count_include_pad), divisor_override
    )


# ---------------------------------------------------------------------------
# adaptive pooling
# ---------------------------------------------------------------------------


def _adaptive_sample(distinct: bool):
    def sample(draw, dtype, grad=False):
        batch = draw(st.sampled_from([(), (2,)] if grad else [(), (0,), (2,)]))
        shape = batch + (draw(st.integers(1, 2)),) + tuple(draw(st.integers(1, 5)) for _ in range(3))
        size = draw(
            st.one_of(
                st.integers(1, 3),
                st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4)),
                st.tuples(st.none(), st.integers(1, 3), st.none()),
            )
        )
        x = _distinct(draw, shape, dtype) if distinct else values(draw, shape, dtype)
        return [x], {"output_size": size}

    return sample


def _adaptive_sizes(x, output_size):
    size = (output_size,) * 3 if isinstance(output_size, int) else output_size
    return tuple(n if o is None else o for n, o in zip(x.shape[-3:], size, strict=True))


def _aap3d_np(x, output_size):
    out_sp = _adaptive_sizes(x, output_size)
    bins = [_bins(n, o) for n, o in zip(x.shape[-3:], out_sp, strict=True)]
    out = np.zeros(x.shape[:-3] + out_sp)
    for o in itertools.product(*(range(n) for n in out_sp)):
        sl = tuple(slice(*bins[i][o[i]]) for i in range(3))
        out[(...,) + o] = x[(...,) + sl].mean((-3, -2, -1))
    return out


def _amp3d_np(x, output_size):
    out_sp = _adaptive_sizes(x, output_size)
    dims = x.shape[-3:]
    bins = [_bins(n, o) for n, o in zip(dims, out_sp, strict=True)]
    lead = x.shape[:-3]
    out = np.zeros(lead + out_sp)
    idx = np.zeros(lead + out_sp, np.int64)
    flat = x.reshape(lead + (int(np.prod(dims)),))
    for o in itertools.product(*(range(n) for n in out_sp)):
        rng = [range(*bins[i][o[i]]) for i in range(3)]
        pos = [(a * dims[1] + b) * dims[2] + c for a in rng[0] for b in rng[1] for c in rng[2]]
        w = flat[..., pos]
        out[(...,) + o] = w.max(-1)
        idx[(...,) + o] = np.asarray(pos)[w.argmax(-1)]
    return out, idx


# ---------------------------------------------------------------------------
# max_unpool: values and their flat indices from a reference max pool
# ---------------------------------------------------------------------------


def _unpool_sample(nd: int):
    def sample(draw, dtype, grad=False):
        k = draw(st.integers(1, 3))
        # stride >= kernel: windows do not overlap, so the indices are distinct (PyTorch leaves
        # the result at a repeated index unspecified).
        s = draw(st.integers(k, 3))
        p = draw(st.integers(0, k // 2))
        sp = tuple(draw(st.integers(max(1, k - 2 * p), 5)) for _ in range(nd))
        batch = draw(st.sampled_from([(), (2,)]))
        shape = batch + (draw(st.integers(1, 2)),) + sp
        x = _distinct(draw, shape, "float64")
        # A reference max pool of x gives distinct indices (values, their positions).
        xx = x.reshape(x.shape[:-nd] + (1,) * (3 - nd) + sp)
        v, i = _max_pool3d_np(
            xx, (1,) * (3 - nd) + (k,) * nd, (1,) * (3 - nd) + (s,) * nd, (0,) * (3 - nd) + (p,) * nd, 0, 1
        )
        v = v.reshape(v.shape[: len(batch) + 1] + v.shape[-nd:])
        i = i.reshape(v.shape)
        if not np.isfinite(v).all():
            v = np.where(np.isfinite(v), v, 0.0)
        vals = values(draw, v.shape, dtype) if not grad else v
        return [vals.astype(np.float32 if dtype == "bfloat16" else dtype), i], {
            "kernel_size": k,
            "stride": s,
            "padding": p,
            "output_size": sp,
        }

    return sample


def _unpool_np(nd: int):
    def ref(x, indices, kernel_size, stride, padding, output_size):
        lead = x.shape[:-nd]
        out = np.zeros(lead + (int(np.prod(output_size)),))
        np.put_along_axis(out, indices.reshape(lead + (-1,)), x.reshape(lead + (-1,)), -1)
        return out.reshape(lead + tuple(output_size))

    return ref


def _unpool_fg(nd: int):
    fn = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[nd - 1]
    return lambda x, indices, kernel_size, stride, padding, output_size: fn(
        x, indices, kernel_size, stride, padding, output_size
    )


SPECS: list[OpSpec] = [
    OpSpec(
        "max_pool3d",
        _max_pool3d_fg,
        _max_pool3d_np,
        _max_pool3d_sample,
        dtypes=FLOATS,
        out_dtype=lambda dtype: (dtype, "int64"),
        composed=True,
        grad_sample=_g(_max_pool3d_sample),
        grad_snap=False,
    ),
    OpSpec(
        "avg_pool3d",
        _avg_pool3d_fg,
        _avg_pool3d_np,
        _pool3d_sample(True),
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_pool3d_sample(True)),
    ),
    OpSpec(
        "adaptive_avg_pool3d",
        lambda x, output_size: F.adaptive_avg_pool3d(x, output_size),
        _aap3d_np,
        _adaptive_sample(False),
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_adaptive_sample(False)),
    ),
    OpSpec(
        "adaptive_max_pool3d",
        lambda x, output_size: F.adaptive_max_pool3d(x, output_size, return_indices=True),
        _amp3d_np,
        _adaptive_sample(True),
        dtypes=FLOATS,
        out_dtype=lambda dtype: (dtype, "int64"),
        composed=True,
        grad_sample=_g(_adaptive_sample(True)),
        grad_snap=False,
    ),
    *(
        OpSpec(
            f"max_unpool{nd}d",
            _unpool_fg(nd),
            _unpool_np(nd),
            _unpool_sample(nd),
            dtypes=FLOATS,
            tol=TOL,
            composed=True,
            grad_sample=_g(_unpool_sample(nd)),
            grad_args=(0,),
        )
        for nd in (1, 2, 3)
    ),
]
