"""fg.save / fg.load: the safetensors layout, nested structures, validation, atomic writes."""

from __future__ import annotations

import json
import math
import os
import random
import stat
import struct

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.serialization import CheckpointError

safetensors_numpy = pytest.importorskip("safetensors.numpy")
from safetensors import safe_open  # noqa: E402

NUMPY_DTYPES = [fg.float32, fg.float64, fg.float16, fg.int32, fg.int64, fg.bool]
ALL_DTYPES = [*NUMPY_DTYPES, fg.bfloat16]


def _sample(dtype, shape, seed=0):
    g = fg.Generator().manual_seed(seed)
    if dtype == fg.bool:
        return fg.rand(*shape, generator=g) > 0.5
    if dtype in (fg.int32, fg.int64):
        return fg.randint(-1000, 1000, shape, generator=g).to(dtype)
    return fg.randn(*shape, generator=g).to(dtype)


def _np(t):
    """Values of a tensor as NumPy (bfloat16 widened to float32, which is exact)."""
    return (t.float() if t.dtype == fg.bfloat16 else t).numpy()


def _bits(t):
    """The raw 16-bit words of a bfloat16 tensor, read back through a checkpoint file."""
    return t.float().numpy().view(np.uint32) >> 16


def _assert_same(a, b):
    """Structural equality: same types (tuple vs list, int vs float), tensors equal in dtype/shape/value."""
    assert type(a) is type(b) or (isinstance(a, fg.Tensor) and isinstance(b, fg.Tensor)), (a, b)
    if isinstance(a, fg.Tensor):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(_np(a), _np(b))
    elif isinstance(a, dict):
        assert [(type(k), k) for k in a] == [(type(k), k) for k in b]
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def _header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n))


def _write_raw(path, header, data=b"", *, raw_header=None):
    blob = raw_header if raw_header is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + data)


# ----------------------------------------------------------------------------- flat state dicts


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (2, 3, 4)], ids=str)
def test_flat_round_trip(tmp_path, dtype, shape):
    t = _sample(dtype, shape)
    p = tmp_path / "ck.safetensors"
    fg.save({"t": t}, p)
    out = fg.load(p)
    assert list(out) == ["t"]
    _assert_same(out["t"], t)


def test_flat_round_trip_keeps_order_and_names(tmp_path):
    sd = {"z.weight": fg.randn(2, 3), "a.bias": fg.randn(2), "m.scale": fg.randn(4).half(), "": fg.arange(3)}
    fg.save(sd, tmp_path / "x")
    out = fg.load(str(tmp_path / "x"))
    assert list(out) == list(sd)
    _assert_same(out, sd)


def test_header_layout(tmp_path):
    p = tmp_path / "x.safetensors"
    fg.save({"w": fg.randn(2, 3), "b": fg.arange(4).int()}, p)
    n, header = _header(p)
    assert (8 + n) % 8 == 0
    assert header["w"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    assert header["b"] == {"dtype": "I32", "shape": [4], "data_offsets": [24, 40]}
    assert header["__metadata__"] == {"format": "ferrograd"}
    assert os.path.getsize(p) == 8 + n + 40


def test_non_contiguous_and_special_tensors(tmp_path):
    base = fg.arange(24).float().reshape(4, 6)
    sd = {
        "transposed": base.t(),
        "sliced": base[1:3, ::2],
        "expanded": fg.tensor([1.0, 2.0]).expand(3, 2),
        "requires_grad": fg.randn(3, requires_grad=True),
        "parameter": fg.nn.Parameter(fg.randn(2, 2)) if hasattr(fg.nn, "Parameter") else fg.randn(2, 2),
    }
    fg.save(sd, tmp_path / "x")
    out = fg.load(tmp_path / "x")
    for k, t in sd.items():
        np.testing.assert_array_equal(out[k].numpy(), t.detach().numpy())
        assert not out[k].requires_grad and out[k].is_contiguous()


def test_loaded_tensors_are_writable_copies(tmp_path):
    t = fg.randn(4)
    fg.save({"t": t}, tmp_path / "x")
    a, b = fg.load(tmp_path / "x")["t"], fg.load(tmp_path / "x")["t"]
    a.add_(1.0)
    np.testing.assert_array_equal(b.numpy(), t.numpy())
    np.testing.assert_allclose(a.numpy(), t.numpy() + 1.0)
    assert a.is_cpu


def test_bfloat16_is_bit_exact(tmp_path):
    # every bfloat16 bit pattern, signalling NaNs included, survives save -> load -> save
    words = np.arange(1 << 16, dtype=np.uint16)
    t = fg.serialization._bf16_from_words(words)
    p1, p2 = tmp_path / "a", tmp_path / "b"
    fg.save({"t": t}, p1)
    n, _ = _header(p1)
    with open(p1, "rb") as f:
        f.seek(8 + n)
        np.testing.assert_array_equal(np.frombuffer(f.read(), "<u2"), words)
    fg.save(fg.load(p1), p2)
    assert p1.read_bytes() == p2.read_bytes()
    finite = np.isfinite(fg.load(p1)["t"].float().numpy())
    np.testing.assert_array_equal(_bits(fg.load(p1)["t"])[finite], words[finite])


def test_float16_nan_payloads_are_bit_exact(tmp_path):
    words = np.array([0x7C01, 0xFC01, 0x7E00, 0x0001, 0x8000, 0x7BFF], np.uint16)
    fg.save({"h": fg.from_numpy(words.view(np.float16).copy())}, tmp_path / "x")
    np.testing.assert_array_equal(fg.load(tmp_path / "x")["h"].numpy().view(np.uint16), words)


def test_map_location(tmp_path):
    fg.save({"t": fg.ones(2)}, tmp_path / "x")
    assert fg.load(tmp_path / "x", map_location="cpu")["t"].is_cpu
    assert fg.load(tmp_path / "x", map_location=fg.device("cpu"))["t"].is_cpu
    with pytest.raises((ValueError, TypeError, RuntimeError)):
        fg.load(tmp_path / "x", map_location="no-such-device")


# ----------------------------------------------------------------------------- safetensors interop


def test_safetensors_reads_fg_files(tmp_path):
    sd = {f"t_{dtype}": _sample(dtype, (3, 2), seed=i) for i, dtype in enumerate(NUMPY_DTYPES)}
    sd["scalar"] = fg.tensor(1.5)
    sd["empty"] = fg.zeros(0, 4, dtype=fg.int64)
    p = tmp_path / "model.safetensors"
    fg.save(sd, p)
    out = safetensors_numpy.load_file(str(p))
    assert set(out) == set(sd)
    for k, t in sd.items():
        assert out[k].dtype == t.numpy().dtype and out[k].shape == tuple(t.shape)
        np.testing.assert_array_equal(out[k], t.numpy())


def test_safetensors_parses_bf16_and_nested_headers(tmp_path):
    # NumPy cannot hold bfloat16, but the Rust parser must accept the header (offsets, alignment, metadata)
    p = tmp_path / "x.safetensors"
    fg.save({"model": {"w": fg.randn(3).bfloat16()}, "epoch": 2}, p)
    with safe_open(str(p), framework="numpy") as f:
        assert list(f.keys()) == ["model.w"]
        assert f.metadata()["format"] == "ferrograd"
    flat = {"x": fg.randn(2, 2), "step": fg.tensor(3)}
    fg.save({"opt": flat, "lr": 0.1}, p)
    out = safetensors_numpy.load_file(str(p))
    assert set(out) == {"opt.x", "opt.step"}
    np.testing.assert_array_equal(out["opt.x"], flat["x"].numpy())


def test_fg_reads_safetensors_files(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal(5),
        "f16": rng.standard_normal((2, 2)).astype(np.float16),
        "i32": rng.integers(-5, 5, (4,)).astype(np.int32),
        "i64": rng.integers(-5, 5, (2, 3)),
        "bool": rng.random(7) > 0.5,
        "scalar": np.array(2.0, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    p = tmp_path / "np.safetensors"
    safetensors_numpy.save_file(arrays, str(p), metadata={"format": "np", "note": "hi"})
    out = fg.load(p)
    assert set(out) == set(arrays)
    for k, a in arrays.items():
        assert out[k].numpy().dtype == a.dtype and tuple(out[k].shape) == a.shape
        np.testing.assert_array_equal(out[k].numpy(), a)


def test_fg_reads_safetensors_bf16(tmp_path):
    # safetensors writes bfloat16 from raw bytes with safe_open-compatible headers; build one by hand
    words = np.array([0x3F80, 0xC020, 0x7F80, 0x0001], np.uint16)
    p = tmp_path / "bf.safetensors"
    _write_raw(p, {"x": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}, words.tobytes())
    out = fg.load(p)["x"]
    assert out.dtype == fg.bfloat16 and tuple(out.shape) == (2, 2)
    np.testing.assert_array_equal(_bits(out).ravel(), words)


# ----------------------------------------------------------------------------- nested structures


def test_nested_round_trip(tmp_path):
    obj = {
        "model": {"fc.weight": fg.randn(3, 2), "fc.bias": fg.randn(3)},
        "epoch": 3,
        "lr": 0.001,
        "flags": [True, False, None],
        "name": "run-1 ✓",
        "pair": (1, 2.5, (fg.arange(3),)),
        "ints": {0: "zero", "0": "string zero", -7: [1, (2,)]},
        "special": [float("nan"), float("inf"), -float("inf"), -0.0, 1e300, 2**70],
        "empty": {"d": {}, "l": [], "t": ()},
        "half": fg.randn(2).half(),
    }
    p = tmp_path / "ck"
    fg.save(obj, p)
    _assert_same(obj, fg.load(p))
    assert math.copysign(1.0, fg.load(p)["special"][3]) == -1.0


def test_tensor_names_are_unique_and_readable(tmp_path):
    obj = {"a.b": fg.ones(1), "a": {"b": fg.zeros(1)}, "__metadata__": fg.ones(2), "l": [fg.ones(3)]}
    fg.save(obj, tmp_path / "x")
    _, header = _header(tmp_path / "x")
    names = set(header) - {"__metadata__"}
    assert len(names) == 4 and "l.0" in names and "a.b" in names
    _assert_same(obj, fg.load(tmp_path / "x"))


def test_top_level_tensor_and_list(tmp_path):
    t = fg.randn(3)
    fg.save(t, tmp_path / "t")
    _assert_same(fg.load(tmp_path / "t"), t)
    fg.save([t, t], tmp_path / "l")  # the same tensor twice is stored twice
    out = fg.load(tmp_path / "l")
    _assert_same(out, [t, t])
    assert out[0] is not out[1]


def test_numpy_scalars_are_stored_as_python_numbers(tmp_path):
    fg.save({"a": np.int64(3), "b": np.float32(0.5), "c": np.bool_(True), np.int64(4): 1}, tmp_path / "x")
    out = fg.load(tmp_path / "x")
    assert out == {"a": 3, "b": 0.5, "c": True, 4: 1}
    assert type(out["a"]) is int and type(out["c"]) is bool


@pytest.mark.parametrize(
    "obj, exc, match",
    [
        ({"s": {1, 2}}, TypeError, r"obj\.s is a set"),
        ({"o": object()}, TypeError, r"obj\.o is a object"),
        ({(1, 2): 3}, TypeError, "keys must be str or int"),
        ({True: 3}, TypeError, "keys must be str or int"),
        ({"x": fg.ones(1), "b": b"bytes"}, TypeError, "is a bytes"),
    ],
)
def test_unsupported_values_are_refused(tmp_path, obj, exc, match):
    with pytest.raises(exc, match=match):
        fg.save(obj, tmp_path / "x")
    assert os.listdir(tmp_path) == []


def test_cycles_and_deep_nesting_are_refused(tmp_path):
    cyc: list = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="reference cycle"):
        fg.save({"c": cyc}, tmp_path / "x")
    deep: list = []
    for _ in range(fg.serialization.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="levels deep"):
        fg.save(deep, tmp_path / "x")
    assert os.listdir(tmp_path) == []


def test_optimizer_state_round_trip_continues_identically(tmp_path):
    def make_params():
        g = fg.Generator().manual_seed(7)
        return [fg.randn(4, 3, generator=g, requires_grad=True), fg.randn(3, generator=g, requires_grad=True)]

    x = fg.randn(8, 4, generator=fg.Generator().manual_seed(1))

    def step(params, opt):
        opt.zero_grad()
        w, b = params
        loss = ((x @ w + b).tanh() ** 2).mean()
        loss.backward()
        opt.step()

    params = make_params()
    opt = fg.optim.Adam(params, lr=0.05, betas=(0.8, 0.99), amsgrad=True)
    for _ in range(3):
        step(params, opt)
    p = tmp_path / "ck.safetensors"
    fg.save({"params": [q.detach() for q in params], "optimizer": opt.state_dict(), "epoch": 3}, p)
    for _ in range(4):
        step(params, opt)
    expected = [q.detach().numpy().copy() for q in params]

    ck = fg.load(p)
    osd = ck["optimizer"]
    assert ck["epoch"] == 3
    assert set(osd["state"]) == {0, 1} and all(type(k) is int for k in osd["state"])
    assert osd["state"][0]["step"] == 3 and type(osd["state"][0]["step"]) is int
    assert osd["param_groups"][0]["betas"] == (0.8, 0.99) and type(osd["param_groups"][0]["betas"]) is tuple
    assert osd["param_groups"][0]["params"] == [0, 1]

    params2 = make_params()
    with fg.no_grad():
        for q, saved in zip(params2, ck["params"], strict=True):
            q.copy_(saved)
    opt2 = fg.optim.Adam(params2, lr=0.05)
    opt2.load_state_dict(osd)
    assert opt2.param_groups[0]["betas"] == (0.8, 0.99) and opt2.param_groups[0]["amsgrad"] is True
    for _ in range(4):
        step(params2, opt2)
    for q, e in zip(params2, expected, strict=True):
        np.testing.assert_array_equal(q.detach().numpy(), e)


# ----------------------------------------------------------------------------- atomic writes


def test_save_replaces_atomically_and_cleans_up_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "ck.safetensors"
    fg.save({"t": fg.ones(3)}, p)
    good = p.read_bytes()

    calls = []
    original = fg.serialization._tensor_bytes

    def failing(t):
        calls.append(t)
        if len(calls) == 2:
            raise OSError("disk full (simulated)")
        return original(t)

    monkeypatch.setattr(fg.serialization, "_tensor_bytes", failing)
    with pytest.raises(OSError, match="simulated"):
        fg.save({"a": fg.zeros(100), "b": fg.zeros(100)}, p)
    assert len(calls) == 2  # failed half-way through the data
    assert p.read_bytes() == good
    assert os.listdir(tmp_path) == ["ck.safetensors"]


def test_save_file_permissions_follow_umask(tmp_path):
    old = os.umask(0o022)
    try:
        fg.save({"t": fg.ones(1)}, tmp_path / "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "x").st_mode) == 0o644


def test_save_to_a_directory_fails_cleanly(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        fg.save({"t": fg.ones(1)}, tmp_path / "d")
    assert os.listdir(tmp_path) == ["d"]


# ----------------------------------------------------------------------------- validation


def _valid_file(tmp_path):
    p = tmp_path / "good.safetensors"
    fg.save({"w": fg.randn(2, 3), "b": fg.arange(2), "m": fg.tensor([True, False])}, p)
    return p


F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(
    "header, data, match",
    [
        ({"x": {"dtype": "U16", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4, "unsupported dtype 'U16'"),
        ({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "non-negative integers"),
        ({"x": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, b"\0" * 8, "shape must be a list"),
        ({"x": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, b"\0" * 8, "shape must be a list"),
        ({"x": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, b"\0" * 4, "shape must be a list"),
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 6]}}, b"\0" * 6, "needs 8"),
        ({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 16"),
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, "begin <= end"),
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, b"\0" * 8, "data_offsets must be"),
        ({"x": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, "exactly the keys"),
        ({"x": {**F32_2, "extra": 1}}, b"\0" * 8, "exactly the keys"),
        ({"x": [1, 2]}, b"", "entry must be an object"),
        ({"x": F32_2, "y": F32_2}, b"\0" * 8, "overlaps"),
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, "leaves a gap"),
        ({"x": F32_2}, b"\0" * 12, "4 bytes after the last tensor"),
        ({"x": F32_2}, b"\0" * 5, "truncated"),
        ({"x": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, b"\0" * 8, "needs"),
        ({"x": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x02", "other than 0 and 1"),
        ({"__metadata__": {"a": 1}}, b"", "mapping strings to strings"),
        ({"__metadata__": ["a"]}, b"", "mapping strings to strings"),
    ],
)
def test_malformed_headers(tmp_path, header, data, match):
    p = tmp_path / "bad.safetensors"
    _write_raw(p, header, data)
    with pytest.raises(CheckpointError, match=match) as ei:
        fg.load(p)
    assert str(p) in str(ei.value)
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize(
    "raw, match",
    [
        (b"", "too short"),
        (b"\x01\x02\x03", "too short"),
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "bad zip archive"),  # a truncated zip (torch.save's format)
        (struct.pack("<Q", 2**63) + b"{}", "exceeds"),
        (struct.pack("<Q", 2**64 - 1), "exceeds"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not valid UTF-8"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 5) + b"{\"a\":", "not valid JSON"),
        (struct.pack("<Q", 13) + b'{"a":1,"a":2}', "duplicate key 'a'"),
        (struct.pack("<Q", 10) + b'{"a":NaN} ', "not valid JSON"),
        (struct.pack("<Q", 8) + b'{"a": 1}', "entry must be an object"),
        (struct.pack("<Q", 4) + b"{}", "truncated"),
    ],
)
def test_malformed_files(tmp_path, raw, match):
    p = tmp_path / "bad.bin"
    p.write_bytes(raw)
    with pytest.raises(CheckpointError, match=match) as ei:
        fg.load(p)
    assert str(p) in str(ei.value)


def test_deeply_nested_header_json(tmp_path):
    p = tmp_path / "deep"
    blob = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    p.write_bytes(struct.pack("<Q", len(blob)) + blob)
    with pytest.raises(CheckpointError):
        fg.load(p)


def test_header_length_cap(tmp_path, monkeypatch):
    p = _valid_file(tmp_path)
    monkeypatch.setattr(fg.serialization, "MAX_HEADER_BYTES", 16)
    with pytest.raises(CheckpointError, match="exceeds the limit"):
        fg.load(p)


def _with_skeleton(tmp_path, root, tensors=None, version=1):
    tensors = tensors if tensors is not None else {"x": F32_2}
    meta = {"ferrograd": json.dumps({"version": version, "root": root})}
    p = tmp_path / "sk.safetensors"
    size = sum(v["data_offsets"][1] - v["data_offsets"][0] for v in tensors.values())
    _write_raw(p, {"__metadata__": meta, **tensors}, b"\0" * size)
    return p


@pytest.mark.parametrize(
    "root, match",
    [
        ({"tensor": "missing"}, "does not contain"),
        ([{"tensor": "x"}, {"tensor": "x"}], "more than once"),
        ([1, 2], r"does not refer to tensor\(s\) \['x'\]"),
        ({"pickle": "cos\nsystem\n"}, "unknown node type"),
        ({"tensor": "x", "tuple": []}, "unexpected node"),
        ({"tuple": {"a": 1}}, "tuple node"),
        ({"dict": [["k"]]}, "pair"),
        ({"dict": [[1.5, {"tensor": "x"}]]}, "key must be"),
        ({"dict": [["k", 1], ["k", {"tensor": "x"}]]}, "appears twice"),
        ({"float": "1e5"}, "float node"),
    ],
)
def test_inconsistent_skeleton(tmp_path, root, match):
    p = _with_skeleton(tmp_path, root)
    with pytest.raises(CheckpointError, match=match):
        fg.load(p)


def test_skeleton_version_and_json(tmp_path):
    with pytest.raises(CheckpointError, match="version 2 is not supported"):
        fg.load(_with_skeleton(tmp_path, {"tensor": "x"}, version=2))
    p = tmp_path / "bad"
    _write_raw(p, {"__metadata__": {"ferrograd": "{not json"}})
    with pytest.raises(CheckpointError, match="not valid JSON"):
        fg.load(p)
    deep = {"tensor": "x"}
    for _ in range(fg.serialization.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(CheckpointError, match="levels deep"):
        fg.load(_with_skeleton(tmp_path, deep))
    # sanity: the well-formed version loads
    assert tuple(fg.load(_with_skeleton(tmp_path, {"tuple": [{"tensor": "x"}]}))[0].shape) == (2,)


def test_every_truncation_is_a_clear_error(tmp_path):
    p = _valid_file(tmp_path)
    good = p.read_bytes()
    bad = tmp_path / "t"
    for n in range(len(good)):
        bad.write_bytes(good[:n])
        with pytest.raises(CheckpointError):
            fg.load(bad)


def test_random_corruption_never_crashes(tmp_path):
    p = tmp_path / "nested"
    fg.save({"m": {"w": fg.randn(3, 2)}, "s": (1, 2.0), "k": {0: fg.arange(2)}, "b": fg.tensor([True])}, p)
    good = bytearray(p.read_bytes())
    rng = random.Random(0)
    bad = tmp_path / "c"
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
        bad.write_bytes(bytes(data))
        try:
            fg.load(bad)
            outcomes["ok"] += 1
        except CheckpointError:
            outcomes["error"] += 1
    assert outcomes["error"] > 0


def test_failed_load_state_dict_leaves_tensors_unchanged(tmp_path):
    if hasattr(fg.nn, "Linear"):
        model = fg.nn.Linear(4, 3)
        sd = model.state_dict()

        def load_into(obj):
            model.load_state_dict(obj)

        def current():
            return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    else:  # plain tensors standing in for a module
        params = {"weight": fg.randn(3, 4), "bias": fg.randn(3)}
        sd = params

        def load_into(obj):
            with fg.no_grad():
                for k, v in obj.items():
                    params[k].copy_(v)

        def current():
            return {k: v.numpy().copy() for k, v in params.items()}

    p = tmp_path / "model.safetensors"
    fg.save({k: fg.randn(*v.shape) for k, v in sd.items()}, p)
    data = p.read_bytes()
    before = current()
    for corrupt in (data[:-3], data[:8] + b"X" + data[9:], b"\xff" * 8 + data[8:]):
        p.write_bytes(corrupt)
        with pytest.raises(CheckpointError):
            load_into(fg.load(p))
        after = current()
        assert before.keys() == after.keys()
        for k in before:
            np.testing.assert_array_equal(after[k], before[k])
    p.write_bytes(data)
    load_into(fg.load(p))  # the intact file loads and changes the tensors
    assert any(not np.array_equal(current()[k], before[k]) for k in before)
