"""Neural-network building blocks (functional forms for now)."""

from . import functional

__all__ = ["functional"]
