"""Write PyTorch references for ``optim.Rprop`` and ``optim.ASGD`` to
``tests/fixtures/parity/optim_rprop_asgd.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_surface_misc.py`` reads it and runs in CI without
PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_surface_misc_references.py

Each case trains ``W`` (3x4) and ``b`` (3) on ``mean((tanh(x @ W.T + b) - y) ** 2)`` for
``STEPS`` steps from the same start; stored per case: the optimizer and its options as JSON
(``<case>/config``), the start, and both parameters and every state entry after every step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "optim_rprop_asgd.npz"

STEPS = 8
CASES = {
    "rprop_default": ("Rprop", {}),
    # A large lr overshoots: the gradient's sign flips, so the etaminus branch runs.
    "rprop_flip": ("Rprop", {"lr": 0.3, "etas": [0.4, 1.5], "step_sizes": [0.01, 0.5]}),
    "rprop_maximize": ("Rprop", {"lr": 0.05, "maximize": True, "foreach": False}),
    "asgd_default": ("ASGD", {}),
    # t0 = 2: averaging starts inside the run (mu != 1 from step 3 on).
    "asgd_average": ("ASGD", {"lr": 0.2, "lambd": 0.05, "alpha": 0.5, "t0": 2.0, "weight_decay": 0.1}),
    "asgd_maximize": ("ASGD", {"lr": 0.1, "t0": 1.0, "maximize": True, "foreach": True}),
}


def main() -> None:
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(20261129)
    x = rng.standard_normal((6, 4))
    y = rng.standard_normal((6, 3)) * 0.5
    w0 = rng.standard_normal((3, 4)) * 0.5
    b0 = rng.standard_normal(3) * 0.1
    data: dict[str, np.ndarray] = {
        "torch_version": np.array(torch.__version__),
        "x": x,
        "y": y,
        "w0": w0,
        "b0": b0,
        "steps": np.array(STEPS),
        "cases": np.array(list(CASES)),
    }
    for name, (kind, opts) in CASES.items():
        data[f"{name}/config"] = np.array(json.dumps([kind, opts], sort_keys=True))
        w = torch.tensor(w0, requires_grad=True)
        b = torch.tensor(b0, requires_grad=True)
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()}
        opt = getattr(torch.optim, kind)([w, b], **kw)
        for step in range(STEPS):
            opt.zero_grad()
            loss = ((torch.tanh(torch.tensor(x) @ w.T + b) - torch.tensor(y)) ** 2).mean()
            loss.backward()
            opt.step()
            for pname, p in (("w", w), ("b", b)):
                data[f"{name}/{pname}{step + 1}"] = p.detach().numpy().copy()
                for key, v in opt.state[p].items():
                    data[f"{name}/{pname}{step + 1}/{key}"] = v.detach().numpy().copy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({len(CASES)} cases, torch {torch.__version__})")


if __name__ == "__main__":
    main()
