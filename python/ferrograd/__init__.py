# ruff: noqa: F401, A001, A004
"""ferrograd: a tensor engine with a Rust core.

Every function here is bound to one entry of the Rust op registry
(``ferrograd.registry()`` lists them); this package only re-exports and
arranges names so they sit where PyTorch users expect them. The exception is
``_tensor_extras``: PyTorch functions composed in Python of registry ops
(``lerp``, ``addmm``, ``erfinv``, ``searchsorted``, ...), also installed as
``Tensor`` methods; ``_surface_more`` adds more of them (``quantile``, ``norm``,
``unique``, ``rot90``, ...).
"""

from . import _core
from ._core import (  # random sampling, DLPack
    Generator,
    Tensor,
    arange,
    are_deterministic_algorithms_enabled,
    bernoulli,
    bfloat16,
    cat,
    clamp,
    conv2d,
    cpu_level,
    default_generator,
    device,
    dtype,
    einsum,
    empty,
    empty_cache,
    empty_like,
    eye,
    float16,
    float32,
    float64,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    get_num_threads,
    get_rng_state,
    initial_seed,
    int8,
    int16,
    int32,
    int64,
    linspace,
    manual_seed,
    memory_stats,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    registry,
    reset_peak_memory_stats,
    seed,
    set_cache_limit,
    set_cpu_level,
    set_num_threads,
    set_rng_state,
    stack,
    supports,
    synchronize,
    tensor,
    uint8,
    use_deterministic_algorithms,
    where,
    zeros,
    zeros_like,
)
from ._core import bool as bool  # noqa: A004 - the dtype, as torch.bool

__version__ = "0.1.0"

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16

# Functional forms of Tensor methods: the same registry entry, no wrapper.
_T = Tensor
neg = _T.neg
negative = _T.neg
abs = _T.abs  # noqa: A001
sign = _T.sign
square = _T.square
reciprocal = _T.reciprocal
floor = _T.floor
ceil = _T.ceil
round = _T.round  # noqa: A001
trunc = _T.trunc
exp = _T.exp
log = _T.log
log2 = _T.log2
log1p = _T.log1p
expm1 = _T.expm1
sqrt = _T.sqrt
rsqrt = _T.rsqrt
sin = _T.sin
cos = _T.cos
tan = _T.tan
tanh = _T.tanh
sigmoid = _T.sigmoid
relu = _T.relu
silu = _T.silu
erf = _T.erf
isnan = _T.isnan
isinf = _T.isinf
isfinite = _T.isfinite
logical_not = _T.logical_not
bitwise_not = _T.bitwise_not
add = _T.add
sub = _T.sub
subtract = _T.sub
mul = _T.mul
multiply = _T.mul
div = _T.div
divide = _T.div
true_divide = _T.div
floor_divide = _T.floor_divide
remainder = _T.remainder
pow = _T.pow  # noqa: A001
maximum = _T.maximum
minimum = _T.minimum
atan2 = _T.atan2
eq = _T.eq
ne = _T.ne
lt = _T.lt
le = _T.le
gt = _T.gt
ge = _T.ge
logical_and = _T.logical_and
logical_or = _T.logical_or
logical_xor = _T.logical_xor
bitwise_and = _T.bitwise_and
bitwise_or = _T.bitwise_or
bitwise_xor = _T.bitwise_xor
masked_fill = _T.masked_fill
clip = _T.clip
reshape = _T.reshape
permute = _T.permute
transpose = _T.transpose
swapaxes = _T.swapaxes
t = _T.t
squeeze = _T.squeeze
unsqueeze = _T.unsqueeze
flatten = _T.flatten
ravel = _T.ravel
narrow = _T.narrow
select = _T.select
flip = _T.flip
broadcast_to = _T.broadcast_to
clone = _T.clone
as_strided = _T.as_strided
matmul = _T.matmul
mm = _T.mm
bmm = _T.bmm
mv = _T.mv
dot = _T.dot
outer = _T.outer
sum = _T.sum  # noqa: A001
mean = _T.mean
prod = _T.prod
max = _T.max  # noqa: A001
min = _T.min  # noqa: A001
amax = _T.amax
amin = _T.amin
argmax = _T.argmax
argmin = _T.argmin
var = _T.var
std = _T.std
logsumexp = _T.logsumexp
all = _T.all  # noqa: A001
any = _T.any  # noqa: A001
softmax = _T.softmax
log_softmax = _T.log_softmax
cumsum = _T.cumsum
cumprod = _T.cumprod
# sorting (one op definition: src/kernel/sort.rs)
sort = _T.sort
argsort = _T.argsort
msort = _T.msort
topk = _T.topk
kthvalue = _T.kthvalue
median = _T.median
nanmedian = _T.nanmedian
# indexing and joining
concat = cat
concatenate = cat
nonzero = _T.nonzero
masked_select = _T.masked_select
index_select = _T.index_select
gather = _T.gather
take_along_dim = _T.take_along_dim
scatter = _T.scatter
scatter_add = _T.scatter_add
scatter_reduce = _T.scatter_reduce
index_put = _T.index_put
split = _T.split
chunk = _T.chunk
unbind = _T.unbind
diagonal = _T.diagonal
diag = _T.diag
tril = _T.tril
triu = _T.triu
roll = _T.roll


def _dtype_from_name(name: str) -> dtype:
    """Look a dtype up by name (used when unpickling dtypes)."""
    return getattr(_core, name)


from . import (  # noqa: E402
    _capture,
    accelerator,
    amp,
    autograd,
    backends,
    cpu,
    cuda,
    data,
    distributed,
    distributions,
    func,
    gpu,
    jit,
    linalg,
    nn,
    onnx,
    optim,
    profiler,
    special,
    tensorboard,
    testing,
    utils,
    viz,
)
from ._compile import compile, set_graph_passes  # noqa: E402, A004
from ._core import TraceError, get_default_dtype  # noqa: E402
from ._dtype_info import finfo, iinfo  # noqa: E402
from ._grad_hooks import install as _install_grad_hooks  # noqa: E402
from ._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from ._pickling import install as _install_pickling  # noqa: E402
from ._precision import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402
from ._shared_tensors import install as _install_sharing  # noqa: E402
from ._surface_index import *  # noqa: E402, F403 - promotion queries, index grids, arrangements
from ._surface_index import install as _install_surface_index  # noqa: E402
from ._surface_math import *  # noqa: E402, F403 - math functions and Tensor methods
from ._surface_math import install as _install_surface_math  # noqa: E402
from ._surface_misc import *  # noqa: E402, F403 - window functions, print options, default device
from ._surface_misc import install as _install_surface_misc  # noqa: E402
from ._surface_more import *  # noqa: E402, F403 - more functions composed of registry ops
from ._surface_more import install as _install_surface_more  # noqa: E402
from ._surface_torch_ns import *  # noqa: E402, F403 - torch.* constants, legacy types, aliases
from ._surface_torch_ns import install as _install_surface_torch_ns  # noqa: E402
from ._tensor_extras import *  # noqa: E402, F403 - functions composed of registry ops
from ._tensor_extras import install as _install_tensor_extras  # noqa: E402
from ._vmap import vmap  # noqa: E402 - torch.vmap (a per-slice loop; see ferrograd.func)
from .control import cond, while_loop  # noqa: E402
from .graph import (  # noqa: E402
    Graph,
    GraphFileError,
    Operation,
    Session,
    Variable,
    global_variables_initializer,
    gradients,
    load_graph,
    placeholder,
    variables_initializer,
)
from .serialization import CheckpointError, load, save  # noqa: E402

autocast = amp.autocast  # torch.autocast
is_autocast_enabled = amp.is_autocast_enabled  # torch.is_autocast_enabled
get_autocast_dtype = amp.get_autocast_dtype  # torch.get_autocast_dtype

# torch.* names of linalg functions.
det = linalg.det
inverse = linalg.inv
slogdet = linalg.slogdet
logdet = linalg.logdet
cdist = linalg.cdist
matrix_power = linalg.matrix_power


def __getattr__(name: str) -> object:
    # ``ferrograd.multiprocessing`` is imported on first use (it imports Python's
    # ``multiprocessing``), as ``torch.multiprocessing`` is reachable from ``torch``.
    if name == "multiprocessing":
        import importlib

        return importlib.import_module(".multiprocessing", __name__)
    raise AttributeError(f"module 'ferrograd' has no attribute {name!r}")


def set_default_dtype(d: dtype) -> None:
    """Make ``d`` (float32, float64, float16 or bfloat16) the default floating dtype, as
    ``torch.set_default_dtype``: float tensors made without a dtype (``zeros``, ``randn``,
    ``tensor([1.5])``, module parameters), Python floats mixed with integer tensors and
    integer inputs of float functions take it. Process-wide; ``fg.compile`` keys its
    graphs on it. Other dtypes raise ``TypeError``."""
    _core._set_default_dtype(d)


_install_pickling()
_install_sharing()
_install_tensor_extras()
_install_surface_more()
_install_surface_index()
_install_surface_misc()
_install_surface_math()
_install_surface_torch_ns()
_install_grad_hooks()
_capture.install()

__all__ = [n for n in dir() if not n.startswith("_")]
