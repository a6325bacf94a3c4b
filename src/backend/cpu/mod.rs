//! The CPU backend: SIMD (runtime-dispatched) and multithreaded (rayon) kernels.

pub mod elementwise;
pub mod math;
pub mod random;
pub mod simd;
pub mod strided;
pub mod vmath;

use crate::backend::Backend;
use crate::error::Result;
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::philox::PhiloxStream;
use crate::ops::random::RandomDist;
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

    fn random_fill(&self, out: &Tensor, dist: RandomDist, s: PhiloxStream) -> Result<()> {
        random::fill(out, dist, s)
    }
    fn bernoulli_tensor(&self, p: &Tensor, out: &Tensor, s: PhiloxStream) -> Result<()> {
        random::bernoulli_tensor(p, out, s)
    }
    fn dropout(&self, x: &Tensor, out: &Tensor, p: f64, s: PhiloxStream) -> Result<()> {
        random::dropout(x, out, p, s)
    }
    fn randperm(&self, out: &Tensor, s: PhiloxStream) -> Result<()> {
        random::randperm(out, s)
    }
    fn multinomial(&self, probs: &Tensor, out: &Tensor, repl: bool, s: PhiloxStream) -> Result<()> {
        random::multinomial(probs, out, repl, s)
    }
}
