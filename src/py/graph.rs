//! Bindings for graph capture: starting and ending a trace, binding
//! arguments/placeholders/constants, and the captured graph object.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{parse_dtype, run, PyTensor};
use crate::graph::call::Sub;
use crate::graph::control::SubGraph;
use crate::graph::exec::{bind_symbols, Plan};
use crate::graph::{sym, trace, Graph, InputKind, OpCall, Producer};
use crate::tensor::{DType, Tensor};

/// The user's source line of the op being captured, from the Python stack.
fn py_location() -> Option<String> {
    Python::attach(|py| {
        let f = py
            .import("ferrograd._capture")
            .ok()?
            .getattr("_user_location")
            .ok()?;
        f.call0().ok()?.extract::<Option<String>>().ok()?
    })
}

fn tensors(list: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
    list.try_iter()?
        .map(|o| Ok(o?.cast::<PyTensor>()?.borrow().t.clone()))
        .collect()
}

/// Start capturing the ops this thread runs.
#[pyfunction]
fn _trace_begin() -> PyResult<()> {
    trace::set_location_provider(py_location);
    run(trace::begin)
}

/// Stop capturing; the graph returns `outputs`.
#[pyfunction]
fn _trace_end(outputs: &Bound<'_, PyAny>) -> PyResult<PyGraph> {
    let outs = match tensors(outputs) {
        Ok(o) => o,
        Err(e) => {
            trace::abort();
            return Err(e);
        }
    };
    let (g, lookup) = run(|| trace::end_with_lookup(&outs))?;
    let mut pg = PyGraph::new(g);
    pg.lookup = Some(Arc::new(lookup));
    Ok(pg)
}

/// Abandon the current capture (if any).
#[pyfunction]
fn _trace_abort() {
    trace::abort();
}

/// Whether this thread is capturing a graph.
#[pyfunction]
fn _tracing() -> bool {
    trace::tracing()
}

/// Whether what this thread runs now is recorded into a graph (a trace
/// exists and is not paused by `_trace_set_active(False)`).
#[pyfunction]
fn _trace_recording() -> bool {
    trace::recording()
}

/// Turn recording on or off while a trace exists; returns the previous state.
#[pyfunction]
fn _trace_set_active(on: bool) -> bool {
    trace::set_active(on)
}

/// Bind tensor argument `position`; `symbolic` lists `(dim, symbol name or None)`.
#[pyfunction]
#[pyo3(signature = (t, position, symbolic=vec![], name=None))]
fn _trace_arg(
    t: &PyTensor,
    position: usize,
    symbolic: Vec<(usize, Option<String>)>,
    name: Option<String>,
) -> PyResult<PyTensor> {
    run(|| trace::arg(&t.t, position, &symbolic, name)).map(PyTensor::new)
}

/// A placeholder of `shape` (ints; `None` = a new symbolic dim; a string =
/// the symbolic dim of that name, shared) and `dtype`.
#[pyfunction]
#[pyo3(signature = (shape, dtype, position, name=None, device=None))]
fn _trace_placeholder(
    shape: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    position: usize,
    name: Option<String>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let d = parse_dtype(dtype)?;
    let dev = super::parse_device(device)?;
    #[cfg(feature = "gpu")]
    if matches!(dev, crate::tensor::Device::Gpu(_)) {
        // The same dtype rule as GPU tensors: refused here, not at the first run.
        run(|| crate::backend::wgpu::gty("placeholder", d).map(|_| ()))?;
    }
    let mut dims = vec![];
    for item in shape.try_iter()? {
        let item = item?;
        dims.push(if item.is_none() {
            trace::PDim::New
        } else if let Ok(s) = item.extract::<String>() {
            trace::PDim::Named(s)
        } else {
            trace::PDim::Fixed(item.extract::<usize>().map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "placeholder: dims must be non-negative ints, None or names, got {}",
                    item.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?)
        });
    }
    let shape = dims;
    run(|| trace::placeholder(&shape, d, position, name, dev)).map(PyTensor::new)
}

/// `t`'s current values as a constant of the graph being captured.
#[pyfunction]
fn _trace_constant(t: &PyTensor) -> PyResult<PyTensor> {
    run(|| trace::constant(&t.t)).map(PyTensor::new)
}

/// Bind `t` by reference (a variable of the graph being captured).
#[pyfunction]
#[pyo3(signature = (t, name=None))]
fn _trace_reference(t: &PyTensor, name: Option<String>) -> PyResult<PyTensor> {
    run(|| trace::reference(&t.t, name)).map(PyTensor::new)
}

/// Number of nodes captured so far by this thread's trace.
#[pyfunction]
fn _trace_num_nodes() -> usize {
    trace::snapshot().map_or(0, |g| g.nodes.len())
}

/// The graph value number of a captured tensor (None when it is not one).
#[pyfunction]
fn _trace_value_id(t: &PyTensor) -> Option<usize> {
    trace::value_id(&t.t)
}

/// A captured graph (see `ferrograd.Graph` for the user-facing object).
#[pyclass(name = "_Graph", module = "ferrograd", frozen)]
pub struct PyGraph {
    pub g: Arc<Graph>,
    plans: Mutex<HashMap<Vec<usize>, Arc<Plan>>>,
    /// Maps tensors captured by the trace to values (graphs made by a trace).
    lookup: Option<Arc<trace::Lookup>>,
    /// The plan of a graph without symbolic dimensions (made on first use).
    plain: std::sync::OnceLock<Arc<Plan>>,
    /// The arguments `_call` accepts (see `_arm_call`); None until armed.
    call_sig: Mutex<Option<Arc<CallSig>>>,
}

/// What one argument of a compiled call must be for the armed graph to run
/// it: the parts of the compiled function's cache key.
struct ArgSig {
    dtype: crate::tensor::DType,
    shape: Vec<usize>,
    requires_grad: bool,
    device: crate::tensor::Device,
    leaf: bool,
}

impl ArgSig {
    fn of(t: &Tensor) -> ArgSig {
        ArgSig {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            requires_grad: t.requires_grad(),
            device: trace::run_device(t),
            leaf: t.meta().is_none_or(|m| m.is_leaf()),
        }
    }

    fn holds(&self, t: &Tensor) -> bool {
        t.dtype() == self.dtype
            && t.shape() == self.shape.as_slice()
            && t.requires_grad() == self.requires_grad
            && t.meta().is_none_or(|m| m.is_leaf()) == self.leaf
            && trace::run_device(t) == self.device
    }
}

/// The signature a compiled function's cached graph was armed with for
/// calls that skip the Python-side lookup (see `PyGraph::_call`).
struct CallSig {
    args: Vec<ArgSig>,
    grad_enabled: bool,
    /// The autocast dtypes (CPU, GPU) the graph was captured under.
    autocast: [Option<DType>; 2],
    /// The default floating dtype the graph was captured under.
    default_float: DType,
    /// The data-rebinding epoch the graph's by-reference inputs were last seen valid at.
    epoch: std::sync::atomic::AtomicU64,
    /// The output returned alone (the function returns one tensor), else all of them as a list.
    single: Option<usize>,
}

impl PyGraph {
    pub fn new(g: Graph) -> PyGraph {
        PyGraph {
            g: Arc::new(g),
            plans: Mutex::new(HashMap::new()),
            lookup: None,
            plain: std::sync::OnceLock::new(),
            call_sig: Mutex::new(None),
        }
    }

    fn plan_for(&self, args: &[Tensor]) -> crate::Result<Arc<Plan>> {
        let env = bind_symbols(&self.g, args)?;
        if env.is_empty() {
            return self.plain_plan();
        }
        if let Some(p) = self.plans.lock().get(&env) {
            return Ok(p.clone());
        }
        let p = Arc::new(Plan::new(&self.g, &env)?);
        self.plans.lock().insert(env, p.clone());
        Ok(p)
    }

    /// The one plan of a graph without symbolic dimensions: every call
    /// shares it, with no key to build, hash or compare.
    fn plain_plan(&self) -> crate::Result<Arc<Plan>> {
        if let Some(p) = self.plain.get() {
            return Ok(p.clone());
        }
        let p = Arc::new(Plan::new(&self.g, &[])?);
        Ok(self.plain.get_or_init(|| p).clone())
    }

    /// The plan for `args`, or, with no arguments, for a graph without symbols.
    fn plan_for_opt(&self, args: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<Plan>> {
        let a = match args {
            Some(a) => tensors(a)?,
            None if self.g.symbols.is_empty() => return run(|| self.plain_plan()),
            None => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the graph has symbolic dimensions ({}): pass example arguments to fix their sizes",
                self.g
                    .symbols
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
            }
        };
        run(|| self.plan_for(&a))
    }
}

fn dims(g: &Graph, shape: &[usize]) -> Vec<String> {
    shape.iter().map(|&d| sym::dim_str(d, &g.symbols)).collect()
}

#[pymethods]
impl PyGraph {
    /// A readable listing of the graph.
    fn dump(&self) -> String {
        self.g.dump()
    }
    /// Arm `_call` for arguments like `args` (tensors), under the current
    /// grad mode, with the graph's references valid at rebinding epoch
    /// `epoch`. `single`: the output index to return alone, or None for a list.
    #[pyo3(signature = (args, epoch, single=None))]
    fn _arm_call(
        &self,
        args: &Bound<'_, pyo3::types::PyTuple>,
        epoch: u64,
        single: Option<usize>,
    ) -> PyResult<()> {
        let a = tensors(args.as_any())?;
        *self.call_sig.lock() = Some(Arc::new(CallSig {
            args: a.iter().map(ArgSig::of).collect(),
            grad_enabled: crate::autograd::is_grad_enabled(),
            autocast: autocast_state(),
            default_float: DType::default_float(),
            epoch: std::sync::atomic::AtomicU64::new(epoch),
            single,
        }));
        Ok(())
    }
    /// Run on `args` when they match what `_arm_call` armed (exact tensors of
    /// the same dtype, shape, device, `requires_grad` and leaf-ness; the same
    /// grad mode; no capture recording; no by-reference input rebound since):
    /// the outputs (one tensor or a list). None when they do not match (the
    /// caller takes its general path).
    fn _call<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(sig) = self.call_sig.lock().clone() else {
            return Ok(None);
        };
        if args.len() != sig.args.len()
            || crate::autograd::is_grad_enabled() != sig.grad_enabled
            || autocast_state() != sig.autocast
            || DType::default_float() != sig.default_float
            || trace::recording()
        {
            return Ok(None);
        }
        let tensor_type = py.get_type::<PyTensor>();
        let mut a: Vec<Tensor> = Vec::with_capacity(args.len());
        for (o, s) in args.iter().zip(&sig.args) {
            if !o.get_type().is(&tensor_type) {
                return Ok(None);
            }
            let pt = o.cast::<PyTensor>()?.borrow();
            if !s.holds(&pt.t) {
                return Ok(None);
            }
            a.push(pt.t.clone());
        }
        let now = crate::tensor::storage::rebind_epoch();
        let seen = sig.epoch.load(std::sync::atomic::Ordering::Relaxed);
        if now != seen {
            if self.g.refs_rebound_since(seen) {
                return Ok(None);
            }
            sig.epoch.store(now, std::sync::atomic::Ordering::Relaxed);
        }
        let plan = run(|| self.plan_for(&a))?;
        let mut outs = super::run_detached(py, || plan.run_with(&a, &[]))?;
        Ok(Some(match sig.single {
            Some(i) if i < outs.len() => {
                Bound::new(py, PyTensor::new(outs.swap_remove(i)))?.into_any()
            }
            _ => PyList::new(py, outs.into_iter().map(PyTensor::new))?.into_any(),
        }))
    }
    /// Number of op nodes.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.g.nodes.len()
    }
    /// Whether a tensor the graph reads by reference had its data rebound
    /// (`t.data = u`) after rebinding epoch `epoch` (`_rebind_epoch()`).
    fn _refs_rebound_since(&self, epoch: u64) -> bool {
        self.g.refs_rebound_since(epoch)
    }
    /// Whether the graph depends on which leaves have a `.grad` (see `_grad_guard`).
    #[getter]
    fn _has_grad_guards(&self) -> bool {
        !self.g.grad_absent.is_empty()
            || self
                .g
                .inputs
                .iter()
                .any(|i| matches!(i.kind, InputKind::Grad(_)))
    }
    /// Why running on `args` would not match the gradients the graph was
    /// captured with (a `.grad` it saw as None is set, or one it reads is
    /// None); None when it matches.
    fn _grad_guard(&self, args: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let a = tensors(args)?;
        Ok(self.g.grad_guard(&a))
    }
    /// Whether the graph computes gradients itself (a captured backward pass).
    #[getter]
    fn has_backward(&self) -> bool {
        self.g.has_backward
    }
    /// Names of the symbolic dimensions.
    #[getter]
    fn symbols(&self) -> Vec<String> {
        self.g.symbols.iter().map(|s| s.name.clone()).collect()
    }
    /// Output value numbers.
    #[getter]
    fn outputs(&self) -> Vec<usize> {
        self.g.outputs.clone()
    }
    /// Each value: `{"shape": [...str], "dtype": str, "requires_grad": bool, "producer": ...}`.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for v in &self.g.values {
            let d = PyDict::new(py);
            d.set_item("shape", dims(&self.g, &v.shape))?;
            d.set_item("dtype", v.dtype.name())?;
            d.set_item("requires_grad", v.requires_grad)?;
            match v.producer {
                Producer::Input(i) => d.set_item("input", i)?,
                Producer::Node { node, out } => {
                    d.set_item("node", node)?;
                    d.set_item("out", out)?;
                }
                Producer::Removed => d.set_item("removed", true)?,
            }
            l.append(d)?;
        }
        Ok(l)
    }
    /// Each input: `{"kind": "arg"|"ref"|"const"|"grad", "value": int, "name": str|None, "position": int}`.
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for inp in &self.g.inputs {
            let d = PyDict::new(py);
            let (kind, extra): (&str, Option<usize>) = match &inp.kind {
                InputKind::Arg(i) => ("arg", Some(*i)),
                InputKind::Ref(_) => ("ref", None),
                InputKind::Const(_) => ("const", None),
                InputKind::Grad(v) => ("grad", Some(*v)),
            };
            d.set_item("kind", kind)?;
            d.set_item("value", inp.value)?;
            d.set_item("name", inp.name.clone())?;
            d.set_item("position", extra)?;
            if let InputKind::Ref(t) | InputKind::Const(t) = &inp.kind {
                d.set_item("tensor", PyTensor::new(t.clone()))?;
            }
            l.append(d)?;
        }
        Ok(l)
    }
    /// Each node: `{"op", "attrs", "inputs", "outputs", "loc", "effect"}`.
    fn nodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for n in &self.g.nodes {
            let d = PyDict::new(py);
            d.set_item("op", n.call.name())?;
            d.set_item("attrs", crate::graph::attrs(&n.call))?;
            d.set_item("inputs", n.inputs.clone())?;
            d.set_item("outputs", n.outputs.clone())?;
            d.set_item("loc", n.loc.as_deref())?;
            d.set_item("effect", format!("{:?}", n.call.effect()).to_lowercase())?;
            l.append(d)?;
        }
        Ok(l)
    }
    /// Gradient effects: `[(target value, new value or None)]`.
    fn set_grads(&self) -> Vec<(usize, Option<usize>)> {
        self.g
            .set_grads
            .iter()
            .map(|s| (s.target, s.value))
            .collect()
    }
    /// Check `args` against the graph's inputs (shapes, dtypes, symbols) and
    /// prepare a plan for their sizes, without running anything.
    fn check(&self, args: &Bound<'_, PyAny>) -> PyResult<()> {
        let a = tensors(args)?;
        run(|| self.plan_for(&a).map(|_| ()))
    }
    /// Run the graph on `args` (tensors for its argument inputs, in position
    /// order) with `scalars` for its dynamic optimizer arguments.
    #[pyo3(signature = (args, scalars=vec![]))]
    fn run(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyAny>,
        scalars: Vec<f64>,
    ) -> PyResult<Vec<PyTensor>> {
        let a = tensors(args)?;
        let plan = run(|| self.plan_for(&a))?;
        let outs = super::run_detached(py, || plan.run_with(&a, &scalars))?;
        Ok(outs.into_iter().map(PyTensor::new).collect())
    }
    /// Run like `run`, also measuring each node: returns the outputs, each
    /// node's wall time in seconds, the bytes it allocated, and the bytes the
    /// run holds after it (relative to the start of the run).
    #[pyo3(signature = (args, scalars=vec![]))]
    #[allow(clippy::type_complexity)]
    fn profile(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyAny>,
        scalars: Vec<f64>,
    ) -> PyResult<(Vec<PyTensor>, Vec<f64>, Vec<u64>, Vec<i64>)> {
        let a = tensors(args)?;
        let plan = run(|| self.plan_for(&a))?;
        let (outs, p) = super::run_detached(py, || plan.profile(&a, &scalars))?;
        Ok((
            outs.into_iter().map(PyTensor::new).collect(),
            p.seconds,
            p.allocated,
            p.live,
        ))
    }
    /// Memory the graph needs per run, by buffer liveness: `{"peak_bytes",
    /// "total_bytes", "input_bytes", "output_bytes", "allocations", "in_place",
    /// "recycled", "live_after"}`.
    /// `args` fix the sizes of symbolic dimensions (not needed without symbols).
    #[pyo3(signature = (args=None))]
    fn memory_plan<'py>(
        &self,
        py: Python<'py>,
        args: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let m = self.plan_for_opt(args)?.memory_plan();
        let d = PyDict::new(py);
        d.set_item("peak_bytes", m.peak_bytes)?;
        d.set_item("total_bytes", m.total_bytes)?;
        d.set_item("input_bytes", m.input_bytes)?;
        d.set_item("output_bytes", m.output_bytes)?;
        d.set_item("allocations", m.allocations)?;
        d.set_item("in_place", m.in_place)?;
        d.set_item("recycled", m.recycled)?;
        d.set_item("live_after", m.live_after)?;
        Ok(d)
    }
    /// How runs of the plan for `args` use GPU replay (see the architecture
    /// notes): `None` for a CPU graph, else `{"replays", "captures",
    /// "dispatches", "plan_bytes", "reason"}`: runs replayed and captured so
    /// far, the dispatches and plan-owned bytes of the current replay (None
    /// without one), and why the last capture cannot be replayed or why runs
    /// never replay (random draws, outputs recording autograd, ...; None if they do).
    /// `args` as for `memory_plan`.
    #[pyo3(signature = (args=None))]
    fn gpu_replay<'py>(
        &self,
        py: Python<'py>,
        args: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        #[cfg(feature = "gpu")]
        {
            let plan = self.plan_for_opt(args)?;
            let Some(r) = plan.replayer() else {
                return Ok(None);
            };
            let r = r.lock();
            let d = PyDict::new(py);
            d.set_item("replays", r.replays)?;
            d.set_item("captures", r.captures)?;
            let cur = r.current();
            d.set_item("dispatches", cur.map(|c| c.0))?;
            d.set_item("plan_bytes", cur.map(|c| c.1))?;
            d.set_item("reason", r.reason.clone())?;
            Ok(Some(d))
        }
        #[cfg(not(feature = "gpu"))]
        {
            let _ = (py, args);
            Ok(None)
        }
    }
    /// Pairs of node indices `(i, j)` run at the same time on the thread pool:
    /// independent branches, each large enough to pay for the hand-off (the
    /// later node `j` runs early, beside `i`). `args` as for `memory_plan`.
    #[pyo3(signature = (args=None))]
    fn parallel_pairs(&self, args: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(usize, usize)>> {
        Ok(self.plan_for_opt(args)?.parallel_pairs())
    }
    /// The value number of a tensor captured by this graph's trace (None if it is not one).
    fn value_id(&self, t: &PyTensor) -> Option<usize> {
        self.lookup.as_ref().and_then(|l| l.get(&t.t))
    }
    /// The sub-graph needed for `outputs` (value numbers) and the nodes `keep_nodes`.
    /// With `keep_effects`, writes visible outside and `.grad` effects are kept too.
    #[pyo3(signature = (outputs, keep_nodes=vec![], keep_effects=true))]
    fn prune(
        &self,
        outputs: Vec<usize>,
        keep_nodes: Vec<usize>,
        keep_effects: bool,
    ) -> PyResult<PyGraph> {
        for &o in &outputs {
            if o >= self.g.values.len() {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "no value %{o} in the graph"
                )));
            }
        }
        let g = crate::graph::passes::prune(&self.g, &outputs, &keep_nodes, keep_effects);
        run(|| crate::graph::passes::verify(&g))?;
        let mut pg = PyGraph::new(g);
        pg.lookup = self.lookup.clone();
        Ok(pg)
    }
    /// The graph with the arguments at the given positions taking the given
    /// shapes, every value's shape derived again by its op's rules (for
    /// placeholders declared without a shape).
    fn retyped(&self, shapes: Vec<(usize, Vec<usize>)>) -> PyResult<PyGraph> {
        let g = run(|| crate::graph::exec::retype(&self.g, &shapes))?;
        let mut pg = PyGraph::new(g);
        pg.lookup = self.lookup.clone();
        Ok(pg)
    }
    /// The graph after the optimisation passes, and one report per pass run:
    /// `(graph, [{"pass", "nodes_before", "nodes_after", "detail"}])`.
    #[pyo3(signature = (dce=true, cse=true, fold=true, simplify=true, fuse=true, epilogue=true, inplace=true, parallel=true, verify=false))]
    #[allow(clippy::too_many_arguments)]
    fn optimize<'py>(
        &self,
        py: Python<'py>,
        dce: bool,
        cse: bool,
        fold: bool,
        simplify: bool,
        fuse: bool,
        epilogue: bool,
        inplace: bool,
        parallel: bool,
        verify: bool,
    ) -> PyResult<(PyGraph, Bound<'py, PyList>)> {
        let opts = crate::graph::passes::PassOptions {
            dce,
            cse,
            fold,
            simplify,
            fuse,
            epilogue,
            inplace,
            parallel,
            verify,
        };
        let (g, reports) = run(|| crate::graph::passes::optimize(&self.g, &opts))?;
        let l = PyList::empty(py);
        for r in reports {
            let d = PyDict::new(py);
            d.set_item("pass", r.pass)?;
            d.set_item("nodes_before", r.nodes_before)?;
            d.set_item("nodes_after", r.nodes_after)?;
            d.set_item("detail", r.detail)?;
            l.append(d)?;
        }
        let mut pg = PyGraph::new(g);
        pg.lookup = self.lookup.clone();
        Ok((pg, l))
    }
    /// The tensors the graph reads by reference (parameters, buffers,
    /// optimizer state), as `(name or None, tensor)` in input order.
    fn references(&self) -> Vec<(Option<String>, PyTensor)> {
        self.g
            .inputs
            .iter()
            .filter_map(|i| match &i.kind {
                InputKind::Ref(t) => Some((i.name.clone(), PyTensor::new(t.clone()))),
                _ => None,
            })
            .collect()
    }
    /// The graph as the saved-graph JSON and the tensors it names `t0`, `t1`, ...
    fn to_json(&self) -> PyResult<(String, Vec<PyTensor>)> {
        let (j, ts) = run(|| crate::graph::save::to_json(&self.g))?;
        Ok((j, ts.into_iter().map(PyTensor::new).collect()))
    }
    /// What each dynamic scalar slot supplies, by slot number.
    fn scalar_slots(&self) -> Vec<String> {
        crate::graph::save::scalar_slots(&self.g)
    }
    /// The device the graph runs on (that of its arguments, else of the
    /// first tensor it reads by reference; the CPU when it reads none).
    fn device(&self) -> String {
        self.g.device.to_string()
    }
    /// Record one run on `args` (GPU tensors) and write it to the directory
    /// `path` as a WebGPU bundle; returns the manifest as JSON text.
    #[pyo3(signature = (path, args, scalars=vec![]))]
    fn export_webgpu(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        args: &Bound<'_, PyAny>,
        scalars: Vec<f64>,
    ) -> PyResult<String> {
        let a = tensors(args)?;
        #[cfg(feature = "gpu")]
        {
            let mut names: Vec<String> = (0..a.len()).map(|k| format!("input{k}")).collect();
            for inp in &self.g.inputs {
                if let (InputKind::Arg(k), Some(n)) = (&inp.kind, &inp.name) {
                    if let Some(slot) = names.get_mut(*k) {
                        *slot = n.clone();
                    }
                }
            }
            let plan = run(|| self.plan_for(&a))?;
            super::run_detached(py, || {
                let b = crate::graph::bundle::export(&plan, &a, &scalars, &names)?;
                b.write(&path)?;
                serde_json::to_string(&b.manifest).map_err(|e| {
                    crate::error::Error::runtime("export_webgpu", format!("encoding failed: {e}"))
                })
            })
        }
        #[cfg(not(feature = "gpu"))]
        {
            let _ = (py, path, a, scalars);
            Err(pyo3::exceptions::PyRuntimeError::new_err(
                "export_webgpu: ferrograd was built without the `gpu` feature",
            ))
        }
    }
    /// Check the graph's structural invariants (raises on a violation).
    fn verify(&self) -> PyResult<()> {
        run(|| crate::graph::passes::verify(&self.g))
    }
    /// Number of plans (specialisations for distinct symbol sizes) built so far.
    #[getter]
    fn num_plans(&self) -> usize {
        self.plans.lock().len() + usize::from(self.plain.get().is_some())
    }
    fn __repr__(&self) -> String {
        format!(
            "<graph: {} inputs, {} nodes, {} outputs>",
            self.g.inputs.len(),
            self.g.nodes.len(),
            self.g.outputs.len()
        )
    }
}

/// A captured control-flow body (branch, loop condition or loop body).
#[pyclass(name = "_SubGraph", module = "ferrograd", frozen)]
pub struct PySubGraph {
    sub: Arc<SubGraph>,
    captures: Vec<Tensor>,
}

#[pymethods]
impl PySubGraph {
    /// Number of outputs.
    #[getter]
    fn num_outputs(&self) -> usize {
        self.sub.graph.outputs.len()
    }
    /// Number of op nodes.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.sub.graph.nodes.len()
    }
    /// Whether any output depends on a tensor that requires grad.
    #[getter]
    fn requires_grad(&self) -> bool {
        self.sub
            .graph
            .outputs
            .iter()
            .any(|&o| self.sub.graph.values[o].requires_grad)
    }
    /// A readable listing.
    fn dump(&self) -> String {
        self.sub.graph.dump()
    }
}

/// Start capturing a control-flow body whose arguments stand for `args`;
/// returns the tensors to call the body with.
#[pyfunction]
fn _trace_sub_begin(args: &Bound<'_, PyAny>) -> PyResult<Vec<PyTensor>> {
    let a = tensors(args)?;
    let twins = run(|| trace::begin_sub(&a))?;
    Ok(twins.into_iter().map(PyTensor::new).collect())
}

/// End a control-flow body's capture; `outputs` are its results.
#[pyfunction]
fn _trace_sub_end(outputs: &Bound<'_, PyAny>, n_args: usize) -> PyResult<PySubGraph> {
    let outs = tensors(outputs)?;
    let c = run(|| trace::end_sub(&outs))?;
    let n_caps = c.captures.len();
    Ok(PySubGraph {
        sub: Arc::new(SubGraph::new(c.graph, n_args, n_caps)),
        captures: c.captures,
    })
}

/// Abandon a control-flow body's capture.
#[pyfunction]
fn _trace_sub_abort() {
    trace::abort_sub();
}

fn type_list(g: &Graph) -> Vec<(Vec<String>, &'static str)> {
    g.outputs
        .iter()
        .map(|&o| (dims(g, &g.values[o].shape), g.values[o].dtype.name()))
        .collect()
}

fn fmt_types(t: &[(Vec<String>, &'static str)]) -> String {
    let parts: Vec<String> = t
        .iter()
        .map(|(s, d)| format!("{d}[{}]", s.join(", ")))
        .collect();
    format!("({})", parts.join(", "))
}

/// Record a `cond` node: `then_g` or `else_g` runs on `operands` by `pred`'s value.
#[pyfunction]
fn _trace_cond(
    pred: &PyTensor,
    operands: &Bound<'_, PyAny>,
    then_g: &PySubGraph,
    else_g: &PySubGraph,
) -> PyResult<Vec<PyTensor>> {
    let ops = tensors(operands)?;
    let (tt, et) = (type_list(&then_g.sub.graph), type_list(&else_g.sub.graph));
    if tt != et {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "fg.cond: the branches must return the same number of tensors with the same shapes and dtypes; true_fn returned {}, false_fn returned {}",
            fmt_types(&tt),
            fmt_types(&et)
        )));
    }
    if pred.t.numel() != 1 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "fg.cond: the condition must have one element, got shape {:?} ({})",
            pred.t.shape(),
            pred.t.dtype()
        )));
    }
    let mut ins = vec![pred.t.clone()];
    ins.extend(ops);
    ins.extend(then_g.captures.iter().cloned());
    ins.extend(else_g.captures.iter().cloned());
    let call = OpCall::Cond {
        then_g: Sub(then_g.sub.clone()),
        else_g: Sub(else_g.sub.clone()),
    };
    let outs = run(|| trace::record(call, &ins))?;
    Ok(outs.into_iter().map(PyTensor::new).collect())
}

/// Record a `while_loop` node over the loop variables `carry`.
#[pyfunction]
fn _trace_while(
    carry: &Bound<'_, PyAny>,
    cond: &PySubGraph,
    body: &PySubGraph,
) -> PyResult<Vec<PyTensor>> {
    let carry = tensors(carry)?;
    let ct = type_list(&cond.sub.graph);
    let shape_ok = ct.len() == 1 && {
        let v = &cond.sub.graph.values[cond.sub.graph.outputs[0]];
        v.shape.iter().product::<usize>() == 1
    };
    if !shape_ok {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "fg.while_loop: cond_fn must return one tensor with one element, got {}",
            fmt_types(&ct)
        )));
    }
    let bt = type_list(&body.sub.graph);
    let want: Vec<(Vec<String>, &'static str)> = trace::suspended(|| {
        carry
            .iter()
            .map(|t| {
                let shape: Vec<usize> = t.shape().to_vec();
                (dims(&body.sub.graph, &shape), t.dtype().name())
            })
            .collect()
    });
    if bt != want {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "fg.while_loop: body_fn must return the loop variables with unchanged shapes and dtypes; they are {}, body_fn returned {}",
            fmt_types(&want),
            fmt_types(&bt)
        )));
    }
    let mut ins = carry;
    ins.extend(cond.captures.iter().cloned());
    ins.extend(body.captures.iter().cloned());
    let call = OpCall::While {
        cond: Sub(cond.sub.clone()),
        body: Sub(body.sub.clone()),
    };
    let outs = run(|| trace::record(call, &ins))?;
    Ok(outs.into_iter().map(PyTensor::new).collect())
}

/// Write graph `g` to `path` (see `crate::graph::save`): `scalars` are its
/// dynamic scalar slots' current values, `metadata` extra strings.
#[pyfunction]
#[pyo3(signature = (g, path, scalars=vec![], metadata=std::collections::BTreeMap::new()))]
fn _graph_save(
    py: Python<'_>,
    g: &PyGraph,
    path: std::path::PathBuf,
    scalars: Vec<f64>,
    metadata: std::collections::BTreeMap<String, String>,
) -> PyResult<()> {
    let graph = g.g.clone();
    super::detach(py, || {
        run(|| crate::graph::save::save(&graph, &scalars, &metadata, &path))
    })
}

/// A loaded graph as Python sees it: `(graph, scalars when saved, slot
/// descriptions, metadata)`.
type LoadedTuple = (
    PyGraph,
    Vec<f64>,
    Vec<String>,
    std::collections::BTreeMap<String, String>,
);

fn loaded_tuple(l: crate::graph::save::Loaded) -> LoadedTuple {
    let slots = crate::graph::save::scalar_slots(&l.graph);
    (PyGraph::new(l.graph), l.scalars, slots, l.metadata)
}

/// Read a saved graph from `path` (see `LoadedTuple`).
#[pyfunction]
#[pyo3(signature = (path, device=None))]
fn _graph_load(
    py: Python<'_>,
    path: std::path::PathBuf,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<LoadedTuple> {
    let dev = load_device(device)?;
    let l = super::detach(py, || {
        run(|| {
            let l = crate::graph::save::load(&path)?;
            let d = dev.unwrap_or(l.device);
            l.on(d)
        })
    })?;
    Ok(loaded_tuple(l))
}

/// The device asked of a load (`None`: the one the graph was saved on).
fn load_device(device: Option<&Bound<'_, PyAny>>) -> PyResult<Option<crate::tensor::Device>> {
    match device {
        Some(d) if !d.is_none() => Ok(Some(super::parse_device(Some(d))?)),
        _ => Ok(None),
    }
}

/// Read a saved graph from bytes (as `_graph_load`).
#[pyfunction]
#[pyo3(signature = (data, device=None))]
fn _graph_loads(data: &[u8], device: Option<&Bound<'_, PyAny>>) -> PyResult<LoadedTuple> {
    let dev = load_device(device)?;
    Ok(loaded_tuple(run(|| {
        let l = crate::graph::save::from_bytes(data)?;
        let d = dev.unwrap_or(l.device);
        l.on(d)
    })?))
}

/// `fg.compile`'s signature of a call whose arguments are all plain tensors:
/// per tensor `("T", dtype name, shape, requires_grad, device name, is_leaf)`,
/// the same tuples its Python path builds; None when an argument is anything
/// else (a number, a list, a `Tensor` subclass such as `Parameter`).
#[pyfunction]
fn _tensor_signature<'py>(
    py: Python<'py>,
    args: &Bound<'py, pyo3::types::PyTuple>,
) -> PyResult<Option<Bound<'py, pyo3::types::PyTuple>>> {
    let tensor_type = py.get_type::<PyTensor>();
    let tag = pyo3::intern!(py, "T");
    let mut keys = Vec::with_capacity(args.len());
    for a in args.iter() {
        if !a.get_type().is(&tensor_type) {
            return Ok(None);
        }
        let pt = a.cast::<PyTensor>()?.borrow();
        let t = &pt.t;
        let shape = pyo3::types::PyTuple::new(py, t.shape())?;
        let leaf = t.meta().is_none_or(|m| m.is_leaf());
        let key = (
            tag,
            t.dtype().name(),
            shape,
            t.requires_grad(),
            trace::run_device(t).name(),
            leaf,
        )
            .into_pyobject(py)?;
        keys.push(key);
    }
    Ok(Some(pyo3::types::PyTuple::new(py, keys)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_tensor_signature, m)?)?;
    m.add_function(wrap_pyfunction!(_graph_save, m)?)?;
    m.add_function(wrap_pyfunction!(_graph_load, m)?)?;
    m.add_function(wrap_pyfunction!(_graph_loads, m)?)?;
    m.add_class::<PyGraph>()?;
    m.add_class::<PySubGraph>()?;
    m.add_function(wrap_pyfunction!(_trace_sub_begin, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_sub_end, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_sub_abort, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_cond, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_while, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_begin, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_end, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_abort, m)?)?;
    m.add_function(wrap_pyfunction!(_tracing, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_set_active, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_recording, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_arg, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_placeholder, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_constant, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_reference, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_value_id, m)?)?;
    m.add_function(wrap_pyfunction!(_trace_num_nodes, m)?)?;
    Ok(())
}

/// This thread's autocast dtypes, CPU then GPU (part of a compiled call's signature).
fn autocast_state() -> [Option<DType>; 2] {
    [
        crate::ops::autocast::get(false),
        crate::ops::autocast::get(true),
    ]
}
