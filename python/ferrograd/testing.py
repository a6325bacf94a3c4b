"""Test helpers with PyTorch's names: :func:`assert_close` (and the older
``assert_allclose``).

``assert_close(actual, expected)`` compares tensors, NumPy arrays, numbers, and
sequences or mappings of them (recursively), elementwise with
``|actual - expected| <= atol + rtol * |expected|``. Default tolerances depend on the
dtype, as in PyTorch: float16 ``rtol=1e-3, atol=1e-5``, bfloat16 ``1.6e-2, 1e-5``,
float32 ``1.3e-6, 1e-5``, float64 ``1e-7, 1e-7``, integers and bool exact. By default
the dtypes, devices and shapes must match too. A failure raises ``AssertionError``
saying how many elements differ and where the largest differences are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _core

Tensor = _core.Tensor

__all__ = ["assert_allclose", "assert_close"]

_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _dtype_name(d: Any) -> str:
    return str(getattr(d, "name", d)).replace("ferrograd.", "")


def _default_tol(*names: str) -> tuple[float, float]:
    tols = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def _fail(msg: str | Callable[[str], str] | None, default: str, path: str) -> None:
    where = f"The failure occurred for item {path}" if path else ""
    text = default if not where else f"{default}\n\n{where}"
    if callable(msg):
        text = msg(text)
    elif msg is not None:
        text = msg
    raise AssertionError(text)


def _as_array(x: Any) -> tuple[np.ndarray, str, str | None]:
    """``(values as float64/int/bool array, dtype name, device or None)``."""
    if isinstance(x, Tensor):
        t = x.detach()
        name = _dtype_name(t.dtype)
        if name in ("float16", "bfloat16"):
            t = t.to(_core.float32)
        return np.asarray(t.cpu().numpy()), name, str(x.device)
    arr = np.asarray(x)
    return arr, arr.dtype.name, None


def _compare_values(
    actual: Any,
    expected: Any,
    rtol: float | None,
    atol: float | None,
    equal_nan: bool,
    check_device: bool,
    check_dtype: bool,
    msg: Any,
    path: str,
) -> None:
    a, an, adev = _as_array(actual)
    e, en, edev = _as_array(expected)
    both_tensors = isinstance(actual, Tensor) and isinstance(expected, Tensor)
    if both_tensors:
        if check_device and adev != edev:
            _fail(msg, f"The values for attribute 'device' do not match: {adev} != {edev}.", path)
        if check_dtype and an != en:
            _fail(msg, f"The values for attribute 'dtype' do not match: {an} != {en}.", path)
    if a.shape != e.shape:
        _fail(msg, f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", path)
    if rtol is None or atol is None:
        rt, at = _default_tol(an, en)
        rtol = rt if rtol is None else rtol
        atol = at if atol is None else atol
    if a.dtype == np.bool_ and e.dtype == np.bool_:
        close = a == e
        af = a.astype(np.float64)
        ef = e.astype(np.float64)
    else:
        af = a.astype(np.float64)
        ef = e.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.isclose(af, ef, rtol=rtol, atol=atol, equal_nan=equal_nan)
            close |= (af == ef) & np.isinf(ef)
    if bool(close.all()):
        return
    bad = int((~close).sum())
    total = close.size
    kind = "Tensor-likes" if isinstance(actual, Tensor) or isinstance(expected, Tensor) else "Scalars"
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(af - ef)
        rel = diff / np.abs(ef)
    diff = np.where(np.isnan(diff), np.inf, diff)
    rel = np.where(np.isnan(rel), np.inf, rel)
    if total == 1:
        text = (
            f"{kind} are not close!\n\nExpected {e.reshape(-1)[0]} but got {a.reshape(-1)[0]}.\n"
            f"Absolute difference: {diff.reshape(-1)[0]} (up to {atol} allowed)\n"
            f"Relative difference: {rel.reshape(-1)[0]} (up to {rtol} allowed)"
        )
    else:
        ia = np.unravel_index(int(np.argmax(diff)), diff.shape)
        ir = np.unravel_index(int(np.argmax(rel)), rel.shape)
        text = (
            f"{kind} are not close!\n\nMismatched elements: {bad} / {total} "
            f"({100.0 * bad / total:.1f}%)\n"
            f"Greatest absolute difference: {diff[ia]} at index {tuple(int(i) for i in ia)} "
            f"(up to {atol} allowed)\n"
            f"Greatest relative difference: {rel[ir]} at index {tuple(int(i) for i in ir)} "
            f"(up to {rtol} allowed)"
        )
    _fail(msg, text, path)


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | np.ndarray | bool | int | float | complex | np.generic)


def _walk(actual: Any, expected: Any, path: str, compare: Callable[[Any, Any, str], None], msg: Any) -> None:
    if _is_leaf(actual) and _is_leaf(expected):
        compare(actual, expected, path)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(
                msg,
                f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                f"{sorted(map(str, expected))}.",
                path,
            )
        for k in expected:
            _walk(actual[k], expected[k], f"{path}[{k!r}]", compare, msg)
        return
    if (
        isinstance(actual, Sequence)
        and isinstance(expected, Sequence)
        and not isinstance(actual, str)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            _fail(msg, f"The length of the sequences do not match: {len(actual)} != {len(expected)}.", path)
        for i, (x, y) in enumerate(zip(actual, expected, strict=True)):
            _walk(x, y, f"{path}[{i}]", compare, msg)
        return
    if actual is None and expected is None:
        return
    raise TypeError(
        f"assert_close: no comparison for {type(actual).__name__} and {type(expected).__name__}"
        + (f" at item {path}" if path else "")
    )


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close (see the
    module docstring). ``rtol`` and ``atol`` must be given together."""
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {'rtol' if rtol is None else 'atol'}."
        )

    def compare(a: Any, e: Any, path: str) -> None:
        if check_stride and isinstance(a, Tensor) and isinstance(e, Tensor) and a.stride() != e.stride():
            _fail(
                msg, f"The values for attribute 'stride()' do not match: {a.stride()} != {e.stride()}.", path
            )
        _compare_values(a, e, rtol, atol, equal_nan, check_device, check_dtype, msg, path)

    _walk(actual, expected, "", compare, msg)


def assert_allclose(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    msg: str = "",
) -> None:
    """The older form: dtypes and devices may differ, NaNs compare equal by default."""
    if (rtol is None) != (atol is None):
        raise ValueError("assert_allclose: rtol and atol must be given together")
    if not isinstance(expected, Tensor) and isinstance(actual, Tensor):
        expected = _core.tensor(np.asarray(expected), dtype=actual.dtype)
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_device=False,
        check_dtype=False,
        msg=msg or None,
    )
