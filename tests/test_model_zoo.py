"""Model zoo: small PyTorch-example models trained in ferrograd against PyTorch.

Each model in ``zoo_models.py`` is built from the same source PyTorch ran when
``scripts/make_zoo_references.py`` wrote ``fixtures/zoo/<name>.npz`` (PyTorch
2.15 on CPU). Here the model is built with ferrograd, loaded with the stored
initial weights through ``load_state_dict``, trained ``STEPS`` steps in
float64 on the stored inputs, and its per-step losses, first-step gradients
and final ``state_dict`` are compared with PyTorch's at ``rtol=1e-7``.
"""

from __future__ import annotations

from pathlib import Path

import ferrograd as torch
import numpy as np
import pytest
from zoo_models import STEPS, ZOO, train

FIXTURES = Path(__file__).parent / "fixtures" / "zoo"
RTOL = 1e-7
ATOL = 1e-10

# Models that do not yet run or match in ferrograd: name -> exact finding.
XFAIL: dict[str, str] = {}


def load_reference(name: str) -> dict[str, dict[str, np.ndarray] | np.ndarray]:
    """Split ``<name>.npz`` into its init/data/grad/final groups and losses."""
    with np.load(FIXTURES / f"{name}.npz") as z:
        groups: dict = {"init": {}, "data": {}, "grad": {}, "final": {}}
        for key in z.files:
            group, _, rest = key.partition("/")
            if rest:
                groups[group][rest] = z[key]
        groups["losses"] = z["losses"]
        groups["torch_version"] = str(z["torch_version"])
    return groups


def run_ferrograd(name: str, ref: dict) -> dict:
    """Build ``name`` in ferrograd from the stored weights and train it."""
    spec = ZOO[name]
    model = spec.build(torch).double()
    model.load_state_dict({k: torch.tensor(v) for k, v in ref["init"].items()})
    return train(torch, spec, model, ref["data"])


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Compare one array, naming it and the largest relative deviation on failure."""
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=what)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XFAIL[n])) if n in XFAIL else n
        for n in ZOO
    ],
)
def test_model_matches_pytorch(name: str) -> None:
    """Losses, first-step grads and final weights match PyTorch's."""
    ref = load_reference(name)
    got = run_ferrograd(name, ref)
    assert len(ref["losses"]) == STEPS
    assert_close(got["losses"], ref["losses"], "losses")
    assert sorted(got["grads"]) == sorted(ref["grad"])
    for key, expected in ref["grad"].items():
        assert_close(got["grads"][key], expected, f"grad {key}")
    assert sorted(got["final"]) == sorted(ref["final"])
    for key, expected in ref["final"].items():
        assert_close(got["final"][key], expected, f"final {key}")


def test_references_record_pytorch_version() -> None:
    """Every reference file names the PyTorch that produced it."""
    for name in ZOO:
        assert load_reference(name)["torch_version"].startswith("2.15")


def test_comparison_can_fail() -> None:
    """A perturbed reference is rejected, so a match is not vacuous."""
    ref = load_reference("vae")
    key = sorted(ref["final"])[0]
    ref["final"][key] = ref["final"][key] * (1 + 1e-5)
    got = run_ferrograd("vae", ref)
    with pytest.raises(AssertionError):
        assert_close(got["final"][key], ref["final"][key], key)
