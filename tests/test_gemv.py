"""Linear layers with one to four rows on the left (``x @ W.T`` as a GEMV
over the rows of the weight): against a NumPy float64 reference at odd sizes,
with and without bias, for strided inputs and batched ones; the same bits on
1 and 2 threads; compiled inference graphs equal to eager bit for bit."""

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

# (in features k, out features n): the W11 CNN's 9216→128, a GPT MLP's
# 768→3072 (both split over threads), odd sizes with a masked tail of k
# (k % 16 != 0) and an output count that is not a multiple of 4.
SHAPES = [(9216, 128), (768, 3072), (4099, 65), (1000, 37), (17, 19), (16, 1), (45, 33)]


@pytest.fixture
def threads():
    old = fg.get_num_threads()
    yield fg.set_num_threads
    fg.set_num_threads(old)


def check(got, x, w, b):
    """``got`` against ``x @ w.T + b`` in float64, relative to the sum of
    the terms' magnitudes (float32 sums in another order differ by a few ulps
    of that)."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = x64 @ w64.T
    scale = np.abs(x64) @ np.abs(w64).T
    if b is not None:
        ref = ref + b
        scale = scale + np.abs(b)
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape
    err = np.max(np.abs(got - ref) / scale)
    assert err < 2e-6, err


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_linear_few_rows_vs_numpy(threads, m, bias):
    rng = np.random.default_rng(m)
    for k, n in SHAPES:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32) if bias else None
        outs = []
        for t in (1, 2):
            threads(t)
            y = F.linear(fg.tensor(x), fg.tensor(w), None if b is None else fg.tensor(b))
            check(y, x, w, b)
            outs.append(np.asarray(y))
        if m <= 4:
            # the split is over outputs, each summed in one order: no change with
            # threads (5 rows take the general GEMM, whose split can change sums)
            assert np.array_equal(outs[0], outs[1]), (m, k, n)


def test_strided_and_batched_inputs(threads):
    rng = np.random.default_rng(3)
    threads(2)
    k, n = 2304, 200
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    wt, bt = fg.tensor(w), fg.tensor(b)
    big = rng.standard_normal((3, 2 * k)).astype(np.float32)
    # every other column: rows of x not contiguous
    xs = fg.tensor(big)[:, ::2]
    check(F.linear(xs, wt, bt), big[:, ::2], w, b)
    # a transposed view: x's column stride is its row count
    xt = rng.standard_normal((k, 2)).astype(np.float32)
    check(F.linear(fg.tensor(xt).t(), wt, bt), xt.T, w, b)
    # leading batch dims fold into rows; a 1-D input is one row
    x3 = rng.standard_normal((2, 1, k)).astype(np.float32)
    y3 = np.asarray(F.linear(fg.tensor(x3), wt, bt))
    check(y3.reshape(2, n), x3.reshape(2, k), w, b)
    x1 = rng.standard_normal(k).astype(np.float32)
    check(np.asarray(F.linear(fg.tensor(x1), wt, bt))[None], x1[None], w, b)
    # the plain product with a transposed weight takes the same path
    check(fg.tensor(big[:2, :k]) @ wt.t(), big[:2, :k], w, None)
    # a weight whose rows are strided (every other column of a wider one)
    w2 = rng.standard_normal((n, 2 * k)).astype(np.float32)
    check(F.linear(fg.tensor(big[:1, :k]), fg.tensor(w2)[:, ::2]), big[:1, :k], w2[:, ::2], None)


def test_float64_few_rows(threads):
    rng = np.random.default_rng(4)
    threads(2)
    x = rng.standard_normal((2, 3000))
    w = rng.standard_normal((100, 3000))
    got = np.asarray(F.linear(fg.tensor(x), fg.tensor(w)))
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "m,bias,act", [(1, True, "relu"), (2, False, "tanh"), (4, True, None), (1, False, None)]
)
def test_compiled_equals_eager(threads, m, bias, act):
    """Inference graphs fuse ``linear → activation → add`` into one node,
    which at few rows runs the same GEMV on the weight as it is."""
    rng = np.random.default_rng(10 + m)
    threads(2)
    fg.manual_seed(m)
    lin = nn.Linear(1536, 383, bias=bias).eval()
    x = fg.tensor(rng.standard_normal((m, 1536)).astype(np.float32))
    r = fg.tensor(rng.standard_normal((m, 383)).astype(np.float32))
    fg_act = {"relu": F.relu, "tanh": fg.tanh, None: lambda t: t}[act]
    np_act = {"relu": lambda v: np.maximum(v, 0.0), "tanh": np.tanh, None: lambda v: v}[act]

    def f(x, r):
        return r + fg_act(lin(x))

    c = fg.compile(f)
    with fg.no_grad():
        want = np.asarray(f(x, r))
        got = np.asarray(c(x, r))
        again = np.asarray(c(x, r))
        names = [nd["op"] for nd in c.graph(x, r).nodes()]
    assert names.count("linear_fused") == 1, names
    assert np.array_equal(got, want) and np.array_equal(again, want)
    w = np.asarray(lin.weight.detach()).astype(np.float64)
    b = np.asarray(lin.bias.detach()).astype(np.float64) if bias else 0.0
    ref = np.asarray(r, dtype=np.float64) + np_act(np.asarray(x, dtype=np.float64) @ w.T + b)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_bad_shapes_raise():
    w = fg.zeros(8, 32)
    with pytest.raises(Exception, match="linear"):
        F.linear(fg.zeros(1, 31), w)
    with pytest.raises(Exception, match="linear"):
        F.linear(fg.zeros(1, 32), w, fg.zeros(7))
