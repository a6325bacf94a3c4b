"""Collectives between processes over MPI, as ``torch.distributed``.

Launch one process per rank with the MPI launcher and initialise once::

    # mpiexec -n 2 python train.py
    import ferrograd as fg
    fg.distributed.init_process_group(backend="mpi")
    t = fg.ones(4) * fg.distributed.get_rank()
    fg.distributed.all_reduce(t)          # in place: the sum over ranks

Transport is ``mpi4py`` (install ``ferrograd[mpi]``, which brings an MPI
runtime from PyPI). Collectives run on the tensor's own memory when it is a
contiguous CPU tensor of a supported dtype (float32, float64, int32, int64,
bool): the MPI call reads and writes the storage directly, with no copy. A
non-contiguous tensor goes through a contiguous staging buffer and the result
is written back into the view's elements. Every in-place result bumps the
tensor's version counter, as an in-place op does, so autograd notices a write
to a tensor it saved.

``async_op=True`` starts a nonblocking MPI collective (``Iallreduce`` and
friends) and returns a :class:`Work`; the call is in flight until
:meth:`Work.wait`. Set ``FERROGRAD_DISTRIBUTED_DEBUG=1`` to check, before each
collective, that every rank passes the same shape and dtype (one extra small
all-gather per call).
"""

from __future__ import annotations

import enum
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from ._core import Tensor

__all__ = [
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "gather",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "send",
]

# Environment variables that MPI launchers set in each rank (MPICH/Hydra, Open MPI, PMIx, Slurm).
_LAUNCHER_VARS = (
    "PMI_RANK",
    "PMI_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_RANK",
    "MPI_LOCALRANKID",
    "SLURM_PROCID",
)
_DTYPES = {"float32", "float64", "int32", "int64", "bool"}


class ReduceOp(enum.Enum):
    """How :func:`all_reduce`, :func:`reduce` and :func:`reduce_scatter` combine values across ranks."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


class _State:
    comm: Any = None
    mpi: Any = None
    old_excepthook: Callable[..., Any] | None = None


_state = _State()


def is_available() -> bool:
    """True when ``mpi4py`` can be imported (the ``ferrograd[mpi]`` extra is installed)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_initialized() -> bool:
    """True between :func:`init_process_group` and :func:`destroy_process_group`."""
    return _state.comm is not None


def _launched_under_mpi() -> bool:
    return any(v in os.environ for v in _LAUNCHER_VARS)


def _abort_hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    # The rank that failed prints its own traceback, then takes the whole job down so that the other
    # ranks, waiting in a collective for it, do not hang.
    rank = _state.comm.Get_rank() if _state.comm is not None else "?"
    sys.stderr.write(f"[rank {rank}] uncaught exception; aborting all ranks\n")
    sys.stderr.write("".join(traceback.format_exception(kind, value, tb)))
    sys.stderr.flush()
    if _state.comm is not None:
        # MPI_Abort tears down the launcher's output forwarding at once; give it a moment to pass the
        # traceback on first (otherwise it is sometimes lost).
        time.sleep(0.5)
        _state.mpi.COMM_WORLD.Abort(1)


def init_process_group(backend: str = "mpi", *, abort_on_exception: bool = True, **_kwargs: Any) -> None:
    """Join the job started by the MPI launcher (``mpiexec -n N python script.py``).

    Rank and world size come from the launcher. With ``abort_on_exception`` (the
    default) an uncaught exception on any rank prints that rank's traceback and
    aborts every rank (``MPI_Abort``) instead of leaving the others waiting in
    a collective. Other keyword arguments of ``torch.distributed`` (``init_method``,
    ``world_size``, ``rank``) are accepted and ignored: MPI decides them.
    """
    if backend != "mpi":
        raise ValueError(f"init_process_group: backend {backend!r} is not supported; use backend='mpi'")
    if _state.comm is not None:
        raise RuntimeError("init_process_group: already initialised (call destroy_process_group first)")
    try:
        import mpi4py
    except ImportError as e:
        raise ImportError(
            "init_process_group: mpi4py is not installed; install the extra: pip install 'ferrograd[mpi]'"
        ) from e
    if not _launched_under_mpi():
        raise RuntimeError(
            "init_process_group: this process was not started by an MPI launcher; "
            "run it as `mpiexec -n 2 python your_script.py` (mpiexec comes with ferrograd[mpi])"
        )
    mpi4py.rc.threads = False  # FUNNELED is enough: only the calling thread talks to MPI
    from mpi4py import MPI

    _state.mpi = MPI
    _state.comm = MPI.COMM_WORLD.Dup()
    if abort_on_exception:
        _state.old_excepthook = sys.excepthook
        sys.excepthook = _abort_hook


def destroy_process_group() -> None:
    """Leave the process group (collectives raise afterwards); restores the exception hook."""
    if _state.comm is None:
        return
    _state.comm.Free()
    _state.comm = None
    if _state.old_excepthook is not None:
        sys.excepthook = _state.old_excepthook
        _state.old_excepthook = None


def _comm() -> Any:
    if _state.comm is None:
        raise RuntimeError("fg.distributed: call init_process_group(backend='mpi') first")
    return _state.comm


def get_rank() -> int:
    """This process's rank, 0 ≤ rank < world size."""
    return int(_comm().Get_rank())


def get_world_size() -> int:
    """The number of processes in the job."""
    return int(_comm().Get_size())


def barrier() -> None:
    """Block until every rank has called ``barrier``."""
    _comm().Barrier()


# --- buffers -------------------------------------------------------------------------------------


def _bump_version(t: Tensor) -> None:
    # An in-place op on an empty view bumps the version counter that the view shares with ``t``
    # without touching any element.
    if t.dim() == 0:
        t.copy_(t.clone())
    else:
        t[:0].zero_()


class _Buf:
    """The memory an MPI call works on for one tensor: its storage, or a contiguous staging copy."""

    __slots__ = ("tensor", "view", "array")

    def __init__(self, tensor: Tensor, what: str, *, read: bool = True) -> None:
        _comm()  # a clear error before init_process_group
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{what}: expected a ferrograd Tensor, got {type(tensor).__name__}")
        if tensor.device.type != "cpu":
            raise RuntimeError(
                f"{what}: tensor is on {tensor.device}; collectives work on CPU tensors only "
                "(move it with .cpu() first)"
            )
        name = str(tensor.dtype).removeprefix("ferrograd.")
        if name not in _DTYPES:
            raise TypeError(f"{what}: dtype {name} is not supported (use one of {sorted(_DTYPES)})")
        self.tensor = tensor
        self.view = np.asarray(tensor)  # shares the tensor's storage (strided for a view)
        if self.view.flags.c_contiguous:
            self.array = self.view
        elif read:
            self.array = np.ascontiguousarray(self.view)
        else:
            self.array = np.empty(self.view.shape, self.view.dtype)

    def written(self) -> None:
        """The MPI call wrote ``array``: land it in the tensor and bump its version."""
        if self.array is not self.view:
            self.view[...] = self.array
        _bump_version(self.tensor)


class Work:
    """A collective in flight (``async_op=True``): :meth:`wait` blocks until it has finished."""

    def __init__(self, requests: Sequence[Any], finish: Callable[[], None] | None, keep: Any = None) -> None:
        self._requests = list(requests)
        self._finish = finish
        self._keep = keep  # buffers MPI is using stay alive until completion
        self._done = False

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            self._finish()
            self._finish = None
        self._keep = None

    def wait(self, timeout: Any = None) -> bool:
        """Block until the operation has finished and its result is in the output tensors."""
        if not self._done:
            _state.mpi.Request.Waitall(self._requests)
            self._complete()
        return True

    def is_completed(self) -> bool:
        """Poll without blocking (it also lets MPI progress the operation)."""
        if not self._done and _state.mpi.Request.Testall(self._requests):
            self._complete()
        return self._done

    def is_success(self) -> bool:
        """True once completed (MPI errors abort the job rather than fail one request)."""
        return self._done


def _run(
    requests: Sequence[Any], finish: Callable[[], None] | None, keep: Any, async_op: bool
) -> Work | None:
    work = Work(requests, finish, keep)
    if async_op:
        return work
    work.wait()
    return None


def _mpi_op(op: ReduceOp, dtype: np.dtype, what: str) -> Any:
    mpi = _state.mpi
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a ReduceOp, got {op!r}")
    if dtype == np.bool_:
        if op is ReduceOp.AVG:
            raise TypeError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got bool")
        return {
            ReduceOp.SUM: mpi.LOR,
            ReduceOp.MAX: mpi.LOR,
            ReduceOp.MIN: mpi.LAND,
            ReduceOp.PRODUCT: mpi.LAND,
        }[op]
    if op is ReduceOp.AVG and dtype.kind != "f":
        raise TypeError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got {dtype}")
    return {
        ReduceOp.SUM: mpi.SUM,
        ReduceOp.AVG: mpi.SUM,
        ReduceOp.MAX: mpi.MAX,
        ReduceOp.MIN: mpi.MIN,
        ReduceOp.PRODUCT: mpi.PROD,
    }[op]


def _debug_check(what: str, *tensors: Tensor) -> None:
    if os.environ.get("FERROGRAD_DISTRIBUTED_DEBUG", "") in ("", "0"):
        return
    check_same_across_ranks(what, [(tuple(t.shape), str(t.dtype)) for t in tensors])


def check_same_across_ranks(
    what: str, signature: Any, describe: Callable[[list[Any]], str] | None = None
) -> None:
    """Raise the same ``ValueError`` on every rank when ``signature`` differs between ranks.

    ``describe(signatures)``, given every rank's signature, may word the
    difference; by default the message lists each rank's signature.
    """
    sigs = _comm().allgather(signature)
    if any(s != sigs[0] for s in sigs):
        if describe is not None:
            raise ValueError(f"{what}: {describe(sigs)}")
        lines = "; ".join(f"rank {r}: {s}" for r, s in enumerate(sigs))
        raise ValueError(f"{what}: tensor shapes or dtypes differ across ranks ({lines})")


# --- collectives ---------------------------------------------------------------------------------


def all_reduce(
    tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Work | None:
    """Combine ``tensor`` over all ranks with ``op``; every rank gets the result in place."""
    _debug_check("all_reduce", tensor)
    b = _Buf(tensor, "all_reduce")
    mop = _mpi_op(op, b.array.dtype, "all_reduce")
    size = get_world_size()
    req = _comm().Iallreduce(_state.mpi.IN_PLACE, b.array, mop)

    def finish() -> None:
        if op is ReduceOp.AVG:
            b.array /= size
        b.written()

    return _run([req], finish, b, async_op)


def broadcast(tensor: Tensor, src: int = 0, group: Any = None, async_op: bool = False) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every other rank."""
    _debug_check("broadcast", tensor)
    root = get_rank() == src
    b = _Buf(tensor, "broadcast", read=root)
    req = _comm().Ibcast(b.array, root=src)
    return _run([req], None if root else b.written, b, async_op)


def all_gather(
    tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False
) -> Work | None:
    """Fill ``tensor_list[r]`` with rank ``r``'s ``tensor`` on every rank."""
    _debug_check("all_gather", tensor)
    n = get_world_size()
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the world size is {n}")
    src = _Buf(tensor, "all_gather")
    outs = [_Buf(t, "all_gather", read=False) for t in tensor_list]
    for o in outs:
        if o.array.shape != src.array.shape:
            raise ValueError(f"all_gather: output shape {o.array.shape} != input shape {src.array.shape}")
    recv = np.empty((n, *src.array.shape), src.array.dtype)
    req = _comm().Iallgather(src.array, recv)

    def finish() -> None:
        for r, o in enumerate(outs):
            o.array[...] = recv[r]
            o.written()

    return _run([req], finish, (src, outs, recv), async_op)


def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: Any = None, async_op: bool = False
) -> Work | None:
    """Concatenate every rank's ``input_tensor`` along dim 0 into ``output_tensor`` (or stack if its
    first dim is the world size and the rest matches the input)."""
    _debug_check("all_gather_into_tensor", input_tensor)
    src = _Buf(input_tensor, "all_gather_into_tensor")
    out = _Buf(output_tensor, "all_gather_into_tensor", read=False)
    if out.array.size != src.array.size * get_world_size():
        raise ValueError(
            f"all_gather_into_tensor: output has {out.array.size} elements, "
            f"expected world size × {src.array.size}"
        )
    req = _comm().Iallgather(src.array, out.array)
    return _run([req], out.written, (src, out), async_op)


def reduce_scatter(
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``input_list[r]`` over ranks with ``op``; rank ``r`` gets the result in ``output``."""
    n = get_world_size()
    if len(input_list) != n:
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors, the world size is {n}")
    _debug_check("reduce_scatter", output, *input_list)
    out = _Buf(output, "reduce_scatter", read=False)
    send = np.stack([_Buf(t, "reduce_scatter").view for t in input_list])
    if send.shape[1:] != out.array.shape:
        raise ValueError(f"reduce_scatter: input shape {send.shape[1:]} != output shape {out.array.shape}")
    return _reduce_scatter(out, send, op, async_op, "reduce_scatter")


def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Work | None:
    """As :func:`reduce_scatter` with the inputs concatenated along dim 0 in one tensor."""
    _debug_check("reduce_scatter_tensor", output, input)
    out = _Buf(output, "reduce_scatter_tensor", read=False)
    src = _Buf(input, "reduce_scatter_tensor")
    if src.array.size != out.array.size * get_world_size():
        raise ValueError(
            f"reduce_scatter_tensor: input has {src.array.size} elements, expected world size × {out.array.size}"
        )
    return _reduce_scatter(out, src.array, op, async_op, "reduce_scatter_tensor")


def _reduce_scatter(out: _Buf, send: np.ndarray, op: ReduceOp, async_op: bool, what: str) -> Work | None:
    mop = _mpi_op(op, out.array.dtype, what)
    size = get_world_size()
    req = _comm().Ireduce_scatter_block(send, out.array, mop)

    def finish() -> None:
        if op is ReduceOp.AVG:
            out.array /= size
        out.written()

    return _run([req], finish, (out, send), async_op)


def reduce(
    tensor: Tensor, dst: int = 0, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Work | None:
    """Combine ``tensor`` over ranks with ``op`` into rank ``dst``'s tensor (others are unchanged)."""
    _debug_check("reduce", tensor)
    b = _Buf(tensor, "reduce")
    mop = _mpi_op(op, b.array.dtype, "reduce")
    size = get_world_size()
    root = get_rank() == dst
    if root:
        req = _comm().Ireduce(_state.mpi.IN_PLACE, b.array, mop, root=dst)
    else:
        req = _comm().Ireduce(b.array, None, mop, root=dst)

    def finish() -> None:
        if root:
            if op is ReduceOp.AVG:
                b.array /= size
            b.written()

    return _run([req], finish, b, async_op)


def gather(
    tensor: Tensor,
    gather_list: list[Tensor] | None = None,
    dst: int = 0,
    group: Any = None,
    async_op: bool = False,
) -> Work | None:
    """Rank ``dst`` receives every rank's ``tensor`` in ``gather_list`` (None on the other ranks)."""
    _debug_check("gather", tensor)
    src = _Buf(tensor, "gather")
    root = get_rank() == dst
    n = get_world_size()
    if root:
        if gather_list is None or len(gather_list) != n:
            raise ValueError(f"gather: rank {dst} needs a gather_list of {n} tensors")
        outs = [_Buf(t, "gather", read=False) for t in gather_list]
        recv: np.ndarray | None = np.empty((n, *src.array.shape), src.array.dtype)
    else:
        outs, recv = [], None
    req = _comm().Igather(src.array, recv, root=dst)

    def finish() -> None:
        for r, o in enumerate(outs):
            o.array[...] = recv[r]  # type: ignore[index]
            o.written()

    return _run([req], finish, (src, outs, recv), async_op)


def scatter(
    tensor: Tensor,
    scatter_list: list[Tensor] | None = None,
    src: int = 0,
    group: Any = None,
    async_op: bool = False,
) -> Work | None:
    """Rank ``r`` receives ``scatter_list[r]`` of rank ``src`` in ``tensor``."""
    _debug_check("scatter", tensor)
    out = _Buf(tensor, "scatter", read=False)
    n = get_world_size()
    send: np.ndarray | None = None
    if get_rank() == src:
        if scatter_list is None or len(scatter_list) != n:
            raise ValueError(f"scatter: rank {src} needs a scatter_list of {n} tensors")
        send = np.stack([_Buf(t, "scatter").view for t in scatter_list])
    req = _comm().Iscatter(send, out.array, root=src)
    return _run([req], out.written, (out, send), async_op)


def isend(tensor: Tensor, dst: int, group: Any = None, tag: int = 0) -> Work:
    """Start sending ``tensor`` to rank ``dst``; do not write to it until the Work completes."""
    b = _Buf(tensor, "isend")
    return Work([_comm().Isend(b.array, dest=dst, tag=tag)], None, b)


def irecv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0) -> Work:
    """Start receiving into ``tensor`` from rank ``src`` (any rank when None)."""
    b = _Buf(tensor, "irecv", read=False)
    source = _state.mpi.ANY_SOURCE if src is None else src
    return Work([_comm().Irecv(b.array, source=source, tag=tag)], b.written, b)


def send(tensor: Tensor, dst: int, group: Any = None, tag: int = 0) -> None:
    """Send ``tensor`` to rank ``dst`` (blocks until the buffer can be reused)."""
    b = _Buf(tensor, "send")
    _comm().Send(b.array, dest=dst, tag=tag)


def recv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0) -> int:
    """Receive into ``tensor`` from rank ``src`` (any rank when None); returns the sender's rank."""
    b = _Buf(tensor, "recv", read=False)
    status = _state.mpi.Status()
    source = _state.mpi.ANY_SOURCE if src is None else src
    _comm().Recv(b.array, source=source, tag=tag, status=status)
    b.written()
    return int(status.Get_source())


# --- for DistributedDataParallel ----------------------------------------------------------------


def _iallreduce_array(array: np.ndarray) -> Work:
    """Start a nonblocking in-place sum over ranks of a contiguous NumPy array."""
    return Work([_comm().Iallreduce(_state.mpi.IN_PLACE, array, _state.mpi.SUM)], None, array)


def _clock() -> float:
    import time

    return time.perf_counter()
