"""W4–W7: eager training steps, for ferrograd and its peers (imported by ``run.py``).

- W4: MLP 784-1024-1024-10, ReLU, batch 256, cross-entropy, SGD momentum 0.9
  (ms/step), plus the peak RSS of a fresh process running a few steps (MB).
- W5: MNIST-style CNN, batch 64 of 1×28×28, cross-entropy, SGD momentum 0.9.
- W6: GPT-style decoder (4 layers, d_model 256, 4 heads, tanh-GELU MLP 4×,
  pre-LayerNorm, causal attention, vocab 1024, seq 128), batch 16, AdamW:
  training step; and forward latency at batch 1, no grad.
- W7: 50 × (Linear(32→32) + tanh), sum loss, batch 8, plain SGD.

ferrograd and PyTorch run the *same* model code (written once against the
PyTorch-like API both share: ``fw.nn``, ``fw.optim``, ``fw.nn.functional``).
NumPy runs a hand-written forward/backward and update (W4, W5, W7; for W6 a
forward pass only: the inference peer and the reference for the initial
loss). jax runs the whole step under one ``jax.jit`` (``value_and_grad`` plus
a hand-written functional optimiser update, donating the old state).

Every implementation starts from the same weights, drawn once in NumPy with
PyTorch's default initialisation (Linear/Conv: U(±1/sqrt(fan_in)) for weight
and bias; Embedding: N(0, 1); LayerNorm: ones and zeros), and trains on the
same seeded synthetic batches, cycled. Before timing, each implementation
runs ``CHECK_STEPS`` steps; every loss (at the initial weights, then after each
update: momentum and AdamW's moments act from the second update on) is checked
against the reference (the NumPy peer; for W6, whose NumPy peer has no
backward, the initial loss against the NumPy forward and the later ones against
PyTorch or else jax). A ferrograd loss that differs fails the row (FAILED, not
timed) and the run.

Only NumPy and the standard library are imported at module level, so that the
peak-RSS probe (``python workloads_train.py --rss NAME``, started as a fresh
subprocess) loads nothing but the framework under test.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable

import numpy as np

F32 = np.float32

# W4
MLP_DIMS = (784, 1024, 1024, 10)
MLP_BATCH = 256
# W5
CNN_BATCH = 64
# W6
GPT_LAYERS, GPT_D, GPT_HEADS, GPT_VOCAB, GPT_SEQ, GPT_BATCH = 4, 256, 4, 1024, 128, 16
# W7
DEEP_LAYERS, DEEP_WIDTH, DEEP_BATCH = 50, 32, 8

SGD_LR, MOMENTUM = 0.01, 0.9
ADAMW_LR, ADAMW_BETAS, ADAMW_EPS, ADAMW_WD = 3e-4, (0.9, 0.999), 1e-8, 0.01
N_BATCHES = 4  # synthetic batches cycled through while timing
# Steps run and checked against the reference before timing: the first loss is at
# the initial weights; momentum buffers and Adam moments first matter for the third.
CHECK_STEPS = 5
RSS_STEPS = 5


# ---------------------------------------------------------------------------
# Initial weights (PyTorch's default schemes, drawn in NumPy) and data
# ---------------------------------------------------------------------------


def _linear_init(rng, p, name, n_in, n_out, bias=True):
    bound = 1.0 / math.sqrt(n_in)
    p[f"{name}.weight"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(F32)
    if bias:
        p[f"{name}.bias"] = rng.uniform(-bound, bound, n_out).astype(F32)


def _conv_init(rng, p, name, c_in, c_out, k):
    bound = 1.0 / math.sqrt(c_in * k * k)
    p[f"{name}.weight"] = rng.uniform(-bound, bound, (c_out, c_in, k, k)).astype(F32)
    p[f"{name}.bias"] = rng.uniform(-bound, bound, c_out).astype(F32)


def mlp_params(seed=0):
    """W4's weights under the names of ``Sequential(Linear, ReLU, Linear, ReLU, Linear)``."""
    rng, p = np.random.default_rng(seed), {}
    for i, (a, b) in enumerate(itertools.pairwise(MLP_DIMS)):
        _linear_init(rng, p, str(2 * i), a, b)
    return p


def cnn_params(seed=0):
    rng, p = np.random.default_rng(seed), {}
    _conv_init(rng, p, "0", 1, 32, 3)
    _conv_init(rng, p, "2", 32, 64, 3)
    _linear_init(rng, p, "6", 9216, 128)
    _linear_init(rng, p, "8", 128, 10)
    return p


def deep_params(seed=0):
    rng, p = np.random.default_rng(seed), {}
    for i in range(DEEP_LAYERS):
        _linear_init(rng, p, str(2 * i), DEEP_WIDTH, DEEP_WIDTH)
    return p


def gpt_params(seed=0):
    rng, p, d = np.random.default_rng(seed), {}, GPT_D
    p["wte.weight"] = rng.standard_normal((GPT_VOCAB, d)).astype(F32)
    p["wpe.weight"] = rng.standard_normal((GPT_SEQ, d)).astype(F32)
    for i in range(GPT_LAYERS):
        b = f"h.{i}"
        for ln in ("ln_1", "ln_2"):
            p[f"{b}.{ln}.weight"] = np.ones(d, F32)
            p[f"{b}.{ln}.bias"] = np.zeros(d, F32)
        _linear_init(rng, p, f"{b}.attn.c_attn", d, 3 * d)
        _linear_init(rng, p, f"{b}.attn.c_proj", d, d)
        _linear_init(rng, p, f"{b}.mlp.c_fc", d, 4 * d)
        _linear_init(rng, p, f"{b}.mlp.c_proj", 4 * d, d)
    p["ln_f.weight"] = np.ones(d, F32)
    p["ln_f.bias"] = np.zeros(d, F32)
    _linear_init(rng, p, "lm_head", d, GPT_VOCAB, bias=False)
    return p


def mlp_data(seed=1, n=N_BATCHES):
    rng = np.random.default_rng(seed)
    return [
        (
            rng.standard_normal((MLP_BATCH, MLP_DIMS[0]), dtype=F32),
            rng.integers(0, MLP_DIMS[-1], MLP_BATCH).astype(np.int64),
        )
        for _ in range(n)
    ]


def cnn_data(seed=1, n=N_BATCHES):
    rng = np.random.default_rng(seed)
    return [
        (
            rng.standard_normal((CNN_BATCH, 1, 28, 28), dtype=F32),
            rng.integers(0, 10, CNN_BATCH).astype(np.int64),
        )
        for _ in range(n)
    ]


def deep_data(seed=1, n=N_BATCHES):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((DEEP_BATCH, DEEP_WIDTH), dtype=F32),) for _ in range(n)]


def gpt_data(seed=1, n=N_BATCHES, batch=GPT_BATCH):
    """(input tokens, next-token targets), both (batch, seq) int64."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t = rng.integers(0, GPT_VOCAB, (batch, GPT_SEQ + 1)).astype(np.int64)
        out.append((np.ascontiguousarray(t[:, :-1]), np.ascontiguousarray(t[:, 1:])))
    return out


# ---------------------------------------------------------------------------
# ferrograd and PyTorch: one model definition against the shared API
# ---------------------------------------------------------------------------


def mlp_model(fw):
    nn = fw.nn
    d = MLP_DIMS
    return nn.Sequential(
        nn.Linear(d[0], d[1]), nn.ReLU(), nn.Linear(d[1], d[2]), nn.ReLU(), nn.Linear(d[2], d[3])
    )


def cnn_model(fw):
    nn = fw.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(9216, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def deep_model(fw):
    nn = fw.nn
    layers = []
    for _ in range(DEEP_LAYERS):
        layers += [nn.Linear(DEEP_WIDTH, DEEP_WIDTH), nn.Tanh()]
    return nn.Sequential(*layers)


def gpt_model(fw):
    nn, F = fw.nn, fw.nn.functional
    d, nh = GPT_D, GPT_HEADS

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q, k, v = (z.reshape(b, t, nh, c // nh).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.act = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            return self.c_proj(self.act(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(GPT_VOCAB, d)
            self.wpe = nn.Embedding(GPT_SEQ, d)
            self.h = nn.ModuleList([Block() for _ in range(GPT_LAYERS)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, GPT_VOCAB, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(fw.arange(idx.shape[1]))
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def _to_fw(fw, a):
    return fw.from_numpy(np.array(a, copy=True))


def _loaded(fw, make, params):
    model = make(fw)
    model.load_state_dict({k: _to_fw(fw, v) for k, v in params.items()})
    return model


def _ce(fw):
    return fw.nn.functional.cross_entropy


def _gpt_loss(fw):
    ce = fw.nn.functional.cross_entropy
    return lambda logits, y: ce(logits.reshape(-1, GPT_VOCAB), y.reshape(-1))


def _sum_loss(out):
    return out.sum()


def eager_step(fw, make, params, batches, opt: str, loss: Callable, device: str | None = None):
    """A step closure (zero_grad, forward, loss, backward, optimiser step) returning the loss tensor.

    With ``device``, the model and the batches are moved there first (the optimiser is built after).
    """
    model = _loaded(fw, make, params)
    if device is not None:
        model = model.to(device)
    if opt == "sgd_momentum":
        o = fw.optim.SGD(model.parameters(), lr=SGD_LR, momentum=MOMENTUM)
    elif opt == "sgd":
        o = fw.optim.SGD(model.parameters(), lr=SGD_LR)
    else:
        o = fw.optim.AdamW(
            model.parameters(), lr=ADAMW_LR, betas=ADAMW_BETAS, eps=ADAMW_EPS, weight_decay=ADAMW_WD
        )
    data = itertools.cycle(
        [tuple(_to_fw(fw, a) if device is None else _to_fw(fw, a).to(device) for a in b) for b in batches]
    )

    def step():
        x, *y = next(data)
        o.zero_grad()
        out = model(x)
        value = loss(out, *y)
        value.backward()
        o.step()
        return value

    return step


# ---------------------------------------------------------------------------
# NumPy by hand
# ---------------------------------------------------------------------------


def _np_ce(z, y):
    """Mean cross-entropy of logits z (N, C) (overwritten) and its gradient dL/dz."""
    n = z.shape[0]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    loss = float(np.mean(np.log(s[:, 0]) - z[rows, y]))
    e /= s
    e[rows, y] -= 1.0
    e *= F32(1.0 / n)
    return loss, e


class _NpSGD:
    """PyTorch's SGD with momentum (dampening 0) on lists of NumPy arrays, in place."""

    def __init__(self, params, lr, momentum):
        self.params, self.lr, self.mom = params, F32(lr), F32(momentum)
        self.bufs = [np.zeros_like(p) for p in params] if momentum else None

    def step(self, grads):
        if self.bufs is None:
            for p, g in zip(self.params, grads, strict=True):
                g *= self.lr
                p -= g
            return
        for p, b, g in zip(self.params, self.bufs, grads, strict=True):
            b *= self.mom
            b += g
            p -= self.lr * b


class NumpyMLP:
    """W4 by hand: weights (out, in) as PyTorch's, matmuls via ``@``."""

    def __init__(self, params):
        self.w = [params[f"{i}.weight"].copy() for i in (0, 2, 4)]
        self.b = [params[f"{i}.bias"].copy() for i in (0, 2, 4)]
        self.opt = _NpSGD(self.w + self.b, SGD_LR, MOMENTUM)

    def step(self, x, y):
        (w1, w2, w3), (b1, b2, b3) = self.w, self.b
        h1 = x @ w1.T
        h1 += b1
        np.maximum(h1, 0, out=h1)
        h2 = h1 @ w2.T
        h2 += b2
        np.maximum(h2, 0, out=h2)
        z = h2 @ w3.T
        z += b3
        loss, g3 = _np_ce(z, y)
        g2 = g3 @ w3
        g2 *= h2 > 0
        g1 = g2 @ w2
        g1 *= h1 > 0
        grads = [g1.T @ x, g2.T @ h1, g3.T @ h2, g1.sum(0), g2.sum(0), g3.sum(0)]
        self.opt.step(grads)
        return loss


def _im2col(x, k):
    """(N, H, W, C) → (N·Ho·Wo, k·k·C) patches, columns ordered (kh, kw, C)."""
    n, h, w, c = x.shape
    v = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))  # (N, Ho, Wo, C, k, k)
    return v.transpose(0, 1, 2, 4, 5, 3).reshape(n * (h - k + 1) * (w - k + 1), k * k * c)


class NumpyCNN:
    """W5 by hand: activations NHWC, convolutions by im2col + ``@``, 2×2 max-pool over strided views."""

    def __init__(self, params):
        self.p = {k: v.copy() for k, v in params.items()}
        self.keys = ["0.weight", "2.weight", "6.weight", "8.weight", "0.bias", "2.bias", "6.bias", "8.bias"]
        self.opt = _NpSGD([self.p[k] for k in self.keys], SGD_LR, MOMENTUM)

    def step(self, x, y):
        p = self.p
        n = x.shape[0]
        x = x.reshape(n, 28, 28, 1)  # NCHW with C = 1 is NHWC
        wm1 = p["0.weight"].transpose(0, 2, 3, 1).reshape(32, 9)  # (O, kh·kw·C)
        wm2 = p["2.weight"].transpose(0, 2, 3, 1).reshape(64, 288)
        c1 = _im2col(x, 3)
        a1 = c1 @ wm1.T
        a1 += p["0.bias"]
        np.maximum(a1, 0, out=a1)
        a1 = a1.reshape(n, 26, 26, 32)
        c2 = _im2col(a1, 3)
        a2 = c2 @ wm2.T
        a2 += p["2.bias"]
        np.maximum(a2, 0, out=a2)
        a2 = a2.reshape(n, 24, 24, 64)
        quads = [a2[:, i::2, j::2] for i in (0, 1) for j in (0, 1)]  # 2×2 max-pool
        pooled = np.maximum(np.maximum(quads[0], quads[1]), np.maximum(quads[2], quads[3]))
        f = pooled.transpose(0, 3, 1, 2).reshape(n, 9216)  # flatten in (C, H, W) order
        h = f @ p["6.weight"].T
        h += p["6.bias"]
        np.maximum(h, 0, out=h)
        z = h @ p["8.weight"].T
        z += p["8.bias"]
        loss, gz = _np_ce(z, y)
        gh = gz @ p["8.weight"]
        gh *= h > 0
        gf = gh @ p["6.weight"]
        gp = gf.reshape(n, 64, 12, 12).transpose(0, 2, 3, 1)
        ga2 = np.empty_like(a2)
        for q, (i, j) in zip(quads, ((0, 0), (0, 1), (1, 0), (1, 1)), strict=True):
            np.multiply(q == pooled, gp, out=ga2[:, i::2, j::2])  # to the max (ties: all; ReLU zeroes them)
        ga2 = ga2.reshape(n * 576, 64)
        ga2 *= a2.reshape(n * 576, 64) > 0
        gd = (ga2 @ wm2).reshape(n, 24, 24, 3, 3, 32)  # d(patches) → col2im
        ga1 = np.zeros((n, 26, 26, 32), F32)
        for i in range(3):
            for j in range(3):
                ga1[:, i : i + 24, j : j + 24, :] += gd[:, :, :, i, j, :]
        ga1 *= a1 > 0
        ga1 = ga1.reshape(n * 676, 32)
        grads = [
            (ga1.T @ c1).reshape(32, 3, 3, 1).transpose(0, 3, 1, 2),
            (ga2.T @ c2).reshape(64, 3, 3, 32).transpose(0, 3, 1, 2),
            gh.T @ f,
            gz.T @ h,
            ga1.sum(0),
            ga2.sum(0),
            gh.sum(0),
            gz.sum(0),
        ]
        self.opt.step(grads)
        return loss


class NumpyDeep:
    """W7 by hand: 50 × (x @ W.T + b, tanh), loss = sum, plain SGD."""

    def __init__(self, params):
        self.w = [params[f"{2 * i}.weight"].copy() for i in range(DEEP_LAYERS)]
        self.b = [params[f"{2 * i}.bias"].copy() for i in range(DEEP_LAYERS)]
        self.lr = F32(SGD_LR)

    def step(self, x):
        acts = [x]
        for w, b in zip(self.w, self.b, strict=True):
            a = acts[-1] @ w.T
            a += b
            np.tanh(a, out=a)
            acts.append(a)
        loss = float(acts[-1].sum())
        g = np.ones_like(acts[-1])
        for i in range(DEEP_LAYERS - 1, -1, -1):
            a = acts[i + 1]
            g *= 1.0 - a * a
            gw = g.T @ acts[i]
            gb = g.sum(0)
            if i:
                g = g @ self.w[i]
            gw *= self.lr
            self.w[i] -= gw
            gb *= self.lr
            self.b[i] -= gb
        return loss


def numpy_step(cls, params, batches):
    model = cls(params)
    data = itertools.cycle(batches)
    return lambda: model.step(*next(data))


# ---------------------------------------------------------------------------
# Forward passes written once for NumPy and jax.numpy (xp)
# ---------------------------------------------------------------------------


def _xp_gelu_tanh(xp, x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + xp.tanh(c * (x + 0.044715 * x * x * x)))


def _xp_layer_norm(xp, x, w, b, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / xp.sqrt(v + eps) * w + b


def _xp_softmax(xp, s):
    e = xp.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _xp_ce(xp, z, y):
    """Mean cross-entropy of logits (..., C) against integer targets (...)."""
    m = z.max(axis=-1, keepdims=True)
    lse = xp.log(xp.exp(z - m).sum(axis=-1)) + m[..., 0]
    picked = xp.take_along_axis(z, y[..., None], axis=-1)[..., 0]
    return (lse - picked).mean()


def xp_gpt_forward(xp, p, idx):
    """Logits (B, T, vocab) of the W6 decoder, from the parameter dict ``p``."""
    b, t = idx.shape
    d, nh = GPT_D, GPT_HEADS
    hd = d // nh
    mask = np.tril(np.ones((t, t), dtype=bool))
    x = p["wte.weight"][idx] + p["wpe.weight"][:t]
    for i in range(GPT_LAYERS):
        pre = f"h.{i}."

        def lin(v, name, pre=pre):
            return v @ p[pre + name + ".weight"].T + p[pre + name + ".bias"]

        h = _xp_layer_norm(xp, x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"])
        qkv = lin(h, "attn.c_attn").reshape(b, t, 3, nh, hd)
        q, k, v = (xp.swapaxes(qkv[:, :, j], 1, 2) for j in range(3))  # (B, H, T, hd)
        s = (q @ xp.swapaxes(k, -1, -2)) * F32(1.0 / math.sqrt(hd))
        s = xp.where(mask, s, F32(-np.inf))
        y = xp.swapaxes(_xp_softmax(xp, s) @ v, 1, 2).reshape(b, t, d)
        x = x + lin(y, "attn.c_proj")
        h = _xp_layer_norm(xp, x, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
        x = x + lin(_xp_gelu_tanh(xp, lin(h, "mlp.c_fc")), "mlp.c_proj")
    x = _xp_layer_norm(xp, x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["lm_head.weight"].T


# ---------------------------------------------------------------------------
# jax: the whole step under jax.jit
# ---------------------------------------------------------------------------


def _jax_relu_linear(jnp, p, h, names, last_relu=False):
    for j, name in enumerate(names):
        h = h @ p[f"{name}.weight"].T + p[f"{name}.bias"]
        if j < len(names) - 1 or last_relu:
            h = jnp.maximum(h, 0)
    return h


def jax_loss_fn(jax, which):
    jnp = jax.numpy
    if which == "W4":
        return lambda p, x, y: _xp_ce(jnp, _jax_relu_linear(jnp, p, x, ("0", "2", "4")), y)
    if which == "W5":

        def cnn(p, x, y):
            dn = ("NCHW", "OIHW", "NCHW")
            h = x
            for name in ("0", "2"):
                h = jax.lax.conv_general_dilated(
                    h, p[f"{name}.weight"], (1, 1), "VALID", dimension_numbers=dn
                )
                h = jnp.maximum(h + p[f"{name}.bias"][None, :, None, None], 0)
            n = h.shape[0]
            h = h.reshape(n, 64, 12, 2, 12, 2).max(axis=(3, 5)).reshape(n, 9216)
            return _xp_ce(jnp, _jax_relu_linear(jnp, p, h, ("6", "8")), y)

        return cnn
    if which == "W6":
        return lambda p, idx, y: _xp_ce(jnp, xp_gpt_forward(jnp, p, idx), y)

    def deep(p, x):
        for i in range(DEEP_LAYERS):
            x = jnp.tanh(x @ p[f"{2 * i}.weight"].T + p[f"{2 * i}.bias"])
        return x.sum()

    return deep


def jax_step(jax, which, params, batches, opt: str):
    """A jitted training step (value_and_grad + functional update, old state donated)."""
    jnp = jax.numpy
    tmap = jax.tree_util.tree_map
    loss_fn = jax_loss_fn(jax, which)
    p0 = {k: jnp.asarray(v) for k, v in params.items()}
    if opt == "sgd_momentum":
        state0 = tmap(jnp.zeros_like, p0)

        def update(p, b, g):
            b = tmap(lambda b, g: MOMENTUM * b + g, b, g)
            return tmap(lambda p, b: p - SGD_LR * b, p, b), b
    elif opt == "sgd":
        state0 = ()

        def update(p, s, g):
            return tmap(lambda p, g: p - SGD_LR * g, p, g), s
    else:
        b1, b2 = ADAMW_BETAS
        state0 = (tmap(jnp.zeros_like, p0), tmap(jnp.zeros_like, p0), jnp.zeros((), jnp.float32))

        def update(p, s, g):
            m, v, t = s
            t = t + 1.0
            m = tmap(lambda m, g: b1 * m + (1 - b1) * g, m, g)
            v = tmap(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
            step_size = ADAMW_LR / (1 - b1**t)
            bc2_sqrt = jnp.sqrt(1 - b2**t)
            p = tmap(
                lambda p, m, v: (
                    p * (1 - ADAMW_LR * ADAMW_WD) - step_size * m / (jnp.sqrt(v) / bc2_sqrt + ADAMW_EPS)
                ),
                p,
                m,
                v,
            )
            return p, (m, v, t)

    vg = jax.value_and_grad(loss_fn)

    def train_step(p, s, *batch):
        loss, g = vg(p, *batch)
        p, s = update(p, s, g)
        return p, s, loss

    fn = jax.jit(train_step, donate_argnums=(0, 1))

    def conv(a):
        return jnp.asarray(a.astype(np.int32) if a.dtype == np.int64 else a)

    data = itertools.cycle([tuple(conv(a) for a in b) for b in batches])
    st = [p0, state0]

    def step():
        st[0], st[1], loss = fn(st[0], st[1], *next(data))
        return loss.block_until_ready()

    return step


# ---------------------------------------------------------------------------
# Running a training row
# ---------------------------------------------------------------------------


def _scalar(v) -> float:
    return float(v.item()) if hasattr(v, "item") else float(v)


_LABELS = {"numpy": "NumPy", "torch": "PyTorch", "jax": "jax"}


def _compare(ref: list[tuple[str, float | None]], losses, rtol, atol) -> dict[str, str]:
    """Why each implementation's losses (initial, then after each step) differ from ``ref``.

    ``ref`` holds one (source, value) pair per loss; a None value is not checked, and an
    implementation is not checked against itself.
    """
    notes = {}
    for name, got in losses.items():
        for i, (g, (src, r)) in enumerate(zip(got, ref, strict=True)):
            if r is None or src == name:
                continue
            if not (math.isfinite(g) and abs(g - r) <= atol + rtol * abs(r)):
                what = "initial loss" if i == 0 else f"loss after step {i}"
                notes[name] = f"result differs from {_LABELS.get(src, src)}: {what} {g:.6g} vs {r:.6g}"
                break
    return notes


def reference_after_first(first: tuple[str, float], losses) -> list[tuple[str, float | None]]:
    """The reference of a row whose NumPy peer has only a forward: ``first`` for the initial
    loss, then PyTorch's (else jax's) losses; unchecked (None) where neither ran."""
    peer = next((p for p in ("torch", "jax") if p in losses), None)
    rest = [(peer, v) for v in losses[peer][1:]] if peer else [("", None)] * (CHECK_STEPS - 1)
    return [first, *rest]


def _measure(rt, fns, repeats, target):
    """``rt.measure``; with ``target == 0`` (steps long enough to time one by one) one call per block
    and no further warm-up: the checked steps were the warm-up."""
    if target:
        return rt.measure(fns, repeats, target)
    fns, unsynced = rt.synced(fns)
    deferred_before = rt._deferred_count()
    samples = {k: [] for k in fns}
    keys = list(fns)
    for r in range(repeats):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            rt.quiesce()
            samples[k].append(rt._block(fns[k], 1))
    if unsynced and rt._deferred_count() != deferred_before:
        raise RuntimeError("a ferrograd step deferred work while timed without fg.synchronize()")
    return {k: statistics.median(v) for k, v in samples.items()}


def run_train(
    rt,
    ctx,
    row,
    impls: dict[str, Callable[[], Callable[[], object]]],
    *,
    rtol=2e-4,
    atol=1e-4,
    target=0.1,
    repeats=None,
    reference: Callable[[dict], list] | None = None,
):
    """Build every step, run ``CHECK_STEPS`` steps each (checking every loss), then time the
    steps interleaved.

    ``reference(losses)`` gives the reference for the ``CHECK_STEPS`` losses (initial, then
    after each step) as (source, value) pairs; by default the NumPy peer's losses. A
    ferrograd whose losses differ fails the row: it is not timed and shows FAILED.
    """
    fns, losses = {}, {}
    for name, setup in impls.items():
        try:
            fn = setup()
            losses[name] = [_scalar(fn()) for _ in range(CHECK_STEPS)]
            fns[name] = fn
        except Exception as e:  # noqa: BLE001 - a missing or broken op is reported, not fatal
            row.values[name], row.notes[name] = None, rt.na_note(e)
    if reference is None:

        def reference(ls):
            return [("numpy", v) for v in ls.get("numpy", [None] * CHECK_STEPS)]

    for name, why in _compare(reference(losses), losses, rtol, atol).items():
        if name == "ferrograd":
            row.fail(name, why)
            del fns[name]
        else:
            row.notes[name] = why
    if fns:
        for name, sec in _measure(rt, fns, repeats or ctx.repeats, target).items():
            row.values[name] = rt.ms(sec)
    ctx.rows.append(row)
    return row


def _peer_impls(rt, eager: Callable, npy: Callable | None, jx: Callable):
    """ferrograd / NumPy / torch / jax setups, peers only when installed."""
    impls = {"ferrograd": lambda: eager(rt.fg)}
    if npy is not None:
        impls["numpy"] = npy
    if rt.torch:
        impls["torch"] = lambda: eager(rt.torch)
    if rt.jax:
        impls["jax"] = lambda: jx(rt.jax)
    return impls


# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------


def w4(rt, ctx):
    params, batches = mlp_params(), mlp_data()
    row = rt.Row("W4", "MLP 784-1024-1024-10, batch 256, SGD mom.", "ms", False)
    impls = _peer_impls(
        rt,
        lambda fw: eager_step(fw, mlp_model, params, batches, "sgd_momentum", _ce(fw)),
        lambda: numpy_step(NumpyMLP, params, batches),
        lambda jax: jax_step(jax, "W4", params, batches, "sgd_momentum"),
    )
    run_train(rt, ctx, row, impls, target=0.1)
    rss_row(rt, ctx)


def w5(rt, ctx):
    params, batches = cnn_params(), cnn_data()
    row = rt.Row("W5", "MNIST CNN, batch 64, SGD mom.", "ms", False)
    impls = _peer_impls(
        rt,
        lambda fw: eager_step(fw, cnn_model, params, batches, "sgd_momentum", _ce(fw)),
        lambda: numpy_step(NumpyCNN, params, batches),
        lambda jax: jax_step(jax, "W5", params, batches, "sgd_momentum"),
    )
    run_train(rt, ctx, row, impls, target=0.1)


def w6(rt, ctx):
    params, batches = gpt_params(), gpt_data(n=2)
    row = rt.Row("W6", "GPT 4x256, seq 128, batch 16, AdamW: train", "ms", False)
    impls = _peer_impls(
        rt,
        lambda fw: eager_step(fw, gpt_model, params, batches, "adamw", _gpt_loss(fw)),
        None,
        lambda jax: jax_step(jax, "W6", params, batches, "adamw"),
    )
    row.values["numpy"] = None
    row.notes["numpy"] = "n/a (no hand-written backward; its forward checks the initial loss)"
    x0, y0 = batches[0]
    np_loss0 = float(_xp_ce(np, xp_gpt_forward(np, params, x0).astype(np.float64), y0))

    def reference(losses):
        return reference_after_first(("numpy", np_loss0), losses)

    run_train(rt, ctx, row, impls, rtol=1e-3, atol=1e-3, target=0.0, repeats=5, reference=reference)

    # forward latency: batch 1, no grad
    idx = gpt_data(seed=2, n=1, batch=1)[0][0]
    irow = rt.Row("W6", "GPT forward, batch 1, seq 128, no grad", "ms", False)

    def eager_infer(fw):
        model = _loaded(fw, gpt_model, params)
        if hasattr(model, "eval"):
            model.eval()
        x = _to_fw(fw, idx)

        def fwd():
            with fw.no_grad():
                return model(x)

        return fwd

    def np_infer():
        return lambda: xp_gpt_forward(np, params, idx)

    def jax_infer(jax):
        p = {k: jax.numpy.asarray(v) for k, v in params.items()}
        f = jax.jit(lambda p, i: xp_gpt_forward(jax.numpy, p, i))
        x = jax.numpy.asarray(idx.astype(np.int32))
        return lambda: f(p, x).block_until_ready()

    impls = {"ferrograd": lambda: eager_infer(rt.fg), "numpy": np_infer}
    if rt.torch:
        impls["torch"] = lambda: eager_infer(rt.torch)
    if rt.jax:
        impls["jax"] = lambda: jax_infer(rt.jax)
    rt.run_variant(ctx, irow, impls, rt.ms, rt.close(rtol=2e-3, atol=2e-3), target=0.05)


def w7(rt, ctx):
    params, batches = deep_params(), deep_data()
    row = rt.Row("W7", "50 x (Linear 32 + tanh), batch 8, SGD", "ms", False)
    impls = _peer_impls(
        rt,
        lambda fw: eager_step(fw, deep_model, params, batches, "sgd", _sum_loss),
        lambda: numpy_step(NumpyDeep, params, batches),
        lambda jax: jax_step(jax, "W7", params, batches, "sgd"),
    )
    run_train(rt, ctx, row, impls, rtol=2e-4, atol=1e-3, target=0.05)


# ---------------------------------------------------------------------------
# W4 peak RSS: a fresh process per framework
# ---------------------------------------------------------------------------


def rss_probe(name: str) -> float:
    """Build W4, run a few steps; return this process's peak RSS in MB (run in a fresh process)."""
    import resource

    params, batches = mlp_params(), mlp_data(n=1)
    if name == "numpy":
        step = numpy_step(NumpyMLP, params, batches)
    elif name == "jax":
        import jax

        step = jax_step(jax, "W4", params, batches, "sgd_momentum")
    else:
        fw = __import__(name)
        step = eager_step(fw, mlp_model, params, batches, "sgd_momentum", _ce(fw))
    del params, batches
    for _ in range(RSS_STEPS):
        _scalar(step())
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kb / 1024 if sys.platform != "darwin" else kb / 1024 / 1024


# A process's ru_maxrss on Linux starts from its parent's peak: fork copies the address
# space's high-water mark and exec carries it over. So the probe is not started from the
# (large) benchmark process but from a tiny interpreter in between, whose own small peak
# is the floor the probe inherits.
_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def rss_row(rt, ctx):
    row = rt.Row("W4", f"peak RSS, fresh process, {RSS_STEPS} steps", "MB", False)
    names = ["ferrograd", "numpy"] + (["torch"] if rt.torch else []) + (["jax"] if rt.jax else [])
    for name in names:
        cmd = [
            sys.executable,
            "-S",
            "-c",
            _LAUNCHER,
            sys.executable,
            os.path.abspath(__file__),
            "--rss",
            name,
        ]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
            lines = r.stdout.strip().splitlines()
            if r.returncode or not lines:
                err = (r.stderr.strip().splitlines() or ["no output"])[-1]
                row.values[name], row.notes[name] = None, f"n/a ({err[:100]})"
            else:
                row.values[name] = float(lines[-1])
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            row.values[name], row.notes[name] = None, f"n/a ({type(e).__name__}: {e})"
    ctx.rows.append(row)


WORKLOADS = {"W4": w4, "W5": w5, "W6": w6, "W7": w7}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rss":
        print(f"{rss_probe(sys.argv[2]):.1f}")
    else:
        sys.exit("usage: workloads_train.py --rss {ferrograd,numpy,torch,jax} (run.py runs the workloads)")
