"""Data-dependent control flow that works both eagerly and in captured graphs.

Python ``if`` and ``while`` run at trace time, so they cannot depend on a
captured tensor's value (``bool(t)`` raises :class:`ferrograd.TraceError`
while tracing). :func:`cond` and :func:`while_loop` decide when the graph
runs instead::

    @fg.compile
    def collatz_steps(n):
        def body(n, k):
            return fg.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
        return fg.while_loop(lambda n, k: n != 1, body, (n, fg.zeros((), dtype=fg.int64)))[1]

Outside a capture both simply run Python control flow on the values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _core
from ._grad_mode import is_grad_enabled

Tensor = _core.Tensor

__all__ = ["cond", "while_loop"]


def _as_tensors(vals: Any, what: str) -> tuple[list[Tensor], bool]:
    """The tensors of a tensor or a tuple/list of tensors, and whether it was a sequence."""
    seq = isinstance(vals, (tuple, list))
    items = list(vals) if seq else [vals]
    out = []
    for i, v in enumerate(items):
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (bool, int, float)):
            out.append(_core.tensor(v))
        else:
            where = f" (item {i})" if seq else ""
            raise TypeError(f"{what} must be tensors or numbers, got {type(v).__name__}{where}")
    return out, seq


def _trace_body(fn: Callable, args: list[Tensor], what: str) -> tuple[Any, bool]:
    """Capture ``fn(*args)`` as a sub-graph; returns it and whether fn returned a sequence."""
    inner = _core._trace_sub_begin(args)
    try:
        outs, seq = _as_tensors(fn(*inner), f"the results of {what}")
        sub = _core._trace_sub_end(outs, len(args))
    except BaseException:
        _core._trace_sub_abort()
        raise
    return sub, seq


def cond(pred: Any, true_fn: Callable, false_fn: Callable, *operands: Any) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, decided by data.

    ``pred``: a bool or a one-element tensor (non-zero is true). Both
    functions must return the same structure (a tensor or a tuple of
    tensors) with equal shapes and dtypes. Eagerly this is a Python ``if``.
    In a captured graph it is one ``cond`` node and only the chosen branch
    runs — except when gradients must flow through it (grad mode on and an
    operand or a tensor a branch reads requires grad): then both branches
    are captured and their results selected with :func:`ferrograd.where`, so
    gradients reach the chosen branch's inputs (the other branch gets zero).
    Branches must not update outside tensors in place.
    """
    ops, _ = _as_tensors(list(operands), "fg.cond operands")
    if not _core._trace_recording() or not isinstance(pred, Tensor):
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    if pred.numel() != 1:
        raise ValueError(
            f"fg.cond: the condition must have one element, got shape {tuple(pred.shape)} ({pred.dtype})"
        )
    then_g, seq = _trace_body(true_fn, ops, "true_fn")
    else_g, seq2 = _trace_body(false_fn, ops, "false_fn")
    if seq != seq2:
        raise ValueError(
            "fg.cond: one branch returned a tensor and the other a tuple; return the same structure"
        )
    needs_grad = is_grad_enabled() and (
        then_g.requires_grad or else_g.requires_grad or any(t.requires_grad for t in ops)
    )
    if needs_grad:
        p = (pred if pred.dtype == _core.bool else pred != 0).reshape(())
        t_outs, _ = _as_tensors(true_fn(*operands), "the results of true_fn")
        f_outs, _ = _as_tensors(false_fn(*operands), "the results of false_fn")
        outs = [_core.where(p, a, b) for a, b in zip(t_outs, f_outs, strict=True)]
    else:
        outs = _core._trace_cond(pred, ops, then_g, else_g)
    return tuple(outs) if seq else outs[0]


def while_loop(cond_fn: Callable, body_fn: Callable, loop_vars: Any) -> Any:
    """Repeat ``loop_vars = body_fn(*loop_vars)`` while ``cond_fn(*loop_vars)`` holds.

    ``loop_vars``: a tensor or a tuple/list of tensors; ``body_fn`` returns
    them with unchanged shapes and dtypes; ``cond_fn`` returns a bool or a
    one-element tensor. Returns the final loop variables (same structure).
    Eagerly this is a Python ``while``; in a captured graph it is one
    ``while_loop`` node run by the executor, the number of iterations
    decided by the data at each run. Reverse-mode gradients through a
    captured loop are not supported (as with ``jax.lax.while_loop``): use a
    Python ``for`` loop, which is unrolled at trace time.
    """
    vals, seq = _as_tensors(loop_vars, "fg.while_loop loop_vars")
    if not _core._trace_recording():
        while bool(cond_fn(*vals)):
            out, _ = _as_tensors(body_fn(*vals), "the results of body_fn")
            if len(out) != len(vals):
                raise ValueError(
                    f"fg.while_loop: body_fn returned {len(out)} values for {len(vals)} loop variables"
                )
            vals = out
        return tuple(vals) if seq else vals[0]
    cond_g, _ = _trace_body(lambda *v: _as_truth(cond_fn(*v)), vals, "cond_fn")
    body_g, _ = _trace_body(body_fn, vals, "body_fn")
    if is_grad_enabled() and (body_g.requires_grad or any(t.requires_grad for t in vals)):
        raise _core.TraceError(
            "fg.while_loop: gradients cannot flow through a captured while loop; run it under "
            "fg.no_grad(), detach its inputs, or use a Python for loop (unrolled at trace time)"
        )
    outs = _core._trace_while(vals, cond_g, body_g)
    return tuple(outs) if seq else outs[0]


def _as_truth(c: Any) -> Tensor:
    if isinstance(c, Tensor):
        return c
    if isinstance(c, (bool, int, float)):
        return _core.tensor(bool(c))
    raise TypeError(
        f"fg.while_loop: cond_fn must return a bool or a one-element tensor, got {type(c).__name__}"
    )
