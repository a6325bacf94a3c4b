"""Float32 stride-1 convolutions on AVX-512 CPUs run a direct kernel (no
unrolled column matrix). Checked against a NumPy float64 reference over the
shapes that reach each part of it (channel blocks of 8, 4 and 1, the pixel
tail, padding, strided inputs, one sample split over threads), against the
im2col + GEMM route (the kernel switched off), and for the same bits whatever the
thread count and whether the epilogue (relu, 2×2 max-pool) is fused."""

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import _core

RTOL, ATOL = 1e-5, 1e-5

pytestmark = pytest.mark.skipif(
    fg.cpu_level() != "avx512", reason="the direct convolution kernel runs on AVX-512 CPUs only"
)


@pytest.fixture(autouse=True)
def direct_on():
    """Each test here runs with the direct kernel on (the default), and restores the setting."""
    old = _core._direct_conv(True)
    yield
    _core._direct_conv(old)


def arr(t):
    return np.asarray(t.detach())


def conv_ref(x, w, b, pad=(0, 0)):
    """NumPy float64 conv2d (stride 1, one group); pad is (rows, cols)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = h - kh + 1, wd - kw + 1
    cols = np.stack([x[:, :, i : i + oh, j : j + ow] for i in range(kh) for j in range(kw)], axis=2)
    y = np.einsum("ok,nkp->nop", w.reshape(o, -1), cols.reshape(n, c * kh * kw, oh * ow))
    y = y.reshape(n, o, oh, ow)
    return y if b is None else y + b.astype(np.float64)[None, :, None, None]


def data(seed, x_shape, w_shape, bias=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32) if bias else None
    return x, w, b


def run(x, w, b, **kw):
    return arr(F.conv2d(fg.tensor(x), fg.tensor(w), None if b is None else fg.tensor(b), **kw))


def gemm_route(f):
    """``f()`` with the direct kernel switched off (im2col + GEMM at the same SIMD level)."""
    old = _core._direct_conv(False)
    try:
        return f()
    finally:
        _core._direct_conv(old)


@pytest.mark.parametrize(
    "x_shape,w_shape,pad,bias",
    [
        ((1, 1, 28, 28), (32, 1, 3, 3), 0, True),  # the MNIST CNN's first conv
        ((1, 32, 26, 26), (64, 32, 3, 3), 0, True),  # its second: one sample over threads
        ((3, 5, 9, 11), (13, 5, 3, 2), 0, True),  # 13 channels: blocks of 8, 4 and 1
        ((2, 3, 7, 6), (6, 3, 2, 3), 1, False),  # padding, channel blocks of 4 and 1
        ((5, 2, 4, 40), (9, 2, 4, 5), (2, 1), True),  # uneven padding, wide rows
        ((1, 64, 12, 12), (70, 64, 5, 5), 2, True),  # long sums, threads, a tail block
    ],
)
def test_direct_conv_matches_reference_and_gemm_route(x_shape, w_shape, pad, bias):
    x, w, b = data(sum(x_shape), x_shape, w_shape, bias)
    got = run(x, w, b, padding=pad)
    p = (pad, pad) if isinstance(pad, int) else pad
    want = conv_ref(x, w, b, p)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gemm_route(lambda: run(x, w, b, padding=pad)), want, rtol=RTOL, atol=ATOL)


def test_strided_and_offset_inputs_read_as_the_contiguous_one():
    x, w, b = data(7, (3, 4, 10, 9), (8, 4, 3, 3))
    base = fg.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))  # channels-last storage
    views = {
        "channels_last": base.permute(0, 3, 1, 2),
        "row slice": fg.tensor(np.pad(x, ((0, 0), (0, 0), (0, 0), (1, 2))))[:, :, :, 1:-2],
        "sample slice": fg.tensor(np.concatenate([x, x]))[3:],
    }
    want = run(x, w, b)
    np.testing.assert_allclose(want, conv_ref(x, w, b), rtol=RTOL, atol=ATOL)
    for name, v in views.items():
        got = arr(F.conv2d(v, fg.tensor(w), fg.tensor(b)))
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("batch", [1, 3])
def test_same_bits_on_one_and_two_threads(batch):
    x, w, b = data(batch, (batch, 32, 26, 26), (64, 32, 3, 3))
    old = fg.get_num_threads()
    try:
        outs = []
        for t in (1, 2):
            fg.set_num_threads(t)
            outs.append(run(x, w, b))
    finally:
        fg.set_num_threads(old)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], conv_ref(x, w, b), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("pad", [0, 1])
def test_a_sample_gets_the_same_bits_in_any_batch(pad):
    # batches of 64, 32 (and a view of rows), 5 and 1: each sample's output is the same bits
    x, w, b = data(5, (64, 1, 8, 8), (32, 1, 3, 3))
    x2, w2, b2 = data(6, (64, 32, 8, 8), (64, 32, 3, 3))
    for xs, ws, bs in ((x, w, b), (x2, w2, b2)):
        full = run(xs, ws, bs, padding=pad)
        np.testing.assert_allclose(full, conv_ref(xs, ws, bs, (pad, pad)), rtol=RTOL, atol=ATOL)
        xt = fg.tensor(xs)
        for lo, hi in ((0, 32), (32, 64), (7, 12), (40, 41)):
            part = arr(F.conv2d(xt[lo:hi], fg.tensor(ws), fg.tensor(bs), padding=pad))
            np.testing.assert_array_equal(part, full[lo:hi], err_msg=f"rows {lo}:{hi}")


@pytest.mark.parametrize("pad", [0, 1])
def test_fused_relu_pool_equals_eager_ops(pad):
    x, w, b = data(11, (2, 6, 13, 12), (12, 6, 3, 3))
    x[0, 0, 3, 4] = np.nan  # a NaN passes relu and wins its pooling window
    conv = (fg.tensor(w), fg.tensor(b))

    def f(t):
        return F.max_pool2d(F.relu(F.conv2d(t, *conv, padding=pad)), 2)

    def g(t):
        return F.relu(F.conv2d(t, *conv, padding=pad))

    xt = fg.tensor(x)
    with fg.no_grad():
        for fn, ops in ((f, ["conv2d_fused"]), (g, ["conv2d_fused"])):
            c = fg.compile(fn)
            got = arr(c(xt))
            assert [n["op"] for n in c.graph(xt).nodes()] == ops
            np.testing.assert_array_equal(got, arr(fn(xt)))
    y = np.maximum(conv_ref(x, w, b, (pad, pad)), 0)
    nan = np.isnan(y)
    assert nan.any()
    got = arr(g(xt))
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_allclose(got[~nan], y[~nan], rtol=RTOL, atol=ATOL)
