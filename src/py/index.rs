//! Bindings of the gathering/scattering ops and the join family
//! (`cat`, `stack`, `split`, `pad`, ...). `x[key]` itself is bound in `methods`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::{as_scalar, as_tensor, run, run_heavy, varargs_ints, PyTensor};
use crate::kernel::ScatterReduction;
use crate::ops::elementwise as ew;
use crate::ops::index::{self, IndexItem};
use crate::ops::join::{self, PadMode, SplitArg};
use crate::ops::scatter_reduce;
use crate::ops::shape;
use crate::tensor::{DType, Scalar, Tensor};

/// An index argument: a tensor or array-like of integers (an empty list becomes int64).
fn index_arg(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let t = as_tensor(obj)?;
    if t.dtype().is_floating_point() && t.numel() == 0 {
        return run(|| ew::to_dtype(&t, DType::I64));
    }
    Ok(t)
}

/// A `scatter_reduce` reduction by PyTorch's name.
fn reduction(op: &str, name: &str) -> PyResult<ScatterReduction> {
    ScatterReduction::parse(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{op}: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', got {name:?}"
        ))
    })
}

/// A sequence of tensors (or array-likes) for `cat`/`stack`.
fn tensor_seq(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
    if obj.cast::<PyTensor>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "{op}: expected a sequence of tensors, got a single Tensor"
        )));
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else {
        obj.try_iter()
            .map_err(|_| PyTypeError::new_err(format!("{op}: expected a sequence of tensors")))?
            .collect::<PyResult<_>>()?
    };
    items.iter().map(as_tensor).collect()
}

fn tuple_of(py: Python<'_>, ts: Vec<Tensor>) -> PyResult<Py<PyTuple>> {
    Ok(PyTuple::new(py, ts.into_iter().map(PyTensor::new))?.unbind())
}

/// An int or a sequence of ints.
fn ints(obj: &Bound<'_, PyAny>) -> PyResult<Vec<isize>> {
    if let Ok(i) = obj.extract::<isize>() {
        return Ok(vec![i]);
    }
    obj.extract::<Vec<isize>>()
}

/// A value to write into a tensor of dtype `d`: a Python scalar (no category
/// up-cast, e.g. a float into an int tensor) or a tensor/array-like.
fn value_arg(op: &str, obj: &Bound<'_, PyAny>, d: DType) -> PyResult<Tensor> {
    match as_scalar(obj) {
        Some(s) => {
            if s.category() > d.category() {
                return Err(PyTypeError::new_err(format!(
                    "{op}: cannot write {s:?} into a {d} tensor"
                )));
            }
            run(|| ew::scalar_tensor(s, d, crate::tensor::Device::Cpu))
        }
        None => as_tensor(obj),
    }
}

#[pymethods]
impl PyTensor {
    /// Indices of the non-zero elements: an int64 tensor of shape `(n, ndim)`
    /// in row-major order, or with `as_tuple=True` one 1-D tensor per dim.
    #[pyo3(signature = (*, as_tuple=false))]
    fn nonzero(&self, py: Python<'_>, as_tuple: bool) -> PyResult<Py<PyAny>> {
        let t = &self.t;
        let idx = run_heavy(py, t.numel(), || index::nonzero(t))?;
        if !as_tuple {
            return Ok(PyTensor::new(idx).into_pyobject(py)?.into_any().unbind());
        }
        let cols = (0..t.ndim().max(1))
            .map(|j| {
                if t.ndim() == 0 {
                    // torch: a 0-d input gives one 1-D tensor of zeros.
                    run(|| Tensor::from_vec(vec![0i64; idx.shape()[0]], &[idx.shape()[0]]))
                } else {
                    run(|| shape::select(&idx, 1, j as isize))
                }
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(tuple_of(py, cols)?.into_any())
    }

    /// The elements where the (broadcast) boolean `mask` is true, as a 1-D tensor.
    fn masked_select(&self, py: Python<'_>, mask: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let m = as_tensor(mask)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || index::masked_select(t, &m)).map(PyTensor::new)
    }

    /// Entries along `dim` at the positions in the 1-D integer `index`.
    fn index_select(
        &self,
        py: Python<'_>,
        dim: isize,
        index: &Bound<'_, PyAny>,
    ) -> PyResult<PyTensor> {
        let i = index_arg(index)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || index::index_select(t, dim, &i)).map(PyTensor::new)
    }

    /// `out[i][j] = self[index[i][j]][j]` for `dim=0` (and so on): values along
    /// `dim` picked by an integer `index` of the same number of dims.
    fn gather(&self, py: Python<'_>, dim: isize, index: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let i = index_arg(index)?;
        let t = &self.t;
        run_heavy(py, i.numel(), || index::gather(t, dim, &i)).map(PyTensor::new)
    }

    /// `gather` after broadcasting self and `indices` in every dim but `dim`
    /// (with `dim=None`, over the flattened tensors).
    #[pyo3(signature = (indices, dim=None))]
    fn take_along_dim(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        dim: Option<isize>,
    ) -> PyResult<PyTensor> {
        let i = index_arg(indices)?;
        let t = &self.t;
        run_heavy(py, i.numel(), || index::take_along_dim(t, &i, dim)).map(PyTensor::new)
    }

    /// Out-of-place scatter-add: a copy of self with `src` added at `index` along `dim`
    /// (`out[index[i][j]][j] += src[i][j]` for `dim=0`); repeated indices add up.
    fn scatter_add(
        &self,
        py: Python<'_>,
        dim: isize,
        index: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
    ) -> PyResult<PyTensor> {
        let i = index_arg(index)?;
        let s = as_tensor(src)?;
        let t = &self.t;
        run_heavy(py, t.numel() + i.numel(), || {
            index::scatter_add(t, dim, &i, &s)
        })
        .map(PyTensor::new)
    }

    /// In-place `scatter_add`; returns self.
    fn scatter_add_<'py>(
        slf: &Bound<'py, Self>,
        dim: isize,
        index: &Bound<'py, PyAny>,
        src: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        let i = index_arg(index)?;
        let s = as_tensor(src)?;
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        run_heavy(slf.py(), i.numel(), || index::scatter_add_(t, dim, &i, &s))?;
        Ok(slf.clone())
    }

    /// Out-of-place scatter-reduce: a copy of self where each slot that `index`
    /// points at along `dim` holds the reduction (`"sum"`, `"prod"`, `"mean"`,
    /// `"amax"` or `"amin"`) of the `src` values sent to it, and of its own value
    /// when `include_self` (`out[index[i][j]][j] = reduce(self[..], src[i][j], ...)`
    /// for `dim=0`). Slots no index points at keep self's value; `"mean"` of
    /// integers rounds down. Gradients follow PyTorch's rules (`amax`/`amin`
    /// share a slot's gradient evenly among the values equal to its result).
    #[pyo3(signature = (dim, index, src, reduce, *, include_self=true))]
    fn scatter_reduce(
        &self,
        py: Python<'_>,
        dim: isize,
        index: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<PyTensor> {
        let r = reduction("scatter_reduce", reduce)?;
        let i = index_arg(index)?;
        let s = as_tensor(src)?;
        let t = &self.t;
        run_heavy(py, t.numel() + i.numel(), || {
            scatter_reduce::scatter_reduce(t, dim, &i, &s, r, include_self)
        })
        .map(PyTensor::new)
    }

    /// In-place `scatter_reduce`; returns self.
    #[pyo3(signature = (dim, index, src, reduce, *, include_self=true))]
    fn scatter_reduce_<'py>(
        slf: &Bound<'py, Self>,
        dim: isize,
        index: &Bound<'py, PyAny>,
        src: &Bound<'py, PyAny>,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<Bound<'py, Self>> {
        let r = reduction("scatter_reduce_", reduce)?;
        let i = index_arg(index)?;
        let s = as_tensor(src)?;
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        run_heavy(slf.py(), t.numel() + i.numel(), || {
            scatter_reduce::scatter_reduce_(t, dim, &i, &s, r, include_self)
        })?;
        Ok(slf.clone())
    }

    /// Out-of-place scatter: a copy of self with `src` (a tensor, or a scalar
    /// `value`) written at `index` along `dim`. For repeated indices the last
    /// position in row-major order of `index` wins.
    #[pyo3(signature = (dim, index, src=None, *, value=None))]
    fn scatter(
        &self,
        py: Python<'_>,
        dim: isize,
        index: &Bound<'_, PyAny>,
        src: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let (i, s) = scatter_args("scatter", &self.t, index, src, value)?;
        let t = &self.t;
        run_heavy(py, t.numel() + i.numel(), || index::scatter(t, dim, &i, &s)).map(PyTensor::new)
    }

    /// In-place `scatter`; returns self.
    #[pyo3(signature = (dim, index, src=None, *, value=None))]
    fn scatter_<'py>(
        slf: &Bound<'py, Self>,
        dim: isize,
        index: &Bound<'py, PyAny>,
        src: Option<&Bound<'py, PyAny>>,
        value: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Self>> {
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        let (i, s) = scatter_args("scatter_", t, index, src, value)?;
        run_heavy(slf.py(), i.numel(), || index::scatter_(t, dim, &i, &s))?;
        Ok(slf.clone())
    }

    /// `self[indices] = values` where `indices` is a tuple of index tensors
    /// (`None` entries mean a full slice); with `accumulate=True` values are
    /// added, repeated positions adding up. Returns self.
    #[pyo3(signature = (indices, values, accumulate=false))]
    fn index_put_<'py>(
        slf: &Bound<'py, Self>,
        indices: &Bound<'py, PyAny>,
        values: &Bound<'py, PyAny>,
        accumulate: bool,
    ) -> PyResult<Bound<'py, Self>> {
        let t_ref = slf.borrow();
        let t = &t_ref.t;
        let items = put_items(indices)?;
        let v = value_arg("index_put_", values, t.dtype())?;
        run_heavy(slf.py(), t.numel(), || {
            index::index_put_with("index_put_", t, &items, &v, accumulate)
        })?;
        Ok(slf.clone())
    }

    /// Out-of-place `index_put_`.
    #[pyo3(signature = (indices, values, accumulate=false))]
    fn index_put(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        accumulate: bool,
    ) -> PyResult<PyTensor> {
        let items = put_items(indices)?;
        let v = value_arg("index_put", values, self.t.dtype())?;
        let t = &self.t;
        run_heavy(py, t.numel(), || {
            index::index_put("index_put", t, &items, &v, accumulate)
        })
        .map(PyTensor::new)
    }

    /// Split into views along `dim`: pieces of `split_size_or_sections` elements
    /// (the last may be smaller), or of the listed sizes.
    #[pyo3(signature = (split_size_or_sections, dim=0))]
    fn split(
        &self,
        py: Python<'_>,
        split_size_or_sections: &Bound<'_, PyAny>,
        dim: isize,
    ) -> PyResult<Py<PyTuple>> {
        let arg =
            if let Ok(s) = split_size_or_sections.extract::<isize>() {
                SplitArg::Size(s)
            } else {
                SplitArg::Sections(split_size_or_sections.extract::<Vec<isize>>().map_err(
                    |_| {
                        PyTypeError::new_err(
                            "split: split_size_or_sections must be an int or a list of ints",
                        )
                    },
                )?)
            };
        tuple_of(py, run(|| join::split(&self.t, &arg, dim))?)
    }

    /// At most `chunks` views along `dim`, each of `ceil(size / chunks)` elements.
    #[pyo3(signature = (chunks, dim=0))]
    fn chunk(&self, py: Python<'_>, chunks: isize, dim: isize) -> PyResult<Py<PyTuple>> {
        tuple_of(py, run(|| join::chunk(&self.t, chunks, dim))?)
    }

    /// The slices along `dim` as a tuple of views.
    #[pyo3(signature = (dim=0))]
    fn unbind(&self, py: Python<'_>, dim: isize) -> PyResult<Py<PyTuple>> {
        tuple_of(py, run(|| join::unbind(&self.t, dim))?)
    }

    /// A view of the diagonal of the planes `(dim1, dim2)`, as the last dim.
    #[pyo3(signature = (offset=0, dim1=0, dim2=1))]
    fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> PyResult<PyTensor> {
        run(|| join::diagonal(&self.t, offset, dim1, dim2)).map(PyTensor::new)
    }

    /// 1-D input: a square matrix with it on the `diagonal`-th diagonal;
    /// 2-D input: a copy of that diagonal.
    #[pyo3(signature = (diagonal=0))]
    fn diag(&self, py: Python<'_>, diagonal: isize) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || join::diag(t, diagonal)).map(PyTensor::new)
    }

    /// The lower triangle of the last two dims (`j - i <= diagonal`), zeros elsewhere.
    #[pyo3(signature = (diagonal=0))]
    fn tril(&self, py: Python<'_>, diagonal: i64) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || join::tril(t, diagonal)).map(PyTensor::new)
    }

    /// The upper triangle of the last two dims (`j - i >= diagonal`), zeros elsewhere.
    #[pyo3(signature = (diagonal=0))]
    fn triu(&self, py: Python<'_>, diagonal: i64) -> PyResult<PyTensor> {
        let t = &self.t;
        run_heavy(py, t.numel(), || join::triu(t, diagonal)).map(PyTensor::new)
    }

    /// Tile self `sizes[i]` times along each dim (`repeat(2, 3)` or `repeat((2, 3))`);
    /// extra leading sizes add dims.
    #[pyo3(signature = (*sizes))]
    fn repeat(&self, py: Python<'_>, sizes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = varargs_ints(sizes)?;
        let t = &self.t;
        run_heavy(py, t.numel(), || join::repeat(t, &s)).map(PyTensor::new)
    }

    /// Rotate elements by `shifts` along `dims` (over the flattened tensor when `dims` is None).
    #[pyo3(signature = (shifts, dims=None))]
    fn roll(
        &self,
        py: Python<'_>,
        shifts: &Bound<'_, PyAny>,
        dims: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let s = ints(shifts)?;
        let d = match dims {
            Some(d) if !d.is_none() => ints(d)?,
            _ => vec![],
        };
        let t = &self.t;
        run_heavy(py, t.numel(), || join::roll(t, &s, &d)).map(PyTensor::new)
    }
}

fn scatter_args(
    op: &str,
    x: &Tensor,
    index: &Bound<'_, PyAny>,
    src: Option<&Bound<'_, PyAny>>,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Tensor, Tensor)> {
    let i = index_arg(index)?;
    let s = match (src, value) {
        (Some(s), None) | (None, Some(s)) => {
            if as_scalar(s).is_some() {
                let v = value_arg(op, s, x.dtype())?;
                run(|| shape::broadcast_to(&v, i.shape()))?
            } else {
                as_tensor(s)?
            }
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{op}: expected exactly one of src (a tensor) or value (a scalar)"
            )))
        }
    };
    Ok((i, s))
}

fn put_items(indices: &Bound<'_, PyAny>) -> PyResult<Vec<IndexItem>> {
    let seq: Vec<Bound<'_, PyAny>> = if let Ok(t) = indices.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = indices.cast::<PyList>() {
        l.iter().collect()
    } else {
        return Err(PyTypeError::new_err(
            "index_put_: indices must be a tuple or list of tensors",
        ));
    };
    seq.iter()
        .map(|o| {
            if o.is_none() {
                Ok(IndexItem::Slice {
                    start: None,
                    stop: None,
                    step: 1,
                })
            } else {
                index_arg(o).map(IndexItem::Tensor)
            }
        })
        .collect()
}

/// Concatenate tensors along an existing dim; the result dtype promotes over
/// all inputs; 1-D tensors of size 0 are skipped.
#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
fn cat(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: isize) -> PyResult<PyTensor> {
    let ts = tensor_seq("cat", tensors)?;
    let work = ts.iter().map(|t| t.numel()).sum();
    run_heavy(py, work, || join::cat(&ts, dim)).map(PyTensor::new)
}

/// Stack equally shaped tensors along a new dim.
#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
fn stack(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: isize) -> PyResult<PyTensor> {
    let ts = tensor_seq("stack", tensors)?;
    let work = ts.iter().map(|t| t.numel()).sum();
    run_heavy(py, work, || join::stack(&ts, dim)).map(PyTensor::new)
}

/// Pad `input` as `torch.nn.functional.pad`: `pad` lists (before, after)
/// amounts from the last dim backwards; negative amounts crop. Modes:
/// "constant" (with `value`, default 0), "reflect", "replicate", "circular".
#[pyfunction]
#[pyo3(signature = (input, pad, mode="constant", value=None))]
fn pad(
    py: Python<'_>,
    input: &PyTensor,
    pad: Vec<isize>,
    mode: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let m = run(|| PadMode::parse(mode))?;
    let v = match value {
        None => Scalar::Int(0),
        Some(v) if v.is_none() => Scalar::Int(0),
        Some(v) => as_scalar(v)
            .ok_or_else(|| PyValueError::new_err("pad: value must be a bool, int or float"))?,
    };
    let v = if m != PadMode::Constant {
        Scalar::Int(0)
    } else {
        v
    };
    let t = &input.t;
    run_heavy(py, t.numel(), || join::pad(t, &pad, m, v)).map(PyTensor::new)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cat, m)?)?;
    m.add_function(wrap_pyfunction!(stack, m)?)?;
    m.add_function(wrap_pyfunction!(pad, m)?)?;
    Ok(())
}
