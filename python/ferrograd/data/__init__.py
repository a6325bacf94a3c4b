"""Datasets and batching: ``Dataset``, ``TensorDataset``, ``Subset``, ``random_split``, samplers, ``DataLoader``.

The names and behaviour follow ``torch.utils.data`` where it matters to a
training loop::

    ds = fg.data.TensorDataset(x, y)
    train, val = fg.data.random_split(ds, [0.9, 0.1], generator=fg.Generator().manual_seed(0))
    for xb, yb in fg.data.DataLoader(train, batch_size=64, shuffle=True):
        ...

Shuffling draws from ferrograd's generators (``fg.randperm``), so
``fg.manual_seed`` or an explicit ``generator=`` makes the order
reproducible. Batches of a :class:`TensorDataset` (or of a :class:`Subset` of
one) are gathered with one ``index_select`` per tensor; other datasets are
indexed sample by sample and combined by :func:`default_collate`. A
background thread prepares the next batches while the loop runs.
"""

from ._dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from ._iterable import ChainDataset, IterableDataset, WorkerInfo, get_worker_info
from ._loader import DataLoader, default_collate
from ._sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "get_worker_info",
    "random_split",
]
