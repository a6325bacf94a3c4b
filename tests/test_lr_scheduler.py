"""ferrograd.optim.lr_scheduler: lr sequences against closed forms written out here.

Every schedule runs over two parameter groups with different base lrs and
is compared, epoch by epoch, with a formula computed independently in this
file. Also: state-dict round trips that must resume identically, a StepLR
driving a real SGD (the parameter change is lr * grad), OneCycleLR's
momentum / beta1 cycling, the warnings and argument errors PyTorch raises,
and (when torch is installed) parity with torch.optim.lr_scheduler.
"""

from __future__ import annotations

import copy
import math
import warnings

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import optim
from ferrograd.optim import lr_scheduler as S

BASE_LRS = (0.1, 0.03)
N_STEPS = 20


def make_opt(kind: str = "sgd", lrs: tuple[float, ...] = BASE_LRS, **kw) -> optim.Optimizer:
    """An optimizer with one small parameter per group, group i having lr ``lrs[i]``."""
    groups = [{"params": [fg.zeros(3, requires_grad=True)], "lr": lr} for lr in lrs]
    cls = {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW, "rmsprop": optim.RMSprop}[kind]
    return cls(groups, **kw)


def lrs_of(opt: optim.Optimizer) -> list[float]:
    return [g["lr"] for g in opt.param_groups]


def run(opt: optim.Optimizer, sched, n: int = N_STEPS) -> list[list[float]]:
    """The lrs at epochs 0..n (construction, then n steps), checking get_last_lr() against the groups."""
    out = [list(sched.get_last_lr())]
    assert out[0] == lrs_of(opt)
    for _ in range(n):
        opt.step()  # no gradients: a no-op, but it must precede sched.step()
        sched.step()
        assert sched.get_last_lr() == lrs_of(opt)
        out.append(list(sched.get_last_lr()))
    return out


def assert_seq(got: list[list[float]], expected: list[list[float]], rel: float = 1e-10, abs_: float = 1e-14) -> None:
    assert len(got) == len(expected)
    for e, (g, x) in enumerate(zip(got, expected, strict=True)):
        assert g == pytest.approx(x, rel=rel, abs=abs_), f"epoch {e}: {g} != {x}"


# ---------------------------------------------------------------------------
# Closed forms, written independently of the implementation
# ---------------------------------------------------------------------------


def cosine(base: float, e: int, T: float, eta_min: float) -> float:
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / T)) / 2


def linear_factor(e: int, start: float, end: float, total: int) -> float:
    return start + (end - start) * min(e, total) / total


def onecycle_ref(
    s: int,
    T: int,
    max_lr: float,
    pct: float = 0.3,
    div: float = 25.0,
    fdiv: float = 1e4,
    three_phase: bool = False,
    strategy: str = "cos",
    lo_m: float = 0.85,
    hi_m: float = 0.95,
) -> tuple[float, float]:
    """(lr, momentum) at step s of the 1cycle policy, from its phase table."""
    init = max_lr / div
    low = init / fdiv
    up_end = pct * T - 1
    if three_phase:
        # (phase end, lr from, lr to, momentum from, momentum to)
        phases = [
            (up_end, init, max_lr, hi_m, lo_m),
            (2 * pct * T - 2, max_lr, init, lo_m, hi_m),
            (T - 1, init, low, hi_m, hi_m),
        ]
    else:
        phases = [(up_end, init, max_lr, hi_m, lo_m), (T - 1, max_lr, low, lo_m, hi_m)]

    def interp(a: float, b: float, t: float) -> float:
        if strategy == "cos":
            w = (1 - math.cos(math.pi * t)) / 2  # 0 -> 1 as t goes 0 -> 1
        else:
            w = t
        return a + (b - a) * w

    begin = 0.0
    for i, (end, l0, l1, m0, m1) in enumerate(phases):
        if s <= end or i == len(phases) - 1:
            t = (s - begin) / (end - begin)
            return interp(l0, l1, t), interp(m0, m1, t)
        begin = end
    raise AssertionError


class Halving:
    """A picklable, stateful lr_lambda (its __dict__ is saved in state dicts)."""

    def __init__(self, every: int) -> None:
        self.every = every

    def __call__(self, e: int) -> float:
        return 0.5 ** (e // self.every)


# name -> (build(opt, module), expected factor or lr for (base_lr, group index, epoch))
# The builders take the scheduler module so the same table drives the torch parity test.
CASES: dict[str, tuple] = {
    "lambda": (
        lambda opt, M: M.LambdaLR(opt, lambda e: 0.9**e + 0.1 * (e % 3)),
        lambda b, i, e: b * (0.9**e + 0.1 * (e % 3)),
    ),
    "lambda-per-group": (
        lambda opt, M: M.LambdaLR(opt, [lambda e: 1.0 / (1 + e), Halving(4)]),
        lambda b, i, e: b * (1.0 / (1 + e) if i == 0 else 0.5 ** (e // 4)),
    ),
    "multiplicative": (
        lambda opt, M: M.MultiplicativeLR(opt, lambda e: 1 - 0.02 * e),
        lambda b, i, e: b * math.prod(1 - 0.02 * k for k in range(1, e + 1)),
    ),
    "multiplicative-per-group": (
        lambda opt, M: M.MultiplicativeLR(opt, [lambda e: 0.95, lambda e: 1.05]),
        lambda b, i, e: b * (0.95 if i == 0 else 1.05) ** e,
    ),
    "step": (
        lambda opt, M: M.StepLR(opt, step_size=3, gamma=0.5),
        lambda b, i, e: b * 0.5 ** (e // 3),
    ),
    "step-default-gamma": (
        lambda opt, M: M.StepLR(opt, 7),
        lambda b, i, e: b * 0.1 ** (e // 7),
    ),
    "multistep": (
        lambda opt, M: M.MultiStepLR(opt, milestones=[2, 5, 5, 11], gamma=0.3),
        lambda b, i, e: b * 0.3 ** sum(m <= e for m in (2, 5, 5, 11)),
    ),
    "exponential": (
        lambda opt, M: M.ExponentialLR(opt, gamma=0.9),
        lambda b, i, e: b * 0.9**e,
    ),
    "cosine": (
        lambda opt, M: M.CosineAnnealingLR(opt, T_max=7, eta_min=0.001),
        lambda b, i, e: cosine(b, e, 7, 0.001),
    ),
    "cosine-long": (
        lambda opt, M: M.CosineAnnealingLR(opt, T_max=25),
        lambda b, i, e: cosine(b, e, 25, 0.0),
    ),
    "linear": (
        lambda opt, M: M.LinearLR(opt, start_factor=0.25, end_factor=0.9, total_iters=6),
        lambda b, i, e: b * linear_factor(e, 0.25, 0.9, 6),
    ),
    "linear-default": (
        lambda opt, M: M.LinearLR(opt),
        lambda b, i, e: b * linear_factor(e, 1 / 3, 1.0, 5),
    ),
    "linear-decay": (
        lambda opt, M: M.LinearLR(opt, start_factor=1.0, end_factor=0.05, total_iters=12),
        lambda b, i, e: b * linear_factor(e, 1.0, 0.05, 12),
    ),
    "constant": (
        lambda opt, M: M.ConstantLR(opt, factor=0.5, total_iters=4),
        lambda b, i, e: b * (0.5 if e < 4 else 1.0),
    ),
    "constant-default": (
        lambda opt, M: M.ConstantLR(opt),
        lambda b, i, e: b * (1 / 3 if e < 5 else 1.0),
    ),
    "sequential-warmup-cosine": (
        lambda opt, M: M.SequentialLR(
            opt,
            [M.LinearLR(opt, start_factor=0.1, total_iters=4), M.CosineAnnealingLR(opt, T_max=10, eta_min=0.002)],
            milestones=[5],
        ),
        lambda b, i, e: b * linear_factor(e, 0.1, 1.0, 4) if e < 5 else cosine(b, e - 5, 10, 0.002),
    ),
    "sequential-three": (
        lambda opt, M: M.SequentialLR(
            opt,
            [M.ConstantLR(opt, factor=0.2, total_iters=10), M.ExponentialLR(opt, gamma=0.8), M.StepLR(opt, 2, 0.5)],
            milestones=[3, 9],
        ),
        lambda b, i, e: b * (0.2 if e < 3 else 0.8 ** (e - 3) if e < 9 else 0.5 ** ((e - 9) // 2)),
    ),
    "chained": (
        lambda opt, M: M.ChainedScheduler(
            [M.ConstantLR(opt, factor=0.1, total_iters=5), M.ExponentialLR(opt, gamma=0.9)]
        ),
        lambda b, i, e: b * 0.9**e * (0.1 if e < 5 else 1.0),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sequence_matches_closed_form(name):
    build, ref = CASES[name]
    opt = make_opt()
    sched = build(opt, S)
    got = run(opt, sched)
    expected = [[ref(b, i, e) for i, b in enumerate(BASE_LRS)] for e in range(N_STEPS + 1)]
    assert_seq(got, expected)
    for g, b in zip(opt.param_groups, BASE_LRS, strict=True):
        assert g["initial_lr"] == b
    if not isinstance(sched, S.ChainedScheduler):  # which, as in PyTorch, keeps no epoch count
        assert sched.last_epoch == N_STEPS


def test_constructor_applies_epoch0_and_sets_initial_lr():
    opt = make_opt()
    sched = S.LinearLR(opt, start_factor=0.5, total_iters=4)
    assert sched.last_epoch == 0
    assert [g["initial_lr"] for g in opt.param_groups] == list(BASE_LRS)
    assert lrs_of(opt) == pytest.approx([0.05, 0.015])
    assert sched.get_last_lr() == lrs_of(opt)
    # a second scheduler keeps the existing initial_lr (setdefault), and chains on the current lr
    sched2 = S.ExponentialLR(opt, gamma=0.5)
    assert sched2.base_lrs == list(BASE_LRS)
    assert lrs_of(opt) == pytest.approx([0.05, 0.015])
    opt.step()
    sched.step()
    sched2.step()
    assert lrs_of(opt) == pytest.approx([b * linear_factor(1, 0.5, 1.0, 4) * 0.5 for b in BASE_LRS])


def test_resume_with_last_epoch():
    """last_epoch=k resumes: the initial step leaves the lr alone and the schedule continues."""
    opt = make_opt()
    first = S.ExponentialLR(opt, gamma=0.9)
    for _ in range(5):
        opt.step()
        first.step()
    resumed = S.ExponentialLR(opt, gamma=0.9, last_epoch=4)
    assert resumed.last_epoch == 5
    assert lrs_of(opt) == pytest.approx([b * 0.9**5 for b in BASE_LRS])
    opt.step()
    resumed.step()
    assert lrs_of(opt) == pytest.approx([b * 0.9**6 for b in BASE_LRS])
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(make_opt(), 3, last_epoch=4)


def test_deprecated_step_with_epoch_uses_closed_form():
    opt = make_opt()
    sched = S.StepLR(opt, step_size=3, gamma=0.5)
    opt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(7)
    assert sched.last_epoch == 7
    assert lrs_of(opt) == pytest.approx([b * 0.5**2 for b in BASE_LRS])
    opt2 = make_opt()
    cos = S.CosineAnnealingLR(opt2, T_max=10, eta_min=0.01)
    opt2.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        cos.step(4)
    assert lrs_of(opt2) == pytest.approx([cosine(b, 4, 10, 0.01) for b in BASE_LRS])


def test_warnings():
    opt = make_opt()
    sched = S.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    opt2 = make_opt()
    sched2 = S.StepLR(opt2, 2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched2.step()
        sched2.step()
    # a second scheduler does not wrap optimizer.step twice
    step_fn = opt2.step
    S.ExponentialLR(opt2, 0.5)
    assert opt2.step is step_fn


def test_wrapped_step_follows_deepcopy():
    """optimizer.step, wrapped to track calls, acts on a deep-copied optimizer itself."""
    p = fg.nn.Parameter(fg.tensor(np.array([1.0, 2.0])))
    opt = optim.SGD([p], lr=0.5)
    S.StepLR(opt, 2)
    p.grad = fg.tensor(np.array([1.0, 1.0]))
    twin = copy.deepcopy(opt)
    assert twin.step is not opt.step and hasattr(twin.step, "_wrapped_by_lr_sched")
    twin.step()
    assert twin._opt_called and not getattr(opt, "_opt_called", False)
    np.testing.assert_allclose(p.detach().numpy(), [1.0, 2.0])  # the original is untouched
    np.testing.assert_allclose(twin.param_groups[0]["params"][0].detach().numpy(), [0.5, 1.5])
    opt.step()
    assert opt._opt_called
    np.testing.assert_allclose(p.detach().numpy(), [0.5, 1.5])


# ---------------------------------------------------------------------------
# OneCycleLR
# ---------------------------------------------------------------------------

ONECYCLE = [
    dict(total_steps=20),
    dict(total_steps=20, anneal_strategy="linear"),
    dict(total_steps=21, three_phase=True),
    dict(total_steps=17, three_phase=True, anneal_strategy="linear", pct_start=0.25),
    dict(epochs=4, steps_per_epoch=5, pct_start=0.4, div_factor=10.0, final_div_factor=100.0),
    dict(total_steps=10, base_momentum=0.8, max_momentum=0.9),
]


def _oc_ref_kwargs(kw: dict) -> dict:
    return dict(
        pct=kw.get("pct_start", 0.3),
        div=kw.get("div_factor", 25.0),
        fdiv=kw.get("final_div_factor", 1e4),
        three_phase=kw.get("three_phase", False),
        strategy=kw.get("anneal_strategy", "cos"),
        lo_m=kw.get("base_momentum", 0.85),
        hi_m=kw.get("max_momentum", 0.95),
    )


@pytest.mark.parametrize("kw", ONECYCLE, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_onecycle_lr_and_momentum(kw):
    max_lrs = [0.5, 0.2]
    opt = make_opt(momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=max_lrs, **kw)
    T = kw.get("total_steps") or kw["epochs"] * kw["steps_per_epoch"]
    assert sched.total_steps == T
    r = _oc_ref_kwargs(kw)
    got_lr, got_m = [lrs_of(opt)], [[g["momentum"] for g in opt.param_groups]]
    for _ in range(T):
        opt.step()
        sched.step()
        got_lr.append(lrs_of(opt))
        got_m.append([g["momentum"] for g in opt.param_groups])
    exp = [[onecycle_ref(s, T, m, **r) for m in max_lrs] for s in range(T + 1)]
    assert_seq(got_lr, [[x[0] for x in row] for row in exp])
    assert_seq(got_m, [[x[1] for x in row] for row in exp])
    # the schedule starts at max_lr / div_factor with max_momentum, peaks at max_lr
    assert got_lr[0] == pytest.approx([m / r["div"] for m in max_lrs])
    if float(r["pct"] * T).is_integer():
        assert max(row[0] for row in got_lr) == pytest.approx(max_lrs[0])
    for g, m in zip(opt.param_groups, max_lrs, strict=True):
        assert g["max_lr"] == m and g["initial_lr"] == m / r["div"]
        assert g["min_lr"] == pytest.approx(m / r["div"] / r["fdiv"])
    with pytest.raises(ValueError, match=f"Tried to step {T + 1} times.*total steps is {T}"):
        sched.step()


def test_onecycle_ends_at_min_lr():
    opt = make_opt()
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    for _ in range(9):
        opt.step()
        sched.step()
    assert lrs_of(opt) == pytest.approx([1.0 / 25 / 1e4] * 2)
    assert [g["momentum"] for g in opt.param_groups] == pytest.approx([0.95, 0.95])


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_onecycle_cycles_adam_beta1(kind):
    opt = make_opt(kind, betas=(0.9, 0.99))
    sched = S.OneCycleLR(opt, max_lr=0.01, total_steps=12, base_momentum=[0.8, 0.7], max_momentum=[0.9, 0.95])
    for s in range(13):
        if s:
            opt.step()
            sched.step()
        for g, lo, hi in zip(opt.param_groups, (0.8, 0.7), (0.9, 0.95), strict=True):
            lr, m = onecycle_ref(s, 12, 0.01, lo_m=lo, hi_m=hi)
            assert g["lr"] == pytest.approx(lr)
            assert isinstance(g["betas"], tuple)
            assert g["betas"][0] == pytest.approx(m)
            assert g["betas"][1] == 0.99
            assert "momentum" not in g


def test_onecycle_without_momentum_cycling():
    opt = make_opt("adam", betas=(0.9, 0.99))
    S.OneCycleLR(opt, max_lr=0.01, total_steps=12, cycle_momentum=False)
    assert all(g["betas"] == (0.9, 0.99) for g in opt.param_groups)
    plain = optim.Optimizer([fg.zeros(2, requires_grad=True)], {"lr": 0.1})
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.OneCycleLR(plain, max_lr=0.1, total_steps=5)
    S.OneCycleLR(plain, max_lr=0.1, total_steps=5, cycle_momentum=False)


def test_onecycle_momentum_drives_sgd_updates():
    """The cycled lr and momentum are the ones SGD uses: b1 = g, b2 = m2 * b1 + g."""
    p = fg.tensor(np.array([1.0, -2.0, 0.5]), requires_grad=True)
    c = np.array([0.3, -1.0, 2.0])
    opt = optim.SGD([p], lr=0.1, momentum=0.5)
    sched = S.OneCycleLR(opt, max_lr=0.4, total_steps=6)
    x = np.array([1.0, -2.0, 0.5])
    buf = None
    for _ in range(5):
        lr, m = opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]
        opt.zero_grad()
        (p * fg.tensor(c)).sum().backward()
        opt.step()
        buf = c.copy() if buf is None else m * buf + c
        x = x - lr * buf
        np.testing.assert_allclose(p.detach().numpy(), x, rtol=1e-12, atol=1e-14)
        sched.step()


# ---------------------------------------------------------------------------
# A scheduler driving a real optimizer
# ---------------------------------------------------------------------------


def test_steplr_changes_sgd_update_size():
    p = fg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    q = fg.tensor(np.array([[0.5, -0.5]]), requires_grad=True)
    cp, cq = np.array([0.5, -1.0, 2.0]), np.array([[3.0, 1.0]])
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.02}], lr=0.1)
    sched = S.StepLR(opt, step_size=2, gamma=0.1)
    seen = []
    for epoch in range(6):
        before_p, before_q = p.detach().numpy().copy(), q.detach().numpy().copy()
        opt.zero_grad()
        ((p * fg.tensor(cp)).sum() + (q * fg.tensor(cq)).sum()).backward()
        opt.step()
        lr_p, lr_q = 0.1 * 0.1 ** (epoch // 2), 0.02 * 0.1 ** (epoch // 2)
        assert sched.get_last_lr() == pytest.approx([lr_p, lr_q])
        np.testing.assert_allclose(before_p - p.detach().numpy(), lr_p * cp, rtol=1e-12)
        np.testing.assert_allclose(before_q - q.detach().numpy(), lr_q * cq, rtol=1e-12)
        seen.append(np.abs(before_p - p.detach().numpy()).max())
        sched.step()
    # the update shrinks by gamma at every step_size boundary
    assert seen[2] == pytest.approx(seen[1] * 0.1) and seen[4] == pytest.approx(seen[3] * 0.1)


def test_reduce_on_plateau_drives_adam_lr():
    p = fg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    sched = S.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    for loss in (1.0, 1.0, 1.0):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        sched.step(fg.tensor(loss))  # a one-element tensor metric
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)


# ---------------------------------------------------------------------------
# ReduceLROnPlateau
# ---------------------------------------------------------------------------


def test_plateau_min_rel_patience_cooldown():
    opt = make_opt(lrs=(1.0, 0.4))
    sched = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, cooldown=1, threshold=0.01, min_lr=[0.1, 0.2])
    # improvement needs metric < best * 0.99
    metrics = [10, 9, 8.95, 9.5, 9.2, 9.1, 9.3, 9.4, 9.5, 9.6, 5, 5, 5, 5, 5, 5, 5, 5, 5]
    # epoch:   1  2  3     4    5    6    7    8    9    10  11 ...
    # best 10, 9; 8.95 is not < 8.91 (bad 1), 9.5 (bad 2), 9.2 (bad 3 > 2: reduce, cooldown 1),
    # 9.1: cooldown -> 0, bad reset; 9.3 (1), 9.4 (2), 9.5 (3: reduce, cooldown), 9.6 cooldown,
    # 5 improves; then 5 repeated: bad 1, 2, 3 -> reduce (clamped at min_lr), cooldown, ...
    expected_factor = [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.125, 0.0625, 0.0625]
    for m, f in zip(metrics, expected_factor, strict=True):
        sched.step(m)
        assert lrs_of(opt) == pytest.approx([max(1.0 * f, 0.1), max(0.4 * f, 0.2)])
        assert sched.get_last_lr() == lrs_of(opt)
    assert sched.last_epoch == len(metrics)


@pytest.mark.parametrize(
    "mode,threshold_mode,metrics,n_reductions",
    [
        ("max", "rel", [1.0, 1.05, 1.1, 1.1005, 1.1009, 1.2], 1),  # 1.1005 and 1.1009 are not > 1.1 * 1.001
        ("max", "abs", [1.0, 1.05, 1.0, 1.04, 2.0, 2.0, 2.0], 2),
        ("min", "abs", [1.0, 0.96, 0.955, 0.95, 0.94, 0.9, 0.87, 0.86, 0.85], 2),  # threshold 0.05: only drops > 0.05 count
    ],
)
def test_plateau_modes(mode, threshold_mode, metrics, n_reductions):
    threshold = 0.001 if threshold_mode == "rel" else 0.05
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, mode=mode, threshold_mode=threshold_mode, threshold=threshold, patience=1)
    # reference of the rule, written out
    best = math.inf if mode == "min" else -math.inf
    bad, reductions = 0, 0
    for m in metrics:
        if mode == "min":
            better = m < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = m > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        best, bad = (m, 0) if better else (best, bad + 1)
        if bad > 1:
            reductions, bad = reductions + 1, 0
        sched.step(m)
        assert lrs_of(opt) == pytest.approx([b * 0.1**reductions for b in BASE_LRS])
    assert reductions == n_reductions


def test_plateau_eps_and_min_lr():
    opt = make_opt(lrs=(1e-8, 1.0))
    sched = S.ReduceLROnPlateau(opt, patience=0, min_lr=0.3)
    sched.step(1.0)
    sched.step(2.0)  # reduce: group 0 would change by < eps -> kept; group 1 clamps at 0.3
    assert lrs_of(opt) == [1e-8, 0.3]
    sched.step(3.0)
    assert lrs_of(opt) == [1e-8, 0.3]


# ---------------------------------------------------------------------------
# State dicts
# ---------------------------------------------------------------------------

ROUND_TRIP = {k: CASES[k][0] for k in CASES} | {
    "onecycle-sgd": lambda opt, M: M.OneCycleLR(opt, max_lr=[0.5, 0.2], total_steps=N_STEPS, three_phase=True),
    "onecycle-linear": lambda opt, M: M.OneCycleLR(opt, max_lr=0.3, total_steps=N_STEPS, anneal_strategy="linear"),
}


@pytest.mark.parametrize("name", list(ROUND_TRIP))
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_state_dict_round_trip_resumes_identically(name, kind):
    build = ROUND_TRIP[name]
    opt = make_opt(kind)
    sched = build(opt, S)
    for _ in range(7):
        opt.step()
        sched.step()
    saved_opt = copy.deepcopy(opt.state_dict())
    saved = copy.deepcopy(sched.state_dict())
    assert "optimizer" not in saved
    tail = run(opt, sched, N_STEPS - 7)

    opt2 = make_opt(kind)
    sched2 = build(opt2, S)  # constructed fresh: lrs differ until the state is loaded
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved)
    assert getattr(sched2, "last_epoch", 7) == 7
    tail2 = run(opt2, sched2, N_STEPS - 7)
    assert tail2 == tail
    assert [(g.get("momentum"), g.get("betas")) for g in opt2.param_groups] == [
        (g.get("momentum"), g.get("betas")) for g in opt.param_groups
    ]


def test_state_dict_contents():
    opt = make_opt()
    sched = S.LambdaLR(opt, [lambda e: 1.0, Halving(3)])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [None, {"every": 3}]
    assert sd["base_lrs"] == list(BASE_LRS) and sd["last_epoch"] == 0
    # a callable object's attributes are restored
    opt2 = make_opt()
    sched2 = S.LambdaLR(opt2, [lambda e: 1.0, Halving(10)])
    sched2.load_state_dict(sd)
    assert sched2.lr_lambdas[1].every == 3
    assert "lr_lambdas" in sd  # load_state_dict does not consume its argument
    seq = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9)], milestones=[2])
    sd = seq.state_dict()
    assert "optimizer" not in sd and len(sd["_schedulers"]) == 2
    assert all("optimizer" not in s for s in sd["_schedulers"])
    plateau = S.ReduceLROnPlateau(opt, mode="max")
    plateau.step(1.0)
    psd = copy.deepcopy(plateau.state_dict())
    p2 = S.ReduceLROnPlateau(make_opt())
    p2.load_state_dict(psd)
    assert p2.mode == "max" and p2.best == 1.0 and p2.mode_worse == -math.inf and p2.last_epoch == 1


# ---------------------------------------------------------------------------
# Argument errors
# ---------------------------------------------------------------------------


def _other_opt():
    return make_opt()


@pytest.mark.parametrize(
    "build,exc,match",
    [
        (lambda o: S.LambdaLR(o, [lambda e: 1.0]), ValueError, "Expected 2 lr_lambdas, but got 1"),
        (lambda o: S.MultiplicativeLR(o, [lambda e: 1.0] * 3), ValueError, "Expected 2 lr_lambdas"),
        (lambda o: S.MultiplicativeLR(o, 0.9), TypeError, "lr_lambda should be a function"),
        (lambda o: S.StepLR(o, 0), ValueError, "step_size must be a positive integer"),
        (lambda o: S.StepLR(o, 2.5), ValueError, "step_size must be a positive integer"),
        (lambda o: S.CosineAnnealingLR(o, 0), ValueError, "T_max must be a positive"),
        (lambda o: S.ConstantLR(o, factor=1.5), ValueError, "between 0 and 1"),
        (lambda o: S.ConstantLR(o, factor=-0.1), ValueError, "between 0 and 1"),
        (lambda o: S.LinearLR(o, start_factor=0), ValueError, "Starting multiplicative factor"),
        (lambda o: S.LinearLR(o, start_factor=1.2), ValueError, "Starting multiplicative factor"),
        (lambda o: S.LinearLR(o, end_factor=1.5), ValueError, "Ending multiplicative factor"),
        (lambda o: S.SequentialLR(o, [], []), ValueError, "at least one scheduler"),
        (lambda o: S.SequentialLR(o, [S.StepLR(o, 2), S.StepLR(o, 3)], []), ValueError, "one more than the number of milestone"),
        (lambda o: S.SequentialLR(o, [S.StepLR(_other_opt(), 2)], []), ValueError, "same optimizer"),
        (lambda o: S.SequentialLR(o, [S.ReduceLROnPlateau(o)], []), ValueError, "does not support `ReduceLROnPlateau`"),
        (lambda o: S.SequentialLR(o, [object()], []), TypeError, "should have `optimizer`"),
        (lambda o: S.ChainedScheduler([]), ValueError, "at least one scheduler"),
        (lambda o: S.ChainedScheduler([S.StepLR(o, 2), S.StepLR(_other_opt(), 2)]), ValueError, "same optimizer"),
        (lambda o: S.OneCycleLR(o, 0.1), ValueError, "either total_steps OR"),
        (lambda o: S.OneCycleLR(o, 0.1, epochs=3), ValueError, "either total_steps OR"),
        (lambda o: S.OneCycleLR(o, 0.1, total_steps=0), ValueError, "positive integer total_steps"),
        (lambda o: S.OneCycleLR(o, 0.1, total_steps=10.0), ValueError, "positive integer total_steps"),
        (lambda o: S.OneCycleLR(o, 0.1, epochs=0, steps_per_epoch=3), ValueError, "positive integer epochs"),
        (lambda o: S.OneCycleLR(o, 0.1, epochs=2, steps_per_epoch=-1), ValueError, "positive integer steps_per_epoch"),
        (lambda o: S.OneCycleLR(o, 0.1, total_steps=10, pct_start=1.5), ValueError, "pct_start"),
        (lambda o: S.OneCycleLR(o, 0.1, total_steps=10, pct_start=-0.1), ValueError, "pct_start"),
        (lambda o: S.OneCycleLR(o, 0.1, total_steps=10, anneal_strategy="exp"), ValueError, "anneal_strategy"),
        (lambda o: S.OneCycleLR(o, [0.1], total_steps=10), ValueError, "max_lr must have the same length"),
        (lambda o: S.OneCycleLR(o, 0.1, total_steps=10, max_momentum=[0.9] * 3), ValueError, "max_momentum must have"),
        (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError, "Factor should be < 1.0"),
        (lambda o: S.ReduceLROnPlateau(o, mode="avg"), ValueError, "mode avg is unknown"),
        (lambda o: S.ReduceLROnPlateau(o, threshold_mode="pct"), ValueError, "threshold mode pct is unknown"),
        (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError, "expected 2 min_lrs, got 1"),
        (lambda o: S.StepLR(object(), 2), TypeError, "is not an Optimizer"),
        (lambda o: S.OneCycleLR(object(), 0.1, total_steps=3), TypeError, "is not an Optimizer"),
        (lambda o: S.ReduceLROnPlateau(object()), TypeError, "is not an Optimizer"),
    ],
)
def test_bad_arguments(build, exc, match):
    with pytest.raises(exc, match=match):
        build(make_opt())


def test_exports():
    assert issubclass(S._LRScheduler, S.LRScheduler)
    for name in S.__all__:
        assert hasattr(S, name)
    assert optim.lr_scheduler is S
    for cls in (S.StepLR, S.OneCycleLR, S.ReduceLROnPlateau, S.SequentialLR, S.ChainedScheduler):
        assert issubclass(cls, S.LRScheduler)
        assert cls.__doc__


# ---------------------------------------------------------------------------
# Parity with torch: references stored in tests/fixtures/parity/lr_scheduler.json
# by scripts/make_parity_references.py (which records the PyTorch version)
# ---------------------------------------------------------------------------

PARITY = dict(ROUND_TRIP) | {
    "onecycle-default": lambda opt, M: M.OneCycleLR(opt, max_lr=0.5, total_steps=N_STEPS),
}
PLATEAU_METRICS = [5, 4, 4, 4, 4, 3, 3.5, 3.6, 3.7, 1, 1, 1]


def parity_optimizer_args(kind: str) -> dict:
    return {"momentum": 0.9} if kind == "sgd" else {}


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_parity_with_torch(kind):
    """Every schedule's lrs and momenta (or betas), epoch by epoch, against
    torch.optim.lr_scheduler's; then ReduceLROnPlateau on one metric stream."""
    import json
    from pathlib import Path

    refs = json.loads((Path(__file__).parent / "fixtures" / "parity" / "lr_scheduler.json").read_text())
    assert refs["torch_version"] and refs["n_steps"] == N_STEPS and refs["base_lrs"] == list(BASE_LRS)
    stored = refs[kind]
    assert sorted(stored) == sorted(PARITY), "regenerate: scripts/make_parity_references.py"
    key = "momentum" if kind == "sgd" else "betas"
    for name, build in PARITY.items():
        opt = make_opt(kind, **parity_optimizer_args(kind))
        ours = build(opt, S)
        want = stored[name]
        for e in range(N_STEPS + 1):
            if e:
                opt.step()
                ours.step()
            assert lrs_of(opt) == pytest.approx(want["lr"][e], rel=1e-12), (name, e)
            for g, tg in zip(opt.param_groups, want[key][e], strict=True):
                got = list(g[key]) if key == "betas" else g[key]
                assert got == pytest.approx(tg, rel=1e-12), (name, e, key)
    # ReduceLROnPlateau on one metric stream (PyTorch's run: one group, lr 0.1)
    opt = make_opt(kind)
    ours = S.ReduceLROnPlateau(opt, patience=1, cooldown=1, factor=0.5)
    want = refs["plateau"]
    assert len(want) == len(PLATEAU_METRICS)
    for m, w in zip(PLATEAU_METRICS, want, strict=True):
        ours.step(m)
        assert ours.get_last_lr()[0] / BASE_LRS[0] == pytest.approx(w / 0.1)
