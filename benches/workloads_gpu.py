"""W9: the workloads of W2–W7 on the WebGPU device (imported by ``run.py``).

Rows are named ``W9`` with the source workload in the variant. ferrograd runs
on ``device="gpu"``; NumPy (on the CPU) is the always-present reference
column, and PyTorch on CUDA joins when it is installed with a usable GPU.
Every timed call ends with a synchronisation (``fg.gpu.synchronize()`` where
the build has it, else a read of the result), so figures include the wait
for the GPU, as a training loop that reads its loss does.

On a software adapter (device type CPU, e.g. Mesa's lavapipe) the figures
only show that the workloads run: sizes are cut (matmul up to n=256,
elementwise to 2^20) and W5/W6 are skipped, with the reason in the notes.
The training rows run eagerly and compiled (``fg.compile`` of the whole
step, whose runs replay their captured GPU work).
"""

from __future__ import annotations

import math

import numpy as np
import workloads_compiled as wc
import workloads_train as wt


def gpu_status(fg) -> tuple[bool, str]:
    """(usable, adapter description or the reason it is not)."""
    gpu = getattr(fg, "gpu", None)
    if gpu is None or not hasattr(gpu, "is_available"):
        return False, "this build has no WebGPU device"
    try:
        if not gpu.is_available():
            return False, "no WebGPU adapter found"
        info = gpu.info()
    except Exception as e:  # noqa: BLE001 - report why
        return False, f"WebGPU adapter unusable: {type(e).__name__}: {e}"
    name = info.get("name") or info.get("adapter") or "unknown adapter"
    backend = info.get("backend", "?")
    kind = info.get("device_type", "?")
    return True, f"{name} ({backend}, {kind})"


def _software(fg) -> bool:
    try:
        kind = str(fg.gpu.info().get("device_type", "")).lower()
    except Exception:  # noqa: BLE001
        return True
    return kind in ("cpu", "virtualgpu", "other", "")


def _sync(fg):
    sync = getattr(fg.gpu, "synchronize", None)
    if sync is not None:

        def done(t):
            sync()
            return t

        return done
    return lambda t: t.to("cpu")


def _close(rt, **tol):
    """``rt.close`` after bringing ferrograd's GPU result to the host."""
    base = rt.close(**tol)

    def check(outs):
        outs = dict(outs)
        f = outs["ferrograd"]
        if hasattr(f, "cpu"):
            outs["ferrograd"] = f.cpu()
        base(outs)

    return check


def _gpu(fg, a: np.ndarray):
    return fg.from_numpy(np.array(a, copy=True)).to("gpu")


def _cuda(rt):
    torch = rt.torch
    if torch is None:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        return None


def _ops(rt, n_el: int, soft: bool):
    """(row id, variant, setup(fg) -> callable, numpy callable, bytes or flops, unit, check tolerances)."""
    fg = rt.fg
    F = fg.nn.functional
    x, y, z = rt.rng_array(n_el, 1), rt.rng_array(n_el, 2), rt.rng_array(n_el, 3)
    rows2 = (256, 1024) if soft else (1024, 4096)
    sm = rt.rng_array(rows2, 4, -4, 4)
    w, b = rt.rng_array(rows2[1], 5), rt.rng_array(rows2[1], 6)
    tag = f"2^{int(math.log2(n_el))}"
    return [
        (
            "W3a",
            f"x*y+z, {tag}",
            lambda: (lambda p, q, r: lambda: p * q + r)(*(_gpu(fg, v) for v in (x, y, z))),
            lambda: x * y + z,
        ),
        (
            "W3b",
            f"tanh-GELU, {tag}",
            lambda: (lambda p: lambda: F.gelu(p, approximate="tanh"))(_gpu(fg, x)),
            lambda: rt._gelu_np(x),
        ),
        (
            "W3c",
            f"softmax(dim=-1), {rows2}",
            lambda: (lambda p: lambda: F.softmax(p, dim=-1))(_gpu(fg, sm)),
            lambda: rt._softmax_np(sm),
        ),
        (
            "W3d",
            f"layer_norm, {rows2}",
            lambda: (lambda p, q, r: lambda: F.layer_norm(p, (rows2[1],), q, r))(
                *(_gpu(fg, v) for v in (sm, w, b))
            ),
            lambda: rt._layer_norm_np(sm, w, b),
        ),
        ("W3e", f"sum, {tag}", lambda: (lambda p: lambda: p.sum())(_gpu(fg, x)), lambda: np.sum(x)),
    ]


def w9(rt, ctx):
    fg = rt.fg
    ok, what = gpu_status(fg)
    if not ok:
        print(f"W9: skipped: {what}")
        return
    print(f"W9: WebGPU adapter: {what}")
    soft = _software(fg)
    sync = _sync(fg)
    cuda = _cuda(rt)
    note = "software adapter: correctness only, sizes cut" if soft else None
    # The adapter's practical float32 peak: a register-only FMA kernel, the
    # GPU's counterpart of the CPU FMA stand-in.
    peak = None
    if hasattr(fg.gpu, "fma_peak"):
        try:
            peak = fg.gpu.fma_peak()
        except Exception as e:  # noqa: BLE001 - report, do not crash the suite
            print(f"W9: FMA peak not measured: {type(e).__name__}: {e}")
    if peak:
        ctx.rooflines["gpu_fma_GFLOPs"] = peak
        ctx.roofline_sources["gpu_fma_GFLOPs"] = "ferrograd register-only FMA kernel"
        print(f"W9: adapter FMA peak {peak:.1f} GFLOP/s (register-only FMA kernel)")

    # W2 on the GPU
    for n in (128, 256) if soft else (128, 512, 1024, 2048):
        a, b = rt.rng_array((n, n), 1), rt.rng_array((n, n), 2)
        flops = 2.0 * n**3
        row = rt.Row("W9", f"W2 matmul n={n}", "GFLOP/s", True)
        if note:
            row.notes["ferrograd"] = note

        def f_fg(a=a, b=b):
            ga, gb = _gpu(fg, a), _gpu(fg, b)
            return lambda: sync(ga @ gb)

        impls = {"ferrograd": f_fg, "numpy": lambda a=a, b=b: lambda: a @ b}
        if cuda is not None:

            def f_cuda(a=a, b=b):
                ta, tb = cuda.from_numpy(a).cuda(), cuda.from_numpy(b).cuda()

                def run():
                    # timed as ferrograd's call is: the product computed, left on the
                    # device (no n x n copy to the host inside the timing)
                    r = ta @ tb
                    cuda.cuda.synchronize()
                    return r

                return run

            impls["torch"] = f_cuda
        rt.run_variant(
            ctx, row, impls, lambda s, f=flops: f / s / 1e9, _close(rt, rtol=2e-3, atol=2e-3), target=0.05
        )
        got = row.values.get("ferrograd")
        if peak and got:
            share = f"{got / peak:.0%} of the adapter's FMA peak ({peak:.0f} GFLOP/s)"
            row.notes["ferrograd"] = (
                f"{row.notes['ferrograd']}; {share}" if row.notes.get("ferrograd") else share
            )

    # W3 on the GPU
    for wid, variant, setup, ref in _ops(rt, (1 << 20) if soft else rt.N24, soft):
        row = rt.Row("W9", f"{wid} {variant}", "ms", False)
        if note:
            row.notes["ferrograd"] = note

        def f_fg(setup=setup):
            f = setup()
            return lambda: sync(f())

        rt.run_variant(
            ctx,
            row,
            {"ferrograd": f_fg, "numpy": lambda ref=ref: ref},
            rt.ms,
            _close(rt, rtol=1e-3, atol=1e-3),
        )

    # W4, W7 (and W5, W6 on a hardware adapter): training steps on the GPU
    trains = [
        (
            "W4",
            "MLP 784-1024-1024-10, batch 256, SGD mom.",
            wt.mlp_params,
            wt.mlp_data,
            wt.mlp_model,
            "sgd_momentum",
            wt._ce,
            wt.NumpyMLP,
            dict(target=0.1),
        ),
        (
            "W7",
            "50 x (Linear 32 + tanh), batch 8, SGD",
            wt.deep_params,
            wt.deep_data,
            wt.deep_model,
            "sgd",
            lambda fw: wt._sum_loss,
            wt.NumpyDeep,
            dict(rtol=2e-4, atol=1e-3, target=0.05),
        ),
        (
            "W5",
            "MNIST CNN, batch 64, SGD mom.",
            wt.cnn_params,
            wt.cnn_data,
            wt.cnn_model,
            "sgd_momentum",
            wt._ce,
            wt.NumpyCNN,
            dict(target=0.1),
        ),
        (
            "W6",
            "GPT 4x256, seq 128, batch 16, AdamW: train",
            wt.gpt_params,
            lambda: wt.gpt_data(n=2),
            wt.gpt_model,
            "adamw",
            wt._gpt_loss,
            None,
            dict(rtol=1e-3, atol=1e-3, target=0.0),
        ),
    ]
    runs = [(compiled, *t) for t in trains for compiled in (False, True)]
    for compiled, wid, variant, params_fn, data_fn, make, opt, loss, npcls, kw in runs:
        row = rt.Row("W9", f"{wid} {variant}{', compiled' if compiled else ''}", "ms", False)
        if soft and wid in ("W5", "W6"):
            row.notes["ferrograd"] = "skipped on a software adapter (minutes per step there)"
            row.values["ferrograd"] = None
            ctx.rows.append(row)
            continue
        if note:
            row.notes["ferrograd"] = note
        params, batches = params_fn(), data_fn()

        def f_fg(make=make, params=params, batches=batches, opt=opt, loss=loss, compiled=compiled):
            if compiled:
                step, _ = wc.compiled_step(fg, make, params, batches, opt, loss(fg), device="gpu")
            else:
                step = wt.eager_step(fg, make, params, batches, opt, loss(fg), device="gpu")
            return lambda: float(step().item())

        impls = {"ferrograd": f_fg}
        if npcls is not None:  # W6 has no hand-written NumPy backward
            impls["numpy"] = lambda npcls=npcls, params=params, batches=batches: wt.numpy_step(
                npcls, params, batches
            )
        wt.run_train(rt, ctx, row, impls, repeats=5 if soft else None, **kw)


WORKLOADS = {"W9": w9}
