"""``set_default_dtype`` / ``get_default_dtype``: what takes the default floating dtype,
what keeps its own, and that compiled graphs are keyed on it."""

import ferrograd as fg
import ferrograd.nn as nn
import numpy as np
import pytest


@pytest.fixture
def float64_default():
    prev = fg.get_default_dtype()
    fg.set_default_dtype(fg.float64)
    try:
        yield
    finally:
        fg.set_default_dtype(prev)


def test_default_is_float32_and_restores():
    assert fg.get_default_dtype() == fg.float32
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type, got int64"):
        fg.set_default_dtype(fg.int64)
    assert fg.get_default_dtype() == fg.float32


def test_factories_follow_the_default(float64_default):
    assert fg.get_default_dtype() == fg.float64
    made = {
        "zeros": fg.zeros(2),
        "ones": fg.ones(2),
        "empty": fg.empty(2),
        "full": fg.full((2,), 1.5),
        "rand": fg.rand(2),
        "randn": fg.randn(2),
        "arange": fg.arange(0.0, 2.0),
        "linspace": fg.linspace(0, 1, 3),
        "logspace": fg.logspace(0, 1, 3),
        "eye": fg.eye(2),
        "tensor": fg.tensor([1.5, 2.0]),
        "tensor_empty": fg.tensor([]),
        "float_number_with_int_tensor": fg.tensor([1, 2]) * 1.5,
        "sin_of_int": fg.tensor([1, 2]).sin(),
        "true_divide_ints": fg.tensor([1, 2]) / fg.tensor([2, 2]),
    }
    for name, t in made.items():
        assert t.dtype == fg.float64, name
    # Integer and explicit dtypes are untouched.
    assert fg.arange(3).dtype == fg.int64 and fg.tensor([1]).dtype == fg.int64
    assert fg.zeros(2, dtype=fg.float32).dtype == fg.float32
    assert (fg.ones(2, dtype=fg.float32) * 1.5).dtype == fg.float32
    # 1/3 in float64 keeps its 53-bit value.
    assert fg.tensor([1.0]).div(3.0).item() == 1.0 / 3.0


def test_modules_are_made_in_the_default(float64_default):
    layers = [nn.Linear(3, 2), nn.Conv2d(1, 2, 3), nn.LayerNorm(4), nn.Embedding(5, 2), nn.LSTM(3, 4), nn.PReLU()]
    for layer in layers:
        for name, p in layer.named_parameters():
            assert p.dtype == fg.float64, (type(layer).__name__, name)
    m = nn.Linear(3, 2)
    x = fg.randn(4, 3)
    y = m(x)
    y.sum().backward()
    assert y.dtype == m.weight.grad.dtype == fg.float64
    want = x.numpy() @ m.weight.detach().numpy().T + m.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-14)


def test_compiled_graphs_are_keyed_on_the_default():
    f = fg.compile(lambda x: x + fg.ones(2))
    x = fg.ones(2, dtype=fg.float16)
    assert f(x).dtype == fg.float32  # float16 + float32 ones
    prev = fg.set_default_dtype(fg.float64)
    try:
        assert f(x).dtype == fg.float64  # a new graph: ones() is float64 now
    finally:
        fg.set_default_dtype(fg.float32 if prev is None else prev)
    assert f(x).dtype == fg.float32
