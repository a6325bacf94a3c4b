"""``tf.losses``: the common losses, reduced to a scalar mean as TF1's defaults do."""

from __future__ import annotations

from typing import Any

from . import _ops, nn
from ._framework import Tensor, _convert, get_default_graph
from ._variables import GraphKeys

__all__ = [
    "get_regularization_loss",
    "get_total_loss",
    "log_loss",
    "mean_squared_error",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]


def _finish(per: Tensor, weights: Any, loss_collection: str | None) -> Tensor:
    if not (isinstance(weights, (int, float)) and float(weights) == 1.0):
        per = per * weights
    out = _ops.reduce_mean(per)
    if loss_collection:
        get_default_graph().add_to_collection(loss_collection, out)
    return out


def mean_squared_error(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    scope: Any = None,
    loss_collection: str = GraphKeys.LOSSES,
    reduction: Any = None,
) -> Tensor:
    """``mean((labels - predictions)²)``."""
    return _finish(_ops.squared_difference(_convert(predictions), labels), weights, loss_collection)


def log_loss(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    epsilon: float = 1e-7,
    scope: Any = None,
    loss_collection: str = GraphKeys.LOSSES,
    reduction: Any = None,
) -> Tensor:
    """The mean of ``-labels*log(p + eps) - (1 - labels)*log(1 - p + eps)``, ``p`` the predictions."""
    p = _convert(predictions)
    y = _convert(labels, p.dtype)
    per = -y * _ops.log(p + epsilon) - (1.0 - y) * _ops.log(1.0 - p + epsilon)
    return _finish(per, weights, loss_collection)


def softmax_cross_entropy(
    onehot_labels: Any,
    logits: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0,
    scope: Any = None,
    loss_collection: str = GraphKeys.LOSSES,
    reduction: Any = None,
) -> Tensor:
    """The mean softmax cross-entropy of one-hot labels (with optional label smoothing)."""
    lb = _convert(onehot_labels, None)
    if label_smoothing:
        n = lb._shape[-1] if lb._shape else None
        if n is None:
            raise ValueError("label_smoothing needs the number of classes known")
        lb = lb * (1.0 - label_smoothing) + label_smoothing / n
    return _finish(
        nn.softmax_cross_entropy_with_logits_v2(labels=_ops.stop_gradient(lb), logits=logits),
        weights,
        loss_collection,
    )


def sparse_softmax_cross_entropy(
    labels: Any,
    logits: Any,
    weights: Any = 1.0,
    scope: Any = None,
    loss_collection: str = GraphKeys.LOSSES,
    reduction: Any = None,
) -> Tensor:
    """The mean softmax cross-entropy of integer labels."""
    return _finish(
        nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), weights, loss_collection
    )


def sigmoid_cross_entropy(
    multi_class_labels: Any,
    logits: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0,
    scope: Any = None,
    loss_collection: str = GraphKeys.LOSSES,
    reduction: Any = None,
) -> Tensor:
    """The mean sigmoid cross-entropy."""
    z = _convert(multi_class_labels) if isinstance(multi_class_labels, Tensor) else multi_class_labels
    if label_smoothing:
        z = z * (1.0 - label_smoothing) + 0.5 * label_smoothing
    return _finish(nn.sigmoid_cross_entropy_with_logits(labels=z, logits=logits), weights, loss_collection)


def get_regularization_loss(scope: str | None = None, name: str = "total_regularization_loss") -> Tensor:
    """The sum of the regularization losses (0 when there are none)."""
    items = get_default_graph().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)
    return _ops.add_n(items, name=name) if items else _ops.constant(0.0, name=name)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss") -> Tensor:
    """The sum of the collected losses (and regularization losses)."""
    g = get_default_graph()
    items = g.get_collection(GraphKeys.LOSSES) + (
        g.get_collection(GraphKeys.REGULARIZATION_LOSSES) if add_regularization_losses else []
    )
    if not items:
        raise ValueError("No losses found in the graph")
    return _ops.add_n(items, name=name)
