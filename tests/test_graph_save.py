"""Saved graphs: ``Graph.save`` / ``fg.load_graph``, a fresh process that
never sees the building code, the Rust-only runner, and refusal of bad files."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest


def arr(t):
    return np.asarray(t.detach())


def _mlp(seed=0):
    fg.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


def _saved_mlp(tmp_path, dynamic=False):
    m = _mlp().eval()
    f = fg.compile(m, dynamic=dynamic)
    x = fg.randn(5, 6)
    f(x)
    path = tmp_path / "mlp.fgraph"
    f.graph(x).save(path, metadata={"model": "mlp"})
    return m, path


def test_round_trip_matches_the_model(tmp_path):
    m, path = _saved_mlp(tmp_path)
    g = fg.load_graph(path)
    x = fg.randn(5, 6)
    np.testing.assert_array_equal(arr(g(x)), arr(m(x)))
    assert g.metadata == {"model": "mlp"}
    # The loaded graph holds its own copies of the weights.
    weights = list(g.state_dict().values())
    assert len(weights) == 6
    ref = [p for p in m.parameters()]
    for w, p in zip(weights, ref, strict=True):
        np.testing.assert_array_equal(arr(w), arr(p))
    before = arr(weights[0]).copy()
    with fg.no_grad():
        ref[0].add_(1.0)
    np.testing.assert_array_equal(arr(weights[0]), before)
    assert not np.array_equal(arr(ref[0]), before)


def test_symbolic_batch_survives_saving(tmp_path):
    m, path = _saved_mlp(tmp_path, dynamic=True)
    g = fg.load_graph(path)
    for n in (1, 4, 11):
        x = fg.randn(n, 6)
        np.testing.assert_allclose(arr(g(x)), arr(m(x)), rtol=1e-6, atol=1e-6)


def test_fresh_process_runs_without_the_building_code(tmp_path):
    m, path = _saved_mlp(tmp_path)
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code = (
        "import sys, numpy as np, ferrograd as fg\n"
        "g = fg.load_graph(sys.argv[1])\n"
        "np.save(sys.argv[3], np.asarray(g(fg.tensor(np.load(sys.argv[2])))))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        check=True,
        cwd=tmp_path,
        timeout=120,
    )
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), arr(m(fg.tensor(x))))


def _runner() -> Path | None:
    env = os.environ.get("FG_RUN_GRAPH_BIN")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parents[1]
    for profile in ("release", "debug"):
        p = root / "target" / profile / "examples" / "run_graph"
        if p.exists():
            return p
    return None


def test_rust_only_runner_matches(tmp_path):
    exe = _runner()
    if exe is None:
        pytest.skip(
            "the Rust runner is not built (cargo build --release --no-default-features --example run_graph; "
            "scripts/test.sh builds it and sets FG_RUN_GRAPH_BIN)"
        )
    m, path = _saved_mlp(tmp_path, dynamic=True)
    x = np.random.default_rng(1).standard_normal((7, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run(
        [str(exe), str(path), str(tmp_path / "x.npy"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "float32 [7, 3]" in out.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output0.npy"), arr(m(fg.tensor(x))))
    # A corrupt file is refused with a message and exit status 2, not a crash.
    bad = tmp_path / "bad.fgraph"
    bad.write_bytes(path.read_bytes()[:-3])
    out = subprocess.run([str(exe), str(bad), str(tmp_path / "x.npy")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "load_graph" in out.stderr, (out.returncode, out.stderr)


def test_explicit_graph_with_outputs(tmp_path):
    g = fg.Graph()
    with g:
        a = fg.placeholder(fg.float32, shape=(None,), name="a")
        b = fg.placeholder(fg.float32, shape=(None,), name="b")
        c = a * b
        da, db = fg.gradients(c.sum(), [a, b])
    with pytest.raises(ValueError, match="outputs="):
        g.save(tmp_path / "no.fgraph")
    g.save(tmp_path / "tf1.fgraph", outputs=[c, da, db])
    h = fg.load_graph(tmp_path / "tf1.fgraph")
    out, ga, gb = h([15.0], [20.0])
    assert (arr(out).tolist(), arr(ga).tolist(), arr(gb).tolist()) == ([300.0], [20.0], [15.0])
    out2 = h(a=[1.0, 2.0, 3.0], b=[4.0, 5.0, 6.0])[0]
    assert arr(out2).tolist() == [4.0, 10.0, 18.0]
    with pytest.raises(TypeError, match="no argument named"):
        h(q=[1.0])


def test_fused_graph_with_infinities(tmp_path):
    @fg.compile
    def f(x, y):
        s = x * y + 1.0
        return s.masked_fill(s > 2.0, float("-inf")).softmax(dim=-1)

    x, y = fg.randn(4, 5), fg.randn(4, 5)
    ref = f(x, y)
    graph = f.graph(x, y)
    assert any(n["op"] == "fused" for n in graph.nodes())
    graph.save(tmp_path / "f.fgraph")
    np.testing.assert_array_equal(arr(fg.load_graph(tmp_path / "f.fgraph")(x, y)), arr(ref))


def test_control_flow_survives_saving(tmp_path):
    @fg.compile
    def f(x):
        y = fg.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        return fg.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 1.5 + 1.0, y)

    for v in ([1.0, 2.0], [-3.0, 0.5]):
        f(fg.tensor(v))
    x = fg.tensor([1.0, 2.0])
    f.graph(x).save(tmp_path / "cf.fgraph")
    g = fg.load_graph(tmp_path / "cf.fgraph")
    for v in ([1.0, 2.0], [-3.0, 0.5], [0.1, 0.2]):
        want = f(fg.tensor(v))
        got = g(fg.tensor(v))
        want = want[0] if isinstance(want, (tuple, list)) else want
        np.testing.assert_array_equal(arr(got), arr(want))


def test_saved_training_step_trains_its_own_weights(tmp_path):
    x = fg.randn(10, 6)
    y = fg.randint(0, 3, (10,))
    em, cm = _mlp(1), _mlp(1)
    eo = fg.optim.SGD(em.parameters(), lr=0.1)
    co = fg.optim.SGD(cm.parameters(), lr=0.1)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    cstep = fg.compile(lambda x, y: step(cm, co, x, y))
    cstep(x, y)
    step(em, eo, x, y)
    cstep.graph(x, y).save(tmp_path / "step.fgraph")
    g = fg.load_graph(tmp_path / "step.fgraph")
    slots = g.scalar_slots
    scalars = [0.1 if s == "lr" else 0.0 for s in slots]
    if slots:
        with pytest.raises(ValueError, match="scalar"):
            g(x, y)
    for _ in range(3):
        le = step(em, eo, x, y)
        lg = g(x, y, scalars=scalars)
        lg = lg[0] if isinstance(lg, tuple) else lg
        np.testing.assert_allclose(arr(lg), arr(le), rtol=1e-5)
    params = [t for k, t in g.state_dict().items()][: len(list(em.parameters()))]
    for pe, pg in zip(em.parameters(), params, strict=True):
        np.testing.assert_allclose(arr(pg), arr(pe), rtol=1e-5, atol=1e-6)


def test_weights_are_a_real_safetensors_file(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="safetensors is not installed")
    m, path = _saved_mlp(tmp_path)
    tensors = st.load_file(str(path))
    mine = [arr(t) for t in fg.load_graph(path).state_dict().values()]
    assert sorted(a.shape for a in tensors.values()) == sorted(a.shape for a in mine)


# --------------------------------------------------------------------------- bad files


def _header(path):
    b = Path(path).read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8 : 8 + n]), b[8 + n :]


def _write(path, header, data):
    h = json.dumps(header).encode()
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + data)


def test_truncated_files_are_refused(tmp_path):
    _, path = _saved_mlp(tmp_path)
    b = path.read_bytes()
    cuts = sorted(set(range(0, 64)) | set(range(0, len(b), max(1, len(b) // 300))) | {len(b) - 1})
    for n in cuts:
        with pytest.raises(fg.GraphFileError):
            fg.load_graph(b[:n])
    assert fg.load_graph(b) is not None


def test_version_format_and_tampering_are_refused(tmp_path):
    _, path = _saved_mlp(tmp_path)
    header, data = _header(path)
    cases = {}
    h = json.loads(json.dumps(header))
    h["__metadata__"]["version"] = "99"
    cases["version"] = (h, data, "version")
    h = json.loads(json.dumps(header))
    h["__metadata__"]["format"] = "something.else"
    cases["format"] = (h, data, "format")
    h = json.loads(json.dumps(header))
    h["t0"]["shape"] = [10**12, 10**12]
    cases["huge"] = (h, data, "too large|bytes")
    h = json.loads(json.dumps(header))
    h["t0"]["dtype"] = "F64"
    cases["dtype"] = (h, data, "bytes|reads")
    h = json.loads(json.dumps(header))
    h["t0"]["data_offsets"] = [0, 10**15]
    cases["offsets"] = (h, data, "bytes")
    h = json.loads(json.dumps(header))
    gj = json.loads(h["__metadata__"]["graph"])
    gj["nodes"][0]["inputs"] = [10**6]
    h["__metadata__"]["graph"] = json.dumps(gj)
    cases["dangling"] = (h, data, "before it is defined|does not exist")
    h = json.loads(json.dumps(header))
    gj = json.loads(h["__metadata__"]["graph"])
    gj["nodes"][0]["call"] = {"Vjp": {}}
    h["__metadata__"]["graph"] = json.dumps(gj)
    cases["vjp"] = (h, data, "graph")
    h = json.loads(json.dumps(header))
    del h["__metadata__"]
    cases["plain safetensors"] = (h, data, "__metadata__")
    for name, (h, d, msg) in cases.items():
        p = tmp_path / f"{name}.fgraph"
        _write(p, h, d)
        with pytest.raises(fg.GraphFileError, match=msg):
            fg.load_graph(p)
    with pytest.raises(fg.GraphFileError):
        fg.load_graph(b"\x00" * 64)
    with pytest.raises(RuntimeError, match="missing.fgraph"):
        fg.load_graph(tmp_path / "missing.fgraph")


def test_shape_tampering_is_caught_when_loading(tmp_path):
    _, path = _saved_mlp(tmp_path)
    header, data = _header(path)
    gj = json.loads(header["__metadata__"]["graph"])
    # Claim the first node's output has another shape: planning must refuse it.
    out = gj["nodes"][0]["outputs"][0]
    gj["values"][out]["shape"] = [5, 17]
    header["__metadata__"]["graph"] = json.dumps(gj)
    p = tmp_path / "shape.fgraph"
    _write(p, header, data)
    with pytest.raises(fg.GraphFileError, match="does not type-check.*captured graph has shape"):
        fg.load_graph(p)


_no_gpu = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)


@_no_gpu
def test_gpu_graph_saves_and_loads_on_either_device(tmp_path):
    """A graph captured on the GPU saves (its weights read back once), loads on the GPU
    by default, and on the CPU when asked — its own factories follow it there."""
    m = _mlp(2).eval().to("gpu")

    def fn(x):
        return m(x) + fg.ones(3, device=x.device) * 0.5

    f = fg.compile(fn)
    x = np.random.default_rng(4).standard_normal((5, 6)).astype(np.float32)
    xg = fg.tensor(x, device="gpu")
    want = f(xg).cpu().numpy()
    g0 = f.graph(xg)
    assert g0.device == "gpu"
    g0.save(tmp_path / "gpu.fgraph")
    # Saving read the weights without moving the model.
    assert all(str(p.device) == "gpu" for p in m.parameters())

    g = fg.load_graph(tmp_path / "gpu.fgraph")
    assert g.device == "gpu"
    assert all(str(t.device) == "gpu" for t in g.state_dict().values())
    out = g(xg)
    out = out[0] if isinstance(out, tuple) else out
    assert str(out.device) == "gpu"
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-6)

    gc = fg.load_graph((tmp_path / "gpu.fgraph").read_bytes(), device="cpu")
    assert gc.device == "cpu"
    out = gc(fg.tensor(x))
    out = out[0] if isinstance(out, tuple) else out
    assert str(out.device) == "cpu"
    np.testing.assert_allclose(arr(out), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="device"):
        gc(xg)

    exe = _runner()
    if exe is not None:
        np.save(tmp_path / "x.npy", x)
        res = subprocess.run(
            [str(exe), str(tmp_path / "gpu.fgraph"), str(tmp_path / "x.npy"), "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        np.testing.assert_allclose(np.load(tmp_path / "out" / "output0.npy"), want, rtol=1e-4, atol=1e-5)


@_no_gpu
def test_cpu_graph_loads_onto_the_gpu(tmp_path):
    m, path = _saved_mlp(tmp_path)
    x = fg.randn(5, 6)
    g = fg.load_graph(path, device="gpu")
    assert g.device == "gpu"
    out = g(x.to("gpu"))
    out = out[0] if isinstance(out, tuple) else out
    assert str(out.device) == "gpu"
    np.testing.assert_allclose(out.cpu().numpy(), arr(m(x)), rtol=1e-4, atol=1e-5)
    assert fg.load_graph(path).device == "cpu"
