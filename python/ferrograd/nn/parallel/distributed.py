"""``DistributedDataParallel``: one model replica per MPI rank, gradients averaged during backward.

How it works (see docs/architecture.md, "Distributed"):

* At construction the parameters and buffers of rank 0 are broadcast to every
  rank, after checking that every rank holds the same parameters, buffers and
  bucket layout (the first difference is named).
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
  written every ``.grad``, fills the slots of parameters that got no
  gradient with zeros (so that every bucket is reduced on every rank), waits
  for every bucket, divides by the world size and copies the averages into
  ``.grad``. A flag at the end of the last bucket counts the ranks that had
  parameters with no gradient; without ``find_unused_parameters`` every rank
  then raises.
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
    def __init__(self, params: list[tuple[str, Tensor]], dtype: np.dtype, *, flag: bool = False) -> None:
        self.params = params
        self.offsets: list[int] = []
        n = 0
        for _, p in params:
            self.offsets.append(n)
            n += p.numel()
        # The last bucket reduced carries one more element: the number of ranks on which some
        # parameter got no gradient, so that every rank learns it with no extra collective.
        self.flag = n if flag else None
        self.flat = np.zeros(n + int(flag), dtype)
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
        if self.buckets:
            last = self.buckets[-1]
            self.buckets[-1] = _Bucket(last.params, last.flat.dtype, flag=True)
        self.ids = {p._autograd_id: (name, p) for name, p in named}
        for b, bucket in enumerate(self.buckets):
            for s, (_, q) in enumerate(bucket.params):
                self.where[id(q)] = (b, s)
        self.armed = False
        self.queued = False
        self.next_launch = 0
        # Parameters the forward's outputs do not reach (find_unused_parameters=True): marked
        # ready as the backward starts, so their buckets do not wait for gradients never coming.
        self.unreached: list[tuple[int, int]] = []
        self.handles = [p.register_hook(self._hook_for(p)) for _, p in named]

    def arm(self) -> None:
        for bucket in self.buckets:
            bucket.ready = [False] * len(bucket.params)
            bucket.count = 0
            bucket.work = None
            if bucket.flag is not None:
                bucket.flat[bucket.flag] = 0
        self.next_launch = 0
        self.armed = True
        self.queued = False
        self.unreached = []

    def mark_unreached(self, outputs: Any) -> None:
        """Find the parameters that no output of this forward depends on (a walk of the graph)."""
        seen: set[int] = set()
        reached: set[int] = set()
        stack = []
        for t in _tensors_in(outputs):
            if t.grad_fn is not None:
                stack.append(t.grad_fn)
            elif t.requires_grad:
                reached.add(t._autograd_id)
        while stack:
            node = stack.pop()
            nid = node._id
            if nid in seen:
                continue
            seen.add(nid)
            if node.name() == "AccumulateGrad":
                reached.add(nid)
                continue
            stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
        self.unreached = [self.where[id(p)] for pid, (_, p) in self.ids.items() if pid not in reached]

    def _hook_for(self, p: Tensor) -> Callable[[Tensor], None]:
        def hook(grad: Tensor) -> None:
            if self.armed:
                if not self.queued:
                    # Average once this backward has written every ``.grad``.
                    _queue_callback(self.finish)
                    self.queued = True
                    for ub, us in self.unreached:
                        self._fill(ub, us, None)
                    self.unreached = []
                b, s = self.where[id(p)]
                self._fill(b, s, grad)
            return None

        return hook

    def _fill(self, b: int, s: int, grad: Tensor | None) -> None:
        bucket = self.buckets[b]
        if bucket.ready[s]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {bucket.params[s][0]} received its gradient twice in one "
                "backward (reentrant backward or two backward calls per forward are not supported; with "
                "find_unused_parameters=True, a parameter the forward's outputs do not reach must not get "
                "a gradient from elsewhere in the loss)"
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
        last = self.buckets[-1]
        if unused and not self.ddp.find_unused_parameters:
            assert last.flag is not None and last.work is None
            last.flat[last.flag] = 1
        # Every bucket is reduced even when this step fails, so that no rank is left waiting in a
        # collective that the others never start.
        for b, s, _ in unused:
            self._fill(b, s, None)
        for bucket in self.buckets:
            assert bucket.work is not None
            t0 = dist._clock()
            bucket.work.wait()
            self.ddp._comm_wait_s += dist._clock() - t0
        failed = 0 if last.flag is None else int(last.flat[last.flag])
        if failed:
            if unused:
                names = ", ".join(name for _, _, name in unused)
                where = f"these parameters received no gradient in this backward on rank {dist.get_rank()}: {names}"
            else:
                where = "some parameters received no gradient in this backward on another rank"
            raise RuntimeError(
                f"DistributedDataParallel: {where} (unused parameters on {failed} of "
                f"{dist.get_world_size()} ranks). Pass find_unused_parameters=True if parts of the model "
                "are unused in some steps (they are then averaged as zero gradients), or make every "
                "parameter take part in the loss. No gradient was averaged in this step."
            )
        world = dist.get_world_size()
        for bucket in self.buckets:
            bucket.flat /= world
            for s, (_, p) in enumerate(bucket.params):
                off = bucket.offsets[s]
                avg = bucket.flat[off : off + p.numel()].reshape(tuple(p.shape))
                if p.grad is None:
                    p.grad = from_numpy(avg.copy())
                else:
                    with no_grad():
                        p.grad.copy_(from_numpy(avg))


def _layout(module: Module, reducer: _Reducer) -> dict[str, list[Any]]:
    """What must agree across ranks: every parameter and buffer, in order, and the gradient buckets."""
    return {
        "parameter": [
            (n, tuple(p.shape), str(p.dtype), bool(p.requires_grad)) for n, p in module.named_parameters()
        ],
        "buffer": [(n, tuple(b.shape), str(b.dtype)) for n, b in module.named_buffers()],
        "bucket": [([n for n, _ in b.params], str(b.flat.dtype), int(b.flat.size)) for b in reducer.buckets],
    }


def _first_mismatch(layouts: list[dict[str, list[Any]]]) -> str:
    """Name the first parameter, buffer or bucket that differs between rank 0 and another rank."""
    ref = layouts[0]
    fields = {
        "parameter": ("name", "shape", "dtype", "requires_grad"),
        "buffer": ("name", "shape", "dtype"),
        "bucket": ("parameters", "dtype", "elements"),
    }
    for r, other in enumerate(layouts[1:], start=1):
        for kind, names in fields.items():
            a, b = ref[kind], other[kind]
            for i in range(max(len(a), len(b))):
                if i >= len(a) or i >= len(b):
                    return (
                        f"the model differs across ranks: rank 0 has {len(a)} {kind}s and rank {r} has "
                        f"{len(b)} (the first {min(len(a), len(b))} agree); every rank must build the same model"
                    )
                if a[i] != b[i]:
                    diff = ", ".join(
                        f"{f} {x!r} on rank 0 but {y!r} on rank {r}"
                        for f, x, y in zip(names, a[i], b[i], strict=True)
                        if x != y
                    )
                    if kind == "bucket":
                        return (
                            f"gradient bucket {i} differs across ranks: {diff} (is bucket_cap_mb the same?)"
                        )
                    return f"{kind} {i} ({a[i][0]}) differs across ranks: {diff}; every rank must build the same model"
    return "the model differs across ranks"


def _tensors_in(obj: Any) -> Iterator[Tensor]:
    """The tensors in a forward's result (nested tuples, lists and dicts)."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o)


class DistributedDataParallel(Module):
    """Wrap ``module`` so that every rank trains the same model on its own share of the data.

    Gradients are averaged over ranks during ``backward()``: each bucket of
    about ``bucket_cap_mb`` megabytes starts a nonblocking all-reduce as soon
    as its gradients are ready, and ``backward()`` returns once all have
    finished, with the averages in each parameter's ``.grad``.

    ``find_unused_parameters=True`` lets some parameters receive no gradient
    in a step: each forward walks the autograd graph from its outputs, and the
    parameters it does not reach count as zero gradients from the start of
    backward, so their buckets do not wait. Otherwise such a step raises the
    same error on every rank (naming the parameters on the rank that had
    them), with every all-reduce completed and no rank left waiting.
    Construction checks that every rank has the same parameters, buffers and
    buckets (names, shapes, dtypes, ``requires_grad``, ``bucket_cap_mb``) and
    raises ``ValueError`` naming the first difference. ``broadcast_buffers=True`` copies rank 0's buffers (e.g. batch
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
        self._reducer = _Reducer(self, int(bucket_cap_mb * 1024 * 1024))
        try:
            dist.check_same_across_ranks(
                "DistributedDataParallel", _layout(module, self._reducer), _first_mismatch
            )
        except ValueError:
            for h in self._reducer.handles:
                h.remove()
            raise
        with no_grad():
            for p in module.parameters():
                dist.broadcast(p.detach(), src=0)
            for b in module.buffers():
                dist.broadcast(b, src=0)

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
        out = self.module(*args, **kwargs)
        if self.find_unused_parameters and self._reducer.armed:
            self._reducer.mark_unreached(out)
        return out
