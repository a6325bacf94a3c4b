"""The demo: train an MLP, then a small CNN, on scikit-learn's 8×8 handwritten digits.

    python examples/digits.py                 # defaults: ~30 s on 2 cores
    python examples/digits.py --seed 3 --epochs 20 --out-dir /tmp/run

Steps:

1. load ``sklearn.datasets.load_digits()`` (1797 images of 8×8 pixels, shipped
   with scikit-learn: nothing is downloaded), scale the pixels to zero mean and
   unit variance, and make a stratified 80/20 train/test split fixed by ``--seed``;
2. train an MLP and then a CNN with ``fg.data.DataLoader`` (shuffled by a
   seeded ``fg.Generator``), ``fg.optim.Adam`` and a cosine learning-rate decay,
   showing a tqdm bar per epoch with the loss and the throughput;
3. report each model's accuracy on the held-out split;
4. write a checkpoint per model with ``fg.save`` (the model's ``state_dict``,
   the optimizer's ``state_dict`` and metadata) and ``loss_curves.png``;
5. load each checkpoint back into a freshly constructed model and check that
   its predictions are bit-for-bit those of the trained model (exit status 1
   if not).

Everything random (initialisation, dropout, shuffling, the split) follows
``--seed``, so a run is reproducible. The exit status is 0 on success, 1 if a
reloaded checkpoint disagrees with its model, 2 for a bad argument (such as a
device this build does not have).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np

try:
    import matplotlib
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from tqdm import tqdm
except ImportError as e:  # pragma: no cover - exercised only without the demo extra
    sys.exit(f"digits.py needs the demo extra ({e.name} is missing): pip install -e '.[demo]'")

NUM_CLASSES = 10


# ----------------------------------------------------------------------------- data


@dataclass
class Digits:
    """The train/test split as ferrograd tensors: images ``(N, 1, 8, 8)`` float32, labels ``(N,)`` int64."""

    x_train: fg.Tensor
    y_train: fg.Tensor
    x_test: fg.Tensor
    y_test: fg.Tensor
    mean: float = 0.0  # the train split's pixel mean and standard deviation: x = (pixels - mean) / std
    std: float = 1.0


def load_split(seed: int, test_size: float = 0.2) -> Digits:
    """Load the digits, make a stratified split fixed by ``seed`` and standardise with the train statistics."""
    bunch = load_digits()
    x = bunch.images.astype(np.float32)  # (1797, 8, 8), pixel values 0..16
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_size, stratify=y, random_state=seed)
    mean, std = x_tr.mean(), x_tr.std()
    x_tr, x_te = (x_tr - mean) / std, (x_te - mean) / std
    return Digits(
        fg.from_numpy(np.ascontiguousarray(x_tr[:, None])),
        fg.from_numpy(y_tr),
        fg.from_numpy(np.ascontiguousarray(x_te[:, None])),
        fg.from_numpy(y_te),
        float(mean),
        float(std),
    )


# ----------------------------------------------------------------------------- models


def make_mlp() -> nn.Module:
    """A two-hidden-layer perceptron on the 64 flattened pixels."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 256),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(256, 128),
        nn.ReLU(),
        nn.Linear(128, NUM_CLASSES),
    )


def make_cnn() -> nn.Module:
    """Two 3×3 convolutions, a 2×2 max-pool and a two-layer classifier head."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 8×8 → 4×4
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 128),
        nn.ReLU(),
        nn.Dropout(0.25),
        nn.Linear(128, NUM_CLASSES),
    )


MODELS = {"mlp": make_mlp, "cnn": make_cnn}


# ----------------------------------------------------------------------------- training


@dataclass
class History:
    """What one training run recorded."""

    step_loss: list[float] = field(default_factory=list)  # every mini-batch
    epoch_loss: list[float] = field(default_factory=list)  # sample-weighted mean per epoch
    test_acc: list[float] = field(default_factory=list)  # after every epoch
    seconds: float = 0.0  # training wall time (evaluation excluded)
    samples_per_s: float = 0.0


def logits_of(model: nn.Module, x: fg.Tensor, batch_size: int = 512) -> fg.Tensor:
    """The model's logits for ``x`` in eval mode, without building a graph."""
    model.eval()
    dev = next(iter(model.parameters())).device
    with fg.no_grad():
        return fg.cat([model(x[i : i + batch_size].to(dev)) for i in range(0, x.shape[0], batch_size)]).to(
            "cpu"
        )


def accuracy(model: nn.Module, x: fg.Tensor, y: fg.Tensor) -> float:
    """Fraction of ``x`` whose arg-max class is ``y``."""
    return float((logits_of(model, x).argmax(dim=1) == y).float().mean())


def cosine_lr(base_lr: float, epoch: int, epochs: int) -> float:
    """Cosine decay from ``base_lr`` towards ``base_lr / 20`` over the run, evaluated at the start of ``epoch``."""
    floor = base_lr / 20
    return floor + 0.5 * (base_lr - floor) * (1 + math.cos(math.pi * epoch / epochs))


def train(
    name: str,
    model: nn.Module,
    opt: fg.optim.Optimizer,
    data: Digits,
    *,
    epochs: int,
    batch_size: int,
    generator: fg.Generator,
    quiet: bool,
) -> History:
    """Train ``model`` with cross-entropy for ``epochs`` epochs; evaluate on the test split after each."""
    loader = fg.data.DataLoader(
        fg.data.TensorDataset(data.x_train, data.y_train),
        batch_size=batch_size,
        shuffle=True,
        generator=generator,
    )
    n = len(loader.dataset)
    base_lrs = [g["lr"] for g in opt.param_groups]
    hist = History()
    for epoch in range(epochs):
        for g, lr in zip(opt.param_groups, base_lrs, strict=True):
            g["lr"] = cosine_lr(lr, epoch, epochs)
        model.train()
        total, seen = 0.0, 0
        bar = tqdm(
            total=n,
            desc=f"{name} epoch {epoch + 1:>2}/{epochs}",
            unit=" samples",
            unit_scale=True,
            leave=False,
            disable=quiet,
            dynamic_ncols=True,
        )
        t0 = time.perf_counter()
        dev = next(iter(model.parameters())).device
        for xb, yb in loader:
            xb, yb = xb.to(dev), yb.to(dev)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            value, k = float(loss), yb.shape[0]
            hist.step_loss.append(value)
            total += value * k
            seen += k
            bar.update(k)
            bar.set_postfix(loss=f"{value:.4f}", refresh=False)
        dt = time.perf_counter() - t0
        bar.close()
        hist.seconds += dt
        hist.epoch_loss.append(total / seen)
        hist.test_acc.append(accuracy(model, data.x_test, data.y_test))
        if not quiet:
            print(
                f"{name} epoch {epoch + 1:>2}/{epochs}  loss {hist.epoch_loss[-1]:.4f}  "
                f"test acc {hist.test_acc[-1]:6.2%}  {seen / dt:,.0f} samples/s  ({dt:.2f} s)"
            )
    for g, lr in zip(opt.param_groups, base_lrs, strict=True):
        g["lr"] = lr  # the checkpoint records the configured rate, not the last decayed one
    hist.samples_per_s = epochs * n / hist.seconds if hist.seconds > 0 else float("nan")
    return hist


# ----------------------------------------------------------------------------- checkpoint and plot


def save_checkpoint(
    path: Path, name: str, model: nn.Module, opt: fg.optim.Optimizer, hist: History, args
) -> None:
    """Write the model and optimizer state and a metadata dict to ``path`` (safetensors, via ``fg.save``)."""
    fg.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "metadata": {
                "arch": name,
                "epochs": args.epochs,
                "batch_size": args.batch_size,
                "lr": args.lr,
                "seed": args.seed,
                "test_accuracy": hist.test_acc[-1],
                "ferrograd": fg.__version__,
            },
        },
        path,
    )


def verify_checkpoint(path: Path, trained: nn.Module, data: Digits) -> tuple[bool, float]:
    """Load ``path`` into a fresh model and optimizer; return (same logits bit for bit, reloaded accuracy)."""
    ckpt = fg.load(path)
    meta = ckpt["metadata"]
    model = MODELS[meta["arch"]]()  # freshly initialised: different weights until the state is loaded
    model.load_state_dict(ckpt["model"])
    model.to(next(iter(trained.parameters())).device)  # same device, so the same kernels
    opt = fg.optim.Adam(model.parameters(), lr=meta["lr"])
    opt.load_state_dict(ckpt["optimizer"])  # validates the saved optimizer state against the new model
    same = np.array_equal(logits_of(model, data.x_test).numpy(), logits_of(trained, data.x_test).numpy())
    acc = accuracy(model, data.x_test, data.y_test)
    return same and acc == meta["test_accuracy"], acc


def plot_curves(path: Path, hists: dict[str, History]) -> None:
    """Training loss (per step, and per-epoch means) and test accuracy per epoch, for every model."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (name, h), color in zip(hists.items(), ("tab:blue", "tab:orange"), strict=False):
        epochs = len(h.epoch_loss)
        steps = np.arange(1, len(h.step_loss) + 1) * epochs / len(h.step_loss)
        ax_loss.plot(steps, h.step_loss, color=color, alpha=0.25, linewidth=0.8)
        # An epoch's mean loss is drawn at the middle of the epoch it averages.
        ax_loss.plot(
            np.arange(epochs) + 0.5, h.epoch_loss, "o-", color=color, markersize=3, label=f"{name.upper()}"
        )
        ax_acc.plot(
            np.arange(1, epochs + 1),
            np.array(h.test_acc) * 100,
            "o-",
            color=color,
            markersize=3,
            label=f"{name.upper()} (final {h.test_acc[-1]:.2%})",
        )
    ax_loss.set(
        xlabel="epoch", ylabel="cross-entropy", yscale="log", title="training loss (faint: per batch)"
    )
    lowest = min(min(h.test_acc) for h in hists.values()) * 100
    ax_acc.set(xlabel="epoch", ylabel="accuracy (%)", title="held-out accuracy (after each epoch)")
    ax_acc.set_ylim(min(80.0, lowest - 2), 100.5)
    for ax in (ax_loss, ax_acc):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("ferrograd on sklearn digits (8×8)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def check_device(name: str) -> None:
    """Exit with a clear message (status 2) unless ``name`` is a device this build can run on."""
    try:
        dev = fg.device(name)
        fg.zeros(1, device=dev)
    except (RuntimeError, ValueError, TypeError) as e:
        if name.lower().startswith(("gpu", "webgpu")):
            why = "no usable WebGPU device"
        else:
            why = "not a ferrograd device"
        print(f"digits.py: cannot use --device {name}: {why} ({e}). Run with --device cpu.", file=sys.stderr)
        sys.exit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--epochs", type=int, default=15, help="epochs per model (default: 15)")
    p.add_argument("--batch-size", type=int, default=64, help="mini-batch size (default: 64)")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam's peak learning rate (default: 2e-3)")
    p.add_argument("--device", default="cpu", help="cpu (default) or gpu (WebGPU)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed for the split, the initialisation and the shuffling"
    )
    p.add_argument(
        "--models", default="mlp,cnn", help="comma-separated models to train, in order (default: mlp,cnn)"
    )
    p.add_argument(
        "--out-dir", type=Path, default=Path("demo-output"), help="where files go (default: demo-output/)"
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress bars or per-epoch lines; just the summary"
    )
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or not args.lr > 0:
        p.error("--epochs and --batch-size must be positive and --lr > 0")
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or any(m not in MODELS for m in args.models):
        p.error(f"--models must be a comma-separated subset of {','.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the demo; return the process exit status."""
    args = parse_args(argv)
    check_device(args.device)
    t_start = time.perf_counter()
    args.out_dir.mkdir(parents=True, exist_ok=True)

    data = load_split(args.seed)
    if not args.quiet:
        print(
            f"ferrograd {fg.__version__} (CPU kernels: {fg.cpu_level()}, threads: {fg.get_num_threads()}) — "
            f"digits: {data.x_train.shape[0]} train / {data.x_test.shape[0]} test images of 8×8, seed {args.seed}"
        )

    fg.manual_seed(args.seed)  # initialisation and dropout
    shuffle = fg.Generator().manual_seed(args.seed)  # the loader's order, independent of the model code
    hists: dict[str, History] = {}
    results = {}
    files: list[Path] = []
    ok = True
    for name in args.models:
        model = MODELS[name]().to(args.device)
        n_params = sum(p.numel() for p in model.parameters())
        if not args.quiet:
            print(f"\n{name.upper()}: {n_params:,} parameters")
        opt = fg.optim.Adam(model.parameters(), lr=args.lr)
        hist = train(
            name.upper(),
            model,
            opt,
            data,
            epochs=args.epochs,
            batch_size=args.batch_size,
            generator=shuffle,
            quiet=args.quiet,
        )
        hists[name] = hist
        ckpt = args.out_dir / f"digits_{name}.safetensors"
        save_checkpoint(ckpt, name, model, opt, hist, args)
        same, reloaded_acc = verify_checkpoint(ckpt, model, data)
        ok &= same
        files.append(ckpt)
        results[name] = {
            "parameters": n_params,
            "test_accuracy": hist.test_acc[-1],
            "reloaded_accuracy": reloaded_acc,
            "reload_identical": same,
            "train_seconds": hist.seconds,
            "samples_per_s": hist.samples_per_s,
            "final_train_loss": hist.epoch_loss[-1],
        }

    png = args.out_dir / "loss_curves.png"
    plot_curves(png, hists)
    files.append(png)
    summary = args.out_dir / "summary.json"
    files.append(summary)
    total = time.perf_counter() - t_start
    summary.write_text(
        json.dumps(
            {"seed": args.seed, "epochs": args.epochs, "models": results, "total_seconds": total}, indent=2
        )
        + "\n"
    )

    print(f"\nSummary (seed {args.seed}, {args.epochs} epochs, batch {args.batch_size}, lr {args.lr:g}):")
    for name, r in results.items():
        status = "identical" if r["reload_identical"] else "MISMATCH"
        print(
            f"  {name.upper():<4} test accuracy {r['test_accuracy']:7.2%}   train {r['train_seconds']:5.1f} s "
            f"({r['samples_per_s']:,.0f} samples/s)   checkpoint reload: {status} ({r['reloaded_accuracy']:.2%})"
        )
    print(f"  files: {', '.join(os.fspath(f) for f in files)}")
    print(f"  total wall time {total:.1f} s")
    if not ok:
        print("error: a reloaded checkpoint does not reproduce its model's predictions", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
