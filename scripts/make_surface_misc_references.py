"""Write PyTorch references for ``optim.Rprop``, ``optim.ASGD`` and ``optim.Adafactor`` to
``tests/fixtures/parity/optim_rprop_asgd.npz``, and ``repr`` strings of tensors under
``torch.set_printoptions`` to ``tests/fixtures/parity/print_options.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_surface_misc.py`` reads it and runs in CI without
PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_surface_misc_references.py

Each case trains ``W`` (3x4) and ``b`` (3) on ``mean((tanh(x @ W.T + b) - y) ** 2)`` for
``STEPS`` steps from the same start; stored per case: the optimizer and its options as JSON
(``<case>/config``), the start, and both parameters and every state entry after every step.

The print references: each value (``val/<name>``) printed under each set of options
(``options``, JSON) as ``repr/<i>/<name>``, with ``torch`` in the dtype names.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "optim_rprop_asgd.npz"
OUT_PRINT = ROOT / "tests" / "fixtures" / "parity" / "print_options.npz"

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
    "adafactor_default": ("Adafactor", {}),
    # lr above 1/sqrt(t) from step 2 on; d = 1 clips the update.
    "adafactor_options": (
        "Adafactor",
        {"lr": 0.5, "beta2_decay": -0.5, "eps": [1e-6, 0.01], "weight_decay": 0.1, "maximize": True},
    ),
    "adafactor_clip": ("Adafactor", {"lr": 0.05, "d": 1.0, "eps": [None, 0.5]}),
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


def print_values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261129)
    return {
        "small": rng.standard_normal(5).astype(np.float32),
        "long": (rng.standard_normal(40) * 10).astype(np.float32),
        "mat": rng.standard_normal((4, 6)).astype(np.float32),
        "big": rng.standard_normal((30, 50)).astype(np.float32),
        "tiny": (rng.standard_normal(4) * 1e-6).astype(np.float32),
        "ints": np.arange(1500, dtype=np.int64),
        "ratio": np.array([1.0, 2000.0, 3.0], np.float32),
        "ratio_frac": np.array([0.01, 20.5, -3.25], np.float32),
        "huge": np.array([1e9, -2.5, 0.0], np.float32),
        "nonfinite": np.array([np.nan, -np.inf, 1.5, 2.25], np.float32),
        "nonfinite_only": np.array([np.inf, -np.inf, np.nan], np.float32),
        "zeros_neg": np.array([[0.0, -0.5], [0.0, 0.0]], np.float32),
        "cube": rng.standard_normal((3, 4, 5)).astype(np.float32),
        "wide": rng.standard_normal((3, 9)).astype(np.float32) * 100,
        "f64": rng.standard_normal((2, 3)),
    }


# Options, each with the values printed under it ("*" for all). A summarised row that also
# wraps (a narrow linewidth) is left out: ferrograd may break it at another element.
PRINT_OPTIONS = [
    ({}, "*"),
    ({"precision": 2}, "*"),
    ({"threshold": 10, "edgeitems": 2}, "*"),
    ({"linewidth": 40}, ["small", "long", "mat", "cube", "wide", "f64", "nonfinite"]),
    ({"linewidth": 60, "precision": 6}, ["long", "mat", "cube", "wide", "f64"]),
    ({"profile": "short"}, "*"),
    ({"profile": "full", "linewidth": 120}, ["small", "long", "mat", "cube", "wide", "f64", "ints"]),
    ({"sci_mode": True, "precision": 3}, "*"),
    ({"sci_mode": False}, "*"),
]


def print_main() -> None:
    torch.set_default_dtype(torch.float32)
    vals = print_values()
    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    data["options"] = np.array(json.dumps(PRINT_OPTIONS))
    for name, v in vals.items():
        data[f"val/{name}"] = v
    for i, (opts, names) in enumerate(PRINT_OPTIONS):
        torch.set_printoptions(profile="default")
        torch.set_printoptions(**opts)
        for name in vals if names == "*" else names:
            data[f"repr/{i}/{name}"] = np.array(repr(torch.tensor(vals[name])))
    torch.set_printoptions(profile="default")
    np.savez_compressed(OUT_PRINT, **data)
    print(f"wrote {OUT_PRINT} ({len(PRINT_OPTIONS)} option sets, torch {torch.__version__})")


if __name__ == "__main__":
    main()
    print_main()
