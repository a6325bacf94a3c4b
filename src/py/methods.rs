//! Tensor methods and operators for the elementwise, view and indexing
//! families, and the module functions that share their registry entries.

use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};

use super::convert::scalar_to_py;
use super::{
    as_operand, as_scalar, as_tensor, parse_device, parse_dtype, run, run_heavy, varargs_ints,
    PyDType, PyDevice, PyTensor,
};
use crate::ops::elementwise::{self as ew, BinaryOp, Operand, UnaryOp};
use crate::ops::index::{self, IndexItem};
use crate::ops::shape;
use crate::tensor::{DType, Device, Scalar, Tensor};

/// `a <op> other` where `other` is a tensor, scalar or array-like.
pub fn binop(
    py: Python<'_>,
    a: &Tensor,
    other: &Bound<'_, PyAny>,
    op: BinaryOp,
    reflected: bool,
) -> PyResult<PyTensor> {
    if let Ok(b) = other.cast::<PyTensor>() {
        let b_ref = b.borrow();
        let b = &b_ref.t;
        let work = a.numel().max(b.numel());
        return run_heavy(py, work, || {
            if reflected {
                ew::binary(op, b, a)
            } else {
                ew::binary(op, a, b)
            }
        })
        .map(PyTensor::new);
    }
    match as_operand(other)? {
        Operand::S(s) => {
            run_heavy(py, a.numel(), || ew::binary_scalar(op, a, s, reflected)).map(PyTensor::new)
        }
        Operand::T(b) => {
            let work = a.numel().max(b.numel());
            run_heavy(py, work, || {
                if reflected {
                    ew::binary(op, &b, a)
                } else {
                    ew::binary(op, a, &b)
                }
            })
            .map(PyTensor::new)
        }
    }
}

/// In-place `a <op>= other`.
fn binop_(py: Python<'_>, a: &Tensor, other: &Bound<'_, PyAny>, op: BinaryOp) -> PyResult<()> {
    match as_operand(other)? {
        Operand::S(s) => run_heavy(py, a.numel(), || ew::binary_scalar_(op, a, s)),
        Operand::T(b) => run_heavy(py, a.numel(), || ew::binary_(op, a, &b)),
    }
}

fn un(py: Python<'_>, t: &Tensor, op: UnaryOp) -> PyResult<PyTensor> {
    run_heavy(py, t.numel(), || ew::unary(op, t)).map(PyTensor::new)
}

fn un_<'py>(slf: &Bound<'py, PyTensor>, op: UnaryOp) -> PyResult<Bound<'py, PyTensor>> {
    let t_ref = slf.borrow();
    let t = &t_ref.t;
    run_heavy(slf.py(), t.numel(), || ew::unary_(op, t))?;
    Ok(slf.clone())
}

// The plain unary methods (`x.exp()`, `x.exp_()`, ...), from the op table.
crate::kernel::unary::unary_ops!([py]);

fn clamp_op(min: Option<f64>, max: Option<f64>) -> PyResult<UnaryOp> {
    if min.is_none() && max.is_none() {
        return Err(PyValueError::new_err(
            "clamp: at least one of min or max must not be None",
        ));
    }
    Ok(UnaryOp::Clamp { min, max })
}

fn parse_gelu(approximate: &str) -> PyResult<UnaryOp> {
    match approximate {
        "none" => Ok(UnaryOp::Gelu),
        "tanh" => Ok(UnaryOp::GeluTanh),
        _ => Err(PyValueError::new_err(format!(
            "gelu: approximate must be 'none' or 'tanh', got {approximate:?}"
        ))),
    }
}

fn shape_tuple<'py>(py: Python<'py>, s: &[usize]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, s)
}

/// Normalise a Python slice against a dim of size `n` (as `slice.indices`).
fn slice_item(s: &Bound<'_, PySlice>) -> PyResult<IndexItem> {
    let get = |name: &str| -> PyResult<Option<isize>> {
        let v = s.getattr(name)?;
        if v.is_none() {
            Ok(None)
        } else {
            v.extract::<isize>()
                .map(Some)
                .map_err(|_| PyTypeError::new_err("slice indices must be integers or None"))
        }
    };
    let step = get("step")?.unwrap_or(1);
    if step == 0 {
        return Err(PyValueError::new_err("slice step cannot be zero"));
    }
    Ok(IndexItem::Slice {
        start: get("start")?,
        stop: get("stop")?,
        step,
    })
}

fn parse_index_item(obj: &Bound<'_, PyAny>) -> PyResult<IndexItem> {
    if obj.is_none() {
        return Ok(IndexItem::NewAxis);
    }
    if obj.is_instance_of::<PyEllipsis>() {
        return Ok(IndexItem::Ellipsis);
    }
    if let Ok(s) = obj.cast::<PySlice>() {
        return slice_item(s);
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(IndexItem::Tensor(t.borrow().t.clone()));
    }
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        let b: bool = obj.extract()?;
        return Ok(IndexItem::Tensor(run(|| {
            Tensor::from_vec(vec![b as u8], &[])
        })?));
    }
    if let Ok(i) = obj.extract::<isize>() {
        return Ok(IndexItem::Int(i));
    }
    if obj.hasattr("__index__")? {
        // Arrays have `__index__` too but only 0-d integer ones convert.
        if let Ok(i) = obj
            .call_method0("__index__")
            .and_then(|v| v.extract::<isize>())
        {
            return Ok(IndexItem::Int(i));
        }
    }
    // Lists and arrays become integer or boolean index tensors.
    match super::tensor_from_py(obj, None) {
        Ok(t) => {
            if t.dtype().is_floating_point() {
                if t.numel() == 0 {
                    return Ok(IndexItem::Tensor(run(|| ew::to_dtype(&t, DType::I64))?));
                }
                return Err(PyIndexError::new_err(format!(
                    "tensors used as indices must be long, int or bool tensors, got {}",
                    t.dtype()
                )));
            }
            Ok(IndexItem::Tensor(t))
        }
        Err(_) => Err(PyIndexError::new_err(format!(
            "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean tensors/lists are valid indices (got {})",
            obj.get_type().name()?
        ))),
    }
}

fn parse_index(key: &Bound<'_, PyAny>) -> PyResult<Vec<IndexItem>> {
    if let Ok(t) = key.cast::<PyTuple>() {
        return t.iter().map(|k| parse_index_item(&k)).collect();
    }
    Ok(vec![parse_index_item(key)?])
}

/// Parse `.to(...)`'s positional/keyword forms into (dtype, device).
fn parse_to(
    args: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Option<DType>, Option<Device>)> {
    let mut dt = None;
    let mut dev = None;
    for a in args.iter() {
        if let Ok(t) = a.cast::<PyTensor>() {
            dt = Some(t.borrow().t.dtype());
            dev = Some(crate::graph::trace::run_device(&t.borrow().t));
        } else if a.is_instance_of::<PyDType>() {
            dt = Some(parse_dtype(&a)?);
        } else if a.is_instance_of::<PyDevice>()
            || a.extract::<String>()
                .map(|s| super::parse_device_str(&s).is_ok())
                .unwrap_or(false)
        {
            dev = Some(parse_device(Some(&a))?);
        } else {
            dt = Some(parse_dtype(&a)?);
        }
    }
    if let Some(d) = dtype {
        if !d.is_none() {
            dt = Some(parse_dtype(d)?);
        }
    }
    if let Some(d) = device {
        if !d.is_none() {
            dev = Some(parse_device(Some(d))?);
        }
    }
    Ok((dt, dev))
}

#[pymethods]
impl PyTensor {
    /// NumPy defers binary operators with a tensor operand to the tensor.
    #[classattr]
    fn __array_priority__() -> f64 {
        1000.0
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        shape_tuple(py, self.t.shape())
    }
    /// `size()` → shape tuple; `size(dim)` → that dim's length.
    #[pyo3(signature = (dim=None))]
    fn size(&self, py: Python<'_>, dim: Option<isize>) -> PyResult<Py<PyAny>> {
        match dim {
            None => Ok(shape_tuple(py, self.t.shape())?.into_any().unbind()),
            Some(d) => {
                let d = run(|| crate::tensor::layout::norm_dim("size", d, self.t.ndim()))?;
                Ok(self
                    .t
                    .shape()
                    .get(d)
                    .copied()
                    .unwrap_or(1)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            }
        }
    }
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType { d: self.t.dtype() }
    }
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            d: crate::graph::trace::run_device(&self.t),
        }
    }
    /// Whether this tensor holds no data: a value being captured into a graph
    /// (its `device` then says where it will be when the graph runs).
    #[getter]
    fn is_meta(&self) -> bool {
        self.t.device() == Device::Meta
    }
    #[getter]
    fn is_cpu(&self) -> bool {
        crate::graph::trace::run_device(&self.t) == Device::Cpu
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.t.ndim()
    }
    /// Number of dimensions.
    fn dim(&self) -> usize {
        self.t.ndim()
    }
    /// Number of elements.
    fn numel(&self) -> usize {
        self.t.numel()
    }
    /// Strides in elements (all, or of one dim).
    #[pyo3(signature = (dim=None))]
    fn stride(&self, py: Python<'_>, dim: Option<isize>) -> PyResult<Py<PyAny>> {
        match dim {
            None => Ok(PyTuple::new(py, self.t.strides())?.into_any().unbind()),
            Some(d) => {
                let d = run(|| crate::tensor::layout::norm_dim("stride", d, self.t.ndim()))?;
                Ok(self.t.strides()[d].into_pyobject(py)?.into_any().unbind())
            }
        }
    }
    /// Offset of the first element in the storage, in elements.
    fn storage_offset(&self) -> usize {
        self.t.offset()
    }
    fn is_contiguous(&self) -> bool {
        self.t.is_contiguous()
    }
    fn is_floating_point(&self) -> bool {
        self.t.dtype().is_floating_point()
    }
    fn element_size(&self) -> usize {
        self.t.dtype().itemsize()
    }
    #[getter]
    fn itemsize(&self) -> usize {
        self.t.dtype().itemsize()
    }
    #[getter]
    fn nbytes(&self) -> usize {
        self.t.numel() * self.t.dtype().itemsize()
    }
    /// Address of the first element (CPU tensors only).
    fn data_ptr(&self) -> PyResult<usize> {
        if self.t.device() != Device::Cpu {
            return Err(PyRuntimeError::new_err(format!(
                "data_ptr: a tensor on {} has no host address; copy it with .cpu() first",
                self.t.device()
            )));
        }
        Ok(self.t.export_byte_ptr() as usize)
    }
    /// The storage version counter (bumped by in-place writes).
    #[getter]
    fn _version(&self) -> u64 {
        self.t.version()
    }
    /// True when both tensors view the same storage.
    fn _shares_storage(&self, other: &PyTensor) -> bool {
        self.t.shares_storage(&other.t)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let f = slf
            .py()
            .import("ferrograd._format")?
            .getattr("tensor_repr")?;
        f.call1((slf,))?.extract()
    }
    fn __str__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Self::__repr__(slf)
    }
    fn __hash__(slf: &Bound<'_, Self>) -> isize {
        slf.as_ptr() as isize
    }
    fn __len__(&self) -> PyResult<usize> {
        match self.t.shape().first() {
            Some(&n) => Ok(n),
            None => Err(PyTypeError::new_err("len() of a 0-d tensor")),
        }
    }
    fn __bool__(&self) -> PyResult<bool> {
        if self.t.numel() != 1 {
            return Err(PyRuntimeError::new_err(format!(
                "Boolean value of Tensor with {} values (shape {:?}) is ambiguous",
                self.t.numel(),
                self.t.shape()
            )));
        }
        Ok(run(|| self.t.item())?.to_f64() != 0.0)
    }
    fn __float__(&self) -> PyResult<f64> {
        Ok(run(|| self.t.item())?.to_f64())
    }
    fn __int__(&self) -> PyResult<i64> {
        Ok(run(|| self.t.item())?.to_i64())
    }
    fn __index__(&self) -> PyResult<i64> {
        if self.t.dtype().is_floating_point()
            || self.t.dtype() == DType::Bool
            || self.t.numel() != 1
        {
            return Err(PyTypeError::new_err(
                "only integer tensors of a single element can be converted to an index",
            ));
        }
        self.__int__()
    }

    // ----- arithmetic operators -----
    fn __add__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Add, false)
    }
    fn __radd__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Add, true)
    }
    fn __sub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Sub, false)
    }
    fn __rsub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Sub, true)
    }
    fn __mul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Mul, false)
    }
    fn __rmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Mul, true)
    }
    fn __truediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Div, false)
    }
    fn __rtruediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Div, true)
    }
    fn __floordiv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::FloorDiv, false)
    }
    fn __rfloordiv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::FloorDiv, true)
    }
    fn __mod__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Remainder, false)
    }
    fn __rmod__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Remainder, true)
    }
    fn __pow__(
        &self,
        py: Python<'_>,
        o: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Pow, false)
    }
    fn __rpow__(
        &self,
        py: Python<'_>,
        o: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::Pow, true)
    }
    fn __and__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::BitAnd, false)
    }
    fn __rand__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::BitAnd, true)
    }
    fn __or__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::BitOr, false)
    }
    fn __ror__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::BitOr, true)
    }
    fn __xor__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::BitXor, false)
    }
    fn __rxor__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, o, BinaryOp::BitXor, true)
    }
    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        un(py, &self.t, UnaryOp::Neg)
    }
    fn __pos__<'py>(slf: &Bound<'py, Self>) -> Bound<'py, Self> {
        slf.clone()
    }
    fn __abs__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        un(py, &self.t, UnaryOp::Abs)
    }
    fn __invert__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        un(py, &self.t, UnaryOp::BitwiseNot)
    }

    // ----- in-place operators -----
    fn __iadd__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::Add)?;
        Ok(())
    }
    fn __isub__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::Sub)?;
        Ok(())
    }
    fn __imul__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::Mul)?;
        Ok(())
    }
    fn __itruediv__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::Div)?;
        Ok(())
    }
    fn __ifloordiv__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::FloorDiv)?;
        Ok(())
    }
    fn __imod__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::Remainder)?;
        Ok(())
    }
    fn __ipow__(
        slf: &Bound<'_, Self>,
        o: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::Pow)?;
        Ok(())
    }
    fn __iand__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::BitAnd)?;
        Ok(())
    }
    fn __ior__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::BitOr)?;
        Ok(())
    }
    fn __ixor__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<()> {
        binop_(slf.py(), &slf.borrow().t, o, BinaryOp::BitXor)?;
        Ok(())
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        o: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let bop = match op {
            CompareOp::Eq => BinaryOp::Eq,
            CompareOp::Ne => BinaryOp::Ne,
            CompareOp::Lt => BinaryOp::Lt,
            CompareOp::Le => BinaryOp::Le,
            CompareOp::Gt => BinaryOp::Gt,
            CompareOp::Ge => BinaryOp::Ge,
        };
        let is_operand = o.is_instance_of::<PyTensor>()
            || as_scalar(o).is_some()
            || o.hasattr("__array_interface__")?
            || o.is_instance_of::<pyo3::types::PyList>()
            || o.is_instance_of::<PyTuple>();
        if !is_operand {
            return Ok(py.NotImplemented());
        }
        Ok(binop(py, &self.t, o, bop, false)?
            .into_pyobject(py)?
            .into_any()
            .unbind())
    }

    // ----- named binary methods -----
    /// `self + alpha * other`.
    #[pyo3(signature = (other, alpha=None))]
    fn add(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        alpha: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        match alpha {
            None => binop(py, &self.t, other, BinaryOp::Add, false),
            Some(a) => {
                let scaled = binop(py, &as_tensor(other)?, a, BinaryOp::Mul, false)?;
                run_heavy(py, self.t.numel(), || {
                    ew::binary(BinaryOp::Add, &self.t, &scaled.t)
                })
                .map(PyTensor::new)
            }
        }
    }
    /// `self - alpha * other`.
    #[pyo3(signature = (other, alpha=None))]
    fn sub(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        alpha: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        match alpha {
            None => binop(py, &self.t, other, BinaryOp::Sub, false),
            Some(a) => {
                let scaled = binop(py, &as_tensor(other)?, a, BinaryOp::Mul, false)?;
                run_heavy(py, self.t.numel(), || {
                    ew::binary(BinaryOp::Sub, &self.t, &scaled.t)
                })
                .map(PyTensor::new)
            }
        }
    }
    fn mul(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Mul, false)
    }
    /// True division; `rounding_mode="floor"` or `"trunc"` as in PyTorch.
    #[pyo3(signature = (other, rounding_mode=None))]
    fn div(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        rounding_mode: Option<&str>,
    ) -> PyResult<PyTensor> {
        match rounding_mode {
            None => binop(py, &self.t, other, BinaryOp::Div, false),
            Some("floor") => binop(py, &self.t, other, BinaryOp::FloorDiv, false),
            Some("trunc") => {
                if self.t.dtype().is_floating_point()
                    || other
                        .cast::<PyTensor>()
                        .map(|o| o.borrow().t.dtype().is_floating_point())
                        .unwrap_or(matches!(as_scalar(other), Some(Scalar::Float(_))))
                {
                    let q = binop(py, &self.t, other, BinaryOp::Div, false)?;
                    un(py, &q.t, UnaryOp::Trunc)
                } else {
                    Err(PyTypeError::new_err("div: rounding_mode='trunc' on integer tensors is not supported; use 'floor' or true division"))
                }
            }
            Some(m) => Err(PyValueError::new_err(format!(
                "div: rounding_mode must be None, 'floor' or 'trunc', got {m:?}"
            ))),
        }
    }
    fn floor_divide(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::FloorDiv, false)
    }
    fn remainder(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Remainder, false)
    }
    fn pow(&self, py: Python<'_>, exponent: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, exponent, BinaryOp::Pow, false)
    }
    fn maximum(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Maximum, false)
    }
    fn minimum(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Minimum, false)
    }
    fn atan2(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Atan2, false)
    }
    fn eq(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Eq, false)
    }
    fn ne(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Ne, false)
    }
    fn lt(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Lt, false)
    }
    fn le(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Le, false)
    }
    fn gt(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Gt, false)
    }
    fn ge(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::Ge, false)
    }
    fn logical_and(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::LogicalAnd, false)
    }
    fn logical_or(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::LogicalOr, false)
    }
    fn logical_xor(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::LogicalXor, false)
    }
    fn bitwise_and(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::BitAnd, false)
    }
    fn bitwise_or(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::BitOr, false)
    }
    fn bitwise_xor(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop(py, &self.t, other, BinaryOp::BitXor, false)
    }
    #[pyo3(signature = (other, alpha=None))]
    fn add_<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        alpha: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Self>> {
        let py = slf.py();
        match alpha {
            None => binop_(py, &slf.borrow().t, other, BinaryOp::Add)?,
            Some(a) => {
                let scaled = binop(py, &as_tensor(other)?, a, BinaryOp::Mul, false)?;
                run(|| ew::binary_(BinaryOp::Add, &slf.borrow().t, &scaled.t))?
            }
        }
        Ok(slf.clone())
    }
    fn sub_<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        binop_(slf.py(), &slf.borrow().t, other, BinaryOp::Sub)?;
        Ok(slf.clone())
    }
    fn mul_<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        binop_(slf.py(), &slf.borrow().t, other, BinaryOp::Mul)?;
        Ok(slf.clone())
    }
    fn div_<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        binop_(slf.py(), &slf.borrow().t, other, BinaryOp::Div)?;
        Ok(slf.clone())
    }
    fn pow_<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        binop_(slf.py(), &slf.borrow().t, other, BinaryOp::Pow)?;
        Ok(slf.clone())
    }

    // ----- parameterised unary ops -----
    /// Clamp into `[min, max]` (either may be None; tensor bounds broadcast).
    #[pyo3(signature = (min=None, max=None))]
    fn clamp(
        &self,
        py: Python<'_>,
        min: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let min = min.filter(|m| !m.is_none());
        let max = max.filter(|m| !m.is_none());
        let is_t = |o: Option<&Bound<'_, PyAny>>| o.is_some_and(|o| as_scalar(o).is_none());
        if is_t(min) || is_t(max) {
            let lo = min.map(as_tensor).transpose()?;
            let hi = max.map(as_tensor).transpose()?;
            return run(|| ew::clamp_tensor(&self.t, lo.as_ref(), hi.as_ref())).map(PyTensor::new);
        }
        let lo = min.map(|m| m.extract::<f64>()).transpose()?;
        let hi = max.map(|m| m.extract::<f64>()).transpose()?;
        let float_bound = [min, max]
            .iter()
            .flatten()
            .any(|b| matches!(as_scalar(b), Some(Scalar::Float(_))));
        if float_bound && !self.t.dtype().is_floating_point() {
            let x = run(|| ew::to_dtype(&self.t, DType::F32))?;
            return un(py, &x, clamp_op(lo, hi)?);
        }
        un(py, &self.t, clamp_op(lo, hi)?)
    }
    /// In-place clamp with scalar bounds.
    #[pyo3(signature = (min=None, max=None))]
    fn clamp_<'py>(
        slf: &Bound<'py, Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> PyResult<Bound<'py, Self>> {
        un_(slf, clamp_op(min, max)?)
    }
    /// Alias of `clamp`.
    #[pyo3(signature = (min=None, max=None))]
    fn clip(
        &self,
        py: Python<'_>,
        min: Option<&Bound<'_, PyAny>>,
        max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        self.clamp(py, min, max)
    }
    /// `max(x, 0) + negative_slope * min(x, 0)`.
    #[pyo3(signature = (negative_slope=0.01))]
    fn leaky_relu(&self, py: Python<'_>, negative_slope: f64) -> PyResult<PyTensor> {
        un(py, &self.t, UnaryOp::LeakyRelu(negative_slope))
    }
    /// ELU: `x` for x > 0, else `alpha * (exp(x) - 1)`.
    #[pyo3(signature = (alpha=1.0))]
    fn elu(&self, py: Python<'_>, alpha: f64) -> PyResult<PyTensor> {
        un(py, &self.t, UnaryOp::Elu(alpha))
    }
    /// GELU, exact (`approximate="none"`) or the tanh approximation.
    #[pyo3(signature = (approximate="none"))]
    fn gelu(&self, py: Python<'_>, approximate: &str) -> PyResult<PyTensor> {
        un(py, &self.t, parse_gelu(approximate)?)
    }
    /// `log(1 + exp(beta * x)) / beta`, linear above `threshold`.
    #[pyo3(signature = (beta=1.0, threshold=20.0))]
    fn softplus(&self, py: Python<'_>, beta: f64, threshold: f64) -> PyResult<PyTensor> {
        un(py, &self.t, UnaryOp::Softplus { beta, threshold })
    }

    /// `where(cond, self, other)` as a method: `self.where(cond, other)`.
    #[pyo3(name = "where")]
    fn where_m(
        &self,
        condition: &Bound<'_, PyAny>,
        other: &Bound<'_, PyAny>,
    ) -> PyResult<PyTensor> {
        let c = as_tensor(condition)?;
        let o = as_operand(other)?;
        run(|| ew::where_scalar(&c, Operand::T(self.t.clone()), o)).map(PyTensor::new)
    }
    /// Fill positions where `mask` is true with `value`.
    fn masked_fill(&self, mask: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let m = as_tensor(mask)?;
        let v = match as_scalar(value) {
            Some(s) => s,
            None => run(|| {
                as_tensor(value)
                    .map_err(|_| {
                        crate::Error::dtype(
                            "masked_fill",
                            "value must be a number or a one-element tensor",
                        )
                    })
                    .and_then(|t| t.item())
            })?,
        };
        run(|| ew::masked_fill(&self.t, &m, v)).map(PyTensor::new)
    }
    fn masked_fill_<'py>(
        slf: &Bound<'py, Self>,
        mask: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        let r = slf.borrow().masked_fill(mask, value)?;
        run(|| ew::copy_(&slf.borrow().t, &r.t))?;
        Ok(slf.clone())
    }
    /// Fill with a value, in place: a number (refused when it overflows the dtype) or, as in
    /// PyTorch, a 0-d tensor (converted as `copy_` converts, differentiable in the value).
    fn fill_<'py>(slf: &Bound<'py, Self>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        // NumPy integer scalars are numbers too (their `__index__`), checked for overflow.
        let number = as_scalar(value).or_else(|| {
            (!value.is_instance_of::<PyTensor>())
                .then(|| value.call_method0("__index__").ok()?.extract::<i64>().ok())
                .flatten()
                .map(Scalar::Int)
        });
        if let Some(v) = number {
            run(|| ew::fill_(&slf.borrow().t, v))?;
            return Ok(slf.clone());
        }
        let src = value
            .cast::<PyTensor>()
            .map(|t| t.borrow().t.clone())
            .map_err(|_| PyTypeError::new_err("fill_: value must be a number or a 0-dim tensor"))?;
        if src.ndim() != 0 {
            // A RuntimeError with PyTorch's words, as PyTorch raises.
            return run(|| -> crate::Result<()> {
                Err(crate::Error::runtime(
                    "fill_",
                    format!(
                        "only supports 0-dimension value tensor but got tensor with {} dimensions (shape {:?}, {})",
                        src.ndim(),
                        src.shape(),
                        src.dtype().name()
                    ),
                ))
            })
            .map(|_| slf.clone());
        }
        let dst_ref = slf.borrow();
        run(|| ew::copy_(&dst_ref.t, &src))?;
        drop(dst_ref);
        Ok(slf.clone())
    }
    /// Fill with zeros, in place.
    fn zero_<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        run(|| ew::fill_(&slf.borrow().t, Scalar::Int(0)))?;
        Ok(slf.clone())
    }
    /// Copy `src` (broadcast, converted) into this tensor, in place.
    fn copy_<'py>(slf: &Bound<'py, Self>, src: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let s = as_tensor(src)?;
        let dst_ref = slf.borrow();
        let dst = &dst_ref.t;
        run_heavy(slf.py(), s.numel(), || ew::copy_(dst, &s))?;
        Ok(slf.clone())
    }

    // ----- dtype / device conversion -----
    /// Convert dtype and/or device: `to(dtype)`, `to("cpu")`, `to(other)`, `to(device, dtype)`.
    /// `non_blocking` is accepted and changes nothing: a move to the GPU is
    /// queued anyway, and a move to the CPU waits for the value, as it must.
    #[pyo3(signature = (*args, dtype=None, device=None, copy=false, non_blocking=false))]
    fn to(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        copy: bool,
        non_blocking: bool,
    ) -> PyResult<Py<PyTensor>> {
        let _ = non_blocking;
        let (dt, dev) = parse_to(args, dtype, device)?;
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        if let Some(target) = dev.filter(|&d| d != crate::graph::trace::run_device(t)) {
            // Convert on the CPU side of the move (the GPU lacks some dtypes).
            let d = dt.unwrap_or(t.dtype());
            let r = run_heavy(slf.py(), t.numel(), || {
                if target == Device::Cpu {
                    ew::to_dtype(&ew::to_device(t, target)?, d)
                } else {
                    ew::to_device(&ew::to_dtype(t, d)?, target)
                }
            })?;
            return Py::new(slf.py(), PyTensor::new(r));
        }
        let d = dt.unwrap_or(t.dtype());
        if d == t.dtype() && !copy {
            return Ok(slf.clone().unbind());
        }
        let r = run_heavy(slf.py(), t.numel(), || {
            if d == t.dtype() {
                ew::clone(t)
            } else {
                ew::to_dtype(t, d)
            }
        })?;
        Py::new(slf.py(), PyTensor::new(r))
    }
    /// This tensor on the CPU (itself when already there).
    fn cpu(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        if crate::graph::trace::run_device(t) == Device::Cpu {
            return Ok(slf.clone().unbind());
        }
        let r = run_heavy(slf.py(), t.numel(), || ew::to_device(t, Device::Cpu))?;
        Py::new(slf.py(), PyTensor::new(r))
    }
    /// This tensor on the WebGPU device (itself when already there).
    fn gpu(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        if matches!(crate::graph::trace::run_device(t), Device::Gpu(_)) {
            return Ok(slf.clone().unbind());
        }
        let r = run_heavy(slf.py(), t.numel(), || ew::to_device(t, Device::Gpu(0)))?;
        Py::new(slf.py(), PyTensor::new(r))
    }
    fn float(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::F32)
    }
    fn double(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::F64)
    }
    fn half(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::F16)
    }
    fn bfloat16(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::BF16)
    }
    fn int(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::I32)
    }
    fn long(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::I64)
    }
    /// Convert to uint8.
    fn byte(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::U8)
    }
    /// Convert to int8.
    fn char(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::I8)
    }
    /// Convert to int16.
    fn short(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::I16)
    }
    fn bool(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        cast(slf, DType::Bool)
    }
    /// Convert to the dtype of `other`.
    fn type_as(slf: &Bound<'_, Self>, other: &PyTensor) -> PyResult<Py<PyTensor>> {
        cast(slf, other.t.dtype())
    }
    /// A contiguous copy.
    fn clone(&self, py: Python<'_>) -> PyResult<PyTensor> {
        run_heavy(py, self.t.numel(), || ew::clone(&self.t)).map(PyTensor::new)
    }
    /// Itself when contiguous, else a contiguous copy.
    fn contiguous(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        if slf.borrow().t.is_contiguous() {
            return Ok(slf.clone().unbind());
        }
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        let r = run_heavy(slf.py(), t.numel(), || ew::clone(t))?;
        Py::new(slf.py(), PyTensor::new(r))
    }

    // ----- views -----
    /// A view with a new shape (one dim may be -1); errors if a copy would be needed.
    #[pyo3(signature = (*shape))]
    fn view(&self, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        if shape.len() == 1 {
            if let Ok(d) = parse_dtype(&shape.get_item(0)?) {
                if shape.get_item(0)?.extract::<isize>().is_err() {
                    return Err(PyTypeError::new_err(format!(
                        "view(dtype={d}) reinterpretation is not supported; use .to(dtype)"
                    )));
                }
            }
        }
        let s = varargs_ints(shape)?;
        run(|| shape::view(&self.t, &s)).map(PyTensor::new)
    }
    /// A tensor with a new shape: a view when possible, else a copy.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = varargs_ints(shape)?;
        run(|| shape::reshape(&self.t, &s)).map(PyTensor::new)
    }
    fn view_as(&self, other: &PyTensor) -> PyResult<PyTensor> {
        let s: Vec<isize> = other.t.shape().iter().map(|&d| d as isize).collect();
        run(|| shape::view(&self.t, &s)).map(PyTensor::new)
    }
    fn reshape_as(&self, other: &PyTensor) -> PyResult<PyTensor> {
        let s: Vec<isize> = other.t.shape().iter().map(|&d| d as isize).collect();
        run(|| shape::reshape(&self.t, &s)).map(PyTensor::new)
    }
    /// Reorder dims.
    #[pyo3(signature = (*dims))]
    fn permute(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let d = varargs_ints(dims)?;
        run(|| shape::permute(&self.t, &d)).map(PyTensor::new)
    }
    /// Swap two dims.
    fn transpose(&self, dim0: isize, dim1: isize) -> PyResult<PyTensor> {
        run(|| shape::transpose(&self.t, dim0, dim1)).map(PyTensor::new)
    }
    /// Alias of `transpose`.
    fn swapaxes(&self, axis0: isize, axis1: isize) -> PyResult<PyTensor> {
        self.transpose(axis0, axis1)
    }
    /// Transpose of a ≤2-D tensor.
    fn t(&self) -> PyResult<PyTensor> {
        if self.t.ndim() > 2 {
            return Err(PyValueError::new_err(format!(
                "t() expects a tensor with <= 2 dimensions, but self is {}D (shape {:?})",
                self.t.ndim(),
                self.t.shape()
            )));
        }
        run(|| shape::t_all(&self.t)).map(PyTensor::new)
    }
    /// All dims reversed.
    #[getter(T)]
    fn t_prop(&self) -> PyResult<PyTensor> {
        run(|| shape::t_all(&self.t)).map(PyTensor::new)
    }
    /// The last two dims swapped.
    #[getter(mT)]
    fn mt_prop(&self) -> PyResult<PyTensor> {
        run(|| shape::mt(&self.t)).map(PyTensor::new)
    }
    /// Remove size-1 dims (all, or the given one(s)).
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let dims: Option<Vec<isize>> = match dim {
            None => None,
            Some(d) if d.is_none() => None,
            Some(d) => Some(if let Ok(i) = d.extract::<isize>() {
                vec![i]
            } else {
                d.extract()?
            }),
        };
        run(|| shape::squeeze(&self.t, dims.as_deref())).map(PyTensor::new)
    }
    /// Insert a size-1 dim.
    fn unsqueeze(&self, dim: isize) -> PyResult<PyTensor> {
        run(|| shape::unsqueeze(&self.t, dim)).map(PyTensor::new)
    }
    /// Broadcast view to a larger shape (-1 keeps a dim).
    #[pyo3(signature = (*sizes))]
    fn expand(&self, sizes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = varargs_ints(sizes)?;
        run(|| shape::expand(&self.t, &s)).map(PyTensor::new)
    }
    fn expand_as(&self, other: &PyTensor) -> PyResult<PyTensor> {
        run(|| shape::broadcast_to(&self.t, other.t.shape())).map(PyTensor::new)
    }
    fn broadcast_to(&self, shape: Vec<usize>) -> PyResult<PyTensor> {
        run(|| shape::broadcast_to(&self.t, &shape)).map(PyTensor::new)
    }
    /// Merge dims `start_dim..=end_dim` into one.
    #[pyo3(signature = (start_dim=0, end_dim=-1))]
    fn flatten(&self, start_dim: isize, end_dim: isize) -> PyResult<PyTensor> {
        run(|| shape::flatten(&self.t, start_dim, end_dim)).map(PyTensor::new)
    }
    /// Flatten to 1-D.
    fn ravel(&self) -> PyResult<PyTensor> {
        run(|| shape::reshape(&self.t, &[-1])).map(PyTensor::new)
    }
    /// `length` elements of `dim` from `start` (a view).
    fn narrow(&self, dim: isize, start: isize, length: usize) -> PyResult<PyTensor> {
        run(|| shape::narrow(&self.t, dim, start, length)).map(PyTensor::new)
    }
    /// Index `index` of `dim`, removing the dim (a view).
    fn select(&self, dim: isize, index: isize) -> PyResult<PyTensor> {
        run(|| shape::select(&self.t, dim, index)).map(PyTensor::new)
    }
    /// Reverse the order of elements along `dims` (a view, like NumPy's `flip`).
    #[pyo3(signature = (*dims))]
    fn flip(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let d = varargs_ints(dims)?;
        run(|| shape::flip(&self.t, &d)).map(PyTensor::new)
    }
    /// A raw strided view of this tensor's storage (bounds-checked).
    #[pyo3(signature = (size, stride, storage_offset=None))]
    fn as_strided(
        &self,
        size: Vec<usize>,
        stride: Vec<isize>,
        storage_offset: Option<usize>,
    ) -> PyResult<PyTensor> {
        run(|| {
            shape::as_strided(
                &self.t,
                &size,
                &stride,
                storage_offset.unwrap_or(self.t.offset()),
            )
        })
        .map(PyTensor::new)
    }

    // ----- indexing -----
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        if let Ok(i) = key.extract::<isize>() {
            if !key.is_instance_of::<pyo3::types::PyBool>() {
                return run(|| shape::select(&self.t, 0, i)).map(PyTensor::new);
            }
        }
        let items = parse_index(key)?;
        run_heavy(py, self.t.numel(), || index::index(&self.t, &items)).map(PyTensor::new)
    }
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let items = parse_index(key)?;
        let v = match as_scalar(value) {
            Some(s) => {
                if s.category() > self.t.dtype().category() {
                    return Err(PyTypeError::new_err(format!(
                        "__setitem__: cannot assign {s:?} to a {} tensor",
                        self.t.dtype()
                    )));
                }
                run(|| ew::scalar_tensor(s, self.t.dtype(), self.t.device()))?
            }
            None => as_tensor(value)?,
        };
        run_heavy(py, self.t.numel(), || {
            index::index_put_(&self.t, &items, &v)
        })
    }
}

fn cast(slf: &Bound<'_, PyTensor>, d: DType) -> PyResult<Py<PyTensor>> {
    let t_ref = slf.borrow();
    let t = &t_ref.t;
    if t.dtype() == d {
        return Ok(slf.clone().unbind());
    }
    let r = run_heavy(slf.py(), t.numel(), || ew::to_dtype(t, d))?;
    Py::new(slf.py(), PyTensor::new(r))
}

/// `where(condition, input, other)`; with one argument, the indices of true elements.
#[pyfunction]
#[pyo3(name = "where", signature = (condition, input=None, other=None))]
fn where_fn(
    py: Python<'_>,
    condition: &Bound<'_, PyAny>,
    input: Option<&Bound<'_, PyAny>>,
    other: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let c = as_tensor(condition)?;
    match (input, other) {
        (Some(a), Some(b)) => {
            let a = as_operand(a)?;
            let b = as_operand(b)?;
            let r = run_heavy(py, c.numel(), || ew::where_scalar(&c, a, b))?;
            Ok(PyTensor::new(r).into_pyobject(py)?.into_any().unbind())
        }
        (None, None) => {
            let idx = run(|| index::nonzero(&c))?;
            let cols: Vec<PyTensor> = (0..idx.shape()[1])
                .map(|j| run(|| shape::select(&idx, 1, j as isize)).map(PyTensor::new))
                .collect::<PyResult<_>>()?;
            Ok(PyTuple::new(py, cols)?.into_any().unbind())
        }
        _ => Err(PyTypeError::new_err(
            "where: expected where(condition) or where(condition, input, other)",
        )),
    }
}

/// Elementwise clamp as a function.
#[pyfunction]
#[pyo3(signature = (input, min=None, max=None))]
fn clamp(
    py: Python<'_>,
    input: &PyTensor,
    min: Option<&Bound<'_, PyAny>>,
    max: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    input.clamp(py, min, max)
}

/// The value of a one-element tensor (module form).
#[pyfunction]
fn _scalar(py: Python<'_>, t: &PyTensor) -> PyResult<Py<PyAny>> {
    scalar_to_py(py, run(|| t.t.item())?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(where_fn, m)?)?;
    m.add_function(wrap_pyfunction!(clamp, m)?)?;
    m.add_function(wrap_pyfunction!(_scalar, m)?)?;
    Ok(())
}
