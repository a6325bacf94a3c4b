"""Write PyTorch's answers for ``tests/test_nn_surface_extra.py`` (run in CI without PyTorch).

Writes ``tests/fixtures/parity/nn_surface_extra.npz`` (with ``torch_version``), float64 throughout:

* ``asm.*``: ``nn.AdaptiveLogSoftmaxWithLoss(6, 10, [3, 6], div_value=2.0, head_bias=True)``:
  its ``state_dict``, input/target, ``output``, ``loss``, ``log_prob``, ``predict`` and the
  gradients of ``loss`` for the input and the head weight;
* ``lrn.*``: ``nn.CrossMapLRN2d(3, 0.01, 0.75, 1.5)`` on a ``(2, 5, 3, 3)`` input: the output
  (not the gradient: PyTorch's hand-written backward for it is not the derivative of its
  forward, and fails ``torch.autograd.gradcheck``);
* ``fmp.*``: ``F.fractional_max_pool2d`` (kernel 2, output 4 and output_ratio 0.5) with fixed
  ``_random_samples``: output, indices, input gradient of ``(out * w).sum()``;
* ``mlm.*``: ``F.multilabel_margin_loss`` with ``reduction="none"`` and ``"mean"``, input gradient;
* ``tmd.*``: ``F.triplet_margin_with_distance_loss`` (default distance; a cosine distance with
  ``swap=True``), per-sample losses and anchor gradients;
* ``mha.*``: ``F.multi_head_attention_forward`` with ``bias_k``/``bias_v``, a key padding mask,
  a bool causal-shaped ``attn_mask`` and per-head weights; and with separate projection
  weights and ``add_zero_attn``: outputs, weights and query gradients::

    python scripts/make_nn_surface_extra_references.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "nn_surface_extra.npz"


def rnd(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def t(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def adaptive(out: dict[str, np.ndarray]) -> None:
    torch.manual_seed(0)
    m = torch.nn.AdaptiveLogSoftmaxWithLoss(6, 10, [3, 6], div_value=2.0, head_bias=True).double()
    for k, v in m.state_dict().items():
        out["asm." + k] = v.numpy()
    x = t(rnd(1, 7, 6), True)
    y = torch.tensor([0, 4, 9, 2, 7, 5, 3])
    o = m(x, y)
    o.loss.backward()
    out["asm_x"], out["asm_y"] = x.detach().numpy(), y.numpy()
    out["asm_output"], out["asm_loss"] = o.output.detach().numpy(), o.loss.detach().numpy()
    out["asm_grad_x"], out["asm_grad_head"] = x.grad.numpy(), m.head.weight.grad.numpy()
    out["asm_log_prob"] = m.log_prob(x).detach().numpy()
    out["asm_predict"] = m.predict(x).numpy()


def cross_map(out: dict[str, np.ndarray]) -> None:
    x = t(rnd(2, 2, 5, 3, 3))
    y = torch.nn.CrossMapLRN2d(3, 0.01, 0.75, 1.5)(x)
    out["lrn_x"], out["lrn_out"] = x.numpy(), y.numpy()


def fractional(out: dict[str, np.ndarray]) -> None:
    x = t(rnd(4, 2, 3, 9, 8), True)
    s = np.random.default_rng(5).random((2, 3, 2))
    out["fmp_x"], out["fmp_samples"] = x.detach().numpy(), s
    for name, kw in (("size", {"output_size": 4}), ("ratio", {"output_ratio": (0.5, 0.5)})):
        x.grad = None
        y, i = F.fractional_max_pool2d(x, 2, return_indices=True, _random_samples=t(s), **kw)
        w = rnd(6, *y.shape)
        (y * t(w)).sum().backward()
        out[f"fmp_{name}_out"], out[f"fmp_{name}_idx"] = y.detach().numpy(), i.numpy()
        out[f"fmp_{name}_w"], out[f"fmp_{name}_grad"] = w, x.grad.numpy()


def multilabel(out: dict[str, np.ndarray]) -> None:
    x = t(rnd(7, 3, 5), True)
    y = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 4, 0, 3], [-1, 1, 2, 3, 4]])
    loss = F.multilabel_margin_loss(x, y, reduction="none")
    F.multilabel_margin_loss(x, y).backward()
    out["mlm_x"], out["mlm_y"] = x.detach().numpy(), y.numpy()
    out["mlm_none"], out["mlm_grad"] = loss.detach().numpy(), x.grad.numpy()


def triplet(out: dict[str, np.ndarray]) -> None:
    a, p, n = t(rnd(8, 4, 5), True), t(rnd(9, 4, 5)), t(rnd(10, 4, 5))
    out["tmd_a"], out["tmd_p"], out["tmd_n"] = a.detach().numpy(), p.numpy(), n.numpy()
    loss = F.triplet_margin_with_distance_loss(a, p, n, reduction="none")
    loss.sum().backward()
    out["tmd_default"], out["tmd_default_grad"] = loss.detach().numpy(), a.grad.numpy()
    a.grad = None

    def cos(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return 1.0 - F.cosine_similarity(u, v)

    loss = F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=cos, margin=0.5, swap=True, reduction="none"
    )
    loss.sum().backward()
    out["tmd_cos"], out["tmd_cos_grad"] = loss.detach().numpy(), a.grad.numpy()


def mha(out: dict[str, np.ndarray]) -> None:
    e, h, L, s, n = 8, 2, 4, 5, 3
    q, k, v = t(rnd(11, L, n, e), True), t(rnd(12, s, n, e)), t(rnd(13, s, n, e))
    ipw, ipb = t(rnd(14, 3 * e, e) * 0.3), t(rnd(15, 3 * e) * 0.1)
    bk, bv = t(rnd(16, 1, 1, e)), t(rnd(17, 1, 1, e))
    opw, opb = t(rnd(18, e, e) * 0.3), t(rnd(19, e) * 0.1)
    kpm = torch.zeros(n, s, dtype=torch.bool)
    kpm[1, 3:] = True
    am = torch.ones(L, s, dtype=torch.bool).triu(2)
    for name, a in dict(q=q, k=k, v=v, ipw=ipw, ipb=ipb, bk=bk, bv=bv, opw=opw, opb=opb).items():
        out["mha_" + name] = a.detach().numpy()
    out["mha_kpm"], out["mha_am"] = kpm.numpy(), am.numpy()
    o, w = F.multi_head_attention_forward(
        q,
        k,
        v,
        e,
        h,
        ipw,
        ipb,
        bk,
        bv,
        False,
        0.0,
        opw,
        opb,
        training=False,
        key_padding_mask=kpm,
        attn_mask=am,
        average_attn_weights=False,
    )
    (o**2).sum().backward()
    out["mha_biaskv_out"], out["mha_biaskv_w"], out["mha_biaskv_grad"] = (
        o.detach().numpy(),
        w.detach().numpy(),
        q.grad.numpy(),
    )
    q.grad = None
    wq, wk, wv = t(rnd(20, e, e) * 0.3), t(rnd(21, e, e) * 0.3), t(rnd(22, e, e) * 0.3)
    out["mha_wq"], out["mha_wk"], out["mha_wv"] = wq.numpy(), wk.numpy(), wv.numpy()
    o, w = F.multi_head_attention_forward(
        q,
        k,
        v,
        e,
        h,
        None,
        ipb,
        None,
        None,
        True,
        0.0,
        opw,
        opb,
        training=False,
        use_separate_proj_weight=True,
        q_proj_weight=wq,
        k_proj_weight=wk,
        v_proj_weight=wv,
    )
    (o**2).sum().backward()
    out["mha_sep_out"], out["mha_sep_w"], out["mha_sep_grad"] = (
        o.detach().numpy(),
        w.detach().numpy(),
        q.grad.numpy(),
    )


def main() -> None:
    out: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    for fn in (adaptive, cross_map, fractional, multilabel, triplet, mha):
        fn(out)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({len(out)} arrays, PyTorch {torch.__version__})")


if __name__ == "__main__":
    main()
