"""``orthogonal``: the parametrization of a matrix (or a batch of them) with orthonormal
columns (or rows, when wide), as ``torch.nn.utils.parametrizations.orthogonal``.

The unconstrained original ``X`` maps to ``Q`` through one of three maps, all composed of
tensor ops so gradients flow: ``"matrix_exp"`` and ``"cayley"`` take the skew-symmetric
``A = tril(X) - tril(X)^T`` (padded to square for a tall matrix) to ``exp(A)`` (scaling and
squaring of a Taylor series) or to the Cayley retraction ``(I - A/2)^{-1} (I + A/2)``;
``"householder"`` multiplies the reflections given by the columns of ``tril(X, -1)``. With
``use_trivialization`` (the default) the result is ``base @ Q`` with ``base`` an orthogonal
buffer that assignment sets (from a QR decomposition done on the host, without gradient),
and the original restarts at ``-I`` (so ``Q`` starts at ``I``), as in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _capture, _core
from ..._grad_mode import no_grad
from ...linalg import solve
from ..modules.module import Module
from . import parametrize

Tensor = _core.Tensor

__all__ = ["orthogonal"]

_MAPS = ("matrix_exp", "cayley", "householder")
_TAYLOR_ORDER = 12
# Squarings used when the norm cannot be read (inside a captured graph).
_FIXED_SQUARINGS = 8


def _eye(n: int, like: Tensor) -> Tensor:
    return _core.eye(n, dtype=like.dtype, device=like.device)


def _matrix_exp(a: Tensor) -> Tensor:
    """``exp(A)`` of square matrices by scaling and squaring: a Taylor polynomial of order 12
    at ``A / 2^s`` (``s`` makes its 1-norm at most 1/2), squared ``s`` times."""
    n = a.shape[-1]
    if _capture.is_capturing():
        s = _FIXED_SQUARINGS
    else:
        with no_grad():
            norm = float(a.abs().sum(-2).amax()) if a.numel() else 0.0
        s = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0 else 0
    x = a / float(2**s) if s else a
    eye = _eye(n, a)
    # Horner: I + x (I + x/2 (I + x/3 (...)))
    out = eye + x / float(_TAYLOR_ORDER)
    for k in range(_TAYLOR_ORDER - 1, 0, -1):
        out = eye + x.matmul(out) / float(k)
    for _ in range(s):
        out = out.matmul(out)
    return out


def _householder_product(v: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i u_i u_i^T`` with ``u_i`` column
    ``i`` of ``v`` (``n x k``) below the diagonal and 1 on it."""
    n, k = v.shape[-2], v.shape[-1]
    q = _eye(n, v).expand(*v.shape[:-2], n, n)
    unit = _eye(n, v)
    for i in range(k):
        u = v.narrow(-1, i, 1) + unit.narrow(-1, i, 1)  # (..., n, 1)
        t = tau.narrow(-1, i, 1).unsqueeze(-1)  # (..., 1, 1)
        q = q - (q.matmul(u) * t).matmul(u.transpose(-2, -1))
    return q.narrow(-1, 0, k)


def _host_qr_orthogonal(a: np.ndarray) -> np.ndarray:
    """``Q`` of ``A = QR`` with ``R``'s diagonal made positive (unique for full-rank ``A``)."""
    q, r = np.linalg.qr(a)
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    d = np.where(d == 0, 1.0, d)
    return q * d[..., None, :]


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        """The orthogonal matrix ``Q`` (times ``base``) of the unconstrained ``x``."""
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.transpose(-2, -1)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                pad = _core.zeros((*x.shape[:-2], n, n - k), dtype=x.dtype, device=x.device)
                x = _core.cat([x, pad], -1)
            a = x - x.transpose(-2, -1)
            if self.orthogonal_map == "matrix_exp":
                q = _matrix_exp(a)
            else:
                eye = _eye(n, a)
                q = solve(eye - a * 0.5, eye + a * 0.5)
            if n != k:
                q = q.narrow(-1, 0, k)
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = _householder_product(a, tau)
            # The diagonal of x holds ±1: flips of the columns, not differentiated.
            q = q * x.diagonal(dim1=-2, dim2=-1).detach().trunc().unsqueeze(-2)
        base = self._buffers.get("base", None)
        if base is not None:
            q = base.matmul(q)
        if transposed:
            q = q.transpose(-2, -1)
        return q

    def right_inverse(self, q: Tensor) -> Tensor:
        """Set ``base`` so that the parametrized value becomes ``q`` (made orthogonal by QR if
        it is not) and return the original that gives it: ``-I`` (so ``Q(-I) = I``)."""
        if tuple(q.shape) != self.shape:
            raise ValueError(
                f"orthogonal: expected a matrix or batch of matrices of shape {self.shape}, got {tuple(q.shape)}"
            )
        if "base" not in self._buffers:
            if self.orthogonal_map != "householder":
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley parametrizations "
                    "when use_trivialization=False."
                )
            return self._householder_inverse(q)
        with no_grad():
            n, k = q.shape[-2], q.shape[-1]
            host = np.asarray(q.detach().cpu().to(_core.float64).numpy())
            if n < k:
                host = np.swapaxes(host, -2, -1)
                n, k = k, n
            eye = np.eye(k)
            if n == k and np.allclose(np.swapaxes(host, -2, -1) @ host, eye, atol=10.0 * n * _eps(q.dtype)):
                full = host.copy()
            else:
                if n != k:
                    noise = _core.randn((*host.shape[:-2], n, n - k), dtype=_core.float64)
                    host = np.concatenate([host, np.asarray(noise.numpy())], -1)
                full = _host_qr_orthogonal(host)
            self.base = _core.tensor(full, dtype=q.dtype, device=q.device)
            neg_id = np.zeros(self.shape)
            idx = np.arange(min(self.shape[-2:]))
            neg_id[..., idx, idx] = -1.0
            return _core.tensor(neg_id, dtype=q.dtype, device=q.device)

    def _householder_inverse(self, q: Tensor) -> Tensor:
        """The reflections (LAPACK's ``geqrf`` form, computed on the host) whose product is ``q``,
        with the signs of ``R``'s diagonal on the diagonal."""
        with no_grad():
            host = np.asarray(q.detach().cpu().to(_core.float64).numpy())
            transpose = host.shape[-2] < host.shape[-1]
            if transpose:
                host = np.swapaxes(host, -2, -1)
            n, k = host.shape[-2:]
            flat = host.reshape(-1, n, k)
            out = np.empty_like(flat)
            for b in range(flat.shape[0]):
                h, tau = np.linalg.qr(flat[b], mode="raw")
                a = h.T.copy()
                d = np.arange(k)
                a[d, d] = np.sign(a[d, d])
                a[d[tau == 0.0], d[tau == 0.0]] *= -1
                out[b] = a
            out = out.reshape(host.shape)
            if transpose:
                out = np.swapaxes(out, -2, -1)
            return _core.tensor(np.ascontiguousarray(out), dtype=q.dtype, device=q.device)


def _eps(dtype: Any) -> float:
    return {"float64": 2.220446049250313e-16, "float16": 9.765625e-4, "bfloat16": 7.8125e-3}.get(
        str(dtype).rsplit(".", 1)[-1], 1.1920928955078125e-07
    )


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Constrain ``module.<name>`` (a matrix, or a batch of matrices) to have orthonormal
    columns (or rows, if it is wide), keeping its current value (made orthogonal by QR if it
    is not). ``orthogonal_map`` is ``"matrix_exp"`` (default for square matrices),
    ``"cayley"`` or ``"householder"`` (default otherwise). The parameter moves to
    ``module.parametrizations.<name>.original``, with the orthogonal ``base`` buffer at
    ``module.parametrizations.<name>.0.base``, as in PyTorch. Returns ``module``.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    if not weight.dtype.is_floating_point:
        raise TypeError(f"orthogonal: {name} must have a floating point dtype, got {weight.dtype}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
