"""The older hook-based forms ``nn.utils.weight_norm`` / ``remove_weight_norm`` and
``nn.utils.spectral_norm`` / ``remove_spectral_norm``, as PyTorch still ships them.

They replace the parameter ``<name>`` by ``<name>_g`` and ``<name>_v`` (weight norm) or by
``<name>_orig`` with the buffers ``<name>_u`` and ``<name>_v`` (spectral norm: the power
iteration's vectors), and recompute ``module.<name>`` as a plain attribute in a forward
pre-hook. State dict keys are therefore PyTorch's (``weight_g``, ``weight_v``;
``weight_orig``, ``weight_u``, ``weight_v``).
"""

from __future__ import annotations

from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from .. import functional as F
from ..modules.module import Module
from ..parameter import Parameter
from .parametrizations import _divide_by_sigma, _norm_except_dim, _weight_norm

Tensor = _core.Tensor

__all__ = ["remove_spectral_norm", "remove_weight_norm", "spectral_norm", "weight_norm"]


def _hooks_of(module: Module, kind: type, name: str) -> list[tuple[Any, Any]]:
    return [
        (k, h)
        for k, h in module._forward_pre_hooks.items()
        if isinstance(h, kind) and getattr(h, "name", None) == name
    ]


class WeightNorm:
    """The forward pre-hook of :func:`weight_norm`: ``module.<name> = g * v / ||v||``."""

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = dim

    def compute_weight(self, module: Module) -> Tensor:
        """The weight from the module's current ``<name>_g`` and ``<name>_v``."""
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split the parameter ``module.<name>`` into ``<name>_g`` (its norm over every dim but
    ``dim``; ``None``: the whole tensor) and ``<name>_v`` (its direction); ``module.<name>``
    is recomputed from them before every forward. Returns ``module``."""
    if _hooks_of(module, WeightNorm, name):
        raise RuntimeError(
            f"weight_norm: cannot register two weight_norm hooks on the same parameter {name!r}"
        )
    weight = module._parameters.get(name)
    if not isinstance(weight, Parameter):
        raise ValueError(f"weight_norm: {type(module).__name__} has no parameter named {name!r}")
    d = -1 if dim is None else dim
    if not -1 <= d < weight.ndim:
        raise IndexError(f"weight_norm: dim {dim} is out of range for {name} of shape {tuple(weight.shape)}")
    hook = WeightNorm(name, d)
    del module._parameters[name]
    with no_grad():
        g = _norm_except_dim(weight, d)
    module.register_parameter(name + "_g", Parameter(g.detach(), requires_grad=weight.requires_grad))
    module.register_parameter(name + "_v", Parameter(weight.detach(), requires_grad=weight.requires_grad))
    setattr(module, name, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`weight_norm`: ``module.<name>`` is a parameter again, holding the current
    ``g * v / ||v||``. Returns ``module``."""
    found = _hooks_of(module, WeightNorm, name)
    if not found:
        raise ValueError(f"remove_weight_norm: weight_norm of {name!r} not found in {type(module).__name__}")
    key, hook = found[0]
    with no_grad():
        weight = hook.compute_weight(module).detach()
    requires_grad = module._parameters[name + "_v"].requires_grad
    if name in module.__dict__:
        object.__delattr__(module, name)
    del module._parameters[name + "_g"]
    del module._parameters[name + "_v"]
    del module._forward_pre_hooks[key]
    module.register_parameter(name, Parameter(weight, requires_grad=requires_grad))
    module._bump_version()
    return module


class SpectralNorm:
    """The forward pre-hook of :func:`spectral_norm`: ``module.<name> = <name>_orig / sigma``,
    with ``n_power_iterations`` power-iteration steps first in training mode only."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix, ``dim`` first."""
        if self.dim != 0:
            weight = weight.permute([self.dim] + [d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """The normalised weight; updates ``<name>_u``/``<name>_v`` in place when iterating."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        if do_power_iteration:
            with no_grad():
                m = self.matrix(weight.detach())
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(m.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(m.mv(v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        return _divide_by_sigma(weight, self.matrix, u, v)

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divide the parameter ``module.<name>`` by its spectral norm (largest singular value),
    estimated by power iteration before every forward in training mode (not in eval). The
    parameter moves to ``<name>_orig``; ``<name>_u`` and ``<name>_v`` are buffers. Returns
    ``module``."""
    if _hooks_of(module, SpectralNorm, name):
        raise RuntimeError(
            f"spectral_norm: cannot register two spectral_norm hooks on the same parameter {name!r}"
        )
    weight = module._parameters.get(name)
    if not isinstance(weight, Parameter):
        raise ValueError(f"spectral_norm: {type(module).__name__} has no parameter named {name!r}")
    if n_power_iterations <= 0:
        raise ValueError(f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    if not -weight.ndim <= dim < weight.ndim:
        raise IndexError(
            f"spectral_norm: dim {dim} is out of range for {name} of shape {tuple(weight.shape)}"
        )
    hook = SpectralNorm(name, n_power_iterations, dim % weight.ndim, eps)
    with no_grad():
        h, w = hook.matrix(weight).shape
        u = F.normalize(_core.randn((h,), dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        v = F.normalize(_core.randn((w,), dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`spectral_norm`: ``module.<name>`` is a parameter again, holding the
    normalised weight (with the current vectors, no further iteration). Returns ``module``."""
    found = _hooks_of(module, SpectralNorm, name)
    if not found:
        raise ValueError(
            f"remove_spectral_norm: spectral_norm of {name!r} not found in {type(module).__name__}"
        )
    key, hook = found[0]
    with no_grad():
        weight = hook.compute_weight(module, do_power_iteration=False).detach()
    orig = module._parameters[name + "_orig"]
    if name in module.__dict__:
        object.__delattr__(module, name)
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_u"]
    del module._buffers[name + "_v"]
    del module._forward_pre_hooks[key]
    orig.data = weight
    module.register_parameter(name, orig)
    module._bump_version()
    return module
