"""Variables, initializers and variable scopes in TF1's shape."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ... import _capture, _core
from ..._grad_mode import no_grad
from . import _ops
from ._framework import (
    DType,
    Graph,
    Operation,
    Tensor,
    TensorShape,
    _convert,
    _known,
    _last_node,
    _Node,
    _release,
    as_dtype,
    float32,
    get_default_graph,
    get_default_session,
)


class GraphKeys:
    """Names of the standard collections."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    SUMMARIES = "summaries"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"


def _record_var(g: Graph, store: Any, name: str) -> tuple[int, str]:
    def fn() -> Any:
        _core._trace_reference(store, name)
        return store

    t = g._apply(fn, (), "VariableV2", name, kind="variable", exact=True)
    return t._rec, t._record().name


class Variable(Tensor):
    """State kept across runs (``tf.Variable``): a tensor that ops read and assign.

    Its value lives outside any recording, so it survives the graph being
    recorded again; a session must run its :attr:`initializer` (or
    ``tf.global_variables_initializer()``) before a run reads it.
    """

    def __init__(
        self,
        initial_value: Any = None,
        trainable: bool = True,
        collections: Sequence[str] | None = None,
        validate_shape: bool = True,
        caching_device: Any = None,
        name: str | None = None,
        variable_def: Any = None,
        dtype: Any = None,
        expected_shape: Any = None,
        import_scope: Any = None,
        constraint: Any = None,
        use_resource: Any = None,
        synchronization: Any = None,
        aggregation: Any = None,
        shape: Any = None,
        _absolute_name: str | None = None,
    ) -> None:
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        g = get_default_graph()
        if callable(initial_value):
            initial_value = initial_value()
        init = (
            _convert(initial_value)
            if isinstance(initial_value, Tensor)
            else _ops.constant(initial_value, dtype)
        )
        if dtype is not None and as_dtype(dtype) != init.dtype:
            init = _ops.cast(init, dtype)
        if init._shape is None or any(d is None for d in init._shape):
            raise ValueError(
                f"initial_value must have a shape specified: {init!r} "
                "(a variable's shape must be known while the graph is built)"
            )
        dt = init.dtype
        with _capture.suspended():
            store = _core.zeros(tuple(_known(init._shape)), dtype=dt._fg)
            if trainable and dt.is_floating:
                store.requires_grad_(True)
        self._store = store
        self._trainable = bool(trainable)
        base = _absolute_name or g._unique(name or "Variable")
        rec, vname = _record_var(g, store, base)
        super().__init__(g, rec, 0, dt, list(init._shape))
        g._records[rec].outputs[0] = self
        self._initial_value = init
        self._initializer_op: Operation = g._apply(
            lambda v: _assign_node(store, "copy_", v), (init,), "Assign", vname + "/Assign", exact=True
        )
        g._records[self._initializer_op._rec].inits.append(self)  # type: ignore[index]
        for c in collections if collections is not None else [GraphKeys.GLOBAL_VARIABLES]:
            g.add_to_collection(c, self)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in (collections or []):
            g.add_to_collection(GraphKeys.TRAINABLE_VARIABLES, self)

    # -- TF1 surface -------------------------------------------------------

    @property
    def initializer(self) -> Operation:
        """The op that sets the variable to its initial value."""
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        """The tensor the initializer computes."""
        return self._initial_value

    @property
    def trainable(self) -> bool:
        """Whether optimizers train it by default."""
        return self._trainable

    def initialized_value(self) -> Tensor:
        """The variable's value (use it to initialize another variable from this one)."""
        return self

    def value(self) -> Tensor:
        """The variable as a tensor."""
        return self

    def read_value(self) -> Tensor:
        """The variable as a tensor."""
        return self

    def _as_graph_element(self) -> Tensor:
        return self

    def assign(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Any:
        """An op setting the variable to ``value``; fetching it gives the new value."""
        return assign(self, value, name=name)

    def assign_add(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Any:
        """An op adding ``delta`` to the variable."""
        return assign_add(self, delta, name=name)

    def assign_sub(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Any:
        """An op subtracting ``delta`` from the variable."""
        return assign_sub(self, delta, name=name)

    def load(self, value: Any, session: Any = None) -> None:
        """Set the variable's value now, without running an op."""
        _release()  # the variable is written directly: no capture may hold it
        arr = np.asarray(value, dtype=self.dtype.as_numpy_dtype)
        if list(arr.shape) != list(self._shape or []):
            raise ValueError(f"load: value of shape {arr.shape} for a variable of shape {self.shape}")
        with no_grad():
            self._store.copy_(_core.tensor(arr))
        sess = session or get_default_session()
        if sess is not None:
            sess._initialized.add(id(self))

    def __repr__(self) -> str:
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"


def _assign_node(store: Any, method: str, value: Any) -> tuple[Any, _Node]:
    with no_grad():
        getattr(store, method)(value)
    return store, _last_node()


def _check_var(ref: Any, what: str) -> Variable:
    if not isinstance(ref, Variable):
        raise TypeError(f"{what}: the first argument must be a tf.Variable, got {type(ref).__name__}")
    return ref


def assign(
    ref: Any, value: Any, validate_shape: Any = None, use_locking: Any = None, name: str | None = None
) -> Tensor:
    """An op setting ``ref`` to ``value``; fetching it runs it and gives the new value."""
    v = _check_var(ref, "assign")
    val = _convert(value) if isinstance(value, Tensor) else _ops.constant(value, v.dtype)
    if val._shape is not None and v._shape is not None and validate_shape is not False:
        if len(val._shape) != len(v._shape) or any(
            a is not None and a != b for a, b in zip(val._shape, v._shape, strict=True)
        ):
            raise ValueError(f"Shapes {v.shape} and {val.shape} are incompatible (assigning to {v.name})")
    store = v._store
    t = v._graph._apply(lambda x: _assign_node(store, "copy_", x), (val,), "Assign", name)
    t._record().inits.append(v)
    return t


def assign_add(ref: Any, value: Any, use_locking: Any = None, name: str | None = None) -> Tensor:
    """An op adding ``value`` to ``ref``."""
    v = _check_var(ref, "assign_add")
    val = _convert(value) if isinstance(value, Tensor) else _ops.constant(value, v.dtype)
    store = v._store
    return v._graph._apply(lambda _r, x: _assign_node(store, "add_", x), (v, val), "AssignAdd", name)


def assign_sub(ref: Any, value: Any, use_locking: Any = None, name: str | None = None) -> Tensor:
    """An op subtracting ``value`` from ``ref``."""
    v = _check_var(ref, "assign_sub")
    val = _convert(value) if isinstance(value, Tensor) else _ops.constant(value, v.dtype)
    store = v._store
    return v._graph._apply(lambda _r, x: _assign_node(store, "sub_", x), (v, val), "AssignSub", name)


# ----------------------------------------------------------------------------- collections of variables


def global_variables(scope: str | None = None) -> list[Variable]:
    """Every variable of the default graph (made with ``tf.Variable`` or ``get_variable``)."""
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope: str | None = None) -> list[Variable]:
    """The variables optimizers train by default."""
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope: str | None = None) -> list[Variable]:
    """Local variables (none are made by this module)."""
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope: str | None = None) -> list[Variable]:
    """Model variables (as collected by the program)."""
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list: Sequence[Variable], name: str = "init") -> Operation:
    """An op running the initializers of ``var_list``."""
    return _ops.group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation:
    """An op initializing every variable made so far."""
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer() -> Operation:
    """An op initializing the local variables."""
    return variables_initializer(local_variables(), name="init_1")


initialize_local_variables = local_variables_initializer


def tables_initializer(name: str = "init_all_tables") -> Operation:
    """An op that does nothing (there are no lookup tables)."""
    return _ops.no_op(name=name)


# ----------------------------------------------------------------------------- initializers


class Initializer:
    """Makes a variable's initial value: ``init(shape, dtype)`` is a tensor op."""

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        """The initializer's parameters."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class zeros_initializer(Initializer):  # noqa: N801 - TF's name
    """Zeros."""

    def __init__(self, dtype: Any = float32) -> None:
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return _ops.zeros(shape, dtype or self.dtype)


class ones_initializer(Initializer):  # noqa: N801
    """Ones."""

    def __init__(self, dtype: Any = float32) -> None:
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return _ops.ones(shape, dtype or self.dtype)


class constant_initializer(Initializer):  # noqa: N801
    """A constant (a number fills the shape; an array must match it)."""

    def __init__(self, value: Any = 0, dtype: Any = float32, verify_shape: bool = False) -> None:
        self.value = value
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        d = as_dtype(dtype or self.dtype)
        dims = _known(TensorShape(shape).as_list()) if not isinstance(shape, int) else [shape]
        arr = np.asarray(self.value, dtype=d.as_numpy_dtype)
        arr = np.full(dims, arr.item(), d.as_numpy_dtype) if arr.size == 1 else arr.reshape(dims)
        return _ops.constant(arr, d)


class random_normal_initializer(Initializer):  # noqa: N801
    """Samples of N(mean, stddev²)."""

    def __init__(
        self, mean: float = 0.0, stddev: float = 1.0, seed: Any = None, dtype: Any = float32
    ) -> None:
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, seed, as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return _ops.random_normal(shape, self.mean, self.stddev, dtype or self.dtype)


class truncated_normal_initializer(Initializer):  # noqa: N801
    """Samples of N(mean, stddev²) within two standard deviations."""

    def __init__(
        self, mean: float = 0.0, stddev: float = 1.0, seed: Any = None, dtype: Any = float32
    ) -> None:
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, seed, as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return _ops.truncated_normal(shape, self.mean, self.stddev, dtype or self.dtype)


class random_uniform_initializer(Initializer):  # noqa: N801
    """Uniform samples in ``[minval, maxval)``."""

    def __init__(
        self, minval: float = 0.0, maxval: float | None = None, seed: Any = None, dtype: Any = float32
    ) -> None:
        self.minval, self.maxval, self.seed, self.dtype = minval, maxval, seed, as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return _ops.random_uniform(shape, self.minval, self.maxval, dtype or self.dtype)


def _fans(dims: list[int]) -> tuple[float, float]:
    if not dims:
        return 1.0, 1.0
    if len(dims) == 1:
        return float(dims[0]), float(dims[0])
    receptive = float(np.prod(dims[:-2])) if len(dims) > 2 else 1.0
    return dims[-2] * receptive, dims[-1] * receptive


class variance_scaling_initializer(Initializer):  # noqa: N801
    """Samples scaled by the fan-in/fan-out of the shape (TF's ``VarianceScaling``)."""

    def __init__(
        self,
        scale: float = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: Any = None,
        dtype: Any = float32,
    ) -> None:
        if distribution == "normal":
            distribution = "truncated_normal"
        self.scale, self.mode, self.distribution, self.seed, self.dtype = (
            scale,
            mode,
            distribution,
            seed,
            as_dtype(dtype),
        )

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        dims = _known(TensorShape(shape).as_list())
        fan_in, fan_out = _fans(dims)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        s = self.scale / max(1.0, n)
        d = dtype or self.dtype
        if self.distribution == "uniform":
            lim = math.sqrt(3.0 * s)
            return _ops.random_uniform(dims, -lim, lim, d)
        if self.distribution == "untruncated_normal":
            return _ops.random_normal(dims, 0.0, math.sqrt(s), d)
        # The std of a normal truncated at two deviations is 0.8796 of the untruncated one.
        return _ops.truncated_normal(dims, 0.0, math.sqrt(s) / 0.87962566103423978, d)


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    """Uniform in ``±sqrt(6 / (fan_in + fan_out))`` (Xavier)."""

    def __init__(self, seed: Any = None, dtype: Any = float32) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Truncated normal with variance ``2 / (fan_in + fan_out)``."""

    def __init__(self, seed: Any = None, dtype: Any = float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


def he_normal(seed: Any = None) -> Initializer:
    """Truncated normal with variance ``2 / fan_in``."""
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed: Any = None) -> Initializer:
    """Uniform with variance ``2 / fan_in``."""
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


# ----------------------------------------------------------------------------- variable scopes


class _ReuseMode:
    def __repr__(self) -> str:
        return "tf.AUTO_REUSE"


AUTO_REUSE: Any = _ReuseMode()


class VariableScope:
    """A scope for :func:`get_variable` names, with its reuse flag and default initializer."""

    def __init__(self, reuse: Any, name: str = "", initializer: Any = None, dtype: Any = float32) -> None:
        self._name = name
        self._reuse = reuse
        self.initializer = initializer
        self.dtype = as_dtype(dtype)
        self.original_name_scope = name + "/" if name else ""

    @property
    def name(self) -> str:
        """The full scope name (``outer/inner``)."""
        return self._name

    @property
    def reuse(self) -> Any:
        """True, ``tf.AUTO_REUSE`` or False."""
        return self._reuse

    def reuse_variables(self) -> None:
        """Reuse the scope's variables from now on."""
        self._reuse = True

    def set_initializer(self, initializer: Any) -> None:
        """Set the default initializer of ``get_variable`` in this scope."""
        self.initializer = initializer


def get_variable_scope() -> VariableScope:
    """The current variable scope."""
    g = get_default_graph()
    if not g._var_scopes:
        g._var_scopes.append(VariableScope(False))
    return g._var_scopes[-1]


@contextlib.contextmanager
def variable_scope(
    name_or_scope: Any,
    default_name: str | None = None,
    values: Any = None,
    initializer: Any = None,
    regularizer: Any = None,
    caching_device: Any = None,
    partitioner: Any = None,
    custom_getter: Any = None,
    reuse: Any = None,
    dtype: Any = None,
    use_resource: Any = None,
    constraint: Any = None,
    auxiliary_name_scope: bool = True,
) -> Iterator[VariableScope]:
    """A scope prefixing :func:`get_variable` names (and op names); ``reuse=True`` shares its variables."""
    g = get_default_graph()
    parent = get_variable_scope()
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        base_name = full.rsplit("/", 1)[-1]
    else:
        base_name = name_or_scope
        if base_name is None:
            if default_name is None:
                raise TypeError("If default_name is None then name_or_scope is required")
            base_name = _unique_scope(g, parent.name, default_name)
        full = f"{parent.name}/{base_name}" if parent.name else base_name
    r = (
        reuse
        if reuse is not None
        else (name_or_scope.reuse if isinstance(name_or_scope, VariableScope) else None)
    )
    if parent.reuse is True and r is not AUTO_REUSE:
        r = True
    elif r is None:
        r = parent.reuse
    scope = VariableScope(
        r,
        full,
        initializer if initializer is not None else parent.initializer,
        dtype or parent.dtype,
    )
    g._var_scopes.append(scope)
    try:
        if isinstance(name_or_scope, VariableScope):
            with g.name_scope(full + "/"):
                yield scope
        else:
            with g.name_scope(base_name) as ns:
                scope.original_name_scope = ns
                yield scope
    finally:
        g._var_scopes.pop()


def _unique_scope(g: Graph, parent: str, base: str) -> str:
    used = getattr(g, "_scope_counts", None)
    if used is None:
        used = g._scope_counts = {}  # type: ignore[attr-defined]
    key = f"{parent}/{base}"
    n = used.get(key, 0)
    used[key] = n + 1
    return base if n == 0 else f"{base}_{n}"


def get_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Callable | None = None,
    trainable: bool | None = None,
    collections: Sequence[str] | None = None,
    caching_device: Any = None,
    partitioner: Any = None,
    validate_shape: bool = True,
    use_resource: Any = None,
    custom_getter: Any = None,
    constraint: Any = None,
    synchronization: Any = None,
    aggregation: Any = None,
) -> Variable:
    """The variable ``scope/name``: made (with ``initializer``, Glorot-uniform by default) or reused.

    Making one that exists, outside a ``reuse`` scope, raises ``ValueError``;
    so does reusing one that does not exist in a ``reuse=True`` scope.
    """
    g = get_default_graph()
    scope = get_variable_scope()
    full = f"{scope.name}/{name}" if scope.name else name
    found = g._vars_by_name.get(full)
    if found is not None:
        if scope.reuse is True or scope.reuse is AUTO_REUSE:
            if shape is not None and list(TensorShape(shape).as_list()) != list(found._shape or []):
                raise ValueError(
                    f"Trying to share variable {full}, but specified shape {TensorShape(shape)} and found "
                    f"shape {found.shape}."
                )
            return found
        raise ValueError(
            f"Variable {full} already exists, disallowed. Did you mean to set reuse=True or "
            "reuse=tf.AUTO_REUSE in VarScope?"
        )
    if scope.reuse is True:
        raise ValueError(
            f"Variable {full} does not exist, or was not created with tf.get_variable(). Did you mean "
            "to set reuse=tf.AUTO_REUSE in VarScope?"
        )
    d = as_dtype(dtype) if dtype is not None else scope.dtype
    init = initializer if initializer is not None else scope.initializer
    if isinstance(init, (Tensor, np.ndarray, list, float, int)) and not callable(init):
        value: Any = init
    else:
        if shape is None:
            raise ValueError(f"Shape of a new variable ({full}) must be fully defined, but instead was None.")
        dims = TensorShape(shape).as_list()
        if init is None:
            init = glorot_uniform_initializer() if d.is_floating else zeros_initializer()
        if isinstance(init, type):
            init = init()
        with g.name_scope(full + "/Initializer/"):
            value = init(dims, d)
    var = Variable(
        value,
        trainable=True if trainable is None else trainable,
        collections=collections,
        dtype=d,
        _absolute_name=full,
    )
    g._vars_by_name[full] = var
    if regularizer is not None:
        with g.name_scope(full + "/Regularizer/"):
            loss = regularizer(var)
        if loss is not None:
            g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return var


def is_dtype(x: Any) -> bool:
    """Whether ``x`` is a :class:`DType`."""
    return isinstance(x, DType)
