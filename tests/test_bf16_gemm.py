"""bfloat16 matrix products on the CPU against float64 NumPy sums of the same
bfloat16-rounded inputs.

Where the CPU has AVX512_BF16 (and the AVX-512 level is in use) these run the
`vdpbf16ps` kernel; elsewhere the float32 path. The bound: float32
accumulation over K plus one rounding of the result to bfloat16, below
2^-8 * sum_k |a_ik||b_kj| for the sizes here.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def _has_avx512_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return False


def _bf16(shape, seed):
    """A bfloat16 tensor and its exact values as float64."""
    x = np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)
    t = fg.tensor(x).bfloat16()
    return t, t.float().numpy().astype(np.float64)


def _check(got, a64, b64, bias64=None):
    """`got` (a bfloat16 tensor) against a64 @ b64 (+ bias) in float64."""
    want = np.matmul(a64, b64)
    mag = np.matmul(np.abs(a64), np.abs(b64))
    if bias64 is not None:
        want = want + bias64
        mag = mag + np.abs(bias64)
    assert got.dtype == fg.bfloat16
    g = got.float().numpy().astype(np.float64)
    assert g.shape == want.shape
    err = np.abs(g - want)
    bound = 2.0**-8 * mag + 1e-30
    bad = err > bound
    assert not bad.any(), f"{bad.sum()} of {bad.size} out of bound; worst {(err / bound).max():.3g}"


@pytest.mark.parametrize(
    "m,k,n",
    [(1, 1, 1), (5, 1, 7), (13, 7, 33), (12, 32, 32), (64, 127, 96), (300, 521, 257)],
)
def test_matmul(m, k, n):
    a, a64 = _bf16((m, k), m * 7 + k)
    b, b64 = _bf16((k, n), n * 3 + k)
    _check(a @ b, a64, b64)
    _check(fg.mm(a, b), a64, b64)


def test_transposed_and_strided():
    a, a64 = _bf16((41, 30), 1)
    b, b64 = _bf16((37, 41), 2)
    # aᵀ (column-major view) times bᵀ.
    _check(a.t() @ b.t(), a64.T, b64.T)
    # Every other column of a wide operand (column stride 2), odd K, times
    # every third column of b.
    w, w64 = _bf16((23, 74), 3)
    _check(w[:, ::2] @ b[:, ::3], w64[:, ::2], b64[:, ::3])
    # Rows with a gap (row stride > columns).
    _check(w[:, 5:42] @ b, w64[:, 5:42], b64)


def test_batched_and_broadcast():
    a, a64 = _bf16((4, 17, 33), 4)
    b, b64 = _bf16((4, 33, 20), 5)
    _check(fg.bmm(a, b), a64, b64)
    # Broadcast batch dims, and a batched operand against a plain matrix.
    c, c64 = _bf16((3, 1, 9, 15), 6)
    d, d64 = _bf16((2, 15, 11), 7)
    _check(c @ d, c64, d64)
    e, e64 = _bf16((15, 40), 8)
    _check(c @ e, c64, e64)
    # Many small matrices (split over the threads one matrix per task).
    f, f64 = _bf16((64, 24, 40), 9)
    g, g64 = _bf16((64, 40, 24), 10)
    _check(fg.bmm(f, g), f64, g64)


def test_linear_with_bias():
    x, x64 = _bf16((70, 37), 11)
    w, w64 = _bf16((45, 37), 12)
    bias, b64 = _bf16((45,), 13)
    _check(fg.nn.functional.linear(x, w, bias), x64, w64.T, b64)
    _check(fg.nn.functional.linear(x, w), x64, w64.T)


def test_zero_size():
    a, a64 = _bf16((0, 5), 14)
    b, b64 = _bf16((5, 3), 15)
    _check(a @ b, a64, b64)
    c, c64 = _bf16((4, 0), 16)
    d, d64 = _bf16((0, 3), 17)
    out = c @ d
    _check(out, c64, d64)
    assert (out.float().numpy() == 0).all()


def test_same_as_float32_path():
    """The vdpbf16ps kernel against the float32 kernels (the AVX2 level)
    on the same inputs: both round a float32 sum once to bfloat16."""
    if not _has_avx512_bf16() or fg.cpu_level() != "avx512":
        pytest.skip(f"needs avx512_bf16 and the avx512 level (cpu_level is {fg.cpu_level()})")
    a, a64 = _bf16((96, 300), 18)
    b, b64 = _bf16((300, 130), 19)
    fast = (a @ b).float().numpy().astype(np.float64)
    best = fg.cpu_level()
    fg.set_cpu_level("avx2")
    try:
        old = (a @ b).float().numpy().astype(np.float64)
    finally:
        fg.set_cpu_level(best)
    mag = np.abs(a64) @ np.abs(b64)
    # Each is within half a bfloat16 step (2^-9 relative) of its float32 sum,
    # and the float32 sums differ by far less.
    assert (np.abs(fast - old) <= 2.0**-8 * mag).all()
    # Most results round to the same bfloat16 value.
    assert (fast == old).mean() > 0.9


def test_autocast_gradients():
    """A linear layer under bfloat16 autocast: gradients of float32 parameters
    against float64 sums of the bfloat16-rounded operands."""
    rng = np.random.default_rng(20)
    x32 = rng.uniform(-1, 1, size=(50, 33)).astype(np.float32)
    w32 = rng.uniform(-1, 1, size=(21, 33)).astype(np.float32)
    x = fg.tensor(x32, requires_grad=True)
    w = fg.tensor(w32, requires_grad=True)
    gout = fg.tensor(rng.uniform(-1, 1, size=(50, 21)).astype(np.float32))
    with fg.autocast("cpu", dtype=fg.bfloat16):
        y = fg.nn.functional.linear(x, w)
        assert y.dtype == fg.bfloat16
        loss = (y.float() * gout).sum()
    loss.backward()
    xb = fg.tensor(x32).bfloat16().float().numpy().astype(np.float64)
    wb = fg.tensor(w32).bfloat16().float().numpy().astype(np.float64)
    gb = gout.bfloat16().float().numpy().astype(np.float64)
    # d loss / d x = g @ w and d loss / d w = gᵀ @ x, in bfloat16, then float32.
    for got, want, mag in [
        (x.grad, gb @ wb, np.abs(gb) @ np.abs(wb)),
        (w.grad, gb.T @ xb, np.abs(gb.T) @ np.abs(xb)),
    ]:
        assert got.dtype == fg.float32
        err = np.abs(got.numpy().astype(np.float64) - want)
        assert (err <= 2.0**-8 * mag + 1e-30).all(), err.max()
