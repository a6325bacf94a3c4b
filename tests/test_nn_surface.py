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
