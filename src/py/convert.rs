//! Conversions between Python/NumPy data and tensors.
//!
//! NumPy interop is zero-copy both ways through the array interface:
//! `from_numpy` wraps the array's memory as foreign storage (keeping the array
//! alive, honouring its read-only flag), and tensors expose
//! `__array_interface__` so `np.asarray(t)` / `t.numpy()` view their memory.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PySequence, PyTuple};

use super::{parse_device, parse_dtype_opt, run, PyTensor};
use crate::ops::elementwise::to_dtype;
use crate::tensor::layout::fmt_shape;
use crate::tensor::{Category, DType, Device, Element, Layout, Scalar, Storage, Tensor};
use crate::with_dtype;

fn numpy_typestr(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => return None,
    })
}

fn dtype_from_typestr(s: &str) -> Option<DType> {
    let s = s.trim_start_matches(['<', '|', '=']);
    Some(match s {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return None,
    })
}

/// Keeps a Python object alive from Rust storage.
struct PyOwner(#[allow(dead_code)] Py<PyAny>);

/// Wrap a NumPy array (or anything with `__array_interface__`) without copying.
pub fn from_array_interface(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let ai = obj.getattr("__array_interface__")?;
    let ai = ai.cast::<PyDict>()?;
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        ai.get_item(k)?
            .ok_or_else(|| PyValueError::new_err(format!("__array_interface__ lacks {k:?}")))
    };
    let typestr: String = get("typestr")?.extract()?;
    let dtype = dtype_from_typestr(&typestr).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "from_numpy: unsupported NumPy dtype {typestr:?}; supported: bool, int32, int64, float16, float32, float64"
        ))
    })?;
    if typestr.starts_with('>') {
        return Err(PyTypeError::new_err(
            "from_numpy: big-endian arrays are not supported",
        ));
    }
    let shape: Vec<usize> = get("shape")?.extract()?;
    let (addr, readonly): (usize, bool) = get("data")?.extract()?;
    let item = dtype.itemsize();
    let strides: Vec<isize> = match ai.get_item("strides")? {
        Some(s) if !s.is_none() => {
            let bs: Vec<isize> = s.extract()?;
            bs.iter()
                .map(|&b| {
                    if b % item as isize != 0 {
                        Err(PyValueError::new_err(format!(
                            "from_numpy: byte strides {bs:?} are not multiples of the itemsize {item}"
                        )))
                    } else {
                        Ok(b / item as isize)
                    }
                })
                .collect::<PyResult<_>>()?
        }
        _ => crate::tensor::layout::contiguous_strides(&shape).to_vec(),
    };
    let lay = Layout {
        shape: shape.as_slice().into(),
        strides: strides.as_slice().into(),
        offset: 0,
    };
    let (lo, hi) = lay.span();
    let nbytes = ((hi - lo).max(0) as usize) * item;
    let base = (addr as isize + lo * item as isize) as *mut u8;
    let lay = Layout {
        offset: (-lo) as usize,
        ..lay
    };
    if dtype == DType::Bool {
        // Kernels rely on bools being 0 or 1; an array reinterpreted as bool
        // (`u8_array.view(bool)`) may hold other bytes.
        // SAFETY: every element offset lies inside the array's span.
        if let Some(v) = unsafe { first_bad_bool(base, &lay) } {
            return Err(PyValueError::new_err(format!(
                "from_numpy: bool array holds the byte {v} (bools must be 0 or 1)"
            )));
        }
    }
    let owner = Box::new(PyOwner(obj.clone().unbind()));
    // SAFETY: the array owns [base, base+nbytes) and is kept alive by `owner`.
    let st = unsafe { Storage::from_foreign(base, nbytes, readonly, owner) };
    run(|| Tensor::from_parts(Arc::new(st), lay, dtype))
}

/// The first byte other than 0 or 1 among the elements of a bool layout whose
/// element `[0, ...]` sits at `base + offset`.
///
/// # Safety
/// Every element of `lay` must be readable memory.
unsafe fn first_bad_bool(base: *const u8, lay: &Layout) -> Option<u8> {
    let n: usize = lay.shape.iter().product();
    if n == 0 {
        return None;
    }
    let mut idx = vec![0usize; lay.shape.len()];
    for _ in 0..n {
        let off = lay.offset as isize
            + idx
                .iter()
                .zip(&lay.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        let v = *base.offset(off);
        if v > 1 {
            return Some(v);
        }
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < lay.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    None
}

fn is_numpy_array(obj: &Bound<'_, PyAny>) -> bool {
    obj.hasattr("__array_interface__").unwrap_or(false) && !obj.is_instance_of::<PyTensor>()
}

/// Walk nested sequences, collecting the shape and the flat values.
fn walk(
    obj: &Bound<'_, PyAny>,
    depth: usize,
    shape: &mut Vec<usize>,
    vals: &mut Vec<Scalar>,
) -> PyResult<()> {
    if let Some(s) = super::as_scalar(obj) {
        if depth != shape.len() {
            return Err(PyValueError::new_err(format!(
                "tensor: ragged nested sequence (a scalar at depth {depth}, expected a sequence of shape {})",
                fmt_shape(&shape[depth..])
            )));
        }
        vals.push(s);
        return Ok(());
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t_ref = t.borrow();
        let t = &t_ref.t;
        if t.ndim() == 0 {
            let s = run(|| t.item())?;
            vals.push(s);
            if depth != shape.len() {
                return Err(PyValueError::new_err("tensor: ragged nested sequence"));
            }
            return Ok(());
        }
    }
    if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>()
    {
        return Err(PyTypeError::new_err(format!(
            "tensor: cannot convert a string ({}) to a tensor element",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        )));
    }
    if depth > 64 {
        return Err(PyValueError::new_err(
            "tensor: nested sequence is too deep (more than 64 levels)",
        ));
    }
    // NumPy scalars and 0-d arrays.
    if obj.hasattr("item").unwrap_or(false)
        && obj.getattr("ndim").and_then(|n| n.extract::<usize>()).ok() == Some(0)
    {
        let v = obj.call_method0("item")?;
        return walk(&v, depth, shape, vals);
    }
    let seq = obj.cast::<PySequence>().map_err(|_| {
        PyTypeError::new_err(format!(
            "tensor: cannot convert an object of type {} to a tensor element",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let n = seq.len()?;
    if depth == shape.len() {
        if depth > 0 && !vals.is_empty() {
            return Err(PyValueError::new_err(format!(
                "tensor: ragged nested sequence (a sequence at depth {depth} where scalars were found)"
            )));
        }
        shape.push(n);
    } else if shape[depth] != n {
        return Err(PyValueError::new_err(format!(
            "tensor: ragged nested sequence: expected length {} at dim {depth} but got {n}",
            shape[depth]
        )));
    }
    for i in 0..n {
        walk(&seq.get_item(i)?, depth + 1, shape, vals)?;
    }
    Ok(())
}

fn fill_from_scalars(vals: &[Scalar], shape: &[usize], dtype: DType) -> crate::Result<Tensor> {
    if dtype.is_small_int() {
        // As PyTorch: a Python integer above the dtype's range is an error
        // (negative values wrap into uint8, as there).
        let (lo, hi) = dtype.int_range().expect("a small int has a range");
        let lo = if dtype == DType::U8 { i64::MIN } else { lo };
        if let Some(v) = vals.iter().find_map(|s| match s {
            Scalar::Int(v) if *v < lo || *v > hi => Some(*v),
            _ => None,
        }) {
            return Err(crate::Error::runtime(
                "tensor",
                format!("value {v} cannot be converted to type {dtype} without overflow"),
            ));
        }
    }
    let t = Tensor::empty(shape, dtype, Device::Cpu)?;
    with_dtype!(dtype, T => {
        let p = t.data_ptr::<T>();
        for (i, s) in vals.iter().enumerate() {
            // SAFETY: fresh contiguous storage of vals.len() elements.
            unsafe { *p.add(i) = s.to_elem::<T>() };
        }
    });
    Ok(t)
}

/// Build a tensor (always a copy) from Python data: nested sequences, scalars, arrays or tensors.
pub fn tensor_from_py(obj: &Bound<'_, PyAny>, dtype: Option<DType>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t = t.borrow().t.clone();
        let d = dtype.unwrap_or(t.dtype());
        return run(|| {
            let c = crate::ops::elementwise::clone(&t)?;
            to_dtype(&c, d)
        });
    }
    if is_numpy_array(obj) {
        let t = from_array_interface(obj)?;
        let d = dtype.unwrap_or(t.dtype());
        return run(|| {
            captured_constant(crate::graph::trace::suspended(|| {
                let c = crate::ops::elementwise::clone(&t)?;
                to_dtype(&c, d)
            })?)
        });
    }
    let mut shape = vec![];
    let mut vals = vec![];
    walk(obj, 0, &mut shape, &mut vals)?;
    let inferred = if vals.is_empty() {
        DType::default_float()
    } else {
        match vals.iter().map(|s| s.category()).max().unwrap() {
            Category::Bool => DType::Bool,
            Category::Int => DType::I64,
            Category::Float => DType::default_float(),
        }
    };
    let d = dtype.unwrap_or(inferred);
    if let Some(dt) = dtype {
        if !dt.is_floating_point() {
            for s in &vals {
                if let Scalar::Float(f) = s {
                    if !f.is_finite() {
                        return Err(PyValueError::new_err(format!(
                            "tensor: cannot convert {f} to integer dtype {dt}"
                        )));
                    }
                }
            }
        }
    }
    run(|| {
        captured_constant(crate::graph::trace::suspended(|| {
            fill_from_scalars(&vals, &shape, d)
        })?)
    })
}

/// Data converted from Python while a graph is captured is a constant of the graph.
fn captured_constant(t: Tensor) -> crate::Result<Tensor> {
    if crate::graph::trace::active() {
        crate::graph::trace::constant(&t)
    } else {
        Ok(t)
    }
}

/// `fg.tensor(data, dtype=None, device=None)`: a new tensor copying `data`.
#[pyfunction]
#[pyo3(signature = (data, dtype=None, device=None, requires_grad=false))]
fn tensor(
    data: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let d = parse_dtype_opt(dtype)?;
    let dev = parse_device(device)?;
    let t = tensor_from_py(data, d)?;
    let t = if dev != Device::Cpu {
        // An op, so that in a traced function the copy is captured (the data
        // itself is a constant of the graph, not a tensor with values).
        run(|| crate::ops::elementwise::to_device(&t, dev))?
    } else {
        t
    };
    if requires_grad {
        run(|| crate::autograd::set_requires_grad(&t, true))?;
    }
    Ok(PyTensor::new(t))
}

/// `fg.from_numpy(a)`: a tensor sharing memory with the NumPy array `a`.
#[pyfunction]
fn from_numpy(a: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    if !is_numpy_array(a) {
        return Err(PyTypeError::new_err(format!(
            "from_numpy: expected a NumPy array, got {}",
            a.get_type().name()?
        )));
    }
    Ok(PyTensor::new(from_array_interface(a)?))
}

/// Nested Python lists of a tensor's values.
pub fn to_list(py: Python<'_>, t: &Tensor) -> PyResult<Py<PyAny>> {
    fn rec<T: Element>(
        py: Python<'_>,
        t: &Tensor,
        p: *const T,
        dim: usize,
        cat: Category,
    ) -> PyResult<Py<PyAny>> {
        if dim == t.ndim() {
            // SAFETY: p points at an element of the tensor.
            let v = unsafe { *p };
            return Ok(match cat {
                Category::Float => PyFloat::new(py, v.to_f64()).into_any().unbind(),
                Category::Int => v.to_i64().into_pyobject(py)?.into_any().unbind(),
                Category::Bool => PyBool::new(py, v.to_i64() != 0)
                    .to_owned()
                    .into_any()
                    .unbind(),
            });
        }
        let items: Vec<Py<PyAny>> = (0..t.shape()[dim])
            .map(|i| {
                // SAFETY: i < shape[dim], stride from the layout.
                let q = unsafe { p.offset(i as isize * t.strides()[dim]) };
                rec(py, t, q, dim + 1, cat)
            })
            .collect::<PyResult<_>>()?;
        Ok(PyList::new(py, items)?.into_any().unbind())
    }
    let cat = t.dtype().category();
    with_dtype!(t.dtype(), T => rec::<T>(py, t, t.data_ptr::<T>(), 0, cat))
}

#[pymethods]
impl PyTensor {
    /// The NumPy array interface: lets `np.asarray(t)` view this tensor's memory.
    #[getter]
    fn __array_interface__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let t = &self.t;
        run(|| t.check_has_data("numpy"))?;
        if t.device() != Device::Cpu {
            return Err(PyTypeError::new_err(format!(
                "can't convert a {} tensor to NumPy directly; use .numpy() or .cpu() first",
                t.device()
            )));
        }
        let ts = numpy_typestr(t.dtype()).ok_or_else(|| {
            PyTypeError::new_err("bfloat16 has no NumPy dtype; convert with .float() first")
        })?;
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("typestr", ts)?;
        d.set_item("shape", PyTuple::new(py, t.shape())?)?;
        let item = t.dtype().itemsize() as isize;
        let bs: Vec<isize> = t.strides().iter().map(|s| s * item).collect();
        d.set_item("strides", PyTuple::new(py, bs)?)?;
        let addr = t.export_byte_ptr() as usize;
        d.set_item("data", (addr, t.storage().is_readonly()))?;
        Ok(d.into_any().unbind())
    }

    /// `np.asarray(t)` support; shares memory unless a copy or another dtype is requested.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__(
        slf: &Bound<'_, Self>,
        dtype: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let np = py.import("numpy")?;
        let arr = if slf.borrow().t.device() == Device::Cpu {
            np.call_method1("asarray", (slf,))?
        } else {
            np.call_method1("asarray", (Self::host(slf)?,))?
        };
        let arr = if copy == Some(true) {
            arr.call_method0("copy")?
        } else {
            arr
        };
        match dtype {
            Some(d) if !d.is_none() => Ok(arr.call_method1("astype", (d,))?.unbind()),
            _ => Ok(arr.unbind()),
        }
    }

    /// A NumPy array sharing this (CPU) tensor's memory; a GPU tensor is
    /// copied to the host first.
    fn numpy(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let np = slf.py().import("numpy")?;
        if slf.borrow().t.device() != Device::Cpu {
            run(|| slf.borrow().t.check_has_data("numpy"))?;
            return Ok(np.call_method1("asarray", (Self::host(slf)?,))?.unbind());
        }
        Ok(np.call_method1("asarray", (slf,))?.unbind())
    }

    /// The values as (nested) Python lists.
    fn tolist(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        run(|| self.t.check_has_data("tolist"))?;
        if self.t.device() != Device::Cpu {
            let h = super::detach(py, || {
                run(|| crate::backend::transfer(&self.t, Device::Cpu))
            })?;
            return to_list(py, &h);
        }
        to_list(py, &self.t)
    }

    /// The value of a one-element tensor as a Python number.
    fn item(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = if self.t.device() == Device::Cpu {
            run(|| self.t.item())?
        } else {
            // Waits for the device: other Python threads run meanwhile.
            super::detach(py, || run(|| self.t.item()))?
        };
        scalar_to_py(py, s)
    }
}

impl PyTensor {
    /// A CPU copy of a GPU tensor (no autograd), as a Python tensor.
    fn host<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTensor>> {
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        let h = super::detach(slf.py(), || {
            run(|| crate::backend::transfer(t, Device::Cpu))
        })?;
        Bound::new(slf.py(), PyTensor::new(h))
    }
}

pub fn scalar_to_py(py: Python<'_>, s: Scalar) -> PyResult<Py<PyAny>> {
    Ok(match s {
        Scalar::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Scalar::Int(i) => PyInt::new(py, i).into_any().unbind(),
        Scalar::Float(f) => PyFloat::new(py, f).into_any().unbind(),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tensor, m)?)?;
    m.add_function(wrap_pyfunction!(from_numpy, m)?)?;
    Ok(())
}
