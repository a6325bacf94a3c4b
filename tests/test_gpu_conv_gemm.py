"""Convolutions as implicit GEMMs on the GPU (``FG_GPU_CONV=gemm|direct``).

The kernel family is chosen when the device is made, so each family runs in
a subprocess with the variable set: the forward pass, the input gradient and
the weight gradient against the CPU over many shapes (odd sizes, strides,
padding, dilation, groups and depthwise, 1x1 kernels, batch 1, strided
views, an empty batch, float16 and bfloat16), sums longer than the
adapter's loop limit lets one invocation run, and a compiled CNN training
step; then the existing convolution and pooling tests again under the
forced family.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ferrograd as fg
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

HERE = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import os

    import numpy as np
    import ferrograd as fg
    import ferrograd.nn.functional as F

    rng = np.random.default_rng(7)
    info = fg.gpu.info()
    print("adapter:", info["name"], info["backend"], "loop limit:", info["loop_limit"])


    def run(dev, x, w, b, kw, gy, dtype=None, xform=None, wform=None):
        X = fg.tensor(x).to(dev)
        W = fg.tensor(w).to(dev)
        B = None if b is None else fg.tensor(b).to(dev)
        G = fg.tensor(gy).to(dev)
        if dtype is not None:
            X, W, G = X.to(dtype), W.to(dtype), G.to(dtype)
            B = None if B is None else B.to(dtype)
        for t in (X, W, B):
            if t is not None:
                t.requires_grad_()
        y = F.conv2d(X if xform is None else xform(X), W if wform is None else wform(W), B, **kw)
        y.backward(G)
        outs = [y, X.grad, W.grad] + ([] if B is None else [B.grad])
        return [o.float().numpy() for o in outs]


    def terms(xs, ws, ys, kw):
        # Terms summed per element of y, dx, dw (and db): the rounding bound's n.
        g = kw.get("groups", 1)
        kk = ws[2] * ws[3]
        return [ws[1] * kk + 1, ws[0] // g * kk, ys[0] * ys[2] * ys[3], ys[0] * ys[2] * ys[3]]


    def case(xs, ws, kw, bias=False, xform=None, wform=None, xshape=None, wshape=None):
        xshape, wshape = xshape or xs, wshape or ws
        # Random floats: within float32's rounding bound for sums of n products,
        # (|err| <= 2 n u sum|terms| for each of the two devices), the sums of
        # absolute terms coming from the same convolution of |x|, |w| and |dy|.
        x = rng.standard_normal(xshape).astype(np.float32)
        w = rng.standard_normal(wshape).astype(np.float32)
        b = rng.standard_normal(ws[0]).astype(np.float32) if bias else None
        y0 = F.conv2d(fg.tensor(x) if xform is None else xform(fg.tensor(x)),
                      fg.tensor(w) if wform is None else wform(fg.tensor(w)), None, **kw)
        yshape = y0.shape
        gy = rng.standard_normal(yshape).astype(np.float32)
        want = run("cpu", x, w, b, kw, gy, xform=xform, wform=wform)
        got = run("gpu", x, w, b, kw, gy, xform=xform, wform=wform)
        mags = run("cpu", abs(x), abs(w), None if b is None else abs(b), kw, abs(gy), xform=xform, wform=wform)
        u = 2.0 ** -24
        for name, g_, w_, m, n in zip(("y", "dx", "dw", "db"), got, want, mags, terms(xs, ws, yshape, kw)):
            assert g_.shape == w_.shape, (name, g_.shape, w_.shape)
            tol = 4 * (n + 2) * u * m + 1e-30
            bad = np.abs(g_ - w_) > tol
            assert not bad.any(), (xs, ws, kw, name, np.abs(g_ - w_).max(), g_[bad][:4], w_[bad][:4])
        # Small integers: every partial sum is exact, so the results must be
        # equal bit for bit, in float32 and in float16/bfloat16 storage.
        xi = rng.integers(-1, 2, xshape).astype(np.float32)
        wi = rng.integers(-1, 2, wshape).astype(np.float32)
        bi = rng.integers(-2, 3, ws[0]).astype(np.float32) if bias else None
        gi = rng.integers(-1, 2, yshape).astype(np.float32)
        dts = [None, fg.float16, fg.bfloat16]
        for dt in dts:
            want = run("cpu", xi, wi, bi, kw, gi, dt, xform, wform)
            got = run("gpu", xi, wi, bi, kw, gi, dt, xform, wform)
            for name, g_, w_ in zip(("y", "dx", "dw", "db"), got, want):
                np.testing.assert_array_equal(g_, w_, err_msg=f"{xs} {ws} {kw} {name} {dt}")


    T = lambda t: t.transpose(2, 3)  # noqa: E731
    cases = [
        ((2, 3, 7, 5), (4, 3, 3, 3), {}, False),
        ((2, 3, 7, 5), (4, 3, 3, 3), {"padding": 1}, True),
        ((1, 5, 9, 11), (6, 5, 3, 3), {"stride": 2, "padding": 1}, True),
        ((3, 4, 10, 9), (8, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (2, 1), "groups": 2}, True),
        ((2, 6, 8, 7), (6, 1, 3, 3), {"padding": 1, "groups": 6}, True),  # depthwise
        ((2, 3, 8, 7), (6, 1, 3, 3), {"stride": 2, "groups": 3}, False),  # depthwise, multiplier 2
        ((2, 17, 5, 6), (19, 17, 1, 1), {}, True),  # 1x1
        ((1, 4, 10, 10), (5, 4, 1, 1), {"stride": 3, "padding": 1}, False),
        ((1, 20, 13, 13), (33, 20, 3, 3), {"padding": 1}, True),  # several tiles each way
        ((2, 3, 11, 11), (4, 3, 3, 3), {"padding": 2, "dilation": 2}, False),
        ((1, 2, 2, 3), (3, 2, 5, 5), {"padding": 2}, True),  # kernel larger than the image
        ((1, 3, 9, 9), (2, 3, 2, 2), {"stride": 3}, False),  # stride past the kernel
        ((2, 3, 6, 6), (4, 3, 2, 2), {"padding": "same"}, True),  # uneven padding
        ((1, 1, 1, 1), (1, 1, 1, 1), {}, False),
    ]
    for xs, ws, kw, bias in cases:
        case(xs, ws, kw, bias)
    # Strided views: a column-sliced input, transposed input and weight.
    case((2, 3, 6, 5), (4, 3, 3, 3), {"padding": 1}, xform=lambda t: t[:, :, :, ::2], xshape=(2, 3, 6, 10))
    case((2, 3, 6, 5), (4, 3, 3, 2), {"stride": 2}, True, xform=T, wform=T, xshape=(2, 3, 5, 6),
         wshape=(4, 3, 2, 3))
    print("shapes ok")

    # An empty batch: empty results and zero weight/bias gradients.
    x = fg.zeros(0, 3, 5, 5, device="gpu").requires_grad_()
    w = fg.ones(2, 3, 3, 3, device="gpu").requires_grad_()
    b = fg.ones(2, device="gpu").requires_grad_()
    y = F.conv2d(x, w, b, padding=1)
    assert y.shape == (0, 2, 5, 5)
    y.sum().backward()
    assert x.grad.shape == (0, 3, 5, 5)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((2, 3, 3, 3), np.float32))
    np.testing.assert_array_equal(b.grad.numpy(), np.zeros(2, np.float32))

    # Bad input is a clear error naming the op and the shapes.
    try:
        F.conv2d(fg.zeros(1, 3, 5, 5, device="gpu"), fg.zeros(2, 4, 3, 3, device="gpu"))
    except (ValueError, RuntimeError) as e:
        assert "conv2d" in str(e), e
    else:
        raise AssertionError("mismatched channels did not raise")

    # Sums longer than one invocation may loop over (where the adapter stops
    # loops): small integers again, so the results must be exact; a
    # truncated sum would differ.
    def exact(xs, ws, kw, bias=False):
        x = rng.integers(-1, 2, xs).astype(np.float32)
        w = rng.integers(-1, 2, ws).astype(np.float32)
        b = rng.integers(-2, 3, ws[0]).astype(np.float32) if bias else None
        ys = F.conv2d(fg.tensor(x), fg.tensor(w), None, **kw).shape
        gy = rng.integers(-1, 2, ys).astype(np.float32)
        want = run("cpu", x, w, b, kw, gy)
        got = run("gpu", x, w, b, kw, gy)
        for name, g_, w_ in zip(("y", "dx", "dw", "db"), got, want):
            np.testing.assert_array_equal(g_, w_, err_msg=f"{xs} {ws} {kw} {name}")

    # (The direct kernels refuse the first two there: see the test below.)
    if os.environ["FG_GPU_CONV"] == "gemm" or info["loop_limit"] is None:
        exact((1, 6000, 3, 3), (2, 6000, 3, 3), {"padding": 1}, True)  # forward: 54,000 terms
        exact((1, 2, 4, 4), (6000, 2, 3, 3), {"padding": 1})  # input gradient: 54,000 terms
    exact((70, 1, 30, 30), (2, 1, 3, 3), {"padding": 1}, True)  # weight gradient: 63,000 terms
    print("long sums ok")

    # A compiled CNN training step matches the eager one on the device, and both the CPU.
    def build(dev):
        fg.manual_seed(0)
        m = fg.nn.Sequential(
            fg.nn.Conv2d(1, 4, 3, padding=1), fg.nn.ReLU(), fg.nn.MaxPool2d(2),
            fg.nn.Conv2d(4, 6, 3, stride=2, groups=2), fg.nn.Tanh(), fg.nn.Flatten(), fg.nn.Linear(6, 3),
        ).to(dev)
        return m, fg.optim.SGD(list(m.parameters()), lr=0.05, momentum=0.9)

    xs = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
    ys = rng.integers(0, 3, 5)
    results = []
    for dev, compiled in (("cpu", False), ("gpu", False), ("gpu", True)):
        m, opt = build(dev)

        def step(a, t, m=m, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(m(a), t)
            loss.backward()
            opt.step()
            return loss

        run_ = fg.compile(step) if compiled else step
        x, t = fg.tensor(xs).to(dev), fg.tensor(ys).to(dev)
        losses = [run_(x, t).item() for _ in range(4)]
        if compiled:
            assert run_.stats.graph_breaks == 0 and run_.stats.traces == 1, run_.stats
        results.append((losses, [p.detach().cpu().numpy() for p in m.parameters()]))
    for losses, params in results[1:]:
        np.testing.assert_allclose(losses, results[0][0], rtol=1e-4)
        for a, b in zip(params, results[0][1]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    print("ok")
    """
)


def _env(kind: str) -> dict:
    return dict(os.environ, FG_GPU_CONV=kind)


@pytest.mark.parametrize("kind", ["gemm", "direct"])
def test_conv_kernels_match_the_cpu(kind):
    """Forward, input and weight gradients of either kernel family against the
    CPU (the long sums need the GEMM's split where the adapter has a loop
    limit: the direct kernels refuse the forward and input-gradient ones)."""
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=_env(kind), capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-3000:]


def test_direct_kernels_refuse_what_the_gemm_splits():
    """Under a loop limit the direct forward refuses a sum the GEMM splits,
    naming the op and the limit (so the GEMM test above really ran the GEMM);
    by default (no family forced) such a convolution, and its input gradient,
    run as the GEMM and match the CPU."""
    if fg.gpu.info()["loop_limit"] is None:
        pytest.skip("this adapter runs loops to the end")
    code = textwrap.dedent(
        """
        import ferrograd as fg
        import ferrograd.nn.functional as F
        import numpy as np
        try:
            x = fg.ones(1, 6000, 3, 3, device="gpu").requires_grad_()
            w = (fg.arange(2 * 6000 * 9, dtype=fg.float32) % 3 - 1).reshape(2, 6000, 3, 3)
            y = F.conv2d(x, w.to("gpu"), padding=1)
            y.backward(fg.ones(1, 2, 3, 3, device="gpu"))
            xc = fg.ones(1, 6000, 3, 3).requires_grad_()
            yc = F.conv2d(xc, w, padding=1)
            yc.backward(fg.ones(1, 2, 3, 3))
            np.testing.assert_array_equal(y.detach().numpy(), yc.detach().numpy())
            np.testing.assert_array_equal(x.grad.numpy(), xc.grad.numpy())
            # An input gradient summing 6000 output channels of 3x3 windows.
            w2 = (fg.arange(6000 * 2 * 9, dtype=fg.float32) % 3 - 1).reshape(6000, 2, 3, 3)
            grads = []
            for dev in ("gpu", "cpu"):
                x2 = fg.ones(1, 2, 4, 4, device=dev).requires_grad_()
                F.conv2d(x2, w2.to(dev), padding=1).sum().backward()
                grads.append(x2.grad.numpy())
            np.testing.assert_array_equal(grads[0], grads[1])
        except RuntimeError as e:
            assert "conv2d" in str(e) and "loop iterations" in str(e), e
            print("refused")
        else:
            print("ran")
        """
    )
    out = {}
    for kind in ("direct", "gemm", "default"):
        env = _env(kind)
        if kind == "default":
            env.pop("FG_GPU_CONV")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        out[kind] = r.stdout.strip()
    assert out == {"direct": "refused", "gemm": "ran", "default": "ran"}, out


def test_existing_conv_tests_under_the_gemm():
    """The convolution and pooling tests of the other GPU files, the GEMM forced:
    the kernel tests, the op table (values and gradients), pieces over the
    binding limit, float16 storage, the loop-limit test and the CNN bundle."""
    files = [
        "test_gpu_kernels.py",
        "test_gpu_optable.py",
        "test_gpu_optable_grad.py",
        "test_gpu_f16.py",
        "test_gpu.py",
        "test_webgpu_bundle.py",
        "test_gpu_large.py",
    ]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *[str(HERE / f) for f in files],
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "conv or pool or loop_limit or cnn or binding_limit or nn_kernels",
        ],
        env=_env("gemm"),
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=HERE.parent,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-2000:]
