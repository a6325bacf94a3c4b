"""Whole example scripts of the model zoo: the time_sequence_prediction, vae, dcgan and fast_neural_style examples.

Each is written as the public PyTorch example writes it, against a framework module passed
in as ``torch``. Re-exported by :mod:`zoo_models` (import them from there: this module imports the models
from it); see its docstring."""

from __future__ import annotations

from typing import Any

import numpy as np
from zoo_models import build_dcgan, init_weights, to_numpy
from zoo_scripts_a import CartPole

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
