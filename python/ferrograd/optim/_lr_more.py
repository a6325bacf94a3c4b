"""More learning-rate schedulers, with PyTorch's semantics: :class:`PolynomialLR`,
:class:`CosineAnnealingWarmRestarts` and :class:`CyclicLR` (re-exported by
:mod:`ferrograd.optim.lr_scheduler`)."""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal

from .lr_scheduler import (
    LRScheduler,
    _check_optimizer,
    _enable_get_lr_call,
    _format_param,
    _is_int,
    _warn_get_lr_called_within_step,
)
from .optimizer import Optimizer

__all__ = ["CosineAnnealingWarmRestarts", "CyclicLR", "PolynomialLR"]


class PolynomialLR(LRScheduler):
    """Decays each group's lr polynomially to 0 over ``total_iters`` epochs:
    ``lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power``; constant after.

    Args:
        optimizer: the wrapped optimizer.
        total_iters: number of epochs of the decay (default 5).
        power: the polynomial's power (default 1.0: linear).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """The current lrs times ``((1 - e/T) / (1 - (e-1)/T)) ** power`` (chainable form)."""
        _warn_get_lr_called_within_step(self)
        groups = self.optimizer.param_groups
        if self._is_initial or self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        t = self.total_iters
        factor = ((1.0 - self.last_epoch / t) / (1.0 - (self.last_epoch - 1) / t)) ** self.power
        return [group["lr"] * factor for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        t = self.total_iters
        return [base_lr * (1.0 - min(t, self.last_epoch) / t) ** self.power for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR): within a period of ``T_i`` epochs,
    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``, where
    ``T_cur`` counts the epochs since the last restart; the first period is ``T_0`` and
    each next one ``T_mult`` times longer. ``step(epoch)`` may take a fractional epoch
    (batch-level stepping) and jumps there in closed form.

    Args:
        optimizer: the wrapped optimizer.
        T_0: epochs of the first period, a positive int.
        T_mult: growth factor of the period after each restart, an int >= 1 (default 1).
        eta_min: minimum learning rate (default 0).
        last_epoch: index of the last epoch (default -1: start).
    """

    def __init__(
        self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        if not _is_int(T_0) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not _is_int(T_mult) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)) or isinstance(eta_min, bool):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """The cosine value at ``T_cur`` of the current period."""
        _warn_get_lr_called_within_step(self)
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base_lr - self.eta_min) * c for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or jump to (a possibly fractional) ``epoch``, and apply the lrs."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        with _enable_get_lr_call(self):
            values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class CyclicLR(LRScheduler):
    """Cyclical learning rate (CLR): the lr goes linearly from ``base_lr`` up to ``max_lr``
    over ``step_size_up`` iterations and back over ``step_size_down``, the amplitude scaled
    per cycle (``'triangular'``: 1, ``'triangular2'``: halved each cycle) or per iteration
    (``'exp_range'``: ``gamma ** iteration``), or by ``scale_fn``. Step it after every
    batch. With ``cycle_momentum`` the momentum (or Adam's ``beta1``) cycles inversely
    between ``max_momentum`` and ``base_momentum``. Not chainable.

    Args:
        optimizer: the wrapped optimizer.
        base_lr: lower lr bound, a float or one per group (set as the groups' lr at start).
        max_lr: upper lr bound, a float or one per group.
        step_size_up: iterations of the rising half (default 2000).
        step_size_down: iterations of the falling half (default ``step_size_up``).
        mode: ``'triangular'``, ``'triangular2'`` or ``'exp_range'`` (ignored with ``scale_fn``).
        gamma: base of ``'exp_range'``'s scale (default 1.0).
        scale_fn: custom scale ``f(x)`` (``0 <= f <= 1``) of the cycle number or the iteration.
        scale_mode: ``'cycle'`` or ``'iterations'``: what ``scale_fn`` is given.
        cycle_momentum: cycle the momentum too (default True).
        base_momentum: lower momentum bound, float or per group (default 0.8).
        max_momentum: upper momentum bound, float or per group (default 0.9).
        last_epoch: index of the last batch (default -1: start).
    """

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | Sequence[float],
        max_lr: float | Sequence[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: Literal["triangular", "triangular2", "exp_range"] = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: Literal["cycle", "iterations"] = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.8,
        max_momentum: float | Sequence[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_ref: Callable[[float], float]
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m_m, b_m, group in zip(
                    self.max_momentums, self.base_momentums, optimizer.param_groups, strict=True
                ):
                    if self.use_beta1:
                        group["betas"] = (m_m, *group["betas"][1:])
                    else:
                        group["momentum"] = m_m
                    group["max_momentum"] = m_m
                    group["base_momentum"] = b_m
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        """The amplitude scale at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x: float) -> float:
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x: float) -> float:
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma: float, x: float) -> float:
        return gamma**x

    def get_lr(self) -> list[float]:
        """The lr of each group at iteration ``last_epoch`` (also sets the cycled momentum)."""
        _warn_get_lr_called_within_step(self)
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        where = cycle if self.scale_mode == "cycle" else self.last_epoch
        scale = self.scale_fn(where)
        lrs = [b + (m - b) * scale_factor * scale for b, m in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for b_m, m_m, group in zip(
                self.base_momentums, self.max_momentums, self.optimizer.param_groups, strict=True
            ):
                mom = m_m - (m_m - b_m) * scale_factor * scale
                if self.use_beta1:
                    group["betas"] = (mom, *group["betas"][1:])
                else:
                    group["momentum"] = mom
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The state, without the scale functions (a custom callable object's attributes are kept)."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state made by :meth:`state_dict` (a custom ``scale_fn`` stays this one's)."""
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom", None)
        super().load_state_dict(state_dict)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()
