"""``optim.SparseAdam`` with ``nn.Embedding(sparse=True)``: a small model trained for several
steps against stored PyTorch references (``scripts/make_sparse_adam_references.py``: the table,
both moments and a dense layer trained beside it with Adam after every step), the row set the
lookup records, and the errors PyTorch raises (dense gradients, bad options)."""

from __future__ import annotations

import json
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

nn = fg.nn
F = fg.nn.functional

REF = Path(__file__).parent / "fixtures" / "parity" / "sparse_adam.npz"
_DATA = np.load(REF)
CASES = [str(c) for c in _DATA["cases"]]


@pytest.mark.parametrize("case", CASES)
def test_training_matches_torch(case):
    opts = json.loads(str(_DATA[f"{case}/options"]))
    emb = nn.Embedding(20, 4, sparse=True, padding_idx=opts["padding_idx"], dtype=fg.float64)
    lin = nn.Linear(4, 3, dtype=fg.float64)
    with fg.no_grad():
        emb.weight.copy_(fg.tensor(_DATA[f"{case}/emb0"]))
        lin.weight.copy_(fg.tensor(_DATA[f"{case}/lin_w0"]))
        lin.bias.copy_(fg.tensor(_DATA[f"{case}/lin_b0"]))
    kw = dict(opts["opt"])
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    sopt = fg.optim.SparseAdam(list(emb.parameters()), **kw)
    dopt = fg.optim.Adam(lin.parameters(), lr=0.01)
    passes = 2 if opts["accumulate"] else 1
    untouched = np.ones(20, bool)
    for step in range(int(_DATA["steps"])):
        sopt.zero_grad()
        dopt.zero_grad()
        for k in range(passes):
            idx = _DATA[f"{case}/idx{step}_{k}"]
            untouched[idx.reshape(-1)] = False
            out = lin(emb(fg.tensor(idx)))
            ((out - fg.tensor(_DATA[f"{case}/tgt{step}_{k}"])) ** 2).mean().backward()
        sopt.step()
        dopt.step()
        st = sopt.state[emb.weight]
        for got, key in (
            (emb.weight, "emb"),
            (st["exp_avg"], "exp_avg"),
            (st["exp_avg_sq"], "exp_avg_sq"),
            (lin.weight, "lin_w"),
        ):
            np.testing.assert_allclose(
                got.detach().numpy(),
                _DATA[f"{case}/{key}{step + 1}"],
                rtol=1e-12,
                atol=1e-14,
                err_msg=f"{key} {step}",
            )
    # Rows never looked up kept their initial values and zero moments.
    assert untouched.any()
    np.testing.assert_array_equal(emb.weight.detach().numpy()[untouched], _DATA[f"{case}/emb0"][untouched])
    assert not sopt.state[emb.weight]["exp_avg"].numpy()[untouched].any()


def test_references_record_their_torch_version():
    assert str(_DATA["torch_version"]).startswith("2.")


def test_row_set_follows_gradient_lifetime():
    from ferrograd import _sparse_rows

    emb = nn.Embedding(10, 2, sparse=True, padding_idx=1)
    emb(fg.tensor([3, 1, 5])).sum().backward()
    np.testing.assert_array_equal(_sparse_rows.rows(emb.weight), [3, 5])  # padding row left out
    emb(fg.tensor([7])).sum().backward()  # the gradient accumulates, and so do the rows
    np.testing.assert_array_equal(_sparse_rows.rows(emb.weight), [3, 5, 7])
    emb.weight.grad = None
    emb(fg.tensor([2])).sum().backward()  # a fresh gradient: a fresh set
    np.testing.assert_array_equal(_sparse_rows.rows(emb.weight), [2])
    with fg.no_grad():
        emb(fg.tensor([9]))  # records nothing: no gradient will flow
    np.testing.assert_array_equal(_sparse_rows.rows(emb.weight), [2])
    assert repr(emb) == "Embedding(10, 2, padding_idx=1, sparse=True)"


def test_functional_sparse_embedding_records_rows():
    from ferrograd import _sparse_rows

    w = nn.Parameter(fg.randn(6, 3))
    F.embedding(fg.tensor([[4, 0], [4, 2]]), w, sparse=True).sum().backward()
    np.testing.assert_array_equal(_sparse_rows.rows(w), [0, 2, 4])
    opt = fg.optim.SparseAdam([w], lr=0.1)
    before = w.detach().numpy().copy()
    opt.step()
    moved = np.abs(w.detach().numpy() - before).sum(1) > 0
    np.testing.assert_array_equal(moved, [True, False, True, False, True, False])


def test_zero_grad_in_place_forgets_the_rows():
    # PyTorch's zero_grad(set_to_none=False) empties a sparse gradient: the next lookup's rows
    # are the only ones updated.
    emb = nn.Embedding(6, 2, sparse=True)
    opt = fg.optim.SparseAdam(emb.parameters(), lr=0.1)
    emb(fg.tensor([1, 2])).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    before = emb.weight.detach().numpy().copy()
    emb(fg.tensor([4])).sum().backward()
    opt.step()
    moved = np.abs(emb.weight.detach().numpy() - before).sum(1) > 0
    np.testing.assert_array_equal(moved, [False, False, False, False, True, False])


def test_dense_gradient_raises():
    lin = nn.Linear(3, 2)
    lin(fg.randn(4, 3)).sum().backward()
    opt = fg.optim.SparseAdam(lin.parameters())
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()
    emb = nn.Embedding(5, 2)  # sparse=False: a dense gradient, as in PyTorch
    emb(fg.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        fg.optim.SparseAdam(emb.parameters()).step()


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"lr": -1.0}, "Invalid learning rate"),
        ({"eps": -1.0}, "Invalid epsilon value"),
        ({"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0"),
        ({"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1"),
    ],
)
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        fg.optim.SparseAdam([nn.Parameter(fg.zeros(2, 2))], **kw)


def test_sparse_lookup_cannot_be_captured():
    emb = nn.Embedding(5, 2, sparse=True)

    @fg.compile
    def f(i):
        return emb(i).sum()

    with pytest.raises(fg.TraceError, match="embedding: sparse=True"):
        f(fg.tensor([1, 2]))


@pytest.mark.skipif(not fg.gpu.is_available(), reason="no WebGPU adapter: the GPU step is not checked")
def test_gpu_step_matches_cpu():
    results = []
    for dev in ("cpu", "gpu"):
        emb = nn.Embedding(10, 3, sparse=True)
        with fg.no_grad():
            emb.weight.copy_(fg.tensor(np.arange(30.0).reshape(10, 3) / 7, dtype=fg.float32))
        emb.to(dev)
        opt = fg.optim.SparseAdam(emb.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            (emb(fg.tensor([[1, 2], [2, 5]]).to(dev)) ** 2).sum().backward()
            opt.step()
        results.append(emb.weight.detach().cpu().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-6)
    untouched = [0, 3, 4, 6, 7, 8, 9]
    np.testing.assert_array_equal(
        results[1][untouched], (np.arange(30.0).reshape(10, 3) / 7)[untouched].astype(np.float32)
    )
