"""Grad-mode switches: context managers that also work as decorators."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from . import _core

F = TypeVar("F", bound=Callable[..., Any])


class _GradModeContext:
    """Sets grad mode on entry and restores the previous mode on exit (per thread)."""

    _mode: bool

    def __enter__(self) -> None:
        self._prev = _core._set_grad_enabled(self._mode)

    def __exit__(self, *exc: object) -> None:
        _core._set_grad_enabled(self._prev)

    def __call__(self, fn: F) -> F:
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = _core._set_grad_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _core._set_grad_enabled(prev)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradModeContext):  # noqa: N801 - PyTorch's name
    """Disable gradient recording inside the block (or the decorated function)."""

    _mode = False


class enable_grad(_GradModeContext):  # noqa: N801
    """Enable gradient recording inside the block (or the decorated function)."""

    _mode = True


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Set gradient recording to ``mode``; usable as a call, a context manager or a decorator."""

    def __init__(self, mode: bool) -> None:
        self._mode = bool(mode)
        self._prev = _core._set_grad_enabled(self._mode)

    def __enter__(self) -> None:
        pass


is_grad_enabled = _core.is_grad_enabled
