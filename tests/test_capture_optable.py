"""The op table through graph capture: every op's samples run eagerly, through
``fg.compile`` (tracing) and through the static API (``fg.Graph`` +
``fg.Session``), and the results must match — exactly, since a captured
graph calls the same op functions eager mode does. Gradients are checked the
same way: ``fg.autograd.grad`` traced into a graph against eager.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from optable import ALL_SPECS, examples, expandable, op_info
from optable._runner import (
    as_array,
    as_tuple,
    bool_key,
    conform_all,
    draw_layouts,
    fg_values,
    to_fg,
    to_fg_strided,
)
from optable._spec import OpSpec

REGISTRY = {op["name"]: op for op in fg.registry()}

# Ops whose spec cannot be captured, with the reason (the test checks the
# reason holds: capturing them raises TraceError).
DATA_DEPENDENT = {name for name, info in REGISTRY.items() if info["data_dependent"]}
DATA_DEPENDENT |= {s.name for s in ALL_SPECS if op_info(s, REGISTRY).get("data_dependent")}

PASSES_OFF = {p: False for p in ("dce", "cse", "fold", "simplify", "fuse", "epilogue", "inplace", "parallel")}


def _cases():
    for spec in ALL_SPECS:
        if spec.skip:
            continue
        dts = [d for d in spec.dtypes if d in ("float32", "int64", "bool")] or list(spec.dtypes[:1])
        for dtype in dts:
            yield pytest.param(spec, dtype, id=f"{spec.name}-{dtype}")


def _tensors(arrays, dtype, lays):
    out = []
    for a, lay in zip(arrays, lays, strict=True):
        a = as_array(a)
        if not isinstance(a, np.ndarray):
            out.append(a)
        elif lay is not None:
            out.append(to_fg_strided(a, dtype, lay)[0])
        else:
            out.append(to_fg(a, dtype)[0])
    return out


def _draw(data, spec: OpSpec, dtype: str):
    """One drawn sample as tensors (contiguous or not, drawn too) and its kwargs."""
    arrays, kwargs = spec.sample(data.draw, dtype)
    lays = [None] * len(arrays)
    if data.draw(st.booleans(), label="non-contiguous"):
        lays = draw_layouts(data.draw, arrays, expandable(spec, arrays, REGISTRY))
        arrays = conform_all(arrays, lays)
    base = _tensors(arrays, dtype, lays)
    note(f"inputs: {[getattr(a, 'shape', a) for a in base]}, kwargs {kwargs}, layouts {lays}")
    return base, kwargs


def _copies(args):
    return [a.clone() if isinstance(a, fg.Tensor) else a for a in args]


def _vals(x):
    return [fg_values(o) if isinstance(o, fg.Tensor) else np.asarray(o) for o in as_tuple(x)]


def _same(a, b, where):
    a, b = _vals(a), _vals(b)
    assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} outputs"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x.shape == y.shape, f"{where}, output {i}: shape {x.shape} vs {y.shape}"
        assert x.dtype == y.dtype, f"{where}, output {i}: dtype {x.dtype} vs {y.dtype}"
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), f"{where}, output {i}: values differ\n{x}\n{y}"
        else:
            assert np.array_equal(x, y), f"{where}, output {i}: values differ\n{x}\n{y}"


@pytest.mark.parametrize("spec,dtype", list(_cases()))
def test_op_captured(spec: OpSpec, dtype: str):
    """Eager, ``fg.compile`` and the static API agree on every sample (and on mutated inputs)."""
    info = op_info(spec, REGISTRY)

    @settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        base, kwargs = _draw(data, spec, dtype)

        def fn(*xs):
            return spec.fg_fn(*xs, **kwargs)

        eager_in = _copies(base)
        seed = data.draw(st.integers(0, 2**31), label="rng seed")
        fg.manual_seed(seed)
        try:
            want = fn(*eager_in)
        except Exception as e:  # the op refuses this sample: capture must refuse it too
            cin = _copies(base)
            fg.manual_seed(seed)
            with pytest.raises(type(e)):
                fg.compile(fn)(*cin)
            return
        if spec.name in DATA_DEPENDENT or bool_key(kwargs):
            # Output shapes that depend on values (boolean masks) cannot be captured.
            with pytest.raises(fg.TraceError):
                fg.compile(fn)(*_copies(base))
            return
        for passes, label in ((None, "passes on"), (PASSES_OFF, "passes off")):
            compiled = fg.compile(fn, passes=passes)
            for attempt in range(2):  # the first call traces, the second replays
                cin = _copies(base)
                fg.manual_seed(seed)
                got = compiled(*cin)
                _same(got, want, f"{spec.name}[{dtype}] compiled, {label} (call {attempt + 1})")
                for i, (a, b) in enumerate(zip(cin, eager_in, strict=True)):
                    if isinstance(a, fg.Tensor):
                        _same(a, b, f"{spec.name}[{dtype}] compiled, {label}: input {i} after the call")
            assert compiled.stats.traces == 1
        # The static API: placeholders of the sample's shapes, one Session.run.
        if info.get("mutates") is not None or info.get("views") is not None:
            return  # placeholders are read-only graph inputs; views of them are not fetchable copies
        fg.manual_seed(seed)
        want_base = fn(*base)  # the static graph reads `base` itself (same layouts)
        g = fg.Graph()
        with g:
            phs = [
                fg.placeholder(a.dtype, shape=tuple(a.shape), name=f"in{i}") if isinstance(a, fg.Tensor) else a
                for i, a in enumerate(base)
            ]
            out = fn(*phs)
        feed = {p: a for p, a in zip(phs, base, strict=True) if isinstance(a, fg.Tensor)}
        for off, label in ((False, "passes on"), (True, "passes off")):
            old = fg.set_graph_passes(all=False) if off else None
            try:
                fg.manual_seed(seed)
                res = fg.Session(g).run(list(as_tuple(out)), feed=feed)
            finally:
                if old is not None:
                    fg.set_graph_passes(**old)
            _same(tuple(res), want_base, f"{spec.name}[{dtype}] static graph, {label}")

    run()


GRAD_SPECS = [s for s in ALL_SPECS if op_info(s, REGISTRY).get("differentiable") and not s.skip and not s.grad_skip]


@pytest.mark.parametrize("spec", GRAD_SPECS, ids=[s.name for s in GRAD_SPECS])
def test_grad_captured(spec: OpSpec):
    """Gradients computed inside a captured graph equal eager gradients (float64)."""

    @settings(max_examples=examples(3), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        sampler = spec.grad_sample or spec.sample
        arrays, kwargs = sampler(data.draw, "float64")
        arrays = [as_array(a) for a in arrays]
        floats = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        diff = list(spec.grad_args) if spec.grad_args is not None else floats
        if not diff or any(arrays[i].size == 0 for i in diff):
            return
        tensors = [
            to_fg(a.astype(np.float64) if i in diff else a, "float64" if i in diff else a.dtype.name)[0]
            if isinstance(a, np.ndarray) else a
            for i, a in enumerate(arrays)
        ]
        f = spec.grad_fn or spec.fg_fn

        def grads(*xs):
            xs = list(xs)
            ins = [xs[i].detach().requires_grad_() for i in diff]
            for k, i in enumerate(diff):
                xs[i] = ins[k]
            outs = [o for o in as_tuple(f(*xs, **kwargs)) if isinstance(o, fg.Tensor) and o.dtype.is_floating_point]
            total = sum((o * (1.0 + 0.5 * fg.arange(o.numel(), dtype=o.dtype).reshape(o.shape))).sum() for o in outs)
            return fg.autograd.grad(total, ins, allow_unused=True)

        want = grads(*tensors)
        if spec.name in DATA_DEPENDENT or bool_key(kwargs):
            with pytest.raises(fg.TraceError):
                fg.compile(grads)(*tensors)
            return
        for passes, label in ((None, "passes on"), (PASSES_OFF, "passes off")):
            got = fg.compile(grads, passes=passes)(*tensors)
            for k, (a, b) in enumerate(zip(got, want, strict=True)):
                if b is None:
                    assert a is None
                    continue
                np.testing.assert_allclose(fg_values(a), fg_values(b), rtol=1e-12, atol=1e-12,
                                           err_msg=f"{spec.name}: gradient {k}, {label}")

    run()


# ---------------------------------------------------------------------------
# Compiled-vs-eager column: every cell with gradients recorded, and through a
# saved graph file
# ---------------------------------------------------------------------------

# float32 results of a graph whose passes may sum in another order (fusion):
# the tolerance. Every other dtype, and every result eager computes
# exactly, must match bit for bit.
F32_TOL = (1e-5, 1e-6)


def _close(got, want, where):
    got, want = _vals(got), _vals(want)
    assert len(got) == len(want), f"{where}: {len(got)} vs {len(want)} outputs"
    for i, (x, y) in enumerate(zip(got, want, strict=True)):
        assert x.shape == y.shape, f"{where}, output {i}: shape {x.shape} vs {y.shape}"
        assert x.dtype == y.dtype, f"{where}, output {i}: dtype {x.dtype} vs {y.dtype}"
        if x.dtype == np.float32:
            np.testing.assert_allclose(x, y, rtol=F32_TOL[0], atol=F32_TOL[1], equal_nan=True,
                                       err_msg=f"{where}, output {i}")
        else:
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"{where}, output {i}: values differ\n{x}\n{y}"


def _all_cases():
    for spec in ALL_SPECS:
        if spec.skip:
            continue
        for dtype in spec.dtypes:
            yield pytest.param(spec, dtype, id=f"{spec.name}-{dtype}",
                               marks=[pytest.mark.optable_cell(spec.name, "compiled")])


def _cotangent_loss(outs):
    """A weighted sum of the float outputs that record a gradient (distinct weights per element)."""
    total = None
    for o in outs:
        if isinstance(o, fg.Tensor) and o.dtype.is_floating_point and o.requires_grad:
            w = 1.0 + 0.25 * fg.arange(o.numel(), dtype=fg.float64).reshape(o.shape).to(o.dtype)
            term = (o * w).sum()
            total = term if total is None else total + term
    return total


@pytest.mark.parametrize("spec,dtype", list(_all_cases()))
def test_op_compiled_column(spec: OpSpec, dtype: str, tmp_path):
    """Every op-table cell through ``fg.compile`` with gradients recorded (the
    outputs, then the input gradients of a backward through them) and through
    ``Graph.save`` / ``fg.load_graph``, against eager."""
    info = op_info(spec, REGISTRY)
    float_dtype = dtype.startswith("float") or dtype == "bfloat16"
    record = float_dtype and info.get("differentiable") and info.get("mutates") is None and not spec.grad_skip
    ran = []

    @settings(max_examples=examples(4), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        base, kwargs = _draw(data, spec, dtype)
        seed = data.draw(st.integers(0, 2**31), label="rng seed")

        def fn(*xs):
            return spec.fg_fn(*xs, **kwargs)

        fg.manual_seed(seed)
        try:
            want = fn(*_copies(base))
        except Exception:
            return  # refusals are checked by test_op_captured
        where = f"{spec.name}[{dtype}]"
        if spec.name in DATA_DEPENDENT or bool_key(kwargs):
            # Output shapes that depend on values: refused at capture, in both modes.
            with pytest.raises(fg.TraceError):
                fg.compile(fn)(*_copies(base))
            with pytest.raises(fg.TraceError):
                fg.compile(fn).graph(*_copies(base))
            ran.append(1)
            return
        # 1. Gradients recorded: the graph records autograd as it runs.
        if record:
            diff = [i for i, a in enumerate(base) if isinstance(a, fg.Tensor) and a.dtype.is_floating_point]
            if spec.grad_args is not None:
                diff = [i for i in diff if i in spec.grad_args]

            def leaves():
                xs = _copies(base)
                for i in diff:
                    xs[i] = xs[i].detach().requires_grad_()
                return xs

            fg.manual_seed(seed)
            e_in = leaves()
            e_out = fn(*e_in)
            compiled = fg.compile(fn)
            for call in range(2):
                c_in = leaves()
                fg.manual_seed(seed)
                c_out = compiled(*c_in)
                _close(c_out, e_out, f"{where} compiled with gradients recorded (call {call + 1})")
                for a, b in zip(as_tuple(c_out), as_tuple(e_out), strict=True):
                    if isinstance(b, fg.Tensor):
                        assert a.requires_grad == b.requires_grad, f"{where}: requires_grad differs"
                e_loss, c_loss = _cotangent_loss(as_tuple(e_out)), _cotangent_loss(as_tuple(c_out))
                if e_loss is None:
                    continue
                if call == 0:
                    e_loss.backward()
                c_loss.backward()
                for i in diff:
                    eg, cg = e_in[i].grad, c_in[i].grad
                    assert (eg is None) == (cg is None), f"{where}: gradient {i} present in one mode only"
                    if eg is not None:
                        _close(cg, eg, f"{where} compiled, gradient of input {i} (call {call + 1})")
            assert compiled.stats.traces == 1, f"{where}: traced {compiled.stats.traces} times"
        # 2. No gradients recorded (every dtype), then saved and loaded: the
        # graph file runs without the code that built it.
        cin = _copies(base)
        fg.manual_seed(seed)
        compiled = fg.compile(fn)
        with fg.no_grad():
            _close(compiled(*cin), want, f"{where} compiled under no_grad")
        g = compiled.graph(*_copies(base))
        path = tmp_path / f"{spec.name}.fgraph"
        g.save(path)
        loaded = fg.load_graph(path)
        lin = _copies(base)
        fg.manual_seed(seed)
        targs = [a for a in lin if isinstance(a, fg.Tensor)]
        # Arguments the graph does not read are not part of the saved signature.
        n_args = max((i["position"] + 1 for i in loaded._built().inputs() if i["kind"] == "arg"), default=0)
        got = loaded(*targs[:n_args])
        _close(got, want, f"{where} saved and loaded")
        ran.append(1)

    run()
    if not ran:
        pytest.skip(f"{spec.name}[{dtype}]: every drawn sample is refused eagerly "
                    "(test_op_captured checks that capture refuses them too)")
