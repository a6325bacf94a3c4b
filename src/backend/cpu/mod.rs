//! The CPU backend: SIMD (runtime-dispatched) and multithreaded (rayon) kernels.

pub mod arg_reduce;
pub mod bf16gemm;
pub mod conv;
pub mod elementwise;
pub mod fused;
pub mod gemm;
#[cfg(target_arch = "x86_64")]
pub mod gemv;
pub mod graph_kernel;
pub mod index;
pub mod math;
pub mod norm;
pub mod optim;
pub mod prepack;
pub mod random;
pub mod reduce;
pub mod scan;
pub mod sgemm;
pub mod simd;
pub mod softmax;
pub mod sort;
pub mod strided;
pub mod vmath;

use crate::backend::Backend;
use crate::error::Result;
use crate::kernel::philox::PhiloxStream;
use crate::kernel::{
    ArgOp, BinaryOp, CeCfg, Conv2dParams, CumOp, GeneralOp, IndexArgs, Pool2dParams, RandomDist,
    ReduceOp, UnaryOp,
};
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
    fn binary_scalar(
        &self,
        op: BinaryOp,
        a: &Tensor,
        s: Scalar,
        reflected: bool,
        out: &Tensor,
    ) -> Result<bool> {
        Ok(elementwise::binary_scalar(op, a, s, reflected, out))
    }
    fn where_(&self, cond: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        elementwise::where_(cond, a, b, out)
    }

    fn unary_grad(
        &self,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        g: &Tensor,
        out: &Tensor,
    ) -> Result<bool> {
        Ok(elementwise::unary_grad(op, x, y, g, out))
    }

    fn softmax_grad(
        &self,
        y: &Tensor,
        g: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<bool> {
        fused::softmax_grad(y, g, dim, log, out)
    }
    fn layer_norm_grad(
        &self,
        x: &Tensor,
        g: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        rms: bool,
        dx: Option<&Tensor>,
        dw: Option<&Tensor>,
        db: Option<&Tensor>,
    ) -> Result<bool> {
        fused::layer_norm_grad(x, g, mean, rstd, weight, rms, dx, dw, db)
    }
    fn cross_entropy(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        cfg: CeCfg,
        shape: &[usize],
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        fused::cross_entropy(x, target, weight, cfg, shape, loss, lse, wt)
    }
    fn cross_entropy_grad(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        fused::cross_entropy_grad(x, target, weight, lse, g, cfg, out)
    }

    // ---- further primitive families add their methods below this line ----

    fn matmul(&self, a: &Tensor, b: &Tensor, out: &Tensor, accumulate: bool) -> Result<()> {
        let k = a.shape().last().copied().unwrap_or(1);
        long_kernel("matmul", out.numel().saturating_mul(k), || {
            gemm::matmul(a, b, out, accumulate)
        })
    }
    fn matmul_init(&self, a: &Tensor, b: &Tensor, init: &Tensor, out: &Tensor) -> Result<()> {
        // Small products add the bias as they store (no pass copying it first).
        if gemm::small_matmul_init(a, b, init, out) {
            return Ok(());
        }
        self.cast_copy(init, out)?;
        self.matmul(a, b, out, true)
    }
    fn conv2d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        long_kernel(
            "conv2d",
            out.numel().saturating_mul(w.numel() / w.shape()[0].max(1)),
            || conv::conv2d(x, w, bias, p, out),
        )
    }
    fn conv2d_input_grad(
        &self,
        g: &Tensor,
        w: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        long_kernel(
            "conv2d_backward",
            g.numel().saturating_mul(w.numel() / w.shape()[0].max(1)),
            || conv::conv2d_input_grad(g, w, p, out),
        )
    }
    fn conv2d_weight_grad(
        &self,
        g: &Tensor,
        x: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        long_kernel(
            "conv2d_backward",
            g.numel()
                .saturating_mul(out.numel() / out.shape()[0].max(1)),
            || conv::conv2d_weight_grad(g, x, p, out),
        )
    }
    fn max_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        out: &Tensor,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        conv::max_pool2d(x, p, out, indices)
    }
    fn avg_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        count_include_pad: bool,
        divisor_override: Option<usize>,
        out: &Tensor,
    ) -> Result<()> {
        conv::avg_pool2d(x, p, count_include_pad, divisor_override, out)
    }
    fn adaptive_avg_pool2d(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        conv::adaptive_avg_pool2d(x, out)
    }
    fn reduce(&self, op: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> Result<()> {
        reduce::reduce(op, x, mask, out)
    }
    fn arg_reduce(
        &self,
        op: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        arg_reduce::arg_reduce(op, x, dim, values, indices)
    }
    fn softmax(&self, x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
        softmax::softmax(x, dim, log, out)
    }
    fn layer_norm(
        &self,
        x: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        rms: bool,
        out: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
    ) -> Result<()> {
        norm::layer_norm(x, weight, bias, eps, rms, out, mean, rstd)
    }
    fn cumulative(&self, op: CumOp, x: &Tensor, dim: usize, out: &Tensor) -> Result<()> {
        scan::cumulative(op, x, dim, out)
    }
    fn general(&self, op: &GeneralOp, ins: &[&Tensor], outs: &[&Tensor]) -> Result<()> {
        match op {
            GeneralOp::Sort(s) => sort::sort(s, ins[0], outs[0], outs[1]),
        }
    }
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
    fn scatter_reduce(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        reduce: crate::kernel::ScatterReduction,
    ) -> Result<()> {
        index::scatter_reduce(op, dst, dim, index, src, reduce)
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
    fn fused(
        &self,
        k: &crate::kernel::fused::FusedKernel,
        ins: &[Tensor],
        outs: &[Tensor],
    ) -> Result<bool> {
        graph_kernel::run(k, ins, outs).map(|()| true)
    }
}

/// Multiply-adds above which a kernel runs on the pool while the calling
/// thread watches for Ctrl-C: such kernels take tens of milliseconds (2^32
/// is about 17 ms at 250 G multiply-adds per second), next to which the
/// hand-off is free. Below that, ops between which Ctrl-C is checked anyway
/// come quickly enough, and the hand-off is not free: at 2^26 every GEMM of
/// a 1024-wide MLP step (each under a millisecond) paid a thread wake-up
/// and ran beside a spinning pool thread, 4% of the step.
const INTERRUPTIBLE_MIN: usize = 1 << 32;

/// Run a long kernel interruptibly (see [`crate::par::run_interruptible`]);
/// an interrupted kernel's output is incomplete, so it is reported as
/// [`crate::Error::Interrupted`], never returned.
fn long_kernel(op: &'static str, work: usize, f: impl FnOnce() -> Result<()> + Send) -> Result<()> {
    if work >= INTERRUPTIBLE_MIN {
        let (r, interrupted) = crate::par::run_interruptible(f);
        if interrupted {
            return Err(crate::Error::Interrupted { op });
        }
        r
    } else {
        f()
    }
}
