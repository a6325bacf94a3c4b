"""Op-table specs for the math functions composed in Python (``ferrograd._surface_math``):
``addcmul``, ``addcdiv``, ``addr`` and ``cumulative_trapezoid``.

Each runs through every column like a registry op. The references are float64 NumPy
expressions of PyTorch's documented definitions (``input + value * t1 * t2``,
``beta * input + alpha * outer(v1, v2)``, SciPy-style running trapezoids), never the
composition itself.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, broadcastable_shapes, shapes, values

# Compositions round at every step: the low precisions get composed.py's tolerances.
TOL = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
SUM_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1)}
COMPOSED_LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}


def _addc_sample(div: bool):
    def sample(draw, dtype):
        s = broadcastable_shapes(draw, 3, 0, 3, 4)
        a, b = values(draw, s[0], dtype), values(draw, s[1], dtype)
        # divisors kept away from zero (the quotient stays well conditioned)
        c = values(draw, s[2], dtype, 0.5, 2.0) if div else values(draw, s[2], dtype)
        if div and c.size and draw(st.booleans()):
            c = np.negative(c)
        return [a, b, c], {"value": float(draw(st.sampled_from([1.0, 0.5, -2.0, 0.0])))}

    return sample


def _addr_sample(draw, dtype):
    n, m = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    full = (n, m)
    ish = tuple(d if rng.random() < 0.7 else 1 for d in full)[int(rng.integers(0, 3)) :]
    arrays = [values(draw, ish, dtype, -2.0, 2.0), values(draw, (n,), dtype, -2.0, 2.0)]
    arrays.append(values(draw, (m,), dtype, -2.0, 2.0))
    return arrays, {
        "beta": draw(st.sampled_from([1.0, 0.5, -2.0])),
        "alpha": draw(st.sampled_from([1.0, 0.5, -1.5])),
    }


def _addr_np(a, u, v, *, beta, alpha):
    return beta * a + alpha * np.outer(u, v)


def _ctrapz_sample(draw, dtype):
    shape = draw(shapes(1, 3, 1, 5))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    y = values(draw, shape, dtype)
    if draw(st.booleans()):
        x = np.sort(values(draw, (shape[dim],), dtype, -2.0, 2.0)).astype(y.dtype)
        return [y, x], {"dim": dim, "dx": None}
    return [y], {"dim": dim, "dx": float(draw(st.sampled_from([1.0, 0.5, 2.0])))}


def _ctrapz_fg(y, *x, dim, dx):
    if x:
        return fg.cumulative_trapezoid(y, x[0], dim=dim)
    return fg.cumulative_trapezoid(y, dx=dx, dim=dim)


def _ctrapz_np(y, *x, dim, dx):
    y = np.moveaxis(np.asarray(y, np.float64), dim, -1)
    h = np.diff(np.asarray(x[0], np.float64)) if x else dx
    out = np.cumsum((y[..., 1:] + y[..., :-1]) / 2 * h, axis=-1)
    return np.moveaxis(out, -1, dim)


SPECS: list[OpSpec] = [
    OpSpec(
        "addcmul",
        lambda a, b, c, value: fg.addcmul(a, b, c, value=value),
        lambda a, b, c, value: a + value * b * c,
        _addc_sample(False),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "addcdiv",
        lambda a, b, c, value: fg.addcdiv(a, b, c, value=value),
        lambda a, b, c, value: a + value * b / c,
        _addc_sample(True),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
        grad_snap=False,
    ),
    OpSpec(
        "addr",
        lambda a, u, v, beta, alpha: fg.addr(a, u, v, beta=beta, alpha=alpha),
        _addr_np,
        _addr_sample,
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
    ),
    OpSpec(
        "cumulative_trapezoid",
        _ctrapz_fg,
        _ctrapz_np,
        _ctrapz_sample,
        dtypes=FLOATS,
        tol=SUM_TOL,
        composed=True,
        lowp_grad_factor=COMPOSED_LOWP,
        grad_snap=False,
    ),
]
