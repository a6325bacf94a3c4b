"""The top-level ``torch`` namespace names of ``ferrograd/_surface_torch_ns.py``: constants,
``Size``, the legacy tensor types, the functional forms with torch's own signatures (against
stored PyTorch references, ``scripts/make_torch_ns_references.py``, which records the
PyTorch version), the in-place ``torch.X_`` functions and the aliases and predicates."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

REF = Path(__file__).parent / "fixtures" / "parity" / "torch_ns.npz"


@pytest.fixture(scope="module")
def ref():
    with np.load(REF) as z:
        return {k: z[k] for k in z.files}


def _cases():
    with np.load(REF) as z:
        cases = json.loads(str(z["cases"]))
    return [
        pytest.param(i, c, id=f"{i}-{c['name']}", marks=pytest.mark.covers(f"torch.{c['name']}"))
        for i, c in enumerate(cases)
    ]


# --- constants and Size -----------------------------------------------------------


@pytest.mark.covers("torch.pi", "torch.e", "torch.inf", "torch.nan", "torch.newaxis")
def test_constants():
    assert fg.pi == np.pi and fg.e == np.e
    assert fg.inf == np.inf and fg.inf > 0 and math.isinf(fg.inf)
    assert math.isnan(fg.nan)
    assert fg.newaxis is None
    x = fg.arange(6).reshape(2, 3)
    assert x[fg.newaxis].shape == (1, 2, 3)
    assert x[:, fg.newaxis].shape == (2, 1, 3)


@pytest.mark.covers("torch.Size")
def test_size_is_a_tuple_with_numel():
    s = fg.Size([2, 3, 4])
    assert isinstance(s, tuple) and s == (2, 3, 4)
    assert s.numel() == 24 and fg.Size([]).numel() == 1 and fg.Size((0, 5)).numel() == 0
    assert isinstance(s[1:], fg.Size) and s[1:] == (3, 4)
    assert isinstance(s[0], int) and s[-1] == 4
    assert isinstance(s + (5,), fg.Size) and s + (5,) == (2, 3, 4, 5)
    assert isinstance((1,) + s, fg.Size) and (1,) + s == (1, 2, 3, 4)
    assert repr(s) == "ferrograd.Size([2, 3, 4])"
    assert b"_surface_torch_ns" not in pickle.dumps(s)
    back = pickle.loads(pickle.dumps(s))
    assert isinstance(back, fg.Size) and back == s
    assert fg.zeros(fg.Size([2, 3])).shape == (2, 3)
    with pytest.raises(TypeError, match="Size"):
        fg.Size([2, 1.5])


def test_shape_and_size_are_sizes():
    x = fg.zeros(2, 3)
    assert isinstance(x.shape, fg.Size) and x.shape == (2, 3) and x.shape.numel() == 6
    assert isinstance(x.size(), fg.Size) and x.size() == (2, 3)
    assert x.size(1) == 3 and x.size(-2) == 2
    assert x.shape[1:] == (3,) and isinstance(x.shape[1:], fg.Size)


# --- legacy tensor types ------------------------------------------------------------

LEGACY = [
    ("FloatTensor", "float32"),
    ("DoubleTensor", "float64"),
    ("HalfTensor", "float16"),
    ("BFloat16Tensor", "bfloat16"),
    ("LongTensor", "int64"),
    ("IntTensor", "int32"),
    ("ShortTensor", "int16"),
    ("CharTensor", "int8"),
    ("ByteTensor", "uint8"),
    ("BoolTensor", "bool"),
]


@pytest.mark.parametrize(
    ("name", "dt"), [pytest.param(n, d, marks=pytest.mark.covers(f"torch.{n}")) for n, d in LEGACY]
)
def test_legacy_tensor_types(name, dt):
    cls = getattr(fg, name)
    dtype = getattr(fg, dt)
    assert cls.dtype == dtype
    t = cls(2, 3)
    assert t.shape == (2, 3) and t.dtype == dtype
    assert cls().shape == (0,)
    assert cls(fg.Size([4])).shape == (4,)
    data = [[1, 0], [0, 1]]
    d = cls(data)
    assert d.dtype == dtype
    np.testing.assert_array_equal(d.float().numpy(), np.array(data, dtype=np.float32))
    assert isinstance(d, cls)
    assert not isinstance(fg.zeros(2, dtype=fg.float64 if dt != "float64" else fg.float32), cls)
    assert not isinstance(np.zeros(2), cls)
    # Tensor.type with the class and with its name, PyTorch's spelling too.
    x = fg.tensor([[1.0, 0.0], [0.0, 1.0]])
    for spec in (cls, f"torch.{name}", f"ferrograd.{name}"):
        y = x.type(spec)
        assert y.dtype == dtype and isinstance(y, cls)
    assert x.type(cls).type() == f"ferrograd.{name}"
    from_tensor = cls(fg.tensor([1.0, 2.0], dtype=fg.float64))
    assert from_tensor.dtype == dtype
    from_numpy = cls(np.array([[1.0, 0.0]]))
    assert from_numpy.dtype == dtype and from_numpy.shape == (1, 2)


def test_legacy_tensor_type_errors():
    with pytest.raises(TypeError, match="FloatTensor.*sequence"):
        fg.FloatTensor(2.5)
    with pytest.raises(ValueError, match="LongTensor.*negative"):
        fg.LongTensor(2, -1)
    with pytest.raises(TypeError, match="FloatTensor"):
        fg.FloatTensor(2, "a")
    with pytest.raises(TypeError, match="FloatTensor.*keyword"):
        fg.FloatTensor(2, dtype=fg.float64)


# --- functional forms against PyTorch -----------------------------------------------


def test_reference_records_the_pytorch_version(ref):
    assert str(ref["torch_version"]).startswith("2.")


def _value(a, ref, leaves):
    if isinstance(a, dict):
        key = a["t"]
        if key not in leaves:
            arr = ref[f"in/{key}"]
            leaves[key] = fg.tensor(arr, requires_grad=arr.dtype.kind == "f")
        return leaves[key]
    if isinstance(a, list):
        return tuple(a)
    return a


# PyTorch's celu gradient is about 4e-8 (relative) off the exact derivative in float64
# (test_celu_gradient_is_exact checks ferrograd's against NumPy).
GRAD_RTOL = {"celu": 1e-7}


@pytest.mark.parametrize(("i", "case"), _cases())
def test_matches_pytorch(ref, i, case):
    leaves = {}
    args = [_value(a, ref, leaves) for a in case["args"]]
    kwargs = {k: _value(v, ref, leaves) for k, v in case["kwargs"].items()}
    out = getattr(fg, case["name"])(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    if isinstance(out, tuple):
        for k, o in enumerate(outs):
            np.testing.assert_allclose(o.detach().numpy(), ref[f"{i}/out{k}"], rtol=1e-9, atol=1e-12)
    else:
        want = ref[f"{i}/out"]
        assert out.shape == want.shape
        assert out.dtype.name == str(want.dtype), (out.dtype, want.dtype)
        np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-9, atol=1e-12)
    if case["grad"]:
        (outs[0] * fg.tensor(ref[f"{i}/g"])).sum().backward()
        for key, t in leaves.items():
            want = ref.get(f"{i}/grad/{key}")
            if want is None:
                continue
            assert t.grad is not None, key
            rtol = GRAD_RTOL.get(case["name"], 1e-8)
            np.testing.assert_allclose(t.grad.numpy(), want, rtol=rtol, atol=1e-10, err_msg=key)


def test_celu_gradient_is_exact():
    x = np.linspace(-3.0, 2.0, 12)  # not through 0: see the next test
    t = fg.tensor(x, requires_grad=True)
    fg.celu(t, 0.7).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.where(x > 0, 1.0, np.exp(x / 0.7)), rtol=1e-14)


@pytest.mark.parametrize(
    ("name", "fn", "inputs"),
    [
        ("conv1d", lambda x, w: fg.conv1d(x, w, None, 1, 1), ((1, 2, 5), (3, 2, 2))),
        (
            "batch_norm",
            lambda x, w: fg.batch_norm(x, w, None, None, None, True, 0.1, 1e-5, False),
            ((4, 3), (3,)),
        ),
        ("kl_div", lambda x, w: fg.kl_div(x, w.exp(), 2), ((2, 3), (2, 3))),
        ("constant_pad_nd", lambda x, w: fg.constant_pad_nd(x * w, (1, 1), 2.0), ((2, 3), (2, 3))),
    ],
)
def test_gradcheck(name, fn, inputs):
    rng = np.random.default_rng(3)
    ts = [fg.tensor(rng.standard_normal(s), requires_grad=True) for s in inputs]
    assert fg.autograd.gradcheck(fn, ts, eps=1e-6, atol=1e-6), name


def test_batch_norm_updates_running_stats():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((6, 3, 4))
    rm0, rv0 = rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)
    rm, rv = fg.tensor(rm0), fg.tensor(rv0)
    out = fg.batch_norm(fg.tensor(x), None, None, rm, rv, True, 0.2, 1e-5, False)
    mean = x.mean(axis=(0, 2))
    var = x.var(axis=(0, 2))
    want = (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), 0.8 * rm0 + 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.8 * rv0 + 0.2 * x.var(axis=(0, 2), ddof=1), rtol=1e-12)


def test_compiled_matches_eager():
    rng = np.random.default_rng(4)
    x = fg.tensor(rng.standard_normal((2, 3, 8)).astype(np.float32))
    w = fg.tensor(rng.standard_normal((4, 3, 3)).astype(np.float32))

    def f(x, w):
        y = fg.conv1d(x, w, None, 1, 1)
        y = fg.max_pool1d(y, 2)
        y = fg.layer_norm(y, [4])
        return fg.constant_pad_nd(fg.selu(y), [1, 0], 0.5)

    np.testing.assert_allclose(fg.compile(f)(x, w).numpy(), f(x, w).numpy(), rtol=1e-5, atol=1e-6)


def test_functional_form_errors():
    x = fg.randn(2, 3)
    with pytest.raises(ValueError, match="kl_div.*reduction"):
        fg.kl_div(x, x, "mean")
    with pytest.raises(ValueError, match="margin_ranking_loss.*reduction"):
        fg.margin_ranking_loss(x, x, x, 0.0, 3)
    with pytest.raises(ValueError, match="dropout_.*between 0 and 1"):
        fg.dropout_(x, 1.5, True)
    with pytest.raises(TypeError, match="rrelu.*generator"):
        fg.rrelu(x, generator=object())
    with pytest.raises(TypeError):
        fg.batch_norm(x, None, None, None, None)  # torch's batch_norm has no defaults


def test_dropout_forms():
    fg.manual_seed(0)
    x = fg.ones(200, 10)
    assert fg.alpha_dropout(x, 0.5, False) is x or np.array_equal(
        fg.alpha_dropout(x, 0.5, False).numpy(), x.numpy()
    )
    y = fg.alpha_dropout(x, 0.5, True)
    assert y.shape == x.shape and not np.allclose(y.numpy(), 1.0)
    f = fg.feature_alpha_dropout(x.reshape(20, 10, 10), 0.5, True).numpy()
    # A dropped feature map is one constant: every row of a channel is the same.
    assert np.allclose(f, f[:, :, :1])
    z = fg.ones(100, 10)
    v = z._version
    assert fg.dropout_(z, 0.5, True) is z and z._version > v
    kept = z.numpy()
    assert set(np.unique(kept)) <= {0.0, 2.0} and (kept == 0).any() and (kept == 2).any()
    w = fg.ones(4)
    assert fg.dropout_(w, 0.5, False) is w and np.array_equal(w.numpy(), np.ones(4))
    a = fg.ones(50, 4)
    assert fg.alpha_dropout_(a, 0.5, True) is a and not np.allclose(a.numpy(), 1.0)
    b = fg.ones(5, 4, 6)
    assert fg.feature_alpha_dropout_(b, 0.5, True) is b


def test_celu_gradient_at_zero():
    # PyTorch's celu takes the exponential branch at 0: gradient 1 (not 1 + 1)
    for alpha in (1.0, 0.5):
        t = fg.tensor([0.0], dtype=fg.float64, requires_grad=True)
        fg.celu(t, alpha).sum().backward()
        assert t.grad.item() == 1.0


# --- in-place torch.X_ functions -----------------------------------------------------

VALS = np.array([[-1.7, -0.4, 0.3], [0.6, 1.2, 2.5]])
INPLACE = [
    ("abs_", (), np.abs),
    ("ceil_", (), np.ceil),
    ("clamp_", (-0.5, 1.0), lambda a: np.clip(a, -0.5, 1.0)),
    ("clip_", (-0.5, 1.0), lambda a: np.clip(a, -0.5, 1.0)),
    ("clamp_max_", (0.5,), lambda a: np.minimum(a, 0.5)),
    ("clamp_min_", (0.5,), lambda a: np.maximum(a, 0.5)),
    ("cos_", (), np.cos),
    ("cosh_", (), np.cosh),
    ("erf_", (), np.vectorize(math.erf)),
    ("erfc_", (), np.vectorize(math.erfc)),
    ("exp2_", (), np.exp2),
    ("exp_", (), np.exp),
    ("expm1_", (), np.expm1),
    ("fill_", (3.5,), lambda a: np.full_like(a, 3.5)),
    ("floor_", (), np.floor),
    ("neg_", (), np.negative),
    ("negative_", (), np.negative),
    ("reciprocal_", (), np.reciprocal),
    ("relu_", (), lambda a: np.maximum(a, 0)),
    ("round_", (), np.round),
    ("sigmoid_", (), lambda a: 1 / (1 + np.exp(-a))),
    ("sin_", (), np.sin),
    ("sinh_", (), np.sinh),
    ("square_", (), np.square),
    ("tan_", (), np.tan),
    ("tanh_", (), np.tanh),
    ("trunc_", (), np.trunc),
    ("fix_", (), np.trunc),
    ("zero_", (), np.zeros_like),
    ("nan_to_num_", (), lambda a: a),
    ("selu_", (), lambda a: 1.0507009873554805 * np.where(a > 0, a, 1.6732632423543772 * np.expm1(a))),
    ("celu_", (0.5,), lambda a: np.where(a > 0, a, 0.5 * np.expm1(a / 0.5))),
    ("rrelu_", (), lambda a: np.where(a >= 0, a, a * (0.125 + 1 / 3) / 2)),
    ("threshold_", (0.5, -1.0), lambda a: np.where(a > 0.5, a, -1.0)),
]
POSITIVE = [
    ("log_", np.log),
    ("log10_", np.log10),
    ("log1p_", np.log1p),
    ("log2_", np.log2),
    ("rsqrt_", lambda a: 1 / np.sqrt(a)),
    ("sqrt_", np.sqrt),
]


@pytest.mark.parametrize(
    ("name", "args", "np_fn"),
    [pytest.param(n, a, f, marks=pytest.mark.covers(f"torch.{n}")) for n, a, f in INPLACE]
    + [pytest.param(n, (), f, marks=pytest.mark.covers(f"torch.{n}")) for n, f in POSITIVE],
)
def test_inplace_functions(name, args, np_fn):
    vals = np.abs(VALS) + 0.1 if any(name == n for n, _ in POSITIVE) else VALS
    t = fg.tensor(vals)
    v = t._version
    out = getattr(fg, name)(t, *args)
    assert out is t
    assert t._version > v
    np.testing.assert_allclose(t.numpy(), np_fn(vals), rtol=1e-12, atol=1e-12)
    # autograd through the in-place function: d/dx sum(f(2x)) = 2 f'(2x)
    if name in {"exp_", "tanh_", "sigmoid_", "square_", "sqrt_", "selu_", "clamp_"}:
        a = fg.tensor(vals / 2, requires_grad=True)
        b = a * 2
        r = getattr(fg, name)(b, *args)
        assert r is b
        r.sum().backward()
        h = 1e-6
        num = (np_fn(vals + 2 * h) - np_fn(vals - 2 * h)) / (2 * h)
        np.testing.assert_allclose(a.grad.numpy(), num, rtol=1e-5, atol=1e-6)


UNIT = np.array([[-0.9, -0.3, 0.0], [0.2, 0.5, 0.8]])
COMPOSED = [
    ("acos_", UNIT, (), np.arccos),
    ("arccos_", UNIT, (), np.arccos),
    ("asin_", UNIT, (), np.arcsin),
    ("arcsin_", UNIT, (), np.arcsin),
    ("atan_", VALS, (), np.arctan),
    ("arctan_", VALS, (), np.arctan),
    ("atanh_", UNIT, (), np.arctanh),
    ("arctanh_", UNIT, (), np.arctanh),
    ("asinh_", VALS, (), np.arcsinh),
    ("arcsinh_", VALS, (), np.arcsinh),
    ("acosh_", np.abs(VALS) + 1.0, (), np.arccosh),
    ("arccosh_", np.abs(VALS) + 1.0, (), np.arccosh),
    ("deg2rad_", VALS, (), np.deg2rad),
    ("rad2deg_", VALS, (), np.rad2deg),
    ("frac_", VALS, (), lambda a: a - np.trunc(a)),
    ("sinc_", VALS, (), np.sinc),
    ("i0_", VALS, (), np.i0),
    ("logit_", (UNIT + 1) / 2.5, (), lambda a: np.log(a / (1 - a))),
    ("xlogy_", np.abs(VALS), (np.array([0.5, 2.0, 3.0]),), lambda a: a * np.log([0.5, 2.0, 3.0])),
    (
        "addmv_",
        np.array([1.0, -2.0]),
        (np.arange(6.0).reshape(2, 3), np.array([1.0, 0.5, -1.0])),
        lambda a: a + np.arange(6.0).reshape(2, 3) @ np.array([1.0, 0.5, -1.0]),
    ),
]


@pytest.mark.parametrize(
    ("name", "vals", "args", "np_fn"),
    [pytest.param(n, v, a, f, marks=pytest.mark.covers(f"torch.{n}")) for n, v, a, f in COMPOSED],
)
def test_composed_inplace_functions(name, vals, args, np_fn):
    t = fg.tensor(vals)
    v = t._version
    targs = [fg.tensor(a) for a in args]
    assert getattr(fg, name)(t, *targs) is t
    assert t._version > v
    np.testing.assert_allclose(t.numpy(), np_fn(vals), rtol=1e-12, atol=1e-12)
    # autograd through it, against the out-of-place function's gradient
    a = fg.tensor(vals, requires_grad=True)
    b = a * 1.0
    assert getattr(fg, name)(b, *targs) is b
    b.sum().backward()
    ref = fg.tensor(vals, requires_grad=True)
    getattr(fg, name[:-1])(ref, *targs).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ref.grad.numpy(), rtol=1e-12)


def test_composed_inplace_errors():
    with pytest.raises(RuntimeError, match="acos_.*can't be cast.*int64"):
        fg.acos_(fg.tensor([1, 0]))
    with pytest.raises(TypeError, match="sinc_.*Tensor"):
        fg.sinc_(0.5)


def test_feature_dropout():
    fg.manual_seed(1)
    x = fg.ones(8, 6, 5)
    y = fg.feature_dropout(x, 0.5, True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and (y == 0).any() and (y == 2).any()
    assert np.allclose(y, y[:, :, :1])  # whole channels
    assert fg.feature_dropout(x, 0.5, False) is x
    z = fg.ones(8, 6, 5)
    assert fg.feature_dropout_(z, 0.5, True) is z
    assert set(np.unique(z.numpy())) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="feature_dropout.*between 0 and 1"):
        fg.feature_dropout(x, -0.1, True)


def test_inplace_other_forms():
    t = fg.tensor([1.0, 2.0])
    d = fg.detach_(t)
    assert d is t
    t = fg.zeros(3)
    assert fg.index_put_(t, (fg.tensor([0, 2]),), fg.tensor([5.0, 7.0])) is t
    np.testing.assert_array_equal(t.numpy(), [5.0, 0.0, 7.0])
    with pytest.raises(TypeError, match="relu_.*Tensor"):
        fg.relu_([1.0])
    leaf = fg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place"):
        fg.exp_(leaf)


# --- aliases and predicates ---------------------------------------------------------


def test_detach():
    x = fg.ones(3, requires_grad=True)
    y = fg.detach(x * 2)
    assert not y.requires_grad and np.array_equal(y.numpy(), [2.0, 2.0, 2.0])


def test_aliases_out():
    a = fg.tensor([1.0, -2.0])
    out = fg.zeros(2)
    assert fg.absolute(a, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0])
    b = fg.zeros(2, dtype=fg.bool)
    assert fg.greater(a, 0.0, out=b) is b
    np.testing.assert_array_equal(b.numpy(), [True, False])
    with pytest.raises(RuntimeError, match="greater.*out has shape"):
        fg.greater(a, 0.0, out=fg.zeros(3, dtype=fg.bool))


def test_positive_rejects_bool():
    with pytest.raises(TypeError, match="positive.*bool"):
        fg.positive(fg.tensor([True]))
    x = fg.tensor([1.0])
    assert fg.positive(x) is x


def test_predicates():
    assert fg.is_nonzero(fg.tensor([1.5])) is True
    assert fg.is_nonzero(fg.tensor(0)) is False
    assert fg.is_nonzero(fg.tensor([[False]])) is False
    with pytest.raises(RuntimeError, match="is_nonzero.*more than one value"):
        fg.is_nonzero(fg.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="is_nonzero.*no values"):
        fg.is_nonzero(fg.zeros(0))
    signed = {
        "float32": True,
        "float64": True,
        "int64": True,
        "int8": True,
        "int16": True,
        "uint8": False,
        "bool": False,
    }
    for dt, want in signed.items():
        assert fg.is_signed(fg.zeros(1, dtype=getattr(fg, dt))) is want, dt
    assert fg.is_same_size(fg.zeros(2, 3), fg.ones(2, 3)) is True
    assert fg.is_same_size(fg.zeros(2, 3), fg.ones(3, 2)) is False
    assert fg.is_complex(fg.zeros(1)) is False
    with fg.inference_mode():
        assert fg.is_inference(fg.zeros(1)) is False
    assert fg.get_device(fg.zeros(1)) == -1
    with pytest.raises(TypeError, match="is_signed.*Tensor"):
        fg.is_signed(3)


def test_scalar_tensor():
    s = fg.scalar_tensor(3)
    assert s.shape == () and s.dtype == fg.float32 and s.item() == 3.0
    assert fg.scalar_tensor(True).dtype == fg.float32
    assert fg.scalar_tensor(2, dtype=fg.int64).dtype == fg.int64
    assert fg.scalar_tensor(2.5, dtype=fg.float64).item() == 2.5
    assert fg.scalar_tensor(1.0, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="scalar_tensor.*Number"):
        fg.scalar_tensor(fg.ones(1))


def test_gpu_matches_cpu():
    if not fg.gpu.is_available():
        pytest.skip(f"no GPU adapter: {fg.gpu.unavailable_reason()}")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    gw = rng.standard_normal(4).astype(np.float32)

    def f(x, w, gw):
        y = fg.conv1d(x, w, None, 1, 1)
        y = fg.batch_norm(y, gw, None, None, None, True, 0.1, 1e-5, False)
        y = fg.max_pool1d(y, 2)
        y = fg.constant_pad_nd(fg.celu(y, 0.5), [1, 0], 0.5)
        return fg.rsub(y, 1.0, 2) + fg.kl_div(y, y.exp(), 0)

    outs, grads = [], []
    for dev in ("cpu", "gpu"):
        ts = [fg.tensor(a).to(dev).requires_grad_(True) for a in (x, w, gw)]
        out = f(*ts)
        out.sum().backward()
        outs.append(out.cpu().numpy())
        grads.append([t.grad.cpu().numpy() for t in ts])
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-4)
    for g_gpu, g_cpu in zip(grads[1], grads[0], strict=True):
        np.testing.assert_allclose(g_gpu, g_cpu, rtol=1e-3, atol=1e-3)
    g = fg.ones(2, 3).to("gpu")
    assert fg.get_device(g) == 0
    assert not isinstance(g, fg.FloatTensor)
    back = g.type(fg.FloatTensor)
    assert back.device.type == "cpu" and isinstance(back, fg.FloatTensor)
    assert isinstance(g.shape, fg.Size) and g.shape == (2, 3)
    t = fg.tensor([-0.5, 0.25]).to("gpu")
    assert fg.sinc_(t) is t and fg.relu_(t) is t
    np.testing.assert_allclose(t.cpu().numpy(), np.maximum(np.sinc([-0.5, 0.25]), 0), rtol=1e-5)
