"""A character-level LSTM language model on a few nursery rhymes, then a generated sample.

    python examples/char_rnn.py                 # 300 steps, ~20 s on 2 cores
    python examples/char_rnn.py --steps 800 --temperature 0.6

The training text ships in this file. Every line of it is one training
sequence, so sequences have different lengths: a batch is padded to its longest
line, and the padded positions get the target ``-100`` that ``cross_entropy``
ignores. The model is define-by-run: ``forward`` is plain Python and each batch
runs the LSTM for as many time steps as its own longest line. Sampling is a
Python loop that feeds one character at a time, carrying the LSTM's ``(h, c)``
state, and stops at the end of a line.
"""

from __future__ import annotations

import argparse
import sys
import time

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F

# Traditional English nursery rhymes (public domain).
TEXT = """\
twinkle, twinkle, little star, how i wonder what you are.
up above the world so high, like a diamond in the sky.
humpty dumpty sat on a wall, humpty dumpty had a great fall.
all the king's horses and all the king's men couldn't put humpty together again.
jack and jill went up the hill to fetch a pail of water.
jack fell down and broke his crown, and jill came tumbling after.
mary had a little lamb, its fleece was white as snow.
and everywhere that mary went, the lamb was sure to go.
hickory dickory dock, the mouse ran up the clock.
the clock struck one, the mouse ran down, hickory dickory dock.
baa, baa, black sheep, have you any wool?
yes sir, yes sir, three bags full.
one for the master, one for the dame, and one for the little boy who lives down the lane.
little bo peep has lost her sheep and doesn't know where to find them.
leave them alone and they'll come home, wagging their tails behind them.
hey diddle diddle, the cat and the fiddle, the cow jumped over the moon.
the little dog laughed to see such sport, and the dish ran away with the spoon.
little miss muffet sat on a tuffet, eating her curds and whey.
along came a spider who sat down beside her and frightened miss muffet away.
old mother hubbard went to the cupboard to give the poor dog a bone.
when she came there the cupboard was bare, and so the poor dog had none.
"""

PAD = -100  # cross_entropy's default ignore_index


class CharLSTM(nn.Module):
    """Embedding → LSTM → linear read-out over the vocabulary."""

    def __init__(self, vocab: int, embed: int = 32, hidden: int = 128, layers: int = 1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids: fg.Tensor, state=None):
        """``ids`` ``(B, T)`` int64 → logits ``(B, T, vocab)`` and the final ``(h, c)``."""
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


class Vocab:
    """Characters ↔ ids; id 0 is the end-of-line marker, which also starts every sequence."""

    def __init__(self, text: str) -> None:
        self.chars = ["\n", *sorted(set(text) - {"\n"})]
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> list[int]:
        """Ids of the characters of ``s``."""
        return [self.index[c] for c in s]

    def decode(self, ids: list[int]) -> str:
        """The string of ``ids``."""
        return "".join(self.chars[i] for i in ids)


def make_batch(lines: list[list[int]], rows: list[int]) -> tuple[fg.Tensor, fg.Tensor]:
    """Inputs ``[\\n, c1, …, cn]`` and targets ``[c1, …, cn, \\n]``, padded to the batch's longest line."""
    seqs = [lines[r] for r in rows]
    t = max(len(s) for s in seqs) + 1
    x = [[0, *s] + [0] * (t - 1 - len(s)) for s in seqs]
    y = [[*s, 0] + [PAD] * (t - 1 - len(s)) for s in seqs]
    return fg.tensor(x, dtype=fg.int64), fg.tensor(y, dtype=fg.int64)


def sample(
    model: CharLSTM, vocab: Vocab, prompt: str, temperature: float, max_len: int, gen: fg.Generator
) -> str:
    """Continue ``prompt`` one character at a time until the end of the line (or ``max_len`` characters)."""
    model.eval()
    out: list[int] = []
    with fg.no_grad():
        logits, state = model(fg.tensor([[0, *vocab.encode(prompt)]], dtype=fg.int64))
        for _ in range(max_len):
            probs = F.softmax(logits[0, -1] / temperature, dim=-1)
            nxt = int(fg.multinomial(probs, 1, generator=gen))
            if nxt == 0:  # end of line
                break
            out.append(nxt)
            logits, state = model(fg.tensor([[nxt]], dtype=fg.int64), state)
    model.train()
    return prompt + vocab.decode(out)


def main(argv: list[str] | None = None) -> int:
    """Train, print the loss every few steps, then print a few sampled lines."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (default: 300)")
    p.add_argument("--batch-size", type=int, default=8, help="lines per batch (default: 8)")
    p.add_argument("--hidden", type=int, default=128, help="LSTM hidden size (default: 128)")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate (default: 1e-2)")
    p.add_argument("--temperature", type=float, default=0.5, help="sampling temperature (default: 0.5)")
    p.add_argument("--seed", type=int, default=0, help="seed for initialisation, batching and sampling")
    p.add_argument("--log-every", type=int, default=50, help="print the loss every N steps (default: 50)")
    args = p.parse_args(argv)

    fg.manual_seed(args.seed)
    gen = fg.Generator().manual_seed(args.seed)  # batches and samples, independent of the model code
    vocab = Vocab(TEXT)
    lines = [vocab.encode(line) for line in TEXT.splitlines() if line]
    model = CharLSTM(len(vocab), hidden=args.hidden)
    opt = fg.optim.Adam(model.parameters(), lr=args.lr)
    print(
        f"{len(lines)} lines, {len(TEXT)} characters, vocabulary {len(vocab)}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters"
    )

    t0 = time.perf_counter()
    first = last = None
    running = 0.0
    for step in range(1, args.steps + 1):
        rows = fg.randint(0, len(lines), (args.batch_size,), generator=gen).tolist()
        x, y = make_batch(lines, rows)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = float(loss)
        first = value if first is None else first
        running += value
        if step % args.log_every == 0 or step == args.steps:
            n = step % args.log_every or args.log_every
            last = running / n
            print(
                f"step {step:>4}/{args.steps}  loss {last:.3f}  (batch length {x.shape[1]}, "
                f"{step / (time.perf_counter() - t0):.1f} steps/s)"
            )
            running = 0.0
    print(f"loss {first:.3f} -> {last:.3f} in {time.perf_counter() - t0:.1f} s")

    print(f"\nsamples (temperature {args.temperature}):")
    for prompt in ("twinkle", "jack ", "the cat ", "mary went "):
        print("  " + sample(model, vocab, prompt, args.temperature, 120, gen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
