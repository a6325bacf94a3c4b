"""Static (TensorFlow 1.x-style) graphs keep state as TF1 does.

A ``Variable`` made inside a graph from a value the graph computes is
initialized once — by its initializer, by ``global_variables_initializer``,
or on the first run that reads it — and then keeps its value across runs
until assigned. Placeholders declared without a shape take any shape, and a
run that fetches only update ops works.
"""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


def _digits():
    datasets = pytest.importorskip(
        "sklearn.datasets", reason="sklearn is not installed (pip install -e '.[demo]' for the digits data)"
    )
    load_digits = datasets.load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    return x, y


def _static_softmax_regression(x, y, steps, lr):
    g = fg.Graph()
    with g:
        X = fg.placeholder(fg.float32, [None, 64])
        Y = fg.placeholder(fg.int64, [None])
        W = fg.Variable(fg.zeros(64, 10))
        b = fg.Variable(fg.zeros(10))
        logits = X @ W + b
        loss = F.cross_entropy(logits, Y)
        gW, gb = fg.gradients(loss, [W, b])
        train = [W.assign_sub(lr * gW), b.assign_sub(lr * gb)]
    sess = fg.Session(g)
    losses = []
    for _ in range(steps):
        _, _, value = sess.run(train + [loss], feed_dict={X: x, Y: y})
        losses.append(value.item())
    pred = sess.run(logits, feed_dict={X: x}).numpy().argmax(1)
    return losses, pred, W.detach().numpy().copy()


def _eager_softmax_regression(x, y, steps, lr):
    W = fg.zeros(64, 10, requires_grad=True)
    b = fg.zeros(10, requires_grad=True)
    X, Y = fg.tensor(x), fg.tensor(y)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(X @ W + b, Y)
        gW, gb = fg.autograd.grad(loss, [W, b])
        with fg.no_grad():
            W.sub_(lr * gW)
            b.sub_(lr * gb)
        losses.append(loss.item())
    with fg.no_grad():
        pred = (X @ W + b).numpy().argmax(1)
    return losses, pred, W.detach().numpy().copy()


def test_static_loop_trains_digits_as_eager():
    """The canonical TF1 loop (variables from in-graph zeros, no initializer call) trains like eager."""
    x, y = _digits()
    steps, lr = 200, 0.5
    s_losses, s_pred, s_W = _static_softmax_regression(x, y, steps, lr)
    e_losses, e_pred, e_W = _eager_softmax_regression(x, y, steps, lr)
    assert s_losses[0] == pytest.approx(np.log(10), rel=1e-6)
    assert s_losses[-1] < 0.25 * s_losses[0], f"static graph did not train: {s_losses[0]} -> {s_losses[-1]}"
    np.testing.assert_allclose(s_losses, e_losses, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(s_W, e_W, rtol=1e-3, atol=1e-5)
    s_acc, e_acc = (s_pred == y).mean(), (e_pred == y).mean()
    assert s_acc > 0.95
    assert abs(s_acc - e_acc) <= 2 / len(y), (s_acc, e_acc)


def test_variable_initialized_once_and_persists():
    g = fg.Graph()
    with g:
        v = fg.Variable(fg.randn(3, 4) * 0.1, name="v")
        bump = v.assign_add(fg.ones(3, 4))
        total = v.sum()
    sess = fg.Session(g)
    first = sess.run(v).numpy()
    assert np.abs(first).max() > 0  # drawn, not zeros
    np.testing.assert_array_equal(sess.run(v).numpy(), first)  # not drawn again
    sess.run(bump)
    sess.run(bump)
    np.testing.assert_allclose(sess.run(v).numpy(), first + 2, rtol=1e-6)
    assert sess.run(total).item() == pytest.approx(float((first + 2).sum()), rel=1e-5)
    # A second session of the same graph sees the same state (the variable is one tensor).
    np.testing.assert_allclose(fg.Session(g).run(v).numpy(), first + 2, rtol=1e-6)


def test_initializers_reset():
    g = fg.Graph()
    with g:
        a = fg.Variable(fg.full((2,), 3.0), name="a")
        b = fg.Variable(np.array([1.0, 2.0], np.float32), name="b")
        inc = [a.assign_add(fg.ones(2)), b.assign_add(fg.ones(2))]
        init = fg.global_variables_initializer()
        init_a = fg.variables_initializer([a])
    sess = fg.Session(g)
    assert sess.run(init) is None
    sess.run(inc)
    np.testing.assert_array_equal(sess.run(a).numpy(), [4.0, 4.0])
    np.testing.assert_array_equal(sess.run(b).numpy(), [2.0, 3.0])
    sess.run(init_a)
    np.testing.assert_array_equal(sess.run(a).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(sess.run(b).numpy(), [2.0, 3.0])
    sess.run([inc, a.initializer])  # an initializer among the fetches runs before the rest
    np.testing.assert_array_equal(sess.run(a).numpy(), [4.0, 4.0])
    sess.run(init)
    np.testing.assert_array_equal(sess.run(a).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(sess.run(b).numpy(), [1.0, 2.0])


def test_variable_from_another_variable():
    g = fg.Graph()
    with g:
        v1 = fg.Variable(fg.full((3,), 2.0))
        v2 = fg.Variable(v1.initialized_value() * 5)
        out = v1 + v2
    np.testing.assert_array_equal(fg.Session(g).run(out).numpy(), [12.0, 12.0, 12.0])


def test_variable_needing_a_placeholder():
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, [3])
        v = fg.Variable(x * 2)
        y = v + 1
    sess = fg.Session(g)
    with pytest.raises(ValueError, match="could not initialize"):
        sess.run(y)
    np.testing.assert_array_equal(sess.run(y, feed_dict={x: [1.0, 2.0, 3.0]}).numpy(), [3.0, 5.0, 7.0])
    # Initialized once: a new feed does not re-initialize it.
    np.testing.assert_array_equal(sess.run(y, feed_dict={x: [0.0, 0.0, 0.0]}).numpy(), [3.0, 5.0, 7.0])


def test_variable_initial_value_with_unknown_dim_is_refused():
    g = fg.Graph()
    with pytest.raises(ValueError, match="fixed shape"):
        with g:
            x = fg.placeholder(fg.float32, [None, 3])
            fg.Variable(fg.zeros_like(x))


def test_fetching_only_update_ops():
    x, y = _digits()
    g = fg.Graph()
    with g:
        X = fg.placeholder(fg.float32, [None, 64])
        Y = fg.placeholder(fg.int64, [None])
        W = fg.Variable(fg.zeros(64, 10))
        loss = F.cross_entropy(X @ W, Y)
        (gW,) = fg.gradients(loss, [W])
        train = W.assign_sub(0.5 * gW)
    sess = fg.Session(g)
    assert sess.run(train, feed_dict={X: x[:100], Y: y[:100]}) is None
    assert np.abs(W.detach().numpy()).max() > 0
    before = sess.run(loss, feed_dict={X: x[:100], Y: y[:100]}).item()
    for _ in range(5):
        sess.run(train, feed_dict={X: x[:100], Y: y[:100]})
    assert sess.run(loss, feed_dict={X: x[:100], Y: y[:100]}).item() < before


def test_unshaped_placeholders_take_any_shape():
    g = fg.Graph()
    with g:
        a = fg.placeholder(fg.float32)
        b = fg.placeholder(fg.float32)
        adder = a + b
        scaled = (adder * 3).sum()
    sess = fg.Session(g)
    assert sess.run(adder, {a: 3, b: 4.5}).item() == 7.5
    np.testing.assert_array_equal(sess.run(adder, {a: [1, 3], b: [2, 4]}).numpy(), [3.0, 7.0])
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(sess.run(adder, {a: m, b: 1.0}).numpy(), m + 1)
    assert sess.run(scaled, {a: m, b: m}).item() == pytest.approx(6 * m.sum())
    with pytest.raises(ValueError, match="broadcast|shape"):
        sess.run(adder, {a: [1.0, 2.0], b: [1.0, 2.0, 3.0]})


def test_unshaped_learning_rate_placeholder():
    x, y = _digits()
    g = fg.Graph()
    with g:
        X = fg.placeholder(fg.float32, [None, 64])
        Y = fg.placeholder(fg.int64, [None])
        lr = fg.placeholder(fg.float32, name="lr")
        W = fg.Variable(fg.zeros(64, 10))
        loss = F.cross_entropy(X @ W, Y)
        (gW,) = fg.gradients(loss, [W])
        train = W.assign_sub(lr * gW)
    sess = fg.Session(g)
    feed = {X: x[:200], Y: y[:200]}
    l0 = sess.run(loss, feed).item()
    sess.run(train, {**feed, lr: 0.0})
    assert sess.run(loss, feed).item() == l0
    sess.run(train, {**feed, lr: 0.5})
    assert sess.run(loss, feed).item() < l0
    with pytest.raises(ValueError, match="lr"):
        sess.run(train, feed)  # the learning rate must be fed


def test_gradients_with_respect_to_unshaped_placeholders():
    g = fg.Graph()
    with g:
        a = fg.placeholder(fg.float32, name="a")
        b = fg.placeholder(fg.float32, name="b")
        c = a * b
        da, db = fg.gradients(c, [a, b])
    sess = fg.Session(g)
    ga, gb = sess.run([da, db], {a: 15.0, b: 20.0})
    assert (ga.item(), gb.item()) == (20.0, 15.0)
    ga, gb = sess.run([da, db], {a: [1.0, 2.0], b: [3.0, 4.0]})
    np.testing.assert_array_equal(ga.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gb.numpy(), [1.0, 2.0])
    # b's gradient must sum over a's elements: the recorded graph has no such sum.
    with pytest.raises(ValueError, match="declare the placeholder's shape"):
        sess.run(db, {a: [1.0, 2.0], b: 3.0})


def test_gradient_reshaped_by_an_unshaped_feed_is_refused():
    g = fg.Graph()
    with g:
        s = fg.placeholder(fg.float32, name="s")
        w = fg.Variable(np.ones(3, np.float32))
        (gw,) = fg.gradients((w * s).sum(), [w])
    sess = fg.Session(g)
    np.testing.assert_array_equal(sess.run(gw, {s: 2.0}).numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(sess.run(gw, {s: [1.0, 2.0, 3.0]}).numpy(), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="gradient"):
        sess.run(gw, {s: np.ones((4, 3), np.float32)})


def test_variable_from_a_tensor_the_graph_reads_aliases_it():
    """A real tensor the graph already reads (a module's parameter) stays that tensor."""
    lin = fg.nn.Linear(3, 2)
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, [None, 3])
        y = lin(x).sum()
        (gw,) = fg.gradients(y, [lin.weight])
        w = fg.Variable(lin.weight)
        step = w.assign_sub(gw)
    assert w._shares_storage(lin.weight)
    before = lin.weight.detach().numpy().copy()
    fg.Session(g).run(step, {x: np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(lin.weight.detach().numpy(), before - 2.0, rtol=1e-6)
