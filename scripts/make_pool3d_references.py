"""Write PyTorch references for the 3-D pooling and max-unpooling modules to
``tests/fixtures/parity/pool3d.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_pool3d.py`` reads it and runs in CI without
PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_pool3d_references.py

Each case builds one module from its JSON constructor arguments (``<case>/module``,
``<case>/kwargs``) and stores the module's ``repr`` (``<case>/repr``), the input
(``<case>/input``), the outputs (``<case>/out0``, and ``<case>/out1`` for indices), a cotangent
for the first output and the gradient of ``<out0, cotangent>`` with respect to the input. An
unpooling case first max-pools the input with ``<case>/pool_kwargs`` and unpools the pooled
values (its gradient is with respect to the pooled values, stored as ``<case>/pooled``), with
``<case>/output_size`` when given.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "pool3d.npz"

nn = torch.nn
F = torch.nn.functional

# (case, module, constructor kwargs, input shape)
CASES: list[tuple[str, str, dict, tuple[int, ...]]] = [
    ("max_k2", "MaxPool3d", {"kernel_size": 2}, (2, 3, 6, 7, 8)),
    ("max_k3s2p1", "MaxPool3d", {"kernel_size": 3, "stride": 2, "padding": 1}, (2, 2, 7, 9, 8)),
    (
        "max_ceil_dil_idx",
        "MaxPool3d",
        {
            "kernel_size": [3, 2, 3],
            "stride": [2, 1, 2],
            "padding": [1, 0, 1],
            "dilation": [2, 1, 2],
            "ceil_mode": True,
            "return_indices": True,
        },
        (2, 3, 8, 6, 9),
    ),
    ("max_unbatched_ceil", "MaxPool3d", {"kernel_size": 3, "stride": 2, "ceil_mode": True}, (3, 6, 8, 7)),
    ("avg_k2", "AvgPool3d", {"kernel_size": 2}, (2, 3, 6, 7, 8)),
    (
        "avg_ceil_nopad",
        "AvgPool3d",
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (2, 2, 8, 7, 6),
    ),
    (
        "avg_ceil_pad",
        "AvgPool3d",
        {"kernel_size": [2, 3, 3], "stride": [2, 2, 3], "padding": [1, 1, 0], "ceil_mode": True},
        (1, 2, 7, 8, 10),
    ),
    (
        "avg_divisor",
        "AvgPool3d",
        {"kernel_size": 3, "stride": 2, "padding": 1, "divisor_override": 7},
        (2, 2, 6, 6, 6),
    ),
    ("avg_unbatched", "AvgPool3d", {"kernel_size": [1, 2, 2]}, (3, 4, 6, 6)),
    ("aavg_div", "AdaptiveAvgPool3d", {"output_size": 2}, (2, 3, 6, 8, 4)),
    ("aavg_uneven", "AdaptiveAvgPool3d", {"output_size": [3, None, 5]}, (2, 2, 7, 5, 9)),
    ("aavg_unbatched", "AdaptiveAvgPool3d", {"output_size": [1, 2, 3]}, (3, 5, 6, 7)),
    ("amax_div_idx", "AdaptiveMaxPool3d", {"output_size": 2, "return_indices": True}, (2, 3, 6, 8, 4)),
    (
        "amax_uneven_idx",
        "AdaptiveMaxPool3d",
        {"output_size": [3, 4, 5], "return_indices": True},
        (2, 2, 7, 5, 9),
    ),
    ("amax_unbatched", "AdaptiveMaxPool3d", {"output_size": [2, None, 3]}, (3, 5, 6, 7)),
]

# (case, module, constructor kwargs, input shape, pool kwargs, output_size or None)
UNPOOL: list[tuple[str, str, dict, tuple[int, ...], dict, list[int] | None]] = [
    ("unpool1d", "MaxUnpool1d", {"kernel_size": 2}, (2, 3, 9), {"kernel_size": 2}, [9]),
    (
        "unpool2d",
        "MaxUnpool2d",
        {"kernel_size": 3, "stride": 3, "padding": 1},
        (2, 2, 7, 7),
        {"kernel_size": 3, "stride": 3, "padding": 1},
        None,
    ),
    ("unpool3d", "MaxUnpool3d", {"kernel_size": 2}, (2, 2, 4, 6, 8), {"kernel_size": 2}, None),
    (
        "unpool3d_size",
        "MaxUnpool3d",
        {"kernel_size": 2, "stride": 2},
        (2, 2, 5, 7, 6),
        {"kernel_size": 2, "stride": 2},
        [2, 2, 5, 7, 6],
    ),
    (
        "unpool3d_unbatched",
        "MaxUnpool3d",
        {"kernel_size": [1, 2, 2]},
        (3, 2, 4, 6),
        {"kernel_size": [1, 2, 2]},
        None,
    ),
]


def main() -> None:
    rng = np.random.default_rng(20261128)
    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    for name, module, kwargs, shape in CASES:
        m = getattr(nn, module)(**kwargs)
        x = torch.tensor(rng.standard_normal(shape), requires_grad=True)
        out = m(x)
        outs = out if isinstance(out, tuple) else (out,)
        ct = torch.tensor(rng.standard_normal(tuple(outs[0].shape)))
        (outs[0] * ct).sum().backward()
        data[f"{name}/module"] = np.array(module)
        data[f"{name}/kwargs"] = np.array(json.dumps(kwargs))
        data[f"{name}/repr"] = np.array(repr(m))
        data[f"{name}/input"] = x.detach().numpy()
        for i, o in enumerate(outs):
            data[f"{name}/out{i}"] = o.detach().numpy()
        data[f"{name}/cotangent"] = ct.numpy()
        data[f"{name}/grad"] = x.grad.numpy()
    for name, module, kwargs, shape, pool_kwargs, output_size in UNPOOL:
        nd = int(module[-2])
        pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
        x = torch.tensor(rng.standard_normal(shape))
        pooled, idx = pool(x, return_indices=True, **pool_kwargs)
        pooled.requires_grad_(True)
        m = getattr(nn, module)(**kwargs)
        out = m(pooled, idx, output_size=output_size)
        ct = torch.tensor(rng.standard_normal(tuple(out.shape)))
        (out * ct).sum().backward()
        data[f"{name}/module"] = np.array(module)
        data[f"{name}/kwargs"] = np.array(json.dumps(kwargs))
        data[f"{name}/repr"] = np.array(repr(m))
        data[f"{name}/pool_kwargs"] = np.array(json.dumps(pool_kwargs))
        data[f"{name}/output_size"] = np.array(json.dumps(output_size))
        data[f"{name}/input"] = x.numpy()
        data[f"{name}/pooled"] = pooled.detach().numpy()
        data[f"{name}/indices"] = idx.numpy()
        data[f"{name}/out0"] = out.detach().numpy()
        data[f"{name}/cotangent"] = ct.numpy()
        data[f"{name}/grad"] = pooled.grad.numpy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({len(CASES) + len(UNPOOL)} cases, torch {torch.__version__})")


if __name__ == "__main__":
    main()
