"""In CI a missing WebGPU adapter fails the run; it never lets the GPU tests skip.

Each case runs pytest in a subprocess on one GPU test with the adapter hidden
(``WGPU_BACKEND`` naming a backend this OS lacks) and reads its exit status:
the check lives in ``tests/conftest.py``, so it holds whoever runs the suite,
not only ``.ci/run``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU_TEST = "tests/test_gpu.py::test_info_reports_adapter_and_limits"
# A backend wgpu has no support for on this OS, so that no adapter is found.
ABSENT_BACKEND = "dx12" if sys.platform == "darwin" else "metal"


def _pytest(**env: str | None) -> subprocess.CompletedProcess:
    e = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "FG_REQUIRE_GPU", "WGPU_BACKEND", "WGPU_ADAPTER_NAME")
    }
    e.update({k: v for k, v in env.items() if v is not None})
    e.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            GPU_TEST,
        ],
        cwd=ROOT,
        env=e,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Ways to hide the adapter, and how the failure names them.
HIDDEN = {
    "backend": ({"WGPU_BACKEND": ABSENT_BACKEND}, f"WGPU_BACKEND='{ABSENT_BACKEND}'"),
    "adapter-name": ({"WGPU_ADAPTER_NAME": "no-such-adapter"}, "WGPU_ADAPTER_NAME='no-such-adapter'"),
}


@pytest.mark.parametrize("hidden", list(HIDDEN))
@pytest.mark.parametrize("ci", ["true", "1"])
def test_ci_with_a_hidden_adapter_fails_the_run(ci, hidden):
    env, named = HIDDEN[hidden]
    r = _pytest(CI=ci, **env)
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert f"CI={ci} is set" in out and "no WebGPU adapter is usable" in out, out
    assert named in out, out
    assert "mesa-vulkan-drivers" in out and "libvulkan1" in out, out
    assert "skipped" not in out and "passed" not in out, out


def test_require_gpu_outside_ci_fails_the_run_too():
    r = _pytest(FG_REQUIRE_GPU="1", WGPU_BACKEND=ABSENT_BACKEND)
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "FG_REQUIRE_GPU is set" in out, out


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_outside_ci_a_hidden_adapter_skips_the_gpu_tests(ci):
    """Locally (``CI`` unset, empty or false) the GPU tests skip, saying why."""
    r = _pytest(CI=ci, WGPU_BACKEND=ABSENT_BACKEND)
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.OK, out
    assert "1 skipped" in out, out


def test_ci_with_the_adapter_runs_the_gpu_test():
    import ferrograd as fg

    if not fg.gpu.is_available():
        # Outside CI (in CI the conftest has already failed the whole run).
        pytest.skip(f"no WebGPU adapter: {fg.gpu.unavailable_reason()}")
    r = _pytest(CI="true")
    out = r.stdout + r.stderr
    assert r.returncode == pytest.ExitCode.OK, out
    assert "1 passed" in out, out
