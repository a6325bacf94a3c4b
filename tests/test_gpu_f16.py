"""Native float16 storage on the WebGPU device.

Where the adapter has ``shader-f16`` the device stores float16 tensors as
``array<f16>`` (2 bytes per element); kernels load them into float32
registers and store through a round-to-nearest-even on the bits, so results
match the CPU (which computes float16 in float32 and rounds once on store).
``FG_GPU_NO_F16=1`` makes the device store float16 as float32 words with a
rounding pass after every write, as on adapters without ``shader-f16``; the
tests of that path run in a subprocess (the storage is chosen when the
device is created), together with ``test_gpu_narrow.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

HERE = Path(__file__).resolve().parent


def native() -> bool:
    return fg.gpu.info()["float16_storage"] == "f16"


needs_native = pytest.mark.skipif(
    not fg.gpu.is_available() or fg.gpu.info()["float16_storage"] != "f16",
    reason="float16 is stored as float32 words here (no shader-f16, or FG_GPU_NO_F16 set)",
)


def bits16(t: fg.Tensor) -> np.ndarray:
    """The float16 bit patterns of a float16 tensor (NaNs made one pattern)."""
    v = t.cpu().numpy()
    assert v.dtype == np.float16
    out = v.view(np.uint16).copy()
    out[np.isnan(v)] = 0x7E00
    return out


def test_storage_is_reported_and_follows_the_adapter():
    info = fg.gpu.info()
    want_native = "shader_f16" in info["features"] and os.environ.get("FG_GPU_NO_F16", "") in ("", "0")
    assert info["float16_storage"] == ("f16" if want_native else "f32")
    assert ("shader_f16" in info["device_features"]) == want_native


@needs_native
def test_a_float16_tensor_takes_two_bytes_per_element():
    n = 1 << 20  # a pool size class of its own in both dtypes
    fg.gpu.empty_cache()
    sizes = {}
    for dtype in (fg.float16, fg.float32):
        before = fg.gpu.stats()["bytes_in_use"]
        x = fg.empty(n, dtype=dtype, device="gpu")  # no kernel (a kernel's metadata takes pool bytes too)
        sizes[dtype] = fg.gpu.stats()["bytes_in_use"] - before
        del x
    assert sizes[fg.float16] == 2 * n, sizes
    assert sizes[fg.float32] == 4 * n, sizes


@pytest.mark.parametrize("n", [1, 2, 3, 5, 257, 1001])
def test_odd_lengths_and_offsets_round_trip(n):
    """Buffers of an odd number of halves are padded to whole words; views that
    start or end mid-word read, write and download the right halves."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float16)
    g = fg.from_numpy(x).to("gpu")
    assert np.array_equal(g.numpy().view(np.uint16), x.view(np.uint16))
    if n > 2:
        assert np.array_equal(g[1:].numpy(), x[1:])
        assert np.array_equal(g[1:-1:2].numpy(), x[1:-1:2])
        y = (g[1:] * 2 + 1).numpy()
        want = (fg.from_numpy(x)[1:] * 2 + 1).numpy()
        assert np.array_equal(y.view(np.uint16), want.view(np.uint16))
        z = g.clone()
        z[1::2] = 0.5  # writes every other half: its neighbours in the same word stay
        w = x.copy()
        w[1::2] = 0.5
        assert np.array_equal(z.numpy().view(np.uint16), w.view(np.uint16))


def edge_values() -> np.ndarray:
    """float32 values at float16's rounding edges: ties to even both ways, the largest
    finite value and just past it, the subnormals, signed zeros, infinities and NaN."""
    h = [1 + 2**-11, 1 + 3 * 2**-11, 1 - 2**-12, 2049, 2051, 65504, 65519.99, 65520, 7e4, 1e30,
         2**-24, 2**-25, 3 * 2**-25, 2**-26, 2**-14 - 2**-25, 6.1e-5, 1e-8, 0.1, 1 / 3]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(0)
    wild = rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 7, 3000)
    v = np.array(h + [-x for x in h] + special, np.float64)
    return np.concatenate([v, wild]).astype(np.float32)


def test_conversion_rounds_like_the_cpu():
    """float32 -> float16 on the device gives the CPU's bits (half::f16::from_f32):
    ties to even, overflow to infinity, subnormals, NaN kept."""
    x = fg.from_numpy(edge_values())
    want = x.to(fg.float16)
    got = x.to("gpu").to(fg.float16)
    np.testing.assert_array_equal(bits16(got), bits16(want))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(bits16(got), bits16(fg.from_numpy(edge_values().astype(np.float16))))
    # ... and back, exactly; to and from every other dtype.
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    h = fg.from_numpy(np.array([0, 1.5, -3.25, 2049, 65504, -0.0, 0.1, -7], np.float16))
    for dt in (fg.int32, fg.int64, fg.bool, fg.bfloat16, fg.float32):
        np.testing.assert_array_equal(h.to("gpu").to(dt).cpu().float().numpy(), h.to(dt).float().numpy(), err_msg=str(dt))
        src = fg.from_numpy(np.array([0, 1, -3, 2049, 65519, 70000, 7], np.int64)).to(dt)
        np.testing.assert_array_equal(bits16(src.to("gpu").to(fg.float16)), bits16(src.to(fg.float16)), err_msg=str(dt))


def test_elementwise_ops_match_the_cpu_bit_for_bit():
    rng = np.random.default_rng(1)
    a = fg.from_numpy((rng.standard_normal((64, 33)) * 100).astype(np.float32)).to(fg.float16)
    b = fg.from_numpy(rng.standard_normal((33,)).astype(np.float32) * 3).to(fg.float16)
    ga, gb = a.to("gpu"), b.to("gpu")
    ops = [("add", lambda p, q: p + q), ("sub", lambda p, q: p - q), ("mul", lambda p, q: p * q),
           ("div", lambda p, q: p / q), ("maximum", fg.maximum), ("neg", lambda p, q: -p),
           ("abs", lambda p, q: p.abs()), ("relu", lambda p, q: fg.relu(p)),
           ("where", lambda p, q: fg.where(p > 0, p, q)), ("scalar", lambda p, q: p * 1000.0 + 0.1),
           ("overflow", lambda p, q: p * p * p), ("transposed", lambda p, q: p.t() * 2),
           ("compare", lambda p, q: (p < q).to(fg.float16)), ("clamp", lambda p, q: p.clamp(-1, 1))]
    for name, f in ops:
        want, got = f(a, b), f(ga, gb)
        assert got.dtype == want.dtype == fg.float16, name
        np.testing.assert_array_equal(bits16(got), bits16(want), err_msg=name)
    # Promotion with float32 gives float32 on both devices, unrounded.
    f32 = fg.from_numpy(rng.standard_normal(33).astype(np.float32))
    mixed = ga + f32.to("gpu")
    assert mixed.dtype == fg.float32
    np.testing.assert_array_equal(mixed.numpy(), (a + f32).numpy())


def test_reductions_matmul_and_nn_kernels_are_within_tolerance():
    rng = np.random.default_rng(2)
    h = fg.float16

    def t(*shape, scale=1.0):
        return fg.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32)).to(h)

    ts = {"a": t(3, 17, 40), "b": t(40, 9), "img": t(2, 3, 9, 8), "w": t(4, 3, 3, 3), "bias": t(4),
          "idx": fg.from_numpy(rng.integers(0, 17, (3, 5, 40))), "lw": t(40), "lb": t(40)}
    F = fg.nn.functional
    cases = [
        ("sum", lambda d: d["a"].sum(2)), ("mean", lambda d: d["a"].mean((0, 1))),
        ("max", lambda d: d["a"].amax(1)), ("var", lambda d: d["a"].var(2)),
        ("logsumexp", lambda d: d["a"].logsumexp(2)), ("cumsum", lambda d: d["a"].cumsum(2)),
        ("argmax", lambda d: d["a"].argmax(2)), ("batched matmul", lambda d: d["a"] @ d["b"]),
        ("softmax", lambda d: fg.softmax(d["a"], 2)), ("log_softmax", lambda d: fg.log_softmax(d["a"], 1)),
        ("layer_norm", lambda d: F.layer_norm(d["a"], (40,), d["lw"], d["lb"])),
        ("conv2d", lambda d: F.conv2d(d["img"], d["w"], d["bias"], padding=1)),
        ("max_pool2d", lambda d: F.max_pool2d(d["img"], 2)), ("avg_pool2d", lambda d: F.avg_pool2d(d["img"], 2)),
        ("gather", lambda d: d["a"].gather(1, d["idx"])), ("index", lambda d: d["a"][:, [3, 1, 16], 5:9]),
        ("scatter_add", lambda d: fg.zeros((3, 17, 40), dtype=h, device=d["a"].device).scatter_add(1, d["idx"], d["a"][:, :5])),
        ("tril", lambda d: d["a"][0].tril()), ("cat", lambda d: fg.cat([d["a"], d["a"][:, :3]], 1)),
    ]
    gpu = {k: v.to("gpu") for k, v in ts.items()}
    for name, f in cases:
        want, got = f(ts), f(gpu)
        assert str(got.device) == "gpu" and got.dtype == want.dtype, name
        gv, cv = got.cpu().float().numpy(), want.float().numpy()
        if want.dtype == h:
            # Stored as float16, within float16's rounding of the CPU's (sums may run in another order).
            np.testing.assert_allclose(gv, cv, rtol=2**-9, atol=2**-9, err_msg=name)
        else:
            np.testing.assert_array_equal(gv, cv, err_msg=name)


def test_compiled_graph_fuses_float16_kernels():
    rng = np.random.default_rng(3)
    x = fg.from_numpy(rng.standard_normal((8, 31)).astype(np.float32)).to(fg.float16)
    y = fg.from_numpy(rng.standard_normal((31,)).astype(np.float32)).to(fg.float16)

    def f(p, q):
        return ((p * q + 1.5).tanh() * p).relu() - q

    want = f(x, y)
    c = fg.compile(f)
    for _ in range(2):
        got = c(x.to("gpu"), y.to("gpu"))
        assert got.dtype == fg.float16 and str(got.device) == "gpu"
        np.testing.assert_allclose(got.cpu().float().numpy(), want.float().numpy(), rtol=2**-10, atol=2**-10)
    assert c.stats.kernels_per_call >= 1


def test_optimizer_state_and_training_step_in_float16():
    fg.manual_seed(0)
    p = fg.nn.Parameter(fg.randn(33, dtype=fg.float16))
    q = fg.nn.Parameter(p.detach().clone().to("gpu"))
    for params in ([p], [q]):
        opt = fg.optim.Adam(params, lr=1e-2)
        for step in range(3):
            params[0].grad = fg.full((33,), 0.25 * (step + 1), dtype=fg.float16, device=params[0].device)
            opt.step()
    np.testing.assert_array_equal(bits16(q.detach()), bits16(p.detach()))


FALLBACK = textwrap.dedent(
    """
    import ferrograd as fg, numpy as np
    info = fg.gpu.info()
    assert info["float16_storage"] == "f32", info["float16_storage"]
    assert "shader_f16" not in info["device_features"]
    n = 1 << 20
    fg.gpu.empty_cache()
    before = fg.gpu.stats()["bytes_in_use"]
    x = fg.empty(n, dtype=fg.float16, device="gpu")
    assert fg.gpu.stats()["bytes_in_use"] - before == 4 * n
    print("ok")
    """
)


def test_float32_storage_fallback():
    """FG_GPU_NO_F16=1: float16 in float32 words (4 bytes each) with the rounding pass;
    the float16 tests (this file's, test_gpu_narrow.py and the op table's float16
    cells) pass that way too."""
    env = dict(os.environ, FG_GPU_NO_F16="1")
    r = subprocess.run([sys.executable, "-c", FALLBACK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    for files, k in [
        (["test_gpu_narrow.py", "test_gpu_f16.py"], "not fallback"),
        (["test_gpu_optable.py"], "float16 and not bfloat16"),
    ]:
        r = subprocess.run(
            [sys.executable, "-m", "pytest", *[str(HERE / f) for f in files], "-q", "-p", "no:cacheprovider", "-k", k],
            env=env, capture_output=True, text=True, timeout=1200, cwd=HERE.parent,
        )
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]


LARGE = textwrap.dedent(
    """
    import ferrograd as fg, numpy as np
    assert fg.gpu.info()["limits"]["max_storage_buffer_binding_size"] == 4096
    rng = np.random.default_rng(0)
    n = 5003  # 10 KB of float16: three bindings' worth, an odd count
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(np.float16)
    cx, cy = fg.from_numpy(x), fg.from_numpy(y)
    gx, gy = cx.to("gpu"), cy.to("gpu")

    def same(got, want, tol=0.0):
        got, want = got.cpu().float().numpy(), want.float().numpy()
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

    same(gx * gy + 1.5, cx * cy + 1.5)
    same(gx[7:] - gy[:-7], cx[7:] - cy[:-7])
    same(gx[1::3] * 2, cx[1::3] * 2)
    same(gx.to(fg.float32), cx.to(fg.float32))
    same((gx.to(fg.float32) * 3).to(fg.float16), (cx.to(fg.float32) * 3).to(fg.float16))
    z = gx.clone()
    z[101:4001] = 0.25
    w = cx.clone()
    w[101:4001] = 0.25
    same(z, w)
    same(gx.sum(), cx.sum(), 2e-2)
    same(gx.amax(), cx.amax())
    m = fg.from_numpy(rng.standard_normal((101, 53)).astype(np.float16))
    idx = fg.from_numpy(rng.integers(0, 101, 40))
    same(m.to("gpu")[idx.to("gpu")], m[idx])
    same(m.to("gpu").sum(1), m.sum(1), 2e-2)
    same(m.to("gpu") @ m.to("gpu").t()[:, :7], m @ m.t()[:, :7], 5e-2)
    print("ok")
    """
)


def test_large_float16_tensors_split_by_their_real_bytes():
    """Over a 4 KiB binding limit, float16 pieces and windows are measured in 2-byte
    elements (window starts stay aligned; sizes are padded to whole words)."""
    env = dict(os.environ, FG_GPU_MAX_BINDING_BYTES="4096")
    r = subprocess.run([sys.executable, "-c", LARGE], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def _export_f16(path: Path):
    """A small float16 model compiled on the GPU and exported: (manifest, input, output)."""
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(7, 5), fg.nn.Tanh(), fg.nn.Linear(5, 3)).to(dtype=fg.float16).to("gpu")
    model.eval()

    @fg.compile
    def predict(x):
        return model(x) * 2

    x = fg.randn(4, 7, dtype=fg.float16).to("gpu")
    want = predict(x)
    manifest = predict.graph(x).export_webgpu(path)
    # Exporting changed nothing: the graph still computes the same.
    np.testing.assert_array_equal(bits16(predict(x)), bits16(want))
    return manifest, x, want


def test_webgpu_bundle_keeps_float16_storage(tmp_path):
    """A graph exported with native float16 stores it as f16 in the bundle and asks
    for shader-f16; under the float32 fallback it needs no feature."""
    manifest, _, _ = _export_f16(tmp_path / "b")
    shaders = [(tmp_path / "b" / name).read_text() for name in manifest["shaders"]]
    assert manifest["outputs"][0]["dtype"] == "float16"
    if native():
        assert manifest["features"] == ["shader-f16"]
        assert manifest["inputs"][0]["storage"] == manifest["outputs"][0]["storage"] == "f16"
        assert any(s.startswith("enable f16;") for s in shaders)
    else:
        assert manifest["features"] == []
        assert manifest["inputs"][0]["storage"] == "f32"
        assert not any("f16" in s.split("\n", 1)[0] for s in shaders)


def test_float16_bundle_runs_without_ferrograd(tmp_path):
    """The bundle runs in wgpu-py (the device created with the manifest's features)
    and gives the same float16 bits as ferrograd."""
    pytest.importorskip("wgpu", reason="wgpu-py (in the test extra) is needed to load bundles")
    from test_webgpu_bundle import _run_bundle

    manifest, x, want = _export_f16(tmp_path / "b")
    got = _run_bundle(tmp_path, tmp_path / "b", {manifest["inputs"][0]["name"]: x.cpu().numpy()})[0]["output0"]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16), bits16(want))
