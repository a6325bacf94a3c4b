"""Write PyTorch's answers for ``tests/test_compat_gaps.py`` (run in CI without PyTorch).

Writes ``tests/fixtures/parity/compat_gaps.npz`` (with ``torch_version``):

* ``dec.*``: a two-layer ``nn.TransformerDecoder`` (batch_first, final ``LayerNorm``, no
  dropout): its ``state_dict`` arrays, the inputs ``dec_tgt``/``dec_memory``, the output with a
  causal ``tgt_mask`` and a ``memory_key_padding_mask`` (``dec_out``), and the gradient of
  ``(out ** 2).sum()`` with respect to ``tgt`` (``dec_grad_tgt``);
* ``pack_*``: ``pack_padded_sequence`` of a padded batch with unsorted lengths
  (``enforce_sorted=False``): ``data``, ``batch_sizes``, ``sorted_indices``,
  ``unsorted_indices``, and ``pad_packed_sequence`` of it; ``packseq_*`` for ``pack_sequence``;
* ``multistep_lrs``: the learning rates of ``lr_scheduler.MultiStepLR`` (two parameter groups,
  a repeated milestone) after each of ten ``step()`` calls.

and, in ``tests/fixtures/torch_ckpt/``, a training checkpoint per optimizer as PyTorch scripts
write one, ``torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)``,
taken after two steps of ``nn.Linear(3, 2)`` on fixed data (``{name}.pt``), plus
``{name}_next.npz``: the data and the parameters after each of the next three steps;
``misc.pt``/``misc.npz`` (see :func:`dtypes_and_views`)::

    python scripts/make_compat_gaps_references.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "compat_gaps.npz"
CKPT = ROOT / "tests" / "fixtures" / "torch_ckpt"

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95)),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
}


def decoder(out: dict[str, np.ndarray]) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    dec = torch.nn.TransformerDecoder(layer, 2, norm=torch.nn.LayerNorm(8))
    for k, v in dec.state_dict().items():
        out["dec." + k] = v.numpy()
    r = np.random.default_rng(1)
    tgt = r.standard_normal((2, 5, 8)).astype(np.float32)
    mem = r.standard_normal((2, 4, 8)).astype(np.float32)
    out["dec_tgt"], out["dec_memory"] = tgt, mem
    t = torch.tensor(tgt, requires_grad=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    mpad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    y = dec(t, torch.tensor(mem), tgt_mask=mask, memory_key_padding_mask=mpad)
    (y**2).sum().backward()
    out["dec_out"] = y.detach().numpy()
    out["dec_grad_tgt"] = t.grad.numpy()


def packing(out: dict[str, np.ndarray]) -> None:
    from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence

    x = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
    lengths = [2, 4, 3]
    out["pack_input"], out["pack_lengths"] = x, np.array(lengths)
    p = pack_padded_sequence(torch.tensor(x), lengths, enforce_sorted=False)
    out["pack_data"] = p.data.numpy()
    out["pack_batch_sizes"] = p.batch_sizes.numpy()
    out["pack_sorted_indices"] = p.sorted_indices.numpy()
    out["pack_unsorted_indices"] = p.unsorted_indices.numpy()
    padded, lens = pad_packed_sequence(p, batch_first=True, padding_value=-1.0, total_length=5)
    out["unpack_padded"], out["unpack_lengths"] = padded.numpy(), lens.numpy()
    seqs = [torch.arange(n, dtype=torch.float32) + 10 * n for n in (3, 1, 2)]
    q = pack_sequence(seqs, enforce_sorted=False)
    out["packseq_data"] = q.data.numpy()
    out["packseq_batch_sizes"] = q.batch_sizes.numpy()
    out["packseq_sorted_indices"] = q.sorted_indices.numpy()


def multistep(out: dict[str, np.ndarray]) -> None:
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 5, 5, 8], gamma=0.5)
    lrs = []
    for _ in range(10):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    out["multistep_lrs"] = np.array(lrs, dtype=np.float64)


def checkpoints() -> None:
    CKPT.mkdir(parents=True, exist_ok=True)
    r = np.random.default_rng(2)
    x = r.standard_normal((6, 3)).astype(np.float32)
    y = r.standard_normal((6, 2)).astype(np.float32)
    for name, make in OPTIMIZERS.items():
        torch.manual_seed(3)
        model = torch.nn.Linear(3, 2)
        opt = make(model.parameters())

        def step(model: torch.nn.Module = model, opt: torch.optim.Optimizer = opt) -> None:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(torch.tensor(x)), torch.tensor(y)).backward()
            opt.step()

        for _ in range(2):
            step()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, CKPT / f"{name}.pt")
        nxt: dict[str, np.ndarray] = {"x": x, "y": y, "torch_version": np.array(torch.__version__)}
        for i in range(3):
            step()
            nxt[f"weight_{i}"] = model.weight.detach().numpy().copy()
            nxt[f"bias_{i}"] = model.bias.detach().numpy().copy()
        np.savez(CKPT / f"{name}_next.npz", **nxt)


def dtypes_and_views() -> None:
    """``misc.pt``: tensors of each dtype, strided views (saved with their whole storage), a
    Parameter and a dtype object; ``misc.npz``: the values as float64 (bfloat16 widened)."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8
    obj = {
        "f64": base.double(),
        "f16": base.half(),
        "bf16": base.bfloat16(),
        "i64": torch.arange(-3, 3),
        "i32": torch.arange(5, dtype=torch.int32),
        "i16": torch.arange(5, dtype=torch.int16),
        "i8": torch.arange(-2, 3, dtype=torch.int8),
        "u8": torch.arange(250, 256, dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "col": base[:, 1],
        "tr": base.t()[1:],
        "scalar": base[2, 3],
        "empty": torch.zeros(0, 3),
        "param": torch.nn.Parameter(base[:2, :2].clone()),
        "dtype": torch.float16,
    }
    torch.save(obj, CKPT / "misc.pt")
    ref = {k: v.detach().double().numpy() for k, v in obj.items() if isinstance(v, torch.Tensor)}
    np.savez(CKPT / "misc.npz", torch_version=np.array(torch.__version__), **ref)


def main() -> None:
    out: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    decoder(out)
    packing(out)
    multistep(out)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, **out)
    checkpoints()
    dtypes_and_views()
    print(f"wrote {OUT} and {CKPT} (PyTorch {torch.__version__})")


if __name__ == "__main__":
    main()
