"""Concurrent use from Python threads: a shared model gives the same results
as serial runs, grad mode is per thread, and heavy kernels release the GIL."""

from __future__ import annotations

import threading

import ferrograd as fg
import ferrograd.nn as nn
import numpy as np
from _threads import run_threads


def test_shared_model_inference_from_threads_matches_serial():
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512), nn.Linear(512, 64)).eval()
    inputs = [fg.randn(n, 256) for n in (1, 7, 64, 300)]  # small ones hold the GIL, large ones release it
    with fg.no_grad():
        want = [np.asarray(model(x)) for x in inputs]
    results: dict[tuple[int, int], np.ndarray] = {}

    def worker(k: int) -> None:
        with fg.no_grad():
            for r in range(15):
                i = (k + r) % len(inputs)
                results[(k, r)] = np.asarray(model(inputs[i]))

    run_threads(worker, 4)
    assert len(results) == 60
    for (k, r), got in results.items():
        np.testing.assert_allclose(got, want[(k + r) % len(inputs)], rtol=1e-6, atol=1e-6)


def test_grad_mode_is_per_thread():
    inside = threading.Event()
    release = threading.Event()
    seen: dict[str, bool] = {}

    def other() -> None:
        with fg.no_grad():
            seen["other"] = fg.is_grad_enabled()
            inside.set()
            release.wait(10)
            seen["other_later"] = fg.is_grad_enabled()

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    try:
        # The other thread's no_grad does not reach this one.
        assert fg.is_grad_enabled()
        x = fg.ones(3, requires_grad=True)
        assert (x * 2).requires_grad
    finally:
        release.set()
        t.join()
    assert seen == {"other": False, "other_later": False}


def test_heavy_kernels_release_the_gil():
    import time

    a = fg.randn(2000, 2000)
    t0 = time.perf_counter()
    a @ a
    single = time.perf_counter() - t0
    started = threading.Event()
    done = threading.Event()

    def work() -> None:
        started.set()
        for _ in range(3):
            a @ a
        done.set()

    t = threading.Thread(target=work)
    t.start()
    assert started.wait(10)
    last = time.perf_counter()
    gap = 0.0
    while not done.is_set():
        now = time.perf_counter()
        gap = max(gap, now - last)
        last = now
    t.join()
    # Were the GIL held through a matmul, this loop would stall for a whole
    # matmul at least once; released, it only waits for the OS scheduler.
    assert gap < 0.5 * single, (gap, single)


def test_thread_pool_works_in_a_forked_child():
    """A child made by fork() after the pool ran inherits no pool threads:
    its first parallel kernel builds a new pool instead of hanging."""
    import os
    import signal
    import time

    if not hasattr(os, "fork"):
        import pytest

        pytest.skip("os.fork is not available on this platform")
    x = fg.ones(1 << 22)
    assert x.sum().item() == float(1 << 22)  # the parent's pool is running
    pid = os.fork()
    if pid == 0:  # the child: exit status says whether the kernels ran right
        try:
            ok = x.sum().item() == float(1 << 22) and float((x * 2).mean().item()) == 2.0
            os._exit(0 if ok else 1)
        except BaseException:  # noqa: BLE001 - any failure is a non-zero status
            os._exit(2)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung in a parallel kernel")
        time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
