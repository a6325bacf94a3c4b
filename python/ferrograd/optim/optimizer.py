"""The optimizer base class: parameter groups, per-parameter state, state dicts.

Subclasses implement ``_update_group(group, params, grads, states)``, which
makes exactly one call into the Rust core for the whole group (a fused,
multi-tensor kernel updates every parameter and its state in place).
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from .. import _capture, _core
from .._grad_mode import enable_grad, no_grad

Tensor = _core.Tensor
ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]

__all__ = ["Optimizer", "ParamsT"]


class _ParamState(MutableMapping):
    """Per-parameter state keyed by the parameter tensor itself (by identity).

    Like ``collections.defaultdict(dict)``: reading a parameter that has no
    state yet inserts and returns an empty dict.
    """

    def __init__(self) -> None:
        self._d: dict[int, tuple[Tensor, dict[str, Any]]] = {}

    def __getitem__(self, p: Tensor) -> dict[str, Any]:
        entry = self._d.get(id(p))
        if entry is None:
            entry = self._d[id(p)] = (p, {})
        return entry[1]

    def __setitem__(self, p: Tensor, value: dict[str, Any]) -> None:
        self._d[id(p)] = (p, value)

    def __delitem__(self, p: Tensor) -> None:
        del self._d[id(p)]

    def __contains__(self, p: object) -> bool:
        return id(p) in self._d

    def __iter__(self) -> Iterator[Tensor]:
        return (p for p, _ in self._d.values())

    def __len__(self) -> int:
        return len(self._d)

    def get(self, p: Tensor, default: Any = None) -> Any:  # no insertion, unlike []
        entry = self._d.get(id(p))
        return default if entry is None else entry[1]

    def __repr__(self) -> str:
        return f"{{{', '.join(f'<param {tuple(p.shape)}>: {s!r}' for p, s in self._d.values())}}}"


def _is_tensor(x: object) -> bool:
    return isinstance(x, Tensor)


class Optimizer:
    """Base class of the optimizers.

    ``params`` is an iterable of tensors, or of dicts (parameter groups) each
    holding ``"params"`` and any per-group options; options a group leaves
    out come from ``defaults``. Hyperparameters are read from
    ``param_groups`` at every step, so changing ``group["lr"]`` (or a
    learning-rate scheduler doing so) takes effect at the next step.
    """

    #: Bumped when state tensors are replaced wholesale (load_state_dict, new groups).
    _state_version: int = 0

    #: Whether :meth:`load_state_dict` requires state tensors shaped like their
    #: parameter (False for optimizers keeping flattened or scalar state).
    _state_shaped_like_params: bool = True

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults: dict[str, Any] = dict(defaults)
        self.state: _ParamState = _ParamState()
        self.param_groups: list[dict[str, Any]] = []
        if _is_tensor(params):
            raise TypeError(
                f"{type(self).__name__}: params argument given to the optimizer should be an iterable "
                "of Tensors or dicts, but got a single Tensor"
            )
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ---------------------------------------------------------------- groups

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        """Check a group's hyperparameters; subclasses raise ``ValueError`` like PyTorch."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (with its own options) to optimize."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group.get("params")
        if params is None:
            raise ValueError("param_group must have a 'params' entry")
        if _is_tensor(params):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering "
                "of tensors in sets will change between runs; use a list instead"
            )
        else:
            params = list(params)
        for i, p in enumerate(params):
            if not _is_tensor(p):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but parameter {i} is a {type(p).__name__}"
                )
            if not p.dtype.is_floating_point:
                raise TypeError(
                    f"optimizer can only optimize floating-point Tensors, but parameter {i} has dtype {p.dtype}"
                )
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (parameter {i}, shape {tuple(p.shape)})")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError("a parameter group contains the same parameter more than once")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        group = {k: v for k, v in param_group.items() if k != "params"}
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self._validate_group(group)
        group["params"] = params
        self.param_groups.append(group)
        self._state_version += 1

    # ------------------------------------------------------------------ steps

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default) or zero in place."""
        if set_to_none:
            for group in self.param_groups:
                _core._zero_grads(group["params"])
            return
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.grad_fn is not None:
                    g.detach_()
                elif g.requires_grad:
                    g.requires_grad_(False)
                g.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; one Rust call per group.

        ``closure`` (optional) re-evaluates the model and returns the loss; it
        runs with gradients enabled before the update and its result is
        returned.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        table = self.state._d  # (the state mapping's own dict: one lookup per parameter)
        st = _capture.current()
        if st is None:
            self._step_groups(table)
            return loss
        # A captured step reads this optimizer's state tensors by reference,
        # and bakes in the options that are not per-run scalar slots; its ops
        # are marked as the optimizer region.
        st.guard(self, "_state_version")
        self._guard_options(st)
        if not any(o is self for o in st.optimizers):
            st.optimizers.append(self)
        with st.region("optimizer"):
            self._step_groups(table)
        return loss

    def _step_groups(self, table: dict) -> None:
        """The update of every group (``step`` without its closure)."""
        get = table.get
        with no_grad():
            for group in self.param_groups:
                params, grads, states = [], [], []
                for p in group["params"]:
                    g = p.grad
                    if g is not None:
                        params.append(p)
                        grads.append(g)
                        entry = get(id(p))
                        states.append(None if entry is None else entry[1])
                if not params:
                    continue
                new_states = self._update_group(group, params, grads, states)
                for p, st, old in zip(params, new_states, states, strict=True):
                    if st is not old:  # a state updated in place is in the table already
                        table[id(p)] = (p, st)

    # ------------------------------------------------------- graph capture

    #: Group options a captured step reads afresh at every run (scalar slots,
    #: see :meth:`_dynamic`): changing them takes effect without a retrace.
    _slot_options: frozenset[str] = frozenset()

    def _baked_options(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """What a captured step bakes in of a group's options, as
        ``{label: getter}``: every option this optimizer defines that is not
        a slot (``nesterov``, ``amsgrad``, ``maximize``...). Subclasses add
        facts about slot values that decide the step's structure (whether
        SGD's momentum is 0)."""
        return {f"[{k!r}]": (lambda g, k=k: g.get(k)) for k in self.defaults if k not in self._slot_options}

    def _guard_options(self, st: Any) -> None:
        """While capturing: retrace when a group is replaced or an option the
        step bakes in changes (``explain=True`` names it)."""
        name = type(self).__name__
        baked = self._baked_options()
        for gi, group in enumerate(self.param_groups):
            groups = self.param_groups
            st.guard_value(
                f"{name}.param_groups[{gi}]", lambda gs=groups, gi=gi: gs[gi] if gi < len(gs) else None
            )
            for label, get in baked.items():
                st.guard_value(f"{name}.param_groups[{gi}]{label}", lambda g=group, get=get: get(g))

    @staticmethod
    def _zeros_like(p: Tensor) -> Tensor:
        """A zero state tensor shaped like ``p`` (real, also while a graph is captured)."""
        with _capture.suspended():
            return _core.zeros_like(p)

    @staticmethod
    def _dynamic(group: dict[str, Any], getters: dict[str, Callable[[dict[str, Any]], float]]) -> list | None:
        """While capturing a graph: the ``dynamic=`` argument making the named
        hyperparameters graph inputs read from ``group`` at every run (a
        scheduler's changes take effect); None when not capturing."""
        st = _capture.current()
        if st is None or not _capture.is_capturing():
            return None
        return [(name, None, st.slot(lambda g=group, f=f: f(g))) for name, f in getters.items()]

    @staticmethod
    def _after_run(fn: Callable[[], None]) -> bool:
        """While capturing, run ``fn`` after each run of the graph instead of now."""
        st = _capture.current()
        if st is None or not _capture.is_capturing():
            return False
        st.after_run.append(fn)
        return True

    def _update_group(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        grads: list[Tensor],
        states: list[dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        """Update one group in one Rust call; return the parameters' new state dicts.

        ``states[i]`` is None for a parameter without state yet. Implementations
        build new state (fresh tensors where needed) without touching
        ``self.state``, so a refused call leaves the optimizer as it was.
        """
        raise NotImplementedError

    # ------------------------------------------------------------ state dicts

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's layout.

        ``{"state": {index: {name: value}}, "param_groups": [{option: value,
        "params": [index, ...]}]}``: parameters are numbered in group order;
        ``"step"`` is a Python int. State tensors are the optimizer's own
        (not copies), as in PyTorch.
        """
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state._d.values() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a state dict made by :meth:`state_dict` (from this or another optimizer).

        Everything is checked before anything changes: the number of groups
        and of parameters per group, that each state entry names a known
        parameter, that state tensors have their parameter's shape, and the
        groups' hyperparameters. State tensors are copied (cast to the
        parameter's dtype); ``"step"`` may be an int, a float or a
        one-element tensor.
        """
        if (
            not isinstance(state_dict, Mapping)
            or "state" not in state_dict
            or "param_groups" not in state_dict
        ):
            raise ValueError("optimizer state dict must be a mapping with 'state' and 'param_groups' entries")
        saved_groups = state_dict["param_groups"]
        saved_state = state_dict["state"]
        if not isinstance(saved_state, Mapping):
            raise ValueError("optimizer state dict: 'state' must be a mapping from parameter index to dict")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups, "
                f"but the optimizer has {len(self.param_groups)}"
            )
        id_map: dict[Any, Tensor] = {}
        for gi, (g, sg) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            if not isinstance(sg, Mapping) or "params" not in sg:
                raise ValueError(f"loaded parameter group {gi} must be a dict with a 'params' entry")
            if len(sg["params"]) != len(g["params"]):
                raise ValueError(
                    f"loaded parameter group {gi} has {len(sg['params'])} parameters, "
                    f"but the optimizer's group {gi} has {len(g['params'])}"
                )
            for k, p in zip(sg["params"], g["params"], strict=True):
                id_map[k] = p
        new_groups = []
        for gi, (g, sg) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            ng = {k: (v if _is_tensor(v) else copy.deepcopy(v)) for k, v in sg.items() if k != "params"}
            for k, v in self.defaults.items():
                ng.setdefault(k, v)
            try:
                self._validate_group(ng)
            except (TypeError, ValueError) as e:
                raise ValueError(f"loaded parameter group {gi}: {e}") from None
            ng["params"] = g["params"]
            new_groups.append(ng)
        checked: list[tuple[Tensor, dict[str, Any]]] = []
        for k, st in saved_state.items():
            if k not in id_map:
                raise ValueError(
                    f"loaded state refers to parameter {k!r}, which no loaded parameter group lists"
                )
            if not isinstance(st, Mapping):
                raise ValueError(f"loaded state of parameter {k!r} must be a dict, got {type(st).__name__}")
            p = id_map[k]
            for name, v in st.items():
                if name == "step":
                    _step_value(k, v)
                elif self._state_shaped_like_params and _is_tensor(v) and tuple(v.shape) != tuple(p.shape):
                    raise ValueError(
                        f"loaded state '{name}' of parameter {k!r} has shape {tuple(v.shape)}, "
                        f"but the parameter has shape {tuple(p.shape)}"
                    )
                elif _is_tensor(v) and not v.dtype.is_floating_point:
                    raise TypeError(
                        f"loaded state '{name}' of parameter {k!r} has dtype {v.dtype}; expected a floating dtype"
                    )
            checked.append((p, st))
        # Everything checked: build the new state, then swap it in.
        new_state = _ParamState()
        for p, st in checked:
            d: dict[str, Any] = {}
            for name, v in st.items():
                if name == "step":
                    d[name] = _step_value(None, v)
                elif _is_tensor(v):
                    d[name] = v.to(p.dtype) if v.dtype != p.dtype else v.clone()
                    if d[name].device != p.device:
                        d[name] = d[name].to(p.device)
                else:
                    d[name] = copy.deepcopy(v)
            new_state[p] = d
        self.state = new_state
        self.param_groups = new_groups
        self._state_version += 1

    # ----------------------------------------------------------------- misc

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)


def _step_value(key: Any, v: Any) -> int:
    """A saved step count as an int (an int, an integral float, or a one-element tensor)."""
    if _is_tensor(v):
        if v.numel() != 1:
            raise ValueError(
                f"loaded state 'step' of parameter {key!r} must have one element, got shape {tuple(v.shape)}"
            )
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or v != int(v) or v < 0:
        raise ValueError(
            f"loaded state 'step' of parameter {key!r} must be a non-negative integer, got {v!r}"
        )
    return int(v)


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _num(group: Mapping[str, Any], key: str) -> float:
    v = group[key]
    if _is_tensor(v):
        raise TypeError(f"{key} must be a Python number, not a Tensor")
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{key} must be a number, got {type(v).__name__}")
    return float(v)
