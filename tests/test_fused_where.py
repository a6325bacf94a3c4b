"""`where` inside fused kernels.

The fused interpreter runs `where` as a select over whole rows, with any of
its three operands a full tensor, a value broadcast along the row (a
constant, or an input of size 1 in the last dim) or strided. Every mix must
match NumPy, including a NaN condition (true, as in NumPy).
"""

from __future__ import annotations

import itertools

import ferrograd as fg
import numpy as np
import pytest

SHAPE = (37, 300)


def _operand(kind: str, seed: int, dtype):
    rng = np.random.default_rng(seed)
    if kind == "full":
        return rng.standard_normal(SHAPE).astype(dtype)
    if kind == "column":  # broadcast along the last dim: stride 0 in the row
        return rng.standard_normal((SHAPE[0], 1)).astype(dtype)
    if kind == "strided":  # a transposed view: stride != 1 in the row
        return np.ascontiguousarray(rng.standard_normal(SHAPE[::-1]).astype(dtype)).T
    return float(dtype(rng.standard_normal()))  # a Python scalar: a constant of the kernel


def _to_fg(v, kind: str):
    if kind == "scalar":
        return v
    # A strided operand is the transposed view of a contiguous tensor.
    return fg.tensor(np.ascontiguousarray(v.T)).t() if kind == "strided" else fg.tensor(v)


KINDS = ["full", "column", "strided", "scalar"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kc, ka, kb", list(itertools.product(["full", "column", "strided"], KINDS, KINDS)))
def test_fused_where_matches_numpy(kc, ka, kb, dtype):
    cn, an, bn = _operand(kc, 1, dtype), _operand(ka, 2, dtype), _operand(kb, 3, dtype)
    cn[::5] = np.nan  # NaN compares unequal to 0: picks the first branch
    c, a, b = _to_fg(cn, kc), _to_fg(an, ka), _to_fg(bn, kb)

    def f(c, a, b):
        # The product after the select keeps it inside a fused kernel.
        return fg.where(c * 1.0 != 0.0, a, b) * 2.0 + 1.0

    cf = fg.compile(f)
    got = cf(c, a, b).numpy()
    kernels = [n["attrs"] for n in cf.graph(c, a, b).nodes() if n["op"] == "fused"]
    assert any("where" in k for k in kernels), kernels
    # Two Python scalars select in the default float dtype (float32).
    dt = got.dtype.type
    a_, b_ = (np.asarray(v, dtype=dt) for v in (an, bn))
    want = np.where(cn != 0.0, a_, b_) * dt(2.0) + dt(1.0)
    np.testing.assert_array_equal(got, want)
