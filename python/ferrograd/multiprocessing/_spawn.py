"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes, with
PyTorch's contract: the first child to fail stops the others, and its exception reaches the
parent as a :class:`ProcessRaisedException` carrying the child's traceback text (a child
killed by a signal or exiting with a non-zero code gives :class:`ProcessExitedException`).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import Any


class ProcessException(Exception):
    """A process started by :func:`spawn` failed; ``error_index`` is its index ``i`` and
    ``pid`` its process id."""

    def __init__(self, msg: str, error_index: int, pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process started by :func:`spawn` raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A process started by :func:`spawn` exited with a non-zero code (``exit_code``) or was
    killed by a signal (``signal_name``) without raising."""

    def __init__(
        self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None
    ) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn: Callable[..., Any], i: int, args: tuple[Any, ...], error_file: str) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent stops everyone
    except Exception:
        import traceback

        with open(error_file, "w", encoding="utf-8") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes :func:`start_processes` started: ``join()`` them, ``pids()``."""

    def __init__(self, processes: list[Any], error_files: list[str]) -> None:
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.processes]

    def _cleanup(self) -> None:
        for f in self.error_files:
            try:
                os.unlink(f)
            except OSError:
                pass

    def join(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for the processes; ``True`` once all have
        finished successfully. The first failure terminates the other processes and raises
        :class:`ProcessRaisedException` or :class:`ProcessExitedException`."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for s in ready:
            i = self.sentinels.pop(s)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0:
                failed = i
                break
        if failed is None:
            if not self.sentinels:
                self._cleanup()
                return True
            return False
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        for p in self.processes:
            p.join()
        self.sentinels.clear()
        p = self.processes[failed]
        try:
            with open(self.error_files[failed], encoding="utf-8") as f:
                trace = f.read()
        except OSError:
            trace = ""
        self._cleanup()
        code = int(p.exitcode)
        if trace:
            msg = f"\n\n-- Process {failed} terminated with the following error:\n{trace}"
            raise ProcessRaisedException(msg, failed, int(p.pid))
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"<unknown signal {-code}>"
            raise ProcessExitedException(
                f"process {failed} terminated with signal {name}", failed, int(p.pid), code, name
            )
        raise ProcessExitedException(
            f"process {failed} terminated with exit code {code}", failed, int(p.pid), code
        )


def start_processes(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
) -> ProcessContext | None:
    """Start ``nprocs`` processes of ``start_method`` (``"spawn"``, ``"fork"`` or
    ``"forkserver"``) running ``fn(i, *args)`` for ``i`` in ``range(nprocs)``. With ``join``,
    wait for all and return ``None`` (a failure raises as :meth:`ProcessContext.join` says);
    otherwise return the :class:`ProcessContext`. With ``spawn`` and ``forkserver``, ``fn``
    and ``args`` are pickled: ``fn`` must be importable, and shared tensors among ``args``
    arrive as handles to the same memory."""
    if not callable(fn):
        raise TypeError(f"spawn: fn must be callable, got {type(fn).__name__}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"spawn: nprocs must be a positive int, got {nprocs!r}")
    if not isinstance(args, tuple):
        raise TypeError(f"spawn: args must be a tuple, got {type(args).__name__}")
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    try:
        for i in range(nprocs):
            fd, path = tempfile.mkstemp(prefix="ferrograd-spawn-", suffix=".err")
            os.close(fd)
            error_files.append(path)
            p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
            p.start()
            processes.append(p)
    except BaseException:
        for p in processes:
            p.terminate()
            p.join()
        for path in error_files:
            os.unlink(path)
        raise
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
) -> ProcessContext | None:
    """Run ``fn(i, *args)`` in ``nprocs`` new processes (``i`` = 0 .. nprocs-1), as
    ``torch.multiprocessing.spawn``: see :func:`start_processes`. A child's exception is
    raised in the parent as :class:`ProcessRaisedException`, whose message holds the
    child's traceback."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
