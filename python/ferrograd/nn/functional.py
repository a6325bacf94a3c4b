# ruff: noqa: F401 - re-exports
"""Layer-style functions, as in ``torch.nn.functional``; each binds to a registry op."""

from .. import _core
from .._core import (
    adaptive_avg_pool2d,
    avg_pool2d,
    conv1d,
    conv2d,
    layer_norm,
    linear,
    max_pool2d,
    rms_norm,
)

_T = _core.Tensor

relu = _T.relu
sigmoid = _T.sigmoid
tanh = _T.tanh
silu = _T.silu
gelu = _T.gelu
elu = _T.elu
leaky_relu = _T.leaky_relu
softplus = _T.softplus
softmax = _T.softmax
log_softmax = _T.log_softmax

dropout = _core.dropout

pad = _core.pad

__all__ = sorted(n for n in dir() if not n.startswith("_"))
