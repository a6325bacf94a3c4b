"""Export the digits CNN trained by ``examples/digits.py`` as a WebGPU bundle
for ``index.html``:

    python examples/digits.py --models cnn --out-dir demo-output   # writes demo-output/digits_cnn.safetensors
    python examples/web/export.py demo-output/digits_cnn.safetensors examples/web/bundle
    python -m ferrograd.serve_bundle examples/web     # open http://127.0.0.1:8000/

The bundle takes one 1x1x8x8 image of raw pixels (values 0-16, as in the data
set and as the page draws them) and returns the ten class probabilities: the
standardisation the model was trained with (the train split's pixel mean and
standard deviation, from the checkpoint's seed) is part of the exported graph.
The script also checks that the bundle's graph predicts the held-out images as
the model does on the CPU.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ferrograd as fg
import numpy as np

HERE = Path(__file__).resolve().parent


@dataclass
class Exported:
    """What ``export`` wrote and checked."""

    manifest: dict  # the bundle's manifest.json
    images: np.ndarray  # the held-out images, raw pixels, (N, 1, 8, 8) float32
    labels: np.ndarray  # their classes, (N,)
    cpu_probs: np.ndarray  # the exported function on the CPU, (N, 10)
    gpu_pred: np.ndarray  # the compiled graph's classes on the GPU, (N,)
    predict: Callable[[fg.Tensor], fg.Tensor]  # the exported function, its model back on the CPU


def _digits():
    """examples/digits.py as a module (loaded once)."""
    if "digits_demo" in sys.modules:
        return sys.modules["digits_demo"]
    spec = importlib.util.spec_from_file_location("digits_demo", HERE.parent / "digits.py")
    digits = importlib.util.module_from_spec(spec)
    sys.modules["digits_demo"] = digits  # its dataclasses look their module up
    spec.loader.exec_module(digits)
    return digits


def export(checkpoint: str | Path, bundle_dir: str | Path, check: bool = True) -> Exported:
    """Load a checkpoint of ``examples/digits.py`` and export ``softmax(model((pixels - mean) / std))``
    for one 1x1x8x8 image as a WebGPU bundle in ``bundle_dir`` (needs a WebGPU adapter).
    ``check``: also run the compiled graph on every held-out image on ferrograd's GPU
    (``gpu_pred``; empty without it)."""
    digits = _digits()
    ckpt = fg.load(checkpoint)
    model = digits.MODELS[ckpt["metadata"]["arch"]]()
    model.load_state_dict(ckpt["model"])
    model.eval()
    data = digits.load_split(ckpt["metadata"]["seed"])
    mean, std = data.mean, data.std

    def predict(x):
        return fg.softmax(model((x - mean) / std), dim=-1)

    # The data set's pixels are integers 0..16: the held-out split, unstandardised exactly.
    images = np.rint(data.x_test.numpy() * std + mean).astype(np.float32)
    with fg.no_grad():
        cpu_probs = predict(fg.tensor(images)).numpy()
    model.to("gpu")
    compiled = fg.compile(predict)
    x = fg.zeros(1, 1, 8, 8, device="gpu")
    compiled(x)
    manifest = compiled.graph(x).export_webgpu(bundle_dir)
    gpu_pred = np.array(
        [compiled(fg.tensor(images[i : i + 1], device="gpu")).numpy().argmax() for i in range(len(images))]
        if check
        else [],
        dtype=np.int64,
    )
    model.to("cpu")
    return Exported(manifest, images, data.y_test.numpy(), cpu_probs, gpu_pred, predict)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: export.py CHECKPOINT.safetensors BUNDLE_DIR")
    e = export(argv[0], argv[1])
    cpu = e.cpu_probs.argmax(1)
    print(
        f"exported to {argv[1]}; held-out predictions equal to the CPU's: "
        f"{int((e.gpu_pred == cpu).sum())}/{len(cpu)} (accuracy {float((cpu == e.labels).mean()):.2%})"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
