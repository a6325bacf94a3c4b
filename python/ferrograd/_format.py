"""Printing tensors the way PyTorch users read them: ``tensor([1., 2.], dtype=...)``."""

from __future__ import annotations

import numpy as np

_DEFAULT_DTYPES = {"float32", "int64", "bool"}


def tensor_repr(t) -> str:
    """The ``repr`` of a tensor: values (summarised beyond 1,000 elements), then non-default dtype/device."""
    dt = t.dtype.name
    if t.is_meta:
        # A value being captured into a graph: only its type is known.
        shape = ", ".join(str(d) for d in t.shape)
        return f"tensor(<captured>, shape=({shape}), dtype=ferrograd.{dt})"
    # A copy (made by the library): a NumPy view of the tensor itself would
    # mark its memory as shared for good, and ops reading shared memory are
    # never deferred.
    src = t.detach().clone() if dt != "bfloat16" else t.float()
    arr = src.numpy() if str(t.device) != "cpu" else np.asarray(src)
    suffix = []
    if arr.size == 0:
        body = "[]"
        if arr.ndim != 1:
            suffix.append(f"size={tuple(arr.shape)}")
    else:
        kw = {}
        if arr.dtype.kind == "f":
            finite = arr[np.isfinite(arr)].astype(np.float64)
            integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
            big = finite.size > 0 and (
                np.abs(finite).max() >= 1e8
                or (np.abs(finite[finite != 0]).min() < 1e-4 if np.any(finite != 0) else False)
            )
            if big:
                kw["formatter"] = {"float_kind": lambda v: f"{v:.4e}"}
            elif integral:
                kw["floatmode"] = "maxprec"
            else:
                kw["floatmode"] = "fixed"
        body = np.array2string(
            arr, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3, precision=4, **kw
        )
        if arr.dtype.kind == "b":
            body = body.replace("True", "True").replace("False", "False")
    if dt not in _DEFAULT_DTYPES:
        suffix.append(f"dtype=ferrograd.{dt}")
    if str(t.device) != "cpu":
        suffix.append(f"device='{t.device}'")
    fn = t.grad_fn
    if fn is not None:
        suffix.append(f"grad_fn=<{fn.name()}>")
    elif t.requires_grad:
        suffix.append("requires_grad=True")
    extra = "".join(", " + s for s in suffix)
    return f"tensor({body}{extra})"
