"""``Parameter``: a leaf tensor that a ``Module`` registers as one of its parameters."""

from __future__ import annotations

from typing import Any

from .. import _core

Tensor = _core.Tensor

__all__ = ["Buffer", "Parameter"]


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
