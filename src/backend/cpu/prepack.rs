//! Linear layers of inference graphs on pre-packed weights, with their
//! epilogues computed as the product stores.
//!
//! The float32 GEMM ([`super::sgemm`]) packs its B operand into panels on
//! every call; for `x @ W.T` that is the whole weight, each time. Here the
//! packed weight is made once and kept in a cache keyed by the weight's
//! storage, view and version counter: a write to the parameter (an optimizer
//! step, `copy_`, `load_state_dict`) bumps the version, and the next call
//! packs again, so a cached panel is never stale. The cache holds its
//! storages weakly (entries of dropped parameters go on the next lookup) and
//! at most [`CACHE_MAX_BYTES`].
//!
//! [`linear`] computes `act(x @ W.T + bias) (+ residual)` in one pass over
//! the output: the bias starts each block of C, and the activation and the
//! residual add are applied to each finished block while it is in cache.
//! Every element gets the operations eager mode gives it (`linear`, then the
//! activation's own kernel, then `add`), in the same order, so the result
//! is bitwise equal.

use std::sync::{Arc, Mutex, Weak};

use super::elementwise::unary_in_place_f32;
use super::gemm::{fast_f32, DIRECT_MAX};
use super::sgemm::{pack_whole, sgemm_packed, PackedB};
use super::strided::SendPtr;
use crate::error::Result;
use crate::kernel::UnaryOp;
use crate::tensor::{DType, Device, Storage, Tensor};

/// Packed weights kept at most (the least recently packed go first).
pub const CACHE_MAX_BYTES: usize = 1 << 30;

/// Products the serial path takes (as `gemm::plan` decides for eager ones).
const SERIAL_MAX: usize = 1 << 18;

struct Entry {
    storage: Weak<Storage>,
    offset: usize,
    shape: [usize; 2],
    strides: [isize; 2],
    version: u64,
    packed: Arc<PackedB>,
}

static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Whether [`linear`] fuses `op` as an activation epilogue.
pub fn fusable_activation(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Relu
            | UnaryOp::Gelu
            | UnaryOp::GeluTanh
            | UnaryOp::Silu
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
    )
}

/// Number of packed weights cached and their bytes.
pub fn cache_stats() -> (usize, usize) {
    let c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    (c.len(), c.iter().map(|e| e.packed.bytes()).sum())
}

/// Drop every cached packed weight.
pub fn clear_cache() {
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The packed `W.T` of the 2-D weight `w` (`[n, k]`), from the cache when
/// its storage, view and version match.
fn packed_weight(w: &Tensor) -> Arc<PackedB> {
    let shape = [w.shape()[0], w.shape()[1]];
    let strides = [w.strides()[0], w.strides()[1]];
    let (offset, version) = (w.offset(), w.version());
    let id = Arc::as_ptr(w.storage());
    let mut c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    c.retain(|e| e.storage.strong_count() > 0);
    let at = c.iter().position(|e| {
        std::ptr::eq(e.storage.as_ptr(), id)
            && e.offset == offset
            && e.shape == shape
            && e.strides == strides
    });
    if let Some(i) = at {
        if c[i].version == version {
            return c[i].packed.clone();
        }
        c.remove(i);
    }
    let (n, k) = (shape[0], shape[1]);
    // SAFETY: `fast_f32` held for the caller; B = W.T is `k × n` with
    // row stride `w`'s column stride and column stride its row stride.
    let packed = Arc::new(unsafe { pack_whole(k, n, w.data_ptr::<f32>(), strides[1], strides[0]) });
    let mut total: usize = c.iter().map(|e| e.packed.bytes()).sum::<usize>() + packed.bytes();
    while total > CACHE_MAX_BYTES && !c.is_empty() {
        total -= c.remove(0).packed.bytes();
    }
    c.push(Entry {
        storage: Arc::downgrade(w.storage()),
        offset,
        shape,
        strides,
        version,
        packed: packed.clone(),
    });
    packed
}

/// `out = act(x @ w.T + bias) + residual` (each part optional) with the
/// weight pre-packed, when the product is one the float32 packed GEMM
/// computes in eager mode, or on the weight as it is when eager takes the
/// GEMV (one to four rows; `gemv_linear`), so the values are eager's,
/// bit for bit; `Ok(false)` with nothing written otherwise.
///
/// `x` is `[m, k]`, `w` `[n, k]`, `bias` `[n]`, `residual` and `out`
/// `[m, n]`, `out` contiguous and overlapping no input; `act` must satisfy
/// [`fusable_activation`].
pub fn linear(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    act: Option<UnaryOp>,
    residual: Option<&Tensor>,
    out: &Tensor,
) -> Result<bool> {
    let f32_cpu = |t: &Tensor| t.dtype() == DType::F32 && t.device() == Device::Cpu;
    if x.ndim() != 2 || w.ndim() != 2 || out.ndim() != 2 || !fast_f32() {
        return Ok(false);
    }
    let (m, k, n) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    let work = m.saturating_mul(n).saturating_mul(k);
    let all = [Some(x), Some(w), bias, residual, Some(out)];
    if w.shape()[1] != k
        || out.shape() != [m, n]
        || work <= DIRECT_MAX
        || !all.iter().flatten().all(|t| f32_cpu(t))
        || [x, w].iter().any(|t| t.strides().iter().any(|&s| s < 0))
        || !out.is_contiguous()
        || bias.is_some_and(|b| b.shape() != [n] || (n > 1 && b.strides()[0] != 1))
        || residual.is_some_and(|r| r.shape() != [m, n])
        || act.is_some_and(|op| !fusable_activation(op))
    {
        return Ok(false);
    }
    #[cfg(target_arch = "x86_64")]
    if super::gemv::applies(m, k, w.strides()[1], w.strides()[0]) {
        gemv_linear(x, w, bias, act, residual, out, work)?;
        return Ok(true);
    }
    if m < 16 || n < 16 || k < 8 {
        return Ok(false);
    }
    let packed = packed_weight(w);
    let threads = if work < SERIAL_MAX || crate::par::split() <= 1 {
        1
    } else {
        crate::par::split()
    };
    let xp = SendPtr(x.data_ptr::<f32>());
    let (xrs, xcs) = (x.strides()[0], x.strides()[1]);
    let cp = SendPtr(out.data_ptr::<f32>());
    let bp = bias.map(|b| SendPtr(b.data_ptr::<f32>()));
    let rp = residual.map(|r| (SendPtr(r.data_ptr::<f32>()), r.strides()[0], r.strides()[1]));
    super::long_kernel("linear", work, || {
        let epi = |r0: usize, rows: usize, c0: usize, cols: usize| {
            for i in r0..r0 + rows {
                // SAFETY: row i, columns c0..c0+cols of the contiguous output,
                // written by this thread only; the residual's matching elements.
                unsafe {
                    let row = cp.get().add(i * n + c0);
                    if let Some(op) = act {
                        unary_in_place_f32(op, row, cols);
                    }
                    if let Some((r, rrs, rcs)) = rp {
                        let r = r.get().offset(i as isize * rrs);
                        for j in 0..cols {
                            // eager: residual + linear (addition commutes exactly)
                            *row.add(j) += *r.offset((c0 + j) as isize * rcs);
                        }
                    }
                }
            }
        };
        let epi_ref: super::sgemm::Epilogue = &epi;
        let no_epi = act.is_none() && rp.is_none();
        // SAFETY: shapes and strides checked above; `out` is the caller's
        // fresh contiguous buffer.
        unsafe {
            sgemm_packed(
                m,
                xp.get(),
                xrs,
                xcs,
                &packed,
                bp.map(|b| b.get() as *const f32),
                cp.get(),
                n as isize,
                1,
                threads,
                if no_epi { &|_, _, _, _| {} } else { epi_ref },
            );
        }
        Ok(())
    })?;
    Ok(true)
}

/// [`linear`] for one to four rows of `x` ([`super::gemv`]), on the weight
/// as it is (its rows are what the GEMV streams; no packed copy): the bias
/// copied into `out`, the product added to it, then the activation and the
/// residual in place — eager's `linear` (whose bias also starts the output
/// and whose product takes the same GEMV), activation and `add`, bit for bit.
#[cfg(target_arch = "x86_64")]
fn gemv_linear(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    act: Option<UnaryOp>,
    residual: Option<&Tensor>,
    out: &Tensor,
    work: usize,
) -> Result<()> {
    let (m, k, n) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    // as `gemm::plan` decides for eager's product
    let threads = if work < SERIAL_MAX || crate::par::split() <= 1 {
        1
    } else {
        crate::par::split()
    };
    let xp = SendPtr(x.data_ptr::<f32>());
    let wp = SendPtr(w.data_ptr::<f32>());
    let cp = SendPtr(out.data_ptr::<f32>());
    let bp = bias.map(|b| SendPtr(b.data_ptr::<f32>()));
    let rp = residual.map(|r| (SendPtr(r.data_ptr::<f32>()), r.strides()[0], r.strides()[1]));
    let (xrs, xcs, wrs) = (x.strides()[0], x.strides()[1], w.strides()[0]);
    super::long_kernel("linear", work, || {
        // SAFETY: shapes and strides checked by the caller; `out` is its
        // fresh contiguous `m × n` buffer, overlapping no input.
        unsafe {
            if let Some(b) = bp {
                for i in 0..m {
                    std::ptr::copy_nonoverlapping(b.get() as *const f32, cp.get().add(i * n), n);
                }
            }
            super::gemv::gemv_f32(
                m,
                n,
                k,
                xp.get(),
                xrs,
                xcs,
                wp.get(),
                wrs,
                cp.get(),
                n as isize,
                1,
                bp.is_some(),
                threads,
            );
            for i in 0..m {
                let row = cp.get().add(i * n);
                if let Some(op) = act {
                    unary_in_place_f32(op, row, n);
                }
                if let Some((r, rrs, rcs)) = rp {
                    let r = r.get().offset(i as isize * rrs);
                    for j in 0..n {
                        // eager: residual + linear (addition commutes exactly)
                        *row.add(j) += *r.offset(j as isize * rcs);
                    }
                }
            }
        }
        Ok(())
    })
}
