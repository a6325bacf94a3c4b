"""The Rust sources' layers: no module may refer to a layer above its own.

Layers, bottom to top (``docs/architecture.md``): ``error``/``par``/``tensor``
(storage, layout, dtypes), ``kernel`` (the op kinds the backends implement,
each family's definitions in one table), ``backend`` (CPU and WebGPU kernels), ``ops`` and
``autograd``, ``graph`` (trace, passes, executor, save), ``py`` (the Python
bindings). Every reference form counts: ``crate::`` paths (in ``use`` groups
too), ``super::`` chains that climb out of a top-level module, crate-root
re-exports (``crate::Tensor`` is ``tensor``'s) and the crate's macros
(``capture!`` expands into ``ops::capture``).

The references that still point upward are listed, with their counts per
file, in ``tests/layers_upward.txt``: the debt the layering work pays down.
The test fails when a file gains an upward reference or a new file refers
upward, and when the list claims more than the code holds (a file that
dropped some must be lowered in the list, so the list stays true). Rewrite it
with ``python tests/test_layers.py --write`` after removing references.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
LIST = Path(__file__).resolve().parent / "layers_upward.txt"

# Top-level module -> layer (higher may refer to lower or equal, never up).
LAYER = {
    "error": 0,
    "par": 0,
    "tensor": 0,
    "kernel": 1,
    "backend": 2,
    "ops": 3,
    "autograd": 3,
    "graph": 4,
    "py": 5,
}
# Names defined or re-exported at the crate root, by the module they come from.
ROOT_ITEMS = {
    "Error": "error",
    "Result": "error",
    "Tensor": "tensor",
    "DType": "tensor",
    "Device": "tensor",
    "Scalar": "tensor",
    "multiversion": "backend",
    "with_dtype": "tensor",
    "capture": "ops",
}
# Macros invoked without a path, by the module their expansion refers to.
MACROS = {"capture": "ops"}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _module_path(f: Path) -> list[str]:
    parts = list(f.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return parts


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _top(name: str) -> str | None:
    if name in LAYER:
        return name
    return ROOT_ITEMS.get(name)


def references(f: Path) -> Counter[str]:
    """The top-level modules `f` refers to (other than its own), with counts."""
    return references_in(f.read_text(), _module_path(f))


def references_in(text: str, mp: list[str]) -> Counter[str]:
    """The top-level modules Rust source `text` refers to, for a file at module path `mp`."""
    own = mp[0] if mp else None
    text = _strip_comments(text)
    found: Counter[str] = Counter()

    def add(name: str | None) -> None:
        if name is not None and name != own:
            found[name] += 1

    for m in re.finditer(rf"\b(?:crate|\$crate)::(\{{[^;]*?\}}|{IDENT})", text, re.S):
        g = m.group(1)
        if g.startswith("{"):
            for x in re.findall(rf"(?:^|[{{,])\s*({IDENT})", g):
                add(_top(x))
        else:
            add(_top(g))
    # `super::` chains: the module they name, when they climb to the crate root.
    # (`a/b/c.rs` and `a/b/c/mod.rs` are both module `a::b::c`: three `super`s reach the root.)
    for m in re.finditer(rf"\b((?:super::)+)(\{{[^;]*?\}}|{IDENT})", text, re.S):
        n = m.group(1).count("super::")
        if n < len(mp):
            continue  # stays inside this top-level module
        g = m.group(2)
        names = re.findall(rf"(?:^|[{{,])\s*({IDENT})", g) if g.startswith("{") else [g]
        for x in names:
            add(_top(x))
    for name, mod in MACROS.items():
        for _ in re.finditer(rf"(?<![A-Za-z0-9_:]){name}!", text):
            add(mod)
    return found


def upward() -> dict[str, Counter[str]]:
    """Per file (relative to the repository), its references to higher layers."""
    out: dict[str, Counter[str]] = {}
    for f in sorted(SRC.rglob("*.rs")):
        mp = _module_path(f)
        if not mp or mp[0] not in LAYER:
            continue
        mine = LAYER[mp[0]]
        up = Counter({m: n for m, n in references(f).items() if m in LAYER and LAYER[m] > mine})
        if up:
            out[f.relative_to(ROOT).as_posix()] = up
    return out


def _read_list() -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for line in LIST.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        path, rest = line.split(" -> ")
        mod, n = rest.split()
        out.setdefault(path, Counter())[mod] = int(n)
    return out


def _write_list(found: dict[str, Counter[str]]) -> None:
    total = sum(sum(c.values()) for c in found.values())
    lines = [
        "# Upward references of the Rust sources, per file and module referred to (see test_layers.py).",
        f"# {total} references in {len(found)} files. Lower these; never add.",
    ]
    for path, c in found.items():
        for mod, n in sorted(c.items()):
            lines.append(f"{path} -> {mod} {n}")
    LIST.write_text("\n".join(lines) + "\n")


def test_the_layers_table_names_every_top_level_module():
    tops = {p.stem if p.is_file() else p.name for p in SRC.iterdir() if p.suffix == ".rs" or p.is_dir()}
    tops -= {"lib"}
    assert tops <= set(LAYER), f"modules without a layer: {sorted(tops - set(LAYER))}"


def test_the_scanner_sees_every_reference_form(tmp_path):
    # The scanner itself, on a file of each form (so that it cannot go blind).
    f = SRC / "ops" / "optim.rs"
    refs = references(f)
    assert refs["backend"] >= 1 and refs["tensor"] >= 1 and refs["error"] >= 1
    # Each form once, in a file `tensor/x/y.rs` (comments do not count).
    text = """
        use crate::{backend::cpu, graph::Graph};
        use super::super::super::autograd::Node;
        use super::super::ops::Inside;
        fn f() -> crate::Result<()> { let _ = crate::ops::capture::active(); capture!(c, [x], one); }
        // crate::py::nothing
        /* crate::kernel::nothing */
    """
    refs = references_in(text, ["tensor", "x", "y"])
    assert refs == Counter(backend=1, graph=1, autograd=1, error=1, ops=2), refs


def test_no_new_upward_references():
    found = upward()
    listed = _read_list()
    grown, shrunk = [], []
    for path in sorted(set(found) | set(listed)):
        have, allowed = found.get(path, Counter()), listed.get(path, Counter())
        for mod in sorted(set(have) | set(allowed)):
            if have[mod] > allowed[mod]:
                grown.append(f"{path} -> {mod}: {have[mod]} (listed {allowed[mod]})")
            elif have[mod] < allowed[mod]:
                shrunk.append(f"{path} -> {mod}: {have[mod]} (listed {allowed[mod]})")
    assert not grown, "upward references added (a lower layer must not name a higher one):\n" + "\n".join(
        grown
    )
    assert not shrunk, (
        "upward references removed: lower tests/layers_upward.txt (python tests/test_layers.py --write):\n"
        + "\n".join(shrunk)
    )


MAX_LINES = 1500


# The compiled module's stub is one file by necessity (one stub per extension module).
LONG_ALLOWED = {"python/ferrograd/_core.pyi"}


def test_no_source_file_over_1500_lines():
    # Files of one concern: a file that outgrows this is split by concern (see
    # docs/architecture.md), not trimmed. Rust and WGSL sources, the Python package
    # and the Python tests, scripts, benchmarks and examples alike.
    roots = [(SRC, (".rs", ".wgsl"))] + [
        (ROOT / d, (".py", ".pyi")) for d in ("python", "tests", "scripts", "benches", "examples")
    ]
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for root, suffixes in roots
        for p in sorted(root.rglob("*"))
        if p.suffix in suffixes
        and "_vendor" not in p.parts
        and str(p.relative_to(ROOT)) not in LONG_ALLOWED
        and (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, f"source files over {MAX_LINES} lines:\n" + "\n".join(long)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        _write_list(upward())
        print(LIST.read_text().splitlines()[1])
    else:
        for path, c in upward().items():
            print(path, dict(c))
