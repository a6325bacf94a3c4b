"""bfloat16 convolutions on the CPU against float64 NumPy sums of the same
bfloat16-rounded inputs: forward, input gradient and weight gradient.

Where the CPU has AVX512_BF16 (at the AVX-512 level) these run on the
`vdpbf16ps` GEMM with bfloat16 im2col; the bound is that of float32
accumulation plus one rounding to bfloat16: 2^-8 * sum |x||w| per element.
"""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest


def _has_avx512_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return False


pytestmark = pytest.mark.skipif(
    not _has_avx512_bf16(), reason="the CPU has no avx512_bf16 (the bfloat16 conv kernels need it)"
)


def _bf16(shape, seed):
    """A bfloat16 tensor and its exact values as float64."""
    x = np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape).astype(np.float32)
    t = fg.tensor(x).bfloat16()
    return t, t.float().numpy().astype(np.float64)


def _unfold(x, k, s, p, d, groups):
    """(N, C, H, W) -> columns (N, G, C/G*kH*kW, oH*oW), zero padded."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.empty((n, c, k[0], k[1], oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * d[0], j * d[1]
            cols[:, :, i, j] = xp[
                :, :, r0 : r0 + s[0] * (oh - 1) + 1 : s[0], c0 : c0 + s[1] * (ow - 1) + 1 : s[1]
            ]
    return cols.reshape(n, groups, c // groups * k[0] * k[1], oh * ow), (oh, ow)


def _fold(cols, xshape, k, s, p, d, oh, ow):
    """Adjoint of _unfold: columns summed back into (N, C, H, W)."""
    n, c, h, w = xshape
    cols = cols.reshape(n, c, k[0], k[1], oh, ow)
    xp = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * d[0], j * d[1]
            xp[:, :, r0 : r0 + s[0] * (oh - 1) + 1 : s[0], c0 : c0 + s[1] * (ow - 1) + 1 : s[1]] += cols[
                :, :, i, j
            ]
    return xp[:, :, p[0] : p[0] + h, p[1] : p[1] + w]


def _ref(x, w, g, s, p, d, groups):
    """Forward, input and weight gradients (and their magnitudes) in float64."""
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    cols, (oh, ow) = _unfold(x, (kh, kw), s, p, d, groups)
    acols = np.abs(cols)
    wm = w.reshape(groups, o // groups, cg * kh * kw)
    gm = g.reshape(n, groups, o // groups, oh * ow)
    y = np.einsum("gok,ngkp->ngop", wm, cols).reshape(n, o, oh, ow)
    ym = np.einsum("gok,ngkp->ngop", np.abs(wm), acols).reshape(n, o, oh, ow)
    dw = np.einsum("ngop,ngkp->gok", gm, cols).reshape(w.shape)
    dwm = np.einsum("ngop,ngkp->gok", np.abs(gm), acols).reshape(w.shape)
    dc = np.einsum("gok,ngop->ngkp", wm, gm)
    dcm = np.einsum("gok,ngop->ngkp", np.abs(wm), np.abs(gm))
    dx = _fold(dc, x.shape, (kh, kw), s, p, d, oh, ow)
    dxm = _fold(dcm, x.shape, (kh, kw), s, p, d, oh, ow)
    return (y, ym), (dx, dxm), (dw, dwm)


def _close(name, got, want, mag):
    assert got.dtype == fg.bfloat16, f"{name}: dtype {got.dtype}"
    gv = got.float().numpy().astype(np.float64)
    assert gv.shape == want.shape, f"{name}: shape {gv.shape} vs {want.shape}"
    err = np.abs(gv - want)
    bound = 2.0**-8 * mag + 1e-30
    bad = err > bound
    assert not bad.any(), f"{name}: {bad.sum()} of {bad.size} out of bound; worst {(err / bound).max():.3g}"


CASES = [
    # n, c, h, w, o, k, stride, pad, dilation, groups, bias
    (1, 3, 9, 9, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    (5, 6, 10, 8, 9, (3, 3), (2, 2), (1, 1), (1, 1), 3, True),
    (3, 5, 11, 12, 7, (3, 2), (1, 2), (2, 1), (2, 1), 1, False),
    (2, 8, 7, 7, 17, (1, 1), (1, 1), (0, 0), (1, 1), 1, True),
    (2, 6, 9, 9, 6, (3, 3), (1, 1), (1, 1), (1, 1), 6, True),
    (16, 32, 14, 14, 64, (3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    # one input channel (K = 9, odd); one large sample (the GEMM is threaded)
    (3, 1, 28, 28, 32, (3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    (1, 64, 40, 40, 128, (3, 3), (1, 1), (1, 1), (1, 1), 1, True),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_conv2d_forward_and_grads(case):
    n, c, h, w_, o, k, s, p, d, groups, has_bias = case
    x, x64 = _bf16((n, c, h, w_), 1)
    w, w64 = _bf16((o, c // groups, *k), 2)
    b, b64 = _bf16((o,), 3)
    x.requires_grad_(True)
    w.requires_grad_(True)
    b.requires_grad_(True)
    y = F.conv2d(x, w, b if has_bias else None, stride=s, padding=p, dilation=d, groups=groups)
    oh, ow = y.shape[2], y.shape[3]
    g, g64 = _bf16((n, o, oh, ow), 4)
    (yr, ym), (dxr, dxm), (dwr, dwm) = _ref(x64, w64, g64, s, p, d, groups)
    if has_bias:
        yr = yr + b64[None, :, None, None]
        ym = ym + np.abs(b64)[None, :, None, None]
    _close("forward", y, yr, ym)
    y.backward(g)
    _close("grad input", x.grad, dxr, dxm)
    _close("grad weight", w.grad, dwr, dwm)
    if has_bias:
        _close("grad bias", b.grad, g64.sum(axis=(0, 2, 3)), np.abs(g64).sum(axis=(0, 2, 3)))


def test_strided_input():
    base, base64 = _bf16((3, 4, 10, 9), 5)
    x, x64 = base.transpose(2, 3), base64.transpose(0, 1, 3, 2)
    w, w64 = _bf16((7, 4, 3, 3), 6)
    w.requires_grad_(True)
    y = F.conv2d(x, w, padding=1)
    g, g64 = _bf16(tuple(y.shape), 7)
    (yr, ym), _, (dwr, dwm) = _ref(x64, w64, g64, (1, 1), (1, 1), (1, 1), 1)
    _close("forward", y, yr, ym)
    y.backward(g)
    _close("grad weight", w.grad, dwr, dwm)


def test_conv1d():
    x, x64 = _bf16((4, 5, 23), 8)
    w, w64 = _bf16((9, 5, 4), 9)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = F.conv1d(x, w, stride=2, padding=3, dilation=2)
    g, g64 = _bf16(tuple(y.shape), 10)
    (yr, ym), (dxr, dxm), (dwr, dwm) = _ref(
        x64[:, :, None, :], w64[:, :, None, :], g64[:, :, None, :], (1, 2), (0, 3), (1, 2), 1
    )
    _close("forward", y, yr[:, :, 0], ym[:, :, 0])
    y.backward(g)
    _close("grad input", x.grad, dxr[:, :, 0], dxm[:, :, 0])
    _close("grad weight", w.grad, dwr[:, :, 0], dwm[:, :, 0])


def _cnn(seed):
    fg.manual_seed(seed)
    return fg.nn.Sequential(
        fg.nn.Conv2d(3, 8, 3, padding=1),
        fg.nn.ReLU(),
        fg.nn.Conv2d(8, 13, 3, stride=2),
        fg.nn.ReLU(),
        fg.nn.Flatten(),
        fg.nn.Linear(13 * 5 * 5, 10),
    )


def test_autocast_training_step():
    """One SGD step of a small CNN under bfloat16 autocast against float32."""
    rng = np.random.default_rng(11)
    xb = fg.tensor(rng.standard_normal((8, 3, 12, 12)).astype(np.float32))
    yb = fg.tensor(rng.integers(0, 10, size=8))
    runs = []
    for amp in (False, True):
        model = _cnn(0)
        opt = fg.optim.SGD(model.parameters(), lr=0.1)
        with fg.autocast("cpu", dtype=fg.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        grads = [p.grad.numpy().astype(np.float64) for p in model.parameters()]
        opt.step()
        runs.append((float(loss.float().item()), grads))
    (l32, g32), (l16, g16) = runs
    assert abs(l16 - l32) <= 2e-2 * abs(l32), (l16, l32)
    for i, (a, b) in enumerate(zip(g16, g32, strict=True)):
        rel = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)
        assert rel < 5e-2, f"parameter {i}: relative gradient difference {rel:.3g}"
