"""Linear algebra, as ``torch.linalg``: the functions that compose from registry ops.

Norms (``vector_norm``, ``matrix_norm``, ``norm``), ``cross``, ``vecdot``,
``matrix_power``, ``multi_dot`` and ``diagonal`` are short compositions. ``inv``,
``solve``, ``det`` and ``slogdet`` run Gaussian elimination with partial pivoting,
and ``cholesky`` the column-by-column Cholesky–Banachiewicz recurrence, as loops
over the ``n`` columns of tensor ops that act on the whole batch at once. Row
swaps are products with permutation matrices built by comparisons (exact: one term
of each sum is nonzero), so no computed index is read back from a GPU, and every
result is differentiable to any order through its parts.

Those loops cost ``n`` rounds of batched ``O(n^2)`` ops: meant for the small
matrices of training code (covariances, small systems), not for large solves.
Real float dtypes only (float32, float64; the norms also float16/bfloat16).

``logdet`` and ``cdist`` (``torch.logdet``, ``torch.cdist``) are here too, bound at
the top level as ``fg.logdet`` and ``fg.cdist`` (outside ``__all__``: ``torch.linalg``
has neither).

Not here yet (they need iterative eigen/singular-value kernels): ``qr``, ``eigh``,
``eigvalsh``, ``svd``, ``svdvals``, ``matrix_norm`` with ``ord`` 2, -2 or
``"nuc"``, ``pinv``, ``lstsq``, ``matrix_rank``, ``cond``, ``matrix_exp``, ``eig``.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from . import _capture, _core
from ._tensor_extras import cross as _cross

Tensor = _core.Tensor
_Ord = int | float | str | None

__all__ = [
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "inv",
    "matrix_norm",
    "matrix_power",
    "multi_dot",
    "norm",
    "slogdet",
    "solve",
    "vecdot",
    "vector_norm",
]

_FLOATS = ("float16", "bfloat16", "float32", "float64")


class slogdet_result(NamedTuple):  # noqa: N801 - PyTorch's name for the result type
    """``(sign, logabsdet)`` of :func:`slogdet`."""

    sign: Tensor
    logabsdet: Tensor


def _name(t: Tensor) -> str:
    return str(t.dtype).replace("ferrograd.", "")


def _need_float(fn: str, x: Any, wide_only: bool = False) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{fn}: expected a Tensor, got {type(x).__name__}")
    allowed = ("float32", "float64") if wide_only else _FLOATS
    if _name(x) not in allowed:
        raise TypeError(
            f"linalg.{fn}: expected a floating point tensor ({', '.join(allowed)}), got {_name(x)} "
            f"of shape {tuple(x.shape)}"
        )
    return x


def _need_square(fn: str, a: Tensor) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"linalg.{fn}: A must be a batch of square matrices (..., n, n), got shape {tuple(a.shape)}"
        )
    return a.shape[-1]


def _dims(fn: str, dim: int | Sequence[int] | None, ndim: int) -> list[int]:
    if dim is None:
        return list(range(ndim))
    ds = [dim] if isinstance(dim, builtins.int) else list(dim)
    out = []
    for d in ds:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"linalg.{fn}: dim {d} is out of range for a tensor of {ndim} dims")
        out.append(d % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"linalg.{fn}: dim {dim} repeats a dimension")
    return out


# ---------------------------------------------------------------------------
# norms
# ---------------------------------------------------------------------------


def _sum_dims(x: Tensor, dims: list[int], keepdim: bool) -> Tensor:
    return x.sum(dims, keepdim=keepdim) if dims else x


def vector_norm(
    x: Tensor,
    ord: float = 2,  # noqa: A002
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """The ``ord``-norm of ``x`` over ``dim`` (all dims by default), treated as one vector:
    ``sum(|x|^ord)^(1/ord)``; ``inf``/``-inf`` the largest/smallest magnitude, 0 the number
    of nonzeros. The gradient at a zero vector is 0 (a subgradient), as PyTorch's."""
    _need_float("vector_norm", x)
    if dtype is not None:
        x = x.to(dtype)
    if _name(x) in ("float16", "bfloat16"):
        # Accumulate in float32 and round once, as PyTorch's reductions of these dtypes do.
        return vector_norm(x.to(_core.float32), ord, dim, keepdim).to(x.dtype)
    if isinstance(ord, str) or not isinstance(ord, (builtins.int, builtins.float)):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if x.ndim == 0:
        x = x.reshape(1)
        dims: list[int] = [0]
        squeeze0 = True
    else:
        dims = _dims("vector_norm", dim, x.ndim)
        squeeze0 = False
    if math.prod(x.shape[d] for d in dims) == 0 and (ord < 0 or ord == math.inf):
        raise RuntimeError(
            f"linalg.vector_norm: a norm of order {ord} over an empty dimension is undefined (shape {tuple(x.shape)})"
        )
    a = x.abs()
    if ord == math.inf:
        out = a.amax(dims, keepdim=keepdim)
    elif ord == -math.inf:
        out = a.amin(dims, keepdim=keepdim)
    elif ord == 0:
        # The count of nonzeros, recorded as a function of x with a zero gradient (as PyTorch's).
        count = _sum_dims((x != 0).to(x.dtype), dims, keepdim)
        always = _core.ones((), dtype=_core.bool, device=x.device)
        out = _core.where(always, count, _sum_dims(x, dims, keepdim))
    elif ord == 1:
        out = _sum_dims(a, dims, keepdim)
    elif ord < 0:
        out = _sum_dims(a.pow(ord), dims, keepdim).pow(1.0 / ord)
    else:
        s = _sum_dims(x.square() if ord == 2 else a.pow(ord), dims, keepdim)
        pos = s > 0
        # The root's derivative is infinite at 0: root a stand-in there and put 0 back.
        root = _core.where(pos, s, 1.0)
        out = _core.where(pos, root.sqrt() if ord == 2 else root.pow(1.0 / ord), 0.0)
    if squeeze0 and keepdim:
        out = out.reshape(())
    return out


def matrix_norm(
    A: Tensor,  # noqa: N803 - PyTorch's argument name
    ord: _Ord = "fro",  # noqa: A002
    dim: tuple[int, int] = (-2, -1),
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """A matrix norm over the two dims ``dim``: ``"fro"`` (Frobenius), ``inf``/``-inf``
    (largest/smallest absolute row sum), 1/-1 (largest/smallest absolute column sum).
    ``"nuc"``, 2 and -2 need singular values, which ferrograd does not compute yet."""
    _need_float("matrix_norm", A)
    if dtype is not None:
        A = A.to(dtype)  # noqa: N806
    if _name(A) in ("float16", "bfloat16"):
        # Sums in float32, rounded once: rounded column sums could tie where exact ones do not.
        return matrix_norm(A.to(_core.float32), ord, dim, keepdim).to(A.dtype)
    if A.ndim < 2:
        raise ValueError(f"linalg.matrix_norm: A must have at least 2 dims, got shape {tuple(A.shape)}")
    d = _dims("matrix_norm", tuple(dim), A.ndim)
    if len(d) != 2:
        raise ValueError(f"linalg.matrix_norm: dim must name 2 dims, got {dim!r}")
    r, c = d
    if ord == "fro":
        return vector_norm(A, 2, d, keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(
            f"linalg.matrix_norm: ord={ord!r} needs singular values (an SVD), which ferrograd does not compute yet"
        )
    if ord not in (math.inf, -math.inf, 1, -1):
        raise ValueError(
            f"linalg.matrix_norm: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}"
        )
    # inf: sum over columns (within a row), then the max over rows; 1: the transpose.
    inner, outer = (c, r) if ord in (math.inf, -math.inf) else (r, c)
    if A.shape[outer] == 0 or (A.shape[inner] == 0 and ord < 0):
        raise RuntimeError(
            f"linalg.matrix_norm: ord={ord} of a matrix with an empty dimension is undefined (shape {tuple(A.shape)})"
        )
    sums = A.abs().sum(inner, keepdim=True)
    out = sums.amax(outer, keepdim=True) if ord > 0 else sums.amin(outer, keepdim=True)
    return out if keepdim else out.squeeze(max(r, c)).squeeze(min(r, c))


def norm(
    A: Tensor,  # noqa: N803
    ord: _Ord = None,  # noqa: A002
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """A vector or matrix norm, as ``torch.linalg.norm``: with ``dim`` an int (or ``A``
    1-D) a :func:`vector_norm`, with ``dim`` a pair (or ``A`` 2-D and ``ord`` given) a
    :func:`matrix_norm`; with neither ``ord`` nor ``dim``, the 2-norm of ``A`` flattened."""
    _need_float("norm", A)
    if dim is not None:
        ds = [dim] if isinstance(dim, builtins.int) else list(dim)
        if len(ds) == 1:
            return vector_norm(A, 2 if ord is None else ord, ds, keepdim, dtype=dtype)  # type: ignore[arg-type]
        if len(ds) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, (ds[0], ds[1]), keepdim, dtype=dtype)
        raise ValueError(f"linalg.norm: dim must be an int or a pair of ints, got {dim!r}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)  # type: ignore[arg-type]
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ValueError(
        f"linalg.norm: with ord={ord!r} and no dim, A must be 1-D or 2-D, got shape {tuple(A.shape)}"
    )


# ---------------------------------------------------------------------------
# products and views
# ---------------------------------------------------------------------------


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (default the last), broadcasting the
    other dims (``torch.cross`` instead defaults to the first dim of size 3)."""
    return _cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of ``x`` and ``y`` along ``dim`` (broadcasting the other dims)."""
    _need_float("vecdot", x)
    _need_float("vecdot", y)
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: N803
    """The diagonals of the matrices in ``A`` (the last two dims by default), a view."""
    return A.diagonal(offset, dim1, dim2)


def _eye_like(a: Tensor) -> Tensor:
    n = a.shape[-1]
    return _core.eye(n, dtype=a.dtype, device=a.device).expand(*a.shape)


def matrix_power(A: Tensor, n: int) -> Tensor:  # noqa: N803
    """``A`` multiplied by itself ``n`` times (by repeated squaring); ``n = 0`` the identity,
    ``n < 0`` powers of :func:`inv` ``(A)``."""
    _need_float("matrix_power", A)
    _need_square("matrix_power", A)
    if not isinstance(n, builtins.int) or isinstance(n, builtins.bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {n!r}")
    if n == 0:
        # The identity, recorded as a function of A (with a zero gradient), as PyTorch's.
        return _core.where(_core.ones((), dtype=_core.bool, device=A.device), _eye_like(A), A)
    if n < 0:
        A, n = inv(A), -n  # noqa: N806
    result: Tensor | None = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else result.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    assert result is not None
    return result


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of a chain of matrices, multiplied in the order that needs the fewest
    scalar multiplications. The first may be a 1-D row vector and the last a 1-D column
    vector (those dims are dropped from the result), as ``torch.linalg.multi_dot``."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(ts)}")
    for i, t in enumerate(ts):
        _need_float("multi_dot", t)
        edge = i in (0, len(ts) - 1)
        if not (t.ndim == 2 or (edge and t.ndim == 1)):
            raise ValueError(
                f"linalg.multi_dot: tensor {i} must be 2-D{' (or 1-D)' if edge else ''}, got shape {tuple(t.shape)}"
            )
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(1)
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise ValueError(
                f"linalg.multi_dot: tensors {i} {tuple(ts[i].shape)} and {i + 1} {tuple(ts[i + 1].shape)} "
                "cannot be multiplied"
            )
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    k = len(ts)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = -1
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return ts[i]
        s = split[i][j]
        return product(i, s).matmul(product(s + 1, j))

    out = product(0, k - 1)
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


# ---------------------------------------------------------------------------
# elimination: inv, solve, det, slogdet; cholesky
# ---------------------------------------------------------------------------


def _host_checks(a: Tensor) -> bool:
    """Whether value checks may read ``a`` (on the CPU, outside capture): on a GPU they
    would cost a device read, so singular input gives inf/NaN there instead of an error."""
    return str(a.device) == "cpu" and not _capture.is_capturing()


def _pivot_swap(m: Tensor, k: int, n: int) -> tuple[Tensor, Tensor]:
    """Swap row ``k`` of ``m`` (…, n, w) with the row at or below it whose entry in column
    ``k`` is largest in magnitude. Returns the swapped matrix and, per matrix, whether a
    swap happened (a bool of the batch shape)."""
    col = m[..., :, k].abs()
    below = _core.arange(n, device=m.device) >= k
    col = _core.where(below, col, -1.0)
    p = col.argmax(-1, keepdim=True)  # (…, 1)
    rows = _core.arange(n, device=m.device)
    is_p = rows == p  # (…, n): e_p
    is_k = rows == k
    # P = I - e_k e_k' - e_p e_p' + e_k e_p' + e_p e_k' (the identity when p == k).
    ek = is_k.to(m.dtype)
    ep = is_p.to(m.dtype)
    eye = _core.eye(n, dtype=m.dtype, device=m.device)
    perm = (
        eye
        - ek.unsqueeze(-1) * ek.unsqueeze(-2)
        - ep.unsqueeze(-1) * ep.unsqueeze(-2)
        + ek.unsqueeze(-1) * ep.unsqueeze(-2)
        + ep.unsqueeze(-1) * ek.unsqueeze(-2)
    )
    swapped = p.squeeze(-1) != k
    return perm.matmul(m), swapped


def _gauss_jordan(fn: str, a: Tensor, rhs: Tensor) -> Tensor:
    """``A^{-1} rhs`` by Gauss–Jordan elimination with partial pivoting on ``[A | rhs]``."""
    n = a.shape[-1]
    m = _core.cat([a, rhs], -1)
    rows = _core.arange(n, device=a.device)
    check = _host_checks(a)
    for k in range(n):
        m, _ = _pivot_swap(m, k, n)
        pivot = m[..., k : k + 1, k : k + 1]  # (…, 1, 1)
        if check and m.numel() and bool((pivot == 0).any()):
            raise RuntimeError(
                f"linalg.{fn}: the input matrix is singular (no nonzero pivot in column {k}; "
                f"shape {tuple(a.shape)}, {_name(a)})"
            )
        row = m[..., k : k + 1, :] / pivot  # (…, 1, w)
        factor = _core.where((rows == k).unsqueeze(-1), 0.0, m[..., :, k : k + 1])  # (…, n, 1)
        m = _core.where((rows == k).unsqueeze(-1), row, m - factor * row)
    return m[..., :, n:]


def inv(A: Tensor) -> Tensor:  # noqa: N803
    """The inverse of each square matrix in ``A`` (Gauss–Jordan with partial pivoting).
    A singular matrix on the CPU raises ``RuntimeError``."""
    _need_float("inv", A, wide_only=True)
    _need_square("inv", A)
    return _gauss_jordan("inv", A, _eye_like(A))


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:  # noqa: N803
    """The solution ``X`` of ``A X = B`` (``left=False``: ``X A = B``). ``B`` is a batch of
    vectors when it is 1-D or has ``A``'s batch shape plus ``n``, else of matrices; batch
    dims broadcast."""
    _need_float("solve", A, wide_only=True)
    _need_float("solve", B, wide_only=True)
    n = _need_square("solve", A)
    if A.dtype != B.dtype:
        raise TypeError(f"linalg.solve: A ({_name(A)}) and B ({_name(B)}) must have the same dtype")
    if not left:
        return solve(A.transpose(-2, -1), B.transpose(-2, -1)).transpose(-2, -1)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = B.unsqueeze(-1) if vector else B
    if b.shape[-2] != n:
        raise ValueError(
            f"linalg.solve: B's rows ({b.shape[-2]}) must match A's size {n} (A {tuple(A.shape)}, B {tuple(B.shape)})"
        )
    batch = _broadcast(tuple(A.shape[:-2]), tuple(b.shape[:-2]), A, B)
    a = A.expand(*batch, n, n)
    b = b.expand(*batch, n, b.shape[-1])
    x = _gauss_jordan("solve", a, b)
    return x.squeeze(-1) if vector else x


def _broadcast(s1: tuple[int, ...], s2: tuple[int, ...], A: Tensor, B: Tensor) -> tuple[int, ...]:  # noqa: N803
    out = []
    for i in range(max(len(s1), len(s2))):
        x = s1[len(s1) - 1 - i] if i < len(s1) else 1
        y = s2[len(s2) - 1 - i] if i < len(s2) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(
                f"linalg.solve: the batch shapes of A {tuple(A.shape)} and B {tuple(B.shape)} do not broadcast"
            )
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


def _lu_diagonal(fn: str, a: Tensor) -> tuple[Tensor, Tensor]:
    """The diagonal of ``U`` in ``P A = L U`` (partial pivoting) and the permutation's sign."""
    n = a.shape[-1]
    m = a
    rows = _core.arange(n, device=a.device)
    sign = _core.ones(tuple(a.shape[:-2]), dtype=a.dtype, device=a.device)
    for k in range(n):
        m, swapped = _pivot_swap(m, k, n)
        sign = _core.where(swapped, -sign, sign)
        pivot = m[..., k : k + 1, k : k + 1]
        zero = pivot == 0
        # A zero pivot leaves its column as it is (the determinant is 0 either way).
        safe = _core.where(zero, 1.0, pivot)
        factor = _core.where((rows > k).unsqueeze(-1), m[..., :, k : k + 1] / safe, 0.0)
        factor = _core.where(zero, 0.0, factor)
        m = m - factor * m[..., k : k + 1, :]
    return m.diagonal(0, -2, -1), sign


def det(A: Tensor) -> Tensor:  # noqa: N803
    """The determinant of each square matrix in ``A``: the product of the pivots of an LU
    elimination with partial pivoting, times the sign of its row permutation."""
    _need_float("det", A, wide_only=True)
    _need_square("det", A)
    d, sign = _lu_diagonal("det", A)
    return sign * d.prod(-1)


def slogdet(A: Tensor) -> slogdet_result:  # noqa: N803
    """``(sign, logabsdet)`` of each square matrix in ``A``: the determinant's sign and the
    log of its magnitude (``(0, -inf)`` for a singular matrix), without overflow."""
    _need_float("slogdet", A, wide_only=True)
    _need_square("slogdet", A)
    d, sign = _lu_diagonal("slogdet", A)
    sign = sign * d.sign().prod(-1)
    logabs = d.abs().log().sum(-1)
    return slogdet_result(sign, logabs)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:  # noqa: N803
    """The Cholesky factor ``L`` (lower triangular, positive diagonal, ``A = L L^T``) of each
    symmetric positive-definite matrix in ``A`` (``upper=True``: ``L^T``). Only the lower
    triangle of ``A`` is read. A matrix that is not positive-definite raises on the CPU."""
    _need_float("cholesky", A, wide_only=True)
    n = _need_square("cholesky", A)
    check = _host_checks(A)
    cols: list[Tensor] = []
    rows = _core.arange(n, device=A.device)
    for j in range(n):
        # Column j of A less the contributions of the columns already found.
        c = A[..., :, j]
        if cols:
            left = _core.stack(cols, -1)  # (…, n, j)
            c = c - left.matmul(left[..., j, :].unsqueeze(-1)).squeeze(-1)
        d = c[..., j : j + 1]
        if check and d.numel() and bool((d <= 0).logical_or(d.isnan()).any()):
            raise RuntimeError(
                f"linalg.cholesky: the input is not positive-definite (the leading minor of order {j + 1} "
                f"is not positive-definite; shape {tuple(A.shape)}, {_name(A)})"
            )
        root = d.sqrt()
        col = _core.where(rows > j, c / root, 0.0)
        col = _core.where(rows == j, root, col)
        cols.append(col)
    L = _core.stack(cols, -1) if cols else A.clone()  # noqa: N806
    return L.transpose(-2, -1) if upper else L


# ---------------------------------------------------------------------------
# torch-level functions built on the above (``fg.logdet``, ``fg.cdist``)
# ---------------------------------------------------------------------------


def logdet(A: Tensor) -> Tensor:  # noqa: N803
    """``log(det(A))`` of each square matrix: NaN where the determinant is negative,
    ``-inf`` where it is 0 (``torch.logdet``)."""
    _need_float("logdet", A, wide_only=True)
    _need_square("logdet", A)
    sign, logabs = slogdet(A)
    return _core.where(sign < 0, math.nan, logabs)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` ``(…, P, M)`` and each row of
    ``x2`` ``(…, R, M)``: ``(…, P, R)``, batch dims broadcast (``torch.cdist``).

    Always the direct form ``‖x1_i - x2_j‖_p`` (O(P·R·M) memory): ``compute_mode`` is
    accepted and ignored; PyTorch's matrix-product shortcut for ``p = 2`` on larger inputs
    is faster and less accurate. The gradient at a zero distance is 0, as PyTorch's."""
    _need_float("cdist", x1)
    _need_float("cdist", x2)
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(
            f"cdist: x1 (…, P, M) and x2 (…, R, M) need the same M, got shapes {tuple(x1.shape)} and {tuple(x2.shape)}"
        )
    if x1.dtype != x2.dtype:
        raise TypeError(f"cdist: x1 ({_name(x1)}) and x2 ({_name(x2)}) must have the same dtype")
    if p < 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    if compute_mode not in (
        None,
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    ):
        raise ValueError(f"cdist: unknown compute_mode {compute_mode!r}")
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if diff.shape[-1] == 0:  # empty rows: every distance is 0
        return diff.abs().sum(-1)
    return vector_norm(diff, p, -1)
