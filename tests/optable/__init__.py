"""The op table: one ``OpSpec`` per registry op, split by family.

Each family module (``elementwise.py``, ``reduce.py``, ...) defines ``SPECS``;
``ALL_SPECS`` joins them. ``tests/test_optable.py`` drives forward checks
against NumPy for every spec and fails when a registry op has no spec.

Specs with ``composed=True`` cover functionals built in Python from registry
ops (``F.pixel_shuffle``, ``F.interpolate``, ...): ``op_info`` gives them the
registry entry their composition implies, so the drivers treat both alike.
"""

import importlib
import os
import pkgutil

import ferrograd as fg
import numpy as np
from hypothesis import settings

from ._spec import OpSpec

ALL_SPECS: list[OpSpec] = []
for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _m.name.startswith("_"):
        continue
    ALL_SPECS.extend(importlib.import_module(f"{__name__}.{_m.name}").SPECS)


def op_info(spec: OpSpec, registry: dict[str, dict]) -> dict:
    """The registry entry of ``spec``'s op ({} when it names none); for a composed spec, the
    entry its composition implies: differentiable when it has float dtypes, no view, no
    mutation, output shapes independent of the values — unless the spec says otherwise
    (``differentiable``, ``data_dependent``)."""
    if not spec.composed:
        return registry.get(spec.name, {})
    return {
        "name": spec.name,
        "family": "composed",
        "differentiable": (
            any(d.startswith("float") or d == "bfloat16" for d in spec.dtypes)
            if spec.differentiable is None
            else spec.differentiable
        ),
        "views": None,
        "mutates": None,
        "data_dependent": spec.data_dependent,
        "dtypes": list(spec.dtypes),
    }


def op_supports(spec: OpSpec, dtype: str, device: str) -> bool | None:
    """``fg.supports`` for the spec's op; ``None`` for a composed spec (the registry lists
    no such op: it runs on a device where its parts do, which the column's outcome shows)."""
    if spec.composed:
        return None
    return fg.supports(spec.name, dtype, device)


def expandable(spec: OpSpec, arrays, registry: dict[str, dict]) -> set[int]:
    """The inputs a drawn layout may expand (stride 0): float arrays the op does not write,
    when the spec allows expansion (``OpSpec.expand``)."""
    if not spec.expand:
        return set()
    tensor_pos = [i for i, a in enumerate(arrays) if isinstance(a, (np.ndarray, np.generic))]
    mutated = op_info(spec, registry).get("mutates")
    written = tensor_pos[mutated] if mutated is not None and mutated < len(tensor_pos) else None
    return {
        i for i in tensor_pos
        if i != written and np.asarray(arrays[i]).dtype.kind == "f"
    }


def examples(n: int) -> int:
    """How many examples a cell asking for ``n`` draws: ``n`` under the default profile,
    scaled by the loaded hypothesis profile's ``max_examples / 100`` (the ``deep`` profile
    draws four times as many), or by ``FG_OPTABLE_SCALE`` when that is set."""
    scale = os.environ.get("FG_OPTABLE_SCALE")
    factor = float(scale) if scale else settings.default.max_examples / 100
    return max(1, round(n * factor))
