"""Test-session setup: hypothesis profiles and the op-table coverage matrix.

Profiles (``FG_HYPOTHESIS_PROFILE``, or hypothesis's own ``--hypothesis-profile``
option): ``ci`` (the default) is derandomised and keeps no example database, so
every run draws the same examples; ``dev`` draws fresh random examples each run
and remembers failures; ``deep`` (for local or nightly runs) draws fresh random
examples too, four times as many (the op-table drivers scale their per-cell
counts by ``max_examples / 100``: see ``optable.examples``), and prints the
``@reproduce_failure`` blob of a failure.

Tests that fill a cell of the coverage matrix carry the marker
``optable_cell(op, column)`` — the op-table driver uses the dtype as the
column; later suites add their own columns (``grad``, ``gradgrad``, the
low-precision gradients ``grad-<dtype>`` and ``gpu-grad-<dtype>``, ...). At the
end of the session a table of op × column shows each cell's outcome.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from hypothesis import HealthCheck, Phase, settings

# The IR verifier (structure, and types and shapes by shape inference) runs
# after every graph pass of every graph the tests compile.
os.environ.setdefault("FG_GRAPH_VERIFY", "1")

# triton (pulled in by PyTorch's CUDA builds, e.g. through the `peers` extra)
# carries its own LLVM; importing it after Mesa's software GPU driver, which
# loads LLVM as well, has started crashes the process. Tests that compare with
# PyTorch import it lazily (torch.optim imports triton), possibly after a GPU
# test in the same worker, so load it before any test runs.
if importlib.util.find_spec("triton") is not None:
    import triton  # noqa: F401

_QUIET_CHECKS = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]
settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=False,
    suppress_health_check=_QUIET_CHECKS,
    # no "explain" phase: it re-runs failing cases many times to annotate them
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
)
settings.register_profile("dev", deadline=None, suppress_health_check=_QUIET_CHECKS)
settings.register_profile(
    "deep", max_examples=400, deadline=None, print_blob=True, suppress_health_check=_QUIET_CHECKS,
)
settings.load_profile(os.environ.get("FG_HYPOTHESIS_PROFILE", "ci"))

DTYPE_COLUMNS = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]
# Columns shown after the dtype columns, in this order when present (others follow as met).
LATER_COLUMNS = [
    "grad", "gradgrad", "grad-float32", "grad-float16", "grad-bfloat16",
    "gpu", "gpu-grad-float32", "gpu-grad-float16", "gpu-grad-bfloat16",
]
SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
         "int32": "i32", "int64": "i64", "bool": "bool"}
MARKS = {"pass": "+", "fail": "F", "skip": "s", "xfail": "x", "xpass": "X"}
_RANK = {"fail": 4, "xpass": 3, "xfail": 2, "skip": 1, "pass": 0}

_cells: dict[tuple[str, str], str] = {}


def pytest_addoption(parser):
    parser.addoption(
        "--no-optable-matrix", action="store_true", default=False,
        help="do not print the op-table coverage matrix at the end of the session",
    )


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def gpu_required() -> str | None:
    """Why a missing WebGPU adapter must fail the run, or None where the GPU tests may skip.

    In CI (``CI`` set to anything but ``0``/``false``, as GitHub Actions, GitLab and most
    runners do) the GPU suites must run, whoever runs them: a runner without a driver, or
    with the adapter hidden (``WGPU_BACKEND`` naming a backend this OS lacks,
    ``WGPU_ADAPTER_NAME`` matching none), fails here
    rather than passing with the GPU tests skipped. ``FG_REQUIRE_GPU=1`` asks the same
    outside CI."""
    if _flag("FG_REQUIRE_GPU"):
        return "FG_REQUIRE_GPU is set"
    if _flag("CI"):
        return f"CI={os.environ['CI']} is set (CI must run the GPU tests, not skip them)"
    return None


def pytest_configure(config):
    """Register the op-table marker. In CI, or with ``FG_REQUIRE_GPU=1``, a missing WebGPU
    adapter fails the run (exit status 4, before any test) instead of letting the GPU
    tests skip."""
    why = gpu_required()
    if why is not None:
        import ferrograd as fg

        if not fg.gpu.is_available():
            limits = [f"{k}={os.environ[k]!r}" for k in ("WGPU_BACKEND", "WGPU_ADAPTER_NAME") if k in os.environ]
            raise pytest.UsageError(
                f"{why} but no WebGPU adapter is usable: {fg.gpu.unavailable_reason()}"
                + (f" [{', '.join(limits)} limit the adapters searched]" if limits else "")
                + ". Without a GPU, install Mesa's Vulkan driver (Debian/Ubuntu packages mesa-vulkan-drivers"
                " and libvulkan1; README: 'Running the tests in CI')."
            )
    config.addinivalue_line(
        "markers", "optable_cell(op, column): the test fills one cell of the op-table coverage matrix"
    )
    config.addinivalue_line(
        "markers",
        "covers(*apis): PyTorch API names the test exercises, for docs/compatibility.md (scripts/gen_compat.py)",
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        m = item.get_closest_marker("optable_cell")
        if m is not None:
            item.user_properties.append(("optable_cell", f"{m.args[0]}|{m.args[1]}"))


def _outcome(report) -> str | None:
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            return "xpass" if report.passed else "xfail"
        return "pass" if report.passed else ("skip" if report.skipped else "fail")
    if report.failed:
        return "fail"
    if report.skipped:
        return "xfail" if hasattr(report, "wasxfail") else "skip"
    return None


def pytest_runtest_logreport(report):
    cell = next((v for k, v in report.user_properties if k == "optable_cell"), None)
    if cell is None:
        return
    outcome = _outcome(report)
    if outcome is None:
        return
    op, col = cell.split("|", 1)
    prev = _cells.get((op, col))
    if prev is None or _RANK[outcome] > _RANK[prev]:
        _cells[(op, col)] = outcome


def _registry():
    try:
        import ferrograd as fg

        return {o["name"]: o for o in fg.registry()}
    except Exception:  # noqa: BLE001 - the matrix is informational only
        return {}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _cells or config.getoption("--no-optable-matrix"):
        return
    reg = _registry()
    seen = {col for _, col in _cells}
    extra = [c for c in LATER_COLUMNS if c in seen]
    for _, col in _cells:
        if col not in DTYPE_COLUMNS and col not in extra:
            extra.append(col)
    cols = DTYPE_COLUMNS + extra
    ops = sorted(
        set(reg) | {op for op, _ in _cells},
        key=lambda n: (reg.get(n, {}).get("family", "~"), n),
    )
    width = max(len(o) for o in ops) + 2
    # "gpu-grad-bfloat16" -> "gpu-grad-bf16": dtype names in column names shortened
    heads = ["-".join(SHORT.get(p, p) for p in c.split("-")) for c in cols]
    widths = [max(4, len(h)) for h in heads]
    tr = terminalreporter
    tr.write_sep("=", "op-table coverage")
    tr.write_line(
        "+ pass  F fail  s skip  x xfail  X xpass  ? declared by the registry, not tested  . not declared"
    )
    tr.write_line("op".ljust(width) + "family".ljust(13) + " ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)))
    counts: dict[str, int] = {}
    for op in ops:
        info = reg.get(op, {})
        declared = set(info.get("dtypes", []))
        row = []
        for c, w in zip(cols, widths, strict=True):
            o = _cells.get((op, c))
            if o is not None:
                mark = MARKS[o]
                counts[o] = counts.get(o, 0) + 1
            elif c in DTYPE_COLUMNS and c in declared:
                mark = "?"
                counts["untested"] = counts.get("untested", 0) + 1
            else:
                mark = "."
            row.append(mark.rjust(w))
        tr.write_line(op.ljust(width) + info.get("family", "-").ljust(13) + " ".join(row))
    tr.write_line("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def pytest_report_header(config):
    """Which WebGPU adapter the GPU tests run on (or why they skip)."""
    try:
        import ferrograd as fg

        if not fg.gpu.is_available():
            return f"gpu: none, GPU tests skip ({fg.gpu.unavailable_reason()})"
        i = fg.gpu.info()
        return f"gpu: {i['name']} (backend {i['backend']}, device type {i['device_type']})"
    except Exception as e:  # noqa: BLE001 - informational only
        return f"gpu: unknown ({e})"
