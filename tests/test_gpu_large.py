"""Tensors larger than one WebGPU storage binding.

A kernel may bind at most ``max_storage_buffer_binding_size`` bytes of a
buffer (128 MiB on many adapters) although buffers may be larger. Elementwise
kernels (eager and fused) work through such tensors in pieces, binding only
the byte ranges each piece touches; full reductions of contiguous tensors
combine per-piece partials; other kernels (matmul, reductions, softmax,
indexing, convolution, pooling, scans) run over pieces of their iteration
space bound through windows of the large buffers; variance and logsumexp
take two passes that both split, arg-reductions combine their pieces, and
row kernels (norms, cross-entropy, softmax gradients) run on blocks of whole
rows, or, when one row exceeds the limit (softmax, norms), decompose into
reductions and elementwise ops that split; convolutions split images and
channels, and an image plane beyond the limit into bands of rows. What
cannot be split (a single band of rows beyond the limit) raises an error
naming the op and the limit. The piecewise path is tested in a subprocess
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
    # Operands that share one large buffer but are not laid out as the result
    # (a broadcast element or row of the same tensor, a transposed view) are
    # copied into buffers of their own before the pieces run.
    same(gx + gx[4990:4991], x + x[4990:4991])
    same(gx[:5000].reshape(50, 100) * gx[:100], x[:5000].reshape(50, 100) * x[:100])
    sq = x[:4900].reshape(70, 70)
    same(gx[:4900].reshape(70, 70) - gx[:4900].reshape(70, 70).T, sq - sq.T)
    same(fg.where(gx > 0, gx, gx[3:4]), np.where(x > 0, x, x[3:4]))
    zz = gx.clone()
    zz += zz[2:3]                                      # in place, reading an element of itself
    same(zz, x + x[2])
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

    # Other kernels run in pieces too: the op's iteration space is halved
    # until every piece's operands fit one binding each (windows of the big
    # buffers); reductions over a split dim combine their partial results.
    import ferrograd.nn.functional as F

    def dev(a):
        return fg.from_numpy(np.ascontiguousarray(a)).to("gpu")

    A = rng.standard_normal((70, 50)).astype(np.float32)      # 14 KB: four bindings' worth
    W = rng.standard_normal((300, 50)).astype(np.float32)     # a weight used transposed
    X = rng.standard_normal((40, 2000)).astype(np.float32)    # rows over 4 KB: K splits
    Y = rng.standard_normal((2000, 3)).astype(np.float32)
    B3 = rng.standard_normal((4, 30, 40)).astype(np.float32)
    C3 = rng.standard_normal((4, 40, 20)).astype(np.float32)
    cA = fg.from_numpy(A)
    ex = np.exp(A - A.max(1, keepdims=True))
    same(dev(A) @ dev(W).T, A @ W.T, 1e-4)
    same(dev(X) @ dev(Y), X @ Y, 1e-3)
    same(dev(B3) @ dev(C3), B3 @ C3, 1e-4)
    same(dev(A).softmax(1), ex / ex.sum(1, keepdims=True), 1e-5)
    same(dev(A).log_softmax(0), cA.log_softmax(0).numpy(), 1e-5)      # a column spans every piece
    same(dev(A).T.softmax(0), (ex / ex.sum(1, keepdims=True)).T, 1e-5)
    same(dev(A).sum(1), A.sum(1), 1e-4)
    same(dev(A).mean(0), A.mean(0), 1e-5)                              # split along the reduced dim
    same(dev(A).var(1), cA.var(1).numpy(), 1e-4)
    same(dev(A).max(1).values, A.max(1))
    same(dev(A).argmax(1), A.argmax(1))
    same((dev(A) > 0).to(fg.int32).sum(0), (A > 0).sum(0).astype(np.int32))
    same((dev(A) * 0.01 + 1).prod(0), (cA * 0.01 + 1).prod(0).numpy(), 1e-5)
    assert np.array_equal((dev(A) > 2).any(0).numpy(), (A > 2).any(0))
    assert np.array_equal((dev(A) > -2).all(0).numpy(), (A > -2).all(0))
    h16 = cA.to(fg.float16)
    same(dev(A).to(fg.float16).mean(0).float(), h16.mean(0).float().numpy(), 2e-3)
    same(dev(A).cumsum(1), cA.cumsum(1).numpy(), 1e-5)
    same(dev(A).reshape(70, 50, 1) + fg.ones(1, 1, 3, device="gpu"),
         np.broadcast_to(A.reshape(70, 50, 1) + 1, (70, 50, 3)))     # a broadcast
    same(dev(A).T.contiguous(), A.T)                                  # a transposing copy
    same(dev(A)[:, ::2] * 2, A[:, ::2] * 2)
    # Embedding lookups and their gradient: one pass per window of the table.
    E = rng.standard_normal((500, 16)).astype(np.float32)          # 32 KB
    idx = rng.integers(0, 500, size=(7, 9))
    same(dev(E)[dev(idx)], E[idx])
    Et = dev(E).requires_grad_()
    (Et[dev(idx)] ** 2).sum().backward()
    gE = np.zeros_like(E)
    np.add.at(gE, idx, 2 * E[idx])
    same(Et.grad, gE, 1e-5)
    Wt = dev(W).requires_grad_()
    (dev(A) @ Wt.T).sum().backward()
    same(Wt.grad, np.ones((300, 70), np.float32) @ A, 1e-3)
    # Convolution and pooling split over images (and channels), with gradients.
    Xi = rng.standard_normal((6, 3, 12, 12)).astype(np.float32)    # 10 KB
    Wc = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bc = rng.standard_normal(4).astype(np.float32)
    cX, cW = fg.from_numpy(Xi).requires_grad_(), fg.from_numpy(Wc).requires_grad_()
    gX, gW = dev(Xi).requires_grad_(), dev(Wc).requires_grad_()
    same(F.conv2d(gX, gW, dev(bc), padding=1), F.conv2d(cX, cW, fg.from_numpy(bc), padding=1).detach().numpy(), 1e-4)
    F.conv2d(gX, gW, padding=1).square().sum().backward()
    F.conv2d(cX, cW, padding=1).square().sum().backward()
    same(gX.grad, cX.grad.numpy(), 1e-3)
    same(gW.grad, cW.grad.numpy(), 1e-2)
    same(F.avg_pool2d(dev(Xi), 3, 2), F.avg_pool2d(fg.from_numpy(Xi), 3, 2).numpy(), 1e-5)
    gP, cP = dev(Xi).requires_grad_(), fg.from_numpy(Xi).requires_grad_()
    same(F.max_pool2d(gP, 2), F.max_pool2d(cP, 2).detach().numpy())
    F.max_pool2d(gP, 2).sum().backward()
    F.max_pool2d(cP, 2).sum().backward()
    same(gP.grad, cP.grad.numpy())

    # What cannot run in pieces says which op, the limit and what to do: a
    # convolution whose single band of rows (3 rows of 600 floats) is over
    # half the limit.
    P = rng.standard_normal((1, 1, 3, 600)).astype(np.float32)
    K = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    for name, fn in [("conv2d", lambda: F.conv2d(dev(P), dev(K)))]:
        try:
            fn()
        except RuntimeError as e:
            msg = str(e)
            assert name in msg and "narrower" in msg and "4096 bytes" in msg, msg
        else:
            raise AssertionError(f"{name} over the binding limit did not raise")
    # The failed ops left their inputs as they were.
    same(gx, x)
    print("ok")
    """
)


ROWS_SCRIPT = textwrap.dedent(
    """
    import ferrograd as fg, numpy as np
    import ferrograd.nn.functional as F

    assert fg.gpu.info()["limits"]["max_storage_buffer_binding_size"] == 4096
    rng = np.random.default_rng(1)
    A = rng.standard_normal((70, 50)).astype(np.float32)     # 14 KB
    x = rng.standard_normal(5003).astype(np.float32)         # 20 KB
    B3 = rng.standard_normal((6, 40, 30)).astype(np.float32)
    X4 = rng.standard_normal((30, 5, 8, 8)).astype(np.float32)
    W = rng.standard_normal(50).astype(np.float32)
    bias = rng.standard_normal(50).astype(np.float32)
    Ainf = A.copy()
    Ainf[:, 3] = -np.inf
    Ainf[5, 7] = np.inf
    Aties = np.round(A)                                       # equal extremes in many pieces
    Anan = A.copy()
    Anan[[60, 5, 65], [2, 2, 4]] = np.nan
    lab = rng.integers(0, 50, 70)
    lab[[3, 9]] = -100
    lab3 = rng.integers(0, 40, (6, 30))
    idx1 = rng.integers(0, 50, (70, 40))
    idx0 = rng.integers(0, 70, (30, 50))
    sel0, sel1, selx = rng.integers(0, 70, 100), rng.integers(0, 50, 90), rng.integers(0, 5003, 3000)

    def on(a, device):
        return fg.from_numpy(np.ascontiguousarray(a)).to(device)

    def check(name, fn, *arrays, grad=False, tol=1e-4):
        # The same function on the GPU (in pieces) and on the CPU; with
        # grad=True, the gradients of its (scalar) result.
        results = []
        for device in ("gpu", "cpu"):
            ts = [on(a, device) for a in arrays]
            if grad:
                ts = [t.requires_grad_() for t in ts]
                fn(device, *ts).backward()
                results.append([t.grad.numpy() for t in ts])
            else:
                r = fn(device, *ts)
                results.append([r.numpy() if r.dtype in (fg.int64, fg.bool) else r.float().numpy()])
        for got, want in zip(*results):
            assert got.shape == want.shape, (name, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)

    # Variance, std and logsumexp split their reduced dims too (two passes).
    check("var", lambda d, t: t.var(), x)
    check("std correction=0", lambda d, t: t.std(correction=0), x)
    check("var dim 0", lambda d, t: t.var(0), A)
    check("var dims (0, 2) keepdim", lambda d, t: t.var((0, 2), keepdim=True), B3)
    check("std of a transpose", lambda d, t: t.T.std(1), A)
    check("float16 var", lambda d, t: t.to(fg.float16).var(0), A, tol=3e-3)
    check("logsumexp dim 0", lambda d, t: t.logsumexp(0), A)
    check("logsumexp all", lambda d, t: t.logsumexp((0, 1)), A)
    check("logsumexp with infinities", lambda d, t: t.logsumexp(0), Ainf)
    check("batch_norm", lambda d, t: F.batch_norm(t, None, None, training=True), X4)
    check("batch_norm grad", lambda d, t: (F.batch_norm(t, None, None, training=True) ** 3).sum(), X4,
          grad=True, tol=1e-3)
    # Arg-reductions along a split dim keep the first extreme, NaN first.
    check("argmax dim 0", lambda d, t: t.argmax(0), A)
    check("argmin dim 0", lambda d, t: t.argmin(0), A)
    check("argmax all", lambda d, t: t.argmax(), x)
    check("argmax keepdim", lambda d, t: t.argmax(0, keepdim=True), A)
    check("argmax ties", lambda d, t: t.argmax(0), Aties)
    check("argmin ties", lambda d, t: t.argmin(0), Aties)
    check("argmax NaN", lambda d, t: t.argmax(0), Anan)
    check("argmin NaN", lambda d, t: t.argmin(0), Anan)
    check("max values", lambda d, t: t.max(0).values, A)
    check("min indices 3-d", lambda d, t: t.min(1).indices, B3)
    check("int argmax", lambda d, t: (t * 3).to(fg.int32).argmax(0), A)
    # Row kernels run on blocks of whole rows.
    check("layer_norm", lambda d, t, w, b: F.layer_norm(t, (50,), w, b), A, W, bias)
    check("layer_norm of a view", lambda d, t: F.layer_norm(t[5:], (50,)), A)
    check("layer_norm grad", lambda d, t, w, b: (F.layer_norm(t, (50,), w, b) ** 3).sum(), A, W, bias,
          grad=True, tol=1e-3)
    check("rms_norm grad", lambda d, t, w: (F.rms_norm(t, (50,), w) ** 3).sum(), A, W, grad=True, tol=1e-3)
    check("softmax grad", lambda d, t: (t.softmax(1) ** 2).sum(), A, grad=True)
    check("softmax grad dim 0", lambda d, t: (t.softmax(0) ** 2).sum(), A, grad=True)
    check("log_softmax grad", lambda d, t: (t.log_softmax(1) ** 2).sum(), A, grad=True, tol=1e-3)
    check("cross_entropy", lambda d, t: F.cross_entropy(t, on(lab, d), reduction="none"), A)
    check("cross_entropy weighted, smoothed",
          lambda d, t, w: F.cross_entropy(t, on(lab, d), weight=w.abs(), label_smoothing=0.1), A, W)
    check("cross_entropy grad", lambda d, t: F.cross_entropy(t, on(lab, d)), A, grad=True)
    check("cross_entropy grad weighted, smoothed",
          lambda d, t, w: F.cross_entropy(t, on(lab, d), weight=w.abs() + 0.1, label_smoothing=0.1),
          A, W, grad=True)
    check("cross_entropy 3-d grad", lambda d, t: F.cross_entropy(t, on(lab3, d)), B3, grad=True)
    # Rows longer than one binding (2000 and 1200 floats against 1024 per
    # binding): softmax and norms decompose into reductions and elementwise
    # ops that split.
    L = rng.standard_normal((6, 2000)).astype(np.float32)
    Linf = L.copy()
    Linf[2] = -np.inf
    WL, bL = rng.standard_normal(2000).astype(np.float32), rng.standard_normal(2000).astype(np.float32)
    check("softmax of long rows", lambda d, t: t.softmax(1), L, tol=1e-6)
    check("log_softmax of long rows", lambda d, t: t.log_softmax(1), L)
    check("log_softmax of an all -inf row", lambda d, t: t.log_softmax(1), Linf)
    check("softmax down long columns", lambda d, t: t.T.softmax(0), L, tol=1e-6)
    check("float16 softmax of long rows", lambda d, t: t.to(fg.float16).softmax(1), L, tol=1e-3)
    check("softmax grad of long rows", lambda d, t: (t.softmax(1) ** 2).sum(), L, grad=True, tol=1e-6)
    check("log_softmax grad of long rows", lambda d, t: (t.log_softmax(1) ** 2).sum(), L, grad=True, tol=1e-3)
    check("layer_norm of long rows", lambda d, t, w, b: F.layer_norm(t, (2000,), w, b), L, WL, bL)
    check("layer_norm over (40, 30)", lambda d, t: F.layer_norm(t, (40, 30)), B3)
    check("layer_norm grad of long rows", lambda d, t, w, b: (F.layer_norm(t, (2000,), w, b) ** 3).sum(),
          L, WL, bL, grad=True, tol=2e-3)
    check("layer_norm grad over (40, 30)", lambda d, t: (F.layer_norm(t, (40, 30)) ** 3).sum(), B3,
          grad=True, tol=1e-3)
    idxL = rng.integers(0, 2000, (6, 7))
    check("gather along long rows", lambda d, t: fg.gather(t, 1, on(idxL, d)), L)
    check("gather down long columns", lambda d, t: fg.gather(t.T, 0, on(idxL.T, d)), L)
    check("gather grad along long rows", lambda d, t: (fg.gather(t, 1, on(idxL, d)) ** 2).sum(), L, grad=True)
    check("scatter_add along long rows (repeated targets)",
          lambda d, t: t.scatter_add(1, on(idxL % 5, d), t[:, :7] * 2), L, tol=1e-5)
    check("scatter along long rows", lambda d, t: t.scatter(1, on(idxL, d), t[:, 10:17]), L)
    try:  # a line longer than one binding: refused by scatter_reduce, naming the sizes
        on(L, "gpu").scatter_reduce(1, on(idxL % 5, "gpu"), on(L[:, :7], "gpu"), "prod")
        raise AssertionError("scatter_reduce along a line over the binding limit did not raise")
    except RuntimeError as e:
        assert "scatter_reduce" in str(e) and "2000 elements" in str(e), e
    labL = rng.integers(0, 2000, 6)
    labL[4] = -100
    check("cross_entropy over 2000 classes", lambda d, t: F.cross_entropy(t, on(labL, d), reduction="none"), L)
    check("cross_entropy over 2000 classes, weighted and smoothed",
          lambda d, t, w: F.cross_entropy(t, on(labL, d), weight=w.abs() + 0.1, label_smoothing=0.2), L, WL)
    check("cross_entropy grad over 2000 classes", lambda d, t: F.cross_entropy(t, on(labL, d)), L, grad=True)
    check("cross_entropy grad over 2000 classes, weighted and smoothed",
          lambda d, t, w: F.cross_entropy(t, on(labL, d), weight=w.abs() + 0.1, label_smoothing=0.2), L, WL,
          grad=True)
    # Convolutions whose single images exceed a binding split channels too
    # (input channels and, for the input gradient, output channels add up).
    S = rng.standard_normal((6, 3, 300)).astype(np.float32)
    KS = rng.standard_normal((4, 3, 3)).astype(np.float32)
    XC = rng.standard_normal((2, 8, 20, 20)).astype(np.float32)
    KC = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    bC = rng.standard_normal(6).astype(np.float32)
    check("conv1d of long signals", lambda d, t, k: F.conv1d(t, k), S, KS, tol=1e-4)
    check("conv1d grads", lambda d, t, k: (F.conv1d(t, k) ** 2).sum(), S, KS, grad=True, tol=2e-3)
    check("conv2d over channels", lambda d, t, k, b: F.conv2d(t, k, b, padding=1), XC, KC, bC, tol=1e-4)
    check("conv2d grads over channels", lambda d, t, k, b: (F.conv2d(t, k, b, padding=1, stride=2) ** 2).sum(),
          XC, KC, bC, grad=True, tol=2e-3)
    # One image plane over the limit: bands of rows, each with the input
    # (or gradient) rows it reaches and a shifted top padding.
    XP = rng.standard_normal((2, 3, 40, 40)).astype(np.float32)
    KP = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bP = rng.standard_normal(4).astype(np.float32)
    K1 = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    check("conv2d over a large plane", lambda d, t, k, b: F.conv2d(t, k, b, padding=1), XP, KP, bP, tol=1e-4)
    check("conv2d over a large plane, stride 2, dilation 2",
          lambda d, t, k: F.conv2d(t, k, padding=3, stride=2, dilation=2), XP, KP, tol=1e-4)
    check("conv2d grads over a large plane",
          lambda d, t, k, b: (F.conv2d(t, k, b, padding=2, stride=2, dilation=2) ** 2).sum(),
          XP, KP, bP, grad=True, tol=2e-3)
    check("conv2d over a large plane, rows of padding only",
          lambda d, t, k, b: F.conv2d(t, k, b, padding=12), XP, KP, bP, tol=1e-4)
    check("conv2d grads over a large plane, rows of padding only",
          lambda d, t, k, b: (F.conv2d(t, k, b, padding=12) ** 2).sum(), XP, KP, bP, grad=True, tol=2e-3)
    check("conv2d grads over a large plane, stride 3, 1x1 kernel",
          lambda d, t, k: (F.conv2d(t, k, stride=3, padding=1) ** 2).sum(), XP, K1, grad=True, tol=2e-3)
    check("cumsum of long rows", lambda d, t: t.cumsum(1), L, tol=1e-3)
    check("cumsum down long columns", lambda d, t: t.T.cumsum(0), L, tol=1e-3)
    check("cumprod of long rows", lambda d, t: (t * 0.001 + 1).cumprod(1), L, tol=1e-4)
    check("int cumsum of long rows", lambda d, t: (t > 0).to(fg.int32).cumsum(1), L)
    check("cumsum grad of long rows", lambda d, t: (t.cumsum(1) ** 2).sum(), L, grad=True, tol=1e-2)
    check("rms_norm of long rows", lambda d, t, w: F.rms_norm(t, (2000,), w), L, WL)
    check("rms_norm grad of long rows", lambda d, t, w: (F.rms_norm(t, (2000,), w) ** 3).sum(), L, WL,
          grad=True, tol=2e-3)
    # Index ops: blocks of positions; lines or rows that span too much of
    # a source are first laid out densely.
    check("gather", lambda d, t: fg.gather(t, 1, on(idx1, d)), A)
    check("gather dim 0", lambda d, t: fg.gather(t, 0, on(idx0, d)), A)
    check("gather grad", lambda d, t: (fg.gather(t, 1, on(idx1, d)) ** 2).sum(), A, grad=True)
    check("gather dim 0 grad", lambda d, t: (fg.gather(t, 0, on(idx0, d)) ** 2).sum(), A, grad=True)
    check("scatter_add dim 0",
          lambda d, t: fg.zeros(70, 50, device=d).scatter_add(0, on(idx0, d), t[:30]), A)
    for red in ("sum", "amax"):
        check(f"scatter_reduce {red} dim 0 (lines split across pieces)",
              lambda d, t: t[40:].scatter_reduce(0, on(idx0 % 30, d), t[:30], red), A, tol=1e-6)
    check("index_select", lambda d, t: t.index_select(0, on(sel0, d)), A)
    check("index_select dim 1", lambda d, t: t.index_select(1, on(sel1, d)), A)
    check("index_select dim 1 grad", lambda d, t: (t.index_select(1, on(sel1, d)) ** 2).sum(), A, grad=True)
    check("index_select 1-d grad", lambda d, t: (t.index_select(0, on(selx, d)) ** 2).sum(), x, grad=True)
    check("mask", lambda d, t: t[t > 0], A)
    check("mask grad", lambda d, t: (t[t > 0] ** 2).sum(), A, grad=True)

    def set_columns(d, t):
        t = t.clone()
        t[:, on(sel1[:20], d)] = 0.5
        return t

    check("setitem columns", set_columns, A)
    print("ok")
    """
)


def test_row_kernels_and_index_ops_over_the_binding_limit():
    env = dict(os.environ, FG_GPU_MAX_BINDING_BYTES="4096")
    r = subprocess.run(
        [sys.executable, "-c", ROWS_SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


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


def test_embedding_and_output_layer_over_the_adapters_real_binding_limit():
    # A token table just over one binding (as a large vocabulary's is): the
    # lookup runs one pass per window of the table, the tied output layer
    # (h @ table.T) splits the vocabulary into pieces.
    limit = fg.gpu.info()["limits"]["max_storage_buffer_binding_size"]
    cap = fg.gpu.info()["limits"]["max_buffer_size"]
    d = 1024
    rows = limit // (4 * d) + 3
    if rows * d * 4 > min(cap, 1 << 30):
        pytest.skip(f"the adapter's binding limit ({limit} bytes) is too large to exceed cheaply here")
    table = ((np.arange(rows * d, dtype=np.int64) % 7) - 3).astype(np.float32).reshape(rows, d)
    gt = fg.from_numpy(table).to("gpu")
    idx = np.array([0, 5, rows - 1, rows // 2, rows - 2, 1])
    got = gt[fg.from_numpy(idx).to("gpu")]
    np.testing.assert_array_equal(got.numpy(), table[idx])
    h = ((np.arange(2 * d) % 5) - 2).astype(np.float32).reshape(2, d)
    logits = fg.from_numpy(h).to("gpu") @ gt.T
    np.testing.assert_array_equal(logits.numpy(), h @ table.T)


@pytest.mark.parametrize(
    ("op", "make"),
    [
        ("mul", lambda n: fg.ones(1000, 1, device="gpu") * fg.ones(1, n, device="gpu")),
        ("matmul", lambda n: fg.ones(1000, 1, device="gpu") @ fg.ones(1, n, device="gpu")),
        ("full", lambda n: fg.ones(1000, n, device="gpu")),
        ("exp", lambda n: fg.ones(1000, 1, device="gpu").expand(1000, n).exp()),
    ],
)
def test_a_result_over_the_adapters_buffer_limit_names_the_op(op, make):
    # The result alone is too large for one buffer: the error names the op
    # that asked for it, the result's shape and dtype, and the limit, before
    # anything is queued.
    cap = fg.gpu.info()["limits"]["max_buffer_size"]
    n = cap // 4000 + 1  # 1000 x n float32 is just over the limit
    with pytest.raises(RuntimeError) as e:
        make(n)
    msg = str(e.value)
    assert msg.startswith(f"{op}: "), msg
    assert f"[1000, {n}]" in msg and "float32" in msg and "max_buffer_size" in msg, msg
    # The device is still usable.
    np.testing.assert_array_equal((fg.ones(3, device="gpu") * 2).numpy(), [2.0, 2.0, 2.0])
