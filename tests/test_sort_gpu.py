"""The sort family's WebGPU kernel against the CPU kernel, bit for bit: ties,
NaN, -0.0, every dtype the device stores, dims with elements after them, rows
longer than one workgroup holds, more rows than one dispatch dimension allows,
and no trip through the host. Skips, with the reason, without an adapter; sizes
stay small (the CI adapter is a software driver)."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

NAN = float("nan")


def _same(gpu, cpu):
    """Equal values (NaN where NaN, signs of zeros kept) and equal dtypes."""
    assert gpu.dtype == cpu.dtype
    g, c = gpu.to("cpu"), cpu
    if gpu.dtype == fg.bfloat16:
        g, c = g.float(), c.float()
    g, c = np.asarray(g), np.asarray(c)
    assert g.shape == c.shape
    if g.dtype.kind == "f":
        g, c = g.astype(np.float64), c.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(c))
        np.testing.assert_array_equal(np.signbit(g[~np.isnan(g)]), np.signbit(c[~np.isnan(c)]))
    np.testing.assert_array_equal(g, c)


def _both(x, fn):
    """``fn`` on the CPU tensor ``x`` and on its GPU copy; every output compared."""
    c, g = fn(x), fn(x.to("gpu"))
    for cc, gg in zip(c if isinstance(c, tuple) else (c,), g if isinstance(g, tuple) else (g,), strict=True):
        _same(gg, cc)


def _ties(shape, seed=0):
    """float32 values with many ties, NaN, 0.0 and -0.0."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    x[rng.random(shape) < 0.1] = NAN
    x[rng.random(shape) < 0.1] = -0.0
    return fg.tensor(x)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "bool"])
def test_sort_matches_cpu_for_every_stored_dtype(dtype):
    x = _ties((3, 37, 5))
    x = x if dtype.startswith(("float", "bf")) else fg.tensor(np.nan_to_num(np.asarray(x)))
    x = x.to(getattr(fg, dtype))
    for dim in (0, 1, 2, -1):
        for desc in (False, True):
            _both(x, lambda t, d=dim, de=desc: tuple(fg.sort(t, dim=d, descending=de)))
        _both(x, lambda t, d=dim: tuple(fg.topk(t, 2, dim=d)))
        _both(x, lambda t, d=dim: tuple(fg.topk(t, 3, dim=d, largest=False)))
        _both(x, lambda t, d=dim: fg.argsort(t, dim=d, descending=True))


def test_compositions_match_cpu():
    x = _ties((4, 9, 6), seed=1)
    _both(x, fg.msort)
    for dim in (0, 1, 2):
        _both(x, lambda t, d=dim: tuple(fg.kthvalue(t, 3, dim=d)))
        _both(x, lambda t, d=dim: tuple(fg.median(t, d)))
        _both(x, lambda t, d=dim: tuple(fg.nanmedian(t, d, keepdim=True)))
    _both(x, fg.median)
    _both(x, fg.nanmedian)
    _both(fg.tensor(2.5), lambda t: tuple(fg.sort(t)))
    _both(fg.zeros(0, 3), lambda t: tuple(fg.sort(t, 0)))
    _both(fg.zeros(3, 4), lambda t: tuple(fg.topk(t, 0)))


def test_long_rows_match_cpu():
    """Rows of 3000 (padded to 4096: longer than a workgroup's shared memory holds)."""
    x = _ties((3, 3000), seed=2)
    for desc in (False, True):
        _both(x, lambda t, de=desc: tuple(fg.sort(t, descending=de)))
    _both(x, lambda t: tuple(fg.topk(t, 5)))
    _both(x.t(), lambda t: tuple(fg.sort(t, 0)))


def test_more_rows_than_one_dispatch_dimension():
    """70000 rows (past the 65535 workgroups of one dispatch dimension)."""
    x = _ties((70000, 3), seed=3)
    _both(x, lambda t: tuple(fg.sort(t, 1)))
    _both(x, lambda t: tuple(fg.topk(t, 1, largest=False)))


def test_no_host_round_trip():
    x = _ties((8, 100), seed=4).to("gpu")
    fg.gpu.synchronize()
    before = fg.gpu.stats()["downloads"]
    v, i = fg.sort(x, descending=True)
    w, j = fg.topk(x, 3)
    fg.gpu.synchronize()
    assert fg.gpu.stats()["downloads"] == before
    _same(v, fg.sort(x.to("cpu"), descending=True).values)
    _same(j, fg.topk(x.to("cpu"), 3).indices)


def test_gradient_on_the_device():
    x = fg.tensor(np.random.default_rng(5).permutation(24).astype(np.float32).reshape(4, 6))
    xg = x.to("gpu").detach().requires_grad_()
    v, _ = fg.topk(xg, 2, dim=0)
    (v * fg.arange(12, device="gpu").reshape(2, 6).float()).sum().backward()
    xc = x.detach().requires_grad_()
    v, _ = fg.topk(xc, 2, dim=0)
    (v * fg.arange(12).reshape(2, 6).float()).sum().backward()
    _same(xg.grad, xc.grad)
