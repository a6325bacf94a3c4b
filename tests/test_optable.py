"""The op-table driver: every ``OpSpec`` × every dtype it lists, checked against NumPy.

For each case hypothesis draws inputs with ``spec.sample``; the driver builds
tensors (bfloat16 from float32 carriers), runs ``spec.fg_fn``, computes
``spec.np_fn`` on float64 copies (or in the input dtype with
``ref_in_dtype``), and checks output count, shape, the dtype PyTorch would
give, values within the dtype's tolerance (NaN positions included), that
inputs were left unchanged (except the one a mutating op writes), and that
view ops share their input's storage. With ``spec.noncontig`` the same
inputs run again as non-contiguous views (permuted memory order, strides
±1/±2, including negative strides) and must give the same result.

Settings come from the hypothesis profile registered in ``conftest.py``
(derandomised, no example database), so runs are deterministic.
"""

from __future__ import annotations

import os

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from optable import ALL_SPECS
from optable._runner import (
    as_array,
    compare,
    fg_values,
    ref_inputs,
    same_values,
    to_fg,
    to_fg_noncontig,
)
from optable._spec import ALL, OpSpec

REGISTRY = {op["name"]: op for op in fg.registry()}
# FG_OPTABLE_SCALE=4 draws four times as many examples per case (e.g. for a nightly run).
SCALE = float(os.environ.get("FG_OPTABLE_SCALE", "1"))
SPEC_NAMES = [s.name for s in ALL_SPECS]


def _cases():
    for spec in ALL_SPECS:
        for dtype in spec.dtypes:
            marks = [pytest.mark.optable_cell(spec.name, dtype)]
            reason = spec.xfail.get(dtype) or spec.xfail.get("*")
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            yield pytest.param(spec, dtype, id=f"{spec.name}-{dtype}", marks=marks)


def _build(arrays, dtype, noncontig, rng):
    """Tensors for the fg call, plus (tensor, backing array, original values) for the unchanged-check."""
    args, tracked = [], []
    for a in arrays:
        a = as_array(a)
        if not isinstance(a, np.ndarray):
            args.append(a)
            tracked.append(None)
            continue
        if noncontig and a.ndim >= 1 and a.size > 0:
            t, backing = to_fg_noncontig(a, dtype, rng)
        else:
            t, backing = to_fg(a, dtype)
        args.append(t)
        tracked.append((t, backing, fg_values(t)))
    return args, tracked


def _check_case(spec: OpSpec, dtype: str, arrays, kwargs, ref, noncontig: bool, rng) -> None:
    where = f"{spec.name}[{dtype}{', non-contiguous' if noncontig else ''}]"
    args, tracked = _build(arrays, dtype, noncontig, rng)
    # Sanity of the driver itself: the tensors hold the sampled values.
    for a, tr in zip(arrays, tracked, strict=True):
        if tr is not None:
            assert same_values(tr[2], np.asarray(a)), f"{where}: driver built a wrong input tensor"
    out = spec.fg_fn(*args, **kwargs)
    if spec.np_fn is not None:
        compare(spec, dtype, out, ref, kwargs, where)
    info = REGISTRY.get(spec.name, {})
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
        return spec.np_fn(*ins, **kwargs)


@pytest.mark.parametrize("spec,dtype", list(_cases()))
def test_op(spec: OpSpec, dtype: str):
    if spec.skip:
        pytest.skip(spec.skip)

    @settings(max_examples=max(1, round(spec.max_examples * SCALE)), deadline=None)
    @given(st.data())
    def run(data):
        arrays, kwargs = spec.sample(data.draw, dtype)
        try:
            ref = _reference(spec, dtype, arrays, kwargs)
            _check_case(spec, dtype, arrays, kwargs, ref, False, None)
            if spec.noncontig:
                rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="layout seed"))
                _check_case(spec, dtype, arrays, kwargs, ref, True, rng)
        except BaseException:
            note(_describe(arrays, kwargs))
            raise

    run()


def test_every_registry_op_has_a_spec():
    missing = sorted(set(REGISTRY) - set(SPEC_NAMES))
    assert not missing, f"registry ops without an op-table spec: {missing}"


def test_specs_name_registry_ops():
    unknown = sorted(set(SPEC_NAMES) - set(REGISTRY))
    assert not unknown, f"op-table specs naming no registry op: {unknown}"


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
