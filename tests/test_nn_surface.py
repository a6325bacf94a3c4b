"""PyTorch surface composed of registry ops, beyond the op table: ``nn.EmbeddingBag``,
``nn.Unfold``/``nn.Fold``, ``nn.utils.parametrize`` and the weight/spectral norms.

The functionals are op-table entries (``tests/optable/composed_surface.py``: forward
against NumPy float64 loops, gradients, GPU parity, compiled-vs-eager); here the
modules: state_dict key names (PyTorch's, so its checkpoints load), train/eval
behaviour, ``repr`` and the errors for bad input.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn import functional as F

RNG = np.random.default_rng(0)


def t64(*shape, requires_grad=False):
    return fg.tensor(RNG.uniform(-1.0, 1.0, size=shape), dtype=fg.float64, requires_grad=requires_grad)


def npv(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# ---------------------------------------------------------------------------
# EmbeddingBag
# ---------------------------------------------------------------------------


def test_embedding_bag_module_matches_a_loop_and_names_its_weight():
    bag = nn.EmbeddingBag(6, 3, mode="sum", padding_idx=2, dtype=fg.float64)
    assert list(bag.state_dict()) == ["weight"]
    assert np.all(npv(bag.weight)[2] == 0.0)
    w = npv(bag.weight)
    idx = fg.tensor([1, 2, 5, 0, 0])
    off = fg.tensor([0, 3])
    out = bag(idx, off)
    np.testing.assert_allclose(npv(out), np.stack([w[1] + w[5], 2 * w[0]]), rtol=1e-12)
    out.sum().backward()
    grad = npv(bag.weight.grad)
    np.testing.assert_allclose(grad[:, 0], [2, 1, 0, 0, 0, 1])
    assert "mode='sum'" in repr(bag) and "padding_idx=2" in repr(bag)


def test_embedding_bag_from_pretrained_is_frozen_and_2d_input_means_rows():
    table = t64(4, 2)
    bag = nn.EmbeddingBag.from_pretrained(table)
    assert not bag.weight.requires_grad
    out = bag(fg.tensor([[0, 1], [3, 3]]))
    w = npv(table)
    np.testing.assert_allclose(npv(out), np.stack([(w[0] + w[1]) / 2, w[3]]), rtol=1e-12)


def test_embedding_bag_compiles_to_eager():
    bag = nn.EmbeddingBag(5, 3, mode="max")
    idx, off = fg.tensor([0, 4, 2, 1, 3]), fg.tensor([0, 2, 2])
    with fg.no_grad():
        eager = bag(idx, off)
        compiled = fg.compile(bag)(idx, off)
    np.testing.assert_array_equal(npv(compiled), npv(eager))


@pytest.mark.parametrize(
    "call, err, words",
    [
        (lambda w: F.embedding_bag(fg.tensor([0, 1]), w, fg.tensor([1])), ValueError, "offsets[0]"),
        (lambda w: F.embedding_bag(fg.tensor([0, 1]), w, fg.tensor([0, 3])), ValueError, "past the end"),
        (
            lambda w: F.embedding_bag(fg.tensor([0, 1]), w, fg.tensor([0, 1]), include_last_offset=True),
            ValueError,
            "last offset",
        ),
        (lambda w: F.embedding_bag(fg.tensor([0, 9]), w, fg.tensor([0])), IndexError, "index 9"),
        (lambda w: F.embedding_bag(fg.tensor([0, 1]), w), ValueError, "needs offsets"),
        (lambda w: F.embedding_bag(fg.tensor([[0, 1]]), w, fg.tensor([0])), ValueError, "2-D input"),
        (lambda w: F.embedding_bag(fg.tensor([0.0]), w, fg.tensor([0])), TypeError, "integer dtype"),
        (lambda w: F.embedding_bag(fg.tensor([0]), w, fg.tensor([0]), mode="median"), ValueError, "mode"),
        (
            lambda w: F.embedding_bag(
                fg.tensor([0]), w, fg.tensor([0]), mode="max", per_sample_weights=fg.ones(1)
            ),
            NotImplementedError,
            "mode='sum'",
        ),
        (
            lambda w: F.embedding_bag(
                fg.tensor([0, 1]), w, fg.tensor([0]), mode="sum", per_sample_weights=fg.ones(3)
            ),
            ValueError,
            "shape (2,)",
        ),
    ],
)
def test_embedding_bag_errors_name_the_problem(call, err, words):
    with pytest.raises(err, match=None) as info:
        call(fg.ones(4, 2))
    assert words in str(info.value) and "embedding_bag" in str(info.value)


# ---------------------------------------------------------------------------
# Unfold / Fold
# ---------------------------------------------------------------------------


def test_unfold_then_fold_multiplies_by_the_window_count():
    """PyTorch's documented identity: fold(unfold(x)) == x * fold(unfold(ones))."""
    x = t64(2, 3, 5, 4)
    geo = {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": (1, 2)}
    unf, fol = nn.Unfold(**geo), nn.Fold((5, 4), **geo)
    cols = unf(x)
    assert tuple(cols.shape) == (2, 3 * 6, 5 * 2)
    counts = npv(fol(unf(fg.ones(1, 1, 5, 4, dtype=fg.float64))))
    np.testing.assert_allclose(npv(fol(cols)), npv(x) * counts, rtol=1e-12)
    assert "kernel_size=(2, 3)" in repr(unf) and "output_size=(5, 4)" in repr(fol)
    assert list(unf.state_dict()) == [] and list(fol.state_dict()) == []


def test_unfold_gradcheck_and_compiled_matches_eager():
    x = t64(1, 2, 4, 4, requires_grad=True)
    assert fg.autograd.gradcheck(lambda a: F.unfold(a, 3, padding=1, stride=2), (x,))
    with fg.no_grad():
        np.testing.assert_array_equal(npv(fg.compile(nn.Unfold(2))(x)), npv(nn.Unfold(2)(x)))


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: F.unfold(fg.ones(3, 3), 2), "3-D (C, H, W) or 4-D"),
        (lambda: F.unfold(fg.ones(1, 1, 2, 2), 3), "no block fits"),
        (lambda: F.unfold(fg.ones(1, 1, 2, 2), 0), "kernel_size must be at least 1"),
        (lambda: F.unfold(fg.ones(1, 1, 2, 2), (1, 2, 3)), "pair of ints"),
        (lambda: F.fold(fg.ones(1, 5, 4), (3, 3), 2), "divisible"),
        (lambda: F.fold(fg.ones(1, 4, 5), (3, 3), 2), "5 blocks"),
        (lambda: F.fold(fg.ones(4), (3, 3), 2), "2-D (C * kh * kw, L)"),
    ],
)
def test_fold_unfold_errors_name_the_problem(call, words):
    with pytest.raises(ValueError) as info:
        call()
    assert words in str(info.value)


# ---------------------------------------------------------------------------
# parametrize, parametrizations.weight_norm / spectral_norm, the legacy hook forms
# ---------------------------------------------------------------------------

P = nn.utils.parametrize


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


class Scale(nn.Module):
    def forward(self, x):
        return 2.0 * x

    def right_inverse(self, a):
        return a / 2.0


def test_register_parametrization_keeps_the_original_object_and_pytorch_keys():
    m = nn.Linear(3, 3, dtype=fg.float64)
    w0 = m.weight
    opt = fg.optim.SGD(m.parameters(), lr=0.1)
    P.register_parametrization(m, "weight", Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedLinear" and P.type_before_parametrizations(m) is nn.Linear
    assert isinstance(m, nn.Linear)
    assert m.parametrizations.weight.original is w0  # the optimizer's tensor is still the one used
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    w = npv(m.weight)
    np.testing.assert_array_equal(w, w.T)
    m(t64(2, 3)).sum().backward()
    assert w0.grad is not None
    opt.step()
    np.testing.assert_array_equal(npv(m.weight), npv(m.weight).T)


def test_assignment_goes_through_right_inverse_and_chains_apply_in_order():
    m = nn.Linear(2, 2, bias=False, dtype=fg.float64)
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "weight", Scale())
    a = np.array([[1.0, 2.0], [2.0, 5.0]])
    m.weight = fg.tensor(a, dtype=fg.float64)
    np.testing.assert_allclose(npv(m.weight), a, rtol=1e-12)
    np.testing.assert_allclose(npv(m.parametrizations.weight.original), [[0.5, 1.0], [0.0, 2.5]], rtol=1e-12)
    assert list(m.state_dict()) == ["parametrizations.weight.original"]


def test_cached_computes_once_per_context():
    m = nn.Linear(2, 2)
    P.register_parametrization(m, "weight", Scale())
    assert m.weight is not m.weight
    with P.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight


def test_remove_parametrizations_both_ways():
    m = nn.Linear(2, 2, dtype=fg.float64)
    w0 = m.weight
    before = npv(w0).copy()
    P.register_parametrization(m, "weight", Scale())
    P.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and "parametrizations" not in m._modules
    assert m.weight is w0 and list(m.state_dict()) == ["bias", "weight"]
    # right_inverse stored w / 2, so the parametrized value was w all along.
    np.testing.assert_allclose(npv(m.weight), before, rtol=1e-12)
    P.register_parametrization(m, "weight", Scale())
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(npv(m.weight), before / 2.0, rtol=1e-12)  # the stored original


def test_parametrization_errors_name_the_problem():
    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="no parameter or buffer named 'nope'"):
        P.register_parametrization(m, "nope", Scale())

    class Shrink(nn.Module):
        def forward(self, x):
            return x[:1]

    with pytest.raises(ValueError, match="shape and dtype"):
        P.register_parametrization(m, "weight", Shrink())
    assert not P.is_parametrized(m)
    with pytest.raises(ValueError, match="no parametrization on 'weight'"):
        P.remove_parametrizations(m, "weight")


def test_weight_norm_parametrization_matches_numpy_and_gradchecks():
    m = nn.Conv2d(2, 3, 2, dtype=fg.float64)
    w = npv(m.weight).copy()
    nn.utils.parametrizations.weight_norm(m)
    assert list(m.state_dict()) == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    g = npv(m.parametrizations.weight.original0)
    np.testing.assert_allclose(g.reshape(-1), np.sqrt((w**2).sum(axis=(1, 2, 3))), rtol=1e-12)
    assert g.shape == (3, 1, 1, 1)
    np.testing.assert_allclose(npv(m.weight), w, rtol=1e-12)
    wn = m.parametrizations.weight[0]
    gg, vv = t64(3, 1, 1, 1, requires_grad=True), t64(3, 2, 2, 2, requires_grad=True)
    assert fg.autograd.gradcheck(lambda a, b: wn(a, b), (gg, vv))
    whole = nn.utils.parametrizations.weight_norm(nn.Linear(3, 2, dtype=fg.float64), dim=None)
    assert tuple(whole.parametrizations.weight.original0.shape) == ()


def _power_step_np(mat, u, v, eps=1e-12):
    u = mat @ v
    u = u / max(np.linalg.norm(u), eps)
    v = mat.T @ u
    return u, v / max(np.linalg.norm(v), eps)


def test_spectral_norm_iterates_in_training_only_and_divides_by_sigma():
    fg.manual_seed(0)
    m = nn.Linear(4, 3, dtype=fg.float64)
    nn.utils.parametrizations.spectral_norm(m)
    sn = m.parametrizations.weight[0]
    w = npv(m.parametrizations.weight.original)
    u0, v0 = npv(sn._u).copy(), npv(sn._v).copy()
    out = m.weight  # training mode: one step, u first then v (PyTorch's order)
    u1, v1 = _power_step_np(w, u0, v0)
    np.testing.assert_allclose(npv(sn._u), u1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npv(out), w / (u1 @ w @ v1), rtol=1e-10)
    # 15 steps at registration already converge on this small matrix: sigma is the top singular value.
    np.testing.assert_allclose(u1 @ w @ v1, np.linalg.svd(w, compute_uv=False)[0], rtol=1e-6)
    after_train = npv(sn._u).copy()
    m.eval()
    _ = m.weight
    np.testing.assert_array_equal(npv(sn._u), after_train)  # eval: no power iteration


def test_parametrized_module_compiles_to_eager():
    fg.manual_seed(1)
    m = nn.Linear(4, 3, dtype=fg.float64)
    nn.utils.parametrizations.spectral_norm(m)
    m.eval()
    x = t64(2, 4)
    with fg.no_grad():
        eager = npv(m(x))
        compiled = npv(fg.compile(m)(x))
    np.testing.assert_allclose(compiled, eager, rtol=1e-12)


def test_legacy_weight_norm_keys_values_and_removal():
    m = nn.Linear(3, 2, dtype=fg.float64)
    w = npv(m.weight).copy()
    nn.utils.weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    np.testing.assert_allclose(npv(m.weight_g).reshape(-1), np.linalg.norm(w, axis=1), rtol=1e-12)
    with fg.no_grad():
        m.weight_g.mul_(2.0)
    x = t64(5, 3)
    np.testing.assert_allclose(npv(m(x)), npv(x) @ (2 * w).T + npv(m.bias), rtol=1e-10)
    with pytest.raises(RuntimeError, match="two weight_norm hooks"):
        nn.utils.weight_norm(m)
    nn.utils.remove_weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(npv(m.weight), 2 * w, rtol=1e-12)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(m)


def test_legacy_spectral_norm_keys_and_training_only_iteration():
    fg.manual_seed(2)
    m = nn.Linear(4, 3, dtype=fg.float64)
    w = npv(m.weight).copy()
    nn.utils.spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    u0, v0 = npv(m.weight_u).copy(), npv(m.weight_v).copy()
    x = t64(2, 4)
    m(x)  # training: v first, then u (the legacy order)
    v1 = w.T @ u0
    v1 /= np.linalg.norm(v1)
    u1 = w @ v1
    u1 /= np.linalg.norm(u1)
    np.testing.assert_allclose(npv(m.weight_u), u1, rtol=1e-10)
    np.testing.assert_allclose(npv(m.weight), w / (u1 @ w @ v1), rtol=1e-10)
    after_train = npv(m.weight_u).copy()
    m.eval()
    m(x)
    np.testing.assert_array_equal(npv(m.weight_u), after_train)  # eval: no power iteration
    assert v0.shape == (4,)
    nn.utils.remove_spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(npv(m.weight), w / (u1 @ w @ v1), rtol=1e-10)


@pytest.mark.parametrize("two_d", [False, True])
def test_embedding_bag_max_gradient_goes_to_the_first_maximal_row(two_d):
    w = fg.tensor([[1.0, 5.0], [1.0, 2.0], [0.0, 5.0]], dtype=fg.float64, requires_grad=True)
    if two_d:
        out = F.embedding_bag(fg.tensor([[0, 1, 2]]), w, mode="max")
    else:
        out = F.embedding_bag(fg.tensor([0, 1, 2]), w, fg.tensor([0]), mode="max")
    np.testing.assert_array_equal(npv(out), [[1.0, 5.0]])
    out.sum().backward()
    np.testing.assert_array_equal(npv(w.grad), [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
