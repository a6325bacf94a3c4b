"""Targeted tests of the reduce family beyond the op table: return types,
ties, NaN, dtype rules, accuracy of large sums, zero-size dims, bad
arguments, multi-dim and negative dims, non-contiguous inputs and the
threaded paths."""

from __future__ import annotations

import itertools

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional


def arr(t) -> np.ndarray:
    if t.dtype == fg.bfloat16:
        t = t.float()
    return np.array(np.asarray(t), copy=True)


def T(a, dtype=None):
    t = fg.from_numpy(np.ascontiguousarray(a))
    return t if dtype is None else t.to(dtype)


RNG = np.random.default_rng(1234)


# ---------------------------------------------------------------------------
# max / min return values, ties, NaN
# ---------------------------------------------------------------------------

def test_max_with_dim_returns_values_and_indices():
    x = T(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], dtype=np.float32))
    r = x.max(dim=1)
    assert isinstance(r, tuple) and len(r) == 2
    v, i = r
    assert v is r.values and i is r.indices
    assert v.dtype == fg.float32 and i.dtype == fg.int64
    np.testing.assert_array_equal(arr(v), [5.0, 7.0])
    np.testing.assert_array_equal(arr(i), [1, 0])
    v, i = fg.min(x, 0, keepdim=True)
    assert tuple(v.shape) == (1, 3) and tuple(i.shape) == (1, 3)
    np.testing.assert_array_equal(arr(v), [[1.0, 0.0, 2.0]])
    np.testing.assert_array_equal(arr(i), [[0, 1, 0]])
    # No dim: a 0-d tensor.
    m = x.max()
    assert isinstance(m, fg.Tensor) and tuple(m.shape) == () and m.item() == 7.0
    assert fg.min(x).item() == 0.0


def test_max_two_tensor_form_is_maximum():
    a = T(np.array([1.0, 4.0, -2.0], dtype=np.float32))
    b = T(np.array([3.0, 0.0, -1.0], dtype=np.float32))
    np.testing.assert_array_equal(arr(fg.max(a, b)), [3.0, 4.0, -1.0])
    np.testing.assert_array_equal(arr(fg.min(a, b)), [1.0, 0.0, -2.0])
    np.testing.assert_array_equal(arr(a.max(other=b)), [3.0, 4.0, -1.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16", "bfloat16"])
def test_ties_pick_first_occurrence(dtype):
    a = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, -1, 5, -1]])
    x = T(a.astype(np.float32)).to(getattr(fg, dtype))
    np.testing.assert_array_equal(arr(x.argmax(1)), [1, 0, 2])
    np.testing.assert_array_equal(arr(x.argmin(1)), [3, 0, 1])
    np.testing.assert_array_equal(arr(x.max(1).indices), [1, 0, 2])
    np.testing.assert_array_equal(arr(x.min(1).indices), [3, 0, 1])
    np.testing.assert_array_equal(arr(x.argmax(0)), [1, 0, 2, 1])
    assert x.argmax().item() == 10  # flat index of the first 5


def test_bool_extrema():
    x = T(np.array([[False, True, True], [False, False, False]]))
    np.testing.assert_array_equal(arr(x.argmax(1)), [1, 0])
    np.testing.assert_array_equal(arr(x.amax(1)), [True, False])
    assert x.amax(1).dtype == fg.bool
    np.testing.assert_array_equal(arr(x.max(1).values), [True, False])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_nan_propagates_as_extreme(dtype):
    a = np.array([[1.0, np.nan, 3.0, np.nan], [0.0, 2.0, -1.0, 2.0]], dtype=np.float32)
    x = T(a).to(getattr(fg, dtype))
    v, i = x.max(1)
    assert np.isnan(arr(v)[0]) and arr(v)[1] == 2.0
    np.testing.assert_array_equal(arr(i), [1, 1])
    v, i = x.min(1)
    assert np.isnan(arr(v)[0]) and arr(v)[1] == -1.0
    np.testing.assert_array_equal(arr(i), [1, 2])
    assert np.isnan(x.amax().item()) and np.isnan(x.amin().item())
    assert np.isnan(x.max().item())
    np.testing.assert_array_equal(arr(x.argmax(1)), [1, 1])
    np.testing.assert_array_equal(arr(x.argmin(1)), [1, 2])
    assert x.argmax().item() == 1
    # Sums and softmax propagate NaN as well.
    assert np.isnan(arr(x.sum(1))[0]) and not np.isnan(arr(x.sum(1))[1])
    sm = arr(x.softmax(1))
    assert np.isnan(sm[0]).all() and np.isfinite(sm[1]).all()


def test_nan_in_long_rows_and_columns():
    n = 1 << 18
    a = RNG.standard_normal((2, n)).astype(np.float32)
    a[1, n - 5] = np.nan
    x = T(a)
    v, i = x.max(1)
    assert not np.isnan(arr(v)[0]) and np.isnan(arr(v)[1])
    np.testing.assert_array_equal(arr(i), [np.argmax(a[0]), n - 5])
    amax = arr(x.amax(1))
    assert amax[0] == a[0].max() and np.isnan(amax[1])
    col = arr(T(np.ascontiguousarray(a.T)).amax(0))
    assert col[0] == a[0].max() and np.isnan(col[1])


# ---------------------------------------------------------------------------
# dtype rules
# ---------------------------------------------------------------------------

def test_sum_prod_dtype_rules():
    b = T(np.array([True, False, True]))
    assert b.sum().dtype == fg.int64 and b.sum().item() == 2
    assert b.prod().dtype == fg.int64 and b.prod().item() == 0
    i = T(np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert i.sum().dtype == fg.int64 and i.sum().item() == 10
    assert i.prod(1).dtype == fg.int64
    np.testing.assert_array_equal(arr(i.prod(1)), [2, 12])
    assert i.sum(dtype=fg.float64).dtype == fg.float64
    assert i.sum(dtype=fg.int32).dtype == fg.int32
    h = T(np.ones(4, dtype=np.float16))
    assert h.sum().dtype == fg.float16
    assert h.sum(dtype=fg.float32).dtype == fg.float32
    assert i.max().dtype == fg.int32 and i.amax(0).dtype == fg.int32
    assert i.cumsum(0).dtype == fg.int64 and b.cumsum(0).dtype == fg.int64
    assert i.cumprod(1).dtype == fg.int64
    assert i.logsumexp(0).dtype == fg.float32
    assert i.all().dtype == fg.bool and T(np.array([0.5])).any().dtype == fg.bool


def test_integer_sum_wraps_in_int64():
    a = np.full(4, 2**62, dtype=np.int64)
    assert T(a).sum().item() == int(np.sum(a))  # wraps like NumPy


def test_mean_of_integers_is_a_type_error():
    x = T(np.array([1, 2, 3], dtype=np.int64))
    with pytest.raises(TypeError, match="mean"):
        x.mean()
    with pytest.raises(TypeError, match="could not infer output dtype"):
        fg.mean(T(np.array([True, False])))
    with pytest.raises(TypeError, match="mean"):
        T(np.array([1.0])).mean(dtype=fg.int64)
    m = x.mean(dtype=fg.float64)
    assert m.dtype == fg.float64 and m.item() == 2.0
    np.testing.assert_array_equal(arr(x), [1, 2, 3])


def test_var_std_need_floats():
    x = T(np.array([1, 2, 3], dtype=np.int32))
    with pytest.raises(TypeError, match="var"):
        x.var()
    with pytest.raises(TypeError, match="std"):
        x.std()


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_needs_floats(op):
    x = T(np.array([1, 2, 3], dtype=np.int64))
    with pytest.raises(TypeError, match=op):
        getattr(x, op)(0)
    y = getattr(x, op)(0, dtype=fg.float32)
    assert y.dtype == fg.float32


# ---------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1 << 22, 1 << 24])
def test_large_float32_sum_is_accurate(n):
    a = np.random.default_rng(n).random(n, dtype=np.float32)
    exact = np.sum(a.astype(np.float64))
    s = T(a).sum().item()
    assert abs(s - exact) / exact < 2e-6
    m = T(a).mean().item()
    assert abs(m - exact / n) / (exact / n) < 2e-6
    # The same full sum in a 2-D layout and in columns.
    s2 = arr(T(a.reshape(64, -1)).sum(1)).astype(np.float64)
    np.testing.assert_allclose(s2, a.reshape(64, -1).astype(np.float64).sum(1), rtol=2e-6)
    s3 = arr(T(a.reshape(-1, 8)).sum(0)).astype(np.float64)
    np.testing.assert_allclose(s3, a.reshape(-1, 8).astype(np.float64).sum(0), rtol=2e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 7, 8, 15, 16, 17, 33])
def test_small_dense_sums_over_leading_and_trailing_dims(dtype, k):
    # Sizes up to 2^14 elements take the direct small-sum loops: the whole
    # tensor, column sums (a bias gradient) and row sums, with row counts
    # that leave a ragged tail after the grouped accumulators.
    rng = np.random.default_rng(k)
    for r in (1, 2, 11, 31, 100, 16384 // k - 1):
        a = rng.standard_normal((r, k)).astype(dtype)
        tol = dict(rtol=1e-6, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
        exact = a.astype(np.float64)
        np.testing.assert_allclose(arr(T(a).sum(0)), exact.sum(0), **tol)
        np.testing.assert_allclose(arr(T(a).mean(0)), exact.mean(0), **tol)
        np.testing.assert_allclose(arr(T(a).sum(1)), exact.sum(1), **tol)
        np.testing.assert_allclose(T(a).sum().item(), exact.sum(), **tol)
        np.testing.assert_allclose(arr(T(a.T.copy()).sum(1)), exact.sum(0), **tol)


def test_sum_is_deterministic():
    a = np.random.default_rng(7).standard_normal(1 << 21).astype(np.float32)
    x = T(a)
    r = [x.sum().item() for _ in range(3)]
    assert r[0] == r[1] == r[2]
    c = [arr(T(a.reshape(-1, 4)).sum(0)) for _ in range(2)]
    np.testing.assert_array_equal(c[0], c[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_reductions_from_every_alignment(dtype):
    # Long contiguous runs fold their first elements up to a 64-byte boundary
    # on their own; a buffer shifted by each element offset must give the same
    # sum (to rounding), max, min and argmax, on one thread and on several.
    base = np.random.default_rng(3).standard_normal((1 << 16) + 64).astype(dtype)
    n = 1 << 16
    tol = dict(rtol=1e-6, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-10)
    for off in range(64 // base.itemsize + 1):
        a = base[off:off + n]
        exact = a.astype(np.float64)
        t = T(a)
        np.testing.assert_allclose(t.sum().item(), exact.sum(), **tol)
        np.testing.assert_allclose(arr(t.reshape(4, -1).sum(1)), exact.reshape(4, -1).sum(1), **tol)
        assert t.max().item() == a.max() and t.min().item() == a.min()
        assert t.argmax().item() == int(a.argmax())
        sliced = T(base)[off:off + n]
        np.testing.assert_allclose(sliced.sum().item(), exact.sum(), **tol)


def test_half_sums_accumulate_in_float32():
    x = T(np.ones(10000, dtype=np.float16))
    assert x.sum().item() == 10000.0  # an f16 accumulator would stall at 2048
    xb = fg.ones(10000).to(fg.bfloat16)
    assert xb.sum().item() == 9984.0  # 10000 rounded to bfloat16
    assert x.mean().item() == 1.0


def test_var_is_two_pass():
    # A large offset ruins the one-pass formula E[x^2] - E[x]^2 in float32.
    a = (1e4 + np.random.default_rng(3).standard_normal(100000)).astype(np.float32)
    want = np.var(a.astype(np.float64), ddof=1)
    assert abs(T(a).var().item() - want) / want < 1e-4
    assert abs(T(a).std().item() - np.sqrt(want)) / np.sqrt(want) < 1e-4


def test_logsumexp_is_stable():
    x = T(np.array([[1000.0, 1000.0], [-1000.0, -1000.0]], dtype=np.float32))
    np.testing.assert_allclose(arr(x.logsumexp(1)), [1000 + np.log(2), -1000 + np.log(2)], rtol=1e-6)
    y = T(np.array([[-np.inf, -np.inf], [np.inf, 1.0]], dtype=np.float32))
    np.testing.assert_array_equal(arr(y.logsumexp(1)), [-np.inf, np.inf])


@pytest.mark.parametrize("shape,dim", [
    ((4096, 1024), 1), ((7, 300), -1), ((5, 300, 3), 1), ((300, 6), 0), ((3000, 40), 0), ((2, 5000, 3), 1),
])
def test_softmax_large_values_and_dims(shape, dim):
    a = (np.random.default_rng(5).standard_normal(shape) * 30 + 500).astype(np.float32)
    x = T(a)
    a64 = a.astype(np.float64)
    z = a64 - a64.max(axis=dim, keepdims=True)
    want = np.exp(z) / np.exp(z).sum(axis=dim, keepdims=True)
    got = arr(F.softmax(x, dim=dim))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(got.sum(axis=dim), 1.0, rtol=1e-5)
    logw = z - np.log(np.exp(z).sum(axis=dim, keepdims=True))
    np.testing.assert_allclose(arr(F.log_softmax(x, dim=dim)), logw, rtol=1e-5, atol=2e-5)
    np.testing.assert_array_equal(arr(fg.softmax(x, dim)), got)


def test_softmax_columns_with_infinities():
    # Long reduced dim: the column kernel splits it into parts and combines them.
    a = np.random.default_rng(12).standard_normal((4000, 8)).astype(np.float32)
    a[:2500, 0] = -np.inf      # whole parts holding only -inf
    a[:, 1] = -np.inf          # an all -inf column gives NaN, as in PyTorch
    a[3999, 2] = np.inf        # +inf gives NaN too
    a[17, 3] = np.nan
    got = arr(T(a).softmax(0))
    logp = arr(T(a).log_softmax(0))
    a64 = a.astype(np.float64)
    for j in (0, 4, 5, 6, 7):
        col = a64[:, j]
        z = col - col.max()
        np.testing.assert_allclose(got[:, j], np.exp(z) / np.exp(z).sum(), rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(logp[:, j], z - np.log(np.exp(z).sum()), rtol=1e-5, atol=1e-5)
    for j in (1, 2, 3):
        assert np.isnan(got[:, j]).all() and np.isnan(logp[:, j]).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_softmax_other_dtypes(dtype):
    a = np.random.default_rng(2).standard_normal((6, 50)).astype(np.float32)
    x = T(a).to(getattr(fg, dtype))
    y = x.softmax(1)
    assert y.dtype == getattr(fg, dtype)
    xa = arr(x).astype(np.float64)
    e = np.exp(xa - xa.max(1, keepdims=True))
    tol = {"float16": 2e-3, "bfloat16": 1e-2, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(arr(y).astype(np.float64), e / e.sum(1, keepdims=True), rtol=tol, atol=tol)
    f32 = x.softmax(1, dtype=fg.float32)
    assert f32.dtype == fg.float32


# ---------------------------------------------------------------------------
# Zero-size dims
# ---------------------------------------------------------------------------

def test_reductions_over_zero_size_dims():
    x = fg.zeros(0, 3)
    np.testing.assert_array_equal(arr(x.sum(0)), [0, 0, 0])
    np.testing.assert_array_equal(arr(x.prod(0)), [1, 1, 1])
    assert np.isnan(arr(x.mean(0))).all()
    assert np.isnan(arr(x.var(0))).all()
    np.testing.assert_array_equal(arr(x.logsumexp(0)), [-np.inf] * 3)
    np.testing.assert_array_equal(arr(x.all(0)), [True] * 3)
    np.testing.assert_array_equal(arr(x.any(0)), [False] * 3)
    assert x.sum().item() == 0.0 and x.prod().item() == 1.0
    assert x.all().item() is True and x.any().item() is False
    # Reducing the non-empty dim of an empty tensor is fine: empty results.
    assert tuple(x.amax(1).shape) == (0,)
    v, i = x.max(1)
    assert tuple(v.shape) == (0,) and tuple(i.shape) == (0,)
    assert tuple(x.argmin(1, keepdim=True).shape) == (0, 1)
    assert tuple(x.sum(1).shape) == (0,)
    assert tuple(x.softmax(0).shape) == (0, 3)
    assert tuple(x.cumsum(0).shape) == (0, 3)


@pytest.mark.parametrize("call,name", [
    (lambda x: x.max(0), "max"),
    (lambda x: x.min(0), "min"),
    (lambda x: x.amax(0), "amax"),
    (lambda x: x.amin((0, 1)), "amin"),
    (lambda x: x.argmax(0), "argmax"),
    (lambda x: x.argmin(0), "argmin"),
    (lambda x: x.max(), "max"),
    (lambda x: x.amax(), "amax"),
    (lambda x: x.argmax(), "argmax"),
])
def test_extrema_over_zero_size_dim_raise(call, name):
    x = fg.zeros(0, 3)
    with pytest.raises((IndexError, ValueError), match=name) as e:
        call(x)
    assert "zero-size" in str(e.value)


# ---------------------------------------------------------------------------
# Bad arguments
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,call", [
    ("sum", lambda x: x.sum(2)),
    ("sum", lambda x: x.sum((0, -3))),
    ("mean", lambda x: x.mean(5)),
    ("prod", lambda x: x.prod(-3)),
    ("amax", lambda x: x.amax(2)),
    ("amin", lambda x: x.amin((1, 2))),
    ("max", lambda x: x.max(2)),
    ("min", lambda x: x.min(-3)),
    ("argmax", lambda x: x.argmax(2)),
    ("argmin", lambda x: x.argmin(-3)),
    ("var", lambda x: x.var(2)),
    ("std", lambda x: x.std(2)),
    ("logsumexp", lambda x: x.logsumexp(2)),
    ("all", lambda x: x.all(2)),
    ("any", lambda x: x.any(-3)),
    ("softmax", lambda x: x.softmax(2)),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-3)),
    ("cumsum", lambda x: x.cumsum(2)),
    ("cumprod", lambda x: x.cumprod(-3)),
])
def test_bad_dim_is_an_index_error_naming_the_op(name, call):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = T(a)
    with pytest.raises(IndexError, match=name):
        call(x)
    np.testing.assert_array_equal(arr(x), a)


def test_repeated_dims_are_rejected():
    x = fg.ones(2, 3)
    with pytest.raises(ValueError, match="sum.*multiple times"):
        x.sum((1, -1))
    with pytest.raises(ValueError, match="amax"):
        x.amax((0, 0))


def test_bad_dim_types():
    x = fg.ones(2, 3)
    with pytest.raises(TypeError, match="sum"):
        x.sum("a")
    with pytest.raises(TypeError, match="max"):
        x.max((0, 1))
    with pytest.raises(ValueError, match="var"):
        x.var(0, unbiased=True, correction=0)


# ---------------------------------------------------------------------------
# dims, keepdim, correction
# ---------------------------------------------------------------------------

def _all_dim_args(nd):
    out = [None]
    for k in range(1, nd + 1):
        for c in itertools.combinations(range(nd), k):
            out.append(c)
            out.append(tuple(d - nd for d in c))  # negative spelling
    out += list(range(-nd, nd))
    return out


@pytest.mark.parametrize("keepdim", [False, True])
def test_multi_and_negative_dims_match_numpy(keepdim):
    a = np.random.default_rng(11).standard_normal((2, 3, 4, 5))
    x = T(a)
    for dim in _all_dim_args(4):
        axis = dim
        kw = {} if dim is None else {"dim": dim}
        np.testing.assert_allclose(arr(x.sum(**kw, keepdim=keepdim)), a.sum(axis=axis, keepdims=keepdim), rtol=1e-12)
        np.testing.assert_allclose(arr(x.mean(**kw, keepdim=keepdim)), a.mean(axis=axis, keepdims=keepdim), rtol=1e-12)
        np.testing.assert_array_equal(arr(x.amax(**kw, keepdim=keepdim)), a.max(axis=axis, keepdims=keepdim))
        np.testing.assert_array_equal(arr(x.amin(**kw, keepdim=keepdim)), a.min(axis=axis, keepdims=keepdim))
        np.testing.assert_allclose(arr(x.var(**kw, keepdim=keepdim)), a.var(axis=axis, ddof=1, keepdims=keepdim), rtol=1e-10)
        np.testing.assert_allclose(arr(x.prod(**kw, keepdim=keepdim)), a.prod(axis=axis, keepdims=keepdim), rtol=1e-10)


def test_empty_dim_list_means_all_dims():
    a = np.arange(12.0).reshape(3, 4)
    x = T(a)
    assert x.sum(()).item() == 66.0
    assert x.amax([]).item() == 11.0


def test_argmax_flat_and_keepdim():
    a = np.random.default_rng(3).standard_normal((3, 4, 5))
    x = T(a)
    assert x.argmax().item() == np.argmax(a)
    k = x.argmin(keepdim=True)
    assert tuple(k.shape) == (1, 1, 1) and k.item() == np.argmin(a)
    for d in range(-3, 3):
        np.testing.assert_array_equal(arr(x.argmax(d)), np.argmax(a, axis=d))
        np.testing.assert_array_equal(arr(x.argmin(d, keepdim=True)), np.argmin(a, axis=d, keepdims=True))


def test_var_std_correction_forms():
    a = np.random.default_rng(4).standard_normal((4, 6))
    x = T(a)
    np.testing.assert_allclose(arr(x.var(1)), a.var(1, ddof=1))
    np.testing.assert_allclose(arr(x.var(1, unbiased=False)), a.var(1, ddof=0))
    np.testing.assert_allclose(arr(x.var(1, correction=0)), a.var(1, ddof=0))
    np.testing.assert_allclose(arr(x.std(dim=(0, 1), correction=2)), a.std(ddof=2))
    assert np.isclose(x.var(False).item(), a.var(ddof=0))
    assert np.isclose(fg.std(x).item(), a.std(ddof=1))
    assert np.isnan(T(np.array([3.0])).var().item())  # N - correction = 0


def test_zero_dim_tensors():
    x = T(np.array(2.5, dtype=np.float32))
    assert x.sum().item() == 2.5 and x.sum(0).item() == 2.5 and x.sum(-1, keepdim=True).item() == 2.5
    v, i = x.max(0)
    assert v.item() == 2.5 and i.item() == 0
    assert x.argmax().item() == 0 and x.argmin(0).item() == 0
    assert x.softmax(0).item() == 1.0 and x.log_softmax(-1).item() == 0.0
    assert x.cumsum(0).item() == 2.5
    assert np.isnan(x.var().item()) and x.var(correction=0).item() == 0.0


# ---------------------------------------------------------------------------
# Layouts and threaded paths
# ---------------------------------------------------------------------------

def _layouts(a):
    """(tensor, numpy) pairs holding the same values in various layouts."""
    x = T(a)
    yield x, a
    yield x.transpose(0, 1), a.transpose(1, 0, 2)
    yield x.flip(1), a[:, ::-1]
    yield x.flip(0, 2), a[::-1, :, ::-1]
    yield x.permute(2, 0, 1), a.transpose(2, 0, 1)
    yield x[:, ::2], a[:, ::2]
    yield x[:, :1].expand(a.shape[0], 5, a.shape[2]), np.broadcast_to(a[:, :1], (a.shape[0], 5, a.shape[2]))


@pytest.mark.parametrize("shape", [(3, 4, 5), (6, 9, 1000), (70, 3, 400)])
def test_noncontiguous_layouts(shape):
    a = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    for x, v in _layouts(a):
        v64 = v.astype(np.float64)
        for dim in _all_dim_args(3):
            kw = {} if dim is None else {"dim": dim}
            np.testing.assert_allclose(arr(x.sum(**kw)), v64.sum(axis=dim), rtol=1e-4, atol=1e-3)
            np.testing.assert_array_equal(arr(x.amax(**kw)), v.max(axis=dim))
        for d in range(3):
            np.testing.assert_array_equal(arr(x.argmax(d)), np.argmax(v, axis=d))
            vm, im = x.min(d)
            np.testing.assert_array_equal(arr(vm), v.min(axis=d))
            np.testing.assert_array_equal(arr(im), np.argmin(v, axis=d))
            np.testing.assert_allclose(arr(x.cumsum(d)), np.cumsum(v64, axis=d), rtol=1e-5, atol=1e-4)
            e = np.exp(v64 - v64.max(axis=d, keepdims=True))
            np.testing.assert_allclose(arr(x.softmax(d)), e / e.sum(axis=d, keepdims=True), rtol=1e-5, atol=1e-7)


def test_threaded_paths_match_numpy():
    rng = np.random.default_rng(9)
    cases = [
        ((3, 100_000), (1,)),      # few long rows: split into units
        ((100_000, 3), (0,)),      # few columns, many rows: split reduced range
        ((2000, 300), (1,)),       # many rows
        ((300, 2000), (0,)),       # column path, many column chunks
        ((8, 64, 1000), (0, 2)),   # row path with outer reduced dim
        ((50, 4, 3000), (0, 1)),   # column path over leading dims
        ((1 << 20,), (0,)),        # full reduction of one long row
    ]
    for shape, dims in cases:
        a = rng.standard_normal(shape).astype(np.float32)
        x = T(a)
        a64 = a.astype(np.float64)
        np.testing.assert_allclose(arr(x.sum(dims)), a64.sum(axis=dims), rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(arr(x.var(dims)), a64.var(axis=dims, ddof=1), rtol=1e-5)
        np.testing.assert_array_equal(arr(x.amax(dims)), a.max(axis=dims))
        np.testing.assert_allclose(arr(x.logsumexp(dims)), np.log(np.exp(a64).sum(axis=dims)), rtol=1e-5)
        ai = (a * 10).astype(np.int32)
        np.testing.assert_array_equal(arr(T(ai).sum(dims)), ai.sum(axis=dims, dtype=np.int64))
        np.testing.assert_array_equal(arr(T(ai).amin(dims)), ai.min(axis=dims))
        if len(dims) == 1:
            d = dims[0]
            np.testing.assert_array_equal(arr(x.argmax(d)), np.argmax(a, axis=d))
            np.testing.assert_array_equal(arr(T(ai).argmin(d)), np.argmin(ai, axis=d))


def test_first_occurrence_across_parallel_chunks():
    n = 1 << 20
    a = np.zeros(n, dtype=np.float32)
    a[[123_456, 700_000, 1_000_000]] = 5.0
    assert T(a).argmax().item() == 123_456
    v, i = T(a.reshape(1, n)).max(1)
    assert i.item() == 123_456 and v.item() == 5.0
    a[[200_000, 900_000]] = -3.0
    assert T(a).argmin().item() == 200_000


def test_all_any_values():
    a = np.array([[1.0, np.nan, 0.0], [2.0, 3.0, -1.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    x = T(a)
    np.testing.assert_array_equal(arr(x.all(1)), [False, True, False])
    np.testing.assert_array_equal(arr(x.any(1)), [True, True, False])
    np.testing.assert_array_equal(arr(x.all(0, keepdim=True)), [[False, False, False]])
    assert fg.any(x).item() is True and fg.all(x).item() is False
    i = T(np.array([[1, 2], [0, 5]], dtype=np.int32))
    np.testing.assert_array_equal(arr(i.all(0)), [False, True])


def test_cumsum_cumprod():
    a = np.random.default_rng(6).integers(-3, 4, (4, 5, 6)).astype(np.int32)
    x = T(a)
    for d in range(-3, 3):
        np.testing.assert_array_equal(arr(x.cumsum(d)), np.cumsum(a, axis=d, dtype=np.int64))
        np.testing.assert_array_equal(arr(fg.cumprod(x, d)), np.cumprod(a, axis=d, dtype=np.int64))
    f = a.astype(np.float32) * 0.5
    np.testing.assert_allclose(arr(T(f).cumsum(1, dtype=fg.float64)), np.cumsum(f.astype(np.float64), axis=1))
    b = T(a > 0)
    np.testing.assert_array_equal(arr(b.cumsum(2)), np.cumsum(a > 0, axis=2))


def test_inputs_unchanged():
    a = np.random.default_rng(10).standard_normal((30, 40)).astype(np.float32)
    x = T(a)
    for f in (lambda t: t.sum(0), lambda t: t.softmax(1), lambda t: t.var(), lambda t: t.max(1),
              lambda t: t.cumsum(0), lambda t: t.logsumexp(1), lambda t: t.argmax()):
        f(x)
        f(x.transpose(0, 1))
    np.testing.assert_array_equal(arr(x), a)
