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


def _np_conv2d(z, w, stride, padding):
    """NumPy float64 NHWC conv2d with TF's padding rule (SAME: the odd pixel after), filter [kh, kw, in, out]."""
    n, h, wd, _ = z.shape
    kh, kw, _, cout = w.shape
    pads = []
    for size, k in ((h, kh), (wd, kw)):
        if padding == "SAME":
            o = -(-size // stride)
            total = max((o - 1) * stride + k - size, 0)
            pads.append((total // 2, total - total // 2))
        else:
            pads.append((0, 0))
    zp = np.pad(z, ((0, 0), pads[0], pads[1], (0, 0)))
    oh, ow = (zp.shape[1] - kh) // stride + 1, (zp.shape[2] - kw) // stride + 1
    out = np.zeros((n, oh, ow, cout))
    for i in range(oh):
        for j in range(ow):
            patch = zp[:, i * stride : i * stride + kh, j * stride : j * stride + kw, :]
            out[:, i, j, :] = np.einsum("nabc,abco->no", patch, w)
    return out


@pytest.mark.parametrize(
    ("hw", "out_hw", "k", "stride", "padding"),
    [
        ((2, 3), (4, 6), 3, 2, "SAME"),
        ((3, 3), (5, 6), 3, 2, "SAME"),
        ((2, 2), (5, 6), 3, 2, "VALID"),
        ((4, 4), (4, 4), 3, 1, "SAME"),
    ],
)
def test_conv2d_transpose_is_the_adjoint_of_conv2d(hw, out_hw, k, stride, padding):
    # conv2d_transpose(x) is the transpose of conv2d: <conv2d(z), x> = <z, conv2d_transpose(x)> for every z.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, *hw, 3))
    w = rng.standard_normal(
        (k, k, 4, 3)
    )  # [kh, kw, out, in] of the transposed op: conv2d's [kh, kw, in=4, out=3]
    z = rng.standard_normal((2, *out_hw, 4))
    y = tf.nn.conv2d_transpose(
        tf.constant(x.astype(np.float32)),
        tf.constant(w.astype(np.float32)),
        [2, *out_hw, 4],
        [1, stride, stride, 1],
        padding,
    )
    assert y.shape.as_list() == [2, *out_hw, 4]
    got = run(y)
    conv = _np_conv2d(z, w, stride, padding)
    assert conv.shape == x.shape
    np.testing.assert_allclose(np.sum(got * z), np.sum(conv * x), rtol=1e-5)
    # And entry by entry: the response to each unit input is conv2d's weight on it.
    e = np.zeros_like(x)
    e[1, hw[0] - 1, 0, 2] = 1.0
    unit = run(
        tf.nn.conv2d_transpose(
            tf.constant(e.astype(np.float32)),
            tf.constant(w.astype(np.float32)),
            [2, *out_hw, 4],
            [1, stride, stride, 1],
            padding,
        )
    )
    probe = np.zeros((2, *out_hw, 4))
    for idx in np.ndindex(*probe.shape):
        if idx[0] == 1:
            probe[idx] = 1.0
            assert abs(unit[idx] - _np_conv2d(probe, w, stride, padding)[1, hw[0] - 1, 0, 2]) < 1e-5
            probe[idx] = 0.0


def test_conv2d_transpose_layer_shapes_names_and_errors():
    x = tf.placeholder(tf.float32, [None, 7, 7, 3])
    same = tf.layers.conv2d_transpose(x, 5, 3, strides=2, padding="same")
    valid = tf.layers.conv2d_transpose(x, 5, 4, strides=2, padding="valid", activation=tf.nn.relu)
    assert same.shape.as_list() == [None, 14, 14, 5] and valid.shape.as_list() == [None, 16, 16, 5]
    assert [v.name for v in tf.global_variables()] == [
        "conv2d_transpose/kernel:0",
        "conv2d_transpose/bias:0",
        "conv2d_transpose_1/kernel:0",
        "conv2d_transpose_1/bias:0",
    ]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([same, valid], {x: np.ones((2, 7, 7, 3), np.float32)})
    assert a.shape == (2, 14, 14, 5) and b.shape == (2, 16, 16, 5) and (b >= 0).all()
    with pytest.raises(
        ValueError, match=r"conv2d_transpose: value .* has height 7, but a SAME conv2d of stride 2 makes 3"
    ):
        tf.nn.conv2d_transpose(x, tf.ones([3, 3, 4, 3]), [2, 6, 14, 4], [1, 2, 2, 1], "SAME")


def test_contrib_regularizers_in_a_loss():
    w0 = np.array([[1.0, -2.0], [0.5, 3.0]])
    w = tf.get_variable(
        "w", initializer=w0.astype(np.float32), regularizer=tf.contrib.layers.l2_regularizer(0.1)
    )
    v = tf.Variable(np.array([1.0, -4.0], np.float32))
    l1 = tf.contrib.layers.l1_regularizer(0.5)(v)
    both = tf.contrib.layers.apply_regularization(tf.contrib.layers.l2_regularizer(0.2), [w, v])
    total = tf.losses.get_regularization_loss()
    assert tf.contrib.layers.l2_regularizer(0.0)(w) is None
    with pytest.raises(ValueError, match="scale less than 0"):
        tf.contrib.layers.l2_regularizer(-1.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_l1, got_both, got_total = sess.run([l1, both, total])
    np.testing.assert_allclose(got_l1, 0.5 * 5.0, rtol=1e-6)
    np.testing.assert_allclose(got_both, 0.2 * (np.sum(w0**2) + 17.0) / 2, rtol=1e-6)
    # get_variable's regularizer and apply_regularization's sum both join the collection.
    np.testing.assert_allclose(got_total, 0.1 * np.sum(w0**2) / 2 + got_both, rtol=1e-6)


def test_gather_nd_matches_numpy():
    p = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    pairs = np.array([[[1, 2], [0, 0]], [[1, 0], [0, 2]]])  # [2, 2, 2]: rows of p
    singles = np.array([[1], [0]])  # [2, 1]: matrices of p
    triples = np.array([[1, 2, 3], [0, 1, 0]])  # [2, 3]: elements
    ph = tf.placeholder(tf.int32, [None, 2])
    got = run(
        [
            tf.gather_nd(p, pairs),
            tf.gather_nd(p, singles),
            tf.gather_nd(p, triples),
            tf.gather_nd(tf.constant(p), ph),
        ],
        {ph: [[1, 1], [0, 2], [1, 2]]},
    )
    np.testing.assert_array_equal(got[0], p[pairs[..., 0], pairs[..., 1]])
    np.testing.assert_array_equal(got[1], p[singles[:, 0]])
    np.testing.assert_array_equal(got[2], p[triples[:, 0], triples[:, 1], triples[:, 2]])
    np.testing.assert_array_equal(got[3], p[[1, 0, 1], [1, 2, 2]])
    with pytest.raises(
        ValueError, match=r"gather_nd: indices .* pick 4 dims, but params .* shape \[2, 3, 4\]"
    ):
        tf.gather_nd(p, [[0, 0, 0, 0]])


def test_print_prints_its_data_at_each_run_that_computes_it(capfd):
    x = tf.placeholder(tf.float32, [None, 4])
    w = tf.Variable(tf.ones([4, 1]))
    y = tf.Print(tf.matmul(x, w), [tf.matmul(x, w), tf.shape(x), w], "y and shape: ", first_n=2)
    loss = tf.reduce_mean(y)
    other = tf.reduce_sum(x)  # does not need the Print: prints nothing
    a = np.arange(8.0).reshape(2, 4)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = [sess.run(loss, {x: a}) for _ in range(3)]
        sess.run(other, {x: a})
    assert got == [14.0] * 3
    # TF1's layout (as TensorFlow 2.21's compat.v1 prints this program): nested rows without spaces,
    # the first 3 entries of each dim, then "...".
    line = "y and shape: [[6][22]][2 4][[1][1][1]...]"
    assert capfd.readouterr().err.splitlines() == [line, line]


def test_scatter_nd_lrn_div_no_nan_match_numpy():
    sc = tf.scatter_nd([[1], [3], [1]], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [5, 2])
    sc2 = tf.scatter_nd([[0, 1], [2, 0]], [7, 9], [3, 2])
    x = np.arange(2 * 1 * 2 * 7, dtype=np.float64).reshape(2, 1, 2, 7) / 10
    lrn = tf.nn.lrn(tf.constant(x.astype(np.float32)), depth_radius=2, bias=1.5, alpha=0.3, beta=0.75)
    got = run([sc, sc2, lrn, tf.div_no_nan([1.0, 2.0], [0.0, 4.0])])
    want_sc = np.zeros((5, 2))
    np.add.at(want_sc, [1, 3, 1], [[1, 2], [3, 4], [5, 6]])  # repeated indices add up
    np.testing.assert_array_equal(got[0], want_sc)
    np.testing.assert_array_equal(got[1], [[0, 7], [0, 0], [9, 0]])
    assert got[1].dtype == np.int32
    sq = np.pad(x**2, ((0, 0), (0, 0), (0, 0), (2, 2)))
    window = sum(sq[..., j : j + 7] for j in range(5))
    np.testing.assert_allclose(got[2], x / (1.5 + 0.3 * window) ** 0.75, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got[3], [0.0, 0.5])


def test_metrics_accuracy_and_mean_accumulate_over_runs():
    labels = tf.placeholder(tf.int64, [None])
    preds = tf.placeholder(tf.int64, [None])
    acc, update = tf.metrics.accuracy(labels=labels, predictions=preds)
    mean, mean_update = tf.metrics.mean(tf.constant([1.0, 2.0, 3.0]), weights=tf.constant([1.0, 0.0, 2.0]))
    assert [v.name for v in tf.local_variables()] == [
        "accuracy/total:0",
        "accuracy/count:0",
        "mean/total:0",
        "mean/count:0",
    ]
    assert tf.trainable_variables() == []
    with tf.Session() as sess:
        with pytest.raises(
            tf.errors.FailedPreconditionError, match=r"accuracy/total.*tf.local_variables_initializer"
        ):
            sess.run(acc)
        sess.run(tf.local_variables_initializer())
        assert sess.run(acc) == 0.0  # nothing seen yet: 0, not NaN
        np.testing.assert_allclose(sess.run(update, {labels: [1, 2, 3], preds: [1, 2, 0]}), 2 / 3, rtol=1e-6)
        np.testing.assert_allclose(sess.run(update, {labels: [1, 1], preds: [0, 1]}), 3 / 5, rtol=1e-6)
        np.testing.assert_allclose(sess.run(acc), 3 / 5, rtol=1e-6)
        np.testing.assert_allclose(sess.run(mean_update), 7 / 3, rtol=1e-6)
        np.testing.assert_allclose(sess.run(mean), 7 / 3, rtol=1e-6)
        sess.run(tf.local_variables_initializer())  # a new evaluation starts from nothing
        assert sess.run(acc) == 0.0


def test_random_shuffle_and_multinomial_draw_at_each_run():
    tf.set_random_seed(7)
    rows = np.arange(12, dtype=np.float32).reshape(6, 2)
    shuffled = tf.random_shuffle(tf.constant(rows))
    probs = np.array([0.2, 0.3, 0.5])
    samples = tf.multinomial(tf.constant(np.log(probs)[None].astype(np.float32)), 20000)
    cat = tf.random.categorical(tf.constant([[0.0, -np.inf, 0.0]]), 50, dtype=tf.int32)
    with tf.Session() as sess:
        draws = [sess.run(shuffled) for _ in range(4)]
        got, got_cat = sess.run([samples, cat])
    for d in draws:  # each a permutation of the rows
        np.testing.assert_array_equal(d[np.argsort(d[:, 0])], rows)
    assert len({d.tobytes() for d in draws}) > 1, "drawn again at each run"
    assert got.shape == (1, 20000) and got.dtype == np.int64
    freq = np.bincount(got[0], minlength=3) / 20000
    np.testing.assert_allclose(freq, probs, atol=4 * np.sqrt(0.25 / 20000))  # 4 sigma
    assert got_cat.dtype == np.int32 and set(np.unique(got_cat)) <= {0, 2}
