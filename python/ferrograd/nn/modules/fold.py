"""``Unfold`` and ``Fold``: sliding blocks to columns and back (``im2col`` / ``col2im``)."""

from __future__ import annotations

from collections.abc import Sequence

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = ["Fold", "Unfold"]

_Size = int | Sequence[int]


class Unfold(Module):
    """Extract sliding ``kernel_size`` blocks of ``(N, C, H, W)`` input as the columns of a
    ``(N, C * kh * kw, L)`` tensor (:func:`ferrograd.nn.functional.unfold`)."""

    def __init__(
        self, kernel_size: _Size, dilation: _Size = 1, padding: _Size = 0, stride: _Size = 1
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        """The blocks of ``input`` as columns."""
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class Fold(Module):
    """Sum ``(N, C * kh * kw, L)`` columns back into a ``(N, C, *output_size)`` image, adding
    the values of overlapping blocks (:func:`ferrograd.nn.functional.fold`)."""

    def __init__(
        self,
        output_size: _Size,
        kernel_size: _Size,
        dilation: _Size = 1,
        padding: _Size = 0,
        stride: _Size = 1,
    ) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        """The image the columns ``input`` sum to."""
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
            f"padding={self.padding}, stride={self.stride}"
        )
