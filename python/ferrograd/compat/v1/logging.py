"""``tf.logging``: TF1's logging calls, on Python's ``logging`` (logger ``tensorflow``)."""

from __future__ import annotations

import logging as _logging
from typing import Any

__all__ = [
    "DEBUG",
    "ERROR",
    "FATAL",
    "INFO",
    "WARN",
    "debug",
    "error",
    "info",
    "set_verbosity",
    "warn",
    "warning",
]

DEBUG, INFO, WARN, ERROR, FATAL = (
    _logging.DEBUG,
    _logging.INFO,
    _logging.WARNING,
    _logging.ERROR,
    _logging.FATAL,
)
_log = _logging.getLogger("tensorflow")


def set_verbosity(v: int) -> None:
    """Show messages at level ``v`` and above."""
    _log.setLevel(v)


def get_verbosity() -> int:
    """The current level."""
    return _log.getEffectiveLevel()


def debug(msg: str, *args: Any) -> None:
    """Log at DEBUG."""
    _log.debug(msg, *args)


def info(msg: str, *args: Any) -> None:
    """Log at INFO."""
    _log.info(msg, *args)


def warning(msg: str, *args: Any) -> None:
    """Log at WARN."""
    _log.warning(msg, *args)


warn = warning


def error(msg: str, *args: Any) -> None:
    """Log at ERROR."""
    _log.error(msg, *args)
