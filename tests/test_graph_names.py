"""Captured nodes carry the module path that recorded them and their region;
tensors a graph reads are named as in ``state_dict``; ``dump()``, ``to_dot()``
and the HTML page group by them."""

from __future__ import annotations

import json
import re

import ferrograd as fg
import ferrograd.nn as nn
from ferrograd._capture import split_location


class Attn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        w = (q @ k.transpose(-2, -1)).softmax(-1)
        return self.proj(w @ v)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = Attn(d)

    def forward(self, x):
        return x + self.attn(self.ln(x))


class Net(nn.Module):
    def __init__(self, d=8, n=2):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x).mean(1)


def _where(g):
    return [split_location(n["loc"]) for n in g.nodes()]


def test_split_location():
    assert split_location("a/b.py:12") == ("a/b.py:12", "", "forward")
    assert split_location("a/b.py:12 in blocks.0.attn") == ("a/b.py:12", "blocks.0.attn", "forward")
    assert split_location("C:\\x y.py:3 in 0 (backward)") == ("C:\\x y.py:3", "0", "backward")
    assert split_location("b.py:4 (optimizer)") == ("b.py:4", "", "optimizer")
    assert split_location(None) == (None, "", "forward")


def test_training_step_nodes_name_modules_regions_and_parameters():
    fg.manual_seed(0)
    model = Net()
    opt = fg.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    @fg.compile
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = fg.randn(2, 5, 8), fg.tensor([0, 2])
    step(x, y)
    g = step.graph(x, y)
    where = _where(g)
    modules = {m for _, m, r in where if r == "forward"}
    named = {name for name, _ in model.named_modules()}
    # Every forward module path is one named_modules() gives (or the loss module, a second root).
    assert {"blocks.0.ln", "blocks.0.attn", "blocks.0.attn.qkv", "blocks.1.attn.proj", "head"} <= modules
    assert modules - named <= {"CrossEntropyLoss"}, modules - named
    assert "CrossEntropyLoss" in modules
    regions = [r for _, _, r in where]
    assert "backward" in regions and regions[-1] == "optimizer", regions
    # The regions follow the step's order: forward ops, then gradients, then the update.
    first_bwd = regions.index("backward")
    assert all(r == "forward" for r in regions[:first_bwd])
    assert all(r != "forward" for r in regions[first_bwd:])
    assert all(src and "test_graph_names.py:" in src for src, _, _ in where)
    # Parameters and optimizer state under their state_dict names.
    sd = g.state_dict()
    assert set(model.state_dict()) <= set(sd), sorted(sd)
    assert "blocks.1.attn.qkv.weight.exp_avg" in sd and "head.bias.exp_avg_sq" in sd
    for k, t in model.state_dict().items():
        assert sd[k].data_ptr() == t.data_ptr(), k
    text = g.dump()
    assert "input(arg 0)  # x\n" in text and "input(arg 1)  # y\n" in text  # the function's parameters
    assert "input(ref)  # blocks.0.attn.qkv.weight" in text
    assert "# forward: blocks.0.attn.qkv (Linear)" in text
    assert "# forward: blocks.1 (Block)" in text or "# forward: blocks.1.ln (LayerNorm)" in text
    assert "\n  # backward\n" in text and "\n  # optimizer\n" in text
    # The listing's node lines carry the source line only (the group is in the heading).
    assert not re.search(r"\(node \d+\)  # .* in blocks", text)
    dot = g.to_dot()
    assert 'label="blocks.0.attn (Attn)"' in dot and "subgraph cluster_" in dot


def test_compiled_module_and_eager_calls():
    fg.manual_seed(0)
    model = Net(n=1)
    f = fg.compile(model)
    x = fg.randn(2, 5, 8)
    f(x)
    modules = {m for _, m, _ in _where(f.graph(x))}
    assert {"blocks.0.attn.qkv", "blocks.0.ln", "head"} <= modules, modules
    assert set(f.graph(x).state_dict()) == set(model.state_dict())
    # Outside a capture nothing is recorded and backward works as before.
    loss = model(x).sum()
    loss.backward()
    assert model.head.weight.grad is not None


def test_explicit_graph_regions_and_names():
    fg.manual_seed(0)
    lin = nn.Linear(3, 2)
    g = fg.Graph()
    with g:
        x = fg.placeholder(fg.float32, shape=(None, 3), name="x")
        out = lin(x).sum()
        (dw,) = fg.autograd.grad(out, [lin.weight])
    where = _where(g)
    assert [m for _, m, r in where if r == "forward"][0] == ""  # the root module itself: no path
    assert any(r == "backward" for _, _, r in where)
    assert "input(ref)  # weight" in g.dump()
    assert dw is not None


def test_saved_graph_keeps_names(tmp_path):
    fg.manual_seed(0)
    model = Net(n=2)
    f = fg.compile(model.eval())
    x = fg.randn(2, 5, 8)
    f(x)
    path = tmp_path / "m.fgraph"
    f.graph(x).save(path, metadata={"model": "net"})
    g = fg.load_graph(path)
    assert g.metadata == {"model": "net"}
    assert set(g.state_dict()) == set(model.state_dict())
    assert "# forward: blocks.0.attn.qkv (Linear)" in g.dump()
    page = g.to_html(title="saved")
    data = json.loads(re.search(r'id="graph-data" type="application/json">(.*?)</script>', page).group(1))
    groups = {gr["id"]: gr for gr in data["groups"]}
    assert groups["forward/blocks.0"]["type"] == "Block" and not groups["forward/blocks.0"]["open"]
    assert groups["forward/blocks"]["type"] == "ModuleList" and groups["forward/blocks"]["open"]
    w = next(n for n in data["nodes"] if n["label"] == "blocks.0.attn.qkv.weight")
    assert w["group"] == "forward/blocks.0.attn.qkv"  # beside its first use
