"""3-D pooling and max-unpooling, composed of the 2-D pooling kernels plus a reduction over depth.

``max_pool3d`` / ``avg_pool3d`` / ``adaptive_*_pool3d`` fold depth into the channels, pool each
depth slice over ``(H, W)`` with the 2-D kernel, and reduce the pooled slices over the depth
taps of each window (a stack of strided depth views and one ``max`` or ``sum``). The
``max_unpool{1,2,3}d`` functions scatter values to their recorded flat positions. Everything is
a composition of registry ops, so gradients, the GPU path and graph capture come from the
parts. Re-exported by :mod:`ferrograd.nn.functional`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _core
from ._functional_more import _bins
from .functional import _check_float, _check_tensor, adaptive_avg_pool2d, avg_pool2d, max_pool2d

Tensor = _core.Tensor

__all__ = [
    "adaptive_avg_pool3d",
    "adaptive_max_pool3d",
    "avg_pool3d",
    "max_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
]


def _triple(fn: str, name: str, v: Any, n: int = 3) -> tuple[int, ...]:
    """An int or an ``n``-sequence of ints (PyTorch also accepts a 1-sequence)."""
    if isinstance(v, bool):
        raise TypeError(f"{fn}: {name} must be an int or a {n}-tuple of ints, got {v!r}")
    if isinstance(v, int):
        return (v,) * n
    if isinstance(v, (tuple, list)) and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
        if len(v) == 1:
            return (int(v[0]),) * n
        if len(v) == n:
            return tuple(int(e) for e in v)
    raise ValueError(f"{fn}: {name} must be an int or a {n}-tuple of ints, got {v!r}")


def _input5(fn: str, input: Tensor) -> tuple[Tensor, bool]:
    """``input`` as ``(N, C, D, H, W)`` and whether it had no batch dim."""
    _check_tensor(fn, "input", input)
    if input.dim() not in (4, 5):
        raise ValueError(
            f"{fn}: expected 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input, got shape {tuple(input.shape)}"
        )
    if input.dim() == 4:
        return input.unsqueeze(0), True
    return input, False


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """PyTorch's pooling output length: the last window must start inside the input or the
    left padding."""
    num = n + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def _pool_args(
    fn: str,
    x: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, int, int]]:
    k = _triple(fn, "kernel_size", kernel_size)
    s = k if stride is None or stride == [] or stride == () else _triple(fn, "stride", stride)
    p = _triple(fn, "padding", padding)
    d = _triple(fn, "dilation", dilation)
    if min(k) <= 0:
        raise ValueError(f"{fn}: kernel_size must be positive, got {k}")
    if min(s) <= 0:
        raise ValueError(f"{fn}: stride must be positive, got {s}")
    if min(d) <= 0:
        raise ValueError(f"{fn}: dilation must be positive, got {d}")
    if min(p) < 0:
        raise ValueError(f"{fn}: padding must be non-negative, got {p}")
    for kk, pp in zip(k, p, strict=True):
        if pp > kk // 2:
            raise ValueError(f"{fn}: padding {p} must be at most half of the kernel size {k} (dilation {d})")
    dims = tuple(int(v) for v in x.shape[-3:])
    out = tuple(
        _out_size(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(dims, k, s, p, d, strict=True)
    )
    if min(out) < 1:
        raise ValueError(
            f"{fn}: input of shape {tuple(x.shape)} (dtype {x.dtype}) gives output size {out} for "
            f"kernel_size={k}, stride={s}, padding={p}, dilation={d}: output size is too small"
        )
    return k, s, p, d, (out[0], out[1], out[2])


def _depth_taps(t: Tensor, kd: int, sd: int, pd: int, dd: int, od: int, fill: float) -> Tensor:
    """``(N, C, kd, od, ...)``: for each depth tap ``j`` the slices ``o*sd - pd + j*dd`` of
    ``t`` (``(N, C, D, ...)``), positions outside ``[0, D)`` filled with ``fill``."""
    n_d = t.shape[2]
    need = (od - 1) * sd + dd * (kd - 1) + 1
    right = max(0, need - pd - n_d)
    if pd or right:
        parts = []
        if pd:
            parts.append(
                _core.full(
                    tuple(t.shape[:2]) + (pd,) + tuple(t.shape[3:]), fill, dtype=t.dtype, device=t.device
                )
            )
        parts.append(t)
        if right:
            parts.append(
                _core.full(
                    tuple(t.shape[:2]) + (right,) + tuple(t.shape[3:]), fill, dtype=t.dtype, device=t.device
                )
            )
        t = _core.cat(parts, 2)
    span = (od - 1) * sd + 1
    return _core.stack([t[:, :, j * dd : j * dd + span : sd] for j in range(kd)], 2)


def _pick(t: Tensor, j: Tensor, n: int) -> Tensor:
    """``t[:, :, j]`` elementwise (``t``: ``(N, C, n, ...)``, ``j``: ``(N, C, ...)``) by a
    one-hot select and a sum: a gather would bounds-check ``j`` on the host, a device read."""
    taps = _core.arange(n, dtype=_core.int64, device=t.device).reshape((n,) + (1,) * (t.dim() - 3))
    return _core.where(j.unsqueeze(2) == taps, t, 0).sum(2)


def _pick_axis(t: Tensor, j: Tensor, axis: int) -> Tensor:
    """``t`` indexed along ``axis`` by ``j`` (``t``'s shape without ``axis``), by a one-hot
    select and a sum (a gather would bounds-check ``j`` on the host)."""
    n = int(t.shape[axis])
    shape = [1] * t.dim()
    shape[axis] = n
    taps = _core.arange(n, dtype=_core.int64, device=t.device).reshape(tuple(shape))
    return _core.where(j.unsqueeze(axis) == taps, t, 0).sum(axis)


def _fold_depth(x: Tensor) -> Tensor:
    n, c, d, h, w = (int(v) for v in x.shape)
    return x.reshape((n, c * d, h, w))


def _unfold_depth(t: Tensor, n: int, c: int, d: int) -> Tensor:
    return t.reshape((n, c, d) + tuple(int(v) for v in t.shape[-2:]))


def max_pool3d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """3-D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (``stride`` defaults to
    ``kernel_size``; padding is -inf, at most half the kernel). With ``return_indices`` also the
    flat ``d*H*W + h*W + w`` positions of the maxima (for :func:`max_unpool3d`)."""
    fn = "max_pool3d"
    x, unbatched = _input5(fn, input)
    k, s, p, d, (od, oh, ow) = _pool_args(fn, x, kernel_size, stride, padding, dilation, ceil_mode)
    n, c, dd_, h, w = (int(v) for v in x.shape)
    if x.numel() == 0:
        out = _core.zeros((n, c, od, oh, ow), dtype=x.dtype, device=x.device)
        idx = _core.zeros((n, c, od, oh, ow), dtype=_core.int64, device=x.device)
        res: Any = (out, idx)
    else:
        pooled = max_pool2d(
            _fold_depth(x), k[1:], s[1:], p[1:], d[1:], ceil_mode=bool(ceil_mode), return_indices=True
        )
        v2 = _unfold_depth(pooled[0], n, c, dd_)
        taps = _depth_taps(v2, k[0], s[0], p[0], d[0], od, float("-inf"))
        vals, j = taps.max(2)
        if return_indices:
            i2 = _depth_taps(_unfold_depth(pooled[1], n, c, dd_), k[0], s[0], p[0], d[0], od, 0.0)
            i2 = _pick(i2, j, k[0])
            base = _core.arange(od, dtype=_core.int64, device=x.device).reshape((od, 1, 1)) * s[0] - p[0]
            depth = j * d[0] + base
            res = (vals, depth * (h * w) + i2)
        else:
            res = (vals, None)
    if unbatched:
        res = (res[0].squeeze(0), None if res[1] is None else res[1].squeeze(0))
    return (res[0], res[1]) if return_indices else res[0]


def _divisors(n: int, k: int, s: int, p: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output position: the window's length clipped to the padded input, and the number of
    real input elements in it."""
    pool = np.zeros(o)
    valid = np.zeros(o)
    for i in range(o):
        a = i * s - p
        b = min(a + k, n + p)
        pool[i] = b - a
        valid[i] = min(b, n) - max(a, 0)
    return pool, valid


def avg_pool3d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (``stride`` defaults to
    ``kernel_size``). The divisor is ``divisor_override`` when given, else the window's size
    within the padded input (``count_include_pad``) or its count of real elements."""
    fn = "avg_pool3d"
    x, unbatched = _input5(fn, input)
    _check_float(fn, "input", x)
    k, s, p, _d, (od, oh, ow) = _pool_args(fn, x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and (isinstance(divisor_override, bool) or int(divisor_override) == 0):
        raise ValueError(f"{fn}: divisor_override must be a non-zero int, got {divisor_override!r}")
    n, c, dd_, h, w = (int(v) for v in x.shape)
    if x.numel() == 0:
        out = _core.zeros((n, c, od, oh, ow), dtype=x.dtype, device=x.device)
    else:
        # Window sums over (H, W) per depth slice (zero padding), then over the depth taps.
        sums = avg_pool2d(_fold_depth(x), k[1:], s[1:], p[1:], bool(ceil_mode), True, 1)
        taps = _depth_taps(_unfold_depth(sums, n, c, dd_), k[0], s[0], p[0], 1, od, 0.0)
        total = taps.sum(2)
        if divisor_override is not None:
            out = total / float(int(divisor_override))
        else:
            per = [
                _divisors(m, kk, ss, pp, o)
                for m, kk, ss, pp, o in zip((dd_, h, w), k, s, p, (od, oh, ow), strict=True)
            ]
            which = 0 if count_include_pad else 1
            div = np.einsum("i,j,k->ijk", per[0][which], per[1][which], per[2][which])
            out = total / _core.tensor(div, dtype=x.dtype, device=x.device)
    return out.squeeze(0) if unbatched else out


def _adaptive3(fn: str, x: Tensor, output_size: Any) -> tuple[int, int, int]:
    size: list[Any]
    if isinstance(output_size, int) and not isinstance(output_size, bool):
        size = [output_size] * 3
    elif isinstance(output_size, (tuple, list)) and len(output_size) in (1, 3):
        size = list(output_size) * (3 if len(output_size) == 1 else 1)
    else:
        raise ValueError(
            f"{fn}: output_size must be an int or a 3-tuple (None keeps a size), got {output_size!r}"
        )
    dims = tuple(int(v) for v in x.shape[-3:])
    out = tuple(m if o is None else int(o) for m, o in zip(dims, size, strict=True))
    if min(out) < 0 or any(m == 0 and o for m, o in zip(dims, out, strict=True)):
        raise ValueError(f"{fn}: cannot pool input of shape {tuple(x.shape)} to output size {out}")
    if x.dim() == 5 and min(int(v) for v in x.shape[1:]) == 0:
        raise ValueError(f"{fn}: input of shape {tuple(x.shape)} has an empty non-batch dim")
    return out[0], out[1], out[2]


def adaptive_avg_pool3d(input: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """Average-pool ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to ``output_size`` (an int or a
    triple; ``None`` keeps that size): bin ``i`` along a dim of length ``L`` averages
    ``floor(i*L/o) .. ceil((i+1)*L/o)``."""
    fn = "adaptive_avg_pool3d"
    x, unbatched = _input5(fn, input)
    _check_float(fn, "input", x)
    od, oh, ow = _adaptive3(fn, x, output_size)
    n, c, dd_, _h, _w = (int(v) for v in x.shape)
    if x.numel() == 0 or od * oh * ow == 0:
        out = _core.zeros((n, c, od, oh, ow), dtype=x.dtype, device=x.device)
    else:
        a2 = _unfold_depth(adaptive_avg_pool2d(_fold_depth(x), (oh, ow)), n, c, dd_)
        if dd_ % od == 0:
            out = a2.reshape((n, c, od, dd_ // od, oh, ow)).mean(3)
        else:
            out = _core.stack([a2.narrow(2, a, b - a).mean(2) for a, b in _bins(dd_, od)], 2)
    return out.squeeze(0) if unbatched else out


def adaptive_max_pool3d(
    input: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Max-pool ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to ``output_size`` (bins as
    :func:`adaptive_avg_pool3d`); with ``return_indices`` also the flat ``d*H*W + h*W + w``
    positions of the maxima."""
    fn = "adaptive_max_pool3d"
    x, unbatched = _input5(fn, input)
    od, oh, ow = _adaptive3(fn, x, output_size)
    n, c, dd_, h, w = (int(v) for v in x.shape)
    res: Any
    if x.numel() == 0 or od * oh * ow == 0:
        res = (
            _core.zeros((n, c, od, oh, ow), dtype=x.dtype, device=x.device),
            _core.zeros((n, c, od, oh, ow), dtype=_core.int64, device=x.device),
        )
    elif dd_ % od == 0 and h % oh == 0 and w % ow == 0:
        kern = (dd_ // od, h // oh, w // ow)
        res = max_pool3d(x, kern, kern, 0, 1, False, True)
    else:
        # Separable: the maximum over a box is the maximum over depth of the maxima over rows of
        # the maxima over columns, and taking the first maximum along each axis in turn finds
        # the first one in (d, h, w) order, as PyTorch does.
        vals, idx = x, None
        for axis, n_out, mult in ((4, ow, 1), (3, oh, w), (2, od, h * w)):
            n_in = int(vals.shape[axis])
            vs, js = [], []
            for a, b in _bins(n_in, n_out):
                v, j = vals.narrow(axis, a, b - a).max(axis)
                vs.append(v)
                if return_indices:
                    pos = (j + a) * mult
                    if idx is not None:
                        pos = pos + _pick_axis(idx.narrow(axis, a, b - a), j, axis)
                    js.append(pos)
            vals = _core.stack(vs, axis)
            idx = _core.stack(js, axis) if return_indices else None
        res = (vals, idx)
    if unbatched:
        res = (res[0].squeeze(0), None if res[1] is None else res[1].squeeze(0))
    return (res[0], res[1]) if return_indices else res[0]


def _max_unpool(
    fn: str,
    nd: int,
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    output_size: Sequence[int] | None,
) -> Tensor:
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "indices", indices)
    if input.dim() not in (nd + 1, nd + 2):
        raise ValueError(f"{fn}: expected {nd + 1}-D or {nd + 2}-D input, got shape {tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError(
            f"{fn}: indices shape {tuple(indices.shape)} must match input shape {tuple(input.shape)}"
        )
    if indices.dtype != _core.int64:
        raise TypeError(f"{fn}: indices must have dtype int64, got {indices.dtype}")
    k = _triple(fn, "kernel_size", kernel_size, nd)
    s = k if stride is None or stride == [] or stride == () else _triple(fn, "stride", stride, nd)
    p = _triple(fn, "padding", padding, nd)
    in_sp = tuple(int(v) for v in input.shape[-nd:])
    default = tuple((i - 1) * ss - 2 * pp + kk for i, kk, ss, pp in zip(in_sp, k, s, p, strict=True))
    if output_size is None:
        out = default
    else:
        size = [int(v) for v in output_size]
        if len(size) == nd + 2 or (len(size) == nd + 1 and input.dim() == nd + 1):
            size = size[-nd:]
        if len(size) != nd:
            raise ValueError(f"{fn}: output_size must have {nd} elements, got {tuple(output_size)}")
        for i, (o, dflt, ss) in enumerate(zip(size, default, s, strict=True)):
            if not dflt - ss < o < dflt + ss:
                raise ValueError(
                    f"{fn}: output_size {tuple(size)} dim {i} must be between {dflt - ss + 1} and {dflt + ss - 1}"
                )
        out = tuple(size)
    lead = tuple(int(v) for v in input.shape[:-nd])
    total = int(np.prod(out))
    flat_shape = lead + (total,)
    res = _core.zeros(flat_shape, dtype=input.dtype, device=input.device)
    if input.numel():
        try:
            res = res.scatter(-1, indices.reshape(lead + (-1,)), input.reshape(lead + (-1,)))
        except IndexError as e:
            raise IndexError(
                f"{fn}: found an invalid max index for output size {out} (input shape "
                f"{tuple(input.shape)}, dtype {input.dtype}): {e}"
            ) from e
    return res.reshape(lead + out)


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Inverse of :func:`max_pool1d`: zeros of length ``(L-1)*stride - 2*padding + kernel``
    (or ``output_size``) with each value put back at its index; ``(N, C, L)`` or ``(C, L)``."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Inverse of :func:`max_pool2d`: zeros of the pre-pooling size (or ``output_size``) with
    each value put back at its flat ``h*W + w`` index; ``(N, C, H, W)`` or ``(C, H, W)``."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Inverse of :func:`max_pool3d`: zeros of the pre-pooling size (or ``output_size``) with
    each value put back at its flat ``d*H*W + h*W + w`` index; ``(N, C, D, H, W)`` or
    ``(C, D, H, W)``."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
