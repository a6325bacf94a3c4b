# ruff: noqa: F401, F403, F405
"""``ferrograd.multiprocessing``: Python's :mod:`multiprocessing`, with tensors in shared
memory (as ``torch.multiprocessing``).

Every name of :mod:`multiprocessing` is here (``Process``, ``Queue``, ``Pool``, ``Pipe``,
``get_context``, ``set_start_method``, ``get_start_method``, ``cpu_count``, ...), plus
:func:`spawn` / :func:`start_processes` and the sharing-strategy functions.

Shared memory: ``t.share_memory_()`` (``Module.share_memory()`` for a model's parameters,
gradients and buffers) moves a CPU tensor's data into an anonymous shared memory file, in
place. Then

- a child started with the ``fork`` method writes into the same memory: its in-place updates
  (optimizer steps, ``add_``, ``copy_``) are seen by the parent and its siblings ("hogwild"
  training);
- with ``spawn`` or ``forkserver``, and through ``Queue``, ``Pipe`` and ``Pool`` with any
  method, a shared tensor is sent as a handle to its memory, not a copy: the receiver's
  tensor writes into the same memory. A tensor that is not shared is sent as a copy.

The memory is freed when the last tensor using it, in every process, is gone; it is never
named in the file system, so nothing is left in ``/dev/shm``. A process that takes a
shared tensor from a queue must do so while the sender still runs.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import *

from .._shared_tensors import init_reductions
from ._spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)

__all__ = [
    "ProcessContext",
    "ProcessException",
    "ProcessExitedException",
    "ProcessRaisedException",
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "init_reductions",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
    *multiprocessing.__all__,
]

_ALL_STRATEGIES = ("file_descriptor", "file_system")
_sharing_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepted as in PyTorch: ``"file_descriptor"`` or ``"file_system"``. Both send shared
    tensors the same way here (a duplicate of the memory file's descriptor; no named file
    is ever made), so the choice is recorded (:func:`get_sharing_strategy`) and changes
    nothing. Other values raise ``ValueError``."""
    global _sharing_strategy
    if new_strategy not in _ALL_STRATEGIES:
        raise ValueError(
            f"set_sharing_strategy: unknown strategy {new_strategy!r}; expected one of {list(_ALL_STRATEGIES)}"
        )
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    """The strategy last set with :func:`set_sharing_strategy` (``"file_descriptor"`` by default)."""
    return _sharing_strategy


def get_all_sharing_strategies() -> set[str]:
    """The strategies :func:`set_sharing_strategy` accepts: ``{"file_descriptor", "file_system"}``."""
    return set(_ALL_STRATEGIES)


init_reductions()
