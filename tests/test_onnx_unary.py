"""Every unary op with an ONNX mapping in its definition (``src/kernel/unary.rs``)
exports and runs in onnxruntime with ferrograd's values; the ops without one
raise ``NotImplementedError`` naming the op."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import _core

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed (pip install 'ferrograd[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'ferrograd[onnx]')")

_TABLE = {op["name"]: op for op in _core._unary_ops()}

# How to call each op from Python, with its parameters: one or more calls per op.
_CALLS = {
    "leaky_relu": [lambda x: F.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.01)],
    "elu": [lambda x: F.elu(x, 1.5)],
    "gelu": [lambda x: F.gelu(x)],
    "gelu_tanh": [lambda x: F.gelu(x, approximate="tanh")],
    "softplus": [lambda x: F.softplus(x, beta=2.0, threshold=3.0), lambda x: F.softplus(x)],
    "clamp": [lambda x: x.clamp(-0.5, 0.75), lambda x: x.clamp(min=0.25), lambda x: x.clamp(max=-0.25)],
}


def _calls(name):
    op = _TABLE[name]
    if name in _CALLS:
        return _CALLS[name]
    assert op["method"], f"{name}: no generated method and no call listed here"
    return [lambda x, m=op["method"]: getattr(x, m)()]


def _input(op):
    rng = np.random.default_rng(0)
    if op["dtypes"] == "INT_BOOL":
        return fg.tensor(rng.integers(-5, 5, size=(3, 4)).astype(np.int32))
    x = rng.uniform(-2.5, 2.5, size=(3, 4)).astype(np.float32)
    if op["out"] == "bool":
        x[0, :3] = [np.nan, np.inf, -np.inf]
    if op["name"] in ("log", "log2", "log1p", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.1
    return fg.tensor(x)


@pytest.mark.parametrize("name", sorted(n for n, op in _TABLE.items() if op["onnx"]))
def test_unary_op_exports(name):
    op = _TABLE[name]
    x = _input(op)
    for fn in _calls(name):
        model = fg.onnx.export(fn, (x,))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
        with fg.no_grad():
            want = fn(x).numpy()
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("name", sorted(n for n, op in _TABLE.items() if not op["onnx"]))
def test_unary_op_without_mapping_says_so(name):
    x = _input(_TABLE[name])
    with pytest.raises(NotImplementedError, match=_TABLE[name]["variant"]):
        fg.onnx.export(_calls(name)[0], (x,))
