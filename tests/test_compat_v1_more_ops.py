"""TF1 names added for tutorial programs, against NumPy with TF's conventions.

``cumsum`` (``exclusive``/``reverse``), ``reverse``, ``slice`` (``-1`` sizes),
``count_nonzero``, ``norm``, ``tensordot``, ``einsum``, ``eye``,
``is_nan``/``is_inf``/``is_finite``, ``convert_to_tensor``, the pre-1.0
``mul``/``sub``, ``tf.nn.top_k`` (int32 indices), ``selu``, ``softsign``,
``tf.summary.image`` (PNG, TF1's float scaling), ``tf.gfile`` and
``tf.layers.batch_normalization`` (UPDATE_OPS, a training switch). The
differentiable ones are checked against central finite differences in
float64 through ``tf.gradients``; bad arguments raise naming the op and shape.
"""

from __future__ import annotations

import glob
import struct
import zlib

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
        return sess.run(fetches, feed_dict=feed)


RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4))
Y = RNG.standard_normal((5, 4))


def _np_cumsum(x, axis, exclusive, reverse):
    v = np.flip(x, axis) if reverse else x
    s = np.cumsum(v, axis)
    if exclusive:
        s = s - v
    return np.flip(s, axis) if reverse else s


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum_forms(axis, exclusive, reverse):
    got = run(tf.cumsum(tf.constant(X), axis=axis, exclusive=exclusive, reverse=reverse))
    np.testing.assert_allclose(got, _np_cumsum(X, axis, exclusive, reverse), rtol=1e-12, atol=1e-12)
    # Hand case: TF's documented example, cumsum([a, b, c], exclusive=True, reverse=True) = [b + c, c, 0].
    hand = run(tf.cumsum(tf.constant([1.0, 2.0, 4.0]), exclusive=True, reverse=True))
    np.testing.assert_array_equal(hand, [6.0, 4.0, 0.0])


def test_reverse_slice_eye_count_nonzero():
    x = tf.constant(X)
    r0, r01, s, s2, e, eb = run(
        [
            tf.reverse(x, [0]),
            tf.reverse_v2(x, axis=[0, 1]),
            tf.slice(x, [1, 1], [2, -1]),
            tf.slice(x, [0, 2], [-1, 1]),
            tf.eye(2, 3),
            tf.eye(2, batch_shape=[3], dtype=tf.int32),
        ]
    )
    np.testing.assert_array_equal(r0, X[::-1])
    np.testing.assert_array_equal(r01, X[::-1, ::-1])
    np.testing.assert_array_equal(s, X[1:3, 1:])
    np.testing.assert_array_equal(s2, X[:, 2:3])
    np.testing.assert_array_equal(e, np.eye(2, 3, dtype=np.float32))
    assert eb.dtype == np.int32 and eb.shape == (3, 2, 2) and (eb == np.eye(2)).all()
    z = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    c_all, c0, c1k = run(
        [
            tf.count_nonzero(tf.constant(z)),
            tf.count_nonzero(tf.constant(z), axis=0),
            tf.count_nonzero(tf.constant(z), reduction_indices=1, keep_dims=True, dtype=tf.int32),
        ]
    )
    assert c_all == 3 and c_all.dtype == np.int64
    np.testing.assert_array_equal(c0, [1, 1, 1])
    assert c1k.dtype == np.int32
    np.testing.assert_array_equal(c1k, [[1], [2]])


def test_norms_tensordot_einsum_transpose():
    x, y = tf.constant(X), tf.constant(Y)
    n2, n1, ninf, nax, td, td2, es, mt = run(
        [
            tf.norm(x),
            tf.norm(x, ord=1, axis=1),
            tf.norm(x, ord=np.inf, axis=0, keepdims=True),
            tf.norm(x, axis=[1]),
            tf.tensordot(x, y, [[1], [1]]),
            tf.tensordot(tf.constant(X.T), tf.constant(X), 1),
            tf.einsum("ij,kj->ik", x, y),
            tf.matrix_transpose(tf.constant(RNG.standard_normal((2, 3, 4)) * 0 + 1.0)),
        ]
    )
    np.testing.assert_allclose(n2, np.linalg.norm(X), rtol=1e-12)
    np.testing.assert_allclose(n1, np.abs(X).sum(1), rtol=1e-12)
    np.testing.assert_allclose(ninf, np.abs(X).max(0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(nax, np.linalg.norm(X, axis=1), rtol=1e-12)
    np.testing.assert_allclose(td, X @ Y.T, rtol=1e-12)
    np.testing.assert_allclose(td2, X.T @ X, rtol=1e-12)
    np.testing.assert_allclose(es, X @ Y.T, rtol=1e-12)
    assert mt.shape == (2, 4, 3)


def test_nan_inf_predicates_convert_and_old_names():
    v = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    t = tf.convert_to_tensor(v)
    assert tf.convert_to_tensor(t) is t
    with pytest.raises(ValueError, match=r"convert_to_tensor: a float32 tensor .* int32"):
        tf.convert_to_tensor(t, dtype=tf.int32)
    nan, inf, fin, m, s = run(
        [
            tf.is_nan(t),
            tf.is_inf(t),
            tf.math.is_finite(t),
            tf.mul(2.0, tf.constant(3.0)),
            tf.sub(5.0, tf.constant(3.0)),
        ]
    )
    np.testing.assert_array_equal(nan, np.isnan(v))
    np.testing.assert_array_equal(inf, np.isinf(v))
    np.testing.assert_array_equal(fin, np.isfinite(v))
    assert m == 6.0 and s == 2.0


def test_top_k_selu_softsign():
    x = tf.constant(X)
    (vals, idx), se, ss = run([tf.nn.top_k(x, k=2), tf.nn.selu(x), tf.nn.softsign(x)])
    order = np.argsort(-X, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(idx, order)
    assert idx.dtype == np.int32
    np.testing.assert_array_equal(vals, np.take_along_axis(X, order, 1))
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    np.testing.assert_allclose(se, scale * np.where(X > 0, X, alpha * np.expm1(X)), rtol=1e-12)
    np.testing.assert_allclose(ss, X / (np.abs(X) + 1), rtol=1e-12)


GRAD_CASES = {
    "cumsum_excl_rev": lambda t: tf.cumsum(t, axis=1, exclusive=True, reverse=True),
    "reverse": lambda t: tf.reverse(t, [0, 1]),
    "slice": lambda t: tf.slice(t, [1, 0], [-1, 3]),
    "norm": lambda t: tf.norm(t, axis=1),
    "norm_l1": lambda t: tf.norm(t, ord=1),
    "tensordot": lambda t: tf.tensordot(t, tf.constant(Y), [[1], [1]]),
    "einsum": lambda t: tf.einsum("ij,ij->i", t, t),
    "selu": lambda t: tf.nn.selu(t),
    "softsign": lambda t: tf.nn.softsign(t),
    "top_k_values": lambda t: tf.nn.top_k(t, 2)[0],
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_match_finite_differences(case):
    make = GRAD_CASES[case]
    x = tf.placeholder(tf.float64, [3, 4])
    w = tf.constant(RNG.standard_normal(4))  # a fixed cotangent, broadcast on the last dim where it fits
    out = make(x)
    loss = (
        tf.reduce_sum(out * tf.ones_like(out) * (1.0 + tf.reduce_sum(w) * 0.0))
        + tf.reduce_sum(out * out) * 0.5
    )
    (g,) = tf.gradients(loss, [x])
    with tf.Session() as sess:
        got = sess.run(g, {x: X})
        f = lambda v: float(sess.run(loss, {x: v}))  # noqa: E731
        num = np.zeros_like(X)
        h = 1e-6
        for i in np.ndindex(X.shape):
            e = np.zeros_like(X)
            e[i] = h
            num[i] = (f(X + e) - f(X - e)) / (2 * h)
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-6, err_msg=case)


def test_bad_arguments_name_the_op_and_shape():
    x = tf.placeholder(tf.float32, [3, 4], name="x")
    with pytest.raises(ValueError, match=r"slice: .*x:0 \(shape \(3, 4\)\)"):
        tf.slice(x, [2, 0], [2, 4])
    with pytest.raises(
        ValueError, match=r"slice: begin \[0\] and size \[1\] must have one entry per dim of x:0"
    ):
        tf.slice(x, [0], [1])
    with pytest.raises(ValueError, match=r"cumsum: axis 2 is out of range for x:0 of rank 2"):
        tf.cumsum(x, axis=2)
    with pytest.raises(ValueError, match=r"top_k: k = 5 is out of range for the last dim of x:0 \(size 4\)"):
        tf.nn.top_k(x, 5)
    with pytest.raises(ValueError, match=r"norm: ord must be"):
        tf.norm(x, ord=3)
    with pytest.raises(ValueError, match=r"tf.summary.image 'bad': .*x:0 of shape"):
        tf.summary.image("bad", x)


def _png_pixels(data: bytes) -> tuple[int, int, int, np.ndarray]:
    """Decode the 8-bit, unfiltered PNGs the summary writes (header fields and pixels)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        assert (
            struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])[0] == zlib.crc32(kind + body) & 0xFFFFFFFF
        )
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color = hdr[0], hdr[1], hdr[2], hdr[3]
    c = {0: 1, 4: 2, 2: 3, 6: 4}[color]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    assert depth == 8 and (raw[:, 0] == 0).all()
    return w, h, c, raw[:, 1:].reshape(h, w, c)


def test_image_summary_scales_as_tf1_and_writes_png(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (summaries are its protos)")
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.compat.proto import summary_pb2

    pos = np.zeros((2, 3, 2, 1), np.float32)
    pos[0, :, :, 0] = [[0.0, 0.5], [1.0, 2.0], [0.25, 0.0]]  # all >= 0: the largest becomes 255
    pos[1, :, :, 0] = 1.0
    neg = np.array([[[[-2.0], [0.0]], [[1.0], [2.0]]]], np.float32)  # 0 -> 127, scaled by 127 / 2
    ph = tf.placeholder(tf.float32, [None, 3, 2, 1])
    with tf.name_scope("in"):
        s_many = tf.summary.image("digits", ph, max_outputs=3)
    s_one = tf.summary.image("signed", tf.constant(neg), max_outputs=1)
    merged = tf.summary.merge_all()
    with tf.Session() as sess:
        a, b, m = sess.run([s_many, s_one, merged], {ph: pos})
        w = tf.summary.FileWriter(str(tmp_path), sess.graph)
        w.add_summary(m, 0)
        w.close()
    sa = summary_pb2.Summary.FromString(a)
    assert [v.tag for v in sa.value] == ["in/digits/image/0", "in/digits/image/1"]
    w0, h0, c0, p0 = _png_pixels(sa.value[0].image.encoded_image_string)
    assert (w0, h0, c0) == (2, 3, 1) and sa.value[0].image.height == 3
    np.testing.assert_array_equal(p0[:, :, 0], np.round(pos[0, :, :, 0] * 255 / 2.0).astype(np.uint8))
    np.testing.assert_array_equal(_png_pixels(sa.value[1].image.encoded_image_string)[3], 255)
    sb = summary_pb2.Summary.FromString(b)
    assert [v.tag for v in sb.value] == ["signed/image"]
    got = _png_pixels(sb.value[0].image.encoded_image_string)[3][:, :, 0]
    np.testing.assert_array_equal(got, np.round(neg[0, :, :, 0] * 127 / 2 + 127).astype(np.uint8))
    files = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    tags = {v.tag for ev in LegacyEventFileLoader(files[0]).Load() for v in ev.summary.value}
    assert {"in/digits/image/0", "in/digits/image/1", "signed/image"} <= tags


def test_gfile(tmp_path):
    d = tmp_path / "logs" / "run1"
    assert not tf.gfile.Exists(str(d))
    tf.gfile.MakeDirs(str(d))
    tf.gfile.MakeDirs(str(d))  # exists: no error
    assert tf.gfile.IsDirectory(str(d))
    with tf.gfile.GFile(str(d / "a.txt"), "w") as f:
        f.write("hello")
    with tf.gfile.Open(str(d / "a.txt")) as f:
        assert f.read() == "hello"
    tf.gfile.Copy(str(d / "a.txt"), str(d / "b.txt"))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        tf.gfile.Copy(str(d / "a.txt"), str(d / "b.txt"))
    assert tf.gfile.ListDirectory(str(d)) == ["a.txt", "b.txt"]
    assert tf.gfile.Glob(str(d / "*.txt")) == [str(d / "a.txt"), str(d / "b.txt")]
    tf.gfile.DeleteRecursively(str(tmp_path / "logs"))
    assert not tf.gfile.Exists(str(tmp_path / "logs"))


def test_layers_batch_normalization_training_switch_and_updates():
    x = tf.placeholder(tf.float64, [None, 3, 2])
    training = tf.placeholder(tf.bool, [])
    y = tf.layers.batch_normalization(x, axis=1, training=training, momentum=0.9)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    names = sorted(v.name for v in tf.global_variables())
    assert names == [
        "batch_normalization/beta:0",
        "batch_normalization/gamma:0",
        "batch_normalization/moving_mean:0",
        "batch_normalization/moving_variance:0",
    ]
    assert sorted(v.name for v in tf.trainable_variables()) == names[:2]
    mm = tf.get_default_graph().get_tensor_by_name("batch_normalization/moving_mean:0")
    mv = tf.get_default_graph().get_tensor_by_name("batch_normalization/moving_variance:0")
    xs = RNG.standard_normal((4, 3, 2)) * 2 + 1
    m, v = xs.mean((0, 2)), xs.var((0, 2))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out, _ = sess.run([y, updates], {x: xs, training: True})
        np.testing.assert_allclose(
            out, (xs - m[:, None]) / np.sqrt(v[:, None] + 1e-3), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(sess.run(mm), 0.1 * m, rtol=1e-12)
        np.testing.assert_allclose(sess.run(mv), 0.9 + 0.1 * v, rtol=1e-12)
        # Not training: the moving statistics normalize, and the updates leave them as they are.
        out2, _ = sess.run([y, updates], {x: xs, training: False})
        np.testing.assert_allclose(sess.run(mm), 0.1 * m, rtol=1e-12)
        want = (xs - 0.1 * m[:, None]) / np.sqrt(0.9 + 0.1 * v[:, None] + 1e-3)
        np.testing.assert_allclose(out2, want, rtol=1e-12, atol=1e-12)


def test_layers_batch_normalization_python_flags_and_gradient():
    x = tf.placeholder(tf.float64, [5, 3])
    y_eval = tf.layers.batch_normalization(x, training=False, name="bn")
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    y = tf.layers.batch_normalization(x, training=True, name="bn", reuse=True)
    w = tf.constant(RNG.standard_normal((5, 3)))
    loss = tf.reduce_sum(y * w)
    (g,) = tf.gradients(loss, [x])
    xs = RNG.standard_normal((5, 3))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(y_eval, {x: xs}), xs / np.sqrt(1 + 1e-3), rtol=1e-12)
        got = sess.run(g, {x: xs})
        f = lambda v: float(sess.run(loss, {x: v}))  # noqa: E731
        num = np.zeros_like(xs)
        for i in np.ndindex(xs.shape):
            e = np.zeros_like(xs)
            e[i] = 1e-6
            num[i] = (f(xs + e) - f(xs - e)) / 2e-6
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"batch_normalization: axis 2 is not one dim of .* \(rank 2\)"):
        tf.layers.batch_normalization(x, axis=2)
