"""Variable-length sequences, as ``torch.nn.utils.rnn``: ``pad_sequence``."""

from __future__ import annotations

from collections.abc import Sequence

from ... import _core
from .. import functional as F

Tensor = _core.Tensor

__all__ = ["pad_sequence"]


def pad_sequence(
    sequences: Tensor | Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences of different lengths ``(L_i, *)`` into one ``(T, B, *)`` tensor
    (``(B, T, *)`` with ``batch_first``), ``T`` the longest length, padded with
    ``padding_value`` on the ``padding_side`` ('right' or 'left'). Differentiable.
    """
    fn = "pad_sequence"
    if padding_side not in ("left", "right"):
        raise ValueError(f"{fn}: padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise ValueError(f"{fn}: received an empty list of sequences")
    for i, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"{fn}: sequence {i} must be a Tensor, got {type(s).__name__}")
        if s.dim() == 0:
            raise ValueError(f"{fn}: sequence {i} is a 0-d tensor; sequences need a length dim")
    trailing = tuple(seqs[0].shape[1:])
    for i, s in enumerate(seqs):
        if tuple(s.shape[1:]) != trailing or s.dtype != seqs[0].dtype:
            raise ValueError(
                f"{fn}: every sequence must have trailing dims {trailing} and dtype {seqs[0].dtype}, "
                f"sequence {i} has shape {tuple(s.shape)} and dtype {s.dtype}"
            )
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        extra = longest - s.shape[0]
        if extra:
            amounts = [0, 0] * len(trailing) + ([extra, 0] if padding_side == "left" else [0, extra])
            s = F.pad(s, tuple(amounts), mode="constant", value=padding_value)
        padded.append(s)
    return _core.stack(padded, 0 if batch_first else 1)
