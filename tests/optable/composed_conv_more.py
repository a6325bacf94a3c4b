"""Op-table specs for the composed transposed and 3-D convolutions, ``affine_grid``,
``grid_sample`` and ``ctc_loss`` (``composed=True``).

The references are float64 NumPy loops over PyTorch's documented definitions, written
independently of the compositions: a transposed convolution scatters each input element
times the kernel into the output; ``conv3d`` sums kernel taps over strided windows;
``grid_sample`` reads each output point's neighbours one at a time; ``ctc_loss`` runs
the alpha recursion for one sequence at a time with ``np.logaddexp``. Flags travel in
the kwargs as 0/1 ints and index arrays as NumPy arrays (the drivers read a Python bool
among the kwargs as a mask index).
"""

from __future__ import annotations

import itertools

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, values

F = fg.nn.functional

CONV_TOL = {"float32": (1e-5, 5e-5), "float64": (1e-10, 1e-10)}


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _tuple(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


# ---------------------------------------------------------------------------
# transposed convolution (1-D, 2-D, 3-D) and conv3d
# ---------------------------------------------------------------------------


def _np_conv_transpose(nd):
    def ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        s, p, op, d = (_tuple(v, nd) for v in (stride, padding, output_padding, dilation))
        unbatched = x.ndim == nd + 1
        xb = x[None] if unbatched else x
        n, cin = xb.shape[:2]
        size = xb.shape[2:]
        k = w.shape[2:]
        cg, og = cin // groups, w.shape[1]
        out_size = [(size[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(nd)]
        full = [(size[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 + op[i] for i in range(nd)]
        buf = np.zeros((n, og * groups, *full))
        # Each input element times the kernel, added at stride * position + dilation * tap.
        for pos in np.ndindex(*size):
            for tap in np.ndindex(*k):
                at = tuple(pos[i] * s[i] + tap[i] * d[i] for i in range(nd))
                for g in range(groups):
                    xs = xb[(slice(None), slice(g * cg, (g + 1) * cg), *pos)]  # (n, cg)
                    ws = w[(slice(g * cg, (g + 1) * cg), slice(None), *tap)]  # (cg, og)
                    buf[(slice(None), slice(g * og, (g + 1) * og), *at)] += xs @ ws
        crop = tuple(slice(p[i], p[i] + out_size[i]) for i in range(nd))
        out = buf[(slice(None), slice(None), *crop)]
        if b is not None:
            out = out + b.reshape((1, -1) + (1,) * nd)
        return out[0] if unbatched else out

    return ref


def _conv_transpose_sample(nd):
    def sample(draw, dtype):
        groups = draw(st.sampled_from([1, 1, 2]))
        cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        s = tuple(draw(st.integers(1, 3 if nd < 3 else 2)) for _ in range(nd))
        d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
        op = tuple(draw(st.integers(0, max(s[i], d[i]) - 1)) for i in range(nd))
        size = tuple(draw(st.integers(1, 4 if nd < 3 else 3)) for _ in range(nd))
        # Padding at most what leaves a positive output size.
        p = []
        for i in range(nd):
            most = ((size[i] - 1) * s[i] + d[i] * (k[i] - 1) + op[i]) // 2
            p.append(draw(st.integers(0, min(most, 2))))
        batch = draw(st.sampled_from([(), (0,), (1,), (2,)]))
        x = values(draw, batch + (cg * groups, *size), dtype, -1, 1)
        w = values(draw, (cg * groups, og, *k), dtype, -1, 1)
        arrs = [x, w]
        if draw(st.booleans()):
            arrs.append(values(draw, (og * groups,), dtype, -1, 1))

        def pick(t):
            return t[0] if len(set(t)) == 1 and draw(st.booleans()) else t

        kw = {
            "stride": pick(s),
            "padding": pick(tuple(p)),
            "output_padding": pick(op),
            "groups": groups,
            "dilation": pick(d),
        }
        return arrs, kw

    return sample


def _np_conv3d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    s, d = _tuple(stride, 3), _tuple(dilation, 3)
    k = w.shape[2:]
    unbatched = x.ndim == 4
    xb = x[None] if unbatched else x
    if padding == "same":
        pads = [(d[i] * (k[i] - 1) // 2, d[i] * (k[i] - 1) - d[i] * (k[i] - 1) // 2) for i in range(3)]
    elif padding == "valid":
        pads = [(0, 0)] * 3
    else:
        pads = [(v, v) for v in _tuple(padding, 3)]
    xp = np.pad(xb, [(0, 0), (0, 0), *pads])
    n, c = xp.shape[:2]
    o_sz = [(xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(3)]
    o, cg = w.shape[0], w.shape[1]
    og = o // groups
    out = np.zeros((n, o, *o_sz))
    for g in range(groups):
        for tap in np.ndindex(*k):
            win = xp[
                (slice(None), slice(g * cg, (g + 1) * cg))
                + tuple(
                    slice(tap[i] * d[i], tap[i] * d[i] + s[i] * (o_sz[i] - 1) + 1, s[i]) for i in range(3)
                )
            ]
            wt = w[(slice(g * og, (g + 1) * og), slice(None), *tap)]
            out[:, g * og : (g + 1) * og] += np.einsum("ncdhw,oc->nodhw", win, wt)
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1, 1)
    return out[0] if unbatched else out


def _conv3d_sample(draw, dtype):
    groups = draw(st.sampled_from([1, 1, 2]))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = tuple(draw(st.integers(1, 3)) for _ in range(3))
    d = tuple(draw(st.integers(1, 2)) for _ in range(3))
    mode = draw(st.sampled_from(["int", "tuple", "same", "valid"]))
    s = (1, 1, 1) if mode == "same" else tuple(draw(st.integers(1, 2)) for _ in range(3))
    if mode == "int":
        padding = draw(st.integers(0, 1))
        pads = (padding,) * 3
    elif mode == "tuple":
        pads = tuple(draw(st.integers(0, 1)) for _ in range(3))
        padding = pads
    else:
        padding = mode
        pads = (0, 0, 0) if mode == "valid" else (9, 9, 9)
    size = tuple(
        draw(st.integers(max(1, d[i] * (k[i] - 1) + 1 - 2 * pads[i]) if mode != "same" else 1, 5)) for i in range(3)
    )
    batch = draw(st.sampled_from([(), (0,), (1,), (2,)]))
    x = values(draw, batch + (cg * groups, *size), dtype, -1, 1)
    w = values(draw, (og * groups, cg, *k), dtype, -1, 1)
    arrs = [x, w]
    if draw(st.booleans()):
        arrs.append(values(draw, (og * groups,), dtype, -1, 1))
    return arrs, {"stride": s, "padding": padding, "dilation": d, "groups": groups}


SPECS: list[OpSpec] = [
    OpSpec(
        "conv_transpose2d",
        F.conv_transpose2d,
        _np_conv_transpose(2),
        _conv_transpose_sample(2),
        dtypes=FLOATS,
        tol=CONV_TOL,
        composed=True,
        max_examples=40,
        grad_examples=15,
    ),
    OpSpec(
        "conv_transpose1d",
        F.conv_transpose1d,
        _np_conv_transpose(1),
        _conv_transpose_sample(1),
        dtypes=FLOATS,
        tol=CONV_TOL,
        composed=True,
        grad_examples=10,
    ),
    OpSpec(
        "conv_transpose3d",
        F.conv_transpose3d,
        _np_conv_transpose(3),
        _conv_transpose_sample(3),
        dtypes=FLOATS,
        tol=CONV_TOL,
        composed=True,
        max_examples=15,
        grad_examples=5,
    ),
    OpSpec(
        "conv3d",
        F.conv3d,
        _np_conv3d,
        _conv3d_sample,
        dtypes=FLOATS,
        tol=CONV_TOL,
        composed=True,
        max_examples=20,
        grad_examples=6,
    ),
]


# ---------------------------------------------------------------------------
# affine_grid / grid_sample
# ---------------------------------------------------------------------------


def _np_base(n, align):
    if n == 1:
        return np.zeros(1)
    i = np.arange(n, dtype=np.float64)
    return i * 2 / (n - 1) - 1 if align else (2 * i + 1) / n - 1


def _np_affine_grid(theta, size, align_corners):
    spatial = size[2:]
    nd = len(spatial)
    axes = [_np_base(s, bool(align_corners)) for s in spatial]
    out = np.zeros((size[0], *spatial, nd))
    for pos in np.ndindex(*spatial):
        # (x, y[, z], 1): x is the last spatial dim.
        pt = np.array([axes[nd - 1 - j][pos[nd - 1 - j]] for j in range(nd)] + [1.0])
        for b in range(size[0]):
            out[(b, *pos)] = theta[b] @ pt
    return out


def _affine_sample(draw, dtype):
    three = draw(st.integers(0, 3)) == 0
    n = draw(st.integers(1, 2))
    spatial = tuple(draw(st.integers(1, 4)) for _ in range(3 if three else 2))
    theta = values(draw, (n, 3, 4) if three else (n, 2, 3), dtype, -1.5, 1.5)
    return [theta], {"size": (n, draw(st.integers(1, 3)), *spatial), "align_corners": draw(st.integers(0, 1))}


def _np_reflect(c, twice_low, twice_high):
    if twice_low == twice_high:
        return 0.0
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = abs(c - lo)
    flips = np.floor(c / span)
    extra = c - flips * span
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _np_source(c, n, padding_mode, align):
    c = (c + 1) / 2 * (n - 1) if align else ((c + 1) * n - 1) / 2
    if padding_mode == "border":
        c = min(max(c, 0.0), n - 1.0)
    elif padding_mode == "reflection":
        c = _np_reflect(c, 0, 2 * (n - 1)) if align else _np_reflect(c, -1, 2 * n - 1)
        c = min(max(c, 0.0), n - 1.0)
    return c


def _np_grid_sample(x, grid, mode, padding_mode, align_corners):
    n, c, h, w = x.shape
    _, ho, wo, _ = grid.shape
    out = np.zeros((n, c, ho, wo))

    def read(b, yy, xx):
        if 0 <= yy < h and 0 <= xx < w:
            return x[b, :, yy, xx]
        return np.zeros(c)

    for b, i, j in itertools.product(range(n), range(ho), range(wo)):
        fx = _np_source(float(grid[b, i, j, 0]), w, padding_mode, bool(align_corners))
        fy = _np_source(float(grid[b, i, j, 1]), h, padding_mode, bool(align_corners))
        if mode == "nearest":
            out[b, :, i, j] = read(b, int(np.rint(fy)), int(np.rint(fx)))
            continue
        x0, y0 = int(np.floor(fx)), int(np.floor(fy))
        ax, ay = fx - x0, fy - y0
        out[b, :, i, j] = (
            read(b, y0, x0) * (1 - ax) * (1 - ay)
            + read(b, y0, x0 + 1) * ax * (1 - ay)
            + read(b, y0 + 1, x0) * (1 - ax) * ay
            + read(b, y0 + 1, x0 + 1) * ax * ay
        )
    return out


def _grid_sample_sample(draw, dtype, mode=None):
    n = draw(st.integers(1, 2))
    c = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ho, wo = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    x = values(draw, (n, c, h, w), dtype, -2, 2)
    grid = values(draw, (n, ho, wo, 2), dtype, -1.6, 1.6)
    kw = {
        "mode": mode or draw(st.sampled_from(["bilinear", "nearest"])),
        "padding_mode": draw(st.sampled_from(["zeros", "border", "reflection"])),
        "align_corners": draw(st.integers(0, 1)),
    }
    return [x, grid], kw


def _fg_grid_sample(x, grid, mode, padding_mode, align_corners):
    return F.grid_sample(x, grid, mode, padding_mode, bool(align_corners))


SPECS += [
    OpSpec(
        "affine_grid",
        lambda theta, size, align_corners: F.affine_grid(theta, size, bool(align_corners)),
        _np_affine_grid,
        _affine_sample,
        composed=True,
        grad_examples=8,
    ),
    OpSpec(
        "grid_sample",
        _fg_grid_sample,
        _np_grid_sample,
        _grid_sample_sample,
        tol={"float32": (1e-5, 1e-5)},
        composed=True,
        max_examples=40,
        # Bilinear draws only: nearest's gradient in the grid is zero almost everywhere.
        grad_sample=lambda draw, dtype: _grid_sample_sample(draw, "float64", "bilinear"),
        grad_examples=15,
        # The floor of a coordinate and the edges of reflection and clamping are kinks.
        grad_snap=False,
        # The coordinate passes through several rounded steps (unnormalise, reflect, clamp,
        # the bilinear weights) before it scales the input: composed specs' factor.
        lowp_grad_factor=16.0,
    ),
]


# ---------------------------------------------------------------------------
# ctc_loss
# ---------------------------------------------------------------------------


def _np_ctc_one(lp, target, blank):
    """-log p(target | lp) for one sequence: lp (T, C), target a list of labels."""
    ext = [blank]
    for lab in target:
        ext += [int(lab), blank]
    big = len(ext)
    alpha = np.full(big, -np.inf)
    alpha[0] = lp[0, blank]
    if big > 1:
        alpha[1] = lp[0, ext[1]]
    for t in range(1, lp.shape[0]):
        new = np.full(big, -np.inf)
        for s in range(big):
            acc = alpha[s]
            if s >= 1:
                acc = np.logaddexp(acc, alpha[s - 1])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                acc = np.logaddexp(acc, alpha[s - 2])
            new[s] = acc + lp[t, ext[s]]
        alpha = new
    end = alpha[big - 1] if big == 1 else np.logaddexp(alpha[big - 1], alpha[big - 2])
    return -end


def _np_ctc(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    unbatched = log_probs.ndim == 2
    lp = log_probs[:, None] if unbatched else log_probs
    n = lp.shape[1]
    tg = np.asarray(targets)
    if unbatched and tg.ndim == 1:
        tg = tg[None]
    losses = np.zeros(n)
    offset = 0
    for i in range(n):
        if tg.ndim == 2:
            target = list(tg[i, : target_lengths[i]])
        else:
            target = list(tg[offset : offset + target_lengths[i]])
            offset += target_lengths[i]
        if input_lengths[i] == 0:
            losses[i] = 0.0 if not target else np.inf
        else:
            losses[i] = _np_ctc_one(lp[: input_lengths[i], i], target, blank)
    if zero_infinity:
        losses[np.isinf(losses)] = 0.0
    if reduction == "mean":
        return np.mean(losses / np.maximum(np.asarray(target_lengths, np.float64), 1))
    if reduction == "sum":
        return losses.sum()
    return losses[0] if unbatched else losses


def _ctc_sample(draw, dtype, grad=False):
    rng = _rng(draw)
    t = draw(st.integers(1, 6))
    c = draw(st.integers(2, 4))
    unbatched = draw(st.integers(0, 4)) == 0
    n = 1 if unbatched else draw(st.integers(1, 3))
    blank = int(draw(st.integers(0, c - 1)))
    labels = [v for v in range(c) if v != blank]
    # Input lengths up to t (0 only outside the gradient draws); target lengths up to what fits,
    # sometimes one more (an impossible alignment: an infinite loss).
    il = [int(draw(st.integers(1 if grad else 0, t))) for _ in range(n)]
    tl = []
    for i in range(n):
        most = il[i] if not grad else max((il[i]) // 2, 0)
        tl.append(int(draw(st.integers(0, most))))
    s = max(tl + [0]) + draw(st.integers(0, 1))
    padded = rng.choice(labels, size=(n, s)).astype(np.int64)
    if draw(st.booleans()) and s >= 2:
        padded[:, 1] = padded[:, 0]  # repeated labels need a blank between them
    concat = draw(st.booleans())
    if unbatched:
        targets = padded[0, : tl[0]] if concat else padded[0]
    elif concat:
        targets = np.concatenate([padded[i, : tl[i]] for i in range(n)]).astype(np.int64)
    else:
        targets = padded
    raw = rng.standard_normal((t, n, c))
    lp = raw - np.log(np.exp(raw).sum(-1, keepdims=True))
    lp = lp[:, 0] if unbatched else lp
    lp = lp.astype(np.float64 if grad else dtype)
    kw = {
        "targets": targets,
        "input_lengths": tuple(il) if not unbatched else (il[0],),
        "target_lengths": tuple(tl) if not unbatched else (tl[0],),
        "blank": blank,
        "reduction": draw(st.sampled_from(["mean", "sum", "none"])),
        "zero_infinity": 1 if grad else draw(st.integers(0, 1)),
    }
    return [lp], kw


def _fg_ctc(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    tg = fg.tensor(targets, dtype=fg.int64, device=log_probs.device)
    return F.ctc_loss(
        log_probs, tg, list(input_lengths), list(target_lengths), blank, reduction, bool(zero_infinity)
    )


SPECS += [
    OpSpec(
        "ctc_loss",
        _fg_ctc,
        _np_ctc,
        _ctc_sample,
        tol={"float32": (1e-5, 1e-5)},
        composed=True,
        max_examples=30,
        grad_sample=lambda draw, dtype: _ctc_sample(draw, "float64", grad=True),
        grad_examples=12,
    ),
]
