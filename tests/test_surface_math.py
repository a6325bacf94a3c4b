"""PyTorch math functions and Tensor methods composed in Python (``ferrograd._surface_math``).

References are NumPy/SciPy float64 computations of each documented definition, and stored
PyTorch values (``scripts/make_surface_math_references.py``, which records the PyTorch
version, writes ``tests/fixtures/parity/surface_math.npz``); in-place
forms are checked for their result, identity (they return ``self``), a version bump and
autograd through them; random initialisers statistically and for seeded reproducibility.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd import gradcheck

RNG = np.random.default_rng(38)
ROOT = Path(__file__).resolve().parent.parent
PARITY = ROOT / "tests" / "fixtures" / "parity" / "surface_math.npz"


def _t(a, dtype=fg.float64, grad=False):
    return fg.tensor(np.asarray(a), dtype=dtype, requires_grad=grad)


def _np(t):
    return np.asarray(t.detach().tolist(), dtype=np.float64)


def _close(t, ref, tol=1e-12):
    np.testing.assert_allclose(_np(t), np.asarray(ref, np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------
# addcmul / addcdiv
# ---------------------------------------------------------------------------


def test_addcmul_addcdiv_broadcast_and_value():
    a, b, c = RNG.normal(size=(3, 1)), RNG.normal(size=(1, 4)), RNG.normal(size=(3, 4)) + 3
    _close(fg.addcmul(_t(a), _t(b), _t(c), value=0.5), a + 0.5 * b * c)
    _close(_t(a).addcdiv(_t(b), _t(c), value=-2), a - 2 * b / c)
    # integer inputs keep their dtype; a float tensor promotes
    out = fg.addcmul(fg.tensor([1, 2]), fg.tensor([1, 2]), fg.tensor([3, 4]), value=2)
    assert out.dtype == fg.int64 and out.tolist() == [7, 18]
    assert fg.addcmul(fg.tensor([1, 2]), fg.tensor([1.0, 2]), fg.tensor([3, 4])).dtype == fg.float32
    with pytest.raises(RuntimeError, match="addcdiv"):
        fg.addcdiv(fg.tensor([1, 2]), fg.tensor([1, 2]), fg.tensor([3, 4]))
    with pytest.raises(ValueError, match="addcmul.*broadcast"):
        fg.addcmul(_t(np.ones(3)), _t(np.ones(2)), _t(np.ones(3)))
    with pytest.raises(TypeError, match="addcmul.*value"):
        fg.addcmul(_t(a), _t(b), _t(c), value="x")


def test_addcmul_addcdiv_old_value_first_order():
    a, b, c = RNG.normal(size=3), RNG.normal(size=3), RNG.uniform(1, 2, size=3)
    x = _t(a)
    with pytest.warns(UserWarning, match="addcmul.*deprecated"):
        assert x.addcmul_(0.5, _t(b), _t(c)) is x
    _close(x, a + 0.5 * b * c)
    with pytest.warns(UserWarning, match="addcdiv.*deprecated"):
        _close(fg.addcdiv(_t(a), -2, _t(b), _t(c)), a - 2 * b / c)
    with pytest.raises(TypeError, match="addcmul.*positional"):
        fg.addcmul(_t(a), _t(b), _t(c), _t(c))


def test_addcmul_addcdiv_grad():
    a, b = _t(RNG.normal(size=(2, 3)), grad=True), _t(RNG.normal(size=(3,)), grad=True)
    c = _t(RNG.uniform(1, 2, size=(2, 1)), grad=True)
    assert gradcheck(lambda x, y, z: fg.addcmul(x, y, z, value=0.7), (a, b, c))
    assert gradcheck(lambda x, y, z: fg.addcdiv(x, y, z, value=0.7), (a, b, c))


def _check_inplace(name, x0, *args, ref, tol=1e-12, **kw):
    """``x.name(*args)`` returns ``x``, writes ``ref`` into it and bumps its version."""
    x = x0.clone()
    v = x._version
    out = getattr(x, name)(*args, **kw)
    assert out is x, name
    assert x._version > v, name
    assert x.dtype == x0.dtype, name
    _close(x, ref, tol)


def test_addcmul_addcdiv_inplace_and_autograd():
    a, b, c = RNG.normal(size=(2, 3)), RNG.normal(size=(3,)), RNG.uniform(1, 2, size=(2, 3))
    _check_inplace("addcmul_", _t(a), _t(b), _t(c), value=3, ref=a + 3 * b * c)
    _check_inplace("addcdiv_", _t(a), _t(b), _t(c), ref=a + b / c)
    # an Adam-style update through a non-leaf: gradients of the old value are kept
    p = _t(a, grad=True)
    g = _t(b, grad=True)
    y = p * 2
    y.addcdiv_(g, y.detach() + 5, value=-0.1)
    y.addcmul_(y, g)
    (y * y).sum().backward()
    pn, gn = a, b
    y0 = 2 * pn
    y1 = y0 - 0.1 * gn / (y0 + 5)
    y2 = y1 + y1 * gn
    dy2 = 2 * y2
    np.testing.assert_allclose(_np(p.grad), (dy2 * (1 + gn)) * 2, rtol=1e-10)
    dg = dy2 * y1 + (dy2 * (1 + gn) * (-0.1 / (y0 + 5)))
    np.testing.assert_allclose(_np(g.grad), dg.sum(0), rtol=1e-10)
    with pytest.raises(RuntimeError, match="leaf"):
        _t(a, grad=True).addcmul_(_t(b), _t(c))
    with pytest.raises(RuntimeError, match="addcmul_"):
        _t(np.ones(3)).addcmul_(_t(np.ones((2, 3))), _t(np.ones(3)))


# ---------------------------------------------------------------------------
# fill_diagonal_, index_fill, index_copy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape,wrap", [((7, 3), True), ((7, 3), False), ((3, 5), True), ((4, 4), False)])
def test_fill_diagonal_matches_numpy(shape, wrap):
    a = RNG.normal(size=shape)
    ref = a.copy()
    np.fill_diagonal(ref, 5.0, wrap=wrap)
    _check_inplace("fill_diagonal_", _t(a), 5.0, wrap=wrap, ref=ref)


def test_fill_diagonal_cube_and_errors():
    a = np.zeros((3, 3, 3))
    ref = a.copy()
    np.fill_diagonal(ref, 2.0)
    _check_inplace("fill_diagonal_", _t(a), 2, ref=ref)
    with pytest.raises(RuntimeError, match="fill_diagonal_.*equal length"):
        fg.zeros(3, 4, 3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="fill_diagonal_.*2 dimensions"):
        fg.zeros(3).fill_diagonal_(1)
    # autograd: the filled entries get no gradient
    x = _t(RNG.normal(size=(3, 3)), grad=True)
    y = x * 1
    y.fill_diagonal_(0.0)
    y.sum().backward()
    _close(x.grad, 1 - np.eye(3))


@pytest.mark.covers("torch.Tensor.index_fill_")
def test_index_fill_and_inplace():
    a = RNG.normal(size=(3, 4))
    ref = a.copy()
    ref[:, [3, 0]] = 2.5
    _close(fg.index_fill(_t(a), 1, fg.tensor([-1, 0]), 2.5), ref)
    _check_inplace("index_fill_", _t(a), 1, fg.tensor([-1, 0]), 2.5, ref=ref)
    ref0 = a.copy()
    ref0[1] = -1
    _close(_t(a).index_fill(0, fg.tensor(1), fg.tensor(-1.0)), ref0)
    x = _t(a, grad=True)
    assert gradcheck(lambda t: t.index_fill(1, fg.tensor([2]), 0.0), (x,))
    with pytest.raises(IndexError, match="index_fill.*out of bounds"):
        _t(a).index_fill(1, fg.tensor([4]), 0.0)
    with pytest.raises(IndexError, match="index_fill.*integer"):
        _t(a).index_fill(1, fg.tensor([1.0]), 0.0)
    with pytest.raises(IndexError, match="index_fill.*dim 2"):
        _t(a).index_fill(2, fg.tensor([1]), 0.0)


@pytest.mark.covers("torch.Tensor.index_copy_")
def test_index_copy_and_inplace():
    a, s = RNG.normal(size=(4, 3)), RNG.normal(size=(2, 3))
    ref = a.copy()
    ref[[3, 1]] = s
    _close(fg.index_copy(_t(a), 0, fg.tensor([3, 1]), _t(s)), ref)
    _check_inplace("index_copy_", _t(a), 0, fg.tensor([3, 1]), _t(s), ref=ref)
    col = RNG.normal(size=(4, 1))
    refc = a.copy()
    refc[:, [2]] = col
    _close(_t(a).index_copy(1, fg.tensor([2]), _t(col)), refc)
    x, src = _t(a, grad=True), _t(s, grad=True)
    assert gradcheck(lambda t, u: t.index_copy(0, fg.tensor([3, 1]), u), (x, src))
    with pytest.raises(IndexError, match="index_copy.*out of bounds"):
        _t(a).index_copy(0, fg.tensor([-1, 1]), _t(s))
    with pytest.raises(RuntimeError, match="index_copy.*source shape"):
        _t(a).index_copy(0, fg.tensor([1]), _t(s))
    with pytest.raises(RuntimeError, match="index_copy.*dtype"):
        _t(a).index_copy(0, fg.tensor([3, 1]), _t(s, fg.float32))


# ---------------------------------------------------------------------------
# In-place comparisons, logical ops, triangles, cumulative ops, remainder
# ---------------------------------------------------------------------------


CMP = {"lt_": np.less, "gt_": np.greater, "le_": np.less_equal, "ge_": np.greater_equal}
CMP.update({"eq_": np.equal, "ne_": np.not_equal, "less_": np.less, "greater_equal_": np.greater_equal})
CMP.update({"greater_": np.greater, "less_equal_": np.less_equal, "not_equal_": np.not_equal})


@pytest.mark.covers(
    "torch.Tensor.lt_",
    "torch.Tensor.gt_",
    "torch.Tensor.le_",
    "torch.Tensor.ge_",
    "torch.Tensor.eq_",
    "torch.Tensor.ne_",
    "torch.Tensor.greater_",
    "torch.Tensor.greater_equal_",
    "torch.Tensor.less_",
    "torch.Tensor.less_equal_",
    "torch.Tensor.not_equal_",
)
@pytest.mark.parametrize("name", sorted(CMP))
def test_inplace_comparisons_keep_dtype(name):
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    b = np.array([2.0, 2.0, 2.0])
    _check_inplace(name, _t(a), _t(b), ref=CMP[name](a, b).astype(np.float64))
    x = fg.tensor([1, 2, 3])
    assert getattr(x, name)(2) is x and x.dtype == fg.int64
    assert x.tolist() == CMP[name](np.array([1, 2, 3]), 2).astype(np.int64).tolist()


@pytest.mark.covers(
    "torch.Tensor.logical_and_",
    "torch.Tensor.logical_or_",
    "torch.Tensor.logical_xor_",
    "torch.Tensor.tril_",
    "torch.Tensor.triu_",
    "torch.Tensor.cumsum_",
    "torch.Tensor.cumprod_",
    "torch.Tensor.remainder_",
)
def test_inplace_logical_tri_cum_remainder():
    a = np.array([[0.0, 1.5, -2.0], [3.0, 0.0, 1.0], [2.0, 2.0, 0.5]])
    b = np.array([1.0, 0.0, 1.0])
    _check_inplace("logical_and_", _t(a), _t(b), ref=np.logical_and(a, b).astype(float))
    _check_inplace("logical_or_", _t(a), _t(b), ref=np.logical_or(a, b).astype(float))
    _check_inplace("logical_xor_", _t(a), _t(b), ref=np.logical_xor(a, b).astype(float))
    _check_inplace("tril_", _t(a), -1, ref=np.tril(a, -1))
    _check_inplace("triu_", _t(a), 1, ref=np.triu(a, 1))
    _check_inplace("cumsum_", _t(a), 1, ref=np.cumsum(a, 1))
    _check_inplace("cumprod_", _t(a), 0, ref=np.cumprod(a, 0))
    _check_inplace("remainder_", _t(a), 1.5, ref=np.mod(a, 1.5))
    i = fg.tensor([1, 2, 3], dtype=fg.int32)
    assert i.cumsum_(0) is i and i.dtype == fg.int32 and i.tolist() == [1, 3, 6]
    with pytest.raises(RuntimeError, match="cumsum_.*dtype"):
        _t(a).cumsum_(0, dtype=fg.float32)
    with pytest.raises(TypeError, match="can't be cast"):
        fg.tensor([1, 2]).remainder_(1.5)
    x = _t(a, grad=True)
    assert gradcheck(lambda t: (t * 1).cumprod_(1), (x,))
    assert gradcheck(lambda t: (t * 1).tril_(), (x,))


# ---------------------------------------------------------------------------
# In-place shape ops
# ---------------------------------------------------------------------------


@pytest.mark.covers("torch.Tensor.transpose_", "torch.Tensor.swapdims_", "torch.Tensor.swapaxes_")
def test_inplace_shape_ops_rebind_view_metadata():
    base = fg.arange(6.0).reshape(1, 2, 3)
    x = base.clone()
    assert x.squeeze_(0) is x and tuple(x.shape) == (2, 3)
    assert x.unsqueeze_(-1) is x and tuple(x.shape) == (2, 3, 1)
    assert x.squeeze_() is x and tuple(x.shape) == (2, 3)
    assert x.t_() is x and tuple(x.shape) == (3, 2)
    np.testing.assert_array_equal(_np(x), np.arange(6.0).reshape(2, 3).T)
    for name in ("transpose_", "swapdims_", "swapaxes_"):
        y = fg.arange(24.0).reshape(2, 3, 4)
        assert getattr(y, name)(0, 2) is y and tuple(y.shape) == (4, 3, 2)
        np.testing.assert_array_equal(_np(y), np.arange(24.0).reshape(2, 3, 4).transpose(2, 1, 0))
    # still a view of the same storage: writes show through
    y = base.clone()
    z = y[0]
    z.t_()
    z[0, 1] = 100.0
    assert y[0, 1, 0].item() == 100.0
    with pytest.raises(RuntimeError, match="squeeze_.*requires grad"):
        fg.zeros(1, 3, requires_grad=True).squeeze_()
    nonleaf = fg.zeros(3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="unsqueeze_.*requires grad"), fg.no_grad():
        nonleaf.unsqueeze_(0)
    leaf = fg.zeros(1, 3, requires_grad=True)
    with fg.no_grad():
        assert leaf.squeeze_() is leaf and tuple(leaf.shape) == (3,) and leaf.requires_grad
    with pytest.raises(IndexError):
        fg.zeros(2, 3).transpose_(0, 5)


# ---------------------------------------------------------------------------
# Method aliases
# ---------------------------------------------------------------------------


@pytest.mark.covers(
    "torch.Tensor.divide_",
    "torch.Tensor.multiply_",
    "torch.Tensor.subtract_",
    "torch.Tensor.true_divide_",
    "torch.Tensor.arctan2_",
    "torch.Tensor.negative_",
    "torch.Tensor.absolute_",
    "torch.Tensor.fix_",
    "torch.Tensor.sgn_",
)
def test_method_aliases():
    a, b = RNG.normal(size=(2, 3)), RNG.uniform(0.5, 2, size=(3,))
    x, y = _t(a), _t(b)
    _close(x.divide(y), a / b)
    _close(x.divide(y, rounding_mode="floor"), np.floor(a / b))
    _close(x.true_divide(y), a / b)
    _close(x.multiply(y), a * b)
    _close(x.subtract(y, alpha=2), a - 2 * b)
    _close(x.negative(), -a)
    assert x.positive() is x
    _close(x.absolute(), np.abs(a))
    _close(x.arctan2(y), np.arctan2(a, b))
    _close(x.fix(), np.trunc(a))
    _close(x.sgn(), np.sign(a))
    _close(x.greater(0), a > 0)
    _close(x.greater_equal(y), a >= b)
    _close(x.less(y), a < b)
    _close(x.less_equal(0), a <= 0)
    _close(x.not_equal(x), np.zeros_like(a))
    _close(_t(np.ones((2, 3, 4))).swapdims(0, 2), np.ones((4, 3, 2)))
    for name, ref in [
        ("divide_", a / b),
        ("multiply_", a * b),
        ("subtract_", a - b),
        ("true_divide_", a / b),
        ("arctan2_", np.arctan2(a, b)),
    ]:
        _check_inplace(name, x, y, ref=ref)
    for name, ref in [
        ("negative_", -a),
        ("absolute_", np.abs(a)),
        ("fix_", np.trunc(a)),
        ("sgn_", np.sign(a)),
    ]:
        _check_inplace(name, x, ref=ref)
    with pytest.raises(RuntimeError, match="positive.*bool"):
        fg.tensor([True]).positive()


def test_shape_queries_and_sum_to_size():
    x = fg.zeros(2, 3)
    assert x.ndimension() == 2 and fg.zeros(()).ndimension() == 0
    assert x.is_signed() and fg.tensor([1]).is_signed()
    assert not fg.tensor([True]).is_signed() and not fg.tensor([1], dtype=fg.uint8).is_signed()
    assert fg.tensor([[1.5]]).is_nonzero() and not fg.tensor(0).is_nonzero()
    with pytest.raises(RuntimeError, match="is_nonzero.*ambiguous"):
        fg.tensor([1.0, 2.0]).is_nonzero()
    with pytest.raises(RuntimeError, match="is_nonzero"):
        fg.tensor([]).is_nonzero()
    assert x.is_same_size(fg.ones(2, 3)) and not x.is_same_size(fg.ones(3, 2))
    a = RNG.normal(size=(2, 3, 4))
    _close(_t(a).sum_to_size(3, 1), a.sum(0).sum(1, keepdims=True))
    _close(_t(a).sum_to_size((1, 1, 4)), a.sum((0, 1), keepdims=True))
    _close(_t(a).sum_to_size(4), a.sum((0, 1)))
    with pytest.raises(RuntimeError, match="sum_to_size.*not expandable"):
        _t(a).sum_to_size(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="sum_to_size.*not expandable"):
        _t(a).sum_to_size(2, 4)
    assert gradcheck(lambda t: t.sum_to_size(3, 1), (_t(a, grad=True),))


# ---------------------------------------------------------------------------
# Splitting
# ---------------------------------------------------------------------------


def _parts(ts):
    return [_np(t).tolist() for t in ts]


@pytest.mark.parametrize("ios", [3, 1, 9, [2, -1, 10], [], [4, 2]])
def test_tensor_split_matches_array_split(ios):
    a = np.arange(14.0).reshape(7, 2)
    want = [p.tolist() for p in np.array_split(a, ios, axis=0)]
    assert _parts(fg.tensor_split(_t(a), ios)) == want
    assert _parts(_t(a.T.copy()).tensor_split(ios, dim=1)) == [p.T.tolist() for p in np.array_split(a, ios)]
    t = fg.tensor(ios) if isinstance(ios, int) else fg.tensor(ios, dtype=fg.int64)
    assert _parts(fg.tensor_split(_t(a), t)) == want


@pytest.mark.covers(
    "torch.hsplit",
    "torch.vsplit",
    "torch.dsplit",
    "torch.Tensor.hsplit",
    "torch.Tensor.vsplit",
    "torch.Tensor.dsplit",
)
def test_hsplit_vsplit_dsplit():
    a = np.arange(48.0).reshape(2, 4, 6)
    for name in ("hsplit", "vsplit", "dsplit"):
        for ios in (2, [1, 3]):
            want = [p.tolist() for p in getattr(np, name)(a, ios)]
            assert _parts(getattr(fg, name)(_t(a), ios)) == want, (name, ios)
            assert _parts(getattr(_t(a), name)(ios)) == want, (name, ios)
    assert _parts(fg.hsplit(_t(np.arange(6.0)), 3)) == [p.tolist() for p in np.hsplit(np.arange(6.0), 3)]
    with pytest.raises(RuntimeError, match="hsplit.*divisible"):
        fg.hsplit(fg.arange(7), 2)
    with pytest.raises(RuntimeError, match="dsplit.*3 dimension"):
        fg.dsplit(fg.zeros(2, 2), 2)
    with pytest.raises(RuntimeError, match="tensor_split.*larger than 0"):
        fg.tensor_split(fg.zeros(3), 0)
    x = _t(a, grad=True)
    assert gradcheck(lambda t: fg.tensor_split(t, [1, 4], dim=2)[1] * 2, (x,))


# ---------------------------------------------------------------------------
# Random initialisers
# ---------------------------------------------------------------------------

N = 40_000


def _draw(name, *args, dtype=fg.float64, **kw):
    x = fg.zeros(N, dtype=dtype)
    assert getattr(x, name)(*args, **kw) is x
    return _np(x)


def _moments(v, mean, var, k=6.0):
    """Sample mean within ``k`` standard errors of ``mean`` and variance within 10%."""
    assert abs(v.mean() - mean) < k * math.sqrt(var / len(v)), (v.mean(), mean)
    assert abs(v.var() - var) < 0.1 * var, (v.var(), var)


@pytest.mark.covers(
    "torch.Tensor.random_",
    "torch.Tensor.exponential_",
    "torch.Tensor.geometric_",
    "torch.Tensor.log_normal_",
    "torch.Tensor.cauchy_",
)
def test_random_initialisers_distributions():
    fg.manual_seed(1234)
    v = _draw("exponential_", 2.0)
    assert v.min() >= 0
    _moments(v, 0.5, 0.25)
    v = _draw("geometric_", 0.3)
    assert v.min() >= 1 and np.all(v == np.round(v))
    _moments(v, 1 / 0.3, 0.7 / 0.09)
    assert abs((v == 1).mean() - 0.3) < 0.02
    v = np.log(_draw("log_normal_", 0.5, 0.25))
    _moments(v, 0.5, 0.0625)
    v = _draw("cauchy_", 1.0, 2.0)
    # the Cauchy distribution has no moments: check its median and quartiles (1 -+ 2)
    np.testing.assert_allclose(np.percentile(v, [25, 50, 75]), [-1.0, 1.0, 3.0], atol=0.12)
    v = _draw("random_", 3, 8)
    assert set(np.unique(v)) == {3, 4, 5, 6, 7}
    _moments(v, 5.0, 2.0)
    v = _draw("random_", 4, dtype=fg.int32)
    assert set(np.unique(v)) == {0, 1, 2, 3}
    v = _draw("random_", dtype=fg.float32)
    assert v.min() >= 0 and v.max() <= 2**24 and v.mean() > 2**22
    v = _draw("random_", dtype=fg.int8)
    assert v.min() >= 0 and v.max() <= 127 and v.max() > 120
    assert set(np.unique(_draw("random_", dtype=fg.bool))) == {0.0, 1.0}


def test_random_initialisers_seeded_and_errors():
    for name, args in [
        ("exponential_", ()),
        ("geometric_", (0.5,)),
        ("log_normal_", ()),
        ("cauchy_", ()),
        ("random_", (0, 100)),
    ]:
        fg.manual_seed(7)
        a = getattr(fg.zeros(50, dtype=fg.float64), name)(*args)
        fg.manual_seed(7)
        b = getattr(fg.zeros(50, dtype=fg.float64), name)(*args)
        assert a.tolist() == b.tolist(), name
        g1, g2 = fg.Generator().manual_seed(3), fg.Generator().manual_seed(3)
        c = getattr(fg.zeros(50, dtype=fg.float64), name)(*args, generator=g1)
        d = getattr(fg.zeros(50, dtype=fg.float64), name)(*args, generator=g2)
        assert c.tolist() == d.tolist() and c.tolist() != a.tolist(), name
    with pytest.raises(RuntimeError, match="exponential_.*floating"):
        fg.zeros(3, dtype=fg.int64).exponential_()
    with pytest.raises(RuntimeError, match="exponential_.*lambd"):
        fg.zeros(3).exponential_(-1.0)
    with pytest.raises(RuntimeError, match="geometric_.*p"):
        fg.zeros(3).geometric_(1.5)
    with pytest.raises(RuntimeError, match="random_.*out of the range"):
        fg.zeros(3, dtype=fg.int8).random_(-5, 200)
    with pytest.raises(RuntimeError, match="random_.*from"):
        fg.zeros(3).random_(5, 5)
    assert fg.zeros(3, dtype=fg.int64).geometric_(0.5).dtype == fg.int64


# ---------------------------------------------------------------------------
# Math
# ---------------------------------------------------------------------------


def test_products_and_norms():
    m, u, v = RNG.normal(size=(3, 4)), RNG.normal(size=3), RNG.normal(size=4)
    _close(fg.addr(_t(m), _t(u), _t(v), beta=0.5, alpha=2), 0.5 * m + 2 * np.outer(u, v))
    _close(fg.addr(_t(np.full((3, 4), np.nan)), _t(u), _t(v), beta=0), np.outer(u, v))
    _close(_t(u).ger(_t(v)), np.outer(u, v))
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(5, 4))
    _close(fg.inner(_t(a), _t(b)), np.inner(a, b))
    _close(_t(a).inner(_t(np.array(2.0))), 2 * a)
    for p in (2, 1, 3.5, math.inf, 0):
        want = np.linalg.norm((a - b[:3]).ravel(), ord=p) if p else np.count_nonzero(a - b[:3])
        _close(fg.dist(_t(a), _t(b[:3]), p), want, 1e-10)
    _close(fg.vdot(_t(u), _t(u)), u @ u)
    _close(fg.diagflat(_t(m[:2, :2]), 1), np.diagflat(m[:2, :2], 1))
    _close(fg.chain_matmul(_t(m.T.copy()), _t(m), _t(b.T.copy())), m.T @ m @ b.T, 1e-10)
    assert gradcheck(
        lambda x, y, z: fg.addr(x, y, z, beta=0.5, alpha=2),
        (_t(m, grad=True), _t(u, grad=True), _t(v, grad=True)),
    )
    assert gradcheck(lambda x, y: fg.inner(x, y), (_t(a, grad=True), _t(b, grad=True)))
    assert gradcheck(lambda x, y: fg.dist(x, y, 3), (_t(u, grad=True), _t(u[::-1].copy(), grad=True)))
    with pytest.raises(RuntimeError, match="addr.*alpha"):
        fg.addr(fg.zeros(2, 2, dtype=fg.int64), fg.tensor([1, 2]), fg.tensor([1, 2]), alpha=0.5)
    with pytest.raises(RuntimeError, match="inner.*last dimensions"):
        fg.inner(_t(a), _t(u))
    with pytest.raises(RuntimeError, match="dist.*floating"):
        fg.dist(fg.tensor([1, 2]), fg.tensor([3, 3]))
    with pytest.raises(RuntimeError, match="ger.*1-d"):
        fg.ger(_t(m), _t(v))
    with pytest.raises(RuntimeError, match="chain_matmul.*2-d"):
        fg.chain_matmul(_t(m), _t(u))


@pytest.mark.covers("torch.lcm", "torch.Tensor.float_power_", "torch.Tensor.lcm_", "torch.Tensor.ldexp_")
def test_float_power_gcd_lcm_ldexp_frexp():
    a = fg.tensor([1, 2, 3], dtype=fg.int32)
    out = fg.float_power(a, 0.5)
    assert out.dtype == fg.float64
    _close(out, np.sqrt([1, 2, 3]))
    _close(fg.float_power(2, _t([1.0, 3.0], fg.float32)), [2.0, 8.0])
    _check_inplace("float_power_", _t([1.0, 4.0]), 1.5, ref=[1.0, 8.0])
    with pytest.raises(RuntimeError, match="float_power_.*float64"):
        fg.zeros(3).float_power_(2)
    x, y = RNG.integers(-60, 60, size=50), RNG.integers(-60, 60, size=50)
    x[:3], y[:3] = 0, [0, 5, 0]
    assert fg.gcd(fg.tensor(x), fg.tensor(y)).tolist() == np.gcd(x, y).tolist()
    assert fg.tensor(x).lcm(fg.tensor(y)).tolist() == np.lcm(x, y).tolist()
    t = fg.tensor(x)
    assert t.gcd_(fg.tensor(y)) is t and t.tolist() == np.gcd(x, y).tolist()
    with pytest.raises(RuntimeError, match="gcd.*integer"):
        fg.gcd(fg.tensor([1.0]), fg.tensor([2.0]))
    m, e = RNG.normal(size=6), RNG.integers(-5, 5, size=6)
    _close(fg.ldexp(_t(m), fg.tensor(e)), np.ldexp(m, e))
    assert fg.ldexp(fg.tensor([1, 2]), fg.tensor([1, 2])).dtype == fg.float32
    _check_inplace("ldexp_", _t(m), fg.tensor(e), ref=np.ldexp(m, e))
    vals = np.array([0.0, 1.0, -3.0, 0.1, 1e-300, 2.0**-1074, 1e300, np.inf, -np.inf, np.nan, 0.5, 4.0])
    mant, ex = fg.frexp(_t(vals))
    nm, ne = np.frexp(vals)
    np.testing.assert_array_equal(_np(mant), nm)
    assert ex.dtype == fg.int32 and ex.tolist() == ne.tolist()
    v32 = np.array([1e-40, 3.0, 1.5e38], np.float32)
    mant, ex = _t(v32, fg.float32).frexp()
    nm, ne = np.frexp(v32)
    assert mant.dtype == fg.float32 and _np(mant).tolist() == nm.astype(np.float64).tolist()
    assert ex.tolist() == ne.tolist()
    with pytest.raises(RuntimeError, match="frexp.*floating"):
        fg.frexp(fg.tensor([1]))


@pytest.mark.covers("torch.isneginf", "torch.Tensor.xlogy_")
def test_xlogy_inplace_and_predicates():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([0.0, 3.0, 0.5])
    from scipy.special import xlogy

    _check_inplace("xlogy_", _t(a), _t(b), ref=xlogy(a, b))
    v = _t([1.0, np.inf, -np.inf, np.nan])
    assert fg.isposinf(v).tolist() == [False, True, False, False]
    assert v.isneginf().tolist() == [False, False, True, False]
    assert fg.isposinf(fg.tensor([1, 2])).tolist() == [False, False]
    assert fg.isreal(v).tolist() == [True] * 4


def test_cov_corrcoef():
    x = RNG.normal(size=(3, 8))
    fw = RNG.integers(0, 4, size=8)
    aw = RNG.uniform(0.1, 2, size=8)
    _close(fg.cov(_t(x)), np.cov(x), 1e-10)
    _close(_t(x).cov(correction=0), np.cov(x, ddof=0), 1e-10)
    _close(fg.cov(_t(x), fweights=fg.tensor(fw), aweights=_t(aw)), np.cov(x, fweights=fw, aweights=aw), 1e-10)
    _close(fg.cov(_t(x), aweights=_t(aw), correction=0), np.cov(x, aweights=aw, ddof=0), 1e-10)
    c1 = fg.cov(_t(x[0]))
    assert c1.dim() == 0
    _close(c1, np.cov(x[0]), 1e-10)
    _close(fg.corrcoef(_t(x)), np.corrcoef(x), 1e-10)
    one_row = fg.cov(fg.tensor([[1, 2, 4]]))
    assert one_row.dim() == 0 and one_row.dtype == fg.float32
    _close(one_row, np.cov([1, 2, 4]), 1e-6)
    assert gradcheck(lambda t: fg.corrcoef(t), (_t(x, grad=True),))
    with pytest.raises(RuntimeError, match="cov.*fweights.*integral"):
        fg.cov(_t(x), fweights=_t(aw))
    with pytest.raises(RuntimeError, match="cov.*negative"):
        fg.cov(_t(x), aweights=_t(-aw))
    with pytest.raises(RuntimeError, match="cov.*two or fewer"):
        fg.cov(fg.zeros(2, 2, 2))


@pytest.mark.covers("torch.Tensor.renorm_")
def test_renorm():
    x = RNG.normal(size=(4, 3, 2))
    for p, dim, maxnorm in [(2, 0, 1.0), (1, 1, 2.0), (3.0, -1, 0.5)]:
        moved = np.moveaxis(x, dim, 0).reshape(x.shape[dim], -1)
        norms = np.sum(np.abs(moved) ** p, axis=1) ** (1 / p)
        scale = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
        shape = [1] * 3
        shape[dim] = -1
        ref = x * scale.reshape(shape)
        _close(fg.renorm(_t(x), p, dim, maxnorm), ref, 1e-10)
        _check_inplace("renorm_", _t(x), p, dim, maxnorm, ref=ref, tol=1e-10)
    assert gradcheck(lambda t: t.renorm(2, 0, 1.0), (_t(x, grad=True),))
    with pytest.raises(RuntimeError, match="renorm.*2 dimensions"):
        fg.renorm(fg.zeros(3), 2, 0, 1.0)


def test_histogram_matches_numpy():
    x = RNG.normal(size=(4, 50))
    w = RNG.uniform(0, 2, size=(4, 50))
    for kw in [{"bins": 7}, {"bins": 5, "range": (-1.0, 2.0)}, {"bins": 6, "density": True}]:
        h, e = fg.histogram(_t(x), **kw)
        nh, ne = np.histogram(x, **kw)
        _close(h, nh, 1e-10)
        _close(e, ne, 1e-12)
        h, e = _t(x).histogram(**kw, weight=_t(w))
        nh, ne = np.histogram(x, **kw, weights=w)
        _close(h, nh, 1e-10)
    edges = np.array([-3.0, -0.5, 0.0, 0.25, 3.0])
    h, e = fg.histogram(_t(x), _t(edges), weight=_t(w), density=True)
    _close(h, np.histogram(x, edges, weights=w, density=True)[0], 1e-10)
    h, e = fg.histogram(_t([2.0, 2.0, 2.0]), bins=4)
    _close(e, [1.5, 1.75, 2.0, 2.25, 2.5])
    _close(h, [0, 0, 3, 0])
    with pytest.raises(RuntimeError, match="histogram.*floating"):
        fg.histogram(fg.tensor([1, 2]), bins=2)
    with pytest.raises(RuntimeError, match="histogram.*min should not exceed max"):
        fg.histogram(_t(x), bins=2, range=(3.0, 1.0))
    with pytest.raises(RuntimeError, match="histogram.*increase"):
        fg.histogram(_t(x), _t([3.0, 1.0]))


def test_trapezoid_family_and_unravel_index():
    y, x = RNG.normal(size=(3, 6)), np.sort(RNG.uniform(0, 5, size=6))
    _close(fg.trapezoid(_t(y)), np.trapezoid(y), 1e-12)
    _close(fg.trapz(_t(y), _t(x)), np.trapezoid(y, x), 1e-12)
    _close(fg.trapezoid(_t(y), dx=0.5, dim=0), np.trapezoid(y, dx=0.5, axis=0), 1e-12)
    from scipy.integrate import cumulative_trapezoid

    _close(fg.cumulative_trapezoid(_t(y), _t(x)), cumulative_trapezoid(y, x), 1e-12)
    _close(fg.cumulative_trapezoid(_t(y), dx=2.0, dim=0), cumulative_trapezoid(y, dx=2.0, axis=0), 1e-12)
    assert fg.trapezoid(fg.tensor([1, 2, 4])).item() == 4.5
    assert gradcheck(lambda a, b: fg.trapezoid(a, b), (_t(y, grad=True), _t(x, grad=True)))
    idx = RNG.integers(0, 60, size=(2, 5))
    got = fg.unravel_index(fg.tensor(idx), (3, 4, 5))
    want = np.unravel_index(idx, (3, 4, 5))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert [g.item() for g in fg.unravel_index(fg.tensor(-1), (2, 3))] == [1, 2]
    with pytest.raises(RuntimeError, match="unravel_index.*out of bounds"):
        fg.unravel_index(fg.tensor([6]), (2, 3))
    with pytest.raises(TypeError, match="unravel_index.*integer"):
        fg.unravel_index(fg.tensor([1.0]), (2, 3))


# ---------------------------------------------------------------------------
# Linear-algebra methods
# ---------------------------------------------------------------------------


def test_linalg_methods():
    a = RNG.normal(size=(2, 4, 4)) + 4 * np.eye(4)
    spd = a @ np.swapaxes(a, -1, -2) + np.eye(4)
    t = _t(a)
    _close(t.det(), np.linalg.det(a), 1e-10)
    sign, logabs = t.slogdet()
    ns, nl = np.linalg.slogdet(a)
    _close(sign, ns, 1e-10)
    _close(logabs, nl, 1e-10)
    _close(_t(spd).logdet(), np.linalg.slogdet(spd)[1], 1e-10)
    _close(t.inverse(), np.linalg.inv(a), 1e-10)
    r = RNG.normal(size=(5, 3))
    _close(_t(r).pinverse(), np.linalg.pinv(r), 1e-10)
    _close(fg.pinverse(_t(r)), np.linalg.pinv(r), 1e-10)
    _close(t.matrix_power(3), np.linalg.matrix_power(a, 3), 1e-9)
    from scipy.linalg import expm

    s = RNG.normal(size=(3, 3))
    _close(_t(s).matrix_exp(), expm(s), 1e-10)
    _close(fg.matrix_exp(_t(s)), expm(s), 1e-10)
    low = np.linalg.cholesky(spd)
    _close(_t(spd).cholesky(), low, 1e-10)
    _close(_t(spd).cholesky(upper=True), np.swapaxes(low, -1, -2), 1e-10)
    q, rr = _t(r).qr()
    _close(fg.matmul(q, rr), r, 1e-10)
    assert tuple(q.shape) == (5, 3)
    q, rr = _t(r).qr(some=False)
    assert tuple(q.shape) == (5, 5) and tuple(rr.shape) == (5, 3)
    u, sv, v = _t(r).svd()
    assert tuple(u.shape) == (5, 3) and tuple(v.shape) == (3, 3)
    _close(sv, np.linalg.svd(r, compute_uv=False), 1e-10)
    _close(fg.matmul(u * sv, v.transpose(0, 1)), r, 1e-10)  # V, not Vh
    u, sv, v = _t(r).svd(some=False)
    assert tuple(u.shape) == (5, 5)
    u, sv, v = _t(r).svd(compute_uv=False)
    assert tuple(u.shape) == (5, 5) and tuple(v.shape) == (3, 3)
    assert not u.abs().sum().item() and not v.abs().sum().item()
    _close(sv, np.linalg.svd(r, compute_uv=False), 1e-10)
    _close(_t(r).H, r.T)
    _close(_t(r).mH, r.T)
    _close(t.mH, np.swapaxes(a, -1, -2))
    _close(t.adjoint(), np.swapaxes(a, -1, -2))
    with pytest.raises(RuntimeError, match="H.*2-D"):
        _ = t.H
    with pytest.raises(RuntimeError, match="mH.*matrices"):
        _ = _t(np.ones(3)).mH
    with pytest.raises(RuntimeError, match="adjoint.*2 dimensions"):
        _t(np.ones(3)).adjoint()


# ---------------------------------------------------------------------------
# Captured graphs and the WebGPU device
# ---------------------------------------------------------------------------


def _optimizer_step(p, g, v):
    q = p.clone()
    q.addcdiv_(g, v.sqrt() + 1e-8, value=-0.1)
    q.addcmul_(g, g, value=0.5)
    r = q.clone()
    r.lt_(0.3)
    idx = fg.tensor([1, 0])
    out = q.tensor_split(2, dim=1)[0] + r[:, :2] + fg.cov(p).sum()
    out = out + fg.index_fill(p, 0, idx, 2.0)[:, :2] + fg.index_copy(p, 1, idx, g[:, :2].contiguous())[:, :2]
    return out + fg.unravel_index(fg.tensor([5]), (2, 3))[1]


def test_compiled_matches_eager():
    a, b, c = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4)), RNG.uniform(1, 2, size=(3, 4))
    ts = (_t(a, fg.float32), _t(b, fg.float32), _t(c, fg.float32))
    step = fg.compile(_optimizer_step)
    for _ in range(2):
        got = step(*ts)
    np.testing.assert_allclose(_np(got), _np(_optimizer_step(*ts)), rtol=1e-6, atol=1e-6)
    i, j = RNG.integers(-(10**6), 10**6, size=40), RNG.integers(-(10**6), 10**6, size=40)
    gcd = fg.compile(lambda x, y: fg.gcd(x, y))
    assert gcd(fg.tensor(i), fg.tensor(j)).tolist() == np.gcd(i, j).tolist()


def test_gpu_matches_numpy():
    if not fg.gpu.is_available():
        pytest.skip(f"no GPU adapter: {fg.gpu.unavailable_reason()}")
    a, b, c = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4)), RNG.uniform(1, 2, size=(3, 4))
    g = [_t(x, fg.float32).to("gpu") for x in (a, b, c)]
    q = g[0].clone()
    assert q.addcmul_(g[1], g[2], value=2) is q and str(q.device) == "gpu"
    _close(q.cpu(), a + 2 * b * c, 1e-5)
    _close(fg.addcdiv(*g).cpu(), a + b / c, 1e-5)
    ref = a.copy()
    np.fill_diagonal(ref, 3.0)
    _close(g[0].clone().fill_diagonal_(3.0).cpu(), ref, 1e-6)
    _close(g[0].clone().gt_(0.0).cpu(), (a > 0).astype(float))
    ref = a.copy()
    ref[:, [2]] = 7.0
    _close(fg.index_fill(g[0], 1, fg.tensor([2]).to("gpu"), 7.0).cpu(), ref, 1e-6)
    _close(fg.cov(g[0]).cpu(), np.cov(a), 1e-5)
    _close(fg.cumulative_trapezoid(g[0]).cpu(), np.cumsum((a[:, 1:] + a[:, :-1]) / 2, axis=1), 1e-5)
    fg.manual_seed(5)
    e = fg.zeros(4000, device="gpu").exponential_(2.0)
    assert str(e.device) == "gpu" and abs(_np(e.cpu()).mean() - 0.5) < 0.05
    m, ex = fg.frexp(g[0])
    nm, ne = np.frexp(a.astype(np.float32))
    assert _np(m.cpu()).tolist() == nm.astype(np.float64).tolist() and ex.cpu().tolist() == ne.tolist()


# ---------------------------------------------------------------------------
# Stored PyTorch references
# ---------------------------------------------------------------------------


def test_matches_stored_pytorch_values():
    spec = importlib.util.spec_from_file_location(
        "make_surface_math_references", ROOT / "scripts" / "make_surface_math_references.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ref = np.load(PARITY)
    assert str(ref["torch_version"]).startswith("2.")
    got = mod.cases(fg, lambda x: fg.tensor(x, dtype=fg.float64))
    names = set(ref.files) - {"torch_version"}
    assert names == set(got), names ^ set(got)
    for k in sorted(names):
        assert got[k].shape == ref[k].shape, k
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-9, atol=1e-9, err_msg=k)
