"""The digits demo, data-parallel over MPI ranks with ``DistributedDataParallel``.

    mpiexec -n 2 python examples/digits_ddp.py            # 2 ranks (pip install 'ferrograd[mpi]')
    mpiexec -n 2 python examples/digits_ddp.py --epochs 5 --models cnn

Each rank trains a replica of the model on its shard of every global batch
(``fg.data.DistributedSampler``; the per-rank batch is the global batch size
divided by the number of ranks), and DDP averages the gradients during
``backward()``, so the run follows one process training on the whole batch.
Test accuracy is computed on every rank (the replicas are identical) and
printed by rank 0, which alone writes the checkpoint ``digits_ddp_<model>.safetensors``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import ferrograd as fg
import ferrograd.distributed as dist
import ferrograd.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from digits import MODELS, accuracy, cosine_lr, load_split  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (as examples/digits.py, without plots)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15, help="epochs per model (default: 15)")
    p.add_argument("--batch-size", type=int, default=64, help="global mini-batch size (default: 64)")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam's peak learning rate (default: 2e-3)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed for the split, the initialisation and the shuffling"
    )
    p.add_argument("--models", default="mlp,cnn", help="comma-separated models (default: mlp,cnn)")
    p.add_argument(
        "--out-dir", type=Path, default=Path("demo-output"), help="where rank 0 writes checkpoints"
    )
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or any(m not in MODELS for m in args.models):
        p.error(f"--models must be a comma-separated subset of {','.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Train each model under DDP; rank 0 reports and saves."""
    args = parse_args(argv)
    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the {world} ranks")
    data = load_split(args.seed)
    train_set = fg.data.TensorDataset(data.x_train, data.y_train)
    if rank == 0:
        print(
            f"digits on {world} ranks: global batch {args.batch_size} = {world} × {args.batch_size // world}"
        )
        args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        fg.manual_seed(args.seed + rank)  # DDP copies rank 0's initial parameters; dropout differs per rank
        model = fg.nn.parallel.DistributedDataParallel(MODELS[name]())
        opt = fg.optim.Adam(model.parameters(), lr=args.lr)
        sampler = fg.data.DistributedSampler(train_set, seed=args.seed)
        loader = fg.data.DataLoader(train_set, batch_size=args.batch_size // world, sampler=sampler)
        t0 = time.perf_counter()
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for g in opt.param_groups:
                g["lr"] = cosine_lr(args.lr, epoch, args.epochs)
            model.train()
            for xb, yb in loader:
                loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
        seconds = time.perf_counter() - t0
        acc = accuracy(model.module, data.x_test, data.y_test)
        if rank == 0:
            path = args.out_dir / f"digits_ddp_{name}.safetensors"
            fg.save(
                {"model": model.module.state_dict(), "metadata": {"arch": name, "test_accuracy": acc}}, path
            )
            print(f"{name.upper():<4} test accuracy {acc:7.2%}   train {seconds:5.1f} s   checkpoint {path}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
