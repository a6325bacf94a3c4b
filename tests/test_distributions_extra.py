"""StudentT, Cauchy, HalfCauchy, HalfNormal, Gumbel, Chi2, Geometric, Weibull, Pareto,
VonMises, ContinuousBernoulli, RelaxedOneHotCategorical, NegativeBinomial,
MixtureSameFamily, LowRankMultivariateNormal, FisherSnedecor and Kumaraswamy, and their
KL divergences: densities, CDFs, entropies and moments against SciPy or NumPy formulas
in float64, sample moments (tolerances from the sample count) and Kolmogorov-Smirnov
tests with fixed seeds, reparameterised gradients by finite differences, KL against
quadrature or NumPy closed forms, shapes and argument validation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import distributions as D
from ferrograd.autograd import gradcheck
from scipy import integrate, special, stats

F64 = fg.float64
N = 20000


def t64(a, requires_grad=False):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=F64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


X = np.array([0.3, 1.2, 2.5])
XR = np.array([-1.7, 0.4, 2.5])
U = np.array([0.1, 0.5, 0.93])
A3 = np.array([0.7, 1.5, 3.0])
B3 = np.array([1.0, 0.5, 2.0])
L3 = np.array([0.1, -0.2, 0.3])

# (name, constructor, scipy reference, points for log_prob/cdf)
CONTINUOUS = [
    ("StudentT", lambda: D.StudentT(t64([2.5, 4.0, 7.0]), t64(L3), t64(B3)), stats.t([2.5, 4.0, 7.0], L3, B3), XR),
    ("Cauchy", lambda: D.Cauchy(t64(L3), t64(B3)), stats.cauchy(L3, B3), XR),
    ("HalfCauchy", lambda: D.HalfCauchy(t64(B3)), stats.halfcauchy(scale=B3), X),
    ("HalfNormal", lambda: D.HalfNormal(t64(B3)), stats.halfnorm(scale=B3), X),
    ("Gumbel", lambda: D.Gumbel(t64(L3), t64(B3)), stats.gumbel_r(L3, B3), XR),
    ("Chi2", lambda: D.Chi2(t64([1.5, 3.0, 5.0])), stats.chi2([1.5, 3.0, 5.0]), X),
    ("Weibull", lambda: D.Weibull(t64(B3), t64(A3)), stats.weibull_min(A3, scale=B3), X),
    ("Pareto", lambda: D.Pareto(t64([0.2, 0.5, 1.0]), t64([2.5, 3.5, 4.5])),
     stats.pareto([2.5, 3.5, 4.5], scale=[0.2, 0.5, 1.0]), np.array([0.3, 1.2, 2.5])),
    ("FisherSnedecor", lambda: D.FisherSnedecor(t64([3.0, 5.0, 8.0]), t64([5.0, 7.0, 12.0])),
     stats.f([3.0, 5.0, 8.0], [5.0, 7.0, 12.0]), X),
]  # fmt: skip


def _maybe(fn):
    try:
        return fn()
    except NotImplementedError:
        return None


@pytest.mark.parametrize("name,make,ref,x", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_continuous_against_scipy(name, make, ref, x):
    d = make()
    assert type(d).__name__ == name
    assert d.batch_shape == (3,) and d.event_shape == ()
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), ref.logpdf(x), rtol=1e-11, atol=1e-13)
    if name not in ("Cauchy", "HalfCauchy"):  # no finite moments: see test_moments_without_a_finite_value
        np.testing.assert_allclose(npy(d.mean), ref.mean(), rtol=1e-11)
        np.testing.assert_allclose(npy(d.variance), ref.var(), rtol=1e-10)
    ent = _maybe(d.entropy)
    if name != "FisherSnedecor":  # PyTorch has no FisherSnedecor.entropy either
        np.testing.assert_allclose(npy(ent), ref.entropy(), rtol=1e-11, atol=1e-13)
    cdf = _maybe(lambda: d.cdf(t64(x)))
    icdf = _maybe(lambda: d.icdf(t64(U)))
    has_cdf = name not in ("StudentT", "FisherSnedecor")  # as PyTorch: no cdf (it would need betainc)
    has_icdf = has_cdf and name != "Chi2"
    assert (cdf is not None) == has_cdf and (icdf is not None) == has_icdf
    if has_cdf:
        np.testing.assert_allclose(npy(cdf), ref.cdf(x), rtol=1e-11, atol=1e-14)
    if has_icdf:
        np.testing.assert_allclose(npy(icdf), ref.ppf(U), rtol=1e-11)


def test_gamma_cdf_against_scipy():
    a = np.array([0.3, 1.0, 4.5, 60.0])
    rate = np.array([2.0, 0.5, 1.0, 0.2])
    x = np.array([[0.0], [0.01], [1.0], [7.5], [300.0], [2000.0]]) * np.ones(4)
    d = D.Gamma(t64(a), t64(rate))
    got, want = npy(d.cdf(t64(x))), stats.gamma(a, scale=1 / rate).cdf(x)
    lower = want < 0.5  # relative accuracy in the lower tail; absolute near 1 (thousands of terms)
    np.testing.assert_allclose(got[lower], want[lower], rtol=1e-11, atol=1e-300)
    np.testing.assert_allclose(got[~lower], want[~lower], rtol=0, atol=1e-10)
    assert gradcheck(lambda c, v: D.Gamma(c, t64(1.5)).cdf(v), (t64([0.7, 3.0], True), t64([0.4, 2.5], True)))


def test_moments_without_a_finite_value():
    assert np.isnan(npy(D.Cauchy(t64(L3), t64(B3)).mean)).all()
    assert np.isinf(npy(D.Cauchy(t64(L3), t64(B3)).variance)).all()
    assert np.isinf(npy(D.HalfCauchy(t64(B3)).mean)).all()
    st = D.StudentT(t64([0.8, 1.5, 3.0]))
    np.testing.assert_array_equal(np.isnan(npy(st.mean)), [True, False, False])
    v = npy(st.variance)
    assert np.isnan(v[0]) and np.isinf(v[1]) and v[2] == pytest.approx(3.0)
    pa = D.Pareto(t64(1.0), t64([0.5, 1.5, 3.0]))
    assert np.isinf(npy(pa.mean)[0]) and np.isinf(npy(pa.variance)[:2]).all()
    f = D.FisherSnedecor(t64([1.0, 4.0]), t64([2.0, 4.5]))
    np.testing.assert_array_equal(np.isnan(npy(f.mean)), [True, False])
    np.testing.assert_array_equal(np.isnan(npy(f.mode)), [True, False])
    np.testing.assert_array_equal(np.isnan(npy(f.variance)), [True, False])
    np.testing.assert_allclose(npy(f.mode)[1], (4 - 2) / 4 * 4.5 / 6.5)


def test_modes():
    np.testing.assert_allclose(npy(D.Gumbel(t64(L3), t64(B3)).mode), L3)
    np.testing.assert_array_equal(npy(D.HalfNormal(t64(B3)).mode), 0.0)
    np.testing.assert_allclose(npy(D.Chi2(t64([1.5, 3.0, 5.0])).mode), [0.0, 1.0, 3.0])
    k = np.array([0.5, 1.0, 2.0, 3.0])
    want = np.where(k > 1, 2.0 * ((k - 1) / k) ** (1 / k), 0.0)  # argmax of the density
    np.testing.assert_allclose(npy(D.Weibull(t64(2.0), t64(k)).mode), want, atol=1e-15)
    np.testing.assert_allclose(npy(D.Pareto(t64([0.2, 0.5]), t64(3.0)).mode), [0.2, 0.5])
    a, b = np.array([2.0, 3.0, 0.5]), np.array([3.0, 1.5, 2.0])
    m = npy(D.Kumaraswamy(t64(a), t64(b)).mode)
    np.testing.assert_allclose(m[:2], ((a[:2] - 1) / (a[:2] * b[:2] - 1)) ** (1 / a[:2]), rtol=1e-13)
    assert np.isnan(m[2])


def test_kumaraswamy_against_closed_forms_and_quadrature():
    a, b = np.array([2.0, 0.5, 3.0]), np.array([3.0, 2.0, 1.5])
    d = D.Kumaraswamy(t64(a), t64(b))
    assert isinstance(d, D.TransformedDistribution) and d.has_rsample
    x = np.array([0.2, 0.45, 0.9])
    logpdf = np.log(a * b) + (a - 1) * np.log(x) + (b - 1) * np.log1p(-(x**a))
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), logpdf, rtol=1e-12)
    np.testing.assert_allclose(npy(d.cdf(t64(x))), 1 - (1 - x**a) ** b, rtol=1e-12)
    np.testing.assert_allclose(npy(d.icdf(t64(1 - (1 - x**a) ** b))), x, rtol=1e-12)
    # E[X^n] = b B(1 + n/a, b)
    m1, m2 = b * special.beta(1 + 1 / a, b), b * special.beta(1 + 2 / a, b)
    np.testing.assert_allclose(npy(d.mean), m1, rtol=1e-12)
    np.testing.assert_allclose(npy(d.variance), m2 - m1**2, rtol=1e-11)

    def neg_plogp(z, i):
        pdf = a[i] * b[i] * z ** (a[i] - 1) * (1 - z ** a[i]) ** (b[i] - 1)
        return -pdf * math.log(pdf) if pdf > 0 else 0.0

    for i in range(3):
        ent = integrate.quad(neg_plogp, 0, 1, args=(i,), limit=200)[0]
        np.testing.assert_allclose(npy(d.entropy())[i], ent, rtol=1e-7)


def test_von_mises_against_scipy_and_bessel():
    loc, k = np.array([0.0, 1.0, -2.0, 0.5, 3.0]), np.array([1e-3, 0.5, 4.0, 30.0, 200.0])
    d = D.VonMises(t64(loc), t64(k))
    assert not d.has_rsample and d.support is D.constraints.real
    x = np.array([0.3, -1.2, 2.5, 0.6, 3.1])
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), stats.vonmises(k, loc=loc).logpdf(x), rtol=1e-11)
    np.testing.assert_allclose(npy(d.variance), 1 - special.i1e(k) / special.i0e(k), rtol=1e-10)
    np.testing.assert_allclose(npy(d.mean), loc)
    np.testing.assert_allclose(npy(d.mode), loc)
    # the Bessel functions on both sides of the series/asymptotic switch, and their gradient
    from ferrograd.distributions.von_mises import _log_bessel_i

    z = np.array([0.01, 2.0, 14.9, 15.0, 15.1, 60.0, 700.0])
    for order, ref in ((0, special.i0e), (1, special.i1e)):
        np.testing.assert_allclose(
            npy(_log_bessel_i(t64(z), order)), np.log(ref(z)) + z, rtol=1e-12, atol=1e-13
        )
    assert gradcheck(lambda c: D.VonMises(t64(0.2), c).log_prob(t64([0.1, 2.0])), (t64([0.7, 16.0], True),))


def test_von_mises_rejection_sampler():
    fg.manual_seed(31)
    d = D.VonMises(t64([0.5, -3.0, 1.0]), t64([0.3, 2.0, 25.0]))
    s = npy(d.sample((N,)))
    assert s.shape == (N, 3) and (s >= -math.pi).all() and (s < math.pi).all()
    for j, (lo, kk) in enumerate(((0.5, 0.3), (-3.0, 2.0), (1.0, 25.0))):
        ref = stats.vonmises(kk, loc=lo)
        wrapped = (s[:, j] - lo + math.pi) % (2 * math.pi) - math.pi  # centred on loc
        assert stats.kstest(wrapped, stats.vonmises(kk).cdf).pvalue > 1e-3
        # the mean resultant length E[cos(x - loc)] = I1/I0, within 5 standard errors
        r = np.cos(s[:, j] - lo)
        assert abs(r.mean() - special.i1e(kk) / special.i0e(kk)) < 5 * r.std() / math.sqrt(N) + 1e-12
        del ref
    assert d.sample().shape == (3,)
    f32 = D.VonMises(fg.tensor([0.0, 1.0]), fg.tensor([1.0, 5.0])).sample((4,))
    assert f32.dtype == fg.float32 and f32.shape == (4, 2)


def test_geometric_and_negative_binomial_against_scipy():
    p = np.array([0.2, 0.5, 0.9])
    g = D.Geometric(t64(p))
    k = np.array([[0.0], [1.0], [4.0]]) * np.ones(3)
    ref = stats.geom(p, loc=-1)  # failures before the first success
    np.testing.assert_allclose(npy(g.log_prob(t64(k))), ref.logpmf(k), rtol=1e-12)
    np.testing.assert_allclose(npy(g.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(g.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(g.entropy()), ref.entropy(), rtol=1e-10)
    np.testing.assert_array_equal(npy(g.mode), 0.0)
    gl = D.Geometric(logits=t64(special.logit(p)))
    np.testing.assert_allclose(npy(gl.log_prob(t64(k))), ref.logpmf(k), rtol=1e-10)
    np.testing.assert_allclose(npy(D.Geometric(t64(1.0)).log_prob(t64([0.0]))), [0.0])
    r, q = np.array([0.5, 3.0, 7.5]), np.array([0.3, 0.6, 0.1])
    nb = D.NegativeBinomial(t64(r), t64(q))
    ref = stats.nbinom(r, 1 - q)  # successes (probability q) before r failures
    kk = np.array([[0.0], [2.0], [9.0]]) * np.ones(3)
    np.testing.assert_allclose(npy(nb.log_prob(t64(kk))), ref.logpmf(kk), rtol=1e-11)
    np.testing.assert_allclose(npy(nb.mean), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(npy(nb.variance), ref.var(), rtol=1e-12)
    np.testing.assert_allclose(npy(nb.mode), np.maximum(np.floor((r - 1) * q / (1 - q)), 0))
    nbl = D.NegativeBinomial(t64(r), logits=t64(special.logit(q)))
    np.testing.assert_allclose(npy(nbl.log_prob(t64(kk))), ref.logpmf(kk), rtol=1e-10)
    zero = D.NegativeBinomial(t64(0.0), t64(0.4))  # all mass at 0
    np.testing.assert_allclose(npy(zero.log_prob(t64([0.0, 1.0]))), [0.0, -math.inf])


def test_discrete_sample_moments():
    fg.manual_seed(32)
    p = np.array([0.15, 0.6])
    s = npy(D.Geometric(t64(p)).sample((N,)))
    assert (s == np.floor(s)).all() and (s >= 0).all()
    var = (1 - p) / p**2
    assert (np.abs(s.mean(0) - (1 - p) / p) < 5 * np.sqrt(var / N)).all()
    r, q = np.array([2.5, 6.0]), np.array([0.4, 0.2])
    s = npy(D.NegativeBinomial(t64(r), t64(q)).sample((N,)))
    mean, var = r * q / (1 - q), r * q / (1 - q) ** 2
    assert (s == np.floor(s)).all()
    assert (np.abs(s.mean(0) - mean) < 5 * np.sqrt(var / N)).all()
    assert (np.abs(s.var(0) / var - 1) < 0.1).all()


def _cb_np(p):
    """The continuous Bernoulli density's normaliser, mean, variance and entropy by quadrature."""
    c = 2.0 if p == 0.5 else 2 * np.arctanh(1 - 2 * p) / (1 - 2 * p)
    pdf = lambda x: c * p**x * (1 - p) ** (1 - x)  # noqa: E731
    mean = integrate.quad(lambda x: x * pdf(x), 0, 1)[0]
    var = integrate.quad(lambda x: (x - mean) ** 2 * pdf(x), 0, 1)[0]
    ent = integrate.quad(lambda x: -pdf(x) * np.log(pdf(x)), 0, 1)[0]
    return c, mean, var, ent, pdf


def test_continuous_bernoulli_against_quadrature():
    p = np.array([0.05, 0.3, 0.4995, 0.5, 0.5008, 0.8, 0.97])  # both sides of the Taylor region
    d = D.ContinuousBernoulli(t64(p))
    assert d.has_rsample and d.batch_shape == (7,)
    x = np.array([0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.99])
    for i, pi in enumerate(p):
        c, mean, var, ent, pdf = _cb_np(pi)
        np.testing.assert_allclose(npy(d.log_prob(t64(x)))[i], np.log(pdf(x[i])), rtol=1e-9)
        np.testing.assert_allclose(npy(d.mean)[i], mean, rtol=1e-9)
        np.testing.assert_allclose(npy(d.variance)[i], var, rtol=1e-8)
        np.testing.assert_allclose(npy(d.entropy())[i], ent, rtol=1e-7, atol=1e-10)
        # inside (0.499, 0.501) the cdf is the uniform one, as PyTorch's (off by < 1e-3 there)
        tol = dict(rtol=1e-9) if abs(pi - 0.5) > 1e-3 else dict(atol=1e-3)
        np.testing.assert_allclose(npy(d.cdf(t64(x)))[i], integrate.quad(pdf, 0, x[i])[0], **tol)
    np.testing.assert_allclose(npy(d.cdf(d.icdf(t64(U[2]).expand(7)))), U[2], rtol=1e-9)
    dl = D.ContinuousBernoulli(logits=t64(special.logit(p)))
    np.testing.assert_allclose(npy(dl.log_prob(t64(x))), npy(d.log_prob(t64(x))), rtol=1e-9)
    fg.manual_seed(33)
    s = npy(d.sample((N,)))
    assert (s >= 0).all() and (s <= 1).all()
    assert (np.abs(s.mean(0) - npy(d.mean)) < 5 * np.sqrt(npy(d.variance) / N)).all()


def test_relaxed_one_hot_categorical():
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    temp = 0.7
    d = D.RelaxedOneHotCategorical(t64(temp), t64(probs))
    assert d.batch_shape == (2,) and d.event_shape == (3,) and d.has_rsample
    fg.manual_seed(34)
    y = d.sample((5,))
    assert y.shape == (5, 2, 3)
    yn = npy(y)
    np.testing.assert_allclose(yn.sum(-1), 1.0, rtol=1e-12)
    # the Concrete density on the simplex, in the K - 1 free coordinates
    k = 3
    want = (
        math.lgamma(k)
        + (k - 1) * math.log(temp)
        + (np.log(probs) - (temp + 1) * np.log(yn)).sum(-1)
        - k * special.logsumexp(np.log(probs) - temp * np.log(yn), axis=-1)
    )
    np.testing.assert_allclose(npy(d.log_prob(y)), want, rtol=1e-10)
    # a cold relaxation picks each category about as often as its probability
    cold = D.RelaxedOneHotCategorical(t64(0.05), logits=t64(np.log(probs)))
    arg = npy(cold.sample((N,))).argmax(-1)
    freq = np.stack([(arg == j).mean(0) for j in range(3)], -1)
    assert (np.abs(freq - probs) < 5 * np.sqrt(probs * (1 - probs) / N)).all()
    e = cold.expand((4, 2))
    assert e.batch_shape == (4, 2) and e.sample().shape == (4, 2, 3)


def test_mixture_same_family():
    w = np.array([[0.3, 0.7], [0.5, 0.5]])
    mu = np.array([[-1.0, 2.0], [0.0, 0.5]])
    sd = np.array([[0.5, 1.5], [1.0, 0.2]])
    mix = D.MixtureSameFamily(D.Categorical(t64(w)), D.Normal(t64(mu), t64(sd)))
    assert mix.batch_shape == (2,) and mix.event_shape == () and not mix.has_rsample
    x = np.array([[0.3, -0.4], [1.8, 0.6]])
    want = special.logsumexp(np.log(w) + stats.norm(mu, sd).logpdf(x[..., None]), axis=-1)
    np.testing.assert_allclose(npy(mix.log_prob(t64(x))), want, rtol=1e-12)
    np.testing.assert_allclose(
        npy(mix.cdf(t64(x))), (w * stats.norm(mu, sd).cdf(x[..., None])).sum(-1), rtol=1e-12
    )
    mean = (w * mu).sum(-1)
    var = (w * (sd**2 + mu**2)).sum(-1) - mean**2
    np.testing.assert_allclose(npy(mix.mean), mean, rtol=1e-12)
    np.testing.assert_allclose(npy(mix.variance), var, rtol=1e-12)
    fg.manual_seed(35)
    s = npy(mix.sample((N,)))
    assert s.shape == (N, 2)
    assert (np.abs(s.mean(0) - mean) < 5 * np.sqrt(var / N)).all()
    assert (
        stats.kstest(s[:, 0], lambda z: (w[0] * stats.norm(mu[0], sd[0]).cdf(z[:, None])).sum(-1)).pvalue
        > 1e-3
    )
    # multivariate components: event shape (2,), a shared mixture broadcast over the batch
    comp = D.Independent(D.Normal(t64(np.zeros((3, 2, 2))), t64(np.ones((3, 2, 2)))), 1)
    mv = D.MixtureSameFamily(D.Categorical(t64([0.4, 0.6])), comp)
    assert mv.batch_shape == (3,) and mv.event_shape == (2,) and mv.sample((4,)).shape == (4, 3, 2)
    assert mv.log_prob(t64(np.zeros((3, 2)))).shape == (3,)
    assert mix.expand((5, 2)).sample().shape == (5, 2)
    with pytest.raises(ValueError, match="mixture_distribution must be a Categorical"):
        D.MixtureSameFamily(D.Normal(t64(0.0), t64(1.0)), D.Normal(t64(mu), t64(sd)))
    with pytest.raises(ValueError, match="3 components"):
        D.MixtureSameFamily(D.Categorical(t64([0.2, 0.3, 0.5])), D.Normal(t64(mu), t64(sd)))


LR_W = np.array([[[0.5, -0.2], [0.1, 0.8], [-0.3, 0.4]], [[1.0, 0.0], [0.2, -0.5], [0.0, 0.3]]])
LR_D = np.array([[0.5, 1.2, 0.8], [0.3, 0.6, 2.0]])
LR_MU = np.array([0.1, -0.4, 0.7])


def test_lowrank_mvn_against_scipy():
    d = D.LowRankMultivariateNormal(t64(LR_MU), t64(LR_W), t64(LR_D))
    assert d.batch_shape == (2,) and d.event_shape == (3,) and d.has_rsample
    x = np.array([[0.3, 0.0, 1.0], [-1.0, 0.5, 0.2]])
    for b in range(2):
        cov = LR_W[b] @ LR_W[b].T + np.diag(LR_D[b])
        ref = stats.multivariate_normal(LR_MU, cov)
        np.testing.assert_allclose(npy(d.log_prob(t64(x)))[b], ref.logpdf(x[b]), rtol=1e-12)
        np.testing.assert_allclose(npy(d.entropy())[b], ref.entropy(), rtol=1e-12)
        np.testing.assert_allclose(npy(d.covariance_matrix)[b], cov, rtol=1e-12)
        np.testing.assert_allclose(npy(d.variance)[b], np.diag(cov), rtol=1e-12)
        np.testing.assert_allclose(npy(d.precision_matrix)[b], np.linalg.inv(cov), rtol=1e-10)
        np.testing.assert_allclose(npy(d.scale_tril)[b], np.linalg.cholesky(cov), rtol=1e-10)
    np.testing.assert_allclose(npy(d.mean), np.broadcast_to(LR_MU, (2, 3)))
    fg.manual_seed(36)
    s = npy(d.rsample((N,)))
    assert s.shape == (N, 2, 3)
    cov1 = LR_W[1] @ LR_W[1].T + np.diag(LR_D[1])
    emp = np.cov(s[:, 1].T)
    assert np.abs(emp - cov1).max() < 6 * np.sqrt((np.diag(cov1)[:, None] * np.diag(cov1)[None]) / N).max()
    assert d.expand((4, 2)).log_prob(t64(x)).shape == (4, 2)


def _seeded(fn, seed):
    def run(*args):
        fg.manual_seed(seed)
        return fn(*args)

    return run


def test_rsample_gradients_by_finite_differences():
    lo, sc = t64([0.2, -0.5], True), t64([0.8, 1.6], True)
    assert gradcheck(_seeded(lambda a, b: D.Cauchy(a, b).rsample((3,)), 1), (lo, sc))
    assert gradcheck(_seeded(lambda a, b: D.Gumbel(a, b).rsample((3,)), 2), (lo, sc))
    assert gradcheck(_seeded(lambda b: D.HalfNormal(b).rsample((3,)), 3), (sc,))
    assert gradcheck(_seeded(lambda b: D.HalfCauchy(b).rsample((3,)), 4), (sc,))
    assert gradcheck(_seeded(lambda b, c: D.Weibull(b, c).rsample((3,)), 5), (sc, t64([0.9, 2.5], True)))
    assert gradcheck(_seeded(lambda b, c: D.Pareto(b, c).rsample((3,)), 6), (sc, t64([1.5, 3.0], True)))
    assert gradcheck(
        _seeded(lambda a, b: D.Kumaraswamy(a, b).rsample((3,)), 7),
        (t64([1.5, 0.8], True), t64([2.0, 3.0], True)),
    )
    assert gradcheck(_seeded(lambda a, b: D.StudentT(4.0, a, b).rsample((3,)), 8), (lo, sc))
    assert gradcheck(_seeded(lambda p: D.ContinuousBernoulli(p).rsample((3,)), 9), (t64([0.2, 0.7], True),))
    assert gradcheck(
        _seeded(lambda lg: D.RelaxedOneHotCategorical(0.6, logits=lg).rsample((2,)), 10),
        (t64([[0.1, -0.4, 0.9]], True),),
    )
    assert gradcheck(
        _seeded(lambda m, w, dd: D.LowRankMultivariateNormal(m, w, dd).rsample((2,)), 11),
        (t64(LR_MU, True), t64(LR_W[0], True), t64(LR_D[0], True)),
    )
    # reparameterised in df: the gamma draws' implicit gradient (values fixed by the seed)
    df = t64([3.0, 6.0], True)
    x = _seeded(lambda v: D.Chi2(v).rsample((2000,)), 12)(df)
    x.mean(0).sum().backward()
    np.testing.assert_allclose(npy(df.grad), [1.0, 1.0], atol=0.15)  # d E[x] / d df = 1
    for d in (D.VonMises(t64(0.0), t64(1.0)), D.Geometric(t64(0.3)), D.NegativeBinomial(t64(2.0), t64(0.3))):
        assert not d.has_rsample
        with pytest.raises(NotImplementedError, match="rsample"):
            d.rsample()
    assert not D.MixtureSameFamily(
        D.Categorical(t64([0.5, 0.5])), D.Normal(t64([0.0, 1.0]), t64(1.0))
    ).has_rsample


def test_log_prob_gradients():
    assert gradcheck(
        lambda v, a, b: D.StudentT(v, a, b).log_prob(t64(XR[:2])),
        (t64([2.5, 5.0], True), t64(L3[:2], True), t64(B3[:2], True)),
    )
    assert gradcheck(
        lambda a, b: D.FisherSnedecor(a, b).log_prob(t64(X[:2])),
        (t64([3.0, 5.0], True), t64([4.0, 7.0], True)),
    )
    assert gradcheck(
        lambda p: D.ContinuousBernoulli(p).log_prob(t64([0.2, 0.9, 0.4])), (t64([0.1, 0.4999, 0.8], True),)
    )
    assert gradcheck(
        lambda p: D.NegativeBinomial(t64(2.5), p).log_prob(t64([0.0, 3.0])), (t64([0.2, 0.7], True),)
    )
    assert gradcheck(lambda p: D.Geometric(p).entropy(), (t64([0.2, 0.7], True),))
    assert gradcheck(
        lambda w, dd: D.LowRankMultivariateNormal(t64(LR_MU), w, dd).log_prob(t64([0.3, 0.0, 1.0])),
        (t64(LR_W[0], True), t64(LR_D[0], True)),
    )  # fmt: skip


def test_continuous_sample_moments_and_ks():
    fg.manual_seed(37)
    cases = [
        (D.StudentT(t64(5.0), t64(0.3), t64(1.2)), stats.t(5.0, 0.3, 1.2)),
        (D.Cauchy(t64(0.3), t64(1.2)), stats.cauchy(0.3, 1.2)),
        (D.HalfCauchy(t64(1.2)), stats.halfcauchy(scale=1.2)),
        (D.HalfNormal(t64(1.2)), stats.halfnorm(scale=1.2)),
        (D.Gumbel(t64(0.3), t64(1.2)), stats.gumbel_r(0.3, 1.2)),
        (D.Chi2(t64(3.0)), stats.chi2(3.0)),
        (D.Weibull(t64(1.2), t64(1.7)), stats.weibull_min(1.7, scale=1.2)),
        (D.Pareto(t64(0.5), t64(3.5)), stats.pareto(3.5, scale=0.5)),
        (D.FisherSnedecor(t64(4.0), t64(9.0)), stats.f(4.0, 9.0)),
    ]
    for d, ref in cases:
        s = npy(d.sample((N,)))
        assert s.shape == (N,)
        assert stats.kstest(s, ref.cdf).pvalue > 1e-3, type(d).__name__
    a, b = 1.5, 2.5
    s = npy(D.Kumaraswamy(t64(a), t64(b)).sample((N,)))
    assert stats.kstest(s, lambda x: 1 - (1 - x**a) ** b).pvalue > 1e-3


def test_kl_closed_forms_against_quadrature():
    def quad_kl(p_ref, q_ref, lo, hi, points=None):
        f = lambda x: p_ref.pdf(x) * (p_ref.logpdf(x) - q_ref.logpdf(x)) if p_ref.pdf(x) > 0 else 0.0  # noqa: E731
        return integrate.quad(f, lo, hi, points=points, limit=400)[0]

    kl = D.kl_divergence
    got = npy(kl(D.Cauchy(t64(0.3), t64(0.8)), D.Cauchy(t64(-1.0), t64(2.0))))
    np.testing.assert_allclose(
        got, quad_kl(stats.cauchy(0.3, 0.8), stats.cauchy(-1.0, 2.0), -np.inf, np.inf), rtol=1e-7
    )
    got = npy(kl(D.Gumbel(t64(0.3), t64(0.8)), D.Gumbel(t64(-0.5), t64(1.3))))
    np.testing.assert_allclose(
        got, quad_kl(stats.gumbel_r(0.3, 0.8), stats.gumbel_r(-0.5, 1.3), -20, 60), rtol=1e-8
    )
    got = npy(kl(D.HalfNormal(t64(0.7)), D.HalfNormal(t64(1.9))))
    np.testing.assert_allclose(
        got, quad_kl(stats.halfnorm(scale=0.7), stats.halfnorm(scale=1.9), 0, 30), rtol=1e-9
    )
    got = npy(kl(D.Pareto(t64(1.0), t64(2.5)), D.Pareto(t64(0.5), t64(1.5))))
    np.testing.assert_allclose(
        got, quad_kl(stats.pareto(2.5, scale=1.0), stats.pareto(1.5, scale=0.5), 1.0, np.inf), rtol=1e-8
    )
    assert np.isinf(npy(kl(D.Pareto(t64(0.5), t64(2.5)), D.Pareto(t64(1.0), t64(1.5)))))
    got = npy(kl(D.Exponential(t64(1.3)), D.Gamma(t64(2.5), t64(0.7))))
    np.testing.assert_allclose(
        got, quad_kl(stats.expon(scale=1 / 1.3), stats.gamma(2.5, scale=1 / 0.7), 0, 60), rtol=1e-8
    )
    got = npy(kl(D.Gamma(t64(2.5), t64(0.7)), D.Exponential(t64(1.3))))
    np.testing.assert_allclose(
        got, quad_kl(stats.gamma(2.5, scale=1 / 0.7), stats.expon(scale=1 / 1.3), 0, 120), rtol=1e-8
    )
    got = npy(kl(D.Laplace(t64(0.3), t64(0.8)), D.Normal(t64(-0.5), t64(1.4))))
    np.testing.assert_allclose(
        got, quad_kl(stats.laplace(0.3, 0.8), stats.norm(-0.5, 1.4), -40, 40, [0.3]), rtol=1e-8
    )
    got = npy(kl(D.Normal(t64(0.3), t64(0.8)), D.Laplace(t64(-0.5), t64(1.4))))
    np.testing.assert_allclose(
        got, quad_kl(stats.norm(0.3, 0.8), stats.laplace(-0.5, 1.4), -40, 40, [-0.5]), rtol=1e-8
    )
    p, q = np.array([0.2, 0.7]), np.array([0.5, 0.1])
    k = np.arange(2000)[:, None]
    want = (
        stats.geom(p, loc=-1).pmf(k) * (stats.geom(p, loc=-1).logpmf(k) - stats.geom(q, loc=-1).logpmf(k))
    ).sum(0)
    np.testing.assert_allclose(npy(kl(D.Geometric(t64(p)), D.Geometric(t64(q)))), want, rtol=1e-10)
    for pa, qa in ((0.3, 0.8), (0.4999, 0.2), (0.6, 0.5)):
        _, _, _, _, pp = _cb_np(pa)
        _, _, _, _, qq = _cb_np(qa)
        want = integrate.quad(lambda x, pp=pp, qq=qq: pp(x) * np.log(pp(x) / qq(x)), 0, 1)[0]
        got = npy(kl(D.ContinuousBernoulli(t64(pa)), D.ContinuousBernoulli(t64(qa))))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)


def _np_gauss_kl(m1, s1, m2, s2):
    n = len(m1)
    s2i = np.linalg.inv(s2)
    d = m2 - m1
    return 0.5 * (np.trace(s2i @ s1) + d @ s2i @ d - n + np.log(np.linalg.det(s2) / np.linalg.det(s1)))


def test_kl_lowrank_mvn_pairs_against_numpy():
    lr = D.LowRankMultivariateNormal(t64(LR_MU), t64(LR_W), t64(LR_D))
    lr2 = D.LowRankMultivariateNormal(t64(LR_MU[::-1]), t64(LR_W[::-1] * 0.5), t64(LR_D[::-1]))
    tril = np.array([[1.0, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.2, 0.1, 1.5]])
    mvn = D.MultivariateNormal(t64([0.0, 0.5, -0.5]), scale_tril=t64(tril))
    covs = [LR_W[b] @ LR_W[b].T + np.diag(LR_D[b]) for b in range(2)]
    covs2 = [LR_W[::-1][b] @ LR_W[::-1][b].T * 0.25 + np.diag(LR_D[::-1][b]) for b in range(2)]
    cm = tril @ tril.T
    mm = np.array([0.0, 0.5, -0.5])
    want = [_np_gauss_kl(LR_MU, covs[b], LR_MU[::-1], covs2[b]) for b in range(2)]
    np.testing.assert_allclose(npy(D.kl_divergence(lr, lr2)), want, rtol=1e-10)
    want = [_np_gauss_kl(LR_MU, covs[b], mm, cm) for b in range(2)]
    np.testing.assert_allclose(npy(D.kl_divergence(lr, mvn)), want, rtol=1e-10)
    want = [_np_gauss_kl(mm, cm, LR_MU, covs[b]) for b in range(2)]
    np.testing.assert_allclose(npy(D.kl_divergence(mvn, lr)), want, rtol=1e-10)


def test_kl_unregistered_pair_raises():
    with pytest.raises(
        NotImplementedError,
        match=r"No KL\(p \|\| q\) is implemented for p of type Cauchy and q of type Normal",
    ):
        D.kl_divergence(D.Cauchy(t64(0.0), t64(1.0)), D.Normal(t64(0.0), t64(1.0)))
    with pytest.raises(NotImplementedError, match="VonMises"):
        D.kl_divergence(D.VonMises(t64(0.0), t64(1.0)), D.VonMises(t64(0.0), t64(2.0)))


@pytest.mark.parametrize(
    "make,param",
    [
        (lambda: D.StudentT(t64(-1.0)), "df"),
        (lambda: D.StudentT(t64(2.0), t64(0.0), t64(0.0)), "scale"),
        (lambda: D.Cauchy(t64(0.0), t64(-1.0)), "scale"),
        (lambda: D.HalfCauchy(t64(0.0)), "scale"),
        (lambda: D.HalfNormal(t64(-2.0)), "scale"),
        (lambda: D.Gumbel(t64(math.nan), t64(1.0)), "loc"),
        (lambda: D.Chi2(t64(0.0)), "df"),
        (lambda: D.Geometric(t64(1.5)), "probs"),
        (lambda: D.Weibull(t64(1.0), t64(-1.0)), "concentration"),
        (lambda: D.Pareto(t64(-1.0), t64(1.0)), "scale"),
        (lambda: D.VonMises(t64(0.0), t64(-1.0)), "concentration"),
        (lambda: D.ContinuousBernoulli(t64(1.5)), "probs"),
        (lambda: D.RelaxedOneHotCategorical(t64(0.5), t64([-0.5, 1.5])), "probs"),
        (lambda: D.NegativeBinomial(t64(-1.0), t64(0.5)), "total_count"),
        (lambda: D.NegativeBinomial(t64(2.0), t64(1.0)), "probs"),
        (
            lambda: D.LowRankMultivariateNormal(t64([0.0, 0.0]), t64([[1.0], [0.0]]), t64([1.0, -1.0])),
            "cov_diag",
        ),
        (lambda: D.FisherSnedecor(t64(1.0), t64(0.0)), "df2"),
        (lambda: D.Kumaraswamy(t64(0.0), t64(1.0)), "concentration1"),
    ],
)
def test_validate_args_names_distribution_and_argument(make, param):
    with pytest.raises(ValueError, match=f"parameter {param} ") as exc:
        make()
    assert "distribution" in str(exc.value)


def test_support_validation_and_shapes():
    with pytest.raises(ValueError, match="support"):
        D.HalfNormal(t64(1.0)).log_prob(t64(-0.5))
    with pytest.raises(ValueError, match="support"):
        D.Pareto(t64(1.0), t64(2.0)).log_prob(t64(0.5))
    with pytest.raises(ValueError, match="support"):
        D.Geometric(t64(0.4)).log_prob(t64(1.5))
    with pytest.raises(ValueError, match="support"):
        D.Kumaraswamy(t64(1.0), t64(2.0)).log_prob(t64(1.5))
    with pytest.raises(ValueError, match="support"):
        D.RelaxedOneHotCategorical(t64(0.5), t64([0.5, 0.5])).log_prob(t64([0.9, 0.9]))
    assert np.isneginf(npy(D.HalfNormal(t64(1.0), validate_args=False).log_prob(t64(-0.5))))
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.Geometric()
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.NegativeBinomial(3.0, probs=t64(0.5), logits=t64(0.0))
    with pytest.raises(ValueError, match="cov_factor of shape"):
        D.LowRankMultivariateNormal(t64([0.0, 0.0]), t64([[1.0], [0.0], [2.0]]), t64([1.0, 1.0]))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        D.StudentT(t64([1.0, 2.0]), t64([0.0, 1.0, 2.0]))
    # parameters broadcast; expand gives the same law on a bigger batch; samples have the extended shape
    made = [
        D.StudentT(t64([2.0, 3.0]), 0.0, t64([[1.0], [2.0]])),
        D.Cauchy(0.0, t64([[1.0, 2.0]] * 2)),
        D.HalfCauchy(t64([[1.0, 2.0]] * 2)),
        D.HalfNormal(t64([[1.0, 2.0]] * 2)),
        D.Gumbel(t64([0.0, 1.0]), t64([[1.0], [2.0]])),
        D.Chi2(t64([[1.0, 2.0]] * 2)),
        D.Geometric(t64([[0.2, 0.5]] * 2)),
        D.Weibull(t64([1.0, 2.0]), t64([[1.0], [2.0]])),
        D.Pareto(t64([1.0, 2.0]), t64([[1.0], [2.0]])),
        D.VonMises(t64([0.0, 1.0]), t64([[1.0], [2.0]])),
        D.ContinuousBernoulli(t64([[0.2, 0.5]] * 2)),
        D.NegativeBinomial(t64([1.0, 2.0]), t64([[0.1], [0.2]])),
        D.FisherSnedecor(t64([1.0, 2.0]), t64([[1.0], [2.0]])),
        D.Kumaraswamy(t64([1.0, 2.0]), t64([[1.0], [2.0]])),
    ]
    for d in made:
        name = type(d).__name__
        assert d.batch_shape == (2, 2), name
        assert d.sample((3,)).shape == (3, 2, 2), name
        e = d.expand((4, 2, 2))
        assert type(e) is type(d) and e.batch_shape == (4, 2, 2), name
        v = d.sample()
        np.testing.assert_allclose(
            npy(e.log_prob(v)), np.broadcast_to(npy(d.log_prob(v)), (4, 2, 2)), rtol=1e-12
        )
        assert e.sample().shape == (4, 2, 2), name
        assert isinstance(d.arg_constraints, dict) and d.support is not None


class _CB:
    """The continuous Bernoulli density for quadrature (SciPy has none)."""

    def __init__(self, p):
        self.c = 2 * np.arctanh(1 - 2 * p) / (1 - 2 * p)
        self.p = p

    def logpdf(self, x):
        return np.log(self.c) + x * np.log(self.p) + (1 - x) * np.log1p(-self.p)

    def pdf(self, x):
        return np.exp(self.logpdf(x))


_CROSS = {
    "Beta": (lambda: D.Beta(t64(2.0), t64(3.0)), stats.beta(2.0, 3.0), (0, 1)),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(t64(0.3)), _CB(0.3), (0, 1)),
    "Exponential": (lambda: D.Exponential(t64(1.3)), stats.expon(scale=1 / 1.3), (0, np.inf)),
    "Gamma": (lambda: D.Gamma(t64(2.5), t64(0.7)), stats.gamma(2.5, scale=1 / 0.7), (0, np.inf)),
    "Gumbel": (lambda: D.Gumbel(t64(0.3), t64(0.8)), stats.gumbel_r(0.3, 0.8), (-15, 60)),
    "Pareto": (lambda: D.Pareto(t64(1.0), t64(3.5)), stats.pareto(3.5, scale=1.0), (1.0, np.inf)),
    "Uniform": (lambda: D.Uniform(t64(0.1), t64(0.9)), stats.uniform(0.1, 0.8), (0.1, 0.9)),
    "Normal": (lambda: D.Normal(t64(-0.5), t64(1.4)), stats.norm(-0.5, 1.4), (-40, 40)),
}
_Q = {
    "Normal": (lambda: D.Normal(t64(0.4), t64(1.7)), stats.norm(0.4, 1.7)),
    "Exponential": (lambda: D.Exponential(t64(0.6)), stats.expon(scale=1 / 0.6)),
    "Gamma": (lambda: D.Gamma(t64(1.5), t64(0.9)), stats.gamma(1.5, scale=1 / 0.9)),
    "Gumbel": (lambda: D.Gumbel(t64(-0.2), t64(1.5)), stats.gumbel_r(-0.2, 1.5)),
    "Uniform": (lambda: D.Uniform(t64(-0.5), t64(1.5)), stats.uniform(-0.5, 2.0)),
    "Beta": (lambda: D.Beta(t64(1.5), t64(2.5)), stats.beta(1.5, 2.5)),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(t64(0.8)), _CB(0.8)),
    "Pareto": (lambda: D.Pareto(t64(0.05), t64(2.0)), stats.pareto(2.0, scale=0.05)),
}
CROSS_FINITE = [
    (p, q)
    for q, ps in (
        ("Normal", ("Beta", "ContinuousBernoulli", "Exponential", "Gamma", "Gumbel", "Pareto", "Uniform")),
        ("Exponential", ("Beta", "ContinuousBernoulli", "Pareto", "Uniform")),
        ("Gamma", ("Beta", "Pareto", "Uniform")),
        ("Gumbel", ("Exponential", "Gamma", "Normal", "Uniform")),
        ("Uniform", ("Beta", "ContinuousBernoulli")),
        ("Beta", ("Uniform",)),
        ("ContinuousBernoulli", ("Beta", "Uniform")),
        ("Pareto", ("Uniform",)),
    )
    for p in ps
]


@pytest.mark.parametrize("p_name,q_name", CROSS_FINITE, ids=[f"{p}-{q}" for p, q in CROSS_FINITE])
def test_kl_cross_family_against_quadrature(p_name, q_name):
    make_p, p_ref, (lo, hi) = _CROSS[p_name]
    make_q, q_ref = _Q[q_name]
    got = npy(D.kl_divergence(make_p(), make_q()))

    def integrand(x):
        px = p_ref.pdf(x)
        return px * (p_ref.logpdf(x) - q_ref.logpdf(x)) if px > 0 else 0.0

    want = integrate.quad(integrand, lo, hi, limit=400)[0]
    np.testing.assert_allclose(got, want, rtol=1e-7)


def test_kl_cross_family_infinite_and_discrete():
    kl = D.kl_divergence
    # p puts mass outside q's support
    for p, q in (
        (D.Normal(t64([0.0, 1.0]), t64(1.0)), D.Exponential(t64(1.0))),
        (D.Gumbel(t64(0.0), t64(1.0)), D.Beta(t64(2.0), t64(2.0))),
        (D.Exponential(t64(1.0)), D.Pareto(t64(1.0), t64(2.0))),
        (D.Laplace(t64(0.0), t64(1.0)), D.Uniform(t64(-1.0), t64(1.0))),
        (D.Poisson(t64(2.0)), D.Binomial(5, t64(0.3))),
    ):
        assert np.isposinf(npy(kl(p, q))).all(), (type(p).__name__, type(q).__name__)
    assert npy(kl(D.Normal(t64([0.0, 1.0]), t64(1.0)), D.Exponential(t64(1.0)))).shape == (2,)
    u = D.Uniform(t64([-0.5, 0.2]), t64([0.5, 0.8]))
    out = npy(kl(u, D.Beta(t64(2.0), t64(2.0))))
    assert np.isposinf(out[0]) and np.isfinite(out[1])
    # Bernoulli against Poisson: a two-term sum
    pb, r = np.array([0.3, 0.8]), np.array([1.3, 0.4])
    pmf = np.stack([1 - pb, pb])
    want = (pmf * (np.log(pmf) - stats.poisson(r).logpmf(np.array([[0], [1]])))).sum(0)
    np.testing.assert_allclose(npy(kl(D.Bernoulli(t64(pb)), D.Poisson(t64(r)))), want, rtol=1e-12)


def test_lkj_cholesky_density_and_sampler():
    eta = np.array([0.5, 1.0, 2.5])
    # dim 2: L = [[1, 0], [r, sqrt(1 - r^2)]] and r is Beta(eta, eta) on (-1, 1)
    r = np.array([0.3, -0.7, 0.05])
    lmat = np.zeros((3, 2, 2))
    lmat[:, 0, 0], lmat[:, 1, 0], lmat[:, 1, 1] = 1.0, r, np.sqrt(1 - r**2)
    d2 = D.LKJCholesky(2, t64(eta))
    assert d2.batch_shape == (3,) and d2.event_shape == (2, 2) and not d2.has_rsample
    want = stats.beta(eta, eta).logpdf((r + 1) / 2) - math.log(2)
    np.testing.assert_allclose(npy(d2.log_prob(t64(lmat))), want, rtol=1e-12)
    # dim 3: the density integrates to 1 over the strictly-lower entries (a; b, c), b^2 + c^2 < 1
    d3 = D.LKJCholesky(3, t64(1.7))
    rng = np.random.default_rng(7)
    m = 100000
    abc = rng.uniform(-1, 1, size=(m, 3))
    inside = abc[:, 1] ** 2 + abc[:, 2] ** 2 < 1
    abc = abc[inside]
    lm = np.zeros((len(abc), 3, 3))
    lm[:, 0, 0] = 1
    lm[:, 1, 0], lm[:, 1, 1] = abc[:, 0], np.sqrt(1 - abc[:, 0] ** 2)
    lm[:, 2, 0], lm[:, 2, 1], lm[:, 2, 2] = abc[:, 1], abc[:, 2], np.sqrt(1 - abc[:, 1] ** 2 - abc[:, 2] ** 2)
    dens = np.exp(npy(D.LKJCholesky(3, t64(1.7), validate_args=False).log_prob(t64(lm)))) * inside.mean() * 8
    assert abs(dens.mean() - 1) < 5 * dens.std() / math.sqrt(len(dens))
    # the sampler: factors of correlation matrices whose off-diagonal entries have the
    # LKJ marginal, Beta(eta - 1 + dim / 2, same) on (-1, 1)
    fg.manual_seed(38)
    s = d3.sample((4000,))
    assert s.shape == (4000, 3, 3) and bool(D.constraints.corr_cholesky.check(s).all())
    sn = npy(s)
    corr = sn @ np.swapaxes(sn, -1, -2)
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, rtol=1e-12)
    marginal = stats.beta(1.7 - 1 + 1.5, 1.7 - 1 + 1.5)
    for i, j in ((1, 0), (2, 0), (2, 1)):
        assert stats.kstest((corr[:, i, j] + 1) / 2, marginal.cdf).pvalue > 1e-3
    assert D.LKJCholesky(4, 2.0).expand((2, 3)).sample().shape == (2, 3, 4, 4)
    with pytest.raises(ValueError, match="dim"):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="parameter concentration "):
        D.LKJCholesky(3, t64(-1.0))
    with pytest.raises(ValueError, match="support"):
        d3.log_prob(t64(np.eye(3) * 2))


def _extra_laws(T):
    return [
        D.StudentT(T([3.0, 5.0]), T([0.1, 0.2]), T([1.0, 2.0])),
        D.Cauchy(T([0.0, 1.0]), T([1.0, 2.0])),
        D.HalfNormal(T([1.0, 2.0])),
        D.HalfCauchy(T([1.0, 2.0])),
        D.Gumbel(T([0.0, 1.0]), T([1.0, 2.0])),
        D.Chi2(T([2.0, 3.0])),
        D.Geometric(T([0.3, 0.6])),
        D.Weibull(T([1.0, 2.0]), T([1.5, 2.0])),
        D.Pareto(T([1.0, 2.0]), T([2.0, 3.0])),
        D.VonMises(T([0.0, 1.0]), T([1.0, 2.0])),
        D.ContinuousBernoulli(T([0.3, 0.8])),
        D.RelaxedOneHotCategorical(T(0.5), T([0.3, 0.7])),
        D.NegativeBinomial(T([2.0, 3.0]), T([0.3, 0.6])),
        D.MixtureSameFamily(D.Categorical(T([0.3, 0.7])), D.Normal(T([0.0, 1.0]), T([1.0, 1.0]))),
        D.LowRankMultivariateNormal(T([0.0, 0.0]), T([[1.0], [0.5]]), T([1.0, 2.0])),
        D.FisherSnedecor(T([3.0, 4.0]), T([5.0, 6.0])),
        D.Kumaraswamy(T([2.0, 3.0]), T([1.5, 2.0])),
        D.LKJCholesky(3, T([1.5, 2.0])),
    ]


def test_gpu_extra_distributions_match_cpu():
    if not fg.gpu.is_available():
        reason = f"no WebGPU adapter: {fg.gpu.unavailable_reason()}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    fg.manual_seed(39)
    cpu = _extra_laws(lambda a: fg.tensor(a))
    gpu = _extra_laws(lambda a: fg.tensor(a, device="gpu"))
    for c, g in zip(cpu, gpu, strict=True):
        name = type(c).__name__
        x = c.sample((3,))
        lg = g.log_prob(x.to("gpu"))
        assert str(lg.device) == "gpu", name
        np.testing.assert_allclose(npy(lg), npy(c.log_prob(x)), rtol=2e-5, atol=2e-5, err_msg=name)
        s = g.sample((3,))
        assert str(s.device) == "gpu" and tuple(s.shape) == tuple(x.shape), name
        assert s.dtype == fg.float32, name


def test_compiled_log_prob_matches_eager():
    def f(x, a, s):
        out = D.StudentT(a, 0.0, s).log_prob(x) + D.Gumbel(x, s).entropy() + D.VonMises(0.0, a).log_prob(x)
        out = out + D.Kumaraswamy(a, s).log_prob(x.sigmoid()) + D.ContinuousBernoulli(logits=x).entropy()
        return out + D.LowRankMultivariateNormal(x, s.reshape(2, 1), s).log_prob(0.5 * x)

    g = fg.compile(f)
    a, s = t64([3.0, 5.0]), t64([1.0, 2.0])
    for x in (t64([0.3, 1.2]), t64([-0.7, 2.5])):
        np.testing.assert_allclose(npy(g(x, a, s)), npy(f(x, a, s)), rtol=1e-12)


# made by scripts/make_distribution_references.py (records the PyTorch version)
REF = Path(__file__).parent / "fixtures" / "parity" / "distributions_extra.npz"


def _from_kwargs(cls, kwargs):
    return getattr(D, cls)(**{k: (v if k == "dim" else t64(v)) for k, v in kwargs.items()})


def test_values_match_stored_pytorch_references():
    ref = np.load(REF)
    assert str(ref["torch_version"]).startswith("2.")
    cases = sorted({k.split("/")[0] for k in ref.files if k.endswith("/dist")})
    assert len(cases) >= 20
    checked = 0
    for case in cases:
        d = _from_kwargs(str(ref[f"{case}/dist"]), json.loads(str(ref[f"{case}/kwargs"])))
        value, q = t64(ref[f"{case}/value"]), t64(ref[f"{case}/q"])
        # PyTorch's VonMises uses a polynomial Bessel approximation (about 1e-8 relative)
        tol = dict(rtol=1e-7, atol=1e-7) if case == "vonmises" else dict(rtol=1e-9, atol=1e-12)
        for name, get in (
            ("log_prob", lambda d=d, v=value: d.log_prob(v)),
            ("cdf", lambda d=d, v=value: d.cdf(v)),
            ("icdf", lambda d=d, q=q: d.icdf(q)),
            ("entropy", lambda d=d: d.entropy()),
            ("mean", lambda d=d: d.mean),
            ("variance", lambda d=d: d.variance),
            ("mode", lambda d=d: d.mode),
        ):
            key = f"{case}/{name}"
            if key in ref.files:
                np.testing.assert_allclose(npy(get()), ref[key], equal_nan=True, err_msg=key, **tol)
                checked += 1
    for key in ref.files:
        if key.startswith("kl/") and not key.endswith("/kwargs"):
            _, p, q = key.split("/")
            pk, qk = json.loads(str(ref[key + "/kwargs"]))
            got = npy(D.kl_divergence(_from_kwargs(p, pk), _from_kwargs(q, qk)))
            np.testing.assert_allclose(got, ref[key], rtol=1e-9, err_msg=key)
            checked += 1
    assert checked > 100
