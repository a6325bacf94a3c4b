//! Running a [`FusedKernel`] without a fused kernel (see `crate::kernel::fused`
//! for the program itself).

use crate::error::Result;
use crate::ops::elementwise::{self as ew, BinaryOp, UnaryOut};
use crate::tensor::{DType, Scalar, Tensor};

pub use crate::kernel::fused::{FInstr, FReduce, FusedKernel};

/// Run `k` one instruction at a time with the ordinary elementwise ops (one
/// kernel and one temporary per instruction) on any device: for a backend
/// that cannot run the program as one kernel (too many tensors to bind).
/// Same results as the fused kernel: registers in the compute dtype, bools
/// as 0 and 1.
pub fn run_unfused(k: &FusedKernel, ins: &[Tensor], outs: &[Tensor]) -> Result<()> {
    let _no = crate::autograd::GradMode::set(false);
    let device = outs
        .first()
        .map_or(crate::tensor::Device::Cpu, |t| t.device());
    let as_compute = |t: Tensor| -> Result<Tensor> {
        if t.dtype() == k.compute {
            Ok(t)
        } else {
            ew::to_dtype(&t, k.compute)
        }
    };
    let mut regs: Vec<Tensor> = Vec::with_capacity(k.instrs.len());
    for ins_ in &k.instrs {
        let r = match ins_ {
            FInstr::Load(x) => as_compute(ins[*x].clone())?,
            FInstr::Const(c) => ew::scalar_tensor(*c, k.compute, device)?,
            FInstr::Unary(op, a) => {
                let y = ew::unary(*op, &regs[*a])?;
                match op.out_kind() {
                    UnaryOut::Bool => as_compute(y)?,
                    _ => y,
                }
            }
            FInstr::Binary(op, a, b) => as_compute(ew::binary(*op, &regs[*a], &regs[*b])?)?,
            FInstr::Where(c, a, b) => {
                let cond = ew::binary_scalar(BinaryOp::Ne, &regs[*c], Scalar::Float(0.0), false)?;
                ew::where_(&cond, &regs[*a], &regs[*b])?
            }
        };
        regs.push(r);
    }
    for (o, &(r, d)) in outs.iter().zip(&k.outputs) {
        let v = if d == DType::Bool {
            ew::binary_scalar(BinaryOp::Ne, &regs[r], Scalar::Float(0.0), false)?
        } else {
            regs[r].clone()
        };
        ew::copy_(o, &v)?;
    }
    for (o, red) in outs[k.outputs.len()..].iter().zip(&k.reductions) {
        let dims: Vec<isize> = red.dims.iter().map(|&d| d as isize).collect();
        // Broadcast to the kernel's shape first: a register that is an
        // input's value may still have the input's (broadcastable) shape.
        let x = crate::ops::shape::broadcast_to(&regs[red.reg], &k.shape)?;
        let v = if red.mean {
            crate::ops::reduce::mean(&x, Some(&dims), red.keepdim, None)?
        } else {
            crate::ops::reduce::sum(&x, Some(&dims), red.keepdim, None)?
        };
        ew::copy_(o, &v)?;
    }
    Ok(())
}
