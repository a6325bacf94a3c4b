"""``torch.backends.cudnn`` switches: accepted, no effect (ferrograd has no cuDNN)."""

from __future__ import annotations

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]

#: Accepted, no effect.
benchmark: bool = False
#: Accepted, no effect (``fg.use_deterministic_algorithms`` is ferrograd's switch).
deterministic: bool = False
#: Accepted, no effect.
enabled: bool = True
#: Accepted, no effect.
allow_tf32: bool = True


def is_available() -> bool:
    """False: there is no cuDNN."""
    return False


def version() -> None:
    """None: there is no cuDNN."""
    return None
