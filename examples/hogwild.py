"""Hogwild training: several processes train one shared model, lock-free.

    python examples/hogwild.py                      # 2 processes, 2 epochs
    python examples/hogwild.py --num-processes 4 --epochs 3

Written the way PyTorch's hogwild example is (``import ferrograd as torch`` is the only
change such a script needs): the parent builds a small CNN, moves its parameters to shared
memory with ``model.share_memory()``, starts ``--num-processes`` processes with the
``spawn`` method, each running SGD on its own shuffled pass over the training set and
writing the updates into the shared parameters, and evaluates the updated model when they
are done. The data are synthetic 28x28 "digits" (ten noisy prototype images), so the
script needs no download.
"""

from __future__ import annotations

import argparse
import os

import ferrograd as torch
import ferrograd.multiprocessing as mp
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import ferrograd.optim as optim
import numpy as np
from ferrograd.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.dropout(F.relu(self.fc1(x)), training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_digits(n: int, seed: int) -> TensorDataset:
    """``n`` noisy copies of ten fixed 28x28 prototypes, labelled by prototype."""
    protos = (np.random.RandomState(0).rand(10, 1, 28, 28) > 0.5).astype(np.float32) - 0.5
    rs = np.random.RandomState(seed)
    labels = rs.randint(0, 10, n)
    images = protos[labels] + 0.3 * rs.randn(n, 1, 28, 28).astype(np.float32)
    return TensorDataset(torch.tensor(images), torch.tensor(labels))


def train(rank, args, model, dataset, loader_kwargs):
    torch.manual_seed(args.seed + rank)
    loader = DataLoader(dataset, **loader_kwargs)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    model.train()
    for epoch in range(1, args.epochs + 1):
        for batch_idx, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(
                    f"{os.getpid()}\tepoch {epoch} [{batch_idx * len(data)}/{len(dataset)}]\tloss {loss.item():.4f}"
                )


def test(model, dataset, loader_kwargs):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in DataLoader(dataset, **loader_kwargs):
            out = model(data)
            loss += F.nll_loss(out, target, reduction="sum").item()
            correct += out.max(1)[1].eq(target).sum().item()
    print(f"test: average loss {loss / len(dataset):.4f}, accuracy {correct}/{len(dataset)}")
    return correct / len(dataset)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--num-processes", type=int, default=2)
    p.add_argument("--train-size", type=int, default=2000)
    args = p.parse_args(argv)

    train_set, test_set = synthetic_digits(args.train_size, 1), synthetic_digits(500, 2)
    kwargs = {"batch_size": args.batch_size, "shuffle": True}
    torch.manual_seed(args.seed)
    mp.set_start_method("spawn", force=True)
    model = Net()
    model.share_memory()  # gradients are made later, in each process, and stay private
    before = test(model, test_set, kwargs)
    weights = [p.detach().clone() for p in model.parameters()]
    processes = []
    for rank in range(args.num_processes):
        proc = mp.Process(target=train, args=(rank, args, model, train_set, kwargs))
        proc.start()
        processes.append(proc)
    for proc in processes:
        proc.join()
    if any(proc.exitcode for proc in processes):
        raise SystemExit(f"a training process failed: exit codes {[proc.exitcode for proc in processes]}")
    after = test(model, test_set, kwargs)  # the parent sees what the processes trained
    changed = all(not torch.equal(w, p) for w, p in zip(weights, model.parameters(), strict=True))
    print(f"accuracy before training {before:.3f}, after {after:.3f}")
    print(f"every parameter changed by the training processes: {changed}")


if __name__ == "__main__":
    main()
