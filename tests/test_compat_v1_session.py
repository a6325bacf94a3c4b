"""Graphs, sessions, variables and scopes of ``ferrograd.compat.v1`` behave as TF1's."""

from __future__ import annotations

import collections
import re

import ferrograd as fg
import ferrograd.compat.v1 as tf
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


# ----------------------------------------------------------------------------- graphs


def test_default_graph_and_reset():
    g = tf.get_default_graph()
    a = tf.constant(1.0)
    assert a.graph is g and g.version == 1
    tf.reset_default_graph()
    g2 = tf.get_default_graph()
    assert g2 is not g and g2.version == 0
    with pytest.raises(ValueError, match="not an element of this"):
        tf.Session().run(a)


def test_graph_as_default_isolates():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        y = x * 3.0
        assert tf.get_default_graph() is g
    assert tf.get_default_graph() is not g
    other = tf.constant(5.0)  # goes to the default graph, not g
    assert other.graph is not g
    with tf.Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0]}), [3.0, 6.0])
        assert sess.graph is g
    assert g.get_tensor_by_name("x:0") is x
    assert g.get_operation_by_name("x") is x.op and x.op.type == "Placeholder"


def test_building_after_running_records_again():
    x = tf.placeholder(tf.float32, [None, 2])
    v = tf.Variable(np.array([1.0, 1.0], np.float32))
    inc = v.assign_add([1.0, 2.0])
    s = tf.reduce_sum(x * v, 1)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(inc)
    np.testing.assert_array_equal(sess.run(s, {x: [[1.0, 1.0]]}), [5.0])
    # New ops after a run: the graph is recorded again, the variable keeps its value.
    m = tf.reduce_max(s) + tf.reduce_sum(v)
    assert sess.run(m, {x: [[1.0, 1.0], [2.0, 0.0]]}) == pytest.approx(5.0 + 5.0)
    sess.run(inc)
    np.testing.assert_array_equal(sess.run(v), [3.0, 5.0])


def test_names_and_scopes():
    a = tf.constant(1.0, name="a")
    a2 = tf.constant(2.0, name="a")
    with tf.name_scope("layer1") as scope:
        m = tf.multiply(a, a2)
        w = tf.Variable(1.0, name="w")
        with tf.name_scope("inner"):
            n = tf.add(m, 1.0, name="plus")
    with tf.name_scope("layer1"):
        again = tf.identity(a)
    assert scope == "layer1/"
    assert a.name == "a:0" and a2.name == "a_1:0"
    assert m.name == "layer1/Mul:0" and w.name == "layer1/w:0"
    assert n.name == "layer1/inner/plus:0"
    assert again.name.startswith("layer1_1/")
    assert n.op.name == "layer1/inner/plus" and [t.name for t in n.op.inputs][0] == "layer1/Mul:0"


def test_tensor_static_surface():
    x = tf.placeholder(tf.float32, [None, 3])
    assert x.shape.as_list() == [None, 3] and x.get_shape()[1].value == 3 and int(x.shape[1]) == 3
    assert x.shape.ndims == 2 and not x.shape.is_fully_defined() and str(x.shape) == "(?, 3)"
    assert tf.placeholder(tf.float32).shape.ndims is None
    with pytest.raises(TypeError, match="Python `bool`"):
        bool(x)
    with pytest.raises(TypeError, match="NumPy"):
        np.asarray(x)
    x.set_shape([4, 3])
    assert x.shape.as_list() == [4, 3]
    with pytest.raises(ValueError, match="incompatible"):
        x.set_shape([4, 2])


# ----------------------------------------------------------------------------- sessions


def test_session_context_default_and_eval():
    x = tf.placeholder(tf.float32, [])
    y = x * 2.0
    v = tf.Variable(3.0)
    init = tf.global_variables_initializer()
    assert tf.get_default_session() is None
    with tf.Session() as sess:
        assert tf.get_default_session() is sess
        init.run()
        assert y.eval(feed_dict={x: 4.0}) == 8.0
        assert v.eval() == 3.0
        assert isinstance(y.eval({x: 1.0}), np.float32)
    assert tf.get_default_session() is None
    with pytest.raises(ValueError, match="No default session"):
        y.eval({x: 1.0})
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(y, {x: 1.0})
    other = tf.Session()
    with other.as_default():
        other.run(init)
        assert v.eval() == 3.0
    assert tf.get_default_session() is None


def test_interactive_session():
    v = tf.Variable(2.0)
    sess = tf.InteractiveSession()
    assert tf.get_default_session() is sess
    tf.global_variables_initializer().run()
    assert (v * 5.0).eval() == 10.0
    sess.close()
    assert tf.get_default_session() is None


def test_nested_fetches():
    a = tf.constant(1.0)
    b = tf.constant([2.0, 3.0])
    op = tf.no_op()
    Pair = collections.namedtuple("Pair", "first second")
    out = tf.Session().run({"a": a, "list": [b, (a, op)], "nt": Pair(a, b), "op": op})
    assert out["a"] == 1.0
    np.testing.assert_array_equal(out["list"][0], [2.0, 3.0])
    assert isinstance(out["list"][1], tuple) and out["list"][1][0] == 1.0 and out["list"][1][1] is None
    assert isinstance(out["nt"], Pair) and out["nt"].first == 1.0
    assert out["op"] is None
    assert tf.Session().run(op) is None
    assert tf.Session().run([]) == []
    assert tf.Session().run("Const:0") == 1.0
    with pytest.raises(TypeError, match="None"):
        tf.Session().run([a, None])


def test_feed_any_tensor_and_by_name():
    x = tf.placeholder(tf.float32, [None], name="x")
    h = x * 2.0
    y = h + 1.0
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {x: [1.0]}), [3.0])
        # Feeding an intermediate tensor replaces its value; x is then not needed.
        np.testing.assert_array_equal(sess.run(y, {h: [10.0, 20.0]}), [11.0, 21.0])
        np.testing.assert_array_equal(sess.run(y, {"x:0": [2.0]}), [5.0])
        np.testing.assert_array_equal(sess.run(h, {h: [7.0]}), [7.0])  # a fed fetch gives the fed value


def test_missing_feed_names_the_placeholder_and_its_line():
    x = tf.placeholder(tf.float32, [None, 784], name="images")
    y = tf.reduce_sum(x)
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as err:
        sess.run(y)
    msg = str(err.value)
    assert "You must feed a value for placeholder tensor 'images'" in msg
    assert "[?,784]" in msg and "float32" in msg
    assert re.search(r"test_compat_v1_session\.py:\d+", msg)
    with tf.Session() as sess, pytest.raises(ValueError, match=r"Cannot feed value of shape \(2, 3\)"):
        sess.run(y, {x: np.zeros((2, 3))})


def test_uninitialized_variable_says_to_run_the_initializer():
    w = tf.Variable(tf.zeros([3]), name="weights")
    y = w + 1.0
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError) as err:
            sess.run(y)
        assert "uninitialized value weights" in str(err.value)
        assert "tf.global_variables_initializer()" in str(err.value)
        sess.run(w.initializer)
        np.testing.assert_array_equal(sess.run(y), [1.0, 1.0, 1.0])
    with tf.Session() as fresh, pytest.raises(tf.errors.FailedPreconditionError):
        fresh.run(y)  # initialization is per session, as in TF


# ----------------------------------------------------------------------------- variables


def test_variable_surface_and_assign_ops():
    v = tf.Variable([1.0, 2.0], name="v")
    c = tf.Variable(0, name="counter", trainable=False)
    set_v = tf.assign(v, [5.0, 6.0])
    add_v = v.assign_add([1.0, 1.0])
    sub_v = tf.assign_sub(v, [0.5, 0.5])
    bump = c.assign_add(1)
    assert v.dtype == tf.float32 and c.dtype == tf.int32
    assert v in tf.trainable_variables() and c not in tf.trainable_variables()
    assert {x.name for x in tf.global_variables()} == {"v:0", "counter:0"}
    with pytest.raises(ValueError, match="incompatible"):
        tf.assign(v, [1.0, 2.0, 3.0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(set_v), [5.0, 6.0])  # an assignment gives the new value
        np.testing.assert_array_equal(sess.run(add_v), [6.0, 7.0])
        np.testing.assert_array_equal(sess.run(sub_v), [5.5, 6.5])
        for _ in range(3):
            sess.run(bump)
        assert sess.run(c) == 3
        v.load([9.0, 9.0], sess)
        np.testing.assert_array_equal(sess.run(v), [9.0, 9.0])
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])


def test_variable_from_another_and_random_init_runs_once():
    tf.set_random_seed(1)
    a = tf.Variable(tf.random_normal([4, 4]), name="a")
    b = tf.Variable(a.initialized_value() * 2.0, name="b")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        av, bv = sess.run([a, b])
        np.testing.assert_allclose(bv, av * 2.0, rtol=1e-6)
        np.testing.assert_array_equal(sess.run(a), av)  # not drawn again by later runs


def test_initializers():
    shape = [40, 60]
    inits = {
        "zeros": tf.zeros_initializer(),
        "ones": tf.ones_initializer(),
        "const": tf.constant_initializer(0.5),
        "normal": tf.random_normal_initializer(0.0, 0.1),
        "trunc": tf.truncated_normal_initializer(stddev=0.1),
        "uniform": tf.random_uniform_initializer(-0.2, 0.2),
        "glorot": tf.glorot_uniform_initializer(),
        "vs": tf.variance_scaling_initializer(2.0),
    }
    vs = {k: tf.get_variable(k, shape, initializer=i) for k, i in inits.items()}
    default = tf.get_variable("default", shape)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(vs)
        d = sess.run(default)
    assert not got["zeros"].any() and (got["ones"] == 1).all() and (got["const"] == 0.5).all()
    assert abs(got["normal"].std() - 0.1) < 0.01
    assert np.abs(got["trunc"]).max() <= 0.2 + 1e-6
    assert got["uniform"].min() >= -0.2 and got["uniform"].max() < 0.2
    lim = np.sqrt(6 / (40 + 60))
    assert np.abs(got["glorot"]).max() <= lim and np.abs(got["glorot"]).max() > 0.9 * lim
    assert (
        np.abs(d).max() <= lim and abs(d.std() - lim / np.sqrt(3)) < 0.02
    )  # get_variable's default: Glorot uniform
    assert abs(got["vs"].std() - np.sqrt(2.0 / 40)) < 0.03


def test_variable_scope_reuse():
    def layer(x):
        w = tf.get_variable("w", [2, 2], initializer=tf.ones_initializer())
        return tf.matmul(x, w)

    x = tf.placeholder(tf.float32, [None, 2])
    with tf.variable_scope("net"):
        y1 = layer(x)
    with tf.variable_scope("net", reuse=True):
        y2 = layer(x)
    with tf.variable_scope("net") as scope:
        scope.reuse_variables()
        y3 = layer(x)
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        a1 = tf.get_variable("b", [1])
    with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
        a2 = tf.get_variable("b", [1])
    assert a1 is a2
    assert [v.name for v in tf.global_variables()] == ["net/w:0", "auto/b:0"]
    with pytest.raises(
        ValueError, match=r"Variable net/w already exists, disallowed\. Did you mean to set reuse=True"
    ):
        with tf.variable_scope("net"):
            layer(x)
    with pytest.raises(ValueError, match="does not exist"):
        with tf.variable_scope("other", reuse=True):
            layer(x)
    with tf.variable_scope("outer"):
        with tf.variable_scope("inner"):
            deep = tf.get_variable("v", [1])
    assert deep.name == "outer/inner/v:0"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        r = sess.run([y1, y2, y3], {x: [[1.0, 2.0]]})
    for v in r:
        np.testing.assert_array_equal(v, [[3.0, 3.0]])


def test_global_step_counts_minimize_calls():
    gs = tf.train.get_or_create_global_step()
    assert tf.train.get_or_create_global_step() is gs and tf.train.get_global_step() is gs
    assert gs.dtype == tf.int64 and gs not in tf.trainable_variables()
    w = tf.Variable(1.0)
    step = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w), global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(step)
        assert tf.train.global_step(sess, gs) == 3
        assert sess.run(w) == pytest.approx(0.8**3)


# ----------------------------------------------------------------------------- optimizers against their formulas


def _one_var_problem(opt):
    w0 = np.array([1.0, -2.0, 3.0], np.float32)
    x = tf.placeholder(tf.float32, [3])
    w = tf.Variable(w0)
    loss = tf.reduce_sum(w * w * x)  # dloss/dw = 2 * w * x
    train = opt.minimize(loss)
    xs = [
        np.array([1.0, 0.5, 2.0], np.float32),
        np.array([0.2, 1.0, -1.0], np.float32),
        np.array([1.0, 1.0, 1.0], np.float32),
    ]
    got = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for xv in xs:
            sess.run(train, {x: xv})
            got.append(sess.run(w))
    return w0.astype(np.float64), xs, got


def test_gradient_descent_and_momentum_formulas():
    w, xs, got = _one_var_problem(tf.train.GradientDescentOptimizer(0.1))
    for xv, g in zip(xs, got, strict=True):
        w = w - 0.1 * (2 * w * xv)
        np.testing.assert_allclose(g, w, rtol=1e-5)
    tf.reset_default_graph()
    w, xs, got = _one_var_problem(tf.train.MomentumOptimizer(0.1, 0.9))
    acc = np.zeros(3)
    for xv, g in zip(xs, got, strict=True):
        acc = 0.9 * acc + 2 * w * xv
        w = w - 0.1 * acc
        np.testing.assert_allclose(g, w, rtol=1e-5)
    tf.reset_default_graph()
    w, xs, got = _one_var_problem(tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True))
    acc = np.zeros(3)
    for xv, g in zip(xs, got, strict=True):
        grad = 2 * w * xv
        acc = 0.9 * acc + grad
        w = w - 0.1 * (grad + 0.9 * acc)
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_adam_formula():
    w, xs, got = _one_var_problem(tf.train.AdamOptimizer(0.05))
    m, v = np.zeros(3), np.zeros(3)
    for t, (xv, g) in enumerate(zip(xs, got, strict=True), start=1):
        grad = 2 * w * xv
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        lr_t = 0.05 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        w = w - lr_t * m / (np.sqrt(v) + 1e-8)
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_rmsprop_and_adagrad_formulas():
    w, xs, got = _one_var_problem(tf.train.RMSPropOptimizer(0.01, decay=0.9, momentum=0.5))
    ms, mom = np.ones(3), np.zeros(3)  # TF1 starts the mean square at 1
    for xv, g in zip(xs, got, strict=True):
        grad = 2 * w * xv
        ms = 0.9 * ms + 0.1 * grad * grad
        mom = 0.5 * mom + 0.01 * grad / np.sqrt(ms + 1e-10)
        w = w - mom
        np.testing.assert_allclose(g, w, rtol=1e-5)
    tf.reset_default_graph()
    w, xs, got = _one_var_problem(tf.train.AdagradOptimizer(0.1))
    acc = np.full(3, 0.1)
    for xv, g in zip(xs, got, strict=True):
        grad = 2 * w * xv
        acc = acc + grad * grad
        w = w - 0.1 * grad / np.sqrt(acc)
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_compute_and_apply_gradients_with_clipping_and_a_fed_learning_rate():
    w = tf.Variable([3.0, 4.0])
    b = tf.Variable(1.0)
    unused = tf.Variable(7.0)
    lr = tf.placeholder(tf.float32, [])
    loss = tf.reduce_sum(w * w) + b
    opt = tf.train.GradientDescentOptimizer(lr)
    gv = opt.compute_gradients(loss, var_list=[w, b, unused])
    assert [v for _, v in gv] == [w, b, unused] and gv[2][0] is None
    clipped, norm = tf.clip_by_global_norm([g for g, _ in gv[:2]], 1.0)
    train = opt.apply_gradients(list(zip(clipped, [w, b], strict=True)))
    assert isinstance(train, tf.Operation)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        n, _ = sess.run([norm, train], {lr: 0.5})
        g = np.array([6.0, 8.0, 1.0]) / np.sqrt(101.0)
        assert n == pytest.approx(np.sqrt(101.0), rel=1e-5)
        np.testing.assert_allclose(sess.run(w), [3.0, 4.0] - 0.5 * g[:2], rtol=1e-5)
        assert sess.run(b) == pytest.approx(1.0 - 0.5 * g[2], rel=1e-5)
        assert sess.run(unused) == 7.0
    with pytest.raises(ValueError, match="No gradients provided"):
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.constant(1.0) * 2.0, var_list=[unused])


def test_ops_are_ordinary_ferrograd_graph_nodes():
    """The recorded graph is an fg.Graph: the passes, dumps and gradients are the engine's own."""
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.ones((3, 2), np.float32))
    y = tf.nn.relu(tf.matmul(x, w))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(y, {x: np.ones((2, 3), np.float32)})
    fgg = tf.get_default_graph()._build(frozenset()).fgg
    assert isinstance(fgg, fg.Graph)
    ops = {n["op"] for n in fgg.nodes()}
    assert "relu" in ops and any("mm" in o or "matmul" in o for o in ops)


def test_eager_ferrograd_and_fg_graphs_between_tf_ops():
    """Building a TF1 graph holds no capture open: eager autograd and fg graphs work in between."""
    x = tf.placeholder(tf.float32, [None, 2])
    w = tf.Variable(tf.ones([2, 1]))
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    (a * a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 4.0])
    g = fg.Graph()
    with g:
        p = fg.placeholder(fg.float32, [2])
        q = p * 2
    y = tf.reduce_sum(tf.matmul(x, w))
    np.testing.assert_array_equal(fg.Session(g).run(q, feed={p: [1.0, 2.0]}).numpy(), [2.0, 4.0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(y, {x: [[1.0, 2.0], [3.0, 4.0]]}) == 10.0


def test_unknown_sizes_stay_linked_across_ops():
    x = tf.placeholder(tf.float32, [None, 5])
    gram = tf.matmul(tf.transpose(x), x)  # the batch dim is contracted: known to match
    doubled = tf.concat([x, x], 0)
    outer = tf.matmul(doubled, tf.transpose(doubled))
    assert gram.shape.as_list() == [5, 5]
    assert doubled.shape.as_list() == [None, 5] and outer.shape.as_list() == [None, None]
    xv = np.arange(15, dtype=np.float32).reshape(3, 5)
    g, o = tf.Session().run([gram, outer], {x: xv})
    np.testing.assert_allclose(g, xv.T @ xv)
    d = np.concatenate([xv, xv])
    np.testing.assert_allclose(o, d @ d.T)


def test_basic_operations_tutorial():
    """The classic first script: strings, constants, int16 placeholders, a matmul."""
    hello = tf.constant("Hello, TensorFlow!")
    assert tf.Session().run(hello) == b"Hello, TensorFlow!"
    assert hello.dtype == tf.string
    a, b = tf.constant(2), tf.constant(3)
    with tf.Session() as sess:
        assert "Addition with constants: %i" % sess.run(a + b) == "Addition with constants: 5"  # noqa: UP031 - as the tutorial prints it
        assert sess.run(a * b) == 6
    a = tf.placeholder(tf.int16)
    b = tf.placeholder(tf.int16)
    add, mul = tf.add(a, b), tf.multiply(a, b)
    with tf.Session() as sess:
        assert sess.run(add, feed_dict={a: 2, b: 3}) == 5
        assert sess.run(mul, feed_dict={a: 2, b: 3}) == 6
    product = tf.matmul(tf.constant([[3.0, 3.0]]), tf.constant([[2.0], [2.0]]))
    with tf.Session() as sess, tf.device("/cpu:0"):
        np.testing.assert_array_equal(sess.run(product), [[12.0]])


def test_app_flags_logging_and_newer_namespaces(monkeypatch):
    tf.flags.DEFINE_integer("compat_test_steps", 5, "steps")
    tf.app.flags.DEFINE_string("compat_test_dir", "/x", "dir")
    tf.flags.DEFINE_boolean("compat_test_fast", False, "fast")
    seen = {}

    def main(argv):
        seen["argv"] = argv
        seen["steps"] = tf.flags.FLAGS.compat_test_steps
        seen["dir"] = tf.app.flags.FLAGS.compat_test_dir
        seen["fast"] = tf.flags.FLAGS.compat_test_fast
        return 0

    with pytest.raises(SystemExit) as done:
        tf.app.run(
            main=main,
            argv=["prog", "--compat_test_steps=7", "--compat_test_dir", "/d", "--compat_test_fast", "extra"],
        )
    assert done.value.code == 0
    assert seen == {"argv": ["prog", "extra"], "steps": 7, "dir": "/d", "fast": True}
    tf.logging.set_verbosity(tf.logging.INFO)
    assert tf.logging.get_verbosity() == tf.logging.INFO
    x = tf.random.normal([2, 3])
    s = tf.math.reduce_sum(tf.math.square(tf.random.uniform([4], 1.0, 2.0)))
    w = tf.get_variable("w", [30, 20], initializer=tf.contrib.layers.xavier_initializer())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        xv, sv, wv = sess.run([x, s, w])
    assert xv.shape == (2, 3) and 4.0 <= sv <= 16.0
    assert np.abs(wv).max() <= np.sqrt(6 / 50)


def test_recorded_nodes_name_the_line_that_made_the_tf_op():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.nn.relu(x)  # the relu's line
    line = y.op._graph._records[y.op._rec].loc
    assert line is not None and line.endswith(f":{_this_line() - 2}")
    tf.Session().run(y, {x: np.ones((1, 3))})
    dump = tf.get_default_graph()._build(frozenset()).fgg.dump()
    relu = next(row for row in dump.splitlines() if "relu(" in row)
    assert relu.rstrip().endswith(line.rsplit("/", 1)[-1])  # not the line of the run


def _this_line():
    import inspect

    return inspect.currentframe().f_back.f_lineno
