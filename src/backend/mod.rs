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

use crate::error::{Error, Result};
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::philox::PhiloxStream;
use crate::ops::random::RandomDist;
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

    /// `out[i] = cond[i] ? a[i] : b[i]`.
    fn where_(&self, _cond: &Tensor, _a: &Tensor, _b: &Tensor, _out: &Tensor) -> Result<()> {
        unsupported(self, "where")
    }

    // ---- further primitive families add their methods below this line ----

    // random (see `crate::ops::philox` for the numbers every device must produce)
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
}

/// The error for a primitive a backend does not implement.
pub fn unsupported<T, B: Backend + ?Sized>(b: &B, op: &'static str) -> Result<T> {
    Err(Error::runtime(
        op,
        format!("not supported on the {} device", b.name()),
    ))
}

static CPU: cpu::CpuBackend = cpu::CpuBackend;

/// The backend that owns `device`.
pub fn backend(device: Device) -> &'static dyn Backend {
    match device {
        Device::Cpu => &CPU,
        Device::Gpu(_) => &NO_GPU,
    }
}

/// Stand-in until the WebGPU backend lands: every primitive is a clear error.
struct NoGpu;
static NO_GPU: NoGpu = NoGpu;

impl Backend for NoGpu {
    fn name(&self) -> String {
        "gpu (WebGPU is not available in this build)".into()
    }
}
