//! Parameters of the backends' primitives that are not op kinds of their own: reduction and
//! scan kinds, convolution and pooling geometry, index arguments, cross-entropy constants and
//! random distributions. The op layer builds them (and re-exports them where its callers
//! look); the backends read them from here, below themselves.

use crate::kernel::philox::Draw;
use crate::tensor::{DType, Tensor};

/// Reductions computed by the backend's `reduce` primitive.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ReduceOp {
    Sum,
    /// Sum divided by the number of reduced elements.
    Mean,
    Prod,
    /// NaN-propagating maximum.
    Max,
    /// NaN-propagating minimum.
    Min,
    /// Logical and of a bool tensor.
    All,
    /// Logical or of a bool tensor.
    Any,
    /// Two-pass variance `Σ(x - mean)² / max(0, N - correction)`; its square root when `std`.
    Var {
        correction: f64,
        std: bool,
    },
    /// `max + log Σ exp(x - max)`.
    LogSumExp,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "amax",
            ReduceOp::Min => "amin",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::Var { std: false, .. } => "var",
            ReduceOp::Var { std: true, .. } => "std",
            ReduceOp::LogSumExp => "logsumexp",
        }
    }
}

/// Index-returning reductions (`argmax`, `argmin`, `max(dim)`, `min(dim)`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ArgOp {
    Max,
    Min,
}

/// Inclusive scans along one dim.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CumOp {
    Sum,
    Prod,
}

/// How `scatter_reduce` combines the values reaching one slot. The backend's
/// `scatter_reduce` kernel runs `Sum`, `Prod`, `Amax` and `Amin`; `Mean` is a
/// sum divided by a count in the op layer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ScatterReduction {
    Sum,
    Prod,
    Mean,
    /// NaN-propagating maximum.
    Amax,
    /// NaN-propagating minimum.
    Amin,
}

impl ScatterReduction {
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduction::Sum => "sum",
            ScatterReduction::Prod => "prod",
            ScatterReduction::Mean => "mean",
            ScatterReduction::Amax => "amax",
            ScatterReduction::Amin => "amin",
        }
    }
    /// The reduction named `s` (PyTorch's names).
    pub fn parse(s: &str) -> Option<ScatterReduction> {
        Some(match s {
            "sum" => ScatterReduction::Sum,
            "prod" => ScatterReduction::Prod,
            "mean" => ScatterReduction::Mean,
            "amax" => ScatterReduction::Amax,
            "amin" => ScatterReduction::Amin,
            _ => return None,
        })
    }
}

/// Resolved 2-D convolution geometry.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Conv2dParams {
    pub stride: [usize; 2],
    /// Padding as (top, bottom, left, right).
    pub pad: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
}

/// Resolved 2-D pooling geometry.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Pool2dParams {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
    pub ceil_mode: bool,
}

/// What an index kernel needs besides its source/destination: the dims of
/// the view being indexed, the user-facing number of each (for messages),
/// and one int32/int64 index tensor per dim, all broadcast to one shape `B`.
pub struct IndexArgs<'a> {
    pub op: &'static str,
    pub dims: &'a [usize],
    pub dim_names: &'a [usize],
    pub indices: &'a [Tensor],
}

/// Per-call constants of the cross-entropy kernels.
#[derive(Clone, Copy, Debug)]
pub struct CeCfg {
    /// Classes per row.
    pub c: usize,
    pub ignore_index: i64,
    /// Label smoothing ε in [0, 1].
    pub smoothing: f64,
}

/// A distribution the backend's `random_fill` writes.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum RandomDist {
    /// `low + (high - low) * u`, `u` uniform in [0, 1).
    Uniform { low: f64, high: f64 },
    /// `mean + std * z`, `z` standard normal (Box–Muller).
    Normal { mean: f64, std: f64 },
    /// `low + bounded(v, range)`, `v` a uniform 64-bit draw; `range >= 1`.
    Int { low: i64, range: u64 },
    /// 1 with probability `p`, else 0.
    Bernoulli { p: f64 },
}

impl RandomDist {
    /// Draw size (and so elements per Philox block) for `dtype`.
    pub fn draw(self, dtype: DType) -> Draw {
        match self {
            RandomDist::Uniform { .. } | RandomDist::Normal { .. } if dtype == DType::F64 => {
                Draw::Bits64
            }
            RandomDist::Uniform { .. } | RandomDist::Normal { .. } => Draw::Bits32,
            RandomDist::Int { .. } => Draw::Bits64,
            RandomDist::Bernoulli { .. } => Draw::Bits32,
        }
    }
}
