"""``docs/compatibility.md`` is generated from recorded test results
(``scripts/gen_compat.py``): it must match the record, the API list and what ferrograd
has now. Cheap: nothing here runs the recorded tests."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import ferrograd as fg

_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gen_compat.py"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_compat", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compatibility_table_is_current():
    gen = _gen()
    api = gen.load_api()
    record = json.loads(gen.RECORD.read_text())
    assert record["api_hash"] == gen.api_hash(), (
        "scripts/pytorch_api.txt changed since docs/compatibility.json was recorded: "
        "run python scripts/gen_compat.py --run"
    )
    want = gen.render(api, record, gen.current_exists(api))
    assert gen.TABLE.read_text() == want, (
        "docs/compatibility.md is stale (edited by hand, or a listed name appeared or went away "
        "in ferrograd): run python scripts/gen_compat.py --run (or without --run to re-render)"
    )


def test_api_list_names_are_unique_torch_names():
    api = _gen().load_api()
    assert len(api) == len(set(api)), sorted({n for n in api if api.count(n) > 1})
    assert all(n.startswith("torch.") and " " not in n for n in api)


def test_statuses_follow_the_record_and_the_package():
    gen = _gen()
    assert gen.status("torch.x", {"passed": 2, "failed": 0}, True) == "tested"
    assert gen.status("torch.x", {"passed": 2, "failed": 1}, True) == "failing"
    assert gen.status("torch.x", None, True) == "untested"
    assert gen.status("torch.x", {"passed": 3, "failed": 0}, False) == "missing"
    assert gen.resolve("torch.linalg.inv") is fg.linalg.inv
    assert gen.resolve("torch.nn.functional.unfold") is fg.nn.functional.unfold
    assert gen.resolve("torch.no_such_function") is gen._MISSING


def test_recorder_reads_cells_markers_and_sources():
    gen = _gen()
    rec = gen.Recorder(
        ["torch.linalg.inv", "torch.Tensor.cummax", "torch.Tensor.sum", "torch.nn.EmbeddingBag"]
    )
    assert rec._from_cell("linalg.inv") == {"torch.linalg.inv"}
    assert rec._from_cell("cummax") == {"torch.Tensor.cummax"}

    def sample_test():
        nn.EmbeddingBag(3, 2)  # noqa: F821 - resolved through the fake module's globals
        x.cummax(0)  # noqa: F821
        x.sum()  # noqa: F821 - NumPy arrays have .sum too: not counted from source

    module = types.ModuleType("fake_test_module")
    module.nn = fg.nn
    item = types.SimpleNamespace(function=sample_test, module=module)
    assert rec._from_source(item) == {"torch.nn.EmbeddingBag", "torch.Tensor.cummax"}
