"""Measure what the profiler's hook costs while no profiler is active: an
eager loop of small ops (``a + b`` on 16 float32 elements) in builds with
and without the hook, run in alternating processes (A, B, A, B, ...).

    python scripts/profiler_overhead.py BASE_PYTHON_DIR NEW_PYTHON_DIR [rounds]

Each directory holds a ``ferrograd`` package (with its built extension).
Prints, per build, the median and 90th percentile of the time per op over
all repetitions, and the ratio of the medians.
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
    for r in range(rounds):
        for p in (base, new) if r % 2 == 0 else (new, base):
            got[p] += run(p, 10_000, 5)
    for name, p in (("base", base), ("new", new)):
        xs = sorted(got[p])
        p90 = xs[int(0.9 * (len(xs) - 1))]
        print(f"{name}: median {statistics.median(xs):.1f} ns/op, p90 {p90:.1f} ns/op ({len(xs)} reps)")
    print(f"new/base (medians): {statistics.median(got[new]) / statistics.median(got[base]):.4f}")


if __name__ == "__main__":
    main()
