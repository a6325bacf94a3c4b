"""Samplers and the DataLoader's ``sampler=`` / ``batch_sampler=`` /
``batch_size=None`` options, as in ``torch.utils.data``."""

from __future__ import annotations

from collections import Counter

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)


class _Squares(Dataset):
    """A map-style dataset that is not a TensorDataset (the per-sample path)."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int):
        return fg.tensor([float(i)]), i * i


def _tds(n=10):
    return TensorDataset(fg.arange(n).float().unsqueeze(1), fg.arange(n))


def _gen(seed):
    return fg.Generator().manual_seed(seed)


def test_sequential_and_random_orders():
    ds = _tds()
    assert list(SequentialSampler(ds)) == list(range(10)) and len(SequentialSampler(ds)) == 10
    perm = list(RandomSampler(ds, generator=_gen(3)))
    assert sorted(perm) == list(range(10))
    assert perm == fg.randperm(10, generator=_gen(3)).tolist()
    assert perm != list(range(10))


def test_random_sampler_counts():
    ds = _tds()
    drawn = list(RandomSampler(ds, replacement=True, num_samples=25, generator=_gen(0)))
    assert len(drawn) == 25 and all(0 <= i < 10 for i in drawn) and len(set(drawn)) < 25
    # Without replacement, more samples than items: whole permutations, then part of one.
    many = list(RandomSampler(ds, num_samples=23, generator=_gen(1)))
    assert len(many) == 23
    assert sorted(many[:10]) == list(range(10)) and sorted(many[10:20]) == list(range(10))
    assert len(set(many[20:])) == 3


def test_subset_random_sampler_permutes_the_given_indices():
    s = SubsetRandomSampler([2, 4, 6, 8], generator=_gen(5))
    a, b = list(s), list(s)
    assert sorted(a) == [2, 4, 6, 8] and sorted(b) == [2, 4, 6, 8] and len(s) == 4
    assert len({tuple(list(s)) for _ in range(12)}) > 1  # a fresh order each epoch


def test_weighted_sampler_follows_the_weights():
    w = [0.0, 1.0, 3.0, 0.0, 6.0]
    s = WeightedRandomSampler(w, 20000, generator=_gen(7))
    c = Counter(s)
    assert set(c) <= {1, 2, 4}
    freq = np.array([c[i] / 20000 for i in (1, 2, 4)])
    np.testing.assert_allclose(freq, [0.1, 0.3, 0.6], atol=0.02)
    no_rep = list(WeightedRandomSampler([1.0, 1.0, 1.0, 1.0], 4, replacement=False, generator=_gen(2)))
    assert sorted(no_rep) == [0, 1, 2, 3]
    with pytest.raises(
        ValueError, match="WeightedRandomSampler: cannot draw 5 samples without replacement from 4"
    ):
        WeightedRandomSampler([1.0] * 4, 5, replacement=False)
    with pytest.raises(ValueError, match="WeightedRandomSampler: weights must be 1-D"):
        WeightedRandomSampler(fg.ones(2, 2), 3)


def test_batch_sampler():
    assert list(BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    with pytest.raises(ValueError, match="BatchSampler: batch_size must be a positive integer"):
        BatchSampler(range(3), 0, False)


@pytest.mark.parametrize("make", [_tds, _Squares], ids=["tensor-dataset", "per-sample"])
def test_loader_with_a_sampler_batches_its_order(make):
    ds = make()
    sampler = SubsetRandomSampler([9, 1, 5, 3, 7, 0], generator=_gen(11))
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    assert len(loader) == 2
    order = list(SubsetRandomSampler([9, 1, 5, 3, 7, 0], generator=_gen(11)))
    got = [b[1].tolist() for b in loader]
    want = [order[:4], order[4:]]
    if make is _Squares:
        want = [[i * i for i in part] for part in want]
    assert got == want
    assert len(DataLoader(ds, batch_size=4, sampler=sampler, drop_last=True)) == 1


def test_shuffle_equals_a_random_sampler_with_the_same_seed():
    ds = _tds()
    a = [b[1].tolist() for b in DataLoader(ds, batch_size=3, shuffle=True, generator=_gen(4))]
    b = [b[1].tolist() for b in DataLoader(ds, batch_size=3, sampler=RandomSampler(ds, generator=_gen(4)))]
    assert a == b


def test_loader_with_a_batch_sampler_and_a_subset():
    ds = _tds()
    train, _ = random_split(ds, [6, 4], generator=_gen(0))
    batches = [[5, 0], [2, 3, 4], [1]]
    loader = DataLoader(train, batch_sampler=batches)
    got = [b[1].tolist() for b in loader]
    assert got == [[train.indices[i] for i in b] for b in batches]
    assert len(loader) == 3


def test_no_auto_batching_yields_samples():
    ds = _Squares()
    out = list(DataLoader(ds, batch_size=None, sampler=[3, 1]))
    assert [o[1] for o in out] == [9, 1] and out[0][0].tolist() == [3.0]
    assert len(DataLoader(ds, batch_size=None)) == 10


def test_conflicting_options_are_refused():
    ds = _tds()
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_size=4, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=[[0, 1]], drop_last=True)
    with pytest.raises(ValueError, match="batch_size=None"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="batch_size must be a positive integer or None"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(TypeError, match="RandomSampler: generator must be a ferrograd Generator"):
        RandomSampler(ds, generator=3)


def test_pytorch_loader_options_are_accepted():
    ds = _tds()
    loader = DataLoader(ds, batch_size=5, shuffle=False, pin_memory=True, persistent_workers=False, timeout=0)
    assert [b[1].tolist() for b in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_a_user_sampler_subclass():
    class Evens(Sampler[int]):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

        def __len__(self):
            return (self.n + 1) // 2

    loader = DataLoader(_tds(), batch_size=2, sampler=Evens(10))
    assert [b[1].tolist() for b in loader] == [[0, 2], [4, 6], [8]]
    assert len(loader) == 3


def test_workers_with_a_sampler():
    ds = _tds()
    order = [8, 6, 4, 2, 0]
    got = [b[1].tolist() for b in DataLoader(ds, batch_size=2, sampler=order, num_workers=1)]
    assert got == [[8, 6], [4, 2], [0]]
