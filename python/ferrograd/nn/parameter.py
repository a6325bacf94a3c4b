"""``Parameter``: a leaf tensor that a ``Module`` registers as one of its parameters."""

from __future__ import annotations

from typing import Any

from .. import _core
from .._grad_mode import no_grad as _no_grad

Tensor = _core.Tensor

__all__ = ["Buffer", "Parameter", "UninitializedBuffer", "UninitializedParameter"]


class Parameter(Tensor):
    """A tensor that is a module parameter.

    ``Parameter(data, requires_grad=True)`` aliases ``data``'s storage as a
    new leaf tensor (no copy). Assigning a ``Parameter`` as an attribute of a
    :class:`~ferrograd.nn.Module` registers it, so it shows up in
    ``parameters()`` and ``state_dict()``. ``Parameter()`` is an empty
    float32 tensor.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = _core.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        return super().__new__(cls, data, requires_grad)

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        out = type(self)(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            out.grad = self.grad.detach().clone()
        memo[id(self)] = out
        return out


class Buffer:
    """Marker for a module buffer: ``module.x = Buffer(t)`` is ``module.register_buffer("x", t)``.

    ``persistent=False`` keeps the buffer out of ``state_dict()``.
    """

    def __init__(self, data: Tensor, *, persistent: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer: data must be a Tensor, got {type(data).__name__}")
        self.data = data
        self.persistent = persistent


def _check_shape(kind: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{kind}.materialize: shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{kind}.materialize: shape must not have negative sizes, got {dims}")
    return dims


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (the weights of the ``Lazy*`` layers).

    It holds an empty tensor of its dtype and device; :meth:`materialize` gives it a
    shape in place (uninitialised memory, to be filled by the module's
    ``reset_parameters``) and turns it into a plain :class:`Parameter`, so an
    optimizer that already holds it trains the sized weight.
    """

    cls_to_become = Parameter

    def __new__(
        cls, requires_grad: bool = True, device: Any = None, dtype: Any = None
    ) -> UninitializedParameter:
        data = _core.empty((0,), dtype=dtype or _core.get_default_dtype(), device=device)
        return super().__new__(cls, data, requires_grad)

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> None:
        pass

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the parameter ``shape`` (and optionally a new device or dtype), in place."""
        dims = _check_shape("UninitializedParameter", shape)
        data = _core.empty(
            dims, dtype=dtype or self.dtype, device=device if device is not None else self.device
        )
        with _no_grad():
            self.data = data
        self.__class__ = self.cls_to_become  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> UninitializedParameter:
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


class UninitializedBuffer(Tensor):
    """A buffer whose shape is not known yet (the running statistics of ``LazyBatchNorm*``).

    :meth:`materialize` returns a plain tensor of the given shape (uninitialised
    memory); the lazy modules store it in place of this placeholder.
    """

    def __new__(
        cls, requires_grad: bool = False, device: Any = None, dtype: Any = None
    ) -> UninitializedBuffer:
        data = _core.empty((0,), dtype=dtype or _core.get_default_dtype(), device=device)
        return super().__new__(cls, data, requires_grad)

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None) -> None:
        pass

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> Tensor:
        """A tensor of ``shape`` with this buffer's dtype and device (or the given ones)."""
        dims = _check_shape("UninitializedBuffer", shape)
        return _core.empty(
            dims, dtype=dtype or self.dtype, device=device if device is not None else self.device
        )

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> UninitializedBuffer:
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]
