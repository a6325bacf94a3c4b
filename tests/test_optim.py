"""ferrograd.optim: SGD, Adam, AdamW and RMSprop against a NumPy reference of PyTorch's formulas.

Also: one Rust call per parameter group, state-dict round trips, refused
calls leaving every tensor unchanged, hyperparameter checks, and small
training runs that must converge.
"""

from __future__ import annotations

import copy
import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import _core, optim

# ---------------------------------------------------------------------------
# The NumPy reference (float64), following PyTorch's single-tensor updates
# ---------------------------------------------------------------------------


def ref_update(kind: str, hp: dict, p: np.ndarray, g: np.ndarray, st: dict) -> None:
    """One update of ``p`` (float64, in place) and its state ``st`` for optimizer ``kind``."""
    g = -g if hp.get("maximize", False) else g.copy()
    if kind == "sgd":
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * p
        if hp["momentum"]:
            if st.get("buf") is None:
                st["buf"] = g.copy()
            else:
                st["buf"] = hp["momentum"] * st["buf"] + (1 - hp["dampening"]) * g
            g = g + hp["momentum"] * st["buf"] if hp["nesterov"] else st["buf"]
        p -= hp["lr"] * g
    elif kind in ("adam", "adamw"):
        b1, b2 = hp["betas"]
        lr, wd = hp["lr"], hp["weight_decay"]
        if wd:
            if kind == "adamw":
                p *= 1 - lr * wd
            else:
                g = g + wd * p
        t = st["step"] = st.get("step", 0) + 1
        m = st["m"] = st.get("m", np.zeros_like(p)) * b1 + (1 - b1) * g
        v = st["v"] = st.get("v", np.zeros_like(p)) * b2 + (1 - b2) * g * g
        if hp["amsgrad"]:
            v = st["vmax"] = np.maximum(st.get("vmax", np.zeros_like(p)), v)
        denom = np.sqrt(v) / math.sqrt(1 - b2**t) + hp["eps"]
        p -= lr / (1 - b1**t) * m / denom
    elif kind == "rmsprop":
        a = hp["alpha"]
        if hp["weight_decay"]:
            g = g + hp["weight_decay"] * p
        s = st["s"] = st.get("s", np.zeros_like(p)) * a + (1 - a) * g * g
        if hp["centered"]:
            ga = st["ga"] = st.get("ga", np.zeros_like(p)) * a + (1 - a) * g
            d = np.sqrt(s - ga * ga) + hp["eps"]
        else:
            d = np.sqrt(s) + hp["eps"]
        if hp["momentum"] > 0:
            b = st["b"] = st.get("b", np.zeros_like(p)) * hp["momentum"] + g / d
            p -= hp["lr"] * b
        else:
            p -= hp["lr"] * g / d
    else:
        raise AssertionError(kind)


CLASSES = {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW, "rmsprop": optim.RMSprop}
DEFAULTS = {
    "sgd": dict(lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False),
    "adam": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False),
    "adamw": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False),
    "rmsprop": dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, maximize=False),
}
CONFIGS = [
    ("sgd", dict(lr=0.1)),
    ("sgd", dict(lr=0.1, momentum=0.9)),
    ("sgd", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    ("sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01, maximize=True)),
    ("adam", dict(lr=0.01)),
    ("adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, eps=1e-6)),
    ("adam", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("adam", dict(lr=0.01, betas=(0.3, 0.9), amsgrad=True, weight_decay=0.05)),
    ("adamw", dict(lr=0.01)),
    ("adamw", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("rmsprop", dict(lr=0.01)),
    ("rmsprop", dict(lr=0.01, momentum=0.9)),
    ("rmsprop", dict(lr=0.01, centered=True, weight_decay=0.1)),
    ("rmsprop", dict(lr=0.005, alpha=0.9, momentum=0.5, centered=True, maximize=True, eps=1e-4)),
]
TOL = {"float64": (1e-11, 1e-12), "float32": (2e-5, 2e-6)}


def _cfg_id(c):
    kind, kw = c
    return kind + "-" + ",".join(f"{k}={v}" for k, v in kw.items())


def _param(rng, kind_of_layout: str, dtype: str) -> tuple[fg.Tensor, fg.Tensor | None]:
    """A parameter tensor of the given layout, and its base when it is a view."""
    if kind_of_layout == "scalar":
        return fg.tensor(rng.normal(size=()).astype(dtype)), None
    if kind_of_layout == "vector":
        return fg.tensor(rng.normal(size=(7,)).astype(dtype)), None
    if kind_of_layout == "matrix":
        return fg.tensor(rng.normal(size=(3, 5)).astype(dtype)), None
    if kind_of_layout == "3d":
        return fg.tensor(rng.normal(size=(4, 1, 6)).astype(dtype)), None
    if kind_of_layout == "transposed":
        base = fg.tensor(rng.normal(size=(5, 4)).astype(dtype))
        return base.T, base
    if kind_of_layout == "strided":
        base = fg.tensor(rng.normal(size=(6, 9)).astype(dtype))
        return base[1::2, ::-3], base
    raise AssertionError(kind_of_layout)


LAYOUTS = ["scalar", "vector", "matrix", "3d", "transposed", "strided"]


def _grad(rng, p: fg.Tensor, dtype: str, strided: bool) -> fg.Tensor:
    shape = tuple(p.shape)
    if strided and len(shape) >= 1:
        big = fg.tensor(rng.normal(size=(*shape[:-1], 2 * shape[-1])).astype(dtype))
        return big[..., ::2]
    return fg.tensor(rng.normal(size=shape).astype(dtype))


def _np(t: fg.Tensor) -> np.ndarray:
    return np.array(t.numpy(), copy=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=_cfg_id)
def test_matches_reference(cfg, dtype):
    """Several steps over params of every layout in two groups (different lr), some without grads."""
    kind, kw = cfg
    rng = np.random.default_rng(7)
    made = [_param(rng, lay, dtype) for lay in LAYOUTS]
    params = [p for p, _ in made]
    bases = [(b, _np(b), p) for p, b in made if b is not None]
    frozen = fg.tensor(rng.normal(size=(3,)).astype(dtype))  # never gets a grad
    groups = [
        {"params": params[:3] + [frozen]},
        {"params": params[3:], "lr": kw["lr"] * 0.5},
    ]
    opt = CLASSES[kind](groups, **kw)
    hp0 = {**DEFAULTS[kind], **kw}
    hps = [hp0, {**hp0, "lr": kw["lr"] * 0.5}]
    ref = [_np(p).astype(np.float64) for p in params]
    ref_state = [{} for _ in params]
    frozen_before = _np(frozen)
    for step in range(5):
        for i, p in enumerate(params):
            # parameter 1 has no gradient on step 2: it is skipped (no state change).
            p.grad = None if (i == 1 and step == 2) else _grad(rng, p, dtype, strided=(i + step) % 2 == 0)
        gs = [None if p.grad is None else _np(p.grad).astype(np.float64) for p in params]
        opt.step()
        for i, g in enumerate(gs):
            if g is not None:
                ref_update(kind, hps[0 if i < 3 else 1], ref[i], g, ref_state[i])
    rtol, atol = TOL[dtype]
    for i, p in enumerate(params):
        np.testing.assert_allclose(_np(p), ref[i], rtol=rtol, atol=atol, err_msg=f"param {i} ({LAYOUTS[i]})")
    np.testing.assert_array_equal(_np(frozen), frozen_before)
    assert frozen not in opt.state
    # Elements of the strided parameter's base outside the view are untouched.
    base, before, _ = bases[1]
    outside = np.ones(before.shape, bool)
    outside[1::2, ::-3] = False
    np.testing.assert_array_equal(_np(base)[outside], before[outside])
    if kind in ("adam", "adamw", "rmsprop"):
        assert opt.state[params[1]]["step"] == 4
        assert opt.state[params[0]]["step"] == 5


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c[0] in ("adam", "sgd")][::2], ids=_cfg_id)
def test_large_params_threaded_and_all_simd_levels(cfg):
    """Totals above the threading grain; the scalar kernels give the same values as the best level."""
    kind, kw = cfg
    rng = np.random.default_rng(3)
    shapes = [(300, 257), (5000,), (129, 3, 64)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    grads = [[rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(3)]
    results = []
    best = fg.cpu_level()
    try:
        for level in ("scalar", best):
            fg.set_cpu_level(level)
            ps = [fg.tensor(a) for a in init]
            ps[0] = fg.tensor(np.ascontiguousarray(init[0].T)).T  # a transposed (non-contiguous) big param
            opt = CLASSES[kind](ps, **kw)
            for gs in grads:
                for p, g in zip(ps, gs, strict=True):
                    p.grad = fg.tensor(g)
                opt.step()
            results.append([_np(p) for p in ps])
    finally:
        fg.set_cpu_level(best)
    hp = {**DEFAULTS[kind], **kw}
    for i, a in enumerate(init):
        r, st = a.astype(np.float64), {}
        for gs in grads:
            ref_update(kind, hp, r, gs[i].astype(np.float64), st)
        np.testing.assert_allclose(results[0][i], r, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(results[1][i], results[0][i], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", ["sgd", "adam", "rmsprop"])
def test_half_precision_params(kind, dtype):
    """float16/bfloat16 compute in float32 and round on store; state keeps the parameter's dtype."""
    kw = {"sgd": dict(lr=0.1, momentum=0.9), "adam": dict(lr=0.05), "rmsprop": dict(lr=0.01, centered=True)}[kind]
    rng = np.random.default_rng(5)
    a = rng.normal(size=(4, 6)).astype(np.float32)
    p = fg.tensor(a).to(getattr(fg, dtype))
    opt = CLASSES[kind]([p], **kw)
    ref, st = _np(p.to(fg.float64)), {}
    for _ in range(3):
        g = fg.tensor(rng.normal(size=(4, 6)).astype(np.float32)).to(getattr(fg, dtype))
        p.grad = g
        opt.step()
        ref_update(kind, {**DEFAULTS[kind], **kw}, ref, _np(g.to(fg.float64)), st)
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(_np(p.to(fg.float64)), ref, rtol=tol, atol=tol)
    for v in opt.state[p].values():
        if isinstance(v, fg.Tensor):
            assert v.dtype == p.dtype


def test_hyperparameters_are_read_at_every_step():
    rng = np.random.default_rng(0)
    p = fg.tensor(rng.normal(size=(5,)))
    opt = optim.Adam([p], lr=0.1)
    ref, st = _np(p), {}
    for lr in (0.1, 0.01, 0.3):
        opt.param_groups[0]["lr"] = lr
        g = rng.normal(size=(5,))
        p.grad = fg.tensor(g)
        opt.step()
        ref_update("adam", {**DEFAULTS["adam"], "lr": lr}, ref, g, st)
    np.testing.assert_allclose(_np(p), ref, rtol=1e-12)


# ---------------------------------------------------------------------------
# Against PyTorch: references stored in tests/fixtures/parity/optim.npz by
# scripts/make_parity_references.py (which records the PyTorch version)
# ---------------------------------------------------------------------------

# The run the stored references record: parameters of these shapes drawn from
# default_rng(PARITY_SEED), then PARITY_STEPS steps, each with fresh gradients.
PARITY_SEED = 11
PARITY_SHAPES = [(), (6,), (3, 4)]
PARITY_STEPS = 6


def parity_config_json(cfg) -> str:
    import json

    kind, kw = cfg
    return json.dumps([kind, {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}], sort_keys=True)


@pytest.mark.parametrize("cfg", CONFIGS, ids=_cfg_id)
def test_matches_torch(cfg):
    """Every step's parameters against torch.optim's, from the same start and gradients."""
    from pathlib import Path

    ref = np.load(Path(__file__).parent / "fixtures" / "parity" / "optim.npz", allow_pickle=False)
    assert str(ref["torch_version"])
    i = CONFIGS.index(cfg)
    assert str(ref[f"{i}/config"]) == parity_config_json(cfg), "regenerate: scripts/make_parity_references.py"
    kind, kw = cfg
    ours = [fg.tensor(ref[f"{i}/init/{j}"]) for j in range(len(PARITY_SHAPES))]
    opt = CLASSES[kind](ours, **kw)
    for step in range(PARITY_STEPS):
        for j, o in enumerate(ours):
            o.grad = fg.tensor(ref[f"{i}/grad/{step}/{j}"])
        opt.step()
        for j, o in enumerate(ours):
            np.testing.assert_allclose(
                _np(o), ref[f"{i}/param/{step}/{j}"], rtol=1e-10, atol=1e-12, err_msg=f"step {step}, param {j}"
            )


# ---------------------------------------------------------------------------
# One Rust call per group
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw", "rmsprop"])
def test_one_rust_call_per_group(kind, monkeypatch):
    name = {"sgd": "_sgd_step", "adam": "_adam_step", "adamw": "_adam_step", "rmsprop": "_rmsprop_step"}[kind]
    calls = []
    real = getattr(_core, name)

    def counting(params, *args, **kwargs):
        calls.append(len(params))
        return real(params, *args, **kwargs)

    monkeypatch.setattr(_core, name, counting)
    groups = [
        {"params": [fg.randn(3), fg.randn(4, 2), fg.randn(())]},
        {"params": [fg.randn(5) for _ in range(7)], "lr": 1e-4},
        {"params": [fg.randn(2)]},  # no grads: no call
    ]
    opt = CLASSES[kind](groups)
    for g in groups[:2]:
        for p in g["params"]:
            p.grad = fg.ones_like(p)
    opt.step()
    opt.step()
    assert calls == [3, 7, 3, 7]


# ---------------------------------------------------------------------------
# State dicts
# ---------------------------------------------------------------------------

SD_CONFIGS = [
    ("sgd", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("adam", dict(lr=0.01, amsgrad=True)),
    ("adamw", dict(lr=0.01)),
    ("rmsprop", dict(lr=0.01, momentum=0.5, centered=True)),
]


def _make(kind, kw, arrays):
    ps = [fg.tensor(a) for a in arrays]
    opt = CLASSES[kind]([{"params": ps[:2]}, {"params": ps[2:], "lr": kw["lr"] / 3}], **kw)
    return ps, opt


def _steps(ps, opt, grads):
    for gs in grads:
        for p, g in zip(ps, gs, strict=True):
            p.grad = fg.tensor(g)
        opt.step()


@pytest.mark.parametrize("cfg", SD_CONFIGS, ids=_cfg_id)
def test_state_dict_round_trip_continues_identically(cfg):
    kind, kw = cfg
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=s) for s in [(3,), (2, 2), (4,)]]
    grads = [[rng.normal(size=a.shape) for a in arrays] for _ in range(6)]
    ps_a, opt_a = _make(kind, kw, arrays)
    _steps(ps_a, opt_a, grads)  # uninterrupted
    ps_b, opt_b = _make(kind, kw, arrays)
    _steps(ps_b, opt_b, grads[:3])
    sd = opt_b.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == kw["lr"] / 3
    if kind != "sgd":
        assert sd["state"][0]["step"] == 3
    ps_c = [fg.tensor(_np(p)) for p in ps_b]
    opt_c = CLASSES[kind]([{"params": ps_c[:2]}, {"params": ps_c[2:]}], **kw)
    opt_c.load_state_dict(sd)
    assert opt_c.param_groups[1]["lr"] == kw["lr"] / 3
    assert opt_c.param_groups[1]["params"][0] is ps_c[2]
    # Loaded tensors are copies: stepping the source does not change them.
    _steps(ps_b, opt_b, grads[3:])
    _steps(ps_c, opt_c, grads[3:])
    for a, b, c in zip(ps_a, ps_b, ps_c, strict=True):
        np.testing.assert_array_equal(_np(b), _np(a))
        np.testing.assert_array_equal(_np(c), _np(a))


def _snapshot(opt):
    groups = [{k: (list(map(id, v)) if k == "params" else copy.deepcopy(v)) for k, v in g.items()}
              for g in opt.param_groups]
    state = {id(p): {k: (_np(v) if isinstance(v, fg.Tensor) else v) for k, v in s.items()} for p, s in opt.state._d.values()}
    return groups, state


def _same(a, b):
    ga, sa = a
    gb, sb = b
    assert ga == gb
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].keys() == sb[k].keys()
        for n in sa[k]:
            if isinstance(sa[k][n], np.ndarray):
                np.testing.assert_array_equal(sa[k][n], sb[k][n])
            else:
                assert sa[k][n] == sb[k][n]


def _bad_state_dicts(sd):
    def edit(f):
        d = {
            "state": {k: dict(v) for k, v in sd["state"].items()},
            "param_groups": [{**g, "params": list(g["params"])} for g in sd["param_groups"]],
        }
        f(d)
        return d

    yield "groups", edit(lambda d: d["param_groups"].pop()), ValueError
    yield "group size", edit(lambda d: d["param_groups"][0]["params"].pop()), ValueError
    yield "shape", edit(lambda d: d["state"][1].__setitem__("exp_avg", fg.zeros(7))), ValueError
    yield "index", edit(lambda d: d["state"].__setitem__(9, {"step": 1})), ValueError
    yield "step", edit(lambda d: d["state"][0].__setitem__("step", -2)), ValueError
    yield "lr", edit(lambda d: d["param_groups"][1].__setitem__("lr", -1.0)), ValueError
    yield "layout", {"state": {}}, ValueError
    yield "dtype", edit(lambda d: d["state"][2].__setitem__("exp_avg_sq", fg.zeros(4, dtype=fg.int64))), TypeError


@pytest.mark.parametrize("case", range(8))
def test_bad_state_dicts_raise_and_leave_the_optimizer_unchanged(case):
    rng = np.random.default_rng(2)
    arrays = [rng.normal(size=s) for s in [(3,), (2, 2), (4,)]]
    ps, opt = _make("adam", dict(lr=0.01), arrays)
    _steps(ps, opt, [[rng.normal(size=a.shape) for a in arrays]])
    sd = opt.state_dict()
    sd = {"state": {k: {n: (v.clone() if isinstance(v, fg.Tensor) else v) for n, v in s.items()}
                    for k, s in sd["state"].items()}, "param_groups": sd["param_groups"]}
    name, bad, exc = list(_bad_state_dicts(sd))[case]
    ps2, opt2 = _make("adam", dict(lr=0.01), arrays)
    _steps(ps2, opt2, [[rng.normal(size=a.shape) for a in arrays]] * 2)
    before = _snapshot(opt2)
    with pytest.raises(exc):
        opt2.load_state_dict(bad)
    _same(_snapshot(opt2), before)


# ---------------------------------------------------------------------------
# Refused calls change nothing
# ---------------------------------------------------------------------------


def _adam_lists(n=3, dtype=fg.float32):
    ps = [fg.randn(2, 3, dtype=dtype) for _ in range(n)]
    gs = [fg.randn(2, 3, dtype=dtype) for _ in range(n)]
    ms = [fg.randn(2, 3, dtype=dtype) for _ in range(n)]
    vs = [fg.rand(2, 3, dtype=dtype) for _ in range(n)]
    return ps, gs, ms, vs


def _call_adam(ps, gs, ms, vs, steps=None, amsgrad=False, xs=()):
    _core._adam_step(ps, gs, ms, vs, list(xs), steps or [1] * len(ps), 1e-3, 0.9, 0.999, 1e-8, 0.0,
                     amsgrad, False, False)


def _bytes(ts):
    return [(_np(t).tobytes(), t._version) for t in ts]


def _refused(kind):
    ps, gs, ms, vs = _adam_lists()
    if kind == "shape":
        vs[2] = fg.rand(3, 2)
        return ps, gs, ms, vs, ValueError, r"adam_step: parameter 2: the exp_avg_sq has shape \[3, 2\].*shape \[2, 3\]"
    if kind == "dtype":
        gs[1] = gs[1].to(fg.float64)
        return ps, gs, ms, vs, TypeError, "adam_step: parameter 1: the grad has shape .* dtype float64.*float32"
    if kind == "int":
        ps[2] = fg.zeros(2, 3, dtype=fg.int64)
        return ps, gs, ms, vs, TypeError, "parameter 2 has dtype int64"
    if kind == "length":
        ms.pop()
        return ps, gs, ms, vs, ValueError, "3 parameters but 2 exp_avg"
    if kind == "non-leaf":
        x = fg.randn(2, 3).requires_grad_()
        ps[1] = x * 2
        return ps, gs, ms, vs, ValueError, "parameter 1 .*not a leaf"
    if kind == "read-only":
        a = np.zeros((2, 3), np.float32)
        a.flags.writeable = False
        ms[2] = fg.from_numpy(a)
        return ps, gs, ms, vs, ValueError, "parameter 2: the exp_avg .*read-only"
    if kind == "shared":
        base = fg.randn(4, 3)
        ps[0], ps[2] = base[:2], base[1:3]
        return ps, gs, ms, vs, ValueError, "share memory"
    if kind == "state-is-grad":
        ms[1] = gs[0]
        return ps, gs, ms, vs, ValueError, "share memory"
    if kind == "expanded":
        ps[1] = fg.randn(1, 3).expand(2, 3)
        return ps, gs, ms, vs, ValueError, "parameter 1: the parameter has overlapping memory"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["shape", "dtype", "int", "length", "non-leaf", "read-only", "shared", "state-is-grad", "expanded"]
)
def test_refused_call_changes_nothing(kind):
    ps, gs, ms, vs, exc, msg = _refused(kind)
    everything = ps + gs + ms + vs
    before = _bytes(everything)
    with pytest.raises(exc, match=msg):
        _call_adam(ps, gs, ms, vs)
    assert _bytes(everything) == before


def test_successful_call_bumps_versions_of_written_tensors_only():
    ps, gs, ms, vs = _adam_lists()
    ver = [t._version for t in ps + gs + ms + vs]
    _call_adam(ps, gs, ms, vs)
    now = [t._version for t in ps + gs + ms + vs]
    assert [b > a for a, b in zip(ver, now, strict=True)] == [True] * 3 + [False] * 3 + [True] * 6


def test_sharing_read_only_inputs_is_allowed():
    """Gradients may share memory with one another (they are only read): the step writes
    what it writes with a separate copy of the gradient per parameter, and leaves the
    shared gradient as it was."""
    ps, _, ms, vs = _adam_lists()
    g = fg.randn(2, 3)
    g_before = _np(g).copy()
    ps_before = [_np(p).copy() for p in ps]
    rps, rms, rvs = ([t.clone() for t in ts] for ts in (ps, ms, vs))
    _call_adam(ps, [g, g, g], ms, vs)
    _call_adam(rps, [g.clone() for _ in range(3)], rms, rvs)
    np.testing.assert_array_equal(_np(g), g_before)
    for got, want in zip(ps + ms + vs, rps + rms + rvs, strict=True):
        np.testing.assert_array_equal(_np(got), _np(want))
    # the step did move every parameter
    assert all(not np.array_equal(_np(p), b) for p, b in zip(ps, ps_before, strict=True))


def test_disjoint_views_of_one_buffer_are_allowed():
    flat = fg.zeros(12)
    ps = [flat[:6].view(2, 3), flat[6:].view(2, 3)]
    _, gs, ms, vs = _adam_lists(2)
    _call_adam(ps, gs, ms, vs)
    assert (np.abs(_np(flat)) > 0).all()


def test_other_argument_errors():
    ps, gs, ms, vs = _adam_lists()
    with pytest.raises(ValueError, match="at least 1"):
        _call_adam(ps, gs, ms, vs, steps=[1, 0, 1])
    with pytest.raises(ValueError, match="amsgrad is off"):
        _call_adam(ps, gs, ms, vs, xs=vs)
    with pytest.raises(TypeError, match=r"adam_step: grads\[1\] must be a Tensor"):
        _call_adam(ps, [gs[0], [1.0], gs[2]], ms, vs)
    with pytest.raises(ValueError, match="Nesterov"):
        _core._sgd_step(ps, gs, [None] * 3, 0.1, 0.0, 0.0, True, 0.0, False)
    with pytest.raises(ValueError, match="momentum is 0"):
        _core._rmsprop_step(ps, gs, ms, vs, [], 0.1, 0.9, 1e-8, 0.0, 0.0, False, False)


def test_step_with_a_bad_grad_leaves_params_and_state_unchanged():
    p, q = fg.randn(3), fg.randn(4)
    opt = optim.Adam([p, q], lr=0.1)
    p.grad, q.grad = fg.randn(3), fg.randn(4, dtype=fg.float64)
    before = _bytes([p, q])
    with pytest.raises(TypeError, match="parameter 1"):
        opt.step()
    assert _bytes([p, q]) == before
    assert len(opt.state) == 0
    q.grad = fg.randn(4)
    opt.step()
    assert opt.state[p]["step"] == 1 and opt.state[q]["step"] == 1


# ---------------------------------------------------------------------------
# Construction, groups, zero_grad, closures
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make,msg",
    [
        (lambda p: optim.SGD(p, lr=-0.1), "Invalid learning rate"),
        (lambda p: optim.SGD(p, momentum=-1), "Invalid momentum"),
        (lambda p: optim.SGD(p, nesterov=True), "Nesterov momentum requires"),
        (lambda p: optim.SGD(p, weight_decay=-1), "Invalid weight_decay"),
        (lambda p: optim.Adam(p, lr=-1), "Invalid learning rate"),
        (lambda p: optim.Adam(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
        (lambda p: optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
        (lambda p: optim.AdamW(p, eps=-1e-8), "Invalid epsilon"),
        (lambda p: optim.RMSprop(p, alpha=-0.5), "Invalid alpha"),
        (lambda p: optim.RMSprop(p, momentum=-0.5), "Invalid momentum"),
        (lambda p: optim.Adam([{"params": p, "lr": -1.0}]), "Invalid learning rate"),
        (lambda p: optim.SGD([]), "empty parameter list"),
        (lambda p: optim.SGD([{"params": p}, {"params": p}]), "more than one parameter group"),
        (lambda p: optim.SGD(p + p), "more than once"),
        (lambda p: optim.SGD([(fg.randn(2).requires_grad_() * 2)]), "non-leaf"),
    ],
)
def test_invalid_hyperparameters(make, msg):
    with pytest.raises(ValueError, match=msg):
        make([fg.randn(2)])


def test_invalid_param_types():
    with pytest.raises(TypeError, match="single Tensor"):
        optim.SGD(fg.randn(2))
    with pytest.raises(TypeError, match="floating-point"):
        optim.SGD([fg.zeros(2, dtype=fg.int64)])
    with pytest.raises(TypeError, match="ordered"):
        optim.SGD([{"params": {fg.randn(2)}}])


def test_defaults_and_add_param_group():
    a, b = fg.randn(2), fg.randn(3)
    opt = optim.Adam([a], lr=0.5, amsgrad=True)
    opt.add_param_group({"params": b, "betas": (0.5, 0.6)})
    g = opt.param_groups[1]
    assert g["params"] == [b] or g["params"][0] is b
    assert g["lr"] == 0.5 and g["betas"] == (0.5, 0.6) and g["amsgrad"] is True
    assert optim.AdamW([a]).defaults["weight_decay"] == 1e-2
    assert optim.SGD([a]).defaults["lr"] == 1e-3
    assert optim.RMSprop([a]).defaults["lr"] == 1e-2
    assert "Parameter Group 1" in repr(opt)


def test_zero_grad():
    p = fg.randn(3).requires_grad_()
    (p * 2).sum().backward()
    opt = optim.SGD([p], lr=0.1)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad._shares_storage(g)
    np.testing.assert_array_equal(_np(p.grad), np.zeros(3, np.float32))
    opt.zero_grad()
    assert p.grad is None


def test_step_closure_runs_with_grad_enabled():
    p = fg.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with fg.no_grad():
        loss = opt.step(closure)
    assert float(loss.item()) == pytest.approx(5.0)
    np.testing.assert_allclose(_np(p), [0.8, -1.6], rtol=1e-6)


def test_params_requiring_grad_are_updated_without_history():
    p = fg.randn(3).requires_grad_()
    (p * 3).sum().backward()
    opt = optim.Adam([p], lr=0.1)
    opt.step()
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


def test_lr_scheduler_module_is_importable():
    assert optim.lr_scheduler.__name__ == "ferrograd.optim.lr_scheduler"


# ---------------------------------------------------------------------------
# Training smoke tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make,steps",
    [
        (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9), 300),
        (lambda ps: optim.Adam(ps, lr=0.05), 400),
        (lambda ps: optim.AdamW(ps, lr=0.05, weight_decay=1e-4), 400),
        (lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5), 400),
    ],
)
def test_linear_regression_converges(make, steps):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(128, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], np.float32)
    y = x @ w_true + 0.7
    xt, yt = fg.tensor(x), fg.tensor(y)
    w = fg.zeros(3, 1, requires_grad=True)
    b = fg.zeros(1, requires_grad=True)
    opt = make([w, b])
    for _ in range(steps):
        opt.zero_grad()
        loss = ((xt @ w + b - yt) ** 2).mean()
        loss.backward()
        opt.step()
    assert float(loss.item()) < 1e-3
    np.testing.assert_allclose(_np(w), w_true, atol=0.03)
    np.testing.assert_allclose(_np(b), [0.7], atol=0.03)
