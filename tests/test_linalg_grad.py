"""Gradients of matmul & co., linear and einsum beyond the op-table
gradchecks: every 1-D / 2-D / batched / broadcast matmul case against
NumPy-derived gradients, dtypes, strided operands, the MLP step, and einsum
equations with diagonals, broadcasting and ellipses."""

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def _sum_to(g, shape):
    """Sum a broadcast gradient back to ``shape``."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def np_matmul_grads(a, b, g):
    """Gradients of ``a @ b`` (NumPy rules) for the output gradient ``g``."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = np.expand_dims(g2, -2 if b.ndim > 1 else 0)
    if b.ndim == 1:
        g2 = np.expand_dims(g2, -1)
    ga = _sum_to(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
    gb = _sum_to(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)
    return ga, gb


MATMUL_SHAPES = [
    ((4,), (4,)),
    ((4,), (4, 3)),
    ((4,), (2, 4, 3)),
    ((5, 4), (4,)),
    ((2, 5, 4), (4,)),
    ((5, 4), (4, 3)),
    ((2, 5, 4), (4, 3)),          # batched @ matrix: folded into one product
    ((2, 3, 5, 4), (4, 3)),
    ((5, 4), (2, 4, 3)),          # matrix @ batched
    ((2, 1, 5, 4), (3, 4, 2)),    # broadcast batch dims
    ((1, 5, 4), (2, 4, 3)),
    ((2, 5, 4), (1, 4, 3)),
    ((3, 5, 0), (0, 2)),          # empty contraction
    ((0, 5, 4), (4, 3)),          # empty batch
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_gradients_match_numpy(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ta, tb = t64(a), t64(b)
    y = ta @ tb
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    ga, gb = np_matmul_grads(a, b, g)
    assert tuple(ta.grad.shape) == sa and tuple(tb.grad.shape) == sb
    np.testing.assert_allclose(ta.grad.numpy(), ga, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), gb, atol=1e-12)
    if a.size and b.size and a.size + b.size <= 60:
        fg.autograd.gradgradcheck(lambda x, z: x @ z, [t64(a), t64(b)])


@pytest.mark.parametrize("op,sa,sb,name", [
    ("mm", (3, 4), (4, 2), "MmBackward"),
    ("bmm", (2, 3, 4), (2, 4, 5), "BmmBackward"),
    ("mv", (3, 4), (4,), "MvBackward"),
    ("dot", (4,), (4,), "DotBackward"),
    ("matmul", (2, 3, 4), (4,), "MatmulBackward"),
])
def test_named_products(op, sa, sb, name):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ta, tb = t64(a), t64(b)
    y = getattr(fg, op)(ta, tb)
    assert y.grad_fn.name() == name
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    ga, gb = np_matmul_grads(a, b, g)
    np.testing.assert_allclose(ta.grad.numpy(), ga, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), gb, atol=1e-12)


def test_outer_gradient():
    a, b = t64([1.0, 2.0, 3.0]), t64([4.0, -1.0])
    g = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    fg.outer(a, b).backward(t64(g, False))
    np.testing.assert_allclose(a.grad.numpy(), g @ [4.0, -1.0])
    np.testing.assert_allclose(b.grad.numpy(), np.array([1.0, 2.0, 3.0]) @ g)


def test_only_the_operands_a_needed_gradient_uses_are_saved():
    # a's gradient needs b: modifying b in place before backward is detected
    a = t64(np.ones((3, 4)))
    b = t64(np.ones((4, 2)), requires_grad=False)
    y = a @ b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    # b's gradient needs only a: b itself is not saved, so updating it is fine
    a2 = t64(np.arange(12.0).reshape(3, 4), requires_grad=False)
    b2 = t64(np.ones((4, 2)))
    y2 = a2 @ b2
    with fg.no_grad():
        b2.mul_(3)
    y2.sum().backward()
    np.testing.assert_allclose(b2.grad.numpy(), np.arange(12.0).reshape(3, 4).T @ np.ones((3, 2)))


def test_mixed_dtypes_and_integer_operands():
    a = fg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    b = fg.tensor(np.ones((3, 2)), dtype=fg.float64, requires_grad=True)
    y = a @ b
    assert y.dtype == fg.float64
    y.sum().backward()
    assert a.grad.dtype == fg.float32 and b.grad.dtype == fg.float64
    np.testing.assert_allclose(a.grad.numpy(), np.full((2, 3), 2.0))
    np.testing.assert_allclose(b.grad.numpy(), np.arange(6).reshape(2, 3).T @ np.ones((2, 2)))
    c = fg.tensor(np.ones((2, 3)), dtype=fg.float64, requires_grad=True)
    k = fg.tensor(np.arange(6).reshape(3, 2))  # int64, no gradient
    (c @ k).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), np.ones((2, 2)) @ np.arange(6).reshape(3, 2).T)


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16])
def test_half_precision_matmul_gradients(dtype):
    a = fg.tensor(np.ones((4, 3), np.float32)).to(dtype).requires_grad_()
    b = fg.tensor(np.full((3, 2), 0.5, np.float32)).to(dtype).requires_grad_()
    (a @ b).sum().backward()
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    np.testing.assert_allclose(a.grad.float().numpy(), 1.0)
    np.testing.assert_allclose(b.grad.float().numpy(), 4.0)


def test_strided_operands():
    rng = np.random.default_rng(2)
    a0, b0 = rng.standard_normal((4, 5)), rng.standard_normal((3, 4))
    a, b = t64(a0), t64(b0)
    y = a.T @ b.T.flip(0)            # (5, 4) @ (4, 3) from transposed / flipped views
    g = rng.standard_normal((5, 3))
    y.backward(t64(g, False))
    ga, gb = np_matmul_grads(a0.T, b0.T[::-1], g)
    np.testing.assert_allclose(a.grad.numpy(), ga.T, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb[::-1].T, atol=1e-12)


# ---------------------------------------------------------------------------
# linear and the MLP step
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("xs,ws,bs", [
    ((5, 4), (3, 4), (3,)),
    ((5, 4), (3, 4), None),
    ((2, 5, 4), (3, 4), (3,)),
    ((4,), (3, 4), (3,)),
    ((2, 5, 4), (4,), ()),
    ((4,), (4,), (1,)),
    ((5, 4), (3, 4), (1,)),
])
def test_linear_gradients(xs, ws, bs):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = None if bs is None else rng.standard_normal(bs)
    tx, tw = t64(x), t64(w)
    tb = None if b is None else t64(b)
    y = F.linear(tx, tw, tb)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    ga, gb = np_matmul_grads(x, w.T if w.ndim == 2 else w, g)
    np.testing.assert_allclose(tx.grad.numpy(), ga, atol=1e-12)
    np.testing.assert_allclose(tw.grad.numpy(), gb.T if w.ndim == 2 else gb, atol=1e-12)
    if tb is not None:
        np.testing.assert_allclose(tb.grad.numpy(), np.reshape(_sum_to(np.asarray(g), bs) if g.ndim >= len(bs) else g.sum(), bs), atol=1e-12)
    # the weight gradient leaves the GEMM contiguous (no transposed copy)
    assert tw.grad.is_contiguous()
    fg.autograd.gradgradcheck(F.linear, [t64(x), t64(w)] + ([] if b is None else [t64(b)]))


def test_mlp_step_gradients_match_numpy_and_are_contiguous():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 5))
    w1, b1, w2 = rng.standard_normal((5, 6)), rng.standard_normal(6), rng.standard_normal((6, 3))
    tw1, tb1, tw2 = t64(w1), t64(b1), t64(w2)
    y = fg.relu(t64(x, False) @ tw1 + tb1) @ tw2
    g = rng.standard_normal((8, 3))
    y.backward(t64(g, False))
    h = x @ w1 + b1
    a = np.maximum(h, 0)
    gh = (g @ w2.T) * (h > 0)
    np.testing.assert_allclose(tw2.grad.numpy(), a.T @ g, atol=1e-12)
    np.testing.assert_allclose(tw1.grad.numpy(), x.T @ gh, atol=1e-12)
    np.testing.assert_allclose(tb1.grad.numpy(), gh.sum(0), atol=1e-12)
    assert tw1.grad.is_contiguous() and tw2.grad.is_contiguous()


# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------

def _np_einsum_grads(eq, arrays, g):
    """Gradients of a NumPy einsum by finite-free linearity: Jᵀ g per operand via unit inputs."""
    grads = []
    for i, a in enumerate(arrays):
        out = np.zeros(a.size)
        for k in range(a.size):
            e = np.zeros(a.size)
            e[k] = 1.0
            ops = list(arrays)
            ops[i] = e.reshape(a.shape)
            out[k] = (np.einsum(eq, *ops) * g).sum()
        grads.append(out.reshape(a.shape))
    return grads


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("ii->i", [(4, 4)]),
    ("ii->", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,ij->", [(2, 3), (1, 3)]),            # broadcast size-1 operand dim
    ("i,j->ij", [(3,), (2,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
    ("i...->...", [(3, 2, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ijk,jil->kl", [(2, 3, 2), (3, 2, 4)]),
    ("ij,jj->i", [(2, 3), (3, 3)]),           # a diagonal contracted with another operand
    ("i,i,i->", [(3,), (3,), (3,)]),
    ("bi,bi->b", [(4, 3), (1, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum_gradients_match_numpy(eq, shapes):
    rng = np.random.default_rng(len(eq))
    arrays = [rng.standard_normal(s) for s in shapes]
    ts = [t64(a) for a in arrays]
    y = fg.einsum(eq, *ts)
    assert y.grad_fn.name() == "EinsumBackward"
    g = rng.standard_normal(tuple(y.shape))
    y.backward(t64(g, False))
    for t, e, a in zip(ts, _np_einsum_grads(eq, arrays, g), arrays, strict=True):
        assert tuple(t.grad.shape) == a.shape
        np.testing.assert_allclose(t.grad.numpy(), e, atol=1e-12)
    fg.autograd.gradgradcheck(lambda *xs: fg.einsum(eq, *xs), [t64(a) for a in arrays])


def test_einsum_with_a_non_differentiable_integer_operand():
    x = t64([[1.0, 2.0], [3.0, 4.0]])
    k = fg.tensor([[1, 0], [2, 1]])
    y = fg.einsum("ij,jk->ik", x, k)
    assert y.dtype == fg.float64
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones((2, 2)) @ np.array([[1, 0], [2, 1]]).T)
