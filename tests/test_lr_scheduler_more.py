"""PolynomialLR, CosineAnnealingWarmRestarts and CyclicLR: lr (and momentum) sequences over
many steps against closed forms written out here from the published definitions, state
dict round trips, the deprecated ``step(epoch)`` jumps and argument errors."""

from __future__ import annotations

import math
import warnings

import ferrograd as fg
import pytest
from ferrograd import optim
from ferrograd.optim import lr_scheduler as S

BASE_LRS = (0.1, 0.03)
N = 60


def make_opt(kind: str = "sgd", lrs: tuple[float, ...] = BASE_LRS, **kw) -> optim.Optimizer:
    groups = [{"params": [fg.zeros(3, requires_grad=True)], "lr": lr} for lr in lrs]
    cls = {"sgd": optim.SGD, "adam": optim.Adam}[kind]
    return cls(groups, **kw)


def run(opt, sched, n: int = N) -> list[list[float]]:
    out = [list(sched.get_last_lr())]
    for _ in range(n):
        opt.step()
        sched.step()
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
        out.append(list(sched.get_last_lr()))
    return out


def assert_seq(got, expected, rel: float = 1e-10, abs_: float = 1e-14) -> None:
    assert len(got) == len(expected)
    for e, (g, x) in enumerate(zip(got, expected, strict=True)):
        assert g == pytest.approx(x, rel=rel, abs=abs_), f"step {e}: {g} != {x}"


# ---------------------------------------------------------------------------
# PolynomialLR
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("total_iters", "power"), [(5, 1.0), (10, 2.0), (7, 0.5), (1, 3.0)])
def test_polynomial_sequence(total_iters, power):
    opt = make_opt()
    got = run(opt, S.PolynomialLR(opt, total_iters=total_iters, power=power))
    want = [[b * (1 - min(e, total_iters) / total_iters) ** power for b in BASE_LRS] for e in range(N + 1)]
    assert_seq(got, want)
    assert got[-1] == [0.0, 0.0]


def test_polynomial_defaults_and_closed_form_jump():
    opt = make_opt()
    sched = S.PolynomialLR(opt)
    assert (sched.total_iters, sched.power) == (5, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in (2, 3, 9):
            sched.step(e)
            assert sched.get_last_lr() == pytest.approx([b * (1 - min(e, 5) / 5) for b in BASE_LRS])


# ---------------------------------------------------------------------------
# CosineAnnealingWarmRestarts
# ---------------------------------------------------------------------------


def _sgdr(epoch: int, t0: int, mult: int, eta_min: float, base: float) -> float:
    """SGDR at an integer epoch: find the period holding it, then the cosine within it."""
    start, period = 0, t0
    while epoch >= start + period:
        start += period
        period *= mult
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * (epoch - start) / period)) / 2


@pytest.mark.parametrize(("t0", "mult", "eta_min"), [(5, 1, 0.0), (3, 2, 0.001), (1, 3, 0.0), (4, 1, 0.01)])
def test_warm_restarts_sequence(t0, mult, eta_min):
    opt = make_opt()
    got = run(opt, S.CosineAnnealingWarmRestarts(opt, T_0=t0, T_mult=mult, eta_min=eta_min))
    want = [[_sgdr(e, t0, mult, eta_min, b) for b in BASE_LRS] for e in range(N + 1)]
    assert_seq(got, want)


def test_warm_restarts_fractional_epochs():
    """``step(epoch)`` with fractional epochs (stepping per batch) lands on the same curve."""
    opt = make_opt()
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    for e in (0.5, 1.25, 3.75, 9.5, 20.0, 2.0):
        sched.step(e)
        start, period = 0.0, 3
        while e >= start + period:
            start += period
            period *= 2
        want = [b * (1 + math.cos(math.pi * (e - start) / period)) / 2 for b in BASE_LRS]
        assert sched.get_last_lr() == pytest.approx(want, rel=1e-12)
        assert sched.last_epoch == math.floor(e)
    with pytest.raises(ValueError, match="non-negative epoch"):
        sched.step(-1)


def test_warm_restarts_state_dict_resumes():
    opt = make_opt()
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    for _ in range(5):
        opt.step()
        sched.step()
    state = sched.state_dict()
    opt2 = make_opt()
    sched2 = S.CosineAnnealingWarmRestarts(opt2, T_0=2, T_mult=2)
    sched2.load_state_dict(state)
    for g, g2 in zip(opt.param_groups, opt2.param_groups, strict=True):
        g2["lr"] = g["lr"]
    assert run(opt, sched, 10) == run(opt2, sched2, 10)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"T_0": 0}, "positive integer T_0"),
        ({"T_0": 2.5}, "positive integer T_0"),
        ({"T_0": 2, "T_mult": 0}, "T_mult"),
    ],
)
def test_warm_restarts_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        S.CosineAnnealingWarmRestarts(make_opt(), **kw)


# ---------------------------------------------------------------------------
# CyclicLR
# ---------------------------------------------------------------------------


def _triangle(it: int, up: int, down: int) -> tuple[int, float]:
    """(cycle number from 1, position 0..1..0 on the triangle) at iteration ``it``."""
    total = up + down
    cycle = it // total + 1
    r = it % total
    return cycle, (r / up if r <= up else (total - r) / down)


@pytest.mark.parametrize(
    ("mode", "up", "down", "gamma"),
    [
        ("triangular", 4, None, 1.0),
        ("triangular2", 3, 5, 1.0),
        ("exp_range", 3, 2, 0.95),
        ("triangular", 1, 1, 1.0),
    ],
)
def test_cyclic_sequence_and_momentum(mode, up, down, gamma):
    base, top = (0.001, 0.002), (0.1, 0.05)
    opt = make_opt(momentum=0.5)
    sched = S.CyclicLR(
        opt, list(base), list(top), step_size_up=up, step_size_down=down, mode=mode, gamma=gamma
    )
    moms = [[g["momentum"] for g in opt.param_groups]]
    got = [list(sched.get_last_lr())]
    for _ in range(N):
        opt.step()
        sched.step()
        got.append(list(sched.get_last_lr()))
        moms.append([g["momentum"] for g in opt.param_groups])
    want_lr, want_m = [], []
    for it in range(N + 1):
        cycle, h = _triangle(it, up, down or up)
        scale = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": gamma**it}[mode]
        want_lr.append([b + (t - b) * h * scale for b, t in zip(base, top, strict=True)])
        want_m.append([0.9 - (0.9 - 0.8) * h * scale] * 2)
    assert_seq(got, want_lr)
    assert_seq(moms, want_m)


def test_cyclic_beta1_custom_scale_fn_and_state_dict():
    opt = make_opt("adam")
    sched = S.CyclicLR(
        opt, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 1.0 / x, scale_mode="cycle", base_momentum=0.85
    )
    betas = []
    for _ in range(8):
        opt.step()
        sched.step()
        betas.append(opt.param_groups[0]["betas"][0])
    for it, b1 in enumerate(betas, start=1):
        cycle, h = _triangle(it, 2, 2)
        assert b1 == pytest.approx(0.9 - 0.05 * h / cycle)
        assert opt.param_groups[0]["betas"][1] == 0.999
    state = sched.state_dict()
    assert "_scale_fn_ref" not in state and state["_scale_fn_custom"] is None
    sched.load_state_dict(state)
    assert sched.scale_fn(2) == 0.5


def test_cyclic_without_momentum_sets_base_lr_at_start():
    opt = make_opt("sgd", lrs=(0.5, 0.5))
    sched = S.CyclicLR(opt, 0.01, 0.1, step_size_up=5, cycle_momentum=False)
    assert sched.get_last_lr() == [0.01, 0.01]
    assert sched.base_lrs == [0.01, 0.01]


def test_cyclic_errors():
    with pytest.raises(ValueError, match="mode is invalid"):
        S.CyclicLR(make_opt(momentum=0.9), 0.01, 0.1, mode="nope")
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.CyclicLR(optim.Adagrad([fg.zeros(2, requires_grad=True)]), 0.01, 0.1)
    with pytest.raises(ValueError, match="base_lr must have the same length"):
        S.CyclicLR(make_opt(momentum=0.9), [0.1, 0.2, 0.3], 0.5)
