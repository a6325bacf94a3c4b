"""``torch.utils.data``'s path to ferrograd's datasets and loader: the same
objects as :mod:`ferrograd.data` (``fg.utils.data.DataLoader is fg.data.DataLoader``)."""

from ...data import ConcatDataset, DataLoader, Dataset, Subset, TensorDataset, default_collate, random_split

__all__ = [
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "Subset",
    "TensorDataset",
    "default_collate",
    "random_split",
]
