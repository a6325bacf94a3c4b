"""Op-table specs for the elementwise family: unary maps, binary ops, where, casts, fills."""

from __future__ import annotations

import math
import operator

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import (
    ALL,
    FLOATS,
    INTS,
    NUMERIC,
    OpSpec,
    _rng,
    broadcastable_pair,
    broadcastable_shapes,
    nonzero_values,
    shapes,
    values,
    with_specials,
)

INT_BOOL = INTS + ("bool",)
F = fg.nn.functional

_erf = np.vectorize(math.erf, otypes=[np.float64])


def f64(fn):
    """Apply ``fn`` to float64 copies: ints/bool compute as float, like PyTorch's float functions."""
    return lambda x, **kw: fn(np.asarray(x, dtype=np.float64), **kw)


def _seed(draw) -> np.random.Generator:
    return _rng(draw)


def _with_zeros(draw, a: np.ndarray, p: float = 0.3) -> np.ndarray:
    """Half of the time, set a random fraction of entries to zero (False for bool)."""
    if np.size(a) == 0:
        return a
    rng = _rng(draw)
    if rng.random() < 0.5:
        return a
    a = np.array(a, copy=True)
    a[rng.random(a.shape) < p] = 0
    return a


def _with_halves(draw, a: np.ndarray, dtype: str) -> np.ndarray:
    """For floats, half of the time snap values to multiples of 0.5 (exercises round-half-to-even)."""
    if dtype not in FLOATS or np.size(a) == 0 or _rng(draw).random() < 0.5:
        return a
    return np.asarray((np.round(a.astype(np.float64) * 2) / 2).astype(a.dtype))


# ---------------------------------------------------------------------------
# Unary
# ---------------------------------------------------------------------------

def unary_sample(lo=-3.0, hi=3.0, specials=False, nan=True, halves=False, zeros=False, kwargs=None):
    """Inputs for a unary op; ``kwargs`` maps a keyword to a strategy of its values (None = omit)."""
    def sample(draw, dtype):
        x = values(draw, draw(shapes()), dtype, lo, hi)
        if halves:
            x = _with_halves(draw, x, dtype)
        if zeros:
            x = _with_zeros(draw, x)
        if specials:
            x = with_specials(draw, x, dtype)
            if not nan and dtype in FLOATS:
                x = np.where(np.isnan(x), np.asarray(1.0, x.dtype), x)
        kw = {}
        for k, strat in (kwargs or {}).items():
            v = draw(strat)
            if v is not None:
                kw[k] = v
        return [x], kw
    return sample


def unary(name, np_fn, dtypes=ALL, fg_fn=None, tol=None, **sample_kw):
    return OpSpec(
        name=name,
        fg_fn=fg_fn or getattr(fg.Tensor, name),
        np_fn=np_fn,
        sample=unary_sample(**sample_kw),
        dtypes=dtypes,
        tol=tol or {},
    )


def keep(fn):
    """NumPy's rounding functions return floats for ints; PyTorch keeps the integer dtype."""
    return lambda x: fn(x).astype(x.dtype) if x.dtype.kind in "iub" else fn(x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    bx = beta * x
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / beta)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _silu(x):
    return x * _sigmoid(x)


def _leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, x * negative_slope)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _relu(x):
    return np.maximum(x, np.zeros((), dtype=x.dtype))


_SLOPES = st.sampled_from([None, 0.01, 0.2, 0.0, 1.5, -0.5])
_ALPHAS = st.sampled_from([None, 1.0, 0.5, 2.0])
_BETAS = st.sampled_from([None, 1.0, 0.5, 2.0])
_THRESHOLDS = st.sampled_from([None, 20.0, 1.0, 5.0])

UNARY = [
    unary("neg", np.negative, NUMERIC, specials=True),
    unary("abs", np.abs, NUMERIC, specials=True),
    # sign(NaN) differs between libraries (NumPy NaN, PyTorch 0 on some paths): no NaN inputs.
    unary("sign", np.sign, NUMERIC, specials=True, nan=False, zeros=True),
    unary("square", np.square, NUMERIC, specials=True),
    unary("reciprocal", f64(lambda x: 1.0 / x), ALL, specials=True, zeros=True),
    unary("floor", keep(np.floor), NUMERIC, lo=-5, hi=5, specials=True, halves=True),
    unary("ceil", keep(np.ceil), NUMERIC, lo=-5, hi=5, specials=True, halves=True),
    unary("round", keep(np.round), NUMERIC, lo=-5, hi=5, specials=True, halves=True),
    unary("trunc", keep(np.trunc), NUMERIC, lo=-5, hi=5, specials=True, halves=True),
    unary("exp", f64(np.exp), ALL, specials=True),
    unary("log", f64(np.log), ALL, lo=0.01, hi=5, specials=True),
    unary("log2", f64(np.log2), ALL, lo=0.01, hi=5, specials=True),
    unary("log1p", f64(np.log1p), ALL, lo=-0.99, hi=5, specials=True),
    unary("expm1", f64(np.expm1), ALL, specials=True),
    unary("sqrt", f64(np.sqrt), ALL, lo=0, hi=5, specials=True),
    unary("rsqrt", f64(lambda x: 1.0 / np.sqrt(x)), ALL, lo=0.01, hi=5, specials=True),
    unary("sin", f64(np.sin), ALL, lo=-6, hi=6),
    unary("cos", f64(np.cos), ALL, lo=-6, hi=6),
    unary("tan", f64(np.tan), ALL, lo=-1.4, hi=1.4),
    unary("tanh", f64(np.tanh), ALL, lo=-6, hi=6, specials=True),
    unary("sigmoid", f64(_sigmoid), ALL, lo=-8, hi=8, specials=True),
    unary("relu", _relu, NUMERIC, specials=True),
    unary("leaky_relu", f64(_leaky_relu), ALL, fg_fn=F.leaky_relu, kwargs={"negative_slope": _SLOPES}),
    unary("elu", f64(_elu), ALL, fg_fn=F.elu, kwargs={"alpha": _ALPHAS}),
    unary(
        "gelu", f64(_gelu), ALL, lo=-5, hi=5, fg_fn=F.gelu,
        kwargs={"approximate": st.sampled_from([None, "none"])},
    ),
    unary("gelu_tanh", f64(lambda x: _gelu(x, "tanh")), ALL, lo=-5, hi=5,
          fg_fn=lambda x: F.gelu(x, approximate="tanh")),
    unary("silu", f64(_silu), ALL, lo=-8, hi=8),
    unary("softsign", f64(lambda x: x / (1.0 + np.abs(x))), ALL, lo=-8, hi=8, fg_fn=F.softsign),
    unary(
        "softplus", f64(_softplus), ALL, lo=-10, hi=10, fg_fn=F.softplus,
        kwargs={"beta": _BETAS, "threshold": _THRESHOLDS},
    ),
    unary("erf", f64(_erf), ALL, lo=-3, hi=3),
    unary("logical_not", np.logical_not, ALL, specials=True, zeros=True),
    unary("bitwise_not", np.invert, INT_BOOL, lo=-100, hi=100),
    unary("isnan", np.isnan, ALL, specials=True),
    unary("isinf", np.isinf, ALL, specials=True),
    unary("isfinite", np.isfinite, ALL, specials=True),
]


# clamp: scalar bounds (min only, max only, both, min > max) or tensor bounds broadcasting into x.

def _bound(draw, dtype):
    if dtype in INTS:
        return draw(st.integers(0 if dtype == "uint8" else -3, 3))
    return draw(st.integers(-12, 12)) / 4


def _sub_shape(draw, shape):
    k = draw(st.integers(0, len(shape)))
    s = list(shape[len(shape) - k:])
    for i in range(len(s)):
        if draw(st.booleans()):
            s[i] = 1
    return tuple(s)


def _clamp_sample(draw, dtype):
    shape = draw(shapes())
    x = with_specials(draw, values(draw, shape, dtype), dtype)
    mode = draw(st.sampled_from(["min", "max", "both", "tensor", "tensor_min"]))
    if mode == "min":
        return [x], {"min": _bound(draw, dtype)}
    if mode == "max":
        return [x], {"max": _bound(draw, dtype)}
    if mode == "both":
        return [x], {"min": _bound(draw, dtype), "max": _bound(draw, dtype)}
    lo = values(draw, _sub_shape(draw, shape), dtype, -3, 0)
    if mode == "tensor_min":
        return [x, lo], {}
    hi = values(draw, _sub_shape(draw, shape), dtype, 0, 3)
    return [x, lo, hi], {}


def _clamp_fg(x, lo=None, hi=None, **kw):
    if lo is not None:
        return fg.clamp(x, lo, hi)
    return x.clamp(**kw)


def _clamp_np(x, lo=None, hi=None, min=None, max=None):  # noqa: A002 - PyTorch's keyword names
    lo = min if lo is None else lo
    hi = max if hi is None else hi
    y = x
    if lo is not None:
        y = np.maximum(y, np.asarray(lo, dtype=x.dtype))
    if hi is not None:
        y = np.minimum(y, np.asarray(hi, dtype=x.dtype))
    return y


CLAMP = OpSpec("clamp", _clamp_fg, _clamp_np, _clamp_sample, dtypes=NUMERIC)


# ---------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------

def _scalar(draw, dtype, lo, hi, nonzero):
    """A Python scalar of a category allowed with a ``dtype`` tensor, inside [lo, hi]."""
    if dtype == "uint8":  # a negative Python int is out of range for NumPy's uint8 reference
        lo, hi = max(lo, 0), max(hi, 0)
    kind = draw(st.sampled_from(["int", "bool", "float"]))
    if kind == "bool":
        v = draw(st.booleans())
        if (nonzero and not v) or not (lo <= float(v) <= hi):
            kind = "int"
        else:
            return v
    if kind == "int":
        choices = [i for i in range(math.ceil(lo), math.floor(hi) + 1) if not (nonzero and i == 0)]
        if choices:
            return draw(st.sampled_from(choices))
    # float on a quarter grid: exact in every float dtype
    choices = [q / 4 for q in range(math.ceil(lo * 4), math.floor(hi * 4) + 1) if not (nonzero and q == 0)]
    return draw(st.sampled_from(choices))


def binary_sample(lo=-3.0, hi=3.0, lo2=None, hi2=None, nonzero2=False, specials=False, zeros=False,
                  int_lo2=None, scalars=True, reflected=True, float_scalars=True):
    """Two operands with broadcasting; sometimes one is a Python scalar (weakly typed)."""
    lo2 = lo if lo2 is None else lo2
    hi2 = hi if hi2 is None else hi2

    def sample(draw, dtype):
        variants = ["tt"] + (["ts"] if scalars else []) + (["st"] if scalars and reflected else [])
        variant = draw(st.sampled_from(variants))
        sa, sb = broadcastable_pair(draw)
        l2 = int_lo2 if (int_lo2 is not None and dtype in INT_BOOL) else lo2
        a = values(draw, sa, dtype, lo, hi)
        b = nonzero_values(draw, sb, dtype, max(l2, 0.5), hi2) if nonzero2 else values(draw, sb, dtype, l2, hi2)
        if zeros:
            a, b = _with_zeros(draw, a), _with_zeros(draw, b)
        if specials:
            a, b = with_specials(draw, a, dtype), with_specials(draw, b, dtype)
        form = draw(st.sampled_from(["fn", "op"]))
        if variant == "ts":
            s = _scalar(draw, dtype, l2, hi2, nonzero2)
            if not float_scalars and isinstance(s, float):
                s = int(s)
            return [a, s], {"form": form}
        if variant == "st":
            s = _scalar(draw, dtype, lo, hi, False)
            if not float_scalars and isinstance(s, float):
                s = int(s)
            return [s, b], {"form": "op"}
        return [a, b], {"form": form}
    return sample


def binary(name, np_fn, op=None, dtypes=ALL, tol=None, **sample_kw):
    """A binary spec: ``form="fn"`` calls ``fg.<name>``, ``form="op"`` the Python operator."""
    method = getattr(fg.Tensor, name)

    def fg_fn(a, b, form="fn"):
        if op is not None and (form == "op" or not isinstance(a, fg.Tensor)):
            return op(a, b)
        return method(a, b)

    def ref(a, b, form="fn"):
        return np_fn(a, b)

    if op is None:
        sample_kw.setdefault("reflected", False)
    return OpSpec(name, fg_fn, ref, binary_sample(**sample_kw), dtypes=dtypes, tol=tol or {})


def OpSpec_xfail(spec: OpSpec, **reasons: str) -> OpSpec:  # noqa: N802 - reads as a spec modifier
    """``spec`` with known-bug xfails per dtype."""
    spec.xfail.update(reasons)
    return spec


def _lowp(spec: OpSpec, factor) -> OpSpec:
    """``spec`` with its own ``lowp_grad_factor``."""
    spec.lowp_grad_factor = factor
    return spec


def _nonzero_divisor_grads(spec: OpSpec) -> OpSpec:
    """``spec`` whose gradient cells draw divisors away from 0 (a Python scalar 0 was
    drawn: the quotient is inf there and finite differences give NaN); the forward
    cells keep dividing by zero."""
    spec.grad_sample = binary_sample(nonzero2=True)
    return spec


def _true_divide(a, b):
    return np.true_divide(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def _atan2(a, b):
    return np.arctan2(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def _keep_dtype(fn):
    """NumPy's bool arithmetic sometimes widens; PyTorch keeps bool for add/mul/max/min."""
    def wrapped(a, b):
        r = fn(a, b)
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype == bool:
            return r.astype(bool)
        return r
    return wrapped


BINARY = [
    binary("add", _keep_dtype(np.add), operator.add, ALL, specials=True),
    binary("sub", np.subtract, operator.sub, NUMERIC, specials=True),
    binary("mul", _keep_dtype(np.multiply), operator.mul, ALL, specials=True),
    _nonzero_divisor_grads(binary("div", _true_divide, operator.truediv, ALL, specials=True, zeros=True)),
    binary("floor_divide", np.floor_divide, operator.floordiv, NUMERIC, lo=-5, hi=5, nonzero2=True, hi2=3),
    binary("remainder", np.remainder, operator.mod, NUMERIC, lo=-5, hi=5, nonzero2=True, hi2=3),
    # float32: b·a^(b-1) rounds the exponent b - 1 before powf (an error of
    # u·|b - 1|·|ln a|, about 2u for a, |b| <= 3) and adds powf's own.
    _lowp(binary("pow", np.power, operator.pow, NUMERIC, lo=0.1, hi=3, lo2=-3, hi2=3, int_lo2=0),
          {"float32": 8.0}),
    binary("maximum", _keep_dtype(np.maximum), None, ALL, specials=True),
    binary("minimum", _keep_dtype(np.minimum), None, ALL, specials=True),
    binary("atan2", _atan2, None, ALL, specials=True, zeros=True),
    binary("eq", np.equal, operator.eq, ALL, specials=True, zeros=True),
    binary("ne", np.not_equal, operator.ne, ALL, specials=True, zeros=True),
    binary("lt", np.less, operator.lt, ALL, specials=True),
    binary("le", np.less_equal, operator.le, ALL, specials=True),
    binary("gt", np.greater, operator.gt, ALL, specials=True),
    binary("ge", np.greater_equal, operator.ge, ALL, specials=True),
    binary("logical_and", np.logical_and, None, ALL, specials=True, zeros=True),
    binary("logical_or", np.logical_or, None, ALL, specials=True, zeros=True),
    binary("logical_xor", np.logical_xor, None, ALL, specials=True, zeros=True),
    binary("bitwise_and", np.bitwise_and, operator.and_, INT_BOOL, lo=-100, hi=100, float_scalars=False),
    binary("bitwise_or", np.bitwise_or, operator.or_, INT_BOOL, lo=-100, hi=100, float_scalars=False),
    binary("bitwise_xor", np.bitwise_xor, operator.xor, INT_BOOL, lo=-100, hi=100, float_scalars=False),
]


# ---------------------------------------------------------------------------
# where, to, fill_, copy_, masked_fill
# ---------------------------------------------------------------------------

def _where_sample(draw, dtype):
    sc, sa, sb = broadcastable_shapes(draw, 3)
    cond = values(draw, sc, "bool")
    a = with_specials(draw, values(draw, sa, dtype), dtype)
    b = values(draw, sb, dtype)
    variant = draw(st.sampled_from(["fn", "method", "scalar_b", "scalar_a"]))
    if variant == "scalar_b":
        return [cond, a, _scalar(draw, dtype, -3, 3, False)], {"form": "fn"}
    if variant == "scalar_a":
        return [cond, _scalar(draw, dtype, -3, 3, False), b], {"form": "fn"}
    return [cond, a, b], {"form": variant}


def _where_fg(cond, a, b, form="fn"):
    if form == "method":
        return a.where(cond, b)
    return fg.where(cond, a, b)


WHERE = OpSpec("where", _where_fg, lambda c, a, b, form="fn": np.where(c, a, b), _where_sample, dtypes=ALL)


_NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
       "bfloat16": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_,
       "uint8": np.uint8, "int8": np.int8, "int16": np.int16}


def _to_sample(draw, dtype):
    x = values(draw, draw(shapes()), dtype, -3, 3)
    target = draw(st.sampled_from(ALL))
    form = draw(st.sampled_from(["object", "name", "keyword"]))
    return [x], {"target": target, "form": form}


def _to_fg(x, target, form):
    if form == "name":
        return x.to(target)
    if form == "keyword":
        return x.to(dtype=getattr(fg, target))
    return x.to(getattr(fg, target))


def _to_np(x, target, form):
    return x.astype(_NP[target])


def _to_grad_sample(draw, dtype):
    x = values(draw, draw(shapes()), dtype, -3, 3)
    return [x], {"target": "float64", "form": draw(st.sampled_from(["object", "name", "keyword"]))}


TO = OpSpec("to", _to_fg, _to_np, _to_sample, dtypes=ALL, out_dtype=lambda d, target, form: target,
            grad_sample=_to_grad_sample)


def _fill_value(draw, dtype):
    """A Python scalar whose category the tensor's dtype can hold."""
    if dtype == "bool":
        return draw(st.booleans())
    if dtype in INTS:
        return draw(st.one_of(st.integers(0 if dtype == "uint8" else -100, 100), st.booleans()))
    return draw(st.one_of(st.integers(-100, 100), st.sampled_from([0.5, -2.25, 1e-3, 3.0]), st.booleans()))


def _fill_sample(draw, dtype):
    x = values(draw, draw(shapes()), dtype)
    if draw(st.booleans()):
        # PyTorch's fill_(Tensor): a 0-d value tensor (of the dtype, or bool), converted as a cast
        return [x, values(draw, (), draw(st.sampled_from([dtype, "bool"])))], {}
    return [x], {"value": _fill_value(draw, dtype)}


def _fill_fg(x, *value_tensor, value=None):
    return x.fill_(value_tensor[0] if value_tensor else value)


def _fill_np(x, *value_tensor, value=None):
    return np.full(x.shape, value_tensor[0] if value_tensor else value, dtype=x.dtype)


FILL_ = OpSpec("fill_", _fill_fg, _fill_np, _fill_sample, dtypes=ALL, out_dtype=lambda d: d)


def _copy_sample(draw, dtype):
    sd, ss = broadcastable_shapes(draw, 2)
    # the destination must have the full shape; the source broadcasts into it
    sd = tuple(np.broadcast_shapes(sd, ss))
    dst = values(draw, sd, dtype)
    # same dtype, or another one (values convert; floats truncate into ints)
    src_dtype = draw(st.sampled_from([dtype, "float64", "int64", "int32", "bool", "float16"]))
    src = values(draw, ss, src_dtype)
    return [dst, src], {}


def _copy_np(dst, src):
    r = dst.copy()
    r[...] = src
    return r


COPY_ = OpSpec("copy_", lambda dst, src: dst.copy_(src), _copy_np, _copy_sample, dtypes=ALL,
               out_dtype=lambda d: d, grad_fn=lambda dst, src: (dst * 2).copy_(src))


def _masked_fill_sample(draw, dtype):
    shape = draw(shapes())
    x = values(draw, shape, dtype)
    mask = values(draw, _sub_shape(draw, shape), "bool")
    return [x, mask], {"value": _fill_value(draw, dtype)}


def _masked_fill_np(x, mask, value):
    return np.where(mask, np.asarray(value, dtype=x.dtype), x)


MASKED_FILL = OpSpec(
    "masked_fill", lambda x, mask, value: x.masked_fill(mask, value), _masked_fill_np,
    _masked_fill_sample, dtypes=ALL,
)


SPECS = UNARY + [CLAMP] + BINARY + [WHERE, TO, FILL_, COPY_, MASKED_FILL]
