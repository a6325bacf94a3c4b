"""The thread-count setting and the deterministic mode: with
``fg.use_deterministic_algorithms(True)`` every result is bit-identical
whatever the number of threads (reductions cut into partial sums, GEMM and
convolution splits are partitioned the same way), so training runs repeat
exactly on any machine size."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest


@pytest.fixture
def restore_threads() -> Iterator[None]:
    n = fg.get_num_threads()
    det = fg.are_deterministic_algorithms_enabled()
    yield
    fg.set_num_threads(n)
    fg.use_deterministic_algorithms(det)


def test_set_and_get_num_threads(restore_threads: None) -> None:
    fg.set_num_threads(1)
    assert fg.get_num_threads() == 1
    fg.set_num_threads(3)
    assert fg.get_num_threads() == 3
    # Work still runs (and is right) on the rebuilt pool.
    x = fg.arange(1 << 20, dtype=fg.float64)
    assert x.sum().item() == float((1 << 20) * ((1 << 20) - 1) // 2)
    with pytest.raises(ValueError, match="at least 1"):
        fg.set_num_threads(0)
    assert fg.get_num_threads() == 3


def test_flag_round_trip(restore_threads: None) -> None:
    fg.use_deterministic_algorithms(True)
    assert fg.are_deterministic_algorithms_enabled()
    fg.use_deterministic_algorithms(False, warn_only=True)
    assert not fg.are_deterministic_algorithms_enabled()


def _digits_like(n: int = 1797, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits when installed, else data of the same shape
    (64 features in [0, 16], 10 classes)."""
    try:
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.data.astype(np.float32) / 16.0, d.target.astype(np.int64)
    except ImportError:
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 10, n)
        centers = rng.random((10, 64)).astype(np.float32)
        x = centers[y] + 0.3 * rng.standard_normal((n, 64)).astype(np.float32)
        return x, y.astype(np.int64)


def _train_digits_mlp(threads: int, steps: int = 4, compiled: bool = False) -> list[np.ndarray]:
    """A few full-batch Adam steps of the digits MLP (wide enough that the
    matmuls, bias-gradient sums and the loss run multithreaded), eagerly or
    as one captured graph per step."""
    fg.set_num_threads(threads)
    fg.manual_seed(0)
    x, y = _digits_like()
    xb, yb = fg.tensor(x), fg.tensor(y)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = fg.optim.Adam(model.parameters(), lr=1e-3)

    def step(xb: fg.Tensor, yb: fg.Tensor) -> fg.Tensor:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = fg.compile(step) if compiled else step
    out = []
    for _ in range(steps):
        out.append(run(xb, yb).detach().numpy().copy())
    out += [p.detach().numpy().copy() for p in model.parameters()]
    return out


def _bits_equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)
    )


def test_digits_mlp_training_is_bit_identical_with_1_and_2_threads(restore_threads: None) -> None:
    fg.use_deterministic_algorithms(True)
    one = _train_digits_mlp(1)
    two = _train_digits_mlp(2)
    again = _train_digits_mlp(2)
    assert _bits_equal(two, again), "two runs with 2 threads differ"
    assert _bits_equal(one, two), "1 thread and 2 threads differ in deterministic mode"
    assert np.isfinite(one[0]).all() and one[3] < one[0]  # it did train


def test_compiled_digits_mlp_step_is_bit_identical_with_1_and_2_threads(restore_threads: None) -> None:
    fg.use_deterministic_algorithms(True)
    one = _train_digits_mlp(1, compiled=True)
    two = _train_digits_mlp(2, compiled=True)
    assert _bits_equal(one, two), "compiled: 1 thread and 2 threads differ in deterministic mode"


def _kernels() -> dict[str, Callable[[], list[fg.Tensor]]]:
    """Results whose default partition depends on the thread count."""
    rng = np.random.default_rng(1)
    big = fg.tensor(rng.standard_normal(1 << 22).astype(np.float32))
    wide = fg.tensor(rng.standard_normal((3, 1 << 20)).astype(np.float32))
    cols = fg.tensor(rng.standard_normal((1 << 15, 96)).astype(np.float32))
    a64 = fg.tensor(rng.standard_normal((300, 700)))
    b64 = fg.tensor(rng.standard_normal((700, 200)))
    img = fg.tensor(rng.standard_normal((16, 8, 32, 32)).astype(np.float32), requires_grad=True)
    w = fg.tensor(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), requires_grad=True)

    def conv() -> list[fg.Tensor]:
        img.grad = None
        w.grad = None
        out = F.conv2d(img, w, padding=1)
        (out * out).sum().backward()
        assert img.grad is not None and w.grad is not None
        return [out, img.grad, w.grad]

    return {
        "sum": lambda: [big.sum(), big.mean(), big.var(), (big * big).sum().sqrt()],
        "few rows": lambda: [wide.sum(dim=1), wide.logsumexp(dim=1), fg.softmax(wide, dim=1)],
        "columns": lambda: [cols.sum(dim=0), cols.mean(dim=0), cols.std(dim=0)],
        "float64 matmul": lambda: [a64 @ b64],
        "conv2d and its gradients": conv,
    }


@pytest.mark.parametrize("name", list(_kernels()))
def test_kernels_are_independent_of_the_thread_count(name: str, restore_threads: None) -> None:
    fg.use_deterministic_algorithms(True)
    f = _kernels()[name]
    results = []
    for threads in (1, 2, 3):
        fg.set_num_threads(threads)
        results.append([np.asarray(t.detach()).copy() for t in f()])
    assert _bits_equal(results[0], results[1]), f"{name}: 1 vs 2 threads"
    assert _bits_equal(results[0], results[2]), f"{name}: 1 vs 3 threads"
