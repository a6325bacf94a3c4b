"""Probability distributions and KL divergences, as ``torch.distributions``.

``Normal``, ``Uniform``, ``Bernoulli``, ``Categorical``,
``MultivariateNormal`` (``scale_tril`` parameterisation), ``Gamma``,
``Beta``, ``Dirichlet``, ``Poisson``, ``Exponential``, ``Laplace``, ``Binomial``,
``OneHotCategorical``, ``Independent`` and ``TransformedDistribution`` (with
``transforms``: ``LogNormal``, ``RelaxedBernoulli``), ``StudentT``, ``Cauchy``,
``HalfCauchy``, ``HalfNormal``, ``Gumbel``, ``Chi2``, ``Geometric``, ``Weibull``,
``Pareto``, ``VonMises``, ``ContinuousBernoulli``, ``RelaxedOneHotCategorical``,
``NegativeBinomial``, ``MixtureSameFamily``, ``LowRankMultivariateNormal``,
``FisherSnedecor``, ``Kumaraswamy`` and ``LKJCholesky``, with
``sample``/``rsample`` (reparameterised where PyTorch's is), ``log_prob``,
``entropy``, ``mean``/``mode``/``variance``/``stddev``,
``batch_shape``/``event_shape`` and argument validation;
``kl_divergence`` with closed forms for the pairs PyTorch registers (but its generic
exponential-family one), extensible with
``register_kl``. Samples come from ferrograd's default generator
(``ferrograd.manual_seed`` makes them reproducible); gradients flow through
``rsample``, ``log_prob`` and ``entropy``, all composed of tensor ops
(``lgamma``/``digamma`` included, see ``_special``). The gamma family and
the Poisson distribution draw on the CPU in float64 and convert.
"""

from . import _kl_cross as _kl_cross  # noqa: F401 - registers the cross-family KLs
from . import _kl_extra as _kl_extra  # noqa: F401 - registers the extended set's KLs
from . import _kl_more as _kl_more  # noqa: F401 - registers more closed-form KLs
from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy, HalfCauchy
from .chi2 import Chi2
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from .relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
)
from .uniform import Uniform
from .von_mises import VonMises
from .weibull import Weibull

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ComposeTransform",
    "ContinuousBernoulli",
    "Dirichlet",
    "Distribution",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Exponential",
    "FisherSnedecor",
    "Gamma",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "Kumaraswamy",
    "LKJCholesky",
    "Laplace",
    "LogNormal",
    "LogitRelaxedBernoulli",
    "LowRankMultivariateNormal",
    "MixtureSameFamily",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "Pareto",
    "Poisson",
    "PowerTransform",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "SigmoidTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "VonMises",
    "Weibull",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transforms",
]
