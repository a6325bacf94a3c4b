"""ferrograd.distributions against SciPy (float64), sampling statistics, gradients and KL divergences.

Densities, entropies and moments are compared with ``scipy.stats``; samples
are checked with fixed seeds against their distribution's moments (bounds of
several standard errors) and Kolmogorov-Smirnov tests; ``rsample`` and
``log_prob`` gradients against finite differences; ``kl_divergence`` against
closed forms computed in NumPy and against Monte Carlo estimates.
"""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import distributions as D
from ferrograd.autograd import gradcheck
from scipy import integrate, special, stats

F64 = fg.float64


def t64(a, requires_grad=False):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=F64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


RNG = np.random.default_rng(1234)
LOC = RNG.normal(size=(3, 4))
SCALE = RNG.uniform(0.3, 2.0, size=(3, 4))
X = RNG.normal(size=(5, 3, 4)) * 2


def _tril(rng, n, batch=()):
    a = rng.normal(size=(*batch, n, n)) * 0.5
    low = np.tril(a, -1)
    diag = rng.uniform(0.5, 1.5, size=(*batch, n))
    return low + np.einsum("...i,ij->...ij", diag, np.eye(n))


# ---------------------------------------------------------------------------
# densities, entropies, moments vs SciPy
# ---------------------------------------------------------------------------


def test_normal_against_scipy():
    d = D.Normal(t64(LOC), t64(SCALE))
    ref = stats.norm(LOC, SCALE)
    assert d.batch_shape == (3, 4) and d.event_shape == ()
    np.testing.assert_allclose(npy(d.log_prob(t64(X))), ref.logpdf(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(npy(d.cdf(t64(X))), ref.cdf(X), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), ref.mean())
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.stddev), ref.std(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mode), LOC)
    np.testing.assert_allclose(npy(d.perplexity()), np.exp(ref.entropy()), rtol=1e-12)


def test_normal_with_python_numbers():
    d = D.Normal(0.0, 2.0)
    assert d.batch_shape == () and d.loc.dtype == fg.float32
    assert float(d.log_prob(fg.tensor(1.0))) == pytest.approx(stats.norm(0, 2).logpdf(1.0), rel=1e-6)
    d = D.Normal(t64([0.0, 1.0]), 3.0)  # numbers take the tensor's dtype and broadcast
    assert d.scale.dtype == F64 and d.batch_shape == (2,)


def test_uniform_against_scipy():
    low = RNG.uniform(-2, 0, size=(4,))
    high = low + RNG.uniform(0.5, 3, size=(4,))
    d = D.Uniform(t64(low), t64(high))
    ref = stats.uniform(loc=low, scale=high - low)
    inside = low + (high - low) * RNG.uniform(0, 1, size=(6, 4))
    np.testing.assert_allclose(npy(d.log_prob(t64(inside))), ref.logpdf(inside), rtol=1e-12)
    np.testing.assert_allclose(npy(d.cdf(t64(inside))), ref.cdf(inside), rtol=1e-12)
    np.testing.assert_allclose(npy(d.icdf(d.cdf(t64(inside)))), inside, rtol=1e-12)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.stddev), ref.std(), rtol=1e-12)
    # outside the support: -inf when validation is off
    d2 = D.Uniform(t64(low), t64(high), validate_args=False)
    assert np.all(npy(d2.log_prob(t64(high + 0.1))) == -np.inf)


@pytest.mark.parametrize("param", ["probs", "logits"])
def test_bernoulli_against_scipy(param):
    p = np.array([0.05, 0.3, 0.5, 0.92])
    d = D.Bernoulli(probs=t64(p)) if param == "probs" else D.Bernoulli(logits=t64(np.log(p / (1 - p))))
    ref = stats.bernoulli(p)
    v = np.array([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]])
    np.testing.assert_allclose(npy(d.log_prob(t64(v))), ref.logpmf(v), rtol=1e-10)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-10)
    np.testing.assert_allclose(npy(d.mean), p, rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-10)
    np.testing.assert_allclose(npy(d.probs), p, rtol=1e-12)
    np.testing.assert_allclose(npy(d.logits), np.log(p / (1 - p)), rtol=1e-10)
    m = npy(d.mode)
    assert m[0] == 0 and m[3] == 1 and math.isnan(m[2])
    np.testing.assert_array_equal(npy(d.enumerate_support()), np.broadcast_to([[0.0], [1.0]], (2, 4)))


@pytest.mark.parametrize("param", ["probs", "logits"])
def test_categorical_against_numpy_and_scipy(param):
    raw = RNG.uniform(0.1, 1, size=(3, 5))
    probs = raw / raw.sum(-1, keepdims=True)
    if param == "probs":
        d = D.Categorical(probs=t64(raw))  # unnormalised probs are normalised
    else:
        d = D.Categorical(logits=t64(np.log(raw) + 7.0))  # logits are normalised
    assert d.batch_shape == (3,) and d.event_shape == () and d.param_shape == (3, 5)
    np.testing.assert_allclose(npy(d.probs), probs, rtol=1e-12)
    np.testing.assert_allclose(npy(d.logits), np.log(probs), rtol=1e-12, atol=1e-14)
    v = np.array([[0, 4, 2], [1, 1, 3]])
    want = np.log(probs[np.arange(3), v])
    np.testing.assert_allclose(npy(d.log_prob(fg.tensor(v))), want, rtol=1e-12)
    np.testing.assert_allclose(npy(d.entropy()), stats.entropy(probs, axis=-1), rtol=1e-12)
    np.testing.assert_array_equal(npy(d.mode), probs.argmax(-1))
    assert np.isnan(npy(d.mean)).all() and np.isnan(npy(d.variance)).all()
    sup = d.enumerate_support()
    assert tuple(sup.shape) == (5, 3) and sup.dtype == fg.int64
    np.testing.assert_allclose(npy(d.log_prob(sup)), np.log(probs.T), rtol=1e-12)


def test_categorical_zero_probability_entropy_is_finite():
    d = D.Categorical(probs=t64([0.5, 0.5, 0.0]))
    assert float(d.entropy()) == pytest.approx(math.log(2), rel=1e-12)


def test_multivariate_normal_against_scipy():
    rng = np.random.default_rng(5)
    n = 3
    trils = _tril(rng, n, (2,))
    loc = rng.normal(size=(2, n))
    d = D.MultivariateNormal(t64(loc), scale_tril=t64(trils))
    assert d.batch_shape == (2,) and d.event_shape == (n,)
    x = rng.normal(size=(4, 2, n))
    for b in range(2):
        cov = trils[b] @ trils[b].T
        ref = stats.multivariate_normal(loc[b], cov)
        np.testing.assert_allclose(npy(d.log_prob(t64(x)))[:, b], ref.logpdf(x[:, b]), rtol=1e-10)
        np.testing.assert_allclose(npy(d.entropy())[b], ref.entropy(), rtol=1e-10)
        np.testing.assert_allclose(npy(d.covariance_matrix)[b], cov, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(npy(d.precision_matrix)[b], np.linalg.inv(cov), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(npy(d.variance)[b], np.diag(cov), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), loc)


def test_multivariate_normal_broadcasts_loc_against_one_scale_tril():
    rng = np.random.default_rng(6)
    tril = _tril(rng, 2)
    loc = rng.normal(size=(3, 2))
    d = D.MultivariateNormal(t64(loc), scale_tril=t64(tril))
    assert d.batch_shape == (3,) and tuple(d.scale_tril.shape) == (3, 2, 2)
    x = rng.normal(size=(3, 2))
    want = [stats.multivariate_normal(loc[i], tril @ tril.T).logpdf(x[i]) for i in range(3)]
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), want, rtol=1e-10)
    assert tuple(d.entropy().shape) == (3,)


def test_independent_sums_the_reinterpreted_dimensions():
    base = D.Normal(t64(LOC), t64(SCALE))
    d = D.Independent(base, 1)
    assert d.batch_shape == (3,) and d.event_shape == (4,) and d.has_rsample
    want = stats.norm(LOC, SCALE).logpdf(X).sum(-1)
    np.testing.assert_allclose(npy(d.log_prob(t64(X))), want, rtol=1e-12)
    np.testing.assert_allclose(npy(d.entropy()), stats.norm(LOC, SCALE).entropy().sum(-1), rtol=1e-12)
    d2 = D.Independent(base, 2)
    assert d2.batch_shape == () and d2.event_shape == (3, 4)
    np.testing.assert_allclose(float(d2.log_prob(t64(X[0]))), want[0].sum(), rtol=1e-12)
    assert tuple(d2.sample((7,)).shape) == (7, 3, 4)
    np.testing.assert_allclose(npy(d.mean), LOC)
    np.testing.assert_allclose(npy(d.variance), SCALE**2, rtol=1e-12)


# ---------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "batch", "event"),
    [
        (lambda: D.Normal(fg.zeros(2, 3), fg.ones(3)), (2, 3), ()),
        (lambda: D.Uniform(fg.zeros(4), 1.0), (4,), ()),
        (lambda: D.Bernoulli(logits=fg.zeros(2, 1)), (2, 1), ()),
        (lambda: D.Categorical(logits=fg.zeros(2, 3, 5)), (2, 3), ()),
        (lambda: D.MultivariateNormal(fg.zeros(4, 3), scale_tril=fg.eye(3)), (4,), (3,)),
        (lambda: D.Independent(D.Normal(fg.zeros(2, 3), 1.0), 1), (2,), (3,)),
        (lambda: D.Gamma(fg.ones(2, 1), fg.ones(3)), (2, 3), ()),
        (lambda: D.Beta(fg.ones(3), 2.0), (3,), ()),
        (lambda: D.Dirichlet(fg.ones(2, 4)), (2,), (4,)),
        (lambda: D.Poisson(fg.tensor([0.5, 20.0])), (2,), ()),
    ],
    ids=[
        "normal",
        "uniform",
        "bernoulli",
        "categorical",
        "mvn",
        "independent",
        "gamma",
        "beta",
        "dirichlet",
        "poisson",
    ],
)
def test_sample_shapes(make, batch, event):
    d = make()
    assert d.batch_shape == batch and d.event_shape == event
    assert tuple(d.sample().shape) == batch + event
    assert tuple(d.sample((5,)).shape) == (5, *batch, *event)
    assert tuple(d.sample((2, 3)).shape) == (2, 3, *batch, *event)
    assert tuple(d.sample(4).shape) == (4, *batch, *event)
    s = d.sample((6,))
    assert tuple(d.log_prob(s).shape) == (6, *batch)
    if d.has_rsample:
        assert tuple(d.rsample((2,)).shape) == (2, *batch, *event)
    e = d.expand((7, *batch))
    assert e.batch_shape == (7, *batch) and tuple(e.sample().shape) == (7, *batch, *event)


def test_log_prob_broadcasts_value_against_batch():
    d = D.Normal(fg.zeros(4), fg.ones(4))
    assert tuple(d.log_prob(fg.zeros(5, 1)).shape) == (5, 4)
    c = D.Categorical(logits=fg.zeros(4, 3))
    assert tuple(c.log_prob(fg.tensor([[0], [1]])).shape) == (2, 4)
    with pytest.raises(ValueError, match="cannot be broadcast with batch_shape"):
        d.log_prob(fg.zeros(3))
    m = D.MultivariateNormal(fg.zeros(3), scale_tril=fg.eye(3))
    with pytest.raises(ValueError, match="right-most size of value must match event_shape"):
        m.log_prob(fg.zeros(2))


# ---------------------------------------------------------------------------
# sampling statistics and reproducibility
# ---------------------------------------------------------------------------

N = 40_000


def test_normal_samples():
    fg.manual_seed(11)
    d = D.Normal(t64([-1.0, 3.0]), t64([0.5, 2.0]))
    s = npy(d.sample((N,)))
    se = np.array([0.5, 2.0]) / math.sqrt(N)
    assert np.all(np.abs(s.mean(0) - [-1.0, 3.0]) < 5 * se)
    assert np.all(np.abs(s.std(0) / [0.5, 2.0] - 1) < 5 / math.sqrt(2 * N))
    assert stats.kstest((s[:, 1] - 3.0) / 2.0, "norm").pvalue > 1e-3
    # not degenerate: two draws differ, and the sample is not all one value
    assert len(np.unique(s[:, 0])) > N // 2


def test_uniform_samples():
    fg.manual_seed(12)
    s = npy(D.Uniform(t64(-2.0), t64(3.0)).sample((N,)))
    assert s.min() >= -2.0 and s.max() < 3.0
    assert stats.kstest(s, stats.uniform(loc=-2, scale=5).cdf).pvalue > 1e-3


def test_bernoulli_samples():
    fg.manual_seed(13)
    p = np.array([0.1, 0.5, 0.85])
    s = npy(D.Bernoulli(probs=t64(p)).sample((N,)))
    assert set(np.unique(s)) <= {0.0, 1.0}
    assert np.all(np.abs(s.mean(0) - p) < 5 * np.sqrt(p * (1 - p) / N))


def test_categorical_samples():
    fg.manual_seed(14)
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.0, 0.5]])
    s = npy(D.Categorical(probs=t64(probs)).sample((N,))).astype(int)
    for b in range(2):
        freq = np.bincount(s[:, b], minlength=3) / N
        assert np.all(np.abs(freq - probs[b]) < 5 * np.sqrt(probs[b] * (1 - probs[b]) / N) + 1e-12), freq
    assert not np.any(s[:, 1] == 1)  # a zero-probability category is never drawn


def test_multivariate_normal_samples():
    fg.manual_seed(15)
    rng = np.random.default_rng(9)
    tril = _tril(rng, 3)
    loc = np.array([1.0, -1.0, 0.5])
    s = npy(D.MultivariateNormal(t64(loc), scale_tril=t64(tril)).sample((N,)))
    cov = tril @ tril.T
    se = np.sqrt(np.diag(cov) / N)
    assert np.all(np.abs(s.mean(0) - loc) < 5 * se)
    emp = np.cov(s.T)
    # the standard error of a covariance entry is about sqrt((s_ii s_jj + s_ij^2) / N)
    bound = 5 * np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / N)
    assert np.all(np.abs(emp - cov) < bound)


def test_sampling_is_reproducible_with_manual_seed():
    d = D.Normal(fg.zeros(3), fg.ones(3))
    c = D.Categorical(logits=fg.zeros(4, 6))
    fg.manual_seed(7)
    a1, b1 = npy(d.sample((5,))), npy(c.sample((5,)))
    fg.manual_seed(7)
    a2, b2 = npy(d.rsample((5,))), npy(c.sample((5,)))
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    fg.manual_seed(8)
    assert not np.array_equal(a1, npy(d.sample((5,))))


def test_sample_has_no_gradient_but_rsample_does():
    loc = fg.zeros(2, requires_grad=True)
    d = D.Normal(loc, fg.ones(2))
    assert not d.sample().requires_grad
    assert d.rsample().requires_grad
    assert not D.Bernoulli(logits=loc).sample().requires_grad
    assert not D.Bernoulli(logits=loc).has_rsample
    with pytest.raises(NotImplementedError, match="Categorical does not implement rsample"):
        D.Categorical(logits=fg.zeros(3)).rsample()


# ---------------------------------------------------------------------------
# gradients
# ---------------------------------------------------------------------------


def _fd_check(fn, params, seed, eps=1e-6, rtol=1e-6, atol=1e-8):
    """Autograd gradients of ``fn(*params)`` (a scalar, the generator reset to ``seed`` before each
    evaluation so the noise is fixed) against central finite differences."""
    fg.manual_seed(seed)
    out = fn(*params)
    grads = fg.autograd.grad(out, params)
    for k, (p, g) in enumerate(zip(params, grads, strict=True)):
        base = npy(p)
        num = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            vals = []
            for sgn in (1, -1):
                b = base.copy()
                b[idx] += sgn * eps
                q = [t64(b) if j == k else x.detach() for j, x in enumerate(params)]
                fg.manual_seed(seed)
                vals.append(float(fn(*q)))
            num[idx] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(npy(g), num, rtol=rtol, atol=atol, err_msg=f"parameter {k}")


def test_normal_rsample_gradient_matches_finite_differences():
    loc, scale = t64([0.3, -1.0], True), t64([0.7, 1.4], True)
    _fd_check(lambda m, s: (D.Normal(m, s).rsample((3,)) ** 3).sum(), [loc, scale], seed=21)


def test_uniform_rsample_gradient_matches_finite_differences():
    low, high = t64([0.3, -1.0], True), t64([0.9, 2.0], True)
    _fd_check(lambda a, b: (D.Uniform(a, b).rsample((4,)) ** 2).sum(), [low, high], seed=22)


def test_multivariate_normal_rsample_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    loc, tril = t64(rng.normal(size=3), True), t64(_tril(rng, 3), True)
    _fd_check(
        lambda m, lt: D.MultivariateNormal(m, scale_tril=lt, validate_args=False).rsample((2,)).pow(2).sum(),
        [loc, tril],
        seed=23,
    )


def test_log_prob_and_entropy_gradchecks():
    rng = np.random.default_rng(4)
    x = t64(rng.normal(size=(2, 3)))
    gradcheck(
        lambda m, s: D.Normal(m, s).log_prob(x).sum() + D.Normal(m, s).entropy().sum(),
        (t64(rng.normal(size=3), True), t64(rng.uniform(0.5, 2, size=3), True)),
    )
    v = fg.tensor([[0, 2], [1, 1]])
    gradcheck(
        lambda lg: D.Categorical(logits=lg).log_prob(v).sum() + D.Categorical(logits=lg).entropy().sum(),
        (t64(rng.normal(size=(2, 3)), True),),
    )
    gradcheck(
        lambda p: D.Categorical(probs=p).log_prob(v).sum(), (t64(rng.uniform(0.2, 1, size=(2, 3)), True),)
    )
    b = t64([[1.0, 0.0, 1.0]])
    gradcheck(
        lambda lg: D.Bernoulli(logits=lg).log_prob(b).sum() + D.Bernoulli(logits=lg).entropy().sum(),
        (t64(rng.normal(size=3), True),),
    )
    gradcheck(lambda p: D.Bernoulli(probs=p).log_prob(b).sum(), (t64([0.2, 0.6, 0.7], True),))
    y = t64(rng.normal(size=(2, 3)))
    gradcheck(
        lambda m, lt: D.MultivariateNormal(m, scale_tril=lt, validate_args=False).log_prob(y).sum(),
        (t64(rng.normal(size=3), True), t64(_tril(rng, 3), True)),
    )


def test_policy_gradient_idiom():
    """``-(dist.log_prob(a) * R).sum().backward()`` gives R * (onehot(a) - softmax) per row."""
    rng = np.random.default_rng(8)
    logits = t64(rng.normal(size=(4, 3)), True)
    fg.manual_seed(3)
    dist = D.Categorical(logits=logits)
    a = dist.sample()
    ret = t64([1.0, -0.5, 2.0, 0.3])
    (-(dist.log_prob(a) * ret).sum()).backward()
    sm = np.exp(npy(logits)) / np.exp(npy(logits)).sum(-1, keepdims=True)
    onehot = np.eye(3)[npy(a).astype(int)]
    np.testing.assert_allclose(npy(logits.grad), -npy(ret)[:, None] * (onehot - sm), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# KL divergences
# ---------------------------------------------------------------------------


def test_kl_normal_normal():
    m1, s1, m2, s2 = LOC, SCALE, LOC[::-1] * 0.5, SCALE[:, ::-1]
    kl = npy(D.kl_divergence(D.Normal(t64(m1), t64(s1)), D.Normal(t64(m2.copy()), t64(s2.copy()))))
    want = np.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    np.testing.assert_allclose(kl, want, rtol=1e-12, atol=1e-14)


def test_kl_normal_monte_carlo():
    fg.manual_seed(31)
    p, q = D.Normal(t64(0.3), t64(0.8)), D.Normal(t64(-0.2), t64(1.3))
    x = p.sample((200_000,))
    mc = npy((p.log_prob(x) - q.log_prob(x)).mean())
    exact = float(D.kl_divergence(p, q))
    se = float(npy(p.log_prob(x) - q.log_prob(x)).std()) / math.sqrt(200_000)
    assert abs(mc - exact) < 5 * se


def test_kl_categorical_categorical():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=(3, 4))
    q = rng.uniform(size=(3, 4))
    p /= p.sum(-1, keepdims=True)
    q /= q.sum(-1, keepdims=True)
    kl = npy(D.kl_divergence(D.Categorical(probs=t64(p)), D.Categorical(probs=t64(q))))
    np.testing.assert_allclose(kl, stats.entropy(p, q, axis=-1), rtol=1e-12)
    # zeros: 0 log 0 = 0; p > 0 where q = 0 gives inf
    pz, qz = t64([0.5, 0.5, 0.0]), t64([0.25, 0.75, 0.0])
    assert float(D.kl_divergence(D.Categorical(probs=pz), D.Categorical(probs=qz))) == pytest.approx(
        stats.entropy([0.5, 0.5, 0], [0.25, 0.75, 0]), rel=1e-12
    )
    assert (
        float(D.kl_divergence(D.Categorical(probs=qz), D.Categorical(probs=t64([1.0, 0.0, 0.0])))) == math.inf
    )


def test_kl_bernoulli_bernoulli():
    p, q = np.array([0.1, 0.5, 0.9]), np.array([0.3, 0.2, 0.95])
    kl = npy(D.kl_divergence(D.Bernoulli(probs=t64(p)), D.Bernoulli(logits=t64(np.log(q / (1 - q))))))
    want = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    np.testing.assert_allclose(kl, want, rtol=1e-10)


def test_kl_uniform_uniform():
    p = D.Uniform(t64([0.0, 0.0]), t64([1.0, 1.0]))
    q = D.Uniform(t64([-1.0, 0.5]), t64([2.0, 2.0]))
    kl = npy(D.kl_divergence(p, q))
    assert kl[0] == pytest.approx(math.log(3.0), rel=1e-12) and kl[1] == math.inf


def test_kl_mvn_mvn_closed_form_and_monte_carlo():
    rng = np.random.default_rng(10)
    n = 3
    lp, lq = _tril(rng, n, (2,)), _tril(rng, n)
    mp, mq = rng.normal(size=(2, n)), rng.normal(size=n)
    p = D.MultivariateNormal(t64(mp), scale_tril=t64(lp))
    q = D.MultivariateNormal(t64(mq), scale_tril=t64(lq))
    kl = npy(D.kl_divergence(p, q))
    assert kl.shape == (2,)
    sq = lq @ lq.T
    for b in range(2):
        sp = lp[b] @ lp[b].T
        d = mq - mp[b]
        want = 0.5 * (
            np.trace(np.linalg.solve(sq, sp))
            + d @ np.linalg.solve(sq, d)
            - n
            + np.log(np.linalg.det(sq) / np.linalg.det(sp))
        )
        np.testing.assert_allclose(kl[b], want, rtol=1e-10)
    fg.manual_seed(32)
    x = p.sample((100_000,))
    diff = npy(p.log_prob(x) - q.log_prob(x))
    assert np.all(np.abs(diff.mean(0) - kl) < 5 * diff.std(0) / math.sqrt(100_000))


def test_kl_independent_independent():
    p = D.Independent(D.Normal(t64(LOC), t64(SCALE)), 1)
    q = D.Independent(D.Normal(t64(LOC * 0.3), t64(SCALE * 1.5)), 1)
    base = D.kl_divergence(p.base_dist, q.base_dist)
    np.testing.assert_allclose(npy(D.kl_divergence(p, q)), npy(base).sum(-1), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="equal reinterpreted_batch_ndims"):
        D.kl_divergence(p, D.Independent(D.Normal(t64(LOC), t64(SCALE)), 2))


def test_kl_gradient_flows():
    loc = t64([0.2, -0.4], True)
    D.kl_divergence(D.Normal(loc, t64([1.0, 2.0])), D.Normal(0.0, 1.0)).sum().backward()
    np.testing.assert_allclose(npy(loc.grad), [0.2, -0.4], rtol=1e-12)  # d/dmu of mu^2 / 2


def test_register_kl_dispatch():
    class MyNormal(D.Normal):
        pass

    # a subclass uses its parent's closed form until it registers its own
    p, q = MyNormal(t64(0.0), t64(1.0)), D.Normal(t64(1.0), t64(1.0))
    assert float(D.kl_divergence(p, q)) == pytest.approx(0.5)

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return fg.tensor(-1.0)

    assert float(D.kl_divergence(p, q)) == -1.0
    assert float(D.kl_divergence(q, q)) == 0.0
    with pytest.raises(
        NotImplementedError,
        match="No KL\\(p \\|\\| q\\) is implemented for p of type Normal and q of type Bernoulli",
    ):
        D.kl_divergence(q, D.Bernoulli(probs=t64(0.5)))
    with pytest.raises(TypeError, match="expected a subclass of Distribution"):
        D.register_kl(int, D.Normal)


# ---------------------------------------------------------------------------
# bad arguments
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: D.Normal(0.0, -1.0), ValueError, r"parameter scale .* distribution Normal.*GreaterThan"),
        (
            lambda: D.Normal(fg.zeros(2), fg.ones(3)),
            ValueError,
            r"Normal: parameter shapes \(2,\), \(3,\) cannot be broadcast",
        ),
        (lambda: D.Normal("a", 1.0), TypeError, "Normal: parameters must be tensors or numbers"),
        (
            lambda: D.Bernoulli(probs=fg.tensor([0.5, 1.5])),
            ValueError,
            r"parameter probs .* distribution Bernoulli",
        ),
        (
            lambda: D.Bernoulli(),
            ValueError,
            "Bernoulli: either `probs` or `logits` must be specified, but not both",
        ),
        (
            lambda: D.Categorical(probs=fg.ones(3), logits=fg.ones(3)),
            ValueError,
            "Categorical: either `probs` or `logits`",
        ),
        (
            lambda: D.Categorical(probs=fg.tensor([0.5, -0.5, 1.0])),
            ValueError,
            r"parameter probs .* Categorical",
        ),
        (
            lambda: D.Categorical(logits=fg.tensor(1.0)),
            ValueError,
            "Categorical: `logits` must be at least one-dimensional",
        ),
        (lambda: D.Uniform(1.0, 0.0), ValueError, "Uniform is not defined when low >= high"),
        (
            lambda: D.MultivariateNormal(fg.zeros(2), scale_tril=fg.eye(3)),
            ValueError,
            r"MultivariateNormal: scale_tril of shape \(3, 3\) does not match loc of shape \(2,\)",
        ),
        (
            lambda: D.MultivariateNormal(fg.zeros(2), scale_tril=fg.tensor([[1.0, 1.0], [0.0, 1.0]])),
            ValueError,
            r"parameter scale_tril .* MultivariateNormal",
        ),
        (
            lambda: D.MultivariateNormal(fg.zeros(2), covariance_matrix=fg.eye(2)),
            NotImplementedError,
            "MultivariateNormal: construction from covariance_matrix needs a Cholesky factorisation",
        ),
        (lambda: D.MultivariateNormal(fg.zeros(2)), ValueError, "exactly one of covariance_matrix"),
        (
            lambda: D.Independent(D.Normal(fg.zeros(2), 1.0), 2),
            ValueError,
            "Independent: expected 0 <= reinterpreted_batch_ndims",
        ),
        (
            lambda: D.Gamma(fg.tensor([1.0, -1.0]), 1.0),
            ValueError,
            r"parameter concentration .* distribution Gamma",
        ),
        (lambda: D.Gamma(1.0, 0.0), ValueError, r"parameter rate .* distribution Gamma"),
        (lambda: D.Beta(0.5, -2.0), ValueError, r"parameter concentration0 .* distribution Beta"),
        (
            lambda: D.Dirichlet(fg.tensor(1.0)),
            ValueError,
            "Dirichlet: `concentration` must be a Tensor of at least one",
        ),
        (
            lambda: D.Dirichlet(fg.tensor([1.0, 0.0])),
            ValueError,
            r"parameter concentration .* distribution Dirichlet",
        ),
        (lambda: D.Poisson(-0.5), ValueError, r"parameter rate .* distribution Poisson"),
    ],
)
def test_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_values_outside_the_support():
    with pytest.raises(ValueError, match=r"value argument .* support .* Bernoulli"):
        D.Bernoulli(probs=fg.tensor(0.5)).log_prob(fg.tensor(0.5))
    with pytest.raises(ValueError, match=r"value argument .* support .* Categorical"):
        D.Categorical(logits=fg.zeros(3)).log_prob(fg.tensor(3))
    with pytest.raises(ValueError, match=r"value argument .* support .* Uniform"):
        D.Uniform(0.0, 1.0).log_prob(fg.tensor(1.5))
    with pytest.raises(ValueError, match="Normal: the value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)


def test_values_outside_the_support_of_the_gamma_family():
    with pytest.raises(ValueError, match=r"value argument .* support .* Poisson"):
        D.Poisson(2.0).log_prob(fg.tensor(1.5))
    with pytest.raises(ValueError, match=r"value argument .* support .* Dirichlet"):
        D.Dirichlet(fg.ones(3)).log_prob(fg.tensor([0.5, 0.2, 0.1]))
    with pytest.raises(ValueError, match=r"value argument .* support .* Beta"):
        D.Beta(1.0, 1.0).log_prob(fg.tensor(1.5))


def test_validation_can_be_turned_off():
    d = D.Normal(0.0, -1.0, validate_args=False)
    assert float(d.scale) == -1.0
    D.Distribution.set_default_validate_args(False)
    try:
        D.Bernoulli(probs=fg.tensor(2.0))
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Bernoulli(probs=fg.tensor(2.0))


# ---------------------------------------------------------------------------
# the gamma family and Poisson: special functions, densities, samples, gradients
# ---------------------------------------------------------------------------


def test_lgamma_and_digamma_against_scipy():
    from ferrograd.distributions._special import digamma, lgamma

    x = np.concatenate([np.logspace(-5, 6, 200), [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 7.5, 8.0]])
    t = t64(x, True)
    lg, dg = lgamma(t), digamma(t)
    np.testing.assert_allclose(npy(lg), special.gammaln(x), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(npy(dg), special.digamma(x), rtol=1e-13, atol=1e-13)
    (g,) = fg.autograd.grad(lg.sum(), [t])
    np.testing.assert_allclose(npy(g), special.digamma(x), rtol=1e-13, atol=1e-13)
    (g,) = fg.autograd.grad(dg.sum(), [t])
    np.testing.assert_allclose(npy(g), special.polygamma(1, x), rtol=1e-12, atol=1e-12)


A = np.array([0.4, 1.0, 3.5, 40.0])
B = np.array([2.0, 0.5, 1.3, 0.2])


def test_gamma_against_scipy():
    d = D.Gamma(t64(A), t64(B))
    ref = stats.gamma(A, scale=1 / B)
    x = ref.ppf([[0.05], [0.5], [0.97]])
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), ref.logpdf(x), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mode), np.maximum((A - 1) / B, 0), rtol=1e-12)


def test_beta_against_scipy():
    d = D.Beta(t64(A), t64(B))
    ref = stats.beta(A, B)
    x = np.array([[0.05], [0.5], [0.93]])
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), ref.logpdf(x), rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)


def test_dirichlet_against_scipy():
    alpha = np.array([[0.5, 3.0, 2.0], [1.0, 1.0, 7.0]])
    d = D.Dirichlet(t64(alpha))
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    x = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    for i in range(2):
        ref = stats.dirichlet(alpha[i])
        np.testing.assert_allclose(npy(d.log_prob(t64(x)))[i], ref.logpdf(x[i]), rtol=1e-11)
        np.testing.assert_allclose(npy(d.entropy())[i], ref.entropy(), rtol=1e-11)
        np.testing.assert_allclose(npy(d.mean)[i], ref.mean(), rtol=1e-12)
        np.testing.assert_allclose(npy(d.variance)[i], ref.var(), rtol=1e-12)


def test_poisson_against_scipy():
    rate = np.array([0.0, 0.3, 4.0, 250.0])
    d = D.Poisson(t64(rate))
    k = np.array([[0.0], [3.0], [240.0]])
    want = stats.poisson(rate).logpmf(k)
    got = npy(d.log_prob(t64(k)))
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-11, atol=1e-11)
    assert got[0, 0] == 0.0 and np.all(got[1:, 0] == -np.inf)  # rate 0: all mass at 0
    np.testing.assert_allclose(npy(d.mean), rate)
    np.testing.assert_allclose(npy(d.variance), rate)


@pytest.mark.parametrize("a", [0.3, 1.0, 4.5, 150.0])
def test_gamma_samples(a):
    fg.manual_seed(41)
    x = npy(D.Gamma(t64(a), t64(2.0)).sample((20_000,)))
    assert np.all(x > 0)
    assert stats.kstest(x, stats.gamma(a, scale=0.5).cdf).pvalue > 1e-3


def test_beta_and_dirichlet_samples():
    fg.manual_seed(42)
    x = npy(D.Beta(t64(0.7), t64(2.5)).sample((20_000,)))
    assert stats.kstest(x, stats.beta(0.7, 2.5).cdf).pvalue > 1e-3
    alpha = np.array([0.5, 2.0, 4.0])
    s = npy(D.Dirichlet(t64(alpha)).sample((20_000,)))
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-12)
    ref = stats.dirichlet(alpha)
    assert np.all(np.abs(s.mean(0) - ref.mean()) < 5 * np.sqrt(ref.var() / 20_000))


@pytest.mark.parametrize("rate", [0.7, 6.0, 25.0, 3000.0])
def test_poisson_samples(rate):
    fg.manual_seed(43)
    n = 20_000
    k = npy(D.Poisson(t64(rate)).sample((n,)))
    assert np.all(k == np.round(k)) and np.all(k >= 0)
    assert abs(k.mean() - rate) < 5 * math.sqrt(rate / n)
    assert abs(k.var() / rate - 1) < 5 * math.sqrt(2 / n) + 5 / math.sqrt(n * rate)
    # the whole distribution: a chi-square test over bins of the central values
    lo, hi = stats.poisson(rate).ppf([0.001, 0.999]).astype(int)
    cuts = np.unique(np.linspace(lo, hi + 1, 12).astype(int))[1:-1]  # bin i holds k < cuts[i]
    counts = np.bincount(np.searchsorted(cuts, k, side="right"), minlength=len(cuts) + 1)
    cdf = np.concatenate([stats.poisson(rate).cdf(cuts - 1), [1.0]])
    probs = np.diff(np.concatenate([[0.0], cdf]))
    assert stats.chisquare(counts, probs * n).pvalue > 1e-3


def test_gamma_rsample_gradient_is_the_implicit_reparameterisation_gradient():
    """dx/da at a fixed CDF value, against SciPy's inverse CDF differentiated numerically;
    dx/d rate = -x / rate."""
    a = t64([0.3, 1.0, 2.5, 60.0], True)
    rate = t64([1.0, 2.0, 0.5, 1.5], True)
    fg.manual_seed(44)
    x = D.Gamma(a, rate).rsample((3,))
    ga, gr = fg.autograd.grad(x.sum(), [a, rate])
    xs, an, rn = npy(x), npy(a), npy(rate)
    u = stats.gamma(an, scale=1 / rn).cdf(xs)
    h = 1e-6
    fd = (stats.gamma(an + h, scale=1 / rn).ppf(u) - stats.gamma(an - h, scale=1 / rn).ppf(u)) / (2 * h)
    np.testing.assert_allclose(npy(ga), fd.sum(0), rtol=1e-5)
    np.testing.assert_allclose(npy(gr), (-xs / rn).sum(0), rtol=1e-12)


def test_beta_and_dirichlet_rsample_gradients_are_unbiased():
    """The mean of the pathwise gradients is the gradient of the mean, within 5 standard errors
    (one parameter per draw, so the per-draw gradients and their spread are seen)."""
    n = 20_000
    a, b = t64(np.full(n, 1.5), True), t64(np.full(n, 2.5), True)
    fg.manual_seed(45)
    ga, gb = (npy(g) for g in fg.autograd.grad(D.Beta(a, b).rsample().sum(), [a, b]))
    # E[x] = a / (a + b): dE/da = b / (a + b)^2, dE/db = -a / (a + b)^2
    for g, want in ((ga, 2.5 / 16), (gb, -1.5 / 16)):
        assert g.std() > 0 and abs(g.mean() - want) < 5 * g.std() / math.sqrt(n), (g.mean(), want)
    alpha = t64(np.tile([0.5, 2.0, 4.0], (n, 1)), True)
    fg.manual_seed(46)
    s = D.Dirichlet(alpha).rsample()
    (g,) = fg.autograd.grad(s[:, 0].sum(), [alpha])
    g = npy(g)
    # E[x_0] = a_0 / a_sum: gradient (a_sum - a_0, -a_0, -a_0) / a_sum^2
    want = np.array([6.0, -0.5, -0.5]) / 6.5**2
    assert np.all(np.abs(g.mean(0) - want) < 5 * g.std(0) / math.sqrt(n)), (g.mean(0), want)


def test_gamma_family_log_prob_gradchecks():
    x = t64([0.3, 1.7])
    gradcheck(
        lambda a, b: D.Gamma(a, b).log_prob(x).sum() + D.Gamma(a, b).entropy().sum(),
        (t64([0.8, 3.0], True), t64([1.5, 0.4], True)),
    )
    y = t64([0.3, 0.7])
    gradcheck(
        lambda a, b: D.Beta(a, b).log_prob(y).sum() + D.Beta(a, b).entropy().sum(),
        (t64([0.8, 3.0], True), t64([1.5, 0.4], True)),
    )
    gradcheck(
        lambda c: D.Dirichlet(c).log_prob(t64([0.2, 0.5, 0.3])) + D.Dirichlet(c).entropy(),
        (t64([0.8, 3.0, 1.2], True),),
    )
    gradcheck(lambda r: D.Poisson(r).log_prob(t64([0.0, 3.0])).sum(), (t64([0.5, 4.0], True),))


def _quad_kl(p_logpdf, q_logpdf, lo, hi):
    return integrate.quad(lambda x: math.exp(p_logpdf(x)) * (p_logpdf(x) - q_logpdf(x)), lo, hi, limit=200)[0]


def test_kl_gamma_family_and_poisson():
    p, q = (0.8, 1.5), (2.0, 0.7)
    kl = float(D.kl_divergence(D.Gamma(t64(p[0]), t64(p[1])), D.Gamma(t64(q[0]), t64(q[1]))))
    gp, gq = stats.gamma(p[0], scale=1 / p[1]), stats.gamma(q[0], scale=1 / q[1])
    assert kl == pytest.approx(_quad_kl(gp.logpdf, gq.logpdf, 0, np.inf), rel=1e-7)
    kl = float(D.kl_divergence(D.Beta(t64(p[0]), t64(p[1])), D.Beta(t64(q[0]), t64(q[1]))))
    bp, bq = stats.beta(*p), stats.beta(*q)
    assert kl == pytest.approx(_quad_kl(bp.logpdf, bq.logpdf, 0, 1), rel=1e-7)
    kl = float(D.kl_divergence(D.Poisson(t64(3.0)), D.Poisson(t64(5.5))))
    k = np.arange(200)
    pp, pq = stats.poisson(3.0).logpmf(k), stats.poisson(5.5).logpmf(k)
    assert kl == pytest.approx(float(np.sum(np.exp(pp) * (pp - pq))), rel=1e-10)
    a, b = np.array([0.5, 2.0, 4.0]), np.array([1.0, 1.0, 2.0])
    kl = float(D.kl_divergence(D.Dirichlet(t64(a)), D.Dirichlet(t64(b))))
    fg.manual_seed(47)
    x = npy(D.Dirichlet(t64(a)).sample((100_000,)))
    diff = stats.dirichlet(a).logpdf(x.T) - stats.dirichlet(b).logpdf(x.T)
    assert abs(diff.mean() - kl) < 5 * diff.std() / math.sqrt(len(diff))


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------


def test_gpu_distributions_match_cpu():
    if not fg.gpu.is_available():
        reason = f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
        print(f"skipping the GPU case: {reason}")
        pytest.skip(reason)
    loc = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    scale = np.array([1.0, 0.5, 2.0], dtype=np.float32)
    x = np.array([[0.0, 1.0, -1.0]], dtype=np.float32)
    g_loc = fg.tensor(loc, device="gpu", requires_grad=True)
    d = D.Normal(g_loc, fg.tensor(scale, device="gpu"))
    lp = d.log_prob(fg.tensor(x, device="gpu"))
    np.testing.assert_allclose(npy(lp), stats.norm(loc, scale).logpdf(x), rtol=1e-5, atol=1e-6)
    s = d.rsample((4,))
    assert str(s.device) == "gpu" and tuple(s.shape) == (4, 3)
    s.sum().backward()
    np.testing.assert_allclose(npy(g_loc.grad), [4.0, 4.0, 4.0])
    logits = np.array([[0.1, 0.5, -0.3], [1.0, 0.0, 0.0]], dtype=np.float32)
    c = D.Categorical(logits=fg.tensor(logits, device="gpu"))
    a = c.sample((8,))
    assert str(a.device) == "gpu" and tuple(a.shape) == (8, 2)
    want = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    got = npy(c.log_prob(a))
    np.testing.assert_allclose(got, want[np.arange(2), npy(a).astype(int)], rtol=1e-5, atol=1e-6)
    b = D.Bernoulli(probs=fg.tensor([0.2, 0.7], device="gpu"))
    assert set(np.unique(npy(b.sample((50,))))) <= {0.0, 1.0}
    conc = fg.tensor([2.0, 0.5], device="gpu", requires_grad=True)
    x = D.Gamma(conc, fg.tensor([1.0, 3.0], device="gpu")).rsample((6,))
    assert str(x.device) == "gpu" and x.dtype == fg.float32 and tuple(x.shape) == (6, 2)
    x.sum().backward()
    assert str(conc.grad.device) == "gpu" and np.all(npy(conc.grad) > 0)
    k = D.Poisson(fg.tensor([3.0, 40.0], device="gpu")).sample((5,))
    assert str(k.device) == "gpu" and np.all(npy(k) == np.round(npy(k)))
