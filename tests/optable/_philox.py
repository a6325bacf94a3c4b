"""An independent NumPy implementation of ferrograd's random-number spec.

Philox4x32-10 and the word → value mappings documented in the engine's
``philox`` module, written from that description with vectorised uint64
arithmetic. The op table and ``tests/test_random.py`` compare ferrograd's
outputs with these functions bit for bit (normals: to rounding), so any
device that implements the same spec can be checked against them too.
"""

from __future__ import annotations

import numpy as np

M0 = np.uint64(0xD2511F53)
M1 = np.uint64(0xCD9E8D57)
W0 = 0x9E3779B9
W1 = 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)
U32 = 0xFFFFFFFF


def philox(c0, c1, c2, c3, k0: int, k1: int):
    """Philox4x32-10 over arrays of counters (uint64 arrays holding 32-bit words)."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    for r in range(10):
        if r:
            k0 = (k0 + W0) & U32
            k1 = (k1 + W1) & U32
        p0 = M0 * c0
        p1 = M1 * c2
        c0, c1, c2, c3 = (
            (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0),
            p1 & MASK32,
            (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1),
            p0 & MASK32,
        )
    return c0, c1, c2, c3


def blocks(seed: int, offset: int, nblocks: int) -> np.ndarray:
    """Blocks ``0 .. nblocks`` of a call at ``(seed, offset)``: shape (nblocks, 4), uint64 words."""
    seed &= (1 << 64) - 1
    j = np.arange(nblocks, dtype=np.uint64) + np.uint64(offset & ((1 << 64) - 1))
    zero = np.zeros(nblocks, dtype=np.uint64)
    x = philox(j & MASK32, j >> np.uint64(32), zero, zero, seed & U32, seed >> 32)
    return np.stack(x, axis=1) if nblocks else np.zeros((0, 4), dtype=np.uint64)


def words32(seed: int, offset: int, n: int) -> np.ndarray:
    """The 32-bit draw of elements ``0 .. n`` (4 per block)."""
    return blocks(seed, offset, -(-n // 4)).reshape(-1)[:n]


def words64(seed: int, offset: int, n: int) -> np.ndarray:
    """The 64-bit draw of elements ``0 .. n`` (2 per block; low word first)."""
    b = blocks(seed, offset, -(-n // 2))
    v = b[:, [0, 2]] | (b[:, [1, 3]] << np.uint64(32))
    return v.reshape(-1)[:n]


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even), kept as float32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def _round16(v32: np.ndarray, dtype: str) -> np.ndarray:
    return v32.astype(np.float16).astype(np.float32) if dtype == "float16" else _bf16(v32)


def uniform(seed, offset, shape, dtype, low=0.0, high=1.0) -> np.ndarray:
    """``rand`` / ``uniform_``: values in [low, high) (float64 array holding dtype values)."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "float64":
        v = words64(seed, offset, n)
        u = (v >> np.uint64(11)).astype(np.float64) * 2.0**-53
        out = low + (high - low) * u
        if high > low:
            out = np.where(out >= high, np.nextafter(high, -np.inf), out)
        return out.reshape(shape)
    w = words32(seed, offset, n)
    shift, scale = {"float32": (8, 2.0**-24), "float16": (21, 2.0**-11), "bfloat16": (24, 2.0**-8)}[dtype]
    u = (w >> np.uint64(shift)).astype(np.float32) * np.float32(scale)
    v = np.float32(low) + np.float32(high - low) * u
    if dtype == "float32":
        hi = np.float32(high)
        lo = np.float32(low)
        if hi > lo:
            v = np.where(v >= hi, np.nextafter(hi, np.float32(-np.inf)), v)
        return v.astype(np.float64).reshape(shape)
    v = _round16(v, dtype)
    hi = _round16(np.array([high], dtype=np.float32), dtype)[0]
    lo = _round16(np.array([low], dtype=np.float32), dtype)[0]
    if hi > lo:
        below = _below16(hi, dtype)
        v = np.where(v >= hi, below, v)
    return v.astype(np.float64).reshape(shape)


def _below16(h: np.float32, dtype: str) -> np.float32:
    """The largest 16-bit float of ``dtype`` below ``h``."""
    if dtype == "float16":
        return np.float32(np.nextafter(np.float16(h), np.float16(-np.inf)))
    bits = int(np.array([h], dtype=np.float32).view(np.uint32)[0]) >> 16
    neg, mag = bits & 0x8000, bits & 0x7FFF
    nb = 0x8001 if mag == 0 else (bits + 1 if neg else bits - 1)
    return np.array([nb << 16], dtype=np.uint32).view(np.float32)[0]


def normal(seed, offset, shape, dtype, mean=0.0, std=1.0) -> np.ndarray:
    """``randn`` / ``normal`` / ``normal_`` in float64 (the engine rounds to its dtype)."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "float64":
        nb = -(-n // 2)
        b = blocks(seed, offset, nb)
        v0 = b[:, 0] | (b[:, 1] << np.uint64(32))
        v1 = b[:, 2] | (b[:, 3] << np.uint64(32))
        u1 = ((v0 >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
        u2 = (v1 >> np.uint64(11)).astype(np.float64) * 2.0**-53
        r = np.sqrt(-2.0 * np.log(u1))
        z = np.stack([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)], axis=1).reshape(-1)
    else:
        nb = -(-n // 4)
        b = blocks(seed, offset, nb)
        zs = []
        for a, c in ((0, 1), (2, 3)):
            u1 = ((b[:, a] >> np.uint64(8)) + np.uint64(1)).astype(np.float64) * 2.0**-24
            u2 = (b[:, c] >> np.uint64(8)).astype(np.float64) * 2.0**-24
            r = np.sqrt(-2.0 * np.log(u1))
            zs += [r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)]
        z = np.stack(zs, axis=1).reshape(-1)
    return (mean + std * z[:n]).reshape(shape)


def randint(seed, offset, shape, low, high) -> np.ndarray:
    """``randint``: int64 values in [low, high): ``low + ((v * (high - low)) >> 64)``."""
    n = int(np.prod(shape, dtype=np.int64))
    v = words64(seed, offset, n)
    r = (high - low) & ((1 << 64) - 1)
    # high 64 bits of v * r, from 32-bit halves (exact in uint64 arithmetic)
    r_lo, r_hi = np.uint64(r & U32), np.uint64(r >> 32)
    v_lo, v_hi = v & MASK32, v >> np.uint64(32)
    s32 = np.uint64(32)
    ll = v_lo * r_lo
    lh = v_lo * r_hi
    hl = v_hi * r_lo
    hh = v_hi * r_hi
    mid = (ll >> s32) + (lh & MASK32) + (hl & MASK32)
    q = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    vals = q + np.uint64(low & ((1 << 64) - 1))
    return vals.view(np.int64).reshape(shape)


def threshold(p) -> np.ndarray:
    """Bernoulli threshold: success iff ``(w >> 8) < threshold``."""
    p = np.asarray(p, dtype=np.float64)
    t = np.ceil(np.clip(p, 0.0, 1.0) * 2.0**24)
    return np.where(p <= 0, 0, np.where(p >= 1, 2**24, t)).astype(np.uint64)


def bernoulli(seed, offset, p) -> np.ndarray:
    """0/1 (bool array) with per-element probabilities ``p``."""
    p = np.asarray(p, dtype=np.float64)
    w = words32(seed, offset, p.size)
    return ((w >> np.uint64(8)) < threshold(p).reshape(-1)).reshape(p.shape)


def dropout(seed, offset, x: np.ndarray, p: float, dtype: str) -> np.ndarray:
    """Fused dropout; ``x`` holds values of ``dtype`` (float64 array)."""
    keep = bernoulli(seed, offset, np.full(x.shape, 1.0 - p))
    if dtype == "float64":
        kept = x * (1.0 / (1.0 - p))
    else:
        kept = x.astype(np.float32) * np.float32(1.0 / (1.0 - p))
        if dtype != "float32":
            kept = _round16(kept, dtype)
    return np.where(keep, kept, 0.0).astype(np.float64)


def randperm(seed, offset, n) -> np.ndarray:
    """The permutation sorting (key, index) ascending."""
    return np.argsort(words64(seed, offset, n), kind="stable").astype(np.int64)


def multinomial(seed, offset, probs: np.ndarray, k: int, replacement: bool) -> np.ndarray:
    """Indices drawn from each row of ``probs`` (1-D or 2-D, float64 values)."""
    p2 = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    rows, m = p2.shape
    out = np.zeros((rows, k), dtype=np.int64)
    if replacement:
        v = words64(seed, offset, rows * k).reshape(rows, k)
        for r in range(rows):
            cdf = np.cumsum(p2[r])
            total = 0.0
            for x in p2[r]:
                total += x
            last = int(np.nonzero(p2[r] > 0)[0][-1])
            u = (v[r] >> np.uint64(11)).astype(np.float64) * 2.0**-53
            c = np.searchsorted(cdf, u * total, side="right")
            out[r] = np.where(c >= m, last, c)
    else:
        v = words64(seed, offset, rows * m).reshape(rows, m)
        for r in range(rows):
            u = ((v[r] >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
            with np.errstate(divide="ignore"):
                key = np.where(p2[r] > 0, -np.log(u) / np.where(p2[r] > 0, p2[r], 1.0), np.inf)
            order = np.lexsort((np.arange(m), key))
            out[r] = order[:k]
    return out.reshape(k) if np.ndim(probs) == 1 else out
