"""Tensor functions composed in Python of registry ops (no kernels of their own).

Each function here has PyTorch's name, argument names and defaults, and is
built from ops the Rust registry already has, so it runs on every device and
in every mode those ops do: eager, under autograd (its gradient is the
composition of its parts' VJPs, to any order), in captured graphs and on the
GPU. :func:`install` attaches the ones PyTorch also has as ``Tensor`` methods
(never replacing a method the core defines), and ``ferrograd`` re-exports the
functions.

Accuracy is a design constraint, not an afterthought: the inverse trigonometric
and hyperbolic functions use cancellation-free forms (``atan2`` with
``sqrt((1 - x)(1 + x))``, ``log1p`` forms, odd symmetry), ``erfinv`` refines a
rational first guess with Newton steps on ``erf``, and the branches taken by
``where`` feed safe values to the branch not taken so that no gradient picks up
``0 * inf``.

Functions whose output *shape* depends on the input's values (``bincount``,
``repeat_interleave`` with tensor repeats and no ``output_size``) raise
:class:`ferrograd.TraceError` while a graph is being captured, as the
registry's data-dependent ops do.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from . import _autocast as _amp
from . import _capture, _core

Tensor = _core.Tensor
_Number = builtins.int | builtins.float | builtins.bool

_FLOAT_MAX = {
    "float64": 1.7976931348623157e308,
    "float32": 3.4028234663852886e38,
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
}
_FLOAT_EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
_LN2 = math.log(2.0)

__all__ = [
    "acos",
    "acosh",
    "addbmm",
    "addmm",
    "addmv",
    "allclose",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "baddbmm",
    "bincount",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "bucketize",
    "clamp_max",
    "clamp_min",
    "count_nonzero",
    "cross",
    "cummax",
    "cummin",
    "deg2rad",
    "diag_embed",
    "diff",
    "digamma",
    "equal",
    "erfinv",
    "frac",
    "heaviside",
    "histc",
    "hypot",
    "isclose",
    "isin",
    "kron",
    "lerp",
    "lgamma",
    "logaddexp",
    "logaddexp2",
    "logcumsumexp",
    "meshgrid",
    "nan_to_num",
    "nanmean",
    "nansum",
    "polygamma",
    "rad2deg",
    "repeat_interleave",
    "searchsorted",
    "signbit",
    "sinc",
    "std_mean",
    "tensordot",
    "tile",
    "trace",
    "var_mean",
    "xlogy",
]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _name(dt: Any) -> str:
    """A dtype's short name (``float32``)."""
    return str(getattr(dt, "name", dt)).replace("ferrograd.", "")


def _is_float(t: Tensor) -> bool:
    return bool(t.dtype.is_floating_point)


def _need_tensor(fn: str, arg: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be a Tensor, not {type(x).__name__}")
    return x


def _as_tensor(x: Any, like: Tensor) -> Tensor:
    """``x`` as a tensor on ``like``'s device. A Python number takes ``like``'s dtype
    when it is of the same kind (bool < int < float) or lower, else the default for its
    kind (int64, the default float dtype), as numbers do in PyTorch's type promotion."""
    if isinstance(x, Tensor):
        return x
    kind = _name(like.dtype)
    if isinstance(x, builtins.bool):
        dt = like.dtype
    elif isinstance(x, builtins.int):
        dt = _core.int64 if kind == "bool" else like.dtype
    else:
        dt = like.dtype if _is_float(like) else _core.get_default_dtype()
    return _core.tensor(x, dtype=dt, device=like.device)


def _to_float(t: Tensor) -> Tensor:
    """Integer and bool tensors become the default float dtype (float32 unless
    ``set_default_dtype`` changed it), as PyTorch's floating-point functions do with them."""
    return t if _is_float(t) else t.to(_core.get_default_dtype())


def _same_dtype(fn: str, **tensors: Tensor) -> None:
    items = list(tensors.items())
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.dtype != first.dtype:
            raise RuntimeError(
                f"{fn}(): expected {name} to have the same dtype as {first_name} ({_name(first.dtype)}), "
                f"but got {_name(t.dtype)}"
            )


def _dim(fn: str, dim: int, ndim: int) -> int:
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{fn}(): dim {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % n


def _broadcast_shape(fn: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    nd = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            k = len(s) - nd + i
            d = s[k] if k >= 0 else 1
            if d != 1:
                if size not in (1, d):
                    raise RuntimeError(
                        f"{fn}(): shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be broadcast together"
                    )
                size = d
        out.append(size)
    return tuple(out)


def _where_safe(cond: Tensor, x: Tensor, safe: float) -> Tensor:
    """``x`` where ``cond`` is false and ``safe`` where it is true: the input of a
    branch that ``where`` will not select, kept finite so its gradient stays 0."""
    return _core.where(cond, safe, x)


def _odd(x: Tensor, g: Callable[[Tensor], Tensor]) -> Tensor:
    """``g`` extended as an odd function: ``g(x)`` for ``x >= 0``, ``-g(-x)`` below.
    The derivative at 0 is ``g'(0)`` (not 0, which ``sign(x) * g(|x|)`` would give)."""
    neg = signbit(x)  # -0.0 included, so that it maps to -0.0
    y = g(_core.where(neg, -x, x))
    return _core.where(neg, -y, y)


def _opmath(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` in float32 when its float tensor arguments are all float16 or all
    bfloat16, rounding the result back once (as the registry's kernels compute those
    dtypes): a composition of several ops would otherwise round after each of them."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        floats = {_name(a.dtype) for a in args if isinstance(a, Tensor) and _is_float(a)}
        if len(floats) != 1 or next(iter(floats)) not in ("float16", "bfloat16"):
            return fn(*args, **kwargs)
        low = getattr(_core, next(iter(floats)))
        wide = [a.to(_core.float32) if isinstance(a, Tensor) and a.dtype == low else a for a in args]
        return fn(*wide, **kwargs).to(low)

    return wrapper


def _wide(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a special function of one tensor in float64 on the CPU (float32 on the GPU,
    which has no float64) and round the result once to the input's float dtype (float32
    for integers): its series and recurrences add many terms whose roundings would
    otherwise show in float32 (``lgamma(2)`` would be 1e-6, not 0)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ts = [a for a in args if isinstance(a, Tensor)]
        if len(ts) != 1 or _name(ts[0].dtype) == "float64":
            return fn(*args, **kwargs)
        t = ts[0]
        out = t.dtype if _is_float(t) else _core.get_default_dtype()
        wide = _core.float64 if str(t.device) == "cpu" else _core.float32
        if wide == out:
            return fn(*args, **kwargs)
        return fn(*[a.to(wide) if a is t else a for a in args], **kwargs).to(out)

    return wrapper


def _refuse_in_capture(fn: str, why: str) -> None:
    if _capture.is_capturing():
        raise _core.TraceError(f"{fn}(): {why}, so it cannot be captured in a graph (run it eagerly)")


# ---------------------------------------------------------------------------
# Interpolation and matrix products
# ---------------------------------------------------------------------------


@_opmath
def lerp(input: Tensor, end: Tensor, weight: Tensor | _Number) -> Tensor:
    """``input + weight * (end - input)``, computed as PyTorch does: from ``end``
    backwards when ``|weight| >= 0.5``, so that ``weight = 1`` gives ``end`` exactly."""
    _need_tensor("lerp", "input", input)
    _need_tensor("lerp", "end", end)
    if not _is_float(input):
        raise RuntimeError(f"lerp(): expected a floating-point input, got {_name(input.dtype)}")
    _same_dtype("lerp", input=input, end=end)
    diff = end - input
    if isinstance(weight, Tensor):
        _same_dtype("lerp", input=input, weight=weight)
        return _core.where(weight.abs() < 0.5, input + weight * diff, end - diff * (1 - weight))
    w = builtins.float(weight)
    if builtins.abs(w) < 0.5:
        return input + diff * w
    return end - diff * (1.0 - w)


def _check_mat(fn: str, name: str, t: Tensor, ndim: int) -> None:
    _need_tensor(fn, name, t)
    if t.ndim != ndim:
        what = {1: "a vector", 2: "a matrix", 3: "a 3-D batch of matrices"}[ndim]
        raise RuntimeError(f"{fn}(): {name} must be {what}, got shape {tuple(t.shape)}")


def _scale_add(fn: str, input: Tensor, prod: Tensor, beta: _Number, alpha: _Number) -> Tensor:
    """``beta * input + alpha * prod`` with ``input`` broadcast to ``prod``'s shape
    (and ignored when ``beta == 0``, so NaN in it does not propagate)."""
    _need_tensor(fn, "input", input)
    target = tuple(prod.shape)
    try:
        fits = _broadcast_shape(fn, input.shape, target) == target
    except RuntimeError:
        fits = False
    if not fits:
        raise RuntimeError(f"{fn}(): input of shape {tuple(input.shape)} does not broadcast to {target}")
    if input.dtype != prod.dtype:
        raise RuntimeError(
            f"{fn}(): expected input to have dtype {_name(prod.dtype)} like the matrices, got {_name(input.dtype)}"
        )
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod
    return (input if beta == 1 else input * beta) + prod


@_amp.lower("input", "mat1", "mat2")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: _Number = 1, alpha: _Number = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``."""
    _check_mat("addmm", "mat1", mat1, 2)
    _check_mat("addmm", "mat2", mat2, 2)
    _same_dtype("addmm", mat1=mat1, mat2=mat2)
    return _scale_add("addmm", input, mat1.mm(mat2), beta, alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: _Number = 1, alpha: _Number = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    _check_mat("addmv", "mat", mat, 2)
    _check_mat("addmv", "vec", vec, 1)
    _same_dtype("addmv", mat=mat, vec=vec)
    return _scale_add("addmv", input, mat.mv(vec), beta, alpha)


@_amp.lower("input", "batch1", "batch2")
def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: _Number = 1, alpha: _Number = 1
) -> Tensor:
    """``beta * input + alpha * (batch1 @ batch2)``, one matrix product per batch entry."""
    _check_mat("baddbmm", "batch1", batch1, 3)
    _check_mat("baddbmm", "batch2", batch2, 3)
    _same_dtype("baddbmm", batch1=batch1, batch2=batch2)
    return _scale_add("baddbmm", input, batch1.bmm(batch2), beta, alpha)


@_amp.lower("input", "batch1", "batch2")
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: _Number = 1, alpha: _Number = 1) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])`` (one matrix product
    over the batch and the inner dim together)."""
    _check_mat("addbmm", "batch1", batch1, 3)
    _check_mat("addbmm", "batch2", batch2, 3)
    _same_dtype("addbmm", batch1=batch1, batch2=batch2)
    b, n, m = batch1.shape
    b2, m2, p = batch2.shape
    if b != b2 or m != m2:
        raise RuntimeError(
            f"addbmm(): batch1 {tuple(batch1.shape)} and batch2 {tuple(batch2.shape)} need the same batch "
            "size and matching inner dims"
        )
    lhs = batch1.permute(1, 0, 2).reshape(n, b * m)
    prod = lhs.mm(batch2.reshape(b * m, p))
    return _scale_add("addbmm", input, prod, beta, alpha)


def tensordot(
    a: Tensor, b: Tensor, dims: int | Sequence[Sequence[int]] | Sequence[int] | Tensor = 2
) -> Tensor:
    """Contract ``a``'s dims ``dims[0]`` with ``b``'s dims ``dims[1]`` (an int ``n``:
    ``a``'s last ``n`` with ``b``'s first ``n``), as one matrix product."""
    _need_tensor("tensordot", "a", a)
    _need_tensor("tensordot", "b", b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, builtins.int):
        if dims < 0 or dims > builtins.min(a.ndim, b.ndim):
            raise RuntimeError(
                f"tensordot(): dims={dims} is out of range for shapes {tuple(a.shape)}, {tuple(b.shape)}"
            )
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot(): dims must be an int or a pair of dim lists")
        da, db = dims[0], dims[1]
        da = [da] if isinstance(da, builtins.int) else list(da)
        db = [db] if isinstance(db, builtins.int) else list(db)
        if len(da) != len(db):
            raise RuntimeError(f"tensordot(): both dim lists must have the same length, got {da} and {db}")
        da = [_dim("tensordot", d, a.ndim) for d in da]
        db = [_dim("tensordot", d, b.ndim) for d in db]
    for i, j in zip(da, db, strict=True):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(
                f"tensordot(): contracted dims differ in size: a{tuple(a.shape)} dim {i} has {a.shape[i]}, "
                f"b{tuple(b.shape)} dim {j} has {b.shape[j]}"
            )
    _same_dtype("tensordot", a=a, b=b)
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    am = a.permute(*fa, *da).reshape(math.prod(a.shape[d] for d in fa), k)
    bm = b.permute(*db, *fb).reshape(k, math.prod(b.shape[d] for d in fb))
    return am.mm(bm).reshape(*[a.shape[d] for d in fa], *[b.shape[d] for d in fb])


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: block ``(i, j, ...)`` of the result is ``input[i, j, ...] * other``."""
    _need_tensor("kron", "input", input)
    _need_tensor("kron", "other", other)
    nd = builtins.max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = input.reshape(*[v for s in sa for v in (s, 1)])
    b = other.reshape(*[v for s in sb for v in (1, s)])
    return (a * b).reshape(*[x * y for x, y in zip(sa, sb, strict=True)])


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcasting the other dims).
    ``dim=None`` takes the first dim of size 3, as ``torch.cross`` does."""
    _need_tensor("cross", "input", input)
    _need_tensor("cross", "other", other)
    shape = _broadcast_shape("cross", input.shape, other.shape)
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"cross(): no dimension of size 3 in shape {shape}")
    d = _dim("cross", dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(
            f"cross(): dimension {dim} of the broadcast shape {shape} has size {shape[d]}, not 3"
        )
    a, b = input.expand(*shape), other.expand(*shape)
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return _core.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------


def clamp_min(input: Tensor, min: Tensor | _Number) -> Tensor:  # noqa: A002
    """``max(input, min)`` elementwise (``clamp(input, min=min)``)."""
    return _need_tensor("clamp_min", "input", input).clamp(min=min)


def clamp_max(input: Tensor, max: Tensor | _Number) -> Tensor:  # noqa: A002
    """``min(input, max)`` elementwise (``clamp(input, max=max)``)."""
    return _need_tensor("clamp_max", "input", input).clamp(max=max)


_INT_NAMES = ("uint8", "int8", "int16", "int32", "int64")


def _shift(op: str, input: Any, other: Any, left: bool) -> Tensor:
    """``input << other`` / ``input >> other`` of integer tensors, computed in int64 (a shift
    by ``n`` is a product with, or a floor division by, ``2**n``) and narrowed to the result
    dtype, which keeps the low bits as PyTorch's shifts do. Shift counts are clamped to
    [0, 62]: a count of 63 or more on an int64 tensor gives what 62 gives."""
    if not isinstance(input, Tensor):
        if not isinstance(other, Tensor):
            raise TypeError(f"{op}(): expected at least one Tensor argument")
        input = _core.tensor(input, dtype=other.dtype, device=other.device)
    if isinstance(other, Tensor):
        dt = (input.reshape(-1)[:0] + other.reshape(-1)[:0]).dtype
    else:
        if isinstance(other, builtins.bool) or not isinstance(other, builtins.int):
            raise TypeError(
                f"{op}(): the shift count must be an int or an integer tensor, got {type(other).__name__}"
            )
        dt = input.dtype
    names = [_name(dt)] + ([_name(other.dtype)] if isinstance(other, Tensor) else [])
    if any(n not in _INT_NAMES for n in names):
        raise TypeError(
            f"{op}(): shifts need integer tensors, got {' and '.join(names)} (shape {tuple(input.shape)})"
        )
    if any(isinstance(t, Tensor) and t.device.type != "cpu" for t in (input, other)):
        raise RuntimeError(
            f"{op}: not supported on the gpu device (shifts compute in int64, which the device "
            "holds in 32 bits); move the tensors to the CPU first"
        )
    wide = input.to(_core.int64)
    if isinstance(other, Tensor):
        factor = _core.full_like(other, 2, dtype=_core.int64) ** other.to(_core.int64).clamp(0, 62)
    else:
        factor = 1 << builtins.min(builtins.max(other, 0), 62)
    out = wide * factor if left else wide // factor
    return out.to(dt)


def bitwise_left_shift(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """``input << other`` for integer tensors (bits shifted out are dropped, as PyTorch)."""
    return _shift("bitwise_left_shift", input, other, True)


def bitwise_right_shift(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """``input >> other`` for integer tensors (arithmetic: signed values keep their sign)."""
    return _shift("bitwise_right_shift", input, other, False)


def _rlshift(self: Tensor, other: _Number) -> Tensor:
    return _shift("bitwise_left_shift", other, self, True)


def _rrshift(self: Tensor, other: _Number) -> Tensor:
    return _shift("bitwise_right_shift", other, self, False)


def _float_pair(fn: str, input: Any, other: Any) -> tuple[Tensor, Tensor]:
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{fn}(): expected at least one Tensor argument")
    like = input if isinstance(input, Tensor) else other
    a, b = _as_tensor(input, like), _as_tensor(other, like)
    if not _is_float(a) and not _is_float(b):
        a, b = a.to(_core.get_default_dtype()), b.to(_core.get_default_dtype())
    return a, b


@_opmath
def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow: ``max + log1p(exp(-|input - other|))``.
    Equal infinities give that infinity; the gradient is ``sigmoid(input - other)``."""
    a, b = _float_pair("logaddexp", input, other)
    d = _core.where(a == b, 0.0, a - b)
    return a.maximum(b) + (-d.abs()).exp().log1p()


@_opmath
def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2**input + 2**other)`` without overflow."""
    a, b = _float_pair("logaddexp2", input, other)
    d = _core.where(a == b, 0.0, a - b)
    return a.maximum(b) + (d.abs() * -_LN2).exp().log1p() * (1.0 / _LN2)


@_opmath
def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input**2 + other**2)`` without overflow or underflow (scaled by the larger
    magnitude); infinite if either is, even against NaN."""
    a, b = _float_pair("hypot", input, other)
    aa, ab = a.abs(), b.abs()
    big, small = aa.maximum(ab), aa.minimum(ab)
    bad = (big == 0) | big.isinf()
    r = small / _where_safe(bad, big, 1.0)
    h = big * (r * r + 1).sqrt()
    h = _core.where(big == 0, 0.0, h)
    return _core.where(aa.isinf() | ab.isinf(), math.inf, h)


@_opmath
def xlogy(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """``input * log(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    x, y = _float_pair("xlogy", input, other)
    zero = (x == 0) & ((y <= 0) | (y == math.inf))
    return x * _core.where(zero, 0.0, _where_safe(zero, y, 1.0).log())


# sin(t)/t = sum_k (-1)^k t^2k / (2k+1)!: through t^22 the truncation error is below
# 1e-18 for |t| <= pi/2.
_SINC_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(12))


@_opmath
def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0 (with gradient 0 there).

    For ``|x| < 1/2`` a Taylor series in ``(pi x)**2``: the quotient's gradient
    ``cos(pi x)/x - sin(pi x)/(pi x**2)`` subtracts two terms of size ``1/x`` to give
    one of size ``x``, which in float32 lost 2,700 unit roundoffs at ``x = 0.001``;
    the series' gradient adds no such terms."""
    x = _to_float(_need_tensor("sinc", "input", input))
    small = x.abs() < 0.5
    px = _where_safe(small, x, 1.0) * math.pi
    z = (_where_safe(~small, x, 0.0) * math.pi).square()
    return _core.where(small, _poly(z, _SINC_SERIES), px.sin() / px)


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians."""
    return _to_float(_need_tensor("deg2rad", "input", input)) * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees."""
    return _to_float(_need_tensor("rad2deg", "input", input)) * (180.0 / math.pi)


def frac(input: Tensor) -> Tensor:
    """The fractional part ``input - trunc(input)`` (sign of ``input``)."""
    _need_tensor("frac", "input", input)
    if not _is_float(input):
        raise RuntimeError(f"frac(): expected a floating-point tensor, got {_name(input.dtype)}")
    return input - input.trunc()


def signbit(input: Tensor) -> Tensor:
    """Whether each element's sign bit is set (True for -0.0; NaN reads False)."""
    _need_tensor("signbit", "input", input)
    if _name(input.dtype) == "bool":
        return input.logical_and(False)
    if not _is_float(input):
        return input < 0
    return (input < 0) | ((input == 0) & (input.reciprocal() < 0))


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``."""
    _need_tensor("heaviside", "input", input)
    _need_tensor("heaviside", "values", values)
    _same_dtype("heaviside", input=input, values=values)
    return _core.where(input == 0, values, (input > 0).to(input.dtype))


def nan_to_num(
    input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (the infinities
    by the dtype's largest and lowest finite values by default)."""
    _need_tensor("nan_to_num", "input", input)
    if not _is_float(input):
        return input.clone()
    big = _FLOAT_MAX[_name(input.dtype)]
    pos = big if posinf is None else posinf
    neg = -big if neginf is None else neginf
    out = _core.where(input == math.inf, pos, input)
    out = _core.where(input == -math.inf, neg, out)
    return _core.where(input.isnan(), nan, out)


# ---------------------------------------------------------------------------
# Inverse trigonometric and hyperbolic functions
# ---------------------------------------------------------------------------


def _one_minus_sq(x: Tensor) -> Tensor:
    """``sqrt(1 - x**2)`` as ``sqrt((1 - x)(1 + x))`` (no cancellation near ±1)."""
    return ((1 - x) * (1 + x)).sqrt()


@_opmath
def asin(input: Tensor) -> Tensor:
    """The inverse sine, ``atan2(x, sqrt(1 - x**2))`` (NaN outside [-1, 1])."""
    x = _to_float(_need_tensor("asin", "input", input))
    return x.atan2(_one_minus_sq(x))


@_opmath
def acos(input: Tensor) -> Tensor:
    """The inverse cosine, ``atan2(sqrt(1 - x**2), x)`` (NaN outside [-1, 1])."""
    x = _to_float(_need_tensor("acos", "input", input))
    return _one_minus_sq(x).atan2(x)


def atan(input: Tensor) -> Tensor:
    """The inverse tangent, ``atan2(x, 1)``."""
    x = _to_float(_need_tensor("atan", "input", input))
    return x.atan2(_core.ones((), dtype=x.dtype, device=x.device))


def _large(x: Tensor) -> Tensor:
    """Where ``x`` is so large that ``1/x**2`` is below the dtype's precision."""
    return x > 1.0 / math.sqrt(_FLOAT_EPS[_name(x.dtype)])


@_opmath
def asinh(input: Tensor) -> Tensor:
    """The inverse hyperbolic sine: ``log1p(a + a**2 / (1 + sqrt(1 + a**2)))`` for
    ``a = |x|`` (no cancellation near 0), ``log(2a)`` once ``1/a**2`` is below the
    dtype's precision (so ``a**2`` never overflows); odd."""
    x = _to_float(_need_tensor("asinh", "input", input))

    def g(a: Tensor) -> Tensor:
        large = _large(a)
        s = _where_safe(large, a, 1.0)
        sq = s * s
        small = (s + sq / ((sq + 1).sqrt() + 1)).log1p()
        return _core.where(large, _where_safe(~large, a, 1.0).log() + _LN2, small)

    return _odd(x, g)


@_opmath
def acosh(input: Tensor) -> Tensor:
    """The inverse hyperbolic cosine: ``log1p(y + sqrt(y (y + 2)))`` with ``y = x - 1``
    (accurate near 1), ``log(2x)`` for huge ``x``; NaN below 1."""
    x = _to_float(_need_tensor("acosh", "input", input))
    large = _large(x)
    y = _where_safe(large, x, 1.0) - 1
    small = (y + (y * (y + 2)).sqrt()).log1p()
    return _core.where(large, _where_safe(~large, x, 1.0).log() + _LN2, small)


@_opmath
def atanh(input: Tensor) -> Tensor:
    """The inverse hyperbolic tangent, ``0.5 * log1p(2a / (1 - a))`` for ``a = |x|``; odd,
    ±inf at ±1, NaN beyond."""
    x = _to_float(_need_tensor("atanh", "input", input))
    return _odd(x, lambda a: (2 * a / (1 - a)).log1p() * 0.5)


# Rational first guess of erfinv (central |y| <= 0.7 and tail), refined by Newton steps.
_ERFINV_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_ERFINV_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_ERFINV_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_ERFINV_D = (3.543889200, 1.637067800)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# erfc(z) = t exp(-z² + P(t)), t = 1 / (1 + z/2), relative error below 1.2e-7 for z >= 0
# (Numerical Recipes' erfcc, from Chebyshev fitting).
_ERFC_P = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _erfc_tail(z: Tensor) -> Tensor:
    """``erfc(z)`` for ``z >= 0`` to a relative 1.2e-7 (plus float32 rounding): in the tail,
    where ``erf(z)`` is near 1, this has a much smaller absolute error than ``1 - erf(z)``."""
    t = (z * 0.5 + 1).reciprocal()
    return t * (_poly(t, _ERFC_P) - z * z).exp()


def _poly(z: Tensor, coeffs: Sequence[float]) -> Tensor:
    """``coeffs[0] + coeffs[1] z + ...`` by Horner's rule."""
    acc = z * coeffs[-1] + coeffs[-2]
    for c in reversed(coeffs[:-2]):
        acc = acc * z + c
    return acc


@_wide
def erfinv(input: Tensor) -> Tensor:
    """The inverse error function on [-1, 1] (±inf at ±1, NaN beyond).

    A rational approximation gives a first guess (to about 1e-6); three Newton steps
    ``x -= (erf(x) - y) / (2/sqrt(pi) exp(-x**2))`` on the registry's ``erf`` take it to
    the dtype's precision. The guess carries no gradient; the steps do, so the
    gradient converges to ``sqrt(pi)/2 exp(x**2)`` at every order.

    Computed in float32 (on the GPU, which has no float64), the tail ``|y| > 0.7`` takes
    its residual as ``(1 - y) - erfc(x)`` instead: ``erf(x)`` near 1 has an absolute error
    of a few float32 ulps of 1 (2.5e-7 on the GPU), which the root's conditioning
    ``1/erf'(x)`` magnified into errors of 140 unit roundoffs in ``x`` at ``y = 0.995``
    and 1,500 in the gradient; ``1 - y`` is exact and ``erfc(x)`` small, so the residual's
    error shrinks with it (``x`` then within 4 unit roundoffs, its gradient 7)."""
    y = _to_float(_need_tensor("erfinv", "input", input))
    edge = y.abs() >= 1
    ys = _where_safe(edge, y, 0.0)

    def g(a: Tensor) -> Tensor:
        a0 = a.detach()
        central = a0 <= 0.7
        ac = _where_safe(~central, a0, 0.0)
        z = ac * ac
        guess_c = ac * _poly(z, _ERFINV_A) / (_poly(z, _ERFINV_B) * z + 1)
        at = _where_safe(central, a0, 0.9)
        zt = (-((1 - at) * 0.5).log()).sqrt()
        guess_t = _poly(zt, _ERFINV_C) / ((zt * _ERFINV_D[1] + _ERFINV_D[0]) * zt + 1)
        x = _core.where(central, guess_c, guess_t)
        for _ in range(3):
            r = x.erf() - a
            if a.dtype != _core.float64:
                r = _core.where(central, r, (1 - a) - _erfc_tail(x))
            x = x - r / ((-(x * x)).exp() * _TWO_OVER_SQRT_PI)
        return x

    x = _odd(ys, g)
    x = _core.where(y == 1, math.inf, x)
    x = _core.where(y == -1, -math.inf, x)
    return _core.where(y.abs() > 1, math.nan, x)


# The gamma-function family lives in its own module, which uses the helpers above: import
# it from here (``_ZETA_TAIL`` is re-exported for ``special``), never on its own first.
from ._gamma_fns import _ZETA_TAIL, digamma, lgamma, polygamma  # noqa: E402, F401

# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------


def isclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (equal values, including
    equal infinities, are close; NaNs are close to each other only with ``equal_nan``)."""
    _need_tensor("isclose", "input", input)
    _need_tensor("isclose", "other", other)
    _same_dtype("isclose", input=input, other=other)
    if rtol < 0 or atol < 0:
        raise RuntimeError(f"isclose(): rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    close = input == other
    if equal_nan and _is_float(input):
        close = close | (input.isnan() & other.isnan())
    if (rtol == 0 and atol == 0) or _name(input.dtype) == "bool":
        return close
    a, b = _to_float(input), _to_float(other)
    err = (a - b).abs()
    return close | (err.isfinite() & (err <= (b * rtol).abs() + atol))


def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """Whether every element of ``input`` is close to ``other`` (see :func:`isclose`)."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether both tensors have the same shape and the same elements (NaN differs from itself)."""
    _need_tensor("equal", "input", input)
    _need_tensor("equal", "other", other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return builtins.bool((input == other).all())


def isin(
    elements: Tensor | _Number,
    test_elements: Tensor | _Number,
    *,
    assume_unique: bool = False,
    invert: bool = False,
) -> Tensor:
    """Whether each of ``elements`` occurs in ``test_elements`` (``~`` that with ``invert``)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): expected at least one Tensor argument")
    like = elements if isinstance(elements, Tensor) else test_elements
    e, t = _as_tensor(elements, like), _as_tensor(test_elements, like)
    hit = (e.unsqueeze(-1) == t.reshape(-1)).any(-1)
    return hit.logical_not() if invert else hit


# ---------------------------------------------------------------------------
# Reductions and scans
# ---------------------------------------------------------------------------


def var_mean(
    input: Tensor,
    dim: int | Sequence[int] | bool | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: _Number | None = None,
) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` over ``dim`` (``correction`` 1 by default, as ``Tensor.var``)."""
    _need_tensor("var_mean", "input", input)
    if isinstance(dim, builtins.bool):  # var_mean(input, unbiased)
        dim, unbiased = None, dim
    return input.var(dim, unbiased, keepdim, correction=correction), input.mean(dim, keepdim)


def std_mean(
    input: Tensor,
    dim: int | Sequence[int] | bool | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: _Number | None = None,
) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` over ``dim`` (``correction`` 1 by default, as ``Tensor.std``)."""
    _need_tensor("std_mean", "input", input)
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return input.std(dim, unbiased, keepdim, correction=correction), input.mean(dim, keepdim)


def count_nonzero(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """The number of nonzero elements (over ``dim``), as int64."""
    _need_tensor("count_nonzero", "input", input)
    nz = input != 0
    if dim is None:
        return nz.sum()
    return nz.sum(tuple(dim) if not isinstance(dim, builtins.int) else dim)


def nansum(
    input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The sum treating NaN as zero."""
    _need_tensor("nansum", "input", input)
    x = _core.where(input.isnan(), 0.0, input) if _is_float(input) else input
    return x.sum(dim, keepdim, dtype=dtype)


def nanmean(
    input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The mean of the non-NaN elements (NaN where all are NaN)."""
    _need_tensor("nanmean", "input", input)
    if not _is_float(input):
        raise RuntimeError(f"nanmean(): expected a floating-point input, got {_name(input.dtype)}")
    x = input if dtype is None else input.to(dtype)
    keep = x.isnan().logical_not()
    total = _core.where(keep, x, 0.0).sum(dim, keepdim)
    return total / keep.sum(dim, keepdim).to(total.dtype)


@_opmath
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))``, accurate at any spread of values: a log-space
    scan of ``logaddexp`` steps over doubling strides (``ceil(log2(n))`` of them)."""
    _need_tensor("logcumsumexp", "input", input)
    y = _to_float(input)
    if y.ndim == 0:
        return y.clone()
    d = _dim("logcumsumexp", dim, y.ndim)
    n = y.shape[d]
    s = 1
    while s < n:
        pad_shape = list(y.shape)
        pad_shape[d] = s
        pad = _core.full(tuple(pad_shape), -math.inf, dtype=y.dtype, device=y.device)
        y = logaddexp(y, _core.cat([pad, y.narrow(d, 0, n - s)], d))
        s *= 2
    return y


class _CumMaxResult(NamedTuple):
    values: Tensor
    indices: Tensor


class _CumMinResult(NamedTuple):
    values: Tensor
    indices: Tensor


# PyTorch's result types: ``ferrograd.return_types.cummax`` / ``.cummin``.
for _cls, _fn in ((_CumMaxResult, "cummax"), (_CumMinResult, "cummin")):
    _cls.__name__ = _cls.__qualname__ = _fn
    _cls.__module__ = "ferrograd.return_types"
_CumResult: dict[str, type[_CumMaxResult] | type[_CumMinResult]] = {
    "cummax": _CumMaxResult,
    "cummin": _CumMinResult,
}


def _cum_extreme(fn: str, input: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """The running maximum (``fn == "cummax"``) or minimum along ``dim`` and where it was
    reached: a scan over (value, index) pairs in ``ceil(log2(n))`` steps of doubling stride.

    The combine keeps the later pair unless the earlier one is strictly more extreme, and a
    NaN is the most extreme value of all: an associative choice (the extreme of the order
    "NaN above every number, later index above earlier"), so each step may merge whole
    prefixes. That is PyTorch's rule: ties give the latest index, and from the first NaN on
    the values are NaN with the index of the latest NaN.
    """
    _need_tensor(fn, "input", input)
    if input.dtype == _core.bool:
        values, indices = _cum_extreme(fn, input.to(_core.int32), dim)
        return _CumResult[fn](values.to(_core.bool), indices)
    if input.ndim == 0:
        _dim(fn, dim, 1)
        return _CumResult[fn](input.clone(), _core.zeros((), dtype=_core.int64, device=input.device))
    d = _dim(fn, dim, input.ndim)
    n = input.shape[d]
    shape = [1] * input.ndim
    shape[d] = n
    idx = (
        _core.arange(n, dtype=_core.int64, device=input.device)
        .reshape(tuple(shape))
        .expand(tuple(input.shape))
    )
    idx = idx.contiguous()
    y = input
    floating = _is_float(input)
    s = 1
    while s < n:
        prev_y = y.narrow(d, 0, n - s)
        prev_i = idx.narrow(d, 0, n - s)
        cur_y = y.narrow(d, s, n - s)
        cur_i = idx.narrow(d, s, n - s)
        beats = cur_y >= prev_y if fn == "cummax" else cur_y <= prev_y
        if floating:
            beats = cur_y.isnan().logical_or(prev_y.isnan().logical_not().logical_and(beats))
        y = _core.cat([y.narrow(d, 0, s), _core.where(beats, cur_y, prev_y)], d)
        idx = _core.cat([idx.narrow(d, 0, s), _core.where(beats, cur_i, prev_i)], d)
        s *= 2
    return _CumResult[fn](y, idx)


def cummax(input: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """``(values, indices)``: the running maximum of ``input`` along ``dim`` and the index
    where it was reached (the latest one on ties; NaN propagates, with the latest NaN's
    index). The gradient flows to the selected element of each prefix."""
    return _cum_extreme("cummax", input, dim)


def cummin(input: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """``(values, indices)``: the running minimum of ``input`` along ``dim`` and the index
    where it was reached (the latest one on ties; NaN propagates, with the latest NaN's
    index). The gradient flows to the selected element of each prefix."""
    return _cum_extreme("cummin", input, dim)


def trace(input: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal."""
    _need_tensor("trace", "input", input)
    if input.ndim != 2:
        raise RuntimeError(f"trace(): expected a matrix, got shape {tuple(input.shape)}")
    return input.diagonal().sum()


def diff(
    input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None
) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (after joining ``prepend`` and
    ``append`` to ``input``); XOR of neighbours for bool tensors."""
    _need_tensor("diff", "input", input)
    if input.ndim == 0:
        raise RuntimeError("diff(): expected at least one dimension, got a 0-d tensor")
    if n < 0:
        raise RuntimeError(f"diff(): order n must be non-negative, got {n}")
    d = _dim("diff", dim, input.ndim)
    parts = []
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            parts.append(None)
            continue
        t = _as_tensor(extra, input)
        if t.ndim == 0:
            shape = list(input.shape)
            shape[d] = 1
            t = t.expand(*shape)
        if t.ndim != input.ndim or any(t.shape[i] != input.shape[i] for i in range(input.ndim) if i != d):
            raise RuntimeError(
                f"diff(): {name} of shape {tuple(t.shape)} must match input {tuple(input.shape)} "
                f"in every dim but {dim}"
            )
        parts.append(t)
    if n == 0:
        return input.clone()
    x = _core.cat([t for t in (parts[0], input, parts[1]) if t is not None], d)
    is_bool = _name(x.dtype) == "bool"
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = hi.logical_xor(lo) if is_bool else hi - lo
    return x


# ---------------------------------------------------------------------------
# Shape: tile, meshgrid, repeat_interleave, diag_embed
# ---------------------------------------------------------------------------


def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """``input`` repeated ``dims[i]`` times along each dim (``dims`` padded with leading 1s)."""
    _need_tensor("tile", "input", input)
    dims = tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return input.repeat(*dims)


def meshgrid(*tensors: Tensor | Sequence[Tensor], indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids of 0-d/1-d tensors: ``indexing="ij"`` (the default) puts
    ``tensors[i]`` along dim ``i``; ``"xy"`` swaps the first two dims."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise ValueError(f'meshgrid(): indexing must be "ij" or "xy", got {indexing!r}')
    ts = [_need_tensor("meshgrid", f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    if not ts:
        raise RuntimeError("meshgrid(): expected at least one tensor")
    for i, t in enumerate(ts):
        if t.ndim > 1:
            raise RuntimeError(
                f"meshgrid(): expected 0-d or 1-d tensors, tensors[{i}] has shape {tuple(t.shape)}"
            )
        if t.dtype != ts[0].dtype:
            raise RuntimeError(
                f"meshgrid(): expected all tensors to have the same dtype, got {_name(ts[0].dtype)} "
                f"and {_name(t.dtype)}"
            )
    flat = [t.reshape(-1) for t in ts]
    pos = list(range(len(flat)))
    if indexing == "xy" and len(flat) >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * len(flat)
    for i, t in enumerate(flat):
        shape[pos[i]] = t.shape[0]
    out = []
    for i, t in enumerate(flat):
        view = [1] * len(flat)
        view[pos[i]] = -1
        out.append(t.reshape(*view).expand(*shape))
    return tuple(out)


def repeat_interleave(
    input: Tensor,
    repeats: Tensor | int | None = None,
    dim: int | None = None,
    *,
    output_size: int | None = None,
) -> Tensor:
    """Each element (slice along ``dim``; of the flattened input when ``dim`` is None)
    repeated ``repeats`` times, or ``repeats[i]`` times for a tensor of repeats.
    ``repeat_interleave(repeats)`` repeats ``arange(len(repeats))``.

    With tensor repeats the output size is their sum: pass ``output_size`` to
    capture it in a graph (otherwise capture refuses, the size depending on values)."""
    _need_tensor("repeat_interleave", "input", input)
    if repeats is None:
        if input.ndim != 1 or _is_float(input) or _name(input.dtype) == "bool":
            raise RuntimeError(
                f"repeat_interleave(): repeats must be a 1-d integer tensor, got {_name(input.dtype)} "
                f"of shape {tuple(input.shape)}"
            )
        idx = _core.arange(input.shape[0], dtype=_core.int64, device=input.device)
        return repeat_interleave(idx, input, 0, output_size=output_size)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = _dim("repeat_interleave", dim, input.ndim)
    if input.ndim == 0:
        input = input.reshape(1)
    if isinstance(repeats, Tensor) and repeats.ndim <= 1 and repeats.numel() == 1:
        repeats = repeats.reshape(1).expand(input.shape[d])  # one count for every slice
    if isinstance(repeats, builtins.int):
        if repeats < 0:
            raise RuntimeError(f"repeat_interleave(): repeats must be non-negative, got {repeats}")
        shape = list(input.shape)
        expanded = [*shape[: d + 1], repeats, *shape[d + 1 :]]
        out = input.unsqueeze(d + 1).expand(*expanded)
        shape[d] *= repeats
        return out.reshape(*shape)
    _need_tensor("repeat_interleave", "repeats", repeats)
    if repeats.ndim != 1 or _is_float(repeats) or _name(repeats.dtype) == "bool":
        raise RuntimeError(
            f"repeat_interleave(): repeats must be an int or a 1-d integer tensor, got {_name(repeats.dtype)} "
            f"of shape {tuple(repeats.shape)}"
        )
    if repeats.shape[0] != input.shape[d]:
        raise RuntimeError(
            f"repeat_interleave(): repeats has {repeats.shape[0]} entries but input{tuple(input.shape)} "
            f"has {input.shape[d]} along dim {dim}"
        )
    reps = repeats.to(_core.int64)
    if output_size is None:
        _refuse_in_capture(
            "repeat_interleave", "the output size is the sum of tensor repeats (pass output_size)"
        )
        if reps.numel() and builtins.bool((reps < 0).any()):
            raise RuntimeError("repeat_interleave(): repeats must be non-negative")
        output_size = builtins.int(reps.sum())
    ends = reps.cumsum(0)
    pos = _core.arange(output_size, dtype=_core.int64, device=input.device)
    idx = (pos.unsqueeze(1) >= ends.unsqueeze(0)).sum(1)
    return input.index_select(d, idx)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices with the last dim of ``input`` on their ``offset`` diagonal, in the
    output dims ``dim1`` and ``dim2`` (the other entries 0)."""
    _need_tensor("diag_embed", "input", input)
    x = input.reshape(1) if input.ndim == 0 else input
    nd = x.ndim + 1
    d1, d2 = _dim("diag_embed", dim1, nd), _dim("diag_embed", dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diag_embed(): diagonal dimensions cannot be identical, got {dim1} and {dim2}")
    n = x.shape[-1]
    k = builtins.abs(offset)
    m = n + k
    if k:
        pad_shape = (*x.shape[:-1], k)
        x = _core.cat([_core.zeros(*pad_shape, dtype=x.dtype, device=x.device), x], -1)
    ar = _core.arange(m, dtype=_core.int64, device=x.device)
    mask = (ar.unsqueeze(0) - ar.unsqueeze(1)) == offset
    vals = x.unsqueeze(-2) if offset >= 0 else x.unsqueeze(-1)
    out = _core.where(mask, vals, _core.zeros((), dtype=x.dtype, device=x.device))
    perm = [0] * nd
    rest = iter(range(nd - 2))
    for i in range(nd):
        perm[i] = nd - 2 if i == d1 else nd - 1 if i == d2 else next(rest)
    return out.permute(*perm)


# ---------------------------------------------------------------------------
# Searching and counting
# ---------------------------------------------------------------------------


def searchsorted(
    sorted_sequence: Tensor,
    input: Tensor | _Number,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """For each value, the index at which inserting it keeps the innermost dim of
    ``sorted_sequence`` sorted: the first index with ``value <= seq[i]`` (``right``: with
    ``value < seq[i]``). NaN sorts last. Computed as a count of comparisons."""
    _need_tensor("searchsorted", "sorted_sequence", sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted(): side='left' contradicts right=True")
        right = side == "right"
    seq = sorted_sequence
    if seq.ndim == 0:
        raise RuntimeError("searchsorted(): sorted_sequence must have at least one dimension")
    if sorter is not None:
        seq = seq.take_along_dim(sorter.to(_core.int64), -1)
    scalar = not isinstance(input, Tensor)
    v = _as_tensor(input, seq)
    if scalar and seq.ndim != 1:
        raise RuntimeError("searchsorted(): a scalar value needs a 1-d sorted_sequence")
    if seq.ndim > 1 and (v.ndim != seq.ndim or tuple(v.shape[:-1]) != tuple(seq.shape[:-1])):
        raise RuntimeError(
            f"searchsorted(): sorted_sequence{tuple(seq.shape)} and input{tuple(v.shape)} must have the same "
            "leading dims"
        )
    vv = v.unsqueeze(-1)
    s = seq if seq.ndim == 1 else seq.unsqueeze(-2)
    below = (s <= vv) if right else (s < vv)
    count = below.sum(-1)
    if _is_float(v):
        count = _core.where(v.isnan(), seq.shape[-1], count)
    return count.to(_core.int32) if out_int32 else count


def bucketize(
    input: Tensor | _Number, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    """The bucket of each value among 1-d sorted ``boundaries``: ``i`` with
    ``boundaries[i-1] < x <= boundaries[i]`` (``right``: ``boundaries[i-1] <= x < boundaries[i]``)."""
    _need_tensor("bucketize", "boundaries", boundaries)
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize(): boundaries must be 1-d, got shape {tuple(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value ``0 .. max(input)`` occurs in a 1-d non-negative integer
    tensor (summing ``weights`` instead of ones), at least ``minlength`` long. The
    output length depends on the values: capturing it in a graph raises ``TraceError``."""
    _need_tensor("bincount", "input", input)
    if input.ndim != 1 or _is_float(input) or _name(input.dtype) == "bool":
        raise RuntimeError(
            f"bincount(): expected a 1-d integer tensor, got {_name(input.dtype)} of shape {tuple(input.shape)}"
        )
    if minlength < 0:
        raise RuntimeError(f"bincount(): minlength must be non-negative, got {minlength}")
    if weights is not None:
        _need_tensor("bincount", "weights", weights)
        if tuple(weights.shape) != tuple(input.shape):
            raise RuntimeError(
                f"bincount(): weights of shape {tuple(weights.shape)} must match input of shape {tuple(input.shape)}"
            )
    _refuse_in_capture("bincount", "the output length depends on the input's values")
    n = minlength
    if input.numel():
        if builtins.bool((input < 0).any()):
            raise RuntimeError("bincount(): the input must be non-negative")
        n = builtins.max(n, builtins.int(input.max()) + 1)
    idx = input.to(_core.int64)
    if weights is None:
        src, dt = _core.ones(input.shape[0], dtype=_core.int64, device=input.device), _core.int64
    else:
        dt = _core.float32 if _name(weights.dtype) == "float32" else _core.float64
        src = weights.to(dt)
    return _core.zeros(n, dtype=dt, device=input.device).scatter_add(0, idx, src)


def histc(input: Tensor, bins: int = 100, min: _Number = 0, max: _Number = 0) -> Tensor:  # noqa: A002
    """A histogram of ``bins`` equal-width bins over ``[min, max]`` (the data's range
    when ``min == max``); elements outside are ignored, ``max`` falls in the last bin."""
    _need_tensor("histc", "input", input)
    if not _is_float(input):
        raise RuntimeError(f"histc(): expected a floating-point input, got {_name(input.dtype)}")
    if bins <= 0:
        raise RuntimeError(f"histc(): bins must be positive, got {bins}")
    if min > max:
        raise RuntimeError(f"histc(): max must be larger than min, got min={min}, max={max}")
    x = input.reshape(-1)
    if min == max:
        if x.numel():
            lo, hi = x.min(), x.max()
        else:
            lo = hi = _core.zeros((), dtype=x.dtype, device=x.device)
        same = lo == hi
        lo, hi = _core.where(same, lo - 1, lo), _core.where(same, hi + 1, hi)
    else:
        lo = _core.full((), builtins.float(min), dtype=x.dtype, device=x.device)
        hi = _core.full((), builtins.float(max), dtype=x.dtype, device=x.device)
    inside = (x >= lo) & (x <= hi)
    pos = (x - lo) * bins / (hi - lo)
    pos = _core.where(inside, pos, 0.0).trunc().clamp(0, bins - 1).to(_core.int64)
    out = _core.zeros(bins, dtype=x.dtype, device=x.device)
    return out.scatter_add(0, pos, inside.to(x.dtype)).detach()


# ---------------------------------------------------------------------------
# Tensor methods
# ---------------------------------------------------------------------------


def _self_signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature with its first parameter called ``self`` (as a method's)."""
    sig = inspect.signature(fn)
    first, *rest = sig.parameters.values()
    return sig.replace(parameters=[first.replace(name="self"), *rest])


def _as_method(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """A ``Tensor`` method calling ``fn(self, ...)``, with ``fn``'s signature and docstring."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name or fn.__name__
    method.__doc__ = fn.__doc__
    method.__signature__ = _self_signature(fn)  # type: ignore[attr-defined]
    return method


def _inplace(fn: Callable[..., Tensor], name: str) -> Callable[..., Tensor]:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self.copy_(fn(self, *args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place :func:`ferrograd.{fn.__name__}` (writes the result into ``self``)."
    method.__signature__ = _self_signature(fn)  # type: ignore[attr-defined]
    return method


def _tile_method(self: Tensor, *dims: Any) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], list | tuple):
        dims = tuple(dims[0])
    return tile(self, dims)


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    return polygamma(n, self)


def _bucketize_method(
    self: Tensor, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    return bucketize(self, boundaries, out_int32=out_int32, right=right)


# Tensor methods PyTorch has, by name (functions whose first argument is ``self``).
METHODS: dict[str, Callable[..., Any]] = {
    "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift,
    "__lshift__": bitwise_left_shift,
    "__rshift__": bitwise_right_shift,
    "__rlshift__": _rlshift,
    "__rrshift__": _rrshift,
    "lerp": lerp,
    "addmm": addmm,
    "addmv": addmv,
    "baddbmm": baddbmm,
    "addbmm": addbmm,
    "kron": kron,
    "cross": cross,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "logaddexp": logaddexp,
    "logaddexp2": logaddexp2,
    "hypot": hypot,
    "xlogy": xlogy,
    "sinc": sinc,
    "deg2rad": deg2rad,
    "rad2deg": rad2deg,
    "frac": frac,
    "signbit": signbit,
    "heaviside": heaviside,
    "nan_to_num": nan_to_num,
    "asin": asin,
    "acos": acos,
    "atan": atan,
    "asinh": asinh,
    "acosh": acosh,
    "atanh": atanh,
    "arcsin": asin,
    "arccos": acos,
    "arctan": atan,
    "arcsinh": asinh,
    "arccosh": acosh,
    "arctanh": atanh,
    "erfinv": erfinv,
    "lgamma": lgamma,
    "digamma": digamma,
    "polygamma": _polygamma_method,
    "isclose": isclose,
    "allclose": allclose,
    "equal": equal,
    "count_nonzero": count_nonzero,
    "cummax": cummax,
    "cummin": cummin,
    "nansum": nansum,
    "nanmean": nanmean,
    "logcumsumexp": logcumsumexp,
    "trace": trace,
    "diff": diff,
    "tile": _tile_method,
    "repeat_interleave": repeat_interleave,
    "diag_embed": diag_embed,
    "bincount": bincount,
    "histc": histc,
    "bucketize": _bucketize_method,
}
METHODS.update(
    {
        "lerp_": _inplace(lerp, "lerp_"),
        "clamp_min_": _inplace(clamp_min, "clamp_min_"),
        "clamp_max_": _inplace(clamp_max, "clamp_max_"),
        "nan_to_num_": _inplace(nan_to_num, "nan_to_num_"),
    }
)


def _sub_with_alpha(core_sub_: Callable[..., Any]) -> Callable[..., Any]:
    """The core's ``sub_(other)`` with PyTorch's ``alpha`` keyword (``self -= alpha * other``)."""

    def sub_(self: Tensor, other: Any, *, alpha: _Number | None = None) -> Tensor:
        if alpha is None or (not isinstance(alpha, bool) and alpha == 1):
            return core_sub_(self, other)
        if isinstance(alpha, bool) or not isinstance(alpha, (builtins.int, builtins.float)):
            raise TypeError(f"sub_: alpha must be a number, got {type(alpha).__name__}")
        return core_sub_(self, other * alpha)

    sub_.__doc__ = "In-place ``self - alpha * other`` (``alpha`` defaults to 1), returning ``self``."
    sub_.__qualname__ = "Tensor.sub_"
    sub_._fg_alpha = True  # type: ignore[attr-defined]
    return sub_


def _div_with_rounding(core_div_: Callable[..., Any]) -> Callable[..., Any]:
    """The core's ``div_(other)`` with PyTorch's ``rounding_mode`` keyword (as ``div`` has)."""

    def div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        if rounding_mode is None:
            return core_div_(self, other)
        return self.copy_(self.div(other, rounding_mode=rounding_mode))

    div_.__doc__ = (
        "In-place ``self / other``, returning ``self``; ``rounding_mode`` ``'floor'`` or ``'trunc'`` "
        "rounds the quotient as :meth:`div` does."
    )
    div_.__qualname__ = "Tensor.div_"
    div_._fg_rounding = True  # type: ignore[attr-defined]
    return div_


def install() -> None:
    """Attach :data:`METHODS` to ``Tensor`` (and so its subclasses), leaving any method
    the core defines in place. Aliases share one method object. The core's ``sub_`` and
    ``div_`` gain PyTorch's ``alpha`` and ``rounding_mode`` keywords (``sub``/``div`` have them)."""
    if not getattr(Tensor.sub_, "_fg_alpha", False):
        Tensor.sub_ = _sub_with_alpha(Tensor.sub_)  # type: ignore[method-assign]
    if not getattr(Tensor.div_, "_fg_rounding", False):
        Tensor.div_ = _div_with_rounding(Tensor.div_)  # type: ignore[method-assign]
    made: dict[int, Callable[..., Any]] = {}
    for name, fn in METHODS.items():
        if name in Tensor.__dict__ and getattr(Tensor.__dict__[name], "__module__", None) != __name__:
            continue
        if name.endswith("_") or fn.__name__.endswith("_method"):
            method = fn
        else:
            method = made.setdefault(id(fn), _as_method(fn))
        setattr(Tensor, name, method)


# PyTorch's numpy-style aliases.
arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh
