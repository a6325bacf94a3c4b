"""Learning-rate schedulers, with PyTorch's semantics.

A scheduler wraps an :class:`~ferrograd.optim.Optimizer` and rewrites the
``"lr"`` entry of each of its parameter groups (OneCycleLR also rewrites
``"momentum"`` or ``betas[0]``). The conventions are PyTorch's:

* constructing a scheduler (with ``last_epoch=-1``) stores each group's
  current lr as ``group["initial_lr"]`` (the scheduler's ``base_lrs``) and
  performs the initial step, so ``last_epoch`` becomes 0 and the epoch-0 lr
  is already applied (e.g. ``LinearLR`` multiplies it by ``start_factor``);
* ``step()`` advances ``last_epoch`` by one and applies the next lr; call it
  after ``optimizer.step()`` (a warning is raised on the first ``step()``
  otherwise, as in PyTorch);
* ``get_last_lr()`` returns the lrs applied by the latest step;
  ``get_lr()`` is the (internal) chainable update, which most schedulers
  compute from the groups' *current* lrs, so several schedulers can act
  on the same optimizer; ``step(epoch)`` (deprecated) jumps to ``epoch``
  using the closed form where one exists;
* ``state_dict()`` holds every attribute except the optimizer (and, for
  ``LambdaLR``/``MultiplicativeLR``, plain functions); resuming means
  restoring both ``optimizer.load_state_dict`` and
  ``scheduler.load_state_dict``.

Classes: :class:`LRScheduler` (alias :class:`_LRScheduler`), :class:`LambdaLR`,
:class:`MultiplicativeLR`, :class:`StepLR`, :class:`MultiStepLR`,
:class:`ConstantLR`, :class:`LinearLR`, :class:`ExponentialLR`,
:class:`CosineAnnealingLR`, :class:`SequentialLR`, :class:`ChainedScheduler`,
:class:`OneCycleLR` and :class:`ReduceLROnPlateau`.
"""

from __future__ import annotations

import math
import numbers
import types
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, SupportsFloat, TypedDict
from weakref import ref

from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "_LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "SequentialLR",
    "ChainedScheduler",
    "OneCycleLR",
    "ReduceLROnPlateau",
]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available."
)


def _format_param(name: str, optimizer: Optimizer, param: Any) -> list[Any]:
    """One value per parameter group: a list/tuple of the right length, or a scalar repeated."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(param)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(param)
    return [param] * len(optimizer.param_groups)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


class _enable_get_lr_call:
    """Marks ``get_lr()`` calls made from inside ``step()`` (others warn)."""

    def __init__(self, o: LRScheduler) -> None:
        self.o = o

    def __enter__(self) -> _enable_get_lr_call:
        self.o._get_lr_called_within_step = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.o._get_lr_called_within_step = False


class _initial_mode:
    """Marks the initial step performed by the constructor."""

    def __init__(self, o: LRScheduler) -> None:
        self.o = o

    def __enter__(self) -> None:
        self.o._is_initial = True

    def __exit__(self, *exc: object) -> None:
        self.o._is_initial = False


def _warn_get_lr_called_within_step(sched: LRScheduler) -> None:
    if not sched._get_lr_called_within_step:
        warnings.warn(
            "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
            UserWarning,
            stacklevel=3,
        )


class _StepTracker:
    """Replaces ``optimizer.step`` on the instance: records ``optimizer._opt_called`` then steps.

    It holds the optimizer weakly (no reference cycle), and follows it
    through ``copy.deepcopy``, so a copied optimizer's ``step`` updates the
    copy, not the original.
    """

    _wrapped_by_lr_sched = True

    def __init__(self, opt: Optimizer, func: Callable[..., Any] | None = None) -> None:
        self._opt = ref(opt)
        if func is None:
            # the step method in effect now (usually the class's), called unbound on the optimizer
            step = opt.step
            func = step.__func__ if getattr(step, "__self__", None) is opt else type(opt).step
        self._func = func
        self.__wrapped__ = func
        self.__doc__ = func.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        opt = self._opt()
        if opt is None:
            raise RuntimeError("the optimizer of this step() no longer exists")
        opt._opt_called = True  # type: ignore[attr-defined]
        return self._func(opt, *args, **kwargs)

    def __deepcopy__(self, memo: dict[int, Any]) -> _StepTracker:
        opt = self._opt()
        new = memo.get(id(opt)) if opt is not None else None
        return _StepTracker(new, self._func) if new is not None else self


def _patch_track_step_called(opt: Optimizer) -> None:
    """Wrap ``opt.step`` (once) so schedulers can tell whether it was called before them."""
    if hasattr(opt.step, "_wrapped_by_lr_sched"):
        return
    opt.step = _StepTracker(opt)  # type: ignore[method-assign]


class LRScheduler:
    """Base class of the learning-rate schedulers.

    Subclasses implement :meth:`get_lr` (the chainable update, computed at
    the new ``self.last_epoch``) and optionally ``_get_closed_form_lr``
    (used by the deprecated ``step(epoch)``).

    Args:
        optimizer: the wrapped optimizer.
        last_epoch: index of the last epoch. ``-1`` (default) starts a new
            schedule: each group's ``"initial_lr"`` is set from its ``"lr"``
            (unless already present). Any other value resumes a schedule and
            requires ``"initial_lr"`` in every group (``KeyError`` otherwise).
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an optimizer"
                    )
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _patch_track_step_called(self.optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        """Reset the step count and perform the initial step."""
        self._step_count = 0
        with _initial_mode(self):
            self.step()

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state: every attribute except the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state made by :meth:`state_dict` (restore the optimizer's state separately)."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[float]:
        """The learning rates (one per parameter group) applied by the latest step."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        """Compute the learning rates at ``self.last_epoch`` (chainable form)."""
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance the schedule by one epoch (or, deprecated, jump to ``epoch``) and apply the lrs."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                    "initialization. Please, make sure to call `optimizer.step()` before "
                    "`lr_scheduler.step()`.",
                    UserWarning,
                    stacklevel=2,
                )
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                    "You should call them in the opposite order: `optimizer.step()` before "
                    "`lr_scheduler.step()`. Failure to do this will result in skipping the first "
                    "value of the learning rate schedule.",
                    UserWarning,
                    stacklevel=2,
                )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        with _enable_get_lr_call(self):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=False):
            group["lr"] = lr
        self._last_lr: list[float] = [group["lr"] for group in self.optimizer.param_groups]


class _LRScheduler(LRScheduler):
    """Backward-compatible alias of :class:`LRScheduler` (PyTorch's old name)."""


def _lambdas(optimizer: Optimizer, lr_lambda: Any) -> list[Callable[[int], float]]:
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
    return list(lr_lambda)


class _LambdaStateMixin:
    """state_dict handling shared by LambdaLR and MultiplicativeLR.

    Plain functions and lambdas are not saved (``None``); callable objects
    save their ``__dict__``.
    """

    lr_lambdas: list[Callable[[int], float]]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state; callable objects among ``lr_lambdas`` save their ``__dict__``."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else fn.__dict__.copy() for fn in self.lr_lambdas
        ]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state made by :meth:`state_dict` (without modifying ``state_dict``)."""
        lr_lambdas = state_dict["lr_lambdas"]
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for idx, fn in enumerate(lr_lambdas):
            if fn is not None:
                self.lr_lambdas[idx].__dict__.update(fn)


class LambdaLR(_LambdaStateMixin, LRScheduler):
    """Sets each group's lr to ``initial_lr * lr_lambda(epoch)``.

    Args:
        optimizer: the wrapped optimizer.
        lr_lambda: a function of the epoch returning a multiplicative factor,
            or a list of such functions, one per parameter group.
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """``base_lr * lr_lambda(last_epoch)`` for each group."""
        _warn_get_lr_called_within_step(self)
        return [
            base_lr * lmbda(self.last_epoch)
            for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs, strict=False)
        ]


class MultiplicativeLR(_LambdaStateMixin, LRScheduler):
    """Multiplies each group's lr by ``lr_lambda(epoch)`` at every step (not at construction).

    Args:
        optimizer: the wrapped optimizer.
        lr_lambda: a function of the epoch returning a multiplicative factor,
            or a list of such functions, one per parameter group.
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """``lr * lr_lambda(last_epoch)`` for each group (unchanged on the initial step)."""
        _warn_get_lr_called_within_step(self)
        if self._is_initial:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [
            group["lr"] * lmbda(self.last_epoch)
            for lmbda, group in zip(self.lr_lambdas, self.optimizer.param_groups, strict=False)
        ]


class StepLR(LRScheduler):
    """Multiplies each group's lr by ``gamma`` every ``step_size`` epochs.

    Closed form: ``lr = base_lr * gamma ** (epoch // step_size)``.

    Args:
        optimizer: the wrapped optimizer.
        step_size: period of the decay, a positive int (``ValueError`` otherwise).
        gamma: multiplicative factor of the decay (default 0.1).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if not _is_int(step_size) or step_size <= 0:
            raise ValueError(f"StepLR step_size must be a positive integer, but got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """``lr * gamma`` when ``last_epoch`` is a positive multiple of ``step_size``, else ``lr``."""
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiplies each group's lr by ``gamma`` when the epoch reaches each milestone.

    Closed form: ``lr = base_lr * gamma ** bisect_right(sorted(milestones), epoch)``;
    a milestone listed twice decays twice.

    Args:
        optimizer: the wrapped optimizer.
        milestones: epoch indices (increasing).
        gamma: multiplicative factor of the decay (default 0.1).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.milestones: Counter[int] = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """``lr * gamma ** count`` at a milestone (``count`` = times it is listed), else ``lr``."""
        _warn_get_lr_called_within_step(self)
        if self.last_epoch not in self.milestones:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [
            group["lr"] * self.gamma ** self.milestones[self.last_epoch]
            for group in self.optimizer.param_groups
        ]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [
            base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs
        ]


class ConstantLR(LRScheduler):
    """Multiplies each group's lr by ``factor`` until epoch ``total_iters``.

    Closed form: ``lr = base_lr * (factor if epoch < total_iters else 1)``.

    Args:
        optimizer: the wrapped optimizer.
        factor: the factor, in ``[0, 1]`` (default 1/3; ``ValueError`` otherwise).
        total_iters: number of epochs with the reduced lr (default 5).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """``lr * factor`` at epoch 0, ``lr / factor`` at ``total_iters``, else ``lr``."""
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
            for base_lr in self.base_lrs
        ]


class LinearLR(LRScheduler):
    """Scales each group's lr by a factor going linearly from ``start_factor`` to ``end_factor``.

    Closed form: ``lr = base_lr * (start_factor + (end_factor - start_factor)
    * min(epoch, total_iters) / total_iters)``.

    Args:
        optimizer: the wrapped optimizer.
        start_factor: factor at epoch 0, in ``(0, 1]`` (default 1/3).
        end_factor: factor from epoch ``total_iters`` on, in ``[0, 1]`` (default 1).
        total_iters: number of epochs of the ramp (default 5).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """The ratio of consecutive closed-form factors applied to the current lr."""
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return [group["lr"] for group in self.optimizer.param_groups]
        d = self.end_factor - self.start_factor
        ratio = 1.0 + d / (self.total_iters * self.start_factor + (self.last_epoch - 1) * d)
        return [group["lr"] * ratio for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            base_lr
            * (
                self.start_factor
                + (self.end_factor - self.start_factor)
                * min(self.total_iters, self.last_epoch)
                / self.total_iters
            )
            for base_lr in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """Multiplies each group's lr by ``gamma`` every epoch: ``lr = base_lr * gamma ** epoch``.

    Args:
        optimizer: the wrapped optimizer.
        gamma: multiplicative factor of the decay.
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """``lr * gamma`` (unchanged on the initial step)."""
        _warn_get_lr_called_within_step(self)
        if self._is_initial:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``base_lr`` down to ``eta_min`` over ``T_max`` epochs (SGDR, no restarts).

    Closed form: ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``;
    the chainable (recursive) form used by ``step()`` follows it, and past
    ``T_max`` the lr rises again along the same cosine (period ``2 * T_max``).

    Args:
        optimizer: the wrapped optimizer.
        T_max: number of epochs of a half period, positive (``ValueError`` otherwise).
        eta_min: minimum learning rate (default 0).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if not isinstance(T_max, numbers.Real) or isinstance(T_max, bool) or T_max <= 0:
            raise ValueError(f"CosineAnnealingLR T_max must be a positive number, but got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """The recursive cosine update of the current lrs."""
        _warn_get_lr_called_within_step(self)
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and self.last_epoch > 0:
            return [
                self.eta_min
                + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                for base_lr in self.base_lrs
            ]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [
                group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                for base_lr, group in zip(self.base_lrs, groups, strict=False)
            ]
        return [
            (1 + math.cos(math.pi * self.last_epoch / self.T_max))
            / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
            * (group["lr"] - self.eta_min)
            + self.eta_min
            for group in groups
        ]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            self.eta_min
            + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            for base_lr in self.base_lrs
        ]


def _check_children(owner: str, optimizer: Optimizer, schedulers: Sequence[Any]) -> None:
    for idx, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{owner} at index {idx} should have `optimizer` as its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(
                f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs "
                f"to be specified when calling `step`, but got one at index {idx} in the given schedulers sequence."
            )
        if s.optimizer is not optimizer:
            raise ValueError(
                f"{owner} expects all schedulers to belong to the same optimizer, but got scheduler "
                f"{type(s).__name__} at index {idx} whose optimizer is a different {type(s.optimizer).__name__} "
                f"than the given {type(optimizer).__name__}."
            )


class _ContainerStateMixin:
    """state_dict handling of schedulers that hold other schedulers (``_schedulers``)."""

    _schedulers: list[LRScheduler]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state, with the state dicts of the wrapped schedulers."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state made by :meth:`state_dict`, including the wrapped schedulers'."""
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_schedulers"})
        for s, sd in zip(self._schedulers, state_dict["_schedulers"], strict=True):
            s.load_state_dict(sd)


class SequentialLR(_ContainerStateMixin, LRScheduler):
    """Runs schedulers one after another, switching at the given milestones (e.g. warm-up then decay).

    Scheduler ``i`` drives the lr for epochs in ``[milestones[i-1], milestones[i])``.
    On entering scheduler ``i > 0`` it restarts at its epoch 0 with its
    closed form (``base_lr`` for most schedulers), then steps normally.

    Args:
        optimizer: the wrapped optimizer (every scheduler must wrap it).
        schedulers: the schedulers, at least one (``ReduceLROnPlateau`` is not supported).
        milestones: ``len(schedulers) - 1`` increasing epoch indices.
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
    ) -> None:
        name = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{name} expects at least one scheduler, but got no scheduler.")
        _check_children(name, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more than the number "
                f"of milestone points, but got number of schedulers {len(schedulers)} and the number of "
                f"milestones to be equal to {len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # Reset the lrs, undo the initial steps of the schedulers, and redo the first one's only.
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def recursive_undo(self, sched: Any = None) -> None:
        """Undo (recursively) the initial step the wrapped schedulers made at construction."""
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    def step(self) -> None:  # type: ignore[override]
        """Advance by one epoch, stepping the scheduler whose interval holds the new epoch."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_ContainerStateMixin, LRScheduler):
    """Steps several chainable schedulers together: each ``step()`` calls every one's ``step()`` in order.

    Args:
        schedulers: the schedulers, at least one, all wrapping the same optimizer.
        optimizer: the wrapped optimizer (default: the first scheduler's).
    """

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None) -> None:
        name = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{name} expects at least one scheduler to be chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(name, optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]

    def step(self) -> None:  # type: ignore[override]
        """Step every wrapped scheduler once."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]


class _SchedulePhase(TypedDict):
    end_step: float
    start_lr: str
    end_lr: str
    start_momentum: str
    end_momentum: str


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from ``max_lr / div_factor`` to ``max_lr``, then anneals far below.

    With ``T = total_steps`` and ``p = pct_start``: phase 1 goes from
    ``initial_lr = max_lr / div_factor`` to ``max_lr`` over steps ``[0, p*T - 1]``;
    phase 2 goes from ``max_lr`` to ``min_lr = initial_lr / final_div_factor``
    over ``[p*T - 1, T - 1]``. With ``three_phase=True``: up over
    ``[0, p*T - 1]``, back down to ``initial_lr`` over ``[p*T - 1, 2*p*T - 2]``,
    then to ``min_lr`` over ``[2*p*T - 2, T - 1]``. Within a phase the value
    at step ``s`` is ``anneal(start, end, (s - phase_start) / (phase_end - phase_start))``
    with ``anneal = end + (start - end) * (1 + cos(pi * pct)) / 2`` ('cos') or
    ``start + (end - start) * pct`` ('linear').

    If ``cycle_momentum``, the momentum cycles inversely, between
    ``max_momentum`` and ``base_momentum``: ``group["momentum"]`` (SGD,
    RMSprop) or ``group["betas"][0]`` (Adam, AdamW). Stepping past
    ``total_steps`` raises ``ValueError``. Not chainable.

    Args:
        optimizer: the wrapped optimizer.
        max_lr: peak lr, a float or one per parameter group.
        total_steps: number of steps of the cycle; else ``epochs * steps_per_epoch``.
        epochs: number of epochs (with ``steps_per_epoch``).
        steps_per_epoch: number of steps per epoch (with ``epochs``).
        pct_start: fraction of the cycle spent increasing the lr, a float in ``[0, 1]`` (default 0.3).
        anneal_strategy: ``'cos'`` (default) or ``'linear'``.
        cycle_momentum: whether to cycle the momentum (default True).
        base_momentum: lowest momentum (at the lr peak), float or per group (default 0.85).
        max_momentum: highest momentum, float or per group (default 0.95).
        div_factor: ``initial_lr = max_lr / div_factor`` (default 25).
        final_div_factor: ``min_lr = initial_lr / final_div_factor`` (default 1e4).
        three_phase: use the three-phase schedule (default False).
        last_epoch: index of the last batch (default -1: start).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: Literal["cos", "linear"] = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not _is_int(total_steps) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = int(total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            if not _is_int(epochs) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not _is_int(steps_per_epoch) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = int(epochs) * int(steps_per_epoch)
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")

        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._anneal_func_type = anneal_strategy

        T = self.total_steps
        self._schedule_phases: list[_SchedulePhase]
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * T) - 1, "start_lr": "initial_lr", "end_lr": "max_lr",
                 "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * T) - 2, "start_lr": "max_lr", "end_lr": "initial_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
                {"end_step": T - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]  # fmt: skip
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * T) - 1, "start_lr": "initial_lr", "end_lr": "max_lr",
                 "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": T - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]  # fmt: skip

        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups, strict=True):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            max_ms = _format_param("max_momentum", optimizer, max_momentum)
            base_ms = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_m, b_m, group in zip(max_ms, base_ms, optimizer.param_groups, strict=True):
                    if self.use_beta1:
                        group["betas"] = (m_m, *group["betas"][1:])
                    else:
                        group["momentum"] = m_m
                    group["max_momentum"] = m_m
                    group["base_momentum"] = b_m
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return self._annealing_cos(start, end, pct)
        return self._annealing_linear(start, end, pct)

    @staticmethod
    def _annealing_cos(start: float, end: float, pct: float) -> float:
        """Cosine anneal from ``start`` to ``end`` as ``pct`` goes from 0 to 1."""
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _annealing_linear(start: float, end: float, pct: float) -> float:
        """Linear anneal from ``start`` to ``end`` as ``pct`` goes from 0 to 1."""
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        """The lr of each group at step ``last_epoch`` (also sets the cycled momentum)."""
        _warn_get_lr_called_within_step(self)
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total steps is {self.total_steps}"
            )
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        mom = self._anneal_func(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct
                        )
                        if self.use_beta1:
                            group["betas"] = (mom, *group["betas"][1:])
                        else:
                            group["momentum"] = mom
                    break
                start_step = phase["end_step"]
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Reduces each group's lr by ``factor`` when a metric has stopped improving.

    ``step(metric)`` compares the metric with the best so far: improvement
    means ``metric < best * (1 - threshold)`` ('min', 'rel'), ``metric < best
    - threshold`` ('min', 'abs'), ``metric > best * (1 + threshold)`` ('max',
    'rel') or ``metric > best + threshold`` ('max', 'abs'). After more than
    ``patience`` epochs without improvement, every lr becomes ``max(lr *
    factor, min_lr)`` (unless that changes it by ``eps`` or less), then
    ``cooldown`` epochs pass during which bad epochs are not counted.

    Args:
        optimizer: the wrapped optimizer.
        mode: ``'min'`` (default) or ``'max'``.
        factor: reduction factor, ``< 1`` (default 0.1).
        patience: number of bad epochs tolerated (default 10).
        threshold: minimal significant improvement (default 1e-4).
        threshold_mode: ``'rel'`` (default) or ``'abs'``.
        cooldown: epochs to wait after a reduction (default 0).
        min_lr: lower bound of the lrs, a float or one per group (default 0).
        eps: minimal change of an lr (default 1e-8).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: Literal["min", "max"] = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: Literal["rel", "abs"] = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        self.default_min_lr: float | None
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self) -> None:
        """Reset the bad-epoch and cooldown counters (and the best metric)."""
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics: SupportsFloat, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record ``metrics`` for the next epoch (a number or a one-element tensor) and maybe reduce the lrs."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self, epoch: int) -> None:
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(self.optimizer.param_groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due to a new "
                    "param group being added to the optimizer. Please modify the `min_lrs` field to match the "
                    "length of the `optimizer` param groups."
                )
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler is waiting out a cooldown."""
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state made by :meth:`state_dict`."""
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)


from ._lr_more import CosineAnnealingWarmRestarts, CyclicLR, PolynomialLR  # noqa: E402 - more schedulers

__all__ += ["CosineAnnealingWarmRestarts", "CyclicLR", "PolynomialLR"]
