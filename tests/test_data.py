"""fg.data: datasets, random_split, default_collate and the prefetching DataLoader."""

from __future__ import annotations

import gc
import threading
import time
from collections import namedtuple

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.data import (
    ConcatDataset,
    DataLoader,
    Dataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

PREFETCH = [pytest.param(True, id="prefetch"), pytest.param(False, id="sync")]


def _xy(n=10):
    x = fg.arange(n * 3).float().reshape(n, 3)
    y = fg.arange(n) * 10
    return x, y, TensorDataset(x, y)


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "ferrograd-DataLoader-prefetch" and t.is_alive()]


@pytest.fixture(autouse=True)
def _no_leaked_threads():
    yield
    gc.collect()
    deadline = time.monotonic() + 5
    while _prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _prefetch_threads() == []


class Squares(Dataset):
    """A plain map-style dataset of (tensor, int) samples."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return fg.tensor([float(i), float(i * i)]), i


# ----------------------------------------------------------------------------- datasets


def test_tensor_dataset():
    x, y, ds = _xy(5)
    assert len(ds) == 5
    xi, yi = ds[2]
    assert xi.tolist() == [6.0, 7.0, 8.0] and yi.item() == 20
    assert ds[-1][1].item() == 40
    assert ds[np.int64(1)][1].item() == 10
    with pytest.raises(IndexError):
        ds[5]


def test_tensor_dataset_checks():
    with pytest.raises(ValueError, match=r"same size in dim 0, got shapes \(4, 2\), \(3,\)"):
        TensorDataset(fg.zeros(4, 2), fg.zeros(3))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()
    with pytest.raises(ValueError, match="0-dimensional"):
        TensorDataset(fg.tensor(1.0))
    with pytest.raises(TypeError, match="not a Tensor"):
        TensorDataset(np.zeros(3))


def test_base_dataset_and_concat():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    c = Squares(3) + Squares(2)
    assert isinstance(c, ConcatDataset) and len(c) == 5
    assert [c[i][1] for i in range(5)] == [0, 1, 2, 0, 1]
    assert c[-1][1] == 1
    with pytest.raises(IndexError):
        c[5]


def test_subset():
    _, _, ds = _xy(6)
    s = Subset(ds, [4, 0, 4])
    assert len(s) == 3
    assert [s[i][1].item() for i in range(3)] == [40, 0, 40]
    s2 = Subset(ds, fg.tensor([5, 1]))
    assert s2.indices == [5, 1]
    with pytest.raises(TypeError):
        Subset(ds, fg.tensor([1.0]))


def test_random_split_sizes_disjoint_and_reproducible():
    _, _, ds = _xy(10)
    a, b, c = random_split(ds, [5, 3, 2], generator=fg.Generator().manual_seed(0))
    assert (len(a), len(b), len(c)) == (5, 3, 2)
    all_idx = a.indices + b.indices + c.indices
    assert sorted(all_idx) == list(range(10))
    a2, b2, c2 = random_split(ds, [5, 3, 2], generator=fg.Generator().manual_seed(0))
    assert (a.indices, b.indices, c.indices) == (a2.indices, b2.indices, c2.indices)
    fg.manual_seed(3)
    d1 = random_split(ds, [5, 5])[0].indices
    fg.manual_seed(3)
    assert random_split(ds, [5, 5])[0].indices == d1
    assert a[0][1].item() == 10 * a.indices[0]


def test_random_split_fractions():
    _, _, ds = _xy(10)
    parts = random_split(ds, [0.5, 0.3, 0.2], generator=fg.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [5, 3, 2]
    parts = random_split(Squares(11), [0.34, 0.33, 0.33])  # remainder goes round-robin from the first
    assert [len(p) for p in parts] == [4, 4, 3]
    with pytest.warns(UserWarning, match="length of split at index 1 is 0"):
        random_split(Squares(2), [0.9, 0.1])


def test_random_split_errors():
    _, _, ds = _xy(10)
    with pytest.raises(ValueError, match="sum to 9"):
        random_split(ds, [5, 4])
    with pytest.raises(ValueError, match="non-negative"):
        random_split(ds, [11, -1])
    with pytest.raises(ValueError, match="fractions"):
        random_split(ds, [0.5, 0.2])


# ----------------------------------------------------------------------------- collate


def test_default_collate_structures():
    Point = namedtuple("Point", "x y")
    batch = [
        {"t": fg.tensor([i, i + 1]), "n": i, "f": i / 2, "b": i % 2 == 0, "s": f"s{i}", "p": Point(i, fg.tensor(1.0 * i))}
        for i in range(3)
    ]
    out = default_collate(batch)
    assert out["t"].tolist() == [[0, 1], [1, 2], [2, 3]]
    assert out["n"].dtype == fg.int64 and out["n"].tolist() == [0, 1, 2]
    assert out["f"].dtype == fg.float64 and out["f"].tolist() == [0.0, 0.5, 1.0]
    assert out["b"].dtype == fg.bool and out["b"].tolist() == [True, False, True]
    assert out["s"] == ["s0", "s1", "s2"]
    assert isinstance(out["p"], Point) and out["p"].x.tolist() == [0, 1, 2] and out["p"].y.tolist() == [0.0, 1.0, 2.0]
    tup = default_collate([(fg.ones(2), 1), (fg.zeros(2), 2)])
    assert isinstance(tup, tuple) and tuple(tup[0].shape) == (2, 2)
    lst = default_collate([[1, 2.0], [3, 4.0]])
    assert isinstance(lst, list) and lst[0].tolist() == [1, 3]
    arr = default_collate([np.ones(2, np.float32), np.zeros(2, np.float32)])
    assert arr.dtype == fg.float32 and tuple(arr.shape) == (2, 2)
    assert default_collate([np.int32(1), np.int32(2)]).dtype == fg.int32


def test_default_collate_errors():
    with pytest.raises(ValueError, match="equal shapes"):
        default_collate([fg.ones(2), fg.ones(3)])
    with pytest.raises(ValueError, match="one dtype"):
        default_collate([fg.ones(2), fg.ones(2).double()])
    with pytest.raises(ValueError, match="same keys"):
        default_collate([{"a": 1}, {"b": 1}])
    with pytest.raises(ValueError, match="equal length"):
        default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError, match="collate_fn"):
        default_collate([object(), object()])
    with pytest.raises(ValueError, match="empty"):
        default_collate([])


# ----------------------------------------------------------------------------- DataLoader


@pytest.mark.parametrize("prefetch", PREFETCH)
@pytest.mark.parametrize("n, bs, drop_last", [(10, 3, False), (10, 3, True), (9, 3, False), (9, 3, True), (2, 5, False), (2, 5, True), (0, 2, False)])
def test_sequential_batches(prefetch, n, bs, drop_last):
    x, y, ds = _xy(n) if n else (fg.zeros(0, 3), fg.zeros(0, dtype=fg.int64), None)
    ds = ds or TensorDataset(x, y)
    loader = DataLoader(ds, batch_size=bs, drop_last=drop_last, prefetch=prefetch)
    batches = list(loader)
    expected = n // bs if drop_last else -(-n // bs)
    assert len(loader) == expected == len(batches)
    xn, yn = x.numpy(), y.numpy()
    for i, (xb, yb) in enumerate(batches):
        assert isinstance(xb, fg.Tensor) and xb.dtype == fg.float32 and yb.dtype == fg.int64
        np.testing.assert_array_equal(xb.numpy(), xn[i * bs : (i + 1) * bs])
        np.testing.assert_array_equal(yb.numpy(), yn[i * bs : (i + 1) * bs])
    if drop_last:
        assert all(b[0].shape[0] == bs for b in batches)


@pytest.mark.parametrize("prefetch", PREFETCH)
def test_shuffled_batches_match_numpy_indexing(prefetch):
    x, y, ds = _xy(23)
    g = fg.Generator().manual_seed(5)
    loader = DataLoader(ds, batch_size=4, shuffle=True, generator=g, prefetch=prefetch)
    batches = list(loader)
    perm = fg.randperm(23, generator=fg.Generator().manual_seed(5)).numpy()
    for i, (xb, yb) in enumerate(batches):
        idx = perm[i * 4 : (i + 1) * 4]
        np.testing.assert_array_equal(xb.numpy(), x.numpy()[idx])
        np.testing.assert_array_equal(yb.numpy(), y.numpy()[idx])
    seen = np.concatenate([yb.numpy() for _, yb in batches]) // 10
    assert sorted(seen.tolist()) == list(range(23)) and seen.tolist() != list(range(23))
    # the next epoch continues the generator: a different order
    assert [yb.tolist() for _, yb in loader] != [yb.tolist() for _, yb in batches]


def test_shuffle_reproducible_with_seeds():
    _, _, ds = _xy(50)

    def epochs(loader, k=2):
        return [[yb.tolist() for _, yb in loader] for _ in range(k)]

    a = epochs(DataLoader(ds, 8, shuffle=True, generator=fg.Generator().manual_seed(1)))
    b = epochs(DataLoader(ds, 8, shuffle=True, generator=fg.Generator().manual_seed(1)))
    c = epochs(DataLoader(ds, 8, shuffle=True, generator=fg.Generator().manual_seed(2)))
    assert a == b and a != c
    fg.manual_seed(11)
    d = epochs(DataLoader(ds, 8, shuffle=True))
    fg.manual_seed(11)
    e = epochs(DataLoader(ds, 8, shuffle=True, prefetch=False))
    assert d == e


@pytest.mark.parametrize("prefetch", PREFETCH)
def test_generic_dataset_uses_default_collate(prefetch):
    loader = DataLoader(Squares(7), batch_size=3, shuffle=True, generator=fg.Generator().manual_seed(0), prefetch=prefetch)
    perm = fg.randperm(7, generator=fg.Generator().manual_seed(0)).tolist()
    out = list(loader)
    assert len(out) == 3
    for i, (feats, labels) in enumerate(out):
        idx = perm[i * 3 : (i + 1) * 3]
        assert labels.dtype == fg.int64 and labels.tolist() == idx
        assert feats.tolist() == [[float(j), float(j * j)] for j in idx]


def test_custom_collate_fn_and_subset_fast_path():
    x, y, ds = _xy(12)
    train, val = random_split(ds, [8, 4], generator=fg.Generator().manual_seed(3))
    inner = Subset(train, [7, 6, 5])  # a subset of a subset
    got = [yb.tolist() for _, yb in DataLoader(inner, batch_size=2)]
    expect = [10 * train.indices[i] for i in (7, 6, 5)]
    assert got == [expect[:2], expect[2:]]
    got = [yb.tolist() for _, yb in DataLoader(val, batch_size=4)]
    assert got == [[10 * i for i in val.indices]]
    loader = DataLoader(ds, batch_size=5, collate_fn=lambda samples: len(samples))
    assert list(loader) == [5, 5, 2]


def test_tensor_dataset_gathers_with_index_select(monkeypatch):
    _, _, ds = _xy(10)
    calls = []

    class Spy:
        def __init__(self, t):
            self.t = t
            self.shape = t.shape

        def index_select(self, dim, idx):
            calls.append((dim, tuple(idx.shape)))
            return self.t.index_select(dim, idx)

    ds.tensors = tuple(Spy(t) for t in ds.tensors)
    loader = DataLoader(ds, batch_size=4, prefetch=False)
    batches = list(loader)
    assert len(batches) == 3 and calls == [(0, (4,)), (0, (4,)), (0, (4,)), (0, (4,)), (0, (2,)), (0, (2,))]


def test_loader_arguments():
    _, _, ds = _xy(4)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=1.5)
    with pytest.raises(TypeError, match="worker_init_fn"):
        DataLoader(ds, num_workers=1, worker_init_fn=3)
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="num_prefetch"):
        DataLoader(ds, num_prefetch=0)
    with pytest.raises(TypeError, match="Generator"):
        DataLoader(ds, generator=np.random.default_rng())

    class NoLen(Dataset):
        def __getitem__(self, i):
            return i

    with pytest.raises(TypeError, match="__len__"):
        len(DataLoader(NoLen()))


# ----------------------------------------------------------------------------- the prefetch thread


class Slow(Dataset):
    """Counts __getitem__ calls; optionally slow or failing at one index."""

    def __init__(self, n, delay=0.0, fail_at=None, exc=KeyError):
        self.n, self.delay, self.fail_at, self.exc = n, delay, fail_at, exc
        self.calls = 0
        self.threads: set[str] = set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.delay:
            time.sleep(self.delay)
        if i == self.fail_at:
            raise self.exc(f"bad sample {i}")
        return fg.tensor([float(i)])


def test_prefetch_runs_in_background_and_is_bounded():
    ds = Slow(100)
    it = iter(DataLoader(ds, batch_size=1, num_prefetch=3, prefetch=True))
    first = next(it)
    assert first.tolist() == [[0.0]]
    deadline = time.monotonic() + 5
    while ds.calls < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)
    # one batch consumed, three queued, one being prepared (blocked on the full queue)
    assert 4 <= ds.calls <= 5
    assert ds.threads == {"ferrograd-DataLoader-prefetch"}
    it.close()
    assert _prefetch_threads() == []
    with pytest.raises(StopIteration):
        next(it)


def test_early_break_stops_the_thread():
    baseline = threading.active_count()
    ds = Slow(1000)
    for i, _ in enumerate(DataLoader(ds, batch_size=2, prefetch=True)):
        if i == 3:
            break
    assert _prefetch_threads() == []
    assert threading.active_count() == baseline
    assert ds.calls < 30


def test_user_datasets_run_in_the_loop_by_default_as_pytorch():
    """By default a dataset's ``__getitem__`` runs in the loop's thread when the loop asks for
    the batch (PyTorch with ``num_workers=0``): a dataset drawing from ``random`` sees the same
    draws in the same order, and a ``break`` leaves the later samples undrawn. A tensor dataset
    (no user code) is still prefetched."""
    import random

    class Pairs(Slow):
        def __init__(self, n, rng):
            super().__init__(n)
            self.rng = rng

        def __getitem__(self, i):
            super().__getitem__(i)
            return fg.tensor([float(self.rng.randint(0, 99))])

    rng = random.Random(3)
    ds = Pairs(100, rng)
    for i, _ in enumerate(DataLoader(ds, batch_size=4)):
        if i == 1:
            break
    assert ds.calls == 8 and ds.threads == {threading.current_thread().name}
    expected = random.Random(3)
    for _ in range(8):
        expected.randint(0, 99)
    assert rng.random() == expected.random()  # the stream advanced by exactly 8 draws
    assert _prefetch_threads() == []
    it = iter(DataLoader(TensorDataset(fg.arange(10.0)), batch_size=2))
    assert it._thread is not None  # prefetched
    assert len(list(it)) == 5


def test_dropped_iterator_is_collected_and_stops_the_thread():
    it = iter(DataLoader(Slow(1000), batch_size=1, prefetch=True))
    next(it)
    thread = it._thread
    assert thread.is_alive()
    del it
    gc.collect()
    assert not thread.is_alive()


def test_exhausted_iterator_thread_ends():
    it = iter(DataLoader(Slow(5), batch_size=2, prefetch=True))
    thread = it._thread
    assert len(list(it)) == 3
    thread.join(5)
    assert not thread.is_alive()


@pytest.mark.parametrize("prefetch", PREFETCH)
def test_dataset_exception_surfaces_in_the_consumer(prefetch):
    loader = DataLoader(Slow(10, fail_at=5), batch_size=2, prefetch=prefetch)
    it = iter(loader)
    assert [next(it).tolist() for _ in range(2)] == [[[0.0], [1.0]], [[2.0], [3.0]]]
    with pytest.raises(KeyError, match="bad sample 5"):
        next(it)
    if prefetch:
        with pytest.raises(StopIteration):
            next(it)
        assert _prefetch_threads() == []


def test_collate_exception_and_base_exceptions_surface():
    def bad_collate(samples):
        raise RuntimeError("collate failed")

    with pytest.raises(RuntimeError, match="collate failed") as ei:
        list(DataLoader(Slow(4), batch_size=2, collate_fn=bad_collate, prefetch=True))
    assert any("prefetch thread" in n for n in getattr(ei.value, "__notes__", []))

    class Exit(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            raise SystemExit(3)

    with pytest.raises(SystemExit):
        list(DataLoader(Exit()))


def test_many_abandoned_epochs_do_not_leak_threads():
    loader = DataLoader(
        Slow(200), batch_size=1, shuffle=True, generator=fg.Generator().manual_seed(0), prefetch=True
    )
    for _ in range(20):
        it = iter(loader)
        next(it)
    del it
    gc.collect()
    assert _prefetch_threads() == []


def test_prefetch_thread_uses_the_consumers_grad_mode():
    w = fg.randn(3, requires_grad=True)

    class Graph(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return w * 2.0

    with fg.no_grad():
        batches = list(DataLoader(Graph(), batch_size=1))
    assert all(not b.requires_grad for b in batches)
    batches = list(DataLoader(Graph(), batch_size=1))
    assert all(b.requires_grad for b in batches)


def test_training_loop_with_loader():
    g = fg.Generator().manual_seed(0)
    x = fg.randn(64, 3, generator=g)
    true_w = fg.tensor([[1.0], [-2.0], [0.5]])
    y = x @ true_w
    w = fg.zeros(3, 1, requires_grad=True)
    opt = fg.optim.SGD([w], lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=fg.Generator().manual_seed(1))
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            loss = ((xb @ w - yb) ** 2).mean()
            loss.backward()
            opt.step()
    np.testing.assert_allclose(w.detach().numpy(), true_w.numpy(), atol=1e-3)
