"""The workload suite: ferrograd against NumPy (always) and PyTorch / jax (when installed).

    python benches/run.py [--only W1a,W2,...] [--json out.json] [--repeats N]

Prints one table row per (workload, variant): ferrograd's figure, each peer's
figure and the ratio ferrograd ÷ peer. Time figures (µs, ms): a ratio below 1
means ferrograd is faster. Rate figures (GFLOP/s): a ratio above 1 means
ferrograd is faster. A row whose ferrograd result fails its correctness check
shows FAILED (no figure, no ratio), and the run then exits with status 1. Rooflines (copy and read bandwidth, a matmul stand-in for
the FMA peak) are measured in the same run; memory-bound workloads also report
the fraction of the roofline they reach. See benches/README.md.
"""

from __future__ import annotations

import os
import sys

# OpenBLAS tuning variables some environments set for their test runs would skew
# NumPy's matmul here: drop them for this process only (re-exec before NumPy loads).
_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in _BLAS_VARS) and "numpy" not in sys.modules:
    _env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
    _env["FG_BENCH_UNSET"] = ",".join(v for v in _BLAS_VARS if v in os.environ)
    os.execve(sys.executable, [sys.executable, *sys.argv], _env)

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402

import ferrograd as fg  # noqa: E402
import numpy as np  # noqa: E402
import workloads_compiled  # noqa: E402 - compiled rows and W8
import workloads_distributed  # noqa: E402 - W10
import workloads_gpu  # noqa: E402 - W9, the WebGPU device
import workloads_inference  # noqa: E402 - W11, CPU inference
import workloads_train  # noqa: E402 - W4–W7 (benches/ is on sys.path when this file runs)

F32 = np.float32
MiB = 1 << 20


class Missing(Exception):
    """A ferrograd op the workload needs is not in this build."""


def need(obj, *names):
    """``getattr`` chain that reports a missing op as :class:`Missing`."""
    for n in names:
        if not hasattr(obj, n):
            raise Missing(n)
        obj = getattr(obj, n)
    return obj


# ---------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------


def _try_import(name):
    try:
        return __import__(name), None
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return None, "not installed" if isinstance(e, ImportError) else f"import failed: {e}"


torch, _torch_why = _try_import("torch")
jax, _jax_why = _try_import("jax")
if jax is not None:
    import jax.numpy as jnp  # noqa: E402
else:
    jnp = None

PEERS = ["numpy"] + (["torch"] if torch else []) + (["jax"] if jax else [])
SKIPPED_PEERS = {n: why for n, why in (("torch", _torch_why), ("jax", _jax_why)) if why}


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def _block(fn, number):
    t0 = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - t0) * 1e-9 / number


def calibrate(fn, target=0.02, cap=100_000):
    """Calls per timed block so that a block lasts about ``target`` seconds (also warms up)."""
    fn()
    fn()
    n = 1
    while True:
        t = _block(fn, n)
        if t * n >= target or n >= cap:
            return n
        n = min(cap, max(n * 2, int(target / max(t, 1e-9) * 1.2)))


def _other_threads_cpu_ns() -> int | None:
    """CPU time (ns) used so far by this process's threads other than the calling one."""
    me = str(threading.get_native_id())
    total = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            if tid != me:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total


def quiesce(window=0.01, busy=0.05, cap=0.5):
    """Wait until the process's other threads are idle (at most ``cap`` seconds).

    Thread pools of the libraries side by side here keep spinning for a while
    after their last call (OpenBLAS's workers for up to about 0.1 s, OpenMP's
    for their spin count), taking cores from whatever runs next in the same
    process. Each timed block therefore starts once no other thread has used
    more than ``busy`` of a ``window`` of wall time. Where per-thread CPU times
    are unavailable (no /proc) this does nothing.

    The window spans several scheduler ticks: a thread that spins on a core
    without being descheduled has its run time (``schedstat``) brought up to
    date only at ticks (every 4 ms at 250 Hz), so a shorter window can see a
    spinning pool as idle. With a 2 ms window this returned at once after
    NumPy's matmuls while OpenBLAS's worker spun for another 0.1 s, and a
    ferrograd W4 step timed next ran 1.7x slower than on a quiet process.
    """
    end = time.perf_counter() + cap
    last = _other_threads_cpu_ns()
    if last is None:
        return
    while time.perf_counter() < end:
        time.sleep(window)
        now = _other_threads_cpu_ns()
        if now is None or now - last <= busy * window * 1e9:
            return
        last = now


def _deferred_count() -> int:
    """Elementwise ops ferrograd has deferred so far in this process (0 before that existed)."""
    stats = getattr(getattr(fg, "_core", None), "_defer_stats", None)
    return stats()[0] if stats else 0


def synced(fns: dict[str, Callable[[], object]]) -> tuple[dict[str, Callable[[], object]], bool]:
    """``fns`` with each ferrograd call that defers work followed by ``fg.synchronize()``.

    ferrograd may defer large elementwise results until they are read (and
    fuse chains of them); a timed call must include computing its result,
    as a jax call includes ``block_until_ready``. One trial call tells
    whether a function defers anything (the workloads are deterministic);
    those that do not are timed as they are, and the second value says
    whether any ferrograd function was left unsynced (:func:`measure` then
    checks that nothing was deferred while timing).
    """
    sync = getattr(fg, "synchronize", None)
    if sync is None:
        return fns, False

    def wrap(f):
        def g():
            r = f()
            sync()
            return r

        return g

    out, unsynced = {}, False
    for k, f in fns.items():
        if k.startswith("ferrograd"):
            before = _deferred_count()
            f()
            sync()
            if _deferred_count() != before:
                out[k] = wrap(f)
                continue
            unsynced = True
        out[k] = f
    return out, unsynced


def measure(fns: dict[str, Callable[[], object]], repeats: int, target=0.02) -> dict[str, float]:
    """Median seconds per call for each function, timed in interleaved blocks.

    Each repeat times one block of every function, rotating the order, so that
    clock and load drift affect all of them alike. Before each block the
    worker threads left spinning by the previous one go idle (see
    :func:`quiesce`). ferrograd's calls include computing deferred results
    (see :func:`synced`).
    """
    fns, unsynced = synced(fns)
    numbers = {k: calibrate(f, target) for k, f in fns.items()}
    deferred_before = _deferred_count()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    keys = list(fns)
    for r in range(repeats):
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        for k in order:
            quiesce()
            samples[k].append(_block(fns[k], numbers[k]))
    if unsynced and _deferred_count() != deferred_before:
        raise RuntimeError("a ferrograd call deferred work while timed without fg.synchronize()")
    return {k: statistics.median(v) for k, v in samples.items()}


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass
class Row:
    workload: str
    variant: str
    unit: str  # "us", "ms", "GFLOP/s", "GB/s"
    higher_is_better: bool
    values: dict[str, float | None] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    bytes_moved: float | None = None  # minimal bytes a memory-bound workload must move
    roofline: str | None = None  # "copy" or "read": the bandwidth it is judged against
    fraction: dict[str, float] = field(default_factory=dict)
    # The roofline's bandwidth (GB/s) measured side by side with this row's
    # implementations (see run_variant); the run-wide figure when missing.
    bandwidth: float | None = None
    # Implementations whose result failed the row's correctness check (name -> why):
    # not timed, shown as FAILED; a failed ferrograd makes the run's exit status 1.
    failed: dict[str, str] = field(default_factory=dict)

    def fail(self, name: str, why: str) -> None:
        """Mark ``name``'s result wrong: no figure, the reason in the notes."""
        self.values[name] = None
        self.failed[name] = why
        self.notes[name] = f"FAILED: {why}"


@dataclass
class Ctx:
    repeats: int
    rows: list[Row] = field(default_factory=list)
    rooflines: dict[str, float] = field(default_factory=dict)
    roofline_sources: dict[str, str] = field(default_factory=dict)


def na_note(e: BaseException) -> str:
    """The note for an implementation that could not run: ``n/a (op missing: …)`` or ``n/a (Error: …)``."""
    msg = (str(e).strip().splitlines() or [""])[0][:100]
    if isinstance(e, (Missing, AttributeError)):
        return f"n/a (op missing: {msg})"
    return f"n/a ({type(e).__name__}: {msg})"


def run_variant(
    ctx: Ctx,
    row: Row,
    impls: dict[str, Callable[[], Callable[[], object]]],
    scale: Callable[[float], float],
    check: Callable[[dict], None] | None = None,
    target: float = 0.02,
) -> Row:
    """Build each implementation (a setup returning the timed callable), time them together.

    ``scale`` turns seconds per call into the row's unit. A setup or first call raising
    :class:`Missing` / ``AttributeError`` marks that implementation "n/a (op missing: …)",
    any other exception "n/a (ExceptionType: message)".
    """
    fns: dict[str, Callable[[], object]] = {}
    for name, setup in impls.items():
        try:
            fns[name] = setup()
        except Exception as e:  # noqa: BLE001 - report, do not crash the suite
            row.values[name], row.notes[name] = None, na_note(e)
    # one call each to catch run-time errors and check results before timing
    outs = {}
    for name in list(fns):
        try:
            outs[name] = fns[name]()
        except Exception as e:  # noqa: BLE001
            row.values[name], row.notes[name] = None, na_note(e)
            del fns[name]
    if check is not None and "ferrograd" in outs and "numpy" in outs:
        try:
            check(outs)
        except Exception as e:  # noqa: BLE001 - any failure of the check fails the row
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
            detail = (
                "; ".join(ln for ln in lines if ln.startswith(("Mismatch", "Max "))) or (lines or [""])[0]
            )
            row.fail("ferrograd", f"result differs from NumPy: {detail[:160]}")
            del fns["ferrograd"]  # a wrong result is not timed
    del outs
    probes = bandwidth_probes(row) if fns else {}
    if fns:
        times = measure({**fns, **probes}, ctx.repeats, target)
        for name in fns:
            row.values[name] = scale(times[name])
        if probes:
            row.bandwidth = row.bytes_moved / min(times[k] for k in probes) / 1e9
    ctx.rows.append(row)
    return row


def bandwidth_probes(row: Row) -> dict[str, Callable[[], object]]:
    """For a row judged against a roofline: a copy (or a read) that moves as
    many bytes as the row's workload, by NumPy and by ferrograd, to time with
    the row's implementations. The machine's memory bandwidth drifts (by up
    to half between minutes here), so a bandwidth measured once at the start
    made the row's share of it swing with the drift."""
    if not row.bytes_moved or row.roofline not in ("copy", "read"):
        return {}
    if row.roofline == "copy":
        n = int(row.bytes_moved) // 8  # read n floats, write n floats
        src, dst = rng_array(n, 1), np.empty(n, F32)
        fsrc, fdst = fg.from_numpy(src.copy()), fg.from_numpy(np.empty(n, F32))
        return {" copy/numpy": lambda: np.copyto(dst, src), " copy/ferrograd": lambda: fdst.copy_(fsrc)}
    n = int(row.bytes_moved) // 4
    src = rng_array(n, 1)
    fsrc = fg.from_numpy(src.copy())
    return {" read/numpy": lambda: src.sum(), " read/ferrograd": lambda: fsrc.sum()}


def us(s):
    return s * 1e6


def ms(s):
    return s * 1e3


def close(rtol=1e-4, atol=1e-5):
    def check(outs):
        a = np.asarray(outs["ferrograd"], dtype=np.float64)
        b = np.asarray(outs["numpy"], dtype=np.float64)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)

    return check


def rng_array(shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(F32)


def fgt(a):
    return fg.from_numpy(np.ascontiguousarray(a))


def torch_t(a):
    return torch.from_numpy(np.array(a, copy=True))


# ---------------------------------------------------------------------------
# Rooflines
# ---------------------------------------------------------------------------


def roofline_bandwidth(ctx: Ctx):
    n = 1 << 25  # 128 MiB of float32: far beyond the caches
    src, dst = rng_array(n, 1), np.empty(n, F32)
    fsrc, fdst = fg.from_numpy(src.copy()), fg.from_numpy(np.empty(n, F32))
    copy_impls = {"numpy np.copyto": lambda: np.copyto(dst, src), "ferrograd copy_": lambda: fdst.copy_(fsrc)}
    t = measure(copy_impls, max(ctx.repeats, 5), target=0.05)
    best = min(t, key=t.get)
    ctx.rooflines["copy_GBps"] = 2 * n * 4 / t[best] / 1e9
    ctx.roofline_sources["copy_GBps"] = best

    read_impls = {
        "numpy sum": lambda: src.sum(),
        "numpy max": lambda: src.max(),
        "numpy dot(x, x)": lambda: np.dot(src, src),
    }
    for name, fn in (("ferrograd sum", lambda: fsrc.sum()), ("ferrograd max", lambda: fsrc.max())):
        try:
            fn()
            read_impls[name] = fn
        except (AttributeError, TypeError):
            pass
    t = measure(read_impls, max(ctx.repeats, 5), target=0.05)
    best = min(t, key=t.get)
    ctx.rooflines["read_GBps"] = n * 4 / t[best] / 1e9
    ctx.roofline_sources["read_GBps"] = best


def roofline_fma(ctx: Ctx):
    """Best large-matmul GFLOP/s seen (W2), else a dedicated NumPy n=1024 run."""
    best, src = 0.0, None
    for r in ctx.rows:
        if r.workload == "W2" and r.variant.startswith("n="):
            for peer in ("ferrograd", "numpy"):
                v = r.values.get(peer)
                if v and v > best:
                    best, src = v, f"{peer} matmul {r.variant}"
    if src is None:
        n = 1024
        a, b = rng_array((n, n), 1), rng_array((n, n), 2)
        t = measure({"np": lambda: a @ b}, max(ctx.repeats, 5), target=0.05)["np"]
        best, src = 2 * n**3 / t / 1e9, f"numpy matmul n={n}"
    ctx.rooflines["fma_GFLOPs"] = best
    ctx.roofline_sources["fma_GFLOPs"] = src


# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------


def w1a(ctx: Ctx):
    a_np, b_np = rng_array(16, 1), rng_array(16, 2)

    def f_fg():
        a, b = fgt(a_np), fgt(b_np)
        return lambda: a + b

    def f_np():
        return lambda: a_np + b_np

    impls = {"ferrograd": f_fg, "numpy": f_np}
    if torch:

        def f_torch():
            a, b = torch_t(a_np), torch_t(b_np)
            return lambda: a + b

        impls["torch"] = f_torch
    if jax:

        def f_jax():
            a, b = jnp.asarray(a_np), jnp.asarray(b_np)
            return lambda: (a + b).block_until_ready()

        impls["jax"] = f_jax
    run_variant(ctx, Row("W1a", "c = a + b, (16,)", "us", False), impls, us, close(), target=0.005)


def w1b(ctx: Ctx):
    row = Row("W1b", "((a*b)+a).sum().backward(), (16,)", "us", False)
    a_np, b_np = rng_array(16, 1), rng_array(16, 2)

    def f_fg():
        need(fg.Tensor, "backward")
        need(fg.Tensor, "requires_grad_")
        need(fg.Tensor, "sum")
        a = fgt(a_np).requires_grad_()
        b = fgt(b_np).requires_grad_()

        def step():
            a.grad = None
            b.grad = None
            ((a * b) + a).sum().backward()

        return step

    impls = {}
    if hasattr(fg.Tensor, "backward"):
        impls["ferrograd"] = f_fg
    else:
        row.values["ferrograd"], row.notes["ferrograd"] = None, "skipped: autograd is not in this build yet"
    row.values["numpy"], row.notes["numpy"] = None, "n/a (no autograd)"
    if torch:

        def f_torch():
            a = torch_t(a_np).requires_grad_()
            b = torch_t(b_np).requires_grad_()

            def step():
                a.grad = None
                b.grad = None
                ((a * b) + a).sum().backward()

            return step

        impls["torch"] = f_torch
    if jax:

        def f_jax():
            g = jax.jit(jax.grad(lambda a, b: ((a * b) + a).sum(), argnums=(0, 1)))
            a, b = jnp.asarray(a_np), jnp.asarray(b_np)
            return lambda: jax.block_until_ready(g(a, b))

        impls["jax"] = f_jax
    run_variant(ctx, row, impls, us, target=0.005)


def _matmul_impls(a_np, b_np, ta=False, tb=False):
    """``A @ B`` where A/B are given (pre-transposed storage when ta/tb: the operand is a .T view)."""

    def prep_np():
        a = a_np.T if ta else a_np
        b = b_np.T if tb else b_np
        return lambda: a @ b

    def prep_fg():
        if not hasattr(fg.Tensor, "__matmul__"):
            raise Missing("matmul")
        a, b = fgt(a_np), fgt(b_np)
        a = a.T if ta else a
        b = b.T if tb else b
        return lambda: a @ b

    impls = {"ferrograd": prep_fg, "numpy": prep_np}
    if torch:

        def prep_torch():
            a, b = torch_t(a_np), torch_t(b_np)
            a = a.T if ta else a
            b = b.T if tb else b
            return lambda: a @ b

        impls["torch"] = prep_torch
    if jax:

        def prep_jax():
            a, b = jnp.asarray(a_np), jnp.asarray(b_np)
            f = jax.jit(lambda x, y: (x.T if ta else x) @ (y.T if tb else y))
            return lambda: f(a, b).block_until_ready()

        impls["jax"] = prep_jax
    return impls


def w2(ctx: Ctx):
    for n in (128, 512, 1024, 2048):
        a, b = rng_array((n, n), 1), rng_array((n, n), 2)
        flops = 2.0 * n**3
        run_variant(
            ctx,
            Row("W2", f"n={n}", "GFLOP/s", True),
            _matmul_impls(a, b),
            lambda s, f=flops: f / s / 1e9,
            close(rtol=2e-3, atol=2e-3),
            target=0.05,
        )
    # W4's GEMMs: forward x@W, and the backward forms with transposed operands
    shapes = [
        ("256x784 @ 784x1024", (256, 784), (784, 1024), False, False),
        ("256x1024 @ 1024x1024", (256, 1024), (1024, 1024), False, False),
        ("256x1024 @ 1024x10", (256, 1024), (1024, 10), False, False),
        ("x.T@g 784x256 @ 256x1024", (256, 784), (256, 1024), True, False),
        ("g@W.T 256x1024 @ 1024x784", (256, 1024), (784, 1024), False, True),
    ]
    for name, sa, sb, ta, tb in shapes:
        a, b = rng_array(sa, 3), rng_array(sb, 4)
        m = sa[1] if ta else sa[0]
        k = sa[0] if ta else sa[1]
        nn = sb[0] if tb else sb[1]
        flops = 2.0 * m * k * nn
        run_variant(
            ctx,
            Row("W2", name, "GFLOP/s", True),
            _matmul_impls(a, b, ta, tb),
            lambda s, f=flops: f / s / 1e9,
            close(rtol=2e-3, atol=2e-3),
            target=0.05,
        )


N24 = 1 << 24


def _gelu_np(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x * x * x)))


def _softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm_np(x, w, b, eps=1e-5):
    """As a careful NumPy user writes it: one mean, one variance from the centred values
    (``x.var`` would compute the mean a second time)."""
    m = x.mean(axis=-1, keepdims=True)
    d = x - m
    v = np.mean(d * d, axis=-1, keepdims=True)
    return d / np.sqrt(v + eps) * w + b


def w3(ctx: Ctx, which: str):
    """W3a–W3e: memory-bound eager kernels (float32)."""
    F = fg.nn.functional
    if which == "W3a":
        x, y, z = rng_array(N24, 1), rng_array(N24, 2), rng_array(N24, 3)
        row = Row("W3a", "x*y+z, 2^24", "ms", False, bytes_moved=4 * 4 * N24, roofline="copy")

        def f_fg():
            # Tensors of ferrograd's own (copies, as jnp.asarray makes): the
            # product is deferred and fused into the sum (see fg.synchronize).
            a, b, c = fg.tensor(x), fg.tensor(y), fg.tensor(z)
            return lambda: a * b + c

        impls = {"ferrograd": f_fg, "numpy": lambda: lambda: x * y + z}
        if torch:

            def f_torch():
                a, b, c = torch_t(x), torch_t(y), torch_t(z)
                return lambda: a * b + c

            impls["torch"] = f_torch
        if jax:

            def f_jax():
                a, b, c = jnp.asarray(x), jnp.asarray(y), jnp.asarray(z)
                f = jax.jit(lambda p, q, r: p * q + r)
                return lambda: f(a, b, c).block_until_ready()

            impls["jax"] = f_jax
        run_variant(ctx, row, impls, ms, close())

        # The same on memory shared with NumPy (fg.from_numpy), which NumPy
        # may change at any time: nothing is deferred, two passes.
        shared = Row(
            "W3a", "x*y+z, 2^24, from_numpy inputs", "ms", False, bytes_moved=4 * 4 * N24, roofline="copy"
        )

        def f_fg_shared():
            a, b, c = fgt(x), fgt(y), fgt(z)
            return lambda: a * b + c

        run_variant(ctx, shared, {"ferrograd": f_fg_shared, "numpy": lambda: lambda: x * y + z}, ms, close())
    elif which == "W3b":
        x = rng_array(N24, 1, -4, 4)
        row = Row("W3b", "tanh-GELU, 2^24", "ms", False, bytes_moved=2 * 4 * N24, roofline="copy")

        def f_fg():
            gelu = need(F, "gelu")
            a = fgt(x)
            return lambda: gelu(a, approximate="tanh")

        impls = {"ferrograd": f_fg, "numpy": lambda: lambda: _gelu_np(x)}
        if torch:

            def f_torch():
                a = torch_t(x)
                return lambda: torch.nn.functional.gelu(a, approximate="tanh")

            impls["torch"] = f_torch
        if jax:

            def f_jax():
                a = jnp.asarray(x)
                f = jax.jit(lambda p: jax.nn.gelu(p, approximate=True))
                return lambda: f(a).block_until_ready()

            impls["jax"] = f_jax
        run_variant(ctx, row, impls, ms, close(rtol=1e-4, atol=1e-5))
    elif which == "W3c":
        x = rng_array((4096, 1024), 1, -4, 4)
        row = Row(
            "W3c", "softmax(dim=-1), (4096,1024)", "ms", False, bytes_moved=2 * 4 * x.size, roofline="copy"
        )

        def f_fg():
            a = fgt(x)
            if hasattr(F, "softmax"):
                return lambda: F.softmax(a, dim=-1)
            sm = need(fg.Tensor, "softmax")
            return lambda: sm(a, -1)

        impls = {"ferrograd": f_fg, "numpy": lambda: lambda: _softmax_np(x)}
        if torch:

            def f_torch():
                a = torch_t(x)
                return lambda: torch.softmax(a, dim=-1)

            impls["torch"] = f_torch
        if jax:

            def f_jax():
                a = jnp.asarray(x)
                f = jax.jit(lambda p: jax.nn.softmax(p, axis=-1))
                return lambda: f(a).block_until_ready()

            impls["jax"] = f_jax
        run_variant(ctx, row, impls, ms, close(rtol=1e-4, atol=1e-7))
    elif which == "W3d":
        x = rng_array((4096, 1024), 1)
        w, b = rng_array(1024, 2, 0.5, 1.5), rng_array(1024, 3)
        row = Row(
            "W3d",
            "layer_norm(dim=-1)+w,b, (4096,1024)",
            "ms",
            False,
            bytes_moved=2 * 4 * x.size,
            roofline="copy",
        )

        def f_fg():
            a, fw, fb = fgt(x), fgt(w), fgt(b)
            ln = need(F, "layer_norm")
            return lambda: ln(a, (1024,), fw, fb, 1e-5)

        impls = {"ferrograd": f_fg, "numpy": lambda: lambda: _layer_norm_np(x, w, b)}
        if torch:

            def f_torch():
                a, tw, tb = torch_t(x), torch_t(w), torch_t(b)
                return lambda: torch.nn.functional.layer_norm(a, (1024,), tw, tb, 1e-5)

            impls["torch"] = f_torch
        if jax:

            def f_jax():
                a, jw, jb = jnp.asarray(x), jnp.asarray(w), jnp.asarray(b)

                def ln(p, q, r):
                    m = p.mean(-1, keepdims=True)
                    d = p - m
                    v = (d * d).mean(-1, keepdims=True)
                    return d / jnp.sqrt(v + 1e-5) * q + r

                f = jax.jit(ln)
                return lambda: f(a, jw, jb).block_until_ready()

            impls["jax"] = f_jax
        run_variant(ctx, row, impls, ms, close(rtol=1e-3, atol=1e-4))
    elif which == "W3e":
        x = rng_array(N24, 1)
        row = Row("W3e", "sum, 2^24", "ms", False, bytes_moved=4 * N24, roofline="read")

        def f_fg():
            s = need(fg.Tensor, "sum")
            a = fgt(x)
            return lambda: s(a)

        impls = {"ferrograd": f_fg, "numpy": lambda: lambda: x.sum()}
        if torch:

            def f_torch():
                a = torch_t(x)
                return lambda: a.sum()

            impls["torch"] = f_torch
        if jax:

            def f_jax():
                a = jnp.asarray(x)
                f = jax.jit(jnp.sum)
                return lambda: f(a).block_until_ready()

            impls["jax"] = f_jax
        run_variant(ctx, row, impls, ms, close(rtol=1e-3, atol=1e-2))


WORKLOADS: dict[str, Callable[[Ctx], None]] = {
    "W1a": w1a,
    "W1b": w1b,
    "W2": w2,
    "W3a": lambda c: w3(c, "W3a"),
    "W3b": lambda c: w3(c, "W3b"),
    "W3c": lambda c: w3(c, "W3c"),
    "W3d": lambda c: w3(c, "W3d"),
    "W3e": lambda c: w3(c, "W3e"),
    **{w: (lambda c, f=f: f(sys.modules[__name__], c)) for w, f in workloads_train.WORKLOADS.items()},
    **{w: (lambda c, f=f: f(sys.modules[__name__], c)) for w, f in workloads_compiled.WORKLOADS.items()},
    **{w: (lambda c, f=f: f(sys.modules[__name__], c)) for w, f in workloads_gpu.WORKLOADS.items()},
    **{w: (lambda c, f=f: f(sys.modules[__name__], c)) for w, f in workloads_distributed.WORKLOADS.items()},
    **{w: (lambda c, f=f: f(sys.modules[__name__], c)) for w, f in workloads_inference.WORKLOADS.items()},
}
NOT_YET: dict[str, str] = {}


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def fmt(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def ratio_text(row: Row, peer: str) -> str:
    if row.failed.get("ferrograd") or row.failed.get(peer):
        return "—"
    a, b = row.values.get("ferrograd"), row.values.get(peer)
    if not a or not b:
        return "—"
    r = a / b
    better = r > 1 if row.higher_is_better else r < 1
    if row.unit == "MB":
        return f"{r:.2f} {'smaller' if better else 'larger'}"
    return f"{r:.2f} {'faster' if better else 'slower'}"


def fill_fractions(ctx: Ctx):
    for r in ctx.rows:
        if r.bytes_moved and r.roofline:
            bw = r.bandwidth or ctx.rooflines.get(f"{r.roofline}_GBps")
            if not bw:
                continue
            for peer, v in r.values.items():
                if v:
                    sec = v / 1e3 if r.unit == "ms" else v / 1e6
                    r.fraction[peer] = r.bytes_moved / sec / 1e9 / bw


def print_table(ctx: Ctx):
    # the run's peers, then any other implementation a row measured (W11's onnxruntime columns)
    peers = list(PEERS)
    for r in ctx.rows:
        peers += [k for k in r.values if k != "ferrograd" and not k.startswith(" ") and k not in peers]
    head = ["workload", "variant", "unit", "ferrograd"]
    for p in peers:
        head += [p, f"fg÷{p}"]
    head += ["fg roofline", "np roofline"]
    lines = []
    for r in ctx.rows:
        unit = {"us": "µs", "ms": "ms"}.get(r.unit, r.unit)

        def cell(p, r=r):
            return "FAILED" if p in r.failed else fmt(r.values.get(p))

        cells = [r.workload, r.variant, unit, cell("ferrograd")]
        for p in peers:
            cells += [cell(p), ratio_text(r, p)]
        cells += [
            f"{r.fraction['ferrograd']:.0%}" if "ferrograd" in r.fraction else "—",
            f"{r.fraction['numpy']:.0%}" if "numpy" in r.fraction else "—",
        ]
        lines.append(cells)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]

    def show(cells):
        print("  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())

    show(head)
    show(["-" * w for w in widths])
    for cells in lines:
        show(cells)
    notes = [(r.workload, r.variant, p, n) for r in ctx.rows for p, n in r.notes.items()]
    if notes:
        print("\nnotes:")
        for w, v, p, n in notes:
            print(f"  {w} [{v}] {p}: {n}")
    print(
        "\nratios: ferrograd ÷ peer. Times (µs, ms): below 1 = ferrograd faster. "
        "GFLOP/s: above 1 = ferrograd faster."
    )
    print(
        "roofline: bytes the workload must move ÷ time ÷ bandwidth (copy bandwidth for read+write, "
        "read bandwidth for reductions), the bandwidth timed side by side with the row: a copy (or sum) "
        "of as many bytes."
    )


def machine_info():
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "ferrograd": getattr(fg, "__version__", "?"),
        "ferrograd_cpu_level": fg.cpu_level(),
        "ferrograd_threads": fg.get_num_threads(),
        "unset_env": os.environ.get("FG_BENCH_UNSET", ""),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if torch:
        info["torch"] = torch.__version__
    if jax:
        info["jax"] = jax.__version__
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated workload ids (e.g. W1a,W2,W3c,W4)")
    ap.add_argument("--json", help="write the results to this JSON file")
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats per figure (median; at least 5)")
    args = ap.parse_args(argv)
    repeats = max(5, args.repeats)
    chosen = list(WORKLOADS) if not args.only else [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in chosen if w not in WORKLOADS and w not in NOT_YET]
    if unknown:
        ap.error(f"unknown workload(s) {unknown}; known: {list(WORKLOADS) + list(NOT_YET)}")

    ctx = Ctx(repeats=repeats)
    info = machine_info()
    print(
        f"ferrograd {info['ferrograd']} ({info['ferrograd_cpu_level']}, {info['ferrograd_threads']} threads), "
        f"NumPy {info['numpy']}, {info.get('cpu', platform.processor())}, {info['cpu_count']} CPUs"
    )
    if os.environ.get("FG_BENCH_UNSET"):
        print(f"unset for this run: {os.environ['FG_BENCH_UNSET']}")
    for p, why in SKIPPED_PEERS.items():
        print(f"peer {p}: skipped: {why}")
    roofline_bandwidth(ctx)
    for w in chosen:
        if w in NOT_YET:
            print(f"{w}: skipped: {NOT_YET[w]}")
            continue
        WORKLOADS[w](ctx)
    roofline_fma(ctx)
    fill_fractions(ctx)
    print(
        f"\nrooflines: copy {ctx.rooflines['copy_GBps']:.1f} GB/s ({ctx.roofline_sources['copy_GBps']}), "
        f"read {ctx.rooflines['read_GBps']:.1f} GB/s ({ctx.roofline_sources['read_GBps']}), "
        f"FMA stand-in {ctx.rooflines['fma_GFLOPs']:.0f} GFLOP/s ({ctx.roofline_sources['fma_GFLOPs']})"
        + (
            f", WebGPU adapter FMA {ctx.rooflines['gpu_fma_GFLOPs']:.1f} GFLOP/s"
            if "gpu_fma_GFLOPs" in ctx.rooflines
            else ""
        )
        + "\n"
    )
    print_table(ctx)
    failed = [r for r in ctx.rows if "ferrograd" in r.failed]
    if failed:
        print(f"\nFAILED: {len(failed)} row(s) where ferrograd's result is wrong:")
        for r in failed:
            print(f"  {r.workload} [{r.variant}]: {r.failed['ferrograd']}")
    if args.json:
        out = {
            "machine": info,
            "repeats": repeats,
            "peers": PEERS,
            "skipped_peers": SKIPPED_PEERS,
            "not_yet": {w: NOT_YET[w] for w in chosen if w in NOT_YET},
            "rooflines": ctx.rooflines,
            "roofline_sources": ctx.roofline_sources,
            "results": [asdict(r) for r in ctx.rows],
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print(f"\nwrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
