"""Optimizers: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop`` and their ``Optimizer`` base.

Each ``step()`` updates all parameters of a parameter group with one call
into the Rust core: a fused multi-tensor kernel applies weight decay, the
moment updates, bias correction and the parameter update in one pass, in
place, without recording autograd history. The update formulas are
PyTorch's (see each class).

float16 and bfloat16 parameters compute in float32 inside the kernel and
are rounded on store; their state has the parameter's dtype.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
