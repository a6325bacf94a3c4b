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

/// A sum (or mean) of one register over some of the kernel's dims: an
/// output of the kernel after its elementwise outputs, in the compute dtype,
/// of the kernel's shape with those dims removed (or kept as 1).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FReduce {
    pub reg: usize,
    /// Reduced dims of the kernel's shape, ascending.
    pub dims: Vec<usize>,
    pub keepdim: bool,
    pub mean: bool,
}

impl FReduce {
    /// The output's shape for a kernel of shape `shape`.
    pub fn shape(&self, shape: &[usize]) -> Vec<usize> {
        shape
            .iter()
            .enumerate()
            .filter_map(|(d, &n)| match (self.dims.contains(&d), self.keepdim) {
                (false, _) => Some(n),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect()
    }
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
    /// Reductions at the end of the program: outputs after `outputs`.
    #[serde(default)]
    pub reductions: Vec<FReduce>,
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
        for (q, red) in self.reductions.iter().enumerate() {
            s.push_str(&format!(
                "output {} ({}) = {}(r{}, dims={:?}{})\n",
                self.outputs.len() + q,
                self.compute.name(),
                if red.mean { "mean" } else { "sum" },
                red.reg,
                red.dims,
                if red.keepdim { ", keepdim" } else { "" }
            ));
        }
        s
    }

    /// Number of outputs: the elementwise ones, then the reductions.
    pub fn n_outputs(&self) -> usize {
        self.outputs.len() + self.reductions.len()
    }

    /// Shape and dtype of every output, in order.
    pub fn output_types(&self) -> Vec<(Vec<usize>, DType)> {
        self.outputs
            .iter()
            .map(|&(_, d)| (self.shape.clone(), d))
            .chain(
                self.reductions
                    .iter()
                    .map(|r| (r.shape(&self.shape), self.compute)),
            )
            .collect()
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
