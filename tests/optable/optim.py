"""Op-table specs for the optim family: one update of one parameter.

The registry ops are multi-tensor (lists of parameters, gradients and state)
and write the parameter *and* its state in place; the table drives them with
a single parameter: input 0 (the parameter, the declared mutated input) is
updated in place and returned together with the new state, which the spec
computes on copies so that the other inputs stay unchanged. Multi-parameter
calls, several steps, groups and refusals are covered by ``tests/test_optim.py``.
"""

from __future__ import annotations

import math

import numpy as np
from ferrograd import _core
from hypothesis import strategies as st

from ._spec import FLOATS, OpSpec, shapes, values


def _lerp(a, b, w):
    return a + w * (b - a)


# ---------------------------------------------------------------------------
# sgd_step
# ---------------------------------------------------------------------------


def _sgd_sample(draw, dtype):
    shape = draw(shapes())
    p, g, b = (values(draw, shape, dtype) for _ in range(3))
    kw = dict(
        lr=draw(st.sampled_from([0.1, 1e-3])),
        momentum=draw(st.sampled_from([0.0, 0.9])),
        dampening=draw(st.sampled_from([0.0, 0.25])),
        weight_decay=draw(st.sampled_from([0.0, 0.1])),
        maximize=draw(st.booleans()),
        first=draw(st.booleans()),
    )
    kw["nesterov"] = kw["momentum"] > 0 and kw["dampening"] == 0 and draw(st.booleans())
    return [p, g, b], kw


def _sgd_fg(p, g, b, *, lr, momentum, dampening, weight_decay, maximize, first, nesterov):
    buf = None if first else b.clone()
    (new,) = _core._sgd_step([p], [g], [buf], lr, momentum, dampening, nesterov, weight_decay, maximize)
    return (p, new) if momentum else p


def _sgd_np(p, g, b, *, lr, momentum, dampening, weight_decay, maximize, first, nesterov):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        b = g if first else momentum * b + (1 - dampening) * g
        g = g + momentum * b if nesterov else b
        return p - lr * g, b
    return p - lr * g


# ---------------------------------------------------------------------------
# adam_step (Adam and AdamW)
# ---------------------------------------------------------------------------


def _adam_sample(draw, dtype):
    shape = draw(shapes())
    p, g = values(draw, shape, dtype), values(draw, shape, dtype)
    m = values(draw, shape, dtype, -1.0, 1.0)
    v = values(draw, shape, dtype, 0.0, 2.0)
    vmax = values(draw, shape, dtype, 0.0, 2.0)
    kw = dict(
        step=draw(st.integers(1, 20)),
        lr=draw(st.sampled_from([1e-3, 0.1])),
        beta1=draw(st.sampled_from([0.9, 0.3])),
        beta2=draw(st.sampled_from([0.999, 0.9])),
        eps=draw(st.sampled_from([1e-8, 1e-3])),
        weight_decay=draw(st.sampled_from([0.0, 0.05])),
        amsgrad=draw(st.booleans()),
        maximize=draw(st.booleans()),
        decoupled=draw(st.booleans()),
    )
    return [p, g, m, v, vmax], kw


def _adam_fg(p, g, m, v, vmax, *, step, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled):
    m, v, vmax = m.clone(), v.clone(), vmax.clone()
    _core._adam_step([p], [g], [m], [v], [vmax] if amsgrad else [], [step], lr, beta1, beta2, eps,
                     weight_decay, amsgrad, maximize, decoupled)
    return (p, m, v, vmax) if amsgrad else (p, m, v)


def _adam_np(p, g, m, v, vmax, *, step, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled):
    g = -g if maximize else g
    if weight_decay:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = _lerp(m, g, 1 - beta1)
    v = beta2 * v + (1 - beta2) * g * g
    vmax = np.maximum(vmax, v)
    d = vmax if amsgrad else v
    p = p - lr / (1 - beta1**step) * m / (np.sqrt(d) / math.sqrt(1 - beta2**step) + eps)
    return (p, m, v, vmax) if amsgrad else (p, m, v)


# ---------------------------------------------------------------------------
# rmsprop_step
# ---------------------------------------------------------------------------


def _rmsprop_sample(draw, dtype):
    shape = draw(shapes())
    p, g = values(draw, shape, dtype), values(draw, shape, dtype)
    # square_avg - grad_avg**2 >= 0.25 keeps the centered square root away from zero.
    s = values(draw, shape, dtype, 0.5, 2.0)
    b = values(draw, shape, dtype, -1.0, 1.0)
    a = values(draw, shape, dtype, -0.5, 0.5)
    kw = dict(
        lr=draw(st.sampled_from([1e-2, 1e-3])),
        alpha=draw(st.sampled_from([0.99, 0.6])),
        eps=draw(st.sampled_from([1e-8, 1e-2])),
        weight_decay=draw(st.sampled_from([0.0, 0.1])),
        momentum=draw(st.sampled_from([0.0, 0.9])),
        centered=draw(st.booleans()),
        maximize=draw(st.booleans()),
    )
    return [p, g, s, b, a], kw


def _rmsprop_fg(p, g, s, b, a, *, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    s, b, a = s.clone(), b.clone(), a.clone()
    _core._rmsprop_step([p], [g], [s], [b] if momentum else [], [a] if centered else [], lr, alpha, eps,
                        weight_decay, momentum, centered, maximize)
    return (p, s) + ((b,) if momentum else ()) + ((a,) if centered else ())


def _rmsprop_np(p, g, s, b, a, *, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    s = alpha * s + (1 - alpha) * g * g
    if centered:
        a = _lerp(a, g, 1 - alpha)
        d = np.sqrt(s - a * a) + eps
    else:
        d = np.sqrt(s) + eps
    if momentum:
        b = momentum * b + g / d
        p = p - lr * b
    else:
        p = p - lr * g / d
    return (p, s) + ((b,) if momentum else ()) + ((a,) if centered else ())


# Half precision computes in float32 and rounds the parameter and each state
# tensor on store: allow a few units in the last place of the dtype.
_TOL = {"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}

SPECS = [
    OpSpec("sgd_step", _sgd_fg, _sgd_np, _sgd_sample, dtypes=FLOATS, tol=_TOL),
    OpSpec("adam_step", _adam_fg, _adam_np, _adam_sample, dtypes=FLOATS, tol=_TOL),
    OpSpec("rmsprop_step", _rmsprop_fg, _rmsprop_np, _rmsprop_sample, dtypes=FLOATS, tol=_TOL),
]
