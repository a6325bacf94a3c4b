"""Layer-style functions, as in ``torch.nn.functional``; each binds to a registry op."""

from .. import _core
from .._core import (
    adaptive_avg_pool2d,
    avg_pool2d,
    conv1d,
    conv2d,
    linear,
    max_pool2d,
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

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "elu",
    "gelu",
    "leaky_relu",
    "linear",
    "max_pool2d",
    "relu",
    "sigmoid",
    "silu",
    "softplus",
    "tanh",
]
__all__ = ["elu", "gelu", "leaky_relu", "log_softmax", "relu", "sigmoid", "silu", "softmax", "softplus", "tanh"]
dropout = _core.dropout

__all__ = ["dropout", "elu", "gelu", "leaky_relu", "relu", "sigmoid", "silu", "softplus", "tanh"]
pad = _core.pad

__all__ = ["elu", "gelu", "leaky_relu", "pad", "relu", "sigmoid", "silu", "softplus", "tanh"]
