//! Fused elementwise kernels: a small register program over a group of
//! elementwise nodes, run by one pass over the output elements.
//!
//! The fusion pass (`graph::passes::fuse`) turns a connected group of elementwise
//! nodes of one shape into a [`FusedKernel`]: each instruction defines one
//! register from inputs, constants or earlier registers, with the same
//! per-element functions the unfused kernels use (so results match).
//! Registers hold the compute dtype (float32 or float64); boolean values
//! (comparisons, masks) are held as 0 and 1. A backend runs the program over
//! chunks of elements that stay in cache, reading each input once and
//! writing each output once.

use std::fmt;

use super::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Scalar};

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
    #[serde(with = "names")]
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

/// Serde for the op-name list: names read back are interned once each
/// (a `&'static str` per distinct name, so a graph loaded many times does
/// not grow memory).
mod names {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::HashSet;
    use std::sync::Mutex;

    pub fn serialize<S: Serializer>(v: &[&'static str], s: S) -> Result<S::Ok, S::Error> {
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        Ok(v.iter().map(|s| intern(s)).collect())
    }

    fn intern(s: &str) -> &'static str {
        static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let mut g = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        let set = g.get_or_insert_with(HashSet::new);
        if let Some(n) = set.get(s) {
            return n;
        }
        let n: &'static str = Box::leak(s.to_owned().into_boxed_str());
        set.insert(n);
        n
    }
}
