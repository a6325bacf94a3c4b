//! Shared-memory tensors for `ferrograd.multiprocessing`:
//! `Tensor.share_memory_()`, `Tensor.is_shared()`, and the descriptor-based
//! handle a shared tensor is sent to another process as (see
//! `python/ferrograd/_shared_tensors.py`).

use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use super::{parse_dtype, run, PyTensor, TraceError};
use crate::tensor::{Device, Layout, Storage, Tensor};

/// What [`PyTensor::_shared_handle`] returns: the region's descriptor, the
/// storage's bytes, and the tensor's offset, shape and strides (elements).
type Handle = (i32, usize, usize, Vec<usize>, Vec<isize>);

#[pymethods]
impl PyTensor {
    /// Move this tensor's data to shared memory, in place; returns ``self``.
    ///
    /// The storage's bytes are copied into a new shared memory region and the
    /// tensor is rebound to it (as ``t.data = ...`` rebinds): the same Python
    /// object, with its shape, strides, dtype, ``requires_grad``, ``.grad``,
    /// hooks and version counter. A child process made by ``fork`` writes
    /// into the same memory; sending the tensor to another process through
    /// ``ferrograd.multiprocessing`` (``Process`` arguments, ``Queue``,
    /// ``Pipe``, ``Pool``) sends a handle to the region, so the receiver's
    /// writes are seen here. The region is freed when the last tensor using
    /// it, in every process, is gone. A tensor already shared is returned
    /// unchanged.
    ///
    /// Other tensors that viewed the old storage (views taken before, a kept
    /// ``.data``) keep the old, private memory: share first, then take views.
    /// CPU tensors only: a GPU tensor raises a ``RuntimeError``.
    fn share_memory_(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
        let old = slf.borrow().t.clone();
        if old.is_shared() {
            return Ok(slf.clone().unbind());
        }
        if crate::graph::trace::tracing() || old.device() == Device::Meta {
            return Err(TraceError::new_err(format!(
                "share_memory_: a tensor (shape {:?}, dtype {}) cannot be moved to shared memory inside a \
                 compiled function; share it before capturing",
                old.shape(),
                old.dtype()
            )));
        }
        if old.meta().is_some_and(|m| m.is_view()) {
            return Err(PyRuntimeError::new_err(format!(
                "share_memory_: cannot move a view (shape {:?}, dtype {}) of a tensor that requires grad to \
                 shared memory; share the tensor it views",
                old.shape(),
                old.dtype()
            )));
        }
        let new = run(|| old.share_memory())?;
        let mut me = slf.try_borrow_mut().map_err(|_| {
            PyRuntimeError::new_err(
                "share_memory_: cannot move a tensor while an operation on it is running",
            )
        })?;
        // Compiled functions that read the old storage are captured again.
        old.storage().mark_rebound();
        me.t = new;
        drop(me);
        Ok(slf.clone().unbind())
    }

    /// Whether this tensor's data lives in shared memory (after
    /// :meth:`share_memory_`, or received from another process as a shared
    /// tensor). Views of a shared tensor are shared too.
    fn is_shared(&self) -> bool {
        self.t.is_shared()
    }

    /// ``(fd, storage_nbytes, offset, shape, strides)`` of a shared tensor
    /// (``fd`` stays owned by the storage: send a duplicate), else ``None``.
    fn _shared_handle(&self) -> Option<Handle> {
        let region = self.t.storage().shared_region()?;
        Some((
            region.fd(),
            self.t.storage().nbytes(),
            self.t.offset(),
            self.t.shape().to_vec(),
            self.t.strides().to_vec(),
        ))
    }
}

/// A tensor over the shared memory file `fd` (received from another process;
/// this call takes the descriptor over), holding `nbytes` bytes of storage
/// seen with `dtype`, `shape`, `strides` and `offset` (elements).
#[pyfunction]
fn _from_shared_fd(
    fd: i32,
    nbytes: usize,
    dtype: &Bound<'_, PyAny>,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
) -> PyResult<PyTensor> {
    let dtype = parse_dtype(dtype)?;
    if shape.len() != strides.len() {
        return Err(PyValueError::new_err(format!(
            "share_memory_: a shared tensor handle has shape {shape:?} but strides {strides:?}"
        )));
    }
    let st = run(|| Storage::from_shared_fd(fd, nbytes))?;
    let lay = Layout {
        shape: shape.as_slice().into(),
        strides: strides.as_slice().into(),
        offset,
    };
    run(|| Tensor::from_parts(Arc::new(st), lay, dtype)).map(PyTensor::new)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_from_shared_fd, m)?)?;
    Ok(())
}
