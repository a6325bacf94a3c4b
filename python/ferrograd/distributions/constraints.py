"""Constraints: the sets parameters and samples of distributions live in.

``constraint.check(value)`` returns a boolean tensor, ``True`` where
``value`` satisfies the constraint (per event, for constraints with an
``event_dim``). As ``torch.distributions.constraints``, for the constraints
the distributions here use.
"""

from __future__ import annotations

from typing import Any

from .. import _core

Tensor = _core.Tensor

__all__ = [
    "Constraint",
    "boolean",
    "corr_cholesky",
    "dependent",
    "greater_than",
    "greater_than_eq",
    "half_open_interval",
    "independent",
    "integer_interval",
    "interval",
    "lower_cholesky",
    "nonnegative",
    "nonnegative_integer",
    "one_hot",
    "positive_integer",
    "positive",
    "real",
    "real_vector",
    "simplex",
    "unit_interval",
]


class Constraint:
    """A region of valid values; ``event_dim`` rightmost dimensions form one event."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Tensor) -> Tensor:
        """A boolean tensor: where ``value`` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__.lstrip("_") + "()"


def _is_integral(value: Tensor) -> Tensor:
    if value.dtype.is_floating_point:
        return value.remainder(1) == 0
    return _core.ones_like(value, dtype=_core.bool)


class _Dependent(Constraint):
    """A constraint that depends on other parameters; not checkable on its own."""

    def __init__(self, *, is_discrete: bool = False, event_dim: int = 0) -> None:
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def check(self, value: Tensor) -> Tensor:
        raise ValueError("cannot determine validity of dependent constraint")


class _Real(Constraint):
    def check(self, value: Tensor) -> Tensor:
        return value == value  # everything but NaN


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value: Tensor) -> Tensor:
        return (value == 0).logical_or(value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound: float) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Tensor) -> Tensor:
        return value > self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Tensor) -> Tensor:
        return value >= self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Tensor) -> Tensor:
        return (value >= self.lower_bound).logical_and(value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value: Tensor) -> Tensor:
        return (value >= self.lower_bound).logical_and(value < self.upper_bound)

    def __repr__(self) -> str:
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Tensor) -> Tensor:
        ok = _is_integral(value).logical_and(value >= self.lower_bound)
        return ok.logical_and(value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound: int) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Tensor) -> Tensor:
        return _is_integral(value).logical_and(value >= self.lower_bound)

    def __repr__(self) -> str:
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Independent(Constraint):
    """A base constraint with ``reinterpreted_batch_ndims`` more event dimensions."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int) -> None:
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value: Tensor) -> Tensor:
        ok = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if n:
            ok = ok.reshape(*ok.shape[: ok.ndim - n], -1).all(-1)
        return ok

    def __repr__(self) -> str:
        return f"Independent({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value: Tensor) -> Tensor:
        nonneg = (value >= 0).all(-1)
        total = value.sum(-1)
        return nonneg.logical_and((total - 1).abs() < 1e-6)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        lower = (value.tril() == value).reshape(*value.shape[:-2], -1).all(-1)
        pos = (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)
        return lower.logical_and(pos)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: lower triangular, positive
    diagonal, each row of unit Euclidean norm."""

    event_dim = 2

    def check(self, value: Tensor) -> Tensor:
        tol = 1e-6 if value.dtype == _core.float64 else 1e-4
        row_norm = value.pow(2).sum(-1).sqrt()
        unit = ((row_norm - 1).abs() <= tol * value.shape[-1]).all(-1)
        return _LowerCholesky().check(value).logical_and(unit)


class _OneHot(Constraint):
    """Vectors of 0s and 1s with exactly one 1."""

    is_discrete = True
    event_dim = 1

    def check(self, value: Tensor) -> Tensor:
        binary = ((value == 0).logical_or(value == 1)).all(-1)
        return binary.logical_and(value.sum(-1) == 1)


dependent = _Dependent()
boolean = _Boolean()
real = _Real()
real_vector = _Independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
nonnegative_integer = _IntegerGreaterThan(0)
simplex = _Simplex()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
one_hot = _OneHot()
positive_integer = _IntegerGreaterThan(1)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
interval = _Interval
half_open_interval = _HalfOpenInterval
integer_interval = _IntegerInterval
independent = _Independent
