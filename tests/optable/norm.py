"""Op-table specs for the normalisation family: layer_norm and rms_norm."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, shapes, values

F = fg.nn.functional

TOL = {"float32": (1e-4, 1e-4), "float16": (4e-3, 8e-3), "bfloat16": (2e-2, 6e-2)}


def _norm_sample(max_params: int):
    def sample(draw, dtype):
        shape = draw(shapes(min_dims=1, max_dims=4))
        k = draw(st.integers(1, len(shape)))
        x = values(draw, shape, dtype, -3.0, 3.0)
        n = draw(st.integers(0, max_params))
        params = [values(draw, shape[len(shape) - k:], dtype, -2.0, 2.0) for _ in range(n)]
        eps = draw(st.sampled_from([1e-5, 1e-3, 0.1]))
        return [x, *params], {"k": k, "eps": eps}
    return sample


def _grad_sample(max_params: int):
    def sample(draw, dtype):
        shape = draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
        k = draw(st.integers(1, len(shape)))
        x = values(draw, shape, "float64", -2.0, 2.0)
        n = draw(st.integers(0, max_params))
        params = [values(draw, shape[len(shape) - k:], "float64", -2.0, 2.0) for _ in range(n)]
        return [x, *params], {"k": k, "eps": 0.1}
    return sample


def _ln_fg(x, *params, k, eps):
    return F.layer_norm(x, tuple(x.shape[x.ndim - k:]), *params, eps=eps)


def _rms_fg(x, *params, k, eps):
    return F.rms_norm(x, tuple(x.shape[x.ndim - k:]), *params, eps=eps)


def _ln_np(x, *params, k, eps, rms=False):
    x = np.asarray(x, np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    d = max(int(np.prod(x.shape[x.ndim - k:])), 1)
    mu = 0.0 if rms else x.sum(axis=axes, keepdims=True) / d
    var = ((x - mu) ** 2).sum(axis=axes, keepdims=True) / d
    y = (x - mu) / np.sqrt(var + eps)
    if params:
        y = y * np.asarray(params[0], np.float64)
    if len(params) > 1:
        y = y + np.asarray(params[1], np.float64)
    return y


# float32: dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) with ĝ = g·w subtracts float32 terms of
# size r·|w|·|g| (r = 1/std up to 3.2 with eps = 0.1, |w| up to 2), more than the
# cotangent's size the tolerance allows for. float16/bfloat16 compute it in float32.
LOWP_GRAD_FACTOR = {"float32": 8.0}

SPECS: list[OpSpec] = [
    OpSpec("layer_norm", _ln_fg, _ln_np, _norm_sample(2), dtypes=FLOATS, tol=TOL,
           grad_sample=_grad_sample(2), grad_examples=10, lowp_grad_factor=LOWP_GRAD_FACTOR),
    OpSpec("rms_norm", _rms_fg, lambda x, *p, k, eps: _ln_np(x, *p, k=k, eps=eps, rms=True),
           _norm_sample(1), dtypes=FLOATS, tol=TOL, grad_sample=_grad_sample(1), grad_examples=10,
           lowp_grad_factor=LOWP_GRAD_FACTOR),
]
