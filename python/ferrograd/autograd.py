"""Reverse-mode autodiff: ``grad``, ``backward`` and numerical gradient checks.

The graph and the engine live in Rust; this module only exposes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _core
from ._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

Tensor = _core.Tensor
Node = _core.Node
grad = _core.autograd_grad

__all__ = [
    "Node",
    "backward",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "is_grad_enabled",
    "no_grad",
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
            g = grad(o, x, _core.tensor(go.reshape(o.shape), dtype=o.dtype), retain_graph=True, allow_unused=True)[0]
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
