//! General ops, each defined once.
//!
//! A *general* op is one whose shape rule and kernel are its own (not an
//! elementwise or reduction family's). Its definition is one type in this
//! layer that implements [`Def`]: its name, its attributes (the type's
//! fields, serialised into saved graphs), its shape/dtype rule with the
//! argument checks, its effect, its cost class, its VJP written against
//! [`GradOps`] (existing ops, so higher-order gradients come free), its
//! ONNX mapping and its Python signatures. [`GeneralOp`] lists the
//! definitions, one variant each.
//!
//! The layers above read everything from the definition: `ops::general::run`
//! applies any general op (checks, output allocation, the backend kernel,
//! autograd recording through [`Def::vjp`]); graph capture records it as one
//! `OpCall::General` node through [`intercept`], without a per-op variant;
//! each backend implements the kernel in its `general` method;
//! `_core._general_ops()` hands the ONNX mapping and signatures to Python.

use std::sync::OnceLock;

use crate::error::Result;
use crate::tensor::{DType, Tensor};

pub use super::sort::Sort;

/// Cost class of one application, for the backends' choice of algorithm
/// and the parallel grain.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cost {
    /// `O(n log n)` per row of `n`.
    SortRows,
    /// `O(n + k log k)` per row: a selection, then a sort of the `k` kept.
    SelectRows,
}

/// The output types an op's rule computed for given inputs, and how its
/// kernel sees the inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// `(shape, dtype)` of each output.
    pub outs: Vec<(Vec<usize>, DType)>,
    /// The kernel's view of the data: `(outer, n, inner)` around the op's dim
    /// of a contiguous input (the op works along `n`).
    pub rows: (usize, usize, usize),
    /// Elements kept per row (`n` for a full sort).
    pub k: usize,
    pub cost: Cost,
}

/// The ops the VJPs are written in (implemented by the `ops` layer, so that
/// gradients are recorded and differentiate again).
pub trait GradOps {
    fn zeros(&self, shape: &[usize], dtype: DType, like: &Tensor) -> Result<Tensor>;
    /// `base` with `base[.., index[i], ..] = src[i]` along `dim` (out of place).
    fn scatter(&self, base: &Tensor, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor>;
    fn reshape(&self, x: &Tensor, shape: &[usize]) -> Result<Tensor>;
}

/// One Python entry point of a general op: name, signature and docstring
/// (the stub's text), and whether it is also a `Tensor` method.
#[derive(Copy, Clone, Debug)]
pub struct PySig {
    pub name: &'static str,
    pub signature: &'static str,
    pub returns: &'static str,
    pub doc: &'static str,
    pub method: bool,
}

/// What every general op definition provides.
pub trait Def {
    /// The registry name of this application (`"sort"`, `"topk"`).
    fn name(&self) -> &'static str;
    /// The autograd node's name.
    fn backward_name(&self) -> &'static str;
    /// The dtypes accepted, as a bit set over `DType as u8`.
    const DTYPES: u16;
    /// Whether the op only reads its inputs and writes fresh outputs (no
    /// randomness, no in-place writes); graph passes may merge such nodes.
    const PURE: bool;
    /// The shape/dtype rule and the argument checks, for inputs of these
    /// shapes and dtypes; errors name the op, the shapes and the arguments.
    fn plan(&self, shapes: &[&[usize]], dtypes: &[DType]) -> Result<Plan>;
    /// Which outputs carry a gradient (the others, such as indices, do not).
    fn differentiable(&self, out: usize) -> bool;
    /// Which outputs the VJP reads (saved, detached).
    fn saves(&self) -> &'static [usize];
    /// The gradient of input 0 from the saved outputs and the gradient of
    /// output 0, written in [`GradOps`].
    fn vjp(
        &self,
        ops: &dyn GradOps,
        x_shape: &[usize],
        saved: &[Tensor],
        g: &Tensor,
    ) -> Result<Tensor>;
    /// The ONNX translation, e.g. `"TopK(x, k; axis=dim, largest=descending, sorted=1)"`.
    const ONNX: &'static str;
    /// The Python functions and methods built on this op.
    const PY: &'static [PySig];
}

/// Every general op, by its definition (saved graphs store the variant name
/// and the definition's fields).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum GeneralOp {
    Sort(Sort),
}

/// Apply `$body` to the definition inside a [`GeneralOp`], bound as `$d`.
macro_rules! with_def {
    ($op:expr, $d:ident => $body:expr) => {
        match $op {
            GeneralOp::Sort($d) => $body,
        }
    };
}

/// What Python reads about one general op family (`_core._general_ops()`).
#[derive(Copy, Clone, Debug)]
pub struct GeneralInfo {
    pub variant: &'static str,
    pub onnx: &'static str,
    pub py: &'static [PySig],
}

/// One entry per [`GeneralOp`] variant.
pub const INFO: &[GeneralInfo] = &[GeneralInfo {
    variant: "Sort",
    onnx: <Sort as Def>::ONNX,
    py: <Sort as Def>::PY,
}];

impl GeneralOp {
    pub fn name(&self) -> &'static str {
        with_def!(self, d => d.name())
    }
    pub fn backward_name(&self) -> &'static str {
        with_def!(self, d => d.backward_name())
    }
    pub fn dtypes(&self) -> u16 {
        match self {
            GeneralOp::Sort(_) => <Sort as Def>::DTYPES,
        }
    }
    pub fn pure(&self) -> bool {
        match self {
            GeneralOp::Sort(_) => <Sort as Def>::PURE,
        }
    }
    pub fn plan(&self, shapes: &[&[usize]], dtypes: &[DType]) -> Result<Plan> {
        with_def!(self, d => d.plan(shapes, dtypes))
    }
    pub fn differentiable(&self, out: usize) -> bool {
        with_def!(self, d => d.differentiable(out))
    }
    pub fn saves(&self) -> &'static [usize] {
        with_def!(self, d => d.saves())
    }
    pub fn vjp(
        &self,
        ops: &dyn GradOps,
        x_shape: &[usize],
        saved: &[Tensor],
        g: &Tensor,
    ) -> Result<Tensor> {
        with_def!(self, d => d.vjp(ops, x_shape, saved, g))
    }
}

/// The capture hook: `Some(outputs)` while a graph is being captured (the op
/// is recorded as one node), `None` otherwise. Installed by the graph layer
/// when a capture starts, so this layer needs no reference to it.
pub type CaptureHook = fn(&GeneralOp, &[&Tensor]) -> Option<Result<Vec<Tensor>>>;

static HOOK: OnceLock<CaptureHook> = OnceLock::new();

/// Install the capture hook (the first installation wins; it is one function).
pub fn set_capture_hook(h: CaptureHook) {
    let _ = HOOK.set(h);
}

/// Called first by every general op application (see [`CaptureHook`]).
#[inline]
pub fn intercept(op: &GeneralOp, ins: &[&Tensor]) -> Option<Result<Vec<Tensor>>> {
    HOOK.get().and_then(|h| h(op, ins))
}
