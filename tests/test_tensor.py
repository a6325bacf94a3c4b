"""The tensor object: dtypes, promotion, in-place ops, NumPy interop, conversions, printing, errors."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import ferrograd as fg
import numpy as np
import pytest

DTYPES = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
NP_OF = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float16": np.float16,
         "float32": np.float32, "float64": np.float64}


def snapshot(t):
    """Values and version of a tensor, to check an op left it alone."""
    src = t.float() if t.dtype == fg.bfloat16 else t
    return np.array(np.asarray(src), copy=True), t._version


def assert_unchanged(t, snap):
    vals, ver = snapshot(t)
    np.testing.assert_array_equal(vals, snap[0])
    assert ver == snap[1], "an op that raised bumped the version counter"


def make(dtype, values=(1, 0, 2)):
    d = getattr(fg, dtype)
    if dtype == "bool":
        return fg.tensor([bool(v) for v in values])
    return fg.tensor(list(values), dtype=d)


# ---------------------------------------------------------------------------
# dtype objects
# ---------------------------------------------------------------------------

DTYPE_FACTS = {  # name: (itemsize, is_floating_point)
    "bool": (1, False), "int32": (4, False), "int64": (8, False), "float16": (2, True),
    "bfloat16": (2, True), "float32": (4, True), "float64": (8, True),
}


@pytest.mark.parametrize("name", DTYPES)
def test_dtype_objects(name):
    d = getattr(fg, name)
    size, is_float = DTYPE_FACTS[name]
    assert d.itemsize == size
    assert d.is_floating_point is is_float
    assert d.name == name
    assert repr(d) == str(d) == f"ferrograd.{name}"
    assert d == getattr(fg, name) and hash(d) == hash(getattr(fg, name))
    assert pickle.loads(pickle.dumps(d)) == d
    t = fg.zeros(3, dtype=d)
    assert t.dtype == d
    assert t.element_size() == t.itemsize == size
    assert t.nbytes == 3 * size
    assert t.is_floating_point() is is_float
    assert fg.zeros(1, dtype=name).dtype == d  # names work as dtype arguments


def test_dtype_aliases():
    assert fg.float is fg.float32 and fg.double is fg.float64 and fg.half is fg.float16
    assert fg.long is fg.int64 and fg.int is fg.int32
    assert fg.bool.is_bool and not fg.int32.is_bool
    assert len({getattr(fg, n) for n in DTYPES}) == 7
    # NumPy dtypes and Python types are accepted where a dtype is expected
    assert fg.zeros(1, dtype=np.float64).dtype == fg.float64
    assert fg.zeros(1, dtype=np.dtype("int32")).dtype == fg.int32
    assert fg.zeros(1, dtype=float).dtype == fg.float32
    assert fg.zeros(1, dtype=bool).dtype == fg.bool


def test_python_int_type_means_int64():
    assert fg.zeros(1, dtype=int).dtype == fg.int64


def test_default_dtypes():
    assert fg.zeros(2).dtype == fg.float32
    assert fg.tensor([1.0, 2]).dtype == fg.float32
    assert fg.tensor([1, 2]).dtype == fg.int64
    assert fg.tensor([True, False]).dtype == fg.bool
    assert fg.tensor([True, 2]).dtype == fg.int64
    assert fg.tensor([]).dtype == fg.float32
    assert fg.arange(3).dtype == fg.int64
    assert fg.arange(3.0).dtype == fg.float32
    assert fg.full((2,), 1).dtype == fg.int64
    assert fg.full((2,), 1.0).dtype == fg.float32
    assert fg.full((2,), True).dtype == fg.bool


# ---------------------------------------------------------------------------
# Promotion (PyTorch's documented rules, written out)
# ---------------------------------------------------------------------------

_B, _I32, _I64, _F16, _BF16, _F32, _F64 = DTYPES
# result_type(row, column) for two dimensioned tensors
PROMOTE = {
    _B:    {_B: _B,    _I32: _I32, _I64: _I64, _F16: _F16, _BF16: _BF16, _F32: _F32, _F64: _F64},
    _I32:  {_B: _I32,  _I32: _I32, _I64: _I64, _F16: _F16, _BF16: _BF16, _F32: _F32, _F64: _F64},
    _I64:  {_B: _I64,  _I32: _I64, _I64: _I64, _F16: _F16, _BF16: _BF16, _F32: _F32, _F64: _F64},
    _F16:  {_B: _F16,  _I32: _F16, _I64: _F16, _F16: _F16, _BF16: _F32,  _F32: _F32, _F64: _F64},
    _BF16: {_B: _BF16, _I32: _BF16, _I64: _BF16, _F16: _F32, _BF16: _BF16, _F32: _F32, _F64: _F64},
    _F32:  {_B: _F32,  _I32: _F32, _I64: _F32, _F16: _F32, _BF16: _F32,  _F32: _F32, _F64: _F64},
    _F64:  {_B: _F64,  _I32: _F64, _I64: _F64, _F16: _F64, _BF16: _F64,  _F32: _F64, _F64: _F64},
}
# result_type(tensor of row dtype, Python scalar of column kind): scalars are weak
PROMOTE_SCALAR = {
    _B:    {"bool": _B,    "int": _I64,  "float": _F32},
    _I32:  {"bool": _I32,  "int": _I32,  "float": _F32},
    _I64:  {"bool": _I64,  "int": _I64,  "float": _F32},
    _F16:  {"bool": _F16,  "int": _F16,  "float": _F16},
    _BF16: {"bool": _BF16, "int": _BF16, "float": _BF16},
    _F32:  {"bool": _F32,  "int": _F32,  "float": _F32},
    _F64:  {"bool": _F64,  "int": _F64,  "float": _F64},
}
SCALARS = {"bool": True, "int": 2, "float": 2.5}


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promotion_tensor_tensor(a, b):
    x, y = make(a), make(b)
    want = getattr(fg, PROMOTE[a][b])
    assert (x + y).dtype == want
    assert (y + x).dtype == want
    assert fg.maximum(x, y).dtype == want
    assert fg.where(fg.tensor([True, False, True]), x, y).dtype == want
    assert (x == y).dtype == fg.bool


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("kind", ["bool", "int", "float"])
def test_promotion_tensor_scalar(a, kind):
    x, s = make(a), SCALARS[kind]
    want = getattr(fg, PROMOTE_SCALAR[a][kind])
    assert (x + s).dtype == want
    assert (s + x).dtype == want
    assert (x * s).dtype == want
    assert (x < s).dtype == fg.bool


@pytest.mark.parametrize("a", ["bool", "int32", "int64"])
def test_true_division_of_ints_is_float32(a):
    x, y = make(a, (4, 2, 6)), make(a, (2, 1, 4)) if a != "bool" else make(a, (1, 1, 1))
    assert (x / y).dtype == fg.float32
    assert (x / 2).dtype == fg.float32



@pytest.mark.parametrize("row,zero_d,want", [
    pytest.param("int32", "int64", "int32"),
    pytest.param("float32", "float64", "float32"),
    pytest.param("float16", "float32", "float16"),
    # a 0-d operand of a higher category decides the category (and its own size)
    ("int32", "float64", "float64"),
    ("bool", "int32", "int32"),
    ("float32", "int64", "float32"),
])
def test_promotion_zero_dim_tensors_are_weaker(row, zero_d, want):
    x = make(row)
    z = fg.tensor(1, dtype=getattr(fg, zero_d))
    assert (x + z).dtype == getattr(fg, want)


# ---------------------------------------------------------------------------
# In-place operators
# ---------------------------------------------------------------------------

INPLACE = [
    ("+=", lambda a, b: a.__iadd__(b), np.add),
    ("-=", lambda a, b: a.__isub__(b), np.subtract),
    ("*=", lambda a, b: a.__imul__(b), np.multiply),
    ("/=", lambda a, b: a.__itruediv__(b), np.true_divide),
    ("//=", lambda a, b: a.__ifloordiv__(b), np.floor_divide),
    ("%=", lambda a, b: a.__imod__(b), np.remainder),
    ("**=", lambda a, b: a.__ipow__(b), np.power),
]


def _iop(sym):
    def run(a, b):
        ns = {"a": a, "b": b}
        exec(f"a {sym} b", ns)  # noqa: S102 - the statement form is what is under test
        return ns["a"]
    return run


@pytest.mark.parametrize("sym,_m,np_op", INPLACE, ids=[c[0] for c in INPLACE])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_inplace_operators(sym, _m, np_op, dtype):
    if sym == "/=" and dtype == "int64":
        pytest.skip("covered by test_inplace_dtype_errors")
    a0 = np.array([[3, 4, 5], [6, 7, 8]], dtype=dtype)
    b0 = np.array([1, 2, 3], dtype=dtype)
    a = fg.from_numpy(a0.copy())
    view = a[1]
    ident, ver = id(a), a._version
    out = _iop(sym)(a, fg.from_numpy(b0))
    assert id(out) == ident, f"{sym} must keep the tensor object"
    assert out.dtype == getattr(fg, dtype)
    np.testing.assert_allclose(np.asarray(out), np_op(a0, b0).astype(dtype), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(view), np_op(a0, b0).astype(dtype)[1], rtol=1e-6)
    assert a._version > ver
    # scalar operand
    c = fg.from_numpy(a0.copy())
    _iop(sym)(c, 2)
    np.testing.assert_allclose(np.asarray(c), np_op(a0, 2).astype(dtype), rtol=1e-6)


def test_inplace_bitwise_operators():
    a0 = np.array([5, 6, 7], dtype=np.int32)
    for sym, op in [("&=", np.bitwise_and), ("|=", np.bitwise_or), ("^=", np.bitwise_xor)]:
        a = fg.from_numpy(a0.copy())
        _iop(sym)(a, fg.tensor([3, 3, 3], dtype=fg.int32))
        np.testing.assert_array_equal(np.asarray(a), op(a0, 3))
        assert a.dtype == fg.int32


@pytest.mark.parametrize("dst,src,want", [
    ("int32", "int64", "int32"),    # same category: cast back
    ("float16", "float32", "float16"),
    ("float32", "int64", "float32"),
    ("float64", "bool", "float64"),
    ("int64", "bool", "int64"),
])
def test_inplace_keeps_the_destination_dtype(dst, src, want):
    a = make(dst, (1, 2, 3))
    a += make(src, (1, 1, 1))
    assert a.dtype == getattr(fg, want)


@pytest.mark.parametrize("dst,operand,op", [
    ("int64", 1.5, "add"),
    ("int64", fg.tensor([1.0, 2.0, 3.0]), "add"),
    ("int32", fg.tensor([1.0, 2.0, 3.0], dtype=fg.float16), "mul"),
    ("bool", 1, "add"),
    ("bool", fg.tensor([1, 2, 3]), "add"),
    ("int64", fg.tensor([2, 2, 2]), "div"),
    ("int64", 2, "div"),
])
def test_inplace_dtype_errors(dst, operand, op):
    a = make(dst, (1, 2, 3))
    snap = snapshot(a)
    with pytest.raises(TypeError, match=op):
        if op == "add":
            a += operand
        elif op == "mul":
            a *= operand
        else:
            a /= operand
    assert_unchanged(a, snap)


def test_inplace_shape_errors():
    a = fg.tensor([1.0, 2.0])
    snap = snapshot(a)
    with pytest.raises(ValueError, match=r"add.*\[2\].*\[1, 2\]|add.*\[1, 2\].*\[2\]"):
        a += fg.tensor([[1.0, 2.0]])  # would broadcast the destination up
    with pytest.raises(ValueError, match="add"):
        a += fg.tensor([1.0, 2.0, 3.0])
    assert_unchanged(a, snap)


def test_inplace_with_overlapping_operand():
    a = fg.arange(5.0)
    a += a.flip(0)
    np.testing.assert_array_equal(np.asarray(a), [4.0] * 5)
    b = fg.arange(6.0).reshape(2, 3)
    b[1] += b[0]  # the operand is another row of the same storage
    np.testing.assert_array_equal(np.asarray(b), [[0, 1, 2], [3, 5, 7]])


def test_named_inplace_methods_return_self():
    a = fg.tensor([1.0, -2.0])
    assert a.add_(1) is a and a.mul_(2) is a and a.neg_() is a and a.abs_() is a
    assert a.clamp_(0, 3) is a and a.fill_(1) is a and a.zero_() is a
    np.testing.assert_array_equal(np.asarray(a), [0.0, 0.0])


# ---------------------------------------------------------------------------
# NumPy interop
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", list(NP_OF))
def test_from_numpy_shares_memory_both_ways(dtype):
    a = (np.arange(6) % 3).reshape(2, 3).astype(dtype)
    t = fg.from_numpy(a)
    assert t.dtype == getattr(fg, dtype) and tuple(t.shape) == (2, 3)
    assert t.data_ptr() == a.ctypes.data
    a[0, 0] = 1
    assert t[0, 0].item() == a[0, 0]
    t.fill_(0)
    assert not a.any()
    for n in (t.numpy(), np.asarray(t)):
        assert np.shares_memory(n, a)
        assert n.dtype == a.dtype
        n[1, 2] = 1
        assert a[1, 2] == 1


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_tensor_memory_seen_by_numpy(dtype):
    t = fg.zeros(2, 3, dtype=dtype)
    n = t.numpy()
    n[1, 1] = 1
    assert t[1, 1].item() == 1
    t.fill_(1)
    assert n.all()
    assert np.asarray(t.T).flags.f_contiguous  # strides follow the view
    assert np.asarray(t).__array_interface__["data"][0] == t.data_ptr()


def test_from_numpy_keeps_the_array_alive():
    t = fg.from_numpy(np.arange(1000.0))
    import gc
    gc.collect()
    assert t[999].item() == 999.0
    t.add_(1)
    assert t[0].item() == 1.0 and t[999].item() == 1000.0


def test_from_numpy_noncontiguous_and_empty():
    a = np.arange(24.0).reshape(4, 6)[::-2, 1::2]
    t = fg.from_numpy(a)
    assert t.stride() == tuple(s // 8 for s in a.strides)
    np.testing.assert_array_equal(np.asarray(t), a)
    e = fg.from_numpy(np.zeros((0, 3), np.float32))
    assert tuple(e.shape) == (0, 3) and e.numel() == 0
    z = fg.from_numpy(np.array(5, dtype=np.int32))
    assert tuple(z.shape) == () and z.item() == 5


@pytest.mark.parametrize("arr", [
    np.zeros(3, np.uint16), np.zeros(3, np.complex64), np.zeros(3, np.uint32), np.zeros(3, ">f4"),
], ids=["uint16", "complex64", "uint32", "big-endian"])
def test_from_numpy_unsupported_dtypes(arr):
    with pytest.raises(TypeError, match="from_numpy"):
        fg.from_numpy(arr)


def test_from_numpy_rejects_non_arrays():
    with pytest.raises(TypeError, match="from_numpy"):
        fg.from_numpy([1, 2, 3])


def test_bfloat16_has_no_numpy_view():
    t = fg.tensor([1.0, 2.0]).to(fg.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        np.asarray(t)
    np.testing.assert_array_equal(t.float().numpy(), [1.0, 2.0])


def test_tensor_copies_numpy_input():
    a = np.arange(3.0)
    t = fg.tensor(a)
    a[0] = 10
    assert t[0].item() == 0.0
    assert not t._shares_storage(fg.from_numpy(a))


# ---------------------------------------------------------------------------
# Read-only NumPy arrays
# ---------------------------------------------------------------------------

def _readonly():
    a = np.arange(6.0).reshape(2, 3)
    a.flags.writeable = False
    return a


WRITES = [
    ("add_", lambda t: t.add_(1)),
    ("iadd", lambda t: t.__iadd__(1)),
    ("fill_", lambda t: t.fill_(0)),
    ("zero_", lambda t: t.zero_()),
    ("copy_", lambda t: t.copy_(fg.zeros(2, 3, dtype=fg.float64))),
    ("neg_", lambda t: t.neg_()),
    ("clamp_", lambda t: t.clamp_(0, 1)),
    ("masked_fill_", lambda t: t.masked_fill_(fg.tensor([True, False, True]), 0.0)),
    ("setitem", lambda t: t.__setitem__(0, 5.0)),
    ("view_fill_", lambda t: t[1:, ::-1].fill_(3)),
    ("transpose_add_", lambda t: t.T.add_(1)),
]


@pytest.mark.parametrize("name,write", WRITES, ids=[w[0] for w in WRITES])
def test_readonly_arrays_refuse_writes(name, write):
    a = _readonly()
    before = a.copy()
    t = fg.from_numpy(a)
    with pytest.raises(ValueError, match="read-only"):
        write(t)
    np.testing.assert_array_equal(a, before)
    np.testing.assert_array_equal(np.asarray(t), before)


def test_readonly_arrays_still_read_and_clone():
    a = _readonly()
    t = fg.from_numpy(a)
    np.testing.assert_array_equal(np.asarray(t + 1), a + 1)
    assert not t.numpy().flags.writeable
    c = t.clone()
    c.fill_(7)
    assert (np.asarray(c) == 7).all() and a[0, 0] == 0


# ---------------------------------------------------------------------------
# Python conversions
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,py_type", [
    ("float32", float), ("float64", float), ("float16", float), ("bfloat16", float),
    ("int32", int), ("int64", int), ("bool", bool),
])
def test_item_and_tolist_types(dtype, py_type):
    t = make(dtype, (1, 0, 2))
    lst = t.tolist()
    assert isinstance(lst, list) and len(lst) == 3
    assert all(type(v) is py_type for v in lst)
    v = t[2].item()
    assert type(v) is py_type
    assert v == py_type(2)
    assert t.reshape(3, 1).tolist() == [[x] for x in lst]
    assert type(t[0].tolist()) is py_type  # 0-d: a scalar
    assert float(t[2]) == 2.0 or dtype == "bool"
    assert int(t[2]) in (1, 2)
    assert bool(t[2]) is True and bool(t[1]) is False


def test_tolist_noncontiguous():
    t = fg.arange(6).reshape(2, 3).T.flip(0)
    assert t.tolist() == [[2, 5], [1, 4], [0, 3]]
    assert fg.zeros(0, 2).tolist() == []


@pytest.mark.parametrize("shape", [(2,), (0,), (1, 2)])
def test_scalar_conversions_need_one_element(shape):
    t = fg.zeros(*shape)
    with pytest.raises(ValueError, match="item"):
        t.item()
    with pytest.raises(ValueError):
        float(t)
    with pytest.raises(ValueError):
        int(t)
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)


def test_one_element_conversions():
    assert fg.tensor([[2.5]]).item() == 2.5
    assert int(fg.tensor([3.9])) == 3 and int(fg.tensor([-3.9])) == -3
    assert [10, 20, 30][fg.tensor(1)] == 20
    with pytest.raises(TypeError):
        [10, 20, 30][fg.tensor(1.0)]
    with pytest.raises(TypeError, match="0-d"):
        len(fg.tensor(1.0))
    assert len(fg.zeros(4, 2)) == 4


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("make_t,text", [
    (lambda: fg.tensor([1.0, 2.0]), "tensor([1., 2.])"),
    (lambda: fg.tensor([1.0, 2.0], dtype=fg.float64), "tensor([1., 2.], dtype=ferrograd.float64)"),
    (lambda: fg.tensor([1, 2]), "tensor([1, 2])"),
    (lambda: fg.tensor([1, 2], dtype=fg.int32), "tensor([1, 2], dtype=ferrograd.int32)"),
    (lambda: fg.tensor([True, False]), "tensor([ True, False])"),
    (lambda: fg.tensor(2.5), "tensor(2.5000)"),
    (lambda: fg.tensor([1.5, 2.25]), "tensor([1.5000, 2.2500])"),
    (lambda: fg.tensor([]), "tensor([])"),
    (lambda: fg.zeros(2, 0), "tensor([], size=(2, 0))"),
    (lambda: fg.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
    (lambda: fg.tensor([1.0, 2.0]).to(fg.bfloat16), "tensor([1., 2.], dtype=ferrograd.bfloat16)"),
])
def test_repr(make_t, text):
    t = make_t()
    assert repr(t) == text
    assert str(t) == text


def test_repr_summarises_large_tensors():
    small = repr(fg.arange(1000))
    assert "..." not in small
    big = repr(fg.arange(1001))
    assert "..." in big and len(big) < 200
    assert big.startswith("tensor([   0,    1,    2,") and big.rstrip(")]").endswith("1000")
    assert "..." in repr(fg.zeros(100, 100))
    assert len(repr(fg.zeros(100, 100))) < 1000


def test_repr_float16_without_warnings():
    t = fg.tensor([1.0, 2.0], dtype=fg.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert repr(t) == "tensor([1., 2.], dtype=ferrograd.float16)"


# ---------------------------------------------------------------------------
# Bad input: error classes and messages; inputs unchanged after an error
# ---------------------------------------------------------------------------

def _x():
    return fg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


BAD = [
    # (id, callable on x, exception, match)
    ("add_shapes", lambda x: x + fg.ones(4), ValueError, r"add.*\[2, 3\].*\[4\]"),
    ("mul_shapes", lambda x: x.mul(fg.ones(2, 2)), ValueError, r"mul.*\[2, 3\].*\[2, 2\]"),
    ("where_shapes", lambda x: fg.where(fg.tensor([True, False]), x, x), ValueError, r"where.*\[2\]"),
    ("copy_shapes", lambda x: x.copy_(fg.ones(3, 3)), ValueError, "copy_"),
    ("reshape_numel", lambda x: x.reshape(4), ValueError, r"reshape.*\[4\].*6"),
    ("view_numel", lambda x: x.view(5, -1), ValueError, "view"),
    ("reshape_two_inferred", lambda x: x.reshape(-1, -1), ValueError, "reshape"),
    ("expand", lambda x: x.expand(4, 3, 2), ValueError, "expand"),
    ("broadcast_to", lambda x: fg.broadcast_to(x, [3, 3]), ValueError, "broadcast_to"),
    ("flip_repeat", lambda x: x.flip(0, 0), ValueError, "flip"),
    ("masked_fill_mask_shape", lambda x: x.masked_fill(fg.tensor([True, False, True, False]), 0.0),
     ValueError, "masked_fill"),
    ("clamp_no_bounds", lambda x: x.clamp(), ValueError, "clamp"),
    ("gelu_mode", lambda x: x.gelu(approximate="fast"), ValueError, "gelu"),
    ("as_strided_oob", lambda x: x.as_strided((7,), (1,)), ValueError, "as_strided"),
    ("bitwise_float", lambda x: x & x, TypeError, "bitwise_and"),
    ("where_cond_dtype", lambda x: fg.where(x, x, x), TypeError, "where"),
    ("neg_bool", lambda x: -(x > 2), TypeError, "neg"),
    ("sub_bool", lambda x: (x > 2) - (x > 3), TypeError, "sub"),
    ("bad_dtype_name", lambda x: x.to("float8"), TypeError, "float8"),
    ("bad_dtype_object", lambda x: fg.zeros(2, dtype=np.uint16), TypeError, "dtype"),
    ("masked_fill_value", lambda x: x.long().masked_fill(fg.tensor([True, False, True]), 2.5),
     TypeError, "masked_fill"),
    ("operand_type", lambda x: x + None, TypeError, "NoneType"),
    ("getitem_oob", lambda x: x[2], IndexError, "out of bounds"),
    ("getitem_neg_oob", lambda x: x[-3], IndexError, "out of bounds"),
    ("getitem_too_many", lambda x: x[0, 0, 0], IndexError, "too many indices"),
    ("getitem_float", lambda x: x[1.5], IndexError, "indices"),
    ("select_dim", lambda x: x.select(2, 0), IndexError, "select"),
    ("select_index", lambda x: x.select(1, 3), IndexError, "select"),
    ("narrow_oob", lambda x: x.narrow(1, 2, 5), IndexError, "narrow"),
    ("permute_dim", lambda x: x.permute(0, 2), IndexError, "permute"),
    ("transpose_dim", lambda x: x.transpose(0, 2), IndexError, "transpose"),
    ("squeeze_dim", lambda x: x.squeeze(3), IndexError, "squeeze"),
    ("unsqueeze_dim", lambda x: x.unsqueeze(4), IndexError, "unsqueeze"),
    ("t_3d", lambda x: x.unsqueeze(0).t(), ValueError, r"t\(\)"),
    ("mT_1d", lambda x: x[0].mT, ValueError, "mT"),
    ("zero_step", lambda x: x[::0], ValueError, "step"),
    ("zero_d_index", lambda x: x[0, 0][0], IndexError, "0-dim"),
    ("ragged", lambda x: fg.tensor([[1], [2, 3]]), ValueError, "ragged"),
    ("arange_zero_step", lambda x: fg.arange(0, 1, 0), ValueError, "arange"),
    ("arange_sign", lambda x: fg.arange(0, 5, -1), ValueError, "arange"),
    ("negative_dim", lambda x: fg.zeros(2, -1), ValueError, "negative"),
]


@pytest.mark.parametrize("name,fn,exc,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_errors(name, fn, exc, match):
    x = _x()
    snap = snapshot(x)
    with pytest.raises(exc, match=match):
        fn(x)
    assert_unchanged(x, snap)


@pytest.mark.parametrize("make_t", [
    lambda: fg.empty(2**62),
    lambda: fg.zeros(2**40, 2**40),
    lambda: fg.zeros(2**62, 4),
    lambda: fg.ones(2**31, 2**31, 2**31),
    lambda: fg.empty(2**61, dtype=fg.float64),
    lambda: fg.full((2**40, 2**30), 1.0),
], ids=["empty_2^62", "zeros_2^40x2^40", "zeros_2^62x4", "ones_2^93", "empty_bytes_overflow", "full"])
def test_huge_allocations_raise_memory_error(make_t):
    with pytest.raises(MemoryError):
        make_t()


def test_error_in_inplace_leaves_other_inputs_alone():
    a, b = fg.tensor([1, 2, 3]), fg.tensor([1.5, 2.5, 3.5])
    sa, sb = snapshot(a), snapshot(b)
    with pytest.raises(TypeError):
        a += b
    assert_unchanged(a, sa)
    assert_unchanged(b, sb)


# ---------------------------------------------------------------------------
# Known bugs (strict xfails: they start failing when the bug is fixed)
# ---------------------------------------------------------------------------

def test_pow_int32():
    t = fg.tensor([3, 2, -2], dtype=fg.int32)
    np.testing.assert_array_equal(np.asarray(t**2), [9, 4, 4])


def test_linspace_single_step():
    np.testing.assert_array_equal(np.asarray(fg.linspace(2.0, 5.0, 1)), [2.0])


def test_arange_negative_step_int():
    np.testing.assert_array_equal(np.asarray(fg.arange(5, 0, -2)), [5, 3, 1])


def test_ones_bool():
    np.testing.assert_array_equal(np.asarray(fg.ones(2, dtype=fg.bool)), [True, True])


def test_clamp_int_with_float_bounds_promotes():
    r = fg.tensor([1, 2, 3], dtype=fg.int32).clamp(0.5, 2.5)
    assert r.dtype == fg.float32
    np.testing.assert_array_equal(np.asarray(r), [1.0, 2.0, 2.5])


# Each expression and the exception PyTorch raises for it (a string index is an IndexError).
_STR_CASES = [
    ("fg.tensor('abc')", "TypeError"), ("fg.tensor(['a'])", "TypeError"),
    ("fg.tensor([1.0])['a']", "IndexError"), ("fg.tensor([1.0]) + 'a'", "TypeError"),
    ("'a' + fg.tensor([1.0])", "TypeError"), ("fg.tensor([1.0])[0] = 'a'", "TypeError"),
    ("fg.tensor([1.0]).fill_('a')", "TypeError"),
]


@pytest.mark.parametrize("expr,exc", _STR_CASES)
def test_strings_raise_type_error(expr, exc):
    """A string where a number belongs raises (in a subprocess, so that a crash is caught
    too): the expression must raise ``exc``, not succeed and not crash."""
    code = (
        f"import ferrograd as fg\ntry:\n    {expr}\nexcept Exception as e:\n"
        "    print(type(e).__name__)\nelse:\n    print('no exception')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"crashed with return code {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout.strip() == exc, f"{expr}: expected {exc}, got {r.stdout.strip()!r}"


# ---------------------------------------------------------------------------
# Dtypes the registry does not declare must be refused (the declaration is the truth)
# ---------------------------------------------------------------------------

_REG = {o["name"]: o for o in fg.registry()}
_UNARY_CALLS = {
    "neg": lambda t: t.neg(), "abs": lambda t: t.abs(), "sign": lambda t: t.sign(),
    "square": lambda t: t.square(), "floor": lambda t: t.floor(), "ceil": lambda t: t.ceil(),
    "round": lambda t: t.round(), "trunc": lambda t: t.trunc(), "relu": lambda t: t.relu(),
    "clamp": lambda t: t.clamp(0, 1), "bitwise_not": lambda t: t.bitwise_not(),
}
_BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum", "atan2",
           "bitwise_and", "bitwise_or", "bitwise_xor"]


def _undeclared_cases():
    for name in list(_UNARY_CALLS) + _BINARY:
        info = _REG.get(name)
        if info is None:
            continue
        for d in DTYPES:
            if d in info["dtypes"]:
                continue
            marks = []
            yield pytest.param(name, d, id=f"{name}-{d}", marks=marks)


@pytest.mark.parametrize("name,dtype", list(_undeclared_cases()))
def test_undeclared_dtypes_raise_type_error(name, dtype):
    t = make(dtype, (1, 0, 2))
    snap = snapshot(t)
    with pytest.raises(TypeError, match=name.split("_")[0]):
        if name in _UNARY_CALLS:
            _UNARY_CALLS[name](t)
        else:
            getattr(fg.Tensor, name)(t, t)
    assert_unchanged(t, snap)


def test_from_numpy_rejects_bool_bytes_other_than_0_and_1():
    raw = np.array([0, 2, 0, 1], np.uint8)
    with pytest.raises(ValueError, match="byte 2"):
        fg.from_numpy(raw.view(np.bool_))
    ok = fg.from_numpy(np.array([[0, 1], [1, 7]], np.uint8).view(np.bool_)[:, :1])  # strided, 7 not an element
    assert ok.tolist() == [[False], [True]]
