"""WebGPU bundles (``Graph.export_webgpu``).

A compiled GPU graph is exported as WGSL modules + manifest + data, then run
in a separate process by ``examples/run_webgpu_bundle.py`` with wgpu-py and
NumPy alone (the process asserts it never imported ferrograd). Its outputs
must match ferrograd's on the same inputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

LOADER = Path(__file__).resolve().parents[1] / "examples" / "run_webgpu_bundle.py"
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run_bundle(tmp_path: Path, bundle: Path, inputs: dict[str, np.ndarray], runs: int = 1) -> list[dict]:
    """Run the bundle `runs` times in a fresh process without ferrograd; the outputs of each run."""
    pytest.importorskip("wgpu", reason="wgpu-py (in the test extra) is needed to load bundles")
    np.savez(tmp_path / "in.npz", **inputs)
    code = (
        "import runpy, sys\n"
        "m = runpy.run_path(sys.argv[1])\n"
        "import numpy as np\n"
        "b = m['WebGPUBundle'](sys.argv[2])\n"
        "f = np.load(sys.argv[3])\n"
        "xs = [f[s['name']] for s in b.manifest['inputs']]\n"
        "res = {}\n"
        "for r in range(int(sys.argv[5])):\n"
        "    for s, o in zip(b.manifest['outputs'], b.run(*xs)):\n"
        "        res[f'{r}/' + s['name']] = o\n"
        "np.savez(sys.argv[4], **res)\n"
        "assert 'ferrograd' not in sys.modules, 'the loader imported ferrograd'\n"
    )
    out = tmp_path / "out.npz"
    p = subprocess.run(
        [sys.executable, "-c", code, str(LOADER), str(bundle), str(tmp_path / "in.npz"), str(out), str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    with np.load(out) as f:
        return [{k.split("/", 1)[1]: f[k] for k in f.files if k.startswith(f"{r}/")} for r in range(runs)]


def _check_files(bundle: Path, manifest: dict) -> None:
    assert json.loads((bundle / "manifest.json").read_text()) == manifest
    for name in manifest["shaders"]:
        assert (bundle / name).read_text().strip()
    size = (bundle / manifest["data"]).stat().st_size
    for b in manifest["buffers"]:
        assert b["size"] % 4 == 0
        if b["data"] is not None:
            off, n = b["data"]
            assert off + n <= size and n <= b["size"]
    for d in manifest["dispatches"]:
        for _, buf, off, n in d["bindings"]:
            assert off + n <= manifest["buffers"][buf]["size"]


def test_mlp_inference_bundle_matches_ferrograd(tmp_path):
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(16, 32), fg.nn.ReLU(), fg.nn.Linear(32, 10)).to("gpu")
    model.eval()

    @fg.compile
    def predict(x):
        return fg.softmax(model(x), dim=-1)

    xs = _rand(8, 16, seed=1)
    x = fg.tensor(xs, device="gpu")
    want = predict(x).numpy()
    bundle = tmp_path / "mlp"
    manifest = predict.graph(x).export_webgpu(bundle)
    _check_files(bundle, manifest)
    roles = [b["role"] for b in manifest["buffers"]]
    assert roles.count("input") == 1 and roles.count("weight") == 4 and roles.count("meta") == 1
    assert manifest["inputs"][0]["shape"] == [8, 16] and manifest["inputs"][0]["storage"] == "f32"
    assert manifest["outputs"][0]["shape"] == [8, 10]
    # Another input than the one exported with: the bundle computes, it does not replay.
    xs2 = _rand(8, 16, seed=2)
    got = _run_bundle(tmp_path, bundle, {manifest["inputs"][0]["name"]: xs2})[0]
    np.testing.assert_allclose(got["output0"], predict(fg.tensor(xs2, device="gpu")).numpy(), **TOL)
    cpu_model_out = fg.softmax(model.to("cpu")(fg.tensor(xs2)), dim=-1).numpy()
    np.testing.assert_allclose(got["output0"], cpu_model_out, rtol=1e-4, atol=1e-6)
    assert want.shape == (8, 10)
    # The loader's command line: inputs and outputs by name in .npz files.
    p = subprocess.run(
        [sys.executable, str(LOADER), str(bundle), str(tmp_path / "in.npz"), str(tmp_path / "cli.npz")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    with np.load(tmp_path / "cli.npz") as f:
        np.testing.assert_array_equal(f["output0"], got["output0"])


def test_fused_views_and_integer_outputs(tmp_path):
    def f(x, y, b):
        h = (x * y + b).tanh() * 0.5 + fg.exp(-x.abs())
        return h.sum(dim=0), h.T, h > 0.25, h.argmax(dim=1), h[:, ::-1]

    xs, ys, bs = _rand(6, 5, seed=3), _rand(6, 5, seed=4), _rand(5, seed=5)
    args = [fg.tensor(a, device="gpu") for a in (xs, ys, bs)]
    cf = fg.compile(f)
    want = [o.numpy() for o in cf(*args)]
    assert any(n["op"] == "fused" for n in cf.graph(*args).nodes())
    bundle = tmp_path / "fused"
    manifest = cf.graph(*args).export_webgpu(bundle)
    _check_files(bundle, manifest)
    outs = manifest["outputs"]
    assert [o["dtype"] for o in outs] == ["float32", "float32", "bool", "int64", "float32"]
    assert outs[1]["strides"] == [1, 5], "h.T is exported as a strided view"
    assert outs[4]["strides"][1] == -1, "h[:, ::-1] keeps its negative stride"
    names = [s["name"] for s in manifest["inputs"]]
    got = _run_bundle(tmp_path, bundle, dict(zip(names, (xs, ys, bs), strict=True)))[0]
    for k, w in enumerate(want):
        g = got[f"output{k}"]
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype in (np.bool_, np.int64):
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, **TOL)


def test_cnn_bundle_matches_ferrograd(tmp_path):
    fg.manual_seed(1)
    conv = fg.nn.Conv2d(1, 4, 3, padding=1).to("gpu")
    fc = fg.nn.Linear(4 * 4 * 4, 10).to("gpu")

    @fg.compile
    def net(x):
        h = fg.nn.functional.max_pool2d(fg.relu(conv(x)), 2)
        return fg.log_softmax(fc(h.flatten(1)), dim=1)

    xs = _rand(3, 1, 8, 8, seed=6)
    x = fg.tensor(xs, device="gpu")
    want = net(x).numpy()
    bundle = tmp_path / "cnn"
    manifest = net.graph(x).export_webgpu(bundle)
    _check_files(bundle, manifest)
    mem = manifest["memory"]
    assert 0 < mem["scratch_bytes"] < mem["scratch_bytes_unshared"], mem  # dead intermediates share slots
    got = _run_bundle(tmp_path, bundle, {manifest["inputs"][0]["name"]: xs})[0]
    np.testing.assert_allclose(got["output0"], want, rtol=1e-5, atol=1e-5)


def test_training_step_bundle_updates_its_own_weights_and_export_changes_nothing(tmp_path):
    fg.manual_seed(2)
    m = fg.nn.Sequential(fg.nn.Linear(6, 12), fg.nn.Tanh(), fg.nn.Linear(12, 2)).to("gpu")
    opt = fg.optim.SGD(list(m.parameters()), lr=0.1, momentum=0.9)

    @fg.compile
    def step(a, b):
        opt.zero_grad()
        loss = ((m(a) - b) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    xs, ys = _rand(16, 6, seed=7), _rand(16, 2, seed=8)
    x, y = fg.tensor(xs, device="gpu"), fg.tensor(ys, device="gpu")
    step(x, y)  # trace (and a first update, with the momentum buffers made)
    before = [p.detach().cpu().numpy() for p in m.parameters()]
    bundle = tmp_path / "train"
    manifest = step.graph(x, y).export_webgpu(bundle)
    mem = manifest["memory"]
    assert 0 < mem["scratch_bytes"] < mem["scratch_bytes_unshared"], mem
    after = [p.detach().cpu().numpy() for p in m.parameters()]
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)  # exporting ran nothing
    _check_files(bundle, manifest)
    names = [s["name"] for s in manifest["inputs"]]
    got = _run_bundle(tmp_path, bundle, dict(zip(names, (xs, ys), strict=True)), runs=3)
    want = [step(x, y).item() for _ in range(3)]
    np.testing.assert_allclose([r["output0"] for r in got], want, rtol=1e-5)
    assert got[0]["output0"] != got[2]["output0"], "the bundle's steps update its weights"


def test_cpu_graph_is_refused(tmp_path):
    cf = fg.compile(lambda x: x * 2)
    x = fg.tensor(_rand(3))
    cf(x)
    with pytest.raises(RuntimeError, match="gpu"):
        cf.graph(x).export_webgpu(tmp_path / "cpu")
    assert not (tmp_path / "cpu").exists()


def test_host_reading_op_is_refused_naming_it(tmp_path):
    @fg.compile
    def loss(logits, labels):
        return fg.nn.functional.cross_entropy(logits, labels)

    logits = fg.tensor(_rand(4, 3, seed=9), device="gpu")
    labels = fg.tensor(np.array([0, 2, 1, 1]), device="gpu")
    want = loss(logits, labels).item()
    with pytest.raises(RuntimeError, match="cross_entropy"):
        loss.graph(logits, labels).export_webgpu(tmp_path / "ce")
    # the failed export left the device usable and the graph runnable
    np.testing.assert_allclose(loss(logits, labels).item(), want, rtol=1e-6)


def test_random_draws_are_refused(tmp_path):
    x = fg.tensor(_rand(8, 4, seed=10), device="gpu")
    cf = fg.compile(lambda v: fg.nn.functional.dropout(v, 0.5) * 2.0)
    cf(x)
    # A bundle has no generator: one recorded mask would repeat on every run.
    with pytest.raises(RuntimeError, match="random"):
        cf.graph(x).export_webgpu(tmp_path / "drop")
    assert cf(x).shape == (8, 4)


BIG_EXPORT = """
import sys
import ferrograd as fg, numpy as np
import ferrograd.nn.functional as F

assert fg.gpu.info()["limits"]["max_storage_buffer_binding_size"] == 4096
fg.manual_seed(0)
model = fg.nn.Sequential(fg.nn.Linear(24, 40), fg.nn.LayerNorm(40), fg.nn.GELU(), fg.nn.Linear(40, 30)).to("gpu")
model.eval()

@fg.compile
def predict(x):
    h = model(x)
    return F.log_softmax(h, dim=-1), h.sum(0), (h * h).mean()

rng = np.random.default_rng(0)
xs, xs2 = (rng.standard_normal((64, 24)).astype(np.float32) for _ in range(2))  # 6 KB inputs
x = fg.tensor(xs, device="gpu")
predict(x)
manifest = predict.graph(x).export_webgpu(sys.argv[1])
want = predict(fg.tensor(xs2, device="gpu"))
np.savez(sys.argv[2], x=xs2, **{f"output{k}": w.numpy() for k, w in enumerate(want)})
print(manifest["inputs"][0]["name"])
"""


def test_bundle_of_tensors_over_one_binding_binds_ranges(tmp_path):
    # Exported where a binding holds 4 KiB: the kernels that work through
    # larger tensors in pieces bind ranges of their buffers, and the bundle
    # says so (offsets, and a binding limit below its largest buffer).
    import os

    bundle = tmp_path / "big"
    env = dict(os.environ, FG_GPU_MAX_BINDING_BYTES="4096")
    p = subprocess.run(
        [sys.executable, "-c", BIG_EXPORT, str(bundle), str(tmp_path / "want.npz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    name = p.stdout.split()[-1]
    manifest = json.loads((bundle / "manifest.json").read_text())
    _check_files(bundle, manifest)
    limits = manifest["limits"]
    assert limits["max_storage_buffer_binding_size"] <= 4096 < limits["max_buffer_size"]
    assert any(off > 0 for d in manifest["dispatches"] for _, _, off, _ in d["bindings"][1:])
    with np.load(tmp_path / "want.npz") as f:
        want = {k: f[k] for k in f.files}
    got = _run_bundle(tmp_path, bundle, {name: want["x"]})[0]
    assert len(got) == 3
    for k in range(3):
        np.testing.assert_allclose(got[f"output{k}"], want[f"output{k}"], rtol=1e-5, atol=1e-5)


def test_embedding_bundle_checks_token_ids_in_the_loader(tmp_path):
    """A gather with one index tensor (nn.Embedding) is exported: the indices are read on the
    device, and the graph's host range check becomes a manifest check the loader makes."""
    fg.manual_seed(0)
    emb = fg.nn.Embedding(10, 4).to("gpu")
    head = fg.nn.Linear(4, 3).to("gpu")
    cf = fg.compile(lambda i: head(emb(i)).sum(dim=1))
    ids = fg.tensor(np.array([[1, 9, 0], [3, 3, 7]]), device="gpu")
    bundle = tmp_path / "emb"
    manifest = cf.graph(ids).export_webgpu(bundle)
    _check_files(bundle, manifest)
    name = manifest["inputs"][0]["name"]
    assert manifest["checks"] == [{"input": name, "min": 0, "max": 9, "op": "index_select", "dim": 0}]
    other = np.array([[0, 2, 8], [9, 5, 5]])
    got = _run_bundle(tmp_path, bundle, {name: other})[0]
    np.testing.assert_allclose(got["output0"], cf(fg.tensor(other, device="gpu")).numpy(), **TOL)
    with pytest.raises(AssertionError, match=r"indices outside \[0, 9\]"):
        _run_bundle(tmp_path, bundle, {name: np.array([[0, 2, 8], [9, 5, 10]])})


def test_gather_of_computed_indices_is_refused(tmp_path):
    """Indices the graph computes cannot be range-checked by a loader: refused at export."""
    emb = fg.nn.Embedding(5, 2).to("gpu")
    cf = fg.compile(lambda x: emb(x.argmax(dim=-1)))
    x = fg.tensor(_rand(3, 5, seed=3), device="gpu")
    cf(x)
    with pytest.raises(RuntimeError, match="computed by the graph"):
        cf.graph(x).export_webgpu(tmp_path / "argmax")


def test_symbolic_batch_exports_one_bundle_per_size(tmp_path):
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(6, 8), fg.nn.Tanh(), fg.nn.Linear(8, 3)).to("gpu")
    cf = fg.compile(lambda x: (fg.softmax(model(x), dim=-1), x.sum(dim=0)), dynamic=True)
    g = cf.graph(fg.tensor(_rand(4, 6), device="gpu"))
    bundle = tmp_path / "sym"
    manifest = g.export_webgpu(bundle, sizes=[2, 7])
    _check_files(bundle, manifest)
    assert manifest["inputs"][0]["shape"] == [2, 6]
    assert manifest["inputs"][0]["symbolic_shape"] == ["s0", 6]
    assert manifest["outputs"][1]["symbolic_shape"] == [6]
    assert [(v["sizes"], v["path"], v["inputs"]) for v in manifest["variants"]] == [
        ({"s0": 2}, "", [[2, 6]]),
        ({"s0": 7}, "variants/s0-7/", [[7, 6]]),
    ]
    for v in manifest["variants"]:
        sub = bundle / v["path"]
        m = json.loads((sub / "manifest.json").read_text())
        _check_files(sub, m)
        for key, need in m["limits"].items():
            assert need <= manifest["limits"][key], key
        xs = _rand(*v["inputs"][0], seed=5)
        got = _run_bundle(tmp_path, sub, {m["inputs"][0]["name"]: xs})[0]
        want = cf(fg.tensor(xs, device="gpu"))
        for k, w in enumerate(want):
            np.testing.assert_allclose(got[f"output{k}"], w.numpy(), **TOL)
    with pytest.raises(ValueError, match=r"names \['B'\].*\['s0'\]"):
        g.export_webgpu(tmp_path / "bad", sizes={"B": [1]})
    with pytest.raises(ValueError, match="distinct positive"):
        g.export_webgpu(tmp_path / "bad", sizes=[3, 3])
    fixed = fg.compile(lambda x: x * 2)
    x = fg.tensor(_rand(2, 2), device="gpu")
    fixed(x)
    with pytest.raises(ValueError, match="needs a graph with symbolic dimensions"):
        fixed.graph(x).export_webgpu(tmp_path / "bad", sizes=[1])
