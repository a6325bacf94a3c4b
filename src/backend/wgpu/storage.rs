//! Storage on the device: the pool buffer behind a GPU tensor, new storages, and the host↔device
//! transfers (upload and download).

use std::sync::Arc;

use super::context;
use super::context::{get, GpuBuffer, Narrow};
use super::dtype::{elem_bytes, gpu_float, gty, is_half};
use crate::error::{Error, Result};
use crate::tensor::{DType, Device, Layout, Storage, Tensor};

/// The bytes a device buffer of `n` elements of `d` needs (a multiple of 4,
/// at least 4: bindings are sized in whole words).
fn buffer_bytes(n: usize, d: DType) -> u64 {
    ((n * elem_bytes(d)) as u64).div_ceil(4).max(1) * 4
}

/// Mark a float16/bfloat16 tensor's new buffer so every write is rounded to its type.
fn mark_narrow(buf: &GpuBuffer, dtype: DType, n: usize) {
    let ty = match dtype {
        DType::F16 if is_half(dtype) => return,
        DType::F16 => Narrow::F16,
        DType::BF16 => Narrow::BF16,
        _ => return,
    };
    buf.set_narrow(ty, n as u64);
}

/// The pool buffer behind a GPU tensor.
pub(crate) fn buffer(op: &'static str, t: &Tensor) -> Result<Arc<GpuBuffer>> {
    t.storage()
        .gpu_handle()
        .and_then(|h| h.downcast_ref::<Arc<GpuBuffer>>())
        .cloned()
        .ok_or_else(|| {
            Error::runtime(
                op,
                format!(
                    "expected a tensor on the gpu device, got one on {}",
                    t.device()
                ),
            )
        })
}

/// A new GPU storage for `nbytes` logical bytes of `dtype` (4 bytes per
/// element on the device, 2 for native float16).
pub fn new_storage(
    op: &'static str,
    nbytes: usize,
    dtype: DType,
    device: Device,
) -> Result<Storage> {
    gty(op, dtype)?;
    if device != Device::Gpu(0) {
        return Err(Error::runtime(
            op,
            format!("there is only one gpu device (gpu:0); got {device}"),
        ));
    }
    let g = get()?;
    let n = nbytes / dtype.itemsize();
    let buf = g.alloc(op, buffer_bytes(n, dtype))?;
    Ok(storage_over(buf, nbytes, dtype))
}

/// A GPU storage of `nbytes` logical bytes of `dtype` over `buf`.
pub(crate) fn storage_over(buf: Arc<GpuBuffer>, nbytes: usize, dtype: DType) -> Storage {
    mark_narrow(&buf, dtype, nbytes / dtype.itemsize());
    Storage::from_gpu(nbytes, Device::Gpu(0), Box::new(buf))
}

/// The largest upload (host bytes) that keeps a host copy (see [`GpuBuffer::set_shadow`]).
const SHADOW_MAX_BYTES: usize = 4 << 20;

/// Copy a CPU tensor to a new contiguous tensor on the GPU (the upload half of the materialise path).
pub fn upload(t: &Tensor, device: Device) -> Result<Tensor> {
    let op = "to";
    gty(op, t.dtype())?;
    let g = get()?;
    let (c, bytes) = host_words(op, t)?;
    let n = c.numel();
    if device != Device::Gpu(0) {
        return Err(Error::runtime(
            op,
            format!("there is only one gpu device (gpu:0); got {device}"),
        ));
    }
    let buf = g.upload(op, &bytes)?;
    mark_narrow(&buf, t.dtype(), n);
    if matches!(c.dtype(), DType::I32 | DType::I64 | DType::Bool)
        && n * c.dtype().itemsize() <= SHADOW_MAX_BYTES
    {
        // Small integer tensors (class targets, indices) keep a host copy,
        // so the range checks of the ops that read them need no download.
        let h = Tensor::empty(c.shape(), c.dtype(), Device::Cpu)?;
        crate::backend::backend(Device::Cpu).cast_copy(&c, &h)?;
        buf.set_shadow(h);
    }
    let storage = Storage::from_gpu(n * t.dtype().itemsize(), device, Box::new(buf));
    Tensor::from_parts(Arc::new(storage), Layout::contiguous(t.shape()), t.dtype())
}

/// The words a GPU buffer holds for the CPU tensor `t` (native float16 as
/// its 2-byte halves, padded to whole words; float16/bfloat16 otherwise
/// widened to float32, int64 range-checked to int32, bool as u32; at least 8
/// bytes), with the contiguous tensor of `t`'s values they were made from.
pub(super) fn host_words(op: &'static str, t: &Tensor) -> Result<(Tensor, Vec<u8>)> {
    let c = if is_half(t.dtype()) && !t.is_contiguous() {
        let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
        crate::backend::backend(Device::Cpu).cast_copy(t, &out)?;
        out
    } else if is_half(t.dtype()) {
        t.clone()
    } else if matches!(t.dtype(), DType::F16 | DType::BF16) {
        // Widened exactly on the host; the device holds float32 words.
        let w = Tensor::empty(t.shape(), DType::F32, Device::Cpu)?;
        crate::backend::backend(Device::Cpu).cast_copy(t, &w)?;
        w
    } else if t.is_contiguous() {
        t.clone()
    } else {
        let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
        crate::backend::backend(Device::Cpu).cast_copy(t, &out)?;
        out
    };
    let n = c.numel();
    let mut bytes: Vec<u8> = Vec::with_capacity(n * 4);
    // SAFETY: `c` is a contiguous CPU tensor of `n` elements.
    unsafe {
        match c.dtype() {
            DType::F16 => {
                let h = c.as_slice::<half::f16>();
                bytes.extend(h.iter().flat_map(|v| v.to_bits().to_ne_bytes()));
                if !bytes.len().is_multiple_of(4) {
                    bytes.extend_from_slice(&[0, 0]);
                }
            }
            DType::F32 => bytes.extend_from_slice(bytemuck::cast_slice(c.as_slice::<f32>())),
            DType::I32 => bytes.extend_from_slice(bytemuck::cast_slice(c.as_slice::<i32>())),
            DType::I64 => {
                for &v in c.as_slice::<i64>() {
                    let w = i32::try_from(v).map_err(|_| {
                        Error::value(
                            op,
                            format!("int64 value {v} does not fit the gpu device's 32-bit integers (int64 is stored as int32 there)"),
                        )
                    })?;
                    bytes.extend_from_slice(&w.to_ne_bytes());
                }
            }
            DType::Bool => {
                for &v in c.as_slice::<u8>() {
                    bytes.extend_from_slice(&((v != 0) as u32).to_ne_bytes());
                }
            }
            _ => unreachable!("checked by gty"),
        }
    }
    if bytes.is_empty() {
        bytes.extend_from_slice(&[0; 8]);
    }
    Ok((c, bytes))
}

/// Copy a GPU tensor to a new contiguous CPU tensor (the download half of the
/// materialise path: every host read of GPU values goes through here).
pub fn download(t: &Tensor) -> Result<Tensor> {
    if let Some(g) = context::started() {
        g.note_host_read();
    }
    download_raw(t)
}

/// [`download`], unnoticed by a graph capture (for host checks it records itself).
pub(super) fn download_raw(t: &Tensor) -> Result<Tensor> {
    let op = "cpu";
    let g = get()?;
    let buf = buffer(op, t)?;
    let n = t.numel();
    if n == 0 {
        return Tensor::empty(t.shape(), t.dtype(), Device::Cpu);
    }
    if let Some(h) = buf.shadow() {
        // The buffer still holds what was uploaded into it: read the host copy.
        if h.dtype() == t.dtype() && !g.is_recording() {
            let view = Tensor::from_parts(h.storage().clone(), t.layout().clone(), t.dtype())?;
            let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
            crate::backend::backend(Device::Cpu).cast_copy(&view, &out)?;
            return Ok(out);
        }
    }
    let (lo, hi) = t.layout().span();
    let (lo, hi) = (lo as usize, hi as usize);
    if is_half(t.dtype()) {
        return download_half(t, &buf, lo, hi);
    }
    let raw = g.download(&buf, lo as u64 * 4, (hi - lo) as u64 * 4)?;
    let span = hi - lo;
    // float16/bfloat16 arrive as float32 words (already of the narrow type's values).
    let wide = if gpu_float(t.dtype()) {
        DType::F32
    } else {
        t.dtype()
    };
    let host = Tensor::empty(&[span], wide, Device::Cpu)?;
    // SAFETY: `host` is a fresh contiguous CPU tensor of `span` elements; `raw` holds `span` 4-byte words.
    unsafe {
        let words: &[u32] = bytemuck::cast_slice(&raw);
        match wide {
            DType::F32 | DType::I32 => std::ptr::copy_nonoverlapping(
                words.as_ptr() as *const u8,
                host.byte_ptr(),
                span * 4,
            ),
            DType::I64 => {
                let p = host.data_ptr::<i64>();
                for (i, &w) in words.iter().enumerate() {
                    *p.add(i) = w as i32 as i64;
                }
            }
            DType::Bool => {
                let p = host.data_ptr::<u8>();
                for (i, &w) in words.iter().enumerate() {
                    *p.add(i) = (w != 0) as u8;
                }
            }
            d => return Err(Error::dtype(op, format!("{d} on the gpu device"))),
        }
    }
    let mut l = t.layout().clone();
    l.offset -= lo;
    let view = Tensor::from_parts(host.storage().clone(), l, wide)?;
    if wide == t.dtype() && view.is_contiguous() && view.offset() == 0 && span == n {
        return Ok(view);
    }
    let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
    crate::backend::backend(Device::Cpu).cast_copy(&view, &out)?;
    Ok(out)
}

/// [`download_raw`] of a native float16 tensor spanning elements
/// `[lo, hi)` of `buf`: the whole words holding them, as 2-byte halves.
fn download_half(t: &Tensor, buf: &GpuBuffer, lo: usize, hi: usize) -> Result<Tensor> {
    let g = get()?;
    // Copies start on a 4-byte boundary: from an even element.
    let lo = lo / 2 * 2;
    let span = hi - lo;
    let raw = g.download(buf, lo as u64 * 2, span as u64 * 2)?;
    let host = Tensor::empty(&[span], DType::F16, Device::Cpu)?;
    // SAFETY: `host` is a fresh contiguous CPU tensor of `span` 2-byte
    // elements; `raw` holds at least `span * 2` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(raw.as_ptr(), host.byte_ptr(), span * 2);
    }
    let mut l = t.layout().clone();
    l.offset -= lo;
    let view = Tensor::from_parts(host.storage().clone(), l, DType::F16)?;
    if view.is_contiguous() && view.offset() == 0 && span == t.numel() {
        return Ok(view);
    }
    let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
    crate::backend::backend(Device::Cpu).cast_copy(&view, &out)?;
    Ok(out)
}
