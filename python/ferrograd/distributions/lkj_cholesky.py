"""The LKJ distribution over Cholesky factors of correlation matrices."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import _core
from .._grad_mode import no_grad
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all, tiny

Tensor = _core.Tensor

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ distribution (Lewandowski, Kurowicka and Joe, 2009) over the lower
    Cholesky factors ``L`` of ``dim x dim`` correlation matrices ``R = L L^T``, with
    density proportional to ``det(R)^(concentration - 1)`` on the correlation matrices
    (``concentration = 1``: uniform over them). As PyTorch, ``log_prob`` is the density
    with respect to the strictly-lower entries of ``L``, and ``sample`` uses the onion
    method (Beta-distributed squared row norms, uniform directions); there is no
    ``rsample``. Row ``k``'s squared norm is drawn from ``Beta(k / 2, ...)`` as the onion
    method has it (PyTorch 2.15 draws from ``Beta(k - 1/2, ...)``, which leaves the
    off-diagonal marginals of rows 2 and below wider than the LKJ law's).
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky  # type: ignore[assignment]

    def __init__(
        self, dim: int, concentration: Tensor | float = 1.0, validate_args: bool | None = None
    ) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 2:
            raise ValueError(f"LKJCholesky: expected dim to be an integer of at least 2, got {dim!r}")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration, who="LKJCholesky")
        batch = tuple(self.concentration.shape)
        super().__init__(batch, (dim, dim), validate_args=validate_args)
        self._beta = self._make_beta(self.concentration)

    def _make_beta(self, concentration: Tensor) -> Beta:
        # row k >= 1 of L: its squared off-diagonal norm is Beta(k / 2, c + (dim - 2) / 2 - (k - 1) / 2)
        # (the onion method; row 0 has no off-diagonal part and its draw is unused)
        dim = self.dim
        c = concentration
        marginal = c + 0.5 * (dim - 2)
        off = _core.tensor([0.0] + [float(k) for k in range(dim - 1)], dtype=c.dtype, device=c.device)
        return Beta(0.5 * off + 0.5, marginal.unsqueeze(-1) - 0.5 * off, validate_args=False)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LKJCholesky:
        """This distribution with ``concentration`` expanded to ``batch_shape``."""
        shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.dim = self.dim
        new.concentration = self.concentration.expand(*shape)
        new._beta = new._make_beta(new.concentration)
        Distribution.__init__(new, shape, (self.dim, self.dim), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Sequence[int] | int = ()) -> Tensor:
        with no_grad():
            shape = self._extended_shape(sample_shape)
            c = self.concentration
            y = self._beta.sample(sample_shape).unsqueeze(-1)  # S + B + (dim, 1)
            u = _core.randn(shape, dtype=c.dtype, device=c.device).tril(-1)
            norm = u.pow(2).sum(-1, keepdim=True).sqrt()
            first = _core.arange(self.dim, device=c.device) == 0  # row 0 has no off-diagonal part
            norm = _core.where(first.unsqueeze(-1), _core.ones_like(norm), norm)
            w = y.sqrt() * (u / norm)
            diag = (1 - w.pow(2).sum(-1)).clamp(min=tiny(c.dtype)).sqrt()
            return w + diag.diag_embed()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        dim, c = self.dim, self.concentration
        diag = value.diagonal(dim1=-2, dim2=-1).narrow(-1, 1, dim - 1)
        order = _core.tensor([float(dim - i) for i in range(2, dim + 1)], dtype=c.dtype, device=c.device)
        order = 2 * (c - 1).unsqueeze(-1) + order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = dim - 1
        alpha = c + 0.5 * dm1
        # log of the normaliser: multivariate lgamma over lgamma^(dim - 1), with pi factors
        mvlgamma: Any = 0.25 * dm1 * (dm1 - 1) * math.log(math.pi)
        for j in range(dm1):
            mvlgamma = mvlgamma + (alpha - 0.5 - 0.5 * j).lgamma()
        normalizer = 0.5 * dm1 * math.log(math.pi) + mvlgamma - dm1 * alpha.lgamma()
        return unnormalized - normalizer
