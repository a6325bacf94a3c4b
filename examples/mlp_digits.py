"""The shortest useful training script: an MLP on scikit-learn's 8×8 digits.

    python examples/mlp_digits.py --epochs 15 --seed 0

A copy-and-edit starting point: load data into tensors, a ``TensorDataset``
and a shuffling ``DataLoader``, a model, an optimizer, the training loop and
an evaluation under ``fg.no_grad()``. (``examples/digits.py`` is the full
demo: progress bars, a CNN, checkpoints and plots.)
"""

import argparse

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    """Train and print the loss per epoch and the held-out accuracy."""
    p = argparse.ArgumentParser(description="An MLP on sklearn's 8x8 digits.")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    fg.manual_seed(args.seed)  # initialisation, dropout and the loader's shuffling

    # Data: 1797 images of 64 pixels (0..16), labels 0..9; a stratified 80/20 split.
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.2, stratify=digits.target, random_state=args.seed
    )
    x_train, x_test = fg.tensor(x_train), fg.tensor(x_test)
    y_train, y_test = fg.tensor(y_train, dtype=fg.int64), fg.tensor(y_test, dtype=fg.int64)
    loader = fg.data.DataLoader(
        fg.data.TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True
    )

    model = nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(256, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )  # fmt: skip
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
        print(f"epoch {epoch:>2}  train loss {total / len(loader.dataset):.4f}")

    model.eval()
    with fg.no_grad():
        acc = float((model(x_test).argmax(dim=1) == y_test).float().mean())
    print(f"test accuracy: {acc:.2%}")


if __name__ == "__main__":
    main()
