"""The ``torch.nn.modules.batchnorm`` path: the batch norms, their bases and ``SyncBatchNorm``."""

from __future__ import annotations

from typing import Any

from ... import _core
from .lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm

Tensor = _core.Tensor

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "SyncBatchNorm",
]

# ferrograd has one base for the batch and instance norms; PyTorch scripts test against both names.
_NormBase = _BatchNorm


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation whose statistics are meant to be reduced across processes.

    ferrograd trains in one process, so this is :class:`BatchNorm1d/2d/3d` over any
    ``(N, C, ...)`` input (at least 2-D), as PyTorch's ``SyncBatchNorm`` behaves on CPU
    without a process group. ``process_group`` is accepted and kept but not used.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(
                f"SyncBatchNorm: expected {self.num_features} channels on dim 1, "
                f"got input of shape {tuple(input.shape)}"
            )

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """Replace every ``BatchNorm*d`` in ``module`` (or ``module`` itself) by a
        ``SyncBatchNorm`` sharing its parameters and buffers; returns the converted module."""
        out = module
        if (
            isinstance(module, _BatchNorm)
            and not isinstance(module, cls)
            and type(module).__name__.startswith("BatchNorm")
        ):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            for name in ("weight", "bias"):
                out._parameters[name] = module._parameters.get(name)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                out._buffers[name] = module._buffers.get(name)
            out.train(module.training)
        for name, child in module.named_children():
            new = cls.convert_sync_batchnorm(child, process_group)
            if new is not child:
                out.add_module(name, new)
        return out
