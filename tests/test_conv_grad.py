"""Gradients of convolution and pooling beyond the op-table gradchecks:
larger geometries against NumPy-derived gradients (stride, padding,
dilation, groups, bias, 1x1 kernels, unbatched inputs, strided views),
second derivatives, max-pool routing to the argmax, average-pool divisor
rules, and half-precision dtypes."""

import ferrograd as fg
import numpy as np
import pytest
from optable.linalg import np_adaptive_avg_pool2d, np_avg_pool2d, np_conv2d, np_max_pool2d

F = fg.nn.functional


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def np_conv2d_grads(x, w, g, stride=1, padding=0, dilation=1, groups=1):
    """Input, weight and bias gradients of ``np_conv2d`` for the output gradient ``g``."""
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
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    oh, ow = g.shape[2], g.shape[3]
    og = o // groups
    for gi in range(groups):
        cs, os_ = slice(gi * cg, (gi + 1) * cg), slice(gi * og, (gi + 1) * og)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
                cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
                win = xp[:, cs, rows, cols]
                gw[os_, :, i, j] += np.einsum("nohw,nchw->oc", g[:, os_], win)
                gxp[:, cs, rows, cols] += np.einsum("nohw,oc->nchw", g[:, os_], w[os_, :, i, j])
    h, wd = x.shape[2], x.shape[3]
    gx = gxp[:, :, pads[0]:pads[0] + h, pads[2]:pads[2] + wd]
    return gx, gw, g.sum(axis=(0, 2, 3))


GEOMETRIES = [
    # (N, C, H, W, O, kh, kw, stride, padding, dilation, groups)
    (2, 3, 9, 8, 4, 3, 3, 1, 0, 1, 1),
    (2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1),
    (3, 4, 10, 9, 6, 3, 2, 2, 1, 1, 2),
    (2, 4, 11, 7, 4, 3, 3, (2, 1), (2, 1), (2, 1), 4),     # depthwise
    (1, 2, 7, 7, 3, 2, 3, 3, 0, 2, 1),                     # stride 3 leaves rows unused
    (2, 6, 8, 8, 4, 1, 1, 1, 0, 1, 2),                     # 1x1: direct GEMM paths
    (2, 3, 6, 5, 2, 1, 1, 2, 0, 1, 1),                     # 1x1 strided
    (2, 2, 8, 7, 3, 4, 3, 1, "same", (2, 1), 1),           # asymmetric 'same' padding
    (2, 2, 8, 7, 3, 3, 3, 2, "valid", 1, 1),
]


@pytest.mark.parametrize("geom", GEOMETRIES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_gradients_match_numpy(geom, bias):
    n, c, h, wd, o, kh, kw, stride, padding, dilation, groups = geom
    rng = np.random.default_rng(GEOMETRIES.index(geom))
    x = rng.standard_normal((n, c, h, wd))
    w = rng.standard_normal((o, c // groups, kh, kw))
    b = rng.standard_normal(o)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    tx, tw, tb = t64(x), t64(w), t64(b)
    y = F.conv2d(tx, tw, tb if bias else None, **kwargs)
    np.testing.assert_allclose(y.detach().numpy(), np_conv2d(x, w, b if bias else None, **kwargs), atol=1e-10)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    gx, gw, gb = np_conv2d_grads(x, w, g, **kwargs)
    np.testing.assert_allclose(tx.grad.numpy(), gx, atol=1e-10)
    np.testing.assert_allclose(tw.grad.numpy(), gw, atol=1e-10)
    if bias:
        np.testing.assert_allclose(tb.grad.numpy(), gb, atol=1e-10)
    assert y.grad_fn.name() == "ConvolutionBackward"


def test_conv2d_float32_gradients_and_many_samples():
    # many samples take the threaded per-sample paths (per-task weight-gradient accumulators)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((33, 5, 12, 12)).astype(np.float32)
    w = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    tx = fg.tensor(x, requires_grad=True)
    tw = fg.tensor(w, requires_grad=True)
    y = F.conv2d(tx, tw, stride=2, padding=1)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(fg.tensor(g))
    gx, gw, _ = np_conv2d_grads(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64), 2, 1)
    assert tx.grad.dtype == fg.float32 and tw.grad.dtype == fg.float32
    np.testing.assert_allclose(tx.grad.numpy(), gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tw.grad.numpy(), gw, rtol=1e-4, atol=1e-3)


def test_conv2d_single_large_sample():
    # one big sample: the GEMMs and the column scatter are threaded instead of the samples
    rng = np.random.default_rng(15)
    x = rng.standard_normal((1, 64, 32, 32))
    w = rng.standard_normal((64, 64, 3, 3)) * 0.1
    tx, tw = t64(x), t64(w)
    y = F.conv2d(tx, tw, padding=1)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    gx, gw, _ = np_conv2d_grads(x, w, g, 1, 1)
    np.testing.assert_allclose(tx.grad.numpy(), gx, atol=1e-9)
    np.testing.assert_allclose(tw.grad.numpy(), gw, atol=1e-9)


def test_conv2d_unbatched_and_strided_views():
    rng = np.random.default_rng(6)
    base_x = rng.standard_normal((6, 3, 7))      # viewed as (C=3, H=6, W=7) by a permute
    base_w = rng.standard_normal((2, 3, 3, 4))   # flipped along the last dim
    x = t64(base_x)
    w = t64(base_w)
    xv = x.permute(1, 0, 2)
    wv = w.flip(-1)
    y = F.conv2d(xv, wv, stride=(1, 2), padding=1)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    gx, gw, _ = np_conv2d_grads(base_x.transpose(1, 0, 2)[None], base_w[..., ::-1], g[None], (1, 2), 1)
    np.testing.assert_allclose(x.grad.numpy(), gx[0].transpose(1, 0, 2), atol=1e-10)
    np.testing.assert_allclose(w.grad.numpy(), gw[..., ::-1], atol=1e-10)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 2), (1, "same", 2, 1), (3, 2, 2, 2)])
def test_conv1d_gradients_match_numpy(stride, padding, dilation, groups):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 11))
    w = rng.standard_normal((6, 4 // groups, 3))
    b = rng.standard_normal(6)
    tx, tw, tb = t64(x), t64(w), t64(b)
    y = F.conv1d(tx, tw, tb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    p2 = padding if isinstance(padding, str) else (0, padding)
    gx, gw, gb = np_conv2d_grads(x[:, :, None], w[:, :, None], g[:, :, None], (1, stride), p2, (1, dilation), groups)
    np.testing.assert_allclose(tx.grad.numpy(), gx[:, :, 0], atol=1e-10)
    np.testing.assert_allclose(tw.grad.numpy(), gw[:, :, 0], atol=1e-10)
    np.testing.assert_allclose(tb.grad.numpy(), gb, atol=1e-10)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 2), (2, 1, 2, 1), (1, "same", 1, 2)])
def test_conv2d_second_derivatives(stride, padding, dilation, groups):
    rng = np.random.default_rng(8)
    x = t64(rng.standard_normal((2, 2, 5, 4)))
    w = t64(rng.standard_normal((2, 2 // groups, 2, 2)))
    b = t64(rng.standard_normal(2))

    def f(x, w, b):
        return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)

    fg.autograd.gradgradcheck(f, [x, w, b])


def test_conv_double_backward_through_a_nonlinearity():
    # d/dx of |∇_w L|² where L uses conv -> tanh: exercises the recorded backward convolutions
    rng = np.random.default_rng(9)
    x = t64(rng.standard_normal((1, 2, 5, 5)))
    w = t64(rng.standard_normal((3, 2, 3, 3)) * 0.5)

    def f(x, w):
        y = F.conv2d(x, w, padding=1, stride=2).tanh()
        (gw,) = fg.autograd.grad(y.sum(), w, create_graph=True)
        return (gw * gw).sum()

    fg.autograd.gradcheck(f, [x, w])


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------

def test_max_pool_routes_gradient_to_argmax_and_accumulates_overlaps():
    a = np.array([[[[1.0, 5.0, 2.0, 0.0],
                    [3.0, 4.0, 9.0, 1.0],
                    [0.0, 2.0, 8.0, 7.0]]]])
    x = t64(a)
    y, idx = F.max_pool2d(x, 2, stride=1, return_indices=True)
    np.testing.assert_array_equal(y.detach().numpy(), [[[[5, 9, 9], [4, 9, 9]]]])
    g = np.array([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
    y.backward(t64(g, False))
    expect = np.zeros_like(a)
    np.add.at(expect.reshape(-1), idx.numpy().reshape(-1), g.reshape(-1))
    np.testing.assert_allclose(x.grad.numpy(), expect)
    # 9 is the max of four windows: it gets 2 + 3 + 5 + 6
    assert x.grad.numpy()[0, 0, 1, 2] == 16.0 and x.grad.numpy()[0, 0, 1, 1] == 4.0


def test_max_pool_ties_go_to_the_first_maximum_in_the_window():
    x = t64(np.ones((1, 1, 2, 4)))
    F.max_pool2d(x, 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[[[1, 0, 1, 0], [0, 0, 0, 0]]]])


@pytest.mark.parametrize("kw", [
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
])
def test_max_pool_gradient_matches_indices(kw):
    rng = np.random.default_rng(10)
    a = rng.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(np.float64)
    x = t64(a)
    y, idx = F.max_pool2d(x, return_indices=True, **kw)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    expect = np.zeros((6, 42))
    np.add.at(expect, (np.arange(6)[:, None], idx.numpy().reshape(6, -1)), g.reshape(6, -1))
    np.testing.assert_allclose(x.grad.numpy(), expect.reshape(a.shape))
    fg.autograd.gradgradcheck(lambda t: F.max_pool2d(t, **kw), [t64(a[:1, :1])])


def test_max_pool_window_over_padding_only_passes_no_gradient():
    # H=1 with padding 1 and dilation 2: the window rows are -1 and 1, outside the input
    x = t64([[[0.5, 2.0, -1.0]]])
    y = F.max_pool2d(x, (2, 1), padding=(1, 0), dilation=(2, 1))
    assert np.isneginf(y.detach().numpy()).all()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 0.0)


def _jacobian_t(fn, shape, g):
    """Jᵀ g of a linear NumPy map by unit inputs."""
    out = np.zeros(int(np.prod(shape)))
    for k in range(out.size):
        e = np.zeros(out.size)
        e[k] = 1.0
        out[k] = (fn(e.reshape(shape)) * g).sum()
    return out.reshape(shape)


@pytest.mark.parametrize("kw", [
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=True),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True, count_include_pad=True),
    dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=2, ceil_mode=True, divisor_override=4),
    dict(kernel_size=2),
])
def test_avg_pool_gradient_follows_the_divisor_rules(kw):
    rng = np.random.default_rng(11)
    shape = (1, 2, 5, 6)
    a = rng.standard_normal(shape)
    x = t64(a)
    y = F.avg_pool2d(x, **kw)
    np.testing.assert_allclose(y.detach().numpy(), np_avg_pool2d(a, **kw), atol=1e-12)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    np.testing.assert_allclose(x.grad.numpy(), _jacobian_t(lambda v: np_avg_pool2d(v, **kw), shape, g), atol=1e-12)
    assert y.grad_fn.name() == "AvgPool2DBackward"
    fg.autograd.gradgradcheck(lambda t: F.avg_pool2d(t, **kw), [t64(a[:, :1])])


@pytest.mark.parametrize("size", [1, (3, 4), (5, 2), (None, 3), (7, 6)])
def test_adaptive_avg_pool_gradient(size):
    rng = np.random.default_rng(12)
    shape = (2, 2, 7, 6)
    a = rng.standard_normal(shape)
    x = t64(a)
    y = F.adaptive_avg_pool2d(x, size)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    expect = _jacobian_t(lambda v: np_adaptive_avg_pool2d(v, size), shape, g)
    np.testing.assert_allclose(x.grad.numpy(), expect, atol=1e-12)
    # unbatched input
    xu = t64(a[0])
    F.adaptive_avg_pool2d(xu, size).backward(t64(g[0], False))
    np.testing.assert_allclose(xu.grad.numpy(), expect[0], atol=1e-12)


def _np_cnn_head(x, w):
    y = np_conv2d(x, w, padding=1)
    return (np_max_pool2d(y, 2) + np_avg_pool2d(y, 2) + np_adaptive_avg_pool2d(y, (3, 3))).sum()


def _central_diff(fn, a, h=1e-6):
    out = np.zeros(a.size)
    for k in range(a.size):
        e = np.zeros(a.size)
        e[k] = h
        out[k] = (fn(a + e.reshape(a.shape)) - fn(a - e.reshape(a.shape))) / (2 * h)
    return out.reshape(a.shape)


# Largest error allowed, relative to the largest reference gradient (measured: about
# 4e-4 for float16, 4e-3 for bfloat16 and 1e-7 for float32 over seeds 13..19).
_LOWP_GRAD_TOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5}


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16, fg.float32])
def test_low_precision_gradients_keep_the_dtype(dtype):
    """The gradients keep the dtype and their values match float64 central differences of
    the NumPy forward at the same (rounded) inputs, to the dtype's precision."""
    rng = np.random.default_rng(13)
    x = fg.tensor(rng.standard_normal((2, 2, 6, 6)).astype(np.float32)).to(dtype).requires_grad_()
    w = fg.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32)).to(dtype).requires_grad_()
    y = F.conv2d(x, w, padding=1)
    y = F.max_pool2d(y, 2) + F.avg_pool2d(y, 2) + F.adaptive_avg_pool2d(y, (3, 3))
    y.sum().backward()
    assert x.grad.dtype == dtype and w.grad.dtype == dtype
    assert np.isfinite(x.grad.float().numpy()).all()
    xa, wa = x.detach().double().numpy(), w.detach().double().numpy()
    tol = _LOWP_GRAD_TOL[str(dtype).rsplit(".", 1)[-1]]
    for got, want in (
        (x.grad.double().numpy(), _central_diff(lambda v: _np_cnn_head(v, wa), xa)),
        (w.grad.double().numpy(), _central_diff(lambda v: _np_cnn_head(xa, v), wa)),
    ):
        np.testing.assert_allclose(got, want, rtol=0, atol=tol * np.abs(want).max())


def test_small_cnn_gradcheck():
    rng = np.random.default_rng(14)
    x = t64(rng.standard_normal((2, 1, 6, 6)))
    w1 = t64(rng.standard_normal((2, 1, 3, 3)))
    b1 = t64(rng.standard_normal(2))
    w2 = t64(rng.standard_normal((3, 8)))

    def net(x, w1, b1, w2):
        h = F.max_pool2d(F.conv2d(x, w1, b1, padding=1).tanh(), 2)
        return F.linear(h.reshape(2, -1)[:, :8], w2)

    fg.autograd.gradcheck(net, [x, w1, b1, w2])


def test_conv2d_weight_grad_is_bitwise_repeatable():
    # The threaded weight gradient sums per-chunk partials in a fixed order.
    rng = np.random.default_rng(0)
    x = fg.from_numpy(rng.standard_normal((64, 8, 8, 8), dtype=np.float32))
    w0 = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    g = fg.from_numpy(rng.standard_normal((64, 16, 8, 8), dtype=np.float32))
    seen = set()
    for _ in range(12):
        w = fg.from_numpy(w0.copy()).requires_grad_()
        fg.nn.functional.conv2d(x, w, padding=1).backward(g)
        seen.add(w.grad.numpy().tobytes())
    assert len(seen) == 1
