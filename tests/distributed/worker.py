"""Run under ``mpiexec -n 2`` by tests/test_distributed.py: many checks in one launch.

Every check prints ``OK <name>`` on rank 0; any failure raises, and the
exception hook installed by ``init_process_group`` prints the traceback and
aborts every rank, so the launcher exits non-zero.
"""

from __future__ import annotations

import sys

import ferrograd as fg
import ferrograd.distributed as dist
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np

dist.init_process_group(backend="mpi")
RANK = dist.get_rank()
WORLD = dist.get_world_size()
assert WORLD == 2, "run with mpiexec -n 2"
Op = dist.ReduceOp


def ok(name: str) -> None:
    dist.barrier()
    if RANK == 0:
        print("OK", name, flush=True)


def per_rank(shape: tuple[int, ...], dtype: str, r: int) -> np.ndarray:
    """Deterministic data that differs by rank (every rank can compute every rank's)."""
    rng = np.random.default_rng(1000 + r)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def all_ranks(shape: tuple[int, ...], dtype: str) -> list[np.ndarray]:
    return [per_rank(shape, dtype, r) for r in range(WORLD)]


NP_REDUCE = {
    Op.SUM: lambda xs: np.sum(xs, axis=0) if xs[0].dtype != np.bool_ else np.any(xs, axis=0),
    Op.MAX: lambda xs: np.max(xs, axis=0),
    Op.MIN: lambda xs: np.min(xs, axis=0),
    Op.PRODUCT: lambda xs: np.prod(xs, axis=0) if xs[0].dtype != np.bool_ else np.all(xs, axis=0),
    Op.AVG: lambda xs: np.mean(xs, axis=0),
}


def close(a: np.ndarray, b: np.ndarray) -> None:
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(a, b)


def t_of(a: np.ndarray) -> fg.Tensor:
    return fg.from_numpy(np.array(a, copy=True, order="C"))  # own memory: the inputs stay intact


# --- collectives against NumPy -------------------------------------------------------------------

for dtype in ("float32", "float64", "int32", "int64", "bool"):
    for shape in ((), (7,), (3, 5)):
        for op in Op:
            if op is Op.AVG and dtype in ("int32", "int64", "bool"):
                continue
            xs = all_ranks(shape, dtype)
            t = t_of(xs[RANK])
            addr, v0 = t.data_ptr(), t._version
            dist.all_reduce(t, op=op)
            close(t.numpy(), NP_REDUCE[op](xs).astype(dtype))
            assert t.data_ptr() == addr and t._version > v0, (
                "all_reduce must be in place and bump the version"
            )
ok("all_reduce dtypes x shapes x ops")

# zero copy: the MPI buffer is the tensor's storage
big = fg.ones(1 << 16)
b = dist._Buf(big, "check")
assert b.array is b.view and b.array.ctypes.data == big.data_ptr()
ok("contiguous tensors are reduced without a copy")

# non-contiguous views: the result lands in the view's elements, the rest is untouched
base = all_ranks((6, 8), "float32")
t = t_of(base[RANK])
view = t[1:5, ::3].T
dist.all_reduce(view)
want = base[RANK].copy()
want[1:5, ::3] = base[0][1:5, ::3] + base[1][1:5, ::3]
close(t.numpy(), want)
ok("all_reduce of a non-contiguous view")

# async: in flight while computation proceeds, correct after wait
n = 1 << 24  # 64 MB of float32
big = fg.full((n,), float(RANK + 1))
work = dist.all_reduce(big, async_op=True)
assert work is not None
in_flight = not work.is_completed()
a = fg.randn(256, 256)
for _ in range(5):
    a = (a @ a).tanh()
work.wait()
assert work.is_completed()
assert in_flight, "a 64 MB all_reduce finished before any computation ran: not asynchronous"
assert float(big[0]) == 3.0 and float(big[-1]) == 3.0
ok("async all_reduce is in flight while computation proceeds")

# broadcast, all_gather, all_gather_into_tensor, reduce_scatter(_tensor), reduce, gather, scatter
for dtype in ("float32", "int64", "bool"):
    xs = all_ranks((4, 3), dtype)
    t = t_of(xs[RANK])
    dist.broadcast(t, src=1)
    close(t.numpy(), xs[1])

    outs = [fg.from_numpy(np.zeros((4, 3), dtype)) for _ in range(WORLD)]
    dist.all_gather(outs, t_of(xs[RANK]))
    for r in range(WORLD):
        close(outs[r].numpy(), xs[r])

    out = fg.from_numpy(np.zeros((8, 3), dtype))
    dist.all_gather_into_tensor(out, t_of(xs[RANK]))
    close(out.numpy(), np.concatenate(xs))

    if dtype != "bool":
        ins = [all_ranks((4, 3), dtype)[RANK] * (k + 1) for k in range(WORLD)]
        out = fg.from_numpy(np.zeros((4, 3), dtype))
        dist.reduce_scatter(out, [t_of(a) for a in ins])
        close(out.numpy(), sum(per_rank((4, 3), dtype, r) * (RANK + 1) for r in range(WORLD)))
        out = fg.from_numpy(np.zeros((2, 3), dtype))
        dist.reduce_scatter_tensor(out, t_of(xs[RANK]), op=Op.MAX)
        close(out.numpy(), np.maximum(xs[0], xs[1])[2 * RANK : 2 * RANK + 2])

    t = t_of(xs[RANK])
    dist.reduce(t, dst=0, op=Op.MAX)
    close(t.numpy(), np.max(xs, axis=0) if RANK == 0 else xs[RANK])

    gl = [fg.from_numpy(np.zeros((4, 3), dtype)) for _ in range(WORLD)] if RANK == 1 else None
    dist.gather(t_of(xs[RANK]), gl, dst=1)
    if RANK == 1:
        assert gl is not None
        for r in range(WORLD):
            close(gl[r].numpy(), xs[r])

    out = fg.from_numpy(np.zeros((4, 3), dtype))
    dist.scatter(out, [t_of(per_rank((4, 3), dtype, 10 + r)) for r in range(WORLD)] if RANK == 0 else None)
    close(out.numpy(), per_rank((4, 3), dtype, 10 + RANK))
ok("broadcast, all_gather(_into_tensor), reduce_scatter(_tensor), reduce, gather, scatter")

# async forms of the other collectives, into non-contiguous outputs
xs = all_ranks((5, 4), "float64")
t = t_of(np.zeros((4, 5), "float64")).T
w = dist.broadcast(t if RANK else t_of(xs[0]), src=0, async_op=True)
assert w is not None
w.wait()
if RANK:
    close(t.numpy(), xs[0])
out = fg.zeros(10, 4, dtype=fg.float64)
w = dist.all_gather_into_tensor(out, t_of(xs[RANK]), async_op=True)
assert w is not None
w.wait()
close(out.numpy(), np.concatenate(xs))
ok("async broadcast into a view, async all_gather_into_tensor")

# point to point
x = t_of(per_rank((3, 3), "float32", 7))
if RANK == 0:
    dist.send(x, dst=1, tag=5)
    w = dist.irecv(y := fg.zeros(3, 3), src=1)
    w.wait()
    close(y.numpy(), per_rank((3, 3), "float32", 7) * 2)
else:
    y = fg.zeros(3, 3)
    assert dist.recv(y, src=None, tag=5) == 0
    close(y.numpy(), per_rank((3, 3), "float32", 7))
    dist.isend(y * 2, dst=0).wait()
ok("send/recv, isend/irecv")

# clear errors
for bad, what in ((lambda: dist.all_reduce(fg.ones(2, dtype=fg.float16)), "dtype float16"),):
    try:
        bad()
    except TypeError as e:
        assert "not supported" in str(e), e
    else:
        raise AssertionError(f"no error for {what}")
if fg.cuda.is_available() or getattr(fg, "gpu", None) and fg.gpu.is_available():
    try:
        dist.all_reduce(fg.ones(2, device="gpu"))
    except RuntimeError as e:
        assert "CPU tensors only" in str(e)
    else:
        raise AssertionError("no error for a GPU tensor")
ok("clear errors for unsupported dtypes (and GPU tensors where a GPU exists)")

# shape mismatch across ranks in debug mode: the same clear error on every rank
import os  # noqa: E402

os.environ["FERROGRAD_DISTRIBUTED_DEBUG"] = "1"
try:
    dist.all_reduce(fg.ones(3 + RANK))
except ValueError as e:
    assert "differ across ranks" in str(e) and "rank 1: [((4,)" in str(e), e
else:
    raise AssertionError("no error for mismatched shapes in debug mode")
del os.environ["FERROGRAD_DISTRIBUTED_DEBUG"]
ok("mismatched shapes raise on every rank (debug mode)")


# --- DistributedDataParallel -----------------------------------------------------------------------


def make_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def make_cnn() -> nn.Module:
    # the digits CNN without dropout (dropout masks would differ between the runs compared)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def batches(kind: str, steps: int) -> list[tuple[fg.Tensor, fg.Tensor]]:
    rng = np.random.default_rng(5)
    shape = (64, 64) if kind == "mlp" else (64, 1, 8, 8)
    return [
        (fg.from_numpy(rng.standard_normal(shape).astype("float32")), fg.from_numpy(rng.integers(0, 10, 64)))
        for _ in range(steps)
    ]


def opt_for(kind: str, params: list[nn.Parameter]) -> fg.optim.Optimizer:
    if kind == "sgd":
        return fg.optim.SGD(params, lr=0.05, momentum=0.9)
    return fg.optim.Adam(params, lr=1e-3)


def train_pair(
    model_kind: str, opt_kind: str, accumulate: bool, bucket_mb: float
) -> tuple[float, list[np.ndarray]]:
    """Train DDP on two ranks (32 rows each) beside two one-process references on the same 64 rows.

    ``exact``: each rank's rows run as DDP runs them (two 16-row micro-batches accumulated when
    ``accumulate``), then the two ranks' gradients are added and halved: DDP's arithmetic, so its
    parameters must equal this reference's bit for bit, whatever the optimizer.
    ``whole``: one backward over the 64 rows (in two 32-row micro-batches when ``accumulate``), as a user
    would train without DDP. It differs from DDP by rounding order only; with SGD that stays at float
    tolerance over 20 steps. With Adam it is not checked: Adam divides by the gradient's running norm, so a
    pre-activation within rounding of zero that flips a ReLU in one run sends the runs apart (a seed sweep of
    the CNN shows 20-step gaps of 4e-6..6e-2 for the same rounding difference).
    """
    fg.manual_seed(0)
    make = make_mlp if model_kind == "mlp" else make_cnn
    exact = make()
    whole = make()
    whole.load_state_dict(exact.state_dict())
    fg.manual_seed(1 + RANK)  # DDP must broadcast rank 0's initial parameters
    local = make()
    local.load_state_dict(exact.state_dict()) if RANK == 0 else None
    ddp = nn.parallel.DistributedDataParallel(local, bucket_cap_mb=bucket_mb)
    opt_exact, opt_whole = (
        opt_for(opt_kind, list(exact.parameters())),
        opt_for(opt_kind, list(whole.parameters())),
    )
    opt_ddp = opt_for(opt_kind, list(ddp.parameters()))
    for x, y in batches(model_kind, 20):
        for o in (opt_exact, opt_whole, opt_ddp):
            o.zero_grad()
        if accumulate:
            for k in range(2):
                rows = np.r_[16 * k : 16 * k + 16, 32 + 16 * k : 32 + 16 * k + 16]
                idx = fg.from_numpy(rows)
                F.cross_entropy(whole(x[idx]), y[idx]).backward()
        else:
            F.cross_entropy(whole(x), y).backward()
        per_rank = []
        for r in range(2):
            exact.zero_grad()
            xr, yr = x[32 * r : 32 * r + 32], y[32 * r : 32 * r + 32]
            for part in (slice(0, 16), slice(16, 32)) if accumulate else (slice(0, 32),):
                F.cross_entropy(exact(xr[part]), yr[part]).backward()
            per_rank.append([p.grad.numpy().copy() for p in exact.parameters()])
        for p, g0, g1 in zip(exact.parameters(), *per_rank, strict=True):
            p.grad = fg.from_numpy((g0 + g1) / np.float32(2))
        mine = slice(32 * RANK, 32 * RANK + 32)
        xm, ym = x[mine], y[mine]
        if accumulate:
            with ddp.no_sync():
                F.cross_entropy(ddp(xm[:16]), ym[:16]).backward()
            F.cross_entropy(ddp(xm[16:]), ym[16:]).backward()
        else:
            F.cross_entropy(ddp(xm), ym).backward()
        for o in (opt_exact, opt_whole, opt_ddp):
            o.step()
    worst = 0.0
    for (name, p), w, q in zip(
        exact.named_parameters(), whole.parameters(), ddp.module.parameters(), strict=True
    ):
        a, b, c = p.detach().numpy(), q.detach().numpy(), w.detach().numpy()
        assert np.array_equal(a, b), (
            model_kind,
            opt_kind,
            accumulate,
            name,
            "DDP != its own arithmetic",
            np.abs(a - b).max(),
        )
        if opt_kind == "sgd":
            worst = max(worst, float(np.abs(c - b).max() / (np.abs(c).max() + 1e-12)))
            assert np.allclose(c, b, rtol=1e-4, atol=1e-5), (
                model_kind,
                opt_kind,
                accumulate,
                name,
                np.abs(c - b).max(),
            )
    # the replicas are identical across ranks
    flat = np.concatenate([q.detach().numpy().ravel() for q in ddp.module.parameters()])
    other = np.empty_like(flat)
    dist._comm().Sendrecv(flat, dest=1 - RANK, recvbuf=other, source=1 - RANK)
    assert np.array_equal(flat, other), "replicas differ across ranks"
    return worst, [q.detach().numpy().copy() for q in ddp.module.parameters()]


for model_kind in ("mlp", "cnn"):
    for opt_kind in ("sgd", "adam"):
        for accumulate in (False, True):
            worst, _ = train_pair(model_kind, opt_kind, accumulate, bucket_mb=0.25)
            vs_whole = f", whole batch rel {worst:.1e}" if opt_kind == "sgd" else ""
            ok(
                f"DDP {model_kind} {opt_kind} {'no_sync x2' if accumulate else 'plain'}: 20 steps match{vs_whole}"
            )

# determinism: two identical runs give bit-identical parameters (the two-rank sum a + b is the same
# on both ranks and in both runs). Against one process on the whole batch the match is only within
# float tolerance (checked above): the batch-64 gradient sums 64 rows in one reduction, while DDP
# adds two 32-row means and halves the sum, a different rounding order.
for model_kind, opt_kind in (("mlp", "adam"), ("cnn", "sgd")):
    _, first_run = train_pair(model_kind, opt_kind, False, bucket_mb=0.25)
    _, second_run = train_pair(model_kind, opt_kind, False, bucket_mb=0.25)
    for a, b in zip(first_run, second_run, strict=True):
        assert np.array_equal(a, b), f"{model_kind}/{opt_kind}: two identical runs differ"
ok("DDP determinism: two identical runs give bit-identical parameters (mlp adam, cnn sgd)")

# buckets: reverse parameter order, several for a small cap
m = make_mlp()
ddp = nn.parallel.DistributedDataParallel(m, bucket_cap_mb=0.1)
names = [n for n, _ in m.named_parameters()]
order = [n for b in ddp._reducer.buckets for n, _ in b.params]
assert order == names[::-1], order
assert len(ddp.bucket_sizes) > 1, ddp.bucket_sizes
assert list(ddp.state_dict())[0] == "module.0.weight"
# the first bucket holds at most 1 MB (a lone larger parameter aside), the next ones the cap
big = nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Linear(600, 600), nn.Linear(600, 600), nn.Linear(600, 10))
)
first = [p.nbytes for _, p in big._reducer.buckets[0].params]
assert sum(first) <= 1024 * 1024 or len(first) == 1, first
assert len(big.bucket_sizes) == 2 and sum(big.bucket_sizes) == 6, big.bucket_sizes
ok(f"buckets in reverse parameter order {ddp.bucket_sizes}; state_dict keys prefixed module.")

# unused parameters: a clear error naming them, or zeros with find_unused_parameters=True


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        return self.a(x)


fg.manual_seed(0)
ddp = nn.parallel.DistributedDataParallel(TwoHeads())
try:
    ddp(fg.ones(2, 4)).sum().backward()
except RuntimeError as e:
    assert "b.weight" in str(e) and "b.bias" in str(e) and "find_unused_parameters" in str(e), e
    assert "on 2 of 2 ranks" in str(e), e
else:
    raise AssertionError("no error for unused parameters")


class SometimesB(nn.Module):
    """Head ``b`` takes part only where ``use_b`` says (it may differ between ranks)."""

    def __init__(self) -> None:
        super().__init__()
        self.b = nn.Linear(4, 4)
        self.a = nn.Linear(4, 4)
        self.use_b = True

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        h = self.a(x)
        return h + self.b(x) if self.use_b else h


# unused on one rank only, without find_unused_parameters: every rank raises (no hang), the rank
# that had the unused parameters names them, and the next step works (no collective left behind)
fg.manual_seed(0)
model = SometimesB()
ddp = nn.parallel.DistributedDataParallel(model)
model.use_b = RANK == 1
try:
    ddp(fg.ones(2, 4)).sum().backward()
except RuntimeError as e:
    assert "on 1 of 2 ranks" in str(e), e
    if RANK == 0:
        assert "b.weight, b.bias" in str(e) or "b.bias, b.weight" in str(e), e
    else:
        assert "on another rank" in str(e), e
else:
    raise AssertionError("no error for a parameter unused on rank 0")
model.use_b = True
for p in model.parameters():
    p.grad = None
ddp(fg.ones(2, 4) * (RANK + 1)).sum().backward()
np.testing.assert_allclose(model.a.weight.grad.numpy(), np.full((4, 4), 3.0), rtol=1e-6)
ok("unused parameters without find_unused_parameters: every rank raises, naming them; next step fine")

# find_unused_parameters=True: zero gradients for what the forward did not reach, averaged with the
# other ranks' real ones; the unreached parameters are marked ready as backward starts, so every
# bucket's all-reduce starts during backward (a 0.00005 MB cap puts each parameter in its own bucket)
fg.manual_seed(0)
ddp = nn.parallel.DistributedDataParallel(TwoHeads(), find_unused_parameters=True)
ddp(fg.ones(2, 4) * (RANK + 1)).sum().backward()  # rank r: 2 rows of r + 1; mean over ranks: 3
assert ddp.module.b.weight.grad is not None and float(ddp.module.b.weight.grad.abs().sum()) == 0.0
g = ddp.module.a.weight.grad.numpy()
np.testing.assert_allclose(g, np.full((4, 4), 3.0), rtol=1e-6)
fg.manual_seed(0)
model = SometimesB()
ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, bucket_cap_mb=0.00005)
assert len(ddp.bucket_sizes) == 4, ddp.bucket_sizes
launched_before_finish: list[int] = []
finish = ddp._reducer.finish


def spy() -> None:
    launched_before_finish.append(ddp._reducer.next_launch)
    finish()


ddp._reducer.finish = spy  # type: ignore[method-assign]
for step in range(3):
    model.use_b = RANK == 1 or step == 2
    for p in model.parameters():
        p.grad = None
    ddp(fg.ones(2, 4) * (RANK + 1)).sum().backward()
    # b's gradient of sum(x W^T + c) is the column sums of x: 2 (r + 1) per entry, where b is used
    used = [r for r in range(WORLD) if r == 1 or step == 2]
    want_b = sum(2.0 * (r + 1) for r in used) / WORLD
    np.testing.assert_allclose(model.b.weight.grad.numpy(), np.full((4, 4), want_b), rtol=1e-6)
    np.testing.assert_allclose(model.a.weight.grad.numpy(), np.full((4, 4), 3.0), rtol=1e-6)
assert launched_before_finish == [4, 4, 4], launched_before_finish
ok("find_unused_parameters: unreached parameters are ready at once and average as zeros")

# backward(inputs=...) under DDP: the averaged gradients are the final .grad values
fg.manual_seed(0)
model = SometimesB()
ddp = nn.parallel.DistributedDataParallel(model)
x_in = fg.ones(2, 4) * (RANK + 1)
ddp(x_in).sum().backward()
plain = [p.grad.numpy().copy() for p in model.parameters()]
for p in model.parameters():
    p.grad = None
ddp(x_in).sum().backward(inputs=list(model.parameters()))
for a, p in zip(plain, model.parameters(), strict=True):
    assert np.array_equal(a, p.grad.numpy()), (a, p.grad.numpy())
ok("backward(inputs=...) under DDP leaves the averaged gradients in .grad")

# shape mismatch across ranks at construction: the same clear error on every rank, naming the
# first difference (parameter shapes, requires_grad, buffers, bucket layout)
try:
    nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4 + RANK)))
except ValueError as e:
    msg = str(e)
    assert "parameter 2 (1.weight) differs across ranks" in msg, msg
    assert "shape (4, 4) on rank 0 but (5, 4) on rank 1" in msg, msg
else:
    raise AssertionError("no error for models of different shapes")
frozen = nn.Linear(3, 3)
frozen.bias.requires_grad_(RANK == 0)
try:
    nn.parallel.DistributedDataParallel(frozen)
except ValueError as e:
    assert "parameter 1 (bias)" in str(e) and "requires_grad True on rank 0 but False on rank 1" in str(e), e
else:
    raise AssertionError("no error for requires_grad differing across ranks")
try:
    nn.parallel.DistributedDataParallel(nn.Linear(4, 4, bias=RANK == 0))
except ValueError as e:
    assert "rank 0 has 2 parameters and rank 1 has 1" in str(e), e
else:
    raise AssertionError("no error for a different number of parameters")
try:
    nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(600, 600), nn.Linear(600, 600)), bucket_cap_mb=1 + RANK
    )
except ValueError as e:
    assert "gradient bucket 1 differs across ranks" in str(e) and "bucket_cap_mb" in str(e), e
else:
    raise AssertionError("no error for bucket layouts differing across ranks")
ok("DDP over models of different shapes raises on every rank, naming the first difference")

# fg.compile: DDP breaks the graph with a stated reason and the step equals eager DDP


def compiled_vs_eager(compiled: bool) -> list[np.ndarray]:
    fg.manual_seed(0)
    m = make_mlp()
    ddp = nn.parallel.DistributedDataParallel(m)
    opt = fg.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    def step(x: fg.Tensor, y: fg.Tensor) -> fg.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    f = fg.compile(step, fallback="eager") if compiled else step
    for x, y in batches("mlp", 5):
        f(x[32 * RANK : 32 * RANK + 32], y[32 * RANK : 32 * RANK + 32])
    if compiled:
        assert f.stats.graph_breaks == 1, f.stats
    return [p.detach().numpy().copy() for p in m.parameters()]


for a, b in zip(compiled_vs_eager(False), compiled_vs_eager(True), strict=True):
    assert np.array_equal(a, b)
try:
    small = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
    fg.compile(lambda x: small(x))(fg.ones(1, 2))
except fg.TraceError as e:
    assert "DistributedDataParallel cannot be captured" in str(e), e
else:
    raise AssertionError("DDP was captured without an error")
ok("fg.compile: DDP is a stated graph break; compiled step == eager DDP")

# DistributedSampler: disjoint shards covering the dataset, equal lengths
s = fg.data.DistributedSampler(range(11), shuffle=True, seed=3)
s.set_epoch(2)
mine = np.array(list(s), dtype=np.int64)
both = np.empty((2, len(mine)), np.int64)
dist._comm().Allgather(mine, both)
assert sorted(set(both.ravel().tolist())) == list(range(11)) and both.size == 12
ok("DistributedSampler shards")

dist.destroy_process_group()
if RANK == 0:
    print("ALL OK", flush=True)
sys.exit(0)
