"""Compatibility faces over the ferrograd engine.

``ferrograd.compat.v1`` speaks TensorFlow 1.x's static-graph vocabulary
(``import ferrograd.compat.v1 as tf``): placeholders, variables, sessions,
``tf.nn``, ``tf.train`` optimizers, ``Saver`` and summaries, all recorded
into ordinary ferrograd graphs.
"""

from __future__ import annotations

__all__ = ["v1"]


def __getattr__(name: str) -> object:
    # Imported on first use: `import ferrograd` stays as light as before.
    if name == "v1":
        from . import v1

        return v1
    raise AttributeError(f"module 'ferrograd.compat' has no attribute {name!r}")
