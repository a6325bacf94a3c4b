"""The WebGPU device (``device="gpu"``, alias ``"webgpu"``).

Tensors move with ``t.to("gpu")`` / ``t.cpu()`` and are created there with
``device="gpu"``. GPU ops are queued and run in batches: values are read
back only when asked for (``.numpy()``, ``.item()``, ``.tolist()``,
``print``, ``.cpu()``). float32, float16 (stored natively in 2 bytes where
the adapter has ``shader-f16``, see :func:`info`), bfloat16 (float32 words
rounded to it after every kernel that writes them; float16 too on adapters
without ``shader-f16``) — kernels compute both in float32 and round once, so
results equal the CPU's —
int32, int64 (stored as 32-bit integers: uploads and Python integers written
into them are range-checked, arithmetic wraps at 32 bits) and bool
tensors live on the device; float64, uint8, int8 and int16 raise ``TypeError``
there (WGSL has no 64-bit floats nor 8/16-bit integers). An op without a GPU kernel raises a ``RuntimeError`` naming
the op and the device.
"""

from __future__ import annotations

from typing import Any

from . import _core

__all__ = ["empty_cache", "fma_peak", "info", "is_available", "stats", "synchronize", "unavailable_reason"]


def is_available() -> bool:
    """True when a WebGPU adapter exists (the device is created on first use)."""
    return _core._gpu_is_available()


def unavailable_reason() -> str | None:
    """Why no WebGPU device can be used, or ``None`` when one can."""
    return _core._gpu_unavailable_reason()


def info() -> dict[str, Any]:
    """The adapter: ``name``, ``backend``, ``device_type``, ``driver``, ``limits`` and ``features``;
    the device: ``device_features`` (what it was created with) and ``float16_storage``:
    ``"f16"`` when float16 tensors are stored natively (2 bytes per element; the adapter
    has ``shader-f16``), ``"f32"`` when they are stored as float32 words rounded to float16
    after every write (no ``shader-f16``, or ``FG_GPU_NO_F16=1`` set before the device
    was created); ``loop_limit``: the loop iterations one shader invocation may run in
    all where the driver stops longer loops (Mesa's software lavapipe/llvmpipe: 65535),
    measured when the device is made, else ``None``. There, full reductions and
    matmul split their work to stay under it, and kernels that would pass it raise a
    ``RuntimeError`` instead of returning truncated results.

    Raises ``RuntimeError`` when no adapter exists.
    """
    return _core._gpu_info()


def stats() -> dict[str, int]:
    """Device counters: ``uploads``, ``downloads``, ``submits``, ``waits``, ``dispatches``,
    ``pending_dispatches``, ``pipelines``, ``buffers_created`` and the buffer pool
    (``buffers_in_use``, ``bytes_in_use``, ``buffers_cached``, ``bytes_cached``)."""
    return _core._gpu_stats()


def synchronize() -> None:
    """Submit all queued GPU work and wait until it has finished."""
    _core._gpu_synchronize()


def empty_cache() -> None:
    """Release the GPU buffers the pool keeps for reuse."""
    _core._gpu_empty_cache()


def fma_peak(seconds: float = 0.05, repeats: int = 3) -> float:
    """The adapter's float32 arithmetic rate in GFLOP/s, measured here.

    A kernel whose threads each run independent chains of fused
    multiply-adds in registers is timed from submission to completion (a
    multiply-add counts as 2 floating-point operations); runs grow until one
    lasts at least ``seconds``, and the best of ``repeats`` is reported. It is
    a practical peak to judge kernels such as matmul against, not the
    vendor's datasheet figure. Raises ``RuntimeError`` when no adapter exists.
    """
    return _core._gpu_fma_peak(seconds, repeats)
