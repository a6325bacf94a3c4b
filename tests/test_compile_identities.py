"""Arithmetic identities of a value that is later written in place.

``before = out * 1.0; out.add_(1)`` keeps in ``before`` the value ``out`` had:
in eager ``out * 1.0`` is a new tensor. The graph pass ``simplify`` removes
such identities only where the value is never written in place.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest

IDENTITIES = {
    "mul1": lambda t: t * 1.0,
    "add0": lambda t: t + 0.0,
    "sub0": lambda t: t - 0,
    "div1": lambda t: t / 1.0,
    "pow1": lambda t: t**1,
    "radd0": lambda t: 0.0 + t,
    "negneg": lambda t: (-t).neg(),
}


@pytest.mark.parametrize("name", list(IDENTITIES))
def test_identity_of_a_value_written_later_keeps_the_old_value(name):
    identity = IDENTITIES[name]

    def f(x):
        out = x * 3.0
        before = identity(out)
        out.add_(1.0)
        out.relu_()
        return out, before

    x = fg.tensor(np.array([[1.0, -2.0], [0.5, -4.0]], dtype=np.float32))
    expected_before = x.numpy() * 3.0
    expected_out = np.maximum(expected_before + 1.0, 0.0)
    compiled = fg.compile(f)
    with fg.no_grad():
        for out, before in (f(x), compiled(x), compiled(x)):
            np.testing.assert_array_equal(before.numpy(), expected_before)
            np.testing.assert_array_equal(out.numpy(), expected_out)


def test_identity_of_a_value_never_written_is_still_removed():
    """The pass still removes ``x * 1`` where nothing writes ``x``."""

    def f(x):
        out = x * 3.0
        return (out * 1.0).exp()

    x = fg.tensor(np.array([0.5, -1.0], dtype=np.float32))
    simplify = [p for p in fg.compile(f).graph(x).passes if p["pass"] == "simplify"]
    np.testing.assert_allclose(fg.compile(f)(x).numpy(), np.exp(x.numpy() * 3.0), rtol=1e-6)
    assert simplify[0]["detail"].startswith("1 identities removed"), simplify
