# ruff: noqa: F401, A001, A004
"""TensorFlow 1.x's static-graph vocabulary over the ferrograd engine.

Change ``import tensorflow as tf`` to ``import ferrograd.compat.v1 as tf``
and a TF1 program — placeholders, variables, an optimizer's ``minimize``,
a ``Session`` loop with ``feed_dict``, a ``Saver``, summaries for
TensorBoard — runs on ferrograd::

    import ferrograd.compat.v1 as tf

    x = tf.placeholder(tf.float32, [None, 64])
    y_ = tf.placeholder(tf.float32, [None, 10])
    W = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, W) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=y))
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for xs, ys in batches:
            sess.run(train_step, feed_dict={x: xs, y_: ys})

Every TF op is recorded as ordinary ferrograd ops in a
:class:`ferrograd.Graph` (see :mod:`._framework` for how a graph that grows
after it ran is recorded again), so gradients, the graph passes and
TensorBoard work as for any graph. Differences from TensorFlow: variable
values are shared by every session of a graph; op-level ``seed=`` arguments
are ignored (``tf.set_random_seed`` seeds the one generator); unknown dims
at the same axis of different placeholders are taken to be equal (the
batch axis); ``tf.where`` needs ``x`` and ``y``.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator

from . import (
    app,
    contrib,
    errors,
    flags,
    gfile,
    layers,
    linalg,
    logging,
    losses,
    math,
    metrics,
    nn,
    random,
    summary,
    train,
)
from ._framework import (
    Dimension,
    DType,
    Graph,
    InteractiveSession,
    Operation,
    Session,
    Tensor,
    TensorShape,
    as_dtype,
    control_dependencies,
    float16,
    float32,
    float64,
    get_default_graph,
    get_default_session,
    int8,
    int16,
    int32,
    int64,
    name_scope,
    reset_default_graph,
    string,
    uint8,
)
from ._framework import bool_ as bool
from ._ops import (
    Print,
    abs,
    add,
    add_n,
    arg_max,
    arg_min,
    argmax,
    argmin,
    cast,
    ceil,
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    concat,
    cond,
    constant,
    convert_to_tensor,
    cos,
    count_nonzero,
    cumsum,
    diag_part,
    div,
    div_no_nan,
    divide,
    einsum,
    equal,
    exp,
    expand_dims,
    eye,
    fill,
    floor,
    floordiv,
    floormod,
    gather,
    gather_nd,
    global_norm,
    gradients,
    greater,
    greater_equal,
    group,
    identity,
    is_finite,
    is_inf,
    is_nan,
    less,
    less_equal,
    lin_space,
    linspace,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    matmul,
    matrix_determinant,
    matrix_diag_part,
    matrix_inverse,
    matrix_transpose,
    maximum,
    meshgrid,
    minimum,
    mod,
    mul,
    multinomial,
    multiply,
    neg,
    negative,
    no_op,
    norm,
    not_equal,
    one_hot,
    ones,
    ones_like,
    pack,
    pad,
    placeholder,
    placeholder_with_default,
    pow,
    random_normal,
    random_shuffle,
    random_uniform,
    range,
    rank,
    reciprocal,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    reshape,
    reverse,
    reverse_v2,
    round,
    rsqrt,
    scatter_nd,
    sequence_mask,
    set_random_seed,
    shape,
    sigmoid,
    sign,
    sin,
    size,
    slice,
    split,
    sqrt,
    square,
    squared_difference,
    squeeze,
    stack,
    stop_gradient,
    sub,
    subtract,
    tanh,
    tensordot,
    tile,
    to_float,
    to_int32,
    to_int64,
    trace,
    transpose,
    truediv,
    truncated_normal,
    unstack,
    where,
    while_loop,
    zeros,
    zeros_like,
)
from ._ops import tuple_ as tuple
from ._variables import (
    AUTO_REUSE,
    GraphKeys,
    Variable,
    VariableScope,
    all_variables,
    assign,
    assign_add,
    assign_sub,
    constant_initializer,
    get_variable,
    get_variable_scope,
    global_variables,
    global_variables_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    initialize_all_variables,
    initialize_local_variables,
    local_variables,
    local_variables_initializer,
    model_variables,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    tables_initializer,
    trainable_variables,
    truncated_normal_initializer,
    variable_scope,
    variables_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)

newaxis = None


@contextlib.contextmanager
def device(device_name: object) -> Iterator[None]:
    """Accepted and ignored: ops run on the CPU, as the engine places them."""
    yield


def add_to_collection(name: str, value: object) -> None:
    """Append ``value`` to the default graph's collection ``name``."""
    get_default_graph().add_to_collection(name, value)


def get_collection(key: str, scope: str | None = None) -> list:
    """A copy of the default graph's collection ``key``."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list:
    """The default graph's collection ``key`` itself."""
    return get_default_graph().get_collection_ref(key)


class ConfigProto:
    """Session options (accepted and ignored: ferrograd sizes its own thread pool)."""

    def __init__(self, **kwargs: object) -> None:
        self.__dict__.update(kwargs)


class GPUOptions(ConfigProto):
    """GPU options (accepted and ignored)."""


def disable_eager_execution() -> None:
    """Nothing to do: this module always builds graphs."""


def disable_v2_behavior() -> None:
    """Nothing to do: this module always has TF1's behaviour."""


def executing_eagerly() -> builtins.bool:
    """False: ops build graphs."""
    return False
