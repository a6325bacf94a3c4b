"""Dropout layers: ``Dropout`` (elements) and ``Dropout1d``/``2d``/``3d`` (whole channels)."""

from __future__ import annotations

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class _DropoutNd(Module):
    """Stores the drop probability ``p`` and the ``inplace`` flag."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zero each element with probability ``p`` and scale the rest by ``1/(1-p)``; identity in eval."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply dropout (only in training mode)."""
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """In training, zero whole channels of ``(N, C, L)`` / ``(C, L)`` input with probability ``p``
    (survivors scaled by ``1/(1-p)``); identity in eval."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply channel dropout (only in training mode)."""
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """In training, zero whole channels of ``(N, C, H, W)`` input with probability ``p``
    (survivors scaled by ``1/(1-p)``); identity in eval. A 3-D input is taken as ``(N, C, L)``
    with a warning, as in PyTorch."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply channel dropout (only in training mode)."""
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """In training, zero whole channels of ``(N, C, D, H, W)`` / ``(C, D, H, W)`` input with
    probability ``p`` (survivors scaled by ``1/(1-p)``); identity in eval."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply channel dropout (only in training mode)."""
        return F.dropout3d(input, self.p, self.training, self.inplace)
