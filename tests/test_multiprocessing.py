"""``ferrograd.multiprocessing`` and shared-memory tensors: ``share_memory_`` keeps the
tensor, ``fork`` children and ``spawn`` receivers write into the parent's memory (hogwild
training, checked against a NumPy float64 replay), ``mp.spawn`` re-raises a child's error
with its traceback, non-shared tensors travel as copies, and no memory is left behind."""

from __future__ import annotations

import gc
import os
import pickle

import ferrograd as fg
import ferrograd.multiprocessing as mp
import numpy as np
import pytest
from ferrograd import nn, optim

_HAS_FORK = "fork" in mp.get_all_start_methods()
_JOIN = 60  # seconds: a hung child fails the test instead of the run


def _memfds() -> tuple[int, int]:
    """Descriptors and mappings of ferrograd's shared memory files in this process."""
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += "memfd:ferrograd-shm" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    with open("/proc/self/maps") as f:
        maps = sum("memfd:ferrograd-shm" in line for line in f)
    return fds, maps


def _join_all(procs: list) -> None:
    for p in procs:
        p.join(_JOIN)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.terminate()
    assert not alive, "a child process hung"
    assert [p.exitcode for p in procs] == [0] * len(procs)


# --------------------------------------------------------------------- share_memory_


@pytest.mark.covers("torch.Tensor.share_memory_", "torch.Tensor.is_shared")
def test_share_memory_keeps_the_tensor():
    p = fg.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, requires_grad=True)
    (p * 2).sum().backward()
    grad = p.grad
    with fg.no_grad():
        p.add_(1)
    version = p._version
    before = p.detach().numpy().copy()
    assert not p.is_shared()
    assert p.share_memory_() is p
    assert p.is_shared() and p.requires_grad and p.is_leaf
    assert p.grad._shares_storage(grad) and not p.grad.is_shared()  # the same gradient
    assert p._version == version
    np.testing.assert_array_equal(p.detach().numpy(), before)
    assert p[1].is_shared() and p.detach().is_shared()  # views of shared memory are shared
    handle = p._shared_handle()
    assert p.share_memory_() is p and p._shared_handle() == handle  # already shared: unchanged
    # Training goes on through the new memory: gradients accumulate, writes bump the version.
    (p * 3).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.full((3, 4), 5, np.float32))
    with fg.no_grad():
        p.mul_(2)
    assert p._version == version + 1
    np.testing.assert_array_equal(p.detach().numpy(), before * 2)

    # Strides and offset are kept: a transposed view stays transposed.
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = fg.tensor(base).t()
    assert t.share_memory_().stride() == (1, 4)
    np.testing.assert_array_equal(t.numpy(), base.T)


def test_share_memory_errors_name_the_op():
    if not fg.gpu.is_available():
        pytest.skip(f"no WebGPU adapter for the GPU case: {fg.gpu.unavailable_reason()}")
    g = fg.ones(3, device="gpu")
    with pytest.raises(RuntimeError, match=r"share_memory_.*gpu"):
        g.share_memory_()
    assert not g.is_shared()


def test_share_memory_view_of_grad_tensor_and_capture_raise():
    w = fg.ones(4, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"share_memory_: cannot move a view"):
        w[0].share_memory_()

    @fg.compile
    def f(x):
        x.share_memory_()
        return x + 1

    with pytest.raises(fg.TraceError, match="share_memory_"):
        f(fg.ones(2))


@pytest.mark.covers("torch.nn.Module.share_memory")
def test_module_share_memory_in_place_and_optimizer_still_updates():
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    opt = optim.SGD(model.parameters(), lr=0.5)
    params = list(model.parameters())
    x = fg.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
    model(x).pow(2).mean().backward()
    assert model.share_memory() is model
    assert all(a is b for a, b in zip(params, model.parameters(), strict=True))
    assert all(p.is_shared() and p.grad.is_shared() for p in model.parameters())
    assert all(b.is_shared() for b in model.buffers())
    before = [p.detach().numpy().astype(np.float64) for p in params]
    grads = [p.grad.numpy().astype(np.float64) for p in params]
    opt.step()  # built before share_memory(): updates the shared tensors
    for p, b, g in zip(params, before, grads, strict=True):
        assert p.is_shared()
        np.testing.assert_allclose(p.detach().numpy(), b - 0.5 * g, rtol=1e-6, atol=1e-7)


def test_plain_pickle_copies_forking_pickler_shares():
    from multiprocessing.reduction import ForkingPickler

    t = fg.tensor(np.arange(8, dtype=np.float32)).share_memory_()
    c = pickle.loads(pickle.dumps(t))  # a file format: values, never a handle
    assert not c.is_shared()
    np.testing.assert_array_equal(c.numpy(), np.arange(8))
    view = t[2:6]
    r = ForkingPickler.loads(ForkingPickler.dumps(view))  # through this process's descriptor sharer
    assert r.is_shared() and r.shape == (4,)
    r.add_(100)
    np.testing.assert_array_equal(t.numpy(), np.arange(8) + 100 * ((np.arange(8) >= 2) & (np.arange(8) < 6)))
    u = fg.tensor(np.ones(3, np.float32))
    ucopy = ForkingPickler.loads(ForkingPickler.dumps(u))  # not shared: a copy
    ucopy.add_(1)
    assert not ucopy.is_shared()
    np.testing.assert_array_equal(u.numpy(), np.ones(3))


@pytest.mark.covers(
    "torch.multiprocessing.get_sharing_strategy",
    "torch.multiprocessing.set_sharing_strategy",
    "torch.multiprocessing.get_all_sharing_strategies",
)
def test_sharing_strategies():
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert mp.get_sharing_strategy() == "file_descriptor"
    try:
        mp.set_sharing_strategy("file_system")
        assert mp.get_sharing_strategy() == "file_system"
        with pytest.raises(ValueError, match="set_sharing_strategy"):
            mp.set_sharing_strategy("carrier_pigeon")
    finally:
        mp.set_sharing_strategy("file_descriptor")
    assert mp.cpu_count() >= 1 and mp.get_start_method(allow_none=True) in (None, *mp.get_all_start_methods())


# ------------------------------------------------------------------------- hogwild

_LR, _MOMENTUM, _STEPS, _BATCH = 0.1, 0.5, 6, 8


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(fg.tanh(self.fc1(x)))


def _batches(rank: int):
    rs = np.random.RandomState(100 + rank)
    for _ in range(_STEPS):
        x = rs.uniform(-1, 1, (_BATCH, 4))
        yield x, np.sin(x.sum(1, keepdims=True))


def _train(rank: int, model: _Net) -> None:
    """The hogwild worker: its own optimizer over the shared parameters."""
    opt = optim.SGD(model.parameters(), lr=_LR, momentum=_MOMENTUM)
    for x, y in _batches(rank):
        opt.zero_grad()
        out = model(fg.tensor(x.astype(np.float32)))
        fg.nn.functional.mse_loss(out, fg.tensor(y.astype(np.float32))).backward()
        opt.step()


def _numpy_train(rank: int, w: list[np.ndarray]) -> list[np.ndarray]:
    """``_train`` in NumPy float64 (forward, backward and SGD with momentum by hand)."""
    w1, b1, w2, b2 = (a.copy() for a in w)
    bufs = None
    for x, y in _batches(rank):
        h = np.tanh(x @ w1.T + b1)
        out = h @ w2.T + b2
        dout = 2 * (out - y) / out.size
        dh = dout @ w2
        dz = dh * (1 - h**2)
        grads = [dz.T @ x, dz.sum(0), dout.T @ h, dout.sum(0)]
        bufs = grads if bufs is None else [_MOMENTUM * b + g for b, g in zip(bufs, grads, strict=True)]
        w1, b1, w2, b2 = (p - _LR * b for p, b in zip((w1, b1, w2, b2), bufs, strict=True))
    return [w1, b1, w2, b2]


def _weights(model: _Net) -> list[np.ndarray]:
    return [p.detach().numpy().astype(np.float64) for p in model.parameters()]


def _sequential_worker(rank: int, model: _Net, go, done) -> None:
    if rank:
        assert go.wait(_JOIN)
    _train(rank, model)
    done.set()


def _hogwild_worker(rank: int, model: _Net, barrier, results) -> None:
    _train(rank, model)
    barrier.wait(_JOIN)  # everyone's writes are done
    results.put((rank, _weights(model)))


@pytest.mark.skipif(not _HAS_FORK, reason="the fork start method is not available on this platform")
def test_hogwild_fork_children_train_the_parents_parameters():
    ctx = mp.get_context("fork")
    fg.manual_seed(1)
    model = _Net()
    model.share_memory()
    w0 = _weights(model)
    # One after the other: the parent's weights are the NumPy replay of both workers in turn.
    go, done = ctx.Event(), ctx.Event()
    procs = [ctx.Process(target=_sequential_worker, args=(r, model, go, done if r else go)) for r in (0, 1)]
    for p in procs:
        p.start()
    _join_all(procs)
    assert done.is_set()
    want = _numpy_train(1, _numpy_train(0, w0))
    for got, ref in zip(_weights(model), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)

    # Hogwild proper: both at once, lock-free; the parent sees what the children wrote.
    fg.manual_seed(2)
    model = _Net()
    model.share_memory()
    xe = np.random.RandomState(7).uniform(-1, 1, (64, 4))
    ye = np.sin(xe.sum(1, keepdims=True))

    def loss() -> float:
        with fg.no_grad():
            out = model(fg.tensor(xe.astype(np.float32))).numpy().astype(np.float64)
        return float(((out - ye) ** 2).mean())

    first, w0 = loss(), _weights(model)
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_hogwild_worker, args=(r, model, barrier, results)) for r in (0, 1)]
    for p in procs:
        p.start()
    seen = dict(results.get(timeout=_JOIN) for _ in procs)
    _join_all(procs)
    after = _weights(model)
    assert any(not np.array_equal(a, b) for a, b in zip(after, w0, strict=True))
    for rank in (0, 1):
        for got, child in zip(after, seen[rank], strict=True):
            np.testing.assert_array_equal(got, child)
    assert loss() < first


# ------------------------------------------------------------- default context


def _queue_child(inbox, outbox) -> None:
    t = inbox.get(timeout=_JOIN)
    t.mul_(-1)
    outbox.put(t.is_shared())


def _pool_fn(job: tuple) -> bool:
    t, i = job
    t[i] = float(10 * i)
    return t.is_shared()


@pytest.mark.skipif(not _HAS_FORK, reason="the fork start method is not available on this platform")
def test_default_context_process_queue_pool_and_start_method():
    old = mp.get_start_method(allow_none=True)
    try:
        mp.set_start_method("fork", force=True)
        assert mp.get_start_method() == "fork"
        t = fg.tensor(np.arange(1, 5, dtype=np.float32)).share_memory_()
        inbox, outbox = mp.Queue(), mp.Queue()
        p = mp.Process(target=_queue_child, args=(inbox, outbox))
        p.start()
        inbox.put(t)  # through the queue: a handle, even to a forked child
        assert outbox.get(timeout=_JOIN) is True
        _join_all([p])
        np.testing.assert_array_equal(t.numpy(), -np.arange(1, 5))
        with mp.Pool(2) as pool:
            shared = pool.map(_pool_fn, [(t, i) for i in range(4)])
        np.testing.assert_array_equal(t.numpy(), [0, 10, 20, 30])
        assert shared == [True] * 4
    finally:
        mp.set_start_method(old, force=True)


# --------------------------------------------------------------------------- spawn


def _spawn_child(model: nn.Linear, inbox, outbox) -> None:
    """Runs in a spawned process: writes into a shared module given as a Process argument
    and into a shared tensor taken from a queue, and reports what it saw of a non-shared
    tensor."""
    shared = inbox.get(timeout=_JOIN)
    plain = inbox.get(timeout=_JOIN)
    w = model.weight
    report = (type(w).__name__, w.requires_grad, w.is_shared(), shared.is_shared(), plain.is_shared())
    report += (plain.numpy().tolist(),)
    with fg.no_grad():
        w.add_(10)
    shared[1:].fill_(7)
    plain.fill_(-1)
    outbox.put(report)


@pytest.mark.covers("torch.multiprocessing.Process", "torch.multiprocessing.Queue")
def test_spawn_process_args_and_queue_send_handles_non_shared_copies():
    ctx = mp.get_context("spawn")
    model = nn.Linear(3, 2).share_memory()
    w0 = model.weight.detach().numpy().copy()
    shared = fg.zeros(4, dtype=fg.float64).share_memory_()
    plain = fg.tensor(np.array([1.5, 2.5], np.float32))
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_spawn_child, args=(model, inbox, outbox))
    p.start()
    inbox.put(shared)
    inbox.put(plain)
    report = outbox.get(timeout=_JOIN)
    _join_all([p])
    assert report == ("Parameter", True, True, True, False, [1.5, 2.5])
    np.testing.assert_array_equal(model.weight.detach().numpy(), w0 + 10)
    np.testing.assert_array_equal(shared.numpy(), [0, 7, 7, 7])
    np.testing.assert_array_equal(plain.numpy(), [1.5, 2.5])  # the child wrote its copy


def _spawn_fn(i: int, t: fg.Tensor, fail: bool) -> None:
    if fail and i == 1:
        raise ValueError(f"worker {i} could not go on")
    t[i] = float(i + 1)


@pytest.mark.covers("torch.multiprocessing.spawn")
def test_mp_spawn_runs_fn_i_and_reraises_child_errors():
    t = fg.zeros(2).share_memory_()
    assert mp.spawn(_spawn_fn, args=(t, False), nprocs=2) is None
    np.testing.assert_array_equal(t.numpy(), [1, 2])

    method = "fork" if _HAS_FORK else "spawn"
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(_spawn_fn, args=(t, True), nprocs=2, start_method=method)
    msg = str(info.value)
    assert "Process 1 terminated with the following error" in msg
    assert "ValueError: worker 1 could not go on" in msg and "_spawn_fn" in msg  # the child's traceback
    assert info.value.error_index == 1

    context = mp.start_processes(_spawn_fn, args=(t, False), nprocs=1, join=False, start_method=method)
    assert len(context.pids()) == 1
    while not context.join(_JOIN):
        pass
    with pytest.raises(ValueError, match="nprocs"):
        mp.spawn(_spawn_fn, nprocs=0)


# ------------------------------------------------------------------------- cleanup


def test_shared_memory_is_released():
    from multiprocessing.reduction import ForkingPickler

    gc.collect()
    base = _memfds()
    shm = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    ts = [fg.ones(1000).share_memory_() for _ in range(3)]
    received = ForkingPickler.loads(ForkingPickler.dumps(ts[0]))
    fds, maps = _memfds()
    assert fds >= base[0] + 3 and maps >= base[1] + 4
    del ts, received
    gc.collect()
    assert _memfds() == base
    if shm or os.path.isdir("/dev/shm"):
        assert not [n for n in set(os.listdir("/dev/shm")) - shm if "ferrograd" in n]
