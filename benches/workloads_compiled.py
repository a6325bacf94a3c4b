"""Compiled variants (``fg.compile``) of W3a, W4, W6 and W7, and W8 (capture time).

Each compiled row times ferrograd's captured graph against the same peers as
the eager row, measured again side by side in this run (jax's column is
``jax.jit`` as in the eager rows; PyTorch's is ``torch.compile`` when its first
call works here, else eager PyTorch, which the row's notes then say, with the
error ``torch.compile`` raised).

W8 times capture + compile (tracing, the passes and the first run's plan) of
W4's and W6's training steps on their first call, and the capture time of a
chain of N elementwise ops (N = 2k, 20k, 200k) to show it grows linearly,
with the passes off and on (on, the chain fuses into one kernel).
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import workloads_train as wt


def compiled_step(fw, make, params, batches, opt: str, loss, device: str | None = None):
    """Like ``workloads_train.eager_step``, with the whole step captured by ``fw.compile``."""
    model = wt._loaded(fw, make, params)
    if device is not None:
        model = model.to(device)
    if opt == "sgd_momentum":
        o = fw.optim.SGD(model.parameters(), lr=wt.SGD_LR, momentum=wt.MOMENTUM)
    elif opt == "sgd":
        o = fw.optim.SGD(model.parameters(), lr=wt.SGD_LR)
    else:
        o = fw.optim.AdamW(
            model.parameters(),
            lr=wt.ADAMW_LR,
            betas=wt.ADAMW_BETAS,
            eps=wt.ADAMW_EPS,
            weight_decay=wt.ADAMW_WD,
        )
    data = itertools.cycle(
        [
            tuple(wt._to_fw(fw, a) if device is None else wt._to_fw(fw, a).to(device) for a in b)
            for b in batches
        ]
    )

    def train(x, *y):
        o.zero_grad()
        value = loss(model(x), *y)
        value.backward()
        o.step()
        return value

    step_fn = fw.compile(train)
    return lambda: step_fn(*next(data)), step_fn


def w3a_compiled(rt, ctx):
    n = rt.N24
    x, y, z = rt.rng_array(n, 1), rt.rng_array(n, 2), rt.rng_array(n, 3)
    row = rt.Row("W3a", "x*y+z, 2^24, compiled", "ms", False, bytes_moved=4 * 4 * n, roofline="copy")

    def f_fg():
        a, b, c = rt.fgt(x), rt.fgt(y), rt.fgt(z)
        f = rt.fg.compile(lambda p, q, r: p * q + r)
        f(a, b, c)
        g = f.graph(a, b, c)
        kinds = [nd["op"] for nd in g.nodes()]
        row.notes["ferrograd"] = f"graph: {len(kinds)} node(s): {', '.join(kinds)}"
        return lambda: f(a, b, c)

    impls = {"ferrograd": f_fg, "numpy": lambda: lambda: x * y + z}
    if rt.torch:

        def f_torch():
            a, b, c = rt.torch_t(x), rt.torch_t(y), rt.torch_t(z)

            def eager(p, q, r):
                return p * q + r

            f = rt.torch.compile(eager)
            try:
                f(a, b, c)
            except Exception as e:  # noqa: BLE001 - fall back to eager PyTorch, saying so
                row.notes["torch"] = _eager_note(e)
                f = eager
            return lambda: f(a, b, c)

        impls["torch"] = f_torch
    if rt.jax:

        def f_jax():
            jnp = rt.jnp
            a, b, c = jnp.asarray(x), jnp.asarray(y), jnp.asarray(z)
            f = rt.jax.jit(lambda p, q, r: p * q + r)
            return lambda: f(a, b, c).block_until_ready()

        impls["jax"] = f_jax
    rt.run_variant(ctx, row, impls, rt.ms, rt.close())


def _compiled_train(rt, ctx, label, make, params, batches, opt, loss_of, npy, jax_which, **kw):
    row = rt.Row(label[0], label[1], "ms", False)

    def fg_setup():
        step, _ = compiled_step(rt.fg, make, params, batches, opt, loss_of(rt.fg))
        return step

    impls = {"ferrograd": fg_setup}
    if npy is not None:
        impls["numpy"] = npy
    if rt.torch:

        def torch_setup():
            step, _ = compiled_step(_TorchCompile(rt.torch), make, params, batches, opt, loss_of(rt.torch))
            state = {"step": step, "first": True}

            def run():
                # torch.compile compiles on the first call: where that fails, eager PyTorch
                # from the same start (a fresh model; the failed call changed nothing)
                try:
                    return state["step"]()
                except Exception as e:  # noqa: BLE001
                    if not state["first"]:
                        raise
                    row.notes["torch"] = _eager_note(e)
                    state["step"] = wt.eager_step(rt.torch, make, params, batches, opt, loss_of(rt.torch))
                    return state["step"]()
                finally:
                    state["first"] = False

            return run

        impls["torch"] = torch_setup
    if rt.jax:
        impls["jax"] = lambda: wt.jax_step(rt.jax, jax_which, params, batches, opt)
    return wt.run_train(rt, ctx, row, impls, **kw)


def _eager_note(e: BaseException) -> str:
    msg = (str(e).strip().splitlines() or [""])[0][:100]
    return f"eager PyTorch: torch.compile failed here ({type(e).__name__}: {msg})"


class _TorchCompile:
    """PyTorch with ``compile`` standing for ``torch.compile`` (the shared model code calls ``fw.compile``)."""

    def __init__(self, torch):
        self._t = torch

    def __getattr__(self, name):
        return getattr(self._t, name)

    def compile(self, fn):
        return self._t.compile(fn)


def w4_compiled(rt, ctx):
    params, batches = wt.mlp_params(), wt.mlp_data()
    _compiled_train(
        rt,
        ctx,
        ("W4", "MLP 784-1024-1024-10, batch 256, SGD mom., compiled"),
        wt.mlp_model,
        params,
        batches,
        "sgd_momentum",
        wt._ce,
        lambda: wt.numpy_step(wt.NumpyMLP, params, batches),
        "W4",
        target=0.1,
    )


def w6_compiled(rt, ctx):
    params, batches = wt.gpt_params(), wt.gpt_data(n=2)
    x0, y0 = batches[0]
    np_loss0 = float(wt._xp_ce(np, wt.xp_gpt_forward(np, params, x0).astype(np.float64), y0))

    def reference(losses):
        return wt.reference_after_first(("numpy", np_loss0), losses)

    r = _compiled_train(
        rt,
        ctx,
        ("W6", "GPT 4x256, seq 128, batch 16, AdamW: train, compiled"),
        wt.gpt_model,
        params,
        batches,
        "adamw",
        wt._gpt_loss,
        None,
        "W6",
        rtol=1e-3,
        atol=1e-3,
        target=0.0,
        repeats=5,
        reference=reference,
    )
    r.values.setdefault("numpy", None)
    r.notes.setdefault("numpy", "n/a (no hand-written backward; its forward checks the initial loss)")


def w7_compiled(rt, ctx):
    params, batches = wt.deep_params(), wt.deep_data()
    _compiled_train(
        rt,
        ctx,
        ("W7", "50 x (Linear 32 + tanh), batch 8, SGD, compiled"),
        wt.deep_model,
        params,
        batches,
        "sgd",
        lambda fw: wt._sum_loss,
        lambda: wt.numpy_step(wt.NumpyDeep, params, batches),
        "W7",
        rtol=2e-4,
        atol=1e-3,
        target=0.05,
    )


def _first_call_seconds(fw, make, params, batches, opt, loss) -> tuple[float, float, int]:
    """(first call, of which capture + passes, graph nodes) of a fresh compiled training step."""
    step, fn = compiled_step(fw, make, params, batches, opt, loss)
    t0 = time.perf_counter()
    step()
    total = time.perf_counter() - t0
    return total, fn.stats.capture_seconds[0], fn.stats.nodes[0]


def _chain_capture_seconds(fg, n: int, passes: bool = False) -> float:
    x = fg.ones(4)

    def chain(v):
        for _ in range(n):
            v = v * 1.0001 + 0.5
        return v

    off = {"fuse": False, "cse": False, "fold": False, "simplify": False, "dce": False}
    f = fg.compile(chain) if passes else fg.compile(chain, passes=off)
    t0 = time.perf_counter()
    f.graph(x)
    return time.perf_counter() - t0


def w8(rt, ctx):
    """Capture + compile time on the first call (s); chain capture scaling."""
    fg = rt.fg
    for label, make, params, batches, opt, loss in (
        (
            "W4 step: first call (capture, passes, plan, run)",
            wt.mlp_model,
            wt.mlp_params(),
            wt.mlp_data(),
            "sgd_momentum",
            wt._ce(fg),
        ),
        (
            "W6 step: first call (capture, passes, plan, run)",
            wt.gpt_model,
            wt.gpt_params(),
            wt.gpt_data(n=1),
            "adamw",
            wt._gpt_loss(fg),
        ),
    ):
        row = rt.Row("W8", label, "s", False)
        total, capture, nodes = _first_call_seconds(fg, make, params, batches, opt, loss)
        row.values["ferrograd"] = total
        row.notes["ferrograd"] = f"{nodes} nodes captured; tracing + passes {capture:.3f} s of it"
        if rt.jax:
            which = "W4" if "W4" in label else "W6"
            t0 = time.perf_counter()
            step = wt.jax_step(rt.jax, which, params, batches, opt)
            step()
            row.values["jax"] = time.perf_counter() - t0
        ctx.rows.append(row)
    for passes in (False, True):
        for n in (1_000, 10_000, 100_000):
            what = "capture + all passes (one fused kernel)" if passes else "capture"
            row = rt.Row("W8", f"{what}: chain of {2 * n} elementwise nodes", "s", False)
            row.values["ferrograd"] = _chain_capture_seconds(fg, n, passes)
            ctx.rows.append(row)


WORKLOADS = {
    "W3a-compiled": w3a_compiled,
    "W4-compiled": w4_compiled,
    "W6-compiled": w6_compiled,
    "W7-compiled": w7_compiled,
    "W8": w8,
}
