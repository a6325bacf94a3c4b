"""Measure what the profiler's hook costs while no profiler is active: an
eager loop of small ops (``a + b`` on 16 float32 elements) in builds with
and without the hook, run in alternating processes (A, B, A, B, ...).

    python scripts/profiler_overhead.py BASE_PYTHON_DIR NEW_PYTHON_DIR [rounds]

Each directory holds a ``ferrograd`` package (with its built extension).
Prints, per build, the median and 90th percentile of the time per op over
all repetitions, the ratio of the medians, and the median of the ratios of
back-to-back pairs (robust to the machine's load changing during the run).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

CHILD = r"""
import time, ferrograd as fg
a = fg.ones(16); b = fg.ones(16)
for _ in range(2000): a + b
out = []
for _ in range(REPS):
    t = time.perf_counter_ns()
    for _ in range(N): a + b
    out.append((time.perf_counter_ns() - t) / N)
print(" ".join(f"{x:.2f}" for x in out))
"""


def run(path: str, n: int, reps: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=path)
    code = CHILD.replace("REPS", str(reps)).replace("N)", f"{n})")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    base, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    got: dict[str, list[float]] = {base: [], new: []}
    ratios = []  # per round: new's median over base's, from back-to-back processes
    for r in range(rounds):
        this = {}
        for p in (base, new) if r % 2 == 0 else (new, base):
            this[p] = run(p, 10_000, 5)
            got[p] += this[p]
        ratios.append(statistics.median(this[new]) / statistics.median(this[base]))
    for name, p in (("base", base), ("new", new)):
        xs = sorted(got[p])
        p90 = xs[int(0.9 * (len(xs) - 1))]
        print(f"{name}: median {statistics.median(xs):.1f} ns/op, p90 {p90:.1f} ns/op ({len(xs)} reps)")
    print(f"new/base (medians): {statistics.median(got[new]) / statistics.median(got[base]):.4f}")
    print(f"new/base per round: median {statistics.median(ratios):.4f} over {rounds} rounds")


if __name__ == "__main__":
    main()
