"""Gradient of dropout: the backward re-derives the forward's mask from the
saved Philox ``(seed, offset)`` (no mask is stored) and applies the same
scale; identity paths (``p == 0``, eval mode) pass the gradient through.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().numpy())


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_backward_reuses_the_forward_mask_even_after_the_generator_moved(p):
    fg.manual_seed(123)
    x = t64(np.ones((8, 16)))
    y = F.dropout(x, p)
    kept = npy(y) != 0
    assert 0 < kept.sum() < kept.size
    assert y.grad_fn.name() == "DropoutBackward"
    F.dropout(fg.ones(1000), 0.5)  # advance the default generator before backward
    g = np.random.default_rng(0).standard_normal((8, 16))
    y.backward(t64(g, False))
    np.testing.assert_array_equal(npy(x.grad), np.where(kept, g * (1 / (1 - p)), 0.0))  # the kernel scales by 1/(1-p)


def test_explicit_generator_and_non_contiguous_input():
    gen = fg.Generator().manual_seed(7)
    base = t64(np.arange(1.0, 25.0).reshape(4, 6))
    x = base.T  # non-contiguous leaf-derived view
    y = F.dropout(x, 0.3, generator=gen)
    kept = npy(y) != 0
    np.testing.assert_allclose(npy(y)[kept], npy(x)[kept] / 0.7)
    y.sum().backward()
    np.testing.assert_allclose(npy(base.grad).T, np.where(kept, 1 / 0.7, 0.0))


def test_identity_paths_pass_the_gradient_through():
    x = t64([1.0, -2.0, 3.0])
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.5, training=False) is x
    (F.dropout(x, 0.0) * 2).sum().backward()
    np.testing.assert_array_equal(npy(x.grad), [2.0, 2.0, 2.0])


def test_p_one_gives_zeros_with_zero_gradient():
    x = t64([1.0, 2.0])
    y = F.dropout(x, 1.0)
    assert y.requires_grad
    y.sum().backward()
    np.testing.assert_array_equal(npy(x.grad), [0.0, 0.0])


def test_dropped_positions_get_exact_zeros_even_for_nan_gradients():
    fg.manual_seed(5)
    x = t64(np.ones(64))
    y = F.dropout(x, 0.5)
    kept = npy(y) != 0
    y.backward(t64(np.full(64, np.nan), False))
    gx = npy(x.grad)
    assert np.all(gx[~kept] == 0.0) and np.all(np.isnan(gx[kept]))


def test_in_place_dropout():
    x = t64(np.ones(32))
    with pytest.raises(RuntimeError, match="leaf"):
        F.dropout(x, 0.5, inplace=True)
    np.testing.assert_array_equal(npy(x), np.ones(32))
    fg.manual_seed(9)
    y = x * 3
    out = F.dropout(y, 0.25, inplace=True)
    assert out is y and y.grad_fn.name() == "DropoutBackward"
    kept = npy(y) != 0
    y.sum().backward()
    np.testing.assert_allclose(npy(x.grad), np.where(kept, 3 / 0.75, 0.0))
    # in-place in eval mode: nothing happens, history unchanged
    z = x * 2
    F.dropout(z, 0.5, training=False, inplace=True)
    assert z.grad_fn.name() == "MulBackward"


def test_double_backward_applies_the_same_mask_to_the_incoming_gradient():
    fg.manual_seed(11)
    x = t64(np.ones(20))
    y = F.dropout(x, 0.4)
    kept = npy(y) != 0
    w = t64(np.random.default_rng(1).standard_normal(20))
    (gx,) = fg.autograd.grad((y * w).sum(), [x], create_graph=True)
    assert gx.requires_grad
    u = np.random.default_rng(2).standard_normal(20)
    (gw,) = fg.autograd.grad((gx * t64(u, False)).sum(), [w])
    np.testing.assert_allclose(npy(gw), np.where(kept, u / 0.6, 0.0))


@pytest.mark.parametrize("dt", [fg.float32, fg.float16, fg.bfloat16])
def test_low_precision_gradient_dtype(dt):
    fg.manual_seed(3)
    x = fg.ones(16, dtype=dt, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    assert x.grad.dtype == dt
    np.testing.assert_array_equal(npy(x.grad.double()), npy(y.double()))
