"""A compiled CPU graph keeps the small buffers of values that die during a
run and hands them to the results of the next run: the steady-state step
allocates almost nothing, and no buffer anyone can still see is ever reused."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from _threads import run_threads


def _deep(width=16, layers=6, seed=0):
    fg.manual_seed(seed)
    mods = []
    for _ in range(layers):
        mods += [fg.nn.Linear(width, width), fg.nn.Tanh()]
    return fg.nn.Sequential(*mods)


def _step_fn(model, opt):
    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    return step


def _batch(k, width=16):
    return fg.tensor(np.random.default_rng(k).standard_normal((4, width)).astype(np.float32))


def test_steady_state_step_allocates_far_less_than_its_plan():
    model = _deep()
    opt = fg.optim.SGD(model.parameters(), lr=0.01)
    step = fg.compile(_step_fn(model, opt))
    xs = [_batch(k) for k in range(3)]
    for k in range(4):
        step(xs[k % 3])
    planned = step.stats.allocations_per_call
    assert planned >= 30  # activations, their gradients and the weight gradients
    before = fg.memory_stats()["cpu.allocations"]
    runs = 10
    for k in range(runs):
        step(xs[k % 3])
    per_run = (fg.memory_stats()["cpu.allocations"] - before) / runs
    # Only the returned loss (a new tensor for the caller each time) and a
    # few scalars are allocated afresh.
    print(f"allocations per run: {per_run} (planned {planned})")
    assert per_run <= planned / 4, (per_run, planned)
    # The plan's own account: recycled allocations come from kept buffers.
    mp = step.graph(xs[0]).memory_plan()
    assert mp["allocations"] == planned
    assert 0 < mp["recycled"] < planned
    assert per_run <= planned - mp["recycled"]


def test_recycling_matches_eager_training():
    xs = [_batch(k) for k in range(3)]
    eager_model, comp_model = _deep(seed=1), _deep(seed=1)
    eo = fg.optim.SGD(eager_model.parameters(), lr=0.05, momentum=0.9)
    co = fg.optim.SGD(comp_model.parameters(), lr=0.05, momentum=0.9)
    eager, comp = _step_fn(eager_model, eo), fg.compile(_step_fn(comp_model, co))
    for k in range(12):
        le, lc = eager(xs[k % 3]), comp(xs[k % 3])
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5, atol=1e-6)
    for pe, pc in zip(eager_model.parameters(), comp_model.parameters(), strict=True):
        np.testing.assert_allclose(pc.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_gradient_the_caller_holds_is_never_reused():
    model = _deep()
    opt = fg.optim.SGD(model.parameters(), lr=0.01)
    step = fg.compile(_step_fn(model, opt))
    params = list(model.parameters())
    for k in range(3):
        step(_batch(k))
    # Python references to all but the first gradient (read by copying, so
    # that no NumPy view of their buffers exists) ...
    held = [p.grad for p in params[1:]]
    held_values = [g.tolist() for g in held]
    # ... and a NumPy view of the first one's buffer, with no tensor kept.
    exported = params[0].grad.numpy()
    exported_values = exported.copy()
    for k in range(3, 9):
        step(_batch(k))
    for g, v in zip(held, held_values, strict=True):
        assert g.tolist() == v
    np.testing.assert_array_equal(exported, exported_values)
    # The parameters did get new gradients.
    assert params[1].grad.tolist() != held_values[0]
    assert not np.array_equal(params[0].grad.numpy(), exported_values)


@pytest.mark.parametrize("view", [False, True])
def test_returned_results_and_views_of_dead_values_stay_intact(view):
    def f(x):
        y = (x * 2.0).tanh()  # dies inside the graph unless returned
        z = y * y + 1.0
        return (z[1:], z.sum()) if view else (z, y)

    cf = fg.compile(f)
    xs = [_batch(k) for k in range(6)]
    first = cf(xs[0])
    first_values = [t.numpy().copy() for t in first]
    for x in xs[1:]:
        cf(x)
    for t, v in zip(first, first_values, strict=True):
        np.testing.assert_array_equal(t.numpy(), v)
    # And each call still computes its own answer.
    for x in xs:
        got, want = cf(x), f(x)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


def test_concurrent_runs_of_one_plan_agree():
    def f(x):
        return ((x * 3.0).sin() + x).tanh() * 2.0

    cf = fg.compile(f)
    xs = [_batch(k) for k in range(8)]
    want = [f(x).numpy() for x in xs]
    cf(xs[0])

    def worker(off):
        for r in range(400):
            k = (r + off) % len(xs)
            np.testing.assert_allclose(cf(xs[k]).numpy(), want[k], rtol=1e-6, atol=1e-6)

    run_threads(worker, 4)


def test_a_failed_run_keeps_recycling():
    def f(x, idx):
        y = (x * 2.0).tanh() + x
        return (y * y)[idx].sum()

    cf = fg.compile(f)
    x = _batch(0)
    good, bad = fg.tensor([0, 2, 3]), fg.tensor([0, 2, 99])
    for _ in range(3):
        cf(x, good)
    with pytest.raises(IndexError):
        cf(x, bad)
    cf(x, good)
    before = fg.memory_stats()["cpu.allocations"]
    for _ in range(10):
        got = cf(x, good)
    per_run = (fg.memory_stats()["cpu.allocations"] - before) / 10
    assert per_run <= 2, per_run  # the result (and at most one more)
    np.testing.assert_allclose(got.numpy(), f(x, good).numpy(), rtol=1e-6)
