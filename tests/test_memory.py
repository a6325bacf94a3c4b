"""The CPU caching allocator's statistics, limit and cache control, and a
short soak: repeated training steps and graph building keep memory flat."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import ferrograd as fg
import pytest

MB = 1 << 20


def stats():
    return fg.memory_stats()


def test_in_use_cached_and_peak_follow_a_tensor():
    fg.empty_cache()
    fg.reset_peak_memory_stats()
    base = stats()
    assert base["cpu.cached_bytes"] == 0
    assert base["cpu.peak_bytes"] == base["cpu.in_use_bytes"]
    t = fg.empty(4 * MB // 4)  # 4 MiB of float32
    s = stats()
    assert s["cpu.in_use_bytes"] - base["cpu.in_use_bytes"] >= 4 * MB
    assert s["cpu.peak_bytes"] >= s["cpu.in_use_bytes"]
    assert s["cpu.allocations"] > base["cpu.allocations"]
    del t
    gc.collect()
    s2 = stats()
    assert s2["cpu.in_use_bytes"] <= s["cpu.in_use_bytes"] - 4 * MB
    assert s2["cpu.cached_bytes"] >= 4 * MB  # kept for reuse
    assert s2["cpu.peak_bytes"] == s["cpu.peak_bytes"]  # the peak stays
    # The same size again comes from the cache.
    hits = s2["cpu.cache_hits"]
    t = fg.empty(4 * MB // 4)
    assert stats()["cpu.cache_hits"] == hits + 1
    del t
    fg.empty_cache()
    assert stats()["cpu.cached_bytes"] == 0
    fg.reset_peak_memory_stats()
    s3 = stats()
    assert s3["cpu.peak_bytes"] == s3["cpu.in_use_bytes"] < s["cpu.peak_bytes"]


def test_cache_limit_caps_what_is_kept():
    old = stats()["cpu.cache_limit_bytes"]
    try:
        fg.empty_cache()
        fg.set_cache_limit(0)
        assert stats()["cpu.cache_limit_bytes"] == 0
        t = fg.ones(MB)
        del t
        gc.collect()
        assert stats()["cpu.cached_bytes"] == 0  # went back to the system
        fg.set_cache_limit(8 * MB)
        ts = [fg.ones(MB) for _ in range(4)]  # 4 MiB each
        del ts
        gc.collect()
        assert 0 < stats()["cpu.cached_bytes"] <= 8 * MB
    finally:
        fg.set_cache_limit(old)


SOAK = Path(__file__).resolve().parents[1] / "scripts" / "soak.py"


@pytest.mark.skipif(not SOAK.exists(), reason="scripts/soak.py is not in this tree")
def test_short_soak_keeps_memory_flat():
    # A fresh process, so other tests' allocations do not blur the figures.
    out = subprocess.run(
        [sys.executable, str(SOAK), "--steps", "1500", "--graphs", "150", "--max-growth-mb", "4"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "training: " in out.stdout and "graphs: " in out.stdout


def test_memory_stats_cover_the_gpu_once_used():
    if not (hasattr(fg, "gpu") and fg.gpu.is_available()):
        pytest.skip(f"no WebGPU adapter: {getattr(fg, 'gpu', None) and fg.gpu.unavailable_reason()}")
    fg.reset_peak_memory_stats()
    base = fg.memory_stats().get("gpu.in_use_bytes", 0)
    x = fg.ones(1 << 20, device="gpu")
    s = fg.memory_stats()
    assert s["gpu.in_use_bytes"] >= base + 4 * (1 << 20)
    assert s["gpu.peak_bytes"] >= s["gpu.in_use_bytes"]
    assert s["gpu.buffers_in_use"] >= 1
    del x
    fg.gpu.synchronize()
    after = fg.memory_stats()
    assert after["gpu.in_use_bytes"] <= s["gpu.in_use_bytes"] - 4 * (1 << 20)
    assert after["gpu.peak_bytes"] == s["gpu.peak_bytes"]  # the peak stays until reset
    fg.reset_peak_memory_stats()
    assert fg.memory_stats()["gpu.peak_bytes"] == after["gpu.in_use_bytes"]
    fg.empty_cache()
    assert fg.memory_stats()["gpu.cached_bytes"] <= after["gpu.cached_bytes"]


def test_compiled_steps_that_accumulate_grads_keep_memory_flat():
    # A compiled step that replaces `.grad` every call (gradients accumulate: no
    # zero_grad) hands the gradient it replaces back for reuse; bias-sized and
    # embedding-sized gradients once piled up there, one set per call.
    nn = fg.nn
    # Sizes matter: the piling-up showed from inputs of a few MiB.
    lin = nn.Linear(256, 256)
    ln = nn.LayerNorm(256)
    pos = nn.Embedding(128, 256)

    def step(x):
        y = ln(lin(x) + pos(fg.arange(x.shape[1])))
        loss = y.square().mean()
        loss.backward()
        return loss

    f = fg.compile(step)
    x = fg.randn(16, 128, 256)
    used = []
    for i in range(40):
        float(f(x))
        gc.collect()
        if i in (9, 39):
            used.append(stats()["cpu.in_use_bytes"])
    # (the first calls fill the kept buffers up to what one call can use)
    assert used[1] == used[0], f"in-use memory grew by {used[1] - used[0]} bytes over 30 compiled steps"
    assert lin.bias.grad is not None and pos.weight.grad is not None
