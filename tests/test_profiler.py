"""ferrograd.profiler (PyTorch's torch.profiler API): what is recorded, nesting and
self times, shapes, averages, the Chrome trace, the schedule (against the documented
rule and against PyTorch's behaviour stored by scripts/make_profiler_schedule_references.py)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import ferrograd as fg
import pytest
from ferrograd import _core
from ferrograd.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

FIXTURE = Path(__file__).parent / "fixtures" / "profiler_schedule.json"


def ops(prof, kind="op"):
    return [e.name for e in prof.events() if e.kind == kind]


@pytest.mark.covers(
    "torch.profiler.profile", "torch.profiler.ProfilerActivity", "torch.profiler.supported_activities"
)
def test_names_and_counts_of_a_known_script():
    a, b = fg.ones(16), fg.ones(16)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            c = a + b
        d = (c * b).sum()
    assert ops(prof) == ["add"] * 5 + ["mul", "sum"]
    assert all(e.cpu_parent is None for e in prof.events())
    assert d.item() == 32.0
    avg = {r.key: r.count for r in prof.key_averages()}
    assert avg == {"add": 5, "mul": 1, "sum": 1}
    assert supported_activities() == {ProfilerActivity.CPU}


def test_durations_are_wall_clock_measurements():
    t0 = time.perf_counter_ns()
    with profile() as prof:
        with record_function("sleep"):
            time.sleep(0.02)
    wall = time.perf_counter_ns() - t0
    (ev,) = prof.events()
    assert 20_000_000 <= ev.duration_ns <= wall
    assert ev.cpu_time_total == pytest.approx(ev.duration_ns / 1000)


@pytest.mark.covers("torch.profiler.record_function")
def test_record_function_nests_and_self_time():
    a = fg.ones(4, 4)
    with profile() as prof:
        with record_function("outer"):
            x = a @ a
            with record_function("inner"):
                y = x + a
                time.sleep(0.002)
    ev = {e.name: e for e in prof.events()}
    outer, inner, mm, add = ev["outer"], ev["inner"], ev["matmul"], ev["add"]
    assert outer.cpu_parent is None and inner.cpu_parent is outer
    assert mm.cpu_parent is outer and add.cpu_parent is inner
    assert outer.start_ns <= mm.start_ns and mm.end_ns <= inner.start_ns and add.end_ns <= inner.end_ns
    assert inner.end_ns <= outer.end_ns
    assert outer.self_duration_ns == outer.duration_ns - inner.duration_ns - mm.duration_ns
    assert inner.self_duration_ns == inner.duration_ns - add.duration_ns
    assert inner.self_duration_ns >= 2_000_000
    assert y.shape == (4, 4)


def test_record_function_as_decorator_nests_recursively():
    @record_function("fact")
    def fact(n):
        return fg.ones(1) if n == 0 else fact(n - 1) * n

    with profile() as prof:
        out = fact(3)
    assert out.item() == 6.0
    facts = [e for e in prof.events() if e.name == "fact"]
    assert len(facts) == 4
    depth = [0 if e.cpu_parent is None else 1 + facts.index(e.cpu_parent) for e in facts]
    assert depth == [0, 1, 2, 3]
    assert Counter(e.cpu_parent.name for e in prof.events() if e.name == "mul") == {"fact": 3}


def test_backward_nodes_are_recorded_with_their_ops():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with profile() as prof:
        y = (x * x).sum()
        y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    back = ops(prof, "backward")
    assert back == ["SumBackward", "MulBackward"]
    mul_back = next(e for e in prof.events() if e.name == "MulBackward")
    assert [c.name for c in mul_back.cpu_children].count("mul") == 2


def test_compiled_graph_records_each_call():
    f = fg.compile(lambda t: (t * 2.0 + 1.0).relu().sum())
    a = fg.ones(8)
    f(a)
    with profile() as prof:
        f(a)
        f(a)
    runs = [e for e in prof.events() if e.name == "graph_run"]
    assert len(runs) == 2 and all(e.kind == "graph" and e.cpu_parent is None for e in runs)
    inner = [e for e in prof.events() if e.cpu_parent is not None]
    assert inner and all(e.cpu_parent.name == "graph_run" for e in inner)


def test_record_shapes_and_group_by_input_shape():
    a, b = fg.ones(2, 3), fg.ones(5)
    with profile(record_shapes=True) as prof:
        a + a
        b + b
        b + b
    assert [e.input_shapes for e in prof.events()] == [[[2, 3], [2, 3]], [[5], [5]], [[5], [5]]]
    rows = {str(r.input_shapes): r.count for r in prof.key_averages(group_by_input_shape=True)}
    assert rows == {"[[2, 3], [2, 3]]": 1, "[[5], [5]]": 2}
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()
    with profile() as prof:
        a + a
    assert prof.events()[0].input_shapes == []


def test_key_averages_totals_equal_the_events():
    x = fg.ones(3, 3, requires_grad=True)
    with profile() as prof:
        with record_function("fwd"):
            y = (x.exp() * x).sum()
        y.backward()
    evs = prof.events()
    rows = prof.key_averages()
    assert sum(r.count for r in rows) == len(evs)
    for r in rows:
        mine = [e for e in evs if e.name == r.key]
        assert r.count == len(mine)
        assert r.cpu_time_total_ns == sum(e.duration_ns for e in mine)
        own = sum(e.duration_ns - sum(c.duration_ns for c in e.cpu_children) for e in mine)
        assert r.self_cpu_time_total_ns == own
        assert r.cpu_time == pytest.approx(r.cpu_time_total / r.count)
    # Self times partition the top-level events' time.
    roots = sum(e.duration_ns for e in evs if e.cpu_parent is None)
    assert sum(r.self_cpu_time_total_ns for r in rows) == roots
    table = rows.table(sort_by="self_cpu_time_total", row_limit=2)
    assert (
        len([ln for ln in table.splitlines() if ln.split() and ln.split()[0] in {r.key for r in rows}]) == 2
    )
    with pytest.raises(ValueError, match="sort_by"):
        rows.table(sort_by="bogus")


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    a = fg.ones(4)
    with profile(record_shapes=True, on_trace_ready=tensorboard_trace_handler(tmp_path / "tb", "w0")) as prof:
        with record_function("r"):
            a * a
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    trace = json.loads(Path(path).read_text())
    evs = trace["traceEvents"]
    assert len(evs) == len(prof.events()) == 2
    for t, e in zip(evs, prof.events(), strict=True):
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(t)
        assert (t["name"], t["ph"], t["tid"]) == (e.name, "X", e.thread)
        assert t["ts"] == pytest.approx(e.start_ns / 1000) and t["dur"] == pytest.approx(e.duration_ns / 1000)
    assert evs[1]["args"]["Input Dims"] == [[4], [4]]
    (tb,) = (tmp_path / "tb").iterdir()
    assert tb.name.startswith("w0.") and tb.name.endswith(".pt.trace.json")
    assert [t["name"] for t in json.loads(tb.read_text())["traceEvents"]] == ["r", "mul"]


def documented_actions(wait, warmup, active, repeat, skip_first, n):
    """The rule as PyTorch documents it, written out as a sequence: skip_first idle
    steps, then cycles of wait idle, warmup, active (the last one saves), repeated
    `repeat` times (forever when 0), then idle."""
    cycle = ["NONE"] * wait + ["WARMUP"] * warmup + ["RECORD"] * (active - 1) + ["RECORD_AND_SAVE"]
    seq = ["NONE"] * skip_first
    while len(seq) < n:
        if repeat and len(seq) >= skip_first + repeat * len(cycle):
            seq.append("NONE")
        else:
            seq += cycle
    return seq[:n]


def schedule_cases():
    return json.loads(FIXTURE.read_text())["cases"]


@pytest.mark.covers("torch.profiler.schedule", "torch.profiler.ProfilerAction")
@pytest.mark.parametrize(
    "case", schedule_cases(), ids=lambda c: "w{wait}-u{warmup}-a{active}-r{repeat}-s{skip_first}".format(**c)
)
def test_schedule_matches_the_rule_and_pytorch(case):
    args = {k: case[k] for k in ("wait", "warmup", "active", "repeat", "skip_first")}
    s = schedule(**args)
    got = [s(i).name for i in range(20)]
    assert got == documented_actions(**args, n=20)
    assert got == case["actions"]
    assert all(isinstance(s(i), ProfilerAction) for i in range(3))
    traces = []

    def ready(p):
        marks = sorted(int(e.name[4:]) for e in p.events() if e.name.startswith("mark"))
        traces.append({"step_num": p.step_num, "marks": marks})

    one = fg.ones(2)
    with profile(schedule=s, on_trace_ready=ready) as p:
        for i in range(case["steps"]):
            with record_function(f"mark{i}"):
                one + i
            p.step()
    assert traces == case["traces"]


def test_schedule_step_markers_and_warmup_discarded():
    with profile(schedule=schedule(wait=1, warmup=1, active=2)) as p:
        for i in range(4):
            with record_function(f"mark{i}"):
                pass
            p.step()
    names = [e.name for e in p.events()]
    assert names.count("mark2") == names.count("mark3") == 1
    assert "mark1" not in names and "mark0" not in names
    steps = [e for e in p.events() if e.name.startswith("ProfilerStep#")]
    assert [e.name for e in steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert next(e for e in p.events() if e.name == "mark2").cpu_parent is steps[0]


def test_not_entered_records_nothing():
    a = fg.ones(4)
    prof = profile()
    a + a
    with record_function("outside"):
        a * a
    assert not _core._profiler_enabled()
    with pytest.raises(RuntimeError, match="no trace"):
        prof.events()
    with profile() as empty:
        pass
    assert list(empty.events()) == []
    with profile(activities=[ProfilerActivity.CUDA]) as cuda_only:
        a + a
    assert list(cuda_only.events()) == []
    assert not _core._profiler_enabled()


@pytest.mark.covers("torch.autograd.profiler.profile", "torch.autograd.profiler.record_function")
def test_autograd_profiler_path():
    a = fg.ones(3)
    with fg.autograd.profiler.profile(record_shapes=True) as prof:
        with fg.autograd.profiler.record_function("blk"):
            a - a
    assert [e.name for e in prof.function_events] == ["blk", "sub"]
    assert "sub" in prof.table()
    with fg.autograd.profiler.profile(enabled=False) as off:
        a - a
    assert list(off.function_events) == []


def test_bad_use_raises_clear_errors():
    with pytest.raises(ValueError, match="active"):
        schedule(wait=1, warmup=1, active=0)
    with pytest.raises(ValueError, match="repeat"):
        schedule(wait=1, warmup=1, active=1, repeat=-1)
    with pytest.raises(TypeError, match="activities"):
        profile(activities=["cpu"])
    with pytest.raises(TypeError, match="record_function"):
        record_function(3)
    with pytest.raises(RuntimeError, match="not running"):
        profile().step()
    with profile():
        with pytest.raises(RuntimeError, match="already running"):
            profile().start()
    assert not _core._profiler_enabled()


def test_optimizer_steps_record_once_per_call_eager_and_compiled():
    w = fg.ones(3, requires_grad=True)
    opt = fg.optim.SGD([w], lr=0.1, momentum=0.9)

    def step():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()

    step()
    compiled = fg.compile(step)
    compiled()
    with profile() as prof:
        step()
        compiled()
        compiled()
    steps = [e for e in prof.events() if e.name == "sgd_step"]
    assert len(steps) == 3
    assert all(e.cpu_parent is None or e.cpu_parent.name == "graph_run" for e in steps)
