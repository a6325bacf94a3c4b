"""The example scripts run end to end (tiny settings, in subprocesses) and learn something.

The digits examples need the ``demo`` extra (scikit-learn, tqdm, matplotlib);
without it those tests are skipped with a reason (``scripts/test.sh``
installs it). ``char_rnn.py``, ``gpt_tiny.py`` and ``tour.py`` need
nothing beyond ferrograd and NumPy.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(script: str, *args: str, cwd: Path | None = None, expect: int = 0, timeout: float = 120) -> str:
    """Run ``examples/<script>`` with ``args``; assert its exit status; return stdout + stderr."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == expect, f"{script} {' '.join(args)} exited with {proc.returncode}:\n{out}"
    return out


def need_demo_extra() -> None:
    """Skip unless the demo extra's packages are importable."""
    for mod in ("sklearn", "tqdm", "matplotlib"):
        pytest.importorskip(
            mod, reason=f"{mod} is not installed (pip install -e '.[demo]' to run the digits examples)"
        )


def test_tour() -> None:
    out = run("tour.py")
    assert out.startswith("ferrograd ") and "shares memory with the original array: True" in out
    m = re.search(r"x\*y\+z on [\d,]+ float32: ferrograd ([\d.]+) ms, NumPy ([\d.]+) ms", out)
    assert m, out
    # The timing forces the deferred result: a 16 MiB pass cannot take under 0.01 ms.
    assert float(m.group(1)) > 0.0, out


def test_hogwild() -> None:
    """Spawned processes train the parent's shared model (``model.share_memory()``)."""
    out = run("hogwild.py", "--epochs", "1", "--train-size", "256", "--log-interval", "100")
    assert "every parameter changed by the training processes: True" in out, out
    accs = re.search(r"accuracy before training ([\d.]+), after ([\d.]+)", out)
    assert accs, out


def test_digits_demo(tmp_path: Path) -> None:
    """The demo with 2 epochs: both models learn, checkpoints reload identically, the PNG is valid."""
    need_demo_extra()
    out = run("digits.py", "--epochs", "2", "--quiet", "--seed", "1", "--out-dir", str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    models = summary["models"]
    assert list(models) == ["mlp", "cnn"]
    assert models["mlp"]["test_accuracy"] > 0.80, out
    assert models["cnn"]["test_accuracy"] > 0.80, out
    for name, r in models.items():
        assert r["reload_identical"] is True and r["reloaded_accuracy"] == r["test_accuracy"], name
        ckpt = fg.load(tmp_path / f"digits_{name}.safetensors")
        assert set(ckpt) == {"model", "optimizer", "metadata"}
        assert ckpt["metadata"]["arch"] == name and ckpt["metadata"]["seed"] == 1
        assert ckpt["optimizer"]["state"] and ckpt["optimizer"]["param_groups"][0]["lr"] == pytest.approx(
            2e-3
        )
    png = (tmp_path / "loss_curves.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 10_000
    assert "checkpoint reload: identical" in out and "MISMATCH" not in out


def test_digits_on_gpu(tmp_path: Path) -> None:
    """The MLP trains on the WebGPU device (the CNN too, but slowly on software drivers: not run here)."""
    need_demo_extra()
    if not fg.gpu.is_available():
        pytest.skip(f"no WebGPU adapter: {fg.gpu.unavailable_reason()}")
    out = run(
        "digits.py",
        "--device",
        "gpu",
        "--models",
        "mlp",
        "--epochs",
        "2",
        "--quiet",
        "--out-dir",
        str(tmp_path),
    )
    r = json.loads((tmp_path / "summary.json").read_text())["models"]["mlp"]
    assert r["test_accuracy"] > 0.80 and r["reload_identical"] is True, out


def test_digits_unknown_device_is_a_clear_error(tmp_path: Path) -> None:
    need_demo_extra()
    out = run("digits.py", "--device", "tpu", "--out-dir", str(tmp_path), expect=2)
    assert "--device tpu" in out and "--device cpu" in out
    assert not (tmp_path / "summary.json").exists()


def test_mlp_digits() -> None:
    need_demo_extra()
    out = run("mlp_digits.py", "--epochs", "3")
    acc = float(re.search(r"test accuracy: ([\d.]+)%", out).group(1))
    assert acc > 85, out


def test_cnn_digits_checkpoint_round_trip(tmp_path: Path) -> None:
    need_demo_extra()
    ckpt = tmp_path / "cnn.safetensors"
    out = run("cnn_digits.py", "--epochs", "1", "--checkpoint", str(ckpt))
    m = re.search(r"test accuracy: ([\d.]+)%; after reloading .*: ([\d.]+)%", out)
    assert m and m.group(1) == m.group(2), out
    assert float(m.group(1)) > 70, out
    assert ckpt.is_file()


def test_digits_cnn_is_bitwise_reproducible(tmp_path: Path) -> None:
    need_demo_extra()
    for d in ("a", "b"):
        run("digits.py", "--models", "cnn", "--epochs", "1", "--quiet", "--out-dir", str(tmp_path / d))
    a, b = (fg.load(tmp_path / d / "digits_cnn.safetensors")["model"] for d in ("a", "b"))
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=k)


def test_char_rnn_learns_and_is_reproducible() -> None:
    args = ("--steps", "40", "--log-every", "20", "--seed", "3")
    out = run("char_rnn.py", *args)
    first, last = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+)", out).groups())
    assert last < first - 0.5, out
    samples = out.split("samples (temperature 0.5):\n")[1].splitlines()
    assert len(samples) == 4 and samples[0].startswith("  twinkle"), out

    def strip_timing(s: str) -> str:
        return re.sub(r"[\d.]+ steps/s|in [\d.]+ s", "", s)

    assert strip_timing(run("char_rnn.py", *args)) == strip_timing(out)


def test_gpt_tiny_loss_goes_down(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    out = run(
        "gpt_tiny.py", "--steps", "30", "--eval-every", "15", "--d-model", "64", "--layers", "2",
        "--seq-len", "32", "--batch-size", "8", "--sample", "40", "--corpus", str(corpus),
    )  # fmt: skip
    held_out = [float(v) for v in re.findall(r"held-out loss ([\d.]+)", out)]
    assert len(held_out) == 3, out
    assert held_out[-1] < held_out[0] - 1.0, out
    assert "sample (temperature 0.8):\nThe " in out


def test_gpt_tiny_on_gpu_matches_cpu(tmp_path: Path) -> None:
    """The transformer (embeddings, causal attention, layer norm, GELU, AdamW, clipping) trains on
    the WebGPU device and follows the CPU run's losses."""
    if not fg.gpu.is_available():
        pytest.skip(f"no WebGPU adapter: {fg.gpu.unavailable_reason()}")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 100)
    args = ["--steps", "6", "--eval-every", "3", "--d-model", "32", "--layers", "1", "--heads", "2",
            "--seq-len", "16", "--batch-size", "4", "--sample", "10", "--corpus", str(corpus)]  # fmt: skip
    losses = {}
    for device in ("cpu", "gpu"):
        out = run("gpt_tiny.py", *args, "--device", device, timeout=600)
        losses[device] = [float(v) for v in re.findall(r"loss ([\d.]+)", out)]
        assert "sample (temperature 0.8):\nThe " in out, out
    assert len(losses["gpu"]) == len(losses["cpu"]) == 5, losses
    np.testing.assert_allclose(losses["gpu"], losses["cpu"], atol=2e-3)


def test_gpt_tiny_default_corpus_runs() -> None:
    out = run("gpt_tiny.py", "--steps", "2", "--eval-every", "1", "--d-model", "32", "--layers", "1",
              "--seq-len", "16", "--batch-size", "2", "--sample", "0")  # fmt: skip
    assert re.search(r"corpus: .* \([\d,]+ bytes", out) and "step     2" in out, out
