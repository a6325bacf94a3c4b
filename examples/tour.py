"""A 30-second tour of ferrograd: a few ops, a NumPy round trip and a timing."""

import time

import ferrograd as fg
import numpy as np


def main() -> None:
    print(f"ferrograd {fg.__version__} — CPU kernels: {fg.cpu_level()}, threads: {fg.get_num_threads()}")

    a = fg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = fg.arange(3, dtype=fg.float32)
    print("a =", a)
    print("a + b (broadcast) =", a + b)
    print("a.T =", a.T)
    print("tanh(a[:, 1:]) =", fg.tanh(a[:, 1:]))
    print("a > 2.5 =", a > 2.5)
    print("int tensor / 2 =", fg.tensor([1, 2, 3]) / 2, "| // 2 =", fg.tensor([1, 2, 3]) // 2)

    # NumPy round trip: from_numpy shares memory both ways.
    arr = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    t = fg.from_numpy(arr)
    t *= 10
    print("NumPy array after an in-place op on the tensor that shares it:\n", arr)
    back = t.numpy()
    print("t.numpy() shares memory with the original array:", np.shares_memory(back, arr))

    # A timing on a larger tensor (release build; best of 5).
    n = 1 << 22
    x, y, z = fg.ones(n), fg.full((n,), 2.0), fg.full((n,), 3.0)
    nx, ny, nz = np.ones(n, np.float32), np.full(n, 2.0, np.float32), np.full(n, 3.0, np.float32)

    def best(f):
        f()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3

    def fg_expr():
        # A large elementwise result may be computed when first read (so that
        # x * y + z runs as one pass): synchronize() computes it inside the timing.
        r = x * y + z
        fg.synchronize()
        return r

    tf = best(fg_expr)
    tn = best(lambda: nx * ny + nz)
    r = fg_expr()
    assert float(r[0]) == 5.0 and float(r[-1]) == 5.0
    print(f"x*y+z on {n:,} float32: ferrograd {tf:.2f} ms, NumPy {tn:.2f} ms (ratio {tf / tn:.2f})")
    print(
        f"  (ferrograd fuses the two ops into one pass on {fg.get_num_threads()} threads; "
        "NumPy runs them one after the other on one thread, writing a temporary)"
    )


if __name__ == "__main__":
    main()
