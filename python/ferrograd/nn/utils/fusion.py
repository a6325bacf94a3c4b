"""Folding an eval-mode batch norm into the convolution or linear layer before it, as
``torch.nn.utils.fusion``."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from ... import _core
from ..._grad_mode import no_grad
from ..parameter import Parameter

Tensor = _core.Tensor
M = TypeVar("M")

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _check_eval(fn: str, layer: Any, bn: Any) -> None:
    if layer.training or bn.training:
        raise AssertionError(f"{fn}: fusion only for eval! (call .eval() on both modules first)")
    if getattr(bn, "running_mean", None) is None or getattr(bn, "running_var", None) is None:
        raise AssertionError(f"{fn}: bn.running_mean and bn.running_var must not be None")


def _fold(
    fn: str,
    w: Tensor,
    b: Tensor | None,
    rm: Tensor,
    rv: Tensor,
    eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    shape: list[int],
) -> tuple[Parameter, Parameter]:
    for name, t in (("bn_rm", rm), ("bn_rv", rv), ("bn_w", bn_w), ("bn_b", bn_b), ("bias", b)):
        if t is not None and (not isinstance(t, Tensor) or t.dim() != 1):
            raise ValueError(
                f"{fn}: {name} must be a 1-D tensor, got "
                f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}"
            )
    w_dtype = w.dtype
    b_dtype = b.dtype if b is not None else w_dtype
    b_requires_grad = b.requires_grad if b is not None else False
    with no_grad():
        b = _core.zeros_like(rm) if b is None else b
        bn_w = _core.ones_like(rm) if bn_w is None else bn_w
        bn_b = _core.zeros_like(rm) if bn_b is None else bn_b
        scale = (rv + float(eps)).rsqrt() * bn_w
        try:
            fused_w = (w * scale.reshape(shape)).to(w_dtype)
            fused_b = ((b - rm) * scale + bn_b).to(b_dtype)
        except (RuntimeError, ValueError) as e:
            raise ValueError(
                f"{fn}: weight of shape {tuple(w.shape)} and batch-norm statistics of shape "
                f"{tuple(rm.shape)} do not fit: {e}"
            ) from None
    return Parameter(fused_w, w.requires_grad), Parameter(fused_b, b_requires_grad)


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    transpose: bool = False,
) -> tuple[Parameter, Parameter]:
    """The weight and bias of a convolution followed by an eval-mode batch norm, folded into
    one convolution: ``w * (bn_w / sqrt(bn_rv + eps))`` per output channel (dim 1 of a
    transposed convolution's weight when ``transpose``) and ``(b - bn_rm) * bn_w /
    sqrt(bn_rv + eps) + bn_b``. A missing bias or affine parameter counts as 0 (1 for
    ``bn_w``). The results are new Parameters in the inputs' dtypes."""
    extra = [1] * (conv_w.dim() - 2)
    shape = ([1, -1] if transpose else [-1, 1]) + extra
    return _fold("fuse_conv_bn_weights", conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, shape)


def fuse_linear_bn_weights(
    linear_w: Tensor,
    linear_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor,
    bn_b: Tensor,
) -> tuple[Parameter, Parameter]:
    """The weight and bias of a linear layer followed by an eval-mode batch norm over its
    output features, folded into one linear layer (see :func:`fuse_conv_bn_weights`)."""
    return _fold("fuse_linear_bn_weights", linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, [-1, 1])


def fuse_conv_bn_eval(conv: M, bn: Any, transpose: bool = False) -> M:
    """A new convolution (a deep copy of ``conv``) computing ``bn(conv(x))`` of the two
    eval-mode modules in one convolution. ``transpose=True`` for a transposed convolution.
    Raises ``AssertionError`` (as PyTorch) when either module is in training mode."""
    _check_eval("fuse_conv_bn_eval", conv, bn)
    fused: Any = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose
    )
    return fused


def fuse_linear_bn_eval(linear: M, bn: Any) -> M:
    """A new linear layer (a deep copy of ``linear``) computing ``bn(linear(x))`` of the two
    eval-mode modules; ``bn.num_features`` must equal ``linear.out_features`` or be 1."""
    _check_eval("fuse_linear_bn_eval", linear, bn)
    lin: Any = linear
    if lin.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "fuse_linear_bn_eval: to fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
            f"got linear.out_features={lin.out_features} and bn.num_features={bn.num_features}"
        )
    fused: Any = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused
