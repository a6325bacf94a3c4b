"""The low-precision gradient column on the GPU: ``<op>-grad-<dtype>`` cells on WebGPU.

The same cells as ``tests/test_optable.py::test_grad_lowp``: every
differentiable op's VJP in float32, float16 and bfloat16 (those the spec
lists and the GPU supports), computed on the WebGPU device from inputs and
cotangents rounded to the dtype, against the float64 VJP of the same values
on the CPU, within the tolerance described in ``tests/optable/_lowp.py``
times ``GPU_FACTOR``. Few, small examples: a software adapter is slow.
"""

from __future__ import annotations

import os

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from optable import ALL_SPECS, examples, op_info, op_supports
from optable._lowp import LOWP_DTYPES, compare, describe, draw_example, lowp_grads, reference
from optable._spec import OpSpec

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

EXAMPLES = int(os.environ.get("FG_GPU_OPTABLE_EXAMPLES", "6"))
MAX_ELEMENTS = 40
# WGSL's exp, log, pow and the erf approximation (|error| <= 1.5e-7) are a few
# float32 ulps looser than the CPU's: pow's float32 gradient (its power taken as
# exp2(b·log2 a), whose error grows with |b·log2 a|) came to 5.7 unit roundoffs
# where the CPU's stays near 2 to 4. float16 and bfloat16, computed in float32
# too, do not see the difference.
GPU_FACTOR = {"float32": 2.0, "float16": 1.0, "bfloat16": 1.0}
# Keyword arguments replaced on the GPU: the gradient samples of `to` convert to
# float64, a type the gpu device does not hold; there they convert to float32.
GPU_KWARGS = {"to": {"target": "float32"}}
REGISTRY = {op["name"]: op for op in fg.registry()}
SPECS = [s for s in ALL_SPECS if op_info(s, REGISTRY).get("differentiable")]


def _cases():
    for spec in SPECS:
        for dtype in LOWP_DTYPES:
            if dtype in spec.dtypes:
                yield pytest.param(spec, dtype, id=f"{spec.name}-grad-{dtype}",
                                   marks=[pytest.mark.optable_cell(spec.name, f"gpu-grad-{dtype}")])


@pytest.mark.parametrize("spec,dtype", list(_cases()))
def test_gpu_grad_lowp(spec: OpSpec, dtype: str):
    """The GPU's VJP in ``dtype`` equals the CPU's float64 VJP of the same rounded values."""
    if spec.skip:
        pytest.skip(spec.skip)
    if spec.grad_skip:
        pytest.skip(spec.grad_skip)
    if op_supports(spec, dtype, "gpu") is False:
        pytest.skip(f"{spec.name} does not support {dtype} on the gpu device")
    ran: list[float] = []
    unsupported: list[str] = []  # a composed spec whose parts have no GPU kernel (sort)

    @settings(max_examples=examples(EXAMPLES), deadline=None)
    @given(st.data())
    def run(data):
        ex = draw_example(spec, data.draw, dtype, MAX_ELEMENTS, False)
        ex.kwargs.update(GPU_KWARGS.get(spec.name, {}))
        # int64 is kept in 32 bits on the GPU
        assume(not any(isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.size and np.abs(a).max() >= 2**31
                       for a in ex.arrays))
        ref = reference(spec, ex, dtype)
        assume(ref is not None)
        try:
            got = lowp_grads(spec, ex, ref, dtype, "gpu")
            worst, where = compare(ex, got, ref, dtype, spec.lowp_factor(dtype) * GPU_FACTOR[dtype])
        except RuntimeError as e:
            if spec.composed and "not supported on the gpu device" in str(e):
                unsupported.append(str(e))
                return
            note(describe(ex))
            raise
        except BaseException:
            note(describe(ex))
            raise
        ran.append(worst)
        if worst > 1.0:
            note(describe(ex))
            raise AssertionError(f"{spec.name}[{dtype}] gradient on the gpu differs from float64: {where}")

    run()
    if not ran and unsupported:
        pytest.skip(f"not on the gpu device: {unsupported[0]}")
    assert ran, f"{spec.name}[{dtype}]: no drawn example had a gradient to compare"


def test_erfinv_float32_is_accurate_in_the_tail():
    """erfinv in float32 on the GPU, near ±1 where the root ``erf(x) = y`` is ill-conditioned:
    its Newton residual there is ``(1 - y) - erfc(x)`` (``1 - y`` exact, ``erfc`` small), where
    ``erf(x) - y`` carried the GPU erf's absolute error of 2.5e-7, magnified to 140 unit
    roundoffs in the value and 1,500 in the gradient at y = 0.995 (found by the
    ``erfinv-grad-float32`` cell with other samples). The bound is the cell's (16 · 2 u)."""
    import scipy.special as sp

    y = np.linspace(-0.9995, 0.9995, 4001).astype(np.float32)
    x64 = sp.erfinv(y.astype(np.float64))
    g64 = np.sqrt(np.pi) / 2 * np.exp(x64**2)
    t = fg.tensor(y, device="gpu").requires_grad_()
    x = fg.erfinv(t)
    (g,) = fg.autograd.grad([x], [t], [fg.ones_like(x)])
    u = 2.0**-24
    bound = 16 * GPU_FACTOR["float32"] * u
    xv, gv = x.detach().cpu().numpy(), g.cpu().numpy()
    assert (np.abs(xv - x64) <= bound * np.abs(x64) + 2.0**-126).all()
    assert (np.abs(gv - g64) <= bound * g64).all()
