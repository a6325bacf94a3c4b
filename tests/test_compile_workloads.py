"""Compiled and eager training steps agree on the benchmark suite's models
(W4 MLP, W5 CNN, W6 GPT decoder, W7 deep narrow MLP), in float64 within
1e-10 and in float32 within rtol 1e-4 plus an absolute tolerance scaled by
the tensor's norm (fusion may reorder sums): the loss of every step, every
parameter after the steps and every gradient. The architectures are the workloads'; batch and sequence sizes
are cut so the float64 runs stay quick. The compiled graphs also exercise
the executor's in-place buffer reuse and its concurrent independent
branches (asserted where the model has them)."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

TOL = {"rtol": 1e-10, "atol": 1e-10}


def w4_model():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def w5_model():
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


def w6_model(d=64, heads=4, layers=2, vocab=128, seq=16):
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (z.reshape(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(d), Attention()
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(fg.arange(t))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    return GPT()


def w7_model():
    layers = []
    for _ in range(50):
        layers += [nn.Linear(32, 32), nn.Tanh()]
    return nn.Sequential(*layers)


def _data(name, dtype=fg.float64):
    g = fg.Generator().manual_seed(7)
    if name == "W4":
        return fg.randn(32, 784, generator=g, dtype=dtype), fg.randint(0, 10, (32,), generator=g)
    if name == "W5":
        return fg.randn(4, 1, 28, 28, generator=g, dtype=dtype), fg.randint(0, 10, (4,), generator=g)
    if name == "W6":
        return fg.randint(0, 128, (2, 16), generator=g), fg.randint(0, 128, (2, 16), generator=g)
    return fg.randn(8, 32, generator=g, dtype=dtype), None


def _loss(name, out, y):
    if name == "W6":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    if name == "W7":
        return out.sum()
    return F.cross_entropy(out, y)


def _setup(name, dtype=fg.float64):
    fg.manual_seed(11)
    model = {"W4": w4_model, "W5": w5_model, "W6": w6_model, "W7": w7_model}[name]().to(dtype)
    # In float32 W6 steps with SGD: the attention key bias has an exactly zero
    # gradient (softmax ignores a shift shared by a row), so its float32
    # gradient is rounding noise of either sign, which Adam's normalised step
    # turns into full-size updates that differ between any two summation
    # orders. AdamW is compared in float64.
    if name == "W6" and dtype == fg.float64:
        opt = fg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    else:
        lr = 0.01 if name == "W7" else 0.05
        opt = fg.optim.SGD(model.parameters(), lr=lr, momentum=0.9 if name != "W7" else 0.0)

    def step(x, y):
        loss = _loss(name, model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return model, step


@pytest.mark.parametrize("name", ["W4", "W5", "W6", "W7"])
def test_compiled_training_step_matches_eager(name):
    x, y = _data(name)
    em, estep = _setup(name)
    cm, cstep_fn = _setup(name)
    cstep = fg.compile(cstep_fn)
    for _ in range(3):
        le = estep(x, y)
        lc = cstep(x, y)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), **TOL)
    assert cstep.stats.traces == 1 and cstep.stats.graph_breaks == 0
    for (n, pe), pc in zip(em.named_parameters(), cm.parameters(), strict=True):
        np.testing.assert_allclose(pc.numpy(), pe.numpy(), err_msg=n, **TOL)
        np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), err_msg=n, **TOL)
    g = cstep.graph(x, y)
    plan = g.memory_plan()
    assert plan["peak_bytes"] < plan["total_bytes"]
    ops = [n["op"] for n in g.nodes()]
    matmul_pairs = [(i, j) for i, j in g.parallel_pairs() if ops[i] == ops[j] == "matmul"]
    if name == "W6":
        # At this size its input- and weight-gradient matmuls of a layer are
        # independent branches small enough to share the pool.
        assert matmul_pairs
    if name == "W4":
        # Its hidden layers' gradient matmuls (2^26 flops and more each) split
        # over the whole pool themselves: they run one after the other.
        assert not matmul_pairs
    if name in ("W6", "W7"):
        assert plan["in_place"] > 0  # activation gradients written over dying buffers


@pytest.mark.parametrize("name", ["W4", "W7"])
def test_compiled_forward_matches_eager_under_no_grad(name):
    x, _ = _data(name)
    model, _ = _setup(name)
    f = fg.compile(model.eval())
    with fg.no_grad():
        np.testing.assert_allclose(f(x).numpy(), model(x).numpy(), **TOL)


def _close32(got, want, what):
    # rtol 1e-4 plus an absolute tolerance scaled by the tensor's size (RMS).
    scale = float(np.sqrt(np.mean(np.square(want.astype(np.float64))))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale + 1e-7, err_msg=what)


@pytest.mark.parametrize("name", ["W4", "W5", "W6", "W7"])
def test_compiled_training_step_matches_eager_float32(name):
    x, y = _data(name, fg.float32)
    em, estep = _setup(name, fg.float32)
    cm, cstep_fn = _setup(name, fg.float32)
    cstep = fg.compile(cstep_fn)
    for k in range(3):
        _close32(cstep(x, y).numpy(), estep(x, y).numpy(), f"loss of step {k}")
    for (n, pe), pc in zip(em.named_parameters(), cm.parameters(), strict=True):
        _close32(pc.numpy(), pe.numpy(), n)
        _close32(pc.grad.numpy(), pe.grad.numpy(), n + ".grad")
