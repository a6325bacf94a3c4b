"""Op-table specs for functionals composed in Python of registry ops (``composed=True``).

``torch.nn.functional`` names that ferrograd builds from registry ops
(pixel shuffles, interpolation, instance/group/local-response norms,
distances, bilinear, the composed activations and losses, channel dropout).
Each runs through every column like a registry op; the references are
float64 NumPy implementations written from PyTorch's documented formulas,
independently of the composition (interpolation as one weight matrix per
spatial dim, pixel shuffle by strided assignment, norms by explicit loops).
"""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from . import _philox as P
from ._runner import round_to
from ._spec import ALL, FLOATS, OpSpec, broadcastable_pair, shapes, values

F = fg.nn.functional

# Compositions round at every step (several ops per result), so the low
# precisions get wider tolerances than a single fused op.
TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
NORM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
# Float32 VJPs of compositions add the roundings of every step (a norm's g - mean(g) -
# x̂·mean(g·x̂) from separate ops, a distance's d/‖d‖); float16/bfloat16 round each
# intermediate op's result to the low dtype (no single float32 pass as fused ops have).
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}
# group_norm's float32 VJP runs through separate mean, var, subtract, rsqrt and multiply ops
# over whole groups (up to 2 channels x 9 elements): each rounds terms of the cotangent's size.
GNORM_LOWP = {"float32": 32.0, "float16": 16.0, "bfloat16": 16.0}


def _t(a, like):
    """A tensor of ``a`` with ``like``'s dtype and device (kwargs arrays: weights, running stats)."""
    return None if a is None else fg.tensor(np.asarray(a, np.float64), dtype=like.dtype, device=like.device)


# ---------------------------------------------------------------------------
# pixel shuffle
# ---------------------------------------------------------------------------


def _shuffle_sample(unshuffle: bool):
    def sample(draw, dtype):
        r = draw(st.integers(1, 3))
        lead = draw(shapes(0, 2, 0, 2))
        c = draw(st.integers(1, 2))
        h, w = draw(st.integers(0, 3)), draw(st.integers(1, 3))
        shape = (*lead, c, h * r, w * r) if unshuffle else (*lead, c * r * r, h, w)
        return [values(draw, shape, dtype)], {"r": r}

    return sample


def _ps_np(x, r):
    *lead, c, h, w = x.shape
    oc = c // (r * r)
    out = np.empty((*lead, oc, h * r, w * r), dtype=x.dtype)
    for k in range(oc):
        for i in range(r):
            for j in range(r):
                out[..., k, i::r, j::r] = x[..., k * r * r + i * r + j, :, :]
    return out


def _pu_np(x, r):
    *lead, c, hr, wr = x.shape
    out = np.empty((*lead, c * r * r, hr // r, wr // r), dtype=x.dtype)
    for k in range(c):
        for i in range(r):
            for j in range(r):
                out[..., k * r * r + i * r + j, :, :] = x[..., k, i::r, j::r]
    return out


# ---------------------------------------------------------------------------
# interpolation: one (out, in) weight matrix per spatial dim
# ---------------------------------------------------------------------------

MODES_ND = {
    "nearest": (1, 2, 3),
    "nearest-exact": (1, 2, 3),
    "area": (1, 2, 3),
    "linear": (1,),
    "bilinear": (2,),
    "trilinear": (3,),
    "bicubic": (2,),
}


def _cubic(d: float, a: float = -0.75) -> float:
    d = abs(d)
    if d <= 1:
        return (a + 2) * d**3 - (a + 3) * d**2 + 1
    if d < 2:
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return 0.0


def _interp_matrix(mode, n_in, n_out, scale, align):
    m = np.zeros((n_out, n_in))
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
        for i in range(n_out):
            if mode == "nearest" and n_out == n_in:
                src = i
            elif mode == "nearest":
                src = int(np.floor(np.float32(i) * s))
            else:
                src = int(np.floor(np.float32((i + 0.5) * np.float64(s))))
            m[i, min(src, n_in - 1)] = 1.0
        return m
    if mode == "area":
        for i in range(n_out):
            lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
            m[i, lo:hi] = 1.0 / (hi - lo)
        return m
    if align:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale else n_in / n_out
    for i in range(n_out):
        src = ratio * i if align else ratio * (i + 0.5) - 0.5
        if mode == "bicubic":
            i0 = math.floor(src)
            for k in range(-1, 3):
                m[i, min(max(i0 + k, 0), n_in - 1)] += _cubic(src - (i0 + k))
        else:
            src = max(src, 0.0)
            i0 = min(math.floor(src), n_in - 1)
            lam = min(max(src - i0, 0.0), 1.0)
            m[i, i0] += 1 - lam
            m[i, min(i0 + 1, n_in - 1)] += lam
    return m


def _interp_sample(draw, dtype, grad=False):
    mode = draw(st.sampled_from(sorted(MODES_ND)))
    nd = draw(st.sampled_from(MODES_ND[mode]))
    hi = 3 if grad or nd == 3 else 5
    spatial = tuple(draw(st.integers(1, hi)) for _ in range(nd))
    shape = (draw(st.integers(0 if not grad else 1, 2)), draw(st.integers(1, 2)), *spatial)
    kw = {"mode": mode, "size": None, "scale_factor": None, "align_corners": None}
    if draw(st.booleans()):
        kw["size"] = [draw(st.integers(1, 6 if not grad else 4)) for _ in range(nd)]
    else:
        f = [
            draw(st.sampled_from([1.0, 1.5, 2.0, 2.5, 3.0] + ([0.5, 0.75] if not grad else [])))
            for _ in range(nd)
        ]
        f = [max(v, 1.0 / s) for v, s in zip(f, spatial, strict=True)]  # at least one output element
        kw["scale_factor"] = f if nd > 1 or draw(st.booleans()) else f[0]
    if mode in ("linear", "bilinear", "trilinear", "bicubic"):
        kw["align_corners"] = draw(st.sampled_from([None, False, True]))
    return [values(draw, shape, dtype)], kw


def _interp_fg(x, mode, size, scale_factor, align_corners):
    return F.interpolate(x, size=size, scale_factor=scale_factor, mode=mode, align_corners=align_corners)


def _interp_np(x, mode, size, scale_factor, align_corners):
    nd = x.ndim - 2
    if size is not None:
        outs, scales = list(size), [None] * nd
    else:
        sf = scale_factor if isinstance(scale_factor, list) else [scale_factor] * nd
        outs = [math.floor(s * f) for s, f in zip(x.shape[2:], sf, strict=True)]
        scales = list(sf)
    for k in range(nd):
        d = 2 + k
        m = _interp_matrix(mode, x.shape[d], outs[k], scales[k], bool(align_corners))
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, d, 0), axes=(1, 0)), 0, d)
    return x


# ---------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------


def _inorm_sample(draw, dtype, grad=False):
    nsp = draw(st.integers(1, 2))
    spatial = tuple(draw(st.integers(1, 3)) for _ in range(nsp))
    if math.prod(spatial) < 2:
        spatial = (2,) + spatial[1:]
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial)
    dt = "float64" if grad else dtype
    x = values(draw, shape, dt, -3.0, 3.0)
    c = shape[1]
    params = [values(draw, (c,), dt, -2.0, 2.0) for _ in range(draw(st.integers(0, 2)))]
    use_input_stats = draw(st.booleans()) or draw(st.booleans())
    rm = values(draw, (c,), "float64", -1.0, 1.0)
    rv = values(draw, (c,), "float64", 0.5, 2.0)
    return [x, *params], {
        "use_input_stats": use_input_stats,
        "rm": rm,
        "rv": rv,
        "eps": 0.1 if grad else draw(st.sampled_from([1e-5, 0.1])),
    }


def _inorm_fg(x, *params, use_input_stats, rm, rv, eps):
    w = params[0] if params else None
    b = params[1] if len(params) > 1 else None
    return F.instance_norm(x, _t(rm, x), _t(rv, x), w, b, use_input_stats, 0.1, eps)


def _inorm_np(x, *params, use_input_stats, rm, rv, eps):
    c = x.shape[1]
    shape = (1, c) + (1,) * (x.ndim - 2)
    axes = tuple(range(2, x.ndim))
    if use_input_stats:
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    else:
        mean, var = rm.reshape(shape), rv.reshape(shape)
    y = (x - mean) / np.sqrt(var + eps)
    if params:
        y = y * params[0].reshape(shape)
    if len(params) > 1:
        y = y + params[1].reshape(shape)
    return y


def _gnorm_sample(draw, dtype, grad=False):
    g = draw(st.integers(1, 3))
    c = g * draw(st.integers(1, 2))
    spatial = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    shape = (draw(st.integers(1 if grad else 0, 2)), c, *spatial)
    dt = "float64" if grad else dtype
    x = values(draw, shape, dt, -3.0, 3.0)
    params = [values(draw, (c,), dt, -2.0, 2.0) for _ in range(draw(st.integers(0, 2)))]
    # (grad: eps = 0.1 bounds 1/std, as layer_norm's gradient samples do)
    return [x, *params], {"num_groups": g, "eps": 0.1 if grad else draw(st.sampled_from([1e-5, 0.1]))}


def _gnorm_fg(x, *params, num_groups, eps):
    return F.group_norm(x, num_groups, *params, eps=eps)


def _gnorm_np(x, *params, num_groups, eps):
    n, c = x.shape[:2]
    if x.size == 0:
        return x.copy()
    xg = x.reshape(n, num_groups, -1)
    mean = xg.mean(axis=-1, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=-1, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if params:
        y = y * params[0].reshape(shape)
    if len(params) > 1:
        y = y + params[1].reshape(shape)
    return y


def _lrn_sample(draw, dtype):
    spatial = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2))))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 5)), *spatial)
    return [values(draw, shape, dtype, -2.0, 2.0)], {
        "size": draw(st.integers(1, 4)),
        "alpha": draw(st.sampled_from([1e-4, 0.5])),
        "beta": draw(st.sampled_from([0.75, 0.5])),
        "k": draw(st.sampled_from([1.0, 2.0])),
    }


def _lrn_np(x, size, alpha, beta, k):
    c = x.shape[1]
    div = np.zeros_like(x)
    for ch in range(c):
        lo, hi = max(ch - size // 2, 0), min(ch + (size - 1) // 2, c - 1)
        div[:, ch] = (x[:, lo : hi + 1] ** 2).sum(axis=1)
    return x / (k + alpha / size * div) ** beta


# ---------------------------------------------------------------------------
# distances and bilinear
# ---------------------------------------------------------------------------


def _pair_sample(min_dims: int, max_side: int = 4):
    def sample(draw, dtype):
        sa, sb = broadcastable_pair(draw, min_dims=min_dims, max_dims=3, max_side=max_side)
        if len(sa) < min_dims:
            sa = (1,) * (min_dims - len(sa)) + sa
        if len(sb) < min_dims:
            sb = (1,) * (min_dims - len(sb)) + sb
        return [values(draw, sa, dtype), values(draw, sb, dtype)], {}

    return sample


def _cos_sample(draw, dtype):
    (a, b), _ = _pair_sample(1)(draw, dtype)
    nd = max(a.ndim, b.ndim)
    return [a, b], {"dim": draw(st.integers(-nd, nd - 1)), "eps": draw(st.sampled_from([1e-8, 0.5]))}


def _cos_grad_sample(draw, dtype):
    """Same-shape vectors of 2 or more elements: a length-1 vector's cosine is ±1 whatever its
    value, a gradient of exactly 0 that the float32 computation behind float16/bfloat16
    leaves at ~2^-24 (broadcasting is covered by the forward column)."""
    shape = draw(shapes(1, 3, 2, 3))
    return [values(draw, shape, "float64"), values(draw, shape, "float64")], {
        "dim": draw(st.integers(-len(shape), len(shape) - 1)),
        "eps": 1e-8,
    }


def _cos_np(a, b, dim, eps):
    a, b = np.broadcast_arrays(a, b)
    n1 = np.maximum(np.sqrt((a * a).sum(axis=dim)), eps)
    n2 = np.maximum(np.sqrt((b * b).sum(axis=dim)), eps)
    return (a * b).sum(axis=dim) / (n1 * n2)


def _pdist_sample(draw, dtype):
    (a, b), _ = _pair_sample(1)(draw, dtype)
    p = draw(st.sampled_from([1.0, 2.0, 3.0, 1.5, math.inf]))
    if p == math.inf and 0 in np.broadcast_shapes(a.shape, b.shape)[-1:]:
        p = 2.0  # the inf-norm of nothing has no value (PyTorch refuses it as well)
    return [a, b], {"p": p, "eps": draw(st.sampled_from([1e-6, 0.0, 0.25])), "keepdim": draw(st.booleans())}


def _pdist_np(a, b, p, eps, keepdim):
    d = np.abs(np.broadcast_arrays(a, b)[0] - np.broadcast_arrays(a, b)[1] + eps)
    if p == math.inf:
        out = d.max(axis=-1, keepdims=keepdim, initial=0.0)
    else:
        out = (d**p).sum(axis=-1, keepdims=keepdim) ** (1.0 / p)
    return out


def _bilinear_sample(draw, dtype):
    lead = draw(shapes(0, 2, 0, 3))
    i1, i2, o = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    arrays = [
        values(draw, (*lead, i1), dtype),
        values(draw, (*lead, i2), dtype),
        values(draw, (o, i1, i2), dtype),
    ]
    if draw(st.booleans()):
        arrays.append(values(draw, (o,), dtype))
    return arrays, {}


def _bilinear_np(x1, x2, w, b=None):
    out = np.einsum("...i,oij,...j->...o", x1, w, x2)
    return out if b is None else out + b


# ---------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------


def _unary(lo=-5.0, hi=5.0, **kw):
    def sample(draw, dtype):
        return [values(draw, draw(shapes(0, 3)), dtype, lo, hi)], dict(kw)

    return sample


def _softplus_np(x):
    return np.logaddexp(0.0, x)


def _hardtanh_sample(draw, dtype):
    lo = draw(st.sampled_from([-1.0, -2.5, 0.0]))
    return [values(draw, draw(shapes(0, 3)), dtype, -4.0, 4.0)], {
        "min_val": lo,
        "max_val": lo + draw(st.sampled_from([1.0, 2.0, 6.0])),
    }


def _glu_sample(draw, dtype):
    shape = list(draw(shapes(1, 3, 1, 3)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    shape[dim] *= 2
    return [values(draw, tuple(shape), dtype)], {"dim": dim}


def _glu_np(x, dim):
    a, b = np.split(x, 2, axis=dim)
    return a / (1 + np.exp(-b))


def _prelu_sample(draw, dtype):
    shape = draw(shapes(0, 4, 1, 3))
    c = shape[1] if len(shape) >= 2 else 1
    n = draw(st.sampled_from([1, c]))
    return [values(draw, shape, dtype), values(draw, (n,), dtype, -1.0, 1.0)], {}


def _prelu_np(x, w):
    if w.size > 1:
        w = w.reshape((w.size,) + (1,) * (x.ndim - 2))
    else:
        w = w.reshape(())
    return np.where(x > 0, x, w * x)


SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# ---------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]


def _np_reduce(loss, reduction):
    if reduction == "mean":
        return np.asarray(loss.mean())
    if reduction == "sum":
        return np.asarray(loss.sum())
    return loss


def _mrl_sample(draw, dtype):
    shape = draw(shapes(1, 2, 1, 4))
    t = np.where(np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(shape) < 0.5, -1.0, 1.0)
    return [
        values(draw, shape, dtype),
        values(draw, shape, dtype),
        t.astype(values(draw, (), dtype).dtype),
    ], {"margin": draw(st.sampled_from([0.0, 0.5])), "reduction": draw(st.sampled_from(REDUCTIONS))}


def _mrl_np(a, b, t, margin, reduction):
    return _np_reduce(np.maximum(-t * (a - b) + margin, 0.0), reduction)


def _triplet_sample(draw, dtype):
    shape = draw(
        st.sampled_from([(draw(st.integers(1, 3)), draw(st.integers(1, 4))), (draw(st.integers(1, 4)),)])
    )
    return [values(draw, shape, dtype) for _ in range(3)], {
        "margin": draw(st.sampled_from([1.0, 0.5])),
        "p": draw(st.sampled_from([1.0, 2.0, 3.0])),
        "swap": draw(st.booleans()),
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _triplet_np(a, p_, n, margin, p, swap, reduction):
    def dist(x, y):
        return (np.abs(x - y + 1e-6) ** p).sum(axis=-1) ** (1.0 / p)

    dn = dist(a, n)
    if swap:
        dn = np.minimum(dn, dist(p_, n))
    return _np_reduce(np.maximum(dist(a, p_) - dn + margin, 0.0), reduction)


def _cel_sample(draw, dtype, grad=False):
    # (grad: vectors of 2 or more elements; a length-1 vector's cosine is ±1, see _cos_sample)
    lo = 2 if grad else 1
    shape = draw(
        st.sampled_from([(draw(st.integers(1, 3)), draw(st.integers(lo, 4))), (draw(st.integers(lo, 4)),)])
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    t = np.where(rng.random(shape[:-1]) < 0.5, -1, 1).astype(np.int64)
    return [values(draw, shape, dtype), values(draw, shape, dtype)], {
        "target": t,
        "margin": draw(st.sampled_from([0.0, 0.3, -0.2])),
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _cel_fg(a, b, target, margin, reduction):
    return F.cosine_embedding_loss(
        a, b, fg.tensor(target, device=a.device), margin=margin, reduction=reduction
    )


def _cel_np(a, b, target, margin, reduction):
    cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    loss = np.where(target == 1, 1 - cos, np.maximum(cos - margin, 0.0))
    return _np_reduce(loss, reduction)


def _mlsm_sample(draw, dtype):
    shape = draw(
        st.sampled_from([(draw(st.integers(1, 3)), draw(st.integers(1, 4))), (draw(st.integers(1, 4)),)])
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    t = (rng.random(shape) < 0.5).astype(values(draw, (), dtype).dtype)
    w = values(draw, (shape[-1],), "float64", 0.5, 2.0) if draw(st.booleans()) else None
    return [values(draw, shape, dtype, -4.0, 4.0), t], {
        "weight": w,
        "reduction": draw(st.sampled_from(REDUCTIONS)),
    }


def _mlsm_fg(x, t, weight, reduction):
    return F.multilabel_soft_margin_loss(x, t, weight=_t(weight, x), reduction=reduction)


def _mlsm_np(x, t, weight, reduction):
    ls = -np.logaddexp(0.0, -x)
    lns = -np.logaddexp(0.0, x)
    loss = -(t * ls + (1 - t) * lns)
    if weight is not None:
        loss = loss * weight
    return _np_reduce(loss.mean(axis=-1), reduction)


# ---------------------------------------------------------------------------
# channel dropout: the mask is one Bernoulli draw per (sample, channel) from the shared stream
# ---------------------------------------------------------------------------


def _cdrop_sample(ranks: tuple[int, ...]):
    def sample(draw, dtype):
        nd = draw(st.sampled_from(ranks))
        shape = tuple(draw(st.integers(0 if k == 0 else 1, 3)) for k in range(nd))
        return [values(draw, shape, dtype)], {
            "seed": draw(st.integers(0, 2**64 - 1)),
            "p": draw(st.sampled_from([0.0, 0.2, 0.5, 1.0])),
            "training": draw(st.booleans()) or draw(st.booleans()),
            "dt": dtype,
        }

    return sample


def _cdrop_fg(fn, batched_dim):
    def run(x, seed, p, training, dt):
        fg.manual_seed(seed)
        return getattr(F, fn)(x, p, training)

    return run


def _cdrop_np(batched_dim):
    def ref(x, seed, p, training, dt):
        if not training or p == 0.0:
            return x
        xb = x[None] if x.ndim == batched_dim - 1 else x
        mshape = xb.shape[:2] + (1,) * (xb.ndim - 2)
        if p == 1.0:
            return np.zeros_like(x)
        probs = round_to(np.full(mshape, 1.0 - p), dt)  # the probabilities are a tensor of the dtype
        keep = P.bernoulli(seed, 0, probs).astype(np.float64)
        out = xb * keep / (1.0 - p)
        return out[0] if x.ndim == batched_dim - 1 else out

    return ref


def _g(sample):
    """A gradient sampler: float64 draws of ``sample``."""
    return lambda draw, dtype: sample(draw, "float64")


SPECS: list[OpSpec] = [
    OpSpec(
        "pixel_shuffle",
        lambda x, r: F.pixel_shuffle(x, r),
        _ps_np,
        _shuffle_sample(False),
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "pixel_unshuffle",
        lambda x, r: F.pixel_unshuffle(x, r),
        _pu_np,
        _shuffle_sample(True),
        dtypes=ALL,
        ref_in_dtype=True,
        composed=True,
    ),
    OpSpec(
        "interpolate",
        _interp_fg,
        _interp_np,
        _interp_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _interp_sample(draw, "float64", grad=True),
        grad_examples=10,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "instance_norm",
        _inorm_fg,
        _inorm_np,
        _inorm_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _inorm_sample(draw, dtype, grad=True),
        grad_examples=8,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "group_norm",
        _gnorm_fg,
        _gnorm_np,
        _gnorm_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        grad_sample=lambda draw, dtype: _gnorm_sample(draw, dtype, grad=True),
        grad_examples=8,
        lowp_grad_factor=GNORM_LOWP,
    ),
    OpSpec(
        "local_response_norm",
        lambda x, **kw: F.local_response_norm(x, **kw),
        _lrn_np,
        _lrn_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "cosine_similarity",
        lambda a, b, dim, eps: F.cosine_similarity(a, b, dim, eps),
        _cos_np,
        _cos_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
        grad_sample=_cos_grad_sample,
    ),
    OpSpec(
        "pairwise_distance",
        lambda a, b, p, eps, keepdim: F.pairwise_distance(a, b, p, eps, keepdim),
        _pdist_np,
        _pdist_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "bilinear",
        lambda *a: F.bilinear(*a),
        _bilinear_np,
        _bilinear_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "hardswish",
        lambda x: F.hardswish(x),
        lambda x: x * np.clip(x + 3, 0, 6) / 6,
        _unary(),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
    ),
    OpSpec(
        "hardsigmoid",
        lambda x: F.hardsigmoid(x),
        lambda x: np.clip(x + 3, 0, 6) / 6,
        _unary(),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
    ),
    OpSpec(
        "mish",
        lambda x: F.mish(x),
        lambda x: x * np.tanh(_softplus_np(x)),
        _unary(),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "selu",
        lambda x: F.selu(x),
        lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x)),
        _unary(),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
    ),
    OpSpec(
        "celu",
        lambda x, alpha: F.celu(x, alpha),
        lambda x, alpha: np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha)),
        _unary(alpha=0.5),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "logsigmoid",
        lambda x: F.logsigmoid(x),
        lambda x: -_softplus_np(-x),
        _unary(-30.0, 30.0),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
    ),
    OpSpec(
        "hardtanh",
        lambda x, min_val, max_val: F.hardtanh(x, min_val, max_val),
        lambda x, min_val, max_val: np.clip(x, min_val, max_val),
        _hardtanh_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
    ),
    OpSpec(
        "tanhshrink",
        lambda x: F.tanhshrink(x),
        lambda x: x - np.tanh(x),
        _unary(),
        dtypes=FLOATS,
        tol={"float32": (1e-5, 1e-6), "float16": (1e-2, 4e-3), "bfloat16": (6e-2, 3e-2)},
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "glu",
        lambda x, dim: F.glu(x, dim),
        _glu_np,
        _glu_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "prelu", lambda x, w: F.prelu(x, w), _prelu_np, _prelu_sample, dtypes=FLOATS, tol=TOL, composed=True
    ),
    OpSpec(
        "margin_ranking_loss",
        lambda a, b, t, margin, reduction: F.margin_ranking_loss(a, b, t, margin=margin, reduction=reduction),
        _mrl_np,
        _mrl_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        grad_args=(0, 1),
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "triplet_margin_loss",
        lambda a, p_, n, margin, p, swap, reduction: F.triplet_margin_loss(
            a, p_, n, margin=margin, p=p, swap=swap, reduction=reduction
        ),
        _triplet_np,
        _triplet_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "cosine_embedding_loss",
        _cel_fg,
        _cel_np,
        _cel_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
        grad_sample=lambda draw, dtype: _cel_sample(draw, "float64", grad=True),
    ),
    OpSpec(
        "multilabel_soft_margin_loss",
        _mlsm_fg,
        _mlsm_np,
        _mlsm_sample,
        dtypes=FLOATS,
        tol=NORM_TOL,
        grad_args=(0,),
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "dropout1d",
        _cdrop_fg("dropout1d", 3),
        _cdrop_np(3),
        _cdrop_sample((2, 3)),
        dtypes=FLOATS,
        composed=True,
    ),
    OpSpec(
        "dropout2d",
        _cdrop_fg("dropout2d", 4),
        _cdrop_np(4),
        _cdrop_sample((4,)),
        dtypes=FLOATS,
        composed=True,
    ),
    OpSpec(
        "dropout3d",
        _cdrop_fg("dropout3d", 5),
        _cdrop_np(5),
        _cdrop_sample((4, 5)),
        dtypes=FLOATS,
        composed=True,
    ),
]
