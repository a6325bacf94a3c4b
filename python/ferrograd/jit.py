"""``ferrograd.jit``: PyTorch's ``torch.jit`` surface over captured graphs.

ferrograd has no TorchScript compiler; what scripts ask of ``torch.jit`` is
given by the graphs :func:`ferrograd.compile` captures and
:meth:`ferrograd.Graph.save` writes:

- :func:`trace` captures the function or module on its example inputs. Python
  control flow is decided by those inputs and frozen, as in PyTorch: where the
  code reads a tensor's value (``if x.sum() > 0:``, ``t.item()``), the value
  the example inputs gave is baked into the graph and a :class:`TracerWarning`
  says so. Calls with tensors of the example's shapes and dtypes run that graph
  whatever their values. A call with other shapes or dtypes is captured anew
  on its own inputs (the graph for the example inputs is kept; the new one
  freezes the control flow those inputs take). Module state is read by
  reference (training keeps working, ``model.eval()`` after tracing captures
  again in eval mode).
- :func:`script` cannot compile Python to TorchScript; it returns a wrapper
  that runs through ``fg.compile(..., fallback="eager")``: code whose control
  flow depends on tensor values runs eagerly (so it keeps working, as scripting
  promises), the rest as captured graphs. ``.save(path)`` saves the graph of
  the inputs of the last call; before any call, or when the last call could
  only run eagerly, it raises.
- :func:`save` / :func:`load`: the file is a saved graph (safetensors with the
  graph in its metadata, no pickle). :func:`load` returns a
  :class:`LoadedModule`: a callable running the graph for the saved input
  shapes and dtypes, without autograd (inference), whose ``state_dict()`` /
  ``parameters()`` are the graph's own tensors (``load_state_dict`` writes
  them). Training a loaded module is not supported, and its Dropout /
  BatchNorm behaviour is the one it was captured with.
- The decorators (:func:`ignore`, :func:`unused`, :func:`export`) return what
  they decorate (marked); :func:`is_scripting` is always False,
  :func:`is_tracing` is True only while :func:`trace` captures;
  :func:`annotate` returns its value; :func:`fork` runs the function at once
  and :func:`wait` returns its result (as PyTorch's eager mode does);
  :func:`freeze` / :func:`optimize_for_inference` return an eval-mode module
  whose calls run its captured graph under ``no_grad``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

from . import _capture, _core
from ._compile import CompiledFunction
from ._grad_mode import no_grad

Tensor = _core.Tensor
F = TypeVar("F")

__all__ = [
    "Attribute",
    "Final",
    "Future",
    "LoadedModule",
    "RecursiveScriptModule",
    "ScriptFunction",
    "ScriptModule",
    "TracedModule",
    "TracerWarning",
    "annotate",
    "export",
    "fork",
    "freeze",
    "ignore",
    "is_scripting",
    "is_tracing",
    "load",
    "optimize_for_inference",
    "save",
    "script",
    "script_if_tracing",
    "trace",
    "trace_module",
    "unused",
    "wait",
]


class TracerWarning(Warning):
    """A trace baked a Python value computed from a tensor into the graph."""


_tracing = 0


def is_tracing() -> bool:
    """True while :func:`trace` captures a function (its example run included)."""
    return _tracing > 0


def is_scripting() -> bool:
    """Always False: ferrograd runs scripted code as Python (see :func:`script`)."""
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    """Return ``the_value`` (a type hint for TorchScript; nothing to do here)."""
    return the_value


def Attribute(value: Any, type: Any) -> Any:  # noqa: A002, N802 - PyTorch's names
    """Return ``value`` (TorchScript's attribute type hint)."""
    return value


def _mark(fn: Any, flag: str) -> Any:
    try:
        setattr(fn, flag, True)
    except (AttributeError, TypeError):
        pass
    return fn


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """``@jit.ignore`` / ``@jit.ignore(drop=True)``: the function stays Python
    (here everything does); returned unchanged, marked ``_jit_ignore``."""
    if callable(drop):
        return _mark(drop, "_jit_ignore")
    return lambda fn: _mark(fn, "_jit_ignore")


def unused(fn: F) -> F:
    """``@jit.unused``: in TorchScript the method is not compiled; here it still
    runs when called (returned unchanged, marked ``_jit_unused``)."""
    return _mark(fn, "_jit_unused")


def export(fn: F) -> F:
    """``@jit.export``: the method is part of the scripted module's interface;
    here every method is (returned unchanged, marked ``_jit_export``)."""
    return _mark(fn, "_jit_export")


def script_if_tracing(fn: F) -> F:
    """Return ``fn``: ferrograd's traces capture it like any other code."""
    return fn


class Future:
    """The result of :func:`fork`: the function already ran (see :func:`fork`)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def wait(self) -> Any:
        """The function's result."""
        return self._value

    def value(self) -> Any:
        """The function's result."""
        return self._value

    def done(self) -> bool:
        """Always True."""
        return True


def fork(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    """Run ``func(*args, **kwargs)`` now and return a :class:`Future` of its result.

    PyTorch runs forked work in parallel only inside TorchScript; in eager
    code (which is what runs here) the call happens at once, and so do its
    exceptions.
    """
    if not callable(func):
        raise TypeError(f"jit.fork: expected a callable, got {type(func).__name__}")
    return Future(func(*args, **kwargs))


def wait(future: Future) -> Any:
    """The result of a :func:`fork`."""
    if not isinstance(future, Future):
        raise TypeError(f"jit.wait: expected a jit.Future (from jit.fork), got {type(future).__name__}")
    return future.wait()


# ---------------------------------------------------------------------------
# Tracing: values read in Python are taken from an eager run of the example
# ---------------------------------------------------------------------------

_VALUE_METHODS = ("__bool__", "__float__", "__int__", "__index__", "item", "tolist")


def _Module() -> Any:  # noqa: N802
    from .nn.modules.module import Module

    return Module


@contextlib.contextmanager
def _patched(make: Callable[[str, Any], Any]) -> Iterator[None]:
    """Replace the Tensor methods that read a value with ``make(name, original)``."""
    originals = {name: Tensor.__dict__[name] for name in _VALUE_METHODS if name in Tensor.__dict__}
    try:
        for name, orig in originals.items():
            setattr(Tensor, name, make(name, orig))
        yield
    finally:
        for name, orig in originals.items():
            setattr(Tensor, name, orig)


def _record_values(fn: Callable, args: tuple, kwargs: dict, module: Any) -> list[tuple[str, Any]]:
    """Run ``fn`` eagerly (no grad, module buffers restored afterwards) and
    list the Python values it read from tensors, in order."""
    seen: list[tuple[str, Any]] = []

    def make(name: str, orig: Any) -> Any:
        def read(self: Any, *a: Any, **k: Any) -> Any:
            v = orig(self, *a, **k)
            seen.append((name, v))
            return v

        return read

    saved = []
    if module is not None:
        saved = [(b, b.clone()) for b in module.buffers()]
    try:
        with no_grad(), _patched(make):
            fn(*args, **kwargs)
    finally:
        with no_grad():
            for b, old in saved:
                b.copy_(old)
    return seen


def _replaying(values: list[tuple[str, Any]], who: str) -> Any:
    """Serve the recorded values to the reads a capture cannot answer (in order)."""
    pos = [0]

    def make(name: str, orig: Any) -> Any:
        def read(self: Any, *a: Any, **k: Any) -> Any:
            i = pos[0]
            pos[0] += 1
            try:
                return orig(self, *a, **k)
            except _core.TraceError:
                if i >= len(values) or values[i][0] != name:
                    raise _core.TraceError(
                        f"jit.trace({who}): the capture read tensor values in another order than "
                        f"the example run did (read {i}: {name}); the function's Python control "
                        "flow cannot be frozen — use jit.script or fg.cond"
                    ) from None
                value = values[i][1]
                warnings.warn(
                    f"jit.trace({who}): a tensor's value is used in Python ({name}, "
                    f"{value!r} on the example inputs); the trace treats it as a constant, so "
                    "calls with other values take the same path",
                    TracerWarning,
                    stacklevel=2,
                )
                return value

        return read

    return _patched(make)


class _TraceCompiled(CompiledFunction):
    """``fg.compile`` whose captures freeze Python control flow on the inputs
    (values read in Python come from an eager run on those inputs)."""

    def __init__(self, fn: Callable, module: Any) -> None:
        super().__init__(fn)
        self._module = module

    def _trace(self, key: Any, args: tuple, kwargs: dict, tensors: list, dyn: dict, why: Any) -> Any:
        global _tracing
        _tracing += 1
        try:
            try:
                return super()._trace(key, args, kwargs, tensors, dyn, why)
            except _core.TraceError:
                pass
            values = _record_values(self.fn, args, kwargs, self._module)
            with _replaying(values, self._name()):
                return super()._trace(key, args, kwargs, tensors, dyn, why)
        finally:
            _tracing -= 1


# ---------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------


def _describe(args: tuple, kwargs: dict) -> str:
    def one(v: Any) -> str:
        if isinstance(v, Tensor):
            return f"{v.dtype}{list(v.shape)}".replace("ferrograd.", "")
        if isinstance(v, (list, tuple)):
            return "(" + ", ".join(one(x) for x in v) + ")"
        return type(v).__name__

    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _encode_tree(tree: Any) -> Any:
    """A captured output tree (``_Leaf`` markers in lists, tuples, dicts) as JSON data."""
    from ._compile import _Leaf

    if isinstance(tree, _Leaf):
        return {"t": tree.i}
    if isinstance(tree, (list, tuple)):
        return {
            type(tree).__name__ if type(tree) in (list, tuple) else "tuple": [_encode_tree(x) for x in tree]
        }
    if isinstance(tree, dict):
        if not all(isinstance(k, str) for k in tree):
            raise TypeError("dict output with non-string keys")
        return {"dict": [[k, _encode_tree(v)] for k, v in tree.items()]}
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return {"c": tree}
    raise TypeError(f"output of type {type(tree).__name__}")


def _decode_tree(tree: Any, leaves: list[Any]) -> Any:
    if "t" in tree:
        return leaves[tree["t"]]
    if "list" in tree:
        return [_decode_tree(x, leaves) for x in tree["list"]]
    if "tuple" in tree:
        return tuple(_decode_tree(x, leaves) for x in tree["tuple"])
    if "dict" in tree:
        return {k: _decode_tree(v, leaves) for k, v in tree["dict"]}
    return tree["c"]


def _count_leaves(tree: Any) -> int:
    if "t" in tree:
        return 1
    for k in ("list", "tuple"):
        if k in tree:
            return sum(_count_leaves(x) for x in tree[k])
    if "dict" in tree:
        return sum(_count_leaves(v) for _, v in tree["dict"])
    return 0


class ScriptModule:
    """Base class of what :func:`trace`, :func:`script` and :func:`load` return
    for modules (for ``isinstance`` checks)."""


class ScriptFunction:
    """What :func:`trace` and :func:`script` return for plain functions."""


class _Jit:
    """Shared behaviour of traced and scripted objects: calls through a compiled
    function; ``graph``, ``code``, ``save``."""

    _kind = "script"
    _target: Any
    _compiled: CompiledFunction
    _inference: bool
    _last: tuple[tuple, dict] | None
    _example: tuple[tuple, dict]

    def __init__(self, target: Any, compiled: CompiledFunction, inference: bool = False) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_inference", inference)
        object.__setattr__(self, "_last", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        object.__setattr__(self, "_last", (args, kwargs))
        if self._inference:
            with no_grad():
                return self._compiled(*args, **kwargs)
        return self._compiled(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Same as calling the object."""
        return self(*args, **kwargs)

    def _save_inputs(self) -> tuple[tuple, dict]:
        if self._last is None:
            raise RuntimeError(
                f"jit.{self._kind}: {self._name()} has not been called yet, so there is no graph to "
                "save or show: call it once on real inputs (its graph is captured for their "
                "shapes), or use jit.trace(model, example_inputs)"
            )
        return self._last

    def _name(self) -> str:
        t = self._target
        return type(t).__name__ if isinstance(t, _Module()) else getattr(t, "__qualname__", repr(t))

    @property
    def graph(self) -> Any:
        """The :class:`ferrograd.Graph` captured for the saved inputs (see ``save``)."""
        args, kwargs = self._save_inputs()
        try:
            if self._inference:
                with no_grad():
                    return self._compiled.graph(*args, **kwargs)
            return self._compiled.graph(*args, **kwargs)
        except _core.TraceError as e:
            raise RuntimeError(
                f"jit.{self._kind}: {self._name()}({_describe(args, kwargs)}) has control flow that "
                "depends on tensor values, so it runs eagerly and has no graph to save; use "
                "jit.trace(model, example_inputs) to freeze the path those inputs take, or "
                f"fg.cond / fg.while_loop ({e})"
            ) from None

    def _out_tree(self, args: tuple, kwargs: dict) -> str | None:
        """The structure of the outputs of the saved inputs' graph, as JSON
        (None where it is one tensor or cannot be written)."""
        c = self._compiled
        try:
            largs, lkwargs, lifted = c._lift(args, kwargs)
            key, tensors, _ = c._signature(largs, lkwargs, lifted)
            entry, _ = c._lookup(key, tensors)
            tree = _encode_tree(entry.out_tree) if entry is not None and entry.out_tree is not None else None
        except (TypeError, ValueError):
            return None
        return None if tree is None or "t" in tree else json.dumps(tree)

    @property
    def code(self) -> str:
        """The captured graph as text (``Graph.dump()``; not Python code)."""
        return self.graph.dump()

    def save(self, f: Any, _extra_files: Mapping[str, Any] | None = None) -> None:
        """Save the captured graph (with the tensors it reads) to a path or a
        binary file object; :func:`load` reads it back."""
        g = self.graph
        args, kwargs = self._save_inputs()
        meta = {
            "jit.kind": self._kind,
            "jit.inputs": _describe(args, kwargs),
            "jit.training": "1" if getattr(self._target, "training", False) else "0",
        }
        tree = self._out_tree(args, kwargs)
        if tree is not None:
            meta["jit.outputs"] = tree
        for k, v in (_extra_files or {}).items():
            meta[f"jit.extra.{k}"] = v.decode() if isinstance(v, bytes) else str(v)
        if isinstance(f, (str, os.PathLike)):
            g.save(f, metadata=meta)
            return
        if not hasattr(f, "write"):
            raise TypeError(f"jit.save: expected a path or a binary file object, got {type(f).__name__}")
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "graph.fg")
            g.save(p, metadata=meta)
            with open(p, "rb") as fh:
                f.write(fh.read())


class _JitModule(_Jit, ScriptModule):
    """A module called through captured graphs; other attributes are the module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(type(self))) | set(dir(self._target)))

    def train(self, mode: bool = True) -> Any:
        """Set the module's training mode; returns this wrapper."""
        self._target.train(mode)
        return self

    def eval(self) -> Any:
        """Set the module to evaluation mode; returns this wrapper."""
        self._target.eval()
        return self

    def _moved(self, method: str, *args: Any, **kwargs: Any) -> Any:
        getattr(self._target, method)(*args, **kwargs)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """``Module.to`` on the module (parameters converted in place); returns this wrapper."""
        return self._moved("to", *args, **kwargs)

    def cpu(self) -> Any:
        """``Module.cpu``; returns this wrapper."""
        return self._moved("cpu")

    def float(self) -> Any:
        """``Module.float``; returns this wrapper."""
        return self._moved("float")

    def double(self) -> Any:
        """``Module.double``; returns this wrapper."""
        return self._moved("double")

    def half(self) -> Any:
        """``Module.half``; returns this wrapper."""
        return self._moved("half")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"


class TracedModule(_JitModule):
    """A module traced by :func:`trace` (control flow frozen on the example inputs)."""

    _kind = "trace"

    def _save_inputs(self) -> tuple[tuple, dict]:
        return self._example


class RecursiveScriptModule(_JitModule):
    """A module returned by :func:`script` (runs through ``fg.compile(fallback="eager")``)."""


class _JitFunction(_Jit, ScriptFunction):
    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name()}>"


class _TracedFunction(_JitFunction):
    _kind = "trace"

    def _save_inputs(self) -> tuple[tuple, dict]:
        return self._example


def _examples(example_inputs: Any, example_kwarg_inputs: Mapping[str, Any] | None) -> tuple[tuple, dict]:
    if example_inputs is None:
        args: tuple = ()
    elif isinstance(example_inputs, tuple):
        args = example_inputs
    else:
        args = (example_inputs,)
    kwargs = dict(example_kwarg_inputs or {})
    if not args and not kwargs:
        raise ValueError(
            "jit.trace: pass example_inputs (a tensor or a tuple of them) or example_kwarg_inputs"
        )
    return args, kwargs


def trace(
    func: Any,
    example_inputs: Any = None,
    optimize: Any = None,
    check_trace: bool = True,
    check_inputs: Any = None,
    check_tolerance: float = 1e-5,
    strict: bool = True,
    _force_outplace: bool = False,
    _module_class: Any = None,
    _compilation_unit: Any = None,
    example_kwarg_inputs: Mapping[str, Any] | None = None,
    _store_inputs: bool = True,
) -> Any:
    """Capture ``func`` (a module or a function) on ``example_inputs`` (a tensor
    or a tuple of arguments) and return a callable that runs the captured graph.

    Python control flow is frozen on the example inputs: a tensor value read
    in Python (``bool(t)``, ``t.item()``) is taken from an eager run on them
    and baked in, with a :class:`TracerWarning`. Calls with tensors of the
    example's shapes and dtypes run that graph for any values; a call with
    other shapes or dtypes is captured anew on its own inputs. A module keeps
    its state: ``parameters()``, ``state_dict()``, ``train()``/``eval()``
    (which captures again in the new mode), and gradients flow to the module's
    parameters. ``.save(path)`` writes the graph for the example inputs;
    ``.graph`` is that graph, ``.code`` its text. ``check_trace``,
    ``check_inputs``, ``check_tolerance``, ``strict`` and ``optimize`` are
    accepted and ignored.
    """
    args, kwargs = _examples(example_inputs, example_kwarg_inputs)
    if isinstance(func, _Jit):
        func = func._target
    Module = _Module()
    if isinstance(func, Module):
        compiled = _TraceCompiled(func.__call__, func)
        out: _Jit = TracedModule(func, compiled)
    elif callable(func):
        compiled = _TraceCompiled(func, None)
        out = _TracedFunction(func, compiled)
    else:
        raise TypeError(f"jit.trace: expected a module or a function, got {type(func).__name__}")
    object.__setattr__(out, "_example", (args, kwargs))
    # Capture now (without running), so errors show at trace time as in PyTorch.
    compiled.graph(*args, **kwargs)
    return out


def trace_module(mod: Any, inputs: Mapping[str, Any], **kwargs: Any) -> Any:
    """Trace ``mod``'s ``forward`` on ``inputs["forward"]`` (other methods are not traced)."""
    if set(inputs) != {"forward"}:
        raise NotImplementedError(
            f"jit.trace_module: only the 'forward' method can be traced, got {sorted(inputs)}"
        )
    return trace(mod, inputs["forward"], **kwargs)


def script(
    obj: Any, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None, example_inputs: Any = None
) -> Any:
    """Return ``obj`` (a module or a function) wrapped to run through
    ``fg.compile(obj, fallback="eager")``.

    ferrograd does not compile Python to TorchScript. Calls are captured per
    input signature; code whose control flow reads tensor values cannot be
    captured and runs eagerly, so the control flow keeps working as scripting
    promises. ``.save(path)`` writes the graph captured for the last call's
    inputs (it raises before any call, or when that call ran eagerly);
    ``.graph`` / ``.code`` show that graph. A module's attributes, parameters,
    ``train()``/``eval()`` and methods (``@jit.export`` or not) are the
    module's. A class is returned unchanged.
    """
    if isinstance(obj, (_Jit, LoadedModule)):
        return obj
    if isinstance(obj, type):
        return obj
    if isinstance(obj, _Module()):
        return RecursiveScriptModule(obj, CompiledFunction(obj.__call__, fallback="eager"))
    if callable(obj):
        return _JitFunction(obj, CompiledFunction(obj, fallback="eager"))
    raise TypeError(f"jit.script: expected a module, a function or a class, got {type(obj).__name__}")


def freeze(mod: Any, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Any:
    """An inference copy of a scripted or traced module in eval mode: its calls
    run the captured graph under ``no_grad`` (graphs captured without autograd
    get the inference passes). A plain module is scripted first. Raises, as
    PyTorch does, for a module in training mode."""
    if isinstance(mod, LoadedModule):
        return mod
    target = mod._target if isinstance(mod, _Jit) else mod
    if not isinstance(target, _Module()):
        raise TypeError(f"jit.freeze: expected a module, got {type(target).__name__}")
    if target.training:
        raise RuntimeError(
            f"jit.freeze: {type(target).__name__} is in training mode; call .eval() before freezing"
        )
    if isinstance(mod, TracedModule):
        out: _Jit = TracedModule(target, mod._compiled, inference=True)
        object.__setattr__(out, "_example", mod._example)
        return out
    compiled = mod._compiled if isinstance(mod, _Jit) else CompiledFunction(target.__call__, fallback="eager")
    return RecursiveScriptModule(target, compiled, inference=True)


def optimize_for_inference(mod: Any, other_methods: Any = None) -> Any:
    """``mod.eval()`` then :func:`freeze`."""
    mod.eval()
    return freeze(mod)


# ---------------------------------------------------------------------------
# Saving and loading
# ---------------------------------------------------------------------------


def save(m: Any, f: Any, _extra_files: Mapping[str, Any] | None = None) -> None:
    """``m.save(f)`` for a traced, scripted or loaded module (a path or a binary file object)."""
    if not isinstance(m, (_Jit, LoadedModule)):
        raise TypeError(
            f"jit.save: expected what jit.trace / jit.script / jit.load return, got {type(m).__name__} "
            "(use fg.save(model.state_dict(), path) for a plain module)"
        )
    m.save(f, _extra_files=_extra_files)


_MODE_DEPENDENT = ("Dropout", "BatchNorm", "InstanceNorm", "AlphaDropout")


def _all_tensors(args: tuple) -> bool:
    return all(type(a) is Tensor for a in args)


class LoadedModule(ScriptModule):
    """A graph saved by :func:`save`, loaded by :func:`load`: call it to run the
    graph (inference, no autograd) on inputs of the saved shapes and dtypes."""

    def __init__(self, graph: Any, source: str) -> None:
        self._graph = graph
        self._source = source
        meta = graph.metadata
        self._inputs = meta.get("jit.inputs", "?")
        self._saved_training = meta.get("jit.training") == "1"
        self.training = self._saved_training
        g = graph._built()
        # Calls with one tensor per argument skip Graph.__call__'s argument handling.
        n_args = sum(1 for i in g.inputs() if i["kind"] == "arg")
        self._direct = g if not g.scalar_slots() else None
        self._n_args = n_args
        self._tree: Any = None
        if "jit.outputs" in meta:
            try:
                tree = json.loads(meta["jit.outputs"])
                if _count_leaves(tree) == len(graph.outputs):
                    self._tree = tree
            except (ValueError, TypeError, KeyError):
                self._tree = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._direct is not None and not kwargs and len(args) == self._n_args and _all_tensors(args):
                with _capture.suspended(), no_grad():
                    outs = self._direct.run(list(args), [])
                out = outs[0] if len(outs) == 1 else tuple(outs)
            else:
                out = self._graph(*args, **kwargs)
        except (ValueError, TypeError) as e:
            raise type(e)(
                f"jit.load({self._source}): the graph was saved for inputs ({self._inputs}); "
                f"got ({_describe(args, kwargs)}): {e}"
            ) from None
        if self._tree is None:
            return out
        return _decode_tree(self._tree, list(out) if isinstance(out, tuple) else [out])

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Same as calling the module."""
        return self(*args, **kwargs)

    @property
    def graph(self) -> Any:
        """The loaded :class:`ferrograd.Graph`."""
        return self._graph

    @property
    def code(self) -> str:
        """The graph as text (``Graph.dump()``)."""
        return self._graph.dump()

    def state_dict(self) -> dict[str, Tensor]:
        """The tensors the graph reads (parameters and buffers), by name."""
        return self._graph.state_dict()

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Copy values into the graph's tensors (same names and shapes)."""
        own = self.state_dict()
        if strict:
            missing = sorted(set(own) - set(state_dict))
            extra = sorted(set(state_dict) - set(own))
            if missing or extra:
                raise KeyError(f"jit.load: load_state_dict: missing keys {missing}, unexpected keys {extra}")
        with no_grad():
            for k, v in state_dict.items():
                if k in own:
                    if tuple(own[k].shape) != tuple(v.shape):
                        raise ValueError(
                            f"jit.load: load_state_dict: {k} has shape {tuple(own[k].shape)}, "
                            f"got {tuple(v.shape)}"
                        )
                    own[k].copy_(v)

    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        """``state_dict().items()`` (a saved graph does not tell parameters from buffers)."""
        yield from self.state_dict().items()

    def parameters(self) -> Iterator[Tensor]:
        """The tensors of :meth:`named_parameters`."""
        for _, t in self.named_parameters():
            yield t

    def train(self, mode: bool = True) -> LoadedModule:
        """Set ``training``; the graph keeps the mode it was captured in (a
        warning says so where that matters: Dropout and normalisation layers)."""
        mode = bool(mode)
        if mode != self._saved_training:
            types = " ".join(self._graph._module_types().values())
            if any(k in types for k in _MODE_DEPENDENT):
                was = "training" if self._saved_training else "eval"
                warnings.warn(
                    f"jit.load({self._source}): the graph was captured in {was} mode; its "
                    "Dropout/normalisation layers keep that behaviour (capture the model again "
                    "in the mode you need)",
                    stacklevel=2,
                )
        self.training = mode
        return self

    def eval(self) -> LoadedModule:
        """``train(False)``."""
        return self.train(False)

    def save(self, f: Any, _extra_files: Mapping[str, Any] | None = None) -> None:
        """Save the graph again (with its current tensors)."""
        meta = {k: v for k, v in self._graph.metadata.items()}
        if isinstance(f, (str, os.PathLike)):
            self._graph.save(f, metadata=meta)
            return
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "graph.fg")
            self._graph.save(p, metadata=meta)
            with open(p, "rb") as fh:
                f.write(fh.read())

    def __repr__(self) -> str:
        return f"LoadedModule({self._source}, inputs=({self._inputs}))"


def load(f: Any, map_location: Any = None, _extra_files: Any = None) -> LoadedModule:
    """Load what :func:`save` wrote (a path or a binary file object) as a
    :class:`LoadedModule`. ``map_location``: None (the device it was saved
    from), ``"cpu"``, ``"gpu"`` (``"cuda"`` means the WebGPU device as
    elsewhere in ferrograd), a device, or a dict whose ``"cpu"`` entry is used."""
    from .graph import load_graph

    where = map_location
    if isinstance(where, Mapping):
        where = where.get("cpu")
    if where is not None and callable(where) and not isinstance(where, (str, _core.device)):
        raise TypeError("jit.load: map_location as a function is not supported; pass a device or 'cpu'/'gpu'")
    if isinstance(where, str) and where.startswith("cuda"):
        where = "gpu"
    if isinstance(f, (str, os.PathLike)):
        source = os.fspath(f)
        g = load_graph(source, device=where)
    elif hasattr(f, "read"):
        source = "<file object>"
        data = f.read()
        g = load_graph(bytes(data), device=where)
    elif isinstance(f, (bytes, bytearray)):
        source = "<bytes>"
        g = load_graph(bytes(f), device=where)
    else:
        raise TypeError(f"jit.load: expected a path or a binary file object, got {type(f).__name__}")
    if _extra_files is not None:
        for k in list(_extra_files):
            v = g.metadata.get(f"jit.extra.{k}")
            if v is not None:
                _extra_files[k] = v.encode()
    return LoadedModule(g, source)
