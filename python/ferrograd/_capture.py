"""The Python side of graph capture: tracing state, guards and source lines.

A trace runs Python code once with *captured* tensors (shape-only stand-ins
for the real ones); every op they meet is recorded by the Rust core into a
graph. This module keeps what only Python knows: the user's source line of
each op, the Python-level facts a captured graph silently depends on
(modules' ``training`` flags, which objects globals and closures refer to),
and callbacks library code registers while being traced — optimizer
hyperparameters to read afresh at every run, bookkeeping to redo after
each run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from . import _core

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_local = threading.local()


def _user_location() -> str | None:
    """``file:line`` of the innermost frame outside the ferrograd package."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR) and not fn.startswith("<frozen"):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return None


class TraceState:
    """What Python code registers while one graph is being captured."""

    def __init__(self) -> None:
        #: (object, attribute, captured value) facts re-checked before each run.
        self.guards: list[tuple[Any, str, Any]] = []
        #: The same for attributes of modules (see :meth:`guard`).
        self.module_guards: list[tuple[Any, str, Any]] = []
        self._guarded: set[tuple[int, str]] = set()
        #: Callables run after each run of the graph (Python bookkeeping).
        self.after_run: list[Callable[[], None]] = []
        #: Callables run before each run of the graph.
        self.before_run: list[Callable[[], None]] = []
        #: Getters of the scalar slots the graph reads at every run.
        self.scalars: list[Callable[[], float]] = []

    def slot(self, getter: Callable[[], float]) -> int:
        """Register a scalar the graph reads afresh at every run; returns its slot number."""
        self.scalars.append(getter)
        return len(self.scalars) - 1

    def scalar_values(self) -> list[float]:
        """The current value of every scalar slot."""
        return [float(g()) for g in self.scalars]

    def guard(self, obj: Any, attr: str, module: bool = False) -> None:
        """Re-check ``getattr(obj, attr)`` before each run; a change retraces.

        ``module=True`` for a ``Module``'s attributes: those change only through
        ``Module.__setattr__`` or its member tables, which bump
        ``Module._structure_version``, so they are re-checked only when it moved.
        """
        k = (id(obj), attr)
        if k in self._guarded:
            return
        self._guarded.add(k)
        (self.module_guards if module else self.guards).append((obj, attr, getattr(obj, attr)))

    def guards_hold(self, modules: bool = True) -> str | None:
        """None when every guard still holds, else a description of the first that fails
        (``modules=False`` skips the guards on module attributes)."""
        return _first_failed(self.guards) or (_first_failed(self.module_guards) if modules else None)


def _first_failed(guards: list[tuple[Any, str, Any]]) -> str | None:
    for obj, attr, val in guards:
        now = getattr(obj, attr, _MISSING)
        if now is val:
            continue
        if isinstance(val, (bool, int, float, str)) and type(now) is type(val) and now == val:
            continue
        shown = repr(val) if isinstance(val, (bool, int, float, str)) else f"a {type(val).__name__}"
        return f"{type(obj).__name__}.{attr} changed (was {shown})"
    return None


_MISSING = object()


def current() -> TraceState | None:
    """The trace state of this thread's capture, or None when not capturing."""
    return getattr(_local, "state", None)


@contextlib.contextmanager
def capturing(state: TraceState) -> Iterator[TraceState]:
    """Install ``state`` as this thread's trace state while the body runs."""
    prev = current()
    _local.state = state
    try:
        yield state
    finally:
        _local.state = prev


def is_capturing() -> bool:
    """Whether this thread is capturing a graph right now."""
    return _core._tracing()


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Run the body on real tensors in the middle of a capture (no recording).

    For library code that creates persistent state while being traced (an
    optimizer's buffers on its first step): such tensors are real, and the
    graph then reads and updates them by reference.
    """
    if not _core._tracing():
        yield
        return
    prev = _core._trace_set_active(False)
    try:
        yield
    finally:
        _core._trace_set_active(prev)
