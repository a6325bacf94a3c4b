"""More of the ``torch.nn`` surface that training scripts use: the lazy layers,
``SyncBatchNorm``, the ``nn.modules.*`` import paths, ``AdaptiveLogSoftmaxWithLoss``,
``CrossMapLRN2d``, fractional max pooling, the multilabel-margin and triplet-with-distance
losses, ``F.multi_head_attention_forward`` and ``Tensor.register_post_accumulate_grad_hook``.

References: PyTorch's results stored in ``tests/fixtures/parity/nn_surface_extra.npz`` by
``scripts/make_nn_surface_extra_references.py`` (PyTorch version recorded in the file), NumPy
float64, and float64 gradchecks.
"""

from __future__ import annotations

import copy
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.autograd import gradcheck
from ferrograd.nn import functional as F
from ferrograd.nn.modules.batchnorm import _BatchNorm, _NormBase
from ferrograd.nn.modules.conv import _ConvNd
from ferrograd.nn.modules.lazy import LazyModuleMixin
from ferrograd.nn.modules.loss import _Loss
from ferrograd.nn.parameter import UninitializedBuffer, UninitializedParameter

ROOT = Path(__file__).resolve().parent.parent
REF = np.load(ROOT / "tests" / "fixtures" / "parity" / "nn_surface_extra.npz")
TV = f"PyTorch {REF['torch_version']}"


def _np(x: fg.Tensor) -> np.ndarray:
    return np.array(x.detach().numpy(), dtype=np.float64)  # a copy: numpy() shares storage


def _t(a: np.ndarray, grad: bool = False) -> fg.Tensor:
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=grad)


def _close(got: fg.Tensor, want: np.ndarray, what: str, tol: float = 1e-10) -> None:
    np.testing.assert_allclose(_np(got), want, rtol=tol, atol=tol, err_msg=f"{what} vs {TV}")


# ----------------------------------------------------------------------------- lazy layers


@pytest.mark.covers(
    "torch.nn.LazyConv1d",
    "torch.nn.LazyConv2d",
    "torch.nn.LazyConv3d",
    "torch.nn.LazyConvTranspose1d",
    "torch.nn.LazyConvTranspose2d",
    "torch.nn.LazyConvTranspose3d",
)
@pytest.mark.parametrize(
    "lazy, concrete, shape",
    [
        (nn.LazyConv1d, nn.Conv1d, (2, 6, 9)),
        (nn.LazyConv2d, nn.Conv2d, (2, 4, 6, 5)),
        (nn.LazyConv3d, nn.Conv3d, (1, 2, 4, 4, 4)),
        (nn.LazyConvTranspose1d, nn.ConvTranspose1d, (2, 2, 5)),
        (nn.LazyConvTranspose2d, nn.ConvTranspose2d, (2, 4, 3, 3)),
        (nn.LazyConvTranspose3d, nn.ConvTranspose3d, (1, 2, 2, 3, 2)),
    ],
)
def test_lazy_conv_becomes_concrete(lazy: type, concrete: type, shape: tuple[int, ...]) -> None:
    fg.manual_seed(0)
    m = lazy(4, 3, stride=2, padding=1, groups=2, device="cpu", dtype=fg.float64)
    assert isinstance(m, LazyModuleMixin) and m.has_uninitialized_params()
    assert isinstance(m.weight, UninitializedParameter) and isinstance(m.bias, UninitializedParameter)
    w_obj, b_obj = m.weight, m.bias
    opt = fg.optim.SGD(m.parameters(), lr=0.5)  # built before the first call: still trains
    x = _t(np.random.default_rng(0).standard_normal(shape))
    y = m(x)
    assert type(m) is concrete and not isinstance(m, LazyModuleMixin)
    assert m.weight is w_obj and m.bias is b_obj and type(m.weight) is nn.Parameter
    c = shape[1]
    assert m.in_channels == c
    k = (3,) * (len(shape) - 2)
    want_w = (c, 2, *k) if "Transpose" in lazy.__name__ else (4, c // 2, *k)
    assert tuple(m.weight.shape) == want_w and m.weight.dtype == fg.float64
    # Initialised as the concrete layer: kaiming_uniform(a=sqrt(5)) bound 1/sqrt(fan_in).
    fan_in = int(np.prod(m.weight.shape[1:]))
    assert 0 < np.abs(_np(m.weight)).max() <= 1 / np.sqrt(fan_in) + 1e-12
    ref = concrete(c, 4, 3, stride=2, padding=1, groups=2, dtype=fg.float64)
    ref.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(_np(y), _np(ref(x)))
    before = _np(m.weight)
    y.sum().backward()
    opt.step()
    np.testing.assert_allclose(_np(m.weight), before - 0.5 * _np(m.weight.grad), rtol=0, atol=1e-15)


@pytest.mark.covers(
    "torch.nn.LazyBatchNorm1d",
    "torch.nn.LazyBatchNorm2d",
    "torch.nn.LazyBatchNorm3d",
    "torch.nn.LazyInstanceNorm1d",
    "torch.nn.LazyInstanceNorm2d",
    "torch.nn.LazyInstanceNorm3d",
    "torch.nn.UninitializedBuffer",
)
@pytest.mark.parametrize(
    "lazy, concrete, shape",
    [
        (nn.LazyBatchNorm1d, nn.BatchNorm1d, (4, 3)),
        (nn.LazyBatchNorm2d, nn.BatchNorm2d, (3, 2, 3, 3)),
        (nn.LazyBatchNorm3d, nn.BatchNorm3d, (2, 2, 2, 2, 3)),
        (nn.LazyInstanceNorm1d, nn.InstanceNorm1d, (2, 3, 6)),
        (nn.LazyInstanceNorm2d, nn.InstanceNorm2d, (2, 3, 3, 4)),
        (nn.LazyInstanceNorm3d, nn.InstanceNorm3d, (2, 2, 2, 3, 3)),
    ],
)
def test_lazy_norm_becomes_concrete(lazy: type, concrete: type, shape: tuple[int, ...]) -> None:
    m = lazy(affine=True, track_running_stats=True).double()  # conversion before sizing
    assert isinstance(m.running_mean, UninitializedBuffer) and m.running_mean.dtype == fg.float64
    sd = m.state_dict()
    assert set(sd) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    x = np.random.default_rng(1).standard_normal(shape)
    y = m(_t(x))
    assert type(m) is concrete and m.num_features == shape[1]
    ref = concrete(shape[1], affine=True, track_running_stats=True, dtype=fg.float64)
    np.testing.assert_array_equal(_np(y), _np(ref(_t(x))))
    for name in ("running_mean", "running_var", "weight", "bias"):
        np.testing.assert_array_equal(_np(getattr(m, name)), _np(getattr(ref, name)), err_msg=name)
    assert (
        int(m.num_batches_tracked)
        == int(ref.num_batches_tracked)
        == (0 if "Instance" in lazy.__name__ else 1)
    )


@pytest.mark.covers("torch.nn.modules.lazy.LazyModuleMixin", "torch.nn.UninitializedParameter")
def test_lazy_state_dict_before_and_after() -> None:
    src = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ConvTranspose1d(5, 2, 2))
    dst = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.LazyConvTranspose1d(2, 2))
    assert all(isinstance(p, UninitializedParameter) for p in dst.parameters())
    assert "UninitializedParameter" in repr(dst[0].weight)
    with pytest.raises(ValueError, match="LazyConv2d"):
        nn.LazyConv2d(4, 3, groups=2)(fg.zeros(1, 3, 5, 5))
    with pytest.raises(ValueError, match="LazyBatchNorm2d.*4D"):
        nn.LazyBatchNorm2d()(fg.zeros(2, 3))
    dst.load_state_dict(src.state_dict())  # sizes the lazy layers from the checkpoint
    assert dst[0].in_channels == 3 and dst[1].num_features == 4 and dst[2].in_channels == 5
    for k, v in src.state_dict().items():
        np.testing.assert_array_equal(_np(dst.state_dict()[k]), _np(v), err_msg=k)
    x = fg.randn(2, 3, 6, 6)
    np.testing.assert_array_equal(_np(dst[1](dst[0](x))), _np(src[1](src[0](x))))
    assert type(dst[0]) is nn.Conv2d and type(dst[1]) is nn.BatchNorm2d
    up = UninitializedParameter(dtype=fg.float64)
    up.materialize((2, 3))
    assert type(up) is nn.Parameter and tuple(up.shape) == (2, 3) and up.requires_grad
    c = copy.deepcopy(nn.LazyConv1d(2, 3))
    assert isinstance(c.weight, UninitializedParameter)


# ----------------------------------------------------------------------------- sync batch norm, paths


@pytest.mark.covers("torch.nn.SyncBatchNorm", "torch.nn.SyncBatchNorm.convert_sync_batchnorm")
def test_sync_batch_norm_single_process() -> None:
    x = np.random.default_rng(2).standard_normal((4, 3, 5))
    m = nn.SyncBatchNorm(3, momentum=0.2, dtype=fg.float64)
    y = m(_t(x))
    mean, var = x.mean((0, 2)), x.var((0, 2))
    want = (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5)
    np.testing.assert_allclose(_np(y), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(m.running_mean), 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(_np(m.running_var), 0.8 + 0.2 * x.var((0, 2), ddof=1), rtol=1e-12)
    with pytest.raises(ValueError, match="SyncBatchNorm.*2D"):
        m(fg.zeros(3))
    net = nn.Sequential(
        nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(3)), nn.InstanceNorm2d(3)
    )
    bn_w = net[1].weight
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert type(conv[1]) is nn.SyncBatchNorm and type(conv[2][0]) is nn.SyncBatchNorm
    assert type(conv[3]) is nn.InstanceNorm2d and conv[1].weight is bn_w
    assert isinstance(conv[1], _BatchNorm) and isinstance(conv[1], _NormBase)
    assert isinstance(nn.Conv2d(1, 1, 1), _ConvNd) and isinstance(nn.MSELoss(), _Loss)


# ----------------------------------------------------------------------------- PyTorch references


@pytest.mark.covers("torch.nn.AdaptiveLogSoftmaxWithLoss")
def test_adaptive_log_softmax_matches_torch() -> None:
    m = nn.AdaptiveLogSoftmaxWithLoss(6, 10, [3, 6], div_value=2.0, head_bias=True, dtype=fg.float64)
    m.load_state_dict({k[4:]: _t(REF[k]) for k in REF.files if k.startswith("asm.")})
    x = _t(REF["asm_x"], True)
    y = fg.tensor(REF["asm_y"])
    out, loss = m(x, y)
    _close(out, REF["asm_output"], "output")
    _close(loss, REF["asm_loss"], "loss")
    loss.backward()
    _close(x.grad, REF["asm_grad_x"], "input grad")
    _close(m.head.weight.grad, REF["asm_grad_head"], "head grad")
    _close(m.log_prob(x), REF["asm_log_prob"], "log_prob")
    np.testing.assert_array_equal(m.predict(x).numpy(), REF["asm_predict"])
    with pytest.raises(RuntimeError, match=r"AdaptiveLogSoftmaxWithLoss.*\[0, 9\]"):
        m(x, fg.tensor([0, 1, 2, 3, 4, 5, 10]))
    with pytest.raises(ValueError, match="cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(6, 10, [6, 3])
    xs = _t(REF["asm_x"][:3], True)
    assert gradcheck(lambda a: m(a, fg.tensor([1, 5, 8])).loss, (xs,))


@pytest.mark.covers("torch.nn.CrossMapLRN2d")
def test_cross_map_lrn2d_matches_torch() -> None:
    x = _t(REF["lrn_x"], True)
    m = nn.CrossMapLRN2d(3, 0.01, 0.75, 1.5)
    _close(m(x), REF["lrn_out"], "CrossMapLRN2d")
    # The gradient is the exact derivative of this forward (gradcheck below and in
    # test_gradchecks_float64); PyTorch's hand-written backward for this layer is not (it
    # fails torch.autograd.gradcheck), so its gradients are not a reference.
    assert gradcheck(lambda a: m(a), (_t(REF["lrn_x"][:1, :, :2, :2], True),))
    with pytest.raises(ValueError, match="CrossMapLRN2d.*4D"):
        m(fg.zeros(2, 3, 4))


@pytest.mark.covers("torch.nn.FractionalMaxPool2d", "torch.nn.functional.fractional_max_pool2d")
@pytest.mark.parametrize("name, kw", [("size", {"output_size": 4}), ("ratio", {"output_ratio": (0.5, 0.5)})])
def test_fractional_max_pool2d_matches_torch(name: str, kw: dict) -> None:
    x = _t(REF["fmp_x"], True)
    s = _t(REF["fmp_samples"])
    y, idx = F.fractional_max_pool2d(x, 2, return_indices=True, _random_samples=s, **kw)
    _close(y, REF[f"fmp_{name}_out"], "output")
    np.testing.assert_array_equal(idx.numpy(), REF[f"fmp_{name}_idx"])
    (y * _t(REF[f"fmp_{name}_w"])).sum().backward()
    _close(x.grad, REF[f"fmp_{name}_grad"], "grad")
    m = nn.FractionalMaxPool2d(2, _random_samples=s, **kw)
    np.testing.assert_array_equal(_np(m(x)), _np(y))
    y1 = F.fractional_max_pool2d(x[0], 2, _random_samples=s[:1], **kw)  # unbatched
    np.testing.assert_array_equal(_np(y1), _np(y[0]))
    with pytest.raises(ValueError, match="FractionalMaxPool2d requires"):
        nn.FractionalMaxPool2d(2)


@pytest.mark.covers("torch.nn.MultiLabelMarginLoss", "torch.nn.functional.multilabel_margin_loss")
def test_multilabel_margin_loss_matches_torch() -> None:
    x = _t(REF["mlm_x"], True)
    y = fg.tensor(REF["mlm_y"])
    _close(F.multilabel_margin_loss(x, y, reduction="none"), REF["mlm_none"], "none")
    loss = nn.MultiLabelMarginLoss()(x, y)
    _close(loss, REF["mlm_none"].mean(), "mean")
    loss.backward()
    _close(x.grad, REF["mlm_grad"], "grad")
    _close(F.multilabel_margin_loss(x[0], y[0], reduction="sum"), REF["mlm_none"][0], "1-D")
    with pytest.raises(ValueError, match="multilabel_margin_loss.*target"):
        F.multilabel_margin_loss(x, y[:2])
    with pytest.raises(IndexError, match="multilabel_margin_loss"):
        F.multilabel_margin_loss(x, fg.tensor([[7, -1, 0, 0, 0]] * 3))


@pytest.mark.covers(
    "torch.nn.TripletMarginWithDistanceLoss", "torch.nn.functional.triplet_margin_with_distance_loss"
)
def test_triplet_margin_with_distance_matches_torch() -> None:
    a = _t(REF["tmd_a"], True)
    p, n = _t(REF["tmd_p"]), _t(REF["tmd_n"])
    loss = F.triplet_margin_with_distance_loss(a, p, n, reduction="none")
    _close(loss, REF["tmd_default"], "default distance")
    loss.sum().backward()
    _close(a.grad, REF["tmd_default_grad"], "default grad")
    a.grad = None

    def cos(u: fg.Tensor, v: fg.Tensor) -> fg.Tensor:
        return 1.0 - F.cosine_similarity(u, v)

    m = nn.TripletMarginWithDistanceLoss(distance_function=cos, margin=0.5, swap=True, reduction="sum")
    loss = m(a, p, n)
    _close(loss, REF["tmd_cos"].sum(), "cosine, swap")
    loss.backward()
    _close(a.grad, REF["tmd_cos_grad"], "cosine grad")
    with pytest.raises(ValueError, match="margin"):
        nn.TripletMarginWithDistanceLoss(margin=0.0)


@pytest.mark.covers("torch.nn.functional.multi_head_attention_forward")
def test_multi_head_attention_forward_matches_torch() -> None:
    r = {k[4:]: _t(REF[k]) for k in REF.files if k.startswith("mha_") and REF[k].dtype == np.float64}
    q = _t(REF["mha_q"], True)
    kpm, am = fg.tensor(REF["mha_kpm"]), fg.tensor(REF["mha_am"])
    o, w = F.multi_head_attention_forward(
        q, r["k"], r["v"], 8, 2, r["ipw"], r["ipb"], r["bk"], r["bv"], False, 0.0, r["opw"], r["opb"],
        training=False, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False,
    )  # fmt: skip
    _close(o, REF["mha_biaskv_out"], "bias_kv output")
    _close(w, REF["mha_biaskv_w"], "bias_kv weights")
    (o**2).sum().backward()
    _close(q.grad, REF["mha_biaskv_grad"], "bias_kv grad", 1e-9)
    q.grad = None
    o, w = F.multi_head_attention_forward(
        q, r["k"], r["v"], 8, 2, None, r["ipb"], None, None, True, 0.0, r["opw"], r["opb"], training=False,
        use_separate_proj_weight=True, q_proj_weight=r["wq"], k_proj_weight=r["wk"], v_proj_weight=r["wv"],
    )  # fmt: skip
    _close(o, REF["mha_sep_out"], "separate-weights output")
    _close(w, REF["mha_sep_w"], "separate-weights weights")
    (o**2).sum().backward()
    _close(q.grad, REF["mha_sep_grad"], "separate-weights grad", 1e-9)
    # nn.MultiheadAttention is this function with its own parameters.
    mha = nn.MultiheadAttention(8, 2, dtype=fg.float64)
    x = _t(REF["mha_k"])
    want = mha(q, x, x)
    got = F.multi_head_attention_forward(
        q, x, x, 8, 2, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0,
        mha.out_proj.weight, mha.out_proj.bias, training=False,
    )  # fmt: skip
    np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(got[1]), _np(want[1]), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="multi_head_attention_forward.*embedding dimension"):
        F.multi_head_attention_forward(
            q, x, x, 6, 2, mha.in_proj_weight, None, None, None, False, 0.0, mha.out_proj.weight, None
        )


def test_gradchecks_float64() -> None:
    rng = np.random.default_rng(3)
    x = _t(rng.standard_normal((1, 4, 2, 2)), True)
    assert gradcheck(lambda a: nn.CrossMapLRN2d(2, 0.1, 0.75, 1.0)(a), (x,))
    t = fg.tensor([[2, 0, -1, 1], [3, -1, 0, 0]])
    s = _t(rng.standard_normal((2, 4)), True)
    assert gradcheck(lambda a: F.multilabel_margin_loss(a, t, reduction="none"), (s,))
    xp = _t(rng.standard_normal((1, 1, 5, 5)), True)
    samples = _t(rng.random((1, 1, 2)))
    assert gradcheck(lambda a: F.fractional_max_pool2d(a, 2, output_size=3, _random_samples=samples), (xp,))
    a, p, n = (_t(rng.standard_normal((3, 4)), True) for _ in range(3))
    assert gradcheck(lambda u, v, w: F.triplet_margin_with_distance_loss(u, v, w, swap=True), (a, p, n))


# ----------------------------------------------------------------------------- post-accumulate hooks


def test_register_post_accumulate_grad_hook() -> None:
    p = nn.Parameter(fg.tensor([1.0, 2.0], dtype=fg.float64))
    q = nn.Parameter(fg.tensor([3.0], dtype=fg.float64))
    seen: list[tuple[str, list[float]]] = []
    h = p.register_post_accumulate_grad_hook(lambda t: seen.append(("p", t.grad.tolist())))
    q.register_post_accumulate_grad_hook(lambda t: seen.append(("q", t.grad.tolist())))
    ((p * p).sum() * q).sum().backward()  # d/dp = 2 p q, d/dq = Σ p²
    assert sorted(seen) == [("p", [6.0, 12.0]), ("q", [5.0])]
    seen.clear()
    (p * 3).sum().backward()  # accumulated: the hook sees the sum
    assert seen == [("p", [9.0, 15.0])]
    fg.autograd.grad((p * p).sum(), [p])  # writes no .grad: no hook
    assert seen == [("p", [9.0, 15.0])]
    h.remove()
    (p * 3).sum().backward()
    assert seen == [("p", [9.0, 15.0])]
    with pytest.raises(RuntimeError, match="non-leaf"):
        (p * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        fg.ones(2).register_post_accumulate_grad_hook(print)
    # The optimizer-in-backward habit: one optimizer per parameter, stepped by the hook.
    fg.manual_seed(0)
    m = nn.Linear(3, 2, dtype=fg.float64)
    w0, b0 = _np(m.weight), _np(m.bias)
    opts = {p_: fg.optim.SGD([p_], lr=0.1) for p_ in m.parameters()}

    def step(t: fg.Tensor) -> None:
        opts[t].step()
        opts[t].zero_grad()

    for p_ in m.parameters():
        p_.register_post_accumulate_grad_hook(step)
    x = np.array([[1.0, -2.0, 0.5]])
    m(_t(x)).sum().backward()
    np.testing.assert_allclose(_np(m.weight), w0 - 0.1 * np.repeat(x, 2, 0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(_np(m.bias), b0 - 0.1, rtol=0, atol=1e-15)
    assert m.weight.grad is None and m.bias.grad is None
