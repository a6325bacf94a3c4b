"""When leaf gradient hooks run, and the end-of-backward callback.

A leaf's hooks run as soon as its gradient is final (no node still to run
reaches it), during the backward walk, not all together at its end; the
``.grad`` writes still wait for the end of the walk. Callbacks queued with
``fg.autograd._queue_callback`` from a hook run once the backward finishes.
"""

import time

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn


def t64(a, requires_grad=True):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64, requires_grad=requires_grad)


def make_chain(depth: int = 4, width: int = 8) -> nn.Sequential:
    fg.manual_seed(0)
    layers: list[nn.Module] = []
    for i in range(depth):
        layers.append(nn.Linear(width, width))
        if i < depth - 1:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def linears(model: nn.Sequential) -> list[nn.Linear]:
    return [m for m in model if isinstance(m, nn.Linear)]


def test_leaf_hooks_fire_during_the_walk_in_reverse_layer_order():
    model = make_chain()
    events: list[tuple[str, float]] = []
    lins = linears(model)
    first_hooked = []
    for i, lin in enumerate(lins):

        def hook(g, i=i):
            events.append((f"w{i}", time.perf_counter()))
            if i == len(lins) - 1:
                # The first layer's weight gradient is not computed yet.
                first_hooked.append(any(name == "w0" for name, _ in events))

        lin.weight.register_hook(hook)
    x = fg.randn(16, 8)
    h = x
    acts = []
    for m in model:
        h = m(h)
        if isinstance(m, nn.Tanh):
            k = len(acts)
            h.register_hook(lambda g, k=k: events.append((f"a{k}", time.perf_counter())))
            acts.append(h)
    loss = (h * h).sum()
    t0 = time.perf_counter()
    loss.backward()
    t1 = time.perf_counter()
    order = [name for name, _ in events]
    assert sorted(order) == ["a0", "a1", "a2", "w0", "w1", "w2", "w3"], order
    pos = {name: i for i, name in enumerate(order)}
    # Weight hooks run from the last layer to the first, each once its layer's
    # node has run (after the activation hook above it) and before the nodes
    # further towards the input (the activation hook two below): interleaved
    # with the walk, not gathered at its end.
    assert [n for n in order if n.startswith("w")] == ["w3", "w2", "w1", "w0"]
    for k in range(4):
        if k <= 2:
            assert pos[f"a{k}"] < pos[f"w{k}"], order
        if k >= 2:
            assert pos[f"w{k}"] < pos[f"a{k - 2}"], order
    assert pos["w3"] < pos["a0"]
    assert first_hooked == [False]
    assert all(t0 <= t <= t1 for _, t in events)
    for lin in lins:
        assert lin.weight.grad is not None and lin.bias.grad is not None


def test_shared_leaf_hook_waits_for_every_use_and_sees_the_sum():
    w = t64(np.linspace(-1, 1, 9).reshape(3, 3))
    x = t64(np.arange(6.0).reshape(2, 3), requires_grad=False)
    events: list[str] = []
    seen: list[np.ndarray] = []
    w.register_hook(lambda g: events.append("w") or seen.append(g.numpy().copy()))
    h1 = (x @ w).tanh()
    h1.register_hook(lambda g: events.append("h1"))
    h2 = (h1 @ w).tanh()
    h2.register_hook(lambda g: events.append("h2"))
    out = (h2 @ w).sum()
    out.backward()
    # w feeds three matmuls: its gradient is final only after the one nearest the input.
    assert events == ["h2", "h1", "w"]
    assert len(seen) == 1
    np.testing.assert_allclose(w.grad.numpy(), seen[0])
    # The same sum as three separate leaves would get.
    ws = [t64(w.detach().numpy()) for _ in range(3)]
    ((((x @ ws[0]).tanh() @ ws[1]).tanh()) @ ws[2]).sum().backward()
    np.testing.assert_allclose(seen[0], sum(v.grad.numpy() for v in ws), rtol=1e-12)


def test_grad_is_written_only_after_the_walk_and_replacements_accumulate():
    a = t64([1.0, 2.0])
    b = t64([3.0, 4.0])
    a.grad = fg.tensor(np.array([10.0, 10.0]), dtype=fg.float64)
    grads_seen_in_hooks = []
    a.register_hook(lambda g: grads_seen_in_hooks.append(("a", a.grad.numpy().copy())) or g * 2)
    b.register_hook(lambda g: grads_seen_in_hooks.append(("b", a.grad.numpy().copy())))
    y = (a * b).sum()
    y.backward(retain_graph=True)
    # Both hooks saw a.grad as it was before this backward.
    assert sorted(n for n, _ in grads_seen_in_hooks) == ["a", "b"]
    for _, g in grads_seen_in_hooks:
        np.testing.assert_array_equal(g, [10, 10])
    np.testing.assert_array_equal(a.grad.numpy(), [16, 18])  # 10 + 2 * b
    np.testing.assert_array_equal(b.grad.numpy(), [1, 2])
    y.backward()  # retained graph: accumulates again
    np.testing.assert_array_equal(a.grad.numpy(), [22, 26])
    np.testing.assert_array_equal(b.grad.numpy(), [2, 4])


def test_a_failing_hook_leaves_every_grad_untouched():
    a = t64([1.0, 2.0])
    b = t64([3.0, 4.0])
    fired = []
    a.register_hook(lambda g: fired.append("a"))

    def bad(g):
        raise KeyError("from a leaf hook")

    b.register_hook(bad)
    # The product's node gives a its final gradient; b's comes later, through tanh.
    y = ((b * b).tanh() * a).sum()
    with pytest.raises(KeyError, match="from a leaf hook"):
        y.backward()
    assert fired == ["a"]  # a's hook ran before b's raised ...
    assert a.grad is None and b.grad is None  # ... but no .grad was written


def test_create_graph_with_early_hooks_gives_second_derivatives():
    x = t64([1.0, 2.0, 3.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.requires_grad))
    y = (x**3).sum()
    y.backward(create_graph=True)
    assert seen == [True]
    np.testing.assert_allclose(x.grad.numpy(), [3, 12, 27])
    (gg,) = fg.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6, 12, 18])


def test_callback_runs_once_after_every_grad_is_written():
    model = make_chain(depth=3)
    lins = linears(model)
    log: list[str] = []
    state = {"queued": False}

    def callback():
        # Every .grad of this backward is written when it runs.
        log.append("cb:" + ",".join(str(lin.weight.grad is not None) for lin in lins))
        fg.autograd._queue_callback(lambda: log.append("second"))  # a callback may queue another

    def hook(g):
        log.append("hook")
        if not state["queued"]:
            fg.autograd._queue_callback(callback)
            state["queued"] = True

    for lin in lins:
        lin.weight.register_hook(hook)
    model(fg.randn(4, 8)).sum().backward()
    assert log == ["hook", "hook", "hook", "cb:True,True,True", "second"]
    # Nothing queued: the next backward runs no callback.
    log.clear()
    state["queued"] = True
    model(fg.randn(4, 8)).sum().backward()
    assert log == ["hook", "hook", "hook"]


def test_callback_order_autograd_grad_and_nested_backward():
    x = t64([1.0, 2.0])
    order: list[str] = []

    def hook(g):
        fg.autograd._queue_callback(lambda: order.append("outer-1"))
        # A nested backward has its own callbacks, run when it ends.
        z = t64([5.0])
        z.register_hook(lambda gz: fg.autograd._queue_callback(lambda: order.append("inner")))
        (z * 2).sum().backward()
        order.append("nested-done")
        fg.autograd._queue_callback(lambda: order.append("outer-2"))

    x.register_hook(hook)
    (g,) = fg.autograd.grad((x * x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [2, 4])
    assert order == ["inner", "nested-done", "outer-1", "outer-2"]


def test_callback_outside_backward_errors_raise_and_failed_backward_drops_them():
    with pytest.raises(RuntimeError, match="backward pass is running"):
        fg.autograd._queue_callback(lambda: None)

    x = t64([1.0])
    x.register_hook(lambda g: fg.autograd._queue_callback(bad))

    def bad():
        raise ValueError("from a callback")

    with pytest.raises(ValueError, match="from a callback"):
        (x * 3).sum().backward()
    # The callback runs after the writes: the gradient is there.
    np.testing.assert_array_equal(x.grad.numpy(), [3])

    ran = []
    a = t64([1.0])
    b = t64([2.0])
    a.register_hook(lambda g: fg.autograd._queue_callback(lambda: ran.append(1)))

    def boom(g):
        raise KeyError("later hook")

    b.register_hook(boom)
    with pytest.raises(KeyError):
        ((b * b).tanh() * a).sum().backward()
    assert ran == []
    assert a.grad is None
    # The failed backward's callback does not leak into the next one.
    (a * 1).sum().backward()
    assert ran == [1]


def test_callbacks_run_after_the_grad_writes_of_backward_with_inputs():
    # backward(inputs=...) writes only the named leaves' .grad; a queued callback sees those writes
    # (so a callback that replaces a .grad, as DistributedDataParallel's does, has the last word).
    model = make_chain(depth=3, width=4)
    lins = linears(model)
    seen: list[list[float] | None] = []
    state = {"queued": False}

    def callback():
        seen.extend(
            None if lin.weight.grad is None else lin.weight.grad.numpy().ravel().tolist() for lin in lins
        )
        lins[0].weight.grad = fg.zeros(4, 4)  # replaced after the engine's write

    def hook(g):
        if not state["queued"]:
            fg.autograd._queue_callback(callback)
            state["queued"] = True

    for lin in lins:
        lin.weight.register_hook(hook)
    x = fg.randn(2, 4)
    model(x).sum().backward(inputs=[lins[0].weight, lins[2].weight])
    assert seen[1] is None  # not among the inputs: untouched
    assert seen[0] is not None and seen[2] is not None
    want = [
        g.numpy().ravel().tolist() for g in fg.autograd.grad(model(x).sum(), [lins[0].weight, lins[2].weight])
    ]
    assert seen[0] == want[0] and seen[2] == want[1]
    # the callback's replacement stands: nothing was added to it afterwards
    np.testing.assert_array_equal(lins[0].weight.grad.numpy(), np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(lins[2].weight.grad.numpy().ravel(), want[1])
