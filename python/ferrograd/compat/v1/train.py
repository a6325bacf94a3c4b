"""``tf.train``: optimizers, the global step, ``Saver`` and checkpoint lookup.

An optimizer's update is graph ops: ``minimize`` records the gradients
(``tf.gradients``) and one op that updates every variable in place with
TF1's update rule (its slots — momentum, Adam's moments — are variables
too, saved by ``Saver`` and set by ``global_variables_initializer``).
Gradient descent, momentum and Adam record that update as one node of
ferrograd's fused multi-tensor optimizer kernels (the ones ``fg.optim``
uses) when their hyper-parameters are Python numbers; a hyper-parameter
given as a tensor (a decayed or fed learning rate), RMSProp and Adagrad
record TF1's rule as element-wise graph ops.
Checkpoints are safetensors files: ``saver.save(sess, "dir/model.ckpt")``
writes ``dir/model.ckpt.safetensors`` and a ``dir/checkpoint`` index in
TF's text format, so ``latest_checkpoint(dir)`` finds the newest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _capture, _core
from ..._grad_mode import no_grad
from . import _ops, _variables
from ._framework import (
    FailedPreconditionError,
    NotFoundError,
    Operation,
    Tensor,
    _convert,
    _Node,
    _release,
    float32,
    get_default_graph,
    int64,
)
from ._variables import GraphKeys, Variable

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "Optimizer",
    "RMSPropOptimizer",
    "Saver",
    "exponential_decay",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "latest_checkpoint",
]


# ----------------------------------------------------------------------------- global step


def get_global_step(graph: Any = None) -> Variable | None:
    """The graph's global step variable, if one was made."""
    g = graph or get_default_graph()
    steps = g.get_collection(GraphKeys.GLOBAL_STEP)
    if steps:
        return steps[0]
    for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES):
        if v.name == "global_step:0":
            return v
    return None


def create_global_step(graph: Any = None) -> Variable:
    """Make the global step: an int64 scalar variable ``global_step``, starting at 0, not trainable."""
    g = graph or get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError('"global_step" already exists.')
    with g.as_default():
        v = Variable(
            np.int64(0),
            trainable=False,
            name="global_step",
            collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP],
        )
    return v


def get_or_create_global_step(graph: Any = None) -> Variable:
    """The global step, made on first use."""
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)


def global_step(sess: Any, global_step_tensor: Any) -> int:
    """The value of the global step in ``sess``."""
    return int(sess.run(global_step_tensor))


def exponential_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    decay_rate: Any,
    staircase: bool = False,
    name: str | None = None,
) -> Tensor:
    """``learning_rate * decay_rate ** (global_step / decay_steps)`` (floored exponent with ``staircase``)."""
    step = _ops.cast(global_step, float32)
    p = step / float(decay_steps)
    if staircase:
        p = _ops.floor(p)
    return _ops.multiply(learning_rate, _ops.pow(float(decay_rate), p), name=name)


# ----------------------------------------------------------------------------- optimizers


class Optimizer:
    """The base of TF1's optimizers: ``minimize`` = ``compute_gradients`` + ``apply_gradients``."""

    GATE_NONE, GATE_OP, GATE_GRAPH = 0, 1, 2

    def __init__(self, use_locking: bool, name: str) -> None:
        self._name = name
        self._slots: dict[str, dict[int, Variable]] = {}

    def get_name(self) -> str:
        """The optimizer's name (the prefix of its slot variables)."""
        return self._name

    def compute_gradients(
        self,
        loss: Any,
        var_list: Sequence[Variable] | None = None,
        gate_gradients: int = 1,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        grad_loss: Any = None,
    ) -> list[tuple[Tensor | None, Variable]]:
        """``[(gradient, variable)]`` of ``loss`` for ``var_list`` (the trainable variables by default)."""
        vs = list(var_list) if var_list is not None else _variables.trainable_variables()
        if not vs:
            raise ValueError("No variables to optimize.")
        grads = _ops.gradients(loss, vs, grad_ys=grad_loss)
        return list(zip(grads, vs, strict=True))

    def _slot(self, var: Variable, slot: str, value: float) -> Variable:
        table = self._slots.setdefault(slot, {})
        if id(var) not in table:
            base = var.name.split(":")[0]
            g = var._graph
            with g.as_default(), g.name_scope(None):
                table[id(var)] = Variable(
                    _ops.fill(var._shape, np.asarray(value, dtype=var.dtype.as_numpy_dtype)),
                    trainable=False,
                    _absolute_name=g._unique(
                        f"{base}/{self._name}" + ("" if slot == "m" or slot == "accum" else f"_{slot}"),
                        scoped=False,
                    ),
                )
        return table[id(var)]

    def get_slot(self, var: Variable, name: str) -> Variable | None:
        """The slot ``name`` (e.g. ``"m"``, ``"v"``, ``"momentum"``) of ``var``."""
        return self._slots.get(name, {}).get(id(var))

    def get_slot_names(self) -> list[str]:
        """The names of the slots this optimizer keeps."""
        return sorted(self._slots)

    def variables(self) -> list[Variable]:
        """The optimizer's own variables (its slots and counters)."""
        return [v for t in self._slots.values() for v in t.values()]

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        """Extra variables and tensors the update reads (slots, hyper-parameters)."""
        return [], []

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        raise NotImplementedError

    def _fused(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> bool:
        """Record the update as one fused optimizer node if this optimizer and its
        hyper-parameters allow it; False (nothing recorded) otherwise."""
        return False

    def apply_gradients(
        self, grads_and_vars: Any, global_step: Any = None, name: str | None = None
    ) -> Operation:
        """An op applying the gradients to their variables (and adding 1 to ``global_step``)."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError(f"No gradients provided for any variable: {[v.name for _, v in grads_and_vars]}")
        for _, v in pairs:
            if not isinstance(v, Variable):
                raise TypeError(f"apply_gradients: {v!r} is not a tf.Variable")
        extra_vars, hyper = self._prepare(pairs)
        grads = [_convert(g) for g, _ in pairs]
        vars_ = [v for _, v in pairs]
        stores = [v._store for v in vars_]
        extra_stores = [v._store for v in extra_vars]
        step_store = global_step._store if isinstance(global_step, Variable) else None
        n_g, n_h = len(grads), len(hyper)

        def fn(*args: Any) -> Any:
            gs = args[:n_g]
            hs = args[n_g : n_g + n_h]
            first = _core._trace_num_nodes()
            with no_grad():
                if not (_fusable(gs, stores, hs) and self._fused(gs, stores, extra_stores, hs)):
                    self._update(gs, stores, extra_stores, hs)
                if step_store is not None:
                    step_store.add_(1)
            return tuple(_Node(i) for i in range(first, _core._trace_num_nodes()))

        g = vars_[0]._graph
        reads = list(vars_) + list(extra_vars) + ([global_step] if isinstance(global_step, Variable) else [])
        return g._apply(fn, (*grads, *hyper, *reads), "ApplyGradients", name or self._name)

    def minimize(
        self,
        loss: Any,
        global_step: Any = None,
        var_list: Sequence[Variable] | None = None,
        gate_gradients: int = 1,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        name: str | None = None,
        grad_loss: Any = None,
    ) -> Operation:
        """An op taking one step that lowers ``loss`` (``compute_gradients`` then ``apply_gradients``)."""
        gv = self.compute_gradients(loss, var_list=var_list, grad_loss=grad_loss)
        if all(g is None for g, _ in gv):
            raise ValueError(
                f"No gradients provided for any variable, check your graph for ops that do not support "
                f"gradients, between variables {[v.name for _, v in gv]} and loss {loss!r}."
            )
        return self.apply_gradients(gv, global_step=global_step, name=name)


def _hyper(v: Any) -> Any:
    return _convert(v) if isinstance(v, Tensor) else float(v)


def _fusable(grads: Sequence[Any], stores: Sequence[Any], hyper: Sequence[Any]) -> bool:
    """Whether an update may be one fused kernel node: recording, hyper-parameters
    that are numbers, floating variables, gradients of their shapes and dtypes."""
    if not _core._trace_recording() or not all(isinstance(h, float) for h in hyper):
        return False
    return all(
        w.dtype.is_floating_point and g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        for g, w in zip(grads, stores, strict=True)
    )


# The step count given to the fused Adam kernel: its bias corrections
# ``1 - beta ** step`` are then exactly 1, so it applies TF1's
# ``lr_t * m / (sqrt(v) + epsilon)`` with ``lr_t`` (from the beta-power
# variables) as its learning rate, read at every run.
_NO_BIAS_STEP = 2**31 - 1


class GradientDescentOptimizer(Optimizer):
    """``var -= learning_rate * grad``."""

    def __init__(self, learning_rate: Any, use_locking: bool = False, name: str = "GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        return [], [_hyper(self._lr)]

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        (lr,) = hyper
        for gr, w in zip(grads, stores, strict=True):
            w.sub_(gr * lr)

    def _fused(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> bool:
        (lr,) = hyper
        _core._sgd_step(list(stores), list(grads), [None] * len(stores), lr, 0.0, 0.0, False, 0.0, False)
        return True


class MomentumOptimizer(Optimizer):
    """``accum = momentum * accum + grad; var -= lr * accum`` (Nesterov: ``var -= lr * (grad + momentum * accum)``)."""

    def __init__(
        self,
        learning_rate: Any,
        momentum: Any,
        use_locking: bool = False,
        name: str = "Momentum",
        use_nesterov: bool = False,
    ) -> None:
        super().__init__(use_locking, name)
        self._lr, self._m, self._nesterov = learning_rate, momentum, use_nesterov

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        return [self._slot(v, "momentum", 0.0) for _, v in pairs], [_hyper(self._lr), _hyper(self._m)]

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        lr, m = hyper
        for gr, w, acc in zip(grads, stores, extra, strict=True):
            acc.mul_(m).add_(gr)
            if self._nesterov:
                w.sub_((gr + acc * m) * lr)
            else:
                w.sub_(acc * lr)

    def _fused(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> bool:
        lr, m = hyper
        if m <= 0.0:  # the kernel keeps no buffer without momentum; TF1 still sets accum
            return False
        # With every buffer given: accum = momentum * accum + grad; var -= lr * accum
        # (Nesterov: var -= lr * (grad + momentum * accum)), TF1's rule.
        _core._sgd_step(list(stores), list(grads), list(extra), lr, m, 0.0, self._nesterov, 0.0, False)
        return True


class AdamOptimizer(Optimizer):
    """TF1's Adam: ``lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)``, ``var -= lr_t * m / (sqrt(v) + epsilon)``."""

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-08,
        use_locking: bool = False,
        name: str = "Adam",
    ) -> None:
        super().__init__(use_locking, name)
        self._lr, self._b1, self._b2, self._eps = learning_rate, beta1, beta2, epsilon
        self._powers: dict[int, tuple[Variable, Variable]] = {}

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        g = pairs[0][1]._graph
        if id(g) not in self._powers:
            with g.as_default(), g.name_scope(None):
                b1p = Variable(
                    np.float32(self._b1),
                    trainable=False,
                    _absolute_name=g._unique("beta1_power", scoped=False),
                )
                b2p = Variable(
                    np.float32(self._b2),
                    trainable=False,
                    _absolute_name=g._unique("beta2_power", scoped=False),
                )
            self._powers[id(g)] = (b1p, b2p)
            self._slots.setdefault("beta_power", {})[id(b1p)] = b1p
            self._slots["beta_power"][id(b2p)] = b2p
        b1p, b2p = self._powers[id(g)]
        ms = [self._slot(v, "m", 0.0) for _, v in pairs]
        vs = [self._slot(v, "v", 0.0) for _, v in pairs]
        return [*ms, *vs, b1p, b2p], [_hyper(self._lr)]

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        (lr,) = hyper
        n = len(stores)
        ms, vs, (b1p, b2p) = extra[:n], extra[n : 2 * n], extra[2 * n :]
        b1, b2, eps = self._b1, self._b2, self._eps
        dt = stores[0].dtype  # TF1 casts the (float32) beta powers to the variables' dtype
        lr_t = ((1 - b2p.to(dt)).sqrt() / (1 - b1p.to(dt))) * lr
        for gr, w, m, v in zip(grads, stores, ms, vs, strict=True):
            m.mul_(b1).add_(gr * (1 - b1))
            v.mul_(b2).add_(gr * gr * (1 - b2))
            w.sub_(m * lr_t / (v.sqrt() + eps))
        b1p.mul_(b1)
        b2p.mul_(b2)

    def _fused(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> bool:
        (lr,) = hyper
        b1, b2 = float(self._b1), float(self._b2)
        st = _capture.current()
        if st is None or not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            return False
        if b1**_NO_BIAS_STEP != 0.0 or b2**_NO_BIAS_STEP != 0.0:
            return False  # betas this close to 1 keep a bias correction at any step count
        n = len(stores)
        ms, vs, (b1p, b2p) = extra[:n], extra[n : 2 * n], extra[2 * n :]

        def lr_t() -> float:
            # Read before each run: the beta powers as this step's update sees them.
            p1, p2 = float(b1p.item()), float(b2p.item())
            return lr * (1.0 - p2) ** 0.5 / (1.0 - p1)

        _core._adam_step(
            list(stores),
            list(grads),
            list(ms),
            list(vs),
            [],
            [_NO_BIAS_STEP] * n,
            lr,
            b1,
            b2,
            float(self._eps),
            0.0,
            False,
            False,
            False,
            dynamic=[("lr", None, st.slot(lr_t))],
        )
        b1p.mul_(b1)
        b2p.mul_(b2)
        return True


class RMSPropOptimizer(Optimizer):
    """TF1's RMSProp: ``ms = decay*ms + (1-decay)*g²; mom = momentum*mom + lr*g/sqrt(ms+eps); var -= mom`` (ms starts at 1)."""

    def __init__(
        self,
        learning_rate: Any,
        decay: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-10,
        use_locking: bool = False,
        centered: bool = False,
        name: str = "RMSProp",
    ) -> None:
        super().__init__(use_locking, name)
        self._lr, self._decay, self._mom, self._eps, self._centered = (
            learning_rate,
            decay,
            momentum,
            epsilon,
            centered,
        )

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        rms = [self._slot(v, "rms", 1.0) for _, v in pairs]
        mom = [self._slot(v, "momentum", 0.0) for _, v in pairs]
        mg = [self._slot(v, "mg", 0.0) for _, v in pairs] if self._centered else []
        return [*rms, *mom, *mg], [_hyper(self._lr)]

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        (lr,) = hyper
        n = len(stores)
        rms, mom = extra[:n], extra[n : 2 * n]
        mg = extra[2 * n :] if self._centered else [None] * n
        d, eps = self._decay, self._eps
        for gr, w, r, mo, gbar in zip(grads, stores, rms, mom, mg, strict=True):
            r.mul_(d).add_(gr * gr * (1 - d))
            denom = r
            if gbar is not None:
                gbar.mul_(d).add_(gr * (1 - d))
                denom = r - gbar * gbar
            mo.mul_(self._mom).add_(gr * lr / (denom + eps).sqrt())
            w.sub_(mo)


class AdagradOptimizer(Optimizer):
    """``accum += grad²; var -= lr * grad / sqrt(accum)`` (accum starts at ``initial_accumulator_value``)."""

    def __init__(
        self,
        learning_rate: Any,
        initial_accumulator_value: float = 0.1,
        use_locking: bool = False,
        name: str = "Adagrad",
    ) -> None:
        super().__init__(use_locking, name)
        self._lr, self._init = learning_rate, initial_accumulator_value

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        return [self._slot(v, "accum", self._init) for _, v in pairs], [_hyper(self._lr)]

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        (lr,) = hyper
        for gr, w, acc in zip(grads, stores, extra, strict=True):
            acc.add_(gr * gr)
            w.sub_(gr * lr / acc.sqrt())


class AdadeltaOptimizer(Optimizer):
    """TF1's Adadelta: ``accum = rho*accum + (1-rho)*g²``; ``update = sqrt(accum_update+eps) /
    sqrt(accum+eps) * g``; ``accum_update = rho*accum_update + (1-rho)*update²``; ``var -= lr*update``."""

    def __init__(
        self,
        learning_rate: Any = 0.001,
        rho: float = 0.95,
        epsilon: float = 1e-8,
        use_locking: bool = False,
        name: str = "Adadelta",
    ) -> None:
        super().__init__(use_locking, name)
        self._lr, self._rho, self._eps = learning_rate, rho, epsilon

    def _prepare(self, pairs: list[tuple[Any, Variable]]) -> tuple[list[Any], list[Any]]:
        acc = [self._slot(v, "accum", 0.0) for _, v in pairs]
        upd = [self._slot(v, "accum_update", 0.0) for _, v in pairs]
        return [*acc, *upd], [_hyper(self._lr)]

    def _update(
        self, grads: Sequence[Any], stores: Sequence[Any], extra: Sequence[Any], hyper: Sequence[Any]
    ) -> None:
        (lr,) = hyper
        n = len(stores)
        rho, eps = self._rho, self._eps
        for gr, w, acc, acc_upd in zip(grads, stores, extra[:n], extra[n:], strict=True):
            acc.mul_(rho).add_(gr * gr * (1 - rho))
            update = (acc_upd + eps).sqrt() / (acc + eps).sqrt() * gr
            acc_upd.mul_(rho).add_(update * update * (1 - rho))
            w.sub_(update * lr)


# ----------------------------------------------------------------------------- checkpoints


_SUFFIX = ".safetensors"


def _var_key(v: Variable) -> str:
    return v.name.split(":")[0]


class Saver:
    """Saves and restores variables: ``save(sess, "dir/model.ckpt", global_step=...)``, ``restore(sess, path)``.

    Each checkpoint is one safetensors file (``<prefix>.safetensors``) keyed
    by variable name; ``dir/checkpoint`` lists the newest ones in TF's text
    format (``max_to_keep`` of them are kept).
    """

    def __init__(
        self,
        var_list: Any = None,
        reshape: bool = False,
        sharded: bool = False,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000.0,
        name: str | None = None,
        restore_sequentially: bool = False,
        saver_def: Any = None,
        builder: Any = None,
        defer_build: bool = False,
        allow_empty: bool = False,
        write_version: Any = None,
        pad_step_number: bool = False,
        save_relative_paths: bool = False,
        filename: str | None = None,
    ) -> None:
        if var_list is None:
            var_list = _variables.global_variables()
        if isinstance(var_list, dict):
            self._vars = {str(k): v for k, v in var_list.items()}
        else:
            self._vars = {_var_key(v): v for v in var_list}
        if not self._vars and not allow_empty:
            raise ValueError("No variables to save")
        self._max_to_keep = max_to_keep
        self._kept: list[str] = []

    def save(
        self,
        sess: Any,
        save_path: str,
        global_step: Any = None,
        latest_filename: str | None = None,
        meta_graph_suffix: str = "meta",
        write_meta_graph: bool = True,
        write_state: bool = True,
        strip_default_attrs: bool = False,
        save_debug_info: bool = False,
    ) -> str:
        """Write the variables' values; returns the checkpoint prefix (``save_path[-step]``)."""
        from ...serialization import save as fg_save

        _release()  # variables are read directly: no capture may hold them
        prefix = os.fspath(save_path)
        if global_step is not None:
            step = int(sess.run(global_step)) if isinstance(global_step, Tensor) else int(global_step)
            prefix = f"{prefix}-{step}"
        for v in self._vars.values():
            if id(v) not in sess._initialized:
                raise FailedPreconditionError(
                    None, None, f"Attempting to save uninitialized variable {v.name}: initialize it first"
                )
        d = os.path.dirname(prefix) or "."
        os.makedirs(d, exist_ok=True)
        fg_save({k: v._store.detach().clone() for k, v in self._vars.items()}, prefix + _SUFFIX)
        if write_state:
            if prefix in self._kept:
                self._kept.remove(prefix)
            self._kept.append(prefix)
            if self._max_to_keep:
                while len(self._kept) > self._max_to_keep:
                    old = self._kept.pop(0)
                    if os.path.exists(old + _SUFFIX):
                        os.remove(old + _SUFFIX)
            _write_state(d, prefix, self._kept, latest_filename or "checkpoint")
        return prefix

    def restore(self, sess: Any, save_path: str) -> None:
        """Set the variables to the values saved at ``save_path`` (a prefix ``save`` returned)."""
        from ...serialization import load as fg_load

        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        _release()  # variables are written directly: no capture may hold them
        path = os.fspath(save_path)
        file = path if path.endswith(_SUFFIX) else path + _SUFFIX
        if not os.path.exists(file):
            raise NotFoundError(None, None, f"Failed to find any matching files for {path}")
        data = fg_load(file)
        for k, v in self._vars.items():
            if k not in data:
                raise NotFoundError(None, None, f"Key {k} not found in checkpoint {path}")
            t = data[k]
            if list(t.shape) != list(v._shape or []):
                raise ValueError(
                    f"Restoring {k}: the checkpoint has shape {tuple(t.shape)}, the variable {tuple(v._shape or [])}"
                )
            with no_grad():
                v._store.copy_(t.to(v.dtype._fg))
            sess._initialized.add(id(v))

    def last_checkpoints(self) -> list[str]:
        """The checkpoints this saver keeps, oldest first."""
        return list(self._kept)


def _write_state(directory: str, latest: str, kept: list[str], filename: str) -> None:
    def rel(p: str) -> str:
        return os.path.relpath(p, directory) if os.path.isabs(p) == os.path.isabs(directory) else p

    lines = [f'model_checkpoint_path: "{rel(latest)}"'] + [
        f'all_model_checkpoint_paths: "{rel(p)}"' for p in kept
    ]
    tmp = os.path.join(directory, filename + ".tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, os.path.join(directory, filename))


def latest_checkpoint(checkpoint_dir: str, latest_filename: str | None = None) -> str | None:
    """The prefix of the newest checkpoint in ``checkpoint_dir`` (from its ``checkpoint`` file), or None."""
    state = os.path.join(os.fspath(checkpoint_dir), latest_filename or "checkpoint")
    if not os.path.exists(state):
        return None
    with open(state) as f:
        m = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', f.read(), re.M)
    if m is None:
        return None
    p = m.group(1)
    full = p if os.path.isabs(p) else os.path.join(os.fspath(checkpoint_dir), p)
    return full if os.path.exists(full + _SUFFIX) else None


def checkpoint_exists(checkpoint_prefix: str) -> bool:
    """Whether a checkpoint was saved at ``checkpoint_prefix``."""
    return os.path.exists(os.fspath(checkpoint_prefix) + _SUFFIX)


del int64
