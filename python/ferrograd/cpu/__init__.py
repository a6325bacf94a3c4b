"""``torch.cpu`` as seen from ferrograd: the CPU device module that scripts probe and use.

PyTorch scripts reach the CPU's mixed precision through ``torch.cpu.amp.autocast()``
(deprecated there in favour of ``torch.autocast("cpu", ...)``, but common in published
code) and ask about the device with the same functions ``torch.cuda`` has. Here:

- :func:`is_available` is ``True``, :func:`device_count` is ``1``, :func:`current_device`
  is ``"cpu"`` and :func:`is_initialized` is ``True``;
- :func:`synchronize` returns once queued CPU work is done (ferrograd's CPU ops run
  eagerly, so there is nothing to wait for; it is accepted as PyTorch's is);
  :func:`set_device` accepts the CPU and does nothing, as PyTorch's does;
- :mod:`ferrograd.cpu.amp` holds ``autocast`` (``fg.autocast("cpu", ...)``, bfloat16 by
  default) and ``GradScaler`` (``fg.amp.GradScaler("cpu", ...)``) under their deprecated
  names; both warn with a ``FutureWarning``, as PyTorch does.
"""

from __future__ import annotations

from typing import Any

from .. import _core
from . import amp

__all__ = [
    "amp",
    "current_device",
    "device_count",
    "is_available",
    "is_initialized",
    "set_device",
    "synchronize",
]


def is_available() -> bool:
    """True: the CPU device is always available."""
    return True


def device_count() -> int:
    """1: one CPU device."""
    return 1


def current_device() -> str:
    """``"cpu"``, as PyTorch's ``torch.cpu.current_device()`` returns."""
    return "cpu"


def is_initialized() -> bool:
    """True: the CPU device needs no initialisation."""
    return True


def _check_cpu(fn: str, device: Any) -> None:
    if device is None or isinstance(device, int):
        return
    kind = device.type if isinstance(device, _core.device) else device
    if not isinstance(kind, str) or kind.split(":")[0] != "cpu":
        raise ValueError(f"fg.cpu.{fn}: expected a CPU device, got {device!r}")


def synchronize(device: Any = None) -> None:
    """Wait for queued work on the CPU (ferrograd runs CPU ops eagerly: returns at once)."""
    _check_cpu("synchronize", device)


def set_device(device: Any) -> None:
    """Accept the CPU device and do nothing (there is one CPU device), as PyTorch does."""
    _check_cpu("set_device", device)
