//! ferrograd: a tensor engine with a Rust core.
//!
//! Layers, bottom up: [`tensor`] (dtype, storage, layout, the tensor value),
//! [`backend`] (device kernels behind one trait), [`ops`] (the op registry:
//! every public op defined once), and `py` (the PyO3 bindings, only with the
//! `python` feature).

#[macro_use]
pub mod tensor;
pub mod autograd;
pub mod backend;
pub mod error;
pub mod ops;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};
pub use tensor::{DType, Device, Scalar, Tensor};
