"""More TensorFlow 1.x op names that tutorials use (``convert_to_tensor``, ``einsum``, the
pre-1.0 arithmetic names, ...), re-exported by :mod:`._ops`."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

import ferrograd as fg  # noqa: E402 - the package is initialised before its compat faces

from ._framework import Tensor, _constant, _convert, as_dtype, float32, int64
from ._ops import (
    _axes,
    _binary,
    _graph_of,
    _keep,
    _static_ints,
    _unary,
    builtins_range,
    multiply,
    subtract,
)

__all__ = [
    "convert_to_tensor",
    "count_nonzero",
    "cumsum",
    "einsum",
    "eye",
    "is_finite",
    "is_inf",
    "is_nan",
    "matrix_transpose",
    "mul",
    "norm",
    "reverse",
    "reverse_v2",
    "slice",
    "sub",
    "tensordot",
]

# ----------------------------------------------------------------------------- more names tutorials use


def convert_to_tensor(
    value: Any, dtype: Any = None, name: str | None = None, preferred_dtype: Any = None
) -> Tensor:
    """``value`` as a tensor of this graph: a tensor as it is (its dtype must match ``dtype``), data as a constant."""
    if isinstance(value, Tensor):
        if dtype is not None and as_dtype(dtype) != value.dtype:
            raise ValueError(
                f"convert_to_tensor: a {value.dtype.name} tensor {value.name} was given where {as_dtype(dtype).name} "
                "is requested (use tf.cast)"
            )
        return value
    d = dtype if dtype is not None else preferred_dtype
    return _constant(value, d, name, None)


def is_nan(x: Any, name: str | None = None) -> Tensor:
    """Where ``x`` is NaN (a bool tensor)."""
    return _unary(lambda a: a.isnan(), x, "IsNan", name)


def is_inf(x: Any, name: str | None = None) -> Tensor:
    """Where ``x`` is +inf or -inf."""
    return _unary(lambda a: a.isinf(), x, "IsInf", name)


def is_finite(x: Any, name: str | None = None) -> Tensor:
    """Where ``x`` is neither NaN nor infinite."""
    return _unary(lambda a: a.isfinite(), x, "IsFinite", name)


def _one_axis(t: Tensor, axis: Any, op: str) -> int:
    ax = _static_ints(axis, "axis")
    if len(ax) != 1:
        raise ValueError(f"{op}: axis must be one int, got {axis!r}")
    rank = len(t._shape) if t._shape is not None else None
    a = ax[0]
    if rank is not None and not -rank <= a < builtins.max(rank, 1):
        raise ValueError(f"{op}: axis {a} is out of range for {t.name} of rank {rank}")
    return a


def cumsum(
    x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False, name: str | None = None
) -> Tensor:
    """Running sums along ``axis``; ``exclusive`` leaves each element out of its own sum,
    ``reverse`` sums from the end."""
    t = _convert(x)
    a = _one_axis(t, axis, "cumsum")

    def fn(v: Any) -> Any:
        w = v.flip(a) if reverse else v
        s = fg.cumsum(w, a)
        if exclusive:
            s = s - w
        return s.flip(a) if reverse else s

    return t._graph._apply(fn, (t,), "Cumsum", name)


def reverse(tensor: Any, axis: Any, name: str | None = None) -> Tensor:
    """``tensor`` with the order of the dims ``axis`` (a list) reversed."""
    t = _convert(tensor)
    axes = _static_ints(axis, "axis")
    return _unary(lambda v: v.flip(*axes) if axes else v.clone(), t, "ReverseV2", name)


reverse_v2 = reverse


def slice(input_: Any, begin: Any, size: Any, name: str | None = None) -> Tensor:  # noqa: A001
    """The block of ``input_`` starting at ``begin`` with ``size`` elements per dim (-1: to the end)."""
    t = _convert(input_)
    b = _static_ints(begin, "begin")
    s = _static_ints(size, "size")
    if t._shape is not None and not (len(b) == len(s) == len(t._shape)):
        raise ValueError(
            f"slice: begin {b} and size {s} must have one entry per dim of {t.name} (shape {_shape_str(t)})"
        )
    for i, (lo, n) in enumerate(zip(b, s, strict=True)):
        dim = t._shape[i] if t._shape is not None else None
        if lo < 0 or n < -1 or (isinstance(dim, int) and (lo > dim or (n >= 0 and lo + n > dim))):
            raise ValueError(
                f"slice: begin {b} and size {s} leave {t.name} (shape {_shape_str(t)}) at dim {i}"
            )

    def fn(v: Any) -> Any:
        for i, (lo, n) in enumerate(zip(b, s, strict=True)):
            v = v.narrow(i, lo, (v.shape[i] - lo) if n == -1 else n)
        return v.clone()

    return t._graph._apply(fn, (t,), "Slice", name)


def _shape_str(t: Tensor) -> str:
    return (
        "unknown"
        if t._shape is None
        else "(" + ", ".join("?" if d is None else str(d) for d in t._shape) + ")"
    )


def eye(
    num_rows: int,
    num_columns: int | None = None,
    batch_shape: Any = None,
    dtype: Any = float32,
    name: str | None = None,
) -> Tensor:
    """The identity matrix (``num_rows`` x ``num_columns``), repeated over ``batch_shape``."""
    m = np.eye(int(num_rows), int(num_columns if num_columns is not None else num_rows))
    if batch_shape is not None:
        m = np.broadcast_to(m, (*_static_ints(batch_shape, "batch_shape"), *m.shape)).copy()
    return _constant(m.astype(as_dtype(dtype).as_numpy_dtype), dtype, name or "eye", None)


def count_nonzero(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    dtype: Any = int64,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """How many elements are not zero, over ``axis`` (every axis when None), as ``dtype``."""
    t = _convert(input_tensor)
    axes = _axes(axis, reduction_indices)
    keep = _keep(keepdims, keep_dims)
    d = as_dtype(dtype)

    def fn(v: Any) -> Any:
        nz = (v != 0).to(fg.int64)
        s = nz.sum() if axes is None else nz.sum(dim=axes, keepdim=keep)
        if axes is None and keep:
            s = s.reshape([1] * v.dim())
        return s.to(d._fg)

    return t._graph._apply(fn, (t,), "CountNonzero", name)


def norm(
    tensor: Any,
    ord: Any = "euclidean",
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    keep_dims: Any = None,
) -> Tensor:  # noqa: A002
    """The vector norm of ``tensor`` (flattened when ``axis`` is None): ``ord`` 'euclidean'/2, 1 or np.inf."""
    t = _convert(tensor)
    keep = _keep(keepdims, keep_dims)
    p = 2 if ord in ("euclidean", "fro", 2, 2.0) else ord
    if p not in (1, 1.0, 2, np.inf):
        raise ValueError(f"norm: ord must be 'euclidean', 1, 2 or np.inf for a vector norm, got {ord!r}")
    axes = None if axis is None else _static_ints(axis, "axis")
    if axes is not None and len(axes) != 1:
        raise ValueError(f"norm: only vector norms (one axis) are supported, got axis={axis!r}")

    def fn(v: Any) -> Any:
        a = v.abs()
        dims = list(builtins_range(v.dim())) if axes is None else axes
        if p == np.inf:
            r = a.amax(dim=dims, keepdim=keep)
        elif p in (1, 1.0):
            r = a.sum(dim=dims, keepdim=keep)
        else:
            r = (v * v).sum(dim=dims, keepdim=keep).sqrt()
        return r

    return t._graph._apply(fn, (t,), "Norm", name)


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """Swap the last two dims."""
    return _unary(lambda x: x.transpose(-2, -1).clone(), a, "MatrixTranspose", name)


def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Tensor:
    """Sum of products over ``axes`` (an int: the last n of ``a`` with the first n of ``b``; or two lists)."""
    if isinstance(axes, (int, np.integer)):
        dims: Any = int(axes)
    else:
        pa, pb = axes
        dims = (_static_ints(pa, "axes"), _static_ints(pb, "axes"))
    return _binary(lambda x, y: fg.tensordot(x, y, dims=dims), a, b, "Tensordot", name)


def einsum(equation: str, *inputs: Any, name: str | None = None, **kwargs: Any) -> Tensor:
    """Einstein summation over ``inputs`` (``equation`` such as ``"ij,jk->ik"``)."""
    ts = [_convert(x) for x in inputs]
    if not ts:
        raise ValueError("einsum: give at least one input")
    return _graph_of(ts)._apply(lambda *vs: fg.einsum(equation, *vs), tuple(ts), "Einsum", name)


# The pre-1.0 names of the arithmetic ops.
def mul(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x * y`` (the pre-1.0 name of :func:`multiply`)."""
    return multiply(x, y, name)


def sub(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x - y`` (the pre-1.0 name of :func:`subtract`)."""
    return subtract(x, y, name)
