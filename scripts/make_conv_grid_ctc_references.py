"""Write PyTorch references for the transposed/3-D convolutions, ``affine_grid``,
``grid_sample`` and ``ctc_loss`` to ``tests/fixtures/parity/conv_grid_ctc.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version
it was made with (``torch_version``). ``tests/test_nn_conv_grid_ctc.py`` reads it and
runs in CI without PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_conv_grid_ctc_references.py

Each case stores its inputs (``<case>/in/<name>``), keyword arguments as JSON
(``<case>/kwargs``), a cotangent, the output and the gradient of ``<output, cotangent>``
with respect to every float input. ``ctc_loss`` takes ``log_softmax`` of stored logits,
so its gradients are those of the logits (PyTorch's own CTC backward returns a gradient
for ``log_probs`` that is only correct after a ``log_softmax``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "conv_grid_ctc.npz"

F = torch.nn.functional


def _cases(rng: np.random.Generator) -> list[tuple[str, str, dict, dict]]:
    """(case name, function name, float inputs, kwargs)."""
    r = rng.standard_normal
    cases = [
        (
            "ct2d_s2_g2",
            "conv_transpose2d",
            {"input": r((2, 4, 5, 5)), "weight": r((4, 3, 3, 3)), "bias": r(6)},
            {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
        ),
        (
            "ct2d_dil",
            "conv_transpose2d",
            {"input": r((1, 2, 3, 4)), "weight": r((2, 3, 2, 3))},
            {"stride": [1, 3], "padding": [2, 0], "output_padding": [0, 2], "dilation": 2},
        ),
        (
            "ct2d_unbatched",
            "conv_transpose2d",
            {"input": r((3, 4, 4)), "weight": r((3, 2, 4, 4)), "bias": r(2)},
            {"stride": 2, "padding": 1},
        ),
        (
            "ct1d",
            "conv_transpose1d",
            {"input": r((2, 3, 6)), "weight": r((3, 2, 3)), "bias": r(2)},
            {"stride": 3, "padding": 1, "output_padding": 2, "dilation": 2},
        ),
        (
            "conv3d",
            "conv3d",
            {"input": r((2, 4, 5, 6, 5)), "weight": r((6, 2, 3, 2, 3)), "bias": r(6)},
            {"stride": [2, 1, 2], "padding": 1, "dilation": [1, 2, 1], "groups": 2},
        ),
        (
            "ct3d",
            "conv_transpose3d",
            {"input": r((1, 2, 3, 2, 3)), "weight": r((2, 2, 2, 3, 2)), "bias": r(2)},
            {"stride": 2, "padding": [0, 1, 1], "output_padding": [1, 0, 1], "groups": 1},
        ),
    ]
    for align in (False, True):
        cases.append(
            (
                f"affine_grid_{int(align)}",
                "affine_grid",
                {"theta": r((2, 2, 3))},
                {"size": [2, 3, 4, 5], "align_corners": align},
            )
        )
        cases.append(
            (
                f"affine_grid3d_{int(align)}",
                "affine_grid",
                {"theta": r((1, 3, 4))},
                {"size": [1, 2, 3, 4, 2], "align_corners": align},
            )
        )
        for mode in ("bilinear", "nearest"):
            for pm in ("zeros", "border", "reflection"):
                grid = rng.uniform(-1.5, 1.5, (2, 3, 4, 2))
                cases.append(
                    (
                        f"grid_sample_{mode}_{pm}_{int(align)}",
                        "grid_sample",
                        {"input": r((2, 3, 4, 5)), "grid": grid},
                        {"mode": mode, "padding_mode": pm, "align_corners": align},
                    )
                )
    targets = rng.integers(1, 5, size=(3, 4))
    targets[0, 1] = targets[0, 0]
    for red in ("mean", "sum", "none"):
        cases.append(
            (
                f"ctc_{red}",
                "ctc_loss",
                {"logits": r((8, 3, 5))},
                {
                    "targets": targets.tolist(),
                    "input_lengths": [8, 6, 7],
                    "target_lengths": [4, 2, 3],
                    "blank": 0,
                    "reduction": red,
                    "zero_infinity": False,
                },
            )
        )
    flat = np.concatenate([targets[0, :4], targets[1, :2], targets[2, :3]])
    cases.append(
        (
            "ctc_concat",
            "ctc_loss",
            {"logits": r((8, 3, 5))},
            {
                "targets": flat.tolist(),
                "input_lengths": [8, 6, 7],
                "target_lengths": [4, 2, 3],
                "blank": 0,
                "reduction": "none",
                "zero_infinity": False,
            },
        )
    )
    cases.append(
        (
            "ctc_zero_inf",
            "ctc_loss",
            {"logits": r((6, 3, 5))},
            {
                "targets": (targets % 4).tolist(),
                "input_lengths": [2, 6, 5],
                "target_lengths": [4, 2, 3],
                "blank": 4,
                "reduction": "mean",
                "zero_infinity": True,
            },
        )
    )
    return cases


def _run(name: str, tensors: dict, kwargs: dict):
    if name == "ctc_loss":
        kw = dict(kwargs)
        tg = torch.tensor(kw.pop("targets"))
        return F.ctc_loss(F.log_softmax(tensors["logits"], 2), tg, **kw)
    if name == "affine_grid":
        return F.affine_grid(tensors["theta"], **kwargs)
    if name == "grid_sample":
        return F.grid_sample(tensors["input"], tensors["grid"], **kwargs)
    return getattr(F, name)(*tensors.values(), **kwargs)


def main() -> None:
    rng = np.random.default_rng(2026)
    arrays: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    names = []
    for case, fn, inputs, kwargs in _cases(rng):
        tensors = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in inputs.items()}
        out = _run(fn, tensors, kwargs)
        cot = rng.standard_normal(tuple(out.shape))
        (out * torch.tensor(cot)).sum().backward()
        names.append(case)
        arrays[f"{case}/fn"] = np.array(fn)
        arrays[f"{case}/kwargs"] = np.array(json.dumps(kwargs))
        arrays[f"{case}/out"] = out.detach().numpy()
        arrays[f"{case}/cot"] = cot
        for k, v in inputs.items():
            arrays[f"{case}/in/{k}"] = v
            arrays[f"{case}/grad/{k}"] = tensors[k].grad.numpy()
    arrays["cases"] = np.array(names)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({len(names)} cases, torch {torch.__version__})")


if __name__ == "__main__":
    main()
