"""Write PyTorch references for ``ferrograd.special`` edge values to
``tests/fixtures/parity/special.npz``.

SciPy is the reference for values over wide ranges (``tests/test_special_namespace.py``
computes it in the test); this file holds what PyTorch gives at the points where its
conventions are its own: ``logit`` with ``eps`` (the clamp, and its gradient, which is 0
outside ``[eps, 1 - eps]``), ``entr``/``xlog1py``/``xlogy`` at 0, ±inf and NaN, ``ndtri`` outside
[0, 1], ``log_ndtr``/``erfcx`` far in the tails, ``special.round`` with ``decimals``,
``multigammaln`` and ``softmax``/``log_softmax`` with ``dtype``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). The test reads it and runs in CI without PyTorch. This script
needs only ``torch`` and ``numpy``::

    python scripts/make_special_references.py

Each case stores ``<case>/x`` (and ``<case>/y`` for a second argument), ``<case>/out`` and,
where a gradient is checked, ``<case>/grad`` (of ``out.sum()`` with respect to ``x``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "special.npz"

INF, NAN = float("inf"), float("nan")
SP = torch.special

# (case, function of (x) or (x, y), x, y or None, store the gradient)
CASES = [
    (
        "logit_eps",
        lambda x: SP.logit(x, eps=0.1),
        [0.0, 0.05, 0.1, 0.3, 0.5, 0.9, 0.95, 1.0, -0.5, 1.5, NAN],
        None,
        True,
    ),
    ("logit_eps_small", lambda x: SP.logit(x, eps=1e-6), [0.0, 1e-9, 0.3, 1.0, -0.5, 1.5], None, False),
    (
        "logit",
        lambda x: torch.logit(x),
        [0.0, 1e-300, 0.25, 0.5, 0.75, 1 - 2**-53, 1.0, -0.5, 1.5, NAN],
        None,
        False,
    ),
    ("entr", SP.entr, [-INF, -1.0, -1e-300, 0.0, 1e-300, 0.5, 1.0, 3.0, INF, NAN], None, False),
    (
        "xlog1py",
        SP.xlog1py,
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, -1.0],
        [-1.0, -2.0, INF, NAN, 3.0, -1.0, 0.5, INF],
        False,
    ),
    ("xlogy", SP.xlogy, [0.0, 0.0, 0.0, 0.0, 1.0, 2.0], [0.0, -1.0, INF, NAN, 0.0, 3.0], False),
    (
        "ndtri",
        SP.ndtri,
        [-0.1, 0.0, 1e-300, 1e-20, 0.025, 0.5, 0.975, 1 - 2**-53, 1.0, 1.1, NAN],
        None,
        False,
    ),
    ("log_ndtr", SP.log_ndtr, [-INF, -1e5, -200.0, -40.0, -5.0, -1.0, 0.0, 5.0, 40.0, INF, NAN], None, False),
    ("erfcx", SP.erfcx, [-INF, -30.0, -1.0, 0.0, 1.0, 30.0, 1e5, 1e300, INF, NAN], None, False),
    ("ndtr", SP.ndtr, [-INF, -40.0, -3.0, 0.0, 3.0, 40.0, INF, NAN], None, False),
    ("i0e", SP.i0e, [-INF, -700.0, -1.0, 0.0, 1.0, 25.0, 700.0, INF, NAN], None, False),
    ("i1e", SP.i1e, [-INF, -700.0, -1.0, 0.0, 1.0, 25.0, 700.0, INF, NAN], None, False),
    ("round2", lambda x: SP.round(x, decimals=2), [1.2345, -2.5, 1250.0, 0.125, 0.135, -0.005], None, False),
    ("round_m2", lambda x: SP.round(x, decimals=-2), [1250.0, 1350.0, -150.0, 49.0], None, False),
    ("multigammaln3", lambda x: SP.multigammaln(x, 3), [1.0001, 2.5, 3.0, 10.0, 100.0], None, True),
    (
        "softmax_f32",
        lambda x: SP.softmax(x.reshape(2, 3), 1, dtype=torch.float32).double(),
        [1.0, 2, 3, -1, 0, 5],
        None,
        False,
    ),
    ("log_softmax_0", lambda x: SP.log_softmax(x.reshape(2, 3), 0), [1.0, 2, 3, -1, 0, 5], None, False),
]


def main() -> None:
    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    for name, fn, xs, ys, grad in CASES:
        x = torch.tensor(xs, dtype=torch.float64, requires_grad=grad)
        args = [x] if ys is None else [x, torch.tensor(ys, dtype=torch.float64)]
        out = fn(*args)
        data[f"{name}/x"] = np.array(xs, dtype=np.float64)
        if ys is not None:
            data[f"{name}/y"] = np.array(ys, dtype=np.float64)
        data[f"{name}/out"] = out.detach().numpy().reshape(-1)
        if grad:
            (g,) = torch.autograd.grad(out.sum(), x)
            data[f"{name}/grad"] = g.numpy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, **data)
    print(f"wrote {OUT} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
