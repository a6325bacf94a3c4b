"""WebGPU bundles in a real browser: headless Chromium on its SwiftShader adapter.

One browser launch serves every check, from a server on 127.0.0.1
(``ferrograd.serve_bundle`` plus a POST handler that receives the page's
report):

- every WGSL module the shader generators make (written by the naga tests of
  the Rust crate with ``FG_WGSL_DUMP``) is compiled by the browser's own
  compiler (Tint); any error message fails the test — naga alone once let
  through shaders every browser rejected; the optimizers' multi-tensor
  kernels are among them and are counted;
- bundles of the graph families (elementwise fusion, reductions, matmul,
  conv, softmax and layer norm, attention) and the digits CNN of
  ``examples/digits.py`` are loaded with their ``model.js`` and run; outputs
  must match ferrograd on the CPU at float32 tolerance, and a second run
  (buffers reused) must give the same bits;
  embedding gathers (an ``nn.Embedding`` and a tiny GPT, their token ids
  range-checked by ``model.js``) and a symbolic batch exported for several
  sizes;
- float16: a bundle that stores float16 natively (refused with
  ``missing-feature`` where the adapter lacks ``shader-f16``, as SwiftShader
  does) and the documented fallback, the same graph exported with
  ``FG_GPU_NO_F16=1``, which runs;
- the done-when: the CNN trained by ``examples/digits.py`` (2 epochs here),
  exported by ``examples/web/export.py``, gives every held-out image the CPU's
  class; ``examples/web/index.html`` itself is drawn on with pointer events
  and its bars must show the CPU's probabilities;
- an instrumented device (the page wraps ``GPUDevice``'s create calls and
  ``GPUQueue.writeBuffer``) shows that pipelines, buffers and bind groups are
  made and weights uploaded once, at load, and runs only write inputs;
- the documented errors: wrong input shape, name, dtype, no ``navigator.gpu``,
  no adapter, an adapter lacking a feature or a limit.

Chromium flags, measured: ``--enable-unsafe-webgpu`` is what exposes an
adapter in headless mode (SwiftShader, also with ``--headless=new``);
``--use-webgpu-adapter=swiftshader`` without it gives none.

Needs Debian's ``chromium`` and ``cargo`` (for the shader catalog): skipped
without them, except in CI (``CI`` set), where that fails the test.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest
from ferrograd import serve_bundle

ROOT = Path(__file__).resolve().parent.parent
_NOT_CI = ("", "0", "false", "no", "off")
TOL = {"rtol": 1e-4, "atol": 1e-5}


def _need(what: str, reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() not in _NOT_CI:
        pytest.fail(f"{reason} — CI must run this test")
    print(f"\nskipped: {reason}")
    pytest.skip(reason)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    _need(
        "chromium",
        "no chromium on PATH (apt-get install chromium): WebGPU bundles are not checked in a browser",
    )
    raise AssertionError


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class TinyGPT(nn.Module):
    """A one-block GPT: token and position embeddings, causal attention, an MLP, the vocabulary head."""

    def __init__(self, vocab: int = 13, ctx: int = 6, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)
        # Position ids stored as a buffer (a bundle checks stored indices once, at export;
        # ids made by fg.arange inside the graph are computed indices, which it refuses).
        self.register_buffer("pos_ids", fg.arange(ctx))

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(self.pos_ids[:t])
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        x = x + self.mlp(self.ln2(x))
        return fg.softmax(self.head(x), dim=-1)


def _families() -> dict:
    """name -> (function of GPU or CPU tensors, numpy inputs)."""
    fg.manual_seed(0)
    emb = nn.Embedding(11, 6)
    ln = nn.LayerNorm(8)
    conv = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    spec = importlib.util.spec_from_file_location("digits_demo", ROOT / "examples" / "digits.py")
    digits = importlib.util.module_from_spec(spec)
    sys.modules["digits_demo"] = digits  # its dataclasses look their module up
    spec.loader.exec_module(digits)
    cnn = digits.make_cnn()
    cnn.eval()
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    gpt = TinyGPT()
    mods = [emb, ln, conv, cnn, mlp, gpt]
    fams = {
        "elementwise": (
            lambda x, y: F.gelu(x * y + 0.5) - fg.sigmoid(y),
            [_rand(4, 5, seed=1), _rand(4, 5, seed=2)],
        ),
        "reduction": (lambda x: (x.sum(dim=1), x.amax(dim=0), x.mean()), [_rand(6, 7, seed=3)]),
        "matmul": (lambda a, b: a @ b, [_rand(5, 9, seed=4), _rand(9, 3, seed=5)]),
        "conv": (lambda x: mods[2](x), [_rand(2, 2, 6, 6, seed=6)]),
        "softmax_layernorm": (lambda x: (fg.softmax(x, dim=-1), mods[1](x)), [_rand(3, 8, seed=7)]),
        "attention": (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            [_rand(1, 2, 4, 8, seed=8), _rand(1, 2, 4, 8, seed=9), _rand(1, 2, 4, 8, seed=10)],
        ),
        "digits_cnn": (lambda x: fg.softmax(mods[3](x), dim=-1), [np.abs(_rand(3, 1, 8, 8, seed=11)) * 8]),
        # Gathers: nn.Embedding lookups of int64 token ids (a tiny GPT) and one embedding alone.
        "embedding": (lambda i: mods[0](i) * 2.0, [np.array([[1, 0, 10], [4, 4, 7]], dtype=np.int64)]),
        "tiny_gpt": (
            lambda i: mods[5](i),
            [np.array([[1, 5, 12, 0, 3, 3], [7, 2, 2, 9, 11, 4]], dtype=np.int64)],
        ),
        # Captured with a symbolic batch (dynamic=True), exported for the sizes of SIZED.
        "symbolic_batch": (
            lambda x, y: (fg.softmax(mods[4](mods[1](x)), dim=-1), (x * y).sum(dim=0), y.amax(dim=1)),
            [_rand(SIZED[0], 8, seed=12), _rand(SIZED[0], 8, seed=13)],
        ),
    }
    return fams, mods


# The batch sizes the symbolic_batch bundle is exported for, and the order the page runs them in
# (back to an earlier size too: each size's buffers are built once and reused).
SIZED = [3, 1, 5]
SIZED_RUNS = [1, 5, 3, 1]


def _sized_inputs(b: int) -> list[np.ndarray]:
    return [_rand(b, 8, seed=100 + b), _rand(b, 8, seed=200 + b)]


# A float16 graph, exported twice: with shader-f16 (float16 stored natively, where the exporting
# device has it) and in a process with FG_GPU_NO_F16=1 (float16 in f32 words: the documented
# fallback for browsers without shader-f16).
F16_SCRIPT = """
import sys, numpy as np, ferrograd as fg, ferrograd.nn.functional as F
f = lambda x, w: fg.softmax(x @ w, dim=-1) + F.gelu(x).sum(dim=1, keepdim=True)
x, w = (fg.tensor(np.load(sys.argv[k]), device="gpu").half() for k in (2, 3))
print(fg.compile(f).graph(x, w).export_webgpu(sys.argv[1])["features"])
"""


def _f16(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """F16_SCRIPT's function on the CPU, in float16."""
    x, w = fg.tensor(x).half(), fg.tensor(w).half()
    return (fg.softmax(x @ w, dim=-1) + F.gelu(x).sum(dim=1, keepdim=True)).float().numpy()


def _export_f16(dest: Path, x: np.ndarray, w: np.ndarray, no_f16: bool) -> None:
    np.save(dest.parent / "x16.npy", x)
    np.save(dest.parent / "w16.npy", w)
    env = {**os.environ, "FG_GPU_NO_F16": "1" if no_f16 else "0"}
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            F16_SCRIPT,
            str(dest),
            str(dest.parent / "x16.npy"),
            str(dest.parent / "w16.npy"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]


def _expected_counts(bundle: Path) -> dict:
    """The device calls loading the bundle in ``bundle`` must make, from its manifest."""
    m = json.loads((bundle / "manifest.json").read_text())
    return {
        "shaders": len(m["shaders"]),
        "buffers": len(m["buffers"]) + len(m["outputs"]),  # the outputs' staging buffers
        "bind_groups": len(m["dispatches"]),
        "uploads": sum(1 for b in m["buffers"] if b["data"] and b["data"][1]),
        "inputs": len(m["inputs"]),
    }


def _bad_bundles(site: Path) -> dict[str, str]:
    """Copies of the elementwise bundle broken one way each (under site/bad/): case -> page path."""
    cases = {}
    for case in ("bad_manifest", "shader", "device"):
        dest = site / "bad" / case
        shutil.copytree(site / "elementwise", dest)
        m = json.loads((dest / "manifest.json").read_text())
        if case == "bad_manifest":
            m["version"] = 2
        elif case == "shader":
            (dest / m["shaders"][0]).write_text(
                "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }\n"
            )
        else:  # a binding past the end of its buffer
            binding = m["dispatches"][0]["bindings"][0]
            binding[3] = m["buffers"][binding[1]]["size"] + 256
        (dest / "manifest.json").write_text(json.dumps(m))
        cases[case] = f"bad/{case}"
    cases["fetch"] = "bad/no_such_bundle"
    return cases


def _outs(r) -> list[np.ndarray]:
    return [t.numpy() for t in (r if isinstance(r, tuple) else (r,))]


def _shader_catalog(dest: Path) -> list[str]:
    """The WGSL of every generator (the naga tests write them with FG_WGSL_DUMP), deduplicated into dest.

    scripts/test.sh dumps them during its own Rust test run and names the folder in
    FG_WGSL_CATALOG; without it the Rust shader tests run here to write them."""
    catalog = os.environ.get("FG_WGSL_CATALOG")
    if catalog:
        assert Path(catalog).is_dir(), f"FG_WGSL_CATALOG={catalog} is not a folder"
        return _dedup(Path(catalog), dest)
    cargo = shutil.which("cargo")
    if cargo is None:
        _need("cargo", "no cargo on PATH: the shader catalog comes from the Rust tests")
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(
            [
                cargo,
                "test",
                "--release",
                "--no-default-features",
                "--features",
                "gpu",
                # scripts/test.sh's configuration, so a build it made is reused
                "--config",
                "profile.release.package.ferrograd.debug-assertions=true",
                "--config",
                "profile.release.package.ferrograd.overflow-checks=true",
                "-q",
                "backend::wgpu::",
            ],
            cwd=ROOT,
            env={**os.environ, "FG_WGSL_DUMP": d},
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return _dedup(Path(d), dest)


# Every multi-tensor optimizer kernel (shaders::optim_multi) defines this function.
OPTIM_MULTI_MARK = "fn offt(blk: u32"


def _dedup(src: Path, dest: Path) -> list[str]:
    """Copy src's shaders into dest once per distinct text; their page paths."""
    seen: set[str] = set()
    names = []
    dest.mkdir()
    for f in sorted(src.iterdir()):
        text = f.read_text()
        h = hashlib.sha256(text.encode()).hexdigest()[:16]
        if h not in seen:
            seen.add(h)
            (dest / f"{h}.wgsl").write_text(text)
            names.append(f"shaders/{h}.wgsl")
    assert len(names) > 300, f"only {len(names)} distinct shaders in the catalog"
    return names


def _optim_multi(site: Path, names: list[str]) -> list[str]:
    """The catalog's multi-tensor optimizer kernels that need no float16 (the ones SwiftShader can compile)."""
    out = []
    for n in names:
        text = (site / n).read_text()
        if OPTIM_MULTI_MARK in text and not text.startswith("enable f16;"):
            out.append(n)
    return out


@pytest.fixture(scope="module")
def browser_report():
    if not fg.gpu.is_available():
        _need("adapter", f"no WebGPU adapter to export bundles with: {fg.gpu.unavailable_reason()}")
    exe = _chromium()
    tmp = Path(tempfile.mkdtemp(prefix="fg-webgpu-browser-"))
    site = tmp / "site"
    site.mkdir()
    shutil.copy(ROOT / "tests" / "webgpu_page" / "runner.html", site / "index.html")
    t0 = time.perf_counter()
    shaders = _shader_catalog(site / "shaders")
    t_catalog = time.perf_counter() - t0
    fams, _ = _families()
    want, jobs = {}, []
    for name, (f, xs) in fams.items():
        want[name] = _outs(f(*[fg.tensor(x) for x in xs]))
        sized = name == "symbolic_batch"
        if sized:
            want[name + "/runs"] = [_outs(f(*[fg.tensor(x) for x in _sized_inputs(b)])) for b in SIZED_RUNS]
        for m in _:  # modules move to the GPU for the export, and back after
            m.to("gpu")
        gf = fg.compile(f, dynamic=sized)
        gx = [fg.tensor(x, device="gpu") for x in xs]
        if sized:
            man = man_sized = gf.graph(*gx).export_webgpu(site / name, sizes=SIZED)
        else:
            man = gf.graph(*gx).export_webgpu(site / name)
        for m in _:
            m.to("cpu")
        inputs = {}
        for spec, x in zip(man["inputs"], xs, strict=True):
            file = f"{name}/in_{spec['name']}.bin"
            if spec["dtype"] == "int64":  # the page passes int64 as an Int32Array
                x = x.astype(np.int32)
            (site / file).write_bytes(np.ascontiguousarray(x).tobytes())
            inputs[spec["name"]] = {"file": file, "dtype": spec["dtype"]}
        job = {"name": name, "inputs": inputs}
        if sized:
            job["runs"] = []
            for b in SIZED_RUNS:
                feed = {}
                for spec, x in zip(man["inputs"], _sized_inputs(b), strict=True):
                    file = f"{name}/in_{spec['name']}_b{b}.bin"
                    (site / file).write_bytes(np.ascontiguousarray(x).tobytes())
                    feed[spec["name"]] = {"file": file, "dtype": spec["dtype"]}
                job["runs"].append(feed)
            job["unexported"] = {man["inputs"][0]["name"]: 2 * 8}
        if name == "digits_cnn":
            job["error_cases"] = man["inputs"][0]["name"]
        if name == "tiny_gpt":
            job["bad_index"] = {man["inputs"][0]["name"]: 13}  # the vocabulary has 13 tokens
        jobs.append(job)
    for job in jobs:
        job["_expect"] = _expected_counts(site / job["name"])
        if job["name"] == "symbolic_batch":
            job["_expect_variants"] = [
                _expected_counts(site / job["name"] / v["path"]) for v in man_sized["variants"][1:]
            ]
        if job["name"] == "digits_cnn":  # an adapter whose storage buffers are too small for it
            job["fake_adapter"] = ["limit", "maxStorageBufferBindingSize", 64]

    # float16: inputs of float32 values the page passes as they are (model.js rounds them).
    t3 = time.perf_counter()
    x16, w16 = _rand(4, 8, seed=20), _rand(8, 5, seed=21)
    want["float16"] = want["float16_fallback"] = [_f16(x16, w16)]
    for name, no_f16 in (("float16", False), ("float16_fallback", True)):
        _export_f16(site / name, x16.astype(np.float16), w16.astype(np.float16), no_f16)
        m = json.loads((site / name / "manifest.json").read_text())
        inputs = {}
        for spec, x in zip(m["inputs"], (x16, w16), strict=True):
            (site / name / f"in_{spec['name']}.bin").write_bytes(x.tobytes())
            inputs[spec["name"]] = {"file": f"{name}/in_{spec['name']}.bin", "dtype": "float32"}
        job = {
            "name": name,
            "inputs": inputs,
            "_expect": _expected_counts(site / name),
            "features": m["features"],
        }
        if name == "float16":
            job["fake_adapter"] = ["feature", "shader-f16", None]
        jobs.append(job)

    t_f16 = time.perf_counter() - t3

    # The done-when: the CNN trained by examples/digits.py, exported with examples/web/export.py's
    # one call, classifies the held-out images in the page as on the CPU; and the page of
    # examples/web/ itself, drawn on.
    t2 = time.perf_counter()
    digits = sys.modules["digits_demo"]
    status = digits.main(["--models", "cnn", "--epochs", "2", "--quiet", "--out-dir", str(tmp / "train")])
    assert status == 0, "examples/digits.py failed"
    spec = importlib.util.spec_from_file_location(
        "digits_web_export", ROOT / "examples" / "web" / "export.py"
    )
    web_export = importlib.util.module_from_spec(spec)
    sys.modules["digits_web_export"] = web_export
    spec.loader.exec_module(web_export)
    (site / "web").mkdir()
    shutil.copy(ROOT / "examples" / "web" / "index.html", site / "web" / "index.html")
    # (export.py's own check of the held-out images on ferrograd's GPU is left out: the page's is the one here)
    exported = web_export.export(
        tmp / "train" / "digits_cnn.safetensors", site / "web" / "bundle", check=False
    )
    (site / "web" / "heldout.bin").write_bytes(np.ascontiguousarray(exported.images).tobytes())
    (site / "web" / "in_first.bin").write_bytes(np.ascontiguousarray(exported.images[0]).tobytes())
    t_train = time.perf_counter() - t2
    input0 = exported.manifest["inputs"][0]["name"]
    jobs.append(
        {
            "name": "trained_digits",
            "path": "web/bundle",
            "inputs": {input0: {"file": "web/in_first.bin", "dtype": "float32"}},
            "heldout": {"file": "web/heldout.bin", "n": len(exported.images)},
            "_expect": _expected_counts(site / "web" / "bundle"),
        }
    )
    want["trained_digits"] = [exported.cpu_probs[:1]]
    # A "7" drawn with the left button, one stray cell drawn and erased with the right button.
    seven = [10, 11, 12, 13, 21, 28, 36, 43, 51]
    page = {"url": "web/index.html", "strokes": [[seven, 0], [[40], 0], [[40], 2]]}
    drawn = np.zeros((1, 1, 8, 8), np.float32)
    drawn.reshape(-1)[seven] = 16.0
    with fg.no_grad():
        want["page"] = exported.predict(fg.tensor(drawn)).numpy()[0]
    want["heldout"] = exported
    (site / "jobs.json").write_text(
        json.dumps(
            {
                "shaders": shaders,
                "bundles": [{k: v for k, v in j.items() if not k.startswith("_")} for j in jobs],
                "page": page,
                "bad_bundles": _bad_bundles(site),
            }
        )
    )

    got: dict = {}
    done = threading.Event()

    class Handler(serve_bundle.Handler):
        def do_POST(self) -> None:
            n = int(self.headers["Content-Length"])
            got.update(json.loads(self.rfile.read(n)))
            self.send_response(204)
            self.end_headers()
            done.set()

    import functools
    import http.server

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/index.html"
    args = [
        exe,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--enable-unsafe-webgpu",  # exposes WebGPU (the SwiftShader adapter here)
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        url,
    ]
    t1 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ok = done.wait(timeout=300)
    finally:
        proc.kill()
        _, err = proc.communicate()
        srv.shutdown()
    t_browser = time.perf_counter() - t1
    assert ok, f"the page reported nothing within 300 s; chromium said:\n{err.decode()[-3000:]}"
    print(
        f"\nbrowser: {got.get('adapter')}, catalog {t_catalog:.1f} s, float16 exports {t_f16:.1f} s, "
        "training and export of the digits "
        f"{t_train:.1f} s, browser {t_browser:.1f} s ({len(shaders)} shaders compiled in "
        f"{got.get('shader_ms', 0) / 1000:.1f} s, {got.get('shaders_skipped_f16')} float16 shaders skipped"
        f"{'' if got.get('shader_f16') else ': no shader-f16'}; held-out images run in "
        f"{got.get('bundles', {}).get('trained_digits', {}).get('heldout_ms', 0) / 1000:.1f} s)"
    )
    print(
        "ms per run: " + ", ".join(f"{k} {v.get('run_ms', 0):.1f}" for k, v in got.get("bundles", {}).items())
    )
    got["_want"] = want
    got["_jobs"] = {j["name"]: j for j in jobs}
    got["_optim_multi"] = _optim_multi(site, shaders)
    shutil.rmtree(tmp, ignore_errors=True)
    return got


def test_browser_compiles_every_shader(browser_report):
    assert "fatal" not in browser_report, browser_report["fatal"]
    bad = {f: m for f, m in browser_report["shaders"].items() if m}
    assert not bad, f"{len(bad)} shaders rejected by the browser's compiler, e.g. {next(iter(bad.items()))}"
    checked = len(browser_report["shaders"])
    assert checked > 300, f"only {checked} shaders compiled"


def test_browser_compiles_the_multi_tensor_optimizer_shaders(browser_report):
    """The optimizers' multi-tensor kernels (every rule, several chunk sizes, shared and
    distinct bindings) are in the catalog, and the browser compiled each without a message."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    optim = browser_report["_optim_multi"]
    # 3 rules x their flag combinations x 4 chunk sizes x 2 binding layouts, less duplicates
    assert len(optim) >= 100, f"only {len(optim)} multi-tensor optimizer shaders in the catalog"
    missing = [n for n in optim if n not in browser_report["shaders"]]
    assert not missing, f"{len(missing)} optimizer shaders were not compiled, e.g. {missing[0]}"
    bad = {n: browser_report["shaders"][n] for n in optim if browser_report["shaders"][n]}
    assert not bad, f"{len(bad)} optimizer shaders rejected, e.g. {next(iter(bad.items()))}"
    print(f"\n{len(optim)} multi-tensor optimizer shaders compiled in the browser")


@pytest.mark.parametrize(
    "name",
    [
        "elementwise",
        "reduction",
        "matmul",
        "conv",
        "softmax_layernorm",
        "attention",
        "digits_cnn",
        "embedding",
        "tiny_gpt",
        "symbolic_batch",
        "float16_fallback",
        "trained_digits",
    ],
)
def test_bundle_runs_in_browser_like_cpu(browser_report, name):
    assert "fatal" not in browser_report, browser_report["fatal"]
    r = browser_report["bundles"][name]
    assert "error" not in r, r["error"]
    want = browser_report["_want"][name]
    assert len(r["outputs"]) == len(want)
    # float16 results to float16's precision (the device and the CPU round alike, within an ulp)
    tol = {"rtol": 2e-3, "atol": 2e-3} if name.startswith("float16") else TOL
    for k, w in enumerate(want):
        spec = r["outputs_desc"][k]
        assert spec["shape"] == list(w.shape)
        got = np.array(r["outputs"][spec["name"]], dtype=np.float32).reshape(w.shape)
        np.testing.assert_allclose(got, w, **tol, err_msg=f"{name}: {spec['name']}")
    assert r["repeat_equal"], "a second run gave other bits"


def test_embedding_bundle_checks_its_indices(browser_report):
    """The token ids of an Embedding are checked by model.js, as the graph checks them on the host."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    r = browser_report["bundles"]["tiny_gpt"]
    assert "error" not in r, r["error"]
    e = r["bad_index_error"]
    assert e.startswith("BundleError input-range:") and "holds 13" in e and "[0, 12]" in e, e
    assert r["after_bad_index_equal"], "the model gave other bits after a rejected input"


def test_symbolic_batch_bundle_runs_each_exported_size(browser_report):
    """A graph captured with a symbolic batch, exported for several sizes, runs in the page at each."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    r = browser_report["bundles"]["symbolic_batch"]
    assert "error" not in r, r["error"]
    assert [v["sizes"] for v in r["variants"]] == [{"s0": b} for b in SIZED], r["variants"]
    assert r["inputs"][0]["symbolicShape"] == ["s0", 8], r["inputs"]
    runs = browser_report["_want"]["symbolic_batch/runs"]
    assert len(r["runs"]) == len(SIZED_RUNS) == len(runs)
    for b, got, want in zip(SIZED_RUNS, r["runs"], runs, strict=True):
        assert "error" not in got, f"batch {b}: {got['error']}"
        for k, w in enumerate(want):
            name = r["outputs_desc"][k]["name"]
            g = np.array(got[name], dtype=np.float32)
            assert g.size == w.size, f"batch {b}, {name}: {g.size} values, want shape {w.shape}"
            np.testing.assert_allclose(g.reshape(w.shape), w, **TOL, err_msg=f"batch {b}: {name}")
    # A batch size that was not exported: the documented error, naming the exported shapes.
    e = r["unexported_error"]
    assert e.startswith("BundleError input-shape:") and "[3,8] or [1,8] or [5,8]" in e, e


def test_browser_errors_are_the_documented_ones(browser_report):
    assert "fatal" not in browser_report, browser_report["fatal"]
    e = browser_report["errors"]
    assert e["shape"].startswith("BundleError input-shape:") and "must have shape [3,1,8,8]" in e["shape"], e
    assert e["shape_declared"].startswith("BundleError input-shape:"), e
    assert e["name"].startswith("BundleError input-name: unknown input 'nosuchinput'"), e
    assert e["dtype"].startswith("BundleError input-dtype:") and "Float64Array" in e["dtype"], e
    assert e["no_adapter"].startswith("BundleError no-adapter:"), e
    assert (
        e["no_webgpu"].startswith("BundleError no-webgpu:") and "navigator.gpu is missing" in e["no_webgpu"]
    ), e
    assert e["gpu_restored"], "the page's navigator.gpu was not restored after the no-WebGPU case"
    assert e["missing"].startswith("BundleError input-name: input '") and "is missing" in e["missing"], e
    assert e["not_object"].startswith("BundleError input: run() takes an object"), e
    bad = browser_report["bad_bundles"]
    assert (
        bad["bad_manifest"].startswith("BundleError bad-manifest:") and "version 2" in bad["bad_manifest"]
    ), bad
    assert bad["fetch"].startswith("BundleError fetch:") and "HTTP 404" in bad["fetch"], bad
    assert bad["shader"].startswith("BundleError shader:") and "does not compile" in bad["shader"], bad
    assert bad["device"].startswith("BundleError device:"), bad
    assert browser_report["bundles"]["digits_cnn"]["after_errors_equal"]


def test_bundles_make_device_objects_once(browser_report):
    """An instrumented device counts the page's calls: loading a bundle makes one shader module and
    one pipeline per shader, its buffers and bind groups and uploads its weights, once; each run
    after that only writes its inputs (three runs: no buffer, pipeline or bind group made)."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    checked = 0
    for name, job in browser_report["_jobs"].items():
        r = browser_report["bundles"][name]
        if "error" in r:
            continue  # reported by the test of that bundle
        e, load, runs = job["_expect"], r["counts"]["load"], r["counts"]["runs"]
        assert load.get("createShaderModule", 0) == e["shaders"], (name, load, e)
        pipelines = load.get("createComputePipelineAsync", 0) + load.get("createComputePipeline", 0)
        assert pipelines == e["shaders"], (name, load, e)
        assert load.get("createBuffer", 0) == e["buffers"], (name, load, e)
        assert load.get("createBindGroup", 0) == e["bind_groups"], (name, load, e)
        assert load.get("writeBuffer", 0) == e["uploads"], (name, load, e)
        made = {k: v for k, v in runs.items() if k != "writeBuffer" and v}
        assert not made, f"{name}: runs made device objects: {made}"
        assert runs.get("writeBuffer", 0) == 3 * e["inputs"], (
            f"{name}: {runs} for 3 runs of {e['inputs']} inputs"
        )
        checked += 1
    assert checked >= 12, f"only {checked} bundles counted"
    # Several batch sizes: each other size is built once, on its first run; going back to a size
    # builds nothing (runs at 1, 5, 3, 1 after three at 3).
    job, r = browser_report["_jobs"]["symbolic_batch"], browser_report["bundles"]["symbolic_batch"]
    sized, variants = r["counts"]["sized"], job["_expect_variants"]
    assert sized.get("createBuffer", 0) == sum(v["buffers"] for v in variants), (sized, variants)
    pipelines = sized.get("createComputePipelineAsync", 0) + sized.get("createComputePipeline", 0)
    assert pipelines == sum(v["shaders"] for v in variants), (sized, variants)
    runs = 3 + len(SIZED_RUNS)
    assert sized.get("writeBuffer", 0) == sum(v["uploads"] for v in variants) + runs * 2, (sized, variants)


def test_missing_feature_and_limit_are_the_documented_errors(browser_report):
    """An adapter without shader-f16 refuses a float16 bundle that stores float16 natively, naming the
    fallback; an adapter whose limit is below the bundle's need refuses it, naming the limit."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    jobs = browser_report["_jobs"]
    assert jobs["float16_fallback"]["features"] == [], "FG_GPU_NO_F16=1 still exported shader-f16"
    if "shader_f16" in fg.gpu.info()["features"]:
        assert jobs["float16"]["features"] == ["shader-f16"], (
            "the float16 bundle was exported without shader-f16"
        )
        e = browser_report["bundles"]["float16"]["fake_adapter_error"]
        assert e.startswith("BundleError missing-feature:") and "shader-f16" in e, e
        assert "the fallback: export the graph again in a process started with FG_GPU_NO_F16=1" in e, e
    else:  # this device stores float16 in f32 words: no bundle here needs the feature
        assert jobs["float16"]["features"] == [], jobs["float16"]
        print("\nmissing-feature not checked: this WebGPU adapter has no shader-f16 to export with")
    e = browser_report["bundles"]["digits_cnn"]["fake_adapter_error"]
    assert e.startswith("BundleError missing-limit:") and "maxStorageBufferBindingSize" in e, e
    assert "this adapter allows 64" in e, e


def test_float16_bundle_in_the_browser(browser_report):
    """The float16 bundle stored natively runs where the browser's adapter has shader-f16 and is
    refused with missing-feature where it has not; the fallback bundle (float16 in f32 words, exported
    with FG_GPU_NO_F16=1) runs on every adapter (compared in test_bundle_runs_in_browser_like_cpu)."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    r = browser_report["bundles"]["float16"]
    if browser_report["shader_f16"] or not browser_report["_jobs"]["float16"]["features"]:
        assert "error" not in r, r["error"]
        w = browser_report["_want"]["float16"][0]
        got = np.array(r["outputs"][r["outputs_desc"][0]["name"]], dtype=np.float32).reshape(w.shape)
        np.testing.assert_allclose(got, w, rtol=2e-3, atol=2e-3)
        print("\nthe browser's adapter has shader-f16: the native float16 bundle ran")
    else:
        assert r.get("error", "").startswith("BundleError missing-feature:"), r
        print("\nthe browser's adapter lacks shader-f16: the native float16 bundle was refused as documented")
    # The fallback computes in f32 words rounded to float16 after every write, as the CPU rounds:
    # its results are the CPU's float16 values (one float16 ulp apart at most, where the browser's
    # exp or tanh differ in their last float32 bit), which needs model.js to round the float32
    # inputs to float16 first.
    r = browser_report["bundles"]["float16_fallback"]
    assert "error" not in r, r["error"]
    w = browser_report["_want"]["float16_fallback"][0]
    got = np.array(r["outputs"][r["outputs_desc"][0]["name"]], dtype=np.float32).reshape(w.shape)
    ulp = np.spacing(np.abs(w).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(got - w) <= ulp), np.abs(got - w) / ulp
    exact = float((got == w).mean())
    print(f"float16 fallback: {exact:.0%} of the outputs equal to the CPU's bits")
    assert exact >= 0.9, f"only {exact:.0%} of the float16 outputs equal the CPU's"


def test_trained_digits_classify_the_held_out_images_as_on_the_cpu(browser_report):
    """The done-when: a CNN trained by examples/digits.py, exported by examples/web/export.py, gives
    the held-out images (one run each, as the page makes them) the CPU's classes and probabilities."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    r = browser_report["bundles"]["trained_digits"]
    assert "error" not in r, r["error"]
    ex = browser_report["_want"]["heldout"]
    got = np.array(r["heldout_probs"], dtype=np.float32).reshape(ex.cpu_probs.shape)
    np.testing.assert_allclose(got, ex.cpu_probs, **TOL)
    cpu = ex.cpu_probs.argmax(1)
    assert np.array_equal(got.argmax(1), cpu), f"{int((got.argmax(1) != cpu).sum())} held-out images differ"
    acc = float((cpu == ex.labels).mean())
    assert acc > 0.8, f"the trained CNN classifies only {acc:.1%} of the held-out images"
    print(f"\n{len(cpu)} held-out images classified in the browser as on the CPU (accuracy {acc:.1%})")


def test_digits_page_shows_the_drawn_digit_probabilities(browser_report):
    """examples/web/index.html: pointer strokes on its 8x8 pad (one cell drawn, then erased) make
    the bars show the CPU's probabilities of the drawn image."""
    assert "fatal" not in browser_report, browser_report["fatal"]
    p = browser_report["page"]
    assert p["status"] == "Model loaded.", p["status"]
    assert p["dark"] == [10, 11, 12, 13, 21, 28, 36, 43, 51], p["dark"]
    want = browser_report["_want"]["page"] * 100
    assert [b[0] for b in p["bars"]] == [str(k) for k in range(10)], p["bars"]
    shown = np.array([float(b[1].rstrip("%")) for b in p["bars"]])
    np.testing.assert_allclose(shown, want, atol=0.051)
    widths = np.array([float(b[2].rstrip("px")) for b in p["bars"]])
    np.testing.assert_allclose(widths, np.round(want * 3), atol=1)
