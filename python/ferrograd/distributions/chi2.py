"""The chi-squared distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _core
from . import constraints
from .gamma import Gamma
from .utils import broadcast_all

Tensor = _core.Tensor

__all__ = ["Chi2"]


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``
    (so ``rsample`` is reparameterised, as the gamma distribution's)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Tensor | float, validate_args: bool | None = None) -> None:
        (df_t,) = broadcast_all(df, who="Chi2")
        super().__init__(0.5 * df_t, _core.full_like(df_t, 0.5), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Chi2:
        """This distribution with ``df`` expanded to ``batch_shape``."""
        return super().expand(batch_shape, _instance)  # type: ignore[return-value]

    @property
    def df(self) -> Tensor:
        """The degrees of freedom (twice the gamma concentration)."""
        return self.concentration * 2
