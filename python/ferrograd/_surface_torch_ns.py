"""Names of PyTorch's top-level ``torch`` namespace, composed of what ferrograd already has.

No kernels of their own: every function here forwards to a registry op, a
``ferrograd.nn.functional`` function or a ``Tensor`` method, so it runs wherever that one
does (eager, autograd, captured graphs, the GPU).

Covered here:

- constants ``pi``, ``e``, ``inf``, ``nan``, ``newaxis`` and :class:`Size` (a ``tuple``
  of ints with ``numel()``; ``Tensor.shape`` and ``Tensor.size()`` return one);
- the legacy tensor types ``FloatTensor``, ``DoubleTensor``, ``HalfTensor``,
  ``BFloat16Tensor``, ``LongTensor``, ``IntTensor``, ``ShortTensor``, ``CharTensor``,
  ``ByteTensor``, ``BoolTensor``: ``FloatTensor(2, 3)`` makes an uninitialised tensor of
  that shape, ``LongTensor([1, 2])`` one of that data, ``isinstance(t, FloatTensor)``
  checks dtype and device (cpu), and ``t.type(FloatTensor)`` converts;
- the functional forms PyTorch also has at top level (``torch.conv1d``,
  ``torch.batch_norm``, ``torch.kl_div``, ...), with ``torch``'s own signatures, which
  differ from ``torch.nn.functional``'s in places: the normalisation functions take
  ``weight, bias`` before the running statistics and have no defaults, ``embedding`` takes
  the weight first, losses take ``reduction`` as an int (0 none, 1 mean, 2 sum) and the
  dropout forms take ``(input, p, train)``;
- the in-place functions ``torch.relu_(t)``, ``torch.exp_(t)``, ... (the ``Tensor`` method
  of the same name, returning ``t``; where the core has no such method, as for
  ``torch.acos_`` or ``torch.sinc_``, the out-of-place function's result written into
  ``t``);
- aliases and predicates: ``detach``, ``fix``, ``absolute``, ``arctan2``, ``positive``,
  ``rsub``, ``greater``, ``greater_equal``, ``less``, ``less_equal``, ``not_equal``,
  ``swapdims``, ``is_nonzero``, ``is_signed``, ``is_same_size``, ``is_complex``,
  ``is_inference``, ``scalar_tensor``, ``get_device``.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any, SupportsIndex

from . import _core

Tensor = _core.Tensor
_Number = builtins.int | builtins.float | builtins.bool

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "Size",
    "absolute",
    "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    "alpha_dropout",
    "alpha_dropout_",
    "arctan2",
    "avg_pool1d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy_with_logits",
    "celu",
    "celu_",
    "channel_shuffle",
    "clip_",
    "constant_pad_nd",
    "conv1d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "ctc_loss",
    "detach",
    "dropout_",
    "e",
    "embedding",
    "feature_alpha_dropout",
    "feature_alpha_dropout_",
    "feature_dropout",
    "feature_dropout_",
    "fix",
    "fix_",
    "get_device",
    "greater",
    "greater_equal",
    "group_norm",
    "hardshrink",
    "hinge_embedding_loss",
    "inf",
    "instance_norm",
    "is_complex",
    "is_inference",
    "is_nonzero",
    "is_same_size",
    "is_signed",
    "kl_div",
    "layer_norm",
    "less",
    "less_equal",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "nan",
    "negative_",
    "newaxis",
    "not_equal",
    "pairwise_distance",
    "pdist",
    "pi",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "positive",
    "prelu",
    "rrelu",
    "rrelu_",
    "rsub",
    "scalar_tensor",
    "selu",
    "selu_",
    "swapdims",
    "threshold",
    "threshold_",
    "triplet_margin_loss",
]

# --- constants ---------------------------------------------------------------------

pi: float = math.pi
e: float = math.e
inf: float = math.inf
nan: float = math.nan
newaxis: None = None


class Size(tuple[int, ...]):
    """A tensor's shape: a ``tuple`` of ints, as ``torch.Size``. Slicing it and adding a
    tuple to it give a ``Size``; :meth:`numel` is the product of its sizes."""

    __slots__ = ()
    __module__ = "ferrograd"  # pickles name the public path, ferrograd.Size

    def __new__(cls, sizes: Sequence[SupportsIndex] = ()) -> Size:
        try:
            items = [i.__index__() for i in sizes]
        except (AttributeError, TypeError):
            raise TypeError(f"Size(): sizes must be a sequence of ints, got {sizes!r}") from None
        return super().__new__(cls, items)

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds (1 for ``Size([])``)."""
        return math.prod(self)

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        out = tuple.__getitem__(self, key)
        return Size(out) if isinstance(key, slice) else out

    def __add__(self, other: Any) -> Size:  # type: ignore[override]
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other: Any) -> Size:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n: SupportsIndex) -> Size:  # type: ignore[override]
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"ferrograd.Size({list(self)})"

    # ``str`` (and so f-strings and error messages) keeps the plain tuple's form.
    __str__ = tuple.__repr__

    def __reduce__(self) -> tuple[Any, tuple[tuple[int, ...]]]:
        return (Size, (tuple(self),))


# --- legacy tensor types -----------------------------------------------------------


class _LegacyTensorType(type):
    """The type of ``FloatTensor`` and its kin: calling one makes a CPU tensor of its
    dtype, and ``isinstance(t, FloatTensor)`` holds for a float32 tensor on the CPU."""

    dtype: Any

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:  # type: ignore[override]
        name = cls.__name__
        if kwargs:
            bad = ", ".join(sorted(kwargs))
            raise TypeError(f"{name}(): unexpected keyword argument(s) {bad}")
        if not args:
            return _core.empty((0,), dtype=cls.dtype)
        if builtins.all(_is_int(a) for a in args):
            shape = tuple(a.__index__() for a in args)
            if builtins.any(s < 0 for s in shape):
                raise ValueError(f"{name}(): negative size in shape {shape}")
            return _core.empty(shape, dtype=cls.dtype)
        if len(args) == 1:
            (data,) = args
            if isinstance(data, Size):
                return _core.empty(tuple(data), dtype=cls.dtype)
            if isinstance(data, Tensor):
                return data.to("cpu", dtype=cls.dtype)
            if hasattr(data, "__array__") or (
                isinstance(data, Sequence) and not isinstance(data, str | bytes)
            ):
                return _core.tensor(data, dtype=cls.dtype)
            raise TypeError(f"{name}(): data must be a sequence (got {type(data).__name__})")
        kinds = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"{name}(): expected sizes (ints) or one sequence of data, got ({kinds})")

    def __repr__(cls) -> str:
        return f"<class 'ferrograd.{cls.__name__}'>"


def _is_int(a: Any) -> bool:
    if isinstance(a, builtins.bool | Tensor):
        return False
    try:
        operator.index(a)
    except TypeError:
        return False
    return True


def _legacy(name: str, dt: Any) -> _LegacyTensorType:
    doc = (
        f"PyTorch's legacy ``torch.{name}``: ``{name}(*sizes)`` is an uninitialised CPU "
        f"tensor of dtype {dt} and that shape, ``{name}(data)`` one holding ``data``; "
        f"``isinstance(t, {name})`` is true for a CPU tensor of dtype {dt}."
    )
    return _LegacyTensorType(name, (), {"dtype": dt, "is_sparse": False, "is_cuda": False, "__doc__": doc})


FloatTensor = _legacy("FloatTensor", _core.float32)
DoubleTensor = _legacy("DoubleTensor", _core.float64)
HalfTensor = _legacy("HalfTensor", _core.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", _core.bfloat16)
LongTensor = _legacy("LongTensor", _core.int64)
IntTensor = _legacy("IntTensor", _core.int32)
ShortTensor = _legacy("ShortTensor", _core.int16)
CharTensor = _legacy("CharTensor", _core.int8)
ByteTensor = _legacy("ByteTensor", _core.uint8)
BoolTensor = _legacy("BoolTensor", _core.bool)


# --- functional forms with torch's signatures --------------------------------------


def _F() -> Any:
    from .nn import functional

    return functional


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
# The losses' ``reduction`` defaults to 0 (none): PyTorch's torch-level bindings read their
# declared default (mean) as 0, so ``torch.kl_div(a, b)`` is elementwise there.


def _reduction(op: str, reduction: Any) -> str:
    if isinstance(reduction, builtins.bool) or reduction not in _REDUCTIONS:
        raise ValueError(
            f"{op}(): reduction must be 0 (none), 1 (mean) or 2 (sum) at the torch level, got {reduction!r}"
        )
    return _REDUCTIONS[reduction]


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.conv1d``: 1-D convolution, as ``nn.functional.conv1d``."""
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.conv3d``: 3-D convolution, as ``nn.functional.conv3d``."""
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """``torch.conv_transpose1d``, as ``nn.functional.conv_transpose1d``."""
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """``torch.conv_transpose2d``, as ``nn.functional.conv_transpose2d``."""
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """``torch.conv_transpose3d``, as ``nn.functional.conv_transpose3d``."""
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def _pool_stride(stride: Any) -> Any:
    # torch.max_poolNd's stride defaults to (): the kernel size.
    if stride is None or (isinstance(stride, tuple | list) and len(stride) == 0):
        return None
    return stride


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool1d``: the values of ``nn.functional.max_pool1d`` (no indices);
    ``stride=()`` means the kernel size."""
    return _F().max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool2d``: the values of ``nn.functional.max_pool2d`` (no indices);
    ``stride=()`` means the kernel size."""
    return _F().max_pool2d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool3d``: the values of ``nn.functional.max_pool3d`` (no indices);
    ``stride=()`` means the kernel size."""
    return _F().max_pool3d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """``torch.avg_pool1d``, as ``nn.functional.avg_pool1d``."""
    return _F().avg_pool1d(input, kernel_size, _pool_stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """``torch.adaptive_avg_pool1d``, as ``nn.functional.adaptive_avg_pool1d``."""
    return _F().adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple[Tensor, Tensor]:
    """``torch.adaptive_max_pool1d``: the pair ``(values, indices)`` (always both, unlike
    ``nn.functional.adaptive_max_pool1d``)."""
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)  # type: ignore[no-any-return]


def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """``torch.batch_norm``: ``nn.functional.batch_norm`` with torch's argument order
    (weight and bias first) and no defaults; ``cudnn_enabled`` is accepted and ignored."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """``torch.instance_norm``: ``nn.functional.instance_norm`` with torch's argument order
    and no defaults; ``cudnn_enabled`` is accepted and ignored."""
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int] | int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
    cudnn_enable: bool = True,
) -> Tensor:
    """``torch.layer_norm``, as ``nn.functional.layer_norm`` (``cudnn_enable`` ignored)."""
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
    cudnn_enabled: bool = True,
) -> Tensor:
    """``torch.group_norm``, as ``nn.functional.group_norm`` (``cudnn_enabled`` ignored)."""
    return _F().group_norm(input, num_groups, weight, bias, eps)


def embedding(
    weight: Tensor,
    indices: Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """``torch.embedding``: the rows of ``weight`` named by ``indices`` (weight first,
    unlike ``nn.functional.embedding``). A ``padding_idx`` of 0 or more gets no gradient;
    a negative one means none, as at PyTorch's torch level."""
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    return _F().embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


def _dropout_args(op: str, p: Any, train: Any) -> None:
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"{op}(): dropout probability has to be between 0 and 1, but got {p}")


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.alpha_dropout(input, p, train)``, as ``nn.functional.alpha_dropout``."""
    _dropout_args("alpha_dropout", p, train)
    return _F().alpha_dropout(input, p, bool(train))


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_alpha_dropout(input, p, train)``, as
    ``nn.functional.feature_alpha_dropout``."""
    _dropout_args("feature_alpha_dropout", p, train)
    return _F().feature_alpha_dropout(input, p, bool(train))


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout_(input, p, train)``: dropout written into ``input``; returns it."""
    _dropout_args("dropout_", p, train)
    return input.copy_(_F().dropout(input, p, bool(train))) if train else input


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.alpha_dropout_(input, p, train)``: alpha dropout written into ``input``."""
    _dropout_args("alpha_dropout_", p, train)
    return input.copy_(_F().alpha_dropout(input, p, bool(train))) if train else input


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_alpha_dropout_(input, p, train)``: written into ``input``."""
    _dropout_args("feature_alpha_dropout_", p, train)
    return input.copy_(_F().feature_alpha_dropout(input, p, bool(train))) if train else input


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_dropout(input, p, train)``: whole channels of ``(N, C, *)`` zeroed
    (one draw per ``(n, c)``), survivors scaled by ``1 / (1 - p)``."""
    _dropout_args("feature_dropout", p, train)
    return _F()._feature_dropout(input, p, False) if train else input


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_dropout_(input, p, train)``: written into ``input``; returns it."""
    _dropout_args("feature_dropout_", p, train)
    return input.copy_(_F()._feature_dropout(input, p, False)) if train else input


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``torch.pixel_shuffle``, as ``nn.functional.pixel_shuffle``."""
    return _F().pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``torch.pixel_unshuffle``, as ``nn.functional.pixel_unshuffle``."""
    return _F().pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """``torch.channel_shuffle``, as ``nn.functional.channel_shuffle``."""
    return _F().channel_shuffle(input, groups)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``torch.prelu``, as ``nn.functional.prelu``."""
    return _F().prelu(input, weight)


def selu(input: Tensor) -> Tensor:
    """``torch.selu``, as ``nn.functional.selu``."""
    return _F().selu(input)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``torch.celu``, as ``nn.functional.celu``."""
    return _F().celu(input, alpha)


def rrelu(
    input: Tensor,
    lower: float = 0.125,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """``torch.rrelu``, as ``nn.functional.rrelu`` (a random slope in ``[lower, upper]``
    while training, their mean otherwise). ``generator`` must be None."""
    if generator is not None:
        raise TypeError("rrelu(): generator is not supported; seed with ferrograd.manual_seed")
    return _F().rrelu(input, lower, upper, training)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """``torch.threshold``: ``value`` where ``input <= threshold``, else ``input``."""
    return _F().threshold(input, threshold, value)


def selu_(input: Tensor) -> Tensor:
    """``torch.selu_``: SELU written into ``input``; returns it."""
    return input.copy_(_F().selu(input.clone()))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``torch.celu_``: CELU written into ``input``; returns it."""
    return input.copy_(_F().celu(input.clone(), alpha))


def rrelu_(
    input: Tensor,
    lower: float = 0.125,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """``torch.rrelu_``: RReLU written into ``input``; returns it."""
    return input.copy_(rrelu(input.clone(), lower, upper, training, generator))


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """``torch.threshold_``: :func:`threshold` written into ``input``; returns it."""
    return input.copy_(_F().threshold(input.clone(), threshold, value))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``torch.hardshrink``, as ``nn.functional.hardshrink``."""
    return _F().hardshrink(input, lambd)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``torch.bilinear``, as ``nn.functional.bilinear``."""
    return _F().bilinear(input1, input2, weight, bias)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-08) -> Tensor:
    """``torch.cosine_similarity``, as ``nn.functional.cosine_similarity``."""
    return _F().cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-06, keepdim: bool = False
) -> Tensor:
    """``torch.pairwise_distance``, as ``nn.functional.pairwise_distance``."""
    return _F().pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """``torch.pdist``, as ``nn.functional.pdist``."""
    return _F().pdist(input, p)


def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *, log_target: bool = False) -> Tensor:
    """``torch.kl_div``: ``nn.functional.kl_div`` with an int ``reduction`` (0 none,
    1 mean, 2 sum). Mean is over every element, as at PyTorch's torch level."""
    red = _reduction("kl_div", reduction)
    return _F().kl_div(input, target, reduction=red, log_target=log_target)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    pos_weight: Tensor | None = None,
    reduction: int = 0,
) -> Tensor:
    """``torch.binary_cross_entropy_with_logits``: ``pos_weight`` before ``reduction``
    (an int: 0 none, 1 mean, 2 sum)."""
    red = _reduction("binary_cross_entropy_with_logits", reduction)
    return _F().binary_cross_entropy_with_logits(input, target, weight, reduction=red, pos_weight=pos_weight)


def poisson_nll_loss(
    input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float, reduction: int
) -> Tensor:
    """``torch.poisson_nll_loss``: every argument required, ``reduction`` an int."""
    red = _reduction("poisson_nll_loss", reduction)
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=red)


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 0
) -> Tensor:
    """``torch.cosine_embedding_loss`` with an int ``reduction``."""
    red = _reduction("cosine_embedding_loss", reduction)
    return _F().cosine_embedding_loss(input1, input2, target, margin, reduction=red)


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 0
) -> Tensor:
    """``torch.margin_ranking_loss`` with an int ``reduction``."""
    red = _reduction("margin_ranking_loss", reduction)
    return _F().margin_ranking_loss(input1, input2, target, margin, reduction=red)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 0) -> Tensor:
    """``torch.hinge_embedding_loss`` with an int ``reduction``."""
    red = _reduction("hinge_embedding_loss", reduction)
    return _F().hinge_embedding_loss(input, target, margin, reduction=red)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-06,
    swap: bool = False,
    reduction: int = 0,
) -> Tensor:
    """``torch.triplet_margin_loss`` with an int ``reduction``."""
    red = _reduction("triplet_margin_loss", reduction)
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=red)


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Tensor | Sequence[int],
    target_lengths: Tensor | Sequence[int],
    blank: int = 0,
    reduction: int = 0,
    zero_infinity: bool = False,
) -> Tensor:
    """``torch.ctc_loss`` with an int ``reduction`` (mean divides each loss by its target
    length, then averages, as ``nn.functional.ctc_loss``)."""
    red = _reduction("ctc_loss", reduction)
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, red, zero_infinity)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: _Number = 0) -> Tensor:
    """``torch.constant_pad_nd``: ``nn.functional.pad`` in constant mode (pairs of
    ``(before, after)`` from the last dimension back; negative amounts crop)."""
    return _F().pad(input, list(pad), "constant", value)


# --- in-place functions: torch.X_(t, ...) is t.X_(...) ------------------------------

# Those of PyTorch's torch.X_ whose Tensor method ferrograd's core has; the rest are
# defined above or below.
_INPLACE_METHODS = (
    "abs_",
    "ceil_",
    "clamp_",
    "clamp_max_",
    "clamp_min_",
    "cos_",
    "cosh_",
    "detach_",
    "erf_",
    "erfc_",
    "exp2_",
    "exp_",
    "expm1_",
    "fill_",
    "floor_",
    "index_put_",
    "log10_",
    "log1p_",
    "log2_",
    "log_",
    "nan_to_num_",
    "neg_",
    "reciprocal_",
    "relu_",
    "round_",
    "rsqrt_",
    "sigmoid_",
    "sin_",
    "sinh_",
    "sqrt_",
    "square_",
    "tan_",
    "tanh_",
    "trunc_",
    "zero_",
)


def _inplace_function(name: str) -> Any:
    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(input).__name__}")
        getattr(input, name)(*args, **kwargs)
        return input

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}(input, ...)``: ``input.{name}(...)``; returns ``input``."
    return fn


for _n in _INPLACE_METHODS:
    globals()[_n] = _inplace_function(_n)
    __all__.append(_n)
del _n

# torch.X_ whose Tensor method the core lacks: the method when some module has added it,
# else the out-of-place function's result written into ``input`` (computed from a copy
# when ``input`` requires grad, so the recorded op does not read the overwritten value).
_INPLACE_COMPOSED = (
    "acos_",
    "acosh_",
    "addmv_",
    "arccos_",
    "arccosh_",
    "arcsin_",
    "arcsinh_",
    "arctan_",
    "arctanh_",
    "asin_",
    "asinh_",
    "atan_",
    "atanh_",
    "deg2rad_",
    "frac_",
    "i0_",
    "logit_",
    "rad2deg_",
    "sinc_",
    "xlogy_",
)


def _composed_inplace_function(name: str) -> Any:
    base = name[:-1]

    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(input).__name__}")
        method = getattr(input, name, None)
        if method is not None:
            method(*args, **kwargs)
            return input
        import ferrograd

        src = input.clone() if input.requires_grad else input
        result = getattr(ferrograd, base)(src, *args, **kwargs)
        if result.dtype != input.dtype:
            raise RuntimeError(
                f"{name}(): result type {result.dtype} can't be cast to the desired output type {input.dtype}"
            )
        return input.copy_(result)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}(input, ...)``: ``torch.{base}`` written into ``input``; returns ``input``."
    return fn


for _n in _INPLACE_COMPOSED:
    globals()[_n] = _composed_inplace_function(_n)
    __all__.append(_n)
del _n

clip_ = _inplace_function("clamp_")
clip_.__name__ = clip_.__qualname__ = "clip_"
clip_.__doc__ = "``torch.clip_``: alias of ``torch.clamp_``; returns ``input``."
negative_ = _inplace_function("neg_")
negative_.__name__ = negative_.__qualname__ = "negative_"
negative_.__doc__ = "``torch.negative_``: alias of ``torch.neg_``; returns ``input``."
fix_ = _inplace_function("trunc_")
fix_.__name__ = fix_.__qualname__ = "fix_"
fix_.__doc__ = "``torch.fix_``: alias of ``torch.trunc_``; returns ``input``."


# --- aliases and predicates --------------------------------------------------------


def _need(op: str, x: Any, arg: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' must be a Tensor, not {type(x).__name__}")
    return x


def detach(input: Tensor) -> Tensor:
    """``torch.detach``: ``input.detach()`` (shares storage, records nothing)."""
    return _need("detach", input).detach()


def fix(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``torch.fix``: alias of ``trunc`` (rounds toward zero)."""
    return _out("fix", _need("fix", input).trunc(), out)


def absolute(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``torch.absolute``: alias of ``abs``."""
    return _out("absolute", _need("absolute", input).abs(), out)


def arctan2(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``torch.arctan2``: alias of ``atan2`` (the angle of ``(other, input)``)."""
    return _out("arctan2", _need("arctan2", input).atan2(other), out)


def positive(input: Tensor) -> Tensor:
    """``torch.positive``: ``input`` itself; bool tensors raise, as in PyTorch."""
    _need("positive", input)
    if input.dtype == _core.bool:
        raise TypeError("positive(): the + operator is not supported on a bool tensor")
    return input


def rsub(input: Tensor, other: Tensor | _Number, alpha: _Number = 1) -> Tensor:
    """``torch.rsub``: ``other - alpha * input``."""
    _need("rsub", input)
    scaled = input if alpha == 1 else input * alpha
    if isinstance(other, Tensor):
        return other - scaled
    return scaled.neg() + other if isinstance(scaled, Tensor) else other - scaled


def _compare(name: str, method: str) -> Any:
    def fn(input: Tensor, other: Tensor | _Number, *, out: Tensor | None = None) -> Tensor:
        return _out(name, getattr(_need(name, input), method)(other), out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: alias of ``{method}`` (elementwise, broadcasting; a bool tensor)."
    return fn


greater = _compare("greater", "gt")
greater_equal = _compare("greater_equal", "ge")
less = _compare("less", "lt")
less_equal = _compare("less_equal", "le")
not_equal = _compare("not_equal", "ne")


def _out(op: str, result: Tensor, out: Tensor | None) -> Tensor:
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}(): argument 'out' must be a Tensor, not {type(out).__name__}")
    if tuple(out.shape) != tuple(result.shape) or out.dtype != result.dtype:
        raise RuntimeError(
            f"{op}(): out has shape {tuple(out.shape)} and dtype {out.dtype}, but the result "
            f"has shape {tuple(result.shape)} and dtype {result.dtype}"
        )
    return out.copy_(result)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``torch.swapdims``: alias of ``transpose``."""
    return _need("swapdims", input).transpose(dim0, dim1)


def is_nonzero(input: Tensor) -> bool:
    """``torch.is_nonzero``: whether a one-element tensor is not zero. Raises
    ``RuntimeError`` for more or fewer than one element."""
    n = _need("is_nonzero", input).numel()
    if n == 0:
        raise RuntimeError("is_nonzero(): Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError(
            f"is_nonzero(): Boolean value of Tensor with more than one value is ambiguous "
            f"(shape {tuple(input.shape)})"
        )
    return bool(input.item() != 0)


def is_signed(input: Tensor) -> bool:
    """``torch.is_signed``: whether the dtype holds negative values (false for ``uint8``
    and ``bool``)."""
    return _need("is_signed", input).dtype not in (_core.uint8, _core.bool)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """``torch.is_same_size``: whether the two shapes are equal."""
    return tuple(_need("is_same_size", input).shape) == tuple(_need("is_same_size", other, "other").shape)


def is_complex(input: Tensor) -> bool:
    """``torch.is_complex``: always False (ferrograd has no complex dtypes)."""
    _need("is_complex", input)
    return False


def is_inference(input: Tensor) -> bool:
    """``torch.is_inference``: always False. ferrograd's ``inference_mode`` is ``no_grad``
    plus a flag; it makes no separate inference tensors."""
    _need("is_inference", input)
    return False


def get_device(input: Tensor) -> int:
    """``torch.get_device``: -1 for a CPU tensor, as PyTorch; the device index (0 when
    the device names none) on the GPU."""
    dev = _need("get_device", input).device
    if dev.type == "cpu":
        return -1
    return dev.index or 0


def scalar_tensor(
    s: _Number,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = False,
    requires_grad: bool | None = False,
) -> Tensor:
    """``torch.scalar_tensor``: a 0-d tensor holding ``s``, of the default float dtype
    unless ``dtype`` says otherwise (also for int and bool ``s``, as PyTorch)."""
    if isinstance(s, Tensor) or not isinstance(s, builtins.int | builtins.float):
        raise TypeError(f"scalar_tensor(): argument 's' must be a Number, not {type(s).__name__}")
    dt = dtype if dtype is not None else _core.get_default_dtype()
    t = _core.tensor(s, dtype=dt)
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


# --- install -----------------------------------------------------------------------


def install() -> None:
    """Make ``Tensor.type`` accept the legacy type classes (``t.type(FloatTensor)``)."""
    core_type = Tensor.type
    if getattr(core_type, "_accepts_legacy", False):
        return

    def type(self: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:  # noqa: A001
        if isinstance(dtype, _LegacyTensorType):
            dtype = f"ferrograd.{dtype.__name__}"
        return core_type(self, dtype, non_blocking)

    type.__doc__ = core_type.__doc__
    type._accepts_legacy = True  # type: ignore[attr-defined]
    Tensor.type = type  # type: ignore[method-assign,assignment]
    _install_size()


def _install_size() -> None:
    """Make ``Tensor.shape`` and ``Tensor.size()`` return a :class:`Size`."""
    core_shape = Tensor.__dict__["shape"]
    if isinstance(core_shape, property):
        return
    core_size = Tensor.size
    shape_of = core_shape.__get__

    def shape(self: Tensor) -> Size:
        return tuple.__new__(Size, shape_of(self))

    shape.__doc__ = core_shape.__doc__

    def size(self: Tensor, dim: int | None = None) -> Any:
        if dim is None:
            return tuple.__new__(Size, shape_of(self))
        return core_size(self, dim)

    size.__doc__ = core_size.__doc__
    Tensor.shape = property(shape)  # type: ignore[assignment,method-assign]
    Tensor.size = size  # type: ignore[method-assign,assignment]
