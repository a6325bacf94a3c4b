"""Kernels on outputs large enough for the streaming-store and huge-page paths.

Elementwise outputs of at least 16 MiB are written with non-temporal stores
(whole aligned 64-byte lines from a register buffer, a scalar head and tail),
and blocks of at least 4 MiB are allocated on 2 MiB boundaries. The op-table
tests use small shapes, so these paths are checked here against NumPy,
including views whose first element is not line-aligned (head and tail of
every segment) and in-place forms (which must not stream over their own
input); softmax and layer norm rows of the same size are checked too.
"""

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest

N = (1 << 22) + 37  # float32: just over 16 MiB, not a multiple of a line


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(0)
    return [rng.uniform(-2, 2, N + 5).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("offset", [0, 3])
def test_binary_and_scalar_broadcast(arrays, offset):
    x, y, _ = (a[offset:offset + N] for a in arrays)
    a, b = fg.tensor(arrays[0])[offset:offset + N], fg.tensor(arrays[1])[offset:offset + N]
    np.testing.assert_array_equal((a * b).numpy(), x * y)
    np.testing.assert_array_equal((a + 1.5).numpy(), x + np.float32(1.5))
    np.testing.assert_array_equal((a < b).numpy(), x < y)


def test_unary_and_cast(arrays):
    x = arrays[0][:N]
    a = fg.tensor(x)
    np.testing.assert_allclose(fg.exp(a).numpy(), np.exp(x), rtol=1e-6)
    np.testing.assert_array_equal((-a).numpy(), -x)
    np.testing.assert_array_equal(a.to(fg.float64).numpy(), x.astype(np.float64))


def test_chain_x_mul_y_plus_z(arrays):
    x, y, z = (v[:N] for v in arrays)
    a, b, c = (fg.tensor(v) for v in (x, y, z))
    np.testing.assert_allclose((a * b + c).numpy(), x * y + z, rtol=1e-6, atol=1e-6)


def test_float64_output(arrays):
    x = arrays[0][: N // 2].astype(np.float64)
    a = fg.tensor(x)
    np.testing.assert_array_equal((a * a).numpy(), x * x)


def test_in_place_ops_keep_their_values(arrays):
    x, y, _ = (v[:N] for v in arrays)
    a, b = fg.tensor(x), fg.tensor(y)
    a += b
    np.testing.assert_array_equal(a.numpy(), x + y)
    a.mul_(2.0)
    np.testing.assert_array_equal(a.numpy(), (x + y) * np.float32(2.0))


def test_fused_unary_gradient(arrays):
    x = arrays[0][:N]
    a = fg.tensor(x, requires_grad=True)
    fg.tanh(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 1 - np.tanh(x) ** 2, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("d", [1024, 1000, 5000])
def test_softmax_rows(arrays, log, d):
    rows = N // d
    x = arrays[0][: rows * d].reshape(rows, d)
    a = fg.tensor(x)
    got = (F.log_softmax(a, dim=-1) if log else F.softmax(a, dim=-1)).numpy()
    m = x.max(axis=-1, keepdims=True)
    e = np.exp((x - m).astype(np.float64))
    s = e.sum(axis=-1, keepdims=True)
    want = (x - m) - np.log(s) if log else e / s
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_layer_norm_rows(arrays, affine):
    d = 1000
    rows = N // d
    x = arrays[0][: rows * d].reshape(rows, d)
    w = arrays[1][:d] if affine in ("weight", "both") else None
    b = arrays[2][:d] if affine in ("bias", "both") else None
    got = F.layer_norm(
        fg.tensor(x), (d,),
        None if w is None else fg.tensor(w), None if b is None else fg.tensor(b),
    ).numpy()
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    if w is not None:
        want = want * w
    if b is not None:
        want = want + b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_rms_norm_rows(arrays):
    d = 1024
    rows = N // d
    x = arrays[0][: rows * d].reshape(rows, d)
    w = arrays[1][:d]
    got = F.rms_norm(fg.tensor(x), (d,), fg.tensor(w), eps=1e-6).numpy()
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_large_blocks_are_reused(arrays):
    x = fg.tensor(arrays[0][:N])
    fg.empty_cache()
    before = fg.memory_stats()
    for _ in range(3):
        y = x * 2.0
        del y
    after = fg.memory_stats()
    # The first product allocates; the next two take its freed block back.
    assert after["cpu.cache_hits"] - before["cpu.cache_hits"] >= 2


def test_compiled_fused_kernels(arrays):
    x, y, z = (v[:N] for v in arrays)
    a, b, c = (fg.tensor(v) for v in (x, y, z))

    @fg.compile
    def f(p, q, r):
        return p * q + r, fg.tanh(p) * 2.0, 0.5 - fg.exp(-q)

    f1, f2, f3 = f(a, b, c)
    assert "fused" in [nd["op"] for nd in f.graph(a, b, c).nodes()]
    np.testing.assert_allclose(f1.numpy(), x * y + z, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f2.numpy(), np.tanh(x) * 2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f3.numpy(), 0.5 - np.exp(-y), rtol=1e-5, atol=1e-6)
