"""Variable-length sequences, as ``torch.nn.utils.rnn``: ``pad_sequence``, ``PackedSequence`` and
``pack_padded_sequence`` / ``pad_packed_sequence`` / ``pack_sequence``.

A ``PackedSequence`` holds the time steps of a batch sorted by decreasing
length, step after step: ``data`` is ``(sum(lengths), *)`` and
``batch_sizes[t]`` is how many sequences are still running at step ``t``.
The recurrent layers (``RNN``, ``LSTM``, ``GRU``) take one and return one;
packing and unpacking are differentiable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ... import _core
from .. import functional as F

Tensor = _core.Tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence"]


class PackedSequence(NamedTuple):
    """A batch of sequences packed by time step (see the module docstring).

    ``sorted_indices[i]`` is the original batch index of the ``i``-th
    longest sequence; ``unsorted_indices`` is its inverse (both None when
    the batch was packed already sorted).
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The same packing with ``data`` converted by ``Tensor.to`` (the indices stay on the CPU)."""
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        """False: ferrograd has no CUDA device."""
        return False


def _lengths_list(fn: str, lengths: Tensor | Sequence[int]) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1 or lengths.dtype.is_floating_point:
            raise ValueError(f"{fn}: lengths must be a 1-D integer tensor or a list of ints, got {lengths!r}")
        return [int(v) for v in lengths.cpu().tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(
    input: Tensor, lengths: Tensor | Sequence[int], batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded ``(T, B, *)`` batch (``(B, T, *)`` with ``batch_first``) of sequences of ``lengths``.

    With ``enforce_sorted`` the lengths must be decreasing; otherwise the
    batch is sorted here and the permutation kept in the result.
    """
    fn = "pack_padded_sequence"
    if not isinstance(input, Tensor) or input.dim() < 2:
        raise ValueError(f"{fn}: input must be a tensor of at least 2 dims (time, batch, *)")
    lens = _lengths_list(fn, lengths)
    x = input.transpose(0, 1) if batch_first else input
    t_max, b = x.shape[0], x.shape[1]
    if len(lens) != b:
        raise ValueError(
            f"{fn}: expected {b} lengths (the batch of input {tuple(input.shape)}), got {len(lens)}"
        )
    if any(n <= 0 for n in lens):
        raise ValueError(f"{fn}: every length must be positive, got {lens}")
    if max(lens) > t_max:
        raise ValueError(
            f"{fn}: a length ({max(lens)}) exceeds the padded length {t_max} of input {tuple(input.shape)}"
        )
    sorted_idx = unsorted_idx = None
    if enforce_sorted:
        if any(lens[i] < lens[i + 1] for i in range(b - 1)):
            raise ValueError(
                f"{fn}: lengths must be sorted in decreasing order when enforce_sorted is True, got {lens} "
                "(pass enforce_sorted=False to pack unsorted sequences)"
            )
    else:
        order = sorted(range(b), key=lambda i: -lens[i])
        inverse = [0] * b
        for pos, i in enumerate(order):
            inverse[i] = pos
        sorted_idx = _core.tensor(order, dtype=_core.int64)
        unsorted_idx = _core.tensor(inverse, dtype=_core.int64)
        x = x.index_select(1, sorted_idx.to(x.device))
        lens = [lens[i] for i in order]
    sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = _core.cat([x[t].narrow(0, 0, bs) for t, bs in enumerate(sizes)], 0)
    return PackedSequence(data, _core.tensor(sizes, dtype=_core.int64), sorted_idx, unsorted_idx)


def _padded_sorted(
    sequence: PackedSequence, padding_value: float, total_length: int | None
) -> tuple[Tensor, list[int]]:
    """``(T, B, *)`` in sorted batch order, and the sorted lengths."""
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    data = sequence.data
    b = sizes[0] if sizes else 0
    t_len = len(sizes) if total_length is None else total_length
    if t_len < len(sizes):
        raise ValueError(
            f"pad_packed_sequence: total_length ({total_length}) is less than the longest sequence ({len(sizes)})"
        )
    rows, offset = [], 0
    trailing = tuple(data.shape[1:])
    for bs in sizes:
        step = data.narrow(0, offset, bs)
        offset += bs
        if bs < b:
            step = _core.cat(
                [step, _core.full((b - bs, *trailing), padding_value, dtype=data.dtype, device=data.device)],
                0,
            )
        rows.append(step)
    for _ in range(t_len - len(sizes)):
        rows.append(_core.full((b, *trailing), padding_value, dtype=data.dtype, device=data.device))
    lengths = [sum(1 for bs in sizes if bs > i) for i in range(b)]
    return _core.stack(rows, 0), lengths


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Undo ``pack_padded_sequence``: ``(padded (T, B, *) or (B, T, *), lengths)`` in the original batch order."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    padded, lengths = _padded_sorted(sequence, padding_value, total_length)
    lens = _core.tensor(lengths, dtype=_core.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices.to(padded.device))
        lens = lens.index_select(0, sequence.unsorted_indices)
    return (padded.transpose(0, 1) if batch_first else padded), lens


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``(L_i, *)`` sequences (``pad_sequence`` then ``pack_padded_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


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
