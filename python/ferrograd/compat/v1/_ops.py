"""TF1's tensor and math ops, each recorded as ferrograd ops (see :mod:`._framework`)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ferrograd as fg  # noqa: E402 - the package is initialised before its compat faces

from ... import _capture, _core
from ... import graph as _fg
from ...nn import functional as F
from ._framework import (
    Operation,
    Tensor,
    TensorShape,
    _constant,
    _convert,
    _fg_dtype,
    _is_number,
    _known,
    _numpy_of,
    _probe_dims,
    _too_wide,
    as_dtype,
    control_dependencies,
    float32,
    get_default_graph,
    int32,
    int64,
)

# ----------------------------------------------------------------------------- helpers


def _graph_of(*xs: Any) -> Any:
    for x in xs:
        if isinstance(x, Tensor):
            return x._graph
        if isinstance(x, (list, tuple)):
            for v in x:
                if isinstance(v, Tensor):
                    return v._graph
    return get_default_graph()


def _unary(fn: Callable, x: Any, op_type: str, name: str | None = None) -> Tensor:
    x = _convert(x)
    return x._graph._apply(fn, (x,), op_type, name)


def _operand(v: Any, like: Tensor | None) -> Any:
    """A binary op's operand: tensors as they are, numbers raw (typed by the other side), data as constants."""
    if isinstance(v, Tensor) or (_is_number(v) and like is not None):
        return v
    if isinstance(v, bool) and like is not None:
        return v
    return _convert(v, like.dtype if like is not None and not isinstance(v, np.ndarray) else None)


def _binary(fn: Callable, a: Any, b: Any, op_type: str, name: str | None = None) -> Tensor:
    ta = a if isinstance(a, Tensor) else None
    tb = b if isinstance(b, Tensor) else None
    if ta is None and tb is None:
        a = _convert(a)
        ta = a
    a = _operand(a, tb if ta is None else ta)
    b = _operand(b, ta if tb is None else tb)
    return _graph_of(a, b)._apply(fn, (a, b), op_type, name)


def _static_ints(v: Any, what: str) -> list[int]:
    """A shape or axis list known while building (ints, a TensorShape, or a constant tensor)."""
    if isinstance(v, TensorShape):
        return _known(v.as_list())
    if isinstance(v, Tensor):
        if v._const is None:
            raise ValueError(f"{what} must be known while the graph is built (got the tensor {v.name})")
        return [int(d) for d in np.atleast_1d(v._const)]
    if isinstance(v, (int, np.integer)):
        return [int(v)]
    out = []
    for d in v:
        if isinstance(d, Tensor):
            if d._const is None:
                raise ValueError(f"{what} must be known while the graph is built (got the tensor {d.name})")
            out.append(int(np.asarray(d._const)))
        else:
            out.append(int(d))
    return out


def _axes(axis: Any, reduction_indices: Any) -> list[int] | None:
    ax = axis if axis is not None else reduction_indices
    if ax is None:
        return None
    return _static_ints(ax, "axis")


def _keep(keepdims: Any, keep_dims: Any) -> bool:
    return bool(keepdims if keepdims is not None else (keep_dims or False))


# ----------------------------------------------------------------------------- making tensors


def constant(
    value: Any, dtype: Any = None, shape: Any = None, name: str = "Const", verify_shape: bool = False
) -> Tensor:
    """A constant tensor of ``value`` (Python floats are float32 and ints int32, as in TF)."""
    return _constant(value, dtype, name, shape)


def _fill_op(shape: Any, value: float, dtype: Any, op_type: str, name: str | None) -> Tensor:
    dims = _static_ints(shape, "shape")
    d = _fg_dtype(dtype)
    t = get_default_graph()._apply(lambda: fg.full(tuple(dims), value, dtype=d), (), op_type, name)
    t._const = (
        np.full(dims, value, dtype=as_dtype(dtype).as_numpy_dtype) if int(np.prod(dims)) <= 64 else None
    )
    return t


def zeros(shape: Any, dtype: Any = float32, name: str | None = None) -> Tensor:
    """Zeros of ``shape``."""
    return _fill_op(shape, 0, dtype, "zeros", name)


def ones(shape: Any, dtype: Any = float32, name: str | None = None) -> Tensor:
    """Ones of ``shape``."""
    return _fill_op(shape, 1, dtype, "ones", name)


def fill(dims: Any, value: Any, name: str | None = None) -> Tensor:
    """A tensor of shape ``dims`` filled with ``value``."""
    arr = _numpy_of(value)
    return _fill_op(dims, arr.item(), arr.dtype, "Fill", name)


def zeros_like(tensor: Any, dtype: Any = None, name: str | None = None, optimize: bool = True) -> Tensor:
    """Zeros with the shape (and dtype, unless given) of ``tensor``."""
    t = _convert(tensor)
    d = _fg_dtype(dtype or t.dtype)
    return _unary(lambda x: fg.zeros_like(x, dtype=d), t, "ZerosLike", name)


def ones_like(tensor: Any, dtype: Any = None, name: str | None = None, optimize: bool = True) -> Tensor:
    """Ones with the shape (and dtype, unless given) of ``tensor``."""
    t = _convert(tensor)
    d = _fg_dtype(dtype or t.dtype)
    return _unary(lambda x: fg.ones_like(x, dtype=d), t, "OnesLike", name)


def _shape_arg(shape: Any) -> tuple[int, ...]:
    return tuple(_static_ints(shape, "shape"))


def random_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = float32,
    seed: Any = None,
    name: str | None = None,
) -> Tensor:
    """Samples of N(mean, stddev²), drawn again at every run."""
    dims, d = _shape_arg(shape), _fg_dtype(dtype)
    return get_default_graph()._apply(
        lambda m, s: fg.randn(dims, dtype=d) * s + m, (mean, stddev), "RandomStandardNormal", name
    )


def random_uniform(
    shape: Any,
    minval: Any = 0,
    maxval: Any = None,
    dtype: Any = float32,
    seed: Any = None,
    name: str | None = None,
) -> Tensor:
    """Uniform samples in ``[minval, maxval)`` (``maxval`` defaults to 1 for floats)."""
    dims, dt = _shape_arg(shape), as_dtype(dtype)
    d = dt._fg
    if dt.is_integer:
        if maxval is None:
            raise ValueError("Must specify maxval for integer dtype")
        lo, hi = int(minval), int(maxval)
        return get_default_graph()._apply(
            lambda: fg.randint(lo, hi, dims, dtype=d), (), "RandomUniformInt", name
        )
    hi_v = 1.0 if maxval is None else maxval
    return get_default_graph()._apply(
        lambda lo, hi: fg.rand(dims, dtype=d) * (hi - lo) + lo, (minval, hi_v), "RandomUniform", name
    )


def random_shuffle(value: Any, seed: Any = None, name: str | None = None) -> Tensor:
    """``value`` with its first dim in a random order, drawn again at each run."""
    t = _convert(value)
    if t._shape is not None and not t._shape:
        raise ValueError(f"random_shuffle: {t.name} is a scalar; it needs at least one dim")
    return t._graph._apply(lambda v: v[fg.randperm(v.shape[0])], (t,), "RandomShuffle", name)


def multinomial(
    logits: Any, num_samples: int, seed: Any = None, name: str | None = None, output_dtype: Any = int64
) -> Tensor:
    """``num_samples`` class indices per row of ``logits`` (``[batch, classes]``, unnormalized log
    probabilities), drawn with replacement at each run."""
    t = _convert(logits)
    if t._shape is not None and len(t._shape) != 2:
        raise ValueError(f"multinomial: logits must be [batch, classes], got {t.name} of shape {t._shape}")
    n, d = int(num_samples), as_dtype(output_dtype)

    def fn(v: Any) -> Any:
        probs = (v - v.amax(dim=-1, keepdim=True)).exp()
        return fg.multinomial(probs, n, replacement=True).to(d._fg)

    return t._graph._apply(fn, (t,), "Multinomial", name)


_PHI_2 = 0.5 * (1.0 + math.erf(-2.0 / math.sqrt(2.0)))  # P(Z < -2)


def truncated_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = float32,
    seed: Any = None,
    name: str | None = None,
) -> Tensor:
    """Samples of N(mean, stddev²) restricted to two standard deviations (by inverting the CDF)."""
    dims, d = _shape_arg(shape), _fg_dtype(dtype)

    def fn(m: Any, s: Any) -> Any:
        u = fg.rand(dims, dtype=d) * (1.0 - 2.0 * _PHI_2) + _PHI_2
        z = (u * 2.0 - 1.0).erfinv() * math.sqrt(2.0)
        return z.clamp(-2.0, 2.0) * s + m

    return get_default_graph()._apply(fn, (mean, stddev), "TruncatedNormal", name)


def set_random_seed(seed: int) -> None:
    """Seed the random ops of the default graph (one generator serves every random op)."""
    get_default_graph().seed = seed
    _core.manual_seed(int(seed))


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: str = "range") -> Tensor:  # noqa: A001
    """``[start, limit)`` in steps of ``delta`` (``range(n)`` counts from 0)."""
    if limit is None:
        start, limit = 0, start
    s, lim, dl = (
        float(np.asarray(_static_ints(v, "range")[0])) if isinstance(v, Tensor) else v
        for v in (start, limit, delta)
    )
    arr = np.arange(s, lim, dl)
    if dtype is None:
        dtype = float32 if any(isinstance(v, float) for v in (s, lim, dl)) else int32
    return _constant(arr, dtype, name)


def linspace(start: Any, stop: Any, num: int, name: str | None = None) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop``."""
    return _constant(np.linspace(float(start), float(stop), int(num)), float32, name or "LinSpace")


lin_space = linspace  # the TF 1.x name


def meshgrid(*args: Any, indexing: str = "xy", name: str | None = None) -> list[Tensor]:
    """Coordinate grids of 1-D tensors: ``indexing='xy'`` (Cartesian, the default) or ``'ij'``."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    ts = [_convert(a) for a in args]
    for t in ts:
        if t._shape is not None and len(t._shape) != 1:
            raise ValueError(f"meshgrid: inputs must be 1-D, got {t.name} of shape {t._shape}")

    def fn(*xs: Any) -> tuple:
        return tuple(fg.meshgrid(*xs, indexing=indexing))

    return list(_graph_of(ts)._apply(fn, tuple(ts), "Meshgrid", name, multi=True))


def sequence_mask(lengths: Any, maxlen: Any = None, dtype: Any = None, name: str | None = None) -> Tensor:
    """``mask[..., j] = j < lengths[...]`` for ``j < maxlen`` (by default the largest length, which
    must then be known while the graph is built)."""
    t = _convert(lengths)
    if maxlen is None:
        if t._const is None:
            raise ValueError(f"sequence_mask: maxlen is needed when the lengths ({t.name}) are not constants")
        maxlen = int(np.max(t._const)) if np.size(t._const) else 0
    n = int(_numpy_of(maxlen)) if not isinstance(maxlen, int) else maxlen
    d = None if dtype is None else as_dtype(dtype)

    def fn(v: Any) -> Any:
        with _capture.suspended():
            cols = _core.tensor(np.arange(n, dtype=np.int64))
        m = _core._trace_constant(cols) < v.to(fg.int64).unsqueeze(-1)
        return m if d is None else m.to(d._fg)

    return t._graph._apply(fn, (t,), "SequenceMask", name)


def matrix_inverse(input: Any, adjoint: bool = False, name: str | None = None) -> Tensor:  # noqa: A002
    """The inverse of each square matrix in the last two dims (of its transpose with ``adjoint``)."""

    def fn(x: Any) -> Any:
        return fg.linalg.inv(x.transpose(-2, -1) if adjoint else x)

    return _unary(fn, input, "MatrixInverse", name)


def matrix_determinant(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The determinant of each square matrix in the last two dims."""
    return _unary(lambda x: fg.linalg.det(x), input, "MatrixDeterminant", name)


def matrix_diag_part(input: Any, name: str = "diag_part") -> Tensor:  # noqa: A002
    """The diagonal of each matrix in the last two dims."""
    return _unary(lambda x: x.diagonal(dim1=-2, dim2=-1), input, "MatrixDiagPart", name)


def diag_part(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The diagonal of a matrix (TF1's ``tf.diag_part`` of a rank-2 tensor)."""
    t = _convert(input)
    if t._shape is not None and len(t._shape) != 2:
        raise ValueError(f"diag_part: only matrices (rank 2) are supported, got {t.name} of shape {t._shape}")
    return _unary(lambda x: x.diagonal(), t, "DiagPart", name)


def trace(x: Any, name: str | None = None) -> Tensor:
    """The sum of the diagonal of each matrix in the last two dims."""
    return _unary(lambda v: v.diagonal(dim1=-2, dim2=-1).sum(-1), x, "Trace", name)


def placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> Tensor:
    """A value fed at each run (``feed_dict={x: ...}``); ``None`` dims take any size.

    Unknown dims at the same axis of different placeholders are taken to be
    the same size (the batch axis); ``shape=None`` accepts any shape.
    """
    g = get_default_graph()
    ts = shape if isinstance(shape, TensorShape) else TensorShape(shape)
    dims = None if ts.ndims is None else ts.as_list()
    # Unknown dims are named as ferrograd names them ("?<axis>"), so sizes stay linked across ops.
    syms: list[int | str] | None = (
        None if dims is None else [f"?{i}" if d is None else d for i, d in enumerate(dims)]
    )
    d = _fg_dtype(dtype)
    full = g._unique(name or "Placeholder")

    if _too_wide(syms):  # recorded at the fed shape at each run; probed with small sizes
        dims: Any = _probe_dims("placeholder", syms, as_dtype(dtype))  # type: ignore[arg-type]
    else:
        dims = None if syms is None else list[Any](syms)

    def fn() -> Any:
        return _fg.placeholder(d, dims, name=full)

    return g._apply(fn, (), "Placeholder", full, kind="placeholder", exact=True, ph_dims=syms)


def placeholder_with_default(input: Any, shape: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """``input`` unless fed (any tensor can be fed; this one is made to be)."""
    t = _unary(lambda x: x.clone(), input, "PlaceholderWithDefault", name)
    t.set_shape(shape)
    return t


# ----------------------------------------------------------------------------- math


def identity(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """A copy of ``input`` (runs after the current control dependencies)."""
    return _unary(lambda x: x.clone(), input, "Identity", name)


def Print(  # noqa: N802 - TF1's name
    input_: Any,
    data: Any,
    message: str | None = None,
    first_n: int | None = None,
    summarize: int | None = None,
    name: str | None = None,
) -> Tensor:
    """``input_`` unchanged; each run that computes it prints ``message`` and the values of ``data``
    (a list of tensors) to stderr, as ``[1 2 3...]`` with the first ``summarize`` (3) entries of each
    dim, the first ``first_n`` times only when given."""
    x = _convert(input_)
    ds = [_convert(d) for d in (data if isinstance(data, (list, tuple)) else [data])]
    out = _graph_of(x)._apply(lambda v, *_: v.clone(), (x, *ds), "Print", name)
    out._record().printing = (
        "" if message is None else str(message),
        ds,
        None if first_n is None else int(first_n),
        3 if summarize is None else int(summarize),
    )
    return out


def div_no_nan(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y``, and 0 where ``y`` is 0."""

    def fn(a: Any, b: Any) -> Any:
        zero = b == 0
        return fg.where(zero, a * 0, a / fg.where(zero, b * 0 + 1, b))

    return _binary(fn, x, y, "DivNoNan", name)


def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x + y`` (broadcasting)."""
    return _binary(lambda a, b: a + b, x, y, "Add", name)


def subtract(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x - y``."""
    return _binary(lambda a, b: a - b, x, y, "Sub", name)


def multiply(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x * y`` elementwise."""
    return _binary(lambda a, b: a * b, x, y, "Mul", name)


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` (true division)."""
    return _binary(lambda a, b: a / b, x, y, "RealDiv", name)


truediv = divide
div = divide


def floordiv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x // y`` (rounding down)."""
    return _binary(lambda a, b: a // b, x, y, "FloorDiv", name)


def mod(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x % y`` (the sign of ``y``, as Python)."""
    return _binary(lambda a, b: a % b, x, y, "FloorMod", name)


floormod = mod


def pow(x: Any, y: Any, name: str | None = None) -> Tensor:  # noqa: A001
    """``x ** y``."""
    return _binary(lambda a, b: a**b, x, y, "Pow", name)


def maximum(x: Any, y: Any, name: str | None = None) -> Tensor:
    """The elementwise maximum."""
    return _binary(lambda a, b: fg.maximum(*_pair(a, b)), x, y, "Maximum", name)


def minimum(x: Any, y: Any, name: str | None = None) -> Tensor:
    """The elementwise minimum."""
    return _binary(lambda a, b: fg.minimum(*_pair(a, b)), x, y, "Minimum", name)


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    if not isinstance(a, _core.Tensor):
        a = fg.full_like(b, a)
    if not isinstance(b, _core.Tensor):
        b = fg.full_like(a, b)
    return a, b


def squared_difference(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``(x - y)²``."""
    return _binary(lambda a, b: (a - b) * (a - b), x, y, "SquaredDifference", name)


def add_n(inputs: Sequence[Any], name: str | None = None) -> Tensor:
    """The sum of a list of tensors of one shape."""
    ts = [_convert(t) for t in inputs]

    def fn(*xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out

    return _graph_of(ts)._apply(fn, tuple(ts), "AddN", name)


def negative(x: Any, name: str | None = None) -> Tensor:
    """``-x``."""
    return _unary(lambda a: -a, x, "Neg", name)


neg = negative


def abs(x: Any, name: str | None = None) -> Tensor:  # noqa: A001
    """``|x|``."""
    return _unary(lambda a: a.abs(), x, "Abs", name)


def square(x: Any, name: str | None = None) -> Tensor:
    """``x²``."""
    return _unary(lambda a: a * a, x, "Square", name)


def sqrt(x: Any, name: str | None = None) -> Tensor:
    """``√x``."""
    return _unary(lambda a: a.sqrt(), x, "Sqrt", name)


def rsqrt(x: Any, name: str | None = None) -> Tensor:
    """``1/√x``."""
    return _unary(lambda a: a.rsqrt(), x, "Rsqrt", name)


def exp(x: Any, name: str | None = None) -> Tensor:
    """``eˣ``."""
    return _unary(lambda a: a.exp(), x, "Exp", name)


def log(x: Any, name: str | None = None) -> Tensor:
    """The natural logarithm."""
    return _unary(lambda a: a.log(), x, "Log", name)


def log1p(x: Any, name: str | None = None) -> Tensor:
    """``log(1 + x)``."""
    return _unary(lambda a: a.log1p(), x, "Log1p", name)


def reciprocal(x: Any, name: str | None = None) -> Tensor:
    """``1/x``."""
    return _unary(lambda a: a.reciprocal(), x, "Reciprocal", name)


def sin(x: Any, name: str | None = None) -> Tensor:
    """The sine."""
    return _unary(lambda a: a.sin(), x, "Sin", name)


def cos(x: Any, name: str | None = None) -> Tensor:
    """The cosine."""
    return _unary(lambda a: a.cos(), x, "Cos", name)


def sign(x: Any, name: str | None = None) -> Tensor:
    """-1, 0 or 1 by the sign of ``x``."""
    return _unary(lambda a: a.sign(), x, "Sign", name)


def floor(x: Any, name: str | None = None) -> Tensor:
    """Round down."""
    return _unary(lambda a: a.floor(), x, "Floor", name)


def ceil(x: Any, name: str | None = None) -> Tensor:
    """Round up."""
    return _unary(lambda a: a.ceil(), x, "Ceil", name)


def round(x: Any, name: str | None = None) -> Tensor:  # noqa: A001
    """Round half to even."""
    return _unary(lambda a: a.round(), x, "Round", name)


def sigmoid(x: Any, name: str | None = None) -> Tensor:
    """``1 / (1 + e⁻ˣ)``."""
    return _unary(lambda a: a.sigmoid(), x, "Sigmoid", name)


def tanh(x: Any, name: str | None = None) -> Tensor:
    """The hyperbolic tangent."""
    return _unary(lambda a: a.tanh(), x, "Tanh", name)


def matmul(
    a: Any,
    b: Any,
    transpose_a: bool = False,
    transpose_b: bool = False,
    adjoint_a: bool = False,
    adjoint_b: bool = False,
    a_is_sparse: bool = False,
    b_is_sparse: bool = False,
    name: str | None = None,
) -> Tensor:
    """The matrix product (batched over leading dims); ``transpose_a``/``_b`` transpose first."""
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b

    def fn(x: Any, y: Any) -> Any:
        if ta:
            x = x.transpose(-1, -2)
        if tb:
            y = y.transpose(-1, -2)
        return x @ y

    return _binary(fn, _convert(a), _convert(b), "MatMul", name)


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """``x`` converted to ``dtype`` (floats to ints round toward zero)."""
    d = as_dtype(dtype)
    t = _convert(x)
    if t.dtype == d:
        return t
    out = _unary(lambda a: a.to(d._fg), t, "Cast", name)
    if t._const is not None:
        out._const = np.asarray(t._const).astype(d.as_numpy_dtype)
    return out


def to_float(x: Any, name: str = "ToFloat") -> Tensor:
    """``cast(x, tf.float32)``."""
    return cast(x, float32, name)


def to_int32(x: Any, name: str = "ToInt32") -> Tensor:
    """``cast(x, tf.int32)``."""
    return cast(x, int32, name)


def to_int64(x: Any, name: str = "ToInt64") -> Tensor:
    """``cast(x, tf.int64)``."""
    return cast(x, int64, name)


# ----------------------------------------------------------------------------- comparisons


def equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x == y`` elementwise (a bool tensor)."""
    return _binary(lambda a, b: a == b, x, y, "Equal", name)


def not_equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x != y`` elementwise."""
    return _binary(lambda a, b: a != b, x, y, "NotEqual", name)


def less(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x < y`` elementwise."""
    return _binary(lambda a, b: a < b, x, y, "Less", name)


def less_equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x <= y`` elementwise."""
    return _binary(lambda a, b: a <= b, x, y, "LessEqual", name)


def greater(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x > y`` elementwise."""
    return _binary(lambda a, b: a > b, x, y, "Greater", name)


def greater_equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x >= y`` elementwise."""
    return _binary(lambda a, b: a >= b, x, y, "GreaterEqual", name)


def logical_and(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise and of bool tensors."""
    return _binary(lambda a, b: a & b, x, y, "LogicalAnd", name)


def logical_or(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Elementwise or of bool tensors."""
    return _binary(lambda a, b: a | b, x, y, "LogicalOr", name)


def logical_not(x: Any, name: str | None = None) -> Tensor:
    """Elementwise not of a bool tensor."""
    return _unary(lambda a: ~a, x, "LogicalNot", name)


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """``x`` where ``condition`` holds, else ``y`` (broadcasting).

    The one-argument form (indices of true elements) has a data-dependent
    shape and is not supported.
    """
    if x is None or y is None:
        raise NotImplementedError(
            "tf.where(condition) without x and y (a data-dependent shape) is not supported"
        )
    c = _convert(condition)
    like = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else None
    xv, yv = _operand(x, like), _operand(y, like)

    def fn(cc: Any, a: Any, b: Any) -> Any:
        if not isinstance(a, _core.Tensor) and not isinstance(b, _core.Tensor):
            a = fg.full_like(cc, a, dtype=_core.float32)
        return fg.where(cc, a, b)

    return c._graph._apply(fn, (c, xv, yv), "Select", name)


# ----------------------------------------------------------------------------- reductions


def _reduce(
    method: Callable[[Any, tuple[int, ...], bool], Any],
    x: Any,
    axis: Any,
    keepdims: Any,
    reduction_indices: Any,
    keep_dims: Any,
    op_type: str,
    name: str | None,
) -> Tensor:
    t = _convert(x)
    axes = _axes(axis, reduction_indices)
    keep = _keep(keepdims, keep_dims)

    def fn(a: Any) -> Any:
        ax = list(builtins_range(a.dim())) if axes is None else axes
        if not ax:
            return a.clone()
        return method(a, tuple(sorted({d % a.dim() for d in ax})), keep)

    return t._graph._apply(fn, (t,), op_type, name)


builtins_range = builtins.range


def _sum(a: Any, ax: tuple[int, ...], keep: bool) -> Any:
    return a.sum(dim=ax, keepdim=keep)


def _mean(a: Any, ax: tuple[int, ...], keep: bool) -> Any:
    if a.dtype.is_floating_point:
        return a.mean(dim=ax, keepdim=keep)
    n = 1
    for d in ax:
        n *= a.shape[d]
    return (a.sum(dim=ax, keepdim=keep).to(_core.float64) / n).to(a.dtype)


def _max(a: Any, ax: tuple[int, ...], keep: bool) -> Any:
    if a.dtype == _core.bool:
        return a.to(_core.int32).amax(dim=ax, keepdim=keep) > 0
    return a.amax(dim=ax, keepdim=keep)


def _min(a: Any, ax: tuple[int, ...], keep: bool) -> Any:
    if a.dtype == _core.bool:
        return a.to(_core.int32).amin(dim=ax, keepdim=keep) > 0
    return a.amin(dim=ax, keepdim=keep)


def _prod(a: Any, ax: tuple[int, ...], keep: bool) -> Any:
    for d in sorted(ax, reverse=True):
        a = a.prod(dim=d, keepdim=keep)
    return a


def _logsumexp(a: Any, ax: tuple[int, ...], keep: bool) -> Any:
    m = a.amax(dim=ax, keepdim=True).detach()
    out = (a - m).exp().sum(dim=ax, keepdim=True).log() + m
    if not keep:
        for d in sorted(ax, reverse=True):
            out = out.squeeze(d)
    return out


def reduce_sum(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """The sum over ``axis`` (every axis when None); ``reduction_indices``/``keep_dims`` are the old names."""
    return _reduce(_sum, input_tensor, axis, keepdims, reduction_indices, keep_dims, "Sum", name)


def reduce_mean(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """The mean over ``axis`` (integer means round toward zero, as in TF)."""
    return _reduce(_mean, input_tensor, axis, keepdims, reduction_indices, keep_dims, "Mean", name)


def reduce_max(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """The maximum over ``axis``."""
    return _reduce(_max, input_tensor, axis, keepdims, reduction_indices, keep_dims, "Max", name)


def reduce_min(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """The minimum over ``axis``."""
    return _reduce(_min, input_tensor, axis, keepdims, reduction_indices, keep_dims, "Min", name)


def reduce_prod(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """The product over ``axis``."""
    return _reduce(_prod, input_tensor, axis, keepdims, reduction_indices, keep_dims, "Prod", name)


def reduce_any(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """Whether any element over ``axis`` is true."""
    return _reduce(_max, input_tensor, axis, keepdims, reduction_indices, keep_dims, "Any", name)


def reduce_all(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """Whether every element over ``axis`` is true."""
    return _reduce(_min, input_tensor, axis, keepdims, reduction_indices, keep_dims, "All", name)


def reduce_logsumexp(
    input_tensor: Any,
    axis: Any = None,
    keepdims: Any = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: Any = None,
) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, computed stably."""
    return _reduce(_logsumexp, input_tensor, axis, keepdims, reduction_indices, keep_dims, "LogSumExp", name)


def _arg(which: str, x: Any, axis: Any, name: str | None, dimension: Any, output_type: Any) -> Tensor:
    ax = axis if axis is not None else dimension
    ax = 0 if ax is None else _static_ints(ax, "axis")[0]
    d = as_dtype(output_type)._fg
    return _unary(
        lambda a: getattr(a, which)(dim=ax).to(d), x, "ArgMax" if which == "argmax" else "ArgMin", name
    )


def argmax(
    input: Any, axis: Any = None, name: str | None = None, dimension: Any = None, output_type: Any = int64
) -> Tensor:  # noqa: A002
    """The index of the largest value along ``axis`` (``dimension`` is the old name; default 0)."""
    return _arg("argmax", input, axis, name, dimension, output_type)


def argmin(
    input: Any, axis: Any = None, name: str | None = None, dimension: Any = None, output_type: Any = int64
) -> Tensor:  # noqa: A002
    """The index of the smallest value along ``axis``."""
    return _arg("argmin", input, axis, name, dimension, output_type)


def arg_max(input: Any, dimension: Any, name: str | None = None, output_type: Any = int64) -> Tensor:  # noqa: A002
    """The old name of :func:`argmax`."""
    return _arg("argmax", input, None, name, dimension, output_type)


def arg_min(input: Any, dimension: Any, name: str | None = None, output_type: Any = int64) -> Tensor:  # noqa: A002
    """The old name of :func:`argmin`."""
    return _arg("argmin", input, None, name, dimension, output_type)


# ----------------------------------------------------------------------------- shapes


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """``tensor`` with a new shape; one entry may be -1 (a dim known only at run time counts as -1)."""
    t = _convert(tensor)
    if isinstance(shape, Tensor) and shape._const is None:
        parts = getattr(shape, "_shape_parts", None)
        if parts is None:
            raise ValueError("reshape: the shape must be known while the graph is built")
        dims = [-1 if d is None else d for d in parts]
    elif isinstance(shape, (list, tuple)):
        dims = []
        for d in shape:
            if isinstance(d, Tensor) and d._const is None:
                dims.append(-1)
            else:
                dims.append(_static_ints([d], "shape")[0])
    else:
        dims = _static_ints(shape, "shape")
    if dims.count(-1) > 1:
        raise ValueError(f"reshape: at most one dim may be unknown (-1), got {dims}")
    out = _unary(lambda a: a.reshape(tuple(dims)), t, "Reshape", name)
    if t._const is not None:
        out._const = np.asarray(t._const).reshape(dims)
    return out


def transpose(a: Any, perm: Any = None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """Permute the dims (reversed when ``perm`` is None)."""
    t = _convert(a)
    p = None if perm is None else _static_ints(perm, "perm")
    return _unary(
        lambda x: x.permute(*(p if p is not None else builtins_range(x.dim() - 1, -1, -1))),
        t,
        "Transpose",
        name,
    )


def concat(values: Any, axis: Any, name: str = "concat") -> Tensor:
    """Join tensors along ``axis`` (the pre-1.0 order ``concat(axis, values)`` is accepted too)."""
    if isinstance(values, (int, np.integer)) and isinstance(axis, (list, tuple)):
        values, axis = axis, values
    ts = [_convert(v) for v in values]
    ax = _static_ints(axis, "axis")[0]
    return _graph_of(ts)._apply(lambda *xs: fg.cat(list(xs), dim=ax), tuple(ts), "ConcatV2", name)


def stack(values: Any, axis: int = 0, name: str = "stack") -> Tensor:
    """Stack tensors of one shape along a new ``axis``."""
    ts = [_convert(v) for v in values]
    out = _graph_of(ts)._apply(lambda *xs: fg.stack(list(xs), dim=axis), tuple(ts), "Pack", name)
    if all(t._const is not None for t in ts):
        out._const = np.stack([np.asarray(t._const) for t in ts], axis=axis)
    return out


pack = stack


def unstack(value: Any, num: int | None = None, axis: int = 0, name: str = "unstack") -> list[Tensor]:
    """Split ``value`` along ``axis`` into its slices."""
    t = _convert(value)
    return t._graph._apply(lambda x: tuple(x.unbind(axis)), (t,), "Unpack", name, multi=True)


def split(
    value: Any, num_or_size_splits: Any, axis: Any = 0, num: int | None = None, name: str = "split"
) -> list[Tensor]:
    """Split ``value`` along ``axis`` into equal parts (an int) or parts of the given sizes."""
    t = _convert(value)
    ax = _static_ints(axis, "axis")[0]
    if isinstance(num_or_size_splits, (int, np.integer)):
        n = int(num_or_size_splits)
        size = t._shape[ax] if t._shape is not None else None
        if size is None:
            raise ValueError("split: the split axis must have a known size")
        if size % n:
            raise ValueError(f"Dimension size {size} must be evenly divisible by {n}")
        sizes: Any = size // n
    else:
        sizes = _static_ints(num_or_size_splits, "num_or_size_splits")
    return t._graph._apply(lambda x: tuple(x.split(sizes, dim=ax)), (t,), "Split", name, multi=True)


def expand_dims(input: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Tensor:  # noqa: A002
    """Insert a dim of size 1 at ``axis`` (``dim`` is the old name)."""
    ax = axis if axis is not None else dim
    if ax is None:
        raise ValueError("expand_dims needs an axis")
    a = _static_ints(ax, "axis")[0]
    return _unary(lambda x: x.unsqueeze(a), input, "ExpandDims", name)


def squeeze(input: Any, axis: Any = None, name: str | None = None, squeeze_dims: Any = None) -> Tensor:  # noqa: A002
    """Remove dims of size 1 (those in ``axis``, or all)."""
    t = _convert(input)
    ax = axis if axis is not None else squeeze_dims
    if ax is None:
        if t._shape is None:
            raise ValueError("squeeze: the rank must be known")
        axes = [i for i, d in enumerate(t._shape) if d == 1]
    else:
        axes = _static_ints(ax, "axis")

    def fn(x: Any) -> Any:
        for a in sorted((d % x.dim() for d in axes), reverse=True):
            x = x.squeeze(a)
        return x

    return _unary(fn, t, "Squeeze", name)


def tile(input: Any, multiples: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Repeat ``input`` ``multiples[i]`` times along each dim."""
    m = _static_ints(multiples, "multiples")
    return _unary(lambda x: x.repeat(*m), input, "Tile", name)


def pad(
    tensor: Any, paddings: Any, mode: str = "CONSTANT", name: str | None = None, constant_values: Any = 0
) -> Tensor:
    """Pad each dim by ``paddings[i] = [before, after]`` (``CONSTANT``, ``REFLECT`` or ``SYMMETRIC``)."""
    p = np.asarray(paddings._const if isinstance(paddings, Tensor) else paddings, dtype=np.int64).reshape(
        -1, 2
    )
    flat: list[int] = []
    for before, after in p[::-1]:
        flat += [int(before), int(after)]
    modes = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "replicate"}
    m: Any = modes[mode.upper()]
    v = float(constant_values)
    return _unary(
        lambda x: F.pad(x, flat, mode=m, value=v) if m == "constant" else F.pad(x, flat, mode=m),
        tensor,
        "Pad",
        name,
    )


def gather(
    params: Any, indices: Any, validate_indices: Any = None, name: str | None = None, axis: int = 0
) -> Tensor:
    """Slices of ``params`` at ``indices`` along ``axis``."""
    p, i = _convert(params), _convert(indices)

    def fn(x: Any, idx: Any) -> Any:
        idx = idx.to(_core.int64)
        if axis == 0:
            return x[idx]
        return (
            x.movedim(axis, 0)[idx].movedim(0, axis)
            if hasattr(x, "movedim")
            else x.transpose(0, axis)[idx].transpose(0, axis)
        )

    return p._graph._apply(fn, (p, i), "GatherV2", name)


def gather_nd(params: Any, indices: Any, name: str | None = None, batch_dims: int = 0) -> Tensor:
    """``out[i...] = params[indices[i..., 0], ..., indices[i..., k-1]]``: slices of ``params`` at the
    ``k``-tuples of ``indices``' last dim (``k`` and the first ``k`` dims of ``params`` known)."""
    p, i = _convert(params), _convert(indices)
    if batch_dims:
        raise ValueError(f"gather_nd: batch_dims other than 0 is not supported, got {batch_dims}")
    if i._shape is None or not i._shape or i._shape[-1] is None:
        raise ValueError(
            f"gather_nd: the last dim of indices must be known, got {i.name} of shape {i._shape}"
        )
    k = int(i._shape[-1])
    if p._shape is None or k > len(p._shape) or any(d is None for d in p._shape[:k]):
        raise ValueError(
            f"gather_nd: indices {i.name} of shape {i._shape} pick {k} dims, but params {p.name} has shape "
            f"{p._shape} (its first {k} dims must be known)"
        )
    lead = [int(d) for d in p._shape[:k]]  # type: ignore[arg-type]
    strides = [math.prod(lead[j + 1 :]) for j in builtins_range(k)]

    def fn(x: Any, idx: Any) -> Any:
        with _capture.suspended():
            st = _core.tensor(np.asarray(strides, dtype=np.int64))
        flat = (idx.to(fg.int64) * _core._trace_constant(st)).sum(-1)
        return x.reshape([math.prod(lead), *x.shape[k:]])[flat]

    return p._graph._apply(fn, (p, i), "GatherNd", name)


def scatter_nd(indices: Any, updates: Any, shape: Any, name: str | None = None) -> Tensor:
    """A tensor of ``shape`` (known while building), zero but for ``updates`` added at the
    ``k``-tuples of ``indices``' last dim (repeated indices add up, as in TF)."""
    i, u = _convert(indices), _convert(updates)
    dims = _static_ints(shape, "shape")
    if i._shape is None or not i._shape or i._shape[-1] is None:
        raise ValueError(
            f"scatter_nd: the last dim of indices must be known, got {i.name} of shape {i._shape}"
        )
    k = int(i._shape[-1])
    if k > len(dims):
        raise ValueError(f"scatter_nd: indices {i.name} of shape {i._shape} pick {k} dims of shape {dims}")
    lead, rest = dims[:k], dims[k:]
    strides = [math.prod(lead[j + 1 :]) for j in builtins_range(k)]
    d = u.dtype

    def fn(idx: Any, upd: Any) -> Any:
        with _capture.suspended():
            st = _core.tensor(np.asarray(strides, dtype=np.int64))
        flat = (idx.to(fg.int64) * _core._trace_constant(st)).sum(-1).reshape(-1)
        base = fg.zeros(math.prod(lead), *rest, dtype=d._fg)
        return base.index_add(0, flat, upd.reshape(-1, *rest)).reshape(dims)

    return i._graph._apply(fn, (i, u), "ScatterNd", name)


def shape(input: Any, name: str | None = None, out_type: Any = int32) -> Tensor:  # noqa: A002
    """The dynamic shape of ``input`` as a 1-D int tensor."""
    t = _convert(input)
    if t._shape is None:
        raise ValueError("tf.shape of a tensor of unknown rank is not supported")
    parts = list(t._shape)
    d = as_dtype(out_type)
    if all(p is not None for p in parts):
        out = _constant(np.asarray(parts), d, name or "Shape")
        out._shape_parts = parts  # type: ignore[attr-defined]
        return out

    def fn(x: Any) -> Any:
        dims = []
        for i, p in enumerate(parts):
            if p is not None:
                dims.append(fg.full((), p, dtype=d._fg))
                continue
            y = x
            for j in builtins_range(x.dim() - 1, -1, -1):
                if j != i:
                    y = y.select(j, 0)
            dims.append(fg.ones_like(y, dtype=_core.float32).sum().to(d._fg))
        return fg.stack(dims)

    out = t._graph._apply(fn, (t,), "Shape", name)
    out._shape_parts = parts  # type: ignore[attr-defined]
    return out


def size(input: Any, name: str | None = None, out_type: Any = int32) -> Tensor:  # noqa: A002
    """The number of elements of ``input``."""
    t = _convert(input)
    if t._shape is not None and all(p is not None for p in t._shape):
        return _constant(int(np.prod(_known(t._shape), dtype=np.int64)), out_type, name or "Size")
    d = as_dtype(out_type)._fg
    return _unary(lambda x: fg.ones_like(x, dtype=_core.float32).sum().to(d), t, "Size", name)


def rank(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The number of dims of ``input``."""
    t = _convert(input)
    if t._shape is None:
        raise ValueError("rank of a tensor of unknown rank")
    return _constant(len(t._shape), int32, name or "Rank")


def one_hot(
    indices: Any,
    depth: int,
    on_value: Any = None,
    off_value: Any = None,
    axis: int | None = None,
    dtype: Any = None,
    name: str | None = None,
) -> Tensor:
    """One-hot rows of length ``depth`` (an index outside ``[0, depth)`` gives a row of ``off_value``)."""
    i = _convert(indices)
    n = _static_ints(depth, "depth")[0]
    d = as_dtype(dtype or float32)
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value

    def fn(idx: Any) -> Any:
        hot = idx.to(_core.int64).unsqueeze(-1) == fg.arange(n, dtype=_core.int64)
        out = fg.where(hot, fg.full_like(hot, on, dtype=d._fg), fg.full_like(hot, off, dtype=d._fg))
        if axis is not None and axis != -1 and axis != out.dim() - 1:
            perm = list(builtins_range(out.dim() - 1))
            perm.insert(axis, out.dim() - 1)
            out = out.permute(*perm)
        return out

    return i._graph._apply(fn, (i,), "OneHot", name)


# ----------------------------------------------------------------------------- gradients and clipping


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method: Any = None,
    stop_gradients: Any = None,
    unconnected_gradients: Any = None,
) -> list[Tensor | None]:
    """Symbolic ``d(sum ys)/d xs`` (None for an ``x`` the ``ys`` do not depend on)."""
    ys_l = [_convert(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    xs_l = [_convert(x) for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
    gys = (
        None
        if grad_ys is None
        else [_convert(g) for g in (grad_ys if isinstance(grad_ys, (list, tuple)) else [grad_ys])]
    )

    def fn(y: Any, x: Any, gy: Any) -> Any:
        return tuple(_symbolic_gradients(list(y), list(x), None if gy is None else list(gy)))

    return _graph_of(ys_l)._apply(fn, (ys_l, xs_l, gys), "Gradients", name, multi=True, full_probe=True)


def _symbolic_gradients(ys: list[Any], xs: list[Any], gys: list[Any] | None) -> list[Any]:
    """``fg.gradients``, keeping the recorded backward graph for later ``tf.gradients`` calls."""
    g = _fg.get_default_graph()
    if gys is None:
        gys = [fg.ones_like(y) for y in ys]
    live = [k for k, y in enumerate(ys) if y.requires_grad]  # the others depend on no variable
    ys, gys = [ys[k] for k in live], [gys[k] for k in live]
    usable = [x.requires_grad and bool(ys) for x in xs]
    got = iter(
        _core.autograd_grad(
            ys, [x for x, u in zip(xs, usable, strict=True) if u], gys, retain_graph=True, allow_unused=True
        )
        if any(usable)
        else ()
    )
    out = [next(got) if u else None for u in usable]
    if g is not None and g._any_shape:
        # As fg.gradients: a gradient's shape is checked at each run against what it is taken for.
        unshaped = {id(g._placeholders[p][0]): p for p in g._any_shape}
        for x, r in zip(xs, out, strict=True):
            if r is not None:
                g._grad_shapes[id(r)] = unshaped.get(id(x), tuple(r.shape))
                g._keep.append(r)
    return out


def stop_gradient(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """``input``, with no gradient flowing through it."""
    return _unary(_core.Tensor.detach, input, "StopGradient", name)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: str | None = None) -> Tensor:
    """``t`` limited to ``[clip_value_min, clip_value_max]``."""
    x = _convert(t)
    lo, hi = _operand(clip_value_min, x), _operand(clip_value_max, x)

    def fn(a: Any, mn: Any, mx: Any) -> Any:
        if not isinstance(mn, _core.Tensor) and not isinstance(mx, _core.Tensor):
            return a.clamp(mn, mx)
        return fg.minimum(*_pair(fg.maximum(*_pair(a, mn)), mx))

    return x._graph._apply(fn, (x, lo, hi), "ClipByValue", name)


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Tensor:
    """``t`` scaled so its L2 norm (over ``axes``) is at most ``clip_norm``."""
    x = _convert(t)
    ax = None if axes is None else tuple(_static_ints(axes, "axes"))

    def fn(a: Any, c: Any) -> Any:
        sq = (a * a).sum() if ax is None else (a * a).sum(dim=ax, keepdim=True)
        norm = sq.sqrt()
        return a * c / fg.maximum(*_pair(norm, c))

    return x._graph._apply(fn, (x, clip_norm), "ClipByNorm", name)


def global_norm(t_list: Sequence[Any], name: str | None = None) -> Tensor:
    """``sqrt(sum of every element² of every tensor)`` (None entries skipped)."""
    ts = [_convert(t) for t in t_list if t is not None]
    return _graph_of(ts)._apply(lambda *xs: _gnorm(xs), tuple(ts), "GlobalNorm", name)


def _gnorm(xs: Sequence[Any]) -> Any:
    total: Any = None
    for x in xs:
        s = (x * x).sum()
        total = s if total is None else total + s
    return total.sqrt()


def clip_by_global_norm(
    t_list: Sequence[Any], clip_norm: Any, use_norm: Any = None, name: str | None = None
) -> tuple[list[Tensor | None], Tensor]:
    """Scale every tensor by ``clip_norm / max(global_norm, clip_norm)``; returns (clipped list, global norm)."""
    keep = [t is not None for t in t_list]
    ts = [_convert(t) for t in t_list if t is not None]
    norm = global_norm(ts) if use_norm is None else _convert(use_norm)

    def fn(n: Any, c: Any, *xs: Any) -> Any:
        scale = c / fg.maximum(*_pair(n, c))
        return tuple(x * scale for x in xs)

    outs = norm._graph._apply(fn, (norm, clip_norm, *ts), "ClipByGlobalNorm", name, multi=True)
    it = iter(outs)
    return [next(it) if k else None for k in keep], norm


# ----------------------------------------------------------------------------- grouping and control flow


def group(*inputs: Any, name: str | None = None) -> Operation:
    """An op that runs all of ``inputs`` (ops or tensors)."""
    flat: list[Any] = []
    for i in inputs:
        if isinstance(i, (list, tuple)):
            flat.extend(i)
        elif i is not None:
            flat.append(i)
    g = _graph_of(flat) if flat else get_default_graph()
    with control_dependencies(flat):
        return g._apply(lambda: (), (), "NoOp", name or "group_deps")


def no_op(name: str | None = None) -> Operation:
    """An op that does nothing (a target for control dependencies)."""
    return get_default_graph()._apply(lambda: (), (), "NoOp", name)


def tuple_(tensors: Sequence[Any], name: str | None = None, control_inputs: Any = None) -> list[Any]:
    """``tensors``, each available only once all of them are computed."""
    with control_dependencies(list(control_inputs or []) + [t for t in tensors if t is not None]):
        return [None if t is None else identity(t) for t in tensors]


def _body(g: Any, fn: Callable, args: Sequence[Any]) -> Any:
    """Run a user's branch or loop body on captured values, with TF ops recorded inline."""
    wrapped = [Tensor(g, None, 0, None, None, twin=a) for a in args]
    g._inline += 1
    try:
        out = fn(*wrapped)
    finally:
        g._inline -= 1
    seq = isinstance(out, (list, tuple))
    items = list(out) if seq else [out]
    res = []
    for v in items:
        if isinstance(v, Operation):
            raise TypeError("a cond/while_loop body must return tensors, not ops")
        if isinstance(v, Tensor):
            res.append(v._twin if v._rec is None else g._cur_vals[v._rec][v._idx])
        elif isinstance(v, (int, float, bool, np.number)):
            with _capture.suspended():
                res.append(
                    _core._trace_constant(
                        _core.tensor(np.asarray(v, dtype=np.float32 if isinstance(v, float) else np.int32))
                    )
                )
        else:
            raise TypeError(f"a cond/while_loop body returned {type(v).__name__}")
    return tuple(res) if seq else res[0]


def cond(
    pred: Any,
    true_fn: Callable | None = None,
    false_fn: Callable | None = None,
    strict: bool = False,
    name: str | None = None,
    fn1: Callable | None = None,
    fn2: Callable | None = None,
) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()``, decided when the graph runs.

    Both branches are recorded as sub-graphs of one conditional node (a
    Python bool or a constant ``pred`` picks the branch while building).
    """
    tf_, ff_ = true_fn or fn1, false_fn or fn2
    if tf_ is None or false_fn is None and fn2 is None:
        raise TypeError("cond needs true_fn and false_fn")
    if isinstance(pred, (bool, np.bool_)) or (isinstance(pred, Tensor) and pred._const is not None):
        v = bool(pred if not isinstance(pred, Tensor) else np.asarray(pred._const))
        return tf_() if v else ff_()  # type: ignore[misc]
    p = _convert(pred)
    g = p._graph
    seq = [False]

    def fn(pp: Any) -> Any:
        def run(f: Callable) -> Callable:
            def inner(*args: Any) -> Any:
                out = _body(g, lambda: f(), ())
                seq[0] = isinstance(out, tuple)
                return out

            return inner

        out = fg.cond(pp, run(tf_), run(ff_))  # type: ignore[arg-type]
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)

    outs = g._apply(fn, (p,), "cond", name, multi=True, full_probe=True)
    return list(outs) if seq[0] else outs[0]


def while_loop(
    cond: Callable,
    body: Callable,
    loop_vars: Any,
    shape_invariants: Any = None,
    parallel_iterations: int = 10,
    back_prop: bool = True,
    swap_memory: bool = False,
    name: str | None = None,
    maximum_iterations: Any = None,
    return_same_structure: bool = False,
) -> Any:
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)``, decided when the graph runs.

    ``cond`` and ``body`` are recorded once as sub-graphs of one loop node.
    """
    seq = isinstance(loop_vars, (list, tuple))
    vs = [_convert(v) for v in (loop_vars if seq else [loop_vars])]
    g = _graph_of(vs)
    limit = None if maximum_iterations is None else int(maximum_iterations)

    made: list[Any] = [None]  # the structure the body returns (a tuple or a list), as TF1 packs the result

    def call_body(*w: Any) -> Any:
        r = body(*w)
        made[0] = type(r) if isinstance(r, (list, tuple)) and not hasattr(r, "_fields") else None
        return _as_seq(r)

    def fn(*xs: Any) -> Any:
        def c(*a: Any) -> Any:
            user = a[1:] if limit is not None else a
            r = _body(g, lambda *w: cond(*w), user)
            if limit is not None:
                r = r & (a[0] < limit)
            return r

        def b(*a: Any) -> Any:
            user = a[1:] if limit is not None else a
            r = _body(g, call_body, user)
            r = tuple(r) if isinstance(r, tuple) else (r,)
            return ((a[0] + 1,) + r) if limit is not None else r

        init = tuple(xs)
        if limit is not None:
            with _capture.suspended():
                zero = _core.tensor(0)
            init = (_core._trace_constant(zero), *init)
        out = fg.while_loop(c, b, init)
        out = tuple(out) if isinstance(out, (list, tuple)) else (out,)
        return out[1:] if limit is not None else out

    outs = g._apply(fn, tuple(vs), "while", name, multi=True, full_probe=True)
    # As TF1: one loop variable comes back as itself; several in the structure the body returns.
    if len(outs) == 1 and not return_same_structure:
        return outs[0]
    if not seq and not return_same_structure:
        return outs[0]
    packer = made[0] or (type(loop_vars) if isinstance(loop_vars, tuple) else list)
    return packer(outs) if seq else outs[0]


def _as_seq(v: Any) -> Any:
    return tuple(v) if isinstance(v, (list, tuple)) else (v,)


# ----------------------------------------------------------------------------- Tensor operators


def _getitem(self: Tensor, key: Any) -> Tensor:
    parts = getattr(self, "_shape_parts", None)
    if parts is not None and isinstance(key, (int, np.integer)) and parts[int(key)] is not None:
        return _constant(parts[int(key)], self.dtype)
    if self._const is not None and isinstance(key, (int, builtins.slice, np.integer)):
        out = self._graph._apply(lambda x, k: x[k], (self, key), "StridedSlice")
        out._const = np.asarray(self._const)[key]
        return out
    return self._graph._apply(lambda x, k: x[k], (self, key), "StridedSlice")


# More names live in their own module; it imports the names above, so it comes last.
from ._ops_more import *  # noqa: E402, F403
