"""Op-table specs for the ``linalg`` factorizations and what builds on them: ``qr``,
``eigh``/``eigvalsh``, ``svd``/``svdvals``, ``pinv``, ``lstsq``, ``matrix_rank``,
``cond``, ``matrix_exp`` and ``matrix_norm`` with the singular-value orders.

Eigenvectors and singular vectors are defined up to sign (QR's factors up to the signs
of ``R``'s diagonal), so the specs compare quantities that do not depend on those
choices: squared entries, reconstructions, sign-normalized factors, and the
gradient checks differentiate the same invariant quantities. Samples are built from
random orthogonal matrices and well-separated spectra, so the gauge-invariant results
are well conditioned. The factorizations run on the host and cannot be captured
(``data_dependent=True``: capture must raise ``TraceError``).
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import OpSpec, shapes

L = fg.linalg
WIDE = ("float32", "float64")
# Eigen/singular vectors of float32 input amplify rounding by 1/gap (gaps >= 0.25 here).
TOL = {"float32": (5e-4, 5e-4)}
LOWP = {"float32": 64.0}


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _orth(rng, lead, n):
    q, r = np.linalg.qr(rng.standard_normal((*lead, n, n)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1) + 0.5)[..., None, :]


def _spectrum(rng, lead, k, lo=0.5, step=0.4, signed=False):
    """``k`` values at least ``step`` apart, descending, per batch entry."""
    base = lo + step * np.arange(k)[::-1] + rng.uniform(0, step / 2, (*lead, k))
    if signed:
        base = base - (lo + step * k / 2)
    return np.sort(base, -1)[..., ::-1].copy()


def _matrix(rng, lead, m, n, dtype):
    k = min(m, n)
    s = _spectrum(rng, lead, k)
    u = _orth(rng, lead, m)[..., :, :k]
    v = _orth(rng, lead, n)[..., :, :k]
    return ((u * s[..., None, :]) @ np.swapaxes(v, -1, -2)).astype(dtype)


def _sym(rng, lead, n, dtype):
    w = _spectrum(rng, lead, n, signed=True)
    v = _orth(rng, lead, n)
    a = (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)
    # The upper triangle is noise: eigh reads only the triangle UPLO names.
    return a.astype(dtype)


def _lead(draw):
    return draw(shapes(0, 2, 1, 2))


def _sizes(draw, lo=0):
    return draw(st.integers(lo, 4)), draw(st.integers(lo, 4))


# -- eigh ---------------------------------------------------------------------


def _sym_part(a, uplo):
    t = np.tril(a) if uplo == "L" else np.triu(a)
    return t + np.swapaxes(t, -1, -2) - np.diagonal(t, axis1=-2, axis2=-1)[..., None, :] * np.eye(a.shape[-1])


def _eigh_sample(draw, dtype):
    rng = _rng(draw)
    n = draw(st.integers(0, 4))
    a = _sym(rng, _lead(draw), n, "float64")
    uplo = draw(st.sampled_from(["L", "U"]))
    noise = rng.standard_normal(a.shape)
    a = np.where(np.triu(np.ones((n, n)), 1) if uplo == "L" else np.tril(np.ones((n, n)), -1), noise, a)
    return [a.astype(dtype)], {"UPLO": uplo}


def _eigh_view(w, v):
    return w, v * v, (v * w[..., None, :]) @ v.swapaxes(-1, -2)


def _eigh_np(a, UPLO):  # noqa: N803
    w, v = np.linalg.eigh(a, UPLO=UPLO) if a.size else (np.zeros(a.shape[:-1]), np.zeros(a.shape))
    return _eigh_view(w, v)


def _eigh_grad_sample(draw, dtype):
    rng = _rng(draw)
    a = _sym(rng, (), draw(st.integers(1, 3)), "float64")
    return [np.tril(a)], {}


def _eigh_grad(a):
    # Symmetric in, so finite differences see the full derivative; gauge-invariant out.
    w, v = L.eigh(a + a.mT)
    return w, v * v


# -- svd ----------------------------------------------------------------------


def _svd_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw)
    return [_matrix(rng, _lead(draw), m, n, dtype)], {"full_matrices": draw(st.integers(0, 1))}


def _svd_view(u, s, vh, full):
    k = s.shape[-1]
    uk, vk = u[..., :, :k], vh[..., :k, :]
    orth_u = u.swapaxes(-1, -2) @ u
    orth_v = vh @ vh.swapaxes(-1, -2)
    return s, uk * uk, vk * vk, (uk * s[..., None, :]) @ vk, orth_u, orth_v, u.shape, vh.shape


def _svd_fg(a, full_matrices):
    u, s, vh = L.svd(a, full_matrices=bool(full_matrices))
    out = _svd_view(u, s, vh, full_matrices)
    return (*out[:6], fg.tensor(list(out[6]), device=a.device), fg.tensor(list(out[7]), device=a.device))


def _svd_np(a, full_matrices):
    m, n = a.shape[-2:]
    k = min(m, n)
    if a.size:
        u, s, vh = np.linalg.svd(a, full_matrices=bool(full_matrices))
    else:
        um, vn = (m, n) if full_matrices else (k, k)
        u = np.broadcast_to(np.eye(m, um), (*a.shape[:-2], m, um))
        s = np.zeros((*a.shape[:-2], k))
        vh = np.broadcast_to(np.eye(vn, n), (*a.shape[:-2], vn, n))
    out = _svd_view(u, s, vh, full_matrices)
    return (*out[:6], np.array(out[6]), np.array(out[7]))


def _svd_grad_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, (), m, n, "float64")], {"full_matrices": draw(st.integers(0, 1))}


def _svd_grad(a, full_matrices):
    u, s, vh = L.svd(a, full_matrices=bool(full_matrices))
    k = s.shape[-1]
    uk, vk = u[..., :, :k], vh[..., :k, :]
    return s, uk * uk, vk * vk


# -- qr -----------------------------------------------------------------------


def _qr_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw)
    return [_matrix(rng, _lead(draw), m, n, dtype)], {
        "mode": draw(st.sampled_from(["reduced", "complete", "r"]))
    }


def _qr_view(q, r, k, mode):
    d = np.sign(np.diagonal(r[..., :k, :k], axis1=-2, axis2=-1))
    d = np.where(d == 0, 1.0, d)
    rn = r[..., :k, :] * d[..., :, None]
    if mode == "r":
        return (rn,)
    qk = q[..., :, :k] * d[..., None, :]
    return rn, qk, q.swapaxes(-1, -2) @ q, np.triu(r) - r


def _qr_fg(a, mode):
    q, r = L.qr(a, mode=mode)
    k = min(a.shape[-2:])
    if mode == "r":
        d = r[..., :k, :k].diagonal(0, -2, -1).sign()
        d = fg.where(d == 0, 1.0, d)
        return (r[..., :k, :] * d.unsqueeze(-1),)
    d = r[..., :k, :k].diagonal(0, -2, -1).sign()
    d = fg.where(d == 0, 1.0, d)
    return r[..., :k, :] * d.unsqueeze(-1), q[..., :, :k] * d.unsqueeze(-2), q.mT @ q, r.triu() - r


def _qr_np(a, mode):
    m, n = a.shape[-2:]
    k = min(m, n)
    md = "complete" if mode == "complete" else "reduced"
    if a.size:
        q, r = np.linalg.qr(a, mode=md)
    else:
        cols = m if md == "complete" else k
        q = np.broadcast_to(np.eye(m, cols), (*a.shape[:-2], m, cols))
        r = np.zeros((*a.shape[:-2], cols, n))
    return _qr_view(q, r, k, mode)


def _qr_grad_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, (), m, n, "float64")], {"mode": draw(st.sampled_from(["reduced", "r"]))}


def _qr_grad(a, mode):
    q, r = L.qr(a, mode="reduced")
    k = min(a.shape[-2:])
    d = r[..., :k, :k].diagonal(0, -2, -1).sign().detach()
    if mode == "r":
        return r * d.unsqueeze(-1)
    return r * d.unsqueeze(-1), q * d.unsqueeze(-2)


# -- built on them ------------------------------------------------------------


def _full_rank_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw)
    return [_matrix(rng, _lead(draw), m, n, dtype)], {}


def _full_rank_grad(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, (), m, n, "float64")], {}


def _pinv_sample(draw, dtype):
    rng = _rng(draw)
    herm = draw(st.integers(0, 1))
    lead = _lead(draw)
    if herm:
        n = draw(st.integers(0, 4))
        a = _sym(rng, lead, n, "float64")
        a = a + np.swapaxes(a, -1, -2) - a  # symmetric
    else:
        m, n = _sizes(draw)
        a = _matrix(rng, lead, m, n, "float64")
    return [a.astype(dtype)], {"hermitian": herm}


def _pinv_grad_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, (), m, n, "float64")], {"hermitian": 0}


def _pinv_np(a, hermitian):
    if a.size == 0:
        return np.zeros((*a.shape[:-2], a.shape[-1], a.shape[-2]))
    return np.linalg.pinv(a, hermitian=bool(hermitian))


def _rank_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw)
    lead = _lead(draw)
    k = min(m, n)
    r = draw(st.integers(0, k))
    u = _orth(rng, lead, m)[..., :, :r]
    v = _orth(rng, lead, n)[..., :, :r]
    s = _spectrum(rng, lead, r)
    return [((u * s[..., None, :]) @ np.swapaxes(v, -1, -2)).astype(dtype)], {}


def _rank_np(a):
    if a.size == 0:
        return np.zeros(a.shape[:-2], np.int64)
    s = np.linalg.svd(a, compute_uv=False)
    eps = np.finfo(a.dtype).eps * max(a.shape[-2:])
    return (s > s[..., :1] * eps).sum(-1).astype(np.int64)


def _lstsq_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw)
    lead = _lead(draw)
    a = _matrix(rng, lead, m, n, dtype)
    b = rng.standard_normal((*lead, m, draw(st.integers(1, 2)))).astype(dtype)
    return [a, b], {"driver": draw(st.sampled_from(["gelsy", "gelsd", "gels", "gelss"]))}


def _lstsq_fg(a, b, driver):
    r = L.lstsq(a, b, driver=driver)
    return r.solution, r.residuals


def _lstsq_grad(a, b, driver):
    # An unfilled field is an empty tensor with no history: differentiate the filled ones.
    r = L.lstsq(a, b, driver=driver)
    return (r.solution, r.residuals) if r.residuals.numel() else r.solution


def _lstsq_np(a, b, driver):
    m, n = a.shape[-2:]
    if a.size == 0:
        x = np.zeros((*a.shape[:-2], n, b.shape[-1]))
    else:
        x = np.linalg.pinv(a) @ b
    res = np.zeros((0,))
    if driver != "gelsy" and m > n:
        res = ((a @ x - b) ** 2).sum(-2)
    return x, res


def _lstsq_grad_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, (), m, n, "float64"), rng.standard_normal((m, 2))], {"driver": "gelsd"}


def _cond_sample(draw, dtype, svd=True):
    rng = _rng(draw)
    p = draw(st.sampled_from([None, 2, -2, "nuc"] if svd else ["fro", float("inf"), float("-inf"), 1, -1]))
    lead = _lead(draw)
    if p in (None, 2, -2):
        m, n = _sizes(draw, 1)
    else:
        m = n = draw(st.integers(1, 4))
    return [_matrix(rng, lead, m, n, dtype)], {"p": p}


def _cond_np(a, p):
    return np.asarray(np.linalg.cond(a, p), np.float64)


def _mexp_sample(draw, dtype):
    rng = _rng(draw)
    n = draw(st.integers(0, 4))
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]))
    return [(rng.standard_normal((*_lead(draw), n, n)) * scale).astype(dtype)], {}


def _expm_np(a):
    import scipy.linalg

    if a.size == 0:
        return np.zeros(a.shape)
    flat = a.reshape(-1, *a.shape[-2:])
    return np.stack([scipy.linalg.expm(x) for x in flat]).reshape(a.shape)


def _mexp_grad_sample(draw, dtype):
    rng = _rng(draw)
    n = draw(st.integers(1, 3))
    return [rng.standard_normal((n, n))], {}


def _mnorm_sample(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, _lead(draw), m, n, dtype)], {
        "ord": draw(st.sampled_from(["nuc", 2, -2])),
        "keepdim": draw(st.integers(0, 1)),
    }


def _mnorm_np(a, ord, keepdim):  # noqa: A002
    return np.asarray(np.linalg.norm(a, ord, axis=(-2, -1), keepdims=bool(keepdim)), np.float64)


def _mnorm_grad(draw, dtype):
    rng = _rng(draw)
    m, n = _sizes(draw, 1)
    return [_matrix(rng, (), m, n, "float64")], {"ord": draw(st.sampled_from(["nuc", 2, -2])), "keepdim": 0}


_COMMON = {
    "dtypes": WIDE,
    "tol": TOL,
    "composed": True,
    "expand": False,
    "data_dependent": True,
    "lowp_grad_factor": LOWP,
    "grad_snap": False,
}

SPECS = [
    OpSpec(
        "linalg.eigh",
        lambda a, UPLO: _eigh_view(*L.eigh(a, UPLO=UPLO)),
        _eigh_np,
        _eigh_sample,
        grad_sample=_eigh_grad_sample,
        grad_fn=_eigh_grad,
        **_COMMON,
    ),
    OpSpec(
        "linalg.eigvalsh",
        lambda a, UPLO: L.eigvalsh(a, UPLO=UPLO),
        lambda a, UPLO: _eigh_np(a, UPLO)[0],
        _eigh_sample,
        grad_sample=_eigh_grad_sample,
        grad_fn=lambda a: L.eigvalsh(a + a.mT),
        **_COMMON,
    ),
    OpSpec(
        "linalg.svd",
        _svd_fg,
        _svd_np,
        _svd_sample,
        grad_sample=_svd_grad_sample,
        grad_fn=_svd_grad,
        **_COMMON,
    ),
    OpSpec(
        "linalg.svdvals",
        lambda a: L.svdvals(a),
        lambda a: (
            np.linalg.svd(a, compute_uv=False) if a.size else np.zeros((*a.shape[:-2], min(a.shape[-2:])))
        ),
        _full_rank_sample,
        grad_sample=_full_rank_grad,
        **_COMMON,
    ),
    OpSpec("linalg.qr", _qr_fg, _qr_np, _qr_sample, grad_sample=_qr_grad_sample, grad_fn=_qr_grad, **_COMMON),
    OpSpec(
        "linalg.pinv",
        lambda a, hermitian: L.pinv(a, hermitian=bool(hermitian)),
        _pinv_np,
        _pinv_sample,
        grad_sample=_pinv_grad_sample,
        **_COMMON,
    ),
    OpSpec(
        "linalg.lstsq",
        _lstsq_fg,
        _lstsq_np,
        _lstsq_sample,
        grad_sample=_lstsq_grad_sample,
        grad_fn=_lstsq_grad,
        **_COMMON,
    ),
    OpSpec(
        "linalg.matrix_rank",
        lambda a: L.matrix_rank(a),
        _rank_np,
        _rank_sample,
        differentiable=False,
        ref_in_dtype=True,
        out_dtype="int64",
        **_COMMON,
    ),
    OpSpec(
        "linalg.cond",
        lambda a, p: L.cond(a, p),
        _cond_np,
        _cond_sample,
        grad_sample=lambda draw, dtype: (
            [_matrix(_rng(draw), (), 3, 3, "float64")],
            {"p": draw(st.sampled_from([None, -2, "nuc"]))},
        ),
        **_COMMON,
    ),
    # The orders that need no SVD: matrix_norm(A) * matrix_norm(inv(A)), tensor ops only
    # (capturable, and on the GPU without host reads).
    OpSpec(
        "linalg.cond_norms",
        lambda a, p: L.cond(a, p),
        _cond_np,
        lambda draw, dtype: _cond_sample(draw, dtype, svd=False),
        **{**_COMMON, "data_dependent": False},
    ),
    OpSpec(
        "linalg.matrix_exp",
        lambda a: L.matrix_exp(a),
        _expm_np,
        _mexp_sample,
        grad_sample=_mexp_grad_sample,
        **_COMMON,
    ),
    OpSpec(
        "linalg.matrix_norm_svd",
        lambda a, ord, keepdim: L.matrix_norm(a, ord, keepdim=bool(keepdim)),  # noqa: A006
        _mnorm_np,
        _mnorm_sample,
        grad_sample=_mnorm_grad,
        **_COMMON,
    ),
]
