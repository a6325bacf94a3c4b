"""The op table: one ``OpSpec`` per registry op, split by family.

Each family module (``elementwise.py``, ``reduce.py``, ...) defines ``SPECS``;
``ALL_SPECS`` joins them. ``tests/test_optable.py`` drives forward checks
against NumPy for every spec and fails when a registry op has no spec.
"""

import importlib
import pkgutil

from ._spec import OpSpec

ALL_SPECS: list[OpSpec] = []
for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _m.name.startswith("_"):
        continue
    ALL_SPECS.extend(importlib.import_module(f"{__name__}.{_m.name}").SPECS)
