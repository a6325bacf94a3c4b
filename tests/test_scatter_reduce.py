"""``scatter_reduce`` / ``index_reduce``: the gradients' tie, zero and count rules against
stored PyTorch references (``scripts/make_scatter_reduce_references.py``, which records the
PyTorch version), the one departure from PyTorch (a self value excluded by
``include_self=False`` takes no share of an ``amax``/``amin`` gradient), and the errors.
Forward values, gradchecks and compiled-vs-eager are the op table's
(``tests/optable/scatter_reduce.py``)."""

from __future__ import annotations

from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

REF = Path(__file__).parent / "fixtures" / "parity" / "scatter_reduce.npz"


def _cases():
    with np.load(REF) as z:
        keys = sorted({k.rsplit("/", 1)[0] for k in z.files if k.count("/") == 4})
    return keys


@pytest.fixture(scope="module")
def ref():
    with np.load(REF) as z:
        return {k: z[k] for k in z.files}


def test_reference_records_the_pytorch_version(ref):
    assert str(ref["torch_version"]).startswith("2.")


@pytest.mark.parametrize("key", _cases())
def test_gradients_match_pytorch(ref, key):
    op, reduce, inc, dim = key.split("/")
    dim, include_self = int(dim), bool(int(inc))
    x = fg.tensor(ref[f"{key}/x"], requires_grad=True)
    src = fg.tensor(ref[f"{key}/src"], requires_grad=True)
    idx = fg.tensor(ref[f"{key}/index"])
    if op == "scatter":
        out = x.scatter_reduce(dim, idx, src, reduce, include_self=include_self)
    else:
        out = x.index_reduce(dim, idx, src, reduce, include_self=include_self)
    out.backward(fg.tensor(ref[f"{key}/g"]))
    np.testing.assert_allclose(out.detach().numpy(), ref[f"{key}/out"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), ref[f"{key}/gx"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(src.grad.numpy(), ref[f"{key}/gsrc"], rtol=1e-12, atol=1e-12)


def test_compiled_gradients_match_eager(ref):
    key = "scatter/amax/1/0"
    xs, ss, ii, gg = (ref[f"{key}/{n}"] for n in ("x", "src", "index", "g"))

    def step(x, s):
        out = x.scatter_reduce(0, fg.tensor(ii), s, "amax")
        (out * fg.tensor(gg)).sum().backward()
        return out

    grads = []
    for f in (step, fg.compile(step)):
        x, s = fg.tensor(xs, requires_grad=True), fg.tensor(ss, requires_grad=True)
        f(x, s)
        grads.append((x.grad.numpy(), s.grad.numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=0, atol=0)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=0, atol=0)
    np.testing.assert_allclose(grads[0][1], ref[f"{key}/gsrc"], rtol=1e-12)


def test_excluded_self_takes_no_share_of_amax_gradient():
    # out[0] = max(src[0], src[1]) = 3 (src[0] alone); self (3) is excluded, so src[0]
    # gets the whole gradient (PyTorch 2.15 gives it 0.5, counting the excluded self).
    x = fg.tensor([3.0, 1.0], requires_grad=True)
    src = fg.tensor([3.0, 2.0], requires_grad=True)
    out = x.scatter_reduce(0, fg.tensor([0, 0]), src, "amax", include_self=False)
    out.backward(fg.ones(2))
    assert out.tolist() == [3.0, 1.0]
    assert src.grad.tolist() == [1.0, 0.0]
    assert x.grad.tolist() == [0.0, 1.0]


def test_integer_forward_and_mean_rounds_down():
    x = fg.tensor([5, -7, 2])
    out = x.scatter_reduce(0, fg.tensor([1, 1, 0]), fg.tensor([2, 2, 4]), "mean")
    # slot 0: (5 + 4) // 2 = 4; slot 1: (-7 + 2 + 2) // 3 = -1
    assert out.tolist() == [4, -1, 2]
    assert out.dtype == fg.int64
    y = fg.tensor([1, 1], dtype=fg.int32).index_reduce(
        0, fg.tensor([0, 0]), fg.tensor([3, -4], dtype=fg.int32), "amin"
    )
    assert y.tolist() == [-4, 1]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_mean_counts_past_the_dtype_range(dtype):
    # 300 values reach slot 0 (more than int8 or uint8 can count); their sum stays small
    src = np.zeros(300, dtype=dtype)
    src[:100] = 1
    idx = fg.tensor(np.zeros(300, dtype=np.int64))
    x = fg.tensor(np.array([0, 9], dtype=dtype))
    for include_self in (True, False):
        out = x.scatter_reduce(0, idx, fg.tensor(src), "mean", include_self=include_self)
        n = 300 + include_self
        assert out.tolist() == [100 // n, 9], (dtype, include_self)
    if dtype == "int16":  # a sum of 900 fits
        big = fg.tensor(np.full(300, 3, dtype=dtype))
        assert x.scatter_reduce(0, idx, big, "mean", include_self=False).tolist() == [3, 9]


@pytest.mark.parametrize(
    "call, exc, pattern",
    [
        (
            lambda: fg.zeros(3).scatter_reduce(0, fg.tensor([3]), fg.ones(1), "sum"),
            IndexError,
            r"scatter_reduce.*3",
        ),
        (
            lambda: fg.zeros(3).scatter_reduce(0, fg.tensor([0]), fg.ones(1), "max"),
            ValueError,
            r"scatter_reduce.*\"max\"",
        ),
        (
            lambda: fg.zeros(3).scatter_reduce(0, fg.tensor([0]), fg.ones(1, dtype=fg.float64), "sum"),
            TypeError,
            r"scatter_reduce.*float32.*float64",
        ),
        (
            lambda: fg.zeros(3, 2).scatter_reduce(0, fg.tensor([0]), fg.ones(1), "sum"),
            ValueError,
            r"scatter_reduce.*\[3, 2\].*\[1\]",
        ),
        (
            lambda: fg.zeros(3).scatter_reduce(0, fg.tensor([0.0]), fg.ones(1), "sum"),
            TypeError,
            r"scatter_reduce.*index",
        ),
        (
            lambda: fg.zeros(3).scatter_reduce_(0, fg.tensor([5]), fg.ones(1), "amax"),
            IndexError,
            r"scatter_reduce_",
        ),
        (
            lambda: fg.zeros(3).index_reduce(0, fg.tensor([0]), fg.ones(1), "sum"),
            ValueError,
            r"index_reduce.*'sum'",
        ),
        (
            lambda: fg.zeros(3).index_reduce(0, fg.tensor([4]), fg.ones(1), "amax"),
            IndexError,
            r"index_reduce",
        ),
        (
            lambda: fg.zeros(3, 2).index_reduce(0, fg.tensor([0]), fg.ones(1, 3), "prod"),
            ValueError,
            r"index_reduce.*\(3, 2\)",
        ),
        (
            lambda: fg.zeros(3).index_reduce(0, fg.tensor([0]), fg.ones(1, dtype=fg.int64), "prod"),
            TypeError,
            r"index_reduce.*float32.*int64",
        ),
    ],
)
def test_bad_input_names_op_shapes_and_dtypes(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_failed_inplace_call_writes_nothing():
    x = fg.tensor([1.0, 2.0, 3.0])
    with pytest.raises(IndexError):
        x.scatter_reduce_(0, fg.tensor([0, 7]), fg.tensor([9.0, 9.0]), "amax", include_self=False)
    assert x.tolist() == [1.0, 2.0, 3.0]
