"""Module backward hooks (``register_full_backward_hook`` /
``register_full_backward_pre_hook``), as in PyTorch: what they receive, what
their results replace, and where they stay out of the way."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn as nn
import numpy as np
import pytest


def arr(t):
    return np.asarray(t.detach())


def test_hook_sees_and_replaces_the_input_gradient():
    fg.manual_seed(0)
    lin = nn.Linear(3, 2)
    seen = {}

    def hook(m, grad_input, grad_output):
        assert m is lin
        seen["gi"], seen["go"] = grad_input, grad_output
        return (grad_input[0] * 10,)

    h = lin.register_full_backward_hook(hook)
    x = fg.randn(4, 3, requires_grad=True)
    lin(x).sum().backward()
    w = arr(lin.weight)
    np.testing.assert_allclose(arr(seen["go"][0]), np.ones((4, 2)))
    np.testing.assert_allclose(arr(seen["gi"][0]), np.ones((4, 2)) @ w, rtol=1e-6)
    np.testing.assert_allclose(arr(x.grad), 10 * np.ones((4, 2)) @ w, rtol=1e-6)
    # Parameters' gradients are not the hook's to change.
    np.testing.assert_allclose(arr(lin.bias.grad), [4.0, 4.0])
    h.remove()
    x.grad = None
    lin(x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), np.ones((4, 2)) @ w, rtol=1e-6)


def test_first_layer_hook_gets_none_for_an_input_without_grad():
    fg.manual_seed(1)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    calls = []
    net[0].register_full_backward_hook(lambda m, gi, go: calls.append((gi, go[0].shape)))
    net(fg.randn(5, 3)).sum().backward()
    assert len(calls) == 1 and calls[0][0] == (None,) and calls[0][1] == (5, 4)
    assert net[0].weight.grad is not None


def test_pre_hook_scales_the_output_gradient():
    fg.manual_seed(2)
    lin = nn.Linear(3, 2)
    x = fg.randn(4, 3)
    lin(x).sum().backward()
    ref = arr(lin.weight.grad).copy()
    lin.zero_grad()
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    lin(x).sum().backward()
    np.testing.assert_allclose(arr(lin.weight.grad), 3 * ref, rtol=1e-6)


class _Two(nn.Module):
    def forward(self, a, scale, b):
        return a * scale + b * b, a - b


def test_several_inputs_and_outputs():
    m = _Two()
    got = {}
    m.register_full_backward_hook(lambda mod, gi, go: got.update(gi=gi, go=go))
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    b = fg.tensor([3.0, -1.0], requires_grad=True)
    u, v = m(a, 2.0, b)
    (u.sum() + 5 * v.sum()).backward()
    assert len(got["gi"]) == 2 and len(got["go"]) == 2
    np.testing.assert_allclose(arr(got["go"][1]), [5.0, 5.0])
    np.testing.assert_allclose(arr(got["gi"][0]), [7.0, 7.0])  # 2 + 5
    np.testing.assert_allclose(arr(got["gi"][1]), [2 * 3.0 - 5, 2 * -1.0 - 5])
    np.testing.assert_allclose(arr(a.grad), arr(got["gi"][0]))


def test_a_hook_returning_the_wrong_count_is_an_error():
    lin = nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    x = fg.randn(1, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Linear backward hook returned 2 gradients for 1 inputs"):
        lin(x).sum().backward()


def test_no_hooks_without_grad_and_compiled_eval_matches():
    fg.manual_seed(3)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    calls = []
    net[2].register_full_backward_hook(lambda m, gi, go: calls.append(1))
    x = fg.randn(6, 3)
    with fg.no_grad():
        ref = arr(net(x))
        got = arr(fg.compile(net)(x))
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert calls == []


def test_older_name_registers_a_full_hook():
    lin = nn.Linear(2, 1)
    calls = []
    lin.register_backward_hook(lambda m, gi, go: calls.append(gi))
    lin(fg.randn(3, 2, requires_grad=True)).sum().backward()
    assert len(calls) == 1 and calls[0][0].shape == (3, 2)
    assert lin.share_memory() is lin
