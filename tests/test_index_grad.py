"""Gradients of the index family beyond the op-table columns: repeated
indices, in-place writes (``setitem``, ``index_put_``, ``scatter_``) on
non-leaves and leaves, broadcasting of written values, index tensors being
saved (version-checked), and double backward through the grad-output side
(which ``gradgradcheck`` does not perturb).
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

RNG = np.random.default_rng(0)


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def idx(a):
    return fg.tensor(np.asarray(a, dtype=np.int64))


def npy(t):
    return np.asarray(t.detach().numpy())


def weights(shape):
    return RNG.standard_normal(shape)


def grad_of(loss, *xs, **kw):
    return fg.autograd.grad(loss, list(xs), **kw)


# ---------------------------------------------------------------------------
# getitem
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "key",
    [
        (np.array([0, 2, 0, 0]),),  # repeated rows accumulate
        (slice(None), np.array([[1, 1], [3, -1]])),  # negative and repeated, 2-D index
        (np.array([0, 1]), slice(1, None), np.array([2, 2])),  # separated arrays: B dims first
        (Ellipsis, None, np.array([0, 0, 3])),
        (1, np.array([True, False, True, True])),  # int + mask
    ],
)
def test_advanced_getitem_grad_matches_numpy_add_at(key):
    xv = weights((3, 4, 4))
    x = t64(xv)
    fkey = tuple(idx(k) if isinstance(k, np.ndarray) and k.dtype != bool else
                 fg.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
    y = x[fkey]
    assert y.shape == xv[key].shape
    assert y.grad_fn.name() == "IndexBackward"
    w = weights(y.shape)
    (y * t64(w, False)).sum().backward()
    expect = np.zeros_like(xv)
    np.add.at(expect, key, w)
    np.testing.assert_allclose(npy(x.grad), expect)


def test_boolean_mask_getitem_grad():
    xv = weights((2, 3, 4))
    m = xv > 0
    x = t64(xv)
    y = x[fg.tensor(m)]
    w = weights(y.shape)
    (y * t64(w, False)).sum().backward()
    expect = np.zeros_like(xv)
    expect[m] = w
    np.testing.assert_allclose(npy(x.grad), expect)


def test_getitem_index_tensor_modified_in_place_is_detected():
    x = t64(weights(5))
    i = idx([0, 3])
    y = x[i]
    i += 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_index_tensors_are_not_differentiable():
    x = t64(weights((3, 3)))
    y = x[idx([0, 1]), idx([2, 2])]
    (g,) = grad_of(y.sum(), x)
    assert g.shape == (3, 3)


# ---------------------------------------------------------------------------
# setitem / index_put_
# ---------------------------------------------------------------------------

def test_setitem_on_non_leaf_zeroes_written_positions_and_reduces_value():
    xv, vv = weights((4, 3)), weights((1, 3))  # v broadcasts over the 2 selected rows
    x, v = t64(xv), t64(vv)
    y = x * 1.0
    y[idx([3, 1])] = v
    assert y.grad_fn.name() == "IndexPutBackward"
    w = weights((4, 3))
    (y * t64(w, False)).sum().backward()
    ex = w.copy()
    ex[[3, 1]] = 0
    np.testing.assert_allclose(npy(x.grad), ex)
    np.testing.assert_allclose(npy(v.grad), w[[3, 1]].sum(0, keepdims=True))
    np.testing.assert_allclose(npy(y), np.where(np.isin(np.arange(4), [1, 3])[:, None], vv, xv))


def test_setitem_basic_key_and_extra_leading_value_dims():
    x, v = t64(weights((3, 4))), t64(weights((1, 1, 2)))  # leading 1-dims beyond the target's rank
    y = x.clone()
    y[1:, ::2] = v
    w = weights((3, 4))
    (y * t64(w, False)).sum().backward()
    ex = w.copy()
    ex[1:, ::2] = 0
    np.testing.assert_allclose(npy(x.grad), ex)
    np.testing.assert_allclose(npy(v.grad), w[1:, ::2].sum(0).reshape(1, 1, 2))


def test_setitem_value_requiring_grad_into_plain_tensor():
    y = fg.zeros(5, dtype=fg.float64)
    v = t64([2.0, 3.0])
    y[idx([4, 0])] = v
    assert y.requires_grad and not y.is_leaf
    (y * t64(np.arange(5.0), False)).sum().backward()
    np.testing.assert_allclose(npy(v.grad), [4.0, 0.0])


def test_setitem_scalar_and_int_values_send_no_gradient_to_the_value():
    x = t64(weights(4))
    y = x * 2
    y[idx([0])] = 7
    y[fg.tensor(np.array([False, True, False, False]))] = fg.tensor([5])
    y.sum().backward()
    np.testing.assert_allclose(npy(x.grad), [0.0, 0.0, 2.0, 2.0])


def test_in_place_index_writes_on_leaf_requiring_grad_raise():
    x = t64(np.zeros(4))
    with pytest.raises(RuntimeError, match="leaf"):
        x[idx([1])] = 1.0
    with pytest.raises(RuntimeError, match="leaf"):
        x[1:] = 1.0
    with pytest.raises(RuntimeError, match="leaf"):
        x.index_put_((idx([0]),), t64([1.0], False))
    with pytest.raises(RuntimeError, match="leaf"):
        x.scatter_(0, idx([0]), t64([1.0], False))
    with pytest.raises(RuntimeError, match="leaf"):
        x.scatter_add_(0, idx([0]), t64([1.0], False))
    np.testing.assert_array_equal(npy(x), np.zeros(4))  # nothing written
    with fg.no_grad():
        x[idx([1])] = 1.0
    np.testing.assert_array_equal(npy(x), [0.0, 1.0, 0.0, 0.0])


def test_index_put_accumulate_with_repeated_indices():
    xv, vv = weights((4, 2)), weights((5, 2))
    x, v = t64(xv), t64(vv)
    rows = np.array([1, 3, 1, 1, 0])
    y = x.clone().index_put_((idx(rows),), v, accumulate=True)
    assert y.grad_fn.name() == "IndexPutAccumulateBackward"
    expect = xv.copy()
    np.add.at(expect, rows, vv)
    np.testing.assert_allclose(npy(y), expect)
    w = weights((4, 2))
    (y * t64(w, False)).sum().backward()
    np.testing.assert_allclose(npy(x.grad), w)  # accumulate keeps every old value
    np.testing.assert_allclose(npy(v.grad), w[rows])  # each repeat gets its row's gradient


def test_index_put_out_of_place_and_overwrite():
    xv, vv = weights((3, 3)), weights(2)
    x, v = t64(xv), t64(vv)
    r, c = np.array([0, 2]), np.array([1, 1])
    y = x.index_put((idx(r), idx(c)), v)
    assert x.is_leaf  # out of place
    w = weights((3, 3))
    (y * t64(w, False)).sum().backward()
    ex = w.copy()
    ex[r, c] = 0
    np.testing.assert_allclose(npy(x.grad), ex)
    np.testing.assert_allclose(npy(v.grad), w[r, c])


def test_index_put_value_of_other_float_dtype_gets_its_own_dtype():
    x = t64(np.zeros(3))
    v = fg.tensor([1.0, 2.0], dtype=fg.float32, requires_grad=True)
    y = x.clone()
    y[idx([0, 2])] = v
    (y * t64([1.0, 2.0, 3.0], False)).sum().backward()
    assert v.grad.dtype == fg.float32
    np.testing.assert_allclose(npy(v.grad), [1.0, 3.0])


def test_setitem_value_taken_from_the_same_tensor():
    xv = weights(4)
    x = t64(xv)
    y = x * 1.0
    y[idx([0])] = y[idx([3])] * 2  # reads the old y before the write
    w = weights(4)
    (y * t64(w, False)).sum().backward()
    np.testing.assert_allclose(npy(x.grad), [0.0, w[1], w[2], w[3] + 2 * w[0]])


def test_setitem_overlapping_basic_slices_of_the_same_tensor():
    x = t64(weights(4))
    y = x * 1.0
    y[1:] = y[:-1]  # y = [x0, x0, x1, x2]
    w = weights(4)
    (y * t64(w, False)).sum().backward()
    np.testing.assert_allclose(npy(x.grad), [w[0] + w[1], w[2], w[3], 0.0])


def test_repeated_targets_without_accumulate_give_every_occurrence_the_gradient():
    # Which write wins is unspecified; as in PyTorch, the value gradient is the
    # output gradient gathered at each occurrence (not split between them).
    x, v = t64(np.zeros(3)), t64([1.0, 2.0, 3.0])
    y = x.index_put((idx([1, 1, 2]),), v)
    w = np.array([10.0, 20.0, 30.0])
    (y * t64(w, False)).sum().backward()
    np.testing.assert_allclose(npy(v.grad), [20.0, 20.0, 30.0])
    np.testing.assert_allclose(npy(x.grad), [10.0, 0.0, 0.0])


# ---------------------------------------------------------------------------
# index_select / gather / take_along_dim / masked_select
# ---------------------------------------------------------------------------

def test_index_select_repeated_and_negative_indices():
    xv = weights((3, 5))
    x = t64(xv)
    ii = np.array([4, -1, 0, 4])
    y = fg.index_select(x, 1, idx(ii))
    assert y.grad_fn.name() == "IndexSelectBackward"
    w = weights(y.shape)
    (y * t64(w, False)).sum().backward()
    expect = np.zeros_like(xv)
    np.add.at(expect, (slice(None), ii), w)
    np.testing.assert_allclose(npy(x.grad), expect)


def test_index_select_zero_dim():
    x = t64(3.0)
    y = fg.index_select(x, 0, idx(0))
    assert y.shape == ()
    y.backward()
    assert float(x.grad) == 1.0


def test_gather_repeated_indices_add_up():
    xv = weights((3, 4))
    x = t64(xv)
    ii = np.array([[0, 0, 2], [2, 2, 2]])
    y = fg.gather(x, 0, idx(ii))
    w = weights(ii.shape)
    (y * t64(w, False)).sum().backward()
    expect = np.zeros_like(xv)
    cols = np.broadcast_to(np.arange(3), ii.shape)
    np.add.at(expect, (ii, cols), w)
    np.testing.assert_allclose(npy(x.grad), expect)


def test_take_along_dim_broadcast_input_gets_summed_gradient():
    xv = weights((1, 4))  # broadcast against indices of 3 rows
    x = t64(xv)
    ii = np.array([[0], [3], [0]])
    y = fg.take_along_dim(x, idx(ii), 1)
    assert y.shape == (3, 1)
    w = weights((3, 1))
    (y * t64(w, False)).sum().backward()
    np.testing.assert_allclose(npy(x.grad), [[w[0, 0] + w[2, 0], 0, 0, w[1, 0]]])


def test_masked_select_broadcast_mask():
    xv = weights((1, 3))
    x = t64(xv)
    m = np.array([[True, False, True], [True, True, False]])
    y = x.masked_select(fg.tensor(m))
    assert y.shape == (4,)
    w = weights(4)
    (y * t64(w, False)).sum().backward()
    expect = np.zeros((2, 3))
    expect[m] = w
    np.testing.assert_allclose(npy(x.grad), expect.sum(0, keepdims=True))


# ---------------------------------------------------------------------------
# scatter family
# ---------------------------------------------------------------------------

def test_scatter_add_repeated_indices():
    xv, sv = weights((3, 2)), weights((4, 2))
    x, s = t64(xv), t64(sv)
    ii = np.array([[0, 2], [0, 2], [1, 2], [0, 0]])
    y = fg.scatter_add(x, 0, idx(ii), s)
    assert y.grad_fn.name() == "ScatterAddBackward"
    w = weights((3, 2))
    (y * t64(w, False)).sum().backward()
    np.testing.assert_allclose(npy(x.grad), w)
    np.testing.assert_allclose(npy(s.grad), np.take_along_axis(w, ii, 0))


def test_scatter_src_larger_than_index_and_self_zeroed():
    xv, sv = weights((3, 3)), weights((3, 4))
    x, s = t64(xv), t64(sv)
    ii = np.array([[2, 0], [1, 2]])  # distinct targets per column
    y = x.scatter(1, idx(ii), s)
    w = weights((3, 3))
    (y * t64(w, False)).sum().backward()
    ex = w.copy()
    rows = np.broadcast_to(np.arange(2)[:, None], ii.shape)
    ex[rows, ii] = 0
    np.testing.assert_allclose(npy(x.grad), ex)
    es = np.zeros((3, 4))
    es[:2, :2] = w[rows, ii]  # entries of src beyond the index get zeros
    np.testing.assert_allclose(npy(s.grad), es)


@pytest.mark.parametrize("method", ["scatter_", "scatter_add_"])
def test_in_place_scatter_on_non_leaf(method):
    xv, sv = weights(5), weights(2)
    x, s = t64(xv), t64(sv)
    y = x * 3
    r = getattr(y, method)(0, idx([4, 1]), s)
    assert r is y and not y.is_leaf
    w = weights(5)
    (y * t64(w, False)).sum().backward()
    ex = 3 * w
    if method == "scatter_":
        ex[[4, 1]] = 0
    np.testing.assert_allclose(npy(x.grad), ex)
    np.testing.assert_allclose(npy(s.grad), w[[4, 1]])


def test_scatter_with_scalar_value_sends_gradient_to_self_only():
    x = t64(weights(4))
    y = x.scatter(0, idx([2]), value=1.5)
    y.sum().backward()
    np.testing.assert_allclose(npy(x.grad), [1.0, 1.0, 0.0, 1.0])


# ---------------------------------------------------------------------------
# Double backward: the VJPs are recorded, so they differentiate again
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "f",
    [
        lambda x: x[idx([2, 0, 2])],
        lambda x: x[fg.tensor(np.array([True, False, True, True]))],
        lambda x: fg.index_select(x, 0, idx([3, 3, 1])),
        lambda x: fg.gather(x, 0, idx([1, 1, 0])),
        lambda x: fg.take_along_dim(x, idx([0, 3])),
        lambda x: x.masked_select(fg.tensor(np.array([False, True, True, False]))),
    ],
)
def test_gradient_is_differentiable_in_the_incoming_gradient(f):
    # g(w) = d<f(x), w>/dx is linear in w; d<g(w), u>/dw = f(u).
    x = t64(weights(4))
    y = f(x)
    w = t64(weights(y.shape))
    (gx,) = grad_of((y * w).sum(), x, create_graph=True)
    assert gx.requires_grad
    u = weights(4)
    (gw,) = grad_of((gx * t64(u, False)).sum(), w)
    np.testing.assert_allclose(npy(gw), npy(f(t64(u, False))))


def test_second_derivative_through_index_put_and_scatter():
    xv = weights(4)
    x = t64(xv)
    y = x * 1.0
    y[idx([1])] = x[idx([2])] ** 2  # y = [x0, x2^2, x2, x3]
    z = fg.scatter_add(y, 0, idx([0, 0]), y[idx([3, 3])] ** 2)  # z0 += 2 x3^2
    (g,) = grad_of(z.sum(), x, create_graph=True)
    np.testing.assert_allclose(npy(g), [1.0, 0.0, 2 * xv[2] + 1, 4 * xv[3] + 1])
    (h,) = grad_of(g.sum(), x)
    np.testing.assert_allclose(npy(h), [0.0, 0.0, 2.0, 4.0])
