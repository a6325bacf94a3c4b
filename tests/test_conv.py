"""Convolution and pooling against direct NumPy loops: stride, padding
(ints, pairs, 'same', 'valid'), dilation, groups, bias, unbatched inputs,
layouts, every float dtype, max-pool indices, and error messages."""

from __future__ import annotations

import itertools

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional
RNG = np.random.default_rng(99)


def rand(*shape, dtype=np.float64):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


def T(a):
    return fg.tensor(a)


def val(t):
    if t.dtype in (fg.bfloat16, fg.float16):
        t = t.float()
    return np.asarray(t).astype(np.float64)


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def ref_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Straight loops over every output element and kernel tap."""
    sh, sw = pair(stride)
    dh, dw = pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if padding == "valid":
        pt = pb = pl = pr = 0
    elif padding == "same":
        th, tw = dh * (kh - 1), dw * (kw - 1)
        pt, pb, pl, pr = th // 2, th - th // 2, tw // 2, tw - tw // 2
    else:
        ph, pw = pair(padding)
        pt = pb = ph
        pl = pr = pw
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for ni, oc, oy, ox in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        acc = 0.0 if b is None else float(b[oc])
        for ci, i, j in itertools.product(range(cg), range(kh), range(kw)):
            iy = oy * sh - pt + i * dh
            ix = ox * sw - pl + j * dw
            if 0 <= iy < h and 0 <= ix < wd:
                acc += x[ni, g * cg + ci, iy, ix] * w[oc, ci, i, j]
        out[ni, oc, oy, ox] = acc
    return out


def fast_conv2d(x, w, stride=1, padding=0):
    """A vectorised reference (im2col by fancy indexing) for the larger cases."""
    sh, sw = pair(stride)
    ph, pw = pair(padding)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    o, c, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    cols = np.stack(
        [xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] for i in range(kh) for j in range(kw)],
        axis=2,
    )  # n, c, kh*kw, oh, ow
    return np.einsum("nckhw,ock->nohw", cols, w.reshape(o, c, kh * kw))


CONV_CASES = [
    dict(),
    dict(stride=2),
    dict(stride=(1, 2), padding=1),
    dict(padding=(2, 0)),
    dict(padding="same"),
    dict(padding="same", dilation=(2, 1)),
    dict(padding="valid", stride=(2, 3)),
    dict(dilation=2, padding=2),
    dict(groups=2),
    dict(groups=4, padding=1),  # depthwise
    dict(groups=2, stride=2, dilation=(1, 2), padding=(1, 2)),
]


@pytest.mark.parametrize("kw", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("ksize", [(3, 3), (1, 1), (2, 3)])
def test_conv2d_matches_loops(kw, bias, ksize):
    groups = kw.get("groups", 1)
    x = rand(2, 4, 7, 6)
    w = rand(6 if groups != 4 else 8, 4 // groups, *ksize)
    b = rand(w.shape[0]) if bias else None
    r = F.conv2d(T(x), T(w), T(b) if bias else None, **kw)
    ref = ref_conv2d(x, w, b, **kw)
    assert tuple(r.shape) == ref.shape
    np.testing.assert_allclose(val(r), ref, rtol=1e-12, atol=1e-12)


def test_conv2d_positional_args_and_aliases():
    x, w, b = rand(1, 2, 5, 5), rand(3, 2, 3, 3), rand(3)
    r = fg.conv2d(T(x), T(w), T(b), 2, 1, 1, 1)
    np.testing.assert_allclose(val(r), ref_conv2d(x, w, b, 2, 1), rtol=1e-12, atol=1e-12)
    assert fg.conv2d is F.conv2d


@pytest.mark.parametrize("dt,tol", [("float32", 1e-5), ("float16", 3e-3), ("bfloat16", 2e-2)])
def test_conv2d_dtypes(dt, tol):
    x, w, b = rand(2, 3, 6, 5), rand(4, 3, 3, 3), rand(4)
    tx, tw, tb = (T(a).to(getattr(fg, dt)) for a in (x, w, b))
    r = F.conv2d(tx, tw, tb, padding=1)
    assert r.dtype.name == dt
    ref = ref_conv2d(val(tx), val(tw), val(tb), padding=1)
    np.testing.assert_allclose(val(r), ref, rtol=tol, atol=tol * 4)


def test_conv2d_unbatched_and_empty_batch():
    x, w = rand(3, 5, 5), rand(2, 3, 3, 3)
    r = F.conv2d(T(x), T(w), padding=1)
    assert r.shape == (2, 5, 5)
    np.testing.assert_allclose(val(r), ref_conv2d(x[None], w, padding=1)[0], rtol=1e-12, atol=1e-12)
    r = F.conv2d(T(rand(0, 3, 5, 5)), T(w))
    assert r.shape == (0, 2, 3, 3)


def test_conv2d_noncontiguous_input_and_weight():
    base = rand(2, 6, 9, 4)
    x = base.transpose(0, 3, 2, 1)[:, :, ::2, ::-1]  # (2, 4, 5, 6), strided and flipped
    w = rand(3, 3, 4, 5).transpose(3, 2, 1, 0)  # (5, 4, 3, 3), permuted
    tx = T(base).permute(0, 3, 2, 1)[:, :, ::2].flip(3)
    tw = T(np.ascontiguousarray(w.transpose(3, 2, 1, 0))).permute(3, 2, 1, 0)
    r = F.conv2d(tx, tw, padding=1, stride=(2, 1))
    np.testing.assert_allclose(val(r), ref_conv2d(x, w, padding=1, stride=(2, 1)), rtol=1e-12, atol=1e-12)
    # 1x1 kernels read the input as a matrix when its pixels are evenly strided
    w1 = rand(7, 4, 1, 1)
    tcl = T(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)  # channels-last memory
    np.testing.assert_allclose(val(F.conv2d(tcl, T(w1))), ref_conv2d(x, w1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(val(F.conv2d(tx, T(w1))), ref_conv2d(x, w1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "n,c,h,w,o,k,stride,padding",
    [
        (8, 16, 20, 20, 24, 3, 1, 1),  # threaded over samples
        (1, 32, 40, 40, 32, 3, 1, 1),  # one sample: threaded inside the product
        (3, 8, 33, 17, 5, 5, 2, 2),
    ],
)
def test_conv2d_larger(n, c, h, w, o, k, stride, padding):
    for dt, tol in [(np.float32, 1e-4), (np.float64, 1e-10)]:
        x, wt, b = rand(n, c, h, w, dtype=dt), rand(o, c, k, k, dtype=dt), rand(o, dtype=dt)
        r = F.conv2d(T(x), T(wt), T(b), stride=stride, padding=padding)
        ref = fast_conv2d(x.astype(np.float64), wt.astype(np.float64), stride, padding) + b[None, :, None, None]
        np.testing.assert_allclose(val(r), ref, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------
# conv1d
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "kw",
    [dict(), dict(stride=2), dict(padding=2), dict(padding="same", dilation=2), dict(padding="valid"),
     dict(groups=3, padding=1), dict(stride=3, dilation=2, padding=(1,))],
)
def test_conv1d_matches_loops(kw):
    x, w, b = rand(2, 6, 11), rand(9, 6 // kw.get("groups", 1), 3), rand(9)
    r = F.conv1d(T(x), T(w), T(b), **kw)
    k2 = dict(kw)
    for key in ("stride", "dilation"):
        if key in k2:
            v = k2[key]
            k2[key] = (1, v if isinstance(v, int) else v[0])
    if isinstance(k2.get("padding"), (int, tuple)):
        p = k2["padding"]
        k2["padding"] = (0, p if isinstance(p, int) else p[0])
    ref = ref_conv2d(x[:, :, None, :], w[:, :, None, :], b, **k2)[:, :, 0, :]
    assert tuple(r.shape) == ref.shape
    np.testing.assert_allclose(val(r), ref, rtol=1e-12, atol=1e-12)
    r = F.conv1d(T(x[0]), T(w), T(b), **kw)
    np.testing.assert_allclose(val(r), ref[0], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# conv errors
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "xs,ws,kw,exc,pat",
    [
        ((3, 5, 5), (4, 3, 3, 3), {}, None, None),  # unbatched is fine
        ((3, 5), (4, 3, 3, 3), {}, ValueError, r"conv2d.*\[3, 5\]"),
        ((1, 3, 5, 5), (4, 3, 3), {}, ValueError, r"conv2d.*weight.*\[4, 3, 3\]"),
        ((1, 4, 5, 5), (4, 3, 3, 3), {}, ValueError, r"conv2d.*\[4, 3, 3, 3\].*\[1, 4, 5, 5\].*3"),
        ((1, 4, 5, 5), (4, 2, 3, 3), {"groups": 3}, ValueError, r"conv2d.*groups"),
        ((1, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}, ValueError, r"conv2d.*groups"),
        ((1, 3, 2, 2), (4, 3, 3, 3), {}, ValueError, r"conv2d.*output size"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"dilation": 3}, ValueError, r"conv2d.*output size"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"padding": "same", "stride": 2}, ValueError, r"conv2d.*same"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"padding": "full"}, ValueError, r"conv2d.*padding"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"stride": 0}, ValueError, r"conv2d.*stride"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"stride": (1, 2, 3)}, ValueError, r"conv2d.*stride"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"groups": 0}, ValueError, r"conv2d.*groups"),
        ((1, 3, 5, 5), (4, 3, 3, 3), {"padding": -1}, ValueError, r"conv2d.*padding"),
    ],
)
def test_conv2d_errors(xs, ws, kw, exc, pat):
    x, w = rand(*xs), rand(*ws)
    tx, tw = T(x), T(w)
    if exc is None:
        F.conv2d(tx, tw, **kw)
        return
    with pytest.raises(exc, match=pat):
        F.conv2d(tx, tw, **kw)
    np.testing.assert_array_equal(val(tx), x)
    np.testing.assert_array_equal(val(tw), w)


def test_conv_dtype_errors():
    x, w = T(rand(1, 3, 5, 5)), T(rand(4, 3, 3, 3))
    with pytest.raises(TypeError, match="conv2d.*float32.*float64|conv2d.*float64.*float32"):
        F.conv2d(x.float(), w)
    with pytest.raises(TypeError, match="conv2d.*int64"):
        F.conv2d(x.long(), w.long())
    with pytest.raises(TypeError, match="conv2d.*bias"):
        F.conv2d(x, w, T(rand(4)).float())
    with pytest.raises(ValueError, match="conv2d.*bias"):
        F.conv2d(x, w, T(rand(5)))
    with pytest.raises(ValueError, match=r"conv1d.*\[1, 3, 5, 5\]"):
        F.conv1d(x, T(rand(4, 3, 3)))
    with pytest.raises(ValueError, match=r"conv1d.*in_channels"):
        F.conv1d(T(rand(1, 3, 5)), T(rand(4, 2, 3)))
    with pytest.raises(ValueError, match=r"conv1d.*output size"):
        F.conv1d(T(rand(1, 3, 2)), T(rand(4, 3, 3)))


# ---------------------------------------------------------------------------
# pooling references
# ---------------------------------------------------------------------------

def out_len(size, k, s, p, d, ceil):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


def ref_max_pool(x, k, s=None, p=0, d=1, ceil=False):
    kh, kw = pair(k)
    sh, sw = pair(s if s is not None else k)
    ph, pw = pair(p)
    dh, dw = pair(d)
    n, c, h, w = x.shape
    oh, ow = out_len(h, kh, sh, ph, dh, ceil), out_len(w, kw, sw, pw, dw, ceil)
    out = np.full((n, c, oh, ow), -np.inf)
    idx = np.full((n, c, oh, ow), -1, np.int64)
    for ni, ci, oy, ox in itertools.product(range(n), range(c), range(oh), range(ow)):
        for i, j in itertools.product(range(kh), range(kw)):
            iy, ix = oy * sh - ph + i * dh, ox * sw - pw + j * dw
            if 0 <= iy < h and 0 <= ix < w:
                v = x[ni, ci, iy, ix]
                if v > out[ni, ci, oy, ox] or np.isnan(v):
                    out[ni, ci, oy, ox] = v
                    idx[ni, ci, oy, ox] = iy * w + ix
    return out, idx


def ref_avg_pool(x, k, s=None, p=0, ceil=False, count_include_pad=True, divisor_override=None):
    kh, kw = pair(k)
    sh, sw = pair(s if s is not None else k)
    ph, pw = pair(p)
    n, c, h, w = x.shape
    oh, ow = out_len(h, kh, sh, ph, 1, ceil), out_len(w, kw, sw, pw, 1, ceil)
    out = np.zeros((n, c, oh, ow))
    for oy, ox in itertools.product(range(oh), range(ow)):
        y0, x0 = oy * sh - ph, ox * sw - pw
        y1, x1 = min(y0 + kh, h + ph), min(x0 + kw, w + pw)
        size = (y1 - y0) * (x1 - x0)
        y0, x0, y1, x1 = max(y0, 0), max(x0, 0), min(y1, h), min(x1, w)
        total = x[:, :, y0:y1, x0:x1].sum(axis=(2, 3))
        div = divisor_override or (size if count_include_pad else (y1 - y0) * (x1 - x0))
        out[:, :, oy, ox] = total / div
    return out


POOL_CASES = [
    dict(k=2),
    dict(k=3, s=1),
    dict(k=3, s=2, p=1),
    dict(k=(2, 3), s=(1, 2), p=(1, 1)),
    dict(k=3, s=2, ceil=True),
    dict(k=3, s=2, p=1, ceil=True),
    dict(k=2, s=3, ceil=True),
    dict(k=1),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("dilation", [1, 2, (1, 2)])
def test_max_pool2d(case, dilation):
    x = rand(2, 3, 8, 7)
    kw = dict(kernel_size=case["k"], stride=case.get("s"), padding=case.get("p", 0),
              dilation=dilation, ceil_mode=case.get("ceil", False))
    ref, ridx = ref_max_pool(x, case["k"], case.get("s"), case.get("p", 0), dilation, case.get("ceil", False))
    r = F.max_pool2d(T(x), **kw)
    np.testing.assert_array_equal(val(r), ref)
    r, idx = F.max_pool2d(T(x), **kw, return_indices=True)
    assert idx.dtype == fg.int64 and idx.shape == r.shape
    np.testing.assert_array_equal(np.asarray(idx), ridx)
    # indices point at the maxima
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, np.asarray(idx).reshape(2, 3, -1), 2).reshape(r.shape), val(r))


def test_max_pool2d_nan_unbatched_and_dtypes():
    x = rand(3, 6, 6)
    x[0, 1, 1] = np.nan
    r = F.max_pool2d(T(x), 2)
    assert r.shape == (3, 3, 3)
    assert np.isnan(val(r)[0, 0, 0])
    assert not np.isnan(val(r)[0, 0, 1])
    for dt in ("float32", "float16", "bfloat16"):
        tx = T(x).to(getattr(fg, dt))
        r = F.max_pool2d(tx, 3, 2, 1)
        assert r.dtype.name == dt
        np.testing.assert_array_equal(val(r), ref_max_pool(val(tx)[None], 3, 2, 1)[0][0])
    # a non-contiguous input
    tx = T(rand(6, 4, 8, 2)).permute(3, 1, 2, 0)[:, :, ::-1]
    np.testing.assert_array_equal(val(F.max_pool2d(tx, 2)), ref_max_pool(val(tx), 2)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,s", [(2, 2), (3, 1), (2, 1)])
def test_max_pool2d_ties_and_nans_when_every_window_is_inside(dtype, k, s):
    # Windows without padding take a branch-free path: ties keep the first
    # tap, a NaN anywhere wins (the last NaN's index), as in the general loop.
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, size=(2, 3, 9, 8)).astype(dtype)
    x[rng.random(x.shape) < 0.08] = np.nan
    x[0, 0, 0, :2] = [-0.0, 0.0]
    ref, ridx = ref_max_pool(x, k, s, 0, 1, False)
    r, idx = F.max_pool2d(T(x), k, s, return_indices=True)
    np.testing.assert_array_equal(val(r), ref)
    np.testing.assert_array_equal(np.asarray(idx), ridx)


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(case, count_include_pad):
    x = rand(2, 3, 8, 7)
    r = F.avg_pool2d(T(x), case["k"], case.get("s"), case.get("p", 0), case.get("ceil", False), count_include_pad)
    ref = ref_avg_pool(x, case["k"], case.get("s"), case.get("p", 0), case.get("ceil", False), count_include_pad)
    np.testing.assert_allclose(val(r), ref, rtol=1e-12, atol=1e-12)


def test_avg_pool2d_divisor_override_unbatched_dtypes():
    x = rand(3, 5, 5)
    r = F.avg_pool2d(T(x), 2, divisor_override=3)
    np.testing.assert_allclose(val(r), ref_avg_pool(x[None], 2, divisor_override=3)[0], rtol=1e-12)
    for dt, tol in (("float32", 1e-6), ("float16", 2e-3), ("bfloat16", 1e-2)):
        tx = T(x).to(getattr(fg, dt))
        r = F.avg_pool2d(tx, 3, 1, 1)
        assert r.dtype.name == dt
        np.testing.assert_allclose(val(r), ref_avg_pool(val(tx)[None], 3, 1, 1)[0], rtol=tol, atol=tol)


def ref_adaptive(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        y0, y1 = i * h // oh, -(-(i + 1) * h // oh)
        x0, x1 = j * w // ow, -(-(j + 1) * w // ow)
        out[:, :, i, j] = x[:, :, y0:y1, x0:x1].mean(axis=(2, 3))
    return out


@pytest.mark.parametrize("size,want", [(1, (1, 1)), (3, (3, 3)), ((2, 5), (2, 5)), ((None, 4), (7, 4)),
                                       ((10, 9), (10, 9)), ((7, 6), (7, 6))])
def test_adaptive_avg_pool2d(size, want):
    x = rand(2, 3, 7, 6)
    r = F.adaptive_avg_pool2d(T(x), size)
    assert tuple(r.shape) == (2, 3) + want
    np.testing.assert_allclose(val(r), ref_adaptive(x, *want), rtol=1e-12, atol=1e-12)
    r = F.adaptive_avg_pool2d(T(x[0]), size)
    assert tuple(r.shape) == (3,) + want


def test_global_average_pool_equals_mean():
    x = rand(4, 5, 9, 11, dtype=np.float32)
    r = F.adaptive_avg_pool2d(T(x), (1, 1))
    np.testing.assert_allclose(val(r)[:, :, 0, 0], x.astype(np.float64).mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "fn,args,kw,exc,pat",
    [
        (F.max_pool2d, ((2, 3),), {"kernel_size": 2}, ValueError, r"max_pool2d.*\[2, 3\]"),
        (F.max_pool2d, ((1, 1, 4, 4),), {"kernel_size": 2, "padding": 2}, ValueError, "max_pool2d.*padding"),
        (F.max_pool2d, ((1, 1, 2, 2),), {"kernel_size": 3}, ValueError, "max_pool2d.*output size"),
        (F.max_pool2d, ((1, 1, 4, 4),), {"kernel_size": 0}, ValueError, "max_pool2d"),
        (F.max_pool2d, ((1, 1, 4, 4),), {"kernel_size": (2, 2, 2)}, ValueError, "max_pool2d.*kernel_size"),
        (F.avg_pool2d, ((1, 1, 4, 4),), {"kernel_size": 2, "padding": 2}, ValueError, "avg_pool2d.*padding"),
        (F.avg_pool2d, ((1, 1, 2, 2),), {"kernel_size": 3}, ValueError, "avg_pool2d.*output size"),
        (F.avg_pool2d, ((1, 1, 4, 4),), {"kernel_size": 2, "divisor_override": 0}, ValueError, "avg_pool2d.*divisor"),
        (F.avg_pool2d, ((4,),), {"kernel_size": 2}, ValueError, r"avg_pool2d.*\[4\]"),
        (F.adaptive_avg_pool2d, ((1, 1, 0, 4),), {"output_size": 2}, ValueError, "adaptive_avg_pool2d"),
        (F.adaptive_avg_pool2d, ((1, 4),), {"output_size": 2}, ValueError, "adaptive_avg_pool2d"),
        (F.adaptive_avg_pool2d, ((1, 1, 4, 4),), {"output_size": (1, 2, 3)}, ValueError, "adaptive_avg_pool2d"),
    ],
)
def test_pool_errors(fn, args, kw, exc, pat):
    x = rand(*args[0])
    tx = T(x)
    with pytest.raises(exc, match=pat):
        fn(tx, **kw)
    np.testing.assert_array_equal(val(tx), x)


def test_pool_int_dtype_is_type_error():
    xi = T(np.arange(16, dtype=np.int64).reshape(1, 1, 4, 4))
    for fn, kw in ((F.max_pool2d, {"kernel_size": 2}), (F.avg_pool2d, {"kernel_size": 2}),
                   (F.adaptive_avg_pool2d, {"output_size": 2})):
        with pytest.raises(TypeError, match=fn.__name__):
            fn(xi, **kw)
