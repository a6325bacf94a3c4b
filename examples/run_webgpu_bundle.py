"""Run a WebGPU bundle written by ``Graph.export_webgpu`` with wgpu-py and
NumPy alone: this file does not import ferrograd.

    python examples/run_webgpu_bundle.py BUNDLE_DIR INPUTS.npz OUTPUTS.npz

``INPUTS.npz`` holds one array per bundle input, by the input's name (see
``manifest.json``); the outputs are written by name (``output0``, ...).
From Python: ``WebGPUBundle(path).run(x, ...)`` returns the outputs as
NumPy arrays.

The manifest format (version 1, the same that ``model.js`` reads in a web
page) is documented in ``docs/webgpu-bundle.md``: buffers (with initial data
from ``data.bin``), one WGSL module per distinct kernel, and the dispatches in
order, each with its bind group 0 and workgroup counts. A bundle exported for
several sizes (``variants``) is run at its first size here; each other size is
a complete bundle in the folder its ``path`` names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import wgpu

_STORAGE = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32}
_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}
# WebGPU's default limits: a bundle asks for more only where it needs more.
_DEFAULT_LIMITS = {
    "max-storage-buffers-per-shader-stage": 8,
    "max-storage-buffer-binding-size": 134217728,
    "max-buffer-size": 268435456,
    "max-compute-workgroups-per-dimension": 65535,
}


class WebGPUBundle:
    """A loaded bundle: its buffers, pipelines and bind groups live on ``device``."""

    def __init__(self, path: str | Path, device: Any = None) -> None:
        root = Path(path)
        m = json.loads((root / "manifest.json").read_text())
        if m.get("format") != "ferrograd-webgpu-bundle" or m.get("version") != 1:
            raise ValueError(f"{root} is not a version-1 ferrograd WebGPU bundle")
        self.manifest = m
        data = (root / m["data"]).read_bytes()
        if device is None:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
            need = {}
            for key, value in m["limits"].items():
                name = key.replace("_", "-")
                if value > adapter.limits[name]:
                    raise RuntimeError(
                        f"the bundle needs {name} = {value}; this adapter allows {adapter.limits[name]}"
                    )
                if value > _DEFAULT_LIMITS.get(name, 0):
                    need[name] = value
            features = m.get("features", [])
            missing = [f for f in features if f not in adapter.features]
            if missing:
                raise RuntimeError(
                    f"the bundle needs the WebGPU features {missing}, which this adapter lacks"
                )
            device = adapter.request_device_sync(required_features=features, required_limits=need)
        self.device = device
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
        self.buffers = []
        for b in m["buffers"]:
            buf = device.create_buffer(size=b["size"], usage=usage)
            if b["data"] is not None:
                off, n = b["data"]
                if n:
                    device.queue.write_buffer(buf, 0, data[off : off + n])
            self.buffers.append(buf)
        pipelines = [
            device.create_compute_pipeline(
                layout="auto",
                compute={
                    "module": device.create_shader_module(code=(root / name).read_text()),
                    "entry_point": m["entry_point"],
                },
            )
            for name in m["shaders"]
        ]
        self.steps = []
        for d in m["dispatches"]:
            pipe = pipelines[d["shader"]]
            group = device.create_bind_group(
                layout=pipe.get_bind_group_layout(0),
                entries=[
                    {"binding": b, "resource": {"buffer": self.buffers[i], "offset": off, "size": size}}
                    for b, i, off, size in d["bindings"]
                ],
            )
            self.steps.append((pipe, group, d["workgroups"]))

    def run(self, *inputs: Any) -> list[np.ndarray]:
        """Run the bundle on ``inputs`` (arrays in the manifest's input order)."""
        specs = self.manifest["inputs"]
        if len(inputs) != len(specs):
            raise TypeError(f"the bundle takes {len(specs)} inputs, got {len(inputs)}")
        for spec, x in zip(specs, inputs, strict=True):
            a = np.asarray(x)
            if list(a.shape) != spec["shape"]:
                raise ValueError(
                    f"input {spec['name']!r} must have shape {spec['shape']}, got {list(a.shape)}"
                )
            stored = _STORAGE[spec["storage"]]
            if stored == np.int32 and a.size and (a.min() < -(2**31) or a.max() >= 2**31):
                raise ValueError(
                    f"input {spec['name']!r} holds values outside int32, which the device stores"
                )
            for c in self.manifest.get("checks", []):
                # indices the run gathers with: the range check the graph makes on the host
                if c["input"] == spec["name"] and a.size and (a.min() < c["min"] or a.max() > c["max"]):
                    raise IndexError(
                        f"input {spec['name']!r} holds indices outside [{c['min']}, {c['max']}] "
                        f"({c['op']} along dim {c['dim']})"
                    )
            raw = np.ascontiguousarray(a.astype(stored)).tobytes()
            raw += b"\0" * (-len(raw) % 4)  # writes are whole words (an odd count of float16 halves)
            self.device.queue.write_buffer(self.buffers[spec["buffer"]], 0, raw)
        encoder = self.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        for pipe, group, (x, y, z) in self.steps:
            cpass.set_pipeline(pipe)
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(x, y, z)
        cpass.end()
        self.device.queue.submit([encoder.finish()])
        outs = []
        for spec in self.manifest["outputs"]:
            stored = np.dtype(_STORAGE[spec["storage"]])
            raw = np.frombuffer(
                bytes(self.device.queue.read_buffer(self.buffers[spec["buffer"]])), dtype=stored
            )
            view = np.lib.stride_tricks.as_strided(
                raw[spec["offset"] :],
                shape=spec["shape"],
                strides=[s * stored.itemsize for s in spec["strides"]],
            )
            want = _DTYPES[spec["dtype"]]
            outs.append(view != 0 if want == np.bool_ else view.astype(want))
        return outs


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit("usage: run_webgpu_bundle.py BUNDLE_DIR INPUTS.npz OUTPUTS.npz")
    bundle = WebGPUBundle(argv[0])
    with np.load(argv[1]) as f:
        inputs = [f[spec["name"]] for spec in bundle.manifest["inputs"]]
    outs = bundle.run(*inputs)
    np.savez(argv[2], **{spec["name"]: o for spec, o in zip(bundle.manifest["outputs"], outs, strict=True)})


if __name__ == "__main__":
    main(sys.argv[1:])
