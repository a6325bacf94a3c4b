"""``tf.nn``: activations, losses, convolution and pooling in NHWC, dropout, embeddings.

Convolution and pooling take TF's layouts (``NHWC`` input, ``[kh, kw, in,
out]`` filters, ``strides``/``ksize`` as 4-lists) and TF's ``'SAME'``
padding rule: the total padding of a dim is
``max((ceil(in / stride) - 1) * stride + k - in, 0)``, with the smaller half
before and the larger after. They record ferrograd's NCHW kernels between
transposes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ... import _capture, _core
from ...nn import functional as F
from . import _ops
from ._framework import Tensor, _constant, _convert, _known, as_dtype, float32

__all__ = [
    "avg_pool",
    "bias_add",
    "conv2d",
    "conv2d_transpose",
    "local_response_normalization",
    "lrn",
    "dropout",
    "elu",
    "embedding_lookup",
    "l2_loss",
    "l2_normalize",
    "leaky_relu",
    "log_softmax",
    "max_pool",
    "moments",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "softplus",
    "softsign",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "top_k",
    "xw_plus_b",
]

sigmoid = _ops.sigmoid
tanh = _ops.tanh


def relu(features: Any, name: str | None = None) -> Tensor:
    """``max(features, 0)``."""
    return _ops._unary(lambda x: x.relu(), features, "Relu", name)


def relu6(features: Any, name: str | None = None) -> Tensor:
    """``min(max(features, 0), 6)``."""
    return _ops._unary(lambda x: x.clamp(0.0, 6.0), features, "Relu6", name)


def leaky_relu(features: Any, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """``features`` where positive, ``alpha * features`` elsewhere."""
    return _ops._unary(lambda x: F.leaky_relu(x, alpha), features, "LeakyRelu", name)


def elu(features: Any, name: str | None = None) -> Tensor:
    """``features`` where positive, ``exp(features) - 1`` elsewhere."""
    return _ops._unary(lambda x: F.elu(x), features, "Elu", name)


def selu(features: Any, name: str | None = None) -> Tensor:
    """``scale * elu(features, alpha)`` with SELU's constants (alpha 1.6732632…, scale 1.0507009…)."""
    return _ops._unary(lambda x: F.selu(x), features, "Selu", name)


def softsign(features: Any, name: str | None = None) -> Tensor:
    """``features / (abs(features) + 1)``."""
    return _ops._unary(lambda x: F.softsign(x), features, "Softsign", name)


class TopKV2(NamedTuple):
    """What :func:`top_k` returns: ``values`` and ``indices``, also unpacked as a pair."""

    values: Tensor
    indices: Tensor


def top_k(input: Any, k: int = 1, sorted: bool = True, name: str | None = None) -> TopKV2:  # noqa: A002
    """The ``k`` largest entries of the last dim, largest first: ``(values, indices)`` (int32 indices)."""
    t = _convert(input)
    kk = int(k)
    if t._shape is not None:
        if not t._shape:
            raise ValueError(f"top_k: {t.name} is a scalar; it needs at least one dim")
        last = t._shape[-1]
        if isinstance(last, int) and not 0 <= kk <= last:
            raise ValueError(f"top_k: k = {kk} is out of range for the last dim of {t.name} (size {last})")

    def fn(x: Any) -> tuple[Any, Any]:
        v, i = x.topk(kk, dim=-1)
        return v, i.to(_core.int32)

    values, indices = t._graph._apply(fn, (t,), "TopKV2", name, multi=True)
    return TopKV2(values, indices)


def softplus(features: Any, name: str | None = None) -> Tensor:
    """``log(1 + exp(features))``."""
    return _ops._unary(lambda x: F.softplus(x), features, "Softplus", name)


def _axis(axis: Any, dim: Any) -> int:
    a = axis if axis is not None else dim
    return -1 if a is None else int(a)


def softmax(logits: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Tensor:
    """``exp(logits) / sum(exp(logits))`` along ``axis`` (the last by default)."""
    a = _axis(axis, dim)
    return _ops._unary(lambda x: x.softmax(a), logits, "Softmax", name)


def log_softmax(logits: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Tensor:
    """``logits - log(sum(exp(logits)))`` along ``axis``."""
    a = _axis(axis, dim)
    return _ops._unary(lambda x: x.log_softmax(a), logits, "LogSoftmax", name)


def _labels_logits(sentinel: Any, labels: Any, logits: Any, what: str) -> tuple[Tensor, Tensor]:
    if sentinel is not None:
        raise ValueError(f"Only call `{what}` with named arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError(f"{what}: both labels and logits must be provided")
    lg = _convert(logits)
    lb = labels if isinstance(labels, Tensor) else _constant(labels, lg.dtype if what != "sparse" else None)
    return lb, lg


def softmax_cross_entropy_with_logits_v2(
    _sentinel: Any = None,
    labels: Any = None,
    logits: Any = None,
    dim: int = -1,
    name: str | None = None,
    axis: Any = None,
) -> Tensor:
    """Per example ``-sum(labels * log_softmax(logits))`` along ``axis``; gradients reach the labels too."""
    lb, lg = _labels_logits(_sentinel, labels, logits, "softmax_cross_entropy_with_logits_v2")
    a = _axis(axis, dim)
    return lg._graph._apply(
        lambda y, x: -(y * x.log_softmax(a)).sum(a), (lb, lg), "SoftmaxCrossEntropyWithLogits", name
    )


def softmax_cross_entropy_with_logits(
    _sentinel: Any = None,
    labels: Any = None,
    logits: Any = None,
    dim: int = -1,
    name: str | None = None,
    axis: Any = None,
) -> Tensor:
    """Per example ``-sum(labels * log_softmax(logits))``; no gradient reaches the labels (TF1's form)."""
    lb, lg = _labels_logits(_sentinel, labels, logits, "softmax_cross_entropy_with_logits")
    a = _axis(axis, dim)
    return lg._graph._apply(
        lambda y, x: -(y.detach() * x.log_softmax(a)).sum(a),
        (lb, lg),
        "SoftmaxCrossEntropyWithLogits",
        name,
    )


def sparse_softmax_cross_entropy_with_logits(
    _sentinel: Any = None, labels: Any = None, logits: Any = None, name: str | None = None
) -> Tensor:
    """Per example ``-log_softmax(logits)[label]`` for integer ``labels`` of one dim fewer."""
    lb, lg = _labels_logits(_sentinel, labels, logits, "sparse")

    def fn(y: Any, x: Any) -> Any:
        lsm = x.log_softmax(-1)
        return -lsm.gather(-1, y.to(_core.int64).unsqueeze(-1)).squeeze(-1)

    return lg._graph._apply(fn, (lb, lg), "SparseSoftmaxCrossEntropyWithLogits", name)


def sigmoid_cross_entropy_with_logits(
    _sentinel: Any = None, labels: Any = None, logits: Any = None, name: str | None = None
) -> Tensor:
    """Elementwise ``max(x, 0) - x * z + log(1 + exp(-|x|))`` for logits ``x`` and labels ``z``."""
    lb, lg = _labels_logits(_sentinel, labels, logits, "sigmoid_cross_entropy_with_logits")
    return lg._graph._apply(
        lambda z, x: x.relu() - x * z + (-x.abs()).exp().log1p(),
        (lb, lg),
        "SigmoidCrossEntropyWithLogits",
        name,
    )


def weighted_cross_entropy_with_logits(
    targets: Any = None,
    logits: Any = None,
    pos_weight: Any = 1.0,
    name: str | None = None,
    labels: Any = None,
) -> Tensor:
    """Sigmoid cross-entropy with the positive term weighted by ``pos_weight``."""
    z = labels if labels is not None else targets
    lb, lg = _labels_logits(None, z, logits, "weighted_cross_entropy_with_logits")

    def fn(zz: Any, x: Any, q: Any) -> Any:
        lw = (q - 1) * zz + 1
        return (1 - zz) * x + lw * ((-x.abs()).exp().log1p() + (-x).relu())

    return lg._graph._apply(fn, (lb, lg, pos_weight), "WeightedCrossEntropy", name)


def l2_loss(t: Any, name: str | None = None) -> Tensor:
    """``sum(t ** 2) / 2``."""
    return _ops._unary(lambda x: (x * x).sum() * 0.5, t, "L2Loss", name)


def l2_normalize(
    x: Any, axis: Any = None, epsilon: float = 1e-12, name: str | None = None, dim: Any = None
) -> Tensor:
    """``x / sqrt(max(sum(x²), epsilon))`` along ``axis``."""
    a = _axis(axis, dim)
    return _ops._unary(
        lambda v: v * (v * v).sum(a, keepdim=True).clamp(epsilon, None).rsqrt(), x, "L2Normalize", name
    )


def bias_add(value: Any, bias: Any, data_format: str | None = None, name: str | None = None) -> Tensor:
    """``value + bias`` with ``bias`` along the channel dim (the last one in NHWC)."""
    v, b = _convert(value), _convert(bias)
    if data_format in ("NCHW", "NCDHW", "NCW"):
        return v._graph._apply(
            lambda x, c: x + c.reshape((-1,) + (1,) * (x.dim() - 2)), (v, b), "BiasAdd", name
        )
    return v._graph._apply(lambda x, c: x + c, (v, b), "BiasAdd", name)


def xw_plus_b(x: Any, weights: Any, biases: Any, name: str | None = None) -> Tensor:
    """``matmul(x, weights) + biases``."""
    return bias_add(_ops.matmul(x, weights), biases, name=name)


def dropout(
    x: Any,
    keep_prob: Any = None,
    noise_shape: Any = None,
    seed: Any = None,
    name: str | None = None,
    rate: Any = None,
) -> Tensor:
    """Zero each element with probability ``1 - keep_prob`` (or ``rate``) and scale the rest by ``1/keep_prob``.

    ``keep_prob`` may be a placeholder (fed 1.0 at evaluation); a new mask is drawn at every run.
    """
    if keep_prob is None and rate is None:
        raise ValueError("dropout needs keep_prob or rate")
    t = _convert(x)
    if keep_prob is None:
        keep: Any = (1.0 - rate) if not isinstance(rate, Tensor) else _ops.subtract(1.0, rate)
    else:
        keep = keep_prob
    if isinstance(keep, (int, float)) and float(keep) == 1.0:
        return _ops.identity(t, name=name)
    ns = None if noise_shape is None else tuple(_ops._static_ints(noise_shape, "noise_shape"))

    def fn(v: Any, k: Any) -> Any:
        u = _core.rand(ns, dtype=v.dtype) if ns is not None else _core.rand_like(v)
        mask = (u < k).to(v.dtype)
        return v * mask / k

    return t._graph._apply(fn, (t, keep), "Dropout", name)


def embedding_lookup(
    params: Any,
    ids: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    validate_indices: bool = True,
    max_norm: Any = None,
) -> Tensor:
    """Rows of ``params`` at ``ids`` (``params[ids]``); a list of params is taken as one concatenated table."""
    if isinstance(params, (list, tuple)):
        params = params[0] if len(params) == 1 else _ops.concat(list(params), 0)
    return _ops.gather(params, ids, name=name or "embedding_lookup")


def moments(
    x: Any, axes: Any, shift: Any = None, name: str | None = None, keep_dims: Any = None, keepdims: Any = None
) -> tuple[Tensor, Tensor]:
    """The mean and variance of ``x`` over ``axes``."""
    keep = bool(keepdims if keepdims is not None else (keep_dims or False))
    mean = _ops.reduce_mean(x, axes, keepdims=True)
    var = _ops.reduce_mean(_ops.squared_difference(x, _ops.stop_gradient(mean)), axes, keepdims=keep)
    if not keep:
        mean = _ops.squeeze(mean, axes)
    return mean, var


def batch_normalization(
    x: Any,
    mean: Any,
    variance: Any,
    offset: Any,
    scale: Any,
    variance_epsilon: float,
    name: str | None = None,
) -> Tensor:
    """``(x - mean) / sqrt(variance + eps) * scale + offset``."""
    y = (x - mean) * _ops.rsqrt(_ops.add(variance, variance_epsilon))
    if scale is not None:
        y = y * scale
    if offset is not None:
        y = y + offset
    return y


# ----------------------------------------------------------------------------- convolution and pooling


def _four(v: Any, what: str) -> list[int]:
    if isinstance(v, (int, np.integer)):
        return [1, int(v), int(v), 1]
    v = [int(d) for d in v]
    if len(v) == 1:
        return [1, v[0], v[0], 1]
    if len(v) == 2:
        return [1, v[0], v[1], 1]
    if len(v) != 4:
        raise ValueError(f"{what} must have 1, 2 or 4 entries, got {v}")
    return v


def same_padding(size: int, k: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TF's ``'SAME'`` padding of one dim: ``(before, after)``, the larger half after."""
    eff = (k - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def _pads(
    padding: Any, hw: Sequence[int | None], k: Sequence[int], s: Sequence[int], d: Sequence[int], what: str
) -> list[int]:
    """The (left, right, top, bottom) amounts for F.pad, from TF's padding argument."""
    if isinstance(padding, str):
        p = padding.upper()
        if p == "VALID":
            return [0, 0, 0, 0]
        if p != "SAME":
            raise ValueError(f"{what}: padding must be 'SAME' or 'VALID', got {padding!r}")
        if any(v is None for v in hw):
            raise ValueError(
                f"{what}: 'SAME' padding needs the spatial size known while the graph is built, got {list(hw)}"
            )
        th, bh = same_padding(int(hw[0]), k[0], s[0], d[0])  # type: ignore[arg-type]
        lw, rw = same_padding(int(hw[1]), k[1], s[1], d[1])  # type: ignore[arg-type]
        return [lw, rw, th, bh]
    pl = [list(map(int, q)) for q in padding]
    if len(pl) != 4:
        raise ValueError(f"{what}: explicit padding needs 4 [before, after] pairs")
    (t, b), (lft, r) = pl[1], pl[2]
    return [lft, r, t, b]


def conv2d(
    input: Any = None,  # noqa: A002
    filter: Any = None,  # noqa: A002
    strides: Any = None,
    padding: Any = None,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations: Any = None,
    name: str | None = None,
    filters: Any = None,
) -> Tensor:
    """2-D convolution of ``input`` (NHWC) with ``filter`` (``[kh, kw, in, out]``), TF's strides and padding."""
    x, w = _convert(input), _convert(filter if filter is not None else filters)
    nchw = data_format == "NCHW"
    st = _four(strides if strides is not None else 1, "strides")
    dl = _four(dilations if dilations is not None else 1, "dilations")
    if nchw:
        st = [st[0], st[3], st[1], st[2]] if len(strides or [1]) == 4 else st
        s, d = (
            [st[2], st[3]],
            [dl[2], dl[3]] if dilations is not None and len(dilations) == 4 else [dl[1], dl[2]],
        )
        hw = (x._shape or [None] * 4)[2:4]
    else:
        s, d = [st[1], st[2]], [dl[1], dl[2]]
        hw = (x._shape or [None] * 4)[1:3]
    if w._shape is None:
        raise ValueError("conv2d: the filter's shape must be known")
    k = _known(w._shape, "filter shape")[:2]
    pads = _pads(padding if padding is not None else "VALID", hw, k, s, d, "conv2d")

    def fn(a: Any, f: Any) -> Any:
        if not nchw:
            a = a.permute(0, 3, 1, 2)
        if any(pads):
            a = F.pad(a, pads)
        y = _core.conv2d(a, f.permute(3, 2, 0, 1), stride=tuple(s), dilation=tuple(d))
        return y if nchw else y.permute(0, 2, 3, 1)

    return x._graph._apply(fn, (x, w), "Conv2D", name)


def local_response_normalization(
    input: Any,  # noqa: A002
    depth_radius: int = 5,
    bias: float = 1.0,
    alpha: float = 1.0,
    beta: float = 0.5,
    name: str | None = None,
) -> Tensor:
    """TF1's LRN over the last dim: ``input / (bias + alpha * sqr_sum) ** beta``, ``sqr_sum`` the sum of
    squares over the channels within ``depth_radius`` on either side."""
    x = _convert(input)
    if x._shape is not None and len(x._shape) != 4:
        raise ValueError(f"lrn: input must be 4-D (NHWC), got {x.name} of shape {x._shape}")
    r = int(depth_radius)

    def fn(v: Any) -> Any:
        sq = F.pad(v * v, [r, r])  # the channel (last) dim
        c = sq.cumsum(-1)
        zero = c.narrow(-1, 0, 1) * 0
        c = _core.cat([zero, c], -1)
        n = v.shape[-1]
        window = c.narrow(-1, 2 * r + 1, n) - c.narrow(-1, 0, n)
        return v / (window * alpha + bias) ** beta

    return x._graph._apply(fn, (x,), "LRN", name)


lrn = local_response_normalization


def conv2d_transpose(
    value: Any = None,
    filter: Any = None,  # noqa: A002
    output_shape: Any = None,
    strides: Any = None,
    padding: str = "SAME",
    data_format: str = "NHWC",
    name: str | None = None,
    input: Any = None,  # noqa: A002
    filters: Any = None,
    dilations: Any = None,
) -> Tensor:
    """The transpose (gradient) of :func:`conv2d`: NHWC ``value`` to ``output_shape`` (``[batch,
    height, width, out]``, the spatial sizes known while building), ``filter`` ``[kh, kw, out, in]``.

    As TF: ``value``'s spatial size must be what ``conv2d`` with the same strides and padding makes
    of ``output_shape`` (``ceil(out / stride)`` for SAME, ``ceil((out - k + 1) / stride)`` for VALID)."""
    x = _convert(value if value is not None else input)
    w = _convert(filter if filter is not None else filters)
    if data_format != "NHWC":
        raise ValueError(f"conv2d_transpose: only data_format='NHWC' is supported, got {data_format!r}")
    if dilations is not None and any(int(v) != 1 for v in _four(dilations, "dilations")):
        raise ValueError(f"conv2d_transpose: dilations other than 1 are not supported, got {dilations!r}")
    if w._shape is None or x._shape is None:
        raise ValueError("conv2d_transpose: the shapes of value and filter must be known")
    kh, kw, cout, cin = _known(w._shape, "filter shape")
    if isinstance(output_shape, Tensor):
        if output_shape._const is None:
            raise ValueError(
                f"conv2d_transpose: output_shape must be known while the graph is built, got {output_shape.name}"
            )
        output_shape = np.asarray(output_shape._const).tolist()
    out = [None if v is None or isinstance(v, Tensor) else int(v) for v in output_shape]
    if len(out) != 4 or out[1] is None or out[2] is None:
        raise ValueError(
            f"conv2d_transpose: output_shape must be [batch, height, width, channels], got {output_shape!r}"
        )
    if out[3] is not None and out[3] != cout:
        raise ValueError(
            f"conv2d_transpose: output_shape has {out[3]} channels but the filter {w._shape} makes {cout}"
        )
    if x._shape[3] is not None and x._shape[3] != cin:
        raise ValueError(
            f"conv2d_transpose: value {x.name} has {x._shape[3]} channels but the filter {w._shape} takes {cin}"
        )
    st = _four(strides if strides is not None else 1, "strides")
    s = [st[1], st[2]]
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"conv2d_transpose: padding must be 'SAME' or 'VALID', got {padding!r}")
    crops: list[tuple[int, int]] = []  # per spatial dim: (start of the crop, its size)
    for o, i, k, sd, what in (
        (out[1], x._shape[1], kh, s[0], "height"),
        (out[2], x._shape[2], kw, s[1], "width"),
    ):
        want = -(-o // sd) if p == "SAME" else -(-(o - k + 1) // sd)
        if i is not None and i != want:
            raise ValueError(
                f"conv2d_transpose: value {x.name} of shape {_shape_list(x._shape)} has {what} {i}, but a {p} "
                f"conv2d of stride {sd} makes {want} from the output {what} {o} (filter {w._shape})"
            )
        before = max((want - 1) * sd + k - o, 0) // 2 if p == "SAME" else 0
        crops.append((before, o))

    def fn(a: Any, f: Any) -> Any:
        y = F.conv_transpose2d(a.permute(0, 3, 1, 2), f.permute(3, 2, 0, 1), stride=tuple(s))
        for axis, (start, size) in zip((2, 3), crops, strict=True):
            full = y.shape[axis]
            y = y.narrow(axis, start, min(size, full - start))
            if y.shape[axis] < size:  # VALID with a remainder: the last rows no input reached
                pad = [0, 0, 0, 0]
                pad[(3 - axis) * 2 + 1] = size - y.shape[axis]
                y = F.pad(y, pad)
        return y.permute(0, 2, 3, 1)

    return x._graph._apply(fn, (x, w), "Conv2DBackpropInput", name)


def _shape_list(shape: Any) -> list[Any]:
    return list(shape) if shape is not None else []


def _pool(
    kind: str, value: Any, ksize: Any, strides: Any, padding: Any, data_format: str, name: str | None
) -> Tensor:
    x = _convert(value)
    nchw = data_format == "NCHW"
    kk, ss = _four(ksize, "ksize"), _four(strides, "strides")
    if nchw and isinstance(ksize, (list, tuple)) and len(ksize) == 4:
        k, s = [kk[2], kk[3]], [ss[2], ss[3]]
    else:
        k, s = [kk[1], kk[2]], [ss[1], ss[2]]
    hw = (x._shape or [None] * 4)[2:4] if nchw else (x._shape or [None] * 4)[1:3]
    pads = _pads(padding, hw, k, s, [1, 1], kind)
    counts = None
    if kind == "avg_pool" and any(pads):
        h, w = int(hw[0]), int(hw[1])  # type: ignore[arg-type]
        ones = np.pad(np.ones((h, w), np.float32), ((pads[2], pads[3]), (pads[0], pads[1])))
        oh, ow = (ones.shape[0] - k[0]) // s[0] + 1, (ones.shape[1] - k[1]) // s[1] + 1
        c = np.zeros((oh, ow), np.float32)
        for i in range(oh):
            for j in range(ow):
                c[i, j] = ones[i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]].sum()
        counts = _constant((k[0] * k[1]) / c.reshape(1, 1, oh, ow), float32)

    def fn(a: Any, cnt: Any) -> Any:
        if not nchw:
            a = a.permute(0, 3, 1, 2)
        if kind == "max_pool":
            if any(pads):
                a = F.pad(a, pads, value=-math.inf)
            y = _core.max_pool2d(a, tuple(k), tuple(s))
        else:
            if any(pads):
                a = F.pad(a, pads)
            y = _core.avg_pool2d(a, tuple(k), tuple(s))
            if cnt is not None:
                y = y * cnt
        return y if nchw else y.permute(0, 2, 3, 1)

    return x._graph._apply(fn, (x, counts), "MaxPool" if kind == "max_pool" else "AvgPool", name)


def max_pool(
    value: Any = None,
    ksize: Any = None,
    strides: Any = None,
    padding: Any = None,
    data_format: str = "NHWC",
    name: str | None = None,
    input: Any = None,  # noqa: A002
) -> Tensor:
    """Max pooling of NHWC ``value`` with TF's ``ksize``/``strides`` lists; SAME pads with -inf."""
    return _pool(
        "max_pool", value if value is not None else input, ksize, strides, padding, data_format, name
    )


def avg_pool(
    value: Any = None,
    ksize: Any = None,
    strides: Any = None,
    padding: Any = None,
    data_format: str = "NHWC",
    name: str | None = None,
    input: Any = None,  # noqa: A002
) -> Tensor:
    """Average pooling of NHWC ``value``; with SAME, each window averages its in-bounds elements only."""
    return _pool(
        "avg_pool", value if value is not None else input, ksize, strides, padding, data_format, name
    )


def zero_fraction(value: Any, name: str | None = None) -> Tensor:
    """The fraction of zeros in ``value``."""
    return _ops.reduce_mean(_ops.cast(_ops.equal(value, 0), float32), name=name)


def in_top_k(predictions: Any, targets: Any, k: int, name: str | None = None) -> Tensor:
    """Whether each target's prediction is among the row's ``k`` largest (ties count as in)."""
    p, t = _convert(predictions), _convert(targets)

    def fn(pr: Any, tg: Any) -> Any:
        own = pr.gather(-1, tg.to(_core.int64).unsqueeze(-1))
        return (pr > own).to(_core.int32).sum(-1) < k

    return p._graph._apply(fn, (p, t), "InTopKV2", name)


del as_dtype, _capture
