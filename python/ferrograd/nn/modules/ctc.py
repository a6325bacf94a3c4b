"""``CTCLoss``: the module form of ``functional.ctc_loss``."""

from __future__ import annotations

from collections.abc import Sequence

from ... import _core
from .. import functional as F
from .loss import _Loss

Tensor = _core.Tensor

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """Connectionist temporal classification loss, as ``torch.nn.CTCLoss``.

    ``forward(log_probs, targets, input_lengths, target_lengths)``: see
    ``functional.ctc_loss`` for the shapes; ``blank``, ``reduction`` and
    ``zero_infinity`` are fixed at construction.
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(
        self,
        log_probs: Tensor,
        targets: Tensor,
        input_lengths: Tensor | Sequence[int],
        target_lengths: Tensor | Sequence[int],
    ) -> Tensor:
        """The CTC loss of ``log_probs`` against ``targets``."""
        return F.ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction, self.zero_infinity
        )

    def extra_repr(self) -> str:
        s = super().extra_repr()
        extra = [s] if s else []
        if self.blank != 0:
            extra.append(f"blank={self.blank}")
        if self.zero_infinity:
            extra.append("zero_infinity=True")
        return ", ".join(extra)
