"""``AdaptiveLogSoftmaxWithLoss`` (Grave et al., 2016), as ``torch.nn.AdaptiveLogSoftmaxWithLoss``."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from ... import _core
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

Tensor = _core.Tensor

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax over many classes: frequent classes (below ``cutoffs[0]``) in a
    head, the rest in clusters reached through the head, each cluster projected down by
    ``div_value``.

    ``forward(input, target)`` returns ``(output, loss)``: the log-probability of each
    target and the mean negative log-likelihood. ``log_prob(input)`` gives the full
    ``(N, n_classes)`` log-probabilities and ``predict(input)`` the most likely class.
    """

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError(
                "AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of length larger than 0"
            )
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > (n_classes - 1)
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of unique, positive integers sorted "
                f"in an increasing order, where each value is between 1 and n_classes-1 ({n_classes - 1}), "
                f"got {cutoffs}"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                    Linear(hsz, osz, bias=False, device=device, dtype=dtype),
                )
            )

    def reset_parameters(self) -> None:
        """Re-initialise the head and every cluster's projections."""
        self.head.reset_parameters()
        for seq in self.tail:
            for lin in seq:
                lin.reset_parameters()

    def _check_input(self, input: Tensor) -> tuple[Tensor, bool]:
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise RuntimeError(f"{name}: input should be 1D or 2D, got shape {tuple(input.shape)}")
        if input.shape[-1] != self.in_features:
            raise RuntimeError(
                f"{name}: input should have {self.in_features} features on the last dim, got {tuple(input.shape)}"
            )
        batched = input.dim() == 2
        return (input if batched else input.unsqueeze(0)), batched

    def forward(self, input: Tensor, target: Tensor) -> Any:
        """``(output, loss)``: each target's log-probability and their mean negation."""
        name = type(self).__name__
        x, batched = self._check_input(input)
        want = 1 if batched else 0
        if target.dim() != want or (batched and target.shape[0] != x.shape[0]):
            raise RuntimeError(
                f"{name}: target {tuple(target.shape)} does not match input {tuple(input.shape)} "
                "(1D target for 2D input, 0D target for 1D input)"
            )
        if target.dtype not in (_core.int32, _core.int64):
            raise TypeError(f"{name}: target must have an integer dtype, got {target.dtype}")
        t = target.reshape((x.shape[0],)).to(_core.int64)
        if x.shape[0] and (bool((t < 0).any()) or bool((t >= self.n_classes).any())):
            raise RuntimeError(
                f"{name}: target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{int(t.min())}, {int(t.max())}] were found"
            )
        head_logprob = F.log_softmax(self.head(x), dim=1)
        shortlist = self.shortlist_size
        in_short = t < shortlist
        head_idx = _core.where(in_short, t, _core.zeros_like(t))
        masks = []
        for i in range(self.n_clusters):  # cluster i: classes cutoffs[i] .. cutoffs[i + 1] - 1
            in_c = (t >= self.cutoffs[i]).logical_and(t < self.cutoffs[i + 1])
            masks.append(in_c)
            head_idx = _core.where(in_c, _core.full_like(t, shortlist + i), head_idx)
        output = head_logprob.gather(1, head_idx.unsqueeze(1)).squeeze(1)
        for i, in_c in enumerate(masks):
            rel = _core.where(in_c, t - self.cutoffs[i], _core.zeros_like(t))
            local = F.log_softmax(self.tail[i](x), dim=1).gather(1, rel.unsqueeze(1)).squeeze(1)
            output = output + _core.where(in_c, local, _core.zeros_like(local))
        loss = output.neg().mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _full_log_prob(self, x: Tensor, head_logprob: Tensor) -> Tensor:
        parts = [head_logprob.narrow(1, 0, self.shortlist_size)]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(cluster + head_logprob.narrow(1, self.shortlist_size + i, 1))
        return _core.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log-probabilities of every class: ``(N, n_classes)`` (or ``(n_classes,)``)."""
        x, batched = self._check_input(input)
        out = self._full_log_prob(x, F.log_softmax(self.head(x), dim=1))
        return out if batched else out.squeeze(0)

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each input: ``(N,)`` (or a 0-d tensor)."""
        x, batched = self._check_input(input)
        out = self._full_log_prob(x, F.log_softmax(self.head(x), dim=1)).argmax(1)
        return out if batched else out.squeeze(0)
