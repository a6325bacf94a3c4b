"""Smoke test of an installed ferrograd (run from outside the source tree):
imports, ops, autograd, a training step, a checkpoint and a saved graph."""

from __future__ import annotations

import os
import sys
import tempfile

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np


def main() -> int:
    here = os.path.dirname(os.path.abspath(fg.__file__))
    assert "site-packages" in here, f"ferrograd imported from {here}, not an installed package"
    a = fg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (a @ a.T).tanh().sum()
    y.backward()
    assert a.grad is not None and a.grad.shape == (2, 2)
    np.testing.assert_allclose(np.asarray((a + 1).detach()), np.array([[2, 3], [4, 5]], np.float32))
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = fg.optim.Adam(model.parameters(), lr=1e-2)
    x, t = fg.randn(16, 4), fg.randint(0, 3, (16,))
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "ck.safetensors")
        fg.save(model.state_dict(), ck)
        other = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        other.load_state_dict(fg.load(ck))
        np.testing.assert_array_equal(np.asarray(other(x).detach()), np.asarray(model(x).detach()))
        f = fg.compile(model.eval())
        f(x)
        gp = os.path.join(d, "model.fgraph")
        f.graph(x).save(gp)
        np.testing.assert_array_equal(np.asarray(fg.load_graph(gp)(x)), np.asarray(model(x).detach()))
        # The drawing's layout library and script ship inside the wheel.
        page = f.graph(x).to_html(os.path.join(d, "g.html"))
        assert "dagre.layout = " in page and "nestedLayout" in page and 'id="graph-data"' in page
    print(
        f"smoke test passed: ferrograd from {here}, cpu level {fg.cpu_level()}, final loss {losses[-1]:.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
