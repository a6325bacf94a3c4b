//! The device interface.
//!
//! Ops are defined once (shape/dtype rule, decomposition, later VJP) in
//! `crate::ops`; the primitives they bottom out in are methods of
//! [`Backend`]. A device implements this trait and registers itself in
//! [`backend`]; no op definition changes when a device is added.
//!
//! Contract shared by all kernels: inputs arrive already broadcast (expanded
//! layouts with the output's shape) and converted to the compute dtype; the
//! output tensor is allocated by the op layer (or is the declared in-place
//! target) and may be strided. Kernels never allocate user-visible tensors.

pub mod cpu;
pub mod meta;
pub mod optim;
#[cfg(feature = "gpu")]
pub mod wgpu;

use crate::error::{Error, Result};
use crate::kernel::philox::PhiloxStream;
use crate::kernel::{
    ArgOp, BinaryOp, CeCfg, Conv2dParams, CumOp, GeneralOp, IndexArgs, Pool2dParams, RandomDist,
    ReduceOp, UnaryOp,
};
use crate::tensor::{Device, Scalar, Tensor};

/// Kernels a device provides for the primitive ops.
///
/// Every method has a default that reports the op as unsupported on the
/// device, so a backend implements what it can and the registry's
/// (op, dtype, device) table says the rest.
pub trait Backend: Send + Sync {
    /// Human-readable name ("cpu", adapter name, ...).
    fn name(&self) -> String;

    /// `dst[i] = src[i] as dst.dtype` over equal shapes, any layouts.
    fn cast_copy(&self, _src: &Tensor, _dst: &Tensor) -> Result<()> {
        unsupported(self, "copy")
    }

    /// `dst[i] = value`.
    fn fill(&self, _dst: &Tensor, _value: Scalar) -> Result<()> {
        unsupported(self, "fill")
    }

    /// `out[i] = op(x[i])`; `x` has the compute dtype; `out` may alias `x` (in-place).
    fn unary(&self, op: UnaryOp, _x: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, op.name())
    }

    /// `out[i] = a[i] op b[i]`; `a`, `b` share the compute dtype and `out`'s shape.
    fn binary(&self, op: BinaryOp, _a: &Tensor, _b: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, op.name())
    }

    /// `out[i] = a[i] op s` (`s op a[i]` when `reflected`) with `s` carried as a value, not a
    /// tensor; `a` is in the compute dtype, `s` is rounded to it first. `Ok(false)`: not
    /// handled here (the caller makes `s` a 0-d tensor and calls [`Backend::binary`]).
    fn binary_scalar(
        &self,
        _op: BinaryOp,
        _a: &Tensor,
        _s: Scalar,
        _reflected: bool,
        _out: &Tensor,
    ) -> Result<bool> {
        Ok(false)
    }

    /// `out[i] = cond[i] ? a[i] : b[i]`.
    fn where_(&self, _cond: &Tensor, _a: &Tensor, _b: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, "where")
    }

    /// Fused gradient of a unary op: `out[i] = g[i] · op'(x[i])` with
    /// `y = op(x)` (`x`, `y`, `g`, `out` share a floating dtype and shape).
    /// Returns `false`, writing nothing, when the device has no fused kernel
    /// for `op`; the caller then composes the gradient from primitives.
    fn unary_grad(
        &self,
        _op: UnaryOp,
        _x: &Tensor,
        _y: &Tensor,
        _g: &Tensor,
        _out: &Tensor,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Fused softmax (log-softmax when `log`) gradient along `dim` into the
    /// contiguous `out`, from the forward output `y` and the output gradient
    /// `g` (same shape and floating dtype). `false` (nothing written) when
    /// the device has no fused kernel for this case.
    fn softmax_grad(
        &self,
        _y: &Tensor,
        _g: &Tensor,
        _dim: usize,
        _log: bool,
        _out: &Tensor,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Fused layer-norm (RMS-norm when `rms`) gradient, rows as in
    /// [`Backend::layer_norm`]: any of `dx` (the input's shape), `dw`, `db`
    /// (the weight's shape), all contiguous. `false` (nothing written) when
    /// the device has no fused kernel.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_grad(
        &self,
        _x: &Tensor,
        _g: &Tensor,
        _mean: &Tensor,
        _rstd: &Tensor,
        _weight: Option<&Tensor>,
        _rms: bool,
        _dx: Option<&Tensor>,
        _dw: Option<&Tensor>,
        _db: Option<&Tensor>,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Cross entropy (log-softmax + NLL) of contiguous `(rows, C)` logits
    /// against class indices, see [`crate::ops::loss`]: per-row `loss`,
    /// `lse` and target weight `wt` (contiguous `(rows,)`). Out-of-range
    /// targets are an index error and nothing is written.
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy(
        &self,
        _x: &Tensor,
        _target: &Tensor,
        _weight: Option<&Tensor>,
        _cfg: CeCfg,
        _shape: &[usize],
        _loss: &Tensor,
        _lse: &Tensor,
        _wt: &Tensor,
    ) -> Result<()> {
        unsupported(self, "cross_entropy")
    }

    /// Gradient of [`Backend::cross_entropy`] for the logits into the
    /// contiguous `out` `(rows, C)`, from the per-row output gradient `g`.
    #[allow(clippy::too_many_arguments)]
    fn cross_entropy_grad(
        &self,
        _x: &Tensor,
        _target: &Tensor,
        _weight: Option<&Tensor>,
        _lse: &Tensor,
        _g: &Tensor,
        _cfg: CeCfg,
        _out: &Tensor,
    ) -> Result<()> {
        unsupported(self, "cross_entropy")
    }

    // ---- further primitive families add their methods below this line ----

    // linalg and conv families
    /// Batched matrix product `out (+)= a @ b`: `a` is `[..batch, M, K]`, `b`
    /// `[..batch, K, N]`, `out` `[..batch, M, N]` (equal batch shapes, broadcast
    /// batches as stride-0 views). With `accumulate`, `out` holds values to add to.
    fn matmul(&self, _a: &Tensor, _b: &Tensor, _out: &Tensor, _accumulate: bool) -> Result<()> {
        unsupported(self, "matmul")
    }

    /// `out = init + a @ b` for 2-D operands, `init` a view of out's shape
    /// (a broadcast bias) of out's dtype. The same values as copying `init`
    /// into `out` and accumulating, which is what this default does; a
    /// backend may add `init` as each result is stored instead.
    fn matmul_init(&self, a: &Tensor, b: &Tensor, init: &Tensor, out: &Tensor) -> Result<()> {
        self.cast_copy(init, out)?;
        self.matmul(a, b, out, true)
    }

    /// 2-D convolution of `x` `(N, C, H, W)` with a contiguous `w` `(O, C/g, kH, kW)`,
    /// plus `bias` `(O,)`, into the contiguous `out` `(N, O, oH, oW)`.
    fn conv2d(
        &self,
        _x: &Tensor,
        _w: &Tensor,
        _bias: Option<&Tensor>,
        _p: &Conv2dParams,
        _out: &Tensor,
    ) -> Result<()> {
        unsupported(self, "conv2d")
    }

    /// Input gradient of [`Backend::conv2d`] (a transposed convolution) into
    /// the contiguous `out` `(N, C, H, W)`, from the contiguous output
    /// gradient `g` `(N, O, oH, oW)` and contiguous weight `w`.
    fn conv2d_input_grad(
        &self,
        _g: &Tensor,
        _w: &Tensor,
        _p: &Conv2dParams,
        _out: &Tensor,
    ) -> Result<()> {
        unsupported(self, "conv2d_backward")
    }

    /// Weight gradient of [`Backend::conv2d`] into the contiguous `out`
    /// `(O, C/g, kH, kW)`, from the contiguous output gradient `g` and the
    /// input `x` `(N, C, H, W)` (any strides).
    fn conv2d_weight_grad(
        &self,
        _g: &Tensor,
        _x: &Tensor,
        _p: &Conv2dParams,
        _out: &Tensor,
    ) -> Result<()> {
        unsupported(self, "conv2d_backward")
    }

    /// Window maxima of `x` `(N, C, H, W)` into `out`; `indices` (int64, same
    /// shape) receives the flat `h*W + w` position of each maximum.
    fn max_pool2d(
        &self,
        _x: &Tensor,
        _p: &Pool2dParams,
        _out: &Tensor,
        _indices: Option<&Tensor>,
    ) -> Result<()> {
        unsupported(self, "max_pool2d")
    }

    /// Window means of `x` `(N, C, H, W)` into `out`.
    fn avg_pool2d(
        &self,
        _x: &Tensor,
        _p: &Pool2dParams,
        _count_include_pad: bool,
        _divisor_override: Option<usize>,
        _out: &Tensor,
    ) -> Result<()> {
        unsupported(self, "avg_pool2d")
    }

    /// Adaptive window means of `x` `(N, C, H, W)` into `out` `(N, C, oH, oW)`.
    fn adaptive_avg_pool2d(&self, _x: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, "adaptive_avg_pool2d")
    }

    // reduce family
    /// Reduce `x` over the dims flagged in `mask` into `out` (contiguous, the
    /// kept dims in order; keepdim or not). `out`'s dtype follows the op rule.
    fn reduce(&self, op: ReduceOp, _x: &Tensor, _mask: &[bool], _out: &Tensor) -> Result<()> {
        unsupported(self, op.name())
    }
    /// First index of the max/min along `dim` into `indices` (int64), and the
    /// value into `values` when given (both contiguous, `dim` removed or kept as 1).
    fn arg_reduce(
        &self,
        _op: ArgOp,
        _x: &Tensor,
        _dim: usize,
        _values: Option<&Tensor>,
        _indices: &Tensor,
    ) -> Result<()> {
        unsupported(self, "argmax")
    }
    /// `softmax` / `log_softmax` of a floating `x` along `dim` into contiguous `out`.
    fn softmax(&self, _x: &Tensor, _dim: usize, _log: bool, _out: &Tensor) -> Result<()> {
        unsupported(self, "softmax")
    }
    /// Layer norm (RMS norm when `rms`) over rows of the contiguous `x`, whose
    /// length is `weight`/`bias`'s element count (contiguous, same dtype as
    /// `x`): `out = (x - μ)·r·w + b` with `r = 1/sqrt(var + eps)` (biased
    /// variance; RMS: `μ = 0`, `var = mean(x²)`). The per-row `μ` and `r`
    /// go to the contiguous `mean` and `rstd` (float32 for half inputs).
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(
        &self,
        _x: &Tensor,
        _weight: Option<&Tensor>,
        _bias: Option<&Tensor>,
        _eps: f64,
        _rms: bool,
        _out: &Tensor,
        _mean: &Tensor,
        _rstd: &Tensor,
    ) -> Result<()> {
        unsupported(self, "layer_norm")
    }
    /// Inclusive scan along `dim` into contiguous `out` (int64 for integer inputs).
    fn cumulative(&self, _op: CumOp, _x: &Tensor, _dim: usize, _out: &Tensor) -> Result<()> {
        unsupported(self, "cumsum")
    }

    // random (see `crate::kernel::philox` for the numbers every device must produce)
    /// Fill the contiguous `out` from `dist`, element `i` from stream `s`.
    fn random_fill(&self, _out: &Tensor, _dist: RandomDist, _s: PhiloxStream) -> Result<()> {
        unsupported(self, "random")
    }
    /// `out[i] = (u_i < p[i])` for contiguous `p` (floating) and `out` of equal shape.
    fn bernoulli_tensor(&self, _p: &Tensor, _out: &Tensor, _s: PhiloxStream) -> Result<()> {
        unsupported(self, "bernoulli")
    }
    /// `out[i] = keep_i ? x[i] / (1 - p) : 0`, keep with probability `1 - p`; contiguous.
    fn dropout(&self, _x: &Tensor, _out: &Tensor, _p: f64, _s: PhiloxStream) -> Result<()> {
        unsupported(self, "dropout")
    }
    /// A random permutation of `0..n` into the contiguous 1-D `out`.
    fn randperm(&self, _out: &Tensor, _s: PhiloxStream) -> Result<()> {
        unsupported(self, "randperm")
    }
    /// Category indices (int64 `[rows, k]`) drawn from contiguous `probs` `[rows, m]`.
    fn multinomial(
        &self,
        _probs: &Tensor,
        _out: &Tensor,
        _replacement: bool,
        _s: PhiloxStream,
    ) -> Result<()> {
        unsupported(self, "multinomial")
    }

    // index / join: every index kernel validates all indices before writing.
    /// `out[b.., r..] = src[..]` with `src`'s dims `args.dims` taken from the
    /// index tensors at position `b` (negative indices wrap) and the other dims
    /// `r` in order; `out` has shape `B ++ R` (B = the indices' common shape).
    fn index_gather(&self, _args: &IndexArgs, _src: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, "getitem")
    }
    /// The inverse of `index_gather`: `dst[..] = values[b.., r..]` (`+=` when `accumulate`).
    fn index_put(
        &self,
        _args: &IndexArgs,
        _dst: &Tensor,
        _values: &Tensor,
        _accumulate: bool,
    ) -> Result<()> {
        unsupported(self, "index_put_")
    }
    /// `out[p] = src[p with p[dim] = index[p]]` over `index`'s shape (no wrapping).
    fn gather(&self, _src: &Tensor, _dim: usize, _index: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, "gather")
    }
    /// `dst[p with p[dim] = index[p]] = src[p]` (`+=` when `accumulate`) over `index`'s shape.
    fn scatter(
        &self,
        op: &'static str,
        _dst: &Tensor,
        _dim: usize,
        _index: &Tensor,
        _src: &Tensor,
        _accumulate: bool,
    ) -> Result<()> {
        unsupported(self, op)
    }
    /// `dst[p with p[dim] = index[p]] = reduce(dst[..], src[p])` over `index`'s
    /// shape, in row-major order of `index`; `reduce` is `Sum`, `Prod`, `Amax`
    /// or `Amin` (the op layer turns `Mean` into a sum and a count).
    fn scatter_reduce(
        &self,
        op: &'static str,
        _dst: &Tensor,
        _dim: usize,
        _index: &Tensor,
        _src: &Tensor,
        _reduce: crate::kernel::ScatterReduction,
    ) -> Result<()> {
        unsupported(self, op)
    }
    /// The kernel of a general op (`crate::kernel::general`): contiguous
    /// inputs, contiguous outputs of the shapes and dtypes its plan gave.
    fn general(&self, op: &GeneralOp, _ins: &[&Tensor], _outs: &[&Tensor]) -> Result<()> {
        unsupported(self, op.name())
    }
    /// Number of non-zero elements.
    fn nonzero_count(&self, _x: &Tensor) -> Result<usize> {
        unsupported(self, "nonzero")
    }
    /// Coordinates of the non-zero elements (row-major) into a contiguous int64 `[n, ndim]` tensor.
    fn nonzero_fill(&self, _x: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, "nonzero")
    }
    /// Run a fused elementwise kernel: `ins` broadcast to `k.shape`, `outs`
    /// allocated with `k.shape` and the kernel's output dtypes. `Ok(false)`:
    /// this backend cannot run the program as one kernel (too many tensors to
    /// bind, a step with no kernel form), and the caller runs it one
    /// instruction at a time with the ordinary ops.
    fn fused(
        &self,
        _k: &crate::kernel::fused::FusedKernel,
        _ins: &[Tensor],
        _outs: &[Tensor],
    ) -> Result<bool> {
        unsupported(self, "fused")
    }
    /// Keep the lower (`j - i <= k`) or upper (`j - i >= k`) triangle of the last two dims.
    fn tri(&self, _x: &Tensor, _out: &Tensor, _k: i64, upper: bool) -> Result<()> {
        unsupported(self, if upper { "triu" } else { "tril" })
    }
}

/// The error for a primitive a backend does not implement.
pub fn unsupported<T, B: Backend + ?Sized>(b: &B, op: &'static str) -> Result<T> {
    Err(Error::runtime(
        op,
        format!("not supported on the {} device", b.name()),
    ))
}

static CPU: cpu::CpuBackend = cpu::CpuBackend;
static META: meta::MetaBackend = meta::MetaBackend;

/// The backend that owns `device`.
pub fn backend(device: Device) -> &'static dyn Backend {
    match device {
        Device::Cpu => &CPU,
        #[cfg(feature = "gpu")]
        Device::Gpu(_) => &GPU,
        #[cfg(not(feature = "gpu"))]
        Device::Gpu(_) => &NO_GPU,
        Device::Meta => &META,
    }
}

#[cfg(feature = "gpu")]
static GPU: wgpu::WgpuBackend = wgpu::WgpuBackend;

/// Stand-in in builds without the `gpu` feature: every primitive is a clear error.
#[cfg(not(feature = "gpu"))]
struct NoGpu;
#[cfg(not(feature = "gpu"))]
static NO_GPU: NoGpu = NoGpu;

#[cfg(not(feature = "gpu"))]
impl Backend for NoGpu {
    fn name(&self) -> String {
        "gpu (WebGPU is not available in this build)".into()
    }
}

#[cfg(not(feature = "gpu"))]
fn no_gpu<T>(op: &'static str) -> Result<T> {
    Err(Error::runtime(
        op,
        "the WebGPU device is not available in this build (built without the `gpu` feature)",
    ))
}

/// A new storage of `nbytes` logical bytes of `dtype` on a GPU device.
pub fn gpu_storage(
    op: &'static str,
    nbytes: usize,
    dtype: crate::tensor::DType,
    device: Device,
) -> Result<crate::tensor::Storage> {
    #[cfg(feature = "gpu")]
    return wgpu::new_storage(op, nbytes, dtype, device);
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (nbytes, dtype, device);
        no_gpu(op)
    }
}

/// Copy a tensor to `device` as a new contiguous tensor (no autograd): the
/// one path by which values cross between host and GPU.
pub fn transfer(t: &Tensor, device: Device) -> Result<Tensor> {
    match (t.device(), device) {
        (a, b) if a == b => Ok(t.clone()),
        #[cfg(feature = "gpu")]
        (Device::Cpu, Device::Gpu(_)) => wgpu::upload(t, device),
        #[cfg(feature = "gpu")]
        (Device::Gpu(_), Device::Cpu) => wgpu::download(t),
        (Device::Meta, _) | (_, Device::Meta) => Err(Error::runtime(
            "to",
            format!("cannot move a tensor from {} to {device}", t.device()),
        )),
        #[cfg(not(feature = "gpu"))]
        _ => no_gpu("to"),
        #[cfg(feature = "gpu")]
        _ => Err(Error::runtime(
            "to",
            format!("cannot move a tensor from {} to {device}", t.device()),
        )),
    }
}

/// Memory counters over every device that has been used: the running total
/// of bytes allocated (blocks handed out by the CPU allocator and buffers by
/// the GPU pool, reuse from their caches included) and the bytes in use now.
/// Differences of two readings measure what the work between them allocated.
pub fn memory_counters() -> (u64, u64) {
    let s = crate::tensor::storage::memory_stats();
    let cpu = (s.allocated_total as u64, s.in_use as u64);
    #[cfg(feature = "gpu")]
    if let Some(g) = wgpu::context::started() {
        let s = g.stats();
        return (cpu.0 + s.bytes_allocated_total, cpu.1 + s.bytes_in_use);
    }
    cpu
}
