"""Parametrizations of module tensors, as ``torch.nn.utils.parametrize``.

``register_parametrization(module, "weight", p)`` makes ``module.weight`` a computed
value: ``p(original)``, recomputed at every read from the stored tensor(s) in
``module.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when
``p.right_inverse`` returns several tensors). The module's class is swapped for a
subclass holding one property per parametrized name (as PyTorch does), so the state
dict keys are PyTorch's (``parametrizations.weight.original``, the parametrization's
own buffers under ``parametrizations.weight.0``) and its checkpoints load.

Everything is composed of tensor ops, so gradients flow to the originals through the
parametrization, in eager mode and in captured graphs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

Tensor = _core.Tensor

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]

_cache_depth = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Inside this context each parametrized tensor is computed once, at its first read,
    and the result reused (for a recurrent network reading a weight at every step); the
    cache is dropped on leaving the outermost ``cached()``."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the tensor(s) they start
    from: ``original`` or, when the first parametrization's ``right_inverse`` returns a
    sequence, ``original0``, ``original1``, ... (Parameters when the tensor was one)."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if not modules:
            raise ValueError("ParametrizationList: needs at least one parametrization")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new: Any = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass  # no inverse: the original is kept as it is (as PyTorch does)
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        is_param = isinstance(original, Parameter)
        if self.is_tensor:
            if not unsafe and (tuple(new.shape) != shape or new.dtype != dtype):
                raise ValueError(
                    "register_parametrization: right_inverse must keep the tensor's shape and dtype "
                    f"({shape}, {dtype}), got ({tuple(new.shape)}, {new.dtype}); pass unsafe=True to allow it"
                )
            # Keep the tensor object itself (optimizers holding it keep working), as PyTorch does.
            original.data = new.detach()
            self._store("original", original, is_param)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise TypeError(
                        f"register_parametrization: right_inverse returned a {type(t).__name__} "
                        f"at position {i}, expected tensors"
                    )
                value = (
                    Parameter(t.detach(), requires_grad=original.requires_grad) if is_param else t.detach()
                )
                self._store(f"original{i}", value, is_param)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(
                    f"register_parametrization: the parametrization must return a tensor, got {type(z)}"
                )
            if tuple(z.shape) != shape or z.dtype != dtype:
                raise ValueError(
                    "register_parametrization: the parametrization must keep the tensor's shape and dtype "
                    f"({shape}, {dtype}), got ({tuple(z.shape)}, {z.dtype}); pass unsafe=True to allow it"
                )

    def _store(self, name: str, value: Tensor, is_param: bool) -> None:
        if is_param:
            self.register_parameter(name, value)  # type: ignore[arg-type]
        else:
            self.register_buffer(name, value)

    def _originals(self) -> list[Tensor]:
        if self.is_tensor:
            return [self.original]
        return [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def right_inverse(self, value: Tensor) -> None:
        """Set the original(s) so that the parametrized value becomes ``value`` (through each
        parametrization's ``right_inverse``, last to first); in place, without gradient."""
        with no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                elif not self.unsafe and len(self) > 1:
                    raise RuntimeError(
                        f"parametrization {type(m).__name__} has no right_inverse: cannot assign"
                    )
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"right_inverse: expected a tensor, got {type(value).__name__}")
                orig = self.original
                if tuple(value.shape) != tuple(orig.shape) or value.dtype != orig.dtype:
                    raise ValueError(
                        f"right_inverse: the value's shape/dtype ({tuple(value.shape)}, {value.dtype}) "
                        f"differ from the original's ({tuple(orig.shape)}, {orig.dtype})"
                    )
                orig.copy_(value)
            else:
                if isinstance(value, Tensor) or len(value) != self.ntensors:
                    raise ValueError(f"right_inverse: expected a sequence of {self.ntensors} tensors")
                for orig, v in zip(self._originals(), value, strict=True):
                    orig.copy_(v)

    def forward(self) -> Tensor:
        """The parametrized value: the parametrizations applied to the original(s) in order."""
        mods = list(self)
        x = mods[0](*self._originals()) if not self.is_tensor else mods[0](self.original)
        for m in mods[1:]:
            x = m(x)
        return x


def _parametrized_property(name: str) -> property:
    def get(self: Module) -> Tensor:
        plist = self.parametrizations[name]
        if _cache_depth:
            key = (id(plist), name)
            hit = _cache.get(key)
            if hit is None:
                hit = _cache[key] = plist()
            return hit
        return plist()

    def set_(self: Module, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    return property(
        get, set_, doc=f"``{name}`` computed by its parametrizations (``parametrizations.{name}``)"
    )


def _inject_class(module: Module) -> None:
    """Swap ``module``'s class for a subclass to hold the parametrized properties."""
    cls = type(module)
    new = type(f"Parametrized{cls.__name__}", (cls,), {"_parametrized_base": cls})
    new.__module__ = cls.__module__
    object.__setattr__(module, "__class__", new)


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has parametrizations (on ``tensor_name``, when given)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict) or not hasattr(type(module), "_parametrized_base"):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def type_before_parametrizations(module: Module) -> type:
    """``module``'s class as it was before any parametrization was registered."""
    return (
        type(module).__dict__.get("_parametrized_base", type(module))
        if is_parametrized(module)
        else type(module)
    )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make ``module.<tensor_name>`` the value ``parametrization(original)``.

    The first registration on a name moves the parameter or buffer to
    ``module.parametrizations.<tensor_name>.original`` (after applying
    ``parametrization.right_inverse`` to it, when defined); later ones append to the
    chain. Assigning ``module.<tensor_name> = value`` goes through the right inverses.
    With ``unsafe=False`` the parametrization must keep the tensor's shape and dtype.
    Returns ``module``.
    """
    if not isinstance(parametrization, Module):
        raise TypeError(
            f"register_parametrization: the parametrization must be an nn.Module, got {type(parametrization).__name__}"
        )
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            before = plist()
            after = parametrization(before)
            if (
                not isinstance(after, Tensor)
                or tuple(after.shape) != tuple(before.shape)
                or after.dtype != before.dtype
            ):
                raise ValueError(
                    f"register_parametrization: the new parametrization of {tensor_name!r} must keep its "
                    f"shape and dtype ({tuple(before.shape)}, {before.dtype}); pass unsafe=True to allow it"
                )
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
        return module
    if tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"register_parametrization: module.{tensor_name} is None")
    else:
        raise ValueError(
            f"register_parametrization: {type(module).__name__} has no parameter or buffer named {tensor_name!r}"
        )
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_class(module)
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _parametrized_property(tensor_name))
    module._bump_version()
    return module


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo the parametrizations of ``module.<tensor_name>``: it becomes a plain parameter
    (or buffer) again, holding the current parametrized value (``leave_parametrized``) or the
    stored original (then there must be a single one). The original's tensor object is kept
    where there is one. Returns ``module``."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(
            f"remove_parametrizations: {type(module).__name__} has no parametrization on {tensor_name!r}"
        )
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            if tuple(value.shape) == tuple(original.shape) and value.dtype == original.dtype:
                with no_grad():
                    original.copy_(value)
            else:
                original.data = value.detach()
    else:
        if not leave_parametrized:
            raise ValueError(
                "remove_parametrizations: leave_parametrized=False needs a single original tensor, "
                f"but {tensor_name!r} has {plist.ntensors}"
            )
        with no_grad():
            value = getattr(module, tensor_name).detach()
        first = plist.original0
        original = (
            Parameter(value, requires_grad=first.requires_grad) if isinstance(first, Parameter) else value
        )
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not len(module.parametrizations):
        del module.parametrizations
        object.__setattr__(module, "__class__", type(module).__dict__["_parametrized_base"])
    module._bump_version()
    return module
