"""Ready-made parametrizations, as ``torch.nn.utils.parametrizations``: ``weight_norm``
and ``spectral_norm``, registered through :mod:`ferrograd.nn.utils.parametrize` (state
dict keys as PyTorch's: ``parametrizations.weight.original0``/``original1`` for the
weight norm's magnitude and direction, ``parametrizations.weight.original`` with the
spectral norm's power-iteration vectors in ``parametrizations.weight.0._u``/``_v``).

``orthogonal`` (matrix exponential, Cayley or Householder maps) lives in ``_orthogonal``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from ._orthogonal import orthogonal

Tensor = _core.Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dim but ``dim`` (kept, size 1), or over the whole
    tensor (a 0-d result) when ``dim == -1`` (PyTorch's ``norm_except_dim`` convention)."""
    if dim == -1:
        return v.square().sum().sqrt()
    dims = [d for d in range(v.ndim) if d != dim]
    if not dims:
        return v.abs()
    return v.square().sum(dims, keepdim=True).sqrt()


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``v * g / ||v||`` (norm as :func:`_norm_except_dim`); float16 and bfloat16 compute in
    float32 and round once, as PyTorch's kernel accumulates the norm in float32."""
    low = v.dtype in (_core.float16, _core.bfloat16)
    if low:
        out_dtype = v.dtype
        v, g = v.to(_core.float32), g.to(_core.float32)
    w = v * (g / _norm_except_dim(v, dim))
    return w.to(out_dtype) if low else w


class _WeightNorm(Module):
    """``g * v / ||v||``: the weight split into a magnitude ``g`` and a direction ``v``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        """The weight from its magnitude and direction."""
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        """``(g, v)`` of ``weight``: its norm over ``dim`` and the weight itself."""
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (norm over every dim but ``dim``;
    ``dim=None`` the whole tensor). ``g`` and ``v`` are the parameters
    ``parametrizations.<name>.original0`` and ``original1``. Returns ``module``."""
    if dim is not None and not -1 <= dim < getattr(module, name).ndim:
        raise IndexError(
            f"weight_norm: dim {dim} is out of range for {name} of shape {tuple(getattr(module, name).shape)}"
        )
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


def _divide_by_sigma(weight: Tensor, matrix: Callable[[Tensor], Tensor], u: Tensor, v: Tensor) -> Tensor:
    """``weight / (u . M v)``, ``M = matrix(weight)``; float16 and bfloat16 compute in float32
    (the weight cast once) and round once: the quotient's gradient subtracts terms of the
    cotangent's size, which would each round to the low dtype otherwise."""
    low = weight.dtype in (_core.float16, _core.bfloat16)
    w = weight.to(_core.float32) if low else weight
    if low:
        u, v = u.to(_core.float32), v.to(_core.float32)
    out = w / u.dot(matrix(w).mv(v))
    return out.to(weight.dtype) if low else out


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` the largest singular value of the weight (as a matrix with
    ``dim`` first), estimated by power iteration: ``n_power_iterations`` steps at every use
    in training mode (updating the buffers ``_u`` and ``_v`` in place, without gradient),
    none in eval mode. A 1-D weight is simply normalised."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if not -ndim <= dim < max(ndim, 1):
            raise IndexError(
                f"spectral_norm: dim {dim} is out of range for a weight of shape {tuple(weight.shape)}"
            )
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}")
        self.dim = dim % max(ndim, 1)
        self.eps = eps
        self.n_power_iterations = n_power_iterations
        if ndim > 1:
            mat = self._matrix(weight.detach())
            h, w = mat.shape
            u = _core.randn((h,), dtype=weight.dtype, device=weight.device)
            v = _core.randn((w,), dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            self._power_method(mat, 15)

    def _matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            order = [self.dim] + [d for d in range(weight.ndim) if d != self.dim]
            weight = weight.permute(order)
        return weight.reshape(weight.shape[0], -1)

    def _power_method(self, mat: Tensor, steps: int) -> None:
        with no_grad():
            mat = mat.detach()
            for _ in range(steps):
                self._u.copy_(F.normalize(mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        """The weight divided by its estimated spectral norm."""
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        if self.training:
            self._power_method(self._matrix(weight), self.n_power_iterations)
        return _divide_by_sigma(weight, self._matrix, self._u.clone(), self._v.clone())

    def right_inverse(self, value: Tensor) -> Tensor:
        """Any weight is its own preimage (the scale is recomputed at every read)."""
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Reparametrize ``module.<name>`` as itself divided by its spectral norm (largest singular
    value), estimated by power iteration in training mode only, as PyTorch does. ``dim``
    (default 0; 1 for transposed convolutions) is the output dim. Returns ``module``."""
    weight: Any = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"spectral_norm: {type(module).__name__} has no tensor named {name!r}")
    if dim is None:
        dim = (
            1 if parametrize.type_before_parametrizations(module).__name__.startswith("ConvTranspose") else 0
        )
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
