"""float16 and bfloat16 on the WebGPU device.

The device keeps bfloat16 (and float16 on adapters without shader-f16, or
under FG_GPU_NO_F16=1) as float32 words and rounds a tensor's values to its
type (to nearest, ties to even) after every kernel that writes it; float16
is otherwise stored natively, each store rounded the same way (see
test_gpu_f16.py, which also runs this file under the fallback). Either way
each op computes in float32 and stores the narrow type's value, as the CPU
kernels do.
These tests check the rounding bit for bit against the CPU, where results
must be identical (exact casts, single-rounding arithmetic, in-place updates,
writes through views), and within the narrow type's precision where the two
devices may sum in different orders (training steps).
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

NARROW = [fg.float16, fg.bfloat16]


def bits(t: fg.Tensor) -> np.ndarray:
    """The values' float32 bit patterns (NaNs made one pattern), from either device."""
    v = t.float().cpu().numpy().astype(np.float32)
    out = v.view(np.uint32).copy()
    out[np.isnan(v)] = 0x7FC00000
    return out


def edge_values() -> np.ndarray:
    """float32 values at the narrow types' rounding edges: ties (to even, both
    ways), the largest finite values and just past them, the subnormal range,
    signed zeros, infinities and NaN, plus random values over the whole range."""
    h = [1 + 2**-11, 1 + 3 * 2**-11, 1 - 2**-12, 2048 + 1, 2048 + 3, 65504, 65519.99, 65520, 7e4,
         2**-24, 2**-25, 3 * 2**-25, 2**-26, 2**-14 - 2**-25, 6.1e-5, 1e-8]
    b = [1 + 2**-8, 1 + 3 * 2**-8, 3.3895314e38, 3.4028235e38, 1e-38, 1e-40, 257.0, 259.0]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]
    rng = np.random.default_rng(0)
    wild = rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 9, 2000)
    v = np.array(h + [-x for x in h] + b + [-x for x in b] + special, np.float64)
    return np.concatenate([v, wild]).astype(np.float32)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_casts_round_like_the_cpu(dtype):
    x = fg.from_numpy(edge_values())
    want = x.to(dtype)
    got = x.to("gpu").to(dtype)
    assert got.dtype == dtype and str(got.device) == "gpu"
    np.testing.assert_array_equal(bits(got), bits(want))
    # Uploads and downloads of narrow tensors are exact, and the element size is the type's.
    up = want.to("gpu")
    assert up.element_size() == 2 and up.dtype == dtype
    np.testing.assert_array_equal(bits(up), bits(want))
    np.testing.assert_array_equal(bits(up.to(fg.float32)), bits(want.to(fg.float32)))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_arithmetic_is_rounded_once_like_the_cpu(dtype):
    rng = np.random.default_rng(1)
    a = fg.from_numpy(rng.standard_normal((64, 33)).astype(np.float32)).to(dtype)
    b = fg.from_numpy(rng.standard_normal((33,)).astype(np.float32) * 3).to(dtype)
    ga, gb = a.to("gpu"), b.to("gpu")
    for name, f in [("add", lambda p, q: p + q), ("sub", lambda p, q: p - q), ("mul", lambda p, q: p * q),
                    ("div", lambda p, q: p / q), ("maximum", fg.maximum), ("neg", lambda p, q: -p),
                    ("relu", lambda p, q: fg.relu(p)), ("where", lambda p, q: fg.where(p > 0, p, q)),
                    ("square", lambda p, q: p * p + 0.1)]:
        want, got = f(a, b), f(ga, gb)
        assert got.dtype == want.dtype == dtype, name
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=name)
    # Promotion with float32 gives float32 on both devices, unrounded.
    f32 = fg.from_numpy(rng.standard_normal(33).astype(np.float32))
    mixed = ga + f32.to("gpu")
    assert mixed.dtype == fg.float32
    np.testing.assert_array_equal(bits(mixed), bits(a + f32))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_in_place_and_view_writes_are_rounded(dtype):
    # 1 + 1e-4 is below half an ulp of 1 in both types: it must stay 1.
    x = fg.ones(5, dtype=dtype, device="gpu")
    x += 1e-4
    np.testing.assert_array_equal(x.float().numpy(), np.ones(5, np.float32))
    # A write into a strided view rounds what it writes and leaves the rest alone.
    y = fg.zeros((4, 6), dtype=dtype, device="gpu")
    c = fg.zeros((4, 6), dtype=dtype)
    v = fg.tensor([[0.1, 0.2, 0.3], [1e-3, 3.14159, 2.71828]])
    y[1::2, ::2] = v.to("gpu")
    c[1::2, ::2] = v
    np.testing.assert_array_equal(bits(y), bits(c))
    # copy_ from float32 into a narrow tensor rounds.
    z = fg.empty(6, dtype=dtype, device="gpu")
    src = fg.tensor([0.1, 1.0 + 2**-9, 7e4, -1e-7, 3.0, 1.0 / 3])
    z.copy_(src.to("gpu"))
    np.testing.assert_array_equal(bits(z), bits(src.to(dtype)))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_matmul_and_reductions_store_the_narrow_type(dtype):
    rng = np.random.default_rng(2)
    a = fg.from_numpy(rng.standard_normal((17, 40)).astype(np.float32)).to(dtype)
    b = fg.from_numpy(rng.standard_normal((40, 9)).astype(np.float32)).to(dtype)
    for name, f in [("matmul", lambda p, q: p @ q), ("sum", lambda p, q: p.sum(1)),
                    ("softmax", lambda p, q: fg.softmax(p, 1)), ("mean", lambda p, q: p.mean(0))]:
        got, want = f(a.to("gpu"), b.to("gpu")), f(a, b)
        assert got.dtype == dtype, name
        g = got.float().numpy()
        # Every stored value is representable in the narrow type...
        np.testing.assert_array_equal(g, fg.from_numpy(g).to(dtype).float().numpy(), err_msg=name)
        # ...and within the type's rounding of the CPU's (sums may run in another order).
        rtol = 2**-10 if dtype == fg.float16 else 2**-7
        np.testing.assert_allclose(g, want.float().numpy(), rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_training_steps_match_the_cpu(dtype):
    """A small MLP trained in the narrow type: forward, backward and SGD with momentum
    on the GPU stay within the type's precision of the same steps on the CPU. (Not
    Adam: with its state in float16 a second moment can round to zero, and then a
    gradient one ulp apart on the two devices moves a weight by lr/eps.)"""
    def run(device):
        fg.manual_seed(0)
        model = fg.nn.Sequential(fg.nn.Linear(12, 16), fg.nn.Tanh(), fg.nn.Linear(16, 3)).to(dtype=dtype)
        model.to(device)
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        rng = np.random.default_rng(3)
        x = fg.from_numpy(rng.standard_normal((32, 12)).astype(np.float32)).to(dtype).to(device)
        y = fg.from_numpy(rng.integers(0, 3, 32)).to(device)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = fg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        for p in model.parameters():
            assert p.dtype == dtype and str(p.device) == str(fg.device(device))
        return losses, [p.float().cpu().numpy() for p in model.parameters()]

    (lc, pc), (lg, pg) = run("cpu"), run("gpu")
    tol = 4 * 2**-10 if dtype == fg.float16 else 4 * 2**-7
    np.testing.assert_allclose(lg, lc, rtol=tol)
    for c, g in zip(pc, pg, strict=True):
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol)
        # The parameters the GPU optimizer wrote hold narrow values.
        assert np.array_equal(g, fg.from_numpy(g).to(dtype).float().numpy())


@pytest.mark.parametrize("dtype", NARROW, ids=str)
@pytest.mark.parametrize("make", [
    lambda ps: fg.optim.Adam(ps, lr=1e-2),
    lambda ps: fg.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: fg.optim.RMSprop(ps, lr=1e-2, centered=True),
], ids=["adam", "adamw", "sgd-nesterov", "rmsprop-centered"])
def test_optimizer_updates_are_bit_exact(dtype, make):
    """Given the same gradients, the GPU's multi-tensor update stores the same
    narrow parameters and state as the CPU's (both compute in float32, round once)."""
    rng = np.random.default_rng(4)
    g0 = (rng.standard_normal(64) * 10.0 ** rng.integers(-6, 1, 64)).astype(np.float32)
    w0 = rng.standard_normal(64).astype(np.float32)
    result = []
    for device in ("cpu", "gpu"):
        p = fg.nn.Parameter(fg.from_numpy(w0).to(dtype).to(device))
        opt = make([p])
        for step in range(3):
            p.grad = fg.from_numpy(g0 * (step + 1)).to(dtype).to(device)
            opt.step()
        state = opt.state_dict()["state"][0]
        result.append([bits(p)] + [bits(v) for v in state.values() if isinstance(v, fg.Tensor)])
    assert len(result[0]) > 1
    for c, g in zip(*result, strict=True):
        np.testing.assert_array_equal(g, c)
