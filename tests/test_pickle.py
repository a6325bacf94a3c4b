"""pickle and copy.deepcopy of tensors, Parameters and Modules."""

from __future__ import annotations

import copy
import pickle

import ferrograd as fg
import ferrograd.nn as nn
import numpy as np
import pytest

DTYPES = [fg.float32, fg.float64, fg.float16, fg.bfloat16, fg.int32, fg.int64, fg.bool]


def values(t):
    d = t.detach()
    if d.dtype == fg.bfloat16:
        d = d.to(fg.float32)
    return np.asarray(d)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("make", ["plain", "transposed", "sliced", "empty", "scalar"])
def test_tensor_round_trips(dtype, make):
    base = (fg.randn(4, 5) * 3).to(dtype)
    t = {
        "plain": base,
        "transposed": base.T,
        "sliced": base[1:, ::2],
        "empty": base[:0],
        "scalar": base[1, 2],
    }[make]
    for copied in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert type(copied) is fg.Tensor
        assert copied.dtype == t.dtype and tuple(copied.shape) == tuple(t.shape)
        np.testing.assert_array_equal(values(copied), values(t))


def test_requires_grad_and_grad():
    x = fg.randn(3, requires_grad=True)
    (x * 2).sum().backward()
    p = pickle.loads(pickle.dumps(x))
    assert p.requires_grad and p.is_leaf and p.grad is None
    d = copy.deepcopy(x)
    assert d.requires_grad and d.is_leaf
    np.testing.assert_array_equal(np.asarray(d.grad), np.asarray(x.grad))
    # Independent storage.
    with fg.no_grad():
        x.add_(1.0)
    assert not np.array_equal(np.asarray(d.detach()), np.asarray(x.detach()))


def test_non_leaf_is_refused_like_pytorch():
    x = fg.randn(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="leaves"):
        copy.deepcopy(y)
    with pytest.raises(RuntimeError, match="detach"):
        pickle.dumps(y)
    np.testing.assert_array_equal(np.asarray(pickle.loads(pickle.dumps(y.detach()))), np.asarray(y.detach()))


def test_parameter_stays_a_parameter():
    p = nn.Parameter(fg.randn(2, 2))
    for q in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert isinstance(q, nn.Parameter) and q.requires_grad
        np.testing.assert_array_equal(np.asarray(q.detach()), np.asarray(p.detach()))
    frozen = nn.Parameter(fg.randn(2), requires_grad=False)
    assert not pickle.loads(pickle.dumps(frozen)).requires_grad


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.b.weight = self.a.weight  # shared
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.b(self.a(x)))


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_module_round_trip(how):
    fg.manual_seed(0)
    m = Tied()
    m(fg.randn(8, 4))  # running stats move
    m.eval()
    c = pickle.loads(pickle.dumps(m)) if how == "pickle" else copy.deepcopy(m)
    assert not c.training
    assert c.b.weight is c.a.weight  # sharing survives within the copy
    assert c.a.weight is not m.a.weight
    x = fg.randn(5, 4)
    np.testing.assert_array_equal(np.asarray(c(x).detach()), np.asarray(m(x).detach()))
    for (k, v), (k2, v2) in zip(m.state_dict().items(), c.state_dict().items(), strict=True):
        assert k == k2
        np.testing.assert_array_equal(values(v), values(v2))
    # Training the copy leaves the original alone.
    before = np.asarray(m.a.weight.detach()).copy()
    opt = fg.optim.SGD(c.parameters(), lr=0.1)
    c.train()
    c(x).sum().backward()
    opt.step()
    np.testing.assert_array_equal(np.asarray(m.a.weight.detach()), before)
