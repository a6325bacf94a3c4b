"""Write PyTorch references for the math functions and Tensor methods composed in
``ferrograd._surface_math`` to ``tests/fixtures/parity/surface_math.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it
was made with (``torch_version``). ``tests/test_surface_math.py`` runs :func:`cases` on
ferrograd and compares with it, in CI without PyTorch. This script needs only ``torch`` and
``numpy``::

    python scripts/make_surface_math_references.py

:func:`cases` is written once for both libraries: ``t`` is the module (``torch`` or
``ferrograd``) and ``T`` makes a float64 tensor from a NumPy array. Each entry is one call
with PyTorch's argument names and defaults, on inputs where its rules show (negative
indices, wrapping diagonals, weights, ``rounding_mode``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "surface_math.npz"

_R = np.random.default_rng(0)
A = _R.normal(size=(3, 4))
B = _R.normal(size=(4,))
C = _R.uniform(1, 2, size=(3, 4))
SQ = _R.normal(size=(3, 3)) + 3 * np.eye(3)
I = _R.integers(-20, 20, size=(6,))  # noqa: E741
J = _R.integers(-20, 20, size=(6,))


def cases(t: Any, T: Callable[[np.ndarray], Any]) -> dict[str, np.ndarray]:
    """Every case's result as a float64 NumPy array, computed with module ``t``."""
    a, b, c, sq = T(A), T(B), T(C), T(SQ)
    out: dict[str, Any] = {}
    out["addcmul"] = t.addcmul(a, b, c, value=0.3)
    out["addcdiv"] = a.addcdiv(b, c, value=-1.5)
    out["index_fill"] = a.index_fill(1, t.tensor([0, -1]), 9.0)
    out["index_copy"] = a.index_copy(0, t.tensor([2, 0]), T(A[:2] * 10))
    x = a.clone()
    x.fill_diagonal_(4.0, wrap=True)
    out["fill_diagonal_"] = x
    x = T(np.zeros((7, 3)))
    x.fill_diagonal_(1.0, wrap=True)
    out["fill_diagonal_wrap"] = x
    x = a.clone()
    x.le_(b)
    out["le_"] = x
    x = a.clone()
    x.remainder_(0.7)
    out["remainder_"] = x
    x = a.clone()
    x.cumprod_(1)
    out["cumprod_"] = x
    x = a.clone()
    x.logical_xor_(b)
    out["logical_xor_"] = x
    x = a.clone()
    x.transpose_(0, 1)
    out["transpose_"] = x
    out["sum_to_size"] = a.sum_to_size(1, 4)
    out["tensor_split"] = t.cat(list(t.tensor_split(a, [1, 3], dim=1)[1:]), 1)
    out["hsplit"] = t.hsplit(a, 2)[1]
    out["vsplit"] = t.vsplit(a, [1])[1]
    out["sgn"] = a.sgn()
    out["fix"] = a.fix()
    out["divide_floor"] = a.divide(c, rounding_mode="floor")
    out["subtract"] = a.subtract(b, alpha=3)
    out["addr"] = t.addr(a, T(A[:, 0]), b, beta=0.5, alpha=-2)
    out["ger"] = a[0].ger(b)
    out["inner"] = t.inner(a, T(A[:2]))
    out["dist"] = t.dist(a, b, 3)
    out["dist_inf"] = t.dist(a, b, float("inf"))
    out["dist_0"] = t.dist(a, T(np.round(A)), 0)
    out["diagflat"] = t.diagflat(a[:2, :2], -1)
    out["float_power"] = t.float_power(c, b)
    out["gcd"] = t.gcd(t.tensor(I), t.tensor(J))
    out["lcm"] = t.lcm(t.tensor(I), t.tensor(J))
    out["ldexp"] = t.ldexp(a, t.tensor(I[:4]))
    m, e = t.frexp(a)
    out["frexp_mantissa"] = m
    out["frexp_exponent"] = e
    fw, aw = t.tensor([1, 2, 0, 3]), T(np.array([0.5, 1, 2, 1.5]))
    out["cov"] = t.cov(a, correction=0, fweights=fw, aweights=aw)
    out["cov_weighted"] = t.cov(a, fweights=fw, aweights=aw)
    out["corrcoef"] = t.corrcoef(a)
    out["renorm"] = t.renorm(a, 1.5, 1, 1.0)
    out["trapezoid"] = t.trapezoid(a, T(np.array([0, 1, 3, 3.5])), dim=1)
    out["cumulative_trapezoid"] = t.cumulative_trapezoid(a, dx=0.5, dim=0)
    h, e = t.histogram(a, bins=5, weight=c, density=True)
    out["histogram"] = h
    out["histogram_edges"] = e
    out["unravel_index"] = t.stack(list(t.unravel_index(t.tensor([7, 0, 11, -1]), (3, 4))))
    out["chain_matmul"] = t.chain_matmul(a, a.t(), sq)
    out["pinverse"] = a.pinverse()
    out["matrix_exp"] = sq.matrix_exp()
    out["logdet"] = (sq @ sq.t()).logdet()
    u, s, v = a.svd()
    out["svd_S"] = s
    out["svd_USVt"] = u @ t.diag(s) @ v.t()  # V, not Vh
    out["mH"] = a.mH
    out["H"] = a.H
    out["adjoint"] = a.adjoint()
    inf = T(np.array([1.0, np.inf, -np.inf]))
    out["isposinf"] = t.isposinf(inf)
    out["isneginf"] = t.isneginf(inf)
    out["xlogy_"] = T(np.array([0.0, 1.5, 2.0])).xlogy_(T(np.array([0.0, 2.0, 0.5])))
    return {k: np.asarray(v.tolist(), dtype=np.float64) for k, v in out.items()}


def main() -> None:
    import warnings

    import torch

    torch.set_default_dtype(torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # chain_matmul's deprecation
        ref = cases(torch, lambda x: torch.tensor(x, dtype=torch.float64))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, torch_version=np.array(torch.__version__), **ref)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(ref)} cases, torch {torch.__version__})")


if __name__ == "__main__":
    main()
