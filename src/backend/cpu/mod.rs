//! The CPU backend: SIMD (runtime-dispatched) and multithreaded (rayon) kernels.

pub mod elementwise;
pub mod index;
pub mod math;
pub mod simd;
pub mod strided;
pub mod vmath;

use crate::backend::Backend;
use crate::error::Result;
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::index::IndexArgs;
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

    fn index_gather(&self, args: &IndexArgs, src: &Tensor, out: &Tensor) -> Result<()> {
        index::index_gather(args, src, out)
    }
    fn index_put(&self, a: &IndexArgs, dst: &Tensor, v: &Tensor, accumulate: bool) -> Result<()> {
        index::index_put(a, dst, v, accumulate)
    }
    fn gather(&self, src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
        index::gather(src, dim, index, out)
    }
    fn scatter(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        index::scatter(op, dst, dim, index, src, accumulate)
    }
    fn nonzero_count(&self, x: &Tensor) -> Result<usize> {
        index::nonzero_count(x)
    }
    fn nonzero_fill(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        index::nonzero_fill(x, out)
    }
    fn tri(&self, x: &Tensor, out: &Tensor, k: i64, upper: bool) -> Result<()> {
        index::tri(x, out, k, upper)
    }
}
