"""W11: CPU inference latency under ``no_grad`` (imported by ``run.py``).

W6's GPT (batch 1 and 16, seq 128) and W5's CNN (batch 1 and 64), float32,
with the weights of ``workloads_train``. For each model and batch, ferrograd
runs it three ways:

- **eager**: ``model.eval()`` called under ``fg.no_grad()``;
- **compiled**: ``fg.compile(model.eval())`` (no arguments), called under
  ``fg.no_grad()``; its graph count, graph breaks, kernels and allocations per
  call are printed;
- **runner**: the compiled graph written by ``Graph.save`` and run by the
  crate's Rust-only ``run_graph`` example (``FG_RUN_GRAPH_BIN``, else
  ``target/{release,debug}/examples/run_graph``; skipped, saying why, when it
  is not built). One runner process loads and plans the graph once, runs it
  once for the check, then ``--time N`` more times: the figures are those N
  in-process runs (a deployment's steady state); the row's note gives the
  median time of a whole process (start, load, plan, one run) too.

Peers, each given the same thread count (``fg.set_num_threads``,
``torch.set_num_threads``, onnxruntime's ``intra_op_num_threads``):
onnxruntime on ``fg.onnx.export`` of the model, onnxruntime on
``torch.onnx.export`` of the same model in PyTorch (when both import), and
PyTorch eager under ``torch.inference_mode()``. A peer that cannot be
imported is skipped with the reason printed.

Every call is timed on its own (ferrograd's ending with ``fg.synchronize()``
where it defers work), in interleaved blocks as ``run.py`` times other rows;
the figures are the 50th, 90th and 99th percentiles of all calls (ms).

Checks before timing, against ferrograd eager: the compiled model and the
runner within rtol 1e-5 / atol 1e-6; the peers within rtol ``PEER_RTOL`` /
atol ``PEER_ATOL`` (float32 kernels summing in another order). A mismatch
fails the row (FAILED, exit status 1).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import workloads_train as wt

COMPILED_RTOL, COMPILED_ATOL = 1e-5, 1e-6
# Peers compute in float32 with other kernels (blocking, summation order, fused
# attention / GELU): relative to the largest output, differences of a few 1e-6
# are expected; 1e-4 leaves a wide margin and still catches a wrong op.
PEER_RTOL, PEER_ATOL = 1e-4, 1e-4
RUNNER_CALLS = 5  # process launches timed for the runner row
TARGET = 0.05  # seconds per timed block

PEER_COLUMNS = ("ort(fg.onnx)", "ort(torch.onnx)", "torch")


@dataclass
class Case:
    model: str  # "gpt" or "cnn"
    label: str
    batch: int


CASES = [
    Case("gpt", "GPT 4x256, seq 128", 1),
    Case("gpt", "GPT 4x256, seq 128", 16),
    Case("cnn", "MNIST CNN", 1),
    Case("cnn", "MNIST CNN", 64),
]


def _inputs(case: Case) -> np.ndarray:
    if case.model == "gpt":
        return wt.gpt_data(seed=3, n=1, batch=case.batch)[0][0]
    return np.random.default_rng(3).standard_normal((case.batch, 1, 28, 28), dtype=wt.F32)


def _params(case: Case) -> dict[str, np.ndarray]:
    return wt.gpt_params() if case.model == "gpt" else wt.cnn_params()


def _make(case: Case):
    return wt.gpt_model if case.model == "gpt" else wt.cnn_model


def runner_binary() -> Path | None:
    """The Rust runner (``run_graph`` example), or None where it is not built."""
    env = os.environ.get("FG_RUN_GRAPH_BIN")
    if env:
        return Path(env) if Path(env).exists() else None
    root = Path(__file__).resolve().parents[1]
    for profile in ("release", "debug"):
        p = root / "target" / profile / "examples" / "run_graph"
        if p.exists():
            return p
    return None


def _import(name):
    try:
        return __import__(name), None
    except Exception as e:  # noqa: BLE001 - any failure means "not available"
        return None, "not installed" if isinstance(e, ImportError) else f"import failed: {e}"


# ---------------------------------------------------------------------------
# Timing: every call on its own, percentiles
# ---------------------------------------------------------------------------


def _calls_per_block(fn, target: float) -> int:
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return max(5, min(1000, int(target / max(t, 1e-7))))


def time_calls(rt, fns: dict[str, Callable[[], object]], repeats: int, target: float | None = None):
    """Seconds of every single call of each function: ``repeats`` interleaved blocks in a
    rotated order, each started once other threads are idle (``rt.quiesce``); ferrograd's
    calls that defer work end with ``fg.synchronize()`` (``rt.synced``)."""
    target = TARGET if target is None else target
    fns, unsynced = rt.synced(fns)
    numbers = {
        k: (RUNNER_CALLS if k.endswith("runner") else _calls_per_block(f, target)) for k, f in fns.items()
    }
    deferred_before = rt._deferred_count()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    keys = list(fns)
    for r in range(repeats):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            if k.endswith("runner") and r:
                continue  # a process per call: one block is enough
            rt.quiesce()
            f, out = fns[k], samples[k]
            for _ in range(numbers[k]):
                t0 = time.perf_counter_ns()
                f()
                out.append((time.perf_counter_ns() - t0) * 1e-9)
    if unsynced and rt._deferred_count() != deferred_before:
        raise RuntimeError("a ferrograd call deferred work while timed without fg.synchronize()")
    return samples


def percentiles(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples) * 1e3
    return {
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
    }


# ---------------------------------------------------------------------------
# Implementations (each a setup returning the timed callable; its call returns a NumPy array)
# ---------------------------------------------------------------------------


def _fg_model(fg, case):
    return wt._loaded(fg, _make(case), _params(case)).eval()


def fg_eager(fg, case, x):
    model, xt = _fg_model(fg, case), wt._to_fw(fg, x)

    def run():
        with fg.no_grad():
            return model(xt)

    return run


def fg_compiled(fg, case, x, info: dict):
    model, xt = _fg_model(fg, case), wt._to_fw(fg, x)
    cm = fg.compile(model.eval())

    def run():
        with fg.no_grad():
            return cm(xt)

    run()
    run()
    s = cm.stats
    info["explain"] = (
        f"graphs {s.traces}, graph breaks {s.graph_breaks}, nodes {s.nodes}, "
        f"kernels/call {s.kernels_per_call}, allocations/call {s.allocations_per_call}, "
        f"capture {sum(s.capture_seconds):.3f} s"
    )
    info["compiled"] = cm
    info["input"] = xt
    return run


def fg_runner(fg, case, x, info: dict, tmp: Path):
    exe = runner_binary()
    if exe is None:
        raise _Skip(
            "Rust runner not built (cargo build --release --no-default-features --example run_graph, "
            "or set FG_RUN_GRAPH_BIN)"
        )
    cm = info["compiled"]
    with fg.no_grad():
        g = cm.graph(info["input"])
    path = tmp / f"{case.model}{case.batch}.fgraph"
    g.save(path)
    np.save(tmp / "x.npy", x)
    out_dir = tmp / "out"
    cmd = [str(exe), str(path), str(tmp / "x.npy"), "--out", str(out_dir)]

    def run():
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode:
            raise RuntimeError(f"run_graph exited {r.returncode}: {r.stderr.strip()[:200]}")
        return np.load(out_dir / "output0.npy")

    def timed(n: int) -> list[float]:
        """Seconds of ``n`` runs of the graph in one runner process (after its first run)."""
        r = subprocess.run([*cmd, "--time", str(n)], capture_output=True, text=True, timeout=600)
        if r.returncode:
            raise RuntimeError(f"run_graph exited {r.returncode}: {r.stderr.strip()[:200]}")
        times = [
            float(line.split()[1]) * 1e-3 for line in r.stdout.splitlines() if line.startswith("time_ms ")
        ]
        if len(times) != n:
            raise RuntimeError(f"run_graph --time {n} printed {len(times)} times")
        return times

    info["runner_timed"] = timed
    return run


class _Skip(Exception):
    """An implementation that cannot run here, with the reason."""


def ort_session(ort, model: bytes | str, threads: int):
    """An onnxruntime CPU session on ``model`` (bytes, or a file path: exports that keep the
    weights in a data file beside the model must be loaded from their path)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_fg(fg, ort, case, x, threads):
    model = _fg_model(fg, case)
    proto = fg.onnx.export(model, (wt._to_fw(fg, x),))
    sess = ort_session(ort, proto.SerializeToString(), threads)
    name = sess.get_inputs()[0].name
    feed = {name: x}
    return lambda: sess.run(None, feed)[0]


def _torch_model(torch, case):
    return wt._loaded(torch, _make(case), _params(case)).eval()


def ort_torch(torch, ort, case, x, threads, tmp: Path):
    model, xt = _torch_model(torch, case), torch.from_numpy(x.copy())
    path = tmp / f"torch_{case.model}{case.batch}.onnx"
    torch.onnx.export(model, (xt,), str(path), input_names=["x"], output_names=["y"])
    sess = ort_session(ort, str(path), threads)
    feed = {"x": x}
    return lambda: sess.run(None, feed)[0]


def torch_eager(torch, case, x):
    model, xt = _torch_model(torch, case), torch.from_numpy(x.copy())

    def run():
        with torch.inference_mode():
            return model(xt)

    return run


def _np(v) -> np.ndarray:
    if hasattr(v, "detach"):  # PyTorch
        v = v.detach().numpy()
    return np.asarray(v, dtype=np.float64)


def _differs(got, ref, rtol, atol) -> str | None:
    a, b = _np(got), _np(ref)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    err = np.abs(a - b)
    bad = err > atol + rtol * np.abs(b)
    if not np.all(np.isfinite(a)) or bad.any():
        return f"max abs diff {float(err.max()):.3g} ({int(bad.sum())} of {a.size} beyond rtol {rtol:g}, atol {atol:g})"
    return None


# ---------------------------------------------------------------------------
# The workload
# ---------------------------------------------------------------------------


def _peers(rt):
    ort, ort_why = _import("onnxruntime")
    onnx, onnx_why = _import("onnx")
    return ort, ort_why, onnx, onnx_why


def run_case(rt, ctx, case: Case, threads: int, tmp: Path, peers) -> None:
    fg, torch = rt.fg, rt.torch
    ort, ort_why, onnx, onnx_why = peers
    x = _inputs(case)
    info: dict = {}
    builders: dict[str, Callable[[], Callable[[], object]]] = {
        "eager": lambda: fg_eager(fg, case, x),
        "compiled": lambda: fg_compiled(fg, case, x, info),
        "runner": lambda: fg_runner(fg, case, x, info, tmp),
    }
    peer_builders: dict[str, Callable[[], Callable[[], object]] | str] = {}
    if ort is None or onnx is None:
        why = f"onnxruntime {ort_why}" if ort is None else f"onnx {onnx_why}"
        peer_builders["ort(fg.onnx)"] = f"skipped: {why}"
        peer_builders["ort(torch.onnx)"] = f"skipped: {why}"
    else:
        peer_builders["ort(fg.onnx)"] = lambda: ort_fg(fg, ort, case, x, threads)
        peer_builders["ort(torch.onnx)"] = (
            (lambda: ort_torch(torch, ort, case, x, threads, tmp))
            if torch
            else f"skipped: torch {rt._torch_why}"
        )
    peer_builders["torch"] = (
        (lambda: torch_eager(torch, case, x)) if torch else f"skipped: torch {rt._torch_why}"
    )

    fns: dict[str, Callable[[], object]] = {}
    notes: dict[str, str] = {}
    outs: dict[str, object] = {}
    for name, b in [*builders.items(), *peer_builders.items()]:
        if isinstance(b, str):
            notes[name] = b
            continue
        try:
            fn = b()
            outs[name] = _np(fn())
            fns[name] = fn
        except _Skip as e:
            notes[name] = f"skipped: {e}"
        except Exception as e:  # noqa: BLE001 - report, do not crash the suite
            notes[name] = rt.na_note(e)

    failed: dict[str, str] = {}
    ref = outs.get("eager")
    if ref is not None:
        for name in list(fns):
            if name == "eager":
                continue
            rtol, atol = (COMPILED_RTOL, COMPILED_ATOL) if name in builders else (PEER_RTOL, PEER_ATOL)
            why = _differs(outs[name], ref, rtol, atol)
            if why:
                failed[name] = f"result differs from ferrograd eager: {why}"
                del fns[name]
    del outs

    title = f"{case.label}, batch {case.batch}"
    if "explain" in info:
        print(f"W11 [{title}] fg.compile: {info['explain']}")
    samples = time_calls(rt, fns, ctx.repeats) if fns else {}
    process_ms = None
    if "runner" in samples:
        # The timed calls above were whole processes; the row reports the steady state.
        process_ms = statistics.median(samples["runner"]) * 1e3
        n = max(len(samples.get("compiled", [])), 20)
        rt.quiesce()
        samples["runner"] = info["runner_timed"](n)
    pct = {k: percentiles(v) for k, v in samples.items()}

    print(f"W11 [{title}] ms per call ({threads} threads):")
    for name in [*builders, *peer_builders]:
        if name in pct:
            p = pct[name]
            print(
                f"  {name:<16} p50 {p['p50']:8.3f}  p90 {p['p90']:8.3f}  p99 {p['p99']:8.3f}  ({len(samples[name])} calls)"
            )
        else:
            print(f"  {name:<16} {'FAILED: ' + failed[name] if name in failed else notes.get(name, '—')}")

    peer_fail = {p: w for p, w in failed.items() if p in peer_builders}
    for variant in builders:
        for q in ("p50", "p90"):
            row = rt.Row("W11", f"{title}: {variant}, {q}", "ms", False)
            if variant in pct:
                row.values["ferrograd"] = pct[variant][q]
            for p in PEER_COLUMNS:
                row.values[p] = pct[p][q] if p in pct else None
                if p in notes and variant == "eager" and q == "p50":
                    row.notes[p] = notes[p]
            if variant in failed:
                row.fail("ferrograd", failed[variant])
            elif variant in notes:
                row.notes["ferrograd"] = notes[variant]
            if variant == "runner" and variant in pct and q == "p50":
                row.notes["ferrograd"] = (
                    f"in one process after load and plan; a whole process (start, load, plan, one run) "
                    f"{process_ms:.3f} ms median"
                )
            if variant == "compiled" and "explain" in info and q == "p50":
                row.notes["ferrograd"] = info["explain"]
            for p, why in peer_fail.items():
                # eager is the reference: a peer that disagrees fails the row
                row.fail(p, why)
                if "ferrograd" not in row.failed:
                    row.fail("ferrograd", f"{p} {why}")
            if variant in pct and q == "p90":
                p99 = [f"{variant} {pct[variant]['p99']:.3f}"] + [
                    f"{p} {pct[p]['p99']:.3f}" for p in PEER_COLUMNS if p in pct
                ]
                row.notes.setdefault("p99", "p99 ms: " + ", ".join(p99))
            ctx.rows.append(row)


def w11(rt, ctx, cases: list[Case] | None = None) -> None:
    """CPU inference under no_grad: eager, compiled, Rust runner; onnxruntime and PyTorch peers."""
    threads = int(os.environ.get("FG_BENCH_THREADS", 0)) or os.cpu_count() or 1
    fg = rt.fg
    old = fg.get_num_threads()
    fg.set_num_threads(threads)
    old_torch = None
    if rt.torch:
        old_torch = rt.torch.get_num_threads()
        rt.torch.set_num_threads(threads)
    peers = _peers(rt)
    if runner_binary() is None:
        print("W11: runner rows skipped: the Rust runner run_graph is not built")
    tmp = Path(tempfile.mkdtemp(prefix="fg_w11_"))
    try:
        for case in cases or CASES:
            run_case(rt, ctx, case, threads, tmp, peers)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        fg.set_num_threads(old)
        if old_torch is not None:
            rt.torch.set_num_threads(old_torch)


WORKLOADS = {"W11": w11}
