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


# The whole scripts live in their own modules (they use the models above); re-exported here.
from zoo_scripts_a import *  # noqa: E402, F403
from zoo_scripts_b import *  # noqa: E402, F403
from zoo_scripts_c import *  # noqa: E402, F403
from zoo_scripts_d import *  # noqa: E402, F403
