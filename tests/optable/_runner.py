"""Machinery shared by the op-table driver and other tests.

Conversions between the NumPy arrays a sampler draws and ferrograd tensors,
non-contiguous copies holding the same values, rounding a float64 reference
to a low-precision output dtype, and the comparison of results.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cache

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import DEFAULT_TOL, FLOATS, OpSpec

NP_DTYPES = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
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


# A step of 0 marks an expanded dim (stride 0: every index reads the same element).
STEPS = (1, 2, -1, -2, 3)
TAIL = 2  # sentinel elements after the view's buffer


@dataclass(frozen=True)
class Layout:
    """Where a tensor's elements sit in a bigger buffer: a drawn, shrinkable strided view.

    ``perm[k]`` is the logical dim stored ``k``-th outermost (identity: row-major);
    ``steps[d]`` is the step of logical dim ``d`` in its stored dim (negative: walked
    backwards; 0: expanded, one stored element read at every index); ``offset`` is the
    number of sentinel elements before the view's buffer (its storage offset).
    """

    perm: tuple[int, ...]
    steps: tuple[int, ...]
    offset: int

    @property
    def expanded(self) -> tuple[int, ...]:
        return tuple(d for d, s in enumerate(self.steps) if s == 0)

    def conform(self, arr: np.ndarray) -> np.ndarray:
        """``arr`` with the values along expanded dims replaced by their first slice
        (what an expanded view can hold); ``arr`` itself when no dim is expanded."""
        if not self.expanded:
            return arr
        first = tuple(slice(0, 1) if s == 0 else slice(None) for s in self.steps)
        return np.ascontiguousarray(np.broadcast_to(arr[first], arr.shape))


def layouts(shape: tuple[int, ...], expand: bool = False):
    """Hypothesis strategy: a non-contiguous :class:`Layout` for an array of ``shape``.

    Shrinks towards row-major order, steps of 1, no expanded dim and no storage
    offset, less one departure from a contiguous tensor: a step of 2 in the last dim. With ``expand``, a dim longer than 1 is
    expanded (stride 0) about a quarter of the time.
    """
    nd = len(shape)

    @st.composite
    def build(draw):
        perm = tuple(draw(st.permutations(range(nd))))
        steps = []
        for d in range(nd):
            if expand and shape[d] > 1 and draw(st.integers(0, 3)) == 3:
                steps.append(0)
            else:
                steps.append(draw(st.sampled_from(STEPS)))
        offset = draw(st.integers(0, 5))
        if perm == tuple(range(nd)) and all(s == 1 for s in steps) and offset == 0:
            steps[-1] = 2  # always some departure from a plain contiguous tensor
        return Layout(perm, tuple(steps), offset)

    return build()


def _sentinel_fill(buf: np.ndarray) -> None:
    """NaN (floats) or a large value: a kernel reading outside the view shows up in the result."""
    if buf.dtype.kind == "f":
        buf.fill(np.nan)
    elif buf.dtype.kind == "b":
        buf.fill(True)
    else:
        buf.fill(np.iinfo(buf.dtype).max // 3)


def strided_array(arr: np.ndarray, layout: Layout) -> np.ndarray:
    """A NumPy view laid out as ``layout`` holding ``arr``'s values (``arr`` must already be
    constant along the layout's expanded dims: :meth:`Layout.conform`).

    The view lies in a flat buffer (its ``base``) whose other elements hold sentinels;
    expanded views are read-only.
    """
    perm, steps = layout.perm, layout.steps
    assert len(perm) == arr.ndim == len(steps), (layout, arr.shape)
    big_shape = [1 if steps[p] == 0 else arr.shape[p] * abs(steps[p]) for p in perm]
    n = int(np.prod(big_shape))
    flat = np.empty(layout.offset + n + TAIL, dtype=arr.dtype)
    _sentinel_fill(flat)
    big = flat[layout.offset:layout.offset + n].reshape(big_shape)
    inv = np.argsort(perm)
    small = big.transpose(inv)[tuple(slice(None, None, s) if s else slice(None) for s in steps)]
    first = tuple(slice(0, 1) if s == 0 else slice(None) for s in steps)
    small[...] = arr[first]
    if not layout.expanded:
        assert small.shape == arr.shape
        return small
    strides = tuple(0 if s == 0 else small.strides[d] for d, s in enumerate(steps))
    return np.lib.stride_tricks.as_strided(small, arr.shape, strides, writeable=False)


def view_geometry(view: np.ndarray) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """The array owning ``view``'s memory, and ``view``'s element offset and strides in it
    (to rebuild the same view with ``as_strided`` on a tensor made from that array)."""
    base = view
    while True:
        b = base.base
        if not isinstance(b, np.ndarray):  # as_strided's views hang off a holder object
            b = getattr(b, "base", None)
        if not isinstance(b, np.ndarray):
            break
        base = b
    item = view.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return base, offset, tuple(s // item for s in view.strides)


def to_fg_strided(arr, dtype: str, layout: Layout):
    """Like :func:`to_fg`, but the tensor is laid out as ``layout`` (a view of a bigger buffer,
    see :func:`strided_array`). ``arr`` must be constant along expanded dims.

    Without a storage offset the tensor wraps the strided NumPy view itself
    (``fg.from_numpy``); with one it is ``as_strided`` of the whole buffer, so the
    tensor's storage offset is the layout's (bfloat16 always goes that way, after
    converting the buffer).
    """
    view = strided_array(arr, layout)
    if layout.offset == 0 and not is_bf16_carrier(arr, dtype):
        return fg.from_numpy(view), view
    base, offset, strides = view_geometry(view)
    flat = np.ascontiguousarray(base).reshape(-1)
    if is_bf16_carrier(arr, dtype):
        return fg.from_numpy(flat).to(fg.bfloat16).as_strided(view.shape, strides, offset), None
    return fg.from_numpy(flat).as_strided(view.shape, strides, offset), view


def draw_layouts(draw, arrays, expandable=()) -> list:
    """A drawn :class:`Layout` for each array input with at least one element and one dim
    (``None`` for the others, which stay as they are); inputs whose index is in
    ``expandable`` may get expanded dims."""
    out = []
    for i, a in enumerate(arrays):
        a = as_array(a)
        if isinstance(a, np.ndarray) and a.ndim >= 1 and a.size > 0:
            out.append(draw(layouts(a.shape, i in expandable), label=f"layout of input {i}"))
        else:
            out.append(None)
    return out


def conform_all(arrays, lays) -> list:
    """The arrays made constant along their layouts' expanded dims."""
    return [a if lay is None else lay.conform(as_array(a)) for a, lay in zip(arrays, lays, strict=True)]


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
