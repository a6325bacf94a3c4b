//! The `Meta` device: tensors with a shape and a dtype but no memory.
//!
//! Graph capture runs every op on meta tensors, so each op's own shape and
//! dtype rules (and its argument checks) decide the captured value's type,
//! while no kernel runs. Every primitive here therefore succeeds without
//! touching memory, except those whose output shape depends on values.

use super::Backend;
use crate::error::{Error, Result};
use crate::kernel::philox::PhiloxStream;
use crate::kernel::{
    ArgOp, BinaryOp, Conv2dParams, CumOp, GeneralOp, IndexArgs, Pool2dParams, RandomDist, ReduceOp,
    UnaryOp,
};
use crate::tensor::{Scalar, Tensor};

/// Kernels of the `Meta` device: no-ops.
pub struct MetaBackend;

/// A kernel called while a trace is active (not from inside a captured op)
/// computes values the graph would never reproduce: refuse it loudly.
fn outside(op: &'static str) -> Result<()> {
    if crate::tensor::capture::active() {
        crate::tensor::capture::note_gap();
        return Err(Error::runtime(
            op,
            "internal error: this computation ran outside the ops being captured into the graph, so the graph could not reproduce it (please report)",
        ));
    }
    Ok(())
}

impl Backend for MetaBackend {
    fn name(&self) -> String {
        "meta".into()
    }
    fn cast_copy(&self, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("cast_copy")
    }
    fn fill(&self, _: &Tensor, _: Scalar) -> Result<()> {
        outside("fill")
    }
    fn unary(&self, _: UnaryOp, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("unary")
    }
    fn binary(&self, _: BinaryOp, _: &Tensor, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("binary")
    }
    fn where_(&self, _: &Tensor, _: &Tensor, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("where_")
    }
    fn matmul(&self, _: &Tensor, _: &Tensor, _: &Tensor, _: bool) -> Result<()> {
        outside("matmul")
    }
    fn conv2d(
        &self,
        _: &Tensor,
        _: &Tensor,
        _: Option<&Tensor>,
        _: &Conv2dParams,
        _: &Tensor,
    ) -> Result<()> {
        outside("conv2d")
    }
    fn conv2d_input_grad(
        &self,
        _: &Tensor,
        _: &Tensor,
        _: &Conv2dParams,
        _: &Tensor,
    ) -> Result<()> {
        outside("conv2d_input_grad")
    }
    fn conv2d_weight_grad(
        &self,
        _: &Tensor,
        _: &Tensor,
        _: &Conv2dParams,
        _: &Tensor,
    ) -> Result<()> {
        outside("conv2d_weight_grad")
    }
    fn max_pool2d(
        &self,
        _: &Tensor,
        _: &Pool2dParams,
        _: &Tensor,
        _: Option<&Tensor>,
    ) -> Result<()> {
        outside("max_pool2d")
    }
    fn avg_pool2d(
        &self,
        _: &Tensor,
        _: &Pool2dParams,
        _: bool,
        _: Option<usize>,
        _: &Tensor,
    ) -> Result<()> {
        outside("avg_pool2d")
    }
    fn adaptive_avg_pool2d(&self, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("adaptive_avg_pool2d")
    }
    fn reduce(&self, _: ReduceOp, _: &Tensor, _: &[bool], _: &Tensor) -> Result<()> {
        outside("reduce")
    }
    fn arg_reduce(
        &self,
        _: ArgOp,
        _: &Tensor,
        _: usize,
        _: Option<&Tensor>,
        _: &Tensor,
    ) -> Result<()> {
        outside("arg_reduce")
    }
    fn softmax(&self, _: &Tensor, _: usize, _: bool, _: &Tensor) -> Result<()> {
        outside("softmax")
    }
    fn cross_entropy(
        &self,
        _: &Tensor,
        _: &Tensor,
        _: Option<&Tensor>,
        _: crate::kernel::CeCfg,
        _: &[usize],
        _: &Tensor,
        _: &Tensor,
        _: &Tensor,
    ) -> Result<()> {
        outside("cross_entropy")
    }
    fn cross_entropy_grad(
        &self,
        _: &Tensor,
        _: &Tensor,
        _: Option<&Tensor>,
        _: &Tensor,
        _: &Tensor,
        _: crate::kernel::CeCfg,
        _: &Tensor,
    ) -> Result<()> {
        outside("cross_entropy")
    }
    fn layer_norm(
        &self,
        _: &Tensor,
        _: Option<&Tensor>,
        _: Option<&Tensor>,
        _: f64,
        _: bool,
        _: &Tensor,
        _: &Tensor,
        _: &Tensor,
    ) -> Result<()> {
        outside("layer_norm")
    }
    fn cumulative(&self, _: CumOp, _: &Tensor, _: usize, _: &Tensor) -> Result<()> {
        outside("cumulative")
    }
    fn random_fill(&self, _: &Tensor, _: RandomDist, _: PhiloxStream) -> Result<()> {
        outside("random_fill")
    }
    fn bernoulli_tensor(&self, _: &Tensor, _: &Tensor, _: PhiloxStream) -> Result<()> {
        outside("bernoulli_tensor")
    }
    fn dropout(&self, _: &Tensor, _: &Tensor, _: f64, _: PhiloxStream) -> Result<()> {
        outside("dropout")
    }
    fn randperm(&self, _: &Tensor, _: PhiloxStream) -> Result<()> {
        outside("randperm")
    }
    fn multinomial(&self, _: &Tensor, _: &Tensor, _: bool, _: PhiloxStream) -> Result<()> {
        outside("multinomial")
    }
    fn index_gather(&self, _: &IndexArgs, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("index_gather")
    }
    fn index_put(&self, _: &IndexArgs, _: &Tensor, _: &Tensor, _: bool) -> Result<()> {
        outside("index_put")
    }
    fn gather(&self, _: &Tensor, _: usize, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("gather")
    }
    fn scatter(
        &self,
        _: &'static str,
        _: &Tensor,
        _: usize,
        _: &Tensor,
        _: &Tensor,
        _: bool,
    ) -> Result<()> {
        outside("scatter")
    }
    fn scatter_reduce(
        &self,
        _: &'static str,
        _: &Tensor,
        _: usize,
        _: &Tensor,
        _: &Tensor,
        _: crate::kernel::ScatterReduction,
    ) -> Result<()> {
        outside("scatter_reduce")
    }
    fn general(&self, op: &GeneralOp, _: &[&Tensor], _: &[&Tensor]) -> Result<()> {
        outside(op.name())
    }
    fn nonzero_count(&self, x: &Tensor) -> Result<usize> {
        Err(Error::symbolic(
            "nonzero",
            format!(
                "the output shape depends on the values of the input (shape {:?}), which are not known while a graph is being captured; data-dependent shapes cannot be captured",
                x.shape()
            ),
        ))
    }
    fn nonzero_fill(&self, _: &Tensor, _: &Tensor) -> Result<()> {
        outside("nonzero_fill")
    }
    fn tri(&self, _: &Tensor, _: &Tensor, _: i64, _: bool) -> Result<()> {
        outside("tri")
    }
    fn fused(
        &self,
        _: &crate::kernel::fused::FusedKernel,
        _: &[Tensor],
        _: &[Tensor],
    ) -> Result<bool> {
        outside("fused").map(|()| true)
    }
}
