"""``pickle`` and ``copy.deepcopy`` support for tensors (installed on ``Tensor`` at import).

A tensor pickles as its values (row-major bytes), dtype, shape and
``requires_grad``; its class (``Tensor`` or a subclass such as
``nn.Parameter``) and any instance attributes come back too. ``deepcopy``
also copies ``.grad``. As in PyTorch, a tensor computed from others that
require grad (not a leaf) cannot be copied: ``detach()`` it first.

Pickle is for user objects: the project's file formats (``fg.save``,
``Graph.save``) never use it, except ``fg.save`` of a whole module, which pickles
the object with its tensors stored in the checkpoint's own tensor section.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core

Tensor = _core.Tensor


def _check_leaf(t: Tensor, what: str) -> None:
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            f"{what}: only tensors created by the user (graph leaves) can be copied; this one was computed "
            f"by {type(t.grad_fn).__name__ if t.grad_fn is not None else 'an op'} — use t.detach() first"
        )


def _payload(t: Tensor) -> tuple[bytes, str, tuple[int, ...]]:
    d = t.detach()
    name = d.dtype.name if hasattr(d.dtype, "name") else str(d.dtype)
    name = str(name).replace("ferrograd.", "")
    if name == "bfloat16":  # NumPy has no bfloat16: float32 holds it exactly
        d = d.to(_core.float32)
    arr = np.ascontiguousarray(np.asarray(d))
    return arr.tobytes(), name, tuple(t.shape)


def _rebuild(cls: type, data: bytes, dtype: str, shape: tuple[int, ...], requires_grad: bool) -> Tensor:
    np_dtype = {"bfloat16": np.float32, "bool": np.bool_}.get(dtype) or np.dtype(dtype)
    arr = np.frombuffer(data, dtype=np_dtype).reshape(shape)
    t = _core.tensor(arr.copy(), dtype=getattr(_core, dtype))
    if cls is Tensor:
        return t.requires_grad_(requires_grad) if requires_grad else t
    return cls(t, requires_grad)


def _reduce_ex(self: Tensor, protocol: int) -> tuple:
    _check_leaf(self, "pickle")
    data, dtype, shape = _payload(self)
    state = dict(self.__dict__) if hasattr(self, "__dict__") and self.__dict__ else None
    return (_rebuild, (type(self), data, dtype, shape, bool(self.requires_grad)), state)


def _deepcopy(self: Tensor, memo: dict[int, Any]) -> Tensor:
    if id(self) in memo:
        return memo[id(self)]
    _check_leaf(self, "deepcopy")
    data = self.detach().clone()
    out = data.requires_grad_(True) if (type(self) is Tensor and self.requires_grad) else data
    if type(self) is not Tensor:
        out = type(self)(data, bool(self.requires_grad))
    memo[id(self)] = out
    if self.grad is not None:
        out.grad = self.grad.detach().clone()
    if hasattr(self, "__dict__") and self.__dict__:
        import copy

        for k, v in self.__dict__.items():
            setattr(out, k, copy.deepcopy(v, memo))
    return out


def install() -> None:
    """Give ``Tensor`` (and so its subclasses) ``__reduce_ex__`` and ``__deepcopy__``."""
    Tensor.__reduce_ex__ = _reduce_ex  # type: ignore[method-assign,assignment]
    Tensor.__deepcopy__ = _deepcopy  # type: ignore[attr-defined]
