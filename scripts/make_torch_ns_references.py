"""Write PyTorch references for the functions of the top-level ``torch`` namespace that
ferrograd composes in ``ferrograd/_surface_torch_ns.py`` (``torch.conv1d``,
``torch.batch_norm``, ``torch.kl_div``, ...), to ``tests/fixtures/parity/torch_ns.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). ``tests/test_surface_torch_ns.py`` reads it and runs in CI
without PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_torch_ns_references.py

``cases`` (a JSON string) lists each call: the function's name, its positional and keyword
arguments (``{"t": key}`` names a stored input array, a JSON list stands for a tuple) and
whether gradients were taken. Per case ``i``: ``<i>/out`` (PyTorch's result; ``<i>/out<k>``
for a tuple), and when ``grad``, the output gradient ``<i>/g`` and ``<i>/grad/<key>``, the
gradient of ``sum(out * g)`` with respect to each floating input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "torch_ns.npz"
# Inputs no gradient is taken for (running statistics, weights and targets of losses).
NO_GRAD = {"rm", "rv", "bw", "pw", "y01", "counts", "sign", "prob"}


def main() -> None:
    rng = np.random.default_rng(20261129)
    arrays: dict[str, np.ndarray] = {}

    def arr(key: str, a: np.ndarray) -> dict[str, str]:
        arrays[f"in/{key}"] = a
        return {"t": key}

    def rnd(key: str, *shape: int) -> dict[str, str]:
        return arr(key, rng.standard_normal(shape))

    def pos(key: str, *shape: int) -> dict[str, str]:
        return arr(key, rng.uniform(0.2, 2.0, shape))

    x1 = rnd("x1", 2, 3, 9)
    x2 = rnd("x2", 2, 4, 5, 6)
    x3 = rnd("x3", 1, 2, 4, 5, 6)
    w1 = rnd("w1", 4, 3, 3)
    w3 = rnd("w3", 3, 2, 2, 3, 2)
    wt1 = rnd("wt1", 3, 2, 3)
    wt2 = rnd("wt2", 4, 2, 3, 2)
    wt3 = rnd("wt3", 2, 3, 2, 2, 3)
    b4 = rnd("b4", 4)
    b3 = rnd("b3", 3)
    b2 = rnd("b2", 2)
    b6 = rnd("b6", 6)
    xn = rnd("xn", 3, 4, 5)
    gw = rnd("gw", 4)
    gb = rnd("gb", 4)
    rm = rnd("rm", 4)
    rv = pos("rv", 4)
    ln_w = rnd("ln_w", 5)
    ln_b = rnd("ln_b", 5)
    emb_w = rnd("emb_w", 6, 3)
    idx = arr("idx", np.array([[0, 2, 5], [2, 2, 1]], dtype=np.int64))
    ps = rnd("ps", 1, 8, 2, 3)
    pu = rnd("pu", 1, 2, 4, 6)
    pr_w = pos("pr_w", 3)
    act = rnd("act", 3, 7)
    bl1 = rnd("bl1", 4, 3)
    bl2 = rnd("bl2", 4, 5)
    bl_w = rnd("bl_w", 2, 3, 5)
    v1 = rnd("v1", 5, 4)
    v2 = rnd("v2", 5, 4)
    v3 = rnd("v3", 5, 4)
    logp = arr("logp", np.log(rng.dirichlet(np.ones(4), size=(3,))))
    prob = arr("prob", rng.dirichlet(np.ones(4), size=(3,)))
    logit = rnd("logit", 3, 4)
    y01 = arr("y01", rng.uniform(0.0, 1.0, (3, 4)))
    bw = pos("bw", 3, 4)
    pw = pos("pw", 4)
    counts = arr("counts", rng.poisson(2.0, (3, 4)).astype(np.float64))
    rate = pos("rate", 3, 4)
    sign = arr("sign", np.array([1.0, -1.0, 1.0, -1.0, -1.0]))
    r1 = rnd("r1", 5)
    r2 = rnd("r2", 5)
    ctc_lp = arr("ctc_lp", np.log(rng.dirichlet(np.ones(5), size=(7, 2))))
    ctc_t = arr("ctc_t", np.array([[1, 2, 2], [3, 1, 4]], dtype=np.int64))
    pad_x = rnd("pad_x", 2, 3, 4)
    cmp_a = arr("cmp_a", np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]))
    cmp_b = arr("cmp_b", np.array([2.0, 2.0, 2.0]))
    ints = arr("ints", np.array([3, -2, 0, 7], dtype=np.int64))
    frac = arr("frac", np.array([-2.5, -1.5, -0.2, 0.0, 0.7, 1.5, 2.5]))

    cases: list[dict[str, Any]] = []

    def case(name: str, *args: Any, grad: bool = True, **kwargs: Any) -> None:
        cases.append({"name": name, "args": list(args), "kwargs": kwargs, "grad": grad})

    case("conv1d", x1, w1, b4, 2, 1)
    case("conv1d", x1, w1, None, 1, "same", 2)
    case("conv3d", x3, w3, b3, 1, [1, 0, 1])
    case("conv_transpose1d", x1, wt1, b2, 2, 1, 1)
    case("conv_transpose2d", x2, wt2, b2, [2, 1], [1, 0])
    case("conv_transpose3d", x3, wt3, b6, 1, 0, 0, 2)
    case("max_pool1d", x1, 3)
    case("max_pool1d", x1, 3, 2, 1, 1, True)
    case("max_pool2d", x2, [2, 3], [], 0, 1, True)
    case("max_pool3d", x3, 2, 1)
    case("avg_pool1d", x1, 4, 2, 1, False, False)
    case("adaptive_avg_pool1d", x1, 4)
    case("adaptive_max_pool1d", x1, 4)
    case("batch_norm", xn, gw, gb, rm, rv, False, 0.1, 1e-5, False)
    case("batch_norm", xn, None, None, None, None, True, 0.1, 1e-3, False)
    case("instance_norm", xn, gw, gb, None, None, True, 0.1, 1e-5, False)
    case("layer_norm", xn, [5], ln_w, ln_b, 1e-4)
    case("group_norm", xn, 2, gw, gb)
    case("embedding", emb_w, idx)
    case("embedding", emb_w, idx, 2)
    case("pixel_shuffle", ps, 2)
    case("pixel_unshuffle", pu, 2)
    case("channel_shuffle", ps, 4, grad=False)
    case("prelu", rnd("pr_x", 2, 3, 4), pr_w)
    case("selu", act)
    case("celu", act, 0.7)
    case("rrelu", act)
    case("rrelu", act, 0.1, 0.3, False)
    case("threshold", act, 0.1, -2.0)
    case("hardshrink", act)
    case("hardshrink", act, 0.9)
    case("bilinear", bl1, bl2, bl_w, b2)
    case("cosine_similarity", v1, v2)
    case("cosine_similarity", v1, v2, 0, 1e-6)
    case("pairwise_distance", v1, v2)
    case("pairwise_distance", v1, v2, 1.0, 1e-6, True)
    case("pdist", v1)
    case("pdist", v1, 3.0)
    case("kl_div", logp, prob)
    case("kl_div", logp, logp, 2, log_target=True)
    case("kl_div", logp, prob, 0)
    case("kl_div", logp, prob, 1)
    case("binary_cross_entropy_with_logits", logit, y01)
    case("binary_cross_entropy_with_logits", logit, y01, bw, pw, 2)
    case("binary_cross_entropy_with_logits", logit, y01, None, pw, 0)
    case("poisson_nll_loss", logit, counts, True, False, 1e-8, 1)
    case("poisson_nll_loss", rate, counts, False, True, 1e-8, 0)
    case("cosine_embedding_loss", v1, v2, sign)
    case("cosine_embedding_loss", v1, v2, sign, 0.2, 1)
    case("margin_ranking_loss", r1, r2, sign)
    case("margin_ranking_loss", r1, r2, sign, 0.5, 2)
    case("hinge_embedding_loss", r1, sign)
    case("hinge_embedding_loss", r1, sign, 0.5, 1)
    case("triplet_margin_loss", v1, v2, v3)
    case("triplet_margin_loss", v1, v2, v3, 0.5, 1.0, 1e-6, True, 0)
    # No gradients for ctc_loss: PyTorch's with respect to log_probs assumes they came
    # from log_softmax (it adds exp(log_probs) times the loss gradient); ferrograd's is
    # the derivative of the loss itself. Composed with log_softmax both agree.
    case("ctc_loss", ctc_lp, ctc_t, [7, 6], [3, 2], grad=False)
    case("ctc_loss", ctc_lp, ctc_t, [7, 5], [3, 3], 0, 2, grad=False)
    case("ctc_loss", ctc_lp, ctc_t, [7, 6], [3, 2], 0, 1, grad=False)
    case("constant_pad_nd", pad_x, [1, 2])
    case("constant_pad_nd", pad_x, [0, 1, 2, 0, 1, 1], 1.5)
    case("constant_pad_nd", pad_x, [-1, 1])
    case("fix", frac, grad=False)
    case("absolute", ints, grad=False)
    case("absolute", frac)
    case("arctan2", v1, v2)
    case("positive", ints, grad=False)
    case("rsub", cmp_a, cmp_b)
    case("rsub", cmp_a, cmp_b, alpha=2)
    case("rsub", cmp_a, 5.0, 3)
    case("rsub", ints, 3, grad=False, alpha=2)
    case("greater", cmp_a, cmp_b, grad=False)
    case("greater_equal", cmp_a, cmp_b, grad=False)
    case("less", cmp_a, 2.0, grad=False)
    case("less_equal", cmp_a, cmp_b, grad=False)
    case("not_equal", cmp_a, 2, grad=False)
    case("swapdims", x2, 1, 3)
    case("detach", act, grad=False)

    data: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    data.update(arrays)

    def value(a: Any, grads: dict[str, torch.Tensor]) -> Any:
        if isinstance(a, dict):
            key = a["t"]
            if key not in grads:
                t = torch.tensor(arrays[f"in/{key}"])
                if t.is_floating_point() and key not in NO_GRAD:
                    t.requires_grad_(True)
                grads[key] = t
            return grads[key]
        if isinstance(a, list):
            return tuple(a)
        return a

    for i, c in enumerate(cases):
        torch.manual_seed(0)
        leaves: dict[str, torch.Tensor] = {}
        args = [value(a, leaves) for a in c["args"]]
        kwargs = {k: value(v, leaves) for k, v in c["kwargs"].items()}
        out = getattr(torch, c["name"])(*args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        if isinstance(out, tuple):
            for k, o in enumerate(outs):
                data[f"{i}/out{k}"] = o.detach().numpy().copy()
        else:
            data[f"{i}/out"] = out.detach().numpy().copy()
        if c["grad"]:
            g = rng.standard_normal(outs[0].shape)
            data[f"{i}/g"] = g
            (outs[0] * torch.tensor(g)).sum().backward()
            for key, t in leaves.items():
                if t.requires_grad and t.grad is not None:
                    data[f"{i}/grad/{key}"] = t.grad.numpy().copy()
    data["cases"] = np.array(json.dumps(cases))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({len(cases)} cases, {len(data)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    main()
