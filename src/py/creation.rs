//! Factory functions: `empty`, `zeros`, `ones`, `full`, `arange`, `linspace`, `eye` and `*_like`.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::{as_scalar, parse_device, parse_dtype_opt, run, shape_args, PyTensor};
use crate::ops::creation;
use crate::tensor::{DType, Device, Scalar, Tensor};

fn dt_dev(
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    default: DType,
) -> PyResult<(DType, Device)> {
    Ok((
        parse_dtype_opt(dtype)?.unwrap_or(default),
        parse_device(device)?,
    ))
}

/// Uninitialised tensor of the given shape.
#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None, requires_grad=false))]
fn empty(
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let s = shape_args("empty", shape)?;
    let (d, dev) = dt_dev(dtype, device, DType::default_float())?;
    run(|| creation::empty(&s, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// Tensor of zeros.
#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None, requires_grad=false))]
fn zeros(
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let s = shape_args("zeros", shape)?;
    let (d, dev) = dt_dev(dtype, device, DType::default_float())?;
    run(|| creation::zeros(&s, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// Tensor of ones.
#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None, requires_grad=false))]
fn ones(
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let s = shape_args("ones", shape)?;
    let (d, dev) = dt_dev(dtype, device, DType::default_float())?;
    run(|| creation::full(&s, Scalar::Int(1), d, dev)).and_then(|t| leaf(t, requires_grad))
}

fn fill_scalar(op: &str, v: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    as_scalar(v).ok_or_else(|| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{op}: fill value must be a bool, int or float, got {}",
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

/// Tensor filled with `fill_value`; dtype inferred from the value when not given.
#[pyfunction]
#[pyo3(signature = (size, fill_value, dtype=None, device=None, requires_grad=false))]
fn full(
    size: &Bound<'_, PyAny>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let s: Vec<usize> = if let Ok(n) = size.extract::<usize>() {
        vec![n]
    } else {
        size.extract()?
    };
    let v = fill_scalar("full", fill_value)?;
    let (d, dev) = dt_dev(dtype, device, v.default_dtype())?;
    run(|| creation::full(&s, v, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// `arange(end)`, `arange(start, end)`, `arange(start, end, step)`.
#[pyfunction]
#[pyo3(signature = (start, end=None, step=None, dtype=None, device=None, requires_grad=false))]
fn arange(
    start: &Bound<'_, PyAny>,
    end: Option<&Bound<'_, PyAny>>,
    step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let a = fill_scalar("arange", start)?;
    let (s, e) = match end {
        Some(e) if !e.is_none() => (a, fill_scalar("arange", e)?),
        _ => (Scalar::Int(0), a),
    };
    let st = match step {
        Some(x) if !x.is_none() => fill_scalar("arange", x)?,
        _ => Scalar::Int(1),
    };
    let d = parse_dtype_opt(dtype)?;
    let dev = parse_device(device)?;
    run(|| creation::arange(s, e, st, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// `steps` evenly spaced values from `start` to `end` inclusive.
#[pyfunction]
#[pyo3(signature = (start, end, steps, dtype=None, device=None, requires_grad=false))]
fn linspace(
    start: f64,
    end: f64,
    steps: usize,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (d, dev) = dt_dev(dtype, device, DType::default_float())?;
    run(|| creation::linspace(start, end, steps, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// Identity matrix (`n × m`, `m` defaults to `n`).
#[pyfunction]
#[pyo3(signature = (n, m=None, dtype=None, device=None, requires_grad=false))]
fn eye(
    n: usize,
    m: Option<usize>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (d, dev) = dt_dev(dtype, device, DType::default_float())?;
    run(|| creation::eye(n, m.unwrap_or(n), d, dev)).and_then(|t| leaf(t, requires_grad))
}

fn like(
    x: &PyTensor,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<usize>, DType, Device)> {
    let d = parse_dtype_opt(dtype)?.unwrap_or(x.t.dtype());
    let dev = match device {
        Some(v) if !v.is_none() => parse_device(Some(v))?,
        _ => x.t.device(),
    };
    Ok((x.t.shape().to_vec(), d, dev))
}

/// Zeros with the shape (and by default dtype/device) of `input`.
#[pyfunction]
#[pyo3(signature = (input, dtype=None, device=None, requires_grad=false))]
fn zeros_like(
    input: &PyTensor,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, d, dev) = like(input, dtype, device)?;
    run(|| creation::zeros(&s, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// Ones with the shape of `input`.
#[pyfunction]
#[pyo3(signature = (input, dtype=None, device=None, requires_grad=false))]
fn ones_like(
    input: &PyTensor,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, d, dev) = like(input, dtype, device)?;
    run(|| creation::full(&s, Scalar::Int(1), d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// Uninitialised tensor with the shape of `input`.
#[pyfunction]
#[pyo3(signature = (input, dtype=None, device=None, requires_grad=false))]
fn empty_like(
    input: &PyTensor,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, d, dev) = like(input, dtype, device)?;
    run(|| creation::empty(&s, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// `fill_value` with the shape of `input`.
#[pyfunction]
#[pyo3(signature = (input, fill_value, dtype=None, device=None, requires_grad=false))]
fn full_like(
    input: &PyTensor,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, d, dev) = like(input, dtype, device)?;
    let v = fill_scalar("full_like", fill_value)?;
    run(|| creation::full(&s, v, d, dev)).and_then(|t| leaf(t, requires_grad))
}

/// Wrap a new tensor, marking it as requiring grad when asked.
/// Wrap a fresh tensor, marking it a leaf that requires grad when asked.
pub(crate) fn leaf(t: Tensor, requires_grad: bool) -> PyResult<PyTensor> {
    if requires_grad {
        run(|| crate::autograd::set_requires_grad(&t, true))?;
    }
    Ok(PyTensor::new(t))
}

/// The default floating dtype: what float tensors are made in when no dtype is given.
#[pyfunction]
fn get_default_dtype() -> super::PyDType {
    super::PyDType {
        d: DType::default_float(),
    }
}

/// Make `d` (a floating dtype) the default floating dtype; returns the previous one.
#[pyfunction]
fn _set_default_dtype(d: &Bound<'_, PyAny>) -> PyResult<super::PyDType> {
    let d = super::parse_dtype(d)?;
    if !d.is_floating_point() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "set_default_dtype: only floating-point types are supported as the default type, got {d}"
        )));
    }
    Ok(super::PyDType {
        d: DType::set_default_float(d),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(get_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(_set_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(empty, m)?)?;
    m.add_function(wrap_pyfunction!(zeros, m)?)?;
    m.add_function(wrap_pyfunction!(ones, m)?)?;
    m.add_function(wrap_pyfunction!(full, m)?)?;
    m.add_function(wrap_pyfunction!(arange, m)?)?;
    m.add_function(wrap_pyfunction!(linspace, m)?)?;
    m.add_function(wrap_pyfunction!(eye, m)?)?;
    m.add_function(wrap_pyfunction!(zeros_like, m)?)?;
    m.add_function(wrap_pyfunction!(ones_like, m)?)?;
    m.add_function(wrap_pyfunction!(empty_like, m)?)?;
    m.add_function(wrap_pyfunction!(full_like, m)?)?;
    Ok(())
}
