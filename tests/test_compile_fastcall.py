"""The armed fast path of compiled calls: a cached graph that checks nothing
but its arguments' signature and the grad mode runs from one Rust call, and
every call that differs from what it was armed for takes the general path."""

import ferrograd as fg
import numpy as np
import pytest


def _arr(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_fast_path_matches_numpy_and_retraces_on_change():
    f = fg.compile(lambda a, b: a * b + a)
    x, y = _arr((4, 4), 0), _arr((4, 4), 1)
    for _ in range(3):
        out = f(fg.from_numpy(x), fg.from_numpy(y))
        np.testing.assert_allclose(out.numpy(), x.astype(np.float64) * y + x, rtol=1e-6)
    assert f._fast is not None, "a plain tensor function should arm the fast path"
    assert f.stats.traces == 1 and f.stats.calls == 3
    # Another shape, then another dtype: new traces, each result correct.
    x2, y2 = _arr((3, 5), 2), _arr((3, 5), 3)
    np.testing.assert_allclose(f(fg.from_numpy(x2), fg.from_numpy(y2)).numpy(), x2 * y2 + x2, rtol=1e-6)
    x3, y3 = _arr((4, 4), 4, np.float64), _arr((4, 4), 5, np.float64)
    np.testing.assert_allclose(f(fg.from_numpy(x3), fg.from_numpy(y3)).numpy(), x3 * y3 + x3, rtol=1e-12)
    assert f(fg.from_numpy(x3), fg.from_numpy(y3)).dtype == fg.float64
    assert f.stats.traces == 3
    # Back to the first signature: its cached graph, no new trace.
    np.testing.assert_allclose(f(fg.from_numpy(x), fg.from_numpy(y)).numpy(), x * y + x, rtol=1e-6)
    assert f.stats.traces == 3 and f.stats.calls == 7


def test_fast_path_respects_requires_grad_and_grad_mode():
    f = fg.compile(lambda a: (a * a).sum())
    xn = _arr(6, 7)
    f(fg.from_numpy(xn))
    f(fg.from_numpy(xn))
    # requires_grad changes the signature: the graph that records autograd runs.
    x = fg.from_numpy(xn).requires_grad_()
    out = f(x)
    assert out.requires_grad
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xn.astype(np.float64), rtol=1e-6)
    with fg.no_grad():
        out = f(fg.from_numpy(xn).requires_grad_())
    assert not out.requires_grad
    np.testing.assert_allclose(float(out), float((xn.astype(np.float64) ** 2).sum()), rtol=1e-5)


def test_fast_path_multiple_outputs_and_subclass_args():
    f = fg.compile(lambda a, b: {"s": a + b, "d": (a - b, b * 2)})
    x, y = _arr(5, 8), _arr(5, 9)
    for _ in range(2):
        r = f(fg.from_numpy(x), fg.from_numpy(y))
        np.testing.assert_allclose(r["s"].numpy(), x + y, rtol=1e-6)
        np.testing.assert_allclose(r["d"][0].numpy(), x - y, rtol=1e-6)
        np.testing.assert_allclose(r["d"][1].numpy(), y * 2, rtol=1e-6)
    # A Parameter (a Tensor subclass) is never taken for a plain tensor.
    p = fg.nn.Parameter(fg.from_numpy(x))
    r = f(p, fg.from_numpy(y))
    assert r["s"].requires_grad
    np.testing.assert_allclose(r["s"].detach().numpy(), x + y, rtol=1e-6)


def test_fast_path_inlined_when_called_from_a_trace():
    inner = fg.compile(lambda a: a.exp() * 2)
    x = _arr(8, 10)
    inner(fg.from_numpy(x))
    inner(fg.from_numpy(x))  # armed
    outer = fg.compile(lambda a: inner(a) + 1)
    for _ in range(2):
        np.testing.assert_allclose(
            outer(fg.from_numpy(x)).numpy(), np.exp(x.astype(np.float64)) * 2 + 1, rtol=1e-5
        )
    # The inner function ran inline in the outer trace: its ops are in the outer graph.
    kinds = [n["op"] for n in outer.graph(fg.from_numpy(x)).nodes()]
    assert len(kinds) >= 1 and outer.stats.traces == 1


def test_fast_path_errors_and_reset():
    f = fg.compile(lambda a, b: a + b)
    x = fg.from_numpy(_arr(4, 11))
    f(x, x)
    f(x, x)
    with pytest.raises(Exception, match=r"(?i)shape|broadcast|size"):
        f(x, fg.from_numpy(_arr(3, 12)))
    f.reset()
    assert f._fast is None
    np.testing.assert_allclose(f(x, x).numpy(), 2 * x.numpy(), rtol=1e-6)
