"""Automatic mixed precision (``fg.autocast``) against PyTorch's CPU autocast.

The stored file ``tests/fixtures/parity/autocast.npz`` (written by
``scripts/make_autocast_references.py``, PyTorch version recorded) holds the result dtypes
of a table of ops inside autocast regions, and a short training run of a small conv net
whose forward and loss run in ``autocast("cpu", bfloat16)``. The same source runs here.
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
REF = np.load(ROOT / "tests" / "fixtures" / "parity" / "autocast.npz")
_spec = importlib.util.spec_from_file_location(
    "make_autocast_references", ROOT / "scripts" / "make_autocast_references.py"
)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def _name(d: object) -> str:
    return str(d).split(".")[-1]


@pytest.mark.parametrize(
    ("region", "src"), [("bfloat16", "float32"), ("float16", "float32"), ("bfloat16", "float64")]
)
def test_result_dtypes_match_pytorch(region: str, src: str) -> None:
    r = np.random.default_rng(1)
    a = fg.tensor(r.standard_normal((4, 4)), dtype=getattr(fg, src))
    b = fg.tensor(r.standard_normal((4, 4)), dtype=getattr(fg, src))
    want = dict(zip(REF["dtypes.ops"].tolist(), REF[f"dtypes.{region}.{src}"].tolist(), strict=True))
    got = {}
    for name, f in gen.OPS.items():
        with fg.autocast("cpu", dtype=getattr(fg, region)):
            got[name] = _name(f(fg, a, b).dtype)
    assert got == want, f"PyTorch {REF['torch_version']}"


@pytest.mark.parametrize("region", ["bfloat16"])
def test_module_result_dtypes_match_pytorch(region: str) -> None:
    r = np.random.default_rng(1)
    a = fg.tensor(r.standard_normal((4, 4)), dtype=fg.float32)
    b = fg.tensor(r.standard_normal((4, 4)), dtype=fg.float32)
    want = dict(zip(REF["modules"].tolist(), REF[f"modules.{region}"].tolist(), strict=True))
    got = {}
    for name, f in gen.MODULES.items():
        with fg.autocast("cpu", dtype=getattr(fg, region)):
            got[name] = _name(f(fg, a, b).dtype)
    assert got == want, f"PyTorch {REF['torch_version']}"


def test_values_are_the_ops_on_cast_inputs() -> None:
    # Inside a region an op computes what it computes on inputs cast first.
    r = np.random.default_rng(2)
    a = fg.tensor(r.standard_normal((5, 7)).astype(np.float32))
    w = fg.tensor(r.standard_normal((3, 7)).astype(np.float32))
    bias = fg.tensor(r.standard_normal(3).astype(np.float32))
    with fg.autocast("cpu"):
        y = fg.nn.functional.linear(a, w, bias)
        loss = fg.nn.functional.mse_loss(y, fg.zeros(5, 3))
    bf = fg.bfloat16
    ref = fg.nn.functional.linear(a.to(bf), w.to(bf), bias.to(bf))
    np.testing.assert_array_equal(y.float().numpy(), ref.float().numpy())
    np.testing.assert_allclose(loss.item(), float((ref.float().numpy() ** 2).mean()), rtol=1e-6)


def test_training_run_matches_pytorch() -> None:
    arrays = {k.removeprefix("init."): REF[k] for k in REF.files if k.startswith("init.")}
    got = gen.train(fg, arrays)
    assert str(got["logits_dtype"]) == str(REF["logits_dtype"]) == "bfloat16"
    assert str(got["loss_dtype"]) == str(REF["loss_dtype"]) == "float32"
    # bfloat16 keeps 8 bits of mantissa: products round at 2**-9 relative.
    np.testing.assert_allclose(got["logits0"], REF["logits0"], rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(got["losses"], REF["losses"], rtol=1e-2)
    for k in REF.files:
        if k.startswith("grad_dtype."):
            assert str(got[k]) == str(REF[k]) == "float32", k
        elif k.startswith("grad0."):
            scale = np.abs(REF[k]).max()
            np.testing.assert_allclose(got[k], REF[k], atol=3e-2 * scale, err_msg=k)
        elif k.startswith("final."):
            np.testing.assert_allclose(got[k], REF[k], atol=2e-2, err_msg=k)


def test_regions_nest_and_restore() -> None:
    x = fg.randn(2, 3)
    w = fg.randn(3, 3)
    assert not fg.is_autocast_enabled("cpu")
    with fg.autocast("cpu"):
        assert fg.is_autocast_enabled("cpu") and fg.get_autocast_dtype("cpu") == fg.bfloat16
        with fg.autocast("cpu", enabled=False):
            assert (x @ w).dtype == fg.float32 and not fg.is_autocast_enabled("cpu")
        with fg.autocast("cpu", dtype=fg.float16):
            assert (x @ w).dtype == fg.float16
        assert (x @ w).dtype == fg.bfloat16
    assert (x @ w).dtype == fg.float32
    # An exception inside a region still restores the state.
    with pytest.raises(ValueError):
        with fg.autocast("cpu"):
            raise ValueError("inside")
    assert not fg.is_autocast_enabled("cpu")
    # The GPU's region does not touch CPU ops.
    with fg.autocast("gpu"):
        assert fg.is_autocast_enabled("gpu") and (x @ w).dtype == fg.float32
    assert fg.get_autocast_dtype("gpu") == fg.float16


def test_state_is_per_thread() -> None:
    x = fg.randn(2, 2)
    seen: list[object] = []
    with fg.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append((x @ x).dtype))
        t.start()
        t.join()
        assert (x @ x).dtype == fg.bfloat16
    assert seen == [fg.float32]


def test_bad_arguments() -> None:
    with pytest.raises(RuntimeError, match="unsupported device_type 'tpu'"):
        fg.autocast("tpu")
    with pytest.raises(TypeError, match="must be a str"):
        fg.autocast(0)  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match="must be bfloat16 or float16"):
        region = fg.autocast("cpu", dtype=fg.float64)
    with region:
        assert (fg.randn(2, 2) @ fg.randn(2, 2)).dtype == fg.float32
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        fg._core._set_autocast(False, fg.int32)


def test_compile_captures_the_casts_and_recaptures_on_a_new_state() -> None:
    lin = fg.nn.Linear(4, 3)
    x = fg.randn(5, 4)
    f = fg.compile(lambda t: fg.nn.functional.cross_entropy(lin(t), fg.tensor([0, 1, 2, 0, 1])))
    plain = f(x)
    with fg.autocast("cpu"):
        mixed = f(x)
        eager = fg.nn.functional.cross_entropy(lin(x), fg.tensor([0, 1, 2, 0, 1]))
    again = f(x)
    assert plain.dtype == mixed.dtype == again.dtype == fg.float32
    np.testing.assert_array_equal(mixed.numpy(), eager.numpy())
    np.testing.assert_array_equal(again.numpy(), plain.numpy())
    assert abs(mixed.item() - plain.item()) > 0  # the region's rounding shows
    assert f.stats.traces == 2


def test_custom_function_amp_decorators() -> None:
    class Scale(fg.autograd.Function):
        @staticmethod
        @fg.amp.custom_fwd(device_type="cpu", cast_inputs=fg.float32)
        def forward(ctx, a, w):
            ctx.save_for_backward(a, w)
            assert not fg.is_autocast_enabled("cpu")
            return a @ w

        @staticmethod
        @fg.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, w = ctx.saved_tensors
            return g @ w.T, a.T @ g

    a = fg.randn(2, 3, requires_grad=True)
    w = fg.randn(3, 3, requires_grad=True)
    with fg.autocast("cpu"):
        y = Scale.apply(a.to(fg.bfloat16), w)
    assert y.dtype == fg.float32
    y.sum().backward()
    assert a.grad is not None and a.grad.dtype == fg.float32


def test_cuda_spellings_warn_and_run_disabled() -> None:
    x = fg.randn(2, 2)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with fg.autocast("cuda"):
            assert (x @ x).dtype == fg.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fg.cuda.amp.autocast():
            assert (x @ x).dtype == fg.float32


@pytest.mark.skipif(not fg.gpu.is_available(), reason="no WebGPU adapter for the gpu region")
def test_gpu_region_matches_cpu_float16() -> None:
    # A float16 region on the GPU gives what the CPU's float16 region gives (float32 parameters,
    # float16 products, a float32 loss), and the CPU's region leaves GPU ops alone.
    r = np.random.default_rng(3)
    xs = r.standard_normal((4, 8)).astype(np.float32)
    lin = fg.nn.Linear(8, 3)
    outs = {}
    for dev in ("cpu", "gpu"):
        m = lin.to(dev)
        x = fg.tensor(xs, device=dev)
        with fg.autocast(dev, dtype=fg.float16):
            y = m(x)
            loss = fg.nn.functional.mse_loss(y, fg.zeros(4, 3, device=dev))
        loss.backward()
        assert y.dtype == fg.float16 and loss.dtype == fg.float32 and m.weight.grad.dtype == fg.float32
        outs[dev] = (y.float().cpu().numpy(), m.weight.grad.cpu().numpy().copy())
        m.weight.grad = None
    np.testing.assert_allclose(outs["gpu"][0], outs["cpu"][0], rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(outs["gpu"][1], outs["cpu"][1], rtol=1e-2, atol=1e-2)
    with fg.autocast("cpu"):
        g = fg.randn(2, 2, device="gpu")
        assert (g @ g).dtype == fg.float32


def test_parameter_casts_are_cached_per_region() -> None:
    # A parameter read by several ops in a region is cast once (an RNN's weights at each
    # step); its gradient collects every use, and a write in place is seen by the next op.
    w = fg.nn.Parameter(fg.randn(4, 4))
    x = fg.randn(2, 4)
    with fg.autocast("cpu"):
        a, b = fg.nn.functional.linear(x, w), fg.nn.functional.linear(x, w)
        (a.float().sum() + b.float().sum()).backward()
        with fg.no_grad():
            c = fg.nn.functional.linear(x, w)
            w.mul_(2.0)
        d = fg.nn.functional.linear(x, w)
    np.testing.assert_array_equal(a.float().numpy(), b.float().numpy())
    np.testing.assert_array_equal(c.float().numpy(), a.float().numpy())
    assert d.requires_grad and not c.requires_grad
    ref = fg.nn.functional.linear(x.to(fg.bfloat16), w.detach().to(fg.bfloat16))
    np.testing.assert_array_equal(d.float().numpy(), ref.float().numpy())
    # d(sum(x @ w.T))/dw, twice (each use's product rounded to bfloat16).
    xs = x.to(fg.bfloat16).float().numpy()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.broadcast_to(xs.sum(0), (4, 4)), rtol=8e-3)
    # cache_enabled=False casts at every use, with the same results.
    with fg.autocast("cpu", cache_enabled=False):
        e = fg.nn.functional.linear(x, w)
    np.testing.assert_array_equal(e.float().numpy(), d.float().numpy())


def test_cpu_module_spellings_cast() -> None:
    # torch.cpu.amp.autocast() and torch.autocast("cpu", dtype=...) as scripts write them.
    r = np.random.default_rng(5)
    a = fg.tensor(r.standard_normal((3, 4)).astype(np.float32))
    b = fg.tensor(r.standard_normal((4, 2)).astype(np.float32))
    exact = a.double().numpy() @ b.double().numpy()
    with pytest.warns(FutureWarning, match="fg.cpu.amp.autocast"):
        region = fg.cpu.amp.autocast()
    with region:
        inside = a @ b
        assert fg.is_autocast_enabled("cpu") and fg.get_autocast_dtype("cpu") == fg.bfloat16
    outside = a @ b
    assert inside.dtype == fg.bfloat16 and outside.dtype == fg.float32
    assert not fg.is_autocast_enabled("cpu")
    # bfloat16 keeps 8 bits of mantissa: inputs and result round at 2**-9 relative
    np.testing.assert_allclose(inside.float().numpy(), exact, rtol=3e-2, atol=3e-2)
    np.testing.assert_allclose(outside.numpy(), exact, rtol=1e-5, atol=1e-5)
    with fg.autocast("cpu", dtype=fg.bfloat16):
        y = fg.nn.functional.linear(a, b.T)
        # mse_loss is on the CPU float32 list (see linear_then_mse in the stored table)
        assert y.dtype == fg.bfloat16 and fg.nn.functional.mse_loss(y, fg.zeros(3, 2)).dtype == fg.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with fg.cpu.amp.autocast(dtype=fg.float16):
            assert (a @ b).dtype == fg.float16
        with fg.cpu.amp.autocast(enabled=False):
            assert (a @ b).dtype == fg.float32

        @fg.cpu.amp.autocast()
        def f(x: fg.Tensor) -> fg.Tensor:
            return x @ b

        assert f(a).dtype == fg.bfloat16 and (a @ b).dtype == fg.float32
        scaler = fg.cpu.amp.GradScaler(init_scale=8.0)
    assert scaler.is_enabled() and scaler.get_scale() == 8.0


def test_cpu_device_module() -> None:
    assert fg.cpu.is_available() and fg.cpu.is_initialized()
    assert fg.cpu.device_count() == 1 and fg.cpu.current_device() == "cpu"
    fg.cpu.synchronize()
    fg.cpu.synchronize("cpu")
    fg.cpu.set_device(fg.device("cpu"))
    with pytest.raises(ValueError, match="fg.cpu.set_device: expected a CPU device"):
        fg.cpu.set_device("gpu")
