"""``MultiLabelMarginLoss`` and ``TripletMarginWithDistanceLoss``."""

from __future__ import annotations

from collections.abc import Callable

from ... import _core
from .. import functional as F
from .loss import _Loss

Tensor = _core.Tensor

__all__ = ["MultiLabelMarginLoss", "TripletMarginWithDistanceLoss"]


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss (see ``F.multilabel_margin_loss``): ``target`` lists class
    indices per sample, ended by the first ``-1``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of scores ``input`` (``(C,)`` or ``(N, C)``) against ``target``."""
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet loss with a user distance (see ``F.triplet_margin_with_distance_loss``);
    the default distance is ``F.pairwise_distance``."""

    def __init__(
        self,
        *,
        distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: margin must be greater than 0, got {margin}")
        self.distance_function = distance_function if distance_function is not None else F.pairwise_distance
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """The loss of ``(anchor, positive, negative)`` triplets."""
        return F.triplet_margin_with_distance_loss(
            anchor,
            positive,
            negative,
            distance_function=self.distance_function,
            margin=self.margin,
            swap=self.swap,
            reduction=self.reduction,
        )
