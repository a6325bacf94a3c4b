"""Gradients of the join family beyond the op-table columns: mixed dtypes
and skipped empty inputs in ``cat``, unused outputs of the multi-output ops
(``split``/``chunk``/``unbind`` give them zeros), padding modes against a
NumPy-derived adjoint, and double backward through the grad-output side.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

RNG = np.random.default_rng(1)
F = fg.nn.functional


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().numpy())


def weights(shape):
    return RNG.standard_normal(shape)


def wsum(y, w):
    return (y * t64(w, False)).sum()


# ---------------------------------------------------------------------------
# cat / stack
# ---------------------------------------------------------------------------

def test_cat_slices_gradient_and_keeps_input_dtypes():
    a = t64(weights((2, 3)))
    b = fg.tensor(weights((2, 1)), dtype=fg.float32, requires_grad=True)
    e = fg.tensor(np.zeros(0), dtype=fg.float64, requires_grad=True)  # skipped empty 1-D input
    i = fg.tensor(np.ones((2, 2), dtype=np.int64))  # not differentiable
    y = fg.cat([a, e, b, i], 1)
    assert y.dtype == fg.float64 and y.shape == (2, 6)
    assert y.grad_fn.name() == "CatBackward"
    w = weights((2, 6))
    wsum(y, w).backward()
    np.testing.assert_allclose(npy(a.grad), w[:, :3])
    assert b.grad.dtype == fg.float32
    np.testing.assert_allclose(npy(b.grad), w[:, 3:4], rtol=1e-6)
    assert e.grad.shape == (0,)


def test_cat_of_only_empty_inputs_still_records():
    e = fg.tensor(np.zeros(0), dtype=fg.float64, requires_grad=True)
    y = fg.cat([e, e])
    assert y.shape == (0,) and y.requires_grad


def test_stack_gradient():
    xs = [t64(weights(3)) for _ in range(3)]
    y = fg.stack(xs, 1)
    w = weights((3, 3))
    wsum(y, w).backward()
    for k, x in enumerate(xs):
        np.testing.assert_allclose(npy(x.grad), w[:, k])


# ---------------------------------------------------------------------------
# split / chunk / unbind: one node, unused outputs count as zeros
# ---------------------------------------------------------------------------

def test_split_unused_pieces_get_zero_gradient():
    x = t64(weights((7, 2)))
    pieces = fg.split(x, 3)
    assert [p.shape[0] for p in pieces] == [3, 3, 1]
    assert all(p.grad_fn.name() == "SplitBackward" for p in pieces)
    w = weights((1, 2))
    wsum(pieces[2], w).backward()
    expect = np.zeros((7, 2))
    expect[6:] = w
    np.testing.assert_allclose(npy(x.grad), expect)


def test_split_sections_with_empty_piece_and_all_used():
    x = t64(weights((2, 5)))
    a, b, c = fg.split(x, [2, 0, 3], 1)
    assert b.shape == (2, 0)
    wa, wc = weights((2, 2)), weights((2, 3))
    (wsum(a, wa) + wsum(c, wc) + b.sum()).backward()
    np.testing.assert_allclose(npy(x.grad), np.concatenate([wa, wc], 1))


def test_chunk_gradient():
    x = t64(weights(5))
    parts = fg.chunk(x, 3)
    assert [p.shape[0] for p in parts] == [2, 2, 1]
    (parts[1].sum() * 2).backward()
    np.testing.assert_allclose(npy(x.grad), [0, 0, 2, 2, 0])


def test_unbind_unused_outputs_are_zeros():
    xv = weights((3, 4))
    x = t64(xv)
    rows = fg.unbind(x, 1)
    assert len(rows) == 4 and rows[0].grad_fn.name() == "UnbindBackward"
    w = weights(3)
    (wsum(rows[1], w) + (rows[3] * rows[3]).sum()).backward()
    expect = np.zeros((3, 4))
    expect[:, 1] = w
    expect[:, 3] = 2 * xv[:, 3]
    np.testing.assert_allclose(npy(x.grad), expect)


def test_split_pieces_written_in_place_before_backward():
    x = t64(weights(4))
    a, b = fg.split(x * 1.0, 2)
    a.mul_(3)  # in-place on an output of the split node (a non-leaf)
    (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(npy(x.grad), [3, 3, 1, 1])


# ---------------------------------------------------------------------------
# pad
# ---------------------------------------------------------------------------

def _np_pad(x, pad, mode, value=0.0):
    nd = x.ndim
    widths = [[0, 0] for _ in range(nd)]
    for i in range(len(pad) // 2):
        widths[nd - 1 - i] = [pad[2 * i], pad[2 * i + 1]]
    crop = tuple(slice(max(-a, 0), x.shape[d] - max(-b, 0)) for d, (a, b) in enumerate(widths))
    x = x[crop]
    w = [(max(a, 0), max(b, 0)) for a, b in widths]
    m = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    if mode == "constant":
        return np.pad(x, w, mode="constant", constant_values=value)
    return np.pad(x, w, mode=m)


def _pad_adjoint(shape, pad, mode, g):
    """The adjoint of the (linear) pad map: scatter-add g through the padded index map."""
    n = int(np.prod(shape))
    ids = np.arange(n).reshape(shape)
    src = _np_pad(ids, pad, mode, value=-1)
    out = np.zeros(n)
    keep = src >= 0
    np.add.at(out, src[keep], g[keep])
    return out.reshape(shape)


@pytest.mark.parametrize(
    "mode,pad",
    [
        ("constant", (2, -1, 0, 1)),  # crop on the right of the last dim
        ("constant", (-2, -1)),
        ("reflect", (3, 2, 1, 1)),
        ("replicate", (2, 3, 0, 2)),
        ("circular", (4, 1, 2, 0)),
    ],
)
def test_pad_gradient_is_the_adjoint(mode, pad):
    xv = weights((3, 4))
    x = t64(xv)
    y = F.pad(x, list(pad), mode, 1.5 if mode == "constant" else None)
    np.testing.assert_allclose(npy(y), _np_pad(xv, pad, mode, 1.5))
    w = weights(y.shape)
    wsum(y, w).backward()
    np.testing.assert_allclose(npy(x.grad), _pad_adjoint(xv.shape, pad, mode, w))


# ---------------------------------------------------------------------------
# repeat / roll / tril / triu / diag / diagonal
# ---------------------------------------------------------------------------

def test_repeat_sums_over_tiles():
    xv = weights((2, 3))
    x = t64(xv)
    y = x.repeat(2, 1, 2)
    assert y.shape == (2, 2, 6)
    w = weights(y.shape)
    wsum(y, w).backward()
    np.testing.assert_allclose(npy(x.grad), w.reshape(2, 2, 2, 3).sum((0, 2)))


def test_repeat_by_ones_is_a_copy_with_identity_gradient():
    x = t64(weights(3))
    y = x.repeat(1)
    assert not y._shares_storage(x)
    y.sum().backward()
    np.testing.assert_allclose(npy(x.grad), np.ones(3))


def test_roll_gradient_rolls_back():
    x = t64(weights((3, 4)))
    y = fg.roll(x, (1, -3), (0, 1))
    w = weights((3, 4))
    wsum(y, w).backward()
    np.testing.assert_allclose(npy(x.grad), np.roll(w, (-1, 3), (0, 1)))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu_gradients_are_masks(k):
    x = t64(weights((2, 3, 4)))
    w = weights((2, 3, 4))
    wsum(fg.tril(x, k), w).backward()
    np.testing.assert_allclose(npy(x.grad), np.tril(w, k))
    x.grad = None
    wsum(fg.triu(x, k), w).backward()
    np.testing.assert_allclose(npy(x.grad), np.triu(w, k))


@pytest.mark.parametrize("k", [-2, 0, 1])
def test_diag_vector_and_rectangular_matrix(k):
    v = t64(weights(3))
    m = fg.diag(v, k)
    w = weights(m.shape)
    wsum(m, w).backward()
    np.testing.assert_allclose(npy(v.grad), np.diagonal(w, k))
    a = t64(weights((3, 5)))
    d = fg.diag(a, k)
    wd = weights(d.shape)
    wsum(d, wd).backward()
    expect = np.zeros((3, 5))
    r = np.arange(len(wd)) + max(-k, 0)
    expect[r, r + k] = wd
    np.testing.assert_allclose(npy(a.grad), expect)


def test_diagonal_of_3d_with_offset():
    x = t64(weights((2, 3, 4)))
    y = fg.diagonal(x, 1, 2, 0)  # diagonal of the (dim2, dim0) planes
    assert y.grad_fn.name() == "DiagonalBackward"
    w = weights(y.shape)
    wsum(y, w).backward()
    ids = np.arange(24).reshape(2, 3, 4)
    expect = np.zeros(24)
    np.add.at(expect, np.diagonal(ids, 1, 2, 0), w)
    expect = expect.reshape(2, 3, 4)
    np.testing.assert_allclose(npy(x.grad), expect)


# ---------------------------------------------------------------------------
# Double backward through the grad-output side
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "f",
    [
        lambda x: fg.cat([x, x[1:]], 0),
        lambda x: fg.stack([x, x * 2], 0),
        lambda x: fg.split(x, 2)[1],
        lambda x: fg.unbind(x.reshape(2, 2), 1)[0],
        lambda x: F.pad(x, [1, -1], "constant", 0.0),  # linear only with value 0
        lambda x: F.pad(x, [2, 1], "reflect"),
        lambda x: x.repeat(3),
        lambda x: fg.roll(x, 1),
        lambda x: fg.tril(x.reshape(2, 2)),
        lambda x: fg.diag(x, -1),
        lambda x: fg.diag(x.reshape(2, 2)),
    ],
)
def test_gradient_is_differentiable_in_the_incoming_gradient(f):
    x = t64(weights(4))
    y = f(x)
    w = t64(weights(y.shape))
    (gx,) = fg.autograd.grad((y * w).sum(), [x], create_graph=True)
    assert gx.requires_grad
    u = weights(4)
    (gw,) = fg.autograd.grad((gx * t64(u, False)).sum(), [w])
    np.testing.assert_allclose(npy(gw), npy(f(t64(u, False))))
