"""Samplers: the order in which a :class:`DataLoader` visits a dataset's indices.

As in ``torch.utils.data``: a sampler is an iterable of indices with a
length; a batch sampler is an iterable of lists of indices. Random samplers
draw from ferrograd's generators (the default one unless ``generator=`` is
given), so ``fg.manual_seed`` makes their orders reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

from .. import _core

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "BatchSampler",
    "DistributedSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


def _check_generator(owner: str, generator: Any) -> None:
    if generator is not None and not isinstance(generator, _core.Generator):
        raise TypeError(f"{owner}: generator must be a ferrograd Generator, got {type(generator).__name__}")


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return value


class Sampler(Generic[T_co]):
    """Base class: subclasses define ``__iter__`` (the indices of one epoch)
    and, where they can, ``__len__``."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``, in order."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A random order of the dataset's indices.

    Without replacement each epoch is a permutation (``fg.randperm``) —
    repeated, each time freshly drawn, when ``num_samples`` exceeds the
    dataset's length; with ``replacement=True``, ``num_samples`` indices
    drawn uniformly (``fg.randint``).
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: _core.Generator | None = None,
    ) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r}")
        _check_generator("RandomSampler", generator)
        if num_samples is not None:
            _positive_int("RandomSampler", "num_samples", num_samples)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator

    @property
    def num_samples(self) -> int:
        """Indices per epoch (the dataset's length unless given)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, k = len(self.data_source), self.num_samples
        if n == 0:
            return iter(())
        if self.replacement:
            return iter(_core.randint(0, n, (k,), generator=self.generator).tolist())
        out: list[int] = []
        while len(out) < k:
            out.extend(_core.randperm(n, generator=self.generator).tolist())
        return iter(out[:k])

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices, in a random order each epoch."""

    def __init__(self, indices: Sequence[int], generator: _core.Generator | None = None) -> None:
        _check_generator("SubsetRandomSampler", generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        perm = _core.randperm(len(self.indices), generator=self.generator).tolist()
        return iter([self.indices[i] for i in perm])

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices drawn with probabilities proportional to
    ``weights`` (with replacement unless ``replacement=False``)."""

    def __init__(
        self,
        weights: Sequence[float] | _core.Tensor,
        num_samples: int,
        replacement: bool = True,
        generator: _core.Generator | None = None,
    ) -> None:
        _positive_int("WeightedRandomSampler", "num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise TypeError(f"WeightedRandomSampler: replacement must be a bool, got {replacement!r}")
        _check_generator("WeightedRandomSampler", generator)
        w = weights if isinstance(weights, _core.Tensor) else _core.tensor(list(weights), dtype=_core.float64)
        if w.dim() != 1:
            raise ValueError(f"WeightedRandomSampler: weights must be 1-D, got shape {list(w.shape)}")
        if not replacement and num_samples > w.shape[0]:
            raise ValueError(
                f"WeightedRandomSampler: cannot draw {num_samples} samples without replacement "
                f"from {w.shape[0]} weights"
            )
        self.weights = w.double()
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        drawn = _core.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        return iter(drawn.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter
    unless ``drop_last``)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        _positive_int("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise TypeError(f"BatchSampler: drop_last must be a bool, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(int(i))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler[int]):
    """This rank's share of the dataset's indices, for data-parallel training.

    Every rank draws the same permutation (from ``seed + epoch``; call
    :meth:`set_epoch` at the start of each epoch to reshuffle) and takes every
    ``num_replicas``-th index starting at its ``rank``. When the dataset does
    not divide evenly, ``drop_last=False`` repeats indices from the start so all
    shards have ``ceil(len / num_replicas)`` indices; ``drop_last=True`` drops
    the tail so all have ``floor(len / num_replicas)``. ``num_replicas`` and
    ``rank`` default to the process group's world size and rank.
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            from .. import distributed as dist

            if not dist.is_initialized():
                raise RuntimeError(
                    "DistributedSampler: pass num_replicas and rank, or call "
                    "fg.distributed.init_process_group() first"
                )
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank {rank} is not in [0, {num_replicas})")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = -(-n // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the shuffle seed, so that each epoch has a new order (the same on all ranks)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = _core.Generator().manual_seed(self.seed + self.epoch)
            indices: list[int] = _core.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            while len(indices) < self.total_size:
                indices += indices[: self.total_size - len(indices)]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples
