"""Normalisation layers: batch, layer, RMS, instance, group and local response normalisation."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

Tensor = _core.Tensor

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm",
    "LocalResponseNorm",
    "RMSNorm",
]


class _BatchNorm(Module):
    """Batch normalisation with running statistics, as ``torch.nn.BatchNorm*d``.

    In training mode (or when ``track_running_stats=False``) the batch
    statistics normalise and, when tracked, update ``running_mean`` and
    ``running_var`` (``momentum=None`` uses a cumulative average over
    ``num_batches_tracked`` batches); in eval mode the running statistics
    normalise. ``affine`` adds a per-channel ``weight`` and ``bias``;
    ``bias=False`` (keyword, as in PyTorch 2.15) keeps only the ``weight``.
    """

    _expected_dims: tuple[int, ...]

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        dtype = dtype or _core.get_default_dtype()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_core.empty((num_features,), dtype=dtype))
            if bias:
                self.bias = Parameter(_core.empty((num_features,), dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _core.zeros((num_features,), dtype=dtype))
            self.register_buffer("running_var", _core.ones((num_features,), dtype=dtype))
            self.register_buffer("num_batches_tracked", _core.zeros((), dtype=_core.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics; weight 1, bias 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in self._expected_dims:
            want = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"{type(self).__name__}: expected {want} input (got {input.dim()}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(
                f"{type(self).__name__}: expected {self.num_features} channels on dim 1, "
                f"got input of shape {tuple(input.shape)}"
            )

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``input`` (``(N, C, ...)``) per channel."""
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / int(self.num_batches_tracked)
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(
            input,
            self.running_mean if not self.training or self.track_running_stats else None,
            self.running_var if not self.training or self.track_running_stats else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over ``(N, C)`` or ``(N, C, L)`` input (statistics per channel ``C``)."""

    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over ``(N, C, H, W)`` input (statistics per channel ``C``)."""

    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over ``(N, C, D, H, W)`` input (statistics per channel ``C``)."""

    _expected_dims = (5,)


def _shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` dims (fused ``F.layer_norm``).

    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased
    variance; ``weight`` starts at 1 and ``bias`` at 0.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = dtype or _core.get_default_dtype()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_core.ones(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(_core.zeros(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise the trailing dims of ``input``."""
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """RMS normalisation over the trailing ``normalized_shape`` dims (fused ``F.rms_norm``).

    ``x / sqrt(mean(x²) + eps) * weight``; ``eps=None`` uses the dtype's
    machine epsilon.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = dtype or _core.get_default_dtype()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_core.ones(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Weight 1."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise the trailing dims of ``input``."""
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _InstanceNorm(_BatchNorm):
    """Instance normalisation: per sample and channel over the spatial dims, as ``torch.nn.InstanceNorm*d``.

    ``affine`` (default False) adds a per-channel ``weight``/``bias``;
    ``track_running_stats`` (default False) keeps running averages of the
    instance statistics, which then normalise in eval mode. Unbatched input
    (one dim fewer) is accepted.
    """

    _spatial: int

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``input`` (``(N, C, *spatial)`` or unbatched ``(C, *spatial)``)."""
        name = type(self).__name__
        nd = self._spatial + 2
        if input.dim() not in (nd - 1, nd):
            raise ValueError(
                f"{name}: expected {nd - 1}D (unbatched) or {nd}D (batched) input, got {input.dim()}D input"
            )
        batched = input.dim() == nd
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"{name}: expected input's size at dim={1 if batched else 0} to match num_features "
                    f"({self.num_features}), but got: {x.shape[1]} (input {tuple(input.shape)})"
                )
            warnings.warn(
                f"{name}: input's size at dim={1 if batched else 0} ({x.shape[1]}) does not match num_features "
                f"({self.num_features}); as affine=False the layer does not use num_features",
                UserWarning,
                stacklevel=2,
            )
        # As PyTorch: momentum=None leaves the running statistics as they are, and
        # num_batches_tracked (kept for checkpoint compatibility) is not counted.
        use_stats = self.training or not self.track_running_stats
        factor = 0.0 if self.momentum is None else self.momentum
        out = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_stats, factor, self.eps
        )
        return out if batched else out.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation over ``(N, C, L)`` or ``(C, L)`` input."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation over ``(N, C, H, W)`` or ``(C, H, W)`` input."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""

    _spatial = 3


class GroupNorm(Module):
    """Group normalisation: ``num_channels`` split into ``num_groups`` groups, each normalised per
    sample over its channels and the spatial dims; then a per-channel ``weight``/``bias``
    (``affine``, starting at 1 and 0; ``bias=False`` keeps only the ``weight``)."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        dtype = dtype or _core.get_default_dtype()
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(_core.ones((num_channels,), dtype=dtype))
            if bias:
                self.bias = Parameter(_core.zeros((num_channels,), dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        if self.affine:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``(N, C, *)`` input by groups of channels."""
        if input.dim() < 2 or input.shape[1] != self.num_channels:
            raise ValueError(
                f"GroupNorm: expected input of shape (N, {self.num_channels}, *), got {tuple(input.shape)}"
            )
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class LocalResponseNorm(Module):
    """Local response normalisation across channels (see ``F.local_response_norm``)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``(N, C, *)`` input across neighbouring channels."""
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
