"""More PyTorch functions composed in Python of registry ops (no kernels of their own).

The same contract as :mod:`ferrograd._tensor_extras`: PyTorch's names, argument names
and defaults, built only from ops the Rust registry has, so each runs on every device
and in every mode those ops do (eager, autograd to any order, captured graphs, the
GPU). :func:`install` attaches the ones PyTorch also has as ``Tensor`` methods, never
replacing a method the core defines; ``ferrograd`` re-exports the functions.

Covered here: creation and conversion (``as_tensor``, ``logspace``), the
``inference_mode`` switch, joining and rearranging (``hstack``/``vstack``/``dstack``,
``atleast_*d``, ``fliplr``/``flipud``/``rot90``, ``broadcast_tensors``, ``movedim``,
``unflatten``, ``cartesian_prod``), indexing (``take``, ``argwhere``, ``index_add``,
``index_reduce``, ``masked_scatter``), elementwise math (``fmod``, ``exp2``, ``log10``, ``sinh``,
``cosh``, ``erfc``, ``fmax``/``fmin``, ``copysign``), reductions (``norm``,
``quantile``/``nanquantile``, ``mode``), ``unique`` (eager only: its output length
depends on the values), random draws (``dropout``, ``poisson``) and predicates
(``is_tensor``, ``is_floating_point``, ``numel``).
"""

from __future__ import annotations

import builtins
import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from . import _capture, _core
from ._grad_mode import _GradModeContext
from ._tensor_extras import (
    _as_method,
    _as_tensor,
    _broadcast_shape,
    _dim,
    _erfc_tail,
    _inplace,
    _is_float,
    _name,
    _need_tensor,
    _odd,
    _refuse_in_capture,
    _to_float,
    _where_safe,
    _wide,
    meshgrid,
    signbit,
    std_mean,
    var_mean,
)

Tensor = _core.Tensor
_Number = builtins.int | builtins.float | builtins.bool
F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "argwhere",
    "as_tensor",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_tensors",
    "cartesian_prod",
    "column_stack",
    "copysign",
    "cosh",
    "dropout",
    "dstack",
    "erfc",
    "exp2",
    "fliplr",
    "flipud",
    "fmax",
    "fmin",
    "fmod",
    "hstack",
    "index_add",
    "index_reduce",
    "inference_mode",
    "is_floating_point",
    "is_inference_mode_enabled",
    "is_tensor",
    "log10",
    "logspace",
    "masked_scatter",
    "mode",
    "moveaxis",
    "movedim",
    "nanquantile",
    "norm",
    "numel",
    "poisson",
    "quantile",
    "rot90",
    "row_stack",
    "sinh",
    "take",
    "unflatten",
    "unique",
    "unique_consecutive",
    "vstack",
]


# ---------------------------------------------------------------------------
# Creation and conversion
# ---------------------------------------------------------------------------


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, sharing memory where it can, as ``torch.as_tensor``: a tensor
    already of that dtype and device is returned itself (else converted with ``.to``); a
    NumPy array on the CPU with no dtype change shares the array's memory
    (``from_numpy``); anything else is copied (``ferrograd.tensor``)."""
    if isinstance(data, Tensor):
        out = data
        if dtype is not None and out.dtype != dtype:
            out = out.to(dtype)
        if device is not None and out.device != _core.device(device):
            out = out.to(device)
        return out
    if type(data).__module__ == "numpy" and type(data).__name__ == "ndarray":
        on_cpu = device is None or _core.device(device) == _core.device("cpu")
        if on_cpu:
            try:
                shared = _core.from_numpy(data)
            except (TypeError, ValueError):
                shared = None  # a NumPy dtype ferrograd has not: copy below
            if shared is not None and (dtype is None or shared.dtype == dtype):
                return shared
    return _core.tensor(data, dtype=dtype, device=device)


def logspace(
    start: _Number,
    end: _Number,
    steps: builtins.int,
    base: builtins.float = 10.0,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: builtins.bool = False,
) -> Tensor:
    """``steps`` values ``base ** e`` for ``e`` evenly spaced from ``start`` to ``end``
    inclusive (computed in float64, then converted to ``dtype``, float32 by default)."""
    if isinstance(steps, builtins.bool) or not isinstance(steps, builtins.int):
        raise TypeError(f"logspace(): argument 'steps' must be an int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError(f"logspace(): number of steps must be non-negative, got {steps}")
    exps = _core.linspace(start, end, steps, dtype=_core.float64)
    vals = float(base) ** exps
    out = vals.to(dtype if dtype is not None else _core.get_default_dtype())
    if device is not None:
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out


# ---------------------------------------------------------------------------
# inference_mode
# ---------------------------------------------------------------------------

_inference = threading.local()


def is_inference_mode_enabled() -> builtins.bool:
    """Whether the current thread is inside an enabled :class:`inference_mode` block."""
    return builtins.bool(getattr(_inference, "depth", 0))


class inference_mode(_GradModeContext):  # noqa: N801 - PyTorch's name
    """Run the block (or decorated function) without recording gradients, as ``no_grad``:
    tensors made inside do not require grad. ``inference_mode(False)`` changes nothing.

    Usable as ``with inference_mode():``, ``@inference_mode()`` and ``@inference_mode``.
    ferrograd has no separate inference tensors; this is ``no_grad`` plus the flag
    :func:`is_inference_mode_enabled` reads.
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, builtins.bool):  # @inference_mode without ()
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: builtins.bool = True) -> None:
        self._on = builtins.bool(mode)
        self._mode = False

    def __enter__(self) -> None:
        if not self._on:
            return
        _inference.depth = getattr(_inference, "depth", 0) + 1
        super().__enter__()

    def __exit__(self, *exc: object) -> None:
        if not self._on:
            return
        super().__exit__(*exc)
        _inference.depth -= 1

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(self._on):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# Joining and rearranging
# ---------------------------------------------------------------------------


def _tensor_list(fn: str, tensors: tuple[Any, ...]) -> list[Tensor]:
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        _need_tensor(fn, f"tensors[{i}]", t)
    return list(tensors)


def _atleast(fn: str, nd: builtins.int, tensors: tuple[Any, ...]) -> Any:
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = []
    for t in _tensor_list(fn, tensors):
        s = tuple(t.shape)
        if len(s) < nd:
            if nd == 3 and len(s) == 2:
                s = (*s, 1)
            elif nd == 3 and len(s) == 1:
                s = (1, *s, 1)
            else:
                s = (1,) * (nd - len(s)) + s
            t = t.reshape(s)
        out.append(t)
    return out[0] if single else tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least 1 dim (0-d becomes ``(1,)``); one tensor in, one out."""
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least 2 dims (``(n,)`` becomes ``(1, n)``)."""
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least 3 dims (``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` ``(m, n, 1)``)."""
    return _atleast("atleast_3d", 3, tensors)


def _need_some(fn: str, tensors: Sequence[Tensor]) -> None:
    if not tensors:
        raise RuntimeError(f"{fn}(): expected a non-empty list of tensors")


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Join column-wise: along dim 0 for 1-D tensors (0-d ones become 1-D), else dim 1."""
    ts = _tensor_list("hstack", (tensors,))
    _need_some("hstack", ts)
    ts = [t.reshape(1) if t.dim() == 0 else t for t in ts]
    return _core.cat(ts, 0 if ts[0].dim() == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Join row-wise (dim 0) after making each tensor at least 2-D."""
    ts = _tensor_list("vstack", (tensors,))
    _need_some("vstack", ts)
    return _core.cat([_atleast("vstack", 2, (t,)) for t in ts], 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Join depth-wise (dim 2) after making each tensor at least 3-D."""
    ts = _tensor_list("dstack", (tensors,))
    _need_some("dstack", ts)
    return _core.cat([_atleast("dstack", 3, (t,)) for t in ts], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Join as columns: 0-d and 1-D tensors become ``(n, 1)`` columns, then :func:`hstack`."""
    ts = _tensor_list("column_stack", (tensors,))
    _need_some("column_stack", ts)
    return _core.cat([t.reshape(-1, 1) if t.dim() <= 1 else t for t in ts], 1)


def fliplr(input: Tensor) -> Tensor:
    """Reverse the order of columns (dim 1); the input must be at least 2-D."""
    _need_tensor("fliplr", "input", input)
    if input.dim() < 2:
        raise RuntimeError(f"fliplr(): input must be at least 2-D, got shape {tuple(input.shape)}")
    return input.flip(1)


def flipud(input: Tensor) -> Tensor:
    """Reverse the order of rows (dim 0); the input must be at least 1-D."""
    _need_tensor("flipud", "input", input)
    if input.dim() < 1:
        raise RuntimeError("flipud(): input must be at least 1-D, got a 0-d tensor")
    return input.flip(0)


def rot90(input: Tensor, k: builtins.int = 1, dims: Sequence[builtins.int] = (0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first towards the
    second (negative ``k`` rotates the other way)."""
    _need_tensor("rot90", "input", input)
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"rot90(): expected 2 rotation dims, got {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"rot90(): expected a tensor of at least 2 dims, got shape {tuple(input.shape)}")
    d0, d1 = _dim("rot90", dims[0], input.dim()), _dim("rot90", dims[1], input.dim())
    if d0 == d1:
        raise RuntimeError(f"rot90(): rotation dims must differ, got {dims}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded (as views) to their common broadcast shape."""
    ts = _tensor_list("broadcast_tensors", tensors)
    shape = _broadcast_shape("broadcast_tensors", *[tuple(t.shape) for t in ts])
    return tuple(t if tuple(t.shape) == shape else t.broadcast_to(shape) for t in ts)


def _dims(
    fn: str, arg: str, d: builtins.int | Sequence[builtins.int], ndim: builtins.int
) -> list[builtins.int]:
    ds = [d] if isinstance(d, builtins.int) else list(d)
    out = [_dim(fn, x, ndim) for x in ds]
    if len(set(out)) != len(out):
        raise RuntimeError(f"{fn}(): repeated dim in {arg} {ds}")
    return out


def movedim(
    input: Tensor,
    source: builtins.int | Sequence[builtins.int],
    destination: builtins.int | Sequence[builtins.int],
) -> Tensor:
    """Move the dims ``source`` to the positions ``destination``; the others keep their order."""
    _need_tensor("movedim", "input", input)
    nd = input.dim()
    src = _dims("movedim", "source", source, nd)
    dst = _dims("movedim", "destination", destination, nd)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim(): source and destination must have the same number of dims, got {len(src)} and {len(dst)}"
        )
    rest = iter([d for d in range(nd) if d not in src])
    at = dict(zip(dst, src, strict=True))
    perm = [at[i] if i in at else next(rest) for i in range(nd)]
    return input.permute(perm) if nd else input.reshape(())


moveaxis = movedim


def unflatten(input: Tensor, dim: builtins.int, sizes: Sequence[builtins.int]) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one of them may be -1)."""
    _need_tensor("unflatten", "input", input)
    sizes = [builtins.int(s) for s in sizes]
    if not sizes:
        raise RuntimeError("unflatten(): sizes must be non-empty")
    d = _dim("unflatten", dim, input.dim())
    if input.dim() == 0:
        raise RuntimeError("unflatten(): cannot unflatten a 0-d tensor")
    shape = list(input.shape)
    n = shape[d]
    if sizes.count(-1) > 1:
        raise RuntimeError(f"unflatten(): only one size may be -1, got {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or n % known:
            raise RuntimeError(
                f"unflatten(): sizes {sizes} cannot multiply up to the size of dim {dim} ({n})"
            )
        sizes[sizes.index(-1)] = n // known
    elif known != n:
        raise RuntimeError(f"unflatten(): sizes {sizes} don't multiply up to the size of dim {dim} ({n})")
    return input.reshape(shape[:d] + sizes + shape[d + 1 :])


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """All combinations of one element from each 1-D tensor, as rows (the first tensor
    varies slowest); one tensor is returned as it is."""
    ts = _tensor_list("cartesian_prod", tensors)
    _need_some("cartesian_prod", ts)
    for i, t in enumerate(ts):
        if t.dim() != 1:
            raise RuntimeError(
                f"cartesian_prod(): expected 1-D tensors, tensors[{i}] has shape {tuple(t.shape)}"
            )
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return _core.stack([g.reshape(-1) for g in grids], 1)


# ---------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------


def take(input: Tensor, index: Tensor) -> Tensor:
    """``input`` read as a flat (row-major) vector at ``index`` (negative counts from the
    end); the result has ``index``'s shape."""
    _need_tensor("take", "input", input)
    _need_tensor("take", "index", index)
    if index.dtype not in (_core.int64, _core.int32):
        raise TypeError(f"take(): index must be an integer tensor, got {_name(index.dtype)}")
    flat = input.reshape(-1)
    if flat.numel() == 0 and index.numel():
        raise IndexError("take(): cannot take from an empty tensor")
    try:
        return flat.index_select(0, index.reshape(-1)).reshape(tuple(index.shape))
    except IndexError as e:
        raise IndexError(f"take(): {e} (input has {flat.numel()} elements)") from None


def argwhere(input: Tensor) -> Tensor:
    """The indices of the nonzero elements, one row per element (as ``nonzero``)."""
    _need_tensor("argwhere", "input", input)
    return input.nonzero()


def index_add(
    input: Tensor, dim: builtins.int, index: Tensor, source: Tensor, *, alpha: _Number = 1
) -> Tensor:
    """``input`` with ``alpha * source[..., i, ...]`` added at position ``index[i]`` of dim
    ``dim`` (repeated indices accumulate). ``source`` has ``input``'s shape except along
    ``dim``, where its size is ``len(index)``."""
    _need_tensor("index_add", "input", input)
    _need_tensor("index_add", "index", index)
    _need_tensor("index_add", "source", source)
    if index.dtype not in (_core.int64, _core.int32):
        raise TypeError(f"index_add(): index must be an integer tensor, got {_name(index.dtype)}")
    if index.dim() > 1:
        raise IndexError(f"index_add(): index must be 0-D or 1-D, got shape {tuple(index.shape)}")
    if source.dtype != input.dtype:
        raise RuntimeError(
            f"index_add(): input ({_name(input.dtype)}) and source ({_name(source.dtype)}) must have the same dtype"
        )
    x, src = input, source
    if x.dim() == 0:
        x = x.reshape(1)
    if src.dim() == 0:
        src = src.reshape(1)
    d = _dim("index_add", dim, x.dim())
    idx = index.reshape(-1).to(_core.int64)
    want = list(x.shape)
    want[d] = idx.numel()
    if list(src.shape) != want:
        raise RuntimeError(
            f"index_add(): source shape must match input shape {tuple(input.shape)} except along dim {dim} "
            f"(size {idx.numel()}, the index length), got {tuple(source.shape)}"
        )
    if alpha != 1:
        src = src * alpha
    view = [1] * x.dim()
    view[d] = -1
    try:
        out = x.scatter_add(d, idx.reshape(view).expand(want), src)
    except IndexError as e:
        raise IndexError(f"index_add(): {e}") from None
    return out.reshape(tuple(input.shape))


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce(
    input: Tensor,
    dim: builtins.int,
    index: Tensor,
    source: Tensor,
    reduce: str,
    *,
    include_self: builtins.bool = True,
) -> Tensor:
    """``input`` with each slot ``index[i]`` of dim ``dim`` replaced by the reduction
    (``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``) of the ``source[..., i, ...]`` sent
    to it, and of its own value when ``include_self``; slots no index names keep their
    value. ``source`` has ``input``'s shape except along ``dim``, where its size is
    ``len(index)``. ``"mean"`` of integers rounds down. Gradients are those of
    :func:`scatter_reduce` (``amax``/``amin`` share a slot's gradient evenly among the
    values equal to its result)."""
    _need_tensor("index_reduce", "input", input)
    _need_tensor("index_reduce", "index", index)
    _need_tensor("index_reduce", "source", source)
    if reduce not in _INDEX_REDUCE:
        raise ValueError(
            f"index_reduce(): reduce must be one of {', '.join(map(repr, _INDEX_REDUCE))}, got {reduce!r}"
        )
    if index.dtype not in (_core.int64, _core.int32):
        raise TypeError(f"index_reduce(): index must be an integer tensor, got {_name(index.dtype)}")
    if index.dim() > 1:
        raise IndexError(f"index_reduce(): index must be 0-D or 1-D, got shape {tuple(index.shape)}")
    if source.dtype != input.dtype:
        raise TypeError(
            f"index_reduce(): input ({_name(input.dtype)}, shape {tuple(input.shape)}) and source "
            f"({_name(source.dtype)}, shape {tuple(source.shape)}) must have the same dtype"
        )
    x, src = input, source
    if x.dim() == 0:
        x = x.reshape(1)
    if src.dim() == 0:
        src = src.reshape(1)
    d = _dim("index_reduce", dim, x.dim())
    idx = index.reshape(-1)
    want = list(x.shape)
    want[d] = idx.numel()
    if list(src.shape) != want:
        raise ValueError(
            f"index_reduce(): source shape must match input shape {tuple(input.shape)} except along dim {dim} "
            f"(size {idx.numel()}, the index length), got {tuple(source.shape)}"
        )
    view = [1] * x.dim()
    view[d] = -1
    try:
        out = x.scatter_reduce(d, idx.reshape(view).expand(want), src, reduce, include_self=include_self)
    except (IndexError, ValueError, TypeError) as e:
        raise type(e)(f"index_reduce(): {e}") from None
    return out.reshape(tuple(input.shape))


def _index_reduce_inplace(
    self: Tensor,
    dim: builtins.int,
    index: Tensor,
    source: Tensor,
    reduce: str,
    *,
    include_self: builtins.bool = True,
) -> Tensor:
    # The gradient reads self's value from before the write: reduce into a (recorded) copy.
    _need_tensor("index_reduce_", "self", self)
    base = self.clone() if self.requires_grad or source.requires_grad else self
    return self.copy_(index_reduce(base, dim, index, source, reduce, include_self=include_self))


_index_reduce_inplace.__name__ = _index_reduce_inplace.__qualname__ = "index_reduce_"
_index_reduce_inplace.__doc__ = "In-place :func:`ferrograd.index_reduce` (writes the result into ``self``)."


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with the positions where ``mask`` (broadcast to ``input``'s shape) is true
    filled, in row-major order, with consecutive elements of ``source``."""
    _need_tensor("masked_scatter", "input", input)
    _need_tensor("masked_scatter", "mask", mask)
    _need_tensor("masked_scatter", "source", source)
    if mask.dtype != _core.bool:
        raise TypeError(f"masked_scatter(): mask must be a bool tensor, got {_name(mask.dtype)}")
    if source.dtype != input.dtype:
        raise RuntimeError(
            f"masked_scatter(): input ({_name(input.dtype)}) and source ({_name(source.dtype)}) "
            "must have the same dtype"
        )
    shape = tuple(input.shape)
    if _broadcast_shape("masked_scatter", shape, tuple(mask.shape)) != shape:
        raise RuntimeError(
            f"masked_scatter(): mask of shape {tuple(mask.shape)} does not broadcast to input shape {shape}"
        )
    m = mask.broadcast_to(shape).reshape(-1)
    k = source.numel()
    if not _capture.is_capturing():
        need = builtins.int(m.sum().item())
        if need > k:
            raise RuntimeError(f"masked_scatter(): the mask selects {need} elements but source has only {k}")
    if k == 0:
        return input.clone()
    pos = (m.to(_core.int64).cumsum(0) - 1).clamp(0, k - 1)
    vals = source.reshape(-1).index_select(0, pos)
    return _core.where(m, vals, input.reshape(-1)).reshape(shape)


# ---------------------------------------------------------------------------
# Elementwise math
# ---------------------------------------------------------------------------


def _pair(fn: str, input: Any, other: Any) -> tuple[Tensor, Tensor]:
    """Two tensors on one device, both of their promoted dtype (as the registry's binary ops
    promote: ``maximum`` decides)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{fn}(): expected at least one Tensor argument")
    if not isinstance(input, Tensor):
        input = _as_tensor(input, other)
    if not isinstance(other, Tensor):
        other = _as_tensor(other, input)
    if input.dtype != other.dtype:
        dt = (input.detach().reshape(-1)[:0].maximum(other.detach().reshape(-1)[:0])).dtype
        input, other = input.to(dt), other.to(dt)
    return input, other


def fmod(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """The C-style remainder of ``input / other``: it has the sign of ``input`` (``remainder``
    has ``other``'s). Integer division by zero raises; float ``fmod(x, 0)`` is NaN and
    ``fmod(x, ±inf)`` is ``x`` for finite ``x``."""
    a, b = _pair("fmod", input, other)
    try:
        r = a.remainder(b)
    except ValueError as e:
        raise RuntimeError(f"fmod(): integer division by zero ({_name(a.dtype)})") from e
    differ = (r != 0).logical_and((r < 0).logical_xor(a < 0))
    out = _core.where(differ, r - b, r)
    if _is_float(a):
        out = _core.where(b.isinf().logical_and(a.isfinite()), a, out)
    return out


def exp2(input: Tensor) -> Tensor:
    """``2 ** input`` (integers give float32)."""
    x = _to_float(_need_tensor("exp2", "input", input))
    return 2.0**x


_INV_LN10 = 1.0 / math.log(10.0)


@_wide
def log10(input: Tensor) -> Tensor:
    """The base-10 logarithm (integers give float32)."""
    x = _to_float(_need_tensor("log10", "input", input))
    return x.log() * _INV_LN10


def _exp_half_sq(a: Tensor) -> Tensor:
    """``exp(a) / 2`` for ``a >= 0`` as ``(exp(a/2) / 2) * exp(a/2)``: finite while the
    result is, though ``exp(a)`` alone overflows first."""
    h = (a * 0.5).exp()
    return (h * 0.5) * h


@_wide
def sinh(input: Tensor) -> Tensor:
    """The hyperbolic sine: ``(expm1(x) - expm1(-x)) / 2`` below 1 in magnitude (no
    cancellation near 0), ``exp(|x|)/2 - exp(-|x|)/2`` above (finite up to overflow of
    the result itself), odd."""
    x = _to_float(_need_tensor("sinh", "input", input))

    def g(a: Tensor) -> Tensor:
        small = a < 1.0
        s = _where_safe(~small, a, 0.5)
        big = _where_safe(small, a, 1.0)
        near = (s.expm1() - (-s).expm1()) * 0.5
        far = _exp_half_sq(big) - (-big).exp() * 0.5
        return _core.where(small, near, far)

    return _odd(x, g)


@_wide
def cosh(input: Tensor) -> Tensor:
    """The hyperbolic cosine ``exp(|x|)/2 + exp(-|x|)/2`` (finite up to overflow of the
    result itself)."""
    x = _to_float(_need_tensor("cosh", "input", input))
    a = x.abs()
    return _exp_half_sq(a) + (-a).exp() * 0.5


# Terms of the continued fraction for erfc in float64 (converged to 1e-16 from x = 2).
_ERFC_CF_TERMS = 60
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _erfc_cf(z: Tensor) -> Tensor:
    """``erfc(z)`` for ``z >= 2`` by Laplace's continued fraction
    ``exp(-z²)/sqrt(pi) / (z + (1/2)/(z + 1/(z + (3/2)/(z + ...))))``, evaluated from the tail."""
    acc = z
    for k in range(_ERFC_CF_TERMS, 0, -1):
        acc = z + (k * 0.5) / acc
    return (-(z * z)).exp() * _INV_SQRT_PI / acc


@_wide
def erfc(input: Tensor) -> Tensor:
    """The complementary error function ``1 - erf(x)``, accurate in the tail where ``erf(x)``
    is near 1: ``1 - erf(x)`` below a threshold, a tail formula above (in float64 a
    continued fraction from 2; in float32 a Chebyshev fit from 0.5)."""
    x = _to_float(_need_tensor("erfc", "input", input))
    wide = x.dtype == _core.float64
    cut = 2.0 if wide else 0.5
    tail = x >= cut
    xt = _where_safe(~tail, x, cut)
    far = _erfc_cf(xt) if wide else _erfc_tail(xt)
    return _core.where(tail, far, 1 - x.erf())


def _fextreme(fn: str, input: Tensor, other: Tensor, pick: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    _need_tensor(fn, "input", input)
    _need_tensor(fn, "other", other)
    a, b = _pair(fn, input, other)
    m = pick(a, b)
    if not _is_float(m):
        return m
    return _core.where(b.isnan(), a, _core.where(a.isnan(), b, m))


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum that ignores NaN: NaN only where both are NaN."""
    return _fextreme("fmax", input, other, lambda a, b: a.maximum(b))


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum that ignores NaN: NaN only where both are NaN."""
    return _fextreme("fmin", input, other, lambda a, b: a.minimum(b))


def copysign(input: Tensor | _Number, other: Tensor | _Number) -> Tensor:
    """``|input|`` with the sign of ``other`` (its sign bit, so ``-0.0`` counts as
    negative); the result is floating point (integers give float32)."""
    a, b = _pair("copysign", input, other)
    a = _to_float(a)
    mag = a.abs()
    return _core.where(signbit(b), -mag, mag)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def norm(
    input: Tensor,
    p: builtins.float | builtins.str | None = "fro",
    dim: builtins.int | Sequence[builtins.int] | None = None,
    keepdim: builtins.bool = False,
    out: None = None,
    dtype: Any = None,
) -> Tensor:
    """The ``p``-norm of ``input`` (deprecated in PyTorch in favour of ``linalg``'s, kept
    for old scripts): ``"fro"`` (the default) is the 2-norm of the elements over ``dim``
    (all dims if ``None``); a number is the vector ``p``-norm over ``dim`` (several dims
    taken as one vector); ``"nuc"`` is the nuclear norm (the sum of the singular values)
    of the matrices over two dims (the last two if ``dim`` is ``None``)."""
    from . import linalg

    _need_tensor("norm", "input", input)
    if out is not None:
        raise TypeError("norm(): out= is not supported; use the returned tensor")
    if not _is_float(input):
        raise RuntimeError(f"norm(): expected a floating-point input, got {_name(input.dtype)}")
    dims = None if dim is None else ([dim] if isinstance(dim, builtins.int) else list(dim))
    if isinstance(p, builtins.str):
        if p == "fro" and (dims is None or len(dims) <= 2):
            return linalg.vector_norm(input, 2, dims, keepdim, dtype=dtype)
        if p not in ("fro", "nuc"):
            raise RuntimeError(f"norm(): order {p!r} is not supported (use 'fro', 'nuc' or a number)")
        if dims is None:
            dims = list(range(input.dim()))
        if len(dims) != 2:
            raise RuntimeError(f"norm(): p={p!r} needs exactly 2 dims, got {dims}")
        return linalg.matrix_norm(input, p, (dims[0], dims[1]), keepdim, dtype=dtype)
    return linalg.vector_norm(input, 2.0 if p is None else p, dims, keepdim, dtype=dtype)


def _quantile(
    fn: str,
    input: Tensor,
    q: Tensor | builtins.float,
    dim: builtins.int | None,
    keepdim: builtins.bool,
    interpolation: builtins.str,
    ignore_nan: builtins.bool,
) -> Tensor:
    _need_tensor(fn, "input", input)
    if input.dtype not in (_core.float32, _core.float64):
        raise RuntimeError(
            f"{fn}(): input tensor must be either float or double dtype, got {_name(input.dtype)}"
        )
    if input.numel() == 0:
        raise RuntimeError(f"{fn}(): input tensor must be non-empty")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise RuntimeError(
            f"{fn}(): interpolation must be one of linear, lower, higher, midpoint or nearest, "
            f"got {interpolation!r}"
        )
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError(f"{fn}(): q must be a scalar or 1-D tensor, got shape {tuple(q.shape)}")
        if q.dtype != input.dtype:
            raise RuntimeError(
                f"{fn}(): q ({_name(q.dtype)}) must have the same dtype as the input ({_name(input.dtype)})"
            )
        scalar_q = q.dim() == 0
        qt = q.detach().reshape(-1).to(input.device)
        if not _capture.is_capturing() and qt.numel():
            qmin, qmax = builtins.float(qt.min().item()), builtins.float(qt.max().item())
            if not (qmin >= 0 and qmax <= 1):
                raise RuntimeError(f"{fn}(): q values must be in the range [0, 1], got {qt.tolist()}")
    else:
        qs = [builtins.float(v) for v in q] if isinstance(q, list | tuple) else [builtins.float(q)]
        for v in qs:
            if not 0 <= v <= 1:
                raise RuntimeError(f"{fn}(): q must be in the range [0, 1] but got {v}")
        scalar_q = not isinstance(q, list | tuple)
        qt = _core.tensor(qs, dtype=input.dtype, device=input.device)
    if dim is None:
        x = input.reshape(-1)
        d = 0
    else:
        d = _dim(fn, dim, input.dim())
        x = input.reshape(1) if input.dim() == 0 else input
        x = movedim(x, d, -1)
    n = x.shape[-1]
    s = x.sort(-1).values  # NaN last
    nan = s.isnan()
    if ignore_nan:
        count = (~nan).sum(-1, keepdim=True).to(input.dtype)  # (..., 1)
    else:
        count = _core.full_like(s[..., :1], builtins.float(n))
    rank = qt * (count - 1)  # (..., Q)
    lower_r = rank.floor()
    upper_r = rank.ceil()
    if interpolation == "lower":
        rank, upper_r = lower_r, lower_r
    elif interpolation == "higher":
        rank, lower_r = upper_r, upper_r
    elif interpolation == "nearest":
        rank = rank.round()
        lower_r, upper_r = rank, rank
    lo_i = lower_r.clamp(0, n - 1).to(_core.int64)
    hi_i = upper_r.clamp(0, n - 1).to(_core.int64)
    lo = s.gather(-1, lo_i)
    hi = s.gather(-1, hi_i)
    if interpolation == "midpoint":
        val = (lo + hi) * 0.5
    elif interpolation == "linear":
        w = rank - lower_r
        val = lo + w * (hi - lo)
    else:
        val = lo
    if ignore_nan:
        bad = (count == 0).expand(tuple(val.shape))
    else:
        bad = nan.any(-1, keepdim=True).expand(tuple(val.shape))
    val = _core.where(bad, math.nan, val)
    val = movedim(val, -1, 0)  # (Q, ...)
    if keepdim:
        if dim is None:
            val = val.reshape((val.shape[0],) + (1,) * input.dim())
        elif input.dim() > 0:
            val = val.unsqueeze(d + 1)
    return val[0] if scalar_q else val


def quantile(
    input: Tensor,
    q: Tensor | builtins.float,
    dim: builtins.int | None = None,
    keepdim: builtins.bool = False,
    *,
    interpolation: builtins.str = "linear",
) -> Tensor:
    """The ``q``-th quantiles of ``input`` over ``dim`` (of all elements if ``None``).

    ``q`` is a number or a 1-D tensor (of ``input``'s dtype) in [0, 1]; a tensor ``q``
    puts its length first in the result's shape. ``interpolation`` decides between the
    two nearest order statistics: ``linear``, ``lower``, ``higher``, ``midpoint`` or
    ``nearest`` (ties to even). A NaN in a reduced row makes its quantiles NaN. The
    gradient flows to the order statistics used."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(
    input: Tensor,
    q: Tensor | builtins.float,
    dim: builtins.int | None = None,
    keepdim: builtins.bool = False,
    *,
    interpolation: builtins.str = "linear",
) -> Tensor:
    """:func:`quantile` ignoring NaN: each row's quantiles are those of its non-NaN values
    (NaN where a row has none)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


class _ModeResult(NamedTuple):
    values: Tensor
    indices: Tensor


def mode(input: Tensor, dim: builtins.int = -1, keepdim: builtins.bool = False) -> tuple[Tensor, Tensor]:
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest among
    equally frequent ones) and the index of its last occurrence. Counting compares every
    pair along ``dim``, so it takes memory quadratic in that dim's size."""
    _need_tensor("mode", "input", input)
    if input.dim() == 0:
        _dim("mode", dim, 0)
        return _ModeResult(input.clone(), _core.zeros((), dtype=_core.int64, device=input.device))
    d = _dim("mode", dim, input.dim())
    n = input.shape[d]
    if n == 0:
        raise IndexError(
            f"mode(): expected reduction dim {dim} to have non-zero size, got shape {tuple(input.shape)}"
        )
    x = movedim(input, d, -1)
    key = x.detach()
    if key.dtype == _core.bool:
        key = key.to(_core.int64)
    counts = (key.unsqueeze(-1) == key.unsqueeze(-2)).sum(-1)  # (..., n)
    best = counts == counts.amax(-1, keepdim=True)
    # the smallest of the most frequent values (the row's largest value fills the others)
    val = _core.where(best, key, key.amax(-1, keepdim=True)).amin(-1, keepdim=True)
    pos = _core.arange(n, device=input.device)
    idx = _core.where(key == val, pos, -1).amax(-1, keepdim=True)
    # the value picked by a one-hot mask (a gather would bounds-check its index on the host)
    hit = pos == idx
    if x.dtype == _core.bool:
        values = x.logical_and(hit).any(-1, keepdim=True)
    else:
        values = _core.where(hit, x, _core.zeros((), dtype=x.dtype, device=x.device)).sum(-1, keepdim=True)
        values = values.to(x.dtype)
    if keepdim:
        return _ModeResult(movedim(values, -1, d), movedim(idx, -1, d))
    return _ModeResult(values.squeeze(-1), idx.squeeze(-1))


def _unique(
    fn: str,
    input: Tensor,
    return_inverse: builtins.bool,
    return_counts: builtins.bool,
    dim: builtins.int | None,
    sort: builtins.bool,
) -> Any:
    _need_tensor(fn, "input", input)
    _refuse_in_capture(fn, "its output length depends on the input's values")
    x = input.detach()
    if dim is None:
        d = 0
        rows = x.reshape(-1, 1)
    else:
        if x.dim() == 0:
            raise IndexError(f"{fn}(): dim {dim} given for a 0-d tensor, which has no dims")
        d = _dim(fn, dim, x.dim())
        x = movedim(x, d, 0)
        rows = x.reshape(x.shape[0], -1) if x.numel() else x.reshape(x.shape[0], math.prod(x.shape[1:]))
        if rows.shape[0] and not rows.shape[1]:
            raise RuntimeError(
                f"{fn}(): input of shape {tuple(input.shape)} has 0-sized dims besides dim {dim}, "
                "so its slices cannot be compared"
            )
    n, m = rows.shape
    dev = x.device
    key = rows.to(_core.int64) if rows.dtype == _core.bool else rows
    perm = _core.arange(n, device=dev)
    if sort:  # lexicographic order: stable sorts by each column, the last first
        for c in reversed(range(m)):
            order = key[:, c].index_select(0, perm).sort(0, stable=True).indices
            perm = perm.index_select(0, order)
    sk = key.index_select(0, perm)
    if n:
        step = (sk[1:] != sk[:-1]).any(1)
        first = _core.cat([_core.ones(1, dtype=_core.bool, device=dev), step], 0)
    else:
        first = _core.zeros(0, dtype=_core.bool, device=dev)
    picked = first.nonzero().reshape(-1)
    u = picked.numel()
    values = sk.index_select(0, picked).to(x.dtype)
    if dim is None:
        values = values.reshape(-1)
    else:
        values = movedim(values.reshape((u, *x.shape[1:])), 0, d)
    outs: list[Tensor] = [values]
    group = first.to(_core.int64).cumsum(0) - 1
    if return_inverse:
        inv = _core.zeros(n, dtype=_core.int64, device=dev).scatter(0, perm, group)
        outs.append(inv.reshape(tuple(input.shape)) if dim is None else inv)
    if return_counts:
        ones = _core.ones(n, dtype=_core.int64, device=dev)
        outs.append(_core.zeros(u, dtype=_core.int64, device=dev).scatter_add(0, group, ones))
    return outs[0] if len(outs) == 1 else tuple(outs)


def unique(
    input: Tensor,
    sorted: builtins.bool = True,  # noqa: A002 - PyTorch's name
    return_inverse: builtins.bool = False,
    return_counts: builtins.bool = False,
    dim: builtins.int | None = None,
) -> Any:
    """The distinct elements of ``input`` (with ``dim``: its distinct slices along ``dim``),
    in ascending (lexicographic) order, also with ``sorted=False``, whose order PyTorch
    leaves unspecified; optionally with the ``inverse`` (the position in the output of each
    input element, in ``input``'s shape; of each slice with ``dim``) and the ``counts``.

    Eager only: the output's length depends on the values (a graph capture raises
    ``TraceError``). The outputs carry no gradient. Each NaN counts as distinct."""
    return _unique("unique", input, return_inverse, return_counts, dim, True)


def unique_consecutive(
    input: Tensor,
    return_inverse: builtins.bool = False,
    return_counts: builtins.bool = False,
    dim: builtins.int | None = None,
) -> Any:
    """:func:`unique` of each run of equal consecutive elements (or slices along ``dim``),
    without sorting: ``[1, 1, 2, 1]`` gives ``[1, 2, 1]``. Eager only, as :func:`unique`."""
    return _unique("unique_consecutive", input, return_inverse, return_counts, dim, False)


# ---------------------------------------------------------------------------
# Random draws
# ---------------------------------------------------------------------------


def dropout(input: Tensor, p: builtins.float, train: builtins.bool) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by ``1/(1-p)`` when ``train``
    (``torch.dropout``; the same as ``nn.functional.dropout(input, p, train)``)."""
    from .nn import functional

    return functional.dropout(input, p, train)


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """A Poisson draw for each rate in ``input`` (counts in ``input``'s float dtype, on its
    device). Draws use ferrograd's default generator; another ``generator`` is not
    supported. The result carries no gradient."""
    from .distributions._gamma_sampling import sample_poisson

    _need_tensor("poisson", "input", input)
    if not _is_float(input):
        raise RuntimeError(f"poisson(): expected a floating-point rate tensor, got {_name(input.dtype)}")
    if generator is not None and generator is not _core.default_generator:
        raise NotImplementedError("poisson(): a generator other than the default one is not supported")
    from ._grad_mode import no_grad

    with no_grad():
        out = sample_poisson(input.detach()).to(input.dtype)
    return out.to(input.device) if out.device != input.device else out


# ---------------------------------------------------------------------------
# Predicates and sizes
# ---------------------------------------------------------------------------


def is_tensor(obj: Any) -> builtins.bool:
    """Whether ``obj`` is a ferrograd tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> builtins.bool:
    """Whether ``input``'s dtype is a floating-point one."""
    return builtins.bool(_need_tensor("is_floating_point", "input", input).dtype.is_floating_point)


def numel(input: Tensor) -> builtins.int:
    """The number of elements of ``input``."""
    return builtins.int(_need_tensor("numel", "input", input).numel())


# ---------------------------------------------------------------------------
# Tensor methods
# ---------------------------------------------------------------------------


def _cuda_method(
    self: Tensor, device: Any = None, non_blocking: builtins.bool = False, **kwargs: Any
) -> Tensor:
    """This tensor on ferrograd's GPU device (WebGPU, ``"gpu"``), which stands in for CUDA:
    ``t.cuda()`` is ``t.to("gpu")``. Raises ``RuntimeError`` when no GPU adapter is found."""
    from . import gpu

    if device not in (None, 0, "cuda", "cuda:0", "gpu", "gpu:0") and not isinstance(device, _core.device):
        raise RuntimeError(f"Tensor.cuda(): ferrograd has one GPU device; got device={device!r}")
    if not gpu.is_available():
        raise RuntimeError(
            "Tensor.cuda(): no GPU adapter is available to ferrograd (its GPU device is WebGPU, 'gpu'): "
            f"{gpu.unavailable_reason()}"
        )
    return self.to("gpu")


def _pin_memory_method(self: Tensor, device: Any = None) -> Tensor:
    """This tensor, unchanged: ferrograd has no page-locked host memory to copy into (it serves
    CUDA's asynchronous copies in PyTorch; here copies to the GPU are queued anyway).
    Raises ``RuntimeError`` for a tensor that is not on the CPU, as PyTorch does."""
    if not self.is_cpu:
        raise RuntimeError(
            f"Tensor.pin_memory(): only CPU tensors can be pinned, got a tensor on {self.device}"
        )
    return self


def _is_pinned_method(self: Tensor, device: Any = None) -> builtins.bool:
    """False: ferrograd never allocates page-locked memory (see ``pin_memory``)."""
    return False


def _nelement_method(self: Tensor) -> builtins.int:
    """The number of elements (``numel``)."""
    return builtins.int(self.numel())


def _norm_method(
    self: Tensor,
    p: builtins.float | builtins.str | None = "fro",
    dim: builtins.int | Sequence[builtins.int] | None = None,
    keepdim: builtins.bool = False,
    dtype: Any = None,
) -> Tensor:
    return norm(self, p, dim, keepdim, dtype=dtype)


def _movedim_method(
    self: Tensor,
    source: builtins.int | Sequence[builtins.int],
    destination: builtins.int | Sequence[builtins.int],
) -> Tensor:
    return movedim(self, source, destination)


_norm_method.__doc__ = norm.__doc__
_movedim_method.__doc__ = movedim.__doc__

METHODS: dict[str, Callable[..., Any]] = {
    "movedim": _movedim_method,
    "moveaxis": _movedim_method,
    "unflatten": unflatten,
    "take": take,
    "argwhere": argwhere,
    "index_add": index_add,
    "index_reduce": index_reduce,
    "masked_scatter": masked_scatter,
    "fmod": fmod,
    "exp2": exp2,
    "log10": log10,
    "sinh": sinh,
    "cosh": cosh,
    "erfc": erfc,
    "fmax": fmax,
    "fmin": fmin,
    "copysign": copysign,
    "fliplr": fliplr,
    "flipud": flipud,
    "rot90": rot90,
    "norm": _norm_method,
    "quantile": quantile,
    "nanquantile": nanquantile,
    "mode": mode,
    "unique": unique,
    "unique_consecutive": unique_consecutive,
    "var_mean": var_mean,
    "std_mean": std_mean,
    "nelement": _nelement_method,
    "pin_memory": _pin_memory_method,
    "is_pinned": _is_pinned_method,
    "cuda": _cuda_method,
}
METHODS.update(
    {
        "index_add_": _inplace(index_add, "index_add_"),
        "index_reduce_": _index_reduce_inplace,
        "masked_scatter_": _inplace(masked_scatter, "masked_scatter_"),
        "fmod_": _inplace(fmod, "fmod_"),
        "exp2_": _inplace(exp2, "exp2_"),
        "log10_": _inplace(log10, "log10_"),
        "sinh_": _inplace(sinh, "sinh_"),
        "cosh_": _inplace(cosh, "cosh_"),
        "erfc_": _inplace(erfc, "erfc_"),
        "copysign_": _inplace(copysign, "copysign_"),
    }
)


def install() -> None:
    """Attach :data:`METHODS` to ``Tensor``, leaving any method the core defines in place."""
    made: dict[int, Callable[..., Any]] = {}
    for name, fn in METHODS.items():
        if name in Tensor.__dict__ and getattr(Tensor.__dict__[name], "__module__", None) not in (
            __name__,
            "ferrograd._tensor_extras",
        ):
            continue
        if name.endswith("_") or fn.__name__.endswith("_method"):
            method = fn
        else:
            method = made.setdefault(id(fn), _as_method(fn))
        setattr(Tensor, name, method)
