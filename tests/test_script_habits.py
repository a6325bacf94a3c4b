"""The lines around the model in PyTorch training scripts: devices, checkpoints, loss scaling.

Public example scripts (pytorch/examples mnist and word_language_model,
nanoGPT's train.py, the PyTorch tutorials) pick a device through
``torch.accelerator`` or ``torch.cuda``, move batches with
``.pin_memory().to(device, non_blocking=True)``, save and load checkpoints
through file objects with ``weights_only=``, keep a ``GradScaler`` (disabled
when CUDA is missing) and set ``set_float32_matmul_precision``. Each test
runs those lines under ferrograd and checks what they do against NumPy.
"""

from __future__ import annotations

import io
import warnings
from contextlib import nullcontext

import ferrograd as torch
import numpy as np
import pytest

nn = torch.nn


def _linear(seed: int = 0) -> nn.Linear:
    rng = np.random.default_rng(seed)
    m = nn.Linear(3, 2).double()
    m.load_state_dict(
        {"weight": torch.tensor(rng.standard_normal((2, 3))), "bias": torch.tensor(rng.standard_normal(2))}
    )
    return m


# --- devices -----------------------------------------------------------------


def test_accelerator_probe_picks_a_device() -> None:
    """The tutorials' device line works; the accelerator is a hardware WebGPU adapter only."""
    device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
    hardware = torch.gpu.is_available() and torch.gpu.info()["device_type"].lower() != "cpu"
    assert torch.accelerator.is_available() == hardware
    assert device == ("gpu" if hardware else "cpu")
    assert torch.accelerator.device_count() == int(hardware)
    assert torch.accelerator.current_accelerator() == torch.device("gpu")
    assert torch.accelerator.current_accelerator(check_available=True) == (
        torch.device("gpu") if hardware else None
    )
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(0)
    with pytest.raises(ValueError, match="one GPU device"):
        torch.accelerator.set_device_index(1)
    assert torch.cuda.is_bf16_supported() is False


def test_pinned_non_blocking_batch_move() -> None:
    """nanoGPT's ``x.pin_memory().to(device, non_blocking=True)`` keeps the values."""
    data = np.arange(20, dtype=np.int64)
    x = torch.from_numpy(data[3:9].copy())
    y = x.pin_memory().to(torch.device("cpu"), non_blocking=True)
    np.testing.assert_array_equal(y.numpy(), data[3:9])
    assert x.is_pinned() is False
    z = x.to("cpu", torch.float64, non_blocking=True)
    assert z.dtype == torch.float64
    np.testing.assert_array_equal(z.numpy(), data[3:9].astype(np.float64))


def test_matmul_precision_setting_is_checked() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert torch.get_float32_matmul_precision() == "high"
        with pytest.raises(ValueError, match="set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("fast")
    finally:
        torch.set_float32_matmul_precision(before)


def test_rnn_flatten_parameters_keeps_the_forward() -> None:
    """``model.rnn.flatten_parameters()`` (after loading a saved model) changes nothing."""
    rnn = nn.GRU(3, 4, 2).double()
    x = torch.tensor(np.random.default_rng(1).standard_normal((5, 2, 3)))
    before = rnn(x)[0].detach().numpy()
    rnn.flatten_parameters()
    np.testing.assert_array_equal(rnn(x)[0].detach().numpy(), before)


# --- checkpoints -------------------------------------------------------------


def test_save_load_through_file_objects(tmp_path) -> None:
    """``torch.save(sd, f)`` / ``torch.load(f, weights_only=True)`` with open files and BytesIO."""
    m = _linear()
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    m(torch.ones(4, 3, dtype=torch.float64)).sum().backward()
    opt.step()
    ckpt = {"model": m.state_dict(), "optimizer": opt.state_dict(), "iter_num": 7, "best_val_loss": 1.5}
    path = tmp_path / "ckpt.pt"
    with open(path, "wb") as f:
        torch.save(ckpt, f)
    buf = io.BytesIO()
    buf.write(b"prefix")  # a checkpoint written after other bytes is read from there
    torch.save(m.state_dict(), buf)
    for weights_only in (True, False):
        with open(path, "rb") as f:
            got = torch.load(f, map_location="cpu", weights_only=weights_only)
        assert got["iter_num"] == 7 and got["best_val_loss"] == 1.5
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(got["model"][k].numpy(), v.numpy())
        buf.seek(len(b"prefix"))
        sd = torch.load(buf, weights_only=weights_only)
        assert list(sd) == ["weight", "bias"]
        np.testing.assert_array_equal(sd["weight"].numpy(), m.weight.detach().numpy())
    m2 = _linear(seed=5)
    m2.load_state_dict(got["model"])
    opt2 = torch.optim.Adam(m2.parameters(), lr=0.1)
    opt2.load_state_dict(got["optimizer"])
    np.testing.assert_array_equal(
        opt2.state_dict()["state"][0]["exp_avg"].numpy(), opt.state_dict()["state"][0]["exp_avg"].numpy()
    )


def test_load_map_location_forms(tmp_path) -> None:
    """``map_location`` as a string, a ``{location: device}`` dict or a ``(storage, loc)`` function."""
    path = tmp_path / "sd.pt"
    torch.save(_linear().state_dict(), path)
    expected = _linear().weight.detach().numpy()
    seen = []
    for where in ("cpu", {"cuda:0": "cpu"}, {"cpu": "cpu"}, lambda storage, loc: seen.append(loc) or storage):
        sd = torch.load(path, map_location=where, weights_only=True)
        assert sd["weight"].is_cpu
        np.testing.assert_array_equal(sd["weight"].numpy(), expected)
    assert seen == ["cpu", "cpu"]
    with pytest.raises(TypeError, match="map_location returned"):
        torch.load(path, map_location=lambda storage, loc: None)


class _TiedLM(nn.Module):
    """A module-level class (pickle stores classes by name), with a tied decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(5, 3)
        self.rnn = nn.LSTM(3, 3, 1)
        self.decoder = nn.Linear(3, 5)
        self.decoder.weight = self.encoder.weight
        self.nhid = 3


def test_save_whole_module_round_trips_and_needs_weights_only_false(tmp_path) -> None:
    """``torch.save(model, f)`` pickles the module (tensors in our format, ties kept); loading it
    needs ``weights_only=False`` and the default raises PyTorch's kind of error."""
    import pickle

    model = _TiedLM().double()
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        torch.save(model, f)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        torch.load(path)
    with open(path, "rb") as f, pytest.raises(pickle.UnpicklingError, match="weights-only load failed"):
        torch.load(f, weights_only=True)
    with open(path, "rb") as f:
        got = torch.load(f, weights_only=False)
    assert type(got) is _TiedLM and got.nhid == 3
    assert got.decoder.weight is got.encoder.weight
    assert isinstance(got.rnn.weight_ih_l0, nn.Parameter) and got.rnn.weight_ih_l0.requires_grad
    assert len(list(got.parameters())) == len(list(model.parameters())) == 6
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(got.state_dict()[k].numpy(), v.numpy(), err_msg=k)
    got.rnn.flatten_parameters()
    x = torch.tensor([[1, 2], [3, 4]])
    h = (torch.zeros(1, 2, 3, dtype=torch.float64),) * 2
    np.testing.assert_array_equal(
        got.decoder(got.rnn(got.encoder(x), h)[0]).detach().numpy(),
        model.decoder(model.rnn(model.encoder(x), h)[0]).detach().numpy(),
    )
    # a structure holding a module is pickled too; map_location gets the saved location
    seen = []
    torch.save({"model": model, "epoch": 2}, path)
    ck = torch.load(path, weights_only=False, map_location=lambda t, loc: seen.append(loc) or t)
    assert ck["epoch"] == 2 and ck["model"].decoder.weight is ck["model"].encoder.weight
    assert seen == ["cpu"] * 6  # one call per stored tensor: the tied weight is stored once


def test_save_whole_module_from_the_gpu_loads_there_or_where_mapped() -> None:
    """A module saved from the GPU comes back on the GPU (its recorded location), or on the
    CPU with ``map_location="cpu"``, its tie kept either way."""
    if not torch.gpu.is_available():
        pytest.skip(f"no WebGPU adapter: {torch.gpu.unavailable_reason()}")
    model = _TiedLM().to("gpu")
    buf = io.BytesIO()
    torch.save(model, buf)
    for where, device in ((None, "gpu"), ("cpu", "cpu")):
        buf.seek(0)
        got = torch.load(buf, weights_only=False, map_location=where)
        assert got.encoder.weight.device.type == device and got.rnn.weight_hh_l0.device.type == device
        assert got.decoder.weight is got.encoder.weight
        np.testing.assert_array_equal(
            got.rnn.weight_hh_l0.cpu().numpy(), model.rnn.weight_hh_l0.cpu().numpy()
        )


def test_save_local_module_class_and_unseekable_stream_raise(tmp_path) -> None:
    """A module whose class is defined in a function cannot be pickled (in PyTorch neither):
    the error says what to save instead."""

    class Local(nn.Module):
        pass

    with pytest.raises(TypeError, match=r"cannot pickle the Local object.*state_dict\(\)"):
        torch.save(Local(), io.BytesIO())

    class Pipe(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

    with pytest.raises(TypeError, match="not seekable"):
        torch.load(Pipe())


# --- loss scaling ------------------------------------------------------------


def test_grad_scaler_for_cuda_disables_itself_and_passes_through() -> None:
    """nanoGPT on a CPU machine: ``GradScaler(enabled=dtype == "float16")`` warns, then does nothing."""
    with (
        pytest.warns(FutureWarning, match="deprecated"),
        pytest.warns(UserWarning, match="CUDA is not available"),
    ):
        old = torch.cuda.amp.GradScaler(enabled=True)
    with pytest.warns(UserWarning, match="Disabling"):
        scaler = torch.amp.GradScaler(enabled=True)
    for s in (old, scaler):
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
    m = _linear()
    expected = _linear()
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    x = torch.tensor(np.random.default_rng(2).standard_normal((4, 3)))
    device_type = "cpu"
    ctx = (
        nullcontext()
        if device_type == "cpu"
        else torch.amp.autocast(device_type=device_type, dtype=torch.float16)
    )
    with ctx:
        loss = (m(x) ** 2).mean()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    # The same step without the scaler.
    ref_opt = torch.optim.SGD(expected.parameters(), lr=0.5)
    (expected(x) ** 2).mean().backward()
    torch.nn.utils.clip_grad_norm_(expected.parameters(), 1.0)
    ref_opt.step()
    np.testing.assert_array_equal(m.weight.detach().numpy(), expected.weight.detach().numpy())
    assert m.weight.grad is None


def test_grad_scaler_scales_unscales_skips_and_adapts() -> None:
    """An enabled scaler on the CPU: gradients come back unscaled, an inf step is skipped and
    halves the scale, ``growth_interval`` clean steps double it (checked against NumPy SGD)."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(3)
    xs = rng.standard_normal((5, 4, 3))
    w = torch.tensor(w0.copy(), requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    expected_w = w0.copy()
    expected_scale = 1024.0
    clean = 0
    scales = []
    for step, x in enumerate(xs):
        opt.zero_grad()
        xt = torch.tensor(x)
        loss = ((xt @ w) ** 2).sum()
        if step == 2:
            loss = loss * float("inf")  # an overflowing step
        scaled = scaler.scale(loss)
        assert scaled.dtype == torch.float64
        np.testing.assert_allclose(scaled.item(), loss.item() * expected_scale, rtol=1e-15)
        scaled.backward()
        scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="already been called"):
            scaler.unscale_(opt)
        grad = 2 * x.T @ (x @ expected_w)
        if step != 2:
            np.testing.assert_allclose(w.grad.numpy(), grad, rtol=1e-13)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        if step == 2:
            expected_scale *= 0.5
            clean = 0
        else:
            expected_w = expected_w - 0.1 * grad
            clean += 1
            if clean == 2:
                expected_scale *= 2.0
                clean = 0
        assert scaler.get_scale() == expected_scale, f"step {step}"
        np.testing.assert_allclose(w.detach().numpy(), expected_w, rtol=1e-13)
    assert scales == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    state = scaler.state_dict()
    other = torch.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.get_scale() == 2048.0 and other.state_dict() == state


def test_grad_scaler_rejects_misuse() -> None:
    with pytest.raises(ValueError, match="growth_factor"):
        torch.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        torch.amp.GradScaler("cpu").scale("loss")
    w = torch.tensor(np.ones(2, dtype=np.float16), requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale((w * w).sum()).backward()
    with pytest.raises(ValueError, match="unscale float16 gradients"):
        scaler.unscale_(opt)


def test_autocast_disabled_runs_and_cuda_region_is_off() -> None:
    x = torch.tensor([1.0, 2.0])
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
        y = x * 2
    assert y.dtype == torch.float32

    @torch.amp.autocast("cpu", enabled=False)
    def f(t):
        return t + 1

    np.testing.assert_array_equal(f(x).numpy(), [2.0, 3.0])
    # A script written for a CUDA machine: its region warns and runs disabled, as in PyTorch.
    m = torch.nn.Linear(2, 2)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with torch.amp.autocast("cuda", dtype=torch.float16):
            assert m(x).dtype == torch.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with torch.cuda.amp.autocast(enabled=False):
            pass
    assert torch.amp.is_autocast_available("cpu") is True
    assert torch.amp.is_autocast_available("cuda") is False
