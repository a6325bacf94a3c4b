"""More of PyTorch's nn / optim / utility surface: ``optim.Rprop``, ``optim.ASGD`` and
``optim.Adafactor`` against stored PyTorch trajectories, and ``set_printoptions`` against stored
PyTorch reprs (both from ``scripts/make_surface_misc_references.py``); ``nn.RNNBase`` /
``nn.RNNCellBase``, the conv/linear + batch-norm fusions, ``skip_init``, the deprecated
clipping and ``nn.init`` names, and the window functions against NumPy float64."""

from __future__ import annotations

import json
import math
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn, optim

REF = Path(__file__).parent / "fixtures" / "parity" / "optim_rprop_asgd.npz"
_DATA = np.load(REF)
CASES = [str(c) for c in _DATA["cases"]]
OPTS = {"Rprop": optim.Rprop, "ASGD": optim.ASGD, "Adafactor": optim.Adafactor}


def _config(case):
    kind, opts = json.loads(str(_DATA[f"{case}/config"]))
    return kind, {k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()}


def _loss(w, b):
    x, y = fg.tensor(_DATA["x"]), fg.tensor(_DATA["y"])
    return ((fg.tanh(x @ w.T + b) - y) ** 2).mean()


def _params(step=0):
    if step == 0:
        return fg.tensor(_DATA["w0"], requires_grad=True), fg.tensor(_DATA["b0"], requires_grad=True)
    return (fg.tensor(_DATA[f"{c}{step}"], requires_grad=True) for c in ("w", "b"))


def _check_step(case, step, opt, w, b):
    for pname, p in (("w", w), ("b", b)):
        np.testing.assert_allclose(p.detach().numpy(), _DATA[f"{case}/{pname}{step}"], rtol=0, atol=1e-6)
        # tighter than asked: both sides compute in float64
        np.testing.assert_allclose(p.detach().numpy(), _DATA[f"{case}/{pname}{step}"], rtol=1e-10, atol=1e-12)
        st = opt.state[p]
        assert int(st["step"]) == int(_DATA[f"{case}/{pname}{step}/step"])
        for key, v in st.items():
            if key == "step":
                continue
            got = v.detach().numpy() if isinstance(v, fg.Tensor) else np.asarray(v)
            np.testing.assert_allclose(got, _DATA[f"{case}/{pname}{step}/{key}"], rtol=1e-10, atol=1e-12)


@pytest.mark.covers("torch.optim.Rprop", "torch.optim.ASGD", "torch.optim.Adafactor")
@pytest.mark.parametrize("case", CASES)
def test_rprop_asgd_match_torch(case):
    kind, kw = _config(case)
    w, b = _params()
    opt = OPTS[kind]([w, b], **kw)
    for step in range(1, int(_DATA["steps"]) + 1):
        opt.zero_grad()
        _loss(w, b).backward()
        opt.step()
        _check_step(case, step, opt, w, b)


@pytest.mark.parametrize("case", ["rprop_flip", "asgd_average", "adafactor_options"])
def test_rprop_asgd_state_dict_round_trip(case):
    kind, kw = _config(case)
    w, b = _params()
    opt = OPTS[kind]([w, b], **kw)
    for _ in range(3):
        opt.zero_grad()
        _loss(w, b).backward()
        opt.step()
    sd = opt.state_dict()
    # A fresh optimizer on copies of the parameters continues the run where it stopped.
    w2, b2 = (
        fg.tensor(w.detach().numpy(), requires_grad=True),
        fg.tensor(b.detach().numpy(), requires_grad=True),
    )
    opt2 = OPTS[kind]([w2, b2])
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for step in range(4, int(_DATA["steps"]) + 1):
        opt2.zero_grad()
        _loss(w2, b2).backward()
        opt2.step()
        _check_step(case, step, opt2, w2, b2)


def test_asgd_loads_torch_layout_state():
    # PyTorch keeps step, eta and mu as 0-d tensors: such a state dict loads.
    case = "asgd_average"
    kind, kw = _config(case)
    w = fg.tensor(_DATA[f"{case}/w3"], requires_grad=True)
    b = fg.tensor(_DATA[f"{case}/b3"], requires_grad=True)
    opt = optim.ASGD([w, b], **kw)
    state = {
        i: {k: fg.tensor(_DATA[f"{case}/{n}3/{k}"]) for k in ("step", "eta", "mu", "ax")}
        for i, n in enumerate("wb")
    }
    opt.load_state_dict({"state": state, "param_groups": [dict(opt.param_groups[0], params=[0, 1])]})
    for step in range(4, int(_DATA["steps"]) + 1):
        opt.zero_grad()
        _loss(w, b).backward()
        opt.step()
        _check_step(case, step, opt, w, b)


def test_rprop_asgd_defaults_and_errors():
    p = fg.zeros(2, requires_grad=True)
    assert optim.Rprop([p]).defaults == dict(
        lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None, maximize=False,
        differentiable=False, capturable=False,
    )  # fmt: skip
    assert optim.ASGD([p]).defaults == dict(
        lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
        differentiable=False, capturable=False,
    )  # fmt: skip
    with pytest.raises(ValueError, match="Invalid eta values"):
        optim.Rprop([p], etas=(1.5, 1.2))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Rprop([p], lr=-1.0)
    with pytest.raises(ValueError, match="Invalid lambd value"):
        optim.ASGD([p], lambd=-1.0)
    with pytest.raises(ValueError, match="Invalid weight_decay"):
        optim.ASGD([p], weight_decay=-0.1)
    with pytest.raises(ValueError, match="ASGD: differentiable"):
        optim.ASGD([p], differentiable=True)
    assert optim.Adafactor([p]).defaults == dict(
        lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, foreach=None, maximize=False
    )
    with pytest.raises(ValueError, match="beta2_decay should be <= 0"):
        optim.Adafactor([p], beta2_decay=0.5)
    with pytest.raises(ValueError, match="Clipping threshold d should be >= 1"):
        optim.Adafactor([p], d=0.5)
    # ASGD's maximize is positional, as in PyTorch (after foreach).
    assert optim.ASGD([p], 0.1, 1e-4, 0.75, 1e6, 0, None, True).defaults["maximize"] is True


# ---------------------------------------------------------------------------
# nn.RNNBase / nn.RNNCellBase
# ---------------------------------------------------------------------------


def test_rnn_base_classes():
    for cls in (nn.RNN, nn.LSTM, nn.GRU):
        m = cls(3, 5, num_layers=2, dtype=fg.float64)
        assert isinstance(m, nn.RNNBase) and not isinstance(m, nn.RNNCellBase)
        assert m.weight_ih_l1.dtype == fg.float64
    for cls in (nn.RNNCell, nn.LSTMCell, nn.GRUCell):
        c = cls(3, 5)
        assert isinstance(c, nn.RNNCellBase) and not isinstance(c, nn.RNNBase)
    assert nn.LSTMCell(3, 5, False, None, fg.float64).weight_ih.dtype == fg.float64
    # The base class made directly, as PyTorch allows: GRU's parameters.
    base = nn.RNNBase("GRU", 3, 5, 2, bidirectional=True)
    gru = nn.GRU(3, 5, 2, bidirectional=True)
    assert [(n, tuple(p.shape)) for n, p in base.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in gru.named_parameters()
    ]
    cell = nn.RNNCellBase(3, 5, True, 4)
    assert {n: tuple(p.shape) for n, p in cell.named_parameters()} == {
        "weight_ih": (20, 3),
        "weight_hh": (20, 5),
        "bias_ih": (20,),
        "bias_hh": (20,),
    }
    bound = 1 / math.sqrt(5)
    assert all(float(p.abs().max()) <= bound for p in cell.parameters())
    with pytest.raises(ValueError, match="unrecognized RNN mode 'LSTMX'"):
        nn.RNNBase("LSTMX", 3, 5)
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.RNNBase("LSTM", 3, 5, proj_size=2)


# ---------------------------------------------------------------------------
# nn.utils: batch-norm fusion, skip_init, gradient clipping
# ---------------------------------------------------------------------------

U = nn.utils


def _trained_bn(bn, shape):
    # Running statistics and affine parameters away from their defaults.
    bn.train()
    with fg.no_grad():
        for _ in range(3):
            bn(fg.randn(*shape) * 2.0 + 0.5)
        bn.weight.copy_(fg.rand(bn.num_features) + 0.5)
        bn.bias.copy_(fg.randn(bn.num_features))
    return bn.eval()


@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval(bias):
    fg.manual_seed(1)
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=bias).eval()
    bn = _trained_bn(nn.BatchNorm2d(4), (5, 4, 6, 6))
    fused = U.fuse_conv_bn_eval(conv, bn)
    assert fused is not conv and isinstance(fused, nn.Conv2d)
    assert isinstance(fused.weight, nn.Parameter) and isinstance(fused.bias, nn.Parameter)
    x = fg.randn(2, 3, 6, 6)
    np.testing.assert_allclose(fused(x).numpy(), bn(conv(x)).numpy(), rtol=1e-5, atol=1e-5)
    # The originals are untouched.
    assert (conv.bias is not None) == bias
    # NumPy float64 reference of the folded parameters.
    s = bn.weight.detach().numpy().astype(np.float64) / np.sqrt(bn.running_var.numpy() + bn.eps)
    np.testing.assert_allclose(fused.weight.detach().numpy(), conv.weight.detach().numpy() * s[:, None, None, None],
                               rtol=1e-6)  # fmt: skip
    b = conv.bias.detach().numpy() if bias else 0.0
    np.testing.assert_allclose(
        fused.bias.detach().numpy(),
        (b - bn.running_mean.numpy()) * s + bn.bias.detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(AssertionError, match="only for eval"):
        U.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_conv_transpose_and_1d_bn():
    fg.manual_seed(2)
    conv = nn.ConvTranspose2d(3, 4, 3, stride=2).eval()
    bn = _trained_bn(nn.BatchNorm2d(4), (5, 4, 3, 3))
    fused = U.fuse_conv_bn_eval(conv, bn, transpose=True)
    x = fg.randn(2, 3, 4, 4)
    np.testing.assert_allclose(fused(x).numpy(), bn(conv(x)).numpy(), rtol=1e-5, atol=1e-5)
    conv1 = nn.Conv1d(2, 3, 3).eval()
    bn1 = _trained_bn(nn.BatchNorm1d(3), (4, 3, 7))
    x1 = fg.randn(2, 2, 9)
    np.testing.assert_allclose(U.fuse_conv_bn_eval(conv1, bn1)(x1).numpy(), bn1(conv1(x1)).numpy(), rtol=1e-5,
                               atol=1e-5)  # fmt: skip


def test_fuse_linear_bn_eval_and_weights():
    fg.manual_seed(3)
    lin = nn.Linear(5, 4).eval()
    bn = _trained_bn(nn.BatchNorm1d(4), (8, 4))
    x = fg.randn(6, 5)
    np.testing.assert_allclose(
        U.fuse_linear_bn_eval(lin, bn)(x).numpy(), bn(lin(x)).numpy(), rtol=1e-5, atol=1e-5
    )
    w, b = U.fuse_linear_bn_weights(
        lin.weight, lin.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    assert w.requires_grad and b.requires_grad and tuple(w.shape) == (4, 5)
    cw, cb = U.fuse_conv_bn_weights(
        lin.weight.reshape(4, 5, 1), None, bn.running_mean, bn.running_var, bn.eps, None, None
    )
    s = 1 / np.sqrt(bn.running_var.numpy().astype(np.float64) + bn.eps)
    np.testing.assert_allclose(
        cw.detach().numpy()[..., 0], lin.weight.detach().numpy() * s[:, None], rtol=1e-6
    )
    np.testing.assert_allclose(cb.detach().numpy(), -bn.running_mean.numpy() * s, rtol=1e-5, atol=1e-7)
    with pytest.raises(AssertionError, match="out_features"):
        U.fuse_linear_bn_eval(lin, _trained_bn(nn.BatchNorm1d(3), (8, 3)))
    with pytest.raises(ValueError, match="fuse_linear_bn_weights: weight of shape"):
        U.fuse_linear_bn_weights(fg.randn(4, 5), None, fg.zeros(3), fg.ones(3), 1e-5, fg.ones(3), fg.zeros(3))


def test_skip_init():
    m = U.skip_init(nn.Linear, 3, 4, bias=False, dtype=fg.float64)
    assert isinstance(m, nn.Linear) and tuple(m.weight.shape) == (4, 3) and m.bias is None
    assert m.weight.dtype == fg.float64
    with pytest.raises(RuntimeError, match="expected a Module class"):
        U.skip_init(fg.zeros, 3)
    with pytest.raises(RuntimeError, match="must support a 'device' arg"):
        U.skip_init(nn.ReLU)


def _grads(seed):
    rng = np.random.default_rng(seed)
    ps = [fg.tensor(rng.standard_normal(s), requires_grad=True) for s in ((3, 4), (5,))]
    for p in ps:
        p.grad = fg.tensor(rng.standard_normal(tuple(p.shape)))
    return ps


def test_clip_grad_norm_deprecated_alias_and_with_norm():
    ps = _grads(0)
    g = [p.grad.numpy().astype(np.float64) for p in ps]
    total = math.sqrt(sum((x**2).sum() for x in g))
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        got = U.clip_grad_norm(ps, 1.0)
    np.testing.assert_allclose(float(got), total, rtol=1e-6)
    for p, x in zip(ps, g, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), x * (1.0 / (total + 1e-6)), rtol=1e-5)
    # clip_grads_with_norm_ with a norm taken beforehand (here over more than these parameters).
    ps = _grads(0)
    U.clip_grads_with_norm_(ps[:1], 2.0, fg.tensor(total * 2))
    np.testing.assert_allclose(ps[0].grad.numpy(), g[0] * (2.0 / (total * 2 + 1e-6)), rtol=1e-5)
    np.testing.assert_array_equal(ps[1].grad.numpy(), g[1])
    # A norm below max_norm leaves the gradients as they are; a float norm is accepted.
    U.clip_grads_with_norm_(ps, 10.0, 1.0)
    np.testing.assert_allclose(ps[1].grad.numpy(), g[1], rtol=1e-6)
    with pytest.raises(TypeError, match="clip_grads_with_norm_: total_norm"):
        U.clip_grads_with_norm_(ps, 1.0, "big")


# ---------------------------------------------------------------------------
# nn.init: sparse_, dirac_ (3-5-D, groups) and the deprecated names
# ---------------------------------------------------------------------------

I = nn.init  # noqa: E741

# old name -> (new name, arguments after the tensor, tensor shape)
DEPRECATED = {
    "uniform": ("uniform_", (-0.5, 2.0), (3, 4)),
    "normal": ("normal_", (1.0, 0.5), (3, 4)),
    "constant": ("constant_", (0.25,), (3, 4)),
    "eye": ("eye_", (), (3, 4)),
    "dirac": ("dirac_", (), (4, 2, 3, 3)),
    "xavier_uniform": ("xavier_uniform_", (1.5,), (5, 4)),
    "xavier_normal": ("xavier_normal_", (1.5,), (5, 4)),
    "kaiming_uniform": ("kaiming_uniform_", (0.1,), (5, 4, 2)),
    "kaiming_normal": ("kaiming_normal_", (0.1,), (5, 4, 2)),
    "orthogonal": ("orthogonal_", (2.0,), (3, 5)),
    "sparse": ("sparse_", (0.5,), (6, 4)),
}


@pytest.mark.covers(
    *(f"torch.nn.init.{n}" for n in DEPRECATED), "torch.nn.init.sparse_", "torch.nn.init.dirac_"
)
@pytest.mark.parametrize("old", sorted(DEPRECATED))
def test_init_deprecated_names_warn_and_call_the_new(old):
    new, args, shape = DEPRECATED[old]
    fn, new_fn = getattr(I, old), getattr(I, new)
    assert fn.__name__ == old
    a, b = fg.empty(*shape, dtype=fg.float64), fg.empty(*shape, dtype=fg.float64)
    fg.manual_seed(7)
    with pytest.warns(FutureWarning, match=rf"`nn.init.{old}` is now deprecated in favor of `nn.init.{new}`"):
        out = fn(a, *args)
    assert out is a
    fg.manual_seed(7)
    new_fn(b, *args)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_init_deterministic_values():
    # NumPy references of the deterministic fills.
    np.testing.assert_array_equal(I.eye_(fg.empty(3, 5)).numpy(), np.eye(3, 5))
    np.testing.assert_array_equal(I.constant_(fg.empty(2, 3), -1.5).numpy(), np.full((2, 3), -1.5))
    for shape, groups in (((6, 2, 3), 2), ((4, 3, 3, 3), 1), ((6, 2, 3, 1, 5), 3)):
        ref = np.zeros(shape)
        per = shape[0] // groups
        for g in range(groups):
            for i in range(min(per, shape[1])):
                ref[(g * per + i, i) + tuple(s // 2 for s in shape[2:])] = 1
        np.testing.assert_array_equal(I.dirac_(fg.empty(*shape), groups).numpy(), ref)
    with pytest.raises(ValueError, match="divisible by groups"):
        I.dirac_(fg.empty(5, 2, 3), 2)
    with pytest.raises(ValueError, match="dirac_: only tensors with 3, 4, or 5"):
        I.dirac_(fg.empty(5, 2))


def test_init_sparse():
    fg.manual_seed(3)
    w = fg.empty(400, 30, dtype=fg.float64)
    assert I.sparse_(w, 0.3, std=2.0) is w
    x = w.numpy()
    # ceil(0.3 * 400) = 120 zeros in every column; the rest N(0, 4).
    np.testing.assert_array_equal((x == 0).sum(axis=0), np.full(30, 120))
    nz = x[x != 0]
    assert abs(nz.std() - 2.0) < 0.1 and abs(nz.mean()) < 0.1
    with pytest.raises(ValueError, match="sparse_: only tensors with 2 dimensions"):
        I.sparse_(fg.empty(3), 0.1)


# ---------------------------------------------------------------------------
# Window functions against NumPy float64
# ---------------------------------------------------------------------------


def _np_window(name, m, **kw):
    if name == "hann_window":
        return np.hanning(m)
    if name == "hamming_window":
        a, b = kw.get("alpha", 0.54), kw.get("beta", 0.46)
        return a - b * np.cos(2 * np.pi * np.arange(m) / (m - 1)) if m > 1 else np.ones(m)
    if name == "blackman_window":
        return np.blackman(m)
    if name == "bartlett_window":
        return np.bartlett(m)
    return np.kaiser(m, kw.get("beta", 12.0))


WINDOWS = [
    ("hann_window", {}),
    ("hamming_window", {}),
    ("hamming_window", {"alpha": 0.5, "beta": 0.3}),
    ("blackman_window", {}),
    ("bartlett_window", {}),
    ("kaiser_window", {}),
    ("kaiser_window", {"beta": 3.5}),
]


@pytest.mark.covers(*sorted({f"torch.{n}" for n, _ in WINDOWS}))
@pytest.mark.parametrize("name,kw", WINDOWS)
def test_windows_match_numpy(name, kw):
    fn = getattr(fg, name)
    for n in (0, 1, 2, 5, 16, 33):
        for periodic in (True, False):
            ref = _np_window(name, n + 1, **kw)[:n] if periodic else _np_window(name, n, **kw)
            if n == 1:
                ref = np.ones(1)
            got64 = fn(n, periodic, dtype=fg.float64, **kw)
            assert got64.dtype == fg.float64 and tuple(got64.shape) == (n,)
            np.testing.assert_allclose(got64.numpy(), ref, rtol=1e-12, atol=1e-13, err_msg=f"{n} {periodic}")
            got32 = fn(n, periodic=periodic, **kw)
            assert got32.dtype == fg.float32 and not got32.requires_grad
            np.testing.assert_allclose(got32.numpy(), ref, rtol=1e-5, atol=2e-6, err_msg=f"{n} {periodic}")
    # The default is periodic.
    np.testing.assert_array_equal(fn(8, **kw).numpy(), fn(8, True, **kw).numpy())
    w = fn(6, dtype=fg.float16, requires_grad=True, **kw)
    assert w.dtype == fg.float16 and w.requires_grad and w.is_leaf
    np.testing.assert_allclose(
        w.detach().float().numpy(), _np_window(name, 7, **kw)[:6], rtol=2e-3, atol=2e-3
    )


def test_window_errors():
    with pytest.raises(RuntimeError, match="hann_window expects floating point dtypes"):
        fg.hann_window(4, dtype=fg.int64)
    with pytest.raises(
        RuntimeError, match="kaiser_window requires non-negative window_length, got window_length=-1"
    ):
        fg.kaiser_window(-1)
    with pytest.raises(TypeError, match="bartlett_window\\(\\): argument 'window_length' must be int"):
        fg.bartlett_window(4.0)


# ---------------------------------------------------------------------------
# set_printoptions against stored PyTorch reprs
# ---------------------------------------------------------------------------

_PRINT = np.load(Path(__file__).parent / "fixtures" / "parity" / "print_options.npz")
_PRINT_OPTIONS = json.loads(str(_PRINT["options"]))


@pytest.fixture
def default_printoptions():
    fg.set_printoptions(profile="default")
    yield
    fg.set_printoptions(profile="default")


@pytest.mark.parametrize("i", range(len(_PRINT_OPTIONS)))
def test_set_printoptions_matches_torch_repr(i, default_printoptions):
    opts, _ = _PRINT_OPTIONS[i]
    fg.set_printoptions(**opts)
    keys = [k for k in _PRINT.files if k.startswith(f"repr/{i}/")]
    assert keys
    for key in keys:
        name = key.split("/")[-1]
        got = repr(fg.tensor(_PRINT[f"val/{name}"])).replace("ferrograd.", "torch.")
        assert got == str(_PRINT[key]), f"{opts} {name}:\n{got}\n{_PRINT[key]}"


def test_set_printoptions_state_and_errors(default_printoptions):
    t = fg.tensor([1.0e-6, 2.0])
    fg.set_printoptions(sci_mode=False, precision=3)
    assert repr(t) == "tensor([0.000, 2.000])"
    fg.set_printoptions(precision=3)  # sci_mode not given: back to automatic, as PyTorch
    assert repr(t) == "tensor([1.000e-06, 2.000e+00])"
    fg.set_printoptions(profile="default")
    assert repr(t) == "tensor([1.0000e-06, 2.0000e+00])"
    with pytest.raises(ValueError, match="set_printoptions: unknown profile 'long'"):
        fg.set_printoptions(profile="long")
    with pytest.raises(ValueError, match="set_printoptions: precision must be an integer"):
        fg.set_printoptions(precision=-1)
    with pytest.raises(ValueError, match="set_printoptions: sci_mode"):
        fg.set_printoptions(sci_mode="yes")
    # A refused call changes nothing.
    assert repr(t) == "tensor([1.0000e-06, 2.0000e+00])"


# ---------------------------------------------------------------------------
# The WebGPU device: the same windows and optimizer steps as on the CPU
# ---------------------------------------------------------------------------


def test_gpu_parity_windows_and_optimizers():
    if not fg.gpu.is_available():
        pytest.skip(f"no GPU adapter: {fg.gpu.unavailable_reason()}")
    for name, kw in WINDOWS:
        fn = getattr(fg, name)
        for periodic in (True, False):
            g = fn(17, periodic, device="gpu", **kw)
            assert str(g.device) == "gpu"
            np.testing.assert_allclose(g.cpu().numpy(), fn(17, periodic, **kw).numpy(), rtol=1e-5, atol=1e-6)
    for case in ("rprop_flip", "asgd_average", "adafactor_options"):
        kind, kw = _config(case)
        runs = []
        for dev in ("cpu", "gpu"):
            w = fg.tensor(_DATA["w0"], dtype=fg.float32, device=dev, requires_grad=True)
            b = fg.tensor(_DATA["b0"], dtype=fg.float32, device=dev, requires_grad=True)
            x = fg.tensor(_DATA["x"], dtype=fg.float32, device=dev)
            y = fg.tensor(_DATA["y"], dtype=fg.float32, device=dev)
            opt = OPTS[kind]([w, b], **kw)
            for _ in range(4):
                opt.zero_grad()
                ((fg.tanh(x @ w.T + b) - y) ** 2).mean().backward()
                opt.step()
            runs.append(w.detach().cpu().numpy())
        np.testing.assert_allclose(runs[1], runs[0], rtol=1e-4, atol=1e-5, err_msg=case)
        # and both near the float64 PyTorch trajectory
        np.testing.assert_allclose(runs[1], _DATA[f"{case}/w4"], rtol=1e-3, atol=1e-4, err_msg=case)


def test_surface_misc_exported():
    from ferrograd import _surface_misc as sm

    for name in sm.__all__:
        assert getattr(fg, name) is getattr(sm, name), name
        assert name in fg.__all__, name
