"""Each TF1 name of ``ferrograd.compat.v1`` against NumPy, with TF's conventions.

TF-specific numerics come from their documented formulas, checked on
hand-computed cases: SAME padding puts the odd pixel after
(``pad_total = max((ceil(in/stride) - 1) * stride + k - in, 0)``,
``pad_before = pad_total // 2``), ``l2_loss = sum(x**2) / 2``, the
cross-entropy forms, ``reduction_indices``/``keep_dims``, argmax's default
axis 0.
"""

from __future__ import annotations

import math

import ferrograd.compat.v1 as tf
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed_dict=feed)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5)).astype(np.float32)


# ----------------------------------------------------------------------------- reductions


@pytest.mark.parametrize(
    ("name", "ref"),
    [
        ("reduce_sum", np.sum),
        ("reduce_mean", np.mean),
        ("reduce_max", np.max),
        ("reduce_min", np.min),
        ("reduce_prod", np.prod),
    ],
)
def test_reductions_axis_forms(name, ref):
    op = getattr(tf, name)
    x = tf.placeholder(tf.float32, [None, 4, 5])
    outs = [
        op(x),
        op(x, axis=1),
        op(x, 1, keepdims=True),
        op(x, reduction_indices=[0, 2]),
        op(x, reduction_indices=-1, keep_dims=True),
        op(x, axis=[0, 1, 2], keepdims=True),
    ]
    got = run(outs, {x: A})
    want = [
        ref(A),
        ref(A, axis=1),
        ref(A, axis=1, keepdims=True),
        ref(A, axis=(0, 2)),
        ref(A, axis=-1, keepdims=True),
        ref(A, axis=(0, 1, 2), keepdims=True),
    ]
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert outs[2].shape.as_list() == [None, 1, 5]
    assert outs[1].shape.as_list() == [None, 5]


def test_integer_mean_truncates_and_bool_reductions():
    x = tf.constant([[1, 2], [4, 4]])
    b = tf.constant([[True, False], [True, True]])
    m, m0, anyr, allr = run(
        [tf.reduce_mean(x), tf.reduce_mean(x, 0), tf.reduce_any(b, 1), tf.reduce_all(b, 1)]
    )
    assert m == 2 and x.dtype == tf.int32  # 11 / 4 = 2.75 -> 2
    np.testing.assert_array_equal(m0, [2, 3])
    np.testing.assert_array_equal(anyr, [True, True])
    np.testing.assert_array_equal(allr, [False, True])


def test_argmax_axis_dimension_and_old_names():
    v = np.array([[1.0, 9.0, 3.0], [7.0, 2.0, 8.0]], np.float32)
    x = tf.constant(v)
    got = run(
        [
            tf.argmax(x),
            tf.argmax(x, axis=1),
            tf.argmax(x, dimension=1),
            tf.arg_max(x, 1),
            tf.argmin(x, 1),
            tf.arg_min(x, 0),
        ]
    )
    np.testing.assert_array_equal(got[0], [1, 0, 1])  # default axis 0
    for g in got[1:4]:
        np.testing.assert_array_equal(g, [1, 2])
    np.testing.assert_array_equal(got[4], [0, 1])
    np.testing.assert_array_equal(got[5], [0, 1, 0])
    assert tf.argmax(x, 1).dtype == tf.int64
    assert tf.argmax(x, 1, output_type=tf.int32).dtype == tf.int32


# ----------------------------------------------------------------------------- dtypes and making tensors


def test_dtypes_and_constants():
    assert tf.constant(1).dtype == tf.int32
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant(np.arange(3)).dtype == tf.int64
    assert tf.constant([True]).dtype == tf.bool
    assert tf.float32 == np.float32 and tf.float32.as_numpy_dtype is np.float32
    assert tf.as_dtype("int64") is tf.int64 and tf.int64.is_integer and tf.float32.is_floating
    c = tf.constant(2.0, shape=[2, 3])
    np.testing.assert_array_equal(run(c), np.full((2, 3), 2.0))
    got = run(
        [
            tf.zeros([2, 2]),
            tf.ones([3], tf.int32),
            tf.fill([2], 7),
            tf.zeros_like(c),
            tf.ones_like(c, tf.int64),
        ]
    )
    np.testing.assert_array_equal(got[0], np.zeros((2, 2)))
    assert got[1].dtype == np.int32 and got[1].tolist() == [1, 1, 1]
    assert got[2].tolist() == [7, 7]
    assert got[4].dtype == np.int64 and got[4].shape == (2, 3)


def test_cast_rounds_toward_zero():
    x = tf.constant([-1.7, -0.2, 0.5, 2.9])
    i, b, f = run(
        [tf.cast(x, tf.int32), tf.cast(x, tf.bool), tf.cast(tf.constant([True, False]), tf.float32)]
    )
    np.testing.assert_array_equal(i, [-1, 0, 0, 2])
    np.testing.assert_array_equal(b, [True, True, True, True])
    np.testing.assert_array_equal(f, [1.0, 0.0])
    assert tf.to_float(tf.constant(1)).dtype == tf.float32


def test_random_ops_shapes_and_moments():
    tf.set_random_seed(3)
    n = tf.random_normal([200, 50], mean=1.0, stddev=2.0)
    u = tf.random_uniform([200, 50], minval=-1, maxval=3)
    t = tf.truncated_normal([200, 50], stddev=0.5)
    ri = tf.random_uniform([1000], 0, 5, dtype=tf.int32)
    nv, uv, tv, iv = run([n, u, t, ri])
    assert nv.shape == (200, 50)
    assert abs(nv.mean() - 1.0) < 0.1 and abs(nv.std() - 2.0) < 0.1
    assert uv.min() >= -1 and uv.max() < 3 and abs(uv.mean() - 1.0) < 0.1
    assert np.abs(tv).max() <= 1.0 + 1e-6  # within two standard deviations
    assert abs(tv.std() - 0.5 * 0.8796) < 0.03  # the std of a normal truncated at 2 sigma
    assert iv.dtype == np.int32 and set(np.unique(iv)) == {0, 1, 2, 3, 4}
    n2 = run(n)
    assert not np.array_equal(nv, n2)  # drawn again at each run


# ----------------------------------------------------------------------------- shapes


def test_shape_ops():
    x = tf.placeholder(tf.float32, [None, 4, 5])
    r1 = tf.reshape(x, [-1, 20])
    r2 = tf.reshape(x, [tf.shape(x)[0], 4 * 5])
    t = tf.transpose(x)
    tp = tf.transpose(x, [0, 2, 1])
    e = tf.expand_dims(x, 1)
    e2 = tf.expand_dims(x, dim=-1)
    s = tf.squeeze(tf.expand_dims(x, 1), [1])
    s_all = tf.squeeze(tf.constant(np.zeros((1, 3, 1))))
    got = run([r1, r2, t, tp, e, e2, s, s_all, tf.shape(x), tf.size(x), tf.rank(x)], {x: A})
    np.testing.assert_array_equal(got[0], A.reshape(-1, 20))
    np.testing.assert_array_equal(got[1], A.reshape(3, 20))
    np.testing.assert_array_equal(got[2], A.transpose())
    np.testing.assert_array_equal(got[3], A.transpose(0, 2, 1))
    assert got[4].shape == (3, 1, 4, 5) and got[5].shape == (3, 4, 5, 1) and got[6].shape == (3, 4, 5)
    assert got[7].shape == (3,)
    np.testing.assert_array_equal(got[8], [3, 4, 5])
    assert got[8].dtype == np.int32
    assert got[9] == 60 and got[10] == 3
    assert r1.shape.as_list() == [None, 20] and t.get_shape().as_list() == [5, 4, None]


def test_join_and_split():
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
    ta, tb = tf.constant(a), tf.constant(b)
    parts = tf.split(tf.constant(np.arange(12).reshape(2, 6)), 3, axis=1)
    sized = tf.split(tf.constant(np.arange(12).reshape(2, 6)), [1, 5], 1)
    got = run(
        [
            tf.concat([ta, tb], 0),
            tf.concat([ta, tb], axis=1),
            tf.concat(1, [ta, tb]),
            tf.stack([ta, tb]),
            tf.stack([ta, tb], axis=2),
            tf.unstack(ta),
            parts,
            sized,
        ]
    )
    np.testing.assert_array_equal(got[0], np.concatenate([a, b]))
    np.testing.assert_array_equal(got[1], np.concatenate([a, b], 1))
    np.testing.assert_array_equal(got[2], np.concatenate([a, b], 1))  # the pre-1.0 argument order
    np.testing.assert_array_equal(got[3], np.stack([a, b]))
    np.testing.assert_array_equal(got[4], np.stack([a, b], 2))
    np.testing.assert_array_equal(got[5][1], a[1])
    assert [p.shape for p in got[6]] == [(2, 2)] * 3
    np.testing.assert_array_equal(got[6][2], np.arange(12).reshape(2, 6)[:, 4:])
    assert [p.shape for p in got[7]] == [(2, 1), (2, 5)]


def test_tile_pad_gather_slice():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tf.constant(a)
    got = run(
        [
            tf.tile(x, [2, 1]),
            tf.pad(x, [[1, 0], [0, 2]]),
            tf.pad(x, [[0, 0], [1, 1]], constant_values=-1),
            tf.gather(x, [1, 0, 1]),
            tf.gather(x, [2, 0], axis=1),
            x[:, 1],
            x[1],
            x[:, ::2],
        ]
    )
    np.testing.assert_array_equal(got[0], np.tile(a, (2, 1)))
    np.testing.assert_array_equal(got[1], np.pad(a, [[1, 0], [0, 2]]))
    np.testing.assert_array_equal(got[2], np.pad(a, [[0, 0], [1, 1]], constant_values=-1))
    np.testing.assert_array_equal(got[3], a[[1, 0, 1]])
    np.testing.assert_array_equal(got[4], a[:, [2, 0]])
    np.testing.assert_array_equal(got[5], a[:, 1])
    np.testing.assert_array_equal(got[6], a[1])
    np.testing.assert_array_equal(got[7], a[:, ::2])


def test_one_hot():
    idx = tf.constant([0, 2, -1, 5])
    got = run(
        [
            tf.one_hot(idx, 3),
            tf.one_hot(idx, 3, on_value=5.0, off_value=-1.0),
            tf.one_hot(idx, 3, axis=0),
            tf.one_hot(idx, 3, dtype=tf.int32),
        ]
    )
    want = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]], np.float32)  # out of range: all off
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], np.where(want == 1, 5.0, -1.0))
    np.testing.assert_array_equal(got[2], want.T)
    assert got[3].dtype == np.int32


# ----------------------------------------------------------------------------- math


def test_elementwise_math():
    v = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    w = np.array([2.0, -1.0, 0.5, 3.0], np.float32)
    x, y = tf.constant(v), tf.constant(w)
    cases = {
        "add": (tf.add(x, y), v + w),
        "subtract": (tf.subtract(x, y), v - w),
        "multiply": (tf.multiply(x, y), v * w),
        "divide": (tf.divide(x, y), v / w),
        "negative": (tf.negative(x), -v),
        "abs": (tf.abs(y), np.abs(w)),
        "pow": (tf.pow(x, 2.0), v**2),
        "square": (tf.square(y), w * w),
        "sqrt": (tf.sqrt(x), np.sqrt(v)),
        "exp": (tf.exp(y), np.exp(w)),
        "log": (tf.log(x), np.log(v)),
        "maximum": (tf.maximum(x, y), np.maximum(v, w)),
        "minimum": (tf.minimum(x, 1.5), np.minimum(v, 1.5)),
        "ops": (2 * x - y / 4 + 1, 2 * v - w / 4 + 1),
        "rops": (1.0 - x, 1.0 - v),
        "sigmoid": (tf.sigmoid(y), 1 / (1 + np.exp(-w))),
        "tanh": (tf.tanh(y), np.tanh(w)),
        "squared_difference": (tf.squared_difference(x, y), (v - w) ** 2),
        "add_n": (tf.add_n([x, y, x]), v + w + v),
    }
    names = list(cases)
    got = run([cases[n][0] for n in names])
    for n, g in zip(names, got, strict=True):
        np.testing.assert_allclose(g, cases[n][1], rtol=1e-5, err_msg=n)


def test_matmul_transposes():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4)).astype(np.float32)
    x, y = tf.constant(a), tf.constant(b)
    g1, g2, g3 = run(
        [tf.matmul(x, y, transpose_b=True), tf.matmul(y, x, transpose_b=True), x @ tf.transpose(y)]
    )
    np.testing.assert_allclose(g1, a @ b.T, rtol=1e-5)
    np.testing.assert_allclose(g2, b @ a.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g3, a @ b.T, rtol=1e-5)


def test_comparisons_and_where():
    v = np.array([1.0, 2.0, 3.0], np.float32)
    x = tf.constant(v)
    got = run(
        [
            tf.equal(x, 2.0),
            tf.not_equal(x, 2.0),
            tf.less(x, 2.0),
            tf.less_equal(x, 2.0),
            tf.greater(x, 2.0),
            tf.greater_equal(x, 2.0),
            x > 1.5,
            tf.where(x > 1.5, x, -x),
            tf.logical_and(x > 1, x < 3),
            tf.logical_not(x > 1),
        ]
    )
    np.testing.assert_array_equal(got[0], [False, True, False])
    np.testing.assert_array_equal(got[1], [True, False, True])
    np.testing.assert_array_equal(got[2], [True, False, False])
    np.testing.assert_array_equal(got[3], [True, True, False])
    np.testing.assert_array_equal(got[4], [False, False, True])
    np.testing.assert_array_equal(got[5], [False, True, True])
    np.testing.assert_array_equal(got[6], [False, True, True])
    np.testing.assert_array_equal(got[7], [-1.0, 2.0, 3.0])
    np.testing.assert_array_equal(got[8], [False, True, False])
    np.testing.assert_array_equal(got[9], [True, False, False])


def test_clipping():
    v = np.array([-3.0, 0.5, 2.0], np.float32)
    w = np.array([[3.0, 4.0]], np.float32)
    x, y = tf.constant(v), tf.constant(w)
    (c1, c2), gn = tf.clip_by_global_norm([x, y], 2.0)
    got = run([tf.clip_by_value(x, -1.0, 1.0), tf.clip_by_norm(y, 1.0), c1, c2, gn, tf.global_norm([x, y])])
    np.testing.assert_array_equal(got[0], [-1.0, 0.5, 1.0])
    np.testing.assert_allclose(got[1], w / 5.0, rtol=1e-6)
    norm = math.sqrt((v**2).sum() + (w**2).sum())
    np.testing.assert_allclose(got[2], v * 2.0 / norm, rtol=1e-5)
    np.testing.assert_allclose(got[3], w * 2.0 / norm, rtol=1e-5)
    assert got[4] == pytest.approx(norm, rel=1e-5) and got[5] == pytest.approx(norm, rel=1e-5)
    # Under the limit nothing changes, and None entries pass through.
    (k1, none), _ = tf.clip_by_global_norm([x, None], 100.0)
    assert none is None
    np.testing.assert_allclose(run(k1), v, rtol=1e-6)


def test_gradients_and_stop_gradient():
    x = tf.placeholder(tf.float32, [3])
    w = tf.Variable(np.array([1.0, 2.0, 3.0], np.float32))
    y = tf.reduce_sum(w * x * x)
    z = tf.reduce_sum(tf.stop_gradient(w * x) * x)
    gx, gw = tf.gradients(y, [x, w])
    (gz,) = tf.gradients(z, [w])
    (gnone,) = tf.gradients(y, [tf.Variable(1.0)])
    (gy2,) = tf.gradients([y, z], x, grad_ys=[tf.constant(2.0), tf.constant(1.0)])
    xv = np.array([1.0, -1.0, 0.5], np.float32)
    a, b, d = run([gx, gw, gy2], {x: xv})
    c = None if gz is None else run(gz, {x: xv})
    wv = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(a, 2 * wv * xv)
    np.testing.assert_allclose(b, xv * xv)
    assert gz is None or not c.any()
    assert gnone is None
    np.testing.assert_allclose(d, 2 * (2 * wv * xv) + wv * xv)


# ----------------------------------------------------------------------------- control flow


def test_cond_decided_at_run_time():
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [2])
    out = tf.cond(p, lambda: x * 2.0, lambda: tf.reduce_sum(x) + x)
    pair = tf.cond(p, lambda: (x, x + 1), lambda: (x - 1, x))
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out, {p: True, x: [1.0, 2.0]}), [2.0, 4.0])
        np.testing.assert_allclose(sess.run(out, {p: False, x: [1.0, 2.0]}), [4.0, 5.0])
        a, b = sess.run(pair, {p: False, x: [1.0, 2.0]})
        np.testing.assert_allclose(a, [0.0, 1.0])
        np.testing.assert_allclose(b, [1.0, 2.0])
    assert tf.cond(True, lambda: 1, lambda: 2) == 1  # a Python pred picks while building


def test_while_loop():
    n = tf.placeholder(tf.int32, [])
    i0 = tf.constant(0)
    s0 = tf.constant(0)
    i, s = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + i), [i0, s0])
    x = tf.constant(1.0)
    # As TF1: one loop variable comes back as itself (a list of it with return_same_structure),
    # several in the structure the body returns.
    doubled = tf.while_loop(lambda v: v < 100.0, lambda v: [v * 2.0], [x])
    capped = tf.while_loop(lambda v: v < 100.0, lambda v: [v * 2.0], [x], maximum_iterations=3)
    (same,) = tf.while_loop(lambda v: v < 100.0, lambda v: [v * 2.0], [x], return_same_structure=True)
    pair = tf.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2.0), [i0, x])
    assert isinstance(doubled, tf.Tensor) and isinstance(pair, tuple)
    with tf.Session() as sess:
        assert sess.run([i, s], {n: 5}) == [5, 10]
        assert sess.run(s, {n: 10}) == 45
        assert sess.run(doubled) == 128.0
        assert sess.run(capped) == 8.0
        assert sess.run(same) == 128.0 and sess.run(pair) == (3, 8.0)


def test_control_dependencies_order_updates_before_reads():
    v = tf.Variable(0.0)
    inc = tf.assign_add(v, 1.0)
    with tf.control_dependencies([inc]):
        read = tf.identity(v)
        noop = tf.no_op()
    g = tf.group(inc, inc)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(read) == 1.0
        assert sess.run(read) == 2.0
        assert sess.run(noop) is None
        assert sess.run(v) == 3.0
        sess.run(g)
        assert sess.run(v) == 4.0


# ----------------------------------------------------------------------------- tf.nn


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_activations():
    z = RNG.standard_normal((4, 6)).astype(np.float32) * 3
    x = tf.constant(z)
    got = run(
        [
            tf.nn.relu(x),
            tf.nn.sigmoid(x),
            tf.nn.tanh(x),
            tf.nn.softmax(x),
            tf.nn.log_softmax(x),
            tf.nn.softmax(x, axis=0),
            tf.nn.relu6(x),
            tf.nn.leaky_relu(x, 0.1),
        ]
    )
    np.testing.assert_allclose(got[0], np.maximum(z, 0))
    np.testing.assert_allclose(got[1], 1 / (1 + np.exp(-z)), rtol=1e-5)
    np.testing.assert_allclose(got[2], np.tanh(z), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], _softmax(z), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[4], np.log(_softmax(z)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[5], _softmax(z.T).T, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[6], np.clip(z, 0, 6))
    np.testing.assert_allclose(got[7], np.where(z > 0, z, 0.1 * z), rtol=1e-6)


def test_cross_entropy_forms():
    z = RNG.standard_normal((5, 4)).astype(np.float32) * 2
    labels = np.array([0, 3, 1, 1, 2])
    onehot = np.eye(4, dtype=np.float32)[labels]
    soft = _softmax(RNG.standard_normal((5, 4))).astype(np.float32)
    bin_z = (RNG.random((5, 4)) > 0.5).astype(np.float32)
    logits = tf.constant(z)
    got = run(
        [
            tf.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=logits),
            tf.nn.softmax_cross_entropy_with_logits_v2(labels=soft, logits=logits),
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant(labels), logits=logits),
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.constant(labels.astype(np.int32)), logits=logits
            ),
            tf.nn.sigmoid_cross_entropy_with_logits(labels=bin_z, logits=logits),
            tf.nn.l2_loss(tf.constant([1.0, 2.0, 3.0])),
        ]
    )
    log_p = np.log(_softmax(z.astype(np.float64)))
    np.testing.assert_allclose(got[0], -(onehot * log_p).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(got[1], -(soft * log_p).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(got[2], -log_p[np.arange(5), labels], rtol=1e-5)
    np.testing.assert_allclose(got[3], got[2])
    zz = z.astype(np.float64)
    np.testing.assert_allclose(got[4], zz - zz * bin_z + np.log1p(np.exp(-zz)), rtol=1e-5, atol=1e-6)
    assert got[5] == pytest.approx(7.0)  # (1 + 4 + 9) / 2
    with pytest.raises(ValueError, match="named arguments"):
        tf.nn.softmax_cross_entropy_with_logits(onehot, z)


def test_cross_entropy_gradients_reach_labels_only_in_v2():
    lab = tf.Variable(np.full((1, 3), 1 / 3, np.float32))
    lg = tf.constant([[1.0, 2.0, 3.0]])
    (g1,) = tf.gradients(tf.nn.softmax_cross_entropy_with_logits(labels=lab, logits=lg), [lab])
    (g2,) = tf.gradients(tf.nn.softmax_cross_entropy_with_logits_v2(labels=lab, logits=lg), [lab])
    v1, v2 = run([tf.zeros([1]) if g1 is None else g1, g2])
    assert g1 is None or not v1.any()  # nothing reaches the labels through TF1's form
    np.testing.assert_allclose(v2, -np.log(_softmax(np.array([[1.0, 2.0, 3.0]]))), rtol=1e-5)


def test_bias_add_dropout_embedding():
    x = tf.placeholder(tf.float32, [None, 3])
    b = tf.constant([1.0, 2.0, 3.0])
    keep = tf.placeholder(tf.float32)
    d = tf.nn.dropout(x, keep)
    d_rate = tf.nn.dropout(x, rate=0.75)
    emb = tf.nn.embedding_lookup(
        tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3)), tf.constant([[3, 0], [1, 1]])
    )
    ones = np.ones((2000, 3), np.float32)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(tf.nn.bias_add(x, b), {x: ones}), ones + [1, 2, 3])
        full = sess.run(d, {x: ones, keep: 1.0})
        np.testing.assert_array_equal(full, ones)
        half = sess.run(d, {x: ones, keep: 0.5})
        assert set(np.unique(half)) == {0.0, 2.0}
        assert abs((half > 0).mean() - 0.5) < 0.05
        quarter = sess.run(d_rate, {x: ones})
        assert set(np.unique(quarter)) == {0.0, 4.0} and abs((quarter > 0).mean() - 0.25) < 0.05
        e = sess.run(emb)
    np.testing.assert_array_equal(e, np.arange(12).reshape(4, 3)[[[3, 0], [1, 1]]])


def test_moments():
    x = tf.constant(A)
    m, v = tf.nn.moments(x, axes=[0, 1])
    mv, vv = run([m, v])
    np.testing.assert_allclose(mv, A.mean((0, 1)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vv, A.var((0, 1)), rtol=1e-4)


# ----------------------------------------------------------------------------- convolution and pooling in NHWC


def _np_conv_nhwc(x, w, stride, pads):
    """Direct convolution: x (N,H,W,C), w (kh,kw,C,O), pads ((top,bottom),(left,right))."""
    xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    kh, kw, _, o = w.shape
    oh = (xp.shape[1] - kh) // stride[0] + 1
    ow = (xp.shape[2] - kw) // stride[1] + 1
    out = np.zeros((x.shape[0], oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def _same(n, k, s):
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def test_same_padding_rule_hand_cases():
    assert tf.nn.same_padding(3, 2, 2) == (0, 1)  # odd pixel after
    assert tf.nn.same_padding(4, 3, 2) == (0, 1)
    assert tf.nn.same_padding(5, 3, 1) == (1, 1)
    assert tf.nn.same_padding(5, 4, 1) == (1, 2)
    assert tf.nn.same_padding(8, 3, 3) == (0, 1)
    assert tf.nn.same_padding(2, 5, 2) == (1, 2)


def test_conv_and_pools_same_hand_computed():
    img = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    x = tf.constant(img)
    k = tf.constant(np.ones((2, 2, 1, 1), np.float32))
    conv = tf.nn.conv2d(x, k, strides=[1, 2, 2, 1], padding="SAME")
    mp = tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    ap = tf.nn.avg_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    neg = tf.nn.max_pool(-x - 1, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    c, m, a, n = run([conv, mp, ap, neg])
    # Windows rows/cols [0:2] and [2:3] + one pad after: sums 0+1+3+4, 2+5, 6+7, 8.
    np.testing.assert_array_equal(c[0, :, :, 0], [[8, 7], [13, 8]])
    np.testing.assert_array_equal(m[0, :, :, 0], [[4, 5], [7, 8]])
    np.testing.assert_array_equal(a[0, :, :, 0], [[2, 3.5], [6.5, 8]])  # the pad is not counted
    np.testing.assert_array_equal(n[0, :, :, 0], [[-1, -3], [-7, -9]])  # padding never wins a max
    assert conv.shape.as_list() == [1, 2, 2, 1]


@pytest.mark.parametrize(("size", "k", "s"), [(7, 3, 2), (6, 3, 2), (5, 4, 1), (8, 3, 3), (6, 1, 2)])
def test_conv2d_matches_direct_convolution(size, k, s):
    rng = np.random.default_rng(size * 10 + k + s)
    xv = rng.standard_normal((2, size, size + 1, 3)).astype(np.float32)
    wv = rng.standard_normal((k, k, 3, 4)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, size, size + 1, 3])
    w = tf.constant(wv)
    same = tf.nn.conv2d(x, w, strides=[1, s, s, 1], padding="SAME")
    valid = tf.nn.conv2d(x, w, strides=[1, s, s, 1], padding="VALID")
    got_s, got_v = run([same, valid], {x: xv})
    pads = (_same(size, k, s), _same(size + 1, k, s))
    np.testing.assert_allclose(got_s, _np_conv_nhwc(xv, wv, (s, s), pads), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_v, _np_conv_nhwc(xv, wv, (s, s), ((0, 0), (0, 0))), rtol=1e-4, atol=1e-4)
    assert got_s.shape[1:3] == (-(-size // s), -(-(size + 1) // s))
    assert same.shape.as_list() == [None, -(-size // s), -(-(size + 1) // s), 4]


@pytest.mark.parametrize(("size", "k", "s"), [(5, 2, 2), (6, 3, 2), (7, 3, 3)])
def test_pools_match_reference(size, k, s):
    rng = np.random.default_rng(size + k)
    xv = rng.standard_normal((2, size, size, 3)).astype(np.float32)
    x = tf.constant(xv)
    opts = dict(ksize=[1, k, k, 1], strides=[1, s, s, 1])
    mps, aps, mpv = run(
        [
            tf.nn.max_pool(x, padding="SAME", **opts),
            tf.nn.avg_pool(x, padding="SAME", **opts),
            tf.nn.max_pool(x, padding="VALID", **opts),
        ]
    )
    (t, b) = _same(size, k, s)
    o = -(-size // s)
    want_m = np.zeros((2, o, o, 3))
    want_a = np.zeros((2, o, o, 3))
    for i in range(o):
        for j in range(o):
            r0, c0 = i * s - t, j * s - t
            win = xv[:, max(r0, 0) : r0 + k, max(c0, 0) : c0 + k, :]
            want_m[:, i, j] = win.max((1, 2))
            want_a[:, i, j] = win.mean((1, 2))
    np.testing.assert_allclose(mps, want_m, rtol=1e-6)
    np.testing.assert_allclose(aps, want_a, rtol=1e-5, atol=1e-6)
    ov = (size - k) // s + 1
    assert mpv.shape == (2, ov, ov, 3)
    np.testing.assert_allclose(mpv[:, 0, 0], xv[:, :k, :k].max((1, 2)))


def test_layers_shapes_and_names():
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    c = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu)
    p = tf.layers.max_pooling2d(c, 2, 2)
    f = tf.layers.flatten(p)
    d = tf.layers.dense(f, 10)
    d2 = tf.layers.dense(f, 5, name="head")
    assert c.shape.as_list() == [None, 8, 8, 4]
    assert p.shape.as_list() == [None, 4, 4, 4]
    assert f.shape.as_list() == [None, 64]
    assert d.shape.as_list() == [None, 10]
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == [
        "conv2d/bias:0",
        "conv2d/kernel:0",
        "dense/bias:0",
        "dense/kernel:0",
        "head/bias:0",
        "head/kernel:0",
    ]
    xv = RNG.standard_normal((2, 8, 8, 1)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out, k, bias = sess.run([d2, "head/kernel:0", tf.trainable_variables()[-1]], {x: xv})
        kc, bc = sess.run(["conv2d/kernel:0", "conv2d/bias:0"])
    conv = np.maximum(_np_conv_nhwc(xv, kc, (1, 1), ((1, 1), (1, 1))) + bc, 0)
    pooled = conv.reshape(2, 4, 2, 4, 2, 4).max((2, 4))
    np.testing.assert_allclose(out, pooled.reshape(2, -1) @ k + bias, rtol=1e-4, atol=1e-5)
