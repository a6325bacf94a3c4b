"""``Module``: the base class of every layer, as ``torch.nn.Module``."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

from ... import _capture, _core
from ..._grad_mode import is_grad_enabled, no_grad
from ...autograd import Function
from ..parameter import Buffer, Parameter

Tensor = _core.Tensor


class _Members(OrderedDict):
    """A module's parameter, buffer or submodule table: every change bumps
    ``Module._structure_version`` and the owning module's version (writes
    straight into ``_parameters`` too), so compiled graphs know when to
    re-check their snapshots of modules."""

    def __init__(self, version: list[int] | None = None) -> None:
        super().__init__()
        #: The owning module's version cell (shared with ``Module._version``).
        self._version = version if version is not None else [0]

    def _bump(self) -> None:
        Module._structure_version += 1
        self._version[0] += 1

    def __setitem__(self, key: Any, value: Any) -> None:
        self._bump()
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self._bump()
        super().__delitem__(key)

    def pop(self, *args: Any) -> Any:
        self._bump()
        return super().pop(*args)

    def popitem(self, last: bool = True) -> Any:
        self._bump()
        return super().popitem(last)

    def clear(self) -> None:
        self._bump()
        super().clear()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._bump()
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._bump()
        super().update(*args, **kwargs)

    def __ior__(self, other: Any) -> _Members:
        self._bump()
        return super().__ior__(other)


T = TypeVar("T", bound="Module")

_UNSET = object()

__all__ = ["Module"]


class _IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: keys the module expected but did not get, and the reverse."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


class RemovableHandle:
    """Handle returned by ``register_forward_hook``/``register_forward_pre_hook``; ``remove()`` unhooks."""

    _next_id = 0

    def __init__(self, hooks: dict[int, Callable], version: list[int] | None = None) -> None:
        self._hooks = hooks
        self._version = version if version is not None else [0]
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        """Remove the hook (does nothing if it is already removed)."""
        Module._structure_version += 1
        self._version[0] += 1
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _parse_to(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Split ``to(...)`` arguments into (device, dtype); either may be None."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"Module.to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, _core.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, str | _core.device):
            device = a
        else:
            raise TypeError(f"Module.to() expects a dtype, a device or a tensor, got {type(a).__name__}")
    if device is not None:
        name = str(device)
        if name.split(":")[0] not in ("cpu", "gpu", "webgpu", "wgpu", "cuda"):
            raise NotImplementedError(
                f"Module.to(): device {name!r} is not supported; ferrograd devices are 'cpu' and 'gpu'"
            )
        device = _core.device(device)
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"Module.to() only accepts floating point dtypes, but got desired dtype={dtype}")
    if dtype == _core.float64 and device is not None and device.type == "gpu":
        # Checked before anything moves, so that a failed call leaves the module as it was.
        raise TypeError("Module.to(): float64 is not supported on the gpu device (WGSL has no 64-bit floats)")
    return device, dtype


class Module:
    """Base class of all neural-network layers.

    Subclasses call ``super().__init__()`` first, assign ``Parameter``\\ s,
    sub-``Module``\\ s and buffers (``register_buffer``) as attributes, and
    implement ``forward``. Calling the module runs the forward pre-hooks,
    ``forward`` and the forward hooks.
    """

    training: bool

    #: Bumped by every attribute change of any module (parameters, submodules,
    #: buffers, hooks, ``training``, any plain attribute): compiled graphs
    #: re-check their snapshots of modules only then.
    _structure_version: int = 0

    def __init__(self) -> None:
        # This module's version: a one-element list bumped with
        # ``_structure_version`` by every change of this module (shared with
        # its member tables), so a compiled graph re-compares only the
        # modules that changed.
        version = [0]
        object.__setattr__(self, "_version", version)
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", _Members(version))
        object.__setattr__(self, "_buffers", _Members(version))
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", _Members(version))
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())

    # ------------------------------------------------------------- forward

    forward: Callable[..., Any]

    def _forward_unimplemented(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    forward = _forward_unimplemented

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        st = _capture.current()
        if st is None:
            return self._call_impl(*args, **kwargs)
        # A captured graph depends on what this module's code reads: its
        # mode and hyperparameters (baked in), its parameters, buffers and
        # submodules (read by reference), its hooks. The trace snapshots
        # all of them when it ends; a change retraces. The ops the call
        # records carry this module's path (``blocks.2.attn``).
        st.use_module(self)
        st.enter_module(self)
        try:
            return self._call_impl(*args, **kwargs)
        finally:
            st.exit_module()

    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        backward_hooks = self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks")
        if not (self._forward_pre_hooks or self._forward_hooks or backward_hooks):
            return self.forward(*args, **kwargs)
        for hook in list(self._forward_pre_hooks.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        bw = _BackwardHooks(self, args) if backward_hooks and is_grad_enabled() else None
        if bw is not None:
            args = bw.wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            res = hook(self, args, out)
            if res is not None:
                out = res
        if bw is not None:
            out = bw.wrap_outputs(out)
        return out

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, args)`` runs before ``forward``; a non-None result replaces ``args``."""
        self._bump_version()
        h = RemovableHandle(self._forward_pre_hooks, self.__dict__.get("_version"))
        self._forward_pre_hooks[h.id] = hook
        return h

    def register_forward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; a non-None result replaces the output."""
        self._bump_version()
        h = RemovableHandle(self._forward_hooks, self.__dict__.get("_version"))
        self._forward_hooks[h.id] = hook
        return h

    def register_full_backward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients of
        the module's tensor inputs are computed (``grad_input`` holds ``None``
        for inputs that need none); a non-None result replaces ``grad_input``.
        The hook sees gradients of the module's call as a whole, as in
        PyTorch (the inputs and outputs pass through identity nodes)."""
        self._bump_version()
        h = RemovableHandle(self._backward_hooks, self.__dict__.get("_version"))
        self._backward_hooks[h.id] = hook
        return h

    def register_backward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """PyTorch's older name: registered as :meth:`register_full_backward_hook`
        (whose gradients are those of the module's inputs and outputs)."""
        return self.register_full_backward_hook(hook)

    def share_memory(self: T) -> T:
        """Move every parameter, gradient and buffer to shared memory, in place
        (:meth:`Tensor.share_memory_`), and return the module.

        Parameters keep their identity, so an optimizer built before still
        updates the model. Worker processes then train the same weights: a
        child started with ``fork`` writes into the same memory, and one
        started with ``spawn`` (or given the module through a queue) receives
        handles to it (see :mod:`ferrograd.multiprocessing`). Gradients made
        later (by ``backward`` in a worker) are the worker's own. CPU tensors
        only: a module on the GPU raises ``RuntimeError``.
        """
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                p.share_memory_()
                g = p.grad
                if g is not None and not g.is_shared():
                    p.grad = g.share_memory_()
            for b in m._buffers.values():
                if b is not None:
                    b.share_memory_()
        return self

    def register_full_backward_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the gradients of the
        module's outputs are known, before those of its inputs are computed;
        a non-None result replaces ``grad_output``."""
        self._bump_version()
        h = RemovableHandle(self._backward_pre_hooks, self.__dict__.get("_version"))
        self._backward_pre_hooks[h.id] = hook
        return h

    # -------------------------------------------------------- registration

    def _check_name(self, kind: str, name: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or ``None``, a declared-but-absent parameter) under ``name``."""
        self._bump_version()
        self._check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(ferrograd.nn.Parameter or None required)"
            )
        self._buffers.pop(name, None)
        self._modules.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state saved in ``state_dict`` (unless ``persistent=False``) but not trained."""
        self._bump_version()
        self._check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name`` (also reachable as an attribute)."""
        self._bump_version()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def _bump_version(self) -> None:
        """Note a change of this module (see ``_structure_version``)."""
        Module._structure_version += 1
        v = self.__dict__.get("_version")
        if v is not None:
            v[0] += 1

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if d.get(name, _UNSET) is value and not isinstance(value, (Parameter, Module, Buffer)):
            return  # the same plain value again (``model.train()`` at every step): no change
        self._bump_version()
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            d.pop(name, None)
            self._buffers.pop(name, None)
            self._modules.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(ferrograd.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            d.pop(name, None)
            params.pop(name, None)
            self._buffers.pop(name, None)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' (Module or None expected)"
                )
            self._modules[name] = None
        elif isinstance(value, Buffer):
            d.pop(name, None)
            self.register_buffer(name, value.data, value.persistent)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if store is not None and name in store:
                st = _capture.current()
                v = store[name]
                if st is not None:
                    # Captured graphs read this object by reference: guard the module,
                    # and a submodule handed out (its attributes may be read next).
                    st.use_module(self)
                    if isinstance(v, Module):
                        st.use_module(v)
                return v
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        self._bump_version()
        for key in ("_parameters", "_buffers", "_modules"):
            store = self.__dict__.get(key)
            if store is not None and name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[:1].isdigit())

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is the module itself)."""
        mod: Module = self
        if target == "":
            return mod
        for item in target.split("."):
            sub = mod._modules.get(item) if isinstance(mod, Module) else None
            if sub is None:
                raise AttributeError(f"{mod._get_name()} has no submodule `{item}` (in '{target}')")
            mod = sub
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``, e.g. ``"0.weight"``."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters or mod._parameters[name] is None:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``, e.g. ``"bn.running_mean"``."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers or mod._buffers[name] is None:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}`")
        return mod._buffers[name]

    # ----------------------------------------------------------- iteration

    def named_modules(
        self, memo: set[int] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for this module and every descendant, depth first (each module once)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, mod in self._modules.items():
            if mod is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from mod.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for the immediate children."""
        seen: set[int] = set()
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in seen:
                seen.add(id(mod))
                yield name, mod

    def children(self) -> Iterator[Module]:
        """The immediate child modules."""
        for _, m in self.named_children():
            yield m

    def _named_members(
        self, kind: str, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        memo: set[int] = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mod_prefix, mod in mods:
            for k, v in getattr(mod, kind).items():
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; shared parameters appear once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)  # type: ignore[misc]

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module (and of its descendants when ``recurse``)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` pairs."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of this module (and of its descendants when ``recurse``)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # --------------------------------------------------------------- modes

    def train(self: T, mode: bool = True) -> T:
        """Set training mode (``mode=True``) or evaluation mode on this module and its descendants."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self: T) -> T:
        """Set evaluation mode (same as ``train(False)``)."""
        return self.train(False)

    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Set ``requires_grad`` on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to ``None`` (default) or to zeros in place."""
        if set_to_none:
            _core._zero_grads(list(self.parameters()))
            return
        for p in self.parameters():
            if p.grad is None:
                continue
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g = g.detach()
                    p.grad = g
                with no_grad():
                    g.zero_()

    def apply(self: T, fn: Callable[[Module], None]) -> T:
        """Call ``fn`` on every descendant (children first) and then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------ dtype / device

    def _apply(self: T, fn: Callable[[Tensor], Tensor]) -> T:
        """Apply ``fn`` (a conversion such as ``t.to(dtype)``) to every parameter,
        gradient and buffer, depth first.

        Parameters are converted in place: each keeps its identity (the same
        ``Parameter`` object, rebound to the converted data through
        ``p.data = fn(p)``), so weights tied between modules stay one
        parameter and an optimizer built earlier still updates the model.
        A parameter's ``.grad`` is converted with it. Buffers are replaced by
        their converted tensors (as PyTorch does).
        """
        for m in self.children():
            m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new
                g = p.grad
                if g is not None:
                    new_g = fn(g)
                    if new_g is not g:
                        p.grad = new_g
            for name, b in self._buffers.items():
                if b is not None:
                    new_b = fn(b)
                    if new_b is not b:
                        self._buffers[name] = new_b
        return self

    def to(self: T, *args: Any, **kwargs: Any) -> T:
        """Convert floating-point parameters and buffers to a dtype and/or move
        everything to a device: ``to(fg.float64)``, ``to("gpu")``, ``to("cpu", fg.float32)``.

        Integer buffers (e.g. ``num_batches_tracked``) keep their dtype.
        Parameters are converted in place (see :meth:`_apply`): the same
        ``Parameter`` objects, ties between modules kept, optimizers built
        before the call still train the model. Returns the module.
        """
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is None and device is None:
            return self

        def convert(t: Tensor) -> Tensor:
            if dtype is not None and t.dtype.is_floating_point and t.dtype != dtype:
                t = t.to(dtype)
            if device is not None and t.device != device:
                t = t.to(device)
            return t

        return self._apply(convert)

    def float(self: T) -> T:
        """Convert floating-point parameters and buffers to float32 (in place, see :meth:`to`)."""
        return self.to(_core.float32)

    def double(self: T) -> T:
        """Convert floating-point parameters and buffers to float64 (in place, see :meth:`to`)."""
        return self.to(_core.float64)

    def half(self: T) -> T:
        """Convert floating-point parameters and buffers to float16 (in place, see :meth:`to`)."""
        return self.to(_core.float16)

    def bfloat16(self: T) -> T:
        """Convert floating-point parameters and buffers to bfloat16 (in place, see :meth:`to`)."""
        return self.to(_core.bfloat16)

    def cpu(self: T) -> T:
        """Move parameters and buffers to the CPU (in place, see :meth:`to`)."""
        return self.to("cpu")

    def gpu(self: T) -> T:
        """Move parameters and buffers to the WebGPU device (in place, see :meth:`to`)."""
        return self.to("gpu")

    def cuda(self: T, device: Any = None) -> T:
        """Move parameters and buffers to ferrograd's GPU device (WebGPU, which stands
        in for CUDA when named explicitly): ``module.cuda()`` is ``module.to("gpu")``."""
        if device not in (None, 0, "cuda", "cuda:0", "gpu", "gpu:0") and not isinstance(device, _core.device):
            raise RuntimeError(f"Module.cuda(): ferrograd has one GPU device; got device={device!r}")
        return self.to("gpu")

    # ---------------------------------------------------------- state dict

    def state_dict(
        self, destination: dict[str, Tensor] | None = None, prefix: str = "", keep_vars: bool = False
    ) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name.

        Values are detached tensors sharing storage with the module's
        (``keep_vars=True`` returns the parameters themselves).
        """
        if destination is None:
            destination = OrderedDict()
        for name, mod in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            pre = name + "." if name else ""
            for k, p in mod._parameters.items():
                if p is not None:
                    destination[pre + k] = p if keep_vars else p.detach()
            for k, b in mod._buffers.items():
                if b is not None and k not in mod._non_persistent_buffers_set:
                    destination[pre + k] = b if keep_vars else b.detach()
        return destination  # type: ignore[return-value]

    def _state_targets(self) -> dict[str, Tensor]:
        """Everything ``load_state_dict`` writes into, by dotted name."""
        return dict(self.state_dict(keep_vars=True))

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` into this module (in place).

        Everything is validated before anything is written: with
        ``strict=True`` missing or unexpected keys raise ``RuntimeError``;
        a shape mismatch or a non-tensor value always raises. On error the
        module is left unchanged. Returns ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        for name, mod in self.named_modules():  # lazy layers take their sizes from the checkpoint
            if hasattr(mod, "_lazy_load_hook") and mod.has_uninitialized_params():  # type: ignore[operator]
                mod._lazy_load_hook(state_dict, name + "." if name else "")  # type: ignore[operator]
        targets = self._state_targets()
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors: list[str] = []
        if strict:
            if unexpected:
                errors.append(
                    "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". "
                )
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        for k, dst in targets.items():
            if k not in state_dict:
                continue
            src = state_dict[k]
            if not isinstance(src, Tensor):
                errors.append(
                    f'While copying the parameter named "{k}", expected a Tensor from checkpoint '
                    f"but received {type(src).__name__}"
                )
            elif tuple(src.shape) != tuple(dst.shape):
                errors.append(
                    f"size mismatch for {k}: copying a param with shape {tuple(src.shape)} from checkpoint, "
                    f"the shape in current model is {tuple(dst.shape)}."
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors)
            )
        with no_grad():
            for k, dst in targets.items():
                if k in state_dict:
                    dst.copy_(state_dict[k])
        return _IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------------- copy

    def __deepcopy__(self, memo: dict[int, Any]) -> Module:
        """A deep copy with cloned parameters (with their gradients) and buffers."""
        if id(self) in memo:
            return memo[id(self)]
        for m in self.modules():  # tensors that are not parameters are cloned here
            for b in m._buffers.values():
                if b is not None and id(b) not in memo:
                    memo[id(b)] = b.detach().clone()
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            object.__setattr__(new, k, copy.deepcopy(v, memo))
        return new

    # ---------------------------------------------------------------- repr

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """Extra text inside the parentheses of ``repr`` (layers override this)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


class _HookIdentity(Function):
    """Identity on its tensor arguments whose backward hands the gradients to
    a callback (which may replace them): how module backward hooks see the
    gradients at a module's boundary."""

    @staticmethod
    def forward(ctx: Any, callback: Callable[[tuple[Any, ...]], tuple[Any, ...]], *xs: Tensor) -> Any:
        ctx.callback = callback
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None, *ctx.callback(grads))


class _BackwardHooks:
    """One call's backward hooks: the module's tensor inputs and outputs go
    through :class:`_HookIdentity` nodes; the outputs' node runs the
    pre-hooks and keeps ``grad_output``, the inputs' node runs the hooks."""

    def __init__(self, module: Module, args: tuple[Any, ...]) -> None:
        self.module = module
        self.positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.inputs_need_grad = any(args[i].requires_grad for i in self.positions)
        self.grad_output: tuple[Any, ...] | None = None

    def _run_hooks(self, grad_input: tuple[Any, ...]) -> tuple[Any, ...]:
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, grad_input, self.grad_output)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_input):
                    raise RuntimeError(
                        f"{type(self.module).__name__} backward hook returned {len(res)} gradients "
                        f"for {len(grad_input)} inputs"
                    )
                grad_input = res
        return grad_input

    def wrap_inputs(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if not (self.inputs_need_grad and self.module._backward_hooks):
            return args
        wrapped = _HookIdentity.apply(self._run_hooks, *[args[i] for i in self.positions])
        out = list(args)
        for i, t in zip(self.positions, wrapped, strict=True):
            out[i] = t
        return tuple(out)

    def _on_output_grads(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        for hook in list(self.module._backward_pre_hooks.values()):
            res = hook(self.module, grads)
            if res is not None:
                grads = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        self.grad_output = grads
        if not self.inputs_need_grad and self.module._backward_hooks:
            # No input takes a gradient: the hooks run now, with None for each.
            self._run_hooks(tuple(None for _ in self.positions))
        return grads

    def wrap_outputs(self, out: Any) -> Any:
        if isinstance(out, Tensor):
            if not out.requires_grad:
                return out
            (res,) = _HookIdentity.apply(self._on_output_grads, out)
            return res
        if isinstance(out, tuple) and any(isinstance(o, Tensor) and o.requires_grad for o in out):
            pos = [i for i, o in enumerate(out) if isinstance(o, Tensor) and o.requires_grad]
            wrapped = _HookIdentity.apply(self._on_output_grads, *[out[i] for i in pos])
            res_list = list(out)
            for i, t in zip(pos, wrapped, strict=True):
                res_list[i] = t
            return type(out)(res_list) if type(out) is tuple else out
        return out
