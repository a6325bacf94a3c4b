"""Write PyTorch's profiler schedule behaviour to
``tests/fixtures/profiler_schedule.json`` (read by ``tests/test_profiler.py``,
which runs without PyTorch).

For each schedule (``wait``, ``warmup``, ``active``, ``repeat``, ``skip_first``)
it stores the action ``torch.profiler.schedule`` gives each of steps 0..19 and,
from a real ``torch.profiler.profile`` run of ``STEPS`` steps (each step runs
inside ``record_function("mark<i>")``), the traces ``on_trace_ready`` received:
the profiler's ``step_num`` at the call and which steps' marks the trace holds.
The file records the PyTorch version it was made with. Needs only ``torch``::

    python scripts/make_profiler_schedule_references.py
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "profiler_schedule.json"

# (wait, warmup, active, repeat, skip_first)
CASES = [
    (1, 1, 2, 0, 0),
    (0, 0, 1, 0, 0),
    (2, 1, 3, 2, 1),
    (1, 0, 1, 3, 0),
    (0, 2, 2, 1, 3),
    (3, 1, 1, 0, 2),
]
STEPS = 12


def main() -> None:
    cases = []
    warnings.simplefilter("ignore")
    for wait, warmup, active, repeat, skip_first in CASES:
        s = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        actions = [s(i).name for i in range(20)]
        traces = []

        def ready(p: profile, traces: list = traces) -> None:
            marks = sorted(int(e.name[4:]) for e in p.events() if e.name.startswith("mark"))
            traces.append({"step_num": p.step_num, "marks": marks})

        with profile(activities=[ProfilerActivity.CPU], schedule=s, on_trace_ready=ready) as p:
            for i in range(STEPS):
                with record_function(f"mark{i}"):
                    torch.ones(2) + i
                p.step()
        cases.append(
            {
                "wait": wait,
                "warmup": warmup,
                "active": active,
                "repeat": repeat,
                "skip_first": skip_first,
                "actions": actions,
                "steps": STEPS,
                "traces": traces,
            }
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"torch_version": torch.__version__, "cases": cases}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
