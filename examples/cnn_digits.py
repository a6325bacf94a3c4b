"""A small CNN on scikit-learn's 8×8 digits, with a checkpoint saved and loaded back.

    python examples/cnn_digits.py --epochs 15 --seed 0 --checkpoint /tmp/cnn.safetensors

Like ``examples/mlp_digits.py`` but convolutional: the images stay
``(N, 1, 8, 8)``, two 3×3 convolutions and a 2×2 max-pool feed a two-layer
head. At the end the model's ``state_dict`` is written with ``fg.save`` and
read back into a new model with ``fg.load`` and ``load_state_dict``.
"""

import argparse
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def make_model() -> nn.Module:
    """Conv(1→32) → ReLU → Conv(32→64) → ReLU → MaxPool(2) → Linear(1024→128) → ReLU → Dropout → Linear(128→10)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10),
    )  # fmt: skip


def accuracy(model: nn.Module, x: fg.Tensor, y: fg.Tensor) -> float:
    """Fraction of ``x`` classified as ``y`` (eval mode, no graph)."""
    model.eval()
    with fg.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def main() -> None:
    """Train, evaluate, save, reload and evaluate again."""
    p = argparse.ArgumentParser(description="A small CNN on sklearn's 8x8 digits.")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", type=Path, default=Path("demo-output/cnn_digits.safetensors"))
    args = p.parse_args()
    fg.manual_seed(args.seed)

    digits = load_digits()
    x = digits.images.astype(np.float32)[:, None] / 16.0  # (1797, 1, 8, 8)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.2, stratify=digits.target, random_state=args.seed
    )
    x_train, x_test = fg.tensor(x_train), fg.tensor(x_test)
    y_train, y_test = fg.tensor(y_train, dtype=fg.int64), fg.tensor(y_test, dtype=fg.int64)
    loader = fg.data.DataLoader(
        fg.data.TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True
    )

    model = make_model()
    opt = fg.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        model.train()
        total = 0.0
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * yb.shape[0]
        print(
            f"epoch {epoch:>2}  train loss {total / len(loader.dataset):.4f}  "
            f"test accuracy {accuracy(model, x_test, y_test):.2%}"
        )

    acc = accuracy(model, x_test, y_test)
    args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    fg.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "epochs": args.epochs}, args.checkpoint
    )
    restored = make_model()
    restored.load_state_dict(fg.load(args.checkpoint)["model"])
    print(
        f"test accuracy: {acc:.2%}; after reloading {args.checkpoint}: {accuracy(restored, x_test, y_test):.2%}"
    )


if __name__ == "__main__":
    main()
