"""More ``torch.nn`` layers composed of registry ops, beyond the op table
(``tests/optable/composed_nn_more.py`` holds their functionals): ``ParameterList`` and
``ParameterDict`` registration, ``LazyLinear``, ``BatchNorm3d``, the pooling, activation,
dropout and loss modules: PyTorch's constructor defaults, ``repr``, ``state_dict`` keys,
train/eval behaviour and the errors for bad input.
"""

from __future__ import annotations

import copy
import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn import functional as F

RNG = np.random.default_rng(7)


def t64(*shape, requires_grad=False):
    return fg.tensor(RNG.uniform(-1.0, 1.0, size=shape), dtype=fg.float64, requires_grad=requires_grad)


def npv(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# ---------------------------------------------------------------------------
# ParameterList / ParameterDict
# ---------------------------------------------------------------------------


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.plist = nn.ParameterList([nn.Parameter(fg.zeros(2)), fg.ones(3)])
        self.pdict = nn.ParameterDict({"a": nn.Parameter(fg.zeros(2, 3)), "b": fg.ones(1)})


def test_parameter_containers_register_their_entries():
    m = Holder()
    assert list(m.state_dict()) == ["plist.0", "plist.1", "pdict.a", "pdict.b"]
    assert len(list(m.parameters())) == 4
    assert all(isinstance(p, nn.Parameter) for p in m.plist)  # the plain tensor was wrapped
    m.plist.append(fg.zeros(4))
    m.plist += [fg.zeros(5)]
    m.pdict["c"] = fg.zeros(5)
    m.pdict.update([("d", fg.ones(2))])
    assert [tuple(p.shape) for p in m.plist] == [(2,), (3,), (4,), (5,)]
    assert [tuple(p.shape) for p in m.plist[1:3]] == [(3,), (4,)]
    assert isinstance(m.plist[1:], nn.ParameterList) and tuple(m.plist[-1].shape) == (5,)
    assert list(m.pdict.keys()) == ["a", "b", "c", "d"]
    assert tuple(m.pdict.pop("a").shape) == (2, 3) and "a" not in m.pdict
    assert list(dict(m.named_parameters())) == [
        "plist.0", "plist.1", "plist.2", "plist.3", "pdict.b", "pdict.c", "pdict.d",
    ]  # fmt: skip
    first = m.plist[0]
    m.to(fg.float64)
    assert m.plist[0] is first and first.dtype == fg.float64 and m.pdict["b"].dtype == fg.float64
    with pytest.raises(IndexError, match="out of range"):
        m.plist[9]
    with pytest.raises(KeyError):
        m.pdict["zz"]


def test_parameter_containers_train_load_copy_and_repr():
    m = Holder()
    opt = fg.optim.SGD(m.parameters(), lr=0.5)
    loss = (m.plist[0] * 2).sum() + m.pdict["a"].sum()
    loss.backward()
    opt.step()
    np.testing.assert_allclose(npv(m.plist[0]), -1.0)
    np.testing.assert_allclose(npv(m.pdict["a"]), -0.5)
    m2 = Holder()
    m2.load_state_dict(m.state_dict())
    np.testing.assert_allclose(npv(m2.plist[0]), -1.0)
    m3 = copy.deepcopy(m)
    np.testing.assert_allclose(npv(m3.pdict["a"]), -0.5)
    assert repr(nn.ParameterList([nn.Parameter(fg.zeros(2)), fg.ones(3, dtype=fg.float64)])) == (
        "ParameterList(\n    (0): Parameter containing: [ferrograd.float32 of size 2]\n"
        "    (1): Parameter containing: [ferrograd.float64 of size 3]\n)"
    )
    assert "(a): Parameter containing: [ferrograd.float32 of size 2x3]" in repr(m.pdict)
    pd = nn.ParameterDict({"x": fg.zeros(1)}) | nn.ParameterDict({"y": fg.zeros(1)})
    assert list(pd) == ["x", "y"] and pd.get("q") is None and pd.setdefault("z", fg.ones(1)) is pd["z"]
    with pytest.raises(RuntimeError, match="should not be called"):
        nn.ParameterList()()


# ---------------------------------------------------------------------------
# LazyLinear, BatchNorm3d
# ---------------------------------------------------------------------------


def test_lazy_linear_sizes_itself_at_the_first_call():
    lin = nn.LazyLinear(3)
    assert repr(lin) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert lin.has_uninitialized_params()
    w, b = lin.weight, lin.bias
    opt = fg.optim.SGD(lin.parameters(), lr=0.1)  # built before the first call, still trains
    y = lin(fg.ones(2, 5))
    assert tuple(y.shape) == (2, 3) and type(lin) is nn.Linear
    assert repr(lin) == "Linear(in_features=5, out_features=3, bias=True)"
    assert lin.weight is w and tuple(w.shape) == (3, 5) and tuple(b.shape) == (3,)
    bound = 1 / math.sqrt(5)
    assert np.all(np.abs(npv(w)) <= bound) and np.all(np.abs(npv(b)) <= bound)
    before = npv(w)
    y.sum().backward()
    opt.step()
    np.testing.assert_allclose(npv(w), before - 0.1 * 2.0, atol=1e-6)
    l64 = nn.LazyLinear(2).to(fg.float64)
    assert l64(fg.ones(1, 3, dtype=fg.float64)).dtype == fg.float64 and l64.weight.dtype == fg.float64
    nb = nn.LazyLinear(4, bias=False)
    nb.load_state_dict({"weight": fg.ones(4, 6)})
    assert type(nb) is nn.Linear and nb.in_features == 6 and nb.bias is None
    np.testing.assert_array_equal(npv(nb(fg.ones(1, 6))), 6.0)


def test_batch_norm_3d_normalises_per_channel():
    bn = nn.BatchNorm3d(3, dtype=fg.float64)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    x = t64(2, 3, 2, 3, 4) * 3 + 1
    y = npv(bn(x))
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3, 4)), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=(0, 2, 3, 4)), 1.0, rtol=1e-4)
    xs = npv(x)
    np.testing.assert_allclose(npv(bn.running_mean), 0.1 * xs.mean(axis=(0, 2, 3, 4)), rtol=1e-12)
    bn.eval()
    np.testing.assert_allclose(
        npv(bn(x)),
        (xs - npv(bn.running_mean)[:, None, None, None])
        / np.sqrt(npv(bn.running_var) + 1e-5)[:, None, None, None],
    )
    with pytest.raises(ValueError, match="expected 5D input"):
        bn(t64(2, 3, 4))


# ---------------------------------------------------------------------------
# pooling, activation and dropout modules
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, text",
    [
        (nn.MaxPool1d(3), "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)"),
        (nn.AvgPool1d(3, 1, 1), "AvgPool1d(kernel_size=(3,), stride=(1,), padding=(1,))"),
        (nn.AdaptiveAvgPool1d(4), "AdaptiveAvgPool1d(output_size=4)"),
        (nn.AdaptiveMaxPool2d((3, None), True), "AdaptiveMaxPool2d(output_size=(3, None))"),
        (nn.AdaptiveMaxPool1d(2), "AdaptiveMaxPool1d(output_size=2)"),
        (nn.LPPool2d(2, 3), "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"),
        (nn.LPPool1d(1.5, 2, 1), "LPPool1d(norm_type=1.5, kernel_size=2, stride=1, ceil_mode=False)"),
        (nn.Softshrink(), "Softshrink(0.5)"),
        (nn.Hardshrink(0.3), "Hardshrink(0.3)"),
        (nn.Threshold(0.1, 20), "Threshold(threshold=0.1, value=20)"),
        (nn.Threshold(0.1, 20, True), "Threshold(threshold=0.1, value=20, inplace=True)"),
        (nn.ChannelShuffle(3), "ChannelShuffle(groups=3)"),
        (nn.AlphaDropout(0.2), "AlphaDropout(p=0.2, inplace=False)"),
        (nn.PoissonNLLLoss(), "PoissonNLLLoss()"),
        (nn.GaussianNLLLoss(), "GaussianNLLLoss()"),
        (nn.HingeEmbeddingLoss(), "HingeEmbeddingLoss()"),
        (nn.MultiMarginLoss(), "MultiMarginLoss()"),
        (nn.SoftMarginLoss(), "SoftMarginLoss()"),
    ],
)
def test_reprs_match_pytorch(module, text):
    assert repr(module) == text
    assert list(module.state_dict()) == []


def test_modules_call_their_functionals():
    x3, x4 = t64(2, 3, 8), t64(2, 4, 6, 6)
    pairs = [
        (nn.MaxPool1d(3, 2, 1), x3, lambda x: F.max_pool1d(x, 3, 2, 1)),
        (
            nn.AvgPool1d(3, 2, 1, count_include_pad=False),
            x3,
            lambda x: F.avg_pool1d(x, 3, 2, 1, False, False),
        ),
        (nn.AdaptiveAvgPool1d(3), x3, lambda x: F.adaptive_avg_pool1d(x, 3)),
        (nn.AdaptiveMaxPool2d(4), x4, lambda x: F.adaptive_max_pool2d(x, 4)),
        (nn.LPPool2d(2, 2), x4.abs(), lambda x: F.lp_pool2d(x, 2.0, 2)),
        (nn.Softshrink(0.2), x3, lambda x: F.softshrink(x, 0.2)),
        (nn.Hardshrink(0.2), x3, lambda x: F.hardshrink(x, 0.2)),
        (nn.Threshold(0.1, -1.0), x3, lambda x: F.threshold(x, 0.1, -1.0)),
        (nn.ChannelShuffle(2), x4, lambda x: F.channel_shuffle(x, 2)),
    ]
    for module, x, fn in pairs:
        np.testing.assert_array_equal(npv(module(x)), npv(fn(x)))
    out, idx = nn.MaxPool1d(2, return_indices=True)(x3)
    assert tuple(out.shape) == tuple(idx.shape) == (2, 3, 4) and idx.dtype == fg.int64
    out, idx = nn.AdaptiveMaxPool2d((2, 3), return_indices=True)(x4)
    np.testing.assert_array_equal(
        npv(out),
        npv(x4)
        .reshape(2, 4, -1)[
            np.arange(2)[:, None, None], np.arange(4)[None, :, None], npv(idx).reshape(2, 4, -1).astype(int)
        ]
        .reshape(2, 4, 2, 3),
    )


def test_alpha_dropout_keeps_selu_statistics_and_is_off_in_eval():
    drop = nn.AlphaDropout(0.3)
    x = fg.randn(200000, dtype=fg.float64)
    fg.manual_seed(3)
    y = npv(drop(x))
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.02
    # dropped elements all take one value: a * (-alpha') + b
    a = 1 / math.sqrt((1.7580993408473766**2 * 0.3 + 1) * 0.7)
    dropped = np.isclose(y, -1.7580993408473766 * a + 1.7580993408473766 * a * 0.3)
    assert abs(dropped.mean() - 0.3) < 0.01
    drop.eval()
    assert drop(x) is x
    assert F.alpha_dropout(x, 0.5) is x  # training defaults to False, as in PyTorch
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.AlphaDropout(1.5)


# ---------------------------------------------------------------------------
# loss modules
# ---------------------------------------------------------------------------


def test_loss_modules_forward_their_options():
    x, t = t64(4, 3), t64(4, 3).abs()
    np.testing.assert_array_equal(
        npv(nn.PoissonNLLLoss(log_input=False, full=True, reduction="sum")(x.abs(), t)),
        npv(F.poisson_nll_loss(x.abs(), t, log_input=False, full=True, reduction="sum")),
    )
    var = t64(4, 1).abs() + 0.1
    np.testing.assert_array_equal(
        npv(nn.GaussianNLLLoss(full=True, reduction="none")(x, t, var)),
        npv(F.gaussian_nll_loss(x, t, var, full=True, reduction="none")),
    )
    sign = fg.tensor(np.where(RNG.random((4, 3)) < 0.5, -1.0, 1.0))
    np.testing.assert_array_equal(
        npv(nn.HingeEmbeddingLoss(margin=0.4)(x, sign)), npv(F.hinge_embedding_loss(x, sign, 0.4))
    )
    np.testing.assert_array_equal(npv(nn.SoftMarginLoss()(x, sign)), npv(F.soft_margin_loss(x, sign)))
    w = fg.tensor([1.0, 2.0, 0.5], dtype=fg.float64)
    mm = nn.MultiMarginLoss(p=2, margin=0.5, weight=w)
    assert list(mm.state_dict()) == ["weight"]
    target = fg.tensor([0, 2, 1, 1])
    np.testing.assert_array_equal(npv(mm(x, target)), npv(F.multi_margin_loss(x, target, 2, 0.5, w)))
    assert nn.SoftMarginLoss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        nn.MultiMarginLoss(p=3)


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, err, words",
    [
        (lambda: F.max_pool1d(t64(2, 3, 4, 5), 2), ValueError, "max_pool1d: expected 2-D (C, L) or 3-D"),
        (lambda: F.avg_pool1d(t64(4), 2), ValueError, "avg_pool1d: expected 2-D"),
        (lambda: F.adaptive_max_pool2d(t64(2, 3), 2), ValueError, "adaptive_max_pool2d: expected 3-D"),
        (
            lambda: F.adaptive_max_pool2d(t64(1, 2, 3), (1, 2, 3)),
            ValueError,
            "output_size must be an int or a pair",
        ),
        (lambda: F.softshrink(t64(3), -1.0), ValueError, "lambda must be greater or equal to 0"),
        (lambda: F.channel_shuffle(t64(2, 5, 3), 2), ValueError, "channels 5 must be divisible by groups 2"),
        (lambda: F.pdist(t64(2, 3, 4)), ValueError, "pdist: only supports 2D tensors, got: 3D"),
        (lambda: F.alpha_dropout(t64(3), 1.5, True), ValueError, "alpha_dropout: dropout probability"),
        (
            lambda: F.poisson_nll_loss(t64(3), t64(4)),
            ValueError,
            "target shape (4,) must match input shape (3,)",
        ),
        (
            lambda: F.gaussian_nll_loss(t64(2, 3), t64(2, 3), t64(3, 3).abs()),
            ValueError,
            "var is of incorrect size",
        ),
        (lambda: F.gaussian_nll_loss(t64(2, 3), t64(2, 3), -t64(2, 3).abs()), ValueError, "negative entry"),
        (lambda: F.hinge_embedding_loss(t64(3), t64(4)), ValueError, "must broadcast with input (3,)"),
        (
            lambda: F.multi_margin_loss(t64(2, 3), fg.tensor([0, 3])),
            IndexError,
            "target 3 is out of bounds for 3",
        ),
        (lambda: F.multi_margin_loss(t64(2, 3), fg.tensor([0])), ValueError, "inconsistent target size"),
        (lambda: F.multi_margin_loss(t64(2, 3), t64(2)), TypeError, "target must have an integer dtype"),
        (
            lambda: F.multi_margin_loss(t64(2, 3), fg.tensor([0, 1]), p=3),
            ValueError,
            "only p == 1 and p == 2",
        ),
        (lambda: F.soft_margin_loss(t64(3), t64(3), reduction="avg"), ValueError, "reduction must be"),
        (
            lambda: F.soft_margin_loss(fg.tensor([1, 2]), t64(2)),
            TypeError,
            "input must have a floating point",
        ),
    ],
)
def test_errors_name_the_op_and_shapes(call, err, words):
    with pytest.raises(err) as info:
        call()
    assert words in str(info.value)


def test_composed_layers_compile_to_eager():
    model = nn.Sequential(nn.MaxPool1d(2), nn.Softshrink(0.1), nn.AdaptiveAvgPool1d(3))
    x = fg.randn(2, 3, 8)
    with fg.no_grad():
        np.testing.assert_allclose(npv(fg.compile(model)(x)), npv(model(x)), rtol=1e-6)
