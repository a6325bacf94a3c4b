"""Write the model-zoo references in ``tests/fixtures/zoo/`` with PyTorch.

The stored files were made with PyTorch 2.15 on CPU; each file records the
version it was made with under ``torch_version``. Run with a Python that has
``torch`` and ``numpy``::

    python scripts/make_zoo_references.py [name ...]

For every model in ``tests/zoo_models.py`` it draws the initial weights with
NumPy from a fixed seed, makes fixed NumPy inputs, trains ``STEPS`` steps in
float64 and saves ``<name>.npz`` holding ``init/<key>`` (state_dict),
``data/<name>`` (inputs), ``losses`` (per step), ``grad/<param>`` (first
step's gradients, before clipping), ``final/<key>`` (state_dict after
training), ``extra/<name>`` (results computed from the trained model, such
as generated tokens) and ``torch_version``. ``mnist_script.npz`` holds what
the examples' mnist ``main`` printed (``log``) and the weights it saved; the
other whole-script files (``word_lm_script``, ``reinforce_script``,
``actor_critic_script``, ``time_sequence_script``, ``vae_script``, ``dcgan_script``,
``style_script``, ``superres_script``, ``mnist_rnn_script``, ``imagenet_script``, ``regression_script``,
``forward_forward_script``, ``siamese_script``) hold their printed ``log``, ``init/`` weights, inputs
and what the script saved or computed (``final/``, ``actions``,
``predictions``, ``image/``). ``tests/test_model_zoo.py`` replays the same source with
ferrograd and compares.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from zoo_models import (  # noqa: E402
    IMAGENET_ARGV,
    ZOO,
    actor_critic_script,
    actor_critic_script_init,
    build_mnist,
    dcgan_script,
    dcgan_script_data,
    dcgan_script_init,
    forward_forward_script,
    forward_forward_script_data,
    forward_forward_script_init,
    generate_sine_wave,
    imagenet_script,
    imagenet_script_data,
    imagenet_script_init,
    init_weights,
    mnist_rnn_script,
    mnist_rnn_script_data,
    mnist_rnn_script_init,
    mnist_script,
    mnist_script_data,
    recording_categorical,
    regression_script,
    regression_script_init,
    reinforce_script,
    reinforce_script_init,
    siamese_script,
    siamese_script_data,
    siamese_script_init,
    style_script,
    style_script_data,
    style_script_init,
    superres_script,
    superres_script_data,
    superres_script_init,
    time_sequence_script,
    time_sequence_script_init,
    to_numpy,
    train,
    vae_script,
    vae_script_data,
    vae_script_init,
    word_lm_script,
    word_lm_script_data,
    word_lm_script_init,
)

OUT = ROOT / "tests" / "fixtures" / "zoo"


def make(index: int, name: str) -> Path:
    """Train model ``name`` in PyTorch and write its reference file."""
    spec = ZOO[name]
    torch.manual_seed(0)
    model = spec.build(torch).double()
    state = {k: to_numpy(v) for k, v in model.state_dict().items()}
    params = {k for k, _ in model.named_parameters()}
    init = init_weights(state, params, seed=1000 + index)
    # A state_dict key that names a tied parameter (``decoder.weight`` tied
    # to ``encoder.weight``) gets the value drawn for the parameter itself.
    names = {id(p): k for k, p in model.named_parameters()}
    for key, value in model.state_dict(keep_vars=True).items():
        if key not in params and id(value) in names:
            init[key] = init[names[id(value)]]
    model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    data = spec.make_data(np.random.default_rng(2000 + index))
    result = train(torch, spec, model, data)
    arrays = {"torch_version": np.array(torch.__version__), "losses": result["losses"]}
    arrays |= {f"init/{k}": v for k, v in init.items()}
    arrays |= {f"data/{k}": v for k, v in data.items()}
    arrays |= {f"grad/{k}": v for k, v in result["grads"].items()}
    arrays |= {f"final/{k}": v for k, v in result["final"].items()}
    arrays |= {f"extra/{k}": v for k, v in result["extra"].items()}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.npz"
    np.savez_compressed(path, **arrays)
    return path


def make_mnist_script() -> Path:
    """Run the mnist example's ``main`` in PyTorch; store its output and saved weights."""
    import tempfile

    torch.manual_seed(0)
    model = build_mnist(torch).double()
    state = {k: to_numpy(v) for k, v in model.state_dict().items()}
    init = init_weights(state, {k for k, _ in model.named_parameters()}, seed=3000)
    data = mnist_script_data(np.random.default_rng(4000))
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "mnist_cnn.pt"
        log = mnist_script(torch, init, data, str(saved))
        final = {k: to_numpy(v) for k, v in torch.load(saved, weights_only=True).items()}
    return _write("mnist_script", log, init=init, data=data, final=final)


def make_word_lm_script() -> Path:
    """Run word_language_model's ``main.py``; store its output and the model it saved (whole)."""
    import tempfile

    init = word_lm_script_init(torch)
    data = word_lm_script_data(np.random.default_rng(6000))
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "model.pt"
        log = word_lm_script(torch, init, data, str(saved))
        with open(saved, "rb") as f:
            final = {k: to_numpy(v) for k, v in torch.load(f, weights_only=False).state_dict().items()}
    return _write("word_lm_script", log, init=init, data=data, final=final)


def make_reinforce_script() -> Path:
    """Run reinforcement_learning's ``reinforce.py``; store its output, PyTorch's sampled
    actions and the trained policy."""
    init = reinforce_script_init(torch)
    actions: list[int] = []
    log, final = reinforce_script(torch, init, recording_categorical(torch, actions))
    return _write("reinforce_script", log, actions=np.array(actions, dtype=np.int64), init=init, final=final)


def make_actor_critic_script() -> Path:
    """Run reinforcement_learning's ``actor_critic.py``, as :func:`make_reinforce_script`."""
    init = actor_critic_script_init(torch)
    actions: list[int] = []
    log, final = actor_critic_script(torch, init, recording_categorical(torch, actions))
    return _write(
        "actor_critic_script",
        log,
        actions=np.array(actions, dtype=np.int64),
        init=init,
        final=final,
    )


def make_time_sequence_script() -> Path:
    """Run generate_sine_wave.py and time_sequence_prediction's ``train.py``; store the output
    and predictions."""
    import tempfile

    init = time_sequence_script_init(torch)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "traindata.pt")
        generate_sine_wave(torch, path)
        log, predictions = time_sequence_script(torch, init, path)
    return _write("time_sequence_script", log, predictions=np.stack(predictions), init=init)


def make_vae_script() -> Path:
    """Run vae's ``main.py``; store its output and the images it saved (as arrays)."""
    init = vae_script_init(torch)
    data = vae_script_data(np.random.default_rng(12000))
    log, images = vae_script(torch, init, data)
    return _write("vae_script", log, init=init, data=data, image=images)


def make_dcgan_script() -> Path:
    """Run dcgan's ``main.py``; store its output, images and last checkpoints."""
    import tempfile

    init = dcgan_script_init(torch)
    data = dcgan_script_data(np.random.default_rng(15000))
    with tempfile.TemporaryDirectory() as tmp:
        log, images = dcgan_script(torch, init, data, tmp)
        final = {}
        for net in ("netG", "netD"):
            sd = torch.load(Path(tmp) / f"{net}_epoch_1.pth", weights_only=True)
            final |= {f"{net}.{k}": to_numpy(v) for k, v in sd.items()}
    return _write("dcgan_script", log, init=init, data=data, image=images, final=final)


def make_style_script() -> Path:
    """Run fast_neural_style's ``neural_style.py`` train and stylize; store its output, the
    checkpoints and model it saved and the stylized image."""
    import tempfile

    init = style_script_init(torch)
    data = style_script_data(np.random.default_rng(17000))
    with tempfile.TemporaryDirectory() as tmp:
        log, images = style_script(torch, init, data, tmp)
        saved = {}
        for sub in ("checkpoints", "models"):
            for name in sorted(os.listdir(Path(tmp) / sub)):
                sd = torch.load(Path(tmp) / sub / name, weights_only=True)
                saved |= {f"{name}:{k}": to_numpy(v) for k, v in sd.items()}
    return _write("style_script", log, init=init, data=data, image=images, final=saved)


def make_superres_script() -> Path:
    """Run super_resolution's ``main.py`` and ``super_resolve.py``; store the output, the
    models it saved (whole, as state_dicts here) and the super-resolved Y channel."""
    import tempfile

    init = superres_script_init(torch)
    data = superres_script_data(np.random.default_rng(19000))
    with tempfile.TemporaryDirectory() as tmp:
        log, images = superres_script(torch, init, data, tmp)
        saved = {}
        for epoch in (1, 2):
            model = torch.load(Path(tmp) / f"model_epoch_{epoch}.pth", weights_only=False)
            saved |= {f"model_epoch_{epoch}.pth:{k}": to_numpy(v) for k, v in model.state_dict().items()}
    return _write("superres_script", log, init=init, data=data, image=images, final=saved)


def make_mnist_rnn_script() -> Path:
    """Run mnist_rnn's ``main``, in full and with ``--dry-run``; store both outputs and the
    weights the full run saved."""
    import tempfile

    init = mnist_rnn_script_init(torch)
    data = mnist_rnn_script_data(np.random.default_rng(21000))
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "mnist_rnn.pt"
        log_dry = mnist_rnn_script(torch, init, data, str(saved), dry_run=True)
        log = mnist_rnn_script(torch, init, data, str(saved))
        final = {k: to_numpy(v) for k, v in torch.load(saved, weights_only=True).items()}
    return _write("mnist_rnn_script", log, log_dry_run=np.array(log_dry), init=init, data=data, final=final)


def imagenet_checkpoint_arrays(
    torch_: object, path: Path, with_momentum: bool = True
) -> dict[str, np.ndarray]:
    """What a checkpoint of imagenet's ``save_checkpoint`` holds, as arrays: ``state_dict``
    entries, the SGD momentum buffers (flattened, concatenated in parameter order, as float32 to keep
    the file small), ``best_acc1``, ``epoch``, the
    learning rate and the scheduler's ``last_epoch`` (the momentum buffers left out unless
    ``with_momentum``)."""
    ckpt = torch_.load(path)
    out = {f"state_dict:{k}": to_numpy(v) for k, v in ckpt["state_dict"].items()}
    if with_momentum:
        buffers = [
            ckpt["optimizer"]["state"][i]["momentum_buffer"] for i in sorted(ckpt["optimizer"]["state"])
        ]
        out["momentum"] = np.concatenate([to_numpy(b).reshape(-1) for b in buffers]).astype(np.float32)
    out["best_acc1"] = to_numpy(ckpt["best_acc1"])
    out["epoch"] = np.array(ckpt["epoch"])
    out["lr"] = np.array([g["lr"] for g in ckpt["optimizer"]["param_groups"]])
    out["last_epoch"] = np.array(ckpt["scheduler"]["last_epoch"])
    return out


def make_imagenet_script() -> Path:
    """Run imagenet's ``main.py`` for two epochs, then resumed from its checkpoint for a third;
    store both outputs and both checkpoint files (``checkpoint.pth.tar``, ``model_best.pth.tar``)."""
    import tempfile

    init = imagenet_script_init(torch)
    data = imagenet_script_data(np.random.default_rng(23001))
    with tempfile.TemporaryDirectory() as tmp:
        log = imagenet_script(torch, init, data, tmp, IMAGENET_ARGV)
        resume = ["--epochs", "3", *IMAGENET_ARGV[2:], "--resume", str(Path(tmp) / "checkpoint.pth.tar")]
        log_resumed = imagenet_script(torch, init, data, tmp, resume)
        saved = {}
        for name in ("checkpoint.pth.tar", "model_best.pth.tar"):
            arrays = imagenet_checkpoint_arrays(torch, Path(tmp) / name, name == "checkpoint.pth.tar")
            saved |= {f"{name}:{k}": v for k, v in arrays.items()}
    return _write(
        "imagenet_script",
        log,
        log_resumed=np.array(log_resumed),
        init=init,
        data=data,
        final=saved,
    )


def make_regression_script() -> Path:
    """Run regression's ``main.py``; store its output and ``fc``'s final weights."""
    init = regression_script_init(torch)
    log, final = regression_script(torch, init)
    return _write("regression_script", log, init=init, final=final)


def make_forward_forward_script() -> Path:
    """Run mnist_forward_forward's ``main.py``; store its output and the trained layers."""
    init = forward_forward_script_init(torch)
    data = forward_forward_script_data(np.random.default_rng(27000))
    log, final = forward_forward_script(torch, init, data)
    return _write("forward_forward_script", log, init=init, data=data, final=final)


def make_siamese_script() -> Path:
    """Run siamese_network's ``main``, in full and with ``--dry-run``; store both outputs and
    the weights the full run saved."""
    import tempfile

    init = siamese_script_init(torch)
    data = siamese_script_data(np.random.default_rng(30000))
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "siamese_network.pt"
        log_dry = siamese_script(torch, init, data, str(saved), dry_run=True)
        log = siamese_script(torch, init, data, str(saved))
        final = {k: to_numpy(v) for k, v in torch.load(saved, weights_only=True).items()}
    return _write("siamese_script", log, log_dry_run=np.array(log_dry), init=init, data=data, final=final)


def _write(
    name: str,
    log: list[str],
    *,
    init: dict[str, np.ndarray] | None = None,
    data: dict[str, np.ndarray] | None = None,
    image: dict[str, np.ndarray] | None = None,
    final: dict[str, np.ndarray] | None = None,
    **extra: np.ndarray,
) -> Path:
    """Write ``<name>.npz``: the PyTorch version, the printed ``log``, the ``extra`` arrays,
    then each group of arrays under its prefix (``init/<key>``, ``data/``, ``image/``, ``final/``)."""
    arrays = {"torch_version": np.array(torch.__version__), "log": np.array(log)}
    arrays |= {k: np.asarray(v) for k, v in extra.items()}
    for prefix, group in (("init", init), ("data", data), ("image", image), ("final", final)):
        arrays |= {f"{prefix}/{k}": v for k, v in (group or {}).items()}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.npz"
    np.savez_compressed(path, **arrays)
    return path


SCRIPTS = {
    "word_lm_script": make_word_lm_script,
    "reinforce_script": make_reinforce_script,
    "actor_critic_script": make_actor_critic_script,
    "time_sequence_script": make_time_sequence_script,
    "vae_script": make_vae_script,
    "dcgan_script": make_dcgan_script,
    "style_script": make_style_script,
    "superres_script": make_superres_script,
    "mnist_rnn_script": make_mnist_rnn_script,
    "imagenet_script": make_imagenet_script,
    "regression_script": make_regression_script,
    "forward_forward_script": make_forward_forward_script,
    "siamese_script": make_siamese_script,
}


def main() -> None:
    """Write the references named on the command line, or all of them."""
    names = sys.argv[1:] or [*ZOO, "mnist_script", *SCRIPTS]
    for index, name in enumerate(ZOO):
        if name in names:
            path = make(index, name)
            print(f"{path.name}: {path.stat().st_size} bytes, torch {torch.__version__}")
    if "mnist_script" in names:
        path = make_mnist_script()
        print(f"{path.name}: {path.stat().st_size} bytes, torch {torch.__version__}")
    for name, make_script in SCRIPTS.items():
        if name in names:
            path = make_script()
            print(f"{path.name}: {path.stat().st_size} bytes, torch {torch.__version__}")


if __name__ == "__main__":
    main()
