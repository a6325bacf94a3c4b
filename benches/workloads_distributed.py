"""W10: data-parallel training under MPI (imported by ``run.py``; also the per-rank worker).

``run.py --only W10`` launches this file under ``mpiexec -n 1`` and
``mpiexec -n 2`` (``--worker``), each rank with 1 thread, and reads one JSON
line from rank 0:

- training steps of W4's MLP (784-1024-1024-10, global batch 256, SGD
  momentum 0.9) and the digits CNN (global batch 64, Adam) on synthetic data:
  1 rank trains the plain model on the whole batch, 2 ranks train it under
  ``DistributedDataParallel`` on half the batch each. Throughput ratio =
  (1-rank step time) ÷ (2-rank step time) on the same global batch.
- the share of all-reduce hidden behind backward:
  1 − (time ``backward()`` waits for the all-reduces after the engine
  finished) ÷ (time the same gradient bytes take to all-reduce alone).
- a 64 MB float32 all-reduce: ``fg.distributed.all_reduce`` on a tensor
  against ``mpi4py``'s ``Allreduce`` on a NumPy array (GB/s of payload).

The MPI peer figures need the ``mpi`` extra; without it the row is skipped with
the reason.

The PyTorch peer: the same two models and batches, trained the same way and
timed by the same loop, 1 process on the whole batch and 2 processes under
``torch.nn.parallel.DistributedDataParallel`` with the Gloo backend (default
25 MB buckets), each process with 1 thread (``--torch-worker``, started as
plain processes that meet at a local TCP port). It runs in this Python, or in
the one named by ``FG_BENCH_TORCH_PYTHON``; without torch (or without Gloo)
the peer is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _models(fg):  # type: ignore[no-untyped-def]
    nn = fg.nn

    def mlp():  # type: ignore[no-untyped-def]
        return nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )

    def cnn():  # type: ignore[no-untyped-def]
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )

    return {
        "W4-MLP": (mlp, (784,), 256, lambda p: fg.optim.SGD(p, lr=0.01, momentum=0.9)),
        "digits-CNN": (cnn, (1, 8, 8), 64, lambda p: fg.optim.Adam(p, lr=1e-3)),
    }


def worker(steps: int) -> None:
    import ferrograd as fg
    import ferrograd.distributed as dist
    import ferrograd.nn.functional as F
    import numpy as np
    from mpi4py import MPI

    fg.set_num_threads(1)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict[str, float] = {"world": world}
    for name, (make, shape, gbatch, make_opt) in _models(fg).items():
        fg.manual_seed(0)
        model = make()
        net = fg.nn.parallel.DistributedDataParallel(model) if world > 1 else model
        opt = make_opt(net.parameters())
        b = gbatch // world
        rng = np.random.default_rng(rank)
        x = fg.from_numpy(rng.standard_normal((b, *shape)).astype("float32"))
        y = fg.from_numpy(rng.integers(0, 10, b))
        times, waits, bwd = [], [], []
        for i in range(steps + 3):
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            w0 = getattr(net, "_comm_wait_s", 0.0)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            if i >= 3:
                times.append(t3 - t0)
                bwd.append(t2 - t1)
                waits.append(getattr(net, "_comm_wait_s", 0.0) - w0)
        out[f"{name} ms/step"] = 1e3 * statistics.median(times)
        out[f"{name} backward ms"] = 1e3 * statistics.median(bwd)
        if world > 1:
            grads = np.zeros(sum(p.numel() for p in model.parameters()), np.float32)
            solo = []
            for _ in range(7):
                dist.barrier()
                t0 = time.perf_counter()
                dist._comm().Allreduce(MPI.IN_PLACE, grads, MPI.SUM)
                solo.append(time.perf_counter() - t0)
            out[f"{name} allreduce alone ms"] = 1e3 * statistics.median(solo)
            out[f"{name} wait after backward ms"] = 1e3 * statistics.median(waits)
    if world > 1:
        n = 16 * 1024 * 1024  # 64 MB of float32
        t = fg.ones(n)
        a = np.ones(n, np.float32)
        fgs, mps = [], []
        for _ in range(5):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            fgs.append(time.perf_counter() - t0)
            dist.barrier()
            t0 = time.perf_counter()
            dist._comm().Allreduce(MPI.IN_PLACE, a, MPI.SUM)
            mps.append(time.perf_counter() - t0)
        out["allreduce 64MB fg GB/s"] = 4 * n / statistics.median(fgs) / 1e9
        out["allreduce 64MB mpi4py GB/s"] = 4 * n / statistics.median(mps) / 1e9
    if rank == 0:
        print("W10JSON " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def _torch_models(torch):  # type: ignore[no-untyped-def]
    nn = torch.nn

    def mlp():  # type: ignore[no-untyped-def]
        return nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )

    def cnn():  # type: ignore[no-untyped-def]
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )

    return {
        "W4-MLP": (mlp, (784,), 256, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)),
        "digits-CNN": (cnn, (1, 8, 8), 64, lambda p: torch.optim.Adam(p, lr=1e-3)),
    }


def torch_worker(steps: int) -> None:
    """One process of the PyTorch peer (rank and world size from the environment, as torchrun sets)."""
    import numpy as np
    import torch
    import torch.distributed as tdist
    import torch.nn.functional as TF

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world > 1:
        tdist.init_process_group("gloo", rank=rank, world_size=world)
    out: dict[str, float] = {"world": world}
    for name, (make, shape, gbatch, make_opt) in _torch_models(torch).items():
        torch.manual_seed(0)
        model = make()
        net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
        opt = make_opt(net.parameters())
        b = gbatch // world
        rng = np.random.default_rng(rank)
        x = torch.from_numpy(rng.standard_normal((b, *shape)).astype("float32"))
        y = torch.from_numpy(rng.integers(0, 10, b))
        times = []
        for i in range(steps + 3):
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = TF.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            t3 = time.perf_counter()
            if i >= 3:
                times.append(t3 - t0)
        out[f"{name} ms/step"] = 1e3 * statistics.median(times)
    if rank == 0:
        print("W10TORCH " + json.dumps(out), flush=True)
    if world > 1:
        tdist.destroy_process_group()


def _torch_python() -> str:
    """The Python that runs the PyTorch peer; raises saying why when it has no torch with Gloo."""
    exe = os.environ.get("FG_BENCH_TORCH_PYTHON") or sys.executable
    probe = subprocess.run(
        [exe, "-c", "import torch.distributed as d; print(d.is_available() and d.is_gloo_available())"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        raise RuntimeError(
            f"torch is not importable in {exe} (set FG_BENCH_TORCH_PYTHON to a Python with torch)"
        )
    if probe.stdout.strip() != "True":
        raise RuntimeError(f"the torch in {exe} has no Gloo backend")
    return exe


def _launch_torch(exe: str, n: int, steps: int) -> dict[str, float]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(
            os.environ,
            OMP_NUM_THREADS="1",
            RANK=str(r),
            WORLD_SIZE=str(n),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        procs.append(
            subprocess.Popen(
                [exe, __file__, "--torch-worker", str(steps)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
        )
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=600)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for line in outs[0].splitlines():
        if line.startswith("W10TORCH "):
            return json.loads(line[len("W10TORCH ") :])
    raise RuntimeError(f"W10 PyTorch worker failed: {''.join(outs)[-2000:]}")


def _launch(n: int, steps: int) -> dict[str, float]:
    launcher = Path(sys.executable).parent / "mpiexec"
    exe = str(launcher) if launcher.exists() else shutil.which("mpiexec")
    if exe is None:
        raise RuntimeError("mpiexec not found (pip install 'ferrograd[mpi]')")
    env = dict(os.environ, OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1")
    proc = subprocess.run(
        [exe, "-n", str(n), sys.executable, __file__, "--worker", str(steps)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("W10JSON "):
            return json.loads(line[len("W10JSON ") :])
    raise RuntimeError(f"W10 worker failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")


def measure(steps: int = 20) -> dict[str, float]:
    """Run the 1-rank and 2-rank workers; return the figures and the derived ratios."""
    one, two = _launch(1, steps), _launch(2, steps)
    res: dict[str, float] = {}
    for name in ("W4-MLP", "digits-CNN"):
        res[f"{name} 1 rank ms/step"] = one[f"{name} ms/step"]
        res[f"{name} 2 ranks ms/step"] = two[f"{name} ms/step"]
        res[f"{name} throughput ratio"] = one[f"{name} ms/step"] / two[f"{name} ms/step"]
        alone = two[f"{name} allreduce alone ms"]
        res[f"{name} allreduce alone ms"] = alone
        res[f"{name} wait after backward ms"] = two[f"{name} wait after backward ms"]
        res[f"{name} hidden share"] = 1 - two[f"{name} wait after backward ms"] / alone
    try:
        exe = _torch_python()
        t_one, t_two = _launch_torch(exe, 1, steps), _launch_torch(exe, 2, steps)
    except Exception as e:  # noqa: BLE001 - the peer is optional; say why it is missing
        print(f"W10: PyTorch DDP (Gloo) peer skipped: {e}")
    else:
        for name in ("W4-MLP", "digits-CNN"):
            res[f"{name} torch 1 rank ms/step"] = t_one[f"{name} ms/step"]
            res[f"{name} torch 2 ranks ms/step"] = t_two[f"{name} ms/step"]
            res[f"{name} torch throughput ratio"] = t_one[f"{name} ms/step"] / t_two[f"{name} ms/step"]
            res[f"{name} fg/torch 2-rank step time"] = (
                res[f"{name} 2 ranks ms/step"] / t_two[f"{name} ms/step"]
            )
    res["allreduce 64MB fg GB/s"] = two["allreduce 64MB fg GB/s"]
    res["allreduce 64MB mpi4py GB/s"] = two["allreduce 64MB mpi4py GB/s"]
    res["allreduce 64MB fg/mpi4py"] = res["allreduce 64MB fg GB/s"] / res["allreduce 64MB mpi4py GB/s"]
    return res


def w10(run, ctx) -> None:  # type: ignore[no-untyped-def]
    """The W10 rows of ``run.py``'s table (PyTorch DDP over Gloo as the peer; the MPI/NumPy figure in the notes)."""
    try:
        import mpi4py  # noqa: F401

        res = measure()
    except Exception as e:  # noqa: BLE001 - report and go on, as the other workloads do
        print(f"W10: skipped: {e}")
        return
    for name in ("W4-MLP", "digits-CNN"):
        row = run.Row("W10", f"{name} 2 ranks ms/step", "ms", False)
        row.values["ferrograd"] = res[f"{name} 2 ranks ms/step"]
        row.notes["ferrograd"] = (
            f"1 rank {res[f'{name} 1 rank ms/step']:.2f} ms; throughput ×{res[f'{name} throughput ratio']:.2f}; "
            f"all-reduce hidden {res[f'{name} hidden share']:.0%}"
        )
        if f"{name} torch 2 ranks ms/step" in res:
            row.values["torch"] = res[f"{name} torch 2 ranks ms/step"]
            row.notes["torch"] = (
                f"DDP over Gloo, 2 processes x 1 thread; 1 process {res[f'{name} torch 1 rank ms/step']:.2f} ms; "
                f"throughput ×{res[f'{name} torch throughput ratio']:.2f}"
            )
        ctx.rows.append(row)
    row = run.Row("W10", "all-reduce 64 MB float32, 2 ranks", "GB/s", True)
    row.values["ferrograd"] = res["allreduce 64MB fg GB/s"]
    row.notes["ferrograd"] = f"mpi4py Allreduce on NumPy {res['allreduce 64MB mpi4py GB/s']:.2f} GB/s"
    ctx.rows.append(row)


WORKLOADS = {"W10": w10}

if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]) if len(sys.argv) > 2 else 20)
    elif len(sys.argv) >= 2 and sys.argv[1] == "--torch-worker":
        torch_worker(int(sys.argv[2]) if len(sys.argv) > 2 else 20)
    else:
        for k, v in measure().items():
            print(f"{k:<40} {v:10.3f}")
