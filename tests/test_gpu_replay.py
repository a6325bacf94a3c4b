"""Replaying a compiled graph's GPU work.

A GPU plan captures one run's dispatches and replays them on later runs with
the same input layouts and scalar arguments, without the executor: bind
groups made once, scratch buffers owned by the plan, one metadata buffer,
fresh buffers for the results. These tests check that replays give exactly
what eager execution gives, that everything a replay must not bake in
(argument buffers, weights changed eagerly, learning rates and step counts,
which optimizer steps read live on every replay, index checks) is honoured, and that runs which cannot replay say why and still run.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _batches(n=4, seed=0):
    rng = np.random.default_rng(seed)
    xs = [fg.tensor(rng.standard_normal((8, 16)).astype(np.float32), device="gpu") for _ in range(n)]
    ys = [fg.tensor(rng.integers(0, 4, 8), device="gpu") for _ in range(n)]
    return xs, ys


def _model(opt="sgd"):
    fg.manual_seed(0)
    m = fg.nn.Sequential(fg.nn.Linear(16, 32), fg.nn.Tanh(), fg.nn.Linear(32, 4)).to("gpu")
    if opt == "sgd":
        o = fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    elif opt == "adamw":
        o = fg.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.01)
    else:
        o = fg.optim.Adam(m.parameters(), lr=0.01)
    return m, o


def _stepper(m, o):
    def step(x, y):
        o.zero_grad()
        loss = fg.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        return loss

    return step


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_training_step_replays_and_matches_eager(opt):
    xs, ys = _batches()
    runs = {}
    for compiled in (False, True):
        m, o = _model(opt)
        step = _stepper(m, o)
        f = fg.compile(step) if compiled else step
        # Results are kept, not read at once: a replay must give each run new buffers.
        losses = [f(xs[i % 4], ys[i % 4]) for i in range(10)]
        runs[compiled] = ([float(v.item()) for v in losses], [p.numpy() for p in m.parameters()])
        if compiled:
            info = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
            assert info is not None and info["reason"] is None, info
            # The first step makes the optimizer state, the second is captured again.
            # (Adam's step counts change every run: its step runs live in each replay.)
            assert info["replays"] >= 7 and info["captures"] <= 3, info
            assert info["dispatches"] > 10 and info["plan_bytes"] > 0
    (le, pe), (lc, pc) = runs[False], runs[True]
    np.testing.assert_array_equal(lc, le)
    for a, b in zip(pc, pe, strict=True):
        np.testing.assert_array_equal(a, b)


def test_replay_queues_one_block_without_host_traffic():
    xs, ys = _batches()
    m, o = _model()
    f = fg.compile(_stepper(m, o))
    for i in range(3):
        f(xs[i % 4], ys[i % 4])
    info0 = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
    fg.gpu.synchronize()
    s0 = fg.gpu.stats()
    f(xs[3], ys[3])
    s1 = fg.gpu.stats()
    info1 = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
    assert info1["replays"] == info0["replays"] + 1
    assert s1["submits"] == s0["submits"] and s1["downloads"] == s0["downloads"]
    assert s1["uploads"] == s0["uploads"], "a replay uploads nothing (its metadata is on the device)"
    # The recorded dispatches, and the optimizer step's own (it runs live).
    assert s1["dispatches"] - s0["dispatches"] >= info1["dispatches"]


def test_bad_target_in_a_replay_raises_and_changes_nothing():
    xs, ys = _batches()
    m, o = _model()
    f = fg.compile(_stepper(m, o))
    for i in range(4):
        f(xs[i], ys[i])
    assert f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])["replays"] >= 1
    before = [p.numpy().copy() for p in m.parameters()]
    bad = fg.tensor(np.array([0, 1, 2, 3, 4, 0, 1, 2]), device="gpu")
    with pytest.raises(IndexError, match="cross_entropy.*target 4 is out of bounds for 4 classes"):
        f(xs[0], bad)
    for a, b in zip(before, [p.numpy() for p in m.parameters()], strict=True):
        np.testing.assert_array_equal(a, b)
    f(xs[0], ys[0])  # and the step still runs


def _eager_and_compiled(opt, make_sched, steps, between=None):
    """Train the same model eagerly and compiled on the GPU, stepping the
    scheduler after every step and calling ``between(i, model)`` after step
    ``i``; assert both runs match bit for bit and return the compiled
    graph's replay counters."""
    xs, ys = _batches()
    runs, info = [], None
    for compiled in (False, True):
        m, o = _model(opt)
        sched = make_sched(o)
        step = _stepper(m, o)
        f = fg.compile(step) if compiled else step
        losses = []
        for i in range(steps):
            losses.append(float(f(xs[i % 4], ys[i % 4]).item()))
            sched.step()
            if between is not None:
                between(i, m)
        runs.append((losses, [p.numpy() for p in m.parameters()]))
        if compiled:
            info = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)
    return info


def test_learning_rate_changes_and_eager_weight_updates_are_seen():
    def halve_first_weight(i, m):
        if i == 5:
            with fg.no_grad():
                m[0].weight.mul_(0.5)  # an eager in-place update between compiled calls

    info = _eager_and_compiled(
        "sgd", lambda o: fg.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 9, halve_first_weight
    )
    # The learning rate changes every three steps: optimizer steps run
    # live, with this run's learning rate, so nothing is captured again.
    assert info["replays"] >= 6 and info["captures"] <= 3, info


def test_a_learning_rate_changing_every_step_still_replays():
    info = _eager_and_compiled(
        "adamw", lambda o: fg.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=20), 12
    )
    assert info["reason"] is None and info["replays"] >= 9, info


def test_other_argument_layouts_run_through_the_executor():
    w = fg.tensor(_rand(6, 5, seed=1), device="gpu")

    @fg.compile
    def f(x):
        return (x @ w).relu().sum(0)

    base = _rand(4, 12, seed=2)
    dense = fg.tensor(base[:, :6].copy(), device="gpu")
    strided = fg.tensor(base, device="gpu")[:, ::2]  # same shape, other strides: retrace or guard
    for _ in range(3):
        got = f(dense)
    np.testing.assert_allclose(got.numpy(), np.maximum(base[:, :6] @ w.numpy(), 0).sum(0), rtol=1e-5)
    got = f(strided)
    np.testing.assert_allclose(got.numpy(), np.maximum(base[:, ::2] @ w.numpy(), 0).sum(0), rtol=1e-5)
    # A view at another offset of the same buffer.
    big = fg.tensor(np.concatenate([base[:, :6], base[:, :6] * 2]), device="gpu")
    for part, want in ((big[:4], base[:, :6]), (big[4:], base[:, :6] * 2)):
        np.testing.assert_allclose(f(part).numpy(), np.maximum(want @ w.numpy(), 0).sum(0), rtol=1e-5)


def test_runs_that_cannot_replay_say_why_and_still_run():
    x = fg.tensor(_rand(8, 4, seed=3), device="gpu")

    @fg.compile
    def seeded(v):
        fg.manual_seed(5)  # seeding runs on the host in every run
        return fg.nn.functional.dropout(v, 0.5).sum()

    for _ in range(3):
        seeded(x)
    info = seeded.graph(x).gpu_replay(x)
    assert info["replays"] == info["captures"] == 0 and "seeds" in info["reason"], info

    @fg.compile
    def divided(a, b):
        return a // b  # integer division checks its divisors on the host

    a = fg.tensor(np.array([7, 9, 12]), device="gpu")
    b = fg.tensor(np.array([2, 4, 5]), device="gpu")
    for _ in range(3):
        got = divided(a, b)
    np.testing.assert_array_equal(got.numpy(), [3, 2, 2])
    info = divided.graph(a, b).gpu_replay(a, b)
    assert info["replays"] == 0 and "host" in info["reason"], info

    cpu = fg.compile(lambda v: v * 2)
    xc = fg.tensor(_rand(3, seed=4))
    cpu(xc)
    assert cpu.graph(xc).gpu_replay(xc) is None


def test_replay_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("FG_GPU_REPLAY", "0")
    x = fg.tensor(_rand(5, seed=5), device="gpu")
    f = fg.compile(lambda v: (v * 3).exp())
    for _ in range(3):
        got = f(x)
    np.testing.assert_allclose(got.numpy(), np.exp(x.numpy() * 3), rtol=1e-5)
    info = f.graph(x).gpu_replay(x)
    assert info["replays"] == 0 and "FG_GPU_REPLAY" in info["reason"], info


def test_float16_results_are_rounded_in_replays():
    a = fg.tensor(_rand(8, 8, seed=6), device="gpu").half()
    b = fg.tensor(_rand(8, 8, seed=7), device="gpu").half()
    f = fg.compile(lambda p, q: (p @ q).relu() * 1.1 + p)
    want = ((a @ b).relu() * 1.1 + a).numpy()
    for _ in range(4):
        got = f(a, b)
    assert got.dtype == fg.float16
    np.testing.assert_array_equal(got.numpy(), want)
    assert f.graph(a, b).gpu_replay(a, b)["replays"] >= 2


def test_replays_recycle_their_buffers():
    xs, ys = _batches()
    m, o = _model()
    f = fg.compile(_stepper(m, o))
    for i in range(6):
        f(xs[i % 4], ys[i % 4])
    fg.gpu.synchronize()
    used = fg.gpu.stats()["bytes_in_use"]
    for i in range(200):
        f(xs[i % 4], ys[i % 4])
    fg.gpu.synchronize()
    assert fg.gpu.stats()["bytes_in_use"] <= used


def test_bundle_export_after_replays_records_the_whole_run(tmp_path):
    import json

    x = fg.tensor(_rand(4, 6, seed=8), device="gpu")
    w = fg.tensor(_rand(6, 3, seed=9), device="gpu")
    f = fg.compile(lambda v: (v @ w).tanh() * 2)
    for _ in range(3):
        f(x)
    g = f.graph(x)
    info = g.gpu_replay(x)
    assert info["replays"] >= 1
    g.export_webgpu(str(tmp_path / "b"))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert len(manifest["dispatches"]) == info["dispatches"]
    assert g.gpu_replay(x)["replays"] == info["replays"], "the export must not replay"


def test_index_offsets_are_computed_again_for_each_replay():
    x = fg.tensor(_rand(8, 5, seed=10), device="gpu")
    emb = fg.nn.Embedding(10, 4).to("gpu").requires_grad_(False)

    @fg.compile
    def picked(v, i, tok):
        return v[i].sum(1) + emb(tok).sum()

    xs = x.numpy()
    w = emb.weight.numpy()
    rng = np.random.default_rng(11)
    for _ in range(5):
        i = rng.integers(0, 8, 3)
        tok = rng.integers(0, 10, 6)
        got = picked(x, fg.tensor(i, device="gpu"), fg.tensor(tok, device="gpu"))
        np.testing.assert_allclose(got.numpy(), xs[i].sum(1) + w[tok].sum(), rtol=1e-5, atol=1e-5)
    info = picked.graph(x, fg.tensor(i, device="gpu"), fg.tensor(tok, device="gpu")).gpu_replay(
        x, fg.tensor(i, device="gpu"), fg.tensor(tok, device="gpu"))
    assert info["reason"] is None and info["replays"] >= 3, info
    bad = fg.tensor(np.array([0, 8, 1]), device="gpu")
    with pytest.raises(IndexError, match="out of bounds"):
        picked(x, bad, fg.tensor(tok, device="gpu"))


def test_outputs_that_record_autograd_never_replay():
    w = fg.tensor(_rand(3, 3, seed=12), device="gpu", requires_grad=True)
    f = fg.compile(lambda v: (v @ w).sum())
    x = fg.tensor(_rand(2, 3, seed=13), device="gpu")
    for _ in range(3):
        loss = f(x)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), np.repeat(x.numpy().sum(0)[:, None], 3, 1), rtol=1e-5)
    info = f.graph(x).gpu_replay(x)
    assert info["replays"] == 0 and "autograd" in info["reason"], info


class _Block(fg.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = fg.nn.LayerNorm(d), fg.nn.LayerNorm(d)
        self.att = fg.nn.MultiheadAttention(d, h, batch_first=True)
        self.fc1, self.fc2 = fg.nn.Linear(d, 4 * d), fg.nn.Linear(4 * d, d)

    def forward(self, x):
        h, t = self.ln1(x), x.shape[1]
        mask = fg.triu(fg.ones(t, t, dtype=fg.bool, device=x.device), diagonal=1)
        x = x + self.att(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(fg.nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class _TinyGPT(fg.nn.Module):
    def __init__(self, vocab=40, d=16, heads=2, seq=8):
        super().__init__()
        self.tok, self.pos = fg.nn.Embedding(vocab, d), fg.nn.Embedding(seq, d)
        self.block, self.ln, self.head = _Block(d, heads), fg.nn.LayerNorm(d), fg.nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(fg.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.block(x)))


def test_gpt_training_step_replays_as_the_executor_runs_it(monkeypatch):
    """Embeddings (offsets from the token ids), a causal mask, AdamW (live step counts)."""
    rng = np.random.default_rng(14)
    data = [(rng.integers(0, 40, (3, 8)), rng.integers(0, 40, (3, 8))) for _ in range(3)]
    batches = [(fg.tensor(x, device="gpu"), fg.tensor(y, device="gpu")) for x, y in data]
    runs = []
    for replay in ("0", "1"):
        monkeypatch.setenv("FG_GPU_REPLAY", replay)
        fg.manual_seed(0)
        m = _TinyGPT().to("gpu")
        o = fg.optim.AdamW(m.parameters(), lr=1e-3)

        def step(x, y, m=m, o=o):
            o.zero_grad()
            loss = fg.nn.functional.cross_entropy(m(x).reshape(-1, 40), y.reshape(-1))
            loss.backward()
            o.step()
            return loss

        f = fg.compile(step)
        losses = [f(*batches[i % 3]) for i in range(7)]
        runs.append(([float(v.item()) for v in losses], [p.numpy() for p in m.parameters()]))
        info = f.graph(*batches[0]).gpu_replay(*batches[0])
        if replay == "1":
            assert info["reason"] is None and info["replays"] >= 5, info
        else:
            assert info["replays"] == 0
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


BIG_REPLAY = """
import ferrograd as fg, numpy as np
import ferrograd.nn.functional as F

assert fg.gpu.info()["limits"]["max_storage_buffer_binding_size"] == 4096
rng = np.random.default_rng(0)
xs = [fg.tensor(rng.standard_normal((64, 24)).astype(np.float32), device="gpu") for _ in range(3)]  # 6 KB
ys = [fg.tensor(rng.integers(0, 40, 64), device="gpu") for _ in range(3)]


def build():
    fg.manual_seed(0)
    m = fg.nn.Sequential(fg.nn.Linear(24, 40), fg.nn.LayerNorm(40), fg.nn.GELU(), fg.nn.Linear(40, 40)).to("gpu")
    return m, fg.optim.Adam(m.parameters(), lr=1e-2)


def step(m, o, x, y):
    loss = F.cross_entropy(m(x), y)
    o.zero_grad()
    loss.backward()
    o.step()
    return loss


(m1, o1), (m2, o2) = build(), build()
compiled = fg.compile(lambda x, y: step(m2, o2, x, y))
for i in range(6):  # new argument tensors each step: their buffers are rebound
    x, y = xs[i % 3], ys[i % 3]
    want, got = step(m1, o1, x, y).item(), compiled(x, y).item()
    assert abs(want - got) <= 1e-5 * abs(want), (i, want, got)
info = compiled.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
assert info["replays"] >= 4 and info["reason"] is None, info
for p, q in zip(m1.parameters(), m2.parameters()):
    np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-4, atol=1e-5)
print("ok")
"""


def test_runs_through_tensors_over_one_binding_replay():
    # Kernels that work in pieces bind ranges of buffers; a replay binds the
    # same ranges of each run's buffers (checked to reach no further than
    # the buffer), so such training steps replay too.
    import os
    import subprocess
    import sys

    env = dict(os.environ, FG_GPU_MAX_BINDING_BYTES="4096")
    r = subprocess.run([sys.executable, "-c", BIG_REPLAY], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def _draws(v, ints):
    """Every random op that draws on the host: each replay must draw anew."""
    a = fg.rand(3, 5, device="gpu")
    b = fg.randn(4, device="gpu", dtype=fg.float16)
    c = fg.randint(0, 9, (6,), device="gpu")
    d = fg.randperm(7, device="gpu")
    e = fg.empty_like(v).bernoulli_(0.3)
    f = fg.empty_like(v).normal_(1.0, 2.0) + fg.empty_like(v).uniform_(-1.0, 1.0)
    g = fg.nn.functional.dropout(v, 0.4) + fg.rand_like(v)
    return a, b, c + ints, d, e, f, g


def test_random_draws_replay_and_match_eager():
    v = fg.tensor(_rand(8, 4, seed=6), device="gpu")
    ints = fg.tensor(np.arange(6), device="gpu")
    runs = {}
    for compiled in (False, True):
        fn = fg.compile(_draws) if compiled else _draws
        fg.manual_seed(21)
        runs[compiled] = [[t.numpy() for t in fn(v, ints)] for _ in range(4)]
        if compiled:
            info = fn.graph(v, ints).gpu_replay(v, ints)
            assert info["reason"] is None and info["replays"] >= 2 and info["captures"] == 1, info
    for e, c in zip(runs[False], runs[True], strict=True):
        for a, b in zip(e, c, strict=True):
            np.testing.assert_array_equal(b, a)
    # New numbers on every run (a replay does not repeat the captured draw).
    for k in range(7):
        assert any(not np.array_equal(runs[True][0][k], r[k]) for r in runs[True][1:]), k


def test_dropout_training_step_replays_and_matches_eager():
    xs, ys = _batches()
    runs = {}
    for compiled in (False, True):
        fg.manual_seed(0)
        m = fg.nn.Sequential(
            fg.nn.Linear(16, 32), fg.nn.ReLU(), fg.nn.Dropout(0.3), fg.nn.Linear(32, 4)
        ).to("gpu")
        o = fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        step = _stepper(m, o)
        f = fg.compile(step) if compiled else step
        fg.manual_seed(42)
        losses = [f(xs[i % 4], ys[i % 4]) for i in range(8)]
        runs[compiled] = ([float(v.item()) for v in losses], [p.numpy() for p in m.parameters()])
        if compiled:
            info = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
            assert info["reason"] is None and info["replays"] >= 5, info
    (le, pe), (lc, pc) = runs[False], runs[True]
    np.testing.assert_array_equal(lc, le)
    for a, b in zip(pc, pe, strict=True):
        np.testing.assert_array_equal(a, b)


def test_draws_read_on_the_host_do_not_replay():
    p = fg.tensor(np.full((5, 4), 0.5, np.float32), device="gpu")

    def f(p):
        # Probabilities are read (and checked) on the host.
        return fg.bernoulli(p) + fg.multinomial(p, 2).float().sum()

    cf = fg.compile(f)
    fg.manual_seed(8)
    got = [cf(p).numpy() for _ in range(3)]
    fg.manual_seed(8)
    want = [f(p).numpy() for _ in range(3)]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    info = cf.graph(p).gpu_replay(p)
    assert info["replays"] == 0 and "host" in info["reason"], info


def test_cpu_draws_uploaded_in_a_gpu_graph_do_not_replay():
    x = fg.zeros(4, device="gpu")

    def f(x):
        return x + fg.rand(4).to("gpu")  # drawn on the CPU, uploaded as data

    cf = fg.compile(f)
    fg.manual_seed(0)
    want = [f(x).numpy() for _ in range(4)]
    after_eager = fg.rand(3).numpy()
    fg.manual_seed(0)
    got = [cf(x).numpy() for _ in range(4)]
    np.testing.assert_array_equal(fg.rand(3).numpy(), after_eager)  # the generator moved as in eager
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    info = cf.graph(x).gpu_replay(x)
    assert info["replays"] == 0 and "CPU" in info["reason"], info
