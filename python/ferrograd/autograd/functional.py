"""Higher-level derivatives of a Python function: ``jacobian``, ``hessian``, ``vjp``,
``jvp``, ``vhp`` and ``hvp``, with PyTorch's ``torch.autograd.functional`` signatures.

Each is built on the reverse-mode engine (:func:`ferrograd.autograd.grad`):

- ``vjp`` is one backward pass;
- ``jvp`` is the double-vjp trick: the vjp ``g(u) = u^T J`` is linear in ``u``, so
  the gradient of ``g(u) . v`` with respect to ``u`` is ``J v``;
- ``jacobian`` takes one backward pass per output element (PyTorch's default,
  ``vectorize=False``), ``hessian`` is the ``jacobian`` of the gradient;
- ``vhp`` and ``hvp`` differentiate ``grad f . v`` once more (they agree for every
  twice continuously differentiable ``f``, whose Hessian is symmetric).

``inputs`` is a tensor or a tuple of tensors, and results take the same structure:
a tensor where PyTorch gives a tensor, tuples (of tuples) where it gives tuples.
Results are detached unless ``create_graph=True``, in which case they can be
differentiated again. With ``strict=True`` an output that does not depend on an
input raises ``RuntimeError`` instead of giving zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _capture, _core
from .._grad_mode import enable_grad

Tensor = _core.Tensor
_autograd_grad = _capture.backward_region(_core.autograd_grad)

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _tuple(fn: str, arg: str, x: Any) -> tuple[bool, tuple[Tensor, ...]]:
    """``(was_tuple, x as a tuple of tensors)``, checking each element is a tensor."""
    is_tuple = isinstance(x, tuple | list)
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            where = f"{arg}[{i}]" if is_tuple else arg
            raise TypeError(f"autograd.functional.{fn}: {where} must be a Tensor, got {type(t).__name__}")
    return is_tuple, xs


def _prepare(xs: tuple[Tensor, ...], create_graph: bool) -> tuple[Tensor, ...]:
    """The inputs as the function will see them: fresh leaves requiring grad, or (with
    ``create_graph`` and an input that already requires grad) a view that keeps the
    link to the caller's graph, so the results can be differentiated further."""
    out = []
    for x in xs:
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _outputs(fn: str, out: Any) -> tuple[bool, tuple[Tensor, ...]]:
    is_tuple, outs = _tuple(fn, "the function's output", out)
    return is_tuple, outs


def _grads(
    outputs: tuple[Tensor, ...],
    inputs: tuple[Tensor, ...],
    grad_outputs: tuple[Tensor | None, ...],
    create_graph: bool,
    strict: bool,
    fn: str,
    independent: str = "the output is independent of input {i}",
) -> tuple[Tensor, ...]:
    """d(sum_i <outputs_i, grad_outputs_i>)/d inputs, zeros for an input nothing depends on
    (an error in ``strict`` mode, saying ``independent`` of input ``i``)."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs, strict=True) if o.requires_grad]
    if pairs:
        gs = _autograd_grad(
            [o for o, _ in pairs],
            list(inputs),
            grad_outputs=[g for _, g in pairs],
            retain_graph=True,
            create_graph=create_graph,
            allow_unused=True,
        )
    else:
        gs = [None] * len(inputs)
    result = []
    for i, (g, x) in enumerate(zip(gs, inputs, strict=True)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"autograd.functional.{fn}: {independent.format(i=i)}; this is not allowed in strict mode"
                )
            g = _core.zeros_like(x)
        result.append(g)
    return tuple(result)


def _finish(ts: tuple[Tensor, ...], create_graph: bool) -> tuple[Tensor, ...]:
    return ts if create_graph else tuple(t.detach() for t in ts)


def _shape_check(fn: str, what: str, v: Tensor, like: Tensor) -> None:
    if tuple(v.shape) != tuple(like.shape):
        raise RuntimeError(
            f"autograd.functional.{fn}: {what} has shape {tuple(v.shape)}, expected "
            f"{tuple(like.shape)} (the shape of the value it multiplies)"
        )


def _vectors(fn: str, v: Any, like: tuple[Tensor, ...], arg: str, scalar_ok: bool) -> tuple[Tensor, ...]:
    """The ``v`` argument as a tuple matching ``like``; ``None`` is allowed only when
    every ``like`` has one element (it then means 1)."""
    if v is None:
        if not (scalar_ok and all(t.numel() == 1 for t in like)):
            raise RuntimeError(
                f"autograd.functional.{fn}: v may be None only when the {arg} has a single element; pass v"
            )
        return tuple(_core.ones_like(t) for t in like)
    _, vs = _tuple(fn, "v", v)
    if len(vs) != len(like):
        raise RuntimeError(f"autograd.functional.{fn}: v has {len(vs)} tensors, the {arg} has {len(like)}")
    for a, b in zip(vs, like, strict=True):
        _shape_check(fn, "v", a, b)
    return vs


def vjp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    in_tuple, xs = _tuple("vjp", "inputs", inputs)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _outputs("vjp", func(*xs))
        vs = _vectors("vjp", v, outs, "output", scalar_ok=True)
        gs = _grads(outs, xs, vs, create_graph, strict, "vjp")
    outs, gs = _finish(outs, create_graph), _finish(gs, create_graph)
    return (outs if out_tuple else outs[0]), (gs if in_tuple else gs[0])


def jvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """``(func(*inputs), J v)``: the Jacobian-vector product at ``inputs``."""
    in_tuple, xs = _tuple("jvp", "inputs", inputs)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        vs = _vectors("jvp", v, xs, "input", scalar_ok=True)
        out_tuple, outs = _outputs("jvp", func(*xs))
        # u^T J is linear in u; its gradient with respect to u, taken along v, is J v.
        us = tuple(_core.zeros_like(o).requires_grad_(True) for o in outs)
        gs = _grads(outs, xs, us, True, strict, "jvp")
        res = _grads(gs, us, vs, create_graph, strict, "jvp", "output {i} is independent of the inputs")
    outs, jvs = _finish(outs, create_graph), _finish(tuple(res), create_graph)
    return (outs if out_tuple else outs[0]), (jvs if out_tuple else jvs[0])


def _jacobian_of(
    outs: tuple[Tensor, ...],
    xs: tuple[Tensor, ...],
    create_graph: bool,
    strict: bool,
    fn: str,
) -> list[list[Tensor]]:
    """``J[i][j]`` of shape ``outs[i].shape + xs[j].shape``, one backward pass per
    output element."""
    jac: list[list[Tensor]] = []
    for i, o in enumerate(outs):
        flat = o.reshape(-1)
        rows: list[list[Tensor]] = [[] for _ in xs]
        for k in range(flat.numel()):
            one = flat[k]
            if one.requires_grad:
                gs = _autograd_grad(
                    [one],
                    list(xs),
                    retain_graph=True,
                    create_graph=create_graph,
                    allow_unused=True,
                )
            else:
                gs = [None] * len(xs)
            for j, (g, x) in enumerate(zip(gs, xs, strict=True)):
                if g is None:
                    if strict:
                        raise RuntimeError(
                            f"autograd.functional.{fn}: output {i} is independent of input {j}; "
                            "this is not allowed in strict mode"
                        )
                    g = _core.zeros_like(x)
                rows[j].append(g)
        jac.append(
            [
                (_core.stack(r) if r else _core.zeros((0, *x.shape), dtype=x.dtype, device=x.device)).reshape(
                    *o.shape, *x.shape
                )
                for r, x in zip(rows, xs, strict=True)
            ]
        )
    return jac


def _shape_result(jac: list[list[Tensor]], out_tuple: bool, in_tuple: bool, create_graph: bool) -> Any:
    jac = [list(_finish(tuple(row), create_graph)) for row in jac]
    if out_tuple and in_tuple:
        return tuple(tuple(row) for row in jac)
    if out_tuple:
        return tuple(row[0] for row in jac)
    if in_tuple:
        return tuple(jac[0])
    return jac[0][0]


def jacobian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor of
    shape ``out_i.shape + in_j.shape``, arranged as PyTorch arranges it (a tensor, a tuple
    over inputs or outputs, or a tuple of tuples ``[i][j]``). ``vectorize`` is accepted
    and changes nothing; ``strategy`` may be ``"reverse-mode"`` or ``"forward-mode"``
    (both computed in reverse mode, with the same result)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(
            f"autograd.functional.jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}"
        )
    in_tuple, xs = _tuple("jacobian", "inputs", inputs)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _outputs("jacobian", func(*xs))
        jac = _jacobian_of(outs, xs, create_graph, strict, "jacobian")
    return _shape_result(jac, out_tuple, in_tuple, create_graph)


def _scalar(fn: str, out: Any) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(
            f"autograd.functional.{fn}: the function must return a Tensor, got {type(out).__name__}"
        )
    if out.numel() != 1:
        raise RuntimeError(
            f"autograd.functional.{fn}: the function must return a single-element tensor, "
            f"got shape {tuple(out.shape)}"
        )
    return out


def hessian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of the scalar function ``func`` at ``inputs``: ``in_i.shape + in_j.shape``
    for each pair, a tensor for a single input, a tuple of tuples ``[i][j]`` for several."""
    in_tuple, xs = _tuple("hessian", "inputs", inputs)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = _scalar("hessian", func(*xs))
        grads = _grads((out,), xs, (_core.ones_like(out),), True, strict, "hessian")
        grads = tuple(g.reshape(*x.shape) for g, x in zip(grads, xs, strict=True))
        jac = _jacobian_of(grads, xs, create_graph, strict, "hessian")
    return _shape_result(jac, in_tuple, in_tuple, create_graph)


def vhp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Tensor, Any]:
    """``(func(*inputs), v^T H)`` for the scalar function ``func``."""
    return _hessian_product("vhp", func, inputs, v, create_graph, strict)


def hvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Tensor, Any]:
    """``(func(*inputs), H v)`` for the scalar function ``func``."""
    return _hessian_product("hvp", func, inputs, v, create_graph, strict)


def _hessian_product(
    fn: str, func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool
) -> tuple[Tensor, Any]:
    in_tuple, xs = _tuple(fn, "inputs", inputs)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        vs = _vectors(fn, v, xs, "input", scalar_ok=True)
        out = _scalar(fn, func(*xs))
        grads = _grads((out,), xs, (_core.ones_like(out),), True, strict, fn)
        prods = _grads(grads, xs, vs, create_graph, strict, fn)
    (out,) = _finish((out,), create_graph)
    prods = _finish(prods, create_graph)
    return out, (prods if in_tuple else prods[0])
