"""Padding layers, as ``torch.nn``: reflection, replication, circular, constant and zero padding.

Each calls ``F.pad`` with its mode; ``padding`` is an int (the same on
every side) or a tuple ``(left, right[, top, bottom[, front, back]])``,
last dim first.
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


def _padding(name: str, padding: int | Sequence[int], n: int) -> tuple[int, ...]:
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    t = tuple(padding)
    if len(t) != 2 * n or not all(isinstance(v, int) for v in t):
        raise ValueError(f"{name}: padding must be an int or a tuple of {2 * n} ints, got {padding!r}")
    return t


class _PadNd(Module):
    """Pads the last ``_n`` dims of ``(N, C, ...)`` or unbatched ``(C, ...)`` input with ``_mode``."""

    _n: int
    _mode: str

    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__()
        self.padding = _padding(type(self).__name__, padding, self._n)

    def _check(self, input: Tensor) -> None:
        if input.dim() not in (self._n + 1, self._n + 2):
            raise ValueError(
                f"{type(self).__name__}: expected {self._n + 1}D (unbatched) or {self._n + 2}D (batched) input, "
                f"got {input.dim()}D input of shape {tuple(input.shape)}"
            )

    def forward(self, input: Tensor) -> Tensor:
        """Pad ``input``."""
        self._check(input)
        return F.pad(input, self.padding, mode=self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    _mode = "constant"

    def __init__(self, padding: int | Sequence[int], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        """Pad ``input`` with ``value``."""
        self._check(input)
        return F.pad(input, self.padding, mode="constant", value=self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pad the last dim with the reflection of the input (edge not repeated): ``(left, right)``."""

    _n, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dims with the reflection of the input: ``(left, right, top, bottom)``."""

    _n, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pad the last three dims with the reflection of the input: ``(left, right, top, bottom, front, back)``."""

    _n, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating the edge values: ``(left, right)``."""

    _n, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last two dims by repeating the edge values: ``(left, right, top, bottom)``."""

    _n, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pad the last three dims by repeating the edge values."""

    _n, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Pad the last dim with values wrapped around from the other end: ``(left, right)``."""

    _n, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Pad the last two dims with wrapped-around values: ``(left, right, top, bottom)``."""

    _n, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Pad the last three dims with wrapped-around values."""

    _n, _mode = 3, "circular"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with a constant ``value``: ``(left, right)``."""

    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with a constant ``value``: ``(left, right, top, bottom)``."""

    _n = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with a constant ``value``."""

    _n = 3


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros: ``(left, right)``."""

    _n = 1


class ZeroPad2d(_ZeroPadNd):
    """Pad the last two dims with zeros: ``(left, right, top, bottom)``."""

    _n = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last three dims with zeros."""

    _n = 3
