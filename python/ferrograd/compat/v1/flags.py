"""``tf.flags`` / ``tf.app.flags``: command-line flags declared with ``DEFINE_*`` and read from ``FLAGS``."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["DEFINE_bool", "DEFINE_boolean", "DEFINE_float", "DEFINE_integer", "DEFINE_string", "FLAGS"]


def _to_bool(v: str) -> bool:
    low = v.lower()
    if low in ("1", "true", "t", "yes", "y"):
        return True
    if low in ("0", "false", "f", "no", "n"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


class _Flags:
    """The declared flags; reading one parses ``sys.argv`` the first time."""

    def __init__(self) -> None:
        object.__setattr__(self, "_defs", {})
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_parsed", False)

    def _define(self, name: str, default: Any, kind: Any, help: str) -> None:  # noqa: A002
        self._defs[name] = (kind, default, help)
        self._values.setdefault(name, default)

    def _parse(self, argv: list[str]) -> list[str]:
        """Take ``--name=value`` / ``--name value`` / ``--[no]flag`` for declared flags; return the rest."""
        rest = argv[:1]
        i = 1
        while i < len(argv):
            a = argv[i]
            if a.startswith("--"):
                body = a[2:]
                name, eq, val = body.partition("=")
                if name in self._defs:
                    kind = self._defs[name][0]
                    if not eq:
                        if kind is bool:
                            val = "true"
                        elif i + 1 < len(argv):
                            i += 1
                            val = argv[i]
                        else:
                            raise ValueError(f"flag --{name} needs a value")
                    self._values[name] = _to_bool(val) if kind is bool else kind(val)
                    i += 1
                    continue
                if name.startswith("no") and name[2:] in self._defs and self._defs[name[2:]][0] is bool:
                    self._values[name[2:]] = False
                    i += 1
                    continue
            rest.append(a)
            i += 1
        object.__setattr__(self, "_parsed", True)
        return rest

    def __call__(self, argv: list[str]) -> list[str]:
        return self._parse(list(argv))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if not self._parsed:
            self._parse(list(sys.argv))
        if name not in self._values:
            raise AttributeError(f"flag {name!r} is not defined")
        return self._values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self._values[name] = value


FLAGS = _Flags()


def DEFINE_string(name: str, default: str | None, help: str) -> None:  # noqa: N802, A002
    """Declare a string flag."""
    FLAGS._define(name, default, str, help)


def DEFINE_integer(name: str, default: int | None, help: str) -> None:  # noqa: N802, A002
    """Declare an integer flag."""
    FLAGS._define(name, default, int, help)


def DEFINE_float(name: str, default: float | None, help: str) -> None:  # noqa: N802, A002
    """Declare a float flag."""
    FLAGS._define(name, default, float, help)


def DEFINE_boolean(name: str, default: bool | None, help: str) -> None:  # noqa: N802, A002
    """Declare a boolean flag (``--name``, ``--noname``, ``--name=false``)."""
    FLAGS._define(name, default, bool, help)


DEFINE_bool = DEFINE_boolean
