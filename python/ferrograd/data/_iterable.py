"""Iterable-style datasets: ``IterableDataset``, ``ChainDataset``, ``get_worker_info``, and
how :class:`DataLoader` batches them (in the loop's thread, or in worker processes that
each iterate their own copy of the dataset)."""

from __future__ import annotations

import queue
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from .. import _core
from ._dataset import Dataset

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")

__all__ = ["ChainDataset", "IterableDataset", "WorkerInfo", "get_worker_info"]

_OK, _END, _ERR = 0, 1, 2
_POLL_SECONDS = 0.25
_JOIN_SECONDS = 10.0


class IterableDataset(Dataset[T_co], Generic[T_co]):
    """A dataset read as a stream: subclasses implement ``__iter__`` (and may define
    ``__len__``). A :class:`DataLoader` over one takes samples in the order the iterator
    gives them and groups ``batch_size`` of them per batch (no sampler, no shuffle).

    With ``num_workers=k`` each worker process iterates its own copy of the dataset, so
    a dataset that should not repeat its samples ``k`` times splits the work itself with
    :func:`get_worker_info` (its ``id`` and ``num_workers``). ``a + b`` chains two
    iterable datasets into a :class:`ChainDataset`.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} is an IterableDataset: it is iterated, not indexed")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset[T_co]:  # type: ignore[override]
        return ChainDataset([self, other])


class ChainDataset(IterableDataset[T_co]):
    """The samples of several iterable datasets, one after the other."""

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")

    def __iter__(self) -> Iterator[T_co]:
        for d in self.datasets:
            yield from cast(IterableDataset[T_co], d)

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            total += len(d)  # type: ignore[arg-type]
        return total


@dataclass(frozen=True)
class WorkerInfo:
    """What a :class:`DataLoader` worker process knows about itself (see :func:`get_worker_info`)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a :class:`DataLoader` worker process, its :class:`WorkerInfo` (``id`` from 0,
    ``num_workers``, ``seed`` of its default generator, its copy of the ``dataset``);
    ``None`` in the main process."""
    return _worker_info


def _set_worker_info(info: WorkerInfo | None) -> None:
    global _worker_info
    _worker_info = info


def _batches(it: Iterator[Any], batch_size: int | None, drop_last: bool, collate: Callable[..., Any] | None,
             default: Callable[..., Any]) -> Iterator[Any]:  # fmt: skip
    """Group the samples of ``it`` into collated batches (each sample alone when ``batch_size`` is None)."""
    if batch_size is None:
        for item in it:
            yield collate(item) if collate is not None else item
        return
    fn = collate or default
    batch: list[Any] = []
    for item in it:
        batch.append(item)
        if len(batch) == batch_size:
            yield fn(batch)
            batch = []
    if batch and not drop_last:
        yield fn(batch)


class _IterableIter(Iterator[T]):
    """One epoch of a :class:`DataLoader` over an iterable dataset, in the loop's thread."""

    def __init__(self, gen: Iterator[Any]) -> None:
        self._gen = gen

    def __iter__(self) -> _IterableIter[T]:
        return self

    def __next__(self) -> T:
        return next(self._gen)

    def close(self) -> None:
        """End the epoch early."""
        close = getattr(self._gen, "close", None)
        if close is not None:
            close()


def _iterable_worker(
    dataset: Any,
    collate: Any,
    default: Any,
    init_fn: Any,
    seed: int,
    wid: int,
    num_workers: int,
    batch_size: int | None,
    drop_last: bool,
    q: Any,
    stop: Any,
) -> None:
    """A worker process: iterate its copy of the dataset and put its batches on ``q``."""
    try:
        _set_worker_info(WorkerInfo(wid, num_workers, seed, dataset))
        _core.manual_seed(seed)
        if init_fn is not None:
            init_fn(wid)
        for batch in _batches(iter(dataset), batch_size, drop_last, collate, default):
            if stop.is_set():
                return
            q.put((_OK, batch))
        q.put((_END, None))
    except BaseException as e:  # noqa: BLE001 - sent to the loop, which re-raises it
        tb = traceback.format_exc()
        try:
            q.put((_ERR, (e, tb)))
        except Exception:  # noqa: BLE001 - the exception itself does not pickle
            q.put((_ERR, (RuntimeError(f"{type(e).__name__}: {e}"), tb)))


def _stop_workers(procs: list[Any], queues: list[Any], stop: Any) -> None:
    stop.set()
    for q in queues:
        try:
            while True:
                q.get_nowait()
        except (queue.Empty, OSError, ValueError):
            pass
    for p in procs:
        p.join(_JOIN_SECONDS)
        if p.is_alive():
            p.terminate()
            p.join()


class _IterableWorkerIter(Iterator[T]):
    """One epoch of a :class:`DataLoader` over an iterable dataset with worker processes:
    batches are taken from the workers in turn (worker 0, 1, ..., then 0 again), skipping
    those that have finished, as PyTorch does."""

    def __init__(self, loader: Any, base_seed: int, default: Callable[..., Any]) -> None:
        import multiprocessing as mp

        ctx: Any = loader.multiprocessing_context or "spawn"
        if isinstance(ctx, str):
            ctx = mp.get_context(ctx)
        k = loader.num_workers
        self._stop = ctx.Event()
        self._queues = [ctx.Queue(maxsize=max(2, loader.num_prefetch)) for _ in range(k)]
        self._procs = [
            ctx.Process(
                target=_iterable_worker,
                args=(
                    loader.dataset,
                    loader.collate_fn,
                    default,
                    loader.worker_init_fn,
                    base_seed + w,
                    w,
                    k,
                    loader.batch_size,
                    loader.drop_last,
                    self._queues[w],
                    self._stop,
                ),
                daemon=True,
            )
            for w in range(k)
        ]
        for p in self._procs:
            p.start()
        self._live = list(range(k))
        self._turn = 0
        self._done = False
        self._finalizer = weakref.finalize(self, _stop_workers, self._procs, self._queues, self._stop)

    def __iter__(self) -> _IterableWorkerIter[T]:
        return self

    def _get(self, w: int) -> tuple[int, Any]:
        q, p = self._queues[w], self._procs[w]
        while True:
            try:
                return q.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if p.is_alive():
                    continue
                try:
                    return q.get_nowait()
                except queue.Empty:
                    return _ERR, (
                        RuntimeError(f"DataLoader worker {w} exited unexpectedly (exit code {p.exitcode})"),
                        "",
                    )

    def __next__(self) -> T:
        while not self._done:
            if not self._live:
                self.close()
                break
            self._turn %= len(self._live)
            w = self._live[self._turn]
            kind, value = self._get(w)
            if kind == _END:
                self._live.remove(w)
                continue
            if kind == _ERR:
                self.close()
                exc, tb = value
                if tb:
                    exc.add_note(f"(raised in DataLoader worker process {w}:\n{tb})")
                raise exc
            self._turn += 1
            return value
        raise StopIteration

    def close(self) -> None:
        """End the epoch early: stop the worker processes."""
        self._done = True
        self._finalizer()
