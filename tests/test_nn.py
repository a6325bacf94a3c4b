"""ferrograd.nn: Module mechanics, layers and losses against float64 NumPy references.

Every reference here is computed independently in NumPy (float64); gradients
are checked with ``fg.autograd.gradcheck`` in float64. Parity tests against
PyTorch run only when ``torch`` is importable.
"""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.autograd import gradcheck
from ferrograd.nn import functional as F

RNG = np.random.default_rng(1234)


def t64(a, requires_grad: bool = False) -> fg.Tensor:
    """A float64 ferrograd tensor from array-like ``a``."""
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def npy(t: fg.Tensor) -> np.ndarray:
    """A float64 NumPy copy of ``t``."""
    return np.array(t.detach().double().numpy(), dtype=np.float64, copy=True)


def np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


# ---------------------------------------------------------------------------
# Module mechanics
# ---------------------------------------------------------------------------


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 2, bias=False)
        self.scale = nn.Parameter(fg.ones(2))
        self.register_buffer("steps", fg.zeros(1, dtype=fg.int64))
        self.register_buffer("cache", fg.zeros(2), persistent=False)
        self.plain = 5

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        return self.fc2(self.act(self.fc1(x))) * self.scale


def test_registration_and_iteration():
    net = _Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert [tuple(p.shape) for p in net.parameters()] == [(2,), (4, 3), (4,), (2, 4)]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in net.parameters())
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert len(list(net.modules())) == 4 and list(net.children())[0] is net.fc1
    assert net.fc2.bias is None and "bias" in net.fc2._parameters
    assert net.plain == 5 and "plain" not in net._parameters
    # state_dict skips None parameters and non-persistent buffers
    assert list(net.state_dict()) == ["scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight"]
    # reassignment of a registered parameter to a non-Parameter is refused
    with pytest.raises(TypeError, match="scale"):
        net.scale = fg.ones(2)
    with pytest.raises(KeyError):
        net.register_buffer("a.b", fg.zeros(1))
    # shared submodules and parameters are reported once
    seq = nn.Sequential(net.fc1, net.fc1)
    assert len(list(seq.parameters())) == 2
    del net.scale
    assert "scale" not in dict(net.named_parameters())
    with pytest.raises(AttributeError):
        _ = net.scale


def test_parameter_alias_and_repr():
    data = fg.randn(3)
    p = nn.Parameter(data)
    assert p._shares_storage(data) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert str(p) == repr(p)
    assert nn.Parameter(data, requires_grad=False).requires_grad is False
    assert tuple(nn.Parameter().shape) == (0,)


def test_train_eval_requires_grad_zero_grad_apply():
    net = _Net()
    assert net.training and net.fc1.training
    assert net.eval() is net and not net.fc1.training and not net.act.training
    net.train()
    assert net.fc2.training
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(True)
    net(fg.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(npy(p.grad) == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "_Net"]


def test_to_dtype_and_device():
    net = _Net()
    w_before = npy(net.fc1.weight)
    assert net.to(fg.float64) is net
    assert net.fc1.weight.dtype == fg.float64 and isinstance(net.fc1.weight, nn.Parameter)
    assert net.fc1.weight.requires_grad
    assert net.steps.dtype == fg.int64  # integer buffers keep their dtype
    assert net.cache.dtype == fg.float64
    np.testing.assert_allclose(npy(net.fc1.weight), w_before, rtol=0, atol=0)
    assert net(t64(RNG.standard_normal((2, 3)))).dtype == fg.float64
    net.to("cpu")
    net.to(device="cpu", dtype=fg.float32)
    assert net.fc1.weight.dtype == fg.float32
    with pytest.raises(NotImplementedError, match="cuda"):
        net.to("cuda")
    with pytest.raises(TypeError, match="floating"):
        net.to(fg.int64)


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    h2 = lin.register_forward_hook(lambda m, args, out: out * 0)
    out = lin(fg.randn(1, 2))
    assert calls == ["pre"] and np.all(npy(out) == 0)
    h1.remove()
    h2.remove()
    assert np.any(npy(lin(fg.ones(1, 2))) != 0) and calls == ["pre"]


def test_module_repr():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Conv2d(1, 2, 3, stride=2, bias=False)))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Conv2d(1, 2, kernel_size=(3, 3), stride=(2, 2), bias=False)\n"
        "  )\n"
        ")"
    )


# ---------------------------------------------------------------------------
# state_dict
# ---------------------------------------------------------------------------


def _snapshot(m: nn.Module) -> dict[str, np.ndarray]:
    return {k: npy(v) for k, v in m.state_dict().items()}


def test_state_dict_round_trip():
    fg.manual_seed(0)
    a, b = _Net(), _Net()
    sd = a.state_dict()
    assert not any(v.requires_grad for v in sd.values())
    assert sd["fc1.weight"]._shares_storage(a.fc1.weight)
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in _snapshot(a).items():
        np.testing.assert_array_equal(_snapshot(b)[k], v)
    # loading copies: later changes to a do not show up in b
    with fg.no_grad():
        a.fc1.weight.fill_(3.0)
    assert not np.any(npy(b.fc1.weight) == 3.0)
    # keep_vars returns the parameters themselves
    assert a.state_dict(keep_vars=True)["fc1.weight"] is a.fc1.weight


def test_load_state_dict_errors_leave_module_unchanged():
    fg.manual_seed(1)
    net = _Net()
    before = _snapshot(net)
    good = {k: v.clone() + 1 if v.dtype.is_floating_point else v.clone() for k, v in _Net().state_dict().items()}

    missing = dict(good)
    del missing["fc1.bias"]
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "fc1.bias"'):
        net.load_state_dict(missing)
    unexpected = dict(good, extra=fg.zeros(1))
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"'):
        net.load_state_dict(unexpected)
    bad_shape = dict(good)
    bad_shape["fc2.weight"] = fg.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc2.weight.*\(3, 4\).*\(2, 4\)"):
        net.load_state_dict(bad_shape)
    not_tensor = dict(good, scale=[1.0, 2.0])
    with pytest.raises(RuntimeError, match="scale"):
        net.load_state_dict(not_tensor)
    after = _snapshot(net)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])

    # strict=False reports the key lists and loads what matches
    res = net.load_state_dict(dict(missing, extra=fg.zeros(1)), strict=False)
    assert res.missing_keys == ["fc1.bias"] and res.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(npy(net.fc1.weight), npy(good["fc1.weight"]))
    np.testing.assert_array_equal(npy(net.fc1.bias), before["fc1.bias"])
    # a shape mismatch is an error even when not strict, and nothing is written
    snap = _snapshot(net)
    with pytest.raises(RuntimeError, match="size mismatch"):
        net.load_state_dict(dict(bad_shape, scale=fg.full((2,), 9.0)), strict=False)
    np.testing.assert_array_equal(npy(net.scale), snap["scale"])


# ---------------------------------------------------------------------------
# Linear / Conv / pooling
# ---------------------------------------------------------------------------


def test_linear_forward_and_init():
    fg.manual_seed(3)
    lin = nn.Linear(20, 7)
    w, b = npy(lin.weight), npy(lin.bias)
    bound = 1 / math.sqrt(20)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.8 * bound  # really spread over the interval
    x = RNG.standard_normal((5, 20))
    np.testing.assert_allclose(npy(lin(fg.tensor(x, dtype=fg.float32))), x @ w.T + b, rtol=1e-5, atol=1e-5)
    # same seed, same model
    fg.manual_seed(3)
    np.testing.assert_array_equal(npy(nn.Linear(20, 7).weight), w)
    # no bias, batched leading dims
    lin2 = nn.Linear(4, 3, bias=False).double()
    x3 = RNG.standard_normal((2, 5, 4))
    np.testing.assert_allclose(npy(lin2(t64(x3))), x3 @ npy(lin2.weight).T, rtol=1e-12)


def np_conv2d(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (x.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(oh):
            for j in range(ow):
                patch = xs[:, :, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                           j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("nckl,ockl->no", patch, w[g * og:(g + 1) * og])
    if b is not None:
        out += b[None, :, None, None]
    return out


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(stride=2, padding=1),
        dict(stride=(1, 2), padding=(2, 1), dilation=2),
        dict(groups=2, bias=False),
        dict(padding="same", dilation=(1, 2)),
    ],
)
def test_conv2d_layer_vs_numpy(kw):
    fg.manual_seed(4)
    conv = nn.Conv2d(4, 6, 3, **kw).double()
    x = RNG.standard_normal((2, 4, 9, 8))
    w = npy(conv.weight)
    b = None if conv.bias is None else npy(conv.bias)
    fan_in = 4 // conv.groups * 9
    assert np.abs(w).max() <= 1 / math.sqrt(fan_in)
    pad = conv.padding
    if pad == "same":
        pad = tuple(d * (k - 1) // 2 for d, k in zip(conv.dilation, conv.kernel_size, strict=True))
    ref = np_conv2d(x, w, b, conv.stride, pad, conv.dilation, conv.groups)
    out = npy(conv(t64(x)))
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
    # and equals the functional op with the same weights
    np.testing.assert_array_equal(
        out, npy(F.conv2d(t64(x), conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups))
    )


def test_conv2d_padding_modes():
    fg.manual_seed(5)
    x = RNG.standard_normal((1, 2, 5, 6))
    for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
        conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode).double()
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode=np_mode)
        ref = np_conv2d(xp, npy(conv.weight), npy(conv.bias), (1, 1), (0, 0), (1, 1), 1)
        np.testing.assert_allclose(npy(conv(t64(x))), ref, rtol=1e-10, atol=1e-10)


def test_conv1d_layer_vs_numpy():
    fg.manual_seed(6)
    conv = nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=1).double()
    x = RNG.standard_normal((2, 3, 11))
    # a 1-D convolution is a 2-D one over a height-1 image
    ref = np_conv2d(x[:, :, None, :], npy(conv.weight)[:, :, None, :], npy(conv.bias), (1, 2), (0, 1), (1, 1), 1)
    np.testing.assert_allclose(npy(conv(t64(x))), ref[:, :, 0, :], rtol=1e-10, atol=1e-10)
    assert repr(conv) == "Conv1d(3, 4, kernel_size=(3,), stride=(2,), padding=(1,))"


def test_conv_bad_config():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same")


def test_pooling_layers_vs_numpy():
    x = RNG.standard_normal((2, 3, 6, 8))
    mp = nn.MaxPool2d(2)
    ref = x.reshape(2, 3, 3, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(npy(mp(t64(x))), ref)
    ap = nn.AvgPool2d(2, stride=2)
    np.testing.assert_allclose(npy(ap(t64(x))), x.reshape(2, 3, 3, 2, 4, 2).mean(axis=(3, 5)), rtol=1e-12)
    aap = nn.AdaptiveAvgPool2d(1)
    np.testing.assert_allclose(npy(aap(t64(x))), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)
    aap2 = nn.AdaptiveAvgPool2d((3, 4))
    np.testing.assert_allclose(npy(aap2(t64(x))), ref * 0 + x.reshape(2, 3, 3, 2, 4, 2).mean(axis=(3, 5)), rtol=1e-12)
    vals, idx = nn.MaxPool2d(2, return_indices=True)(t64(x))
    np.testing.assert_array_equal(npy(vals), ref)
    assert idx.dtype == fg.int64


def test_flatten_identity_unflatten():
    x = fg.randn(2, 3, 4, 5)
    assert tuple(nn.Flatten()(x).shape) == (2, 60)
    assert tuple(nn.Flatten(0, 2)(x).shape) == (24, 5)
    assert nn.Identity(1, foo=2)(x) is x
    assert tuple(nn.Unflatten(1, (3, 1))(fg.randn(2, 3, 5)).shape) == (2, 3, 1, 5)


# ---------------------------------------------------------------------------
# Classification losses
# ---------------------------------------------------------------------------


def np_cross_entropy(x, t, w=None, ignore_index=-100, ls=0.0, reduction="mean"):
    """PyTorch's cross entropy of class indices, written out in NumPy (float64)."""
    cdim = 1 if x.ndim >= 2 else 0
    logp = np.moveaxis(np_log_softmax(x, cdim), cdim, -1)  # classes last
    n_classes = logp.shape[-1]
    w = np.ones(n_classes) if w is None else w
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    picked = np.take_along_axis(logp, ts[..., None], -1)[..., 0]
    wt = w[ts] * keep
    nll = -picked * wt
    smooth = -(logp * w).sum(-1) * keep
    if reduction == "none":
        return (1 - ls) * nll + ls / n_classes * smooth
    if reduction == "sum":
        return (1 - ls) * nll.sum() + ls / n_classes * smooth.sum()
    return ((1 - ls) * nll.sum() + ls / n_classes * smooth.sum()) / wt.sum()


def np_cross_entropy_probs(x, p, w=None, ls=0.0, reduction="mean"):
    cdim = 1 if x.ndim >= 2 else 0
    n_classes = x.shape[cdim]
    p = p * (1 - ls) + ls / n_classes
    shape = [1] * x.ndim
    shape[cdim] = n_classes
    w = np.ones(shape) if w is None else w.reshape(shape)
    loss = -(np_log_softmax(x, cdim) * w * p).sum(cdim)
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(6, 5), (3, 4, 2, 3), (5,)])
@pytest.mark.parametrize("tdtype", [fg.int64, fg.int32])
def test_cross_entropy_class_indices_vs_numpy(reduction, shape, tdtype):
    x = RNG.standard_normal(shape) * 3
    cdim = 1 if len(shape) >= 2 else 0
    tshape = shape[:cdim] + shape[cdim + 1:]
    t = RNG.integers(0, shape[cdim], size=tshape)
    if t.size > 1:
        t.flat[1] = -100  # one ignored target
    w = RNG.uniform(0.5, 2.0, size=shape[cdim])
    for kw in (dict(), dict(weight=w), dict(label_smoothing=0.2), dict(weight=w, label_smoothing=0.3)):
        ref = np_cross_entropy(x, t, w=kw.get("weight"), ls=kw.get("label_smoothing", 0.0), reduction=reduction)
        fkw = dict(kw)
        if "weight" in fkw:
            fkw["weight"] = t64(fkw["weight"])
        out = F.cross_entropy(t64(x), fg.tensor(t, dtype=tdtype), reduction=reduction, **fkw)
        np.testing.assert_allclose(npy(out), ref, rtol=1e-10, atol=1e-12)


def test_cross_entropy_custom_ignore_index_and_module():
    x = RNG.standard_normal((7, 4))
    t = np.array([0, 3, 2, 2, 1, 0, 3])
    ref = np_cross_entropy(x, t, ignore_index=2)
    out = nn.CrossEntropyLoss(ignore_index=2)(t64(x), fg.tensor(t))
    np.testing.assert_allclose(npy(out), ref, rtol=1e-12)
    # all targets ignored: mean is 0/0, as in PyTorch
    assert math.isnan(float(F.cross_entropy(t64(x), fg.full((7,), -100, dtype=fg.int64))))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets_vs_numpy(reduction):
    x = RNG.standard_normal((4, 5, 3))
    p = RNG.uniform(size=(4, 5, 3))
    p /= p.sum(axis=1, keepdims=True)
    w = RNG.uniform(0.5, 2.0, size=5)
    for kw in (dict(), dict(weight=w, label_smoothing=0.1)):
        ref = np_cross_entropy_probs(x, p, w=kw.get("weight"), ls=kw.get("label_smoothing", 0.0), reduction=reduction)
        out = F.cross_entropy(
            t64(x), t64(p), weight=None if "weight" not in kw else t64(w),
            label_smoothing=kw.get("label_smoothing", 0.0), reduction=reduction,
        )
        np.testing.assert_allclose(npy(out), ref, rtol=1e-10, atol=1e-12)


def test_nll_loss_vs_numpy():
    x = np_log_softmax(RNG.standard_normal((6, 4)), 1)
    t = np.array([1, 0, 3, -100, 2, 2])
    w = np.array([1.0, 2.0, 0.5, 3.0])
    ref = np_cross_entropy(x, t, w=w)  # log_softmax of log-probabilities is the identity
    np.testing.assert_allclose(npy(F.nll_loss(t64(x), fg.tensor(t), weight=t64(w))), ref, rtol=1e-10)
    np.testing.assert_allclose(npy(nn.NLLLoss(reduction="sum")(t64(x), fg.tensor(t))),
                               np_cross_entropy(x, t, reduction="sum"), rtol=1e-10)


def test_cross_entropy_gradcheck():
    x = t64(RNG.standard_normal((4, 3, 2)), requires_grad=True)
    t = fg.tensor([[0, 2], [1, -100], [2, 2], [0, 1]])
    w = t64([0.5, 1.5, 2.0], requires_grad=True)
    gradcheck(lambda x, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.15), (x, w))
    gradcheck(lambda x: F.cross_entropy(x, t, reduction="none"), (x,))
    p = t64(RNG.uniform(size=(4, 3, 2)), requires_grad=True)
    gradcheck(lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1), (x, p))


def test_cross_entropy_bad_input():
    x = fg.randn(4, 3)
    with pytest.raises(ValueError, match=r"cross_entropy.*\(4,\).*\(4, 3\).*\(5,\)"):
        F.cross_entropy(x, fg.zeros(5, dtype=fg.int64))
    with pytest.raises(IndexError, match=r"cross_entropy: target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, fg.tensor([0, 1, 3, 2]))
    with pytest.raises(IndexError, match="target -1"):
        F.cross_entropy(x, fg.tensor([0, -1, 1, 2]))
    with pytest.raises(TypeError, match="integer dtype.*bool"):
        F.cross_entropy(x, fg.tensor([True, False, True, True]))
    with pytest.raises(ValueError, match=r"probability target.*\(4, 3\).*\(4, 2\)"):
        F.cross_entropy(x, fg.rand(4, 2))
    with pytest.raises(ValueError, match=r"weight.*3.*\(2,\)"):
        F.cross_entropy(x, fg.tensor([0, 1, 2, 2]), weight=fg.ones(2))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, fg.tensor([0, 1, 2, 2]), reduction="avg")
    with pytest.raises(TypeError, match="floating"):
        F.cross_entropy(fg.tensor([[1, 2]]), fg.tensor([0]))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, fg.tensor([0, 1, 2, 2]), label_smoothing=1.5)


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def test_mlp_trains_with_sgd():
    fg.manual_seed(0)
    rng = np.random.default_rng(0)
    n = 256
    # two interleaved classes that are not linearly separable: label = x0 * x1 > 0
    x = rng.uniform(-1, 1, size=(n, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    xt, yt = fg.tensor(x, dtype=fg.float32), fg.tensor(y)
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))
    opt = fg.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    first = None
    for _ in range(300):
        opt.zero_grad()
        loss = loss_fn(model(xt), yt)
        if first is None:
            first = float(loss)
        loss.backward()
        opt.step()
    with fg.no_grad():
        acc = float((model(xt).argmax(1) == yt).float().mean())
    assert float(loss) < 0.3 * first
    assert acc >= 0.95
