"""Advanced indexing, gather/scatter and the join ops against NumPy."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optable._spec import shapes
from optable.index import fg_key, index_keys

DTYPES = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def arr(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(-50, 50, size=shape).astype(dtype if dtype != "bfloat16" else "float32")


def T(a, dtype=None):
    t = fg.tensor(a)
    return t.to(getattr(fg, dtype)) if dtype else t


def N(t):
    if t.dtype == fg.bfloat16:
        t = t.float()
    return np.asarray(t)


def same(t, a):
    got = N(t)
    assert got.shape == np.shape(a), (got.shape, np.shape(a))
    np.testing.assert_array_equal(got, a)


A = np.arange(4 * 5 * 6).reshape(4, 5, 6)
M45 = (A[:, :, 0] % 3) == 0
M4 = np.array([True, False, True, True])

KEYS = [
    ([0, 2],),
    ([-1, 0, -4],),
    ([[0], [3]],),
    (np.array([[1, 2], [3, 0]]),),
    (slice(None), [1, 4]),
    (Ellipsis, [0, -1]),
    ([0, 1], [1, 2]),
    ([0, 1], slice(None), [2, 3]),  # separated: index dims first
    (0, slice(None), [1, 2]),  # int counts as an index array: separated
    (slice(None), 0, [1, 2]),  # adjacent int and array
    ([[0, 1]], [[1], [2]]),  # broadcasting index arrays
    ([[0, 1]], slice(1, 4), [[1], [2]]),
    (None, [0, 1]),
    ([0, 1], None, [1, 2]),
    (slice(None, None, -1), [0, 2]),
    (slice(1, None, 2), slice(None), [5, -6]),
    ([0, 0, 0],),
    (np.array([], dtype=np.int64),),
    (np.array(2),),
    (M4,),
    (M45,),
    (A % 2 == 0,),
    (slice(None), M45[0]),
    (M4, 1),
    (M4, slice(None), [0]),
    (M45, [1]),
    (True,),
    (False,),
    (Ellipsis, True),
    ([0, 1], slice(None), True),
    (1, slice(None), np.array(True)),
    (np.array([1, 3], dtype=np.int32), 2),
    ([2], Ellipsis, [1]),
    (slice(None), [0], Ellipsis, [0]),
]


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
@pytest.mark.parametrize("how", [0, 1, 2])
def test_getitem_matches_numpy(key, how):
    x = T(A)
    same(x[fg_key(key, how)], A[key])


@pytest.mark.parametrize("key", KEYS[:20], ids=[str(i) for i in range(20)])
def test_getitem_noncontiguous(key):
    base = np.ascontiguousarray(np.transpose(A, (2, 0, 1)))  # (6, 4, 5)
    x = T(base).permute(1, 2, 0)  # (4, 5, 6), not contiguous
    assert not x.is_contiguous()
    same(x[fg_key(key)], np.transpose(base, (1, 2, 0))[key])
    y = T(np.arange(8 * 5 * 6).reshape(8, 5, 6))[::2]  # strided view
    same(y[fg_key(key)], np.arange(8 * 5 * 6).reshape(8, 5, 6)[::2][key])


@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_every_dtype(dtype):
    a = arr((4, 5, 6), dtype)
    x = T(a, dtype if dtype == "bfloat16" else None)
    for key in [([0, 3], slice(None), [1, 2]), (M45,), ([[1], [2]], [0, 4])]:
        r = x[fg_key(key)]
        assert r.dtype == x.dtype
        same(r, a[key])


def test_getitem_copy_not_view():
    x = T(A.copy())
    y = x[[0, 1]]
    y[0, 0, 0] = -7
    assert N(x)[0, 0, 0] == 0
    assert not y._shares_storage(x)


def test_getitem_zero_size():
    z = np.zeros((0, 3), dtype=np.float32)
    x = T(z)
    same(x[[]], z[np.array([], dtype=np.int64)])
    same(x[:, [0, 2]], z[:, [0, 2]])
    same(x[np.zeros((0, 3), bool)], z[np.zeros((0, 3), bool)])
    with pytest.raises(IndexError, match="getitem"):
        x[[0]]
    y = T(A)
    same(y[np.array([], dtype=np.int64), 1:3], A[np.array([], dtype=np.int64), 1:3])


def test_getitem_large_threaded():
    a = np.arange(300 * 400, dtype=np.float32).reshape(300, 400)
    rng = np.random.default_rng(1)
    i = rng.integers(-300, 300, size=5000)
    j = rng.integers(-400, 400, size=5000)
    x = T(a)
    same(x[T(i)], a[i])
    same(x[T(i), T(j)], a[i, j])
    same(x[:, T(j)], a[:, j])
    same(x[[3, 4]], a[[3, 4]])
    m = a % 7 == 0
    same(x[T(m)], a[m])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_getitem_hypothesis(data):
    shape = data.draw(shapes(0, 4, 0, 5))
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    key = data.draw(index_keys(shape))
    how = data.draw(st.integers(0, 2))
    same(T(a)[fg_key(key, how)], a[key])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_setitem_hypothesis(data):
    shape = data.draw(shapes(0, 4, 0, 5))
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    key = data.draw(index_keys(shape))
    targets = a[key]
    if np.unique(targets).size != targets.size:
        v = np.array(-1.5)  # repeated targets: one value
    else:
        rs = targets.shape
        v = -1 - np.arange(int(np.prod(rs)), dtype=np.float64).reshape(rs)
        k = data.draw(st.integers(0, len(rs)))
        v = v[(slice(0, 1),) * k]  # size-1 leading dims: broadcasts back
    x = T(a.copy())
    x[fg_key(key, data.draw(st.integers(0, 2)))] = T(v)
    b = a.copy()
    b[key] = v
    same(x, b)


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_setitem_matches_numpy(key):
    a = A.astype(np.float32)
    rs = a[key].shape
    targets = A[key]
    unique = np.unique(targets).size == targets.size
    for value in [9.0, np.arange(rs[-1], dtype=np.float32) if rs and unique else 3.0,
                  -np.arange(int(np.prod(rs)), dtype=np.float32).reshape(rs) if unique else 4.0]:
        x = T(a.copy())
        x[fg_key(key)] = value if np.ndim(value) == 0 else T(value)
        b = a.copy()
        b[key] = value
        same(x, b)


def test_setitem_noncontiguous_target_and_casts():
    base = np.zeros((6, 4), dtype=np.int32)
    x = T(base.copy())
    v = x.t()  # (4, 6) view, not contiguous
    v[[0, 2], 1:5] = T(np.array([1.9, -2.7, 3.2, 4.0]))  # float values cast to int32
    expect = base.copy()
    expect.T[[0, 2], 1:5] = np.array([1.9, -2.7, 3.2, 4.0]).astype(np.int32)
    same(x, expect)
    assert x.dtype == fg.int32


@pytest.mark.parametrize("dtype", DTYPES)
def test_setitem_every_dtype(dtype):
    a = arr((3, 4), dtype)
    v = arr((2, 4), dtype, seed=5)
    x = T(a.copy(), dtype if dtype == "bfloat16" else None)
    x[[2, 0]] = T(v, dtype if dtype == "bfloat16" else None)
    x[T(np.array([[False, True, False, True]] * 3))] = T(v[:1, :1].reshape(()), dtype if dtype == "bfloat16" else None)
    b = a.copy()
    b[[2, 0]] = v
    b[np.array([[False, True, False, True]] * 3)] = v[0, 0]
    same(x, b)


def test_setitem_repeated_indices_last_wins():
    x = fg.zeros(5)
    x[[1, 3, 1, 1]] = fg.tensor([1.0, 2.0, 3.0, 4.0])
    same(x, np.array([0, 4, 0, 2, 0], dtype=np.float32))
    y = fg.zeros(5, 3)
    y[[0, 0]] = fg.tensor([[1.0, 1, 1], [2, 2, 2]])
    same(y[0], np.full(3, 2, np.float32))


def test_setitem_large_threaded():
    a = np.zeros((200, 1000), dtype=np.float32)
    rng = np.random.default_rng(3)
    rows = rng.permutation(200)[:150]
    v = rng.standard_normal((150, 1000)).astype(np.float32)
    x = T(a.copy())
    x[T(rows)] = T(v)
    a[rows] = v
    same(x, a)
    # a big 1-D scatter with many repeats accumulates deterministically
    idx = rng.integers(0, 100, size=100000)
    vals = np.ones(100000, np.float64)
    z = fg.zeros(100, dtype=fg.float64)
    z.index_put_((T(idx),), T(vals), accumulate=True)
    same(z, np.bincount(idx, minlength=100).astype(np.float64))


def test_index_put_method():
    a = np.zeros((3, 4), np.float32)
    x = T(a.copy())
    r = x.index_put_((T(np.array([0, 2, 0])), T(np.array([1, 1, 1]))), T(np.array([1.0, 2.0, 3.0])),
                     accumulate=True)
    assert r is x
    np.add.at(a, ([0, 2, 0], [1, 1, 1]), [1.0, 2.0, 3.0])
    same(x, a)
    y = x.index_put((None, T(np.array([3]))), 5.0)
    b = a.copy()
    b[:, [3]] = 5.0
    same(y, b)
    same(x, a)  # out-of-place left x alone


def test_setitem_errors_leave_tensor_unchanged():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = T(a.copy())
    with pytest.raises(IndexError, match=r"setitem: index 7 is out of bounds for dimension 0 with size 3"):
        x[[0, 1, 7]] = 1.0
    with pytest.raises(IndexError, match="setitem.*boolean index did not match"):
        x[T(np.ones(4, bool))] = 1.0
    with pytest.raises(ValueError, match=r"setitem.*value tensor of shape \[3\]"):
        x[[0, 1]] = T(np.ones(3, np.float32))
    with pytest.raises(IndexError, match="setitem.*broadcast"):
        x[[0, 1], [0, 1, 2]] = 1.0
    with pytest.raises(IndexError, match="setitem.*long, int or bool.*float64"):
        x[T(np.array([0.0]))] = 1.0
    with pytest.raises(TypeError):
        T(np.arange(3))[[0]] = 1.5  # float scalar into an int tensor
    same(x, a)
    ro = np.arange(6.0).reshape(2, 3)
    ro.setflags(write=False)
    y = fg.from_numpy(ro)
    with pytest.raises(ValueError, match="read-only"):
        y[[0]] = 1.0
    same(y, np.arange(6.0).reshape(2, 3))
    e = fg.zeros(3).expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        e[[0, 1]] = 1.0


def test_getitem_errors():
    x = T(A)
    with pytest.raises(IndexError, match=r"getitem: index 4 is out of bounds for dimension 0 with size 4"):
        x[[0, 4]]
    with pytest.raises(IndexError, match=r"index -7 is out of bounds for dimension 2 with size 6"):
        x[:, :, [-7]]
    with pytest.raises(IndexError, match=r"index 9 is out of bounds for dimension 2 with size 6"):
        x[0, :, [1, 9]]
    with pytest.raises(IndexError, match="boolean index did not match.*dimension 1"):
        x[:, np.ones(4, bool)]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[T(np.ones((4, 4), bool))]
    with pytest.raises(IndexError, match=r"shape mismatch.*\[2\], \[3\]"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="long, int or bool.*float32"):
        x[T(np.array([0.0, 1.0], np.float32))]
    with pytest.raises(IndexError, match="long, int or bool"):
        x[[0.5]]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], [0], [0], [0]]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., [0], ...]


# ---------------------------------------------------------------------------
# nonzero / masked_select / index_select
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero(dtype):
    a = arr((3, 4, 5), dtype) if dtype == "bool" else (arr((3, 4, 5), dtype) % 3)
    x = T(a, dtype if dtype == "bfloat16" else None)
    same(x.nonzero(), np.argwhere(a))
    assert x.nonzero().dtype == fg.int64
    for got, exp in zip(fg.nonzero(x, as_tuple=True), np.nonzero(a), strict=True):
        same(got, exp)
    z = T(np.zeros((0, 3), np.float32))
    same(z.nonzero(), np.zeros((0, 2), np.int64))
    same(fg.tensor(2.0).nonzero(), np.zeros((1, 0), np.int64))
    same(fg.tensor(0).nonzero(), np.zeros((0, 0), np.int64))


def test_nonzero_special_values_and_large():
    a = np.array([0.0, -0.0, np.nan, 1e-30, -np.inf], np.float32)
    same(T(a).nonzero(), np.argwhere(a))
    rng = np.random.default_rng(0)
    b = (rng.random((300, 700)) < 0.3) * rng.integers(1, 5, (300, 700))
    x = T(b)
    same(x.nonzero(), np.argwhere(b))
    same(x.t().nonzero(), np.argwhere(b.T))
    same(x[:, ::-3].nonzero(), np.argwhere(b[:, ::-3]))


def test_masked_select():
    a = arr((3, 4))
    m = np.array([True, False, True, True])
    same(T(a).masked_select(T(m)), np.broadcast_to(a, (3, 4))[np.broadcast_to(m, (3, 4))])
    m2 = arr((2, 3, 1), "bool")
    xb, mb = np.broadcast_arrays(a, m2)
    same(fg.masked_select(T(a), T(m2)), xb[mb])
    with pytest.raises(TypeError, match="masked_select.*bool"):
        T(a).masked_select(T(np.ones(4, np.int64)))
    with pytest.raises(ValueError, match="masked_select"):
        T(a).masked_select(T(np.ones(3, bool)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select(dtype):
    a = arr((4, 5, 3), dtype)
    x = T(a, dtype if dtype == "bfloat16" else None)
    for dim in range(-3, 3):
        n = a.shape[dim]
        idx = np.array([0, n - 1, -1, 1, 0])
        same(fg.index_select(x, dim, T(idx)), np.take(a, idx, axis=dim))
        same(x.index_select(dim, T(idx.astype(np.int32))), np.take(a, idx, axis=dim))
    same(x.permute(2, 0, 1).index_select(1, T(np.array([2, 0]))), np.transpose(a, (2, 0, 1))[:, [2, 0]])
    same(x.index_select(0, T(np.array(2))), a[[2]])
    with pytest.raises(IndexError, match="index_select: index 4 is out of bounds for dimension 0 with size 4"):
        x.index_select(0, T(np.array([4])))
    with pytest.raises(TypeError, match="index_select.*float32"):
        x.index_select(0, T(np.array([0.0], np.float32)))
    with pytest.raises(IndexError, match="index_select.*vector"):
        x.index_select(0, T(np.zeros((2, 2), np.int64)))


# ---------------------------------------------------------------------------
# gather / scatter
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_matches_take_along_axis(dtype):
    a = arr((4, 5, 6), dtype)
    x = T(a, dtype if dtype == "bfloat16" else None)
    rng = np.random.default_rng(2)
    for dim in range(-3, 3):
        ishape = list(a.shape)
        ishape[dim] = 7
        idx = rng.integers(0, a.shape[dim], size=ishape)
        same(fg.gather(x, dim, T(idx)), np.take_along_axis(a, idx, axis=dim))
        same(x.gather(dim, T(idx.astype(np.int32))), np.take_along_axis(a, idx, axis=dim))
    # index smaller than the input in other dims (allowed, as torch)
    idx = rng.integers(0, 5, size=(2, 3, 4))
    same(x.gather(1, T(idx)), np.take_along_axis(a[:2, :, :4], idx, axis=1))
    # non-contiguous input and index
    xt = x.permute(2, 1, 0)
    it = T(rng.integers(0, 4, size=(6, 5, 3))).permute(2, 1, 0)  # (3, 5, 6) strided
    same(xt.gather(2, it.permute(2, 1, 0)), np.take_along_axis(np.transpose(a, (2, 1, 0)), N(it).transpose(2, 1, 0), 2))


def test_take_along_dim():
    a = arr((3, 4))
    idx = np.array([[0, 2], [1, 3], [3, 3]])
    same(fg.take_along_dim(T(a), T(idx), 1), np.take_along_axis(a, idx, 1))
    same(T(a).take_along_dim(T(np.array([[1, 0, 2, 2]])), 0), np.take_along_axis(a, np.array([[1, 0, 2, 2]]), 0))
    same(T(a).take_along_dim(T(np.array([[2], [0]])), 0), np.take_along_axis(a, np.array([[2], [0]]), 0))
    same(fg.take_along_dim(T(a), T(np.array([11, 0]))), a.ravel()[[11, 0]])
    with pytest.raises(ValueError, match="take_along_dim"):
        fg.take_along_dim(T(a), T(np.array([0])), 0)


def _scatter_add_ref(a, dim, idx, src):
    y = a.copy()
    coords = list(np.indices(idx.shape))
    coords[dim] = idx
    np.add.at(y, tuple(coords), src[tuple(slice(0, s) for s in idx.shape)])
    return y


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "bool"])
def test_scatter_add_matches_add_at(dtype):
    rng = np.random.default_rng(4)
    a = arr((4, 5, 6), dtype)
    for dim in range(3):
        ishape = [3, 4, 5]
        ishape[dim] = 9
        idx = rng.integers(0, a.shape[dim], size=ishape)
        src = arr((4, 9, 9) if dim else (9, 5, 6), dtype, seed=dim)
        exp = _scatter_add_ref(a, dim, idx, src)
        x = T(a.copy())
        same(fg.scatter_add(x, dim, T(idx), T(src)), exp)
        same(x, a)  # out of place
        r = x.scatter_add_(dim - 3, T(idx), T(src))
        assert r is x
        same(x, exp)


def test_scatter_add_large_deterministic():
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 50, size=(64, 4000))
    src = rng.standard_normal((64, 4000))
    exp = _scatter_add_ref(np.zeros((64, 50)), 1, idx, src)
    r1 = N(fg.zeros(64, 50, dtype=fg.float64).scatter_add(1, T(idx), T(src)))
    r2 = N(fg.zeros(64, 50, dtype=fg.float64).scatter_add(1, T(idx), T(src)))
    np.testing.assert_allclose(r1, exp, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(r1, r2)
    idx0 = rng.integers(0, 30, size=(100000, 3))
    exp0 = _scatter_add_ref(np.zeros((30, 3)), 0, idx0, np.ones((100000, 3)))
    same(fg.zeros(30, 3, dtype=fg.float64).scatter_add(0, T(idx0), fg.ones(100000, 3, dtype=fg.float64)), exp0)


def test_scatter_and_noncontiguous_target():
    a = np.zeros((3, 5), np.float32)
    idx = np.array([[0, 1, 2, 0, 1], [2, 0, 1, 2, 0]])
    src = np.arange(10, dtype=np.float32).reshape(2, 5)
    x = T(a.copy())
    x.scatter_(0, T(idx), T(src))
    b = a.copy()
    b[idx, np.arange(5)[None, :]] = src
    same(x, b)
    same(T(a).scatter(0, T(idx), value=7.0), _scatter_set(a, 0, idx, 7.0))
    base = T(np.zeros((5, 3), np.float32))
    base.t().scatter_add_(1, T(idx), T(src))  # writes through a transposed view
    c = np.zeros((3, 5), np.float32)
    c = _scatter_add_ref(c, 1, idx, src)
    same(base, c.T)


def _scatter_set(a, dim, idx, v):
    y = a.copy()
    coords = list(np.indices(idx.shape))
    coords[dim] = idx
    y[tuple(coords)] = v
    return y


def test_gather_scatter_errors_leave_inputs_unchanged():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = T(a.copy())
    with pytest.raises(IndexError, match="gather: index 3 is out of bounds for dimension 0 with size 3"):
        x.gather(0, T(np.array([[0, 3]])))
    with pytest.raises(IndexError, match="gather: index -1 is out of bounds"):
        x.gather(1, T(np.array([[-1]])))
    with pytest.raises(TypeError, match="gather.*integer.*float32"):
        x.gather(0, T(np.array([[0.0]], np.float32)))
    with pytest.raises(ValueError, match="gather.*same number of dimensions"):
        x.gather(0, T(np.array([0])))
    with pytest.raises(ValueError, match=r"gather.*\[3, 5\]"):
        x.gather(0, T(np.zeros((3, 5), np.int64)))
    with pytest.raises(IndexError, match="scatter_add_: index 4 is out of bounds for dimension 1 with size 4"):
        x.scatter_add_(1, T(np.array([[0, 1, 4]])), T(np.ones((1, 3), np.float32)))
    with pytest.raises(ValueError, match="scatter_add_.*must not be larger"):
        x.scatter_add_(1, T(np.array([[0, 1, 2]])), T(np.ones((1, 2), np.float32)))
    with pytest.raises(TypeError, match="scatter_add_.*float64.*int64"):
        T(np.zeros(3, np.int64)).scatter_add_(0, T(np.array([0])), T(np.ones(1)))
    same(x, a)
    ro = np.zeros(3)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        fg.from_numpy(ro).scatter_add_(0, T(np.array([0])), T(np.ones(1)))
    assert (ro == 0).all()


# ---------------------------------------------------------------------------
# cat / stack / split / chunk / unbind
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d1,d2,out",
    [
        ("int32", "float16", fg.float16),
        ("bool", "int32", fg.int32),
        ("int32", "int64", fg.int64),
        ("float16", "bfloat16", fg.float32),
        ("bfloat16", "float64", fg.float64),
        ("bool", "bool", fg.bool),
    ],
)
def test_cat_stack_promote(d1, d2, out):
    a = arr((2, 3), d1)
    b = arr((2, 3), d2, seed=1)
    ta, tb = T(a).to(getattr(fg, d1)), T(b).to(getattr(fg, d2))
    c = fg.cat([ta, tb], 1)
    assert c.dtype == out
    np.testing.assert_array_equal(N(c).astype(np.float64), np.concatenate([a, b], 1).astype(np.float64))
    s = fg.stack((ta, tb), -1)
    assert s.dtype == out and s.shape == (2, 3, 2)
    np.testing.assert_array_equal(N(s).astype(np.float64), np.stack([a, b], -1).astype(np.float64))


def test_cat_shapes_and_empty():
    a, b = arr((2, 3)), arr((4, 3), seed=1)
    same(fg.cat([T(a), T(b)]), np.concatenate([a, b]))
    same(fg.concat((T(a), T(b), T(np.zeros((0, 3), np.float32)))), np.concatenate([a, b]))
    # torch allows 1-D empty tensors next to anything
    same(fg.cat([T(a), fg.tensor([]), T(b)], 0), np.concatenate([a, b]))
    same(fg.cat([fg.tensor([]), fg.tensor([])]), np.zeros(0, np.float32))
    # non-contiguous inputs
    at = T(np.ascontiguousarray(a.T)).t()
    same(fg.cat([at, T(a)], -1), np.concatenate([a, a], -1))
    big = np.arange(400 * 300, dtype=np.float32).reshape(400, 300)
    same(fg.cat([T(big), T(big)[:, ::-1]], 1), np.concatenate([big, big[:, ::-1]], 1))
    with pytest.raises(ValueError, match=r"cat: sizes of tensors must match except in dimension 0.*\[2, 3\], \[4, 2\]"):
        fg.cat([T(a), T(arr((4, 2)))])
    with pytest.raises(ValueError, match="cat: tensors must have the same number of dimensions"):
        fg.cat([T(a), T(arr((3,)))])
    with pytest.raises(ValueError, match="cat: zero-dimensional"):
        fg.cat([fg.tensor(1.0)])
    with pytest.raises(ValueError, match="cat.*non-empty"):
        fg.cat([])
    with pytest.raises(IndexError, match="cat: dimension out of range"):
        fg.cat([T(a)], 2)
    with pytest.raises(TypeError, match="cat.*sequence"):
        fg.cat(T(a))
    with pytest.raises(ValueError, match=r"stack expects each tensor to be equal size.*\[2, 3\].*\[4, 3\]"):
        fg.stack([T(a), T(b)])
    with pytest.raises(ValueError, match="stack.*non-empty"):
        fg.stack([])


def test_split_chunk_unbind_are_views():
    x = fg.zeros(6, 4)
    parts = x.split(4)
    assert [p.shape for p in parts] == [(4, 4), (2, 4)]
    parts[1][0, 0] = 5.0
    assert x[4, 0].item() == 5.0
    parts = fg.split(x, [1, 0, 3], 1)
    assert [p.shape for p in parts] == [(6, 1), (6, 0), (6, 3)]
    parts[2].fill_(2.0)
    assert (N(x)[:, 1:] == 2).all()
    assert all(p._shares_storage(x) for p in parts)
    cs = x.chunk(4)
    assert [c.shape[0] for c in cs] == [2, 2, 2]  # ceil(6/4) = 2 -> only 3 chunks
    cs[2][1, 3] = -1.0
    assert x[5, 3].item() == -1.0
    assert [c.shape[1] for c in fg.chunk(x, 3, 1)] == [2, 2]
    assert [c.shape for c in fg.zeros(0, 2).chunk(3)] == [(0, 2)] * 3
    assert [p.shape for p in fg.zeros(0).split(2)] == [(0,)]
    us = x.unbind(1)
    assert len(us) == 4 and us[0].shape == (6,)
    us[0][0] = 9.0
    assert x[0, 0].item() == 9.0
    with pytest.raises(ValueError, match="split.*sum"):
        x.split([2, 2])
    with pytest.raises(ValueError, match="split_size can only be 0"):
        x.split(0)
    with pytest.raises(ValueError, match="chunk.*greater than 0"):
        x.chunk(0)
    with pytest.raises(IndexError, match="unbind: dimension out of range"):
        x.unbind(2)


# ---------------------------------------------------------------------------
# tril / triu / diag / repeat / roll / pad
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu(dtype):
    a = arr((2, 4, 5), dtype)
    x = T(a, dtype if dtype == "bfloat16" else None)
    for k in range(-5, 6):
        same(fg.tril(x, k), np.tril(a, k))
        same(x.triu(k), np.triu(a, k))
    same(x.transpose(1, 2).tril(1), np.tril(np.swapaxes(a, 1, 2), 1))
    big = np.arange(600 * 500, dtype=np.float32).reshape(600, 500)
    same(T(big).triu(3), np.triu(big, 3))
    with pytest.raises(ValueError, match="tril.*at least 2 dimensions"):
        fg.tril(T(a[0, 0]))


def test_diagonal_diag():
    a = arr((3, 4, 5))
    for off in range(-4, 6):
        same(T(a).diagonal(off, 1, 2), np.diagonal(a, off, 1, 2))
        same(fg.diagonal(T(a), off, 2, 0), np.diagonal(a, off, 2, 0))
    xa = T(a)
    assert xa.diagonal()._shares_storage(xa)
    x = fg.zeros(3, 3)
    x.diagonal().fill_(1.0)
    same(x, np.eye(3, dtype=np.float32))
    v = np.array([1, 2, 3])
    for k in (-2, 0, 1):
        same(fg.diag(T(v), k), np.diag(v, k))
        same(T(a[0]).diag(k), np.diag(a[0], k))
    with pytest.raises(ValueError, match="diag.*1-D or 2-D"):
        fg.diag(T(a))
    with pytest.raises(ValueError, match="diagonal dimensions cannot be identical"):
        T(a).diagonal(0, 1, 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_is_tile(dtype):
    a = arr((2, 3), dtype)
    x = T(a, dtype if dtype == "bfloat16" else None)
    for reps in [(1, 1), (2, 3), (3, 1, 2), (0, 2), (2, 1, 1, 1)]:
        same(x.repeat(*reps), np.tile(a, reps))
    same(x.t().repeat(2, 2), np.tile(a.T, (2, 2)))
    same(x.repeat((2, 1)), np.tile(a, (2, 1)))
    with pytest.raises(ValueError, match="repeat.*can not be smaller"):
        x.repeat(2)
    with pytest.raises(ValueError, match="repeat.*negative"):
        x.repeat(-1, 2)


def test_roll():
    a = arr((3, 4, 5))
    x = T(a)
    for shifts, dims in [(1, None), (-7, None), ((1, -2), (0, 2)), (13, 1), ((2, 2), (1, 1))]:
        same(fg.roll(x, shifts, dims), np.roll(a, shifts, axis=dims))
    r = x.roll(0, 1)
    assert not r._shares_storage(x)
    with pytest.raises(ValueError, match="roll.*same length"):
        x.roll((1, 2), 0)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
def test_pad(dtype):
    F = fg.nn.functional
    a = arr((2, 3, 4), dtype)
    x = T(a, dtype if dtype == "bfloat16" else None)
    same(F.pad(x, (1, 2)), np.pad(a, [(0, 0), (0, 0), (1, 2)]))
    same(F.pad(x, (1, 0, 0, 2, 1, 1), value=1), np.pad(a, [(1, 1), (0, 2), (1, 0)], constant_values=1))
    same(F.pad(x, (-1, 2, 1, -2)), np.pad(a[:, :1, 1:], [(0, 0), (1, 0), (0, 2)]))
    same(F.pad(x, (2, 3), mode="reflect"), np.pad(a, [(0, 0), (0, 0), (2, 3)], mode="reflect"))
    same(F.pad(x, (0, 2, 1, 1), mode="replicate"), np.pad(a, [(0, 0), (1, 1), (0, 2)], mode="edge"))
    same(F.pad(x, (4, 1), mode="circular"), np.pad(a, [(0, 0), (0, 0), (4, 1)], mode="wrap"))
    same(F.pad(x.permute(2, 0, 1), (1, 1)), np.pad(np.transpose(a, (2, 0, 1)), [(0, 0), (0, 0), (1, 1)]))


def test_pad_errors():
    F = fg.nn.functional
    x = fg.zeros(2, 3)
    with pytest.raises(ValueError, match="pad.*even"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="pad.*even"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="pad.*too large.*Reflect"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="pad.*unknown padding mode"):
        F.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="pad.*negative"):
        F.pad(x, (-2, -2))
    with pytest.raises(TypeError, match="pad.*int32"):
        F.pad(fg.zeros(2, dtype=fg.int32), (1, 1), value=0.5)


def test_registry_flags():
    reg = {o["name"]: o for o in fg.registry()}
    assert reg["nonzero"]["data_dependent"] and reg["masked_select"]["data_dependent"]
    assert reg["setitem"]["mutates"] == 0 and reg["scatter_add_"]["mutates"] == 0
    assert reg["split"]["views"] == 0 and reg["chunk"]["views"] == 0
    assert reg["cat"]["family"] == "join" and reg["gather"]["family"] == "index"
