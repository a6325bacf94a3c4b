"""Write PyTorch's autocast behaviour to ``tests/fixtures/parity/autocast.npz``.

``tests/test_autocast.py`` reads the file (in CI, without PyTorch). It records the PyTorch
version it was made with (``torch_version``) and

* ``dtypes``: the result dtype of each op in :data:`OPS` on float32 inputs inside
  ``autocast("cpu", dtype)`` for bfloat16 and float16 (and on float64 inputs for bfloat16),
  and of each module in :data:`MODULES` (float32 parameters and inputs, bfloat16 regions);
* a short training run of :func:`train` (a small conv net: forward and loss inside
  ``autocast("cpu", bfloat16)``, ``backward`` and SGD outside) from NumPy-drawn weights: its
  losses, the output dtype, the first step's gradients and the final weights.

The same :func:`train` runs under ferrograd in the test, so both engines run one source::

    python scripts/make_autocast_references.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "autocast.npz"

# name -> f(torch, a, b) on float32 (4, 4) tensors a, b.
OPS: dict[str, Any] = {
    "matmul": lambda t, a, b: a @ b,
    "mm": lambda t, a, b: t.mm(a, b),
    "bmm": lambda t, a, b: t.bmm(a[None], b[None]),
    "linear": lambda t, a, b: t.nn.functional.linear(a, b, b[0]),
    "conv1d": lambda t, a, b: t.nn.functional.conv1d(a[None], b[:, :, None]),
    "conv2d": lambda t, a, b: t.nn.functional.conv2d(a[None, None], b[None, None, :2, :2]),
    "addmm": lambda t, a, b: t.addmm(a, a, b),
    "baddbmm": lambda t, a, b: t.baddbmm(a[None], a[None], b[None]),
    "prelu": lambda t, a, b: t.nn.functional.prelu(a, b[0, :1]),
    "sdpa": lambda t, a, b: t.nn.functional.scaled_dot_product_attention(a[None], b[None], a[None]),
    "add": lambda t, a, b: a + b,
    "mul_scalar": lambda t, a, b: a * 2.0,
    "exp": lambda t, a, b: a.exp(),
    "sum": lambda t, a, b: a.sum(),
    "softmax": lambda t, a, b: t.softmax(a, -1),
    "layer_norm": lambda t, a, b: t.nn.functional.layer_norm(a, (4,)),
    "relu": lambda t, a, b: t.relu(a),
    "cross_entropy": lambda t, a, b: t.nn.functional.cross_entropy(a, t.tensor([0, 1, 2, 3])),
    "nll_loss": lambda t, a, b: t.nn.functional.nll_loss(a, t.tensor([0, 1, 2, 3])),
    "mse_loss": lambda t, a, b: t.nn.functional.mse_loss(a, b),
    "l1_loss": lambda t, a, b: t.nn.functional.l1_loss(a, b),
    "bce_with_logits": lambda t, a, b: t.nn.functional.binary_cross_entropy_with_logits(a, b.sigmoid()),
    "kl_div": lambda t, a, b: t.nn.functional.kl_div(a, b.softmax(-1), reduction="batchmean"),
    "prod": lambda t, a, b: a.prod(),
    # lower-precision then float32 ops on one result
    "linear_then_mse": lambda t, a, b: t.nn.functional.mse_loss(t.nn.functional.linear(a, b), a),
}

# name -> f(torch, a, b) for modules with float32 parameters, on float32 inputs.
MODULES: dict[str, Any] = {
    "LSTMCell": lambda t, a, b: t.nn.LSTMCell(4, 4)(a)[0],
    "LSTM": lambda t, a, b: t.nn.LSTM(4, 4, batch_first=True)(a[None])[0],
    "GRU": lambda t, a, b: t.nn.GRU(4, 4)(a[None])[0],
    "MultiheadAttention": lambda t, a, b: t.nn.MultiheadAttention(4, 2)(a[None], b[None], b[None])[0],
    "TransformerEncoderLayer": lambda t, a, b: t.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0)(a[None]),
    "LayerNorm(linear)": lambda t, a, b: t.nn.LayerNorm(4)(t.nn.functional.linear(a, b)),
}


def init_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """The run's weights and data, drawn in NumPy (float32)."""
    r = np.random.default_rng(seed)

    def w(*shape: int, fan_in: int) -> np.ndarray:
        return (r.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    return {
        "conv.weight": w(4, 1, 3, 3, fan_in=9),
        "conv.bias": w(4, fan_in=9),
        "fc1.weight": w(32, 4 * 4 * 4, fan_in=64),
        "fc1.bias": w(32, fan_in=64),
        "ln.weight": (1 + 0.1 * r.standard_normal(32)).astype(np.float32),
        "ln.bias": (0.1 * r.standard_normal(32)).astype(np.float32),
        "fc2.weight": w(10, 32, fan_in=32),
        "fc2.bias": w(10, fan_in=32),
        "x": r.standard_normal((3, 8, 1, 10, 10)).astype(np.float32),
        "y": r.integers(0, 10, (3, 8)).astype(np.int64),
    }


def train(torch: Any, arrays: dict[str, np.ndarray], steps: int = 3) -> dict[str, np.ndarray]:
    """Three SGD steps with the forward and loss inside ``autocast("cpu", bfloat16)``."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3)
            self.fc1 = nn.Linear(64, 32)
            self.ln = nn.LayerNorm(32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x: Any) -> Any:
            x = F.max_pool2d(F.relu(self.conv(x)), 2)
            x = F.gelu(self.ln(self.fc1(torch.flatten(x, 1))))
            return self.fc2(x)

    model = Net()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.tensor(arrays[name]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    out: dict[str, np.ndarray] = {}
    losses = []
    for step in range(steps):
        x, y = torch.tensor(arrays["x"][step]), torch.tensor(arrays["y"][step])
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        if step == 0:
            out["logits_dtype"] = np.array(str(logits.dtype).split(".")[-1])
            out["loss_dtype"] = np.array(str(loss.dtype).split(".")[-1])
            out["logits0"] = logits.float().detach().numpy()
        loss.backward()
        if step == 0:
            for name, p in model.named_parameters():
                out["grad0." + name] = p.grad.numpy().copy()
                out["grad_dtype." + name] = np.array(str(p.grad.dtype).split(".")[-1])
        opt.step()
        losses.append(loss.item())
    out["losses"] = np.array(losses)
    for name, p in model.named_parameters():
        out["final." + name] = p.detach().numpy().copy()
    return out


def dtype_table(torch: Any) -> dict[str, np.ndarray]:
    """Result dtypes of :data:`OPS` inside autocast regions."""
    r = np.random.default_rng(1)
    out: dict[str, np.ndarray] = {}
    for region in ("bfloat16", "float16"):
        for src in ("float32", "float64") if region == "bfloat16" else ("float32",):
            a = torch.tensor(r.standard_normal((4, 4)), dtype=getattr(torch, src))
            b = torch.tensor(r.standard_normal((4, 4)), dtype=getattr(torch, src))
            names, got = [], []
            for name, f in OPS.items():
                with torch.autocast("cpu", dtype=getattr(torch, region)):
                    res = f(torch, a, b)
                names.append(name)
                got.append(str(res.dtype).split(".")[-1])
            out[f"dtypes.{region}.{src}"] = np.array(got)
            out["dtypes.ops"] = np.array(names)
        if region != "bfloat16":
            continue  # (PyTorch's CPU LSTM has no float16 kernel on every CPU)
        a = torch.tensor(r.standard_normal((4, 4)), dtype=torch.float32)
        b = torch.tensor(r.standard_normal((4, 4)), dtype=torch.float32)
        got = []
        for f in MODULES.values():
            with torch.autocast("cpu", dtype=getattr(torch, region)):
                got.append(str(f(torch, a, b).dtype).split(".")[-1])
        out[f"modules.{region}"] = np.array(got)
        out["modules"] = np.array(list(MODULES))
    return out


def main() -> None:
    import torch

    arrays = init_arrays()
    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    data.update({"init." + k: v for k, v in arrays.items()})
    data.update(dtype_table(torch))
    data.update(train(torch, arrays))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
