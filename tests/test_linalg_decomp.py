"""The ``linalg`` factorizations (``qr``, ``eigh``, ``svd``) and what builds on them,
beyond the op table (``tests/optable/composed_linalg.py``): stored PyTorch references
(``scripts/make_linalg_references.py``), empty and batched inputs, errors, capture,
and the factors' defining properties."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

L = fg.linalg
ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "tests" / "fixtures" / "parity" / "linalg_decomp.npz"
_spec = importlib.util.spec_from_file_location(
    "make_linalg_references", ROOT / "scripts" / "make_linalg_references.py"
)
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)

DATA = np.load(REF)
CASES = json.loads(str(DATA["cases"]))


def T(a, dtype=fg.float64, grad=False):  # noqa: N802
    t = fg.from_numpy(np.asarray(a, dtype=np.float64)).to(dtype)
    return t.requires_grad_() if grad else t


@pytest.mark.parametrize("case", CASES)
def test_parity_with_torch(case):
    fn = str(DATA[f"{case}/fn"])
    kw = json.loads(str(DATA[f"{case}/kwargs"]))
    names = [k.split("/")[-1] for k in DATA.files if k.startswith(f"{case}/in/")]
    ins = {k: T(DATA[f"{case}/in/{k}"], grad=DATA[f"{case}/in/{k}"].size > 0) for k in names}
    outs = GEN.run(fg, fn, ins, kw)
    n_out = len([k for k in DATA.files if k.startswith(f"{case}/out/")])
    assert len(outs) == n_out
    loss = None
    for i, o in enumerate(outs):
        want = DATA[f"{case}/out/{i}"]
        assert tuple(o.shape) == want.shape, f"output {i}: shape {tuple(o.shape)}, PyTorch {want.shape}"
        got = o.detach().numpy()
        assert got.dtype.kind == want.dtype.kind, f"output {i}: dtype {got.dtype}, PyTorch {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10, err_msg=f"output {i}")
        if f"{case}/cot/{i}" in DATA.files:
            term = (o * T(DATA[f"{case}/cot/{i}"])).sum()
            loss = term if loss is None else loss + term
    grads = {k: f"{case}/grad/{k}" for k in names if f"{case}/grad/{k}" in DATA.files}
    if not grads:
        return
    got = fg.autograd.grad(loss, [ins[k] for k in grads])
    for (k, key), g in zip(grads.items(), got, strict=True):
        np.testing.assert_allclose(g.numpy(), DATA[key], rtol=1e-7, atol=1e-9, err_msg=f"gradient of {k}")


def test_references_record_their_torch_version():
    assert str(DATA["torch_version"]).startswith("2.")
    assert len(CASES) > 50


def test_mode_r_is_differentiable_where_torch_refuses():
    case = "qr_r_4x3"
    assert f"{case}/torch_grad_error" in DATA.files
    a = T(DATA[f"{case}/in/A"], grad=True)
    r = L.qr(a, mode="r").R
    (g,) = fg.autograd.grad(r.square().sum(), [a])
    # |R|_F = |A|_F for any QR: the gradient of the sum of squares is 2 A.
    np.testing.assert_allclose(g.numpy(), 2 * a.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_complete_qr_of_a_tall_matrix_refuses_the_gradient_of_q():
    a = T(np.arange(12.0).reshape(4, 3) ** 1.5, grad=True)
    q, r = L.qr(a, mode="complete")
    with pytest.raises(RuntimeError, match=r"mode='complete'.*tall"):
        fg.autograd.grad(q.sum(), [a])
    (g,) = fg.autograd.grad((r * r).sum(), [a])
    np.testing.assert_allclose(g.numpy(), 2 * a.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 2, 5, 3), (2, 3, 6)])
def test_batched_factorizations_match_each_matrix_alone(dtype, shape):
    rng = np.random.default_rng(0)
    a = T(rng.standard_normal(shape), dtype)
    tol = 1e-12 if dtype == fg.float64 else 1e-5
    u, s, vh = L.svd(a, full_matrices=False)
    q, r = L.qr(a)
    flat = a.reshape(-1, *shape[-2:])
    for i in range(flat.shape[0]):
        idx = np.unravel_index(i, shape[:-2])
        s1 = L.svdvals(flat[i])
        np.testing.assert_allclose(s[idx].numpy(), s1.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(r[idx].numpy(), L.qr(flat[i]).R.numpy(), rtol=tol, atol=tol)
    # The defining properties, in the input's dtype.
    assert u.dtype == s.dtype == vh.dtype == q.dtype == r.dtype == dtype
    np.testing.assert_allclose(((u * s.unsqueeze(-2)) @ vh).numpy(), a.numpy(), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose((q @ r).numpy(), a.numpy(), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(r.numpy(), np.triu(r.numpy()), atol=0)
    assert np.all(np.diff(s.numpy(), axis=-1) <= 0), "singular values descending"


def test_eigh_is_ascending_and_reads_one_triangle():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 4, 4))
    lower = L.eigh(T(a), UPLO="L")
    upper = L.eigh(T(a), UPLO="U")
    sym_l = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    sym_u = np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    for (w, v), s in ((lower, sym_l), (upper, sym_u)):
        w_, v_ = w.numpy(), v.numpy()
        assert np.all(np.diff(w_, axis=-1) > 0)
        np.testing.assert_allclose((v_ * w_[..., None, :]) @ np.swapaxes(v_, -1, -2), s, atol=1e-12)
        np.testing.assert_allclose(
            np.swapaxes(v_, -1, -2) @ v_, np.broadcast_to(np.eye(4), v_.shape), atol=1e-12
        )


def test_lstsq_fields_follow_the_driver():
    rng = np.random.default_rng(2)
    a, b = T(rng.standard_normal((5, 3))), T(rng.standard_normal((5, 2)))
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        r = L.lstsq(a, b, driver=driver)
        key = f"lstsq_{driver}"
        # The fields PyTorch fills for this driver are the ones filled here (same shapes).
        ref = GEN.run(
            fg, "lstsq", {"A": T(DATA[f"{key}/in/A"]), "B": T(DATA[f"{key}/in/B"])}, {"driver": driver}
        )
        for got, want in zip(ref[1:], (DATA[f"{key}/out/{i}"] for i in (1, 2, 3)), strict=True):
            assert tuple(got.shape) == want.shape
        assert tuple(r.solution.shape) == (3, 2)


def test_matrix_rank_tolerances():
    a = T(np.diag([3.0, 1e-3, 1e-9]))
    ranks = [int(L.matrix_rank(a).item()), int(L.matrix_rank(a, atol=1e-2).item())]
    ranks.append(int(L.matrix_rank(a, rtol=1e-2).item()))
    ranks.append(int(L.matrix_rank(a, hermitian=True, atol=1e-6).item()))
    ranks.append(int(L.matrix_rank(a, atol=fg.tensor(1e-2, dtype=fg.float64)).item()))
    s = np.array([3.0, 1e-3, 1e-9])
    eps = np.finfo(np.float64).eps * 3
    want = [(s > 3 * eps).sum(), (s > 1e-2).sum(), (s > 3e-2).sum(), (s > 1e-6).sum(), (s > 1e-2).sum()]
    assert ranks == [int(w) for w in want]


def test_matrix_exp_properties():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 3))
    skew = T(x - x.T)
    e = L.matrix_exp(skew).numpy()
    np.testing.assert_allclose(e @ e.T, np.eye(3), atol=1e-12)  # exp of a skew matrix is orthogonal
    d = T(np.diag([1.0, -2.0, 30.0]))
    np.testing.assert_allclose(L.matrix_exp(d).numpy(), np.diag(np.exp([1.0, -2.0, 30.0])), rtol=1e-12)
    ab = L.matrix_exp(T(x)) @ L.matrix_exp(T(-x))
    np.testing.assert_allclose(ab.numpy(), np.eye(3), atol=1e-11)


@pytest.mark.parametrize(
    "call, err, words",
    [
        (
            lambda: L.eigh(T(np.ones((2, 3)))),
            ValueError,
            r"linalg\.eigh: A must be a batch of square matrices.*\(2, 3\)",
        ),
        (lambda: L.eigvalsh(T(np.ones(3))), ValueError, r"linalg\.eigh: A must have at least 2 dims.*\(3,\)"),
        (lambda: L.svd(T(np.ones(3))), ValueError, r"linalg\.svd: A must have at least 2 dims.*\(3,\)"),
        (lambda: L.qr(T(np.ones(3))), ValueError, r"linalg\.qr: A must have at least 2 dims"),
        (
            lambda: L.qr(fg.ones(2, 2, dtype=fg.int64)),
            TypeError,
            r"linalg\.qr: expected a floating point.*int64",
        ),
        (
            lambda: L.svd(fg.ones(2, 2, dtype=fg.float16)),
            TypeError,
            r"linalg\.svd: .*float16 of shape \(2, 2\)",
        ),
        (lambda: L.eigh(fg.ones(2, 2, dtype=fg.bfloat16)), TypeError, r"linalg\.eigh: .*bfloat16"),
        (lambda: L.eigh(T(np.eye(2)), UPLO="X"), ValueError, r"UPLO must be 'L' or 'U'"),
        (lambda: L.qr(T(np.eye(2)), mode="economic"), ValueError, r"linalg\.qr: mode must be"),
        (
            lambda: L.svd(T([[1.0, np.nan], [0.0, 1.0]])),
            ValueError,
            r"linalg\.svd: .*\(2, 2\) contains inf or NaN",
        ),
        (lambda: L.eigh(T([[np.inf, 0.0], [0.0, 1.0]])), ValueError, r"linalg\.eigh: .*inf or NaN"),
        (lambda: L.eig(T(np.eye(2))), TypeError, r"linalg\.eig: .*no complex dtypes.*\(2, 2\)"),
        (lambda: L.eigvals(T(np.eye(2))), TypeError, r"linalg\.eigvals: .*complex"),
        (
            lambda: L.lstsq(T(np.ones((3, 2))), T(np.ones((4, 1)))),
            ValueError,
            r"linalg\.lstsq: B must have A's 3 rows",
        ),
        (lambda: L.lstsq(T(np.ones((3, 2))), T(np.ones((3, 1))), driver="x"), ValueError, r"driver must be"),
        (
            lambda: L.lstsq(T(np.ones((3, 2))), T(np.ones((3, 1)), fg.float32)),
            TypeError,
            r"linalg\.lstsq: A \(float64\) and B \(float32\)",
        ),
        (lambda: L.cond(T(np.ones((2, 3))), "fro"), ValueError, r"linalg\.cond: A must be a batch of square"),
        (lambda: L.cond(T(np.eye(2)), 3), ValueError, r"linalg\.cond: p must be"),
        (
            lambda: L.matrix_exp(T(np.ones((2, 3)))),
            ValueError,
            r"linalg\.matrix_exp: A must be a batch of square",
        ),
        (
            lambda: L.pinv(T(np.ones((2, 3))), hermitian=True),
            ValueError,
            r"linalg\.pinv: A must be a batch of square",
        ),
        (
            lambda: L.matrix_norm(T(np.ones((0, 2))), -2),
            RuntimeError,
            r"matrix_norm: ord=-2 of an empty matrix",
        ),
    ],
)
def test_errors_name_the_function_and_input(call, err, words):
    with pytest.raises(err, match=words):
        call()


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: L.qr(a).Q,
        lambda a: L.eigh(a + a.mT).eigenvalues,
        lambda a: L.svd(a).S,
        lambda a: L.pinv(a),
        lambda a: L.matrix_exp(a),
        lambda a: L.matrix_norm(a, "nuc"),
    ],
)
def test_capture_refuses_host_factorizations(fn):
    a = T(np.eye(3) + 0.1)
    with pytest.raises(fg.TraceError, match=r"linalg\.\w+: .*cannot be captured"):
        fg.compile(fn)(a)
    np.testing.assert_allclose(fg.compile(fn, fallback="eager")(a).numpy(), fn(a).numpy())


def test_gradients_run_on_the_graph_of_their_parts_to_second_order():
    rng = np.random.default_rng(4)
    a = T(rng.standard_normal((3, 3)), grad=True)
    s = L.svdvals(a).sum()
    (g,) = fg.autograd.grad(s, [a], create_graph=True)
    (gg,) = fg.autograd.grad((g * g).sum(), [a])
    assert np.isfinite(gg.numpy()).all() and gg.shape == a.shape
