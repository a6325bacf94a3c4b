//! Tensor methods for the reduction family (`sum`, `mean`, `max`, `softmax`, ...).
//!
//! The functional forms (`ferrograd.sum`, `ferrograd.nn.functional.softmax`)
//! are these methods re-exported from Python.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBool;

use super::methods::binop;
use super::{parse_dtype_opt, run_heavy, PyTensor};
use crate::ops::elementwise::BinaryOp;
use crate::ops::reduce::{self as red, ArgOp, CumOp};

/// Parse a `dim` argument: None, an int, or a sequence of ints.
fn parse_dims(op: &str, dim: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<isize>>> {
    let Some(d) = dim else { return Ok(None) };
    if d.is_none() {
        return Ok(None);
    }
    if d.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{op}: dim must be an int or a sequence of ints, got a bool"
        )));
    }
    if let Ok(i) = d.extract::<isize>() {
        return Ok(Some(vec![i]));
    }
    d.extract::<Vec<isize>>().map(Some).map_err(|_| {
        PyTypeError::new_err(format!(
            "{op}: dim must be None, an int or a sequence of ints, got {}",
            d.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}

/// Named (values, indices) result types, one per op name, as tuple
/// subclasses of module `ferrograd.return_types` (made once per name).
pub(super) fn values_indices(
    py: Python<'_>,
    name: &str,
    v: PyTensor,
    i: PyTensor,
) -> PyResult<Py<PyAny>> {
    static TYPES: PyOnceLock<Py<pyo3::types::PyDict>> = PyOnceLock::new();
    let types = TYPES
        .get_or_init(py, || pyo3::types::PyDict::new(py).unbind())
        .bind(py);
    let ty = match types.get_item(name)? {
        Some(t) => t,
        None => {
            let nt = py.import("collections")?.getattr("namedtuple")?;
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("module", "ferrograd.return_types")?;
            let t = nt.call((name, ("values", "indices")), Some(&kw))?;
            types.set_item(name, &t)?;
            t
        }
    };
    Ok(ty.call1((v, i))?.unbind())
}

fn max_min(
    py: Python<'_>,
    t: &crate::tensor::Tensor,
    op: ArgOp,
    dim: Option<&Bound<'_, PyAny>>,
    keepdim: bool,
    other: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let name = if op == ArgOp::Max { "max" } else { "min" };
    let bin = if op == ArgOp::Max {
        BinaryOp::Maximum
    } else {
        BinaryOp::Minimum
    };
    // Two-tensor form: `max(a, b)` is `maximum(a, b)`.
    let other = match (dim, other) {
        (Some(d), None) if d.cast::<PyTensor>().is_ok() => Some(d),
        (None, o) => o,
        (Some(_), Some(_)) => {
            return Err(PyTypeError::new_err(format!(
                "{name}: give either a dim or another tensor, not both"
            )))
        }
        _ => None,
    };
    if let Some(o) = other {
        let r = binop(py, t, o, bin, false)?;
        return Ok(r.into_pyobject(py)?.into_any().unbind());
    }
    match dim {
        Some(d) if !d.is_none() => {
            let d: isize = d.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{name}: dim must be an int (use amax/amin to reduce over several dims)"
                ))
            })?;
            let (v, i) = run_heavy(py, t.numel(), || red::max_dim(op, t, d, keepdim))?;
            values_indices(py, name, PyTensor::new(v), PyTensor::new(i))
        }
        _ => {
            if keepdim {
                return Err(PyTypeError::new_err(format!(
                    "{name}: keepdim=True needs a dim"
                )));
            }
            let r = run_heavy(py, t.numel(), || red::max_all(op, t))?;
            Ok(PyTensor::new(r).into_pyobject(py)?.into_any().unbind())
        }
    }
}

/// Resolve var/std's `unbiased` / `correction` arguments to a correction.
fn correction_of(
    name: &str,
    unbiased: Option<bool>,
    correction: Option<&Bound<'_, PyAny>>,
) -> PyResult<f64> {
    let corr =
        match correction {
            Some(c) if !c.is_none() => Some(c.extract::<f64>().map_err(|_| {
                PyTypeError::new_err(format!("{name}: correction must be a number"))
            })?),
            _ => None,
        };
    match (unbiased, corr) {
        (Some(_), Some(_)) => Err(PyValueError::new_err(format!(
            "{name}: give either unbiased or correction, not both"
        ))),
        (Some(u), None) => Ok(if u { 1.0 } else { 0.0 }),
        (None, Some(c)) => Ok(c),
        (None, None) => Ok(1.0),
    }
}

#[allow(clippy::too_many_arguments)]
fn var_std(
    py: Python<'_>,
    t: &crate::tensor::Tensor,
    std: bool,
    dim: Option<&Bound<'_, PyAny>>,
    unbiased: Option<bool>,
    keepdim: bool,
    correction: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let name = if std { "std" } else { "var" };
    // `x.var(False)`: the legacy positional `unbiased` form.
    let (dim, unbiased) = match dim {
        Some(d) if d.is_instance_of::<PyBool>() => {
            if unbiased.is_some() {
                return Err(PyTypeError::new_err(format!(
                    "{name}: unbiased given twice"
                )));
            }
            (None, Some(d.extract::<bool>()?))
        }
        _ => (dim, unbiased),
    };
    let dims = parse_dims(name, dim)?;
    let c = correction_of(name, unbiased, correction)?;
    run_heavy(py, t.numel(), || {
        red::var(t, dims.as_deref(), c, keepdim, std)
    })
    .map(PyTensor::new)
}

#[pymethods]
impl PyTensor {
    /// Sum over `dim` (an int, a sequence of ints, or None for all dims).
    ///
    /// Bool and integer tensors sum to int64; `dtype` converts the input first.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn sum(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("sum", dim)?;
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::sum(t, dims.as_deref(), keepdim, dt)).map(PyTensor::new)
    }

    /// Mean over `dim`; needs a floating dtype (or `dtype=` a floating dtype).
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn mean(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("mean", dim)?;
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::mean(t, dims.as_deref(), keepdim, dt)).map(PyTensor::new)
    }

    /// Product over `dim`; bool and integer tensors give int64.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn prod(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("prod", dim)?;
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::prod(t, dims.as_deref(), keepdim, dt)).map(PyTensor::new)
    }

    /// Maximum. With no dim: a 0-d tensor. With an int `dim`: a named tuple
    /// `(values, indices)` (int64 indices of the first maximum; NaN counts as
    /// the maximum). With a tensor (`max(a, b)` or `other=`): elementwise maximum.
    #[pyo3(signature = (dim=None, keepdim=false, *, other=None))]
    fn max(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        other: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        max_min(py, &self.t, ArgOp::Max, dim, keepdim, other)
    }

    /// Minimum; see `max`.
    #[pyo3(signature = (dim=None, keepdim=false, *, other=None))]
    fn min(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        other: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        max_min(py, &self.t, ArgOp::Min, dim, keepdim, other)
    }

    /// Maximum over `dim` (int, sequence, or None/() for all dims); NaN propagates.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amax(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("amax", dim)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::amax_amin(ArgOp::Max, t, dims.as_deref(), keepdim)
        })
        .map(PyTensor::new)
    }

    /// Minimum over `dim`; see `amax`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amin(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("amin", dim)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::amax_amin(ArgOp::Min, t, dims.as_deref(), keepdim)
        })
        .map(PyTensor::new)
    }

    /// Index (int64) of the first maximum along `dim`, or in the flattened tensor when `dim` is None.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(&self, py: Python<'_>, dim: Option<isize>, keepdim: bool) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::argmax_argmin(ArgOp::Max, t, dim, keepdim)
        })
        .map(PyTensor::new)
    }

    /// Index (int64) of the first minimum; see `argmax`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(&self, py: Python<'_>, dim: Option<isize>, keepdim: bool) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::argmax_argmin(ArgOp::Min, t, dim, keepdim)
        })
        .map(PyTensor::new)
    }

    /// Variance over `dim` with `correction` (default 1; `unbiased=False` means 0).
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn var(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        unbiased: Option<bool>,
        keepdim: bool,
        correction: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        var_std(py, &self.t, false, dim, unbiased, keepdim, correction)
    }

    /// Standard deviation over `dim`; see `var`.
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn std(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        unbiased: Option<bool>,
        keepdim: bool,
        correction: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        var_std(py, &self.t, true, dim, unbiased, keepdim, correction)
    }

    /// `log(sum(exp(x)))` over `dim`, computed stably (shifted by the maximum).
    #[pyo3(signature = (dim, keepdim=false))]
    fn logsumexp(
        &self,
        py: Python<'_>,
        dim: &Bound<'_, PyAny>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("logsumexp", Some(dim))?;
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::logsumexp(t, dims.as_deref(), keepdim)
        })
        .map(PyTensor::new)
    }

    /// Whether all elements (along `dim`) are nonzero, as bool.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn all(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("all", dim)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::all_any(true, t, dims.as_deref(), keepdim)
        })
        .map(PyTensor::new)
    }

    /// Whether any element (along `dim`) is nonzero, as bool.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn any(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyResult<PyTensor> {
        let dims = parse_dims("any", dim)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            red::all_any(false, t, dims.as_deref(), keepdim)
        })
        .map(PyTensor::new)
    }

    /// `exp(x) / sum(exp(x))` along `dim`, computed stably; `dtype` converts the input first.
    #[pyo3(signature = (dim, dtype=None))]
    fn softmax(
        &self,
        py: Python<'_>,
        dim: isize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::softmax(t, dim, false, dt)).map(PyTensor::new)
    }

    /// `x - logsumexp(x)` along `dim`; `dtype` converts the input first.
    #[pyo3(signature = (dim, dtype=None))]
    fn log_softmax(
        &self,
        py: Python<'_>,
        dim: isize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::softmax(t, dim, true, dt)).map(PyTensor::new)
    }

    /// Cumulative sum along `dim`; bool and integers accumulate in int64.
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumsum(
        &self,
        py: Python<'_>,
        dim: isize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::cumulative(CumOp::Sum, t, dim, dt)).map(PyTensor::new)
    }

    /// Cumulative product along `dim`; bool and integers accumulate in int64.
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumprod(
        &self,
        py: Python<'_>,
        dim: isize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dt = parse_dtype_opt(dtype)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || red::cumulative(CumOp::Prod, t, dim, dt)).map(PyTensor::new)
    }
}

/// Module-level functions of the family (none beyond the re-exported methods yet).
pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
