"""Neural-network building blocks, as ``torch.nn``: ``Module``, layers, losses, ``init``, ``functional``.

Layers compose registry ops (their gradients come from the Rust core's
VJPs); ``Parameter`` is a leaf ``Tensor`` subclass that modules register.
"""

from . import functional, init, parallel, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

__all__ = [
    "Buffer",
    "Parameter",
    "UninitializedBuffer",
    "UninitializedParameter",
    "functional",
    "init",
    "parallel",
    "utils",
    *_modules_all,
]
