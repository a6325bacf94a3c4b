"""TF1 tutorial-style programs, run as written but for their import line.

The programs in ``tests/tf1_programs/`` follow the classic TensorFlow 1.x
tutorials (softmax regression "for beginners", the deep MNIST CNN, a
``tf.layers`` CNN in name scopes with TensorBoard summaries, the TensorBoard
tutorial's MLP with variable and image summaries, an MLP saved and restored
in a second session). They read
MNIST-shaped data: scikit-learn's bundled 8x8 digits, each pixel made a 3x3
block and padded to 28x28 (as MNIST centres 20x20 digits in 28x28), flattened
to 784 values in [0, 1], with one-hot labels and ``next_batch`` as the old
``input_data`` helper served them. Nothing is downloaded.

The softmax regression is deterministic (zero initial weights), so its final
weights and test accuracy are checked against a stored reference computed by
PyTorch on the same batches (``scripts/make_tf1_tutorial_references.py``).
"""

from __future__ import annotations

import glob
import json
import runpy
from pathlib import Path
from typing import Any

import ferrograd.compat.v1 as tf
import numpy as np
import pytest

PROGRAMS = Path(__file__).resolve().parent / "tf1_programs"
REFERENCE = Path(__file__).resolve().parent / "fixtures" / "tf1_tutorials" / "mnist_softmax.npz"
SOFTMAX_STEPS = 300


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


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
        datasets = pytest.importorskip(
            "sklearn.datasets",
            reason="sklearn is not installed (pip install -e '.[demo]' for the digits data)",
        )
        d = datasets.load_digits()
        order = np.random.default_rng(42).permutation(len(d.target))
        big = np.kron(d.images[order] / 16.0, np.ones((3, 3)))  # 24x24
        x = np.pad(big, ((0, 0), (2, 2), (2, 2))).reshape(-1, 784).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[d.target[order]]
        self.train = DataSet(x[:1440], y[:1440], seed)
        self.test = DataSet(x[1440:], y[1440:], seed)


def run_program(name: str, **given: Any) -> dict[str, Any]:
    """Run ``tf1_programs/<name>.py`` as a script with ``given`` as its globals; its globals after."""
    return runpy.run_path(str(PROGRAMS / f"{name}.py"), init_globals=given, run_name="__main__")


def test_mnist_for_beginners_matches_the_reference(capsys):
    if not REFERENCE.exists():
        pytest.skip(f"no stored reference {REFERENCE.name} (run scripts/make_tf1_tutorial_references.py)")
    ref = np.load(REFERENCE)
    assert int(ref["steps"]) == SOFTMAX_STEPS
    out = run_program("mnist_softmax", mnist=MnistLikeDigits(), STEPS=SOFTMAX_STEPS)
    printed = float(capsys.readouterr().out.split()[-1])
    # float32 gradient descent at lr 0.5 over 300 steps: the weights agree to float32 rounding (2e-6 seen), the accuracy exactly
    # (or within one test image, if a borderline prediction flips).
    np.testing.assert_allclose(out["final_weights"], ref["weights"], rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(out["final_bias"], ref["bias"], rtol=1e-4, atol=2e-5)
    assert abs(printed - float(ref["accuracy"])) <= 1.0 / 357 + 1e-6, (printed, float(ref["accuracy"]))
    assert printed > 0.9


def test_deep_mnist_cnn_learns(capsys):
    out = run_program("mnist_deep", mnist=MnistLikeDigits(), STEPS=60)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("step 0, training accuracy") and lines[-1].startswith("test accuracy")
    # Adam at 1e-4 from random weights: chance (about 0.1) at step 0, well above it after 60 steps of 50.
    assert out["train_accuracies"][0] < 0.35
    assert out["test_accuracy"] > 0.6, lines


def test_layers_cnn_in_name_scopes_with_summaries(tmp_path, capsys):
    out = run_program("mnist_layers_summaries", mnist=MnistLikeDigits(), STEPS=80, LOGDIR=str(tmp_path))
    assert out["final_step"] == 80
    assert out["test_accuracy"] > 0.85, capsys.readouterr().out
    # Names follow the scopes, as TensorBoard shows them.
    assert out["loss"].name.startswith("loss/")
    assert out["accuracy"].name.startswith("accuracy/")
    assert out["x"].name == "input/x-input:0"
    trainable = [v.name for v in tf.trainable_variables()]
    assert trainable[:2] == ["conv2d/kernel:0", "conv2d/bias:0"], trainable
    events = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert len(events) == 1
    tags = _event_tags(Path(events[0]))
    assert {"loss/loss", "accuracy/accuracy", "model/logits"} <= tags, tags


def test_tensorboard_tutorial_with_variable_and_image_summaries(tmp_path, capsys):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    (logdir / "stale").write_text("from an earlier run")  # the program clears the directory first
    out = run_program("mnist_with_summaries", mnist=MnistLikeDigits(), STEPS=41, LOG_DIR=str(logdir))
    out["sess"].close()
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 5 and lines[-1].startswith("Accuracy at step 40:")
    assert out["final_accuracy"] > 0.85, lines
    assert not (logdir / "stale").exists()
    (train_events,) = glob.glob(str(logdir / "train" / "events.out.tfevents.*"))
    (test_events,) = glob.glob(str(logdir / "test" / "events.out.tfevents.*"))
    tags = _event_tags(Path(train_events))
    want = {
        "input_reshape/input/image/0",
        "input_reshape/input/image/9",
        "layer1/weights/summaries/mean",
        "layer1/weights/summaries/stddev",
        "layer2/biases/summaries/histogram",
        "layer1/Wx_plus_b/pre_activations",
        "dropout/dropout_keep_probability",
        "cross_entropy",
        "accuracy",
    }
    assert want <= tags, sorted(want - tags)
    assert "accuracy" in _event_tags(Path(test_events))


def test_save_restore_tutorial(tmp_path, capsys):
    out = run_program(
        "mnist_save_restore", mnist=MnistLikeDigits(), STEPS=60, MODEL_PATH=str(tmp_path / "model.ckpt")
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[2] == f"Model saved in file: {tmp_path / 'model.ckpt'}", lines
    assert out["restored_accuracy"] == out["first_accuracy"]
    assert out["first_accuracy"] > 0.8 and out["final_accuracy"] >= out["first_accuracy"] - 0.02, lines
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt")


def _event_tags(path: Path) -> set[str]:
    """The summary tags an event file holds."""
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (to read the event file)")
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    return {v.tag for ev in LegacyEventFileLoader(str(path)).Load() for v in ev.summary.value}


def test_reference_file_documents_its_maker():
    if not REFERENCE.exists():
        pytest.skip(f"no stored reference {REFERENCE.name} (run scripts/make_tf1_tutorial_references.py)")
    meta = json.loads(str(np.load(REFERENCE)["meta"]))
    assert meta["maker"] == "scripts/make_tf1_tutorial_references.py" and meta["torch_version"]
