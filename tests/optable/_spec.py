"""The op-table entry type and shared sample generators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

FLOATS = ("float32", "float64", "float16", "bfloat16")
# The 8/16-bit integers are cheap extra cells: they draw fewer examples (``SMALL_INT_EXAMPLES``).
SMALL_INTS = ("uint8", "int8", "int16")
INTS = ("int32", "int64") + SMALL_INTS
# A small-int cell draws this fraction (1/SMALL_INT_SHARE) of its spec's examples.
SMALL_INT_SHARE = 5
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)

# (rtol, atol) used when a spec gives none for a dtype.
DEFAULT_TOL = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1e-2),
    "int32": (0, 0),
    "int64": (0, 0),
    "uint8": (0, 0),
    "int8": (0, 0),
    "int16": (0, 0),
    "bool": (0, 0),
}

# Unit roundoffs a low-precision VJP may be off by, per unit of its terms' size
# (``OpSpec.lowp_grad_factor``).
LOWP_GRAD_FACTOR = 4.0

# A sampler takes hypothesis's ``draw`` and a dtype name, and returns
# (list of NumPy input arrays, dict of keyword arguments).
Sampler = Callable[[Callable[[Any], Any], str], "tuple[list[np.ndarray], dict]"]


@dataclass
class OpSpec:
    """How to test one registry op.

    ``fg_fn(*tensors, **kwargs)`` runs ferrograd; ``np_fn(*arrays, **kwargs)``
    is the NumPy reference (computed in float64 for float inputs unless
    ``ref_in_dtype``); ``sample`` draws inputs. ``skip`` states why an op is
    not forward-checked here (it must then be covered by a named test).
    """

    name: str
    fg_fn: Callable[..., Any]
    np_fn: Callable[..., Any] | None
    sample: Sampler
    dtypes: tuple[str, ...] = ("float32", "float64")
    tol: dict[str, tuple[float, float]] = field(default_factory=dict)
    noncontig: bool = True  # also run on non-contiguous views of the inputs
    # Non-contiguous runs may expand (stride 0) dims of float inputs the op does not write,
    # their values then made equal along those dims; off for ops whose float inputs must not
    # repeat values (a matrix that must stay invertible, ...).
    expand: bool = True
    ref_in_dtype: bool = False  # run the reference in the input dtype (ints, exact ops)
    # Check that a registry view op's output shares storage with its input. Off for specs
    # whose fg_fn joins several outputs (the join copies); those ops' sharing is tested directly.
    view_check: bool = True
    skip: str | None = None
    max_examples: int = 25
    # Optional extras (added after the first fields; all default to "off"):
    # The output dtype PyTorch gives: a dtype name, a tuple of names (one per
    # output), or a callable ``f(dtype)`` / ``f(dtype, **kwargs)`` returning
    # either. ``None`` infers it from the reference: bool/int results keep the
    # reference's dtype; float results have the input dtype for float inputs
    # and float32 for int/bool inputs.
    out_dtype: str | tuple[str, ...] | Callable[..., Any] | None = None
    # Known failures: dtype name (or "*" for all) -> reason naming the bug.
    # The driver marks those cases ``xfail(strict=True)``.
    xfail: dict[str, str] = field(default_factory=dict)
    # Gradient column (float64 finite differences via fg.autograd.gradcheck).
    # Ops the registry marks differentiable are gradchecked unless ``grad_skip``
    # states why not; ``gradgrad=False`` (with ``gradgrad_skip``) leaves out
    # the second-order check. ``grad_sample`` draws float64 inputs suited to
    # finite differences (few elements, away from kinks and ties); without it
    # ``sample`` is used and examples with non-finite or too many values are
    # rejected. ``grad_args`` lists the inputs that get ``requires_grad``
    # (default: every float array input).
    grad_skip: str | None = None
    # Used instead of ``fg_fn`` by the gradient check (e.g. in-place ops applied
    # to a clone, since a leaf that requires grad cannot be written in place).
    grad_fn: Callable[..., Any] | None = None
    gradgrad_skip: str | None = None
    grad_sample: Sampler | None = None
    grad_args: tuple[int, ...] | None = None
    grad_tol: tuple[float, float] = (1e-5, 1e-3)  # (atol, rtol)
    grad_examples: int = 5
    # Move differentiable inputs off the usual kinks (integers and halves: zero
    # for abs/relu/sign, rounding steps, ties) before the check; turn off for a
    # ``grad_sample`` that places values deliberately.
    grad_snap: bool = True
    # Low-precision gradient columns (``<op>-grad-<dtype>``, ``tests/optable/_lowp.py``):
    # the VJP in float32/float16/bfloat16 may differ from the float64 VJP of the
    # same rounded values by this many unit roundoffs of the dtype, times the
    # sum of the magnitudes of the terms it adds up. The default allows a few
    # roundings (operands, a product, the one rounding on store); an op needing
    # more says why next to its spec (a dict gives factors per dtype, the
    # default for the dtypes it leaves out).
    lowp_grad_factor: float | dict[str, float] = LOWP_GRAD_FACTOR
    # Not a registry op: a functional composed in Python of registry ops (``name`` is its
    # ``torch.nn.functional`` name, and must name no registry op). Every column runs it
    # like an op; it is differentiable when it has float dtypes (its gradient is the
    # composition of its parts' VJPs), neither views nor mutates its inputs and has
    # shapes that do not depend on values (see ``op_info`` in ``optable/__init__.py``).
    composed: bool = False
    # For a composed spec only: ``differentiable=False`` when its float outputs carry no
    # gradient (boolean or counting results: ``isclose``, ``histc``); ``data_dependent``
    # when its output shape (or a Python value it returns) depends on the input's values,
    # so capture must refuse it with ``TraceError`` as for the registry's such ops.
    differentiable: bool | None = None
    data_dependent: bool = False

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return self.tol.get(dtype, DEFAULT_TOL[dtype])

    def lowp_factor(self, dtype: str) -> float:
        f = self.lowp_grad_factor
        return f.get(dtype, LOWP_GRAD_FACTOR) if isinstance(f, dict) else f


# ---------------------------------------------------------------------------
# Shape strategies
# ---------------------------------------------------------------------------

def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 0, max_side: int = 5):
    """Shapes including zero-size dims (min_side=0)."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def _rng(draw) -> np.random.Generator:
    """A NumPy generator seeded by one hypothesis draw (cheaper than many small draws)."""
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _broadcast_variant(base: tuple, rng: np.random.Generator) -> tuple:
    """A suffix of ``base`` with some dims (about a quarter) set to 1."""
    n = int(rng.integers(0, len(base) + 1))
    s = list(base[len(base) - n:])
    for i in range(len(s)):
        if rng.random() < 0.25:
            s[i] = 1
    return tuple(s)


def broadcastable_pair(draw, min_dims: int = 0, max_dims: int = 4, max_side: int = 5):
    """Two shapes that broadcast together (dims dropped or set to 1 at random)."""
    base = draw(shapes(min_dims, max_dims, 0, max_side))
    rng = _rng(draw)
    first = base if rng.random() < 0.5 else _broadcast_variant(base, rng)
    return first, _broadcast_variant(base, rng)


def values(draw, shape, dtype: str, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Random values of ``dtype`` in [lo, hi] (ints: rounded; bool: random)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # np.asarray: a 0-d array (not a NumPy scalar) for shape ().
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in INTS:
        ilo, ihi = int(np.floor(lo)), int(np.ceil(hi))
        if dtype == "uint8":  # no negatives
            ilo = max(ilo, 0)
            ihi = max(ihi, ilo)
        return np.asarray(rng.integers(ilo, ihi + 1, size=shape).astype(dtype))
    a = np.asarray(rng.uniform(lo, hi, size=shape))
    # bfloat16 has no NumPy dtype: keep float32 values that are exact in bfloat16.
    if dtype == "bfloat16":
        a = a.astype(np.float32)
        a = (a.view(np.uint32) & 0xFFFF0000).view(np.float32)
        return a
    return a.astype(dtype)


def broadcastable_shapes(draw, n: int, min_dims: int = 0, max_dims: int = 4, max_side: int = 5):
    """``n`` shapes that broadcast together (the first may be the full shape)."""
    base = draw(shapes(min_dims, max_dims, 0, max_side))
    rng = _rng(draw)
    out = [_broadcast_variant(base, rng) for _ in range(n)]
    if rng.random() < 0.5:
        out[0] = base
    return out


def with_specials(draw, a: np.ndarray, dtype: str, p: float = 0.2) -> np.ndarray:
    """For float dtypes, half of the time put NaN, +inf, -inf, 0.0 and -0.0 at random positions.

    Ints and bool are returned unchanged.
    """
    if dtype not in FLOATS or np.size(a) == 0:
        return a
    rng = _rng(draw)
    if rng.random() < 0.5:
        return a
    a = np.array(a, copy=True)
    mask = rng.random(a.shape) < p
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=a.dtype)
    a[mask] = specials[rng.integers(0, len(specials), size=int(mask.sum()))]
    return a


def nonzero_values(draw, shape, dtype: str, lo: float = 0.5, hi: float = 3.0) -> np.ndarray:
    """Values with ``lo <= |v| <= hi`` and a random sign (ints: nonzero)."""
    if dtype == "bool":
        return np.ones(shape, dtype=bool)
    if dtype in INTS:
        lo = max(1.0, float(np.ceil(lo)))
    mag = values(draw, shape, dtype, lo, hi)
    sign = np.where(_rng(draw).random(shape) < 0.5, -1, 1).astype(mag.dtype)
    return np.asarray(mag * sign)


def unary_sampler(lo: float = -3.0, hi: float = 3.0, **kwargs) -> Sampler:
    def sample(draw, dtype):
        return [values(draw, draw(shapes()), dtype, lo, hi)], dict(kwargs)
    return sample


def binary_sampler(lo: float = -3.0, hi: float = 3.0, lo2: float | None = None, hi2: float | None = None) -> Sampler:
    def sample(draw, dtype):
        sa, sb = broadcastable_pair(draw)
        a = values(draw, sa, dtype, lo, hi)
        b = values(draw, sb, dtype, lo if lo2 is None else lo2, hi if hi2 is None else hi2)
        return [a, b], {}
    return sample
