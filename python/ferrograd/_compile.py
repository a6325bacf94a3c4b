"""``fg.compile``: trace a function once per input signature, then run the graph.

The first call with a new *signature* (each tensor argument's dtype, shape,
``requires_grad`` and device; every non-tensor argument's value; grad mode
and the autocast state)
runs the function once on captured stand-ins, which records every op into a
graph (forward, a ``loss.backward()`` inside it, an optimizer step: one
graph), then runs that graph on the real arguments. Later calls with the
same signature run the graph directly. Python code in the function runs
only while tracing: its control flow is decided then, and using a tensor's
value in Python (``bool(t)``, ``t.item()``) is an error that names the line
(use :func:`ferrograd.cond` / :func:`ferrograd.while_loop`, or
``fallback="eager"``).

State read through closures and objects is not frozen: parameters,
buffers and optimizer state are read by reference; optimizer
hyperparameters that are scalar slots (learning rates, momentum, weight
decay, betas) are read at every call; what a trace bakes in is guarded —
a change retraces (``explain=True`` says why):

- every module the trace used (called, a member read, or reached from a
  global, a closure variable or an argument): its attributes
  (``training``, ``Dropout.p``, ``LeakyReLU.negative_slope``, a user
  module's ``self.k``; plain data by value, other objects by identity) and
  its parameter, buffer, submodule and hook tables (by identity); checked
  only for modules whose version moved since the last check;
- optimizer options that decide the step's structure (SGD's ``nesterov``
  and whether momentum is 0, Adam's ``amsgrad``, ``maximize``...) and the
  identity of optimizer state;
- the identity of the globals and closure variables the function names;
- which leaves had a ``.grad`` where the trace looked: a backward traced
  while a gradient was None sets it (eager adds to it once one is there),
  an optimizer step skips a parameter without one, so a call where one of
  them has appeared (or a gradient the trace read has gone) retraces.
  ``zero_grad()`` inside the function does not look (it sets them all).

A signature keeps one graph per guarded state (up to ``_PER_SIGNATURE``),
so switching back (``model.train()`` after ``model.eval()``) reuses the
earlier trace.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _capture, _core
from ._grad_mode import is_grad_enabled

Tensor = _core.Tensor

__all__ = ["compile", "CompiledFunction", "CompileStats", "set_graph_passes"]

#: Traces after which every further trace warns (explaining why it happens).
_RETRACE_WARN = 8
#: Entries kept per signature (different guarded states: train/eval, ...).
_PER_SIGNATURE = 8

#: The graph passes ``fg.compile`` and ``fg.Session`` run unless told otherwise
#: (see :func:`set_graph_passes`). ``FG_GRAPH_PASSES=off`` starts with all off.
PASSES = ("dce", "cse", "fold", "simplify", "fuse", "epilogue", "inplace", "parallel")
_default_passes: dict[str, bool] = {
    p: os.environ.get("FG_GRAPH_PASSES", "on").lower() not in ("off", "none", "0") for p in PASSES
}


def set_graph_passes(**flags: bool) -> dict[str, bool]:
    """Switch graph passes on or off for graphs traced from now on; returns the previous settings.

    ``fg.set_graph_passes(fuse=False)``; names: ``dce``, ``cse``, ``fold``,
    ``simplify``, ``fuse``, ``epilogue`` (inference graphs on the CPU:
    ``relu`` and 2×2 max pooling computed inside the convolution before
    them; ``linear`` on a weight packed once, with its activation and a
    residual ``add`` applied as the product stores), and the plan's ``inplace`` (results written over
    dying buffers) and ``parallel`` (independent branches side by side).
    ``fg.set_graph_passes(all=False)`` turns every pass off.
    """
    old = dict(_default_passes)
    if "all" in flags:
        v = bool(flags.pop("all"))
        for p in PASSES:
            _default_passes[p] = v
    for k, v in flags.items():
        if k not in _default_passes:
            raise ValueError(f"unknown graph pass {k!r}; passes: {', '.join(PASSES)}")
        _default_passes[k] = bool(v)
    return old


def optimize(graph: Any, passes: dict[str, bool] | None = None) -> tuple[Any, list[dict]]:
    """Run the enabled passes on a captured graph; returns (graph, reports)."""
    flags = dict(_default_passes)
    flags.update(passes or {})
    return graph.optimize(**{k: flags[k] for k in PASSES}, verify=_VERIFY)


#: Verify the IR after every pass (tests and debugging: ``FG_GRAPH_VERIFY=1``).
_VERIFY = os.environ.get("FG_GRAPH_VERIFY", "0") not in ("0", "")


@dataclass
class CompileStats:
    """Counters of a compiled function (``f.stats``)."""

    calls: int = 0
    traces: int = 0
    #: Signatures that could not be captured and run eagerly (``fallback="eager"``).
    graph_breaks: int = 0
    #: Kernels the last call's graph runs (its op nodes other than views).
    kernels_per_call: int = 0
    #: Buffers the last call's graph allocates per run (views and in-place writes excluded).
    allocations_per_call: int = 0
    #: Graph nodes of each trace.
    nodes: list[int] = field(default_factory=list)
    #: Seconds spent capturing (tracing + building) per trace.
    capture_seconds: list[float] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Argument trees
# ---------------------------------------------------------------------------


class _Leaf:
    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i

    def __repr__(self) -> str:
        return f"<tensor {self.i}>"


def _flatten(obj: Any, out: list[Tensor]) -> Any:
    """Replace tensors in nested lists/tuples/dicts by ``_Leaf`` markers (collected in ``out``)."""
    if isinstance(obj, Tensor):
        out.append(obj)
        return _Leaf(len(out) - 1)
    if isinstance(obj, (list, tuple)):
        items = [_flatten(o, out) for o in obj]
        return type(obj)(items) if not hasattr(obj, "_fields") else type(obj)(*items)
    if isinstance(obj, dict):
        return {k: _flatten(v, out) for k, v in obj.items()}
    return obj


def _arg_names(fn: Callable[..., Any], args: tuple, kwargs: dict, n: int) -> list[str] | None:
    """The name of each tensor argument, as the graph's inputs list them: the
    parameter's (``xb``), indexed within a list or dict (``xs[1]``, ``batch['x']``);
    None where the parameters cannot be told (the drawings then number them)."""
    owner = getattr(fn, "__self__", None)
    if getattr(fn, "__name__", "") == "__call__" and hasattr(owner, "forward"):
        fn = owner.forward  # a compiled module: its forward's parameter names
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    names: list[str] = []

    def walk(obj: Any, name: str) -> None:
        if isinstance(obj, Tensor):
            names.append(name)
        elif isinstance(obj, (list, tuple)):
            for k, o in enumerate(obj):
                walk(o, f"{name}[{k}]")
        elif isinstance(obj, dict):
            for k, o in obj.items():
                walk(o, f"{name}[{k!r}]")

    for name, value in bound.arguments.items():
        walk(value, name)
    return names if len(names) == n else None


def _unflatten(tree: Any, leaves: list[Any]) -> Any:
    if isinstance(tree, _Leaf):
        return leaves[tree.i]
    if isinstance(tree, (list, tuple)):
        items = [_unflatten(o, leaves) for o in tree]
        return type(tree)(items) if not hasattr(tree, "_fields") else type(tree)(*items)
    if isinstance(tree, dict):
        return {k: _unflatten(v, leaves) for k, v in tree.items()}
    return tree


def _modes() -> tuple[bool, Any, Any, Any]:
    """The state a captured graph depends on besides its arguments: the grad mode,
    the autocast dtypes (CPU, GPU) and the default floating dtype."""
    return (
        is_grad_enabled(),
        _core._get_autocast(False),
        _core._get_autocast(True),
        _core.get_default_dtype(),
    )


def _key_of(obj: Any, dynamic_dims: dict[int, list[int]], tensors: list[Tensor]) -> Hashable:
    """The part of the cache key for one argument (tensors by type, values by value)."""
    if isinstance(obj, Tensor):
        i = len(tensors)
        tensors.append(obj)
        shape = list(obj.shape)
        for d in dynamic_dims.get(i, ()):
            shape[d] = None
        return ("T", obj.dtype.name, tuple(shape), obj.requires_grad, str(obj.device), obj.is_leaf)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_key_of(o, dynamic_dims, tensors) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _key_of(v, dynamic_dims, tensors)) for k, v in obj.items()))
    if obj is None or isinstance(obj, (bool, int, float, str, bytes, complex)):
        return (type(obj).__name__, obj)
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return ("obj", type(obj).__qualname__, id(obj))


_SCALAR_KEYS = frozenset({"bool", "int", "float", "str", "bytes", "complex", "NoneType"})
_TENSOR_FIELDS = ("dtype", "shape", "requires_grad", "device", "is_leaf")


def _parameters(fn: Callable) -> Mapping[str, Any]:
    """``fn``'s parameters (a compiled module's: its forward's); empty when unknown."""
    import inspect

    from .nn.modules.module import Module

    target = fn
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, Module) and getattr(fn, "__name__", "") == "__call__":
        target = owner.forward
    try:
        return inspect.signature(target).parameters
    except (TypeError, ValueError):
        return {}


def _positional_names(fn: Callable) -> list[str]:
    """Names of ``fn``'s positional parameters (a compiled module's: its forward's)."""
    names = []
    for p in _parameters(fn).values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


def _scalar_positions(fn: Callable, names: list[str], scalars: Any) -> tuple[frozenset[int], frozenset[str]]:
    """The positions and names of the arguments declared symbolic scalars (see :func:`compile`)."""
    if isinstance(scalars, (str, int)):
        scalars = (scalars,)
    positions: set[int] = set()
    keywords: set[str] = set()
    for s in scalars:
        if isinstance(s, bool) or not isinstance(s, (str, int)):
            raise TypeError(f"scalars names arguments by name or position, got {s!r}")
        if isinstance(s, int):
            if s < 0:
                raise ValueError(f"scalars: argument position {s} is negative")
            positions.add(s)
            if s < len(names):
                keywords.add(names[s])
            continue
        if s in names:
            positions.add(names.index(s))
            keywords.add(s)
            continue
        if s not in _parameters(fn):
            raise ValueError(
                f"scalars: {getattr(fn, '__name__', 'the function')} has no argument {s!r}"
                + (f" (arguments: {', '.join(names)})" if names else "")
            )
        keywords.add(s)
    return frozenset(positions), frozenset(keywords)


def _is_tensor_key(k: Any) -> bool:
    return isinstance(k, tuple) and len(k) == 6 and k[0] == "T"


def _is_seq_key(k: Any) -> bool:
    return (
        isinstance(k, tuple)
        and len(k) == 2
        and isinstance(k[0], str)
        and k[0] not in _SCALAR_KEYS
        and k[0] != "id"
        and isinstance(k[1], tuple)
    )


def _show_shape(shape: tuple) -> str:
    """``(8, 4)``; a dynamic dimension shows as ``?``."""
    dims = ["?" if d is None else str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _show_key(k: Any, other: Any = None) -> str:
    """One argument's cache key, readably."""
    if _is_tensor_key(k):
        return f"a {k[1]} tensor of shape {_show_shape(k[2])}"
    if isinstance(k, tuple) and len(k) == 2 and k[0] in _SCALAR_KEYS:
        typed = isinstance(other, tuple) and len(other) == 2 and other[0] in _SCALAR_KEYS and other[0] != k[0]
        return f"{k[1]!r} ({k[0]})" if typed else repr(k[1])
    if isinstance(k, tuple) and k and k[0] in ("id", "obj"):
        return f"a {k[1]} object" if k[0] == "obj" else "an unhashable object"
    if _is_seq_key(k):
        return f"a {k[0]} of {len(k[1])}"
    return repr(k)


def _describe_value(old: Any, new: Any) -> str:
    """How one argument's key changed: ``[1]['x']: shape (2, 3) -> (4, 3)``."""
    if _is_tensor_key(old) and _is_tensor_key(new):
        parts = []
        for name, a, b in zip(_TENSOR_FIELDS, old[1:], new[1:], strict=True):
            if a != b:
                if name == "shape":
                    a, b = _show_shape(a), _show_shape(b)
                parts.append(f"{name} {a} -> {b}")
        return ": tensor " + ", ".join(parts)
    if _is_seq_key(old) and _is_seq_key(new) and old[0] == new[0] and len(old[1]) == len(new[1]):
        for i, (a, b) in enumerate(zip(old[1], new[1], strict=True)):
            if a != b:
                if old[0] == "dict":
                    # items are (key, value key) pairs
                    if a[0] != b[0]:
                        break
                    return f"[{a[0]!r}]" + _describe_value(a[1], b[1])
                return f"[{i}]" + _describe_value(a, b)
    if isinstance(old, tuple) and isinstance(new, tuple) and old[:1] == ("obj",) and old[:2] == new[:2]:
        return f": another {old[1]} object"
    return f": {_show_key(old, new)} -> {_show_key(new, old)}"


def _describe_change(old: Hashable, new: Hashable, names: list[str] | None = None) -> str:
    """What differs between two cache keys, for ``explain=True``: the argument
    (by position and name, or keyword) and the change, nested paths included."""
    if old == new:
        return "nothing (a guard failed)"
    try:
        (okey, ograd), (nkey, ngrad) = old, new
        (_, ((_, oargs), (_, okw))), (_, ((_, nargs), (_, nkw))) = okey, nkey
    except (TypeError, ValueError):
        return f"{old!r} -> {new!r}"
    if ograd[0] != ngrad[0]:
        return (
            f"grad mode: {'enabled' if ograd[0] else 'disabled'} -> {'enabled' if ngrad[0] else 'disabled'}"
        )
    for dev, o, n in (("cpu", ograd[1], ngrad[1]), ("gpu", ograd[2], ngrad[2])):
        if o != n:
            return f"autocast on {dev}: {o or 'off'} -> {n or 'off'}"
    names = names or []
    if len(oargs) != len(nargs):
        return f"number of positional arguments: {len(oargs)} -> {len(nargs)}"
    for i, (a, b) in enumerate(zip(oargs, nargs, strict=True)):
        if a != b:
            label = f"argument {i}" + (f" (`{names[i]}`)" if i < len(names) else "")
            return label + _describe_value(a, b)
    okw, nkw = dict(okw), dict(nkw)
    if okw.keys() != nkw.keys():
        return f"keyword arguments: {sorted(okw)} -> {sorted(nkw)}"
    for k in okw:
        if okw[k] != nkw[k]:
            return f"keyword argument `{k}`" + _describe_value(okw[k], nkw[k])
    return f"{old!r} -> {new!r}"


# ---------------------------------------------------------------------------
# Guards on what the function reads from Python
# ---------------------------------------------------------------------------


def _free_names(fn: Callable) -> list[tuple[str, Any]]:
    """(name, getter) for the globals and closure cells the function's own code reads."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    out: list[tuple[str, Any]] = []
    g = getattr(fn, "__globals__", {})
    for name in code.co_names:
        if name in g:
            out.append((f"global {name}", (g, name)))
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        out.append((f"closure variable {name}", cell))
    return out


def _read(src: Any) -> Any:
    if isinstance(src, tuple):
        d, name = src
        return d.get(name, _capture._MISSING)
    try:
        return src.cell_contents
    except ValueError:  # empty cell
        return _capture._MISSING


def _snapshot(names: list[tuple[str, Any]]) -> list[tuple[str, Any, Any]]:
    """Identity snapshots of what the names refer to now."""
    return [(n, src, _read(src)) for n, src in names]


def _changed(snap: list[tuple[str, Any, Any]]) -> str | None:
    for n, src, val in snap:
        now = _read(src)
        if now is not val:
            if isinstance(val, (int, float, str, bool, bytes)) and type(now) is type(val) and now == val:
                continue
            return f"{n} now refers to another object"
    return None


_NO_LIFT: frozenset[int] = frozenset()


@functools.cache
def _module_class() -> type:
    """``nn.Module`` (imported on first use: ``nn`` imports this module)."""
    from .nn.modules.module import Module

    return Module


def _raise_site(e: BaseException) -> str:
    """``file:line`` of the innermost frame outside ferrograd in ``e``'s traceback."""
    tb = e.__traceback__
    site = "an unknown line"
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not fn.startswith(_capture._PKG_DIR):
            site = f"{fn}:{tb.tb_lineno}"
        tb = tb.tb_next
    return site


# ---------------------------------------------------------------------------
# Compiled functions
# ---------------------------------------------------------------------------


class _Entry:
    """One traced signature: the graph, how to rebuild outputs, what to re-check."""

    __slots__ = (
        "graph",
        "raw",
        "reports",
        "out_tree",
        "state",
        "snapshot",
        "eager",
        "key",
        "module_version",
        "n_args",
        "allocations",
        "kernels",
        "rebind_epoch",
        "grad_guarded",
        "guarded",
        "hooked",
        "scalared",
    )

    def __init__(self) -> None:
        self.graph: Any = None
        self.raw: Any = None
        self.reports: list[dict] = []
        self.out_tree: Any = None
        self.state: _capture.TraceState | None = None
        self.snapshot: list = []
        self.eager = False
        self.key: Hashable = None
        # What the state asks of each call (set once traced; all False: nothing).
        self.guarded = False  # guards on modules, attributes or values to re-check
        self.hooked = False  # callables to run before or after the graph
        self.scalared = False  # scalar slots to read
        self.module_version = -1
        self.n_args = 0
        self.grad_guarded = False
        self.allocations: int | None = None
        self.kernels: int | None = None
        #: ``_core._rebind_epoch()`` when the graph was captured (or last found current).
        self.rebind_epoch = 0


class CompiledFunction:
    """A function run as captured graphs (see :func:`compile`)."""

    def __init__(
        self,
        fn: Callable,
        *,
        dynamic: bool | dict[int, list[int]] = False,
        fallback: str = "error",
        debug: bool = False,
        explain: bool = False,
        passes: dict[str, bool] | None = None,
        scalars: tuple[str | int, ...] | list[str | int] = (),
    ) -> None:
        if fallback not in ("error", "eager"):
            raise ValueError(f"fallback must be 'error' or 'eager', got {fallback!r}")
        self.fn = fn
        self.dynamic = dynamic
        self.fallback = fallback
        self.debug = debug
        self.explain = explain
        self.passes = dict(passes or {})
        for k in self.passes:
            if k not in PASSES:
                raise ValueError(f"unknown graph pass {k!r}; passes: {', '.join(PASSES)}")
        self.stats = CompileStats()
        #: Entries by signature; several when traced in different guarded states.
        self._cache: dict[Hashable, list[_Entry]] = {}
        self._last_key: Hashable = None
        self._n_traced = 0
        self._names = _free_names(fn)
        self._arg_names = _positional_names(fn)
        self._scalars = _scalar_positions(fn, self._arg_names, scalars)
        self._has_scalars = bool(self._scalars[0] or self._scalars[1])
        # The armed fast path (see `_arm`): the graph's `_call`, which runs
        # when the call's tensors match the entry it was armed for, and the
        # output tree when the function returns more than one tensor.
        self._fast: Callable | None = None
        self._fast_tree: Any = None
        self._fast_entry: _Entry | None = None
        functools.update_wrapper(self, fn)

    def _lift(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, frozenset[int]]:
        """``args``/``kwargs`` with the numbers passed as declared symbolic
        scalars made 0-d tensors, and the ids of those tensors."""
        if not self._has_scalars:
            return args, kwargs, _NO_LIFT
        from ._core import Tensor

        device = next(
            (a.device for a in (*args, *kwargs.values()) if isinstance(a, Tensor)),
            None,
        )

        made: list[Tensor] = []
        # float64 holds a Python float exactly; the GPU has float32 only.
        float_dtype = _core.float32 if device is not None and device.type == "gpu" else _core.float64

        def lift(v: Any) -> Any:
            if isinstance(v, bool):
                dtype = _core.bool
            elif isinstance(v, int):
                dtype = _core.int64
            elif isinstance(v, float):
                dtype = float_dtype
            else:
                return v
            t = _core.tensor(v, dtype=dtype, device=device)
            made.append(t)
            return t

        positions, names = self._scalars
        args = tuple(lift(a) if i in positions else a for i, a in enumerate(args))
        kwargs = {k: lift(v) if k in names else v for k, v in kwargs.items()}
        return args, kwargs, frozenset(id(t) for t in made)

    def _name(self) -> str:
        """The compiled function's name for messages (a compiled module's class)."""
        owner = getattr(self.fn, "__self__", None)
        if owner is not None and getattr(self.fn, "__name__", "") == "__call__":
            return type(owner).__name__
        return str(getattr(self.fn, "__qualname__", self.fn))

    # -- signatures -------------------------------------------------------

    def _dyn_dims(self, tensors: list[Tensor], lifted: frozenset[int] = frozenset()) -> dict[int, list[int]]:
        if self.dynamic is False or self.dynamic is None:
            return {}
        if self.dynamic is True:
            return {i: [0] for i, t in enumerate(tensors) if t.ndim >= 1}
        # The user counts the tensors passed, not the numbers made 0-d tensors (`scalars`).
        real = [i for i, t in enumerate(tensors) if id(t) not in lifted]
        return {
            real[int(k)] if int(k) < len(real) else int(k): list(v) for k, v in dict(self.dynamic).items()
        }

    @staticmethod
    def _symbols(tensors: list[Tensor], dyn: dict[int, list[int]]) -> dict[int, list[tuple[int, str]]]:
        """Symbol names for the dynamic dims: dims of equal size share a symbol."""
        names: dict[int, str] = {}
        out: dict[int, list[tuple[int, str]]] = {}
        for i, dims in dyn.items():
            for d in dims:
                size = tensors[i].shape[d]
                names.setdefault(size, f"s{len(names)}")
                out.setdefault(i, []).append((d, names[size]))
        return out

    def _signature(
        self, args: tuple, kwargs: dict, lifted: frozenset[int] = frozenset()
    ) -> tuple[Hashable, list[Tensor], dict[int, list[int]]]:
        if not kwargs and (self.dynamic is False or self.dynamic is None):
            # The common call, tensors only: the key `_key_of` builds, made in one Rust call.
            leaves = _core._tensor_signature(args)
            if leaves is not None:
                return (("tuple", (("tuple", leaves), ("dict", ()))), _modes()), list(args), {}
        tensors: list[Tensor] = []
        flat: list[Tensor] = []
        _flatten((args, kwargs), flat)
        dyn = self._dyn_dims(flat, lifted)
        key = (_key_of((args, kwargs), dyn, tensors), _modes())
        return key, tensors, dyn

    # -- calls ------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not kwargs:
            # The cheapest call: an entry that checks nothing but its arguments'
            # signature and the grad mode, checked (and run) in one Rust call.
            outs = fast(args)
            if outs is not None:
                self.stats.calls += 1
                tree = self._fast_tree
                return outs if tree is None else _unflatten(tree, outs)
        if self.debug or _core._trace_recording():
            # Debugging, or called from another function being traced: run inline
            # (its ops are recorded into that graph). With a capture open but
            # paused, it runs as usual (a first call captures its graph apart).
            return self.fn(*args, **kwargs)
        self.stats.calls += 1
        if not kwargs and not self._has_scalars and (self.dynamic is False or self.dynamic is None):
            # The common call, tensors only, whose graph is cached: the key that
            # `_signature` makes for it, and the most recent entry checked first.
            leaves = _core._tensor_signature(args)
            if leaves is not None:
                entries = self._cache.get((("tuple", (("tuple", leaves), ("dict", ()))), _modes()))
                if entries:
                    entry = entries[0]
                    if self._stale(entry, args) is None:
                        if entry.eager:
                            return self.fn(*args)
                        out = self._run(entry, args)
                        self._arm(entry, args)
                        return out
        largs, lkwargs, lifted = self._lift(args, kwargs)
        key, tensors, dyn = self._signature(largs, lkwargs, lifted)
        entry, why = self._lookup(key, tensors)
        if entry is None:
            entry = self._trace(key, largs, lkwargs, tensors, dyn, why)
        if entry.eager:
            self._fast = None
            return self.fn(*args, **kwargs)
        out = self._run(entry, tensors)
        if kwargs or self._has_scalars or not (self.dynamic is False or self.dynamic is None):
            self._fast = None
        elif _core._tensor_signature(args) is not None:
            self._arm(entry, args)
        else:
            self._fast = None
        return out

    def _arm(self, entry: _Entry, args: tuple) -> None:
        """Let calls with tensors like ``args`` (all tensors; the entry's key)
        skip the lookup and run ``entry``'s graph directly, where the entry has
        nothing else to check; else disarm."""
        if (
            self.debug
            or entry.guarded
            or entry.grad_guarded
            or entry.hooked
            or entry.scalared
            or entry.snapshot
            or entry.n_args != len(args)
        ):
            self._fast = None
            return
        if self._fast is not None and self._fast_entry is entry:
            return
        tree = entry.out_tree
        single = tree.i if type(tree) is _Leaf else None
        entry.graph._arm_call(args, entry.rebind_epoch, single)
        self._fast_entry = entry
        self._fast_tree = None if single is not None else tree
        self._fast = entry.graph._call

    def _lookup(self, key: Hashable, tensors: list[Tensor]) -> tuple[_Entry | None, str | None]:
        """The cached entry of this signature whose guards hold (most recently
        used first), or None and why the first one's guards failed.

        A signature keeps one entry per guarded state it was traced in (up to
        ``_PER_SIGNATURE``, least recently used dropped first), so flipping
        between states (``model.train()`` / ``model.eval()``, two values of a
        hyperparameter) reuses the earlier traces.
        """
        entries = self._cache.get(key)
        if not entries:
            return None, None
        first = entries[0]
        why = self._stale(first, tensors)
        if why is None:
            return first, None
        for i in range(1, len(entries)):
            e = entries[i]
            if self._stale(e, tensors) is None:
                del entries[i]
                entries.insert(0, e)
                return e, None
        return None, why

    def _stale(self, entry: _Entry, tensors: Sequence[Tensor]) -> str | None:
        if entry.grad_guarded:
            # A backward that set a .grad it saw as None would overwrite one
            # set since (eager adds to it); an optimizer step would skip it.
            why = entry.graph._grad_guard(tensors[: entry.n_args])
            if why is not None:
                return why

        if entry.guarded:
            Module = _module_class()
            moved = entry.module_version != Module._structure_version
            why = entry.state.guards_hold(modules=moved)
            if why is not None:
                return why
            entry.module_version = Module._structure_version
        epoch = _core._rebind_epoch()
        if epoch != entry.rebind_epoch:
            # Some tensor's data was rebound (``p.data = u``, ``Module.to()``):
            # a graph reading one of those tensors by reference reads its old data.
            if entry.graph is not None and entry.graph._refs_rebound_since(entry.rebind_epoch):
                return "the .data of a tensor it reads was reassigned (e.g. by Module.to())"
            entry.rebind_epoch = epoch
        return _changed(entry.snapshot) if entry.snapshot else None

    def _run(self, entry: _Entry, tensors: Sequence[Tensor]) -> Any:
        st = entry.state
        if entry.hooked:
            for f in st.before_run:
                f()
        n = entry.n_args
        outs = entry.graph.run(
            tensors if len(tensors) == n else tensors[:n], st.scalar_values() if entry.scalared else []
        )
        if entry.hooked:
            for f in st.after_run:
                f()
        if entry.kernels is None:
            # Views (reshape, transpose, ...) launch no kernel.
            entry.kernels = sum(1 for n in entry.graph.nodes() if n["effect"] != "view")
            entry.allocations = entry.graph.memory_plan(tensors[: entry.n_args])["allocations"]
        stats = self.stats
        stats.kernels_per_call = entry.kernels
        stats.allocations_per_call = entry.allocations
        tree = entry.out_tree
        return outs[tree.i] if type(tree) is _Leaf else _unflatten(tree, outs)

    def _trace(
        self,
        key: Hashable,
        args: tuple,
        kwargs: dict,
        tensors: list[Tensor],
        dyn: dict[int, list[int]],
        why: str | None,
    ) -> _Entry:
        import time

        from .nn.modules.module import Module

        self._n_traced += 1
        if self.explain or self._n_traced % _RETRACE_WARN == 0:
            if self._last_key is None:
                reason = "first call"
            elif why is not None:
                reason = why
            elif key in self._cache:
                reason = "a guard failed"
            else:
                reason = "signature changed: " + _describe_change(self._last_key, key, self._arg_names)
            msg = f"fg.compile({self._name()}): tracing ({reason})"
            if self.explain:
                print(msg)
            if self._n_traced % _RETRACE_WARN == 0:
                warnings.warn(
                    f"{msg}; {self._n_traced} traces so far — pass dynamic=True "
                    "for varying sizes, pass values that change as tensor arguments, "
                    "or explain=True to see what changes",
                    stacklevel=3,
                )
        self._last_key = key
        t0 = time.perf_counter()
        entry = _Entry()
        entry.key = key
        entry.snapshot = _snapshot(self._names)
        entry.module_version = Module._structure_version
        entry.rebind_epoch = _core._rebind_epoch()
        state = _capture.TraceState()
        # Modules the function reaches directly (its globals and closure
        # variables, a module argument such as a compiled method's ``self``)
        # are guarded like the modules it calls, even when it only reads one
        # of their plain attributes.
        for _, src in self._names:
            v = _read(src)
            if isinstance(v, Module):
                state.use_module(v)
        for v in (*args, *kwargs.values()):
            if isinstance(v, Module):
                state.use_module(v)
        _core._trace_begin()
        try:
            with _capture.capturing(state):
                syms = self._symbols(tensors, dyn)
                captured = [_core._trace_arg(t, i, syms.get(i, []), None) for i, t in enumerate(tensors)]
                flat: list[Tensor] = []
                tree = _flatten((args, kwargs), flat)
                state.arg_names = _arg_names(self.fn, args, kwargs, len(flat))
                cargs, ckwargs = _unflatten(tree, captured)
                out = self.fn(*cargs, **ckwargs)
                out_flat: list[Tensor] = []
                out_tree = _flatten(out, out_flat)
                state.finish()
            graph = _core._trace_end(out_flat)
        except _core.TraceError as e:
            _core._trace_abort()
            if self.fallback == "eager":
                self.stats.graph_breaks += 1
                if self.explain:
                    print(f"fg.compile({self._name()}): graph break, runs eagerly: {e}")
                entry.eager = True
                self._store(key, entry)
                return entry
            where = _raise_site(e)
            raise _core.TraceError(f"{e} — at {where}, while tracing {self._name()}") from None
        except BaseException:
            _core._trace_abort()
            raise
        entry.raw = graph
        entry.graph, entry.reports = optimize(graph, self.passes)
        entry.grad_guarded = entry.graph._has_grad_guards
        entry.out_tree = out_tree
        entry.state = state
        entry.guarded = bool(
            state.guards or state.value_guards or state.container_guards or state.module_snapshots
        )
        entry.hooked = bool(state.before_run or state.after_run)
        entry.scalared = bool(state.scalars)
        entry.n_args = len(tensors)
        self.stats.traces += 1
        self.stats.nodes.append(graph.num_nodes)
        self.stats.capture_seconds.append(time.perf_counter() - t0)
        self._store(key, entry)
        return entry

    def _store(self, key: Hashable, entry: _Entry) -> None:
        entries = self._cache.setdefault(key, [])
        entries.insert(0, entry)
        del entries[_PER_SIGNATURE:]

    # -- inspection --------------------------------------------------------

    def graph(self, *args: Any, **kwargs: Any):
        """The graph captured for these arguments (tracing it if needed, without running it)."""
        from .graph import Graph

        args, kwargs, lifted = self._lift(args, kwargs)
        key, tensors, dyn = self._signature(args, kwargs, lifted)
        entry, why = self._lookup(key, tensors)
        if entry is None:
            entry = self._trace(key, args, kwargs, tensors, dyn, why)
        if entry.eager:
            raise _core.TraceError("this signature could not be captured and runs eagerly (fallback='eager')")
        scalars = entry.state.scalar_values if entry.state is not None else None
        return Graph._wrap(
            entry.graph, raw=entry.raw, reports=entry.reports, scalars=scalars, state=entry.state
        )

    def reset(self) -> None:
        """Forget every traced signature."""
        self._fast = self._fast_entry = None
        self._cache.clear()
        self._last_key = None
        self._n_traced = 0

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)


def compile(
    fn: Callable | None = None,
    *,
    dynamic: bool | dict[int, list[int]] = False,
    fallback: str = "error",
    debug: bool = False,
    explain: bool = False,
    passes: dict[str, bool] | None = None,
    scalars: tuple[str | int, ...] | list[str | int] = (),
) -> Any:
    """Compile a function (or a module) into captured graphs.

    Usable as ``@fg.compile``, ``@fg.compile(dynamic=True)`` or
    ``fg.compile(model)`` (which compiles the module's forward and returns
    an object that otherwise behaves like the module).

    - ``dynamic``: ``True`` makes dim 0 of every tensor argument symbolic
      (one graph for every batch size; equal sizes share a symbol), or a
      dict ``{tensor argument index: [dims]}``; ``False`` retraces per shape.
    - ``fallback``: ``"error"`` (default) raises when the function cannot
      be captured (its Python code needs a tensor's value); ``"eager"``
      runs such signatures eagerly and counts them in ``stats.graph_breaks``.
    - ``debug``: run the function eagerly every time (for pdb and prints).
    - ``explain``: print why each trace happens: the argument that changed
      (by position and name, with the path inside nested lists, tuples and
      dicts) or the guard that failed (``LeakyReLU.negative_slope changed
      (was 0.1)``). Every 8th trace also warns.
    - ``passes``: switch graph passes on/off for this function, e.g.
      ``{"cse": False}`` (defaults: :func:`set_graph_passes`).
    - ``scalars``: arguments (by name or position) that are symbolic scalar
      inputs. A Python number passed there becomes an input of the graph (a
      0-d tensor: float64 for a float — float32 on the GPU —, int64 for an
      int, bool for a bool, on the device of the first tensor argument)
      instead of part of the cache key, so a new value runs the same graph.
      With a floating or same-kind tensor the 0-d tensor combines as the
      number would (it keeps the tensor's dtype); a float with an integer
      tensor gives float64 (float32 on the GPU) where a Python float gives
      the default dtype, and a result computed from the scalars alone is a
      0-d tensor. ``dynamic`` indices count the tensors passed, not these.
      Other numbers are baked into the graph and retrace when they change.
    """

    def wrap(f: Callable) -> Any:
        from .nn.modules.module import Module

        opts = dict(
            dynamic=dynamic, fallback=fallback, debug=debug, explain=explain, passes=passes, scalars=scalars
        )
        if isinstance(f, Module):
            return _CompiledModule(f, opts)
        return CompiledFunction(f, **opts)

    if fn is None:
        return wrap
    return wrap(fn)


class _CompiledModule:
    """A module whose calls run its forward as captured graphs; other attributes pass through."""

    def __init__(self, module: Any, opts: dict) -> None:
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_compiled", CompiledFunction(module.__call__, **opts))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def graph(self, *args: Any, **kwargs: Any):
        """The graph captured for these arguments."""
        return self._compiled.graph(*args, **kwargs)

    @property
    def stats(self) -> CompileStats:
        return self._compiled.stats

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._module, name, value)

    def __repr__(self) -> str:
        return f"Compiled({self._module!r})"
