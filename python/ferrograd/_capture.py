"""The Python side of graph capture: tracing state, guards and source lines.

A trace runs Python code once with *captured* tensors (shape-only stand-ins
for the real ones); every op they meet is recorded by the Rust core into a
graph. This module keeps what only Python knows: the user's source line of
each op, the Python-level facts a captured graph silently depends on
(modules' attributes — ``training``, hyperparameters, parameter objects —,
optimizers' structural options, which objects globals and closures refer to),
and callbacks library code registers while being traced — optimizer
hyperparameters to read afresh at every run, bookkeeping to redo after
each run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from operator import is_
from typing import Any

from . import _core

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_local = threading.local()


def _user_location() -> str | None:
    """``file:line`` of the innermost frame outside the ferrograd package.

    While a graph is captured, what the trace knows of the op's place in the
    model follows (see :func:`split_location`): `` in <module path>`` — the
    innermost module being called, named as ``named_modules()`` names it
    (``blocks.2.attn.qkv``) — and `` (backward)`` or `` (optimizer)`` for
    ops recorded by ``Tensor.backward`` or an optimizer's ``step``. The Rust
    tracer stores this string as the node's ``loc``.
    """
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR) and not fn.startswith("<frozen"):
            loc = f"{fn}:{f.f_lineno}"
            st = getattr(_local, "state", None)
            return loc if st is None else loc + st.where()
        f = f.f_back
    return None


_LOC = re.compile(r"^(?P<source>.*:\d+)(?: in (?P<module>\S+))?(?: \((?P<region>backward|optimizer)\))?$")


def split_location(loc: str | None) -> tuple[str | None, str, str]:
    """``(source line, module path, region)`` of a node's ``loc``: the module
    path is ``""`` outside any module (or in the root module itself), the
    region ``"forward"``, ``"backward"`` or ``"optimizer"``."""
    if not loc:
        return None, "", "forward"
    m = _LOC.match(loc)
    if m is None:
        return loc, "", "forward"
    return m.group("source"), m.group("module") or "", m.group("region") or "forward"


class TraceState:
    """What Python code registers while one graph is being captured."""

    def __init__(self) -> None:
        #: (object, attribute, captured value) facts re-checked before each run.
        self.guards: list[tuple[Any, str, Any]] = []
        self._guarded: set[tuple[int, str]] = set()
        #: (description, getter, captured value): values re-checked before each run.
        self.value_guards: list[tuple[str, Callable[[], Any], Any]] = []
        #: Modules used while tracing (called, or a member read), by id.
        self.modules: dict[int, Any] = {}
        #: Snapshots of those modules, taken by :meth:`finish`: per module
        #: ``[version cell, version, module, [(table, names, values), ...]]``.
        #: See :func:`modules_changed`.
        self.module_snapshots: list[list[Any]] = []
        #: (module, attribute, frozen value) of module attributes holding mutable
        #: plain containers (lists, dicts, sets): re-checked before each run, since
        #: changing them in place does not go through ``Module.__setattr__``.
        self.container_guards: list[tuple[Any, str, Any]] = []
        #: Callables run after each run of the graph (Python bookkeeping).
        self.after_run: list[Callable[[], None]] = []
        #: Callables run before each run of the graph.
        self.before_run: list[Callable[[], None]] = []
        #: Getters of the scalar slots the graph reads at every run.
        self.scalars: list[Callable[[], float]] = []
        #: (module, path) of the modules being called, outermost first.
        self.module_stack: list[tuple[Any, str]] = []
        #: Modules called with no module around them (the models), in call order.
        self.roots: list[Any] = []
        self._root_names: dict[int, dict[int, str]] = {}
        #: Regions (``"backward"``, ``"optimizer"``) being recorded, innermost last.
        self.regions: list[str] = []
        #: Optimizers whose ``step`` was captured (their state tensors get names).
        self.optimizers: list[Any] = []
        #: Module path -> class name of the module called there.
        self.module_types: dict[str, str] = {}
        #: The name of each tensor argument of a compiled function (``xb``), by position.
        self.arg_names: list[str] | None = None

    # -- where an op is: module path and region -----------------------------

    def root_prefix(self, root: Any) -> str:
        """What paths under ``root`` start with: nothing for the first model
        called, the class name for later ones (``CrossEntropyLoss``)."""
        if not self.roots or root is self.roots[0]:
            return ""
        names = [type(r).__name__ for r in self.roots]
        k = next(i for i, r in enumerate(self.roots) if r is root)
        name = names[k]
        return name if names.count(name) == 1 else f"{name}{names[:k].count(name)}"

    def enter_module(self, m: Any) -> None:
        """A module's call begins (``Module.__call__``)."""
        stack = self.module_stack
        if not stack:
            if not any(r is m for r in self.roots):
                self.roots.append(m)
            path = self.root_prefix(m)
            stack.append((m, path))
            self.module_types.setdefault(path, type(m).__name__)
            return
        root = stack[0][0]
        table = self._root_names.get(id(root))
        if table is None:
            table = {}
            prefix = stack[0][1]
            for name, sub in root.named_modules():
                table.setdefault(id(sub), name)
                if name:  # containers (ModuleList) are never called: their types from here
                    self.module_types.setdefault(f"{prefix}.{name}" if prefix else name, type(sub).__name__)
            self._root_names[id(root)] = table
        name = table.get(id(m))
        if name is None:  # a module outside the model's tree: its class under the caller
            parent = stack[-1][1]
            path = f"{parent}.{type(m).__name__}" if parent else type(m).__name__
        else:
            prefix = stack[0][1]
            path = f"{prefix}.{name}" if prefix and name else (prefix or name)
        stack.append((m, path))
        self.module_types.setdefault(path, type(m).__name__)

    def exit_module(self) -> None:
        self.module_stack.pop()

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        """Ops recorded in the body belong to region ``name`` (``"backward"``, ``"optimizer"``)."""
        self.regions.append(name)
        try:
            yield
        finally:
            self.regions.pop()

    def where(self) -> str:
        """The suffix :func:`_user_location` adds: module path and region."""
        out = ""
        if self.module_stack and self.module_stack[-1][1]:
            out = f" in {self.module_stack[-1][1]}"
        if self.regions:
            out += f" ({self.regions[-1]})"
        return out

    def named_tensors(self) -> dict[tuple, str]:
        """Names of the tensors a captured graph may read by reference, keyed
        by :func:`tensor_key`: the models' parameters and buffers under their
        ``state_dict`` names, optimizer state as ``<parameter>.<key>``
        (``0.weight.exp_avg``)."""
        names: dict[tuple, str] = {}
        for root in self.roots:
            prefix = self.root_prefix(root)
            sd = getattr(root, "state_dict", None)
            if sd is None:
                continue
            for k, t in sd(keep_vars=True).items():
                key = tensor_key(t)
                if key is not None:
                    names.setdefault(key, f"{prefix}.{k}" if prefix else k)
        for o in self.optimizers:
            for p, entry in getattr(o, "state", {}).items():
                pname = names.get(tensor_key(p))
                if pname is None or not isinstance(entry, dict):
                    continue
                for k, v in entry.items():
                    key = tensor_key(v)
                    if key is not None:
                        names.setdefault(key, f"{pname}.{k}")
        return names

    def slot(self, getter: Callable[[], float]) -> int:
        """Register a scalar the graph reads afresh at every run; returns its slot number."""
        self.scalars.append(getter)
        return len(self.scalars) - 1

    def scalar_values(self) -> list[float]:
        """The current value of every scalar slot."""
        return [float(g()) for g in self.scalars]

    def guard(self, obj: Any, attr: str) -> None:
        """Re-check ``getattr(obj, attr)`` before each run; a change retraces."""
        k = (id(obj), attr)
        if k in self._guarded:
            return
        self._guarded.add(k)
        self.guards.append((obj, attr, getattr(obj, attr)))

    def guard_value(self, what: str, getter: Callable[[], Any]) -> None:
        """Re-check ``getter()`` before each run (by value for plain data, else by
        identity); a change retraces and ``explain=True`` names ``what``."""
        self.value_guards.append((what, getter, getter()))

    def use_module(self, module: Any) -> None:
        """Note that the graph depends on ``module`` (see :meth:`finish`)."""
        self.modules.setdefault(id(module), module)

    def finish(self) -> None:
        """Snapshot every used module once the trace is complete.

        A captured graph bakes in what a module's Python code read while
        tracing: plain attributes (``training``, ``Dropout.p``, a user
        module's ``self.k``), the parameter, buffer and submodule objects, the
        forward hooks. Every entry of those tables is snapshotted (not only
        the ones read: reads of instance attributes are not observable
        cheaply); non-tensor plain values compare by value, other objects by
        identity. Taken at the end of the trace, so attributes a forward sets
        while tracing do not fail the guard at the next call.
        """
        for m in self.modules.values():
            d = m.__dict__
            cell = d.get("_version")
            if not (type(cell) is list and len(cell) == 1):
                cell = [0]  # (a module built without Module.__init__: compared at every check)
                version = -1
            else:
                version = cell[0]
            self.module_snapshots.append([cell, version, m, _tables(m)])
            for name, v in d.items():
                if type(v) in _CONTAINERS and name not in _BOOKKEEPING:
                    frozen = _freeze(v)
                    if frozen is not None:
                        self.container_guards.append((m, name, frozen))

    def guards_hold(self, modules: bool = True) -> str | None:
        """None when every guard still holds, else a description of the first that fails
        (``modules=False`` skips the snapshots of modules' tables: those change only
        through ``Module.__setattr__`` or the member tables, which bump
        ``Module._structure_version``, so callers check them only when it moved)."""
        why = _first_failed(self.guards) or _values_changed(self.value_guards)
        if why is None and self.container_guards:
            why = _containers_changed(self.container_guards)
        if why is None and modules:
            why = modules_changed(self.module_snapshots)
        return why


#: A module's member tables snapshotted besides its ``__dict__``.
_MODULE_TABLES = ("_parameters", "_buffers", "_modules", "_forward_pre_hooks", "_forward_hooks")
_TABLE_WHAT = {
    "_parameters": "parameter",
    "_buffers": "buffer",
    "_modules": "submodule",
    "_forward_pre_hooks": "forward pre-hook",
    "_forward_hooks": "forward hook",
}

#: ``Module`` attributes no forward reads (not guarded by value).
_BOOKKEEPING = frozenset({"_non_persistent_buffers_set", "_version"})

_SCALARS = frozenset({bool, int, float, complex, str, bytes, type(None)})
_CONTAINERS = frozenset({list, dict, set})


def _freeze(v: Any) -> Any:
    """A comparable copy of plain data (None, bool, int, float, complex, str,
    bytes, ``fg.dtype``/``fg.device``, and tuples, lists, dicts and sets of
    those), types included; None for anything else."""
    t = type(v)
    if t in _SCALARS or t is _core.dtype or t is _core.device:
        return (t, v)
    if t is tuple or t is list:
        items = tuple(_freeze(x) for x in v)
        return None if None in items else (t, items)
    if t is dict:
        items = tuple((_freeze(k), _freeze(x)) for k, x in v.items())
        return None if any(None in kv for kv in items) else (t, items)
    if t is set or t is frozenset:
        items = [_freeze(x) for x in v]
        return None if None in items else (t, frozenset(items))
    return None


def same_value(old: Any, new: Any) -> bool:
    """Whether ``new`` may stand for ``old`` in a captured graph: the same
    object, or equal plain data of the same types."""
    if new is old:
        return True
    a = _freeze(old)
    return a is not None and a == _freeze(new)


def show(v: Any) -> str:
    """A short description of a guarded value for messages."""
    if _freeze(v) is not None:
        r = repr(v)
        return r if len(r) <= 60 else r[:57] + "..."
    return f"a {type(v).__name__}"


def _first_failed(guards: list[tuple[Any, str, Any]]) -> str | None:
    for obj, attr, val in guards:
        now = getattr(obj, attr, _MISSING)
        if now is val:
            continue
        if isinstance(val, (bool, int, float, str)) and type(now) is type(val) and now == val:
            continue
        return f"{type(obj).__name__}.{attr} changed (was {show(val)})"
    return None


def _values_changed(guards: list[tuple[str, Callable[[], Any], Any]]) -> str | None:
    for what, getter, val in guards:
        now = getter()
        if now is val or same_value(val, now):
            continue
        return f"{what} changed (was {show(val)})"
    return None


def _containers_changed(guards: list[tuple[Any, str, Any]]) -> str | None:
    for m, name, frozen in guards:
        now = m.__dict__.get(name, _MISSING)
        if _freeze(now) != frozen:
            return f"{type(m).__name__}.{name} changed (was {show(_unfreeze(frozen))})"
    return None


def _unfreeze(f: Any) -> Any:
    t, v = f
    if t is tuple or t is list:
        return t(_unfreeze(x) for x in v)
    if t is dict:
        return {_unfreeze(k): _unfreeze(x) for k, x in v}
    if t is set or t is frozenset:
        return t(_unfreeze(x) for x in v)
    return v


def _tables(m: Any) -> list[tuple[dict, tuple, tuple]]:
    """(table, names, values) of a module's ``__dict__`` and member tables."""
    d = m.__dict__
    return [(t, tuple(t), tuple(t.values())) for t in (d, *(d[k] for k in _MODULE_TABLES if k in d))]


def modules_changed(snapshots: list[list[Any]]) -> str | None:
    """None when every snapshotted module holds the same objects (or equal
    plain values), else what changed first.

    A module whose version did not move since its snapshot was last verified
    costs one comparison. Otherwise its tables are compared: one length and
    one identity comparison per entry, done in C (``map``), and entry by
    entry only for a table that differs; when every difference is an equal
    plain value (``m.p = 0.5`` again), the snapshot is refreshed.
    """
    for snap in snapshots:
        cell = snap[0]
        if cell[0] == snap[1]:
            continue
        m = snap[2]
        fresh = False
        for t, names, vals in snap[3]:
            if len(t) == len(names) and all(map(is_, map(t.get, names), vals)):
                continue
            why = _table_changed(m, t, names, vals)
            if why is not None:
                return why
            fresh = True
        if fresh:
            snap[3] = _tables(m)
        if snap[1] != -1:
            snap[1] = cell[0]
    return None


def _table_changed(m: Any, t: dict, names: tuple, vals: tuple) -> str | None:
    owner = type(m).__name__
    kind = next((k for k in _MODULE_TABLES if m.__dict__.get(k) is t), None)
    what = _TABLE_WHAT.get(kind or "", "attribute")
    for name, val in zip(names, vals, strict=True):
        now = t.get(name, _MISSING)
        if now is _MISSING:
            return f"{owner} {what} {name!r} was removed" if kind else f"{owner}.{name} was deleted"
        if not same_value(val, now):
            if kind in ("_forward_pre_hooks", "_forward_hooks"):
                return f"{owner} {what}s changed"
            return f"{owner}.{name} changed (was {show(val)})"
    for name in t:
        if name not in names:
            if kind in ("_forward_pre_hooks", "_forward_hooks"):
                return f"{owner} {what}s changed"
            return f"{owner} {what} {name!r} was added" if kind else f"{owner}.{name} was set"
    return None


_MISSING = object()


def tensor_key(t: Any) -> tuple | None:
    """Identifies a tensor's memory (device, address, shape, strides, dtype);
    None for what is not a tensor. Tensors a graph reads come back from it as
    new Python objects over the same memory, so names are matched by this."""
    if not isinstance(t, _core.Tensor):
        return None
    try:
        return (str(t.device), t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype))
    except Exception:  # noqa: BLE001 - a tensor with no address (a GPU buffer) has no key
        return None


def backward_region(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (``Tensor.backward``, ``autograd.grad``) with the ops it records
    while a graph is captured marked as the backward region."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        st = current()
        if st is None:
            return fn(*args, **kwargs)
        st.regions.append("backward")
        try:
            return fn(*args, **kwargs)
        finally:
            st.regions.pop()

    return wrapper


def install() -> None:
    """Mark the ops ``Tensor.backward`` records while capturing (see :func:`backward_region`)."""
    if not getattr(_core.Tensor.backward, "_fg_region", False):
        method = backward_region(_core.Tensor.backward)
        method._fg_region = True  # type: ignore[attr-defined]
        _core.Tensor.backward = method  # type: ignore[method-assign]


def current() -> TraceState | None:
    """The trace state of this thread's capture, or None when not capturing
    (also while the capture is paused by :func:`suspended`: what runs then is
    eager work, which must not register guards, regions or slots with it)."""
    st = getattr(_local, "state", None)
    if st is None or not _core._trace_recording():
        return None
    return st


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
    """Whether what this thread runs now is recorded into a graph (a capture
    is open and not paused by :func:`suspended`)."""
    return _core._trace_recording()


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Run the body on real tensors in the middle of a capture (no recording).

    The capture is paused: ops, ``backward()``, ``.grad`` and optimizer steps
    in the body run eagerly, exactly as with no capture open. For library code that creates persistent state while being traced (an
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
