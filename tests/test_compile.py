"""Graph capture: ``fg.compile`` (tracing) and the static API (``fg.Graph``,
``fg.placeholder``, ``fg.Session``), against eager execution."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest


def arr(t):
    return np.asarray(t.detach())


# ---------------------------------------------------------------------------
# The static API: TensorFlow 1.x's two classic examples
# ---------------------------------------------------------------------------


def test_tf1_product_and_gradients():
    g = fg.Graph()
    with g:
        a = fg.placeholder(fg.float32, name="a")
        b = fg.placeholder(fg.float32, name="b")
        c = a * b
        da, db = fg.gradients(c, [a, b])
    sess = fg.Session(g)
    out = sess.run(c, feed={a: [15.0], b: [20.0]})
    assert arr(out).tolist() == [300.0]
    ga, gb = sess.run([da, db], feed={a: [15.0], b: [20.0]})
    assert arr(ga).tolist() == [20.0]
    assert arr(gb).tolist() == [15.0]


def test_tf1_reduce_sum():
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(3,), name="x")
        y = fg.placeholder(fg.float32, shape=(3,), name="y")
        z = (x * y).sum()
    assert fg.Session(g).run(z, feed_dict={x: [1, 2, 3], y: [4, 5, 6]}).item() == 32.0


def test_symbolic_batch_dimension_runs_many_sizes():
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(None, 3), name="x")
        y = fg.placeholder(fg.float32, shape=(None, 3), name="y")
        loss = (x * y).sum()
        dx, dy = fg.gradients(loss, [x, y])
        m = x.mean(dim=0)
    sess = fg.Session(g)
    for n in (1, 4, 7):
        xv = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        yv = np.ones((n, 3), np.float32) * 2
        out, gx, mean = sess.run([loss, dx, m], feed={x: xv, y: yv})
        assert out.item() == pytest.approx(float((xv * yv).sum()))
        np.testing.assert_array_equal(arr(gx), yv)
        np.testing.assert_allclose(arr(mean), xv.mean(0), rtol=1e-6)
    assert "float32[?0, 3]" in g.dump()


def test_wrong_feed_names_placeholder_and_shapes():
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(None, 3), name="x")
        y = x * 2
    sess = fg.Session(g)
    with pytest.raises(ValueError, match=r"'x'.*\(None, 3\).*\[2, 4\].*test_compile.py"):
        sess.run(y, feed={x: np.zeros((2, 4), np.float32)})
    with pytest.raises(ValueError, match=r"placeholder 'x'.*must be fed.*test_compile.py"):
        sess.run(y, feed={})
    with pytest.raises(TypeError, match=r"'x'.*float32.*int64"):
        sess.run(y, feed={x: fg.zeros(2, 3, dtype=fg.int64)})


def test_variables_and_assign_train_linear_regression():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 2)).astype(np.float32)
    ys = (xs @ np.array([[2.0], [-3.0]], np.float32) + 0.5).astype(np.float32)
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(None, 2), name="x")
        y = fg.placeholder(fg.float32, shape=(None, 1), name="y")
        w = fg.Variable(np.zeros((2, 1), np.float32), name="w")
        b = fg.Variable(np.zeros((1,), np.float32), name="b")
        loss = ((x @ w + b - y) ** 2).mean()
        gw, gb = fg.gradients(loss, [w, b])
        train = [w.assign_sub(0.1 * gw), b.assign_sub(0.1 * gb)]
    sess = fg.Session(g)
    first = sess.run(loss, feed={x: xs, y: ys}).item()
    for _ in range(300):
        sess.run(train, feed={x: xs, y: ys})
    last = sess.run(loss, feed={x: xs, y: ys}).item()
    assert last < 1e-4 < first
    np.testing.assert_allclose(w.numpy().ravel(), [2.0, -3.0], atol=1e-2)


def test_fetch_runs_only_what_it_needs():
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(2,), name="x")
        y = fg.placeholder(fg.float32, shape=(2,), name="y")
        a = x + 1
        b = y * 2
    # `a` needs only x: y need not be fed.
    np.testing.assert_array_equal(arr(fg.Session(g).run(a, feed={x: [1.0, 2.0]})), [2.0, 3.0])
    assert b is not None


# ---------------------------------------------------------------------------
# fg.compile
# ---------------------------------------------------------------------------


def test_compile_matches_eager_and_caches():
    def f(x, y):
        return (x * y + x).tanh().sum(dim=1)

    cf = fg.compile(f)
    x = fg.randn(4, 5)
    y = fg.randn(4, 5)
    for _ in range(3):
        np.testing.assert_array_equal(arr(cf(x, y)), arr(f(x, y)))
    assert cf.stats.traces == 1 and cf.stats.calls == 3
    cf(fg.randn(3, 5), fg.randn(3, 5))  # a new shape retraces
    assert cf.stats.traces == 2


def test_python_values_are_part_of_the_key():
    calls = []

    @fg.compile
    def scale(x, k, flag):
        calls.append(1)
        return x * k if flag else x - k

    x = fg.ones(3)
    assert arr(scale(x, 2, True)).tolist() == [2, 2, 2]
    assert arr(scale(x, 3, True)).tolist() == [3, 3, 3]
    assert arr(scale(x, 3, False)).tolist() == [-2, -2, -2]
    assert arr(scale(x, 3, False)).tolist() == [-2, -2, -2]
    assert len(calls) == 3


def test_value_needed_in_python_raises_with_line():
    @fg.compile
    def f(x):
        if x.sum() > 0:  # data-dependent control flow
            return x
        return -x

    with pytest.raises(fg.TraceError, match=r"fg\.cond"):
        f(fg.ones(3))

    g = fg.compile(f.__wrapped__, fallback="eager")
    assert arr(g(fg.ones(3))).tolist() == [1, 1, 1]
    assert arr(g(-fg.ones(3))).tolist() == [1, 1, 1]
    assert g.stats.graph_breaks == 1


def test_parameters_are_read_by_reference():
    lin = nn.Linear(3, 2)
    f = fg.compile(lambda x: lin(x))
    x = fg.randn(5, 3)
    np.testing.assert_array_equal(arr(f(x)), arr(lin(x)))
    with fg.no_grad():
        lin.weight.add_(1.0)  # an eager update between compiled calls
    np.testing.assert_array_equal(arr(f(x)), arr(lin(x)))
    assert f.stats.traces == 1


def test_replaced_parameter_retraces():
    lin = nn.Linear(3, 2)
    f = fg.compile(lambda x: lin(x))
    x = fg.randn(5, 3)
    f(x)
    lin.weight = nn.Parameter(fg.zeros(2, 3))
    np.testing.assert_array_equal(arr(f(x)), arr(lin(x)))
    assert f.stats.traces == 2


def test_parameter_replaced_in_member_table_retraces():
    # Writes straight into the module's tables are seen too (not only attribute assignment).
    lin = nn.Linear(3, 2)
    f = fg.compile(lambda x: lin(x))
    x = fg.randn(5, 3)
    f(x)
    f(x)
    lin._parameters["bias"] = nn.Parameter(fg.full((2,), 7.0))
    np.testing.assert_array_equal(arr(f(x)), arr(lin(x)))
    assert f.stats.traces == 2
    lin._parameters.update(weight=nn.Parameter(fg.ones(2, 3)))
    np.testing.assert_array_equal(arr(f(x)), arr(lin(x)))
    assert f.stats.traces == 3
    lin._parameters["bias"] = None
    np.testing.assert_array_equal(arr(f(x)), arr(lin(x)))
    assert f.stats.traces == 4


def test_train_eval_flag_is_guarded():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    f = fg.compile(model)
    x = fg.randn(8, 4)
    model.eval()
    np.testing.assert_array_equal(arr(f(x)), arr(model(x)))
    model.train()
    fg.manual_seed(3)
    a = f(x)
    fg.manual_seed(3)
    b = model(x)
    np.testing.assert_array_equal(arr(a), arr(b))
    # Dropout draws fresh masks on every run, like eager.
    fg.manual_seed(4)
    c = f(x)
    assert not np.array_equal(arr(a), arr(c))


def _mlp(seed=0):
    fg.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_training_step_matches_eager(opt_name):
    x = fg.randn(10, 6)
    y = fg.randint(0, 3, (10,))
    models, opts = [], []
    for _ in range(2):
        m = _mlp()
        models.append(m)
        if opt_name == "SGD":
            opts.append(fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
        else:
            opts.append(fg.optim.Adam(m.parameters(), lr=0.01))

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    em, eo = models[0], opts[0]
    cm, co = models[1], opts[1]
    cstep = fg.compile(lambda x, y: step(cm, co, x, y))
    for _ in range(5):
        le = step(em, eo, x, y)
        lc = cstep(x, y)
        np.testing.assert_allclose(arr(lc), arr(le), rtol=1e-6)
    for (n, pe), pc in zip(em.named_parameters(), cm.parameters(), strict=True):
        np.testing.assert_allclose(arr(pc), arr(pe), rtol=1e-5, atol=1e-6, err_msg=n)
        np.testing.assert_allclose(arr(pc.grad), arr(pe.grad), rtol=1e-5, atol=1e-6, err_msg=n)
    assert cstep.stats.traces == 1


def test_dynamic_batch_dimension():
    lin = nn.Linear(3, 2)

    @fg.compile(dynamic=True)
    def f(x):
        return lin(x).relu().sum(dim=1)

    for n in (2, 5, 9):
        x = fg.randn(n, 3)
        np.testing.assert_array_equal(arr(f(x)), arr(lin(x).relu().sum(dim=1)))
    assert f.stats.traces == 1


@pytest.mark.parametrize("op", ["div", "mul", "rdiv"])
def test_gradient_through_a_batch_size_scalar_follows_each_batch(op):
    # `loss / x.shape[0]` with a symbolic batch: the gradient saves the divisor,
    # which was made a constant holding the size the trace saw (its large
    # sentinel), so with dynamic=True every gradient came out ~1e-7 times too small.
    w = fg.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def f(x):
        n, y = x.shape[0], (x * w).sum()
        loss = {"div": lambda: y / n, "mul": lambda: y * n, "rdiv": lambda: n / (y * y + 1.0)}[op]()
        return loss, fg.autograd.grad(loss, [w])[0]

    cf = fg.compile(f, dynamic=True)
    for n in (1, 4, 7):
        x = fg.randn(n, 3, generator=fg.Generator().manual_seed(n))
        for got, want in zip(cf(x), f(x), strict=True):
            np.testing.assert_allclose(arr(got), arr(want), rtol=1e-6)
    assert cf.stats.traces == 1


def test_factory_of_a_batch_size_is_not_folded():
    # `full((), n)` has no inputs and a 0-d shape: constant folding evaluated
    # it at the size the trace saw.
    cf = fg.compile(lambda x: x.sum() / fg.full((), x.shape[0], dtype=fg.float32), dynamic=True)
    for n in (2, 5):
        x = fg.ones(n, 3)
        assert arr(cf(x)).item() == 3.0
    assert cf.stats.traces == 1


_OPAQUE_BEFORE = {
    "gather": lambda x, w, i: (x @ w).log_softmax(-1).gather(1, i).sum(),
    "scatter": lambda x, w, i: ((x @ w).scatter(1, i, x[:, :1] * 2.0) ** 2).sum(),
    "scatter_add": lambda x, w, i: ((x @ w).scatter_add(1, i, x[:, :1]) ** 2).sum(),
    "einsum": lambda x, w, i: (fg.einsum("bi,ij,bk->bjk", x, w, x) ** 2).sum(),
}


@pytest.mark.parametrize("case", list(_OPAQUE_BEFORE))
def test_gather_scatter_and_einsum_gradients_are_captured_as_ops(case, tmp_path):
    # Their backward rules called kernels outside the captured ops, so each
    # became one opaque `vjp` node keeping the traced shapes: with a symbolic
    # batch every call failed ("not valid for these argument shapes"), and
    # the graph could not be saved.
    w = fg.randn(3, 4, dtype=fg.float64, generator=fg.Generator().manual_seed(0), requires_grad=True)
    loss = _OPAQUE_BEFORE[case]

    def f(x, i):
        return fg.autograd.grad(loss(x, w, i), [x, w])

    cf = fg.compile(f, dynamic=True)
    for n in (2, 5):
        gen = fg.Generator().manual_seed(n)
        x = fg.randn(n, 3, dtype=fg.float64, generator=gen, requires_grad=True)
        i = fg.randint(0, 4, (n, 1), generator=gen)
        for got, want in zip(cf(x, i), f(x, i), strict=True):
            np.testing.assert_allclose(arr(got), arr(want), rtol=1e-12, atol=1e-12)
    assert cf.stats.traces == 1
    g = cf.graph(x, i)
    assert "vjp" not in [n["op"] for n in g.nodes()]
    g.save(tmp_path / "g.fgraph")


def test_graph_inspection():
    def f(x):
        return (x * 2).exp().sum()

    cf = fg.compile(f)
    g = cf.graph(fg.ones(3))
    text = g.dump()
    assert "mul" in text and "exp" in text and "sum" in text
    assert "test_compile.py" in text  # source lines of captured ops
    g.verify()


def test_nested_compiled_function_is_inlined():
    inner = fg.compile(lambda x: x * 3)
    outer = fg.compile(lambda x: inner(x) + 1)
    np.testing.assert_array_equal(arr(outer(fg.ones(2))), [4.0, 4.0])


_ARITH = {
    "add": lambda p, q: p + q,
    "sub": lambda p, q: p - q,
    "mul": lambda p, q: p * q,
    "div": lambda p, q: p / q,
}


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("op2", list(_ARITH))
@pytest.mark.parametrize("op1", list(_ARITH))
def test_two_arithmetic_ops_fused_match_eager_bits(op1, op2, side, dtype):
    # Two arithmetic ops, the first read only by the second, run as one loop
    # in a fused kernel; each op is rounded as on its own, so the bits match
    # eager. Also with a broadcast operand (the two-loop path) and with the
    # output written over a dying intermediate input (in place).
    f1, f2 = _ARITH[op1], _ARITH[op2]

    def f(a, b, c):
        t = f1(a, b)
        return f2(t, c) if side == "left" else f2(c, t)

    def g(m, a, b, c):
        return f(m @ a, b, c)  # the matmul's buffer dies at the fused node

    rng = np.random.default_rng(7)

    def r(*shape):
        return fg.tensor(rng.uniform(0.5, 2.0, shape)).to(dtype)

    a, b, c = r(1000), r(1000), r(1000)
    cf = fg.compile(f)
    np.testing.assert_array_equal(cf(a, b, c).numpy(), f(a, b, c).numpy())
    cb = r(1)
    np.testing.assert_array_equal(cf(a, b, cb).numpy(), f(a, b, cb).numpy())
    m, a2, b2, c2 = r(40, 30), r(30, 50), r(40, 50), r(40, 50)
    cg = fg.compile(g)
    np.testing.assert_array_equal(cg(m, a2, b2, c2).numpy(), g(m, a2, b2, c2).numpy())
    assert [n["op"] for n in cf.graph(a, b, c).nodes()] == ["fused"]


@pytest.mark.parametrize("expr", [
    lambda a, b, c, d: (a * b + c) * d,
    lambda a, b, c, d: a * b + c * d,
    lambda a, b, c, d: a * b + c - d,
    lambda a, b, c, d: d - (a - b) / (c + d),
    lambda a, b, c, d: (a * b) * (a * b) + c,
    lambda a, b, c, d: ((a + b) * c - d) / (a * 2.0 + 1.0),
    lambda a, b, c, d: fg.tanh(a * b + c) * d - a,
])
def test_chains_of_arithmetic_ops_fused_match_eager_bits(expr):
    # Chains where a paired op's result feeds another pair, or both operands
    # of an op are paired results: every op still runs exactly once.
    rng = np.random.default_rng(11)
    a, b, c, d = (fg.tensor(rng.uniform(0.5, 2.0, 777).astype(np.float32)) for _ in range(4))
    cf = fg.compile(expr)
    np.testing.assert_array_equal(cf(a, b, c, d).numpy(), expr(a, b, c, d).numpy())
    assert [n["op"] for n in cf.graph(a, b, c, d).nodes()] == ["fused"]


def test_tensor_only_call_key_matches_general_key():
    # Calls with tensors only take a shortcut to the cache key; it must be the
    # key the general path builds, or a call with a Parameter (general path)
    # and one with a plain tensor of the same type would trace twice.
    from ferrograd import _compile

    f = fg.compile(lambda a, b: a * b)
    a = fg.ones(2, 3)
    b = fg.zeros(3, requires_grad=True)
    key, tensors, dyn = f._signature((a, b), {})
    general: list = []
    want = (_compile._key_of(((a, b), {}), {}, general), _compile._modes())
    assert key == want and dyn == {}
    assert [id(t) for t in tensors] == [id(a), id(b)] == [id(t) for t in general]
    p = nn.Parameter(fg.zeros(3))
    f(a, b)
    f(a, p)  # a Parameter takes the general path; same signature as b's
    assert f.stats.traces == 1


@pytest.mark.parametrize("grad", [False, True])
def test_contiguous_then_view_of_a_transpose(grad):
    """`(...).transpose(...).contiguous().view(...)` compiles with and without
    gradients recorded: the passes keep the copy the view needs."""
    x = fg.randn(2, 3, 4, requires_grad=grad)

    def f(x):
        return (x * 2).transpose(0, 1).contiguous().view(3, 8)

    def g(x):
        return (x.transpose(0, 2) + 0).view(-1)

    for fn in (f, g):
        want = fn(x)
        got = fg.compile(fn)(x)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        with fg.no_grad():
            got = fg.compile(fn)(x)
        np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
