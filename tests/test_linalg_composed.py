"""``fg.linalg`` beyond the op table (``tests/optable/composed_surface.py`` checks every
function's values against NumPy, gradients, GPU parity and capture): ``norm``'s dispatch,
the torch-level aliases, broadcasting in ``solve``, and the errors for bad input."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest

L = fg.linalg
RNG = np.random.default_rng(7)


def T(a):
    return fg.tensor(np.asarray(a, np.float64), dtype=fg.float64)


def test_norm_dispatches_like_pytorch():
    a = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(L.norm(T(a)).item(), np.linalg.norm(a), rtol=1e-12)  # flattened 2-norm
    np.testing.assert_allclose(L.norm(T(a), math.inf).item(), np.linalg.norm(a, np.inf), rtol=1e-12)  # matrix
    np.testing.assert_allclose(L.norm(T(a), 3, dim=1).numpy(), (np.abs(a) ** 3).sum(1) ** (1 / 3), rtol=1e-12)
    np.testing.assert_allclose(L.norm(T(a), dim=(0, 1)).item(), np.linalg.norm(a), rtol=1e-12)
    np.testing.assert_allclose(L.norm(T(a[0]), 1).item(), np.abs(a[0]).sum(), rtol=1e-12)


def test_torch_level_aliases_and_solve_broadcasting():
    a = RNG.normal(size=(2, 3, 3)) + 4 * np.eye(3)
    b = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(fg.det(T(a)).numpy(), np.linalg.det(a), rtol=1e-12)
    np.testing.assert_allclose(fg.inverse(T(a)).numpy(), np.linalg.inv(a), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(L.solve(T(a), T(b)).numpy(), np.linalg.solve(a, np.broadcast_to(b, (2, 3, 2))))
    sign, logabs = fg.slogdet(T(a))
    np.testing.assert_allclose(sign.numpy() * np.exp(logabs.numpy()), np.linalg.det(a), rtol=1e-12)


def test_zero_gradient_at_a_zero_vector():
    x = fg.zeros(3, dtype=fg.float64, requires_grad=True)
    L.vector_norm(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "call, err, words",
    [
        (lambda: L.inv(T([[1.0, 2.0], [2.0, 4.0]])), RuntimeError, "singular"),
        (lambda: L.solve(T([[0.0, 0.0], [0.0, 0.0]]), T([1.0, 1.0])), RuntimeError, "singular"),
        (lambda: L.cholesky(T([[1.0, 2.0], [2.0, 1.0]])), RuntimeError, "leading minor of order 2"),
        (lambda: L.inv(T(np.ones((2, 3)))), ValueError, "square matrices"),
        (lambda: L.det(fg.ones(2, 2, dtype=fg.int64)), TypeError, "got int64"),
        (lambda: L.inv(fg.ones(2, 2, dtype=fg.float16)), TypeError, "float16"),
        (lambda: L.matrix_norm(T(np.ones((0, 2))), 2), RuntimeError, "of an empty matrix is undefined"),
        (lambda: L.vector_norm(T(np.ones(0)), math.inf), RuntimeError, "empty dimension"),
        (lambda: L.solve(T(np.eye(2)), T(np.ones(3))), ValueError, "must match A's size 2"),
        (lambda: L.multi_dot([T(np.ones((2, 3))), T(np.ones((2, 3)))]), ValueError, "cannot be multiplied"),
        (lambda: L.matrix_power(T(np.eye(2)), 1.5), TypeError, "must be an int"),
    ],
)
def test_errors_name_the_function_and_input(call, err, words):
    with pytest.raises(err) as info:
        call()
    assert words in str(info.value) and "linalg." in str(info.value)
