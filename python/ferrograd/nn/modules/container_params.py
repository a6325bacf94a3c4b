"""Parameter containers: ``ParameterList`` and ``ParameterDict``.

Their entries are registered on the container (under ``"0"``, ``"1"``, ... or the
dict's keys), so ``parameters()``, ``state_dict()`` and ``.to()`` of the enclosing
module see them. A plain tensor put in is wrapped as a :class:`Parameter` (sharing its
storage); other objects are kept as ordinary attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ... import _core
from ..parameter import Parameter
from .module import Module

Tensor = _core.Tensor

__all__ = ["ParameterDict", "ParameterList"]


def _as_param(value: Any) -> Any:
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _entry_repr(k: Any, p: Any) -> str:
    if isinstance(p, Tensor):
        size = "x".join(str(s) for s in p.shape)
        dev = "" if str(p.device) == "cpu" else f" ({p.device})"
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        return f"  ({k}): {kind} containing: [{p.dtype} of size {size}{dev}]"
    return f"  ({k}): Object of type: {type(p).__name__}"


class ParameterList(Module):
    """A list of parameters, indexed like a Python list; ``append``/``extend``/``+=``."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _index(self, idx: int) -> int:
        if not -self._size <= idx < self._size:
            raise IndexError(f"ParameterList: index {idx} is out of range for {self._size} entries")
        return idx % self._size if self._size else idx

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(self._size)[idx]])
        return getattr(self, str(self._index(int(idx))))

    def __setitem__(self, idx: int, param: Any) -> None:
        name = str(self._index(int(idx)))
        self._set(name, param)

    def _set(self, name: str, value: Any) -> None:
        value = _as_param(value)
        if name in self._parameters:
            del self._parameters[name]
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        else:
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self) -> list[str]:
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value: Any) -> ParameterList:
        """Add ``value`` at the end (a tensor becomes a ``Parameter``)."""
        self._size += 1
        self._set(str(self._size - 1), value)
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """Append every element of ``values``."""
        if isinstance(values, Tensor) or not isinstance(values, Iterable):
            raise TypeError(
                f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}"
            )
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p) for k, p in enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters with string keys, in insertion order (tensors become ``Parameter``)."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def _key(self, key: Any) -> str:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        return key

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        key = self._key(key)
        self._keys[key] = None
        value = _as_param(value)
        if key in self._parameters:
            del self._parameters[key]
        if isinstance(value, Parameter):
            self.register_parameter(key, value)
        else:
            object.__setattr__(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __or__(self, other: ParameterDict) -> ParameterDict:
        out = self.copy()
        out.update(other)
        return out

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self

    def copy(self) -> ParameterDict:
        """A new ``ParameterDict`` holding the same parameters."""
        return ParameterDict({k: self[k] for k in self._keys})

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``self[key]``, first set to ``default`` when missing."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for k in list(self._keys):
            del self[k]

    def pop(self, key: str) -> Any:
        """Remove ``key`` and return its value."""
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last inserted ``(key, value)``."""
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        k = list(self._keys)[-1]
        return k, self.pop(k)

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]`` if present, else ``default``."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ``ParameterDict`` with ``keys`` all set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self) -> Iterable[tuple[str, Any]]:
        """``(key, value)`` pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterable[Any]:
        """The values, in insertion order."""
        return (self[k] for k in self._keys)

    def update(self, parameters: Any) -> None:
        """Add the entries of a mapping, a ``ParameterDict`` or an iterable of ``(key, value)``."""
        if isinstance(parameters, (Mapping, ParameterDict)):
            for k in parameters.keys():
                self[k] = parameters[k]
            return
        if not isinstance(parameters, Iterable):
            raise TypeError(
                "ParameterDict.update should be called with an iterable of key/value pairs, "
                f"but got {type(parameters).__name__}"
            )
        for j, kv in enumerate(parameters):
            if not isinstance(kv, Iterable) or isinstance(kv, (str, Tensor)) or len(kv := tuple(kv)) != 2:
                raise ValueError(f"ParameterDict.update: element #{j} should be a (key, value) pair")
            self[kv[0]] = kv[1]

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p) for k, p in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")
