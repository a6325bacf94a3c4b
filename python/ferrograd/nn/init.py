"""Parameter initialisation, as ``torch.nn.init``.

Every function fills its tensor in place without recording gradients and
returns it. Random values come from ferrograd's generator (the default one,
or ``generator=``), so ``fg.manual_seed`` makes initialisations reproducible.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

from .. import _core
from .._grad_mode import no_grad

Tensor = _core.Tensor

__all__ = [
    "calculate_gain",
    "constant",
    "constant_",
    "dirac",
    "dirac_",
    "eye",
    "eye_",
    "kaiming_normal",
    "kaiming_normal_",
    "kaiming_uniform",
    "kaiming_uniform_",
    "normal",
    "normal_",
    "ones_",
    "orthogonal",
    "orthogonal_",
    "sparse",
    "sparse_",
    "trunc_normal_",
    "uniform",
    "uniform_",
    "xavier_normal",
    "xavier_normal_",
    "xavier_uniform",
    "xavier_uniform_",
    "zeros_",
]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table).

    linear/conv*/sigmoid: 1; tanh: 5/3; relu: sqrt(2);
    leaky_relu: sqrt(2 / (1 + slope²)) (``param`` is the slope, default 0.01); selu: 3/4.
    """
    linear_fns = [
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int | float):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight: ``(in, out) * receptive field size``."""
    if tensor.dim() < 2:
        raise ValueError(
            f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
            f"(got shape {tuple(tensor.shape)})"
        )
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _no_grad_check(tensor: Tensor, fn: str) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"init.{fn}: expected a Tensor, got {type(tensor).__name__}")


def uniform_(
    tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: _core.Generator | None = None
) -> Tensor:
    """Fill with values drawn from U(a, b)."""
    _no_grad_check(tensor, "uniform_")
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: _core.Generator | None = None
) -> Tensor:
    """Fill with values drawn from N(mean, std²)."""
    _no_grad_check(tensor, "normal_")
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: _core.Generator | None = None,
) -> Tensor:
    """Fill with N(mean, std²) values truncated to ``[a, b]``.

    Out-of-range samples are redrawn (vectorised rejection sampling) until
    every value lies in ``[a, b]``.
    """
    _no_grad_check(tensor, "trunc_normal_")
    if not a < b:
        raise ValueError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    with no_grad():
        vals = _core.empty(tuple(tensor.shape), dtype=_core.float64).normal_(mean, std, generator=generator)
        for _ in range(1000):
            bad = (vals < a).logical_or(vals > b)
            if not bool(bad.any()):
                break
            fresh = _core.empty(tuple(tensor.shape), dtype=_core.float64).normal_(
                mean, std, generator=generator
            )
            vals = _core.where(bad, fresh, vals)
        else:  # pragma: no cover - only for a window far out in the tails
            vals = vals.clamp(a, b)
        tensor.copy_(vals)
    return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with the constant ``val``."""
    _no_grad_check(tensor, "constant_")
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    _no_grad_check(tensor, "zeros_")
    with no_grad():
        return tensor.zero_()


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.dim() != 2:
        raise ValueError(
            f"eye_: only tensors with 2 dimensions are supported, got shape {tuple(tensor.shape)}"
        )
    with no_grad():
        return tensor.copy_(_core.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a {3,4,5}-D convolution weight with the Dirac delta (identity convolution);
    ``groups`` splits the output channels, each group its own identity."""
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got {d}")
    if groups < 1 or tensor.shape[0] % groups != 0:
        raise ValueError(f"dirac_: dim 0 ({tensor.shape[0]}) must be divisible by groups ({groups})")
    out_per = tensor.shape[0] // groups
    min_dim = min(out_per, tensor.shape[1])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for i in range(min_dim):
                idx = (g * out_per + i, i) + tuple(s // 2 for s in tensor.shape[2:])
                tensor[idx] = 1.0
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: _core.Generator | None = None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: _core.Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std²) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: _core.Generator | None = None,
) -> Tensor:
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``, ``gain = calculate_gain(nonlinearity, a)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: _core.Generator | None = None,
) -> Tensor:
    """He normal: N(0, std²) with ``std = gain / sqrt(fan)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: _core.Generator | None = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (trailing dims flattened), scaled by ``gain``.

    Orthonormalises a normal random matrix by modified Gram–Schmidt, one
    vector at a time with tensor ops (the rows when there are fewer rows
    than columns, the columns otherwise).
    """
    if tensor.dim() < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = _core.empty((rows, cols), dtype=_core.float64).normal_(0.0, 1.0, generator=generator)
        m = flat if rows <= cols else flat.t()  # orthonormalise the shorter side's vectors
        vecs: list[Tensor] = []
        for i in range(m.shape[0]):
            v = m[i]
            for u in vecs:
                v = v - (v * u).sum() * u
            v = v / (v * v).sum().sqrt()
            vecs.append(v)
        q = _core.stack(vecs)
        if rows > cols:
            q = q.t()
        tensor.copy_((q * gain).reshape(tuple(tensor.shape)))
    return tensor


def sparse_(
    tensor: Tensor, sparsity: float, std: float = 0.01, generator: _core.Generator | None = None
) -> Tensor:
    """Fill a 2-D tensor from N(0, std²), then zero ``ceil(sparsity * rows)`` randomly chosen
    elements of every column (Martens, 2010), as ``torch.nn.init.sparse_``."""
    if tensor.dim() != 2:
        raise ValueError(
            f"sparse_: only tensors with 2 dimensions are supported, got shape {tuple(tensor.shape)}"
        )
    if not 0.0 <= float(sparsity) <= 1.0:
        raise ValueError(f"sparse_: sparsity must be in [0, 1], got {sparsity}")
    rows, cols = tensor.shape
    num_zeros = math.ceil(float(sparsity) * rows)
    with no_grad():
        tensor.normal_(0.0, float(std), generator=generator)
        if num_zeros:
            for col in range(cols):
                zero_rows = _core.randperm(rows, generator=generator)[:num_zeros]
                tensor[zero_rows, col] = 0.0
    return tensor


def _deprecated(new: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """The old name of ``new`` (``uniform`` for ``uniform_``): warns, as PyTorch, then calls it."""
    old = new.__name__[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
            FutureWarning,
            stacklevel=2,
        )
        return new(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old
    deprecated_init.__doc__ = f"Deprecated: use :func:`{new.__name__}` (this warns, then calls it)."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
