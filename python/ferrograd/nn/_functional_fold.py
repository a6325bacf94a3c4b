"""``F.unfold``/``F.fold``: im2col and col2im by ``index_select`` and ``scatter_add``.

Re-exported by :mod:`ferrograd.nn.functional`; composed of registry ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .. import _core
from .._grad_mode import no_grad
from .functional import _check_float, _check_tensor

Tensor = _core.Tensor

# ---------------------------------------------------------------------------
# unfold / fold (im2col and col2im by index_select / scatter_add)
# ---------------------------------------------------------------------------


def _pair2(fn: str, name: str, v: int | Sequence[int], least: int) -> tuple[int, int]:
    """An int or a pair of ints, each at least ``least``."""
    t = (v, v) if isinstance(v, int) else tuple(v)
    if len(t) != 2 or not all(isinstance(k, int) and not isinstance(k, bool) for k in t):
        raise ValueError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}")
    if any(k < least for k in t):
        raise ValueError(f"{fn}: {name} must be at least {least}, got {v!r}")
    return t  # type: ignore[return-value]


def _fold_geometry(
    fn: str,
    size: tuple[int, int],
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int],
    padding: int | Sequence[int],
    stride: int | Sequence[int],
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], list[int]]:
    """Kernel, padded size, block counts and the flat ``(kernel, block)`` index of every
    window element into the padded ``(H + 2ph) * (W + 2pw)`` plane."""
    k = _pair2(fn, "kernel_size", kernel_size, 1)
    d = _pair2(fn, "dilation", dilation, 1)
    p = _pair2(fn, "padding", padding, 0)
    s = _pair2(fn, "stride", stride, 1)
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    blocks = tuple((n - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i, n in enumerate((hp, wp)))
    if blocks[0] < 1 or blocks[1] < 1:
        raise ValueError(
            f"{fn}: the (padded) spatial size {(hp, wp)} is too small for kernel_size {k} "
            f"with dilation {d}: no block fits"
        )
    index = [
        (bi * s[0] + ki * d[0]) * wp + bj * s[1] + kj * d[1]
        for ki in range(k[0])
        for kj in range(k[1])
        for bi in range(blocks[0])
        for bj in range(blocks[1])
    ]
    return k, p, (hp, wp), index  # type: ignore[return-value]


def unfold(
    input: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    stride: int | Sequence[int] = 1,
) -> Tensor:
    """Sliding ``kernel_size`` blocks of a ``(N, C, H, W)`` (or unbatched ``(C, H, W)``)
    input as columns: ``(N, C * kh * kw, L)``, ``L`` the number of block positions
    (``im2col``). Zero ``padding`` is added on both sides of each spatial dim.

    One ``index_select`` over the flattened (padded) plane gathers every window element,
    so the gradient (a ``scatter_add`` back) and every dtype come from that op.
    """
    fn = "unfold"
    _check_tensor(fn, "input", input)
    if input.dim() not in (3, 4):
        raise ValueError(
            f"{fn}: input must be 3-D (C, H, W) or 4-D (N, C, H, W), got shape {tuple(input.shape)}"
        )
    x = input if input.dim() == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    k, p, (hp, wp), index = _fold_geometry(fn, (h, w), kernel_size, dilation, padding, stride)
    if p != (0, 0):
        x = _core.pad(x, (p[1], p[1], p[0], p[0]))
    idx = _core.tensor(index, dtype=_core.int64, device=x.device)
    cols = x.reshape(n, c, hp * wp).index_select(2, idx)
    out = cols.reshape(n, c * k[0] * k[1], len(index) // (k[0] * k[1]))
    return out if input.dim() == 4 else out.squeeze(0)


def fold(
    input: Tensor,
    output_size: int | Sequence[int],
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    stride: int | Sequence[int] = 1,
) -> Tensor:
    """The inverse arrangement of :func:`unfold` (``col2im``): columns ``(N, C * kh * kw, L)``
    (or unbatched ``(C * kh * kw, L)``) summed into a ``(N, C, *output_size)`` image, values
    of overlapping blocks added. The padding is cropped off the result.

    Built as one ``scatter_add`` into the flattened padded plane, so its gradient is the
    matching gather (``unfold`` of the output gradient).
    """
    fn = "fold"
    _check_tensor(fn, "input", input)
    if input.dim() not in (2, 3):
        raise ValueError(
            f"{fn}: input must be 2-D (C * kh * kw, L) or 3-D (N, C * kh * kw, L), got shape {tuple(input.shape)}"
        )
    size = _pair2(fn, "output_size", output_size, 1)
    x = input if input.dim() == 3 else input.unsqueeze(0)
    n, ck, blocks = x.shape
    k, p, (hp, wp), index = _fold_geometry(fn, size, kernel_size, dilation, padding, stride)
    kk = k[0] * k[1]
    if ck % kk:
        raise ValueError(
            f"{fn}: input's dim 1 ({ck}) must be divisible by the kernel's size {k[0]} * {k[1]} = {kk} "
            f"(input shape {tuple(input.shape)})"
        )
    if blocks * kk != len(index):
        raise ValueError(
            f"{fn}: input has {blocks} blocks, but output_size {size} with kernel_size {k}, padding {p} "
            f"and the given dilation and stride gives {len(index) // kk} (input shape {tuple(input.shape)})"
        )
    c = ck // kk
    src = x.reshape(n, c, kk * blocks)
    idx = _core.tensor(index, dtype=_core.int64, device=x.device).reshape(1, 1, -1).expand(n, c, len(index))
    plane = _core.zeros((n, c, hp * wp), dtype=x.dtype, device=x.device).scatter_add(2, idx, src)
    out = plane.reshape(n, c, hp, wp)
    if p != (0, 0):
        out = out[:, :, p[0] : p[0] + size[0], p[1] : p[1] + size[1]]
    return out if input.dim() == 3 else out.squeeze(0)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalisation over ``(N, C, *)`` input, per channel ``C``.

    In training (or without running statistics) the batch mean and biased
    variance over every dim but 1 normalise the input, and the running
    statistics, if given, are updated in place:
    ``running = (1 - momentum) * running + momentum * batch_stat`` (the
    unbiased batch variance for ``running_var``). Otherwise the running
    statistics normalise. Then ``* weight + bias`` per channel.
    """
    fn = "batch_norm"
    _check_float(fn, "input", input)
    if input.dim() < 2:
        raise ValueError(f"{fn}: expected input of shape (N, C, *), got {tuple(input.shape)}")
    c = input.shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(
                f"{fn}: {name} must have shape ({c},) for input of shape {tuple(input.shape)}, "
                f"got {tuple(t.shape)}"
            )
    shape = (1, c) + (1,) * (input.dim() - 2)
    dims = (0,) + tuple(range(2, input.dim()))
    if training:
        n = input.numel() // c if c else 0
        if n <= 1:
            raise ValueError(
                f"{fn}: expected more than 1 value per channel when training, got input size {tuple(input.shape)}"
            )
        mean = input.mean(dims)
        var = input.var(dims, correction=0)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype) * momentum)
                if running_var is not None:
                    # `* n / (n - 1)`, not `* (n / (n - 1))`: integer sizes stay
                    # symbolic in a graph captured with a dynamic batch, a float
                    # computed from them would keep the size it was traced at.
                    unbiased = var.detach().to(running_var.dtype) * n / (n - 1)
                    running_var.mul_(1 - momentum).add_(unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"{fn}: running_mean and running_var are needed when training=False")
        mean, var = running_mean, running_var
    out = (input - mean.reshape(shape)) * (var + eps).rsqrt().reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """Divide ``input`` by its ``p``-norm along ``dim`` (at least ``eps``).

    ``p`` may be ``inf`` (the largest magnitude), ``-inf`` (the smallest) or 0 (the
    number of non-zeros), as in ``torch.linalg.vector_norm``. A slice whose norm is
    below ``eps`` is divided by ``eps``, its gradient ``1/eps`` (not NaN: the root is
    taken of a positive sum only).
    """
    _check_float("normalize", "input", input)
    a = input.abs()
    if p == math.inf:
        norm = a.amax(dim, keepdim=True)
    elif p == -math.inf:
        norm = a.amin(dim, keepdim=True)
    elif p == 0:
        norm = (input != 0).sum(dim, keepdim=True).to(input.dtype)
    else:
        s = a.pow(p).sum(dim, keepdim=True)
        pos = s > 0
        # the root's derivative is infinite at 0: root a stand-in there, then put 0 back
        norm = _core.where(pos, _core.where(pos, s, 1.0).pow(1.0 / p), 0.0)
    return input / norm.clamp(min=eps)
