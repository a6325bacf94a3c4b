"""``DistributedDataParallel``: one model replica per MPI rank, gradients averaged during backward.

How it works (see docs/architecture.md, "Distributed"):

* At construction the parameters and buffers of rank 0 are broadcast to every
  rank, after checking that every rank holds the same parameter shapes.
* Trainable parameters are grouped into buckets (``bucket_cap_mb`` each, the
  first at most 1 MB so that communication starts early; one dtype per bucket)
  in reverse registration order, the order in which backward usually produces
  their gradients. Each bucket owns one flat NumPy buffer.
* A gradient hook on each parameter copies the parameter's gradient (plus
  whatever ``.grad`` it already holds, so ``no_sync`` accumulation is averaged
  too) into its bucket slot. The engine runs a leaf's hooks as soon as its
  gradient is final, during the backward walk, so when a bucket's last slot is
  filled, and all earlier buckets have started, a nonblocking
  ``MPI_Iallreduce`` starts on the bucket buffer while backward computes the
  remaining gradients.
* The first hook of a backward queues an end-of-backward callback with the
  engine (``fg.autograd._queue_callback``); it runs once the engine has
  written every ``.grad``, waits for every bucket, divides by the world size
  and copies the averages into ``.grad``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import _capture
from ... import distributed as dist
from ..._core import Tensor, TraceError, from_numpy
from ..._grad_mode import is_grad_enabled, no_grad
from ...autograd import _queue_callback
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]


class _Bucket:
    def __init__(self, params: list[tuple[str, Tensor]], dtype: np.dtype) -> None:
        self.params = params
        self.offsets: list[int] = []
        n = 0
        for _, p in params:
            self.offsets.append(n)
            n += p.numel()
        self.flat = np.zeros(n, dtype)
        self.ready = [False] * len(params)
        self.count = 0
        self.work: dist.Work | None = None


#: The first bucket's size cap (the later ones are ``bucket_cap_mb``), as PyTorch's DDP does.
_FIRST_BUCKET_BYTES = 1024 * 1024


class _Reducer:
    def __init__(self, ddp: DistributedDataParallel, bucket_bytes: int) -> None:
        self.ddp = ddp
        named = [(n, p) for n, p in ddp.module.named_parameters() if p.requires_grad]
        self.buckets: list[_Bucket] = []
        self.where: dict[int, tuple[int, int]] = {}  # id(param) -> (bucket, slot)
        current: list[tuple[str, Tensor]] = []
        size = 0
        for name, p in reversed(named):
            dtype = np.asarray(p.detach()).dtype
            # The first bucket is small: the last layers' gradients, ready first,
            # start communicating while backward is still early.
            cap = min(bucket_bytes, _FIRST_BUCKET_BYTES) if not self.buckets else bucket_bytes
            if current and (size + p.nbytes > cap or np.asarray(current[0][1].detach()).dtype != dtype):
                self.buckets.append(_Bucket(current, np.asarray(current[0][1].detach()).dtype))
                current, size = [], 0
            current.append((name, p))
            size += p.nbytes
        if current:
            self.buckets.append(_Bucket(current, np.asarray(current[0][1].detach()).dtype))
        for b, bucket in enumerate(self.buckets):
            for s, (_, q) in enumerate(bucket.params):
                self.where[id(q)] = (b, s)
        self.armed = False
        self.queued = False
        self.next_launch = 0
        self.handles = [p.register_hook(self._hook_for(p)) for _, p in named]

    def arm(self) -> None:
        for bucket in self.buckets:
            bucket.ready = [False] * len(bucket.params)
            bucket.count = 0
            bucket.work = None
        self.next_launch = 0
        self.armed = True
        self.queued = False

    def _hook_for(self, p: Tensor) -> Callable[[Tensor], None]:
        def hook(grad: Tensor) -> None:
            if self.armed:
                if not self.queued:
                    # Average once this backward has written every ``.grad``.
                    _queue_callback(self.finish)
                    self.queued = True
                b, s = self.where[id(p)]
                self._fill(b, s, grad)
            return None

        return hook

    def _fill(self, b: int, s: int, grad: Tensor | None) -> None:
        bucket = self.buckets[b]
        if bucket.ready[s]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {bucket.params[s][0]} received its gradient twice in one "
                "backward (reentrant backward or two backward calls per forward are not supported)"
            )
        _, p = bucket.params[s]
        off, n = bucket.offsets[s], p.numel()
        slot = bucket.flat[off : off + n]
        if grad is None:
            slot[...] = 0
        else:
            slot[...] = np.asarray(grad).reshape(-1)
        if p.grad is not None:
            slot += np.asarray(p.grad).reshape(-1)
        bucket.ready[s] = True
        bucket.count += 1
        while self.next_launch < len(self.buckets):
            nb = self.buckets[self.next_launch]
            if nb.count < len(nb.params):
                break
            nb.work = dist._iallreduce_array(nb.flat)
            self.next_launch += 1
        # MPI progresses nonblocking collectives inside MPI calls: poke the ones in flight so that
        # they advance while backward computes the remaining gradients.
        for launched in self.buckets[: self.next_launch]:
            if launched.work is not None:
                launched.work.is_completed()

    def finish(self) -> None:
        if not self.armed:
            return
        self.armed = False
        self.queued = False
        unused = [
            (b, s, bucket.params[s][0])
            for b, bucket in enumerate(self.buckets)
            for s in range(len(bucket.params))
            if not bucket.ready[s]
        ]
        if unused:
            if not self.ddp.find_unused_parameters:
                names = ", ".join(name for _, _, name in unused)
                raise RuntimeError(
                    "DistributedDataParallel: these parameters received no gradient in this backward: "
                    f"{names}. Pass find_unused_parameters=True if parts of the model are unused in some "
                    "steps (they are then averaged as zero gradients), or make every parameter take part "
                    "in the loss."
                )
            for b, s, _ in unused:
                self._fill(b, s, None)
        world = dist.get_world_size()
        for bucket in self.buckets:
            assert bucket.work is not None
            t0 = dist._clock()
            bucket.work.wait()
            self.ddp._comm_wait_s += dist._clock() - t0
            bucket.flat /= world
            for s, (_, p) in enumerate(bucket.params):
                off = bucket.offsets[s]
                avg = bucket.flat[off : off + p.numel()].reshape(tuple(p.shape))
                if p.grad is None:
                    p.grad = from_numpy(avg.copy())
                else:
                    with no_grad():
                        p.grad.copy_(from_numpy(avg))


class DistributedDataParallel(Module):
    """Wrap ``module`` so that every rank trains the same model on its own share of the data.

    Gradients are averaged over ranks during ``backward()``: each bucket of
    about ``bucket_cap_mb`` megabytes starts a nonblocking all-reduce as soon
    as its gradients are ready, and ``backward()`` returns once all have
    finished, with the averages in each parameter's ``.grad``.

    ``find_unused_parameters=True`` lets some parameters receive no gradient
    in a step (they count as zero); otherwise such a step raises an error that
    names them. ``broadcast_buffers=True`` copies rank 0's buffers (e.g. batch
    norm statistics) to every rank before each forward. ``state_dict()`` keys
    carry the ``module.`` prefix, as in PyTorch; save ``ddp.module`` for plain keys.
    """

    def __init__(
        self,
        module: Module,
        device_ids: Any = None,
        *,
        bucket_cap_mb: float = 25,
        find_unused_parameters: bool = False,
        broadcast_buffers: bool = True,
    ) -> None:
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: call fg.distributed.init_process_group() first")
        self.module = module
        self.find_unused_parameters = find_unused_parameters
        self.broadcast_buffers = broadcast_buffers
        self.bucket_cap_mb = bucket_cap_mb
        self._require_sync = True
        self._comm_wait_s = 0.0
        signature = [(n, tuple(p.shape), str(p.dtype)) for n, p in module.named_parameters()]
        dist.check_same_across_ranks("DistributedDataParallel", signature)
        with no_grad():
            for p in module.parameters():
                dist.broadcast(p.detach(), src=0)
            for b in module.buffers():
                dist.broadcast(b, src=0)
        self._reducer = _Reducer(self, int(bucket_cap_mb * 1024 * 1024))

    @property
    def bucket_sizes(self) -> list[int]:
        """The number of parameters in each gradient bucket, in the order they are reduced."""
        return [len(b.params) for b in self._reducer.buckets]

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside, backward accumulates local gradients without communicating; the first backward
        after the block averages the accumulated gradients."""
        old = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = old

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if _capture.is_capturing():
            raise TraceError(
                "DistributedDataParallel cannot be captured: its gradient all-reduce is MPI calls made from "
                "gradient hooks during backward, outside any graph; the step runs eagerly "
                "(compile with fallback='eager', or compile the wrapped module's forward alone)"
            )
        if self.broadcast_buffers:
            bufs = list(self.module.buffers())
            if bufs and dist.get_world_size() > 1:
                with no_grad():
                    for b in bufs:
                        dist.broadcast(b, src=0)
        if self._require_sync and is_grad_enabled():
            self._reducer.arm()
        else:
            self._reducer.armed = False
        return self.module(*args, **kwargs)
