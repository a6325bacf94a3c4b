"""Promotion queries, index grids, arrangements, ``Tensor.unfold``, ``testing.assert_close``,
``func.functional_call`` and the random functionals (``gumbel_softmax``, ``rrelu``,
``feature_alpha_dropout``), against NumPy/SciPy float64 references and the engine's own
arithmetic."""

import itertools

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest
import scipy.linalg
from ferrograd.autograd import gradcheck
from numpy.lib.stride_tricks import sliding_window_view

DTYPES = [
    fg.bool,
    fg.uint8,
    fg.int8,
    fg.int16,
    fg.int32,
    fg.int64,
    fg.float16,
    fg.bfloat16,
    fg.float32,
    fg.float64,
]


def f64(x):
    return fg.tensor(np.asarray(x, dtype=np.float64), dtype=fg.float64)


# --- promotion queries -------------------------------------------------------------------


@pytest.mark.parametrize("a", DTYPES, ids=str)
def test_promote_types_is_what_arithmetic_gives(a):
    for b in DTYPES:
        got = fg.promote_types(a, b)
        want = (fg.ones((2,), dtype=a) * fg.ones((2,), dtype=b)).dtype
        assert got == want == fg.promote_types(b, a), (a, b)


def test_promote_types_documented_cases():
    assert fg.promote_types(fg.uint8, fg.int8) == fg.int16
    assert fg.promote_types(fg.float16, fg.bfloat16) == fg.float32
    assert fg.promote_types(fg.int64, fg.float16) == fg.float16
    with pytest.raises(TypeError, match="promote_types\\(\\): argument 'type2' must be a ferrograd dtype"):
        fg.promote_types(fg.float32, "float64")


def test_result_type_priorities():
    i32 = fg.tensor([1, 2], dtype=fg.int32)
    assert fg.result_type(i32, 2.5) == fg.float32  # a float number lifts the kind only
    assert fg.result_type(i32, 7) == fg.int32  # an int number does not widen
    assert fg.result_type(fg.tensor(1.0, dtype=fg.float64), i32) == fg.float64  # 0-d of a higher kind
    assert fg.result_type(fg.tensor(1, dtype=fg.int64), i32) == fg.int32  # 0-d of the same kind
    assert fg.result_type(fg.tensor([1.0], dtype=fg.float16), fg.tensor(1.0, dtype=fg.float64)) == fg.float16
    assert fg.result_type(2, 3.0) == fg.float32
    assert fg.result_type(True, 2) == fg.int64
    for x, y in [(i32, 2.5), (fg.tensor(1.0, dtype=fg.float64), i32), (True, i32)]:
        got = (fg.tensor(x) if not isinstance(x, fg.Tensor) else x) + y
        assert fg.result_type(x, y) == got.dtype
    with pytest.raises(TypeError, match="result_type\\(\\): argument 'tensor2'"):
        fg.result_type(i32, "1")


def test_can_cast_follows_the_kinds():
    kind = {d: (0 if d == fg.bool else 2 if d.is_floating_point else 1) for d in DTYPES}
    for a, b in itertools.product(DTYPES, DTYPES):
        assert fg.can_cast(a, b) == (kind[a] <= kind[b]), (a, b)
    assert fg.can_cast(fg.int64, fg.uint8) and not fg.can_cast(fg.float64, fg.int32)


@pytest.mark.parametrize(
    "shapes", [((2, 1), (3,)), (2, (3, 1)), ((0, 1), (1, 5)), ((), (4, 1, 2), (3, 1)), ((1,),)]
)
def test_broadcast_shapes_matches_numpy(shapes):
    want = np.broadcast_shapes(*[(s,) if isinstance(s, int) else s for s in shapes])
    assert fg.broadcast_shapes(*shapes) == want


def test_broadcast_shapes_names_the_bad_shape():
    with pytest.raises(RuntimeError, match=r"shape 1 \(3,\) does not broadcast with \(2,\)"):
        fg.broadcast_shapes((2,), (3,))


# --- index grids and arrangements ----------------------------------------------------------


@pytest.mark.parametrize(
    "row,col,offset", [(3, 4, 0), (3, 4, 1), (4, 3, -1), (5, 5, -7), (0, 0, 0), (1, 6, 9)]
)
def test_tril_triu_indices_match_numpy(row, col, offset):
    lo = fg.tril_indices(row, col, offset)
    hi = fg.triu_indices(row, col, offset, dtype=fg.int32)
    assert lo.dtype == fg.int64 and hi.dtype == fg.int32
    np.testing.assert_array_equal(lo.numpy(), np.stack(np.tril_indices(row, offset, col)).reshape(2, -1))
    np.testing.assert_array_equal(hi.numpy(), np.stack(np.triu_indices(row, offset, col)).reshape(2, -1))
    with pytest.raises(RuntimeError, match="dtype must be an integer type"):
        fg.tril_indices(row, col, offset, dtype=fg.float32)


@pytest.mark.parametrize(
    "n,r,rep", [(4, 2, False), (4, 2, True), (3, 3, False), (2, 3, False), (3, 0, False)]
)
def test_combinations_match_itertools(n, r, rep):
    values = np.arange(10, 10 + n, dtype=np.int64)
    got = fg.combinations(fg.tensor(values), r, with_replacement=rep)
    pick = itertools.combinations_with_replacement if rep else itertools.combinations
    if r == 0:
        assert tuple(got.shape) == (0,)
    else:
        want = np.array(list(pick(values.tolist(), r)), dtype=np.int64).reshape(-1, r)
        np.testing.assert_array_equal(got.numpy(), want)


def test_combinations_gradient():
    x = f64([0.5, -1.0, 2.0]).requires_grad_(True)
    assert gradcheck(lambda x: fg.combinations(x, 2).prod(1), (x,))


def test_block_diag_matches_scipy_and_differentiates():
    blocks = [np.array(1.5), np.array([2.0, 3.0]), np.arange(6.0).reshape(2, 3), np.zeros((0, 2))]
    got = fg.block_diag(*[f64(b) for b in blocks])
    want = scipy.linalg.block_diag(*[np.atleast_2d(b) if b.ndim < 2 else b for b in blocks])
    np.testing.assert_array_equal(got.numpy(), want)
    mixed = fg.block_diag(fg.tensor([1, 2], dtype=fg.int32), fg.ones((1, 1), dtype=fg.float16))
    assert mixed.dtype == fg.float16
    a, b = f64([[1.0, 2.0]]).requires_grad_(True), f64([[3.0], [4.0]]).requires_grad_(True)
    assert gradcheck(lambda a, b: fg.block_diag(a, b) * 2.0, (a, b))
    with pytest.raises(RuntimeError, match=r"input 0 must have 2 or fewer dimensions, got shape \(1, 1, 1\)"):
        fg.block_diag(fg.ones((1, 1, 1)))


@pytest.mark.parametrize("n,inc", [(None, False), (4, True), (1, False), (0, True)])
def test_vander_matches_numpy(n, inc):
    x = np.array([0.0, 1.5, -2.0])
    got = fg.vander(f64(x), N=n, increasing=inc)
    np.testing.assert_allclose(got.numpy(), np.vander(x, N=n, increasing=inc), rtol=1e-15)
    ints = fg.vander(fg.tensor([1, 2, 3], dtype=fg.int32), N=n, increasing=inc)
    assert ints.dtype == fg.int64
    np.testing.assert_array_equal(ints.numpy(), np.vander(np.array([1, 2, 3]), N=n, increasing=inc))


def test_vander_gradient_is_finite_at_zero():
    x = f64([0.0, 1.5, -2.0]).requires_grad_(True)
    fg.vander(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 + 2 * np.array([0.0, 1.5, -2.0]), rtol=1e-15)
    assert gradcheck(lambda x: fg.vander(x, N=4), (f64([0.3, -1.2]).requires_grad_(True),))


@pytest.mark.parametrize(
    "shape,args",
    [
        ((2, 5), (1, 2, 2)),
        ((2, 5), (0, 2, 1)),
        ((3, 4, 5), (-1, 3, 1)),
        ((6,), (0, 1, 4)),
        ((2, 5), (1, 5, 1)),
    ],
)
def test_unfold_matches_sliding_windows(shape, args):
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    dim, size, step = args
    want = np.moveaxis(sliding_window_view(x, size, axis=dim), -1, -1)
    want = np.take(want, np.arange(0, want.shape[dim], step), axis=dim)
    got = f64(x).unfold(dim, size, step)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    assert gradcheck(lambda t: t.unfold(dim, size, step) * 1.5, (f64(x).requires_grad_(True),))


def test_unfold_zero_dim_and_errors():
    np.testing.assert_array_equal(fg.tensor(5.0).unfold(0, 1, 1).numpy(), [5.0])
    x = fg.ones((2, 3))
    with pytest.raises(RuntimeError, match="size 4 must be between 0 and the size of dimension 1, 3"):
        x.unfold(1, 4, 1)
    with pytest.raises(RuntimeError, match="step must be > 0"):
        x.unfold(1, 2, 0)
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        x.unfold(2, 1, 1)


def test_arrangements_compile_like_eager():
    x = fg.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=fg.float32)

    def step(x):
        return fg.block_diag(x, x[0]).sum(0) + fg.vander(x[1], N=3).sum() + x.unfold(1, 2, 1).sum()

    np.testing.assert_allclose(fg.compile(step)(x).numpy(), step(x).numpy(), rtol=1e-6)


# --- testing.assert_close ---------------------------------------------------------------------


def test_assert_close_tolerances_and_messages():
    a = fg.tensor([1.0, 2.0, 3.0])
    fg.testing.assert_close(a, a + 1e-6)  # inside float32's default atol 1e-5
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 3 \(33.3%\)") as e:
        fg.testing.assert_close(a, fg.tensor([1.0, 2.1, 3.0]))
    assert "at index (1,)" in str(e.value)
    fg.testing.assert_close(a, fg.tensor([1.0, 2.1, 3.0]), rtol=0.1, atol=0.0)
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        fg.testing.assert_close(a, a.double())
    fg.testing.assert_close(a, a.double(), check_dtype=False)
    with pytest.raises(AssertionError, match="attribute 'shape' do not match"):
        fg.testing.assert_close(a, a[:2])
    with pytest.raises(AssertionError, match="Expected 2 but got 3"):
        fg.testing.assert_close(3, 2)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        fg.testing.assert_close(a, a, rtol=1.0)
    nan = fg.tensor([float("nan"), float("inf")])
    with pytest.raises(AssertionError):
        fg.testing.assert_close(nan, nan)
    fg.testing.assert_close(nan, nan, equal_nan=True)
    fg.testing.assert_close({"w": [a, 1.0]}, {"w": [a, 1.0]})
    with pytest.raises(AssertionError, match=r"item \['w'\]\[1\]"):
        fg.testing.assert_close({"w": [a, 1.0]}, {"w": [a, 2.0]})
    fg.testing.assert_close(fg.tensor([1, 2]), np.array([1, 2]))
    with pytest.raises(AssertionError, match="custom"):
        fg.testing.assert_close(a, a * 2, msg="custom")
    h = fg.tensor([1.0, 2.0], dtype=fg.float16)
    fg.testing.assert_close(h, h + 1e-3)  # float16's default rtol 1e-3
    fg.testing.assert_allclose(a, [1.0, 2.0, 3.0])


# --- functional_call ------------------------------------------------------------------------


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)
        self.b = nn.Linear(3, 3, bias=False)
        self.b.weight = self.a.weight
        self.register_buffer("scale", fg.ones(()))

    def forward(self, x):
        return self.b(self.a(x)) * self.scale


def test_functional_call_uses_the_given_tensors_and_restores():
    m = Tied()
    original = m.a.weight
    w = f64(np.eye(3) * 2).float().requires_grad_(True)
    x = fg.ones((1, 3))
    y = fg.func.functional_call(m, {"a.weight": w, "scale": fg.tensor(0.5)}, (x,))
    np.testing.assert_allclose(y.numpy(), np.full((1, 3), 2.0))  # tied: both layers use w
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 3), 2.0))
    assert m.a.weight is original and m.b.weight is original and original.grad is None
    np.testing.assert_allclose(m.scale.numpy(), 1.0)
    untied = fg.func.functional_call(m, {"a.weight": w}, x, tie_weights=False)
    np.testing.assert_allclose(
        untied.numpy(), (x.numpy() @ w.detach().numpy().T) @ original.detach().numpy().T, rtol=1e-6
    )
    assert nn.utils.stateless.functional_call is fg.func.functional_call


def test_functional_call_errors_restore_the_module():
    m = Tied()
    original = m.a.weight
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'a.weight', 'b.weight'"):
        fg.func.functional_call(m, {"scale": fg.ones(())}, (fg.ones((1, 3)),), strict=True)
    with pytest.raises(ValueError, match="more than one dictionary"):
        fg.func.functional_call(m, ({"scale": fg.ones(())}, {"scale": fg.ones(())}), (fg.ones((1, 3)),))
    with pytest.raises(ValueError, match="linear: input of shape"):
        fg.func.functional_call(m, {"a.weight": fg.ones((2, 2))}, (fg.ones((1, 3)),))
    assert m.a.weight is original and m.b.weight is original


# --- random functionals and modules -------------------------------------------------------------


def test_gumbel_softmax_samples_the_categorical():
    fg.manual_seed(3)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    logits = fg.tensor(np.log(np.tile(p, (4000, 1))), dtype=fg.float32)
    soft = F.gumbel_softmax(logits, tau=0.7)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-5)
    hard = F.gumbel_softmax(logits, hard=True)
    h = hard.numpy()
    assert set(np.unique(h)) <= {0.0, 1.0} and (h.sum(1) == 1).all()
    freq = h.mean(0)
    # argmax of logits + Gumbel noise is an exact draw from softmax(logits): 5 standard errors.
    assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / 4000)), freq


def test_gumbel_softmax_hard_gradient_is_the_soft_one():
    x = fg.randn((3, 5), requires_grad=True)
    fg.manual_seed(11)
    soft = F.gumbel_softmax(x, tau=0.5)
    (g_soft,) = fg.autograd.grad((soft * fg.arange(5.0)).sum(), [x])
    fg.manual_seed(11)
    hard = F.gumbel_softmax(x, tau=0.5, hard=True)
    (g_hard,) = fg.autograd.grad((hard * fg.arange(5.0)).sum(), [x])
    np.testing.assert_allclose(g_hard.numpy(), g_soft.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(hard.argmax(-1).numpy(), soft.argmax(-1).numpy())


def test_rrelu_slopes_and_gradient():
    x = f64(np.linspace(-3, 3, 4001)).requires_grad_(True)
    lo, hi = 0.1, 0.3
    ev = F.rrelu(x, lo, hi)
    xn = x.detach().numpy()
    np.testing.assert_allclose(ev.detach().numpy(), np.where(xn >= 0, xn, xn * 0.2), rtol=1e-15)
    fg.manual_seed(5)
    tr = F.rrelu(x, lo, hi, training=True)
    tr.sum().backward()
    neg = xn < 0
    slopes = tr.detach().numpy()[neg] / xn[neg]
    assert slopes.min() >= lo and slopes.max() <= hi
    assert abs(slopes.mean() - 0.2) < 5 * (hi - lo) / np.sqrt(12 * neg.sum())
    np.testing.assert_allclose(x.grad.numpy()[neg], slopes, rtol=1e-12)
    np.testing.assert_array_equal(x.grad.numpy()[~neg], 1.0)
    m = nn.RReLU(lo, hi).eval()
    np.testing.assert_allclose(m(x).detach().numpy(), ev.detach().numpy())
    with pytest.raises(ValueError, match="lower bound 0.5 must not exceed upper bound 0.1"):
        nn.RReLU(0.5, 0.1)


def test_feature_alpha_dropout_drops_channels_and_keeps_moments():
    fg.manual_seed(2)
    x = fg.randn((64, 32, 8, 8), dtype=fg.float64)
    y = F.feature_alpha_dropout(x, 0.3, training=True).numpy()
    xn = x.numpy()
    # A channel is either scaled-and-shifted input or one constant (the dropped value).
    dropped = np.ptp(y, axis=(2, 3)) < 1e-12
    share = dropped.mean()
    assert abs(share - 0.3) < 5 * np.sqrt(0.3 * 0.7 / dropped.size)
    assert np.allclose(np.ptp(y[dropped]), 0.0) or dropped.sum() == 0
    a = 1 / np.sqrt((1.7580993408473766**2 * 0.3 + 1) * 0.7)
    kept = ~dropped
    b = 1.7580993408473766 * a * 0.3
    np.testing.assert_allclose(y[kept], (xn * a + b)[kept], rtol=1e-12, atol=1e-12)
    assert abs(y.mean()) < 0.05 and abs(y.var() - 1) < 0.05
    np.testing.assert_array_equal(nn.FeatureAlphaDropout(0.3).eval()(x).numpy(), xn)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.feature_alpha_dropout(fg.ones(3), 0.5, training=True)


@pytest.mark.covers("torch.utils.tensorboard.SummaryWriter")
def test_module_paths():
    from ferrograd.utils.tensorboard import SummaryWriter

    assert SummaryWriter is fg.tensorboard.SummaryWriter


def test_functional_call_sees_structure_changes_between_calls():
    m = nn.Sequential(nn.Linear(3, 3))
    x = fg.ones((1, 3))
    w = fg.ones((3, 3))
    np.testing.assert_allclose(fg.func.functional_call(m, {"0.weight": w}, (x,)).shape, (1, 3))
    m[0] = nn.Linear(3, 2)  # a new submodule: the layout read by the first call is stale
    y = fg.func.functional_call(m, {"0.weight": fg.ones((2, 3)), "0.bias": fg.zeros(2)}, (x,))
    np.testing.assert_allclose(y.numpy(), np.full((1, 2), 3.0))
    m[0].register_buffer("extra", fg.zeros(1))
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): '0.extra'"):
        fg.func.functional_call(m, {"0.weight": fg.ones((2, 3)), "0.bias": fg.zeros(2)}, (x,), strict=True)
