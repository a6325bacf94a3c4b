"""Multi-tensor optimizer updates on the GPU.

One dispatch updates a chunk of parameters: as many as the adapter's storage
buffers per shader stage hold (parameter, gradient and state per tensor,
buffers shared between tensors bound once, one binding for the metadata).
These tests run the optimizer ops on parameter lists of mixed sizes (one
element, odd sizes, over 2^20 elements, empty), views (transposed, strided
slices with offsets, several parameters in one buffer), mixed float dtypes
and many parameters, and compare every written tensor — including the gaps
between views, which must stay untouched — with the CPU's update.

Accuracy: the kernels run the CPU's float32 operations in the CPU's order.
SGD uses only additions and multiplications, which WGSL rounds correctly,
so it must match bit for bit (unless a driver contracts ``a * b + c`` into
a fused multiply-add, which WGSL permits; a one-rounding difference per
step is then allowed). Adam and RMSprop also divide and take square roots,
which WGSL allows 2.5 ULP of error each (a sqrt inherits its accuracy from
``1 / inverseSqrt``); the update term they feed is then allowed a relative
error of about 16 ULP (2^-19), which over three steps bounds the parameter's
error by ``3 * 2^-19 * |lr-scaled step|`` plus the parameter's own rounding.
On Mesa's software driver (llvmpipe) the results are bit-exact and are
checked so; the narrow types (float16, bfloat16) round once on store and
must match exactly everywhere.

The multi-tensor kernels run the same statements as the per-parameter
kernels (``FG_GPU_OPTIM_PER_TENSOR=1``), so the two paths agree bit for
bit; chunking by the storage-buffer limit (``FG_GPU_MAX_STORAGE_BUFFERS``)
and the fallback for tensors over one storage binding
(``FG_GPU_MAX_BINDING_BYTES``) are checked in subprocesses.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import _core

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

HERE = os.path.dirname(os.path.abspath(__file__))

# (kind, size): "dense" a contiguous tensor of that shape; "t" the transpose
# of a contiguous (b, a) tensor; "slice" every third element of a longer
# 1-D tensor from offset 2; "pair" two parameters in one buffer, one element
# apart.
MIXED = [
    ("dense", (1,)),
    ("dense", (7,)),
    ("t", (5, 9)),
    ("dense", (3, 5, 2)),
    ("slice", 257),
    ("pair", (33, 64)),
    ("dense", (0,)),
    ("dense", ()),
    ("dense", (1031,)),
]
BIG = [("dense", ((1 << 20) + 3,)), ("dense", (2, 3))]

# The state lists each optimizer configuration reads and writes, and how
# their initial values are drawn (squares must be non-negative; a centered
# RMSprop's square average must stay above its squared gradient average).
STATE = {
    "exp_avg": "normal",
    "exp_avg_sq": "square",
    "max_exp_avg_sq": "square",
    "square_avg": "square",
    "grad_avg": "small",
    "momentum_buffer": "normal",
}

SGD_CONFIGS = {
    "sgd": dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0, maximize=False),
    "sgd-wd-maximize": dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.1, maximize=True),
    "sgd-momentum-dampening": dict(
        momentum=0.9, dampening=0.3, nesterov=False, weight_decay=0.0, maximize=False
    ),
    "sgd-nesterov-wd": dict(momentum=0.8, dampening=0.0, nesterov=True, weight_decay=0.05, maximize=False),
    "sgd-nesterov-maximize": dict(
        momentum=0.5, dampening=0.0, nesterov=True, weight_decay=0.0, maximize=True
    ),
}
ADAM_CONFIGS = {
    "adam": dict(weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False, beta1=0.9),
    "adam-wd-amsgrad": dict(weight_decay=0.1, amsgrad=True, maximize=False, decoupled=False, beta1=0.9),
    "adamw": dict(weight_decay=0.1, amsgrad=False, maximize=False, decoupled=True, beta1=0.9),
    "adamw-amsgrad-maximize": dict(weight_decay=0.01, amsgrad=True, maximize=True, decoupled=True, beta1=0.9),
    "adam-low-beta1": dict(weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False, beta1=0.3),
}
RMSPROP_CONFIGS = {
    "rmsprop": dict(weight_decay=0.0, momentum=0.0, centered=False, maximize=False, alpha=0.99),
    "rmsprop-momentum-wd": dict(weight_decay=0.05, momentum=0.9, centered=False, maximize=False, alpha=0.9),
    "rmsprop-centered": dict(weight_decay=0.0, momentum=0.0, centered=True, maximize=False, alpha=0.9),
    "rmsprop-centered-momentum-maximize": dict(
        weight_decay=0.01, momentum=0.5, centered=True, maximize=True, alpha=0.3
    ),
}
ALL_CONFIGS = {**SGD_CONFIGS, **ADAM_CONFIGS, **RMSPROP_CONFIGS}


def _kind(name: str) -> str:
    return name.split("-")[0].replace("adamw", "adam")


def _state_names(name: str) -> list[str]:
    c = ALL_CONFIGS[name]
    k = _kind(name)
    if k == "sgd":
        return ["momentum_buffer"] if c["momentum"] != 0 else []
    if k == "adam":
        return ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if c["amsgrad"] else [])
    return (
        ["square_avg"]
        + (["momentum_buffer"] if c["momentum"] > 0 else [])
        + (["grad_avg"] if c["centered"] else [])
    )


class Operands:
    """One role's tensors (parameters, gradients or a state list) made from
    the same NumPy values on a device: ``views`` are what the op updates,
    ``bases`` the tensors they are views of (compared whole afterwards)."""

    def __init__(self, specs, device, dtypes, rng, draw):
        self.views, self.bases = [], []
        for (kind, size), dtype in zip(specs, dtypes, strict=True):
            if kind == "pair":
                n1, n2 = size
                base = self._base(draw(rng, (n1 + n2 + 3,)), dtype, device)
                self.views += [base[1 : 1 + n1], base[2 + n1 : 2 + n1 + n2]]
            elif kind == "t":
                a, b = size
                base = self._base(draw(rng, (b, a)), dtype, device)
                self.views.append(base.t())
            elif kind == "slice":
                base = self._base(draw(rng, (3 * size + 4,)), dtype, device)
                self.views.append(base[2 : 2 + 3 * size : 3])
            else:
                base = self._base(draw(rng, size), dtype, device)
                self.views.append(base)
            self.bases.append(base)

    @staticmethod
    def _base(values, dtype, device):
        return fg.from_numpy(np.array(values, dtype=np.float32)).to(dtype).to(device)

    def values(self):
        return [b.float().cpu().numpy() for b in self.bases]


def _draw(how):
    def f(rng, shape):
        v = rng.standard_normal(shape).astype(np.float32)
        if how == "square":
            return v * v * 0.01 + 0.0025
        if how == "small":
            return v * 0.05
        if how == "grad":
            return v * (10.0 ** rng.integers(-4, 1, shape))
        return v

    return f


def _per_param_dtypes(specs, dtypes):
    """The dtype of each parameter (a pair is two parameters of one dtype)."""
    out = []
    for (kind, _), d in zip(specs, dtypes, strict=True):
        out += [d, d] if kind == "pair" else [d]
    return out


def run_case(name, device, specs, dtypes=None, steps=3, seed=0, fresh_buffers=False):
    """Run configuration ``name`` for ``steps`` steps on ``device``; the
    final values of every base tensor, by role."""
    dtypes = dtypes or ["float32"] * len(specs)
    rng = np.random.default_rng(seed)
    params = Operands(specs, device, dtypes, rng, _draw("normal"))
    names = _state_names(name)
    states = {s: Operands(specs, device, dtypes, rng, _draw(STATE[s])) for s in names}
    grad_rng = np.random.default_rng(seed + 1)
    c = dict(ALL_CONFIGS[name])
    kind = _kind(name)
    n = len(params.views)
    bufs = None
    for step in range(steps):
        grads = Operands(specs, device, dtypes, grad_rng, _draw("grad"))
        if kind == "sgd":
            if bufs is None:
                bufs = list(states["momentum_buffer"].views) if names else [None] * n
                if fresh_buffers:
                    # Every other parameter starts its buffer from its gradient.
                    bufs = [None if i % 2 else b for i, b in enumerate(bufs)]
            bufs = _core._sgd_step(
                params.views,
                grads.views,
                bufs,
                0.1,
                c["momentum"],
                c["dampening"],
                c["nesterov"],
                c["weight_decay"],
                c["maximize"],
            )
        elif kind == "adam":
            # Step counts differ between parameters: per-parameter bias corrections.
            counts = [1 + step + (i % 3) for i in range(n)]
            _core._adam_step(
                params.views,
                grads.views,
                states["exp_avg"].views,
                states["exp_avg_sq"].views,
                states["max_exp_avg_sq"].views if c["amsgrad"] else [],
                counts,
                0.01,
                c["beta1"],
                0.999,
                1e-8,
                c["weight_decay"],
                c["amsgrad"],
                c["maximize"],
                c["decoupled"],
            )
        else:
            _core._rmsprop_step(
                params.views,
                grads.views,
                states["square_avg"].views,
                states["momentum_buffer"].views if c["momentum"] > 0 else [],
                states["grad_avg"].views if c["centered"] else [],
                0.01,
                c["alpha"],
                1e-8,
                c["weight_decay"],
                c["momentum"],
                c["centered"],
                c["maximize"],
            )
    out = {"param": params.values()}
    for s in names:
        out[s] = states[s].values()
    if kind == "sgd" and names and fresh_buffers:
        out["momentum_buffer_views"] = [b.float().cpu().numpy() for b in bufs]
    return out


# Mesa's software driver (the one CI runs) computes every update bit for bit as the CPU does.
EXACT = "llvmpipe" in fg.gpu.info()["name"] if fg.gpu.is_available() else False


def _tolerance(name, dtype):
    """(rtol, atol) of the GPU's result against the CPU's (see the module docs)."""
    if EXACT or dtype in ("float16", "bfloat16"):
        return 0.0, 0.0
    if _kind(name) == "sgd":
        return 2.0**-22, 1e-9
    return 2.0**-18, 1e-8


def assert_matches(got, want, name, dtypes):
    for role in want:
        assert len(got[role]) == len(want[role])
        for i, (g, w) in enumerate(zip(got[role], want[role], strict=True)):
            rtol, atol = _tolerance(name, dtypes[i] if i < len(dtypes) else "float32")
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name}: {role} {i}")


@pytest.mark.parametrize("name", list(ALL_CONFIGS))
def test_mixed_parameter_lists_match_the_cpu(name):
    want = run_case(name, "cpu", MIXED)
    got = run_case(name, "gpu", MIXED)
    assert_matches(got, want, name, ["float32"] * len(MIXED))


@pytest.mark.parametrize("name", ["sgd-momentum-dampening", "sgd-nesterov-wd"])
def test_fresh_momentum_buffers_mixed_with_existing_ones(name):
    """One call where some buffers start from the gradient (a per-parameter flag in the metadata)."""
    want = run_case(name, "cpu", MIXED, fresh_buffers=True)
    got = run_case(name, "gpu", MIXED, fresh_buffers=True)
    assert_matches(got, want, name, ["float32"] * len(MIXED))


@pytest.mark.parametrize("name", ["sgd-nesterov-wd", "adam-wd-amsgrad", "rmsprop-centered-momentum-maximize"])
def test_large_parameters_match_the_cpu(name):
    want = run_case(name, "cpu", BIG, steps=2)
    got = run_case(name, "gpu", BIG, steps=2)
    assert_matches(got, want, name, ["float32"] * len(BIG))


@pytest.mark.parametrize(
    "name", ["sgd-nesterov-wd", "adamw-amsgrad-maximize", "rmsprop-centered-momentum-maximize"]
)
def test_mixed_dtypes_in_one_call_are_bit_exact(name):
    """float32, float16 (native storage where the adapter has shader-f16) and
    bfloat16 parameters in one list: each narrow value is rounded once on
    store, exactly as the CPU rounds it."""
    dtypes = [
        "float16",
        "float32",
        "bfloat16",
        "float16",
        "bfloat16",
        "float16",
        "float32",
        "bfloat16",
        "float16",
    ]
    want = run_case(name, "cpu", MIXED, dtypes=dtypes)
    got = run_case(name, "gpu", MIXED, dtypes=dtypes)
    assert_matches(got, want, name, dtypes)


def _many(n):
    sizes = [1, 3, 17, 64, 255, 256, 257, 1000]
    return [("dense", (sizes[i % len(sizes)] + i,)) for i in range(n)]


def _per_chunk(name, limits):
    """Parameters per multi-tensor dispatch: distinct buffers per parameter
    within the storage buffers a shader stage may bind, less the metadata's."""
    per = 2 + len(_state_names(name))
    return min(32, (limits["max_storage_buffers_per_shader_stage"] - 1) // per)


def _group_max():
    """Parameters over this many elements get a dispatch of their own (see ``backend/wgpu/optim.rs``)."""
    forced = os.environ.get("FG_GPU_OPTIM_GROUP_MAX")
    if forced:
        return int(forced)
    return 1024 if fg.gpu.info()["device_type"] == "Cpu" else math.inf


def _expected_dispatches(numels, k):
    """Dispatches of one step over parameters of ``numels`` elements in distinct buffers."""
    gm = _group_max()
    small = sum(1 for n in numels if 0 < n <= gm)
    return math.ceil(small / k) + sum(1 for n in numels if n > gm)


def _dispatches(fn):
    fg.gpu.synchronize()
    before = fg.gpu.stats()["dispatches"]
    fn()
    fg.gpu.synchronize()
    return fg.gpu.stats()["dispatches"] - before


@pytest.mark.parametrize(
    "name", ["sgd", "sgd-momentum-dampening", "adam", "adam-wd-amsgrad", "rmsprop-centered-momentum-maximize"]
)
def test_many_parameters_take_one_dispatch_per_chunk(name):
    """37 parameters: ceil(37 / K) dispatches, K from the adapter's binding
    limit (plus one for each parameter a software adapter updates alone);
    results as on the CPU."""
    specs = _many(37)
    k = _per_chunk(name, fg.gpu.info()["limits"])
    assert k >= 1
    c = ALL_CONFIGS[name]
    names = _state_names(name)
    results = {}
    for device in ("cpu", "gpu"):
        rng = np.random.default_rng(5)
        params = Operands(specs, device, ["float32"] * 37, rng, _draw("normal"))
        grads = Operands(specs, device, ["float32"] * 37, rng, _draw("grad"))
        states = {s: Operands(specs, device, ["float32"] * 37, rng, _draw(STATE[s])) for s in names}
        kind = _kind(name)

        def step(lr, t, params=params, grads=grads, states=states, kind=kind):
            if kind == "sgd":
                bufs = states["momentum_buffer"].views if names else [None] * 37
                _core._sgd_step(
                    params.views,
                    grads.views,
                    bufs,
                    lr,
                    c["momentum"],
                    c["dampening"],
                    c["nesterov"],
                    c["weight_decay"],
                    c["maximize"],
                )
            elif kind == "adam":
                _core._adam_step(
                    params.views,
                    grads.views,
                    states["exp_avg"].views,
                    states["exp_avg_sq"].views,
                    states["max_exp_avg_sq"].views if c["amsgrad"] else [],
                    [t] * 37,
                    lr,
                    c["beta1"],
                    0.999,
                    1e-8,
                    c["weight_decay"],
                    c["amsgrad"],
                    c["maximize"],
                    c["decoupled"],
                )
            else:
                _core._rmsprop_step(
                    params.views,
                    grads.views,
                    states["square_avg"].views,
                    states["momentum_buffer"].views if c["momentum"] > 0 else [],
                    states["grad_avg"].views if c["centered"] else [],
                    lr,
                    c["alpha"],
                    1e-8,
                    c["weight_decay"],
                    c["momentum"],
                    c["centered"],
                    c["maximize"],
                )

        if device == "gpu":
            n = _dispatches(lambda step=step: step(0.01, 3))
            numels = [size[0] for _, size in specs]
            assert n == _expected_dispatches(numels, k), (n, k)
            if _group_max() >= 1000:
                assert n <= math.ceil(37 / k) + 4
            # Another learning rate and step count: new metadata, no new kernel.
            fg.gpu.synchronize()
            pipes = fg.gpu.stats()["pipelines"]
            step(0.03, 4)
            assert fg.gpu.stats()["pipelines"] == pipes
        else:
            step(0.01, 3)
            step(0.03, 4)
        results[device] = {"param": params.values(), **{s: states[s].values() for s in names}}
    assert_matches(results["gpu"], results["cpu"], name, ["float32"] * 37)


def test_adam_over_a_mlp_queues_ceil_n_over_k_dispatches():
    """The issue's measure: an Adam step over a 10-parameter model (five
    linear layers) queues ceil(10 / K) dispatches, not 10; the trained
    parameters equal the CPU's."""
    k = _per_chunk("adam", fg.gpu.info()["limits"])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    final = {}
    for device in ("cpu", "gpu"):
        fg.manual_seed(1)
        layers = []
        for i in range(5):
            layers += [fg.nn.Linear(12, 12), fg.nn.Tanh()] if i < 4 else [fg.nn.Linear(12, 3)]
        m = fg.nn.Sequential(*layers).to(device)
        opt = fg.optim.Adam(m.parameters(), lr=0.01)
        xt = fg.tensor(x, device=device)
        for i in range(3):
            opt.zero_grad()
            (m(xt) ** 2).mean().backward()
            if device == "gpu" and i > 0:  # (the first step makes the state)
                assert _dispatches(opt.step) == math.ceil(10 / k)
            else:
                opt.step()
        final[device] = [p.detach().cpu().numpy() for p in m.parameters()]
    # The gradients come from the GPU's own matmuls (another summation order),
    # and Adam's normalised steps carry their small differences: the
    # tolerance of the other GPU training tests.
    for a, b in zip(final["gpu"], final["cpu"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_compiled_training_step_with_many_parameters_replays_and_matches_eager():
    """A compiled GPU step whose AdamW update runs live on each replay
    (its step counts and a scheduled learning rate change every run) over
    12 parameters: bit-identical to eager, and it replays."""
    rng = np.random.default_rng(2)
    xs = [fg.tensor(rng.standard_normal((8, 10)).astype(np.float32), device="gpu") for _ in range(3)]
    ys = [fg.tensor(rng.integers(0, 4, 8), device="gpu") for _ in range(3)]
    runs = []
    for compiled in (False, True):
        fg.manual_seed(0)
        layers = []
        for _ in range(5):
            layers += [fg.nn.Linear(10, 10), fg.nn.Tanh()]
        m = fg.nn.Sequential(*layers, fg.nn.Linear(10, 4)).to("gpu")
        o = fg.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.01, amsgrad=True)
        sched = fg.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)

        def step(x, y, m=m, o=o):
            o.zero_grad()
            loss = fg.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            o.step()
            return loss

        f = fg.compile(step) if compiled else step
        losses = []
        for i in range(8):
            losses.append(float(f(xs[i % 3], ys[i % 3]).item()))
            sched.step()
        runs.append((losses, [p.numpy() for p in m.parameters()]))
        if compiled:
            info = f.graph(xs[0], ys[0]).gpu_replay(xs[0], ys[0])
            assert info is not None and info["reason"] is None, info
            assert info["replays"] >= 4, info
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_compiled_sgd_with_fresh_buffers_matches_eager():
    """A captured SGD step creates its momentum buffers before the first run
    and marks them fresh through per-run flags (metadata words of the
    multi-tensor kernel): compiled training equals eager bit for bit."""
    rng = np.random.default_rng(3)
    x = fg.tensor(rng.standard_normal((6, 9)).astype(np.float32), device="gpu")
    runs = []
    for compiled in (False, True):
        fg.manual_seed(0)
        m = fg.nn.Sequential(
            fg.nn.Linear(9, 9), fg.nn.Tanh(), fg.nn.Linear(9, 9), fg.nn.Tanh(), fg.nn.Linear(9, 2)
        ).to("gpu")
        o = fg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)

        def step(a, m=m, o=o):
            o.zero_grad()
            loss = (m(a) ** 2).mean()
            loss.backward()
            o.step()
            return loss

        f = fg.compile(step) if compiled else step
        losses = [float(f(x).item()) for _ in range(5)]
        runs.append((losses, [p.numpy() for p in m.parameters()]))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_calls_raise_naming_the_op_and_write_nothing():
    p = [fg.ones(5, device="gpu"), fg.ones(3, device="gpu")]
    g = [fg.ones(5, device="gpu"), fg.ones(3)]  # one gradient left on the CPU
    m = [fg.zeros(5, device="gpu"), fg.zeros(3, device="gpu")]
    v = [fg.zeros(5, device="gpu"), fg.zeros(3, device="gpu")]
    with pytest.raises(ValueError, match=r"adam_step.*parameter 1.*grad is on cpu.*gpu"):
        _core._adam_step(p, g, m, v, [], [1, 1], 0.1, 0.9, 0.999, 1e-8, 0.0, False, False, False)
    bad_shape = [fg.zeros(5, device="gpu"), fg.zeros(4, device="gpu")]
    with pytest.raises(ValueError, match=r"adam_step.*parameter 1.*shape \[4\].*shape \[3\]"):
        _core._adam_step(
            p,
            [fg.ones(5, device="gpu"), fg.ones(3, device="gpu")],
            m,
            bad_shape,
            [],
            [1, 1],
            0.1,
            0.9,
            0.999,
            1e-8,
            0.0,
            False,
            False,
            False,
        )
    ints = [fg.ones(3, dtype=fg.int32, device="gpu")]
    with pytest.raises(TypeError, match=r"sgd_step.*parameter 0 has dtype int32"):
        _core._sgd_step(ints, ints, [None], 0.1, 0.0, 0.0, False, 0.0, False)
    for t in p + m + v:
        assert t.cpu().numpy().tolist() in ([1.0] * 5, [1.0] * 3, [0.0] * 5, [0.0] * 3)


# --------------------------------------------------------------- subprocesses

SUB = """
import json, sys
sys.path.insert(0, {here!r})
import ferrograd as fg
import test_gpu_optim as t
out = {{}}
for name, specs in {cases!r}:
    got = t.run_case(name, "gpu", [tuple(s) for s in specs])
    want = t.run_case(name, "cpu", [tuple(s) for s in specs])
    t.assert_matches(got, want, name, ["float32"] * len(specs))
    out[name] = t._bits(got)
print(json.dumps({{"limits": fg.gpu.info()["limits"], "bits": out}}))
"""


def _run_sub(env_extra, cases):
    env = dict(os.environ, **env_extra)
    src = SUB.format(
        here=HERE, cases=[(n, [list(s) if isinstance(s, tuple) else s for s in specs]) for n, specs in cases]
    )
    r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _bits(got):
    return {r: [a.tobytes().hex() for a in v] for r, v in got.items()}


SUB_CASES = [
    (n, MIXED + BIG[:1])
    for n in ("sgd-nesterov-wd", "adamw-amsgrad-maximize", "rmsprop-centered-momentum-maximize")
]


@pytest.mark.parametrize(
    "env",
    [
        {"FG_GPU_OPTIM_PER_TENSOR": "1"},
        {"FG_GPU_OPTIM_GROUP_MAX": "4000000000"},
        {"FG_GPU_OPTIM_GROUP_MAX": "0"},
    ],
    ids=["per-tensor", "all-grouped", "none-grouped"],
)
def test_other_groupings_give_the_same_bits(env):
    """The per-parameter kernels (FG_GPU_OPTIM_PER_TENSOR=1) and the
    multi-tensor kernels with every parameter grouped (large ones too) or
    none run the same statements: identical results on this adapter."""
    sub = _run_sub(env, SUB_CASES)
    for name, specs in SUB_CASES:
        assert _bits(run_case(name, "gpu", specs)) == sub["bits"][name], name


def test_chunks_follow_the_storage_buffer_limit():
    """With WebGPU's default of 8 storage buffers per stage, chunks hold
    fewer parameters (Adam with amsgrad one, SGD with momentum two) and the
    results do not change."""
    sub = _run_sub({"FG_GPU_MAX_STORAGE_BUFFERS": "8"}, SUB_CASES)
    assert sub["limits"]["max_storage_buffers_per_shader_stage"] == 8
    for name, specs in SUB_CASES:
        assert _bits(run_case(name, "gpu", specs)) == sub["bits"][name], name
    script = f"""
import sys, math
sys.path.insert(0, {HERE!r})
import ferrograd as fg
import test_gpu_optim as t
from ferrograd import _core
assert fg.gpu.info()["limits"]["max_storage_buffers_per_shader_stage"] == 10
ps = [fg.ones(i + 1, device="gpu") for i in range(9)]
gs = [fg.ones(i + 1, device="gpu") for i in range(9)]
bs = [fg.zeros(i + 1, device="gpu") for i in range(9)]
# SGD with momentum binds three buffers per parameter: three per dispatch (9 bindings + metadata).
n = t._dispatches(lambda: _core._sgd_step(ps, gs, bs, 0.1, 0.9, 0.0, False, 0.0, False))
assert n == 3, n
# Plain SGD: four per dispatch.
n = t._dispatches(lambda: _core._sgd_step(ps, gs, [None] * 9, 0.1, 0.0, 0.0, False, 0.0, False))
assert n == 3, n
# Parameters in one buffer share a binding: nine slices of one tensor and their
# gradients in another take one dispatch.
flat, gflat = fg.ones(45, device="gpu"), fg.ones(45, device="gpu")
views = [flat[i * 5:(i + 1) * 5] for i in range(9)]
gv = [gflat[i * 5:(i + 1) * 5] for i in range(9)]
n = t._dispatches(lambda: _core._sgd_step(views, gv, [None] * 9, 0.5, 0.0, 0.0, False, 0.0, False))
assert n == 1, n
assert flat.cpu().numpy().tolist() == [0.5] * 45
print("ok")
"""
    env = dict(os.environ, FG_GPU_MAX_STORAGE_BUFFERS="10")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_tensors_over_one_binding_fall_back_to_the_per_parameter_kernel():
    """With a 4 KiB binding limit, parameters over 1024 floats (and small
    views of a larger buffer) are updated piecewise by the per-parameter
    kernel; the others still share dispatches; everything matches the CPU."""
    cases = [
        (n, MIXED + [("dense", (3000,)), ("t", (40, 50))])
        for n in ("sgd-momentum-dampening", "adam-wd-amsgrad", "rmsprop-centered")
    ]
    _run_sub({"FG_GPU_MAX_BINDING_BYTES": "4096"}, cases)
