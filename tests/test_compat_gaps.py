"""PyTorch APIs that ferrograd has but no other suite exercised (``docs/compatibility.md``).

Each test checks behaviour against an independent answer: NumPy float64, a documented formula
(the ``nn.init`` distributions, with tolerances from the sample size), or PyTorch's own
results stored in ``tests/fixtures/parity/compat_gaps.npz`` by
``scripts/make_compat_gaps_references.py`` (PyTorch version recorded in the file).
"""

from __future__ import annotations

import math
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn import functional as F
from ferrograd.nn.utils import rnn

ROOT = Path(__file__).resolve().parent.parent
REF = np.load(ROOT / "tests" / "fixtures" / "parity" / "compat_gaps.npz")
TV = f"PyTorch {REF['torch_version']}"


def _np(t: fg.Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- factories, views


@pytest.mark.covers("torch.zeros_like", "torch.full_like", "torch.empty_like", "torch.dtype")
def test_like_factories_keep_shape_and_dtype() -> None:
    a = fg.tensor(_rand(2, 3), dtype=fg.float64)
    z = fg.zeros_like(a)
    f = fg.full_like(a, 2.5)
    e = fg.empty_like(a)
    for t in (z, f, e):
        assert t.shape == (2, 3) and t.dtype == fg.float64 and isinstance(t.dtype, fg.dtype)
        assert not t.requires_grad
    np.testing.assert_array_equal(_np(z), np.zeros((2, 3)))
    np.testing.assert_array_equal(_np(f), np.full((2, 3), 2.5))
    i = fg.full_like(fg.zeros(4, dtype=fg.int64), 7, dtype=fg.float32)
    assert i.dtype == fg.float32
    np.testing.assert_array_equal(_np(i), np.full(4, 7.0))
    assert fg.zeros_like(fg.ones(3, dtype=fg.int32)).dtype == fg.int32
    assert isinstance(fg.int64, fg.dtype) and not fg.int64.is_floating_point


@pytest.mark.covers("torch.swapaxes", "torch.t", "torch.Tensor.T", "torch.Tensor.mT", "torch.linalg.diagonal")
def test_transposes_and_diagonal() -> None:
    x = _rand(2, 3, 4)
    a = fg.tensor(x)
    np.testing.assert_array_equal(_np(fg.swapaxes(a, 0, 2)), np.swapaxes(x, 0, 2))
    np.testing.assert_array_equal(_np(a.mT), np.swapaxes(x, -1, -2))
    m = fg.tensor(x[0])
    np.testing.assert_array_equal(_np(fg.t(m)), x[0].T)
    np.testing.assert_array_equal(_np(m.T), x[0].T)
    np.testing.assert_array_equal(_np(fg.t(fg.tensor(x[0, 0]))), x[0, 0])  # 1-d: unchanged
    with pytest.raises((ValueError, RuntimeError), match="t"):
        fg.t(a)
    np.testing.assert_array_equal(_np(fg.linalg.diagonal(a)), np.diagonal(x, axis1=-2, axis2=-1))
    np.testing.assert_array_equal(
        _np(fg.linalg.diagonal(a, offset=1, dim1=0, dim2=2)), np.diagonal(x, 1, axis1=0, axis2=2)
    )
    # gradients flow through the views
    v = fg.tensor(x, requires_grad=True)
    (fg.swapaxes(v, 0, 1) * fg.tensor(np.swapaxes(x, 0, 1))).sum().backward()
    np.testing.assert_allclose(_np(v.grad), x, rtol=1e-6)


@pytest.mark.covers("torch.true_divide", "torch.clip", "torch.Tensor.sub_", "torch.Tensor.div_")
def test_arithmetic_spellings() -> None:
    x, y = _rand(3, 4, seed=1), np.abs(_rand(3, 4, seed=2)) + 0.5
    a, b = fg.tensor(x), fg.tensor(y)
    np.testing.assert_allclose(_np(fg.true_divide(a, b)), x.astype(np.float64) / y, rtol=1e-6)
    q = fg.true_divide(fg.tensor([3, 7], dtype=fg.int64), 2)
    assert q.dtype.is_floating_point
    np.testing.assert_array_equal(_np(q), [1.5, 3.5])
    np.testing.assert_allclose(_np(fg.clip(a, -0.5, 0.25)), np.clip(x, -0.5, 0.25))
    np.testing.assert_allclose(_np(fg.clip(a, min=0.0)), np.maximum(x, 0.0))
    c = a.clone()
    assert c.sub_(b, alpha=2.0) is c
    np.testing.assert_allclose(_np(c), x.astype(np.float64) - 2 * y, rtol=1e-6, atol=1e-6)
    d = a.clone()
    assert d.div_(b) is d
    np.testing.assert_allclose(_np(d), x.astype(np.float64) / y, rtol=1e-6)
    e = a.clone()
    e.div_(2.0, rounding_mode="floor")
    np.testing.assert_array_equal(_np(e), np.floor(x / 2.0))
    with pytest.raises(RuntimeError, match="leaf"):
        fg.tensor(x, requires_grad=True).sub_(1.0)


@pytest.mark.covers(
    "torch.Tensor.view_as",
    "torch.Tensor.reshape_as",
    "torch.Tensor.expand_as",
    "torch.Tensor.type_as",
    "torch.Tensor.masked_fill_",
    "torch.Tensor.bool",
)
def test_as_methods_and_masked_fill() -> None:
    x = _rand(2, 6, seed=3)
    a = fg.tensor(x)
    other = fg.zeros(3, 4)
    v = a.view_as(other)
    assert v.shape == (3, 4)
    np.testing.assert_array_equal(_np(v), x.reshape(3, 4))
    np.testing.assert_array_equal(_np(a.T.reshape_as(other)), x.T.reshape(3, 4))
    row = fg.tensor(x[:1])
    np.testing.assert_array_equal(_np(row.expand_as(a)), np.broadcast_to(x[:1], (2, 6)))
    with pytest.raises((ValueError, RuntimeError)):
        a.expand_as(other)
    t = a.type_as(fg.zeros(1, dtype=fg.float64))
    assert t.dtype == fg.float64
    np.testing.assert_array_equal(_np(t), x.astype(np.float64))
    mask = x > 0.3
    m = a.clone()
    assert m.masked_fill_(fg.tensor(mask), -7.0) is m
    np.testing.assert_array_equal(_np(m), np.where(mask, -7.0, x))
    b = fg.tensor([0.0, -0.5, 2.0, 0.0]).bool()
    assert b.dtype == fg.bool
    assert b.tolist() == [False, True, True, False]


@pytest.mark.covers(
    "torch.Tensor.item",
    "torch.Tensor.tolist",
    "torch.Tensor.device",
    "torch.Tensor.dtype",
    "torch.Tensor.shape",
    "torch.Tensor.size",
    "torch.Tensor.dim",
    "torch.Tensor.ndim",
)
def test_introspection() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = fg.tensor(x)
    assert a.shape == (2, 3, 4) and tuple(a.shape) == x.shape
    assert a.size() == (2, 3, 4) and a.size(1) == 3 and a.size(-1) == 4
    assert a.dim() == 3 and a.ndim == 3
    assert a.dtype == fg.float32 and a.device.type == "cpu"
    assert a.tolist() == x.tolist()
    assert a[1, 2, 3].item() == 23.0 and isinstance(a[1, 2, 3].item(), float)
    i = fg.tensor([5], dtype=fg.int64).item()
    assert i == 5 and isinstance(i, int)
    assert isinstance(fg.tensor(True).item(), bool)
    with pytest.raises((ValueError, RuntimeError), match="item|element"):
        a.item()
    with pytest.raises(IndexError):
        a.size(3)


@pytest.mark.covers("torch.set_num_threads", "torch.get_num_threads", "torch.use_deterministic_algorithms")
def test_thread_and_determinism_settings() -> None:
    before = fg.get_num_threads()
    assert isinstance(before, int) and before >= 1
    try:
        fg.set_num_threads(1)
        assert fg.get_num_threads() == 1
        x = _rand(64, 64, seed=4)
        np.testing.assert_allclose(
            _np(fg.tensor(x) @ fg.tensor(x)), x.astype(np.float64) @ x, rtol=1e-4, atol=1e-4
        )
    finally:
        fg.set_num_threads(before)
    assert fg.get_num_threads() == before
    was = fg.are_deterministic_algorithms_enabled()
    try:
        fg.use_deterministic_algorithms(True)
        assert fg.are_deterministic_algorithms_enabled()
        fg.use_deterministic_algorithms(False)
        assert not fg.are_deterministic_algorithms_enabled()
    finally:
        fg.use_deterministic_algorithms(was)


# ----------------------------------------------------------------------------- nn containers, layers


def test_module_list_and_dict() -> None:
    layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
    layers.append(nn.Linear(3, 2))
    assert len(layers) == 3 and isinstance(layers[-1], nn.Linear)
    assert len(list(layers.parameters())) == 6
    heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
    heads["b"] = nn.Linear(2, 4)
    assert list(heads.keys()) == ["a", "b"] and "b" in heads
    names = [n for n, _ in nn.Sequential(layers, heads).named_parameters()]
    assert "0.2.weight" in names and "1.b.bias" in names

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = layers
            self.heads = heads

        def forward(self, x: fg.Tensor) -> fg.Tensor:
            for b in self.blocks:
                x = b(x)
            return self.heads["b"](x)

    net = Net()
    x = _rand(5, 3, seed=5)
    ref = x.astype(np.float64)
    for b in layers:
        ref = ref @ _np(b.weight).T + _np(b.bias)
    ref = ref @ _np(heads["b"].weight).T + _np(heads["b"].bias)
    np.testing.assert_allclose(_np(net(fg.tensor(x))), ref, rtol=1e-5, atol=1e-5)
    assert set(net.state_dict()) >= {"blocks.2.weight", "heads.a.weight"}


def test_avgpool3d_and_instancenorm3d() -> None:
    x = _rand(2, 3, 4, 6, 4, seed=6)
    got = nn.AvgPool3d(2)(fg.tensor(x))
    ref = x.astype(np.float64).reshape(2, 3, 2, 2, 3, 2, 2, 2).mean(axis=(3, 5, 7))
    np.testing.assert_allclose(_np(got), ref, rtol=1e-5, atol=1e-6)
    norm = nn.InstanceNorm3d(3, affine=True)
    with fg.no_grad():
        norm.weight.copy_(fg.tensor([1.0, 2.0, 0.5]))
        norm.bias.copy_(fg.tensor([0.0, -1.0, 3.0]))
    y = _np(norm(fg.tensor(x)))
    xd = x.astype(np.float64)
    mu = xd.mean(axis=(2, 3, 4), keepdims=True)
    var = xd.var(axis=(2, 3, 4), keepdims=True)
    ref = (xd - mu) / np.sqrt(var + 1e-5) * np.array([1.0, 2.0, 0.5])[:, None, None, None] + np.array(
        [0.0, -1.0, 3.0]
    )[:, None, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_upsampling_and_constant_pad() -> None:
    x = _rand(1, 2, 3, 2, seed=7)
    ref = x.repeat(2, axis=2).repeat(2, axis=3)
    np.testing.assert_array_equal(_np(nn.UpsamplingNearest2d(scale_factor=2)(fg.tensor(x))), ref)
    np.testing.assert_array_equal(_np(nn.UpsamplingNearest2d(size=(6, 4))(fg.tensor(x))), ref)
    with pytest.warns(UserWarning):
        up = F.upsample(fg.tensor(x), scale_factor=2, mode="nearest")
    np.testing.assert_array_equal(_np(up), ref)
    s = _rand(2, 3, 4, seed=8)
    got = nn.ConstantPad1d((1, 2), 3.5)(fg.tensor(s))
    np.testing.assert_array_equal(_np(got), np.pad(s, ((0, 0), (0, 0), (1, 2)), constant_values=3.5))
    np.testing.assert_array_equal(
        _np(nn.ConstantPad1d(2, -1.0)(fg.tensor(s))),
        np.pad(s, ((0, 0), (0, 0), (2, 2)), constant_values=-1.0),
    )


def test_smooth_l1_loss() -> None:
    x, y = 2 * _rand(4, 5, seed=9), _rand(4, 5, seed=10)
    d = np.abs(x.astype(np.float64) - y)
    for beta in (1.0, 0.5):
        elem = np.where(d < beta, 0.5 * d**2 / beta, d - 0.5 * beta)
        a = fg.tensor(x, requires_grad=True)
        loss = nn.SmoothL1Loss(beta=beta)(a, fg.tensor(y))
        np.testing.assert_allclose(loss.item(), elem.mean(), rtol=1e-5)
        loss.backward()
        diff = x.astype(np.float64) - y
        grad = np.where(d < beta, diff / beta, np.sign(diff)) / diff.size
        np.testing.assert_allclose(_np(a.grad), grad, rtol=1e-5, atol=1e-7)
    summed = nn.SmoothL1Loss(reduction="sum")(fg.tensor(x), fg.tensor(y)).item()
    np.testing.assert_allclose(summed, np.where(d < 1, 0.5 * d**2, d - 0.5).sum(), rtol=1e-5)
    with pytest.raises((ValueError, RuntimeError), match="smooth_l1|SmoothL1|shape|size"):
        nn.SmoothL1Loss()(fg.tensor(x), fg.tensor(y[:2]))


def test_relu6_and_softmin() -> None:
    x = 5 * _rand(3, 4, seed=11)
    a = fg.tensor(x, requires_grad=True)
    y = F.relu6(a)
    np.testing.assert_array_equal(_np(y), np.clip(x, 0, 6))
    y.sum().backward()
    np.testing.assert_array_equal(_np(a.grad), ((x > 0) & (x < 6)).astype(np.float64))
    xd = x.astype(np.float64)
    for dim in (0, 1):
        e = np.exp(-(xd - xd.min(axis=dim, keepdims=True)))
        np.testing.assert_allclose(
            _np(F.softmin(fg.tensor(x), dim=dim)), e / e.sum(axis=dim, keepdims=True), rtol=1e-5
        )


# ----------------------------------------------------------------------------- nn.init


def _mean_var_tol(n: int, var: float, mu4: float, k: float = 6.0) -> tuple[float, float]:
    """Tolerances (k standard errors) of the sample mean and sample variance of ``n`` draws."""
    return k * math.sqrt(var / n), k * math.sqrt(max(mu4 - var**2, 0.0) / n)


def _check_moments(t: fg.Tensor, mean: float, var: float, mu4: float) -> None:
    v = _np(t).ravel()
    tm, tv = _mean_var_tol(v.size, var, mu4)
    assert abs(v.mean() - mean) < tm, (v.mean(), mean, tm)
    assert abs(v.var() - var) < tv, (v.var(), var, tv)


def _check_uniform(t: fg.Tensor, lo: float, hi: float) -> None:
    v = _np(t)
    assert v.min() >= lo and v.max() <= hi
    w = hi - lo
    # with n draws, P(no draw in the top or bottom 1 %) is 0.99**n: the bound is tight
    assert v.max() > hi - 0.01 * w and v.min() < lo + 0.01 * w
    _check_moments(t, (lo + hi) / 2, w**2 / 12, w**4 / 80)


def test_init_uniform_constant_ones_zeros_eye() -> None:
    fg.manual_seed(0)
    w = fg.empty(100, 80)
    assert nn.init.uniform_(w, -0.5, 1.5) is w
    _check_uniform(w, -0.5, 1.5)
    np.testing.assert_array_equal(_np(nn.init.constant_(w, 0.25)), np.full((100, 80), 0.25))
    np.testing.assert_array_equal(_np(nn.init.ones_(w)), np.ones((100, 80)))
    np.testing.assert_array_equal(_np(nn.init.zeros_(w)), np.zeros((100, 80)))
    np.testing.assert_array_equal(_np(nn.init.eye_(fg.empty(3, 5))), np.eye(3, 5))
    np.testing.assert_array_equal(_np(nn.init.eye_(fg.empty(4, 2))), np.eye(4, 2))
    with pytest.raises((ValueError, RuntimeError), match="eye_"):
        nn.init.eye_(fg.empty(2, 2, 2))
    p = nn.Parameter(fg.zeros(3))
    nn.init.ones_(p)  # under no_grad: a leaf that requires grad is written in place
    assert p.requires_grad and p.grad_fn is None
    np.testing.assert_array_equal(_np(p), np.ones(3))


# (out, in, kh, kw): fan_in = in * kh * kw, fan_out = out * kh * kw
CONV = (48, 16, 3, 3)
FAN_IN, FAN_OUT = 16 * 9, 48 * 9


def test_init_xavier() -> None:
    fg.manual_seed(1)
    bound = 0.7 * math.sqrt(6.0 / (FAN_IN + FAN_OUT))
    _check_uniform(nn.init.xavier_uniform_(fg.empty(*CONV), gain=0.7), -bound, bound)
    var = (1.3**2) * 2.0 / (FAN_IN + FAN_OUT)
    _check_moments(nn.init.xavier_normal_(fg.empty(*CONV), gain=1.3), 0.0, var, 3 * var**2)
    lin = fg.empty(300, 20)  # Linear weight (out, in)
    b = math.sqrt(6.0 / 320)
    _check_uniform(nn.init.xavier_uniform_(lin), -b, b)
    with pytest.raises((ValueError, RuntimeError), match="fan|dim"):
        nn.init.xavier_uniform_(fg.empty(5))


@pytest.mark.parametrize(("mode", "fan"), [("fan_in", FAN_IN), ("fan_out", FAN_OUT)])
def test_init_kaiming(mode: str, fan: int) -> None:
    fg.manual_seed(2)
    gain = math.sqrt(2.0 / (1 + 0.2**2))  # leaky_relu, negative slope 0.2
    bound = gain * math.sqrt(3.0 / fan)
    _check_uniform(nn.init.kaiming_uniform_(fg.empty(*CONV), a=0.2, mode=mode), -bound, bound)
    var = 2.0 / fan  # relu gain sqrt(2)
    w = nn.init.kaiming_normal_(fg.empty(*CONV), mode=mode, nonlinearity="relu")
    _check_moments(w, 0.0, var, 3 * var**2)
    var_lin = 1.0 / fan  # linear gain 1
    _check_moments(
        nn.init.kaiming_normal_(fg.empty(*CONV), mode=mode, nonlinearity="linear"),
        0.0,
        var_lin,
        3 * var_lin**2,
    )
    with pytest.raises(ValueError, match="mode|fan"):
        nn.init.kaiming_uniform_(fg.empty(*CONV), mode="fan_avg")


def test_init_trunc_normal() -> None:
    fg.manual_seed(3)
    mean, std, a, b = 0.5, 1.0, -1.0, 2.0
    w = nn.init.trunc_normal_(fg.empty(150, 100), mean=mean, std=std, a=a, b=b)
    v = _np(w)
    assert v.min() >= a and v.max() <= b

    def phi(z: float) -> float:
        return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    def cdf(z: float) -> float:
        return 0.5 * (1 + math.erf(z / math.sqrt(2)))

    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    tmean = mean + std * (phi(al) - phi(be)) / z
    tvar = std**2 * (1 + (al * phi(al) - be * phi(be)) / z - ((phi(al) - phi(be)) / z) ** 2)
    # the fourth central moment is bounded by the range: (b - a)^2 * var
    _check_moments(w, tmean, tvar, (b - a) ** 2 * tvar)


# ----------------------------------------------------------------------------- Transformer decoder


def test_transformer_decoder_matches_pytorch() -> None:
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8))
    sd = {k[4:]: fg.tensor(REF[k]) for k in REF.files if k.startswith("dec.")}
    dec.load_state_dict(sd)
    tgt = fg.tensor(REF["dec_tgt"], requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    mpad = fg.tensor([[False, False, False, True], [False, False, False, False]])
    out = dec(tgt, fg.tensor(REF["dec_memory"]), tgt_mask=mask, memory_key_padding_mask=mpad)
    np.testing.assert_allclose(_np(out), REF["dec_out"], rtol=1e-4, atol=1e-5, err_msg=TV)
    (out**2).sum().backward()
    np.testing.assert_allclose(_np(tgt.grad), REF["dec_grad_tgt"], rtol=1e-4, atol=1e-4, err_msg=TV)
    assert dec.layers[0] is not dec.layers[1]  # deep copies, not one shared layer


# ----------------------------------------------------------------------------- packed sequences


@pytest.mark.covers("torch.nn.utils.rnn.PackedSequence")
def test_pack_padded_sequence_matches_pytorch() -> None:
    p = rnn.pack_padded_sequence(
        fg.tensor(REF["pack_input"]), REF["pack_lengths"].tolist(), enforce_sorted=False
    )
    assert isinstance(p, rnn.PackedSequence)
    np.testing.assert_array_equal(_np(p.data), REF["pack_data"], err_msg=TV)
    np.testing.assert_array_equal(_np(p.batch_sizes), REF["pack_batch_sizes"], err_msg=TV)
    np.testing.assert_array_equal(_np(p.sorted_indices), REF["pack_sorted_indices"], err_msg=TV)
    np.testing.assert_array_equal(_np(p.unsorted_indices), REF["pack_unsorted_indices"], err_msg=TV)
    padded, lengths = rnn.pad_packed_sequence(p, batch_first=True, padding_value=-1.0, total_length=5)
    np.testing.assert_array_equal(_np(padded), REF["unpack_padded"], err_msg=TV)
    np.testing.assert_array_equal(_np(lengths), REF["unpack_lengths"], err_msg=TV)
    seqs = [fg.arange(n, dtype=fg.float32) + 10 * n for n in (3, 1, 2)]
    q = rnn.pack_sequence(seqs, enforce_sorted=False)
    np.testing.assert_array_equal(_np(q.data), REF["packseq_data"], err_msg=TV)
    np.testing.assert_array_equal(_np(q.batch_sizes), REF["packseq_batch_sizes"], err_msg=TV)
    np.testing.assert_array_equal(_np(q.sorted_indices), REF["packseq_sorted_indices"], err_msg=TV)
    with pytest.raises((ValueError, RuntimeError), match="pack_padded_sequence"):
        rnn.pack_padded_sequence(fg.tensor(REF["pack_input"]), [2, 4, 3], enforce_sorted=True)


def test_packed_lstm_equals_per_sequence_runs() -> None:
    fg.manual_seed(4)
    lstm = nn.LSTM(2, 3)
    x = _rand(4, 3, 2, seed=12)
    lengths = [2, 4, 3]
    out, (h, _) = lstm(rnn.pack_padded_sequence(fg.tensor(x), lengths, enforce_sorted=False))
    padded, _ = rnn.pad_packed_sequence(out)
    for b, n in enumerate(lengths):
        alone, (hb, _) = lstm(fg.tensor(x[:n, b : b + 1]))
        np.testing.assert_allclose(_np(padded[:n, b]), _np(alone[:, 0]), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(_np(padded[n:, b]), 0.0)
        np.testing.assert_allclose(_np(h[0, b]), _np(hb[0, 0]), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- optim, autograd, data


def test_multistep_lr_matches_pytorch() -> None:
    a, b = nn.Parameter(fg.zeros(1)), nn.Parameter(fg.zeros(1))
    opt = fg.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1)
    sched = fg.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 5, 5, 8], gamma=0.5)
    got = []
    for _ in range(10):
        opt.step()
        sched.step()
        got.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == got[-1]
    np.testing.assert_allclose(np.array(got), REF["multistep_lrs"], rtol=1e-12, err_msg=TV)


def test_autograd_backward() -> None:
    x, w = _rand(3, 4, seed=13), _rand(4, 2, seed=14)
    a = fg.tensor(x, requires_grad=True)
    b = fg.tensor(w, requires_grad=True)
    y1 = (a @ b).sum()
    y2 = a * 3.0
    seed = _rand(3, 4, seed=15)
    fg.autograd.backward([y1, y2], [None, fg.tensor(seed)])
    np.testing.assert_allclose(_np(a.grad), np.ones((3, 2)) @ w.T + 3 * seed, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(b.grad), x.T @ np.ones((3, 2)), rtol=1e-5, atol=1e-6)
    c = fg.tensor(x, requires_grad=True)
    d = fg.tensor(w, requires_grad=True)
    fg.autograd.backward((c @ d).sum(), inputs=[d])
    assert c.grad is None
    np.testing.assert_allclose(_np(d.grad), x.T @ np.ones((3, 2)), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="grad"):
        fg.autograd.backward(a * 2.0)  # non-scalar without grad_tensors


def test_checkpoint_gives_the_same_gradients() -> None:
    fg.manual_seed(5)
    block = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
    x = _rand(6, 4, seed=16)

    def grads(use_ckpt: bool) -> list[np.ndarray]:
        block.zero_grad()
        inp = fg.tensor(x, requires_grad=True)
        h = fg.utils.checkpoint.checkpoint(block, inp, use_reentrant=False) if use_ckpt else block(inp)
        (h.sin() * h).sum().backward()
        return [_np(inp.grad)] + [_np(p.grad) for p in block.parameters()]

    plain, ckpt = grads(False), grads(True)
    for g0, g1 in zip(plain, ckpt, strict=True):
        np.testing.assert_allclose(g1, g0, rtol=1e-6, atol=1e-7)
    # the reference: the input gradient from the chain rule in float64
    p = [_np(q) for q in block.parameters()]
    z = np.tanh(x.astype(np.float64) @ p[0].T + p[1])
    h = z @ p[2].T + p[3]
    dh = np.sin(h) + h * np.cos(h)
    dx = ((dh @ p[2]) * (1 - z**2)) @ p[0]
    np.testing.assert_allclose(ckpt[0], dx, rtol=1e-4, atol=1e-5)


def test_iterable_dataset() -> None:
    class Squares(fg.utils.data.IterableDataset):
        def __init__(self, n: int) -> None:
            self.n = n

        def __iter__(self):  # type: ignore[no-untyped-def]
            for i in range(self.n):
                yield fg.tensor([float(i), float(i * i)])

    batches = list(fg.utils.data.DataLoader(Squares(7), batch_size=3))
    assert [tuple(b.shape) for b in batches] == [(3, 2), (3, 2), (1, 2)]
    got = np.concatenate([_np(b) for b in batches])
    np.testing.assert_array_equal(got, [[i, i * i] for i in range(7)])
    with pytest.raises((ValueError, TypeError), match="shuffle|IterableDataset"):
        fg.utils.data.DataLoader(Squares(3), shuffle=True)


def test_inplace_keywords_on_ints_and_autograd() -> None:
    b = fg.tensor([-7, 7, 6], dtype=fg.int64)
    b.div_(2, rounding_mode="floor")
    assert b.dtype == fg.int64 and b.tolist() == [-4, 3, 3]
    c = fg.tensor([-7.0, 7.0])
    c.div_(2.0, rounding_mode="trunc")
    assert c.tolist() == [-3.0, 3.0]
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    y.sub_(x, alpha=3.0)  # y = x - 3x
    y.sum().backward()
    np.testing.assert_array_equal(_np(x.grad), [-2.0, -2.0])
    with pytest.raises(TypeError, match="alpha"):
        y.detach().sub_(1.0, alpha="2")
