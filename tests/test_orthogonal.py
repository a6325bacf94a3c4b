"""``nn.utils.parametrizations.orthogonal``: the three maps (matrix exponential, Cayley,
Householder) against SciPy / NumPy formulas, orthogonality kept through training,
PyTorch's state_dict keys and initial values (the weight kept, or made orthogonal by QR
with a positive diagonal of R), gradients, batches, ``use_trivialization=False`` and errors."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.autograd import gradcheck
from ferrograd.nn.utils import parametrizations as P
from ferrograd.nn.utils._orthogonal import _householder_product, _matrix_exp
from scipy import linalg

RNG = np.random.default_rng(11)


def t64(a, requires_grad=False):
    return fg.tensor(np.asarray(a, np.float64), dtype=fg.float64, requires_grad=requires_grad)


def npv(t):
    return np.asarray(t.detach().numpy(), np.float64)


def _linear(n_out, n_in, w=None):
    lin = nn.Linear(n_in, n_out, dtype=fg.float64)
    if w is not None:
        with fg.no_grad():
            lin.weight.copy_(t64(w))
    return lin


def _is_orthonormal(w):
    m = w if w.shape[-2] >= w.shape[-1] else np.swapaxes(w, -2, -1)
    return np.allclose(np.swapaxes(m, -2, -1) @ m, np.eye(m.shape[-1]), atol=1e-10)


@pytest.mark.parametrize("scale", [0.01, 1.0, 7.0])
def test_matrix_exp_matches_scipy(scale):
    a = RNG.normal(size=(2, 4, 4)) * scale
    np.testing.assert_allclose(
        npv(_matrix_exp(t64(a))), np.stack([linalg.expm(m) for m in a]), rtol=1e-11, atol=1e-12
    )


def test_householder_product_matches_the_reflections():
    v = np.tril(RNG.normal(size=(5, 3)), -1)
    tau = RNG.uniform(0.5, 1.5, size=3)
    q = np.eye(5)
    for i in range(3):
        u = v[:, i].copy()
        u[i] = 1.0
        q = q @ (np.eye(5) - tau[i] * np.outer(u, u))
    np.testing.assert_allclose(npv(_householder_product(t64(v), t64(tau))), q[:, :3], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mp", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_initial_value_keys_and_training(mp, shape):
    w0 = RNG.normal(size=shape)
    lin = P.orthogonal(_linear(*shape, w0), orthogonal_map=mp)
    assert list(lin.state_dict()) == [
        "bias",
        "parametrizations.weight.original",
        "parametrizations.weight.0.base",
    ]
    w = npv(lin.weight)
    # the weight made orthogonal: Q of QR (of its transpose when wide), R's diagonal positive
    m = w0 if shape[0] >= shape[1] else w0.T
    q, r = np.linalg.qr(m)
    q = q * np.sign(np.diag(r))
    np.testing.assert_allclose(w if shape[0] >= shape[1] else w.T, q, atol=1e-12)
    opt = fg.optim.SGD(lin.parameters(), lr=0.1)
    x = t64(RNG.normal(size=(6, shape[1])))
    for _ in range(3):
        opt.zero_grad()
        lin(x).square().sum().backward()
        opt.step()
    w = npv(lin.weight)
    assert _is_orthonormal(w) and not np.allclose(w, q if shape[0] >= shape[1] else q.T)


def test_orthogonal_weight_is_kept_and_default_maps():
    q = linalg.qr(RNG.normal(size=(4, 4)))[0]
    lin = P.orthogonal(_linear(4, 4, q))
    assert lin.parametrizations.weight[0].orthogonal_map == "matrix_exp"
    np.testing.assert_allclose(npv(lin.weight), q, atol=1e-12)
    np.testing.assert_array_equal(npv(lin.parametrizations.weight.original), -np.eye(4))
    assert P.orthogonal(_linear(5, 2)).parametrizations.weight[0].orthogonal_map == "householder"


def test_maps_against_formulas_from_the_original():
    x = RNG.normal(size=(4, 4)) * 0.5
    a = np.tril(x) - np.tril(x).T
    for mp, want in (
        ("matrix_exp", linalg.expm(a)),
        ("cayley", np.linalg.solve(np.eye(4) - a / 2, np.eye(4) + a / 2)),
    ):
        lin = P.orthogonal(_linear(4, 4, np.eye(4)), orthogonal_map=mp)
        with fg.no_grad():
            lin.parametrizations.weight.original.copy_(t64(x))
        np.testing.assert_allclose(npv(lin.weight), want, atol=1e-12)  # base is I: the weight was I


@pytest.mark.parametrize("mp", ["matrix_exp", "cayley", "householder"])
def test_gradcheck_through_each_map(mp):
    orth = P.orthogonal(_linear(4, 3), orthogonal_map=mp).parametrizations.weight[0]
    x = RNG.normal(size=(4, 3)) * 0.4
    if mp == "householder":
        x[np.arange(3), np.arange(3)] = [1.5, -1.5, 1.5]  # truncated to ±1 (no derivative)
    assert gradcheck(lambda t: orth(t), (t64(x, True),))


def test_batched_matrices_and_without_trivialization():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(t64(RNG.normal(size=(2, 3, 3))))

    m = P.orthogonal(Holder(), "w", "cayley")
    assert _is_orthonormal(npv(m.w))
    q = linalg.qr(RNG.normal(size=(3, 3)))[0]
    lin = P.orthogonal(_linear(3, 3, q), orthogonal_map="householder", use_trivialization=False)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original"]
    sign = np.sign(np.diag(linalg.qr(q)[1]))
    np.testing.assert_allclose(npv(lin.weight), q * sign, atol=1e-12)
    ex = P.orthogonal(_linear(3, 3), orthogonal_map="matrix_exp", use_trivialization=False)
    assert _is_orthonormal(npv(ex.weight))
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        ex.weight = t64(np.eye(3))


def test_errors():
    with pytest.raises(ValueError, match="no parameter or buffer with name 'nope'"):
        P.orthogonal(_linear(3, 3), "nope")
    with pytest.raises(ValueError, match="Got a tensor of 1 dimensions"):
        P.orthogonal(_linear(3, 3), "bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp"'):
        P.orthogonal(_linear(3, 3), orthogonal_map="qr")
    lin = P.orthogonal(_linear(3, 2))
    with pytest.raises(ValueError, match=r"shape \(3, 2\)"):
        lin.weight = t64(np.eye(3))
