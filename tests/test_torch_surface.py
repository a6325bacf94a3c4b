"""The PyTorch-shaped surface that needs no kernel of its own.

``Tensor.data`` (read and rebind), ``Module.to`` and friends moving
parameters in place (tied weights and optimizers survive), the ``new_*``
factories, ``is_cuda`` / ``type()`` / ``__format__``, the module paths
PyTorch scripts import (``ferrograd.utils.data``, ``ferrograd.cuda``,
``ferrograd.backends``, ``ferrograd.autograd.Variable``), custom autograd
functions and ``utils.checkpoint``.
"""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.autograd import Function, gradcheck, gradgradcheck

GPU = fg.gpu.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason=f"no WebGPU adapter: {fg.gpu.unavailable_reason()}")


def arr(t: fg.Tensor) -> np.ndarray:
    return np.array(t.detach().cpu().double().numpy(), copy=True)


# ------------------------------------------------------------ Tensor.data


@pytest.mark.covers("torch.Tensor.data")
def test_data_shares_storage_and_records_nothing():
    p = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d = p.data
    assert d is not p
    assert d._shares_storage(p)
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert (d * 3).grad_fn is None
    # In place through .data: p changes, nothing is recorded, p stays a leaf.
    p.data.add_(1.0)
    p.data.mul_(2.0)
    assert arr(p).tolist() == [4.0, 6.0, 8.0]
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    # The same write on p itself is refused (an in-place op on a leaf that requires grad).
    with pytest.raises(RuntimeError):
        p.mul_(2.0)
    p.data.copy_(fg.tensor([0.5, 0.5, 0.5]))
    p.data.normal_()
    p.data.zero_()
    assert arr(p).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.covers("torch.Tensor.data")
def test_data_assignment_keeps_identity_grad_and_requires_grad():
    p = nn.Parameter(fg.ones(3))
    (p * 2).sum().backward()
    assert arr(p.grad).tolist() == [2.0, 2.0, 2.0]
    pid = id(p)
    u = fg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=fg.float64)
    p.data = u  # another shape and dtype, as PyTorch allows
    assert id(p) == pid and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf
    assert p.shape == (2, 2) and p.dtype == fg.float64
    assert p._shares_storage(u)
    assert arr(p.grad).tolist() == [2.0, 2.0, 2.0]  # .grad is kept as it was
    u.add_(1.0)  # p views u's storage
    assert arr(p).tolist() == [[2.0, 3.0], [4.0, 5.0]]
    p.grad = None
    (p * p).sum().backward()
    assert arr(p.grad).tolist() == [[4.0, 6.0], [8.0, 10.0]]


@pytest.mark.covers("torch.Tensor.data")
def test_data_assignment_leaves_recorded_graph_intact():
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (p * p).sum()  # saves p's values
    p.data = fg.tensor([10.0, 20.0])
    y.backward()
    assert arr(p.grad).tolist() == [2.0, 4.0]  # from the values y was computed with
    assert arr(p).tolist() == [10.0, 20.0]


def test_write_through_data_to_saved_tensor_is_caught():
    # The version counter belongs to the storage, which .data shares: unlike
    # PyTorch (which then silently uses the new values), backward refuses.
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (p * p).sum()
    p.data.mul_(2.0)
    with pytest.raises(RuntimeError):
        y.backward()


@pytest.mark.covers("torch.Tensor.data")
def test_data_assignment_errors():
    p = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="must be a Tensor"):
        p.data = [1.0, 2.0]
    with pytest.raises(TypeError, match="floating-point"):
        p.data = fg.tensor([1, 2])
    v = p[:1]
    with pytest.raises(RuntimeError, match="view"):
        v.data = fg.zeros(1)
    with pytest.raises(AttributeError):
        del p.data
    q = fg.tensor([1, 2])  # no autograd: any dtype
    q.data = fg.tensor([True])
    assert q.dtype == fg.bool


def test_data_assignment_inside_compile_is_refused():
    w = fg.ones(2)

    @fg.compile
    def f(x):
        w.data = x
        return x

    with pytest.raises(fg.TraceError, match="Tensor.data"):
        f(fg.zeros(2))


def test_compiled_function_sees_rebound_data():
    lin = nn.Linear(2, 1, bias=False)
    lin.weight.data = fg.tensor([[1.0, 1.0]])
    f = fg.compile(lin)
    x = fg.tensor([[1.0, 2.0]])
    assert arr(f(x)).tolist() == [[3.0]]
    lin.weight.data = fg.tensor([[2.0, 0.0]])
    assert arr(f(x)).tolist() == [[2.0]]
    lin.double()
    out = f(x.double())
    assert out.dtype == fg.float64 and arr(out).tolist() == [[2.0]]
    # An unrelated rebind does not invalidate the graph.
    traces = f.stats.traces
    other = fg.zeros(3)
    other.data = fg.ones(3)
    f(x.double())
    assert f.stats.traces == traces


# ------------------------------------------------ Module.to keeps identity


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(5, 4)
        self.lm_head = nn.Linear(4, 5, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.norm = nn.BatchNorm1d(4)

    def forward(self, idx):
        return self.lm_head(self.norm(self.wte(idx)))


def _check_moved(model, params_before, dtype, device_type):
    params = list(model.parameters())
    assert len(params) == len(params_before)
    assert all(a is b for a, b in zip(params, params_before, strict=True))
    assert model.lm_head.weight is model.wte.weight
    for p in params:
        assert p.dtype == dtype and p.device.type == device_type and p.requires_grad
        if p.grad is not None:
            assert p.grad.dtype == dtype and p.grad.device.type == device_type
    assert model.norm.running_mean.dtype == dtype
    assert model.norm.num_batches_tracked.dtype == fg.int64


def _train_step(model, opt, device="cpu"):
    idx = fg.tensor([0, 1, 2, 3], device=device)
    before = arr(model.wte.weight)
    opt.zero_grad()
    model(idx).float().sum().backward()
    opt.step()
    assert not np.array_equal(arr(model.wte.weight), before)


@pytest.mark.parametrize(
    "convert, dtype",
    [
        (lambda m: m.to(fg.float64), fg.float64),
        (lambda m: m.double(), fg.float64),
        (lambda m: m.half(), fg.float16),
        (lambda m: m.bfloat16(), fg.bfloat16),
        (lambda m: m.double().float(), fg.float32),
        (lambda m: m.cpu(), fg.float32),
        (lambda m: m.to("cpu", fg.float64), fg.float64),
    ],
    ids=["to-f64", "double", "half", "bfloat16", "float", "cpu", "to-cpu-f64"],
)
def test_module_conversion_keeps_parameters_and_ties(convert, dtype):
    fg.manual_seed(0)
    model = TinyLM()
    params = list(model.parameters())
    assert len(params) == 3  # tied weight counted once
    opt = fg.optim.SGD(model.parameters(), lr=0.5)
    model(fg.tensor([0, 1])).sum().backward()  # every parameter has a grad
    assert convert(model) is model
    _check_moved(model, params, dtype, "cpu")
    if dtype in (fg.float32, fg.float64):
        _train_step(model, opt)  # the optimizer built before the move trains the model


def test_module_to_moves_grad_values():
    lin = nn.Linear(2, 2)
    lin.weight.grad = fg.ones(2, 2)
    lin.double()
    assert lin.weight.grad.dtype == fg.float64
    assert arr(lin.weight.grad).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_module_to_rejects_gpu_float64_before_moving_anything():
    lin = nn.Linear(2, 2)
    w = lin.weight
    with pytest.raises(TypeError, match="float64"):
        lin.to("gpu", fg.float64)
    assert lin.weight is w and w.device.type == "cpu" and w.dtype == fg.float32


@needs_gpu
def test_module_to_gpu_and_back_keeps_parameters_and_ties():
    fg.manual_seed(0)
    model = TinyLM()
    params = list(model.parameters())
    opt = fg.optim.Adam(model.parameters(), lr=0.1)
    model(fg.tensor([0, 1])).sum().backward()
    model.to("gpu")
    _check_moved(model, params, fg.float32, "gpu")
    _train_step(model, opt, device="gpu")
    model.cpu()
    _check_moved(model, params, fg.float32, "cpu")
    model.gpu().half()
    _check_moved(model, params, fg.float16, "gpu")


# ---------------------------------------------------------- new_* family


def test_new_factories_default_to_own_dtype_and_device():
    x = fg.ones(2, dtype=fg.float64)
    for t, fill in [
        (x.new_zeros(2, 3), 0.0),
        (x.new_zeros((2, 3)), 0.0),
        (x.new_ones([2, 3]), 1.0),
        (x.new_full((2, 3), 7), 7.0),
        (x.new_full([2, 3], 2.5), 2.5),
    ]:
        assert t.shape == (2, 3) and t.dtype == fg.float64 and t.device == x.device
        assert not t.requires_grad
        assert arr(t).tolist() == [[fill] * 3] * 2
    e = x.new_empty(4)
    assert e.shape == (4,) and e.dtype == fg.float64
    assert x.new_zeros(()).shape == ()
    i = x.new_zeros(3, dtype=fg.int32)
    assert i.dtype == fg.int32
    r = x.new_ones(2, requires_grad=True)
    assert r.requires_grad and r.is_leaf
    with pytest.raises(ValueError, match="new_zeros: negative dimension"):
        x.new_zeros(2, -1)
    with pytest.raises(TypeError, match="new_full: fill_value"):
        x.new_full((2,), "a")


def test_new_tensor_copies_with_own_dtype():
    x = fg.ones(2, dtype=fg.float16)
    t = x.new_tensor([1, 2, 3])
    assert t.dtype == fg.float16 and arr(t).tolist() == [1.0, 2.0, 3.0]
    src = fg.tensor([1.0, 2.0], requires_grad=True)
    c = x.new_tensor(src, dtype=fg.float32)
    assert not c._shares_storage(src) and not c.requires_grad and c.grad_fn is None
    assert x.new_tensor(np.array([[1.0, 2.0]])).shape == (1, 2)
    assert x.new_tensor(3.0, requires_grad=True).requires_grad


@needs_gpu
def test_new_factories_on_gpu():
    x = fg.ones(2, device="gpu")
    assert x.new_zeros(3).device.type == "gpu"
    assert x.new_tensor([1.0, 2.0]).device.type == "gpu"
    assert x.new_ones(2, device="cpu").device.type == "cpu"
    assert x.type() == "ferrograd.gpu.FloatTensor"
    assert x.type("ferrograd.DoubleTensor").device.type == "cpu"


# ------------------------------------------------- device / type / format


def test_device_flags_and_objects():
    t = fg.ones(2)
    assert t.is_cuda is False and t.is_xpu is False and t.is_cpu is True
    assert t.device.type == "cpu" and t.device.index is None
    d = fg.device("cpu")
    assert d.type == "cpu" and d.index is None and d == t.device
    g = fg.device("gpu")
    assert g.type == "gpu" and g.index == 0
    assert fg.device("gpu:1").index == 1
    # "cuda", named explicitly, is the GPU device (WebGPU stands in for it).
    assert fg.device("cuda") == fg.device("gpu") and fg.device("cuda:1").index == 1
    with pytest.raises(ValueError, match="unknown device"):
        fg.device("tpu")


@pytest.mark.parametrize(
    "dtype, name",
    [
        (fg.float32, "FloatTensor"),
        (fg.float64, "DoubleTensor"),
        (fg.float16, "HalfTensor"),
        (fg.bfloat16, "BFloat16Tensor"),
        (fg.int32, "IntTensor"),
        (fg.int64, "LongTensor"),
        (fg.bool, "BoolTensor"),
    ],
)
def test_type_names(dtype, name):
    t = fg.zeros(2, dtype=dtype)
    assert t.type() == "ferrograd." + name
    back = fg.zeros(2).type("torch." + name)
    assert back.dtype == dtype
    assert fg.zeros(2).type(f"ferrograd.{name}").dtype == dtype


def test_type_conversion():
    t = fg.tensor([1.5, 2.5])
    assert t.type(fg.float32) is t
    d = t.type(fg.float64)
    assert d.dtype == fg.float64 and arr(d).tolist() == [1.5, 2.5]
    assert t.type(fg.int64).tolist() == [1, 2]
    with pytest.raises(ValueError, match="invalid type"):
        t.type("ferrograd.ComplexTensor")
    with pytest.raises(ValueError, match="CUDA"):
        t.type("torch.cuda.FloatTensor")


def test_format():
    x = fg.tensor(1.5)
    assert format(x, "+.2f") == "+1.50"
    assert f"{x:.3e}" == "1.500e+00"
    assert f"{fg.tensor(7):03d}" == "007"
    assert f"{fg.tensor(True)}" == str(fg.tensor(True))
    v = fg.tensor([1.0, 2.0])
    assert format(v, "") == str(v) == f"{v}"
    with pytest.raises(TypeError, match="0-d"):
        format(v, ".2f")
    with pytest.raises(TypeError, match="0-d"):
        format(fg.tensor([1.0]), ".2f")  # one element but one dimension, as PyTorch


# ------------------------------------------------------------ module paths


def test_utils_data_is_fg_data():
    import ferrograd.utils.data as ud
    from ferrograd.utils.data import DataLoader, Dataset, Subset, TensorDataset, random_split

    assert DataLoader is fg.data.DataLoader and Dataset is fg.data.Dataset
    assert TensorDataset is fg.data.TensorDataset and Subset is fg.data.Subset
    assert random_split is fg.data.random_split and ud.ConcatDataset is fg.data.ConcatDataset
    ds = TensorDataset(fg.arange(6).float(), fg.arange(6))
    (xb, yb), *_ = DataLoader(ds, batch_size=4)
    assert xb.shape == (4,) and yb.tolist() == [0, 1, 2, 3]


def test_cuda_shim():
    import ferrograd.cuda

    assert ferrograd.cuda.is_available() is False
    assert fg.cuda.device_count() == 0
    assert fg.cuda.is_initialized() is False
    fg.manual_seed(3)
    state = fg.get_rng_state()
    fg.cuda.manual_seed(123)
    fg.cuda.manual_seed_all(123)
    assert np.array_equal(np.asarray(fg.get_rng_state()), np.asarray(state))  # seeds nothing
    with pytest.raises((TypeError, ValueError)):
        fg.cuda.manual_seed("x")
    fg.cuda.synchronize()
    fg.cuda.empty_cache()
    device = fg.device("cuda" if fg.cuda.is_available() else "cpu")
    assert device.type == "cpu"


def test_backends_flags():
    import ferrograd.backends.cudnn

    fg.backends.cudnn.benchmark = True
    fg.backends.cudnn.deterministic = True
    fg.backends.cuda.matmul.allow_tf32 = True
    fg.backends.cudnn.allow_tf32 = True
    assert ferrograd.backends.cudnn.benchmark is True
    assert fg.backends.cudnn.enabled is True
    assert fg.backends.cudnn.is_available() is False
    assert fg.backends.mps.is_available() is False and fg.backends.mps.is_built() is False
    assert fg.backends.cuda.is_built() is False
    fg.backends.cudnn.benchmark = False
    fg.backends.cudnn.deterministic = False


@pytest.mark.covers("torch.autograd.Variable")
def test_autograd_variable():
    from ferrograd.autograd import Variable

    t = fg.tensor([1.0, 2.0])
    v = Variable(t, requires_grad=True)
    assert isinstance(v, fg.Tensor) and isinstance(v, Variable) and isinstance(t, Variable)
    assert v.requires_grad and v.is_leaf and v._shares_storage(t) and not t.requires_grad
    (v * v).sum().backward()
    assert arr(v.grad).tolist() == [2.0, 4.0]
    w = Variable([1, 2])
    assert w.dtype == fg.int64 and not w.requires_grad
    with pytest.warns(UserWarning, match="volatile"):
        Variable(t, volatile=True)
    assert fg.Variable is not Variable
    assert fg.Variable is fg.graph.Variable


# ------------------------------------------------- custom autograd functions


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ScaleBy(Function):
    """A non-tensor argument, ctx attributes and needs_input_grad."""

    @staticmethod
    def forward(ctx, x, k, w):
        ctx.k = k
        ctx.seen = ctx.needs_input_grad
        ctx.save_for_backward(x, None, w)
        return x * w * k

    @staticmethod
    def backward(ctx, g):
        x, none, w = ctx.saved_tensors
        assert none is None
        gx = g * w * ctx.k if ctx.needs_input_grad[0] else None
        gw = g * x * ctx.k if ctx.needs_input_grad[2] else None
        return gx, None, gw


@pytest.mark.covers("torch.autograd.Function")
def test_function_forward_backward_and_gradcheck():
    x = fg.tensor([0.1, -0.5, 1.0], dtype=fg.float64, requires_grad=True)
    y = Exp.apply(x)
    assert y.grad_fn is not None and y.grad_fn.name() == "ExpBackward"
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad), np.exp([0.1, -0.5, 1.0]))
    assert gradcheck(Exp.apply, (x,))
    assert gradgradcheck(Exp.apply, (x,))  # backward's ops are differentiable


@pytest.mark.covers("torch.autograd.Function")
def test_function_non_tensor_args_and_needs_input_grad():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    w = fg.tensor([3.0, 4.0], dtype=fg.float64)
    out = ScaleBy.apply(x, 2.0, w)
    out.sum().backward()
    assert arr(x.grad).tolist() == [6.0, 8.0] and w.grad is None
    w.requires_grad_()
    assert gradcheck(lambda a, b: ScaleBy.apply(a, 2.0, b), (x, w))


def test_function_without_grad_records_nothing():
    x = fg.tensor([1.0])
    assert Exp.apply(x).grad_fn is None
    with fg.no_grad():
        assert Exp.apply(fg.tensor([1.0], requires_grad=True)).grad_fn is None


class SortLike(Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(0, keepdim=True)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x)
        return x * 2, idx

    @staticmethod
    def backward(ctx, g, g_idx):
        assert g_idx is not None  # materialised zeros
        assert float(g_idx.abs().sum()) == 0.0
        return g * 2


@pytest.mark.covers("torch.autograd.Function")
def test_function_mark_non_differentiable():
    x = fg.tensor([1.0, 3.0, 2.0], requires_grad=True)
    y, idx = SortLike.apply(x)
    assert y.requires_grad and not idx.requires_grad and idx.tolist() == [1]
    y.sum().backward()
    assert arr(x.grad).tolist() == [2.0, 2.0, 2.0]


class AddOneInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1.0)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3  # deliberately not 1: shows this rule ran


@pytest.mark.covers("torch.autograd.Function")
def test_function_mark_dirty():
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    out = AddOneInPlace.apply(b)
    assert out is b and arr(b).tolist() == [2.0, 3.0]
    assert b.grad_fn.name() == "AddOneInPlaceBackward"
    b.sum().backward()
    assert arr(a.grad).tolist() == [3.0, 3.0]
    leaf = fg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        AddOneInPlace.apply(leaf)


class Bad(Function):
    @staticmethod
    def forward(ctx, x, mode):
        ctx.mode = mode
        return x * 1

    @staticmethod
    def backward(ctx, g):
        if ctx.mode == "count":
            return g, None, None, g
        if ctx.mode == "shape":
            return fg.ones(5), None
        raise KeyError("from backward")


def test_function_backward_errors():
    x = fg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, "count").sum().backward()
    with pytest.raises(ValueError, match=r"shape \[5\]"):
        Bad.apply(x, "shape").sum().backward()
    with pytest.raises(KeyError, match="from backward"):
        Bad.apply(x, "raise").sum().backward()


def test_function_saved_tensor_modified_in_place_is_caught():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    with fg.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError):
        y.sum().backward()


class Setup(Function):
    """The PyTorch 2 split: forward without ctx, plus setup_context."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@pytest.mark.covers("torch.autograd.Function")
def test_function_setup_context_style():
    x = fg.tensor([3.0], dtype=fg.float64, requires_grad=True)
    assert gradcheck(Setup.apply, (x,))
    with pytest.raises(RuntimeError, match="apply"):
        Setup()


# ---------------------------------------------------------------- checkpoint


def test_checkpoint_recomputes_and_matches_plain_gradients():
    from ferrograd.utils.checkpoint import checkpoint

    fg.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 4))
    calls = []

    def fn(h):
        calls.append(1)
        return block(h)

    x = fg.randn(3, 4)
    grads = []
    for use_ckpt in (False, True):
        for p in block.parameters():
            p.grad = None
        xi = x.detach().requires_grad_()
        fg.manual_seed(7)
        out = checkpoint(fn, xi, use_reentrant=False) if use_ckpt else fn(xi)
        assert out.requires_grad
        (out * out).sum().backward()
        grads.append([arr(xi.grad)] + [arr(p.grad) for p in block.parameters()])
    assert len(calls) == 3  # plain once; checkpointed: forward and the recomputation
    for a, b in zip(grads[0], grads[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_checkpoint_passes_through_without_grad():
    from ferrograd.utils.checkpoint import checkpoint, checkpoint_sequential

    lin = nn.Linear(2, 2)
    x = fg.ones(1, 2)
    out = checkpoint(lin, x)  # no argument requires grad: runs as is, parameters still get grads
    out.sum().backward()
    assert lin.weight.grad is not None
    with fg.no_grad():
        assert checkpoint(lin, x.requires_grad_()).grad_fn is None
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2), nn.Tanh())
    xg = fg.randn(2, 2).requires_grad_()
    np.testing.assert_allclose(arr(checkpoint_sequential(seq, 2, xg)), arr(seq(xg)), rtol=1e-6)


def test_cuda_names_the_gpu_device_when_asked_for():
    """``.cuda()``, ``.to("cuda")`` and ``Module.cuda()`` move to the WebGPU device,
    and ``is_cuda`` says so; ``cuda.is_available()`` stays False, so scripts that
    probe keep to the CPU."""
    if not fg.gpu.is_available():
        pytest.skip(f"no GPU adapter: {fg.gpu.unavailable_reason()}")
    t = fg.arange(4.0)
    for moved in (t.cuda(), t.to("cuda"), t.to(fg.device("cuda"))):
        assert moved.device.type == "gpu" and moved.is_cuda and not t.is_cuda
        np.testing.assert_array_equal(moved.cpu().numpy(), t.numpy())
    lin = fg.nn.Linear(2, 3)
    w = lin.weight
    assert lin.cuda() is lin and lin.weight is w and lin.weight.is_cuda
    assert fg.cuda.is_available() is False


def test_flip_of_a_zero_dim_tensor_is_itself():
    t = fg.tensor(3.0, requires_grad=True)
    for dims in ((0,), (-1,), ()):
        out = t.flip(dims)
        assert out.shape == () and out.item() == 3.0
    with pytest.raises(IndexError, match="flip"):
        t.flip(1)
    t.flip(0).backward()
    assert t.grad.item() == 1.0
