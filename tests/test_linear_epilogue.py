"""Linear epilogues in inference graphs: ``linear → activation → add``
captured under ``no_grad`` runs as one ``linear_fused`` node (the ``epilogue``
graph pass) on a weight packed once; equal to eager bit for bit and to a NumPy
float64 reference within tolerance; graphs that compute gradients keep the ops
apart; a write to a parameter is seen on the next call."""

import math

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

ACTS = {
    None: lambda v: v,
    "relu": lambda v: np.maximum(v, 0.0),
    "gelu": lambda v: 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0))),
    "gelu_tanh": lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
}
FG_ACTS = {
    None: lambda t: t,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "tanh": fg.tanh,
    "sigmoid": fg.sigmoid,
}
UNFUSED = {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "add", "linear"}


def arr(t):
    return np.asarray(t.detach())


def ops(compiled, *args):
    return [n["op"] for n in compiled.graph(*args).nodes()]


def reference(x, w, b, act, r):
    x, w = x.astype(np.float64), w.astype(np.float64)
    y = x @ w.T + (0.0 if b is None else b.astype(np.float64))
    y = ACTS[act](y)
    return y if r is None else r.astype(np.float64) + y


# (x shape, out features): batch 1 (the small-product path), odd sizes, more
# than one k block (k > 256), products split over rows and over columns.
SHAPES = [((1, 45), 33), ((3, 29, 45), 33), ((40, 300), 70), ((64, 128), 256), ((2, 100, 96), 40)]


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_fused_chain_equals_eager(act, residual, dtype):
    rng = np.random.default_rng(7)
    npdt = np.float32 if dtype == fg.float32 else np.float64
    for i, (xs, n) in enumerate(SHAPES):
        k = xs[-1]
        fg.manual_seed(i)
        lin = nn.Linear(k, n, bias=i != 2).to(dtype).eval()
        x = fg.tensor(rng.standard_normal(xs).astype(npdt))
        r = fg.tensor(rng.standard_normal((*xs[:-1], n)).astype(npdt))

        def f(x, r, lin=lin):
            y = FG_ACTS[act](lin(x))
            return r + y if residual else y

        c = fg.compile(f)
        with fg.no_grad():
            want = arr(f(x, r))
            got = arr(c(x, r))
            got2 = arr(c(x, r))  # the second call reads the cached packed weight
            names = ops(c, x, r)
        assert names.count("linear_fused") == 1 and not UNFUSED & set(names), (xs, names)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got2, want)
        b = None if lin.bias is None else arr(lin.bias)
        ref = reference(arr(x), arr(lin.weight), b, act, arr(r) if residual else None)
        tol = 1e-5 if dtype == fg.float32 else 1e-12
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_gpt_block_fuses_every_linear():
    fg.manual_seed(0)
    d = 64

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.c_proj2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.reshape(b, t, 2, d // 2).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    m = Block().eval()
    c = fg.compile(m)
    for batch in (1, 3):
        x = fg.randn(batch, 33, d)
        with fg.no_grad():
            want, got = arr(m(x)), arr(c(x))
            names = ops(c, x)
        assert names.count("linear_fused") == 4 and "linear" not in names, names
        assert "gelu_tanh" not in names and "add" not in names, names
        np.testing.assert_array_equal(got, want)


def test_parameter_writes_are_seen():
    fg.manual_seed(1)
    m = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 40)).eval()
    c = fg.compile(m)
    x = fg.randn(50, 48)
    opt = fg.optim.SGD(m.parameters(), lr=0.1)
    with fg.no_grad():
        first = arr(c(x))
        np.testing.assert_array_equal(first, arr(m(x)))
        m[0].weight.mul_(0.5)
        m[2].weight.copy_(fg.randn(40, 64))
        np.testing.assert_array_equal(arr(c(x)), arr(m(x)))
    # an optimizer step writes the parameters in place
    m.train()
    m(x).square().mean().backward()
    opt.step()
    m.eval()
    with fg.no_grad():
        after = arr(c(x))
        np.testing.assert_array_equal(after, arr(m(x)))
    assert not np.array_equal(after, first)
    # a new parameter of the same shape (load_state_dict copies into the old one)
    m.load_state_dict({k: v * 2 for k, v in m.state_dict().items()})
    with fg.no_grad():
        np.testing.assert_array_equal(arr(c(x)), arr(m(x)))


def test_not_fused_when_the_intermediate_is_used_or_broadcast():
    fg.manual_seed(2)
    lin, lin2 = nn.Linear(40, 48).eval(), nn.Linear(40, 48).eval()
    x, row = fg.randn(30, 40), fg.randn(48)

    def returned(x):
        y = lin(x)
        return F.relu(y), y

    def broadcast_add(x):
        return row + F.silu(lin(x))

    def two_linears(x):
        return lin(x) + lin2(x)

    for f in (returned, broadcast_add, two_linears):
        c = fg.compile(f)
        with fg.no_grad():
            got, want = c(x), f(x)
            names = ops(c, x)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(arr(a), arr(b))
        if f is returned:
            # relu reads a value the graph returns: it stays a node of its own
            assert names.count("linear_fused") == 1 and len(names) == 2, names
        elif f is broadcast_add:
            # the add broadcasts: only the activation is fused
            assert names.count("linear_fused") == 1 and "silu" not in names and len(names) == 2, names
        else:
            assert names.count("linear_fused") == 2 and "add" not in names, names


def test_graphs_with_gradients_stay_unfused():
    fg.manual_seed(3)
    m = nn.Sequential(nn.Linear(20, 30), nn.Tanh(), nn.Linear(30, 5))
    c = fg.compile(m)
    x = fg.randn(17, 20)
    names = ops(c, x)
    assert "linear_fused" not in names and names.count("linear") == 2, names
    c(x).sum().backward()
    assert m[0].weight.grad is not None


def test_pass_can_be_switched_off():
    old = fg.set_graph_passes(epilogue=False)
    try:
        fg.manual_seed(4)
        m = nn.Sequential(nn.Linear(20, 30), nn.GELU(), nn.Linear(30, 5)).eval()
        c = fg.compile(m)
        x = fg.randn(17, 20)
        with fg.no_grad():
            names = ops(c, x)
            np.testing.assert_array_equal(arr(c(x)), arr(m(x)))
        assert "linear_fused" not in names and names.count("linear") == 2, names
    finally:
        fg.set_graph_passes(**old)


def test_saved_graph_with_fused_nodes(tmp_path):
    fg.manual_seed(5)
    lin = nn.Linear(32, 32).eval()

    def f(x):
        return x + F.gelu(lin(x))

    c = fg.compile(f)
    x = fg.randn(40, 32)
    with fg.no_grad():
        c(x)
        g = c.graph(x)
        assert [n["op"] for n in g.nodes()] == ["linear_fused"]
        g.save(tmp_path / "mlp.fgraph")
        loaded = fg.load_graph(tmp_path / "mlp.fgraph")
        np.testing.assert_array_equal(arr(loaded(x)), arr(f(x)))


def test_onnx_export_keeps_standard_ops(tmp_path):
    onnx = pytest.importorskip("onnx", reason="fg.onnx.export needs the onnx package")
    fg.manual_seed(6)
    m = nn.Sequential(nn.Linear(16, 24), nn.ReLU(), nn.Linear(24, 8)).eval()
    path = tmp_path / "mlp.onnx"
    fg.onnx.export(m, fg.randn(20, 16), str(path))
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    kinds = [n.op_type for n in model.graph.node]
    assert kinds.count("Gemm") == 2 and "Relu" in kinds, kinds
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node), kinds
