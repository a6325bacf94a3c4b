"""ONNX export of what example models write: in-place activations and residual adds,
``x[:, [-1], :]``, ``scatter_add`` (transposed convolutions), ``cross_entropy``, and
recurrent states passed as ``(h, c)`` tuples. Each exported model runs in
onnxruntime and matches ferrograd's eager result."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed (pip install 'ferrograd[onnx]')")
ort = pytest.importorskip(
    "onnxruntime", reason="onnxruntime is not installed (pip install 'ferrograd[onnx]')"
)


def _flat(args):
    out = []
    for a in args:
        out += _flat(a) if isinstance(a, (tuple, list)) else [a]
    return out


def check(fn, *inputs, rtol=1e-5, atol=1e-6):
    model = fg.onnx.export(fn, tuple(inputs))
    with fg.no_grad():
        want = fn(*inputs)
    want = _flat(want if isinstance(want, (tuple, list)) else [want])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, {n: np.asarray(x) for n, x in zip(names, _flat(inputs), strict=True)})
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=atol)
    return model


def _ops(model) -> list[str]:
    return [n.op_type for n in model.graph.node]


def test_inplace_updates_of_computed_values_export_as_pure_ops():
    """``nn.ReLU(inplace=True)``, ``LeakyReLU(inplace=True)`` (clone, op, copy back),
    ``out += identity``, ``x.mul_(2)``, ``clamp_`` on values the graph computed."""
    fg.manual_seed(0)
    lin1, lin2 = nn.Linear(4, 4), nn.Linear(4, 4)
    relu, leaky = nn.ReLU(inplace=True), nn.LeakyReLU(0.2, inplace=True)

    def f(x):
        identity = lin1(x)
        out = relu(lin2(x))
        before = out * 1.0  # read before the next update: keeps the old value
        out += identity
        out.mul_(2).clamp_(min=-0.5)
        return leaky(out - 1.0), before

    x = fg.randn(3, 4)
    model = check(f, x)
    assert (
        "Relu" in _ops(model) and "LeakyRelu" in _ops(model) and "Clip" in _ops(model) or "Max" in _ops(model)
    )


def test_inplace_updates_that_onnx_cannot_express_still_raise():
    """Updates of an input, of a view, or of a value a view aliases change state outside the graph."""
    with pytest.raises(NotImplementedError, match="in place"):
        fg.onnx.export(lambda x: x.relu_(), fg.randn(3))

    def through_view(x):
        y = x * 2
        y[0].zero_()
        return y

    with pytest.raises(NotImplementedError, match="in place"):
        fg.onnx.export(through_view, fg.randn(3, 2))

    def aliased(x):
        y = x * 2
        v = y.view(-1)
        y.relu_()
        return v

    with pytest.raises(NotImplementedError, match="in place"):
        fg.onnx.export(aliased, fg.randn(3, 2))


def test_index_with_one_integer_tensor():
    """nanoGPT's ``x[:, [-1], :]``, ``x[idx]``, ``x[..., idx]`` and a slice beside the tensor."""
    x = fg.randn(2, 5, 3)
    idx = fg.tensor([4, 0, 2])
    check(lambda t: t[:, [-1], :], x)
    check(lambda t, i: t[i], fg.randn(6, 3), idx)
    check(lambda t, i: t[..., i], x, fg.tensor([2, -1]))
    check(lambda t, i: t[1:, i, ::2], x, fg.tensor([[0, 1], [3, 3]]))
    with pytest.raises(NotImplementedError, match="one integer index tensor"):
        fg.onnx.export(lambda t, i: t[0, i], (x, idx))
    with pytest.raises(NotImplementedError, match="one integer index tensor"):
        fg.onnx.export(lambda t, i, j: t[i, j], (x, fg.tensor([0, 1]), fg.tensor([1, 1])))


def test_scatter_add_and_transposed_convolution():
    src = fg.randn(3, 5)
    index = fg.tensor([[0, 2, 1, 0], [1, 1, 0, 2]])  # smaller than src: only that part is read
    check(lambda s, i: fg.zeros(3, 5).scatter_add(0, i, s), src, index)
    fg.manual_seed(1)
    up = nn.Sequential(nn.ConvTranspose2d(4, 3, 4, 2, 1, bias=False), nn.BatchNorm2d(3), nn.ReLU(True)).eval()
    check(up, fg.randn(2, 4, 3, 3))


def test_scatter_reduce_sum_and_prod():
    src = fg.randn(3, 5)
    index = fg.tensor([[0, 2, 1, 0], [1, 1, 0, 2]])
    base = fg.randn(3, 5)
    check(lambda s, i: base.scatter_reduce(0, i, s, "sum"), src, index)
    check(lambda s, i: base.scatter_reduce(1, i, s, "prod"), src, index)
    with pytest.raises(NotImplementedError, match="scatter_reduce with reduce='amax'"):
        fg.onnx.export(lambda s, i: base.scatter_reduce(0, i, s, "amax"), (src, index))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction):
    logits = fg.randn(6, 5)
    target = fg.tensor([0, 4, -1, 2, 2, 1])
    weight = fg.rand(5) + 0.5
    check(lambda x, t: F.cross_entropy(x, t, ignore_index=-1, reduction=reduction), logits, target)
    check(
        lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=-1, reduction=reduction),
        logits,
        target,
        weight,
    )
    check(
        lambda x, t: F.cross_entropy(x, t, reduction=reduction),
        fg.randn(2, 5, 3),
        fg.tensor([[0, 4, 1], [2, 3, 3]]),
    )


def test_cross_entropy_forms_without_onnx_translation_raise():
    """Label smoothing has no ONNX form and raises; probability targets export (as their composition)."""
    logits = fg.randn(4, 3)
    with pytest.raises(NotImplementedError, match="label_smoothing"):
        fg.onnx.export(
            lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), (logits, fg.tensor([0, 1, 2, 0]))
        )
    check(lambda x, t: F.cross_entropy(x, t), logits, fg.softmax(fg.randn(4, 3), dim=1))


def test_lstm_state_tuple_inputs():
    """The word-language model's ``model(input, (h, c))``: one graph input per state tensor."""
    fg.manual_seed(2)
    lstm = nn.LSTM(3, 4, 2).eval()
    x = fg.randn(5, 2, 3)
    hidden = (fg.zeros(2, 2, 4), fg.zeros(2, 2, 4))
    model = check(lambda inp, h: lstm(inp, h), x, hidden)
    assert [i.name for i in model.graph.input] == ["input0", "input1", "input2"]
