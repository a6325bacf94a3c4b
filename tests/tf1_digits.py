"""MNIST-shaped data for the TF1 tutorial programs in ``tests/tf1_programs/``, and how each is run.

scikit-learn's bundled 8x8 digits, each pixel made a 3x3 block and padded to 28x28 (as MNIST
centres 20x20 digits in 28x28), flattened to 784 values in [0, 1], with one-hot labels and
``next_batch`` as the old ``input_data`` helper served them. Nothing is downloaded. Imported by
the tests (with ferrograd) and by ``scripts/make_tf1_tutorial_references.py`` (with TensorFlow),
so it imports neither.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

PROGRAMS_DIR = Path(__file__).resolve().parent / "tf1_programs"
IMPORT_LINE = "import ferrograd.compat.v1 as tf"

# What each program is given (data, step counts; paths made under a temporary directory) and
# the globals it leaves that hold its result. The tests and the reference script both use it.
PROGRAMS: dict[str, dict[str, Any]] = {
    "basic_operations": {"given": {}, "paths": {}, "results": ["printed"], "deterministic": True},
    "linear_regression": {
        "given": {"EPOCHS": 200},
        "paths": {},
        "results": ["training_cost", "final_W", "final_b", "testing_cost"],
        "deterministic": True,
    },
    "logistic_regression": {
        "given": {"EPOCHS": 3},
        "paths": {},
        "results": ["accuracy_value", "avg_cost"],
        "deterministic": True,
    },
    "multilayer_perceptron": {
        "given": {"EPOCHS": 10},
        "paths": {},
        "results": ["accuracy_value", "avg_cost"],
    },
    "convolutional_network_raw": {"given": {"STEPS": 100}, "paths": {}, "results": ["test_accuracy"]},
    "tensorboard_basic": {
        "given": {"EPOCHS": 3},
        "paths": {"LOGS_PATH": "logs"},
        "results": ["accuracy_value", "avg_cost"],
        "deterministic": True,
    },
    "nearest_neighbor": {
        "given": {"TESTS": 100},
        "paths": {},
        "results": ["accuracy"],
        "deterministic": True,
    },
    "tensorboard_advanced": {
        "given": {"EPOCHS": 3},
        "paths": {"LOGS_PATH": "logs"},
        "results": ["accuracy_value", "avg_cost"],
    },
    "autoencoder": {"given": {"STEPS": 100}, "paths": {}, "results": ["test_loss"]},
    "mnist_softmax": {
        "given": {"STEPS": 300},
        "paths": {},
        "results": ["printed", "final_weights", "final_bias"],
        "deterministic": True,
    },
    "mnist_deep": {"given": {"STEPS": 60}, "paths": {}, "results": ["test_accuracy", "train_accuracies"]},
    "mnist_layers_summaries": {
        "given": {"STEPS": 80},
        "paths": {"LOGDIR": "logs"},
        "results": ["test_accuracy"],
    },
    "mnist_with_summaries": {
        "given": {"STEPS": 41},
        "paths": {"LOG_DIR": "logs"},
        "results": ["final_accuracy"],
    },
    "mnist_save_restore": {
        "given": {"STEPS": 60},
        "paths": {"MODEL_PATH": "model.ckpt"},
        "results": ["first_accuracy", "restored_accuracy", "final_accuracy"],
    },
}
USES_DATA = {name for name in PROGRAMS if name != "basic_operations" and name != "linear_regression"}


class DataSet:
    """What ``mnist.train`` was: ``images`` (N, 784), one-hot ``labels`` and ``next_batch``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, seed: int = 0) -> None:
        self.images = images
        self.labels = labels
        self.num_examples = len(images)
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(self.num_examples)
        self._pos = 0

    def next_batch(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        if self._pos + batch_size > self.num_examples:
            self._order = self._rng.permutation(self.num_examples)
            self._pos = 0
        idx = self._order[self._pos : self._pos + batch_size]
        self._pos += batch_size
        return self.images[idx], self.labels[idx]


class MnistLikeDigits:
    """``read_data_sets(..., one_hot=True)``'s result, made from the 8x8 digits at 28x28."""

    def __init__(self, seed: int = 0) -> None:
        from sklearn import datasets

        d = datasets.load_digits()
        order = np.random.default_rng(42).permutation(len(d.target))
        big = np.kron(d.images[order] / 16.0, np.ones((3, 3)))  # 24x24
        x = np.pad(big, ((0, 0), (2, 2), (2, 2))).reshape(-1, 784).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[d.target[order]]
        self.train = DataSet(x[:1440], y[:1440], seed)
        self.test = DataSet(x[1440:], y[1440:], seed)


def program_source(name: str, import_line: str = IMPORT_LINE) -> str:
    """The program's text, with its one import line replaced by ``import_line``."""
    text = (PROGRAMS_DIR / f"{name}.py").read_text()
    if len(re.findall(rf"^{re.escape(IMPORT_LINE)}$", text, flags=re.M)) != 1:
        raise ValueError(f"{name}.py must import `{IMPORT_LINE}` exactly once")
    return re.sub(rf"^{re.escape(IMPORT_LINE)}$", import_line.replace("\\", "\\\\"), text, flags=re.M)


def run_program(name: str, workdir: str | os.PathLike, import_line: str = IMPORT_LINE) -> dict[str, Any]:
    """Run ``tf1_programs/<name>.py`` as a script (its import line replaced by ``import_line``),
    given what ``PROGRAMS`` lists (paths made in ``workdir``); its globals after, with what it
    printed as ``printed`` (a list of lines). A session left in ``sess`` is closed."""
    spec = PROGRAMS[name]
    given: dict[str, Any] = {"__name__": "__main__", **spec["given"]}
    for var, rel in spec["paths"].items():
        given[var] = str(Path(workdir) / rel)
    if name in USES_DATA:
        given["mnist"] = MnistLikeDigits()
    code = compile(program_source(name, import_line), str(PROGRAMS_DIR / f"{name}.py"), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, given)  # noqa: S102 - the program is a file of this repository
    given["printed"] = out.getvalue().splitlines()
    sess = given.get("sess")
    if sess is not None and hasattr(sess, "close"):  # an InteractiveSession left open
        sess.close()
    print(out.getvalue(), end="")
    return given
