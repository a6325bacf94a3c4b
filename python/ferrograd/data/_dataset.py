"""Map-style datasets: ``Dataset``, ``TensorDataset``, ``Subset``, ``ConcatDataset`` and ``random_split``."""

from __future__ import annotations

import bisect
import math
import numbers
import operator
import warnings
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from .. import _core

Tensor = _core.Tensor
T_co = TypeVar("T_co", covariant=True)

__all__ = ["ConcatDataset", "Dataset", "Subset", "TensorDataset", "random_split"]


class Dataset(Generic[T_co]):
    """A map-style dataset: ``dataset[i]`` is sample ``i``, ``len(dataset)`` the number of samples.

    Subclasses implement ``__getitem__`` and (for :class:`DataLoader`,
    :func:`random_split` and :class:`Subset`) ``__len__``. ``a + b`` chains
    two datasets into a :class:`ConcatDataset`.
    """

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are slices of tensors along their first dim: ``ds[i] == (t[i] for t in tensors)``.

    All tensors must have at least one dim and the same size along dim 0.
    :class:`DataLoader` gathers a whole batch of a ``TensorDataset`` with one
    ``index_select`` per tensor.
    """

    tensors: tuple[Tensor, ...]

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, not a Tensor")
            if t.dim() == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-dimensional; samples are taken along dim 0")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(
                f"TensorDataset: all tensors must have the same size in dim 0, got shapes {shapes}"
            )
        self.tensors = tuple(tensors)

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        index = operator.index(index)
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __repr__(self) -> str:
        return f"TensorDataset({', '.join(f'<{t.dtype} {tuple(t.shape)}>' for t in self.tensors)})"


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order: ``subset[i] == dataset[indices[i]]``."""

    dataset: Dataset[T_co]
    indices: list[int]

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int] | Tensor) -> None:
        if isinstance(indices, Tensor):
            if indices.dim() != 1 or indices.dtype.is_floating_point:
                raise TypeError(
                    f"Subset: indices must be a 1-D integer tensor, got {indices.dtype} {tuple(indices.shape)}"
                )
            indices = indices.tolist()
        self.dataset = dataset
        self.indices = [operator.index(i) for i in indices]

    def __getitem__(self, index: int) -> T_co:
        return self.dataset[self.indices[operator.index(index)]]

    def __len__(self) -> int:
        return len(self.indices)

    def __repr__(self) -> str:
        return f"Subset({self.dataset!r}, {len(self.indices)} indices)"


class ConcatDataset(Dataset[T_co]):
    """Datasets one after the other: indices ``0..len(a)`` are ``a``'s, the next ones ``b``'s, and so on."""

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    def __init__(self, datasets: Sequence[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
        sizes, total = [], 0
        for d in self.datasets:
            total += len(d)  # type: ignore[arg-type]
            sizes.append(total)
        self.cumulative_sizes = sizes

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> T_co:
        index = operator.index(index)
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"ConcatDataset index {index} is out of range for length {n}")
        k = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][index - start]


def random_split(
    dataset: Dataset[T_co],
    lengths: Sequence[int | float],
    generator: _core.Generator | None = None,
) -> list[Subset[T_co]]:
    """Split ``dataset`` at random into non-overlapping :class:`Subset`\\ s of the given lengths.

    ``lengths`` are sample counts summing to ``len(dataset)``, or fractions
    summing to 1 (each subset gets ``floor(fraction * n)`` samples and the
    remainder is handed out one by one from the first subset on, as in
    PyTorch). The permutation comes from ``fg.randperm(n, generator=generator)``,
    so a seeded generator (or ``fg.manual_seed``) makes the split reproducible.
    """
    n = len(dataset)  # type: ignore[arg-type]
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths is empty")
    for x in lengths:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"random_split: lengths must be numbers, got {x!r}")
        if x < 0:
            raise ValueError(f"random_split: lengths must be non-negative, got {lengths}")
    is_fractions = (
        all(0 <= x <= 1 for x in lengths)
        and math.isclose(sum(lengths), 1.0)
        and any(not isinstance(x, numbers.Integral) for x in lengths)
    )
    if is_fractions:
        counts = [math.floor(n * x) for x in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"random_split: length of split at index {i} is 0", UserWarning, stacklevel=2)
    else:
        if not all(isinstance(x, numbers.Integral) for x in lengths):
            raise ValueError(
                f"random_split: lengths must be integers summing to {n} or fractions summing to 1, got {lengths}"
            )
        counts = [int(x) for x in lengths]
    if sum(counts) != n:
        raise ValueError(
            f"random_split: the lengths {counts} sum to {sum(counts)}, but the dataset has {n} samples"
        )
    perm: list[Any] = _core.randperm(n, generator=generator).tolist() if n else []
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[start : start + c]))
        start += c
    return out
