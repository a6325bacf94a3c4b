"""Exponential, Laplace, LogNormal, Binomial, OneHotCategorical, RelaxedBernoulli and
TransformedDistribution (with its transforms) against SciPy / NumPy formulas (float64),
sample moments and Kolmogorov-Smirnov tests with fixed seeds, reparameterised gradients,
shapes and argument validation."""

from __future__ import annotations

import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import distributions as D
from ferrograd.autograd import gradcheck
from ferrograd.distributions import transforms as T
from scipy import special, stats

F64 = fg.float64
N = 20000


def t64(a, requires_grad=False):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=F64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


RNG = np.random.default_rng(4321)
RATE = RNG.uniform(0.3, 3.0, size=(2, 3))
LOC = RNG.normal(size=(2, 3))
SCALE = RNG.uniform(0.3, 2.0, size=(2, 3))
XPOS = RNG.uniform(0.05, 4.0, size=(5, 2, 3))
XREAL = RNG.normal(size=(5, 2, 3)) * 2
U = RNG.uniform(0.02, 0.98, size=(5, 2, 3))


# ---------------------------------------------------------------------------
# densities, entropies, moments
# ---------------------------------------------------------------------------


def test_exponential_against_scipy():
    d = D.Exponential(t64(RATE))
    ref = stats.expon(scale=1 / RATE)
    assert d.batch_shape == (2, 3) and d.event_shape == () and d.has_rsample
    np.testing.assert_allclose(npy(d.log_prob(t64(XPOS))), ref.logpdf(XPOS), rtol=1e-12)
    np.testing.assert_allclose(npy(d.cdf(t64(XPOS))), ref.cdf(XPOS), rtol=1e-12)
    np.testing.assert_allclose(npy(d.icdf(t64(U))), ref.ppf(U), rtol=1e-12)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.stddev), ref.std(), rtol=1e-12)
    np.testing.assert_array_equal(npy(d.mode), 0.0)


def test_laplace_against_scipy():
    d = D.Laplace(t64(LOC), t64(SCALE))
    ref = stats.laplace(LOC, SCALE)
    np.testing.assert_allclose(npy(d.log_prob(t64(XREAL))), ref.logpdf(XREAL), rtol=1e-12)
    np.testing.assert_allclose(npy(d.cdf(t64(XREAL))), ref.cdf(XREAL), rtol=1e-11, atol=1e-15)
    np.testing.assert_allclose(npy(d.icdf(t64(U))), ref.ppf(U), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.stddev), ref.std(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), LOC)
    np.testing.assert_allclose(npy(d.mode), LOC)


def test_log_normal_against_scipy():
    d = D.LogNormal(t64(LOC), t64(SCALE))
    ref = stats.lognorm(s=SCALE, scale=np.exp(LOC))
    assert isinstance(d, D.TransformedDistribution)
    assert d.batch_shape == (2, 3) and d.event_shape == () and d.has_rsample
    np.testing.assert_allclose(npy(d.log_prob(t64(XPOS))), ref.logpdf(XPOS), rtol=1e-11)
    np.testing.assert_allclose(npy(d.cdf(t64(XPOS))), ref.cdf(XPOS), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(npy(d.entropy()), ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-11)
    np.testing.assert_allclose(npy(d.mode), np.exp(LOC - SCALE**2), rtol=1e-12)
    np.testing.assert_allclose(npy(d.loc), LOC)
    np.testing.assert_allclose(npy(d.scale), SCALE)


def test_binomial_against_scipy():
    n = np.array([[5.0, 5.0, 5.0], [0.0, 12.0, 1.0]])
    p = RNG.uniform(0.05, 0.95, size=(2, 3))
    k = np.minimum(RNG.integers(0, 13, size=(4, 2, 3)), n).astype(np.float64)
    d = D.Binomial(t64(n), t64(p))
    ref = stats.binom(n, p)
    np.testing.assert_allclose(npy(d.log_prob(t64(k))), ref.logpmf(k), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mode), np.minimum(np.floor((n + 1) * p), n))
    # logits parameterisation and homogeneous total count: entropy over the support
    logits = RNG.normal(size=(3,))
    dl = D.Binomial(7, logits=t64(logits))
    pl = special.expit(logits)
    np.testing.assert_allclose(npy(dl.probs), pl, rtol=1e-12)
    np.testing.assert_allclose(npy(dl.entropy()), stats.binom(7, pl).entropy(), rtol=1e-10)
    support = npy(dl.enumerate_support())
    assert support.shape == (8, 3)
    np.testing.assert_array_equal(support[:, 0], np.arange(8))
    with pytest.raises(NotImplementedError, match="Inhomogeneous"):
        d.entropy()


def test_one_hot_categorical_against_formulas():
    probs = RNG.uniform(0.1, 1.0, size=(2, 4))
    probs /= probs.sum(-1, keepdims=True)
    d = D.OneHotCategorical(t64(probs))
    assert d.batch_shape == (2,) and d.event_shape == (4,)
    idx = np.array([[0, 3], [2, 2], [1, 0]])
    value = np.eye(4)[idx]
    want = np.log(np.take_along_axis(np.broadcast_to(probs, (3, 2, 4)), idx[..., None], -1))[..., 0]
    np.testing.assert_allclose(npy(d.log_prob(t64(value))), want, rtol=1e-12)
    np.testing.assert_allclose(npy(d.entropy()), -(probs * np.log(probs)).sum(-1), rtol=1e-12)
    np.testing.assert_allclose(npy(d.mean), probs)
    np.testing.assert_allclose(npy(d.variance), probs * (1 - probs))
    np.testing.assert_array_equal(npy(d.mode), np.eye(4)[probs.argmax(-1)])
    sup = npy(d.enumerate_support())
    assert sup.shape == (4, 2, 4)
    np.testing.assert_array_equal(sup[:, 0], np.eye(4))
    dl = D.OneHotCategorical(logits=t64(np.log(probs) + 3.0))
    np.testing.assert_allclose(npy(dl.probs), probs, rtol=1e-12)


def _relaxed_logpdf(y, temp, logits):
    """Density of the binary Concrete distribution on (0, 1) (Maddison et al., 2017)."""
    a = np.exp(logits)
    num = temp * a * y ** (-temp - 1) * (1 - y) ** (-temp - 1)
    den = (a * y**-temp + (1 - y) ** -temp) ** 2
    return np.log(num / den)


@pytest.mark.parametrize("temp", [0.3, 1.0, 2.5])
def test_relaxed_bernoulli_against_concrete_density(temp):
    logits = RNG.normal(size=(2, 3))
    d = D.RelaxedBernoulli(t64(temp), logits=t64(logits))
    assert d.batch_shape == (2, 3) and d.event_shape == () and d.has_rsample
    np.testing.assert_allclose(npy(d.log_prob(t64(U))), _relaxed_logpdf(U, temp, logits), rtol=1e-9)
    dp = D.RelaxedBernoulli(temp, probs=t64(special.expit(logits)))
    np.testing.assert_allclose(npy(dp.log_prob(t64(U))), _relaxed_logpdf(U, temp, logits), rtol=1e-8)
    np.testing.assert_allclose(npy(dp.temperature), temp)
    # the density integrates to 1 over (0, 1) (in logit space, where it has no singularities)
    z = np.linspace(-35.0, 35.0, 200001)
    y = special.expit(z)
    dens = np.exp(npy(D.RelaxedBernoulli(t64(temp), logits=t64(0.4)).log_prob(t64(y)))) * y * (1 - y)
    assert abs(np.trapezoid(dens, z) - 1) < 2e-3


def test_transformed_distribution_affine_sigmoid():
    base = D.Normal(t64(LOC), t64(SCALE))
    d = D.TransformedDistribution(base, [T.AffineTransform(1.5, -2.0), T.SigmoidTransform()])
    # y = sigmoid(1.5 - 2x): x = (1.5 - logit(y)) / 2, |dy/dx| = 2 y (1 - y)
    x = (1.5 - special.logit(U)) / 2
    want = stats.norm(LOC, SCALE).logpdf(x) - np.log(2 * U * (1 - U))
    np.testing.assert_allclose(npy(d.log_prob(t64(U))), want, rtol=1e-10)
    # decreasing map: cdf(y) = 1 - Phi(x)
    np.testing.assert_allclose(npy(d.cdf(t64(U))), stats.norm(LOC, SCALE).sf(x), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(npy(d.icdf(d.cdf(t64(U)))), U, rtol=1e-8)
    assert d.support is T.SigmoidTransform.codomain


def test_transformed_distribution_event_dims_and_expand():
    base = D.Normal(t64(np.zeros((4, 3))), t64(np.ones((4, 3))))
    loc, scale = RNG.normal(size=3), RNG.uniform(0.5, 2, size=3)
    d = D.TransformedDistribution(base, T.AffineTransform(t64(loc), t64(scale), event_dim=1))
    assert d.batch_shape == (4,) and d.event_shape == (3,)
    y = RNG.normal(size=(4, 3))
    want = stats.norm(loc, scale).logpdf(y).sum(-1)
    np.testing.assert_allclose(npy(d.log_prob(t64(y))), want, rtol=1e-12)
    e = d.expand((2, 4))
    assert e.batch_shape == (2, 4) and e.event_shape == (3,)
    assert tuple(e.sample().shape) == (2, 4, 3)
    ln = D.LogNormal(t64(0.0), t64(1.0)).expand((5,))
    assert isinstance(ln, D.LogNormal) and ln.batch_shape == (5,) and tuple(ln.rsample((2,)).shape) == (2, 5)


def test_transforms_inverse_and_jacobians():
    x = t64(RNG.normal(size=(6,)))
    for t in (T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(), T.AffineTransform(0.5, -3.0)):
        y = t(x)
        np.testing.assert_allclose(npy(t.inv(y)), npy(x), rtol=1e-9, atol=1e-12)
        # log|dy/dx| against a central difference
        h = 1e-6
        num = np.log(np.abs((npy(t(x + h)) - npy(t(x - h))) / (2 * h)))
        np.testing.assert_allclose(npy(t.log_abs_det_jacobian(x, y)), num, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(npy(t.inv.log_abs_det_jacobian(y, x)), -num, rtol=1e-6, atol=1e-6)
        assert t.inv.inv is t
    c = T.ComposeTransform([T.AffineTransform(1.0, 2.0), T.ExpTransform()])
    np.testing.assert_allclose(npy(c(x)), np.exp(1 + 2 * npy(x)), rtol=1e-12)
    np.testing.assert_allclose(npy(c.log_abs_det_jacobian(x, c(x))), math.log(2) + 1 + 2 * npy(x), rtol=1e-12)
    cached = T.ExpTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------


def test_exponential_and_laplace_samples():
    fg.manual_seed(21)
    s = npy(D.Exponential(t64([0.5, 3.0])).sample((N,)))
    assert s.min() >= 0
    assert stats.kstest(s[:, 0], stats.expon(scale=2.0).cdf).pvalue > 1e-3
    assert stats.kstest(s[:, 1], stats.expon(scale=1 / 3).cdf).pvalue > 1e-3
    s = npy(D.Laplace(t64([-1.0, 2.0]), t64([0.5, 2.0])).sample((N,)))
    assert np.all(np.abs(s.mean(0) - [-1.0, 2.0]) < 5 * np.sqrt(2) * np.array([0.5, 2.0]) / math.sqrt(N))
    assert stats.kstest(s[:, 1], stats.laplace(2.0, 2.0).cdf).pvalue > 1e-3


def test_log_normal_and_relaxed_samples():
    fg.manual_seed(22)
    s = npy(D.LogNormal(t64(0.3), t64(0.6)).sample((N,)))
    assert stats.kstest(s, stats.lognorm(s=0.6, scale=math.exp(0.3)).cdf).pvalue > 1e-3
    s = npy(D.RelaxedBernoulli(t64(0.5), probs=t64([0.2, 0.7])).sample((N,)))
    assert s.min() > 0 and s.max() < 1
    # P(Y > 1/2) = P(logistic noise + logits > 0) = p, whatever the temperature
    p = (s > 0.5).mean(0)
    assert np.all(np.abs(p - [0.2, 0.7]) < 5 * np.sqrt(np.array([0.16, 0.21]) / N))


def test_binomial_and_one_hot_samples():
    fg.manual_seed(23)
    n, p = np.array([10.0, 3.0, 0.0]), np.array([0.3, 0.9, 0.5])
    s = npy(D.Binomial(t64(n), t64(p)).sample((N,)))
    assert s.shape == (N, 3) and np.all(s == np.round(s)) and np.all((s >= 0) & (s <= n))
    assert np.all(np.abs(s.mean(0) - n * p) < 5 * np.sqrt(n * p * (1 - p) / N) + 1e-12)
    assert np.all(np.abs(s.var(0) - n * p * (1 - p)) < 0.1 * n * p * (1 - p) + 1e-12)
    probs = np.array([0.1, 0.6, 0.3])
    s = npy(D.OneHotCategorical(t64(probs)).sample((N,)))
    assert s.shape == (N, 3) and np.all(s.sum(-1) == 1)
    assert np.all(np.abs(s.mean(0) - probs) < 5 * np.sqrt(probs * (1 - probs) / N))


@pytest.mark.parametrize(
    "make",
    [
        lambda: D.Exponential(t64(RATE)),
        lambda: D.Laplace(t64(LOC), t64(SCALE)),
        lambda: D.LogNormal(t64(LOC), t64(SCALE)),
        lambda: D.Binomial(4, t64(special.expit(LOC))),
        lambda: D.RelaxedBernoulli(0.5, logits=t64(LOC)),
        lambda: D.OneHotCategorical(logits=t64(LOC)),
    ],
)
def test_sample_shapes(make):
    d = make()
    full = (7, *d.batch_shape, *d.event_shape)
    assert tuple(d.sample((7,)).shape) == full
    assert tuple(d.sample().shape) == (*d.batch_shape, *d.event_shape)
    if d.has_rsample:
        assert tuple(d.rsample((7,)).shape) == full
    e = d.expand((4, *d.batch_shape))
    assert e.batch_shape == (4, *d.batch_shape)
    assert tuple(e.sample().shape) == (4, *d.batch_shape, *d.event_shape)


# ---------------------------------------------------------------------------
# gradients
# ---------------------------------------------------------------------------


def test_rsample_gradients():
    rate = t64([0.7, 2.0], requires_grad=True)
    fg.manual_seed(5)
    s = D.Exponential(rate).rsample((3,))
    s.sum().backward()
    fg.manual_seed(5)
    u_like = npy(D.Exponential(t64([1.0, 1.0])).rsample((3,)))  # the standard draws behind s
    np.testing.assert_allclose(npy(rate.grad), -(u_like / npy(rate) ** 2).sum(0), rtol=1e-10)

    def lap(loc, scale):
        fg.manual_seed(6)
        return D.Laplace(loc, scale).rsample((4,))

    assert gradcheck(lap, (t64(LOC[0], True), t64(SCALE[0], True)))

    def lognormal(loc, scale):
        fg.manual_seed(7)
        return D.LogNormal(loc, scale).rsample((4,))

    assert gradcheck(lognormal, (t64(LOC[0], True), t64(SCALE[0], True)))

    def relaxed(logits):
        fg.manual_seed(8)
        return D.RelaxedBernoulli(t64(0.6), logits=logits).rsample((4,))

    assert gradcheck(relaxed, (t64(LOC[0], True),))


def test_log_prob_and_entropy_gradients():
    assert gradcheck(lambda r: D.Exponential(r).log_prob(t64(XPOS[0])), (t64(RATE, True),))
    assert gradcheck(lambda lo, sc: D.Laplace(lo, sc).entropy(), (t64(LOC, True), t64(SCALE, True)))
    assert gradcheck(lambda p: D.Binomial(6, p).log_prob(t64([0.0, 2.0, 6.0])), (t64([0.2, 0.5, 0.9], True),))
    assert gradcheck(lambda lg: D.Binomial(5, logits=lg).entropy(), (t64([-1.0, 0.3], True),))
    assert gradcheck(lambda lg: D.OneHotCategorical(logits=lg).entropy(), (t64(LOC, True),))
    assert gradcheck(
        lambda lo, sc: D.LogNormal(lo, sc).log_prob(t64(XPOS[0])), (t64(LOC, True), t64(SCALE, True))
    )


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "param"),
    [
        (lambda: D.Exponential(t64([1.0, -1.0])), "rate"),
        (lambda: D.Laplace(t64(0.0), t64(0.0)), "scale"),
        (lambda: D.LogNormal(t64(0.0), t64(-1.0)), "scale"),
        (lambda: D.Binomial(t64([2.5]), t64([0.5])), "total_count"),
        (lambda: D.Binomial(3, t64([1.5])), "probs"),
        (lambda: D.OneHotCategorical(t64([-0.5, 1.5])), "probs"),
    ],
)
def test_invalid_parameters(make, param):
    with pytest.raises(ValueError, match=param):
        make()


def test_invalid_values_and_arguments():
    with pytest.raises(ValueError, match="support"):
        D.Exponential(t64(1.0)).log_prob(t64(-1.0))
    with pytest.raises(ValueError, match="support"):
        D.Binomial(3, t64(0.5)).log_prob(t64(4.0))
    with pytest.raises(ValueError, match="support"):
        D.OneHotCategorical(t64([0.5, 0.5])).log_prob(t64([1.0, 1.0]))
    with pytest.raises(ValueError, match="support"):
        D.LogNormal(t64(0.0), t64(1.0)).log_prob(t64(-2.0))
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.Binomial(3)
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.RelaxedBernoulli(0.5, probs=t64(0.5), logits=t64(0.0))
    with pytest.raises(ValueError, match="transforms must be"):
        D.TransformedDistribution(D.Normal(t64(0.0), t64(1.0)), [object()])


# ---------------------------------------------------------------------------
# KL divergences
# ---------------------------------------------------------------------------


def test_kl_divergences_against_sums_and_integrals():
    from scipy import integrate

    a, b = np.array([0.5, 2.0]), np.array([1.5, 0.7])
    kl = npy(D.kl_divergence(D.Exponential(t64(a)), D.Exponential(t64(b))))
    np.testing.assert_allclose(kl, np.log(a / b) + b / a - 1, rtol=1e-12)
    p, q = D.Laplace(t64(0.3), t64(0.8)), D.Laplace(t64(-0.5), t64(1.7))
    want = integrate.quad(
        lambda x: (
            stats.laplace(0.3, 0.8).pdf(x)
            * (stats.laplace(0.3, 0.8).logpdf(x) - stats.laplace(-0.5, 1.7).logpdf(x))
        ),
        -40,
        40,
        points=[-0.5, 0.3],
    )[0]
    np.testing.assert_allclose(npy(D.kl_divergence(p, q)), want, rtol=1e-8)
    pp, qq = np.array([0.2, 0.7]), np.array([0.5, 0.4])
    k = np.arange(7)[:, None]
    want = (stats.binom(6, pp).pmf(k) * (stats.binom(6, pp).logpmf(k) - stats.binom(6, qq).logpmf(k))).sum(0)
    np.testing.assert_allclose(
        npy(D.kl_divergence(D.Binomial(6, t64(pp)), D.Binomial(6, t64(qq)))), want, rtol=1e-10
    )
    assert np.isinf(npy(D.kl_divergence(D.Binomial(7, t64(0.5)), D.Binomial(6, t64(0.5)))))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(D.Binomial(5, t64(0.5)), D.Binomial(6, t64(0.5)))
    c1, c2 = np.array([0.2, 0.3, 0.5]), np.array([0.6, 0.1, 0.3])
    np.testing.assert_allclose(
        npy(D.kl_divergence(D.OneHotCategorical(t64(c1)), D.OneHotCategorical(t64(c2)))),
        (c1 * np.log(c1 / c2)).sum(),
        rtol=1e-12,
    )
    ln = D.kl_divergence(D.LogNormal(t64(LOC), t64(SCALE)), D.LogNormal(t64(LOC[::-1]), t64(SCALE[::-1])))
    nn_ = D.kl_divergence(D.Normal(t64(LOC), t64(SCALE)), D.Normal(t64(LOC[::-1]), t64(SCALE[::-1])))
    np.testing.assert_allclose(npy(ln), npy(nn_), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="different transforms"):
        D.kl_divergence(
            D.TransformedDistribution(D.Normal(t64(0.0), t64(1.0)), T.ExpTransform()),
            D.TransformedDistribution(D.Normal(t64(0.0), t64(1.0)), T.SigmoidTransform()),
        )
