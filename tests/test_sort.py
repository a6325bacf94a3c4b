"""The sort family beyond the op table: ties, NaN, argument errors, the
selection path of topk on long rows, capture with save/load, ONNX export, and a
minGPT-style sampling loop written the PyTorch way."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest

NAN = float("nan")


def arr(t):
    return np.asarray(t.detach())


def test_ties_keep_input_order_both_directions():
    x = fg.tensor([[2.0, 1.0, 2.0, 1.0, 2.0], [0.0, -0.0, 0.0, 3.0, -0.0]])
    for stable in (False, True):
        v, i = fg.sort(x, stable=stable)
        assert arr(i).tolist() == [[1, 3, 0, 2, 4], [0, 1, 2, 4, 3]]
        v, i = fg.sort(x, descending=True, stable=stable)
        assert arr(i).tolist() == [[0, 2, 4, 1, 3], [3, 0, 1, 2, 4]]
    # -0.0 and 0.0 tie: the values keep their own bits.
    v, _ = fg.sort(x)
    assert np.signbit(arr(v)[1]).tolist() == [False, True, False, True, False]


def test_nan_sorts_largest():
    x = fg.tensor([3.0, NAN, -1.0, NAN, 2.0])
    v, i = fg.sort(x)
    assert arr(i).tolist() == [2, 4, 0, 1, 3]
    assert np.isnan(arr(v)[3:]).all()
    v, i = fg.sort(x, descending=True)
    assert arr(i).tolist() == [1, 3, 0, 4, 2]
    v, i = fg.topk(x, 2)
    assert arr(i).tolist() == [1, 3]
    v, i = fg.topk(x, 2, largest=False)
    assert arr(v).tolist() == [-1.0, 2.0]


def test_median_nan_rules():
    x = fg.tensor([[1.0, NAN, 3.0, 2.0], [4.0, 1.0, 2.0, 3.0], [NAN, NAN, NAN, NAN]])
    v, i = fg.median(x, 1)
    assert np.isnan(arr(v)[0]) and arr(i)[0] == 1  # the first NaN
    assert arr(v)[1] == 2.0 and arr(i)[1] == 2  # the lower median
    v, i = fg.nanmedian(x, 1)
    assert arr(v)[:2].tolist() == [2.0, 2.0] and arr(i)[:2].tolist() == [3, 2]
    assert np.isnan(arr(v)[2])
    assert np.isnan(arr(fg.median(x)))
    assert arr(fg.nanmedian(x)) == 2.0
    assert fg.median(fg.tensor([5, 1, 4, 2], dtype=fg.int64)).item() == 2


def test_named_tuples_and_zero_d():
    r = fg.topk(fg.tensor([1.0, 3.0, 2.0]), 2)
    assert type(r).__name__ == "topk" and type(r).__module__ == "ferrograd.return_types"
    assert arr(r.values).tolist() == [3.0, 2.0] and r.indices.dtype == fg.int64
    s = fg.tensor(4.0)
    v, i = s.sort()
    assert v.shape == () and i.item() == 0 and v.item() == 4.0
    assert fg.kthvalue(s, 1).values.item() == 4.0
    e = fg.zeros(2, 0)
    v, i = fg.sort(e)
    assert v.shape == (2, 0) and i.dtype == fg.int64
    assert fg.topk(e, 0).values.shape == (2, 0)


def test_bad_arguments_raise_clear_errors():
    x = fg.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"topk: k \(4\) is out of range.*\[2, 3\].*size 3"):
        fg.topk(x, 4)
    with pytest.raises(RuntimeError, match="topk: k"):
        fg.topk(x, -1)
    with pytest.raises(IndexError, match="sort: dimension out of range"):
        fg.sort(x, 2)
    with pytest.raises(RuntimeError, match=r"kthvalue: k \(0\)"):
        fg.kthvalue(x, 0)
    with pytest.raises(IndexError, match="median: cannot take the median of an empty dim"):
        fg.median(fg.zeros(2, 0), 1)
    with pytest.raises(TypeError, match="topk: k must be an int"):
        fg.topk(x, 1.5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64", "bool"])
def test_topk_selection_equals_full_sort_on_long_rows(dtype):
    rng = np.random.default_rng(1)
    a = rng.integers(-50, 50, size=(3, 50_000))  # many ties: the index order decides
    a = a > 0 if dtype == "bool" else a.astype(dtype)
    x = fg.tensor(a)
    for largest in (True, False):
        v, i = fg.topk(x, 7, largest=largest)
        key = (~a if dtype == "bool" else -a) if largest else a
        order = np.argsort(key, axis=1, kind="stable")[:, :7]
        assert np.array_equal(arr(i), order)
        assert np.array_equal(arr(v), np.take_along_axis(a, order, 1))


def test_gradient_scatters_to_the_indices():
    x = fg.tensor([[0.5, 2.0, -1.0, 4.0]], requires_grad=True)
    v, _ = fg.topk(x, 2)
    (v * fg.tensor([[10.0, 1.0]])).sum().backward()
    assert arr(x.grad).tolist() == [[0.0, 1.0, 0.0, 10.0]]
    assert v.grad_fn.name().startswith("TopkBackward")


def test_capture_save_and_load(tmp_path):
    def f(x):
        v, i = fg.topk(x, 3, dim=0)
        return v * 2, fg.sort(x, descending=True).indices, fg.median(x, 1).values

    x = fg.randn(6, 5)
    c = fg.compile(f)
    for got, want in zip(c(x), f(x), strict=True):
        assert np.array_equal(arr(got), arr(want), equal_nan=True)
    path = tmp_path / "sort.fgraph"
    c.graph(x).save(path)
    g = fg.load_graph(path)
    y = fg.randn(6, 5)
    for got, want in zip(g(y), f(y), strict=True):
        assert np.array_equal(arr(got), arr(want))


def test_onnx_topk_and_sort():
    pytest.importorskip("onnx", reason="the onnx package is not installed")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

    def f(x):
        v, i = fg.topk(x, 3)
        s, j = fg.sort(x, dim=0, descending=False)
        return v, i, s, j

    x = fg.tensor(np.random.default_rng(0).permutation(20).reshape(4, 5).astype(np.float32))
    model = fg.onnx.export(f, (x,))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("TopK") == 2
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {sess.get_inputs()[0].name: arr(x)})
    for got, want in zip(outs, f(x), strict=True):
        assert np.array_equal(got, arr(want))


def test_mingpt_generate_with_top_k():
    """minGPT's sampling loop, written as for PyTorch (topk, masked assignment, multinomial)."""
    fg.manual_seed(0)
    vocab, block = 50, 8
    emb = fg.nn.Embedding(vocab, 16)
    head = fg.nn.Linear(16, vocab)

    def model(idx):
        return head(emb(idx))

    @fg.no_grad()
    def generate(idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= block else idx[:, -block:]
            logits = model(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = fg.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = fg.multinomial(probs, num_samples=1)
            idx = fg.cat((idx, idx_next), dim=1)
        return idx

    idx = fg.zeros((2, 1), dtype=fg.int64)
    out = generate(idx, 12, top_k=3)
    assert out.shape == (2, 13)
    # Every sampled token was among the 3 most likely at its step.
    for t in range(1, 13):
        logits = model(out[:, max(0, t - block) : t])[:, -1, :]
        top = arr(fg.topk(logits, 3).indices)
        for b in range(2):
            assert arr(out)[b, t] in top[b]
