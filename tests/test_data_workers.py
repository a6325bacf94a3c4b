"""DataLoader worker processes (spawn): same batches as in-process loading,
per-worker seeding and init, errors carried back, no processes left behind."""

from __future__ import annotations

import multiprocessing as mp
import os

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.data import DataLoader, Dataset, TensorDataset


class Squares(Dataset):
    """Sample i is (i*i as a tensor, the pid of the process that made it); index `bad` raises."""

    def __init__(self, n: int, bad: int = -1) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.bad:
            raise KeyError(f"sample {i} is broken")
        return fg.tensor([float(i * i)]), os.getpid()


def _init(worker_id: int) -> None:
    os.environ["FG_TEST_WORKER_ID"] = str(worker_id)


def batches(loader):
    return [tuple(np.asarray(t) for t in b) for b in loader]


def test_workers_give_the_in_process_batches():
    x = fg.randn(37, 3)
    y = fg.arange(37)
    ds = TensorDataset(x, y)
    g0, g2 = fg.Generator().manual_seed(5), fg.Generator().manual_seed(5)
    want = batches(DataLoader(ds, batch_size=8, shuffle=True, generator=g0))
    got = batches(DataLoader(ds, batch_size=8, shuffle=True, generator=g2, num_workers=2))
    assert len(got) == len(want) == 5
    for (a, b), (c, d) in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    assert not mp.active_children()


def test_worker_processes_init_and_errors():
    loader = DataLoader(Squares(20), batch_size=4, num_workers=2, worker_init_fn=_init)
    out = list(loader)
    vals = np.concatenate([np.asarray(b[0]).ravel() for b in out])
    np.testing.assert_array_equal(vals, np.arange(20.0) ** 2)
    pids = {p for b in out for p in b[1].tolist()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert not mp.active_children()
    with pytest.raises(KeyError, match="sample 9 is broken") as info:
        list(DataLoader(Squares(20, bad=9), batch_size=4, num_workers=2))
    assert any("worker process" in n for n in getattr(info.value, "__notes__", []))
    assert not mp.active_children()


def test_bad_num_workers():
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(Squares(3), num_workers=-1)
