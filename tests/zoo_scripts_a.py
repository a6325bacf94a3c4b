"""Whole example scripts of the model zoo: the mnist, word_language_model and reinforcement_learning examples.

Each is written as the public PyTorch example writes it, against a framework module passed
in as ``torch``. Re-exported by :mod:`zoo_models` (import them from there: this module imports the models
from it); see its docstring."""

from __future__ import annotations

from typing import Any

import numpy as np
from zoo_models import build_mnist, build_rnn_lm, gpt_classes, init_weights, to_numpy

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
