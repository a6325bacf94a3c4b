"""Pixel shuffle and resampling: ``pixel_shuffle``/``pixel_unshuffle``, ``interpolate`` (nearest,
(bi/tri)linear, bicubic, area) and the deprecated ``upsample*`` names.

Re-exported by :mod:`ferrograd.nn.functional`; composed of registry ops.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from .. import _core
from .functional import _check_tensor

Tensor = _core.Tensor

# ---------------------------------------------------------------------------
# pixel shuffle and interpolation
# ---------------------------------------------------------------------------


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange ``(*, C * r², H, W)`` into ``(*, C, H * r, W * r)`` (sub-pixel convolution's upsampling)."""
    fn = "pixel_shuffle"
    _check_tensor(fn, "input", input)
    r = upscale_factor
    if input.dim() < 3:
        raise ValueError(
            f"{fn}: expects input to have at least 3 dimensions, but got input with {input.dim()} dimension(s)"
        )
    if r <= 0:
        raise ValueError(f"{fn}: upscale_factor must be greater than 0, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ValueError(
            f"{fn}: expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={c} is not divisible by {r * r}"
        )
    oc = c // (r * r)
    nl = len(lead)
    x = input.reshape((*lead, oc, r, r, h, w))
    perm = (*range(nl), nl, nl + 3, nl + 1, nl + 4, nl + 2)
    return x.permute(*perm).reshape((*lead, oc, h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r², H, W)`` (inverse of ``pixel_shuffle``)."""
    fn = "pixel_unshuffle"
    _check_tensor(fn, "input", input)
    r = downscale_factor
    if input.dim() < 3:
        raise ValueError(
            f"{fn}: expects input to have at least 3 dimensions, but got input with {input.dim()} dimension(s)"
        )
    if r <= 0:
        raise ValueError(f"{fn}: downscale_factor must be greater than 0, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError(
            f"{fn}: expects height and width ({h}, {w}) of input {tuple(input.shape)} to be divisible by "
            f"downscale_factor {r}"
        )
    nl = len(lead)
    x = input.reshape((*lead, c, h // r, r, w // r, r))
    perm = (*range(nl), nl, nl + 2, nl + 4, nl + 1, nl + 3)
    return x.permute(*perm).reshape((*lead, c * r * r, h // r, w // r))


_INTERP_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _index(values: Sequence[int], device: object) -> Tensor:
    return _core.tensor(list(values), dtype=_core.int64, device=device)


def _weights(values: Sequence[float], x: Tensor, dim: int) -> Tensor:
    shape = [1] * x.dim()
    shape[dim] = len(values)
    return _core.tensor(list(values), dtype=x.dtype, device=x.device).reshape(tuple(shape))


def _nearest_src(out_size: int, in_size: int, scale: float | None, exact: bool) -> list[int]:
    """Source indices of nearest interpolation, computed in float32 as PyTorch's kernels do."""
    if not exact and out_size == in_size:
        return list(range(out_size))
    if not exact and out_size == 2 * in_size:
        return [i >> 1 for i in range(out_size)]
    s = (
        np.float32(1.0 / scale)
        if scale is not None and scale > 0
        else np.float32(in_size) / np.float32(out_size)
    )
    i = np.arange(out_size)
    if exact:
        src = np.floor(((i + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(i.astype(np.float32) * s)
    return [int(v) for v in np.minimum(src.astype(np.int64), in_size - 1)]


def _linear_ratio(in_size: int, out_size: int, scale: float | None, align_corners: bool) -> float:
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _interp_linear_dim(
    x: Tensor, dim: int, out_size: int, scale: float | None, align_corners: bool
) -> Tensor:
    in_size = x.shape[dim]
    ratio = _linear_ratio(in_size, out_size, scale, align_corners)
    i0s, i1s, l0s, l1s = [], [], [], []
    for i in range(out_size):
        src = ratio * i if align_corners else max(ratio * (i + 0.5) - 0.5, 0.0)
        i0 = min(int(math.floor(src)), in_size - 1)
        lam = min(max(src - i0, 0.0), 1.0)
        i0s.append(i0)
        i1s.append(i0 + (1 if i0 < in_size - 1 else 0))
        l0s.append(1.0 - lam)
        l1s.append(lam)
    a = x.index_select(dim, _index(i0s, x.device))
    b = x.index_select(dim, _index(i1s, x.device))
    return a * _weights(l0s, x, dim) + b * _weights(l1s, x, dim)


def _cubic_weights(t: float, a: float = -0.75) -> tuple[float, float, float, float]:
    def near(u: float) -> float:  # |u| <= 1
        return ((a + 2) * u - (a + 3)) * u * u + 1

    def far(u: float) -> float:  # 1 < |u| < 2
        return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a

    return far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)


def _interp_cubic_dim(x: Tensor, dim: int, out_size: int, scale: float | None, align_corners: bool) -> Tensor:
    in_size = x.shape[dim]
    ratio = _linear_ratio(in_size, out_size, scale, align_corners)
    idx: list[list[int]] = [[], [], [], []]
    ws: list[list[float]] = [[], [], [], []]
    for i in range(out_size):
        src = ratio * i if align_corners else ratio * (i + 0.5) - 0.5
        i0 = math.floor(src)
        t = src - i0
        for k, wk in enumerate(_cubic_weights(t)):
            idx[k].append(min(max(i0 - 1 + k, 0), in_size - 1))
            ws[k].append(wk)
    out = None
    for k in range(4):
        term = x.index_select(dim, _index(idx[k], x.device)) * _weights(ws[k], x, dim)
        out = term if out is None else out + term
    assert out is not None
    return out


def _adaptive_avg_dim(x: Tensor, dim: int, out_size: int) -> Tensor:
    """Adaptive average pooling along one dim: bin ``i`` averages ``floor(i*in/out) .. ceil((i+1)*in/out)``."""
    in_size = x.shape[dim]
    parts = []
    for i in range(out_size):
        start = (i * in_size) // out_size
        end = -((-(i + 1) * in_size) // out_size)
        parts.append(x.narrow(dim, start, end - start).mean(dim, keepdim=True))
    return _core.cat(parts, dim)


def interpolate(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dims of ``(N, C, *spatial)`` input (1 to 3 spatial dims), as ``torch.nn.functional.interpolate``.

    Give either ``size`` (the output's spatial size) or ``scale_factor``
    (output size ``floor(in * scale_factor)``; the factor itself sets the
    source coordinates unless ``recompute_scale_factor=True``). Modes:
    ``'nearest'`` (PyTorch's legacy nearest: ``floor(i * in / out)``),
    ``'nearest-exact'`` (pixel centres), ``'linear'`` / ``'bilinear'`` /
    ``'trilinear'`` (with ``align_corners``), ``'bicubic'`` (A = -0.75,
    border replicated) and ``'area'`` (adaptive average pooling). Every
    mode is separable and composed of index selections and weighted sums,
    so gradients flow to the input. ``antialias`` is not supported.
    """
    fn = "interpolate"
    _check_tensor(fn, "input", input)
    modes = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
    if mode not in modes:
        raise ValueError(f"{fn}: mode must be one of {modes}, got {mode!r}")
    nd = input.dim() - 2
    if nd not in (1, 2, 3):
        raise ValueError(
            f"{fn}: expected 3-D, 4-D or 5-D input (N, C, *spatial), got {input.dim()}-D input {tuple(input.shape)}"
        )
    if mode in _INTERP_DIMS and _INTERP_DIMS[mode] != nd:
        want = _INTERP_DIMS[mode] + 2
        raise ValueError(f"{fn}: got {input.dim()}-D input, but {mode} mode needs {want}-D input")
    if mode not in _INTERP_DIMS:
        if align_corners is not None:
            raise ValueError(
                f"{fn}: align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError(f"{fn}: antialias=True is not supported")
    if mode != "nearest" and mode != "nearest-exact" and not input.dtype.is_floating_point:
        raise TypeError(f"{fn}: mode {mode!r} needs a floating point input, got {input.dtype}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{fn}: exactly one of size or scale_factor should be defined")
    spatial = tuple(input.shape[2:])
    scales: list[float | None]
    if size is not None:
        sizes = [size] * nd if isinstance(size, int) else list(size)
        if len(sizes) != nd or not all(isinstance(s, int) for s in sizes):
            raise ValueError(
                f"{fn}: size must be an int or a sequence of {nd} ints for input {tuple(input.shape)}, got {size!r}"
            )
        out_sizes = sizes
        scales = [None] * nd
    else:
        factors = (
            [float(scale_factor)] * nd
            if isinstance(scale_factor, (int, float))
            else [
                float(f)
                for f in scale_factor  # type: ignore[union-attr]
            ]
        )
        if len(factors) != nd:
            raise ValueError(
                f"{fn}: scale_factor must be a number or a sequence of {nd} numbers for input "
                f"{tuple(input.shape)}, got {scale_factor!r}"
            )
        out_sizes = [math.floor(s * f) for s, f in zip(spatial, factors, strict=True)]
        scales = [None] * nd if recompute_scale_factor else list(factors)
    if any(o <= 0 for o in out_sizes) and input.numel():
        raise ValueError(
            f"{fn}: output size {tuple(out_sizes)} must be positive (input {tuple(input.shape)})"
        )
    if any(s == 0 for s in spatial) and any(o > 0 for o in out_sizes):
        raise ValueError(f"{fn}: cannot resize an empty spatial dim (input {tuple(input.shape)})")
    x = input
    for k in range(nd):
        dim = 2 + k
        out_k, in_k, sc = out_sizes[k], spatial[k], scales[k]
        if mode in ("nearest", "nearest-exact"):
            src = _nearest_src(out_k, in_k, sc, mode == "nearest-exact")
            if src != list(range(in_k)):
                x = x.index_select(dim, _index(src, x.device))
        elif mode == "area":
            if out_k != in_k:
                x = _adaptive_avg_dim(x, dim, out_k)
        elif mode == "bicubic":
            x = _interp_cubic_dim(x, dim, out_k, sc, bool(align_corners))
        elif out_k != in_k or align_corners or (sc is not None and sc != 1.0):
            x = _interp_linear_dim(x, dim, out_k, sc, bool(align_corners))
    return x if x is not input else input.clone()


def upsample(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """Deprecated alias of :func:`interpolate`; warns (``UserWarning``) as PyTorch does."""
    warnings.warn(
        "nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
) -> Tensor:
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    warnings.warn(
        "nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
) -> Tensor:
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn(
        "nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
