"""L-BFGS, with PyTorch's closure protocol and an optional strong-Wolfe line search."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .. import _capture, _core
from .._grad_mode import enable_grad, no_grad
from .optimizer import Optimizer, ParamsT, Tensor, _check, _num

__all__ = ["LBFGS"]


def _cubic_interpolate(
    x1: float,
    f1: float,
    g1: float,
    x2: float,
    f2: float,
    g2: float,
    bounds: tuple[float, float] | None = None,
) -> float:
    """The minimiser of the cubic through ``(x1, f1)`` and ``(x2, f2)`` with
    slopes ``g1`` and ``g2``, clamped to ``bounds`` (default: the interval);
    the interval's midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0.0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _dot(a: Tensor, b: Tensor) -> float:
    return float(a.dot(b).item())


def _strong_wolfe(
    obj: Callable[[float], tuple[float, Tensor]],
    t: float,
    d: Tensor,
    f: float,
    g: Tensor,
    gtd: float,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, Tensor, float, int]:
    """A line search along ``d`` for a step meeting the strong Wolfe conditions
    (sufficient decrease ``c1``, curvature ``c2``): bracketing by cubic
    extrapolation, then zooming by cubic interpolation (Nocedal and Wright,
    algorithms 3.5 and 3.6). ``obj(t)`` returns the loss and flat gradient at
    ``x + t * d``. Returns ``(loss, grad, t, evaluations)``."""
    d_norm = float(d.abs().max().item())
    f_new, g_new = obj(t)
    evals = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket: list[float] = []
    bracket_f: list[float] = []
    bracket_g: list[Tensor] = []
    bracket_gtd: list[float] = []
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, bracket_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # extrapolate: the next trial step lies in [t + 0.01 (t - t_prev), 10 t]
        t_next = _cubic_interpolate(
            t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10.0)
        )
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = obj(t)
        evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g, bracket_gtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # zoom: shrink the bracket until a point meets the conditions
    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        # keep away from the bracket's ends unless the previous step made progress
        b_max, b_min = max(bracket), min(bracket)
        eps = 0.1 * (b_max - b_min)
        if min(b_max - t, t - b_min) < eps:
            if insuf_progress or t >= b_max or t <= b_min:
                t = b_max - eps if abs(t - b_max) < abs(t - b_min) else b_min + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj(t)
        evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    if len(bracket) == 1:
        low = 0
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    r"""L-BFGS, with PyTorch's algorithm and closure protocol.

    ``step(closure)`` runs up to ``max_iter`` iterations (and ``max_eval``
    evaluations of ``closure``, default ``max_iter * 5 // 4``); ``closure``
    must zero the gradients, compute the loss, call ``backward()`` and
    return the loss. Each iteration builds a search direction from the last
    ``history_size`` curvature pairs (the two-loop recursion) and steps
    along it by ``lr`` (the first iteration by ``min(1, 1 / |g|_1) * lr``),
    or, with ``line_search_fn="strong_wolfe"``, by a step meeting the strong
    Wolfe conditions. The iterations stop early when the largest gradient
    entry is at most ``tolerance_grad``, or the step or the loss change is
    below ``tolerance_change``. Returns the loss of the first evaluation.

    One parameter group only. The state (of the first parameter, as in
    PyTorch) holds ``func_evals``, ``n_iter``, the last direction ``d`` and
    step ``t``, the curvature pairs ``old_dirs``/``old_stps``, ``ro``,
    ``H_diag``, ``prev_flat_grad`` and ``prev_loss``; a later ``step`` goes
    on from it. The parameters' gradients are read as one flat vector, so
    all parameters must share a dtype and a device.
    """

    _state_shaped_like_params = False

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
        )
        self._validate_group(defaults)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: list[Tensor] = self.param_groups[0]["params"]
        first = self._params[0]
        for i, p in enumerate(self._params):
            if p.dtype != first.dtype or p.device != first.device:
                raise ValueError(
                    f"LBFGS: all parameters must share a dtype and a device; parameter 0 is {first.dtype} on "
                    f"{first.device}, parameter {i} is {p.dtype} on {p.device}"
                )

    def _validate_group(self, group: Mapping[str, Any]) -> None:
        _check(_num(group, "lr") >= 0.0, f"Invalid learning rate: {group['lr']}")
        for key in ("max_iter", "max_eval", "history_size"):
            v = group[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"LBFGS: {key} must be a positive int, got {v!r}")
        _check(_num(group, "tolerance_grad") >= 0.0, f"Invalid tolerance_grad: {group['tolerance_grad']}")
        _check(
            _num(group, "tolerance_change") >= 0.0, f"Invalid tolerance_change: {group['tolerance_change']}"
        )
        ls = group["line_search_fn"]
        if ls not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {ls!r}")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Refused after construction: L-BFGS works on one parameter group."""
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    # ------------------------------------------------------------ flat views

    def _numel(self) -> int:
        return sum(p.numel() for p in self._params)

    def _gather_flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            g = p.grad
            views.append(
                _core.zeros(p.numel(), dtype=p.dtype, device=p.device) if g is None else g.reshape(-1)
            )
        return _core.cat(views, 0)

    def _add_grad(self, t: float, d: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset : offset + n].view_as(p), alpha=t)
            offset += n

    def _clone_params(self) -> list[Tensor]:
        return [p.clone() for p in self._params]

    def _set_params(self, values: list[Tensor]) -> None:
        for p, v in zip(self._params, values, strict=True):
            p.copy_(v)

    def _evaluate(self, closure: Callable[[], Any]) -> float:
        with enable_grad():
            loss = closure()
        return float(loss)

    # ------------------------------------------------------------------- step

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations; ``closure`` (required)
        re-evaluates the model, its gradients and returns the loss. Returns
        the loss of the first evaluation."""
        if closure is None:
            raise ValueError("LBFGS.step requires a closure that re-evaluates the model and returns the loss")
        if _capture.is_capturing():
            raise _core.TraceError(
                "LBFGS.step() cannot be captured into a graph: it evaluates the closure and branches on "
                "its results; call it outside the compiled function"
            )
        with no_grad():
            return self._step(closure)

    def _step(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = int(group["max_iter"]), int(group["max_eval"])
        tolerance_grad, tolerance_change = float(group["tolerance_grad"]), float(group["tolerance_change"])
        history_size = int(group["history_size"])
        line_search_fn = group["line_search_fn"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        if float(flat_grad.abs().max().item()) <= tolerance_grad:
            return orig_loss

        d: Tensor | None = state.get("d")
        t: float = state.get("t", lr)
        old_dirs: list[Tensor] = state.get("old_dirs", [])
        old_stps: list[Tensor] = state.get("old_stps", [])
        ro: list[float] = state.get("ro", [])
        h_diag: float = state.get("H_diag", 1.0)
        prev_flat_grad: Tensor | None = state.get("prev_flat_grad")
        prev_loss: float | None = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the search direction
            if state["n_iter"] == 1 or d is None or prev_flat_grad is None:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # keep the pair only when the curvature is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                # the two-loop recursion: d = -H g
                al = [0.0] * len(old_dirs)
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum().item())) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_evals = 0
            if line_search_fn == "strong_wolfe":
                x_init = self._clone_params()
                direction = d

                def obj(
                    step: float, x_init: list[Tensor] = x_init, direction: Tensor = direction
                ) -> tuple[float, Tensor]:
                    self._add_grad(step, direction)
                    f = self._evaluate(closure)
                    g = self._gather_flat_grad()
                    self._set_params(x_init)
                    return f, g

                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    obj, t, d, loss, flat_grad, gtd, tolerance_change=tolerance_change
                )
                self._add_grad(t, d)
                opt_cond = float(flat_grad.abs().max().item()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    # re-evaluate, unless this is the last iteration of the step
                    loss = self._evaluate(closure)
                    flat_grad = self._gather_flat_grad()
                    opt_cond = float(flat_grad.abs().max().item()) <= tolerance_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(d.abs().max().item()) * abs(t) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = h_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss
