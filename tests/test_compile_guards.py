"""``fg.compile`` guards: state a trace reads from Python (module attributes,
training flags, optimizer options) changed between compiled calls retraces
and matches eager; ``explain=True`` names what changed; the trace-time
errors and debugging aids."""

from __future__ import annotations

import inspect

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest


def arr(t):
    return np.asarray(t.detach())


def same(a, b):
    np.testing.assert_array_equal(arr(a), arr(b))


# ---------------------------------------------------------------------------
# Module attributes
# ---------------------------------------------------------------------------


def test_leaky_relu_slope_change_retraces_and_switching_back_reuses():
    m = nn.LeakyReLU(0.1)
    f = fg.compile(m)
    x = fg.randn(4, 5, dtype=fg.float64)
    same(f(x), m(x))
    m.negative_slope = 0.5
    same(f(x), m(x))
    assert f.stats.traces == 2
    m.negative_slope = 0.1  # an equal value (another float object): the first trace again
    same(f(x), m(x))
    assert f.stats.traces == 2


def test_dropout_p_change_retraces():
    d = nn.Dropout(0.5)
    f = fg.compile(d)
    x = fg.ones(1000)
    assert int((f(x) == 0).sum().item()) > 100
    d.p = 0.0
    out = f(x)
    assert int((out == 0).sum().item()) == 0
    same(out, d(x))
    assert f.stats.traces == 2


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3, dtype=fg.float64)
        self.k = 3
        self.mode = "mul"
        self.shift = (1.0, 2.0)
        self.extra = [0.5]

    def forward(self, x):
        y = self.lin(x)
        y = y * self.k if self.mode == "mul" else y + self.k
        return y + self.shift[0] * self.shift[1] + sum(self.extra)


def test_user_module_plain_attributes_are_guarded():
    m = _Scaled()
    f = fg.compile(m)
    x = fg.randn(2, 3, dtype=fg.float64)
    same(f(x), m(x))
    changes = [
        lambda: setattr(m, "k", 5),
        lambda: setattr(m, "k", 5.0),  # same value, another type: retraces
        lambda: setattr(m, "mode", "add"),
        lambda: setattr(m, "shift", (1.0, 3.0)),
        lambda: m.extra.append(2.0),  # a list changed in place
    ]
    for n, change in enumerate(changes, start=2):
        change()
        same(f(x), m(x))
        assert f.stats.traces == n
    f(x)
    assert f.stats.traces == len(changes) + 1


def test_module_attribute_read_through_a_closure_is_guarded():
    m = _Scaled()
    f = fg.compile(lambda x: x * m.k)  # m is never called, only read
    x = fg.randn(4, dtype=fg.float64)
    same(f(x), x * 3)
    m.k = 4
    same(f(x), x * 4)
    assert f.stats.traces == 2


def test_submodule_attributes_read_through_the_parent_are_guarded():
    class Outer(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = fg.nn.LeakyReLU(0.1)
            self.seq = fg.nn.Sequential(_Scaled())
            self.lst = fg.nn.ModuleList([_Scaled()])

        def forward(self, x):
            # Attributes of submodules that are never called.
            return x * self.act.negative_slope + self.seq[0].k + sum(m.k for m in self.lst)

    m = Outer()
    f = fg.compile(m)
    x = fg.randn(3, dtype=fg.float64)
    same(f(x), m(x))
    for n, change in enumerate(
        [
            lambda: setattr(m.act, "negative_slope", 0.5),
            lambda: setattr(m.seq[0], "k", 7),
            lambda: setattr(m.lst[0], "k", -2),
        ],
        start=2,
    ):
        change()
        same(f(x), m(x))
        assert f.stats.traces == n


def test_compiled_method_guards_its_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2.0

        @fg.compile
        def scale(self, x):
            return x * self.k

    m = M()
    x = fg.randn(3, dtype=fg.float64)
    same(m.scale(x), x * 2.0)
    m.k = 7.0
    same(m.scale(x), x * 7.0)


def test_replaced_submodule_and_added_hook_retrace():
    model = nn.Sequential(nn.Linear(3, 3, dtype=fg.float64), nn.ReLU())
    f = fg.compile(model)
    x = fg.randn(4, 3, dtype=fg.float64)
    same(f(x), model(x))
    model[1] = nn.Tanh()
    same(f(x), model(x))
    assert f.stats.traces == 2
    h = model[0].register_forward_hook(lambda mod, args, out: out * 2)
    same(f(x), model(x))
    assert f.stats.traces == 3
    h.remove()
    same(f(x), model(x))


def test_train_eval_toggles_keep_both_traces():
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4, dtype=fg.float64), nn.Dropout(0.5))
    f = fg.compile(model)
    x = fg.randn(8, 4, dtype=fg.float64)
    for i in range(6):
        model.train(i % 2 == 0)
        fg.manual_seed(10 + i)
        got = f(x)
        fg.manual_seed(10 + i)
        same(got, model(x))
    assert f.stats.traces == 2
    assert f.stats.calls == 6


def test_assigning_the_same_value_is_not_a_change():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    f = fg.compile(model)
    x = fg.randn(2, 4)
    f(x)
    v = nn.Module._structure_version
    for _ in range(3):
        model.train()  # every step, as training loops do
        f(x)
    assert nn.Module._structure_version == v
    assert f.stats.traces == 1


# ---------------------------------------------------------------------------
# Optimizer options
# ---------------------------------------------------------------------------


def _pair(make_opt, seed=0):
    """Two identical (model, optimizer) pairs: one run eagerly, one compiled."""
    out = []
    for _ in range(2):
        fg.manual_seed(seed)
        m = nn.Linear(3, 2, dtype=fg.float64)
        out.append((m, make_opt(m.parameters())))
    return out


def _step(m, o, x):
    o.zero_grad()
    loss = (m(x) ** 2).sum()
    loss.backward()
    o.step()
    return loss


def _run_changes(make_opt, changes, traces):
    (em, eo), (cm, co) = _pair(make_opt)
    cstep = fg.compile(lambda x: _step(cm, co, x))
    x = fg.randn(4, 3, dtype=fg.float64)
    for change in [None, *changes]:
        if change is not None:
            change(eo)
            change(co)
        for _ in range(2):
            same(cstep(x), _step(em, eo, x))
            same(cm.weight, em.weight)
            same(cm.bias, em.bias)
    assert cstep.stats.traces == traces
    return cstep


def _set(key, value):
    def change(opt):
        opt.param_groups[0][key] = value

    return change


def test_sgd_momentum_from_zero_retraces():
    _run_changes(lambda p: fg.optim.SGD(p, lr=0.1), [_set("momentum", 0.9)], traces=2)


def test_sgd_nesterov_and_maximize_retrace_but_lr_momentum_weight_decay_do_not():
    _run_changes(
        lambda p: fg.optim.SGD(p, lr=0.1, momentum=0.5),
        [
            _set("lr", 0.05),  # slots: no retrace
            _set("momentum", 0.8),
            _set("weight_decay", 0.1),
            _set("nesterov", True),  # baked: retraces
            _set("maximize", True),
        ],
        traces=3,
    )


def test_adam_amsgrad_retraces_betas_do_not():
    _run_changes(
        lambda p: fg.optim.Adam(p, lr=0.01),
        [_set("betas", (0.8, 0.99)), _set("weight_decay", 0.01), _set("amsgrad", True)],
        traces=2,
    )


def test_rmsprop_momentum_is_a_slot_once_positive():
    _run_changes(
        lambda p: fg.optim.RMSprop(p, lr=0.01),
        [_set("momentum", 0.9), _set("momentum", 0.5), _set("centered", True)],
        traces=3,
    )


def test_steplr_eager_weight_update_and_dropout_between_compiled_calls():
    def make():
        fg.manual_seed(1)
        model = nn.Sequential(nn.Linear(5, 8, dtype=fg.float64), nn.Dropout(0.3), nn.Linear(8, 2, dtype=fg.float64))
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return model, opt, fg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    (em, eo, es), (cm, co, cs) = make(), make()
    x = fg.randn(6, 5, dtype=fg.float64)
    y = fg.randn(6, 2, dtype=fg.float64)

    def step(m, o, x, y):
        o.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        o.step()
        return loss

    cstep = fg.compile(lambda x, y: step(cm, co, x, y))
    for i in range(4):
        fg.manual_seed(100 + i)  # the same dropout masks
        lc = cstep(x, y)
        fg.manual_seed(100 + i)
        le = step(em, eo, x, y)
        same(lc, le)
        for (n, pe), pc in zip(em.named_parameters(), cm.parameters(), strict=True):
            np.testing.assert_array_equal(arr(pc), arr(pe), err_msg=n)
        es.step()
        cs.step()
        with fg.no_grad():
            em[0].weight.mul_(0.9)
            cm[0].weight.mul_(0.9)
    assert co.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**4)
    assert cstep.stats.traces == 1


# ---------------------------------------------------------------------------
# explain=True and the retrace warning
# ---------------------------------------------------------------------------


def test_explain_names_the_changed_argument(capsys):
    @fg.compile(explain=True)
    def f(x, n, cfg=None):
        return x * n

    x = fg.randn(2, 3)
    f(x, 2)
    f(x, 3)
    f(fg.randn(4, 3), 3)
    f(fg.randn(4, 3), 3, cfg={"a": (1, 2)})
    f(fg.randn(4, 3), 3, cfg={"a": (1, 5)})
    out = capsys.readouterr().out
    assert "tracing (first call)" in out
    assert "argument 1 (`n`): 2 -> 3" in out
    assert "argument 0 (`x`): tensor shape (2, 3) -> (4, 3)" in out
    assert "keyword arguments: [] -> ['cfg']" in out
    assert "keyword argument `cfg`['a'][1]: 2 -> 5" in out
    assert "[0] [1]" not in out


def test_explain_names_the_changed_module_attribute(capsys):
    m = nn.LeakyReLU(0.1)
    f = fg.compile(m, explain=True)
    x = fg.randn(3)
    f(x)
    m.negative_slope = 0.5
    f(x)
    out = capsys.readouterr().out
    assert "fg.compile(LeakyReLU): tracing (LeakyReLU.negative_slope changed (was 0.1))" in out


def test_explain_names_the_changed_optimizer_option(capsys):
    lin = nn.Linear(2, 2)
    opt = fg.optim.SGD(lin.parameters(), lr=0.1)
    step = fg.compile(lambda x: _step(lin, opt, x), explain=True)
    step(fg.ones(1, 2))
    opt.param_groups[0]["momentum"] = 0.9
    step(fg.ones(1, 2))
    out = capsys.readouterr().out
    assert "tracing (SGD.param_groups[0]['momentum'] != 0 changed (was False))" in out


def test_repeated_retraces_warn():
    f = fg.compile(lambda x, n: x * n)
    x = fg.randn(3)
    for n in range(7):
        f(x, n)
    with pytest.warns(UserWarning, match=r"argument 1 \(`n`\): 6 -> 7\); 8 traces so far"):
        f(x, 7)
    assert f.stats.traces == 8


def test_repeated_guard_retraces_warn():
    m = nn.LeakyReLU(0.0)
    f = fg.compile(m)
    x = fg.randn(3)
    for i in range(7):
        m.negative_slope = i / 10
        f(x)
    m.negative_slope = 0.7
    with pytest.warns(UserWarning, match=r"LeakyReLU.negative_slope changed \(was 0.6\)"):
        f(x)


# ---------------------------------------------------------------------------
# Debugging and errors
# ---------------------------------------------------------------------------


def test_debug_runs_eagerly():
    seen = []

    @fg.compile(debug=True)
    def f(x):
        seen.append(x.sum().item())  # a value in Python: fine eagerly
        return x * 2

    x = fg.ones(3)
    same(f(x), x * 2)
    assert seen == [3.0]
    assert f.stats.traces == 0


def _bool(t):
    return bool(t.sum() > 0)


def _item(t):
    return t.sum().item()


def _if(t):
    if t.sum() > 0:
        return t
    return -t


def _line(fn, text):
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(src) if text in s)


@pytest.mark.parametrize(
    "fn,text", [(_bool, "bool(t.sum() > 0)"), (_item, "t.sum().item()"), (_if, "if t.sum() > 0")]
)
def test_value_needed_in_python_names_the_line(fn, text):
    f = fg.compile(fn)
    with pytest.raises(fg.TraceError) as e:
        f(fg.ones(3))
    msg = str(e.value)
    assert f"{__file__}:{_line(fn, text)}" in msg
    assert "fg.cond" in msg and "fg.while_loop" in msg and 'fallback="eager"' in msg


def test_session_run_with_a_dict_of_fetches():
    g = fg.Graph()
    with g:
        a = fg.placeholder(fg.float64, name="a")
        b = a * 2
        c = a + 1
    out = fg.Session(g).run({"double": b, "inc": c}, feed={a: [1.0, 2.0]})
    assert set(out) == {"double", "inc"}
    assert arr(out["double"]).tolist() == [2.0, 4.0]
    assert arr(out["inc"]).tolist() == [2.0, 3.0]


# ---------------------------------------------------------------------------
# Gradients present or absent when traced
# ---------------------------------------------------------------------------


def _accumulating_step(model, x):
    loss = model(x).square().sum()
    loss.backward()
    return loss


@pytest.mark.parametrize("start_with_grad", [False, True])
def test_backward_accumulates_like_eager_as_grads_come_and_go(start_with_grad):
    """A backward traced while ``.grad`` was None sets it; once a gradient is
    there, eager adds to it: the trace must not be reused to overwrite it
    (and one traced to add must not run on a cleared gradient)."""
    fg.manual_seed(0)
    ref = nn.Linear(3, 2, dtype=fg.float64)
    cmp = nn.Linear(3, 2, dtype=fg.float64)
    cmp.load_state_dict(ref.state_dict())
    if start_with_grad:
        for p in (*ref.parameters(), *cmp.parameters()):
            p.grad = fg.ones(p.shape, dtype=fg.float64)
    step = fg.compile(_accumulating_step)
    x = fg.randn(4, 3, dtype=fg.float64)
    for clear in (False, False, True, False, False, True, True, False):
        if clear:
            for m in (ref, cmp):
                m.zero_grad(set_to_none=True)
        same(step(cmp, x), _accumulating_step(ref, x))
        for p, q in zip(ref.parameters(), cmp.parameters(), strict=True):
            same(q.grad, p.grad)
    # One trace per state (absent, present), both kept.
    assert step.stats.traces == 2


def test_optimizer_step_traced_with_a_missing_grad_updates_it_once_set():
    """An optimizer skips a parameter whose ``.grad`` is None; a step traced
    then must not keep skipping it when it has a gradient later."""
    a = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    b = fg.tensor([3.0, 4.0], dtype=fg.float64, requires_grad=True)
    opt = fg.optim.SGD([a, b], lr=0.5)
    step = fg.compile(opt.step)
    a.grad = fg.ones(2, dtype=fg.float64)
    step()
    same(a, fg.tensor([0.5, 1.5], dtype=fg.float64))
    same(b, fg.tensor([3.0, 4.0], dtype=fg.float64))
    b.grad = fg.ones(2, dtype=fg.float64)
    step()
    same(a, fg.tensor([0.0, 1.0], dtype=fg.float64))
    same(b, fg.tensor([2.5, 3.5], dtype=fg.float64))


def test_grad_presence_change_is_explained(capsys):
    w = fg.tensor([1.0, 2.0], requires_grad=True)
    step = fg.compile(lambda x: (w * x).sum().backward(), explain=True)
    x = fg.ones(2)
    step(x)
    step(x)
    out = capsys.readouterr().out
    assert "was None when traced and is set now" in out
