"""``torch.cuda`` as seen from ferrograd: there is no CUDA device.

Scripts written for PyTorch commonly probe CUDA before choosing a device
(``device = "cuda" if torch.cuda.is_available() else "cpu"``) and seed it;
these functions answer that probing. ferrograd's GPU is the WebGPU device
(``"gpu"``, see :mod:`ferrograd.gpu`), which a script selects explicitly
(``"cuda"`` named explicitly, ``t.cuda()`` and ``model.cuda()`` select it too).

- :func:`is_available` is ``False`` and :func:`device_count` is ``0``;
  :func:`is_bf16_supported` is ``False``.
- :mod:`ferrograd.cuda.amp` holds the deprecated ``GradScaler`` and
  ``autocast`` spellings of :mod:`ferrograd.amp`.
- :func:`manual_seed` and :func:`manual_seed_all` seed nothing: in PyTorch
  they seed only the CUDA generators, and are ignored when CUDA is absent.
  ``fg.manual_seed`` seeds ferrograd's one generator, which serves every
  device, the WebGPU device included.
- :func:`synchronize` waits for queued work on ferrograd's devices (as
  ``fg.synchronize``); :func:`empty_cache` releases cached memory (as
  ``fg.empty_cache``).
"""

from __future__ import annotations

from typing import Any

from .. import _core

__all__ = [
    "amp",
    "device_count",
    "empty_cache",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "synchronize",
]


def is_available() -> bool:
    """False: ferrograd has no CUDA device (its GPU device is WebGPU: ``fg.gpu.is_available()``)."""
    return False


def device_count() -> int:
    """0: there are no CUDA devices."""
    return 0


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: there is no CUDA device (bfloat16 itself works on ferrograd's CPU and GPU devices)."""
    return False


def is_initialized() -> bool:
    """False: CUDA is never initialised."""
    return False


def manual_seed(seed: int) -> None:
    """Does nothing, as PyTorch's does without CUDA (``fg.manual_seed`` seeds every ferrograd device)."""
    int(seed)  # the same TypeError as PyTorch for a non-integer seed


def manual_seed_all(seed: int) -> None:
    """Does nothing, as PyTorch's does without CUDA (``fg.manual_seed`` seeds every ferrograd device)."""
    int(seed)


def synchronize(device: Any = None) -> None:
    """Wait for all queued work on ferrograd's devices (``fg.synchronize``)."""
    _core.synchronize()


def empty_cache() -> None:
    """Release cached device memory (``fg.empty_cache``)."""
    _core.empty_cache()


from . import amp  # noqa: E402 - torch.cuda.amp's deprecated spellings
