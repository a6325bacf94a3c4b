"""Probability distributions and KL divergences, as ``torch.distributions``.

``Normal``, ``Uniform``, ``Bernoulli``, ``Categorical``,
``MultivariateNormal`` (``scale_tril`` parameterisation), ``Gamma``,
``Beta``, ``Dirichlet``, ``Poisson``, ``Exponential``, ``Laplace``, ``Binomial``,
``OneHotCategorical``, ``Independent`` and ``TransformedDistribution`` (with
``transforms``: ``LogNormal``, ``RelaxedBernoulli``), with
``sample``/``rsample`` (reparameterised where PyTorch's is), ``log_prob``,
``entropy``, ``mean``/``mode``/``variance``/``stddev``,
``batch_shape``/``event_shape`` and argument validation;
``kl_divergence`` with closed forms for the common pairs, extensible with
``register_kl``. Samples come from ferrograd's default generator
(``ferrograd.manual_seed`` makes them reproducible); gradients flow through
``rsample``, ``log_prob`` and ``entropy``, all composed of tensor ops
(``lgamma``/``digamma`` included, see ``_special``). The gamma family and
the Poisson distribution draw on the CPU in float64 and convert.
"""

from . import _kl_more as _kl_more  # noqa: F401 - registers more closed-form KLs
from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
)
from .uniform import Uniform

__all__ = [
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "ComposeTransform",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "Gamma",
    "Independent",
    "Laplace",
    "LogNormal",
    "LogitRelaxedBernoulli",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "RelaxedBernoulli",
    "SigmoidTransform",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transforms",
]
