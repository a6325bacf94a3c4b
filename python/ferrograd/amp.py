"""``torch.amp`` as seen from ferrograd: loss scaling, and autocast's switch.

:class:`GradScaler` is PyTorch's dynamic loss scaler: it multiplies the loss
by a scale before ``backward``, divides the gradients by it before the
optimizer steps, skips a step whose gradients hold an inf or NaN (the scale
then shrinks by ``backoff_factor``) and grows the scale by ``growth_factor``
after ``growth_interval`` clean steps. Mixed-precision training scripts call
``scaler.scale(loss).backward()``, ``scaler.unscale_(opt)`` (before gradient
clipping), ``scaler.step(opt)`` and ``scaler.update()``.

As in PyTorch, a scaler made for ``"cuda"`` while CUDA is unavailable warns
and disables itself (ferrograd has no CUDA: ``fg.cuda.is_available()`` is
false), so a script written for a CUDA machine runs on the CPU with every
call a pass-through. ``GradScaler("cpu")`` and ``GradScaler("gpu")`` scale.

:class:`autocast` is automatic mixed precision, with PyTorch's CPU policy:
inside a region for ``"cpu"`` (bfloat16 by default, or float16) or ``"gpu"``
(float16 by default), matrix products, ``linear`` and convolutions cast
their float32 inputs to the region's dtype and compute in it; losses and a
few range-hungry ops (``prod``) compute in float32; every other op runs in
the dtypes it is given. float64 tensors are never cast. The casts are
ordinary ops, so gradients reach float32 parameters in float32, and
``fg.compile`` captures them (a compiled function is captured again when it
is called under another autocast state). Regions nest; ``enabled=False``
turns autocast off inside one. The state is per thread. A region for a
device type ferrograd does not have (``"cuda"``, ``"xpu"``, ``"mps"``)
warns and runs disabled, as PyTorch does when CUDA is unavailable.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import Any

from . import _core

Tensor = _core.Tensor

__all__ = [
    "GradScaler",
    "autocast",
    "custom_bwd",
    "custom_fwd",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_enabled",
]

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """Dynamic loss scaling (``torch.amp.GradScaler``).

    - ``device``: ``"cuda"`` (PyTorch's default; disabled here with a
      warning since there is no CUDA), ``"cpu"`` or ``"gpu"``.
    - ``init_scale``, ``growth_factor``, ``backoff_factor``,
      ``growth_interval``: as in PyTorch (65536.0, 2.0, 0.5, 2000).
    - ``enabled``: ``False`` makes every method a pass-through.
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        device = str(device.type if isinstance(device, _core.device) else device)
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device.split(":")[0] == "cuda":
            warnings.warn(
                "GradScaler is enabled, but CUDA is not available (ferrograd has no CUDA device). Disabling.",
                stacklevel=2,
            )
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError(f"GradScaler: growth_factor must be > 1.0, got {growth_factor}")
            if not 0.0 < backoff_factor < 1.0:
                raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
            if int(growth_interval) <= 0:
                raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval}")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    def is_enabled(self) -> bool:
        """Whether the scaler scales (``False`` after disabling itself for a missing CUDA)."""
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or lists/tuples of them) times the scale, a float32 0-d tensor as in PyTorch."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * _core.tensor(self._scale, dtype=_core.float32, device=outputs.device)
        if isinstance(outputs, Iterable) and not isinstance(outputs, (str, bytes)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else scaled
        raise ValueError(
            f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, got {outputs!r}"
        )

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and note whether any is inf/NaN.

        Call it once per optimizer between ``backward`` and ``step`` (for example
        before ``clip_grad_norm_``); a second call before ``update`` raises.
        """
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError(
                "GradScaler.unscale_() has already been called on this optimizer since the last update()."
            )
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.unscale_() is being called after step().")
        # PyTorch rounds the reciprocal to float32 before multiplying.
        inv = float(_core.tensor(1.0 / self._scale, dtype=_core.float32).item())
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype == _core.float16:
                    raise ValueError("GradScaler.unscale_: attempting to unscale float16 gradients.")
                g.mul_(inv)
                if not found and not bool(g.isfinite().all().item()):
                    found = True
        state["found_inf"] = found
        state["stage"] = _UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not done yet) and run ``optimizer.step(*args, **kwargs)`` unless a
        gradient holds an inf or NaN; return what the step returned (``None`` when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Shrink the scale after a skipped step, grow it after ``growth_interval`` clean ones,
        or set it to ``new_scale``; then start the next iteration."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            if not self._per_optimizer:
                raise RuntimeError("GradScaler.update: no inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if math.isfinite(float(_core.tensor(grown, dtype=_core.float32).item())):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``_growth_tracker``
        (empty when disabled, as in PyTorch)."""
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "GradScaler.load_state_dict: the state_dict is empty (saved from a disabled scaler)."
            )
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


# Device types autocast runs on: whether the type is the GPU, and its default dtype.
_KINDS = {"cpu": (False, _core.bfloat16), "gpu": (True, _core.float16)}
# Device types PyTorch scripts name that ferrograd does not have: autocast there is off.
_ABSENT = {
    "cuda": "CUDA",
    "xpu": "XPU",
    "mps": "MPS",
    "hpu": "HPU",
    "xla": "XLA",
    "mtia": "MTIA",
    "ipu": "IPU",
}


def _kind(device_type: str) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"autocast: device_type must be a str, got {type(device_type).__name__}")
    kind = device_type.split(":")[0]
    if kind not in _KINDS and kind not in _ABSENT:
        raise RuntimeError(
            f"autocast: unsupported device_type {device_type!r} (ferrograd runs autocast on 'cpu' and 'gpu')"
        )
    return kind


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    A context manager (or decorator) that runs its body with automatic mixed
    precision on ``device_type`` (see the module docs for the policy).
    ``dtype`` defaults to bfloat16 on ``"cpu"`` and float16 on ``"gpu"``; a
    dtype other than those two warns and disables the region, as PyTorch
    does. With ``cache_enabled`` (the default) the cast of a float32
    parameter is made once per region and reused by every op that reads it
    (made again after the parameter is written in place); the cache is
    emptied when the thread leaves its last region.
    """

    def __init__(
        self,
        device_type: str = "cuda",
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        kind = _kind(device_type)
        self.device_type = device_type
        self._enabled = bool(enabled)
        self._cache = True if cache_enabled is None else bool(cache_enabled)
        self._gpu: bool | None = None
        self._prev: Any = None
        self._prev_cache = True
        if kind in _ABSENT:
            if self._enabled:
                warnings.warn(
                    f"autocast: device_type {device_type!r} was given, but {_ABSENT[kind]} is not available "
                    "in ferrograd; autocast is disabled in this region",
                    stacklevel=2,
                )
            self._enabled = False
            self.fast_dtype = dtype if dtype is not None else _core.float16
            return
        self._gpu, default = _KINDS[kind]
        self.fast_dtype = default if dtype is None else dtype
        if self.fast_dtype not in (_core.bfloat16, _core.float16):
            if self._enabled:
                warnings.warn(
                    f"autocast: on {kind!r} the dtype must be bfloat16 or float16, got {self.fast_dtype}; "
                    "autocast is disabled in this region",
                    stacklevel=2,
                )
            self._enabled = False

    def __enter__(self) -> autocast:
        if self._gpu is not None:
            self._prev_cache = _core._set_autocast_cache(self._cache)
            self._prev = _core._set_autocast(self._gpu, self.fast_dtype if self._enabled else None)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._gpu is not None:
            _core._set_autocast(self._gpu, self._prev)
            _core._set_autocast_cache(self._prev_cache)
        return None

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                region = autocast(self.device_type, self.fast_dtype, self._enabled, self._cache)
            with region:
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast runs on ``device_type``: ``"cpu"`` and ``"gpu"``."""
    return device_type.split(":")[0] in _KINDS


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether this thread is in an enabled autocast region for ``device_type``.

    Without an argument, PyTorch answers for CUDA: False here.
    """
    if device_type is None:
        return False
    kind = _kind(device_type)
    return kind in _KINDS and _core._get_autocast(_KINDS[kind][0]) is not None


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype autocast computes in on ``device_type``: the enclosing region's, else the default."""
    kind = _kind(device_type)
    if kind not in _KINDS:
        return _core.float16
    gpu, default = _KINDS[kind]
    d = _core._get_autocast(gpu)
    return default if d is None else d


def _cast_floats(v: Any, dtype: Any) -> Any:
    if isinstance(v, Tensor):
        return v.to(dtype) if v.is_floating_point() and v.dtype != _core.float64 else v
    if isinstance(v, (list, tuple)):
        return type(v)(_cast_floats(x, dtype) for x in v)
    if isinstance(v, dict):
        return {k: _cast_floats(x, dtype) for k, x in v.items()}
    return v


def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
    """Decorate a custom ``autograd.Function``'s ``forward`` for autocast regions.

    Without ``cast_inputs`` the forward runs under the caller's autocast state
    (and :func:`custom_bwd` gives ``backward`` the same state). With
    ``cast_inputs=dtype``, inside an enabled region the forward runs with
    autocast off and its floating tensor arguments cast to ``dtype``.
    """
    if fwd is None:
        return lambda f: custom_fwd(f, device_type=device_type, cast_inputs=cast_inputs)
    import functools

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        ctx._amp_dtype = get_autocast_dtype(device_type)
        on = is_autocast_enabled(device_type)
        if cast_inputs is None:
            ctx._amp_enabled = on
            return fwd(*args, **kwargs)
        ctx._amp_enabled = False
        if not on:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(ctx, *_cast_floats(args[1:], cast_inputs), **_cast_floats(kwargs, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd: Any = None, *, device_type: str) -> Any:
    """Decorate a custom ``autograd.Function``'s ``backward``: it runs under the
    autocast state its :func:`custom_fwd` forward ran under."""
    if bwd is None:
        return lambda f: custom_bwd(f, device_type=device_type)
    import functools

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        enabled = getattr(ctx, "_amp_enabled", False)
        dtype = getattr(ctx, "_amp_dtype", None)
        with autocast(device_type, dtype=dtype, enabled=enabled):
            return bwd(*args, **kwargs)

    return decorate_bwd
