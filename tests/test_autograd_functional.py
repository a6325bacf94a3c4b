"""``ferrograd.autograd.functional``: jacobian, hessian, vjp, jvp, vhp, hvp against
derivatives worked out by hand in NumPy float64, with PyTorch's result structure."""

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal(4)


def f(x, y):
    """Two outputs: ``sum_j sin(x_ij) y_j`` and ``x @ y``."""
    return (fg.sin(x) * y).sum(1), x @ y


def jac_f(a, b):
    """The four Jacobian blocks ``[output][input]`` of :func:`f` at ``(a, b)``."""
    eye = np.eye(3)
    d1x = eye[:, :, None] * (np.cos(a) * b)[None, :, :]
    d1y = np.sin(a)
    d2x = eye[:, :, None] * b[None, None, :]
    return [[d1x, d1y], [d2x, a.copy()]]


def g(x):
    """A scalar: ``sum x**3 + sum x[0] * x[1]``."""
    return (x**3).sum() + (x[0] * x[1]).sum()


def hess_g(a):
    h = np.diag(6 * a.reshape(-1))
    for j in range(a.shape[1]):
        h[j, a.shape[1] + j] = h[a.shape[1] + j, j] = 1.0
    return h.reshape(*a.shape, *a.shape)


def t(x):
    return fg.tensor(x, dtype=fg.float64)


def test_jacobian_tuple_in_tuple_out():
    got = jacobian(f, (t(A), t(B)))
    want = jac_f(A, B)
    assert isinstance(got, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in got)
    for gr, wr in zip(got, want, strict=True):
        for gj, wj in zip(gr, wr, strict=True):
            assert tuple(gj.shape) == wj.shape
            np.testing.assert_allclose(gj.numpy(), wj, rtol=1e-12, atol=1e-12)
            assert not gj.requires_grad


def test_jacobian_structures_follow_inputs_and_outputs():
    x = t(A)
    one_one = jacobian(lambda x: fg.sin(x).sum(1), x)
    assert isinstance(one_one, fg.Tensor) and tuple(one_one.shape) == (3, 3, 4)
    np.testing.assert_allclose(one_one.numpy(), jac_f(A, B * 0 + 1)[0][0], rtol=1e-12)
    many_in = jacobian(lambda x, y: x @ y, (x, t(B)))
    assert isinstance(many_in, tuple) and len(many_in) == 2
    np.testing.assert_allclose(many_in[1].numpy(), A, rtol=1e-12)
    many_out = jacobian(lambda x: (x.sum(), x * 2), x)
    assert isinstance(many_out, tuple) and tuple(many_out[0].shape) == (3, 4)
    np.testing.assert_allclose(many_out[1].numpy(), 2 * np.eye(12).reshape(3, 4, 3, 4))


def test_vjp_and_jvp_match_the_jacobian():
    want = jac_f(A, B)
    u = (RNG.standard_normal(3), RNG.standard_normal(3))
    out, got = vjp(f, (t(A), t(B)), (t(u[0]), t(u[1])))
    np.testing.assert_allclose(out[1].numpy(), A @ B, rtol=1e-12)
    for j in range(2):
        ref = sum(np.tensordot(u[i], want[i][j], axes=1) for i in range(2))
        np.testing.assert_allclose(got[j].numpy(), ref, rtol=1e-12, atol=1e-12)
    v = (RNG.standard_normal((3, 4)), RNG.standard_normal(4))
    _, got = jvp(f, (t(A), t(B)), (t(v[0]), t(v[1])))
    for i in range(2):
        ref = sum(np.tensordot(want[i][j], v[j], axes=v[j].ndim) for j in range(2))
        np.testing.assert_allclose(got[i].numpy(), ref, rtol=1e-12, atol=1e-12)


def test_hessian_and_hessian_vector_products():
    x = t(A)
    h = hessian(g, x)
    np.testing.assert_allclose(h.numpy(), hess_g(A), rtol=1e-12, atol=1e-12)
    v = RNG.standard_normal((3, 4))
    hv_ref = np.tensordot(hess_g(A), v, axes=2)
    out, hv = hvp(g, x, t(v))
    np.testing.assert_allclose(out.item(), (A**3).sum() + (A[0] * A[1]).sum(), rtol=1e-12)
    np.testing.assert_allclose(hv.numpy(), hv_ref, rtol=1e-12, atol=1e-12)
    _, vh = vhp(g, x, t(v))
    np.testing.assert_allclose(vh.numpy(), hv_ref, rtol=1e-12, atol=1e-12)
    two = hessian(lambda x, y: (x * x * y).sum(), (t(B), t(B)))
    np.testing.assert_allclose(two[0][1].numpy(), np.diag(2 * B), rtol=1e-12)
    np.testing.assert_allclose(two[1][1].numpy(), np.zeros((4, 4)))


def test_create_graph_results_differentiate_again():
    x = t(A).requires_grad_(True)
    h = hessian(g, x, create_graph=True)
    assert h.requires_grad
    (d,) = fg.autograd.grad(h.sum(), [x])
    np.testing.assert_allclose(d.numpy(), np.full((3, 4), 6.0), rtol=1e-12)
    _, gv = vjp(lambda x: (x**2).sum(), x, create_graph=True)
    (d2,) = fg.autograd.grad(gv.sum(), [x])
    np.testing.assert_allclose(d2.numpy(), np.full((3, 4), 2.0), rtol=1e-12)


def test_strict_and_bad_arguments():
    x = t(B)
    zero = jacobian(lambda x, y: x * 2, (x, t(B)))
    np.testing.assert_allclose(zero[1].numpy(), np.zeros((4, 4)))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        jacobian(lambda x, y: x * 2, (x, t(B)), strict=True)
    with pytest.raises(RuntimeError, match="v may be None only"):
        vjp(lambda x: x * 2, x)
    with pytest.raises(RuntimeError, match=r"v has shape \(3,\), expected \(4,\)"):
        vjp(lambda x: x * 2, x, t(np.ones(3)))
    with pytest.raises(TypeError, match=r"inputs\[0\] must be a Tensor, got list"):
        jacobian(lambda x: x, [[1.0]])
    with pytest.raises(RuntimeError, match="single-element tensor, got shape"):
        hessian(lambda x: x * 2, x)
    out, gx = vjp(lambda x: (x * x).sum(), x)
    np.testing.assert_allclose(gx.numpy(), 2 * B, rtol=1e-12)
    assert not x.requires_grad and x.grad is None


def test_float32_matches_float64():
    want = jacobian(f, (t(A), t(B)))
    got = jacobian(f, (fg.tensor(A, dtype=fg.float32), fg.tensor(B, dtype=fg.float32)))
    for gr, wr in zip(got, want, strict=True):
        for gj, wj in zip(gr, wr, strict=True):
            assert gj.dtype == fg.float32
            np.testing.assert_allclose(gj.numpy(), wj.numpy(), rtol=1e-5, atol=1e-5)
