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

The factorizations ``qr``, ``eigh``/``eigvalsh`` and ``svd``/``svdvals`` run on the
host: the input is read into float64 and factored by NumPy's LAPACK routines, the
factors come back in the input's dtype on its device, and one autograd node per call
carries the standard backward rule written in tensor ops (so gradients run on any
device, to any order). ``pinv``, ``lstsq``, ``matrix_rank``, ``cond`` and
``matrix_norm`` with ``ord`` 2, -2 or ``"nuc"`` compose from them; ``matrix_exp`` is
a scaling-and-squaring Taylor polynomial in tensor ops. None of these can be captured
into a graph (``TraceError``): the factorizations run outside it, and ``matrix_exp``'s
number of squarings depends on the data. ``eig``/``eigvals`` raise: their results are
complex, and ferrograd has no complex dtypes.
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
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "lstsq",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
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
    (largest/smallest absolute row sum), 1/-1 (largest/smallest absolute column sum),
    ``"nuc"`` (sum of the singular values), 2/-2 (largest/smallest singular value; these
    three run the SVD on the host, see :func:`svd`)."""
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
        if _name(A) not in ("float32", "float64"):
            A = A.to(_core.float32)  # noqa: N806
        moved = A.movedim((r, c), (-2, -1))
        s = svdvals(moved)
        if s.shape[-1] == 0 and ord != "nuc":
            raise RuntimeError(
                f"linalg.matrix_norm: ord={ord!r} of an empty matrix is undefined (shape {tuple(A.shape)})"
            )
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            for axis in sorted((r, c)):
                out = out.unsqueeze(axis)
        return out
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
    return _gauss_jordan_flagged(fn, a, rhs, _host_checks(a))[0]


def _gauss_jordan_flagged(fn: str, a: Tensor, rhs: Tensor, check: bool) -> tuple[Tensor, Tensor | None]:
    """``_gauss_jordan``; with ``check`` False, also a bool per matrix: whether it met a
    zero pivot (singular; its result is then finite garbage, computed with pivot 1)."""
    n = a.shape[-1]
    m = _core.cat([a, rhs], -1)
    rows = _core.arange(n, device=a.device)
    singular = None
    for k in range(n):
        m, _ = _pivot_swap(m, k, n)
        pivot = m[..., k : k + 1, k : k + 1]  # (…, 1, 1)
        if check and m.numel() and bool((pivot == 0).any()):
            raise RuntimeError(
                f"linalg.{fn}: the input matrix is singular (no nonzero pivot in column {k}; "
                f"shape {tuple(a.shape)}, {_name(a)})"
            )
        if not check:
            zero = pivot == 0
            singular = zero if singular is None else singular | zero
            pivot = _core.where(zero, 1.0, pivot)
        row = m[..., k : k + 1, :] / pivot  # (…, 1, w)
        factor = _core.where((rows == k).unsqueeze(-1), 0.0, m[..., :, k : k + 1])  # (…, n, 1)
        m = _core.where((rows == k).unsqueeze(-1), row, m - factor * row)
    flags = None if singular is None else singular.squeeze(-1).squeeze(-1)
    return m[..., :, n:], flags


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


# ---------------------------------------------------------------------------
# decompositions: QR, eigh, SVD and what builds on them
# ---------------------------------------------------------------------------
#
# The factorizations run on the host: the input (any device) is read into a
# float64 NumPy array, factored by NumPy's LAPACK routines (Householder QR,
# the symmetric tridiagonal eigensolver, divide-and-conquer SVD), and the
# factors come back as ordinary tensors of the input's dtype on its device.
# Each factorization records one autograd node whose backward is the standard
# rule written with tensor ops, so gradients run on any device and to any
# order. A graph capture cannot hold a host computation: the factorizations
# raise ``TraceError`` inside ``fg.compile`` / ``fg.Graph``.


class qr_result(NamedTuple):  # noqa: N801 - PyTorch's name for the result type
    """``(Q, R)`` of :func:`qr`."""

    Q: Tensor
    R: Tensor


class eigh_result(NamedTuple):  # noqa: N801
    """``(eigenvalues, eigenvectors)`` of :func:`eigh`."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class svd_result(NamedTuple):  # noqa: N801
    """``(U, S, Vh)`` of :func:`svd`."""

    U: Tensor
    S: Tensor
    Vh: Tensor


class lstsq_result(NamedTuple):  # noqa: N801
    """``(solution, residuals, rank, singular_values)`` of :func:`lstsq`."""

    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


def _np() -> Any:
    import numpy

    return numpy


def _need_matrix(fn: str, a: Any) -> Tensor:
    _need_float(fn, a, wide_only=True)
    if a.ndim < 2:
        raise ValueError(f"linalg.{fn}: A must have at least 2 dims (..., m, n), got shape {tuple(a.shape)}")
    return a


def _to_host(fn: str, a: Tensor) -> Any:
    """``a`` as a float64 NumPy array; refuses inside a graph capture."""
    if _capture.is_capturing() or _core._trace_recording():
        raise _core.TraceError(
            f"linalg.{fn}: the factorization runs on the host and cannot be captured into a graph; "
            "call it outside fg.compile (or compile with fallback='eager')"
        )
    arr = a.detach().cpu().numpy().astype("float64")
    if arr.size and not _np().isfinite(arr).all():
        raise ValueError(f"linalg.{fn}: the input of shape {tuple(a.shape)} contains inf or NaN")
    return arr


def _from_host(arr: Any, like: Tensor) -> Tensor:
    np = _np()
    t = _core.from_numpy(np.ascontiguousarray(np.asarray(arr, dtype=np.float64)).astype(_name(like)))
    return t.to(like.device) if str(like.device) != "cpu" else t


def _record(
    name: str,
    inputs: list[Tensor],
    outs: list[Tensor],
    rule: Any,
    diff: list[bool] | None = None,
) -> None:
    """Record one node: ``rule(outs, grads)`` gives the inputs' gradients from the
    outputs (saved) and their gradients (``None`` where unused)."""
    from ._grad_mode import is_grad_enabled

    if not (is_grad_enabled() and any(t.requires_grad for t in inputs)):
        return
    saved = list(inputs) + list(outs)
    saved_output = [None] * len(inputs) + list(range(len(outs)))

    def _rule(vals: list[Tensor], grads: list[Tensor | None], needs: list[bool]) -> list[Tensor | None]:
        return rule(vals[: len(inputs)], vals[len(inputs) :], grads)

    _core._record_function(
        name,
        _rule,
        inputs,
        outs,
        saved,
        saved_output,
        [False] * len(outs),
        diff if diff is not None else [True] * len(outs),
    )


def _mT(x: Tensor) -> Tensor:  # noqa: N802
    return x.transpose(-2, -1)


def _eye_mask(n: int, like: Tensor) -> Tensor:
    return _core.eye(n, dtype=_core.bool, device=like.device) if n else _core.zeros((0, 0), dtype=_core.bool)


# -- eigh ---------------------------------------------------------------------


def _eigh_backward(a: Tensor, L: Tensor, V: Tensor, gL: Tensor | None, gV: Tensor | None) -> Tensor:  # noqa: N803
    n = a.shape[-1]
    inner = _core.zeros(tuple(a.shape), dtype=a.dtype, device=a.device)
    if gV is not None:
        x = _mT(V) @ gV
        x = (x - _mT(x)) * 0.5
        eye = _eye_mask(n, a)
        gap = L.unsqueeze(-2) - L.unsqueeze(-1)  # gap[i, j] = L[j] - L[i]
        inner = _core.where(eye, 0.0, x / _core.where(eye, 1.0, gap))
    if gL is not None:
        inner = inner + gL.diag_embed()
    return V @ inner @ _mT(V)


def eigh(A: Tensor, UPLO: str = "L") -> eigh_result:  # noqa: N803
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a batch of
    real symmetric matrices, read from the lower (``UPLO="L"``) or upper triangle.

    Each eigenvector is defined up to its sign, and up to a rotation inside the
    eigenspace of a repeated eigenvalue; the gradient (``V (diag(gL) + F * skew(V^T gV)) V^T``
    with ``F[i, j] = 1 / (L[j] - L[i])``) is finite only for distinct eigenvalues when
    the eigenvectors are used. Runs on the host (on a GPU input: one download)."""
    _need_matrix("eigh", A)
    _need_square("eigh", A)
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    arr = _to_host("eigh", A)
    np = _np()
    if arr.size:
        w, v = np.linalg.eigh(arr, UPLO=UPLO)
    else:
        w, v = np.zeros((*arr.shape[:-1],)), np.zeros(arr.shape)
    L, V = _from_host(w, A), _from_host(v, A)  # noqa: N806

    def rule(ins: list[Tensor], outs: list[Tensor], grads: list[Tensor | None]) -> list[Tensor | None]:
        return [_eigh_backward(ins[0], outs[0], outs[1], grads[0], grads[1])]

    _record("LinalgEighBackward", [A], [L, V], rule)
    return eigh_result(L, V)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803
    """The eigenvalues (ascending) of a batch of real symmetric matrices (see :func:`eigh`)."""
    return eigh(A, UPLO).eigenvalues


def eig(A: Tensor) -> Any:  # noqa: N803
    """Not available: the eigenvalues of a general real matrix are complex, and
    ferrograd has no complex dtypes. Raises ``TypeError`` (use :func:`eigh` for
    symmetric matrices)."""
    raise TypeError(
        f"linalg.eig: the eigen-decomposition of a general matrix returns complex tensors, and ferrograd has no "
        f"complex dtypes (input of shape {tuple(getattr(A, 'shape', ()))}); for symmetric matrices use linalg.eigh"
    )


def eigvals(A: Tensor) -> Any:  # noqa: N803
    """Not available: the eigenvalues of a general real matrix are complex (see :func:`eig`)."""
    raise TypeError(
        f"linalg.eigvals: the eigenvalues of a general matrix are complex, and ferrograd has no complex dtypes "
        f"(input of shape {tuple(getattr(A, 'shape', ()))}); for symmetric matrices use linalg.eigvalsh"
    )


# -- SVD ----------------------------------------------------------------------


def _svd_backward(
    a: Tensor,
    U: Tensor,  # noqa: N803
    S: Tensor,  # noqa: N803
    Vh: Tensor,  # noqa: N803
    gU: Tensor | None,  # noqa: N803
    gS: Tensor | None,  # noqa: N803
    gVh: Tensor | None,  # noqa: N803
) -> Tensor:
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    U, Vh = U[..., :, :k], Vh[..., :k, :]  # noqa: N806 - full_matrices: the extra columns carry no gradient
    if gU is not None:
        gU = gU[..., :, :k]  # noqa: N806
    if gVh is not None:
        gVh = gVh[..., :k, :]  # noqa: N806
    V = _mT(Vh)  # noqa: N806
    inner = _core.zeros((*a.shape[:-2], k, k), dtype=a.dtype, device=a.device)
    if gS is not None:
        inner = inner + gS.diag_embed()
    if gU is None and gVh is None:
        return U @ inner @ Vh
    eye = _eye_mask(k, a)
    s2 = S * S
    gap = s2.unsqueeze(-2) - s2.unsqueeze(-1)  # gap[i, j] = s_j^2 - s_i^2
    f = _core.where(eye, 0.0, 1.0 / _core.where(eye, 1.0, gap))
    out = None
    if gU is not None:
        j = f * (_mT(U) @ gU - _mT(gU) @ U)
        inner = inner + j * S.unsqueeze(-2)
        if m > k:
            proj = gU - U @ (_mT(U) @ gU)
            out = (proj / S.unsqueeze(-2)) @ Vh
    if gVh is not None:
        gV = _mT(gVh)  # noqa: N806
        kk = f * (_mT(V) @ gV - _mT(gV) @ V)
        inner = inner + S.unsqueeze(-1) * kk
        if n > k:
            proj = gV - V @ (_mT(V) @ gV)
            extra = U @ (_mT(proj) / S.unsqueeze(-1))
            out = extra if out is None else out + extra
    res = U @ inner @ Vh
    return res if out is None else res + out


def _svd(fn: str, A: Tensor, full_matrices: bool) -> svd_result:  # noqa: N803
    _need_matrix(fn, A)
    arr = _to_host(fn, A)
    np = _np()
    m, n = arr.shape[-2], arr.shape[-1]
    k = min(m, n)
    batch = arr.shape[:-2]
    if arr.size:
        u, s, vh = np.linalg.svd(arr, full_matrices=full_matrices)
    else:
        um, vn = (m, n) if full_matrices else (k, k)
        u = np.broadcast_to(np.eye(m, um), (*batch, m, um))
        s = np.zeros((*batch, k))
        vh = np.broadcast_to(np.eye(vn, n), (*batch, vn, n))
    U, S, Vh = _from_host(u, A), _from_host(s, A), _from_host(vh, A)  # noqa: N806

    def rule(ins: list[Tensor], outs: list[Tensor], grads: list[Tensor | None]) -> list[Tensor | None]:
        return [_svd_backward(ins[0], *outs, *grads)]

    _record("LinalgSvdBackward", [A], [U, S, Vh], rule)
    return svd_result(U, S, Vh)


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> svd_result:  # noqa: N803
    """The singular value decomposition ``A = U diag(S) Vh`` of a batch of real
    matrices: ``S`` descending, ``U``/``Vh`` with ``min(m, n)`` columns/rows
    (``full_matrices=False``) or square (``True``, the default).

    Singular vectors are defined up to a common sign per pair (and a rotation
    for repeated singular values); the gradient is finite for distinct nonzero
    singular values and ignores the extra columns of a full ``U``/``Vh``.
    Runs on the host (on a GPU input: one download). ``driver`` is accepted and
    ignored (it names CUDA solvers in PyTorch)."""
    del driver
    return _svd("svd", A, full_matrices)


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:  # noqa: N803
    """The singular values of a batch of matrices, descending (see :func:`svd`);
    their gradient ``U diag(gS) Vh`` is defined everywhere they are distinct."""
    del driver
    return _svd("svdvals", A, False).S


# -- QR -----------------------------------------------------------------------


def _qr_tall_backward(
    R: Tensor,  # noqa: N803
    Q: Tensor,  # noqa: N803
    gQ: Tensor | None,  # noqa: N803
    gR: Tensor | None,  # noqa: N803
) -> Tensor:
    # A = QR with m >= n: gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q,
    # copyltu(M) = the symmetric matrix with M's lower triangle.
    n = R.shape[-1]
    m_ = _core.zeros(tuple(R.shape), dtype=R.dtype, device=R.device)
    if gR is not None:
        m_ = m_ + R @ _mT(gR)
    if gQ is not None:
        m_ = m_ - _mT(gQ) @ Q
    low = m_.tril(-1)
    sym = low + _mT(low) + m_.diagonal(0, -2, -1).diag_embed()
    b = Q @ sym
    if gQ is not None:
        b = b + gQ
    if n == 0:
        return b
    return _mT(solve(R, _mT(b)))


def _qr_tall(A: Tensor, mode: str) -> qr_result:  # noqa: N803
    """``A`` (m >= n) reduced or complete, from LAPACK, with the m >= n rule."""
    arr = _to_host("qr", A)
    np = _np()
    m, n = arr.shape[-2], arr.shape[-1]
    if arr.size:
        q, r = np.linalg.qr(arr, mode=mode)
    else:
        cols = m if mode == "complete" else n
        q = np.broadcast_to(np.eye(m, cols), (*arr.shape[:-2], m, cols))
        r = np.zeros((*arr.shape[:-2], cols, n))
    Q, R = _from_host(q, A), _from_host(r, A)  # noqa: N806
    complete_tall = mode == "complete" and m > n

    def rule(ins: list[Tensor], outs: list[Tensor], grads: list[Tensor | None]) -> list[Tensor | None]:
        if complete_tall and grads[0] is not None:
            raise RuntimeError(
                f"linalg.qr: the gradient of Q with mode='complete' is not defined for a tall input "
                f"(shape {tuple(ins[0].shape)}: the extra columns of Q are not unique); use mode='reduced'"
            )
        q_, r_ = outs
        if complete_tall:
            r_ = r_[..., :n, :]
            q_ = q_[..., :, :n]
        g_r = grads[1]
        if complete_tall and g_r is not None:
            g_r = g_r[..., :n, :]
        return [_qr_tall_backward(r_, q_, grads[0], g_r)]

    _record("LinalgQrBackward", [A], [Q, R], rule)
    return qr_result(Q, R)


def qr(A: Tensor, mode: str = "reduced") -> qr_result:  # noqa: N803
    """The QR decomposition ``A = Q R`` of a batch of real ``m x n`` matrices
    (Householder, as LAPACK's ``geqrf``): ``Q`` with orthonormal columns, ``R`` upper
    triangular. ``mode="reduced"``: ``Q`` is ``m x k``, ``R`` ``k x n``
    (``k = min(m, n)``); ``"complete"``: ``Q`` is ``m x m``, ``R`` ``m x n``; ``"r"``:
    only ``R`` (``Q`` is an empty tensor).

    The signs follow LAPACK (``R``'s diagonal may be negative), as PyTorch's. The
    gradient is defined for ``m >= n`` (``R`` square nonsingular) and, for wide
    inputs, through ``A = Q [U | Q^T Y]``; with ``"complete"`` on a tall input only
    ``R`` is differentiable. Unlike PyTorch, ``mode="r"`` is differentiable too.
    Runs on the host (on a GPU input: one download)."""
    _need_matrix("qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = A.shape[-2], A.shape[-1]
    if m >= n:
        q, r = _qr_tall(A, "complete" if mode == "complete" else "reduced")
    else:
        # Wide: the first m columns X = Q U fix Q; the rest are Q^T Y.
        q, u = _qr_tall(A[..., :, :m], "reduced")
        r = _core.cat([u, _mT(q) @ A[..., :, m:]], -1)
    if mode == "r":
        return qr_result(_core.zeros((0,), dtype=A.dtype, device=A.device), r)
    return qr_result(q, r)


# -- built on the factorizations ----------------------------------------------


def _default_rtol(A: Tensor, atol: Any, rtol: Any) -> Any:  # noqa: N803
    eps = 2.220446049250313e-16 if _name(A) == "float64" else 1.1920928955078125e-07
    if rtol is None:
        given = atol is not None and not (isinstance(atol, (builtins.int, builtins.float)) and atol == 0)
        rtol = 0.0 if given else eps * max(A.shape[-2], A.shape[-1])
    return 0.0 if atol is None else atol, rtol


def _cutoff(smax: Tensor, atol: Any, rtol: Any) -> Tensor:
    """max(atol, rtol * smax), batched (atol/rtol numbers or broadcastable tensors)."""
    tol_r = smax * rtol
    if isinstance(atol, Tensor):
        t = atol.to(smax.dtype)
        return _core.where(t > tol_r, t, tol_r)
    return tol_r.clamp(min=float(atol))


def _pinv_backward(a: Tensor, p: Tensor, g: Tensor) -> Tensor:
    """The gradient of ``p = pinv(a)`` at constant rank, from
    ``dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P``."""
    pt, gt = _mT(p), _mT(g)
    ap, pa = a @ p, p @ a
    out = -(pt @ g @ pt)
    out = out + (gt @ p - ap @ (gt @ p)) @ pt
    out = out + (pt @ p) @ (gt - gt @ pa)
    return out


def pinv(
    A: Tensor,  # noqa: N803
    *,
    atol: float | Tensor | None = None,
    rtol: float | Tensor | None = None,
    hermitian: bool = False,
) -> Tensor:
    """The Moore–Penrose pseudo-inverse of a batch of matrices, from the SVD (from
    :func:`eigh` when ``hermitian=True``): singular values at or below
    ``max(atol, rtol * largest)`` count as zero. ``rtol`` defaults to
    ``eps * max(m, n)`` when ``atol`` is not given (or 0), else to 0.

    The gradient is that of the pseudo-inverse at constant rank (as PyTorch's: with
    ``hermitian=True`` it is the general matrix's, not symmetrized), in tensor ops
    of ``A`` and the result, so it runs to any order."""
    _need_matrix("pinv", A)
    atol, rtol = _default_rtol(A, atol, rtol)
    from ._grad_mode import no_grad

    with no_grad():
        a = A.detach()
        if hermitian:
            _need_square("pinv", A)
            if A.shape[-1] == 0:
                out = a.clone()
            else:
                lam, V = eigh(a)  # noqa: N806
                mag = lam.abs()
                keep = mag > _cutoff(mag.amax(-1, keepdim=True), atol, rtol)
                inv_l = _core.where(keep, 1.0 / _core.where(keep, lam, 1.0), 0.0)
                out = (V * inv_l.unsqueeze(-2)) @ _mT(V)
        else:
            U, S, Vh = _svd("pinv", a, False)  # noqa: N806
            if S.shape[-1] == 0:
                out = _core.zeros((*A.shape[:-2], A.shape[-1], A.shape[-2]), dtype=A.dtype, device=A.device)
            else:
                keep = S > _cutoff(S[..., :1], atol, rtol)
                inv_s = _core.where(keep, 1.0 / _core.where(keep, S, 1.0), 0.0)
                out = (_mT(Vh) * inv_s.unsqueeze(-2)) @ _mT(U)
    out = out.detach().clone()

    def rule(ins: list[Tensor], outs: list[Tensor], grads: list[Tensor | None]) -> list[Tensor | None]:
        return [None if grads[0] is None else _pinv_backward(ins[0], outs[0], grads[0])]

    _record("LinalgPinvBackward", [A], [out], rule)
    return out


def matrix_rank(
    A: Tensor,  # noqa: N803
    *,
    atol: float | Tensor | None = None,
    rtol: float | Tensor | None = None,
    hermitian: bool = False,
) -> Tensor:
    """The numerical rank (int64) of a batch of matrices: the number of singular
    values (eigenvalue magnitudes with ``hermitian=True``) above
    ``max(atol, rtol * largest)``; the tolerances default as in :func:`pinv`."""
    _need_matrix("matrix_rank", A)
    atol, rtol = _default_rtol(A, atol, rtol)
    from ._grad_mode import no_grad

    with no_grad():
        if hermitian:
            _need_square("matrix_rank", A)
            s = eigvalsh(A).abs()
        else:
            s = svdvals(A)
        if s.shape[-1] == 0:
            return _core.zeros(tuple(A.shape[:-2]), dtype=_core.int64, device=A.device)
        keep = s > _cutoff(s.amax(-1, keepdim=True), atol, rtol)
        return keep.to(_core.int64).sum(-1)


def lstsq(
    A: Tensor,  # noqa: N803
    B: Tensor,  # noqa: N803
    rcond: float | None = None,
    *,
    driver: str | None = None,
) -> lstsq_result:
    """The least-squares solution ``X`` minimizing ``||A X - B||`` (the minimum-norm one
    when ``A`` is rank deficient), for a batch of ``m x n`` matrices ``A`` and
    ``m x k`` right-hand sides ``B`` (or ``B`` of ``A``'s shape less its last dim: vectors).

    Computed as ``pinv(A) @ B`` from the SVD, singular values at or below
    ``rcond * largest`` (default ``eps * max(m, n)``) counted as zero. The fields
    are filled as PyTorch's CPU drivers fill them: ``driver`` ``"gelsy"`` (the
    default): ``solution`` and ``rank``; ``"gelsd"``/``"gelss"``: all four;
    ``"gels"``: ``solution`` and, like the others but ``"gelsy"``, ``residuals`` —
    the squared residual of each column, filled only when ``m > n`` and every
    matrix has full rank. Unfilled fields are empty tensors. The solution is
    differentiable (full rank)."""
    _need_matrix("lstsq", A)
    _need_float("lstsq", B, wide_only=True)
    if A.dtype != B.dtype:
        raise TypeError(f"linalg.lstsq: A ({_name(A)}) and B ({_name(B)}) must have the same dtype")
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"linalg.lstsq: driver must be 'gels', 'gelsy', 'gelsd' or 'gelss', got {driver!r}")
    m, n = A.shape[-2], A.shape[-1]
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    if b.ndim < 2 or b.shape[-2] != m:
        raise ValueError(
            f"linalg.lstsq: B must have A's {m} rows (A {tuple(A.shape)}, B {tuple(B.shape)} of {_name(B)})"
        )
    batch = _broadcast(tuple(A.shape[:-2]), tuple(b.shape[:-2]), A, B)
    a = A.expand(*batch, m, n)
    b = b.expand(*batch, m, b.shape[-1])
    rtol = (2.220446049250313e-16 if _name(A) == "float64" else 1.1920928955078125e-07) * max(m, n)
    if rcond is not None and rcond >= 0:
        rtol = rcond
    S = svdvals(a.detach())  # noqa: N806
    if S.shape[-1]:
        rank = (S > S[..., :1] * rtol).to(_core.int64).sum(-1)
    else:
        rank = _core.zeros(batch, dtype=_core.int64, device=A.device)
    x = pinv(a, rtol=rtol) @ b
    empty = _core.zeros((0,), dtype=A.dtype, device=A.device)
    residuals = empty
    if driver != "gelsy" and m > n and builtins.bool((rank == n).all()):
        residuals = (a @ x - b).square().sum(-2)
    sol = x.squeeze(-1) if vector else x
    rank_out = rank if driver != "gels" else _core.zeros((0,), dtype=_core.int64, device=A.device)
    sv = S.detach() if driver in ("gelsd", "gelss") else empty
    return lstsq_result(sol, residuals, rank_out, sv)


def cond(A: Tensor, p: _Ord = None) -> Tensor:  # noqa: N803
    """The condition number of a batch of matrices in the norm ``p``: ``None`` or 2
    (the default): largest over smallest singular value; -2: the reciprocal; ``"nuc"``:
    ``sum(s) * sum(1 / s)``; ``"fro"``, ``inf``, ``-inf``, 1, -1:
    ``matrix_norm(A, p) * matrix_norm(inv(A), p)`` (square matrices; one whose
    elimination meets a zero pivot gives inf, as PyTorch's). The orders that use
    singular values run the SVD on the host; the others are tensor ops only."""
    _need_matrix("cond", A)
    if p is None or p in (2, -2, "nuc"):
        if p == "nuc":
            _need_square("cond", A)
        s = svdvals(A)
        if s.shape[-1] == 0:
            return _core.zeros(tuple(A.shape[:-2]), dtype=A.dtype, device=A.device)
        if p == "nuc":
            return s.sum(-1) * (1.0 / s).sum(-1)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    if p not in ("fro", math.inf, -math.inf, 1, -1):
        raise ValueError(f"linalg.cond: p must be None, 2, -2, 'fro', 'nuc', inf, -inf, 1 or -1, got {p!r}")
    _need_square("cond", A)
    if A.shape[-1] == 0:
        return _core.zeros(tuple(A.shape[:-2]), dtype=A.dtype, device=A.device)
    inverse, singular = _gauss_jordan_flagged("cond", A, _eye_like(A), False)
    value = matrix_norm(A, p) * matrix_norm(inverse, p)
    assert singular is not None
    return _core.where(singular, math.inf, value)


def matrix_exp(A: Tensor) -> Tensor:  # noqa: N803
    """The matrix exponential of a batch of square matrices, by scaling and squaring:
    a degree-18 Taylor polynomial of ``A / 2^s`` (``s`` chosen from the largest
    1-norm in the batch, read on the host, so that the scaled norm is at most 1/2),
    squared ``s`` times. Composed of tensor ops: differentiable to any order and
    runs on the GPU (one scalar read); not capturable, as ``s`` depends on the data."""
    _need_float("matrix_exp", A, wide_only=True)
    _need_square("matrix_exp", A)
    if _capture.is_capturing() or _core._trace_recording():
        raise _core.TraceError(
            "linalg.matrix_exp: its number of squarings depends on the input's norm (read on the host), "
            "so it cannot be captured into a graph"
        )
    if A.numel() == 0:
        return A.clone()
    norm1 = builtins.float(A.detach().abs().sum(-2).amax().cpu().item())
    if not math.isfinite(norm1):
        raise ValueError(f"linalg.matrix_exp: the input of shape {tuple(A.shape)} contains inf or NaN")
    s = max(0, math.ceil(math.log2(norm1 / 0.5))) if norm1 > 0.5 else 0
    x = A * (0.5**s) if s else A
    eye = _eye_like(A)
    # Horner: I + x(I + x/2 (I + x/3 (... (I + x/18))))
    acc = eye
    for k in range(18, 0, -1):
        acc = eye + (x @ acc) * (1.0 / k)
    for _ in range(s):
        acc = acc @ acc
    return acc
