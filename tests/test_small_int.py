"""The 8/16-bit integer dtypes (uint8, int8, int16): promotion, casts, wrapping arithmetic,
reductions, creation, NumPy interop and state on disk.

References: ``tests/fixtures/parity/small_int.json``, written by
``scripts/make_small_int_references.py`` with PyTorch (its version is recorded in the file), and
NumPy computed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

REF = json.loads((Path(__file__).parent / "fixtures" / "parity" / "small_int.json").read_text())
SMALL = ("uint8", "int8", "int16")
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")


def test_reference_version_recorded():
    assert REF["torch_version"]


@pytest.mark.parametrize("kind", ["tensor", "zero_dim"])
def test_promotion_table(kind):
    wrong = []
    for a in DTYPES:
        for b in DTYPES:
            x = fg.ones(2, dtype=getattr(fg, a))
            y = fg.ones(() if kind == "zero_dim" else 2, dtype=getattr(fg, b))
            got = (x + y).dtype.name
            if got != REF["promote"][kind][f"{a},{b}"]:
                wrong.append((a, b, got, REF["promote"][kind][f"{a},{b}"]))
    assert not wrong, wrong


def test_promotion_with_python_scalars():
    wrong = []
    for a in DTYPES:
        for s, v in (("int", 3), ("float", 2.5), ("bool", True)):
            got = (fg.ones(2, dtype=getattr(fg, a)) + v).dtype.name
            if got != REF["promote"]["scalar"][f"{a},{s}"]:
                wrong.append((a, s, got))
    assert not wrong, wrong


def _decode(v):
    return float(v) if isinstance(v, str) else v


@pytest.mark.parametrize("src", ["float32", "float64", "int64"])
def test_casts_to_small_ints_match_pytorch(src):
    c = REF["casts"][src]
    x = fg.tensor([_decode(v) for v in c["input"]], dtype=getattr(fg, src))
    for d in SMALL:
        got = x.to(getattr(fg, d))
        assert got.dtype == getattr(fg, d)
        assert got.tolist() == c[d], (src, d)


@pytest.mark.parametrize("d", SMALL)
def test_casts_from_small_ints_to_every_dtype(d):
    info = np.iinfo(d)
    a = np.array([info.min, -1 if info.min < 0 else 0, 0, 1, 7, info.max], dtype=d)
    x = fg.from_numpy(a)
    for dst in DTYPES:
        y = x.to(getattr(fg, dst))
        assert y.dtype.name == dst
        if dst == "bfloat16":
            y = y.float()
            ref = a.astype(np.float32)
            ref = (ref.view(np.uint32) + 0x7FFF + ((ref.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
            np.testing.assert_array_equal(y.numpy(), ref.view(np.float32))
        else:
            np.testing.assert_array_equal(y.numpy(), a.astype(dst))
    # and back, through every integer dtype
    for mid in ("int16", "int32", "int64", "float32", "float64"):
        if np.iinfo(d).bits <= 16:
            back = x.to(getattr(fg, mid)).to(getattr(fg, d))
            np.testing.assert_array_equal(back.numpy(), a)


@pytest.mark.parametrize("d", SMALL)
def test_wrapping_arithmetic_and_bitwise(d):
    r = REF["ops"][d]
    a = fg.tensor(r["a"], dtype=getattr(fg, d))
    b = fg.tensor(r["b"], dtype=getattr(fg, d))
    nz = fg.where(b == 0, fg.ones_like(b), b)
    cases = {
        "add": a + b,
        "sub": a - b,
        "mul": a * b,
        "add_300": a + 300,
        "mul_3": a * 3,
        "neg": -a,
        "abs": a.abs(),
        "floordiv": a // nz,
        "remainder": a % nz,
        "shl_3": a << 3,
        "shr_1": a >> 1,
        "and": a & b,
        "or": a | b,
        "xor": a ^ b,
        "invert": ~a,
        "cumsum": a.cumsum(0),
        "sort": a.flip(0).sort().values,
        "clamp": a.clamp(1, 100),
    }
    for k, got in cases.items():
        assert got.tolist() == r[k], (d, k, got.tolist(), r[k])
        if k not in ("cumsum",):
            assert got.dtype.name == d, (k, got.dtype)
    assert a.cumsum(0).dtype.name == r["cumsum_dtype"]
    q = a / nz
    assert q.dtype.name == r["truediv_dtype"]
    np.testing.assert_allclose(q.numpy(), r["truediv"], rtol=1e-6)
    s = a.sum()
    assert s.dtype.name == r["sum_dtype"] and s.item() == r["sum"]
    assert a[1:4].prod().item() == r["prod"] and a[1:4].prod().dtype == fg.int64
    assert a.max().item() == r["max"] and a.max().dtype.name == d
    assert a.argmin().item() == r["argmin"]


def test_uint8_wraps_at_255():
    x = fg.tensor([255, 0], dtype=fg.uint8)
    assert (x + 1).tolist() == [0, 1]
    assert (x - 1).tolist() == [254, 255]
    assert (x + 1).dtype == fg.uint8


@pytest.mark.parametrize("d", SMALL)
def test_comparisons_where_and_joins(d):
    rng = np.random.default_rng(0)
    info = np.iinfo(d)
    a = rng.integers(info.min, info.max + 1, size=(3, 5)).astype(d)
    b = rng.integers(info.min, info.max + 1, size=(3, 5)).astype(d)
    x, y = fg.from_numpy(a), fg.from_numpy(b)
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        got = getattr(x, op)(y)
        assert got.dtype == fg.bool
        np.testing.assert_array_equal(
            got.numpy(),
            getattr(
                np,
                {
                    "eq": "equal",
                    "ne": "not_equal",
                    "lt": "less",
                    "le": "less_equal",
                    "gt": "greater",
                    "ge": "greater_equal",
                }[op],
            )(a, b),
        )
    np.testing.assert_array_equal(fg.where(x > y, x, y).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(fg.maximum(x, y).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(fg.cat([x, y], 0).numpy(), np.concatenate([a, b], 0))
    np.testing.assert_array_equal(fg.stack([x, y], 1).numpy(), np.stack([a, b], 1))
    idx = fg.tensor([2, 0, 4])
    np.testing.assert_array_equal(x.index_select(1, idx).numpy(), a[:, [2, 0, 4]])
    np.testing.assert_array_equal(x[:, idx].numpy(), a[:, [2, 0, 4]])
    g = fg.tensor([[0, 1], [2, 2], [4, 3]])
    np.testing.assert_array_equal(x.gather(1, g).numpy(), np.take_along_axis(a, g.numpy(), 1))
    m = x > y
    np.testing.assert_array_equal(x.masked_fill(m, 7).numpy(), np.where(a > b, 7, a).astype(d))
    np.testing.assert_array_equal(x[m].numpy(), a[a > b])
    np.testing.assert_array_equal(x.max(1).values.numpy(), a.max(1))
    np.testing.assert_array_equal(x.argmax(1).numpy(), a.argmax(1))
    np.testing.assert_array_equal(x.min(0).values.numpy(), a.min(0))
    v, i = x.sort(1)
    np.testing.assert_array_equal(v.numpy(), np.sort(a, 1))
    np.testing.assert_array_equal(np.take_along_axis(a, i.numpy(), 1), np.sort(a, 1))
    np.testing.assert_array_equal(x.topk(2, 1).values.numpy(), -np.sort(-a.astype(np.int64), 1)[:, :2])


@pytest.mark.parametrize("d", SMALL)
def test_creation_and_interop(d):
    dt = getattr(fg, d)
    assert fg.zeros(2, 3, dtype=dt).dtype == dt
    assert fg.ones(4, dtype=dt).tolist() == [1, 1, 1, 1]
    assert fg.full((2,), 5, dtype=dt).tolist() == [5, 5]
    assert fg.arange(0, 6, 2, dtype=dt).tolist() == [0, 2, 4]
    assert fg.empty(3, dtype=dt).dtype == dt
    assert fg.tensor([1, 2], dtype=d).dtype == dt
    assert fg.zeros(2, dtype=dt).element_size() == np.dtype(d).itemsize
    a = np.array([[1, 2], [3, 4]], dtype=d)
    for t in (fg.from_numpy(a), fg.tensor(a), fg.as_tensor(a)):
        assert t.dtype == dt
        out = t.numpy()
        assert out.dtype == np.dtype(d)
        np.testing.assert_array_equal(out, a)
    assert isinstance(fg.tensor(a)[0, 1].item(), int)
    assert fg.tensor(a).tolist() == a.tolist()
    t = fg.from_numpy(a)
    a[0, 0] = 9
    assert t[0, 0].item() == 9  # from_numpy shares memory


def test_conversion_methods_and_type_names():
    x = fg.tensor([1.7, -2.2, 300.0])
    assert x.byte().dtype == fg.uint8 and x.byte().tolist() == [1, 254, 44]
    assert x.char().dtype == fg.int8 and x.char().tolist() == [1, -2, 44]
    assert x.short().dtype == fg.int16 and x.short().tolist() == [1, -2, 300]
    assert x.byte().type() == "ferrograd.ByteTensor"
    assert x.char().type() == "ferrograd.CharTensor"
    assert x.short().type() == "ferrograd.ShortTensor"
    assert x.type("torch.ByteTensor").dtype == fg.uint8
    assert x.type(fg.int16).dtype == fg.int16
    assert fg.short is fg.int16
    assert not fg.uint8.is_signed and fg.int8.is_signed and not fg.uint8.is_floating_point


def test_iinfo_finfo():
    for d in SMALL + ("int32", "int64"):
        i = fg.iinfo(getattr(fg, d))
        assert (i.min, i.max, i.bits) == (np.iinfo(d).min, np.iinfo(d).max, np.iinfo(d).bits)
    for d in ("float16", "float32", "float64"):
        f = fg.finfo(getattr(fg, d))
        assert f.eps == float(np.finfo(d).eps) and f.max == float(np.finfo(d).max)
        assert f.tiny == float(np.finfo(d).tiny)
    with pytest.raises(TypeError, match="iinfo: float32 is not an integer dtype"):
        fg.iinfo(fg.float32)
    with pytest.raises(TypeError, match="finfo: uint8"):
        fg.finfo(fg.uint8)


def test_float_functions_compute_in_float32():
    x = fg.tensor([0, 1, 4, 255], dtype=fg.uint8)
    y = x.sqrt()
    assert y.dtype == fg.float32
    np.testing.assert_allclose(y.numpy(), np.sqrt([0, 1, 4, 255]), rtol=1e-6)
    img = fg.from_numpy(np.arange(12, dtype=np.uint8).reshape(3, 4) * 20)
    f = img.float() / 255
    np.testing.assert_allclose(f.numpy(), (np.arange(12).reshape(3, 4) * 20) / 255, rtol=1e-6)
    assert (img / 255).dtype == fg.float32


def test_save_load_and_state_dict(tmp_path):
    rng = np.random.default_rng(1)
    ts = {
        d: fg.from_numpy(rng.integers(np.iinfo(d).min, np.iinfo(d).max + 1, size=(2, 3)).astype(d))
        for d in SMALL
    }
    p = tmp_path / "t.safetensors"
    fg.save(ts, p)
    back = fg.load(p)
    for d in SMALL:
        assert back[d].dtype == getattr(fg, d)
        np.testing.assert_array_equal(back[d].numpy(), ts[d].numpy())
    header = json.loads(p.read_bytes()[8 : 8 + int.from_bytes(p.read_bytes()[:8], "little")])
    assert {header[d]["dtype"] for d in SMALL} == {"U8", "I8", "I16"}

    class M(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = fg.nn.Linear(2, 2)
            self.register_buffer("lut", fg.arange(0, 256, dtype=fg.uint8))

    m = M()
    sd = m.state_dict()
    assert sd["lut"].dtype == fg.uint8
    fg.save(sd, tmp_path / "m.safetensors")
    m2 = M()
    m2.lut.fill_(0)
    m2.load_state_dict(fg.load(tmp_path / "m.safetensors"))
    assert m2.lut.dtype == fg.uint8 and m2.lut.tolist() == list(range(256))


def test_default_collate_keeps_uint8():
    imgs = [np.full((2, 2), i, dtype=np.uint8) for i in (0, 128, 255)]
    batch = fg.data.default_collate(imgs)
    assert batch.dtype == fg.uint8 and batch.shape == (3, 2, 2)
    batch = fg.data.default_collate([fg.from_numpy(a) for a in imgs])
    assert batch.dtype == fg.uint8
    np.testing.assert_array_equal(batch.numpy(), np.stack(imgs))


def test_dlpack_round_trip():
    for d in SMALL:
        a = np.arange(6, dtype=d).reshape(2, 3)
        t = fg.from_dlpack(a)
        assert t.dtype == getattr(fg, d)
        np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_bad_inputs_raise_clear_errors():
    x = fg.tensor([1, 2, 3], dtype=fg.uint8)
    with pytest.raises(IndexError, match="uint8"):
        fg.arange(5)[x]
    with pytest.raises(TypeError, match="gather.*int8|int8.*gather"):
        fg.arange(5.0).gather(0, x.char())
    with pytest.raises(RuntimeError, match="overflow|does not fit|out of range"):
        fg.tensor([300], dtype=fg.uint8)


def test_gpu_move_is_a_clear_error():
    if not fg.gpu.is_available():
        pytest.skip("no WebGPU adapter")
    with pytest.raises(TypeError, match="uint8 is not supported on the gpu device"):
        fg.tensor([1, 2], dtype=fg.uint8).to("gpu")


def test_captured_graph_and_compile():
    def f(x, y):
        return (x + y) * 3, (x > y), x.sum()

    a = fg.tensor([250, 3, 7], dtype=fg.uint8)
    b = fg.tensor([10, 200, 7], dtype=fg.uint8)
    cf = fg.compile(f)
    for _ in range(2):
        got = cf(a, b)
        want = f(a, b)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.tolist() == w.tolist()
    assert want[0].tolist() == [(250 + 10) * 3 % 256, (3 + 200) * 3 % 256, 42]


def test_graph_save_round_trip(tmp_path):
    def f(x):
        return (x * 2 + 1).to(fg.int16) - 100

    x = fg.tensor([[1, 200], [7, 255]], dtype=fg.uint8)
    cf = fg.compile(f)
    cf(x)
    p = tmp_path / "g.fgraph"
    cf.graph(x).save(p)
    g2 = fg.load_graph(p)
    got = g2(x)
    assert got.dtype == fg.int16
    assert got.tolist() == [
        [(2 * 1 + 1) - 100, (2 * 200 + 1) % 256 - 100],
        [15 - 100, (2 * 255 + 1) % 256 - 100],
    ]


def test_onnx_export_maps_small_ints(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

    def f(x, y):
        return (x + y) * 3, x.float() / 255.0, x.to(fg.int16) - y.to(fg.int16), x.sum(), x > y

    x = fg.tensor([250, 3, 7], dtype=fg.uint8)
    y = fg.tensor([10, 200, 7], dtype=fg.uint8)
    p = tmp_path / "m.onnx"
    fg.onnx.export(f, (x, y), p)
    s = ort.InferenceSession(str(p))
    assert [i.type for i in s.get_inputs()] == ["tensor(uint8)", "tensor(uint8)"]
    assert [o.type for o in s.get_outputs()][2] == "tensor(int16)"
    outs = s.run(None, {s.get_inputs()[0].name: x.numpy(), s.get_inputs()[1].name: y.numpy()})
    for got, want in zip(outs, f(x, y), strict=True):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-6)


def _dec(v):
    return float(v) if isinstance(v, str) else v


@pytest.mark.parametrize("d", DTYPES)
@pytest.mark.parametrize("how", ["full", "fill_"])
def test_fill_values_and_overflow_errors_match_pytorch(d, how):
    """``full`` and ``fill_`` store what PyTorch stores and refuse (RuntimeError naming the op,
    the value and the dtype) what PyTorch refuses; a refused ``fill_`` leaves the tensor as it was."""
    table = REF["fill"]
    wrong = []
    for v, want in zip(table["values"], table[d][how], strict=True):
        v = _dec(v)
        x = fg.ones(1, dtype=getattr(fg, d))
        try:
            out = fg.full((1,), v, dtype=getattr(fg, d)) if how == "full" else x.fill_(v)
            got = out.tolist()[0]
        except RuntimeError as e:
            got = "error"
            assert how in str(e) and d in str(e) and "overflow" in str(e), str(e)
            assert x.tolist() in ([1], [True]), x.tolist()  # a refused fill_ changed nothing
        if want == "error" or got == "error":
            ok = got == want
        else:
            ok = np.array_equal(
                np.array([got], np.float64), np.array([_dec(want)], np.float64), equal_nan=True
            )
        if not ok:
            wrong.append((v, got, want))
    assert not wrong, f"{d} {how}: (value, ferrograd, pytorch) {wrong}"


@pytest.mark.filterwarnings("ignore:fg.compile")  # each new scalar value traces again, and says so
@pytest.mark.parametrize("d", SMALL)
def test_captured_full_and_fill_refuse_what_eager_refuses(d):
    """A compiled ``full`` / ``fill_`` takes its value as a scalar argument; each call stores
    what PyTorch stores and refuses (RuntimeError naming the op, the value and the dtype) what
    PyTorch refuses, the compiled function staying usable after a refusal. A value that
    overflows inside an ``fg.Graph`` block is refused while the graph is recorded."""
    dtype = getattr(fg, d)
    table = REF["fill"]
    compiled = {
        "full": fg.compile(lambda x, v: x + fg.full((2,), v, dtype=dtype)),
        "fill_": fg.compile(lambda x, v: x.clone().fill_(v)),
    }
    for how, fn in compiled.items():
        wrong = []
        for v, want in zip(table["values"], table[d][how], strict=True):
            v = _dec(v)
            try:
                got = fn(fg.zeros(2, dtype=dtype), v).tolist()
                assert got[0] == got[1]
                got = got[0]
            except RuntimeError as e:
                got = "error"
                assert how in str(e) and d in str(e) and "overflow" in str(e), str(e)
            if want == "error" or got == "error":
                ok = got == want
            else:
                ok = float(got) == float(_dec(want))
            if not ok:
                wrong.append((v, got, want))
        assert not wrong, f"compiled {d} {how}: (value, ferrograd, pytorch) {wrong}"
        assert fn.stats.traces > 1
    big = REF["fill"]["values"][REF["fill"][d]["full"].index("error", 10)]
    with pytest.raises(RuntimeError, match=f"full.*{d}.*overflow"):
        with fg.Graph():
            x = fg.placeholder(dtype, (2,), name="x")
            _ = x + fg.full((2,), _dec(big), dtype=dtype)


@pytest.mark.parametrize("d", SMALL)
def test_fill_with_a_zero_dim_tensor_converts_as_pytorch(d):
    """``fill_(t)`` with a 0-d tensor converts the value as a cast does (wrapping, no overflow
    check), as PyTorch's ``fill_(Tensor)``, eagerly and in a Session fed the value; a tensor of
    another rank is refused; a NumPy integer scalar is a number (checked for overflow)."""
    dtype = getattr(fg, d)
    want = np.array([300, 300], np.int64).astype(d)  # NumPy wraps as PyTorch's cast does
    x = fg.zeros(2, dtype=dtype)
    assert x.fill_(fg.tensor(300)) is x
    np.testing.assert_array_equal(x.numpy(), want)
    with fg.Graph() as g:
        xp = fg.placeholder(dtype, (2,), name="x")
        vp = fg.placeholder(fg.int64, (), name="v")
        y = xp.clone().fill_(vp)
    with fg.Session(graph=g) as sess:
        got = sess.run(y, feed_dict={xp: np.zeros(2, d), vp: np.array(300)})
    np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(RuntimeError, match=r"fill_.*0-dimension value tensor.*1 dimensions.*\[2\]"):
        x.fill_(fg.tensor([1, 2]))
    assert x.fill_(np.int64(7)).tolist() == [7, 7]
    with pytest.raises(RuntimeError, match=f"fill_.*{d}.*overflow"):
        x.fill_(np.int64(70000))


def test_fill_with_a_zero_dim_tensor_passes_the_gradient_to_the_value():
    """As PyTorch's ``fill_(Tensor)``: the value's gradient is the sum of the filled positions'."""
    w = np.array([1.0, 2.0, 3.0])
    v = fg.tensor(2.5, dtype=fg.float64, requires_grad=True)
    y = fg.zeros(3, dtype=fg.float64).fill_(v)
    (y * fg.tensor(w)).sum().backward()
    assert y.tolist() == [2.5, 2.5, 2.5] and v.grad.item() == w.sum()


@pytest.mark.parametrize("rank", [1, 2])
def test_fill_refuses_a_value_tensor_of_higher_rank_as_pytorch(rank):
    """PyTorch: ``RuntimeError: fill_ only supports 0-dimension value tensor but got tensor with
    1 dimensions.``; here the same words, naming the shape and dtype too."""
    x = fg.zeros(3)
    value = fg.ones((1,) * rank, dtype=fg.float64)
    with pytest.raises(
        RuntimeError, match=rf"fill_.*0-dimension value tensor but got tensor with {rank} dimensions"
    ):
        x.fill_(value)
    with pytest.raises(RuntimeError, match=r"\[1(, 1)?\], float64"):
        x.fill_(value)
    assert x.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "overwrite, expected",
    [
        pytest.param(
            lambda x: x.fill_(fg.tensor(2.0, dtype=fg.float64, requires_grad=True)),
            [0, 0, 0],
            id="fill_tensor_grad",
        ),
        pytest.param(lambda x: x.fill_(fg.tensor(2.0, dtype=fg.float64)), [0, 0, 0], id="fill_tensor"),
        pytest.param(lambda x: x.fill_(5.0), [0, 0, 0], id="fill_number"),
        pytest.param(lambda x: x.zero_(), [0, 0, 0], id="zero_"),
        pytest.param(
            lambda x: x.copy_(fg.tensor([4.0, 5.0, 6.0], dtype=fg.float64, requires_grad=True)),
            [0, 0, 0],
            id="copy_",
        ),
        pytest.param(lambda x: x[1:].fill_(7.0), [2.0, 0, 0], id="view_fill_"),  # d(2 * x0[0] * 1)
    ],
)
def test_an_overwritten_value_gets_a_zero_gradient_as_pytorch(overwrite, expected):
    """After ``x.fill_(...)`` / ``zero_()`` / ``copy_(...)`` the new value no longer depends on
    the old one: its input gets a gradient of zeros (a tensor, not None, as PyTorch gives),
    under ``create_graph`` too; a partial overwrite (a view) zeroes only the written part."""
    w = np.array([1.0, 2.0, 3.0])
    x0 = fg.tensor([1.0, 2.0, 3.0], dtype=fg.float64, requires_grad=True)
    x = x0 * 2.0
    overwrite(x)
    assert x.requires_grad and x.grad_fn is not None
    (g,) = fg.autograd.grad((x * fg.tensor(w)).sum(), [x0], create_graph=True)
    np.testing.assert_array_equal(g.numpy(), np.array(expected, dtype=np.float64))


def test_fill_with_a_tensor_value_passes_gradcheck_and_gradgradcheck():
    """``x.clone().fill_(v) * x`` is ``v * x``: the value's gradient and the overwritten input's
    zero, against finite differences, to second order."""
    x = fg.tensor([0.3, -1.2, 2.0], dtype=fg.float64, requires_grad=True)
    v = fg.tensor(0.7, dtype=fg.float64, requires_grad=True)

    def f(x, v):
        return x.clone().fill_(v) * x

    assert fg.autograd.gradcheck(f, (x, v))
    assert fg.autograd.gradgradcheck(f, (x, v))


def test_filling_a_leaf_that_requires_grad_is_refused_as_pytorch():
    """``fill_`` / ``zero_`` on a leaf that requires grad raise (PyTorch: "a leaf Variable that
    requires grad is being used in an in-place operation"), and work under ``no_grad``."""
    p = fg.zeros(3, requires_grad=True)
    for write in (lambda: p.fill_(1.0), lambda: p.zero_(), lambda: p.fill_(fg.tensor(1.0))):
        with pytest.raises(
            RuntimeError, match=r"(fill_|copy_): a leaf tensor that requires grad .* in-place"
        ):
            write()
    assert p.tolist() == [0.0, 0.0, 0.0]
    with fg.no_grad():
        p.fill_(2.0)
    assert p.tolist() == [2.0, 2.0, 2.0] and p.grad_fn is None
