"""``tf.contrib``: the few ``contrib.layers`` names TF1 tutorials lean on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from . import _variables
from . import layers as _layers


def xavier_initializer(uniform: bool = True, seed: Any = None, dtype: Any = None) -> _variables.Initializer:
    """Glorot/Xavier: uniform in ``±sqrt(6 / (fan_in + fan_out))``, or a truncated normal."""
    return _variables.variance_scaling_initializer(
        1.0, "fan_avg", "uniform" if uniform else "truncated_normal", seed
    )


def fully_connected(
    inputs: Any, num_outputs: int, activation_fn: Any = "relu", scope: str | None = None, **kw: Any
) -> Any:
    """A dense layer with ReLU by default (``contrib.layers.fully_connected``)."""
    from . import nn

    act = nn.relu if activation_fn == "relu" else activation_fn
    return _layers.dense(inputs, num_outputs, activation=act, name=scope)


layers = SimpleNamespace(
    xavier_initializer=xavier_initializer, flatten=_layers.flatten, fully_connected=fully_connected
)

__all__ = ["layers"]
