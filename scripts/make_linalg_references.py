"""Write PyTorch references for the ``linalg`` factorizations (``qr``, ``eigh``,
``svd`` and what builds on them) to ``tests/fixtures/parity/linalg_decomp.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version
it was made with (``torch_version``). ``tests/test_linalg_decomp.py`` reads it and runs
in CI without PyTorch. This script needs only ``torch`` and ``numpy``::

    python scripts/make_linalg_references.py

Eigenvectors and singular vectors are defined only up to sign, so each case stores
quantities that do not depend on that choice (a "probe", defined once below and run
on both libraries): sign-normalized QR factors, squared vector entries, eigenvalues,
singular values, and results built on them. Each case stores its inputs
(``<case>/in/<name>``), keyword arguments as JSON (``<case>/kwargs``), the probe's
outputs (``<case>/out/<i>``), a cotangent per float output and the gradient of
``sum <out_i, cot_i>`` with respect to every input (skipped for empty inputs and
integer outputs, and for the ``nograd_`` cases, whose inputs are singular).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "linalg_decomp.npz"


def _signs(lib: Any, r: Any, k: int) -> Any:
    d = r[..., :k, :k].diagonal(0, -2, -1).sign()
    return lib.where(d == 0, lib.ones_like(d), d)


def probe(lib: Any, fn: str, ins: dict[str, Any], kw: dict[str, Any]) -> list[Any]:
    """The gauge-invariant outputs of ``lib.linalg.<fn>`` (``lib``: torch or ferrograd)."""
    la = lib.linalg
    a = ins["A"]
    k = min(a.shape[-2], a.shape[-1]) if a.ndim >= 2 else 0
    if fn == "qr":
        q, r = la.qr(a, mode=kw["mode"])
        d = _signs(lib, r, k)
        outs = [r[..., :k, :] * d.unsqueeze(-1)]
        if kw["mode"] != "r":
            outs.append(q[..., :, :k] * d.unsqueeze(-2))
        return outs
    if fn == "eigh":
        w, v = la.eigh(a, UPLO=kw["UPLO"])
        return [w, v * v]
    if fn == "eigvalsh":
        return [la.eigvalsh(a, UPLO=kw["UPLO"])]
    if fn == "svd":
        u, s, vh = la.svd(a, full_matrices=kw["full_matrices"])
        uk, vk = u[..., :, :k], vh[..., :k, :]
        return [s, uk * uk, vk * vk]
    if fn == "svdvals":
        return [la.svdvals(a)]
    if fn == "pinv":
        return [la.pinv(a, **kw)]
    if fn == "lstsq":
        r = la.lstsq(a, ins["B"], **kw)
        return [r.solution, r.residuals, r.rank, r.singular_values]
    if fn == "matrix_rank":
        return [la.matrix_rank(a, **kw)]
    if fn == "cond":
        return [la.cond(a, **kw)]
    if fn == "matrix_exp":
        return [la.matrix_exp(a)]
    if fn == "matrix_norm":
        return [la.matrix_norm(a, **kw)]
    if fn == "norm_nuc":
        return [a.norm(p="nuc", dim=tuple(kw["dim"]))]
    raise ValueError(fn)


def _orth(rng: np.random.Generator, n: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return q


def _matrix(
    rng: np.random.Generator, lead: tuple[int, ...], m: int, n: int, rank: int | None = None
) -> np.ndarray:
    k = min(m, n) if rank is None else rank
    out = np.empty((*lead, m, n))
    for idx in np.ndindex(*lead):
        s = 0.6 + 0.5 * np.arange(k)[::-1] + rng.uniform(0, 0.2, k)
        out[idx] = (_orth(rng, m)[:, :k] * s) @ _orth(rng, n)[:, :k].T
    return out


def _sym(rng: np.random.Generator, lead: tuple[int, ...], n: int) -> np.ndarray:
    out = np.empty((*lead, n, n))
    for idx in np.ndindex(*lead):
        w = np.linspace(-1.5, 2.0, n) + rng.uniform(0, 0.2, n)
        v = _orth(rng, n)
        out[idx] = (v * w) @ v.T
    return out


def cases(rng: np.random.Generator) -> list[tuple[str, str, dict[str, np.ndarray], dict[str, Any]]]:
    """(case name, function, inputs, kwargs)."""
    out: list[tuple[str, str, dict[str, np.ndarray], dict[str, Any]]] = []
    for shape in ((4, 3), (3, 5), (2, 3, 3)):
        for mode in ("reduced", "complete", "r"):
            out.append(
                (
                    f"qr_{mode}_{'x'.join(map(str, shape))}",
                    "qr",
                    {"A": _matrix(rng, shape[:-2], *shape[-2:])},
                    {"mode": mode},
                )
            )
    for uplo in ("L", "U"):
        a = _sym(rng, (2,), 4)
        a = (
            a + np.triu(rng.standard_normal((4, 4)), 1)
            if uplo == "L"
            else a + np.tril(rng.standard_normal((4, 4)), -1)
        )
        out.append((f"eigh_{uplo}", "eigh", {"A": a}, {"UPLO": uplo}))
        out.append((f"eigvalsh_{uplo}", "eigvalsh", {"A": a}, {"UPLO": uplo}))
    for shape in ((5, 3), (3, 4), (2, 3, 3)):
        for full in (False, True):
            name = f"svd_{'full' if full else 'reduced'}_{'x'.join(map(str, shape))}"
            out.append((name, "svd", {"A": _matrix(rng, shape[:-2], *shape[-2:])}, {"full_matrices": full}))
        out.append(
            (
                f"svdvals_{'x'.join(map(str, shape))}",
                "svdvals",
                {"A": _matrix(rng, shape[:-2], *shape[-2:])},
                {},
            )
        )
    out.append(("pinv_tall", "pinv", {"A": _matrix(rng, (), 5, 3)}, {}))
    out.append(("pinv_rank2", "pinv", {"A": _matrix(rng, (2,), 4, 4, rank=2)}, {}))
    out.append(("pinv_hermitian", "pinv", {"A": _sym(rng, (), 4)}, {"hermitian": True}))
    out.append(("pinv_atol", "pinv", {"A": _matrix(rng, (), 3, 4)}, {"atol": 1.0}))
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        out.append(
            (
                f"lstsq_{driver}",
                "lstsq",
                {"A": _matrix(rng, (2,), 5, 3), "B": rng.standard_normal((2, 5, 2))},
                {"driver": driver},
            )
        )
    out.append(
        (
            "lstsq_wide",
            "lstsq",
            {"A": _matrix(rng, (), 2, 4), "B": rng.standard_normal((2, 3))},
            {"driver": "gelsd"},
        )
    )
    out.append(
        (
            "lstsq_vector",
            "lstsq",
            {"A": _matrix(rng, (), 5, 3), "B": rng.standard_normal(5)},
            {"driver": "gelsd"},
        )
    )
    for r in (0, 1, 3):
        out.append((f"matrix_rank_{r}", "matrix_rank", {"A": _matrix(rng, (2,), 3, 4, rank=r)}, {}))
    out.append(("matrix_rank_hermitian", "matrix_rank", {"A": _sym(rng, (), 3)}, {"hermitian": True}))
    for p in (None, 2, -2, "fro", "nuc", float("inf"), float("-inf"), 1, -1):
        out.append((f"cond_{p}", "cond", {"A": _matrix(rng, (2,), 3, 3)}, {"p": p}))
    out.append(("cond_tall", "cond", {"A": _matrix(rng, (), 4, 2)}, {"p": None}))
    for scale in (0.1, 1.0, 4.0):
        out.append((f"matrix_exp_{scale}", "matrix_exp", {"A": rng.standard_normal((2, 3, 3)) * scale}, {}))
    for ord_ in ("nuc", 2, -2):
        out.append((f"matrix_norm_{ord_}", "matrix_norm", {"A": _matrix(rng, (2,), 3, 4)}, {"ord": ord_}))
        out.append(
            (
                f"matrix_norm_{ord_}_dims",
                "matrix_norm",
                {"A": rng.standard_normal((3, 2, 4))},
                {"ord": ord_, "dim": [0, 2], "keepdim": True},
            )
        )
    out.append(("tensor_norm_nuc", "norm_nuc", {"A": rng.standard_normal((2, 3, 4))}, {"dim": [1, 2]}))
    # Empty inputs: PyTorch's shapes for 0 x 0, 0 x n, m x 0 and empty batches.
    for shape in ((0, 0), (0, 3), (3, 0), (2, 0, 0), (0, 3, 2)):
        tag = "x".join(map(str, shape))
        for mode in ("reduced", "complete", "r"):
            out.append((f"empty_qr_{mode}_{tag}", "qr_raw", {"A": np.zeros(shape)}, {"mode": mode}))
        for full in (False, True):
            out.append(
                (f"empty_svd_{full}_{tag}", "svd_raw", {"A": np.zeros(shape)}, {"full_matrices": full})
            )
        out.append((f"empty_pinv_{tag}", "pinv", {"A": np.zeros(shape)}, {}))
        out.append((f"empty_rank_{tag}", "matrix_rank", {"A": np.zeros(shape)}, {}))
        out.append(
            (
                f"empty_lstsq_{tag}",
                "lstsq",
                {"A": np.zeros(shape), "B": np.zeros((*shape[:-1], 2))},
                {"driver": "gelsd"},
            )
        )
    for shape in ((0, 0), (2, 0, 0), (0, 3, 3)):
        out.append((f"empty_eigh_{'x'.join(map(str, shape))}", "eigh", {"A": np.zeros(shape)}, {"UPLO": "L"}))
        out.append(
            (f"empty_matrix_exp_{'x'.join(map(str, shape))}", "matrix_exp", {"A": np.zeros(shape)}, {})
        )
    # Singular matrices (exactly, for elimination): PyTorch's cond is inf for the orders
    # computed through the inverse, and large but finite through the singular values.
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 2.0]]])
    for p in (None, -2, "fro", "nuc", 1, float("inf")):
        out.append((f"nograd_cond_singular_{p}", "cond", {"A": singular}, {"p": p}))
    return out


def run(lib: Any, fn: str, ins: dict[str, Any], kw: dict[str, Any]) -> list[Any]:
    """``probe``, or for the ``*_raw`` cases the factors themselves (empty inputs: no sign to fix)."""
    if fn == "qr_raw":
        return list(lib.linalg.qr(ins["A"], mode=kw["mode"]))
    if fn == "svd_raw":
        return list(lib.linalg.svd(ins["A"], full_matrices=kw["full_matrices"]))
    return probe(lib, fn, ins, kw)


def main() -> None:
    import torch

    rng = np.random.default_rng(20261128)
    store: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    names = []
    for name, fn, ins, kw in cases(rng):
        names.append(name)
        tens = {k: torch.tensor(v, dtype=torch.float64, requires_grad=v.size > 0) for k, v in ins.items()}
        outs = run(torch, fn, tens, kw)
        store[f"{name}/fn"] = np.array(fn)
        store[f"{name}/kwargs"] = np.array(json.dumps(kw))
        for k, v in ins.items():
            store[f"{name}/in/{k}"] = v
        loss = None
        for i, o in enumerate(outs):
            store[f"{name}/out/{i}"] = o.detach().numpy()
            if o.dtype == torch.float64 and o.numel() and o.requires_grad:
                cot = rng.standard_normal(tuple(o.shape))
                store[f"{name}/cot/{i}"] = cot
                term = (o * torch.tensor(cot)).sum()
                loss = term if loss is None else loss + term
        if loss is not None and not name.startswith("nograd_"):
            try:
                grads = torch.autograd.grad(loss, list(tens.values()), allow_unused=True)
            except RuntimeError as e:
                # PyTorch refuses the gradient of QR with mode="r", and with mode="complete"
                # on a tall matrix (ferrograd: differentiable / refused with gQ).
                store[f"{name}/torch_grad_error"] = np.array(str(e))
                continue
            for k, g in zip(tens, grads, strict=True):
                if g is not None:
                    store[f"{name}/grad/{k}"] = g.numpy()
    store["cases"] = np.array(json.dumps(names))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **store)
    print(f"wrote {len(names)} cases to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
