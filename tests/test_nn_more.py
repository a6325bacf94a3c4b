"""Layers composed of registry ops: channel dropout, the transformer family, instance/group/local
response norms, padding, upsampling, pixel shuffles, distances, bilinear, the composed activations
and losses, and ``nn.utils.rnn.pad_sequence``.

Forwards are checked against float64 NumPy implementations of PyTorch's documented formulas,
gradients against finite differences (float64), train/eval behaviour, ``state_dict`` key names
(PyTorch's, so its checkpoints load), ``repr``, and ``fg.compile`` against eager. The
functionals themselves are op-table entries (``tests/optable/composed.py``).
"""

from __future__ import annotations

import math
import warnings

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.nn import functional as F
from ferrograd.nn.utils.rnn import pad_sequence

RNG = np.random.default_rng(0)


def t64(*shape, lo=-1.0, hi=1.0, requires_grad=False):
    return fg.tensor(RNG.uniform(lo, hi, size=shape), dtype=fg.float64, requires_grad=requires_grad)


def npv(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def sd(module):
    return {k: npv(v) for k, v in module.state_dict().items()}


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(npv(a) if isinstance(a, fg.Tensor) else a, b, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# channel dropout
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,shape",
    [
        (nn.Dropout1d, (4, 6, 5)),
        (nn.Dropout1d, (6, 5)),
        (nn.Dropout2d, (4, 6, 3, 3)),
        (nn.Dropout3d, (3, 5, 2, 2, 2)),
        (nn.Dropout3d, (5, 2, 2, 2)),
    ],
)
def test_channel_dropout_drops_whole_channels(cls, shape):
    fg.manual_seed(3)
    m = cls(p=0.5)
    x = fg.ones(shape)
    y = npv(m(x))
    # every (sample, channel) slice is all 0 or all 1/(1-p)
    lead = 2 if len(shape) == cls_batched(cls) else 1
    slices = y.reshape(int(np.prod(shape[:lead])), -1)
    for s in slices:
        assert np.all(s == 0.0) or np.allclose(s, 2.0), s
    kept = np.mean([s[0] != 0 for s in slices])
    assert 0.0 < kept < 1.0
    m.eval()
    assert m(x) is x


def cls_batched(cls):
    return {nn.Dropout1d: 3, nn.Dropout2d: 4, nn.Dropout3d: 5}[cls]


def test_channel_dropout_gradient_is_the_mask():
    fg.manual_seed(7)
    x = t64(3, 4, 2, 2, requires_grad=True)
    y = F.dropout2d(x, 0.25, True)
    y.sum().backward()
    mask = npv(y) / npv(x)
    close(x.grad, mask)
    assert set(np.unique(np.round(mask, 12))) <= {0.0, round(1 / 0.75, 12)}


def test_channel_dropout_edges_and_errors():
    x = fg.ones((2, 3, 4, 4))
    assert float(F.dropout2d(x, 1.0).abs().sum()) == 0.0
    assert F.dropout2d(x, 0.0) is x
    assert F.dropout2d(x, 0.5, training=False) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout2d(1.5)
    with pytest.raises(ValueError, match="dropout1d.*4-D"):
        F.dropout1d(fg.ones((2, 3, 4, 4)))
    with pytest.warns(UserWarning, match="3-D input"):
        y = F.dropout2d(fg.ones((2, 3, 5)), 0.5)
    assert tuple(y.shape) == (2, 3, 5)
    assert repr(nn.Dropout2d(0.3)) == "Dropout2d(p=0.3, inplace=False)"
    y = fg.ones((2, 3, 2, 2))
    fg.manual_seed(0)
    out = nn.Dropout2d(0.5, inplace=True)(y)
    assert out is y


# ---------------------------------------------------------------------------
# transformer family: NumPy reference
# ---------------------------------------------------------------------------


def np_ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def np_mha(q, k, v, p, prefix, nhead, attn_mask=None, kpm=None):
    """Batch-first (N, L, E) multi-head attention with PyTorch's parameter layout."""
    e = q.shape[-1]
    w, b = p[prefix + "in_proj_weight"], p[prefix + "in_proj_bias"]
    hd = e // nhead

    def heads(x, i):
        y = x @ w[i * e : (i + 1) * e].T + b[i * e : (i + 1) * e]
        return y.reshape(x.shape[0], x.shape[1], nhead, hd).transpose(0, 2, 1, 3)

    qh, kh, vh = heads(q, 0), heads(k, 1), heads(v, 2)
    s = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if attn_mask is not None:
        s = s + attn_mask
    if kpm is not None:
        s = np.where(kpm[:, None, None, :], -np.inf, s)
    s = np.exp(s - s.max(-1, keepdims=True))
    a = s / s.sum(-1, keepdims=True)
    o = (a @ vh).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], e)
    return o @ p[prefix + "out_proj.weight"].T + p[prefix + "out_proj.bias"]


def np_ff(x, p, pre, act):
    h = x @ p[pre + "linear1.weight"].T + p[pre + "linear1.bias"]
    h = np.maximum(h, 0) if act == "relu" else np_gelu(h)
    return h @ p[pre + "linear2.weight"].T + p[pre + "linear2.bias"]


def np_encoder_layer(x, p, nhead, norm_first, act, mask=None, kpm=None, pre=""):
    def ln(y, i):
        return np_ln(y, p[f"{pre}norm{i}.weight"], p[f"{pre}norm{i}.bias"])

    def sa(y):
        return np_mha(y, y, y, p, pre + "self_attn.", nhead, mask, kpm)

    if norm_first:
        x = x + sa(ln(x, 1))
        return x + np_ff(ln(x, 2), p, pre, act)
    x = ln(x + sa(x), 1)
    return ln(x + np_ff(x, p, pre, act), 2)


def np_decoder_layer(x, mem, p, nhead, norm_first, act, tmask=None, mkpm=None, pre=""):
    def ln(y, i):
        return np_ln(y, p[f"{pre}norm{i}.weight"], p[f"{pre}norm{i}.bias"])

    def sa(y):
        return np_mha(y, y, y, p, pre + "self_attn.", nhead, tmask)

    def ca(y):
        return np_mha(y, mem, mem, p, pre + "multihead_attn.", nhead, None, mkpm)

    if norm_first:
        x = x + sa(ln(x, 1))
        x = x + ca(ln(x, 2))
        return x + np_ff(ln(x, 3), p, pre, act)
    x = ln(x + sa(x), 1)
    x = ln(x + ca(x), 2)
    return ln(x + np_ff(x, p, pre, act), 3)


def randomize(module):
    """Non-trivial values for every parameter (norm weights/biases included)."""
    with fg.no_grad():
        for prm in module.parameters():
            prm.copy_(fg.tensor(RNG.uniform(-0.5, 0.5, size=tuple(prm.shape)), dtype=prm.dtype))
    return module


ENC_KEYS = [
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
]
DEC_KEYS = [
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
    "multihead_attn.in_proj_weight",
    "multihead_attn.in_proj_bias",
    "multihead_attn.out_proj.weight",
    "multihead_attn.out_proj.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
    "norm3.weight",
    "norm3.bias",
]


def test_transformer_state_dict_keys_are_pytorchs():
    enc = nn.TransformerEncoderLayer(8, 2, 16)
    assert list(enc.state_dict()) == ENC_KEYS
    shapes = {k: tuple(v.shape) for k, v in enc.state_dict().items()}
    assert shapes["self_attn.in_proj_weight"] == (24, 8) and shapes["linear1.weight"] == (16, 8)
    dec = nn.TransformerDecoderLayer(8, 2, 16)
    assert list(dec.state_dict()) == DEC_KEYS
    stack = nn.TransformerEncoder(enc, 2, norm=nn.LayerNorm(8))
    assert list(stack.state_dict()) == [f"layers.{i}.{k}" for i in range(2) for k in ENC_KEYS] + [
        "norm.weight",
        "norm.bias",
    ]
    model = nn.Transformer(8, 2, 1, 1, 16)
    keys = list(model.state_dict())
    assert keys == (
        [f"encoder.layers.0.{k}" for k in ENC_KEYS]
        + ["encoder.norm.weight", "encoder.norm.bias"]
        + [f"decoder.layers.0.{k}" for k in DEC_KEYS]
        + ["decoder.norm.weight", "decoder.norm.bias"]
    )
    # a checkpoint with those names (as PyTorch writes it) loads strictly
    ck = {
        k: fg.tensor(RNG.standard_normal(tuple(v.shape)), dtype=fg.float32)
        for k, v in model.state_dict().items()
    }
    model.load_state_dict(ck, strict=True)
    np.testing.assert_array_equal(
        model.encoder.layers[0].linear1.weight.numpy(), ck["encoder.layers.0.linear1.weight"].numpy()
    )


def test_encoder_layers_are_independent_copies():
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    stack = nn.TransformerEncoder(layer, 3)
    ws = [m.linear1.weight for m in stack.layers]
    assert len({id(w) for w in ws}) == 3 and all(w is not layer.linear1.weight for w in ws)
    np.testing.assert_array_equal(ws[0].numpy(), ws[2].numpy())  # deep copies of one layer, as PyTorch


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_encoder_layer_matches_numpy(norm_first, act):
    layer = randomize(
        nn.TransformerEncoderLayer(
            8, 2, 12, dropout=0.1, activation=act, norm_first=norm_first, batch_first=True, dtype=fg.float64
        )
    ).eval()
    x = RNG.standard_normal((3, 5, 8))
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    kpm = np.zeros((3, 5), bool)
    kpm[1, 3:] = True
    got = layer(fg.tensor(x), src_mask=fg.tensor(mask), src_key_padding_mask=fg.tensor(kpm))
    close(got, np_encoder_layer(x, sd(layer), 2, norm_first, act, mask, kpm), rtol=1e-9, atol=1e-10)
    # a bool src_mask (True = may not attend) gives the same
    got_b = layer(fg.tensor(x), src_mask=fg.tensor(np.isinf(mask)), src_key_padding_mask=fg.tensor(kpm))
    close(got_b, npv(got))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_numpy(norm_first):
    layer = randomize(
        nn.TransformerDecoderLayer(8, 4, 12, norm_first=norm_first, batch_first=True, dtype=fg.float64)
    ).eval()
    tgt, mem = RNG.standard_normal((2, 4, 8)), RNG.standard_normal((2, 6, 8))
    tmask = np.asarray(nn.Transformer.generate_square_subsequent_mask(4, dtype=fg.float64).numpy())
    mkpm = np.zeros((2, 6), bool)
    mkpm[0, 4:] = True
    got = layer(
        fg.tensor(tgt), fg.tensor(mem), tgt_mask=fg.tensor(tmask), memory_key_padding_mask=fg.tensor(mkpm)
    )
    close(
        got, np_decoder_layer(tgt, mem, sd(layer), 4, norm_first, "relu", tmask, mkpm), rtol=1e-9, atol=1e-10
    )


def test_transformer_matches_numpy_and_batch_first_agrees():
    kw = dict(
        d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=12, dtype=fg.float64
    )
    m = randomize(nn.Transformer(**kw)).eval()
    mb = nn.Transformer(**kw, batch_first=True).eval()
    mb.load_state_dict(m.state_dict())
    src, tgt = RNG.standard_normal((5, 2, 8)), RNG.standard_normal((3, 2, 8))  # (S, N, E)
    tmask = m.generate_square_subsequent_mask(3, dtype=fg.float64)
    out = m(fg.tensor(src), fg.tensor(tgt), tgt_mask=tmask)
    assert tuple(out.shape) == (3, 2, 8)
    p = sd(m)
    mem = src.transpose(1, 0, 2)
    for i in range(2):
        mem = np_encoder_layer(mem, p, 2, False, "relu", pre=f"encoder.layers.{i}.")
    mem = np_ln(mem, p["encoder.norm.weight"], p["encoder.norm.bias"])
    y = tgt.transpose(1, 0, 2)
    for i in range(2):
        y = np_decoder_layer(y, mem, p, 2, False, "relu", npv(tmask), pre=f"decoder.layers.{i}.")
    y = np_ln(y, p["decoder.norm.weight"], p["decoder.norm.bias"])
    close(out, y.transpose(1, 0, 2), rtol=1e-9, atol=1e-10)
    out_b = mb(fg.tensor(src.transpose(1, 0, 2)), fg.tensor(tgt.transpose(1, 0, 2)), tgt_mask=tmask)
    close(out_b, npv(out).transpose(1, 0, 2))
    # unbatched input: the batched result's single sample
    one = m(fg.tensor(src[:, 0]), fg.tensor(tgt[:, 0]), tgt_mask=tmask)
    close(one, npv(out)[:, 0])


def test_transformer_masks_and_errors():
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(mask.numpy(), [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])
    assert mask.dtype == fg.float32
    m = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(ValueError, match="batch number of src"):
        m(fg.randn(4, 2, 8), fg.randn(3, 3, 8))
    with pytest.raises(ValueError, match="d_model"):
        m(fg.randn(4, 2, 6), fg.randn(3, 2, 6))
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    # a callable activation is used as given (a Module is registered, without parameters)
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU(), dropout=0.0).eval()
    ref = nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", dropout=0.0).eval()
    ref.load_state_dict(layer.state_dict())
    x = fg.randn(3, 2, 8)
    np.testing.assert_allclose(layer(x).numpy(), ref(x).numpy(), rtol=1e-6, atol=1e-6)
    assert list(layer.state_dict()) == ENC_KEYS
    # is_causal without a mask builds the causal mask
    causal = layer(x, is_causal=True)
    np.testing.assert_allclose(
        causal.numpy(),
        layer(x, src_mask=nn.Transformer.generate_square_subsequent_mask(3)).numpy(),
        rtol=1e-6,
        atol=1e-6,
    )


def test_transformer_dropout_train_vs_eval():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = fg.randn(4, 2, 8)
    fg.manual_seed(1)
    a = layer(x)
    fg.manual_seed(2)
    b = layer(x)
    assert not np.allclose(a.numpy(), b.numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())


def test_encoder_layer_gradcheck():
    layer = randomize(nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, dtype=fg.float64))
    x = t64(3, 2, 4, requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=fg.float64)
    assert fg.autograd.gradcheck(lambda s: layer(s, src_mask=mask), [x])
    w = layer.linear1.weight
    # parameter gradients against finite differences of the loss
    x0 = x.detach()
    layer.zero_grad()
    (layer(x0) ** 2).sum().backward()
    g = npv(w.grad)
    base = npv(w).copy()
    eps = 1e-6
    num = np.zeros_like(base)
    for i in range(base.shape[0]):
        for j in range(base.shape[1]):
            for sgn in (1, -1):
                b2 = base.copy()
                b2[i, j] += sgn * eps
                with fg.no_grad():
                    w.copy_(fg.tensor(b2))
                    num[i, j] += sgn * float((layer(x0) ** 2).sum()) / (2 * eps)
    with fg.no_grad():
        w.copy_(fg.tensor(base))
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-7)


def test_small_transformer_encoder_trains():
    fg.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 2)
    head = nn.Linear(16, 3)
    params = list(enc.parameters()) + list(head.parameters())
    opt = fg.optim.Adam(params, lr=1e-2)
    x = fg.randn(8, 5, 16)
    y = fg.tensor(RNG.integers(0, 3, size=8), dtype=fg.int64)
    losses = []
    for _ in range(12):
        loss = F.cross_entropy(head(enc(x).mean(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses


def test_compiled_transformer_equals_eager():
    fg.manual_seed(0)
    m = nn.Transformer(16, 2, 2, 2, 32, batch_first=True).eval()
    src, tgt = fg.randn(2, 6, 16), fg.randn(2, 4, 16)
    mask = m.generate_square_subsequent_mask(4)
    kpm = fg.tensor(np.array([[False] * 6, [False] * 4 + [True] * 2]))
    cm = fg.compile(m)
    with fg.no_grad():
        want = m(src, tgt, tgt_mask=mask, src_key_padding_mask=kpm)
        for _ in range(2):
            got = cm(src, tgt, tgt_mask=mask, src_key_padding_mask=kpm)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# instance, group and local response norms
# ---------------------------------------------------------------------------


def np_inorm(x, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(shape) + b.reshape(shape)
    return y


def test_instance_norm_forward_running_stats_and_eval():
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.2, dtype=fg.float64)
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert list(nn.InstanceNorm2d(3).state_dict()) == []
    randomize(m)
    x = RNG.standard_normal((2, 3, 4, 5)) * 2 + 1
    y = m(fg.tensor(x))
    w, b = npv(m.weight), npv(m.bias)
    close(y, np_inorm(x, w, b))
    n = 20
    rm = 0.8 * 0 + 0.2 * x.mean((2, 3)).mean(0)
    rv = 0.8 * 1 + 0.2 * (x.var((2, 3)) * n / (n - 1)).mean(0)
    close(m.running_mean, rm)
    close(m.running_var, rv)
    assert int(m.num_batches_tracked) == 0  # as PyTorch: instance norm does not count batches
    m.eval()
    y2 = m(fg.tensor(x))
    close(
        y2,
        (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5) * w.reshape(1, 3, 1, 1)
        + b.reshape(1, 3, 1, 1),
    )
    # unbatched (C, H, W)
    close(m.train()(fg.tensor(x[0])), np_inorm(x[:1], w, b)[0])
    assert (
        repr(nn.InstanceNorm1d(4))
        == "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)"
    )


def test_norm_layers_take_bias_false_as_pytorch():
    """PyTorch 2.15's ``bias=`` on the norm layers: ``bias=False`` keeps the scale, drops the
    shift (no ``bias`` parameter or key), and the repr says so, as PyTorch's does."""
    x = t64(2, 4, 2, 3)
    xv = npv(x)
    for m, axes in (
        (nn.BatchNorm2d(4, bias=False, dtype=fg.float64), (0, 2, 3)),
        (nn.InstanceNorm2d(4, affine=True, bias=False, dtype=fg.float64), (2, 3)),
        (nn.GroupNorm(4, 4, bias=False, dtype=fg.float64), (2, 3)),
    ):
        assert m.bias is None and list(dict(m.named_parameters())) == ["weight"]
        assert "bias" not in m.state_dict() and "bias=False" in repr(m)
        m = randomize(m)
        mu, var = xv.mean(axes, keepdims=True), xv.var(axes, keepdims=True)
        close(m(x), (xv - mu) / np.sqrt(var + 1e-5) * npv(m.weight).reshape(1, 4, 1, 1))
    ln = nn.LayerNorm(3, bias=False)
    assert repr(ln) == "LayerNorm((3,), eps=1e-05, elementwise_affine=True, bias=False)"
    assert repr(nn.BatchNorm1d(3)) == (
        "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    )


def test_instance_norm_1d_gradcheck_and_errors():
    m = randomize(nn.InstanceNorm1d(2, affine=True, dtype=fg.float64))
    x = t64(2, 2, 4, requires_grad=True)
    close(m(x), np_inorm(npv(x), npv(m.weight), npv(m.bias)))
    assert fg.autograd.gradcheck(lambda v: m(v), [x])
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        nn.InstanceNorm1d(2)(fg.randn(2, 2, 1))
    with pytest.raises(ValueError, match="num_features"):
        nn.InstanceNorm2d(3, affine=True)(fg.randn(2, 4, 3, 3))
    with pytest.warns(UserWarning, match="num_features"):
        nn.InstanceNorm2d(3)(fg.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match="3D \\(unbatched\\) or 4D"):
        nn.InstanceNorm2d(3)(fg.randn(3, 3))


def test_group_norm():
    m = randomize(nn.GroupNorm(2, 4, dtype=fg.float64))
    assert list(m.state_dict()) == ["weight", "bias"]
    x = t64(3, 4, 2, 3, requires_grad=True)
    xv = npv(x).reshape(3, 2, -1)
    mu, var = xv.mean(-1, keepdims=True), xv.var(-1, keepdims=True)
    ref = ((xv - mu) / np.sqrt(var + 1e-5)).reshape(3, 4, 2, 3) * npv(m.weight).reshape(1, 4, 1, 1) + npv(
        m.bias
    ).reshape(1, 4, 1, 1)
    close(m(x), ref)
    assert fg.autograd.gradcheck(lambda v: m(v), [x])
    assert repr(m) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="divisible by num_groups"):
        F.group_norm(fg.randn(2, 4), 3)


def test_local_response_norm():
    m = nn.LocalResponseNorm(3, alpha=0.1, beta=0.75, k=2.0)
    x = t64(2, 5, 3, requires_grad=True)
    xv = npv(x)
    sq = np.pad(xv**2, ((0, 0), (1, 1), (0, 0)))
    div = sum(sq[:, j : j + 5] for j in range(3)) / 3
    close(m(x), xv / (2.0 + 0.1 * div) ** 0.75)
    assert fg.autograd.gradcheck(lambda v: m(v), [x])
    assert repr(m) == "LocalResponseNorm(3, alpha=0.1, beta=0.75, k=2.0)"
    with pytest.raises(ValueError, match="3D or higher"):
        m(fg.randn(2, 5))


# ---------------------------------------------------------------------------
# padding, upsampling, pixel shuffle
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,np_mode,n",
    [
        (nn.ReflectionPad1d, "reflect", 1),
        (nn.ReflectionPad2d, "reflect", 2),
        (nn.ReflectionPad3d, "reflect", 3),
        (nn.ReplicationPad1d, "edge", 1),
        (nn.ReplicationPad2d, "edge", 2),
        (nn.ReplicationPad3d, "edge", 3),
        (nn.CircularPad1d, "wrap", 1),
        (nn.CircularPad2d, "wrap", 2),
        (nn.ZeroPad1d, "constant", 1),
        (nn.ZeroPad2d, "constant", 2),
        (nn.ZeroPad3d, "constant", 3),
    ],
)
def test_padding_modules_match_numpy(cls, np_mode, n):
    pads = (1, 2, 2, 0, 1, 1)[: 2 * n]
    m = cls(pads)
    x = t64(2, 3, *([4] * n), requires_grad=True)
    widths = [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in reversed(range(n))]
    close(m(x), np.pad(npv(x), widths, mode=np_mode))
    assert fg.autograd.gradcheck(lambda v: m(v), [x])
    # unbatched
    close(m(x[0]), np.pad(npv(x)[0], widths[1:], mode=np_mode))
    assert repr(m) == f"{cls.__name__}({pads})"
    with pytest.raises(ValueError, match=cls.__name__):
        m(fg.randn(*([3] * (n + 3))))


def test_constant_pad_and_int_padding():
    m = nn.ConstantPad2d(1, 3.5)
    assert m.padding == (1, 1, 1, 1)
    assert repr(m) == "ConstantPad2d(padding=(1, 1, 1, 1), value=3.5)"
    x = t64(1, 2, 2)
    close(m(x), np.pad(npv(x), ((0, 0), (1, 1), (1, 1)), constant_values=3.5))
    assert repr(nn.ZeroPad2d(2)) == "ZeroPad2d((2, 2, 2, 2))"
    with pytest.raises(ValueError, match="padding must be an int or a tuple of 4 ints"):
        nn.ReflectionPad2d((1, 2))


def np_resize_matrix(n_in, n_out, mode, align=False):
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        if mode == "nearest":
            m[i, min(int(np.floor(i * np.float32(n_in) / np.float32(n_out))), n_in - 1)] = 1
        else:
            r = (n_in - 1) / (n_out - 1) if align else n_in / n_out
            src = r * i if align else max(r * (i + 0.5) - 0.5, 0.0)
            i0 = min(int(src), n_in - 1)
            lam = src - i0
            m[i, i0] += 1 - lam
            m[i, min(i0 + 1, n_in - 1)] += lam
    return m


@pytest.mark.parametrize("mode,align", [("nearest", None), ("bilinear", False), ("bilinear", True)])
def test_upsample_matches_numpy(mode, align):
    m = nn.Upsample(size=(5, 7), mode=mode, align_corners=align)
    x = t64(2, 3, 3, 4, requires_grad=True)
    mh, mw = np_resize_matrix(3, 5, mode, bool(align)), np_resize_matrix(4, 7, mode, bool(align))
    close(m(x), np.einsum("hi,ncij,wj->nchw", mh, npv(x), mw))
    assert fg.autograd.gradcheck(lambda v: m(v), [x])


def test_upsample_scale_factor_repr_and_errors():
    m = nn.Upsample(scale_factor=2)
    assert repr(m) == "Upsample(scale_factor=2.0, mode='nearest')"
    x = fg.arange(4.0).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(
        m(x).numpy()[0, 0], [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]
    )
    assert repr(nn.UpsamplingBilinear2d(size=4)) == "UpsamplingBilinear2d(size=4, mode='bilinear')"
    assert nn.UpsamplingBilinear2d(size=4).align_corners is True
    with pytest.raises(ValueError, match="exactly one of size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="bilinear mode needs 4-D input"):
        F.interpolate(fg.randn(1, 1, 4), size=3, mode="bilinear")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=3, align_corners=True)


def test_pixel_shuffle_modules():
    ps, pu = nn.PixelShuffle(2), nn.PixelUnshuffle(2)
    assert repr(ps) == "PixelShuffle(upscale_factor=2)" and repr(pu) == "PixelUnshuffle(downscale_factor=2)"
    x = t64(2, 8, 3, 2, requires_grad=True)
    y = ps(x)
    assert tuple(y.shape) == (2, 2, 6, 4)
    xv = npv(x)
    assert npv(y)[1, 1, 3, 2] == xv[1, 1 * 4 + 1 * 2 + 0, 1, 1]
    close(pu(y), xv)
    assert fg.autograd.gradcheck(lambda v: ps(v), [x])
    with pytest.raises(ValueError, match="divisible by the square of upscale_factor"):
        ps(fg.randn(1, 6, 2, 2))


def test_compiled_conv_stack_equals_eager():
    fg.manual_seed(0)
    model = nn.Sequential(
        nn.ReflectionPad2d(1),
        nn.Conv2d(3, 8, 3),
        nn.InstanceNorm2d(8, affine=True),
        nn.ReLU(),
        nn.Dropout2d(0.3),
        nn.Upsample(scale_factor=2, mode="nearest"),
        nn.ReplicationPad2d(1),
        nn.Conv2d(8, 8, 3),
        nn.GroupNorm(2, 8),
        nn.Hardswish(),
        nn.Conv2d(8, 12, 1),
        nn.PixelShuffle(2),
        nn.Upsample(size=(10, 12), mode="bilinear", align_corners=False),
        nn.PReLU(3),
        nn.Softmax2d(),
    ).eval()
    x = fg.randn(2, 3, 5, 6)
    cm = fg.compile(model)
    with fg.no_grad():
        want = model(x)
        assert tuple(want.shape) == (2, 3, 10, 12)
        for _ in range(2):
            np.testing.assert_allclose(cm(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# distances, bilinear, activations, losses, Identity
# ---------------------------------------------------------------------------


def test_identity_bilinear_and_distances():
    assert nn.Identity(3, foo=1)(x := fg.randn(2)) is x
    m = nn.Bilinear(3, 4, 2, dtype=fg.float64)
    assert list(m.state_dict()) == ["weight", "bias"] and tuple(m.weight.shape) == (2, 3, 4)
    assert float(m.weight.abs().max()) <= 1 / math.sqrt(3)
    assert repr(m) == "Bilinear(in1_features=3, in2_features=4, out_features=2, bias=True)"
    a, b = t64(5, 3, requires_grad=True), t64(5, 4, requires_grad=True)
    close(m(a, b), np.einsum("ni,oij,nj->no", npv(a), npv(m.weight), npv(b)) + npv(m.bias))
    assert fg.autograd.gradcheck(lambda u, v: m(u, v), [a, b])
    c = nn.CosineSimilarity(dim=1)(a, t64(5, 3))
    assert tuple(c.shape) == (5,)
    d = nn.PairwiseDistance(p=1.0, keepdim=True)
    u, v = t64(4, 3), t64(4, 3)
    close(d(u, v), np.abs(npv(u) - npv(v) + 1e-6).sum(-1, keepdims=True))
    with pytest.raises(ValueError, match="broadcast"):
        F.cosine_similarity(fg.randn(2, 3), fg.randn(4, 3))


def test_cosine_similarity_zero_vector_has_finite_gradient():
    x = fg.zeros(2, 3, dtype=fg.float64, requires_grad=True)
    y = t64(2, 3)
    F.cosine_similarity(x, y).sum().backward()
    assert np.isfinite(npv(x.grad)).all()


def test_activation_modules():
    x = t64(2, 3, 4, lo=-5, hi=5)
    xv = npv(x)
    close(nn.Hardswish()(x), xv * np.clip(xv + 3, 0, 6) / 6)
    close(nn.Hardsigmoid()(x), np.clip(xv + 3, 0, 6) / 6)
    close(nn.Mish()(x), xv * np.tanh(np.logaddexp(0, xv)))
    close(nn.SELU()(x), 1.0507009873554805 * np.where(xv > 0, xv, 1.6732632423543772 * np.expm1(xv)))
    close(nn.CELU(2.0)(x), np.maximum(xv, 0) + np.minimum(0, 2.0 * np.expm1(xv / 2.0)))
    close(nn.Hardtanh(-2, 2)(x), np.clip(xv, -2, 2))
    close(nn.ReLU6()(x), np.clip(xv, 0, 6))
    close(nn.LogSigmoid()(x), -np.logaddexp(0, -xv))
    close(nn.Softsign()(x), xv / (1 + np.abs(xv)))
    close(nn.Tanhshrink()(x), xv - np.tanh(xv))
    close(nn.GLU(1)(fg.tensor(xv[:, :2])), xv[:, :1] / (1 + np.exp(-xv[:, 1:2])))
    e = np.exp(-xv)
    close(nn.Softmin(1)(x), e / e.sum(1, keepdims=True))
    s = np.exp(xv)
    close(nn.Softmax2d()(x), s / s.sum(0, keepdims=True))  # (C, H, W): over dim -3
    assert [
        repr(m) for m in (nn.Hardtanh(), nn.ReLU6(inplace=True), nn.CELU(), nn.GLU(), nn.PReLU(3), nn.SELU())
    ] == [
        "Hardtanh(min_val=-1.0, max_val=1.0)",
        "ReLU6(inplace=True)",
        "CELU(alpha=1.0)",
        "GLU(dim=-1)",
        "PReLU(num_parameters=3)",
        "SELU()",
    ]
    with pytest.raises(ValueError, match="halving dimension must be even"):
        nn.GLU(0)(fg.randn(3, 2))
    y = fg.randn(3, 4)
    out = nn.Hardswish(inplace=True)(y)
    assert out is y


def test_prelu_weight_gradient():
    m = nn.PReLU(3, init=0.1, dtype=fg.float64)
    assert list(m.state_dict()) == ["weight"] and np.allclose(npv(m.weight), 0.1)
    x = t64(2, 3, 4, requires_grad=True)
    (m(x) * 2).sum().backward()
    xv = npv(x)
    close(m.weight.grad, (2 * np.where(xv > 0, 0, xv)).sum((0, 2)))
    close(x.grad, np.where(xv > 0, 2.0, 0.2))
    with pytest.raises(ValueError, match="1 or 3 elements"):
        F.prelu(fg.randn(2, 3), fg.randn(2))


def test_loss_modules():
    a, b = t64(6, requires_grad=True), t64(6)
    t = fg.tensor(np.array([1, -1, 1, 1, -1, -1.0]))
    close(nn.MarginRankingLoss(0.1)(a, b, t), np.maximum(-npv(t) * (npv(a) - npv(b)) + 0.1, 0).mean())
    anc, pos, neg = t64(4, 3), t64(4, 3), t64(4, 3)

    def dist(u, v):
        return np.sqrt(((u - v + 1e-6) ** 2).sum(-1))

    ref = np.maximum(dist(npv(anc), npv(pos)) - dist(npv(anc), npv(neg)) + 1.0, 0).sum()
    close(nn.TripletMarginLoss(reduction="sum")(anc, pos, neg), ref)
    tt = fg.tensor(np.array([1, -1, 1, -1]), dtype=fg.int64)
    u, v = npv(anc), npv(pos)
    cos = (u * v).sum(-1) / np.sqrt(((u * u).sum(-1) + 1e-12) * ((v * v).sum(-1) + 1e-12))
    close(
        nn.CosineEmbeddingLoss(0.2, reduction="none")(anc, pos, tt),
        np.where(npv(tt) == 1, 1 - cos, np.maximum(cos - 0.2, 0)),
    )
    x = t64(4, 5, lo=-3, hi=3)
    y = fg.tensor((RNG.random((4, 5)) < 0.5).astype(np.float64))
    w = t64(5, lo=0.5, hi=2)
    xv, yv = npv(x), npv(y)
    ls = -np.logaddexp(0, -xv)
    lns = -np.logaddexp(0, xv)
    close(nn.MultiLabelSoftMarginLoss(weight=w)(x, y), (-(yv * ls + (1 - yv) * lns) * npv(w)).mean(-1).mean())
    assert list(nn.MultiLabelSoftMarginLoss(weight=w).state_dict()) == ["weight"]
    with pytest.raises(ValueError, match="margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(ValueError, match="same dimension"):
        F.margin_ranking_loss(fg.randn(3), fg.randn(3), fg.randn(3, 1))


# ---------------------------------------------------------------------------
# nn.utils.rnn.pad_sequence
# ---------------------------------------------------------------------------


def test_pad_sequence():
    seqs = [t64(3, 2, requires_grad=True), t64(1, 2, requires_grad=True), t64(2, 2, requires_grad=True)]
    out = pad_sequence(seqs, padding_value=-1.0)
    assert tuple(out.shape) == (3, 3, 2)
    ref = np.full((3, 3, 2), -1.0)
    for i, s in enumerate(seqs):
        ref[: s.shape[0], i] = npv(s)
    close(out, ref)
    close(pad_sequence(seqs, batch_first=True, padding_value=-1.0), ref.transpose(1, 0, 2))
    left = pad_sequence(seqs, batch_first=True, padding_side="left")
    close(left[1], np.concatenate([np.zeros((2, 2)), npv(seqs[1])]))
    out.sum().backward()
    assert all(np.allclose(npv(s.grad), 1.0) for s in seqs)
    with pytest.raises(ValueError, match="trailing dims"):
        pad_sequence([fg.randn(2, 3), fg.randn(2, 4)])
    assert fg.nn.utils.clip_grad_norm_ is not None  # the package keeps its other utilities


def test_no_warnings_from_regular_use():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.Dropout2d()(fg.randn(2, 3, 4, 4))
        nn.InstanceNorm2d(3)(fg.randn(2, 3, 4, 4))


# ---------------------------------------------------------------------------
# packed sequences through the recurrent layers
# ---------------------------------------------------------------------------


def test_pack_and_unpack_round_trip():
    from ferrograd.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence

    lengths = [2, 4, 1]
    x = t64(4, 3, 2, requires_grad=True)  # (T, B, *)
    p = pack_padded_sequence(x, lengths, enforce_sorted=False)
    assert p.batch_sizes.tolist() == [3, 2, 1, 1] and p.sorted_indices.tolist() == [1, 0, 2]
    xv = npv(x)
    close(p.data, np.concatenate([xv[0, [1, 0, 2]], xv[1, [1, 0]], xv[2, [1]], xv[3, [1]]]))
    padded, lens = pad_packed_sequence(p, batch_first=True, padding_value=-1.0, total_length=5)
    assert lens.tolist() == lengths and tuple(padded.shape) == (3, 5, 2)
    ref = np.full((3, 5, 2), -1.0)
    for b, n in enumerate(lengths):
        ref[b, :n] = xv[:n, b]
    close(padded, ref)
    padded.sum().backward()
    close(x.grad, np.array([[[float(t < n)] * 2 for n in lengths] for t in range(4)]))
    with pytest.raises(ValueError, match="sorted in decreasing order"):
        pack_padded_sequence(x, lengths)
    q = pack_sequence([fg.ones(3, 2), fg.ones(1, 2)])
    assert q.batch_sizes.tolist() == [2, 1, 1] and q.sorted_indices is None


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_layers_take_packed_sequences(cls):
    from ferrograd.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

    fg.manual_seed(0)
    rnn = cls(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=fg.float64)
    lengths = [3, 5, 2]
    x = t64(3, 5, 3, requires_grad=True)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, state = rnn(packed)
    assert isinstance(out, PackedSequence)
    padded, lens = pad_packed_sequence(out, batch_first=True)
    assert lens.tolist() == lengths and tuple(padded.shape) == (3, 5, 8)
    hn = state[0] if cls is nn.LSTM else state
    for b, n in enumerate(lengths):  # each sequence alone, unpadded
        o1, s1 = rnn(x[b : b + 1, :n])
        close(padded[b, :n], npv(o1)[0], rtol=1e-10, atol=1e-12)
        close(padded[b, n:], np.zeros((5 - n, 8)))
        close(hn[:, b], npv(s1[0] if cls is nn.LSTM else s1)[:, 0], rtol=1e-10, atol=1e-12)
    padded.sum().backward()
    g = npv(x.grad)
    assert all(np.all(g[b, n:] == 0) for b, n in enumerate(lengths)) and np.abs(g).sum() > 0


def test_packed_sequence_with_initial_state_keeps_batch_order():
    from ferrograd.nn.utils.rnn import pack_padded_sequence

    lstm = nn.LSTM(2, 3, dtype=fg.float64)
    lengths = [1, 3, 2]
    x = t64(3, 3, 2)
    h0, c0 = t64(1, 3, 3), t64(1, 3, 3)
    _, (hn, cn) = lstm(pack_padded_sequence(x, lengths, enforce_sorted=False), (h0, c0))
    for b, n in enumerate(lengths):
        _, (h1, c1) = lstm(x[:n, b : b + 1], (h0[:, b : b + 1], c0[:, b : b + 1]))
        close(hn[:, b], npv(h1)[:, 0])
        close(cn[:, b], npv(c1)[:, 0])
