"""``torch.nn.functional`` names that draw random numbers, composed of registry ops:
``gumbel_softmax``, ``rrelu`` and ``feature_alpha_dropout``.

Re-exported by :mod:`ferrograd.nn.functional`. The draws come from the global generator
(``fg.manual_seed``) and carry no gradient; the gradient flows through the composition
(the sampled slope of ``rrelu``, the straight-through estimator of a hard
``gumbel_softmax``).
"""

from __future__ import annotations

import math

from .. import _core
from .._grad_mode import no_grad
from ._functional_more import _ALPHA
from .functional import _check_float, _check_p, _dtype_value, _maybe_inplace

Tensor = _core.Tensor

__all__ = ["feature_alpha_dropout", "gumbel_softmax", "rrelu", "rrelu_"]


def gumbel_softmax(
    logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """A sample of the Gumbel-softmax (concrete) distribution over ``dim``:
    ``softmax((logits + g) / tau)`` with ``g = -log(E)``, ``E`` standard exponential draws.
    With ``hard=True`` the result is the one-hot of the sample's argmax in the forward pass,
    while the gradient is the soft sample's (straight-through). ``eps`` is unused, as in
    PyTorch."""
    fn = "gumbel_softmax"
    _check_float(fn, "logits", logits)
    if tau <= 0:
        raise ValueError(f"{fn}: tau must be positive, got {tau}")
    with no_grad():
        u = _core.rand_like(logits)
        # 1 - u lies in (0, 1], so the exponential draw -log(1 - u) is finite and >= 0.
        gumbels = -(-(1.0 - u).log()).log()
    y = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    one_hot = _core.zeros_like(y).scatter(dim, index, 1.0)
    return one_hot - y.detach() + y


def _check_bounds(fn: str, lower: float, upper: float) -> None:
    if not lower <= upper:
        raise ValueError(f"{fn}: lower bound {lower} must not exceed upper bound {upper}")


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8.0,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomized leaky ReLU: negative elements are scaled by a slope drawn uniformly from
    ``[lower, upper]`` per element in training, by ``(lower + upper) / 2`` otherwise."""
    fn = "rrelu"
    _check_float(fn, "input", input)
    _check_bounds(fn, lower, upper)
    if training:
        with no_grad():
            slope = _core.empty_like(input).uniform_(lower, upper)
    else:
        slope = _dtype_value((lower + upper) / 2.0, input.dtype)
    out = _core.where(input >= 0, input, input * slope)
    return _maybe_inplace(input, out, inplace)


def rrelu_(
    input: Tensor, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, training: bool = False
) -> Tensor:
    """:func:`rrelu` in place."""
    return rrelu(input, lower, upper, training, inplace=True)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Alpha dropout of whole channels: for an ``(N, C, ...)`` input each ``(n, c)`` channel
    is kept or set to the SELU saturation value together, then scaled and shifted so the
    mean and variance are kept (as ``alpha_dropout`` does for elements)."""
    fn = "feature_alpha_dropout"
    _check_p(fn, p)
    _check_float(fn, "input", input)
    if input.dim() < 2:
        raise RuntimeError(
            f"{fn}: expects an input of at least 2 dimensions (N, C, ...), got shape {tuple(input.shape)}"
        )
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return _maybe_inplace(input, input * 0.0, inplace)
    q = _dtype_value(1.0 - p, input.dtype)
    shape = (*input.shape[:2], *([1] * (input.dim() - 2)))
    keep = _core.empty(shape, dtype=input.dtype, device=input.device).bernoulli(q)
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p))
    b = (keep - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    return _maybe_inplace(input, input * (keep * a) + b, inplace)
