"""``Embedding`` and ``EmbeddingBag``: lookup tables of learnable vectors."""

from __future__ import annotations

from typing import Any

from ... import _core
from ..._grad_mode import no_grad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

Tensor = _core.Tensor

__all__ = ["Embedding", "EmbeddingBag"]


class Embedding(Module):
    """``weight[input]``: rows of a ``(num_embeddings, embedding_dim)`` table, initialised N(0, 1).

    The row at ``padding_idx`` starts at zero and receives no gradient. ``sparse=True`` records
    the looked-up rows for :class:`ferrograd.optim.SparseAdam` (the gradient itself stays dense).
    ``_weight`` supplies the table directly; ``from_pretrained`` builds a
    (by default frozen) embedding from a tensor.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("Embedding: max_norm and scale_grad_by_freq are not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})"
                )
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(
                _core.empty((num_embeddings, embedding_dim), dtype=dtype or _core.get_default_dtype()),
                requires_grad=not _freeze,
            )
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(
                    f"Embedding: _weight must have shape {(num_embeddings, embedding_dim)}, got {tuple(_weight.shape)}"
                )
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Draw the table from N(0, 1) and zero the padding row."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        """Look up the rows at the integer indices ``input``: shape ``input.shape + (embedding_dim,)``."""
        return F.embedding(input, self.weight, self.padding_idx, sparse=self.sparse)

    @classmethod
    def from_pretrained(
        cls, embeddings: Tensor, freeze: bool = True, padding_idx: int | None = None, **kwargs: Any
    ) -> Embedding:
        """An embedding whose table is (a fresh leaf aliasing) ``embeddings``; frozen unless ``freeze=False``."""
        if embeddings.dim() != 2:
            raise ValueError(
                f"Embedding.from_pretrained: embeddings must be 2-D, got {tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings.detach(), _freeze=freeze, **kwargs)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.sparse:
            s += ", sparse=True"
        return s


class EmbeddingBag(Module):
    """Sums, means or maxima over bags of rows of a ``(num_embeddings, embedding_dim)``
    table (initialised N(0, 1), the ``padding_idx`` row zero), as
    :func:`ferrograd.nn.functional.embedding_bag` computes them.

    ``forward(input, offsets=None, per_sample_weights=None)`` takes 2-D ``(B, L)`` input
    (one bag per row) or 1-D input with ``offsets`` and returns ``(B, embedding_dim)``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError(
                "EmbeddingBag: max_norm, scale_grad_by_freq and sparse are not supported"
            )
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"EmbeddingBag: padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})"
                )
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.mode = mode
        self.include_last_offset = include_last_offset
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(
                _core.empty((num_embeddings, embedding_dim), dtype=dtype or _core.get_default_dtype())
            )
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(
                    f"EmbeddingBag: _weight must have shape {(num_embeddings, embedding_dim)}, "
                    f"got {tuple(_weight.shape)}"
                )
            self.weight = Parameter(_weight)
        if device is not None:
            self.to(device)

    def reset_parameters(self) -> None:
        """Draw the table from N(0, 1) and zero the padding row."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(
        self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None
    ) -> Tensor:
        """One reduced row per bag: shape ``(B, embedding_dim)``."""
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            mode=self.mode,
            per_sample_weights=per_sample_weights,
            include_last_offset=self.include_last_offset,
            padding_idx=self.padding_idx,
        )

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        """A bag embedding whose table is (a fresh leaf aliasing) ``embeddings``; frozen unless
        ``freeze=False``."""
        if embeddings.dim() != 2:
            raise ValueError(
                f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got {tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        bag = cls(
            rows,
            cols,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            mode=mode,
            sparse=sparse,
            _weight=embeddings.detach(),
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
        )
        bag.weight.requires_grad = not freeze
        return bag

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        if self.include_last_offset:
            s += ", include_last_offset=True"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
