"""``ferrograd.jit``: ``torch.jit`` as scripts use it (trace, script, save/load, decorators).

Traced and scripted modules run captured graphs of the same kernels eager runs, so
their outputs are compared with eager's bitwise; eager itself is checked against
float64 NumPy references.
"""

from __future__ import annotations

import io
import typing
import warnings

import ferrograd as fg
import ferrograd.nn as nn
import numpy as np
import pytest


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(5, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(fg.relu(self.fc1(x)))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = self.pool(fg.relu(self.bn(self.conv(x))))
        return self.fc(x.flatten(1))


class Branchy(nn.Module):
    """Control flow on a tensor's value."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def _np(t):
    return np.asarray(t.numpy(), dtype=np.float64)


def _mlp_reference(m: MLP, x: np.ndarray) -> np.ndarray:
    w1, b1 = _np(m.fc1.weight), _np(m.fc1.bias)
    w2, b2 = _np(m.fc2.weight), _np(m.fc2.bias)
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


@pytest.fixture
def mlp():
    fg.manual_seed(1)
    return MLP().eval()


@pytest.fixture
def cnn():
    fg.manual_seed(2)
    m = CNN()
    with fg.no_grad():  # non-trivial running statistics
        m.bn.running_mean.copy_(fg.randn(4) * 0.1)
        m.bn.running_var.copy_(fg.rand(4) + 0.5)
    return m.eval()


def test_mlp_trace_and_script_match_eager(mlp):
    x = fg.randn(4, 5)
    eager = mlp(x)
    np.testing.assert_allclose(_np(eager), _mlp_reference(mlp, _np(x)), rtol=1e-5, atol=1e-6)
    traced = fg.jit.trace(mlp, x)
    scripted = fg.jit.script(mlp)
    assert isinstance(traced, fg.jit.TracedModule) and isinstance(traced, fg.jit.ScriptModule)
    assert isinstance(scripted, fg.jit.ScriptModule)
    np.testing.assert_array_equal(traced(x).numpy(), eager.numpy())
    np.testing.assert_array_equal(scripted(x).numpy(), eager.numpy())
    # The module's own state, by reference.
    assert list(traced.state_dict()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [id(p) for p in traced.parameters()] == [id(p) for p in mlp.parameters()]
    assert "linear" in traced.code and "fc1.weight" in traced.code
    by_method = fg.jit.trace_module(mlp, {"forward": x})
    np.testing.assert_array_equal(by_method(x).numpy(), eager.numpy())


def test_cnn_trace_and_script_match_eager(cnn):
    x = fg.randn(3, 2, 8, 8)
    eager = cnn(x)
    traced = fg.jit.trace(cnn, (x,))
    scripted = fg.jit.script(cnn)
    np.testing.assert_array_equal(traced(x).numpy(), eager.numpy())
    np.testing.assert_array_equal(scripted(x).numpy(), eager.numpy())
    # Another batch of the same shape runs the same graph.
    x2 = fg.randn(3, 2, 8, 8)
    np.testing.assert_array_equal(traced(x2).numpy(), cnn(x2).numpy())


@pytest.mark.parametrize("kind", ["trace", "script"])
def test_save_load_fresh_object(tmp_path, cnn, kind):
    x = fg.randn(3, 2, 8, 8)
    eager = cnn(x).numpy()
    if kind == "trace":
        m = fg.jit.trace(cnn, x)
    else:
        m = fg.jit.script(cnn)
        m(x)  # script saves the graph of its last call's inputs
    path = tmp_path / "m.pt"
    fg.jit.save(m, str(path))
    loaded = fg.jit.load(str(path), map_location="cpu")
    assert isinstance(loaded, fg.jit.LoadedModule)
    np.testing.assert_array_equal(loaded(x).numpy(), eager)
    assert set(loaded.state_dict()) == set(cnn.state_dict()) - {"bn.num_batches_tracked"}
    assert not loaded(x).requires_grad
    # A binary file object works too, and so does saving the loaded module again.
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    np.testing.assert_array_equal(fg.jit.load(buf)(x).numpy(), eager)
    loaded.save(tmp_path / "again.pt")
    np.testing.assert_array_equal(fg.jit.load(tmp_path / "again.pt")(x).numpy(), eager)


def test_loaded_load_state_dict(tmp_path, mlp):
    x = fg.randn(4, 5)
    fg.jit.trace(mlp, x).save(tmp_path / "m.pt")
    loaded = fg.jit.load(tmp_path / "m.pt")
    fg.manual_seed(7)
    other = MLP().eval()
    loaded.load_state_dict(other.state_dict())
    np.testing.assert_allclose(_np(loaded(x)), _mlp_reference(other, _np(x)), rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError, match="missing keys"):
        loaded.load_state_dict({"fc1.weight": other.fc1.weight})


def test_trace_freezes_control_flow_script_keeps_it():
    m = Branchy()
    pos = fg.ones(3)
    neg = fg.tensor([-3.0, -1.0, 0.5])
    with pytest.warns(fg.jit.TracerWarning, match="value is used in Python"):
        traced = fg.jit.trace(m, pos)
    scripted = fg.jit.script(m)
    # Trace: the branch the example took (x * 2), whatever the values.
    np.testing.assert_array_equal(traced(neg).numpy(), _np(neg) * 2)
    np.testing.assert_array_equal(traced(pos).numpy(), _np(pos) * 2)
    # Script: Python control flow keeps working.
    np.testing.assert_array_equal(scripted(neg).numpy(), _np(neg) - 1)
    np.testing.assert_array_equal(scripted(pos).numpy(), _np(pos) * 2)
    # The frozen trace saves and loads with its branch.
    buf = io.BytesIO()
    traced.save(buf)
    buf.seek(0)
    np.testing.assert_array_equal(fg.jit.load(buf)(neg).numpy(), _np(neg) * 2)
    # Script cannot save a call that ran eagerly.
    with pytest.raises(RuntimeError, match="depends on tensor values"):
        scripted.save(io.BytesIO())


def test_trace_other_shape_recaptures(mlp):
    x = fg.randn(4, 5)
    traced = fg.jit.trace(mlp, x)
    y = fg.randn(7, 5)
    np.testing.assert_array_equal(traced(y).numpy(), mlp(y).numpy())
    # The saved graph stays the example's.
    buf = io.BytesIO()
    traced.save(buf)
    buf.seek(0)
    loaded = fg.jit.load(buf)
    with pytest.raises(ValueError, match=r"saved for inputs \(float32\[4, 5\]\)"):
        loaded(y)


def test_traced_module_trains_like_eager():
    fg.manual_seed(3)
    a = MLP()
    b = MLP()
    b.load_state_dict(a.state_dict())
    traced = fg.jit.trace(b, fg.randn(6, 5))
    opt_a = fg.optim.SGD(a.parameters(), lr=0.1)
    opt_b = fg.optim.SGD(traced.parameters(), lr=0.1)
    for _ in range(3):
        x = fg.randn(6, 5)
        for m, opt in ((a, opt_a), (traced, opt_b)):
            opt.zero_grad()
            (m(x) ** 2).mean().backward()
            opt.step()
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        np.testing.assert_allclose(pb.numpy(), pa.numpy(), rtol=1e-6, atol=1e-7)


def test_eval_after_trace_and_freeze():
    fg.manual_seed(4)
    m = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    x = fg.randn(3, 5)
    traced = fg.jit.trace(m, x)  # in training mode
    traced.eval()
    assert not m.training
    np.testing.assert_array_equal(traced(x).numpy(), m(x).numpy())
    frozen = fg.jit.freeze(traced)
    out = frozen(x)
    assert not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), m(x).numpy())
    opt = fg.jit.optimize_for_inference(fg.jit.script(m.train()))
    assert not m.training
    np.testing.assert_array_equal(opt(x).numpy(), m(x).numpy())
    with pytest.raises(RuntimeError, match="training mode"):
        fg.jit.freeze(fg.jit.script(m.train()))


def test_is_tracing_and_is_scripting():
    seen: list[bool] = []

    def f(x):
        seen.append(fg.jit.is_tracing())
        return x + 1

    assert not fg.jit.is_tracing() and not fg.jit.is_scripting()
    traced = fg.jit.trace(f, fg.ones(2))
    assert seen and all(seen)
    seen.clear()
    np.testing.assert_array_equal(traced(fg.zeros(2)).numpy(), np.ones(2))
    assert not fg.jit.is_tracing()
    s = fg.jit.script(f)
    seen.clear()
    np.testing.assert_array_equal(s(fg.zeros(3)).numpy(), np.ones(3))
    assert seen == [False]
    assert isinstance(traced, fg.jit.ScriptFunction) and isinstance(s, fg.jit.ScriptFunction)


def test_decorators_annotate_final_fork():
    class M(nn.Module):
        k: fg.jit.Final[int] = 3

        @fg.jit.ignore
        def helper(self, x):
            return x * self.k

        @fg.jit.ignore(drop=True)
        def dropped(self, x):
            return x + 1

        @fg.jit.unused
        def unused(self, x):
            return x - 1

        @fg.jit.export
        def extra(self, x):
            return x * 10

        def forward(self, x):
            y = fg.jit.annotate(typing.List[int], [])  # noqa: UP006 - the spelling scripts use
            assert y == []
            return self.helper(x)

    m = M()
    s = fg.jit.script(m)
    x = fg.tensor([1.0, 2.0])
    np.testing.assert_array_equal(s(x).numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(s.extra(x).numpy(), [10.0, 20.0])
    np.testing.assert_array_equal(s.dropped(x).numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(s.unused(x).numpy(), [0.0, 1.0])
    assert M.extra._jit_export and M.unused._jit_unused and M.helper._jit_ignore
    assert typing.get_type_hints(M)["k"] == typing.Final[int]
    fut = fg.jit.fork(lambda a, b: a * b, x, 4.0)
    assert fut.done()
    np.testing.assert_array_equal(fg.jit.wait(fut).numpy(), [4.0, 8.0])
    assert fg.jit.script(fg.jit.script(m)).extra is not None
    assert fg.jit.script(M) is M


def test_errors(tmp_path, mlp):
    with pytest.raises(RuntimeError, match="has not been called yet"):
        fg.jit.script(mlp).save(tmp_path / "x.pt")
    with pytest.raises(TypeError, match="jit.save: expected what jit.trace"):
        fg.jit.save(mlp, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="example_inputs"):
        fg.jit.trace(mlp)
    with pytest.raises(TypeError, match="jit.trace: expected a module or a function"):
        fg.jit.trace(3, fg.ones(1))
    with pytest.raises(TypeError, match="jit.wait"):
        fg.jit.wait(5)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a graph")
    with pytest.raises(fg.GraphFileError):
        fg.jit.load(bad)
    fg.jit.trace(mlp, fg.randn(2, 5)).save(tmp_path / "m.pt")
    loaded = fg.jit.load(tmp_path / "m.pt")
    with pytest.raises(ValueError, match=r"float32\[2, 5\].*float32\[2, 4\]"):
        loaded(fg.randn(2, 4))
    with pytest.raises(TypeError, match="expects dtype float32, got float64"):
        loaded(fg.randn(2, 5, dtype=fg.float64))
    with pytest.raises(TypeError, match="takes 1 arguments, 2 were given"):
        loaded(fg.randn(2, 5), fg.randn(2, 5))
    with pytest.raises(TypeError, match="map_location as a function"):
        fg.jit.load(tmp_path / "m.pt", map_location=lambda s, loc: s)
    # A loaded graph keeps the mode it was captured in, and says so.
    fg.manual_seed(5)
    d = nn.Sequential(nn.Linear(5, 4), nn.Dropout(0.5))
    fg.jit.trace(d.eval(), fg.randn(2, 5)).save(tmp_path / "d.pt")
    ld = fg.jit.load(tmp_path / "d.pt")
    assert not ld.training
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ld.eval()
    with pytest.warns(UserWarning, match="captured in eval mode"):
        ld.train()


def test_loaded_keeps_output_structure():
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            h = self.fc(x)
            return h.sum(1), {"hidden": h, "relu": fg.relu(h), "n": 3}

    fg.manual_seed(6)
    m = Two()
    x = fg.randn(2, 4)
    s, d = m(x)
    buf = io.BytesIO()
    fg.jit.trace(m, x).save(buf)
    buf.seek(0)
    ls, ld = fg.jit.load(buf)(x)
    assert sorted(ld) == ["hidden", "n", "relu"] and ld["n"] == 3
    np.testing.assert_array_equal(ls.numpy(), s.numpy())
    np.testing.assert_array_equal(ld["hidden"].numpy(), d["hidden"].numpy())
    np.testing.assert_array_equal(ld["relu"].numpy(), d["relu"].numpy())
    np.testing.assert_allclose(_np(ld["relu"]), np.maximum(_np(d["hidden"]), 0))


def test_load_on_gpu(tmp_path, cnn):
    if not fg.gpu.is_available():
        pytest.skip(f"no WebGPU device: {fg.gpu.unavailable_reason()}")
    x = fg.randn(3, 2, 8, 8)
    fg.jit.trace(cnn, x).save(tmp_path / "m.pt")
    loaded = fg.jit.load(tmp_path / "m.pt", map_location="gpu")
    out = loaded(x.to("gpu"))
    assert out.device.type == "gpu"
    np.testing.assert_allclose(out.cpu().numpy(), cnn(x).numpy(), rtol=1e-4, atol=1e-5)
