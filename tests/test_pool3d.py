"""3-D pooling and max-unpooling: the modules against stored PyTorch references
(``scripts/make_pool3d_references.py``: outputs, indices, input gradients, ``repr``), the
argument handling PyTorch has (output sizes, no-batch input, ``None`` in adaptive sizes) and
errors for bad input. The functionals' forward/gradient/GPU/capture columns are op-table specs
(``tests/optable/composed_pool3d.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

nn = fg.nn
F = fg.nn.functional

REF = Path(__file__).parent / "fixtures" / "parity" / "pool3d.npz"
_DATA = np.load(REF)
CASES = sorted({k.split("/")[0] for k in _DATA.files if "/" in k})


def _module(case: str):
    kwargs = json.loads(str(_DATA[f"{case}/kwargs"]))
    return getattr(nn, str(_DATA[f"{case}/module"]))(**kwargs)


@pytest.mark.parametrize("case", CASES)
def test_module_parity_with_torch(case):
    m = _module(case)
    assert repr(m) == str(_DATA[f"{case}/repr"])
    cot = fg.tensor(_DATA[f"{case}/cotangent"])
    if f"{case}/pooled" in _DATA.files:
        x = fg.tensor(_DATA[f"{case}/pooled"], requires_grad=True)
        idx = fg.tensor(_DATA[f"{case}/indices"])
        size = json.loads(str(_DATA[f"{case}/output_size"]))
        outs = (m(x, idx, output_size=size),)
    else:
        x = fg.tensor(_DATA[f"{case}/input"], requires_grad=True)
        out = m(x)
        outs = out if isinstance(out, tuple) else (out,)
    n_ref = 2 if f"{case}/out1" in _DATA.files else 1
    assert len(outs) == n_ref
    np.testing.assert_allclose(outs[0].detach().numpy(), _DATA[f"{case}/out0"], rtol=1e-12, atol=1e-12)
    if n_ref == 2:
        assert outs[1].dtype == fg.int64
        np.testing.assert_array_equal(outs[1].numpy(), _DATA[f"{case}/out1"])
    (outs[0] * cot).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _DATA[f"{case}/grad"], rtol=1e-12, atol=1e-12)


def test_references_record_their_torch_version():
    assert str(_DATA["torch_version"]).startswith("2.")


def test_pool_then_unpool_round_trip_3d():
    x = fg.tensor(np.random.default_rng(0).permutation(2 * 3 * 4 * 6 * 6).reshape(2, 3, 4, 6, 6) * 1.0)
    v, i = nn.MaxPool3d(2, return_indices=True)(x)
    back = nn.MaxUnpool3d(2)(v, i)
    assert tuple(back.shape) == (2, 3, 4, 6, 6)
    # Every window's maximum is back in place; the rest of the window is zero.
    again = F.max_pool3d(back, 2)
    np.testing.assert_array_equal(again.numpy(), v.numpy())
    assert int((back.numpy() != 0).sum()) == v.numel()


def test_unbatched_matches_batched():
    x = fg.randn(3, 5, 6, 7)
    for fn, kw in (
        (F.max_pool3d, {"kernel_size": 3, "stride": 2, "padding": 1}),
        (F.avg_pool3d, {"kernel_size": 2, "ceil_mode": True, "count_include_pad": False}),
        (F.adaptive_avg_pool3d, {"output_size": (2, 3, 4)}),
        (F.adaptive_max_pool3d, {"output_size": (2, None, 4)}),
    ):
        np.testing.assert_array_equal(fn(x, **kw).numpy(), fn(x.unsqueeze(0), **kw).squeeze(0).numpy())


def test_output_sizes_follow_ceil_mode_rule():
    x = fg.zeros(1, 1, 5, 5, 5)
    # floor: (5 - 2) // 2 + 1 = 2; ceil: 3 (the last window starts inside the input)
    assert tuple(F.max_pool3d(x, 2, 2).shape[-3:]) == (2, 2, 2)
    assert tuple(F.max_pool3d(x, 2, 2, ceil_mode=True).shape[-3:]) == (3, 3, 3)
    # ceil with padding: a window that would start in the right padding is dropped
    assert tuple(F.avg_pool3d(fg.zeros(1, 1, 4, 4, 4), 3, 3, 1, ceil_mode=True).shape[-3:]) == (2, 2, 2)


def test_empty_batch():
    out, idx = F.max_pool3d(fg.zeros(0, 2, 4, 4, 4), 2, return_indices=True)
    assert tuple(out.shape) == (0, 2, 2, 2, 2) and tuple(idx.shape) == (0, 2, 2, 2, 2)
    assert tuple(F.avg_pool3d(fg.zeros(0, 2, 4, 4, 4), 2).shape) == (0, 2, 2, 2, 2)


@pytest.mark.parametrize(
    "fn, shape, kw, exc, match",
    [
        (F.max_pool3d, (4, 4, 4), {"kernel_size": 2}, ValueError, r"max_pool3d.*4-D.*5-D.*\(4, 4, 4\)"),
        (
            F.max_pool3d,
            (1, 1, 4, 4, 4),
            {"kernel_size": 2, "padding": 2},
            ValueError,
            "max_pool3d: padding.*half",
        ),
        (
            F.max_pool3d,
            (1, 1, 4, 4, 4),
            {"kernel_size": 5},
            ValueError,
            r"max_pool3d.*\(1, 1, 4, 4, 4\).*too small",
        ),
        (
            F.max_pool3d,
            (1, 1, 4, 4, 4),
            {"kernel_size": 0},
            ValueError,
            "max_pool3d: kernel_size must be positive",
        ),
        (F.max_pool3d, (1, 1, 4, 4, 4), {"kernel_size": 2, "stride": 0}, ValueError, "max_pool3d: stride"),
        (
            F.max_pool3d,
            (1, 1, 4, 4, 4),
            {"kernel_size": 2, "dilation": 0},
            ValueError,
            "max_pool3d: dilation",
        ),
        (
            F.max_pool3d,
            (1, 1, 4, 4, 4),
            {"kernel_size": (2, 2)},
            ValueError,
            "max_pool3d: kernel_size.*3-tuple",
        ),
        (F.avg_pool3d, (1, 1, 4, 4, 4), {"kernel_size": 2, "padding": 2}, ValueError, "avg_pool3d: padding"),
        (F.avg_pool3d, (1, 1, 2, 2, 2), {"kernel_size": 3}, ValueError, "avg_pool3d.*too small"),
        (
            F.avg_pool3d,
            (1, 1, 4, 4, 4),
            {"kernel_size": 2, "divisor_override": 0},
            ValueError,
            "divisor_override",
        ),
        (F.adaptive_avg_pool3d, (1, 4, 4), {"output_size": 2}, ValueError, "adaptive_avg_pool3d.*4-D"),
        (
            F.adaptive_avg_pool3d,
            (1, 1, 4, 4, 4),
            {"output_size": (2, 2)},
            ValueError,
            "adaptive_avg_pool3d: output_size",
        ),
        (
            F.adaptive_max_pool3d,
            (1, 1, 4, 4, 4),
            {"output_size": -1},
            ValueError,
            "adaptive_max_pool3d: cannot pool",
        ),
        (
            F.adaptive_max_pool3d,
            (1, 0, 4, 4, 4),
            {"output_size": 2},
            ValueError,
            "adaptive_max_pool3d.*empty",
        ),
    ],
)
def test_bad_pooling_arguments(fn, shape, kw, exc, match):
    with pytest.raises(exc, match=match):
        fn(fg.zeros(*shape), **kw)


def test_avg_pool3d_rejects_integer_input():
    with pytest.raises(TypeError, match="avg_pool3d: input must have a floating point dtype"):
        F.avg_pool3d(fg.zeros(1, 1, 2, 2, 2, dtype=fg.int64), 2)


def test_non_tensor_input():
    with pytest.raises(TypeError, match="max_pool3d: input must be a Tensor"):
        F.max_pool3d(np.zeros((1, 1, 2, 2, 2)), 2)


def test_bad_unpool_arguments():
    v, i = F.max_pool3d(fg.randn(1, 1, 4, 4, 4), 2, return_indices=True)
    with pytest.raises(
        ValueError, match=r"max_unpool3d: output_size \(9, 9, 9\) dim 0 must be between 3 and 5"
    ):
        F.max_unpool3d(v, i, 2, output_size=(9, 9, 9))
    with pytest.raises(ValueError, match="max_unpool3d: indices shape"):
        F.max_unpool3d(v, i[..., :1], 2)
    with pytest.raises(TypeError, match="max_unpool3d: indices must have dtype int64"):
        F.max_unpool3d(v, i.to(fg.float32), 2)
    with pytest.raises(ValueError, match="max_unpool2d: expected 3-D or 4-D input"):
        F.max_unpool2d(v, i, 2)
    with pytest.raises(
        IndexError, match=r"max_unpool3d: found an invalid max index for output size \(2, 2, 2\)"
    ):
        # kernel 1, stride 1: the default output is the pooled size, too small for the indices
        F.max_unpool3d(v, i, 1)
