"""Convolution epilogues in inference graphs: ``conv2d → relu → max_pool2d(2)``
captured under ``no_grad`` runs as one ``conv2d_fused`` node (the ``epilogue``
graph pass), equal to eager; graphs that compute gradients keep the ops apart."""

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

RTOL, ATOL = 1e-5, 1e-6


def arr(t):
    return np.asarray(t.detach())


def ops(compiled, *args):
    return [n["op"] for n in compiled.graph(*args).nodes()]


def _cnn(seed=0, dtype=fg.float32):
    fg.manual_seed(seed)
    m = nn.Sequential(
        nn.Conv2d(1, 8, 3),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 10),
    )
    return m.to(dtype).eval()


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_cnn_fuses_and_matches_eager(batch):
    m = _cnn()
    c = fg.compile(m)
    x = fg.randn(batch, 1, 14, 14)
    with fg.no_grad():
        want = arr(m(x))
        got = arr(c(x))
        names = ops(c, x)
    assert names.count("conv2d_fused") == 2, names
    assert "relu" not in names and "max_pool2d" not in names, names
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    # The epilogue runs in the same order as the ops: the values are the same bits.
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kw",
    [
        dict(padding=1),
        dict(stride=2),
        dict(padding=(1, 0), dilation=2),
        dict(groups=2),
        dict(bias=False),
    ],
)
@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_geometries_and_odd_sizes(kw, dtype):
    fg.manual_seed(1)
    conv = nn.Conv2d(4, 6, 3, **kw).to(dtype).eval()

    def f(x):
        return F.max_pool2d(F.relu(conv(x)), 2)

    c = fg.compile(f)
    x = fg.randn(2, 4, 11, 13, dtype=dtype)  # odd sizes: the pool drops the last row/column
    with fg.no_grad():
        want, got = arr(f(x)), arr(c(x))
        assert "conv2d_fused" in ops(c, x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_relu_only_and_pool_only():
    fg.manual_seed(2)
    conv = nn.Conv2d(3, 5, 3).eval()
    x = fg.randn(4, 3, 9, 9)
    for f in (lambda x: F.relu(conv(x)), lambda x: F.max_pool2d(conv(x), 2, 2)):
        c = fg.compile(f)
        with fg.no_grad():
            np.testing.assert_array_equal(arr(c(x)), arr(f(x)))
            names = ops(c, x)
        assert names.count("conv2d_fused") == 1 and "conv2d" not in names, names


def test_nan_passes_through_like_the_ops():
    fg.manual_seed(3)
    conv = nn.Conv2d(1, 2, 1).eval()
    xs = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)
    xs[0, 0, 1, 1] = np.nan
    xs[1, 0, 4, 5] = np.nan
    x = fg.tensor(xs)

    def f(x):
        return F.max_pool2d(F.relu(conv(x)), 2)

    c = fg.compile(f)
    with fg.no_grad():
        want, got = arr(f(x)), arr(c(x))
        assert "conv2d_fused" in ops(c, x)
    assert np.isnan(want).sum() == 4
    np.testing.assert_array_equal(got, want)


def test_not_fused_when_the_intermediate_is_used_or_returned():
    fg.manual_seed(4)
    conv = nn.Conv2d(2, 3, 3).eval()
    x = fg.randn(2, 2, 8, 8)

    def both(x):
        y = conv(x)
        return F.relu(y), y

    def pooled_and_relu(x):
        r = F.relu(conv(x))
        return F.max_pool2d(r, 2), r.sum()

    for f in (both, pooled_and_relu):
        c = fg.compile(f)
        with fg.no_grad():
            got, want = c(x), f(x)
            names = ops(c, x)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(arr(a), arr(b))
        if f is both:
            assert "conv2d_fused" not in names, names
        else:
            # relu's result is read twice: the pool stays apart.
            assert "max_pool2d" in names, names


def test_graphs_with_gradients_stay_unfused():
    m = _cnn()
    m.train()
    c = fg.compile(m)
    x = fg.randn(2, 1, 14, 14)
    names = ops(c, x)
    assert "conv2d_fused" not in names and names.count("conv2d") == 2, names
    out = c(x)
    assert out.requires_grad
    out.sum().backward()
    assert m[0].weight.grad is not None


def test_weight_updates_are_seen():
    m = _cnn()
    c = fg.compile(m)
    x = fg.randn(2, 1, 14, 14)
    with fg.no_grad():
        c(x)
        m[0].weight.mul_(0.5)
        m[2].bias.add_(1.0)
        np.testing.assert_array_equal(arr(c(x)), arr(m(x)))


def test_pass_can_be_switched_off():
    old = fg.set_graph_passes(epilogue=False)
    try:
        m = _cnn()
        c = fg.compile(m)
        x = fg.randn(2, 1, 14, 14)
        with fg.no_grad():
            names = ops(c, x)
            np.testing.assert_array_equal(arr(c(x)), arr(m(x)))
        assert "conv2d_fused" not in names and names.count("conv2d") == 2, names
    finally:
        fg.set_graph_passes(**old)


def test_saved_graph_with_fused_nodes(tmp_path):
    m = _cnn()
    c = fg.compile(m)
    x = fg.randn(3, 1, 14, 14)
    with fg.no_grad():
        c(x)
        g = c.graph(x)
        assert "conv2d_fused" in [n["op"] for n in g.nodes()]
        g.save(tmp_path / "cnn.fgraph")
        loaded = fg.load_graph(tmp_path / "cnn.fgraph")
        np.testing.assert_array_equal(arr(loaded(x)), arr(m(x)))


def test_onnx_export_keeps_standard_ops(tmp_path):
    onnx = pytest.importorskip("onnx", reason="fg.onnx.export needs the onnx package")
    m = _cnn()
    path = tmp_path / "cnn.onnx"
    fg.onnx.export(m, fg.randn(2, 1, 14, 14), str(path))
    kinds = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert kinds.count("Conv") == 2 and "MaxPool" in kinds and "Relu" in kinds, kinds
