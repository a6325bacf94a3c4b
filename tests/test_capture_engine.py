"""Engine-level capture behaviour found while building the TF1 layer and the graph view.

Each test here failed before its fix: eager autograd while a capture is
paused, the fold pass and strided views of constants, ``detach()`` of a
bound tensor, running a finished graph while another capture is open, and
the module path of backward nodes.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from ferrograd import _capture, _core


def test_eager_backward_and_step_while_capture_paused_run_eagerly() -> None:
    """A paused capture (``_capture.suspended()``) records nothing: backward() fills the real
    ``.grad`` and an optimizer step updates the parameter now, and both outlive the capture."""
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = fg.optim.SGD([p], lr=0.5)
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, [2])
        with _capture.suspended():
            assert not _capture.is_capturing() and _capture.current() is None
            (p * p).sum().backward()
            assert p.grad is not None and not p.grad.is_meta
            np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0])
            opt.step()
            np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0])
        assert _capture.is_capturing() and _capture.current() is not None
        y = x * 3
    # Nothing of the eager work is in the graph, and the capture's end did not undo it.
    assert {n["op"] for n in g.nodes()} == {"mul"}
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(fg.Session(g).run(y, feed={x: [1.0, 2.0]}).numpy(), [3.0, 6.0])


def test_paused_after_a_recorded_gradient_sees_and_keeps_the_real_one() -> None:
    """The capture's own gradient update is not what eager code sees while it is paused: that
    reads and accumulates the real ``.grad``, and keeps it when the capture ends."""
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    p.grad = fg.tensor([10.0, 10.0])
    g = fg.Graph()
    with g:
        (p * p).sum().backward()  # recorded: p.grad += 2p when the graph runs
        with _capture.suspended():
            np.testing.assert_array_equal(p.grad.numpy(), [10.0, 10.0])
            (p * 3).sum().backward()
            np.testing.assert_array_equal(p.grad.numpy(), [13.0, 13.0])
        assert p.grad.is_meta  # recording again: the capture's value
    np.testing.assert_array_equal(p.grad.numpy(), [13.0, 13.0])
    g()  # runs the whole graph, its .grad update included
    np.testing.assert_array_equal(p.grad.numpy(), [15.0, 17.0])


def test_backward_while_compile_trace_paused_runs_now_and_once() -> None:
    """Inside a compiled function being traced: a backward under ``_capture.suspended()`` runs
    eagerly, once, at trace time (its gradient is kept); the one after it is recorded and runs
    at every call."""
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    @fg.compile
    def step(x):
        with _capture.suspended():
            (p * 2).sum().backward()
            seen.append(p.grad.numpy().tolist())  # a real gradient, now
        (p * p * x).sum().backward()

    x = fg.ones(2)
    step(x)  # eager 2, then the graph adds 2p
    assert seen == [[2.0, 2.0]]
    np.testing.assert_array_equal(p.grad.numpy(), [4.0, 6.0])
    step(x)  # the graph only
    np.testing.assert_array_equal(p.grad.numpy(), [6.0, 10.0])


# ----------------------------------------------------------------------------- fold: strided views


def test_fold_keeps_strided_views_of_a_constant() -> None:
    """A column and a transpose of a graph constant, fetched as results, keep their values and
    eager layouts after the fold pass (it used to copy them dense and fail the verifier)."""
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    real = _core.tensor(base)
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, [3])
        c = _core._trace_constant(real)
        col = c[:, 1]
        ct = c.t()
        y = x * c[1] + ct.sum(1)  # computed from views of the constant: folds
    col_v, ct_v, y_v = fg.Session(g).run([col, ct, y], feed={x: [1.0, 1.0, 1.0]})
    np.testing.assert_array_equal(col_v.numpy(), base[:, 1])
    np.testing.assert_array_equal(ct_v.numpy(), base.T)
    np.testing.assert_array_equal(y_v.numpy(), base[1] + base.T.sum(1))
    e = fg.tensor(base)
    assert tuple(col_v.stride()) == tuple(e[:, 1].stride())
    assert tuple(ct_v.stride()) == tuple(e.t().stride())


# ----------------------------------------------------------------------------- detach of a bound tensor


def test_detach_of_a_parameter_inside_a_capture_stops_its_gradient() -> None:
    """``p.detach()`` is found by its memory, like ``p``; it must still carry no gradient,
    whichever of the two the trace meets first."""
    p = fg.tensor([1.0, 2.0], requires_grad=True)

    @fg.compile
    def after(x):
        (p * p.detach() * x).sum().backward()  # p met first

    @fg.compile
    def before(x):
        d = p.detach() * 3  # the detached alias met first
        (d * p * x).sum().backward()

    x = fg.ones(2)
    after(x)
    np.testing.assert_array_equal(p.grad.numpy(), [1.0, 2.0])  # d(p * c)/dp = c = p
    p.grad = None
    before(x)
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 6.0])  # 3p, not zero


def test_tf1_stop_gradient_of_a_variable() -> None:
    import ferrograd.compat.v1 as tf

    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0])
        loss = tf.reduce_sum(tf.stop_gradient(w) * w * w)
        (gw,) = tf.gradients(loss, [w])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_allclose(sess.run(gw), [2.0, 8.0])  # 2 * w * stop(w)


# ----------------------------------------------------------------------------- graphs inside a capture


def _finished_graph() -> tuple[fg.Graph, fg.Tensor, fg.Tensor]:
    g = fg.Graph()
    with g:
        p = fg.placeholder(fg.float32, [2])
        q = p * 2
    return g, p, q


def test_session_run_inside_an_open_capture_runs_now() -> None:
    g1, p, q = _finished_graph()
    s1 = fg.Session(g1)
    g2 = fg.Graph()
    with g2:
        x = fg.placeholder(fg.float32, [2])
        r = s1.run(q, feed={p: [1.0, 2.0]})
        assert not r.is_meta
        np.testing.assert_array_equal(r.numpy(), [2.0, 4.0])
        try:
            s1.run(q, feed={p: x})
        except ValueError as e:
            assert "being captured" in str(e)
        else:
            raise AssertionError("feeding a captured tensor must fail")
        y = x + 1
    assert [n["op"] for n in g2.nodes()] == ["add"]  # nothing of the run was recorded
    np.testing.assert_array_equal(fg.Session(g2).run(y, feed={x: [1.0, 2.0]}).numpy(), [2.0, 3.0])


def test_compiled_function_inside_a_capture_recorded_or_run() -> None:
    """Recording: a compiled function's ops are recorded into the open graph. Paused: it runs
    as compiled (its first call captures its own graph above the paused one)."""
    calls = []

    @fg.compile
    def f(a):
        calls.append(1)
        return a * 3

    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, [2])
        with _capture.suspended():
            r = f(fg.ones(2))
            np.testing.assert_array_equal(r.numpy(), [3.0, 3.0])
            r = f(fg.ones(2))  # the compiled graph, not a second trace
            assert len(calls) == 1 and f.stats.calls == 2
        assert _capture.is_capturing()
        y = f(x)  # inlined: recorded here
    assert [n["op"] for n in g.nodes()] == ["mul"]
    np.testing.assert_array_equal(fg.Session(g).run(y, feed={x: [1.0, 2.0]}).numpy(), [3.0, 6.0])


def test_tf1_session_run_inside_an_open_capture() -> None:
    import ferrograd.compat.v1 as tf

    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [2])
        b = a * 2
        with tf.Session() as sess:
            g = fg.Graph()
            with g:
                x = fg.placeholder(fg.float32, [2])
                np.testing.assert_array_equal(sess.run(b, {a: [1.0, 2.0]}), [2.0, 4.0])
                y = x - 1
            assert [n["op"] for n in g.nodes()] == ["sub"]
            np.testing.assert_array_equal(fg.Session(g).run(y, feed={x: [1.0, 2.0]}).numpy(), [0.0, 1.0])


# ----------------------------------------------------------------------------- backward nodes' modules


class _MLP(fg.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = fg.nn.Linear(4, 8)
        self.fc2 = fg.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def test_backward_nodes_carry_the_module_of_their_forward_node() -> None:
    import json
    import re

    fg.manual_seed(0)
    model = _MLP()
    opt = fg.optim.SGD(model.parameters(), lr=0.1)

    @fg.compile
    def step(x):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    x = fg.randn(5, 4)
    step(x)
    g = step.graph(x)
    where = [_capture.split_location(n["loc"]) + (n["op"],) for n in g.nodes()]
    bwd = {(m, op) for _, m, r, op in where if r == "backward"}
    # The matmuls of each layer's gradient sit under that layer.
    assert {m for m, op in bwd if op in ("mm", "matmul", "addmm", "linear")} >= {"fc1", "fc2"}, bwd
    # Every module's backward lies under a module its forward used.
    fwd_modules = {m for _, m, r, _ in where if r == "forward"}
    assert {m for m, _ in bwd} <= fwd_modules | {""}, (bwd, fwd_modules)
    # A backward node keeps its forward node's source line (this file, the model's forward).
    assert all(src and "test_capture_engine.py:" in src for src, _, r, _ in where if r == "backward")
    text = g.dump()
    assert "# backward: fc1 (Linear)" in text and "# backward: fc2 (Linear)" in text, text
    page = g.to_html(title="mlp")
    data = json.loads(re.search(r'id="graph-data" type="application/json">(.*?)</script>', page).group(1))
    groups = {gr["id"] for gr in data["groups"]}
    assert {"backward/fc1", "backward/fc2"} <= groups, groups
