"""Tensors larger than one WebGPU storage binding.

A kernel may bind at most ``max_storage_buffer_binding_size`` bytes of a
buffer (128 MiB on many adapters) although buffers may be larger. Elementwise
kernels (eager and fused) work through such tensors in pieces, binding only
the byte ranges each piece touches, and full reductions of contiguous tensors
combine per-piece partials; kernels that cannot split raise an error naming
the op and the limit. The piecewise path is tested in a subprocess
whose device is created with a 4 KiB binding limit
(``FG_GPU_MAX_BINDING_BYTES``), so small tensors exercise it; one test uses
the adapter's real limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

SCRIPT = textwrap.dedent(
    """
    import ferrograd as fg, numpy as np

    limit = fg.gpu.info()["limits"]["max_storage_buffer_binding_size"]
    assert limit == 4096, limit
    rng = np.random.default_rng(0)
    n = 5003  # 20 KB of float32: five pieces, the last one short
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    gx, gy = fg.from_numpy(x).to("gpu"), fg.from_numpy(y).to("gpu")

    def same(got, want, tol=0.0):
        got = got.numpy()
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

    same(gx * gy + 1.5, x * y + 1.5)                   # binary ops and a broadcast scalar
    same(gx.exp(), np.exp(x), 1e-6)                    # unary
    same(fg.where(gx > 0, gx, gy), np.where(x > 0, x, y))
    same(gx[7:] - gy[:-7], x[7:] - y[:-7])             # views at offsets in one buffer
    same(fg.full((n,), 2.5, device="gpu"), np.full(n, 2.5, np.float32))
    h = gx.to(fg.float16)                              # cast, then the rounding pass, in pieces
    assert np.array_equal(h.numpy(), x.astype(np.float16))
    hb = (gx * 3).to(fg.bfloat16)
    assert np.array_equal(hb.float().numpy(), (fg.from_numpy(x) * 3).to(fg.bfloat16).float().numpy())
    z = gx.clone()
    z += gy                                            # in place
    same(z, x + y)
    z[100:4000] = 0.25                                 # a write into a view
    want = x + y
    want[100:4000] = 0.25
    same(z, want)
    f = fg.compile(lambda a, b: (a * b + a).exp())     # a fused kernel
    np.testing.assert_allclose(f(gx, gy).numpy(), np.exp(x * y + x), rtol=2e-6)
    assert f.stats.kernels_per_call == 1

    # Full reductions split into per-piece partials (float32 for float sums and means).
    cx = fg.from_numpy(x)
    for name, fn in [("sum", lambda t: t.sum()), ("mean", lambda t: t.mean()), ("max", lambda t: t.max()),
                     ("min", lambda t: t.min()), ("prod", lambda t: (t * 0.001 + 1).prod()),
                     ("view sum", lambda t: t[3:].sum()), ("keepdim mean", lambda t: t.reshape(1, n).mean(1, keepdim=True)),
                     ("all", lambda t: (t > -3.5).all()), ("any", lambda t: (t > 3.2).any()),
                     ("int sum", lambda t: (t > 0).to(fg.int32).sum()),
                     ("float16 sum", lambda t: t.to(fg.float16).sum()), ("float16 mean", lambda t: t.to(fg.float16).mean())]:
        got, want = fn(gx), fn(cx)
        assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), name
        tol = 2e-3 if "float16" in name else 1e-5
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=tol, atol=tol, err_msg=name)

    # Kernels that cannot split say which op, the limit, and what to do.
    for name, fn in [("var", lambda: gx.var()), ("sum", lambda: gx[:5000].reshape(50, 100).sum(1)),
                     ("add", lambda: gx.reshape(5003, 1) + fg.ones(1, 3, device="gpu")),
                     ("matmul", lambda: gx.reshape(1, n) @ gy.reshape(n, 1))]:
        try:
            fn()
        except RuntimeError as e:
            msg = str(e)
            assert name in msg and "4096 bytes" in msg and ("split" in msg or "slices" in msg), msg
        else:
            raise AssertionError(f"{name} over the binding limit did not raise")
    # The failed ops left their inputs as they were.
    same(gx, x)
    print("ok")
    """
)


def test_elementwise_ops_split_tensors_over_the_binding_limit():
    env = dict(os.environ, FG_GPU_MAX_BINDING_BYTES="4096")
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_a_tensor_over_the_adapters_real_binding_limit():
    limit = fg.gpu.info()["limits"]["max_storage_buffer_binding_size"]
    cap = fg.gpu.info()["limits"]["max_buffer_size"]
    n = limit // 4 + 4099  # just over the limit, in float32
    if n * 4 > min(cap, 1 << 30):
        pytest.skip(f"the adapter's binding limit ({limit} bytes) is too large to exceed cheaply here")
    x = (np.arange(n, dtype=np.int64) % 1009).astype(np.float32)
    g = fg.from_numpy(x).to("gpu")
    got = (g * 2 + 1).numpy()
    np.testing.assert_array_equal(got, x * 2 + 1)
