"""How ``multiprocessing`` sends tensors: a shared tensor as a handle to its memory, any
other tensor as a copy of its values.

``multiprocessing`` pickles what crosses a process boundary (``Process`` arguments with the
``spawn`` and ``forkserver`` start methods, ``Queue``, ``Pipe``, ``Pool``) with its
``ForkingPickler``. :func:`init_reductions` registers a reducer there for ``Tensor`` and its
subclasses (``nn.Parameter``, ...). For a tensor whose data is in shared memory
(:meth:`Tensor.share_memory_`), the reducer sends a duplicate of the shared memory file's
descriptor (through ``multiprocessing.reduction.DupFd``: handed to the child at start, or
passed over a Unix socket by the sender's resource sharer) with the tensor's dtype, shape,
strides and offset; the receiver maps the same memory, so its writes are seen by the sender
and the other receivers. Any other tensor pickles as its values (``__reduce_ex__``), so the
receiver gets a copy. The plain ``pickle`` module always copies.

As in PyTorch, a receiver of a queue message must take it while the sender still runs (the
descriptor is passed on request), and ``.grad`` is not sent.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from . import _core
from ._pickling import _check_leaf

Tensor = _core.Tensor

_registered = False
# The descriptor handles made while one process is being started, by the object that
# starts it: the same memory file goes to the child once, however many tensors use it.
_handles_by_popen: weakref.WeakKeyDictionary[Any, dict[int, _SharedFd]] = weakref.WeakKeyDictionary()


class _SharedFd:
    """A shared memory file's descriptor on its way to another process.

    The sender's side wraps a ``multiprocessing.reduction.DupFd``; the receiver's side holds
    the received descriptor, hands each tensor rebuilt from it a duplicate (:meth:`take`)
    and closes it when unpickling is done with it.
    """

    def __init__(self, fd: int) -> None:
        from multiprocessing import reduction

        self._dup: Any = reduction.DupFd(fd)
        self.fd: int | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_received_fd, (self._dup,))

    def take(self) -> int:
        """A new descriptor of the memory file, for the caller to own."""
        if self.fd is None:
            raise RuntimeError("share_memory_: this descriptor handle was not received from another process")
        return os.dup(self.fd)

    def __del__(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _received_fd(dup: Any) -> _SharedFd:
    h = _SharedFd.__new__(_SharedFd)
    h._dup = None
    h.fd = dup.detach()
    return h


def _fd_handle(fd: int) -> _SharedFd:
    from multiprocessing import context

    popen = context.get_spawning_popen()
    if popen is None:
        return _SharedFd(fd)
    try:
        handles = _handles_by_popen.setdefault(popen, {})
    except TypeError:  # an object without weak references: no sharing of handles
        return _SharedFd(fd)
    if fd not in handles:
        handles[fd] = _SharedFd(fd)
    return handles[fd]


def _dtype_name(t: Tensor) -> str:
    return str(t.dtype).replace("ferrograd.", "")


def _reduce_tensor(t: Tensor) -> tuple[Any, ...]:
    """``ForkingPickler``'s reducer for tensors: a handle for shared ones, a copy otherwise."""
    handle = t._shared_handle()
    if handle is None:
        return t.__reduce_ex__(4)
    _check_leaf(t, "multiprocessing")
    fd, nbytes, offset, shape, strides = handle
    state = dict(t.__dict__) if getattr(t, "__dict__", None) else None
    args = (
        type(t),
        _fd_handle(fd),
        nbytes,
        _dtype_name(t),
        tuple(shape),
        tuple(strides),
        offset,
        bool(t.requires_grad),
    )
    return (_rebuild_shared, args, state)


def _rebuild_shared(
    cls: type,
    handle: _SharedFd,
    nbytes: int,
    dtype: str,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    requires_grad: bool,
) -> Tensor:
    init_reductions()
    t = _core._from_shared_fd(handle.take(), nbytes, dtype, list(shape), list(strides), offset)
    if cls is Tensor:
        return t.requires_grad_(True) if requires_grad else t
    return cls(t, requires_grad)


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out


def _register_subclass(cls: type, **kwargs: Any) -> None:
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(cls, _reduce_tensor)


def init_reductions() -> None:
    """Register the tensor reducer with ``multiprocessing``'s pickler (once per process;
    ``share_memory_`` and ``ferrograd.multiprocessing`` call it). Subclasses of ``Tensor``
    defined later are registered as they are defined."""
    global _registered
    if _registered:
        return
    from multiprocessing.reduction import ForkingPickler

    for cls in _subclasses(Tensor):
        ForkingPickler.register(cls, _reduce_tensor)
    Tensor.__init_subclass__ = classmethod(_register_subclass)  # type: ignore[assignment,method-assign]
    _registered = True


def install() -> None:
    """Make ``Tensor.share_memory_`` register the reducer (:func:`init_reductions`) the
    first time a tensor is shared, so that ``multiprocessing`` sends it as a handle."""
    core_share = Tensor.share_memory_

    def share_memory_(self: Tensor) -> Tensor:
        core_share(self)
        if not _registered:
            init_reductions()
        return self

    share_memory_.__doc__ = core_share.__doc__
    share_memory_.__qualname__ = "Tensor.share_memory_"
    Tensor.share_memory_ = share_memory_  # type: ignore[method-assign]
