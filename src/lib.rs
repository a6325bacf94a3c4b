//! ferrograd: a tensor engine with a Rust core.
//!
//! Layers, bottom up: [`tensor`] (dtype, storage, layout, the tensor value),
//! [`kernel`] (the kernel-level op kinds, each defined once),
//! [`backend`] (device kernels behind one trait), [`ops`] (the op registry:
//! every public op defined once), and `py` (the PyO3 bindings, only with the
//! `python` feature).

#[macro_use]
pub mod tensor;

/// Capture point at the top of an op function: while a graph is being
/// captured, record the call (op, non-tensor arguments, tensor inputs) and
/// return its shape-only outputs through the adapter `$out`; while the
/// profiler records, open the op's event (see `tensor::profile`).
/// `capture!(OpCall::X { .. }, [a, b] + extra_iter, one)`.
macro_rules! capture {
    ($call:expr, [$($t:expr),* $(,)?] $(+ $extra:expr)?, $out:ident) => {
        if let Some(r) = $crate::ops::capture::intercept(|| {
            #[allow(unused_mut)]
            let mut v: Vec<$crate::tensor::Tensor> = vec![$(($t).clone()),*];
            $( v.extend($extra); )?
            ($call, v)
        }) {
            return r.and_then($crate::ops::capture::$out);
        }
        // While the profiler records: an event for this op, closed when the
        // op's function returns (the binding lives to the end of its block).
        let _fg_profiled = $crate::ops::capture::profile(|| {
            #[allow(unused_mut)]
            let mut v: Vec<$crate::tensor::Tensor> = vec![$(($t).clone()),*];
            $( v.extend($extra); )?
            ($call, v)
        });
    };
}

pub mod autograd;
pub mod backend;
pub mod error;
pub mod graph;
pub mod kernel;
pub mod ops;
pub mod par;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};
pub use tensor::{DType, Device, Scalar, Tensor};
