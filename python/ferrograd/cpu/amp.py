"""``torch.cpu.amp``: PyTorch's deprecated spellings of :mod:`ferrograd.amp` on the CPU.

``fg.cpu.amp.autocast(...)`` is ``fg.amp.autocast("cpu", ...)`` (bfloat16 by default) and
``fg.cpu.amp.GradScaler(...)`` is ``fg.amp.GradScaler("cpu", ...)``; both warn with a
``FutureWarning`` as PyTorch does.
"""

from __future__ import annotations

import warnings
from typing import Any

from .. import _core
from .. import amp as _amp

__all__ = ["GradScaler", "autocast"]


class autocast(_amp.autocast):
    """``fg.amp.autocast("cpu", ...)``, under its deprecated name."""

    def __init__(self, enabled: bool = True, dtype: Any = _core.bfloat16, cache_enabled: bool = True) -> None:
        warnings.warn(
            "fg.cpu.amp.autocast(args...) is deprecated: use fg.amp.autocast('cpu', args...)",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``fg.amp.GradScaler("cpu", ...)``, under its deprecated name."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "fg.cpu.amp.GradScaler(args...) is deprecated: use fg.amp.GradScaler('cpu', args...)",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
