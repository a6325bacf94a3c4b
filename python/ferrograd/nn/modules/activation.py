"""Activation layers: ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``Softmax``, ... ."""

from __future__ import annotations

from collections.abc import Callable

from ... import _core
from .. import functional as F
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
    "ELU",
    "GELU",
    "LeakyReLU",
    "LogSoftmax",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
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
