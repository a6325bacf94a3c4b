//! Autograd bindings: `requires_grad`, `.grad`, `grad_fn`, `backward`,
//! hooks, `autograd.grad` and grad-mode switches.

use std::cell::RefCell;
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::{as_tensor, run, PyTensor};
use crate::autograd::engine::{self, edge_for, Sink};
use crate::autograd::{self as ag, AutogradMeta, Edge};
use crate::error::Error;
use crate::ops::creation;
use crate::tensor::{DType, Device, Scalar, Tensor};

thread_local! {
    /// An exception raised by a Python hook while the engine ran; re-raised as is.
    pub(super) static HOOK_ERROR: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Run the engine without the GIL; a Python exception from a hook is re-raised unchanged.
fn run_engine<T: Send>(py: Python<'_>, f: impl FnOnce() -> crate::Result<T> + Send) -> PyResult<T> {
    let r = super::run_detached(py, f);
    if let Some(e) = HOOK_ERROR.with(|h| h.borrow_mut().take()) {
        return Err(e);
    }
    r
}

fn ones_for(t: &Tensor) -> crate::Result<Tensor> {
    creation::full(t.shape(), Scalar::Int(1), t.dtype(), t.device())
}

fn check_grad_shape(op: &'static str, t: &Tensor, g: &Tensor) -> crate::Result<()> {
    if g.shape() != t.shape() {
        return Err(Error::shape(
            op,
            format!(
                "mismatch in shape: grad_output has shape {:?} and output has shape {:?}",
                g.shape(),
                t.shape()
            ),
        ));
    }
    Ok(())
}

fn implicit_grad(op: &'static str, t: &Tensor) -> crate::Result<Tensor> {
    if t.numel() != 1 {
        return Err(Error::runtime(
            op,
            format!("grad can be implicitly created only for scalar outputs (got shape {:?}); pass gradient=", t.shape()),
        ));
    }
    ones_for(t)
}

/// A node of the backward graph (`tensor.grad_fn`).
#[pyclass(name = "Node", module = "ferrograd.autograd", frozen)]
pub struct PyNode {
    edge: Edge,
}

#[pymethods]
impl PyNode {
    /// The node's name (`"MulBackward"`, `"AccumulateGrad"`).
    fn name(&self) -> &'static str {
        match &self.edge {
            Edge::Node(n, _) => n.name(),
            Edge::Leaf(_) => "AccumulateGrad",
        }
    }
    /// `((node, output_index) | (None, 0), ...)` for each input of the op.
    #[getter]
    fn next_functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let items: Vec<Py<PyAny>> = match &self.edge {
            Edge::Leaf(_) => vec![],
            Edge::Node(n, _) => n
                .next_edges()
                .iter()
                .map(|e| -> PyResult<Py<PyAny>> {
                    Ok(match e {
                        None => (py.None(), 0u32).into_pyobject(py)?.into_any().unbind(),
                        Some(e) => {
                            let nr = match e {
                                Edge::Node(_, nr) => *nr,
                                Edge::Leaf(_) => 0,
                            };
                            (Py::new(py, PyNode { edge: e.clone() })?, nr)
                                .into_pyobject(py)?
                                .into_any()
                                .unbind()
                        }
                    })
                })
                .collect::<PyResult<_>>()?,
        };
        PyTuple::new(py, items)
    }
    /// Shapes of the node's outputs (for a leaf accumulator: empty).
    #[getter]
    fn output_shapes(&self) -> Vec<Vec<usize>> {
        match &self.edge {
            Edge::Node(n, _) => n.outputs_info().iter().map(|(s, _)| s.to_vec()).collect(),
            Edge::Leaf(_) => vec![],
        }
    }
    /// Dtype names of the node's outputs.
    #[getter]
    fn output_dtypes(&self) -> Vec<&'static str> {
        match &self.edge {
            Edge::Node(n, _) => n.outputs_info().iter().map(|(_, d)| d.name()).collect(),
            Edge::Leaf(_) => vec![],
        }
    }
    /// A stable identity for graph walks (equal for the same node).
    #[getter]
    fn _id(&self) -> usize {
        match &self.edge {
            Edge::Node(n, _) => Arc::as_ptr(n) as usize,
            Edge::Leaf(m) => Arc::as_ptr(m) as usize,
        }
    }
    fn __repr__(&self) -> String {
        format!("<{}>", self.name())
    }
}

/// Handle returned by `register_hook`; `.remove()` unregisters the hook.
#[pyclass(name = "RemovableHandle", module = "ferrograd.autograd", frozen)]
pub struct PyHookHandle {
    meta: Arc<AutogradMeta>,
    id: u64,
}

#[pymethods]
impl PyHookHandle {
    fn remove(&self) {
        self.meta.remove_hook(self.id);
    }
}

fn py_hook(f: Py<PyAny>) -> ag::Hook {
    Arc::new(move |g: &Tensor| -> crate::Result<Option<Tensor>> {
        Python::attach(|py| {
            let r = f.call1(py, (PyTensor::new(g.clone()),)).and_then(|r| {
                if r.is_none(py) {
                    Ok(None)
                } else {
                    let t = r.bind(py).cast::<PyTensor>().map_err(|_| {
                        PyTypeError::new_err("a tensor hook must return None or a Tensor")
                    })?;
                    Ok(Some(t.borrow().t.clone()))
                }
            });
            match r {
                Ok(v) => {
                    if let Some(v) = &v {
                        if v.shape() != g.shape() {
                            return Err(Error::shape(
                                "hook",
                                format!(
                                    "hook returned a gradient of shape {:?}, expected {:?}",
                                    v.shape(),
                                    g.shape()
                                ),
                            ));
                        }
                    }
                    Ok(v)
                }
                Err(e) => {
                    let msg = e.to_string();
                    HOOK_ERROR.with(|h| *h.borrow_mut() = Some(e));
                    Err(Error::runtime("hook", msg))
                }
            }
        })
    })
}

#[pymethods]
impl PyTensor {
    /// `Tensor(data=None, requires_grad=False)`. A tensor `data` is aliased:
    /// the result shares its storage without its history (a new leaf, as
    /// `nn.Parameter(t)` needs); other data (nested lists, scalars, arrays)
    /// is copied as by `fg.tensor`. With no data: an empty float32 tensor.
    #[new]
    #[pyo3(signature = (data=None, requires_grad=false))]
    fn py_new(data: Option<&Bound<'_, PyAny>>, requires_grad: bool) -> PyResult<PyTensor> {
        let t = match data {
            Some(obj) => match obj.cast::<PyTensor>() {
                Ok(t) => t.borrow().t.detach(),
                Err(_) => super::convert::tensor_from_py(obj, None)?,
            },
            None => run(|| creation::full(&[0], Scalar::Float(0.0), DType::F32, Device::Cpu))?,
        };
        super::creation::leaf(t, requires_grad)
    }
    /// Whether gradients are computed for this tensor.
    #[getter]
    fn get_requires_grad(&self) -> bool {
        self.t.requires_grad()
    }
    #[setter]
    fn set_requires_grad(&self, value: bool) -> PyResult<()> {
        run(|| ag::set_requires_grad(&self.t, value))
    }
    /// Set `requires_grad` in place; returns the tensor.
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_<'py>(
        slf: &Bound<'py, Self>,
        requires_grad: bool,
    ) -> PyResult<Bound<'py, Self>> {
        run(|| ag::set_requires_grad(&slf.borrow().t, requires_grad))?;
        Ok(slf.clone())
    }
    /// True for tensors not produced by a recorded op.
    #[getter]
    fn is_leaf(&self) -> bool {
        self.t.meta().is_none_or(|m| m.is_leaf())
    }
    /// The accumulated gradient (None until a backward pass reaches this tensor).
    #[getter]
    fn get_grad(&self) -> PyResult<Option<PyTensor>> {
        Ok(grad_of(&self.t)?.map(PyTensor::new))
    }
    #[setter]
    fn set_grad(&self, value: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let g = match value {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) => {
                let g = as_tensor(v)?;
                if g.shape() != self.t.shape() {
                    return Err(PyValueError::new_err(format!(
                        "assigned grad has shape {:?}, but the tensor has shape {:?}",
                        g.shape(),
                        self.t.shape()
                    )));
                }
                Some(g)
            }
        };
        assign_grad(&self.t, g)
    }
    /// The node that produced this tensor (None for leaves).
    #[getter]
    fn grad_fn(&self) -> Option<PyNode> {
        ag::grad_fn_of(&self.t).map(|edge| PyNode { edge })
    }
    /// Keep `.grad` for this non-leaf tensor during backward.
    fn retain_grad(&self) -> PyResult<()> {
        match self.t.meta() {
            Some(m) if m.requires_grad() => {
                if !m.is_leaf() {
                    m.set_retains_grad();
                }
                Ok(())
            }
            _ => Err(PyRuntimeError::new_err(
                "can't retain_grad on a tensor that has requires_grad=False",
            )),
        }
    }
    #[getter]
    fn retains_grad(&self) -> bool {
        self.t.meta().is_some_and(|m| m.retains_grad())
    }
    /// A tensor sharing this one's data, without history.
    fn detach(&self) -> PyTensor {
        PyTensor::new(self.t.detach())
    }
    /// Detach in place: drop history and stop requiring grad.
    fn detach_<'py>(slf: &Bound<'py, Self>) -> Bound<'py, Self> {
        if let Some(m) = slf.borrow().t.meta() {
            m.set_grad_fn(None);
            let _ = ag::set_requires_grad(&slf.borrow().t, false);
        }
        slf.clone()
    }
    /// Identity of this tensor's autograd state (for graph walks); 0 when none.
    #[getter]
    fn _autograd_id(&self) -> usize {
        self.t.meta().map_or(0, |m| Arc::as_ptr(m) as usize)
    }
    /// Register `hook(grad) -> Tensor | None`, called with this tensor's gradient.
    fn register_hook(&self, hook: Py<PyAny>) -> PyResult<PyHookHandle> {
        let m = match self.t.meta() {
            Some(m) if m.requires_grad() => m.clone(),
            _ => {
                return Err(PyRuntimeError::new_err(
                    "cannot register a hook on a tensor that doesn't require gradient",
                ))
            }
        };
        let id = m.add_hook(py_hook(hook));
        Ok(PyHookHandle { meta: m, id })
    }
    /// Compute gradients of this tensor with respect to graph leaves.
    #[pyo3(signature = (gradient=None, retain_graph=None, create_graph=false, inputs=None))]
    fn backward(
        &self,
        py: Python<'_>,
        gradient: Option<&Bound<'_, PyAny>>,
        retain_graph: Option<bool>,
        create_graph: bool,
        inputs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let t = &self.t;
        let edge = run(|| edge_for("backward", t))?;
        let g = match gradient {
            Some(g) if !g.is_none() => {
                let g = as_tensor(g)?;
                run(|| check_grad_shape("backward", t, &g))?;
                g
            }
            _ => run(|| implicit_grad("backward", t))?,
        };
        let retain = retain_graph.unwrap_or(create_graph);
        if crate::graph::trace::recording() {
            crate::graph::trace::note_backward();
        }
        match inputs {
            None => {
                run_engine(py, || {
                    engine::run(vec![(edge, g)], retain, create_graph, Sink::Accumulate)
                })?;
            }
            Some(inp) => {
                let ins = tensor_list(inp)?;
                let edges: Vec<Edge> = ins
                    .iter()
                    .map(|x| run(|| edge_for("backward", x)))
                    .collect::<PyResult<_>>()?;
                run_engine(py, || {
                    engine::run_then(
                        vec![(edge, g)],
                        retain,
                        create_graph,
                        Sink::Capture(&edges),
                        |grads| {
                            for (x, gx) in ins.iter().zip(grads) {
                                if let (Some(m), Some(gx)) = (x.meta(), gx) {
                                    let new = match m.grad() {
                                        None => gx,
                                        Some(o) => crate::ops::elementwise::binary(
                                            crate::ops::elementwise::BinaryOp::Add,
                                            &o,
                                            &gx,
                                        )?,
                                    };
                                    m.set_grad(Some(if create_graph { new } else { new.detach() }));
                                }
                            }
                            Ok(())
                        },
                    )
                })?;
            }
        }
        Ok(())
    }
}

fn tensor_list(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(vec![t.borrow().t.clone()]);
    }
    obj.try_iter()?
        .map(|o| {
            let o = o?;
            o.cast::<PyTensor>()
                .map(|t| t.borrow().t.clone())
                .map_err(|_| PyTypeError::new_err("expected a Tensor or a sequence of Tensors"))
        })
        .collect()
}

/// `autograd.grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False)`.
#[pyfunction]
#[pyo3(signature = (outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=false, allow_unused=false))]
fn autograd_grad<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    inputs: &Bound<'py, PyAny>,
    grad_outputs: Option<&Bound<'py, PyAny>>,
    retain_graph: Option<bool>,
    create_graph: bool,
    allow_unused: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let outs = tensor_list(outputs)?;
    let ins = tensor_list(inputs)?;
    let gos: Vec<Option<Tensor>> = match grad_outputs {
        None => vec![None; outs.len()],
        Some(g) if g.is_none() => vec![None; outs.len()],
        Some(g) => {
            if let Ok(t) = g.cast::<PyTensor>() {
                vec![Some(t.borrow().t.clone())]
            } else {
                g.try_iter()?
                    .map(|x| {
                        let x = x?;
                        if x.is_none() {
                            Ok(None)
                        } else {
                            as_tensor(&x).map(Some)
                        }
                    })
                    .collect::<PyResult<_>>()?
            }
        }
    };
    if gos.len() != outs.len() {
        return Err(PyValueError::new_err(format!(
            "grad: got {} grad_outputs for {} outputs",
            gos.len(),
            outs.len()
        )));
    }
    let mut roots = vec![];
    for (o, go) in outs.iter().zip(gos) {
        let e = run(|| edge_for("grad", o))?;
        let g = match go {
            Some(g) => {
                run(|| check_grad_shape("grad", o, &g))?;
                g
            }
            None => run(|| implicit_grad("grad", o))?,
        };
        roots.push((e, g));
    }
    let edges: Vec<Edge> = ins
        .iter()
        .map(|x| run(|| edge_for("grad", x)))
        .collect::<PyResult<_>>()?;
    let retain = retain_graph.unwrap_or(create_graph);
    let grads = run_engine(py, || {
        engine::run(roots, retain, create_graph, Sink::Capture(&edges))
    })?;
    let mut items: Vec<Py<PyAny>> = vec![];
    for (i, g) in grads.into_iter().enumerate() {
        match g {
            Some(g) => items.push(Py::new(py, PyTensor::new(g))?.into_any()),
            None => {
                if !allow_unused {
                    return Err(PyRuntimeError::new_err(format!(
                        "grad: input {i} (shape {:?}) appears not to have been used in the graph; pass allow_unused=True if this is intended",
                        ins[i].shape()
                    )));
                }
                items.push(py.None());
            }
        }
    }
    PyTuple::new(py, items)
}

/// Whether ops record gradients on this thread.
#[pyfunction]
fn is_grad_enabled() -> bool {
    ag::is_grad_enabled()
}

/// Turn gradient recording on/off for this thread; returns the previous setting.
#[pyfunction]
fn _set_grad_enabled(mode: bool) -> bool {
    ag::set_grad_enabled(mode)
}

/// Set the autocast dtype of the CPU (`gpu=False`) or the GPU on this
/// thread (`None`: autocast off there); returns the previous one.
#[pyfunction]
#[pyo3(signature = (gpu, dtype=None))]
fn _set_autocast(gpu: bool, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<Option<super::PyDType>> {
    let d = super::parse_dtype_opt(dtype)?;
    if let Some(d) = d {
        if !matches!(d, DType::F16 | DType::BF16) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "autocast: the region's dtype must be float16 or bfloat16, got {d}"
            )));
        }
    }
    Ok(crate::ops::autocast::set(gpu, d).map(|d| super::PyDType { d }))
}

/// Whether autocast regions on this thread cache parameter casts; returns the previous setting.
#[pyfunction]
fn _set_autocast_cache(on: bool) -> bool {
    crate::ops::autocast::set_cache_enabled(on)
}

/// The autocast dtype of the CPU (`gpu=False`) or the GPU on this thread (`None`: off).
#[pyfunction]
fn _get_autocast(gpu: bool) -> Option<super::PyDType> {
    crate::ops::autocast::get(gpu).map(|d| super::PyDType { d })
}

/// What `t.grad` reads: while a graph is captured, the gradient of a leaf as
/// the captured graph will see it when it runs.
pub fn grad_of(t: &Tensor) -> PyResult<Option<Tensor>> {
    if crate::graph::trace::recording() {
        if let Some(m) = t.meta().filter(|m| m.is_leaf()) {
            return run(|| {
                crate::graph::trace::bind_leaf(t)?;
                crate::graph::trace::current_grad(m)
            });
        }
    }
    if let Some(m) = t.meta().filter(|m| m.is_leaf()) {
        if let Some(g) = crate::graph::trace::paused_grad(m) {
            return Ok(g);
        }
    }
    Ok(t.meta().and_then(|m| m.grad()))
}

/// What `t.grad = g` does once `g` is checked (recorded while a graph is captured).
pub fn assign_grad(t: &Tensor, g: Option<Tensor>) -> PyResult<()> {
    if crate::graph::trace::recording() {
        if let Some(m) = t.meta().filter(|m| m.is_leaf()) {
            return run(|| {
                crate::graph::trace::bind_leaf(t)?;
                crate::graph::trace::set_grad(m, g)
            });
        }
    }
    if let Some(m) = t.meta().filter(|m| m.is_leaf()) {
        if crate::graph::trace::set_paused_grad(m, g.clone()) {
            return Ok(());
        }
    }
    match t.meta() {
        Some(m) => m.set_grad(g),
        None => {
            if g.is_some() {
                t.init_meta(|| AutogradMeta::leaf(false)).set_grad(g);
            }
        }
    }
    Ok(())
}

/// `_queue_callback(fn)`: call `fn()` once when the backward now running
/// finishes (after every `.grad` is written), as PyTorch's
/// `Variable._execution_engine.queue_callback`. Call it from a hook.
#[pyfunction]
fn _queue_callback(callback: Py<PyAny>) -> PyResult<()> {
    run(|| {
        engine::queue_callback(Box::new(move || {
            Python::attach(|py| match callback.call0(py) {
                Ok(_) => Ok(()),
                Err(e) => {
                    let msg = e.to_string();
                    HOOK_ERROR.with(|h| *h.borrow_mut() = Some(e));
                    Err(Error::runtime("backward callback", msg))
                }
            })
        }))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNode>()?;
    m.add_class::<PyHookHandle>()?;
    m.add_function(wrap_pyfunction!(autograd_grad, m)?)?;
    m.add_function(wrap_pyfunction!(is_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_autocast, m)?)?;
    m.add_function(wrap_pyfunction!(_get_autocast, m)?)?;
    m.add_function(wrap_pyfunction!(_set_autocast_cache, m)?)?;
    m.add_function(wrap_pyfunction!(_set_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_queue_callback, m)?)?;
    Ok(())
}
