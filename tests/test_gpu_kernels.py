"""GPU kernels for losses, convolution and pooling against the CPU (forward and gradients)."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

RTOL, ATOL = 1e-4, 1e-5


def _both(arrs, grad, nograd):
    req = [grad and a.dtype == np.float32 and k not in nograd for k, a in enumerate(arrs)]
    cpu = [fg.tensor(a, requires_grad=r) for a, r in zip(arrs, req, strict=True)]
    gpu = [fg.tensor(a).to("gpu") for a in arrs]
    for g, r in zip(gpu, req, strict=True):
        if r:
            g.requires_grad_(True)
    return cpu, gpu


def _parity(fn, arrs, grad=True, nograd=()):
    cpu, gpu = _both(arrs, grad, nograd)
    want, got = fn(*cpu), fn(*gpu)
    assert str(got.device) == "gpu"
    np.testing.assert_allclose(got.to("cpu").numpy(), want.numpy(), rtol=RTOL, atol=ATOL, equal_nan=True)
    if grad:
        gw = np.random.default_rng(1).standard_normal(want.shape).astype(np.float32)
        want.backward(fg.tensor(gw))
        got.backward(fg.tensor(gw).to("gpu"))
        for c, g in zip(cpu, gpu, strict=True):
            if c.requires_grad:
                np.testing.assert_allclose(g.grad.to("cpu").numpy(), c.grad.numpy(), rtol=RTOL, atol=ATOL)


rng = np.random.default_rng(0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy(reduction, weighted, smoothing):
    x = rng.standard_normal((7, 5)).astype(np.float32)
    t = np.array([0, 4, -100, 2, 1, 3, 4], dtype=np.int64)
    w = rng.random(5).astype(np.float32) + 0.5

    def f(x, t, w=None):
        return F.cross_entropy(x, t, weight=w if weighted else None, reduction=reduction,
                               label_smoothing=smoothing, ignore_index=-100)

    _parity(f, [x, t, w], nograd=(2,))


def test_cross_entropy_spatial_and_empty():
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    t = rng.integers(0, 4, (2, 3, 3))
    _parity(lambda x, t: F.cross_entropy(x, t), [x, t])
    e = fg.zeros(0, 4, device="gpu")
    te = fg.zeros(0, dtype=fg.int64, device="gpu")
    assert F.cross_entropy(e, te, reduction="sum").item() == 0.0
    assert F.cross_entropy(e, te, reduction="none").shape == (0,)


def test_cross_entropy_bad_target_is_index_error():
    x = fg.zeros(3, 4, device="gpu")
    t = fg.tensor([0, 4, 1]).to("gpu")
    with pytest.raises(IndexError, match="cross_entropy.*target 4 is out of bounds"):
        F.cross_entropy(x, t)
    with pytest.raises((RuntimeError, ValueError), match="device"):
        F.cross_entropy(x, fg.tensor([0, 1, 1]))


@pytest.mark.parametrize(
    "shape,wshape,kw",
    [
        ((2, 3, 6, 5), (4, 3, 3, 3), {}),
        ((2, 3, 6, 5), (4, 3, 3, 3), {"padding": 1}),
        ((1, 4, 7, 7), (6, 2, 3, 2), {"stride": 2, "padding": (1, 0), "groups": 2}),
        ((2, 2, 8, 8), (2, 1, 3, 3), {"dilation": 2, "padding": 2, "groups": 2, "stride": (2, 1)}),
        ((0, 3, 5, 5), (2, 3, 3, 3), {}),
    ],
)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(shape, wshape, kw, bias):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(wshape).astype(np.float32)
    b = rng.standard_normal(wshape[0]).astype(np.float32)
    if bias:
        _parity(lambda x, w, b: F.conv2d(x, w, b, **kw), [x, w, b])
    else:
        _parity(lambda x, w: F.conv2d(x, w, **kw), [x, w])


def test_conv2d_strided_input():
    x = rng.standard_normal((2, 3, 6, 10)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    _parity(lambda x, w: F.conv2d(x[:, :, :, ::2], w, padding=1), [x, w])


@pytest.mark.parametrize(
    "kw",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3), "stride": 1, "dilation": 2},
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
    ],
)
def test_max_pool2d(kw):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    _parity(lambda x: F.max_pool2d(x, **kw), [x])
    cx, gx = fg.tensor(x), fg.tensor(x).to("gpu")
    _, ci = F.max_pool2d(cx, return_indices=True, **kw)
    _, gi = F.max_pool2d(gx, return_indices=True, **kw)
    np.testing.assert_array_equal(gi.to("cpu").numpy(), ci.numpy())


def test_max_pool2d_ties_pick_first():
    x = np.ones((1, 1, 4, 4), dtype=np.float32)
    _parity(lambda x: F.max_pool2d(x, 2), [x])


def test_gather_scatter():
    src = rng.standard_normal((3, 5)).astype(np.float32)
    idx = rng.integers(0, 5, (3, 4))
    want = fg.gather(fg.tensor(src), 1, fg.tensor(idx)).numpy()
    got = fg.gather(fg.tensor(src).to("gpu"), 1, fg.tensor(idx).to("gpu")).to("cpu").numpy()
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError, match="gather"):
        fg.gather(fg.tensor(src).to("gpu"), 1, fg.tensor([[7]]).to("gpu"))
    z = fg.zeros(3, 5)
    want = z.scatter_add(1, fg.tensor(idx), fg.tensor(src[:, :4].copy())).numpy()
    got = fg.zeros(3, 5, device="gpu").scatter_add(1, fg.tensor(idx).to("gpu"),
                                                    fg.tensor(src[:, :4].copy()).to("gpu"))
    np.testing.assert_allclose(got.to("cpu").numpy(), want, rtol=RTOL, atol=ATOL)


def test_small_cnn_training_step_matches_cpu():
    fg.manual_seed(0)
    model = fg.nn.Sequential(
        fg.nn.Conv2d(1, 4, 3, padding=1), fg.nn.ReLU(), fg.nn.MaxPool2d(2), fg.nn.Flatten(),
        fg.nn.Linear(4 * 4 * 4, 10),
    )
    gmodel = fg.nn.Sequential(
        fg.nn.Conv2d(1, 4, 3, padding=1), fg.nn.ReLU(), fg.nn.MaxPool2d(2), fg.nn.Flatten(),
        fg.nn.Linear(4 * 4 * 4, 10),
    )
    gmodel.load_state_dict(model.state_dict())
    gmodel.to("gpu")
    x = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 5)
    lc = F.cross_entropy(model(fg.tensor(x)), fg.tensor(y))
    lg = F.cross_entropy(gmodel(fg.tensor(x).to("gpu")), fg.tensor(y).to("gpu"))
    lc.backward()
    lg.backward()
    assert abs(lc.item() - lg.item()) < 1e-5
    for pc, pg in zip(model.parameters(), gmodel.parameters(), strict=True):
        np.testing.assert_allclose(pg.grad.to("cpu").numpy(), pc.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "kw",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": (2, 3), "stride": 1, "divisor_override": 5},
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
    ],
)
def test_avg_pool2d(kw):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    _parity(lambda x: F.avg_pool2d(x, **kw), [x])


@pytest.mark.parametrize("size", [1, (3, 2), (5, 7), (7, 8)])
def test_adaptive_avg_pool2d(size):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    _parity(lambda x: F.adaptive_avg_pool2d(x, size), [x])


@pytest.mark.parametrize(
    "index",
    [
        lambda i, j: (i,),
        lambda i, j: (slice(None), j),
        lambda i, j: (i.reshape(2, 2),),
        lambda i, j: (i.reshape(2, 2), j[:2].reshape(1, 2)),  # two tensors, broadcast
        lambda i, j: (Ellipsis, (j - 3)[::2]),  # [2, -3] on the last dim (size 3)
    ],
    ids=["rows", "columns", "2d-index", "two-tensors", "ellipsis-strided-index"],
)
def test_advanced_indexing_forward_and_gradient(index):
    src = rng.standard_normal((5, 6, 3)).astype(np.float32)
    iv = np.array([4, -1, 0, 2])  # negative indices wrap
    jv = np.array([5, 0, 0, 3])  # a repeated index: its gradient accumulates
    cpu_x = fg.tensor(src, requires_grad=True)
    gpu_x = fg.tensor(src).to("gpu").requires_grad_(True)
    want = cpu_x[index(fg.tensor(iv), fg.tensor(jv))]
    got = gpu_x[index(fg.tensor(iv).to("gpu"), fg.tensor(jv).to("gpu"))]
    assert str(got.device) == "gpu"
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    gw = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    want.backward(fg.tensor(gw))
    got.backward(fg.tensor(gw).to("gpu"))
    np.testing.assert_allclose(gpu_x.grad.numpy(), cpu_x.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_indexing_a_strided_view_and_index_select():
    src = rng.standard_normal((4, 7)).astype(np.float32)
    idx = np.array([6, 1, 1, 3])
    g, c = fg.tensor(src).to("gpu").T, fg.tensor(src).T  # non-contiguous source
    np.testing.assert_array_equal(g[fg.tensor(idx).to("gpu")].numpy(), c[fg.tensor(idx)].numpy())
    got = fg.index_select(fg.tensor(src).to("gpu"), 1, fg.tensor(idx).to("gpu"))
    np.testing.assert_array_equal(got.numpy(), fg.index_select(fg.tensor(src), 1, fg.tensor(idx)).numpy())
    for dtype in (fg.int32, fg.int64, fg.bool):
        x = fg.tensor(src > 0).to(dtype).T
        np.testing.assert_array_equal(x.to("gpu")[fg.tensor(idx).to("gpu")].numpy(), x[fg.tensor(idx)].numpy())


def test_index_on_another_device_names_both_devices():
    """Host indices and masks for a GPU tensor are copied over (see below); GPU indices
    for a CPU tensor are an error naming both devices, and the CPU tensor is untouched."""
    x = fg.ones(5, 3, device="gpu")
    c = fg.ones(5, 3)
    for f in (
        lambda: c[fg.tensor([0, 1], device="gpu")],
        lambda: c.index_put_((fg.tensor([0], device="gpu"),), fg.zeros(3)),
        lambda: c.__setitem__(fg.tensor([True, False, True, False, False], device="gpu"), 0.0),
    ):
        with pytest.raises(RuntimeError, match=r"found gpu and cpu|found cpu and gpu"):
            f()
    np.testing.assert_array_equal(c.numpy(), np.ones((5, 3), np.float32))
    x.index_put_((fg.tensor([0]),), fg.zeros(3, device="gpu"))
    assert x[fg.tensor([0, 1])].sum().item() == 3.0
    assert fg.masked_select(x, fg.ones(5, 3, dtype=fg.bool)).sum().item() == 12.0


def test_out_of_range_index_is_index_error_and_writes_nothing():
    x = fg.tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).to("gpu")
    with pytest.raises(IndexError, match="out of bounds"):
        x[fg.tensor([0, 3]).to("gpu")]
    with pytest.raises(IndexError, match="out of bounds"):
        x[fg.tensor([1, -4]).to("gpu")] = 5.0
    np.testing.assert_array_equal(x.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "bool"])
def test_index_put_with_repeated_indices(accumulate, dtype):
    base = rng.standard_normal((5, 3)) * 4
    vals = rng.standard_normal((4, 3)) * 4
    idx = np.array([1, 3, 1, -1])  # 1 twice: the later write wins, or both add
    want = fg.tensor(base).to(getattr(fg, dtype))
    got = want.to("gpu")
    v = fg.tensor(vals).to(getattr(fg, dtype))
    want.index_put_((fg.tensor(idx),), v, accumulate=accumulate)
    got.index_put_((fg.tensor(idx).to("gpu"),), v.to("gpu"), accumulate=accumulate)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    # setitem with a broadcast value and a tensor index along dim 1
    fill = True if dtype == "bool" else 1
    want[:, fg.tensor([2, 0])] = fill
    got[:, fg.tensor([2, 0]).to("gpu")] = fill
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_forward_and_backward():
    fg.manual_seed(3)
    cpu = fg.nn.Embedding(10, 4, padding_idx=0)
    gpu = fg.nn.Embedding(10, 4, padding_idx=0)
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("gpu")
    tokens = np.array([[1, 2, 0, 2], [9, 1, 1, 0]])
    gw = rng.standard_normal((2, 4, 4)).astype(np.float32)
    want = cpu(fg.tensor(tokens))
    got = gpu(fg.tensor(tokens).to("gpu"))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    want.backward(fg.tensor(gw))
    got.backward(fg.tensor(gw).to("gpu"))
    np.testing.assert_allclose(gpu.weight.grad.numpy(), cpu.weight.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_boolean_masks_and_nonzero():
    src = rng.standard_normal((4, 5)).astype(np.float32)
    c, g = fg.tensor(src), fg.tensor(src).to("gpu")
    np.testing.assert_array_equal(g[g > 0].numpy(), c[c > 0].numpy())
    np.testing.assert_array_equal(fg.nonzero(g > 0.5).numpy(), fg.nonzero(c > 0.5).numpy())
    np.testing.assert_array_equal(fg.masked_select(g, g < 0).numpy(), fg.masked_select(c, c < 0).numpy())
    out = fg.nonzero(g > 0.5)
    assert str(out.device) == "gpu" and out.dtype == fg.int64
    g[g < 0] = 0.0
    c[c < 0] = 0.0
    np.testing.assert_array_equal(g.numpy(), c.numpy())


def _grad_dispatches(fn, x, g):
    """Dispatches recorded by the backward pass of `fn` at `x` with output gradient `g`."""
    y = fn(x)
    before = fg.gpu.stats()["dispatches"]
    (gx,) = fg.autograd.grad(y, [x], g)
    return gx, fg.gpu.stats()["dispatches"] - before


@pytest.mark.parametrize(
    "name, fn",
    [
        ("tanh", fg.tanh),
        ("sigmoid", fg.sigmoid),
        ("relu", F.relu),
        ("leaky_relu", lambda x: F.leaky_relu(x, 0.2)),
        ("elu", lambda x: F.elu(x, 1.5)),
        ("gelu", F.gelu),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
        ("silu", F.silu),
        ("softplus", lambda x: F.softplus(x, beta=2.0, threshold=3.0)),
        ("erf", fg.erf),
    ],
)
def test_fused_unary_gradients_match_cpu_in_one_dispatch(name, fn):
    """The backward of each unary op with a fused kernel is one dispatch on the GPU
    (composing it from primitives took two to six) and matches the CPU's."""
    x = np.concatenate([np.linspace(-8, 8, 161), [0.0, -0.0, 50.0, -50.0, 1e-4]]).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    want, _ = _grad_dispatches(fn, fg.tensor(x, requires_grad=True), fg.tensor(g))
    got, n = _grad_dispatches(fn, fg.tensor(x, device="gpu", requires_grad=True), fg.tensor(g, device="gpu"))
    assert n == 1, f"{name}: {n} dispatches for the gradient"
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    # Strided and broadcast operands (a transposed input, an expanded gradient).
    xt = fg.tensor(x[:160].reshape(10, 16), device="gpu", requires_grad=True)
    gx, _ = _grad_dispatches(lambda t: fn(t.T), xt, fg.ones(1, device="gpu").expand(16, 10))
    xc = fg.tensor(x[:160].reshape(10, 16), requires_grad=True)
    gc, _ = _grad_dispatches(lambda t: fn(t.T), xc, fg.ones(1).expand(16, 10))
    np.testing.assert_allclose(gx.cpu().numpy(), gc.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape, dim", [((6, 70), 1), ((6, 70), 0), ((3, 4, 5), 1), ((7,), 0), ((4, 0), 1)])
def test_fused_softmax_gradient_matches_cpu(log, shape, dim):
    fn = (lambda t: fg.log_softmax(t, dim=dim)) if log else (lambda t: fg.softmax(t, dim=dim))
    x = rng.standard_normal(shape).astype(np.float32) * 3
    g = rng.standard_normal(shape).astype(np.float32)
    want, _ = _grad_dispatches(fn, fg.tensor(x, requires_grad=True), fg.tensor(g))
    got, n = _grad_dispatches(fn, fg.tensor(x, device="gpu", requires_grad=True), fg.tensor(g, device="gpu"))
    assert n <= 1, f"{n} dispatches for the gradient"
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    # A gradient that is a strided view.
    gt = np.ascontiguousarray(np.swapaxes(g, 0, -1))
    want, _ = _grad_dispatches(fn, fg.tensor(x, requires_grad=True), fg.tensor(gt).transpose(0, -1))
    got, _ = _grad_dispatches(
        fn, fg.tensor(x, device="gpu", requires_grad=True), fg.tensor(gt, device="gpu").transpose(0, -1)
    )
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_fused_gradients_step_aside_for_higher_order():
    """With create_graph the gradient is composed from recorded primitives (so it can be
    differentiated again): second derivatives on the GPU match the CPU's."""

    def second(device):
        x = fg.tensor([0.3, -1.2, 2.0], device=device, requires_grad=True)
        (g1,) = fg.autograd.grad(fg.tanh(x).sum(), [x], create_graph=True)
        (g2,) = fg.autograd.grad(g1.sum(), [x])
        return g2.cpu().numpy()

    np.testing.assert_allclose(second("gpu"), second("cpu"), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "kind, w, b, shape, norm",
    [
        ("layer", True, True, (12, 70), (70,)),
        ("layer", False, False, (5, 3, 8), (8,)),
        ("layer", True, False, (4, 6, 5), (6, 5)),
        ("layer", False, True, (3, 9), (9,)),
        ("rms", True, None, (12, 70), (70,)),
        ("rms", False, None, (2, 3, 4), (3, 4)),
        ("layer", True, True, (0, 5), (5,)),
    ],
)
def test_fused_norm_gradients_match_cpu(kind, w, b, shape, norm):
    """Layer/RMS norm gradients come from two kernels on the GPU (input; weight and bias).
    Norms over several trailing dims without a weight cover the test of the forward's row
    length (it once normalised over the last dim only)."""
    x = rng.standard_normal(shape).astype(np.float32) * 2 + 0.5
    g = rng.standard_normal(shape).astype(np.float32)
    wv = rng.standard_normal(norm).astype(np.float32)
    bv = rng.standard_normal(norm).astype(np.float32)

    def run(device):
        xs = fg.tensor(x, device=device, requires_grad=True)
        ps = []
        wt = fg.tensor(wv, device=device, requires_grad=True) if w else None
        ps += [wt] if w else []
        if kind == "layer":
            bt = fg.tensor(bv, device=device, requires_grad=True) if b else None
            ps += [bt] if b else []
            y = fg.nn.functional.layer_norm(xs, norm, wt, bt)
        else:
            y = fg.nn.functional.rms_norm(xs, norm, wt, eps=1e-5)
        before = fg.gpu.stats()["dispatches"] if device == "gpu" else 0
        grads = fg.autograd.grad(y, [xs, *ps], fg.tensor(g, device=device))
        n = fg.gpu.stats()["dispatches"] - before if device == "gpu" else 0
        return [y.cpu().numpy()] + [t.cpu().numpy() for t in grads], n

    want, _ = run("cpu")
    got, n = run("gpu")
    assert n <= 2, f"{n} dispatches for the gradients"
    for a, c in zip(got, want, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-4)


def test_uploaded_indices_are_checked_without_a_download():
    """An upload keeps a host copy of small integer tensors until a kernel writes the
    buffer, so range checks of class targets and indices read it: a training step's
    cross entropy or an embedding lookup costs no device-to-host read (and no wait)."""
    x = fg.randn(8, 5, device="gpu", requires_grad=True)
    t = fg.tensor([0, 1, 2, 3, 4, 0, 1, 2]).to("gpu")
    emb = fg.randn(10, 3, device="gpu")
    idx = fg.tensor([[1, 9, 0], [2, 2, 5]]).to("gpu")
    src = fg.randn(4, 6, device="gpu")
    gidx = fg.tensor([[0, 5, 1], [2, 3, 4], [5, 5, 0], [1, 1, 1]]).to("gpu")
    s0 = fg.gpu.stats()
    loss = F.cross_entropy(x, t)
    loss.backward()
    e = F.embedding(idx, emb)
    e2 = emb[idx[:, 1:]]  # a view of the uploaded tensor reads its part of the copy
    sel = fg.index_select(src, 1, gidx[1])
    gat = fg.gather(src, 1, gidx)
    s1 = fg.gpu.stats()
    assert s1["downloads"] - s0["downloads"] == 0
    assert s1["submits"] - s0["submits"] == 0
    cpu = {k: v.cpu() for k, v in {"x": x.detach(), "t": t, "emb": emb, "idx": idx, "src": src, "gidx": gidx}.items()}
    np.testing.assert_allclose(e.cpu().numpy(), F.embedding(cpu["idx"], cpu["emb"]).numpy())
    np.testing.assert_allclose(e2.cpu().numpy(), cpu["emb"][cpu["idx"][:, 1:]].numpy())
    np.testing.assert_allclose(sel.cpu().numpy(), fg.index_select(cpu["src"], 1, cpu["gidx"][1]).numpy())
    np.testing.assert_allclose(gat.cpu().numpy(), fg.gather(cpu["src"], 1, cpu["gidx"]).numpy())
    np.testing.assert_allclose(loss.item(), F.cross_entropy(cpu["x"], cpu["t"]).item(), rtol=1e-5)


def test_indices_written_on_the_device_are_read_back_for_their_check():
    """Once a kernel writes an uploaded tensor its host copy is dropped: the check then
    downloads the current values, and a value made out of range there is still refused."""
    x = fg.randn(4, 5, device="gpu")
    for write in (lambda t: t.add_(3), lambda t: t.__setitem__(2, 7), lambda t: t.copy_(t + 5)):
        t = fg.tensor([0, 1, 2, 1]).to("gpu")
        write(t)
        before = fg.gpu.stats()["downloads"]
        with pytest.raises(IndexError, match="out of bounds"):
            F.cross_entropy(x, t)
        assert fg.gpu.stats()["downloads"] - before >= 1
    dst = fg.zeros(2, 5, device="gpu")
    idx = fg.tensor([[0, 1], [2, 3]]).to("gpu")
    idx.mul_(2)  # [[0, 2], [4, 6]]: 6 is out of range for 5 columns
    with pytest.raises(IndexError):
        dst.scatter_(1, idx, fg.ones(2, 2, device="gpu"))
    np.testing.assert_array_equal(dst.cpu().numpy(), np.zeros((2, 5), np.float32))


def test_gpu_tensors_take_host_indices():
    """Python lists, NumPy arrays and CPU tensors index a GPU tensor (as in PyTorch):
    the indices are copied to the device, with no read back for their range check."""
    base = np.arange(20, dtype=np.float32).reshape(5, 4)
    keys = [
        ([0, 2, 2],),
        (np.array([4, -1]), slice(None, None, 2)),
        (slice(1, None), [3, 0]),
        (fg.tensor([1, 3]),),
        (np.array([True, False, True, False, True]),),
    ]
    for key in keys:
        x = fg.tensor(base, device="gpu")
        before = fg.gpu.stats()["downloads"]
        got = x[key]
        bool_mask = any(isinstance(k, np.ndarray) and k.dtype == bool for k in key)
        if not bool_mask:  # a mask's output shape depends on its values
            assert fg.gpu.stats()["downloads"] == before
        assert str(got.device) == "gpu"
        np.testing.assert_array_equal(got.numpy(), fg.tensor(base)[key].numpy())
        y = fg.tensor(base, device="gpu")
        y[key] = -1.0
        want = fg.tensor(base)
        want[key] = -1.0
        np.testing.assert_array_equal(y.numpy(), want.numpy())
    x = fg.tensor(base, device="gpu")
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 5]]
    with pytest.raises(IndexError):
        x[[0, 5]] = 1.0
    np.testing.assert_array_equal(x.numpy(), base)


TILED = """
import ferrograd as fg, numpy as np
rng = np.random.default_rng(0)
cases = [((1, 1), (1, 1)), ((17, 33), (33, 15)), ((16, 16), (16, 16)), ((3, 40, 5), (3, 5, 70)),
         ((2, 1, 9, 31), (4, 31, 18)), ((64, 0), (0, 7)), ((5, 200), (200, 3))]
for sa, sb in cases:
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    got = (fg.tensor(a).to("gpu") @ fg.tensor(b).to("gpu")).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=2e-5, atol=2e-5)
# Transposed operands, float16 storage, and the backward products.
a = rng.standard_normal((23, 19)).astype(np.float32)
ga = fg.tensor(a).to("gpu").requires_grad_()
w = fg.tensor(rng.standard_normal((29, 19)).astype(np.float32)).to("gpu").requires_grad_()
(ga @ w.t()).sum().backward()
np.testing.assert_allclose(ga.grad.numpy(), np.tile(w.numpy().sum(0), (23, 1)), rtol=1e-4, atol=1e-4)
h = (fg.tensor(a).half().to("gpu") @ fg.tensor(a.T.copy()).half().to("gpu")).float().numpy()
ref = (a.astype(np.float16).astype(np.float32) @ a.T.astype(np.float16).astype(np.float32))
np.testing.assert_allclose(h, ref, rtol=2e-3, atol=2e-2)
print("ok")
"""


def test_tiled_matmul_kernel():
    """The workgroup-tiled matmul (what hardware adapters run) forced on this
    adapter with FG_GPU_MATMUL=tiled: direct products of many shapes, then the
    op table's matmul, linear and other linear-algebra cells."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, FG_GPU_MATMUL="tiled")
    r = subprocess.run([sys.executable, "-c", TILED], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    here = Path(__file__).parent
    r = subprocess.run(
        [sys.executable, "-m", "pytest", str(here / "test_gpu_optable.py"), str(here / "test_gpu_optable_grad.py"),
         "-q", "-p", "no:cacheprovider", "-k", "matmul or linear or bmm or mm or einsum or outer"],
        env=env, capture_output=True, text=True, timeout=1200, cwd=here.parent,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]

