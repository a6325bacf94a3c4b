"""Soak: many training steps of a small model, then many graphs built and
dropped, checking that resident memory stays flat after a warm-up.

    python scripts/soak.py [--steps 10000] [--graphs 1000] [--max-growth-mb 5]

Prints RSS after the warm-up and at the end of each phase (and the CPU
allocator's bytes in use); exits 1 when either phase grows RSS by more than
``--max-growth-mb``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def training(steps: int) -> tuple[float, float]:
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = fg.optim.Adam(model.parameters(), lr=1e-3)
    x, y = fg.randn(64, 32), fg.randint(0, 10, (64,))
    warm = max(steps // 10, 50)
    start = 0.0
    for i in range(steps):
        if i == warm:
            gc.collect()
            start = rss_mb()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    gc.collect()
    return start, rss_mb()


def graphs(n: int) -> tuple[float, float]:
    warm = max(n // 10, 10)
    start = 0.0
    x = fg.randn(8, 16)
    for i in range(n):
        if i == warm:
            gc.collect()
            start = rss_mb()
        lin = nn.Linear(16, 16)
        f = fg.compile(lambda t, lin=lin: lin(t).tanh().sum(dim=1))
        f(x)
        g = fg.Graph()
        with g:
            p = fg.placeholder(fg.float32, shape=(None, 16), name="p")
            q = (p * 2.0).relu().sum()
        fg.Session(g).run(q, feed={p: x})
        del f, g, lin
    gc.collect()
    return start, rss_mb()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--graphs", type=int, default=1_000)
    ap.add_argument("--max-growth-mb", type=float, default=5.0)
    a = ap.parse_args()
    ok = True
    for name, fn, n in (("training", training, a.steps), ("graphs", graphs, a.graphs)):
        t0 = time.perf_counter()
        start, end = fn(n)
        grow = end - start
        ok &= grow <= a.max_growth_mb
        print(
            f"{name}: {n} iterations in {time.perf_counter() - t0:.1f} s; RSS after warm-up {start:.1f} MB, "
            f"at the end {end:.1f} MB, growth {grow:+.2f} MB (bound {a.max_growth_mb} MB); "
            f"allocator in use {fg.memory_stats()['cpu.in_use_bytes'] / 2**20:.2f} MB"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
