"""Whole example scripts of the model zoo: the regression, mnist_forward_forward and siamese_network examples.

Each is written as the public PyTorch example writes it, against a framework module passed
in as ``torch``. Re-exported by :mod:`zoo_models` (import them from there: this module imports the models
from it); see its docstring."""

from __future__ import annotations

from typing import Any

import numpy as np
from zoo_models import init_weights, to_numpy
from zoo_scripts_c import imagenet_models

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
