"""Transposed and 3-D convolutions composed of registry ops.

A transposed convolution is the input gradient of a forward convolution.
``conv_transpose1d`` / ``conv_transpose2d`` compute it as ``col2im``: per
group, the weight's transpose times the input gives each kernel tap's
contribution at each input position, ``fold`` adds those into the full
output plane, and a pad crops ``padding`` (and appends ``output_padding``).
``conv_transpose3d`` (``fold`` is 2-D only) spreads the input by the stride
(zeros between its elements, by a reshape and a pad), pads it by
``dilation * (k - 1) - padding`` per side (plus ``output_padding`` at the
end; negative amounts crop) and convolves it at stride 1 with the weight
flipped in space and its channels swapped per group. ``conv3d`` sums ``kD``
two-dimensional convolutions, one per depth tap, over the depth slices that
tap sees. Gradients, devices and capture come from the parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import _autocast as _amp
from .. import _core

Tensor = _core.Tensor

_IntOrInts = int | Sequence[int]


def _tuple(fn: str, name: str, v: object, n: int) -> tuple[int, ...]:
    """``v`` as ``n`` ints (one int repeated, or a sequence of ``n``)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    if not isinstance(v, Iterable):
        raise TypeError(f"{fn}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    items = list(v)
    if len(items) == 1:
        items = items * n
    if len(items) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        raise ValueError(f"{fn}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(int(x) for x in items)


def _check_operands(
    fn: str, nd: int, input: object, weight: object, bias: object
) -> tuple[Tensor, Tensor, bool]:
    """Check types, ranks and dtypes; return the batched input, the weight and whether
    the input came unbatched."""
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} must be a Tensor, got {type(t).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"{fn}: bias must be a Tensor or None, got {type(bias).__name__}")
    assert isinstance(input, Tensor) and isinstance(weight, Tensor)
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if isinstance(t, Tensor) and not t.dtype.is_floating_point:
            raise TypeError(
                f"{fn}: not implemented for {name} of dtype {t.dtype} (shape {tuple(t.shape)}); "
                "use a floating dtype"
            )
    if input.dim() not in (nd + 1, nd + 2):
        raise ValueError(
            f"{fn}: expected {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, "
            f"got input of shape {tuple(input.shape)}"
        )
    if weight.dim() != nd + 2:
        raise ValueError(f"{fn}: expected {nd + 2}-D weight, got weight of shape {tuple(weight.shape)}")
    unbatched = input.dim() == nd + 1
    return (input.unsqueeze(0) if unbatched else input), weight, unbatched


# ---------------------------------------------------------------------------
# conv3d: one conv2d per depth tap
# ---------------------------------------------------------------------------


def _conv3d_run(
    x: Tensor,
    w: Tensor,
    bias: Tensor | None,
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
) -> Tensor:
    """Unpadded 3-D convolution of a batched, already padded ``x`` (checked shapes)."""
    n, c, d, h, wd = x.shape
    kd = w.shape[2]
    od = (d - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    total: Tensor | None = None
    for t in range(kd):
        start = t * dilation[0]
        # The depth slices this tap meets: start, start + sD, ... (od of them).
        sl = x.narrow(2, start, (od - 1) * stride[0] + 1)
        if stride[0] > 1:
            sl = sl[:, :, :: stride[0]]
        planes = sl.permute(0, 2, 1, 3, 4).reshape(n * od, c, h, wd)
        y = _core.conv2d(planes, w[:, :, t], None, stride[1:], 0, dilation[1:], groups)
        total = y if total is None else total + y
    assert total is not None
    out = total.reshape(n, od, w.shape[0], total.shape[2], total.shape[3]).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1, 1)
    return out


@_amp.lower("input", "weight", "bias")
def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: _IntOrInts = 1,
    padding: str | _IntOrInts = 0,
    dilation: _IntOrInts = 1,
    groups: int = 1,
) -> Tensor:
    """3-D convolution (cross-correlation) as ``torch.nn.functional.conv3d``.

    ``input`` is ``(N, C_in, D, H, W)`` (or unbatched ``(C_in, D, H, W)``),
    ``weight`` ``(C_out, C_in/groups, kD, kH, kW)``, ``bias`` ``(C_out,)``.
    ``padding`` is an int, a triple, ``'valid'`` or ``'same'`` (stride 1).
    Composed of ``kD`` two-dimensional convolutions (one per depth tap) over
    the depth slices each tap sees, summed.
    """
    fn = "conv3d"
    x, w, unbatched = _check_operands(fn, 3, input, weight, bias)
    s = _tuple(fn, "stride", stride, 3)
    dl = _tuple(fn, "dilation", dilation, 3)
    if not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"{fn}: groups must be a positive integer, got {groups!r}")
    if any(v <= 0 for v in s) or any(v <= 0 for v in dl):
        raise ValueError(f"{fn}: stride and dilation must be positive, got stride={s}, dilation={dl}")
    k = tuple(w.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * 6
        elif padding == "same":
            if s != (1, 1, 1):
                raise ValueError(
                    f"{fn}: padding='same' is not supported for strided convolutions (stride {s})"
                )
            pads = []
            for i in (2, 1, 0):
                tot = dl[i] * (k[i] - 1)
                pads += [tot // 2, tot - tot // 2]
        else:
            raise ValueError(f"{fn}: padding string must be 'same' or 'valid', got {padding!r}")
    else:
        p = _tuple(fn, "padding", padding, 3)
        if any(v < 0 for v in p):
            raise ValueError(f"{fn}: padding must be non-negative, got {p}")
        pads = [p[2], p[2], p[1], p[1], p[0], p[0]]
    c = x.shape[1]
    if c != w.shape[1] * groups or w.shape[0] % groups != 0:
        raise ValueError(
            f"{fn}: input {tuple(input.shape)} with groups={groups} does not fit weight "
            f"{tuple(w.shape)}: expected {w.shape[1] * groups} input channels and out channels "
            "divisible by groups"
        )
    if bias is not None and tuple(bias.shape) != (w.shape[0],):
        raise ValueError(f"{fn}: bias of shape {tuple(bias.shape)} does not match weight {tuple(w.shape)}")
    if any(pads):
        x = _core.pad(x, list(pads))
    sizes = tuple(x.shape[2:])
    for i in range(3):
        if sizes[i] < dl[i] * (k[i] - 1) + 1:
            raise ValueError(
                f"{fn}: padded input {tuple(x.shape)} is smaller than the dilated kernel "
                f"(weight {tuple(w.shape)}, dilation {dl})"
            )
    out = _conv3d_run(x, w, bias, s, dl, groups)
    return out.squeeze(0) if unbatched else out


# ---------------------------------------------------------------------------
# transposed convolutions
# ---------------------------------------------------------------------------


def _spread_conv(
    x: Tensor,
    w: Tensor,
    bias: Tensor | None,
    s: tuple[int, ...],
    p: tuple[int, ...],
    op: tuple[int, ...],
    dl: tuple[int, ...],
    groups: int,
) -> Tensor:
    """Transposed convolution as a stride-1 convolution of the stride-spread, padded input
    with the flipped, channel-swapped weight (checked, batched operands)."""
    nd = x.dim() - 2
    cin = x.shape[1]
    k = tuple(w.shape[2:])
    size = tuple(x.shape[2:])
    cout = w.shape[1] * groups
    n = x.shape[0]
    # Spread the input by the stride: each element followed by s - 1 zeros.
    if any(v > 1 for v in s):
        inter: list[int] = [n, cin]
        for i in range(nd):
            inter += [size[i], 1]
        spread = x.reshape(inter)
        amounts: list[int] = []
        for i in reversed(range(nd)):
            amounts += [0, s[i] - 1, 0, 0]
        spread = _core.pad(spread, amounts)
        x = spread.reshape(n, cin, *(size[i] * s[i] for i in range(nd)))
    # Border: d(k-1) - p before; after, the same plus output_padding less the trailing zeros.
    border: list[int] = []
    for i in reversed(range(nd)):
        full = dl[i] * (k[i] - 1) - p[i]
        border += [full, full + op[i] - (s[i] - 1)]
    if any(border):
        x = _core.pad(x, border)
    # Weight (Cin, Cout/g, *k) -> (Cout, Cin/g, *k), flipped in space.
    cg, og = cin // groups, w.shape[1]
    wt = w.reshape(groups, cg, og, *k).transpose(1, 2).reshape(cout, cg, *k)
    wt = wt.flip(list(range(2, 2 + nd)))
    if nd == 1:
        return _core.conv1d(x, wt, bias, 1, 0, dl, groups)
    if nd == 2:
        return _core.conv2d(x, wt, bias, 1, 0, dl, groups)
    return _conv3d_run(x, wt, bias, (1, 1, 1), dl, groups)


def _col2im(
    x: Tensor,
    w: Tensor,
    bias: Tensor | None,
    s: tuple[int, ...],
    p: tuple[int, ...],
    op: tuple[int, ...],
    dl: tuple[int, ...],
    groups: int,
) -> Tensor:
    """1-D or 2-D transposed convolution as ``col2im``: per group, the weight's transpose
    times the input gives every kernel tap's contribution of every input position, and
    ``fold`` adds them into the full output plane, which is then cropped by ``padding``
    (and extended by ``output_padding``) (checked, batched operands)."""
    from .functional import fold

    one_d = x.dim() == 3
    if one_d:
        x, w = x.unsqueeze(2), w.unsqueeze(2)
        s, p, op, dl = (1, *s), (0, *p), (0, *op), (1, *dl)
    n, cin, h, wd = x.shape
    og, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    cg, cout, kk = cin // groups, og * groups, kh * kw
    wg = w.reshape(groups, cg, og * kk).transpose(1, 2)  # (g, og * kk, cg)
    cols = wg.matmul(x.reshape(n, groups, cg, h * wd))  # (n, g, og * kk, h * wd)
    full = ((h - 1) * s[0] + dl[0] * (kh - 1) + 1, (wd - 1) * s[1] + dl[1] * (kw - 1) + 1)
    out = fold(cols.reshape(n, cout * kk, h * wd), full, (kh, kw), dl, 0, s)
    out = _core.pad(out, [-p[1], op[1] - p[1], -p[0], op[0] - p[0]])
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1)
    return out.squeeze(2) if one_d else out


def _conv_transpose(
    fn: str,
    nd: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: _IntOrInts,
    padding: _IntOrInts,
    output_padding: _IntOrInts,
    groups: int,
    dilation: _IntOrInts,
) -> Tensor:
    x, w, unbatched = _check_operands(fn, nd, input, weight, bias)
    s = _tuple(fn, "stride", stride, nd)
    p = _tuple(fn, "padding", padding, nd)
    op = _tuple(fn, "output_padding", output_padding, nd)
    dl = _tuple(fn, "dilation", dilation, nd)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"{fn}: groups must be a positive integer, got {groups!r}")
    if any(v <= 0 for v in s) or any(v <= 0 for v in dl):
        raise ValueError(f"{fn}: stride and dilation must be positive, got stride={s}, dilation={dl}")
    if any(v < 0 for v in p) or any(v < 0 for v in op):
        raise ValueError(f"{fn}: padding and output_padding must be non-negative, got {p} and {op}")
    for i in range(nd):
        if op[i] >= s[i] and op[i] >= dl[i]:
            raise ValueError(
                f"{fn}: output padding must be smaller than either stride or dilation, got "
                f"output_padding={op}, stride={s}, dilation={dl}"
            )
    cin = x.shape[1]
    if cin != w.shape[0] or cin % groups != 0:
        raise ValueError(
            f"{fn}: input {tuple(input.shape)} ({cin} channels) does not fit weight {tuple(w.shape)} "
            f"(in_channels, out_channels/groups, *kernel) with groups={groups}"
        )
    cout = w.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise ValueError(
            f"{fn}: bias of shape {tuple(bias.shape)} does not match the {cout} output channels "
            f"of weight {tuple(w.shape)} with groups={groups}"
        )
    k = tuple(w.shape[2:])
    size = tuple(x.shape[2:])
    out_size = tuple((size[i] - 1) * s[i] - 2 * p[i] + dl[i] * (k[i] - 1) + op[i] + 1 for i in range(nd))
    if any(v <= 0 for v in out_size):
        raise ValueError(
            f"{fn}: input {tuple(input.shape)} with weight {tuple(w.shape)}, stride={s}, padding={p}, "
            f"output_padding={op}, dilation={dl} gives a non-positive output size {out_size}"
        )
    if nd < 3:
        out = _col2im(x, w, bias, s, p, op, dl, groups)
    else:
        out = _spread_conv(x, w, bias, s, p, op, dl, groups)
    return out.squeeze(0) if unbatched else out


@_amp.lower("input", "weight", "bias")
def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: _IntOrInts = 1,
    padding: _IntOrInts = 0,
    output_padding: _IntOrInts = 0,
    groups: int = 1,
    dilation: _IntOrInts = 1,
) -> Tensor:
    """1-D transposed convolution as ``torch.nn.functional.conv_transpose1d``.

    ``input`` ``(N, C_in, L)`` (or unbatched ``(C_in, L)``), ``weight``
    ``(C_in, C_out/groups, k)``, ``bias`` ``(C_out,)``. Output length
    ``(L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.
    """
    return _conv_transpose(
        "conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@_amp.lower("input", "weight", "bias")
def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: _IntOrInts = 1,
    padding: _IntOrInts = 0,
    output_padding: _IntOrInts = 0,
    groups: int = 1,
    dilation: _IntOrInts = 1,
) -> Tensor:
    """2-D transposed convolution as ``torch.nn.functional.conv_transpose2d``.

    ``input`` ``(N, C_in, H, W)`` (or unbatched ``(C_in, H, W)``), ``weight``
    ``(C_in, C_out/groups, kH, kW)``, ``bias`` ``(C_out,)``. Each output side is
    ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``:
    the gradient of ``conv2d`` with respect to its input, for the same arguments.
    """
    return _conv_transpose(
        "conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@_amp.lower("input", "weight", "bias")
def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: _IntOrInts = 1,
    padding: _IntOrInts = 0,
    output_padding: _IntOrInts = 0,
    groups: int = 1,
    dilation: _IntOrInts = 1,
) -> Tensor:
    """3-D transposed convolution as ``torch.nn.functional.conv_transpose3d``.

    ``input`` ``(N, C_in, D, H, W)`` (or unbatched), ``weight``
    ``(C_in, C_out/groups, kD, kH, kW)``, ``bias`` ``(C_out,)``.
    """
    return _conv_transpose(
        "conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups, dilation
    )
