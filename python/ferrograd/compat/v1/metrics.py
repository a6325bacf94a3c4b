"""``tf.metrics``: streaming metrics kept in local variables (run ``local_variables_initializer``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _ops
from ._framework import Tensor, _convert, float32, name_scope
from ._variables import GraphKeys, Variable, assign_add

__all__ = ["accuracy", "mean"]

METRIC_VARIABLES = "metric_variables"


def _local(name: str) -> Variable:
    return Variable(
        _ops.zeros([], float32),
        trainable=False,
        collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES],
        name=name,
    )


def mean(
    values: Any,
    weights: Any = None,
    metrics_collections: Sequence[str] | None = None,
    updates_collections: Sequence[str] | None = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """The running (weighted) mean of ``values``: ``(mean, update_op)``; the update adds a batch and
    returns the new mean. Its ``total`` and ``count`` are local variables."""
    with name_scope(name or "mean"):
        return _running_mean(values, weights)


def _running_mean(values: Any, weights: Any) -> tuple[Tensor, Tensor]:
    v = _ops.cast(_convert(values), float32)
    total, count = _local("total"), _local("count")
    if weights is None:
        batch_total, batch_count = _ops.reduce_sum(v), _ops.cast(_ops.size(v), float32)
    else:
        w = _ops.cast(_convert(weights), float32) * _ops.ones_like(v)
        batch_total, batch_count = _ops.reduce_sum(v * w), _ops.reduce_sum(w)
    update_total = assign_add(total, batch_total)
    update_count = assign_add(count, batch_count)
    value = _ops.div_no_nan(total, count, name="value")
    update = _ops.div_no_nan(update_total, update_count, name="update_op")
    return value, update


def accuracy(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Sequence[str] | None = None,
    updates_collections: Sequence[str] | None = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """How often ``predictions`` equal ``labels``, over every batch the update op has seen:
    ``(accuracy, update_op)``."""
    with name_scope(name or "accuracy"):
        p = _convert(predictions)
        lb = _ops.cast(_convert(labels), p.dtype)
        return _running_mean(_ops.cast(_ops.equal(p, lb), float32), weights)
