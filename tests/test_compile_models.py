"""Compiled and eager runs agree on nn's recurrent, batch-norm and attention
models, in float64 within rtol 1e-10: the forward outputs, the gradients of
every parameter and every input that requires grad, the buffers a call
updates (batch-norm running statistics), and three SGD (momentum) training
steps. Plus regression tests for fused kernels whose outputs are written
in place over a dying input that an instruction run later still reads."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest

F64 = fg.float64
TOL = {"rtol": 1e-10, "atol": 1e-12}


def _close(got, want, what):
    assert (got is None) == (want is None), what
    if want is not None:
        assert tuple(got.shape) == tuple(want.shape), what
        np.testing.assert_allclose(got.numpy(), want.numpy(), err_msg=what, **TOL)


def _randn(*shape, seed=0, requires_grad=False):
    t = fg.randn(*shape, generator=fg.Generator().manual_seed(seed), dtype=F64)
    return t.requires_grad_() if requires_grad else t


def _coefs(outs):
    """Fixed random weights, one per output, so that no gradient is symmetric."""
    return [_randn(*o.shape, seed=100 + k) for k, o in enumerate(outs)]


def _loss(outs, coefs):
    loss = None
    for o, c in zip(outs, coefs, strict=True):
        term = (o * c).mean() + (o * o).mean()
        loss = term if loss is None else loss + term
    return loss


def _tensors(out):
    """The tensors of a module's (possibly nested) result, None dropped."""
    if out is None:
        return []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return [out]


def _grads_agree(make, forward, inputs, calls=2):
    """Results and gradients of `forward(module, *inputs)` (a list of tensors)
    agree compiled and eager, on `calls` calls of two equal modules (the
    compiled one runs its cached graph after the first); so do the modules'
    buffers afterwards. Checked twice: returning the outputs with the
    gradients, and the gradients alone (which results a graph keeps changes
    which buffers it may reuse in place)."""
    with fg.no_grad():
        coefs = _coefs(forward(make(), *inputs))

    def grads_of(m, with_outputs):
        params = [p for p in m.parameters() if p.requires_grad]

        def f(*xs):
            outs = forward(m, *xs)
            wrt = params + [x for x in xs if x.requires_grad]
            grads = list(fg.autograd.grad(_loss(outs, coefs), wrt))
            return outs + grads if with_outputs else grads

        return f

    cfs = []
    for with_outputs in (True, False):
        em, cm = make(), make()
        names = [f"output {k}" for k in range(len(coefs))] if with_outputs else []
        names += [n + ".grad" for n, p in em.named_parameters() if p.requires_grad]
        names += [f"input {k}.grad" for k, x in enumerate(inputs) if x.requires_grad]
        ef, cf = grads_of(em, with_outputs), fg.compile(grads_of(cm, with_outputs))
        for call in range(calls):
            want, got = ef(*inputs), cf(*inputs)
            assert len(got) == len(want) == len(names)
            for name, g, w in zip(names, got, want, strict=True):
                _close(g, w, f"call {call}: {name}")
        assert cf.stats.traces == 1 and cf.stats.graph_breaks == 0
        for (n, be), bc in zip(em.named_buffers(), cm.buffers(), strict=True):
            _close(bc, be, n)
        cfs.append(cf)
    return cfs[0]


def _training_agrees(make, forward, inputs, steps=3):
    """`steps` SGD (momentum) steps, compiled and eager: same losses, then the
    same parameters, gradients, momentum buffers and module buffers."""
    em, cm = make(), make()
    with fg.no_grad():
        coefs = _coefs(forward(make(), *inputs))

    def step_of(m):
        opt = fg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(*xs):
            opt.zero_grad()
            loss = _loss(forward(m, *xs), coefs)
            loss.backward()
            opt.step()
            return loss

        return step, opt

    (estep, eopt), (cstep_fn, copt) = step_of(em), step_of(cm)
    cstep = fg.compile(cstep_fn)
    for k in range(steps):
        _close(cstep(*inputs), estep(*inputs), f"loss of step {k}")
    assert cstep.stats.traces == 1 and cstep.stats.graph_breaks == 0
    for (n, pe), pc in zip(em.named_parameters(), cm.parameters(), strict=True):
        _close(pc, pe, n)
        _close(pc.grad, pe.grad, n + ".grad")
        _close(copt.state[pc].get("momentum_buffer"), eopt.state[pe].get("momentum_buffer"), n + " momentum")
    for (n, be), bc in zip(em.named_buffers(), cm.buffers(), strict=True):
        _close(bc, be, n)


# -- recurrent layers -------------------------------------------------------

_RNN = {
    "RNN": lambda **kw: nn.RNN(**kw),
    "RNN_relu": lambda **kw: nn.RNN(nonlinearity="relu", **kw),
    "LSTM": lambda **kw: nn.LSTM(**kw),
    "GRU": lambda **kw: nn.GRU(**kw),
}
SEQ, BATCH, IN, HID = 4, 3, 5, 6


def _rnn_maker(kind, **kw):
    def make():
        fg.manual_seed(3)
        return _RNN[kind](input_size=IN, hidden_size=HID, **kw).to(F64)

    return make


def _rnn_forward(m, x, *state):
    if not state:
        return _tensors(m(x))
    hx = tuple(state) if isinstance(m, nn.LSTM) else state[0]
    return _tensors(m(x, hx))


def _rnn_input(batch_first, seed=1, requires_grad=True):
    shape = (BATCH, SEQ, IN) if batch_first else (SEQ, BATCH, IN)
    return _randn(*shape, seed=seed, requires_grad=requires_grad)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", list(_RNN))
def test_recurrent_outputs_and_gradients_match_eager(kind, layers, batch_first, bidirectional):
    make = _rnn_maker(kind, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional)
    cf = _grads_agree(make, _rnn_forward, [_rnn_input(batch_first)])
    assert "fused" in [n["op"] for n in cf.graph(_rnn_input(batch_first)).nodes()]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("kind", list(_RNN))
def test_recurrent_initial_state_gradients_match_eager(kind, batched):
    dirs, layers = 2, 2
    make = _rnn_maker(kind, num_layers=layers, bidirectional=True)
    x = _rnn_input(False)
    state_shape = (layers * dirs, BATCH, HID)
    if not batched:
        x = x[:, 0].detach().requires_grad_()
        state_shape = (layers * dirs, HID)
    states = [_randn(*state_shape, seed=20 + k, requires_grad=True) for k in range(2 if kind == "LSTM" else 1)]
    _grads_agree(make, _rnn_forward, [x, *states])


@pytest.mark.parametrize("config", ["1-layer", "2-layer-bi-batch-first"])
@pytest.mark.parametrize("kind", list(_RNN))
def test_recurrent_training_steps_match_eager(kind, config):
    batch_first = config != "1-layer"
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": True} if batch_first else {}
    _training_agrees(_rnn_maker(kind, **kw), _rnn_forward, [_rnn_input(batch_first, requires_grad=False)])


# -- batch normalisation ----------------------------------------------------

_BN_SHAPES = {"1d": (8, 4), "1d_seq": (6, 4, 5), "2d": (4, 4, 3, 5)}


def _bn_maker(kind, train):
    def make():
        m = (nn.BatchNorm2d if kind == "2d" else nn.BatchNorm1d)(4).to(F64)
        with fg.no_grad():
            # Off their defaults, so eval mode and the affine gradients see real values.
            m.weight.copy_(_randn(4, seed=30) * 0.5 + 1.0)
            m.bias.copy_(_randn(4, seed=31))
            m.running_mean.copy_(_randn(4, seed=32))
            m.running_var.copy_(_randn(4, seed=33).abs() + 0.5)
        return m.train(train)

    return make


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("kind", list(_BN_SHAPES))
def test_batch_norm_outputs_gradients_and_running_stats_match_eager(kind, train):
    x = _randn(*_BN_SHAPES[kind], seed=5, requires_grad=True) * 2.0 + 0.5
    x = x.detach().requires_grad_()
    _grads_agree(_bn_maker(kind, train), lambda m, x: [m(x)], [x], calls=3)


def test_batch_norm_train_mode_updates_running_stats_in_the_compiled_graph():
    make = _bn_maker("2d", True)
    em, cm = make(), make()
    x = _randn(*_BN_SHAPES["2d"], seed=6)
    cf = fg.compile(cm)
    before = cm.running_mean.numpy().copy()
    for _ in range(2):
        _close(cf(x), em(x), "output")
    assert not np.array_equal(cm.running_mean.numpy(), before)
    assert int(cm.num_batches_tracked) == int(em.num_batches_tracked) == 2
    for (n, be), bc in zip(em.named_buffers(), cm.buffers(), strict=True):
        _close(bc, be, n)
    assert cf.stats.graph_breaks == 0


def test_batch_norm_running_var_follows_a_dynamic_batch():
    # The running variance's unbiased factor n / (n - 1) was a Python float
    # computed from the symbolic batch size, so with dynamic=True it stayed
    # at the traced (sentinel) size's value, about 1, at every batch size.
    make = _bn_maker("2d", True)
    em, cm = make(), make()
    cf = fg.compile(cm, dynamic=True)
    for n in (1, 2, 5):
        x = _randn(n, 4, 2, 2, seed=n)
        _close(cf(x), em(x), f"output at batch {n}")
        for (name, be), bc in zip(em.named_buffers(), cm.buffers(), strict=True):
            _close(bc, be, f"{name} at batch {n}")
    assert cf.stats.traces == 1


@pytest.mark.parametrize("kind", ["1d", "2d"])
def test_batch_norm_training_steps_match_eager(kind):
    def make():
        fg.manual_seed(9)
        if kind == "1d":
            m = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.Tanh())
        else:
            m = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        return m.to(F64)

    x = _randn(8, 6, seed=7) if kind == "1d" else _randn(3, 2, 6, 6, seed=7)
    _training_agrees(make, lambda m, x: [m(x)], [x])


# -- multi-head attention ---------------------------------------------------

E, HEADS, L, S = 8, 2, 4, 5


def _mha_maker(batch_first, kdim=None, vdim=None):
    def make():
        fg.manual_seed(13)
        m = nn.MultiheadAttention(E, HEADS, kdim=kdim, vdim=vdim, batch_first=batch_first).to(F64)
        with fg.no_grad():
            # Nonzero biases (they start at zero), so their gradients flow through real values.
            m.in_proj_bias.copy_(_randn(3 * E, seed=40) * 0.1)
            m.out_proj.bias.copy_(_randn(E, seed=41) * 0.1)
        return m

    return make


def _seq(n, dim, batch_first, seed, requires_grad=True):
    shape = (BATCH, n, dim) if batch_first else (n, BATCH, dim)
    return _randn(*shape, seed=seed, requires_grad=requires_grad)


def _bool_mask(*shape, seed):
    # True = may not attend; column 0 always stays open, so no row is all masked.
    m = _randn(*shape, seed=seed) > 0.3
    m[..., 0] = False
    return m


_MHA_CASES = {
    "self": {},
    "cross": {"cross": True},
    "causal_bool_mask": {"attn_mask": "causal"},
    "is_causal": {"is_causal": True},
    "float_mask": {"cross": True, "attn_mask": "float"},
    "key_padding": {"cross": True, "key_padding": True},
    "3d_mask_padding_per_head": {"cross": True, "attn_mask": "3d", "key_padding": True, "average": False},
    "kdim_vdim": {"cross": True, "kdim": 3, "vdim": 7},
    "no_weights": {"cross": True, "key_padding": True, "need_weights": False},
}


def _mha_case(name, batch_first, requires_grad=True):
    c = _MHA_CASES[name]
    cross = c.get("cross", False)
    s = S if cross else L
    q = _seq(L, E, batch_first, 50, requires_grad)
    inputs = [q] if not cross else [q, _seq(S, c.get("kdim") or E, batch_first, 51, requires_grad),
                                   _seq(S, c.get("vdim") or E, batch_first, 52, requires_grad)]
    masks = {}
    if c.get("attn_mask") == "causal":
        masks["attn_mask"] = fg.ones(L, s, dtype=fg.bool).tril().logical_not()
    elif c.get("attn_mask") == "float":
        masks["attn_mask"] = _randn(L, s, seed=53)
    elif c.get("attn_mask") == "3d":
        masks["attn_mask"] = _bool_mask(BATCH * HEADS, L, s, seed=54)
    if c.get("key_padding"):
        masks["key_padding_mask"] = _bool_mask(BATCH, s, seed=55)
    # Masks are arguments of the compiled function too (no gradient).
    mask_names = list(masks)
    inputs += [masks[k] for k in mask_names]
    n_seq = 3 if cross else 1
    opts = {
        "need_weights": c.get("need_weights", True),
        "average_attn_weights": c.get("average", True),
        "is_causal": c.get("is_causal", False),
    }

    def forward(m, *xs):
        seqs, ms = xs[:n_seq], dict(zip(mask_names, xs[n_seq:], strict=True))
        q, k, v = seqs if cross else seqs * 3
        return _tensors(m(q, k, v, **ms, **opts))

    return _mha_maker(batch_first, c.get("kdim"), c.get("vdim")), forward, inputs


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("case", list(_MHA_CASES))
def test_multihead_attention_outputs_and_gradients_match_eager(case, batch_first):
    make, forward, inputs = _mha_case(case, batch_first)
    _grads_agree(make, forward, inputs)


@pytest.mark.parametrize("case", ["causal_bool_mask", "key_padding"])
def test_multihead_attention_training_steps_match_eager(case):
    make, forward, inputs = _mha_case(case, True, requires_grad=False)
    _training_agrees(make, forward, inputs)


# -- fused gradient kernels ------------------------------------------------------

_FUSED_GRADS = {
    "gelu": (lambda x, w, b: F.gelu(x), "unary_grad"),
    "gelu_tanh": (lambda x, w, b: F.gelu(x, approximate="tanh"), "unary_grad"),
    "softmax": (lambda x, w, b: x.softmax(-1), "softmax_grad"),
    "log_softmax_dim0": (lambda x, w, b: x.log_softmax(0), "softmax_grad"),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b), "layer_norm_grad"),
    "layer_norm_no_affine": (lambda x, w, b: F.layer_norm(x, (6,)), "layer_norm_grad"),
    "rms_norm": (lambda x, w, b: F.rms_norm(x, (6,), w), "rms_norm_grad"),
}


@pytest.mark.parametrize("dtype", [fg.float32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(_FUSED_GRADS))
def test_fused_gradient_kernels_are_captured_as_eager_runs_them(case, dtype):
    # Eager backward computes these gradients with fused kernels; a captured
    # graph composed them from primitives instead, which round differently
    # (about 1e-7 relative in float32: enough for Adam, whose step divides by
    # the gradient's size, to move parameters whose gradient is rounding noise
    # differently). Each is now one node running the kernel eager mode runs.
    fn, node = _FUSED_GRADS[case]
    gen = fg.Generator().manual_seed(11)
    x = (fg.randn(5, 6, generator=gen) * 2.0).to(dtype).requires_grad_()
    w = (fg.randn(6, generator=gen) + 1.0).to(dtype).requires_grad_()
    b = fg.randn(6, generator=gen).to(dtype).requires_grad_()
    c = fg.randn(5, 6, generator=gen).to(dtype)

    def grads(x):
        return fg.autograd.grad((fn(x, w, b) * c).sum(), [x, w, b], allow_unused=True)

    cf = fg.compile(grads)
    for got, want in zip(cf(x), grads(x), strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert node in [n["op"] for n in cf.graph(x).nodes()]


@pytest.mark.parametrize("case", ["gelu", "softmax", "layer_norm"])
def test_second_order_gradients_through_fused_gradients_match_eager(case):
    # Under create_graph the first gradient is differentiated again, so it is
    # composed of recorded ops (the fused node serves the second backward only).
    fn, _ = _FUSED_GRADS[case]
    gen = fg.Generator().manual_seed(12)
    x = fg.randn(4, 6, generator=gen, dtype=F64).requires_grad_()
    w = (fg.randn(6, generator=gen, dtype=F64) + 1.0).requires_grad_()
    b = fg.randn(6, generator=gen, dtype=F64).requires_grad_()
    c = fg.randn(4, 6, generator=gen, dtype=F64)

    def hvp(x):
        (gx,) = fg.autograd.grad((fn(x, w, b) * c).sum(), [x], create_graph=True)
        return fg.autograd.grad((gx * gx).sum(), [x, w], allow_unused=True)

    cf = fg.compile(hvp)
    for got, want in zip(cf(x), hvp(x), strict=True):
        _close(got, want, case)
    assert cf.stats.graph_breaks == 0


# -- fused kernels writing in place over an input read later ------------------


def test_gru_steps_over_unbound_input_projection_gradients_match_eager():
    # Two hand-written GRU steps over `(seq @ W_ih.T).unbind(0)`: the backward
    # graph fuses into kernels where an output written over a dying input
    # came, in the program, between an instruction reading that input and the
    # one instruction it is run with. W_ih's gradient was off by about 0.1.
    fg.manual_seed(0)
    h = 3
    w = fg.randn(3 * h, h, dtype=F64, requires_grad=True)
    wih = fg.randn(3 * h, 2, dtype=F64, requires_grad=True)
    seq = fg.randn(2, 1, 2, dtype=F64)

    def cell(xp, hid):
        hp = hid @ w.T
        xr, xz, xn = xp.chunk(3, -1)
        hr, hz, hn = hp.chunk(3, -1)
        r = (xr + hr).sigmoid()
        z = (xz + hz).sigmoid()
        n = (xn + r * hn).tanh()
        return n + z * (hid - n)

    def gr(seq):
        xp = (seq @ wih.T).unbind(0)
        hid = fg.zeros(1, h, dtype=F64)
        ys = []
        for t in range(2):
            hid = cell(xp[t], hid)
            ys.append(hid)
        return fg.autograd.grad((fg.stack(ys) ** 2).sum(), [w, wih])

    want = gr(seq)
    cf = fg.compile(gr)
    for name, got, w_ in zip(["W_hh", "W_ih"], cf(seq), want, strict=True):
        _close(got, w_, name)
    assert cf.stats.graph_breaks == 0
    assert cf.graph(seq).memory_plan(seq)["in_place"] > 0


_ARITH = {
    "add": lambda p, q: p + q,
    "sub": lambda p, q: p - q,
    "mul": lambda p, q: p * q,
    "div": lambda p, q: p / q,
}


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
@pytest.mark.parametrize("size", [(4, 6), (300, 700)], ids=["one_chunk", "many_chunks"])
@pytest.mark.parametrize("op2", list(_ARITH))
@pytest.mark.parametrize("op1", list(_ARITH))
def test_fused_output_in_place_never_overwrites_an_input_a_later_run_op_reads(op1, op2, size, dtype):
    # `t = a op1 b` is read only by `t op2 o`, so the kernel runs the two as
    # one loop at the second; `o = exp(c)` comes between them in the program
    # and is written in place over `a` (fresh from a matmul, dead after the
    # kernel). The write must not reach `a` before `t` has read it.
    rng = np.random.default_rng(3)
    n, m = size
    x = fg.tensor(rng.uniform(0.5, 1.0, (n, 8))).to(dtype)
    ws = [fg.tensor(rng.uniform(0.5, 1.0, (8, m))).to(dtype) for _ in range(3)]
    f1, f2 = _ARITH[op1], _ARITH[op2]

    def f(x):
        a, b, c = (x @ w for w in ws)
        t = f1(a, b)
        o = (c * 0.1).exp()
        return o, f2(t, o)

    cf = fg.compile(f)
    for got, want in zip(cf(x), f(x), strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    g = cf.graph(x)
    assert [nd["op"] for nd in g.nodes()].count("fused") == 1
    assert g.memory_plan(x)["in_place"] == 2
    assert cf.stats.graph_breaks == 0
