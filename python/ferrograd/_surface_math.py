"""PyTorch math functions and Tensor methods composed in Python of registry ops.

- optimizer arithmetic: ``addcmul``, ``addcdiv`` and their in-place forms;
- in-place forms PyTorch scripts call: comparisons (``lt_``, ...), ``tril_``/``triu_``,
  ``cumsum_``/``cumprod_``, ``logical_*_``, ``remainder_``, ``index_fill_``/``index_copy_``,
  ``fill_diagonal_`` and the view-changing ``squeeze_``/``unsqueeze_``/``t_``/``transpose_``;
- PyTorch's method aliases (``divide``, ``greater``, ``absolute``, ``fix``, ...) and the
  splitting functions ``tensor_split``/``hsplit``/``vsplit``/``dsplit``;
- random in-place initialisers drawn from ferrograd's generator (``random_``,
  ``exponential_``, ``geometric_``, ``log_normal_``, ``cauchy_``);
- small math and linear algebra: ``addr``, ``inner``, ``dist``, ``vdot``, ``diagflat``,
  ``float_power``, ``gcd``/``lcm``, ``ldexp``/``frexp``, ``cov``/``corrcoef``, ``renorm``,
  ``trapezoid``, ``unravel_index``, ``chain_matmul`` and the ``linalg`` methods of Tensor.

Value-computing functions are built of registry ops, so they are differentiable and run
on every device. An in-place form computes its result (from a recorded copy of ``self``
when autograd needs the old value) and writes it with ``copy_``, which checks leaves,
casts to ``self``'s dtype and bumps the version.
"""

from __future__ import annotations

import builtins
import inspect
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _capture, _core, linalg

Tensor = _core.Tensor
dtype = _core.dtype

__all__ = [
    "addcdiv",
    "addcmul",
    "addr",
    "chain_matmul",
    "corrcoef",
    "cov",
    "cumulative_trapezoid",
    "diagflat",
    "dist",
    "dsplit",
    "float_power",
    "frexp",
    "gcd",
    "ger",
    "histogram",
    "hsplit",
    "index_copy",
    "index_fill",
    "inner",
    "isneginf",
    "isposinf",
    "isreal",
    "lcm",
    "ldexp",
    "matrix_exp",
    "pinverse",
    "renorm",
    "tensor_split",
    "trapezoid",
    "trapz",
    "unravel_index",
    "vdot",
    "vsplit",
]

_Number = builtins.bool | builtins.int | builtins.float


def _sign_as(method: Callable[..., Any], fn: Callable[..., Any]) -> None:
    """Give ``method`` ``fn``'s signature with its first parameter called ``self``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    if params:
        params[0] = params[0].replace(name="self")
    method.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]


def _need_tensor(fn: str, arg: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be a Tensor, not {type(x).__name__}")
    return x


def _need_number(fn: str, arg: str, x: Any) -> _Number:
    if not isinstance(x, builtins.bool | builtins.int | builtins.float):
        raise TypeError(f"{fn}(): argument '{arg}' must be a number, not {type(x).__name__}")
    return x


def _dim(fn: str, dim: Any, ndim: builtins.int) -> builtins.int:
    if isinstance(dim, builtins.bool) or not isinstance(dim, builtins.int):
        raise TypeError(f"{fn}(): dim must be an int, not {type(dim).__name__}")
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{fn}(): dim {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % n


def _mm(a: Tensor, b: Tensor) -> Tensor:
    return a.matmul(b)


def _outer(a: Tensor, b: Tensor) -> Tensor:
    return a.outer(b)


def _no_grad() -> Any:
    from ._grad_mode import no_grad

    return no_grad()


def _needs_grad(*xs: Any) -> builtins.bool:
    return _core.is_grad_enabled() and any(isinstance(x, Tensor) and x.requires_grad for x in xs)


# ---------------------------------------------------------------------------
# addcmul / addcdiv
# ---------------------------------------------------------------------------


def _scaled(fn: str, prod: Tensor, value: Any) -> Tensor:
    _need_number(fn, "value", value)
    if isinstance(value, builtins.bool):
        value = builtins.int(value)
    if not (prod.dtype.is_floating_point or prod.dtype.is_bool):
        value = builtins.int(value)  # an integer result takes the value as an integer, as PyTorch
    return prod if value == 1 else prod * value


def _old_value_first(
    fn: str, tensor1: Any, tensor2: Any, args: tuple[Any, ...], value: Any
) -> tuple[Tensor, Tensor, Any]:
    """PyTorch's deprecated ``fn(value, tensor1, tensor2)`` order (old optimizers'
    ``exp_avg_sq.addcmul_(1 - beta2, grad, grad)``), accepted with a warning, as PyTorch does."""
    if not args:
        return tensor1, tensor2, value
    if len(args) > 1 or isinstance(tensor1, Tensor):
        raise TypeError(
            f"{fn}(): takes (tensor1, tensor2, *, value=1); got {2 + len(args)} positional arguments"
        )
    warnings.warn(
        f"{fn}(value, tensor1, tensor2) is deprecated; use {fn}(tensor1, tensor2, value=value)",
        UserWarning,
        stacklevel=3,
    )
    return tensor2, args[0], tensor1


def addcmul(
    input: Tensor, tensor1: Tensor | _Number, tensor2: Tensor, *args: Tensor, value: _Number = 1
) -> Tensor:
    """``input + value * tensor1 * tensor2`` elementwise, with broadcasting and type
    promotion over all three tensors (PyTorch's ``torch.addcmul``)."""
    tensor1, tensor2, value = _old_value_first("addcmul", tensor1, tensor2, args, value)
    for a, x in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _need_tensor("addcmul", a, x)
    try:
        return input + _scaled("addcmul", tensor1 * tensor2, value)
    except (RuntimeError, ValueError) as e:
        raise type(e)(
            f"addcmul(): input {tuple(input.shape)} {input.dtype}, tensor1 {tuple(tensor1.shape)} "
            f"{tensor1.dtype}, tensor2 {tuple(tensor2.shape)} {tensor2.dtype}: {e}"
        ) from None


def addcdiv(
    input: Tensor, tensor1: Tensor | _Number, tensor2: Tensor, *args: Tensor, value: _Number = 1
) -> Tensor:
    """``input + value * tensor1 / tensor2`` elementwise, with broadcasting and type
    promotion (PyTorch's ``torch.addcdiv``). Integer ``tensor1`` and ``tensor2`` raise, as
    in PyTorch (integer division here is ambiguous)."""
    tensor1, tensor2, value = _old_value_first("addcdiv", tensor1, tensor2, args, value)
    for a, x in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _need_tensor("addcdiv", a, x)
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise RuntimeError(
            f"addcdiv(): integer division of tensor1 ({tensor1.dtype}) by tensor2 ({tensor2.dtype}) is not "
            "supported; use (input + value * tensor1 / tensor2) for a true division"
        )
    try:
        return input + _scaled("addcdiv", tensor1 / tensor2, value)
    except (RuntimeError, ValueError) as e:
        raise type(e)(
            f"addcdiv(): input {tuple(input.shape)} {input.dtype}, tensor1 {tuple(tensor1.shape)} "
            f"{tensor1.dtype}, tensor2 {tuple(tensor2.shape)} {tensor2.dtype}: {e}"
        ) from None


# ---------------------------------------------------------------------------
# index_fill / index_copy / fill_diagonal_
# ---------------------------------------------------------------------------


def _index_vector(fn: str, index: Any, size: builtins.int, negative: builtins.bool = True) -> Tensor:
    _need_tensor(fn, "index", index)
    if index.dtype.is_floating_point or index.dtype.is_bool or index.dim() > 1:
        raise IndexError(
            f"{fn}(): index must be a 0-d or 1-d integer tensor, got {tuple(index.shape)} {index.dtype}"
        )
    idx = index.reshape(-1).to(_core.int64)
    if idx.numel() and not _capture.is_capturing():
        lo, hi = builtins.int(idx.min().item()), builtins.int(idx.max().item())
        if lo < (-size if negative else 0) or hi >= size:
            raise IndexError(
                f"{fn}(): index {lo if lo < -size else hi} is out of bounds for a dimension of size {size}"
            )
    return idx


def index_fill(input: Tensor, dim: builtins.int, index: Tensor, value: _Number | Tensor) -> Tensor:
    """``input`` with the slices at positions ``index`` along ``dim`` set to ``value`` (a
    number or a 0-d tensor); negative indices count from the end."""
    _need_tensor("index_fill", "input", input)
    d = _dim("index_fill", dim, input.dim())
    n = input.shape[d] if input.dim() else 1
    idx = _index_vector("index_fill", index, n)
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(
            f"index_fill(): value must be a number or a 0-d tensor, got shape {tuple(value.shape)}"
        )
    if not isinstance(value, Tensor):
        _need_number("index_fill", "value", value)
    idx = idx.to(input.device)
    idx = _core.where(idx < 0, idx + n, idx)
    pos = _core.arange(n, device=input.device)
    hit = (pos.unsqueeze(1) == idx.unsqueeze(0)).any(1)
    view = [1] * input.dim()
    if view:
        view[d] = n
    return input.masked_fill(hit.reshape(view), value)


def index_copy(input: Tensor, dim: builtins.int, index: Tensor, source: Tensor) -> Tensor:
    """``input`` with its slice ``index[i]`` along ``dim`` replaced by slice ``i`` of
    ``source`` (``source`` has ``input``'s shape except ``len(index)`` along ``dim``)."""
    _need_tensor("index_copy", "input", input)
    _need_tensor("index_copy", "source", source)
    d = _dim("index_copy", dim, input.dim())
    n = input.shape[d] if input.dim() else 1
    idx = _index_vector("index_copy", index, n, negative=False)
    want = list(input.shape) or [1]
    want[d] = idx.numel()
    src = source.reshape(1) if source.dim() == 0 and input.dim() == 0 else source
    if list(src.shape) != want:
        raise RuntimeError(
            f"index_copy(): source shape must match input shape {tuple(input.shape)} except along dim {dim} "
            f"(size {idx.numel()}, the index length), got {tuple(source.shape)}"
        )
    if src.dtype != input.dtype:
        raise RuntimeError(
            f"index_copy(): source dtype {source.dtype} does not match input dtype {input.dtype}"
        )
    x = input.reshape(1) if input.dim() == 0 else input
    idx = idx.to(input.device)
    view = [1] * x.dim()
    view[d] = -1
    out = x.scatter(d, idx.reshape(view).expand(want), src)
    return out.reshape(tuple(input.shape))


def _fill_diagonal_(self: Tensor, fill_value: _Number, wrap: builtins.bool = False) -> Tensor:
    """Fill the main diagonal of ``self`` (2-d, or n-d with all sizes equal) with
    ``fill_value``, in place; a tall matrix with ``wrap=True`` restarts the diagonal every
    ``ncols + 1`` rows, as NumPy's ``fill_diagonal``."""
    _need_tensor("fill_diagonal_", "self", self)
    _need_number("fill_diagonal_", "fill_value", fill_value)
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise RuntimeError(f"fill_diagonal_(): the tensor must have at least 2 dimensions, got shape {shape}")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise RuntimeError(
            f"fill_diagonal_(): all dimensions of the input must be of equal length, got shape {shape}"
        )
    flat = np.zeros(math.prod(shape), dtype=bool)
    if len(shape) == 2:
        rows, cols = shape
        step = cols + 1
        end = rows * cols if wrap else builtins.min(rows, cols) * cols
        flat[0:end:step] = True
    else:
        n = shape[0]
        step = builtins.sum(n**k for k in range(len(shape)))
        flat[0 : n * step : step] = True
    mask = _core.tensor(flat.reshape(shape), device=self.device)
    return self.masked_fill_(mask, fill_value)


_fill_diagonal_.__name__ = _fill_diagonal_.__qualname__ = "fill_diagonal_"


# ---------------------------------------------------------------------------
# In-place forms
# ---------------------------------------------------------------------------


def _inplace(fn: Callable[..., Tensor], name: str, cast: builtins.bool = False) -> Callable[..., Tensor]:
    """``self.fn_(...)``: ``fn(self, ...)`` written into ``self`` with ``copy_`` (from a
    recorded clone when autograd needs ``self``'s old value). ``cast``: the result is
    converted to ``self``'s dtype (comparisons, logical ops), else a result ``self``
    cannot hold raises as the core's in-place arithmetic does."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        _need_tensor(name, "self", self)
        if _needs_grad(self, *args, *kwargs.values()):
            # autograd reads self's old value: compute from a recorded copy of it
            base = self.clone()
            args = tuple(base if a is self else a for a in args)
            kwargs = {k: base if v is self else v for k, v in kwargs.items()}
        else:
            base = self
        out = fn(base, *args, **kwargs)
        if out.dtype != self.dtype and not cast:
            probe = _core.empty((0,), dtype=self.dtype) + _core.empty((0,), dtype=out.dtype)
            if probe.dtype != self.dtype:
                raise TypeError(
                    f"{name}(): result type {out.dtype} can't be cast to the desired output type {self.dtype}"
                )
        if tuple(out.shape) != tuple(self.shape):
            raise RuntimeError(
                f"{name}(): the result's shape {tuple(out.shape)} does not match self's shape {tuple(self.shape)} "
                "(an in-place op cannot broadcast self)"
            )
        return self.copy_(out)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (
        f"In-place :meth:`Tensor.{name[:-1]}` (writes the result into ``self``, returns ``self``)."
    )
    _sign_as(method, fn)
    return method


def _view_inplace(name: str, view: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``self.name(...)``: rebind ``self`` to a view of its own storage (``view(self,
    ...)``), keeping its identity, as PyTorch's in-place shape ops. A tensor with autograd
    history, or a leaf that requires grad outside ``no_grad``, raises (its history cannot
    be rebound in Python): use the out-of-place op. The version counter is not bumped
    (only the view's metadata changes; no value is written)."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        _need_tensor(name, "self", self)
        if self.grad_fn is not None or (self.requires_grad and _core.is_grad_enabled()):
            raise RuntimeError(
                f"{name}(): changing the shape of a tensor that requires grad in place is not supported "
                f"(shape {tuple(self.shape)}, {self.dtype}); use the out-of-place {name[:-1]}()"
            )
        self.data = view(self.data, *args, **kwargs)
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (
        f"In-place :meth:`Tensor.{name[:-1]}`: ``self`` becomes that view of its storage and is returned. "
        "Not for tensors that require grad (use the out-of-place form)."
    )
    _sign_as(method, view)
    return method


def _cum_dtype(name: str, self: Tensor, d: dtype | None) -> None:
    if d is not None and d != self.dtype:
        raise RuntimeError(
            f"{name}_(): dtype {d} does not match self's dtype {self.dtype} (an in-place op keeps it)"
        )


def _cumsum(self: Tensor, dim: builtins.int, *, dtype: dtype | None = None) -> Tensor:
    _cum_dtype("cumsum", self, dtype)
    return self.cumsum(dim)


def _cumprod(self: Tensor, dim: builtins.int, *, dtype: dtype | None = None) -> Tensor:
    _cum_dtype("cumprod", self, dtype)
    return self.cumprod(dim)


# ---------------------------------------------------------------------------
# Method aliases
# ---------------------------------------------------------------------------


def _positive_method(self: Tensor) -> Tensor:
    """``self`` itself (PyTorch's ``positive``); bool tensors raise."""
    if self.dtype.is_bool:
        raise RuntimeError("positive(): the positive operator does not support bool tensors")
    return self


def _ndimension_method(self: Tensor) -> builtins.int:
    """The number of dimensions (alias of :meth:`Tensor.dim`)."""
    return self.dim()


def _is_signed_method(self: Tensor) -> builtins.bool:
    """Whether ``self``'s dtype is signed (floats and signed integers)."""
    return builtins.bool(self.dtype.is_signed)


def _is_nonzero_method(self: Tensor) -> builtins.bool:
    """The truth of a one-element tensor; other sizes raise ``RuntimeError``."""
    if self.numel() == 0:
        raise RuntimeError("is_nonzero(): boolean value of a tensor with no values is ambiguous")
    if self.numel() > 1:
        raise RuntimeError(f"is_nonzero(): boolean value of a tensor with {self.numel()} values is ambiguous")
    return builtins.bool(self.reshape(()).item() != 0)


def _is_same_size_method(self: Tensor, other: Tensor) -> builtins.bool:
    """Whether ``self`` and ``other`` have the same shape."""
    _need_tensor("is_same_size", "other", other)
    return tuple(self.shape) == tuple(other.shape)


def _sum_to_size_method(self: Tensor, *size: Any) -> Tensor:
    """``self`` summed down to ``size`` (a shape ``self`` broadcasts from): dimensions of
    size 1 in ``size`` are summed with ``keepdim``, leading extra ones are summed away."""
    if len(size) == 1 and isinstance(size[0], list | tuple):
        size = tuple(size[0])
    shape = tuple(self.shape)
    target = tuple(builtins.int(s) for s in size)
    bad = len(target) > len(shape) or any(
        t != s and t != 1 for t, s in zip(target, shape[len(shape) - len(target) :], strict=True)
    )
    if bad:
        raise RuntimeError(f"sum_to_size(): size {target} is not expandable to the tensor's size {shape}")
    lead = len(shape) - len(target)
    out = self.sum(dim=tuple(range(lead))) if lead else self
    dims = tuple(i for i, (t, s) in enumerate(zip(target, shape[lead:], strict=True)) if t == 1 and s != 1)
    return out.sum(dim=dims, keepdim=True) if dims else out


def _swapdims(self: Tensor, dim0: builtins.int, dim1: builtins.int) -> Tensor:
    return self.transpose(dim0, dim1)


def _subtract(self: Tensor, other: Any, *, alpha: _Number = 1) -> Tensor:
    return self.sub(other, alpha=alpha)


def _divide(self: Tensor, other: Any, *, rounding_mode: Any = None) -> Tensor:
    return self.div(other, rounding_mode=rounding_mode)


def _true_divide(self: Tensor, other: Any) -> Tensor:
    return self.div(other)


def _sgn(self: Tensor) -> Tensor:
    return self.sign()


# ---------------------------------------------------------------------------
# Splitting
# ---------------------------------------------------------------------------


def tensor_split(
    input: Tensor, indices_or_sections: builtins.int | Sequence[builtins.int] | Tensor, dim: builtins.int = 0
) -> tuple[Tensor, ...]:
    """Views of ``input`` split along ``dim``: an int ``n`` gives ``n`` parts, the first
    ``size % n`` of them one longer; a list of indices splits before each index (as
    NumPy's ``array_split``)."""
    _need_tensor("tensor_split", "input", input)
    if input.dim() == 0:
        raise RuntimeError("tensor_split(): expected at least a 1-dimensional tensor")
    d = _dim("tensor_split", dim, input.dim())
    size = input.shape[d]
    ios: Any = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype.is_floating_point or ios.dtype.is_bool or ios.dim() > 1:
            raise RuntimeError(
                f"tensor_split(): indices_or_sections must be an integer tensor of 0 or 1 dimensions, got {ios.dtype}"
            )
        ios = builtins.int(ios.item()) if ios.dim() == 0 else [builtins.int(v) for v in ios.tolist()]
    if isinstance(ios, builtins.int) and not isinstance(ios, builtins.bool):
        if ios <= 0:
            raise RuntimeError(f"tensor_split(): number of sections must be larger than 0, got {ios}")
        q, r = divmod(size, ios)
        bounds = [0]
        for i in range(ios):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
    elif isinstance(ios, list | tuple):
        bounds = [0, *(builtins.int(i) for i in ios), size]
    else:
        raise TypeError(
            f"tensor_split(): indices_or_sections must be an int, a sequence of ints or a tensor, not "
            f"{type(ios).__name__}"
        )
    out = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        a2 = builtins.min(builtins.max(a + size if a < 0 else a, 0), size)
        b2 = builtins.min(builtins.max(b + size if b < 0 else b, 0), size)
        out.append(input.narrow(d, a2, builtins.max(b2 - a2, 0)))
    return tuple(out)


def _nsplit(name: str, dim: builtins.int, need: builtins.int) -> Callable[..., tuple[Tensor, ...]]:
    def split(
        input: Tensor, indices_or_sections: builtins.int | Sequence[builtins.int]
    ) -> tuple[Tensor, ...]:
        _need_tensor(name, "input", input)
        if input.dim() < need:
            raise RuntimeError(
                f"{name}(): requires a tensor with at least {need} dimension(s), got shape {tuple(input.shape)}"
            )
        d = 0 if (name == "hsplit" and input.dim() == 1) else dim
        if isinstance(indices_or_sections, builtins.int) and not isinstance(
            indices_or_sections, builtins.bool
        ):
            if indices_or_sections <= 0 or input.shape[d] % indices_or_sections:
                raise RuntimeError(
                    f"{name}(): dimension {d} of size {input.shape[d]} is not divisible by the split size "
                    f"{indices_or_sections}"
                )
        return tensor_split(input, indices_or_sections, d)

    split.__name__ = split.__qualname__ = name
    split.__doc__ = (
        f"``input`` split along dim {dim} (as NumPy's ``{name}``): an int must divide that size evenly; "
        "a list of indices splits before each."
    )
    return split


hsplit = _nsplit("hsplit", 1, 1)
vsplit = _nsplit("vsplit", 0, 2)
dsplit = _nsplit("dsplit", 2, 3)


# ---------------------------------------------------------------------------
# Random in-place initialisers
# ---------------------------------------------------------------------------


def _uniform64(self: Tensor, generator: Any) -> Tensor:
    return _core.rand(tuple(self.shape), generator=generator, dtype=_core.float64)


def _fill_random(self: Tensor, name: str, values: Tensor) -> Tensor:
    with _no_grad():
        self.copy_(values.to(self.dtype).to(self.device))
    return self


def _need_float(name: str, self: Tensor) -> None:
    _need_tensor(name, "self", self)
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expects a floating point tensor, got {self.dtype}")


_RANDOM_TOP = {"float16": 2**11, "bfloat16": 2**8, "float32": 2**24, "float64": 2**53}


def _random_(
    self: Tensor, from_: builtins.int = 0, to: builtins.int | None = None, *, generator: Any = None
) -> Tensor:
    """Fill ``self`` with integers drawn uniformly from ``[from, to)`` (``random_(to)``:
    ``[0, to)``; no bounds: ``[0, 2**mantissa]`` for floats, ``[0, max]`` for integers),
    from ``generator`` or the default one."""
    _need_tensor("random_", "self", self)
    name = self.dtype.name
    if to is not None:
        lo, hi = from_, to
    elif from_ != 0:
        lo, hi = 0, from_  # random_(to)
    elif self.dtype.is_bool:
        lo, hi = 0, 2
    elif self.dtype.is_floating_point:
        lo, hi = 0, _RANDOM_TOP[name] + 1
    else:
        top = builtins.int(np.iinfo(name).max)
        lo, hi = 0, top + 1 if top < 2**63 - 1 else top
    for a, v in (("from", lo), ("to", hi)):
        if isinstance(v, builtins.bool) or not isinstance(v, builtins.int):
            raise TypeError(f"random_(): '{a}' must be an int, not {type(v).__name__}")
    if lo >= hi:
        raise RuntimeError(f"random_(): expects 'from' < 'to', got from={lo} to={hi}")
    if self.dtype.is_bool and (lo < 0 or hi > 2):
        raise RuntimeError(f"random_(): [{lo}, {hi}) is out of the range of bool")
    if not self.dtype.is_floating_point and not self.dtype.is_bool:
        info = np.iinfo(name)
        if lo < info.min or hi - 1 > info.max:
            raise RuntimeError(f"random_(): [{lo}, {hi}) is out of the range of {self.dtype}")
    draw = _core.randint(lo, hi, tuple(self.shape), generator=generator, dtype=_core.int64)
    return _fill_random(self, "random_", draw)


_random_.__name__ = _random_.__qualname__ = "random_"


def _exponential_(self: Tensor, lambd: builtins.float = 1.0, *, generator: Any = None) -> Tensor:
    """Fill ``self`` with draws of the exponential distribution of rate ``lambd``."""
    _need_float("exponential_", self)
    _need_number("exponential_", "lambd", lambd)
    if not lambd > 0:
        raise RuntimeError(f"exponential_(): expects lambd > 0.0, but found lambd={lambd}")
    u = _uniform64(self, generator)
    return _fill_random(self, "exponential_", -(-u).log1p() / lambd)


def _geometric_(self: Tensor, p: builtins.float, *, generator: Any = None) -> Tensor:
    """Fill ``self`` with draws of the geometric distribution with success probability
    ``p``: the number of trials up to and including the first success (1, 2, ...)."""
    _need_tensor("geometric_", "self", self)
    _need_number("geometric_", "p", p)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_(): expects p to be in (0, 1), but got p={p}")
    u = _uniform64(self, generator)
    k = ((-u).log1p() / math.log1p(-p)).ceil().clamp(min=1.0)
    return _fill_random(self, "geometric_", k)


def _log_normal_(
    self: Tensor, mean: builtins.float = 1.0, std: builtins.float = 2.0, *, generator: Any = None
) -> Tensor:
    """Fill ``self`` with ``exp(N(mean, std**2))`` draws (the log-normal distribution)."""
    _need_float("log_normal_", self)
    _need_number("log_normal_", "mean", mean)
    _need_number("log_normal_", "std", std)
    if not std > 0:
        raise RuntimeError(f"log_normal_(): expects std > 0.0, but found std={std}")
    z = _core.randn(tuple(self.shape), generator=generator, dtype=_core.float64)
    return _fill_random(self, "log_normal_", (z * std + mean).exp())


def _cauchy_(
    self: Tensor, median: builtins.float = 0.0, sigma: builtins.float = 1.0, *, generator: Any = None
) -> Tensor:
    """Fill ``self`` with draws of the Cauchy distribution ``median + sigma * tan(pi * (U - 1/2))``."""
    _need_float("cauchy_", self)
    _need_number("cauchy_", "median", median)
    _need_number("cauchy_", "sigma", sigma)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_(): expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform64(self, generator)
    return _fill_random(self, "cauchy_", ((u - 0.5) * math.pi).tan() * sigma + median)


for _f, _n in ((_exponential_, "exponential_"), (_geometric_, "geometric_"), (_log_normal_, "log_normal_")):
    _f.__name__ = _f.__qualname__ = _n
_cauchy_.__name__ = _cauchy_.__qualname__ = "cauchy_"


# ---------------------------------------------------------------------------
# Math
# ---------------------------------------------------------------------------


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: _Number = 1, alpha: _Number = 1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)`` (``input`` broadcasts to the outer
    product's shape; ``beta=0`` ignores ``input``, NaNs included)."""
    for a, x in (("input", input), ("vec1", vec1), ("vec2", vec2)):
        _need_tensor("addr", a, x)
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(
            f"addr(): vec1 and vec2 must be 1-d, got shapes {tuple(vec1.shape)} and {tuple(vec2.shape)}"
        )
    integral = not any(t.dtype.is_floating_point for t in (input, vec1, vec2))
    if integral and any(isinstance(v, builtins.float) for v in (alpha, beta)):
        raise RuntimeError(
            "addr(): for integral input tensors, alpha and beta must not be floating point numbers"
        )
    prod = _outer(vec1, vec2)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod + _core.zeros((), dtype=input.dtype, device=input.device)
    return (input if beta == 1 else input * beta) + prod


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-d tensors (PyTorch's old name for :func:`outer`)."""
    _need_tensor("ger", "input", input)
    _need_tensor("ger", "vec2", vec2)
    if input.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(
            f"ger(): expects 1-d tensors, got shapes {tuple(input.shape)} and {tuple(vec2.shape)}"
        )
    return _outer(input, vec2)


def inner(input: Tensor, other: Tensor) -> Tensor:
    """The sum of products over the last dimension of both tensors (a scalar operand
    multiplies); the result has ``input.shape[:-1] + other.shape[:-1]``."""
    _need_tensor("inner", "input", input)
    _need_tensor("inner", "other", other)
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner(): the last dimensions must match, got shapes {tuple(input.shape)} and {tuple(other.shape)}"
        )
    a = input.reshape(-1, input.shape[-1])
    b = other.reshape(-1, other.shape[-1])
    return _mm(a, b.transpose(0, 1)).reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def dist(input: Tensor, other: Tensor, p: _Number = 2) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcast), flattened."""
    _need_tensor("dist", "input", input)
    _need_tensor("dist", "other", other)
    _need_number("dist", "p", p)
    if not (input.dtype.is_floating_point and other.dtype.is_floating_point):
        raise RuntimeError(f"dist(): expects floating point tensors, got {input.dtype} and {other.dtype}")
    return linalg.vector_norm(input - other, ord=p)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-d tensors of equal length (real tensors: :func:`dot`)."""
    _need_tensor("vdot", "input", input)
    _need_tensor("vdot", "other", other)
    if input.dim() != 1 or other.dim() != 1 or input.shape[0] != other.shape[0]:
        raise RuntimeError(
            f"vdot(): expects two 1-d tensors of the same length, got {tuple(input.shape)} and {tuple(other.shape)}"
        )
    if input.dtype != other.dtype:
        raise RuntimeError(
            f"vdot(): expects both tensors of the same dtype, got {input.dtype} and {other.dtype}"
        )
    return input.dot(other)


def diagflat(input: Tensor, offset: builtins.int = 0) -> Tensor:
    """A 2-d matrix with the flattened ``input`` on its ``offset``-th diagonal."""
    _need_tensor("diagflat", "input", input)
    return input.reshape(-1).diag(offset)


def float_power(input: Tensor | _Number, exponent: Tensor | _Number) -> Tensor:
    """``input ** exponent`` computed in float64 (every input is converted first)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): expects at least one of input and exponent to be a Tensor")
    base = input.to(_core.float64) if isinstance(input, Tensor) else input
    exp = exponent.to(_core.float64) if isinstance(exponent, Tensor) else exponent
    if isinstance(base, Tensor):
        return base.pow(exp)
    assert isinstance(exp, Tensor)
    return _core.full((), builtins.float(base), dtype=_core.float64, device=exp.device).pow(exp)


def _float_power_checked(self: Tensor, exponent: Tensor | _Number) -> Tensor:
    if self.dtype != _core.float64:
        raise RuntimeError(
            f"float_power_(): the base has dtype {self.dtype} but the operation's result requires dtype float64"
        )
    return float_power(self, exponent)


def _need_int(fn: str, *xs: tuple[str, Tensor]) -> None:
    for a, x in xs:
        _need_tensor(fn, a, x)
        if x.dtype.is_floating_point:
            raise RuntimeError(f"{fn}(): expects integer tensors, got {a} of dtype {x.dtype}")


_GCD_STEPS = {"uint8": 13, "int8": 13, "int16": 25, "int32": 48, "int64": 93}


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise greatest common divisor (non-negative) of integer tensors
    (Euclid's algorithm; ``gcd(0, 0) = 0``)."""
    _need_int("gcd", ("input", input), ("other", other))
    a = input.abs() + other.abs() * 0
    b = other.abs() + input.abs() * 0
    # Euclid's steps: until every pair is done; in a captured graph, the most any pair of
    # the dtype can need (Lame's bound: about 1.44 bits per step).
    fixed = _GCD_STEPS.get(a.dtype.name, 93) if _capture.is_capturing() else None
    step = 0
    while (step < fixed) if fixed is not None else builtins.bool((b != 0).any().item()):
        step += 1
        nz = b != 0
        safe = _core.where(nz, b, _core.ones_like(b))
        a, b = _core.where(nz, b, a), _core.where(nz, a.remainder(safe), b)
    return a


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise least common multiple (non-negative) of integer tensors (0 where
    either is 0)."""
    _need_int("lcm", ("input", input), ("other", other))
    g = gcd(input, other)
    safe = _core.where(g == 0, _core.ones_like(g), g)
    return (input.abs().div(safe, rounding_mode="floor") * other.abs()).abs()


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other`` (a float result; integer inputs give the default float)."""
    _need_tensor("ldexp", "input", input)
    _need_tensor("ldexp", "other", other)
    x = input if input.dtype.is_floating_point else input.to(_core.get_default_dtype())
    return x * (other.to(x.dtype) if not other.dtype.is_floating_point else other).exp2()


class frexp_result(NamedTuple):
    """``(mantissa, exponent)`` of :func:`frexp`."""

    mantissa: Tensor
    exponent: Tensor


def frexp(input: Tensor) -> frexp_result:
    """``(mantissa, exponent)`` with ``input = mantissa * 2 ** exponent``, ``|mantissa|``
    in ``[0.5, 1)`` (0 for 0) and an int32 exponent; floating inputs only."""
    _need_tensor("frexp", "input", input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"frexp(): only supports floating-point dtypes, got {input.dtype}")
    # float64 stays float64; the other float types are worked in float32 (the GPU has no float64)
    x = input.detach().to(_core.float64 if input.dtype == _core.float64 else _core.float32)
    finite = x.isfinite() & (x != 0)
    ax = _core.where(finite, x.abs(), _core.ones_like(x))
    e = ax.log2().floor() + 1
    m = ax / (e - 1).exp2() / 2  # 2**(e - 1): 2**e overflows for the largest finite values
    # log2 can round across a power of two: put the mantissa back in [0.5, 1).
    hi = m >= 1
    e = _core.where(hi, e + 1, e)
    m = _core.where(hi, m / 2, m)
    lo = m < 0.5
    e = _core.where(lo, e - 1, e)
    m = _core.where(lo, m * 2, m)
    mant = _core.where(finite, m * x.sign(), x)
    exp = _core.where(finite, e, _core.zeros_like(e))
    return frexp_result(mant.to(input.dtype), exp.to(_core.int32))


def isposinf(input: Tensor) -> Tensor:
    """Where ``input`` is positive infinity (bool)."""
    _need_tensor("isposinf", "input", input)
    if not input.dtype.is_floating_point:
        return _core.zeros(tuple(input.shape), dtype=_core.bool, device=input.device)
    return input == math.inf


def isneginf(input: Tensor) -> Tensor:
    """Where ``input`` is negative infinity (bool)."""
    _need_tensor("isneginf", "input", input)
    if not input.dtype.is_floating_point:
        return _core.zeros(tuple(input.shape), dtype=_core.bool, device=input.device)
    return input == -math.inf


def isreal(input: Tensor) -> Tensor:
    """Where ``input`` is real: all true (ferrograd has no complex dtypes)."""
    _need_tensor("isreal", "input", input)
    return _core.ones(tuple(input.shape), dtype=_core.bool, device=input.device)


def cov(
    input: Tensor,
    *,
    correction: builtins.int = 1,
    fweights: Tensor | None = None,
    aweights: Tensor | None = None,
) -> Tensor:
    """The covariance matrix of the variables in the rows of ``input`` (observations in
    columns; a 1-d input is one variable), with optional integer frequency weights
    ``fweights`` and observation weights ``aweights`` (as ``numpy.cov``)."""
    _need_tensor("cov", "input", input)
    if input.dim() > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got shape {tuple(input.shape)}"
        )
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(_core.get_default_dtype())
    n = x.shape[1]
    w: Tensor | None = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        _need_tensor("cov", name, wt)
        if wt.dim() > 1 or wt.numel() != n:
            raise RuntimeError(
                f"cov(): expected {name} to have one dimension of size {n}, got {tuple(wt.shape)}"
            )
        if name == "fweights" and wt.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected fweights to have an integral dtype, got {wt.dtype}")
        if not _capture.is_capturing() and builtins.bool((wt < 0).any().item()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        wf = wt.reshape(-1).to(x.dtype)
        w = wf if w is None else w * wf
    if w is None:
        wsum = _core.full((), builtins.float(n), dtype=x.dtype, device=x.device)
        avg = x.mean(1)
    else:
        wsum = w.sum()
        avg = (x * w).sum(1) / wsum
    if w is None:
        norm = wsum - correction
    elif correction == 0:
        norm = wsum
    elif aweights is None:
        norm = wsum - correction
    else:
        a = aweights.reshape(-1).to(x.dtype)
        norm = wsum - correction * (w * a).sum() / wsum
    norm = norm.clamp(min=0.0)
    xc = x - avg.unsqueeze(1)
    xw = xc if w is None else xc * w
    c = _mm(xw, xc.transpose(0, 1)) / norm
    return c.reshape(()) if x.shape[0] == 1 else c


def corrcoef(input: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables in the rows of ``input``
    (clipped to [-1, 1])."""
    _need_tensor("corrcoef", "input", input)
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = c.diagonal(0, 0, 1).sqrt()
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1.0, 1.0)


def renorm(input: Tensor, p: _Number, dim: builtins.int, maxnorm: _Number) -> Tensor:
    """``input`` with each slice along ``dim`` (its sub-tensor at each index of ``dim``)
    whose ``p``-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``."""
    _need_tensor("renorm", "input", input)
    _need_number("renorm", "p", p)
    _need_number("renorm", "maxnorm", maxnorm)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"renorm(): expected a floating point tensor, got {input.dtype}")
    if input.dim() < 2:
        raise RuntimeError(f"renorm(): input needs at least 2 dimensions, got shape {tuple(input.shape)}")
    if p <= 0:
        raise RuntimeError(f"renorm(): non-positive norm p={p} is not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm(): expected maxnorm to be >= 0 but got {maxnorm}")
    d = _dim("renorm", dim, input.dim())
    others = tuple(i for i in range(input.dim()) if i != d)
    norms = linalg.vector_norm(input, ord=p, dim=others, keepdim=True)
    scale = _core.where(norms > maxnorm, maxnorm / (norms + 1e-7), _core.ones_like(norms))
    return input * scale


def _trapz_dx(y: Tensor, x: Tensor | None, dx: _Number | None, d: builtins.int) -> Tensor | _Number:
    if x is None:
        return 1 if dx is None else dx
    _need_tensor("trapezoid", "x", x)
    if x.dim() == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(
                f"trapezoid(): there must be one x value per y value along dim {d}, got {x.shape[0]} and {y.shape[d]}"
            )
        view = [1] * y.dim()
        view[d] = -1
        return x.diff().reshape(view)
    return x.diff(dim=d)


def trapezoid(
    y: Tensor, x: Tensor | None = None, *, dx: _Number | None = None, dim: builtins.int = -1
) -> Tensor:
    """The trapezoidal-rule integral of ``y`` along ``dim``, at points ``x`` (1-d, or
    broadcasting with ``y``) or spacing ``dx`` (default 1)."""
    _need_tensor("trapezoid", "y", y)
    if x is not None and dx is not None:
        raise RuntimeError("trapezoid(): pass x or dx, not both")
    d = _dim("trapezoid", dim, y.dim())
    n = y.shape[d]
    if n == 0:
        return y.sum(d) * 0
    yf = y if y.dtype.is_floating_point else y.to(_core.get_default_dtype())
    h = _trapz_dx(yf, x, dx, d)
    avg = (yf.narrow(d, 1, n - 1) + yf.narrow(d, 0, n - 1)) / 2
    return (avg * h).sum(d)


def trapz(y: Tensor, x: Tensor | None = None, *, dx: _Number | None = None, dim: builtins.int = -1) -> Tensor:
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(
    y: Tensor, x: Tensor | None = None, *, dx: _Number | None = None, dim: builtins.int = -1
) -> Tensor:
    """The running trapezoidal-rule integral of ``y`` along ``dim`` (one value fewer than
    ``y`` has along ``dim``)."""
    _need_tensor("cumulative_trapezoid", "y", y)
    if x is not None and dx is not None:
        raise RuntimeError("cumulative_trapezoid(): pass x or dx, not both")
    d = _dim("cumulative_trapezoid", dim, y.dim())
    n = y.shape[d]
    yf = y if y.dtype.is_floating_point else y.to(_core.get_default_dtype())
    if n == 0:
        return yf
    h = _trapz_dx(yf, x, dx, d)
    avg = (yf.narrow(d, 1, n - 1) + yf.narrow(d, 0, n - 1)) / 2
    return (avg * h).cumsum(d)


class histogram_result(NamedTuple):
    """``(hist, bin_edges)`` of :func:`histogram`."""

    hist: Tensor
    bin_edges: Tensor


def histogram(
    input: Tensor,
    bins: builtins.int | Tensor = 100,
    *,
    range: tuple[builtins.float, builtins.float] | None = None,
    weight: Tensor | None = None,
    density: builtins.bool = False,
) -> histogram_result:
    """The histogram of ``input``'s values: ``bins`` equal bins over ``range`` (default:
    the values' min and max, widened by 0.5 each way when they are equal), or the
    increasing edges of a 1-d tensor ``bins``. Each bin holds ``[left, right)``, the last
    also its right edge; values outside are dropped. ``weight`` weighs each value;
    ``density`` divides by the total and the bin widths. Floating inputs only."""
    _need_tensor("histogram", "input", input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"histogram(): expects a floating point input, got {input.dtype}")
    x = input.detach().reshape(-1)
    if isinstance(bins, Tensor):
        if bins.dim() != 1 or bins.numel() < 1:
            raise RuntimeError(
                f"histogram(): bins must be a 1-d tensor of edges, got shape {tuple(bins.shape)}"
            )
        edges = bins.detach().to(input.dtype).to(input.device)
        if edges.numel() > 1 and not _capture.is_capturing():
            if builtins.bool((edges.diff() < 0).any().item()):
                raise RuntimeError("histogram(): bin edges must increase monotonically")
    else:
        if isinstance(bins, builtins.bool) or not isinstance(bins, builtins.int) or bins < 1:
            raise RuntimeError(f"histogram(): bins must be a positive int or a tensor of edges, got {bins!r}")
        if range is not None:
            lo, hi = builtins.float(range[0]), builtins.float(range[1])
        elif x.numel():
            lo, hi = builtins.float(x.min().item()), builtins.float(x.max().item())
        else:
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise RuntimeError(f"histogram(): min should not exceed max, but got min {lo} max {hi}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        # as linspace: the last edge is exactly ``hi`` (the largest value stays inside)
        grid = np.linspace(lo, hi, bins + 1)
        edges = _core.tensor(grid, dtype=_core.float64).to(input.dtype).to(input.device)
    nb = edges.numel() - 1
    if weight is not None:
        _need_tensor("histogram", "weight", weight)
        if tuple(weight.shape) != tuple(input.shape):
            raise RuntimeError(
                f"histogram(): weight shape {tuple(weight.shape)} must match input shape {tuple(input.shape)}"
            )
        w = weight.detach().reshape(-1).to(input.dtype)
    else:
        w = _core.ones_like(x)
    hist = _core.zeros((builtins.max(nb, 0),), dtype=input.dtype, device=input.device)
    if nb > 0 and x.numel():
        first, last = edges[0], edges[nb]
        inside = (x >= first) & (x <= last)
        pos = x.bucketize(edges, right=True) - 1
        pos = pos.clamp(0, nb - 1)
        hist = hist.scatter_add(0, pos, w * inside.to(w.dtype))
    if density and nb > 0:
        hist = hist / (hist.sum() * edges.diff())
    return histogram_result(hist, edges)


def unravel_index(
    indices: Tensor | builtins.int, shape: builtins.int | Sequence[builtins.int]
) -> tuple[Tensor, ...]:
    """The coordinates in a tensor of ``shape`` of the flat (row-major) ``indices``: one
    int64 tensor per dimension, each of ``indices``' shape."""
    if isinstance(indices, builtins.int) and not isinstance(indices, builtins.bool):
        indices = _core.tensor(indices)
    indices = _need_tensor("unravel_index", "indices", indices)
    if indices.dtype.is_floating_point or indices.dtype.is_bool:
        raise TypeError(f"unravel_index(): expected 'indices' to be an integer tensor, got {indices.dtype}")
    dims = [shape] if isinstance(shape, builtins.int) else list(shape)
    if any(not isinstance(s, builtins.int) or s < 0 for s in dims):
        raise ValueError(f"unravel_index(): 'shape' must be non-negative ints, got {tuple(dims)}")
    total = math.prod(dims)
    idx = indices.to(_core.int64)
    if idx.numel() and not _capture.is_capturing():
        lo, hi = builtins.int(idx.min().item()), builtins.int(idx.max().item())
        if lo < -total or hi >= total:
            raise RuntimeError(f"unravel_index(): index out of bounds for a tensor of shape {tuple(dims)}")
    idx = _core.where(idx < 0, idx + total, idx)
    out = []
    for s in reversed(dims):
        out.append(idx.remainder(s) if s else idx * 0)
        idx = idx.div(s, rounding_mode="floor") if s else idx
    return tuple(reversed(out))


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of 2-d matrices, left to right (``linalg.multi_dot``)."""
    if len(matrices) == 1 and isinstance(matrices[0], list | tuple):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): expected one or more tensors")
    for i, m in enumerate(matrices):
        _need_tensor("chain_matmul", f"matrices[{i}]", m)
        if m.dim() != 2:
            raise RuntimeError(f"chain_matmul(): tensor {i} must be 2-d, got shape {tuple(m.shape)}")
    out = matrices[0]
    for m in matrices[1:]:
        out = _mm(out, m)
    return out


def pinverse(input: Tensor, rcond: builtins.float = 1e-15) -> Tensor:
    """The Moore-Penrose pseudo-inverse (``linalg.pinv`` with ``rcond``)."""
    _need_tensor("pinverse", "input", input)
    return linalg.pinv(input, rtol=rcond)


def matrix_exp(input: Tensor) -> Tensor:
    """The matrix exponential of a (batch of) square matrices (``linalg.matrix_exp``)."""
    _need_tensor("matrix_exp", "input", input)
    return linalg.matrix_exp(input)


# ---------------------------------------------------------------------------
# Linear-algebra methods
# ---------------------------------------------------------------------------


class _svd_result(NamedTuple):
    U: Tensor
    S: Tensor
    V: Tensor


def _svd_method(self: Tensor, some: builtins.bool = True, compute_uv: builtins.bool = True) -> _svd_result:
    """``(U, S, V)`` with ``self = U diag(S) V^T`` (PyTorch's ``Tensor.svd``: ``V``, not
    ``Vh``; ``some=False`` gives full square ``U`` and ``V``; ``compute_uv=False`` gives
    zero square ``U`` and ``V``)."""
    if not compute_uv:
        s = linalg.svdvals(self)
        m, n = self.shape[-2], self.shape[-1]
        lead = tuple(self.shape[:-2])
        u0 = _core.zeros((*lead, m, m), dtype=s.dtype, device=self.device)
        return _svd_result(u0, s, _core.zeros((*lead, n, n), dtype=s.dtype, device=self.device))
    u, s, vh = linalg.svd(self, full_matrices=not some)
    return _svd_result(u, s, vh.transpose(-2, -1))


def _qr_method(self: Tensor, some: builtins.bool = True) -> Any:
    """``(Q, R)`` of ``self`` (``some=False``: complete ``Q``), as ``linalg.qr``. PyTorch 2.x
    removed ``Tensor.qr`` (it raises, pointing to ``linalg.qr``); this keeps the 1.x method."""
    return linalg.qr(self, mode="reduced" if some else "complete")


def _cholesky_method(self: Tensor, upper: builtins.bool = False) -> Tensor:
    """The Cholesky factor of a symmetric positive-definite ``self`` (lower, or upper
    ``L^T`` with ``upper=True``). PyTorch 2.x removed ``Tensor.cholesky`` (it raises,
    pointing to ``linalg.cholesky``); this keeps the 1.x method."""
    low = linalg.cholesky(self)
    return low.transpose(-2, -1) if upper else low


def _adjoint(self: Tensor) -> Tensor:
    """The conjugate transpose of the last two dimensions (real tensors: the transpose)."""
    if self.dim() < 2:
        raise RuntimeError(
            f"adjoint(): tensor must have at least 2 dimensions, got shape {tuple(self.shape)}"
        )
    return self.transpose(-2, -1)


def _mh_property(self: Tensor) -> Tensor:
    if self.dim() < 2:
        raise RuntimeError(
            f"tensor.mH is only supported on matrices or batches of matrices, got a {self.dim()}-D tensor"
        )
    return self.transpose(-2, -1)


def _h_property(self: Tensor) -> Tensor:
    if self.dim() not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors), got {self.dim()}-D tensor")
    return self if self.dim() == 0 else self.transpose(0, 1)


def _det_method(self: Tensor) -> Tensor:
    return linalg.det(self)


def _slogdet_method(self: Tensor) -> Any:
    return linalg.slogdet(self)


def _logdet_method(self: Tensor) -> Tensor:
    return linalg.logdet(self)


def _inverse_method(self: Tensor) -> Tensor:
    return linalg.inv(self)


def _matrix_power_method(self: Tensor, n: builtins.int) -> Tensor:
    return linalg.matrix_power(self, n)


# ---------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------


def _method(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__ or f"See :func:`ferrograd.{name}`."
    _sign_as(method, fn)
    return method


def _methods() -> dict[str, Callable[..., Any]]:
    T = Tensor
    m: dict[str, Callable[..., Any]] = {
        "addcmul": _method(addcmul, "addcmul"),
        "addcdiv": _method(addcdiv, "addcdiv"),
        "index_fill": _method(index_fill, "index_fill"),
        "index_copy": _method(index_copy, "index_copy"),
        "fill_diagonal_": _fill_diagonal_,
        "divide": _method(_divide, "divide"),
        "multiply": _method(T.mul, "multiply"),
        "subtract": _method(_subtract, "subtract"),
        "true_divide": _method(_true_divide, "true_divide"),
        "greater": _method(T.gt, "greater"),
        "greater_equal": _method(T.ge, "greater_equal"),
        "less": _method(T.lt, "less"),
        "less_equal": _method(T.le, "less_equal"),
        "not_equal": _method(T.ne, "not_equal"),
        "negative": _method(T.neg, "negative"),
        "positive": _positive_method,
        "absolute": _method(T.abs, "absolute"),
        "arctan2": _method(T.atan2, "arctan2"),
        "fix": _method(T.trunc, "fix"),
        "sgn": _method(_sgn, "sgn"),
        "swapdims": _method(_swapdims, "swapdims"),
        "ndimension": _ndimension_method,
        "is_signed": _is_signed_method,
        "is_nonzero": _is_nonzero_method,
        "is_same_size": _is_same_size_method,
        "sum_to_size": _sum_to_size_method,
        "tensor_split": _method(tensor_split, "tensor_split"),
        "hsplit": _method(hsplit, "hsplit"),
        "vsplit": _method(vsplit, "vsplit"),
        "dsplit": _method(dsplit, "dsplit"),
        "random_": _random_,
        "exponential_": _exponential_,
        "geometric_": _geometric_,
        "log_normal_": _log_normal_,
        "cauchy_": _cauchy_,
        "addr": _method(addr, "addr"),
        "ger": _method(ger, "ger"),
        "inner": _method(inner, "inner"),
        "dist": _method(dist, "dist"),
        "vdot": _method(vdot, "vdot"),
        "diagflat": _method(diagflat, "diagflat"),
        "float_power": _method(float_power, "float_power"),
        "gcd": _method(gcd, "gcd"),
        "lcm": _method(lcm, "lcm"),
        "ldexp": _method(ldexp, "ldexp"),
        "frexp": _method(frexp, "frexp"),
        "isposinf": _method(isposinf, "isposinf"),
        "isneginf": _method(isneginf, "isneginf"),
        "isreal": _method(isreal, "isreal"),
        "cov": _method(cov, "cov"),
        "corrcoef": _method(corrcoef, "corrcoef"),
        "renorm": _method(renorm, "renorm"),
        "histogram": _method(histogram, "histogram"),
        "det": _method(_det_method, "det"),
        "slogdet": _method(_slogdet_method, "slogdet"),
        "logdet": _method(_logdet_method, "logdet"),
        "inverse": _method(_inverse_method, "inverse"),
        "pinverse": _method(pinverse, "pinverse"),
        "matrix_power": _method(_matrix_power_method, "matrix_power"),
        "matrix_exp": _method(matrix_exp, "matrix_exp"),
        "cholesky": _method(_cholesky_method, "cholesky"),
        "qr": _method(_qr_method, "qr"),
        "svd": _method(_svd_method, "svd"),
        "adjoint": _method(_adjoint, "adjoint"),
    }
    inplace: dict[str, tuple[Callable[..., Tensor], builtins.bool]] = {
        "addcmul_": (addcmul, False),
        "addcdiv_": (addcdiv, False),
        "index_fill_": (index_fill, False),
        "index_copy_": (index_copy, False),
        "lt_": (T.lt, True),
        "gt_": (T.gt, True),
        "le_": (T.le, True),
        "ge_": (T.ge, True),
        "eq_": (T.eq, True),
        "ne_": (T.ne, True),
        "tril_": (T.tril, False),
        "triu_": (T.triu, False),
        "cumsum_": (_cumsum, True),
        "cumprod_": (_cumprod, True),
        "logical_and_": (T.logical_and, True),
        "logical_or_": (T.logical_or, True),
        "logical_xor_": (T.logical_xor, True),
        "remainder_": (T.remainder, False),
        "divide_": (_divide, False),
        "multiply_": (T.mul, False),
        "subtract_": (_subtract, False),
        "true_divide_": (_true_divide, False),
        "greater_": (T.gt, True),
        "greater_equal_": (T.ge, True),
        "less_": (T.lt, True),
        "less_equal_": (T.le, True),
        "not_equal_": (T.ne, True),
        "negative_": (T.neg, False),
        "absolute_": (T.abs, False),
        "arctan2_": (T.atan2, False),
        "fix_": (T.trunc, False),
        "sgn_": (_sgn, False),
        "float_power_": (_float_power_checked, True),
        "gcd_": (gcd, False),
        "lcm_": (lcm, False),
        "ldexp_": (ldexp, False),
        "xlogy_": (T.xlogy, False),
        "renorm_": (renorm, False),
    }
    for name, (fn, cast) in inplace.items():
        m[name] = _inplace(fn, name, cast)
    views: dict[str, Callable[..., Tensor]] = {
        "squeeze_": T.squeeze,
        "unsqueeze_": T.unsqueeze,
        "t_": T.t,
        "transpose_": T.transpose,
        "swapdims_": T.transpose,
        "swapaxes_": T.swapaxes,
    }
    for name, fn in views.items():
        m[name] = _view_inplace(name, fn)
    return m


def install() -> None:
    """Attach this module's Tensor methods (and the ``H``/``mH`` properties), leaving any
    method the core or another module already defines in place."""
    for name, fn in _methods().items():
        if name in Tensor.__dict__ and getattr(Tensor.__dict__[name], "__module__", None) != __name__:
            continue
        setattr(Tensor, name, fn)
    for name, getter in (("H", _h_property), ("mH", _mh_property)):
        if name in Tensor.__dict__:
            continue
        setattr(Tensor, name, property(getter, doc="The (conjugate) transpose of the matrix dimensions."))
