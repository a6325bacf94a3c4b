"""Layer-style functions, as in ``torch.nn.functional``; each binds to a registry op."""

from .. import _core

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
