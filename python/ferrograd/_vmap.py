"""``vmap`` (``torch.vmap`` / ``torch.func.vmap``) and the small pytree helpers the
function transforms share.

``vmap`` here is a loop: it slices every mapped input along its mapped dimension, calls
``func`` once per slice and stacks the results along ``out_dims``. The results are those of
PyTorch's vectorised ``vmap`` (it computes exactly what the definition says), but the cost
is ``batch size`` calls of ``func``, not one batched call: a Python-level loop, roughly as
slow as writing the loop by hand.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import _core

Tensor = _core.Tensor

__all__ = ["vmap"]

# A tree spec: None for a leaf, or (kind, aux, children) with kind in tuple/list/dict.
_Spec = Any


def _flatten(x: Any) -> tuple[list[Any], _Spec]:
    """The leaves of ``x`` (tuples, lists and dicts are nodes, anything else a leaf) and
    a spec :func:`_unflatten` rebuilds it from."""
    leaves: list[Any] = []

    def go(t: Any) -> _Spec:
        if isinstance(t, dict):
            keys = list(t)
            return ("dict", tuple(keys), tuple(go(t[k]) for k in keys))
        if isinstance(t, tuple) and hasattr(t, "_fields"):
            return ("namedtuple", type(t), tuple(go(v) for v in t))
        if isinstance(t, tuple | list):
            return (type(t).__name__, None, tuple(go(v) for v in t))
        leaves.append(t)
        return None

    spec = go(x)
    return leaves, spec


def _unflatten(leaves: list[Any], spec: _Spec) -> Any:
    it = iter(leaves)

    def go(s: _Spec) -> Any:
        if s is None:
            return next(it)
        kind, aux, children = s
        vals = [go(c) for c in children]
        if kind == "dict":
            return dict(zip(aux, vals, strict=True))
        if kind == "namedtuple":
            return aux(*vals)
        return tuple(vals) if kind == "tuple" else vals

    return go(spec)


def _broadcast_dims(fn: str, what: str, dims: Any, spec: _Spec) -> list[Any]:
    """``dims`` (an int/None, or a tree that is a prefix of ``spec``) expanded to one
    entry per leaf of ``spec``."""
    if dims is None or isinstance(dims, int):
        return [dims] * _count(spec)
    if spec is None:
        raise ValueError(f"{fn}: {what}={dims!r} has more structure than the value it applies to")
    kind, aux, children = spec
    if kind == "dict":
        if not isinstance(dims, dict) or set(dims) != set(aux):
            raise ValueError(
                f"{fn}: {what}={dims!r} does not match the structure of the value (a dict with keys {list(aux)})"
            )
        out: list[Any] = []
        for k, c in zip(aux, children, strict=True):
            out += _broadcast_dims(fn, what, dims[k], c)
        return out
    if not isinstance(dims, tuple | list) or len(dims) != len(children):
        raise ValueError(
            f"{fn}: {what}={dims!r} does not match the structure of the value (a {kind} of {len(children)})"
        )
    out = []
    for d, c in zip(dims, children, strict=True):
        out += _broadcast_dims(fn, what, d, c)
    return out


def _count(spec: _Spec) -> int:
    return 1 if spec is None else sum(_count(c) for c in spec[2])


def _check_int_or_none(fn: str, what: str, dims: Any) -> None:
    leaves, _ = _flatten(dims)
    for d in leaves:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"{fn}: {what} must be ints or None (possibly in a tuple/dict), got {d!r}")


def vmap(
    func: Callable[..., Any],
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """``torch.vmap``: ``func`` mapped over a dimension of its inputs.

    ``in_dims`` says which dimension of each positional input is mapped: an int or
    ``None`` for all of them, or a tuple with one entry per input, each an int, ``None``
    (not mapped: passed to every call unchanged; non-tensor inputs must have ``None``) or a
    tree matching that input's structure. ``out_dims`` (an int, or a tree matching the
    output's structure) says where the mapped dimension goes in each output; ``None``
    returns an output that must not depend on the mapped inputs. Keyword arguments are
    passed through unmapped. Nested ``vmap`` and ``vmap`` of ``grad``/``jacrev`` work.

    **Not vectorised**: ``func`` runs once per slice and the results are stacked, so the
    values are PyTorch's but the cost is one call of ``func`` per batch element.
    ``chunk_size`` is accepted and changes nothing.

    ``randomness``: ``"error"`` raises ``RuntimeError`` when ``func`` draws from the global
    random generator (detected by comparing its state before and after each call; a
    ``Generator`` object passed explicitly is not seen); ``"different"`` lets each slice
    draw its own numbers; ``"same"`` gives every slice the same numbers.
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}"
        )
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    _check_int_or_none("vmap", "in_dims", in_dims)
    _check_int_or_none("vmap", "out_dims", out_dims)
    if not (in_dims is None or isinstance(in_dims, int | tuple)):
        raise ValueError(
            f"vmap(func, in_dims={in_dims!r}, ...): expected `in_dims` to be int or a (potentially nested) "
            "tuple matching the structure of inputs"
        )
    name = getattr(func, "__name__", type(func).__name__)

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        where = f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>)"
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(
                f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has structure "
                f"of a tuple of {len(in_dims)} but inputs has {len(args)} elements"
            )
        leaves, spec = _flatten(args)
        dims = (
            _broadcast_dims(where, "in_dims", in_dims, spec)
            if isinstance(in_dims, tuple)
            else [in_dims] * len(leaves)
        )
        size = None
        norm: list[int | None] = []
        for x, d in zip(leaves, dims, strict=True):
            if d is None:
                norm.append(None)
                continue
            if not isinstance(x, Tensor):
                raise ValueError(
                    f"{where}: Got in_dim={d} for an input but the input is of type {type(x)}. We cannot vmap "
                    "over non-Tensor arguments, please use None as the respective in_dim"
                )
            nd = x.dim()
            if not -nd <= d < nd:
                raise ValueError(
                    f"{where}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality {nd} "
                    f"so expected in_dim to satisfy -{nd} <= in_dim < {nd}."
                )
            d %= nd
            norm.append(d)
            n = x.shape[d]
            if size is None:
                size = n
            elif n != size:
                sizes = [x.shape[d] for x, d in zip(leaves, norm, strict=False) if d is not None]
                raise ValueError(
                    f"{where}: Expected all tensors to have the same size in the mapped dimension, got sizes "
                    f"{sizes} for the mapped dimension (in_dims={in_dims!r}, input shapes "
                    f"{[tuple(x.shape) for x, d in zip(leaves, norm, strict=False) if d is not None]})"
                )
        if size is None:
            raise ValueError(f"{where}: at least one input must be vmapped over (got in_dims={in_dims!r})")
        if size == 0:
            raise ValueError(
                f"{where}: the mapped dimension has size 0; this loop-based vmap needs at least one slice"
            )

        outs = []
        start = _core.get_rng_state()
        for b in range(size):
            if randomness == "same":
                _core.set_rng_state(start)
            before = _core.get_rng_state() if randomness == "error" else None
            sliced = [x if d is None else x.select(d, b) for x, d in zip(leaves, norm, strict=True)]
            out = func(*_unflatten(sliced, spec), **kwargs)
            if before is not None and _core.get_rng_state() != before:
                raise RuntimeError(
                    "vmap: called random operation while in randomness error mode. Please either use the "
                    "'same' or 'different' randomness flags on vmap or perform the randomness operation out of vmap"
                )
            outs.append(_flatten(out))
        return _stack_outputs(name, outs, out_dims)

    return wrapped


def _stack_outputs(name: str, outs: list[tuple[list[Any], _Spec]], out_dims: Any) -> Any:
    leaves0, spec = outs[0]
    for _leaves, s in outs[1:]:
        if s != spec:
            raise ValueError(
                f"vmap({name}, ...): func returned outputs of different structure for different slices"
            )
    if out_dims is None or isinstance(out_dims, int):
        dims = [out_dims] * len(leaves0)
    else:
        dims = _broadcast_dims(f"vmap({name}, ...)", "out_dims", out_dims, spec)
    result = []
    for k, d in enumerate(dims):
        col = [leaves[k] for leaves, _ in outs]
        if d is None:
            first = col[0]
            for other in col[1:]:
                same = (
                    first.equal(other)
                    if isinstance(first, Tensor) and isinstance(other, Tensor)
                    else first == other
                )
                if not same:
                    raise ValueError(
                        f"vmap({name}, ..., out_dims=None): an output with out_dim None differs across the "
                        "mapped dimension; it must not depend on the mapped inputs"
                    )
            result.append(first)
            continue
        if not all(isinstance(t, Tensor) for t in col):
            bad = next(t for t in col if not isinstance(t, Tensor))
            raise ValueError(
                f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(bad)}. Did you mean to set "
                "out_dims= to None for output?"
            )
        nd = col[0].dim() + 1
        if not -nd <= d < nd:
            raise ValueError(
                f"vmap({name}, ...): out_dim={d} is out of range for an output of dimensionality {nd - 1} "
                f"(expected -{nd} <= out_dim < {nd})"
            )
        result.append(_core.stack(col, d % nd))
    return _unflatten(result, spec)
