"""Whole example scripts of the model zoo: the super_resolution, mnist_rnn and imagenet examples.

Each is written as the public PyTorch example writes it, against a framework module passed
in as ``torch``. Re-exported by :mod:`zoo_models` (import them from there: this module imports the models
from it); see its docstring."""

from __future__ import annotations

from typing import Any

import numpy as np
from zoo_models import init_weights, to_numpy
from zoo_scripts_a import _Clock
from zoo_scripts_b import to_tensor

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
