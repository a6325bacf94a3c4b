"""ferrograd.nn: Module mechanics, layers and losses against float64 NumPy references.

Every reference here is computed independently in NumPy (float64); gradients
are checked with ``fg.autograd.gradcheck`` in float64. Parity tests against
PyTorch read references stored in ``tests/fixtures/parity/`` (written by
``scripts/make_parity_references.py``), so they run without PyTorch.
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


def call_with(module: nn.Module, name: str, fn):
    """``fn(x)`` run with ``module``'s parameter ``name`` replaced by a gradcheck input: ``f(x, w)``."""
    mod_path, _, pname = name.rpartition(".")
    owner = module.get_submodule(mod_path)

    def f(x, w):
        old = owner._parameters[pname]
        owner._parameters[pname] = w
        try:
            return fn(x)
        finally:
            owner._parameters[pname] = old

    return f


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
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]  # as PyTorch
    assert net.get_parameter("fc1.weight") is net.fc1.weight and net.get_submodule("fc2") is net.fc2
    net.extra = nn.Buffer(fg.ones(3), persistent=False)
    assert net.get_buffer("extra") is net._buffers["extra"] and "extra" not in net.state_dict()
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
    with pytest.raises(NotImplementedError, match="tpu"):
        net.to("tpu")
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


def test_sequential_children_keep_hooks_and_custom_call():
    # Sequential calls a plain child's forward directly; children with hooks,
    # or whose class defines its own __call__, still go through __call__.
    calls = []

    class Loud(nn.Module):
        def __call__(self, x):
            calls.append("call")
            return super().__call__(x)

        def forward(self, x):
            return x + 1.0

    lin = nn.Linear(2, 2)
    net = nn.Sequential(lin, nn.Tanh(), Loud())
    x = fg.randn(3, 2)
    want = np.tanh(npy(x) @ npy(lin.weight).T + npy(lin.bias)) + 1.0
    np.testing.assert_allclose(npy(net(x)), want, rtol=1e-6, atol=1e-6)
    assert calls == ["call"]
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    h2 = lin.register_forward_hook(lambda m, args, out: out * 0)
    np.testing.assert_allclose(npy(net(x)), np.ones((3, 2)), rtol=0, atol=0)
    assert calls == ["call", "pre", "call"]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(npy(net(x)), want, rtol=1e-6, atol=1e-6)
    # Compiled, every child is called through __call__ (the capture guards it).
    f = fg.compile(net)
    np.testing.assert_allclose(npy(f(x)), want, rtol=1e-5, atol=1e-6)


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



# Each layer's positional arguments up to ``device, dtype``, PyTorch's defaults written out.
POSITIONAL_FACTORY_ARGS = {
    "Linear": (3, 2, True),
    "Bilinear": (2, 3, 2, True),
    "Conv1d": (2, 4, 3, 1, 0, 1, 1, True, "zeros"),
    "Conv2d": (2, 4, 3, 1, 0, 1, 1, True, "zeros"),
    "Conv3d": (2, 4, 3, 1, 0, 1, 1, True, "zeros"),
    "ConvTranspose2d": (2, 4, 3, 1, 0, 0, 1, True, 1, "zeros"),
    "BatchNorm2d": (3, 1e-5, 0.1, True, True),
    "InstanceNorm2d": (3, 1e-5, 0.1, True, False),
    "LayerNorm": (4, 1e-5, True, True),
    "RMSNorm": (4, None, True),
    "GroupNorm": (2, 4, 1e-5, True),
    "Embedding": (5, 3, None, None, 2.0, False, False, None, False),
    "EmbeddingBag": (5, 3, None, 2.0, False, "mean", False, None, False, None),
    "PReLU": (1, 0.25),
    "MultiheadAttention": (4, 2, 0.0, True, False, False, None, None, False),
    "RNNCell": (3, 4, True, "tanh"),
    "LSTMCell": (3, 4, True),
    "GRUCell": (3, 4, True),
}


@pytest.mark.parametrize("name", sorted(POSITIONAL_FACTORY_ARGS))
def test_layers_take_device_and_dtype_in_pytorchs_order(name):
    """``Layer(..., device, dtype)`` positionally, as PyTorch's signatures order them (and as
    subclasses pass them on): every parameter and buffer float64 on the CPU."""
    layer = getattr(nn, name)(*POSITIONAL_FACTORY_ARGS[name], "cpu", fg.float64)
    floats = [t for t in [*layer.parameters(), *layer.buffers()] if t.dtype.is_floating_point]
    assert floats and all(t.dtype == fg.float64 and t.device.type == "cpu" for t in floats)


def test_linear_subclass_passes_device_and_dtype_positionally():
    """The pattern of examples that subclass a layer: ``super().__init__(in, out, bias, device, dtype)``."""

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)

    fg.manual_seed(5)
    layer = Layer(6, 3, dtype=fg.float64)
    assert layer.weight.dtype == fg.float64 and layer.bias.dtype == fg.float64
    assert 0 < np.abs(npy(layer.weight)).max() <= 1 / math.sqrt(6)  # the default initialisation ran
    assert nn.Linear(6, 3, False, None, fg.float64).bias is None


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


# ---------------------------------------------------------------------------
# Binary and regression losses
# ---------------------------------------------------------------------------


def _np_reduce(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_vs_numpy(reduction):
    p = RNG.uniform(0.01, 0.99, size=(5, 3))
    p[0, 0], p[0, 1] = 0.0, 1.0  # log clamped at -100, as PyTorch
    y = RNG.uniform(size=(5, 3))
    w = RNG.uniform(0.5, 2.0, size=(3,))
    ref = -w * (y * np.maximum(np.log(np.where(p > 0, p, 1e-300)), -100)
                + (1 - y) * np.maximum(np.log(np.where(1 - p > 0, 1 - p, 1e-300)), -100))
    out = F.binary_cross_entropy(t64(p), t64(y), weight=t64(w), reduction=reduction)
    np.testing.assert_allclose(npy(out), _np_reduce(ref, reduction), rtol=1e-10)
    np.testing.assert_allclose(npy(nn.BCELoss(weight=t64(w), reduction=reduction)(t64(p), t64(y))),
                               _np_reduce(ref, reduction), rtol=1e-10)
    # gradients stay finite at the clamped ends
    pt = t64(p, requires_grad=True)
    F.binary_cross_entropy(pt, t64(y)).backward()
    assert np.all(np.isfinite(npy(pt.grad)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_vs_numpy(reduction):
    x = RNG.standard_normal((6, 4)) * 5
    x[0, :2] = [80.0, -80.0]  # far in the tails: must stay finite and exact
    y = RNG.uniform(size=(6, 4))
    pw = RNG.uniform(0.5, 3.0, size=(4,))
    w = RNG.uniform(0.5, 2.0, size=(6, 1))
    log_sig = -np.logaddexp(0, -x)
    log_one_minus = -np.logaddexp(0, x)
    ref = -w * (pw * y * log_sig + (1 - y) * log_one_minus)
    out = F.binary_cross_entropy_with_logits(t64(x), t64(y), weight=t64(w), pos_weight=t64(pw), reduction=reduction)
    np.testing.assert_allclose(npy(out), _np_reduce(ref, reduction), rtol=1e-10)
    ref0 = -(y * log_sig + (1 - y) * log_one_minus)
    out0 = nn.BCEWithLogitsLoss(reduction=reduction)(t64(x), t64(y))
    np.testing.assert_allclose(npy(out0), _np_reduce(ref0, reduction), rtol=1e-10)


def test_regression_losses_vs_numpy():
    x, y = RNG.standard_normal((4, 5)) * 2, RNG.standard_normal((4, 5))
    d = x - y
    ad = np.abs(d)
    for reduction in ("mean", "sum", "none"):
        np.testing.assert_allclose(npy(F.mse_loss(t64(x), t64(y), reduction=reduction)), _np_reduce(d**2, reduction))
        np.testing.assert_allclose(npy(nn.L1Loss(reduction=reduction)(t64(x), t64(y))), _np_reduce(ad, reduction))
        sl1 = np.where(ad < 0.7, 0.5 * d**2 / 0.7, ad - 0.35)
        np.testing.assert_allclose(npy(F.smooth_l1_loss(t64(x), t64(y), reduction=reduction, beta=0.7)),
                                   _np_reduce(sl1, reduction))
        hub = np.where(ad < 1.5, 0.5 * d**2, 1.5 * (ad - 0.75))
        np.testing.assert_allclose(npy(nn.HuberLoss(reduction=reduction, delta=1.5)(t64(x), t64(y))),
                                   _np_reduce(hub, reduction))
    np.testing.assert_allclose(npy(nn.MSELoss()(t64(x), t64(y))), (d**2).mean())
    # KL divergence with log-probability input
    logq = np_log_softmax(x, 1)
    p = np.exp(np_log_softmax(y, 1))
    p[0, 0] = 0.0
    kl = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1)) - logq), 0)
    np.testing.assert_allclose(npy(F.kl_div(t64(logq), t64(p), reduction="batchmean")), kl.sum() / 4)
    lp = np_log_softmax(y, 1)
    np.testing.assert_allclose(npy(nn.KLDivLoss(reduction="sum", log_target=True)(t64(logq), t64(lp))),
                               (np.exp(lp) * (lp - logq)).sum())


def test_loss_gradchecks():
    x = t64(RNG.standard_normal((3, 4)), requires_grad=True)
    y = t64(RNG.uniform(size=(3, 4)), requires_grad=True)
    pw = t64(RNG.uniform(0.5, 2, size=(4,)))
    gradcheck(lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw), (x, y))
    p = t64(RNG.uniform(0.1, 0.9, size=(3, 4)), requires_grad=True)
    gradcheck(lambda p, y: F.binary_cross_entropy(p, y), (p, y))
    gradcheck(lambda x, y: F.mse_loss(x, y, reduction="sum"), (x, y))
    gradcheck(lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), (x, y))
    gradcheck(lambda x, y: F.l1_loss(x, y), (x, y))
    logp = t64(np_log_softmax(RNG.standard_normal((3, 4)), 1), requires_grad=True)
    gradcheck(lambda a: F.nll_loss(a, fg.tensor([0, 3, 1])), (logp,))


def test_elementwise_loss_bad_input():
    with pytest.raises(ValueError, match=r"mse_loss: target shape \(3,\) must match input shape \(2, 3\)"):
        F.mse_loss(fg.randn(2, 3), fg.randn(3))
    with pytest.raises(TypeError, match="l1_loss: target must have a floating point dtype"):
        F.l1_loss(fg.randn(3), fg.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.binary_cross_entropy(fg.tensor([0.5, 1.5]), fg.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="binary_cross_entropy_with_logits: target shape"):
        F.binary_cross_entropy_with_logits(fg.randn(4), fg.rand(4, 1))


def test_one_hot():
    t = np.array([[0, 3], [2, 1]])
    for dt in (fg.int64, fg.int32):
        out = F.one_hot(fg.tensor(t, dtype=dt), 5)
        assert out.dtype == fg.int64
        np.testing.assert_array_equal(npy(out), np.eye(5)[t])
    np.testing.assert_array_equal(npy(F.one_hot(fg.tensor(t))), np.eye(4)[t])
    with pytest.raises(IndexError, match="class value 3 is out of range for num_classes=3"):
        F.one_hot(fg.tensor(t), 3)
    with pytest.raises(TypeError, match="integer"):
        F.one_hot(fg.tensor([1.0]))


# ---------------------------------------------------------------------------
# Normalisation, embedding, dropout
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm2d, (4, 3, 5, 6)), (nn.BatchNorm1d, (8, 3)), (nn.BatchNorm1d, (4, 3, 7))])
def test_batchnorm_train_eval_vs_numpy(cls, shape):
    fg.manual_seed(7)
    bn = cls(3, momentum=0.2, eps=1e-3).double()
    with fg.no_grad():
        bn.weight.copy_(t64([0.5, 1.0, 2.0]))
        bn.bias.copy_(t64([0.1, -0.2, 0.3]))
    axes = (0,) + tuple(range(2, len(shape)))
    bshape = [1] * len(shape)
    bshape[1] = 3
    w, b = np.array([0.5, 1.0, 2.0]).reshape(bshape), np.array([0.1, -0.2, 0.3]).reshape(bshape)
    rm, rv = np.zeros(3), np.ones(3)
    n = np.prod(shape) // 3
    for step in range(3):
        x = RNG.standard_normal(shape) * (step + 1) + step
        out = npy(bn(t64(x)))
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        ref = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-3) * w + b
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
        rm = 0.8 * rm + 0.2 * mean
        rv = 0.8 * rv + 0.2 * var * n / (n - 1)
        np.testing.assert_allclose(npy(bn.running_mean), rm, rtol=1e-12)
        np.testing.assert_allclose(npy(bn.running_var), rv, rtol=1e-12)
    assert int(bn.num_batches_tracked) == 3
    bn.eval()
    x = RNG.standard_normal(shape)
    ref = (x - rm.reshape(bshape)) / np.sqrt(rv.reshape(bshape) + 1e-3) * w + b
    np.testing.assert_allclose(npy(bn(t64(x))), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(npy(bn.running_mean), rm)  # eval does not update
    assert int(bn.num_batches_tracked) == 3
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_batchnorm_options():
    x = RNG.standard_normal((6, 2, 3))
    # cumulative average with momentum=None
    bn = nn.BatchNorm1d(2, momentum=None).double()
    xs = [RNG.standard_normal((6, 2)) + i for i in range(3)]
    for xi in xs:
        bn(t64(xi))
    np.testing.assert_allclose(npy(bn.running_mean), np.mean([xi.mean(0) for xi in xs], axis=0), rtol=1e-12)
    # no running stats: batch statistics in eval too; no affine parameters
    bn2 = nn.BatchNorm1d(2, affine=False, track_running_stats=False).double().eval()
    assert list(bn2.parameters()) == [] and list(bn2.buffers()) == []
    ref = (x - x.mean((0, 2), keepdims=True)) / np.sqrt(x.var((0, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(npy(bn2(t64(x))), ref, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(2)(fg.randn(2, 2, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(2)(fg.randn(1, 2))
    # gradient through the batch statistics
    bn3 = nn.BatchNorm2d(2).double()
    xin = t64(RNG.standard_normal((3, 2, 2, 2)), requires_grad=True)
    gradcheck(lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True), (xin, bn3.weight, bn3.bias))


def test_layernorm_rmsnorm_vs_numpy():
    x = RNG.standard_normal((3, 4, 5))
    ln = nn.LayerNorm((4, 5), eps=1e-4).double()
    with fg.no_grad():
        ln.weight.copy_(t64(RNG.standard_normal((4, 5))))
        ln.bias.copy_(t64(RNG.standard_normal((4, 5))))
    m, v = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    ref = (x - m) / np.sqrt(v + 1e-4) * npy(ln.weight) + npy(ln.bias)
    np.testing.assert_allclose(npy(ln(t64(x))), ref, rtol=1e-10, atol=1e-10)
    rms = nn.RMSNorm(5, eps=1e-6).double()
    with fg.no_grad():
        rms.weight.copy_(t64(RNG.standard_normal(5)))
    ref = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * npy(rms.weight)
    np.testing.assert_allclose(npy(rms(t64(x))), ref, rtol=1e-10, atol=1e-10)
    assert nn.LayerNorm(5, elementwise_affine=False).weight is None
    assert [n for n, _ in nn.LayerNorm(5, bias=False).named_parameters()] == ["weight"]
    xg = t64(RNG.standard_normal((2, 5)), requires_grad=True)
    gradcheck(lambda a, w: F.layer_norm(a, (5,), w, None), (xg, t64(RNG.standard_normal(5), requires_grad=True)))


def test_embedding():
    fg.manual_seed(8)
    emb = nn.Embedding(1000, 8, padding_idx=2)
    w = npy(emb.weight)
    assert np.all(w[2] == 0)
    assert abs(w.mean()) < 0.05 and abs(w.std() - 1) < 0.05  # N(0, 1)
    idx = np.array([[1, 2, 999], [2, 0, 1]])
    for dt in (fg.int64, fg.int32):
        out = emb(fg.tensor(idx, dtype=dt))
        np.testing.assert_array_equal(npy(out), w[idx])
    out.sum().backward()
    grad = npy(emb.weight.grad)
    np.testing.assert_array_equal(grad[1], np.full(8, 2.0))
    np.testing.assert_array_equal(grad[999], np.ones(8))
    np.testing.assert_array_equal(grad[2], np.zeros(8))  # padding row gets no gradient
    assert np.all(grad[3:999] == 0)
    with pytest.raises(IndexError, match=r"embedding: index 1000 is out of range for 1000 embeddings"):
        emb(fg.tensor([1000]))
    with pytest.raises(TypeError, match="integer"):
        emb(fg.tensor([1.0]))
    pre = nn.Embedding.from_pretrained(fg.ones(3, 2))
    assert not pre.weight.requires_grad and tuple(pre(fg.tensor([0, 2])).shape) == (2, 2)


def test_dropout_module():
    fg.manual_seed(9)
    d = nn.Dropout(0.3)
    x = fg.ones(20000)
    y = npy(d(x))
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    d.eval()
    assert d(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


# ---------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------


def np_softmax(x, axis=-1):
    return np.exp(np_log_softmax(x, axis))


def np_sdpa(q, k, v, add_mask=None, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if add_mask is not None:
        s = s + add_mask
    a = np_softmax(s)
    return a @ v, a


def test_sdpa_vs_numpy():
    q, k, v = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((2, 3, 6, 5)), RNG.standard_normal((2, 3, 6, 7))
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v))
    np.testing.assert_allclose(npy(out), np_sdpa(q, k, v)[0], rtol=1e-10)
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), scale=0.3)
    np.testing.assert_allclose(npy(out), np_sdpa(q, k, v, scale=0.3)[0], rtol=1e-10)
    # causal: top-left aligned lower triangle of (L, S)
    causal = np.where(np.tril(np.ones((4, 6), bool)), 0.0, -np.inf)
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), is_causal=True)
    np.testing.assert_allclose(npy(out), np_sdpa(q, k, v, causal)[0], rtol=1e-10)
    # bool mask: True takes part; float mask is added
    bmask = RNG.uniform(size=(4, 6)) < 0.7
    bmask[:, 0] = True
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), attn_mask=fg.tensor(bmask))
    np.testing.assert_allclose(npy(out), np_sdpa(q, k, v, np.where(bmask, 0, -np.inf))[0], rtol=1e-10)
    fmask = RNG.standard_normal((3, 1, 6))
    out = F.scaled_dot_product_attention(t64(q), t64(k), t64(v), attn_mask=t64(fmask))
    np.testing.assert_allclose(npy(out), np_sdpa(q, k, v, fmask)[0], rtol=1e-10)
    qg, kg, vg = (t64(RNG.standard_normal((2, 3, 4)), requires_grad=True) for _ in range(3))
    gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), (qg, kg, vg))
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: query and key.*\(2, 4\).*\(2, 3\)"):
        F.scaled_dot_product_attention(fg.randn(2, 4), fg.randn(2, 3), fg.randn(2, 3))
    # grouped-query attention: 4 query heads share 2 key/value heads
    qh = RNG.standard_normal((2, 4, 3, 5))
    out = F.scaled_dot_product_attention(t64(qh), t64(k[:, :2]), t64(v[:, :2]), enable_gqa=True)
    ref = np_sdpa(qh, np.repeat(k[:, :2], 2, axis=1), np.repeat(v[:, :2], 2, axis=1))[0]
    np.testing.assert_allclose(npy(out), ref, rtol=1e-10)
    # dropout on the weights: p=1 drops everything
    assert np.all(npy(F.scaled_dot_product_attention(t64(q), t64(k), t64(v), dropout_p=1.0)) == 0)


def np_mha(mha, q, k, v, add_mask=None):
    """Batch-first NumPy reference of MultiheadAttention with the module's weights."""
    e, h = mha.embed_dim, mha.num_heads
    hd = e // h
    win, bin_ = npy(mha.in_proj_weight), npy(mha.in_proj_bias)
    wo, bo = npy(mha.out_proj.weight), npy(mha.out_proj.bias)

    def proj(x, i):
        y = x @ win[i * e:(i + 1) * e].T + bin_[i * e:(i + 1) * e]
        return y.reshape(x.shape[0], x.shape[1], h, hd).transpose(0, 2, 1, 3)

    o, a = np_sdpa(proj(q, 0), proj(k, 1), proj(v, 2), add_mask)
    o = o.transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], e) @ wo.T + bo
    return o, a


def test_multihead_attention_vs_numpy():
    fg.manual_seed(10)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).double()
    with fg.no_grad():  # non-zero biases so that they are checked
        mha.in_proj_bias.copy_(t64(RNG.standard_normal(24)))
        mha.out_proj.bias.copy_(t64(RNG.standard_normal(8)))
    q, kv = RNG.standard_normal((3, 4, 8)), RNG.standard_normal((3, 5, 8))
    out, w = mha(t64(q), t64(kv), t64(kv))
    ref_o, ref_a = np_mha(mha, q, kv, kv)
    np.testing.assert_allclose(npy(out), ref_o, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(w), ref_a.mean(1), rtol=1e-10)
    _, w_all = mha(t64(q), t64(kv), t64(kv), average_attn_weights=False)
    np.testing.assert_allclose(npy(w_all), ref_a, rtol=1e-10)
    # masks: bool True = may NOT attend; key_padding_mask per batch element
    am = np.zeros((4, 5), bool)
    am[:, 3] = True
    kpm = np.zeros((3, 5), bool)
    kpm[1, 0] = True
    add = np.where(am, -np.inf, 0)[None, None] + np.where(kpm, -np.inf, 0)[:, None, None, :]
    out, w = mha(t64(q), t64(kv), t64(kv), attn_mask=fg.tensor(am), key_padding_mask=fg.tensor(kpm))
    ref_o, ref_a = np_mha(mha, q, kv, kv, add)
    np.testing.assert_allclose(npy(out), ref_o, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(w), ref_a.mean(1), rtol=1e-10)
    # causal self-attention; need_weights=False
    out, w = mha(t64(q), t64(q), t64(q), is_causal=True, need_weights=False)
    causal = np.where(np.tril(np.ones((4, 4), bool)), 0.0, -np.inf)
    np.testing.assert_allclose(npy(out), np_mha(mha, q, q, q, causal)[0], rtol=1e-10, atol=1e-12)
    assert w is None
    # sequence-first layout gives the same numbers; unbatched input too
    mha_sf = nn.MultiheadAttention(8, 2).double()
    mha_sf.load_state_dict(mha.state_dict())
    out_sf, _ = mha_sf(t64(q.transpose(1, 0, 2)), t64(kv.transpose(1, 0, 2)), t64(kv.transpose(1, 0, 2)))
    np.testing.assert_allclose(npy(out_sf).transpose(1, 0, 2), np_mha(mha, q, kv, kv)[0], rtol=1e-10, atol=1e-12)
    out_u, w_u = mha(t64(q[0]), t64(kv[0]), t64(kv[0]))
    np.testing.assert_allclose(npy(out_u), np_mha(mha, q, kv, kv)[0][0], rtol=1e-10, atol=1e-12)
    assert tuple(w_u.shape) == (4, 5)
    assert [n for n, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]


def test_multihead_attention_grad_and_init():
    fg.manual_seed(11)
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    assert np.all(npy(mha.in_proj_bias) == 0) and np.all(npy(mha.out_proj.bias) == 0)
    bound = math.sqrt(6 / (4 + 12))  # xavier_uniform_ on the (12, 4) in_proj_weight
    assert np.abs(npy(mha.in_proj_weight)).max() <= bound
    mha.double()
    x = t64(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    gradcheck(call_with(mha, "in_proj_weight", lambda a: mha(a, a, a)[0]), (x, mha.in_proj_weight))
    gradcheck(call_with(mha, "out_proj.bias", lambda a: mha(a, a, a)[0]), (x, mha.out_proj.bias))
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    kd = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, batch_first=True)
    out, _ = kd(fg.randn(2, 3, 4), fg.randn(2, 6, 3), fg.randn(2, 6, 5))
    assert tuple(out.shape) == (2, 3, 4) and kd.in_proj_weight is None


# ---------------------------------------------------------------------------
# Recurrent layers
# ---------------------------------------------------------------------------


def _sig(x):
    return 1 / (1 + np.exp(-x))


def np_cell(mode, x, h, c, wih, whh, bih, bhh):
    gi, gh = x @ wih.T + bih, h @ whh.T + bhh
    if mode == "rnn":
        return np.tanh(gi + gh), None
    if mode == "lstm":
        i, f, g, o = np.split(gi + gh, 4, -1)
        c2 = _sig(f) * c + _sig(i) * np.tanh(g)
        return _sig(o) * np.tanh(c2), c2
    xr, xz, xn = np.split(gi, 3, -1)
    hr, hz, hn = np.split(gh, 3, -1)
    r, z = _sig(xr + hr), _sig(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


def np_rnn(mode, module, x, h0=None, c0=None):
    """Reference of a (stacked, maybe bidirectional) recurrent layer over (L, N, I) input."""
    dirs = 2 if module.bidirectional else 1
    seq, n, _ = x.shape
    hid = module.hidden_size
    h0 = np.zeros((module.num_layers * dirs, n, hid)) if h0 is None else h0
    c0 = np.zeros_like(h0) if c0 is None else c0
    inp, hn, cn = x, [], []
    for layer in range(module.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            p = {k: npy(getattr(module, k + sfx)) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
            h, c = h0[layer * dirs + d], c0[layer * dirs + d]
            ys = [None] * seq
            for t in (range(seq - 1, -1, -1) if d else range(seq)):
                h, c = np_cell(mode, inp[t], h, c, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
                ys[t] = h
            outs.append(np.stack(ys))
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, -1)
    return inp, np.stack(hn), (np.stack(cn) if mode == "lstm" else None)


@pytest.mark.parametrize("mode", ["rnn", "lstm", "gru"])
def test_cells_vs_numpy(mode):
    fg.manual_seed(12)
    cell = {"rnn": nn.RNNCell, "lstm": nn.LSTMCell, "gru": nn.GRUCell}[mode](3, 4).double()
    stdv = 1 / math.sqrt(4)
    assert all(np.abs(npy(p)).max() <= stdv for p in cell.parameters())
    x, h, c = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4))
    ps = [npy(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    ref_h, ref_c = np_cell(mode, x, h, c, *ps)
    if mode == "lstm":
        out_h, out_c = cell(t64(x), (t64(h), t64(c)))
        np.testing.assert_allclose(npy(out_c), ref_c, rtol=1e-10)
        zero_h, _ = cell(t64(x))
        np.testing.assert_allclose(npy(zero_h), np_cell(mode, x, 0 * h, 0 * c, *ps)[0], rtol=1e-10)
    else:
        out_h = cell(t64(x), t64(h))
        unb = cell(t64(x[0]), t64(h[0]))
        np.testing.assert_allclose(npy(unb), ref_h[0], rtol=1e-10)
    np.testing.assert_allclose(npy(out_h), ref_h, rtol=1e-10)


@pytest.mark.parametrize("mode", ["rnn", "lstm", "gru"])
def test_recurrent_layers_vs_numpy(mode):
    fg.manual_seed(13)
    cls = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[mode]
    net = cls(3, 4, num_layers=2, bidirectional=True).double()
    names = [n for n, _ in net.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse"]
    assert tuple(net.weight_ih_l1.shape) == ({"rnn": 1, "lstm": 4, "gru": 3}[mode] * 4, 8)
    for seq in (5, 2):  # any sequence length
        x = RNG.standard_normal((seq, 2, 3))
        h0 = RNG.standard_normal((4, 2, 4))
        c0 = RNG.standard_normal((4, 2, 4))
        ref_o, ref_h, ref_c = np_rnn(mode, net, x, h0, c0)
        if mode == "lstm":
            out, (hn, cn) = net(t64(x), (t64(h0), t64(c0)))
            np.testing.assert_allclose(npy(cn), ref_c, rtol=1e-10, atol=1e-12)
        else:
            out, hn = net(t64(x), t64(h0))
        np.testing.assert_allclose(npy(out), ref_o, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(hn), ref_h, rtol=1e-10, atol=1e-12)
    # batch_first and unbatched layouts
    bf = cls(3, 4, num_layers=2, bidirectional=True, batch_first=True).double()
    bf.load_state_dict(net.state_dict())
    x = RNG.standard_normal((2, 6, 3))
    out = bf(t64(x))[0]
    np.testing.assert_allclose(npy(out), np_rnn(mode, net, x.transpose(1, 0, 2))[0].transpose(1, 0, 2),
                               rtol=1e-10, atol=1e-12)
    out_u = net(t64(x[0]))[0]
    np.testing.assert_allclose(npy(out_u), np_rnn(mode, net, x[:1].transpose(1, 0, 2))[0][:, 0], rtol=1e-10, atol=1e-12)


def test_lstm_gradcheck_and_errors():
    fg.manual_seed(14)
    lstm = nn.LSTM(2, 3, batch_first=True).double()
    x = t64(RNG.standard_normal((2, 4, 2)), requires_grad=True)
    gradcheck(call_with(lstm, "weight_hh_l0", lambda a: lstm(a)[0]), (x, lstm.weight_hh_l0))
    gru = nn.GRU(2, 3).double()
    gradcheck(call_with(gru, "bias_hh_l0", lambda a: gru(a)[1]), (x, gru.bias_hh_l0))
    with pytest.raises(ValueError, match="input_size. Expected 2, got 5"):
        lstm(fg.randn(2, 4, 5, dtype=fg.float64))
    with pytest.raises(ValueError, match=r"h_0 of shape \(1, 2, 3\)"):
        gru(fg.randn(4, 2, 2, dtype=fg.float64), fg.zeros(2, 2, 3, dtype=fg.float64))


def test_sequence_model_trains():
    """A GRU learns to output the sign of the running sum of its input."""
    fg.manual_seed(15)
    rng = np.random.default_rng(15)
    x = rng.standard_normal((64, 6, 1))
    y = (x.sum(axis=(1, 2)) > 0).astype(np.int64)
    xt, yt = fg.tensor(x, dtype=fg.float32), fg.tensor(y)
    gru, head = nn.GRU(1, 8, batch_first=True), nn.Linear(8, 2)
    params = list(gru.parameters()) + list(head.parameters())
    opt = fg.optim.Adam(params, lr=0.05)
    for _ in range(60):
        opt.zero_grad()
        loss = F.cross_entropy(head(gru(xt)[1][0]), yt)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
    with fg.no_grad():
        acc = float((head(gru(xt)[1][0]).argmax(1) == yt).float().mean())
    assert acc >= 0.9


# ---------------------------------------------------------------------------
# Layer gradients (float64 gradcheck)
# ---------------------------------------------------------------------------


def test_layer_gradchecks():
    fg.manual_seed(16)
    conv = nn.Conv2d(4, 2, 3, stride=2, padding=1, groups=2).to(fg.float64)
    x = t64(RNG.standard_normal((1, 4, 5, 5)), requires_grad=True)
    gradcheck(call_with(conv, "weight", conv), (x, conv.weight))
    gradcheck(call_with(conv, "bias", conv), (x, conv.bias))
    lin = nn.Linear(3, 2).to(fg.float64)
    gradcheck(call_with(lin, "weight", lin), (t64(RNG.standard_normal((4, 3)), requires_grad=True), lin.weight))
    bn = nn.BatchNorm2d(2).to(fg.float64)
    xb = t64(RNG.standard_normal((3, 2, 2, 2)), requires_grad=True)
    gradcheck(call_with(bn, "weight", bn), (xb, bn.weight))
    emb = nn.Embedding(5, 3).to(fg.float64)  # (padding_idx blocks that row's gradient on purpose)
    idx = fg.tensor([[0, 1], [4, 0]])
    gradcheck(call_with(emb, "weight", lambda _: emb(idx)), (fg.zeros(1, dtype=fg.float64), emb.weight))
    cell = nn.LSTMCell(2, 3).double()
    xc = t64(RNG.standard_normal((2, 2)), requires_grad=True)
    gradcheck(call_with(cell, "weight_ih", lambda a: cell(a)[1]), (xc, cell.weight_ih))


# ---------------------------------------------------------------------------
# init
# ---------------------------------------------------------------------------


def test_calculate_gain():
    init = nn.init
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01**2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_init_distributions():
    init = nn.init
    fg.manual_seed(17)
    w = nn.Parameter(fg.empty(400, 300))
    # kaiming_uniform_: U(-b, b), b = gain * sqrt(3 / fan_in)
    init.kaiming_uniform_(w, nonlinearity="relu")
    b = math.sqrt(2) * math.sqrt(3 / 300)
    a = npy(w)
    assert np.abs(a).max() <= b and np.abs(a).max() > 0.99 * b
    assert abs(a.std() - b / math.sqrt(3)) < 0.02 * b
    assert w.is_leaf and w.grad_fn is None and w.requires_grad
    # kaiming_normal_ with fan_out
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(npy(w).std() - math.sqrt(2 / 400)) < 0.02 * math.sqrt(2 / 400)
    # xavier
    init.xavier_uniform_(w, gain=2.0)
    b = 2.0 * math.sqrt(6 / 700)
    assert np.abs(npy(w)).max() <= b and np.abs(npy(w)).max() > 0.99 * b
    init.xavier_normal_(w)
    assert abs(npy(w).std() - math.sqrt(2 / 700)) < 0.02 * math.sqrt(2 / 700)
    # conv weights: fan_in includes the receptive field
    cw = fg.empty(8, 4, 3, 3)
    init.kaiming_uniform_(cw, a=math.sqrt(5))
    assert np.abs(npy(cw)).max() <= 1 / math.sqrt(36)
    # normal_, uniform_, trunc_normal_
    init.normal_(w, 2.0, 0.5)
    assert abs(npy(w).mean() - 2) < 0.01 and abs(npy(w).std() - 0.5) < 0.01
    init.uniform_(w, -3, -1)
    assert npy(w).min() >= -3 and npy(w).max() < -1
    init.trunc_normal_(w, mean=0.5, std=1.0, a=0.0, b=1.0)
    a = npy(w)
    assert a.min() >= 0 and a.max() <= 1 and abs(a.mean() - 0.5) < 0.01 and a.std() > 0.25
    # constants
    np.testing.assert_array_equal(npy(init.constant_(fg.empty(2, 2), 0.25)), np.full((2, 2), 0.25))
    np.testing.assert_array_equal(npy(init.ones_(fg.empty(3))), np.ones(3))
    np.testing.assert_array_equal(npy(init.zeros_(fg.ones(3))), np.zeros(3))
    np.testing.assert_array_equal(npy(init.eye_(fg.empty(2, 3))), np.eye(2, 3))
    d = init.dirac_(fg.empty(2, 2, 3, 3))
    x = RNG.standard_normal((1, 2, 5, 5))
    np.testing.assert_allclose(npy(F.conv2d(fg.tensor(x, dtype=fg.float32), d, padding=1)), x, rtol=1e-6)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(fg.empty(3))


def test_orthogonal_init():
    for shape in ((6, 4), (3, 5), (4, 2, 3)):
        w = nn.init.orthogonal_(fg.empty(*shape), gain=1.5)
        m = npy(w).reshape(shape[0], -1)
        gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
        np.testing.assert_allclose(gram, 2.25 * np.eye(min(m.shape)), atol=1e-5)


def test_init_reproducible_with_manual_seed():
    def build():
        return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3),
                             nn.Embedding(4, 2), nn.LSTM(2, 3), nn.MultiheadAttention(4, 2))

    fg.manual_seed(42)
    a = _snapshot(build())
    fg.manual_seed(42)
    b = _snapshot(build())
    c = _snapshot(build())
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert any(not np.array_equal(a[k], c[k]) for k in a)
    g1, g2 = fg.Generator(), fg.Generator()
    g1.manual_seed(5)
    g2.manual_seed(5)
    np.testing.assert_array_equal(npy(nn.init.normal_(fg.empty(5), generator=g1)),
                                  npy(nn.init.normal_(fg.empty(5), generator=g2)))


# ---------------------------------------------------------------------------
# utils
# ---------------------------------------------------------------------------


def _params_with_grads(grads):
    ps = []
    for g in grads:
        p = nn.Parameter(fg.zeros(*g.shape, dtype=fg.float64))
        p.grad = t64(g)
        ps.append(p)
    return ps


def test_clip_grad_norm():
    grads = [RNG.standard_normal((3, 4)), RNG.standard_normal(5)]
    ps = _params_with_grads(grads)
    total = math.sqrt(sum((g**2).sum() for g in grads))
    out = nn.utils.clip_grad_norm_(ps, max_norm=1.0)
    assert float(out) == pytest.approx(total, rel=1e-12)
    coef = 1.0 / (total + 1e-6)
    for p, g in zip(ps, grads, strict=True):
        np.testing.assert_allclose(npy(p.grad), g * coef, rtol=1e-12)
    # below the bound: unchanged
    ps = _params_with_grads(grads)
    nn.utils.clip_grad_norm_(ps, max_norm=100.0)
    np.testing.assert_allclose(npy(ps[0].grad), grads[0], rtol=1e-12)
    # inf- and 1-norms; parameters without gradient are skipped
    ps = _params_with_grads(grads) + [nn.Parameter(fg.zeros(2))]
    inf_norm = max(np.abs(g).max() for g in grads)
    assert float(nn.utils.clip_grad_norm_(ps, 0.5, norm_type=math.inf)) == pytest.approx(inf_norm)
    np.testing.assert_allclose(npy(ps[1].grad), grads[1] * 0.5 / (inf_norm + 1e-6), rtol=1e-12)
    ps = _params_with_grads(grads)
    l1 = sum(np.abs(g).sum() for g in grads)
    assert float(nn.utils.clip_grad_norm_(ps, 1.0, norm_type=1)) == pytest.approx(l1)
    # non-finite
    ps = _params_with_grads([np.array([1.0, np.nan])])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert math.isnan(float(nn.utils.clip_grad_norm_(_params_with_grads([np.array([np.inf, 1.0])]), 1.0) * 0))


def test_clip_grad_value_and_vectors():
    grads = [RNG.standard_normal((3, 4)) * 3]
    ps = _params_with_grads(grads)
    nn.utils.clip_grad_value_(ps, 0.5)
    np.testing.assert_array_equal(npy(ps[0].grad), np.clip(grads[0], -0.5, 0.5))
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    np.testing.assert_array_equal(npy(vec), np.concatenate([npy(lin.weight).ravel(), npy(lin.bias)]))
    nn.utils.vector_to_parameters(fg.arange(8).float(), lin.parameters())
    np.testing.assert_array_equal(npy(lin.bias), [6.0, 7.0])
    with pytest.raises(ValueError, match="9 elements"):
        nn.utils.vector_to_parameters(fg.zeros(9), lin.parameters())


def test_deepcopy_module():
    import copy

    net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    net(fg.randn(4, 2)).sum().backward()
    dup = copy.deepcopy(net)
    assert isinstance(dup[0].weight, nn.Parameter) and not dup[0].weight._shares_storage(net[0].weight)
    np.testing.assert_array_equal(npy(dup[0].weight), npy(net[0].weight))
    np.testing.assert_array_equal(npy(dup[0].weight.grad), npy(net[0].weight.grad))
    with fg.no_grad():
        dup[1].running_mean.fill_(5.0)
    assert not np.any(npy(net[1].running_mean) == 5.0)


# ---------------------------------------------------------------------------
# PyTorch parity: references stored in tests/fixtures/parity/nn.npz by
# scripts/make_parity_references.py (which records the PyTorch version), so
# these run without PyTorch
# ---------------------------------------------------------------------------

# name -> (build(nn), input shape); the builders take the nn module so that the
# generator builds the same modules in PyTorch.
PARITY_MODULES = {
    "conv2d": (lambda nn: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 6, 6)),
    "batchnorm2d": (lambda nn: nn.BatchNorm2d(3), (2, 3, 6, 6)),
    "linear": (lambda nn: nn.Linear(6, 5), (2, 3, 6, 6)),
    "layernorm": (lambda nn: nn.LayerNorm(6), (2, 3, 6, 6)),
    "lstm": (lambda nn: nn.LSTM(3, 4, 2, bidirectional=True), (5, 2, 3)),
    "gru": (lambda nn: nn.GRU(3, 4), (5, 2, 3)),
    "mha": (lambda nn: nn.MultiheadAttention(8, 2, batch_first=True), (2, 4, 8)),
}


def parity_outputs(name, module, x):
    """The module's outputs as a flat list (recurrent states and attention weights too)."""
    out = module(x, x, x) if name == "mha" else module(x)
    flat, todo = [], [out]
    while todo:
        o = todo.pop(0)
        if isinstance(o, (tuple, list)):
            todo[:0] = list(o)
        else:
            flat.append(o)
    return flat


def _parity_refs(name):
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "parity" / name
    return np.load(path, allow_pickle=False)


@pytest.mark.parametrize("name", list(PARITY_MODULES))
def test_parity_with_torch(name):
    """Outputs, the input's and the parameters' gradients (for stored cotangents) and the
    state after one training-mode forward, against PyTorch's, from the same weights."""
    ref = _parity_refs("nn.npz")
    assert str(ref["torch_version"])
    build, shape = PARITY_MODULES[name]
    m = build(nn).double()
    keys = [k[len(f"{name}/init/"):] for k in ref.files if k.startswith(f"{name}/init/")]
    assert sorted(keys) == sorted(m.state_dict())
    m.load_state_dict({k: fg.tensor(ref[f"{name}/init/{k}"]) for k in keys})
    xa = ref[f"{name}/x"]
    assert xa.shape == shape
    x = t64(xa, requires_grad=True)
    outs = parity_outputs(name, m, x)
    n_out = int(ref[f"{name}/n_out"])
    assert len(outs) == n_out
    loss = None
    for k, o in enumerate(outs):
        np.testing.assert_allclose(npy(o), ref[f"{name}/out/{k}"], rtol=1e-9, atol=1e-9, err_msg=f"output {k}")
        term = (o * t64(ref[f"{name}/cot/{k}"])).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    np.testing.assert_allclose(npy(x.grad), ref[f"{name}/grad/input"], rtol=1e-9, atol=1e-9)
    for pname, p in m.named_parameters():
        np.testing.assert_allclose(npy(p.grad), ref[f"{name}/grad/{pname}"], rtol=1e-9, atol=1e-9, err_msg=pname)
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(npy(v), ref[f"{name}/after/{k}"], rtol=1e-12, atol=1e-12, err_msg=k)


def test_cross_entropy_parity_with_torch():
    """Weighted, label-smoothed cross entropy with an ignored target, and its gradient."""
    ref = _parity_refs("nn.npz")
    logits = t64(ref["ce/logits"], requires_grad=True)
    out = F.cross_entropy(logits, fg.tensor(ref["ce/target"]), weight=t64(ref["ce/weight"]), label_smoothing=0.1)
    assert float(out) == pytest.approx(float(ref["ce/loss"]), rel=1e-10)
    out.backward()
    np.testing.assert_allclose(npy(logits.grad), ref["ce/grad"], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------


def test_activation_modules_vs_numpy():
    x = RNG.standard_normal((3, 4)) * 2
    sig = _sig(x)
    cases = [
        (nn.ReLU(), np.maximum(x, 0)),
        (nn.LeakyReLU(0.2), np.where(x > 0, x, 0.2 * x)),
        (nn.ELU(0.5), np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
        (nn.Tanh(), np.tanh(x)),
        (nn.Sigmoid(), sig),
        (nn.SiLU(), x * sig),
        (nn.Softplus(), np.log1p(np.exp(x))),
        (nn.GELU(), 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
        (nn.GELU("tanh"), 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))),
        (nn.Softmax(dim=1), np_softmax(x, 1)),
        (nn.LogSoftmax(dim=0), np_log_softmax(x, 0)),
    ]
    for mod, ref in cases:
        np.testing.assert_allclose(npy(mod(t64(x))), ref, rtol=1e-10, atol=1e-12, err_msg=repr(mod))
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


@pytest.mark.parametrize("make", [lambda: nn.ReLU(inplace=True), lambda: nn.LeakyReLU(0.1, inplace=True),
                                  lambda: nn.ELU(inplace=True), lambda: nn.SiLU(inplace=True)])
def test_inplace_activations(make):
    act = make()
    lin = nn.Linear(3, 4).double()
    x = t64(RNG.standard_normal((5, 3)))
    h = lin(x)
    y = act(h)
    assert y is h  # written into its input
    y.sum().backward()
    g_inplace = npy(lin.weight.grad)
    lin.zero_grad()
    act.inplace = False
    y2 = act(lin(x))
    y2.sum().backward()
    np.testing.assert_allclose(npy(y), npy(y2), rtol=1e-12)
    np.testing.assert_allclose(g_inplace, npy(lin.weight.grad), rtol=1e-12)
    with fg.no_grad():  # the native in-place kernel when nothing is recorded
        z = t64(RNG.standard_normal(4))
        assert make()(z) is z
