"""Helpers shared by the distributions: broadcasting, probs/logits conversion, sums."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from .. import _core

Tensor = _core.Tensor

__all__ = [
    "broadcast_all",
    "broadcast_shapes",
    "clamp_probs",
    "logits_to_probs",
    "probs_to_logits",
    "sum_rightmost",
]

# Machine epsilon and the smallest normal number of each floating dtype.
_EPS = {
    "float64": 2.220446049250313e-16,
    "float32": 1.1920928955078125e-07,
    "float16": 0.0009765625,
    "bfloat16": 0.0078125,
}
_TINY = {
    "float64": 2.2250738585072014e-308,
    "float32": 1.1754943508222875e-38,
    "float16": 6.103515625e-05,
    "bfloat16": 1.1754943508222875e-38,
}
_MAX = {
    "float64": 1.7976931348623157e308,
    "float32": 3.4028234663852886e38,
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
}


def _dtype_name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def eps(dtype: Any) -> float:
    """Machine epsilon of a floating dtype."""
    return _EPS.get(_dtype_name(dtype), _EPS["float32"])


def tiny(dtype: Any) -> float:
    """The smallest positive normal number of a floating dtype."""
    return _TINY.get(_dtype_name(dtype), _TINY["float32"])


def finfo_max(dtype: Any) -> float:
    """The largest finite number of a floating dtype."""
    return _MAX.get(_dtype_name(dtype), _MAX["float32"])


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape the given shapes broadcast to (NumPy's rules); ``ValueError`` if they do not."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = int(n)
            elif n != 1 and n != out[j]:
                raise ValueError(
                    f"shapes {', '.join(str(tuple(x)) for x in shapes)} cannot be broadcast together"
                )
    return tuple(out)


def broadcast_all(*values: Any, who: str = "distribution") -> tuple[Tensor, ...]:
    """Tensors (numbers become tensors of the tensors' dtype and device, float32
    when all are numbers) broadcast to one shape; gradients flow through."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    for v in values:
        if not isinstance(v, (Tensor, numbers.Number)):
            raise TypeError(f"{who}: parameters must be tensors or numbers, got {type(v).__name__}")
    if tensors:
        dtype, device = tensors[0].dtype, tensors[0].device
        for t in tensors:
            if t.dtype.is_floating_point and not dtype.is_floating_point:
                dtype = t.dtype
    else:
        dtype, device = _core.float32, None
    if not dtype.is_floating_point:
        dtype = _core.float32
    ts = []
    for v in values:
        if isinstance(v, Tensor):
            ts.append(v if v.dtype == dtype else v.to(dtype))
        else:
            ts.append(_core.tensor(float(v), dtype=dtype, device=device))
    try:
        shape = broadcast_shapes(*(tuple(t.shape) for t in ts))
    except ValueError:
        raise ValueError(
            f"{who}: parameter shapes {', '.join(str(tuple(t.shape)) for t in ts)} cannot be broadcast together"
        ) from None
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in ts)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    return value.reshape(*value.shape[: value.ndim - dim], -1).sum(-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped into ``[eps, 1 - eps]`` of their dtype."""
    e = eps(probs.dtype)
    return probs.clamp(min=e, max=1.0 - e)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: ``sigmoid`` (binary) or ``softmax`` over the last dimension."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities (clamped away from 0 and 1): ``log(p) - log1p(-p)``
    (binary) or ``log(p)``."""
    p = clamp_probs(probs)
    if is_binary:
        return p.log() - (-p).log1p()
    return p.log()


LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
