"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from ... import _capture
from .module import Module


def _handed_out(m: Any) -> Any:
    """``m``, guarded by a trace in progress (its attributes may be read next)."""
    st = _capture.current()
    if st is not None and isinstance(m, Module):
        st.use_module(m)
    return m


def _all_handed_out(ms: Iterable[Module]) -> Iterator[Module]:
    st = _capture.current()
    if st is not None:
        ms = list(ms)
        for m in ms:
            st.use_module(m)
    return iter(ms)


__all__ = ["ModuleDict", "ModuleList", "Sequential"]


def _index(n: int, idx: int, cls: str) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"{cls}: index {idx} is out of range for length {n}")
    return idx % n


class Sequential(Module):
    """Chain of modules applied in order: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Also ``Sequential(OrderedDict(name=module, ...))``. Supports indexing
    (an int gives the module, a slice a new ``Sequential``), ``len``,
    iteration, ``append``, ``insert``, ``extend`` and ``del``.
    """

    def __init__(self, *args: Module | Mapping[str, Module]) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], Mapping):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)  # type: ignore[arg-type]

    @overload
    def __getitem__(self, idx: slice) -> Sequential: ...

    @overload
    def __getitem__(self, idx: int) -> Module: ...

    def __getitem__(self, idx: int | slice) -> Module:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return _handed_out(self._modules[keys[_index(len(keys), idx, "Sequential")]])

    def __setitem__(self, idx: int, module: Module) -> None:
        keys = list(self._modules)
        self.add_module(keys[_index(len(keys), idx, "Sequential")], module)

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_index(len(keys), idx, "Sequential")]]
        # keep the numbering contiguous, as PyTorch does
        if all(k.isdigit() for k in self._modules):
            items = list(self._modules.values())
            self._modules.clear()
            for i, m in enumerate(items):
                self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return _all_handed_out(self._modules.values())  # type: ignore[arg-type]

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        """Append every module of ``modules``; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index``; returns self."""
        items = list(self._modules.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} is out of range for length {n}")
        items.insert(index % (n + 1) if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def forward(self, input: Any) -> Any:
        """Feed ``input`` through every module in order."""
        modules = self._modules.values()
        if _capture.current() is not None:
            for module in modules:
                input = module(input)
            return input
        # Outside a capture, a module without hooks whose ``__call__`` is
        # Module's just runs ``forward``: call it directly (a Python call
        # level less per child, a measurable part of deep stacks of small layers).
        call = Module.__call__
        for module in modules:
            if type(module).__call__ is call and not (
                module._forward_pre_hooks
                or module._forward_hooks
                or module.__dict__.get("_backward_hooks")
                or module.__dict__.get("_backward_pre_hooks")
            ):
                input = module.forward(input)
            else:
                input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children (so their parameters are found)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return _handed_out(self._modules[str(_index(len(self), idx, "ModuleList"))])

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(len(self), idx, "ModuleList")), module)

    def __delitem__(self, idx: int | slice) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(len(items), idx, "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return _all_handed_out(self._modules.values())  # type: ignore[arg-type]

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append every module of ``modules``; returns self."""
        if isinstance(modules, Module) and not isinstance(modules, ModuleList | Sequential):
            raise TypeError("ModuleList.extend should be called with an iterable of modules")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``."""
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)


class ModuleDict(Module):
    """An ordered dict of modules, registered as children."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return _handed_out(self._modules[key])

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module under ``key``."""
        return self._modules.pop(key)  # type: ignore[return-value]

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        """``(key, module)`` pairs, in insertion order."""
        return self._modules.items()  # type: ignore[return-value]

    def values(self) -> Iterable[Module]:
        """The modules, in insertion order."""
        return self._modules.values()  # type: ignore[return-value]

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add the modules of a mapping or of ``(key, module)`` pairs."""
        items = modules.items() if isinstance(modules, Mapping) else modules
        for k, m in items:
            self[k] = m
