"""Op-table specs for the creation family: factories taking a shape/range and a dtype."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import ALL, INTS, OpSpec, shapes, values

NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
      "bfloat16": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_,
      "uint8": np.uint8, "int8": np.int8, "int16": np.int16}


def _same(d):
    return d


def factory(name, fg_fn, np_fn, sample, **kw):
    """Factories have no tensor inputs: no non-contiguous variant; output dtype is the case's dtype."""
    kw.setdefault("out_dtype", _same)
    return OpSpec(name, fg_fn, np_fn, sample, dtypes=ALL, noncontig=False, **kw)


def _shape_sample(draw, dtype):
    shape = draw(shapes(0, 4, 0, 5))
    form = draw(st.sampled_from(["varargs", "tuple", "list", "like"]))
    if form == "varargs" and len(shape) == 0:
        form = "tuple"
    return [], {"shape": shape, "dtype": dtype, "form": form}


def _make(fn, like_fn):
    def call(shape, dtype, form):
        d = getattr(fg, dtype)
        if form == "varargs":
            return fn(*shape, dtype=d)
        if form == "list":
            return fn(list(shape), dtype=d)
        if form == "like":
            return like_fn(fg.zeros(shape, dtype=fg.float64), dtype=d)
        return fn(tuple(shape), dtype=d)
    return call


def _one(dtype):
    return True if dtype == "bool" else 1


def _empty_fg(shape, dtype, form):
    # empty's values are unspecified: check shape/dtype, and that the memory is writable.
    return _make(fg.empty, fg.empty_like)(shape, dtype, form).fill_(_one(dtype))


def _fill_value(draw, dtype):
    if dtype == "bool":
        return draw(st.booleans())
    if dtype in INTS:
        return draw(st.one_of(st.integers(-1000, 1000), st.booleans()))
    return draw(st.one_of(st.integers(-1000, 1000), st.sampled_from([0.5, -2.25, 1e-3, 3.0, float("inf")])))


def _full_sample(draw, dtype):
    shape = draw(shapes(0, 3, 0, 4))
    form = draw(st.sampled_from(["tuple", "list", "int", "like"])) if len(shape) == 1 else draw(
        st.sampled_from(["tuple", "list", "like"]))
    value = _fill_value(draw, dtype)
    if dtype in ("uint8", "int8") and not isinstance(value, bool):
        # PyTorch refuses a fill value outside the dtype's range (ferrograd wraps it).
        info = np.iinfo(dtype)
        value = int(min(max(value, info.min), info.max))
    return [], {"shape": shape, "value": value, "dtype": dtype, "form": form}


def _full_fg(shape, value, dtype, form):
    d = getattr(fg, dtype)
    if form == "int":
        return fg.full(shape[0], value, dtype=d)
    if form == "list":
        return fg.full(list(shape), value, dtype=d)
    if form == "like":
        return fg.full_like(fg.zeros(shape, dtype=fg.float64), value, dtype=d)
    return fg.full(tuple(shape), value, dtype=d)


def _arange_sample(draw, dtype):
    if dtype == "bool":
        args = (0, draw(st.integers(0, 2)), 1)
    elif dtype in INTS:
        step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        a, b = draw(st.integers(-20, 20)), draw(st.integers(-20, 20))
        args = (min(a, b), max(a, b), step) if step > 0 else (max(a, b), min(a, b), step)
        if step < 0 and (args[1] - args[0]) % step != 0:
            # integer ranges with a negative step that does not divide them: a known bug,
            # covered by test_tensor.py::test_arange_negative_step_int
            args = (args[0], args[0] + step * ((args[1] - args[0]) // step), step)
    else:
        step = draw(st.sampled_from([1.0, 0.25, 0.5, 1.5, -0.5, -1.0, 2]))
        a, b = draw(st.integers(-40, 40)) / 4, draw(st.integers(-40, 40)) / 4
        args = (min(a, b), max(a, b), step) if step > 0 else (max(a, b), min(a, b), step)
    form = draw(st.sampled_from(["end", "start_end", "full"]))
    if form == "end" and (args[0] != 0 or args[2] != 1):
        form = "full"
    if form == "start_end" and args[2] != 1:
        form = "full"
    # the default dtype: int64 for integer arguments, float32 when any is a float
    default = "int64" if all(isinstance(v, int) for v in args) else "float32"
    omit = dtype == default and draw(st.booleans())
    return [], {"args": args, "form": form, "dtype": None if omit else dtype}


def _arange_fg(args, form, dtype):
    kw = {} if dtype is None else {"dtype": getattr(fg, dtype)}
    if form == "end":
        return fg.arange(args[1], **kw)
    if form == "start_end":
        return fg.arange(args[0], args[1], **kw)
    return fg.arange(*args, **kw)


def _arange_np(args, form, dtype):
    r = np.arange(*args, dtype=np.float64) if any(isinstance(v, float) for v in args) else np.arange(*args)
    return r.astype(NP[dtype or ("int64" if r.dtype.kind == "i" else "float32")])


def _linspace_sample(draw, dtype):
    # steps == 1 is covered by test_tensor.py::test_linspace_single_step (a known bug)
    steps = draw(st.integers(0, 20).filter(lambda n: n != 1))
    if dtype == "bool":
        start, end = 0.0, 1.0
    elif dtype in INTS:
        start, step = draw(st.integers(-20, 20)), draw(st.integers(-3, 3))
        end = start + step * max(steps - 1, 0)
    else:
        start = draw(st.floats(-100, 100, allow_nan=False, width=32))
        end = draw(st.floats(-100, 100, allow_nan=False, width=32))
    return [], {"start": start, "end": end, "steps": steps, "dtype": dtype}


def _linspace_fg(start, end, steps, dtype):
    return fg.linspace(start, end, steps, dtype=getattr(fg, dtype))


def _linspace_np(start, end, steps, dtype):
    return np.linspace(start, end, steps).astype(NP[dtype])


def _eye_sample(draw, dtype):
    n = draw(st.integers(0, 6))
    m = draw(st.one_of(st.none(), st.integers(0, 6)))
    return [], {"n": n, "m": m, "dtype": dtype}


def _eye_fg(n, m, dtype):
    d = getattr(fg, dtype)
    return fg.eye(n, dtype=d) if m is None else fg.eye(n, m, dtype=d)


def _tensor_sample(draw, dtype):
    data = values(draw, draw(shapes(0, 3, 0, 4)), dtype)
    # the inferred dtype (no dtype=): bool, int64 or float32 from Python data
    inferable = {"bool": "bool", "int64": "int64", "float32": "float32"}
    form = draw(st.sampled_from(["list", "list_infer", "array"]))
    if form == "list_infer" and (dtype not in inferable or data.size == 0):
        form = "list"
    if form == "array" and dtype == "bfloat16":
        form = "list"
    return [], {"data": data.tolist(), "dtype": dtype, "form": form,
                "np_dtype": str(data.dtype)}


def _tensor_fg(data, dtype, form, np_dtype):
    if form == "list_infer":
        return fg.tensor(data)
    if form == "array":
        return fg.tensor(np.array(data, dtype=np_dtype))
    return fg.tensor(data, dtype=getattr(fg, dtype))


def _tensor_np(data, dtype, form, np_dtype):
    return np.array(data, dtype=NP[dtype])


SPECS = [
    factory("empty", _empty_fg, lambda shape, dtype, form: np.full(shape, _one(dtype), NP[dtype]),
            _shape_sample),
    factory("zeros", _make(fg.zeros, fg.zeros_like), lambda shape, dtype, form: np.zeros(shape, NP[dtype]),
            _shape_sample),
    factory("ones", _make(fg.ones, fg.ones_like), lambda shape, dtype, form: np.ones(shape, NP[dtype]),
            _shape_sample),
    factory("full", _full_fg, lambda shape, value, dtype, form: np.full(shape, value, NP[dtype]), _full_sample),
    factory("arange", _arange_fg, _arange_np, _arange_sample),
    factory("linspace", _linspace_fg, _linspace_np, _linspace_sample),
    factory("eye", _eye_fg, lambda n, m, dtype: np.eye(n, m, dtype=NP[dtype]), _eye_sample),
    factory("tensor", _tensor_fg, _tensor_np, _tensor_sample),
]
