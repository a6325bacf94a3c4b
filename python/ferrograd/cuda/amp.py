"""``torch.cuda.amp``: PyTorch's deprecated spellings of :mod:`ferrograd.amp`'s CUDA scaler.

``fg.cuda.amp.GradScaler(...)`` is ``fg.amp.GradScaler("cuda", ...)`` and
``fg.cuda.amp.autocast(...)`` is ``fg.amp.autocast("cuda", ...)``; both warn
with a ``FutureWarning`` as PyTorch does. There is no CUDA, so the scaler
disables itself (with PyTorch's warning) and every call passes through.
"""

from __future__ import annotations

import warnings
from typing import Any

from .. import amp as _amp

__all__ = ["GradScaler", "autocast"]


class GradScaler(_amp.GradScaler):
    """``fg.amp.GradScaler("cuda", ...)``, under its deprecated name."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "fg.cuda.amp.GradScaler(args...) is deprecated: use fg.amp.GradScaler('cuda', args...)",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


class autocast(_amp.autocast):
    """``fg.amp.autocast("cuda", ...)``, under its deprecated name."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        warnings.warn(
            "fg.cuda.amp.autocast(args...) is deprecated: use fg.amp.autocast('cuda', args...)",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
