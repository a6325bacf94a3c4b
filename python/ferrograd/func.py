"""Function transforms, as ``torch.func`` has them: ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``linearize``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap``, ``functional_call``
and ``stack_module_state`` (plus ferrograd's own ``value_and_grad`` and ``jacobian``).

All of them run on the reverse-mode engine. A transform's inputs become fresh leaves that
require grad; when an input already requires grad (it is being differentiated by an outer
transform or by ordinary autograd, with grad mode on), the transform keeps the link to
that outer graph and records its own backward (``create_graph``), so transforms nest:
``grad(grad(f))``, ``jacrev(jacrev(f))``, ``vmap(grad(f))``. A tensor that ``func``
captures from its closure (rather than receiving as an argument) is treated as a
constant by the transform; pass it as an argument to differentiate through it.

Arguments may be pytrees (tuples, lists and dicts, nested) of tensors; results take the
structure PyTorch gives. ``jacfwd`` and ``jvp`` are computed in reverse mode (one
backward pass per output element for a Jacobian; the double-vjp trick for ``jvp``): the
values are the same as forward mode's, the cost profile is not. ``vmap`` is in
:mod:`ferrograd._vmap`: it runs ``func`` once per slice and stacks the results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _core
from ._grad_mode import enable_grad
from ._vmap import _flatten, _unflatten, vmap
from .autograd import functional as _functional
from .nn.utils.stateless import functional_call

Tensor = _core.Tensor
_autograd_grad = _functional._autograd_grad

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jvp",
    "linearize",
    "stack_module_state",
    "value_and_grad",
    "vjp",
    "vmap",
]


def _argnums(fn: str, argnums: Any, nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(i, int) for i in nums):
        raise RuntimeError(f"{fn}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    out = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise RuntimeError(f"{fn}: got argnums={argnums!r} but only {nargs} positional inputs")
        out.append(i % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{fn}: argnums must be unique, got {argnums!r}")
    return tuple(out)


def _linked(leaves: list[Any]) -> bool:
    """Whether to record the transform's own backward: grad mode is on and an input is
    being differentiated from outside."""
    return _core.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in leaves)


def _leaves_of(fn: str, what: str, x: Any, differentiated: bool = True) -> tuple[list[Any], Any]:
    leaves, spec = _flatten(x)
    for t in leaves:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {what} must be a Tensor or a pytree of Tensors, found {type(t).__name__}")
        if differentiated and not t.dtype.is_floating_point:
            raise TypeError(
                f"{fn}: {what} must be floating point to be differentiated, got dtype {t.dtype} "
                f"and shape {tuple(t.shape)}"
            )
    return leaves, spec


def _track(leaves: list[Tensor], create: bool) -> list[Tensor]:
    return [x.view_as(x) if create and x.requires_grad else x.detach().requires_grad_(True) for x in leaves]


def _grads(outs: list[Tensor], xs: list[Tensor], vs: list[Tensor], create: bool) -> list[Tensor]:
    pairs = [(o, v) for o, v in zip(outs, vs, strict=True) if o.requires_grad]
    gs: list[Any] = (
        _autograd_grad(
            [o for o, _ in pairs],
            xs,
            grad_outputs=[v for _, v in pairs],
            retain_graph=True,
            create_graph=create,
            allow_unused=True,
        )
        if pairs
        else [None] * len(xs)
    )
    res = [g if g is not None else _core.zeros_like(x) for g, x in zip(gs, xs, strict=True)]
    return res if create else [g.detach() for g in res]


def _split_aux(fn: str, out: Any, has_aux: bool) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise RuntimeError(
            f"{fn}: with has_aux=True, func must return a tuple (output, aux), got {type(out).__name__}"
        )
    return out[0], out[1]


def _detach_tree(x: Any, create: bool) -> Any:
    if create:
        return x
    leaves, spec = _flatten(x)
    return _unflatten([t.detach() if isinstance(t, Tensor) else t for t in leaves], spec)


def _with_tracked(
    fn: str, args: tuple, nums: tuple[int, ...]
) -> tuple[list, list[list[Tensor]], list[Any], bool]:
    """``args`` with ``args[nums]`` replaced by tracked copies; the tracked leaves per
    argnum, their tree specs, and whether the transform records its backward."""
    xs = list(args)
    leaves_per, specs = [], []
    all_leaves: list[Any] = []
    for i in nums:
        leaves, spec = _leaves_of(fn, f"argument {i}", args[i])
        leaves_per.append(leaves)
        specs.append(spec)
        all_leaves += leaves
    create = _linked(all_leaves)
    for k, i in enumerate(nums):
        leaves_per[k] = _track(leaves_per[k], create)
        xs[i] = _unflatten(leaves_per[k], specs[k])
    return xs, leaves_per, specs, create


def grad_and_value(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable:
    """``torch.func.grad_and_value``: a function returning ``(grad, value)`` (with
    ``has_aux``: ``(grad, (value, aux))``). ``func`` must return a one-element tensor;
    ``grad`` has the structure of ``args[argnums]`` (a tuple over argnums when ``argnums``
    is a tuple)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums("grad_and_value", argnums, len(args))
        with enable_grad():
            xs, leaves_per, specs, create = _with_tracked("grad_and_value", args, nums)
            out, aux = _split_aux("grad_and_value", func(*xs, **kwargs), has_aux)
            if not isinstance(out, Tensor):
                raise RuntimeError(
                    f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out).__name__}"
                )
            if out.numel() != 1:
                raise RuntimeError(
                    "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with "
                    f"shape {tuple(out.shape)}. Maybe you wanted to use the vjp or jacrev APIs instead?"
                )
            flat = [x for leaves in leaves_per for x in leaves]
            gs = _grads([out], flat, [_core.ones_like(out)], create)
        per, k = [], 0
        for leaves, spec in zip(leaves_per, specs, strict=True):
            per.append(_unflatten(gs[k : k + len(leaves)], spec))
            k += len(leaves)
        g = per[0] if isinstance(argnums, int) else tuple(per)
        value = out if create else out.detach()
        if has_aux:
            return g, (value, _detach_tree(aux, create))
        return g, value

    return wrapped


def grad(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """``torch.func.grad``: a function returning the gradient of the one-element output of
    ``func`` with respect to ``args[argnums]`` (with ``has_aux``: ``(grad, aux)``)."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def value_and_grad(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable:
    """A function returning ``(func(*args), grad)`` (JAX's order; ``grad_and_value`` is
    PyTorch's)."""
    gv = grad_and_value(func, argnums)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        g, value = gv(*args, **kwargs)
        return value, g

    return wrapped


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple:
    """``torch.func.vjp``: ``(output, vjp_fn)`` (with ``has_aux``: ``(output, vjp_fn, aux)``).
    ``vjp_fn(cotangents)`` takes cotangents with the structure of ``output`` and returns a
    tuple with one entry per primal (each with that primal's structure); it may be called
    more than once. Several output cotangents may also be passed as separate arguments."""
    with enable_grad():
        xs, leaves_per, specs, create = _with_tracked("vjp", primals, tuple(range(len(primals))))
        out, aux = _split_aux("vjp", func(*xs), has_aux)
        outs, out_spec = _leaves_of("vjp", "the output of func", out, False)

    def vjp_fn(*cotangents: Any) -> tuple:
        ct = cotangents[0] if len(cotangents) == 1 else tuple(cotangents)
        vs, ct_spec = _flatten(ct)
        if len(vs) != len(outs) or (len(cotangents) == 1 and ct_spec != out_spec):
            raise RuntimeError(
                "vjp_fn: expected cotangents with the structure of the primal output "
                f"({len(outs)} tensors), got {len(vs)} values with a different structure"
            )
        for v, o in zip(vs, outs, strict=True):
            if not isinstance(v, Tensor) or tuple(v.shape) != tuple(o.shape):
                got = tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__
                raise RuntimeError(
                    f"vjp_fn: Mismatch in shape: cotangent has shape {got}, the output has shape {tuple(o.shape)}"
                )
        flat = [x for leaves in leaves_per for x in leaves]
        with enable_grad():
            gs = _grads(outs, flat, vs, create or _linked(vs))
        res, k = [], 0
        for leaves, spec in zip(leaves_per, specs, strict=True):
            res.append(_unflatten(gs[k : k + len(leaves)], spec))
            k += len(leaves)
        return tuple(res)

    output = _detach_tree(out, create)
    if has_aux:
        return output, vjp_fn, _detach_tree(aux, create)
    return output, vjp_fn


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, has_aux: bool = False) -> tuple:
    """``torch.func.jvp``: ``(func(*primals), J·tangents)`` (with ``has_aux``: a third entry,
    ``aux``). ``primals`` and ``tangents`` are tuples of the same structure; computed in
    reverse mode by the double-vjp trick (see :func:`ferrograd.autograd.functional.jvp`)."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to be tuples, got "
            f"{type(primals).__name__} and {type(tangents).__name__}"
        )
    p_leaves, p_spec = _leaves_of("jvp", "primals", primals)
    t_leaves, t_spec = _leaves_of("jvp", "tangents", tangents)
    if p_spec != t_spec:
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python structure"
        )
    for p, t in zip(p_leaves, t_leaves, strict=True):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape, "
                f"got {tuple(p.shape)} and {tuple(t.shape)}"
            )
    create = _linked(p_leaves + t_leaves)
    box: dict[str, Any] = {}

    def flat_f(*leaves: Tensor) -> tuple[Tensor, ...]:
        out, aux = _split_aux("jvp", func(*_unflatten(list(leaves), p_spec)), has_aux)
        outs, box["spec"] = _leaves_of("jvp", "the output of func", out, False)
        box["aux"] = aux
        return tuple(outs)

    outs, jv = _functional.jvp(flat_f, tuple(p_leaves), tuple(t_leaves), create_graph=create)
    output = _unflatten(list(outs), box["spec"])
    tangent_out = _unflatten(list(jv), box["spec"])
    if has_aux:
        return output, tangent_out, _detach_tree(box["aux"], create)
    return output, tangent_out


def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``torch.func.linearize``: ``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)``
    gives ``J·tangents``. Each ``jvp_fn`` call evaluates ``func`` again (no linearised
    graph is kept)."""
    output = jvp(func, primals, primals)[0]

    def jvp_fn(*tangents: Any) -> Any:
        return jvp(func, primals, tuple(tangents))[1]

    return output, jvp_fn


def _jac(fn: str, func: Callable[..., Any], argnums: Any, has_aux: bool) -> Callable:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums(fn, argnums, len(args))
        with enable_grad():
            xs, leaves_per, specs, create = _with_tracked(fn, args, nums)
            out, aux = _split_aux(fn, func(*xs, **kwargs), has_aux)
            outs, out_spec = _leaves_of(fn, "the output of func", out, False)
            flat = [x for leaves in leaves_per for x in leaves]
            jac = _functional._jacobian_of(tuple(outs), tuple(flat), create, False, fn)
        per_out = []
        for row in jac:
            row = row if create else [j.detach() for j in row]
            per, k = [], 0
            for leaves, spec in zip(leaves_per, specs, strict=True):
                per.append(_unflatten(row[k : k + len(leaves)], spec))
                k += len(leaves)
            per_out.append(per[0] if isinstance(argnums, int) else tuple(per))
        result = _unflatten(per_out, out_spec)
        if has_aux:
            return result, _detach_tree(aux, create)
        return result

    return wrapped


def jacrev(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
    _preallocate_and_copy: bool = False,
) -> Callable:
    """``torch.func.jacrev``: a function returning the Jacobian of ``func`` with respect to
    ``args[argnums]``: for each output leaf (in the output's structure) a tensor of shape
    ``out.shape + arg.shape`` (a tuple over argnums when ``argnums`` is a tuple; the
    argument's structure for a pytree argument). One backward pass per output element;
    ``chunk_size`` is accepted and changes nothing."""
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"jacrev: chunk_size should be a positive int or None, got {chunk_size!r}")
    return _jac("jacrev", func, argnums, has_aux)


def jacfwd(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
) -> Callable:
    """``torch.func.jacfwd``: the same Jacobian as :func:`jacrev` (and the same structure),
    computed in reverse mode. ``randomness`` is accepted and checked, nothing more: the
    Jacobian is taken from one evaluation of ``func``."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            f"jacfwd: Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}"
        )
    return _jac("jacfwd", func, argnums, has_aux)


def hessian(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable:
    """``torch.func.hessian``: the Jacobian of the Jacobian of ``func`` with respect to
    ``args[argnums]`` (shape ``out.shape + arg.shape + arg.shape``)."""
    return jacfwd(jacrev(func, argnums), argnums)


def jacobian(f: Callable[..., Tensor], *inputs: Tensor) -> Any:
    """ferrograd's Jacobian of ``f`` at ``inputs`` (shape ``out.shape + in.shape``): a tensor
    for one input, a tuple for several. ``jacrev`` is PyTorch's form."""
    jac = jacrev(f, argnums=0 if len(inputs) == 1 else tuple(range(len(inputs))))(*inputs)
    return jac


def stack_module_state(models: Any) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """``torch.func.stack_module_state``: ``(params, buffers)``, each a dict from name to the
    models' tensors stacked along a new leading dimension (parameters as new leaves that
    require grad when the originals do, buffers detached), for ``vmap`` over an ensemble
    with :func:`functional_call`."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not all(m.training == models[0].training for m in models):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kinds = {type(m) for m in models}
    if len(kinds) != 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    names = [n for n, _ in models[0].named_parameters()]
    params = {}
    for n in names:
        ps = [dict(m.named_parameters())[n] for m in models]
        params[n] = _core.stack([p.detach() for p in ps]).requires_grad_(ps[0].requires_grad)
    buffers = {
        n: _core.stack([dict(m.named_buffers())[n].detach() for m in models])
        for n, _ in models[0].named_buffers()
    }
    return params, buffers
