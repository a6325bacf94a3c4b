//! DLPack interop: `Tensor.__dlpack__`, `Tensor.__dlpack_device__` and
//! `from_dlpack`, zero-copy in both directions (CPU memory).
//!
//! The C structures are declared here from the DLPack specification. Export
//! hands out a `DLManagedTensor` (capsule `"dltensor"`) or, when the consumer
//! asks for `max_version >= (1, 0)`, a `DLManagedTensorVersioned` (capsule
//! `"dltensor_versioned"`, carrying the read-only flag). Its manager context
//! owns a clone of the tensor (keeping the storage alive) and the shape and
//! stride arrays; the deleter frees all of it. Import renames the capsule to
//! the "used" name and wraps the memory as foreign storage whose owner calls
//! the producer's deleter when the last tensor using it goes away.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::{parse_device, run, PyTensor};
use crate::tensor::{DType, Device, Layout, Storage, Tensor};

// ---------------------------------------------------------------------------
// The DLPack ABI
// ---------------------------------------------------------------------------

const KDL_CPU: i32 = 1;

const KDL_INT: u8 = 0;
const KDL_UINT: u8 = 1;
const KDL_FLOAT: u8 = 2;
const KDL_BFLOAT: u8 = 4;
const KDL_BOOL: u8 = 6;

const FLAG_READ_ONLY: u64 = 1;
const FLAG_IS_COPIED: u64 = 1 << 1;

/// The DLPack major version we read and write.
const DLPACK_MAJOR: u32 = 1;
const DLPACK_MINOR: u32 = 0;

const NAME: &CStr = c"dltensor";
const USED_NAME: &CStr = c"used_dltensor";
const NAME_V: &CStr = c"dltensor_versioned";
const USED_NAME_V: &CStr = c"used_dltensor_versioned";

#[repr(C)]
#[derive(Copy, Clone)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Copy, Clone)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    /// In elements; NULL means contiguous row-major.
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
#[derive(Copy, Clone)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::Bool => (KDL_BOOL, 8),
        DType::U8 => (KDL_UINT, 8),
        DType::I8 => (KDL_INT, 8),
        DType::I16 => (KDL_INT, 16),
        DType::I32 => (KDL_INT, 32),
        DType::I64 => (KDL_INT, 64),
        DType::F16 => (KDL_FLOAT, 16),
        DType::BF16 => (KDL_BFLOAT, 16),
        DType::F32 => (KDL_FLOAT, 32),
        DType::F64 => (KDL_FLOAT, 64),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn dtype_from_dl(t: DLDataType) -> PyResult<DType> {
    let d = match (t.code, t.bits, t.lanes) {
        (KDL_BOOL, 8, 1) => DType::Bool,
        (KDL_UINT, 8, 1) => DType::U8,
        (KDL_INT, 8, 1) => DType::I8,
        (KDL_INT, 16, 1) => DType::I16,
        (KDL_INT, 32, 1) => DType::I32,
        (KDL_INT, 64, 1) => DType::I64,
        (KDL_FLOAT, 16, 1) => DType::F16,
        (KDL_BFLOAT, 16, 1) => DType::BF16,
        (KDL_FLOAT, 32, 1) => DType::F32,
        (KDL_FLOAT, 64, 1) => DType::F64,
        (code, bits, lanes) => {
            let kind = match code {
                KDL_INT => "int",
                KDL_UINT => "uint",
                KDL_FLOAT => "float",
                KDL_BFLOAT => "bfloat",
                KDL_BOOL => "bool",
                3 => "opaque",
                5 => "complex",
                _ => "unknown",
            };
            let lanes = if lanes == 1 {
                String::new()
            } else {
                format!(" x{lanes} lanes")
            };
            return Err(PyTypeError::new_err(format!(
                "from_dlpack: unsupported dtype {kind}{bits}{lanes} (code {code}); supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64"
            )));
        }
    };
    Ok(d)
}

fn device_name(t: i32) -> &'static str {
    match t {
        1 => "CPU",
        2 => "CUDA",
        3 => "CUDA host",
        4 => "OpenCL",
        7 => "Vulkan",
        8 => "Metal",
        9 => "VPI",
        10 => "ROCm",
        11 => "ROCm host",
        13 => "CUDA managed",
        14 => "oneAPI",
        15 => "WebGPU",
        16 => "Hexagon",
        _ => "unknown",
    }
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/// What a producer capsule owns: the tensor (keeps storage alive) and the
/// shape/stride arrays `dl_tensor` points into.
struct ExportCtx {
    _tensor: Tensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

fn export_ctx(t: &Tensor) -> (Box<ExportCtx>, DLTensor) {
    let mut ctx = Box::new(ExportCtx {
        _tensor: t.clone(),
        shape: t.shape().iter().map(|&d| d as i64).collect(),
        strides: t.strides().iter().map(|&s| s as i64).collect(),
    });
    let data = t.export_byte_ptr();
    let dl = DLTensor {
        data: data as *mut c_void,
        device: DLDevice {
            device_type: KDL_CPU,
            device_id: 0,
        },
        ndim: t.ndim() as i32,
        dtype: dl_dtype(t.dtype()),
        shape: ctx.shape.as_mut_ptr(),
        strides: ctx.strides.as_mut_ptr(),
        byte_offset: 0,
    };
    (ctx, dl)
}

unsafe extern "C" fn delete_managed(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` and its context were made by `Box::into_raw` in `export`,
    // and the deleter runs once (by the consumer or the capsule destructor).
    let m = Box::from_raw(m);
    drop(Box::from_raw(m.manager_ctx as *mut ExportCtx));
}

unsafe extern "C" fn delete_managed_v(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // SAFETY: as in `delete_managed`.
    let m = Box::from_raw(m);
    drop(Box::from_raw(m.manager_ctx as *mut ExportCtx));
}

/// Capsule destructor: frees the tensor unless a consumer took it (renamed the capsule).
unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(cap, NAME.as_ptr()) == 1 {
        let m = ffi::PyCapsule_GetPointer(cap, NAME.as_ptr()) as *mut DLManagedTensor;
        if !m.is_null() {
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

unsafe extern "C" fn capsule_destructor_v(cap: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(cap, NAME_V.as_ptr()) == 1 {
        let m = ffi::PyCapsule_GetPointer(cap, NAME_V.as_ptr()) as *mut DLManagedTensorVersioned;
        if !m.is_null() {
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

/// Wrap `t` in a new capsule (versioned or not).
fn export(py: Python<'_>, t: &Tensor, versioned: bool, copied: bool) -> PyResult<Py<PyAny>> {
    let (ctx, dl) = export_ctx(t);
    let ctx = Box::into_raw(ctx) as *mut c_void;
    // SAFETY: the pointers come from Box::into_raw and are freed by the
    // matching deleter exactly once; the capsule names are 'static.
    unsafe {
        let cap = if versioned {
            let mut flags = 0;
            if t.storage().is_readonly() {
                flags |= FLAG_READ_ONLY;
            }
            if copied {
                flags |= FLAG_IS_COPIED;
            }
            let m = Box::into_raw(Box::new(DLManagedTensorVersioned {
                version: DLPackVersion {
                    major: DLPACK_MAJOR,
                    minor: DLPACK_MINOR,
                },
                manager_ctx: ctx,
                deleter: Some(delete_managed_v),
                flags,
                dl_tensor: dl,
            }));
            let cap = ffi::PyCapsule_New(
                m as *mut c_void,
                NAME_V.as_ptr(),
                Some(capsule_destructor_v),
            );
            if cap.is_null() {
                delete_managed_v(m);
            }
            cap
        } else {
            let m = Box::into_raw(Box::new(DLManagedTensor {
                dl_tensor: dl,
                manager_ctx: ctx,
                deleter: Some(delete_managed),
            }));
            let cap = ffi::PyCapsule_New(m as *mut c_void, NAME.as_ptr(), Some(capsule_destructor));
            if cap.is_null() {
                delete_managed(m);
            }
            cap
        };
        if cap.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap).unbind())
    }
}

fn parse_dl_device(obj: &Bound<'_, PyAny>) -> PyResult<(i32, i32)> {
    obj.extract::<(i32, i32)>().map_err(|_| {
        PyTypeError::new_err(format!(
            "__dlpack__: dl_device must be a (device_type, device_id) tuple, got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}

#[pymethods]
impl PyTensor {
    /// Export as a DLPack capsule sharing this tensor's memory (CPU only).
    ///
    /// `max_version >= (1, 0)` gives a versioned capsule (which can flag
    /// read-only memory); otherwise the legacy `"dltensor"` capsule.
    /// `copy=True` exports a fresh copy; `copy=False` never copies.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let t = &self.t;
        if t.device() != Device::Cpu {
            return Err(PyBufferError::new_err(format!(
                "__dlpack__: only CPU tensors can be exported, this one is on {}",
                t.device()
            )));
        }
        if let Some(s) = stream {
            if !s.is_none() {
                return Err(PyBufferError::new_err(
                    "__dlpack__: stream must be None for CPU tensors",
                ));
            }
        }
        if let Some(d) = dl_device {
            if !d.is_none() {
                let (ty, id) = parse_dl_device(d)?;
                if (ty, id) != (KDL_CPU, 0) {
                    return Err(PyBufferError::new_err(format!(
                        "__dlpack__: cannot export to device ({ty}, {id}) ({}); only CPU (1, 0) is supported",
                        device_name(ty)
                    )));
                }
            }
        }
        let versioned = match max_version {
            Some(v) if !v.is_none() => {
                let (major, _minor): (u32, u32) = v.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "__dlpack__: max_version must be a (major, minor) tuple, got {}",
                        v.repr().map(|r| r.to_string()).unwrap_or_default()
                    ))
                })?;
                major >= 1
            }
            _ => false,
        };
        let copied = copy == Some(true);
        let src = if copied {
            run(|| crate::ops::elementwise::clone(t))?
        } else {
            t.clone()
        };
        if !versioned && src.storage().is_readonly() {
            return Err(PyBufferError::new_err(
                "__dlpack__: cannot export read-only memory through the unversioned protocol (it cannot flag read-only); pass copy=True or max_version=(1, 0)",
            ));
        }
        export(py, &src, versioned, copied)
    }

    /// `(device_type, device_id)` in DLPack terms: `(1, 0)` for the CPU.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        match self.t.device() {
            Device::Cpu => Ok((KDL_CPU, 0)),
            d => Err(PyBufferError::new_err(format!(
                "__dlpack_device__: tensors on {d} cannot be exchanged through DLPack"
            ))),
        }
    }
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

/// A consumed producer tensor: calls the producer's deleter when dropped.
///
/// The DLPack spec allows CPU deleters to run from any thread without the
/// GIL (producers that need it, like NumPy, take it themselves).
enum Consumed {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

// SAFETY: the producer's memory and deleter are usable from any thread
// (see above); we only hold the pointer and call the deleter once.
unsafe impl Send for Consumed {}
unsafe impl Sync for Consumed {}

impl Consumed {
    fn dl_tensor(&self) -> &DLTensor {
        // SAFETY: the pointer is valid until the deleter runs in `drop`.
        unsafe {
            match self {
                Consumed::Legacy(m) => &(**m).dl_tensor,
                Consumed::Versioned(m) => &(**m).dl_tensor,
            }
        }
    }
    fn readonly(&self) -> bool {
        match self {
            Consumed::Legacy(_) => false,
            // SAFETY: valid until drop.
            Consumed::Versioned(m) => unsafe { (**m).flags & FLAG_READ_ONLY != 0 },
        }
    }
}

impl Drop for Consumed {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor (the capsule was renamed) and
        // call its deleter exactly once.
        unsafe {
            match *self {
                Consumed::Legacy(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
                Consumed::Versioned(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
            }
        }
    }
}

fn capsule_name(cap: &Bound<'_, PyAny>) -> PyResult<String> {
    // SAFETY: `cap` is a capsule (checked by the caller); the name pointer
    // lives as long as the capsule.
    unsafe {
        let p = ffi::PyCapsule_GetName(cap.as_ptr());
        if p.is_null() {
            if let Some(e) = PyErr::take(cap.py()) {
                return Err(e);
            }
            return Ok(String::new());
        }
        Ok(CStr::from_ptr(p as *const c_char)
            .to_string_lossy()
            .into_owned())
    }
}

/// Take ownership of the managed tensor in `cap` (renaming it to "used").
fn consume(cap: &Bound<'_, PyAny>) -> PyResult<Consumed> {
    let name = capsule_name(cap)?;
    let (versioned, from, to) = match name.as_str() {
        "dltensor" => (false, NAME, USED_NAME),
        "dltensor_versioned" => (true, NAME_V, USED_NAME_V),
        "used_dltensor" | "used_dltensor_versioned" => {
            return Err(PyValueError::new_err(
                "from_dlpack: this DLPack capsule was already consumed",
            ))
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "from_dlpack: expected a DLPack capsule named 'dltensor' or 'dltensor_versioned', got {other:?}"
            )))
        }
    };
    // SAFETY: the capsule has the expected name; once renamed its destructor
    // no longer frees the tensor and we are its sole owner.
    unsafe {
        let p = ffi::PyCapsule_GetPointer(cap.as_ptr(), from.as_ptr());
        if p.is_null() {
            return Err(PyErr::take(cap.py()).unwrap_or_else(|| {
                PyValueError::new_err("from_dlpack: the capsule holds a NULL tensor")
            }));
        }
        if ffi::PyCapsule_SetName(cap.as_ptr(), to.as_ptr()) != 0 {
            return Err(PyErr::fetch(cap.py()));
        }
        let c = if versioned {
            Consumed::Versioned(p as *mut DLManagedTensorVersioned)
        } else {
            Consumed::Legacy(p as *mut DLManagedTensor)
        };
        if let Consumed::Versioned(m) = c {
            let v = (*m).version;
            if v.major > DLPACK_MAJOR {
                // `c` drops here and releases the tensor, as the spec requires.
                return Err(PyBufferError::new_err(format!(
                    "from_dlpack: DLPack version {}.{} is not supported (at most {DLPACK_MAJOR}.x)",
                    v.major, v.minor
                )));
            }
        }
        Ok(c)
    }
}

/// Build a tensor over a consumed DLPack tensor's memory.
fn tensor_from_consumed(c: Consumed) -> PyResult<Tensor> {
    let dl = c.dl_tensor();
    if dl.device.device_type != KDL_CPU {
        return Err(PyRuntimeError::new_err(format!(
            "from_dlpack: only CPU memory can be imported, got device type {} ({}) id {}",
            dl.device.device_type,
            device_name(dl.device.device_type),
            dl.device.device_id
        )));
    }
    let dtype = dtype_from_dl(dl.dtype)?;
    let ndim = usize::try_from(dl.ndim)
        .map_err(|_| PyValueError::new_err(format!("from_dlpack: negative ndim {}", dl.ndim)))?;
    // SAFETY: per the spec `shape` (and `strides` unless NULL) hold `ndim` entries.
    let shape_i: &[i64] = if ndim == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(dl.shape, ndim) }
    };
    let shape: Vec<usize> = shape_i
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyValueError::new_err(format!(
                    "from_dlpack: negative dimension in shape {shape_i:?}"
                ))
            })
        })
        .collect::<PyResult<_>>()?;
    let strides: Vec<isize> = if ndim == 0 || dl.strides.is_null() {
        crate::tensor::layout::contiguous_strides(&shape).to_vec()
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(dl.strides, ndim) }
            .iter()
            .map(|&s| s as isize)
            .collect()
    };
    let item = dtype.itemsize() as isize;
    let lay = Layout {
        shape: shape.as_slice().into(),
        strides: strides.as_slice().into(),
        offset: 0,
    };
    let (lo, hi) = if lay.numel() == 0 { (0, 0) } else { lay.span() };
    let nbytes = ((hi - lo).max(0) as usize) * item as usize;
    let first = (dl.data as *mut u8).wrapping_add(dl.byte_offset as usize);
    let base = first.wrapping_offset(lo * item);
    let lay = Layout {
        offset: (-lo) as usize,
        ..lay
    };
    let readonly = c.readonly();
    // SAFETY: the producer keeps [base, base + nbytes) alive until its
    // deleter runs, which happens when `c` (the storage's owner) drops.
    let st = unsafe { Storage::from_foreign(base, nbytes, readonly, Box::new(c)) };
    run(|| Tensor::from_parts(Arc::new(st), lay, dtype))
}

/// Import any DLPack producer (an object with `__dlpack__`, e.g. a NumPy
/// array, or a raw `"dltensor"` capsule) without copying. CPU memory only.
/// `copy=True` returns a copy instead.
#[pyfunction]
#[pyo3(signature = (obj, *, device=None, copy=None))]
fn from_dlpack(
    obj: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<PyTensor> {
    let py = obj.py();
    if parse_device(device)? != Device::Cpu {
        return Err(PyRuntimeError::new_err(
            "from_dlpack: only the CPU device is supported",
        ));
    }
    let t = if let Ok(t) = obj.cast::<PyTensor>() {
        t.borrow().t.clone()
    } else {
        // SAFETY: a type check on a live object.
        let is_capsule = unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } == 1;
        let cap = if is_capsule {
            obj.clone()
        } else {
            if !obj.hasattr("__dlpack__")? {
                return Err(PyTypeError::new_err(format!(
                    "from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got {}",
                    obj.get_type().name()?
                )));
            }
            if let Ok(dev) = obj.call_method0("__dlpack_device__") {
                if let Ok((ty, id)) = dev.extract::<(i32, i32)>() {
                    if ty != KDL_CPU {
                        return Err(PyRuntimeError::new_err(format!(
                            "from_dlpack: only CPU memory can be imported, the producer is on device type {ty} ({}) id {id}",
                            device_name(ty)
                        )));
                    }
                }
            }
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("max_version", (DLPACK_MAJOR, DLPACK_MINOR))?;
            match obj.call_method("__dlpack__", PyTuple::empty(py), Some(&kw)) {
                Ok(c) => c,
                // Producers predating the versioned protocol reject the keyword.
                Err(e) if e.is_instance_of::<PyTypeError>(py) => obj.call_method0("__dlpack__")?,
                Err(e) => return Err(e),
            }
        };
        // SAFETY: a type check on a live object.
        if unsafe { ffi::PyCapsule_CheckExact(cap.as_ptr()) } != 1 {
            return Err(PyTypeError::new_err(format!(
                "from_dlpack: __dlpack__ returned {}, not a capsule",
                cap.get_type().name()?
            )));
        }
        tensor_from_consumed(consume(&cap)?)?
    };
    if copy == Some(true) {
        return run(|| crate::ops::elementwise::clone(&t)).map(PyTensor::new);
    }
    Ok(PyTensor::new(t))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    Ok(())
}
