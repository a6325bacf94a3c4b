"""PyTorch's older profiler path, ``torch.autograd.profiler``: the same
recorder as :mod:`ferrograd.profiler`, with that module's ``profile``
signature (``enabled`` first, ``use_cuda`` accepted and recording nothing)."""

from __future__ import annotations

from typing import Any

from .. import profiler as _profiler
from ..profiler import EventList, FunctionEvent, FunctionEventAvg, record_function

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]


class profile(_profiler.profile):
    """Record the engine's ops while entered (``torch.autograd.profiler.profile``).

    ``enabled=False`` records nothing. ``use_cuda``/``use_device`` are
    accepted and record nothing; ``record_shapes``, ``profile_memory`` and
    ``with_stack`` are as in :class:`ferrograd.profiler.profile`. After the
    block, ``function_events`` (as :meth:`events`), ``key_averages()``,
    ``table()`` and ``export_chrome_trace(path)`` read the trace.
    """

    def __init__(
        self,
        enabled: bool = True,
        *,
        use_cuda: bool = False,
        use_device: str | None = None,
        record_shapes: bool = False,
        with_flops: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_modules: bool = False,
        use_cpu: bool = True,
    ) -> None:
        acts = [_profiler.ProfilerActivity.CPU] if enabled and use_cpu else []
        if use_cuda:
            acts.append(_profiler.ProfilerActivity.CUDA)
        super().__init__(
            activities=acts,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
        )
        self.enabled = bool(enabled)

    def start(self) -> None:
        if self.enabled:
            super().start()

    def stop(self) -> None:
        if self.enabled:
            super().stop()
        elif self._events is None:
            self._events = EventList()  # disabled: an empty trace

    @property
    def function_events(self) -> EventList:
        """The recorded events (as :meth:`events`)."""
        return self.events()

    def table(self, sort_by: str | None = "cpu_time_total", row_limit: int = -1, **kw: Any) -> str:
        """``key_averages().table(...)``."""
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit, **kw)
