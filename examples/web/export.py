"""Export the digits CNN trained by ``examples/digits.py`` as a WebGPU bundle
for ``index.html``:

    python examples/digits.py --models cnn            # writes demo-output/digits_cnn.safetensors
    python examples/web/export.py demo-output/digits_cnn.safetensors examples/web/bundle
    python -m ferrograd.serve_bundle examples/web     # open http://127.0.0.1:8000/

The bundle takes one 1x1x8x8 image (pixel values 0-16, as in the data set) and
returns the ten class probabilities. The script also checks that the bundle's
graph predicts the held-out images as the CPU model does.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import ferrograd as fg
import numpy as np

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: export.py CHECKPOINT.safetensors BUNDLE_DIR")
    spec = importlib.util.spec_from_file_location("digits_demo", HERE.parent / "digits.py")
    digits = importlib.util.module_from_spec(spec)
    sys.modules["digits_demo"] = digits
    spec.loader.exec_module(digits)
    ckpt = fg.load(argv[0])
    model = digits.MODELS[ckpt["metadata"]["arch"]]()
    model.load_state_dict(ckpt["model"])
    model.eval()
    data = digits.load_split(ckpt["metadata"]["seed"])
    cpu = digits.logits_of(model, data.x_test).numpy().argmax(1)
    model.to("gpu")

    @fg.compile
    def predict(x):
        return fg.softmax(model(x), dim=-1)

    x = fg.zeros(1, 1, 8, 8, device="gpu")
    predict.graph(x).export_webgpu(argv[1])
    xt = data.x_test.numpy()
    gpu = np.array([predict(fg.tensor(xt[i : i + 1], device="gpu")).numpy().argmax() for i in range(len(xt))])
    print(
        f"exported to {argv[1]}; held-out predictions equal to the CPU's: {int((gpu == cpu).sum())}/{len(cpu)}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
