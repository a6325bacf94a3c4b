"""Classic TF1 tutorial programs, run by ``import ferrograd.compat.v1 as tf``.

Linear and logistic regression, an MLP and a small CNN in NHWC on the
digits (8x8 images, served as the old MNIST tutorial helper served them:
``next_batch`` with one-hot labels), a save/restore round trip and a
TensorBoard summary run. Each model reaches a stated accuracy, and the same
model written in eager ferrograd (same initial weights, same batches)
reaches the same.
"""

from __future__ import annotations

import glob
import os

import ferrograd as fg
import ferrograd.compat.v1 as tf
import ferrograd.nn.functional as F
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


# ----------------------------------------------------------------------------- the data, MNIST-tutorial style


from tf1_digits import DataSet  # noqa: E402  (what mnist.train was)


class Digits:
    def __init__(self) -> None:
        datasets = pytest.importorskip(
            "sklearn.datasets",
            reason="sklearn is not installed (pip install -e '.[demo]' for the digits data)",
        )
        d = datasets.load_digits()
        order = np.random.default_rng(42).permutation(len(d.target))  # the writers mixed over both parts
        x = (d.data[order] / 16.0).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[d.target[order]]
        self.train = DataSet(x[:1440], y[:1440])
        self.test = DataSet(x[1440:], y[1440:])


def _batches(seed: int, n: int, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    data = Digits().train
    data._rng = np.random.default_rng(seed)
    return [data.next_batch(size) for _ in range(n)]


# ----------------------------------------------------------------------------- linear regression


def test_linear_regression():
    rng = np.random.default_rng(1)
    train_X = rng.uniform(0, 10, 17).astype(np.float32)
    train_Y = (0.3 * train_X + 1.5 + rng.normal(0, 0.2, 17)).astype(np.float32)
    n_samples = train_X.shape[0]
    w0, b0 = 0.1, -0.2

    # The program, as the tutorial wrote it.
    X = tf.placeholder("float")
    Y = tf.placeholder("float")
    W = tf.Variable(w0, name="weight")
    b = tf.Variable(b0, name="bias")
    pred = tf.add(tf.multiply(X, W), b)
    cost = tf.reduce_sum(tf.pow(pred - Y, 2)) / (2 * n_samples)
    optimizer = tf.train.GradientDescentOptimizer(0.01).minimize(cost)
    init = tf.global_variables_initializer()
    with tf.Session() as sess:
        sess.run(init)
        c0 = sess.run(cost, feed_dict={X: train_X, Y: train_Y})
        for _epoch in range(20):
            for x, y in zip(train_X, train_Y, strict=True):
                sess.run(optimizer, feed_dict={X: x, Y: y})
        for _ in range(1500):  # then full-batch steps through the same unshaped placeholders
            sess.run(optimizer, feed_dict={X: train_X, Y: train_Y})
        c1 = sess.run(cost, feed_dict={X: train_X, Y: train_Y})
        w_tf, b_tf = sess.run(W), sess.run(b)

    # The same in eager ferrograd.
    w = fg.tensor(w0, requires_grad=True)
    bb = fg.tensor(b0, requires_grad=True)

    def step(xv, yv):
        loss = ((fg.tensor(xv) * w + bb - fg.tensor(yv)) ** 2).sum() / (2 * n_samples)
        gw, gb = fg.autograd.grad(loss, [w, bb])
        with fg.no_grad():
            w.sub_(0.01 * gw)
            bb.sub_(0.01 * gb)

    for _epoch in range(20):
        for x, y in zip(train_X, train_Y, strict=True):
            step(x, y)
    for _ in range(1500):
        step(train_X, train_Y)

    assert c1 < 0.2 * c0
    assert w_tf == pytest.approx(w.item(), rel=1e-4) and b_tf == pytest.approx(bb.item(), rel=1e-4, abs=1e-5)
    slope, icpt = np.polyfit(train_X, train_Y, 1)
    assert w_tf == pytest.approx(slope, abs=0.05) and b_tf == pytest.approx(icpt, abs=0.3)


# ----------------------------------------------------------------------------- logistic regression


def test_logistic_regression_on_digits():
    mnist = Digits()
    lr, steps, batch = 0.5, 500, 100

    x = tf.placeholder(tf.float32, [None, 64])
    y = tf.placeholder(tf.float32, [None, 10])
    W = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    pred = tf.nn.softmax(tf.matmul(x, W) + b)
    cost = tf.reduce_mean(-tf.reduce_sum(y * tf.log(pred), reduction_indices=1))
    optimizer = tf.train.GradientDescentOptimizer(lr).minimize(cost)
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(steps):
            batch_xs, batch_ys = mnist.train.next_batch(batch)
            _, c = sess.run([optimizer, cost], feed_dict={x: batch_xs, y: batch_ys})
            losses.append(c)
        correct = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        acc = accuracy.eval({x: mnist.test.images, y: mnist.test.labels})

    # Eager, same batches.
    data = Digits()
    We = fg.zeros(64, 10, requires_grad=True)
    be = fg.zeros(10, requires_grad=True)
    e_losses = []
    for _ in range(steps):
        bx, by = data.train.next_batch(batch)
        p = (fg.tensor(bx) @ We + be).softmax(1)
        loss = (-(fg.tensor(by) * p.log()).sum(1)).mean()
        gW, gb = fg.autograd.grad(loss, [We, be])
        with fg.no_grad():
            We.sub_(lr * gW)
            be.sub_(lr * gb)
        e_losses.append(loss.item())
    with fg.no_grad():
        e_acc = (
            (fg.tensor(data.test.images) @ We + be).numpy().argmax(1) == data.test.labels.argmax(1)
        ).mean()

    assert losses[0] == pytest.approx(np.log(10), rel=1e-5)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-3, atol=1e-4)
    assert acc > 0.93, (acc, e_acc)  # 0.95 in both
    assert abs(acc - e_acc) <= 1 / len(data.test.images) + 1e-6, (acc, e_acc)


# ----------------------------------------------------------------------------- multilayer perceptron


def test_mlp_on_digits_matches_eager():
    mnist = Digits()
    n_input, n_hidden_1, n_hidden_2, n_classes = 64, 64, 32, 10
    lr, steps, batch = 0.01, 250, 64
    tf.set_random_seed(0)

    x = tf.placeholder("float", [None, n_input])
    y = tf.placeholder("float", [None, n_classes])
    weights = {
        "h1": tf.Variable(tf.random_normal([n_input, n_hidden_1], stddev=0.1)),
        "h2": tf.Variable(tf.random_normal([n_hidden_1, n_hidden_2], stddev=0.1)),
        "out": tf.Variable(tf.random_normal([n_hidden_2, n_classes], stddev=0.1)),
    }
    biases = {
        "b1": tf.Variable(tf.zeros([n_hidden_1])),
        "b2": tf.Variable(tf.zeros([n_hidden_2])),
        "out": tf.Variable(tf.zeros([n_classes])),
    }

    def multilayer_perceptron(x, weights, biases):
        layer_1 = tf.nn.relu(tf.add(tf.matmul(x, weights["h1"]), biases["b1"]))
        layer_2 = tf.nn.relu(tf.add(tf.matmul(layer_1, weights["h2"]), biases["b2"]))
        return tf.matmul(layer_2, weights["out"]) + biases["out"]

    pred = multilayer_perceptron(x, weights, biases)
    cost = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=pred, labels=y))
    optimizer = tf.train.AdamOptimizer(learning_rate=lr).minimize(cost)
    init = tf.global_variables_initializer()
    losses = []
    with tf.Session() as sess:
        sess.run(init)
        start = sess.run({**weights, **{"b_" + k: v for k, v in biases.items()}})
        for _ in range(steps):
            batch_x, batch_y = mnist.train.next_batch(batch)
            _, c = sess.run([optimizer, cost], feed_dict={x: batch_x, y: batch_y})
            losses.append(c)
        correct_prediction = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
        accuracy = tf.reduce_mean(tf.cast(correct_prediction, "float"))
        acc = accuracy.eval({x: mnist.test.images, y: mnist.test.labels})

    # The same model in eager ferrograd, from the same initial weights, on the same batches.
    data = Digits()
    params = [fg.tensor(start[k], requires_grad=True) for k in ("h1", "b_b1", "h2", "b_b2", "out", "b_out")]
    opt = fg.optim.Adam(params, lr=lr, eps=1e-8)

    def forward(xb):
        h1, b1, h2, b2, o, bo = params
        return ((xb @ h1 + b1).relu() @ h2 + b2).relu() @ o + bo

    e_losses = []
    for _ in range(steps):
        bx, by = data.train.next_batch(batch)
        loss = F.cross_entropy(forward(fg.tensor(bx)), fg.tensor(by.argmax(1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        e_losses.append(loss.item())
    with fg.no_grad():
        e_acc = (forward(fg.tensor(data.test.images)).numpy().argmax(1) == data.test.labels.argmax(1)).mean()

    assert np.mean(losses[-20:]) < 0.25 * losses[0]
    # TF1's Adam puts epsilon outside the bias correction and sums in another order: the paths
    # agree closely, then drift apart slowly as rounding compounds.
    np.testing.assert_allclose(losses[:10], e_losses[:10], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(losses[:50], e_losses[:50], rtol=5e-2)
    assert acc > 0.93, (acc, e_acc)  # 0.95 here, 0.96 eager
    assert abs(acc - e_acc) <= 0.025, (acc, e_acc)


# ----------------------------------------------------------------------------- convolutional network (NHWC)


def test_cnn_nhwc_on_digits_matches_eager():
    mnist = Digits()
    lr, steps, batch, dropout = 0.01, 150, 64, 0.8
    tf.set_random_seed(1)

    def conv2d(x, W, b, strides=1):
        x = tf.nn.conv2d(x, W, strides=[1, strides, strides, 1], padding="SAME")
        return tf.nn.relu(tf.nn.bias_add(x, b))

    def maxpool2d(x, k=2):
        return tf.nn.max_pool(x, ksize=[1, k, k, 1], strides=[1, k, k, 1], padding="SAME")

    weights = {
        "wc1": tf.Variable(tf.truncated_normal([3, 3, 1, 16], stddev=0.2)),
        "wc2": tf.Variable(tf.truncated_normal([3, 3, 16, 32], stddev=0.1)),
        "wd1": tf.Variable(tf.truncated_normal([2 * 2 * 32, 64], stddev=0.1)),
        "out": tf.Variable(tf.truncated_normal([64, 10], stddev=0.1)),
    }
    biases = {
        k: tf.Variable(tf.constant(0.1, shape=[n]))
        for k, n in (("bc1", 16), ("bc2", 32), ("bd1", 64), ("out", 10))
    }

    def conv_net(x, weights, biases, dropout):
        x = tf.reshape(x, shape=[-1, 8, 8, 1])
        conv1 = maxpool2d(conv2d(x, weights["wc1"], biases["bc1"]))  # 4x4
        conv2 = maxpool2d(conv2d(conv1, weights["wc2"], biases["bc2"]))  # 2x2
        fc1 = tf.reshape(conv2, [-1, weights["wd1"].get_shape().as_list()[0]])
        fc1 = tf.nn.relu(tf.add(tf.matmul(fc1, weights["wd1"]), biases["bd1"]))
        fc1 = tf.nn.dropout(fc1, dropout)
        return tf.add(tf.matmul(fc1, weights["out"]), biases["out"])

    X = tf.placeholder(tf.float32, [None, 64])
    Y = tf.placeholder(tf.float32, [None, 10])
    keep_prob = tf.placeholder(tf.float32)
    logits = conv_net(X, weights, biases, keep_prob)
    prediction = tf.nn.softmax(logits)
    loss_op = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=Y))
    train_op = tf.train.AdamOptimizer(learning_rate=lr).minimize(loss_op)
    correct_pred = tf.equal(tf.argmax(prediction, 1), tf.argmax(Y, 1))
    accuracy = tf.reduce_mean(tf.cast(correct_pred, tf.float32))
    assert logits.shape.as_list() == [None, 10]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        start = sess.run({**weights, **{"b_" + k: v for k, v in biases.items()}})
        first = None
        for _ in range(steps):
            batch_x, batch_y = mnist.train.next_batch(batch)
            sess.run(train_op, feed_dict={X: batch_x, Y: batch_y, keep_prob: dropout})
            if first is None:
                first = sess.run(loss_op, feed_dict={X: batch_x, Y: batch_y, keep_prob: 1.0})
        last = sess.run(loss_op, feed_dict={X: mnist.train.images, Y: mnist.train.labels, keep_prob: 1.0})
        acc = sess.run(accuracy, feed_dict={X: mnist.test.images, Y: mnist.test.labels, keep_prob: 1.0})

    # Eager ferrograd, NCHW, from the same weights and batches (dropout draws differ).
    data = Digits()
    k = {
        n: fg.tensor(np.ascontiguousarray(start[n].transpose(3, 2, 0, 1)), requires_grad=True)
        for n in ("wc1", "wc2")
    }
    p = {n: fg.tensor(v, requires_grad=True) for n, v in start.items() if n not in ("wc1", "wc2")}
    opt = fg.optim.Adam([*k.values(), *p.values()], lr=lr, eps=1e-8)

    def net(xb, train):
        h = xb.reshape(-1, 1, 8, 8)
        h = F.max_pool2d(F.pad(F.conv2d(h, k["wc1"], p["b_bc1"], padding=1).relu(), [0, 0, 0, 0]), 2, 2)
        h = F.max_pool2d(F.conv2d(h, k["wc2"], p["b_bc2"], padding=1).relu(), 2, 2)
        h = h.permute(0, 2, 3, 1).reshape(-1, 128)  # flattened in NHWC order, as the TF program does
        h = F.dropout((h @ p["wd1"] + p["b_bd1"]).relu(), 1 - dropout, training=train)
        return h @ p["out"] + p["b_out"]

    for _ in range(steps):
        bx, by = data.train.next_batch(batch)
        loss = F.cross_entropy(net(fg.tensor(bx), True), fg.tensor(by.argmax(1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with fg.no_grad():
        e_acc = (
            net(fg.tensor(data.test.images), False).numpy().argmax(1) == data.test.labels.argmax(1)
        ).mean()

    assert last < 0.3 * first, (first, last)
    assert acc > 0.93, (acc, e_acc)  # 0.96 in both
    assert e_acc > 0.93, (acc, e_acc)
    assert abs(acc - e_acc) <= 0.03, (acc, e_acc)


# ----------------------------------------------------------------------------- save and restore


def _softmax_model():
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    y = tf.placeholder(tf.float32, [None, 10], name="y")
    W = tf.Variable(tf.zeros([64, 10]), name="W")
    b = tf.Variable(tf.zeros([10]), name="b")
    logits = tf.matmul(x, W) + b
    cost = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    gs = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(0.05).minimize(cost, global_step=gs)
    return x, y, logits, cost, train, gs


def test_save_restore_round_trip(tmp_path):
    mnist = Digits()
    x, y, logits, cost, train, gs = _softmax_model()
    saver = tf.train.Saver(max_to_keep=2)
    ckdir = str(tmp_path / "ckpt")
    paths = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(30):
            bx, by = mnist.train.next_batch(50)
            sess.run(train, {x: bx, y: by})
            if i % 10 == 9:
                paths.append(saver.save(sess, os.path.join(ckdir, "model.ckpt"), global_step=gs))
        want_logits = sess.run(logits, {x: mnist.test.images})
        want_vars = sess.run({v.name: v for v in tf.global_variables()})
        # More training after the save: not in the checkpoint.
        sess.run(train, {x: mnist.test.images, y: mnist.test.labels})
    assert paths[-1].endswith("model.ckpt-30") and os.path.exists(paths[-1] + ".safetensors")
    assert not os.path.exists(paths[0] + ".safetensors")  # max_to_keep=2 dropped the oldest
    assert tf.train.latest_checkpoint(ckdir) == paths[-1]
    assert {os.path.basename(p) for p in saver.last_checkpoints()} == {"model.ckpt-20", "model.ckpt-30"}
    with open(os.path.join(ckdir, "checkpoint")) as f:
        assert f.readline().strip() == 'model_checkpoint_path: "model.ckpt-30"'
    assert {"W/Adam:0", "W/Adam_v:0", "beta1_power:0", "global_step:0"} <= set(want_vars)

    # A new program restores it, without running the initializer.
    tf.reset_default_graph()
    x, y, logits, cost, train, gs = _softmax_model()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(logits, {x: mnist.test.images})
        saver.restore(sess, tf.train.latest_checkpoint(ckdir))
        np.testing.assert_allclose(sess.run(logits, {x: mnist.test.images}), want_logits, rtol=1e-6)
        assert sess.run(gs) == 30
        got_vars = sess.run({v.name: v for v in tf.global_variables()})
        for k, v in want_vars.items():
            np.testing.assert_array_equal(got_vars[k], v, err_msg=k)
        sess.run(train, {x: mnist.test.images, y: mnist.test.labels})  # training resumes from the slots
        assert sess.run(gs) == 31
        with pytest.raises(tf.errors.NotFoundError):
            saver.restore(sess, os.path.join(ckdir, "nothing-here"))
    assert tf.train.latest_checkpoint(str(tmp_path / "empty")) is None


# ----------------------------------------------------------------------------- TensorBoard


def test_summaries_and_file_writer(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    mnist = Digits()
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    y = tf.placeholder(tf.float32, [None, 10], name="y")
    with tf.name_scope("model"):
        W = tf.Variable(tf.zeros([64, 10]), name="W")
        b = tf.Variable(tf.zeros([10]), name="b")
        pred = tf.nn.softmax(tf.matmul(x, W) + b)
    with tf.name_scope("loss"):
        cost = tf.reduce_mean(-tf.reduce_sum(y * tf.log(pred), reduction_indices=1))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(cost)
    tf.summary.scalar("loss", cost)
    tf.summary.histogram("weights", W)
    merged = tf.summary.merge_all()
    logdir = str(tmp_path / "logs")
    costs = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        writer = tf.summary.FileWriter(logdir, graph=tf.get_default_graph())
        for step in range(5):
            bx, by = mnist.train.next_batch(100)
            _, c, s = sess.run([train, cost, merged], feed_dict={x: bx, y: by})
            assert isinstance(s, bytes)
            writer.add_summary(s, step)
            costs.append(c)
        writer.close()
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1
    scalars, histos, graphs = {}, 0, 0
    for ev in LegacyEventFileLoader(files[0]).Load():  # the events as written, not migrated
        if ev.HasField("graph_def"):
            graphs += 1
        for v in ev.summary.value:
            if v.HasField("histo"):
                histos += 1
                assert v.tag == "weights" and v.histo.num == 640
            elif v.HasField("simple_value"):
                scalars[ev.step] = (v.tag, v.simple_value)
    assert graphs == 1 and histos == 5
    # The name scope "loss" holds the name, so the summary is "loss_1", as in TF1.
    assert [scalars[i][0] for i in range(5)] == ["loss_1"] * 5
    np.testing.assert_allclose([scalars[i][1] for i in range(5)], costs, rtol=1e-6)
    assert tf.summary.merge_all(key="nothing") is None


def test_layers_program_with_dropout_switch():
    """tf.layers and tf.losses, with dropout switched by a bool placeholder."""
    mnist = Digits()
    tf.set_random_seed(2)
    x = tf.placeholder(tf.float32, [None, 64])
    labels = tf.placeholder(tf.int64, [None])
    training = tf.placeholder_with_default(False, [])
    h = tf.layers.dense(x, 64, activation=tf.nn.relu)
    h = tf.layers.dropout(h, rate=0.3, training=training)
    logits = tf.layers.dense(h, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(200):
            bx, by = mnist.train.next_batch(64)
            sess.run(train, {x: bx, labels: by.argmax(1), training: True})
        a1 = sess.run(acc, {x: mnist.test.images, labels: mnist.test.labels.argmax(1)})
        a2 = sess.run(acc, {x: mnist.test.images, labels: mnist.test.labels.argmax(1)})
        noisy = sess.run(logits, {x: mnist.test.images[:5], training: True})
        clean = sess.run(logits, {x: mnist.test.images[:5]})
    assert a1 > 0.93, a1
    assert a1 == a2  # dropout is off unless fed True
    assert not np.allclose(noisy, clean)
    assert len(tf.get_collection(tf.GraphKeys.LOSSES)) == 1


def test_saving_an_uninitialized_variable_is_refused(tmp_path):
    tf.Variable(tf.zeros([2]), name="v")
    with (
        tf.Session() as sess,
        pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized variable v"),
    ):
        tf.train.Saver().save(sess, str(tmp_path / "m"))
    assert not os.listdir(tmp_path)
