"""``Upsample`` (and the deprecated ``UpsamplingNearest2d``/``UpsamplingBilinear2d``)."""

from __future__ import annotations

from collections.abc import Sequence

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]


class Upsample(Module):
    """Resize ``(N, C, *spatial)`` input to ``size`` or by ``scale_factor`` (see ``F.interpolate``)."""

    def __init__(
        self,
        size: int | Sequence[int] | None = None,
        scale_factor: float | Sequence[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = tuple(size) if isinstance(size, (list, tuple)) else size
        if isinstance(scale_factor, (list, tuple)):
            self.scale_factor: float | tuple[float, ...] | None = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        """Resize ``input``."""
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self) -> str:
        info = (
            f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        )
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Deprecated: ``Upsample(..., mode='nearest')`` for 4-D input."""

    def __init__(
        self, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None
    ) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Deprecated: ``Upsample(..., mode='bilinear', align_corners=True)`` for 4-D input."""

    def __init__(
        self, size: int | Sequence[int] | None = None, scale_factor: float | Sequence[float] | None = None
    ) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
