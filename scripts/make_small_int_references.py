"""Write PyTorch references for the 8/16-bit integer dtypes to
``tests/fixtures/parity/small_int.json``.

The stored file records the PyTorch version it was made with (``torch_version``);
``tests/test_small_int.py`` reads it and runs in CI without PyTorch. This script needs only
``torch``::

    python scripts/make_small_int_references.py

It stores
* ``promote``: the result dtype of ``a + b`` for every pair of dtypes, for 1-d tensors
  (``tensor``), a 1-d tensor with a 0-d tensor (``zero_dim``), and a 1-d tensor with a Python
  ``int`` / ``float`` / ``bool`` (``scalar``);
* ``casts``: float32/float64 and int64 values converted to uint8, int8 and int16 (out-of-range
  values, infinities and NaN included);
* ``ops``: results of wrapping arithmetic, shifts, division and reductions on small inputs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity" / "small_int.json"

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SMALL = ["uint8", "int8", "int16"]


def dt(name: str) -> torch.dtype:
    return getattr(torch, name)


def name(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def one(d: str, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.ones(shape, dtype=dt(d))


def enc(v: float) -> float | str:
    return repr(v) if math.isnan(v) or math.isinf(v) else v


FILL_VALUES: list[int | float] = [
    -(2**63),
    -2147483649,
    -2147483648,
    -32769,
    -32768,
    -256,
    -255,
    -129,
    -128,
    -1,
    0,
    1,
    127,
    128,
    255,
    256,
    32767,
    32768,
    65535,
    2147483647,
    2147483648,
    2**63 - 1,
    -2147483648.9,
    -32768.9,
    -256.0,
    -128.9,
    -128.5,
    -1.0,
    -0.5,
    -0.0,
    0.5,
    127.5,
    127.99,
    128.0,
    255.7,
    255.99,
    256.0,
    32767.5,
    32768.0,
    65504.0,
    70000.0,
    2147483647.5,
    2147483648.0,
    9.3e18,
    1e20,
    3.5e38,
    1e39,
    -1e39,
    math.inf,
    -math.inf,
    math.nan,
]


def fill_table() -> dict:
    """``torch.full((1,), v, dtype=d)`` and ``fill_`` for every value and dtype: the stored
    value, or ``"error"`` when PyTorch refuses it (its overflow check)."""
    table: dict[str, dict] = {"values": [enc(v) if isinstance(v, float) else v for v in FILL_VALUES]}
    for d in DTYPES:
        full, fill = [], []
        for v in FILL_VALUES:
            for out, how in ((full, "full"), (fill, "fill_")):
                try:
                    if how == "full":
                        got = torch.full((1,), v, dtype=dt(d)).tolist()[0]
                    else:
                        got = torch.zeros(1, dtype=dt(d)).fill_(v).tolist()[0]
                    out.append(enc(got) if isinstance(got, float) else got)
                except RuntimeError:
                    out.append("error")
        table[d] = {"full": full, "fill_": fill}
    return table


def main() -> None:
    promote: dict[str, dict[str, str]] = {"tensor": {}, "zero_dim": {}, "scalar": {}}
    for a in DTYPES:
        for b in DTYPES:
            promote["tensor"][f"{a},{b}"] = name((one(a, (2,)) + one(b, (2,))).dtype)
            promote["zero_dim"][f"{a},{b}"] = name((one(a, (2,)) + one(b, ())).dtype)
        for s, v in (("int", 3), ("float", 2.5), ("bool", True)):
            promote["scalar"][f"{a},{s}"] = name((one(a, (2,)) + v).dtype)
    floats = [
        -1.5,
        300.7,
        -200.2,
        1e10,
        -1e10,
        127.9,
        -128.9,
        255.5,
        0.0,
        65535.9,
        -32768.5,
        2.0**31,
        -(2.0**31),
    ]
    specials = [math.nan, math.inf, -math.inf]
    ints = [-1, 256, 300, -129, 70000, 32768, -32769, 2**40 + 7, -(2**40) - 5]
    casts: dict[str, dict[str, list[int]]] = {}
    for src in ("float32", "float64"):
        x = torch.tensor(floats + specials, dtype=dt(src))
        casts[src] = {"input": [enc(v) for v in x.tolist()]}
        for d in SMALL:
            casts[src][d] = x.to(dt(d)).tolist()
    x = torch.tensor(ints, dtype=torch.int64)
    casts["int64"] = {"input": x.tolist()}
    for d in SMALL:
        casts["int64"][d] = x.to(dt(d)).tolist()
    ops: dict[str, dict[str, object]] = {}
    vals = {
        "uint8": [0, 1, 7, 100, 200, 255],
        "int8": [-128, -7, -1, 0, 5, 127],
        "int16": [-32768, -300, -1, 0, 300, 32767],
    }
    for d in SMALL:
        a = torch.tensor(vals[d], dtype=dt(d))
        b = torch.tensor(list(reversed(vals[d])), dtype=dt(d))
        nz = torch.where(b == 0, torch.ones_like(b), b)
        r = {
            "a": a.tolist(),
            "b": b.tolist(),
            "add": (a + b).tolist(),
            "sub": (a - b).tolist(),
            "mul": (a * b).tolist(),
            "add_300": (a + 300).tolist(),
            "mul_3": (a * 3).tolist(),
            "neg": (-a).tolist(),
            "abs": a.abs().tolist(),
            "floordiv": (a // nz).tolist(),
            "remainder": (a % nz).tolist(),
            "truediv": (a / nz).tolist(),
            "truediv_dtype": name((a / nz).dtype),
            "shl_3": (a << 3).tolist(),
            "shr_1": (a >> 1).tolist(),
            "and": (a & b).tolist(),
            "or": (a | b).tolist(),
            "xor": (a ^ b).tolist(),
            "invert": (~a).tolist(),
            "sum": a.sum().item(),
            "sum_dtype": name(a.sum().dtype),
            "prod": a[1:4].prod().item(),
            "cumsum": a.cumsum(0).tolist(),
            "cumsum_dtype": name(a.cumsum(0).dtype),
            "max": a.max().item(),
            "argmin": a.argmin().item(),
            "sort": a.flip(0).sort().values.tolist(),
            "clamp": a.clamp(1, 100).tolist(),
        }
        ops[d] = r
    doc = {
        "torch_version": torch.__version__,
        "promote": promote,
        "casts": casts,
        "ops": ops,
        "fill": fill_table(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
