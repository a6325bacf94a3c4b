"""Deferred elementwise results (eager fusion).

Large float elementwise results that record no gradient may be computed when
first read, with chains of them fused into one pass. These tests lower the
threshold to one element so that small tensors take that path, and check
that it is invisible: deferred results equal immediate ones bit for bit, and
no write to an input — by an in-place op, through NumPy, DLPack or
``data_ptr``, from another thread — ever reaches a result made before it.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import ferrograd as fg
import numpy as np
import pytest
from _threads import run_threads
from hypothesis import given
from hypothesis import strategies as st

_core = fg._core


@pytest.fixture
def defer_all():
    """Defer every eligible op, whatever its size, for the test's duration."""
    old = _core._set_defer_min(1)
    fg.synchronize()
    try:
        yield
    finally:
        fg.synchronize()
        _core._set_defer_min(old)


def immediate(fn):
    """``fn()`` with deferral off: the reference result."""
    old = _core._set_defer_min(None)
    try:
        return fn().numpy().copy()
    finally:
        _core._set_defer_min(old)


def queued() -> int:
    return _core._defer_stats()[0]


def inlined() -> int:
    return _core._defer_stats()[1]


def owned(a) -> fg.Tensor:
    """A tensor owning a copy of ``a`` (deferral never reads NumPy's memory)."""
    return fg.tensor(np.asarray(a))


def rng_values(shape, seed, lo=-2.0, hi=2.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(dtype)


UNARY = [
    "neg", "abs", "sign", "square", "reciprocal", "floor", "ceil", "round", "trunc", "exp",
    "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
    "relu", "erf", "silu",
]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum", "atan2"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_then_add_is_deferred_and_exact(defer_all, name, dtype):
    x = owned(rng_values((7, 33), 1, 0.1, 3.0, dtype))
    y = owned(rng_values((7, 33), 2, dtype=dtype))
    f = getattr(fg, name)

    def chain():
        return f(x) + y

    before_q, before_i = queued(), inlined()
    got = chain()
    assert queued() - before_q == 2, "both ops are queued"
    assert inlined() - before_i == 1, "the unary result is inlined into the add"
    np.testing.assert_array_equal(got.numpy(), immediate(chain))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY)
def test_binary_chains_match_immediate_bit_for_bit(defer_all, name, dtype):
    x = owned(rng_values((5, 40), 3, 0.5, 3.0, dtype))
    y = owned(rng_values((5, 40), 4, 0.5, 3.0, dtype))
    z = owned(rng_values((40,), 5, 0.5, 3.0, dtype))  # broadcast
    f = getattr(fg, name)

    def chain():
        return f(f(x, y) * 1.5, z) - 0.25

    before = queued()
    got = chain()
    assert queued() - before == 4
    np.testing.assert_array_equal(got.numpy(), immediate(chain))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_parametrised_unary_ops_keep_their_parameters(defer_all, approximate):
    x = owned(rng_values((1000,), 6, -4, 4))
    F = fg.nn.functional

    def chain():
        return F.softplus(F.leaky_relu(F.gelu(x, approximate=approximate), 0.2) * 2, beta=2.0).clamp(-1.0, 3.0)

    before = queued()
    got = chain()
    assert queued() - before >= 4
    np.testing.assert_array_equal(got.numpy(), immediate(chain))


_OPS = st.sampled_from(["add", "sub", "mul", "div", "maximum", "tanh", "exp", "sigmoid", "scalar", "relu"])


@given(ops=st.lists(st.tuples(_OPS, st.integers(0, 2)), min_size=1, max_size=30),
       shape=st.sampled_from([(0,), (1,), (17,), (4, 9), (3, 1, 5)]),
       dtype=st.sampled_from([np.float32, np.float64]), sliced=st.booleans())
def test_random_chains_match_immediate(ops, shape, dtype, sliced):
    """Random programs over three inputs (sliced, broadcast, zero-size):
    deferred and immediate results are bit-for-bit equal."""
    base = [rng_values((2,) + shape, 10 + i, -1.0, 1.0, dtype) for i in range(3)]
    ins = [owned(b)[1] if sliced else owned(b[1]) for b in base]

    def program():
        acc = ins[0]
        for op, k in ops:
            other = ins[k]
            if op == "scalar":
                acc = 0.5 * acc + 0.125
            elif op in ("tanh", "exp", "sigmoid", "relu"):
                acc = getattr(fg, op)(acc.clamp(-3.0, 3.0))
            else:
                acc = getattr(fg, op)(acc, other + 2.0 if op == "div" else other)
        return acc

    old = _core._set_defer_min(1)
    try:
        got = program().numpy().copy()
    finally:
        fg.synchronize()
        _core._set_defer_min(old)
    np.testing.assert_array_equal(got, immediate(program))


def test_writes_to_an_input_come_after_the_results_made_before(defer_all):
    a = owned(np.arange(8.0, dtype=np.float32))
    b = owned(np.full(8, 2.0, dtype=np.float32))
    before = queued()
    r1 = a * b
    r2 = (a + 1) * b
    assert queued() - before == 3
    a.add_(100.0)             # in-place op on an input
    a[0] = -1.0               # setitem on an input
    b.copy_(fg.zeros(8))      # copy into the other input
    np.testing.assert_array_equal(r1.numpy(), np.arange(8.0) * 2)
    np.testing.assert_array_equal(r2.numpy(), (np.arange(8.0) + 1) * 2)


def test_writes_to_a_pending_result_and_its_views(defer_all):
    a = owned(np.arange(6.0, dtype=np.float32))
    r = a * 2
    r.add_(1)                 # in-place on a pending result: computed first
    v = (a * 3)[::2]          # a strided view of a pending result
    r[1] = 50.0
    np.testing.assert_array_equal(r.numpy(), [1, 50, 5, 7, 9, 11])
    np.testing.assert_array_equal(v.numpy(), [0, 6, 12])


def test_numpy_memory_is_never_read_late(defer_all):
    arr = np.arange(5.0, dtype=np.float32)
    shared = fg.from_numpy(arr)
    before = queued()
    r = shared * 2            # foreign memory: runs at once
    assert queued() == before
    arr[:] = 0
    np.testing.assert_array_equal(r.numpy(), np.arange(5.0) * 2)


@pytest.mark.parametrize("export", ["numpy", "array", "dlpack", "data_ptr"])
def test_exported_memory_is_settled_and_then_never_read_late(defer_all, export):
    t = owned(np.arange(5.0, dtype=np.float32))
    r = t * 2                 # queued, reads t
    if export == "numpy":
        view = t.numpy()
    elif export == "array":
        view = np.asarray(t)
    elif export == "dlpack":
        view = np.from_dlpack(t)
    else:
        import ctypes
        view = np.ctypeslib.as_array((ctypes.c_float * 5).from_address(t.data_ptr()))
    view[:] = -7              # a write the library cannot see
    np.testing.assert_array_equal(r.numpy(), np.arange(5.0) * 2)
    before = queued()
    r2 = t * 3                # t is shared now: runs at once
    assert queued() == before
    view[:] = 1
    np.testing.assert_array_equal(r2.numpy(), np.full(5, -21.0))


def test_autograd_ops_run_at_once_and_can_read_pending_values(defer_all):
    w = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = owned(np.array([4.0, 5.0, 6.0], dtype=np.float32))
    before = queued()
    p = x * 2                 # no grad: queued
    assert queued() == before + 1
    y = (w * p).sum()         # records: reads the pending value
    assert queued() == before + 1
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [8.0, 10.0, 12.0])
    with fg.no_grad():
        q = w * 2             # no_grad: may be deferred
    assert q.tolist() == [2.0, 4.0, 6.0]


def test_printing_and_item_read_final_values(defer_all):
    x = owned(np.array([1.5, -2.0], dtype=np.float32))
    r = fg.tanh(x) * 0 + x
    assert "1.5000" in repr(r) and "-2." in repr(r)
    assert r[0].item() == 1.5
    assert r.tolist() == [1.5, -2.0]


def test_errors_are_raised_when_the_op_is_called(defer_all):
    x = owned(np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5,\)|\[3, 4\].*\[5\]"):
        x + owned(np.ones(5, np.float32))


def test_unread_results_do_not_hold_memory():
    old = _core._set_defer_min(1)
    try:
        fg.synchronize()
        x = owned(rng_values((1 << 16,), 7))
        gc.collect()
        base = fg.memory_stats()["cpu.in_use_bytes"]
        before = queued()
        for _ in range(200):
            y = (x * 2 + 1) * x  # noqa: F841 - dropped unread
        assert queued() - before == 600
        del y
        gc.collect()
        # The queue keeps no program whose result is gone, nor their inputs.
        assert fg.memory_stats()["cpu.in_use_bytes"] - base < (1 << 16) * 4 * 4
    finally:
        fg.synchronize()
        _core._set_defer_min(old)


def test_long_chains_stay_correct_and_bounded(defer_all):
    x = owned(np.full(100, 1.0, np.float64))
    r = x
    for _ in range(500):
        r = r * 1.001 + 0.001
    ref = np.full(100, 1.0)
    for _ in range(500):
        ref = ref * 1.001 + 0.001
    np.testing.assert_array_equal(r.numpy(), ref)


def test_threads_share_the_queue_safely(defer_all):
    base = [owned(rng_values((2048,), 20 + i)) for i in range(4)]
    refs = [immediate(lambda b=b: fg.tanh(b * 1.5) + b) for b in base]

    def worker(i):
        for _ in range(50):
            r = fg.tanh(base[i] * 1.5) + base[i]
            if i % 2:
                base[(i + 1) % 4].add_(0.0)  # writes (of nothing) to another thread's input
            np.testing.assert_array_equal(r.numpy(), refs[i])

    run_threads(worker, 4)


def test_compiled_functions_take_pending_inputs(defer_all):
    x = owned(rng_values((64,), 30))

    @fg.compile
    def f(a):
        return (a * a).sum()

    p = x + 1                 # pending, handed to a compiled graph
    assert abs(f(p).item() - float(((x.numpy() + 1) ** 2).sum())) < 1e-3


def test_large_outputs_defer_by_default():
    """With the default threshold (about a megabyte): big results are
    deferred, small ones not. In a fresh process, as FG_DEFER_MIN may be set here."""
    code = """
import numpy as np, ferrograd as fg
q = lambda: fg._core._defer_stats()[0]
big, small = fg.tensor(np.ones(1 << 20, np.float32)), fg.tensor(np.ones(16, np.float32))
n0 = q(); r_small = small * 2; n1 = q(); r_big = big * 2 + 1; n2 = q()
assert (n1 - n0, n2 - n1) == (0, 2), (n0, n1, n2)
assert r_big[-1].item() == 3.0 and r_small[0].item() == 2.0
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "FG_DEFER_MIN"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_reshaped_views_of_pending_results_are_read_not_inlined(defer_all):
    a = owned(np.arange(12.0, dtype=np.float32))
    row = owned(np.arange(6.0, dtype=np.float32))
    p = a * 2 + 1                       # shape (12,)
    q = a.reshape(2, 6) * row           # broadcast row over (2, 6)
    r = p.reshape(3, 4) + 1             # same bytes, other indexing
    s = q.reshape(6, 2) - 1
    np.testing.assert_array_equal(r.numpy(), (np.arange(12.0) * 2 + 2).reshape(3, 4))
    np.testing.assert_array_equal(s.numpy(), (np.arange(12.0).reshape(2, 6) * np.arange(6.0)).reshape(6, 2) - 1)


def test_a_result_read_twice_is_inlined_once(defer_all):
    x = owned(rng_values((300,), 40, -1, 1))
    t = fg.exp(x)
    before = inlined()
    sq = t * t                          # one copy of exp's program, read twice
    assert inlined() - before == 1
    a = t + 1                           # already inlined once: read, not inlined again
    assert inlined() - before == 1
    e = immediate(lambda: fg.exp(x))   # float32, as the library rounds it
    np.testing.assert_array_equal(sq.numpy(), e * e)
    np.testing.assert_array_equal(a.numpy(), e + 1)


def test_printing_does_not_stop_deferral(defer_all):
    x = owned(rng_values((50,), 41))
    repr(x)
    before = queued()
    y = x * 2
    assert queued() == before + 1
    np.testing.assert_array_equal(y.numpy(), x.numpy() * 2)
