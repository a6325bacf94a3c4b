//! `scatter_reduce`: the values of `src` reduced into `x` at `index` along a
//! dim with `sum`, `prod`, `mean`, `amax` or `amin`, PyTorch's semantics
//! (`index_reduce` is a composition of it in Python).
//!
//! The forward is one backend primitive (`Backend::scatter_reduce`, which
//! combines values per slot in row-major order of `index`) plus, for `mean`,
//! a count and a division; `include_self=False` first writes the reduction's
//! identity at every scattered slot. The gradient is written in ops (gather,
//! scatter_add, comparisons, `scatter_reduce` itself), so eager autograd,
//! captured graphs and higher-order gradients share it.

use crate::autograd::{self as ag, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
use crate::kernel::ScatterReduction;
use crate::ops::elementwise::{self, BinaryOp};
use crate::ops::index::{
    self as ix, at_least_1d, check_index_dtype, check_no_overlap, same_device,
};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::{creation, shape};
use crate::tensor::layout::{fmt_shape, norm_dim};
use crate::tensor::{DType, Device, Scalar, Shape, Tensor};

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("scatter_reduce", "index", DTypes::NUMERIC).grad(),
    OpInfo::prim("scatter_reduce_", "index", DTypes::NUMERIC)
        .mutates(0)
        .kind(OpKind::Composite)
        .grad(),
];

/// The value every slot a reduction writes starts from when `include_self=False`
/// (on the gpu device, which stores int64 in 32 bits, int64 takes int32's range).
fn identity(r: ScatterReduction, dtype: DType, device: Device) -> Scalar {
    use ScatterReduction as R;
    let narrow = matches!(device, Device::Gpu(_));
    let (lo, hi) = match dtype {
        DType::U8 => (0, u8::MAX as i64),
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I64 if narrow => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    };
    let float = dtype.is_floating_point();
    match r {
        R::Sum | R::Mean => Scalar::Int(0),
        R::Prod => Scalar::Int(1),
        R::Amax if float => Scalar::Float(f64::NEG_INFINITY),
        R::Amin if float => Scalar::Float(f64::INFINITY),
        R::Amax => Scalar::Int(lo),
        R::Amin => Scalar::Int(hi),
    }
}

/// The checks of every scatter_reduce call; errors name the op, the shapes and dtypes.
fn check(op: &'static str, x: &Tensor, dim: isize, index: &Tensor, src: &Tensor) -> Result<usize> {
    check_index_dtype(op, index)?;
    same_device(op, x, index)?;
    same_device(op, x, src)?;
    if x.dtype() == DType::Bool || x.dtype() != src.dtype() {
        return Err(Error::dtype(
            op,
            format!(
                "expected self and src of one numeric dtype, got self {} (shape {}) and src {} (shape {})",
                x.dtype(),
                fmt_shape(x.shape()),
                src.dtype(),
                fmt_shape(src.shape())
            ),
        ));
    }
    // Refused before any work on a device without the kernel (the identity
    // fill of `include_self=False` would otherwise fail first, less clearly).
    if !OPS[0].supports(x.dtype(), x.device()) {
        return Err(Error::runtime(
            op,
            format!(
                "not supported on the {} device (self {} of shape {}); move the tensors to the cpu",
                x.device(),
                x.dtype(),
                fmt_shape(x.shape())
            ),
        ));
    }
    let (d, ..) = ix::scatter_shapes(op, dim, x, index, src)?;
    Ok(d)
}

/// Reduce `src` into `out` (a fresh tensor of `x`'s values) in place.
fn reduce_into(
    op: &'static str,
    out: &Tensor,
    dim: isize,
    index: &Tensor,
    src: &Tensor,
    reduce: ScatterReduction,
    include_self: bool,
) -> Result<()> {
    let _no = GradMode::set(false);
    let d = check(op, out, dim, index, src)?;
    let (o1, i1, s1) = (at_least_1d(out)?, at_least_1d(index)?, at_least_1d(src)?);
    check_no_overlap(op, &o1)?;
    let be = backend(out.device());
    if !include_self && i1.numel() > 0 {
        let fill = creation::full(
            i1.shape(),
            identity(reduce, out.dtype(), out.device()),
            out.dtype(),
            out.device(),
        )?;
        be.scatter(op, &o1, d, &i1, &fill, false)?;
    }
    let kernel = match reduce {
        ScatterReduction::Mean => ScatterReduction::Sum,
        r => r,
    };
    be.scatter_reduce(op, &o1, d, &i1, &s1, kernel)?;
    if reduce == ScatterReduction::Mean {
        let count = mean_count(out, d, index, include_self, count_dtype(out.dtype()))?;
        // The count is at least 1: integers divide without the zero check's read.
        let r = if out.dtype().is_floating_point() {
            elementwise::binary(BinaryOp::Div, out, &count)?
        } else {
            elementwise::floor_divide_by_positive(out, &count)?
        };
        elementwise::copy_(out, &r)?;
    }
    out.storage().bump_version();
    Ok(())
}

/// Per slot of `x`, the number of values `mean` averages (self counted when
/// `include_self`), at least 1; in `dtype`, which must hold the count exactly
/// (a narrow integer or half-precision count would wrap or round).
fn mean_count(
    x: &Tensor,
    d: usize,
    index: &Tensor,
    include_self: bool,
    dtype: DType,
) -> Result<Tensor> {
    let start = Scalar::Int(include_self as i64);
    let n = creation::full(x.shape(), start, dtype, x.device())?;
    let ones = creation::full(index.shape(), Scalar::Int(1), dtype, x.device())?;
    let n = ix::scatter_add(&n, d as isize, index, &ones)?;
    let zero = elementwise::binary_scalar(BinaryOp::Eq, &n, Scalar::Int(0), false)?;
    elementwise::masked_fill(&n, &zero, Scalar::Int(1))
}

/// The dtype `mean` counts in for a result of dtype `d`: int64 for integers,
/// float32 for the half types, else `d` (exact far past any slot's count).
fn count_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d if d.is_floating_point() => d,
        _ => DType::I64,
    }
}

/// `scatter_reduce(x, dim, index, src, reduce, include_self)`: a copy of `x`
/// where each slot `index` points at (along `dim`) holds the reduction of the
/// `src` values sent to it, and of its own value when `include_self`. Slots no
/// index points at keep `x`'s value. `mean` of integers rounds down.
pub fn scatter_reduce(
    x: &Tensor,
    dim: isize,
    index: &Tensor,
    src: &Tensor,
    reduce: ScatterReduction,
    include_self: bool,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::ScatterReduce {
            dim,
            reduce,
            include_self
        },
        [x, index, src],
        one
    );
    let op = "scatter_reduce";
    let out = {
        let _no = GradMode::set(false);
        let out = elementwise::clone(x)?;
        reduce_into(op, &out, dim, index, src, reduce, include_self)?;
        out
    };
    if x.dtype().is_floating_point() && ag::needs_grad(&[x, src]) {
        let bw = backward(dim, reduce, include_self, src);
        ag::record(
            bw,
            &[x, src],
            &[&out],
            &[
                Save::Tensor(x),
                Save::Tensor(index),
                Save::Tensor(src),
                Save::Output(0),
            ],
        );
    }
    Ok(out)
}

/// In-place `scatter_reduce`; nothing is written when the call fails.
///
/// A composition of recorded ops (the out-of-place op on a copy of `x`, then
/// `copy_` into `x`), so that the gradient reads `x`'s value from before the
/// write and a captured graph holds the same nodes. When `x` or `src`
/// requires grad (an error for leaves that require grad), `x` becomes the
/// output of that chain.
pub fn scatter_reduce_(
    x: &Tensor,
    dim: isize,
    index: &Tensor,
    src: &Tensor,
    reduce: ScatterReduction,
    include_self: bool,
) -> Result<()> {
    let op = "scatter_reduce_";
    x.check_writable(op)?;
    check_no_overlap(op, &at_least_1d(x)?)?;
    let grad = x.dtype().is_floating_point() && ag::needs_grad(&[x, src]);
    if grad {
        ag::check_inplace(op, x)?;
    }
    let base = if grad {
        elementwise::clone(x)?
    } else {
        x.clone()
    };
    let r = scatter_reduce(&base, dim, index, src, reduce, include_self)
        .map_err(|e| ix::rename(e, op))?;
    elementwise::copy_(x, &r)
}

fn backward(
    dim: isize,
    reduce: ScatterReduction,
    include_self: bool,
    src: &Tensor,
) -> ScatterReduceBackward {
    ScatterReduceBackward {
        dim,
        reduce,
        include_self,
        src_shape: src.shape().into(),
        src_dtype: src.dtype(),
    }
}

/// PyTorch's gradient of `scatter_reduce`, with one departure: for
/// `amax`/`amin` with `include_self=False`, `x`'s own value is not counted
/// among the values that share a slot's gradient (PyTorch counts it when it
/// equals the result, though it took no part in the reduction).
struct ScatterReduceBackward {
    dim: isize,
    reduce: ScatterReduction,
    include_self: bool,
    src_shape: Shape,
    src_dtype: DType,
}

fn bin(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    elementwise::binary(op, a, b)
}

impl ScatterReduceBackward {
    /// `(grad_self, grad_src)`, the latter of `index`'s shape.
    fn grads(
        &self,
        x: &Tensor,
        index: &Tensor,
        s: &Tensor,
        result: &Tensor,
        g: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        use ScatterReduction as R;
        let dim = self.dim;
        let gi = |t: &Tensor| ix::gather(t, dim, index);
        let dt = g.dtype();
        Ok(match self.reduce {
            R::Sum => (g.clone(), gi(g)?),
            R::Mean => {
                let d = norm_dim("scatter_reduce", dim, x.ndim().max(1))?;
                // Divided in the count's dtype (float32 for the half types), rounded once.
                let n = mean_count(g, d, index, self.include_self, count_dtype(dt))?;
                let back = |t: Tensor| -> Result<Tensor> {
                    if t.dtype() == dt {
                        Ok(t)
                    } else {
                        elementwise::to_dtype(&t, dt)
                    }
                };
                (
                    back(bin(BinaryOp::Div, g, &n)?)?,
                    back(bin(BinaryOp::Div, &gi(g)?, &gi(&n)?)?)?,
                )
            }
            R::Amax | R::Amin => {
                let value = gi(result)?;
                let mut self_is = elementwise::to_dtype(&bin(BinaryOp::Eq, x, result)?, dt)?;
                if !self.include_self {
                    let z = creation::zeros(index.shape(), dt, g.device())?;
                    self_is = ix::scatter(&self_is, dim, index, &z)?;
                }
                let src_is = elementwise::to_dtype(&bin(BinaryOp::Eq, s, &value)?, dt)?;
                let n = ix::scatter_add(&self_is, dim, index, &src_is)?;
                let share = bin(BinaryOp::Div, g, &n)?;
                (
                    bin(BinaryOp::Mul, &self_is, &share)?,
                    bin(BinaryOp::Mul, &src_is, &gi(&share)?)?,
                )
            }
            R::Prod => {
                // Recomputed (not the saved output) so that higher-order gradients
                // see its dependence on `x` and `src`.
                let result = &scatter_reduce(x, dim, index, s, R::Prod, self.include_self)?;
                let is0 =
                    |t: &Tensor| elementwise::binary_scalar(BinaryOp::Eq, t, Scalar::Int(0), false);
                let one = Scalar::Int(1);
                let masked_self = elementwise::masked_fill(x, &is0(x)?, one)?;
                let msr = scatter_reduce(&masked_self, dim, index, s, R::Prod, self.include_self)?;
                let gx = bin(BinaryOp::Div, &bin(BinaryOp::Mul, g, &msr)?, &masked_self)?;
                let src_zero = is0(s)?;
                let z = creation::zeros(x.shape(), dt, g.device())?;
                let nz = gi(&ix::scatter_add(
                    &z,
                    dim,
                    index,
                    &elementwise::to_dtype(&src_zero, dt)?,
                )?)?;
                let nz1 = elementwise::binary_scalar(BinaryOp::Eq, &nz, one, false)?;
                let single = bin(BinaryOp::LogicalAnd, &src_zero, &nz1)?;
                let masked_src = elementwise::masked_fill(s, &single, one)?;
                let msrc = scatter_reduce(x, dim, index, &masked_src, R::Prod, self.include_self)?;
                let a = gi(&bin(BinaryOp::Mul, g, &msrc)?)?;
                let b = bin(
                    BinaryOp::Div,
                    &gi(&bin(BinaryOp::Mul, g, result)?)?,
                    &elementwise::masked_fill(s, &src_zero, one)?,
                )?;
                (gx, elementwise::where_(&single, &a, &b)?)
            }
        })
    }
}

impl Backward for ScatterReduceBackward {
    fn name(&self) -> &'static str {
        "ScatterReduceBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, index, src, result) = (&saved[0], &saved[1], &saved[2], &saved[3]);
        // `src` may be larger than `index`: only its leading block takes part.
        let mut s = src.clone();
        for k in 0..index.ndim() {
            if s.shape()[k] != index.shape()[k] {
                s = shape::narrow(&s, k as isize, 0, index.shape()[k])?;
            }
        }
        let (gx, gs) = self.grads(x, index, &s, result, g)?;
        let gx = if !needs[0] {
            None
        } else if self.include_self {
            Some(gx)
        } else {
            let z = creation::zeros(index.shape(), gx.dtype(), gx.device())?;
            Some(ix::scatter(&gx, self.dim, index, &z)?)
        };
        let gs = if needs[1] && self.src_dtype.is_floating_point() {
            Some(ix::src_grad_padded(&gs, &self.src_shape, self.src_dtype)?)
        } else {
            None
        };
        Ok(vec![gx, gs])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f64], s: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), s).unwrap()
    }
    fn i(v: &[i64]) -> Tensor {
        Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
    }

    #[test]
    fn each_reduction_with_and_without_self() {
        let x = t(&[1., 2., 3.], &[3]);
        let s = t(&[4., 5., 6., 7.], &[4]);
        let idx = i(&[0, 0, 2, 2]);
        let run = |r, inc| {
            scatter_reduce(&x, 0, &idx, &s, r, inc)
                .unwrap()
                .to_f64_vec()
        };
        use ScatterReduction as R;
        assert_eq!(run(R::Sum, true), vec![10., 2., 16.]);
        assert_eq!(run(R::Sum, false), vec![9., 2., 13.]);
        assert_eq!(run(R::Prod, true), vec![20., 2., 126.]);
        assert_eq!(run(R::Mean, true), vec![10. / 3., 2., 16. / 3.]);
        assert_eq!(run(R::Mean, false), vec![4.5, 2., 6.5]);
        assert_eq!(run(R::Amax, false), vec![5., 2., 7.]);
        assert_eq!(run(R::Amin, true), vec![1., 2., 3.]);
        assert_eq!(run(R::Amin, false), vec![4., 2., 6.]);
    }

    #[test]
    fn bad_index_leaves_self_untouched() {
        let x = t(&[1., 2., 3.], &[3]);
        let e = scatter_reduce_(
            &x,
            0,
            &i(&[0, 3]),
            &t(&[1., 1.], &[2]),
            ScatterReduction::Amax,
            false,
        );
        assert!(e.is_err());
        assert_eq!(x.to_f64_vec(), vec![1., 2., 3.]);
    }
}
