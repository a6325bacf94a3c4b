"""Write the reference of ``tests/test_compat_v1_tutorials.py`` with PyTorch.

The softmax-regression tutorial program (``tests/tf1_programs/mnist_softmax.py``)
starts from zero weights and draws its batches from a seeded ``next_batch``, so
its result is determined: this script trains the same model (softmax, the mean
of ``-sum(y * log(p))``, gradient descent at 0.5, batches of 100) with PyTorch
in float32 on the same batches, and stores the final weights, bias and test
accuracy in ``tests/fixtures/tf1_tutorials/mnist_softmax.npz`` with the PyTorch
version (the stored file was made with PyTorch 2.15 on CPU). The test then runs
in CI without PyTorch. Run it in the project's test environment (ferrograd,
pytest, numpy, scikit-learn)::

    python scripts/make_tf1_tutorial_references.py [--torch-site DIR]

with ``torch`` importable, or found in ``DIR`` (the ``site-packages`` of another
environment; also read from ``FG_TORCH_SITE``), which is appended to ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "tf1_tutorials"
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-site", default=os.environ.get("FG_TORCH_SITE"))
    args = ap.parse_args()
    if args.torch_site:
        sys.path.append(args.torch_site)
    import torch
    from test_compat_v1_tutorials import SOFTMAX_STEPS, MnistLikeDigits

    torch.set_num_threads(1)
    mnist = MnistLikeDigits()
    w = torch.zeros(784, 10, requires_grad=True)
    b = torch.zeros(10, requires_grad=True)
    for _ in range(SOFTMAX_STEPS):
        xs, ys = (torch.from_numpy(a) for a in mnist.train.next_batch(100))
        p = torch.softmax(xs @ w + b, dim=1)
        loss = torch.mean(-torch.sum(ys * torch.log(p), dim=1))
        gw, gb = torch.autograd.grad(loss, [w, b])
        with torch.no_grad():
            w -= 0.5 * gw
            b -= 0.5 * gb
    with torch.no_grad():
        pred = (torch.from_numpy(mnist.test.images) @ w + b).argmax(1)
        acc = (pred == torch.from_numpy(mnist.test.labels).argmax(1)).float().mean().item()
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"maker": "scripts/make_tf1_tutorial_references.py", "torch_version": torch.__version__}
    np.savez_compressed(
        OUT / "mnist_softmax.npz",
        weights=w.detach().numpy(),
        bias=b.detach().numpy(),
        accuracy=np.float32(acc),
        steps=np.int64(SOFTMAX_STEPS),
        meta=np.array(json.dumps(meta)),
    )
    print(f"wrote {OUT / 'mnist_softmax.npz'}: test accuracy {acc:.4f} after {SOFTMAX_STEPS} steps")


if __name__ == "__main__":
    main()
