"""Op-table specs of the ``ferrograd.special`` compositions that PyTorch also has at the top
level and as Tensor methods (``logit``, ``i0``): each runs through every column (forward
against SciPy in float64, gradients, low precision, GPU parity, compiled). ``mvlgamma`` (a sum
of ``lgamma``, which has its own spec) and the other ``special`` functions are tested in
``tests/test_special_namespace.py``."""

from __future__ import annotations

import ferrograd as fg
import scipy.special as sp

from ._spec import OpSpec, shapes, values, with_specials

FLOATS = ("float32", "float64", "float16", "bfloat16")
TOL = {
    "float64": (1e-12, 1e-14),
    "float32": (1e-6, 1e-6),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1e-2),
}
# a composition of many ops: its low-precision gradient is checked against float64 more loosely
LOWP = {"float32": 16.0, "float16": 16.0, "bfloat16": 16.0}


def _unary(lo, hi, specials=True):
    def sample(draw, dtype):
        a = values(draw, draw(shapes(0, 3)), dtype, lo, hi)
        return [with_specials(draw, a, dtype) if specials else a], {}

    return sample


def _grad(lo, hi):
    def sample(draw, dtype):
        return [values(draw, draw(shapes(0, 2, 1, 4)), "float64", lo, hi)], {}

    return sample


SPECS: list[OpSpec] = [
    OpSpec(
        "logit",
        lambda a: fg.logit(a),
        sp.logit,
        _unary(-0.1, 1.1),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=_grad(0.02, 0.98),
        grad_snap=False,
        lowp_grad_factor=LOWP,
        max_examples=15,
    ),
    OpSpec(
        "i0",
        lambda a: fg.i0(a),
        sp.i0,
        _unary(-30.0, 30.0, specials=False),
        dtypes=FLOATS,
        tol=TOL,
        composed=True,
        grad_sample=_grad(-25.0, 25.0),
        grad_snap=False,
        lowp_grad_factor=LOWP,
        max_examples=15,
    ),
]
