"""Transposed and 3-D convolutions, ``affine_grid`` / ``grid_sample`` and CTC loss:
parity with PyTorch (stored references, ``scripts/make_conv_grid_ctc_references.py``),
the layers (``ConvTranspose1d/2d/3d``, ``Conv3d``, ``CTCLoss``: parameters, state_dict,
initialisation, ``output_size``), identities that need no reference, and errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

nn = fg.nn
F = fg.nn.functional

REF = Path(__file__).parent / "fixtures" / "parity" / "conv_grid_ctc.npz"
_DATA = np.load(REF)
CASES = [str(c) for c in _DATA["cases"]]


def _call(fn: str, tensors: dict, kwargs: dict):
    if fn == "ctc_loss":
        kw = dict(kwargs)
        tg = fg.tensor(np.asarray(kw.pop("targets"), np.int64))
        return F.ctc_loss(F.log_softmax(tensors["logits"], 2), tg, **kw)
    if fn == "affine_grid":
        return F.affine_grid(tensors["theta"], **kwargs)
    if fn == "grid_sample":
        return F.grid_sample(tensors["input"], tensors["grid"], **kwargs)
    return getattr(F, fn)(*tensors.values(), **kwargs)


@pytest.mark.parametrize("case", CASES)
def test_parity_with_torch(case):
    fn = str(_DATA[f"{case}/fn"])
    kwargs = json.loads(str(_DATA[f"{case}/kwargs"]))
    prefix = f"{case}/in/"
    names = [k[len(prefix) :] for k in _DATA.files if k.startswith(prefix)]
    # The stored order is the call order (npz keeps insertion order).
    tensors = {k: fg.tensor(_DATA[prefix + k], requires_grad=True) for k in names}
    out = _call(fn, tensors, kwargs)
    np.testing.assert_allclose(out.detach().numpy(), _DATA[f"{case}/out"], rtol=1e-10, atol=1e-10)
    (out * fg.tensor(_DATA[f"{case}/cot"])).sum().backward()
    for k, t in tensors.items():
        if fn == "grid_sample" and kwargs["mode"] == "nearest" and k == "grid":
            # PyTorch gives the grid no gradient in nearest mode; ours is zero.
            assert t.grad is None or not t.grad.numpy().any()
            continue
        np.testing.assert_allclose(
            t.grad.numpy(), _DATA[f"{case}/grad/{k}"], rtol=1e-9, atol=1e-10, err_msg=k
        )


def test_references_record_their_torch_version():
    assert str(_DATA["torch_version"]).startswith("2.")


# ---------------------------------------------------------------------------
# identities
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stride,padding,dilation,groups",
    [(1, 0, 1, 1), (2, 1, 1, 1), ((2, 3), (1, 0), (1, 2), 2), (3, 2, 2, 1)],
)
def test_conv_transpose2d_is_conv2d_input_gradient(stride, padding, dilation, groups):
    """conv_transpose2d(g, w) is the gradient of conv2d's input for the output gradient g,
    with output_padding making up the rows and columns a strided conv2d drops."""
    rng = np.random.default_rng(0)
    x = fg.tensor(rng.standard_normal((2, 4, 9, 10)), requires_grad=True)
    w = fg.tensor(rng.standard_normal((6, 4 // groups, 3, 2)))
    y = F.conv2d(x, w, None, stride, padding, dilation, groups)
    g = fg.tensor(rng.standard_normal(tuple(y.shape)))
    (gx,) = fg.autograd.grad(y, x, g)
    s = (stride, stride) if isinstance(stride, int) else stride
    p = (padding, padding) if isinstance(padding, int) else padding
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    base = [(y.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * ((3, 2)[i] - 1) + 1 for i in range(2)]
    op = (9 - base[0], 10 - base[1])
    got = F.conv_transpose2d(g, w, None, stride, padding, op, groups, dilation)
    np.testing.assert_allclose(got.numpy(), gx.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("align", [False, True])
def test_identity_affine_grid_samples_the_input_back(align):
    rng = np.random.default_rng(1)
    x = fg.tensor(rng.standard_normal((2, 3, 5, 4)))
    theta = fg.tensor(np.tile(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (2, 1, 1)))
    grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=align)
    for mode in ("bilinear", "nearest"):
        y = F.grid_sample(x, grid, mode=mode, align_corners=align)
        np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=1e-12, atol=1e-12)


def test_grid_sample_gradients_match_finite_differences():
    rng = np.random.default_rng(2)
    x = fg.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    grid = fg.tensor(rng.uniform(-1.3, 1.3, (1, 2, 3, 2)), requires_grad=True)
    for pm in ("zeros", "border", "reflection"):
        assert fg.autograd.gradcheck(
            lambda a, b, pm=pm: F.grid_sample(a, b, "bilinear", pm, False), (x, grid)
        )


def test_ctc_loss_gradcheck_through_log_softmax():
    rng = np.random.default_rng(3)
    z = fg.tensor(rng.standard_normal((5, 2, 4)), requires_grad=True)
    tg = fg.tensor([[1, 1], [2, 3]])

    def f(z):
        return F.ctc_loss(F.log_softmax(z, 2), tg, [5, 4], [2, 2], reduction="sum")

    assert fg.autograd.gradcheck(f, (z,))
    assert fg.autograd.gradgradcheck(f, (z,))


# ---------------------------------------------------------------------------
# layers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls,n", [(nn.ConvTranspose1d, 1), (nn.ConvTranspose2d, 2), (nn.ConvTranspose3d, 3)])
def test_conv_transpose_layer_parameters(cls, n):
    m = cls(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert list(m.state_dict()) == ["weight", "bias"]
    assert tuple(m.weight.shape) == (4, 3) + (3,) * n  # (in, out/groups, *kernel), as PyTorch
    assert tuple(m.bias.shape) == (6,)
    # kaiming_uniform_(a=sqrt(5)) on the weight as laid out: fan_in = out/groups * kernel.
    fan_in = 3 * 3**n
    bound = 1 / math.sqrt(fan_in)
    assert np.abs(m.weight.detach().numpy()).max() <= bound + 1e-7
    assert np.abs(m.bias.detach().numpy()).max() <= bound + 1e-7
    assert m.weight.detach().numpy().std() > bound / 4
    x = fg.randn(2, 4, *(3,) * n)
    assert tuple(m(x).shape) == (2, 6) + (6,) * n
    assert tuple(m(x[0]).shape) == (6,) + (6,) * n
    assert cls(4, 6, 3, bias=False).bias is None
    assert "output_padding=" in repr(m) and "groups=2" in repr(m)


def test_conv_transpose_layer_loads_a_state_dict():
    src = nn.ConvTranspose2d(3, 4, (2, 3), stride=2)
    dst = nn.ConvTranspose2d(3, 4, (2, 3), stride=2)
    dst.load_state_dict(src.state_dict())
    x = fg.randn(1, 3, 4, 4)
    np.testing.assert_array_equal(dst(x).detach().numpy(), src(x).detach().numpy())


def test_conv_transpose_output_size():
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = fg.randn(1, 2, 5, 6)
    assert tuple(m(x).shape) == (1, 3, 9, 11)
    assert tuple(m(x, output_size=[10, 12]).shape) == (1, 3, 10, 12)
    assert tuple(m(x, output_size=(1, 3, 10, 11)).shape) == (1, 3, 10, 11)
    assert tuple(m(x[0], output_size=(9, 12)).shape) == (3, 9, 12)
    with pytest.raises(ValueError, match="ConvTranspose2d: requested an output size of \\[11, 12\\]"):
        m(x, output_size=(11, 12))
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        m(x, output_size=(10,))
    # Downsample then upsample back to the input's size, as encoder-decoders do.
    down = nn.Conv2d(2, 2, 3, stride=2, padding=1)
    x = fg.randn(1, 2, 7, 8)
    assert tuple(m(down(x), output_size=x.shape).shape[2:]) == (7, 8)


def test_conv_transpose_layer_rejects_other_padding_modes():
    with pytest.raises(ValueError, match='only "zeros" padding_mode'):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.ConvTranspose2d(3, 2, 3, groups=2)


def test_dcgan_generator_trains():
    fg.manual_seed(0)
    gen = nn.Sequential(
        nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(True),
        nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(True),
        nn.ConvTranspose2d(8, 3, 4, 2, 1, bias=False),
        nn.Tanh(),
    )
    z = fg.randn(4, 8, 1, 1)
    out = gen(z)
    assert tuple(out.shape) == (4, 3, 16, 16)
    opt = fg.optim.Adam(gen.parameters(), lr=1e-2)
    target = fg.zeros(4, 3, 16, 16)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((gen(z) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_conv3d_layer():
    m = nn.Conv3d(2, 4, 3, padding="same", padding_mode="replicate")
    assert tuple(m.weight.shape) == (4, 2, 3, 3, 3)
    assert list(m.state_dict()) == ["weight", "bias"]
    assert tuple(m(fg.randn(1, 2, 4, 5, 3)).shape) == (1, 4, 4, 5, 3)


def test_ctc_loss_layer():
    rng = np.random.default_rng(4)
    lp = F.log_softmax(fg.tensor(rng.standard_normal((6, 2, 4))), 2)
    tg = fg.tensor([[1, 2, 3], [3, 3, 0]])
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    got = m(lp, tg, fg.tensor([6, 5]), fg.tensor([3, 2]))
    want = F.ctc_loss(lp, tg, [6, 5], [3, 2], reduction="sum", zero_infinity=True)
    assert got.item() == want.item()
    assert "zero_infinity=True" in repr(m) and "reduction='sum'" in repr(m)
    # Unbatched: (T, C) log-probabilities with a 1-D target.
    one = F.ctc_loss(lp[:, 0], tg[0], [6], [3], reduction="none")
    assert (
        one.shape == ()
        and abs(one.item() - F.ctc_loss(lp, tg, [6, 5], [3, 2], reduction="none")[0].item()) < 1e-6
    )


# ---------------------------------------------------------------------------
# errors name the op, the shapes and the dtypes
# ---------------------------------------------------------------------------


def test_errors():
    x = fg.randn(1, 4, 3, 3)
    with pytest.raises(ValueError, match=r"conv_transpose2d: input \(1, 4, 3, 3\).*weight \(3, 2, 3, 3\)"):
        F.conv_transpose2d(x, fg.randn(3, 2, 3, 3))
    with pytest.raises(
        TypeError, match="conv_transpose2d: not implemented for input of dtype ferrograd.int64"
    ):
        F.conv_transpose2d(fg.zeros(1, 4, 3, 3, dtype=fg.int64), fg.randn(4, 2, 3, 3))
    with pytest.raises(ValueError, match="conv_transpose2d: output padding must be smaller"):
        F.conv_transpose2d(x, fg.randn(4, 2, 3, 3), output_padding=1)
    with pytest.raises(ValueError, match="conv_transpose1d: expected 2-D \\(unbatched\\) or 3-D"):
        F.conv_transpose1d(x, fg.randn(4, 2, 3))
    with pytest.raises(ValueError, match="non-positive output size"):
        F.conv_transpose2d(x, fg.randn(4, 2, 1, 1), padding=2)
    with pytest.raises(ValueError, match="conv3d: padding='same' is not supported for strided"):
        F.conv3d(fg.randn(1, 2, 3, 3, 3), fg.randn(2, 2, 1, 1, 1), stride=2, padding="same")
    with pytest.raises(ValueError, match=r"grid_sample: expected grid of shape \(N, H_out, W_out, 2\)"):
        F.grid_sample(x, fg.randn(1, 2, 2, 3))
    with pytest.raises(ValueError, match="grid_sample: mode must be one of"):
        F.grid_sample(x, fg.randn(1, 2, 2, 2), mode="bicubic")
    with pytest.raises(TypeError, match="grid_sample: expected input and grid to have the same dtype"):
        F.grid_sample(x, fg.randn(1, 2, 2, 2, dtype=fg.float64))
    with pytest.raises(ValueError, match=r"affine_grid: expected theta of shape \(1, 2, 3\)"):
        F.affine_grid(fg.randn(1, 3, 4), (1, 1, 4, 4))
    lp = fg.randn(5, 2, 4).log_softmax(2)
    with pytest.raises(ValueError, match=r"ctc_loss: input_lengths must be in \[0, 5\]"):
        F.ctc_loss(lp, fg.tensor([[1], [2]]), [6, 5], [1, 1])
    with pytest.raises(ValueError, match="ctc_loss: concatenated targets of length 3"):
        F.ctc_loss(lp, fg.tensor([1, 2, 3]), [5, 5], [1, 1])
    with pytest.raises(TypeError, match="ctc_loss: targets must hold integer class indices"):
        F.ctc_loss(lp, fg.zeros(2, 1), [5, 5], [1, 1])
