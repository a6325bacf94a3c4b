"""Lazy layers: ``LazyLinear``, ``LazyConv*``, ``LazyConvTranspose*``, ``LazyBatchNorm*`` and
``LazyInstanceNorm*``, whose input size is taken from their first input (``LazyModuleMixin``)."""

from __future__ import annotations

from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from .. import functional as F
from ..parameter import Parameter, UninitializedBuffer, UninitializedParameter
from .conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    _ConvNd,
    _ConvTransposeNd,
)
from .linear import Linear
from .module import Module
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _BatchNorm,
)

Tensor = _core.Tensor

__all__ = [
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
    "LazyModuleMixin",
]


class LazyModuleMixin:
    """Mixin of the lazy layers: parameters start as :class:`UninitializedParameter`
    (buffers as :class:`UninitializedBuffer`) and are sized from the first input.

    A lazy layer's ``forward`` calls :meth:`initialize_parameters` with its input once,
    then the module becomes ``cls_to_become`` (e.g. ``LazyConv2d`` becomes ``Conv2d``),
    as PyTorch does. The parameter objects are kept, so an optimizer built before the
    first call trains the sized weights (PyTorch recommends building it after). A
    ``state_dict`` taken before the first call holds the empty placeholders; loading
    one sizes them from the stored shapes.
    """

    cls_to_become: Any = None

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer still waits for the first input."""
        members = list(self._parameters.values()) + list(self._buffers.values())  # type: ignore[attr-defined]
        return any(isinstance(t, (UninitializedParameter, UninitializedBuffer)) for t in members)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Size the parameters for the given input (each lazy layer defines it)."""
        raise NotImplementedError(f"{type(self).__name__}: initialize_parameters is not implemented")

    def _infer_parameters(self, *args: Any) -> None:
        self.initialize_parameters(*args)
        if self.has_uninitialized_params():
            raise RuntimeError(f"{type(self).__name__}: module has not been fully initialized")
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def _materialize_buffer(self, name: str, shape: tuple[int, ...]) -> Tensor | None:
        buf = self._buffers.get(name)  # type: ignore[attr-defined]
        if isinstance(buf, UninitializedBuffer):
            buf = buf.materialize(shape)
            self._buffers[name] = buf  # type: ignore[attr-defined]
        return buf

    def _apply(self, fn: Any) -> Any:
        # Conversions keep the placeholders uninitialised (``.to(float64)`` before the first call).
        lazy = {k for k, b in self._buffers.items() if isinstance(b, UninitializedBuffer)}  # type: ignore[attr-defined]
        out = super()._apply(fn)  # type: ignore[misc]
        for k in lazy:
            b = self._buffers[k]  # type: ignore[attr-defined]
            if not isinstance(b, UninitializedBuffer):
                self._buffers[k] = UninitializedBuffer(device=b.device, dtype=b.dtype)  # type: ignore[attr-defined]
        return out

    def _lazy_load_hook(self, state_dict: Any, prefix: str) -> None:
        """Size the uninitialised members from the shapes stored in ``state_dict``."""
        for name, p in list(self._parameters.items()):  # type: ignore[attr-defined]
            src = state_dict.get(prefix + name)
            if isinstance(p, UninitializedParameter) and isinstance(src, Tensor):
                p.materialize(tuple(src.shape))
        for name, b in list(self._buffers.items()):  # type: ignore[attr-defined]
            src = state_dict.get(prefix + name)
            if isinstance(b, UninitializedBuffer) and isinstance(src, Tensor):
                self._materialize_buffer(name, tuple(src.shape))
        self._sizes_from_members()

    def _sizes_from_members(self) -> None:
        """Set the size attributes (``in_channels``, ``num_features``) from sized members."""


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` layer whose ``in_features`` is inferred at the first call from the
    input's last dim (until then ``in_features`` is 0 and the weight is empty). The first
    call sizes and initialises the weight and bias in place (the same ``Parameter``
    objects, so an optimizer built earlier trains them) and turns the module into a
    plain ``Linear``, as PyTorch does. Loading a ``state_dict`` first sizes them from it.
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        dtype = dtype or _core.get_default_dtype()
        # Empty placeholders: ``.to()`` before the first call converts them, and the sized
        # parameters take their dtype and device.
        self.weight = Parameter(_core.empty((0,), dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(_core.empty((0,), dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)

    def has_uninitialized_params(self) -> bool:
        """Whether the weight is still waiting for the first input."""
        return self.weight.dim() == 1 and self.weight.numel() == 0

    def reset_parameters(self) -> None:
        """Initialise as ``Linear`` once sized (a no-op before the first call)."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def _materialize(self, in_features: int) -> None:
        self.in_features = in_features
        dev, dtype = self.weight.device, self.weight.dtype
        with no_grad():
            self.weight.data = _core.empty((self.out_features, in_features), dtype=dtype, device=dev)
            if self.bias is not None:
                self.bias.data = _core.empty((self.out_features,), dtype=dtype, device=dev)
        self.reset_parameters()
        self.__class__ = self.cls_to_become  # type: ignore[assignment]

    def initialize_parameters(self, input: Tensor) -> None:
        """Size and initialise the parameters for ``input`` (``in_features = input.shape[-1]``)."""
        if self.has_uninitialized_params():
            if input.dim() == 0:
                raise ValueError(
                    "LazyLinear: the input must have at least 1 dim (the features), got a 0-d tensor"
                )
            self._materialize(int(input.shape[-1]))

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> Any:
        """Size the parameters from ``state_dict["weight"]`` (if still unsized), then load."""
        w = state_dict.get("weight") if hasattr(state_dict, "get") else None
        if self.has_uninitialized_params() and isinstance(w, Tensor) and w.dim() == 2:
            self._materialize(int(w.shape[1]))
        return Module.load_state_dict(self, state_dict, strict)

    def forward(self, input: Tensor) -> Tensor:
        """Size the layer at the first call, then apply ``x @ weight.T + bias``."""
        self.initialize_parameters(input)
        return F.linear(input, self.weight, self.bias)


def _channels(name: str, input: Tensor, n: int) -> int:
    """The channel count of a batched ``(N, C, *n)`` or unbatched ``(C, *n)`` input."""
    if input.dim() == n + 2:
        return int(input.shape[1])
    if input.dim() == n + 1:
        return int(input.shape[0])
    raise ValueError(
        f"{name}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got shape {tuple(input.shape)}"
    )


class _LazyConvMixin(LazyModuleMixin):
    """The lazy convolutions: ``in_channels`` from the first input's channel dim."""

    _n: int
    _transposed = False
    in_channels: int
    out_channels: int
    groups: int
    kernel_size: tuple[int, ...]
    weight: Any
    bias: Any

    def _lazy_init(self, bias: bool, device: Any, dtype: Any) -> None:
        dtype = dtype or _core.get_default_dtype()
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """Initialise as the concrete convolution once sized (a no-op before)."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()  # type: ignore[misc]

    def _weight_shape(self) -> tuple[int, ...]:
        g = self.groups
        if self._transposed:
            return (self.in_channels, self.out_channels // g, *self.kernel_size)
        return (self.out_channels, self.in_channels // g, *self.kernel_size)

    def _sizes_from_members(self) -> None:
        if not isinstance(self.weight, UninitializedParameter) and self.weight.dim() == self._n + 2:
            i = 0 if self._transposed else 1
            c = int(self.weight.shape[i])
            self.in_channels = c if self._transposed else c * self.groups

    def initialize_parameters(self, input: Tensor, *args: Any) -> None:
        """Size the weight for ``input``'s channel count and initialise it."""
        if not self.has_uninitialized_params():
            return
        name = type(self).__name__
        c = _channels(name, input, self._n)
        if c % self.groups != 0:
            raise ValueError(f"{name}: in_channels ({c}) must be divisible by groups ({self.groups})")
        self.in_channels = c
        self.weight.materialize(self._weight_shape())
        if isinstance(self.bias, UninitializedParameter):
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()

    def forward(self, input: Tensor, *args: Any) -> Tensor:
        """Size the layer at the first call, then run the concrete convolution."""
        self._infer_parameters(input)
        return self.forward(input, *args)  # type: ignore[no-any-return]


class _LazyConv(_LazyConvMixin):
    def __init__(
        self,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        _ConvNd.__init__(
            self,  # type: ignore[arg-type]
            0,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            False,
            padding_mode,
            None,
            dtype,
        )
        self._lazy_init(bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    _transposed = True

    def __init__(
        self,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        _ConvTransposeNd.__init__(
            self,  # type: ignore[arg-type]
            0,
            out_channels,
            kernel_size,
            stride,
            padding,
            output_padding,
            groups,
            False,
            dilation,
            padding_mode,
            None,
            dtype,
        )
        self._lazy_init(bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A :class:`Conv1d` whose ``in_channels`` is inferred from the first input (then it is a ``Conv1d``)."""

    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A :class:`Conv2d` whose ``in_channels`` is inferred from the first input (then it is a ``Conv2d``)."""

    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A :class:`Conv3d` whose ``in_channels`` is inferred from the first input (then it is a ``Conv3d``)."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A :class:`ConvTranspose1d` whose ``in_channels`` is inferred from the first input."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A :class:`ConvTranspose2d` whose ``in_channels`` is inferred from the first input."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A :class:`ConvTranspose3d` whose ``in_channels`` is inferred from the first input."""

    cls_to_become = ConvTranspose3d


class _LazyNormBase(LazyModuleMixin):
    """The lazy batch and instance norms: ``num_features`` from the first input's channel dim."""

    _lazy_spatial: int
    num_features: int
    affine: bool
    track_running_stats: bool

    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        _BatchNorm.__init__(self, 0, eps, momentum, False, False, None, dtype)  # type: ignore[arg-type]
        dtype = dtype or _core.get_default_dtype()
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.register_buffer("running_mean", UninitializedBuffer(device=device, dtype=dtype))  # type: ignore[attr-defined]
            self.register_buffer("running_var", UninitializedBuffer(device=device, dtype=dtype))  # type: ignore[attr-defined]
            self.register_buffer(  # type: ignore[attr-defined]
                "num_batches_tracked", _core.zeros((), dtype=_core.int64, device=device)
            )

    def reset_parameters(self) -> None:
        """Initialise as the concrete norm once sized (a no-op before)."""
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()  # type: ignore[misc]

    def _sizes_from_members(self) -> None:
        for name in ("weight", "running_mean"):
            t = getattr(self, name, None)
            if isinstance(t, Tensor) and not isinstance(t, (UninitializedParameter, UninitializedBuffer)):
                self.num_features = int(t.shape[0])
                return

    def initialize_parameters(self, input: Tensor) -> None:
        """Size the per-channel members for ``input`` and initialise them."""
        if not self.has_uninitialized_params():
            return
        name = type(self).__name__
        n = self._lazy_spatial
        if n < 0:  # BatchNorm1d: (N, C) or (N, C, L)
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: expected 2D or 3D input (got {input.dim()}D input)")
            c = int(input.shape[1])
        else:
            c = _channels(name, input, n)
        self.num_features = c
        if self.affine:
            self.weight.materialize((c,))
            self.bias.materialize((c,))
        if self.track_running_stats:
            self._materialize_buffer("running_mean", (c,))
            self._materialize_buffer("running_var", (c,))
        self.reset_parameters()

    def forward(self, input: Tensor) -> Tensor:
        """Size the layer at the first call, then normalise as the concrete class."""
        self._infer_parameters(input)
        return self.forward(input)  # type: ignore[no-any-return]


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A :class:`BatchNorm1d` whose ``num_features`` is inferred from the first input."""

    cls_to_become = BatchNorm1d
    _lazy_spatial = -1


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A :class:`BatchNorm2d` whose ``num_features`` is inferred from the first input."""

    cls_to_become = BatchNorm2d
    _lazy_spatial = 2

    def initialize_parameters(self, input: Tensor) -> None:
        """Size the per-channel members for a 4-D ``input``."""
        if self.has_uninitialized_params() and input.dim() != 4:
            raise ValueError(f"{type(self).__name__}: expected 4D input (got {input.dim()}D input)")
        super().initialize_parameters(input)


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """A :class:`BatchNorm3d` whose ``num_features`` is inferred from the first input."""

    cls_to_become = BatchNorm3d
    _lazy_spatial = 3

    def initialize_parameters(self, input: Tensor) -> None:
        """Size the per-channel members for a 5-D ``input``."""
        if self.has_uninitialized_params() and input.dim() != 5:
            raise ValueError(f"{type(self).__name__}: expected 5D input (got {input.dim()}D input)")
        super().initialize_parameters(input)


class _LazyInstanceNorm(_LazyNormBase):
    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """An :class:`InstanceNorm1d` whose ``num_features`` is inferred from the first input."""

    cls_to_become = InstanceNorm1d
    _lazy_spatial = 1


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """An :class:`InstanceNorm2d` whose ``num_features`` is inferred from the first input."""

    cls_to_become = InstanceNorm2d
    _lazy_spatial = 2


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """An :class:`InstanceNorm3d` whose ``num_features`` is inferred from the first input."""

    cls_to_become = InstanceNorm3d
    _lazy_spatial = 3
