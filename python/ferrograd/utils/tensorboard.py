"""``torch.utils.tensorboard``'s path: the same :class:`~ferrograd.tensorboard.SummaryWriter`."""

from ..tensorboard import SummaryWriter

__all__ = ["SummaryWriter"]
