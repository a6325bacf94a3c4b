"""``DataLoader``: batches of a dataset, optionally shuffled, prepared ahead by a background thread."""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from .. import _core
from ._dataset import Dataset, Subset, TensorDataset
from ._iterable import (
    IterableDataset,
    WorkerInfo,
    _batches,
    _IterableIter,
    _IterableWorkerIter,
    _set_worker_info,
)
from ._sampler import BatchSampler, Sampler

Tensor = _core.Tensor
T = TypeVar("T")

__all__ = ["DataLoader", "default_collate"]

_OK, _END, _ERR = 0, 1, 2
# How long the consumer waits on the queue before checking that the producer thread is still alive.
_POLL_SECONDS = 0.25
# How long closing an iterator waits for its thread to finish the batch it is preparing.
_JOIN_SECONDS = 10.0


def default_collate(batch: Sequence[Any]) -> Any:
    """Combine a list of samples into a batch, following the samples' structure.

    Tensors are stacked along a new dim 0 (they must share shape and dtype);
    NumPy arrays and scalars are stacked and converted with
    ``fg.from_numpy``; Python ``bool``/``int``/``float`` become a 1-D
    ``bool``/``int64``/``float64`` tensor (as in PyTorch); ``str`` and
    ``bytes`` stay a list. Dicts are collated key by key, tuples and lists
    position by position (named tuples keep their type).
    """
    if len(batch) == 0:
        raise ValueError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {tuple(t.shape) for t in batch}
        if len(shapes) > 1:
            raise ValueError(
                f"default_collate: tensors in a batch must have equal shapes, got {sorted(shapes)[:4]}"
            )
        dtypes = {str(t.dtype) for t in batch}
        if len(dtypes) > 1:
            raise ValueError(f"default_collate: tensors in a batch must have one dtype, got {sorted(dtypes)}")
        return _core.stack(list(batch))
    if isinstance(elem, np.ndarray | np.generic):
        if elem.dtype.kind in "OSUV":
            return list(batch)
        return _core.from_numpy(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, bool):
        return _core.tensor(list(batch), dtype=_core.bool)
    if isinstance(elem, int):
        return _core.tensor(list(batch), dtype=_core.int64)
    if isinstance(elem, float):
        return _core.tensor(list(batch), dtype=_core.float64)
    if isinstance(elem, str | bytes):
        return list(batch)
    if isinstance(elem, Mapping):
        keys = list(elem)
        for b in batch:
            if not isinstance(b, Mapping) or set(b) != set(keys):
                raise ValueError(
                    f"default_collate: samples in a batch must be dicts with the same keys {keys}"
                )
        return {k: default_collate([b[k] for b in batch]) for k in keys}
    if isinstance(elem, tuple | list):
        n = len(elem)
        if any(not isinstance(b, tuple | list) or len(b) != n for b in batch):
            raise ValueError(f"default_collate: samples in a batch must be sequences of equal length ({n})")
        columns = [default_collate([b[i] for b in batch]) for i in range(n)]
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
            return type(elem)(*columns)
        return tuple(columns) if isinstance(elem, tuple) else columns
    raise TypeError(
        f"default_collate: don't know how to batch samples of type {type(elem).__name__}; "
        "samples must be tensors, NumPy arrays, numbers, strings, or dicts/tuples/lists of them "
        "(pass collate_fn= for anything else)"
    )


def _tensor_source(dataset: Any) -> tuple[tuple[Tensor, ...], Tensor | None] | None:
    """``(tensors, index)`` when ``dataset`` is a TensorDataset or Subsets of one, else None.

    ``dataset[i] == tuple(t[index[i]] for t in tensors)`` (``index`` None meaning the identity).
    """
    if type(dataset) is TensorDataset:
        return dataset.tensors, None
    if type(dataset) is Subset:
        inner = _tensor_source(dataset.dataset)
        if inner is None:
            return None
        tensors, base = inner
        idx = _core.tensor(dataset.indices, dtype=_core.int64)
        if base is not None:
            idx = base.index_select(0, idx)
        return tensors, idx
    return None


class DataLoader(Generic[T]):
    """Iterate over a dataset in batches.

    Each ``iter(loader)`` is one epoch: ``len(loader)`` batches of
    ``batch_size`` samples (the last one smaller unless ``drop_last``). With
    ``shuffle=True`` every epoch draws a new order from
    ``fg.randperm(len(dataset), generator=generator)`` (the default generator
    when ``generator`` is None), so seeding makes epochs reproducible.

    A :class:`TensorDataset` (or a :class:`Subset` of one, as made by
    :func:`random_split`) with the default collation yields a tuple of
    tensors per batch, gathered with one ``index_select`` per tensor. Other
    datasets are indexed sample by sample and combined by ``collate_fn``
    (:func:`default_collate` unless given).

    A background thread can prepare up to ``num_prefetch`` batches ahead
    while the loop runs. By default (``prefetch=None``) it does so only for
    a tensor dataset with the default collation, where no user code runs;
    any other dataset's ``__getitem__`` and ``collate_fn`` run in the loop's
    thread when the loop asks for the batch, as in PyTorch with
    ``num_workers=0`` — so a dataset that draws from ``random`` or the
    default generator (pairs, augmentations) sees the same calls in the same
    order, and a ``break`` leaves later samples undrawn. ``prefetch=True``
    prefetches every dataset (then such draws run concurrently with the
    loop: give the dataset its own ``fg.Generator``); ``prefetch=False``
    never does. With the thread, an exception raised by the dataset or
    ``collate_fn`` is re-raised in the loop at the batch where it happened,
    and the thread stops as soon as the iterator is exhausted, closed
    (``it.close()``), or garbage-collected (for instance after a
    ``break``); it runs in the grad mode of the thread that started the
    epoch.

    With ``num_workers=k > 0`` batches are made by ``k`` worker processes
    (``multiprocessing`` with the ``"spawn"`` start method unless
    ``multiprocessing_context`` says otherwise — safe with the process's
    thread pool), up to ``2k`` batches ahead, delivered in order: the same
    batches as with ``num_workers=0`` for the same seed. The dataset and
    ``collate_fn`` are pickled into each worker; each worker seeds its default
    generator with ``base_seed + worker_id`` (``base_seed`` drawn from
    ``generator`` at the start of the epoch) and then calls
    ``worker_init_fn(worker_id)``. An exception in a worker is re-raised in
    the loop with the worker's traceback attached; the workers stop when the
    epoch ends, the iterator is closed or garbage-collected.
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler[int] | Iterable[int] | None = None,
        batch_sampler: Sampler[list[int]] | Iterable[list[int]] | None = None,
        *,
        drop_last: bool = False,
        generator: _core.Generator | None = None,
        collate_fn: Callable[[list[Any]], T] | None = None,
        num_workers: int = 0,
        prefetch: bool | None = None,
        num_prefetch: int = 2,
        worker_init_fn: Callable[[int], Any] | None = None,
        multiprocessing_context: Any = None,
        pin_memory: bool = False,
        pin_memory_device: str = "",
        timeout: float = 0,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
    ) -> None:
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                    "and drop_last"
                )
            batch_size = None
        elif batch_size is None:
            if drop_last:
                raise ValueError(
                    "DataLoader: batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
                )
        elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive integer or None, got {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if (
            batch_size is None
            and batch_sampler is None
            and num_workers
            and not isinstance(dataset, IterableDataset)
        ):
            raise ValueError(
                "DataLoader: batch_size=None (no auto-batching) is not supported with num_workers > 0"
            )
        if isinstance(dataset, IterableDataset):
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(
                        f"DataLoader with IterableDataset: expected unspecified {name} option, but got {name}={value!r}"
                    )
        if prefetch_factor is not None:
            num_prefetch = prefetch_factor * max(1, num_workers)
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError("DataLoader: worker_init_fn must be callable")
        if isinstance(num_prefetch, bool) or not isinstance(num_prefetch, int) or num_prefetch < 1:
            raise ValueError(f"DataLoader: num_prefetch must be a positive integer, got {num_prefetch!r}")
        if generator is not None and not isinstance(generator, _core.Generator):
            raise TypeError(
                f"DataLoader: generator must be a ferrograd Generator, got {type(generator).__name__}"
            )
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError("DataLoader: collate_fn must be callable")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        # Accepted as in PyTorch; host memory is already where every device reads from.
        self.pin_memory = bool(pin_memory)
        self.timeout = timeout
        self.persistent_workers = bool(persistent_workers)
        self.drop_last = bool(drop_last)
        self.generator = generator
        self.collate_fn = collate_fn
        self.num_workers = num_workers
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch = None if prefetch is None else bool(prefetch)
        self.num_prefetch = num_prefetch

    def _num_samples(self) -> int:
        try:
            return len(self.dataset)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"DataLoader: the dataset ({type(self.dataset).__name__}) must define __len__"
            ) from None

    def __len__(self) -> int:
        """The number of batches per epoch (for an iterable dataset, from its ``__len__``)."""
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)  # type: ignore[arg-type]
        n = len(self.sampler) if self.sampler is not None else self._num_samples()  # type: ignore[arg-type]
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _custom_batches(self) -> list[list[int]] | list[int]:
        """One epoch's index batches from ``batch_sampler`` or ``sampler``
        (single indices when auto-batching is off)."""
        if self.batch_sampler is not None:
            return [[int(i) for i in b] for b in self.batch_sampler]
        assert self.sampler is not None or self.batch_size is None
        sampler: Iterable[int] = self.sampler if self.sampler is not None else range(self._num_samples())
        if self.batch_size is None:
            return [int(i) for i in sampler]
        return list(BatchSampler(sampler, self.batch_size, self.drop_last))

    def __iter__(self) -> _LoaderIter[T]:
        """Start an epoch: draw the order (if shuffling) and start the prefetch thread."""
        if isinstance(self.dataset, IterableDataset):
            return self._iter_iterable()  # type: ignore[return-value]
        if self.sampler is not None or self.batch_sampler is not None or self.batch_size is None:
            return self._iter_custom()
        n = self._num_samples()
        num_batches = len(self)
        bs = self.batch_size
        order: Tensor | None = None
        if self.shuffle and n > 0:
            order = _core.randperm(n, generator=self.generator)
        if self.num_workers > 0:
            idx = order.tolist() if order is not None else list(range(n))
            batches = [idx[b * bs : (b + 1) * bs] for b in range(num_batches)]
            base_seed = int(_core.randint(0, 2**62, (1,), generator=self.generator).item())
            return _WorkerIter(self, batches, base_seed)  # type: ignore[return-value]
        source = _tensor_source(self.dataset) if self.collate_fn is None else None
        make_batch: Callable[[int], Any]
        if source is not None:
            tensors, base = source

            def make_batch(b: int) -> Any:
                start, stop = b * bs, min(n, (b + 1) * bs)
                idx = order[start:stop] if order is not None else _core.arange(start, stop)
                if base is not None:
                    idx = base.index_select(0, idx)
                return tuple(t.index_select(0, idx) for t in tensors)

        else:
            dataset = self.dataset
            collate = self.collate_fn or default_collate
            indices: list[int] | range = order.tolist() if order is not None else range(n)

            def make_batch(b: int) -> Any:
                return collate([dataset[i] for i in indices[b * bs : (b + 1) * bs]])

        return _LoaderIter(make_batch, num_batches, self._prefetches(source), self.num_prefetch)

    def _iter_iterable(self) -> Iterator[T]:
        """An epoch of an iterable dataset: its samples in order, ``batch_size`` per batch, made in
        this thread or, with ``num_workers > 0``, by worker processes each iterating a copy."""
        if self.num_workers > 0:
            base_seed = int(_core.randint(0, 2**62, (1,), generator=self.generator).item())
            return _IterableWorkerIter(self, base_seed, default_collate)
        gen = _batches(iter(self.dataset), self.batch_size, self.drop_last, self.collate_fn, default_collate)
        return _IterableIter(gen)

    def _iter_custom(self) -> _LoaderIter[T]:
        """An epoch whose indices come from a sampler or batch sampler (or,
        without auto-batching, one sample per step)."""
        batches = self._custom_batches()
        if self.batch_size is None and self.batch_sampler is None:
            dataset, collate = self.dataset, self.collate_fn
            singles: list[int] = batches  # type: ignore[assignment]

            def make_one(b: int) -> Any:
                sample = dataset[singles[b]]
                return collate(sample) if collate is not None else sample

            return _LoaderIter(make_one, len(singles), self._prefetches(None), self.num_prefetch)
        lists: list[list[int]] = batches  # type: ignore[assignment]
        if self.num_workers > 0:
            base_seed = int(_core.randint(0, 2**62, (1,), generator=self.generator).item())
            return _WorkerIter(self, lists, base_seed)  # type: ignore[return-value]
        source = _tensor_source(self.dataset) if self.collate_fn is None else None
        make_batch: Callable[[int], Any]
        if source is not None:
            tensors, base = source

            def make_batch(b: int) -> Any:
                idx = _core.tensor(lists[b], dtype=_core.int64)
                if base is not None:
                    idx = base.index_select(0, idx)
                return tuple(t.index_select(0, idx) for t in tensors)

        else:
            dataset = self.dataset
            collate_fn = self.collate_fn or default_collate

            def make_batch(b: int) -> Any:
                return collate_fn([dataset[i] for i in lists[b]])

        return _LoaderIter(make_batch, len(lists), self._prefetches(source), self.num_prefetch)

    def _prefetches(self, source: object) -> bool:
        """Whether this epoch's batches are made on the prefetch thread: when asked
        (``prefetch=True``), or by default when they are gathered from tensors (``source``)
        with no user code to run."""
        return self.prefetch is True or (self.prefetch is None and source is not None)

    def __repr__(self) -> str:
        return (
            f"DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
            f"drop_last={self.drop_last})"
        )


def _produce(
    make_batch: Callable[[int], Any],
    num_batches: int,
    q: queue.Queue[tuple[int, Any]],
    stop: threading.Event,
    grad_enabled: bool,
) -> None:
    """The prefetch thread: put ``(_OK, batch)`` for each batch, then ``(_END, None)`` or ``(_ERR, exc)``.

    It holds no reference to the iterator, so dropping the iterator finalizes it, which sets ``stop``
    and drains the queue; the thread checks ``stop`` after every put (a put never blocks after a drain,
    since at most one item goes in before the check).
    """
    item: tuple[int, Any]
    try:
        _core._set_grad_enabled(grad_enabled)
        for b in range(num_batches):
            if stop.is_set():
                return
            batch = make_batch(b)
            if stop.is_set():
                return
            q.put((_OK, batch))
            del batch
        item = (_END, None)
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
        item = (_ERR, e)
    if not stop.is_set():
        q.put(item)


def _shutdown(q: queue.Queue[tuple[int, Any]], stop: threading.Event, thread: threading.Thread) -> None:
    """Stop the prefetch thread: set the flag, unblock its put, and wait for it."""
    stop.set()
    try:
        while True:
            q.get_nowait()
    except queue.Empty:
        pass
    if thread is not threading.current_thread() and thread.ident is not None:
        thread.join(_JOIN_SECONDS)


class _LoaderIter(Iterator[T]):
    """One epoch of a :class:`DataLoader`."""

    def __init__(
        self, make_batch: Callable[[int], Any], num_batches: int, prefetch: bool, num_prefetch: int
    ) -> None:
        self._make_batch = make_batch
        self._num_batches = num_batches
        self._next_batch = 0
        self._done = num_batches == 0
        self._thread: threading.Thread | None = None
        self._finalizer: weakref.finalize | None = None
        if prefetch and not self._done:
            self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=num_prefetch)
            stop = threading.Event()
            self._thread = threading.Thread(
                target=_produce,
                args=(make_batch, num_batches, self._queue, stop, _core.is_grad_enabled()),
                name="ferrograd-DataLoader-prefetch",
                daemon=True,
            )
            self._finalizer = weakref.finalize(self, _shutdown, self._queue, stop, self._thread)
            self._thread.start()

    def __iter__(self) -> _LoaderIter[T]:
        return self

    def __len__(self) -> int:
        return self._num_batches

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        if self._thread is None:
            b = self._next_batch
            self._next_batch += 1
            if self._next_batch >= self._num_batches:
                self._done = True
            return self._make_batch(b)
        while True:
            try:
                kind, value = self._queue.get(timeout=_POLL_SECONDS)
                break
            except queue.Empty:
                if self._thread.is_alive():
                    continue
                try:  # it may have put its last item just before exiting
                    kind, value = self._queue.get_nowait()
                    break
                except queue.Empty:
                    self.close()
                    raise RuntimeError(
                        "DataLoader: the prefetch thread stopped without delivering a batch"
                    ) from None
        if kind == _OK:
            self._next_batch += 1
            return value
        self.close()
        if kind == _END:
            raise StopIteration
        value.add_note(f"(raised while the DataLoader prefetch thread prepared batch {self._next_batch})")
        raise value

    def close(self) -> None:
        """End the epoch early: stop the prefetch thread and wait for it; further ``next`` raises StopIteration."""
        self._done = True
        if self._finalizer is not None:
            self._finalizer()


# ----------------------------------------------------------------------------- worker processes

_worker_state: dict[str, Any] = {}


def _worker_init(
    dataset: Any, collate: Any, init_fn: Any, base_seed: int, counter: Any, num_workers: int = 0
) -> None:
    """Runs once in each worker process: keep the dataset, number and seed the worker."""
    with counter.get_lock():
        wid = counter.value
        counter.value += 1
    _worker_state.update(dataset=dataset, collate=collate or default_collate, id=wid)
    _set_worker_info(WorkerInfo(wid, num_workers, base_seed + wid, dataset))
    _core.manual_seed(base_seed + wid)
    if init_fn is not None:
        init_fn(wid)


def _worker_batch(indices: list[int]) -> Any:
    ds = _worker_state["dataset"]
    return _worker_state["collate"]([ds[i] for i in indices])


def _stop_pool(pool: Any) -> None:
    pool.shutdown(wait=True, cancel_futures=True)


class _WorkerIter(Iterator[T]):
    """One epoch of a :class:`DataLoader` with worker processes."""

    def __init__(self, loader: DataLoader[T], batches: list[list[int]], base_seed: int) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = loader.multiprocessing_context or "spawn"
        if isinstance(ctx, str):
            ctx = mp.get_context(ctx)
        self._batches = batches
        self._ahead = 2 * loader.num_workers
        self._futures: list[Any] = []
        self._next = 0
        self._done = not batches
        self._pool = None
        self._finalizer: weakref.finalize | None = None
        if self._done:
            return
        counter = ctx.Value("i", 0)
        self._pool = ProcessPoolExecutor(
            max_workers=loader.num_workers,
            mp_context=ctx,
            initializer=_worker_init,
            initargs=(
                loader.dataset,
                loader.collate_fn,
                loader.worker_init_fn,
                base_seed,
                counter,
                loader.num_workers,
            ),
        )
        self._finalizer = weakref.finalize(self, _stop_pool, self._pool)
        self._fill()

    def _fill(self) -> None:
        while len(self._futures) < self._ahead and self._next + len(self._futures) < len(self._batches):
            b = self._batches[self._next + len(self._futures)]
            self._futures.append(self._pool.submit(_worker_batch, b))  # type: ignore[union-attr]

    def __iter__(self) -> _WorkerIter[T]:
        return self

    def __len__(self) -> int:
        return len(self._batches)

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        fut = self._futures.pop(0)
        try:
            batch = fut.result()
        except BaseException as e:
            b = self._next
            self.close()
            e.add_note(f"(raised in a DataLoader worker process while it made batch {b})")
            raise
        self._next += 1
        if self._next >= len(self._batches):
            self.close()
        else:
            self._fill()
        return batch

    def close(self) -> None:
        """End the epoch early: cancel pending batches and stop the worker processes."""
        self._done = True
        if self._finalizer is not None:
            self._finalizer()
