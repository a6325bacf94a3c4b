"""A tiny GPT: a byte-level, decoder-only transformer trained with AdamW on a small text corpus.

    python examples/gpt_tiny.py                                  # reduced size: ~1 min on 2 cores
    python examples/gpt_tiny.py --d-model 256 --layers 4 --steps 300   # the full model (several minutes)
    python examples/gpt_tiny.py --corpus some.txt --sample 300
    python examples/gpt_tiny.py --device gpu --steps 20          # on the WebGPU device

The model is GPT-2's layout at toy scale: token and learned position
embeddings, ``--layers`` pre-LayerNorm blocks (causal self-attention through
``F.scaled_dot_product_attention(is_causal=True)``, then an MLP of width 4×
with GELU), a final LayerNorm and a read-out tied to the token embedding. The
vocabulary is the 256 byte values, so any text file works as a corpus; by
default it is the reference text Python ships for ``help()``
(``pydoc_data.topics``), so nothing is downloaded.

Training: random windows of ``--seq-len`` bytes, AdamW (weight decay on the
matrices only), a linear warm-up then cosine decay of the learning rate and
gradient clipping at 1. The loss on held-out windows (the last 10% of the
corpus) is printed as it goes down, then a sample is generated.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np

VOCAB = 256  # bytes


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position ``t`` sees positions ``≤ t``."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        """``x`` ``(B, T, C)`` → ``(B, T, C)``."""
        b, t, c = x.shape
        # (B, T, 3C) → (3, B, H, T, C/H): q, k and v with the heads as a batch dimension.
        qkv = self.qkv(x).reshape(b, t, 3, self.n_heads, c // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """A pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: fg.Tensor) -> fg.Tensor:
        """One residual attention step and one residual MLP step."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, ``layers`` blocks, a final LayerNorm, a read-out tied to the embedding."""

    def __init__(self, d_model: int = 256, layers: int = 4, n_heads: int = 4, seq_len: int = 128) -> None:
        super().__init__()
        self.seq_len = seq_len
        self.tok = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.Sequential(*[Block(d_model, n_heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        # GPT-2's initialisation: N(0, 0.02), with the residual projections scaled down by depth.
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, ids: fg.Tensor) -> fg.Tensor:
        """``ids`` ``(B, T)`` int64 with ``T ≤ seq_len`` → logits ``(B, T, 256)``."""
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(fg.arange(t, device=ids.device))
        x = self.ln_f(self.blocks(x))
        return F.linear(x, self.tok.weight)  # weight tying: the read-out is the embedding matrix


def load_corpus(path: Path | None) -> tuple[bytes, str]:
    """The corpus bytes and a description of where they came from.

    ``path`` if given; else the reference topics that ship with Python for
    ``help()`` (``pydoc_data.topics``, about 450 KB of English prose and
    code); else, on a Python built without them, this file's own source.
    """
    if path is not None:
        return path.read_bytes(), str(path)
    try:
        from pydoc_data.topics import topics
    except ImportError:
        return Path(__file__).read_bytes(), Path(__file__).name
    text = "\n\n".join(topics[k] for k in sorted(topics))
    return text.encode(), f"Python {sys.version.split()[0]}'s help() topics (pydoc_data.topics)"


def batch(
    data: np.ndarray, batch_size: int, seq_len: int, gen: fg.Generator, device: str = "cpu"
) -> tuple[fg.Tensor, fg.Tensor]:
    """``batch_size`` random windows on ``device``: inputs ``data[i:i+T]`` and targets ``data[i+1:i+T+1]``."""
    starts = fg.randint(0, len(data) - seq_len - 1, (batch_size,), generator=gen).numpy()
    idx = starts[:, None] + np.arange(seq_len + 1)
    win = fg.from_numpy(data[idx]).to(device)
    return win[:, :-1], win[:, 1:]


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then cosine decay to ``peak / 10``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak / 10 + 0.5 * (peak - peak / 10) * (1 + math.cos(math.pi * progress))


def evaluate(
    model: GPT, data: np.ndarray, seq_len: int, batches: int, batch_size: int, seed: int, device: str = "cpu"
) -> float:
    """Mean loss over fixed random windows of ``data`` (the same windows every call)."""
    gen = fg.Generator().manual_seed(seed)
    model.eval()
    total = 0.0
    with fg.no_grad():
        for _ in range(batches):
            x, y = batch(data, batch_size, seq_len, gen, device)
            total += float(F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)))
    model.train()
    return total / batches


def generate(model: GPT, prompt: bytes, n: int, temperature: float, gen: fg.Generator) -> bytes:
    """Sample ``n`` bytes after ``prompt``, feeding back the last ``seq_len`` bytes each time."""
    ids = list(prompt)
    model.eval()
    with fg.no_grad():
        for _ in range(n):
            ctx = fg.tensor([ids[-model.seq_len :]], dtype=fg.int64).to(model.tok.weight.device)
            probs = F.softmax(model(ctx)[0, -1] / temperature, dim=-1).cpu()  # sampled on the host
            ids.append(int(fg.multinomial(probs, 1, generator=gen)))
    model.train()
    return bytes(ids)


def main(argv: list[str] | None = None) -> int:
    """Train, printing train and held-out loss, then print a generated sample."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (default: 300)")
    p.add_argument("--d-model", type=int, default=128, help="model width (default: 128; the full model: 256)")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks (default: 2; the full model: 4)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default: 4)")
    p.add_argument("--seq-len", type=int, default=128, help="context length in bytes (default: 128)")
    p.add_argument("--batch-size", type=int, default=16, help="windows per step (default: 16)")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW peak learning rate (default: 3e-3)")
    p.add_argument(
        "--weight-decay", type=float, default=0.1, help="AdamW weight decay on matrices (default: 0.1)"
    )
    p.add_argument("--corpus", type=Path, default=None, help="a text file (default: Python's help() topics)")
    p.add_argument("--eval-every", type=int, default=50, help="held-out loss every N steps (default: 50)")
    p.add_argument(
        "--sample", type=int, default=200, help="bytes to generate at the end (default: 200; 0: none)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for initialisation, batches and sampling")
    p.add_argument(
        "--device", choices=("cpu", "gpu"), default="cpu", help="where to train (gpu: the WebGPU device)"
    )
    args = p.parse_args(argv)
    if args.device == "gpu" and not fg.gpu.is_available():
        sys.exit(f"gpt_tiny.py: no WebGPU device: {fg.gpu.unavailable_reason()}")

    fg.manual_seed(args.seed)
    gen = fg.Generator().manual_seed(args.seed)
    text, source = load_corpus(args.corpus)
    data = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]
    if len(val_data) <= args.seq_len + 1:
        sys.exit(f"gpt_tiny.py: the corpus ({len(data):,} bytes) is too small for --seq-len {args.seq_len}")

    model = GPT(args.d_model, args.layers, args.heads, args.seq_len).to(args.device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = fg.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    n_params = sum(p.numel() for p in model.parameters())
    print(f"corpus: {source} ({len(data):,} bytes; {len(train_data):,} train / {len(val_data):,} held out)")
    print(
        f"GPT: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, context {args.seq_len}, "
        f"{n_params / 1e6:.2f}M parameters; batch {args.batch_size}, {args.steps} steps"
    )

    warmup = max(1, args.steps // 10)
    eval_batches = 4
    print(
        f"step {0:>5}  held-out loss {evaluate(model, val_data, args.seq_len, eval_batches, args.batch_size, args.seed, args.device):.3f}"
        f"  (uniform over bytes: {math.log(VOCAB):.3f})"
    )
    t0 = time.perf_counter()
    running, count = 0.0, 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, warmup)
        x, y = batch(train_data, args.batch_size, args.seq_len, gen, args.device)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += float(loss)
        count += 1
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            dt = time.perf_counter() - t0
            val = evaluate(
                model, val_data, args.seq_len, eval_batches, args.batch_size, args.seed, args.device
            )
            tok_s = (step + 1) * args.batch_size * args.seq_len / dt
            print(
                f"step {step + 1:>5}  train loss {running / count:.3f}  held-out loss {val:.3f}  "
                f"lr {opt.param_groups[0]['lr']:.2e}  {tok_s:,.0f} tokens/s"
            )
            running, count = 0.0, 0
    print(f"trained in {time.perf_counter() - t0:.1f} s")

    if args.sample > 0:
        prompt = b"The "
        out = generate(model, prompt, args.sample, 0.8, gen)
        print("\nsample (temperature 0.8):\n" + out.decode("utf-8", errors="replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
