"""Op-table specs for the reduce family: sums, extrema, arg-extrema, variance,
logsumexp, all/any, softmax and cumulative scans."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import ALL, FLOATS, OpSpec, shapes, values

F = fg.nn.functional

# Float sums lose precision relative to sum(|x|), not to |sum(x)|: allow for
# cancellation with an absolute tolerance scaled to the sample sizes (<= 625 elements).
SUM_TOL = {"float32": (1e-5, 2e-5), "float16": (2e-3, 4e-3), "bfloat16": (1.6e-2, 3e-2)}


def _spec(name, fg_fn, np_fn, sample, dtypes, out_dtype=None, **kw) -> OpSpec:
    """An OpSpec, with the PyTorch output dtype attached (as an attribute, so
    this also works with spec types that predate the ``out_dtype`` field)."""
    s = OpSpec(name, fg_fn, np_fn, sample, dtypes=dtypes, **kw)
    s.out_dtype = out_dtype
    return s


def _int64_for_ints(d: str) -> str:
    return d if d in FLOATS else "int64"


def _float_for_ints(d: str) -> str:
    return d if d in FLOATS else "float32"


def _with_specials(draw, a: np.ndarray, dtype: str, p: float = 0.15) -> np.ndarray:
    """Put NaN / ±inf / ±0 at random positions of float arrays (half of the time)."""
    if dtype not in FLOATS or a.size == 0 or not draw(st.booleans()):
        return a
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = np.array(a, copy=True)
    mask = rng.random(a.shape) < p
    sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=a.dtype)
    a[mask] = sp[rng.integers(0, len(sp), size=int(mask.sum()))]
    return a


def _with_ties(draw, a: np.ndarray, dtype: str) -> np.ndarray:
    """Round values to few distinct levels (half of the time) so extrema repeat."""
    if dtype == "bool" or a.size == 0 or not draw(st.booleans()):
        return a
    return np.asarray(np.round(a.astype(np.float64))).astype(a.dtype)


def _draw_dims(draw, shape, *, multi: bool, allow_none: bool, nonempty: bool):
    """A ``dim`` argument: None, an int, or a tuple of distinct dims (random signs).

    With ``nonempty`` every reduced dim has a nonzero size (and None needs a
    non-empty tensor). Returns ``...`` when no valid choice exists.
    """
    nd = len(shape)
    ok = [d for d in range(nd) if not nonempty or shape[d] > 0]
    kinds = []
    if allow_none and (not nonempty or int(np.prod(shape)) > 0):
        kinds.append("none")
    if nd == 0:
        kinds.append("scalar")
    if ok:
        kinds.append("int")
        if multi:
            kinds.append("tuple")
    if not kinds:
        return ...
    kind = draw(st.sampled_from(kinds))
    sign = lambda d: d - nd if draw(st.booleans()) else d  # noqa: E731
    if kind == "none":
        return None
    if kind == "scalar":
        return draw(st.sampled_from([0, -1]))
    if kind == "int":
        return sign(draw(st.sampled_from(ok)))
    picked = draw(st.lists(st.sampled_from(ok), min_size=1, max_size=len(ok), unique=True))
    return tuple(sign(d) for d in picked)


def reduce_sample(lo=-3.0, hi=3.0, *, multi=True, allow_none=True, nonempty=False,
                  specials=False, ties=False, keepdim=True, max_side=5, extra=None):
    """Inputs for a reduction: ``x`` plus ``dim`` / ``keepdim`` (and ``extra`` kwargs strategies)."""
    def sample(draw, dtype):
        while True:
            shape = draw(shapes(max_side=max_side))
            dim = _draw_dims(draw, shape, multi=multi, allow_none=allow_none, nonempty=nonempty)
            if dim is not ...:
                break
        x = np.array(values(draw, shape, dtype, lo, hi))  # 0-d bfloat16 carriers come back as scalars
        if ties:
            x = _with_ties(draw, x, dtype)
        if specials:
            x = _with_specials(draw, x, dtype)
        kw = {}
        if dim is not None or not allow_none:
            kw["dim"] = dim
        if keepdim and draw(st.booleans()):
            kw["keepdim"] = True
        for k, strat in (extra or {}).items():
            kw[k] = draw(strat)
        return [x], kw
    return sample


def _axis(x, dim):
    """NumPy's axis for a ferrograd ``dim`` (0-d inputs and None reduce everything)."""
    if dim is None or np.ndim(x) == 0:
        return None
    return dim


def np_reduce(fn):
    def ref(x, dim=None, keepdim=False, **kw):
        return fn(x, axis=_axis(x, dim), keepdims=keepdim, **kw)
    return ref


def _np_sum(x, axis=None, keepdims=False):
    if x.dtype.kind in "biu":
        return np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    return np.sum(x, axis=axis, keepdims=keepdims)


def _np_prod(x, axis=None, keepdims=False):
    if x.dtype.kind in "biu":
        return np.prod(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    return np.prod(x, axis=axis, keepdims=keepdims)


def _np_logsumexp(x, axis=None, keepdims=False):
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0 or (axis is not None and any(x.shape[a] == 0 for a in np.atleast_1d(axis))):
        s = np.sum(np.exp(x), axis=axis, keepdims=keepdims)  # empty sums are 0
        return np.log(s)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


def _np_var(x, axis=None, keepdims=False, correction=1):
    x = np.asarray(x, dtype=np.float64)
    return np.var(x, axis=axis, keepdims=keepdims, ddof=correction)


def _np_std(x, axis=None, keepdims=False, correction=1):
    return np.sqrt(_np_var(x, axis, keepdims, correction))


# ---------------------------------------------------------------------------
# Extrema with indices
# ---------------------------------------------------------------------------

def _max_fg(op):
    def run(x, dim=None, keepdim=False):
        f = getattr(fg, op)
        if dim is None:
            return f(x)
        return tuple(f(x, dim, keepdim=keepdim))
    return run


def _max_np(op):
    val = np.max if op == "max" else np.min
    arg = np.argmax if op == "max" else np.argmin

    def run(x, dim=None, keepdim=False):
        if dim is None:
            return val(x)
        if np.ndim(x) == 0:
            return x.copy(), np.asarray(0, dtype=np.int64)
        return (val(x, axis=dim, keepdims=keepdim),
                arg(x, axis=dim, keepdims=keepdim).astype(np.int64))
    return run


def _max_out(op):
    def out(d, dim=None, keepdim=False):
        return d if dim is None else (d, "int64")
    return out


def _arg_np(op):
    arg = np.argmax if op == "argmax" else np.argmin

    def run(x, dim=None, keepdim=False):
        if np.ndim(x) == 0:
            return np.asarray(0, dtype=np.int64)
        return arg(x, axis=dim, keepdims=keepdim).astype(np.int64)
    return run


# ---------------------------------------------------------------------------
# Softmax and scans
# ---------------------------------------------------------------------------

def _softmax_np(x, dim, log=False):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return _softmax_np(x.reshape(1), 0, log).reshape(())
    m = np.max(x, axis=dim, keepdims=True) if x.shape[dim] > 0 else 0.0
    z = x - m
    s = np.sum(np.exp(z), axis=dim, keepdims=True)
    return z - np.log(s) if log else np.exp(z) / s


def _softmax_sample(draw, dtype):
    shape = draw(shapes())
    x = _with_specials(draw, np.array(values(draw, shape, dtype, -6.0, 6.0)), dtype, p=0.1)
    nd = len(shape)
    dim = draw(st.integers(-max(nd, 1), max(nd, 1) - 1))
    return [x], {"dim": dim}


def _scan_np(fn):
    def run(x, dim):
        kw = {"dtype": np.int64} if x.dtype.kind in "biu" else {}
        if x.ndim == 0:
            return fn(x.reshape(1), axis=0, **kw).reshape(())
        return fn(x, axis=dim, **kw)
    return run


def _scan_sample(lo, hi):
    def sample(draw, dtype):
        shape = draw(shapes())
        x = values(draw, shape, dtype, lo, hi)
        nd = len(shape)
        return [x], {"dim": draw(st.integers(-max(nd, 1), max(nd, 1) - 1))}
    return sample


_ANY = st.sampled_from([0, 1])


def _var_grad_sample(draw, dtype):
    """var/std inputs whose reduced count exceeds the correction (else the value is NaN or inf)."""
    (x,), kw = reduce_sample(nonempty=True, extra={"correction": _ANY})(draw, dtype)
    dim = kw.get("dim")
    if dim is None or x.ndim == 0:
        n = x.size
    else:
        n = int(np.prod([x.shape[d] for d in np.atleast_1d(dim)]))
    if n <= kw["correction"]:
        kw["correction"] = 0
    return [x], kw

SPECS: list[OpSpec] = [
    _spec("sum", fg.sum, np_reduce(_np_sum), reduce_sample(), ALL,
          out_dtype=_int64_for_ints, tol=SUM_TOL),
    _spec("mean", fg.mean, np_reduce(np.mean), reduce_sample(), FLOATS, out_dtype=lambda d: d,
          tol=SUM_TOL),
    _spec("prod", fg.prod, np_reduce(_np_prod), reduce_sample(-1.6, 1.6, max_side=4), ALL,
          out_dtype=_int64_for_ints, tol={"float32": (2e-5, 1e-6)}, grad_examples=12),
    _spec("amax", fg.amax, np_reduce(np.max), reduce_sample(nonempty=True, specials=True), ALL,
          out_dtype=lambda d: d, grad_examples=12),
    _spec("amin", fg.amin, np_reduce(np.min), reduce_sample(nonempty=True, specials=True), ALL,
          out_dtype=lambda d: d, grad_examples=12),
    _spec("max", _max_fg("max"), _max_np("max"),
          reduce_sample(multi=False, nonempty=True, specials=True, ties=True), ALL,
          out_dtype=_max_out("max"), grad_examples=12),
    _spec("min", _max_fg("min"), _max_np("min"),
          reduce_sample(multi=False, nonempty=True, specials=True, ties=True), ALL,
          out_dtype=_max_out("min"), grad_examples=12),
    _spec("argmax", fg.argmax, _arg_np("argmax"),
          reduce_sample(multi=False, nonempty=True, specials=True, ties=True), ALL,
          out_dtype="int64"),
    _spec("argmin", fg.argmin, _arg_np("argmin"),
          reduce_sample(multi=False, nonempty=True, specials=True, ties=True), ALL,
          out_dtype="int64"),
    _spec("var", fg.var, np_reduce(_np_var), reduce_sample(extra={"correction": _ANY}), FLOATS,
          out_dtype=lambda d: d, tol=SUM_TOL, grad_sample=_var_grad_sample, grad_examples=12),
    _spec("std", fg.std, np_reduce(_np_std), reduce_sample(extra={"correction": _ANY}), FLOATS,
          out_dtype=lambda d: d, tol=SUM_TOL, grad_sample=_var_grad_sample, grad_examples=12),
    # The VJP exp(x - y) takes the forward's output y, rounded to the dtype: a relative
    # error of u·|y| in every term, with |y| up to ~7 here (values in [-3, 3], up to 60).
    _spec("logsumexp", fg.logsumexp, np_reduce(_np_logsumexp),
          reduce_sample(allow_none=False, specials=True), ALL, out_dtype=_float_for_ints,
          grad_examples=12, lowp_grad_factor=8.0),
    _spec("all", fg.all, np_reduce(np.all), reduce_sample(-1, 1, specials=True), ALL,
          out_dtype="bool"),
    _spec("any", fg.any, np_reduce(np.any), reduce_sample(-1, 1, specials=True), ALL,
          out_dtype="bool"),
    _spec("softmax", F.softmax, lambda x, dim: _softmax_np(x, dim), _softmax_sample, FLOATS,
          out_dtype=lambda d: d, grad_examples=12),
    _spec("log_softmax", F.log_softmax, lambda x, dim: _softmax_np(x, dim, log=True),
          _softmax_sample, FLOATS, out_dtype=lambda d: d, grad_examples=12),
    _spec("cumsum", fg.cumsum, _scan_np(np.cumsum), _scan_sample(-3.0, 3.0), ALL,
          out_dtype=_int64_for_ints, tol=SUM_TOL, grad_examples=12),
    _spec("cumprod", fg.cumprod, _scan_np(np.cumprod), _scan_sample(-1.6, 1.6), ALL,
          out_dtype=_int64_for_ints, tol={"float32": (2e-5, 1e-6)}, grad_examples=12),
]
