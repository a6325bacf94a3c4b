"""``torch.set_float32_matmul_precision`` / ``get_float32_matmul_precision``.

Training scripts set ``"high"`` or ``"medium"`` to let CUDA use TF32 or
bfloat16 inside float32 matrix products. ferrograd's float32 products always
compute in float32 (on the CPU and on WebGPU), which is what ``"highest"``
means: the setting is accepted, remembered and checked, and changes nothing.
"""

from __future__ import annotations

__all__ = ["get_float32_matmul_precision", "set_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")
_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Accept ``"highest"``, ``"high"`` or ``"medium"``; float32 products stay full float32."""
    global _precision
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {_PRECISIONS}, got {precision!r}")
    _precision = precision


def get_float32_matmul_precision() -> str:
    """The last value given to :func:`set_float32_matmul_precision` (``"highest"`` at start)."""
    return _precision
