"""Write PyTorch references for ``optim.SparseAdam`` with ``nn.Embedding(sparse=True)`` to
``tests/fixtures/parity/sparse_adam.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_sparse_adam.py`` reads it and runs in CI without
PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_sparse_adam_references.py

Each case trains ``Embedding(20, 4, sparse=True) -> Linear(4, 3)`` (the embedding with
SparseAdam, the linear layer with Adam) on a squared-error loss for several steps, each step
looking up a batch of indices that leaves some rows untouched; ``accumulate`` cases run two
lookups and backward passes per step before the update. Stored per case: the options as
JSON (``<case>/options``), the initial weights, the indices and targets of every step, and the
embedding table, its two moments and the linear weight after every step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "sparse_adam.npz"

STEPS = 5
CASES = {
    "default": {"opt": {}, "padding_idx": None, "accumulate": False},
    "lr_betas_eps": {
        "opt": {"lr": 0.05, "betas": [0.8, 0.99], "eps": 1e-6},
        "padding_idx": None,
        "accumulate": False,
    },
    "padding_maximize": {"opt": {"lr": 0.01, "maximize": True}, "padding_idx": 0, "accumulate": False},
    "accumulate": {"opt": {"lr": 0.02}, "padding_idx": None, "accumulate": True},
}


def main() -> None:
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(20261128)
    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    for name, case in CASES.items():
        emb = torch.nn.Embedding(20, 4, sparse=True, padding_idx=case["padding_idx"])
        lin = torch.nn.Linear(4, 3)
        with torch.no_grad():
            emb.weight.copy_(torch.tensor(rng.standard_normal((20, 4))))
            if case["padding_idx"] is not None:
                emb.weight[case["padding_idx"]] = 0.0
            lin.weight.copy_(torch.tensor(rng.standard_normal((3, 4)) * 0.5))
            lin.bias.copy_(torch.tensor(rng.standard_normal(3) * 0.1))
        data[f"{name}/options"] = np.array(json.dumps(case))
        data[f"{name}/emb0"] = emb.weight.detach().numpy().copy()
        data[f"{name}/lin_w0"] = lin.weight.detach().numpy().copy()
        data[f"{name}/lin_b0"] = lin.bias.detach().numpy().copy()
        sopt = torch.optim.SparseAdam(list(emb.parameters()), **case["opt"])
        dopt = torch.optim.Adam(lin.parameters(), lr=0.01)
        passes = 2 if case["accumulate"] else 1
        for step in range(STEPS):
            sopt.zero_grad()
            dopt.zero_grad()
            for k in range(passes):
                # Indices from the first 12 rows only (rows 12.. never move), with repeats.
                idx = rng.integers(0, 12, size=(3, 4))
                tgt = rng.standard_normal((3, 4, 3))
                data[f"{name}/idx{step}_{k}"] = idx
                data[f"{name}/tgt{step}_{k}"] = tgt
                out = lin(emb(torch.tensor(idx)))
                ((out - torch.tensor(tgt)) ** 2).mean().backward()
            sopt.step()
            dopt.step()
            st = sopt.state[emb.weight]
            data[f"{name}/emb{step + 1}"] = emb.weight.detach().numpy().copy()
            data[f"{name}/exp_avg{step + 1}"] = st["exp_avg"].numpy().copy()
            data[f"{name}/exp_avg_sq{step + 1}"] = st["exp_avg_sq"].numpy().copy()
            data[f"{name}/lin_w{step + 1}"] = lin.weight.detach().numpy().copy()
    data["steps"] = np.array(STEPS)
    data["cases"] = np.array(list(CASES))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({len(CASES)} cases, torch {torch.__version__})")


if __name__ == "__main__":
    main()
