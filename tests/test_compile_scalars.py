"""Symbolic scalar inputs of compiled functions (``fg.compile(scalars=...)``).

A Python number passed as an argument is part of the cache key: a new value
retraces. Declared in ``scalars`` (by name or position), it is an input of the
graph instead: new values run the same graph, with the results eager code
gives for the number itself.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _x(dtype=np.float32, seed=0):
    return fg.tensor(np.random.default_rng(seed).standard_normal((4, 3)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_declared_float_runs_one_graph_and_matches_eager(dtype):
    def f(x, lr, n):
        return (x * lr + lr) / n - x.sum() * lr

    cf = fg.compile(f, scalars=["lr", "n"])
    x = _x(dtype)
    for lr, n in [(0.1, 3), (0.2, 3), (1e-3, 7), (2.5, -4)]:
        got = cf(x, lr, n)
        want = f(x, lr, n)
        assert got.dtype == want.dtype == x.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert cf.stats.traces == 1


def test_undeclared_numbers_retrace_per_value():
    cf = fg.compile(lambda x, lr: x * lr)
    x = _x()
    for lr in (0.1, 0.2, 0.3):
        np.testing.assert_array_equal(cf(x, lr).numpy(), (x * lr).numpy())
    assert cf.stats.traces == 3


def test_declared_by_position_and_keyword():
    def f(x, a, b=2.0):
        return x * a + b

    cf = fg.compile(f, scalars=[1, "b"])
    x = _x(seed=1)
    for a, b in [(1.5, 2.0), (-3.0, 0.25), (7.0, 9.0)]:
        np.testing.assert_array_equal(cf(x, a, b=b).numpy(), f(x, a, b=b).numpy())
    assert cf.stats.traces == 1


def test_int_and_bool_scalars_keep_integer_dtypes():
    def f(i, k, flag):
        return i * k + k, fg.where(i > 0, flag, False)

    cf = fg.compile(f, scalars=("k", "flag"))
    i = fg.tensor(np.array([1, -2, 3], dtype=np.int32))
    for k, flag in [(2, True), (-5, False), (11, True)]:
        (a, b), (c, d) = cf(i, k, flag), f(i, k, flag)
        assert a.dtype == c.dtype == fg.int32 and b.dtype == d.dtype == fg.bool
        np.testing.assert_array_equal(a.numpy(), c.numpy())
        np.testing.assert_array_equal(b.numpy(), d.numpy())
    assert cf.stats.traces == 1


def test_a_symbolic_scalar_cannot_steer_python_control_flow():
    def f(x, n):
        for _ in range(n):  # needs the value in Python
            x = x * 2
        return x

    cf = fg.compile(f, scalars=["n"])
    with pytest.raises(Exception, match="fg.cond"):
        cf(_x(), 3)
    # Undeclared, the loop unrolls per value.
    np.testing.assert_array_equal(fg.compile(f)(_x(), 3).numpy(), f(_x(), 3).numpy())


def test_declared_scalar_in_a_training_step():
    fg.manual_seed(0)
    lin = fg.nn.Linear(3, 2).double()
    x = fg.tensor(np.random.default_rng(2).standard_normal((5, 3)))

    def step(x, scale):
        lin.zero_grad()
        loss = (lin(x) * scale).pow(2).mean()
        loss.backward()
        with fg.no_grad():
            for p in lin.parameters():
                p -= 0.1 * p.grad
        return loss

    eager = [p.numpy().copy() for p in lin.parameters()]
    cf = fg.compile(step, scalars=["scale"])
    losses = [float(cf(x, s).item()) for s in (1.0, 0.5, 2.0)]
    assert cf.stats.traces == 1
    # The same steps eagerly, from the same start.
    with fg.no_grad():
        for p, e in zip(lin.parameters(), eager, strict=True):
            p.copy_(fg.tensor(e))
    want = [float(step(x, s).item()) for s in (1.0, 0.5, 2.0)]
    np.testing.assert_allclose(losses, want, rtol=1e-12)


def test_unknown_scalar_names_are_refused():
    with pytest.raises(ValueError, match="no argument 'lr'"):
        fg.compile(lambda x, rate: x * rate, scalars=["lr"])
    with pytest.raises(TypeError, match="by name or position"):
        fg.compile(lambda x, rate: x * rate, scalars=[1.5])


def test_dynamic_indices_count_the_tensors_passed():
    cf = fg.compile(lambda x, s, y: x * s + y, dynamic={0: [0], 1: [0]}, scalars=("s",))
    for n, s in [(3, 2.0), (5, -1.5), (7, 0.25)]:
        x, y = fg.ones(n), fg.arange(n, dtype=fg.float32)
        np.testing.assert_array_equal(cf(x, s, y).numpy(), (x * s + y).numpy())
    assert cf.stats.traces == 1  # dim 0 of x and y (tensors 0 and 1) is symbolic, s an input


def test_keyword_only_forward_argument_of_a_module():
    class Scale(fg.nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    m = Scale()
    cf = fg.compile(m, scalars=("scale",))
    x = _x(np.float64)
    for s in (0.5, 3.0, -2.0):
        np.testing.assert_array_equal(cf(x, scale=s).numpy(), (x * s).numpy())
    assert cf.stats.traces == 1


@pytest.mark.skipif(not fg.gpu.is_available(), reason="no WebGPU adapter: GPU scalars are float32")
def test_float_scalars_on_the_gpu_are_float32():
    cf = fg.compile(lambda x, s: x * s + s, scalars=("s",))
    x = fg.tensor(np.linspace(-1, 1, 6, dtype=np.float32), device="gpu")
    for s in (0.1, 2.5):
        got = cf(x, s)
        assert got.device.type == "gpu" and got.dtype == fg.float32
        np.testing.assert_array_equal(got.numpy(), (x * s + s).numpy())
    assert cf.stats.traces == 1
