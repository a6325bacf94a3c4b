"""Printing tensors the way PyTorch users read them: ``tensor([1., 2.], dtype=...)``."""

from __future__ import annotations

import sys

import numpy as np

_DEFAULT_DTYPES = {"float32", "int64", "bool"}

#: The options ``ferrograd.set_printoptions`` sets (PyTorch's names and defaults).
PRINT_OPTS: dict = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}

PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": float("inf"), "edgeitems": 3, "linewidth": 80},
}


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
        opts = PRINT_OPTS
        prec = int(opts["precision"])
        threshold = opts["threshold"]
        kw = {}
        if arr.dtype.kind == "f":
            shown = arr if arr.size <= threshold else _edges(arr, int(opts["edgeitems"]))
            kw["formatter"] = {"float_kind": _float_formatter(shown, prec, opts["sci_mode"])}
        body = np.array2string(
            arr,
            separator=", ",
            prefix="tensor(",
            threshold=sys.maxsize if threshold == float("inf") else int(threshold),
            edgeitems=int(opts["edgeitems"]),
            precision=prec,
            # numpy keeps room for every closing bracket on a row; PyTorch counts one.
            max_line_width=int(opts["linewidth"]) + max(arr.ndim - 1, 0),
            **kw,
        )
        if "..." in body:
            body = _pad_ellipses(body)
    if dt not in _DEFAULT_DTYPES:
        suffix.append(f"dtype=ferrograd.{dt}")
    if str(t.device) != "cpu":
        suffix.append(f"device='{t.device}'")
    fn = t.grad_fn
    if fn is not None:
        suffix.append(f"grad_fn=<{fn.name()}>")
    elif t.requires_grad:
        suffix.append("requires_grad=True")
    # PyTorch's placement of the suffixes: on the last line while it stays within the
    # line width, else on a new line under the values.
    out = "tensor(" + body
    width = int(PRINT_OPTS["linewidth"])
    last = len(out.rsplit("\n", 1)[-1])
    for s in suffix:
        if last + len(s) + 2 > width:
            out += ",\n" + " " * len("tensor(") + s
            last = len("tensor(") + len(s)
        else:
            out += ", " + s
            last += len(s) + 2
    return out + ")"


def _pad_ellipses(body: str) -> str:
    """PyTorch's spacing of a summarised row: ``1.0,  ...,  2.0`` (the ellipsis is printed
    as `` ...``); a line that is only ``...,`` (summarised rows) stays as it is."""
    lines = body.split("\n")
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped in ("...,", "..."):
            continue
        line = line.replace(", ...,", ",  ...,").replace(", ...]", ",  ...]")
        if stripped.startswith("...,"):
            line = " " + line
        lines[i] = line
    return "\n".join(lines)


def _float_formatter(arr: np.ndarray, prec: int, sci: bool | None):
    """PyTorch's choice of float format for ``arr``, as a formatter printing every value at one
    width: scientific (``1.2340e-05``) when ``sci`` or, with ``sci`` None, when the nonzero
    finite magnitudes span more than 1000x or leave [1e-4, 1e8]; else ``3.`` when every
    value is integral, ``3.1416`` otherwise."""
    finite = arr[np.isfinite(arr)].astype(np.float64)
    nz = np.abs(finite[finite != 0])
    if sci is None:
        sci = nz.size > 0 and bool(nz.max() / nz.min() > 1000.0 or nz.max() > 1e8 or nz.min() < 1e-4)
    if sci:
        fmt = f"{{:.{prec}e}}"
    elif finite.size == 0 or bool(np.all(finite == np.round(finite))):
        fmt = "{:.0f}."
    else:
        fmt = f"{{:.{prec}f}}"
    # As PyTorch: the width of the widest nonzero finite value (nan/inf are not widened for).
    width = max((len(fmt.format(v)) for v in finite[finite != 0].tolist()), default=1)

    def format_value(v: float) -> str:
        if not np.isfinite(v):
            return str(v).rjust(width)
        return fmt.format(v).rjust(width)

    return format_value


def _edges(arr: np.ndarray, edgeitems: int) -> np.ndarray:
    """The values a summarised print shows: ``edgeitems`` at each end of every dimension."""
    for ax in range(arr.ndim):
        if arr.shape[ax] > 2 * edgeitems:
            idx = np.r_[0:edgeitems, arr.shape[ax] - edgeitems : arr.shape[ax]]
            arr = np.take(arr, idx, axis=ax)
    return arr
