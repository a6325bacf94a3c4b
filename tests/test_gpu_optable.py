"""GPU parity of the op table: every spec's samples run on the CPU and on the WebGPU device.

For each op-table spec and each dtype the GPU holds (float32; float16,
stored natively as f16 where the adapter has shader-f16 and otherwise, like
bfloat16, as float32 rounded to its type after every kernel; int32,
int64 stored in 32 bits; bool), a few drawn examples run twice: on CPU tensors and
on the same tensors moved with ``.to("gpu")``. The GPU results must stay on
the GPU, match the CPU within float32 tolerances (WGSL's accuracy rules are
looser than the CPU kernels': a few ulp for exp/log, absolute error for
sin/cos) and cost no device-to-host reads unless the op needs host values.
An op without a GPU kernel must raise an error naming the op and the gpu
device; such cells show as skipped in the coverage matrix (column ``gpu``).

Each example that runs also runs through ``fg.compile`` on the GPU (the
captured graph, with its fused elementwise groups as generated WGSL kernels)
and must match the eager GPU result, leave in-place inputs the same, keep its
outputs on the GPU and read nothing back to the host.
"""

from __future__ import annotations

import os

import ferrograd as fg
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from optable import ALL_SPECS, examples, expandable, op_info, op_supports
from optable._runner import (
    as_array,
    as_tuple,
    bool_key,
    conform_all,
    draw_layouts,
    fg_values,
    strided_array,
    to_fg,
    view_geometry,
)
from optable._spec import OpSpec

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

GPU_DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "bool")
# Not GPU dtypes: uint8, int8 and int16 (WGSL has no 8- or 16-bit integers). Moving such a
# tensor to the device raises a TypeError naming the dtype (tests/test_small_int.py).
SMALL_INT_DTYPES = (fg.uint8, fg.int8, fg.int16)
NARROW = ("float16", "bfloat16")
EXAMPLES = int(os.environ.get("FG_GPU_OPTABLE_EXAMPLES", "3"))
# (rtol, atol) for float32 results on the GPU.
TOL = (2e-5, 2e-6)
LOOSE = {  # WGSL allows absolute error for trigonometry; compositions accumulate rounding
    "sin": (1e-4, 1e-5), "cos": (1e-4, 1e-5), "tan": (1e-4, 1e-5), "atan2": (1e-5, 1e-5),
    "pow": (1e-4, 1e-6), "var": (1e-4, 1e-5), "std": (1e-4, 1e-5), "logsumexp": (1e-5, 1e-5),
    "prod": (1e-4, 1e-6), "matmul": (1e-4, 1e-5), "erf": (1e-5, 1e-6), "gelu": (1e-5, 1e-6),
    # The GPU has no float64, so lgamma's composition runs in float32 there (the CPU widens
    # it): Stirling's (z - 1/2) log z - z at z = x + 8 and the shift sum_{k<8} log(x + k) are
    # both 10 to 20 where the result is near 0 (x in [1, 2]), so each of their ~8 float32
    # roundings is up to u * 20 = 1.2e-6 absolute: 1e-5 (3.9e-6 seen at x = 1.8978).
    "lgamma": (2e-5, 1e-5),
}
# Ops that read device values on the host by definition (data-dependent shapes, or
# float data validated on the host). Range checks of indices, class targets and integer
# divisors are absent: the examples' integer tensors were uploaded, and an upload keeps a
# host copy until a kernel writes the buffer, so those checks download nothing.
HOST_READS = {
    "floor_divide": "integer divisors are checked for zeros on the host (a download once computed on the device)",
    "remainder": "integer divisors are checked for zeros on the host (a download once computed on the device)",
    "pow": "negative integer exponents are checked on the host (a download once computed on the device)",
    "bernoulli": "probabilities are validated on the host and sampled there from the shared stream",
    "multinomial": "probabilities are validated on the host and sampled there from the shared stream",
    "nonzero": "the output's shape depends on the data",
    "masked_select": "the output's shape depends on the data",
    "median": "its gather at each slice's computed position bounds-checks the positions on the host",
    "nanmedian": "its gather at each slice's computed position bounds-checks the positions on the host",
    "quantile": "its gathers at the computed ranks bounds-check the positions on the host",
    "nanquantile": "its gathers at the computed ranks bounds-check the positions on the host",
    # Composed functions (tests/optable/composed_tensor.py):
    "allclose": "returns a Python bool read from the device",
    "equal": "returns a Python bool read from the device",
    "bincount": "the output's length depends on the data",
    "repeat_interleave": "index_select bounds-checks the computed indices on the host",
    "histc": "scatter_add bounds-checks the computed bin indices on the host",
    # tests/optable/composed_conv_more.py:
    "grid_sample": "gather bounds-checks the pixel indices computed from the grid on the host",
    "ctc_loss": "gather bounds-checks the extended target labels on the host",
    # tests/optable/composed_pool3d.py:
    "max_unpool1d": "scatter bounds-checks the given max indices on the host",
    "max_unpool2d": "scatter bounds-checks the given max indices on the host",
    "max_unpool3d": "scatter bounds-checks the given max indices on the host",
    # Composed functions (tests/optable/composed_more.py):
    "fmod": "remainder checks integer divisors for zeros on the host",
    "argwhere": "the output's shape depends on the data (nonzero)",
    "masked_scatter": "the mask's count is checked against the source's length on the host",
    "unique": "the output's length depends on the data",
    "unique_consecutive": "the output's length depends on the data",
    # The linalg factorizations (tests/optable/composed_linalg.py) run on the host:
    "linalg.qr": "the factorization runs on the host (the input is downloaded, the factors uploaded)",
    "linalg.eigh": "the factorization runs on the host (the input is downloaded, the factors uploaded)",
    "linalg.eigvalsh": "the factorization runs on the host (the input is downloaded, the factors uploaded)",
    "linalg.svd": "the factorization runs on the host (the input is downloaded, the factors uploaded)",
    "linalg.svdvals": "the factorization runs on the host (the input is downloaded, the factors uploaded)",
    "linalg.pinv": "built on the SVD (or eigh), which runs on the host",
    "linalg.lstsq": "built on the SVD, which runs on the host; the residuals' presence reads the rank",
    "linalg.matrix_rank": "built on the SVD (or eigh), which runs on the host",
    "linalg.cond": "built on the SVD, which runs on the host",
    "linalg.matrix_norm_svd": "built on the SVD, which runs on the host",
    "linalg.matrix_exp": "its number of squarings comes from the input's norm, read on the host",
}


def _cases():
    for spec in ALL_SPECS:
        for dtype in spec.dtypes:
            if dtype in GPU_DTYPES and not spec.skip:
                yield pytest.param(spec, dtype, id=f"{spec.name}-{dtype}",
                                   marks=[pytest.mark.optable_cell(spec.name, "gpu")])


def _unsupported(e: BaseException) -> bool:
    return "gpu device" in str(e) and isinstance(e, (RuntimeError, TypeError))


REGISTRY = {op["name"]: op for op in fg.registry()}
DATA_DEPENDENT = {name for name, info in REGISTRY.items() if info["data_dependent"]}
DATA_DEPENDENT |= {s.name for s in ALL_SPECS if op_info(s, REGISTRY).get("data_dependent")}


# The spec builds some tensors itself (on the CPU), so its op cannot run on GPU inputs alone.
MIXED = ("expected all tensors to be on the same device", "all tensors must be on one device")


def _outputs(out) -> list:
    return [o for o in as_tuple(out)]


BOTH_RAISED = "both devices raised the same error"
UNSUPPORTED = "not on the gpu device"


def _noncontig_pair(a: np.ndarray, layout):
    """The same non-contiguous view (``layout``: permuted, strided, expanded, inside a bigger
    buffer whose other elements hold sentinels) on the CPU and on the GPU."""
    view = strided_array(a, layout)
    base, offset, strides = view_geometry(view)
    if base.dtype == np.int64:  # the GPU keeps int64 in 32 bits: a sentinel that fits
        sentinel = np.iinfo(np.int64).max // 3
        base[base == sentinel] = 2**30
    flat = fg.from_numpy(np.ascontiguousarray(base).reshape(-1))
    return flat.as_strided(view.shape, strides, offset), flat.to("gpu").as_strided(view.shape, strides, offset)


def _check(spec: OpSpec, dtype: str, arrays, kwargs, lays=None) -> str | None:
    """Run one example on both devices: None when it ran, else why not (the
    op has no GPU kernel, the example cannot move, or both devices refused it).
    Inputs given a layout in ``lays`` are the same strided views on both devices."""
    cpu_args = []
    views: dict[int, fg.Tensor] = {}
    for k, a in enumerate(arrays):
        a = as_array(a)
        if lays is not None and lays[k] is not None:
            c, g = _noncontig_pair(a, lays[k])
            cpu_args.append(c)
            views[k] = g
            continue
        cpu_args.append(to_fg(a, dtype)[0] if isinstance(a, np.ndarray) else a)
    if not any(isinstance(a, fg.Tensor) for a in cpu_args):
        return "factory op (no tensor inputs): device placement is tested in test_gpu.py"
    if any(isinstance(a, fg.Tensor) and a.dtype == fg.float64 for a in cpu_args):
        return "an input is float64, which the GPU cannot hold (WGSL has no 64-bit floats)"
    small = [a.dtype for a in cpu_args if isinstance(a, fg.Tensor) and a.dtype in SMALL_INT_DTYPES]
    if small:
        # A documented gap: moving such a tensor raises a TypeError naming the dtype (tested
        # in test_small_int.py); convert with .int() or .float() first.
        return f"an input is {small[0].name}, which the GPU cannot hold (WGSL has no 8- or 16-bit integers)"
    # Moved before the CPU run: in-place ops write their CPU inputs.
    gpu_args = [views[k] if k in views else a.to("gpu") if isinstance(a, fg.Tensor) else a
                for k, a in enumerate(cpu_args)]
    compiled_args = [a.to("gpu") if isinstance(a, fg.Tensor) else a for a in cpu_args]
    try:
        want = spec.fg_fn(*cpu_args, **kwargs)
        cpu_err = None
    except Exception as e:  # noqa: BLE001 - the GPU must then fail the same way
        want, cpu_err = None, e
    before = fg.gpu.stats()["downloads"]
    try:
        fg.manual_seed(7)
        got = spec.fg_fn(*gpu_args, **kwargs)
    except Exception as e:  # noqa: BLE001
        if cpu_err is not None:
            assert type(e) is type(cpu_err), f"CPU raised {cpu_err!r}, GPU raised {e!r}"
            return BOTH_RAISED
        if any(m in str(e) for m in MIXED):
            return f"the spec makes CPU tensors of its own: {e}"
        if _unsupported(e):
            assert spec.name.split("_")[0] in str(e) or ":" in str(e), f"error does not name the op: {e}"
            return f"{UNSUPPORTED}: {e}"
        raise
    assert cpu_err is None, f"CPU raised {cpu_err!r} but the GPU returned a result"
    reads = fg.gpu.stats()["downloads"] - before
    # A boolean-mask key makes the output's shape depend on the data (read on the host).
    if spec.name not in HOST_READS and not bool_key(kwargs):
        assert reads == 0, f"{reads} device-to-host reads while running the op"
    outs, wants = _outputs(got), _outputs(want)
    assert len(outs) == len(wants)
    rtol, atol = _tol(spec, dtype)
    for i, (o, w) in enumerate(zip(outs, wants, strict=True)):
        if not isinstance(w, fg.Tensor):
            assert o == w or (isinstance(w, float) and np.isclose(o, w, rtol=rtol, atol=atol, equal_nan=True)), f"output {i}"
            continue
        assert isinstance(o, fg.Tensor), f"output {i}: {type(o)}"
        assert str(o.device) == "gpu", f"output {i} is on {o.device}"
        assert o.dtype == w.dtype, f"output {i}: dtype {o.dtype} on the GPU, {w.dtype} on the CPU"
        assert tuple(o.shape) == tuple(w.shape), f"output {i}: shape {tuple(o.shape)} vs {tuple(w.shape)}"
        g, c = fg_values(o), fg_values(w)
        if c.dtype.kind == "f":
            np.testing.assert_allclose(g, c, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, c, err_msg=f"output {i}")
    if spec.name not in DATA_DEPENDENT and not bool_key(kwargs):
        _check_compiled(spec, dtype, kwargs, compiled_args, gpu_args, outs)
    return None


def _tol(spec: OpSpec, dtype: str) -> tuple[float, float]:
    """(rtol, atol) between the devices: float32's, or for float16/bfloat16 the op
    table's own tolerance (computing in float32 before rounding may differ by an ulp
    of the narrow type from the CPU's order of operations)."""
    if dtype in NARROW:
        return spec.tolerance(dtype)
    return LOOSE.get(spec.name, TOL)


def _check_compiled(spec: OpSpec, dtype: str, kwargs, args, eager_args, eager_outs) -> None:
    """The same example through ``fg.compile`` on the GPU: twice (trace, then replay)."""
    rtol, atol = _tol(spec, dtype)
    compiled = fg.compile(lambda *xs: spec.fg_fn(*xs, **kwargs))
    for call in (1, 2):
        xs = [a.clone() if isinstance(a, fg.Tensor) else a for a in args]
        before = fg.gpu.stats()["downloads"]
        fg.manual_seed(7)
        got = _outputs(compiled(*xs))
        if spec.name not in HOST_READS:
            reads = fg.gpu.stats()["downloads"] - before
            assert reads == 0, f"compiled call {call}: {reads} device-to-host reads"
        assert len(got) == len(eager_outs)
        pairs = list(zip(got, eager_outs, strict=True))
        pairs += [(a, b) for a, b in zip(xs, eager_args, strict=True) if isinstance(b, fg.Tensor)]
        for i, (o, w) in enumerate(pairs):
            where = f"compiled call {call}, " + (f"output {i}" if i < len(got) else f"input {i - len(got)} after the call")
            if not isinstance(w, fg.Tensor):
                assert o == w or np.isclose(o, w, rtol=rtol, atol=atol, equal_nan=True), where
                continue
            assert str(o.device) == "gpu", f"{where} is on {o.device}"
            assert o.dtype == w.dtype and tuple(o.shape) == tuple(w.shape), where
            g, e = fg_values(o), fg_values(w)
            if e.dtype.kind == "f":
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
            else:
                np.testing.assert_array_equal(g, e, err_msg=where)
    assert compiled.stats.traces == 1


@pytest.mark.parametrize("spec,dtype", list(_cases()))
def test_gpu_parity(spec: OpSpec, dtype: str):
    """Parity with the CPU, and the registry's gpu column (``fg.supports``) tells the truth:
    an op that ran is listed as supported, one that only raised "not supported" is not."""
    reasons: list[str] = []
    ran = []

    @settings(max_examples=examples(EXAMPLES), deadline=None)
    @given(st.data())
    def run(data):
        arrays, kwargs = spec.sample(data.draw, dtype)
        # int64 on the GPU is 32-bit: keep drawn values in range.
        if any(isinstance(a, np.ndarray) and a.dtype == np.int64 and a.size and np.abs(a).max() >= 2**31 for a in arrays):
            return
        lays = None
        if spec.noncontig and data.draw(st.booleans(), label="non-contiguous inputs"):
            # strided views of the inputs holding the cell's dtype (not of index tensors)
            held = [a if isinstance(a, np.ndarray) and a.dtype.name == dtype else None for a in map(as_array, arrays)]
            lays = draw_layouts(data.draw, held, expandable(spec, arrays, REGISTRY))
            arrays = conform_all(arrays, lays)
        try:
            r = _check(spec, dtype, arrays, kwargs, lays)
        except BaseException:
            note(f"inputs: {arrays!r} kwargs: {kwargs!r} layouts: {lays}")
            raise
        if r is None:
            ran.append(True)
        elif r != BOTH_RAISED:
            reasons.append(r)

    run()
    supported = op_supports(spec, dtype, "gpu")
    if ran:
        assert supported is not False, f"{spec.name} ran on the gpu device in {dtype}, but fg.supports says it does not"
    elif reasons and all(r.startswith(UNSUPPORTED) for r in reasons):
        assert supported is not True, f"fg.supports lists {spec.name} in {dtype} on the gpu device, but it raised: {reasons[0]}"
    if reasons:
        pytest.skip(reasons[0][:300])
