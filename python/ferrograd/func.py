"""Functional transforms over the autograd engine: ``grad``, ``value_and_grad``, ``vjp``, ``jacobian``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _core
from .autograd import grad as _grad
from .nn.utils.stateless import functional_call

Tensor = _core.Tensor

__all__ = ["functional_call", "grad", "jacobian", "value_and_grad", "vjp"]


def _argnums(argnums: int | tuple[int, ...]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _prepare(args: tuple, nums: tuple[int, ...]) -> list:
    xs = list(args)
    for i in nums:
        x = xs[i]
        if not isinstance(x, Tensor):
            raise TypeError(f"func: argument {i} must be a Tensor, got {type(x).__name__}")
        xs[i] = x.detach().requires_grad_(True)
    return xs


def value_and_grad(f: Callable[..., Tensor], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """Return a function computing ``(f(*args), ∂f/∂args[argnums])``; ``f`` must return a scalar tensor."""
    nums = _argnums(argnums)

    def wrapped(*args: Any) -> tuple[Tensor, Any]:
        with _enable():
            xs = _prepare(args, nums)
            out = f(*xs)
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise ValueError("func.grad: f must return a one-element tensor")
            gs = _grad(out, [xs[i] for i in nums], allow_unused=True)
        gs = tuple(g if g is not None else _core.zeros_like(xs[i]) for g, i in zip(gs, nums, strict=True))
        return out.detach(), (gs[0] if isinstance(argnums, int) else gs)

    return wrapped


def grad(f: Callable[..., Tensor], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """Return a function computing the gradient of scalar ``f`` with respect to ``args[argnums]``."""
    vg = value_and_grad(f, argnums)
    return lambda *args: vg(*args)[1]


def vjp(f: Callable[..., Any], *primals: Tensor) -> tuple[Any, Callable[..., tuple]]:
    """Return ``(f(*primals), vjp_fn)`` where ``vjp_fn(v)`` gives ``vᵀ·J`` for each primal."""
    with _enable():
        xs = _prepare(primals, tuple(range(len(primals))))
        out = f(*xs)

    def vjp_fn(*cotangents: Tensor) -> tuple:
        outs = list(out) if isinstance(out, tuple | list) else [out]
        gs = _grad(outs, xs, list(cotangents), retain_graph=True, allow_unused=True)
        return tuple(g if g is not None else _core.zeros_like(x) for g, x in zip(gs, xs, strict=True))

    detached = tuple(o.detach() for o in out) if isinstance(out, tuple | list) else out.detach()
    return detached, vjp_fn


def jacobian(f: Callable[..., Tensor], *inputs: Tensor) -> Any:
    """The Jacobian of ``f`` at ``inputs`` (shape ``out.shape + in.shape``), one backward pass per output element."""
    with _enable():
        xs = _prepare(inputs, tuple(range(len(inputs))))
        out = f(*xs)
        flat = out.reshape(-1)
        rows: list[list[Tensor]] = [[] for _ in xs]
        for k in range(flat.numel()):
            gs = _grad(flat[k], xs, retain_graph=True, allow_unused=True)
            for j, (g, x) in enumerate(zip(gs, xs, strict=True)):
                rows[j].append((g if g is not None else _core.zeros_like(x)).detach())
    jacs = []
    for j, x in enumerate(xs):
        stacked = (
            _core.tensor([r.tolist() for r in rows[j]], dtype=x.dtype)
            if rows[j]
            else _core.zeros(0, *x.shape)
        )
        jacs.append(stacked.reshape(*out.shape, *x.shape))
    return jacs[0] if len(jacs) == 1 else tuple(jacs)


class _enable:
    def __enter__(self) -> None:
        self._prev = _core._set_grad_enabled(True)

    def __exit__(self, *exc: object) -> None:
        _core._set_grad_enabled(self._prev)
