"""Shared model zoo for ``test_model_zoo.py`` and ``scripts/make_zoo_references.py``.

Every model is written the way the PyTorch examples write it, but against a
framework module passed in as ``torch``: the reference script passes real
PyTorch, the test passes ``ferrograd``. Both run exactly this source, so the
only difference between a stored reference and the test's result is the
framework underneath.

Each entry of :data:`ZOO` is a :class:`ZooModel` holding

* ``build(torch)``: returns the ``nn.Module`` (cast to float64 by the caller);
* ``make_data(rng)``: fixed NumPy inputs (float64 or int64 arrays);
* ``loss(torch, model, data, step)``: the training loss for one step, where
  ``data`` maps names to framework tensors;
* ``optimizer(torch, model)``: the optimizer;
* ``clip``: optional max-norm for ``nn.utils.clip_grad_norm_`` before stepping.

:func:`train` runs ``STEPS`` steps through a closure (so ``optim.LBFGS`` uses
the same loop) and returns the per-step losses, the first step's gradients
and the final ``state_dict``, all as NumPy arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

STEPS = 3


@dataclass
class ZooModel:
    """One model of the zoo: how to build, feed, score and optimise it."""

    build: Callable[[Any], Any]
    make_data: Callable[[np.random.Generator], dict[str, np.ndarray]]
    loss: Callable[[Any, Any, dict[str, Any], int], Any]
    optimizer: Callable[[Any, Any], Any]
    clip: float | None = None


def init_weights(state: dict[str, np.ndarray], params: set[str], seed: int) -> dict[str, np.ndarray]:
    """Draw initial values for ``params`` from ``seed``; keep buffers as given.

    Matrices and kernels get ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``; 1-d
    weights (norm scales) get ``1 + U(-0.1, 0.1)``; biases get ``U(-0.3, 0.3)``.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for key in sorted(state):
        arr = state[key]
        if key not in params:
            out[key] = np.array(arr)
        elif arr.ndim >= 2:
            bound = 1.0 / np.sqrt(np.prod(arr.shape[1:]))
            out[key] = rng.uniform(-bound, bound, arr.shape)
        elif key.endswith("weight"):
            out[key] = 1.0 + rng.uniform(-0.1, 0.1, arr.shape)
        else:
            out[key] = rng.uniform(-0.3, 0.3, arr.shape)
    return out


def to_numpy(t: Any) -> np.ndarray:
    """Copy a framework tensor to NumPy."""
    return np.array(t.detach().cpu().numpy())


def train(torch: Any, spec: ZooModel, model: Any, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """Train ``model`` for ``STEPS`` steps; return losses, first grads, final weights."""
    tensors = {k: torch.tensor(v) for k, v in data.items()}
    opt = spec.optimizer(torch, model)
    losses = []
    first_grads: dict[str, np.ndarray] = {}
    for step in range(STEPS):
        calls = [0]

        def closure(step: int = step, calls: list[int] = calls) -> Any:
            opt.zero_grad()
            loss = spec.loss(torch, model, tensors, step)
            loss.backward()
            if step == 0 and calls[0] == 0:
                for name, p in model.named_parameters():
                    first_grads[name] = to_numpy(p.grad)
            if spec.clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
            calls[0] += 1
            return loss

        if isinstance(opt, torch.optim.LBFGS):
            loss = opt.step(closure)
        else:
            loss = closure()
            opt.step()
        losses.append(float(loss.item()))
    final = {k: to_numpy(v) for k, v in model.state_dict().items()}
    return {"losses": np.array(losses), "grads": first_grads, "final": final}


# --- (1) VAE, after pytorch/examples vae/main.py -----------------------------


def build_vae(torch: Any) -> Any:
    """The examples' VAE, shrunk to 16 inputs, 8 hidden units, 2 latents."""
    nn = torch.nn
    F = torch.nn.functional

    class VAE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(16, 8)
            self.fc21 = nn.Linear(8, 2)
            self.fc22 = nn.Linear(8, 2)
            self.fc3 = nn.Linear(2, 8)
            self.fc4 = nn.Linear(8, 16)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, 16))
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z), mu, logvar

    return VAE()


def vae_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Four 16-pixel 'images' in [0, 1] and one noise draw per step."""
    return {"x": rng.uniform(0, 1, (4, 16)), "eps": rng.standard_normal((STEPS, 4, 2))}


def vae_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """BCE (sum) + KLD, as in the examples' ``loss_function``."""
    F = torch.nn.functional
    recon, mu, logvar = model(d["x"], d["eps"][step])
    bce = F.binary_cross_entropy(recon, d["x"].view(-1, 16), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


# --- (2) super-resolution, after examples super_resolution/model.py ----------


def build_superres(torch: Any) -> Any:
    """ESPCN-style net: three convs and ``PixelShuffle(2)``, 4 channels."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self, upscale_factor: int = 2) -> None:
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 4, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(4, 4, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(4, upscale_factor**2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            return self.pixel_shuffle(self.conv3(x))

    return Net()


def superres_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Two 4x4 low-resolution inputs and their 8x8 targets."""
    return {"x": rng.uniform(0, 1, (2, 1, 4, 4)), "y": rng.uniform(0, 1, (2, 1, 8, 8))}


def superres_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``nn.MSELoss`` between output and target."""
    return torch.nn.MSELoss()(model(d["x"]), d["y"])


# --- (3) REINFORCE, after examples reinforcement_learning/reinforce.py -------


def build_policy(torch: Any) -> Any:
    """Two-layer softmax policy over 2 actions from a 4-d state."""
    nn = torch.nn
    F = torch.nn.functional

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.affine1 = nn.Linear(4, 8)
            self.affine2 = nn.Linear(8, 2)

        def forward(self, x):
            x = F.relu(self.affine1(x))
            return F.softmax(self.affine2(x), dim=1)

    return Policy()


def policy_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """An episode of 6 states, the actions taken and normalised returns."""
    returns = rng.standard_normal(6)
    return {
        "states": rng.standard_normal((6, 4)),
        "actions": rng.integers(0, 2, 6).astype(np.int64),
        "returns": (returns - returns.mean()) / returns.std(),
    }


def policy_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``-sum(Categorical(probs).log_prob(actions) * returns)``."""
    from_probs = torch.distributions.Categorical(model(d["states"]))
    return (-from_probs.log_prob(d["actions"]) * d["returns"]).sum()


# --- (4) time-series LSTM + LBFGS, after examples time_sequence_prediction ----


def build_sequence(torch: Any) -> Any:
    """Two stacked ``LSTMCell`` layers and a ``Linear`` read-out."""
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 6)
            self.lstm2 = nn.LSTMCell(6, 6)
            self.linear = nn.Linear(6, 1)

        def forward(self, input):
            outputs = []
            n = input.size(0)
            h_t = torch.zeros(n, 6, dtype=torch.double)
            c_t = torch.zeros(n, 6, dtype=torch.double)
            h_t2 = torch.zeros(n, 6, dtype=torch.double)
            c_t2 = torch.zeros(n, 6, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                outputs += [self.linear(h_t2)]
            return torch.cat(outputs, dim=1)

    return Sequence()


def sequence_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Two noisy sine waves of 6 samples; predict the next sample."""
    t = np.arange(7) * 0.5 + rng.uniform(0, 3, (2, 1))
    wave = np.sin(t)
    return {"input": wave[:, :-1], "target": wave[:, 1:]}


def sequence_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``nn.MSELoss`` on the one-step-ahead prediction."""
    return torch.nn.MSELoss()(model(d["input"]), d["target"])


# --- (5) ResNet basic block, after torchvision resnet.BasicBlock -------------


def build_resnet(torch: Any) -> Any:
    """Stem conv, one ``BasicBlock`` with a 1x1 projection, pool, classifier."""
    nn = torch.nn
    F = torch.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, inplanes: int, planes: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=2, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=2, bias=False), nn.BatchNorm2d(planes)
            )

        def forward(self, x):
            identity = self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.layer1 = BasicBlock(4, 6)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(6, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.layer1(x)
            x = torch.flatten(self.avgpool(x), 1)
            return self.fc(x)

    return Net()


def resnet_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Four CIFAR-shaped 3x8x8 images and labels."""
    return {"x": rng.standard_normal((4, 3, 8, 8)), "y": rng.integers(0, 10, 4).astype(np.int64)}


def resnet_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``F.cross_entropy`` in train mode (batch statistics, running stats update)."""
    return torch.nn.functional.cross_entropy(model(d["x"]), d["y"])


# --- (6) Transformer LM, after examples word_language_model ------------------


def build_transformer(torch: Any) -> Any:
    """Embedding, learned positions, one ``TransformerEncoderLayer``, decoder."""
    nn = torch.nn

    class TransformerModel(nn.Module):
        def __init__(self, ntoken: int = 11, ninp: int = 8, nhead: int = 2, nhid: int = 16) -> None:
            super().__init__()
            self.encoder = nn.Embedding(ntoken, ninp)
            self.pos = nn.Parameter(torch.zeros(5, ninp, dtype=torch.double))
            layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.0, batch_first=True)
            self.transformer_encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.decoder = nn.Linear(ninp, ntoken)

        def forward(self, src):
            n = src.size(1)
            mask = nn.Transformer.generate_square_subsequent_mask(n, dtype=torch.double)
            x = self.encoder(src) * 8**0.5 + self.pos[:n]
            x = self.transformer_encoder(x, mask=mask, is_causal=True)
            return self.decoder(x)

    return TransformerModel()


def transformer_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Three sequences of 5 tokens from an 11-word vocabulary; targets shifted."""
    tokens = rng.integers(0, 11, (3, 6)).astype(np.int64)
    return {"src": tokens[:, :-1], "tgt": tokens[:, 1:]}


def transformer_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``nn.CrossEntropyLoss`` over every position."""
    out = model(d["src"])
    return torch.nn.CrossEntropyLoss()(out.reshape(-1, 11), d["tgt"].reshape(-1))


def _adam(lr: float) -> Callable[[Any, Any], Any]:
    return lambda torch, model: torch.optim.Adam(model.parameters(), lr=lr)


ZOO: dict[str, ZooModel] = {
    "vae": ZooModel(build_vae, vae_data, vae_loss, _adam(1e-2)),
    "superres": ZooModel(build_superres, superres_data, superres_loss, _adam(1e-2)),
    "reinforce": ZooModel(build_policy, policy_data, policy_loss, _adam(1e-2)),
    "lstm_lbfgs": ZooModel(
        build_sequence,
        sequence_data,
        sequence_loss,
        lambda torch, model: torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=5),
    ),
    "resnet_block": ZooModel(
        build_resnet,
        resnet_data,
        resnet_loss,
        lambda torch, model: torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
    ),
    "transformer_lm": ZooModel(build_transformer, transformer_data, transformer_loss, _adam(1e-2), clip=0.5),
}
