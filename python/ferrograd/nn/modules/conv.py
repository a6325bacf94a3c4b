"""Convolution layers: ``Conv1d``, ``Conv2d``, ``Conv3d`` and the transposed ``ConvTranspose1d/2d/3d``."""

from __future__ import annotations

import math
from typing import Any

from ... import _core
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

Tensor = _core.Tensor

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(x: Any, n: int, name: str) -> tuple[int, ...]:
    if isinstance(x, int):
        return (x,) * n
    t = tuple(x)
    if len(t) != n or not all(isinstance(v, int) for v in t):
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {x!r}")
    return t


class _ConvNd(Module):
    """Shared constructor, initialisation and repr of the convolution layers."""

    _n: int
    _fn: Any

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: str | int | tuple[int, ...] = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._n
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups != 0:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size")
        self.stride = _ntuple(stride, n, "stride")
        self.dilation = _ntuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding string must be 'same' or 'valid', got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding: str | tuple[int, ...] = padding
        else:
            self.padding = _ntuple(padding, n, "padding")
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = dtype or _core.get_default_dtype()
        self.weight = Parameter(
            _core.empty((out_channels, in_channels // groups, *self.kernel_size), dtype=dtype)
        )
        if bias:
            self.bias = Parameter(_core.empty((out_channels,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Default initialisation: kaiming_uniform_(a=sqrt(5)) weight, U(±1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _explicit_padding(self) -> tuple[int, ...]:
        """(before, after) amounts per spatial dim, last dim first, as ``F.pad`` takes them."""
        if self.padding == "valid":
            return (0,) * (2 * self._n)
        if self.padding == "same":
            amounts = []
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size), strict=True):
                total = d * (k - 1)
                amounts += [total // 2, total - total // 2]
            return tuple(amounts)
        out: list[int] = []
        for p in reversed(self.padding):  # type: ignore[arg-type]
            out += [p, p]
        return tuple(out)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if self.padding_mode != "zeros":
            input = F.pad(input, self._explicit_padding(), mode=self.padding_mode)
            padding: Any = 0
        else:
            padding = self.padding
        return type(self)._fn(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        """Convolve ``input`` (batched ``(N, C, ...)`` or unbatched ``(C, ...)``)."""
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._n:
            s += (
                f", padding={self.padding!r}"
                if isinstance(self.padding, str)
                else f", padding={self.padding}"
            )
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C_in, L)``: weight ``(C_out, C_in/groups, k)``.

    Options as ``torch.nn.Conv1d``: stride, padding (int, tuple, 'same',
    'valid'), dilation, groups, bias, padding_mode ('zeros', 'reflect',
    'replicate', 'circular').
    """

    _n = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution over ``(N, C_in, H, W)``: weight ``(C_out, C_in/groups, kH, kW)``.

    Options as ``torch.nn.Conv2d``: stride, padding (int, pair, 'same',
    'valid'), dilation, groups, bias, padding_mode ('zeros', 'reflect',
    'replicate', 'circular').
    """

    _n = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_ConvNd):
    """3-D convolution over ``(N, C_in, D, H, W)``: weight ``(C_out, C_in/groups, kD, kH, kW)``.

    Options as ``torch.nn.Conv3d``: stride, padding (int, triple, 'same',
    'valid'), dilation, groups, bias, padding_mode.
    """

    _n = 3
    _fn = staticmethod(F.conv3d)


class _ConvTransposeNd(Module):
    """Shared constructor, ``output_size`` handling and repr of the transposed convolutions."""

    _n: int
    _fn: Any

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
        output_padding: int | tuple[int, ...] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, ...] = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._n
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups != 0:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f'{name}: only "zeros" padding_mode is supported, got {padding_mode!r}')
        if isinstance(padding, str):
            raise ValueError(f"{name}: padding must be an int or a tuple of {n} ints, got {padding!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size")
        self.stride = _ntuple(stride, n, "stride")
        self.padding = _ntuple(padding, n, "padding")
        self.output_padding = _ntuple(output_padding, n, "output_padding")
        self.dilation = _ntuple(dilation, n, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = True
        dtype = dtype or _core.get_default_dtype()
        self.weight = Parameter(
            _core.empty((in_channels, out_channels // groups, *self.kernel_size), dtype=dtype)
        )
        if bias:
            self.bias = Parameter(_core.empty((out_channels,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: kaiming_uniform_(a=sqrt(5)) on the weight as laid out
        (fan_in = out_channels/groups * kernel size), U(±1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:
        """The ``output_padding`` that makes the output's spatial size ``output_size``."""
        if output_size is None:
            return self.output_padding
        name = type(self).__name__
        n = self._n
        size = [int(v) for v in output_size]
        if len(size) == n + 2 or (len(size) == n + 1 and input.dim() == n + 1):
            size = size[-n:]
        if len(size) != n:
            raise ValueError(
                f"{name}: output_size must have {n} or {n + 2} elements (got {len(size)}: {list(output_size)})"
            )
        spatial = tuple(input.shape[-n:])
        out: list[int] = []
        for i in range(n):
            lo = (
                (spatial[i] - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            hi = lo + self.stride[i] - 1
            if not lo <= size[i] <= hi:
                raise ValueError(
                    f"{name}: requested an output size of {size}, but valid sizes for input "
                    f"{tuple(input.shape)} range from {lo} to {hi} in dim {i} (for an input of {spatial})"
                )
            out.append(size[i] - lo)
        return tuple(out)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        """Transposed convolution of ``input`` (batched or unbatched); ``output_size``
        (spatial, optionally with the leading ``(N, C)``) picks the ``output_padding``."""
        op = self._output_padding(input, output_size)
        return type(self)._fn(
            input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation
        )

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over ``(N, C_in, L)``: weight ``(C_in, C_out/groups, k)``.

    Options as ``torch.nn.ConvTranspose1d``: stride, padding, output_padding,
    groups, bias, dilation; ``forward(input, output_size=None)``.
    """

    _n = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, C_in, H, W)``: weight ``(C_in, C_out/groups, kH, kW)``.

    Options as ``torch.nn.ConvTranspose2d``: stride, padding, output_padding,
    groups, bias, dilation; ``forward(input, output_size=None)``.
    """

    _n = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over ``(N, C_in, D, H, W)``: weight ``(C_in, C_out/groups, kD, kH, kW)``.

    Options as ``torch.nn.ConvTranspose3d``: stride, padding, output_padding,
    groups, bias, dilation; ``forward(input, output_size=None)``.
    """

    _n = 3
    _fn = staticmethod(F.conv_transpose3d)
