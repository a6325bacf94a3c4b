"""Random numbers generated on the WebGPU device.

The device runs the CPU's counter-based generator (Philox4x32-10, the same
counter and key layout, 32-bit arithmetic only) in WGSL, so the same seed
gives the same numbers on both devices and nothing drawn is uploaded:

- uniform floats, integers, Bernoulli draws (scalar or per-element
  probabilities) and dropout masks are bit-exact with the CPU;
- normals go through WGSL's ``log``/``sin``/``cos``, which are approximate:
  they agree within the tolerance derived in ``_normal_tolerance``;
- every op reserves as many counter blocks as on the CPU, so CPU and GPU
  draws interleaved on one generator stay in step;
- a compiled graph's replay passes each random kernel a new stream (a small
  per-run metadata write), drawing what eager code would.

``randperm`` and ``multinomial`` still run the CPU's sampler (a device sort
and a per-row search are not worth it at their sizes); they are checked here
for parity too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

HERE = Path(__file__).resolve().parent
FLOATS = ["float32", "float16", "bfloat16"]
SHAPES = [(), (0,), (1,), (3,), (7,), (3, 5), (2, 3, 5), (1027,)]


def _np(t):
    """Host values; bfloat16 widened to float32 (exactly)."""
    if t.dtype == fg.bfloat16:
        t = t.float()
    return t.numpy()


def _bits(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])
    return a


def _pair(make, seed=11):
    """``make(device)`` on the CPU and on the GPU from the same seed."""
    fg.manual_seed(seed)
    c = make("cpu")
    fg.manual_seed(seed)
    g = make("gpu")
    assert str(g.device) == "gpu" and g.dtype == c.dtype and g.shape == c.shape
    return c, g


def _same(make, seed=11):
    c, g = _pair(make, seed)
    np.testing.assert_array_equal(_bits(_np(g)), _bits(_np(c)))
    return c, g


def _view(shape, dtype, device, kind):
    """A target of ``shape``: contiguous, or a non-contiguous view of a larger tensor."""
    if kind == "contiguous":
        return fg.full(shape, 7, dtype=dtype, device=device)
    if kind == "transposed":
        return fg.full(tuple(reversed(shape)), 7, dtype=dtype, device=device).T if len(shape) == 2 else None
    # every other element along the last dimension, at an offset
    big = fg.full((*shape[:-1], 2 * shape[-1] + 1), 7, dtype=dtype, device=device)
    return big[..., 1::2]


# ----- uniform ----------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_is_bit_exact(dtype, shape):
    d = getattr(fg, dtype)
    _same(lambda dev: fg.rand(*shape, dtype=d, device=dev))
    _same(lambda dev: fg.rand_like(fg.ones(shape, device=dev), dtype=d))


RANGES = [
    (0.0, 1.0),
    (-3.0, 7.0),
    (2.5, 2.5),
    (-1e-3, 1e-3),
    (100.0, 100.0625),
    (-65504.0, 65504.0),
    (0.1, 0.3),
]


@pytest.mark.parametrize("kind", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_inplace_is_bit_exact(dtype, kind):
    d = getattr(fg, dtype)
    for low, high in RANGES:
        for shape in [(3, 5), (4, 1), (2, 9)]:
            if _view(shape, d, "cpu", kind) is None:
                continue

            def make(dev, low=low, high=high, shape=shape):
                t = _view(shape, d, dev, kind)
                t.uniform_(low, high)
                return t

            c, g = _same(make)
            v = _np(g)
            assert (v >= np.float32(low)).all() and (
                low == high or (v < np.float32(high)).all() or dtype != "float32"
            )


def test_uniform_rounding_to_the_upper_bound_stays_below_it():
    # Values that round up to `high` in the dtype become the largest value below it.
    for dtype, low, high in [("float16", 0.0, 1.0), ("bfloat16", 1.0, 2.0), ("float32", 1.0, 1.0000001)]:
        d = getattr(fg, dtype)
        c, g = _same(
            lambda dev, d=d, low=low, high=high: fg.empty(4096, dtype=d, device=dev).uniform_(low, high)
        )
        v = _np(g).astype(np.float64)
        assert v.max() < high and v.min() >= low, (dtype, v.min(), v.max())


# ----- integers ---------------------------------------------------------------


INT_CASES = [
    ("int32", 0, 10),
    ("int32", -5, 9),
    ("int32", -(2**31), 2**31 - 1),
    ("int64", -(2**31), 2**31),  # a range of 2^32
    ("int64", 0, 2**31),
    ("int64", 3, 4),
    ("bool", 0, 2),
    ("float32", -(2**24), 2**24 + 1),
    ("float32", 0, 2**30),  # beyond float32's integers: drawn on the host, still the CPU's
    ("float16", -2048, 2049),
    ("float16", 60000, 65505),
    ("bfloat16", -300, 301),
]


@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 7)])
@pytest.mark.parametrize("case", INT_CASES, ids=lambda c: f"{c[0]}[{c[1]},{c[2]})")
def test_randint_is_exact(case, shape):
    dtype, low, high = case
    d = getattr(fg, dtype)
    _same(lambda dev: fg.randint(low, high, shape, dtype=d, device=dev))
    _same(lambda dev: fg.randint_like(fg.ones(shape, device=dev), low, high, dtype=d))


def test_randint_outside_32_bits_is_refused():
    with pytest.raises(ValueError, match=r"randint.*32-bit integers"):
        fg.randint(0, 2**33, (4,), dtype=fg.int64, device="gpu")
    with pytest.raises(ValueError, match=r"randint.*32-bit integers"):
        fg.randint(-(2**31) - 1, 0, (4,), dtype=fg.int64, device="gpu")
    with pytest.raises(TypeError, match="float64"):
        fg.rand(3, dtype=fg.float64, device="gpu")


# ----- Bernoulli --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "bool"])
def test_bernoulli_scalar_is_exact(dtype, kind):
    d = getattr(fg, dtype)
    for p in [0.0, 1e-9, 0.3, 0.5, 0.999, 1.0]:
        for shape in [(3, 5), (1, 7)]:
            if _view(shape, d, "cpu", kind) is None:
                continue
            _same(lambda dev, p=p, shape=shape: _view(shape, d, dev, kind).bernoulli_(p))
    if dtype in FLOATS:
        _same(lambda dev: fg.bernoulli(fg.ones(4, 9, dtype=d, device=dev), 0.25))


def _edge_probabilities(n, seed=0):
    """Probabilities on and next to the 2^-24 grid the threshold is taken on, plus 0 and 1."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 2**24, n)
    p = (k / 2**24).astype(np.float32)
    nudge = rng.integers(-1, 2, n)
    p = np.nextafter(p, np.where(nudge > 0, 2.0, -1.0).astype(np.float32)) * (nudge != 0) + p * (nudge == 0)
    p = np.clip(p, 0.0, 1.0).astype(np.float32)
    edges = np.array([0.0, 1.0, 2.0**-24], np.float32)[:n]
    p[: edges.size] = edges
    return p


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (4, 50), (3, 1, 33)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_bernoulli_with_probabilities_is_exact(dtype, shape):
    d = getattr(fg, dtype)
    p = _edge_probabilities(int(np.prod(shape))).reshape(shape)
    _same(lambda dev: fg.bernoulli(fg.tensor(p, device=dev).to(d)))


@pytest.mark.parametrize("target", ["int64", "bool", "float32", "float16"])
def test_bernoulli_inplace_with_probabilities(target):
    d = getattr(fg, target)
    p = _edge_probabilities(4 * 50, seed=1).reshape(4, 50)
    row = _edge_probabilities(50, seed=2)
    cases = [
        lambda dev: fg.zeros(4, 50, dtype=d, device=dev).bernoulli_(fg.tensor(p, device=dev)),
        lambda dev: fg.zeros(50, 4, dtype=d, device=dev).T.bernoulli_(fg.tensor(p, device=dev)),
        lambda dev: fg.zeros(4, 101, dtype=d, device=dev)[:, 1::2].bernoulli_(fg.tensor(p, device=dev)),
        # broadcast probabilities, and probabilities read from a strided view
        lambda dev: fg.zeros(4, 50, dtype=d, device=dev).bernoulli_(fg.tensor(row, device=dev)),
        lambda dev: fg.zeros(50, 4, dtype=d, device=dev).bernoulli_(fg.tensor(p, device=dev).T),
    ]
    for make in cases:
        _same(make)


def test_bernoulli_from_itself():
    p = _edge_probabilities(64, seed=3)
    _same(lambda dev: fg.tensor(p, device=dev).bernoulli_(fg.tensor(p, device=dev)))

    def self_draw(dev):
        t = fg.tensor(p, device=dev)
        return t.bernoulli_(t)

    _same(self_draw)


@pytest.mark.parametrize("bad", [1.5, -0.25, float("nan"), float("inf")])
def test_bad_probabilities_raise_before_writing(bad):
    vals = np.full(1000, 0.5, np.float32)
    vals[617] = bad
    vals[900] = 3.0  # a later bad value: the first one is reported
    x = fg.full((1000,), 7.0, device="gpu")
    shown = "(?i:nan)" if bad != bad else str(bad).replace(".", r"\.")
    with pytest.raises(ValueError, match=r"bernoulli.*\[0, 1\].*" + shown):
        x.bernoulli_(fg.tensor(vals, device="gpu"))
    np.testing.assert_array_equal(x.numpy(), np.full(1000, 7.0, np.float32))
    with pytest.raises(ValueError, match="bernoulli"):
        fg.bernoulli(fg.tensor(vals, device="gpu").half())
    # -0.0 is a valid probability, as on the CPU.
    z = fg.bernoulli(fg.tensor(np.array([-0.0, 1.0], np.float32), device="gpu"))
    np.testing.assert_array_equal(z.numpy(), [0.0, 1.0])


# ----- normal -----------------------------------------------------------------


def _normal_tolerance(want, mean=0.0, std=1.0):
    """Per-element bound on |gpu - cpu| for Box-Muller normals in float32.

    z = mean + std * r * trig(t), r = sqrt(-2 ln u1) <= 5.8, t = fl(2 pi u2).
    WGSL's own ``log`` (absolute 2^-21 on [0.5, 2]) and ``sin``/``cos``
    (absolute 2^-11) are too loose for this, so the kernel computes ``ln``
    and ``sin``/``cos`` from additions, multiplications and one division
    (``random.rs``; its Rust mirror is tested to be within 2 ulp of the
    CPU's ``ln``, ``sin`` and ``cos``, or 2^-25 absolutely near the zeros of
    ``sin``/``cos``). With the CPU's own rounding (1/2 ulp per function) and
    ``sqrt`` (WGSL: 2.5 ulp), the product r * trig is within about 6 ulp
    of the CPU's; scaled by ``std`` and shifted by ``mean``: 8 ulp of
    std * |z| (2^-20 relative), with a floor of 8 ulp of std / 4 for values
    near 0 (r * 2^-25 <= 2^-22.5 near the zeros of sin/cos), plus one
    rounding of the sum with ``mean``.
    """
    return 2.0**-20 * (np.abs(want - mean) + std / 4) + 2.0**-23 * abs(mean)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_matches_within_tolerance(dtype, shape):
    d = getattr(fg, dtype)
    for mean, std, make in [
        (0.0, 1.0, lambda dev: fg.randn(shape, dtype=d, device=dev)),
        (0.0, 1.0, lambda dev: fg.randn_like(fg.ones(shape, device=dev), dtype=d)),
        (1.5, 2.0, lambda dev: fg.normal(1.5, 2.0, size=shape, dtype=d, device=dev)),
        (-3.0, 0.25, lambda dev: fg.empty(shape, dtype=d, device=dev).normal_(-3.0, 0.25)),
    ]:
        c, g = _pair(make)
        w, v = _np(c).astype(np.float64), _np(g).astype(np.float64)
        if dtype == "float32":
            tol = _normal_tolerance(w, mean, std)
        else:
            # Rounded to 11 (8) significant bits: at most one step of the narrow type apart.
            eps = 2.0**-10 if dtype == "float16" else 2.0**-7
            tol = eps * np.abs(w) + _normal_tolerance(w, mean, std) + (6e-8 if dtype == "float16" else 0)
        assert (np.abs(v - w) <= tol).all(), (dtype, np.max(np.abs(v - w) - tol))


def test_normal_is_mostly_bit_exact():
    # Most draws agree to the bit, nearly all within 2 ulp.
    c, g = _pair(lambda dev: fg.randn(1 << 16, device=dev))
    cb, gb = _bits(c.numpy()).astype(np.int64), _bits(g.numpy()).astype(np.int64)
    ulps = np.abs(cb - gb)
    assert np.mean(ulps == 0) > 0.5 and np.mean(ulps <= 2) > 0.99, (np.mean(ulps == 0), np.mean(ulps <= 2))
    w = c.numpy().astype(np.float64)
    assert (np.abs(g.numpy() - w) <= _normal_tolerance(w)).all()


@pytest.mark.parametrize("kind", ["transposed", "strided"])
def test_normal_inplace_on_views(kind):
    c, g = _pair(lambda dev: _view((6, 5), fg.float32, dev, kind).normal_(2.0, 3.0))
    w = _np(c).astype(np.float64)
    assert (np.abs(_np(g) - w) <= _normal_tolerance(w, 2.0, 3.0)).all()


def test_normal_with_tensor_parameters():
    mean = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    std = np.linspace(0.5, 1.5, 4, dtype=np.float32)
    c, g = _pair(lambda dev: fg.normal(fg.tensor(mean, device=dev), fg.tensor(std, device=dev)))
    w = _np(c).astype(np.float64)
    assert (np.abs(_np(g) - w) <= _normal_tolerance(w, 0.0, 2.0) + 2.0**-20 * 4).all()


# ----- dropout ----------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 3, 17)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_is_bit_exact(dtype, shape):
    d = getattr(fg, dtype)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    F = fg.nn.functional
    for p in [0.1, 0.5, 0.9]:
        _same(lambda dev, p=p: F.dropout(fg.tensor(x, device=dev).to(d), p, training=True))
        if len(shape) >= 2:
            # a non-contiguous input, and in place on a non-contiguous tensor
            _same(lambda dev, p=p: F.dropout(fg.tensor(x, device=dev).to(d).transpose(0, 1), p))
            _same(lambda dev, p=p: F.dropout(fg.tensor(x, device=dev).to(d).transpose(0, 1), p, inplace=True))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn,shape", [("dropout1d", (3, 5)), ("dropout2d", (2, 3, 4, 5)), ("dropout3d", (2, 3, 2, 2, 3))])
def test_channel_dropout_is_bit_exact_and_reads_nothing_back(fn, shape, dtype):
    """Channel dropout draws its (n, c) mask on the device with a scalar probability: it
    used to build a per-element probability tensor there, which bernoulli read back to
    validate (a download per call, found by the op table's GPU column)."""
    d = getattr(fg, dtype)
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    drop = getattr(fg.nn.functional, fn)
    compiled = fg.compile(lambda t, p: drop(t, p))
    for p in [0.2, 0.5, 0.7]:
        fg.manual_seed(11)
        want = _bits(_np(drop(fg.tensor(x).to(d), p)))
        xg = fg.tensor(x, device="gpu").to(d)
        before = fg.gpu.stats()["downloads"]
        fg.manual_seed(11)
        eager = drop(xg, p)
        runs = []
        for _ in range(2):  # trace, then replay
            fg.manual_seed(11)
            runs.append(compiled(xg, p))
        assert fg.gpu.stats()["downloads"] == before, "channel dropout read device values back"
        for got in (eager, *runs):
            assert str(got.device) == "gpu"
            np.testing.assert_array_equal(_bits(_np(got)), want)


def test_dropout_zeroes_non_finite_values_and_scales_exactly():
    x = np.array([np.nan, np.inf, -np.inf, 1.0, 3.0, -2.5, 0.1] * 40, np.float32)
    c, g = _same(lambda dev: fg.nn.functional.dropout(fg.tensor(x, device=dev), 0.4))
    v = g.numpy()
    kept = ~(v == 0) | (x == 0)
    assert 0.3 < np.mean(v == 0) < 0.5
    np.testing.assert_array_equal(v[kept & np.isfinite(x)], (x * np.float32(1 / 0.6))[kept & np.isfinite(x)])


def test_dropout_gradient_matches_the_cpu():
    x = np.random.default_rng(6).standard_normal((5, 9)).astype(np.float32)
    grads = {}
    for dev in ("cpu", "gpu"):
        fg.manual_seed(3)
        t = fg.tensor(x, device=dev, requires_grad=True)
        y = fg.nn.functional.dropout(t, 0.35)
        (y * y).sum().backward()
        grads[dev] = (y.numpy(), t.grad.numpy())
    np.testing.assert_array_equal(grads["gpu"][0], grads["cpu"][0])
    np.testing.assert_array_equal(grads["gpu"][1], grads["cpu"][1])


# ----- host-side samplers (kept on the CPU) -----------------------------------


def test_randperm_and_multinomial_match_the_cpu():
    w = np.random.default_rng(0).uniform(0.1, 1.0, size=(3, 6)).astype(np.float32)
    for n, dtype in [(1, fg.int64), (9, fg.int32), (300, fg.float32)]:
        _same(lambda dev, n=n, dtype=dtype: fg.randperm(n, dtype=dtype, device=dev))
    _same(lambda dev: fg.multinomial(fg.tensor(w, device=dev), 4, replacement=True))
    _same(lambda dev: fg.multinomial(fg.tensor(w, device=dev), 5))


# ----- generator state, transfers ---------------------------------------------


def _all_ops(dev, x):
    """One call of every random op on `dev`."""
    F = fg.nn.functional
    out = [
        fg.rand(5, device=dev),
        fg.randn(3, 3, device=dev),
        fg.randint(0, 7, (9,), device=dev),
        fg.randint(0, 7, (3,), dtype=fg.float16, device=dev),
        fg.normal(1.0, 2.0, size=(6,), device=dev),
        fg.empty(7, device=dev).uniform_(-1, 1),
        fg.empty(6, dtype=fg.bfloat16, device=dev).normal_(0, 1).float(),
        fg.zeros(11, dtype=fg.int32, device=dev).bernoulli_(0.3),
        fg.bernoulli(fg.full((2, 5), 0.5, device=dev)),
        F.dropout(x.to(dev), 0.25),
        fg.randperm(5, device=dev),
        fg.multinomial(fg.ones(4, device=dev), 2),
    ]
    return [o.numpy() for o in out]


def test_interleaved_cpu_and_gpu_draws_stay_in_step():
    x = fg.tensor(np.arange(1, 14, dtype=np.float32))
    fg.manual_seed(99)
    want = [_all_ops("cpu", x) for _ in range(2)]
    state_cpu = fg.default_generator.get_state()
    fg.manual_seed(99)
    got = [_all_ops(dev, x) for dev in ("gpu", "cpu")]
    assert fg.default_generator.get_state() == state_cpu
    fg.manual_seed(99)
    got2 = [_all_ops(dev, x) for dev in ("cpu", "gpu")]
    for run in (got, got2):
        for ws, gs in zip(want, run, strict=True):
            for k, (w, g) in enumerate(zip(ws, gs, strict=True)):
                if k in (1, 4, 6):  # normals
                    np.testing.assert_allclose(g, w, rtol=2e-2 if k == 6 else 1e-5, atol=1e-5)
                else:
                    np.testing.assert_array_equal(g, w)


def test_generator_objects_give_the_same_numbers_on_both_devices():
    gc, gg = fg.Generator("cpu").manual_seed(5), fg.Generator("gpu").manual_seed(5)
    for _ in range(3):
        a = fg.rand(33, generator=gc)
        b = fg.rand(33, generator=gg, device="gpu")
        np.testing.assert_array_equal(b.numpy(), a.numpy())
        a = fg.randint(-4, 4, (10,), generator=gc)
        b = fg.randint(-4, 4, (10,), generator=gg, device="gpu")
        np.testing.assert_array_equal(b.numpy(), a.numpy())
    assert gc.get_state() == gg.get_state()


def test_draws_upload_nothing():
    x = fg.ones(1000, device="gpu")
    p = fg.full((1000,), 0.3, device="gpu")
    fg.gpu.synchronize()
    for name, make in [
        ("rand", lambda: fg.rand(1000, device="gpu")),
        ("randn", lambda: fg.randn(1000, device="gpu")),
        ("randint", lambda: fg.randint(0, 100, (1000,), device="gpu")),
        ("uniform_", lambda: fg.empty(1000, device="gpu", dtype=fg.float16).uniform_(2, 3)),
        ("bernoulli_", lambda: fg.empty(1000, device="gpu").bernoulli_(0.4)),
        ("dropout", lambda: fg.nn.functional.dropout(x, 0.5)),
        ("bernoulli", lambda: fg.bernoulli(p)),
    ]:
        before = fg.gpu.stats()
        t = make()
        after = fg.gpu.stats()
        assert after["uploads"] == before["uploads"], name
        # Only bernoulli with probabilities reads back: its one-word verdict.
        assert after["downloads"] - before["downloads"] == (1 if name == "bernoulli" else 0), name
        assert after["dispatches"] > before["dispatches"] or after["pending_dispatches"] > 0, name
        del t


def test_large_draws():
    # Many workgroups; each invocation computes one block (a 10-round loop,
    # far below a driver's loop limit such as lavapipe's 65535).
    n = (1 << 20) + 3
    c, g = _same(lambda dev: fg.rand(n, device=dev))
    v = g.numpy()
    assert abs(v.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    _same(lambda dev: fg.randint(0, 1000, (n // 3,), device=dev))


# ----- statistics -------------------------------------------------------------


def test_statistics():
    n = 1 << 18
    fg.manual_seed(1234)
    u = fg.rand(n, device="gpu").numpy().astype(np.float64)
    z = fg.randn(n, device="gpu").numpy().astype(np.float64)
    b = fg.empty(n, device="gpu").bernoulli_(0.3).numpy()
    k = fg.randint(0, 10, (n,), device="gpu").numpy()
    s = 5 / np.sqrt(n)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < s * np.sqrt(1 / 12) and abs(u.var() - 1 / 12) < s * 0.1
    assert abs(z.mean()) < s and abs(z.std() - 1) < 2 * s
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < s
    assert abs(b.mean() - 0.3) < s * np.sqrt(0.21)
    counts = np.bincount(k, minlength=10)
    chi2 = ((counts - n / 10) ** 2 / (n / 10)).sum()
    assert counts.size == 10 and chi2 < 40, chi2  # 9 degrees of freedom: p < 1e-5
    # Neighbouring elements are uncorrelated (different words of a block, and across blocks).
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < s
    assert abs(np.corrcoef(u[:-4], u[4:])[0, 1]) < s


# ----- compiled graphs --------------------------------------------------------


def test_compiled_dropout_replays_with_new_streams_matching_eager_and_cpu():
    xs = np.random.default_rng(7).standard_normal((6, 33)).astype(np.float32)
    F = fg.nn.functional

    def f(x):
        return F.dropout(x, 0.3) * 2.0 + fg.rand_like(x)

    runs = {}
    for dev, compiled in (("cpu", False), ("gpu", False), ("gpu", True)):
        fn = fg.compile(f) if compiled else f
        x = fg.tensor(xs, device=dev)
        fg.manual_seed(17)
        runs[(dev, compiled)] = [fn(x).numpy() for _ in range(5)]
        if compiled:
            info = fn.graph(x).gpu_replay(x)
            assert info["reason"] is None and info["replays"] >= 3, info
            before = fg.gpu.stats()
            fn(x)
            fg.gpu.synchronize()
            after = fg.gpu.stats()
            # One replay: the per-run metadata of its random kernels is its only upload.
            assert after["uploads"] - before["uploads"] == 1, (before, after)
            assert after["downloads"] == before["downloads"]
    for a, b, c in zip(runs[("cpu", False)], runs[("gpu", False)], runs[("gpu", True)], strict=True):
        np.testing.assert_array_equal(b, a)
        np.testing.assert_array_equal(c, a)
    assert not np.array_equal(runs[("gpu", True)][1], runs[("gpu", True)][2])


def test_compiled_training_with_dropout_matches_eager_gpu_and_cpu():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((8, 16)).astype(np.float32) for _ in range(3)]
    ys = [rng.integers(0, 4, 8) for _ in range(3)]
    runs = {}
    for dev, compiled in (("cpu", False), ("gpu", False), ("gpu", True)):
        fg.manual_seed(0)
        m = fg.nn.Sequential(fg.nn.Linear(16, 32), fg.nn.ReLU(), fg.nn.Dropout(0.4), fg.nn.Linear(32, 4)).to(
            dev
        )
        o = fg.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y, m=m, o=o):
            o.zero_grad()
            h = m(x)
            loss = fg.nn.functional.cross_entropy(h, y)
            loss.backward()
            o.step()
            return loss, h

        fn = fg.compile(step) if compiled else step
        xt = [fg.tensor(x, device=dev) for x in xs]
        yt = [fg.tensor(y, device=dev) for y in ys]
        fg.manual_seed(42)
        out = [fn(xt[i % 3], yt[i % 3]) for i in range(6)]
        runs[(dev, compiled)] = ([float(loss.item()) for loss, _ in out], [h.numpy() for _, h in out])
        if compiled:
            info = fn.graph(xt[0], yt[0]).gpu_replay(xt[0], yt[0])
            assert info["reason"] is None and info["replays"] >= 3, info
    (le, he), (lc, hc), (lcpu, hcpu) = runs[("gpu", False)], runs[("gpu", True)], runs[("cpu", False)]
    np.testing.assert_array_equal(lc, le)
    for a, b, c in zip(hc, he, hcpu, strict=True):
        np.testing.assert_array_equal(a, b)
        # Against the CPU: the same dropout masks (a dropped unit is exactly 0 on
        # both), the arithmetic within float32 matmul tolerances.
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lc, lcpu, rtol=1e-4)


def test_compiled_mix_of_host_and_device_draws_keeps_the_order():
    # randperm still draws on the host: a replay reserves its stream in the
    # run's order among the device kernels' streams.
    def f(x):
        a = fg.rand(4, device="gpu")
        b = fg.randperm(6, device="gpu")
        c = fg.randn(3, device="gpu")
        return x + a.sum(), b, c, fg.nn.functional.dropout(x, 0.5)

    x = fg.ones(4, device="gpu")
    cf = fg.compile(f)
    fg.manual_seed(2)
    got = [[t.numpy() for t in cf(x)] for _ in range(4)]
    fg.manual_seed(2)
    want = [[t.numpy() for t in f(x)] for _ in range(4)]
    for g_run, w_run in zip(got, want, strict=True):
        for a, b in zip(g_run, w_run, strict=True):
            np.testing.assert_array_equal(a, b)
    info = cf.graph(x).gpu_replay(x)
    assert info["reason"] is None and info["replays"] >= 2, info


def test_bundle_refuses_random_ops(tmp_path):
    m = fg.nn.Sequential(fg.nn.Linear(4, 4), fg.nn.Dropout(0.5)).to("gpu")
    g = fg.compile(lambda x: m(x)).graph(fg.ones(2, 4, device="gpu"))
    with pytest.raises(RuntimeError, match="cannot draw random numbers"):
        g.export_webgpu(str(tmp_path / "b"))


# ----- other device configurations (subprocesses) -----------------------------


@pytest.mark.skipif(bool(os.environ.get("FG_RANDOM_SUBRUN")), reason="already in a subprocess run")
@pytest.mark.parametrize(
    "env,select",
    [
        (
            {"FG_GPU_MAX_BINDING_BYTES": "4096"},
            "exact or dropout or probabilities or normal_matches or interleaved",
        ),
        ({"FG_GPU_NO_F16": "1"}, "float16 or bfloat16 or interleaved"),
    ],
    ids=["pieces-over-4KiB-bindings", "float16-as-float32-words"],
)
def test_in_other_device_configurations(env, select):
    """The tests again with a 4 KiB binding limit (kernels work through
    tensors in pieces of whole blocks, each operand bound through a window)
    and with float16 stored as float32 words (rounded after every write)."""
    full = dict(os.environ, FG_RANDOM_SUBRUN="1", **env)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            str(HERE / "test_gpu_random.py"),
            "-k",
            select,
        ],
        env=full,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]
