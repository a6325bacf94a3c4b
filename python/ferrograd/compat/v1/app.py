"""``tf.app``: ``run`` a program's ``main`` and the ``flags`` it declares."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

from . import flags

__all__ = ["flags", "run"]


def run(main: Callable[..., Any] | None = None, argv: list[str] | None = None) -> NoReturn:
    """Parse the flags from ``argv`` (``sys.argv`` by default), call ``main(argv)`` and exit with its result."""
    args = list(sys.argv if argv is None else argv)
    rest = flags.FLAGS._parse(args)
    if main is None:
        main = sys.modules["__main__"].main  # type: ignore[attr-defined]
    sys.exit(main(rest))
