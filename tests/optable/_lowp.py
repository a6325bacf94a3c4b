"""Low-precision gradients against float64: what the ``<op>-grad-<dtype>`` columns share.

One example: the spec's gradient sampler draws float64 inputs (moved off
kinks like the float64 gradient column's), every float input (and every
float array among the keyword arguments) is rounded to the low dtype, and a
random cotangent per float output is rounded the same way. The VJP is then
computed twice from those identical values: in the low dtype (on the CPU or
the GPU) and in float64 on the CPU. Each element of the low-precision
gradient must agree with the float64 one within

    tol_i = factor · u · (S_i + w · V + tiny)

- ``u``: the dtype's unit roundoff (2^-24, 2^-11, 2^-8);
- ``factor``: the spec's ``lowp_grad_factor`` (times a device factor on the GPU);
- ``S_i = Σ_j |v_j| |∂y_j/∂x_i|``: the sum of the magnitudes of the terms
  the VJP adds up for input element ``i`` (``v`` the cotangent, ``∂y/∂x``
  the float64 Jacobian, a VJP per output element). ``S_i >= |g_i|``; where
  nothing cancels it is ``|g_i|`` and the bound is relative, and where terms
  cancel (a broadcast operand's gradient, a matmul, a softmax row) it is the
  scale the rounding errors of a sum really have;
- ``V = max |v|`` with ``w = 1`` for float32: float32 kernels compute in
  float32 itself, and where a derivative formula subtracts intermediates of
  the cotangent's size (σ·(1 + x·(1 - σ)) near silu's minimum,
  g - mean(g) - x̂·mean(g·x̂) in a norm, p - 1 in cross entropy) their
  roundings, about u·|v|, show in a result S does not see. float16 and
  bfloat16 compute in float32 and round once on store, so the same roundings
  are float32's, 2^13 (2^16) times smaller than the dtype's: ``w = 2^-13``
  (``2^-16``). They show where such terms cancel exactly, which S, taken from
  the total Jacobian, does not see either: ``triplet_margin_loss``'s anchor
  gradient ``x/‖x‖ - x'/‖x'‖`` for one feature is 0 in float64 and one float32
  rounding, 2^-24·|v|, in bfloat16;
- ``tiny``: the dtype's smallest normal number (below it the spacing of
  representable values stops shrinking).

Examples whose float64 values fall outside what the dtype holds with full
precision (beyond 1/64 of its largest value, or subnormal forward values)
are rejected: those are range limits, not errors of the gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import ferrograd as fg
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from ._runner import as_array, draw_layouts, float_outputs, off_kinks, round_to, to_fg, to_fg_strided
from ._spec import OpSpec

LOWP_DTYPES = ("float32", "float16", "bfloat16")
# Unit roundoff: half the spacing of representable values just above 1.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
# Smallest normal numbers.
TINY = {"float32": 2.0**-126, "float16": 2.0**-14, "bfloat16": 2.0**-126}
LARGEST = {"float32": 3.4028234663852886e38, "float16": 65504.0, "bfloat16": 3.3895313892515355e38}
HEADROOM = 2.0**-6
# The weight of the cotangent's size in the tolerance (see the module docstring).
COTANGENT_WEIGHT = {"float32": 1.0, "float16": 2.0**-13, "bfloat16": 2.0**-16}
# NumPy arrays holding a dtype's values (bfloat16 in float32 carriers).
CARRIER = {"float32": np.float32, "float16": np.float16, "bfloat16": np.float32, "float64": np.float64}


@dataclass
class Example:
    """One drawn case: inputs and keyword arguments holding values of the low dtype (as float64)."""

    arrays: list
    kwargs: dict
    diff: list[int]  # the inputs that require grad
    floats: list[int]  # the float inputs (in the low dtype in the low-precision run)
    cot_seed: int
    layouts: list | None  # drawn per input (``_runner.Layout`` or None): non-contiguous inputs when given


def _round_kw(v, dtype: str):
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return round_to(v.astype(np.float64), dtype)
    if isinstance(v, (list, tuple)):
        return type(v)(_round_kw(x, dtype) for x in v)
    return v


def draw_example(spec: OpSpec, draw, dtype: str, max_elements: int, noncontig: bool) -> Example:
    """Draw inputs for ``spec``'s gradient, rounded to ``dtype``."""
    sampler = spec.grad_sample or spec.sample
    arrays, kwargs = sampler(draw, "float64")
    arrays = [as_array(a) for a in arrays]
    floats = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    diff = list(spec.grad_args) if spec.grad_args is not None else floats
    assume(sum(arrays[i].size for i in diff) <= max_elements)
    assume(all(np.isfinite(arrays[i]).all() for i in floats))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    if spec.grad_snap:
        arrays = [off_kinks(a, rng) if i in diff else a for i, a in enumerate(arrays)]
    arrays = [round_to(a.astype(np.float64), dtype) if i in floats else a for i, a in enumerate(arrays)]
    kwargs = {k: _round_kw(v, dtype) for k, v in kwargs.items()}
    lays = None
    if noncontig and draw(st.booleans(), label="non-contiguous inputs"):
        lays = draw_layouts(draw, arrays)
    return Example(arrays, kwargs, diff, floats, int(rng.integers(2**31)), lays)


def _tensors(ex: Example, dtype: str, device: str) -> list:
    """The example's inputs as tensors: float arrays in ``dtype`` on ``device``, the rest as drawn."""
    out = []
    for i, a in enumerate(ex.arrays):
        if not isinstance(a, np.ndarray):
            out.append(a)
            continue
        name = dtype if i in ex.floats else a.dtype.name
        if i in ex.floats:
            a = a.astype(CARRIER[dtype])
        if ex.layouts is not None and ex.layouts[i] is not None:
            t = to_fg_strided(a, name, ex.layouts[i])[0]
        else:
            t = to_fg(a, name)[0]
        if device != "cpu":
            t = t.to(device)
        out.append(t.requires_grad_() if i in ex.diff else t)
    return out


def _outputs(spec: OpSpec, ex: Example, xs: list) -> list:
    """The float outputs that depend on an input requiring grad."""
    out = float_outputs((spec.grad_fn or spec.fg_fn)(*xs, **ex.kwargs))
    return [o for o in out if o.requires_grad]


def _values(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().double().numpy(), dtype=np.float64)


def _grad(outs, inputs, cots) -> list[np.ndarray | None]:
    gs = fg.autograd.grad(outs, inputs, cots, retain_graph=True, allow_unused=True)
    return [None if g is None else _values(g) for g in gs]


@dataclass
class Reference:
    """The float64 side of an example: cotangents, gradients and term magnitudes."""

    cots: list[np.ndarray]
    grads: list[np.ndarray | None]
    scale: list[np.ndarray | None]  # S_i per differentiable input


def reference(spec: OpSpec, ex: Example, dtype: str) -> Reference | None:
    """The float64 VJP at the example's values (None when no float output depends on an input)."""
    xs = _tensors(ex, "float64", "cpu")
    outs = _outputs(spec, ex, xs)
    if not outs:
        return None
    rng = np.random.default_rng(ex.cot_seed)
    cots = [round_to(rng.standard_normal(tuple(o.shape)), dtype) for o in outs]
    inputs = [xs[i] for i in ex.diff]
    grads = _grad(outs, inputs, [fg.tensor(c, dtype=fg.float64) for c in cots])
    # S_i = Σ_j |v_j| |J_ji|: the VJP of a one-hot cotangent is row j of J.
    scale = [None if g is None else np.zeros_like(g) for g in grads]
    for k, c in enumerate(cots):
        for j, vj in enumerate(c.reshape(-1)):
            onehot = [np.zeros(p.shape) for p in cots]
            onehot[k].reshape(-1)[j] = 1.0
            rows = _grad(outs, inputs, [fg.tensor(h, dtype=fg.float64) for h in onehot])
            for s, r in zip(scale, rows, strict=True):
                if s is not None and r is not None:
                    s += abs(vj) * np.abs(r)
    limit = LARGEST[dtype] * HEADROOM
    values = [_values(o) for o in outs]
    for a in [*values, *(g for g in grads if g is not None), *(s for s in scale if s is not None)]:
        assume(np.isfinite(a).all() and (a.size == 0 or np.abs(a).max() <= limit))
    # A forward value the dtype holds only as a subnormal has lost its relative
    # precision, and a gradient computed from it (prod's y / x) inherits that.
    for v in values:
        assume(not ((v != 0) & (np.abs(v) < TINY[dtype])).any())
    return Reference(cots, grads, scale)


def lowp_grads(spec: OpSpec, ex: Example, ref: Reference, dtype: str, device: str) -> list[np.ndarray | None]:
    """The VJP in ``dtype`` on ``device``, from the example's values and the reference's cotangents."""
    xs = _tensors(ex, dtype, device)
    outs = _outputs(spec, ex, xs)
    assert len(outs) == len(ref.cots), f"{len(outs)} differentiable float outputs in {dtype}, {len(ref.cots)} in float64"
    cots = []
    for o, c in zip(outs, ref.cots, strict=True):
        assert tuple(o.shape) == c.shape, f"output shape {tuple(o.shape)} in {dtype}, {c.shape} in float64"
        carrier = CARRIER.get(o.dtype.name, np.float32)
        cots.append(fg.tensor(c.astype(carrier)).to(o.dtype).to(device))
    inputs = [xs[i] for i in ex.diff]
    gs = fg.autograd.grad(outs, inputs, cots, allow_unused=True)
    got = []
    for k, (x, g) in enumerate(zip(inputs, gs, strict=True)):
        if g is not None:
            assert g.dtype == x.dtype, f"input {ex.diff[k]}: a {g.dtype.name} gradient for a {x.dtype.name} input"
            assert str(g.device) == str(x.device), f"input {ex.diff[k]}: gradient on {g.device}, input on {x.device}"
        got.append(None if g is None else _values(g))
    return got


def compare(ex: Example, got, ref: Reference, dtype: str, factor: float) -> tuple[float, str]:
    """The largest ``|g_low - g64| / tol`` over the example's gradients, and a description of it."""
    u = UNIT_ROUNDOFF[dtype]
    floor = COTANGENT_WEIGHT[dtype] * max((float(np.abs(c).max()) for c in ref.cots if c.size), default=0.0)
    worst, where = 0.0, ""
    for k, (g, w, s) in enumerate(zip(got, ref.grads, ref.scale, strict=True)):
        i = ex.diff[k]
        assert (g is None) == (w is None), f"input {i}: a gradient in one precision only"
        if g is None:
            continue
        assert g.shape == w.shape, f"input {i}: gradient shape {g.shape}, float64 gives {w.shape}"
        if g.size == 0:
            continue
        unit = u * (s + floor + TINY[dtype])
        err = np.abs(g - w)
        err = np.where(np.isnan(err), np.inf, err)
        r = err / (factor * unit)
        j = int(np.argmax(r))
        if r.flat[j] > worst:
            idx = tuple(int(v) for v in np.unravel_index(j, g.shape))
            worst = float(r.flat[j])
            where = (
                f"input {i}{list(idx)}: {dtype} gives {g[idx]:.9g}, float64 {w[idx]:.9g}: error "
                f"{err[idx]:.3g} = {err[idx] / unit[idx]:.3g} u·(S + w·V + tiny) with S = {s[idx]:.3g}, "
                f"w·V = {floor:.3g}; allowed: {factor:g}"
            )
    return worst, where


def describe(ex: Example) -> str:
    """The example's inputs, for the report of a failing one."""
    parts = []
    for i, a in enumerate(ex.arrays):
        if isinstance(a, np.ndarray):
            body = np.array2string(a, threshold=40, precision=8) if a.size <= 40 else "..."
            parts.append(f"  input {i}: {a.dtype}{list(a.shape)} {body}")
        else:
            parts.append(f"  input {i}: {a!r}")
    layout = f"layouts: {ex.layouts}" if ex.layouts is not None else "contiguous"
    return "inputs (values of the low dtype):\n" + "\n".join(parts) + f"\n  kwargs: {ex.kwargs!r}\n  {layout}"
