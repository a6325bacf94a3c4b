"""Write the PyTorch-parity references in ``tests/fixtures/parity/`` with PyTorch.

The stored files were made with PyTorch 2.15 on CPU, in float64; each records the
version it was made with (``torch_version``). The tests that read them
(``test_nn.py::test_parity_with_torch`` and ``test_cross_entropy_parity_with_torch``,
``test_optim.py::test_matches_torch``, ``test_lr_scheduler.py::test_parity_with_torch``)
then run in CI without PyTorch. The cases themselves (module builders, optimizer
configurations, schedules) are imported from those test modules, so this script runs
in the project's test environment (ferrograd, pytest, numpy)::

    python scripts/make_parity_references.py [--torch-site DIR] [nn] [optim] [lr_scheduler]

with ``torch`` importable there, or found in ``DIR``: the ``site-packages`` directory
of another environment that has it (also read from the ``FG_TORCH_SITE`` environment
variable), which is appended to ``sys.path``. Without names it writes all three.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity"
sys.path.insert(0, str(ROOT / "tests"))


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def make_nn(torch) -> dict[str, np.ndarray]:
    """Per module of ``test_nn.PARITY_MODULES``: weights, input, outputs, cotangents,
    gradients and the state after the forward; then a cross-entropy case."""
    import test_nn

    rng = np.random.default_rng(1234)
    arrays: dict[str, np.ndarray] = {}
    for i, (name, (build, shape)) in enumerate(test_nn.PARITY_MODULES.items()):
        torch.manual_seed(i)
        m = build(torch.nn).double()
        for k, v in m.state_dict().items():
            arrays[f"{name}/init/{k}"] = _np(v)
        xa = rng.standard_normal(shape)
        x = torch.tensor(xa, requires_grad=True)
        outs = test_nn.parity_outputs(name, m, x)
        arrays[f"{name}/x"] = xa
        arrays[f"{name}/n_out"] = np.array(len(outs))
        loss = 0
        for k, o in enumerate(outs):
            cot = rng.standard_normal(tuple(o.shape))
            arrays[f"{name}/out/{k}"] = _np(o)
            arrays[f"{name}/cot/{k}"] = cot
            loss = loss + (o * torch.tensor(cot)).sum()
        loss.backward()
        arrays[f"{name}/grad/input"] = _np(x.grad)
        for pname, p in m.named_parameters():
            arrays[f"{name}/grad/{pname}"] = _np(p.grad)
        for k, v in m.state_dict().items():
            arrays[f"{name}/after/{k}"] = _np(v)
    logits = rng.standard_normal((6, 5))
    target = np.array([0, 4, 2, -100, 1, 1])
    weight = rng.uniform(0.5, 2, 5)
    lt = torch.tensor(logits, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(
        lt, torch.tensor(target), weight=torch.tensor(weight), label_smoothing=0.1
    )
    loss.backward()
    arrays |= {"ce/logits": logits, "ce/target": target, "ce/weight": weight}
    arrays |= {"ce/loss": _np(loss), "ce/grad": _np(lt.grad)}
    return arrays


def make_optim(torch) -> dict[str, np.ndarray]:
    """Per configuration of ``test_optim.CONFIGS``: the start, every step's gradients and
    every step's parameters under torch.optim."""
    import test_optim as T

    classes = {
        "sgd": torch.optim.SGD,
        "adam": torch.optim.Adam,
        "adamw": torch.optim.AdamW,
        "rmsprop": torch.optim.RMSprop,
    }
    arrays: dict[str, np.ndarray] = {}
    for i, cfg in enumerate(T.CONFIGS):
        kind, kw = cfg
        rng = np.random.default_rng(T.PARITY_SEED)
        init = [rng.normal(size=s) for s in T.PARITY_SHAPES]
        theirs = [torch.tensor(a, requires_grad=True) for a in init]
        opt = classes[kind](theirs, **kw)
        arrays[f"{i}/config"] = np.array(T.parity_config_json(cfg))
        for j, a in enumerate(init):
            arrays[f"{i}/init/{j}"] = a
        for step in range(T.PARITY_STEPS):
            for j, (t, s) in enumerate(zip(theirs, T.PARITY_SHAPES, strict=True)):
                g = rng.normal(size=s)
                arrays[f"{i}/grad/{step}/{j}"] = g
                t.grad = torch.tensor(g)
            opt.step()
            for j, t in enumerate(theirs):
                arrays[f"{i}/param/{step}/{j}"] = _np(t)
    return arrays


def make_lr_scheduler(torch) -> dict:
    """Per schedule of ``test_lr_scheduler.PARITY`` and optimizer kind: the lrs and
    momenta (SGD) or betas (Adam) at epochs 0..N_STEPS; ReduceLROnPlateau's lrs."""
    import test_lr_scheduler as T

    M = torch.optim.lr_scheduler
    out: dict = {"n_steps": T.N_STEPS, "base_lrs": list(T.BASE_LRS)}
    for kind in ("sgd", "adam"):
        tcls = torch.optim.SGD if kind == "sgd" else torch.optim.Adam
        key = "momentum" if kind == "sgd" else "betas"
        runs = {}
        for name, build in T.PARITY.items():
            groups = [{"params": [torch.zeros(3, requires_grad=True)], "lr": lr} for lr in T.BASE_LRS]
            opt = tcls(groups, **T.parity_optimizer_args(kind))
            sched = build(opt, M)
            lrs, moms = [], []
            for e in range(T.N_STEPS + 1):
                if e:
                    opt.step()
                    sched.step()
                lrs.append([float(g["lr"]) for g in opt.param_groups])
                moms.append([list(g[key]) if key == "betas" else float(g[key]) for g in opt.param_groups])
            runs[name] = {"lr": lrs, key: moms}
        out[kind] = runs
    opt = torch.optim.SGD([torch.zeros(3, requires_grad=True)], lr=0.1)
    sched = M.ReduceLROnPlateau(opt, patience=1, cooldown=1, factor=0.5)
    plateau = []
    for m in T.PLATEAU_METRICS:
        sched.step(m)
        plateau.append(float(sched.get_last_lr()[0]))
    out["plateau"] = plateau
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", choices=["nn", "optim", "lr_scheduler", []], default=[])
    ap.add_argument(
        "--torch-site",
        default=os.environ.get("FG_TORCH_SITE"),
        help="a site-packages directory holding torch, appended to sys.path (env FG_TORCH_SITE)",
    )
    args = ap.parse_args()
    if args.torch_site:
        sys.path.append(args.torch_site)
    import torch

    torch.set_default_dtype(torch.float64)
    names = args.names or ["nn", "optim", "lr_scheduler"]
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        if name == "lr_scheduler":
            data = make_lr_scheduler(torch) | {"torch_version": torch.__version__}
            path = OUT / "lr_scheduler.json"
            path.write_text(json.dumps(data, sort_keys=True) + "\n")
        else:
            arrays = (make_nn if name == "nn" else make_optim)(torch)
            arrays["torch_version"] = np.array(torch.__version__)
            path = OUT / f"{name}.npz"
            np.savez_compressed(path, **arrays)
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes, torch {torch.__version__}")


if __name__ == "__main__":
    main()
