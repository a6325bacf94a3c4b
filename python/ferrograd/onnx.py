"""Export to ONNX: ``fg.onnx.export(fn_or_module, example_inputs, path)``.

The function (or module) is captured with :func:`ferrograd.compile` on the
example inputs (with gradients off, the graph passes on except fusion and
epilogues: ONNX runtimes fuse ``Conv → Relu → MaxPool`` and ``Gemm`` with its
activation themselves), and
each node of the captured graph becomes one or a few ONNX nodes; tensors the
graph reads by reference (parameters, buffers) become initializers. Needs the
``onnx`` package (``pip install ferrograd[onnx]``; ``onnxruntime`` runs the
result). Inference graphs only: a graph that updates its inputs, parameters or
buffers in place, sets ``.grad`` or branches on data cannot be exported (in-place
updates of values the graph computed itself, such as ``nn.ReLU(inplace=True)``
or ``out += identity``, export as the out-of-place ops), and an op without an ONNX
translation raises ``NotImplementedError`` naming the op and its source line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _core

__all__ = ["export", "OPSET"]

#: The ONNX opset the exporter targets (LayerNormalization needs 17).
OPSET = 17

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_SYMBOLIC = 1 << 22  # recorded sizes this large stand for symbolic dims

_NP = {
    "Bool": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "I16": np.int16,
    "I32": np.int32,
    "I64": np.int64,
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
}
_RANK = ["Bool", "U8", "I8", "I16", "I32", "I64", "F16", "BF16", "F32", "F64"]
_FROM_NAME = {
    "bool": "Bool",
    "uint8": "U8",
    "int8": "I8",
    "int16": "I16",
    "int32": "I32",
    "int64": "I64",
    "float16": "F16",
    "bfloat16": "BF16",
    "float32": "F32",
    "float64": "F64",
}

# The unary ops' ONNX mappings, from their definitions in the Rust op table
# (`src/kernel/unary.rs`), keyed by the variant name saved graphs use.
_UNARY = {u["variant"]: u for u in _core._unary_ops()}
# The general ops' ONNX mappings, from their definitions (`src/kernel/general.rs`):
# one ONNX call `Op(inputs; attr=param, ...)` over `x` and the op's attributes.
_GENERAL = {g["variant"]: g for g in _core._general_ops()}
_GENERAL_CALL = re.compile(r"^\s*(\w+)\((.*?)(?:;(.*))?\)\s*$")
_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(-?[0-9][0-9.eE+-]*)|(.))")


def _parse_onnx(expr: str) -> Any:
    """Parse a unary op's ONNX expression (``"Mul(x, Sigmoid(x))"``) into a tree.

    Nodes: ``("x",)``, ``("num", v)``, ``("param", name, optional)`` and
    ``("call", op, args, attrs)`` with attrs ``{name: node}`` (after ``;``).
    """
    toks = [m.group(1) or m.group(2) or m.group(3) for m in _TOKEN.finditer(expr) if m.group(0).strip()]
    pos = 0

    def take(want: str | None = None) -> str:
        nonlocal pos
        t = toks[pos]
        if want is not None and t != want:
            raise ValueError(f"ONNX expression {expr!r}: expected {want!r} at {t!r}")
        pos += 1
        return t

    def term() -> Any:
        t = take()
        if t[0].isdigit() or t[0] == "-":
            return ("num", float(t))
        if pos < len(toks) and toks[pos] == "(":
            take("(")
            args: list = []
            attrs: dict = {}
            in_attrs = False
            while toks[pos] != ")":
                if toks[pos] in (",", ";"):
                    in_attrs = in_attrs or toks[pos] == ";"
                    take()
                    continue
                if in_attrs:
                    k = take()
                    take("=")
                    attrs[k] = term()
                else:
                    args.append(term())
            take(")")
            return ("call", t, args, attrs)
        if t == "x":
            return ("x",)
        optional = pos < len(toks) and toks[pos] == "?"
        if optional:
            take("?")
        return ("param", t, optional)

    tree = term()
    if pos != len(toks):
        raise ValueError(f"ONNX expression {expr!r}: trailing {toks[pos:]}")
    return tree


_UNARY_ONNX = {v: _parse_onnx(u["onnx"]) for v, u in _UNARY.items() if u["onnx"]}
_BINARY_SAME = {
    "Add": "Add",
    "Sub": "Sub",
    "Mul": "Mul",
    "Div": "Div",
    "Pow": "Pow",
    "Maximum": "Max",
    "Minimum": "Min",
    "Eq": "Equal",
    "Lt": "Less",
    "Le": "LessOrEqual",
    "Gt": "Greater",
    "Ge": "GreaterOrEqual",
    "LogicalAnd": "And",
    "LogicalOr": "Or",
    "LogicalXor": "Xor",
}
_COMPARE = {"Eq", "Ne", "Lt", "Le", "Gt", "Ge", "LogicalAnd", "LogicalOr", "LogicalXor"}


def _split(call: Any) -> tuple[str, dict]:
    if isinstance(call, str):
        return call, {}
    ((name, attrs),) = call.items()
    return name, attrs if isinstance(attrs, dict) else {"value": attrs}


def _scalar(s: dict) -> tuple[str, Any]:
    ((kind, v),) = s.items()
    if kind == "Float":
        v = float(v)
    return kind, v


def _promote(a: str, b: str) -> str:
    if {a, b} == {"U8", "I8"}:
        return "I16"  # no 8-bit type holds both ranges (as PyTorch)
    return a if _RANK.index(a) >= _RANK.index(b) else b


class _Exporter:
    def __init__(self, graph: Any, input_names: Sequence[str] | None, output_names: Sequence[str] | None):
        import onnx
        from onnx import helper

        self.onnx = onnx
        self.h = helper
        self.g = graph
        gj, tensors = graph.to_json()
        self.j = json.loads(gj)
        self.tensors = {f"t{i}": t for i, t in enumerate(tensors)}
        self.values = graph.values()  # shapes with symbolic dims by name
        self.nodes_info = graph.nodes()
        self.input_names = list(input_names or [])
        self.output_names = list(output_names or [])
        self.onnx_nodes: list[Any] = []
        self.inits: list[Any] = []
        self.counter = 0
        self.name_of: dict[int, str] = {}

    # -- helpers ---------------------------------------------------------------

    def fresh(self, base: str = "tmp") -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def dtype(self, v: int) -> str:
        return _FROM_NAME[self.values[v]["dtype"]]

    def shape(self, v: int) -> list:
        return [int(d) if str(d).lstrip("-").isdigit() else str(d) for d in self.values[v]["shape"]]

    def rank(self, v: int) -> int:
        return len(self.values[v]["shape"])

    def const(self, arr: Any, dtype: str | None = None) -> str:
        a = np.asarray(arr, dtype=_NP[dtype] if dtype else None)
        name = self.fresh("const")
        self.inits.append(self.onnx.numpy_helper.from_array(a, name))
        return name

    def ints(self, xs: Sequence[int]) -> str:
        return self.const(np.asarray(list(xs), np.int64))

    def node(
        self, op: str, ins: Sequence[str], n_out: int = 1, out: Sequence[str] | None = None, **attrs: Any
    ):
        outs = list(out) if out is not None else [self.fresh(op.lower()) for _ in range(n_out)]
        self.onnx_nodes.append(self.h.make_node(op, list(ins), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def cast(self, name: str, src: str, dst: str) -> str:
        if src == dst:
            return name
        return self.node("Cast", [name], to=self.onnx_type(dst))

    def onnx_type(self, d: str) -> int:
        T = self.onnx.TensorProto
        return {
            "Bool": T.BOOL,
            "U8": T.UINT8,
            "I8": T.INT8,
            "I16": T.INT16,
            "I32": T.INT32,
            "I64": T.INT64,
            "F16": T.FLOAT16,
            "BF16": T.BFLOAT16,
            "F32": T.FLOAT,
            "F64": T.DOUBLE,
        }[d]

    def static_shape(self, v: int, symbolic_as: int, what: str, loc: str) -> list[int]:
        """The recorded shape of `v` with symbolic dims as `symbolic_as` (at most one when -1)."""
        dims = self.shape(v)
        n_sym = sum(1 for d in dims if isinstance(d, str))
        if symbolic_as == -1 and n_sym > 1:
            raise NotImplementedError(f"{what} to a shape with {n_sym} symbolic dims ({loc}): not exportable")
        return [symbolic_as if isinstance(d, str) else d for d in dims]

    def axes(self, dims: Any, rank: int) -> list[int]:
        if dims is None:
            return list(range(rank))
        return [d % rank if rank else 0 for d in dims]

    # -- the graph ---------------------------------------------------------------

    def run(self) -> Any:
        j = self.j
        if j["set_grads"]:
            raise NotImplementedError("the graph sets .grad (a training step); export inference functions")
        graph_inputs = []
        for inp in j["inputs"]:
            v = inp["value"]
            ((kind, arg),) = inp["kind"].items()
            if kind == "Arg":
                k = arg
                name = self.input_names[k] if k < len(self.input_names) else (inp.get("name") or f"input{k}")
                self.name_of[v] = name
                graph_inputs.append(
                    self.h.make_tensor_value_info(name, self.onnx_type(self.dtype(v)), self.shape(v))
                )
            elif kind in ("Ref", "Const"):
                name = f"v{v}" if not inp.get("name") else f"{inp['name']}_{v}"
                t = self.tensors[arg]
                if self.dtype(v) == "BF16":
                    raise NotImplementedError(
                        "bfloat16 weights are not exportable; convert the model to float32"
                    )
                self.inits.append(
                    self.onnx.numpy_helper.from_array(np.ascontiguousarray(np.asarray(t)), name)
                )
                self.name_of[v] = name
            else:
                raise NotImplementedError(
                    "the graph reads .grad (a training step); export inference functions"
                )
        made_here: set[int] = set()  # values computed by a pure node of the graph (not views)
        viewed: set[int] = set()  # values some view node has aliased
        for i, (n, info) in enumerate(zip(j["nodes"], self.nodes_info, strict=True)):
            name, attrs = _split(n["call"])
            loc = n.get("loc") or "unknown line"
            effect = info.get("effect")
            if effect == "mutates":
                self.functionalize(i, name, attrs, n, info, loc, made_here, viewed)
                continue
            if effect == "view":
                viewed.update(n["inputs"])
            real = n["outputs"][: len(n["outputs"]) - n["aux"]]
            if effect == "pure":
                made_here.update(real)
            if not real:
                continue
            fn = getattr(self, f"op_{name}", None)
            if fn is None:
                raise NotImplementedError(
                    f"op {info['op']!r} ({name}, captured at {loc}) has no ONNX translation yet"
                )
            ins = [self.name_of[v] for v in n["inputs"]]
            outs = fn(attrs, ins, n["inputs"], real, loc)
            outs = outs if isinstance(outs, list) else [outs]
            for v, o in zip(real, outs, strict=True):
                self.name_of[v] = o
        graph_outputs = []
        for k, v in enumerate(j["outputs"]):
            name = self.output_names[k] if k < len(self.output_names) else f"output{k}"
            self.node("Identity", [self.name_of[v]], out=[name])
            graph_outputs.append(
                self.h.make_tensor_value_info(name, self.onnx_type(self.dtype(v)), self.shape(v))
            )
        gp = self.h.make_graph(self.onnx_nodes, "ferrograd", graph_inputs, graph_outputs, self.inits)
        model = self.h.make_model(
            gp, opset_imports=[self.h.make_opsetid("", OPSET)], producer_name="ferrograd"
        )
        model.ir_version = min(model.ir_version, 9)
        self.onnx.checker.check_model(model)
        return model

    def functionalize(
        self,
        i: int,
        name: str,
        attrs: Any,
        n: dict,
        info: dict,
        loc: str,
        made_here: set[int],
        viewed: set[int],
    ) -> None:
        """Export an in-place update of an intermediate value as the out-of-place op.

        ``nn.ReLU(inplace=True)``, ``out += identity`` and ``LeakyReLU(inplace=True)``
        (a clone, the op, a copy back) update values the graph itself computed;
        the update becomes the pure op, and later reads of the value read its
        result. Updates of inputs, parameters or buffers, of views, or of values
        a view aliases change state the ONNX graph cannot, and still raise.
        """
        target = n["inputs"][0] if n["inputs"] else None
        pure = {"UnaryInplace": "Unary", "BinaryInplace": "Binary", "BinaryScalarInplace": "BinaryScalar"}
        if (
            target is None
            or target not in made_here
            or target in viewed
            or (name not in pure and name != "Copy")
        ):
            raise NotImplementedError(
                f"node {i} ({info['op']}, {loc}) updates a tensor in place; export functions without side effects"
            )
        ins = [self.name_of[v] for v in n["inputs"]]
        if name == "Copy":
            src, dst = n["inputs"][1], target
            out = self.cast(ins[1], self.dtype(src), self.dtype(dst))
            if self.shape(src) != self.shape(dst):
                out = self.node("Expand", [out, self.ints(self.static_shape(dst, 1, "copy_", loc))])
        else:
            if name == "BinaryScalarInplace":
                attrs = {**attrs, "reflected": False}
            out = getattr(self, f"op_{pure[name]}")(attrs, ins, n["inputs"], [target], loc)
        self.name_of[target] = out

    # -- elementwise -------------------------------------------------------------

    def op_Contiguous(self, a, ins, vin, vout, loc):
        return self.node("Identity", ins)

    op_Clone = op_Contiguous

    def op_ToDtype(self, a, ins, vin, vout, loc):
        return self.cast(ins[0], self.dtype(vin[0]), a["dtype"])

    def unary(self, op: Any, x: str, d: str, loc: str) -> str:
        """ONNX nodes for unary op `op` on `x` (constants in dtype `d`), from its definition."""
        name, arg = _split(op)
        tree = _UNARY_ONNX.get(name)
        if tree is None:
            raise NotImplementedError(f"unary op {name} ({loc}) has no ONNX translation yet")
        info = _UNARY[name]
        params = {info["params"][0]: arg["value"]} if info["tuple"] else dict(arg)
        memo: dict[Any, str] = {}

        def value(p: Any) -> Any:
            if p[0] == "num":
                return p[1]
            return float(params[p[1]])

        def ev(t: Any) -> str:
            key = repr(t)
            if key in memo:
                return memo[key]
            if t[0] == "x":
                return x
            if t[0] == "param" and params.get(t[1]) is None:
                if not t[2]:
                    raise NotImplementedError(f"unary op {name} ({loc}): parameter {t[1]} is not set")
                out = ""
            elif t[0] in ("num", "param"):
                out = self.const(value(t), d)
            else:
                attrs = {k: value(v) for k, v in t[3].items()}
                out = self.node(t[1], [ev(a) for a in t[2]], **attrs)
            memo[key] = out
            return out

        return ev(tree)

    def op_Unary(self, a, ins, vin, vout, loc):
        d = self.dtype(vout[0])
        x = ins[0]
        name, _ = _split(a["op"])
        if name in _UNARY and _UNARY[name]["out"] == "float":
            x = self.cast(x, self.dtype(vin[0]), d)
        return self.unary(a["op"], x, d if d != "Bool" else self.dtype(vin[0]), loc)

    def binary(self, op: str, x: str, y: str, dx: str, dy: str, dout: str, loc: str) -> str:
        cd = _promote(dx, dy) if op in _COMPARE else dout
        if op.startswith("Logical"):
            cd = "Bool"
        x, y = self.cast(x, dx, cd), self.cast(y, dy, cd)
        if op in _BINARY_SAME:
            return self.node(_BINARY_SAME[op], [x, y])
        if op == "Ne":
            return self.node("Not", [self.node("Equal", [x, y])])
        if op == "FloorDiv" and cd in ("F16", "F32", "F64"):
            return self.node("Floor", [self.node("Div", [x, y])])
        if op == "Remainder" and cd in ("F16", "F32", "F64"):
            q = self.node("Floor", [self.node("Div", [x, y])])
            return self.node("Sub", [x, self.node("Mul", [q, y])])
        raise NotImplementedError(f"binary op {op} on {cd} ({loc}) has no ONNX translation yet")

    def op_Binary(self, a, ins, vin, vout, loc):
        return self.binary(
            a["op"], ins[0], ins[1], self.dtype(vin[0]), self.dtype(vin[1]), self.dtype(vout[0]), loc
        )

    def scalar_dtype(self, op: str, kind: str, dx: str, dout: str) -> str:
        if op not in _COMPARE:
            return dout
        if kind == "Float" and dx in ("Bool", "U8", "I8", "I16", "I32", "I64"):
            return "F32"
        if kind == "Int" and dx == "Bool":
            return "I64"
        return dx

    def op_BinaryScalar(self, a, ins, vin, vout, loc):
        kind, v = _scalar(a["s"])
        dx, dout = self.dtype(vin[0]), self.dtype(vout[0])
        ds = self.scalar_dtype(a["op"], kind, dx, dout)
        s = self.const(v, ds)
        if a["reflected"]:
            return self.binary(a["op"], s, ins[0], ds, dx, dout, loc)
        return self.binary(a["op"], ins[0], s, dx, ds, dout, loc)

    def op_Where(self, a, ins, vin, vout, loc):
        d = self.dtype(vout[0])
        cond = self.cast(ins[0], self.dtype(vin[0]), "Bool")
        return self.node(
            "Where",
            [cond, self.cast(ins[1], self.dtype(vin[1]), d), self.cast(ins[2], self.dtype(vin[2]), d)],
        )

    def op_WhereScalar(self, a, ins, vin, vout, loc):
        d = self.dtype(vout[0])
        it = iter(zip(ins[1:], vin[1:], strict=True))
        parts = []
        for arg in (a["a"], a["b"]):
            if arg == "Tensor":
                n, v = next(it)
                parts.append(self.cast(n, self.dtype(v), d))
            else:
                parts.append(self.const(_scalar(arg["Scalar"])[1], d))
        return self.node("Where", [self.cast(ins[0], self.dtype(vin[0]), "Bool"), *parts])

    def op_MaskedFill(self, a, ins, vin, vout, loc):
        d = self.dtype(vout[0])
        return self.node(
            "Where",
            [self.cast(ins[1], self.dtype(vin[1]), "Bool"), self.const(_scalar(a["value"])[1], d), ins[0]],
        )

    # -- shapes -----------------------------------------------------------------

    def reshape_to(self, x: str, v: int, loc: str) -> str:
        return self.node("Reshape", [x, self.ints(self.static_shape(v, -1, "reshape", loc))])

    def op_View(self, a, ins, vin, vout, loc):
        return self.reshape_to(ins[0], vout[0], loc)

    op_Reshape = op_View
    op_Flatten = op_View
    op_Squeeze = op_View
    op_Unsqueeze = op_View

    def op_Permute(self, a, ins, vin, vout, loc):
        return self.node("Transpose", ins, perm=self.axes(a["dims"], self.rank(vin[0])))

    def op_Transpose(self, a, ins, vin, vout, loc):
        r = self.rank(vin[0])
        perm = list(range(r))
        if r:
            d0, d1 = a["d0"] % r, a["d1"] % r
            perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.node("Transpose", ins, perm=perm)

    def op_TAll(self, a, ins, vin, vout, loc):
        return self.node("Transpose", ins, perm=list(reversed(range(self.rank(vin[0])))))

    def op_MT(self, a, ins, vin, vout, loc):
        r = self.rank(vin[0])
        perm = list(range(r))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return self.node("Transpose", ins, perm=perm)

    def op_Expand(self, a, ins, vin, vout, loc):
        return self.node("Expand", [ins[0], self.ints(self.static_shape(vout[0], 1, "expand", loc))])

    op_BroadcastTo = op_Expand

    def op_Narrow(self, a, ins, vin, vout, loc):
        dim = a["dim"] % self.rank(vin[0])
        size = self.shape(vin[0])[dim]
        start = a["start"]
        if start < 0:
            if isinstance(size, str):
                raise NotImplementedError(f"narrow from the end of a symbolic dim ({loc})")
            start += size
        return self.node(
            "Slice", [ins[0], self.ints([start]), self.ints([start + a["length"]]), self.ints([dim])]
        )

    def op_Select(self, a, ins, vin, vout, loc):
        dim = a["dim"] % self.rank(vin[0])
        return self.node("Gather", [ins[0], self.const(np.int64(a["index"]))], axis=dim)

    def op_Slice(self, a, ins, vin, vout, loc):
        dim = a["dim"] % self.rank(vin[0])
        step = a["step"]
        start = a["start"] if a["start"] is not None else (0 if step > 0 else -1)
        stop = a["stop"] if a["stop"] is not None else (_INT64_MAX if step > 0 else _INT64_MIN)
        return self.node(
            "Slice", [ins[0], self.ints([start]), self.ints([stop]), self.ints([dim]), self.ints([step])]
        )

    def op_Cat(self, a, ins, vin, vout, loc):
        d = self.dtype(vout[0])
        xs = [self.cast(x, self.dtype(v), d) for x, v in zip(ins, vin, strict=True)]
        return self.node("Concat", xs, axis=a["dim"] % self.rank(vout[0]))

    def op_Stack(self, a, ins, vin, vout, loc):
        dim = a["dim"] % self.rank(vout[0])
        d = self.dtype(vout[0])
        xs = [
            self.node("Unsqueeze", [self.cast(x, self.dtype(v), d), self.ints([dim])])
            for x, v in zip(ins, vin, strict=True)
        ]
        return self.node("Concat", xs, axis=dim)

    def split(self, x: str, vin: int, sizes: list, dim: int, loc: str) -> list[str]:
        """``x`` cut along ``dim`` (normalised) into pieces of ``sizes``."""
        if any(isinstance(n, str) for n in sizes):
            raise NotImplementedError(f"split along a symbolic dim ({loc}): not exportable")
        if len(sizes) == 1:
            return [self.node("Identity", [x])]
        return self.node("Split", [x, self.ints(sizes)], n_out=len(sizes), axis=dim)

    def op_Split(self, a, ins, vin, vout, loc):
        dim = a["dim"] % self.rank(vin[0])
        return self.split(ins[0], vin[0], [self.shape(v)[dim] for v in vout], dim, loc)

    op_Chunk = op_Split

    def op_Unbind(self, a, ins, vin, vout, loc):
        dim = a["dim"] % self.rank(vin[0])
        axes = self.ints([dim])
        return [
            self.node("Squeeze", [p, axes]) for p in self.split(ins[0], vin[0], [1] * len(vout), dim, loc)
        ]

    def op_Tril(self, a, ins, vin, vout, loc):
        return self.node("Trilu", [ins[0], self.const(np.int64(a["k"]))], upper=0)

    def op_Triu(self, a, ins, vin, vout, loc):
        return self.node("Trilu", [ins[0], self.const(np.int64(a["k"]))], upper=1)

    def op_Pad(self, a, ins, vin, vout, loc):
        r = self.rank(vin[0])
        pads = a["pads"]
        begin, end = [0] * r, [0] * r
        for i in range(len(pads) // 2):
            begin[r - 1 - i], end[r - 1 - i] = pads[2 * i], pads[2 * i + 1]
        mode = {"Constant": "constant", "Reflect": "reflect", "Replicate": "edge"}.get(a["mode"])
        if mode is None:
            raise NotImplementedError(f"pad mode {a['mode']} ({loc})")
        value = self.const(_scalar(a["value"])[1], self.dtype(vin[0]))
        return self.node("Pad", [ins[0], self.ints(begin + end), value], mode=mode)

    # -- indexing -----------------------------------------------------------------

    def op_Index(self, a, ins, vin, vout, loc):
        key = a["key"]
        if any(k == "Tensor" for k in key):
            return self.index_with_tensor(key, ins, vin, loc)
        r = self.rank(vin[0])
        used = sum(1 for k in key if k not in ("NewAxis", "Ellipsis"))
        d, out_d = 0, 0
        slices: list[tuple[int, int, int, int]] = []
        ints: list[tuple[int, int]] = []
        new_axes: list[int] = []
        for k in key:
            if k == "Ellipsis":
                d += r - used
                out_d += r - used
            elif k == "NewAxis":
                new_axes.append(out_d)
                out_d += 1
            elif "Int" in k:
                ints.append((d, k["Int"]))
                d += 1
            else:
                sl = k["Slice"]
                step = sl["step"]
                start = sl["start"] if sl["start"] is not None else (0 if step > 0 else -1)
                stop = sl["stop"] if sl["stop"] is not None else (_INT64_MAX if step > 0 else _INT64_MIN)
                slices.append((d, start, stop, step))
                d += 1
                out_d += 1
        x = ins[0]
        if slices:
            axes, starts, stops, steps = (list(t) for t in zip(*slices, strict=True))
            x = self.node(
                "Slice", [x, self.ints(starts), self.ints(stops), self.ints(axes), self.ints(steps)]
            )
        for dim, i in sorted(ints, reverse=True):
            x = self.node("Gather", [x, self.const(np.int64(i))], axis=dim)
        if new_axes:
            x = self.node("Unsqueeze", [x, self.ints(new_axes)])
        return x if x != ins[0] else self.node("Identity", [x])

    def index_with_tensor(self, key: list, ins: list[str], vin: list[int], loc: str) -> str:
        """``x[:, idx]``, ``x[..., [-1], :]``: one integer index tensor among slices becomes
        ``Slice`` and a ``Gather`` along its dim (the index's dims replace that dim, as in
        PyTorch). Other mixes (several or boolean index tensors, ints beside a tensor)
        raise ``NotImplementedError``."""
        r = self.rank(vin[0])
        unsupported = (
            sum(1 for k in key if k == "Tensor") != 1
            or any(k == "NewAxis" or (isinstance(k, dict) and "Int" in k) for k in key)
            or self.dtype(vin[1]) not in ("I32", "I64")
        )
        if unsupported:
            raise NotImplementedError(
                f"indexing with tensors ({loc}) has an ONNX translation only for one integer index "
                "tensor among slices"
            )
        used = sum(1 for k in key if k != "Ellipsis")
        d, axis = 0, 0
        slices: list[tuple[int, int, int, int]] = []
        for k in key:
            if k == "Ellipsis":
                d += r - used
            elif k == "Tensor":
                axis = d
                d += 1
            else:
                sl = k["Slice"]
                step = sl["step"]
                start = sl["start"] if sl["start"] is not None else (0 if step > 0 else -1)
                stop = sl["stop"] if sl["stop"] is not None else (_INT64_MAX if step > 0 else _INT64_MIN)
                if (start, stop, step) != (0, _INT64_MAX, 1):
                    slices.append((d, start, stop, step))
                d += 1
        x = ins[0]
        if slices:
            axes, starts, stops, steps = (list(t) for t in zip(*slices, strict=True))
            x = self.node(
                "Slice", [x, self.ints(starts), self.ints(stops), self.ints(axes), self.ints(steps)]
            )
        return self.node("Gather", [x, self.cast(ins[1], self.dtype(vin[1]), "I64")], axis=axis)

    def op_ScatterAdd(self, a, ins, vin, vout, loc):
        """``scatter_add(input, dim, index, src)``: ``ScatterElements`` with ``reduction="add"``
        (``src`` cut to ``index``'s shape, as PyTorch reads only that part)."""
        return self._scatter_elements(a, ins, vin, loc, "add", "scatter_add")

    def op_ScatterReduce(self, a, ins, vin, vout, loc):
        """``scatter_reduce`` with ``include_self=True`` and ``sum`` or ``prod``:
        ``ScatterElements`` with ``reduction="add"``/``"mul"``. Opset 17 has no max/min
        reduction, and ``mean`` or ``include_self=False`` no single-node form: those raise."""
        reduce = str(a["reduce"]).lower()
        red = {"sum": "add", "prod": "mul"}.get(reduce)
        if red is None or not a["include_self"]:
            raise NotImplementedError(
                f"scatter_reduce with reduce={reduce!r}, include_self={bool(a['include_self'])} ({loc}) "
                f"has no ONNX translation at opset {OPSET} (only 'sum' and 'prod' with include_self=True)"
            )
        return self._scatter_elements(a, ins, vin, loc, red, "scatter_reduce")

    def _scatter_elements(self, a, ins, vin, loc, reduction, what):
        x, index, src = ins
        src_shape, index_shape = self.shape(vin[2]), self.shape(vin[1])
        if src_shape != index_shape:
            n = len(index_shape)
            shape = self.static_shape(vin[1], 1, what, loc)
            src = self.node("Slice", [src, self.ints([0] * n), self.ints(shape), self.ints(list(range(n)))])
        index = self.cast(index, self.dtype(vin[1]), "I64")
        return self.node(
            "ScatterElements", [x, index, src], axis=a["dim"] % self.rank(vin[0]), reduction=reduction
        )

    def op_CrossEntropy(self, a, ins, vin, vout, loc):
        """Class-index targets: ``SoftmaxCrossEntropyLoss`` (reduction, ``ignore_index``,
        class weights). Probability targets, label smoothing and unbatched input raise."""
        if a["label_smoothing"] != 0.0:
            raise NotImplementedError(f"cross_entropy with label_smoothing ({loc}) has no ONNX translation")
        if self.dtype(vin[1]) not in ("I32", "I64") or self.rank(vin[0]) < 2:
            raise NotImplementedError(
                f"cross_entropy ({loc}) has an ONNX translation only for batched input with class-index targets"
            )
        reduction = str(a["reduction"]).lower()
        target = self.cast(ins[1], self.dtype(vin[1]), "I64")
        inputs = [ins[0], target] + ([ins[2]] if a["weight"] else [])
        return self.node(
            "SoftmaxCrossEntropyLoss", inputs, reduction=reduction, ignore_index=int(a["ignore_index"])
        )

    def op_IndexSelect(self, a, ins, vin, vout, loc):
        return self.node("Gather", ins, axis=a["dim"] % self.rank(vin[0]))

    def op_Gather(self, a, ins, vin, vout, loc):
        return self.node("GatherElements", ins, axis=a["dim"] % self.rank(vin[0]))

    # -- linear algebra -------------------------------------------------------------

    def op_Matmul(self, a, ins, vin, vout, loc):
        return self.node("MatMul", ins)

    op_Mm = op_Matmul
    op_Bmm = op_Matmul
    op_Mv = op_Matmul
    op_Dot = op_Matmul

    def op_Linear(self, a, ins, vin, vout, loc):
        if self.rank(vin[0]) == 2 and self.rank(vin[1]) == 2:
            return self.node("Gemm", ins, transB=1)
        y = self.node("MatMul", [ins[0], self.node("Transpose", [ins[1]], perm=[1, 0])])
        return self.node("Add", [y, ins[2]]) if a["bias"] else y

    def op_Einsum(self, a, ins, vin, vout, loc):
        return self.node("Einsum", ins, equation=a["equation"].replace(" ", ""))

    # -- convolution and pooling ---------------------------------------------------

    def conv(self, ins, vin, stride, pads, dilation, groups, loc, auto_pad=None):
        kw = {"strides": stride, "dilations": dilation, "group": groups}
        if auto_pad:
            kw["auto_pad"] = auto_pad
        else:
            kw["pads"] = pads
        return self.node("Conv", ins, **kw)

    def conv_nd(self, a, ins, vin, loc, nd):
        pad = a["padding"]
        rep = lambda v: list(v) * nd if len(v) == 1 else list(v)  # noqa: E731
        stride, dilation = rep(a["stride"]), rep(a["dilation"])
        if pad == "Same":
            return self.conv(ins, vin, stride, None, dilation, a["groups"], loc, auto_pad="SAME_UPPER")
        p = [0] * nd if pad == "Valid" else rep(pad["Explicit"])
        return self.conv(ins, vin, stride, p + p, dilation, a["groups"], loc)

    def op_Conv2d(self, a, ins, vin, vout, loc):
        return self.conv_nd(a, ins, vin, loc, 2)

    def op_Conv1d(self, a, ins, vin, vout, loc):
        return self.conv_nd(a, ins, vin, loc, 1)

    def op_Conv2dP(self, a, ins, vin, vout, loc):
        p = a["p"]
        top, bottom, left, right = p["pad"]
        return self.conv(
            ins, vin, list(p["stride"]), [top, left, bottom, right], list(p["dilation"]), p["groups"], loc
        )

    def pool_args(self, a):
        rep = lambda v: list(v) * 2 if len(v) == 1 else list(v)  # noqa: E731
        k = rep(a["kernel"])
        s = rep(a["stride"]) if a.get("stride") else k
        p = rep(a["padding"])
        return k, s, p + p

    def op_MaxPool2d(self, a, ins, vin, vout, loc):
        if a["return_indices"]:
            raise NotImplementedError(f"max_pool2d with return_indices ({loc})")
        k, s, p = self.pool_args(a)
        d = a["dilation"] * 2 if len(a["dilation"]) == 1 else a["dilation"]
        return self.node(
            "MaxPool", ins, kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=int(a["ceil_mode"])
        )

    def op_AvgPool2d(self, a, ins, vin, vout, loc):
        if a.get("divisor_override") is not None:
            raise NotImplementedError(f"avg_pool2d with divisor_override ({loc})")
        k, s, p = self.pool_args(a)
        return self.node(
            "AveragePool",
            ins,
            kernel_shape=k,
            strides=s,
            pads=p,
            ceil_mode=int(a["ceil_mode"]),
            count_include_pad=int(a["count_include_pad"]),
        )

    def op_AdaptiveAvgPool2d(self, a, ins, vin, vout, loc):
        hin, win = self.shape(vin[0])[-2:]
        hout, wout = self.shape(vout[0])[-2:]
        if (hout, wout) == (1, 1):
            return self.node("GlobalAveragePool", ins)
        if isinstance(hin, int) and isinstance(win, int) and hin % hout == 0 and win % wout == 0:
            k = [hin // hout, win // wout]
            return self.node("AveragePool", ins, kernel_shape=k, strides=k)
        raise NotImplementedError(f"adaptive_avg_pool2d from {hin}x{win} to {hout}x{wout} ({loc})")

    # -- reductions -------------------------------------------------------------------

    def reduce(self, op: str, a, ins, vin, vout, axes_as_input: bool):
        r = self.rank(vin[0])
        x = self.cast(ins[0], self.dtype(vin[0]), self.dtype(vout[0]))
        axes = self.axes(a.get("dims"), r)
        keep = int(a["keepdim"])
        if r == 0:
            return self.node("Identity", [x])
        if axes_as_input:
            return self.node(op, [x, self.ints(axes)], keepdims=keep)
        return self.node(op, [x], axes=axes, keepdims=keep)

    def op_Sum(self, a, ins, vin, vout, loc):
        return self.reduce("ReduceSum", a, ins, vin, vout, True)

    def op_Mean(self, a, ins, vin, vout, loc):
        return self.reduce("ReduceMean", a, ins, vin, vout, False)

    def op_Prod(self, a, ins, vin, vout, loc):
        return self.reduce("ReduceProd", a, ins, vin, vout, False)

    def op_Logsumexp(self, a, ins, vin, vout, loc):
        return self.reduce("ReduceLogSumExp", a, ins, vin, vout, False)

    def op_AmaxAmin(self, a, ins, vin, vout, loc):
        return self.reduce("ReduceMax" if a["op"] == "Max" else "ReduceMin", a, ins, vin, vout, False)

    def op_MaxAll(self, a, ins, vin, vout, loc):
        return self.reduce(
            "ReduceMax" if a["op"] == "Max" else "ReduceMin", {"keepdim": False}, ins, vin, vout, False
        )

    def op_MaxDim(self, a, ins, vin, vout, loc):
        dim = a["dim"] % max(1, self.rank(vin[0]))
        k = int(a["keepdim"])
        red, arg = ("ReduceMax", "ArgMax") if a["op"] == "Max" else ("ReduceMin", "ArgMin")
        vals = self.node(red, ins, axes=[dim], keepdims=k)
        idx = self.node(arg, ins, axis=dim, keepdims=k, select_last_index=0)
        return [vals, idx]

    def op_General(self, a, ins, vin, vout, loc):
        """A general op through its definition's mapping; its attributes are the
        parameters (`dim` taken modulo the rank, a missing `k` is the dim's size)."""
        ((variant, params),) = a["op"].items()
        rank = self.rank(vin[0])
        if rank == 0:
            raise NotImplementedError(f"{variant.lower()} of a 0-d tensor ({loc}): not exportable")
        p = {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}
        if "dim" in p:
            p["dim"] %= rank
            if p.get("k", 0) is None:
                p["k"] = self.static_shape(vin[0], 0, variant, loc)[p["dim"]]
        m = _GENERAL_CALL.match(_GENERAL[variant]["onnx"])
        if m is None:
            raise NotImplementedError(f"{variant}: unreadable ONNX mapping")
        op, args, attrs = m.group(1), m.group(2), m.group(3) or ""
        inputs = [ins[0] if t.strip() == "x" else self.ints([p[t.strip()]]) for t in args.split(",")]
        kw = {}
        for item in filter(None, (t.strip() for t in attrs.split(","))):
            key, val = (t.strip() for t in item.split("="))
            kw[key] = int(val) if val.lstrip("-").isdigit() else p[val]
        return self.node(op, inputs, n_out=len(vout), **kw)

    def op_ArgMaxMin(self, a, ins, vin, vout, loc):
        op = "ArgMax" if a["op"] == "Max" else "ArgMin"
        if a["dim"] is None:
            flat = self.node("Reshape", [ins[0], self.ints([-1])])
            out = self.node(op, [flat], axis=0, keepdims=0)
            return self.reshape_to(out, vout[0], loc) if a["keepdim"] else out
        return self.node(op, ins, axis=a["dim"] % self.rank(vin[0]), keepdims=int(a["keepdim"]))

    def op_Var(self, a, ins, vin, vout, loc):
        r = self.rank(vin[0])
        axes = self.axes(a["dims"], r)
        shape = self.shape(vin[0])
        n = 1
        for ax in axes:
            if isinstance(shape[ax], str):
                raise NotImplementedError(f"var/std over a symbolic dim ({loc})")
            n *= shape[ax]
        d = self.dtype(vout[0])
        x = self.cast(ins[0], self.dtype(vin[0]), d)
        mean = self.node("ReduceMean", [x], axes=axes, keepdims=1)
        dev = self.node("Sub", [x, mean])
        ss = self.node(
            "ReduceSum", [self.node("Mul", [dev, dev]), self.ints(axes)], keepdims=int(a["keepdim"])
        )
        var = self.node("Div", [ss, self.const(max(n - a["correction"], 0.0), d)])
        return self.node("Sqrt", [var]) if a["std"] else var

    def op_Softmax(self, a, ins, vin, vout, loc):
        x = self.cast(ins[0], self.dtype(vin[0]), self.dtype(vout[0]))
        return self.node("LogSoftmax" if a["log"] else "Softmax", [x], axis=a["dim"] % self.rank(vin[0]))

    # -- normalisation -------------------------------------------------------------------

    def op_LayerNorm(self, a, ins, vin, vout, loc):
        ns = a["normalized_shape"]
        d = self.dtype(vout[0])
        it = iter(ins[1:])
        w = next(it) if a["weight"] else self.const(np.ones(ns), d)
        b = [next(it)] if a["bias"] else []
        return self.node("LayerNormalization", [ins[0], w, *b], axis=-len(ns), epsilon=float(a["eps"]))

    def op_RmsNorm(self, a, ins, vin, vout, loc):
        ns = a["normalized_shape"]
        d = self.dtype(vout[0])
        eps = a["eps"] if a["eps"] is not None else float(np.finfo(_NP[d]).eps)
        axes = list(range(-len(ns), 0))
        x = ins[0]
        ms = self.node("ReduceMean", [self.node("Mul", [x, x])], axes=axes, keepdims=1)
        y = self.node(
            "Mul",
            [x, self.node("Reciprocal", [self.node("Sqrt", [self.node("Add", [ms, self.const(eps, d)])])])],
        )
        return self.node("Mul", [y, ins[1]]) if a["weight"] else y

    # -- creation ------------------------------------------------------------------------

    def op_Full(self, a, ins, vin, vout, loc):
        shape = self.shape(vout[0])
        if any(isinstance(s, str) for s in shape):
            raise NotImplementedError(f"full with a symbolic shape ({loc})")
        return self.node(
            "Identity", [self.const(np.full(shape, _scalar(a["value"])[1]), self.dtype(vout[0]))]
        )

    def op_Arange(self, a, ins, vin, vout, loc):
        vals = [_scalar(a[k])[1] for k in ("start", "end", "step")]
        return self.node("Identity", [self.const(np.arange(*vals), self.dtype(vout[0]))])


def _as_input(a: Any) -> Any:
    """An example input as a tensor; tuples and lists of tensors (an LSTM's ``(h, c)``) stay nested."""
    if isinstance(a, _core.Tensor):
        return a
    if isinstance(a, (tuple, list)) and a and all(isinstance(x, (_core.Tensor, tuple, list)) for x in a):
        return type(a)(_as_input(x) for x in a)
    return _core.tensor(a)


def export(
    fn_or_module: Callable[..., Any],
    example_inputs: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic: bool = False,
) -> Any:
    """Export a function or module to an ONNX model (``onnx.ModelProto``),
    written to ``path`` when given.

    ``example_inputs``: a tensor or a tuple of tensors to capture with; an
    argument that is itself a tuple of tensors (a recurrent state ``(h, c)``)
    becomes one graph input per tensor, in order.
    ``fn_or_module`` may also be a :class:`ferrograd.Graph` already captured
    that has outputs (a compiled function's graph, or the graph of a TF1
    program from ``Session.to_fg_graph``); ``example_inputs`` is then unused.
    ``dynamic=True`` exports symbolic dims (the batch size) as named ONNX
    dims. ``input_names`` / ``output_names`` name the graph's inputs and
    outputs (default ``input0``..., ``output0``...). Modules are exported in
    the mode they are in (call ``.eval()`` first for inference). Raises
    ``ImportError`` without the ``onnx`` package and ``NotImplementedError``
    for graphs or ops that have no ONNX form.
    """
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        raise ImportError("fg.onnx.export needs the onnx package: pip install 'ferrograd[onnx]'") from e
    from ._compile import compile as fg_compile
    from ._grad_mode import no_grad
    from .graph import Graph

    if isinstance(fn_or_module, Graph):  # a graph already captured, with outputs of its own
        built = fn_or_module._built()
        if not built.outputs:
            raise ValueError(
                "fg.onnx.export: the graph has no outputs of its own; export a graph with outputs "
                "(a compiled function's, or a TF1 session's to_fg_graph(fetches))"
            )
        model = _Exporter(built, input_names, output_names).run()
        if path is not None:
            import onnx

            onnx.save(model, os.fspath(path))
        return model
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    args = tuple(_as_input(a) for a in args)
    compiled = fg_compile(fn_or_module, dynamic=dynamic, passes={"fuse": False, "epilogue": False})
    with no_grad():
        compiled(*args)
        graph = compiled.graph(*args)
    model = _Exporter(graph._built(), input_names, output_names).run()
    if path is not None:
        import onnx

        onnx.save(model, os.fspath(path))
    return model
