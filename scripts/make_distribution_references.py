"""Write PyTorch references for the distributions of ``tests/test_distributions_extra.py`` to
``tests/fixtures/parity/distributions_extra.npz``.

The stored file was made with PyTorch 2.15 on CPU, in float64; it records the version it was
made with (``torch_version``). The test reads it and runs in CI without PyTorch. This script
needs only ``torch`` and ``numpy``::

    python scripts/make_distribution_references.py

Each case builds one distribution from its JSON keyword arguments (``<case>/kwargs``, lists
become float64 tensors; ``<case>/dist`` names the class) and stores, where PyTorch has them,
``log_prob`` at ``<case>/value``, ``cdf`` at the same value, ``icdf`` at ``<case>/q``,
``entropy``, ``mean``, ``variance`` and ``mode`` (``<case>/<method>``). Cases listed in
``NO_MODE`` leave out ``mode``, whose PyTorch formula differs from the law's there (see the
Weibull and Kumaraswamy docstrings). ``kl/<p>/<q>`` holds ``kl_divergence`` for the pairs of
``KL`` (each side built from its kwargs).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import distributions as D

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "distributions_extra.npz"

Q = [0.1, 0.5, 0.93]

# (case, class, kwargs, value)
CASES: list[tuple[str, str, dict, list]] = [
    ("studentt", "StudentT", {"df": [2.5, 4.0, 7.0], "loc": [0.1, -0.2, 0.3], "scale": [1.0, 2.0, 0.5]}, [-1.7, 0.4, 2.5]),
    ("cauchy", "Cauchy", {"loc": [0.1, -0.2, 0.3], "scale": [1.0, 2.0, 0.5]}, [-1.7, 0.4, 2.5]),
    ("halfcauchy", "HalfCauchy", {"scale": [1.0, 2.0, 0.5]}, [0.3, 1.2, 2.5]),
    ("halfnormal", "HalfNormal", {"scale": [1.0, 2.0, 0.5]}, [0.3, 1.2, 2.5]),
    ("gumbel", "Gumbel", {"loc": [0.1, -0.2, 0.3], "scale": [1.0, 2.0, 0.5]}, [-1.7, 0.4, 2.5]),
    ("chi2", "Chi2", {"df": [1.5, 3.0, 5.0]}, [0.3, 1.2, 2.5]),
    ("geometric", "Geometric", {"probs": [0.2, 0.5, 0.9]}, [0.0, 1.0, 4.0]),
    ("geometric_logits", "Geometric", {"logits": [-1.0, 0.5, 2.0]}, [0.0, 3.0, 1.0]),
    ("weibull", "Weibull", {"scale": [1.0, 2.0, 0.5], "concentration": [1.2, 1.5, 3.0]}, [0.3, 1.2, 2.5]),
    ("weibull_small_k", "Weibull", {"scale": [1.0, 2.0, 1.5], "concentration": [0.5, 0.8, 0.95]}, [0.3, 1.2, 0.7]),
    ("pareto", "Pareto", {"scale": [0.2, 0.5, 1.0], "alpha": [2.5, 3.5, 4.5]}, [0.3, 1.2, 2.5]),
    ("fisher", "FisherSnedecor", {"df1": [3.0, 5.0, 8.0], "df2": [5.0, 7.0, 12.0]}, [0.3, 1.2, 2.5]),
    ("kumaraswamy", "Kumaraswamy", {"concentration1": [2.0, 0.5, 3.0], "concentration0": [3.0, 2.0, 1.5]},
     [0.2, 0.45, 0.9]),
    ("vonmises", "VonMises", {"loc": [0.0, 1.0, 2.0], "concentration": [0.5, 4.0, 30.0]}, [0.3, -1.2, 2.5]),
    ("cb", "ContinuousBernoulli", {"probs": [0.05, 0.4995, 0.8]}, [0.1, 0.5, 0.9]),
    ("cb_logits", "ContinuousBernoulli", {"logits": [-2.0, 0.001, 1.5]}, [0.1, 0.5, 0.9]),
    ("negbin", "NegativeBinomial", {"total_count": [0.5, 3.0, 7.5], "probs": [0.3, 0.6, 0.1]}, [0.0, 2.0, 9.0]),
    ("negbin_logits", "NegativeBinomial", {"total_count": [2.0, 4.0, 1.5], "logits": [-1.0, 0.3, 1.2]}, [1.0, 0.0, 5.0]),
    ("relaxed_onehot", "RelaxedOneHotCategorical", {"temperature": 0.7, "probs": [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]},
     [[0.1, 0.2, 0.7], [0.5, 0.45, 0.05]]),
    ("lowrank", "LowRankMultivariateNormal",
     {"loc": [0.1, -0.4, 0.7], "cov_factor": [[0.5, -0.2], [0.1, 0.8], [-0.3, 0.4]], "cov_diag": [0.5, 1.2, 0.8]},
     [[0.3, 0.0, 1.0], [-1.0, 0.5, 0.2]]),
    ("lkj", "LKJCholesky", {"dim": 3, "concentration": [0.5, 1.0, 2.5]},
     [[1.0, 0.0, 0.0], [0.3, 0.9539392014169456, 0.0], [-0.2, 0.5, 0.8426149773176359]]),
]  # fmt: skip
NO_MODE = {"weibull_small_k", "kumaraswamy"}

KL: list[tuple[str, dict, str, dict]] = [
    ("Cauchy", {"loc": [0.3], "scale": [0.8]}, "Cauchy", {"loc": [-1.0], "scale": [2.0]}),
    ("Gumbel", {"loc": [0.3], "scale": [0.8]}, "Gumbel", {"loc": [-0.5], "scale": [1.3]}),
    ("HalfNormal", {"scale": [0.7]}, "HalfNormal", {"scale": [1.9]}),
    ("Geometric", {"probs": [0.2, 0.7]}, "Geometric", {"probs": [0.5, 0.1]}),
    ("Pareto", {"scale": [1.0], "alpha": [2.5]}, "Pareto", {"scale": [0.5], "alpha": [1.5]}),
    ("ContinuousBernoulli", {"probs": [0.3, 0.4999]}, "ContinuousBernoulli", {"probs": [0.8, 0.2]}),
    ("Gumbel", {"loc": [0.3], "scale": [0.8]}, "Normal", {"loc": [-0.5], "scale": [1.4]}),
    ("Uniform", {"low": [0.1], "high": [0.9]}, "Gumbel", {"loc": [-0.2], "scale": [1.5]}),
    ("Beta", {"concentration1": [2.0], "concentration0": [3.0]}, "ContinuousBernoulli", {"probs": [0.8]}),
]


def _tensorize(kwargs: dict) -> dict:
    out = {}
    for k, v in kwargs.items():
        out[k] = v if k == "dim" else torch.tensor(v, dtype=torch.float64)
    return out


def _try(fn):  # PyTorch raises NotImplementedError where a law has no such method
    try:
        return fn().detach().numpy()
    except NotImplementedError:
        return None


def main() -> None:
    arrays: dict[str, np.ndarray] = {"torch_version": np.array(torch.__version__)}
    for case, cls, kwargs, value in CASES:
        d = getattr(D, cls)(**_tensorize(kwargs))
        v = torch.tensor(value, dtype=torch.float64)
        arrays[f"{case}/dist"] = np.array(cls)
        arrays[f"{case}/kwargs"] = np.array(json.dumps(kwargs))
        arrays[f"{case}/value"] = v.numpy()
        arrays[f"{case}/q"] = np.array(Q)
        results = {
            "log_prob": _try(lambda d=d, v=v: d.log_prob(v)),
            "cdf": _try(lambda d=d, v=v: d.cdf(v)) if d.event_shape == () else None,
            "icdf": _try(lambda d=d: d.icdf(torch.tensor(Q, dtype=torch.float64)))
            if d.event_shape == ()
            else None,
            "entropy": _try(d.entropy),
            "mean": _try(lambda d=d: d.mean),
            "variance": _try(lambda d=d: d.variance),
            "mode": None if case in NO_MODE else _try(lambda d=d: d.mode),
        }
        for name, r in results.items():
            if r is not None:
                arrays[f"{case}/{name}"] = r
    for p, pk, q, qk in KL:
        kl = D.kl_divergence(getattr(D, p)(**_tensorize(pk)), getattr(D, q)(**_tensorize(qk)))
        arrays[f"kl/{p}/{q}"] = kl.numpy()
        arrays[f"kl/{p}/{q}/kwargs"] = np.array(json.dumps([pk, qk]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(arrays)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    main()
