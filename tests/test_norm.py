"""layer_norm / rms_norm beyond the op table: errors, partial gradients, half precision."""

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional


def _ln_ref(x, w=None, b=None, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def test_layer_norm_matches_numpy_and_keeps_input():
    x = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    before = x.copy()
    w = np.linspace(0.5, 1.5, 7, dtype=np.float32)
    b = np.linspace(-1, 1, 7, dtype=np.float32)
    y = F.layer_norm(fg.tensor(x), (7,), fg.tensor(w), fg.tensor(b))
    np.testing.assert_allclose(y.numpy(), _ln_ref(x, w, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, before)


def test_layer_norm_non_contiguous_input():
    x = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float64)
    t = fg.tensor(x).T  # (4, 6), non-contiguous
    y = F.layer_norm(t, 6)
    np.testing.assert_allclose(y.numpy(), _ln_ref(x.T), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", [fg.float16, fg.bfloat16])
def test_layer_norm_half_precision(dt):
    x = np.random.default_rng(2).normal(size=(3, 16)).astype(np.float32)
    y = F.layer_norm(fg.tensor(x).to(dt), (16,))
    assert y.dtype == dt
    np.testing.assert_allclose(y.float().numpy(), _ln_ref(x), rtol=3e-2, atol=3e-2)


def test_errors_name_op_and_shapes():
    x = fg.zeros(2, 3)
    with pytest.raises(ValueError, match=r"layer_norm.*\[4\].*\[2, 3\]"):
        F.layer_norm(x, (4,))
    with pytest.raises(ValueError, match=r"layer_norm: weight has shape \[2\]"):
        F.layer_norm(x, (3,), fg.ones(2))
    with pytest.raises(TypeError, match=r"layer_norm.*int64"):
        F.layer_norm(fg.zeros(2, 3, dtype=fg.int64), (3,))
    with pytest.raises(TypeError, match=r"rms_norm: weight has dtype float64"):
        F.rms_norm(x, (3,), fg.ones(3, dtype=fg.float64))
    with pytest.raises(ValueError, match="eps"):
        F.layer_norm(x, (3,), eps=-1.0)


def test_gradient_only_for_weight():
    x = fg.tensor(np.random.default_rng(3).normal(size=(4, 5)))
    w = fg.ones(5, dtype=fg.float64, requires_grad=True)
    y = F.layer_norm(x, (5,), w)
    (y * y).sum().backward()
    xh = _ln_ref(x.numpy())
    np.testing.assert_allclose(w.grad.numpy(), (2 * xh * xh).sum(0), rtol=1e-10)
    assert x.grad is None
    assert y.grad_fn.name() == "NativeLayerNormBackward"


def test_rms_norm_default_eps_and_gradcheck():
    x = fg.tensor(np.random.default_rng(4).normal(size=(3, 4)), requires_grad=True)
    w = fg.tensor(np.random.default_rng(5).normal(size=(4,)), requires_grad=True)
    y = F.rms_norm(x, 4, w)
    xn = x.detach().numpy()
    ref = xn / np.sqrt((xn * xn).mean(-1, keepdims=True) + np.finfo(np.float64).eps) * w.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12)
    assert fg.autograd.gradcheck(lambda a, b: F.rms_norm(a, (4,), b, eps=1e-3), (x, w))


def test_layer_norm_hessian_vector_product_matches_finite_difference():
    rng = np.random.default_rng(6)
    x0 = rng.normal(size=(2, 5))
    v = rng.normal(size=(2, 5))

    def grad_at(a):
        x = fg.tensor(a, requires_grad=True)
        y = F.layer_norm(x, (5,), eps=0.1)
        (g,) = fg.autograd.grad((y * y * y).sum(), x, create_graph=True)
        return x, g

    x, g = grad_at(x0)
    (hv,) = fg.autograd.grad((g * fg.tensor(v)).sum(), x)
    h = 1e-6
    fd = (grad_at(x0 + h * v)[1].detach().numpy() - grad_at(x0 - h * v)[1].detach().numpy()) / (2 * h)
    np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-5, atol=1e-6)
