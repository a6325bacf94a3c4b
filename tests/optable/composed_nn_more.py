"""Op-table specs for more ``torch.nn.functional`` compositions (``composed=True``): 1-D,
adaptive-max and power-average pooling, the shrink/threshold activations, channel shuffle,
alpha dropout, ``pdist`` and the Poisson, Gaussian, hinge-embedding, multi-margin and
soft-margin losses.

The references are float64 NumPy loops over PyTorch's documented definitions (one window,
one bin, one pair, one sample at a time), never the composition itself. Index arrays and
flags travel in the kwargs (flags as 0/1 ints).
"""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from . import _philox as P
from ._runner import round_to
from ._spec import FLOATS, NUMERIC, OpSpec, shapes, values

F = fg.nn.functional

TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
SUM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}
REDUCTIONS = ["mean", "sum", "none"]


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _reduce(loss, reduction):
    if reduction == "mean":
        return np.asarray(loss.mean())
    if reduction == "sum":
        return np.asarray(loss.sum())
    return loss


def _distinct(draw, shape, dtype):
    """Values without ties (a tie moves a max's index under a finite-difference step or a
    low-precision rounding): a permutation of multiples of 0.25, exact in every float dtype."""
    n = int(np.prod(shape))
    a = (_rng(draw).permutation(n).reshape(shape) * 0.25 - n * 0.125).astype(np.float64)
    return a.astype(np.float32 if dtype == "bfloat16" else dtype)


def _g(sample):
    return lambda draw, dtype: sample(draw, "float64", grad=True)


# ---------------------------------------------------------------------------
# 1-D pooling: windows along the last dim
# ---------------------------------------------------------------------------


def _out_len(n, k, s, p, d, ceil):
    num = n + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def _pool1d_sample(avg: bool):
    def sample(draw, dtype, grad=False):
        k, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        p = draw(st.integers(0, k // 2))
        d = 1 if avg else draw(st.integers(1, 2))
        n = draw(st.integers(max(1, d * (k - 1) + 1 - 2 * p), 8))
        batch = draw(st.sampled_from([(), (0,), (1,), (2,)] if not grad else [(), (1,), (2,)]))
        shape = batch + (draw(st.integers(1, 3)), n)
        x = values(draw, shape, dtype) if avg else _distinct(draw, shape, dtype)
        kw = {
            "kernel_size": k,
            "stride": s if draw(st.booleans()) else None,
            "padding": p,
            "ceil_mode": int(draw(st.booleans())),
        }
        if avg:
            kw["count_include_pad"] = int(draw(st.booleans()))
        else:
            kw["dilation"] = d
        return [x], kw

    return sample


def _max_pool1d_np(x, kernel_size, stride, padding, ceil_mode, dilation):
    s = stride or kernel_size
    n = x.shape[-1]
    o = _out_len(n, kernel_size, s, padding, dilation, ceil_mode)
    out = np.full(x.shape[:-1] + (o,), -np.inf)
    idx = np.zeros(x.shape[:-1] + (o,), np.int64)
    for j in range(o):
        cols = [j * s - padding + t * dilation for t in range(kernel_size)]
        cols = [c for c in cols if 0 <= c < n]
        if cols:
            win = x[..., cols]
            out[..., j] = win.max(-1)
            idx[..., j] = np.asarray(cols)[win.argmax(-1)]
    return out, idx


def _max_pool1d_grad_sample(draw, dtype):
    """Inputs where every window covers an input element (a window over padding only gives
    -inf, which has no derivative)."""
    while True:
        arrays, kw = _pool1d_sample(False)(draw, "float64", grad=True)
        if np.isfinite(_max_pool1d_np(arrays[0], **kw)[0]).all():
            return arrays, kw


def _max_pool1d_fg(x, kernel_size, stride, padding, ceil_mode, dilation):
    return F.max_pool1d(x, kernel_size, stride, padding, dilation, bool(ceil_mode), return_indices=True)


def _avg_pool1d_np(x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    s = stride or kernel_size
    n = x.shape[-1]
    o = _out_len(n, kernel_size, s, padding, 1, ceil_mode)
    out = np.zeros(x.shape[:-1] + (o,))
    for j in range(o):
        a = j * s - padding
        b = min(a + kernel_size, n + padding)
        padded = b - a
        a, b = max(a, 0), min(b, n)
        div = padded if count_include_pad else b - a
        out[..., j] = x[..., a:b].sum(-1) / div
    return out


def _avg_pool1d_fg(x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    return F.avg_pool1d(x, kernel_size, stride, padding, bool(ceil_mode), bool(count_include_pad))


def _bins(n, o):
    return [((i * n) // o, -(-((i + 1) * n) // o)) for i in range(o)]


def _aap1d_sample(draw, dtype, grad=False):
    batch = draw(st.sampled_from([(), (0,), (2,)] if not grad else [(), (2,)]))
    shape = batch + (draw(st.integers(1, 3)), draw(st.integers(1, 8)))
    return [values(draw, shape, dtype)], {"output_size": draw(st.integers(1, 5))}


def _aap1d_np(x, output_size):
    n = x.shape[-1]
    return np.stack([x[..., a:b].mean(-1) for a, b in _bins(n, output_size)], -1)


def _amp2d_sample(draw, dtype, grad=False):
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    shape = batch + (draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    size = draw(
        st.one_of(
            st.integers(1, 4),
            st.tuples(st.integers(1, 4), st.integers(1, 4)),
            st.tuples(st.none(), st.integers(1, 3)),
        )
    )
    return [_distinct(draw, shape, dtype)], {"output_size": size}


def _amp2d_np(x, output_size):
    h, w = x.shape[-2:]
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    oh = h if oh is None else oh
    ow = w if ow is None else ow
    out = np.zeros(x.shape[:-2] + (oh, ow))
    idx = np.zeros(x.shape[:-2] + (oh, ow), np.int64)
    for i, (h0, h1) in enumerate(_bins(h, oh)):
        for j, (w0, w1) in enumerate(_bins(w, ow)):
            win = x[..., h0:h1, w0:w1].reshape(x.shape[:-2] + (-1,))
            out[..., i, j] = win.max(-1)
            li = win.argmax(-1)
            idx[..., i, j] = (h0 + li // (w1 - w0)) * w + w0 + li % (w1 - w0)
    return out, idx


def _amp1d_sample(draw, dtype, grad=False):
    batch = draw(st.sampled_from([(), (2,)]))
    shape = batch + (draw(st.integers(1, 3)), draw(st.integers(1, 8)))
    return [_distinct(draw, shape, dtype)], {"output_size": draw(st.integers(1, 5))}


def _amp1d_np(x, output_size):
    v, i = _amp2d_np(x[..., None, :], (1, output_size))
    return v[..., 0, :], i[..., 0, :]


def _lp_sample(two_d: bool):
    def sample(draw, dtype, grad=False):
        p = draw(st.sampled_from([1.0, 2.0, 3.0, 1.5]))
        kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        batch = draw(st.sampled_from([(), (2,)] if two_d else [(2,)]))
        spatial = (
            (draw(st.integers(kh, 6)), draw(st.integers(kw, 6))) if two_d else (draw(st.integers(kw, 8)),)
        )
        shape = batch + (draw(st.integers(1, 2)),) + spatial
        x = values(draw, shape, dtype, 0.25, 2.0)
        stride = None
        if draw(st.booleans()):
            stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) if two_d else draw(st.integers(1, 3))
        return [x], {
            "norm_type": p,
            "kernel_size": (kh, kw) if two_d else kw,
            "stride": stride,
            "ceil_mode": int(draw(st.booleans())),
        }

    return sample


def _lp_np(x, norm_type, kernel_size, stride, ceil_mode):
    """(Σ x^p)^(1/p) per window, scaled by area / clipped count where a ceil-mode window
    runs past the input (PyTorch composes it from an average pool with zero padding)."""
    two_d = isinstance(kernel_size, tuple)
    ks = kernel_size if two_d else (1, kernel_size)
    st_ = (stride if two_d else (1, stride)) if stride is not None else ks
    xx = x if two_d else x[..., None, :]
    h, w = xx.shape[-2:]
    oh = _out_len(h, ks[0], st_[0], 0, 1, ceil_mode)
    ow = _out_len(w, ks[1], st_[1], 0, 1, ceil_mode)
    out = np.zeros(xx.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * st_[0], j * st_[1]
            win = xx[..., h0 : min(h0 + ks[0], h), w0 : min(w0 + ks[1], w)] ** norm_type
            cnt = win.shape[-2] * win.shape[-1]
            out[..., i, j] = (win.sum((-2, -1)) * (ks[0] * ks[1]) / cnt) ** (1.0 / norm_type)
    return out if two_d else out[..., 0, :]


def _lp_fg(two_d: bool):
    def run(x, norm_type, kernel_size, stride, ceil_mode):
        f = F.lp_pool2d if two_d else F.lp_pool1d
        return f(x, norm_type, kernel_size, stride, bool(ceil_mode))

    return run


# ---------------------------------------------------------------------------
# activations, channel shuffle, alpha dropout
# ---------------------------------------------------------------------------


def _shrink_sample(draw, dtype, grad=False):
    shape = draw(shapes(0 if not grad else 1, 3, 0 if not grad else 1, 4))
    return [values(draw, shape, dtype)], {"lambd": draw(st.sampled_from([0.5, 1.0, 0.0, 2.0]))}


def _softshrink_np(x, lambd):
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0.0))


def _hardshrink_np(x, lambd):
    return np.where(np.abs(x) > lambd, x, 0.0)


def _threshold_sample(draw, dtype, grad=False):
    shape = draw(shapes(0 if not grad else 1, 3, 0 if not grad else 1, 4))
    return [values(draw, shape, dtype)], {
        "threshold": draw(st.sampled_from([0.0, 1.0, -1.5])),
        # uint8 cannot hold -3.0: PyTorch (and ferrograd) refuse it with an overflow error.
        "value": draw(st.sampled_from([0.0, 2.0] if dtype == "uint8" else [0.0, 2.0, -3.0])),
    }


def _shuffle_sample(draw, dtype):
    g = draw(st.integers(1, 3))
    shape = (draw(st.integers(0, 2)), g * draw(st.integers(1, 3))) + draw(shapes(1, 2, 1, 3))
    return [values(draw, shape, dtype)], {"groups": g}


def _shuffle_np(x, groups):
    n, c = x.shape[:2]
    out = np.empty_like(x)
    for k in range(c):
        # output channel k = j * groups + i takes input channel i * (c / groups) + j
        j, i = divmod(k, groups)
        out[:, k] = x[:, i * (c // groups) + j]
    return out


def _adrop_sample(draw, dtype):
    shape = draw(shapes(0, 3, 0, 4))
    return [values(draw, shape, dtype)], {
        "seed": draw(st.integers(0, 2**64 - 1)),
        "p": draw(st.sampled_from([0.0, 0.2, 0.5, 1.0])),
        "training": int(draw(st.booleans()) or draw(st.booleans())),
        "dt": dtype,
    }


def _adrop_fg(x, seed, p, training, dt):
    fg.manual_seed(seed)
    return F.alpha_dropout(x, p, bool(training))


def _adrop_np(x, seed, p, training, dt):
    if not training or p == 0.0 or x.size == 0:
        return x
    if p == 1.0:
        return x * 0.0
    alpha = 1.7580993408473766
    keep = P.bernoulli(seed, 0, round_to(np.full(x.shape, 1.0 - p), dt)).astype(np.float64)
    a = 1.0 / math.sqrt((alpha * alpha * p + 1.0) * (1.0 - p))
    return x * keep * a + (keep - 1.0) * alpha * a + alpha * a * p


# ---------------------------------------------------------------------------
# pdist
# ---------------------------------------------------------------------------


def _pdist_sample(draw, dtype, grad=False):
    n = draw(st.integers(1 if grad else 0, 5))
    m = draw(st.integers(1, 4))
    p = draw(st.sampled_from([1.0, 2.0, 3.0, math.inf] + ([] if grad else [0.0, 0.5])))
    return [values(draw, (n, m), dtype)], {"p": p}


def _pdist_np(x, p):
    n = x.shape[0]
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            d = np.abs(x[i] - x[j])
            if p == 0:
                out.append(float((d != 0).sum()))
            elif p == math.inf:
                out.append(d.max())
            else:
                out.append((d**p).sum() ** (1.0 / p))
    return np.asarray(out, np.float64).reshape(len(out))


# ---------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------


def _pnll_sample(draw, dtype, grad=False):
    shape = draw(shapes(0 if not grad else 1, 3, 0 if not grad else 1, 4))
    log_input = int(draw(st.booleans()))
    x = values(draw, shape, dtype, -2.0, 2.0) if log_input else values(draw, shape, dtype, 0.25, 3.0)
    t = values(draw, shape, dtype, 0.0, 4.0)
    if draw(st.booleans()):
        t = np.round(t).astype(t.dtype)  # counts, so the Stirling term's t <= 1 cut shows
    return [x, t], {
        "log_input": log_input,
        "full": int(draw(st.booleans())),
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _pnll_np(x, t, log_input, full, reduction):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + 1e-8)
    if full:
        ts = np.where(t > 1, t, 2.0)
        loss = loss + np.where(t > 1, ts * np.log(ts) - ts + 0.5 * np.log(2 * np.pi * ts), 0.0)
    return _reduce(loss, reduction)


def _pnll_fg(x, t, log_input, full, reduction):
    return F.poisson_nll_loss(x, t, log_input=bool(log_input), full=bool(full), reduction=reduction)


def _gnll_sample(draw, dtype, grad=False):
    shape = draw(shapes(1, 3, 1, 4))
    mode = draw(st.sampled_from(["same", "drop_last", "last_one"]))
    vshape = {"same": shape, "drop_last": shape[:-1], "last_one": shape[:-1] + (1,)}[mode]
    return [
        values(draw, shape, dtype),
        values(draw, shape, dtype),
        values(draw, vshape, dtype, 0.25, 2.0),
    ], {"full": int(draw(st.booleans())), "reduction": draw(st.sampled_from(REDUCTIONS))}


def _gnll_np(x, t, var, full, reduction):
    if var.shape != x.shape and var.shape == x.shape[:-1]:
        var = var[..., None]
    v = np.maximum(var, 1e-6)
    loss = 0.5 * (np.log(v) + (x - t) ** 2 / v)
    if full:
        loss = loss + 0.5 * np.log(2 * np.pi)
    return _reduce(loss, reduction)


def _gnll_fg(x, t, var, full, reduction):
    return F.gaussian_nll_loss(x, t, var, full=bool(full), reduction=reduction)


def _sign_target(draw, shape):
    return np.where(_rng(draw).random(shape) < 0.5, -1, 1).astype(np.int64)


def _hinge_sample(draw, dtype, grad=False):
    shape = draw(shapes(0 if not grad else 1, 3, 0 if not grad else 1, 4))
    return [values(draw, shape, dtype)], {
        "target": _sign_target(draw, shape),
        "margin": draw(st.sampled_from([1.0, 0.5, 2.0])),
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _hinge_np(x, target, margin, reduction):
    return _reduce(np.where(target == 1, x, np.maximum(margin - x, 0.0)), reduction)


def _hinge_fg(x, target, margin, reduction):
    t = fg.tensor(target, device=x.device).to(x.dtype)
    return F.hinge_embedding_loss(x, t, margin=margin, reduction=reduction)


def _mm_sample(draw, dtype, grad=False):
    c = draw(st.integers(1 if not grad else 2, 4))
    two_d = draw(st.booleans())
    shape = (draw(st.integers(0 if not grad else 1, 3)), c) if two_d else (c,)
    rng = _rng(draw)
    t = rng.integers(0, c, size=shape[:1] if two_d else ()).astype(np.int64)
    w = values(draw, (c,), "float64", 0.5, 2.0) if draw(st.booleans()) else None
    return [values(draw, shape, dtype)], {
        "target": t,
        "p": draw(st.sampled_from([1, 2])),
        "margin": draw(st.sampled_from([1.0, 0.5])),
        "weight": w,
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _mm_np(x, target, p, margin, weight, reduction):
    xx = x.reshape(-1, x.shape[-1])
    tt = np.asarray(target).reshape(-1)
    c = xx.shape[1]
    loss = np.zeros(xx.shape[0])
    for i in range(xx.shape[0]):
        y = tt[i]
        for j in range(c):
            if j == y:
                continue
            z = max(margin - xx[i, y] + xx[i, j], 0.0) ** p
            loss[i] += z * (1.0 if weight is None else weight[y])
    loss = loss / c
    if x.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def _mm_fg(x, target, p, margin, weight, reduction):
    dev = x.device
    w = None if weight is None else fg.tensor(weight, dtype=x.dtype, device=dev)
    return F.multi_margin_loss(
        x, fg.tensor(target, device=dev), p=p, margin=margin, weight=w, reduction=reduction
    )


def _sml_sample(draw, dtype, grad=False):
    shape = draw(shapes(0 if not grad else 1, 3, 0 if not grad else 1, 4))
    t = _sign_target(draw, shape).astype(np.float32 if dtype == "bfloat16" else dtype)
    return [values(draw, shape, dtype, -4.0, 4.0), t], {"reduction": draw(st.sampled_from(REDUCTIONS))}


def _sml_np(x, t, reduction):
    return _reduce(np.logaddexp(0.0, -t * x), reduction)


SPECS: list[OpSpec] = [
    OpSpec(
        "max_pool1d",
        _max_pool1d_fg,
        _max_pool1d_np,
        _pool1d_sample(False),
        dtypes=FLOATS,
        out_dtype=lambda dtype: (dtype, "int64"),
        composed=True,
        grad_sample=_max_pool1d_grad_sample,
        grad_snap=False,
    ),
    OpSpec(
        "avg_pool1d",
        _avg_pool1d_fg,
        _avg_pool1d_np,
        _pool1d_sample(True),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=_g(_pool1d_sample(True)),
    ),
    OpSpec(
        "adaptive_avg_pool1d",
        lambda x, output_size: F.adaptive_avg_pool1d(x, output_size),
        _aap1d_np,
        _aap1d_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=_g(_aap1d_sample),
    ),
    OpSpec(
        "adaptive_max_pool2d",
        lambda x, output_size: F.adaptive_max_pool2d(x, output_size, return_indices=True),
        _amp2d_np,
        _amp2d_sample,
        dtypes=FLOATS,
        out_dtype=lambda dtype: (dtype, "int64"),
        composed=True,
        grad_sample=_g(_amp2d_sample),
        grad_snap=False,
    ),
    OpSpec(
        "adaptive_max_pool1d",
        lambda x, output_size: F.adaptive_max_pool1d(x, output_size, return_indices=True),
        _amp1d_np,
        _amp1d_sample,
        dtypes=FLOATS,
        out_dtype=lambda dtype: (dtype, "int64"),
        composed=True,
        grad_sample=_g(_amp1d_sample),
        grad_snap=False,
    ),
    OpSpec(
        "lp_pool2d",
        _lp_fg(True),
        _lp_np,
        _lp_sample(True),
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_lp_sample(True)),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "lp_pool1d",
        _lp_fg(False),
        _lp_np,
        _lp_sample(False),
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_lp_sample(False)),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "softshrink",
        lambda x, lambd: F.softshrink(x, lambd),
        _softshrink_np,
        _shrink_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=_g(_shrink_sample),
    ),
    OpSpec(
        "hardshrink",
        lambda x, lambd: F.hardshrink(x, lambd),
        _hardshrink_np,
        _shrink_sample,
        dtypes=FLOATS,
        composed=True,
        grad_sample=_g(_shrink_sample),
    ),
    OpSpec(
        "threshold",
        lambda x, threshold, value: F.threshold(x, threshold, value),
        lambda x, threshold, value: np.where(x > threshold, x, value),
        _threshold_sample,
        dtypes=NUMERIC,
        out_dtype=lambda dtype: dtype,
        composed=True,
        grad_sample=_g(_threshold_sample),
    ),
    OpSpec(
        "channel_shuffle",
        lambda x, groups: F.channel_shuffle(x, groups),
        _shuffle_np,
        _shuffle_sample,
        dtypes=NUMERIC,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "alpha_dropout",
        _adrop_fg,
        _adrop_np,
        _adrop_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "pdist",
        lambda x, p: F.pdist(x, p),
        _pdist_np,
        _pdist_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_pdist_sample),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "poisson_nll_loss",
        _pnll_fg,
        _pnll_np,
        _pnll_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_pnll_sample),
        grad_args=(0,),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "gaussian_nll_loss",
        _gnll_fg,
        _gnll_np,
        _gnll_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_gnll_sample),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "hinge_embedding_loss",
        _hinge_fg,
        _hinge_np,
        _hinge_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_hinge_sample),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "multi_margin_loss",
        _mm_fg,
        _mm_np,
        _mm_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_mm_sample),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "soft_margin_loss",
        lambda x, t, reduction: F.soft_margin_loss(x, t, reduction=reduction),
        _sml_np,
        _sml_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        grad_sample=_g(_sml_sample),
        grad_args=(0,),
        lowp_grad_factor=COMPOSED_LOWP,
    ),
]
