"""Probability distributions and KL divergences, as ``torch.distributions``.

``Normal``, ``Uniform``, ``Bernoulli``, ``Categorical``,
``MultivariateNormal`` (``scale_tril`` parameterisation), ``Gamma``,
``Beta``, ``Dirichlet``, ``Poisson`` and ``Independent``, with
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

from . import constraints
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .poisson import Poisson
from .uniform import Uniform

__all__ = [
    "Bernoulli",
    "Beta",
    "Categorical",
    "Dirichlet",
    "Distribution",
    "Gamma",
    "Independent",
    "MultivariateNormal",
    "Normal",
    "Poisson",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
]
