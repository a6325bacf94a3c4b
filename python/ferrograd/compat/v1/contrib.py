"""``tf.contrib``: the few ``contrib.layers`` names TF1 tutorials lean on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def l2_regularizer(scale: float, scope: str | None = None) -> Callable[[Any], Any]:
    """A function of a weight tensor: ``scale * sum(w²) / 2`` (``scale * tf.nn.l2_loss(w)``);
    with ``scale`` 0, one that returns None (no penalty)."""
    from . import nn

    s = _check_scale(scale, "l2_regularizer")
    if s == 0.0:
        return lambda weights: None
    return lambda weights: nn.l2_loss(weights) * s


def l1_regularizer(scale: float, scope: str | None = None) -> Callable[[Any], Any]:
    """A function of a weight tensor: ``scale * sum(|w|)``; with ``scale`` 0, one that returns None."""
    from . import _ops

    s = _check_scale(scale, "l1_regularizer")
    if s == 0.0:
        return lambda weights: None
    return lambda weights: _ops.reduce_sum(_ops.abs(weights)) * s


def _check_scale(scale: Any, what: str) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError(f"{what}: scale must be a number, got {scale!r}")
    if scale < 0:
        raise ValueError(f"{what}: setting a scale less than 0 on a regularizer: {scale}")
    return float(scale)


def apply_regularization(regularizer: Callable[[Any], Any], weights_list: Sequence[Any] | None = None) -> Any:
    """The sum of ``regularizer(w)`` over ``weights_list`` (the ``weights`` collection by default),
    added to the regularization losses collection."""
    from . import _ops
    from ._framework import get_default_graph

    g = get_default_graph()
    ws = list(weights_list) if weights_list is not None else g.get_collection(_variables.GraphKeys.WEIGHTS)
    if not ws:
        raise ValueError("apply_regularization: no weights to regularize")
    terms = [t for t in (regularizer(w) for w in ws) if t is not None]
    if not terms:
        return _ops.constant(0.0)
    total = _ops.add_n(terms)
    g.add_to_collection(_variables.GraphKeys.REGULARIZATION_LOSSES, total)
    return total


layers = SimpleNamespace(
    xavier_initializer=xavier_initializer,
    flatten=_layers.flatten,
    fully_connected=fully_connected,
    l1_regularizer=l1_regularizer,
    l2_regularizer=l2_regularizer,
    apply_regularization=apply_regularization,
)

__all__ = ["layers"]
