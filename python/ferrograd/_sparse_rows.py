"""The row sets of "sparse" embedding gradients.

ferrograd has no sparse tensors: ``F.embedding(..., sparse=True)`` gives its weight an ordinary
dense gradient (the same values as PyTorch's sparse gradient, made dense) and records here which
rows that gradient covers, the rows PyTorch's sparse gradient would list. A lookup while the
weight has no gradient starts a new set (the gradient it feeds will be a fresh one, as after
``zero_grad()``); a lookup while a gradient is there adds to the set (gradients accumulate).
``optim.SparseAdam`` reads the set and updates only those rows. Rows at ``padding_idx`` are left
out, as PyTorch leaves them out of the sparse gradient.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _core

Tensor = _core.Tensor

# id(weight) -> (weak reference to the weight, sorted unique row indices)
_ROWS: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def _forget(key: int) -> None:
    _ROWS.pop(key, None)


def record(weight: Tensor, rows: np.ndarray) -> None:
    """Add ``rows`` (host int64 indices) to ``weight``'s set, starting a new set when the weight
    has no gradient yet."""
    key = id(weight)
    entry = _ROWS.get(key)
    rows = np.unique(rows.astype(np.int64, copy=False))
    if entry is not None and entry[0]() is weight and weight.grad is not None:
        rows = np.union1d(entry[1], rows)
    elif entry is None or entry[0]() is not weight:

        def gone(_ref: weakref.ref, key: int = key) -> None:
            _forget(key)

        ref = weakref.ref(weight, gone)
        _ROWS[key] = (ref, rows)
        return
    _ROWS[key] = (entry[0], rows)


def rows(weight: Tensor) -> np.ndarray | None:
    """The recorded row set of ``weight``'s gradient, or None when it has none (a dense gradient)."""
    entry = _ROWS.get(id(weight))
    if entry is None or entry[0]() is not weight:
        return None
    return entry[1]


def clear(weight: Tensor) -> None:
    """Forget ``weight``'s row set."""
    entry = _ROWS.get(id(weight))
    if entry is not None and entry[0]() is weight:
        del _ROWS[id(weight)]
