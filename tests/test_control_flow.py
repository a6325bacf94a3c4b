"""``fg.cond`` and ``fg.while_loop``: eager, traced with ``fg.compile`` and in
explicit graphs; the number of iterations and the branch are decided by the
data at each run, never baked in at trace time."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def arr(t):
    return np.asarray(t.detach())


def collatz_steps(n):
    def body(n, k):
        return fg.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1

    return fg.while_loop(lambda n, k: n != 1, body, (n, fg.zeros((), dtype=fg.int64)))[1]


def collatz_reference(n: int) -> int:
    k = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        k += 1
    return k


def test_while_loop_eager_and_compiled_agree_for_many_inputs():
    f = fg.compile(collatz_steps)
    for n in [1, 2, 3, 6, 7, 27, 97]:
        x = fg.tensor(n, dtype=fg.int64)
        assert int(collatz_steps(x).item()) == collatz_reference(n)
        assert int(f(x).item()) == collatz_reference(n)
    # One trace served every input: the trip count is decided when the graph runs.
    assert f.stats.traces == 1
    g = f.graph(fg.tensor(5, dtype=fg.int64))
    assert [n["op"] for n in g.nodes()].count("while_loop") == 1


def test_while_loop_reads_enclosing_values_and_parameters():
    w = fg.tensor([0.5, 2.0])

    @fg.compile
    def grow(x, limit):
        # `limit` (an argument) and `w` (a closure) are read inside the bodies.
        return fg.while_loop(lambda v: v.sum() < limit, lambda v: v * w + 1.0, x)

    x = fg.tensor([1.0, 1.0])
    for limit in [0.0, 5.0, 40.0, 1000.0]:
        lim = fg.tensor(limit)
        expect = x.numpy().copy()
        while expect.sum() < limit:
            expect = expect * np.array([0.5, 2.0], dtype=np.float32) + 1.0
        np.testing.assert_allclose(arr(grow(x, lim)), expect, rtol=1e-6)
    assert grow.stats.traces == 1
    # A closure tensor is read by reference: changing it changes the next run.
    w.copy_(fg.tensor([1.0, 3.0]))
    out = arr(grow(x, fg.tensor(20.0)))
    expect = np.array([1.0, 1.0], dtype=np.float32)
    while expect.sum() < 20.0:
        expect = expect * np.array([1.0, 3.0], dtype=np.float32) + 1.0
    np.testing.assert_allclose(out, expect, rtol=1e-6)


def test_while_loop_zero_iterations_does_not_alias_input():
    f = fg.compile(lambda x: fg.while_loop(lambda v: v.sum() > 100.0, lambda v: v * 2.0, x))
    x = fg.tensor([1.0, 2.0])
    y = f(x)
    y.add_(1.0)
    assert arr(x).tolist() == [1.0, 2.0]
    assert arr(y).tolist() == [2.0, 3.0]


def test_cond_chooses_branch_at_run_time():
    @fg.compile
    def f(x):
        return fg.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v + 10.0, x)

    for data in ([1.0, 2.0], [-3.0, 1.0], [0.0, 0.0]):
        x = fg.tensor(data)
        expect = np.array(data, dtype=np.float32)
        expect = expect * 2 if expect.sum() > 0 else -expect + 10
        np.testing.assert_allclose(arr(f(x)), expect)
        np.testing.assert_allclose(arr(f.fn(x)), expect)  # eager
    assert f.stats.traces == 1
    ops = [n["op"] for n in f.graph(fg.tensor([1.0, 2.0])).nodes()]
    assert "cond" in ops


def test_cond_in_explicit_graph_with_symbolic_batch():
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(None, 3), name="x")
        flag = fg.placeholder(fg.bool, shape=(), name="flag")
        y = fg.cond(flag, lambda v: v.relu(), lambda v: v * v, x)
    sess = fg.Session(g)
    for n in (1, 4):
        data = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_allclose(arr(sess.run(y, feed={x: data, flag: True})), np.maximum(data, 0))
        np.testing.assert_allclose(arr(sess.run(y, feed={x: data, flag: False})), data * data, rtol=1e-6)


def test_cond_gradients_flow_through_the_chosen_branch():
    w = fg.tensor([1.0, -2.0, 3.0], requires_grad=True)

    @fg.compile
    def loss(x):
        return fg.cond(x.sum() > 0, lambda v: (v * w).sum(), lambda v: (v * w * w).sum(), x)

    for data in ([1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]):
        x = fg.tensor(data)
        w.grad = None
        loss(x).backward()
        got = arr(w.grad)
        w.grad = None
        loss.fn(x).backward()
        np.testing.assert_allclose(got, arr(w.grad))


def test_while_loop_refuses_gradients_clearly():
    w = fg.tensor([2.0], requires_grad=True)
    f = fg.compile(lambda x: fg.while_loop(lambda v: v.sum() < 10.0, lambda v: v * w, x))
    with pytest.raises(fg.TraceError, match="gradients cannot flow through a captured while loop"):
        f(fg.tensor([1.0]))
    with fg.no_grad():
        assert arr(f(fg.tensor([1.0]))).tolist() == [16.0]


def test_mismatched_branches_and_bodies_are_refused():
    f = fg.compile(lambda x: fg.cond(x.sum() > 0, lambda v: v, lambda v: v.sum(), x))
    with pytest.raises(ValueError, match=r"fg.cond: the branches must return .*float32\[2\].*float32\[\]"):
        f(fg.tensor([1.0, 2.0]))
    g = fg.compile(lambda x: fg.while_loop(lambda v: v.sum() < 3, lambda v: v.sum(), x))
    with pytest.raises(ValueError, match="body_fn must return the loop variables with unchanged shapes"):
        g(fg.tensor([1.0, 2.0]))
    h = fg.compile(lambda x: fg.while_loop(lambda v: v < 3, lambda v: v + 1, x))
    with pytest.raises(ValueError, match="cond_fn must return one tensor with one element"):
        h(fg.tensor([1.0, 2.0]))


def test_body_may_not_update_outside_tensors_in_place():
    acc = fg.zeros(2)

    def body(v):
        acc.add_(v)
        return v + 1

    f = fg.compile(lambda x: fg.while_loop(lambda v: v.sum() < 5, body, x))
    with pytest.raises(ValueError, match="may not update a tensor from outside it in place"):
        f(fg.tensor([1.0, 1.0]))
    assert arr(acc).tolist() == [0.0, 0.0]
    # The failed trace left nothing behind: a plain compiled call still works.
    assert arr(fg.compile(lambda x: x + 1)(fg.tensor([1.0]))).tolist() == [2.0]


def test_python_bool_of_traced_value_points_to_cond():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(fg.TraceError, match="fg.cond"):
        fg.compile(f)(fg.tensor([1.0]))
