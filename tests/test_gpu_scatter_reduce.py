"""``scatter_reduce`` / ``index_reduce`` on the WebGPU device: the kernel walks each line
in order as the CPU does, so sums, products, maxima and minima equal the CPU's float32
bits (NaN included) and ``mean`` matches within float32 rounding; gradients on the device
match the stored PyTorch references (``scripts/make_scatter_reduce_references.py``);
bad indices raise before anything is written. The op table's GPU column
(``tests/test_gpu_optable.py``) covers the forward over every device dtype."""

from __future__ import annotations

from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not fg.gpu.is_available(), reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
)

REF = Path(__file__).parent / "fixtures" / "parity" / "scatter_reduce.npz"
REDUCES = ["sum", "prod", "mean", "amax", "amin"]


def _case(seed: int, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    src = rng.standard_normal((9, 6)).astype(np.float32)
    idx = rng.integers(0, 5, size=(8, 6))
    if dtype == fg.float32:
        # NaN in self and in src, at slots that also receive numbers.
        x[1, 2] = np.nan
        src[0, 3] = src[4, 5] = np.nan
        idx[0, 3], idx[4, 5] = 2, 3
    else:
        x, src = np.round(x * 4), np.round(src * 4)
    return x, src, idx


@pytest.mark.parametrize("dtype", [fg.float32, fg.int32, fg.int64], ids=str)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
def test_device_matches_cpu_bits(reduce, include_self, dtype):
    x, src, idx = _case(3, dtype)
    outs = []
    for dev in ("cpu", "gpu"):
        xt = fg.tensor(x, dtype=dtype, device=dev)
        st = fg.tensor(src, dtype=dtype, device=dev)
        it = fg.tensor(idx, device=dev)
        # dim 0 (lines strided across the tensor) and dim 1 on a transposed view
        a = xt.scatter_reduce(0, it, st, reduce, include_self=include_self)
        b = xt.t().scatter_reduce(1, it[:, :5].t(), st.t(), reduce, include_self=include_self)
        outs.append([a.cpu().numpy(), b.cpu().numpy()])
    for c, g in zip(outs[0], outs[1], strict=True):
        if reduce == "mean" and dtype == fg.float32:
            # WGSL's division need not be correctly rounded.
            np.testing.assert_allclose(g, c, rtol=3e-7, atol=0, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, c)


def test_index_reduce_and_inplace_on_device():
    x, _, _ = _case(5, fg.float32)
    s = np.random.default_rng(6).standard_normal((9, 7)).astype(np.float32)
    idx = np.array([4, 0, 4, 1, 0, 4, 2, 2, 0])
    for reduce in REDUCES[1:]:  # index_reduce has no "sum" (that is index_add)
        want = fg.tensor(x).index_reduce(0, fg.tensor(idx), fg.tensor(s), reduce).numpy()
        y = fg.tensor(x, device="gpu")
        y.index_reduce_(0, fg.tensor(idx, device="gpu"), fg.tensor(s, device="gpu"), reduce)
        assert str(y.device) == "gpu"
        np.testing.assert_allclose(y.cpu().numpy(), want, rtol=3e-7, atol=0, equal_nan=True, err_msg=reduce)


def _ref_cases():
    with np.load(REF) as z:
        return sorted({k.rsplit("/", 1)[0] for k in z.files if k.count("/") == 4})


@pytest.fixture(scope="module")
def ref():
    with np.load(REF) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("key", _ref_cases())
def test_device_gradients_match_pytorch(ref, key):
    op, reduce, inc, dim = key.split("/")
    dim, include_self = int(dim), bool(int(inc))

    def dev(name, grad=False):
        return fg.tensor(ref[f"{key}/{name}"].astype(np.float32), device="gpu", requires_grad=grad)

    x, src = dev("x", True), dev("src", True)
    idx = fg.tensor(ref[f"{key}/index"], device="gpu")
    if op == "scatter":
        out = x.scatter_reduce(dim, idx, src, reduce, include_self=include_self)
    else:
        out = x.index_reduce(dim, idx, src, reduce, include_self=include_self)
    out.backward(dev("g"))
    for got, name in ((out.detach(), "out"), (x.grad, "gx"), (src.grad, "gsrc")):
        assert str(got.device) == "gpu", name
        np.testing.assert_allclose(
            got.cpu().numpy(), ref[f"{key}/{name}"], rtol=2e-5, atol=1e-6, err_msg=name
        )


def test_bad_index_on_device_raises_and_writes_nothing():
    x = fg.tensor([1.0, 2.0, 3.0], device="gpu")
    with pytest.raises(IndexError, match=r"scatter_reduce_.*7.*out of bounds.*size 3"):
        x.scatter_reduce_(
            0,
            fg.tensor([0, 7], device="gpu"),
            fg.tensor([9.0, 9.0], device="gpu"),
            "amax",
            include_self=False,
        )
    assert x.cpu().tolist() == [1.0, 2.0, 3.0]


def test_bool_scatter_add_on_device_is_logical_or():
    """scatter_add shares the line walk: a bool slot reached twice stays True (stored as 1)."""
    idx, src = np.array([0, 0, 1, 0]), np.array([True, True, True, False])
    outs = []
    for dev in ("cpu", "gpu"):
        x = fg.tensor([True, False, False], device=dev)
        y = x.scatter_add(0, fg.tensor(idx, device=dev), fg.tensor(src, device=dev))
        outs.append((y.int().cpu().numpy(), (y == fg.ones(3, dtype=fg.bool, device=dev)).cpu().numpy()))
    for c, g in zip(outs[0], outs[1], strict=True):
        np.testing.assert_array_equal(g, c)
