//! The WebGPU device (through `wgpu`): storage in pooled GPU buffers,
//! kernels in generated WGSL, dispatches batched into one command encoder
//! until a read. See `context` for the device, pool and batching and
//! `shaders` for the kernels.
//!
//! The backend's parts, one concern each: `dtype` (how dtypes live on the
//! device), `storage` (buffers behind tensors, uploads and downloads),
//! `meta` (the metadata words kernels read), `dispatch` (binding operands,
//! the common kinds of dispatch), `limits` (guards for the adapter's
//! limits), `views` (dense copies, temporaries and views the kernels need),
//! `split` (kernels over buffers larger than one binding), and per op
//! family the ops themselves: `elementwise`, `reduce`, `norm` (softmax and
//! norms), `loss`, `index`, `conv` (with `conv_gemm`), `matmul`, `random`,
//! `optim` and `sort`.

pub mod context;
mod conv;
mod conv_gemm;
mod dispatch;
mod dtype;
mod elementwise;
mod index;
mod limits;
mod loss;
mod matmul;
mod meta;
mod norm;
mod optim;
pub mod peak;
pub mod random;
mod reduce;
pub mod shaders;
mod sort;
mod split;
mod storage;
mod views;

pub use dtype::gty;
pub(crate) use dtype::{elem_bytes, is_half};
pub use optim::WgpuOptim;
pub use random::{forget_reservation, note_cpu_draw, note_reservation, Redraw};
pub(crate) use storage::{buffer, storage_over};
pub use storage::{download, new_storage, upload};

use crate::error::Result;
use crate::kernel::philox::PhiloxStream;
use crate::kernel::{
    ArgOp, BinaryOp, CeCfg, Conv2dParams, CumOp, GeneralOp, IndexArgs, Pool2dParams, RandomDist,
    ReduceOp, UnaryOp,
};
use crate::tensor::{Scalar, Tensor};

use super::Backend;

/// The WebGPU backend.
pub struct WgpuBackend;

/// Each op runs the `WgpuBackend` method of its name with a `gpu_` prefix,
/// in the module of its op family (an inherent method of the trait's name
/// would shadow the trait's).
impl Backend for WgpuBackend {
    fn name(&self) -> String {
        "gpu".into()
    }

    fn random_fill(&self, out: &Tensor, dist: RandomDist, s: PhiloxStream) -> Result<()> {
        self.gpu_random_fill(out, dist, s)
    }

    fn bernoulli_tensor(&self, p: &Tensor, out: &Tensor, s: PhiloxStream) -> Result<()> {
        self.gpu_bernoulli_tensor(p, out, s)
    }

    fn multinomial(
        &self,
        probs: &Tensor,
        out: &Tensor,
        replacement: bool,
        s: PhiloxStream,
    ) -> Result<()> {
        self.gpu_multinomial(probs, out, replacement, s)
    }

    fn randperm(&self, out: &Tensor, s: PhiloxStream) -> Result<()> {
        self.gpu_randperm(out, s)
    }

    fn dropout(&self, x: &Tensor, out: &Tensor, p: f64, s: PhiloxStream) -> Result<()> {
        self.gpu_dropout(x, out, p, s)
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
        self.gpu_layer_norm(x, weight, bias, eps, rms, out, mean, rstd)
    }

    fn arg_reduce(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        self.gpu_arg_reduce(aop, x, dim, values, indices)
    }

    fn cast_copy(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        self.gpu_cast_copy(src, dst)
    }

    fn fill(&self, dst: &Tensor, value: Scalar) -> Result<()> {
        self.gpu_fill(dst, value)
    }

    fn unary(&self, uop: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_unary(uop, x, out)
    }

    fn binary(&self, bop: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_binary(bop, a, b, out)
    }

    fn where_(&self, cond: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_where_(cond, a, b, out)
    }

    fn reduce(&self, rop: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> Result<()> {
        self.gpu_reduce(rop, x, mask, out)
    }

    fn softmax(&self, x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
        self.gpu_softmax(x, dim, log, out)
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
        self.gpu_layer_norm_grad(x, g, mean, rstd, weight, rms, dx, dw, db)
    }

    fn softmax_grad(
        &self,
        y: &Tensor,
        g: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<bool> {
        self.gpu_softmax_grad(y, g, dim, log, out)
    }

    fn unary_grad(
        &self,
        uop: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        g: &Tensor,
        out: &Tensor,
    ) -> Result<bool> {
        self.gpu_unary_grad(uop, x, y, g, out)
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
        self.gpu_cross_entropy(x, target, weight, cfg, shape, loss, lse, wt)
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
        self.gpu_cross_entropy_grad(x, target, weight, lse, g, cfg, out)
    }

    fn conv2d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        self.gpu_conv2d(x, w, bias, p, out)
    }

    fn conv2d_input_grad(
        &self,
        g: &Tensor,
        w: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        self.gpu_conv2d_input_grad(g, w, p, out)
    }

    fn conv2d_weight_grad(
        &self,
        g: &Tensor,
        x: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        self.gpu_conv2d_weight_grad(g, x, p, out)
    }

    fn max_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        out: &Tensor,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        self.gpu_max_pool2d(x, p, out, indices)
    }

    fn avg_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        count_include_pad: bool,
        divisor_override: Option<usize>,
        out: &Tensor,
    ) -> Result<()> {
        self.gpu_avg_pool2d(x, p, count_include_pad, divisor_override, out)
    }

    fn adaptive_avg_pool2d(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_adaptive_avg_pool2d(x, out)
    }

    fn gather(&self, src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_gather(src, dim, index, out)
    }

    fn index_gather(&self, a: &IndexArgs, src: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_index_gather(a, src, out)
    }

    fn index_put(
        &self,
        a: &IndexArgs,
        dst: &Tensor,
        values: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        self.gpu_index_put(a, dst, values, accumulate)
    }

    fn nonzero_count(&self, x: &Tensor) -> Result<usize> {
        self.gpu_nonzero_count(x)
    }

    fn nonzero_fill(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        self.gpu_nonzero_fill(x, out)
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
        self.gpu_scatter(op, dst, dim, index, src, accumulate)
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
        self.gpu_scatter_reduce(op, dst, dim, index, src, reduce)
    }

    fn cumulative(&self, cop: CumOp, x: &Tensor, dim: usize, out: &Tensor) -> Result<()> {
        self.gpu_cumulative(cop, x, dim, out)
    }

    fn tri(&self, x: &Tensor, out: &Tensor, k: i64, upper: bool) -> Result<()> {
        self.gpu_tri(x, out, k, upper)
    }

    fn fused(
        &self,
        k: &crate::kernel::fused::FusedKernel,
        ins: &[Tensor],
        outs: &[Tensor],
    ) -> Result<bool> {
        self.gpu_fused(k, ins, outs)
    }

    fn matmul(&self, a: &Tensor, b: &Tensor, out: &Tensor, accumulate: bool) -> Result<()> {
        self.gpu_matmul(a, b, out, accumulate)
    }

    fn general(&self, op: &GeneralOp, ins: &[&Tensor], outs: &[&Tensor]) -> Result<()> {
        match op {
            GeneralOp::Sort(s) => self.gpu_sort(s, ins[0], outs[0], outs[1]),
        }
    }
}
