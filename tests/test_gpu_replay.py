"""Replaying a compiled graph's GPU work.

A GPU plan captures one run's dispatches and replays them on later runs with
the same input layouts and scalar arguments, without the executor: bind
groups made once, scratch buffers owned by the plan, one metadata buffer,
fresh buffers for the results. These tests check that replays give exactly
what eager execution gives, that everything a replay must not bake in
(argument buffers, weights changed eagerly, learning rates, index checks)
is honoured, and that runs which cannot replay say why and still run.
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
            if opt == "sgd":
                assert info is not None and info["reason"] is None, info
                # The first step makes the optimizer state, the second is captured again.
                assert info["replays"] >= 7 and info["captures"] <= 3, info
                assert info["dispatches"] > 10 and info["plan_bytes"] > 0
            else:
                # Adam's step counts are scalar arguments that change every
                # run: the plan stops capturing and runs the executor.
                assert info["replays"] == 0 and "step counts" in info["reason"], info
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
    assert s1["dispatches"] - s0["dispatches"] == info1["dispatches"]


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


def test_learning_rate_changes_and_eager_weight_updates_are_seen():
    xs, ys = _batches()
    runs = []
    for compiled in (False, True):
        m, o = _model()
        sched = fg.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)
        step = _stepper(m, o)
        f = fg.compile(step) if compiled else step
        losses = []
        for i in range(9):
            losses.append(float(f(xs[i % 4], ys[i % 4]).item()))
            sched.step()
            if i == 5:
                with fg.no_grad():
                    m[0].weight.mul_(0.5)  # an eager in-place update between compiled calls
        runs.append((losses, [p.numpy() for p in m.parameters()]))
        if compiled:
            info = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
            assert info["replays"] >= 3 and info["captures"] >= 3, info
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


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
    drop = fg.nn.Dropout(0.5)

    @fg.compile
    def noisy(v):
        return drop(v).sum()

    for _ in range(3):
        noisy(x)
    assert noisy.graph(x).gpu_replay(x) is None  # random draws: every run draws anew

    @fg.compile
    def picked(v, i):
        return v[i].sum()  # advanced indexing computes its offsets on the host

    idx = fg.tensor(np.array([3, 1]), device="gpu")
    for _ in range(3):
        got = picked(x, idx)
    np.testing.assert_allclose(got.item(), x.numpy()[[3, 1]].sum(), rtol=1e-5)
    info = picked.graph(x, idx).gpu_replay(x, idx)
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
    assert f.graph(x).gpu_replay(x) is None


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
