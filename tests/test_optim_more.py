"""ferrograd.optim: Adadelta, Adagrad, Adamax, NAdam and RAdam.

Trajectories are compared with NumPy float64 re-implementations of the
update rules PyTorch documents; L-BFGS also against a NumPy implementation
of the same algorithm (every point the closure is evaluated at) and against
known optima; swa_utils on a tiny model.
"""

from __future__ import annotations

import copy
import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn, optim

# ---------------------------------------------------------------------------
# NumPy references (float64) of the documented update rules
# ---------------------------------------------------------------------------


def ref_update(kind: str, hp: dict, p: np.ndarray, g: np.ndarray, st: dict) -> None:
    """One update of ``p`` (in place) and its state ``st`` for optimizer ``kind``."""
    g = -g if hp.get("maximize", False) else g.copy()
    t = st["step"] = st.get("step", 0) + 1
    lr, wd, eps = hp["lr"], hp["weight_decay"], hp["eps"]
    decoupled = hp.get("decoupled_weight_decay", False)
    if wd:
        if decoupled:
            p *= 1 - lr * wd
        else:
            g = g + wd * p
    if kind == "adadelta":
        rho = hp["rho"]
        v = st["v"] = rho * st.get("v", 0.0) + (1 - rho) * g**2
        delta = np.sqrt(st.get("u", 0.0) + eps) / np.sqrt(v + eps) * g
        st["u"] = rho * st.get("u", 0.0) + (1 - rho) * delta**2
        p -= lr * delta
    elif kind == "adagrad":
        s = st["s"] = st.get("s", hp["initial_accumulator_value"]) + g**2
        p -= lr / (1 + (t - 1) * hp["lr_decay"]) * g / (np.sqrt(s) + eps)
    elif kind == "adamax":
        b1, b2 = hp["betas"]
        m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
        u = st["u"] = np.maximum(b2 * st.get("u", 0.0), np.abs(g) + eps)
        p -= lr / (1 - b1**t) * m / u
    elif kind == "nadam":
        b1, b2 = hp["betas"]
        psi = hp["momentum_decay"]
        mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        prod = st["prod"] = st.get("prod", 1.0) * mu
        m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
        v = st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g**2
        m_hat = mu_next * m / (1 - prod * mu_next) + (1 - mu) * g / (1 - prod)
        p -= lr * m_hat / (np.sqrt(v / (1 - b2**t)) + eps)
    elif kind == "radam":
        b1, b2 = hp["betas"]
        m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
        v = st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g**2
        m_hat = m / (1 - b1**t)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        st.setdefault("rectified", []).append(rho_t > 5)
        if rho_t > 5:
            l_t = math.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
            r_t = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p -= lr * m_hat * r_t * l_t
        else:
            p -= lr * m_hat
    else:
        raise AssertionError(kind)


CLASSES = {
    "adadelta": optim.Adadelta,
    "adagrad": optim.Adagrad,
    "adamax": optim.Adamax,
    "nadam": optim.NAdam,
    "radam": optim.RAdam,
}
# PyTorch's defaults, checked against the constructors below.
DEFAULTS = {
    "adadelta": dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False),
    "adagrad": dict(
        lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10, maximize=False
    ),
    "adamax": dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False),
    "nadam": dict(
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        momentum_decay=4e-3,
        decoupled_weight_decay=False,
        maximize=False,
    ),
    "radam": dict(
        lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False, maximize=False
    ),
}
CONFIGS = [
    ("adadelta", dict()),
    ("adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1)),
    ("adadelta", dict(lr=0.5, maximize=True, weight_decay=0.05)),
    ("adagrad", dict(lr=0.1)),
    ("adagrad", dict(lr=0.1, lr_decay=0.3, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("adagrad", dict(lr=0.05, eps=1e-3, maximize=True)),
    ("adamax", dict(lr=0.01)),
    ("adamax", dict(lr=0.01, betas=(0.5, 0.7), weight_decay=0.2, eps=1e-3)),
    ("adamax", dict(lr=0.01, maximize=True)),
    ("nadam", dict(lr=0.01)),
    ("nadam", dict(lr=0.01, momentum_decay=0.3, betas=(0.8, 0.95), weight_decay=0.1)),
    ("nadam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    # beta2 = 0.9: rho_t > 5 from step 6 on, so a 8-step run crosses the rectification switch
    ("radam", dict(lr=0.01, betas=(0.9, 0.9))),
    ("radam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, eps=1e-4)),
    ("radam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("radam", dict(lr=0.01)),  # beta2 = 0.999: never rectified in these few steps
]
STEPS = 8
TOL = {"float64": (1e-11, 1e-12), "float32": (3e-5, 3e-6)}


def _cfg_id(c):
    kind, kw = c
    return kind + "-" + ",".join(f"{k}={v}" for k, v in kw.items())


def _run_pair(kind, kw, dtype, device="cpu", steps=STEPS, seed=0):
    """Run ferrograd and the reference side by side; return the per-step max deviations."""
    rng = np.random.default_rng(seed)
    hp = {**DEFAULTS[kind], **kw}
    shapes = [(3, 4), (5,), ()]
    ref_p = [rng.normal(size=s) for s in shapes]
    ps = [fg.tensor(a.astype(dtype), device=device, requires_grad=True) for a in ref_p]
    # two groups: the second with its own lr
    opt = CLASSES[kind]([{"params": ps[:2]}, {"params": ps[2:], "lr": hp["lr"] * 0.5}], **kw)
    ref_hp = [hp, {**hp, "lr": hp["lr"] * 0.5}]
    ref_st = [{} for _ in ps]
    ref_p = [a.astype(dtype).astype(np.float64) for a in ref_p]
    for step in range(steps):
        for i, (p, a) in enumerate(zip(ps, ref_p, strict=True)):
            if i == 1 and step == 2:
                p.grad = None  # a parameter without a gradient is skipped
                continue
            g = rng.normal(size=a.shape).astype(dtype)
            p.grad = fg.tensor(g, device=device)
            ref_update(kind, ref_hp[0 if i < 2 else 1], a, g.astype(np.float64), ref_st[i])
        opt.step()
        for p, a in zip(ps, ref_p, strict=True):
            got = np.asarray(p.detach().cpu().numpy(), dtype=np.float64)
            rtol, atol = TOL[dtype]
            np.testing.assert_allclose(got, a, rtol=rtol, atol=atol, err_msg=f"{kind} {kw} step {step}")
    return opt, ps, ref_st


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=_cfg_id)
def test_matches_reference(cfg, dtype):
    """Eight steps over three parameters in two groups (one skipped once) follow the reference."""
    kind, kw = cfg
    opt, ps, ref_st = _run_pair(kind, kw, dtype)
    # step counts are per parameter (the one skipped once is behind)
    assert [opt.state[p]["step"] for p in ps] == [STEPS, STEPS - 1, STEPS]


def test_radam_crosses_the_rectification_switch():
    """The beta2 = 0.9 configuration takes both branches (else the switch goes untested)."""
    _, _, ref_st = _run_pair("radam", dict(lr=0.01, betas=(0.9, 0.9)), "float64")
    flags = ref_st[0]["rectified"]
    assert not flags[0] and flags[-1], flags


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_defaults_are_pytorchs(kind):
    p = fg.zeros(2, requires_grad=True)
    opt = CLASSES[kind]([p])
    for k, v in DEFAULTS[kind].items():
        assert opt.defaults[k] == v, (kind, k)
    assert opt.param_groups[0]["params"] == [p]
    assert "foreach" in opt.defaults


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_parameter_identity_and_no_history(kind):
    """Steps update the parameter objects in place and record no autograd history."""
    p = fg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    before = p
    opt = CLASSES[kind]([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    assert opt.param_groups[0]["params"][0] is before
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert not np.allclose(p.detach().numpy(), [1.0, -2.0, 3.0])


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_state_dict_round_trip(kind):
    """Stop after 3 steps, reload into a fresh optimizer and parameters: the next 3 steps agree."""
    kw = dict(weight_decay=0.1) if kind != "adagrad" else dict(lr_decay=0.1, initial_accumulator_value=0.2)
    rng = np.random.default_rng(3)
    init = [rng.normal(size=(2, 3)), rng.normal(size=(4,))]
    grads = [[rng.normal(size=a.shape) for a in init] for _ in range(6)]
    pa = [fg.tensor(a, requires_grad=True) for a in init]
    oa = CLASSES[kind](pa, lr=0.05, **kw)
    for s in range(3):
        for p, g in zip(pa, grads[s], strict=True):
            p.grad = fg.tensor(g)
        oa.step()
    sd = oa.state_dict()
    assert set(sd) == {"state", "param_groups"} and sorted(sd["state"]) == [0, 1]
    assert sd["state"][0]["step"] == 3
    pb = [fg.tensor(p.detach().numpy(), requires_grad=True) for p in pa]
    ob = CLASSES[kind](pb, lr=0.5)  # the loaded groups bring their own lr back
    ob.load_state_dict(copy.deepcopy(sd))
    assert ob.param_groups[0]["lr"] == 0.05
    for s in range(3, 6):
        for ps in (pa, pb):
            for p, g in zip(ps, grads[s], strict=True):
                p.grad = fg.tensor(g)
        oa.step()
        ob.step()
    for a, b in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_nadam_loads_pytorch_layout_state():
    """PyTorch keeps ``step`` and ``mu_product`` as one-element tensors; both load."""
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.NAdam([p], lr=0.1)
    p.grad = fg.tensor([0.5, -0.5])
    opt.step()
    sd = opt.state_dict()
    mp = sd["state"][0]["mu_product"]
    assert isinstance(mp, float) and 0 < mp < 1
    sd["state"][0]["mu_product"] = fg.tensor(mp, dtype=fg.float64)
    sd["state"][0]["step"] = fg.tensor(1.0)
    q = fg.tensor([1.0, 2.0], requires_grad=True)
    o2 = optim.NAdam([q], lr=0.1)
    o2.load_state_dict(sd)
    assert o2.state[q]["mu_product"] == mp and o2.state[q]["step"] == 1


def test_adagrad_state_exists_at_construction():
    p = fg.zeros(3, requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.25)
    assert opt.state[p]["step"] == 0
    np.testing.assert_array_equal(opt.state[p]["sum"].numpy(), [0.25] * 3)


@pytest.mark.parametrize(
    ("cls", "kw", "match"),
    [
        (optim.Adadelta, dict(lr=-1.0), "Invalid learning rate"),
        (optim.Adadelta, dict(rho=1.5), "Invalid rho value"),
        (optim.Adadelta, dict(eps=-1.0), "Invalid epsilon value"),
        (optim.Adagrad, dict(lr_decay=-0.1), "Invalid lr_decay value"),
        (optim.Adagrad, dict(initial_accumulator_value=-1.0), "Invalid initial_accumulator_value"),
        (optim.Adagrad, dict(weight_decay=-1.0), "Invalid weight_decay value"),
        (optim.Adamax, dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
        (optim.NAdam, dict(momentum_decay=-1.0), "Invalid momentum_decay value"),
        (optim.NAdam, dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
        (optim.RAdam, dict(betas=(0.9,)), "betas must be a pair"),
        (optim.RAdam, dict(differentiable=True), "differentiable=True is not supported"),
    ],
)
def test_bad_hyperparameters(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls([fg.zeros(2, requires_grad=True)], **kw)


def test_gradient_of_the_wrong_shape_is_refused_before_any_update():
    p = fg.zeros(3, requires_grad=True)
    q = fg.zeros(2, requires_grad=True)
    opt = optim.NAdam([p, q], lr=0.1)
    p.grad = fg.ones(3)
    q.grad = fg.ones(2, dtype=fg.float64)
    with pytest.raises(
        ValueError,
        match=r"NAdam.step: parameter 1 has shape \(2,\), dtype \S*float32 on cpu, but its gradient .*float64",
    ):
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0, 0.0])
    assert len(opt.state) == 0


@pytest.mark.parametrize("kind", ["nadam", "adagrad"])
def test_step_refuses_graph_capture(kind):
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = CLASSES[kind]([p], lr=0.1)

    @fg.compile
    def train_step(x):
        loss = (p * x).sum()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(fg.TraceError, match=f"{type(opt).__name__}.step\\(\\) cannot be captured"):
        train_step(fg.tensor([1.0, 1.0]))


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_closure_is_evaluated_and_returned(kind):
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = CLASSES[kind]([p], lr=0.1)
    calls = []

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        calls.append(1)
        return loss

    loss = opt.step(closure)
    assert calls == [1] and float(loss) == 5.0


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_training_converges(kind):
    """A least-squares fit of a tiny linear model gets its loss down by 10x."""
    fg.manual_seed(0)
    rng = np.random.default_rng(0)
    x = fg.tensor(rng.normal(size=(64, 3)).astype(np.float32))
    y = x @ fg.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    model = nn.Linear(3, 1)
    lr = {"adadelta": 20.0, "adagrad": 0.3, "adamax": 0.1, "nadam": 0.1, "radam": 0.2}[kind]
    opt = CLASSES[kind](model.parameters(), lr=lr)
    first = None
    for _ in range(60):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = first if first is not None else float(loss)
    assert float(loss) < first / 10, (kind, first, float(loss))


def _gpu_skip():
    if not fg.gpu.is_available():
        reason = f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
        print(f"skipping the GPU case: {reason}")
        pytest.skip(reason)


@pytest.mark.parametrize("cfg", [CONFIGS[i] for i in (1, 4, 7, 11, 14)], ids=_cfg_id)
def test_gpu_parameters_follow_the_reference(cfg):
    """Parameters and gradients on the GPU (float32): the state lives there and the steps match."""
    _gpu_skip()
    kind, kw = cfg
    opt, ps, _ = _run_pair(kind, kw, "float32", device="gpu", steps=4)
    for p in ps:
        assert p.device.type == "gpu" if hasattr(p.device, "type") else str(p.device) == "gpu"
        for v in opt.state[p].values():
            if isinstance(v, fg.Tensor):
                assert str(v.device) == "gpu"
