"""``torch.accelerator`` as seen from ferrograd: the accelerator is the WebGPU device.

Current PyTorch tutorials pick their device with
``torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"``
and the examples with ``torch.accelerator.is_available()``; these functions
answer that probing.

ferrograd's one accelerator is its WebGPU device (``"gpu"``, see
:mod:`ferrograd.gpu`). It counts as available only on a hardware adapter: a
software adapter (Mesa's lavapipe/llvmpipe, SwiftShader; WebGPU device type
``Cpu``) computes on the CPU, more slowly than the CPU device and without
float64, so a script that asks for "the accelerator if there is one" stays on
the CPU there — as it would in PyTorch on a machine without a GPU. Such an
adapter is still usable by naming it: ``t.to("gpu")``.

- :func:`is_available`: a hardware WebGPU adapter exists.
- :func:`current_accelerator`: ``fg.device("gpu")``, or ``None`` when
  ``check_available=True`` and :func:`is_available` is false (PyTorch
  returns ``None`` only where it was built without accelerators, and names
  the accelerator otherwise; ferrograd is always built with WebGPU).
- :func:`device_count`: 1 when available, else 0.
- :func:`current_device_index` is 0; :func:`set_device_index` accepts 0.
- :func:`synchronize` and :func:`empty_cache` act on ferrograd's devices.
"""

from __future__ import annotations

from typing import Any

from . import _core

__all__ = [
    "current_accelerator",
    "current_device_index",
    "device_count",
    "empty_cache",
    "is_available",
    "set_device_index",
    "synchronize",
]


def is_available() -> bool:
    """True when a hardware WebGPU adapter exists (a software adapter does not count)."""
    from . import gpu

    if not gpu.is_available():
        return False
    return str(gpu.info().get("device_type", "")).lower() != "cpu"


def current_accelerator(check_available: bool = False) -> Any:
    """``fg.device("gpu")``; ``None`` when ``check_available`` and no hardware adapter exists."""
    if check_available and not is_available():
        return None
    return _core.device("gpu")


def device_count() -> int:
    """1 when the accelerator is available, else 0."""
    return 1 if is_available() else 0


def current_device_index() -> int:
    """0: ferrograd has one GPU device."""
    return 0


def set_device_index(device: Any) -> None:
    """Accept index 0 (or the ``gpu`` device): ferrograd has one GPU device."""
    index = device.index if isinstance(device, _core.device) else device
    if index not in (None, 0):
        raise ValueError(
            f"accelerator.set_device_index: ferrograd has one GPU device (index 0), got {device!r}"
        )


def synchronize(device: Any = None) -> None:
    """Wait for all queued work on ferrograd's devices (``fg.synchronize``)."""
    _core.synchronize()


def empty_cache() -> None:
    """Release cached device memory (``fg.empty_cache``)."""
    _core.empty_cache()
