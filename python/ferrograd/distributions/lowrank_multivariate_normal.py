"""The multivariate normal distribution with a low-rank-plus-diagonal covariance."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core, linalg
from . import constraints
from .distribution import Distribution, lazy_property
from .multivariate_normal import _tril_solve
from .utils import broadcast_shapes

Tensor = _core.Tensor

__all__ = ["LowRankMultivariateNormal"]


class LowRankMultivariateNormal(Distribution):
    """The normal distribution on ``R^n`` with mean ``loc`` and covariance
    ``cov_factor @ cov_factor.T + diag(cov_diag)``, as
    ``torch.distributions.LowRankMultivariateNormal``: ``cov_factor`` has shape
    ``(..., n, m)`` (rank ``m``), ``cov_diag`` ``(..., n)``, positive.

    ``log_prob`` and ``entropy`` use the Woodbury identity and the matrix determinant
    lemma through the ``m x m`` capacitance ``I + W^T D^{-1} W`` (its Cholesky factor), so
    their cost is linear in ``n``; ``rsample`` is reparameterised:
    ``loc + W e_m + sqrt(D) e_n``.
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector  # type: ignore[assignment]
    has_rsample = True

    def __init__(
        self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor, validate_args: bool | None = None
    ) -> None:
        for name, t, nd in (("loc", loc, 1), ("cov_factor", cov_factor, 2), ("cov_diag", cov_diag, 1)):
            if not isinstance(t, Tensor) or t.ndim < nd:
                raise ValueError(
                    f"LowRankMultivariateNormal: {name} must be a Tensor of at least {nd} dimension(s), got "
                    f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}"
                )
        n = int(loc.shape[-1])
        if int(cov_factor.shape[-2]) != n:
            raise ValueError(
                f"LowRankMultivariateNormal: cov_factor of shape {tuple(cov_factor.shape)} does not match loc of "
                f"shape {tuple(loc.shape)}: expected cov_factor.shape[-2] == {n}"
            )
        if int(cov_diag.shape[-1]) != n:
            raise ValueError(
                f"LowRankMultivariateNormal: cov_diag of shape {tuple(cov_diag.shape)} does not match loc of "
                f"shape {tuple(loc.shape)}: expected cov_diag.shape[-1] == {n}"
            )
        if not (loc.dtype == cov_factor.dtype == cov_diag.dtype):
            raise ValueError(
                f"LowRankMultivariateNormal: loc, cov_factor and cov_diag must share a dtype, got "
                f"{loc.dtype}, {cov_factor.dtype} and {cov_diag.dtype}"
            )
        m = int(cov_factor.shape[-1])
        try:
            batch = broadcast_shapes(
                tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]), tuple(cov_diag.shape[:-1])
            )
        except ValueError:
            raise ValueError(
                f"LowRankMultivariateNormal: incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}"
            ) from None
        self.loc = loc.expand(*batch, n)
        self.cov_factor = cov_factor.expand(*batch, n, m)
        self.cov_diag = cov_diag.expand(*batch, n)
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(batch, (n,), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LowRankMultivariateNormal:
        """This distribution with its parameters expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        n, m = self.cov_factor.shape[-2:]
        new = type(self).__new__(type(self))
        new.loc = self.loc.expand(*shape, n)
        new.cov_factor = self.cov_factor.expand(*shape, n, m)
        new.cov_diag = self.cov_diag.expand(*shape, n)
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        Distribution.__init__(new, shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def _capacitance_tril(self) -> Tensor:
        """The Cholesky factor of ``I + W^T D^{-1} W`` (``m x m``, unbroadcast)."""
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        m = int(w.shape[-1])
        wt_dinv = w.transpose(-1, -2) / d.unsqueeze(-2)
        k = wt_dinv @ w + _core.eye(m, dtype=w.dtype, device=w.device)
        return linalg.cholesky(k)

    def _log_det(self) -> Tensor:
        """``log det(W W^T + D) = log det(capacitance) + sum log D``."""
        tril = self._capacitance_tril
        return 2 * tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + self._unbroadcasted_cov_diag.log().sum(-1)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        v = self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag
        return v.expand(*self._batch_shape, *self._event_shape)

    @property
    def covariance_matrix(self) -> Tensor:
        """``W W^T + diag(D)``."""
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        n = int(d.shape[-1])
        eye = _core.eye(n, dtype=d.dtype, device=d.device)
        cov = w @ w.transpose(-1, -2) + d.unsqueeze(-1) * eye
        return cov.expand(*self._batch_shape, n, n)

    @property
    def precision_matrix(self) -> Tensor:
        """The inverse of the covariance matrix."""
        return linalg.inv(self.covariance_matrix)

    @property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance matrix."""
        return linalg.cholesky(self.covariance_matrix)

    def rsample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        w = self._unbroadcasted_cov_factor
        m = int(w.shape[-1])
        eps_w = _core.randn(shape[:-1] + (m,), dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _core.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (w * eps_w.unsqueeze(-2)).sum(-1) + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n = self._event_shape[0]
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        diff = value - self.loc
        wt_dinv_diff = (w * (diff / d).unsqueeze(-1)).sum(-2)  # W^T D^{-1} x, (..., m)
        z = _tril_solve(self._capacitance_tril, wt_dinv_diff)
        maha = (diff.pow(2) / d).sum(-1) - z.pow(2).sum(-1)
        return -0.5 * (n * math.log(2 * math.pi) + maha + self._log_det())

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + 0.5 * self._log_det()
        return h.expand(*self._batch_shape) if self._batch_shape else h
