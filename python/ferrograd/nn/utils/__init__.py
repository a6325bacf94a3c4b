"""Gradient clipping, parameter/vector conversion, sequence padding (``rnn``), parametrizations
(``parametrize``, ``parametrizations``) and the hook-based weight and spectral norms, as
``torch.nn.utils``."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Iterable
from typing import Any

from ... import _capture, _core
from ..._grad_mode import no_grad
from . import fusion, parametrizations, parametrize, rnn, stateless
from ._legacy_norms import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights

Tensor = _core.Tensor

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "fusion",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "remove_spectral_norm",
    "remove_weight_norm",
    "stateless",
    "rnn",
    "skip_init",
    "spectral_norm",
    "vector_to_parameters",
    "weight_norm",
]


def _as_list(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def _acc(t: Tensor) -> Any:
    """The dtype norms accumulate in: float64, or float32 on the gpu device (which has no float64)."""
    return _core.float32 if str(t.device).startswith("gpu") else _core.float64


def _part_dtype(t: Tensor) -> Any:
    """The dtype one tensor's partial norm is taken in: its own for float32/float64, float32
    for the half types (whose range a sum of powers would overflow)."""
    return t.dtype if t.dtype in (_core.float32, _core.float64) else _core.float32


def _partial(t: Tensor, norm_type: float) -> Tensor:
    """One tensor's share of the total norm, as a 0-d tensor: ``sum(|t|^p)`` (``max|t|``,
    ``min|t|`` or the count of nonzeros for ``inf``, ``-inf``, 0), in :func:`_part_dtype`.
    The kernels accumulate in registers, so no widened copy of ``t`` is made."""
    t = t.detach()
    if t.dtype != _part_dtype(t):
        t = t.to(_part_dtype(t))
    if norm_type == math.inf:
        return t.amax().maximum(-t.amin())
    if norm_type == -math.inf:
        return t.abs().amin()
    if norm_type == 0:
        return (t != 0).sum()
    if norm_type == 2.0:
        flat = t.reshape(-1)
        return flat.dot(flat)
    if norm_type == 1.0:
        return t.abs().sum()
    return t.abs().pow(norm_type).sum()


def get_total_norm(
    tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` taken together (as one vector), a 0-d float tensor.

    Each tensor's partial sum of powers is taken in its own dtype (float32 for the half types)
    without copying it, and the partials are combined in float64 (float32 on the gpu device).
    """
    ts = _as_list(tensors)
    norm_type = float(norm_type)
    if not ts:
        return _core.tensor(0.0)
    with no_grad():
        acc = _acc(ts[0])
        partial = [_partial(t, norm_type) for t in ts]
        if len({x.dtype for x in partial}) == 1:
            parts = _core.stack(partial).to(acc)  # one cast, not one per tensor
        else:
            parts = _core.stack([x.to(acc) for x in partial])
        if norm_type == math.inf:
            total = parts.amax()
        elif norm_type == -math.inf:
            total = parts.amin()
        elif norm_type == 0:
            total = parts.sum()
        else:
            total = parts.sum().pow(1.0 / norm_type)
        if error_if_nonfinite and not _capture.is_capturing() and not bool(total.isfinite()):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                "anyway, set `error_if_nonfinite=False`"
            )
        return total.to(ts[0].dtype)


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients of ``parameters`` in place so their joint norm is at most ``max_norm``.

    The norm is taken over all gradients together, as if concatenated into
    one vector; ``norm_type`` may be ``inf``. Gradients are multiplied by
    ``min(1, max_norm / (total_norm + 1e-6))``. Returns the total norm
    (before clipping) as a 0-d tensor. ``error_if_nonfinite`` raises if the
    norm is NaN or infinite. ``foreach`` is accepted for compatibility. The
    same as :func:`get_total_norm` followed by :func:`clip_grads_with_norm_`.
    """
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return _core.tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    _scale_grads(grads, max_norm, total)
    return total


def _scale_grads(grads: list[Tensor], max_norm: float, total: Tensor | float) -> None:
    """Multiply ``grads`` in place by ``min(1, max_norm / (total + 1e-6))``."""
    with no_grad():
        if isinstance(total, Tensor):
            total = total.to(_acc(total))
        else:
            total = _core.tensor(float(total), dtype=_acc(grads[0]), device=grads[0].device)
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        # The factor is cast once per dtype, not once per gradient.
        by_dtype: dict[Any, Tensor] = {}
        for g in grads:
            c = by_dtype.get(g.dtype)
            if c is None:
                c = by_dtype[g.dtype] = coef.to(g.dtype)
            g.mul_(c)


def clip_grads_with_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    total_norm: Tensor | float,
    foreach: bool | None = None,
) -> None:
    """Scale the gradients of ``parameters`` in place by ``min(1, max_norm / (total_norm +
    1e-6))``, given a ``total_norm`` computed beforehand (e.g. by :func:`get_total_norm`,
    possibly over more parameters than these). ``foreach`` is accepted for compatibility."""
    if isinstance(total_norm, Tensor):
        if total_norm.numel() != 1:
            raise ValueError(
                f"clip_grads_with_norm_: total_norm must have one element, got shape {tuple(total_norm.shape)}"
            )
    elif isinstance(total_norm, bool) or not isinstance(total_norm, (int, float)):
        raise TypeError(
            f"clip_grads_with_norm_: total_norm must be a Tensor or a number, got {type(total_norm).__name__}"
        )
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if grads:
        _scale_grads(
            grads, max_norm, total_norm.reshape(()) if isinstance(total_norm, Tensor) else total_norm
        )


def clip_grad_norm(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (warns with a ``FutureWarning``, as PyTorch)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Any:
    """Make ``module_cls(*args, **kwargs)`` for parameters that will be overwritten (e.g.
    loaded from a checkpoint), as ``torch.nn.utils.skip_init``.

    PyTorch leaves the parameters uninitialised (their values are undefined); ferrograd has
    no ``meta`` device, so here the constructor runs as usual and the values are its
    initialisation. As in PyTorch, ``module_cls`` must be a Module class whose constructor
    takes ``device`` (the module is placed there; default cpu).
    """
    from ..modules.module import Module

    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"skip_init: expected a Module class; got {module_cls!r}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError(
            f"skip_init: module {module_cls.__name__} must support a 'device' arg to skip initialization"
        )
    return module_cls(*args, **kwargs)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient of ``parameters`` into ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Concatenate the flattened ``parameters`` into one 1-D tensor (differentiable)."""
    return _core.cat([p.reshape(-1) for p in _as_list(parameters)])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (in place, without gradient)."""
    if not isinstance(vec, Tensor) or vec.dim() != 1:
        raise TypeError(f"vector_to_parameters: expected a 1-D Tensor, got {type(vec).__name__}")
    params = _as_list(parameters)
    total = sum(p.numel() for p in params)
    if vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vector has {vec.numel()} elements, the parameters {total}")
    offset = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec.narrow(0, offset, n).reshape(tuple(p.shape)))
            offset += n
