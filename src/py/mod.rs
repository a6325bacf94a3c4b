//! PyO3 bindings: the `ferrograd._core` extension module.
//!
//! Kept apart from the core: this layer parses Python arguments, maps
//! [`Error`] to Python exceptions, turns panics into `RuntimeError`, releases
//! the GIL around heavy kernels, and wraps results. Each op family has its own
//! file adding `#[pymethods]` to [`PyTensor`] and functions to the module.

mod autograd;
mod convert;
mod creation;
mod dlpack;
mod function;
mod gpu;
mod graph;
mod index;
mod linalg;
mod methods;
mod optim;
mod profile;
mod random;
mod reduce;
mod shared;
mod sort;
mod surface;

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{
    PyIndexError, PyKeyboardInterrupt, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::error::Error;
use crate::ops::elementwise::Operand;
use crate::tensor::{DType, Device, Scalar, Tensor};

pub use convert::tensor_from_py;

pyo3::create_exception!(
    ferrograd,
    TraceError,
    pyo3::exceptions::PyRuntimeError,
    "A tensor's value was needed in Python while a graph was being captured (e.g. `bool(t)`, `t.item()`, data-dependent control flow)."
);

/// Map a core error to the Python exception class users expect.
pub fn to_pyerr(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Shape { .. } | Error::Value { .. } => PyValueError::new_err(msg),
        Error::DType { .. } => PyTypeError::new_err(msg),
        Error::Index { .. } => PyIndexError::new_err(msg),
        Error::Memory { .. } => PyMemoryError::new_err(msg),
        Error::Runtime { .. } => PyRuntimeError::new_err(msg),
        Error::Symbolic { .. } => TraceError::new_err(msg),
        // The exception the signal handler raised, when one did (it is kept
        // while the work stops), else KeyboardInterrupt.
        Error::Interrupted { .. } => PENDING_SIGNAL
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| PyKeyboardInterrupt::new_err(msg)),
    }
}

fn panic_msg(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Run core work, turning errors and panics into Python exceptions.
#[inline]
pub fn run<T>(f: impl FnOnce() -> crate::Result<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_pyerr(e)),
        Err(p) => Err(PyRuntimeError::new_err(format!(
            "internal error (please report): {}",
            panic_msg(p)
        ))),
    }
}

/// Elements above which the GIL is released while a kernel runs.
const GIL_RELEASE_MIN: usize = 1 << 14;

/// Like [`run`], releasing the GIL when `work` elements justify it.
#[inline]
pub fn run_heavy<T: Send>(
    py: Python<'_>,
    work: usize,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> PyResult<T> {
    if work >= GIL_RELEASE_MIN {
        run_detached(py, f)
    } else {
        run(f)
    }
}

thread_local! {
    /// The exception a signal handler raised while core work ran detached.
    static PENDING_SIGNAL: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// True while this thread runs core work detached from the interpreter
    /// (see [`detach`]).
    static DETACHED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `py.detach(f)`, noting on this thread that it is detached meanwhile (so
/// that core hooks called from `f` do not wait for the interpreter).
pub fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    py.detach(|| {
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                DETACHED.with(|d| d.set(self.0));
            }
        }
        let _restore = Restore(DETACHED.with(|d| d.replace(true)));
        f()
    })
}

/// The user's `file:line` for a GPU op being queued: the innermost Python
/// frame outside the ferrograd package. Only on a thread attached to the
/// interpreter already (it never waits for it: the GPU batch lock is held):
/// not while detached, nor on the core's worker threads.
#[cfg(feature = "gpu")]
fn location_hook() -> Option<std::sync::Arc<str>> {
    if DETACHED.with(|d| d.get()) || crate::par::on_worker() {
        return None;
    }
    Python::attach(|py| {
        let f = py
            .import("ferrograd._capture")
            .and_then(|m| m.getattr("_user_location"))
            .and_then(|f| f.call0())
            .ok()?;
        f.extract::<Option<String>>().ok().flatten().map(Into::into)
    })
}

/// The core's signal hook: run Python's signal handlers (main thread only);
/// an exception they raise (KeyboardInterrupt) is kept to be raised when the
/// core work returns, and stops that work.
fn signal_hook() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            PENDING_SIGNAL.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    })
}

/// The exception a signal handler raised during core work, if any, in place
/// of the work's result.
pub fn with_pending_signal<T>(r: PyResult<T>) -> PyResult<T> {
    match PENDING_SIGNAL.with(|p| p.borrow_mut().take()) {
        Some(e) => Err(e),
        None => r,
    }
}

/// Run core work with the GIL released; `Ctrl-C` meanwhile stops it at a
/// check point (see [`crate::par`]) and raises KeyboardInterrupt in place of
/// its result.
pub fn run_detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> PyResult<T> {
    with_pending_signal(detach(py, || run(f)))
}

/// The tensor type seen from Python (`ferrograd.Tensor`).
#[pyclass(name = "Tensor", module = "ferrograd", weakref, subclass)]
pub struct PyTensor {
    pub t: Tensor,
}

impl PyTensor {
    #[inline]
    pub fn new(t: Tensor) -> PyTensor {
        PyTensor { t }
    }
}

/// A dtype object (`ferrograd.float32`, ...).
#[pyclass(
    name = "dtype",
    module = "ferrograd",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub struct PyDType {
    pub d: DType,
}

#[pymethods]
impl PyDType {
    /// Bytes per element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.d.itemsize()
    }
    /// True for float16, bfloat16, float32 and float64.
    #[getter]
    fn is_floating_point(&self) -> bool {
        self.d.is_floating_point()
    }
    /// True for the signed integer and floating dtypes (False for bool and uint8).
    #[getter]
    fn is_signed(&self) -> bool {
        !matches!(self.d, DType::Bool | DType::U8)
    }
    /// True for bool.
    #[getter]
    fn is_bool(&self) -> bool {
        self.d == DType::Bool
    }
    /// The dtype's name (`"float32"`).
    #[getter]
    fn name(&self) -> &'static str {
        self.d.name()
    }
    fn __repr__(&self) -> String {
        format!("ferrograd.{}", self.d.name())
    }
    fn __str__(&self) -> String {
        format!("ferrograd.{}", self.d.name())
    }
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, (String,))> {
        let f = py.import("ferrograd")?.getattr("_dtype_from_name")?;
        Ok((f.unbind(), (self.d.name().to_string(),)))
    }
}

/// Parse a `dtype=` argument: a ferrograd dtype, a name, or a NumPy dtype.
pub fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    if let Ok(d) = obj.cast::<PyDType>() {
        return Ok(d.get().d);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_str()?;
        return DType::from_name(s.strip_prefix("ferrograd.").unwrap_or(s))
            .ok_or_else(|| PyTypeError::new_err(format!("unknown dtype {s:?}")));
    }
    // Python builtins (before names: `int.__name__` is "int", which names int32).
    let py = obj.py();
    let b = py.import("builtins")?;
    if obj.is(&b.getattr("float")?) {
        return Ok(DType::F32);
    }
    if obj.is(&b.getattr("int")?) {
        return Ok(DType::I64);
    }
    if obj.is(&b.getattr("bool")?) {
        return Ok(DType::Bool);
    }
    // NumPy dtypes and scalar types: go through their name.
    if let Ok(name) = obj.getattr("name").or_else(|_| obj.getattr("__name__")) {
        if let Ok(s) = name.extract::<String>() {
            if let Some(d) = DType::from_name(&s) {
                return Ok(d);
            }
        }
    }
    Err(PyTypeError::new_err(format!(
        "expected a dtype, got {}",
        obj.repr()?
    )))
}

pub fn parse_dtype_opt(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DType>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => parse_dtype(o).map(Some),
    }
}

/// Parse a `device=` argument: `"cpu"`, `"gpu"`, `"webgpu"`, `"gpu:1"` or a device object.
pub fn parse_device(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    let Some(obj) = obj else {
        return Ok(Device::Cpu);
    };
    if obj.is_none() {
        return Ok(Device::Cpu);
    }
    if let Ok(d) = obj.cast::<PyDevice>() {
        return Ok(d.get().d);
    }
    let s: String = obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a device such as 'cpu' or 'gpu', got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    parse_device_str(&s)
}

pub fn parse_device_str(s: &str) -> PyResult<Device> {
    let (name, idx) = match s.split_once(':') {
        Some((n, i)) => (
            n,
            i.parse::<u32>()
                .map_err(|_| PyValueError::new_err(format!("invalid device string {s:?}")))?,
        ),
        None => (s, 0),
    };
    match name {
        "cpu" => Ok(Device::Cpu),
        // "cuda" names the GPU when asked for explicitly (`t.to("cuda")`,
        // `fg.device("cuda")`): ferrograd's GPU is WebGPU, standing in for it.
        "gpu" | "webgpu" | "wgpu" | "cuda" => Ok(Device::Gpu(idx)),
        "meta" => Ok(Device::Meta),
        _ => Err(PyValueError::new_err(format!(
            "unknown device {s:?}; expected 'cpu' or 'gpu' (aliases 'webgpu', 'cuda')"
        ))),
    }
}

/// A device object (`ferrograd.device("cpu")`).
#[pyclass(
    name = "device",
    module = "ferrograd",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub struct PyDevice {
    pub d: Device,
}

#[pymethods]
impl PyDevice {
    #[new]
    fn py_new(spec: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyDevice {
            d: parse_device(Some(spec))?,
        })
    }
    /// `"cpu"` or `"gpu"`.
    #[getter]
    fn r#type(&self) -> &'static str {
        match self.d {
            Device::Cpu => "cpu",
            Device::Gpu(_) => "gpu",
            Device::Meta => "meta",
        }
    }
    #[getter]
    fn index(&self) -> Option<u32> {
        match self.d {
            Device::Cpu | Device::Meta => None,
            Device::Gpu(i) => Some(i),
        }
    }
    fn __repr__(&self) -> String {
        format!("device(type='{}')", self.d)
    }
    fn __str__(&self) -> String {
        self.d.name()
    }
}

/// Extract a tensor argument, converting lists, scalars and arrays when needed.
pub fn as_tensor(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.borrow().t.clone());
    }
    tensor_from_py(obj, None)
}

/// Extract a binary-op operand: a tensor, or a Python scalar kept weak for promotion.
pub fn as_operand(obj: &Bound<'_, PyAny>) -> PyResult<Operand> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(Operand::T(t.borrow().t.clone()));
    }
    if let Some(s) = as_scalar(obj) {
        return Ok(Operand::S(s));
    }
    Ok(Operand::T(tensor_from_py(obj, None)?))
}

/// A Python bool / int / float (and NumPy scalars of those kinds) as a [`Scalar`].
pub fn as_scalar(obj: &Bound<'_, PyAny>) -> Option<Scalar> {
    use pyo3::types::{PyBool, PyFloat, PyInt};
    if obj.is_instance_of::<PyBool>() {
        return obj.extract::<bool>().ok().map(Scalar::Bool);
    }
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<i64>().ok().map(Scalar::Int);
    }
    if obj.is_instance_of::<PyFloat>() {
        return obj.extract::<f64>().ok().map(Scalar::Float);
    }
    None
}

/// Accept `f(2, 3)` and `f((2, 3))` / `f([2, 3])` alike.
pub fn varargs_ints(args: &Bound<'_, PyTuple>) -> PyResult<Vec<isize>> {
    if args.len() == 1 {
        let a = args.get_item(0)?;
        if a.extract::<isize>().is_err() {
            return a.extract::<Vec<isize>>();
        }
    }
    args.extract::<Vec<isize>>()
}

/// Shape argument for factories (`zeros(2, 3)`, `zeros((2, 3))`), non-negative.
pub fn shape_args(op: &str, args: &Bound<'_, PyTuple>) -> PyResult<Vec<usize>> {
    let v = varargs_ints(args)?;
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyValueError::new_err(format!("{op}: negative dimension {d} in shape {v:?}"))
            })
        })
        .collect()
}

/// The registry as a list of dicts (name, family, kind, dtypes, views, mutates, ...).
#[pyfunction]
fn registry(py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
    use pyo3::types::PyDict;
    crate::ops::registry::all()
        .into_iter()
        .map(|o| {
            let d = PyDict::new(py);
            d.set_item("name", o.name)?;
            d.set_item("family", o.family)?;
            d.set_item("kind", o.kind.name())?;
            d.set_item(
                "dtypes",
                o.dtypes.list().iter().map(|d| d.name()).collect::<Vec<_>>(),
            )?;
            let gpu = o.gpu_dtypes().list();
            let devices = if gpu.is_empty() {
                vec!["cpu"]
            } else {
                vec!["cpu", "gpu"]
            };
            d.set_item("devices", devices)?;
            d.set_item(
                "gpu_dtypes",
                gpu.iter().map(|d| d.name()).collect::<Vec<_>>(),
            )?;
            d.set_item("views", o.views)?;
            d.set_item("mutates", o.mutates)?;
            d.set_item("data_dependent", o.data_dependent)?;
            d.set_item("differentiable", o.differentiable)?;
            Ok(d.into_any().unbind())
        })
        .collect()
}

/// The unary op table's metadata as a list of dicts (variant, name, params,
/// out, dtypes, method, method_inplace, doc, backward, onnx): what the ONNX
/// exporter and the stub generator read.
#[pyfunction]
fn _unary_ops(py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
    use pyo3::types::PyDict;
    crate::kernel::unary::INFO
        .iter()
        .map(|o| {
            let d = PyDict::new(py);
            d.set_item("variant", o.variant)?;
            d.set_item("name", o.name)?;
            d.set_item("params", o.params.to_vec())?;
            d.set_item("tuple", o.tuple)?;
            d.set_item("out", o.out.name())?;
            d.set_item("dtypes", o.dtypes)?;
            d.set_item("method", o.method)?;
            d.set_item("method_inplace", o.method_inplace)?;
            d.set_item("doc", o.doc)?;
            d.set_item("backward", o.backward)?;
            d.set_item("onnx", o.onnx)?;
            Ok(d.into_any().unbind())
        })
        .collect()
}

/// The general ops' definitions (`crate::kernel::general::INFO`): variant,
/// ONNX mapping and Python entry points (name, signature, returns, doc,
/// method), which the ONNX exporter and the stub check read.
#[pyfunction]
fn _general_ops(py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
    use pyo3::types::PyDict;
    crate::kernel::general::INFO
        .iter()
        .map(|o| {
            let d = PyDict::new(py);
            d.set_item("variant", o.variant)?;
            d.set_item("onnx", o.onnx)?;
            let py_sigs =
                o.py.iter()
                    .map(|s| {
                        let e = PyDict::new(py);
                        e.set_item("name", s.name)?;
                        e.set_item("signature", s.signature)?;
                        e.set_item("returns", s.returns)?;
                        e.set_item("doc", s.doc)?;
                        e.set_item("method", s.method)?;
                        Ok(e.into_any().unbind())
                    })
                    .collect::<PyResult<Vec<_>>>()?;
            d.set_item("py", py_sigs)?;
            Ok(d.into_any().unbind())
        })
        .collect()
}

/// Whether `(op, dtype, device)` is supported.
#[pyfunction]
fn supports(
    op: &str,
    dtype: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let d = parse_dtype(dtype)?;
    let dev = parse_device(device)?;
    let info = crate::ops::registry::find(op)
        .ok_or_else(|| PyValueError::new_err(format!("unknown op {op:?}")))?;
    Ok(info.supports(d, dev))
}

/// The SIMD level in use (`"avx512"`, `"avx2"` or `"scalar"`).
#[pyfunction]
fn cpu_level() -> &'static str {
    crate::backend::cpu::simd::level().name()
}

/// Force the SIMD level (clamped to what the CPU supports); returns the level set.
#[pyfunction]
fn set_cpu_level(level: &str) -> PyResult<&'static str> {
    use crate::backend::cpu::simd::{set_level, Level};
    let l = match level {
        "scalar" => Level::Scalar,
        "avx2" => Level::Avx2,
        "avx512" => Level::Avx512,
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown cpu level {level:?}; use scalar, avx2 or avx512"
            )))
        }
    };
    Ok(set_level(l).name())
}

/// Memory statistics per device: the CPU allocator's bytes in use, cached
/// and peak, its cache limit, allocations and cache hits (`cpu.*`), and,
/// once the GPU has been used, its buffer pool's bytes in use, cached and
/// peak and buffer counts (`gpu.*`).
#[pyfunction]
fn memory_stats(py: Python<'_>) -> PyResult<Py<PyAny>> {
    use pyo3::types::PyDict;
    let s = crate::tensor::storage::memory_stats();
    let d = PyDict::new(py);
    d.set_item("cpu.in_use_bytes", s.in_use)?;
    d.set_item("cpu.cached_bytes", s.cached)?;
    d.set_item("cpu.peak_bytes", s.peak)?;
    d.set_item("cpu.cache_limit_bytes", s.cache_limit)?;
    d.set_item("cpu.allocations", s.allocations)?;
    d.set_item("cpu.cache_hits", s.cache_hits)?;
    #[cfg(feature = "gpu")]
    if let Some(g) = crate::backend::wgpu::context::started() {
        let s = g.stats();
        d.set_item("gpu.in_use_bytes", s.bytes_in_use)?;
        d.set_item("gpu.cached_bytes", s.bytes_cached)?;
        d.set_item("gpu.peak_bytes", s.peak_bytes)?;
        d.set_item("gpu.buffers_in_use", s.buffers_in_use)?;
        d.set_item("gpu.buffers_cached", s.buffers_cached)?;
    }
    Ok(d.into_any().unbind())
}

/// Restart peak tracking (`cpu.peak_bytes`, `gpu.peak_bytes`) from the bytes in use now.
#[pyfunction]
fn reset_peak_memory_stats() {
    crate::tensor::storage::reset_peak();
    #[cfg(feature = "gpu")]
    if let Some(g) = crate::backend::wgpu::context::started() {
        g.reset_peak();
    }
}

/// Limit the bytes the CPU cache keeps for reuse (0 keeps nothing); blocks
/// over the limit are returned to the system at once.
#[pyfunction]
fn set_cache_limit(nbytes: usize) {
    crate::tensor::storage::set_cache_limit(nbytes);
}

/// Compute every deferred elementwise result now (see `ops::defer`).
#[pyfunction]
fn synchronize(py: Python<'_>) -> PyResult<()> {
    if crate::ops::defer::idle() {
        return Ok(());
    }
    run_detached(py, || {
        crate::ops::defer::flush();
        Ok(())
    })
}

/// Set the smallest output (elements) whose elementwise op is deferred;
/// `None` turns deferral off. Returns the previous setting.
#[pyfunction]
#[pyo3(signature = (n))]
fn _set_defer_min(n: Option<usize>) -> Option<usize> {
    let old = crate::ops::defer::set_min_elements(n.unwrap_or(usize::MAX));
    (old != usize::MAX).then_some(old)
}

/// Whether float32 convolutions may take the direct kernel (the default)
/// instead of im2col + GEMM; sets it when `enabled` is given and returns the
/// previous setting (for side-by-side measurements and tests).
#[pyfunction]
#[pyo3(signature = (enabled=None))]
fn _direct_conv(enabled: Option<bool>) -> bool {
    crate::backend::cpu::conv::set_direct(enabled)
}

/// (ops deferred, ops inlined into a later op, queue runs) since start.
#[pyfunction]
fn _defer_stats() -> (usize, usize, usize) {
    crate::ops::defer::stats()
}

/// Return cached CPU blocks (and cached GPU buffers) to the system.
#[pyfunction]
fn empty_cache() {
    crate::tensor::storage::empty_cache();
    #[cfg(feature = "gpu")]
    if let Some(g) = crate::backend::wgpu::context::started() {
        g.empty_cache();
    }
}

/// Number of threads in the CPU pool.
#[pyfunction]
fn get_num_threads() -> usize {
    crate::par::threads()
}

/// Set the number of CPU threads kernels run on (at least 1).
#[pyfunction]
fn set_num_threads(n: usize) -> PyResult<()> {
    run(|| crate::par::set_threads(n))
}

/// Make every CPU result independent of the thread count and bit-identical
/// run to run (work is partitioned the same way whatever the pool's size,
/// and partial results are combined in a fixed order). `warn_only` is
/// accepted as in PyTorch; no op here lacks a deterministic form, so it
/// changes nothing.
#[pyfunction]
#[pyo3(signature = (mode, *, warn_only = false))]
fn use_deterministic_algorithms(mode: bool, warn_only: bool) {
    let _ = warn_only;
    crate::par::set_deterministic(mode);
}

/// Whether [`use_deterministic_algorithms`] is on.
#[pyfunction]
fn are_deterministic_algorithms_enabled() -> bool {
    crate::par::deterministic()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::par::set_signal_hook(signal_hook);
    #[cfg(feature = "gpu")]
    crate::backend::wgpu::context::set_location_hook(location_hook);
    crate::ops::defer::init_from_env();
    m.add_class::<PyTensor>()?;
    m.add_class::<PyDType>()?;
    m.add_class::<PyDevice>()?;
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    for d in DType::ALL {
        m.add(d.name(), PyDType { d })?;
    }
    m.add_function(wrap_pyfunction!(registry, m)?)?;
    m.add_function(wrap_pyfunction!(_unary_ops, m)?)?;
    m.add_function(wrap_pyfunction!(_general_ops, m)?)?;
    m.add_function(wrap_pyfunction!(supports, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_level, m)?)?;
    m.add_function(wrap_pyfunction!(set_cpu_level, m)?)?;
    m.add_function(wrap_pyfunction!(memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(empty_cache, m)?)?;
    m.add_function(wrap_pyfunction!(reset_peak_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(set_cache_limit, m)?)?;
    m.add_function(wrap_pyfunction!(synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(_set_defer_min, m)?)?;
    m.add_function(wrap_pyfunction!(_direct_conv, m)?)?;
    m.add_function(wrap_pyfunction!(_defer_stats, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(use_deterministic_algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(are_deterministic_algorithms_enabled, m)?)?;
    autograd::register(m)?;
    convert::register(m)?;
    creation::register(m)?;
    methods::register(m)?;
    linalg::register(m)?;
    reduce::register(m)?;
    random::register(m)?;
    dlpack::register(m)?;
    index::register(m)?;
    optim::register(m)?;
    graph::register(m)?;
    gpu::register(m)?;
    surface::register(m)?;
    shared::register(m)?;
    function::register(m)?;
    profile::register(m)?;
    Ok(())
}
