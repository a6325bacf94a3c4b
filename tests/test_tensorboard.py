"""TensorBoard logs of captured graphs and scalars, read back with TensorBoard's own reader."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import pytest

pytest.importorskip("tensorboard", reason="the tensorboard package is not installed (optional)")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def test_graph_and_scalars_read_back(tmp_path):
    fg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = fg.optim.SGD(m.parameters(), lr=0.1)

    @fg.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = fg.randn(6, 4), fg.randint(0, 3, (6,))
    losses = [step(x, y).item() for _ in range(5)]
    g = step.graph(x, y)
    with fg.tensorboard.SummaryWriter(tmp_path) as w:
        w.add_graph(g)
        for i, v in enumerate(losses):
            w.add_scalar("train/loss", v, i)
        w.add_scalar("train/lr", fg.tensor(0.1), 0)
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    got = [(e.step, e.value) for e in acc.Scalars("train/loss")]
    assert [s for s, _ in got] == list(range(5))
    assert [v for _, v in got] == pytest.approx(losses, rel=1e-6)
    assert acc.Scalars("train/lr")[0].value == pytest.approx(0.1)
    gd = acc.Graph()
    ops = [n.op for n in gd.node]
    assert ops.count("Placeholder") == 2
    assert len(gd.node) == g.num_nodes + len(g.inputs()) + len(g.outputs)
    # Every edge names a node of the graph, and shapes are recorded.
    names = {n.name for n in gd.node}
    for n in gd.node:
        for i in n.input:
            assert i.split(":")[0] in names, (n.name, i)
    lin = next(n for n in gd.node if n.op == "linear")
    dims = [d.size for d in lin.attr["_output_shapes"].list.shape[0].dim]
    assert dims == [6, 8]
    # Name scopes follow the model: the first Linear's op and its parameters
    # under "0/", the gradients under "backward/", the update under "optimizer/".
    assert lin.name.startswith("0/linear_"), lin.name
    assert b"test_tensorboard.py" in lin.attr["source"].s
    assert lin.attr["module"].s == b"0"
    assert {"0/weight", "0/bias", "2/weight", "2/bias"} <= names
    assert lin.input[1:] == ["0/weight", "0/bias"]
    assert any(n.startswith("backward/") for n in names)
    sgd = [n for n in gd.node if n.name.startswith("optimizer/")]
    assert sgd and all("sgd" in n.op for n in sgd), [n.op for n in sgd]
