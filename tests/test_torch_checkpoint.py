"""Checkpoints written by PyTorch's ``torch.save`` load with ``fg.load`` and resume training.

``tests/fixtures/torch_ckpt/{sgd,adam,adamw}.pt`` were written by
``scripts/make_compat_gaps_references.py`` (``torch.save({"model": model.state_dict(),
"optimizer": opt.state_dict()}, path)`` after two steps of ``nn.Linear(3, 2)``), with
``{name}_next.npz``: the data, PyTorch's version and the parameters after each of the next
three steps. Loading the checkpoint here and taking the same three steps must give them.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

CKPT = Path(__file__).resolve().parent / "fixtures" / "torch_ckpt"

OPTIMIZERS = {
    "sgd": lambda ps: fg.optim.SGD(ps, lr=0.5, momentum=0.1),  # hyperparameters come from the file
    "adam": lambda ps: fg.optim.Adam(ps, lr=0.5),
    "adamw": lambda ps: fg.optim.AdamW(ps, lr=0.5),
}


@pytest.mark.covers("torch.load", "torch.optim.SGD", "torch.optim.Adam", "torch.optim.AdamW")
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_resume_from_a_pytorch_checkpoint(name: str) -> None:
    ck = fg.load(CKPT / f"{name}.pt")
    nxt = np.load(CKPT / f"{name}_next.npz")
    sd = ck["model"]
    assert isinstance(sd, OrderedDict) and list(sd) == ["weight", "bias"]
    assert sd._metadata[""] == {"version": 1}  # PyTorch's state-dict metadata survives
    model = fg.nn.Linear(3, 2)
    model.load_state_dict(sd)
    opt = OPTIMIZERS[name](model.parameters())
    opt.load_state_dict(ck["optimizer"])
    group = opt.param_groups[0]
    saved = ck["optimizer"]["param_groups"][0]
    assert group["lr"] == saved["lr"] and group["weight_decay"] == saved["weight_decay"]
    x, y = fg.tensor(nxt["x"]), fg.tensor(nxt["y"])
    for i in range(3):
        opt.zero_grad()
        fg.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        msg = f"{name} step {i}, PyTorch {nxt['torch_version']}"
        np.testing.assert_allclose(
            model.weight.detach().numpy(), nxt[f"weight_{i}"], rtol=1e-5, atol=1e-6, err_msg=msg
        )
        np.testing.assert_allclose(
            model.bias.detach().numpy(), nxt[f"bias_{i}"], rtol=1e-5, atol=1e-6, err_msg=msg
        )
    # ferrograd's own checkpoint of the resumed state round-trips
    buf = io.BytesIO()
    fg.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buf)
    buf.seek(0)
    back = fg.load(buf)
    np.testing.assert_array_equal(back["model"]["weight"].numpy(), model.weight.detach().numpy())


def test_adam_state_tensors_and_step() -> None:
    ck = fg.load(CKPT / "adam.pt", map_location="cpu")
    st = ck["optimizer"]["state"]
    assert sorted(st) == [0, 1]
    step = st[0]["step"]
    assert (
        isinstance(step, fg.Tensor) and step.shape == () and step.dtype == fg.float32 and step.item() == 2.0
    )
    assert st[0]["exp_avg"].shape == (2, 3) and st[1]["exp_avg_sq"].shape == (2,)
    assert not st[0]["exp_avg"].requires_grad
    groups = ck["optimizer"]["param_groups"]
    assert groups[0]["betas"] == (0.8, 0.95) and groups[0]["params"] == [0, 1]
    # loading from an open file at an offset gives the same
    raw = (CKPT / "adam.pt").read_bytes()
    f = io.BytesIO(b"junk" + raw)
    f.seek(4)
    again = fg.load(f)
    np.testing.assert_array_equal(again["model"]["weight"].numpy(), ck["model"]["weight"].numpy())


def _rewrite(src: Path, edit: dict[str, bytes | None]) -> io.BytesIO:
    """A copy of the zip at ``src`` with members replaced (or dropped, for None)."""
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            base = info.filename.split("/", 1)[1]
            if base in edit:
                if edit[base] is not None:
                    zout.writestr(info, edit[base])
            else:
                zout.writestr(info, zin.read(info))
    out.seek(0)
    return out


def test_untrusted_pytorch_files_are_refused_clearly() -> None:
    src = CKPT / "sgd.pt"
    # a pickle naming a callable outside the allow-list (e.g. os.system) is refused, not run
    evil = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
    with pytest.raises(pickle.UnpicklingError, match="os.system") as refused:
        fg.load(_rewrite(src, {"data.pkl": evil}))
    assert isinstance(refused.value, fg.CheckpointError)
    with pytest.raises(fg.CheckpointError, match="storage '0' is missing"):
        fg.load(_rewrite(src, {"data/0": None}))
    with pytest.raises(fg.CheckpointError, match="storage '0' holds 4 bytes"):
        fg.load(_rewrite(src, {"data/0": b"\x00" * 4}))
    with pytest.raises(fg.CheckpointError, match="data.pkl"):
        fg.load(_rewrite(src, {"data.pkl": None}))
    # the legacy format, as torch.save(..., _use_new_zipfile_serialization=False) starts it
    legacy = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."
    with pytest.raises(fg.CheckpointError, match="legacy format"):
        fg.load(io.BytesIO(legacy))


def test_dtypes_views_and_parameters() -> None:
    got = fg.load(CKPT / "misc.pt")
    ref = np.load(CKPT / "misc.npz")
    dtypes = {
        "f64": fg.float64,
        "f16": fg.float16,
        "bf16": fg.bfloat16,
        "i64": fg.int64,
        "i32": fg.int32,
        "i16": fg.int16,
        "i8": fg.int8,
        "u8": fg.uint8,
        "bool": fg.bool,
        "col": fg.float32,
        "tr": fg.float32,
        "scalar": fg.float32,
        "empty": fg.float32,
        "param": fg.float32,
    }
    assert sorted(ref.files) == sorted([*dtypes, "torch_version"])
    for k, dt in dtypes.items():
        t = got[k]
        assert t.dtype == dt, k
        assert tuple(t.shape) == ref[k].shape, k
        np.testing.assert_array_equal(
            t.detach().double().numpy(), ref[k], err_msg=f"{k}, PyTorch {ref['torch_version']}"
        )
    assert isinstance(got["param"], fg.nn.Parameter) and got["param"].requires_grad
    assert got["dtype"] == fg.float16
    # views of one storage come back as separate tensors with their own memory
    got["col"].add_(1.0)
    np.testing.assert_array_equal(got["tr"].numpy(), ref["tr"])


def test_map_location_errors_reach_the_caller() -> None:
    def bad(t: fg.Tensor, location: str) -> fg.Tensor:
        raise LookupError(f"no device for {location}")

    with pytest.raises(LookupError, match="no device for cpu"):
        fg.load(CKPT / "sgd.pt", map_location=bad)
    moved = fg.load(CKPT / "sgd.pt", map_location=lambda t, loc: t.double())
    assert moved["model"]["weight"].dtype == fg.float64


def test_damaged_pytorch_files_are_refused_cleanly() -> None:
    # byte flips, truncations and insertions: every file loads or raises CheckpointError
    rng = np.random.default_rng(0)
    bases = [(CKPT / f"{n}.pt").read_bytes() for n in ("sgd", "adam", "misc")]
    outcomes = {"loaded": 0, "refused": 0}
    for i in range(300):
        b = bytearray(bases[i % 3])
        kind = i % 3
        if kind == 0:
            for j in rng.integers(0, len(b), 3):
                b[j] = int(rng.integers(256))
        elif kind == 1:
            b = b[: int(rng.integers(len(b)))]
        else:
            j = int(rng.integers(min(1500, len(b))))
            b[j] = int(rng.integers(256))
        try:
            fg.load(io.BytesIO(bytes(b)))
            outcomes["loaded"] += 1
        except fg.CheckpointError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100
