"""PyTorch functions about dtypes, shapes and index grids, composed in Python.

- type promotion queries: ``promote_types``, ``result_type``, ``can_cast``,
  ``broadcast_shapes``;
- index grids and arrangements: ``tril_indices``, ``triu_indices``, ``combinations``,
  ``block_diag``, ``vander`` and the ``Tensor.unfold`` sliding window.

Promotion answers come from the engine itself (the dtype its binary ops give), so they
cannot disagree with what arithmetic does. The arrangements are built from registry
ops (``index_select``, ``pad``, ``cat``, ``cumprod``), so they are differentiable and
run on every device and in captured graphs.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _core

Tensor = _core.Tensor
dtype = _core.dtype

__all__ = [
    "block_diag",
    "broadcast_shapes",
    "can_cast",
    "combinations",
    "promote_types",
    "result_type",
    "tril_indices",
    "triu_indices",
    "vander",
]

_Number = builtins.bool | builtins.int | builtins.float


def _need_dtype(fn: str, arg: str, d: Any) -> dtype:
    if not isinstance(d, dtype):
        raise TypeError(f"{fn}(): argument '{arg}' must be a ferrograd dtype, not {type(d).__name__}")
    return d


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """The smallest dtype both ``type1`` and ``type2`` convert to without losing their
    kind (bool < integer < floating point), as binary ops promote."""
    a = _core.empty((0,), dtype=_need_dtype("promote_types", "type1", type1))
    b = _core.empty((0,), dtype=_need_dtype("promote_types", "type2", type2))
    return (a + b).dtype


def _proxy(fn: str, arg: str, x: Any) -> Tensor | _Number:
    """A stand-in that promotes as ``x`` does: an empty tensor for a tensor with
    dimensions, a 0-d one for a 0-d tensor, the number itself for a number."""
    if isinstance(x, Tensor):
        return _core.zeros((), dtype=x.dtype) if x.ndim == 0 else _core.empty((0,), dtype=x.dtype)
    if isinstance(x, _Number):
        return x
    raise TypeError(f"{fn}(): argument '{arg}' must be a Tensor or a number, not {type(x).__name__}")


def result_type(tensor1: Tensor | _Number, tensor2: Tensor | _Number) -> dtype:
    """The dtype an arithmetic op on ``tensor1`` and ``tensor2`` gives: tensors with
    dimensions decide first, then 0-d tensors, then Python numbers, each only where it
    raises the kind (a float number with an int32 tensor gives the default float)."""
    a = _proxy("result_type", "tensor1", tensor1)
    b = _proxy("result_type", "tensor2", tensor2)
    if not isinstance(a, Tensor):
        a = _core.tensor(a)
    return (a + b).dtype


def _kind(d: dtype) -> int:
    return 0 if d.is_bool else 2 if d.is_floating_point else 1


def can_cast(from_: dtype, to: dtype) -> builtins.bool:
    """Whether PyTorch's casting rule allows ``from_`` to ``to``: any cast that does not
    lower the kind (a float to an integer, or a number to bool, is refused)."""
    f = _need_dtype("can_cast", "from_", from_)
    t = _need_dtype("can_cast", "to", to)
    return _kind(f) <= _kind(t)


def broadcast_shapes(*shapes: builtins.int | Sequence[builtins.int]) -> tuple[builtins.int, ...]:
    """The shape tensors of ``shapes`` broadcast to (an int is a 1-d shape); raises
    ``RuntimeError`` naming the first shape that does not broadcast."""
    out: list[builtins.int] = []
    for i, s in enumerate(shapes):
        shape = [s] if isinstance(s, builtins.int) else list(s)
        if any(not isinstance(d, builtins.int) or d < 0 for d in shape):
            raise RuntimeError(f"broadcast_shapes(): shape {i} {tuple(shape)} is not a shape of sizes >= 0")
        n = builtins.max(len(out), len(shape))
        a = [1] * (n - len(out)) + out
        b = [1] * (n - len(shape)) + shape
        merged = []
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y and x != 1 and y != 1:
                raise RuntimeError(
                    f"broadcast_shapes(): shape {i} {tuple(shape)} does not broadcast with "
                    f"{tuple(out)} (size {y} against {x} at dim {k - n})"
                )
            merged.append(y if x == 1 else x)
        out = merged
    return tuple(out)


def _indices(fn: str, pairs: tuple[np.ndarray, np.ndarray], dt: dtype | None, device: Any) -> Tensor:
    d = dt if dt is not None else _core.int64
    if d.is_floating_point or d.is_bool:
        raise RuntimeError(f"{fn}(): dtype must be an integer type, got {d}")
    grid = np.stack(pairs).astype(np.int64).reshape(2, -1)
    out = _core.tensor(grid, dtype=d)
    return out if device is None else out.to(device)


def _check_sizes(fn: str, row: builtins.int, col: builtins.int) -> None:
    if row < 0 or col < 0:
        raise RuntimeError(f"{fn}(): row and col must be >= 0, got row={row}, col={col}")


def tril_indices(
    row: builtins.int,
    col: builtins.int,
    offset: builtins.int = 0,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    layout: Any = None,
) -> Tensor:
    """The ``2 x N`` (row, column) indices of the lower triangle of a ``row x col``
    matrix, on and below diagonal ``offset``, in row-major order."""
    _check_sizes("tril_indices", row, col)
    return _indices("tril_indices", np.tril_indices(row, offset, col), dtype, device)


def triu_indices(
    row: builtins.int,
    col: builtins.int,
    offset: builtins.int = 0,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    layout: Any = None,
) -> Tensor:
    """The ``2 x N`` (row, column) indices of the upper triangle of a ``row x col``
    matrix, on and above diagonal ``offset``, in row-major order."""
    _check_sizes("triu_indices", row, col)
    return _indices("triu_indices", np.triu_indices(row, offset, col), dtype, device)


def combinations(input: Tensor, r: builtins.int = 2, with_replacement: builtins.bool = False) -> Tensor:
    """The length-``r`` combinations of the 1-d ``input``'s elements, one per row, in
    ``itertools.combinations`` order (``combinations_with_replacement`` with
    ``with_replacement=True``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"combinations(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if input.ndim != 1:
        raise RuntimeError(f"combinations(): expects a 1-D tensor, got shape {tuple(input.shape)}")
    if r < 0:
        raise RuntimeError(f"combinations(): r must be >= 0, got {r}")
    if r == 0:
        return _core.empty((0,), dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    index = _core.tensor(idx.reshape(-1)).to(input.device)
    return input.index_select(0, index).reshape(idx.shape[0], r)


def block_diag(*tensors: Tensor) -> Tensor:
    """The block-diagonal matrix of ``tensors`` (0-d as 1x1, 1-d as a row), in their
    promoted dtype."""
    if not tensors:
        return _core.empty((1, 0))
    mats = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_diag(): argument {i} must be a Tensor, not {type(t).__name__}")
        if t.ndim > 2:
            raise RuntimeError(
                f"block_diag(): input {i} must have 2 or fewer dimensions, got shape {tuple(t.shape)}"
            )
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    out_dtype = mats[0].dtype
    for m in mats[1:]:
        out_dtype = promote_types(out_dtype, m.dtype)
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        right = width - left - m.shape[1]
        rows.append(_core.pad(m.to(out_dtype), (left, right)))
        left += m.shape[1]
    return _core.cat(rows, 0)


def vander(x: Tensor, N: builtins.int | None = None, increasing: builtins.bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-d ``x``: columns ``x**(N-1), ..., x**0`` (or
    ascending powers with ``increasing=True``); integer and bool inputs give int64. Built
    with a running product, so the gradient at ``x = 0`` is finite."""
    if not isinstance(x, Tensor):
        raise TypeError(f"vander(): argument 'x' must be a Tensor, not {type(x).__name__}")
    if x.ndim != 1:
        raise RuntimeError(f"vander(): x must be a one-dimensional tensor, got shape {tuple(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError(f"vander(): N must be non-negative, got {n}")
    if not x.dtype.is_floating_point:
        x = x.to(_core.int64)
    if n == 0:
        return _core.empty((x.shape[0], 0), dtype=x.dtype, device=x.device)
    ones = _core.ones((x.shape[0], 1), dtype=x.dtype, device=x.device)
    cols = _core.cat([ones, x.reshape(-1, 1).expand(x.shape[0], n - 1)], 1)
    out = cols.cumprod(1)
    return out if increasing else out.flip(1)


def unfold(self: Tensor, dimension: builtins.int, size: builtins.int, step: builtins.int) -> Tensor:
    """Sliding windows of ``size`` elements, ``step`` apart, along ``dimension``: that dim
    becomes the number of windows and a new last dim of ``size`` holds each window.
    Unlike PyTorch's, the result is a copy, not a view: writing into it leaves
    ``self`` unchanged."""
    nd = builtins.max(self.ndim, 1)
    if not -nd <= dimension < nd:
        raise IndexError(
            f"unfold(): dimension {dimension} is out of range for a tensor of {self.ndim} dimensions"
        )
    d = dimension % nd
    x = self.reshape(1) if self.ndim == 0 else self
    length = x.shape[d]
    if step <= 0:
        raise RuntimeError(f"unfold(): step must be > 0, got {step}")
    if not 0 <= size <= length:
        raise RuntimeError(f"unfold(): size {size} must be between 0 and the size of dimension {d}, {length}")
    windows = (length - size) // step + 1
    idx = (np.arange(windows)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    picked = x.index_select(d, _core.tensor(idx.astype(np.int64)).to(x.device))
    shape = list(x.shape)
    shape[d : d + 1] = [windows, size]
    out = picked.reshape(*shape).movedim(d + 1, -1)
    return out.reshape(size) if self.ndim == 0 else out


def install() -> None:
    """Attach ``Tensor.unfold`` (PyTorch's sliding window), unless the core has one."""
    if "unfold" not in Tensor.__dict__:
        Tensor.unfold = unfold
