"""ferrograd.optim: Adadelta, Adagrad, Adamax, NAdam, RAdam, LBFGS and swa_utils.

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
from ferrograd.optim import swa_utils

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
        (optim.LBFGS, dict(line_search_fn="armijo"), "line_search_fn must be None or 'strong_wolfe'"),
        (optim.LBFGS, dict(history_size=0), "history_size must be a positive int"),
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


def test_gpu_loads_cpu_state():
    """A state dict saved on the CPU loads into an optimizer of GPU parameters: the state moves there."""
    _gpu_skip()
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adamax([p], lr=0.1)
    p.grad = fg.tensor([0.5, -1.0])
    opt.step()
    q = fg.tensor(p.detach().numpy(), device="gpu", requires_grad=True)
    o2 = optim.Adamax([q], lr=0.1)
    o2.load_state_dict(opt.state_dict())
    assert str(o2.state[q]["exp_avg"].device) == "gpu"
    for t, o in ((p, opt), (q, o2)):
        t.grad = fg.tensor([0.25, 0.5], device=t.device)
        o.step()
    np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().numpy(), rtol=1e-6)


# ---------------------------------------------------------------------------
# L-BFGS: a NumPy implementation of PyTorch's algorithm
# ---------------------------------------------------------------------------


def _np_cubic(x1, f1, g1, x2, f2, g2, bounds=None):
    lo, hi = bounds if bounds is not None else sorted((x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2
    d2 = math.sqrt(disc)
    if x1 <= x2:
        m = x2 - (x2 - x1) * (g2 + d2 - d1) / (g2 - g1 + 2 * d2)
    else:
        m = x1 - (x1 - x2) * (g1 + d2 - d1) / (g1 - g2 + 2 * d2)
    return float(np.clip(m, lo, hi))


def _np_wolfe(fgrad, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tol=1e-9, max_ls=25):
    """Bracketing then zoom; returns (f, g, t, evaluations)."""
    dmax = np.abs(d).max()
    fn, gn = fgrad(x + t * d)
    n_ev, gtdn = 1, gn @ d
    tp, fp, gp, gtdp = 0.0, f, g, gtd
    done, it, br = False, 0, None
    while it < max_ls:
        if fn > f + c1 * t * gtd or (it > 1 and fn >= fp):
            br = [[tp, fp, gp, gtdp], [t, fn, gn, gtdn]]
            break
        if abs(gtdn) <= -c2 * gtd:
            br, done = [[t, fn, gn, gtdn]], True
            break
        if gtdn >= 0:
            br = [[tp, fp, gp, gtdp], [t, fn, gn, gtdn]]
            break
        nt = _np_cubic(tp, fp, gtdp, t, fn, gtdn, bounds=(t + 0.01 * (t - tp), 10 * t))
        tp, fp, gp, gtdp = t, fn, gn, gtdn
        t = nt
        fn, gn = fgrad(x + t * d)
        n_ev, gtdn, it = n_ev + 1, gn @ d, it + 1
    if it == max_ls:
        br = [[0.0, f, g, gtd], [t, fn, gn, gtdn]]
    insuf = False
    lo = 0 if br[0][1] <= br[-1][1] else 1
    while not done and it < max_ls:
        hi = 1 - lo
        if abs(br[1][0] - br[0][0]) * dmax < tol:
            break
        t = _np_cubic(br[0][0], br[0][1], br[0][3], br[1][0], br[1][1], br[1][3])
        bmax, bmin = max(br[0][0], br[1][0]), min(br[0][0], br[1][0])
        e = 0.1 * (bmax - bmin)
        if min(bmax - t, t - bmin) < e:
            if insuf or t >= bmax or t <= bmin:
                t = bmax - e if abs(t - bmax) < abs(t - bmin) else bmin + e
                insuf = False
            else:
                insuf = True
        else:
            insuf = False
        fn, gn = fgrad(x + t * d)
        n_ev, gtdn, it = n_ev + 1, gn @ d, it + 1
        if fn > f + c1 * t * gtd or fn >= br[lo][1]:
            br[hi] = [t, fn, gn, gtdn]
            lo = 0 if br[0][1] <= br[1][1] else 1
        else:
            if abs(gtdn) <= -c2 * gtd:
                done = True
            elif gtdn * (br[hi][0] - br[lo][0]) >= 0:
                br[hi] = list(br[lo])
            br[lo] = [t, fn, gn, gtdn]
    if len(br) == 1:
        lo = 0
    return br[lo][1], br[lo][2], br[lo][0], n_ev


def np_lbfgs(
    fgrad,
    x,
    calls,
    lr=1.0,
    max_iter=20,
    max_eval=None,
    tol_grad=1e-7,
    tol_change=1e-9,
    history=100,
    wolfe=False,
):
    """``calls`` step() calls of L-BFGS from ``x``; returns the final x and every evaluated point."""
    max_eval = max_eval or max_iter * 5 // 4
    points = []

    def ev(z):
        points.append(z.copy())
        return fgrad(z)

    st = {"n_iter": 0}
    x = x.copy()
    for _ in range(calls):
        f, g = ev(x)
        evals = 1
        if np.abs(g).max() <= tol_grad:
            continue
        for n in range(1, max_iter + 1):
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d, S, Y, H = -g, [], [], 1.0
            else:
                y, s = g - st["g_prev"], st["d"] * st["t"]
                ys = y @ s
                if ys > 1e-10:
                    if len(S) == history:
                        S.pop(0)
                        Y.pop(0)
                    S.append(s)
                    Y.append(y)
                    H = ys / (y @ y)
                q, alphas = -g, []
                for s_i, y_i in zip(reversed(S), reversed(Y), strict=True):
                    a = (s_i @ q) / (y_i @ s_i)
                    alphas.append(a)
                    q = q - a * y_i
                r = q * H
                for s_i, y_i, a in zip(S, Y, reversed(alphas), strict=True):
                    r = r + s_i * (a - (y_i @ r) / (y_i @ s_i))
                d = r
            st["g_prev"], f_prev = g.copy(), f
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if st["n_iter"] == 1 else lr
            gtd = g @ d
            if gtd > -tol_change:
                st["d"], st["t"] = d, t
                break
            if wolfe:
                f, g, t, k = _np_wolfe(ev, x, t, d, f, g, gtd, tol=tol_change)
                x = x + t * d
                done = np.abs(g).max() <= tol_grad
            else:
                x = x + t * d
                k, done = 0, False
                if n != max_iter:
                    f, g = ev(x)
                    k, done = 1, np.abs(g).max() <= tol_grad
            evals += k
            st["d"], st["t"] = d, t
            if n == max_iter or evals >= max_eval or done:
                break
            if np.abs(d).max() * abs(t) <= tol_change or abs(f - f_prev) < tol_change:
                break
    return x, points


def rosenbrock_np(z):
    x, y = z
    f = (1 - x) ** 2 + 100 * (y - x * x) ** 2
    return f, np.array([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)])


def _fg_lbfgs(x0, calls, dtype=fg.float64, device="cpu", **kw):
    """Run ferrograd's L-BFGS on Rosenbrock; returns the final x and every evaluated point."""
    x = fg.tensor(x0[:1], dtype=dtype, device=device, requires_grad=True)
    y = fg.tensor(x0[1:], dtype=dtype, device=device, requires_grad=True)
    opt = optim.LBFGS([x, y], **kw)
    points = []

    def closure():
        opt.zero_grad()
        points.append(np.concatenate([x.detach().cpu().numpy(), y.detach().cpu().numpy()]).astype(np.float64))
        loss = ((1 - x) ** 2 + 100 * (y - x * x) ** 2).sum()
        loss.backward()
        return loss

    for _ in range(calls):
        opt.step(closure)
    return (
        np.concatenate([x.detach().cpu().numpy(), y.detach().cpu().numpy()]).astype(np.float64),
        points,
        opt,
    )


X0 = np.array([-1.5, 2.0])


@pytest.mark.parametrize(
    "kw",
    [
        dict(line_search_fn="strong_wolfe"),
        dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7),
        dict(lr=0.02, max_iter=10),
        dict(lr=0.05, history_size=2, max_iter=4, max_eval=3),
    ],
    ids=["wolfe", "wolfe-h3", "fixed-step", "fixed-h2-maxeval"],
)
def test_lbfgs_matches_numpy_step_for_step(kw):
    """Every point the closure is evaluated at, over several step() calls, matches the NumPy algorithm."""
    calls = 4
    _, got, _ = _fg_lbfgs(X0, calls, **kw)
    np_kw = dict(
        lr=kw.get("lr", 1.0),
        max_iter=kw.get("max_iter", 20),
        max_eval=kw.get("max_eval"),
        history=kw.get("history_size", 100),
        wolfe=kw.get("line_search_fn") == "strong_wolfe",
    )
    _, want = np_lbfgs(rosenbrock_np, X0, calls, **np_kw)
    assert len(got) == len(want) > calls
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-7, atol=1e-9)


def test_lbfgs_strong_wolfe_minimises_rosenbrock():
    x, points, opt = _fg_lbfgs(
        X0, 5, line_search_fn="strong_wolfe", max_iter=100, tolerance_grad=1e-10, tolerance_change=1e-14
    )
    np.testing.assert_allclose(x, [1.0, 1.0], atol=1e-6)
    st = opt.state[opt.param_groups[0]["params"][0]]
    assert st["func_evals"] == len(points) and st["n_iter"] > 10


def test_lbfgs_fixed_step_minimises_rosenbrock():
    """Without a line search (a small fixed lr, as PyTorch's default behaviour needs on this valley)."""
    x, _, _ = _fg_lbfgs(X0, 40, lr=0.1, max_iter=50, tolerance_change=0.0, tolerance_grad=0.0)
    np.testing.assert_allclose(x, [1.0, 1.0], atol=1e-4)


def test_lbfgs_least_squares_over_several_parameters():
    """A linear model's weight and bias (two shapes, one flat vector) reach the least-squares solution."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(30, 4))
    b = rng.normal(size=(30, 2))
    w = fg.zeros(4, 2, dtype=fg.float64, requires_grad=True)
    c = fg.zeros(2, dtype=fg.float64, requires_grad=True)
    opt = optim.LBFGS([w, c], line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=1e-14)
    at, bt = fg.tensor(a), fg.tensor(b)

    def closure():
        opt.zero_grad()
        loss = ((at @ w + c - bt) ** 2).sum()
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    sol = np.linalg.lstsq(np.hstack([a, np.ones((30, 1))]), b, rcond=None)[0]
    np.testing.assert_allclose(w.detach().numpy(), sol[:4], atol=1e-8)
    np.testing.assert_allclose(c.detach().numpy(), sol[4], atol=1e-8)


def test_lbfgs_fits_a_module_through_its_parameters():
    """The usual script shape: ``LBFGS(model.parameters())`` and a closure over a loss module."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=(40, 3))
    y = a @ np.array([[0.5], [-1.0], [2.0]]) + 0.25 + 0.01 * rng.normal(size=(40, 1))
    model = nn.Linear(3, 1).double()
    loss_fn = nn.MSELoss()
    opt = optim.LBFGS(model.parameters(), lr=1, max_iter=50, line_search_fn="strong_wolfe")
    x, t = fg.tensor(a), fg.tensor(y)

    def closure():
        opt.zero_grad()
        loss = loss_fn(model(x), t)
        loss.backward()
        return loss

    first = float(opt.step(closure))
    sol = np.linalg.lstsq(np.hstack([a, np.ones((40, 1))]), y, rcond=None)[0]
    np.testing.assert_allclose(model.weight.detach().numpy().ravel(), sol[:3, 0], atol=1e-6)
    np.testing.assert_allclose(model.bias.detach().numpy(), sol[3], atol=1e-6)
    assert float(closure()) < first / 100


def test_lbfgs_state_dict_round_trip():
    """Two calls, save, reload into a fresh optimizer: the third call matches an uninterrupted run."""
    kw = dict(line_search_fn="strong_wolfe", max_iter=3, history_size=4)
    x_full, _, _ = _fg_lbfgs(X0, 3, **kw)
    x2, _, opt = _fg_lbfgs(X0, 2, **kw)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0] and len(sd["state"][0]["old_dirs"]) > 0
    x = fg.tensor(x2[:1], dtype=fg.float64, requires_grad=True)
    y = fg.tensor(x2[1:], dtype=fg.float64, requires_grad=True)
    o2 = optim.LBFGS([x, y], **kw)
    o2.load_state_dict(sd)

    def closure():
        o2.zero_grad()
        loss = ((1 - x) ** 2 + 100 * (y - x * x) ** 2).sum()
        loss.backward()
        return loss

    o2.step(closure)
    np.testing.assert_allclose(np.concatenate([x.detach().numpy(), y.detach().numpy()]), x_full, rtol=1e-12)


def test_lbfgs_returns_the_first_loss_and_stops_at_an_optimum():
    p = fg.tensor([0.0, 0.0], dtype=fg.float64, requires_grad=True)
    opt = optim.LBFGS([p])
    n = []

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        n.append(1)
        return loss

    assert float(opt.step(closure)) == 0.0
    assert len(n) == 1  # the gradient is zero: no iteration


def test_lbfgs_errors():
    p = fg.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [p]}, {"params": [fg.zeros(1, requires_grad=True)]}])
    opt = optim.LBFGS([p])
    with pytest.raises(ValueError, match="requires a closure"):
        opt.step()
    with pytest.raises(ValueError, match="must share a dtype"):
        optim.LBFGS([p, fg.zeros(2, dtype=fg.float64, requires_grad=True)])


def test_lbfgs_on_gpu():
    """Rosenbrock from the same start on the GPU (float32) reaches the optimum."""
    _gpu_skip()
    x, _, _ = _fg_lbfgs(X0, 5, dtype=fg.float32, device="gpu", line_search_fn="strong_wolfe", max_iter=100)
    np.testing.assert_allclose(x, [1.0, 1.0], atol=2e-3)


# ---------------------------------------------------------------------------
# swa_utils
# ---------------------------------------------------------------------------


def _tiny_model():
    fg.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def _perturb(model, rng):
    with fg.no_grad():
        for p in model.parameters():
            p.add_(fg.tensor(rng.normal(size=tuple(p.shape)).astype(np.float32)))


def _params_np(model):
    return [p.detach().numpy().astype(np.float64) for p in model.parameters()]


def test_averaged_model_swa_is_the_mean_of_snapshots():
    rng = np.random.default_rng(0)
    model = _tiny_model()
    swa = swa_utils.AveragedModel(model)
    snaps = []
    for _ in range(4):
        _perturb(model, rng)
        snaps.append(_params_np(model))
        swa.update_parameters(model)
    assert int(swa.n_averaged) == 4
    for i, p in enumerate(swa.parameters()):
        np.testing.assert_allclose(
            p.detach().numpy(), np.mean([s[i] for s in snaps], axis=0), rtol=1e-5, atol=1e-6
        )
    # the copy's parameters are its own; the model's are untouched
    assert all(a is not b for a, b in zip(swa.parameters(), model.parameters(), strict=True))
    x = fg.randn(5, 3)
    swa.eval()
    np.testing.assert_array_equal(swa(x).detach().numpy(), swa.module(x).detach().numpy())


@pytest.mark.parametrize("style", ["multi", "single"])
def test_averaged_model_ema(style):
    rng = np.random.default_rng(1)
    model = _tiny_model()
    decay = 0.9
    if style == "multi":
        ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(decay))
    else:
        ema = swa_utils.AveragedModel(model, avg_fn=swa_utils.get_ema_avg_fn(decay))
    ref = None
    for _ in range(5):
        _perturb(model, rng)
        cur = _params_np(model)
        ref = cur if ref is None else [decay * r + (1 - decay) * c for r, c in zip(ref, cur, strict=True)]
        ema.update_parameters(model)
    for p, r in zip(ema.parameters(), ref, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-5, atol=1e-6)


def test_averaged_model_buffers():
    """Without use_buffers the copy's buffers follow the model; with it they are averaged too."""
    model = _tiny_model()
    follow = swa_utils.AveragedModel(model)
    avg = swa_utils.AveragedModel(model, use_buffers=True)
    model.train()
    means = []
    for k in range(3):
        model(fg.randn(8, 3) + float(k))
        means.append(model[1].running_mean.numpy().copy())
        follow.update_parameters(model)
        avg.update_parameters(model)
    np.testing.assert_array_equal(follow.module[1].running_mean.numpy(), means[-1])
    np.testing.assert_allclose(
        avg.module[1].running_mean.numpy(), np.mean(means, axis=0), rtol=1e-5, atol=1e-6
    )
    assert int(avg.module[1].num_batches_tracked) == 3  # integer buffers are copied
    with pytest.raises(ValueError, match="only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(
            model, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn()
        )


@pytest.mark.parametrize(("strategy", "anneal_epochs"), [("cos", 4), ("linear", 3), ("cos", 0)])
def test_swalr_schedule(strategy, anneal_epochs):
    p = fg.zeros(1, requires_grad=True)
    opt = optim.SGD([p], lr=0.5)
    sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=anneal_epochs, anneal_strategy=strategy)

    def f(t):
        return (1 - math.cos(math.pi * t)) / 2 if strategy == "cos" else t

    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(6):
        p.grad = fg.zeros(1)
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    want = []
    for k in range(7):
        step = max(1, k) if anneal_epochs == 0 else k
        a = f(min(1.0, step / max(1, anneal_epochs)))
        want.append(0.05 * a + 0.5 * (1 - a))
    np.testing.assert_allclose(lrs, want, rtol=1e-12)
    assert lrs[-1] == pytest.approx(0.05)
    with pytest.raises(ValueError, match="anneal_strategy must be 'cos' or 'linear'"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be a non-negative int"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)


def test_update_bn_recomputes_statistics():
    model = _tiny_model()
    model.eval()
    rng = np.random.default_rng(2)
    batches = [fg.tensor(rng.normal(size=(10, 3)).astype(np.float32) * 2 + 1) for _ in range(3)]
    loader = [(b, fg.zeros(10)) for b in batches]  # (input, target) pairs: the input is used
    swa_utils.update_bn(loader, model)
    assert not model.training and model[1].momentum == 0.1
    with fg.no_grad():
        hs = [model[0](b).numpy().astype(np.float64) for b in batches]
    np.testing.assert_allclose(
        model[1].running_mean.numpy(), np.mean([h.mean(0) for h in hs], axis=0), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        model[1].running_var.numpy(), np.mean([h.var(0, ddof=1) for h in hs], axis=0), rtol=1e-5, atol=1e-6
    )
    assert int(model[1].num_batches_tracked) == 3
