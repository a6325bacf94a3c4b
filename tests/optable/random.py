"""Op-table specs for the random family.

Random ops can be checked value for value: each case seeds the default
generator, and the reference is the independent NumPy implementation of the
documented Philox spec in ``_philox.py`` (uniform, integer, Bernoulli,
dropout, permutation and multinomial results bit-exact; normals to the
rounding of ``log``/``sin``/``cos``). Distribution tests (moments, KS and
chi-square), thread-count independence and generator state live in
``tests/test_random.py``.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from . import _philox as P
from ._spec import ALL, FLOATS, NUMERIC, OpSpec, shapes, values

SEEDS = st.integers(0, 2**64 - 1)


def _dt(name: str):
    return getattr(fg, name)


def _np_dtype(name: str):
    return {
        "bool": np.bool_, "int32": np.int32, "int64": np.int64,
        "uint8": np.uint8, "int8": np.int8, "int16": np.int16,
    }.get(name, np.float64)


# Normals go through log/sin/cos in float32 for the 16/32-bit dtypes.
NORMAL_TOL = {"float32": (2e-5, 1e-4), "float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2)}
# The tensor form of ``normal`` rounds z, z*std and z*std+mean separately.
NORMAL_T_TOL = {"float32": (2e-5, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}


# ---------------------------------------------------------------------------
# Factories
# ---------------------------------------------------------------------------

def _factory_sample(extra=None):
    def sample(draw, dtype):
        kw = {"shape": draw(shapes()), "seed": draw(SEEDS), "dt": dtype}
        if extra:
            kw.update(extra(draw, dtype))
        return [], kw
    return sample


def _rand(shape, seed, dt):
    fg.manual_seed(seed)
    return fg.rand(*shape, dtype=_dt(dt))


def _randn(shape, seed, dt):
    fg.manual_seed(seed)
    return fg.randn(shape, dtype=_dt(dt))


def _int_bounds(draw, dtype):
    if dtype == "bool":
        lo = draw(st.integers(0, 1))
        return {"low": lo, "high": draw(st.integers(lo + 1, 2))}
    if dtype in ("uint8", "int8", "int16"):  # the range must fit the dtype
        info = np.iinfo(dtype)
        lo = draw(st.integers(max(int(info.min), -1000), min(int(info.max), 1000)))
        return {"low": lo, "high": lo + draw(st.integers(1, min(2000, int(info.max) + 1 - lo)))}
    lo = draw(st.integers(-1000, 1000))
    return {"low": lo, "high": lo + draw(st.integers(1, 2000))}


def _randint(shape, seed, dt, low, high):
    fg.manual_seed(seed)
    return fg.randint(low, high, shape, dtype=_dt(dt))


def _randint_ref(shape, seed, dt, low, high):
    return P.randint(seed, 0, shape, low, high).astype(_np_dtype(dt))


def _normal_sample(draw, dtype):
    kw = {"seed": draw(SEEDS), "dt": dtype, "mean": draw(st.floats(-3, 3)), "std": draw(st.floats(0, 3))}
    if draw(st.booleans()):
        shape = draw(shapes())
        return [values(draw, shape, dtype)], kw
    kw["shape"] = draw(shapes())
    return [], kw


def _normal(*mean_t, seed, dt, mean, std, shape=None):
    fg.manual_seed(seed)
    if mean_t:
        return fg.normal(mean_t[0], std)
    return fg.normal(mean, std, shape, dtype=_dt(dt))


def _normal_ref(*mean_a, seed, dt, mean, std, shape=None):
    if mean_a:
        m = mean_a[0]
        return m + std * P.normal(seed, 0, m.shape, dt)
    return P.normal(seed, 0, shape, dt, mean, std)


def _randperm_sample(draw, dtype):
    return [], {"n": draw(st.integers(0, 64)), "seed": draw(SEEDS), "dt": dtype}


def _randperm(n, seed, dt):
    fg.manual_seed(seed)
    return fg.randperm(n, dtype=_dt(dt))


def _randperm_ref(n, seed, dt):
    return P.randperm(seed, 0, n).astype(_np_dtype(dt))


# ---------------------------------------------------------------------------
# Ops with a tensor input
# ---------------------------------------------------------------------------

def _like_sample(extra=None):
    def sample(draw, dtype):
        kw = {"seed": draw(SEEDS), "dt": dtype}
        if extra:
            kw.update(extra(draw, dtype))
        return [values(draw, draw(shapes()), dtype)], kw
    return sample


def _rand_like(x, seed, dt):
    fg.manual_seed(seed)
    return fg.rand_like(x)


def _randn_like(x, seed, dt):
    fg.manual_seed(seed)
    return fg.randn_like(x)


def _randint_like(x, seed, dt, low, high):
    fg.manual_seed(seed)
    return fg.randint_like(x, low, high)


def _like_dtype(x):
    return x.dtype if x.dtype.kind in "biu" else np.float64


def _range_sample(draw, dtype):
    lo = draw(st.floats(-5, 5))
    return {"low": lo, "high": lo + draw(st.floats(0, 5))}


def _uniform_(x, seed, dt, low, high):
    fg.manual_seed(seed)
    return x.uniform_(low, high)


def _ms_sample(draw, dtype):
    return {"mean": draw(st.floats(-3, 3)), "std": draw(st.floats(0, 3))}


def _normal_(x, seed, dt, mean, std):
    fg.manual_seed(seed)
    return x.normal_(mean, std)


def _p_sample(draw, dtype):
    return [values(draw, draw(shapes()), dtype, 0.0, 1.0)], {"seed": draw(SEEDS)}


def _bernoulli(p, seed):
    fg.manual_seed(seed)
    return fg.bernoulli(p)


def _bernoulli_ref(p, seed):
    return P.bernoulli(seed, 0, p).astype(np.float64)


def _bernoulli_p(draw, dtype):
    return {"p": draw(st.floats(0, 1))}


def _bernoulli_(x, seed, dt, p):
    fg.manual_seed(seed)
    return x.bernoulli_(p)


def _bernoulli__ref(x, seed, dt, p):
    return P.bernoulli(seed, 0, np.full(x.shape, p)).astype(_like_dtype(x))


def _multinomial_sample(draw, dtype):
    m = draw(st.integers(1, 6))
    shape = (m,) if draw(st.booleans()) else (draw(st.integers(0, 4)), m)
    p = values(draw, shape, dtype, 0.0, 3.0)
    rows = p.reshape(-1, m)
    # Give every row some weight, and count the categories a draw without replacement may use.
    rows[:, draw(st.integers(0, m - 1))] = 1.0
    replacement = draw(st.booleans())
    nz = int((rows > 0).sum(axis=1).min()) if rows.shape[0] else m
    k = draw(st.integers(0, 8)) if replacement else draw(st.integers(0, nz))
    return [p], {"seed": draw(SEEDS), "k": k, "replacement": replacement}


def _multinomial(p, seed, k, replacement):
    fg.manual_seed(seed)
    return fg.multinomial(p, k, replacement)


def _multinomial_ref(p, seed, k, replacement):
    return P.multinomial(seed, 0, p, k, replacement)


def _dropout_sample(draw, dtype):
    p = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]) | st.floats(0, 1))
    return [values(draw, draw(shapes()), dtype)], {
        "seed": draw(SEEDS),
        "p": p,
        "training": draw(st.booleans()) or draw(st.booleans()),
        "dt": dtype,
    }


def _dropout_grad_sample(draw, dtype):
    """Few elements; the driver re-seeds before every call, so each finite
    difference sees the same mask (and backward re-derives it from the seed)."""
    p = draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0]) | st.floats(0, 1))
    return [values(draw, draw(shapes(0, 3, 0, 3)), dtype)], {
        "seed": draw(SEEDS),
        "p": p,
        "training": draw(st.booleans()) or draw(st.booleans()),
        "dt": dtype,
    }


def _dropout(x, seed, p, training, dt):
    fg.manual_seed(seed)
    return fg.nn.functional.dropout(x, p, training)


def _dropout_ref(x, seed, p, training, dt):
    if p == 0.0 or not training:
        return x
    if p == 1.0:
        return np.zeros_like(x)
    return P.dropout(seed, 0, x, p, dt)


SPECS = [
    OpSpec("rand", _rand, lambda shape, seed, dt: P.uniform(seed, 0, shape, dt), _factory_sample(),
           dtypes=FLOATS, noncontig=False),
    OpSpec("randn", _randn, lambda shape, seed, dt: P.normal(seed, 0, shape, dt), _factory_sample(),
           dtypes=FLOATS, tol=NORMAL_TOL, noncontig=False),
    OpSpec("randint", _randint, _randint_ref, _factory_sample(_int_bounds), dtypes=ALL, noncontig=False),
    OpSpec("normal", _normal, _normal_ref, _normal_sample, dtypes=FLOATS, tol=NORMAL_T_TOL),
    OpSpec("randperm", _randperm, _randperm_ref, _randperm_sample, dtypes=NUMERIC, noncontig=False),
    OpSpec("rand_like", _rand_like, lambda x, seed, dt: P.uniform(seed, 0, x.shape, dt),
           _like_sample(), dtypes=FLOATS),
    OpSpec("randn_like", _randn_like, lambda x, seed, dt: P.normal(seed, 0, x.shape, dt),
           _like_sample(), dtypes=FLOATS, tol=NORMAL_TOL),
    OpSpec("randint_like", _randint_like,
           lambda x, seed, dt, low, high: P.randint(seed, 0, x.shape, low, high).astype(_like_dtype(x)),
           _like_sample(_int_bounds), dtypes=ALL),
    OpSpec("uniform_", _uniform_,
           lambda x, seed, dt, low, high: P.uniform(seed, 0, x.shape, dt, low, high),
           _like_sample(_range_sample), dtypes=FLOATS),
    OpSpec("normal_", _normal_,
           lambda x, seed, dt, mean, std: P.normal(seed, 0, x.shape, dt, mean, std),
           _like_sample(_ms_sample), dtypes=FLOATS, tol=NORMAL_TOL),
    OpSpec("bernoulli", _bernoulli, _bernoulli_ref, _p_sample, dtypes=FLOATS),
    OpSpec("bernoulli_", _bernoulli_, _bernoulli__ref, _like_sample(_bernoulli_p), dtypes=ALL),
    OpSpec("multinomial", _multinomial, _multinomial_ref, _multinomial_sample, dtypes=FLOATS),
    OpSpec("dropout", _dropout, _dropout_ref, _dropout_sample, dtypes=FLOATS,
           grad_sample=_dropout_grad_sample, grad_examples=10),
]
