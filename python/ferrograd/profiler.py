"""A profiler with PyTorch's API (``torch.profiler``).

``with fg.profiler.profile() as prof: ...`` records every op the engine runs
while it is entered: eager ops (also the ops a compiled graph's nodes run,
and the inner ops an op runs), the backward engine's gradient nodes
(``MulBackward`` and the like), one ``graph_run`` event per call of a
compiled graph (and ``fused`` for each fused node), and the ranges named
with :func:`record_function`. Each event is a real measurement: a start and
a duration in nanoseconds from a monotonic clock, taken in the Rust core at
the op's entry and return, the thread that ran it and, with
``record_shapes=True``, its inputs' shapes.

Event names are the engine's plain op names (``add``, ``matmul``,
``sum``, ``to``...), without PyTorch's ``aten::`` prefix. Times in the
PyTorch-shaped attributes (``cpu_time_total``, ``self_cpu_time_total``,
``cpu_time``) are in microseconds, as in PyTorch; the raw figures are
``start_ns`` and ``duration_ns``. An event's self time is its own time
minus that of the events directly nested in it on the same thread.

What differs from PyTorch: only the CPU side is recorded.
``ProfilerActivity.CUDA`` is accepted and records nothing (ferrograd has no
CUDA; WebGPU work is timed as the host sees the op). ``profile_memory`` and
``with_stack`` are accepted and record nothing. While no profiler is
entered nothing is recorded and an op pays one atomic load.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import _core

__all__ = [
    "FunctionEvent",
    "FunctionEventAvg",
    "EventList",
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    """What a profiler records. ``CPU``: host-side op times (what is
    recorded). ``CUDA``: accepted for scripts written for PyTorch; it
    records nothing (there is no CUDA device)."""

    CPU = 0
    CUDA = 1


def supported_activities() -> set[ProfilerActivity]:
    """The activities that record something here: ``{ProfilerActivity.CPU}``."""
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    """What the profiler does during a step (the value a schedule returns)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(
    *, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0
) -> Callable[[int], ProfilerAction]:
    """PyTorch's profiling schedule: the returned function maps a step number
    (from 0, counted by :meth:`profile.step`) to a :class:`ProfilerAction`.

    The first ``skip_first`` steps do nothing; then cycles of ``wait`` idle
    steps, ``warmup`` steps that trace but keep nothing, and ``active``
    recorded steps, the last of which ends the cycle (``RECORD_AND_SAVE``:
    the trace is handed to ``on_trace_ready``). ``repeat`` cycles, or
    without end when 0.
    """
    for name, v, lo in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1)):
        if not isinstance(v, int) or v < lo:
            raise ValueError(f"profiler.schedule: {name} must be an integer >= {lo}, got {v!r}")
    for name, v in (("repeat", repeat), ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"profiler.schedule: {name} must be an integer >= 0, got {v!r}")
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"profiler schedule: step must be >= 0, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        m = step % cycle
        if m < wait:
            return ProfilerAction.NONE
        if m < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if m < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class FunctionEvent:
    """One recorded event: ``name``, ``kind`` (``"op"``, ``"backward"``,
    ``"graph"`` or ``"user"``), ``start_ns`` and ``duration_ns`` (the
    profiler's monotonic clock), ``thread``, ``input_shapes`` (with
    ``record_shapes``), the events nested in it (``cpu_children``) and the one
    it is nested in (``cpu_parent``). Times named as PyTorch's are in
    microseconds."""

    __slots__ = (
        "id",
        "name",
        "kind",
        "start_ns",
        "duration_ns",
        "thread",
        "input_shapes",
        "cpu_parent",
        "cpu_children",
    )

    def __init__(
        self, id: int, name: str, kind: str, start_ns: int, duration_ns: int, thread: int, input_shapes: list
    ) -> None:
        self.id = id
        self.name = name
        self.kind = kind
        self.start_ns = start_ns
        self.duration_ns = duration_ns
        self.thread = thread
        self.input_shapes = [list(s) for s in input_shapes]
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def key(self) -> str:
        return self.name

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns

    @property
    def self_duration_ns(self) -> int:
        """Own time less that of the events directly nested in it."""
        return self.duration_ns - sum(c.duration_ns for c in self.cpu_children)

    @property
    def cpu_time_total(self) -> float:
        return self.duration_ns / 1000.0

    @property
    def self_cpu_time_total(self) -> float:
        return self.self_duration_ns / 1000.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent {self.name} kind={self.kind} start_ns={self.start_ns} "
            f"duration_ns={self.duration_ns} thread={self.thread} input_shapes={self.input_shapes}>"
        )


class FunctionEventAvg:
    """Events of one key, summed: ``count``, ``cpu_time_total`` and
    ``self_cpu_time_total`` (microseconds), ``cpu_time`` and ``self_cpu_time``
    (their averages per call), ``input_shapes`` (when grouped by them)."""

    def __init__(self, key: str, input_shapes: list | None) -> None:
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total_ns = 0
        self.self_cpu_time_total_ns = 0

    def _add(self, e: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total_ns += e.duration_ns
        self.self_cpu_time_total_ns += e.self_duration_ns

    @property
    def cpu_time_total(self) -> float:
        return self.cpu_time_total_ns / 1000.0

    @property
    def self_cpu_time_total(self) -> float:
        return self.self_cpu_time_total_ns / 1000.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (
            f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
            f"self_cpu_time_total={self.self_cpu_time_total:.3f}us input_shapes={self.input_shapes}>"
        )


_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count")
# PyTorch's device-side sort keys: accepted, and every row has 0 there.
_ZERO_KEYS = (
    "cuda_time_total",
    "self_cuda_time_total",
    "cuda_time",
    "device_time_total",
    "self_device_time_total",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
)


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """A list of events (or of :class:`FunctionEventAvg`) with
    PyTorch's :meth:`table`."""

    def table(self, sort_by: str | None = "cpu_time_total", row_limit: int = -1, **_: Any) -> str:
        """The rows as a text table, sorted by ``sort_by`` (descending; one
        of ``cpu_time_total``, ``self_cpu_time_total``, ``cpu_time``,
        ``self_cpu_time``, ``count``, or ``None`` to keep the order; PyTorch's
        device and memory keys are accepted and sort nothing), at most
        ``row_limit`` rows (all when negative)."""
        rows = list(self)
        if sort_by is not None:
            if sort_by in _SORT_KEYS:
                rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
            elif sort_by not in _ZERO_KEYS:
                raise ValueError(
                    f"profiler table: unknown sort_by {sort_by!r}; expected one of {_SORT_KEYS + _ZERO_KEYS}"
                )
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = sum(r.self_cpu_time_total for r in self) or 1.0
        shapes = any(getattr(r, "input_shapes", None) for r in rows)
        head = ["Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg", "# of Calls"]
        if shapes:
            head.append("Input Shapes")
        body = []
        for r in rows:
            count = getattr(r, "count", 1)
            line = [
                r.key,
                f"{100.0 * r.self_cpu_time_total / total_self:.2f}%",
                _fmt_us(r.self_cpu_time_total),
                _fmt_us(r.cpu_time_total),
                _fmt_us(r.cpu_time),
                str(count),
            ]
            if shapes:
                line.append(str(r.input_shapes))
            body.append(line)
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
        sep = "  ".join("-" * w for w in widths)

        def fmt(cells: list[str]) -> str:
            return "  ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )

        out = [sep, fmt(head), sep, *(fmt(b) for b in body), sep]
        out.append(f"Self CPU time total: {_fmt_us(sum(r.self_cpu_time_total for r in self))}")
        return "\n".join(out) + "\n"

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        """The events grouped by name (and input shapes): one
        :class:`FunctionEventAvg` per key, in order of first appearance."""
        groups: dict[Any, FunctionEventAvg] = {}
        for e in self:
            k: Any = (e.name, str(e.input_shapes)) if group_by_input_shape else e.name
            g = groups.get(k)
            if g is None:
                g = groups[k] = FunctionEventAvg(e.name, e.input_shapes if group_by_input_shape else None)
            g._add(e)
        return EventList(groups.values())

    def __str__(self) -> str:
        return self.table()


def _build_events(raw: Iterable[tuple]) -> EventList:
    """Events from the core's tuples, with their nesting found per thread (an
    event is a child of the innermost event that contains its time span)."""
    evs = [FunctionEvent(i, n, k, s, d, t, sh) for i, (n, k, s, d, t, sh) in enumerate(raw)]
    by_thread: dict[int, list[FunctionEvent]] = {}
    for e in evs:
        by_thread.setdefault(e.thread, []).append(e)
    for lst in by_thread.values():
        # Outer events first at a shared start: the longer one contains the other.
        lst.sort(key=lambda e: (e.start_ns, -e.duration_ns, e.id))
        stack: list[FunctionEvent] = []
        for e in lst:
            while stack and not (stack[-1].start_ns <= e.start_ns and e.end_ns <= stack[-1].end_ns):
                stack.pop()
            if stack:
                e.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(e)
            stack.append(e)
    evs.sort(key=lambda e: (e.start_ns, -e.duration_ns, e.id))
    return EventList(evs)


_active: profile | None = None


class profile:
    """Record the engine's ops while entered (PyTorch's ``torch.profiler.profile``).

    ``activities``: a list of :class:`ProfilerActivity` (default CPU; CUDA
    records nothing). ``schedule``: a function from step number to
    :class:`ProfilerAction` (see :func:`schedule`; by default every step is
    recorded and the trace ends when the profiler exits); call :meth:`step`
    at the end of each step. ``on_trace_ready(prof)``: called whenever a
    recorded cycle ends (and at exit while recording). ``record_shapes``:
    keep each op's input shapes. ``profile_memory``, ``with_stack``:
    accepted, record nothing. One profiler may be active at a time.
    """

    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[[profile], Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
    ) -> None:
        acts = set(supported_activities() if activities is None else activities)
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profiler.profile: activities must be ProfilerActivity values, got {a!r}")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profiler.profile: schedule must be callable, got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(
                f"profiler.profile: on_trace_ready must be callable, got {type(on_trace_ready).__name__}"
            )
        self.activities = acts
        self.schedule = schedule if schedule is not None else _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.with_flops = bool(with_flops)
        self.with_modules = bool(with_modules)
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._records = ProfilerActivity.CPU in acts
        self._events: EventList | None = None
        self._step_start = 0
        self._running = False

    # ---- recording on and off

    def _tracing(self, on: bool) -> None:
        if not self._records:
            return
        if on:
            _core._profiler_start(self.record_shapes)
        else:
            _core._profiler_stop()

    def _finish(self) -> None:
        raw = _core._profiler_take() if self._records else []
        self._events = _build_events(raw)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit(self, prev: ProfilerAction, cur: ProfilerAction | None) -> None:
        rec_prev = prev in _RECORDING
        rec_cur = cur in _RECORDING
        if rec_prev and (prev is ProfilerAction.RECORD_AND_SAVE or not rec_cur):
            self._finish()  # a recorded cycle ends
            if not rec_cur:
                self._tracing(False)
            else:
                _core._profiler_take()  # the next cycle starts empty
        elif rec_cur and not rec_prev:
            self._tracing(True)  # from idle or warm-up: start afresh
        if cur is ProfilerAction.WARMUP and prev is not ProfilerAction.WARMUP:
            self._tracing(True)  # traced, kept nowhere
        elif cur in (ProfilerAction.NONE, None) and prev is ProfilerAction.WARMUP:
            self._tracing(False)

    def start(self) -> None:
        """Begin (as entering the ``with`` block does)."""
        global _active
        if self._running:
            raise RuntimeError("profiler.profile: this profiler is already running")
        if _active is not None:
            raise RuntimeError("profiler.profile: another profiler is already running; stop it first")
        _active = self
        self._running = True
        self.current_action = self.schedule(self.step_num)
        self._transit(ProfilerAction.NONE, self.current_action)
        self._step_start = _core._profiler_now()

    def stop(self) -> None:
        """End (as leaving the ``with`` block does): a trace being recorded
        is finished and handed to ``on_trace_ready``."""
        global _active
        if not self._running:
            return
        try:
            self._mark_step()
            self._transit(self.current_action, None)
        finally:
            if _core._profiler_enabled() and self._records:
                _core._profiler_stop()
            self._running = False
            _active = None

    def _mark_step(self) -> None:
        if self.record_steps and self._records and _core._profiler_enabled():
            _core._profiler_record(f"ProfilerStep#{self.step_num}", self._step_start)

    def step(self) -> None:
        """Mark the end of a step: the schedule decides what the next one does."""
        if not self._running:
            raise RuntimeError("profiler.profile.step: the profiler is not running (enter it first)")
        self._mark_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._step_start = _core._profiler_now()

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- results

    def events(self) -> EventList:
        """The events of the last finished trace, in start order."""
        if self._events is None:
            raise RuntimeError(
                "profiler.profile.events: no trace finished yet (leave the profiler or end a cycle)"
            )
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """The last trace's events grouped by name (and by input shapes):
        :class:`FunctionEventAvg` rows with ``table()``."""
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str | os.PathLike) -> str:
        """Write the last trace as Chrome trace JSON (``chrome://tracing``,
        Perfetto): complete events (``ph`` ``"X"``), times in microseconds."""
        pid = os.getpid()
        out = []
        for e in self.events():
            ev: dict[str, Any] = {
                "name": e.name,
                "ph": "X",
                "cat": e.kind,
                "ts": e.start_ns / 1000.0,
                "dur": e.duration_ns / 1000.0,
                "pid": pid,
                "tid": e.thread,
            }
            if e.input_shapes:
                ev["args"] = {"Input Dims": e.input_shapes}
            out.append(ev)
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f)
        return os.fspath(path)


def tensorboard_trace_handler(
    dir_name: str | os.PathLike, worker_name: str | None = None, use_gzip: bool = False
) -> Callable[[profile], None]:
    """An ``on_trace_ready`` handler that writes each finished trace to
    ``dir_name`` as ``<worker>.<ms>.pt.trace.json`` (``.gz`` with
    ``use_gzip``), Chrome trace JSON as TensorBoard's profiler plugin reads."""
    d = os.fspath(dir_name)

    def handler(prof: profile) -> None:
        os.makedirs(d, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = os.path.join(d, f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json")
        if use_gzip:
            import gzip
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                raw = prof.export_chrome_trace(os.path.join(tmp, "t.json"))
                with open(raw, "rb") as src, gzip.open(name + ".gz", "wb") as dst:
                    dst.write(src.read())
        else:
            prof.export_chrome_trace(name)

    return handler


class record_function(contextlib.ContextDecorator):
    """Name a range of code in the profile: ``with record_function("step"):``
    or ``@record_function("step")``. Ranges nest (with each other and with
    the ops inside them); while no profiler records, this costs one check."""

    def __init__(self, name: str, args: str | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"profiler.record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._starts: list[int | None] = []

    def _recreate_cm(self) -> record_function:
        return record_function(self.name, self.args)

    def __enter__(self) -> record_function:
        self._starts.append(_core._profiler_now() if _core._profiler_enabled() else None)
        return self

    def __exit__(self, *exc: object) -> None:
        start = self._starts.pop() if self._starts else None
        if start is not None and _core._profiler_enabled():
            _core._profiler_record(self.name, start)

    def __call__(self, func: Callable) -> Callable:  # type: ignore[override]
        @functools.wraps(func)
        def inner(*a: Any, **k: Any) -> Any:
            with self._recreate_cm():
                return func(*a, **k)

        return inner
