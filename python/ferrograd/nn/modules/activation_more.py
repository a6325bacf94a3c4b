"""More activation-like layers: ``Softshrink``, ``Hardshrink``, ``Threshold``,
``ChannelShuffle`` and ``AlphaDropout``."""

from __future__ import annotations

from ... import _core
from .. import functional as F
from .module import Module

Tensor = _core.Tensor

__all__ = [
    "AlphaDropout",
    "ChannelShuffle",
    "FeatureAlphaDropout",
    "Hardshrink",
    "RReLU",
    "Softshrink",
    "Threshold",
]


class Softshrink(Module):
    """``x - λ`` where ``x > λ``, ``x + λ`` where ``x < -λ``, else 0 (``λ = lambd``)."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        """Apply soft shrinkage."""
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Module):
    """``x`` where ``|x| > λ``, else 0 (``λ = lambd``)."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        """Apply hard shrinkage."""
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply the threshold."""
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"threshold={self.threshold}, value={self.value}{inplace}"


class ChannelShuffle(Module):
    """Interleave the channels of ``(N, C, *)`` input from ``groups`` groups."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        """Shuffle the channels."""
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class AlphaDropout(Module):
    """In training, alpha dropout (see ``F.alpha_dropout``): keeps the zero mean and unit
    variance of SELU activations; identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"AlphaDropout: dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply alpha dropout (only in training mode)."""
        return F.alpha_dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class FeatureAlphaDropout(Module):
    """In training, alpha dropout of whole channels (see ``F.feature_alpha_dropout``);
    identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(
                f"FeatureAlphaDropout: dropout probability has to be between 0 and 1, but got {p}"
            )
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply channel-wise alpha dropout (only in training mode)."""
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class RReLU(Module):
    """Randomized leaky ReLU (see ``F.rrelu``): a random negative slope in
    ``[lower, upper]`` per element in training, their mean in eval."""

    def __init__(self, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, inplace: bool = False) -> None:
        super().__init__()
        if not lower <= upper:
            raise ValueError(f"RReLU: lower bound {lower} must not exceed upper bound {upper}")
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """Apply randomized leaky ReLU."""
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")
