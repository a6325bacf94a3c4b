//! Automatic mixed precision (`autocast`): per thread and per device kind, a
//! lower-precision float dtype that the matrix products and convolutions
//! compute in, while the ops that need range (losses) compute in float32.
//!
//! The policy is PyTorch's for its CPU autocast:
//! - **lower precision**: `matmul`, `mm`, `bmm`, `linear`, `conv1d`, `conv2d`
//!   (and what is built on them) cast their float32 / float16 / bfloat16
//!   inputs to the region's dtype; float64 inputs are left alone;
//! - **float32**: `cross_entropy` (and the Python losses) cast lower-precision
//!   inputs up to float32;
//! - every other op runs in the dtypes it is given (type promotion as usual).
//!
//! The casts are ordinary `to` ops, so gradients flow back to float32
//! parameters in float32, and a capture records them as nodes: a captured
//! graph holds the casts of the region it was captured in, and runs with
//! autocast off (see [`suspended`]), as its nodes already say which dtypes
//! to compute in.
//!
//! As in PyTorch, the cast of a float32 parameter (a leaf that requires
//! grad) is made once per region and reused by every op that reads it (an
//! RNN's weights at every step): the cache holds it until the thread leaves
//! its last region, and a cast is made again when the parameter was written
//! in place or grad mode changed. Nothing is cached while capturing.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use crate::autograd::AutogradMeta;
use crate::error::Result;
use crate::tensor::{DType, Device, Tensor};

/// A cached cast, by the parameter's autograd state (its address), the
/// target dtype and grad mode: the state itself (kept alive, so that its
/// address keeps naming it), the storage version when cast, and the cast.
type Cache = HashMap<(usize, DType, bool), (Arc<AutogradMeta>, u64, Tensor)>;

thread_local! {
    /// The region's dtype for the CPU (index 0) and the GPU (index 1).
    static STATE: Cell<[Option<DType>; 2]> = const { Cell::new([None, None]) };
    /// Whether regions cache parameter casts (`cache_enabled`).
    static CACHE_ON: Cell<bool> = const { Cell::new(true) };
    static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
}

/// A device kind's index in the state (`None` for a shape-only tensor that
/// is not a captured value).
fn kind(d: Device) -> Option<usize> {
    match d {
        Device::Cpu => Some(0),
        Device::Gpu(_) => Some(1),
        Device::Meta => None,
    }
}

/// The autocast dtype of device kind `gpu` (false: the CPU) on this thread.
pub fn get(gpu: bool) -> Option<DType> {
    STATE.with(|s| s.get())[gpu as usize]
}

/// Set the autocast dtype of a device kind on this thread (`None`: off);
/// returns the previous one. Leaving the last region empties the cast cache.
pub fn set(gpu: bool, d: Option<DType>) -> Option<DType> {
    let (prev, now) = STATE.with(|s| {
        let mut v = s.get();
        let prev = std::mem::replace(&mut v[gpu as usize], d);
        s.set(v);
        (prev, v)
    });
    if now == [None, None] {
        CACHE.with(|c| c.borrow_mut().clear());
    }
    prev
}

/// Whether regions on this thread cache the casts of parameters; returns
/// the previous setting.
pub fn set_cache_enabled(on: bool) -> bool {
    if !on {
        CACHE.with(|c| c.borrow_mut().clear());
    }
    CACHE_ON.with(|c| c.replace(on))
}

/// Run `f` with autocast off on this thread (a captured graph's nodes run so).
pub fn suspended<R>(f: impl FnOnce() -> R) -> R {
    struct Restore([Option<DType>; 2]);
    impl Drop for Restore {
        fn drop(&mut self) {
            STATE.with(|s| s.set(self.0));
        }
    }
    let _r = Restore(STATE.with(|s| s.replace([None, None])));
    f()
}

/// Whether autocast may cast `t` (a float that is not float64).
fn eligible(t: &Tensor) -> bool {
    matches!(t.dtype(), DType::F32 | DType::F16 | DType::BF16)
}

/// The region's dtype for an op on `ts` (the device of the first tensor
/// decides), when autocast is on there.
fn region(ts: &[&Tensor]) -> Option<DType> {
    let state = STATE.with(|s| s.get());
    if state == [None, None] {
        return None;
    }
    let first = ts.first()?;
    let dev = super::capture::run_device(first);
    state[kind(dev)?]
}

/// For a lower-precision op on `ts`: the dtype to cast them to, when
/// autocast is on for their device and one of them is an eligible float of
/// another dtype.
#[inline]
pub fn lower(ts: &[&Tensor]) -> Option<DType> {
    let d = region(ts)?;
    ts.iter()
        .any(|t| eligible(t) && t.dtype() != d)
        .then_some(d)
}

/// For a float32 op on `ts`: `Some(F32)` when autocast is on for their
/// device and one of them is a float16 or bfloat16.
#[inline]
pub fn widen(ts: &[&Tensor]) -> Option<DType> {
    region(ts)?;
    ts.iter()
        .any(|t| matches!(t.dtype(), DType::F16 | DType::BF16))
        .then_some(DType::F32)
}

/// `t` cast to `d` when autocast may cast it, else `t` itself.
pub fn cast(t: &Tensor, d: DType) -> Result<Tensor> {
    if !eligible(t) || t.dtype() == d {
        return Ok(t.clone());
    }
    let param = t
        .meta()
        .filter(|m| m.is_leaf() && m.requires_grad() && t.dtype() == DType::F32);
    let Some(m) = param.filter(|_| {
        CACHE_ON.with(|c| c.get())
            && t.layout().is_contiguous()
            && !super::capture::active()
            && !super::capture::tracing()
    }) else {
        return super::elementwise::to_dtype(t, d);
    };
    let key = (
        Arc::as_ptr(m) as usize,
        d,
        crate::autograd::is_grad_enabled(),
    );
    let version = t.version();
    let hit = CACHE.with(|c| {
        c.borrow()
            .get(&key)
            .filter(|e| e.1 == version)
            .map(|e| e.2.clone())
    });
    if let Some(c) = hit {
        return Ok(c);
    }
    let c = super::elementwise::to_dtype(t, d)?;
    CACHE.with(|cache| {
        cache
            .borrow_mut()
            .insert(key, (m.clone(), version, c.clone()))
    });
    Ok(c)
}

/// [`cast`] for an optional tensor.
pub fn cast_opt(t: Option<&Tensor>, d: DType) -> Result<Option<Tensor>> {
    t.map(|t| cast(t, d)).transpose()
}

/// The inputs of a lower-precision op of the form `(input, weight, bias?)`
/// (linear, convolutions), cast to the region's dtype; `None` when autocast
/// leaves them as they are.
pub fn lower_args(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
) -> Result<Option<(Tensor, Tensor, Option<Tensor>)>> {
    let d = match bias {
        Some(b) => lower(&[x, w, b]),
        None => lower(&[x, w]),
    };
    let Some(d) = d else { return Ok(None) };
    Ok(Some((cast(x, d)?, cast(w, d)?, cast_opt(bias, d)?)))
}
