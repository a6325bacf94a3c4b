"""Numeric limits of the dtypes: :func:`iinfo` and :func:`finfo`, as ``torch.iinfo`` / ``torch.finfo``."""

from __future__ import annotations

from typing import Any

from . import _core

__all__ = ["finfo", "iinfo"]

# name -> (bits, min, max) of the integer dtypes.
_INT_LIMITS = {
    "uint8": (8, 0, 2**8 - 1),
    "int8": (8, -(2**7), 2**7 - 1),
    "int16": (16, -(2**15), 2**15 - 1),
    "int32": (32, -(2**31), 2**31 - 1),
    "int64": (64, -(2**63), 2**63 - 1),
}

# name -> (bits, eps, max, smallest normal, resolution) of the floating dtypes.
_FLOAT_LIMITS = {
    "float16": (16, 2.0**-10, 65504.0, 2.0**-14, 0.001),
    "bfloat16": (16, 2.0**-7, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01),
    "float32": (32, 2.0**-23, 3.4028234663852886e38, 1.1754943508222875e-38, 1e-6),
    "float64": (64, 2.0**-52, 1.7976931348623157e308, 2.2250738585072014e-308, 1e-15),
}


def _name(dtype: Any, what: str) -> str:
    if isinstance(dtype, _core.dtype):
        return str(dtype.name)
    if isinstance(dtype, str):
        return dtype.removeprefix("ferrograd.")
    raise TypeError(f"{what}: expected a ferrograd dtype, got {type(dtype).__name__}")


class iinfo:  # noqa: N801 - torch.iinfo's spelling
    """Limits of an integer dtype: ``bits``, ``min``, ``max``, ``dtype`` (as ``torch.iinfo``)."""

    def __init__(self, dtype: Any) -> None:
        name = _name(dtype, "iinfo")
        if name not in _INT_LIMITS:
            raise TypeError(f"iinfo: {name} is not an integer dtype (integers: {', '.join(_INT_LIMITS)})")
        self.bits, self.min, self.max = _INT_LIMITS[name]
        self.dtype = name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class finfo:  # noqa: N801 - torch.finfo's spelling
    """Limits of a floating dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny``, ``resolution``."""

    def __init__(self, dtype: Any = None) -> None:
        name = "float32" if dtype is None else _name(dtype, "finfo")
        if name not in _FLOAT_LIMITS:
            raise TypeError(f"finfo: {name} is not a floating dtype (floats: {', '.join(_FLOAT_LIMITS)})")
        self.bits, self.eps, self.max, self.tiny, self.resolution = _FLOAT_LIMITS[name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self) -> str:
        return f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, eps={self.eps}, dtype={self.dtype})"
