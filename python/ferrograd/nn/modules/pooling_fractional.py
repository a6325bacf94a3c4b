"""``FractionalMaxPool2d`` and the cross-map ``CrossMapLRN2d``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import _core
from .. import functional as F
from .._functional_nn_more import _cross_map_lrn2d
from .module import Module

Tensor = _core.Tensor

__all__ = ["CrossMapLRN2d", "FractionalMaxPool2d"]


class FractionalMaxPool2d(Module):
    """Fractional max pooling over ``(N, C, H, W)`` (see ``F.fractional_max_pool2d``): give
    ``output_size`` or ``output_ratio``; ``_random_samples`` (``(N, C, 2)``) fixes the windows."""

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        output_size: int | Sequence[int] | None = None,
        output_ratio: float | Sequence[float] | None = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ) -> None:
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError(
                "FractionalMaxPool2d requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError("FractionalMaxPool2d: only one of output_size and output_ratio may be specified")
        self.kernel_size = kernel_size
        self.output_size = output_size
        self.output_ratio = output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input: Tensor) -> Any:
        """Pool ``input``; ``(output, indices)`` with ``return_indices=True``."""
        return F.fractional_max_pool2d(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, output_size={self.output_size}, output_ratio={self.output_ratio}"


class CrossMapLRN2d(Module):
    """Local response normalisation across the channels of a 4-D input, as
    ``torch.nn.CrossMapLRN2d``: ``x * (k + alpha / size * Σ x²)^-beta`` with the channel
    window of PyTorch's implementation (which differs from ``LocalResponseNorm``'s at the
    edges). The gradient is the exact derivative of this forward; PyTorch's hand-written
    backward for this layer is not, so gradients differ from PyTorch's by a few per cent."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"CrossMapLRN2d: size must be >= 1, got {size}")
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``input`` (``(N, C, H, W)``) across channels."""
        return _cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
