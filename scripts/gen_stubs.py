"""Regenerate the generated parts of ``python/ferrograd/_core.pyi`` from the op definitions.

The unary ops' Tensor methods (``x.exp()``, ``x.exp_()``, ...) are generated in
Rust from the op table (``src/kernel/unary.rs``); their stubs are written here
from the same table, read through ``_core._unary_ops()``, between the
``BEGIN generated`` and ``END generated`` markers of the stub file.

    python scripts/gen_stubs.py          # rewrite the stub file
    python scripts/gen_stubs.py --check  # exit 1 when it is out of date

The test suite runs the check (``tests/test_generated_stubs.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

STUB = Path(__file__).resolve().parent.parent / "python" / "ferrograd" / "_core.pyi"
BEGIN = "    # BEGIN generated: unary ops (scripts/gen_stubs.py, from src/kernel/unary.rs)"
END = "    # END generated: unary ops"


def unary_block(table: list[dict]) -> list[str]:
    """The stub lines of the generated unary methods, in table order."""
    lines = [BEGIN]
    for op in table:
        if op["method"] is None:
            continue
        lines.append(f"    def {op['method']}(self) -> Tensor: ...")
        if op["method_inplace"] is not None:
            lines.append(f"    def {op['method_inplace']}(self) -> Self: ...")
    lines.append(END)
    return lines


def render(text: str, table: list[dict]) -> str:
    """`text` (the stub file) with its generated block replaced."""
    lines = text.split("\n")
    try:
        a, b = lines.index(BEGIN), lines.index(END)
    except ValueError:
        raise SystemExit(f"{STUB}: the generated-block markers are missing") from None
    return "\n".join(lines[:a] + unary_block(table) + lines[b + 1 :])


def main(argv: list[str]) -> int:
    from ferrograd import _core

    text = STUB.read_text()
    new = render(text, _core._unary_ops())
    if "--check" in argv:
        if new != text:
            print(f"{STUB.name} is out of date: run python scripts/gen_stubs.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        STUB.write_text(new)
        print(f"rewrote the generated block of {STUB.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
