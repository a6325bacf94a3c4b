"""Generate ``docs/compatibility.md``: each PyTorch API name of ``scripts/pytorch_api.txt``
with its status in ferrograd, from test results (not written by hand).

    python scripts/gen_compat.py --run [TEST FILES/NODE IDS ...]  # run tests, record, write both files
    python scripts/gen_compat.py                                    # rewrite the table from the record
    python scripts/gen_compat.py --check                            # exit 1 when the table is stale

``--run`` runs pytest in this process with a recording plugin; the tests default to
``DEFAULT_TESTS``. A test *covers* an API when

- it fills an op-table cell (marker ``optable_cell(op, column)``) of a spec named after it:
  spec ``x`` covers ``torch.x``, ``torch.Tensor.x`` and ``torch.nn.functional.x``, spec
  ``linalg.x`` covers ``torch.linalg.x`` (those the list names and ferrograd has);
- it carries ``@pytest.mark.covers("torch.nn.Fold", ...)``;
- its source (decorators included) refers to the ferrograd object the name resolves to,
  through the test module's globals (``fg.linalg.inv``, ``nn.EmbeddingBag``, ``F.unfold``
  with ``F`` bound to ``ferrograd.nn.functional``), or calls ``.x(...)`` on a value, for a
  ``torch.Tensor.x`` method (reads ``.x``, for a property such as ``torch.Tensor.grad``),
  unless NumPy arrays have an ``x`` too (``sum``, ``T``, ``reshape``: the source does not
  tell which one is used, so only op-table cells and markers count for those names).
  This is a static reading: a name used only inside a helper the test calls is not seen.

The record (``docs/compatibility.json``) keeps, per API, how many covering tests passed
and failed, the tests that were run and a hash of the API list. Statuses:

- **tested**: ferrograd has it and at least one covering test passed, none failed;
- **failing**: a covering test failed;
- **untested**: ferrograd has the name, but no test run covers it;
- **missing**: ferrograd has no such name.

The table is rendered from the record and from what ferrograd has now, so the test suite
(``tests/test_compat_table.py``) can tell cheaply, without running tests, when the table,
the record or the API list have drifted apart.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
API_FILE = ROOT / "scripts" / "pytorch_api.txt"
RECORD = ROOT / "docs" / "compatibility.json"
TABLE = ROOT / "docs" / "compatibility.md"

# The test files ``--run`` covers by default: the op table's forward columns and the
# suites of the PyTorch-shaped surface.
DEFAULT_TESTS = [
    "tests/test_optable.py::test_op",
    "tests/test_linalg_decomp.py",
    "tests/test_pool3d.py",
    "tests/test_sparse_adam.py",
    "tests/test_surface_misc.py",
    "tests/test_small_int.py",
    "tests/test_script_habits.py",
    "tests/test_autograd.py",
    "tests/test_autograd_functional.py",
    "tests/test_func_transforms.py",
    "tests/test_surface_index.py",
    "tests/test_default_dtype.py",
    "tests/test_data.py",
    "tests/test_data_samplers.py",
    "tests/test_distributions.py",
    "tests/test_linalg_composed.py",
    "tests/test_special_namespace.py",
    "tests/test_lr_scheduler.py",
    "tests/test_module_backward_hooks.py",
    "tests/test_nn.py",
    "tests/test_nn_gradchecks.py",
    "tests/test_nn_more.py",
    "tests/test_nn_surface.py",
    "tests/test_optim.py",
    "tests/test_optim_more.py",
    "tests/test_tensor.py",
    "tests/test_tensor_compose.py",
    "tests/test_torch_surface.py",
    "tests/test_surface_more.py",
    "tests/test_surface_torch_ns.py",
    "tests/test_nn_surface_more.py",
    "tests/test_nn_conv_grid_ctc.py",
    "tests/test_distributions_more.py",
    "tests/test_distributions_extra.py",
    "tests/test_lr_scheduler_more.py",
    "tests/test_orthogonal.py",
    "tests/test_data_iterable.py",
    "tests/test_sort.py",
    "tests/test_linalg.py",
    "tests/test_random.py",
    "tests/test_serialization.py",
    "tests/test_compat_gaps.py",
    "tests/test_torch_checkpoint.py",
    "tests/test_jit.py",
    "tests/test_nn_surface_extra.py",
    "tests/test_multiprocessing.py",
    "tests/test_profiler.py",
    "tests/test_surface_math.py",
]

STATUSES = ("tested", "failing", "untested", "missing")
_MISSING = object()


def load_api(path: Path = API_FILE) -> list[str]:
    """The API names of the list file (comments and blank lines skipped), in order."""
    names = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line)
    return names


def api_hash(path: Path = API_FILE) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def resolve(name: str) -> Any:
    """The ferrograd object a ``torch.``-name maps to, or ``_MISSING``."""
    parts = ["ferrograd", *name.split(".")[1:]]
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for p in parts[cut:]:
                obj = getattr(obj, p)
        except AttributeError:
            return _MISSING
        return obj
    return _MISSING


def group_of(name: str) -> str:
    """``torch.nn.functional.unfold`` -> ``torch.nn.functional`` (``torch.Tensor.x``: ``torch.Tensor``)."""
    return name.rsplit(".", 1)[0]


def status(name: str, counts: dict[str, int] | None, exists: bool) -> str:
    if not exists:
        return "missing"
    if counts and counts.get("failed", 0):
        return "failing"
    if counts and counts.get("passed", 0):
        return "tested"
    return "untested"


def render(api: list[str], record: dict[str, Any], exists: dict[str, bool]) -> str:
    """The markdown table of ``api`` from ``record`` (the recorded outcomes) and ``exists``."""
    counts = record.get("apis", {})
    groups: dict[str, list[str]] = {}
    for n in api:
        groups.setdefault(group_of(n), []).append(n)
    total = {s: 0 for s in STATUSES}
    rows: dict[str, list[tuple[str, str, dict[str, int]]]] = {}
    for g, names in groups.items():
        for n in names:
            s = status(n, counts.get(n), exists[n])
            total[s] += 1
            rows.setdefault(g, []).append((n, s, counts.get(n, {})))
    out = [
        "# PyTorch compatibility",
        "",
        "<!-- Generated by scripts/gen_compat.py from docs/compatibility.json: do not edit. -->",
        "",
        "Each PyTorch name of `scripts/pytorch_api.txt`, with its status in ferrograd:",
        "**tested** (ferrograd has it and a passing test exercises it), **failing** (a test",
        "exercising it failed), **untested** (the name exists, but no test of the recorded",
        "run exercises it: it may work, nothing shows it does) or **missing**. Which tests",
        "count as exercising a name is described in `scripts/gen_compat.py`.",
        "",
        "Recorded from: " + ", ".join(f"`{t}`" for t in record.get("tests", [])) + ".",
        "",
        "| status | count |",
        "| --- | ---: |",
        *[f"| {s} | {total[s]} |" for s in STATUSES],
        "",
    ]
    for g, items in rows.items():
        tally = ", ".join(f"{sum(1 for _, s, _ in items if s == k)} {k}" for k in STATUSES)
        out += [
            f"## `{g}`",
            "",
            tally,
            "",
            "| API | status | tests passed / failed |",
            "| --- | --- | ---: |",
        ]
        for n, s, c in items:
            tests = f"{c.get('passed', 0)} / {c.get('failed', 0)}" if c else ""
            out.append(f"| `{n}` | {s} | {tests} |")
        out.append("")
    return "\n".join(out)


def current_exists(api: Iterable[str]) -> dict[str, bool]:
    return {n: resolve(n) is not _MISSING for n in api}


# ---------------------------------------------------------------------------
# recording
# ---------------------------------------------------------------------------


def _chains(tree: ast.AST) -> tuple[list[list[str]], set[str], set[str]]:
    """The dotted name chains (``fg.nn.functional.unfold`` as a list), the attribute names
    called (``x.cummax(...)``) and all attribute names read (``x.T``) in ``tree``."""
    chains, calls, attrs = [], set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attrs.add(node.attr)
            parts, cur = [node.attr], node.value
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                chains.append([cur.id, *reversed(parts)])
        elif isinstance(node, ast.Name):
            chains.append([node.id])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            calls.add(node.func.attr)
    return chains, calls, attrs


class Recorder:
    """A pytest plugin recording, per API name, the passing and failing tests covering it."""

    def __init__(self, api: list[str]) -> None:
        self.api = set(api)
        self.by_id: dict[int, list[str]] = {}
        self.methods: dict[str, list[str]] = {}
        self.properties: dict[str, list[str]] = {}
        self.keep: list[Any] = []  # the resolved objects stay alive, so their ids stay theirs
        for n in api:
            obj = resolve(n)
            if obj is _MISSING:
                continue
            self.keep.append(obj)
            self.by_id.setdefault(id(obj), []).append(n)
            attr = n.rsplit(".", 1)[1]
            # A NumPy array has the attribute too (x.sum(), a.T): the source cannot tell
            # which one a test uses, so only op-table cells and markers count for those.
            if n.startswith("torch.Tensor.") and not hasattr(np.ndarray, attr):
                table = self.methods if callable(obj) else self.properties
                table.setdefault(attr, []).append(n)
        self.exists = {n: resolve(n) is not _MISSING for n in api}
        self.item_apis: dict[str, set[str]] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self._source_cache: dict[Any, set[str]] = {}

    def _from_source(self, item: Any) -> set[str]:
        fn = getattr(item, "function", None)
        if fn is None:
            return set()
        if fn in self._source_cache:
            return self._source_cache[fn]
        found: set[str] = set()
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            self._source_cache[fn] = found
            return found
        glb = getattr(item.module, "__dict__", {})
        chains, calls, attrs = _chains(tree)
        for chain in chains:
            if chain[0] not in glb:
                continue
            obj = glb[chain[0]]
            for k in range(len(chain)):
                if k:
                    try:
                        obj = getattr(obj, chain[k])
                    except Exception:  # noqa: BLE001 - any failing lookup ends the chain
                        break
                found.update(self.by_id.get(id(obj), ()))
        for c in calls:
            found.update(self.methods.get(c, ()))
        for a in attrs:
            found.update(self.properties.get(a, ()))
        self._source_cache[fn] = found
        return found

    def _from_cell(self, op: str) -> set[str]:
        if op.startswith("linalg."):
            cands = [f"torch.{op}"]
        else:
            cands = [f"torch.{op}", f"torch.Tensor.{op}", f"torch.nn.functional.{op}"]
        return {c for c in cands if c in self.api and self.exists[c]}

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        for item in items:
            apis = set(self._from_source(item))
            for m in item.iter_markers("covers"):
                apis.update(a for a in m.args if a in self.api)
            cell = item.get_closest_marker("optable_cell")
            if cell is not None:
                apis |= self._from_cell(cell.args[0])
            self.item_apis[item.nodeid] = apis

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when != "call" and not report.failed:
            return
        if report.skipped or hasattr(report, "wasxfail"):
            return
        key = "passed" if report.passed else "failed"
        for a in self.item_apis.get(report.nodeid, ()):
            c = self.counts.setdefault(a, {"passed": 0, "failed": 0})
            c[key] += 1


def run(tests: list[str]) -> int:
    import pytest

    api = load_api()
    rec = Recorder(api)
    code = pytest.main(
        [*tests, "-p", "no:xdist", "-q", "--no-optable-matrix", "-p", "no:cacheprovider"], plugins=[rec]
    )
    record = {
        "api_hash": api_hash(),
        "tests": tests,
        "apis": {n: rec.counts[n] for n in api if n in rec.counts},
    }
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    TABLE.write_text(render(api, record, rec.exists))
    print(f"wrote {RECORD.relative_to(ROOT)} and {TABLE.relative_to(ROOT)} (pytest exit status {int(code)})")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--run"]:
        return run(argv[1:] or DEFAULT_TESTS)
    api = load_api()
    record = json.loads(RECORD.read_text())
    text = render(api, record, current_exists(api))
    if "--check" in argv:
        problems = []
        if record.get("api_hash") != api_hash():
            problems.append(f"{API_FILE.name} changed since the record was made: rerun with --run")
        if TABLE.read_text() != text:
            problems.append(f"{TABLE.name} is out of date: run python scripts/gen_compat.py")
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    TABLE.write_text(text)
    print(f"wrote {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
