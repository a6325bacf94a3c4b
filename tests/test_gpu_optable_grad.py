"""GPU gradient parity of the op table: every differentiable op's backward on the GPU.

For each op-table spec whose registry op is differentiable, a few drawn float32
examples (the gradient column's samples, moved off kinks and ties) run forward
and backward twice: on CPU tensors and on the same values on the WebGPU
device, with one random cotangent per float output. The input gradients the
GPU computes (through the same VJP rules, with the GPU's kernels, its fused
gradient kernels included) must stay on the GPU and match the CPU's within
float32 tolerances scaled by the gradient's size. The float64 finite-difference
checks of the rules themselves are ``tests/test_optable.py``'s gradient columns.
"""

from __future__ import annotations

import os

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from optable import ALL_SPECS, examples, op_info
from optable._runner import as_array, draw_layouts, float_outputs, off_kinks, strided_array, view_geometry
from optable._spec import OpSpec

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

EXAMPLES = int(os.environ.get("FG_GPU_OPTABLE_EXAMPLES", "3"))
REGISTRY = {op["name"]: op for op in fg.registry()}
SPECS = [s for s in ALL_SPECS if op_info(s, REGISTRY).get("differentiable")]
MAX_ELEMENTS = 400
# (rtol, atol relative to the largest gradient element): float32 on two devices whose
# sums run in different orders, and WGSL's looser transcendental functions.
RTOL, ATOL = 2e-3, 2e-4
UNSUPPORTED = "not on the gpu device"
MIXED = ("expected all tensors to be on the same device", "all tensors must be on one device")


def _tensor(a: np.ndarray, lay, device: str):
    """``a`` on ``device``: contiguous, or laid out as ``lay`` (a strided view of a bigger buffer)."""
    if lay is None:
        return fg.tensor(a, device=device)
    view = strided_array(a, lay)
    base, offset, strides = view_geometry(view)
    if base.dtype == np.int64:  # the GPU keeps int64 in 32 bits: a sentinel that fits
        base[base == np.iinfo(np.int64).max // 3] = 2**30
    flat = fg.from_numpy(np.ascontiguousarray(base).reshape(-1)).to(device)
    return flat.as_strided(view.shape, strides, offset)


def _grads(spec: OpSpec, arrays, kwargs, diff, cot_seed, device, lays):
    """Input gradients of the spec's function at ``arrays`` (laid out as ``lays``) on ``device``
    (None where unused)."""
    tensors = []
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            tensors.append(a)
            continue
        t = _tensor(a, lays[i], device)
        tensors.append(t.requires_grad_() if i in diff else t)
    outs = float_outputs((spec.grad_fn or spec.fg_fn)(*tensors, **kwargs))
    outs = [o for o in outs if o.requires_grad]
    if not outs:
        return None
    rng = np.random.default_rng(cot_seed)
    cots = [fg.tensor(rng.standard_normal(o.shape).astype(np.float32), device=device) for o in outs]
    inputs = [tensors[i] for i in diff]
    gs = fg.autograd.grad(outs, inputs, cots, allow_unused=True)
    for g in gs:
        if g is not None:
            assert str(g.device) == device, f"{spec.name}: a gradient landed on {g.device}"
    return [None if g is None else g.cpu().numpy() for g in gs]


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_gpu_gradients_match_cpu(spec: OpSpec):
    if spec.skip:
        pytest.skip(spec.skip)
    if spec.grad_skip:
        pytest.skip(spec.grad_skip)
    reasons: list[str] = []
    ran: list[bool] = []

    @settings(max_examples=examples(EXAMPLES), deadline=None)
    @given(st.data())
    def run(data):
        arrays, kwargs = (spec.grad_sample or spec.sample)(data.draw, "float64")
        arrays = [as_array(a) for a in arrays]
        floats = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        diff = list(spec.grad_args) if spec.grad_args is not None else floats
        assume(sum(arrays[i].size for i in floats) <= MAX_ELEMENTS)
        assume(all(np.isfinite(arrays[i]).all() for i in floats))
        if any(isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.size and np.abs(a).max() >= 2**31
               for a in arrays):
            return  # int64 is 32-bit on the GPU
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
        if spec.grad_snap:
            arrays = [off_kinks(a, rng) if i in diff else a for i, a in enumerate(arrays)]
        arrays = [a.astype(np.float32) if i in floats else a for i, a in enumerate(arrays)]
        cot_seed = int(rng.integers(2**31))
        lays = [None] * len(arrays)
        if spec.noncontig and data.draw(st.booleans(), label="non-contiguous inputs"):
            lays = draw_layouts(data.draw, arrays)
        try:
            want = _grads(spec, arrays, kwargs, diff, cot_seed, "cpu", lays)
        except Exception as e:  # noqa: BLE001 - the GPU must then fail the same way
            want, cpu_err = None, e
        else:
            cpu_err = None
        try:
            got = _grads(spec, arrays, kwargs, diff, cot_seed, "gpu", lays)
        except Exception as e:  # noqa: BLE001
            if cpu_err is not None:
                assert type(e) is type(cpu_err), f"CPU raised {cpu_err!r}, GPU raised {e!r}"
                return
            if any(m in str(e) for m in MIXED) or (UNSUPPORTED.replace("not on", "not supported on") in str(e)):
                reasons.append(f"{UNSUPPORTED}: {e}")
                return
            note(f"inputs: {arrays!r} kwargs: {kwargs!r} layouts: {lays}")
            raise
        assert cpu_err is None, f"CPU raised {cpu_err!r} but the GPU returned gradients"
        if want is None:
            assert got is None
            return
        ran.append(True)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert (g is None) == (w is None), f"input {diff[k]}: gradient present on one device only"
            if w is None:
                continue
            finite = np.abs(w[np.isfinite(w)])
            scale = float(finite.max()) if finite.size else 0.0
            if not np.allclose(g, w, rtol=RTOL, atol=ATOL * max(scale, 1.0), equal_nan=True):
                note(f"inputs: {arrays!r} kwargs: {kwargs!r} layouts: {lays}")
                np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL * max(scale, 1.0), equal_nan=True,
                                           err_msg=f"{spec.name}: gradient of input {diff[k]}")

    run()
    if not ran:
        pytest.skip(reasons[0][:300] if reasons else "no example produced a float output to differentiate")
