"""Op-table specs for the linalg family (matmul & co., einsum, linear) and the
conv family (convolutions and pooling), with NumPy references."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, NUMERIC, OpSpec, shapes, values

F = fg.nn.functional

# Sums of a few products of values in [-3, 3]: float32 rounding of the
# partial sums is well above the default absolute tolerance near zero.
MM_TOL = {"float32": (1e-5, 2e-5), "float64": (1e-10, 1e-10)}
CONV_TOL = {"float32": (1e-5, 5e-5), "float64": (1e-10, 1e-10)}

SIDE = st.integers(0, 5)


def _batch(draw, max_dims: int = 2):
    """Two batch shapes that broadcast together (possibly empty, with 1s and 0s)."""
    base = draw(shapes(0, max_dims, 0, 3))

    def variant():
        k = draw(st.integers(0, len(base)))
        s = list(base[len(base) - k:])
        for i in range(len(s)):
            if draw(st.booleans()) and draw(st.booleans()):
                s[i] = 1
        return tuple(s)

    return (base if draw(st.booleans()) else variant()), variant()


def matmul_sample(draw, dtype):
    m, k, n = draw(SIDE), draw(SIDE), draw(SIDE)
    kind = draw(st.sampled_from(["mm", "1d1d", "1dNd", "Nd1d", "batched"]))
    if kind == "1d1d":
        sa, sb = (k,), (k,)
    elif kind == "1dNd":
        ba, bb = _batch(draw)
        sa, sb = (k,), bb + (k, n)
    elif kind == "Nd1d":
        ba, bb = _batch(draw)
        sa, sb = ba + (m, k), (k,)
    elif kind == "mm":
        sa, sb = (m, k), (k, n)
    else:
        ba, bb = _batch(draw)
        sa, sb = ba + (m, k), bb + (k, n)
    return [values(draw, sa, dtype), values(draw, sb, dtype)], {}


def mm_sample(draw, dtype):
    m, k, n = draw(SIDE), draw(SIDE), draw(SIDE)
    return [values(draw, (m, k), dtype), values(draw, (k, n), dtype)], {}


def bmm_sample(draw, dtype):
    b, m, k, n = draw(st.integers(0, 3)), draw(SIDE), draw(SIDE), draw(SIDE)
    return [values(draw, (b, m, k), dtype), values(draw, (b, k, n), dtype)], {}


def mv_sample(draw, dtype):
    m, k = draw(SIDE), draw(SIDE)
    return [values(draw, (m, k), dtype), values(draw, (k,), dtype)], {}


def vv_sample(same: bool):
    def sample(draw, dtype):
        k = draw(SIDE)
        k2 = k if same else draw(SIDE)
        return [values(draw, (k,), dtype), values(draw, (k2,), dtype)], {}
    return sample


def linear_sample(draw, dtype):
    fin, fout = draw(SIDE), draw(SIDE)
    batch = draw(shapes(0, 2, 0, 3))
    arrs = [values(draw, batch + (fin,), dtype), values(draw, (fout, fin), dtype)]
    if draw(st.booleans()):
        arrs.append(values(draw, (fout,), dtype))
    return arrs, {}


def np_linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


# (equation, label sizes drawn per letter); "..." gets a shared batch shape.
EINSUM_EQS = [
    "ij,jk->ik",
    "bij,bjk->bik",
    "bhqd,bhkd->bhqk",
    "i,i->",
    "ij->ji",
    "ii->i",
    "ii->",
    "ij->",
    "ij->j",
    "ij,ij->ij",
    "i,j->ij",
    "ij,jk",
    "ij,kj",
    "bij,jk->bik",
    "ij,jk,kl->il",
    "...ij,...jk->...ik",
    "i...->...",
    "ijk->kji",
    "abc,cd->abd",
]


def einsum_sample(draw, dtype):
    eq = draw(st.sampled_from(EINSUM_EQS))
    lhs = eq.split("->")[0]
    sizes = {c: draw(st.integers(0, 4)) for c in sorted(set(lhs) - {",", "."})}
    ell = draw(shapes(0, 2, 1, 3)) if "..." in lhs else ()
    arrs = []
    for term in lhs.split(","):
        shp = []
        for part in term.split("...") if "..." in term else [term]:
            shp.append([sizes[c] for c in part])
        shape = tuple(shp[0]) + (tuple(ell) + tuple(shp[1]) if len(shp) > 1 else ())
        arrs.append(values(draw, shape, dtype))
    return arrs, {"equation": eq}


# ---------------------------------------------------------------------------
# Convolution and pooling references
# ---------------------------------------------------------------------------

def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct conv2d (cross-correlation) on a padded input, one kernel tap at a time."""
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    o, cg, kh, kw = w.shape
    if padding == "valid":
        pads = (0, 0, 0, 0)
    elif padding == "same":
        th, tw = dh * (kh - 1), dw * (kw - 1)
        pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    else:
        ph, pw = _pair(padding)
        pads = (ph, ph, pw, pw)
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    n, _, h, wd = xp.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), dtype=np.result_type(x, w))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", win, w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        out = out + b[None, :, None, None]
    return out[0] if unbatched else out


def np_conv1d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    s = (1, stride if isinstance(stride, int) else stride[0])
    d = (1, dilation if isinstance(dilation, int) else dilation[0])
    p = padding if isinstance(padding, str) else (0, padding if isinstance(padding, int) else padding[0])
    y = np_conv2d(x[..., None, :], w[:, :, None, :], b, s, p, d, groups)
    return y[..., 0, :]


def _pool_out(size, k, s, p, d, ceil):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


def np_max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride if stride is not None else kernel_size)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    n, c, h, w = x.shape
    oh = _pool_out(h, kh, sh, ph, dh, ceil_mode)
    ow = _pool_out(w, kw, sw, pw, dw, ceil_mode)
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            rows = [oy * sh - ph + i * dh for i in range(kh)]
            cols = [ox * sw - pw + j * dw for j in range(kw)]
            rows = [r for r in rows if 0 <= r < h]
            cols = [q for q in cols if 0 <= q < w]
            win = x[:, :, rows][:, :, :, cols].reshape(n, c, len(rows) * len(cols))
            # A dilated window may hold padding only: -inf, the start of PyTorch's running max.
            out[:, :, oy, ox] = win.max(axis=-1) if win.shape[-1] else -np.inf
    return out[0] if unbatched else out


def np_avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                  divisor_override=None):
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride if stride is not None else kernel_size)
    ph, pw = _pair(padding)
    n, c, h, w = x.shape
    oh = _pool_out(h, kh, sh, ph, 1, ceil_mode)
    ow = _pool_out(w, kw, sw, pw, 1, ceil_mode)
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            h0, w0 = oy * sh - ph, ox * sw - pw
            h1, w1 = min(h0 + kh, h + ph), min(w0 + kw, w + pw)
            padded_count = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            s = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
            if divisor_override is not None:
                div = divisor_override
            elif count_include_pad:
                div = padded_count
            else:
                div = (h1 - h0) * (w1 - w0)
            out[:, :, oy, ox] = s / div
    return out[0] if unbatched else out


def np_adaptive_avg_pool2d(x, output_size):
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    n, c, h, w = x.shape
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    oh = h if oh is None else oh
    ow = w if ow is None else ow
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return out[0] if unbatched else out


def conv2d_sample(draw, dtype):
    groups = draw(st.sampled_from([1, 1, 2]))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    mode = draw(st.sampled_from(["int", "tuple", "same", "valid"]))
    stride = (1, 1) if mode == "same" else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    if mode == "int":
        padding = draw(st.integers(0, 2))
        pads = (padding, padding)
    elif mode == "tuple":
        pads = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
        padding = pads
    else:
        padding = mode
        pads = (0, 0) if mode == "valid" else (9, 9)
    eh, ew = dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1
    h = draw(st.integers(max(1, eh - 2 * pads[0]) if mode != "same" else 1, 7))
    w = draw(st.integers(max(1, ew - 2 * pads[1]) if mode != "same" else 1, 7))
    batch = draw(st.sampled_from([(), (0,), (1,), (2,), (3,)]))
    x = values(draw, batch + (cg * groups, h, w), dtype, -1, 1)
    wt = values(draw, (og * groups, cg, kh, kw), dtype, -1, 1)
    arrs = [x, wt]
    if draw(st.booleans()):
        arrs.append(values(draw, (og * groups,), dtype, -1, 1))
    if stride[0] == stride[1] and draw(st.booleans()):
        stride = stride[0]
    kw_ = {"stride": stride, "padding": padding, "dilation": dil, "groups": groups}
    return arrs, kw_


def conv1d_sample(draw, dtype):
    groups = draw(st.sampled_from([1, 1, 2]))
    cg, og, k = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    dil = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["int", "same", "valid"]))
    stride = 1 if mode == "same" else draw(st.integers(1, 3))
    padding = draw(st.integers(0, 2)) if mode == "int" else mode
    pad = padding if mode == "int" else 0
    e = dil * (k - 1) + 1
    length = draw(st.integers(max(1, e - 2 * pad) if mode != "same" else 1, 9))
    batch = draw(st.sampled_from([(), (0,), (1,), (2,)]))
    arrs = [values(draw, batch + (cg * groups, length), dtype, -1, 1),
            values(draw, (og * groups, cg, k), dtype, -1, 1)]
    if draw(st.booleans()):
        arrs.append(values(draw, (og * groups,), dtype, -1, 1))
    return arrs, {"stride": stride, "padding": padding, "dilation": dil, "groups": groups}


def _pool_geometry(draw, dilation: bool):
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    dh, dw = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 7))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 7))
    batch = draw(st.sampled_from([(), (0,), (1,), (2,)]))
    c = draw(st.integers(1, 3))
    kwargs = {"kernel_size": (kh, kw) if draw(st.booleans()) or kh != kw else kh,
              "padding": (ph, pw), "ceil_mode": draw(st.booleans())}
    if draw(st.booleans()):
        kwargs["stride"] = (sh, sw)
    if dilation:
        kwargs["dilation"] = (dh, dw)
    return batch + (c, h, w), kwargs


def max_pool_sample(draw, dtype):
    shape, kw = _pool_geometry(draw, True)
    return [values(draw, shape, dtype)], kw


def max_pool_grad_sample(draw, dtype):
    """Max-pool inputs where every window covers an input element (a window over
    padding only gives -inf, which has no derivative)."""
    while True:
        shape, kw = _pool_geometry(draw, True)
        x = values(draw, shape, dtype)
        try:
            ok = x.size == 0 or np.isfinite(np_max_pool2d(x, **kw)).all()
        except ValueError:  # the reference's max over an empty window
            ok = False
        if ok:
            return [x], kw


def avg_pool_sample(draw, dtype):
    shape, kw = _pool_geometry(draw, False)
    kw["count_include_pad"] = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        kw["divisor_override"] = draw(st.integers(1, 5))
    return [values(draw, shape, dtype)], kw


def adaptive_sample(draw, dtype):
    batch = draw(st.sampled_from([(), (0,), (1,), (2,)]))
    c, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    size = draw(st.one_of(
        st.integers(1, 5),
        st.tuples(st.integers(1, 5), st.integers(1, 5)),
        st.tuples(st.none(), st.integers(1, 5)),
    ))
    return [values(draw, batch + (c, h, w), dtype)], {"output_size": size}


SPECS = [
    OpSpec("matmul", fg.matmul, np.matmul, matmul_sample, NUMERIC, MM_TOL, max_examples=60,
           grad_examples=25),
    OpSpec("mm", fg.mm, np.matmul, mm_sample, NUMERIC, MM_TOL, grad_examples=10),
    OpSpec("bmm", fg.bmm, np.matmul, bmm_sample, NUMERIC, MM_TOL, grad_examples=10),
    OpSpec("mv", fg.mv, np.matmul, mv_sample, NUMERIC, MM_TOL, grad_examples=10),
    OpSpec("dot", fg.dot, np.dot, vv_sample(True), NUMERIC, MM_TOL, grad_examples=10),
    OpSpec("outer", fg.outer, np.outer, vv_sample(False), NUMERIC, grad_examples=10),
    OpSpec("linear", F.linear, np_linear, linear_sample, NUMERIC, MM_TOL, grad_examples=15),
    OpSpec(
        "einsum",
        lambda *ts, equation: fg.einsum(equation, *ts),
        lambda *arrs, equation: np.einsum(equation, *arrs),
        einsum_sample,
        NUMERIC,
        MM_TOL,
        max_examples=80,
        grad_examples=40,
    ),
    OpSpec("conv2d", F.conv2d, np_conv2d, conv2d_sample, FLOATS, CONV_TOL, max_examples=40,
           grad_examples=20),
    OpSpec("conv1d", F.conv1d, np_conv1d, conv1d_sample, FLOATS, CONV_TOL, grad_examples=15),
    OpSpec("max_pool2d", F.max_pool2d, np_max_pool2d, max_pool_sample, FLOATS, max_examples=40,
           grad_sample=max_pool_grad_sample, grad_examples=15),
    OpSpec("avg_pool2d", F.avg_pool2d, np_avg_pool2d, avg_pool_sample, FLOATS, max_examples=40,
           grad_examples=15),
    OpSpec("adaptive_avg_pool2d", F.adaptive_avg_pool2d, np_adaptive_avg_pool2d, adaptive_sample, FLOATS,
           grad_examples=12),
]
