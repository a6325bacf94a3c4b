"""``LazyLinear``: a ``Linear`` whose ``in_features`` is taken from its first input."""

from __future__ import annotations

from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from .. import functional as F
from ..parameter import Parameter
from .linear import Linear
from .module import Module

Tensor = _core.Tensor

__all__ = ["LazyLinear"]


class LazyLinear(Linear):
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
