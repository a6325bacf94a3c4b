"""Fuzz the two file loaders: checkpoints (``fg.load``) and saved graphs (``fg.load_graph``).

    python scripts/fuzz_loaders.py [--cases 100000] [--seed 0] [--loader both|checkpoint|graph]

Each case mutates a valid file — byte flips, truncations, insertions and
deletions, a rewritten header length, or an edit of the JSON header (a
number made huge, negative or off by one, a dtype or version string
replaced, a key dropped) — and loads it. A case passes when the load
succeeds (and, for a graph, running it succeeds or raises ValueError /
RuntimeError) or raises the loader's own error (``CheckpointError``,
``GraphFileError``). Anything else — another exception, a crash, a case
over 5 s, resident memory growing past 1 GiB — is a finding. Prints the
counts per loader and outcome, the findings, wall time and peak RSS; exits
1 on any finding. The test suite runs a few thousand of the same cases
(tests/test_fuzz_loaders.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable

import ferrograd as fg
import ferrograd.nn as nn


def valid_checkpoint(d: str) -> bytes:
    fg.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = fg.optim.Adam(m.parameters())
    m(fg.randn(2, 3)).sum().backward()
    opt.step()
    p = os.path.join(d, "valid.safetensors")
    fg.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "mask": fg.ones(3) > 0}, p)
    with open(p, "rb") as f:
        return f.read()


def valid_graph(d: str) -> bytes:
    fg.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.LayerNorm(4), nn.Linear(4, 2)).eval()
    f = fg.compile(m, dynamic=True)
    x = fg.randn(2, 3)
    f(x)
    p = os.path.join(d, "valid.fgraph")
    f.graph(x).save(p)
    with open(p, "rb") as fh:
        return fh.read()


# --------------------------------------------------------------------- mutators


def _header(b: bytes) -> tuple[dict, bytes] | None:
    if len(b) < 8:
        return None
    n = struct.unpack("<Q", b[:8])[0]
    try:
        return json.loads(b[8 : 8 + n]), b[8 + n :]
    except (ValueError, UnicodeDecodeError):
        return None


def _pack(h: dict, data: bytes) -> bytes:
    raw = json.dumps(h).encode()
    return struct.pack("<Q", len(raw)) + raw + data


_NUMS = [0, 1, -1, 2, 7, 255, 2**31, 2**32 + 1, 2**53, 2**63 - 1, 10**15, -(10**9)]


def _mutate_json(obj, rng: random.Random):
    """Change one leaf somewhere in a JSON value (returns the new value)."""
    if isinstance(obj, dict) and obj:
        k = rng.choice(list(obj))
        if rng.random() < 0.1:
            del obj[k]
            return obj
        obj[k] = _mutate_json(obj[k], rng)
        return obj
    if isinstance(obj, list) and obj:
        i = rng.randrange(len(obj))
        if rng.random() < 0.1:
            obj.pop(i)
            return obj
        obj[i] = _mutate_json(obj[i], rng)
        return obj
    if isinstance(obj, bool):
        return not obj
    if isinstance(obj, int):
        return rng.choice([obj + 1, obj - 1, *_NUMS])
    if isinstance(obj, float):
        return rng.choice([obj * 2, -obj, 1e308, 0.0])
    if isinstance(obj, str):
        # Strings that hold JSON (saved graphs keep the graph as a string) are mutated inside.
        if obj[:1] in "[{" and rng.random() < 0.8:
            try:
                return json.dumps(_mutate_json(json.loads(obj), rng))
            except ValueError:
                pass
        return rng.choice(["", "F64", "BOOL", "I8", "2", "99", obj[::-1], obj + "x", "null"])
    return rng.choice([None, 0, "x", [], {}])


def mutate(b: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(7)
    b = bytearray(b)
    if kind == 0:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate
        del b[rng.randrange(len(b)) :]
    elif kind == 2:  # insert
        i = rng.randrange(len(b) + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == 3:  # delete a range
        i = rng.randrange(len(b))
        del b[i : i + rng.randint(1, 32)]
    elif kind == 4:  # rewrite the header length
        b[:8] = struct.pack(
            "<Q", rng.choice([0, 1, len(b), len(b) - 8, 2**40, 2**64 - 1, rng.randrange(len(b))])
        )
    else:  # edit the JSON header (twice as likely: it reaches the validation logic)
        hd = _header(bytes(b))
        if hd is None:
            return bytes(b)
        h, data = hd
        meta = h.get("__metadata__") if isinstance(h, dict) else None
        try:
            g = (
                json.loads(meta["graph"])
                if isinstance(meta, dict) and isinstance(meta.get("graph"), str)
                else None
            )
        except ValueError:
            g = None
        if g is not None and rng.random() < 0.6:
            # A saved graph: edit the graph itself (nodes, calls, values, inputs).
            for _ in range(rng.randint(1, 3)):
                g = _mutate_json(g, rng)
            meta["graph"] = json.dumps(g)
            return _pack(h, data)
        for _ in range(rng.randint(1, 3)):
            h = _mutate_json(h, rng)
        if not isinstance(h, dict):
            h = {"x": h}
        return _pack(h, data)
    return bytes(b)


# ------------------------------------------------------------------------ cases


def check_checkpoint(b: bytes, path: str) -> str:
    with open(path, "wb") as f:
        f.write(b)
    try:
        fg.load(path)
        return "loaded"
    except fg.CheckpointError:
        return "refused"


_X = None


def check_graph(b: bytes, path: str) -> str:
    global _X
    try:
        g = fg.load_graph(b)
    except fg.GraphFileError:
        return "refused"
    if _X is None:
        _X = fg.randn(5, 3)
    try:
        g(_X)
        return "loaded+ran"
    except (ValueError, RuntimeError, TypeError) as e:
        if "internal error" in str(e):  # a Rust panic turned into an exception
            raise
        return "loaded, run refused"


def run_cases(
    loader: str, base: bytes, n: int, rng: random.Random, path: str, on_finding: Callable[[str], None]
) -> Counter:
    check = check_checkpoint if loader == "checkpoint" else check_graph
    out: Counter = Counter()
    for i in range(n):
        b = mutate(base, rng)
        t0 = time.perf_counter()
        try:
            outcome = check(b, path)
        except Exception as e:  # noqa: BLE001 - any other exception is a finding
            outcome = "FINDING"
            on_finding(f"{loader} case {i}: {type(e).__name__}: {str(e)[:300]}")
        dt = time.perf_counter() - t0
        if dt > 5.0:
            on_finding(f"{loader} case {i}: took {dt:.1f} s")
        out[outcome] += 1
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000, help="cases per loader")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loader", choices=["both", "checkpoint", "graph"], default="both")
    a = ap.parse_args()
    findings: list[str] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        bases = {"checkpoint": valid_checkpoint(d), "graph": valid_graph(d)}
        for loader in ("checkpoint", "graph"):
            if a.loader not in ("both", loader):
                continue
            rng = random.Random(f"{a.seed}-{loader}")
            t1 = time.perf_counter()
            counts = run_cases(
                loader, bases[loader], a.cases, rng, os.path.join(d, "case.bin"), findings.append
            )
            print(
                f"{loader}: {a.cases} cases in {time.perf_counter() - t1:.1f} s: "
                + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            )
            if peak_rss_mb() > 1024:
                findings.append(f"peak RSS {peak_rss_mb():.0f} MB after the {loader} cases")
    print(f"findings: {len(findings)}")
    for f in findings[:50]:
        print("  " + f)
    print(f"wall time {time.perf_counter() - t0:.1f} s, peak RSS {peak_rss_mb():.0f} MB")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
