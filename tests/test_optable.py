"""The op-table driver: every ``OpSpec`` × every dtype it lists, checked against NumPy.

For each case hypothesis draws inputs with ``spec.sample``; the driver builds
tensors (bfloat16 from float32 carriers), runs ``spec.fg_fn``, computes
``spec.np_fn`` on float64 copies (or in the input dtype with
``ref_in_dtype``), and checks output count, shape, the dtype PyTorch would
give, values within the dtype's tolerance (NaN positions included), that
inputs were left unchanged (except the one a mutating op writes), and that
view ops share their input's storage. With ``spec.noncontig`` the same
inputs run again as non-contiguous views whose layout hypothesis draws per
input (``optable._runner.layouts``: permuted memory order, steps of ±1/±2/3,
expanded dims of stride 0, a storage offset, sentinels around the view) and
must give the same result; a failure shrinks to the simplest such layout.

Settings come from the hypothesis profile registered in ``conftest.py``
(derandomised, no example database), so runs are deterministic.
"""

from __future__ import annotations

import copy

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from optable import ALL_SPECS, examples, expandable, op_info
from optable._lowp import LOWP_DTYPES, draw_example, lowp_grads, reference
from optable._lowp import compare as lowp_compare
from optable._lowp import describe as lowp_describe
from optable._runner import (
    as_array,
    compare,
    conform_all,
    draw_layouts,
    fg_values,
    float_outputs,
    off_kinks,
    ref_inputs,
    same_values,
    to_fg,
    to_fg_strided,
)
from optable._spec import ALL, SMALL_INT_SHARE, SMALL_INTS, OpSpec

REGISTRY = {op["name"]: op for op in fg.registry()}
SPEC_NAMES = [s.name for s in ALL_SPECS]


def _cases():
    for spec in ALL_SPECS:
        for dtype in spec.dtypes:
            marks = [pytest.mark.optable_cell(spec.name, dtype)]
            reason = spec.xfail.get(dtype) or spec.xfail.get("*")
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            yield pytest.param(spec, dtype, id=f"{spec.name}-{dtype}", marks=marks)


def _build(arrays, dtype, lays):
    """Tensors for the fg call (laid out as ``lays`` where given), plus (tensor, backing
    array, original values) for the unchanged-check."""
    args, tracked = [], []
    for k, a in enumerate(arrays):
        a = as_array(a)
        if not isinstance(a, np.ndarray):
            args.append(a)
            tracked.append(None)
            continue
        if lays is not None and lays[k] is not None:
            t, backing = to_fg_strided(a, dtype, lays[k])
        else:
            t, backing = to_fg(a, dtype)
        args.append(t)
        tracked.append((t, backing, fg_values(t)))
    return args, tracked


def _check_case(spec: OpSpec, dtype: str, arrays, kwargs, ref, lays=None) -> None:
    where = f"{spec.name}[{dtype}{', non-contiguous' if lays is not None else ''}]"
    args, tracked = _build(arrays, dtype, lays)
    # Sanity of the driver itself: the tensors hold the sampled values.
    for a, tr in zip(arrays, tracked, strict=True):
        if tr is not None:
            assert same_values(tr[2], np.asarray(a)), f"{where}: driver built a wrong input tensor"
    out = spec.fg_fn(*args, **kwargs)
    if spec.np_fn is not None:
        compare(spec, dtype, out, ref, kwargs, where)
    info = op_info(spec, REGISTRY)
    mutated = info.get("mutates")
    viewed = info.get("views")
    tensor_args = [i for i, tr in enumerate(tracked) if tr is not None]
    for k, i in enumerate(tensor_args):
        if k == mutated:
            continue
        t, backing, before = tracked[i]
        now = fg_values(t) if backing is None else np.array(backing, copy=True)
        assert same_values(now, before), f"{where}: input {i} was modified"
    # Empty outputs own no elements, so there is no memory to share (as in NumPy).
    if viewed is not None and spec.view_check and isinstance(out, fg.Tensor) and out.numel() > 0 and viewed < len(tensor_args):
        src = args[tensor_args[viewed]]
        assert out._shares_storage(src), f"{where}: a view op returned a tensor not sharing its input's storage"


def _describe(arrays, kwargs) -> str:
    """The drawn inputs, for the report of a failing example."""
    parts = []
    for i, a in enumerate(arrays):
        a = as_array(a)
        if isinstance(a, np.ndarray):
            body = np.array2string(a, threshold=40, precision=8) if a.size <= 40 else "..."
            parts.append(f"  input {i}: {a.dtype}{list(a.shape)} {body}")
        else:
            parts.append(f"  input {i}: {a!r}")
    return "inputs:\n" + "\n".join(parts) + f"\n  kwargs: {kwargs!r}"


def _reference(spec: OpSpec, dtype: str, arrays, kwargs):
    if spec.np_fn is None:  # no reference: the op only has to run and leave its inputs alone
        return None
    ins = ref_inputs([as_array(a) for a in arrays], dtype, spec.ref_in_dtype)
    with np.errstate(all="ignore"):
        ref = spec.np_fn(*ins, **kwargs)
        # NumPy computes float functions of 8/16-bit integers in float16/float32 (PyTorch:
        # float32); the reference is then recomputed from the integers as float64.
        small = [isinstance(a, np.ndarray) and a.dtype.name in SMALL_INTS for a in ins]
        outs = ref if isinstance(ref, tuple | list) else (ref,)
        if any(small) and any(np.asarray(r).dtype in (np.float16, np.float32) for r in outs):
            ins = [a.astype(np.float64) if s else a for a, s in zip(ins, small, strict=True)]
            ref = spec.np_fn(*ins, **kwargs)
        return ref


@pytest.mark.parametrize("spec,dtype", list(_cases()))
def test_op(spec: OpSpec, dtype: str):
    if spec.skip:
        pytest.skip(spec.skip)

    if dtype in SMALL_INTS:  # cheap extra cells: a fraction of the spec's examples
        spec = copy.copy(spec)
        spec.max_examples = max(2, spec.max_examples // SMALL_INT_SHARE)

    @settings(max_examples=examples(spec.max_examples), deadline=None)
    @given(st.data())
    def run(data):
        arrays, kwargs = spec.sample(data.draw, dtype)
        try:
            ref = _reference(spec, dtype, arrays, kwargs)
            _check_case(spec, dtype, arrays, kwargs, ref)
        except BaseException:
            note(_describe(arrays, kwargs))
            raise
        if spec.noncontig:
            lays = draw_layouts(data.draw, arrays, expandable(spec, arrays, REGISTRY))
            if any(lay is not None and lay.expanded for lay in lays):
                arrays = conform_all(arrays, lays)  # values repeat along expanded dims
                ref = _reference(spec, dtype, arrays, kwargs)
            try:
                _check_case(spec, dtype, arrays, kwargs, ref, lays)
            except BaseException:
                note(_describe(arrays, kwargs))
                raise

    run()


# ---------------------------------------------------------------------------
# Gradient columns: first and second derivatives against finite differences
# ---------------------------------------------------------------------------

# Ops the registry does not mark differentiable, each with the reason. Any other
# op taking float inputs must record a gradient (``test_float_ops_are_differentiable``).
NOT_DIFFERENTIABLE = {
    **dict.fromkeys(["eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite"], "boolean result"),
    **dict.fromkeys(["logical_not", "logical_and", "logical_or", "logical_xor", "all", "any"], "boolean result"),
    **dict.fromkeys(["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"], "integer/bool only"),
    **dict.fromkeys(["argmax", "argmin", "argsort", "nonzero"], "integer indices"),
    "floor_divide": "piecewise constant with integer-like result (PyTorch has no gradient either)",
    **dict.fromkeys(
        ["rand", "randn", "randint", "normal", "randperm", "rand_like", "randn_like", "randint_like",
         "uniform_", "normal_", "bernoulli", "bernoulli_", "multinomial"],
        "random samples carry no gradient",
    ),
    "fill_": "overwrites its input with a constant (a 0-d tensor value records copy_: test_small_int.py)",
    **dict.fromkeys(["sgd_step", "adam_step", "rmsprop_step"], "optimizer updates write parameters in place, outside autograd"),
    "as_strided": "arbitrary (possibly overlapping) strides; refuses inputs that require grad",
}
# Differentiable ops whose VJP is not written yet. Each is an open gap (their
# outputs do not record history); the list may only shrink.
PENDING_GRAD: set[str] = set()
MAX_GRAD_ELEMENTS = 60  # finite differences cost two forward runs per input element
LOWP_EXAMPLES = 20  # at least this many examples per low-precision gradient cell
GRAD_SPECS = [s for s in ALL_SPECS if op_info(s, REGISTRY).get("differentiable")]


def _grad_cases():
    for spec in GRAD_SPECS:
        for order in ("grad", "gradgrad"):
            yield pytest.param(spec, order, id=f"{spec.name}-{order}", marks=[pytest.mark.optable_cell(spec.name, order)])


@pytest.mark.parametrize("spec,order", list(_grad_cases()))
def test_grad(spec: OpSpec, order: str):
    """Backprop (and double backprop) of every differentiable op equals central differences in float64."""
    if spec.skip:
        pytest.skip(spec.skip)
    if spec.grad_skip:
        pytest.skip(spec.grad_skip)
    if order == "gradgrad" and spec.gradgrad_skip:
        pytest.skip(spec.gradgrad_skip)
    atol, rtol = spec.grad_tol

    @settings(max_examples=examples(spec.grad_examples), deadline=None)
    @given(st.data())
    def run(data):
        sampler = spec.grad_sample or spec.sample
        arrays, kwargs = sampler(data.draw, "float64")
        arrays = [as_array(a) for a in arrays]
        floats = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        diff = list(spec.grad_args) if spec.grad_args is not None else floats
        assume(sum(arrays[i].size for i in diff) <= MAX_GRAD_ELEMENTS)
        assume(all(np.isfinite(arrays[i]).all() for i in floats))
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="value seed"))
        if spec.grad_snap:
            arrays = [off_kinks(a, rng) if i in diff else a for i, a in enumerate(arrays)]
        noncontig = spec.noncontig and data.draw(st.booleans(), label="non-contiguous inputs")
        lays = draw_layouts(data.draw, arrays) if noncontig else [None] * len(arrays)
        tensors = []
        for i, a in enumerate(arrays):
            if not isinstance(a, np.ndarray):
                tensors.append(a)
                continue
            if i in diff:
                a = a.astype(np.float64)
            if lays[i] is not None:
                t = to_fg_strided(a, a.dtype.name, lays[i])[0]
            else:
                t = to_fg(a, a.dtype.name)[0]
            tensors.append(t.requires_grad_() if i in diff else t)

        def fn(*xs):
            return float_outputs((spec.grad_fn or spec.fg_fn)(*xs, **kwargs))

        try:
            outs = fn(*tensors)
            assert outs, f"{spec.name}: no float output to differentiate"
            if diff:
                assert all(o.requires_grad for o in outs), (
                    f"{spec.name}: output does not require grad although an input does (no gradient recorded)"
                )
            check = fg.autograd.gradcheck if order == "grad" else fg.autograd.gradgradcheck
            check(fn, tensors, atol=atol, rtol=rtol)
        except BaseException:
            note(_describe(arrays, kwargs) + f"\n  layouts: {lays}")
            raise

    run()


# ---------------------------------------------------------------------------
# Low-precision gradient column: float32/float16/bfloat16 VJPs against float64
# ---------------------------------------------------------------------------

def _lowp_cases():
    for spec in GRAD_SPECS:
        for dtype in LOWP_DTYPES:
            if dtype in spec.dtypes:
                yield pytest.param(spec, dtype, id=f"{spec.name}-grad-{dtype}",
                                   marks=[pytest.mark.optable_cell(spec.name, f"grad-{dtype}")])


@pytest.mark.parametrize("spec,dtype", list(_lowp_cases()))
def test_grad_lowp(spec: OpSpec, dtype: str):
    """The VJP of every differentiable op in float32, float16 and bfloat16 equals the float64
    VJP of the same rounded inputs and cotangents, within the dtype's unit roundoff times the
    spec's ``lowp_grad_factor`` (the tolerance is described in ``tests/optable/_lowp.py``)."""
    if spec.skip:
        pytest.skip(spec.skip)
    if spec.grad_skip:
        pytest.skip(spec.grad_skip)
    ran: list[float] = []

    @settings(max_examples=examples(max(spec.grad_examples, LOWP_EXAMPLES)), deadline=None)
    @given(st.data())
    def run(data):
        ex = draw_example(spec, data.draw, dtype, MAX_GRAD_ELEMENTS, spec.noncontig)
        ref = reference(spec, ex, dtype)
        assume(ref is not None)
        try:
            got = lowp_grads(spec, ex, ref, dtype, "cpu")
            worst, where = lowp_compare(ex, got, ref, dtype, spec.lowp_factor(dtype))
        except BaseException:
            note(lowp_describe(ex))
            raise
        ran.append(worst)
        if worst > 1.0:
            note(lowp_describe(ex))
            raise AssertionError(f"{spec.name}[{dtype}] gradient differs from float64: {where}")

    run()
    assert ran, f"{spec.name}[{dtype}]: no drawn example had a gradient to compare"


def test_float_ops_are_differentiable():
    """Every registry op on float inputs records a gradient, or is listed here with the reason it does not."""
    missing = sorted(
        name for name, info in REGISTRY.items()
        if not info["differentiable"] and name not in NOT_DIFFERENTIABLE and name not in PENDING_GRAD
        and info["family"] != "creation"
        and any(d.startswith("float") for d in info["dtypes"])
    )
    assert not missing, f"float ops without a gradient: {missing}"


def test_not_differentiable_list_is_current():
    stale = sorted(n for n in NOT_DIFFERENTIABLE.keys() | PENDING_GRAD if n in REGISTRY and REGISTRY[n]["differentiable"])
    unknown = sorted(n for n in NOT_DIFFERENTIABLE.keys() | PENDING_GRAD if n not in REGISTRY)
    assert not stale and not unknown, f"stale: {stale}, not registry ops: {unknown}"


def test_every_registry_op_has_a_spec():
    missing = sorted(set(REGISTRY) - set(SPEC_NAMES))
    assert not missing, f"registry ops without an op-table spec: {missing}"


def test_specs_name_registry_ops():
    unknown = sorted({s.name for s in ALL_SPECS if not s.composed} - set(REGISTRY))
    assert not unknown, f"op-table specs naming no registry op: {unknown}"


def test_composed_specs_name_no_registry_op():
    """A composed spec whose name became a registry op must drop ``composed`` (the op's
    registry entry, not the composition's implied one, then drives its columns)."""
    clash = sorted(s.name for s in ALL_SPECS if s.composed and s.name in REGISTRY)
    assert not clash, f"composed op-table specs naming registry ops: {clash}"


def test_spec_names_are_unique():
    dup = sorted({n for n in SPEC_NAMES if SPEC_NAMES.count(n) > 1})
    assert not dup, f"op-table specs defined more than once: {dup}"


def test_spec_dtypes_match_registry():
    """Every dtype the registry declares is tested, and specs test no undeclared dtype."""
    problems = []
    for spec in ALL_SPECS:
        info = REGISTRY.get(spec.name)
        if info is None or spec.skip:
            continue
        declared = set(info["dtypes"])
        listed = set(spec.dtypes)
        bad = [d for d in spec.dtypes if d not in ALL]
        if bad:
            problems.append(f"{spec.name}: unknown dtype names {bad}")
        if declared - listed:
            problems.append(f"{spec.name}: declared but untested {sorted(declared - listed)}")
        if listed - declared:
            problems.append(f"{spec.name}: tested but not declared {sorted(listed - declared)}")
    assert not problems, "spec dtypes differ from the registry:\n" + "\n".join(problems)
