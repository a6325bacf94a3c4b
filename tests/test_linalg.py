"""Targeted tests for matmul & co., linear and einsum: NumPy/PyTorch rules,
dtype promotion, layouts, the threaded paths, and error messages."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional
RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def T(a):
    return fg.tensor(a)


def val(t):
    if t.dtype == fg.bfloat16:
        t = t.float()
    return np.asarray(t)


# ---------------------------------------------------------------------------
# matmul shape rules
# ---------------------------------------------------------------------------

SHAPE_CASES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3,)),
    ((3,), (5, 3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((2, 1, 4, 3), (5, 3, 2)),
    ((1, 2, 3), (7, 3, 4)),
    ((0, 2, 3), (3, 4)),
    ((2, 0), (0, 4)),
    ((0,), (0,)),
    ((2, 3), (3, 0)),
]


@pytest.mark.parametrize("sa,sb", SHAPE_CASES)
def test_matmul_shapes_match_numpy(sa, sb):
    a, b = rand(*sa), rand(*sb)
    r = fg.matmul(T(a), T(b))
    ref = np.matmul(a, b)
    assert tuple(r.shape) == ref.shape
    np.testing.assert_allclose(val(r), ref, rtol=1e-12, atol=1e-12)
    # the operator and the method agree
    np.testing.assert_array_equal(val(T(a) @ T(b)), val(r))
    np.testing.assert_array_equal(val(T(a).matmul(T(b))), val(r))


def test_dot_of_vectors_is_0d():
    r = T(np.array([1.0, 2.0, 3.0])) @ T(np.array([4.0, 5.0, 6.0]))
    assert r.shape == ()
    assert float(r) == 32.0


def test_k_zero_gives_zeros():
    r = T(np.ones((3, 0), np.float32)) @ T(np.ones((0, 4), np.float32))
    assert r.shape == (3, 4)
    assert (val(r) == 0).all()
    r = fg.matmul(T(np.ones((2, 3, 0), np.int64)), T(np.ones((0, 2), np.int64)))
    assert r.shape == (2, 3, 2) and r.dtype == fg.int64 and (val(r) == 0).all()


def test_rmatmul_with_array_like():
    b = rand(2, 3)
    r = [[1.0, 2.0], [3.0, 4.0]] @ T(b)
    np.testing.assert_allclose(val(r), np.array([[1.0, 2.0], [3.0, 4.0]]) @ b)
    r = T(b) @ [1.0, 0.0, 2.0]
    np.testing.assert_allclose(val(r), b @ np.array([1.0, 0.0, 2.0]))


# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "da,db,want",
    [
        ("float32", "float64", "float64"),
        ("int32", "int64", "int64"),
        ("int32", "float32", "float32"),
        ("int64", "float16", "float16"),
        ("float16", "float16", "float16"),
        ("bfloat16", "bfloat16", "bfloat16"),
        ("float16", "bfloat16", "float32"),
        ("bfloat16", "float32", "float32"),
    ],
)
def test_matmul_promotes(da, db, want):
    a = fg.tensor(np.arange(6.0).reshape(2, 3)).to(getattr(fg, da))
    b = fg.tensor(np.arange(12.0).reshape(3, 4) - 5).to(getattr(fg, db))
    r = a @ b
    assert r.dtype.name == want
    ref = np.arange(6.0).reshape(2, 3) @ (np.arange(12.0).reshape(3, 4) - 5)
    np.testing.assert_array_equal(val(r).astype(np.float64), ref)


def test_bool_matmul_is_type_error():
    a = fg.tensor(np.ones((2, 2), bool))
    with pytest.raises(TypeError, match="matmul"):
        a @ a


@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_int_matmul_exact(dt):
    a = RNG.integers(-1000, 1000, size=(37, 53)).astype(dt)
    b = RNG.integers(-1000, 1000, size=(53, 29)).astype(dt)
    r = T(a) @ T(b)
    assert r.dtype.name == dt
    np.testing.assert_array_equal(val(r), a @ b)
    # large enough for the threaded integer path, with a transposed operand
    a = RNG.integers(-50, 50, size=(180, 120)).astype(dt)
    b = RNG.integers(-50, 50, size=(150, 120)).astype(dt)
    np.testing.assert_array_equal(val(T(a) @ T(b).T), a @ b.T)
    # batched with broadcasting
    a = RNG.integers(-9, 9, size=(3, 1, 4, 5)).astype(dt)
    b = RNG.integers(-9, 9, size=(2, 5, 6)).astype(dt)
    np.testing.assert_array_equal(val(fg.matmul(T(a), T(b))), a @ b)


@pytest.mark.parametrize("dt,rtol", [("float16", 1e-3), ("bfloat16", 8e-3)])
def test_half_precision_accumulates_in_float32(dt, rtol):
    a = rand(16, 300, dtype=np.float32)
    b = rand(300, 8, dtype=np.float32)
    ta = T(a).to(getattr(fg, dt))
    tb = T(b).to(getattr(fg, dt))
    exact = val(ta.float()).astype(np.float64) @ val(tb.float()).astype(np.float64)
    r = ta @ tb
    assert r.dtype.name == dt
    # one rounding at the end: within a half-precision ulp of the exact product
    np.testing.assert_allclose(val(r.float()), exact, rtol=rtol, atol=rtol * np.abs(exact).max() * 1e-2)


# ---------------------------------------------------------------------------
# layouts and threaded paths
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_strided_and_transposed_operands(dt):
    tol = 1e-4 if dt == np.float32 else 1e-11
    a = rand(40, 30, dtype=dt)
    b = rand(50, 40, dtype=dt)
    ta, tb = T(a), T(b)
    np.testing.assert_allclose(val(ta.T @ tb.T), a.T @ b.T, rtol=tol, atol=tol)
    np.testing.assert_allclose(val(ta[::2, ::3].T @ tb[::5, ::2].T), a[::2, ::3].T @ b[::5, ::2].T, rtol=tol, atol=tol)
    fa = ta.flip(0, 1)
    np.testing.assert_allclose(val(tb @ fa), b @ a[::-1, ::-1], rtol=tol, atol=tol)
    # an expanded (stride-0) operand
    row = T(rand(1, 30, dtype=dt)).expand(40, 30)
    np.testing.assert_allclose(val(row @ ta.T), val(row) @ a.T, rtol=tol, atol=tol)
    # inputs unchanged
    np.testing.assert_array_equal(val(ta), a)
    np.testing.assert_array_equal(val(tb), b)


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((300, 200), (200, 250)),  # threaded inside gemm
        ((16, 40, 50), (16, 50, 30)),  # many small matrices, threaded over the batch
        ((2, 300, 260), (2, 260, 280)),  # few big matrices
        ((4, 100, 64), (64, 70)),  # folded into one [400, 64] product
        ((64, 70), (4, 70, 30)),  # broadcast left operand
    ],
)
def test_large_products(sa, sb):
    for dt, tol in [(np.float32, 2e-4), (np.float64, 1e-10)]:
        a, b = rand(*sa, dtype=dt), rand(*sb, dtype=dt)
        np.testing.assert_allclose(val(T(a) @ T(b)), a.astype(np.float64) @ b, rtol=tol, atol=tol)


@pytest.mark.parametrize("m,k,n", [(10, 1024, 300), (300, 64, 10), (12, 200, 96), (96, 33, 15), (8, 9, 64), (256, 1024, 10)])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt", "strided"])
def test_skinny_float32_products(m, k, n, layout):
    """A short side of 8–15 runs the packed kernel (transposed when it is
    the columns); every operand layout and the bias-initialised linear agree
    with float64 NumPy."""
    a64, b64 = rand(m, k), rand(k, n)
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    if layout == "nn":
        ta, tb = T(a32), T(b32)
    elif layout == "tn":
        ta, tb = T(np.ascontiguousarray(a32.T)).T, T(b32)
    elif layout == "nt":
        ta, tb = T(a32), T(np.ascontiguousarray(b32.T)).T
    elif layout == "tt":
        ta, tb = T(np.ascontiguousarray(a32.T)).T, T(np.ascontiguousarray(b32.T)).T
    else:
        wide_a = np.zeros((m, 2 * k), np.float32)
        wide_a[:, ::2] = a32
        wide_b = np.zeros((2 * k, n), np.float32)
        wide_b[::2] = b32
        ta, tb = T(wide_a)[:, ::2], T(wide_b)[::2]
    want = a32.astype(np.float64) @ b32.astype(np.float64)
    tol = 2e-5 * np.sqrt(k)
    got = ta @ tb
    assert got.shape == (m, n)
    np.testing.assert_allclose(val(got), want, rtol=tol, atol=tol)
    # linear: x @ w.T + bias, and its gradients through the transposed product
    bias = rand(n).astype(np.float32)
    x = T(a32).requires_grad_()
    w = T(np.ascontiguousarray(b32.T)).requires_grad_()
    y = F.linear(x, w, T(bias))
    np.testing.assert_allclose(val(y), want + bias, rtol=tol, atol=tol)
    y.sum().backward()
    ones = np.ones((m, n))
    np.testing.assert_allclose(val(x.grad), ones @ b32.astype(np.float64).T, rtol=tol, atol=tol)
    np.testing.assert_allclose(val(w.grad), (a32.astype(np.float64).T @ ones).T, rtol=tol, atol=tol)


def test_folded_batch_with_noncontiguous_left():
    b = rand(20, 7)
    ta = T(rand(4, 30, 20)).permute(1, 0, 2)  # [30, 4, 20]: batch and rows do not merge
    np.testing.assert_allclose(val(ta @ T(b)), val(ta) @ b, rtol=1e-12)


# ---------------------------------------------------------------------------
# mm / bmm / mv / dot / outer
# ---------------------------------------------------------------------------

def test_mm_bmm_mv_dot_outer_values():
    a, b = rand(3, 4), rand(4, 5)
    np.testing.assert_allclose(val(fg.mm(T(a), T(b))), a @ b)
    np.testing.assert_allclose(val(T(a).mm(T(b))), a @ b)
    x, y = rand(2, 3, 4), rand(2, 4, 5)
    np.testing.assert_allclose(val(fg.bmm(T(x), T(y))), x @ y)
    v = rand(4)
    r = fg.mv(T(a), T(v))
    assert r.shape == (3,)
    np.testing.assert_allclose(val(r), a @ v)
    d = fg.dot(T(v), T(v))
    assert d.shape == ()
    np.testing.assert_allclose(float(d), v @ v)
    o = fg.outer(T(v), T(rand(3)))
    assert o.shape == (4, 3)
    iv = np.array([1, 2, 3], np.int32)
    assert fg.outer(T(iv), T(iv)).dtype == fg.int32


@pytest.mark.parametrize(
    "fn,sa,sb,name",
    [
        (fg.mm, (2, 3, 4), (4, 5), "mm"),
        (fg.mm, (3,), (3, 4), "mm"),
        (fg.bmm, (2, 3, 4), (4, 5), "bmm"),
        (fg.bmm, (2, 3, 4), (3, 4, 5), "bmm"),
        (fg.mv, (3, 4), (4, 1), "mv"),
        (fg.dot, (3,), (4,), "dot"),
        (fg.dot, (3, 1), (3,), "dot"),
        (fg.outer, (3, 1), (3,), "outer"),
    ],
)
def test_strict_rank_errors(fn, sa, sb, name):
    a, b = rand(*sa), rand(*sb)
    ta, tb = T(a), T(b)
    with pytest.raises(ValueError, match=name):
        fn(ta, tb)
    np.testing.assert_array_equal(val(ta), a)
    np.testing.assert_array_equal(val(tb), b)


def test_matmul_errors_name_op_and_shapes():
    ta, tb = T(rand(2, 3)), T(rand(4, 5))
    with pytest.raises(ValueError, match=r"matmul.*\[2, 3\].*\[4, 5\]"):
        ta @ tb
    with pytest.raises(ValueError, match=r"matmul.*\[2, 3, 4\].*\[5, 4, 6\]"):
        fg.matmul(T(rand(2, 3, 4)), T(rand(5, 4, 6)))
    with pytest.raises(ValueError, match="matmul"):
        fg.matmul(T(np.float64(2.0)), T(rand(3)))
    with pytest.raises(ValueError, match="matmul"):
        T(rand(3)) @ T(rand(4))


# ---------------------------------------------------------------------------
# linear
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("xshape", [(5,), (3, 5), (2, 3, 5), (0, 5)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear(xshape, with_bias):
    x, w, b = rand(*xshape), rand(4, 5), rand(4)
    r = F.linear(T(x), T(w), T(b) if with_bias else None)
    ref = x @ w.T + (b if with_bias else 0)
    assert tuple(r.shape) == ref.shape
    np.testing.assert_allclose(val(r), ref, rtol=1e-12, atol=1e-12)


def test_linear_dtypes_and_strided_bias():
    x = rand(6, 5, dtype=np.float32)
    w = rand(4, 5, dtype=np.float32)
    bb = rand(8, dtype=np.float32)
    tb = T(bb)[::2]
    r = F.linear(T(x).half(), T(w).half(), tb.half())
    assert r.dtype == fg.float16
    ref = val(T(x).half().float()) @ val(T(w).half().float()).T + val(tb.half().float())
    np.testing.assert_allclose(val(r.float()), ref, rtol=2e-3, atol=2e-3)
    xi = np.arange(10, dtype=np.int64).reshape(2, 5)
    wi = np.arange(20, dtype=np.int64).reshape(4, 5) - 7
    bi = np.array([1, -2, 3, 100], np.int64)
    r = F.linear(T(xi), T(wi), T(bi))
    assert r.dtype == fg.int64
    np.testing.assert_array_equal(val(r), xi @ wi.T + bi)
    # a large product with a bias (threaded path, bias accumulated by gemm)
    x = rand(300, 200, dtype=np.float32)
    w = rand(250, 200, dtype=np.float32)
    b = rand(250, dtype=np.float32)
    np.testing.assert_allclose(val(F.linear(T(x), T(w), T(b))), x.astype(np.float64) @ w.T + b, rtol=2e-4, atol=2e-4)


def test_linear_errors():
    x, w = T(rand(3, 5)), T(rand(4, 6))
    with pytest.raises(ValueError, match=r"linear.*\[3, 5\].*\[4, 6\]"):
        F.linear(x, w)
    with pytest.raises(ValueError, match="linear.*bias"):
        F.linear(T(rand(3, 5)), T(rand(4, 5)), T(rand(3)))
    with pytest.raises(ValueError, match="linear"):
        F.linear(T(rand(3, 5)), T(rand(2, 4, 5)))


# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,i->", [(7,), (7,)]),
    ("i,i", [(7,), (7,)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("ij->", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("ba,ab", [(3, 4), (4, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk,kl", [(2, 3), (3, 4), (4, 5)]),
    ("bij,jk->bik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...i->...", [(2, 3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("ijk->kij", [(2, 3, 4)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("ab,cd->abcd", [(2, 3), (4, 5)]),
    ("ijk,ikl->ijl", [(3, 0, 4), (3, 4, 2)]),
    ("ij,jk->ik", [(3, 0), (0, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij,j->i", [(3, 1), (4,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum_matches_numpy(eq, shapes):
    arrs = [rand(*s) for s in shapes]
    ref = np.einsum(eq, *arrs)
    r = fg.einsum(eq, *[T(a) for a in arrs])
    assert tuple(r.shape) == np.shape(ref)
    np.testing.assert_allclose(val(r), ref, rtol=1e-12, atol=1e-12)


def test_einsum_operand_list_ints_and_views():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = np.arange(20, dtype=np.int32).reshape(4, 5)
    r = fg.einsum("ij,jk->ik", [T(a), T(b)])
    assert r.dtype == fg.int32
    np.testing.assert_array_equal(val(r), a @ b)
    ta = T(rand(5, 6))
    tt = fg.einsum("ij->ji", ta.T)  # a transposed operand, transposed back
    np.testing.assert_array_equal(val(tt), val(ta))
    r = fg.einsum(" i j , j k -> i k ", T(a).double(), T(b).double())
    np.testing.assert_array_equal(val(r), a @ b)
    r = fg.einsum("ij,jk->ik", T(a), T(b).double())
    assert r.dtype == fg.float64


@pytest.mark.parametrize(
    "eq,shapes,exc",
    [
        ("ij,jk->ik", [(2, 3)], ValueError),
        ("ij,jk->ik", [(2, 3), (4, 5)], ValueError),
        ("ij->ik", [(2, 3)], ValueError),
        ("ij->ii", [(2, 3)], ValueError),
        ("i1->i", [(2, 3)], ValueError),
        ("ijk->i", [(2, 3)], ValueError),
        ("ii->i", [(2, 3)], ValueError),
        ("i..j->i", [(2, 3)], ValueError),
        ("...ij->ij", [(2, 3, 4)], ValueError),
    ],
)
def test_einsum_errors(eq, shapes, exc):
    ts = [T(rand(*s)) for s in shapes]
    with pytest.raises(exc, match="einsum"):
        fg.einsum(eq, *ts)


def test_einsum_bool_is_type_error():
    with pytest.raises(TypeError, match="einsum"):
        fg.einsum("i,i->", T(np.ones(3, bool)), T(np.ones(3, bool)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(1, 8, 2), (3, 9, 5), (8, 32, 32), (5, 33, 7), (2, 16, 4), (4, 15, 3), (6, 7, 3),
                                   (3, 17, 40), (7, 24, 33), (9, 8, 64), (2, 31, 36)])
def test_small_matmul_with_transposed_right_operand(dtype, m, k, n):
    # x @ W.T with a row-major W: the small-product kernel copies the right
    # operand to row-major order (8x8 blocks and ragged edges); linear with a
    # bias accumulates onto the bias; batched too.
    x, w, b = rand(m, k, dtype=dtype), rand(n, k, dtype=dtype), rand(n, dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(val(T(x) @ T(w).T), x @ w.T, **tol)
    # the copy is exact: the same bits as multiplying by a contiguous W.T
    np.testing.assert_array_equal(val(T(x) @ T(w).T), val(T(x) @ T(np.ascontiguousarray(w.T))))
    # the bias is added as each result is stored: the bits of a separate add,
    # for a full bias and for a one-element one broadcast over the features
    for bias in (b, b[:1]):
        np.testing.assert_array_equal(val(fg.nn.functional.linear(T(x), T(w), T(bias))), val(T(x) @ T(w).T + T(bias)))
    np.testing.assert_allclose(val(fg.nn.functional.linear(T(x), T(w), T(b))), x @ w.T + b, **tol)
    xb, wb = rand(3, m, k, dtype=dtype), rand(3, n, k, dtype=dtype)
    np.testing.assert_allclose(val(T(xb) @ T(wb).mT), xb @ wb.transpose(0, 2, 1), **tol)


_SMALL_BITS = """
import hashlib, numpy as np, ferrograd as fg
rng = np.random.default_rng(7)
h = hashlib.sha256()
for dt in (np.float32, np.float64):
    for m in (1, 2, 3, 4, 5, 7, 8, 9, 12, 13):
        for k, n in ((32, 32), (8, 32), (5, 70), (33, 64), (16, 40)):
            a = rng.standard_normal((m, k)).astype(dt)
            b = rng.standard_normal((k, n)).astype(dt)
            for x, y in ((fg.tensor(a), fg.tensor(b)), (fg.tensor(a), fg.tensor(np.ascontiguousarray(b.T)).T),
                         (fg.tensor(np.ascontiguousarray(a.T)).T, fg.tensor(b))):
                h.update(np.ascontiguousarray((x @ y).numpy()).tobytes())
print(h.hexdigest())
"""


def test_small_products_give_the_same_bits_at_every_simd_level():
    """The small-product kernel sums each element in the same order (one
    FMA per step) at every SIMD level, so AVX-512, AVX2 and scalar runs
    agree bit for bit."""
    import os
    import subprocess
    import sys

    digests = {}
    for level in ("scalar", "avx2", "avx512"):
        env = {**os.environ, "FG_CPU": level}
        out = subprocess.run([sys.executable, "-c", _SMALL_BITS], env=env, capture_output=True, text=True, check=True)
        digests[level] = out.stdout.strip()
    assert len(set(digests.values())) == 1, digests
