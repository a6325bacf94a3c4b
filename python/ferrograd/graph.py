"""Explicit define-and-run graphs, in TensorFlow 1.x's vocabulary.

::

    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(None, 3), name="x")
        y = fg.placeholder(fg.float32, shape=(None, 3), name="y")
        loss = (x * y).sum()
        dx, dy = fg.gradients(loss, [x, y])
    out, gx = fg.Session(g).run([loss, dx], feed={x: [[1., 2., 3.]], y: [[4., 5., 6.]]})

Inside ``with g:`` every op is recorded, not run: tensors are *captured*
values with a dtype and a shape (``None`` dims of placeholders are
symbolic: one graph serves every size). ``Session.run`` runs just the part
of the graph its fetches need, with the feeds bound to the placeholders.
:class:`Variable` holds state that persists between runs; ``assign`` and
friends return an :class:`Operation` to fetch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import _capture, _core

Tensor = _core.Tensor

__all__ = [
    "Graph",
    "GraphFileError",
    "Operation",
    "Session",
    "Variable",
    "global_variables_initializer",
    "gradients",
    "variables_initializer",
    "placeholder",
    "get_default_graph",
    "load_graph",
]


class GraphFileError(ValueError):
    """A saved-graph file is malformed: truncated, corrupt, of another version, or not a saved graph."""


_stack: list[Graph] = []


def get_default_graph() -> Graph | None:
    """The graph being built by the innermost ``with graph:`` block, if any."""
    return _stack[-1] if _stack else None


class Operation:
    """A recorded op run for its effect (e.g. ``Variable.assign``); fetch it to run it."""

    def __init__(self, graph: Graph, node: int, name: str) -> None:
        self.graph = graph
        self.node = node
        self.name = name

    def __repr__(self) -> str:
        return f"<Operation {self.name!r} (node {self.node})>"


class Graph:
    """A captured computation graph.

    Built explicitly (``with fg.Graph() as g: ...``) or returned by a
    compiled function (``f.graph(*args)``). ``dump()`` lists it; the graph
    object itself runs through :class:`Session` (explicit graphs) or the
    compiled function.
    """

    def __init__(self) -> None:
        self._g: Any = None  # the Rust graph once capture has ended
        self._placeholders: list[tuple[Tensor, str | None, tuple, str | None]] = []
        self._ph_devices: dict[int, str] = {}  # placeholder position -> device it is fed on
        self._building = False
        self._state: _capture.TraceState | None = None
        self._ctx: Any = None
        self._sessions_cache: dict = {}
        self._scalars: Any = None  # dynamic scalar arguments of a compiled graph
        self._times: list[float] | None = None  # node times of the last profile()
        self._memory: tuple[list[int], list[int]] | None = None  # its bytes allocated / held per node
        self._variables: list[Variable] = []  # variables made inside `with self:`, in order
        self._any_shape: set[int] = set()  # positions of placeholders declared without a shape
        # id of a gradients() result -> its shape, or the position of the unshaped placeholder it is taken for
        self._grad_shapes: dict[int, tuple | int] = {}
        self._keep: list[Any] = []  # keeps the tensors keyed by id above alive

    @classmethod
    def _wrap(
        cls,
        g: Any,
        raw: Any = None,
        reports: list[dict] | None = None,
        scalars: Any = None,
        state: _capture.TraceState | None = None,
    ) -> Graph:
        obj = cls()
        obj._g = g
        obj._scalars = scalars
        obj._raw = raw
        obj._reports = reports or []
        obj._state = state
        return obj

    # -- building ----------------------------------------------------------

    def __enter__(self) -> Graph:
        if self._g is not None:
            raise RuntimeError("this graph is already built; create a new fg.Graph() to record another")
        if _core._trace_recording():
            raise RuntimeError("a graph is already being recorded on this thread")
        _core._trace_begin()
        self._building = True
        self._state = _capture.TraceState()
        self._ctx = _capture.capturing(self._state)
        self._ctx.__enter__()
        _stack.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _stack.pop()
        self._ctx.__exit__(exc_type, exc, tb)
        self._building = False
        if exc_type is not None:
            _core._trace_abort()
            return
        self._g = _core._trace_end([])

    def _built(self) -> Any:
        if self._g is None:
            raise RuntimeError("the graph is still being recorded: run it after its `with` block")
        return self._g

    # -- inspection -------------------------------------------------------

    def dump(self, optimized: bool = True) -> str:
        """A readable listing: inputs (parameters under their ``state_dict``
        names), nodes (op, attributes, types, source line, module path),
        outputs. Nodes are grouped under a comment line naming their region
        and module (``# forward: blocks.0.attn (CausalSelfAttention)``).

        ``optimized=False`` shows the graph as captured, before the passes.
        """
        from ._graphview import annotate_dump

        g = self._raw if not optimized and getattr(self, "_raw", None) is not None else self._built()
        return annotate_dump(g.dump(), self._input_names(g), self._module_types())

    def _input_names(self, g: Any = None) -> dict[int, str]:
        """Value number -> name of the graph's named inputs: placeholder and
        argument names, and the tensors read by reference under the names
        the trace gave them (parameters as in ``state_dict``)."""
        g = self._built() if g is None else g
        known = self._state.named_tensors() if self._state is not None else {}
        saved = _json_meta(self, _META_REF_NAMES) or []
        out: dict[int, str] = {}
        refs = 0
        for inp in g.inputs():
            name = inp.get("name")
            if inp["kind"] == "ref":
                if not name:
                    name = known.get(_capture.tensor_key(inp.get("tensor")))
                if not name and refs < len(saved):
                    name = saved[refs]
                refs += 1
            elif inp["kind"] == "arg" and not name and self._state is not None:
                arg_names = self._state.arg_names or []
                pos = inp.get("position")
                name = arg_names[pos] if pos is not None and pos < len(arg_names) else None
            if name:
                out[inp["value"]] = name
        return out

    def _module_types(self) -> dict[str, str]:
        """Module path -> class name of the modules the trace called."""
        if self._state is not None:
            return dict(self._state.module_types)
        return _json_meta(self, _META_MODULE_TYPES) or {}

    @property
    def passes(self) -> list[dict]:
        """What each graph pass did: ``[{"pass", "nodes_before", "nodes_after", "detail"}]``."""
        return list(getattr(self, "_reports", []))

    def __str__(self) -> str:
        return self.dump() if self._g is not None else "<graph being recorded>"

    def __repr__(self) -> str:
        return repr(self._g) if self._g is not None else "<graph being recorded>"

    @property
    def num_nodes(self) -> int:
        """Number of op nodes."""
        return self._built().num_nodes

    def nodes(self) -> list[dict]:
        """Each node as a dict: op, attrs, inputs, outputs (value numbers), loc, effect."""
        return self._built().nodes()

    def values(self) -> list[dict]:
        """Each value as a dict: shape (symbolic dims by name), dtype, producer."""
        return self._built().values()

    def inputs(self) -> list[dict]:
        """Each input as a dict: kind (arg, ref, const, grad), value, name."""
        return self._built().inputs()

    @property
    def outputs(self) -> list[int]:
        """Output value numbers."""
        return self._built().outputs

    @property
    def device(self) -> str:
        """The device the graph runs on: its arguments' (``"cpu"`` or ``"gpu"``)."""
        return str(self._built().device())

    def verify(self) -> None:
        """Check the graph's structural invariants (raises on a violation)."""
        self._built().verify()

    # -- running for inspection ------------------------------------------

    def _args(self, args: tuple, feed: Mapping[Any, Any] | None) -> list[Tensor]:
        """Tensor arguments in input-position order, from positional tensors or a placeholder feed."""
        if feed is None:
            return [a if isinstance(a, Tensor) else _core.tensor(a) for a in args]
        if args:
            raise TypeError("pass either tensors in argument order or feed={placeholder: value}, not both")
        fed = {id(k): v for k, v in feed.items()}
        out: list[Tensor] = []
        for pos, (ph, name, shape, _loc) in enumerate(self._placeholders):
            if id(ph) not in fed:
                raise ValueError(f"placeholder {name or pos!r} with shape {_fmt_shape(shape)} must be fed")
            v = fed[id(ph)]
            out.append(
                v
                if isinstance(v, Tensor)
                else _core.tensor(v, dtype=ph.dtype, device=self._ph_devices.get(pos))
            )
        return out

    def profile(self, *args: Any, feed: Mapping[Any, Any] | None = None) -> list[dict]:
        """Run the graph once, measuring every node; returns
        ``[{"node", "op", "seconds", "loc", "bytes_allocated", "bytes_held"}]``
        (also kept for :meth:`to_html` and :meth:`to_dot`).

        ``seconds`` is the node's wall time; ``bytes_allocated`` what it took
        from the CPU allocator and the GPU buffer pool while it ran (scratch
        space included; a result written over a dying input or into a buffer
        the graph recycles takes nothing); ``bytes_held`` the bytes in use after
        it and the releases that follow it, less those in use when the run
        began. Branches that a plain run executes side by side run one after
        the other here, so each node's figures are its own.

        Arguments: the tensors in argument order (a compiled function's
        tensor arguments), or ``feed={placeholder: value}`` for an explicit graph.
        A graph that updates state (an optimizer step) updates it when profiled, as when run.
        """
        from ._grad_mode import no_grad

        g = self._built()
        scalars = self._scalars() if self._scalars is not None else []
        with _capture.suspended(), no_grad():
            _, times, allocated, held = g.profile(self._args(args, feed), scalars)
        self._times = times
        self._memory = (allocated, held)
        return [
            {"node": i, "op": n["op"], "seconds": t, "loc": n["loc"], "bytes_allocated": a, "bytes_held": h}
            for i, (n, t, a, h) in enumerate(zip(g.nodes(), times, allocated, held, strict=True))
        ]

    def memory_plan(self, *args: Any, feed: Mapping[Any, Any] | None = None) -> dict:
        """Bytes the graph needs per run, by liveness of its buffers.

        ``{"peak_bytes", "total_bytes", "input_bytes", "output_bytes",
        "allocations", "in_place", "recycled", "live_after"}``: ``peak_bytes`` is the most
        memory held by node-made buffers at once when each is released after
        its last use (as the executor does); ``total_bytes`` is what they would
        take without any release; ``in_place`` counts fused-kernel outputs
        written into the buffer of an input that dies at their node (an
        intermediate result, never an argument or parameter); ``recycled``
        counts the allocations that, once the graph has run, take a buffer
        of at most 256 KiB kept from an earlier run instead of allocating. Arguments (as for :meth:`profile`) are
        needed only to fix the sizes of symbolic dimensions.
        """
        g = self._built()
        if not args and feed is None:
            return g.memory_plan()
        return g.memory_plan(self._args(args, feed))

    def gpu_replay(self, *args: Any, feed: Mapping[Any, Any] | None = None) -> dict | None:
        """How runs of this graph on the GPU replay their device work.

        A GPU graph captures one run's dispatches and replays them on later
        runs with the same input layouts, skipping the executor; optimizer
        steps run live in between, with the run's learning rate and step
        counts (see ``docs/architecture.md``). ``None`` for a CPU graph;
        else ``{"replays", "captures", "dispatches", "plan_bytes", "reason"}``:
        runs replayed and captured so far, the dispatches and plan-owned bytes
        of the current replay (``None`` without one), and why the last capture
        cannot be replayed or why runs never replay (random draws, outputs that
        record autograd; ``None`` if they do). Arguments as for :meth:`memory_plan`.
        """
        g = self._built()
        if not args and feed is None:
            return g.gpu_replay()
        return g.gpu_replay(self._args(args, feed))

    def parallel_pairs(self, *args: Any, feed: Mapping[Any, Any] | None = None) -> list[tuple[int, int]]:
        """Pairs of node indices ``(i, j)`` that run at the same time.

        Independent branches run concurrently on the thread pool when each
        node is large enough to pay for handing it to another thread: the
        later node ``j`` needs nothing computed at or after ``i`` and runs
        beside it. Arguments as for :meth:`memory_plan`.
        """
        g = self._built()
        if not args and feed is None:
            return g.parallel_pairs()
        return g.parallel_pairs(self._args(args, feed))

    # -- saving and running saved graphs ---------------------------------

    def save(self, path: Any, outputs: Any = None, metadata: Mapping[str, str] | None = None) -> None:
        """Write the graph and the tensors it reads to ``path``, a versioned
        file that :func:`load_graph` (or the crate's Rust-only ``run_graph``
        example) runs without the code that built it.

        The file is a safetensors file (so safetensors readers list its
        weights) whose metadata holds the graph; nothing in it is executable
        and no pickle is used. Tensors read by reference (parameters, buffers,
        optimizer state) are stored with their current values. ``outputs``
        (required for an explicit ``fg.Graph``, which has no outputs of its
        own) lists the tensors to compute and the :class:`Operation` objects to keep,
        as ``Session.run``'s fetches; a compiled function's graph keeps its
        outputs. ``metadata``: extra strings stored in the file.
        """
        import os

        g = self._built()
        if outputs is not None:
            from ._compile import optimize

            outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
            vals: list[int] = []
            ops: list[int] = []
            for o in outs:
                if isinstance(o, Operation):
                    ops.append(o.node)
                    continue
                vid = g.value_id(o) if isinstance(o, Tensor) else None
                if vid is None:
                    raise ValueError("Graph.save: every output must be a tensor or Operation of this graph")
                vals.append(vid)
            g, _ = optimize(g.prune(vals, ops, False))
        elif not g.outputs:
            raise ValueError(
                "Graph.save: an explicit graph has no outputs of its own; pass outputs=[tensors]"
            )
        scalars = list(self._scalars()) if self._scalars is not None else []
        meta = {str(k): str(v) for k, v in (metadata or {}).items()}
        import json

        names = [ph_name for (_, ph_name, _, _) in self._placeholders]
        if names and "placeholders" not in meta:
            meta["placeholders"] = json.dumps(names)
        if outputs is None:  # the graph saved as it is: its references keep their order
            ref_names = self._ref_names(g.references())
            if any(ref_names):
                meta[_META_REF_NAMES] = json.dumps(ref_names)
        types = self._module_types()
        if types:
            meta[_META_MODULE_TYPES] = json.dumps(types)
        _core._graph_save(g, os.fspath(path), scalars, meta)

    def export_webgpu(
        self,
        path: Any,
        *args: Any,
        feed: Mapping[Any, Any] | None = None,
        scalars: Sequence[float] | None = None,
        sizes: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    ) -> dict:
        """Write the graph as a WebGPU bundle into the directory ``path``:
        WGSL modules (``shaders/*.wgsl``), ``manifest.json`` (buffers, bind
        groups, dispatch order, inputs and outputs) and ``data.bin`` (weights
        and kernel metadata), and ``model.js``, the ES module that runs it in a web
        page (``load(url)``, ``model.run({name: array})``; docs/webgpu-bundle.md). Any WebGPU runtime can run it without
        ferrograd; ``examples/run_webgpu_bundle.py`` is a complete loader
        for wgpu-py. Returns the manifest.

        The graph must run on the gpu device (captured with GPU arguments).
        The bundle holds the exact dispatches of one run, recorded without
        running anything, so exporting changes no tensor; parameters and
        other state are stored with their current values, and dynamic scalar
        arguments (``scalars``, as for calling the graph) are fixed at the
        values given. Arguments (as for :meth:`profile`) are needed only for
        symbolic dimensions; by default zeros of the captured shapes stand in.
        Ops that read GPU data back to the host during a run (data-dependent
        shapes, host-side range checks) cannot be exported and raise.

        ``sizes`` exports a graph with symbolic dimensions (``fg.compile(f,
        dynamic=True)``) for several sizes at once: a list of sizes for its one
        symbol, or ``{symbol: [sizes]}`` (every combination is exported). The
        first combination is the bundle at ``path`` itself (what a loader of
        one fixed-size bundle runs); each other one is a complete bundle under
        ``path/variants/``, listed in the manifest's ``variants``, and
        ``model.js`` picks the one whose shapes match the inputs of each run.
        """
        import json
        import os

        from ._grad_mode import no_grad

        g = self._built()
        if not g.device().startswith("gpu"):
            raise RuntimeError(
                f"export_webgpu: the graph runs on {g.device()}; capture it with tensors on the gpu "
                "device (x.to('gpu')) to export it"
            )
        if scalars is None:
            scal = list(self._scalars()) if self._scalars is not None else []
        else:
            scal = [float(x) for x in scalars]
        if sizes is not None:
            if args or feed is not None:
                raise ValueError("export_webgpu: pass either sizes= or example arguments, not both")
            return self._export_webgpu_sizes(g, os.fspath(path), sizes, scal)
        if args or feed is not None:
            tensors = [t.contiguous() for t in self._args(args, feed)]
        else:
            if g.symbols:
                raise ValueError(
                    f"export_webgpu: the graph has symbolic dimensions ({', '.join(g.symbols)}); "
                    "pass example arguments to fix their sizes"
                )
            arg_inputs = sorted((i for i in g.inputs() if i["kind"] == "arg"), key=lambda i: i["position"])
            values = g.values()
            tensors = [
                _core.zeros(
                    *(int(d) for d in values[i["value"]]["shape"]),
                    dtype=_dtype_named(values[i["value"]]["dtype"]),
                    device="gpu",
                )
                for i in arg_inputs
            ]
        with no_grad():
            text = g.export_webgpu(os.fspath(path), tensors, scal)
        _write_model_js(os.fspath(path))
        return json.loads(text)

    def _export_webgpu_sizes(
        self, g: Any, path: str, sizes: Sequence[int] | Mapping[str, Sequence[int]], scal: list[float]
    ) -> dict:
        """export_webgpu with ``sizes``: one bundle per combination of the symbols' sizes."""
        import itertools
        import json
        import os

        from ._grad_mode import no_grad

        symbols = list(g.symbols)
        if not symbols:
            raise ValueError(
                "export_webgpu: sizes= needs a graph with symbolic dimensions "
                "(capture it with fg.compile(f, dynamic=True)); this graph has none"
            )
        if isinstance(sizes, Mapping):
            table = {str(k): [int(v) for v in vs] for k, vs in sizes.items()}
        else:
            if len(symbols) != 1:
                raise ValueError(
                    f"export_webgpu: the graph has {len(symbols)} symbolic dimensions ({', '.join(symbols)}); "
                    "pass sizes={symbol: [sizes]} naming each"
                )
            table = {symbols[0]: [int(v) for v in sizes]}
        if sorted(table) != sorted(symbols):
            raise ValueError(
                f"export_webgpu: sizes= names {sorted(table)}, but the graph's symbolic dimensions are {symbols}"
            )
        for k, vs in table.items():
            if not vs or any(v < 1 for v in vs) or len(set(vs)) != len(vs):
                raise ValueError(f"export_webgpu: sizes for {k} must be distinct positive integers, got {vs}")
        values = g.values()
        arg_inputs = sorted((i for i in g.inputs() if i["kind"] == "arg"), key=lambda i: i["position"])
        in_dims = [list(values[i["value"]]["shape"]) for i in arg_inputs]
        out_dims = [list(values[v]["shape"]) for v in g.outputs]

        def dims(shape: list[str]) -> list[int | str]:
            return [int(d) if d.lstrip("-").isdigit() else d for d in shape]

        for shape in in_dims:
            for d in shape:
                if not d.isdigit() and d not in table:
                    raise ValueError(
                        f"export_webgpu: an argument's dimension is the expression {d!r}; sizes= needs "
                        "arguments whose dimensions are numbers or single symbols"
                    )
        names = list(table)
        combos = [dict(zip(names, c, strict=True)) for c in itertools.product(*(table[k] for k in names))]
        manifests = []
        for k, combo in enumerate(combos):
            sub = "" if k == 0 else "variants/" + "_".join(f"{n}-{combo[n]}" for n in names) + "/"
            tensors = [
                _core.zeros(
                    *(int(d) if d.isdigit() else combo[d] for d in shape),
                    dtype=_dtype_named(values[i["value"]]["dtype"]),
                    device="gpu",
                )
                for i, shape in zip(arg_inputs, in_dims, strict=True)
            ]
            with no_grad():
                text = g.export_webgpu(os.path.join(path, sub), tensors, scal)
            manifests.append((sub, combo, json.loads(text)))
        variants = [
            {
                "sizes": combo,
                "path": sub,
                "inputs": [p["shape"] for p in m["inputs"]],
                "outputs": [p["shape"] for p in m["outputs"]],
            }
            for sub, combo, m in manifests
        ]
        # Every variant runs on the device made for the first: it asks for all of their needs.
        limits: dict[str, int] = {}
        features: list[str] = []
        for _, _, m in manifests:
            for key, v in m["limits"].items():
                limits[key] = max(limits.get(key, 0), int(v))
            features += [f for f in m["features"] if f not in features]
        for sub, _, m in manifests:
            for port, shape in zip(m["inputs"], in_dims, strict=True):
                port["symbolic_shape"] = dims(shape)
            for port, shape in zip(m["outputs"], out_dims, strict=True):
                port["symbolic_shape"] = dims(shape)
            if sub == "":
                m["variants"] = variants
                m["limits"], m["features"] = limits, features
            with open(os.path.join(path, sub, "manifest.json"), "w", encoding="utf-8") as f:
                json.dump(m, f, indent=2, sort_keys=True)
        _write_model_js(path)
        return manifests[0][2]

    def __call__(self, *args: Any, scalars: Sequence[float] | None = None, **named: Any) -> Any:
        """Run the graph: tensors (or arrays/lists) for its arguments in
        position order, or by placeholder name as keywords; returns its one
        output, or a tuple of them.

        A graph that updates state (a saved training step) updates the
        tensors it holds (see :meth:`state_dict`). A graph whose optimizer
        arguments change between runs (learning rate, Adam step counts)
        needs ``scalars=`` at every run, one value per slot (see
        :attr:`scalar_slots`).
        """
        from ._grad_mode import no_grad

        g = self._built()
        arg_inputs = [i for i in g.inputs() if i["kind"] == "arg"]
        n = max((i["position"] for i in arg_inputs), default=-1) + 1
        by_name = {i["name"]: i["position"] for i in arg_inputs if i.get("name")}
        dtypes = {i["position"]: g.values()[i["value"]]["dtype"] for i in arg_inputs}
        vals: list[Any] = list(args) + [_EMPTY] * max(0, n - len(args))
        if len(args) > n:
            raise TypeError(f"the graph takes {n} arguments, {len(args)} were given")
        for k, v in named.items():
            if k not in by_name:
                raise TypeError(f"the graph has no argument named {k!r} (it has {sorted(by_name)})")
            if by_name[k] < len(args):
                raise TypeError(f"argument {k!r} given by position and by name")
            vals[by_name[k]] = v
        missing = [p for p in sorted(dtypes) if vals[p] is _EMPTY]
        if missing:
            raise TypeError(f"the graph needs arguments at positions {missing}")
        tensors = [
            v if isinstance(v, Tensor) else _core.tensor(v, dtype=_dtype_named(dtypes.get(p, "float32")))
            for p, v in enumerate(vals)
        ]
        slots = g.scalar_slots()
        if scalars is None:
            if self._scalars is not None:
                scal = list(self._scalars())
            elif slots:
                raise ValueError(
                    f"the graph reads {len(slots)} scalar arguments at every run ({', '.join(slots)}); "
                    f"pass scalars=[...] (their values when saved: {getattr(self, '_saved_scalars', [])})"
                )
            else:
                scal = []
        else:
            scal = [float(x) for x in scalars]
            if len(scal) != len(slots):
                raise ValueError(
                    f"the graph reads {len(slots)} scalar arguments ({', '.join(slots)}), got {len(scal)}"
                )
        with _capture.suspended(), no_grad():
            outs = g.run(tensors, scal)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def state_dict(self) -> dict[str, Tensor]:
        """The tensors the graph reads by reference (parameters, buffers,
        optimizer state), by name (unnamed ones as ``ref<k>``). For a loaded
        graph they are its own tensors: a saved training step updates them."""
        out: dict[str, Tensor] = {}
        refs = self._built().references()
        for k, ((_, t), name) in enumerate(zip(refs, self._ref_names(refs), strict=True)):
            out[name if name and name not in out else f"ref{k}"] = t
        return out

    def _ref_names(self, refs: list) -> list[str | None]:
        """The name of each tensor read by reference (``references()`` order), None if unknown."""
        known = self._state.named_tensors() if self._state is not None else {}
        saved = _json_meta(self, _META_REF_NAMES) or []
        return [
            name or known.get(_capture.tensor_key(t)) or (saved[k] if k < len(saved) else None)
            for k, (name, t) in enumerate(refs)
        ]

    @property
    def scalar_slots(self) -> list[str]:
        """What each scalar argument of the graph supplies, by slot (empty for most graphs)."""
        return self._built().scalar_slots()

    @property
    def metadata(self) -> dict[str, str]:
        """Extra strings stored with a loaded graph (empty otherwise)."""
        return {k: v for k, v in getattr(self, "_metadata", {}).items() if not k.startswith(_META_OWN)}

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text, one cluster per region and module
        (node times included after :meth:`profile`)."""
        from ._graphview import to_dot

        return to_dot(self._built(), self._times, self._input_names(), self._module_types(), self._memory)

    def to_html(self, path: str | None = None, title: str = "ferrograd graph") -> str:
        """A self-contained HTML page drawing the graph, written to ``path`` if
        given; returns the page. It needs no network and no server (open it
        from disk): a layered layout (dagre's, inlined) of op nodes grouped by
        region (forward, backward, optimizer) and module (``blocks.0.attn``),
        groups that open and close, pan and zoom, and a panel with each node's
        attributes, shapes, source line, module and, after :meth:`profile`,
        its time and measured bytes (nodes coloured by time)."""
        from ._graphview import to_html

        return to_html(
            self._built(), path, self._times, title, self._input_names(), self._module_types(), self._memory
        )


def placeholder(
    dtype: Any, shape: Sequence[int | None] | None = None, name: str | None = None, device: Any = None
) -> Tensor:
    """A graph input fed at ``Session.run``.

    ``shape`` entries: an int (fixed), ``None`` (any size) or a string (a
    named symbolic dimension: every dim with that name has the same size,
    e.g. ``("batch", 784)`` and ``("batch",)``). ``None`` dims at the same
    axis of different placeholders are one symbol (``"?0"`` for axis 0...):
    like a batch dimension, they must agree at each run (name dims to tell
    them apart). ``shape=None`` (the default) accepts a value of any shape,
    as in TensorFlow: a scalar such as a learning rate, or a tensor of any
    rank; the graph is recorded treating it as a scalar and each run derives
    every shape again from what is fed (an op that needs a rank, such as a
    matmul, needs a declared shape). Float placeholders require grad inside
    the graph, so :func:`gradients` can differentiate with respect to them
    (as TensorFlow's ``tf.gradients`` can); a gradient with respect to an
    unshaped placeholder fed a shape that needs a reduction the recorded
    graph lacks (fed ``(3,)`` where its partner is fed a scalar) is an error
    at the run, never a wrong shape.
    ``device`` (default cpu): where the placeholder is fed, and so where
    the graph runs when it is the first input (``device="gpu"`` builds a GPU
    graph; NumPy values fed to it are uploaded, tensors must be there already).
    """
    g = get_default_graph()
    if g is None or not g._building:
        raise RuntimeError("fg.placeholder must be called inside a `with fg.Graph():` block")
    pos = len(g._placeholders)
    loc = _capture._user_location()
    if shape is None:
        t = _core._trace_placeholder([], dtype, pos, name, device)
        g._any_shape.add(pos)
    else:
        shape = tuple(d if d is None or isinstance(d, str) else int(d) for d in shape)
        # Unnamed symbolic dims at the same axis share a symbol ("?0", "?1", ...):
        # the batch dims of several placeholders are assumed equal.
        dims = [f"?{i}" if d is None else d for i, d in enumerate(shape)]
        _check_symbolic_size(shape, dtype)
        t = _core._trace_placeholder(dims, dtype, pos, name, device)
    if t.dtype.is_floating_point:
        t.requires_grad_(True)
    if device is not None:
        g._ph_devices[pos] = str(device)
    g._placeholders.append((t, name, shape, loc))
    return t


def _check_symbolic_size(shape: tuple[int | str | None, ...], dtype: Any) -> None:
    """Refuse a placeholder whose unknown dims the capture cannot size.

    While a graph is captured, each unknown dim stands as a prime near 2**23;
    three of them (or two with large known dims) make more elements than 64
    bits count, which the engine would report as an allocation overflow.
    """
    size = 8  # the widest itemsize
    for d in shape:
        size *= 8_511_491 if d is None or isinstance(d, str) else max(int(d), 1)
    if size > (1 << 63) - 1:
        text = "(" + ", ".join("None" if d is None else repr(d) for d in shape) + ")"
        unknown = sum(d is None or isinstance(d, str) for d in shape)
        raise ValueError(
            f"fg.placeholder: shape {text} with dtype {dtype} has {unknown} unknown dims; a captured "
            "graph sizes at most 2 unknown dims per tensor (fewer with large known ones): give the "
            "others a size, or declare it with shape=None (any shape, derived again at each run)"
        )


class Variable(Tensor):
    """State kept between runs of a graph (TensorFlow's ``tf.Variable``).

    A tensor that graphs read by reference: each run sees its current value,
    and ``assign``/``assign_add``/``assign_sub`` update it in place (inside a
    graph they are recorded and return an :class:`Operation` to fetch).
    Trainable float variables require grad.

    Made from data (a NumPy array, a list, a tensor outside any graph), it
    holds that data at once (aliasing ``initial_value`` when it is a
    tensor). Made inside ``with g:`` from a value the graph computes
    (``fg.Variable(fg.zeros(64, 10))``, ``fg.randn(...) * 0.01``), its
    initial value is an op of the graph that runs **once**: on the first
    :meth:`Session.run` of that graph that reads the variable (or earlier,
    when its :attr:`initializer` or :func:`global_variables_initializer` is
    run). From then on it keeps its value across runs until assigned; running
    an initializer again resets it, as in TensorFlow.
    """

    def __new__(
        cls, initial_value: Any, trainable: bool = True, name: str | None = None, dtype: Any = None
    ) -> Variable:
        g = get_default_graph()
        building = g is not None and g._building
        init_value = None
        with _capture.suspended():
            if building and isinstance(initial_value, Tensor) and initial_value.is_meta:
                # A value the graph computes: computed by the initializer, not at every run.
                init_value = initial_value if dtype is None else initial_value.to(dtype)
                shape = tuple(init_value.shape)
                if _core._trace_value_id(init_value) is None or _symbolic(shape):
                    raise ValueError(
                        f"Variable{f' {name!r}' if name else ''}: the initial value must have a fixed shape, "
                        f"got {_fmt_shape(shape)} (it depends on a placeholder's unknown dimension)"
                    )
                data = _core.zeros(shape, dtype=init_value.dtype, device=init_value.device)
            elif isinstance(initial_value, Tensor) and dtype is None:
                data = initial_value.detach()
            else:
                data = _core.tensor(initial_value, dtype=dtype)
        obj = super().__new__(cls, data, bool(trainable and data.dtype.is_floating_point))
        obj._init_value = init_value
        obj._initialized = init_value is None
        obj._graph = g if building else None
        obj._init_data = None
        if building:
            with _capture.suspended():
                # What the initializer restores for a variable made from data.
                obj._init_data = data.detach().clone() if init_value is None else None
            g._variables.append(obj)
        return obj

    def __init__(
        self, initial_value: Any, trainable: bool = True, name: str | None = None, dtype: Any = None
    ) -> None:
        self.name = name
        self.trainable = trainable

    @property
    def initializer(self) -> Operation:
        """The op that sets this variable to its initial value (fetch it with ``Session.run``)."""
        if self._graph is None:
            raise ValueError(f"{self!r} was made outside a graph: it holds its initial value already")
        return _Initializer(self._graph, [self], f"{self.name or 'variable'}.initializer")

    def initialized_value(self) -> Tensor:
        """The variable itself (its initializer runs before any run that reads it)."""
        return self

    def _assign(self, op: str, value: Any) -> Operation | None:
        from ._grad_mode import no_grad

        g = get_default_graph()
        with no_grad():
            getattr(self, op)(value)
        if g is None or not g._building:
            return None
        return Operation(g, g._state_last_node(), f"{self.name or 'variable'}.{op}")

    def assign(self, value: Any) -> Operation | None:
        """Set the variable to ``value`` (recorded when inside a graph)."""
        return self._assign("copy_", value)

    def assign_add(self, value: Any) -> Operation | None:
        """Add ``value`` to the variable in place."""
        return self._assign("add_", value)

    def assign_sub(self, value: Any) -> Operation | None:
        """Subtract ``value`` from the variable in place."""
        return self._assign("sub_", value)

    def __repr__(self) -> str:
        return f"<fg.Variable {self.name or ''} shape={tuple(self.shape)} dtype={self.dtype}>"


def _symbolic(shape: tuple) -> bool:
    # Symbolic dims are captured as sentinels far above any real size (see the graph module).
    return any(d >= 1 << 22 for d in shape)


class _Initializer(Operation):
    """Runs variables' initializers (``Variable.initializer``, :func:`global_variables_initializer`)."""

    def __init__(self, graph: Graph, variables: list[Variable], name: str) -> None:
        super().__init__(graph, -1, name)
        self.variables = list(variables)

    def __repr__(self) -> str:
        return f"<Operation {self.name!r} ({len(self.variables)} variables)>"


def global_variables_initializer() -> Operation:
    """An op that (re)sets every variable of the graph being built to its initial value.

    Call it inside ``with g:`` and fetch it with ``Session.run``. Running it is
    optional in ferrograd — a variable is initialized on the first run that
    reads it — but running it again resets the variables (TensorFlow's
    ``tf.global_variables_initializer``).
    """
    g = get_default_graph()
    if g is None or not g._building:
        raise RuntimeError("fg.global_variables_initializer must be called inside a `with fg.Graph():` block")
    return _Initializer(g, g._variables, "global_variables_initializer")


def variables_initializer(var_list: Sequence[Variable]) -> Operation:
    """An op that (re)sets the variables in ``var_list`` (of one graph) to their initial values."""
    var_list = list(var_list)
    graphs = {id(v._graph) for v in var_list}
    if any(v._graph is None for v in var_list):
        raise ValueError("variables_initializer: every variable must have been made inside a graph")
    if len(graphs) > 1:
        raise ValueError("variables_initializer: the variables belong to different graphs")
    g = var_list[0]._graph if var_list else get_default_graph()
    if g is None:
        raise ValueError("variables_initializer: no variables and no graph being built")
    return _Initializer(g, var_list, "variables_initializer")


def _last_node(self: Graph) -> int:
    return _core._trace_num_nodes() - 1


Graph._state_last_node = _last_node  # type: ignore[attr-defined]


def gradients(ys: Any, xs: Any, grad_ys: Any = None) -> list[Tensor | None]:
    """Symbolic gradients ``d(sum ys)/d xs`` inside a graph (TensorFlow's ``tf.gradients``).

    ``ys``: a tensor or a list; ``grad_ys`` weights each (ones by default).
    Returns one gradient per ``x`` (None when ``ys`` does not depend on it).
    Outside a graph it differentiates eagerly with the same rule.
    """
    from .autograd import grad

    ys_l = [y for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    xs_l = [x for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
    g = get_default_graph()
    building = g is not None and g._building
    if grad_ys is None:
        gys = [_core.ones_like(y) for y in ys_l]
    else:
        gys = [g for g in (grad_ys if isinstance(grad_ys, (list, tuple)) else [grad_ys])]
    out = list(grad(ys_l, xs_l, grad_outputs=gys, allow_unused=True))
    if building and g._any_shape:
        # A gradient has the shape of what it is taken with respect to, whatever
        # is fed: checked at each run (a feed of another shape than the
        # recorded one can call for a reduction the recording did not make).
        unshaped = {id(g._placeholders[p][0]): p for p in g._any_shape}
        for x, r in zip(xs_l, out, strict=True):
            if r is not None:
                g._grad_shapes[id(r)] = unshaped.get(id(x), tuple(r.shape))
                g._keep.append(r)
    return out


class Session:
    """Runs a :class:`Graph`: ``Session(g).run(fetches, feed={placeholder: value})``."""

    def __init__(self, graph: Graph | None = None) -> None:
        self.graph = graph if graph is not None else get_default_graph()
        if self.graph is None:
            raise ValueError("Session needs a graph")
        self._pruned: dict[tuple, tuple[Any, list[int]]] = {}

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release the cached sub-graphs."""
        self._pruned.clear()

    def run(
        self, fetches: Any, feed: Mapping[Any, Any] | None = None, feed_dict: Mapping[Any, Any] | None = None
    ) -> Any:
        """Run what ``fetches`` need and return their values in the same structure.

        ``fetches``: a tensor, an :class:`Operation`, a :class:`Variable`, or a
        list/tuple/dict of those (Operations give None). ``feed`` (alias
        ``feed_dict``): ``{placeholder: value}``; values are tensors, NumPy
        arrays or nested lists. Initializers among the fetches run first; a
        variable not yet initialized is initialized before the run that first
        reads it.
        """
        feed = dict(feed or {}) if feed_dict is None else dict(feed_dict)
        for v in feed.values():
            if isinstance(v, Tensor) and v.is_meta:
                raise ValueError(
                    "Session.run: a feed is a tensor of a graph being captured, which has no value yet; "
                    "a finished graph runs now, on values: call a compiled function (fg.compile) to "
                    "record a computation into the graph being captured"
                )
        # A finished graph runs now, eagerly, also in the middle of another capture:
        # nothing of the run is recorded into it.
        with _capture.suspended():
            return self._run(fetches, feed)

    def _run(self, fetches: Any, feed: dict) -> Any:
        flat: list[Any] = []

        def collect(f: Any) -> Any:
            if isinstance(f, (list, tuple)):
                return type(f)(collect(x) for x in f)
            if isinstance(f, dict):
                return {k: collect(v) for k, v in f.items()}
            flat.append(f)
            return len(flat) - 1

        tree = collect(fetches)
        g = self.graph._built()
        tensors: list[Tensor] = []
        ops: list[int] = []
        slots: list[tuple[str, int]] = []
        for f in flat:
            if isinstance(f, Operation):
                if f.graph is not self.graph:
                    raise ValueError(f"{f!r} belongs to another graph")
                if isinstance(f, _Initializer):
                    self._initialize(f.variables, feed)
                else:
                    ops.append(f.node)
                slots.append(("op", -1))
                continue
            if isinstance(f, Variable):
                slots.append(("var", -1))
                continue
            if not isinstance(f, Tensor):
                raise TypeError(f"cannot fetch {type(f).__name__}; fetch tensors, Variables or Operations")
            if g.value_id(f) is None:
                raise ValueError("a fetched tensor does not belong to this session's graph")
            slots.append(("val", len(tensors)))
            tensors.append(f)
        fetched_vars = [f for f in flat if isinstance(f, Variable)]
        self._initialize([v for v in fetched_vars if not v._initialized], feed)
        results = self._execute(tensors, ops, feed) if tensors or ops else []
        values: list[Any] = []
        for f, (kind, idx) in zip(flat, slots, strict=True):
            if kind == "op":
                values.append(None)
            elif kind == "var":
                values.append(f.detach().clone())
            else:
                values.append(results[idx])

        def rebuild(t: Any) -> Any:
            if isinstance(t, (list, tuple)):
                return type(t)(rebuild(x) for x in t)
            if isinstance(t, dict):
                return {k: rebuild(v) for k, v in t.items()}
            return values[t]

        return rebuild(tree)

    def _execute(self, tensors: list[Tensor], ops: list[int], feed: dict) -> list[Tensor]:
        """Run the part of the graph that computes ``tensors`` and the op nodes ``ops``."""
        from ._compile import optimize
        from ._grad_mode import no_grad

        g = self.graph._built()
        real_vals = [g.value_id(t) for t in tensors]
        key = (tuple(real_vals), tuple(ops))
        cached = self._pruned.get(key)
        if cached is None:
            raw = g.prune(real_vals, ops, False)
            reads = [t for _, t in raw.references()]
            positions = sorted(i["position"] for i in raw.inputs() if i["kind"] == "arg")
            cached = (raw, positions, reads, {})
            self._pruned[key] = cached
        raw, positions, reads, by_shapes = cached
        pending = [v for v in self.graph._variables if not v._initialized]
        if pending:
            self._initialize([v for v in pending if any(r._shares_storage(v) for r in reads)], feed)
        fed = {id(k): v for k, v in feed.items()}
        # One slot per placeholder position (positions the sub-graph does not read stay empty).
        args: list[Any] = [_EMPTY] * (max(positions) + 1 if positions else 0)
        for pos in positions:
            ph, name, shape, loc = self.graph._placeholders[pos]
            if id(ph) not in fed:
                where = f" (created at {loc})" if loc else ""
                raise ValueError(
                    f"Session.run: placeholder {name or pos!r} with shape {_fmt_shape(shape)} "
                    f"must be fed{where}"
                )
            v = fed[id(ph)]
            if not isinstance(v, Tensor):
                v = _core.tensor(v, dtype=ph.dtype, device=self.graph._ph_devices.get(pos))
            args[pos] = v
        # Placeholders without a declared shape: the graph, typed for what is fed.
        shapes = tuple((p, tuple(args[p].shape)) for p in positions if p in self.graph._any_shape)
        try:
            sub = by_shapes.get(shapes)
            if sub is None:
                typed = raw.retyped([(p, list(s)) for p, s in shapes]) if any(s for _, s in shapes) else raw
                sub, _ = optimize(typed)
                by_shapes[shapes] = sub
            # Dynamic optimizer arguments (a learning rate computed at every step) are read now.
            scalars = list(self.graph._scalars()) if self.graph._scalars is not None else []
            with no_grad():
                out = list(sub.run(args, scalars))
        except (ValueError, TypeError) as e:
            raise type(e)(f"Session.run: {e}{_placeholder_notes(self.graph, positions)}") from None
        for t, r in zip(tensors, out, strict=True):
            want = self.graph._grad_shapes.get(id(t))
            if isinstance(want, int):  # the gradient of a placeholder without a declared shape
                v = fed.get(id(self.graph._placeholders[want][0]))
                want = None if v is None else tuple(v.shape) if isinstance(v, Tensor) else _np_shape(v)
            if want is not None and tuple(r.shape) != want:
                raise ValueError(
                    f"Session.run: a gradient that must have shape {want} came out with shape "
                    f"{tuple(r.shape)}: the feed of a placeholder declared without a shape calls for a "
                    "reduction the recorded graph does not make; declare the placeholder's shape"
                )
        return out

    def _initialize(self, variables: list[Variable], feed: dict) -> None:
        """Set ``variables`` to their initial values, in the order they were made."""
        from ._grad_mode import no_grad

        order = {id(v): i for i, v in enumerate(self.graph._variables)}
        for v in sorted(variables, key=lambda v: order.get(id(v), -1)):
            if v._init_value is None:
                if v._init_data is not None:
                    with no_grad():
                        v.copy_(v._init_data)
            else:
                try:
                    (value,) = self._execute([v._init_value], [], feed)
                except ValueError as e:
                    raise ValueError(
                        f"Session.run: could not initialize {v!r}: {e} "
                        "(feed what its initial value needs, or make it from data)"
                    ) from None
                with no_grad():
                    v.copy_(value)
            v._initialized = True


_EMPTY = _core.empty(0)


def _write_model_js(path: str) -> None:
    """Write the bundle's runtime for web pages, ``model.js``, into ``path`` (docs/webgpu-bundle.md)."""
    import os
    from importlib.resources import files

    js = files("ferrograd").joinpath("_webgpu_model.js").read_text(encoding="utf-8")
    with open(os.path.join(path, "model.js"), "w", encoding="utf-8") as f:
        f.write(js)


def _dtype_named(name: str) -> Any:
    return getattr(_core, name)


def load_graph(path: Any, device: Any = None) -> Graph:
    """Load a graph written by :meth:`Graph.save`; call the result to run it.

    Everything is checked before use (sizes, offsets, dtypes, the graph's
    structure, and its shapes when first run); a malformed, truncated or
    wrong-version file raises :class:`GraphFileError`. The loaded graph holds
    its own copies of the tensors it reads (see :meth:`Graph.state_dict`).

    ``device``: where the graph runs — by default the device it was saved
    from (``"gpu"`` for a graph captured on the WebGPU device); pass
    ``"cpu"`` or ``"gpu"`` to move it (its weights are copied there and the
    tensors it creates are made there).
    """
    import os

    try:
        if isinstance(path, (bytes, bytearray, memoryview)):
            g, scalars, _slots, meta = _core._graph_loads(bytes(path), device)
        else:
            g, scalars, _slots, meta = _core._graph_load(os.fspath(path), device)
    except ValueError as e:
        raise GraphFileError(str(e)) from None
    obj = Graph._wrap(g)
    obj._saved_scalars = scalars
    obj._metadata = meta
    return obj


#: Metadata keys a saved graph keeps for the drawings (names of the tensors it
#: reads, modules' classes); not listed in ``Graph.metadata``.
_META_OWN = "ferrograd."
_META_REF_NAMES = "ferrograd.ref_names"
_META_MODULE_TYPES = "ferrograd.module_types"


def _json_meta(g: Graph, key: str) -> Any:
    """A JSON value a loaded graph's file stored under ``key`` (None if absent)."""
    import json

    text = getattr(g, "_metadata", {}).get(key)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _np_shape(v: Any) -> tuple:
    import numpy as np

    return tuple(np.shape(v))


def _fmt_shape(shape: tuple | None) -> str:
    if shape is None:
        return "(any shape)"
    return (
        "("
        + ", ".join("None" if d is None else str(d) for d in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def _placeholder_notes(g: Graph, positions: list[int]) -> str:
    notes = []
    for pos in positions:
        _, name, shape, loc = g._placeholders[pos]
        if loc:
            notes.append(f"placeholder {name or pos!r} {_fmt_shape(shape)} created at {loc}")
    return ("; " + "; ".join(notes)) if notes else ""
