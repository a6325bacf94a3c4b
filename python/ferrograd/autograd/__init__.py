"""Reverse-mode autodiff: ``grad``, ``backward``, custom functions
(:class:`Function`), ``Variable`` and numerical gradient checks.

The graph and the engine live in Rust; this module only exposes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _capture, _core
from .._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

Tensor = _core.Tensor
Node = _core.Node
grad = _capture.backward_region(_core.autograd_grad)


def _queue_callback(callback: Callable[[], object]) -> None:
    """Run ``callback()`` once when the backward pass now running finishes.

    Call it from a gradient hook: the callback runs after every leaf's
    ``.grad`` of that backward is written (as PyTorch's
    ``Variable._execution_engine.queue_callback``). Callbacks run in the order
    queued; one may queue another. A backward that raises drops its queued
    callbacks. Outside a backward this raises ``RuntimeError``.
    """
    _core._queue_callback(callback)


__all__ = [
    "Function",
    "FunctionCtx",
    "Node",
    "Variable",
    "backward",
    "enable_grad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "is_grad_enabled",
    "no_grad",
    "once_differentiable",
    "profiler",
    "set_grad_enabled",
]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """Accumulate gradients of ``tensors`` (weighted by ``grad_tensors``) into the leaves."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors] * len(tensors)
    for i, (t, g) in enumerate(zip(tensors, grad_tensors, strict=True)):
        keep = True if i < len(tensors) - 1 else retain_graph
        t.backward(g, retain_graph=keep, create_graph=create_graph, inputs=inputs)


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, list | tuple) else (x,)


def _numeric_jacobian(fn: Callable, inputs: tuple, i: int, eps: float) -> list[np.ndarray]:
    """Central differences of every output with respect to input ``i`` (float64)."""
    x = inputs[i]
    base = np.array(x.detach().double().numpy(), copy=True)
    flat = base.reshape(-1)
    cols: list[list[np.ndarray]] = []
    for k in range(flat.size):
        outs = []
        for sign in (1.0, -1.0):
            pert = flat.copy()
            pert[k] += sign * eps
            xs = list(inputs)
            xs[i] = _core.tensor(pert.reshape(base.shape), dtype=x.dtype, requires_grad=x.requires_grad)
            outs.append([np.asarray(o.detach().double()).reshape(-1) for o in _as_tuple(fn(*xs))])
        cols.append([(p - m) / (2 * eps) for p, m in zip(outs[0], outs[1], strict=True)])
    n_out = len(cols[0]) if cols else len(_as_tuple(fn(*inputs)))
    jac = []
    for j in range(n_out):
        if cols:
            jac.append(np.stack([c[j] for c in cols], axis=1))
        else:
            out_j = _as_tuple(fn(*inputs))[j]
            jac.append(np.zeros((out_j.numel(), 0)))
    return jac


def _analytic_jacobian(fn: Callable, inputs: tuple, i: int) -> list[np.ndarray]:
    """Rows of d(output_j)/d(input_i) obtained by backpropagating unit vectors."""
    outs = _as_tuple(fn(*inputs))
    x = inputs[i]
    jac = []
    for o in outs:
        if not o.requires_grad:
            # Not connected to the graph: the output does not depend on any input
            # (e.g. the derivative of a linear map). A missing gradient still shows
            # up, as a mismatch against the finite differences.
            jac.append(np.zeros((o.numel(), x.numel())))
            continue
        rows = []
        for k in range(o.numel()):
            go = np.zeros(o.numel())
            go[k] = 1.0
            g = grad(
                o, x, _core.tensor(go.reshape(o.shape), dtype=o.dtype), retain_graph=True, allow_unused=True
            )[0]
            rows.append(np.zeros(x.numel()) if g is None else np.asarray(g.double()).reshape(-1))
        jac.append(np.stack(rows, axis=0) if rows else np.zeros((0, x.numel())))
    return jac


def gradcheck(
    fn: Callable[..., Any],
    inputs: Sequence[Tensor] | Tensor,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Compare backprop gradients of ``fn`` with central finite differences.

    Inputs should be float64 tensors; those with ``requires_grad=True`` are
    checked. Raises ``AssertionError`` naming the input and the worst entry
    on mismatch (or returns False when ``raise_exception=False``).
    """
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor) or not x.requires_grad:
            continue
        num = _numeric_jacobian(fn, inputs, i, eps)
        ana = _analytic_jacobian(fn, inputs, i)
        for j, (a, n) in enumerate(zip(ana, num, strict=True)):
            if not np.allclose(a, n, atol=atol, rtol=rtol):
                k = np.unravel_index(np.argmax(np.abs(a - n)), a.shape)
                msg = (
                    f"gradcheck: Jacobian mismatch for output {j} with respect to input {i} "
                    f"(shape {tuple(x.shape)}): analytic {a[k]:.8g} vs numerical {n[k]:.8g} at {k}"
                )
                if raise_exception:
                    raise AssertionError(msg)
                return False
    return True


def gradgradcheck(
    fn: Callable[..., Any],
    inputs: Sequence[Tensor] | Tensor,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    seed: int = 0,
) -> bool:
    """Check second derivatives: gradcheck of the map inputs → (∂⟨fn, v⟩/∂inputs)."""
    inputs = _as_tuple(inputs)
    rng = np.random.default_rng(seed)
    outs = _as_tuple(fn(*inputs))
    vs = [_core.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]

    def first(*xs):
        os_ = _as_tuple(fn(*xs))
        ds = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
        gs = grad(list(os_), ds, vs, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else _core.zeros_like(d) for g, d in zip(gs, ds, strict=True))

    if not diff:
        return True
    return gradcheck(first, inputs, eps=eps, atol=atol, rtol=rtol)


# --------------------------------------------------------------- Variable


class _VariableMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """PyTorch's legacy ``torch.autograd.Variable``: tensors and variables are one thing.

    ``Variable(t, requires_grad=False)`` returns a tensor sharing ``t``'s
    storage, without its history, that requires grad when asked (as
    ``t.detach().requires_grad_(requires_grad)``); other data (lists,
    numbers, arrays) is copied as by ``fg.tensor``. ``isinstance(x, Variable)``
    is true for every tensor. (``fg.Variable`` is a different thing: the
    variable of a static graph.)
    """

    def __new__(cls, data: Any = None, requires_grad: bool = False, volatile: bool = False) -> Any:  # type: ignore[misc]
        if volatile:
            import warnings

            warnings.warn(
                "Variable(volatile=True) has no effect: use `with ferrograd.no_grad():` instead",
                UserWarning,
                stacklevel=2,
            )
        return Tensor(data, requires_grad)


# ------------------------------------------------------- custom functions


class FunctionCtx:
    """The ``ctx`` a :class:`Function`'s ``forward`` and ``backward`` receive.

    ``forward`` stores what ``backward`` needs: tensors with
    :meth:`save_for_backward` (read back as ``ctx.saved_tensors``), anything
    else as plain attributes (``ctx.k = 3``). ``ctx.needs_input_grad`` has
    one bool per ``forward`` argument.
    """

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        #: One bool per argument of ``forward``: whether it is a tensor that requires grad.
        self.needs_input_grad = needs_input_grad
        self.to_save: tuple[Any, ...] = ()
        self._saved: tuple[Any, ...] | None = None
        self._dirty: tuple[Tensor, ...] = ()
        self._non_differentiable: tuple[Tensor, ...] = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save input or output tensors (or ``None``) for ``backward``.

        Saved tensors are checked when ``backward`` reads them: one written
        in place after ``forward`` raises instead of giving a wrong gradient.
        """
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, got {type(t).__name__}")
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to :meth:`save_for_backward` (in ``backward``)."""
        if self._saved is None:
            raise RuntimeError(
                "saved_tensors is available in backward() (after forward() called save_for_backward)"
            )
        return self._saved

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare inputs that ``forward`` modified in place (they must be returned as outputs)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Declare outputs that have no gradient (indices, masks): they do not
        require grad, and ``backward`` receives zeros for them."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With ``False``, ``backward`` receives ``None`` (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a :class:`Function`'s ``backward`` that is not differentiable
    itself: it runs with recording off, so its gradients have no history."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)

    return wrapper


class Function:
    """A custom differentiable operation, as ``torch.autograd.Function``::

        class Exp(fg.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, g):
                (y,) = ctx.saved_tensors
                return g * y

        y = Exp.apply(x)

    ``forward(ctx, *args)`` runs with recording off and returns a tensor or a
    tuple (non-tensor entries are passed through). ``backward(ctx, *grads)``
    gets one gradient per output and returns one per ``forward`` argument
    (``None`` for arguments that need none, which ``ctx.needs_input_grad``
    tells). ``backward`` runs in the engine's grad mode, so with
    ``create_graph=True`` its ops are recorded and higher-order gradients
    work. The PyTorch 2 split — ``forward(*args)`` without ``ctx`` plus a
    ``setup_context(ctx, inputs, output)`` staticmethod — works too.

    ``ctx.mark_dirty`` (inputs written in place and returned),
    ``ctx.mark_non_differentiable`` and ``ctx.set_materialize_grads`` behave
    as in PyTorch. Inside ``fg.compile``, a call that records a gradient
    raises ``TraceError`` (compile with ``fallback="eager"``, or under
    ``no_grad`` where only ``forward`` runs and is captured).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__}: custom autograd functions are not instantiated; call {type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        """Compute the outputs (override)."""
        raise NotImplementedError("a Function subclass must implement forward()")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        """Save what ``backward`` needs when ``forward`` takes no ``ctx`` (override; optional)."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """Gradients of the inputs given the gradients of the outputs (override)."""
        raise NotImplementedError("a Function subclass must implement backward()")

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` and record one node whose gradient is ``backward``."""
        name = cls.__name__ + "Backward"
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        split = cls.setup_context is not Function.setup_context
        with no_grad():
            if split:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(out, tuple)
        outs = list(out) if is_tuple else [out]
        inputs = [a for a in args if isinstance(a, Tensor)]
        records = is_grad_enabled() and any(t.requires_grad for t in inputs)
        dirty_ids = {id(t) for t in ctx._dirty}
        input_ids = {id(t) for t in inputs}
        for t in ctx._dirty:
            if id(t) not in input_ids:
                raise RuntimeError(
                    f"{cls.__name__}: mark_dirty() was given a tensor that is not an input of forward()"
                )
            if records and t.requires_grad and t.is_leaf:
                raise RuntimeError(
                    f"{cls.__name__}: a leaf tensor that requires grad is being used in an in-place operation "
                    "(mark_dirty)"
                )
        # Outputs: the tensors forward returned; an input returned as is (not
        # written in place), or a tensor that has a history of its own, is
        # replaced by an alias so that the node's history goes to a new tensor.
        out_pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor)]
        for k in out_pos:
            o = outs[k]
            if id(o) in dirty_ids:
                continue
            if id(o) in input_ids or o._autograd_id != 0:
                outs[k] = o.detach()
        returned = {id(outs[k]) for k in out_pos}
        for t in ctx._dirty:
            if id(t) not in returned:
                raise RuntimeError(f"{cls.__name__}: a tensor marked dirty must be returned by forward()")
        if not records:
            return tuple(outs) if is_tuple else outs[0]
        if _core._trace_recording():
            raise _core.TraceError(
                f"{cls.__name__}.apply: a custom autograd Function that records a gradient cannot be captured "
                "into a graph; compile with fallback='eager', or call it under no_grad"
            )
        out_tensors = [outs[k] for k in out_pos]
        non_diff = {id(t) for t in ctx._non_differentiable}
        out_meta = [(tuple(o.shape), o.dtype, o.device) for o in out_tensors]
        to_save = ctx.to_save
        ctx.to_save = ()
        saved = [t for t in to_save if t is not None]
        none_at = [i for i, t in enumerate(to_save) if t is None]
        out_index = {id(o): j for j, o in enumerate(out_tensors)}
        # A saved input that forward returned (replaced by an alias above) is
        # saved as the input; a saved output, as that output.
        saved_output = [
            None if id(t) in input_ids and id(t) not in dirty_ids else out_index.get(id(t)) for t in saved
        ]
        arg_tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        n_args = len(args)

        def rule(
            saved_vals: list[Tensor], grads: list[Tensor | None], engine_needs: list[bool]
        ) -> list[Tensor | None]:
            vals: list[Any] = list(saved_vals)
            for i in none_at:
                vals.insert(i, None)
            ctx._saved = tuple(vals)
            if ctx.materialize_grads:
                grads = [
                    g if g is not None else _core.zeros(shape, dtype=dt, device=dev)
                    for g, (shape, dt, dev) in zip(grads, out_meta, strict=True)
                ]
            res = cls.backward(ctx, *grads)
            res = list(res) if isinstance(res, tuple | list) else [res]
            while len(res) > n_args and res[-1] is None:
                res.pop()
            if len(res) != n_args:
                raise RuntimeError(
                    f"function {name} returned an incorrect number of gradients (expected {n_args}, got {len(res)})"
                )
            for i, g in enumerate(res):
                if g is not None and i not in arg_tensor_pos:
                    raise RuntimeError(
                        f"function {name} returned a gradient for argument {i}, which is not a tensor"
                    )
            return [res[i] for i in arg_tensor_pos]

        _core._record_function(
            name,
            rule,
            inputs,
            out_tensors,
            saved,
            saved_output,
            [id(o) in dirty_ids for o in out_tensors],
            [id(o) not in non_diff for o in out_tensors],
        )
        ctx._dirty = ctx._non_differentiable = ()
        return tuple(outs) if is_tuple else outs[0]


from . import functional, profiler  # noqa: E402 - torch.autograd.functional, torch.autograd.profiler
