"""TF1 tutorial programs, run as written but for their import line, against TensorFlow's results.

The programs in ``tests/tf1_programs/`` follow the classic TensorFlow 1.x tutorials: basic
operations in a session, linear regression, logistic regression, a raw-``tf.Variable``
multilayer perceptron, a raw-``tf.nn`` CNN, an autoencoder (RMSProp), nearest neighbour, TensorBoard basics (scalar
summaries and the graph) and in more depth (histograms of variables and gradients),
softmax regression "for beginners", the deep MNIST CNN, a
``tf.layers`` CNN in name scopes with TensorBoard summaries, the TensorBoard tutorial's MLP
with variable and image summaries, an MLP saved and restored in a second session. They read
MNIST-shaped data (``tests/tf1_digits.py``: scikit-learn's digits at 28x28, one-hot labels,
``next_batch``).

``scripts/make_tf1_tutorial_references.py`` ran each program under real TensorFlow 1.x
semantics (``import tensorflow.compat.v1 as tf`` in place of the import line, nothing else
changed) on the same data and batches, and stored what it reached in
``tests/fixtures/tf1_tutorials/``; TensorFlow is not needed here. Programs that start from
zeros or NumPy numbers are deterministic: ferrograd must match TensorFlow's numbers to float32
rounding (the accuracy within one test image). Programs with random initial weights draw them
from a different RNG than TensorFlow's, so their accuracy must reach the lowest TensorFlow
reached over three graph seeds, less ``RANDOM_START_SLACK`` (TensorFlow's own spread over those
seeds is up to 0.034); a loss, at most the highest TensorFlow reached plus 10%.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import Any

import ferrograd.compat.v1 as tf
import numpy as np
import pytest
import tf1_digits

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf1_tutorials"
REFERENCES = FIXTURES / "tf_references.json"
SOFTMAX = FIXTURES / "mnist_softmax.npz"
ONE_IMAGE = 1.0 / 357 + 1e-6  # one test image of the 357
RANDOM_START_SLACK = 0.03  # about 11 test images
RANDOM_START_LOSS_SLACK = 0.1  # of a loss: TensorFlow's own spread over seeds is 4% for the autoencoder


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def run_program(name: str, workdir: Path) -> dict[str, Any]:
    """Run ``tf1_programs/<name>.py`` with ferrograd as ``tf`` (see ``tf1_digits.run_program``)."""
    if name in tf1_digits.USES_DATA:
        pytest.importorskip(
            "sklearn.datasets",
            reason="sklearn is not installed (pip install -e '.[demo]' for the digits data)",
        )
    return tf1_digits.run_program(name, workdir)


def tf_runs(name: str) -> list[dict[str, Any]]:
    """What TensorFlow reached running the program (one run, or one per graph seed)."""
    if not REFERENCES.exists():
        pytest.skip(f"no stored reference {REFERENCES.name} (run scripts/make_tf1_tutorial_references.py)")
    ref = json.loads(REFERENCES.read_text())["programs"][name]
    assert ref["given"] == tf1_digits.PROGRAMS[name]["given"], "the reference was made with other settings"
    return ref["runs"]


def reaches_tf(name: str, key: str, got: float) -> None:
    """``got`` is at least the lowest accuracy TensorFlow reached, less the slack."""
    lowest = min(r[key] for r in tf_runs(name))
    assert got >= lowest - RANDOM_START_SLACK, (name, key, got, [r[key] for r in tf_runs(name)])


def loss_within_tf(name: str, key: str, got: float) -> None:
    """``got`` (a loss) is at most the highest TensorFlow reached, plus ``RANDOM_START_LOSS_SLACK`` of it."""
    highest = max(r[key] for r in tf_runs(name))
    assert got <= highest * (1 + RANDOM_START_LOSS_SLACK), (name, key, got, [r[key] for r in tf_runs(name)])


def test_basic_operations_print_what_tensorflow_prints(tmp_path):
    out = run_program("basic_operations", tmp_path)
    (ref,) = tf_runs("basic_operations")
    assert out["printed"] == ref["printed"]


def test_linear_regression_matches_tensorflow(tmp_path):
    out = run_program("linear_regression", tmp_path)
    (ref,) = tf_runs("linear_regression")
    # 3400 float32 SGD steps from the same NumPy-drawn W and b: equal to float32 rounding.
    for key in ("training_cost", "final_W", "final_b", "testing_cost"):
        np.testing.assert_allclose(float(out[key]), ref[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert out["printed"][-4] == "Optimization Finished!"


def test_logistic_regression_matches_tensorflow(tmp_path):
    out = run_program("logistic_regression", tmp_path)
    (ref,) = tf_runs("logistic_regression")
    np.testing.assert_allclose(float(out["avg_cost"]), ref["avg_cost"], rtol=1e-5)
    assert abs(float(out["accuracy_value"]) - ref["accuracy_value"]) <= ONE_IMAGE
    assert out["printed"][-1].startswith("Accuracy:")


def test_multilayer_perceptron_reaches_tensorflows_accuracy(tmp_path):
    out = run_program("multilayer_perceptron", tmp_path)
    assert len([line for line in out["printed"] if line.startswith("Epoch:")]) == 10
    reaches_tf("multilayer_perceptron", "accuracy_value", float(out["accuracy_value"]))


def test_raw_cnn_reaches_tensorflows_accuracy(tmp_path):
    out = run_program("convolutional_network_raw", tmp_path)
    steps = [line for line in out["printed"] if line.startswith("Step ")]
    assert len(steps) == 11 and steps[-1].startswith("Step 100, Minibatch Loss= "), out["printed"]
    reaches_tf("convolutional_network_raw", "test_accuracy", float(out["test_accuracy"]))


def test_tensorboard_basics_match_tensorflow_and_write_the_events(tmp_path):
    out = run_program("tensorboard_basic", tmp_path)
    (ref,) = tf_runs("tensorboard_basic")
    np.testing.assert_allclose(float(out["avg_cost"]), ref["avg_cost"], rtol=1e-5)
    assert abs(float(out["accuracy_value"]) - ref["accuracy_value"]) <= ONE_IMAGE
    (events,) = glob.glob(str(tmp_path / "logs" / "events.out.tfevents.*"))
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (to read the event file)")
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    loaded = list(LegacyEventFileLoader(events).Load())
    assert any(ev.graph_def for ev in loaded), "the FileWriter was given the graph"
    values = [(ev.step, v.tag, v.simple_value) for ev in loaded for v in ev.summary.value]
    # As TF1 names them: the "Loss" and "Accuracy" scopes hold "loss" and "accuracy".
    assert {tag for _, tag, _ in values} == {"loss_1", "accuracy_1"}
    assert _event_tags_by_dir(tmp_path / "logs") == ref["event_tags"]
    losses = [(step, val) for step, tag, val in values if tag == "loss_1"]
    assert [step for step, _ in losses] == list(range(3 * 14))  # EPOCHS * (1440 // 100) steps
    assert losses[-1][1] < losses[0][1]


def test_autoencoder_reconstructs_as_well_as_tensorflow(tmp_path):
    out = run_program("autoencoder", tmp_path)
    assert out["printed"][0].startswith("Step 1: Minibatch Loss: ")
    loss_within_tf("autoencoder", "test_loss", float(out["test_loss"]))


def test_mnist_for_beginners_matches_tensorflow(tmp_path):
    if not SOFTMAX.exists():
        pytest.skip(f"no stored reference {SOFTMAX.name} (run scripts/make_tf1_tutorial_references.py)")
    ref = np.load(SOFTMAX)
    assert int(ref["steps"]) == tf1_digits.PROGRAMS["mnist_softmax"]["given"]["STEPS"]
    out = run_program("mnist_softmax", tmp_path)
    printed = float(out["printed"][-1])
    # float32 gradient descent at lr 0.5 over 300 steps: the weights agree to float32 rounding, the accuracy exactly
    # (or within one test image, if a borderline prediction flips).
    np.testing.assert_allclose(out["final_weights"], ref["weights"], rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(out["final_bias"], ref["bias"], rtol=1e-4, atol=2e-5)
    assert abs(printed - float(ref["accuracy"])) <= ONE_IMAGE, (printed, float(ref["accuracy"]))
    (run,) = tf_runs("mnist_softmax")
    assert run["printed"] == [str(ref["accuracy"])]


def test_deep_mnist_cnn_reaches_tensorflows_accuracy(tmp_path):
    out = run_program("mnist_deep", tmp_path)
    lines = out["printed"]
    assert lines[0].startswith("step 0, training accuracy") and lines[-1].startswith("test accuracy")
    # Adam at 1e-4 from random weights: chance (about 0.1) at step 0, then as TensorFlow after 60 steps of 50.
    assert out["train_accuracies"][0] < 0.35
    reaches_tf("mnist_deep", "test_accuracy", float(out["test_accuracy"]))


def test_layers_cnn_in_name_scopes_with_summaries(tmp_path):
    out = run_program("mnist_layers_summaries", tmp_path)
    assert out["final_step"] == 80
    reaches_tf("mnist_layers_summaries", "test_accuracy", float(out["test_accuracy"]))
    # Names follow the scopes, as TensorBoard shows them.
    assert out["loss"].name.startswith("loss/")
    assert out["accuracy"].name.startswith("accuracy/")
    assert out["x"].name == "input/x-input:0"
    trainable = [v.name for v in tf.trainable_variables()]
    assert trainable[:2] == ["conv2d/kernel:0", "conv2d/bias:0"], trainable
    events = glob.glob(str(tmp_path / "logs" / "events.out.tfevents.*"))
    assert len(events) == 1
    tags = _event_tags(Path(events[0]))
    assert {"loss/loss", "accuracy/accuracy", "model/logits"} <= tags, tags
    assert _event_tags_by_dir(tmp_path / "logs") == tf_runs("mnist_layers_summaries")[0]["event_tags"]


def test_tensorboard_tutorial_with_variable_and_image_summaries(tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    (logdir / "stale").write_text("from an earlier run")  # the program clears the directory first
    out = run_program("mnist_with_summaries", tmp_path)
    lines = out["printed"]
    assert len(lines) == 5 and lines[-1].startswith("Accuracy at step 40:")
    reaches_tf("mnist_with_summaries", "final_accuracy", float(out["final_accuracy"]))
    assert not (logdir / "stale").exists()
    (train_events,) = glob.glob(str(logdir / "train" / "events.out.tfevents.*"))
    (test_events,) = glob.glob(str(logdir / "test" / "events.out.tfevents.*"))
    tags = _event_tags(Path(train_events))
    want = {
        "input_reshape/input/image/0",
        "input_reshape/input/image/9",
        "layer1/weights/summaries/mean_1",  # the reduce_mean op is "Mean": TF1 compares names without case
        "layer1/weights/summaries/stddev_1",  # the "stddev" scope holds the name
        "layer2/biases/summaries/histogram",
        "layer1/Wx_plus_b/pre_activations",
        "dropout/dropout_keep_probability",
        "cross_entropy_1",
        "accuracy_1",
    }
    assert want <= tags, sorted(want - tags)
    assert "accuracy_1" in _event_tags(Path(test_events))
    assert _event_tags_by_dir(logdir) == tf_runs("mnist_with_summaries")[0]["event_tags"]


def test_save_restore_tutorial(tmp_path):
    out = run_program("mnist_save_restore", tmp_path)
    lines = out["printed"]
    assert lines[2] == f"Model saved in file: {tmp_path / 'model.ckpt'}", lines
    assert out["restored_accuracy"] == out["first_accuracy"]
    reaches_tf("mnist_save_restore", "first_accuracy", float(out["first_accuracy"]))
    reaches_tf("mnist_save_restore", "final_accuracy", float(out["final_accuracy"]))
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt")


def _event_tags(path: Path) -> set[str]:
    """The summary tags an event file holds."""
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (to read the event file)")
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    return {v.tag for ev in LegacyEventFileLoader(str(path)).Load() for v in ev.summary.value}


def _event_tags_by_dir(logdir: Path) -> dict[str, list[str]]:
    """Each event file's summary tags (``<graph>`` for the graph) by its directory under ``logdir``,
    as the reference script records TensorFlow's."""
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (to read the event file)")
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


def test_tensorboard_in_depth_reaches_tensorflow_with_its_tags(tmp_path):
    out = run_program("tensorboard_advanced", tmp_path)
    reaches_tf("tensorboard_advanced", "accuracy_value", float(out["accuracy_value"]))
    # Histograms of "W1:0" are tagged "W1_0", as TF1 cleans the name.
    assert _event_tags_by_dir(tmp_path / "logs") == tf_runs("tensorboard_advanced")[0]["event_tags"]


def test_nearest_neighbor_matches_tensorflow(tmp_path):
    out = run_program("nearest_neighbor", tmp_path)
    (ref,) = tf_runs("nearest_neighbor")
    assert out["accuracy"] == pytest.approx(ref["accuracy"], abs=1e-9)
    assert out["printed"][-1].startswith("Accuracy:")


def test_references_document_their_maker():
    if not REFERENCES.exists() or not SOFTMAX.exists():
        pytest.skip("no stored references (run scripts/make_tf1_tutorial_references.py)")
    refs = json.loads(REFERENCES.read_text())
    assert refs["maker"] == "scripts/make_tf1_tutorial_references.py"
    assert re.fullmatch(r"2\.\d+\.\d+", refs["tensorflow_version"]), refs["tensorflow_version"]
    assert refs["import_line"].startswith("import tensorflow.compat.v1 as tf\n")
    assert set(refs["programs"]) == set(tf1_digits.PROGRAMS)
    meta = json.loads(str(np.load(SOFTMAX)["meta"]))
    assert meta["maker"] == refs["maker"] and meta["tensorflow_version"] == refs["tensorflow_version"]
