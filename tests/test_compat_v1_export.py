"""Exporting the captured graph of a TF1 program: ``Session.to_fg_graph``.

The graph computing some fetches is an ordinary ``ferrograd.Graph``: it runs
when called, ``Graph.save`` writes it for ``load_graph`` and the Rust-only
runner, and ``fg.onnx.export`` exports an inference graph (a training step,
whose gradient and update ops have no ONNX form, is refused naming the op).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import ferrograd as fg
import ferrograd.compat.v1 as tf
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((16, 4)).astype(np.float32)
    ys = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
    return xs, ys


def _softmax_regression(opt: tf.train.Optimizer):
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y = tf.placeholder(tf.float32, [None, 3], name="y")
    W = tf.Variable(tf.random_normal([4, 3], stddev=0.1, seed=1), name="W")
    b = tf.Variable(tf.zeros([3]), name="b")
    logits = tf.matmul(x, W) + b
    prob = tf.nn.softmax(logits, name="prob")
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
    train = opt.minimize(loss)
    return x, y, prob, loss, train


def _runner() -> Path | None:
    env = os.environ.get("FG_RUN_GRAPH_BIN")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parents[1]
    for profile in ("release", "debug"):
        p = root / "target" / profile / "examples" / "run_graph"
        if p.exists():
            return p
    return None


def test_inference_graph_runs_saves_and_loads(tmp_path):
    x, y, prob, loss, train = _softmax_regression(tf.train.GradientDescentOptimizer(0.5))
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(5):
            sess.run(train, {x: xs, y: ys})
        want = sess.run(prob, {x: xs})
        graph = sess.to_fg_graph(prob)
    assert [i["name"] for i in graph._built().inputs() if i["kind"] == "arg"] == ["x"]
    np.testing.assert_array_equal(graph(x=xs).numpy(), want)
    graph.save(tmp_path / "prob.fgraph")
    loaded = fg.load_graph(tmp_path / "prob.fgraph")
    np.testing.assert_array_equal(loaded(xs).numpy(), want)
    # Another batch size: the placeholder's None dim stays symbolic.
    np.testing.assert_allclose(loaded(xs[:5]).numpy(), want[:5], rtol=1e-6, atol=1e-7)


def test_inference_graph_runs_in_the_rust_only_runner(tmp_path):
    exe = _runner()
    if exe is None:
        pytest.skip(
            "the Rust runner is not built (cargo build --release --no-default-features --example run_graph; "
            "scripts/test.sh builds it and sets FG_RUN_GRAPH_BIN)"
        )
    x, y, prob, loss, train = _softmax_regression(tf.train.GradientDescentOptimizer(0.5))
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(5):
            sess.run(train, {x: xs, y: ys})
        want = sess.run(prob, {x: xs})
        sess.to_fg_graph(prob).save(tmp_path / "prob.fgraph")
    np.save(tmp_path / "x.npy", xs)
    out = subprocess.run(
        [str(exe), str(tmp_path / "prob.fgraph"), str(tmp_path / "x.npy"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output0.npy"), want)


def test_inference_graph_exports_to_onnx(tmp_path):
    pytest.importorskip("onnx", reason="onnx is not installed (pip install 'ferrograd[onnx]')")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime)")
    x, y, prob, loss, train = _softmax_regression(tf.train.AdamOptimizer(0.1))
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(5):
            sess.run(train, {x: xs, y: ys})
        want = sess.run(prob, {x: xs})
        graph = sess.to_fg_graph(prob)
    fg.onnx.export(graph, None, tmp_path / "prob.onnx", input_names=["x"], output_names=["prob"])
    got = ort.InferenceSession(str(tmp_path / "prob.onnx")).run(None, {"x": xs})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_training_step_has_no_onnx_form_and_says_which_op():
    pytest.importorskip("onnx", reason="onnx is not installed (pip install 'ferrograd[onnx]')")
    x, y, prob, loss, train = _softmax_regression(tf.train.GradientDescentOptimizer(0.5))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        graph = sess.to_fg_graph([train, loss])
    with pytest.raises(NotImplementedError, match=r"op '\w+'.*no ONNX translation"):
        fg.onnx.export(graph, None)


@pytest.mark.parametrize("opt", ["momentum", "adam"])
def test_saved_training_step_continues_the_session(tmp_path, opt):
    make = {
        "momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9),
        "adam": lambda: tf.train.AdamOptimizer(0.1),
    }[opt]
    x, y, prob, loss, train = _softmax_regression(make())
    xs, ys = _data()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train, {x: xs, y: ys})
        sess.to_fg_graph([train, loss]).save(tmp_path / "step.fgraph")
        lr_ts = []
        want = []
        for _ in range(3):
            if opt == "adam":  # TF1's lr_t at this step, from the beta powers
                p1, p2 = sess.run(["beta1_power:0", "beta2_power:0"])
                lr_ts.append(0.1 * np.sqrt(1 - np.float64(p2)) / (1 - np.float64(p1)))
            want.append(sess.run([train, loss], {x: xs, y: ys})[1])
    step = fg.load_graph(tmp_path / "step.fgraph")
    if opt == "adam":
        assert step.scalar_slots == ["lr"]
        with pytest.raises(ValueError, match=r"scalar arguments at every run \(lr\)"):
            step(xs, ys)
        got = [float(step(xs, ys, scalars=[lr])) for lr in lr_ts]
    else:
        assert step.scalar_slots == []
        got = [float(step(xs, ys)) for _ in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[-1] < got[0]


def test_uninitialized_variable_is_refused():
    x, y, prob, loss, train = _softmax_regression(tf.train.GradientDescentOptimizer(0.5))
    with (
        tf.Session() as sess,
        pytest.raises(tf.errors.FailedPreconditionError, match=r"W.*global_variables_initializer"),
    ):
        sess.to_fg_graph(prob)


def test_a_variable_itself_is_not_an_output():
    x, y, prob, loss, train = _softmax_regression(tf.train.GradientDescentOptimizer(0.5))
    W = tf.get_default_graph().get_tensor_by_name("W:0")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(ValueError, match=r"W:0 is not computed by the graph.*tf.identity"):
            sess.to_fg_graph(W)
        np.testing.assert_array_equal(sess.to_fg_graph(tf.identity(W))().numpy(), sess.run(W))
