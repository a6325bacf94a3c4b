"""3-D pooling and max-unpooling layers: ``MaxPool3d``, ``AvgPool3d``, ``AdaptiveAvgPool3d``,
``AdaptiveMaxPool3d`` and ``MaxUnpool1d/2d/3d``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = [
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d",
    "AvgPool3d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
]


class MaxPool3d(Module):
    """3-D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (``stride`` defaults to
    ``kernel_size``; padding is -inf); ``return_indices`` also gives the flat positions of the
    maxima, as :class:`MaxUnpool3d` takes them."""

    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
        dilation: int | tuple[int, ...] = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:
        """Pool ``input``; with ``return_indices`` also the flat positions of the maxima."""
        return F.max_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool3d(Module):
    """3-D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (``stride`` defaults to
    ``kernel_size``; see :func:`ferrograd.nn.functional.avg_pool3d` for the divisor)."""

    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        """Average-pool ``input``."""
        return F.avg_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(Module):
    """Average-pool ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to ``output_size`` (an int or a
    triple; ``None`` keeps that input size)."""

    def __init__(self, output_size: int | tuple[int | None, ...]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input`` to ``output_size``."""
        return F.adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool3d(Module):
    """Max-pool ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to ``output_size`` (an int or a triple;
    ``None`` keeps that input size); ``return_indices`` also gives the flat positions."""

    def __init__(self, output_size: int | tuple[int | None, ...], return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Any:
        """Pool ``input`` to ``output_size``."""
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


def _tuple(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _MaxUnpoolNd(Module):
    _nd = 0

    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
    ) -> None:
        super().__init__()
        n = self._nd
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride if stride is not None else kernel_size, n)
        self.padding = _tuple(padding, n)

    def forward(self, input: Tensor, indices: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        """Put each value of ``input`` back at its flat position ``indices`` in a zero tensor of
        the pre-pooling size (or ``output_size``)."""
        fn = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[self._nd - 1]
        return fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Inverse of :class:`MaxPool1d` (given its indices) over ``(N, C, L)`` or ``(C, L)``."""

    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Inverse of :class:`MaxPool2d` (given its indices) over ``(N, C, H, W)`` or ``(C, H, W)``."""

    _nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """Inverse of :class:`MaxPool3d` (given its indices) over ``(N, C, D, H, W)`` or
    ``(C, D, H, W)``."""

    _nd = 3
