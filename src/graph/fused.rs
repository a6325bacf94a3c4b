//! Fused elementwise kernels: a small register program over a group of
//! elementwise nodes, run by one pass over the output elements.
//!
//! The fusion pass (`passes::fuse`) turns a connected group of elementwise
//! nodes of one shape into a [`FusedKernel`]: each instruction defines one
//! register from inputs, constants or earlier registers, with the same
//! per-element functions the unfused kernels use (so results match).
//! Registers hold the compute dtype (float32 or float64); boolean values
//! (comparisons, masks) are held as 0 and 1. A backend runs the program over
//! chunks of elements that stay in cache, reading each input once and
//! writing each output once.

use std::fmt;

use crate::error::Result;
use crate::ops::elementwise::{self as ew, BinaryOp, UnaryOp, UnaryOut};
use crate::tensor::{DType, Scalar, Tensor};

/// One instruction; instruction `i` defines register `i`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum FInstr {
    /// Kernel input `k`, converted to the compute dtype (bool as 0/1).
    Load(usize),
    /// A constant (rounded to the compute dtype).
    Const(Scalar),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    /// `cond != 0 ? a : b`.
    Where(usize, usize, usize),
}

/// A fused elementwise program (see the module docs).
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FusedKernel {
    pub instrs: Vec<FInstr>,
    /// Registers stored to the kernel's outputs, with each output's dtype
    /// (the compute dtype, or bool: nonzero becomes true).
    pub outputs: Vec<(usize, DType)>,
    /// The shape every output has; inputs broadcast to it.
    pub shape: Vec<usize>,
    /// float32 or float64.
    pub compute: DType,
    /// Number of kernel inputs.
    pub n_inputs: usize,
    /// The names of the fused ops, in order (for listings).
    #[serde(with = "crate::graph::save::static_names")]
    pub ops: Vec<&'static str>,
}

impl fmt::Debug for FusedKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{ ops: [{}], compute: {}, shape: {:?} }}",
            self.ops.join(", "),
            self.compute,
            self.shape
        )
    }
}

impl FusedKernel {
    /// A readable program listing (`r2 = mul(r0, r1)` ...).
    pub fn program(&self) -> String {
        let mut s = String::new();
        for (i, ins) in self.instrs.iter().enumerate() {
            let rhs = match ins {
                FInstr::Load(k) => format!("input {k}"),
                FInstr::Const(c) => format!("{}", c.to_f64()),
                FInstr::Unary(op, a) => format!("{}(r{a})", op.name()),
                FInstr::Binary(op, a, b) => format!("{}(r{a}, r{b})", op.name()),
                FInstr::Where(c, a, b) => format!("where(r{c}, r{a}, r{b})"),
            };
            s.push_str(&format!("r{i} = {rhs}\n"));
        }
        for (k, (r, d)) in self.outputs.iter().enumerate() {
            s.push_str(&format!("output {k} ({}) = r{r}\n", d.name()));
        }
        s
    }
}

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
    Ok(())
}
