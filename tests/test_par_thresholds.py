"""Every CPU kernel family just below, at and just above the size where it starts
splitting work over threads, against NumPy and against its own one-thread result.

The thresholds (``src/backend/cpu``): elementwise kernels go parallel from twice
their grain: ``1 << 12`` for costly maps (exp, tanh, pow, ...), so 8192 elements,
and ``1 << 15`` for cheap ones (add, neg, ...), so 65536; a row longer than
``1 << 14`` is cut into segments. Reductions, scans and arg-reductions split from
``1 << 15`` elements of work (one reduction over at least ``2 << 15`` elements is cut
into chunks; contiguous runs of at least 4096 elements align their blocks, so offset
views are checked too); softmax and the norms from ``1 << 13``; float32 matmul from
``m*n*k = 1 << 20`` (a shared-panel plan from ``1 << 24``), other matmuls from
``1 << 18``. Elementwise results of at least ``1 << 20`` elements are deferred
(``FG_DEFER_MIN``).

The tests run with 4 threads whatever the host has, so the parallel paths are taken
on a 1- or 2-core runner too, and again in the deterministic mode (16 parts).
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional

HEAVY = 2 << 12  # 8192
CHEAP = 2 << 15  # 65536
RED = 1 << 15  # 32768
NORM = 1 << 13  # 8192


@pytest.fixture(autouse=True, params=["4-threads", "deterministic"])
def four_threads(request):
    """4 threads; then the deterministic mode, which splits work into 16 parts."""
    before, det = fg.get_num_threads(), fg.are_deterministic_algorithms_enabled()
    fg.set_num_threads(4)
    fg.use_deterministic_algorithms(request.param == "deterministic")
    yield
    fg.use_deterministic_algorithms(det)
    fg.set_num_threads(before)


def around(t: int) -> list[int]:
    return [t - 1, t, t + 1]


def one_thread(fn):
    before = fg.get_num_threads()
    fg.set_num_threads(1)
    try:
        return fn()
    finally:
        fg.set_num_threads(before)


def layouts(a: np.ndarray, n: int):
    """``(name, ferrograd tensor, the same values in NumPy)`` for n elements: dense, a
    stride-2 view, an offset view (unaligned start) and a transposed 2-D view."""
    yield "dense", fg.tensor(a[:n]), a[:n]
    big = fg.tensor(np.repeat(a[:n], 2))
    yield "stride2", big[::2], a[:n]
    off = fg.tensor(a[: n + 1])
    yield "offset", off[1:], a[1 : n + 1]
    if n % 2 == 0:
        t = fg.tensor(a[:n].reshape(2, n // 2).T.copy()).T  # a (2, n/2) transposed view
        yield "transposed", t, a[:n].reshape(2, n // 2)


def _close(got: fg.Tensor, want: np.ndarray, rtol: float, atol: float = 0.0, msg: str = ""):
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol, err_msg=msg)


# --------------------------------------------------------------------------- elementwise

HEAVY_UNARY = {
    "exp": (lambda t: t.exp(), np.exp),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    "sin": (lambda t: t.sin(), np.sin),
    "log1p": (lambda t: t.abs().log1p(), lambda a: np.log1p(np.abs(a))),
}
CHEAP_UNARY = {
    "neg": (lambda t: -t, np.negative),
    "abs": (lambda t: t.abs(), np.abs),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    "sqrt": (lambda t: t.abs().sqrt(), lambda a: np.sqrt(np.abs(a))),
}


@pytest.mark.parametrize("n", around(HEAVY) + [3 * HEAVY + 7])
@pytest.mark.parametrize("op", list(HEAVY_UNARY))
def test_heavy_unary_around_its_threshold(op, n):
    f, ref = HEAVY_UNARY[op]
    a = np.random.default_rng(n).standard_normal(n + 1).astype(np.float32)
    for name, t, v in layouts(a, n):
        got = f(t)
        _close(got, ref(v.astype(np.float64)).astype(np.float32), rtol=2e-6, atol=1e-7, msg=name)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(one_thread(lambda t=t: f(t))), err_msg=name)


@pytest.mark.parametrize("n", around(CHEAP) + [(1 << 14) * 5 + 3])
@pytest.mark.parametrize("op", list(CHEAP_UNARY))
def test_cheap_unary_around_its_threshold(op, n):
    f, ref = CHEAP_UNARY[op]
    a = np.random.default_rng(n).standard_normal(n + 1).astype(np.float32)
    for name, t, v in layouts(a, n):
        _close(f(t), ref(v), rtol=0, msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("n", around(CHEAP))
def test_binary_around_its_threshold(n, dtype):
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n + 1) * 100).astype(dtype)
    b = (rng.standard_normal(n + 1) * 100).astype(dtype)
    tb = fg.tensor(b[:n])
    for name, t, v in layouts(a, n):
        w = b[:n].reshape(v.shape) if v.ndim == 1 else b[:n].reshape(2, n // 2)
        u = tb if v.ndim == 1 else tb.reshape(2, n // 2)
        _close(t + u, v + w, rtol=0, msg=f"add {name}")
        _close(t * u, v * w, rtol=0, msg=f"mul {name}")
        _close(fg.maximum(t, u), np.maximum(v, w), rtol=0, msg=f"maximum {name}")
    # broadcasting: a row against a column, the output just around the threshold
    rows = 2
    cols = n // rows
    x, y = a[:rows].reshape(rows, 1), b[:cols].reshape(1, cols)
    _close(fg.tensor(x) - fg.tensor(y), x - y, rtol=0, msg="broadcast")


@pytest.mark.parametrize("n", around(HEAVY))
def test_heavy_binary_around_its_threshold(n):
    rng = np.random.default_rng(n)
    a = np.abs(rng.standard_normal(n + 1)).astype(np.float64) + 0.1
    b = rng.standard_normal(n + 1).astype(np.float64)
    tb = fg.tensor(b[:n])
    for name, t, v in layouts(a, n):
        u = tb if v.ndim == 1 else tb.reshape(2, n // 2)
        w = b[:n].reshape(v.shape)
        _close(t.pow(u), np.power(v, w), rtol=1e-13, msg=f"pow {name}")
        _close(fg.atan2(t, u), np.arctan2(v, w), rtol=1e-13, msg=f"atan2 {name}")


@pytest.mark.parametrize("n", around(1 << 20))
def test_deferred_elementwise_around_its_threshold(n):
    """From ``1 << 20`` elements an elementwise result is deferred and fused with the next."""
    a = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    t = fg.tensor(a)
    got = ((t * 2.0 + 1.0).tanh() - t).abs()
    want = np.abs(np.tanh(a.astype(np.float64) * 2 + 1) - a).astype(np.float32)
    _close(got, want, rtol=2e-6, atol=2e-7)


# --------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", around(RED) + around(4096) + around(2 * RED) + [5 * RED + 11])
def test_full_reductions_around_their_thresholds(n, dtype):
    a = np.random.default_rng(n).standard_normal(n + 1).astype(dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for name, t, v in layouts(a, n):
        v64 = v.astype(np.float64)
        _close(t.sum(), v64.sum(), rtol=rtol, atol=rtol * np.abs(v64).sum(), msg=f"sum {name}")
        _close(t.mean(), v64.mean(), rtol=rtol, atol=rtol * np.abs(v64).mean(), msg=f"mean {name}")
        _close(t.amax(), v.max(), rtol=0, msg=f"amax {name}")
        _close(t.amin(), v.min(), rtol=0, msg=f"amin {name}")
        assert int(t.argmax()) == int(np.argmax(v)), f"argmax {name}"
        assert int(t.argmin()) == int(np.argmin(v)), f"argmin {name}"


# (kept outputs, reduced length): many outputs (rows split), few outputs with short and
# long rows (rows grouped, or one row cut into chunks), around the work threshold.
DIM_SHAPES = [(64, 511), (64, 512), (64, 513), (2, RED - 1), (2, RED + 1), (3, 2 * RED - 1), (1, 2 * RED + 1)]


@pytest.mark.parametrize("shape", DIM_SHAPES)
def test_dim_reductions_around_their_thresholds(shape):
    a = np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32)
    a64 = a.astype(np.float64)
    for name, t, v, axis in (
        ("rows", fg.tensor(a), a64, 1),
        ("columns", fg.tensor(a.T.copy()).T, a64, 1),
        ("dim 0", fg.tensor(a.T.copy()), a64.T, 0),
    ):
        d = axis
        _close(t.sum(d), v.sum(axis), rtol=1e-5, atol=1e-5 * np.abs(v).sum(axis).max(), msg=f"sum {name}")
        _close(t.amax(d), v.max(axis), rtol=0, msg=f"amax {name}")
        _close(t.argmax(d), v.argmax(axis), rtol=0, msg=f"argmax {name}")
        _close(
            t.cumsum(d),
            np.cumsum(v, axis),
            rtol=1e-4,
            atol=1e-4 * np.sqrt(v.shape[axis]),
            msg=f"cumsum {name}",
        )


@pytest.mark.parametrize("n", [RED + 1, 2 * RED + 1, 4 * RED + 3])
def test_arg_reductions_return_the_first_of_ties_across_chunks(n):
    """As in PyTorch and NumPy: of equal extremes, the first index, however the work is split."""
    a = np.zeros(n, np.float32)
    a[[5, n // 2, n - 1]] = 3.0
    a[[7, n // 3, n - 2]] = -3.0
    t = fg.tensor(a)
    assert (int(t.argmax()), int(t.argmin())) == (5, 7)
    two = fg.tensor(np.stack([a, a[::-1].copy()]))
    np.testing.assert_array_equal(np.asarray(two.argmax(1)), [5, 0])
    np.testing.assert_array_equal(np.asarray(fg.tensor(np.zeros(n, np.float32)).argmax()), 0)


# --------------------------------------------------------------------------- softmax and norms


@pytest.mark.parametrize("rows", [127, 128, 129])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_and_norms_around_their_threshold(rows, dtype):
    """rows x 64 elements: 8128, 8192 and 8256, around ``1 << 13``."""
    a = np.random.default_rng(rows).standard_normal((rows, 64)).astype(dtype)
    a64 = a.astype(np.float64)
    rtol = 2e-5 if dtype == "float32" else 1e-12
    t = fg.tensor(a)
    e = np.exp(a64 - a64.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    _close(F.softmax(t, dim=1), sm, rtol=rtol, atol=rtol * 1e-2)
    _close(F.log_softmax(t, dim=1), np.log(sm), rtol=rtol, atol=rtol)
    # along dim 0 (inner != 1)
    e0 = np.exp(a64 - a64.max(0, keepdims=True))
    _close(F.softmax(t, dim=0), e0 / e0.sum(0, keepdims=True), rtol=rtol, atol=rtol * 1e-2)
    mu = a64.mean(1, keepdims=True)
    var = ((a64 - mu) ** 2).mean(1, keepdims=True)
    _close(F.layer_norm(t, (64,)), (a64 - mu) / np.sqrt(var + 1e-5), rtol=rtol * 10, atol=rtol * 10)
    rms = np.sqrt((a64**2).mean(1, keepdims=True) + 1e-6)
    _close(F.rms_norm(t, (64,), eps=1e-6), a64 / rms, rtol=rtol * 10, atol=rtol * 10)


# --------------------------------------------------------------------------- matmul

# m*n*k just below, at and above 1 << 18, 1 << 20 and 1 << 24
MATMUL_SHAPES = [
    (63, 64, 64),
    (64, 64, 64),
    (65, 64, 64),
    (64, 128, 127),
    (64, 128, 128),
    (65, 128, 128),
    (255, 256, 256),
    (256, 256, 256),
    (257, 256, 256),
    (3, 1024, 341),
    (3, 1024, 342),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mnk", MATMUL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_around_its_thresholds(mnk, dtype):
    m, n, k = mnk
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 * np.sqrt(k) if dtype == "float32" else 1e-12 * np.sqrt(k)
    got = fg.tensor(a) @ fg.tensor(b)
    _close(got, want, rtol=tol, atol=tol)
    # transposed operands take the other packing paths
    got_t = fg.tensor(a.T.copy()).T @ fg.tensor(b.T.copy()).T
    _close(got_t, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16])
@pytest.mark.parametrize("n", around(HEAVY) + around(CHEAP))
def test_low_precision_elementwise_around_the_thresholds(n, dtype):
    """Half-precision maps convert in blocks: compare with float32 math rounded once."""
    a = np.random.default_rng(n).standard_normal(n + 1).astype(np.float32)
    for name, t32, _ in layouts(a, n):
        t = t32.to(dtype)
        x = np.asarray(t.float()).astype(np.float64)
        rtol = 8e-3 if dtype == fg.bfloat16 else 1e-3
        _close(t.exp().float(), np.exp(x), rtol=rtol, msg=f"exp {name}")
        _close((t + t).float(), 2 * x, rtol=0, msg=f"add {name}")
        got = t.tanh()
        np.testing.assert_array_equal(
            np.asarray(got.float()), np.asarray(one_thread(lambda t=t: t.tanh()).float()), err_msg=name
        )


# --------------------------------------------------------------------------- indexing

IDX = 2 << 15  # 65536: indexing kernels split from twice ``1 << 15``


@pytest.mark.parametrize("n", around(IDX))
def test_indexing_around_its_threshold(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    idx = rng.integers(0, n, n)
    t, ti = fg.tensor(a), fg.tensor(idx)
    _close(t[ti], a[idx], rtol=0, msg="advanced index")
    _close(fg.gather(t, 0, ti), np.take_along_axis(a, idx, 0), rtol=0, msg="gather")
    _close(t.index_select(0, ti), a[idx], rtol=0, msg="index_select")
    perm = rng.permutation(n)
    out = fg.zeros(n)
    out[fg.tensor(perm)] = t
    want = np.zeros(n, np.float32)
    want[perm] = a
    _close(out, want, rtol=0, msg="index put")
    # accumulation with repeated indices: integer-valued floats add exactly in any order
    v = rng.integers(-8, 8, n).astype(np.float32)
    acc = fg.zeros(n).index_put_((ti,), fg.tensor(v), accumulate=True)
    want = np.zeros(n, np.float32)
    np.add.at(want, idx, v)
    _close(acc, want, rtol=0, msg="index_put_ accumulate")
    sa = fg.zeros(n).scatter_add(0, ti, fg.tensor(v))
    _close(sa, want, rtol=0, msg="scatter_add")
    z = np.where(rng.random(n) < 0.5, 0.0, a).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(fg.tensor(z).nonzero()).reshape(-1), np.flatnonzero(z))
    np.testing.assert_array_equal(np.asarray(fg.masked_select(t, fg.tensor(z != 0))), a[z != 0])


@pytest.mark.parametrize("rows", [255, 256, 257])
def test_triangles_around_their_threshold(rows):
    a = np.random.default_rng(rows).standard_normal((rows, 256)).astype(np.float32)
    t = fg.tensor(a)
    for k in (-3, 0, 5):
        _close(t.triu(k), np.triu(a, k), rtol=0, msg=f"triu {k}")
        _close(t.tril(k), np.tril(a, k), rtol=0, msg=f"tril {k}")


# --------------------------------------------------------------------------- random


@pytest.mark.parametrize("n", around(RED) + [4 * RED + 5])
def test_random_streams_do_not_depend_on_the_split(n):
    """Counter-based streams: the same seed draws the same values on 1 thread and on many."""

    def draw():
        fg.manual_seed(1234)
        return [
            np.asarray(fg.rand(n)),
            np.asarray(fg.randn(n)),
            np.asarray(fg.randint(0, 1000, (n,))),
            np.asarray(fg.randperm(n)),
        ]

    many, one = draw(), one_thread(draw)
    for a, b in zip(many, one, strict=True):
        np.testing.assert_array_equal(a, b)
    u, g, i, p = many
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(g.mean()) < 0.05 and abs(g.std() - 1) < 0.05
    assert 0 <= i.min() and i.max() < 1000
    np.testing.assert_array_equal(np.sort(p), np.arange(n))


# --------------------------------------------------------------------------- optimizers


@pytest.mark.parametrize("n", around(1 << 18))
def test_adam_step_around_its_threshold(n):
    """The fused optimizer kernels split from ``1 << 18`` elements in all."""
    rng = np.random.default_rng(n)
    p0 = rng.standard_normal(n)
    grads = [rng.standard_normal(n) for _ in range(3)]
    p = fg.tensor(p0.copy())
    opt = fg.optim.Adam([p], lr=0.01, weight_decay=0.1)
    ref, m, v = p0.copy(), np.zeros(n), np.zeros(n)
    for step, g in enumerate(grads, 1):
        p.grad = fg.tensor(g)
        opt.step()
        g = g + 0.1 * ref
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mh, vh = m / (1 - 0.9**step), v / (1 - 0.999**step)
        ref = ref - 0.01 * mh / (np.sqrt(vh) + 1e-8)
    _close(p, ref, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("w", [63, 64, 65])
def test_pooling_around_its_threshold(w):
    """Pooling splits over (batch, channel) planes from ``1 << 14`` input elements."""
    a = np.random.default_rng(w).standard_normal((2, 2, 64, w)).astype(np.float32)
    t = fg.tensor(a)
    wc = w // 2 * 2
    blocks = a[:, :, :, :wc].reshape(2, 2, 32, 2, wc // 2, 2)
    _close(F.max_pool2d(t, 2), blocks.max(axis=(3, 5)), rtol=0)
    _close(F.avg_pool2d(t, 2), blocks.astype(np.float64).mean(axis=(3, 5)), rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- compiled graphs


@pytest.mark.parametrize("n", around(1 << 14) + around(CHEAP))
def test_compiled_fused_kernels_around_their_thresholds(n):
    """Fused kernels of compiled graphs split from ``1 << 14`` elements; their results
    match eager ferrograd's (itself checked against NumPy above)."""
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    t = fg.tensor(a)

    def fn(x):
        y = (x * 2.0 + 1.0).tanh() * x - x.abs()
        return y, y.sum()

    f = fg.compile(fn)
    got_y, got_s = f(t)
    want_y, want_s = fn(t)
    np.testing.assert_array_equal(np.asarray(got_y), np.asarray(want_y))
    _close(got_s, np.asarray(want_s), rtol=1e-5, atol=1e-3)
    y64 = np.tanh(a.astype(np.float64) * 2 + 1) * a - np.abs(a)
    # the difference cancels: its error is relative to the terms (order 1), not to it
    _close(got_y, y64.astype(np.float32), rtol=2e-6, atol=2e-6)
