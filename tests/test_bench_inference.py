"""W11 (benches/workloads_inference.py) at tiny sizes: it runs, checks outputs and fills its rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHES = Path(__file__).resolve().parents[1] / "benches"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHES))
    spec = importlib.util.spec_from_file_location("fg_bench_run", BENCHES / "run.py")
    rt = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fg_bench_run", rt)
    spec.loader.exec_module(rt)
    wt, wi = sys.modules["workloads_train"], sys.modules["workloads_inference"]
    # a GPT of one block, width 32, seq 16, vocab 64; short timed blocks
    for name, v in (("GPT_LAYERS", 1), ("GPT_D", 32), ("GPT_HEADS", 2), ("GPT_VOCAB", 64), ("GPT_SEQ", 16)):
        monkeypatch.setattr(wt, name, v)
    monkeypatch.setattr(wi, "TARGET", 0.002)
    monkeypatch.setattr(wi, "RUNNER_CALLS", 1)
    return rt, wi


def test_w11_tiny_runs_and_checks(bench, capsys):
    rt, wi = bench
    ctx = rt.Ctx(repeats=5)
    cases = [wi.Case("gpt", "GPT tiny", 2), wi.Case("cnn", "MNIST CNN", 1)]
    wi.w11(rt, ctx, cases)
    out = capsys.readouterr().out
    assert "fg.compile: graphs 1, graph breaks 0" in out
    rows = [r for r in ctx.rows if r.workload == "W11"]
    assert len(rows) == 2 * 3 * 2  # cases x (eager, compiled, runner) x (p50, p90)
    for r in rows:
        assert not r.failed, r.failed
        if ": runner," in r.variant and wi.runner_binary() is None:
            assert r.values.get("ferrograd") is None and "skipped" in r.notes["ferrograd"]
        else:
            assert r.values["ferrograd"] > 0
    # the table prints the W11 peer columns
    rt.print_table(ctx)
    table = capsys.readouterr().out
    assert "ort(fg.onnx)" in table and "fg÷torch" in table


def test_w11_mismatch_fails_the_row(bench, monkeypatch):
    rt, wi = bench
    monkeypatch.setattr(wi, "fg_compiled", _wrap(wi.fg_compiled, lambda out: out * 1.001))
    ctx = rt.Ctx(repeats=5)
    wi.w11(rt, ctx, [wi.Case("cnn", "MNIST CNN", 1)])
    compiled = [r for r in ctx.rows if ": compiled," in r.variant]
    assert compiled and all("differs from ferrograd eager" in r.failed["ferrograd"] for r in compiled)
    assert all(r.values["ferrograd"] is None for r in compiled)
    assert not any(r.failed for r in ctx.rows if ": eager," in r.variant)


def _wrap(setup, change):
    def wrapped(*a, **k):
        fn = setup(*a, **k)
        return lambda: change(fn())

    return wrapped
