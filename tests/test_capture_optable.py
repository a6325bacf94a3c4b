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
from optable import ALL_SPECS
from optable._runner import as_array, as_tuple, bool_key, fg_values, to_fg, to_fg_noncontig
from optable._spec import OpSpec

REGISTRY = {op["name"]: op for op in fg.registry()}

# Ops whose spec cannot be captured, with the reason (the test checks the
# reason holds: capturing them raises TraceError).
DATA_DEPENDENT = {name for name, info in REGISTRY.items() if info["data_dependent"]}

PASSES_OFF = {p: False for p in ("dce", "cse", "fold", "simplify", "fuse", "inplace", "parallel")}


def _cases():
    for spec in ALL_SPECS:
        if spec.skip:
            continue
        dts = [d for d in spec.dtypes if d in ("float32", "int64", "bool")] or list(spec.dtypes[:1])
        for dtype in dts:
            yield pytest.param(spec, dtype, id=f"{spec.name}-{dtype}")


def _tensors(arrays, dtype, rng, noncontig):
    out = []
    for a in arrays:
        a = as_array(a)
        if not isinstance(a, np.ndarray):
            out.append(a)
        elif noncontig and a.ndim >= 1 and a.size > 0:
            out.append(to_fg_noncontig(a, dtype, rng)[0])
        else:
            out.append(to_fg(a, dtype)[0])
    return out


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
    info = REGISTRY.get(spec.name, {})

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        arrays, kwargs = spec.sample(data.draw, dtype)
        noncontig = data.draw(st.booleans(), label="non-contiguous")
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
        base = _tensors(arrays, dtype, rng, noncontig)
        note(f"inputs: {[getattr(a, 'shape', a) for a in base]}, kwargs {kwargs}")

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


GRAD_SPECS = [s for s in ALL_SPECS if REGISTRY.get(s.name, {}).get("differentiable") and not s.skip and not s.grad_skip]


@pytest.mark.parametrize("spec", GRAD_SPECS, ids=[s.name for s in GRAD_SPECS])
def test_grad_captured(spec: OpSpec):
    """Gradients computed inside a captured graph equal eager gradients (float64)."""

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
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
