"""Stochastic weight averaging and exponential moving averages of a model.

``AveragedModel`` keeps a copy of a model whose parameters are a running
average (equal-weight for SWA, exponential with ``get_ema_multi_avg_fn``) of
the model's parameters; ``SWALR`` anneals each group's learning rate to a
fixed SWA learning rate; ``update_bn`` recomputes batch-norm statistics for
the averaged weights with one pass over the data. As ``torch.optim.swa_utils``.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler
from .optimizer import Optimizer, Tensor

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]

AvgFn = Callable[[Tensor, Tensor, Tensor | int], Tensor]
MultiAvgFn = Callable[[list[Tensor], list[Tensor], Tensor | int], None]


def _count(n: Tensor | int) -> int:
    return int(n.item()) if isinstance(n, Tensor) else int(n)


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAvgFn:
    """An in-place exponential moving average over lists of tensors:
    ``avg = lerp(avg, current, 1 - decay)``."""
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"get_ema_multi_avg_fn: decay must be in [0, 1], got {decay}")

    def ema_update(averaged: list[Tensor], current: list[Tensor], num_averaged: Tensor | int) -> None:
        with no_grad():
            for a, c in zip(averaged, current, strict=True):
                a.add_(c - a, alpha=1.0 - decay)

    return ema_update


def get_swa_multi_avg_fn() -> MultiAvgFn:
    """An in-place equal-weight running average over lists of tensors:
    ``avg = avg + (current - avg) / (num_averaged + 1)``."""

    def swa_update(averaged: list[Tensor], current: list[Tensor], num_averaged: Tensor | int) -> None:
        n = _count(num_averaged)
        with no_grad():
            for a, c in zip(averaged, current, strict=True):
                a.add_(c - a, alpha=1.0 / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> AvgFn:
    """An exponential moving average of one tensor: returns ``decay * avg + (1 - decay) * current``."""
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"get_ema_avg_fn: decay must be in [0, 1], got {decay}")

    def ema_update(averaged: Tensor, current: Tensor, num_averaged: Tensor | int) -> Tensor:
        return averaged * decay + current * (1.0 - decay)

    return ema_update


def get_swa_avg_fn() -> AvgFn:
    """An equal-weight running average of one tensor: returns ``avg + (current - avg) / (num_averaged + 1)``."""

    def swa_update(averaged: Tensor, current: Tensor, num_averaged: Tensor | int) -> Tensor:
        return averaged + (current - averaged) / (_count(num_averaged) + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters average the model's over time.

    ``update_parameters(model)`` folds the model's current parameters (and,
    with ``use_buffers=True``, its buffers) into the average: the first call
    copies them; later calls apply ``multi_avg_fn`` (lists of tensors, in
    place) or ``avg_fn`` (one tensor, returns the new average), by default
    the equal-weight SWA average. Without ``use_buffers`` the copy's buffers
    follow the model's. ``n_averaged`` (an int64 buffer) counts the updates.
    Calling the averaged model calls its copy.

    Args:
        model: the model to average (deep-copied).
        device: if given, the copy is moved there.
        avg_fn / multi_avg_fn: the averaging rule (at most one of them).
        use_buffers: average buffers too (e.g. batch-norm statistics).
    """

    def __init__(
        self,
        model: Module,
        device: Any = None,
        avg_fn: AvgFn | None = None,
        multi_avg_fn: MultiAvgFn | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: only one of avg_fn and multi_avg_fn may be given")
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel: model must be a Module, got {type(model).__name__}")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        n = _core.zeros((), dtype=_core.int64)
        if device is not None:
            n = n.to(device)
        self.register_buffer("n_averaged", n)
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Call the averaged copy of the model."""
        return self.module(*args, **kwargs)

    def _tensors(self, model: Module) -> list[Tensor]:
        if self.use_buffers:
            return [t for t in itertools.chain(model.parameters(), model.buffers()) if t is not None]
        return list(model.parameters())

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters (and buffers, with ``use_buffers``) into the average."""
        mine = self._tensors(self.module)
        theirs = self._tensors(model)
        if len(mine) != len(theirs):
            raise ValueError(
                f"AveragedModel.update_parameters: the model has {len(theirs)} tensors to average, "
                f"the averaged copy {len(mine)}"
            )
        n = int(self.n_averaged.item())
        with no_grad():
            current = []
            for a, c in zip(mine, theirs, strict=True):
                if tuple(a.shape) != tuple(c.shape):
                    raise ValueError(
                        f"AveragedModel.update_parameters: shape {tuple(c.shape)} in the model, "
                        f"{tuple(a.shape)} in the averaged copy"
                    )
                c = c.detach()
                if c.device != a.device:
                    c = c.to(a.device)
                current.append(c)
            # integer buffers (num_batches_tracked) are copied, not averaged
            floating = [(a, c) for a, c in zip(mine, current, strict=True) if a.dtype.is_floating_point]
            if n == 0:
                for a, c in zip(mine, current, strict=True):
                    a.copy_(c)
            elif self.avg_fn is not None:
                for a, c in floating:
                    a.copy_(self.avg_fn(a.detach(), c, self.n_averaged))
                for a, c in zip(mine, current, strict=True):
                    if not a.dtype.is_floating_point:
                        a.copy_(c)
            else:
                fn = self.multi_avg_fn or get_swa_multi_avg_fn()
                fn([a for a, _ in floating], [c for _, c in floating], self.n_averaged)
                for a, c in zip(mine, current, strict=True):
                    if not a.dtype.is_floating_point:
                        a.copy_(c)
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers(), strict=False):
                    if b_avg is not None and b_model is not None:
                        b_avg.copy_(b_model.detach().to(b_avg.device))
            self.n_averaged.add_(1)


@no_grad()
def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the batch-norm running statistics of ``model`` with one pass over ``loader``.

    Each batch-norm layer's statistics are reset and then accumulated as a
    cumulative (equal-weight) average over the batches; the layers'
    ``momentum`` and the model's training mode are restored afterwards. A
    batch that is a list or tuple contributes its first element; ``device``
    moves each input there. Does nothing when the model has no batch norm.
    """
    momenta: dict[Module, float | None] = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    try:
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to a fixed SWA learning rate.

    Over ``anneal_epochs`` steps the learning rate moves from its value to
    ``swa_lr`` (one value, or one per group) along a cosine
    (``anneal_strategy="cos"``) or a straight line (``"linear"``), then
    stays at ``swa_lr``. Typically stepped once per epoch after SWA starts.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | Sequence[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(
                    f"SWALR: swa_lr has {len(swa_lr)} values, but the optimizer has {len(groups)} groups"
                )
            lrs = [float(v) for v in swa_lr]
        else:
            lrs = [float(swa_lr)] * len(groups)  # type: ignore[arg-type]
        for lr, group in zip(lrs, groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"SWALR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        if isinstance(anneal_epochs, bool) or not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"SWALR: anneal_epochs must be a non-negative int, got {anneal_epochs!r}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        """The annealing fraction at progress ``t`` in [0, 1]."""
        if self.anneal_strategy == "cos":
            return (1.0 - math.cos(math.pi * t)) / 2.0
        return t

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1.0:
            return swa_lr
        return (lr - alpha * swa_lr) / (1.0 - alpha)

    def get_lr(self) -> list[float]:
        """The learning rates at the current step (chainable form)."""
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0.0, min(1.0, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0.0, min(1.0, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1.0 - alpha) for g, lr in zip(groups, prev_lrs, strict=True)]
