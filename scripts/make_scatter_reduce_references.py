"""Write PyTorch references for the gradients of ``scatter_reduce`` and ``index_reduce``
where their rules matter: ties (``amax``/``amin`` share a slot's gradient evenly among the
values equal to its result, self included when ``include_self``), zeros (``prod``: one zero
in a slot, two zeros, a zero in self) and counts (``mean``), to
``tests/fixtures/parity/scatter_reduce.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_scatter_reduce.py`` reads it and runs in CI
without PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_scatter_reduce_references.py

Per case ``<op>/<reduce>/<include_self>/<dim>``: the inputs ``x``, ``src``, ``index``, the
output gradient ``g``, and PyTorch's ``out``, ``gx`` and ``gsrc``. With
``include_self=False`` the inputs keep ``x`` off every value ``src`` holds: there PyTorch
still counts a self value equal to the result among the values sharing the gradient (though
it took no part in the reduction), which ferrograd does not do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "scatter_reduce.npz"

# Integer values with ties among src, between src and self, and zeros in both.
X = np.array([[2.0, 0.0, 3.0, 1.0], [4.0, 4.0, -1.0, 0.0], [3.0, 2.0, 2.0, 5.0]])
SRC = np.array(
    [
        [3.0, 0.0, 3.0, 2.0],
        [2.0, 4.0, 0.0, 5.0],
        [3.0, 0.0, -1.0, 5.0],
        [0.0, 1.0, 2.0, 0.0],
        [1.0, 4.0, 2.0, 0.0],
    ]
)
# dim 0: rows of src go to rows of x (row 1 of x is never named in column 0).
INDEX0 = np.array([[0, 1, 2, 0], [2, 1, 0, 2], [0, 0, 2, 2], [2, 1, 2, 0], [0, 1, 0, 2]])
# dim 1: index into the 4 columns of x from a 3 x 5 src block.
SRC1 = SRC.T[:3, :5].copy()
INDEX1 = np.array([[0, 0, 2, 3, 0], [1, 1, 3, 1, 1], [2, 0, 0, 2, 3]])
# index_reduce: slices along dim 0 (and dim 1) named by a 1-D index with repeats.
IDX_ROWS = np.array([0, 2, 0, 2, 0])
IDX_COLS = np.array([3, 0, 3, 1, 0])


def main() -> None:
    rng = np.random.default_rng(20261129)
    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            # Off the src values when self is excluded (see the module docs).
            x = X if include_self else X + 0.5
            cases = [
                ("scatter", 0, x, SRC, INDEX0),
                ("scatter", 1, x, SRC1, INDEX1),
            ]
            if reduce != "sum":
                cases += [
                    ("index", 0, x, SRC, IDX_ROWS),
                    ("index", 1, x, SRC1, IDX_COLS),
                ]
            for op, dim, xa, sa, ia in cases:
                xt = torch.tensor(xa, requires_grad=True)
                st = torch.tensor(sa, requires_grad=True)
                it = torch.tensor(ia)
                if op == "scatter":
                    out = xt.scatter_reduce(dim, it, st, reduce, include_self=include_self)
                else:
                    out = xt.index_reduce(dim, it, st, reduce, include_self=include_self)
                g = rng.standard_normal(out.shape)
                out.backward(torch.tensor(g))
                key = f"{op}/{reduce}/{int(include_self)}/{dim}"
                data[f"{key}/x"] = xa
                data[f"{key}/src"] = sa
                data[f"{key}/index"] = ia
                data[f"{key}/g"] = g
                data[f"{key}/out"] = out.detach().numpy().copy()
                data[f"{key}/gx"] = xt.grad.numpy().copy()
                data[f"{key}/gsrc"] = st.grad.numpy().copy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({len(data)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    main()
