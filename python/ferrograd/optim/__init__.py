"""Optimizers: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adadelta``, ``Adagrad``,
``Adamax``, ``NAdam``, ``RAdam``, ``Rprop``, ``ASGD``, ``Adafactor``, ``SparseAdam``, ``LBFGS`` and their ``Optimizer`` base;
``lr_scheduler`` and ``swa_utils``.

``SGD``, ``Adam``, ``AdamW`` and ``RMSprop`` update all parameters of a
parameter group with one call into the Rust core: a fused multi-tensor
kernel applies weight decay, the moment updates, bias correction and the
parameter update in one pass, in place, without recording autograd
history. float16 and bfloat16 parameters compute in float32 inside the
kernel and are rounded on store; their state has the parameter's dtype.
Their steps can be captured into a graph.

``Adadelta``, ``Adagrad``, ``Adamax``, ``NAdam``, ``RAdam``, ``Rprop``, ``ASGD``, ``Adafactor`` and ``SparseAdam`` (rows of
embedding tables looked up with ``sparse=True`` only) apply their update with in-place tensor ops, one parameter at a time, in the
parameter's dtype and on its device; ``LBFGS`` works on the flattened
parameters with the closure protocol. These run eagerly only.

The update formulas are PyTorch's (see each class).
"""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = [
    "ASGD",
    "LBFGS",
    "SGD",
    "SparseAdam",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "swa_utils",
]
