"""Write PyTorch references for the ``torch.func`` transforms and ``torch.vmap`` to
``tests/fixtures/parity/func_transforms.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_func_transforms.py`` runs the same cases in
ferrograd and compares both the values and the structure of each result (tuples, lists and
dicts, written as a string by :func:`structure`); the cases are written once, in
:func:`cases`, for either library. This script needs only ``torch`` and ``numpy`` (imported
in :func:`main`, so the test can load :func:`cases` without PyTorch)::

    python scripts/make_func_references.py

Stored per case: ``<case>/structure`` and ``<case>/<k>`` for the k-th leaf in that
structure's order; the inputs are ``inputs/<name>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "func_transforms.npz"


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261129)
    return {
        "x": rng.standard_normal(4),
        "y": rng.standard_normal(4),
        "w": rng.standard_normal((3, 4)),
        "a": rng.standard_normal((4, 5)),
        "b": rng.standard_normal((5, 4)),
        "xb": rng.standard_normal((6, 4)),
        "yb": rng.integers(0, 3, 6),
        "w1": rng.standard_normal((5, 4)) * 0.5,
        "b1": rng.standard_normal(5) * 0.1,
        "w2": rng.standard_normal((3, 5)) * 0.5,
        "b2": rng.standard_normal(3) * 0.1,
    }


def structure(x: Any) -> str:
    """A string naming the tuples, lists and dicts in ``x``; ``T`` for a leaf."""
    if isinstance(x, dict):
        return "{" + ",".join(f"{k}:{structure(v)}" for k, v in x.items()) + "}"
    if isinstance(x, tuple):
        return "(" + ",".join(structure(v) for v in x) + ")"
    if isinstance(x, list):
        return "[" + ",".join(structure(v) for v in x) + "]"
    return "T"


def leaves(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [t for v in x.values() for t in leaves(v)]
    if isinstance(x, tuple | list):
        return [t for v in x for t in leaves(v)]
    return [x]


def cases(t: Any, fn: Any, nn_f: Any, vmap: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Each case's result, for ``t`` torch or ferrograd (``fn`` its ``func`` module,
    ``nn_f`` its ``nn.functional``); ``data`` holds the inputs as float64 tensors."""
    x, y, w, a, b = data["x"], data["y"], data["w"], data["a"], data["b"]
    out = {}
    out["jacrev_dict_tuple"] = fn.jacrev(lambda x, y: {"p": x * y, "s": (x.exp() * y).sum()}, argnums=(0, 1))(
        x, y
    )
    out["hessian_pair"] = fn.hessian(lambda x, y: (x * x * y).sum() + (x * y).sin().sum(), argnums=(0, 1))(
        x, y
    )
    out["grad_and_value_aux"] = fn.grad_and_value(
        lambda p, x: ((p["w"] @ x).tanh().sum(), {"h": p["w"] @ x}), has_aux=True
    )({"w": w}, x)
    o, vjp_fn = fn.vjp(lambda p: (p[0] * p[1], p[0].sum()), (x, y))
    out["vjp"] = (o, vjp_fn((y, x.sum())))
    out["jvp"] = fn.jvp(lambda x: {"a": x.sin(), "b": x * x}, (x,), (y,))
    out["vmap_dims"] = vmap(
        lambda u, v: {"m": u * v, "s": (u.sum(), v)}, in_dims=(1, 0), out_dims={"m": 1, "s": (0, -1)}
    )(a, b)
    params = {"0.weight": data["w1"], "0.bias": data["b1"], "2.weight": data["w2"], "2.bias": data["b2"]}

    def loss(p: dict[str, Any], xi: Any, yi: Any) -> Any:
        h = nn_f.linear(xi.unsqueeze(0), p["0.weight"], p["0.bias"]).tanh()
        return nn_f.cross_entropy(nn_f.linear(h, p["2.weight"], p["2.bias"]), yi.unsqueeze(0))

    out["per_sample_grads"] = vmap(fn.grad(loss), in_dims=(None, 0, 0))(params, data["xb"], data["yb"])
    out["batched_jacobian"] = vmap(fn.jacrev(lambda x: (w @ x).tanh()))(data["xb"])
    return out


def main() -> None:
    import torch
    from torch import func

    raw = inputs()
    data = {k: torch.tensor(v) for k, v in raw.items()}
    stored: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    stored.update({f"inputs/{k}": v for k, v in raw.items()})
    for name, result in cases(torch, func, torch.nn.functional, torch.vmap, data).items():
        stored[f"{name}/structure"] = np.array(structure(result))
        for k, leaf in enumerate(leaves(result)):
            stored[f"{name}/{k}"] = leaf.detach().numpy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, **stored)
    print(f"wrote {OUT.relative_to(ROOT)} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
