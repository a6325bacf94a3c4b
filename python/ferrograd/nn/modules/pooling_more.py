"""More pooling layers: ``MaxPool1d``, ``AvgPool1d``, ``AdaptiveAvgPool1d``,
``AdaptiveMaxPool1d``, ``AdaptiveMaxPool2d``, ``LPPool1d`` and ``LPPool2d``."""

from __future__ import annotations

from typing import Any

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AvgPool1d",
    "LPPool1d",
    "LPPool2d",
    "MaxPool1d",
]


def _single(v: Any) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class MaxPool1d(Module):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)`` (``stride`` defaults to ``kernel_size``;
    padding is -inf); ``return_indices`` also gives the positions of the maxima."""

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
        """Pool ``input``; with ``return_indices`` also the positions of the maxima."""
        return F.max_pool1d(
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


class AvgPool1d(Module):
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)`` (``stride`` defaults to ``kernel_size``)."""

    def __init__(
        self,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] | None = None,
        padding: int | tuple[int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        """Average-pool ``input``."""
        return F.avg_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Average-pool ``(N, C, L)`` or ``(C, L)`` to length ``output_size``."""

    def __init__(self, output_size: int | tuple[int]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input`` to ``output_size``."""
        return F.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max-pool ``(N, C, L)`` or ``(C, L)`` to length ``output_size`` (``return_indices``:
    also the positions of the maxima)."""

    def forward(self, input: Tensor) -> Any:
        """Pool ``input`` to ``output_size``."""
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max-pool ``(N, C, H, W)`` or ``(C, H, W)`` to ``output_size`` (an int or a pair;
    ``None`` keeps that input size); ``return_indices`` also gives the flat positions."""

    def forward(self, input: Tensor) -> Any:
        """Pool ``input`` to ``output_size``."""
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """Power-average pooling over ``(N, C, L)``: ``(Σ_window x^p)^(1/p)`` with ``p = norm_type``."""

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """Power-average pooling over ``(N, C, H, W)``: ``(Σ_window x^p)^(1/p)`` with ``p = norm_type``."""

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)
