"""Fuzzing of the checkpoint and saved-graph loaders (a few thousand cases;
``scripts/fuzz_loaders.py`` runs the same mutations by the hundred thousand).

Every mutated file must load, or be refused with the loader's own error —
never another exception, a panic turned into an internal error, or a hang."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location(
    "fuzz_loaders", Path(__file__).resolve().parents[1] / "scripts" / "fuzz_loaders.py"
)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    return {"checkpoint": fuzz.valid_checkpoint(str(d)), "graph": fuzz.valid_graph(str(d)), "dir": d}


@pytest.mark.parametrize("loader", ["checkpoint", "graph"])
def test_valid_files_load(bases, loader):
    check = fuzz.check_checkpoint if loader == "checkpoint" else fuzz.check_graph
    assert check(bases[loader], str(bases["dir"] / f"ok-{loader}")).startswith("loaded")


@pytest.mark.parametrize("loader", ["checkpoint", "graph"])
@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**63 - 1), rounds=st.integers(1, 3))
def test_mutated_files_are_loaded_or_refused_cleanly(bases, loader, seed, rounds):
    rng = random.Random(seed)
    b = bases[loader]
    for _ in range(rounds):
        b = fuzz.mutate(b, rng)
    check = fuzz.check_checkpoint if loader == "checkpoint" else fuzz.check_graph
    outcome = check(b, str(bases["dir"] / f"case-{loader}"))
    assert outcome in {"loaded", "refused", "loaded+ran", "loaded, run refused"}
