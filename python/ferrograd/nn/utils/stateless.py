"""Calling a module with other parameters and buffers: :func:`functional_call`
(``torch.func.functional_call`` and ``torch.nn.utils.stateless.functional_call``)."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ... import _core

Tensor = _core.Tensor

__all__ = ["functional_call"]


def _merge(dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    merged: dict[str, Any] = {}
    for d in dicts:
        both = sorted(set(merged) & set(d))
        if both:
            raise ValueError(
                f"functional_call: {both} appeared in more than one dictionary; which value to use is ambiguous"
            )
        merged.update(d)
    return merged


def _owner(module: Any, name: str) -> tuple[Any, str]:
    *path, leaf = name.split(".")
    m = module
    for part in path:
        m = getattr(m, part)
    return m, leaf


# Per module: (the structure version it was read at, its parameters and buffers by every name,
# each name's owning module, attribute and the owner's ``_parameters``/``_buffers`` dict holding it).
# A module whose structure has not changed since (``Module._structure_version``, which every
# attribute write bumps) reuses it: the swap's own bumps are recorded as the new version when it
# restores the module.
_Slot = tuple[Any, str, "dict[str, Any] | None"]
_LAYOUT: weakref.WeakKeyDictionary[Any, tuple[int, dict[str, Any], dict[str, _Slot]]] = (
    weakref.WeakKeyDictionary()
)


def _slot(module: Any, name: str) -> _Slot:
    owner, leaf = _owner(module, name)
    d = owner.__dict__
    for store in ("_parameters", "_buffers"):
        if leaf in d.get(store, ()):
            return owner, leaf, d[store]
    return owner, leaf, None


def _layout(module: Any) -> tuple[dict[str, Any], dict[str, _Slot]]:
    from ..modules.module import Module

    entry = _LAYOUT.get(module)
    if entry is not None and entry[0] == Module._structure_version:
        return entry[1], entry[2]
    known: dict[str, Any] = dict(module.named_parameters(remove_duplicate=False))
    known.update(dict(module.named_buffers(remove_duplicate=False)))
    slots = {name: _slot(module, name) for name in known}
    _LAYOUT[module] = (Module._structure_version, known, slots)
    return known, slots


@contextlib.contextmanager
def _swapped(module: Any, values: dict[str, Any], tie_weights: bool, strict: bool) -> Iterator[None]:
    """Within the block, ``module``'s parameters and buffers named in ``values`` (and, with
    ``tie_weights``, every name tied to one of them) read the given tensors."""
    from ..modules.module import Module

    known, slots = _layout(module)
    if strict:
        missing = sorted(set(known) - set(values))
        unexpected = sorted(set(values) - set(known))
        if missing or unexpected:
            parts = []
            if missing:
                parts.append("Missing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + ".")
            raise RuntimeError(
                f"functional_call: error(s) for {type(module).__name__}:\n\t" + "\n\t".join(parts)
            )
    values = dict(values)
    if tie_weights:
        by_id = {id(known[k]): v for k, v in values.items() if k in known and known[k] is not None}
        for k, t in known.items():
            if k not in values and t is not None and id(t) in by_id:
                values[k] = by_id[id(t)]
    # Slots are written through ``dict.__setitem__`` (the stores' own ``__setitem__`` bumps the
    # versions on every write); each touched owner is bumped once on the way in and once out.
    restore: list[tuple[Any, str, dict[str, Any] | None, Any]] = []
    touched: dict[int, Any] = {}
    setitem = dict.__setitem__
    try:
        for name, value in values.items():
            owner, leaf, store = slots[name] if name in slots else _slot(module, name)
            if store is not None:
                restore.append((owner, leaf, store, store[leaf]))
                setitem(store, leaf, value)
            else:
                restore.append((owner, leaf, None, owner.__dict__.get(leaf, _MISSING)))
                object.__setattr__(owner, leaf, value)
            if id(owner) not in touched:
                touched[id(owner)] = owner
                owner._bump_version()
        yield
    finally:
        for owner, leaf, store, old in reversed(restore):
            if store is not None:
                setitem(store, leaf, old)
            elif old is _MISSING:
                object.__delattr__(owner, leaf)
            else:
                object.__setattr__(owner, leaf, old)
        for owner in touched.values():
            owner._bump_version()
        entry = _LAYOUT.get(module)
        if entry is not None and all(store is not None for _, _, store, _ in restore):
            # Only slots were swapped and restored: the layout read before still holds.
            _LAYOUT[module] = (Module._structure_version, entry[1], entry[2])


_MISSING = object()


def functional_call(
    module: Any,
    parameter_and_buffer_dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``module(*args, **kwargs)`` with the parameters and buffers named in
    ``parameter_and_buffer_dicts`` (one mapping, or several with distinct keys) standing in
    for the module's own, which are restored afterwards, also when the call raises.

    Gradients flow to the given tensors, not to the module's parameters. With
    ``tie_weights`` a value given for one of several tied names is used for all of them;
    with ``strict`` every parameter and buffer must be given, and no other name.
    ``args`` that is not a tuple is the single positional argument."""
    values = _merge(parameter_and_buffer_dicts)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, values, tie_weights, strict):
        return module(*args, **(kwargs or {}))
