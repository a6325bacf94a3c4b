"""TF1 names the classic tutorials reach for: while_loop's result structure, top_k's named
result, matrix ops (``tf.linalg``, ``matrix_inverse``, ``diag_part``, ``trace``), ``meshgrid``,
``sequence_mask``, ``lin_space``, ``tf.losses.log_loss`` and ``AdadeltaOptimizer``, each
against NumPy float64 (Adadelta against TF1's documented update, written out in NumPy)."""

from __future__ import annotations

import ferrograd.compat.v1 as tf
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


A = np.array([[4.0, 7.0, 2.0], [3.0, 6.0, 1.0], [2.0, 5.0, 3.0]])


def run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def test_top_k_is_a_named_pair():
    x = tf.constant([[1.0, 5.0, 3.0], [9.0, 2.0, 4.0]])
    got = tf.nn.top_k(x, 2)
    values, indices = run([got.values, got.indices])
    np.testing.assert_array_equal(values, [[5, 3], [9, 4]])
    np.testing.assert_array_equal(indices, [[1, 2], [0, 2]])
    assert indices.dtype == np.int32


def test_matrix_ops_match_numpy():
    x = tf.placeholder(tf.float32, [3, 3])
    batch = tf.constant(np.stack([A, 2 * A]).astype(np.float32))
    fetches = [
        tf.matrix_inverse(x),
        tf.linalg.inv(x),
        tf.matrix_inverse(x, adjoint=True),
        tf.matrix_determinant(x),
        tf.diag_part(x),
        tf.trace(x),
        tf.linalg.trace(batch),
        tf.linalg.diag_part(batch),
        tf.linalg.det(batch),
    ]
    inv, inv2, inv_t, det, diag, tr, btr, bdiag, bdet = run(fetches, {x: A.astype(np.float32)})
    want_inv = np.linalg.inv(A)
    np.testing.assert_allclose(inv, want_inv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inv2, want_inv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inv_t, np.linalg.inv(A.T), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(det, np.linalg.det(A), rtol=1e-5)
    np.testing.assert_array_equal(diag, np.diag(A))
    assert tr == np.trace(A)
    np.testing.assert_array_equal(btr, [np.trace(A), 2 * np.trace(A)])
    np.testing.assert_array_equal(bdiag, [np.diag(A), 2 * np.diag(A)])
    np.testing.assert_allclose(bdet, [np.linalg.det(A), 8 * np.linalg.det(A)], rtol=1e-5)
    with pytest.raises(ValueError, match=r"diag_part: only matrices \(rank 2\).*shape \[2, 3, 3\]"):
        tf.diag_part(batch)


def test_meshgrid_sequence_mask_lin_space():
    gx, gy = tf.meshgrid([1, 2, 3], [4, 5])
    ix, iy = tf.meshgrid([1, 2, 3], [4, 5], indexing="ij")
    lengths = tf.placeholder(tf.int32, [None])
    mask = tf.sequence_mask(lengths, 4)
    fmask = tf.sequence_mask([1, 3], dtype=tf.float32)
    got = run([gx, gy, ix, iy, mask, fmask, tf.lin_space(0.0, 1.0, 5)], {lengths: [0, 2, 4]})
    want = [*np.meshgrid([1, 2, 3], [4, 5]), *np.meshgrid([1, 2, 3], [4, 5], indexing="ij")]
    for g, w in zip(got[:4], want, strict=True):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[4], np.arange(4)[None, :] < np.array([0, 2, 4])[:, None])
    assert got[4].dtype == np.bool_
    np.testing.assert_array_equal(got[5], [[1, 0, 0], [1, 1, 1]])
    np.testing.assert_allclose(got[6], np.linspace(0, 1, 5), rtol=1e-6)
    with pytest.raises(ValueError, match="sequence_mask: maxlen is needed"):
        tf.sequence_mask(lengths)


def test_log_loss():
    labels = np.array([[1.0], [0.0], [1.0]])
    preds = np.array([[0.7], [0.2], [0.999]])
    got = run(tf.losses.log_loss(labels, tf.constant(preds.astype(np.float32))))
    eps = 1e-7
    want = np.mean(-labels * np.log(preds + eps) - (1 - labels) * np.log(1 - preds + eps))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_adadelta_follows_tf1s_update():
    w0 = np.array([1.0, -2.0, 0.5])
    target = np.array([0.3, 0.1, -0.4])
    w = tf.Variable(w0.astype(np.float32))
    loss = tf.reduce_sum(tf.square(w - target))
    step = tf.train.AdadeltaOptimizer(learning_rate=1.0, rho=0.9, epsilon=1e-6).minimize(loss)
    # TF1's documented update, in float64.
    v, acc, acc_upd = w0.copy(), np.zeros(3), np.zeros(3)
    for _ in range(5):
        g = 2 * (v - target)
        acc = 0.9 * acc + 0.1 * g * g
        upd = np.sqrt(acc_upd + 1e-6) / np.sqrt(acc + 1e-6) * g
        acc_upd = 0.9 * acc_upd + 0.1 * upd * upd
        v = v - 1.0 * upd
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(5):
            sess.run(step)
        np.testing.assert_allclose(sess.run(w), v, rtol=1e-5, atol=1e-6)
