"""Torch-level utilities composed in Python of registry ops: the window functions
(``hann_window``, ``hamming_window``, ``blackman_window``, ``bartlett_window``,
``kaiser_window``) and ``set_printoptions``.

The same contract as :mod:`ferrograd._surface_more`: PyTorch's names, argument names and
defaults, built only from ops the Rust registry has, so each runs on every device those
ops do. ``ferrograd`` re-exports the functions; :func:`install` attaches nothing to
``Tensor`` (PyTorch has no such methods) and is there for the package's uniform set-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import _core, _format

Tensor = _core.Tensor

__all__ = [
    "bartlett_window",
    "blackman_window",
    "hamming_window",
    "hann_window",
    "kaiser_window",
    "set_printoptions",
]

_FLOATS = (_core.float32, _core.float64, _core.float16, _core.bfloat16)


def _window(
    name: str,
    window_length: int,
    periodic: bool,
    dtype: Any,
    device: Any,
    requires_grad: bool,
    fill: Callable[[Tensor, int], Tensor],
) -> Tensor:
    """Check the arguments, then ``fill(n, m)`` over ``n = 0 .. m-1`` of the symmetric window
    of ``m`` points (``window_length + 1`` when ``periodic``, its last point dropped)."""
    if isinstance(window_length, bool) or not isinstance(window_length, int):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if not isinstance(periodic, bool):
        raise TypeError(f"{name}(): argument 'periodic' must be bool, not {type(periodic).__name__}")
    dtype = _core.get_default_dtype() if dtype is None else dtype
    if dtype not in _FLOATS:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        out = _core.ones(window_length, dtype=dtype, device=device)
    else:
        m = window_length + 1 if periodic else window_length
        # Half types compute in float32 and are rounded once at the end.
        work = dtype if dtype in (_core.float32, _core.float64) else _core.float32
        n = _core.arange(m, dtype=work, device=device)
        out = fill(n, m)
        if periodic:
            out = out[:window_length]
        out = out.to(dtype)
    return out.requires_grad_(True) if requires_grad else out


def _cosine_sum(coeffs: tuple[float, ...]) -> Callable[[Tensor, int], Tensor]:
    """``sum_k (-1)^k a_k cos(2 pi k n / (m - 1))``, the generalised cosine window."""

    def fill(n: Tensor, m: int) -> Tensor:
        phase = n * (2.0 * math.pi / (m - 1))
        out = _core.full_like(n, coeffs[0])
        for k, a in enumerate(coeffs[1:], start=1):
            term = (phase * float(k)).cos() * a
            out = out - term if k % 2 else out + term
        return out

    return fill


def hann_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Hann window ``0.5 - 0.5 cos(2 pi n / (N - 1))``, as ``torch.hann_window``.

    ``periodic=True`` (the default, for spectral analysis) gives the first ``window_length``
    points of the symmetric window of ``window_length + 1``. A length of 0 gives an empty
    tensor, 1 gives ``[1.]``. ``dtype`` must be floating (default: the default dtype);
    ``layout`` is accepted for compatibility (strided only)."""
    return _window(
        "hann_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum((0.5, 0.5))
    )


def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Hamming window ``alpha - beta cos(2 pi n / (N - 1))``, as ``torch.hamming_window``
    (``periodic``, lengths 0 and 1, ``dtype`` as :func:`hann_window`)."""
    return _window(
        "hamming_window",
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
        _cosine_sum((float(alpha), float(beta))),
    )


def blackman_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``,
    as ``torch.blackman_window`` (``periodic``, lengths 0 and 1, ``dtype`` as
    :func:`hann_window`)."""
    return _window(
        "blackman_window",
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
        _cosine_sum((0.42, 0.5, 0.08)),
    )


def _bartlett(n: Tensor, m: int) -> Tensor:
    return 1.0 - (n * (2.0 / (m - 1)) - 1.0).abs()


def bartlett_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Bartlett (triangular) window ``1 - |2 n / (N - 1) - 1|``, as
    ``torch.bartlett_window`` (``periodic``, lengths 0 and 1, ``dtype`` as
    :func:`hann_window`)."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, _bartlett)


def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``, as
    ``torch.kaiser_window`` (``periodic``, lengths 0 and 1, ``dtype`` as
    :func:`hann_window`)."""
    beta = float(beta)

    def fill(n: Tensor, m: int) -> Tensor:
        r = n * (2.0 / (m - 1)) - 1.0
        arg = (1.0 - r * r).clamp(min=0.0).sqrt() * beta
        return arg.i0() / _core.full_like(n[:1], beta).i0()

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, fill)


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set how ``repr``/``str`` of a tensor print its values, as ``torch.set_printoptions``.

    ``precision`` digits after the point (default 4); more than ``threshold`` elements
    (default 1000; ``float('inf')`` never) are summarised with ``edgeitems`` (default 3)
    items at each end of every dimension; lines wrap at ``linewidth`` characters (default
    80). ``profile`` (``"default"``, ``"short"``: precision 2 and 2 edge items, ``"full"``:
    no summary) sets the first four before the explicit arguments apply. ``sci_mode``
    True or False forces or forbids scientific notation; None (the default, and what
    every call without it sets, as in PyTorch) chooses it from the values. Process-wide.
    """
    new = dict(_format.PRINT_OPTS)
    if profile is not None:
        if profile not in _format.PROFILES:
            raise ValueError(
                f"set_printoptions: unknown profile {profile!r} (use one of {', '.join(_format.PROFILES)})"
            )
        new.update(_format.PROFILES[profile])
    for key, v, lo in (("precision", precision, 0), ("edgeitems", edgeitems, 0), ("linewidth", linewidth, 1)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"set_printoptions: {key} must be an integer >= {lo}, got {v!r}")
        new[key] = v
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold >= 0:
            raise ValueError(f"set_printoptions: threshold must be a number >= 0, got {threshold!r}")
        new["threshold"] = threshold
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise ValueError(f"set_printoptions: sci_mode must be True, False or None, got {sci_mode!r}")
    new["sci_mode"] = sci_mode
    _format.PRINT_OPTS.update(new)


def install() -> None:
    """Nothing to attach to ``Tensor`` (the window functions are module-level only)."""
