"""Connectionist temporal classification loss composed of registry ops.

The forward (alpha) recursion runs over time in Python, on all sequences of
the batch at once, in log space: each step is a guarded log-sum-exp of the
previous alphas at ``s``, ``s - 1`` and (between distinct labels) ``s - 2``,
plus the log-probabilities of the extended labels (blanks between and
around the targets). A sequence's alphas stop changing after its input
length. The loss is differentiable in ``log_probs`` through those parts; it
is the exact derivative of the loss (PyTorch's own CTC backward returns a
gradient that equals it only after a ``log_softmax``, which is how
``log_probs`` are made).
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import _autocast as _amp
from .. import _core

Tensor = _core.Tensor

_NEG_INF = float("-inf")


def _lse(terms: list[Tensor]) -> Tensor:
    """Log-sum-exp of same-shaped tensors, -inf where all are -inf, with finite gradients there."""
    stacked = _core.stack(terms, -1)
    m = stacked.amax(-1, keepdim=True).detach()
    m = _core.where(m.isinf(), 0.0, m)
    s = (stacked - m).exp().sum(-1)
    pos = s > 0
    return _core.where(pos, _core.where(pos, s, 1.0).log() + m.squeeze(-1), _NEG_INF)


def _lengths(fn: str, name: str, v: object, n: int) -> list[int]:
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point or v.dtype == _core.bool:
            raise TypeError(f"{fn}: {name} must hold integers, got dtype {v.dtype}")
        vals = v.reshape(-1).tolist()
    elif isinstance(v, int):
        vals = [v]
    elif isinstance(v, Sequence):
        vals = [int(x) for x in v]
    else:
        raise TypeError(f"{fn}: {name} must be a Tensor or a sequence of ints, got {type(v).__name__}")
    if len(vals) != n:
        raise ValueError(f"{fn}: {name} must have one entry per batch element ({n}), got {len(vals)}")
    return [int(x) for x in vals]


@_amp.f32("log_probs")
def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Tensor | Sequence[int],
    target_lengths: Tensor | Sequence[int],
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """CTC loss, as ``torch.nn.functional.ctc_loss``.

    ``log_probs`` ``(T, N, C)`` (or unbatched ``(T, C)``) are log-probabilities
    (e.g. ``log_softmax`` outputs); ``targets`` are class indices, padded
    ``(N, S)`` or concatenated 1-D (``sum(target_lengths)`` long);
    ``input_lengths`` and ``target_lengths`` give each sequence's lengths
    (tensors or sequences of ints). ``blank`` is the blank class.
    ``reduction``: ``'mean'`` (each loss divided by its target length, then
    averaged), ``'sum'`` or ``'none'`` (``(N,)``). ``zero_infinity`` turns the
    infinite losses of impossible alignments (and their gradients) into zeros.
    """
    fn = "ctc_loss"
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        raise TypeError(f"{fn}: log_probs and targets must be Tensors")
    if not log_probs.dtype.is_floating_point:
        raise TypeError(f"{fn}: log_probs must have a floating point dtype, got {log_probs.dtype}")
    if targets.dtype.is_floating_point or targets.dtype == _core.bool:
        raise TypeError(f"{fn}: targets must hold integer class indices, got dtype {targets.dtype}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    unbatched = log_probs.dim() == 2
    if log_probs.dim() not in (2, 3):
        raise ValueError(
            f"{fn}: expected log_probs of shape (T, N, C) or (T, C), got shape {tuple(log_probs.shape)}"
        )
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise ValueError(f"{fn}: blank must be in [0, {c}), got {blank}")
    il = _lengths(fn, "input_lengths", input_lengths, n)
    tl = _lengths(fn, "target_lengths", target_lengths, n)
    if any(v < 0 or v > t_max for v in il):
        raise ValueError(
            f"{fn}: input_lengths must be in [0, {t_max}] (log_probs {tuple(log_probs.shape)}), got {il}"
        )
    if any(v < 0 for v in tl):
        raise ValueError(f"{fn}: target_lengths must be non-negative, got {tl}")
    dev = lp.device
    tg = targets
    if unbatched and tg.dim() == 1 and len(tl) == 1 and tg.shape[0] >= tl[0]:
        tg = tg.unsqueeze(0)
    if tg.dim() == 2:
        if tg.shape[0] != n:
            raise ValueError(
                f"{fn}: padded targets must be (N, S) with N = {n}, got targets of shape {tuple(targets.shape)}"
            )
        s_max = tg.shape[1]
        if any(v > s_max for v in tl):
            raise ValueError(f"{fn}: target_lengths {tl} exceed the padded targets' length {s_max}")
        padded = tg.to(_core.int64)
    elif tg.dim() == 1:
        if sum(tl) != tg.shape[0]:
            raise ValueError(
                f"{fn}: concatenated targets of length {tg.shape[0]} must have sum(target_lengths) = {sum(tl)} entries"
            )
        s_max = max(tl) if tl else 0
        starts = [sum(tl[:i]) for i in range(n)]
        last = max(tg.shape[0] - 1, 0)
        pos = [[min(starts[i] + j, last) for j in range(s_max)] for i in range(n)]
        flat = tg.to(_core.int64)
        if tg.shape[0] == 0:
            flat = _core.full((1,), blank, dtype=_core.int64, device=dev)
        padded = flat[_core.tensor(pos, dtype=_core.int64, device=dev).reshape(-1)].reshape(n, s_max)
    else:
        raise ValueError(f"{fn}: targets must be (N, S) or 1-D, got shape {tuple(targets.shape)}")
    # Extended labels: blank, l1, blank, l2, ..., blank (L = 2 S + 1).
    length = 2 * s_max + 1
    blanks = _core.full((n, s_max + 1), blank, dtype=_core.int64, device=dev)
    if s_max:
        inter = _core.stack([blanks[:, :s_max], padded], 2).reshape(n, 2 * s_max)
        ext = _core.cat([inter, blanks[:, s_max:]], 1)
    else:
        ext = blanks
    # Skip transitions (s - 2 -> s): a label different from the one two places back.
    if s_max > 1:
        differs = ext[:, 2:] != ext[:, :-2]
        skip = _core.cat([_core.zeros((n, 2), dtype=_core.bool, device=dev), differs], 1)
    else:
        skip = _core.zeros((n, length), dtype=_core.bool, device=dev)
    pad2 = _core.full((n, 2), _NEG_INF, dtype=lp.dtype, device=dev)
    idx = ext.unsqueeze(0).expand(t_max, n, length)
    emit = lp.gather(2, idx)  # (T, N, L)
    start = [
        [0.0 if (s == 0 or (s == 1 and tl[i] > 0)) else _NEG_INF for s in range(length)] for i in range(n)
    ]
    alpha = emit[0] + _core.tensor(start, dtype=lp.dtype, device=dev) if t_max else None
    for t in range(1, t_max):
        assert alpha is not None
        prev = _core.cat([pad2, alpha], 1)  # prev[:, s + 2] = alpha[:, s]
        a1 = prev[:, 1 : length + 1]
        a2 = _core.where(skip, prev[:, :length], _NEG_INF)
        step = _lse([alpha, a1, a2]) + emit[t]
        live = _core.tensor([t < v for v in il], dtype=_core.bool, device=dev).unsqueeze(1)
        alpha = _core.where(live, step, alpha)
    # Sequences of input length 0 end before the first step: only an empty target fits.
    losses = []
    for i in range(n):
        end = 2 * tl[i]
        if il[i] == 0 or alpha is None:
            val = _core.zeros((), dtype=lp.dtype, device=dev) if tl[i] == 0 else None
            if val is None:
                val = _core.full((), float("inf"), dtype=lp.dtype, device=dev)
            if alpha is not None:
                val = val + lp[0, i, 0] * 0.0
            losses.append(val)
            continue
        picks = [alpha[i, end]]
        if tl[i] > 0:
            picks.append(alpha[i, end - 1])
        losses.append(_lse(picks).neg())
    loss = _core.stack(losses, 0)
    if zero_infinity:
        loss = _core.where(loss.isinf(), 0.0, loss)
    if reduction == "mean":
        denom = _core.tensor([max(v, 1) for v in tl], dtype=lp.dtype, device=dev)
        return (loss / denom).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss
