"""Saved graphs written by an earlier version keep loading and computing the
same results (``scripts/make_graph_fixtures.py`` wrote them, with the inputs
and outputs of each run)."""

from __future__ import annotations

from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "graphs"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.fgraph"))


def test_the_fixtures_are_there():
    assert {
        "mlp_dynamic",
        "convnet",
        "gpt_block",
        "adam_step",
        "rnn_step",
        "control_flow",
        "many_ops",
    } <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_an_old_saved_graph_loads_and_computes_what_it_did(name):
    g = fg.load_graph(FIXTURES / f"{name}.fgraph")
    assert g.metadata["fixture"] == name
    with np.load(FIXTURES / f"{name}.npz") as z:
        data = {k: z[k] for k in z.files}
    calls = sorted({int(k[4:].split("_")[0]) for k in data if k.startswith("call")})
    for c in calls:
        inputs = [
            fg.tensor(data[f"call{c}_in{k}"]) for k in range(sum(f"call{c}_in{j}" in data for j in range(64)))
        ]
        kw = {"scalars": data[f"call{c}_scalars"].tolist()} if g.scalar_slots else {}
        out = g(*inputs, **kw)
        outs = list(out) if isinstance(out, tuple) else [out]
        want = [data[f"call{c}_out{k}"] for k in range(sum(f"call{c}_out{j}" in data for j in range(64)))]
        assert len(outs) == len(want), (name, c, len(outs), len(want))
        for k, (o, w) in enumerate(zip(outs, want, strict=True)):
            got = np.asarray(o)
            assert got.shape == w.shape and got.dtype == w.dtype, (
                name,
                c,
                k,
                got.shape,
                w.shape,
                got.dtype,
                w.dtype,
            )
            np.testing.assert_allclose(got, w, rtol=2e-5, atol=2e-6, err_msg=f"{name}: run {c}, output {k}")
    # A training step updated the weights it holds as it did when written.
    state = list(g.state_dict().items())
    n = sum(k.startswith("state") and not k.endswith("_name") for k in data)
    assert len(state) == n
    for k, (key, t) in enumerate(state):
        assert key == str(data[f"state{k}_name"])
        np.testing.assert_allclose(
            np.asarray(t), data[f"state{k}"], rtol=2e-5, atol=2e-6, err_msg=f"{name}: {key}"
        )
