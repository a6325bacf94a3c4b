//! The CPU backend: SIMD (runtime-dispatched) and multithreaded (rayon) kernels.

pub mod elementwise;
pub mod math;
pub mod simd;
pub mod strided;
pub mod vmath;

use crate::backend::Backend;
use crate::error::Result;
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::tensor::{Scalar, Tensor};

/// The CPU device's kernels.
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("cpu ({})", simd::level().name())
    }
    fn cast_copy(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        elementwise::cast_copy(src, dst)
    }
    fn fill(&self, dst: &Tensor, value: Scalar) -> Result<()> {
        elementwise::fill(dst, value)
    }
    fn unary(&self, op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
        elementwise::unary(op, x, out)
    }
    fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        elementwise::binary(op, a, b, out)
    }
    fn where_(&self, cond: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        elementwise::where_(cond, a, b, out)
    }

    // ---- further primitive families add their methods below this line ----
}
