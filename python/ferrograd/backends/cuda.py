"""``torch.backends.cuda`` switches: accepted, no effect (ferrograd has no CUDA)."""

from __future__ import annotations

__all__ = ["is_built", "matmul"]


class _MatmulFlags:
    """``backends.cuda.matmul``: ``allow_tf32`` and ``allow_fp16_reduced_precision_reduction``, no effect."""

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built() -> bool:
    """False: ferrograd is not built with CUDA."""
    return False
