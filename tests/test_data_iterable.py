"""``IterableDataset`` / ``ChainDataset`` through ``DataLoader``: batching in stream order,
``drop_last``, ``batch_size=None``, ``len``, worker processes sharding with
``get_worker_info`` (round-robin order as PyTorch's), errors from workers, and the
arguments an iterable dataset refuses."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.data import ChainDataset, DataLoader, IterableDataset, get_worker_info


class Stream(IterableDataset):
    """0..n-1 as float32 tensors; with workers, worker w takes the items i with i % k == w."""

    def __init__(self, n: int, sized: bool = False) -> None:
        self.n = n
        self.sized = sized

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield fg.tensor([float(i), 2.0 * i])

    def __len__(self) -> int:
        if not self.sized:
            raise TypeError("no len")
        return self.n


class Pairs(IterableDataset):
    def __iter__(self):
        for i in range(5):
            yield {"x": fg.tensor(float(i)), "y": i}


class Failing(IterableDataset):
    def __iter__(self):
        yield fg.tensor(1.0)
        raise KeyError("bad sample 1")


def _rows(batches):
    return [np.asarray(b.numpy()) for b in batches]


def test_batches_follow_the_stream():
    got = _rows(DataLoader(Stream(7), batch_size=3))
    assert [r.shape for r in got] == [(3, 2), (3, 2), (1, 2)]
    np.testing.assert_array_equal(np.concatenate(got)[:, 0], np.arange(7))
    got = _rows(DataLoader(Stream(7), batch_size=3, drop_last=True))
    assert [r.shape for r in got] == [(3, 2), (3, 2)]
    assert get_worker_info() is None


def test_no_auto_batching_and_dict_samples():
    items = list(DataLoader(Stream(3), batch_size=None))
    assert [tuple(t.shape) for t in items] == [(2,)] * 3
    (b0, b1) = list(DataLoader(Pairs(), batch_size=3))
    assert b0["x"].tolist() == [0.0, 1.0, 2.0] and b0["y"].tolist() == [0, 1, 2]
    assert b1["y"].tolist() == [3, 4]
    out = list(DataLoader(Pairs(), batch_size=2, collate_fn=lambda b: [s["y"] for s in b]))
    assert out == [[0, 1], [2, 3], [4]]


def test_len_and_chain():
    assert len(DataLoader(Stream(7, sized=True), batch_size=3)) == 3
    assert len(DataLoader(Stream(7, sized=True), batch_size=3, drop_last=True)) == 2
    with pytest.raises(TypeError):
        len(DataLoader(Stream(7), batch_size=3))
    chain = Stream(2) + Stream(3)
    assert isinstance(chain, ChainDataset)
    got = np.concatenate(_rows(DataLoader(chain, batch_size=2)))[:, 0]
    np.testing.assert_array_equal(got, [0, 1, 0, 1, 2])
    assert len(ChainDataset([Stream(2, True), Stream(3, True)])) == 5
    with pytest.raises(TypeError, match="only supports IterableDataset"):
        ChainDataset([fg.data.TensorDataset(fg.zeros(2))])


def test_refused_options():
    for kw, name in (
        ({"shuffle": True}, "shuffle"),
        ({"sampler": [0, 1]}, "sampler"),
        ({"batch_sampler": [[0]]}, "batch_sampler"),
    ):
        with pytest.raises(ValueError, match=f"expected unspecified {name} option"):
            DataLoader(Stream(3), **kw)
    with pytest.raises(NotImplementedError, match="iterated, not indexed"):
        Stream(3)[0]


def test_early_close():
    it = iter(DataLoader(Stream(100), batch_size=4))
    next(it)
    it.close()
    with pytest.raises(StopIteration):
        next(it)


def test_workers_round_robin_and_sharding():
    # worker 0 has 0, 2, 4, 6, 8; worker 1 has 1, 3, 5, 7: batches of 2 alternate between them
    got = _rows(DataLoader(Stream(9), batch_size=2, num_workers=2, multiprocessing_context="fork"))
    firsts = [r[:, 0].tolist() for r in got]
    assert firsts == [[0, 2], [1, 3], [4, 6], [5, 7], [8]]


def test_worker_error_is_raised_in_the_loop():
    loader = DataLoader(Failing(), batch_size=1, num_workers=1, multiprocessing_context="fork")
    with pytest.raises(KeyError, match="bad sample 1"):
        list(loader)


def test_workers_spawn_seeded_per_worker():
    """The default (spawn) start method: each worker's copy gets its worker info and seed."""
    loader = DataLoader(Seeds(), batch_size=None, num_workers=2, generator=fg.Generator().manual_seed(3))
    out = list(loader)
    assert sorted(w for w, _, _ in out) == [0, 1]
    (w0, s0, r0), (w1, s1, r1) = sorted(out)
    assert s1 == s0 + 1 and r0 != r1
    again = DataLoader(Seeds(), batch_size=None, num_workers=2, generator=fg.Generator().manual_seed(3))
    assert sorted(again) == sorted(out)  # the same generator state gives the same seeds
    assert sorted(loader) != sorted(out)  # a new epoch draws new seeds


class Seeds(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        yield (info.id, info.seed, float(fg.rand(1).item()))
