"""``tf.train`` optimizers on ferrograd's fused multi-tensor kernels.

Gradient descent, momentum (plain and Nesterov) and Adam record their update
as one fused optimizer node when their hyper-parameters are numbers. Each is
checked step by step against TF1's update rule written in NumPy (float64),
and against the same optimizer given a tensor learning rate, which records
the rule as element-wise ops. Adam's ``lr_t`` is read from the beta-power
variables at every run, so a restored checkpoint continues exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ferrograd.compat.v1 as tf
import numpy as np
import pytest

STEPS = 6


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _problem() -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    w0 = [rng.standard_normal((5, 3)), rng.standard_normal(3)]
    x = rng.standard_normal((8, 5))
    y = rng.standard_normal((8, 3))
    return w0, x, y


def _np_grads(w: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    # loss = sum((x @ W + b - y) ** 2) / 2
    r = x @ w[0] + w[1] - y
    return [x.T @ r, r.sum(0)]


def _tf_run(
    make_opt: Callable[[], Any], dtype: Any = np.float64, steps: int = STEPS
) -> tuple[list[list[np.ndarray]], list[str]]:
    w0, x, y = _problem()
    ws = [tf.Variable(v.astype(dtype)) for v in w0]
    pred = tf.matmul(tf.constant(x.astype(dtype)), ws[0]) + ws[1]
    loss = tf.reduce_sum(tf.square(pred - tf.constant(y.astype(dtype)))) / 2.0
    train = make_opt().minimize(loss)
    out = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(steps):
            sess.run(train)
            out.append([np.asarray(v, dtype=np.float64) for v in sess.run(ws)])
        ops = [n["op"] for n in tf.get_default_graph()._build(frozenset()).fgg.nodes()]
    return out, ops


def _np_run(rule: Callable[[list[np.ndarray], list[np.ndarray], dict, int], None]) -> list[list[np.ndarray]]:
    w0, x, y = _problem()
    w = [v.copy() for v in w0]
    state: dict = {}
    out = []
    for t in range(1, STEPS + 1):
        rule(w, _np_grads(w, x, y), state, t)
        out.append([v.copy() for v in w])
    return out


def _sgd(lr: float) -> Callable:
    def rule(w: list, g: list, s: dict, t: int) -> None:
        for i in range(len(w)):
            w[i] -= lr * g[i]

    return rule


def _momentum(lr: float, m: float, nesterov: bool) -> Callable:
    def rule(w: list, g: list, s: dict, t: int) -> None:
        acc = s.setdefault("acc", [np.zeros_like(v) for v in w])
        for i in range(len(w)):
            acc[i] = m * acc[i] + g[i]
            w[i] -= lr * (g[i] + m * acc[i]) if nesterov else lr * acc[i]

    return rule


def _adam(lr: float, b1: float, b2: float, eps: float) -> Callable:
    def rule(w: list, g: list, s: dict, t: int) -> None:
        mm = s.setdefault("m", [np.zeros_like(v) for v in w])
        vv = s.setdefault("v", [np.zeros_like(v) for v in w])
        # TF1 keeps the beta powers as float32 variables (b ** t by repeated products).
        p1 = s.setdefault("p1", [np.float32(b1)])
        p2 = s.setdefault("p2", [np.float32(b2)])
        lr_t = lr * np.sqrt(1 - np.float64(p2[0])) / (1 - np.float64(p1[0]))
        p1[0] = np.float32(p1[0] * np.float32(b1))
        p2[0] = np.float32(p2[0] * np.float32(b2))
        for i in range(len(w)):
            mm[i] = b1 * mm[i] + (1 - b1) * g[i]
            vv[i] = b2 * vv[i] + (1 - b2) * g[i] ** 2
            w[i] -= lr_t * mm[i] / (np.sqrt(vv[i]) + eps)

    return rule


CASES = {
    "sgd": (lambda lr: tf.train.GradientDescentOptimizer(lr), _sgd(0.01), "sgd_step"),
    "momentum": (lambda lr: tf.train.MomentumOptimizer(lr, 0.9), _momentum(0.01, 0.9, False), "sgd_step"),
    "nesterov": (
        lambda lr: tf.train.MomentumOptimizer(lr, 0.9, use_nesterov=True),
        _momentum(0.01, 0.9, True),
        "sgd_step",
    ),
    "adam": (lambda lr: tf.train.AdamOptimizer(lr), _adam(0.01, 0.9, 0.999, 1e-8), "adam_step"),
}


def _close(got: list[list[np.ndarray]], want: list[list[np.ndarray]], rtol: float, atol: float) -> None:
    for step, (gs, ws) in enumerate(zip(got, want, strict=True)):
        for g, w in zip(gs, ws, strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"step {step + 1}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_update_follows_tf1_rule(case):
    make, rule, kernel = CASES[case]
    got, ops = _tf_run(lambda: make(0.01))
    assert ops.count(kernel) == 1, f"{case}: expected one fused {kernel} node, the graph has {ops}"
    _close(got, _np_run(rule), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_tensor_learning_rate_records_element_wise_ops_with_the_same_result(case):
    make, rule, kernel = CASES[case]
    got, ops = _tf_run(lambda: make(tf.constant(0.01, dtype=tf.float64)))
    assert kernel not in ops, f"{case}: a tensor learning rate should not use the fused kernel: {ops}"
    _close(got, _np_run(rule), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_update_in_float32(case):
    make, rule, _ = CASES[case]
    got, _ = _tf_run(lambda: make(0.01), dtype=np.float32)
    _close(got, _np_run(rule), rtol=2e-5, atol=2e-6)


def test_adam_with_beta2_near_one_falls_back_to_element_wise_ops():
    # 1 - b2 ** step never reaches 1 for this beta2: the fused kernel cannot take TF1's lr_t.
    b2 = 1 - 1e-12
    got, ops = _tf_run(lambda: tf.train.AdamOptimizer(0.01, beta2=b2))
    assert "adam_step" not in ops
    _close(got, _np_run(_adam(0.01, 0.9, b2, 1e-8)), rtol=1e-9, atol=1e-12)


def test_adam_restored_from_a_checkpoint_continues_exactly(tmp_path):
    w0, x, y = _problem()
    ws = [tf.Variable(v) for v in w0]
    loss = tf.reduce_sum(tf.square(tf.matmul(tf.constant(x), ws[0]) + ws[1] - tf.constant(y))) / 2.0
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train)
        path = saver.save(sess, str(tmp_path / "model.ckpt"))
        for _ in range(3):
            sess.run(train)
        after = sess.run(ws)
        saver.restore(sess, path)
        for _ in range(3):
            sess.run(train)
        again = sess.run(ws)
    for a, b in zip(after, again, strict=True):
        np.testing.assert_array_equal(a, b)
    want = _np_run(_adam(0.05, 0.9, 0.999, 1e-8))[-1]
    for a, w in zip(after, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-10, atol=1e-12)


def test_fed_learning_rate_uses_element_wise_ops():
    lr = tf.placeholder(tf.float64, [])
    w0, x, y = _problem()
    ws = [tf.Variable(v) for v in w0]
    loss = tf.reduce_sum(tf.square(tf.matmul(tf.constant(x), ws[0]) + ws[1] - tf.constant(y))) / 2.0
    train = tf.train.MomentumOptimizer(lr, 0.9).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(STEPS):
            sess.run(train, {lr: 0.01})
        got = sess.run(ws)
    want = _np_run(_momentum(0.01, 0.9, False))[-1]
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-10, atol=1e-12)
