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
* ``clip``: optional max-norm for ``nn.utils.clip_grad_norm_`` before stepping;
* ``scheduler(torch, opt)``: optional learning-rate scheduler, stepped once
  per step (the examples step it once per epoch; here a step is an epoch);
* ``step(torch, model, opt, data, step)``: optional whole training step for
  models whose examples do not fit the one-loss loop (DCGAN's two
  optimizers); it returns the step's losses as a list of floats;
* ``after(torch, model, data)``: optional extra results computed from the
  trained model (GPT generation), a dict of NumPy arrays;
* ``infer(torch, model, data)``: the eval-mode forward calls that the
  compile test replays, as ``(module, args)`` pairs.

:func:`train` runs ``STEPS`` steps through a closure (so ``optim.LBFGS`` uses
the same loop) and returns the per-step losses, the first step's gradients
(of the parameters that got one) and the final ``state_dict``, all as NumPy
arrays.

Dropout probabilities are constructor arguments, as in the examples, and the
zoo builds with ``0.0`` for the reference comparison: the two frameworks
draw different random masks.
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
    loss: Callable[[Any, Any, dict[str, Any], int], Any] | None
    optimizer: Callable[[Any, Any], Any]
    clip: float | None = None
    scheduler: Callable[[Any, Any], Any] | None = None
    step: Callable[[Any, Any, Any, dict[str, Any], int], list[float]] | None = None
    after: Callable[[Any, Any, dict[str, Any]], dict[str, np.ndarray]] | None = None
    infer: Callable[[Any, Any, dict[str, Any]], list[tuple[Any, tuple]]] | None = None


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


def train(
    torch: Any, spec: ZooModel, model: Any, data: dict[str, np.ndarray], device: Any = None
) -> dict[str, Any]:
    """Train ``model`` for ``STEPS`` steps; return losses, first grads, final weights.

    ``device``: where the inputs go (the caller moves the model); ``None`` keeps them on the CPU.
    """
    tensors = {k: torch.tensor(v) if device is None else torch.tensor(v).to(device) for k, v in data.items()}
    opt = spec.optimizer(torch, model)
    sched = spec.scheduler(torch, opt) if spec.scheduler is not None else None
    losses: list[Any] = []
    first_grads: dict[str, np.ndarray] = {}
    for step in range(STEPS):
        if spec.step is not None:
            losses.append(spec.step(torch, model, opt, tensors, step))
            if step == 0:
                first_grads.update(
                    (n, to_numpy(p.grad)) for n, p in model.named_parameters() if p.grad is not None
                )
            continue
        calls = [0]

        def closure(step: int = step, calls: list[int] = calls) -> Any:
            opt.zero_grad()
            loss = spec.loss(torch, model, tensors, step)
            loss.backward()
            if step == 0 and calls[0] == 0:
                for name, p in model.named_parameters():
                    if p.grad is not None:
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
        if sched is not None:
            sched.step()
        losses.append(float(loss.item()))
    final = {k: to_numpy(v) for k, v in model.state_dict().items()}
    extra = spec.after(torch, model, tensors) if spec.after is not None else {}
    return {"losses": np.array(losses), "grads": first_grads, "final": final, "extra": extra}


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


# --- (7) MNIST classifier, after pytorch/examples mnist/main.py --------------


def build_mnist(torch: Any, dropout: tuple[float, float] = (0.0, 0.0)) -> Any:
    """The examples' ``Net`` on 10x10 digits: two convs, max-pool, two linears.

    The examples use ``Dropout(0.25)`` and ``Dropout(0.5)``; ``dropout``
    holds the two probabilities.
    """
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(dropout[0])
            self.dropout2 = nn.Dropout(dropout[1])
            self.fc1 = nn.Linear(72, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    return Net()


def mnist_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Five normalised 1x10x10 'digits' and their labels."""
    x = (rng.uniform(0, 1, (5, 1, 10, 10)) - 0.1307) / 0.3081
    return {"x": x, "y": rng.integers(0, 10, 5).astype(np.int64)}


def mnist_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``F.nll_loss`` of the log-probabilities, as in the examples' ``train``."""
    output = model(d["x"])
    return torch.nn.functional.nll_loss(output, d["y"])


# --- (8, 9) word language model, after examples word_language_model ----------


def build_rnn_lm(torch: Any, rnn_type: str, dropout: float = 0.0) -> Any:
    """The examples' ``RNNModel`` (LSTM or GRU), 2 layers, tied weights."""
    nn = torch.nn
    F = torch.nn.functional

    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError("When using the tied flag, nhid must be equal to emsize")
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                )
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    return RNNModel(rnn_type, 12, 6, 6, 2, dropout=dropout, tie_weights=True)


BPTT = 4


def rnn_lm_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A token stream batchified to 13 rows x 3 columns (``batchify``)."""
    return {"source": rng.integers(0, 12, (BPTT * STEPS + 1, 3)).astype(np.int64)}


def repackage_hidden(torch: Any, h: Any) -> Any:
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(torch, v) for v in h)


def get_batch(source: Any, i: int) -> tuple[Any, Any]:
    """The examples' ``get_batch``: ``BPTT`` rows of inputs and the next tokens."""
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def rnn_lm_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """One ``bptt`` chunk; the hidden state carries over, repackaged."""
    data, targets = get_batch(d["source"], step * BPTT)
    hidden = d["hidden"] if "hidden" in d else model.init_hidden(d["source"].size(1))
    hidden = repackage_hidden(torch, hidden)
    output, hidden = model(data, hidden)
    d["hidden"] = hidden
    return torch.nn.NLLLoss()(output, targets)


class ManualSGD:
    """The examples' update: ``model.zero_grad()`` and ``p.data.add_(p.grad, alpha=-lr)``."""

    def __init__(self, model: Any, lr: float) -> None:
        self.model = model
        self.lr = lr

    def zero_grad(self) -> None:
        self.model.zero_grad()

    def step(self) -> None:
        for p in self.model.parameters():
            p.data.add_(p.grad, alpha=-self.lr)


def rnn_lm_infer(torch: Any, model: Any, d: dict[str, Any]) -> list[tuple[Any, tuple]]:
    """Forward of the first chunk from a zero hidden state."""
    data, _ = get_batch(d["source"], 0)
    return [(model, (data, model.init_hidden(d["source"].size(1))))]


# --- (10) DCGAN, after examples dcgan/main.py --------------------------------

NZ = 4


def build_dcgan(torch: Any) -> Any:
    """The examples' ``Generator`` and ``Discriminator`` for 1x8x8 images."""
    nn = torch.nn
    nc, ngf, ndf = 1, 4, 4

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            torch.nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            torch.nn.init.normal_(m.weight, 1.0, 0.02)
            torch.nn.init.zeros_(m.bias)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                # input is Z, going into a convolution
                nn.ConvTranspose2d(NZ, ngf * 2, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                # state size. (ngf*2) x 4 x 4
                nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
                nn.Tanh(),
                # state size. (nc) x 8 x 8
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                # input is (nc) x 8 x 8
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                # state size. (ndf) x 4 x 4
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                # state size. (ndf*2) x 2 x 2
                nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            output = self.main(input)
            return output.view(-1, 1).squeeze(1)

    class GAN(nn.Module):
        """Holds both nets so that one ``state_dict`` covers the pair."""

        def __init__(self):
            super().__init__()
            self.netG = Generator()
            self.netG.apply(weights_init)
            self.netD = Discriminator()
            self.netD.apply(weights_init)

    return GAN()


def dcgan_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Three real 1x8x8 images in [-1, 1] and one noise batch per step."""
    return {
        "real": np.tanh(rng.standard_normal((3, 1, 8, 8))),
        "noise": rng.standard_normal((STEPS, 3, NZ, 1, 1)),
    }


def dcgan_optimizers(torch: Any, model: Any) -> tuple[Any, Any]:
    """``optimizerD`` and ``optimizerG``: Adam with ``betas=(0.5, 0.999)``."""
    optimizerD = torch.optim.Adam(model.netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(model.netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    return optimizerD, optimizerG


def dcgan_step(torch: Any, model: Any, opt: Any, d: dict[str, Any], step: int) -> list[float]:
    """The examples' alternating step: D on real and detached fake, then G."""
    netD, netG = model.netD, model.netG
    optimizerD, optimizerG = opt
    criterion = torch.nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    ############################
    # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
    ###########################
    # train with real
    netD.zero_grad()
    real_cpu = d["real"]
    batch_size = real_cpu.size(0)
    label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=real_cpu.device)
    output = netD(real_cpu)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean().item()
    # train with fake
    noise = d["noise"][step]
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean().item()
    errD = errD_real + errD_fake
    optimizerD.step()
    ############################
    # (2) Update G network: maximize log(D(G(z)))
    ###########################
    netG.zero_grad()
    label.fill_(real_label)  # fake labels are real for generator cost
    output = netD(fake)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean().item()
    optimizerG.step()
    return [errD.item(), errG.item(), D_x, D_G_z1, D_G_z2]


def dcgan_infer(torch: Any, model: Any, d: dict[str, Any]) -> list[tuple[Any, tuple]]:
    """Generator on the first noise batch; discriminator on the real batch."""
    return [(model.netG, (d["noise"][0],)), (model.netD, (d["real"],))]


# --- (11) fast neural style, after examples fast_neural_style ----------------


def build_style(torch: Any) -> Any:
    """The examples' ``TransformerNet`` (shrunk) and a small frozen ``Vgg16``."""
    nn = torch.nn
    from collections import namedtuple

    class ConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super().__init__()
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            out = self.reflection_pad(x)
            out = self.conv2d(out)
            return out

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = nn.InstanceNorm2d(channels, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            out = out + residual
            return out

    class UpsampleConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
            out = self.reflection_pad(x_in)
            out = self.conv2d(out)
            return out

    class TransformerNet(nn.Module):
        def __init__(self):
            super().__init__()
            # Initial convolution layers
            self.conv1 = ConvLayer(3, 4, kernel_size=5, stride=1)
            self.in1 = nn.InstanceNorm2d(4, affine=True)
            self.conv2 = ConvLayer(4, 8, kernel_size=3, stride=2)
            self.in2 = nn.InstanceNorm2d(8, affine=True)
            # Residual layers
            self.res1 = ResidualBlock(8)
            # Upsampling Layers
            self.deconv1 = UpsampleConvLayer(8, 4, kernel_size=3, stride=1, upsample=2)
            self.in4 = nn.InstanceNorm2d(4, affine=True)
            self.deconv3 = ConvLayer(4, 3, kernel_size=5, stride=1)
            # Non-linearities
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.res1(y)
            y = self.relu(self.in4(self.deconv1(y)))
            y = self.deconv3(y)
            return y

    class Vgg16(nn.Module):
        """Two slices of a VGG-like feature stack, frozen."""

        def __init__(self, requires_grad=False):
            super().__init__()
            self.slice1 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True))
            self.slice2 = nn.Sequential(
                nn.MaxPool2d(2, 2), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(inplace=True)
            )
            if not requires_grad:
                for param in self.parameters():
                    param.requires_grad = False

        def forward(self, X):
            h = self.slice1(X)
            h_relu1_2 = h
            h = self.slice2(h)
            h_relu2_2 = h
            vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2"])
            out = vgg_outputs(h_relu1_2, h_relu2_2)
            return out

    class Style(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = TransformerNet()
            self.vgg = Vgg16(requires_grad=False)

    return Style()


def gram_matrix(y: Any) -> Any:
    """The examples' ``utils.gram_matrix``."""
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch: Any) -> Any:
    """The examples' ``utils.normalize_batch``: ImageNet mean/std, in place ``div_``."""
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def style_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Two 3x8x8 content images and one style image, pixel values in [0, 255]."""
    return {"x": rng.uniform(0, 255, (2, 3, 8, 8)), "style": rng.uniform(0, 255, (1, 3, 8, 8))}


def style_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """Content loss on ``relu2_2`` plus the Gram-matrix style loss (examples' ``train``)."""
    mse_loss = torch.nn.MSELoss()
    transformer, vgg = model.transformer, model.vgg
    content_weight, style_weight = 1.0, 10.0
    style = d["style"].clone().repeat(2, 1, 1, 1)
    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]
    x = d["x"].clone()
    n_batch = len(x)
    y = transformer(x)
    y = normalize_batch(y)
    x = normalize_batch(x)
    features_y = vgg(y)
    features_x = vgg(x)
    content_loss = content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)
    style_loss = 0.0
    for ft_y, gm_s in zip(features_y, gram_style, strict=True):
        gm_y = gram_matrix(ft_y)
        style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
    style_loss *= style_weight
    total_loss = content_loss + style_loss
    return total_loss


def style_infer(torch: Any, model: Any, d: dict[str, Any]) -> list[tuple[Any, tuple]]:
    """The transformer net on the content images; the feature net on them."""
    return [(model.transformer, (d["x"],)), (model.vgg, (d["x"] / 255.0,))]


# --- (12) nanoGPT, after karpathy/nanoGPT model.py ---------------------------

GPT_BLOCK = 6
GPT_VOCAB = 11


def build_gpt(torch: Any, dropout: float = 0.0) -> Any:
    """nanoGPT's ``GPT`` (2 layers, 2 heads, 8 channels, block size 6)."""
    GPTConfig, GPT = gpt_classes(torch)
    return GPT(GPTConfig(dropout=dropout))


def gpt_classes(torch: Any) -> tuple[Any, Any]:
    """nanoGPT's model.py: its ``GPTConfig`` (defaults shrunk) and ``GPT`` classes."""
    import math
    from dataclasses import dataclass

    nn = torch.nn
    F = torch.nn.functional

    class LayerNorm(nn.Module):
        """LayerNorm but with an optional bias."""

        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer(
                "bias",
                torch.tril(torch.ones(config.block_size, config.block_size)).view(
                    1, 1, config.block_size, config.block_size
                ),
            )

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            y = self.resid_dropout(self.c_proj(y))
            return y

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            x = self.c_fc(x)
            x = self.gelu(x)
            x = self.c_proj(x)
            x = self.dropout(x)
            return x

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    @dataclass
    class GPTConfig:
        block_size: int = GPT_BLOCK
        vocab_size: int = GPT_VOCAB
        n_layer: int = 2
        n_head: int = 2
        n_embd: int = 8
        dropout: float = 0.0
        bias: bool = True

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.vocab_size is not None
            assert config.block_size is not None
            self.config = config
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.dropout),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=LayerNorm(config.n_embd, bias=config.bias),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            # weight tying
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
            pos = torch.arange(0, t, dtype=torch.long, device=device)  # shape (t)
            tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
            pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (t, n_embd)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                # inference-time mini-optimization: only forward the lm_head on the very last position
                logits = self.lm_head(x[:, [-1], :])  # note: using list [-1] to preserve the time dim
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
            import inspect

            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
            use_fused = fused_available and device_type == "cuda"
            extra_args = dict(fused=True) if use_fused else dict()
            optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
            return optimizer

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def crop_block_size(self, block_size):
            # model surgery to decrease the block size if necessary
            assert block_size <= self.config.block_size
            self.config.block_size = block_size
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
            for block in self.transformer.h:
                if hasattr(block.attn, "bias"):
                    block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

        def estimate_mfu(self, fwdbwd_per_iter, dt):
            """estimate model flops utilization (MFU) in units of A100 bfloat16 peak FLOPS"""
            N = self.get_num_params()
            cfg = self.config
            L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.block_size
            flops_per_token = 6 * N + 12 * L * H * Q * T
            flops_per_fwdbwd = flops_per_token * T
            flops_per_iter = flops_per_fwdbwd * fwdbwd_per_iter
            flops_achieved = flops_per_iter * (1.0 / dt)  # per second
            flops_promised = 312e12  # A100 GPU bfloat16 peak flops is 312 TFLOPS
            mfu = flops_achieved / flops_promised
            return mfu

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                # if the sequence context is growing too long we must crop it at block_size
                idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size :]
                # forward the model to get the logits for the index in the sequence
                logits, _ = self(idx_cond)
                # pluck the logits at the final step and scale by desired temperature
                logits = logits[:, -1, :] / temperature
                # optionally crop the logits to only the top k options
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                # apply softmax to convert logits to (normalized) probabilities
                probs = F.softmax(logits, dim=-1)
                # sample from the distribution
                idx_next = torch.multinomial(probs, num_samples=1)
                # append sampled index to the running sequence and continue
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPTConfig, GPT


def gpt_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Two batches of token windows (``get_batch``) and a 2-token prompt."""
    tokens = rng.integers(0, GPT_VOCAB, (2, GPT_BLOCK + 1)).astype(np.int64)
    return {"x": tokens[:, :-1], "y": tokens[:, 1:], "prompt": np.array([[1, 4], [7, 2]], dtype=np.int64)}


def gpt_loss(torch: Any, model: Any, d: dict[str, Any], step: int) -> Any:
    """``logits, loss = model(X, Y)``."""
    logits, loss = model(d["x"], d["y"])
    return loss


def gpt_optimizer(torch: Any, model: Any) -> Any:
    """nanoGPT's ``configure_optimizers``: AdamW, decay only for matrices."""
    return model.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu")


def topk_probs(torch: Any, model: Any, idx: Any, temperature: float, top_k: int) -> Any:
    """The filtered next-token distribution ``generate`` samples from, spelled out."""
    with torch.no_grad():
        logits, _ = model(idx[:, -GPT_BLOCK:])
        logits = logits[:, -1, :] / temperature
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        return torch.nn.functional.softmax(logits, dim=-1)


def gpt_after(torch: Any, model: Any, d: dict[str, Any]) -> dict[str, np.ndarray]:
    """Greedy tokens (``top_k=1``) past the block size and the top-3 distributions along them."""
    model.eval()
    greedy = model.generate(d["prompt"], GPT_BLOCK + 2, temperature=0.8, top_k=1)
    probs = [
        to_numpy(topk_probs(torch, model, greedy[:, :n], 0.8, 3))
        for n in range(d["prompt"].size(1), greedy.size(1))
    ]
    model.train()
    return {"greedy": to_numpy(greedy), "top3_probs": np.stack(probs)}


def gpt_infer(torch: Any, model: Any, d: dict[str, Any]) -> list[tuple[Any, tuple]]:
    """Training-shaped forward (logits and loss) and the last-position forward."""
    return [(model, (d["x"], d["y"])), (model, (d["x"],))]


def _single(torch: Any, model: Any, d: dict[str, Any], key: str) -> list[tuple[Any, tuple]]:
    return [(model, (d[key],))]


def _adam(lr: float) -> Callable[[Any, Any], Any]:
    return lambda torch, model: torch.optim.Adam(model.parameters(), lr=lr)


ZOO: dict[str, ZooModel] = {
    "vae": ZooModel(
        build_vae, vae_data, vae_loss, _adam(1e-2), infer=lambda torch, m, d: [(m, (d["x"], d["eps"][0]))]
    ),
    "superres": ZooModel(
        build_superres, superres_data, superres_loss, _adam(1e-2), infer=lambda t, m, d: _single(t, m, d, "x")
    ),
    "reinforce": ZooModel(
        build_policy, policy_data, policy_loss, _adam(1e-2), infer=lambda t, m, d: _single(t, m, d, "states")
    ),
    "lstm_lbfgs": ZooModel(
        build_sequence,
        sequence_data,
        sequence_loss,
        lambda torch, model: torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=5),
        infer=lambda t, m, d: _single(t, m, d, "input"),
    ),
    "resnet_block": ZooModel(
        build_resnet,
        resnet_data,
        resnet_loss,
        lambda torch, model: torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
        infer=lambda t, m, d: _single(t, m, d, "x"),
    ),
    "transformer_lm": ZooModel(
        build_transformer,
        transformer_data,
        transformer_loss,
        _adam(1e-2),
        clip=0.5,
        infer=lambda t, m, d: _single(t, m, d, "src"),
    ),
    "mnist": ZooModel(
        build_mnist,
        mnist_data,
        mnist_loss,
        lambda torch, model: torch.optim.Adadelta(model.parameters(), lr=1.0),
        scheduler=lambda torch, opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7),
        infer=lambda t, m, d: _single(t, m, d, "x"),
    ),
    "word_lm_lstm": ZooModel(
        lambda torch: build_rnn_lm(torch, "LSTM"),
        rnn_lm_data,
        rnn_lm_loss,
        lambda torch, model: ManualSGD(model, lr=2.0),
        clip=0.25,
        infer=rnn_lm_infer,
    ),
    "word_lm_gru": ZooModel(
        lambda torch: build_rnn_lm(torch, "GRU"),
        rnn_lm_data,
        rnn_lm_loss,
        lambda torch, model: ManualSGD(model, lr=2.0),
        clip=0.25,
        infer=rnn_lm_infer,
    ),
    "dcgan": ZooModel(build_dcgan, dcgan_data, None, dcgan_optimizers, step=dcgan_step, infer=dcgan_infer),
    "style_transfer": ZooModel(build_style, style_data, style_loss, _adam(1e-2), infer=style_infer),
    "nanogpt": ZooModel(
        build_gpt, gpt_data, gpt_loss, gpt_optimizer, clip=1.0, after=gpt_after, infer=gpt_infer
    ),
}


# --- whole scripts -------------------------------------------------------------
#
# The zoo above trains models through one shared loop. ``mnist_script`` is the
# rest of the examples' mnist/main.py around the model, line for line: device
# selection, DataLoaders, the ``train``/``test`` functions with their logging,
# the StepLR epochs and the final ``torch.save``. Only the data source (a
# ``TensorDataset`` instead of torchvision's MNIST), the argument parser (a
# namespace) and the float64 cast differ.


def mnist_script(torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], save_path: str) -> str:
    """Run the examples' mnist ``main`` for two epochs; return what it printed."""
    import contextlib
    import io
    from types import SimpleNamespace

    F = torch.nn.functional
    optim = torch.optim
    StepLR = torch.optim.lr_scheduler.StepLR
    Net = lambda: build_mnist(torch)  # noqa: E731 - the examples' class, defined above

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(
                    "Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(  # noqa: UP032 - as the examples write it
                        epoch,
                        batch_idx * len(data),
                        len(train_loader.dataset),
                        100.0 * batch_idx / len(train_loader),
                        loss.item(),
                    )
                )
                if args.dry_run:
                    break

    def test(model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
                pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)

        print(
            "\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(  # noqa: UP032
                test_loss, correct, len(test_loader.dataset), 100.0 * correct / len(test_loader.dataset)
            )
        )

    def main():
        args = SimpleNamespace(
            batch_size=4,
            test_batch_size=5,
            epochs=2,
            lr=1.0,
            gamma=0.7,
            no_accel=False,
            dry_run=False,
            seed=1,
            log_interval=2,
            save_model=True,
        )
        use_accel = not args.no_accel and torch.accelerator.is_available()

        torch.manual_seed(args.seed)

        if use_accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        train_kwargs = {"batch_size": args.batch_size}
        test_kwargs = {"batch_size": args.test_batch_size}
        if use_accel:
            accel_kwargs = {"num_workers": 1, "persistent_workers": True, "pin_memory": True, "shuffle": True}
            train_kwargs.update(accel_kwargs)
            test_kwargs.update(accel_kwargs)

        dataset1 = torch.utils.data.TensorDataset(
            torch.tensor(data["train_x"]), torch.tensor(data["train_y"])
        )
        dataset2 = torch.utils.data.TensorDataset(torch.tensor(data["test_x"]), torch.tensor(data["test_y"]))
        train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)
        test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)

        model = Net().double().to(device)
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

        scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
        for epoch in range(1, args.epochs + 1):
            train(args, model, device, train_loader, optimizer, epoch)
            test(model, device, test_loader)
            scheduler.step()

        if args.save_model:
            torch.save(model.state_dict(), save_path)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main()
    return out.getvalue()


def mnist_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ten training and seven test 'digits' (1x10x10, normalised) with labels."""
    return {
        "train_x": (rng.uniform(0, 1, (10, 1, 10, 10)) - 0.1307) / 0.3081,
        "train_y": rng.integers(0, 10, 10).astype(np.int64),
        "test_x": (rng.uniform(0, 1, (7, 1, 10, 10)) - 0.1307) / 0.3081,
        "test_y": rng.integers(0, 10, 7).astype(np.int64),
    }


def nanogpt_train_script(
    torch: Any,
    data_dir: str,
    out_dir: str,
    init_from: str = "scratch",
    compile: bool = False,
    max_iters: int = 6,
) -> str:
    """nanoGPT's train.py without DDP, its configuration given as arguments; returns what it printed.

    The body is train.py's: ``get_batch`` from ``np.memmap`` files, the model
    from scratch or resumed from ``ckpt.pt``, ``GradScaler``, the cosine
    learning rate written into ``param_groups``, gradient accumulation and
    clipping, ``estimate_loss`` and checkpoints.
    """
    import contextlib
    import io
    import math
    import os
    import pickle
    import time
    from contextlib import nullcontext

    # -----------------------------------------------------------------------------
    # default config values, shrunk
    eval_interval = 3
    log_interval = 1
    eval_iters = 2
    eval_only = False  # if True, script exits right after the first eval
    always_save_checkpoint = True  # if True, always save a checkpoint after each eval
    gradient_accumulation_steps = 2  # used to simulate larger batch sizes
    batch_size = 2  # if gradient_accumulation_steps > 1, this is the micro-batch size
    block_size = 6
    # model
    n_layer = 2
    n_head = 2
    n_embd = 8
    dropout = 0.0  # for pretraining 0 is good, for finetuning try 0.1+
    bias = False  # do we use bias inside LayerNorm and Linear layers?
    # adamw optimizer
    learning_rate = 1e-2  # max learning rate
    weight_decay = 1e-1
    beta1 = 0.9
    beta2 = 0.95
    grad_clip = 1.0  # clip gradients at this value, or disable if == 0.0
    # learning rate decay settings
    decay_lr = True  # whether to decay the learning rate
    warmup_iters = 2  # how many steps to warm up for
    lr_decay_iters = 5  # should be ~= max_iters per Chinchilla
    min_lr = 1e-3  # minimum learning rate, should be ~= learning_rate/10 per Chinchilla
    # system
    device = "cpu"  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps' on macbooks
    dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    config = {
        k: v for k, v in locals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))
    }
    # -----------------------------------------------------------------------------
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ddp = int(os.environ.get("RANK", -1)) != -1  # is this a ddp run?
        assert not ddp
        master_process = True
        seed_offset = 0
        ddp_world_size = 1
        tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
        print(f"tokens per iteration will be: {tokens_per_iter:,}")

        if master_process:
            os.makedirs(out_dir, exist_ok=True)
        torch.manual_seed(1337 + seed_offset)
        torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
        torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
        device_type = "cuda" if "cuda" in device else "cpu"  # for later use in torch.autocast
        # note: float16 data type will automatically use a GradScaler
        ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
        ctx = (
            nullcontext()
            if device_type == "cpu"
            else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
        )

        # poor man's data loader
        def get_batch(split):
            # We recreate np.memmap every batch to avoid a memory leak, as per
            # https://stackoverflow.com/questions/45132940/numpy-memmap-memory-usage-want-to-iterate-once/61472122#61472122
            if split == "train":
                data = np.memmap(os.path.join(data_dir, "train.bin"), dtype=np.uint16, mode="r")
            else:
                data = np.memmap(os.path.join(data_dir, "val.bin"), dtype=np.uint16, mode="r")
            ix = torch.randint(len(data) - block_size, (batch_size,))
            x = torch.stack([torch.from_numpy((data[i : i + block_size]).astype(np.int64)) for i in ix])
            y = torch.stack(
                [torch.from_numpy((data[i + 1 : i + 1 + block_size]).astype(np.int64)) for i in ix]
            )
            if device_type == "cuda":
                # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
                x, y = (
                    x.pin_memory().to(device, non_blocking=True),
                    y.pin_memory().to(device, non_blocking=True),
                )
            else:
                x, y = x.to(device), y.to(device)
            return x, y

        # init these up here, can override if init_from='resume' (i.e. from a checkpoint)
        iter_num = 0
        best_val_loss = 1e9

        # attempt to derive vocab_size from the dataset
        meta_path = os.path.join(data_dir, "meta.pkl")
        meta_vocab_size = None
        if os.path.exists(meta_path):
            with open(meta_path, "rb") as f:
                meta = pickle.load(f)
            meta_vocab_size = meta["vocab_size"]
            print(f"found vocab_size = {meta_vocab_size} (inside {meta_path})")

        # model init
        model_args = dict(
            n_layer=n_layer,
            n_head=n_head,
            n_embd=n_embd,
            block_size=block_size,
            bias=bias,
            vocab_size=None,
            dropout=dropout,
        )  # start with model_args from command line
        GPTConfig, GPT = gpt_classes(torch)
        if init_from == "scratch":
            # init a new model from scratch
            print("Initializing a new model from scratch")
            # determine the vocab size we'll use for from-scratch training
            if meta_vocab_size is None:
                print("defaulting to vocab_size of GPT-2 to 50304 (50257 rounded up for efficiency)")
            model_args["vocab_size"] = meta_vocab_size if meta_vocab_size is not None else 50304
            gptconf = GPTConfig(**model_args)
            model = GPT(gptconf)
        elif init_from == "resume":
            print(f"Resuming training from {out_dir}")
            # resume training from a checkpoint.
            ckpt_path = os.path.join(out_dir, "ckpt.pt")
            checkpoint = torch.load(ckpt_path, map_location=device)
            checkpoint_model_args = checkpoint["model_args"]
            # force these config attributes to be equal otherwise we can't even resume training
            # the rest of the attributes (e.g. dropout) can stay as desired from command line
            for k in ["n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size"]:
                model_args[k] = checkpoint_model_args[k]
            # create the model
            gptconf = GPTConfig(**model_args)
            model = GPT(gptconf)
            state_dict = checkpoint["model"]
            # fix the keys of the state dictionary :(
            # honestly no idea how checkpoints sometimes get this prefix, have to debug more
            unwanted_prefix = "_orig_mod."
            for k, v in list(state_dict.items()):  # noqa: B007
                if k.startswith(unwanted_prefix):
                    state_dict[k[len(unwanted_prefix) :]] = state_dict.pop(k)
            model.load_state_dict(state_dict)
            iter_num = checkpoint["iter_num"]
            best_val_loss = checkpoint["best_val_loss"]
        # crop down the model block size if desired, using model surgery
        if block_size < model.config.block_size:
            model.crop_block_size(block_size)
            model_args["block_size"] = block_size  # so that the checkpoint will have the right value
        model.to(device)

        # initialize a GradScaler. If enabled=False scaler is a no-op
        scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))

        # optimizer
        optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
        if init_from == "resume":
            optimizer.load_state_dict(checkpoint["optimizer"])
        checkpoint = None  # free up memory

        # compile the model
        if compile:
            print("compiling the model... (takes a ~minute)")
            model = torch.compile(model)  # requires PyTorch 2.0

        # helps estimate an arbitrarily accurate loss over either split using many batches
        @torch.no_grad()
        def estimate_loss():
            out = {}
            model.eval()
            for split in ["train", "val"]:
                losses = torch.zeros(eval_iters)
                for k in range(eval_iters):
                    X, Y = get_batch(split)
                    with ctx:
                        logits, loss = model(X, Y)
                    losses[k] = loss.item()
                out[split] = losses.mean()
            model.train()
            return out

        # learning rate decay scheduler (cosine with warmup)
        def get_lr(it):
            # 1) linear warmup for warmup_iters steps
            if it < warmup_iters:
                return learning_rate * (it + 1) / (warmup_iters + 1)
            # 2) if it > lr_decay_iters, return min learning rate
            if it > lr_decay_iters:
                return min_lr
            # 3) in between, use cosine decay down to min learning rate
            decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
            assert 0 <= decay_ratio <= 1
            coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
            return min_lr + coeff * (learning_rate - min_lr)

        # training loop
        X, Y = get_batch("train")  # fetch the very first batch
        t0 = time.time()
        local_iter_num = 0  # number of iterations in the lifetime of this process
        raw_model = model  # unwrap DDP container if needed
        running_mfu = -1.0
        while True:
            # determine and set the learning rate for this iteration
            lr = get_lr(iter_num) if decay_lr else learning_rate
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr

            # evaluate the loss on train/val sets and write checkpoints
            if iter_num % eval_interval == 0 and master_process:
                losses = estimate_loss()
                print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
                if losses["val"] < best_val_loss or always_save_checkpoint:
                    best_val_loss = losses["val"]
                    if iter_num > 0:
                        checkpoint = {
                            "model": raw_model.state_dict(),
                            "optimizer": optimizer.state_dict(),
                            "model_args": model_args,
                            "iter_num": iter_num,
                            "best_val_loss": best_val_loss,
                            "config": config,
                        }
                        print(f"saving checkpoint to {out_dir}")
                        torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
            if iter_num == 0 and eval_only:
                break

            # forward backward update, with optional gradient accumulation to simulate larger batch size
            # and using the GradScaler if data type is float16
            for micro_step in range(gradient_accumulation_steps):  # noqa: B007
                with ctx:
                    logits, loss = model(X, Y)
                    loss = (
                        loss / gradient_accumulation_steps
                    )  # scale the loss to account for gradient accumulation
                # immediately async prefetch next batch while model is doing the forward pass on the GPU
                X, Y = get_batch("train")
                # backward pass, with gradient scaling if training in fp16
                scaler.scale(loss).backward()
            # clip the gradient
            if grad_clip != 0.0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            # step the optimizer and scaler if training in fp16
            scaler.step(optimizer)
            scaler.update()
            # flush the gradients as soon as we can, no need for this memory anymore
            optimizer.zero_grad(set_to_none=True)

            # timing and logging
            t1 = time.time()
            dt = t1 - t0
            t0 = t1
            if iter_num % log_interval == 0 and master_process:
                # get loss as float. note: this is a CPU-GPU sync point
                # scale up to undo the division above, approximating the true total loss (exact would have been a sum)
                lossf = loss.item() * gradient_accumulation_steps
                if local_iter_num >= 5:  # let the training loop settle a bit
                    mfu = raw_model.estimate_mfu(batch_size * gradient_accumulation_steps, dt)
                    running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
                print(
                    f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, mfu {running_mfu * 100:.2f}%"
                )
            iter_num += 1
            local_iter_num += 1

            # termination conditions
            if iter_num > max_iters:
                break
    return out.getvalue()


# --- word_language_model's main.py ----------------------------------------------
#
# ``torch.save(model, f)`` pickles the model object, and pickle stores its class
# by name: the examples' ``model.py`` is a module of its own, imported as
# ``model``. :func:`word_lm_model_module` builds that module once per framework
# and registers it in ``sys.modules``, so the saved file names ``RNNModel``
# through it and ``torch.load(f, weights_only=False)`` finds it again.


def word_lm_model_module(torch: Any) -> Any:
    """The examples' ``model`` module (``RNNModel``) for ``torch``, importable by name."""
    import sys
    import types

    name = f"zoo_models_word_lm_{torch.__name__}"
    if name in sys.modules:
        return sys.modules[name]
    cls = type(build_rnn_lm(torch, "LSTM"))  # the examples' RNNModel, written above
    module = types.ModuleType(name, "word_language_model/model.py")
    cls.__module__ = name
    cls.__qualname__ = "RNNModel"
    module.RNNModel = cls
    sys.modules[name] = module
    return module


class _Clock:
    """``time.time()`` advancing 25 ms per call, so the printed timings are reproducible."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        self.now += 0.025
        return self.now


def word_lm_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The word-language-model script's initial weights (drawn with NumPy)."""
    torch.manual_seed(0)
    model = word_lm_model_module(torch).RNNModel("LSTM", 12, 6, 6, 2, 0.0, True).double()
    state = {k: to_numpy(v) for k, v in model.state_dict().items()}
    init = init_weights(state, {k for k, _ in model.named_parameters()}, seed=5000)
    init["decoder.weight"] = init["encoder.weight"]  # tied
    return init


def word_lm_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Token streams standing in for ``data.Corpus``: train, valid and test (12 words)."""
    return {
        "train": rng.integers(0, 12, 40).astype(np.int64),
        "valid": rng.integers(0, 12, 19).astype(np.int64),
        "test": rng.integers(0, 12, 17).astype(np.int64),
    }


def word_lm_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], save: str, dropout: float = 0.0
) -> str:
    """Run the examples' word_language_model ``main.py`` (LSTM, tied); return what it printed.

    As the script: ``batchify``, ``get_batch``, ``train()`` with ``repackage_hidden``,
    ``clip_grad_norm_`` and the update ``p.data.add_(p.grad, alpha=-lr)``,
    ``evaluate()``, ``lr /= 4.0`` when the validation loss does not improve, the
    whole model saved with ``torch.save(model, f)`` and reloaded with
    ``torch.load(f, weights_only=False)`` and ``flatten_parameters()``, and the
    test evaluation. Differences: the corpus (``data`` arrays), the argument
    parser (a namespace), the initial weights loaded from ``init``, float64,
    ``dropout`` 0 by default (the two frameworks draw different masks; the
    examples' 0.2 runs too) and a fixed clock.
    """
    import contextlib
    import io
    import math
    from types import SimpleNamespace

    nn = torch.nn
    model = word_lm_model_module(torch)
    time = _Clock()

    args = SimpleNamespace(
        data="./data/wikitext-2",
        model="LSTM",
        emsize=6,
        nhid=6,
        nlayers=2,
        lr=20,
        clip=0.25,
        epochs=4,
        batch_size=3,
        bptt=4,
        dropout=dropout,
        tied=True,
        seed=1111,
        log_interval=1,
        save=save,
        onnx_export="",
        nhead=2,
        dry_run=False,
        accel=False,
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # Set the random seed manually for reproducibility.
        torch.manual_seed(args.seed)

        if args.accel and torch.accelerator.is_available():
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        ###############################################################################
        # Load data
        ###############################################################################

        corpus = SimpleNamespace(
            dictionary=list(range(12)),
            train=torch.tensor(data["train"]),
            valid=torch.tensor(data["valid"]),
            test=torch.tensor(data["test"]),
        )

        # Starting from sequential data, batchify arranges the dataset into columns.
        def batchify(data, bsz):
            # Work out how cleanly we can divide the dataset into bsz parts.
            nbatch = data.size(0) // bsz
            # Trim off any extra elements that wouldn't cleanly fit (remainders).
            data = data.narrow(0, 0, nbatch * bsz)
            # Evenly divide the data across the bsz batches.
            data = data.view(bsz, -1).t().contiguous()
            return data.to(device)

        eval_batch_size = 2
        train_data = batchify(corpus.train, args.batch_size)
        val_data = batchify(corpus.valid, eval_batch_size)
        test_data = batchify(corpus.test, eval_batch_size)

        ###############################################################################
        # Build the model
        ###############################################################################

        ntokens = len(corpus.dictionary)
        if args.model == "Transformer":
            raise NotImplementedError("the LSTM run only")
        else:
            model = model.RNNModel(
                args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied
            ).to(device)
        model.double()
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})

        criterion = nn.NLLLoss()

        ###############################################################################
        # Training code
        ###############################################################################

        def repackage_hidden(h):
            """Wraps hidden states in new Tensors, to detach them from their history."""

            if isinstance(h, torch.Tensor):
                return h.detach()
            else:
                return tuple(repackage_hidden(v) for v in h)

        def get_batch(source, i):
            seq_len = min(args.bptt, len(source) - 1 - i)
            data = source[i : i + seq_len]
            target = source[i + 1 : i + 1 + seq_len].view(-1)
            return data, target

        def evaluate(data_source):
            # Turn on evaluation mode which disables dropout.
            model.eval()
            total_loss = 0.0
            ntokens = len(corpus.dictionary)
            if args.model != "Transformer":
                hidden = model.init_hidden(eval_batch_size)
            with torch.no_grad():
                for i in range(0, data_source.size(0) - 1, args.bptt):
                    data, targets = get_batch(data_source, i)
                    if args.model == "Transformer":
                        output = model(data)
                        output = output.view(-1, ntokens)
                    else:
                        output, hidden = model(data, hidden)
                        hidden = repackage_hidden(hidden)
                    total_loss += len(data) * criterion(output, targets).item()
            return total_loss / (len(data_source) - 1)

        def train():
            # Turn on training mode which enables dropout.
            model.train()
            total_loss = 0.0
            start_time = time.time()
            ntokens = len(corpus.dictionary)
            if args.model != "Transformer":
                hidden = model.init_hidden(args.batch_size)
            for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
                data, targets = get_batch(train_data, i)
                # Starting each batch, we detach the hidden state from how it was previously produced.
                # If we didn't, the model would try backpropagating all the way to start of the dataset.
                model.zero_grad()
                if args.model == "Transformer":
                    output = model(data)
                    output = output.view(-1, ntokens)
                else:
                    hidden = repackage_hidden(hidden)
                    output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()

                # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)

                total_loss += loss.item()

                if batch % args.log_interval == 0 and batch > 0:
                    cur_loss = total_loss / args.log_interval
                    elapsed = time.time() - start_time
                    print(
                        "| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "  # noqa: UP032
                        "loss {:5.2f} | ppl {:8.2f}".format(
                            epoch,
                            batch,
                            len(train_data) // args.bptt,
                            lr,
                            elapsed * 1000 / args.log_interval,
                            cur_loss,
                            math.exp(cur_loss),
                        )
                    )
                    total_loss = 0
                    start_time = time.time()
                if args.dry_run:
                    break

        # Loop over epochs.
        lr = args.lr
        best_val_loss = None

        # At any point you can hit Ctrl + C to break out of training early.
        try:
            for epoch in range(1, args.epochs + 1):
                epoch_start_time = time.time()
                train()
                val_loss = evaluate(val_data)
                print("-" * 89)
                print(
                    "| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | "  # noqa: UP032
                    "valid ppl {:8.2f}".format(
                        epoch, (time.time() - epoch_start_time), val_loss, math.exp(val_loss)
                    )
                )
                print("-" * 89)
                # Save the model if the validation loss is the best we've seen so far.
                if not best_val_loss or val_loss < best_val_loss:
                    with open(args.save, "wb") as f:
                        torch.save(model, f)
                    best_val_loss = val_loss
                else:
                    # Anneal the learning rate if no improvement has been seen in the validation dataset.
                    lr /= 4.0
        except KeyboardInterrupt:
            print("-" * 89)
            print("Exiting from training early")

        # Load the best saved model.
        with open(args.save, "rb") as f:
            model = torch.load(f, weights_only=False)
            # after load the rnn params are not a continuous chunk of memory
            # this makes them a continuous chunk, and will speed up forward pass
            # Currently, only rnn model supports flatten_parameters function.
            if args.model in ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"]:
                model.rnn.flatten_parameters()

        # Run on test data.
        test_loss = evaluate(test_data)
        print("=" * 89)
        print(
            "| End of training | test loss {:5.2f} | test ppl {:8.2f}".format(  # noqa: UP032
                test_loss, math.exp(test_loss)
            )
        )
        print("=" * 89)
    return out.getvalue()


# --- reinforcement_learning's reinforce.py -------------------------------------


class CartPole:
    """CartPole-v1's dynamics in NumPy, with gym's API: ``reset(seed=)`` and a five-tuple ``step``.

    Euler steps of 20 ms; the episode ends when the pole leans past 12 degrees
    or the cart leaves +-2.4, and is truncated after ``max_episode_steps``.
    States are float32 arrays, as gym returns them.
    """

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold_radians = 12 * 2 * np.pi / 360
    x_threshold = 2.4

    def __init__(self, reward_threshold: float, max_episode_steps: int = 500) -> None:
        from types import SimpleNamespace

        self.spec = SimpleNamespace(reward_threshold=reward_threshold, max_episode_steps=max_episode_steps)
        self.np_random = np.random.default_rng()
        self.state = np.zeros(4)
        self.steps = 0

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(-0.05, 0.05, 4)
        self.steps = 0
        return self.state.astype(np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if action not in (0, 1):
            raise ValueError(f"CartPole.step: action must be 0 or 1, got {action!r}")
        x, x_dot, theta, theta_dot = self.state
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        terminated = bool(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold_radians)
        truncated = self.steps >= self.spec.max_episode_steps
        return self.state.astype(np.float32), 1.0, terminated, truncated, {}


# The two frameworks' random streams differ, so ``m.sample()`` would pick other
# actions in each and the episodes would part at the first draw. PyTorch's own
# draws are recorded instead (``recording_categorical``) and stored with the
# reference; the ferrograd run replays them (``replaying_categorical``). The
# replaying class still calls ferrograd's ``sample()`` (shape, dtype and range
# are checked) and refuses an action its probabilities give no chance, so the
# run is the script's, with PyTorch's luck. Replaying PyTorch's actions rather
# than sampling both runs from one NumPy stream keeps the reference run pure
# PyTorch.


def recording_categorical(torch: Any, actions: list[int]) -> Any:
    """``Categorical`` whose ``sample()`` also appends each drawn action to ``actions``."""

    class Categorical(torch.distributions.Categorical):
        def sample(self, sample_shape=()):  # type: ignore[no-untyped-def]
            a = super().sample(sample_shape)
            actions.extend(int(v) for v in a.reshape(-1).tolist())
            return a

    return Categorical


def replaying_categorical(torch: Any, actions: list[int]) -> Any:
    """``Categorical`` whose ``sample()`` returns the recorded ``actions`` in order."""
    it = iter(actions)

    class Categorical(torch.distributions.Categorical):
        def sample(self, sample_shape=()):  # type: ignore[no-untyped-def]
            drawn = super().sample(sample_shape)
            n = self.probs.shape[-1]
            values = drawn.reshape(-1).tolist()
            assert all(0 <= v < n for v in values), values
            chosen = [next(it) for _ in values]
            probs = self.probs.reshape(-1, n)
            for row, a in enumerate(chosen):
                assert float(probs[row % probs.shape[0], a]) > 0, f"replayed action {a} has probability 0"
            return torch.tensor(chosen, dtype=drawn.dtype).reshape(tuple(drawn.shape))

    return Categorical


def reinforce_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The policy's initial weights, float32 as the script's policy is."""
    torch.manual_seed(0)
    nn = torch.nn
    shapes = nn.Sequential(nn.Linear(4, 128), nn.Linear(128, 2)).state_dict()
    state = {("affine1." if k[0] == "0" else "affine2.") + k[2:]: to_numpy(v) for k, v in shapes.items()}
    init = init_weights(state, set(state), seed=7000)
    return {k: v.astype(np.float32) for k, v in init.items()}


def reinforce_script(
    torch: Any, init: dict[str, np.ndarray], Categorical: Any, episodes: int = 40, dropout: float = 0.0
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' ``reinforce.py`` on :class:`CartPole`; return what it printed.

    Differences from the script: the environment (CartPole above, solved at a
    running reward of 15), the argument parser (a namespace), the initial
    weights loaded from ``init``, ``dropout`` 0 by default (the frameworks draw
    different masks; the examples' 0.6 runs too), ``Categorical`` passed in
    (see above) and at most ``episodes`` episodes.
    """
    import contextlib
    import io
    from collections import deque
    from itertools import count
    from types import SimpleNamespace

    nn = torch.nn
    optim = torch.optim
    F = torch.nn.functional

    args = SimpleNamespace(gamma=0.99, seed=543, render=False, log_interval=2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        env = CartPole(reward_threshold=15.0)
        env.reset(seed=args.seed)
        torch.manual_seed(args.seed)

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.affine1 = nn.Linear(4, 128)
                self.dropout = nn.Dropout(p=dropout)
                self.affine2 = nn.Linear(128, 2)

                self.saved_log_probs = []
                self.rewards = []

            def forward(self, x):
                x = self.affine1(x)
                x = self.dropout(x)
                x = F.relu(x)
                action_scores = self.affine2(x)
                return F.softmax(action_scores, dim=1)

        policy = Policy()
        policy.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        optimizer = optim.Adam(policy.parameters(), lr=1e-2)
        eps = np.finfo(np.float32).eps.item()

        def select_action(state):
            state = torch.from_numpy(state).float().unsqueeze(0)
            probs = policy(state)
            m = Categorical(probs)
            action = m.sample()
            policy.saved_log_probs.append(m.log_prob(action))
            return action.item()

        def finish_episode():
            R = 0
            policy_loss = []
            returns = deque()
            for r in policy.rewards[::-1]:
                R = r + args.gamma * R
                returns.appendleft(R)
            returns = torch.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)
            for log_prob, R in zip(policy.saved_log_probs, returns, strict=True):
                policy_loss.append(-log_prob * R)
            optimizer.zero_grad()
            policy_loss = torch.cat(policy_loss).sum()
            policy_loss.backward()
            optimizer.step()
            del policy.rewards[:]
            del policy.saved_log_probs[:]

        def main():
            running_reward = 10
            for i_episode in count(1):
                state, _ = env.reset()
                ep_reward = 0
                for t in range(1, 10000):  # Don't infinite loop while learning  # noqa: B007
                    action = select_action(state)
                    state, reward, done, _, _ = env.step(action)
                    if args.render:
                        env.render()
                    policy.rewards.append(reward)
                    ep_reward += reward
                    if done:
                        break

                # update cumulative reward
                running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
                finish_episode()
                if i_episode % args.log_interval == 0:
                    print(
                        "Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}".format(  # noqa: UP032
                            i_episode, ep_reward, running_reward
                        )
                    )
                if running_reward > env.spec.reward_threshold:
                    print(
                        "Solved! Running reward is now {} and "  # noqa: UP032
                        "the last episode runs to {} time steps!".format(running_reward, t)
                    )
                    break
                if i_episode >= episodes:
                    break

        main()
    return out.getvalue(), {k: to_numpy(v) for k, v in policy.state_dict().items()}


# --- time_sequence_prediction's train.py and generate_sine_wave.py ------------


def generate_sine_wave(torch: Any, path: str, T: int = 20, L: int = 30, N: int = 6) -> None:
    """generate_sine_wave.py, shrunk (``L`` = 30 samples of ``N`` = 6 waves): ``torch.save`` of
    the NumPy array."""
    np.random.seed(2)

    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype("float64")
    torch.save(data, open(path, "wb"))  # noqa: SIM115 - as the example writes it


def time_sequence_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The ``Sequence`` model's initial weights (two ``LSTMCell(.., 8)``, a ``Linear``, the
    empty ``dummy_param``)."""
    nn = torch.nn
    torch.manual_seed(0)
    parts = {"lstm1": nn.LSTMCell(1, 8), "lstm2": nn.LSTMCell(8, 8), "linear": nn.Linear(8, 1)}
    state = {f"{n}.{k}": to_numpy(v) for n, m in parts.items() for k, v in m.state_dict().items()}
    state["dummy_param"] = np.zeros(0)
    return init_weights(state, set(state), seed=8000)


def time_sequence_script(
    torch: Any, init: dict[str, np.ndarray], data_path: str, steps: int = 3, future: int = 12
) -> tuple[str, list[np.ndarray]]:
    """Run the examples' time_sequence_prediction ``train.py``; return what it printed and the
    predictions ``y`` of each step (the script draws them; here they are returned).

    As the script: the float64 ``Sequence`` of two ``LSTMCell`` and a ``Linear``
    (its device read from an empty ``dummy_param``) with its ``future`` loop,
    the data read with ``torch.load`` from what ``generate_sine_wave.py`` saved,
    ``optim.LBFGS(lr=0.8)`` stepped with a closure that prints each loss, and
    the ``no_grad`` test prediction. Differences: 51 hidden units shrunk to 8,
    1000 future steps to ``future``, 15 steps to ``steps``, the device ``cpu``,
    ``weights_only=False`` (PyTorch 2.6 and later refuse this pickled NumPy
    array without it), the initial weights loaded from ``init`` and no plotting.
    """
    import contextlib
    import io

    nn = torch.nn
    optim = torch.optim

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 8)
            self.lstm2 = nn.LSTMCell(8, 8)
            self.linear = nn.Linear(8, 1)
            self.dummy_param = nn.Parameter(torch.empty(0))

        def forward(self, input, future=0):
            outputs = []
            device = self.dummy_param.device
            h_t = torch.zeros(input.size(0), 8, dtype=torch.double).to(device)
            c_t = torch.zeros(input.size(0), 8, dtype=torch.double).to(device)
            h_t2 = torch.zeros(input.size(0), 8, dtype=torch.double).to(device)
            c_t2 = torch.zeros(input.size(0), 8, dtype=torch.double).to(device)

            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):  # if we should predict the future  # noqa: B007
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            outputs = torch.cat(outputs, dim=1)
            return outputs

    predictions = []
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        opt = type("Args", (), {"steps": steps, "device": "cpu"})()
        # training device
        device_name = opt.device
        if device_name == "cuda" and not torch.cuda.is_available():
            print("cuda is not available")
            raise SystemExit(-1)
        elif device_name == "mps" and not torch.backends.mps.is_available():
            print("mps is not available")
            raise SystemExit(-1)
        device = torch.device(device_name)
        # set random seed to 0
        np.random.seed(0)
        torch.manual_seed(0)
        # load data and make training set
        data = torch.from_numpy(torch.load(data_path, weights_only=False)).to(device)
        input = data[3:, :-1]
        target = data[3:, 1:]
        test_input = data[:3, :-1]
        test_target = data[:3, 1:]
        # build the model
        seq = Sequence().to(device).double()
        seq.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        criterion = nn.MSELoss().to(device)
        # use LBFGS as optimizer since we can load the whole data to train
        optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
        # begin to train
        for i in range(opt.steps):
            print("STEP: ", i)

            def closure():
                optimizer.zero_grad()
                out = seq(input)
                loss = criterion(out, target)
                print("loss:", loss.item())
                loss.backward()
                return loss

            optimizer.step(closure)
            # begin to predict, no need to track gradient here
            with torch.no_grad():
                pred = seq(test_input, future=future)
                loss = criterion(pred[:, :-future], test_target)
                print("test loss:", loss.item())
                y = pred.cpu().detach().numpy()
            predictions.append(np.array(y))
    return out.getvalue(), predictions


def actor_critic_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The actor-critic policy's initial weights (float32)."""
    torch.manual_seed(0)
    nn = torch.nn
    heads = {"affine1": nn.Linear(4, 128), "action_head": nn.Linear(128, 2), "value_head": nn.Linear(128, 1)}
    state = {f"{n}.{k}": to_numpy(v) for n, m in heads.items() for k, v in m.state_dict().items()}
    return {k: v.astype(np.float32) for k, v in init_weights(state, set(state), seed=9000).items()}


def actor_critic_script(
    torch: Any, init: dict[str, np.ndarray], Categorical: Any, episodes: int = 10
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' ``actor_critic.py`` on :class:`CartPole`; return what it printed and
    the trained weights. The same differences as :func:`reinforce_script` (at most 10 episodes)."""
    import contextlib
    import io
    from collections import namedtuple
    from itertools import count
    from types import SimpleNamespace

    nn = torch.nn
    optim = torch.optim
    F = torch.nn.functional

    args = SimpleNamespace(gamma=0.99, seed=543, render=False, log_interval=2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        env = CartPole(reward_threshold=14.0)
        env.reset(seed=args.seed)
        torch.manual_seed(args.seed)

        SavedAction = namedtuple("SavedAction", ["log_prob", "value"])

        class Policy(nn.Module):
            """
            implements both actor and critic in one model
            """

            def __init__(self):
                super().__init__()
                self.affine1 = nn.Linear(4, 128)

                # actor's layer
                self.action_head = nn.Linear(128, 2)

                # critic's layer
                self.value_head = nn.Linear(128, 1)

                # action & reward buffer
                self.saved_actions = []
                self.rewards = []

            def forward(self, x):
                """
                forward of both actor and critic
                """
                x = F.relu(self.affine1(x))

                # actor: choses action to take from state s_t
                # by returning probability of each action
                action_prob = F.softmax(self.action_head(x), dim=-1)

                # critic: evaluates being in the state s_t
                state_values = self.value_head(x)

                # return values for both actor and critic as a tuple of 2 values:
                # 1. a list with the probability of each action over the action space
                # 2. the value from state s_t
                return action_prob, state_values

        model = Policy()
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        optimizer = optim.Adam(model.parameters(), lr=3e-2)
        eps = np.finfo(np.float32).eps.item()

        def select_action(state):
            state = torch.from_numpy(state).float()
            probs, state_value = model(state)

            # create a categorical distribution over the list of probabilities of actions
            m = Categorical(probs)

            # and sample an action using the distribution
            action = m.sample()

            # save to action buffer
            model.saved_actions.append(SavedAction(m.log_prob(action), state_value))

            # the action to take (left or right)
            return action.item()

        def finish_episode():
            """
            Training code. Calculates actor and critic loss and performs backprop.
            """
            R = 0
            saved_actions = model.saved_actions
            policy_losses = []  # list to save actor (policy) loss
            value_losses = []  # list to save critic (value) loss
            returns = []  # list to save the true values

            # calculate the true value using rewards returned from the environment
            for r in model.rewards[::-1]:
                # calculate the discounted value
                R = r + args.gamma * R
                returns.insert(0, R)

            returns = torch.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)

            for (log_prob, value), R in zip(saved_actions, returns, strict=True):
                advantage = R - value.item()

                # calculate actor (policy) loss
                policy_losses.append(-log_prob * advantage)

                # calculate critic (value) loss using L1 smooth loss
                value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))

            # reset gradients
            optimizer.zero_grad()

            # sum up all the values of policy_losses and value_losses
            loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()

            # perform backprop
            loss.backward()
            optimizer.step()

            # reset rewards and action buffer
            del model.rewards[:]
            del model.saved_actions[:]

        def main():
            running_reward = 10

            # run infinitely many episodes
            for i_episode in count(1):
                # reset environment and episode reward
                state, _ = env.reset()
                ep_reward = 0

                # for each episode, only run 9999 steps so that we don't
                # infinite loop while learning
                for t in range(1, 10000):  # noqa: B007
                    # select action from policy
                    action = select_action(state)

                    # take the action
                    state, reward, done, _, _ = env.step(action)

                    if args.render:
                        env.render()

                    model.rewards.append(reward)
                    ep_reward += reward
                    if done:
                        break

                # update cumulative reward
                running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward

                # perform backprop
                finish_episode()

                # log results
                if i_episode % args.log_interval == 0:
                    print(
                        "Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}".format(  # noqa: UP032
                            i_episode, ep_reward, running_reward
                        )
                    )

                # check if we have "solved" the cart pole problem
                if running_reward > env.spec.reward_threshold:
                    print(
                        "Solved! Running reward is now {} and "  # noqa: UP032
                        "the last episode runs to {} time steps!".format(running_reward, t)
                    )
                    break
                if i_episode >= episodes:
                    break

        main()
    return out.getvalue(), {k: to_numpy(v) for k, v in model.state_dict().items()}


# --- vae's main.py ---------------------------------------------------------------


class SuppliedNoise:
    """Standard normal draws from a NumPy stream, shaped as ``torch.randn``/``randn_like`` shape them.

    The VAE script draws its reparameterisation noise and its sample latents
    from the framework's generator, whose streams differ between PyTorch and
    ferrograd; both runs take them from this stream instead (float64 NumPy
    values, the same in both).
    """

    def __init__(self, torch: Any, seed: int) -> None:
        self.torch = torch
        self.rng = np.random.default_rng(seed)

    def randn(self, *size: int, device: Any = None) -> Any:
        t = self.torch.tensor(self.rng.standard_normal(size))
        return t if device is None else t.to(device)

    def randn_like(self, t: Any) -> Any:
        return self.torch.tensor(self.rng.standard_normal(tuple(t.shape)), dtype=t.dtype)


def vae_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The script VAE's initial weights (16 pixels, 8 hidden units, 2 latents)."""
    torch.manual_seed(0)
    nn = torch.nn
    shapes = {"fc1": (16, 8), "fc21": (8, 2), "fc22": (8, 2), "fc3": (2, 8), "fc4": (8, 16)}
    state = {
        f"{n}.{k}": to_numpy(v)
        for n, (i, o) in shapes.items()
        for k, v in nn.Linear(i, o).state_dict().items()
    }
    return init_weights(state, set(state), seed=10000)


def vae_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ten training and six test 4x4 'images' in [0, 1], with labels."""
    return {
        "train_x": rng.uniform(0, 1, (10, 1, 4, 4)),
        "train_y": rng.integers(0, 10, 10).astype(np.int64),
        "test_x": rng.uniform(0, 1, (6, 1, 4, 4)),
        "test_y": rng.integers(0, 10, 6).astype(np.int64),
    }


def vae_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], shuffle: bool = False
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' vae ``main.py`` for two epochs; return what it printed and the images
    it saved (``save_image``'s arrays, by file name).

    As the script: the VAE with ``reparameterize``, ``loss_function`` (BCE +
    KLD), ``train``/``test`` with their printed lines, the ``no_grad`` test and
    the reconstruction and sample images. Differences: 784 pixels, 400 hidden
    units and 20 latents shrunk to 16, 8 and 2; the data (a ``TensorDataset``,
    the training set not shuffled by default: the frameworks' shuffles differ), the argument parser (a
    namespace), float64, the initial weights loaded from ``init``, the two
    random draws (``torch.randn_like`` / ``torch.randn``) taken from
    :class:`SuppliedNoise`, and ``save_image`` storing arrays.
    """
    import contextlib
    import io
    from types import SimpleNamespace

    nn = torch.nn
    optim = torch.optim
    F = torch.nn.functional
    noise = SuppliedNoise(torch, seed=11000)
    images: dict[str, np.ndarray] = {}

    def save_image(tensor, fp, nrow=8):
        images[fp] = to_numpy(tensor)

    args = SimpleNamespace(batch_size=4, epochs=2, no_accel=False, seed=1, log_interval=2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        use_accel = not args.no_accel and torch.accelerator.is_available()

        torch.manual_seed(args.seed)

        if use_accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        print(f"Using device: {device}")

        kwargs = {"num_workers": 1, "pin_memory": True} if use_accel else {}
        train_loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.tensor(data["train_x"]), torch.tensor(data["train_y"])),
            batch_size=args.batch_size,
            shuffle=shuffle,
            **kwargs,
        )
        test_loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.tensor(data["test_x"]), torch.tensor(data["test_y"])),
            batch_size=args.batch_size,
            shuffle=False,
            **kwargs,
        )

        class VAE(nn.Module):
            def __init__(self):
                super().__init__()

                self.fc1 = nn.Linear(16, 8)
                self.fc21 = nn.Linear(8, 2)
                self.fc22 = nn.Linear(8, 2)
                self.fc3 = nn.Linear(2, 8)
                self.fc4 = nn.Linear(8, 16)

            def encode(self, x):
                h1 = F.relu(self.fc1(x))
                return self.fc21(h1), self.fc22(h1)

            def reparameterize(self, mu, logvar):
                std = torch.exp(0.5 * logvar)
                eps = noise.randn_like(std)
                return mu + eps * std

            def decode(self, z):
                h3 = F.relu(self.fc3(z))
                return torch.sigmoid(self.fc4(h3))

            def forward(self, x):
                mu, logvar = self.encode(x.view(-1, 16))
                z = self.reparameterize(mu, logvar)
                return self.decode(z), mu, logvar

        model = VAE().to(device).double()
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        optimizer = optim.Adam(model.parameters(), lr=1e-3)

        # Reconstruction + KL divergence losses summed over all elements and batch
        def loss_function(recon_x, x, mu, logvar):
            BCE = F.binary_cross_entropy(recon_x, x.view(-1, 16), reduction="sum")

            # see Appendix B from VAE paper:
            # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
            # https://arxiv.org/abs/1312.6114
            # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
            KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

            return BCE + KLD

        def train(epoch):
            model.train()
            train_loss = 0
            for batch_idx, (data, _) in enumerate(train_loader):
                data = data.to(device)
                optimizer.zero_grad()
                recon_batch, mu, logvar = model(data)
                loss = loss_function(recon_batch, data, mu, logvar)
                loss.backward()
                train_loss += loss.item()
                optimizer.step()
                if batch_idx % args.log_interval == 0:
                    print(
                        "Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(  # noqa: UP032
                            epoch,
                            batch_idx * len(data),
                            len(train_loader.dataset),
                            100.0 * batch_idx / len(train_loader),
                            loss.item() / len(data),
                        )
                    )

            print(
                "====> Epoch: {} Average loss: {:.4f}".format(  # noqa: UP032
                    epoch, train_loss / len(train_loader.dataset)
                )
            )

        def test(epoch):
            model.eval()
            test_loss = 0
            with torch.no_grad():
                for i, (data, _) in enumerate(test_loader):
                    data = data.to(device)
                    recon_batch, mu, logvar = model(data)
                    test_loss += loss_function(recon_batch, data, mu, logvar).item()
                    if i == 0:
                        n = min(data.size(0), 8)
                        comparison = torch.cat([data[:n], recon_batch.view(args.batch_size, 1, 4, 4)[:n]])
                        save_image(comparison.cpu(), "results/reconstruction_" + str(epoch) + ".png", nrow=n)

            test_loss /= len(test_loader.dataset)
            print(f"====> Test set loss: {test_loss:.4f}")

        for epoch in range(1, args.epochs + 1):
            train(epoch)
            test(epoch)
            with torch.no_grad():
                sample = noise.randn(64, 2).to(device)
                sample = model.decode(sample).cpu()
                save_image(sample.view(64, 1, 4, 4), "results/sample_" + str(epoch) + ".png")
    return out.getvalue(), images


# --- dcgan's main.py -------------------------------------------------------------


def dcgan_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Nine 1x8x8 'images' in [-1, 1] (as ``Normalize((0.5,), (0.5,))`` leaves them), labels."""
    return {"images": np.tanh(rng.standard_normal((9, 1, 8, 8))), "labels": np.zeros(9, dtype=np.int64)}


def dcgan_script_init(torch: Any) -> dict[str, np.ndarray]:
    """Initial weights for both nets, keyed ``netG.*`` and ``netD.*`` (float64)."""
    model = build_dcgan(torch).double()
    state = {k: to_numpy(v) for k, v in model.state_dict().items()}
    return init_weights(state, {k for k, _ in model.named_parameters()}, seed=13000)


def dcgan_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], outf: str
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' dcgan ``main.py`` for two epochs; return what it printed and the images
    it saved (``vutils.save_image``'s arrays, by file name).

    As the script: ``print(opt)``, the seed lines, ``weights_init`` applied
    through ``Module.apply``, the starting weights read with
    ``netG.load_state_dict(torch.load(opt.netG))`` (files written here from
    ``init``), ``print(netG)``/``print(netD)``, the alternating D/G steps with
    ``torch.full`` labels, ``fill_``, ``fake.detach()``, the printed losses,
    the real and fixed-noise sample images and the per-epoch
    ``torch.save(netG.state_dict(), ...)`` checkpoints. Differences: the
    networks shrunk to 1x8x8 images (``nz``, ``ngf``, ``ndf`` = 4, two layers
    each), the dataset (a ``TensorDataset``, not shuffled: the frameworks'
    shuffles differ), float64, the noise (``torch.randn``) taken from
    :class:`SuppliedNoise`, and ``save_image`` storing arrays.
    """
    import contextlib
    import io
    import os
    import random
    from types import SimpleNamespace

    nn = torch.nn
    optim = torch.optim
    cudnn = torch.backends.cudnn
    noise_source = SuppliedNoise(torch, seed=14000)
    images: dict[str, np.ndarray] = {}

    def save_image(tensor, fp, normalize=False):
        images[os.path.basename(fp)] = to_numpy(tensor)

    # the starting weights, in the files --netG / --netD name
    for net in ("netG", "netD"):
        sd = {k[len(net) + 1 :]: torch.tensor(v) for k, v in init.items() if k.startswith(net + ".")}
        torch.save(sd, os.path.join(outf, f"{net}_init.pth"))

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        opt = SimpleNamespace(
            dataset="fake",
            dataroot=None,
            workers=0,
            batchSize=4,
            imageSize=8,
            nz=4,
            ngf=4,
            ndf=4,
            niter=2,
            lr=0.0002,
            beta1=0.5,
            accel=False,
            dry_run=False,
            ngpu=1,
            netG=os.path.join(outf, "netG_init.pth"),
            netD=os.path.join(outf, "netD_init.pth"),
            outf=outf,
            manualSeed=999,
            classes="bedroom",
        )
        print(opt)

        try:
            os.makedirs(opt.outf)
        except OSError:
            pass

        if opt.manualSeed is None:
            opt.manualSeed = random.randint(1, 10000)
        print("Random Seed: ", opt.manualSeed)
        random.seed(opt.manualSeed)
        torch.manual_seed(opt.manualSeed)

        cudnn.benchmark = True

        if torch.accelerator.is_available() and not opt.accel:
            print("WARNING: You have an accelerator device, so you should probably run with --accel")

        dataset = torch.utils.data.TensorDataset(torch.tensor(data["images"]), torch.tensor(data["labels"]))
        nc = 1

        assert dataset
        dataloader = torch.utils.data.DataLoader(
            dataset, batch_size=opt.batchSize, shuffle=False, num_workers=int(opt.workers)
        )
        use_accel = opt.accel and torch.accelerator.is_available()
        if use_accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")
        print(f"Using device: {device}")

        ngpu = int(opt.ngpu)
        nz = int(opt.nz)
        ngf = int(opt.ngf)
        ndf = int(opt.ndf)

        # custom weights initialization called on netG and netD
        def weights_init(m):
            classname = m.__class__.__name__
            if classname.find("Conv") != -1:
                torch.nn.init.normal_(m.weight, 0.0, 0.02)
            elif classname.find("BatchNorm") != -1:
                torch.nn.init.normal_(m.weight, 1.0, 0.02)
                torch.nn.init.zeros_(m.bias)

        class Generator(nn.Module):
            def __init__(self, ngpu):
                super().__init__()
                self.ngpu = ngpu
                self.main = nn.Sequential(
                    # input is Z, going into a convolution
                    nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
                    nn.BatchNorm2d(ngf * 2),
                    nn.ReLU(True),
                    # state size. (ngf*2) x 4 x 4
                    nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
                    nn.Tanh(),
                    # state size. (nc) x 8 x 8
                )

            def forward(self, input):
                if input.is_cuda and self.ngpu > 1:
                    output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
                else:
                    output = self.main(input)
                return output

        netG = Generator(ngpu).to(device).double()
        netG.apply(weights_init)
        if opt.netG != "":
            netG.load_state_dict(torch.load(opt.netG))
        print(netG)

        class Discriminator(nn.Module):
            def __init__(self, ngpu):
                super().__init__()
                self.ngpu = ngpu
                self.main = nn.Sequential(
                    # input is (nc) x 8 x 8
                    nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
                    nn.LeakyReLU(0.2, inplace=True),
                    # state size. (ndf) x 4 x 4
                    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                    nn.BatchNorm2d(ndf * 2),
                    nn.LeakyReLU(0.2, inplace=True),
                    # state size. (ndf*2) x 2 x 2
                    nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),
                    nn.Sigmoid(),
                )

            def forward(self, input):
                if input.is_cuda and self.ngpu > 1:
                    output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
                else:
                    output = self.main(input)

                return output.view(-1, 1).squeeze(1)

        netD = Discriminator(ngpu).to(device).double()
        netD.apply(weights_init)
        if opt.netD != "":
            netD.load_state_dict(torch.load(opt.netD))
        print(netD)

        criterion = nn.BCELoss()

        fixed_noise = noise_source.randn(opt.batchSize, nz, 1, 1, device=device)
        real_label = 1
        fake_label = 0

        # setup optimizer
        optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
        optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

        if opt.dry_run:
            opt.niter = 1

        for epoch in range(opt.niter):
            for i, data in enumerate(dataloader, 0):
                ############################
                # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
                ###########################
                # train with real
                netD.zero_grad()
                real_cpu = data[0].to(device)
                batch_size = real_cpu.size(0)
                label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)

                output = netD(real_cpu)
                errD_real = criterion(output, label)
                errD_real.backward()
                D_x = output.mean().item()

                # train with fake
                noise = noise_source.randn(batch_size, nz, 1, 1, device=device)
                fake = netG(noise)
                label.fill_(fake_label)
                output = netD(fake.detach())
                errD_fake = criterion(output, label)
                errD_fake.backward()
                D_G_z1 = output.mean().item()
                errD = errD_real + errD_fake
                optimizerD.step()

                ############################
                # (2) Update G network: maximize log(D(G(z)))
                ###########################
                netG.zero_grad()
                label.fill_(real_label)  # fake labels are real for generator cost
                output = netD(fake)
                errG = criterion(output, label)
                errG.backward()
                D_G_z2 = output.mean().item()
                optimizerG.step()

                print(
                    "[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f"  # noqa: UP031
                    % (epoch, opt.niter, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2)
                )
                if i % 100 == 0:
                    save_image(real_cpu, "%s/real_samples.png" % opt.outf, normalize=True)  # noqa: UP031
                    fake = netG(fixed_noise)
                    save_image(
                        fake.detach(),
                        "%s/fake_samples_epoch_%03d.png" % (opt.outf, epoch),  # noqa: UP031
                        normalize=True,
                    )

                if opt.dry_run:
                    break
            # do checkpointing
            torch.save(netG.state_dict(), "%s/netG_epoch_%d.pth" % (opt.outf, epoch))  # noqa: UP031
            torch.save(netD.state_dict(), "%s/netD_epoch_%d.pth" % (opt.outf, epoch))  # noqa: UP031
    return out.getvalue().replace(outf, "OUTF"), images


# --- fast_neural_style's neural_style.py (train and stylize) ----------------------
#
# The example trains on an ImageFolder of photographs with a VGG-16 pretrained on
# ImageNet. Here the photographs are NumPy uint8 arrays turned into tensors by
# :func:`to_tensor` (torchvision's ``ToTensor``, written out), and the VGG is a
# shrunk feature stack with VGG-16's layer layout whose weights are drawn with
# NumPy from a fixed seed (:func:`style_script_init`) and loaded where the
# example loads the pretrained ones.


def to_tensor(torch: Any, pic: np.ndarray) -> Any:
    """torchvision's ``ToTensor`` on an HxWxC (or HxW) uint8 array: CxHxW, scaled to [0, 1].

    The float type is float64 here (torchvision's default float is float32)."""
    if pic.ndim == 2:
        pic = pic[:, :, None]
    img = torch.from_numpy(np.ascontiguousarray(pic.transpose((2, 0, 1)))).contiguous()
    return img.to(dtype=torch.float64).div(255)


def style_script_classes(torch: Any) -> tuple[Any, Any]:
    """The example's ``TransformerNet`` (transformer_net.py) and ``Vgg16`` (vgg.py), shrunk:
    channels 32/64/128 to 4/6/8, kernels 9 to 5, five residual blocks to two, and VGG-16's
    four slices to three over a 12-layer feature stack."""
    from collections import namedtuple

    class TransformerNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # Initial convolution layers
            self.conv1 = ConvLayer(3, 4, kernel_size=5, stride=1)
            self.in1 = torch.nn.InstanceNorm2d(4, affine=True)
            self.conv2 = ConvLayer(4, 6, kernel_size=3, stride=2)
            self.in2 = torch.nn.InstanceNorm2d(6, affine=True)
            self.conv3 = ConvLayer(6, 8, kernel_size=3, stride=2)
            self.in3 = torch.nn.InstanceNorm2d(8, affine=True)
            # Residual layers
            self.res1 = ResidualBlock(8)
            self.res2 = ResidualBlock(8)
            # Upsampling Layers
            self.deconv1 = UpsampleConvLayer(8, 6, kernel_size=3, stride=1, upsample=2)
            self.in4 = torch.nn.InstanceNorm2d(6, affine=True)
            self.deconv2 = UpsampleConvLayer(6, 4, kernel_size=3, stride=1, upsample=2)
            self.in5 = torch.nn.InstanceNorm2d(4, affine=True)
            self.deconv3 = ConvLayer(4, 3, kernel_size=5, stride=1)
            # Non-linearities
            self.relu = torch.nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.relu(self.in3(self.conv3(y)))
            y = self.res1(y)
            y = self.res2(y)
            y = self.relu(self.in4(self.deconv1(y)))
            y = self.relu(self.in5(self.deconv2(y)))
            y = self.deconv3(y)
            return y

    class ConvLayer(torch.nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super().__init__()
            reflection_padding = kernel_size // 2
            self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
            self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            out = self.reflection_pad(x)
            out = self.conv2d(out)
            return out

    class ResidualBlock(torch.nn.Module):
        """ResidualBlock
        introduced in: https://arxiv.org/abs/1512.03385
        recommended architecture: http://torch.ch/blog/2016/02/04/resnets.html
        """

        def __init__(self, channels):
            super().__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            out = out + residual
            return out

    class UpsampleConvLayer(torch.nn.Module):
        """UpsampleConvLayer
        Upsamples the input and then does a convolution. This method gives better results
        compared to ConvTranspose2d.
        ref: http://distill.pub/2016/deconv-checkerboard/
        """

        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            reflection_padding = kernel_size // 2
            self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
            self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
            out = self.reflection_pad(x_in)
            out = self.conv2d(out)
            return out

    class Vgg16(torch.nn.Module):
        def __init__(self, features, requires_grad=False):
            super().__init__()
            vgg_pretrained_features = features
            self.slice1 = torch.nn.Sequential()
            self.slice2 = torch.nn.Sequential()
            self.slice3 = torch.nn.Sequential()
            for x in range(4):
                self.slice1.add_module(str(x), vgg_pretrained_features[x])
            for x in range(4, 9):
                self.slice2.add_module(str(x), vgg_pretrained_features[x])
            for x in range(9, 12):
                self.slice3.add_module(str(x), vgg_pretrained_features[x])
            if not requires_grad:
                for param in self.parameters():
                    param.requires_grad = False

        def forward(self, X):
            h = self.slice1(X)
            h_relu1_2 = h
            h = self.slice2(h)
            h_relu2_2 = h
            h = self.slice3(h)
            h_relu3_3 = h
            vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3"])
            out = vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3)
            return out

    return TransformerNet, Vgg16


def vgg_features(torch: Any) -> Any:
    """VGG-16's ``features`` layout (conv-relu pairs and max pools), shrunk to 12 layers."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(inplace=True),
    )  # fmt: skip


def style_script_init(torch: Any) -> dict[str, np.ndarray]:
    """Initial weights: ``transformer.*`` for TransformerNet, ``vgg.*`` for the feature stack
    (the stand-in for the pretrained VGG-16), float64, drawn with NumPy."""
    torch.manual_seed(0)
    TransformerNet, _ = style_script_classes(torch)
    state = {f"transformer.{k}": to_numpy(v) for k, v in TransformerNet().state_dict().items()}
    state |= {f"vgg.{k}": to_numpy(v) for k, v in vgg_features(torch).state_dict().items()}
    return init_weights(state, set(state), seed=16000)


def style_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Five 8x8 RGB training 'photographs', an 8x8 style image and a 12x12 content image (uint8)."""
    return {
        "train": rng.integers(0, 256, (5, 8, 8, 3)).astype(np.uint8),
        "style": rng.integers(0, 256, (8, 8, 3)).astype(np.uint8),
        "content": rng.integers(0, 256, (12, 12, 3)).astype(np.uint8),
    }


def style_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], outdir: str
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' fast_neural_style ``neural_style.py``: ``train`` then ``stylize`` with the
    model it saved; return what it printed and the stylized image ``utils.save_image`` wrote (as
    arrays: the clamped float image and its uint8 pixels).

    As the example: ``utils.normalize_batch`` (``new_tensor(...).view(-1, 1, 1)``, ``div_(255.0)``)
    and ``utils.gram_matrix``, the frozen VGG's namedtuple features of the repeated style image,
    Adam with the MSE content and Gram style losses, the log lines every ``log_interval`` batches,
    checkpoints with ``transformer.eval().cpu()`` / ``state_dict()`` / ``.to(device).train()``,
    the final ``state_dict`` save, then ``stylize`` under ``no_grad``: ``torch.load``, the regex
    removing ``in*.running_*`` keys, ``load_state_dict``, ``eval()``, and ``save_image``'s
    ``clamp(0, 255)``. Differences: the nets shrunk (see :func:`style_script_classes`), the VGG
    weights loaded from ``init`` instead of downloaded, the datasets NumPy arrays through
    :func:`to_tensor` instead of image files (no resize or crop), float64, the argument parser
    (namespaces) and ``time.ctime()`` a fixed string (it names the saved model and starts
    each log line).
    """
    import contextlib
    import io
    import os
    import re
    from types import SimpleNamespace

    TransformerNet, Vgg16 = style_script_classes(torch)
    Adam = torch.optim.Adam
    DataLoader = torch.utils.data.DataLoader
    time = SimpleNamespace(ctime=lambda: "Sun Nov 29 08:45:00 2026")
    saved_images: dict[str, np.ndarray] = {}

    class utils:  # noqa: N801 - the example's utils.py
        @staticmethod
        def gram_matrix(y):
            (b, ch, h, w) = y.size()
            features = y.view(b, ch, w * h)
            features_t = features.transpose(1, 2)
            gram = features.bmm(features_t) / (ch * h * w)
            return gram

        @staticmethod
        def normalize_batch(batch):
            # normalize using imagenet mean and std
            mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
            std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
            batch = batch.div_(255.0)
            return (batch - mean) / std

        @staticmethod
        def save_image(filename, data):
            img = data.clone().clamp(0, 255).numpy()
            saved_images[os.path.basename(filename) + ":float"] = np.array(img)
            img = img.transpose(1, 2, 0).astype("uint8")
            saved_images[os.path.basename(filename)] = img

    class ImageArrays(torch.utils.data.Dataset):
        """Stands in for ``datasets.ImageFolder``: (image, class) pairs through ``transform``."""

        def __init__(self, images, transform):
            self.images = images
            self.transform = transform

        def __len__(self):
            return len(self.images)

        def __getitem__(self, index):
            return self.transform(self.images[index]), 0

    def pretrained_vgg_features():  # models.vgg16(pretrained=True).features
        features = vgg_features(torch).double()
        features.load_state_dict({k[4:]: torch.tensor(v) for k, v in init.items() if k.startswith("vgg.")})
        return features

    def train(args):
        if args.accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        print(f"Using device: {device}")

        np.random.seed(args.seed)
        torch.manual_seed(args.seed)

        def transform(pic):  # Resize, CenterCrop, ToTensor, Lambda(lambda x: x.mul(255))
            return to_tensor(torch, pic).mul(255)

        train_dataset = ImageArrays(data["train"], transform)
        train_loader = DataLoader(train_dataset, batch_size=args.batch_size)

        transformer = TransformerNet().double().to(device)
        transformer.load_state_dict(
            {k[12:]: torch.tensor(v) for k, v in init.items() if k.startswith("transformer.")}
        )
        optimizer = Adam(transformer.parameters(), args.lr)
        mse_loss = torch.nn.MSELoss()

        vgg = Vgg16(pretrained_vgg_features(), requires_grad=False).to(device)

        def style_transform(pic):  # ToTensor, Lambda(lambda x: x.mul(255))
            return to_tensor(torch, pic).mul(255)

        style = data["style"]  # utils.load_image(args.style_image, size=args.style_size)
        style = style_transform(style)
        style = style.repeat(args.batch_size, 1, 1, 1).to(device)

        features_style = vgg(utils.normalize_batch(style))
        gram_style = [utils.gram_matrix(y) for y in features_style]

        for e in range(args.epochs):
            transformer.train()
            agg_content_loss = 0.0
            agg_style_loss = 0.0
            count = 0
            for batch_id, (x, _) in enumerate(train_loader):
                n_batch = len(x)
                count += n_batch
                optimizer.zero_grad()

                x = x.to(device)
                y = transformer(x)

                y = utils.normalize_batch(y)
                x = utils.normalize_batch(x)

                features_y = vgg(y)
                features_x = vgg(x)

                content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

                style_loss = 0.0
                for ft_y, gm_s in zip(features_y, gram_style):  # noqa: B905 - as the example
                    gm_y = utils.gram_matrix(ft_y)
                    style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
                style_loss *= args.style_weight

                total_loss = content_loss + style_loss
                total_loss.backward()
                optimizer.step()

                agg_content_loss += content_loss.item()
                agg_style_loss += style_loss.item()

                if (batch_id + 1) % args.log_interval == 0:
                    mesg = "{}\tEpoch {}:\t[{}/{}]\tcontent: {:.6f}\tstyle: {:.6f}\ttotal: {:.6f}".format(  # noqa: UP032
                        time.ctime(),
                        e + 1,
                        count,
                        len(train_dataset),
                        agg_content_loss / (batch_id + 1),
                        agg_style_loss / (batch_id + 1),
                        (agg_content_loss + agg_style_loss) / (batch_id + 1),
                    )
                    print(mesg)

                if args.checkpoint_model_dir is not None and (batch_id + 1) % args.checkpoint_interval == 0:
                    transformer.eval().cpu()
                    ckpt_model_filename = "ckpt_epoch_" + str(e) + "_batch_id_" + str(batch_id + 1) + ".pth"
                    ckpt_model_path = os.path.join(args.checkpoint_model_dir, ckpt_model_filename)
                    torch.save(transformer.state_dict(), ckpt_model_path)
                    transformer.to(device).train()

        # save model
        transformer.eval().cpu()
        save_model_filename = (
            "epoch_"
            + str(args.epochs)
            + "_"
            + str(time.ctime()).replace(" ", "_")
            + "_"
            + str(args.content_weight)
            + "_"
            + str(args.style_weight)
            + ".model"
        )
        save_model_path = os.path.join(args.save_model_dir, save_model_filename)
        torch.save(transformer.state_dict(), save_model_path)

        print("\nDone, trained model saved at", save_model_path)
        return save_model_path

    def stylize(args):
        device = torch.device("cpu")

        content_image = data["content"]  # utils.load_image(args.content_image, scale=args.content_scale)

        def content_transform(pic):  # ToTensor, Lambda(lambda x: x.mul(255))
            return to_tensor(torch, pic).mul(255)

        content_image = content_transform(content_image)
        content_image = content_image.unsqueeze(0).to(device)

        with torch.no_grad():
            style_model = TransformerNet().double()
            state_dict = torch.load(args.model)
            # remove saved deprecated running_* keys in InstanceNorm from the checkpoint
            for k in list(state_dict.keys()):
                if re.search(r"in\d+\.running_(mean|var)$", k):
                    del state_dict[k]
            style_model.load_state_dict(state_dict)
            style_model.to(device)
            style_model.eval()
            output = style_model(content_image).cpu()
        utils.save_image(args.output_image, output[0])

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args = SimpleNamespace(
            subcommand="train",
            epochs=2,
            batch_size=2,
            dataset="images",
            style_image="style.jpg",
            save_model_dir=os.path.join(outdir, "models"),
            checkpoint_model_dir=os.path.join(outdir, "checkpoints"),
            image_size=8,
            style_size=None,
            accel=False,
            seed=42,
            content_weight=1e5,
            style_weight=1e10,
            lr=1e-3,
            log_interval=1,
            checkpoint_interval=2,
        )
        # main(): check_paths(args)
        for path in (args.save_model_dir, args.checkpoint_model_dir):
            if not os.path.exists(path):
                os.makedirs(path)
        model_path = train(args)
        args = SimpleNamespace(
            subcommand="eval",
            content_image="content.jpg",
            content_scale=None,
            output_image=os.path.join(outdir, "stylized.jpg"),
            model=model_path,
            accel=False,
            export_onnx=None,
        )
        stylize(args)
    return out.getvalue().replace(outdir, "OUTDIR"), saved_images


# --- super_resolution's main.py and super_resolve.py -------------------------------
#
# main.py saves the whole model (``torch.save(model, path)``), which pickles ``Net``
# by the name of its module: :func:`superres_model_module` makes the examples'
# ``model.py`` an importable module per framework, as :func:`word_lm_model_module`.


def superres_model_module(torch: Any) -> Any:
    """The examples' super_resolution ``model`` module (``Net``) for ``torch``, importable by name.

    Shrunk: 64/64/32 channels to 8/8/4."""
    import sys
    import types

    name = f"zoo_models_superres_{torch.__name__}"
    if name in sys.modules:
        return sys.modules[name]
    nn = torch.nn
    init = torch.nn.init

    class Net(nn.Module):
        def __init__(self, upscale_factor):
            super().__init__()

            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 8, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(8, 8, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(8, 4, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(4, upscale_factor**2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            x = self.pixel_shuffle(self.conv4(x))
            return x

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv4.weight)

    module = types.ModuleType(name, "super_resolution/model.py")
    Net.__module__ = name
    Net.__qualname__ = "Net"
    module.Net = Net
    sys.modules[name] = module
    return module


def orthogonal(rng: np.random.Generator, shape: tuple[int, ...], gain: float) -> np.ndarray:
    """``init.orthogonal_`` drawn with NumPy: a normal matrix's QR factor, signs fixed by
    ``diag(R)``, rows (or columns, whichever are fewer) orthonormal, times ``gain``."""
    rows, cols = shape[0], int(np.prod(shape[1:]))
    flat = rng.standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return gain * q.reshape(shape)


def superres_script_init(torch: Any) -> dict[str, np.ndarray]:
    """Initial weights of the script's ``Net`` (float64, drawn with NumPy).

    ``Net._initialize_weights`` draws ``init.orthogonal_`` from the framework's generator, and
    the two frameworks' streams differ; the script runs it (so both frameworks execute it) and
    then loads these weights: orthogonal ones drawn the same way from a NumPy stream
    (:func:`orthogonal`, gain ``calculate_gain('relu')`` = sqrt(2) but for conv4), and the
    biases as ``Conv2d``'s default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``."""
    torch.manual_seed(0)
    model = superres_model_module(torch).Net(upscale_factor=2)
    rng = np.random.default_rng(18000)
    out = {}
    for key, value in sorted(model.state_dict().items()):
        shape = tuple(value.shape)
        if key.endswith("weight"):
            out[key] = orthogonal(rng, shape, 1.0 if key.startswith("conv4") else np.sqrt(2.0))
        else:
            weight = model.state_dict()[key[: -len("bias")] + "weight"]
            bound = 1.0 / np.sqrt(np.prod(tuple(weight.shape)[1:]))
            out[key] = rng.uniform(-bound, bound, shape)
    return out


def superres_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Six training and three test 8x8 RGB 'photographs' and a 6x6 one to super-resolve (uint8)."""
    return {
        "train": rng.integers(0, 256, (6, 8, 8, 3)).astype(np.uint8),
        "test": rng.integers(0, 256, (3, 8, 8, 3)).astype(np.uint8),
        "input_image": rng.integers(0, 256, (6, 6, 3)).astype(np.uint8),
    }


def luma(rgb: np.ndarray) -> np.ndarray:
    """The Y of PIL's ``convert('YCbCr')`` (ITU-R 601), as uint8."""
    y = rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114
    return np.clip(np.round(y), 0, 255).astype(np.uint8)


def superres_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], outdir: str
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' super_resolution ``main.py`` for two epochs, then ``super_resolve.py``
    on the last checkpoint; return what main.py printed and super_resolve's output Y channel
    (``out_y:float``, after ``*= 255.0`` and ``clip``, and ``out_y``, its uint8 pixels).

    As the example: ``print(opt)``, the dataset of Y channels (input: centre-cropped and
    shrunk by the upscale factor, target: the crop) through ``ToTensor``, ``Net`` with
    ``PixelShuffle`` and its ``init.orthogonal_`` initialisation, Adam, ``MSELoss``, the
    per-iteration and per-epoch lines, PSNR ``10 * log10(1 / mse.item())`` under ``no_grad``,
    ``torch.save(model, ...)`` of the whole model per epoch; then ``torch.load(...,
    weights_only=False)``, ``ToTensor()(y).view(1, -1, h, w)`` and the output scaled in place
    through ``.numpy()``. Differences: the net shrunk, the initial weights loaded from ``init``
    after ``Net()`` initialised itself (see :func:`superres_script_init`), images as NumPy
    arrays (:func:`luma` for PIL's Y channel, a 2x2 box mean for ``Resize``, no crop: the
    images are the crop size), the training set not shuffled (the frameworks' shuffles
    differ), float64, and super_resolve stopping at the Y channel (no Cb/Cr resize or merge).
    """
    import contextlib
    import io
    import os
    from math import log10
    from types import SimpleNamespace

    nn = torch.nn
    optim = torch.optim
    DataLoader = torch.utils.data.DataLoader
    Net = superres_model_module(torch).Net

    class DatasetFromArrays(torch.utils.data.Dataset):
        """dataset.py's ``DatasetFromFolder``: (input, target) Y channels through the transforms."""

        def __init__(self, images, input_transform=None, target_transform=None):
            super().__init__()
            self.images = images
            self.input_transform = input_transform
            self.target_transform = target_transform

        def __getitem__(self, index):
            input = luma(self.images[index])  # load_img: Image.open(...).convert('YCbCr'), y
            target = input.copy()
            if self.input_transform:
                input = self.input_transform(input)
            if self.target_transform:
                target = self.target_transform(target)

            return input, target

        def __len__(self):
            return len(self.images)

    def input_transform(crop_size, upscale_factor):  # CenterCrop, Resize(crop // factor), ToTensor
        def transform(y):
            h, w = y.shape
            f = upscale_factor
            small = y.reshape(h // f, f, w // f, f).astype(np.float64).mean(axis=(1, 3))
            return to_tensor(torch, np.round(small).astype(np.uint8))

        return transform

    def target_transform(crop_size):  # CenterCrop, ToTensor
        return lambda y: to_tensor(torch, y)

    def get_training_set(upscale_factor):
        crop_size = 8
        return DatasetFromArrays(
            data["train"],
            input_transform=input_transform(crop_size, upscale_factor),
            target_transform=target_transform(crop_size),
        )

    def get_test_set(upscale_factor):
        crop_size = 8
        return DatasetFromArrays(
            data["test"],
            input_transform=input_transform(crop_size, upscale_factor),
            target_transform=target_transform(crop_size),
        )

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # main.py
        opt = SimpleNamespace(
            upscale_factor=2,
            batchSize=4,
            testBatchSize=2,
            nEpochs=2,
            lr=0.01,
            accel=False,
            threads=0,
            seed=123,
        )
        print(opt)

        if opt.accel and not torch.accelerator.is_available():
            raise Exception("no accelerator found")

        torch.manual_seed(opt.seed)

        if opt.accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        print("===> Loading datasets")
        train_set = get_training_set(opt.upscale_factor)
        test_set = get_test_set(opt.upscale_factor)
        training_data_loader = DataLoader(
            dataset=train_set, num_workers=opt.threads, batch_size=opt.batchSize, shuffle=False
        )
        testing_data_loader = DataLoader(
            dataset=test_set, num_workers=opt.threads, batch_size=opt.testBatchSize, shuffle=False
        )

        print("===> Building model")
        model = Net(upscale_factor=opt.upscale_factor).double().to(device)
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        criterion = nn.MSELoss()

        optimizer = optim.Adam(model.parameters(), lr=opt.lr)

        def train(epoch):
            epoch_loss = 0
            for iteration, batch in enumerate(training_data_loader, 1):
                input, target = batch[0].to(device), batch[1].to(device)

                optimizer.zero_grad()
                loss = criterion(model(input), target)
                epoch_loss += loss.item()
                loss.backward()
                optimizer.step()

                print(
                    f"===> Epoch[{epoch}]({iteration}/{len(training_data_loader)}): Loss: {loss.item():.4f}"
                )

            print(f"===> Epoch {epoch} Complete: Avg. Loss: {epoch_loss / len(training_data_loader):.4f}")

        def test():
            avg_psnr = 0
            with torch.no_grad():
                for batch in testing_data_loader:
                    input, target = batch[0].to(device), batch[1].to(device)

                    prediction = model(input)
                    mse = criterion(prediction, target)
                    psnr = 10 * log10(1 / mse.item())
                    avg_psnr += psnr
            print(f"===> Avg. PSNR: {avg_psnr / len(testing_data_loader):.4f} dB")

        def checkpoint(epoch):
            model_out_path = os.path.join(outdir, f"model_epoch_{epoch}.pth")
            torch.save(model, model_out_path)
            print(f"Checkpoint saved to {model_out_path}")

        for epoch in range(1, opt.nEpochs + 1):
            train(epoch)
            test()
            checkpoint(epoch)

    # super_resolve.py
    opt = SimpleNamespace(
        input_image="input.jpg", model=os.path.join(outdir, "model_epoch_2.pth"), accel=False
    )
    # img = Image.open(opt.input_image).convert('YCbCr'); y, cb, cr = img.split()
    y = luma(data["input_image"])

    model = torch.load(opt.model, weights_only=False)
    img_to_tensor = to_tensor  # ToTensor()
    input = img_to_tensor(torch, y).view(1, -1, y.shape[0], y.shape[1])  # y.size[1], y.size[0] in PIL

    out = model(input)
    out = out.cpu()
    out_img_y = out[0].detach().numpy()
    out_img_y *= 255.0
    out_img_y = out_img_y.clip(0, 255)
    result = {"out_y:float": np.array(out_img_y[0]), "out_y": np.uint8(out_img_y[0])}
    return printed.getvalue().replace(outdir, "OUTDIR"), result


# --- mnist_rnn's main.py ------------------------------------------------------------


def mnist_rnn_classes(torch: Any, dropout: tuple[float, float] = (0.0, 0.0)) -> Any:
    """The examples' mnist_rnn ``Net``: an LSTM over the image rows (batch first), BatchNorm1d,
    Dropout2d, two Linear layers and ``log_softmax``. Shrunk: 28x28 images to 6x6, 64 hidden
    units to 8, 32 to 6. The dropout probabilities (0.25, 0.5 in the example) are arguments."""
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(input_size=6, hidden_size=8, batch_first=True)
            self.batchnorm = nn.BatchNorm1d(8)
            self.dropout1 = nn.Dropout2d(dropout[0])
            self.dropout2 = nn.Dropout2d(dropout[1])
            self.fc1 = nn.Linear(8, 6)
            self.fc2 = nn.Linear(6, 10)

        def forward(self, input):
            # Shape of input is (batch_size,1, 6, 6)
            # converting shape of input to (batch_size, 6, 6)
            # as required by RNN when batch_first is set True
            input = input.reshape(-1, 6, 6)
            output, hidden = self.rnn(input)

            # RNN output shape is (seq_len, batch, input_size)
            # Get last output of RNN
            output = output[:, -1, :]
            output = self.batchnorm(output)
            output = self.dropout1(output)
            output = self.fc1(output)
            output = F.relu(output)
            output = self.dropout2(output)
            output = self.fc2(output)
            output = F.log_softmax(output, dim=1)
            return output

    return Net


def mnist_rnn_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The mnist_rnn script's initial weights (float64, drawn with NumPy; BatchNorm buffers kept)."""
    torch.manual_seed(0)
    model = mnist_rnn_classes(torch)().double()
    state = {k: to_numpy(v) for k, v in model.state_dict().items()}
    return init_weights(state, {k for k, _ in model.named_parameters()}, seed=20000)


def mnist_rnn_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ten training and seven test 1x6x6 'digits' (normalised as the example's transform leaves
    them), with labels."""
    return {
        "train_x": (rng.uniform(0, 1, (10, 1, 6, 6)) - 0.1307) / 0.3081,
        "train_y": rng.integers(0, 10, 10).astype(np.int64),
        "test_x": (rng.uniform(0, 1, (7, 1, 6, 6)) - 0.1307) / 0.3081,
        "test_y": rng.integers(0, 10, 7).astype(np.int64),
    }


def mnist_rnn_script(
    torch: Any,
    init: dict[str, np.ndarray],
    data: dict[str, np.ndarray],
    save_path: str,
    dry_run: bool = False,
    dropout: tuple[float, float] = (0.0, 0.0),
) -> str:
    """Run the examples' mnist_rnn ``main`` for two epochs; return what it printed.

    As the example: ``Net`` (see :func:`mnist_rnn_classes`), Adadelta, ``StepLR(step_size=1,
    gamma)``, the train/test functions with their lines and ``args.dry_run`` breaks, and
    ``torch.save(model.state_dict(), ...)``. Differences: the data (``TensorDataset``s instead
    of torchvision's MNIST, not shuffled: the frameworks' shuffles differ), the argument parser
    (a namespace), float64, the initial weights loaded from ``init``, dropout 0 by default."""
    import contextlib
    import io
    from types import SimpleNamespace

    F = torch.nn.functional
    optim = torch.optim
    StepLR = torch.optim.lr_scheduler.StepLR
    Net = mnist_rnn_classes(torch, dropout)

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(
                    "Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(  # noqa: UP032 - as the example
                        epoch,
                        batch_idx * len(data),
                        len(train_loader.dataset),
                        100.0 * batch_idx / len(train_loader),
                        loss.item(),
                    )
                )
                if args.dry_run:
                    break

    def test(args, model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
                pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()
                if args.dry_run:
                    break

        test_loss /= len(test_loader.dataset)

        print(
            "\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(  # noqa: UP032
                test_loss, correct, len(test_loader.dataset), 100.0 * correct / len(test_loader.dataset)
            )
        )

    def main():
        args = SimpleNamespace(
            batch_size=4,
            test_batch_size=3,
            epochs=2,
            lr=0.1,
            gamma=0.7,
            accel=False,
            dry_run=dry_run,
            seed=1,
            log_interval=1,
            save_model=True,
        )

        if args.accel and not torch.accelerator.is_available():
            print("ERROR: accelerator is not available, try running on CPU")
            return

        torch.manual_seed(args.seed)

        if args.accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        kwargs = {"num_workers": 1, "pin_memory": True} if args.accel else {}
        train_loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.tensor(data["train_x"]), torch.tensor(data["train_y"])),
            batch_size=args.batch_size,
            shuffle=False,
            **kwargs,
        )
        test_loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.tensor(data["test_x"]), torch.tensor(data["test_y"])),
            batch_size=args.test_batch_size,
            shuffle=False,
            **kwargs,
        )

        model = Net().double().to(device)
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

        scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
        for epoch in range(1, args.epochs + 1):
            train(args, model, device, train_loader, optimizer, epoch)
            test(args, model, device, test_loader)
            scheduler.step()

        if args.save_model:
            torch.save(model.state_dict(), save_path)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main()
    return out.getvalue()


# --- imagenet's main.py ---------------------------------------------------------------
#
# ``models.__dict__[args.arch]()`` builds a torchvision ResNet; here the script carries a
# tiny one written as torchvision writes it (``BasicBlock`` with ``downsample``,
# ``AdaptiveAvgPool2d``, the ``kaiming_normal_(mode="fan_out")`` initialisation loop).


def imagenet_models(torch: Any) -> Any:
    """A ``models`` namespace holding ``resnet_tiny``: torchvision's ResNet with BasicBlocks,
    shrunk to 4 and 8 channels, one block per stage, two stages, 10 classes, and the 7x7
    stride-2 stem a 3x3 stride-1 one (as CIFAR ResNets have it) for 12x12 images."""
    from types import SimpleNamespace

    nn = torch.nn

    def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
        """3x3 convolution with padding"""
        return nn.Conv2d(
            in_planes,
            out_planes,
            kernel_size=3,
            stride=stride,
            padding=dilation,
            groups=groups,
            bias=False,
            dilation=dilation,
        )

    def conv1x1(in_planes, out_planes, stride=1):
        """1x1 convolution"""
        return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None, norm_layer=None):
            super().__init__()
            if norm_layer is None:
                norm_layer = nn.BatchNorm2d
            # Both self.conv1 and self.downsample layers downsample the input when stride != 1
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = norm_layer(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = norm_layer(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x

            out = self.conv1(x)
            out = self.bn1(out)
            out = self.relu(out)

            out = self.conv2(out)
            out = self.bn2(out)

            if self.downsample is not None:
                identity = self.downsample(x)

            out += identity
            out = self.relu(out)

            return out

    class ResNet(nn.Module):
        def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, norm_layer=None):
            super().__init__()
            if norm_layer is None:
                norm_layer = nn.BatchNorm2d
            self._norm_layer = norm_layer

            self.inplanes = 4
            self.dilation = 1
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = norm_layer(self.inplanes)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, 4, layers[0])
            self.layer2 = self._make_layer(block, 8, layers[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8 * block.expansion, num_classes)

            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

            if zero_init_residual:
                for m in self.modules():
                    if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                        nn.init.constant_(m.bn2.weight, 0)

        def _make_layer(self, block, planes, blocks, stride=1):
            norm_layer = self._norm_layer
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    conv1x1(self.inplanes, planes * block.expansion, stride),
                    norm_layer(planes * block.expansion),
                )

            layers = []
            layers.append(block(self.inplanes, planes, stride, downsample, norm_layer))
            self.inplanes = planes * block.expansion
            for _ in range(1, blocks):
                layers.append(block(self.inplanes, planes, norm_layer=norm_layer))

            return nn.Sequential(*layers)

        def _forward_impl(self, x):
            x = self.conv1(x)
            x = self.bn1(x)
            x = self.relu(x)
            x = self.maxpool(x)

            x = self.layer1(x)
            x = self.layer2(x)

            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            x = self.fc(x)

            return x

        def forward(self, x):
            return self._forward_impl(x)

    def resnet_tiny(**kwargs):
        return ResNet(BasicBlock, [1, 1], num_classes=10, **kwargs)

    return SimpleNamespace(resnet_tiny=resnet_tiny, ResNet=ResNet, BasicBlock=BasicBlock)


# the command line of the stored run: two epochs, then resumed for a third
IMAGENET_ARGV = "--epochs 2 -b 4 --lr 0.1 --lr-step 2 -p 1 --seed 7 fake".split()


def imagenet_script_init(torch: Any) -> dict[str, np.ndarray]:
    """Initial weights of ``resnet_tiny`` (float64, drawn with NumPy): convolutions as
    ``kaiming_normal_(mode="fan_out", nonlinearity="relu")`` (normal, std
    ``sqrt(2 / (out_channels * kh * kw))``), BatchNorm scales ``1 + U(-0.1, 0.1)`` and shifts
    ``U(-0.1, 0.1)`` (not torchvision's 1 and 0, so that they matter), ``fc`` as ``Linear``'s
    default; BatchNorm buffers as constructed."""
    torch.manual_seed(0)
    model = imagenet_models(torch).resnet_tiny().double()
    params = {k for k, _ in model.named_parameters()}
    rng = np.random.default_rng(22000)
    out = {}
    for key, value in sorted(model.state_dict().items()):
        arr = to_numpy(value)
        if key not in params:
            out[key] = arr
        elif arr.ndim == 4:
            out[key] = rng.standard_normal(arr.shape) * np.sqrt(
                2.0 / (arr.shape[0] * arr.shape[2] * arr.shape[3])
            )
        elif key.startswith("fc."):
            bound = 1.0 / np.sqrt(model.fc.in_features)
            out[key] = rng.uniform(-bound, bound, arr.shape)
        elif key.endswith("weight"):
            out[key] = 1.0 + rng.uniform(-0.1, 0.1, arr.shape)
        else:
            out[key] = rng.uniform(-0.1, 0.1, arr.shape)
    return out


def imagenet_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ten training 3x12x12 uint8 'images' with labels of 10 classes, and six validation ones:
    four of the training images and two new, so that the accuracy moves as the net learns."""
    train_x = rng.integers(0, 256, (10, 3, 12, 12)).astype(np.uint8)
    train_y = rng.integers(0, 10, 10).astype(np.int64)
    new_x = rng.integers(0, 256, (2, 3, 12, 12)).astype(np.uint8)
    new_y = rng.integers(0, 10, 2).astype(np.int64)
    return {
        "train_x": train_x,
        "train_y": train_y,
        "val_x": np.concatenate([train_x[3:7], new_x]),
        "val_y": np.concatenate([train_y[3:7], new_y]),
    }


def imagenet_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray], outdir: str, argv: list[str]
) -> str:
    """Run the examples' imagenet ``main.py`` (``main_worker``) with the command line ``argv``;
    return what it printed (``outdir`` shown as ``OUTDIR``).

    As the example: the argparse options it reads, ``print("=> creating model ...")``,
    ``models.__dict__[args.arch]()`` (see :func:`imagenet_models`), ``cudnn.benchmark``,
    ``CrossEntropyLoss().to(device)``, SGD with momentum and weight decay, ``StepLR``, resuming
    (``torch.load(..., map_location=...)``, the model's, optimizer's and scheduler's
    ``load_state_dict``), ``DataLoader(..., pin_memory=True, sampler=None)``, ``train`` and
    ``validate`` with ``AverageMeter`` / ``ProgressMeter`` / ``Summary``, ``accuracy(output,
    target, topk=(1, 5))``, ``best_acc1 = max(acc1, best_acc1)`` and ``save_checkpoint``
    (``torch.save`` and ``shutil.copyfile`` to ``model_best.pth.tar``). Differences: the data
    (uint8 arrays normalised into ``TensorDataset``s instead of ``ImageFolder``, not shuffled: the frameworks' shuffles
    differ), the model (tiny, float64, its initial weights loaded from ``init`` after its own
    initialisation ran), the checkpoint files in ``outdir``, ``map_location=device`` where the
    example names a GPU, no distributed branches, and ``time.time()`` a clock advancing 25 ms
    a call (:class:`_Clock`), so the printed timings are reproducible."""
    import argparse
    import contextlib
    import io
    import os
    import shutil
    from enum import Enum

    nn = torch.nn
    cudnn = torch.backends.cudnn
    StepLR = torch.optim.lr_scheduler.StepLR
    models = imagenet_models(torch)
    time = _Clock()
    model_names = ["resnet_tiny"]

    parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
    parser.add_argument("data", metavar="DIR", nargs="?", default="imagenet", help="path to dataset")
    parser.add_argument("-a", "--arch", metavar="ARCH", default="resnet_tiny", choices=model_names)
    parser.add_argument("-j", "--workers", default=0, type=int, metavar="N")
    parser.add_argument("--epochs", default=90, type=int, metavar="N")
    parser.add_argument("--start-epoch", default=0, type=int, metavar="N")
    parser.add_argument("-b", "--batch-size", default=256, type=int, metavar="N")
    parser.add_argument("--lr", "--learning-rate", default=0.1, type=float, metavar="LR", dest="lr")
    parser.add_argument("--momentum", default=0.9, type=float, metavar="M")
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, metavar="W", dest="weight_decay")
    parser.add_argument("--lr-step", default=30, type=int)  # StepLR's step_size, 30 in the example
    parser.add_argument("-p", "--print-freq", default=10, type=int, metavar="N")
    parser.add_argument("--resume", default="", type=str, metavar="PATH")
    parser.add_argument("-e", "--evaluate", dest="evaluate", action="store_true")
    parser.add_argument("--seed", default=None, type=int)
    parser.add_argument("--gpu", default=None, type=int)
    parser.add_argument("--dummy", action="store_true")

    best_acc1 = 0

    def main():
        args = parser.parse_args(argv)
        if args.seed is not None:
            torch.manual_seed(args.seed)
            cudnn.deterministic = True
            cudnn.benchmark = False
        main_worker(args.gpu, 1, args)

    def main_worker(gpu, ngpus_per_node, args):
        nonlocal best_acc1
        args.gpu = gpu

        if args.gpu is not None:
            print(f"Use GPU: {args.gpu} for training")

        # create model
        print(f"=> creating model '{args.arch}'")
        model = models.__dict__[args.arch]().double()
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})

        if not torch.cuda.is_available() and not torch.accelerator.is_available():
            print("using CPU, this will be slow")

        if torch.accelerator.is_available():
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")
        model = model.to(device)

        # define loss function (criterion), optimizer, and learning rate scheduler
        criterion = nn.CrossEntropyLoss().to(device)

        optimizer = torch.optim.SGD(
            model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay
        )

        """Sets the learning rate to the initial LR decayed by 10 every 30 epochs"""
        scheduler = StepLR(optimizer, step_size=args.lr_step, gamma=0.1)

        # optionally resume from a checkpoint
        if args.resume:
            if os.path.isfile(args.resume):
                print(f"=> loading checkpoint '{args.resume}'")
                checkpoint = torch.load(args.resume, map_location=device)
                args.start_epoch = checkpoint["epoch"]
                best_acc1 = checkpoint["best_acc1"]
                if args.gpu is not None:
                    # best_acc1 may be from a checkpoint from a different GPU
                    best_acc1 = best_acc1.to(args.gpu)
                model.load_state_dict(checkpoint["state_dict"])
                optimizer.load_state_dict(checkpoint["optimizer"])
                scheduler.load_state_dict(checkpoint["scheduler"])
                print(f"=> loaded checkpoint '{args.resume}' (epoch {checkpoint['epoch']})")
            else:
                print(f"=> no checkpoint found at '{args.resume}'")

        cudnn.benchmark = True

        # Data loading code
        mean = torch.tensor([0.485, 0.456, 0.406], dtype=torch.float64).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225], dtype=torch.float64).view(1, 3, 1, 1)

        def normalize(pixels):  # ToTensor() and Normalize(mean, std), on the whole set
            return (torch.tensor(pixels).double().div(255) - mean) / std

        train_dataset = torch.utils.data.TensorDataset(
            normalize(data["train_x"]), torch.tensor(data["train_y"])
        )
        val_dataset = torch.utils.data.TensorDataset(normalize(data["val_x"]), torch.tensor(data["val_y"]))
        train_sampler = None
        val_sampler = None

        train_loader = torch.utils.data.DataLoader(
            train_dataset,
            batch_size=args.batch_size,
            shuffle=False,  # (train_sampler is None) in the example
            num_workers=args.workers,
            pin_memory=True,
            sampler=train_sampler,
        )

        val_loader = torch.utils.data.DataLoader(
            val_dataset,
            batch_size=args.batch_size,
            shuffle=False,
            num_workers=args.workers,
            pin_memory=True,
            sampler=val_sampler,
        )

        if args.evaluate:
            validate(val_loader, model, criterion, args)
            return

        for epoch in range(args.start_epoch, args.epochs):
            # train for one epoch
            train(train_loader, model, criterion, optimizer, epoch, device, args)

            # evaluate on validation set
            acc1 = validate(val_loader, model, criterion, args)

            scheduler.step()

            # remember best acc@1 and save checkpoint
            is_best = acc1 > best_acc1
            best_acc1 = max(acc1, best_acc1)

            save_checkpoint(
                {
                    "epoch": epoch + 1,
                    "arch": args.arch,
                    "state_dict": model.state_dict(),
                    "best_acc1": best_acc1,
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                },
                is_best,
            )

    def train(train_loader, model, criterion, optimizer, epoch, device, args):
        batch_time = AverageMeter("Time", ":6.3f")
        data_time = AverageMeter("Data", ":6.3f")
        losses = AverageMeter("Loss", ":.4e")
        top1 = AverageMeter("Acc@1", ":6.2f")
        top5 = AverageMeter("Acc@5", ":6.2f")
        progress = ProgressMeter(
            len(train_loader), [batch_time, data_time, losses, top1, top5], prefix=f"Epoch: [{epoch}]"
        )

        # switch to train mode
        model.train()

        end = time.time()
        for i, (images, target) in enumerate(train_loader):
            # measure data loading time
            data_time.update(time.time() - end)

            # move data to the same device as model
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)

            # compute output
            output = model(images)
            loss = criterion(output, target)

            # measure accuracy and record loss
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
            top5.update(acc5[0], images.size(0))

            # compute gradient and do SGD step
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            # measure elapsed time
            batch_time.update(time.time() - end)
            end = time.time()

            if i % args.print_freq == 0:
                progress.display(i + 1)

    def validate(val_loader, model, criterion, args):
        def run_validate(loader, base_progress=0):
            with torch.no_grad():
                end = time.time()
                for i, (images, target) in enumerate(loader):
                    i = base_progress + i
                    if torch.accelerator.is_available():
                        images = images.to(device=torch.accelerator.current_accelerator(), non_blocking=True)
                        target = target.to(device=torch.accelerator.current_accelerator(), non_blocking=True)

                    # compute output
                    output = model(images)
                    loss = criterion(output, target)

                    # measure accuracy and record loss
                    acc1, acc5 = accuracy(output, target, topk=(1, 5))
                    losses.update(loss.item(), images.size(0))
                    top1.update(acc1[0], images.size(0))
                    top5.update(acc5[0], images.size(0))

                    # measure elapsed time
                    batch_time.update(time.time() - end)
                    end = time.time()

                    if i % args.print_freq == 0:
                        progress.display(i + 1)

        batch_time = AverageMeter("Time", ":6.3f", Summary.NONE)
        losses = AverageMeter("Loss", ":.4e", Summary.NONE)
        top1 = AverageMeter("Acc@1", ":6.2f", Summary.AVERAGE)
        top5 = AverageMeter("Acc@5", ":6.2f", Summary.AVERAGE)
        progress = ProgressMeter(len(val_loader), [batch_time, losses, top1, top5], prefix="Test: ")

        # switch to evaluate mode
        model.eval()

        run_validate(val_loader)

        progress.display_summary()

        return top1.avg

    def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
        filename = os.path.join(outdir, filename)  # the example writes to the working directory
        torch.save(state, filename)
        if is_best:
            shutil.copyfile(filename, os.path.join(outdir, "model_best.pth.tar"))

    class Summary(Enum):
        NONE = 0
        AVERAGE = 1
        SUM = 2
        COUNT = 3

    class AverageMeter:
        """Computes and stores the average and current value"""

        def __init__(self, name, fmt=":f", summary_type=Summary.AVERAGE):
            self.name = name
            self.fmt = fmt
            self.summary_type = summary_type
            self.reset()

        def reset(self):
            self.val = 0
            self.avg = 0
            self.sum = 0
            self.count = 0

        def update(self, val, n=1):
            self.val = val
            self.sum += val * n
            self.count += n
            self.avg = self.sum / self.count

        def __str__(self):
            fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
            return fmtstr.format(**self.__dict__)

        def summary(self):
            fmtstr = ""
            if self.summary_type is Summary.NONE:
                fmtstr = ""
            elif self.summary_type is Summary.AVERAGE:
                fmtstr = "{name} {avg:.3f}"
            elif self.summary_type is Summary.SUM:
                fmtstr = "{name} {sum:.3f}"
            elif self.summary_type is Summary.COUNT:
                fmtstr = "{name} {count:.3f}"
            else:
                raise ValueError(f"invalid summary type {self.summary_type!r}")

            return fmtstr.format(**self.__dict__)

    class ProgressMeter:
        def __init__(self, num_batches, meters, prefix=""):
            self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
            self.meters = meters
            self.prefix = prefix

        def display(self, batch):
            entries = [self.prefix + self.batch_fmtstr.format(batch)]
            entries += [str(meter) for meter in self.meters]
            print("\t".join(entries))

        def display_summary(self):
            entries = [" *"]
            entries += [meter.summary() for meter in self.meters]
            print(" ".join(entries))

        def _get_batch_fmtstr(self, num_batches):
            num_digits = len(str(num_batches // 1))
            fmt = "{:" + str(num_digits) + "d}"
            return "[" + fmt + "/" + fmt.format(num_batches) + "]"

    def accuracy(output, target, topk=(1,)):
        """Computes the accuracy over the k top predictions for the specified values of k"""
        with torch.no_grad():
            maxk = max(topk)
            batch_size = target.size(0)

            _, pred = output.topk(maxk, 1, True, True)
            pred = pred.t()
            correct = pred.eq(target.view(1, -1).expand_as(pred))

            res = []
            for k in topk:
                correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
                res.append(correct_k.mul_(100.0 / batch_size))
            return res

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main()
    return out.getvalue().replace(outdir, "OUTDIR")


# --- regression's main.py -------------------------------------------------------------


def regression_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The target polynomial (``W_target``, ``b_target``: ``randn * 5`` drawn with NumPy) and
    ``fc``'s initial weights (``Linear``'s default ``U(-1/2, 1/2)`` for 4 inputs), float64."""
    rng = np.random.default_rng(24000)
    return {
        "W_target": rng.standard_normal((4, 1)) * 5,
        "b_target": rng.standard_normal(1) * 5,
        "fc.weight": rng.uniform(-0.5, 0.5, (1, 4)),
        "fc.bias": rng.uniform(-0.5, 0.5, 1),
    }


def regression_script(
    torch: Any, init: dict[str, np.ndarray], seed: int = 25000
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' regression ``main.py``; return what it printed and ``fc``'s final
    weights.

    As the example: ``make_features`` (``unsqueeze``, ``cat`` of powers), ``f`` (``mm`` plus
    ``b_target.item()``), ``poly_desc`` formatting 0-d tensors with ``'{:+.2f}'``,
    ``get_batch``, ``fc.zero_grad()``, ``F.smooth_l1_loss``, the update
    ``param.data.add_(-0.1 * param.grad)`` until the loss is below 1e-3, and the three printed
    lines. Differences: ``torch.randn`` draws (the target and each batch's ``x``) come from
    NumPy (``init`` and a generator seeded with ``seed``), ``fc`` starts from ``init``, and
    everything is float64."""
    import contextlib
    import io
    from itertools import count

    F = torch.nn.functional
    rng = np.random.default_rng(seed)

    POLY_DEGREE = 4
    W_target = torch.tensor(init["W_target"])  # torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.tensor(init["b_target"])  # torch.randn(1) * 5

    def make_features(x):
        """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
        x = x.unsqueeze(1)
        return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)

    def f(x):
        """Approximated function."""
        return x.mm(W_target) + b_target.item()

    def poly_desc(W, b):
        """Creates a string description of a polynomial."""
        result = "y = "
        for i, w in enumerate(W):
            result += f"{w:+.2f} x^{i + 1} "
        result += f"{b[0]:+.2f}"
        return result

    def get_batch(batch_size=32):
        """Builds a batch i.e. (x, f(x)) pair."""
        random = torch.tensor(rng.standard_normal(batch_size))  # torch.randn(batch_size)
        x = make_features(random)
        y = f(x)
        return x, y

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # Define model
        fc = torch.nn.Linear(W_target.size(0), 1).double()
        fc.load_state_dict({"weight": torch.tensor(init["fc.weight"]), "bias": torch.tensor(init["fc.bias"])})

        for batch_idx in count(1):  # noqa: B007 - printed after the loop, as the example
            # Get data
            batch_x, batch_y = get_batch()

            # Reset gradients
            fc.zero_grad()

            # Forward pass
            output = F.smooth_l1_loss(fc(batch_x), batch_y)
            loss = output.item()

            # Backward pass
            output.backward()

            # Apply gradients
            for param in fc.parameters():
                param.data.add_(-0.1 * param.grad)

            # Stop criterion
            if loss < 1e-3:
                break

        print(f"Loss: {loss:.6f} after {batch_idx} batches")
        print("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
        print("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))
    return out.getvalue(), {k: to_numpy(v) for k, v in fc.state_dict().items()}


# --- mnist_forward_forward's main.py ---------------------------------------------------


def forward_forward_script_init(torch: Any) -> dict[str, np.ndarray]:
    """Initial weights of the two ``Layer``s (``layers.<i>.weight`` / ``.bias``: ``Linear``'s
    default ``U(-1/sqrt(in), 1/sqrt(in))``, drawn with NumPy), float64."""
    rng = np.random.default_rng(26000)
    out = {}
    for i, (d_in, d_out) in enumerate([(36, 8), (8, 8)]):
        bound = 1.0 / np.sqrt(d_in)
        out[f"layers.{i}.weight"] = rng.uniform(-bound, bound, (d_out, d_in))
        out[f"layers.{i}.bias"] = rng.uniform(-bound, bound, d_out)
    return out


def forward_forward_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Twenty training and ten test 6x6 'digits' (flattened, normalised as the example's
    transform leaves them) with labels, and the draws standing in for ``get_y_neg``'s
    ``torch.randint`` (one index into the nine wrong labels per training sample)."""
    return {
        "train_x": (rng.uniform(0, 1, (20, 36)) - 0.1307) / 0.3081,
        "train_y": rng.integers(0, 10, 20).astype(np.int64),
        "test_x": (rng.uniform(0, 1, (10, 36)) - 0.1307) / 0.3081,
        "test_y": rng.integers(0, 10, 10).astype(np.int64),
        "neg_draws": rng.integers(0, 9, 20).astype(np.int64),
    }


def forward_forward_script(
    torch: Any, init: dict[str, np.ndarray], data: dict[str, np.ndarray]
) -> tuple[str, dict[str, np.ndarray]]:
    """Run the examples' mnist_forward_forward ``main.py``; return what it printed and the
    trained layers' weights (``layers.<i>.*``).

    As the example: ``get_y_neg`` (``clone``, ``remove(y_samp.item())``, an index into a
    tensor of the allowed labels), ``overlay_y_on_x`` (``x_[:, :classes] *= 0.0`` and
    ``x_[range(n), y] = x.max()``), ``Net`` with a plain list of ``Layer(nn.Linear)`` (its own
    ``Adam``, ``threshold``, ``train`` shadowing ``Module.train``), the forward
    ``x / (x.norm(2, 1, keepdim=True) + 1e-4)`` through ``mm(x, weight.T)``, the loss
    ``torch.log(1 + torch.exp(torch.cat([...]))).mean()`` of ``goodness = h.pow(2).mean(1)``,
    ``Net.predict`` with ``sum(goodness)`` and ``argmax``, and the printed losses and errors.
    Differences: the data (``TensorDataset``-free arrays instead of MNIST, 6x6 images), the
    sizes (``Net([36, 8, 8])``, 30 epochs per layer), ``get_y_neg``'s ``torch.randint`` taken
    from ``data["neg_draws"]``, the layers made float64 (``.to(device, torch.float64)``, which
    keeps the Parameters each ``Adam`` holds) and started from ``init``."""
    import argparse
    import contextlib
    import io

    nn = torch.nn
    Adam = torch.optim.Adam
    neg_draws = iter(data["neg_draws"].tolist())

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1000, help="number of epochs to train (default: 1000)")
    parser.add_argument("--lr", type=float, default=0.03, help="learning rate (default: 0.03)")
    parser.add_argument("--no_accel", action="store_true", default=False, help="disables accelerator")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    parser.add_argument(
        "--save_model", action="store_true", default=False, help="For saving the current Model"
    )
    parser.add_argument("--train_size", type=int, default=50000, help="size of training set")
    parser.add_argument("--threshold", type=float, default=2, help="threshold for training")
    parser.add_argument("--test_size", type=int, default=10000, help="size of test set")
    parser.add_argument("--log-interval", type=int, default=10, help="how many batches between logging")
    args = parser.parse_args(["--epochs", "30", "--train_size", "20", "--test_size", "10", "--no_accel"])

    use_accel = not args.no_accel and torch.accelerator.is_available()
    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    def get_y_neg(y):
        y_neg = y.clone()
        for idx, y_samp in enumerate(y):
            allowed_indices = list(range(10))
            allowed_indices.remove(y_samp.item())
            y_neg[idx] = torch.tensor(allowed_indices)[
                torch.tensor([next(neg_draws)])  # torch.randint(len(allowed_indices), size=(1,))
            ].item()
        return y_neg.to(device)

    def overlay_y_on_x(x, y, classes=10):
        """Replace the first 10 pixels of data [x] with one-hot-encoded label [y]"""
        x_ = x.clone()
        x_[:, :classes] *= 0.0
        x_[range(x.shape[0]), y] = x.max()
        return x_

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = []
            for d in range(len(dims) - 1):
                self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device, torch.float64)]

        def predict(self, x):
            goodness_per_label = []
            for label in range(10):
                h = overlay_y_on_x(x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness = goodness + [h.pow(2).mean(1)]
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = torch.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            for i, layer in enumerate(self.layers):
                print("training layer: ", i)
                h_pos, h_neg = layer.train(h_pos, h_neg)

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = torch.nn.ReLU()
            self.opt = Adam(self.parameters(), lr=args.lr)
            self.threshold = args.threshold
            self.num_epochs = args.epochs

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train(self, x_pos, x_neg):
            for i in range(self.num_epochs):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                # The following loss pushes pos (neg) samples to
                # values larger (smaller) than the self.threshold.
                loss = torch.log(
                    1 + torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))
                ).mean()
                self.opt.zero_grad()
                # this backward just compute the derivative and hence
                # is not considered backpropagation.
                loss.backward()
                self.opt.step()
                if i % args.log_interval == 0:
                    print("Loss: ", loss.item())
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        torch.manual_seed(args.seed)
        net = Net([36, 8, 8])
        for i, layer in enumerate(net.layers):
            layer.load_state_dict({k: torch.tensor(init[f"layers.{i}.{k}"]) for k in ("weight", "bias")})
        x, y = torch.tensor(data["train_x"]), torch.tensor(data["train_y"])  # next(iter(train_loader))
        x, y = x.to(device), y.to(device)
        x_pos = overlay_y_on_x(x, y)
        y_neg = get_y_neg(y)
        x_neg = overlay_y_on_x(x, y_neg)

        net.train(x_pos, x_neg)

        print("train error:", 1.0 - net.predict(x).eq(y).float().mean().item())

        x_te, y_te = torch.tensor(data["test_x"]), torch.tensor(data["test_y"])  # next(iter(test_loader))
        x_te, y_te = x_te.to(device), y_te.to(device)

        print("test error:", 1.0 - net.predict(x_te).eq(y_te).float().mean().item())
    final = {
        f"layers.{i}.{k}": to_numpy(v)
        for i, layer in enumerate(net.layers)
        for k, v in layer.state_dict().items()
    }
    return out.getvalue(), final


# --- siamese_network's main.py --------------------------------------------------------


def siamese_classes(torch: Any) -> Any:
    """The examples' ``SiameseNetwork``, its backbone the tiny ResNet of
    :func:`imagenet_models` instead of torchvision's ``resnet18`` (conv1 replaced by a
    one-channel 3x3 one, as the example replaces the 7x7 for MNIST), its comparison head
    ``Linear(16, 6)``, ``ReLU``, ``Linear(6, 1)`` (256 hidden units in the example)."""
    nn = torch.nn

    class SiameseNetwork(nn.Module):
        """
        Siamese network for image similarity estimation.
        The network is composed of two identical networks, one for each input.
        The output of each network is concatenated and passed to a linear layer.
        The output of the linear layer passed through a sigmoid function.
        """

        def __init__(self):
            super().__init__()
            # get resnet model
            self.resnet = imagenet_models(torch).resnet_tiny()

            # over-write the first conv layer to be able to read MNIST images
            # as resnet18 reads (3,x,x) where 3 is RGB channels
            # whereas MNIST has (1,x,x) where 1 is a gray-scale channel
            self.resnet.conv1 = nn.Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)
            self.fc_in_features = self.resnet.fc.in_features

            # remove the last layer of resnet18 (linear layer which is before avgpool layer)
            self.resnet = torch.nn.Sequential(*(list(self.resnet.children())[:-1]))

            # add linear layers to compare between the features of the two images
            self.fc = nn.Sequential(
                nn.Linear(self.fc_in_features * 2, 6),
                nn.ReLU(inplace=True),
                nn.Linear(6, 1),
            )

            self.sigmoid = nn.Sigmoid()

            # initialize the weights
            self.resnet.apply(self.init_weights)
            self.fc.apply(self.init_weights)

        def init_weights(self, m):
            if isinstance(m, nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                m.bias.data.fill_(0.01)

        def forward_once(self, x):
            output = self.resnet(x)
            output = output.view(output.size()[0], -1)
            return output

        def forward(self, input1, input2):
            # get two images' features
            output1 = self.forward_once(input1)
            output2 = self.forward_once(input2)

            # concatenate both images' features
            output = torch.cat((output1, output2), 1)

            # pass the concatenation to the linear layers
            output = self.fc(output)

            # pass the out of the linear layers to sigmoid layer
            output = self.sigmoid(output)

            return output

    return SiameseNetwork


def siamese_script_init(torch: Any) -> dict[str, np.ndarray]:
    """The siamese script's initial weights (float64, drawn with NumPy; BatchNorm buffers kept)."""
    torch.manual_seed(0)
    model = siamese_classes(torch)().double()
    state = {k: to_numpy(v) for k, v in model.state_dict().items()}
    return init_weights(state, {k for k, _ in model.named_parameters()}, seed=28000)


def siamese_script_data(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Twenty training and twenty test 8x8 uint8 'digits' (two of each class, shuffled), with
    labels: ``MNIST(...).data`` and ``.targets`` for ``APP_MATCHER``."""

    def split(n):
        return rng.integers(0, 256, (n, 8, 8)).astype(np.uint8), rng.permutation(np.arange(n) % 10)

    train_x, train_y = split(20)
    test_x, test_y = split(20)
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def siamese_script(
    torch: Any,
    init: dict[str, np.ndarray],
    data: dict[str, np.ndarray],
    save_path: str,
    dry_run: bool = False,
) -> str:
    """Run the examples' siamese_network ``main``; return what it printed.

    As the example: ``SiameseNetwork`` (see :func:`siamese_classes`: ``children()[:-1]`` into a
    ``Sequential``, ``apply(init_weights)`` with ``xavier_uniform_`` and ``bias.data.fill_``,
    ``torch.cat((output1, output2), 1)``, ``Sigmoid``), ``APP_MATCHER`` (``unsqueeze(1).clone()``
    of the images, ``group_examples`` through NumPy, ``__getitem__``'s ``random.randint`` pairs,
    ``torch.tensor(1, dtype=torch.float)`` targets), ``nn.BCELoss`` on ``squeeze()``d outputs,
    ``torch.where(outputs > 0.5, 1, 0)``, Adadelta, ``StepLR``, the train/test lines and
    ``torch.save(model.state_dict(), ...)``. Differences: the backbone (tiny), the data (arrays
    instead of MNIST), ``random`` a ``random.Random`` of a fixed seed, the images ``.double()``
    where the example has ``.float()`` (so the run is float64), and the targets float64."""
    import argparse
    import contextlib
    import io
    import random as pyrandom
    from types import SimpleNamespace

    nn = torch.nn
    optim = torch.optim
    StepLR = torch.optim.lr_scheduler.StepLR
    Dataset = torch.utils.data.Dataset
    SiameseNetwork = siamese_classes(torch)
    random = pyrandom.Random(29000)

    class APP_MATCHER(Dataset):
        def __init__(self, root, train, download=False):
            super().__init__()

            # get MNIST dataset: datasets.MNIST(root, train=train, download=download)
            self.dataset = SimpleNamespace(
                data=torch.tensor(data["train_x" if train else "test_x"]),
                targets=torch.tensor(data["train_y" if train else "test_y"]),
            )

            # as `self.dataset.data`'s shape is (Nx28x28), where N is the number of
            # examples in MNIST dataset, a single dimension is added at the beginning,
            # unsqueeze(0)
            self.data = self.dataset.data.unsqueeze(1).clone()

            self.group_examples()

        def group_examples(self):
            """
            To ease the accessibility of data based on the class, we will use `group_examples` to group
            examples based on class.
            """

            # get the targets from MNIST dataset
            np_arr = np.array(self.dataset.targets.clone(), dtype=None, copy=None)

            # group examples based on class
            self.grouped_examples = {}
            for i in range(0, 10):
                self.grouped_examples[i] = np.where(np_arr == i)[0]

        def __len__(self):
            return self.data.shape[0]

        def __getitem__(self, index):
            # pick some random class for the first image
            selected_class = random.randint(0, 9)

            # pick a random index for the first image in the grouped indices based of the label
            # of the class
            random_index_1 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)

            # pick the index to get the first image
            index_1 = self.grouped_examples[selected_class][random_index_1]

            # get the first image
            image_1 = self.data[index_1].clone().double()

            # same class
            if index % 2 == 0:
                # pick a random index for the second image
                random_index_2 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)

                # ensure that the index of the second image isn't the same as the first image
                while random_index_2 == random_index_1:
                    random_index_2 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)

                # pick the index to get the second image
                index_2 = self.grouped_examples[selected_class][random_index_2]

                # get the second image
                image_2 = self.data[index_2].clone().double()

                # set the label for this example to be positive (1)
                target = torch.tensor(1, dtype=torch.double)

            # different class
            else:
                # pick a random class
                other_selected_class = random.randint(0, 9)

                # ensure that the class of the second image isn't the same as the first image
                while other_selected_class == selected_class:
                    other_selected_class = random.randint(0, 9)

                # pick a random index for the second image in the grouped indices based of the label
                # of the class
                random_index_2 = random.randint(0, self.grouped_examples[other_selected_class].shape[0] - 1)

                # pick the index to get the second image
                index_2 = self.grouped_examples[other_selected_class][random_index_2]

                # get the second image
                image_2 = self.data[index_2].clone().double()

                # set the label for this example to be negative (0)
                target = torch.tensor(0, dtype=torch.double)

            return image_1, image_2, target

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()

        # we aren't using `TripletLoss` as the MNIST dataset is simple, so `BCELoss` can do the trick.
        criterion = nn.BCELoss()

        for batch_idx, (images_1, images_2, targets) in enumerate(train_loader):
            images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = model(images_1, images_2).squeeze()
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(
                    "Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(  # noqa: UP032 - as the example
                        epoch,
                        batch_idx * len(images_1),
                        len(train_loader.dataset),
                        100.0 * batch_idx / len(train_loader),
                        loss.item(),
                    )
                )
                if args.dry_run:
                    break

    def test(model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0

        # we aren't using `TripletLoss` as the MNIST dataset is simple, so `BCELoss` can do the trick.
        criterion = nn.BCELoss()

        with torch.no_grad():
            for images_1, images_2, targets in test_loader:
                images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
                outputs = model(images_1, images_2).squeeze()
                test_loss += criterion(outputs, targets).sum().item()  # sum up batch loss
                pred = torch.where(outputs > 0.5, 1, 0)  # get the index of the max log-probability
                correct += pred.eq(targets.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)

        print(
            "\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(  # noqa: UP032
                test_loss, correct, len(test_loader.dataset), 100.0 * correct / len(test_loader.dataset)
            )
        )

    def main():
        # Training settings
        parser = argparse.ArgumentParser(description="PyTorch Siamese network Example")
        parser.add_argument("--batch-size", type=int, default=64, metavar="N")
        parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N")
        parser.add_argument("--epochs", type=int, default=14, metavar="N")
        parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
        parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
        parser.add_argument("--accel", action="store_true")
        parser.add_argument("--dry-run", action="store_true", default=False)
        parser.add_argument("--seed", type=int, default=1, metavar="S")
        parser.add_argument("--log-interval", type=int, default=10, metavar="N")
        parser.add_argument("--save-model", action="store_true", default=False)
        argv = ["--batch-size", "8", "--test-batch-size", "10", "--epochs", "2", "--log-interval", "1"]
        args = parser.parse_args([*argv, "--save-model", *(["--dry-run"] if dry_run else [])])

        if args.accel and not torch.accelerator.is_available():
            print("ERROR: accelerator is not available, try running on CPU")
            return
        if not args.accel and torch.accelerator.is_available():
            print("WARNING: accelerator is available, run with --accel to enable it")

        if args.accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")

        torch.manual_seed(args.seed)

        train_kwargs = {"batch_size": args.batch_size}
        test_kwargs = {"batch_size": args.test_batch_size}
        if device.type != "cpu":
            accel_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
            train_kwargs.update(accel_kwargs)
            test_kwargs.update(accel_kwargs)

        train_dataset = APP_MATCHER("../data", train=True, download=True)
        test_dataset = APP_MATCHER("../data", train=False)
        train_loader = torch.utils.data.DataLoader(train_dataset, **train_kwargs)
        test_loader = torch.utils.data.DataLoader(test_dataset, **test_kwargs)

        model = SiameseNetwork().double().to(device)
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
        optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

        scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
        for epoch in range(1, args.epochs + 1):
            train(args, model, device, train_loader, optimizer, epoch)
            test(model, device, test_loader)
            scheduler.step()

        if args.save_model:
            torch.save(model.state_dict(), save_path)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main()
    return out.getvalue()
