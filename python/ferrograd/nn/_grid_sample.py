"""``affine_grid`` and ``grid_sample`` composed of registry ops.

``affine_grid`` multiplies a fixed grid of normalised pixel coordinates by
each batch element's affine matrix. ``grid_sample`` maps the grid's
normalised ``(x, y)`` to pixel coordinates, applies the padding mode to the
coordinates (``border`` clamps, ``reflection`` folds them back into the
image), and reads the input at the neighbouring pixels with ``gather``:
bilinear weights are differentiable in the grid, and the gather carries
gradients back to the input. Out-of-image taps read zero under ``zeros``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core

Tensor = _core.Tensor

_MODES = ("bilinear", "nearest")
_PADDING = ("zeros", "border", "reflection")


def _base_coords(n: int, align_corners: bool, dtype: Any, device: Any) -> Tensor:
    """The ``n`` normalised pixel coordinates along one side."""
    if n == 1:
        return _core.zeros((1,), dtype=dtype, device=device)
    i = _core.arange(n, dtype=dtype, device=device)
    if align_corners:
        return i * (2.0 / (n - 1)) - 1.0
    return (i * 2.0 + 1.0) / n - 1.0


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """Sampling grid of affine maps, as ``torch.nn.functional.affine_grid``.

    ``theta`` ``(N, 2, 3)`` with ``size`` ``(N, C, H, W)`` gives an
    ``(N, H, W, 2)`` grid of ``(x, y)``; ``theta`` ``(N, 3, 4)`` with ``size``
    ``(N, C, D, H, W)`` gives ``(N, D, H, W, 3)``. The grid points are the
    pixel centres (``align_corners=False``, the default) or the corner pixels
    (``True``) in ``[-1, 1]`` coordinates, mapped by ``theta``.
    """
    fn = "affine_grid"
    if not isinstance(theta, Tensor):
        raise TypeError(f"{fn}: theta must be a Tensor, got {type(theta).__name__}")
    if not theta.dtype.is_floating_point:
        raise TypeError(f"{fn}: expected theta to have a floating point dtype, got {theta.dtype}")
    size = [int(v) for v in size]
    align = bool(align_corners)
    if len(size) == 4:
        want = (size[0], 2, 3)
    elif len(size) == 5:
        want = (size[0], 3, 4)
    else:
        raise ValueError(f"{fn}: only 4-D and 5-D sizes are supported (2-D and 3-D grids), got size {size}")
    if tuple(theta.shape) != want:
        raise ValueError(
            f"{fn}: expected theta of shape {want} for size {size}, got theta of shape {tuple(theta.shape)}"
        )
    if min(size[2:]) <= 0:
        raise ValueError(f"{fn}: expected a non-empty spatial size, got size {size}")
    dt, dev = theta.dtype, theta.device
    spatial = size[2:]
    nd = len(spatial)
    axes = [_base_coords(s, align, dt, dev) for s in spatial]  # (D,) H, W
    count = 1
    for s in spatial:
        count *= s
    # Base points (x, y[, z], 1), x varying fastest: one row per output position.
    cols = []
    for k in range(nd):
        # Coordinate k (x first) belongs to spatial dim nd-1-k.
        dim = nd - 1 - k
        shape = [1] * nd
        shape[dim] = spatial[dim]
        cols.append(axes[dim].reshape(shape).expand(*spatial).reshape(count))
    cols.append(_core.ones((count,), dtype=dt, device=dev))
    base = _core.stack(cols, 1)  # (count, nd + 1)
    grid = base.matmul(theta.transpose(1, 2))  # (N, count, nd)
    return grid.reshape(size[0], *spatial, nd)


def _unnormalize(coord: Tensor, n: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1.0) * ((n - 1) / 2.0)
    return ((coord + 1.0) * n - 1.0) / 2.0


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """Fold ``coord`` into ``[twice_low / 2, twice_high / 2]`` by reflection at the ends."""
    if twice_low == twice_high:
        return coord * 0.0
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    d = (coord - lo).abs()
    flips = (d / span).floor().detach()
    extra = d - flips * span
    even = flips.remainder(2.0) == 0
    return _core.where(even, extra + lo, (extra * -1.0) + (span + lo))


def _source(coord: Tensor, n: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Pixel coordinate of the normalised ``coord`` along a side of ``n`` pixels."""
    c = _unnormalize(coord, n, align_corners)
    if padding_mode == "border":
        c = c.clamp(0.0, float(n - 1))
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1)
        c = c.clamp(0.0, float(n - 1))
    return c


def _tap(flat: Tensor, iy: Tensor, ix: Tensor, h: int, w: int) -> tuple[Tensor, Tensor]:
    """Values of ``flat`` ``(N, C, H*W)`` at integer (as float) pixels ``iy``, ``ix`` ``(N, P)``,
    and the mask of taps inside the image."""
    inside = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
    xi = ix.clamp(0.0, float(w - 1)).to(_core.int64)
    yi = iy.clamp(0.0, float(h - 1)).to(_core.int64)
    idx = (yi * w + xi).unsqueeze(1).expand(flat.shape[0], flat.shape[1], ix.shape[1])
    return flat.gather(2, idx), inside


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """Sample ``input`` ``(N, C, H, W)`` at ``grid`` ``(N, Ho, Wo, 2)``, as ``torch.nn.functional.grid_sample``.

    The grid's last dim holds normalised ``(x, y)`` in ``[-1, 1]`` (the image's
    corner pixels' centres with ``align_corners=True``, its outer edges with
    ``False``, the default). ``mode``: ``'bilinear'`` or ``'nearest'`` (ties
    to even). ``padding_mode``: ``'zeros'``, ``'border'`` or ``'reflection'``.
    The output ``(N, C, Ho, Wo)`` is differentiable in ``input`` and (bilinear)
    in ``grid``. 4-D input only.
    """
    fn = "grid_sample"
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} must be a Tensor, got {type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise TypeError(
                f"{fn}: expected {name} to have a floating point dtype, got {t.dtype} (shape {tuple(t.shape)})"
            )
    if mode not in _MODES:
        raise ValueError(f"{fn}: mode must be one of {_MODES} (bicubic is not supported), got {mode!r}")
    if padding_mode not in _PADDING:
        raise ValueError(f"{fn}: padding_mode must be one of {_PADDING}, got {padding_mode!r}")
    if input.dim() != 4:
        raise ValueError(
            f"{fn}: only 4-D input (N, C, H, W) is supported, got input of shape {tuple(input.shape)}"
        )
    if grid.dim() != 4 or grid.shape[3] != 2 or grid.shape[0] != input.shape[0]:
        raise ValueError(
            f"{fn}: expected grid of shape (N, H_out, W_out, 2) with N = {input.shape[0]}, "
            f"got grid of shape {tuple(grid.shape)} for input of shape {tuple(input.shape)}"
        )
    if input.dtype != grid.dtype:
        raise TypeError(
            f"{fn}: expected input and grid to have the same dtype, got {input.dtype} and {grid.dtype}"
        )
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    if h == 0 or w == 0:
        raise ValueError(
            f"{fn}: expected input with non-empty spatial dims, got input of shape {tuple(input.shape)}"
        )
    align = bool(align_corners)
    p = ho * wo
    g = grid.reshape(n, p, 2)
    x = _source(g[:, :, 0], w, padding_mode, align)
    y = _source(g[:, :, 1], h, padding_mode, align)
    flat = input.reshape(n, c, h * w)
    if mode == "nearest":
        v, inside = _tap(flat, y.round().detach(), x.round().detach(), h, w)
        out = _core.where(inside.unsqueeze(1), v, 0.0)
        return out.reshape(n, c, ho, wo)
    x0 = x.floor().detach()
    y0 = y.floor().detach()
    wx1 = x - x0
    wy1 = y - y0
    wx0 = 1.0 - wx1
    wy0 = 1.0 - wy1
    acc: Tensor | None = None
    for dy, wy in ((0.0, wy0), (1.0, wy1)):
        for dx, wx in ((0.0, wx0), (1.0, wx1)):
            v, inside = _tap(flat, y0 + dy, x0 + dx, h, w)
            weight = _core.where(inside, wy * wx, 0.0).unsqueeze(1)
            term = v * weight
            acc = term if acc is None else acc + term
    assert acc is not None
    return acc.reshape(n, c, ho, wo)
