"""``torch.utils``-style paths: :mod:`ferrograd.utils.data`, :mod:`ferrograd.utils.checkpoint`
and :mod:`ferrograd.utils.tensorboard`."""

from . import checkpoint, data, tensorboard

__all__ = ["checkpoint", "data", "tensorboard"]
