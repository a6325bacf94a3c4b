"""The generated parts of the stub file match the op definitions they come from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ferrograd import _core

_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gen_stubs.py"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_stubs", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_unary_stubs_are_up_to_date():
    gen = _gen()
    text = gen.STUB.read_text()
    assert gen.render(text, _core._unary_ops()) == text, "run python scripts/gen_stubs.py"


def test_every_generated_method_exists_and_is_stubbed():
    gen = _gen()
    block = "\n".join(gen.unary_block(_core._unary_ops()))
    names = [op["method"] for op in _core._unary_ops() if op["method"]]
    assert names, "the unary table lists no generated method"
    for op in _core._unary_ops():
        for m in (op["method"], op["method_inplace"]):
            if m is None:
                continue
            assert hasattr(_core.Tensor, m), m
            assert f"def {m}(self)" in block, m


def test_general_ops_python_entry_points_exist_and_are_stubbed():
    """Each Python entry point a general op's definition lists (``Def::PY``) is a
    Tensor method with a stub, and a ``ferrograd`` function."""
    import ferrograd as fg

    stub = _gen().STUB.read_text()
    entries = [e for g in _core._general_ops() for e in g["py"]]
    assert entries, "no general op lists a Python entry point"
    for e in entries:
        assert callable(getattr(fg, e["name"], None)), e["name"]
        if e["method"]:
            assert hasattr(_core.Tensor, e["name"]), e["name"]
            assert f"    def {e['name']}(self" in stub, e["name"]
