"""The model-code table's static-graph column: each model's training step
recorded once as a TensorFlow 1.x-style graph — placeholders with a
``None`` batch dimension, the module called on them, ``fg.gradients`` of the
loss, one ``assign_sub`` per parameter — and run with ``Session.run`` for
several steps and batch sizes, against the same steps taken eagerly (plain
gradient descent) from the same initial weights.

As in TensorFlow, a static run executes only what its fetches need: the
batch-norm layers' running statistics, which no fetch reads, are not
updated (TensorFlow keeps such updates in ``UPDATE_OPS`` for the user to
fetch), so the buffers are not compared; train-mode forward passes do not
read them.
"""

from __future__ import annotations

import copy

import ferrograd as fg
import pytest
from test_model_table import TABLE, TRAIN_BATCHES, _close

LR = 0.05
ENTRIES = [pytest.param(e, id=e.id) for e in TABLE]


def _placeholder(t: fg.Tensor) -> fg.Tensor:
    return fg.placeholder(t.dtype, [None, *t.shape[1:]])


@pytest.mark.parametrize("entry", ENTRIES)
def test_static_training_steps_match_eager(entry) -> None:
    em = entry.build().train()
    sm = copy.deepcopy(em)
    args0, target0 = entry.data(TRAIN_BATCHES[0])
    g = fg.Graph()
    with g:
        xs = [_placeholder(a) for a in args0]
        y = _placeholder(target0)
        loss = entry.loss(sm(*xs), y)
        params = list(sm.parameters())
        grads = fg.gradients(loss, params)
        variables = [fg.Variable(p) for p in params]
        train = [v.assign_sub(LR * gr) for v, gr in zip(variables, grads, strict=True) if gr is not None]
    assert train, "no parameter receives a gradient"
    sess = fg.Session(g)
    opt = fg.optim.SGD(em.parameters(), lr=LR)
    for k, b in enumerate(TRAIN_BATCHES):
        args, target = entry.data(b)
        fg.manual_seed(300 + k)
        opt.zero_grad()
        want = entry.loss(em(*args), target)
        want.backward()
        opt.step()
        fg.manual_seed(300 + k)
        feed = {p: a for p, a in zip(xs, args, strict=True)}
        feed[y] = target
        *_, got = sess.run(train + [loss], feed_dict=feed)
        _close(got, want, f"step {k} (batch {b}): loss")
        for (name, pe), ps in zip(em.named_parameters(), sm.parameters(), strict=True):
            _close(ps, pe, f"after step {k} (batch {b}): {name}")
