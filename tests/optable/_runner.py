"""Machinery shared by the op-table driver and other tests.

Conversions between the NumPy arrays a sampler draws and ferrograd tensors,
non-contiguous copies holding the same values, rounding a float64 reference
to a low-precision output dtype, and the comparison of results.
"""

from __future__ import annotations

import inspect
from functools import cache

import ferrograd as fg
import numpy as np

from ._spec import DEFAULT_TOL, FLOATS, OpSpec

NP_DTYPES = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}


def fg_dtype(name: str):
    """The ferrograd dtype object called ``name``."""
    return getattr(fg, name)


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def is_bf16_carrier(arr, dtype: str) -> bool:
    """Under a bfloat16 case, float32 arrays stand for bfloat16 tensors."""
    return dtype == "bfloat16" and isinstance(arr, np.ndarray) and arr.dtype == np.float32


def as_array(x):
    """NumPy scalars become 0-d arrays; other objects are left alone."""
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x


def to_fg(arr, dtype: str):
    """A contiguous tensor with the values of ``arr`` (a copy; bfloat16 via float32).

    Returns ``(tensor, backing)`` where ``backing`` is the NumPy array whose
    memory the tensor shares (``None`` for bfloat16, which NumPy cannot hold).
    """
    if is_bf16_carrier(arr, dtype):
        return fg.from_numpy(arr.copy()).to(fg.bfloat16), None
    work = np.array(arr, copy=True, order="C")
    return fg.from_numpy(work), work


def noncontig_array(arr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A non-contiguous view (permuted memory order, strides of ±1/±2) holding ``arr``'s values.

    The elements around the view hold NaN (floats) or a large sentinel so
    that a kernel reading outside the view shows up in the result.
    """
    nd = arr.ndim
    perm = list(rng.permutation(nd))
    steps = [int(rng.choice([1, 2, -1, -2])) for _ in range(nd)]
    if perm == list(range(nd)) and all(s == 1 for s in steps):
        steps[-1] = 2
    big_shape = [arr.shape[p] * abs(steps[p]) for p in perm]
    big = np.empty(big_shape, dtype=arr.dtype)
    if arr.dtype.kind == "f":
        big.fill(np.nan)
    elif arr.dtype.kind == "b":
        big.fill(True)
    else:
        big.fill(np.iinfo(arr.dtype).max // 3)
    inv = np.argsort(perm)
    view = big.transpose(inv)[tuple(slice(None, None, s) for s in steps)]
    assert view.shape == arr.shape
    view[...] = arr
    return view


def view_geometry(view: np.ndarray) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """The array owning ``view``'s memory, and ``view``'s element offset and strides in it
    (to rebuild the same view with ``as_strided`` on a tensor made from that array)."""
    base = view
    while isinstance(base.base, np.ndarray):
        base = base.base
    item = view.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return base, offset, tuple(s // item for s in view.strides)


def to_fg_noncontig(arr, dtype: str, rng: np.random.Generator):
    """Like :func:`to_fg`, but the tensor is a non-contiguous view of a bigger buffer."""
    view = noncontig_array(arr, rng)
    if not is_bf16_carrier(arr, dtype):
        return fg.from_numpy(view), view
    # bfloat16: convert the whole buffer, then take the same strided view.
    base, offset, strides = view_geometry(view)
    flat = np.ascontiguousarray(base).reshape(-1)
    t = fg.from_numpy(flat).to(fg.bfloat16).as_strided(view.shape, strides, offset)
    return t, None


def off_kinks(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Values moved to 0.1-0.4 past a multiple of 0.5 (distinct, away from 0, integers and halves)."""
    k = np.floor(np.asarray(a, dtype=np.float64) * 2) / 2
    return np.asarray(k + 0.1 + 0.3 * rng.random(np.shape(a)))


def float_outputs(out) -> tuple:
    """The floating-point tensors among an op's outputs (what gradients flow from)."""
    return tuple(o for o in as_tuple(out) if isinstance(o, fg.Tensor) and o.dtype.is_floating_point)


def fg_values(t) -> np.ndarray:
    """A NumPy copy of a tensor's values (bfloat16 as float32)."""
    if t.dtype == fg.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def ref_inputs(arrays, dtype: str, in_dtype: bool):
    """Reference inputs: float arrays as float64 (or kept in their dtype when ``in_dtype``)."""
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and not in_dtype:
            out.append(a.astype(np.float64))
        elif isinstance(a, np.ndarray):
            out.append(a.copy())
        else:
            out.append(a)
    return out


# ---------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------

def round_bf16(x) -> np.ndarray:
    """Round to the nearest bfloat16 (ties to even), returned as float32."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = r.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


def round_to(ref: np.ndarray, dtype: str) -> np.ndarray:
    """The float reference rounded to the output dtype (returned in float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "bfloat16":
            return round_bf16(ref.astype(np.float32)).astype(np.float64)
        if dtype in ("float16", "float32"):
            return ref.astype(NP_DTYPES[dtype]).astype(np.float64)
    return ref


@cache
def _takes_kwargs(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return len([p for p in params if p.kind != p.VAR_KEYWORD]) > 1 or any(
        p.kind == p.VAR_KEYWORD for p in params
    )


def expected_dtypes(spec: OpSpec, dtype: str, kwargs: dict, refs: list) -> list[str | None]:
    """The output dtype PyTorch would give for each output (``None``: not a tensor dtype)."""
    od = spec.out_dtype
    if od is not None:
        if callable(od):
            od = od(dtype, **kwargs) if _takes_kwargs(od) else od(dtype)
        if isinstance(od, str):
            od = (od,) * len(refs)
        return list(od)
    out = []
    for r in refs:
        k = r.dtype.kind
        if k == "f":
            out.append(dtype if dtype in FLOATS else "float32")
        elif r.dtype.name in NP_DTYPES:
            out.append(r.dtype.name)
        else:
            out.append(None)
    return out


def bool_key(kwargs: dict) -> bool:
    """Whether an indexing argument holds a boolean mask (a data-dependent output shape)."""
    def has(x):
        if isinstance(x, (bool, np.bool_)):
            return True  # x[True]: a bool scalar index is a mask as well
        if isinstance(x, np.ndarray):
            return x.dtype == np.bool_
        if isinstance(x, (list, tuple)):
            return any(has(v) for v in x)
        return False
    return any(has(v) for k, v in kwargs.items() if k in ("key", "index", "indices", "mask"))


def as_tuple(x) -> tuple:
    if isinstance(x, (tuple, list)) and not isinstance(x, fg.Tensor):
        return tuple(x)
    return (x,)


def tolerance(spec: OpSpec, dtype: str, out_dtype: str | None) -> tuple[float, float]:
    """The spec's tolerance for the case; widened to the output dtype's default when it differs."""
    rtol, atol = spec.tolerance(dtype)
    if out_dtype is not None and out_dtype != dtype and out_dtype in FLOATS:
        r2, a2 = DEFAULT_TOL[out_dtype]
        rtol, atol = max(rtol, r2), max(atol, a2)
    return rtol, atol


def compare(spec: OpSpec, dtype: str, out, ref, kwargs: dict, where: str) -> None:
    """Check ``out`` (ferrograd result) against ``ref`` (NumPy reference): count, shape, dtype, values."""
    outs, refs = as_tuple(out), tuple(np.asarray(as_array(r)) for r in as_tuple(ref))
    assert len(outs) == len(refs), f"{where}: {len(outs)} outputs, reference has {len(refs)}"
    want = expected_dtypes(spec, dtype, kwargs, list(refs))
    for i, (o, r, wd) in enumerate(zip(outs, refs, want, strict=True)):
        tag = f"{where}, output {i}" if len(outs) > 1 else where
        if isinstance(o, fg.Tensor):
            if wd is not None:
                assert o.dtype.name == wd, f"{tag}: dtype {o.dtype.name}, PyTorch gives {wd}"
            got = fg_values(o)
            assert tuple(o.shape) == r.shape, f"{tag}: shape {tuple(o.shape)}, expected {r.shape}"
            od = o.dtype.name
        else:
            got = np.asarray(o)
            assert got.shape == r.shape, f"{tag}: shape {got.shape}, expected {r.shape}"
            od = None
        rtol, atol = tolerance(spec, dtype, od)
        if got.dtype.kind == "f" or r.dtype.kind == "f":
            rr = r.astype(np.float64)
            if od in FLOATS:
                rr = round_to(rr, od)
            np.testing.assert_allclose(
                got.astype(np.float64), rr, rtol=rtol, atol=atol, equal_nan=True, err_msg=tag
            )
        elif rtol or atol:
            np.testing.assert_allclose(got, r, rtol=rtol, atol=atol, err_msg=tag)
        else:
            np.testing.assert_array_equal(got, r, err_msg=tag)


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise-level equality of values, NaN equal to NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))
