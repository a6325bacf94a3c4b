"""Binary ops with a Python scalar operand (the scalar carried as a value, not a 0-d tensor):
the same bits as the tensor-operand kernel, PyTorch's weak-scalar promotion, in-place
versions, and ``clip_grad_norm_``'s norms against NumPy float64."""

from __future__ import annotations

import math
import operator

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn

RNG = np.random.default_rng(41)
FLOATS = ["float32", "float64", "float16", "bfloat16"]
OPS = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.lt,
    operator.ge,
    operator.eq,
]


def _bits(t: fg.Tensor) -> np.ndarray:
    if t.dtype == fg.bfloat16:
        t = t.float()  # exact widening (NumPy has no bfloat16)
    return np.asarray(t.numpy()).copy()


@pytest.mark.parametrize("dtype", FLOATS)
def test_scalar_operand_matches_tensor_operand(dtype):
    x = fg.tensor(RNG.uniform(0.5, 3.0, (7, 5)), dtype=getattr(fg, dtype))
    xt = x.t()  # strided input
    for s in (0.1, 3, -2.5):
        st = fg.tensor(s, dtype=x.dtype)
        for op in OPS:
            for a in (x, xt):
                direct, via = op(a, s), op(a, st)
                assert direct.dtype == via.dtype, (op, dtype, s)
                np.testing.assert_array_equal(_bits(direct), _bits(via), err_msg=f"{op.__name__} {dtype} {s}")
                rdirect, rvia = op(s, a), op(st, a)
                np.testing.assert_array_equal(
                    _bits(rdirect), _bits(rvia), err_msg=f"r{op.__name__} {dtype} {s}"
                )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_operand_against_numpy(dtype):
    xn = RNG.uniform(0.5, 3.0, (33,))
    x = fg.tensor(xn, dtype=getattr(fg, dtype))
    xr = x.numpy().astype(np.float64)
    tol = 1e-6 if dtype == "float32" else 1e-13
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.pow):
        np.testing.assert_allclose(op(x, 1.7).numpy(), op(xr, 1.7), rtol=tol)
        np.testing.assert_allclose(op(1.7, x).numpy(), op(1.7, xr), rtol=tol)


def test_scalar_promotion_is_weak():
    f16 = fg.ones(3, dtype=fg.float16)
    assert (f16 * 2.5).dtype == fg.float16
    assert (f16 * 2).dtype == fg.float16
    assert (fg.ones(3, dtype=fg.float64) + 1).dtype == fg.float64
    assert (fg.arange(3) * 2.5).dtype == fg.float32
    assert (fg.arange(3) * 2).dtype == fg.int64
    assert (fg.ones(3, dtype=fg.float32) > 0.5).dtype == fg.bool
    np.testing.assert_array_equal((fg.arange(4) * 2.5).numpy(), np.arange(4) * 2.5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_inplace_scalar(dtype):
    xn = RNG.uniform(0.5, 3.0, (6, 4))
    for op, iop in ((operator.mul, "mul_"), (operator.add, "add_"), (operator.truediv, "div_")):
        a = fg.tensor(xn, dtype=getattr(fg, dtype))
        want = op(a, 0.3)
        v = a._version
        getattr(a, iop)(0.3)
        assert a._version > v
        np.testing.assert_array_equal(_bits(a), _bits(want))
    # an in-place write to a value saved for backward is still caught
    leaf = fg.tensor(xn, dtype=getattr(fg, dtype), requires_grad=True)
    y = leaf.sigmoid()
    with fg.no_grad():
        y.mul_(2.0)
    with pytest.raises(RuntimeError):
        y.sum().backward()
    with pytest.raises(RuntimeError):
        fg.ones(2, dtype=getattr(fg, dtype)).expand(3, 2).mul_(2.0)


def test_scalar_gradients_unchanged():
    xn = RNG.uniform(0.5, 2.0, (5,))
    x = fg.tensor(xn, requires_grad=True)
    (x * 3.0 + 1.0 - 2.0 / x + x**2.5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3.0 + 2.0 / xn**2 + 2.5 * xn**1.5, rtol=1e-5)


def _with_grads(arrays, dtype):
    ps = []
    for a in arrays:
        p = nn.Parameter(fg.zeros(*a.shape, dtype=dtype))
        p.grad = fg.tensor(a, dtype=dtype)
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, -math.inf, 0.0])
def test_clip_grad_norm_float32_against_float64(norm_type):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in ((300, 200), (200,), (1, 7))]
    arrays[1][::5] = 0
    flat = np.concatenate([a.ravel() for a in arrays]).astype(np.float64)
    if norm_type == math.inf:
        ref = np.abs(flat).max()
    elif norm_type == -math.inf:
        ref = np.abs(flat).min()
    elif norm_type == 0:
        ref = float(np.count_nonzero(flat))
    else:
        ref = (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    ps = _with_grads(arrays, fg.float32)
    total = nn.utils.clip_grad_norm_(ps, 0.5, norm_type=norm_type)
    assert total.dtype == fg.float32
    # PyTorch's float32 tolerance (its own foreach norms are float32 too)
    np.testing.assert_allclose(float(total), ref, rtol=1.3e-6)
    coef = min(1.0, 0.5 / (ref + 1e-6))
    for p, a in zip(ps, arrays, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), a * coef, rtol=1e-5, atol=1e-7)


def test_total_norm_mixed_dtypes():
    arrays = [RNG.standard_normal(50), RNG.standard_normal(40)]
    ts = [fg.tensor(arrays[0], dtype=fg.float16), fg.tensor(arrays[1], dtype=fg.float32)]
    ref = math.sqrt(sum(float((t.double().numpy() ** 2).sum()) for t in ts))
    assert float(nn.utils.get_total_norm(ts)) == pytest.approx(ref, rel=1e-3)
