"""Activation layers: ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``Softmax``, ... ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import _core
from ..._grad_mode import no_grad as no_grad
from .. import functional as F
from ..parameter import Parameter
from .module import Module

Tensor = _core.Tensor


def _inplace(input: Tensor, fn: Callable[[Tensor], Tensor], native: str | None = None) -> Tensor:
    """Write ``fn(input)`` into ``input`` and return it (the ``inplace=True`` path).

    Without autograd recording, the core's native in-place op (``native``,
    e.g. ``relu_``) is used when there is one. When the result will be
    differentiated, ``fn`` runs on a clone and the result is copied back:
    the core's unary in-place ops save their (overwritten) input for the
    backward pass, so differentiating through ``relu_``/``silu_`` raises
    (a core bug, see tests/test_nn.py::test_core_unary_inplace_backward),
    and ``leaky_relu``/``elu`` have no in-place op.
    """
    if native is not None and not (input.requires_grad and _core.is_grad_enabled()):
        return getattr(input, native)()
    return input.copy_(fn(input.clone()))


__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "PReLU",
    "ReLU",
    "ReLU6",
    "SELU",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softmax2d",
    "Softmin",
    "Softplus",
    "Softsign",
    "Tanh",
    "Tanhshrink",
]


class ReLU(Module):
    """``max(x, 0)`` elementwise (``inplace=True`` overwrites the input)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply ReLU."""
        return _inplace(input, F.relu, "relu_") if self.inplace else input.relu()

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``max(x, 0) + negative_slope * min(x, 0)`` elementwise."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply leaky ReLU."""
        if self.inplace:
            return _inplace(input, lambda x: F.leaky_relu(x, self.negative_slope))
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply ELU."""
        if self.inplace:
            return _inplace(input, lambda x: F.elu(x, self.alpha))
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """Gaussian error linear unit, exact (``approximate='none'``) or the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        """Apply GELU."""
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """Hyperbolic tangent elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply tanh."""
        return input.tanh()


class Sigmoid(Module):
    """Logistic sigmoid ``1 / (1 + exp(-x))`` elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply the sigmoid."""
        return input.sigmoid()


class SiLU(Module):
    """``x * sigmoid(x)`` elementwise (a.k.a. swish)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply SiLU."""
        return _inplace(input, F.silu, "silu_") if self.inplace else input.silu()


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        """Apply softplus."""
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


def _check_dim(name: str, dim: int | None) -> int:
    if dim is None:
        raise ValueError(f"{name}: dim must be given (implicit dim choice is deprecated in PyTorch)")
    return dim


class Softmax(Module):
    """Softmax along ``dim``: ``exp(x) / sum(exp(x))``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        """Apply softmax along ``dim``."""
        return input.softmax(_check_dim("Softmax", self.dim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``: ``x - logsumexp(x)``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        """Apply log-softmax along ``dim``."""
        return input.log_softmax(_check_dim("LogSoftmax", self.dim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def _inplace_str(inplace: bool, lead: str = ", ") -> str:
    return f"{lead}inplace=True" if inplace else ""


class _InplaceActivation(Module):
    """An elementwise activation with an ``inplace`` flag (the result is written into the input)."""

    _fn: Callable[[Tensor], Tensor]

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply the activation."""
        f = type(self)._fn
        return _inplace(input, f) if self.inplace else f(input)

    def extra_repr(self) -> str:
        return _inplace_str(self.inplace, "")


class Hardsigmoid(_InplaceActivation):
    """``clamp(x + 3, 0, 6) / 6``."""

    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_InplaceActivation):
    """``x * clamp(x + 3, 0, 6) / 6``."""

    _fn = staticmethod(F.hardswish)


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``."""

    _fn = staticmethod(F.mish)


class SELU(_InplaceActivation):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""

    _fn = staticmethod(F.selu)


class Hardtanh(Module):
    """``clamp(x, min_val, max_val)``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError(
                f"{type(self).__name__}: min_val ({min_val}) cannot be greater than max_val ({max_val})"
            )
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Clamp ``input``."""
        f = lambda x: F.hardtanh(x, self.min_val, self.max_val)  # noqa: E731
        return _inplace(input, f) if self.inplace else f(input)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_str(self.inplace)


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_str(self.inplace, "")


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply CELU."""
        f = lambda x: F.celu(x, self.alpha)  # noqa: E731
        return _inplace(input, f) if self.inplace else f(input)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + _inplace_str(self.inplace)


class GLU(Module):
    """Gated linear unit along ``dim``: halves ``a, b``; ``a * sigmoid(b)``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        """Apply GLU."""
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSigmoid(Module):
    """``log(sigmoid(x))``."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply log-sigmoid."""
        return F.logsigmoid(input)


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply softsign."""
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply tanhshrink."""
        return F.tanhshrink(input)


class PReLU(Module):
    """``x`` where ``x > 0``, else ``weight * x``, with a learnable ``weight`` of ``num_parameters``
    elements (1, or one per channel on dim 1) starting at ``init``."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_core.full((num_parameters,), init, dtype=dtype or _core.get_default_dtype()))
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Refill ``weight`` with ``init``."""
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input: Tensor) -> Tensor:
        """Apply PReLU."""
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of ``(N, C, H, W)`` or ``(C, H, W)`` input."""

    def forward(self, input: Tensor) -> Tensor:
        """Apply softmax over the channels."""
        if input.dim() not in (3, 4):
            raise ValueError(
                f"Softmax2d: expected 3D or 4D input, got {input.dim()}D input {tuple(input.shape)}"
            )
        return input.softmax(-3)


class Softmin(Module):
    """Softmin along ``dim``: ``softmax(-x)``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        """Apply softmin along ``dim``."""
        return F.softmin(input, _check_dim("Softmin", self.dim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
