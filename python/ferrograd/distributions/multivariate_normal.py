"""The multivariate normal distribution, parameterised by a Cholesky factor."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .distribution import Distribution
from .utils import broadcast_shapes

Tensor = _core.Tensor

__all__ = ["MultivariateNormal"]


def _tril_solve(tril: Tensor, rhs: Tensor) -> Tensor:
    """``L^{-1} b`` for lower-triangular ``L`` (``(..., n, n)``) and ``b``
    (``(..., n)``), batch dimensions broadcast; forward substitution composed
    of differentiable ops (``n`` small)."""
    n = int(tril.shape[-1])
    zs: list[Tensor] = []
    for i in range(n):
        acc = rhs.select(-1, i)
        if i:
            row = tril.select(-2, i).narrow(-1, 0, i)
            acc = acc - (row * _core.stack(zs, -1)).sum(-1)
        zs.append(acc / tril.select(-2, i).select(-1, i))
    return _core.stack(zs, -1)


def _batch_mahalanobis(tril: Tensor, diff: Tensor) -> Tensor:
    """``diff^T (L L^T)^{-1} diff`` over the last dimension, batch dimensions broadcast."""
    return _tril_solve(tril, diff).pow(2).sum(-1)


def _half_log_det(tril: Tensor) -> Tensor:
    return tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc`` and covariance ``L L^T``.

    Only the ``scale_tril=L`` parameterisation is supported (a lower-
    triangular factor with a positive diagonal): ``covariance_matrix`` and
    ``precision_matrix`` need a Cholesky factorisation, which ferrograd does
    not have yet, and raise ``NotImplementedError``. ``loc`` has shape
    ``batch_shape + (n,)``; ``scale_tril`` ``batch_shape + (n, n)`` (batch
    dimensions broadcast). ``rsample`` is reparameterised: ``loc + L eps``.
    Solves with ``L`` are composed forward substitutions, so ``log_prob``
    costs ``O(n)`` ops and suits small ``n``.
    """

    arg_constraints = {"loc": constraints.real_vector, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(loc, Tensor) or loc.ndim < 1:
            raise ValueError("MultivariateNormal: loc must be a Tensor of at least one dimension")
        given = [x is not None for x in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError(
                "MultivariateNormal: exactly one of covariance_matrix, precision_matrix or scale_tril may be specified"
            )
        if scale_tril is None:
            which = "covariance_matrix" if covariance_matrix is not None else "precision_matrix"
            raise NotImplementedError(
                f"MultivariateNormal: construction from {which} needs a Cholesky factorisation, which "
                "ferrograd does not provide yet; pass scale_tril= (the lower-triangular factor) instead"
            )
        if not isinstance(scale_tril, Tensor) or scale_tril.ndim < 2:
            raise ValueError(
                "MultivariateNormal: scale_tril must be a Tensor of at least two dimensions, with optional "
                "leading batch dimensions"
            )
        n = int(loc.shape[-1])
        if tuple(scale_tril.shape[-2:]) != (n, n):
            raise ValueError(
                f"MultivariateNormal: scale_tril of shape {tuple(scale_tril.shape)} does not match loc of shape "
                f"{tuple(loc.shape)}: expected trailing dimensions ({n}, {n})"
            )
        if scale_tril.dtype != loc.dtype:
            raise ValueError(
                f"MultivariateNormal: loc has dtype {loc.dtype} but scale_tril has dtype {scale_tril.dtype}"
            )
        batch = broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(loc.shape[:-1]))
        self.scale_tril = scale_tril.expand(*batch, n, n)
        self.loc = loc.expand(*batch, n)
        self._unbroadcasted_scale_tril = scale_tril
        super().__init__(batch, (n,), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> MultivariateNormal:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        n = self._event_shape[0]
        new = type(self).__new__(type(self))
        new.loc = self.loc.expand(*shape, n)
        new.scale_tril = self.scale_tril.expand(*shape, n, n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        Distribution.__init__(new, shape, (n,), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def covariance_matrix(self) -> Tensor:
        """``L L^T``."""
        tril = self._unbroadcasted_scale_tril
        cov = tril @ tril.transpose(-1, -2)
        return cov.expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @property
    def precision_matrix(self) -> Tensor:
        """``(L L^T)^{-1} = L^{-T} L^{-1}``."""
        tril = self._unbroadcasted_scale_tril
        n = self._event_shape[0]
        eye = _core.eye(n, dtype=tril.dtype, device=tril.device)
        # rows of `inv_t` are L^{-1} e_k, the columns of L^{-1}
        inv_t = _tril_solve(tril.unsqueeze(-3), eye)
        prec = inv_t @ inv_t.transpose(-1, -2)
        return prec.expand(*self._batch_shape, n, n)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _core.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        # L @ eps over the last dimension, broadcasting every batch dimension
        return self.loc + (self._unbroadcasted_scale_tril * eps.unsqueeze(-2)).sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n = self._event_shape[0]
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (n * math.log(2 * math.pi) + m) - _half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + _half_log_det(self._unbroadcasted_scale_tril)
        return h.expand(*self._batch_shape) if self._batch_shape else h
