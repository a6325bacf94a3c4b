"""Graphs, tensors and operations in TensorFlow 1.x's shape (sessions: ``_session.py``).

A TF1 program builds its graph op by op, runs it, and often builds more
afterwards (an accuracy op after the training loop). ferrograd captures a
graph in one recording, so this module keeps each TF op as a *record*: the
ferrograd function that computes it and its inputs. When an op is made it
is captured once in a throwaway recording, with placeholders standing for
its inputs, for its dtype and shape (the engine's own rules decide them);
no capture stays open on the thread between TF calls, so eager ferrograd
and other graphs can be used in between. A run captures every record, in
order, into one :class:`ferrograd.Graph` (again only when ops were added
since), so every TF op is a handful of ordinary ferrograd ops: gradients,
the graph passes, TensorBoard and saving see nothing special.

Variables are tensors outside any graph that graphs read and update by
reference, so their values survive every re-recording. Feeding a tensor
that is not a placeholder records a variant of the graph in which that
tensor is a placeholder; so does feeding a non-scalar to a placeholder
declared without a shape (it is recorded at the fed shape, so gradients
reduce as they must).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ... import _capture, _core
from ... import graph as _fg

__all__ = [
    "DType",
    "Dimension",
    "Graph",
    "InteractiveSession",
    "Operation",
    "Session",
    "Tensor",
    "TensorShape",
    "as_dtype",
    "control_dependencies",
    "get_default_graph",
    "get_default_session",
    "name_scope",
    "reset_default_graph",
]

_SYMBOLIC = 1 << 22  # captured symbolic dims are sentinels at or above this size

# The engine records an unknown dim as a symbol whose stand-in size is a prime near 2**23; a
# tensor with three or more of them (``[None, None, None]``) would have more elements than 64
# bits count. Such a placeholder is "wide": each run records it at the shape fed, and while the
# graph is built its unknown dims are probed with the small primes below, read back as unknown.
_SENTINEL_MAX = 8_511_491  # the largest symbol stand-in (ferrograd's ``SENTINELS``)
_PROBE_DIMS = (
    7919, 7927, 7933, 7937, 7949, 7951, 7963, 7993,
    8009, 8011, 8017, 8039, 8053, 8059, 8069, 8081, 8087, 8089, 8093, 8101,
)  # fmt: skip
_probe_dim_of: dict[str, int] = {}


def _too_wide(syms: Sequence[int | str] | None) -> bool:
    """Whether dims ``syms`` (unknown ones named) overflow the engine's symbolic sizes."""
    if syms is None:
        return False
    size = 8  # the widest itemsize
    for d in syms:
        size *= _SENTINEL_MAX if isinstance(d, str) else max(int(d), 1)
    return size > (1 << 63) - 1


def _probe_dim(sym: str, axis: int) -> int:
    """The size an unknown dim named ``sym`` (at ``axis``) has in a build-time probe of a wide tensor."""
    got = _probe_dim_of.get(sym)
    if got is None:
        if sym == f"?{axis}" and axis < 8:  # a placeholder's own unknown dim: one per axis
            got = _PROBE_DIMS[axis]
        else:
            got = _PROBE_DIMS[8 + len(_probe_dim_of) % (len(_PROBE_DIMS) - 8)]
        _probe_dim_of[sym] = got
    return got


def _probe_dims(op: str, syms: Sequence[int | str], dtype: Any) -> list[int]:
    """``syms`` with each unknown dim given its probe size; a clear error when even those overflow."""
    dims = [_probe_dim(s, i) if isinstance(s, str) else int(s) for i, s in enumerate(syms)]
    if math.prod(max(d, 1) for d in dims) * 8 > (1 << 63) - 1:
        raise ValueError(
            f"{op}: shape {_shape_text([None if isinstance(s, str) else s for s in syms])} with dtype "
            f"{getattr(dtype, 'name', dtype)} has too many unknown dims to record (at most 4 unknown "
            "dims, or fewer with large known ones); give more dims, or declare it with shape=None"
        )
    return dims


# ----------------------------------------------------------------------------- errors


class OpError(Exception):
    """The base of the errors a TF1 run raises (``tf.errors.OpError``)."""

    def __init__(self, node_def: Any = None, op: Any = None, message: str = "", *args: Any) -> None:
        if isinstance(node_def, str) and not message:
            message, node_def = node_def, None
        super().__init__(message)
        self.message = message
        self.op = op
        self.node_def = node_def


class InvalidArgumentError(OpError, ValueError):
    """A run got a bad argument: a missing or ill-shaped feed (``tf.errors.InvalidArgumentError``)."""


class FailedPreconditionError(OpError, RuntimeError):
    """A run read a variable that was never initialized (``tf.errors.FailedPreconditionError``)."""


class NotFoundError(OpError, LookupError):
    """A checkpoint or a name was not found (``tf.errors.NotFoundError``)."""


class OutOfRangeError(OpError, IndexError):
    """An input is exhausted (``tf.errors.OutOfRangeError``)."""


# ----------------------------------------------------------------------------- dtypes


class DType:
    """A TF dtype (``tf.float32``...): compares equal to its ferrograd dtype and its name."""

    def __init__(self, name: str, fg_dtype: Any, np_dtype: Any) -> None:
        self.name = name
        self._fg = fg_dtype
        self.as_numpy_dtype = np_dtype

    @property
    def base_dtype(self) -> DType:
        """This dtype (TF1 reference dtypes do not exist here)."""
        return self

    @property
    def is_floating(self) -> bool:
        """Whether it is a floating-point dtype."""
        return self.name.startswith(("float", "bfloat"))

    @property
    def is_integer(self) -> bool:
        """Whether it is an integer dtype."""
        return self.name.startswith("int")

    @property
    def is_bool(self) -> bool:
        """Whether it is ``tf.bool``."""
        return self.name == "bool"

    @property
    def size(self) -> int:
        """Bytes per element."""
        return int(np.dtype(self.as_numpy_dtype).itemsize)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return other.name == self.name
        if isinstance(other, str):
            return other == self.name
        try:
            return as_dtype(other).name == self.name
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"tf.{self.name}"


float16 = DType("float16", _core.float16, np.float16)
float32 = DType("float32", _core.float32, np.float32)
float64 = DType("float64", _core.float64, np.float64)
int32 = DType("int32", _core.int32, np.int32)
int64 = DType("int64", _core.int64, np.int64)
bool_ = DType("bool", getattr(_core, "bool"), np.bool_)  # noqa: B009 - `bool` is the dtype here
# Narrow integers are held widened to int32 (the engine's narrowest integer): values fit, and
# their tensors report int32.
int8 = DType("int8", _core.int32, np.int8)
int16 = DType("int16", _core.int32, np.int16)
uint8 = DType("uint8", _core.int32, np.uint8)
string = DType("string", None, np.object_)  # constants only: fetched as bytes, never in a graph
_DTYPES = {d.name: d for d in (float16, float32, float64, int32, int64, bool_, int8, int16, uint8, string)}
_DTYPES.update({"float": float32, "double": float64, "half": float16})


def as_dtype(value: Any) -> DType:
    """The :class:`DType` for a TF dtype, a ferrograd dtype, a NumPy dtype, a Python type or a name."""
    if isinstance(value, DType):
        return value
    if value is float:
        return float32
    if value is int:
        return int32
    if value is bool:
        return bool_
    if isinstance(value, _core.dtype):
        name = str(value).rsplit(".", 1)[-1]
    elif isinstance(value, str):
        name = value
    else:
        try:
            name = np.dtype(value).name
        except TypeError:
            raise TypeError(f"cannot convert {value!r} to a dtype") from None
    if name not in _DTYPES:
        raise TypeError(f"dtype {name!r} is not supported (use float16/32/64, int32, int64 or bool)")
    return _DTYPES[name]


def _fg_dtype(value: Any) -> Any:
    return as_dtype(value)._fg


# ----------------------------------------------------------------------------- shapes


class Dimension:
    """One dimension of a :class:`TensorShape`: ``value`` is an int or None (unknown)."""

    def __init__(self, value: int | None) -> None:
        self.value = None if value is None else int(value)

    def __int__(self) -> int:
        if self.value is None:
            raise ValueError("cannot convert an unknown Dimension to an int")
        return self.value

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        o = other.value if isinstance(other, Dimension) else other
        if self.value is None or o is None:
            return False
        return self.value == o

    def __hash__(self) -> int:
        return hash(self.value)

    def __mul__(self, other: Any) -> Dimension:
        o = other.value if isinstance(other, Dimension) else other
        return Dimension(None if self.value is None or o is None else self.value * o)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"Dimension({self.value})"

    def __str__(self) -> str:
        return "?" if self.value is None else str(self.value)


class TensorShape:
    """A static shape: a list of dims (ints or None), or unknown rank (``dims is None``)."""

    def __init__(self, dims: Sequence[Any] | None) -> None:
        if dims is None:
            self._dims: list[int | None] | None = None
        else:
            self._dims = [
                (d.value if isinstance(d, Dimension) else (None if d is None or int(d) < 0 else int(d)))
                for d in dims
            ]

    @property
    def dims(self) -> list[Dimension] | None:
        """The dims as :class:`Dimension` objects (None for an unknown rank)."""
        return None if self._dims is None else [Dimension(d) for d in self._dims]

    @property
    def ndims(self) -> int | None:
        """The rank, or None when unknown."""
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def as_list(self) -> list[int | None]:
        """The dims as ints (None where unknown)."""
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return list(self._dims)

    def is_fully_defined(self) -> bool:
        """Whether the rank and every dim are known."""
        return self._dims is not None and all(d is not None for d in self._dims)

    def num_elements(self) -> int | None:
        """The number of elements, or None when not fully defined."""
        if not self.is_fully_defined():
            return None
        return int(np.prod(_known(self._dims), dtype=np.int64))

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("the rank of this shape is unknown")
        return len(self._dims)

    def __iter__(self) -> Iterator[Any]:
        if self._dims is None:
            raise ValueError("cannot iterate over a shape of unknown rank")
        return iter(Dimension(d) for d in self._dims)

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            return Dimension(None) if isinstance(key, int) else TensorShape(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return Dimension(self._dims[key])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorShape):
            return self._dims == other._dims
        if isinstance(other, (list, tuple)):
            return self._dims == list(other)
        return False

    def __hash__(self) -> int:
        return hash(None if self._dims is None else tuple(self._dims))

    def __repr__(self) -> str:
        return f"TensorShape({self._dims!r})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self._dims)
        return f"({inner}{',' if len(self._dims) == 1 else ''})"


def _known(dims: Sequence[int | None] | None, what: str = "shape") -> list[int]:
    """``dims`` as ints; raises when the rank or a dim is unknown."""
    if dims is None or any(d is None for d in dims):
        raise ValueError(f"the {what} must be fully known while the graph is built, got {_shape_text(dims)}")
    return [int(d) for d in dims if d is not None]


def _static_shape(t: Any) -> list[int | None]:
    return [None if int(d) >= _SYMBOLIC else int(d) for d in t.shape]


def _shape_text(shape: Sequence[int | None] | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


# ----------------------------------------------------------------------------- records


class _Node:
    """An effect node of one recording (its index in that graph)."""

    __slots__ = ("id",)

    def __init__(self, i: int) -> None:
        self.id = i


def _last_node() -> _Node:
    return _Node(_core._trace_num_nodes() - 1)


class _Broken(tuple):
    """A record that could not be recorded in a variant (e.g. a gradient through a fed tensor)."""

    def __new__(cls, exc: BaseException | None) -> _Broken:
        obj = super().__new__(cls, ())
        obj.exc = exc  # type: ignore[attr-defined]
        return obj


class _Record:
    """One TF op: the ferrograd function that records it, and its inputs."""

    __slots__ = (
        "ph_dims",
        "wide",
        "printing",
        "printed",
        "fn",
        "args",
        "op_type",
        "name",
        "loc",
        "control",
        "kind",
        "outputs",
        "inits",
        "deps",
        "op",
        "folds",
    )

    def __init__(self, fn: Callable, args: tuple, op_type: str, name: str, kind: str) -> None:
        self.fn = fn
        self.args = args
        self.op_type = op_type
        self.name = name
        self.kind = kind  # "op", "placeholder", "variable"
        self.loc: str | None = None
        self.control: list[int] = []
        self.outputs: list[Any] = []
        self.inits: list[Any] = []  # variables this op (re)sets
        self.deps: list[tuple[int, int]] = []
        self.op: Operation | None = None
        self.folds = False  # computed from constants only: the graph passes fold it
        self.ph_dims: list[int | str] | None = None  # a placeholder's dims (None: declared without a shape)
        self.wide = False  # a placeholder with too many unknown dims: recorded at the fed shape
        self.printing: tuple[str, list[Any], int | None, int] | None = None  # tf.Print's message, data...
        self.printed = 0  # times it printed

    def run(self, vals: list[tuple]) -> tuple:
        """Record this op into the current recording; its outputs."""
        return _norm(self.fn(*_resolve(self.args, vals)))


def _resolve(x: Any, vals: list[tuple]) -> Any:
    if isinstance(x, Tensor):
        return x._twin if x._rec is None else vals[x._rec][x._idx]
    if isinstance(x, (list, tuple)):
        return type(x)(_resolve(v, vals) for v in x)
    if isinstance(x, dict):
        return {k: _resolve(v, vals) for k, v in x.items()}
    return x


def _collect_deps(x: Any, out: list[tuple[int, int]]) -> None:
    if isinstance(x, Tensor):
        if x._rec is not None:
            out.append((x._rec, x._idx))
    elif isinstance(x, (list, tuple)):
        for v in x:
            _collect_deps(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _collect_deps(v, out)


def _norm(out: Any) -> tuple:
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


# ----------------------------------------------------------------------------- source lines

_TRAMPOLINES: dict[str, Any] = {}


def _at_location(loc: str | None, fn: Callable[[Any], Any], arg: Any) -> Any:
    """``fn(arg)``, called from a frame that sits at ``loc`` (``file:line``).

    A recording names each node by the innermost frame outside ferrograd; when the records are
    captured again inside ``Session.run``, that would be the ``run`` call. Calling through a code
    object compiled at the op's own line makes nodes, error messages and TensorBoard name the line
    that made the TF op.
    """
    code = _TRAMPOLINES.get(loc) if loc else None
    if code is None:
        file, _, line = (loc or "").rpartition(":")
        if not file or not line.isdigit():
            return fn(arg)
        code = compile("\n" * (int(line) - 1) + "__out__.append(__fn__(__arg__))", file, "exec")
        _TRAMPOLINES[loc] = code  # type: ignore[index]
    out: list[Any] = []
    exec(code, {"__fn__": fn, "__arg__": arg, "__out__": out})
    return out[0]


# ----------------------------------------------------------------------------- probes

_fresh = [0]


def _fresh_symbol() -> str:
    _fresh[0] += 1
    return f"?t{_fresh[0]}"


def _name_sentinels(twin: Any, syms: list[int | str] | None, names: dict[int, str]) -> None:
    """Note which symbol each symbolic dim of ``twin`` (made for dims ``syms``) stands for."""
    if syms is None:
        return
    for d, s in zip(twin.shape, syms, strict=False):
        if isinstance(s, str) and (int(d) >= _SYMBOLIC or int(d) in _PROBE_DIMS):
            names[int(d)] = s


def _syms_of(twin: Any, names: dict[int, str]) -> list[int | str]:
    out: list[int | str] = []
    for d in twin.shape:
        d = int(d)
        if d in names:
            out.append(names[d])
        elif d < _SYMBOLIC:
            out.append(d)
        else:
            if d not in names:
                names[d] = _fresh_symbol()  # a size derived from unknown ones: unknown, unrelated
            out.append(names[d])
    return out


class _ProbeInputs:
    """Values of a probe recording: a placeholder for each earlier op's output read, made on demand
    (with its static dtype and dims; a variable is its own tensor, read by reference)."""

    def __init__(self, graph: Graph, names: dict[int, str], wide: bool = False) -> None:
        self._g = graph
        self._names = names
        self._wide = wide  # an input is wide: every unknown dim is probed with a small size
        self._made: dict[int, tuple] = {}

    def __getitem__(self, r: int) -> tuple:
        got = self._made.get(r)
        if got is None:
            rec = self._g._records[r]
            if rec.kind == "variable":
                got = (rec.outputs[0]._store,)
            else:
                got = tuple(self._stand_in(t) for t in rec.outputs)
            self._made[r] = got
        return got

    def _stand_in(self, t: Tensor | None) -> Any:
        if t is None:
            return None
        if t._const is not None and np.asarray(t._const).size <= 64:
            with _capture.suspended():
                real = _core.tensor(np.array(t._const, order="C"))
            return _core._trace_constant(real)
        if self._wide and t._syms is not None:
            dims: Any = _probe_dims("placeholder", t._syms, t.dtype)
        else:
            dims = None if t._syms is None else list[Any](t._syms)
        ph = _fg.placeholder(t.dtype._fg, dims)
        _name_sentinels(ph, t._syms, self._names)
        return ph


# ----------------------------------------------------------------------------- recordings


class _Holder(threading.local):
    epoch: _Epoch | None = None


_holder = _Holder()  # the recording that holds this thread's capture


class _Epoch:
    """One recording of a graph's records into a ferrograd graph."""

    def __init__(self, graph: Graph, overrides: frozenset, shapes: tuple = ()) -> None:
        self.graph = graph
        self.overrides = overrides  # (record, output) pairs fed in this variant: placeholders here
        self.shapes = dict(shapes)  # placeholder record -> the shape it is recorded with here
        self.fgg = _fg.Graph()
        self.vals: list[tuple] = []
        self.feeds: dict[tuple[int, int], Any] = {}
        self.open = False
        self.dead = False
        self.session: _fg.Session | None = None
        self._depth = 0
        self._saved: list[Any] = []

    def begin(self) -> None:
        _release()
        if _core._trace_recording():
            raise RuntimeError(
                "ferrograd.compat.v1: another graph is being recorded on this thread "
                "(a `with fg.Graph():` block or a compiled function); build TF1 ops outside it"
            )
        _core._trace_begin()
        self.fgg._building = True
        self.fgg._state = _capture.TraceState()
        self.open = True
        _holder.epoch = self

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Record into this epoch while the body runs (re-entrant)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        _fg._stack.append(self.fgg)
        prev_state = _capture.current()
        _capture._local.state = self.fgg._state
        prev_active = _core._trace_set_active(True)
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            _core._trace_set_active(prev_active)
            _capture._local.state = prev_state
            _fg._stack.pop()

    def end(self) -> None:
        with self.active():
            pass
        _core._trace_set_active(True)
        try:
            self.fgg._g = _core._trace_end([])
        finally:
            self.fgg._building = False
            self.open = False
            if _holder.epoch is self:
                _holder.epoch = None
        if self.fgg._state is not None and self.fgg._state.scalars:
            # Fused optimizer nodes read scalars computed at every run (Adam's lr_t).
            self.fgg._scalars = self.fgg._state.scalar_values
        self.session = _fg.Session(self.fgg)

    def abort(self) -> None:
        _core._trace_abort()
        self.fgg._building = False
        self.open = False
        self.dead = True
        if _holder.epoch is self:
            _holder.epoch = None


def _release() -> None:
    """End the recording holding this thread's capture (it stays usable)."""
    ep = _holder.epoch
    if ep is not None and ep.open:
        try:
            ep.end()
        except Exception:
            ep.abort()
    _holder.epoch = None


# ----------------------------------------------------------------------------- graph


_gstate = threading.local()


def _graph_stack() -> list[Graph]:
    st = getattr(_gstate, "graphs", None)
    if st is None:
        st = _gstate.graphs = []
    return st


_default_graph: Graph | None = None


class Graph:
    """A TF1 graph: ops are added to it while it is the default graph.

    ``tf.get_default_graph()`` is the global one; ``with g.as_default():``
    makes ``g`` the default in the block. Run it with :class:`Session`.
    """

    def __init__(self) -> None:
        self._records: list[_Record] = []
        self._names: dict[str, int] = {}
        self._by_name: dict[str, Any] = {}
        self._collections: dict[str, list[Any]] = {}
        self._name_stack: list[str] = []
        self._control_stack: list[list[int] | None] = []
        self._var_scopes: list[Any] = []
        self._vars_by_name: dict[str, Any] = {}
        self._base: _Epoch | None = None
        self._variants: dict[tuple, _Epoch] = {}
        self._inline = 0
        self._cur_vals: list[tuple] = []
        self._walks: dict[tuple, tuple] = {}
        self._finalized = False
        self.seed: int | None = None

    # -- defaults and naming -----------------------------------------------

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Make this the default graph in the ``with`` block."""
        st = _graph_stack()
        st.append(self)
        try:
            yield self
        finally:
            st.pop()

    def _unique(self, base: str, scoped: bool = True) -> str:
        full = "/".join([*self._name_stack, base]) if scoped and self._name_stack else base
        # As TF1: names are compared without case (a scope "Loss" makes the next "loss" "loss_1").
        key = full.lower()
        n = self._names.get(key)
        if n is None:
            self._names[key] = 1
            return full
        while f"{key}_{n}" in self._names:
            n += 1
        self._names[key] = n + 1
        self._names[f"{key}_{n}"] = 1
        return f"{full}_{n}"

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """A name not used yet in this graph, under the current name scope."""
        return self._unique(name)

    @contextlib.contextmanager
    def name_scope(self, name: str | None) -> Iterator[str]:
        """Prefix the names of the ops made in the block with ``name/``."""
        if name is None or name == "":
            saved = self._name_stack
            self._name_stack = []
            try:
                yield ""
            finally:
                self._name_stack = saved
            return
        if name.endswith("/"):
            saved = self._name_stack
            self._name_stack = [n for n in name.rstrip("/").split("/") if n]
            try:
                yield name
            finally:
                self._name_stack = saved
            return
        full = self._unique(name)
        saved = self._name_stack
        self._name_stack = full.split("/")
        try:
            yield full + "/"
        finally:
            self._name_stack = saved

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Sequence[Any] | None) -> Iterator[None]:
        """Ops made in the block run only after ``control_inputs`` (ops or tensors) have run."""
        if control_inputs is None:
            self._control_stack.append(None)
        else:
            recs = []
            for c in control_inputs:
                if isinstance(c, Operation):
                    if c._rec is not None:
                        recs.append(c._rec)
                elif isinstance(c, Tensor):
                    if c._rec is not None:
                        recs.append(c._rec)
                else:
                    raise TypeError(f"control_dependencies: expected ops or tensors, got {type(c).__name__}")
            self._control_stack.append(recs)
        try:
            yield
        finally:
            self._control_stack.pop()

    def _current_control(self) -> list[int]:
        out: list[int] = []
        for c in self._control_stack:
            if c is None:
                out = []
            else:
                out.extend(c)
        return out

    # -- collections and lookup --------------------------------------------

    def add_to_collection(self, name: str, value: Any) -> None:
        """Append ``value`` to the collection ``name``."""
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str, scope: str | None = None) -> list[Any]:
        """A copy of the collection ``name`` (items whose name starts with ``scope``, when given)."""
        items = list(self._collections.get(name, []))
        if scope is not None:
            items = [v for v in items if str(getattr(v, "name", "")).startswith(scope)]
        return items

    def get_collection_ref(self, name: str) -> list[Any]:
        """The collection ``name`` itself (a list to modify)."""
        return self._collections.setdefault(name, [])

    def get_all_collection_keys(self) -> list[str]:
        """The names of the non-empty collections."""
        return [k for k, v in self._collections.items() if v]

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor named ``op_name:index``."""
        if ":" not in name:
            raise ValueError(f"the name {name!r} looks like an op name; tensor names are 'op_name:index'")
        op_name, idx = name.rsplit(":", 1)
        op = self.get_operation_by_name(op_name)
        outs = op.outputs
        k = int(idx)
        if k >= len(outs):
            raise KeyError(f"the op {op_name!r} has {len(outs)} outputs; {name!r} does not exist")
        return outs[k]

    def get_operation_by_name(self, name: str) -> Operation:
        """The op named ``name``."""
        rec = self._by_name.get(name)
        if rec is None:
            raise KeyError(f"the name {name!r} refers to an Operation not in the graph")
        return self._records[rec].op  # type: ignore[return-value]

    def get_operations(self) -> list[Operation]:
        """Every op of the graph, in the order they were made."""
        return [r.op for r in self._records if r.op is not None]

    def finalize(self) -> None:
        """Mark the graph read-only: adding an op afterwards raises."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        """Whether :meth:`finalize` was called."""
        return self._finalized

    @property
    def version(self) -> int:
        """The number of ops made so far."""
        return len(self._records)

    # -- recording ---------------------------------------------------------

    def _apply(
        self,
        fn: Callable,
        args: tuple,
        op_type: str,
        name: str | None = None,
        kind: str = "op",
        multi: bool = False,
        scoped: bool = True,
        exact: bool = False,
        full_probe: bool = False,
        ph_dims: list[int | str] | None = None,
    ) -> Any:
        """Record ``fn(*args)`` (args may hold TF tensors) as one op; returns its TF outputs.

        The op is captured once at once, in a throwaway recording, for its outputs' dtypes and
        shapes: with placeholders standing for its inputs, or (``full_probe``: gradients and
        control flow, which reach beyond their inputs) after every earlier op.
        """
        if self._inline:
            out = _norm(fn(*_resolve(args, self._cur_vals)))
            wrapped = [
                None if o is None or isinstance(o, _Node) else Tensor(self, None, k, None, None, twin=o)
                for k, o in enumerate(out)
            ]
            return wrapped if multi else next((w for w in wrapped if w is not None), None)
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        if exact and name:
            self._names.setdefault(name.lower(), 1)
            full = name
        else:
            full = self._unique(name or op_type, scoped)
        rec = _Record(fn, args, op_type, full, kind)
        rec.ph_dims = ph_dims
        rec.wide = kind == "placeholder" and _too_wide(ph_dims)
        rec.loc = _capture._user_location()
        rec.control = self._current_control()
        _collect_deps(args, rec.deps)
        rec.folds = (
            kind == "op"
            and (op_type == "Const" or bool(rec.deps))
            and all(self._records[d].folds for d, _ in rec.deps)
        )
        metas = self._probe(rec, full_probe)
        idx = len(self._records)
        self._records.append(rec)
        self._by_name[rec.name] = idx
        rec.op = Operation(self, idx)
        outputs: list[Any] = [
            None if m is None else Tensor(self, idx, k, m[0], None, syms=m[1]) for k, m in enumerate(metas)
        ]
        rec.outputs = outputs
        if multi:
            return outputs
        first = next((o for o in outputs if o is not None), None)
        return rec.op if first is None else first

    def _probe(self, rec: _Record, full: bool) -> list[tuple[DType, list[int | str] | None] | None]:
        """Capture ``rec`` in a throwaway recording: each output's dtype and dims (None: not a tensor).

        Dims unknown until a run are symbol names, kept across ops so that equal unknown sizes
        (a batch) stay equal. Nothing is left recording on the thread afterwards.
        """
        ep = _Epoch(self, frozenset())
        ep.begin()
        try:
            with ep.active():
                names: dict[int, str] = {}
                if full:
                    self._replay(ep)
                    for i, r in enumerate(self._records):
                        if r.kind == "placeholder" and not isinstance(ep.vals[i], _Broken):
                            _name_sentinels(ep.vals[i][0], r.outputs[0]._syms, names)
                    vals: Any = ep.vals
                else:
                    wide = any(_too_wide(self._records[d].outputs[k]._syms) for d, k in rec.deps)
                    vals = _ProbeInputs(self, names, wide)
                self._cur_vals = vals
                out = rec.run(vals)
                metas: list[tuple[DType, list[int | str] | None] | None] = []
                for o in out:
                    if o is None or isinstance(o, _Node):
                        metas.append(None)
                    elif rec.kind == "placeholder":
                        _name_sentinels(o, rec.ph_dims, names)
                        metas.append((as_dtype(o.dtype), None if rec.ph_dims is None else list(rec.ph_dims)))
                    else:
                        metas.append((as_dtype(o.dtype), _syms_of(o, names)))
        finally:
            ep.abort()
        return metas

    def _replay(self, ep: _Epoch) -> None:
        self._cur_vals = ep.vals
        with ep.active():
            for i, rec in enumerate(self._records):
                if any(isinstance(ep.vals[d], _Broken) for d, _ in rec.deps):
                    ep.vals.append(_Broken(None))
                    continue
                out: tuple[Any, ...]
                try:
                    if i in ep.shapes:  # no shape or a wide one, fed: recorded at the fed shape
                        out = (_fg.placeholder(rec.outputs[0].dtype._fg, list(ep.shapes[i]), name=rec.name),)
                    else:
                        out = _at_location(rec.loc, rec.run, ep.vals)
                except Exception as e:  # only an error if a run needs it (a fed tensor cut its input)
                    ep.vals.append(_Broken(e))
                    continue
                if rec.kind == "placeholder":
                    ep.feeds[(i, 0)] = out[0]
                fed = [k for k in range(len(out)) if (i, k) in ep.overrides]
                if fed:
                    items = list(out)
                    for k in fed:
                        t = rec.outputs[k]
                        shape = None if t._shape is None else list(t._shape)
                        if (i, k) in ep.shapes:  # a wide tensor fed: recorded at the fed shape
                            shape = list(ep.shapes[(i, k)])
                        ph = _fg.placeholder(t.dtype._fg, shape, name=f"{rec.name}_{k}")
                        items[k] = ph
                        ep.feeds[(i, k)] = ph
                    out = tuple(items)
                ep.vals.append(out)

    def _build(self, overrides: frozenset, shapes: tuple = ()) -> _Epoch:
        """A finished recording of every record (with ``overrides`` fed), ready to run.

        ``shapes``: ``(record, shape)`` of placeholders declared without a shape that are fed
        non-scalars; they are recorded at that shape (so gradients reduce as they must).
        """
        n = len(self._records)
        key = (overrides, shapes)
        if not overrides and not shapes:
            ep = self._base
            if ep is not None and not ep.dead and len(ep.vals) == n:
                return ep
        else:
            ep = self._variants.get(key)
            if ep is not None and len(ep.vals) == n:
                return ep
        ep = _Epoch(self, overrides, shapes)
        ep.begin()
        try:
            self._replay(ep)
        except BaseException:
            ep.abort()
            raise
        ep.end()
        if overrides or shapes:
            if len(self._variants) > 32:
                self._variants.clear()
            self._variants[key] = ep
        else:
            self._base = ep
        return ep

    def _walk(self, starts: tuple[int, ...], fed: frozenset) -> tuple[list[int], list[int], list[int]]:
        """Records a run of ``starts`` needs: all of them, the unfed placeholders, the variables read."""
        key = (len(self._records), starts, fed)
        got = self._walks.get(key)
        if got is not None:
            return got
        seen: set[int] = set()
        stack = list(starts)
        missing: list[int] = []
        reads: list[int] = []
        while stack:
            r = stack.pop()
            if r in seen:
                continue
            seen.add(r)
            rec = self._records[r]
            if rec.kind == "placeholder" and (r, 0) not in fed:
                missing.append(r)
            for d, k in rec.deps:
                if (d, k) in fed:
                    continue
                if self._records[d].kind == "variable":
                    reads.append(d)
                stack.append(d)
            stack.extend(rec.control)
        got = (sorted(seen), sorted(set(missing)), sorted(set(reads)))
        if len(self._walks) > 256:
            self._walks.clear()
        self._walks[key] = got
        return got

    def _release(self) -> None:
        if _holder.epoch is not None and _holder.epoch.graph is self:
            _release()

    def __repr__(self) -> str:
        return f"<tf.Graph with {len(self._records)} ops>"


def get_default_graph() -> Graph:
    """The graph new ops go to: the innermost ``as_default()`` graph, else the global default."""
    global _default_graph
    st = _graph_stack()
    if st:
        return st[-1]
    if _default_graph is None:
        _default_graph = Graph()
    return _default_graph


def reset_default_graph() -> None:
    """Replace the global default graph with an empty one (ops of the old one can no longer be built)."""
    global _default_graph
    if _graph_stack():
        raise AssertionError("Do not use tf.reset_default_graph() inside a `with g.as_default():` block")
    _release()
    _default_graph = Graph()


def name_scope(name: str | None, default_name: str | None = None, values: Any = None) -> Any:
    """Prefix the names of the ops made in the block (``with tf.name_scope("layer1"):``)."""
    return get_default_graph().name_scope(name if name is not None else default_name)


def control_dependencies(control_inputs: Sequence[Any] | None) -> Any:
    """Ops made in the block run only after ``control_inputs`` have run."""
    return get_default_graph().control_dependencies(control_inputs)


# ----------------------------------------------------------------------------- tensors and operations


class Tensor:
    """A symbolic value of a TF1 graph: the output ``idx`` of an op.

    It has a static ``shape`` (dims unknown until fed are None) and a
    ``dtype``; its value exists only in a :meth:`Session.run` (or
    :meth:`eval`). Arithmetic operators build ops, as in TensorFlow.
    """

    __array_priority__ = 100

    def __init__(
        self,
        graph: Graph,
        rec: int | None,
        idx: int,
        dtype: DType | None,
        shape: list[int | None] | None,
        twin: Any = None,
        syms: list[int | str] | None = None,
    ) -> None:
        self._graph = graph
        self._rec = rec
        self._idx = idx
        self._twin = twin
        self._dtype = dtype if dtype is not None else as_dtype(twin.dtype)
        if twin is not None:
            syms = _syms_of(twin, {})
        elif syms is None and shape is not None:
            syms = [_fresh_symbol() if d is None else int(d) for d in shape]
        # The dims, with each unknown one named by a symbol ("?0": the batch of the placeholders).
        self._syms: list[int | str] | None = syms
        self._const: Any = None  # the value, when known while building (constants, static shapes)

    @property
    def _shape(self) -> list[int | None] | None:
        return None if self._syms is None else [None if isinstance(d, str) else d for d in self._syms]

    @_shape.setter
    def _shape(self, dims: list[int | None] | None) -> None:
        if dims is None:
            self._syms = None
            return
        old = self._syms if self._syms is not None and len(self._syms) == len(dims) else [None] * len(dims)
        self._syms = [
            int(d) if d is not None else (o if isinstance(o, str) else _fresh_symbol())
            for d, o in zip(dims, old, strict=True)
        ]

    def _record(self) -> _Record:
        if self._rec is None:
            raise ValueError("a tensor made inside a control-flow body cannot be used outside it")
        return self._graph._records[self._rec]

    @property
    def graph(self) -> Graph:
        """The graph this tensor belongs to."""
        return self._graph

    @property
    def dtype(self) -> DType:
        """The element type."""
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        """The static shape (None for dims known only when the graph runs)."""
        return TensorShape(self._shape)

    def get_shape(self) -> TensorShape:
        """The static shape (as :attr:`shape`)."""
        return self.shape

    def set_shape(self, shape: Any) -> None:
        """Refine the static shape; raises ``ValueError`` when incompatible."""
        new = TensorShape(shape)._dims
        if new is None:
            return
        if self._shape is not None:
            if len(new) != len(self._shape) or any(
                a is not None and b is not None and a != b for a, b in zip(self._shape, new, strict=True)
            ):
                raise ValueError(f"Shapes {_shape_text(self._shape)} and {_shape_text(new)} are incompatible")
            new = [a if a is not None else b for a, b in zip(self._shape, new, strict=True)]
        self._shape = new

    @property
    def name(self) -> str:
        """``op_name:index``."""
        if self._rec is None:
            return f"inline:{self._idx}"
        return f"{self._record().name}:{self._idx}"

    @property
    def op(self) -> Operation:
        """The op that produces this tensor."""
        return self._record().op  # type: ignore[return-value]

    @property
    def value_index(self) -> int:
        """Which output of its op this tensor is."""
        return self._idx

    def consumers(self) -> list[Operation]:
        """The ops that read this tensor."""
        out = []
        for i, r in enumerate(self._graph._records):
            if (self._rec, self._idx) in r.deps:
                out.append(self._graph._records[i].op)
        return out  # type: ignore[return-value]

    def eval(self, feed_dict: Mapping[Any, Any] | None = None, session: Session | None = None) -> Any:
        """This tensor's value in ``session`` (the default session when omitted)."""
        sess = session or get_default_session()
        if sess is None:
            raise ValueError(
                "Cannot evaluate tensor using `eval()`: No default session is registered. Use `with "
                "sess.as_default()` or pass an explicit session to `eval(session=sess)`"
            )
        return sess.run(self, feed_dict=feed_dict)

    def __bool__(self) -> bool:
        raise TypeError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` to test "
            "whether it is defined, or tf.cond to run ops depending on its value."
        )

    def __iter__(self) -> Iterator[Tensor]:
        if not self._shape or self._shape[0] is None:
            raise TypeError("Tensor objects are only iterable when their first dimension is known")
        for i in range(self._shape[0]):
            yield self[i]

    def __len__(self) -> int:
        if not self._shape or self._shape[0] is None:
            raise TypeError("len is not well defined for tensors whose first dimension is unknown")
        return self._shape[0]

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:  # TF1: identity, so tensors can key dicts
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    # -- operators build ops, as TF's do -------------------------------------

    def __add__(self, other: Any) -> Tensor:
        return _op_module().add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _op_module().add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _op_module().subtract(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _op_module().subtract(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _op_module().multiply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _op_module().multiply(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _op_module().divide(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _op_module().divide(other, self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _op_module().floordiv(self, other)

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _op_module().floordiv(other, self)

    def __mod__(self, other: Any) -> Tensor:
        return _op_module().mod(self, other)

    def __rmod__(self, other: Any) -> Tensor:
        return _op_module().mod(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return _op_module().pow(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return _op_module().pow(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _op_module().matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _op_module().matmul(other, self)

    def __lt__(self, other: Any) -> Tensor:
        return _op_module().less(self, other)

    def __le__(self, other: Any) -> Tensor:
        return _op_module().less_equal(self, other)

    def __gt__(self, other: Any) -> Tensor:
        return _op_module().greater(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return _op_module().greater_equal(self, other)

    def __and__(self, other: Any) -> Tensor:
        return _op_module().logical_and(self, other)

    def __rand__(self, other: Any) -> Tensor:
        return _op_module().logical_and(other, self)

    def __or__(self, other: Any) -> Tensor:
        return _op_module().logical_or(self, other)

    def __ror__(self, other: Any) -> Tensor:
        return _op_module().logical_or(other, self)

    def __neg__(self) -> Tensor:
        return _op_module().negative(self)

    def __abs__(self) -> Tensor:
        return _op_module().abs(self)

    def __invert__(self) -> Tensor:
        return _op_module().logical_not(self)

    def __getitem__(self, key: Any) -> Tensor:
        return _op_module()._getitem(self, key)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise TypeError(
            f"Cannot convert the symbolic tensor {self.name} to a NumPy array: "
            "run it with Session.run or .eval() first"
        )


def _op_module() -> Any:
    from . import _ops

    return _ops


class Operation:
    """A TF1 op: run it for its effect (``sess.run(train_op)``, ``op.run()``)."""

    def __init__(self, graph: Graph, rec: int | None) -> None:
        self._graph = graph
        self._rec = rec

    @property
    def graph(self) -> Graph:
        """The graph of this op."""
        return self._graph

    @property
    def name(self) -> str:
        """The op's unique name in its graph."""
        return "" if self._rec is None else self._graph._records[self._rec].name

    @property
    def type(self) -> str:
        """The op's kind (``MatMul``, ``Placeholder``...)."""
        return "" if self._rec is None else self._graph._records[self._rec].op_type

    @property
    def outputs(self) -> list[Tensor]:
        """The op's output tensors."""
        if self._rec is None:
            return []
        return [o for o in self._graph._records[self._rec].outputs if o is not None]

    @property
    def inputs(self) -> list[Tensor]:
        """The tensors this op reads."""
        if self._rec is None:
            return []
        recs = self._graph._records
        return [recs[d].outputs[k] for d, k in recs[self._rec].deps]

    @property
    def control_inputs(self) -> list[Operation]:
        """The ops that must run before this one."""
        if self._rec is None:
            return []
        recs = self._graph._records
        return [recs[c].op for c in recs[self._rec].control]  # type: ignore[misc]

    def run(self, feed_dict: Mapping[Any, Any] | None = None, session: Session | None = None) -> None:
        """Run this op in ``session`` (the default session when omitted)."""
        sess = session or get_default_session()
        if sess is None:
            raise ValueError(
                "Cannot execute operation using `run()`: No default session is registered. Use `with "
                "sess.as_default():` or pass an explicit session to `run(session=sess)`"
            )
        sess.run(self, feed_dict=feed_dict)

    def __repr__(self) -> str:
        return f"<tf.Operation '{self.name}' type={self.type}>"


# ----------------------------------------------------------------------------- helpers for op modules


def _convert(value: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    """``value`` as a tensor of the default graph: tensors pass through, data become constants."""
    if isinstance(value, Tensor):
        if dtype is not None and as_dtype(dtype) != value.dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {as_dtype(dtype).name} for Tensor with dtype "
                f"{value.dtype.name}: {value!r}"
            )
        return value
    return _constant(value, dtype, name)


def _numpy_of(value: Any, dtype: Any = None) -> np.ndarray:
    if isinstance(value, _core.Tensor):
        value = value.detach().numpy()
    if dtype is not None:
        return np.asarray(value, dtype=as_dtype(dtype).as_numpy_dtype)
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.float32)  # Python floats are float32, as in TF
    elif arr.dtype == np.int64 and not isinstance(value, (np.ndarray, np.integer)):
        arr = arr.astype(np.int32)  # Python ints are int32, as in TF
    if arr.dtype.name not in _DTYPES:
        raise TypeError(f"cannot make a constant of dtype {arr.dtype}")
    return arr


def _host_constant(value: Any, name: str | None) -> Tensor:
    """A string constant: kept on the host, fetched as bytes (ferrograd has no string tensors)."""
    arr = np.asarray(value, dtype=object)
    enc = np.vectorize(lambda v: v.encode() if isinstance(v, str) else bytes(v), otypes=[object])(arr)
    g = get_default_graph()
    rec = _Record(lambda: (None,), (), "Const", g._unique(name or "Const"), "host")
    rec.loc = _capture._user_location()
    idx = len(g._records)
    g._records.append(rec)
    g._by_name[rec.name] = idx
    rec.op = Operation(g, idx)
    t = Tensor(g, idx, 0, string, list(arr.shape))
    t._const = enc[()] if enc.ndim == 0 else enc
    rec.outputs = [t]
    return t


def _constant(value: Any, dtype: Any = None, name: str | None = None, shape: Any = None) -> Tensor:
    if isinstance(value, (str, bytes)) or (
        isinstance(value, (list, tuple)) and value and isinstance(value[0], (str, bytes))
    ):
        return _host_constant(value, name)
    arr = _numpy_of(value, dtype)
    if shape is not None:
        shape = [int(d) for d in shape]
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        else:
            arr = arr.reshape(shape)
    g = get_default_graph()
    held = arr.astype(np.int32) if arr.dtype in (np.int8, np.int16, np.uint8) else arr  # widened
    with _capture.suspended():
        real = _core.tensor(np.array(held, order="C"))
    t = g._apply(lambda: _core._trace_constant(real), (), "Const", name)
    t._const = arr
    return t


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool)


# Sessions live in their own module; it imports the names above, so it comes last.
from ._session import InteractiveSession, Session, get_default_session  # noqa: E402
