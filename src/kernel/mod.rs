//! The kernel-level IR: the op kinds that the backends implement, below the
//! backends and above storage. Each family's definitions sit in one place
//! (see [`unary`]): every layer that needs to know something about an op of
//! the family reads it from that definition rather than keeping its own list.

pub mod binary;
pub mod fused;
pub mod general;
pub mod params;
pub mod philox;
pub mod sort;
pub mod unary;

pub use binary::BinaryOp;
pub use general::GeneralOp;
pub use params::{
    ArgOp, CeCfg, Conv2dParams, CumOp, IndexArgs, Pool2dParams, RandomDist, ReduceOp,
    ScatterReduction,
};
pub use unary::{UnaryInfo, UnaryOp, UnaryOut};
