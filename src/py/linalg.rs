//! Bindings for the linear-algebra and convolution families: `matmul` and
//! the `@` operator, `mm`/`bmm`/`mv`/`dot`/`outer`, `einsum`, `linear`,
//! convolutions and pooling.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use super::{as_tensor, run_heavy, PyTensor};
use crate::ops::conv::{self, Padding};
use crate::ops::linalg;
use crate::ops::loss;
use crate::ops::norm;
use crate::tensor::Tensor;

/// Rough multiply-add count of `a @ b` (decides whether to release the GIL).
fn mm_work(a: &Tensor, b: &Tensor) -> usize {
    let n = if b.ndim() >= 2 {
        b.shape()[b.ndim() - 1]
    } else {
        1
    };
    a.numel().max(b.numel()).saturating_mul(n.max(1))
}

fn binary_mm(
    py: Python<'_>,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    f: fn(&Tensor, &Tensor) -> crate::Result<Tensor>,
) -> PyResult<PyTensor> {
    let b = as_tensor(other)?;
    run_heavy(py, mm_work(a, &b), || f(a, &b)).map(PyTensor::new)
}

#[pymethods]
impl PyTensor {
    /// Matrix product with NumPy/PyTorch rules: 1-D operands are promoted to
    /// a row (left) or column (right) vector and the added dim is removed;
    /// batch dims broadcast; dtypes promote.
    fn matmul(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, other, linalg::matmul)
    }
    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, other, linalg::matmul)
    }
    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let a = as_tensor(other)?;
        let b = &self.t;
        run_heavy(py, mm_work(&a, b), || linalg::matmul(&a, b)).map(PyTensor::new)
    }
    /// Product of two 2-D matrices.
    fn mm(&self, py: Python<'_>, mat2: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, mat2, linalg::mm)
    }
    /// Batched product of two 3-D tensors with the same batch size.
    fn bmm(&self, py: Python<'_>, mat2: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, mat2, linalg::bmm)
    }
    /// Matrix-vector product.
    fn mv(&self, py: Python<'_>, vec: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, vec, linalg::mv)
    }
    /// Inner product of two 1-D tensors (a 0-d tensor).
    fn dot(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, other, linalg::dot)
    }
    /// Outer product of two 1-D tensors.
    fn outer(&self, py: Python<'_>, vec2: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binary_mm(py, &self.t, vec2, linalg::outer)
    }
}

/// Sum of products over the indices of an Einstein-notation equation, e.g.
/// `einsum("bij,bjk->bik", a, b)`. Operands may also be given as one list.
/// Supports implicit outputs, `...` broadcasting and repeated indices (diagonals).
#[pyfunction]
#[pyo3(signature = (equation, *operands))]
fn einsum(py: Python<'_>, equation: &str, operands: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
    let items: Vec<Bound<'_, PyAny>> = if operands.len() == 1
        && (operands.get_item(0)?.is_instance_of::<PyList>()
            || operands.get_item(0)?.is_instance_of::<PyTuple>())
    {
        operands.get_item(0)?.try_iter()?.collect::<PyResult<_>>()?
    } else {
        operands.iter().collect()
    };
    let ts: Vec<Tensor> = items.iter().map(as_tensor).collect::<PyResult<_>>()?;
    let work = ts
        .iter()
        .map(|t| t.numel())
        .fold(1usize, |a, n| a.saturating_mul(n.max(1)));
    run_heavy(py, work, || linalg::einsum(equation, &ts)).map(PyTensor::new)
}

/// `input @ weight.T + bias` (the bias is added in the product's pass).
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None))]
fn linear(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let x = as_tensor(input)?;
    let w = as_tensor(weight)?;
    let b = opt_tensor(bias)?;
    let work = x
        .numel()
        .saturating_mul(w.shape().first().copied().unwrap_or(1));
    run_heavy(py, work, || linalg::linear(&x, &w, b.as_ref())).map(PyTensor::new)
}

fn opt_tensor(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Tensor>> {
    match obj {
        Some(o) if !o.is_none() => as_tensor(o).map(Some),
        _ => Ok(None),
    }
}

/// An int or a tuple/list of ints, all non-negative.
fn ints_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let v: Vec<i64> = if let Ok(i) = obj.extract::<i64>() {
        vec![i]
    } else {
        obj.extract::<Vec<i64>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: {name} must be an int or a tuple of ints, got {}",
                obj.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?
    };
    v.iter()
        .map(|&i| {
            usize::try_from(i).map_err(|_| {
                PyValueError::new_err(format!("{op}: {name} must be non-negative, got {v:?}"))
            })
        })
        .collect()
}

fn padding_arg(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<Padding> {
    if let Ok(s) = obj.cast::<PyString>() {
        return match s.to_str()? {
            "same" => Ok(Padding::Same),
            "valid" => Ok(Padding::Valid),
            other => Err(PyValueError::new_err(format!(
                "{op}: padding must be 'same', 'valid', an int or a tuple of ints, got {other:?}"
            ))),
        };
    }
    Ok(Padding::Explicit(ints_arg(op, "padding", obj)?))
}

type ConvFn = fn(
    &Tensor,
    &Tensor,
    Option<&Tensor>,
    &[usize],
    &Padding,
    &[usize],
    usize,
) -> crate::Result<Tensor>;

#[allow(clippy::too_many_arguments)]
fn conv_call(
    py: Python<'_>,
    op: &str,
    f: ConvFn,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    stride: &Bound<'_, PyAny>,
    padding: &Bound<'_, PyAny>,
    dilation: &Bound<'_, PyAny>,
    groups: i64,
) -> PyResult<PyTensor> {
    let x = as_tensor(input)?;
    let w = as_tensor(weight)?;
    let b = opt_tensor(bias)?;
    let s = ints_arg(op, "stride", stride)?;
    let p = padding_arg(op, padding)?;
    let d = ints_arg(op, "dilation", dilation)?;
    let g = usize::try_from(groups).map_err(|_| {
        PyValueError::new_err(format!("{op}: groups must be positive, got {groups}"))
    })?;
    let work = x.numel().saturating_mul(w.numel().max(1));
    run_heavy(py, work, || f(&x, &w, b.as_ref(), &s, &p, &d, g)).map(PyTensor::new)
}

/// 2-D convolution (cross-correlation) over `(N, C, H, W)` or `(C, H, W)`
/// input with weight `(O, C/groups, kH, kW)`; `padding` may be an int, a
/// pair, `'same'` or `'valid'`.
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None, stride=None, padding=None, dilation=None, groups=1))]
#[allow(clippy::too_many_arguments)]
fn conv2d(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: i64,
) -> PyResult<PyTensor> {
    let one = 1i64.into_pyobject(py)?.into_any();
    let zero = 0i64.into_pyobject(py)?.into_any();
    conv_call(
        py,
        "conv2d",
        conv::conv2d,
        input,
        weight,
        bias,
        stride.unwrap_or(&one),
        padding.unwrap_or(&zero),
        dilation.unwrap_or(&one),
        groups,
    )
}

/// 1-D convolution over `(N, C, L)` or `(C, L)` input with weight `(O, C/groups, k)`.
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None, stride=None, padding=None, dilation=None, groups=1))]
#[allow(clippy::too_many_arguments)]
fn conv1d(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: i64,
) -> PyResult<PyTensor> {
    let one = 1i64.into_pyobject(py)?.into_any();
    let zero = 0i64.into_pyobject(py)?.into_any();
    conv_call(
        py,
        "conv1d",
        conv::conv1d,
        input,
        weight,
        bias,
        stride.unwrap_or(&one),
        padding.unwrap_or(&zero),
        dilation.unwrap_or(&one),
        groups,
    )
}

/// Optional per-dim ints (`None` → empty, meaning "default").
fn opt_ints(op: &str, name: &str, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<usize>> {
    match obj {
        Some(o) if !o.is_none() => {
            let v = ints_arg(op, name, o)?;
            if v.is_empty() {
                // torch treats an empty stride as "default"
                return Ok(vec![]);
            }
            Ok(v)
        }
        _ => Ok(vec![]),
    }
}

/// 2-D max pooling. `stride` defaults to `kernel_size`; padding counts as
/// -inf. With `return_indices=True` also returns the flat `h*W + w`
/// positions of the maxima in each input plane.
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride=None, padding=None, dilation=None, ceil_mode=false, return_indices=false))]
#[allow(clippy::too_many_arguments)]
fn max_pool2d(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    ceil_mode: bool,
    return_indices: bool,
) -> PyResult<Py<PyAny>> {
    let op = "max_pool2d";
    let x = as_tensor(input)?;
    let k = ints_arg(op, "kernel_size", kernel_size)?;
    let s = opt_ints(op, "stride", stride)?;
    let mut p = opt_ints(op, "padding", padding)?;
    if p.is_empty() {
        p = vec![0];
    }
    let mut d = opt_ints(op, "dilation", dilation)?;
    if d.is_empty() {
        d = vec![1];
    }
    let st = (!s.is_empty()).then_some(s.as_slice());
    let (y, idx) = run_heavy(py, x.numel(), || {
        conv::max_pool2d(&x, &k, st, &p, &d, ceil_mode, return_indices)
    })?;
    let y = Py::new(py, PyTensor::new(y))?.into_any();
    match idx {
        Some(i) => {
            let i = Py::new(py, PyTensor::new(i))?.into_any();
            Ok(PyTuple::new(py, [y, i])?.into_any().unbind())
        }
        None => Ok(y),
    }
}

/// 2-D average pooling (`count_include_pad=True` divides by the window size
/// including padding, as PyTorch's default).
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride=None, padding=None, ceil_mode=false, count_include_pad=true, divisor_override=None))]
#[allow(clippy::too_many_arguments)]
fn avg_pool2d(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> PyResult<PyTensor> {
    let op = "avg_pool2d";
    let x = as_tensor(input)?;
    let k = ints_arg(op, "kernel_size", kernel_size)?;
    let s = opt_ints(op, "stride", stride)?;
    let mut p = opt_ints(op, "padding", padding)?;
    if p.is_empty() {
        p = vec![0];
    }
    let div = match divisor_override {
        None => None,
        Some(d) if d > 0 => Some(d as usize),
        Some(d) => {
            return Err(PyValueError::new_err(format!(
                "{op}: divisor_override must be positive, got {d}"
            )))
        }
    };
    let st = (!s.is_empty()).then_some(s.as_slice());
    run_heavy(py, x.numel(), || {
        conv::avg_pool2d(&x, &k, st, &p, ceil_mode, count_include_pad, div)
    })
    .map(PyTensor::new)
}

/// 2-D adaptive average pooling to `output_size` (an int or a pair; `None`
/// in the pair keeps that input size).
#[pyfunction]
fn adaptive_avg_pool2d(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    output_size: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let op = "adaptive_avg_pool2d";
    let x = as_tensor(input)?;
    let sizes: Vec<Option<i64>> = if let Ok(i) = output_size.extract::<i64>() {
        vec![Some(i), Some(i)]
    } else {
        output_size.extract::<Vec<Option<i64>>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: output_size must be an int or a pair of ints/None"
            ))
        })?
    };
    if sizes.len() != 2 {
        return Err(PyValueError::new_err(format!(
            "{op}: output_size must have 2 elements, got {sizes:?}"
        )));
    }
    let mut os = [None; 2];
    for (i, s) in sizes.iter().enumerate() {
        os[i] = match s {
            None => None,
            Some(v) if *v >= 0 => Some(*v as usize),
            Some(v) => {
                return Err(PyValueError::new_err(format!(
                    "{op}: output_size must be non-negative, got {v}"
                )))
            }
        };
    }
    run_heavy(py, x.numel(), || conv::adaptive_avg_pool2d(&x, os)).map(PyTensor::new)
}

/// `normalized_shape`: an int or a tuple/list of ints.
fn norm_shape(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    ints_arg(op, "normalized_shape", obj)
}

/// Layer normalisation over the trailing `normalized_shape` dims:
/// `(x - mean) / sqrt(var + eps) * weight + bias` (biased variance), as one fused pass.
#[pyfunction]
#[pyo3(signature = (input, normalized_shape, weight=None, bias=None, eps=1e-5))]
fn layer_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    normalized_shape: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    bias: Option<&Bound<'_, PyAny>>,
    eps: f64,
) -> PyResult<PyTensor> {
    let x = as_tensor(input)?;
    let ns = norm_shape("layer_norm", normalized_shape)?;
    let w = opt_tensor(weight)?;
    let b = opt_tensor(bias)?;
    run_heavy(py, x.numel(), || {
        norm::layer_norm(&x, &ns, w.as_ref(), b.as_ref(), eps)
    })
    .map(PyTensor::new)
}

/// RMS normalisation over the trailing `normalized_shape` dims:
/// `x / sqrt(mean(x²) + eps) * weight`; `eps=None` uses the dtype's machine epsilon.
#[pyfunction]
#[pyo3(signature = (input, normalized_shape, weight=None, eps=None))]
fn rms_norm(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    normalized_shape: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    eps: Option<f64>,
) -> PyResult<PyTensor> {
    let x = as_tensor(input)?;
    let ns = norm_shape("rms_norm", normalized_shape)?;
    let w = opt_tensor(weight)?;
    run_heavy(py, x.numel(), || norm::rms_norm(&x, &ns, w.as_ref(), eps)).map(PyTensor::new)
}

/// Cross entropy of logits `input` (classes on dim 1, or dim 0 when 1-D)
/// against class indices `target`, with class `weight`s, `ignore_index`,
/// `label_smoothing` and a `'mean'`/`'sum'`/`'none'` reduction: log-softmax
/// and NLL fused in one pass, and a fused gradient.
#[pyfunction]
#[pyo3(signature = (input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0))]
fn cross_entropy(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    ignore_index: i64,
    reduction: &str,
    label_smoothing: f64,
) -> PyResult<PyTensor> {
    let x = as_tensor(input)?;
    let t = as_tensor(target)?;
    let w = opt_tensor(weight)?;
    let r = loss::Reduction::parse("cross_entropy", reduction).map_err(super::to_pyerr)?;
    run_heavy(py, x.numel(), || {
        loss::cross_entropy(&x, &t, w.as_ref(), ignore_index, r, label_smoothing)
    })
    .map(PyTensor::new)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(einsum, m)?)?;
    m.add_function(wrap_pyfunction!(linear, m)?)?;
    m.add_function(wrap_pyfunction!(conv1d, m)?)?;
    m.add_function(wrap_pyfunction!(conv2d, m)?)?;
    m.add_function(wrap_pyfunction!(max_pool2d, m)?)?;
    m.add_function(wrap_pyfunction!(avg_pool2d, m)?)?;
    m.add_function(wrap_pyfunction!(adaptive_avg_pool2d, m)?)?;
    Ok(())
}
