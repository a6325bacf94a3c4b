"""``Tensor.register_post_accumulate_grad_hook``, built on a leaf gradient hook and the
autograd engine's end-of-backward callbacks (no kernel or engine change)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from . import _core

Tensor = _core.Tensor

__all__: list[str] = []


def _stamp(g: Tensor | None) -> tuple[int, int] | None:
    """What changes when the engine accumulates into ``.grad`` (each read of ``.grad`` is a
    new Python object, so identity cannot tell)."""
    return None if g is None else (g.data_ptr(), g._version)


def register_post_accumulate_grad_hook(self: Tensor, hook: Callable[[Tensor], None]) -> Any:
    """Call ``hook(tensor)`` after a backward pass has accumulated this leaf's ``.grad``.

    As PyTorch's: only on leaves that require grad; the hook sees the tensor (its
    ``.grad`` already summed) and returns None. It runs for ``backward()`` (and
    ``backward(inputs=...)`` naming the leaf), not for ``autograd.grad``, which writes no
    ``.grad``. Departure: the hooks run once the backward pass has finished, in the order
    their leaves' gradients were ready, rather than between the engine's steps (what they
    see is the same, as a leaf's gradient is final when accumulated). Returns a handle
    whose ``remove()`` unregisters the hook.
    """
    if not isinstance(self, Tensor):
        raise TypeError(f"register_post_accumulate_grad_hook: expected a Tensor, got {type(self).__name__}")
    if not callable(hook):
        raise TypeError(
            f"register_post_accumulate_grad_hook: hook must be callable, got {type(hook).__name__}"
        )
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    ref = weakref.ref(self)

    def leaf_hook(grad: Tensor) -> None:
        t = ref()
        if t is None:
            return
        before = _stamp(t.grad)

        def after() -> None:
            t2 = ref()
            if t2 is not None and t2.grad is not None and _stamp(t2.grad) != before:
                if hook(t2) is not None:
                    raise RuntimeError("post accumulate grad hooks should return None")

        _core._queue_callback(after)

    return self.register_hook(leaf_hook)


def install() -> None:
    """Attach the method to ``Tensor`` (unless the core defines it)."""
    if "register_post_accumulate_grad_hook" not in Tensor.__dict__:
        Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook  # type: ignore[attr-defined]
