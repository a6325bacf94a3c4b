"""``F.normalize`` against NumPy (norms, dims, ``eps``, gradients) and float64
finite-difference gradchecks of ``huber_loss`` and ``kl_div`` (both arguments,
every reduction), with their values against NumPy."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def np_normalize(x, p, dim, eps):
    return x / np.maximum(np.linalg.norm(x, ord=p, axis=dim, keepdims=True), eps)


# --------------------------------------------------------------------------- normalize

NORMS = [1, 2, 3, 0.5, math.inf, -math.inf, 0]


@pytest.mark.parametrize("p", NORMS)
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_normalize_values(p, dim, dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 5))
    a[1, 2, 3] = 0.0  # a zero in a slice counts for p = 0 and -inf
    want = np_normalize(a, p, dim, 1e-12)
    got = F.normalize(fg.tensor(a, dtype=dtype), p=p, dim=dim)
    assert got.dtype == dtype and tuple(got.shape) == a.shape
    tol = 1e-12 if dtype == fg.float64 else 2e-6
    np.testing.assert_allclose(got.double().numpy(), want, rtol=tol, atol=tol)


def test_normalize_defaults_are_p2_dim1():
    a = np.random.default_rng(2).standard_normal((2, 3, 4))
    np.testing.assert_allclose(F.normalize(t64(a, False)).numpy(), np_normalize(a, 2, 1, 1e-12), rtol=1e-12)


@pytest.mark.parametrize("p", [1, 2, math.inf])
def test_normalize_divides_by_eps_below_it(p):
    """A slice whose norm is below ``eps`` is divided by ``eps`` (zero slices stay zero)."""
    a = np.array([[1e-3, -2e-3, 2e-3], [0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
    for eps in (1e-12, 0.5, 10.0):
        got = F.normalize(t64(a, False), p=p, dim=1, eps=eps).numpy()
        np.testing.assert_allclose(got, np_normalize(a, p, 1, eps), rtol=1e-12, atol=0)
    assert (F.normalize(t64(a, False), p=p, dim=1).numpy()[1] == 0).all()


@pytest.mark.parametrize("p", [1, 2, 3, math.inf])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_normalize_gradcheck(p, dim):
    rng = np.random.default_rng(3)
    x = t64(rng.standard_normal((3, 4)) + np.sign(rng.standard_normal((3, 4))) * 0.1)
    fg.autograd.gradcheck(lambda t: F.normalize(t, p=p, dim=dim), [x])
    if p != math.inf:
        fg.autograd.gradgradcheck(lambda t: F.normalize(t, p=p, dim=dim), [x])


def test_normalize_gradcheck_with_eps_active():
    """Where the norm is below ``eps`` the slice is ``x / eps``: gradient ``g / eps``."""
    a = np.array([[0.1, -0.2, 0.3], [1.0, 2.0, -3.0]])
    x = t64(a)
    fg.autograd.gradcheck(lambda t: F.normalize(t, dim=1, eps=1.0), [x])
    F.normalize(x, dim=1, eps=1.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0], np.ones(3), rtol=1e-12)


def test_normalize_gradient_of_a_zero_slice_is_one_over_eps_not_nan():
    """As in PyTorch: a zero slice is ``x / eps``, so its gradient is ``g / eps``."""
    x = t64([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]])
    y = F.normalize(x, dim=1)
    np.testing.assert_array_equal(y.detach().numpy()[0], 0.0)
    y.sum().backward()
    g = x.grad.numpy()
    np.testing.assert_allclose(g[0], [1e12] * 3, rtol=1e-12)
    # row 1: d/dx_j sum_i x_i/|x| = 1/|x| - x_j sum_i x_i / |x|^3 with |x| = 3
    r = np.array([1.0, -2.0, 2.0])
    np.testing.assert_allclose(g[1], 1 / 3 - r * r.sum() / 27, rtol=1e-12)


def test_normalize_refuses_integers():
    with pytest.raises(TypeError):
        F.normalize(fg.tensor([[1, 2]]))


# --------------------------------------------------------------------------- huber_loss


def np_huber(x, y, delta, reduction):
    d = np.abs(x - y)
    loss = np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def _away_from(d, delta, gap=1e-3):
    """Differences nudged off the kink ``|d| = delta`` (finite differences straddle it)."""
    near = np.abs(np.abs(d) - delta) < gap
    return np.where(near, d + 4 * gap * np.sign(d), d)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0])
def test_huber_loss_gradcheck(reduction, delta):
    rng = np.random.default_rng(4)
    y = rng.standard_normal((3, 5))
    x = y + _away_from(rng.standard_normal((3, 5)) * 1.5, delta)
    xt, yt = t64(x), t64(y)
    got = F.huber_loss(xt, yt, reduction=reduction, delta=delta)
    np.testing.assert_allclose(got.detach().numpy(), np_huber(x, y, delta, reduction), rtol=1e-12)
    # both sides of the kink are exercised
    d = np.abs(x - y)
    assert (d < delta).any() and (d > delta).any()
    fg.autograd.gradcheck(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta), [xt, yt])
    fg.autograd.gradgradcheck(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta), [xt, yt])


def test_huber_loss_gradient_values():
    """Inside ``delta`` the gradient is ``d``, outside ``delta * sign(d)`` (mean: over n)."""
    x = t64([0.2, -0.3, 3.0, -4.0])
    F.huber_loss(x, t64([0.0] * 4, False), delta=1.5).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.array([0.2, -0.3, 1.5, -1.5]) / 4, rtol=1e-12)


# --------------------------------------------------------------------------- kl_div


def np_kl_div(x, t, reduction, log_target):
    if log_target:
        loss = np.exp(t) * (t - x)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1.0)) - x), 0.0)
    if reduction == "batchmean":
        return loss.sum() / x.shape[0]
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def _log_softmax(a):
    a = a - a.max(-1, keepdims=True)
    return a - np.log(np.exp(a).sum(-1, keepdims=True))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_gradcheck(reduction, log_target):
    rng = np.random.default_rng(5)
    x = _log_softmax(rng.standard_normal((3, 4)))
    lt = _log_softmax(rng.standard_normal((3, 4)))
    t = lt if log_target else np.exp(lt)
    xt, tt = t64(x), t64(t)
    got = F.kl_div(xt, tt, reduction=reduction, log_target=log_target)
    np.testing.assert_allclose(got.detach().numpy(), np_kl_div(x, t, reduction, log_target), rtol=1e-12)
    fn = lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target)  # noqa: E731
    fg.autograd.gradcheck(fn, [xt, tt])
    fg.autograd.gradgradcheck(fn, [xt, tt])


@pytest.mark.parametrize("reduction", ["sum", "batchmean"])
def test_kl_div_zero_targets(reduction):
    """Zero target probabilities add nothing and pass the input gradient ``-t = 0``."""
    x = _log_softmax(np.random.default_rng(6).standard_normal((2, 3)))
    t = np.array([[0.5, 0.0, 0.5], [0.2, 0.3, 0.5]])
    xt = t64(x)
    got = F.kl_div(xt, t64(t, False), reduction=reduction)
    np.testing.assert_allclose(got.detach().numpy(), np_kl_div(x, t, reduction, False), rtol=1e-12)
    fg.autograd.gradcheck(lambda a: F.kl_div(a, t64(t, False), reduction=reduction), [xt])
    got.backward()
    scale = 1.0 if reduction == "sum" else 1.0 / 2
    np.testing.assert_allclose(xt.grad.numpy(), -t * scale, rtol=1e-12)
