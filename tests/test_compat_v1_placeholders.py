"""Placeholders with many unknown dims (``[None, None, None]``), built and run with real feeds.

While a graph is captured each unknown dim stands as a prime near 2**23, so three of them
overflow 64 bits; such a placeholder is recorded at the shape fed at each run instead. The
references are NumPy float64.
"""

from __future__ import annotations

import ferrograd as fg
import ferrograd.compat.v1 as tf
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def test_three_unknown_dims_build_and_run_at_several_shapes():
    x = tf.placeholder(tf.float32, [None, None, None])
    total = tf.reduce_sum(x * 2.0, axis=1)
    mean = tf.reduce_mean(tf.nn.relu(x - 0.5), axis=[1, 2])
    assert x.shape.as_list() == [None, None, None]
    assert total.shape.as_list() == [None, None] and mean.shape.as_list() == [None]
    rng = np.random.default_rng(0)
    with tf.Session() as sess:
        for shape in [(2, 3, 4), (5, 1, 7), (1, 6, 2)]:
            a = rng.standard_normal(shape).astype(np.float32)
            got_total, got_mean = sess.run([total, mean], feed_dict={x: a})
            a64 = a.astype(np.float64)
            np.testing.assert_allclose(got_total, 2 * a64.sum(1), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got_mean, np.maximum(a64 - 0.5, 0).mean((1, 2)), rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2, 3\).*\[\?,\?,\?\]"):
            sess.run(total, feed_dict={x: np.ones((2, 3), np.float32)})


def test_four_unknown_dims_with_reshape_transpose_and_a_gradient_step():
    x = tf.placeholder(tf.float32, [None, None, None, None], name="images")
    v = tf.Variable(1.5)
    flat = tf.reshape(x, [-1])
    nchw = tf.transpose(x, [0, 3, 1, 2])
    loss = tf.reduce_mean(tf.square(x * v - 1.0))
    (grad,) = tf.gradients(loss, [v])
    step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    assert flat.shape.as_list() == [None] and nchw.shape.as_list() == [None, None, None, None]
    a = np.random.default_rng(1).random((2, 4, 5, 3)).astype(np.float32)
    a64 = a.astype(np.float64)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_flat, got_nchw, got_grad = sess.run([flat, nchw, grad], feed_dict={x: a})
        np.testing.assert_array_equal(got_flat, a.ravel())
        np.testing.assert_array_equal(got_nchw, a.transpose(0, 3, 1, 2))
        want = (2 * (a64 * 1.5 - 1) * a64).mean()
        np.testing.assert_allclose(got_grad, want, rtol=1e-5)
        sess.run(step, feed_dict={x: a})
        np.testing.assert_allclose(sess.run(v), 1.5 - 0.5 * want, rtol=1e-5)
        b = np.ones((1, 2, 2, 3), np.float32)  # another shape: recorded again
        np.testing.assert_allclose(
            sess.run(loss, feed_dict={x: b}), np.mean((sess.run(v) - 1.0) ** 2), rtol=1e-5
        )


def test_placeholder_with_too_many_unknown_dims_is_a_clear_error():
    with pytest.raises(ValueError, match=r"placeholder: shape \[\?,\?,\?,\?,\?\] with dtype float32"):
        tf.placeholder(tf.float32, [None] * 5)
    with (
        fg.Graph(),
        pytest.raises(ValueError, match=r"fg.placeholder: shape \(None, None, None\).*3 unknown"),
    ):
        fg.placeholder(fg.float32, [None, None, None])


def test_feeding_a_tensor_with_three_unknown_dims():
    x = tf.placeholder(tf.float32, [None, None, None])
    doubled = x * 2.0
    total = tf.reduce_sum(doubled + 1.0)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with tf.Session() as sess:
        assert sess.run(total, feed_dict={doubled: a}) == a.sum() + a.size
        assert sess.run(total, feed_dict={doubled: a[:1, :2]}) == a[:1, :2].sum() + 8
        assert sess.run(total, feed_dict={x: a}) == 2 * a.sum() + a.size
