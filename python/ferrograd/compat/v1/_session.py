"""TensorFlow 1.x sessions: :class:`Session` runs the records of a graph (captured into one
:class:`ferrograd.Graph` per set of fetches and feeds), :class:`InteractiveSession` installs itself
as the default, and ``get_default_session`` finds the innermost ``with`` session."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ... import _capture, _core
from ... import graph as _fg
from ._framework import (
    FailedPreconditionError,
    Graph,
    InvalidArgumentError,
    Operation,
    Tensor,
    _Broken,
    _gstate,
    _Node,
    _Record,
    _shape_text,
    _too_wide,
    get_default_graph,
)

# ----------------------------------------------------------------------------- sessions


def _sess_stack() -> list[Session]:
    st = getattr(_gstate, "sessions", None)
    if st is None:
        st = _gstate.sessions = []
    return st


def get_default_session() -> Session | None:
    """The innermost session entered with ``with sess:`` / ``sess.as_default()``, or an InteractiveSession."""
    st = _sess_stack()
    return st[-1] if st else None


class Session:
    """Runs a TF1 graph: ``sess.run(fetches, feed_dict={placeholder: value})``.

    Variables must be initialized in a session before a run reads them
    (``sess.run(tf.global_variables_initializer())``). Values come back as
    NumPy arrays (NumPy scalars for 0-d results). The variables' values live
    in the graph's tensors, so sessions of one graph share them.
    """

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None) -> None:
        self.graph = graph if graph is not None else get_default_graph()
        self._initialized: set[int] = set()
        self._closed = False
        self._entered: list[Any] = []

    # -- context -----------------------------------------------------------

    def __enter__(self) -> Session:
        cm = self.as_default()
        cm.__enter__()
        self._entered.append(cm)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._entered:
            self._entered.pop().__exit__(*exc)
        self.close()

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Session]:
        """Make this the default session (for ``Tensor.eval`` / ``Operation.run``) in the block."""
        st = _sess_stack()
        st.append(self)
        g = self.graph.as_default()
        g.__enter__()
        try:
            yield self
        finally:
            g.__exit__(None, None, None)
            if self in st:
                st.reverse()
                st.remove(self)
                st.reverse()

    def close(self) -> None:
        """Close the session; running it afterwards raises."""
        self._closed = True

    @property
    def sess_str(self) -> str:
        """The target (always empty: runs are in-process)."""
        return ""

    # -- running -----------------------------------------------------------

    def run(
        self,
        fetches: Any,
        feed_dict: Mapping[Any, Any] | None = None,
        options: Any = None,
        run_metadata: Any = None,
    ) -> Any:
        """Run the ops ``fetches`` need; return their values in the same structure.

        ``fetches``: a tensor, an op, a variable, a name (``"loss:0"``), or
        nested lists/tuples/dicts of them; ops give None. ``feed_dict`` maps
        placeholders — or any tensor, to override its value — to NumPy
        arrays, lists or numbers.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        # The graph runs now, also in the middle of another capture (a `with fg.Graph():`
        # block): that capture is paused meanwhile, and nothing of the run is recorded into it.
        with _capture.suspended():
            return self._run(fetches, feed_dict)

    def _run(self, fetches: Any, feed_dict: Mapping[Any, Any] | None) -> Any:
        g = self.graph
        flat: list[Any] = []

        def collect(f: Any) -> Any:
            if isinstance(f, (list, tuple)) and not isinstance(f, (str, bytes)):
                items = [collect(x) for x in f]
                if hasattr(f, "_fields"):
                    return ("nt", type(f), items)
                return (type(f), items)
            if isinstance(f, Mapping):
                return ("dict", type(f), {k: collect(v) for k, v in f.items()})
            parts = getattr(f, "_parts", None)
            if parts is not None:  # a merged summary: its parts are fetched, then combined
                return ("merge", f, [collect(p) for p in parts])
            flat.append(self._fetch_item(f))
            return len(flat) - 1

        tree = collect(fetches)

        # Feeds.
        fed: dict[tuple[int, int], Any] = {}
        for k, v in (feed_dict or {}).items():
            t = g.get_tensor_by_name(k) if isinstance(k, str) else k
            if isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], Tensor):  # a SparseTensor-like pair
                raise TypeError("feeding sparse tensors is not supported")
            if not isinstance(t, Tensor):
                raise TypeError(f"feed_dict keys must be tensors or tensor names, got {type(k).__name__}")
            if t._graph is not g:
                raise ValueError(f"Tensor {t.name} is not an element of this session's graph")
            if t._rec is None:
                raise ValueError("cannot feed a tensor made inside a control-flow body")
            fed[(t._rec, t._idx)] = (t, _feed_value(t, v))
        overrides = frozenset(key for key in fed if g._records[key[0]].kind != "placeholder")
        shapes = tuple(
            sorted(
                (key[0], tuple(val.shape) if isinstance(val, _core.Tensor) else np.shape(val))
                for key, (t, val) in fed.items()
                if g._records[key[0]].kind == "placeholder"
                and ((t._shape is None and len(val.shape) > 0) or g._records[key[0]].wide)
            )
        ) + tuple(  # another tensor with too many unknown dims, fed: recorded at the fed shape
            sorted(
                (key, tuple(val.shape) if isinstance(val, _core.Tensor) else np.shape(val))
                for key, (t, val) in fed.items()
                if key in overrides and _too_wide(t._syms)
            )
        )

        # What the fetches need.
        starts: list[int] = []
        for kind, recs, t in flat:
            if kind == "tensor" and (t._rec, t._idx) in fed:
                continue  # a fed fetch gives the fed value
            starts.extend(recs)
        needed, missing, reads = g._walk(tuple(sorted(set(starts))), frozenset(fed))
        if missing:
            rec = g._records[missing[0]]
            out = rec.outputs[0]
            where = f" (created at {rec.loc})" if rec.loc else ""
            raise InvalidArgumentError(
                None,
                rec.op,
                f"You must feed a value for placeholder tensor '{rec.name}' with dtype {out.dtype.name}"
                f" and shape {_shape_text(out._shape)}{where}",
            )
        inits = {id(v) for r in needed for v in g._records[r].inits}
        for r in reads:
            var = g._records[r].outputs[0]
            if id(var) not in self._initialized and id(var) not in inits:
                rec = g._records[r]
                where = f" (created at {rec.loc})" if rec.loc else ""
                local = any(v is var for v in g.get_collection("local_variables"))
                init = "tf.local_variables_initializer()" if local else "tf.global_variables_initializer()"
                raise FailedPreconditionError(
                    None,
                    rec.op,
                    f"Attempting to use uninitialized value {rec.name}{where}: run "
                    f"{init} (or the variable's initializer) in this session first",
                )

        ep = g._build(overrides, shapes)
        ops: list[_fg.Operation] = []
        for r in needed:
            if isinstance(ep.vals[r], _Broken):
                exc = next(
                    (getattr(ep.vals[q], "exc", None) for q in needed if getattr(ep.vals[q], "exc", None)),
                    None,
                )
                raise InvalidArgumentError(
                    None,
                    g._records[r].op,
                    f"cannot compute {g._records[r].name} with the tensors fed in this run: {exc}",
                )
            for o in ep.vals[r]:
                if isinstance(o, _Node):
                    ops.append(_fg.Operation(ep.fgg, o.id, g._records[r].name))
        twins: list[Any] = []
        where_of: dict[int, int] = {}
        for item in flat:
            kind, _, t = item
            if kind == "tensor" and (t._rec, t._idx) not in fed:
                twin = ep.vals[t._rec][t._idx]
                if twin is not None and twin.is_meta and id(t) not in where_of:
                    where_of[id(t)] = len(twins)
                    twins.append(twin)
        # tf.Print ops this run computes: their data is fetched too, and printed after the run.
        prints: list[tuple[_Record, list[Any]]] = []
        for r in needed:
            rec = g._records[r]
            if rec.printing is None:
                continue
            message, data, first_n, _ = rec.printing
            if first_n is not None and 0 <= first_n <= rec.printed:
                continue
            got: list[Any] = []
            for t in data:
                key = (t._rec, t._idx)
                twin = None if key in fed else ep.vals[t._rec][t._idx]
                if twin is not None and twin.is_meta:
                    got.append(len(twins))
                    twins.append(twin)
                else:
                    got.append(np.asarray(fed[key][1]) if twin is None else twin.detach().numpy().copy())
            prints.append((rec, got))
        feed = {ep.feeds[key]: val for key, (_, val) in fed.items() if key in ep.feeds}
        results: list[Any] = []
        if twins or ops:
            try:
                results = ep.session.run(twins + ops, feed=feed)  # type: ignore[union-attr]
            except ValueError as e:
                raise InvalidArgumentError(None, None, str(e)) from None
        for v in inits:
            self._initialized.add(v)
        for rec, got in prints:
            message, _, _, summarize = rec.printing  # type: ignore[misc]
            arrays = [results[x].numpy() if isinstance(x, int) else x for x in got]
            rec.printed += 1
            print(message + "".join(_summarize(a, summarize) for a in arrays), file=sys.stderr)

        values: list[Any] = []
        for item in flat:
            kind, _, t = item
            if kind == "op":
                values.append(None)
                continue
            key = (t._rec, t._idx)
            if key in fed:
                val = np.asarray(fed[key][1])
            elif g._records[t._rec].kind == "host":  # a string constant
                values.append(t._const)
                continue
            else:
                twin = ep.vals[t._rec][t._idx]
                if twin.is_meta:
                    val = results[where_of[id(t)]].numpy()
                else:  # state read by reference (a variable, an assignment's result)
                    val = twin.detach().numpy().copy()
            post = getattr(t, "_post", None)
            values.append(post(val) if post is not None else _scalarize(val))

        def rebuild(node: Any) -> Any:
            if isinstance(node, int):
                return values[node]
            if node[0] == "merge":
                return node[1]._merge([rebuild(x) for x in node[2]])
            if node[0] == "nt":
                return node[1](*(rebuild(x) for x in node[2]))
            if node[0] == "dict":
                return node[1]((k, rebuild(v)) for k, v in node[2].items())
            return node[0](rebuild(x) for x in node[1])

        return rebuild(tree)

    def to_fg_graph(self, fetches: Any) -> _fg.Graph:
        """The ferrograd graph that computes ``fetches`` (a tensor, an op, a name or a
        list/tuple of them) from the placeholders they need, pruned and optimized.

        It is an ordinary :class:`ferrograd.Graph` whose outputs are the fetched
        tensors (ops, such as a training step, are kept for their effects):
        ``.save(path)`` writes it for :func:`ferrograd.load_graph` and the Rust-only
        runner, with the variables' current values (they must be initialized in
        this session); ``ferrograd.onnx.export(graph, None, path)`` exports it to
        ONNX (an op without an ONNX form, such as an optimizer update, is named in
        the error); calling it (placeholders by name) runs it. Its inputs are
        the placeholders in the order they were made; a placeholder declared
        without a shape is an input of shape ``()`` there.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        with _capture.suspended():
            return self._to_fg_graph(fetches)

    def _to_fg_graph(self, fetches: Any) -> _fg.Graph:
        from ..._compile import optimize

        g = self.graph
        many = isinstance(fetches, (list, tuple))
        items = [self._fetch_item(f) for f in (fetches if many else [fetches])]
        if not items:
            raise ValueError("Session.to_fg_graph: give at least one tensor or op to compute")
        starts = sorted({r for _, recs, _ in items for r in recs})
        needed, _, reads = g._walk(tuple(starts), frozenset())
        for r in reads:
            var = g._records[r].outputs[0]
            if id(var) not in self._initialized:
                rec = g._records[r]
                raise FailedPreconditionError(
                    None,
                    rec.op,
                    f"Session.to_fg_graph: the graph stores the current value of {rec.name}, which is "
                    "uninitialized: run tf.global_variables_initializer() in this session first",
                )
        ep = g._build(frozenset(), ())
        for r in needed:
            if isinstance(ep.vals[r], _Broken):
                raise InvalidArgumentError(
                    None, g._records[r].op, f"cannot compute {g._records[r].name}: {ep.vals[r].exc}"
                )
        built = ep.fgg._built()
        vals: list[int] = []
        ops: list[int] = []
        for kind, _, t in items:
            if kind == "op":
                if t._rec is not None:
                    ops.extend(o.id for o in ep.vals[t._rec] if isinstance(o, _Node))
                continue
            twin = ep.vals[t._rec][t._idx]
            vid = built.value_id(twin) if twin is not None and twin.is_meta else None
            if vid is None:
                raise ValueError(
                    f"Session.to_fg_graph: {t.name} is not computed by the graph (a variable or a "
                    "constant held as it is); fetch an op's result, e.g. tf.identity of it"
                )
            vals.append(vid)
        sub, _ = optimize(built.prune(vals, ops, False))
        out = _fg.Graph._wrap(sub, scalars=ep.fgg._scalars, state=ep.fgg._state)
        out._placeholders = list(ep.fgg._placeholders)
        out._ph_devices = dict(ep.fgg._ph_devices)
        return out

    def _fetch_item(self, f: Any) -> tuple[str, list[int], Any]:
        g = self.graph
        if isinstance(f, str):
            f = g.get_tensor_by_name(f) if ":" in f else g.get_operation_by_name(f)
        if f is None:
            raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
        if isinstance(f, Tensor):
            if f._graph is not g:
                raise ValueError(f"Tensor {f.name} is not an element of this graph.")
            if f._rec is None:
                raise ValueError("cannot fetch a tensor made inside a control-flow body")
            return ("tensor", [f._rec], f)
        if isinstance(f, Operation):
            if f._graph is not g:
                raise ValueError(f"Operation {f.name} is not an element of this graph.")
            return ("op", [] if f._rec is None else [f._rec], f)
        raise TypeError(
            f"Fetch argument {f!r} has invalid type {type(f).__name__}: must be a tensor, an operation, "
            "or a string name"
        )


class InteractiveSession(Session):
    """A session that makes itself the default on creation (for shells and notebooks)."""

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None) -> None:
        super().__init__(target, graph, config)
        self._cm: Any = self.as_default()
        self._cm.__enter__()

    def close(self) -> None:
        """Close the session and stop it being the default."""
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None
        super().close()


def _scalarize(val: np.ndarray) -> Any:
    return val[()] if isinstance(val, np.ndarray) and val.ndim == 0 else val


def _summarize(a: np.ndarray, summarize: int) -> str:
    """A tensor as TF1's Print shows it: ``[1 2 3...]``, the first ``summarize`` entries of each dim."""

    def one(x: Any) -> str:
        if isinstance(x, (bool, np.bool_)):
            return "1" if x else "0"
        if isinstance(x, (float, np.floating)):
            return f"{float(x):g}"
        return str(x)

    def rec(x: np.ndarray) -> str:
        if x.ndim == 0:
            return one(x.item())
        parts = [rec(x[i]) for i in range(min(len(x), summarize))]
        more = "..." if len(x) > summarize else ""
        return "[" + (" " if x.ndim == 1 else "").join(parts) + more + "]"

    a = np.asarray(a)
    return rec(a) if a.ndim else "[" + one(a.item()) + "]"


def _feed_value(t: Tensor, v: Any) -> Any:
    """A fed value as an array of ``t``'s dtype, checked against its static shape."""
    arr: Any
    if isinstance(v, _core.Tensor):
        arr = v
        shape = list(v.shape)
    else:
        arr = np.asarray(v, dtype=t.dtype.as_numpy_dtype)
        shape = list(arr.shape)
    want = t._shape
    rec = t._graph._records[t._rec]  # type: ignore[index]
    if want is not None and (
        len(want) != len(shape) or any(w is not None and w != s for w, s in zip(want, shape, strict=True))
    ):
        raise ValueError(
            f"Cannot feed value of shape {tuple(shape)} for Tensor '{t.name}', which has shape "
            f"{_shape_text(want)}" + (f" (created at {rec.loc})" if rec.loc else "")
        )
    return arr
