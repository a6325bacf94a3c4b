"""Activation checkpointing: ``checkpoint(fn, *args)`` trades compute for memory.

``checkpoint(fn, *args)`` returns ``fn(*args)``, computed with recording
off, so the intermediate values of ``fn`` are not kept for the backward
pass; the backward pass runs ``fn`` again on the saved arguments (with the
random state it had the first time, unless ``preserve_rng_state=False``, so
dropout draws the same masks) and backpropagates through that recomputation.
Gradients reach the tensor arguments and every other tensor ``fn`` uses
(a module's parameters), as in PyTorch.

It is built on :class:`ferrograd.autograd.Function`; the recomputation's
backward pass runs inside the outer one. Differences from PyTorch:

- when recording is off, when no tensor argument requires grad, or while a
  graph is being captured (``fg.compile``), ``fn`` simply runs: correct
  results and gradients, no memory saved;
- higher-order gradients through a checkpointed function are not
  supported (as with PyTorch's ``use_reentrant=True``);
- ``use_reentrant``, ``context_fn``, ``determinism_check`` and ``debug`` are
  accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _core
from .._grad_mode import enable_grad, is_grad_enabled
from ..autograd import Function, backward

Tensor = _core.Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], preserve_rng_state: bool, kwargs: dict, *args: Any) -> Any:
        ctx.fn = fn
        ctx.kwargs = kwargs
        ctx.rng_state = _core.get_rng_state() if preserve_rng_state else None
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return fn(*args, **kwargs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        saved = iter(ctx.saved_tensors)
        args: list[Any] = []
        tensors: list[Tensor | None] = []
        for a in ctx.args:
            if a is None:
                t = next(saved)
                d = t.detach()
                if t.requires_grad:
                    d.requires_grad_(True)
                args.append(d)
                tensors.append(d)
            else:
                args.append(a)
                tensors.append(None)
        current = None
        if ctx.rng_state is not None:
            current = _core.get_rng_state()
            _core.set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                out = ctx.fn(*args, **ctx.kwargs)
        finally:
            if current is not None:
                _core.set_rng_state(current)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [
            (o, g)
            for o, g in zip(outs, grads, strict=False)
            if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        if pairs:
            backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None, *[t.grad if t is not None and t.requires_grad else None for t in tensors])


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Any = None,
    determinism_check: str = "default",
    debug: bool = False,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)``, recomputed in the backward pass instead of
    keeping its intermediate values (see the module docs)."""
    if (
        not is_grad_enabled()
        or _core._trace_recording()
        or not any(isinstance(a, Tensor) and a.requires_grad for a in args)
    ):
        return function(*args, **kwargs)
    return _Checkpoint.apply(function, preserve_rng_state, kwargs, *args)


def checkpoint_sequential(
    functions: Any, segments: int, input: Any, use_reentrant: bool | None = None, **kwargs: Any
) -> Any:
    """Run ``functions`` (a ``Sequential`` or a list of modules) in ``segments``
    checkpointed chunks; the last chunk runs as is."""
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be positive, got {segments}")
    size = max(1, len(fns) // segments)
    end = 0

    def run(lo: int, hi: int) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            for m in fns[lo:hi]:
                x = m(x)
            return x

        return f

    for lo in range(0, min(size * (segments - 1), max(0, len(fns) - 1)), size):
        end = lo + size
        input = checkpoint(run(lo, end), input, **kwargs)
    return run(end, len(fns))(input)
