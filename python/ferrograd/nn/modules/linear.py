"""Affine layers: ``Identity``, ``Linear`` and ``Bilinear``."""

from __future__ import annotations

import math
from typing import Any

from ... import _core
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

Tensor = _core.Tensor

__all__ = ["Bilinear", "Identity", "Linear"]


class Identity(Module):
    """Returns its input unchanged (arguments to the constructor are ignored)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        """Return ``input``."""
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Initialisation as PyTorch: ``kaiming_uniform_(weight, a=sqrt(5))`` (i.e.
    U(-1/sqrt(in), 1/sqrt(in))) and bias U(-1/sqrt(in), 1/sqrt(in)). ``device`` and ``dtype``
    come in PyTorch's order (``Linear(in, out, bias, device, dtype)``, as subclasses pass them
    on); the parameters are drawn on the CPU and then moved to ``device``.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        dtype = dtype or _core.get_default_dtype()
        self.weight = Parameter(_core.empty((out_features, in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(_core.empty((out_features,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Re-draw the weight and bias with the default initialisation."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        """Apply the affine map to the last dim of ``input``."""
        p = self._parameters  # (a plain dict lookup: cheaper than Module.__getattr__)
        # A parametrized or hook-normalised weight is an attribute computed elsewhere.
        weight = p["weight"] if "weight" in p else self.weight
        return F.linear(input, weight, p["bias"])

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


class Bilinear(Module):
    """``y = x1ᵀ A x2 + b`` with ``weight`` ``(out_features, in1_features, in2_features)``.

    Weight and bias start uniform in ``±1/sqrt(in1_features)``, as PyTorch.
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        dtype = dtype or _core.get_default_dtype()
        self.weight = Parameter(_core.empty((out_features, in1_features, in2_features), dtype=dtype))
        if bias:
            self.bias = Parameter(_core.empty((out_features,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Re-draw weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        bound = 1 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        """Apply the bilinear form to the last dims of ``input1`` and ``input2``."""
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
