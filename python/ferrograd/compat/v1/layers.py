"""``tf.layers``: dense, convolution, pooling, flatten and dropout layers as functions.

Each call makes its variables with :func:`get_variable` under a variable
scope named after the layer (``dense``, ``dense_1``, ... or ``name``), so
``reuse=True`` shares them as in TF.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _ops, nn
from ._framework import Tensor, _convert, _known
from ._variables import (
    GraphKeys,
    assign_sub,
    get_variable,
    ones_initializer,
    variable_scope,
    zeros_initializer,
)

__all__ = [
    "average_pooling2d",
    "batch_normalization",
    "conv2d",
    "conv2d_transpose",
    "dense",
    "dropout",
    "flatten",
    "max_pooling2d",
]


def _pair(v: Any) -> list[int]:
    if isinstance(v, (int, np.integer)):
        return [int(v), int(v)]
    return [int(d) for d in v]


def dense(
    inputs: Any,
    units: int,
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    kernel_regularizer: Any = None,
    bias_regularizer: Any = None,
    activity_regularizer: Any = None,
    kernel_constraint: Any = None,
    bias_constraint: Any = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """``activation(inputs @ kernel + bias)`` over the last dim of ``inputs``."""
    x = _convert(inputs)
    if x._shape is None or x._shape[-1] is None:
        raise ValueError("The last dimension of the inputs to `Dense` should be defined. Found `None`.")
    with variable_scope(name, default_name="dense", reuse=reuse):
        kernel = get_variable(
            "kernel",
            [x._shape[-1], int(units)],
            initializer=kernel_initializer,
            regularizer=kernel_regularizer,
            trainable=trainable,
        )
        y = (
            _ops.matmul(x, kernel)
            if len(x._shape) == 2
            else x._graph._apply(lambda a, k: a @ k, (x, kernel), "Tensordot")
        )
        if use_bias:
            bias = get_variable(
                "bias",
                [int(units)],
                initializer=bias_initializer or zeros_initializer(),
                regularizer=bias_regularizer,
                trainable=trainable,
            )
            y = nn.bias_add(y, bias)
        if activation is not None:
            y = activation(y)
    return y


def conv2d(
    inputs: Any,
    filters: int,
    kernel_size: Any,
    strides: Any = (1, 1),
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate: Any = (1, 1),
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    kernel_regularizer: Any = None,
    bias_regularizer: Any = None,
    activity_regularizer: Any = None,
    kernel_constraint: Any = None,
    bias_constraint: Any = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """A 2-D convolution layer over NHWC ``inputs`` (``padding`` ``'valid'`` or ``'same'``)."""
    x = _convert(inputs)
    cl = data_format == "channels_last"
    if x._shape is None:
        raise ValueError("conv2d: the rank of the inputs must be known")
    cin = x._shape[-1] if cl else x._shape[1]
    if cin is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
    k, s, d = _pair(kernel_size), _pair(strides), _pair(dilation_rate)
    with variable_scope(name, default_name="conv2d", reuse=reuse):
        kernel = get_variable(
            "kernel",
            [k[0], k[1], int(cin), int(filters)],
            initializer=kernel_initializer,
            regularizer=kernel_regularizer,
            trainable=trainable,
        )
        fmt = "NHWC" if cl else "NCHW"
        st = [1, s[0], s[1], 1] if cl else [1, 1, s[0], s[1]]
        dl = [1, d[0], d[1], 1] if cl else [1, 1, d[0], d[1]]
        y = nn.conv2d(
            x,
            kernel,
            strides=st if cl else [1, s[0], s[1], 1],
            padding=padding.upper(),
            data_format=fmt,
            dilations=dl if cl else [1, d[0], d[1], 1],
        )
        if use_bias:
            bias = get_variable(
                "bias",
                [int(filters)],
                initializer=bias_initializer or zeros_initializer(),
                regularizer=bias_regularizer,
                trainable=trainable,
            )
            y = nn.bias_add(y, bias, data_format=fmt)
        if activation is not None:
            y = activation(y)
    return y


def conv2d_transpose(
    inputs: Any,
    filters: int,
    kernel_size: Any,
    strides: Any = (1, 1),
    padding: str = "valid",
    data_format: str = "channels_last",
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    kernel_regularizer: Any = None,
    bias_regularizer: Any = None,
    activity_regularizer: Any = None,
    kernel_constraint: Any = None,
    bias_constraint: Any = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """A transposed 2-D convolution layer over NHWC ``inputs``: ``'valid'`` makes ``(in - 1) * stride
    + kernel``, ``'same'`` makes ``in * stride`` (a ``kernel`` ``[kh, kw, filters, in]`` and a ``bias``)."""
    x = _convert(inputs)
    if data_format != "channels_last":
        raise ValueError(
            f"conv2d_transpose: only data_format='channels_last' is supported, got {data_format!r}"
        )
    if x._shape is None or len(x._shape) != 4 or x._shape[3] is None:
        raise ValueError(
            f"conv2d_transpose: the inputs must be [batch, height, width, channels] with known channels, got {x._shape}"
        )
    if x._shape[1] is None or x._shape[2] is None:
        raise ValueError(f"conv2d_transpose: the spatial size of the inputs must be known, got {x._shape}")
    k, s = _pair(kernel_size), _pair(strides)
    same = padding.lower() == "same"
    oh, ow = (
        (x._shape[1] * s[0], x._shape[2] * s[1])
        if same
        else ((x._shape[1] - 1) * s[0] + k[0], (x._shape[2] - 1) * s[1] + k[1])
    )
    with variable_scope(name, default_name="conv2d_transpose", reuse=reuse):
        kernel = get_variable(
            "kernel",
            [k[0], k[1], int(filters), int(x._shape[3])],
            initializer=kernel_initializer,
            regularizer=kernel_regularizer,
            trainable=trainable,
        )
        y = nn.conv2d_transpose(
            x, kernel, [None, oh, ow, int(filters)], strides=[1, s[0], s[1], 1], padding=padding.upper()
        )
        if use_bias:
            bias = get_variable(
                "bias",
                [int(filters)],
                initializer=bias_initializer or zeros_initializer(),
                regularizer=bias_regularizer,
                trainable=trainable,
            )
            y = nn.bias_add(y, bias)
        if activation is not None:
            y = activation(y)
    return y


def _pool2d(
    kind: str, inputs: Any, pool_size: Any, strides: Any, padding: str, data_format: str, name: str | None
) -> Tensor:
    p, s = _pair(pool_size), _pair(strides)
    fmt = "NHWC" if data_format == "channels_last" else "NCHW"
    fn = nn.max_pool if kind == "max" else nn.avg_pool
    return fn(
        inputs,
        ksize=[1, p[0], p[1], 1],
        strides=[1, s[0], s[1], 1],
        padding=padding.upper(),
        data_format=fmt,
        name=name,
    )


def max_pooling2d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    """Max pooling over NHWC ``inputs``."""
    return _pool2d("max", inputs, pool_size, strides, padding, data_format, name)


def average_pooling2d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    """Average pooling over NHWC ``inputs``."""
    return _pool2d("avg", inputs, pool_size, strides, padding, data_format, name)


def flatten(inputs: Any, name: str | None = None, data_format: str = "channels_last") -> Tensor:
    """``inputs`` reshaped to ``[batch, -1]``."""
    x = _convert(inputs)
    if x._shape is None or any(d is None for d in x._shape[1:]):
        return _ops.reshape(x, [-1, int(np.prod([d or 1 for d in (x._shape or [1])[1:]]))], name=name)
    return _ops.reshape(x, [-1, int(np.prod(_known(x._shape[1:]), dtype=np.int64))], name=name or "flatten")


def dropout(
    inputs: Any,
    rate: float = 0.5,
    noise_shape: Any = None,
    seed: Any = None,
    training: Any = False,
    name: str | None = None,
) -> Tensor:
    """Dropout of ``rate`` when ``training`` (a bool or a bool tensor); the identity otherwise."""
    if isinstance(training, Tensor):
        dropped = nn.dropout(inputs, rate=rate, noise_shape=noise_shape)
        return _ops.where(training, dropped, inputs, name=name)
    if not training or rate == 0:
        return _ops.identity(inputs, name=name)
    return nn.dropout(inputs, rate=rate, noise_shape=noise_shape, name=name)


def batch_normalization(
    inputs: Any,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 1e-3,
    center: bool = True,
    scale: bool = True,
    beta_initializer: Any = None,
    gamma_initializer: Any = None,
    moving_mean_initializer: Any = None,
    moving_variance_initializer: Any = None,
    beta_regularizer: Any = None,
    gamma_regularizer: Any = None,
    beta_constraint: Any = None,
    gamma_constraint: Any = None,
    training: Any = False,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
    renorm: bool = False,
    renorm_clipping: Any = None,
    renorm_momentum: float = 0.99,
    fused: Any = None,
    virtual_batch_size: Any = None,
    adjustment: Any = None,
) -> Tensor:
    """Batch normalization over every dim but ``axis``: ``gamma * (x - mean) / sqrt(var + epsilon) + beta``.

    ``training`` (a bool or a bool tensor): the batch's mean and (biased)
    variance, and ops that move ``moving_mean``/``moving_variance`` toward
    them (``moving -= (moving - batch) * (1 - momentum)``), added to
    ``tf.GraphKeys.UPDATE_OPS`` — run them with the training op (for example
    under ``tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS))``),
    as in TF; otherwise the moving statistics. The variables ``gamma``,
    ``beta``, ``moving_mean`` and ``moving_variance`` live in the layer's scope
    (``batch_normalization``, ``batch_normalization_1``, ... or ``name``).
    """
    if renorm or virtual_batch_size is not None or adjustment is not None:
        raise NotImplementedError(
            "tf.layers.batch_normalization: renorm, virtual_batch_size and adjustment are not supported"
        )
    x = _convert(inputs)
    if x._shape is None:
        raise ValueError("batch_normalization: the rank of the inputs must be known")
    rank = len(x._shape)
    if not isinstance(axis, (int, np.integer)) or not -rank <= int(axis) < rank:
        raise ValueError(f"batch_normalization: axis {axis!r} is not one dim of {x.name} (rank {rank})")
    ax = int(axis) % rank
    c = x._shape[ax]
    if c is None:
        raise ValueError(f"batch_normalization: the size of axis {ax} of {x.name} must be known")
    reduce_axes = [i for i in range(rank) if i != ax]
    with variable_scope(name, default_name="batch_normalization", reuse=reuse):
        gamma = (
            get_variable(
                "gamma",
                [c],
                initializer=gamma_initializer or ones_initializer(),
                trainable=trainable,
                dtype=x.dtype,
            )
            if scale
            else None
        )
        beta = (
            get_variable(
                "beta",
                [c],
                initializer=beta_initializer or zeros_initializer(),
                trainable=trainable,
                dtype=x.dtype,
            )
            if center
            else None
        )
        moving_mean = get_variable(
            "moving_mean",
            [c],
            initializer=moving_mean_initializer or zeros_initializer(),
            trainable=False,
            dtype=x.dtype,
        )
        moving_var = get_variable(
            "moving_variance",
            [c],
            initializer=moving_variance_initializer or ones_initializer(),
            trainable=False,
            dtype=x.dtype,
        )

        def per_channel(v: Any) -> Any:
            if v is None or ax == rank - 1:
                return v
            return _ops.reshape(v, [c if i == ax else 1 for i in range(rank)])

        def normalize(mean: Any, var: Any) -> Tensor:
            return nn.batch_normalization(
                x, per_channel(mean), per_channel(var), per_channel(beta), per_channel(gamma), epsilon
            )

        if isinstance(training, (bool, np.bool_)) and not training:
            return normalize(moving_mean, moving_var)
        batch_mean, batch_var = nn.moments(x, reduce_axes)
        decay = 1.0 - float(momentum)
        if isinstance(training, (bool, np.bool_)):
            y = normalize(batch_mean, batch_var)
            rate: Any = decay
        else:
            flag = _convert(training)
            y = _ops.cond(
                flag, lambda: normalize(batch_mean, batch_var), lambda: normalize(moving_mean, moving_var)
            )
            rate = _ops.cast(flag, x.dtype) * decay  # the moving statistics stay when not training
        upd_mean = assign_sub(moving_mean, (moving_mean - _ops.stop_gradient(batch_mean)) * rate)
        upd_var = assign_sub(moving_var, (moving_var - _ops.stop_gradient(batch_var)) * rate)
    g = x._graph
    g.add_to_collection(GraphKeys.UPDATE_OPS, upd_mean)
    g.add_to_collection(GraphKeys.UPDATE_OPS, upd_var)
    return y
