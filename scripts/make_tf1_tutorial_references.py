"""Write the TensorFlow references of ``tests/test_compat_v1_tutorials.py``.

Each program in ``tests/tf1_programs/`` is run under real TensorFlow 1.x
semantics: its one import line ``import ferrograd.compat.v1 as tf`` is replaced,
textually, by ``import tensorflow.compat.v1 as tf`` and
``tf.disable_v2_behavior()``; nothing else changes. It is given what
``tests/tf1_digits.py`` lists (the same MNIST-shaped digits, served in the same
``next_batch`` order, and the same step counts) and the results it leaves
(accuracies, costs, what it printed, the summary tags it wrote for TensorBoard)
are stored with the TensorFlow and NumPy
versions in ``tests/fixtures/tf1_tutorials/tf_references.json``; the
softmax-regression program's final weights go to ``mnist_softmax.npz``. The
tests compare ferrograd's runs with them, without TensorFlow.

Programs whose start is random (``tf.random_normal`` weights, dropout) are run
three times: with the program's own seed and with two other graph seeds, so the
file records TensorFlow's spread as well as one result. Programs that start
from zeros or from NumPy numbers are deterministic and run once.

Run it with a Python that has TensorFlow 2.x (its ``compat.v1``), tf-keras (for
``tf.layers``), TensorBoard (to read the event files), NumPy and scikit-learn
(for the digits), not ferrograd::

    python -m venv tfenv && tfenv/bin/pip install tensorflow-cpu tf-keras tensorboard scikit-learn
    TF_USE_LEGACY_KERAS=1 tfenv/bin/python scripts/make_tf1_tutorial_references.py [NAME ...]

With names, only those programs are run again (the others keep their stored results).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.layers needs Keras 2 (tf-keras) in TF >= 2.16
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "tf1_tutorials"
sys.path.insert(0, str(ROOT / "tests"))

TF_IMPORT = "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()"
RUNS = 3  # of each program whose start is random


def _plain(v: Any) -> Any:
    """``v`` as JSON: NumPy scalars and arrays become floats, ints and lists."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _event_tags(logdir: Path) -> dict[str, list[str]]:
    """The summary tags of each event file under ``logdir``, by its directory (``.`` for the top),
    with ``<graph>`` for an event that holds the graph."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    out: dict[str, list[str]] = {}
    for path in sorted(logdir.rglob("events.out.tfevents.*")):
        tags: set[str] = set()
        for ev in LegacyEventFileLoader(str(path)).Load():
            tags.update(v.tag for v in ev.summary.value)
            if ev.graph_def:
                tags.add("<graph>")
        out[str(path.parent.relative_to(logdir))] = sorted(tags)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="programs to run (default: all)")
    args = ap.parse_args()

    import tensorflow as tf2
    import tensorflow.compat.v1 as tf
    import tf1_digits

    tf.disable_v2_behavior()
    own_seed = tf.set_random_seed
    path = OUT / "tf_references.json"
    stored = json.loads(path.read_text()) if path.exists() else {"programs": {}}
    names = args.names or list(tf1_digits.PROGRAMS)
    for name in names:
        spec = tf1_digits.PROGRAMS[name]
        runs = []
        for k in range(1 if spec.get("deterministic") else RUNS):
            # Run k: the program's own seed (k = 0), or that seed moved by 1000 * k.
            tf.set_random_seed = lambda s, k=k: own_seed(s + 1000 * k)  # type: ignore[assignment]
            tf.reset_default_graph()
            tf.set_random_seed(17)  # for a program that sets none
            with tempfile.TemporaryDirectory() as tmp:
                g = tf1_digits.run_program(name, tmp, TF_IMPORT)
                run = {
                    key: _plain(g[key])
                    for key in spec["results"]
                    if key not in ("final_weights", "final_bias")
                }
                if "logs" in spec["paths"].values():
                    run["event_tags"] = _event_tags(Path(tmp) / "logs")
            runs.append(run)
            if name == "mnist_softmax":
                np.savez_compressed(
                    OUT / "mnist_softmax.npz",
                    weights=g["final_weights"],
                    bias=g["final_bias"],
                    accuracy=np.float32(g["printed"][-1]),
                    steps=np.int64(spec["given"]["STEPS"]),
                    meta=np.array(
                        json.dumps(
                            {
                                "maker": "scripts/make_tf1_tutorial_references.py",
                                "tensorflow_version": tf2.__version__,
                            }
                        )
                    ),
                )
        tf.set_random_seed = own_seed
        stored["programs"][name] = {"given": spec["given"], "runs": runs}
        print(f"{name}: {runs}", file=sys.stderr)
    stored.update(
        maker="scripts/make_tf1_tutorial_references.py",
        tensorflow_version=tf2.__version__,
        numpy_version=np.__version__,
        python_version=platform.python_version(),
        import_line=TF_IMPORT,
    )
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
