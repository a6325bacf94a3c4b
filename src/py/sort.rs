//! Tensor methods of the sort family (`sort`, `argsort`, `msort`, `topk`,
//! `kthvalue`, `median`, `nanmedian`); their signatures and docs are the
//! definition's (`crate::kernel::sort`, `Def::PY`). The functional forms
//! (`ferrograd.sort`, ...) are these methods re-exported from Python.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use super::reduce::values_indices;
use super::{run_heavy, PyTensor};
use crate::ops::sort as so;

fn pair(py: Python<'_>, name: &str, r: (crate::Tensor, crate::Tensor)) -> PyResult<Py<PyAny>> {
    values_indices(py, name, PyTensor::new(r.0), PyTensor::new(r.1))
}

/// An int argument that must not be a bool (PyTorch refuses `dim=True`).
fn int_arg(op: &str, what: &str, v: &Bound<'_, PyAny>) -> PyResult<i64> {
    if v.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{op}: {what} must be an int, got a bool"
        )));
    }
    v.extract::<i64>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{op}: {what} must be an int, got {}",
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

#[pymethods]
impl PyTensor {
    /// Sort along `dim`: a named tuple (values, indices) with int64 indices.
    /// NaN sorts as the largest value; equal values keep their input order
    /// (every sort is stable).
    #[pyo3(signature = (dim=-1, descending=false, stable=false))]
    fn sort(
        &self,
        py: Python<'_>,
        dim: isize,
        descending: bool,
        stable: bool,
    ) -> PyResult<Py<PyAny>> {
        let t = &self.t;
        let r = run_heavy(py, t.numel(), || so::sort(t, dim, descending, stable))?;
        pair(py, "sort", r)
    }

    /// The int64 indices that sort the tensor along `dim` (see `sort`).
    #[pyo3(signature = (dim=-1, descending=false, stable=false))]
    fn argsort(
        &self,
        py: Python<'_>,
        dim: isize,
        descending: bool,
        stable: bool,
    ) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || so::argsort(t, dim, descending, stable)).map(PyTensor::new)
    }

    /// The tensor sorted along dim 0 (the values of `sort(0)`).
    fn msort(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || so::msort(t)).map(PyTensor::new)
    }

    /// The `k` largest (or smallest) elements along `dim` as a named tuple
    /// (values, indices). The results are always sorted; equal values keep
    /// their input order.
    #[pyo3(signature = (k, dim=-1, largest=true, sorted=true))]
    fn topk(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        dim: isize,
        largest: bool,
        sorted: bool,
    ) -> PyResult<Py<PyAny>> {
        let k = int_arg("topk", "k", k)?;
        let t = &self.t;
        let r = run_heavy(py, t.numel(), || so::topk(t, k, dim, largest, sorted))?;
        pair(py, "topk", r)
    }

    /// The `k`-th smallest element (1-based) along `dim` and its index, as a
    /// named tuple (values, indices).
    #[pyo3(signature = (k, dim=-1, keepdim=false))]
    fn kthvalue(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        dim: isize,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        let k = int_arg("kthvalue", "k", k)?;
        let t = &self.t;
        let r = run_heavy(py, t.numel(), || so::kthvalue(t, k, dim, keepdim))?;
        pair(py, "kthvalue", r)
    }

    /// The lower median. Without `dim`: a 0-d tensor over all elements; with
    /// `dim`: a named tuple (values, indices). A slice holding NaN has median
    /// NaN (its first NaN).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn median(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        median(py, &self.t, dim, keepdim, false)
    }

    /// `median` ignoring NaN (NaN only where a slice is all NaN).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn nanmedian(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Py<PyAny>> {
        median(py, &self.t, dim, keepdim, true)
    }
}

fn median(
    py: Python<'_>,
    t: &crate::Tensor,
    dim: Option<&Bound<'_, PyAny>>,
    keepdim: bool,
    skip_nan: bool,
) -> PyResult<Py<PyAny>> {
    let name = if skip_nan { "nanmedian" } else { "median" };
    match dim.filter(|d| !d.is_none()) {
        Some(d) => {
            let d = int_arg(name, "dim", d)? as isize;
            let r = run_heavy(py, t.numel(), || so::median_dim(t, d, keepdim, skip_nan))?;
            pair(py, name, r)
        }
        None => {
            if keepdim {
                return Err(PyTypeError::new_err(format!(
                    "{name}: keepdim=True needs a dim"
                )));
            }
            let r = run_heavy(py, t.numel(), || so::median_all(t, skip_nan))?;
            Ok(PyTensor::new(r).into_pyobject(py)?.into_any().unbind())
        }
    }
}
