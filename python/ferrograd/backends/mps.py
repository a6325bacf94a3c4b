"""``torch.backends.mps``: there is no MPS device (Apple GPUs are reached through WebGPU's Metal backend: ``"gpu"``)."""

from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: ferrograd has no MPS device."""
    return False


def is_built() -> bool:
    """False: ferrograd is not built with MPS."""
    return False
