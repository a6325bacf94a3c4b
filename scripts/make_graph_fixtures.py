"""Write the saved-graph fixtures that later versions must keep loading.

Each case compiles a small model or step, saves its captured graph to
``tests/fixtures/graphs/<name>.fgraph`` and stores the inputs it was run on
and the outputs it gave in ``<name>.npz`` (for training steps: the outputs of
several consecutive calls and the weights after them). The test
``tests/test_graph_fixtures.py`` loads every file and checks the outputs.

The files are written once, by the version whose format they pin; run this
again only to add a case (existing files are kept unless ``--force``)::

    python scripts/make_graph_fixtures.py [--force]
"""

from __future__ import annotations

import argparse
import json
import struct
from collections.abc import Callable
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "graphs"


def _arr(t) -> np.ndarray:
    return np.asarray(t.detach())


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flat(x)]
    return [out]


def mlp_dynamic():
    """Linear, GELU, LayerNorm under ``no_grad`` with a symbolic batch."""
    fg.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3)).eval()
    f = fg.compile(m, dynamic=True)
    xs = [fg.randn(5, 6), fg.randn(9, 6)]
    with fg.no_grad():
        f(xs[0])
        return f, f.graph(xs[0]), [[x] for x in xs], 1


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, groups=2, bias=False)
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.avg_pool2d(F.silu(self.c2(x)), 1)
        x = F.adaptive_avg_pool2d(x, 2).flatten(1)
        return F.log_softmax(self.fc(x), dim=-1), F.softmax(x, dim=1).amax(dim=1)


def convnet():
    """Convolutions (grouped, strided), batch norm in eval, pooling, softmaxes."""
    fg.manual_seed(1)
    m = _ConvNet()
    with fg.no_grad():
        m.bn.running_mean.copy_(fg.randn(8) * 0.1)
        m.bn.running_var.copy_(fg.rand(8) + 0.5)
    m.eval()
    f = fg.compile(m)
    x = fg.randn(2, 3, 12, 12)
    with fg.no_grad():
        f(x)
        return f, f.graph(x), [[x], [fg.randn(2, 3, 12, 12)]], 1


class _Block(nn.Module):
    def __init__(self, d: int = 32, h: int = 4, vocab: int = 50, t: int = 16) -> None:
        super().__init__()
        self.h = h
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(fg.arange(t))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=2)
        q, k, v = (z.view(b, t, self.h, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
        mask = fg.ones(t, t).tril().view(1, 1, t, t)
        att = F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, -1)
        x = x + self.proj(y)
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
        x = x + 0.5 * z
        x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.head(x)


def gpt_block():
    """Embeddings, manual and fused causal attention, tanh-GELU MLP."""
    fg.manual_seed(2)
    m = _Block().eval()
    f = fg.compile(m)
    idx = fg.randint(0, 50, (2, 16))
    with fg.no_grad():
        f(idx)
        return f, f.graph(idx), [[idx], [fg.randint(0, 50, (2, 16))]], 1


def adam_step():
    """A training step: cross-entropy, backward, weight decay, Adam."""
    fg.manual_seed(3)
    m = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 4))
    opt = fg.optim.Adam(m.parameters(), lr=1e-2, weight_decay=1e-3)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss

    f = fg.compile(step)
    x, y = fg.randn(8, 6), fg.randint(0, 4, (8,))
    f(x, y)
    return f, f.graph(x, y), [[x, y]] * 3, 3


def rnn_step():
    """An LSTM and a GRU with their backward pass and SGD with momentum."""
    fg.manual_seed(4)
    lstm, gru, fc = nn.LSTM(5, 7, batch_first=True), nn.GRU(7, 6), nn.Linear(6, 1)
    params = [*lstm.parameters(), *gru.parameters(), *fc.parameters()]
    opt = fg.optim.SGD(params, lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        h, _ = lstm(x)
        g, _ = gru(h.transpose(0, 1))
        loss = F.mse_loss(fc(g[-1]).squeeze(-1), y)
        loss.backward()
        opt.step()
        return loss

    f = fg.compile(step)
    x, y = fg.randn(3, 4, 5), fg.randn(3)
    f(x, y)
    return f, f.graph(x, y), [[x, y]] * 2, 2


def control_flow():
    """``fg.cond`` and ``fg.while_loop``."""

    def body(x):
        y = fg.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        return fg.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 1.5 + 1.0, y)

    f = fg.compile(body)
    xs = [fg.tensor([1.0, 2.0]), fg.tensor([-3.0, 0.5])]
    for x in xs:
        f(x)
    return f, f.graph(xs[0]), [[x] for x in xs], 1


def many_ops():
    """Reductions, scans, indexing, joins, integer and comparison ops."""

    def body(x, i):
        a = x.sum(0) + x.mean(1, keepdim=True).squeeze(1)[:1] - x.amax(1)[0]
        b = fg.logsumexp(x, 1) * x.var(1, unbiased=True) + x.std(0)[1]
        c = fg.cumsum(x, 1).gather(1, i) + fg.cumprod(x.clamp(0.5, 1.5), 0).index_select(0, i[:, 0])[:, :2]
        d = fg.where(x > 0, x.pow(2), x.abs().sqrt()).flip(0).permute(1, 0)
        e = fg.cat([x.argmax(1).float(), (i.sum(1) % 3).float(), x.max(0).values], 0)
        f = fg.stack([x.exp().log1p(), x.sin() * x.cos(), x.sigmoid().reciprocal()], 0).sum((0, 2))
        k = (x.floor() + x.round() * x.sign()).min(1).values
        j = (i.long() * 2 - 1).prod(1).float() + (x >= 0.3).sum(1).float()
        return a, b, c, d, e, f, k, j

    f = fg.compile(body)
    x, i = fg.randn(4, 5), fg.randint(0, 4, (4, 2))
    with fg.no_grad():
        f(x, i)
        return f, f.graph(x, i), [[x, i], [fg.randn(4, 5), fg.randint(0, 4, (4, 2))]], 1


CASES: dict[str, Callable] = {
    "mlp_dynamic": mlp_dynamic,
    "convnet": convnet,
    "gpt_block": gpt_block,
    "adam_step": adam_step,
    "rnn_step": rnn_step,
    "control_flow": control_flow,
    "many_ops": many_ops,
}


def op_kinds(path: Path) -> list[str]:
    """The captured op variants a saved graph holds (from its JSON header)."""
    b = path.read_bytes()
    (n,) = struct.unpack("<Q", b[:8])
    graph = json.loads(json.loads(b[8 : 8 + n])["__metadata__"]["graph"])
    kinds: set[str] = set()

    def walk(v) -> None:
        if isinstance(v, dict):
            if "call" in v and "inputs" in v:
                call = v["call"]
                kinds.add(call if isinstance(call, str) else next(iter(call)))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(graph["nodes"])
    return sorted(kinds)


def _relative_locations(path: Path) -> None:
    """Rewrite the capture locations a saved graph names (absolute file paths
    of the machine that wrote it) relative to the repository root."""
    b = path.read_bytes()
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8 : 8 + n])
    root = str(OUT.parent.parent.parent) + "/"
    graph = header["__metadata__"]["graph"].replace(json.dumps(root)[1:-1], "")
    assert root not in graph, "a location outside the repository"
    header["__metadata__"]["graph"] = graph
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b[8 + n :])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rewrite existing fixtures")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in CASES.items():
        gpath, npath = OUT / f"{name}.fgraph", OUT / f"{name}.npz"
        if gpath.exists() and not args.force:
            print(f"{name}: kept")
            continue
        f, graph, calls, steps = make()
        graph.save(gpath, metadata={"fixture": name, "ferrograd": fg.__version__})
        _relative_locations(gpath)
        g = fg.load_graph(gpath)
        data: dict[str, np.ndarray] = {}
        for c, inputs in enumerate(calls):
            for k, t in enumerate(inputs):
                data[f"call{c}_in{k}"] = _arr(t)
            # The values a training step's scalar slots take at its c-th run
            # after saving: the saved ones, step counts advanced by c.
            saved = list(getattr(g, "_saved_scalars", []))
            scalars = [
                v + c if s.startswith("step count") else v for s, v in zip(g.scalar_slots, saved, strict=True)
            ]
            data[f"call{c}_scalars"] = np.array(scalars, dtype=np.float64)
            outs = _flat(g(*inputs, scalars=scalars) if g.scalar_slots else g(*inputs))
            # The live compiled function agrees (it continues from the state saved).
            if steps > 1:
                live = _flat(f(*inputs))
            else:
                with fg.no_grad():
                    live = _flat(f(*inputs))
            for k, (a, b) in enumerate(zip(outs, live, strict=True)):
                np.testing.assert_allclose(_arr(a), _arr(b), rtol=1e-5, atol=1e-6, err_msg=f"{name} {c} {k}")
            for k, t in enumerate(outs):
                data[f"call{c}_out{k}"] = _arr(t)
        for k, (key, t) in enumerate(g.state_dict().items()):
            data[f"state{k}"] = _arr(t)
            data[f"state{k}_name"] = np.array(key)
        np.savez_compressed(npath, **data)
        print(f"{name}: {gpath.stat().st_size + npath.stat().st_size} bytes, ops {op_kinds(gpath)}")


if __name__ == "__main__":
    main()
