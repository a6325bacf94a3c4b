"""Autocast's casts for the ops written in Python (see :mod:`ferrograd.amp`).

The core's matrix products, ``linear``, ``conv1d``/``conv2d``, ``cross_entropy``
and ``prod`` cast their own inputs; these decorators give the Python-level ops
the same policy: :func:`lower` ops compute in the region's dtype, :func:`f32`
ops (the losses) in float32. Outside every autocast region a decorated call
costs two flag reads.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from . import _core

F = TypeVar("F", bound=Callable[..., Any])
_LOWP = (_core.float16, _core.bfloat16)
_ELIGIBLE = (_core.float32, _core.float16, _core.bfloat16)


def _region(t: _core.Tensor) -> Any:
    return _core._get_autocast(t.device.type == "gpu")


def _casting(names: tuple[str, ...], pick: Callable[[_core.Tensor], Any]) -> Callable[[F], F]:
    def wrap(f: F) -> F:
        sig = inspect.signature(f)

        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            if _core._get_autocast(False) is None and _core._get_autocast(True) is None:
                return f(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            for n in names:
                v = bound.arguments.get(n)
                if isinstance(v, _core.Tensor):
                    d = pick(v)
                    if d is not None and v.dtype != d:
                        bound.arguments[n] = v.to(d)
            return f(*bound.args, **bound.kwargs)

        return run  # type: ignore[return-value]

    return wrap


def lower(*names: str) -> Callable[[F], F]:
    """In an autocast region, cast the float32/float16/bfloat16 tensor arguments
    ``names`` to the region's dtype (float64 is left alone)."""
    return _casting(names, lambda t: _region(t) if t.dtype in _ELIGIBLE else None)


def f32(*names: str) -> Callable[[F], F]:
    """In an autocast region, cast the float16/bfloat16 tensor arguments ``names``
    to float32 (the op then computes, and returns, float32)."""
    return _casting(names, lambda t: _core.float32 if t.dtype in _LOWP and _region(t) is not None else None)
