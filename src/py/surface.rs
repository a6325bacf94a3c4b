//! The part of the PyTorch-shaped `Tensor` surface that needs no kernel of
//! its own: `.data` (read and rebind), the `new_*` factories, `is_cuda` /
//! `is_xpu`, `type()` and `__format__`.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::{as_scalar, parse_device, parse_dtype, parse_dtype_opt, run, shape_args, PyTensor};
use crate::ops::creation;
use crate::tensor::{DType, Device, Scalar, Tensor};

/// The class name `Tensor.type()` gives a dtype (`"Float"` for `"FloatTensor"`).
fn type_stem(d: DType) -> &'static str {
    match d {
        DType::Bool => "Bool",
        DType::U8 => "Byte",
        DType::I8 => "Char",
        DType::I16 => "Short",
        DType::I32 => "Int",
        DType::I64 => "Long",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::F32 => "Float",
        DType::F64 => "Double",
    }
}

/// `"ferrograd.FloatTensor"`, `"ferrograd.gpu.HalfTensor"`, ...
fn type_name(d: DType, dev: Device) -> String {
    let place = match dev {
        Device::Gpu(_) => "gpu.",
        _ => "",
    };
    format!("ferrograd.{place}{}Tensor", type_stem(d))
}

/// Parse a type string (`"ferrograd.DoubleTensor"`, `"torch.gpu.FloatTensor"`,
/// `"torch.LongTensor"`) into its dtype and device.
fn parse_type_name(s: &str) -> PyResult<(DType, Device)> {
    let bad = || {
        PyValueError::new_err(format!(
            "Tensor.type: invalid type {s:?}; expected a dtype or a name such as \
             'ferrograd.FloatTensor' or 'ferrograd.gpu.FloatTensor'"
        ))
    };
    let rest = s
        .strip_prefix("ferrograd.")
        .or_else(|| s.strip_prefix("torch."))
        .ok_or_else(bad)?;
    let (dev, rest) = if let Some(r) = rest.strip_prefix("gpu.") {
        (Device::Gpu(0), r)
    } else if let Some(r) = rest.strip_prefix("cuda.") {
        return Err(PyValueError::new_err(format!(
            "Tensor.type: {s:?} names a CUDA tensor type; ferrograd has no CUDA device \
             (its GPU device is WebGPU: 'ferrograd.gpu.{r}')"
        )));
    } else {
        (Device::Cpu, rest)
    };
    let stem = rest.strip_suffix("Tensor").ok_or_else(bad)?;
    let d = DType::ALL
        .into_iter()
        .find(|&d| type_stem(d) == stem)
        .ok_or_else(bad)?;
    Ok((d, dev))
}

/// A `size` argument given as one sequence (or one int), non-negative.
fn size_arg(op: &str, size: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let v: Vec<isize> = match size.extract::<isize>() {
        Ok(n) => vec![n],
        Err(_) => size.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: size must be a sequence of ints, got {}",
                size.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?,
    };
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyValueError::new_err(format!("{op}: negative dimension {d} in size {v:?}"))
            })
        })
        .collect()
}

impl PyTensor {
    /// The dtype and device a `new_*` factory uses: the given ones, else this tensor's.
    fn new_like(
        &self,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(DType, Device)> {
        let d = parse_dtype_opt(dtype)?.unwrap_or(self.t.dtype());
        let dev = match device {
            Some(v) if !v.is_none() => parse_device(Some(v))?,
            _ => self.t.device(),
        };
        Ok((d, dev))
    }
}

fn made(t: Tensor, requires_grad: bool) -> PyResult<PyTensor> {
    super::creation::leaf(t, requires_grad)
}

#[pymethods]
impl PyTensor {
    /// This tensor's data, without its autograd: a tensor sharing the same
    /// storage that does not require grad and records nothing (as
    /// `detach()`), so `p.data.add_(u)`, `p.data.copy_(w)` or
    /// `p.data.normal_()` change `p` in place without being recorded.
    ///
    /// Assigning `p.data = u` makes `p` view `u`'s storage, with `u`'s shape,
    /// dtype and device (they may all differ from `p`'s), while `p` stays
    /// the same Python object with its `requires_grad`, `.grad`, history and
    /// hooks. Backward passes recorded before the assignment keep the values
    /// they saved. Compiled functions that read `p` are captured again at
    /// their next call.
    #[getter]
    fn get_data(&self) -> PyTensor {
        PyTensor::new(self.t.detach())
    }

    #[setter]
    fn set_data(slf: &Bound<'_, Self>, value: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(value) = value else {
            return Err(PyTypeError::new_err(
                "Tensor.data: the data of a tensor cannot be deleted",
            ));
        };
        let src = match value.cast::<PyTensor>() {
            Ok(v) => v.borrow().t.clone(),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "Tensor.data: the new data must be a Tensor, got {}",
                    value.get_type().name()?
                )))
            }
        };
        let old = slf.borrow().t.clone();
        if crate::graph::trace::tracing()
            || old.device() == Device::Meta
            || src.device() == Device::Meta
        {
            return Err(super::TraceError::new_err(format!(
                "Tensor.data: assigning a tensor's data (shape {:?}, dtype {}) cannot be captured into a graph; \
                 write into it instead (`with fg.no_grad(): p.copy_(u)`), or assign outside the compiled function",
                old.shape(),
                old.dtype()
            )));
        }
        if let Some(m) = old.meta() {
            if m.is_view() {
                return Err(PyRuntimeError::new_err(format!(
                    "Tensor.data: cannot rebind the data of a view (shape {:?}) of a tensor that requires grad; \
                     assign the data of the tensor it views, or of a clone()",
                    old.shape()
                )));
            }
            if m.requires_grad() && !src.dtype().is_floating_point() {
                return Err(PyTypeError::new_err(format!(
                    "Tensor.data: a tensor that requires grad needs floating-point data, got dtype {} (shape {:?})",
                    src.dtype(),
                    src.shape()
                )));
            }
        }
        let new = old.with_data_of(&src);
        let mut me = slf.try_borrow_mut().map_err(|_| {
            PyRuntimeError::new_err(
                "Tensor.data: cannot rebind the data of a tensor while an operation on it is running",
            )
        })?;
        if !old.shares_storage(&src) {
            old.storage().mark_rebound();
        }
        me.t = new;
        Ok(())
    }

    /// A tensor of zeros of `size`, with this tensor's dtype and device unless given.
    #[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
    fn new_zeros(
        &self,
        size: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<PyTensor> {
        let s = shape_args("new_zeros", size)?;
        let (d, dev) = self.new_like(dtype, device)?;
        run(|| creation::zeros(&s, d, dev)).and_then(|t| made(t, requires_grad))
    }

    /// A tensor of ones of `size`, with this tensor's dtype and device unless given.
    #[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
    fn new_ones(
        &self,
        size: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<PyTensor> {
        let s = shape_args("new_ones", size)?;
        let (d, dev) = self.new_like(dtype, device)?;
        run(|| creation::full(&s, Scalar::Int(1), d, dev)).and_then(|t| made(t, requires_grad))
    }

    /// An uninitialised tensor of `size`, with this tensor's dtype and device unless given.
    #[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
    fn new_empty(
        &self,
        size: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<PyTensor> {
        let s = shape_args("new_empty", size)?;
        let (d, dev) = self.new_like(dtype, device)?;
        run(|| creation::empty(&s, d, dev)).and_then(|t| made(t, requires_grad))
    }

    /// A tensor of `size` filled with `fill_value`, with this tensor's dtype
    /// and device unless given.
    #[pyo3(signature = (size, fill_value, *, dtype=None, device=None, requires_grad=false))]
    fn new_full(
        &self,
        size: &Bound<'_, PyAny>,
        fill_value: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<PyTensor> {
        let s = size_arg("new_full", size)?;
        let v = as_scalar(fill_value).ok_or_else(|| {
            PyTypeError::new_err(format!(
                "new_full: fill_value must be a bool, int or float, got {}",
                fill_value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let (d, dev) = self.new_like(dtype, device)?;
        run(|| creation::full(&s, v, d, dev)).and_then(|t| made(t, requires_grad))
    }

    /// A new tensor copying `data` (nested lists, numbers, an array or a
    /// tensor), with this tensor's dtype and device unless given.
    #[pyo3(signature = (data, *, dtype=None, device=None, requires_grad=false))]
    fn new_tensor(
        &self,
        data: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<PyTensor> {
        let d = parse_dtype_opt(dtype)?.unwrap_or(self.t.dtype());
        let dev = match device {
            Some(v) if !v.is_none() => parse_device(Some(v))?,
            _ => crate::graph::trace::run_device(&self.t),
        };
        // A tensor's values are copied without its history, as from any other data.
        let t = {
            let _off = crate::autograd::GradMode::set(false);
            super::convert::tensor_from_py(data, Some(d))?
        };
        let t = if dev != Device::Cpu {
            run(|| crate::ops::elementwise::to_device(&t, dev))?
        } else {
            t
        };
        made(t, requires_grad)
    }

    /// Whether the tensor is on the GPU device (WebGPU, which `.cuda()` and
    /// `"cuda"` name); see `is_cpu` and `device`.
    #[getter]
    fn is_cuda(&self) -> bool {
        matches!(
            crate::graph::trace::run_device(&self.t),
            crate::tensor::Device::Gpu(_)
        )
    }

    /// False: ferrograd has no XPU device.
    #[getter]
    fn is_xpu(&self) -> bool {
        false
    }

    /// With no argument, the tensor's type name: `"ferrograd.FloatTensor"`
    /// (`Double`, `Half`, `BFloat16`, `Int`, `Long`, `Bool`), with `gpu.`
    /// after `ferrograd.` on the WebGPU device — PyTorch's
    /// `"torch.FloatTensor"` / `"torch.cuda.FloatTensor"`. With a dtype,
    /// the tensor converted to it (itself when it has it already); with a
    /// type name (`"ferrograd.DoubleTensor"`, or PyTorch's `"torch.…"`
    /// spelling), converted to its dtype and moved to its device.
    #[pyo3(signature = (dtype=None, non_blocking=false))]
    fn r#type(
        slf: &Bound<'_, Self>,
        dtype: Option<&Bound<'_, PyAny>>,
        non_blocking: bool,
    ) -> PyResult<Py<PyAny>> {
        let _ = non_blocking;
        let py = slf.py();
        let (d0, dev0) = {
            let g = slf.borrow();
            (g.t.dtype(), crate::graph::trace::run_device(&g.t))
        };
        let (d, dev) = match dtype {
            None => return Ok(PyString::new(py, &type_name(d0, dev0)).into_any().unbind()),
            Some(o) if o.is_none() => {
                return Ok(PyString::new(py, &type_name(d0, dev0)).into_any().unbind())
            }
            Some(o) => match o.cast::<PyString>() {
                Ok(s) => parse_type_name(s.to_str()?)?,
                Err(_) => (parse_dtype(o)?, dev0),
            },
        };
        let kw = PyDict::new(py);
        kw.set_item("dtype", super::PyDType { d })?;
        kw.set_item("device", super::PyDevice { d: dev })?;
        Ok(slf.call_method("to", (), Some(&kw))?.unbind())
    }

    /// `format(t, spec)` / f-strings: with an empty spec, `str(t)`; with a
    /// spec (`"+.2f"`), the value of a 0-d tensor formatted as a Python
    /// number. A spec on a tensor with dimensions raises `TypeError`.
    fn __format__(slf: &Bound<'_, Self>, spec: &str) -> PyResult<String> {
        if spec.is_empty() {
            return Ok(slf.str()?.to_string());
        }
        let (ndim, shape) = {
            let g = slf.borrow();
            (g.t.ndim(), g.t.shape().to_vec())
        };
        if ndim != 0 {
            return Err(PyTypeError::new_err(format!(
                "unsupported format string {spec:?} passed to Tensor.__format__: a format spec needs a 0-d tensor, \
                 got shape {shape:?} (format t.item() or the elements instead)"
            )));
        }
        let v = slf.call_method0("item")?;
        v.call_method1("__format__", (spec,))?.extract()
    }
}

/// The number of tensor data rebindings (`t.data = u`) so far; compiled
/// functions compare it with the count at capture time.
#[pyfunction]
fn _rebind_epoch() -> u64 {
    crate::tensor::storage::rebind_epoch()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_rebind_epoch, m)?)?;
    Ok(())
}
