"""``torch.utils``-style paths: :mod:`ferrograd.utils.data` and :mod:`ferrograd.utils.checkpoint`."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
