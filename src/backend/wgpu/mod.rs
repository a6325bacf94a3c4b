//! The WebGPU device (through `wgpu`): storage in pooled GPU buffers,
//! kernels in generated WGSL, dispatches batched into one command encoder
//! until a read. See `context` for the device, pool and batching and
//! `shaders` for the kernels.

pub mod context;
mod conv_gemm;
mod optim;
pub mod peak;
pub mod random;
pub mod shaders;
#[cfg(test)]
mod snapshot_tests;
mod split;

pub use optim::WgpuOptim;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ops::conv::{Conv2dParams, Pool2dParams};
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::index::IndexArgs;
use crate::ops::loss::CeCfg;
use crate::ops::philox::PhiloxStream;
use crate::ops::random::RandomDist;
use crate::ops::reduce::{ArgOp, CumOp, ReduceOp};
use crate::tensor::{DType, Device, Layout, Scalar, Storage, Tensor};

use super::Backend;
use context::{get, GpuBuffer, Narrow};
use shaders::{Bindings, GTy};

/// The element type a dtype has on the device, or a `TypeError` naming the op.
pub fn gty(op: &'static str, d: DType) -> Result<GTy> {
    match d {
        // float16 and bfloat16 are computed as float32. bfloat16 (and
        // float16 on a device without `shader-f16`) is also stored so,
        // rounded to its type after every write (see
        // `GpuBuffer::set_narrow`); native float16 storage is marked per
        // binding instead (see `Bindings::half`).
        DType::F32 | DType::F16 | DType::BF16 => Ok(GTy::F32),
        DType::I32 | DType::I64 => Ok(GTy::I32),
        DType::Bool => Ok(GTy::U32),
        DType::F64 => Err(Error::dtype(
            op,
            "float64 is not supported on the gpu device (WGSL has no 64-bit floats); convert with .float() first",
        )),
    }
}

/// float32, or a narrower float the device computes in float32.
fn gpu_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

/// Whether `d` is stored as native float16 (`f16`, 2 bytes) on the device
/// (float16 where the device was created with `shader-f16`).
pub(crate) fn is_half(d: DType) -> bool {
    d == DType::F16 && context::started().is_some_and(|g| g.half_native())
}

/// The bytes one element of `d` takes on the device: 2 for native float16,
/// else 4 (int64 and bool widen or narrow to 32-bit words).
pub(crate) fn elem_bytes(d: DType) -> usize {
    if is_half(d) {
        2
    } else {
        4
    }
}

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
        super::backend(Device::Cpu).cast_copy(&c, &h)?;
        buf.set_shadow(h);
    }
    let storage = Storage::from_gpu(n * t.dtype().itemsize(), device, Box::new(buf));
    Tensor::from_parts(Arc::new(storage), Layout::contiguous(t.shape()), t.dtype())
}

/// How a random op reserves its stream again from the generator it drew
/// from (see [`note_reservation`]).
pub type Redraw = Arc<dyn Fn() -> PhiloxStream + Send + Sync>;

thread_local! {
    /// The reservation of the random op this thread is running on the GPU.
    static RESERVED: std::cell::RefCell<Option<Redraw>> = const { std::cell::RefCell::new(None) };
}

/// Note how the random op about to run on this thread reserves its stream,
/// so that a graph capture can draw again on each replay (see [`drawn`]).
pub fn note_reservation(redraw: Redraw) {
    RESERVED.with(|r| *r.borrow_mut() = Some(redraw));
}

/// Drop the reservation noted for this thread (an op about to draw from a
/// saved stream, not a new one, must not pick up another op's).
pub fn forget_reservation() {
    RESERVED.with(|r| r.borrow_mut().take());
}

/// Note that a random op is drawing on the CPU: a GPU capture in progress on
/// this thread cannot replay (the draw reaches the device as uploaded data,
/// which a replay would repeat). Never starts the device.
pub fn note_cpu_draw() {
    forget_reservation();
    if let Some(Ok(g)) = context::initialised() {
        g.with_capture(|rec| {
            rec.refuse("the run draws random numbers on the CPU (a replay would repeat them)")
        });
    }
}

/// A new GPU tensor of random values that `draw` writes into a CPU tensor
/// of `shape` and `dtype` from the stream `s` (the CPU's kernels: the same
/// numbers on both devices), uploaded. A graph capture records how to draw
/// again: each replay reserves a new stream from the same generator, as the
/// op would (see [`note_reservation`]), and uploads that draw instead.
fn drawn(
    shape: &[usize],
    dtype: DType,
    device: Device,
    s: PhiloxStream,
    draw: impl Fn(&Tensor, PhiloxStream) -> Result<()> + Send + Sync + 'static,
) -> Result<Tensor> {
    let redraw = RESERVED.with(|r| r.borrow_mut().take());
    if get()?.bundling() {
        return Err(Error::runtime(
            "export_webgpu",
            "a WebGPU bundle cannot draw random numbers (it would repeat one draw on every run): export the graph without random ops (a model in eval mode)",
        ));
    }
    let h = Tensor::empty(shape, dtype, Device::Cpu)?;
    draw(&h, s)?;
    let up = upload(&h, device)?;
    if let Some(redraw) = redraw {
        let shape = shape.to_vec();
        let again = move |_: &[Tensor]| -> Result<Vec<u8>> {
            let h = Tensor::empty(&shape, dtype, Device::Cpu)?;
            draw(&h, redraw())?;
            Ok(host_words("to", &h)?.1)
        };
        get()?.note_derived(&[], &buffer("to", &up)?, Arc::new(again));
    }
    Ok(up)
}

/// The words a GPU buffer holds for the CPU tensor `t` (native float16 as
/// its 2-byte halves, padded to whole words; float16/bfloat16 otherwise
/// widened to float32, int64 range-checked to int32, bool as u32; at least 8
/// bytes), with the contiguous tensor of `t`'s values they were made from.
fn host_words(op: &'static str, t: &Tensor) -> Result<(Tensor, Vec<u8>)> {
    let c = if is_half(t.dtype()) && !t.is_contiguous() {
        let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
        super::backend(Device::Cpu).cast_copy(t, &out)?;
        out
    } else if is_half(t.dtype()) {
        t.clone()
    } else if matches!(t.dtype(), DType::F16 | DType::BF16) {
        // Widened exactly on the host; the device holds float32 words.
        let w = Tensor::empty(t.shape(), DType::F32, Device::Cpu)?;
        super::backend(Device::Cpu).cast_copy(t, &w)?;
        w
    } else if t.is_contiguous() {
        t.clone()
    } else {
        let out = Tensor::empty(t.shape(), t.dtype(), Device::Cpu)?;
        super::backend(Device::Cpu).cast_copy(t, &out)?;
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
fn download_raw(t: &Tensor) -> Result<Tensor> {
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
            super::backend(Device::Cpu).cast_copy(&view, &out)?;
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
    super::backend(Device::Cpu).cast_copy(&view, &out)?;
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
    super::backend(Device::Cpu).cast_copy(&view, &out)?;
    Ok(out)
}

/// The WebGPU backend.
pub struct WgpuBackend;

/// Run `f` on `out` when it is one dense block from offset 0 (what the
/// kernels write), else on a dense temporary that is then copied into `out`.
fn dense_out(out: &Tensor, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    if out.is_contiguous() && out.offset() == 0 {
        return f(out);
    }
    let o = Tensor::empty(out.shape(), out.dtype(), out.device())?;
    f(&o)?;
    WgpuBackend.cast_copy(&o, out)
}

/// A new GPU tensor of `shape` laid out with `dim` innermost (the other
/// dims row-major around it).
fn dim_last(op: &'static str, shape: &[usize], dim: usize, dtype: DType) -> Result<Tensor> {
    let order: Vec<usize> = (0..shape.len())
        .filter(|&d| d != dim)
        .chain([dim])
        .collect();
    laid_out(op, shape, &order, dtype)
}

/// A new GPU tensor of `shape` whose dims lie in memory in `order`
/// (outermost first), viewed with its dims in their logical order.
fn laid_out(op: &'static str, shape: &[usize], order: &[usize], dtype: DType) -> Result<Tensor> {
    let moved: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
    let t = Tensor::empty(&moved, dtype, Device::Gpu(0))?;
    let mut back = vec![0isize; shape.len()];
    for (k, &d) in order.iter().enumerate() {
        back[d] = k as isize;
    }
    let l = t.layout().permute(op, &back)?;
    Tensor::from_parts(t.storage().clone(), l, dtype)
}

/// A copy of `t` laid out with `dims` outermost (in their order), so that
/// what one index of them selects is one dense block.
fn outer_first(op: &'static str, t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let order: Vec<usize> = dims
        .iter()
        .copied()
        .chain((0..t.ndim()).filter(|d| !dims.contains(d)))
        .collect();
    let c = laid_out(op, t.shape(), &order, t.dtype())?;
    WgpuBackend.cast_copy(t, &c)?;
    Ok(c)
}

/// Whether the element range one index position of an index op selects
/// (`rows`) is too wide for a window of one binding.
fn row_too_wide(rows: (isize, isize)) -> Result<bool> {
    let g = get()?;
    let piece = g.piece_elems() as isize;
    let align = (g.binding_align() / 4) as isize;
    Ok(rows.1 - rows.0 > piece - align)
}

/// Run `f` on `out` when it is contiguous (kernels that write their result
/// densely from its offset), else on a dense temporary then copied into `out`.
fn into_dense(out: &Tensor, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    if out.is_contiguous() {
        return f(out);
    }
    dense_out(out, f)
}

fn words_of_strides(s: &[isize]) -> impl Iterator<Item = u32> + '_ {
    s.iter().map(|&v| v as i32 as u32)
}

/// Elementwise metadata for `ts` (all of `shape`), with up to eight parameter words.
fn ew_meta(
    op: &'static str,
    shape: &[usize],
    ts: &[&Tensor],
    params: [u32; 8],
) -> Result<Vec<u32>> {
    let n: usize = shape.iter().product();
    if n > u32::MAX as usize {
        return Err(Error::runtime(
            op,
            format!("{n} elements exceed the gpu kernels' 32-bit indexing"),
        ));
    }
    let strides: Vec<&[isize]> = ts.iter().map(|t| t.strides()).collect();
    let (cs, cst) = Layout::coalesce(shape, &strides);
    let mut m = Vec::with_capacity(shaders::EW_SHAPE + cs.len() * (1 + ts.len()) + ts.len());
    m.push(n as u32);
    m.push(cs.len() as u32);
    m.extend_from_slice(&params);
    m.extend(cs.iter().map(|&d| d as u32));
    for (t, s) in ts.iter().zip(&cst) {
        m.push(t.offset() as u32);
        m.extend(words_of_strides(s));
    }
    Ok(m)
}

/// Buffers of `ts` (the last one written) deduplicated into bindings.
fn bind(op: &'static str, ts: &[&Tensor]) -> Result<(Bindings, Vec<Arc<GpuBuffer>>)> {
    bind_written(op, ts, 1)
}

/// Buffers of `ts` (the last `written` of them written) deduplicated into bindings.
fn bind_written(
    op: &'static str,
    ts: &[&Tensor],
    written: usize,
) -> Result<(Bindings, Vec<Arc<GpuBuffer>>)> {
    let mut bufs: Vec<Arc<GpuBuffer>> = Vec::new();
    let mut b = Bindings {
        bufs: Vec::new(),
        operand: Vec::new(),
        half: Vec::new(),
    };
    let first_written = ts.len() - written;
    for (k, t) in ts.iter().enumerate() {
        let buf = buffer(op, t)?;
        let ty = gty(op, t.dtype())?;
        let half = is_half(t.dtype());
        if let Some(j) = bufs.iter().position(|x| x.id() == buf.id()) {
            if b.bufs[j].0 != ty || b.half[j] != half {
                return Err(Error::runtime(
                    op,
                    "operands of different dtypes share one GPU buffer; copy one with .clone() first",
                ));
            }
            b.bufs[j].1 |= k >= first_written;
            b.operand.push(j);
        } else {
            bufs.push(buf);
            b.bufs.push((ty, k >= first_written));
            b.half.push(half);
            b.operand.push(bufs.len() - 1);
        }
    }
    Ok((b, bufs))
}

/// The operands of an elementwise op, made safe to work through in pieces:
/// when a buffer is larger than one storage binding, the pieces bind one
/// window per buffer, so an input that shares a large buffer with another
/// operand must be laid out as the result (then its window moves with the
/// result's). Any other input sharing such a buffer (a broadcast row or
/// element, a transposed view) is copied into a buffer of its own first; a
/// broadcast copies only the elements it repeats. `written`: how many of
/// the last operands the op writes (never copied).
fn unshare(op: &'static str, ts: &[&Tensor], written: usize) -> Result<Vec<Tensor>> {
    let mut out: Vec<Tensor> = ts.iter().map(|t| (*t).clone()).collect();
    let max = get()?.max_binding();
    let bufs = ts
        .iter()
        .map(|t| buffer(op, t))
        .collect::<Result<Vec<_>>>()?;
    if bufs.iter().all(|b| b.len <= max) {
        return Ok(out);
    }
    let shape = ts[ts.len() - 1].shape();
    for k in 0..ts.len() - written {
        let t = ts[k];
        let shared = bufs
            .iter()
            .enumerate()
            .any(|(j, b)| j != k && b.id() == bufs[k].id());
        let flat = t.shape() == shape && t.is_contiguous();
        if bufs[k].len <= max || !shared || flat || t.numel() == 0 {
            continue;
        }
        let mut base = t.layout().clone();
        for d in 0..base.ndim() {
            if base.strides[d] == 0 {
                base.shape[d] = 1;
            }
        }
        let base = Tensor::from_parts(t.storage().clone(), base, t.dtype())?;
        let copy = Tensor::empty_for(op, base.shape(), t.dtype(), t.device())?;
        WgpuBackend.cast_copy(&base, &copy)?;
        let l = copy.layout().expand(op, t.shape())?;
        out[k] = Tensor::from_parts(copy.storage().clone(), l, t.dtype())?;
    }
    Ok(out)
}

fn run_ew(
    op: &'static str,
    src: &str,
    ts: &[&Tensor],
    bufs: &[Arc<GpuBuffer>],
    params: [u32; 8],
) -> Result<()> {
    let out = ts[ts.len() - 1];
    dispatch_ew(op, src, out.shape(), ts, bufs, params)
}

/// Dispatch the elementwise kernel `src` over `shape` for operands `ts`
/// (bound through `bufs`, deduplicated). A buffer larger than one storage
/// binding is worked through in pieces, each binding only the byte ranges
/// it touches; that needs every operand contiguous in `shape`'s order (or a
/// single element), else the error says so.
fn dispatch_ew(
    op: &'static str,
    src: &str,
    shape: &[usize],
    ts: &[&Tensor],
    bufs: &[Arc<GpuBuffer>],
    params: [u32; 8],
) -> Result<()> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let g = get()?;
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    let groups = |m: usize| (m as u64).div_ceil(shaders::WG as u64);
    let max = g.max_binding();
    if bufs.iter().all(|b| b.len <= max) {
        let meta = ew_meta(op, shape, ts, params)?;
        return g.dispatch(op, src, &refs, &meta, groups(n));
    }
    // One element broadcast everywhere (a scalar operand), or laid out as the result.
    let single = |t: &Tensor| t.strides().iter().all(|&st| st == 0);
    let flat = |t: &Tensor| single(t) || (t.shape() == shape && t.is_contiguous());
    if !ts.iter().all(|t| flat(t)) {
        // Broadcasts and strided views: pieces of the result's shape, each
        // operand bound through a window of the bytes its piece touches.
        let space = split::Space {
            ts,
            axes: vec![(0..shape.len()).collect(); ts.len()],
            sizes: shape.to_vec(),
            splittable: vec![true; shape.len()],
        };
        return split::in_pieces(op, &space, &mut |v, _| {
            let vr: Vec<&Tensor> = v.iter().collect();
            let (_, wb) = bind(op, &vr)?;
            let shape = v[v.len() - 1].shape();
            dispatch_ew(op, src, shape, &vr, &wb, params)
        });
    }
    check_items(op, n)?;
    let slot = ts
        .iter()
        .map(|t| {
            let id = buffer(op, t)?.id();
            Ok(bufs.iter().position(|b| b.id() == id).expect("bound"))
        })
        .collect::<Result<Vec<usize>>>()?;
    // Per binding: its element size and the element alignment of a window's start.
    let eb: Vec<usize> = (0..bufs.len())
        .map(|j| {
            let k = slot.iter().position(|&x| x == j).expect("bound");
            elem_bytes(ts[k].dtype())
        })
        .collect();
    let align: Vec<usize> = eb.iter().map(|&e| g.binding_align() as usize / e).collect();
    let piece = g.piece_elems();
    let mut s = 0;
    while s < n {
        let e = n.min(s + piece);
        // The element span each binding needs for this piece.
        let mut span: Vec<Option<(usize, usize)>> = vec![None; bufs.len()];
        let own = |t: &Tensor| {
            if single(t) {
                (t.offset(), t.offset() + 1)
            } else {
                (t.offset() + s, t.offset() + e)
            }
        };
        for (k, t) in ts.iter().enumerate() {
            let (a, b) = own(t);
            let sp = &mut span[slot[k]];
            *sp = Some(sp.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        }
        let start: Vec<usize> = span
            .iter()
            .zip(&align)
            .map(|(sp, &al)| sp.expect("every binding has an operand").0 / al * al)
            .collect();
        let ranges: Vec<(u64, u64)> = span
            .iter()
            .zip(&start)
            .zip(&eb)
            .map(|((sp, &a0), &e)| ((a0 * e) as u64, ((sp.expect("span").1 - a0) * e) as u64))
            .collect();
        let len = e - s;
        let mut meta = Vec::with_capacity(shaders::EW_SHAPE + 1 + 2 * ts.len());
        meta.extend([len as u32, 1]);
        meta.extend_from_slice(&params);
        meta.push(len as u32);
        for (k, t) in ts.iter().enumerate() {
            meta.push((own(t).0 - start[slot[k]]) as u32);
            meta.push(!single(t) as u32);
        }
        g.dispatch_ranges(op, src, &refs, &ranges, &meta, groups(len))?;
        s = e;
    }
    Ok(())
}

fn check_same_device(op: &'static str, ts: &[&Tensor]) -> Result<()> {
    let gpu = ts
        .iter()
        .map(|t| t.device())
        .find(|d| matches!(d, Device::Gpu(_)))
        .unwrap_or(Device::Gpu(0));
    for t in ts {
        if !matches!(t.device(), Device::Gpu(_)) {
            return Err(Error::runtime(
                op,
                format!(
                    "expected all tensors to be on the same device, but found {gpu} and {}",
                    t.device()
                ),
            ));
        }
    }
    Ok(())
}

/// The 32-bit word of `s` written into a `dtype` tensor on the device
/// (`ty` its device type). The device keeps int64 (and int32) in 32 bits,
/// so an integer outside that range is refused rather than wrapped.
fn scalar_bits(op: &'static str, s: Scalar, dtype: DType, ty: GTy) -> Result<u32> {
    Ok(match ty {
        GTy::F32 => (s.to_f64() as f32).to_bits(),
        GTy::I32 => int_word(op, s.to_i64(), dtype)?,
        GTy::U32 => (s.to_f64() != 0.0) as u32,
    })
}

/// Whether float matmuls run the tiled kernel (workgroup-memory tiles, what
/// a GPU needs) rather than one thread per output with no shared loads
/// (faster on software adapters, where barriers are slow): tiled except on
/// a CPU-type adapter; `FG_GPU_MATMUL=tiled|naive` chooses.
fn tiled_matmul() -> Result<bool> {
    static CHOICE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let forced = *CHOICE.get_or_init(|| match std::env::var("FG_GPU_MATMUL") {
        Ok(v) if v.trim() == "tiled" => Some(true),
        Ok(v) if v.trim() == "naive" => Some(false),
        _ => None,
    });
    Ok(forced.unwrap_or(get()?.info.device_type != wgpu::DeviceType::Cpu))
}

/// Refuse a kernel whose invocations would run about `trips` loop
/// iterations where the adapter stops loops sooner (see
/// [`context::Gpu::loop_limit`]): there its results would be silently
/// truncated. `what` names the work; `hint` says how to split it.
fn check_loop_trips(
    op: &'static str,
    trips: u64,
    what: &dyn Fn() -> String,
    hint: &str,
) -> Result<()> {
    let g = get()?;
    match g.loop_limit {
        Some(limit) if trips >= limit => Err(Error::runtime(
            op,
            format!(
                "{} needs about {trips} loop iterations in one shader invocation, but this adapter ({}) stops an invocation's loops after {limit} iterations in all (a software driver's guard against endless loops), so the result would be wrong; {hint}",
                what(),
                g.info.name
            ),
        )),
        _ => Ok(()),
    }
}

/// Loop trips per invocation of a direct convolution gradient (see
/// [`conv_grad_trips`]); 0 for operands that are not 4-d.
fn conv_grad_trip_count(g: &Tensor, w: Option<&Tensor>, p: &Conv2dParams) -> u64 {
    if g.ndim() != 4 {
        return 0;
    }
    let s = g.shape();
    let (n, o, oh, ow) = (s[0] as u64, s[1] as u64, s[2] as u64, s[3] as u64);
    match w.filter(|w| w.ndim() == 4) {
        Some(w) => {
            let og = o / (p.groups as u64).max(1);
            let (kh, kw) = (w.shape()[2] as u64, w.shape()[3] as u64);
            2 * og * (1 + kh * (1 + kw)) + 64
        }
        None => 2 * n * (1 + oh * (1 + ow)) + 64,
    }
}

/// Refuse a convolution gradient whose per-thread sums run past the
/// adapter's loop limit: the input's sums over the output channels of a
/// group and the window (`w` given), the weight's over all images and
/// output pixels (counted twice: skipped padding positions cost trips too).
fn conv_grad_trips(
    op: &'static str,
    g: &Tensor,
    w: Option<&Tensor>,
    p: &Conv2dParams,
) -> Result<()> {
    if g.ndim() != 4 {
        return Ok(());
    }
    let s = g.shape();
    let (n, o, oh, ow) = (s[0] as u64, s[1] as u64, s[2] as u64, s[3] as u64);
    let trips = conv_grad_trip_count(g, w, p);
    check_loop_trips(
        op,
        trips,
        &|| format!("a convolution gradient over {n} images of {oh}x{ow} outputs and {o} channels"),
        "run the backward pass on fewer images (or channels) at a time and add the gradients",
    )
}

/// [`check_loop_trips`] for a row kernel making `passes` walks over rows of `len`.
fn check_row_trips(op: &'static str, passes: u64, len: usize) -> Result<()> {
    check_loop_trips(
        op,
        row_trips(passes, len, 1),
        &|| format!("a {op} over rows of {len}"),
        "work on shorter rows (e.g. split the dim and combine the parts)",
    )
}

/// Whether about `trips` loop iterations per invocation pass the adapter's
/// loop limit (see [`check_loop_trips`]): the caller then takes a path that
/// splits the work.
fn over_loop_limit(trips: u64) -> Result<bool> {
    Ok(get()?.loop_limit.is_some_and(|limit| trips >= limit))
}

/// The length of the slices a dim of `n` is cut into when walking it whole
/// would take about `trips` loop iterations per invocation, past the
/// adapter's loop limit: at least two slices, each about a quarter of the
/// limit's worth.
fn slice_len(n: usize, trips: u64) -> Result<usize> {
    let limit = get()?.loop_limit.unwrap_or(u64::MAX);
    let slices = (trips.div_ceil((limit / 4).max(1)) as usize).clamp(2, n.max(2));
    Ok(n.div_ceil(slices).max(1))
}

/// Loop trips of a row kernel (one workgroup of `RED_WG` threads per row):
/// `passes` strided walks over `len` elements, each element's offset found
/// by a loop over `dims` dims, and the workgroup's tree steps.
fn row_trips(passes: u64, len: usize, dims: usize) -> u64 {
    passes * (len as u64).div_ceil(shaders::RED_WG as u64) * (2 + dims as u64) + 64
}

/// `v` as a 32-bit integer word, saturated to the 32-bit range.
fn sat_word(v: f64) -> u32 {
    (v as i64).clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32
}

/// `v` as the 32-bit integer word the device stores a `dtype` value in, or
/// an error naming `op` when it does not fit.
fn int_word(op: &'static str, v: i64, dtype: DType) -> Result<u32> {
    i32::try_from(v).map(|w| w as u32).map_err(|_| {
        Error::value(
            op,
            format!(
                "the value {v} does not fit the 32-bit integers the gpu device stores {dtype} in ({} to {}); use the cpu device for it",
                i32::MIN,
                i32::MAX
            ),
        )
    })
}

/// A GPU copy of `t` converted to bool (for `where` conditions of other dtypes).
fn as_bool(t: &Tensor) -> Result<Tensor> {
    if t.dtype() == DType::Bool {
        return Ok(t.clone());
    }
    let out = Tensor::empty(t.shape(), DType::Bool, t.device())?;
    WgpuBackend.cast_copy(t, &out)?;
    Ok(out)
}

/// Run `f` on a CPU tensor shaped like `out`, then upload the result into `out`.
fn via_host(out: &Tensor, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    let h = Tensor::empty(out.shape(), out.dtype(), Device::Cpu)?;
    f(&h)?;
    WgpuBackend.cast_copy(&h, out)
}

/// The element offsets `sum_k wrap(idx_k[b]) * stride(dims[k])` of an index
/// op over `t` (relative to `t`'s offset), as a contiguous int32 GPU tensor
/// of shape `shape` (`nb` elements). The indices are read on the host and
/// validated exactly as on the CPU (one download per index tensor).
/// A graph capture records how the offsets follow from the indices, so
/// that every replay computes them again from its own index tensors.
fn index_offsets(a: &IndexArgs, t: &Tensor, nb: usize, shape: &[usize]) -> Result<Tensor> {
    let (op, dims, dim_names) = (a.op, a.dims.to_vec(), a.dim_names.to_vec());
    // Offsets depend on `t`'s layout only: a twin without data stands for it.
    let twin = Tensor::from_parts(
        Arc::new(Storage::new_meta(t.storage().nbytes())),
        t.layout().clone(),
        t.dtype(),
    )?;
    let offsets = move |indices: &[Tensor]| -> Result<Vec<u8>> {
        let host: Vec<Tensor> = indices.iter().map(download_raw).collect::<Result<_>>()?;
        let ha = IndexArgs {
            op,
            dims: &dims,
            dim_names: &dim_names,
            indices: &host,
        };
        let offs = crate::backend::cpu::index::index_offsets(&ha, &twin, nb)?;
        let v: Vec<i32> = offs
            .iter()
            .map(|&o| {
                // i32::MIN is the kernels' "skip" mark (see `offset_windows`).
                i32::try_from(o)
                    .ok()
                    .filter(|&v| v != i32::MIN)
                    .ok_or_else(|| {
                        Error::runtime(
                            op,
                            "an indexed element lies beyond the gpu device's 32-bit offsets",
                        )
                    })
            })
            .collect::<Result<_>>()?;
        Ok(bytemuck::cast_slice(&v).to_vec())
    };
    let bytes = offsets(a.indices)?;
    let g = get()?;
    let buf = g.upload(op, &bytes)?;
    g.note_derived(a.indices, &buf, Arc::new(offsets));
    let storage = storage_over(buf, nb * 4, DType::I32);
    Tensor::from_parts(Arc::new(storage), Layout::contiguous(shape), DType::I32)
}

/// The offsets of an index op over `t`: on the device ([`index_offsets`]),
/// or, when `t` lies in a buffer larger than one binding, on the host (for
/// [`offset_windows`]) with an empty device tensor in their place.
fn offsets_for(
    a: &IndexArgs,
    t: &Tensor,
    nb: usize,
    shape: &[usize],
) -> Result<(Tensor, Option<Vec<isize>>)> {
    if buffer(a.op, t)?.len > get()?.max_binding() {
        let host = host_offsets(a, t, nb)?;
        return Ok((Tensor::empty(&[0], DType::I32, t.device())?, Some(host)));
    }
    Ok((index_offsets(a, t, nb, shape)?, None))
}

/// [`index_offsets`] on the host.
fn host_offsets(a: &IndexArgs, t: &Tensor, nb: usize) -> Result<Vec<isize>> {
    let host: Vec<Tensor> = a.indices.iter().map(download).collect::<Result<_>>()?;
    let ha = IndexArgs {
        op: a.op,
        dims: a.dims,
        dim_names: a.dim_names,
        indices: &host,
    };
    crate::backend::cpu::index::index_offsets(&ha, t, nb)
}

/// An index op over `t`, which lies in a buffer larger than one storage
/// binding, in pieces: each piece is a window of that buffer (as a flat
/// tensor to bind) and the int32 offsets (shape `shape`) of the positions
/// whose rows lie in it, relative to the window, with `i32::MIN` at the
/// other positions (the kernels skip those). `offs` are the positions' offsets
/// relative to `t`'s offset, and `rows` the element range `[lo, hi)` one
/// row covers relative to its position's offset.
fn offset_windows(
    op: &'static str,
    t: &Tensor,
    offs: &[isize],
    rows: (isize, isize),
    shape: &[usize],
) -> Result<Vec<(Tensor, Tensor)>> {
    let g = get()?;
    let big = buffer(op, t)?;
    // In `t`'s elements (native float16 takes 2 bytes: twice as many fit).
    let eb = elem_bytes(t.dtype());
    let align = g.binding_align() as usize / eb;
    let piece = g.piece_elems() * 4 / eb;
    let row = |o: isize| -> (usize, usize) {
        let at = t.offset() as isize + o;
        ((at + rows.0) as usize, (at + rows.1) as usize)
    };
    if rows.1 - rows.0 > (piece - align) as isize {
        return Err(Error::runtime(
            op,
            format!(
                "one indexed row of a tensor of shape {:?} spans {} bytes, over the adapter's largest storage binding ({} bytes, max_storage_buffer_binding_size); work on slices of the tensor",
                t.shape(),
                (rows.1 - rows.0) * eb as isize,
                g.max_binding()
            ),
        ));
    }
    let mut order: Vec<usize> = (0..offs.len()).collect();
    order.sort_unstable_by_key(|&b| offs[b]);
    let mut out = Vec::new();
    let mut k = 0;
    while k < order.len() {
        let base = row(offs[order[k]]).0 / align * align;
        let end = (base + piece).min(big.len as usize / eb);
        let mut v = vec![i32::MIN; offs.len()];
        while k < order.len() && row(offs[order[k]]).1 <= end {
            let b = order[k];
            v[b] = (t.offset() as isize + offs[b] - base as isize) as i32;
            k += 1;
        }
        let w = big.window((base * eb) as u64, ((end - base) * eb) as u64);
        let storage = Arc::new(Storage::from_gpu(
            (end - base) * t.dtype().itemsize(),
            t.device(),
            Box::new(w),
        ));
        let flat = Tensor::from_parts(storage, Layout::contiguous(&[end - base]), t.dtype())?;
        out.push((flat, upload(&Tensor::from_vec(v, shape)?, t.device())?));
    }
    Ok(out)
}

/// The element range `[lo, hi)` the dims `keep` of `t` cover from one position.
fn row_span(t: &Tensor, keep: impl Iterator<Item = usize>) -> (isize, isize) {
    let (mut lo, mut hi) = (0isize, 1isize);
    for d in keep {
        let ext = (t.shape()[d] as isize - 1) * t.strides()[d];
        if ext < 0 {
            lo += ext;
        } else {
            hi += ext;
        }
    }
    (lo, hi)
}

/// Run `run` on blocks of whole rows: each of `parts` (contiguous, `rows`
/// rows of the given width) is cut into the same rows, each block within one
/// binding per buffer; the `shared` operands (weights) are passed whole
/// after them. `run` also gets the block's row range.
fn row_blocks(
    op: &'static str,
    rows: usize,
    parts: &[(&Tensor, usize)],
    shared: &[&Tensor],
    run: &mut split::BatchPiece<'_>,
) -> Result<()> {
    let viewed: Vec<Tensor> = parts
        .iter()
        .map(|&(t, width)| as_rows(t, rows, width))
        .collect::<Result<_>>()?;
    let mut ts: Vec<&Tensor> = viewed.iter().collect();
    ts.extend(shared);
    let mut batched = vec![true; viewed.len()];
    batched.resize(ts.len(), false);
    split::by_batch(op, &ts, &batched, run)
}

/// The cross-entropy kernels' metadata: items, classes, ignore index and
/// smoothing, then six operand offsets.
fn ce_meta(items: usize, cfg: CeCfg, offsets: [&Tensor; 5], w: Option<&Tensor>) -> [u32; 10] {
    // Every target fits i32 (checked first), so an ignore_index outside it never matches.
    let ign = i32::try_from(cfg.ignore_index).unwrap_or(-1) as u32;
    let o = offsets.map(|t| t.offset() as u32);
    [
        items as u32,
        cfg.c as u32,
        ign,
        (cfg.smoothing as f32).to_bits(),
        o[0],
        o[1],
        o[2],
        o[3],
        o[4],
        w.map_or(0, |w| w.offset() as u32),
    ]
}

/// The gather kernel over `shape`: operands (source, indices or offsets,
/// result), each walked from its offset with its strides; `step` scales an
/// index read into a source offset.
fn gather_kernel(
    op: &'static str,
    ty: GTy,
    shape: &[usize],
    walks: [(&Tensor, usize, Vec<isize>); 3],
    step: u32,
) -> Result<()> {
    let meta = raw_meta(
        op,
        shape,
        &walks.clone().map(|(_, off, st)| (off, st)),
        [step, 0, 0, 0, 0, 0, 0, 0],
    )?;
    let n = shape.iter().product();
    run_items(
        op,
        |bd| shaders::gather(bd, ty),
        &walks.map(|w| w.0),
        &[],
        &meta,
        n,
    )
}

/// The index-put kernel's fixed parts: values `[positions, R...]` written
/// (or added) at `dst` offsets, one thread per element of R walking the
/// positions in order.
struct Put<'a> {
    op: &'static str,
    ty: GTy,
    /// R, the shape each position writes.
    rshape: &'a [usize],
    /// dst's strides over R.
    drest: &'a [isize],
    accumulate: bool,
}

impl Put<'_> {
    /// Write the dense values `v2` (`positions × |R|`) at offsets `o`
    /// (relative to `dst_off` in `d`), in blocks of positions when values
    /// or offsets exceed one binding — in order, so later dispatches see
    /// earlier writes as one pass would.
    fn blocks(&self, v2: &Tensor, o: &Tensor, d: &Tensor, dst_off: usize) -> Result<()> {
        if !split::needed(self.op, &[v2, o])? {
            return self.launch(v2, o, d, dst_off);
        }
        split::by_batch(self.op, &[v2, o], &[true, true], &mut |p, _| {
            self.launch(&p[0], &p[1], d, dst_off)
        })
    }

    fn launch(&self, vv: &Tensor, o: &Tensor, d: &Tensor, dst_off: usize) -> Result<()> {
        let block: usize = self.rshape.iter().product();
        let meta = raw_meta(
            self.op,
            self.rshape,
            &[
                (
                    vv.offset(),
                    crate::tensor::layout::contiguous_strides(self.rshape).to_vec(),
                ),
                (o.offset(), vec![0; self.rshape.len()]),
                (dst_off, self.drest.to_vec()),
            ],
            [
                o.numel() as u32,
                block as u32,
                self.accumulate as u32,
                0,
                0,
                0,
                0,
                0,
            ],
        )?;
        // One thread per written element walks every index row, in order.
        let rows = o.numel();
        check_loop_trips(
            self.op,
            2 * rows as u64 + 64,
            &|| format!("writing through {rows} index rows"),
            "write through fewer indices at a time",
        )?;
        let ty = self.ty;
        run_items(
            self.op,
            |bd| shaders::index_put(bd, ty),
            &[vv, o, d],
            &[],
            &meta,
            block,
        )
    }
}

/// The element offsets (relative to `t`'s offset), in the row-major order
/// of `index`'s positions, that a torch-style gather or scatter along `dim`
/// reaches in `t`: the position's coordinates, with the index read on the
/// host in place of the coordinate along `dim`.
fn line_offsets(op: &'static str, t: &Tensor, dim: usize, index: &Tensor) -> Result<Vec<isize>> {
    let mut st = t.strides()[..index.ndim()].to_vec();
    st[dim] = 0;
    let mut offs = Vec::with_capacity(index.numel());
    crate::backend::cpu::strided::for_each_offset(index.shape(), &st, |o| offs.push(o));
    let host = download(index)?;
    let (len, step) = (t.shape()[dim], t.strides()[dim]);
    if !crate::backend::cpu::index::add_offsets(&host, len, step, &mut offs) {
        return Err(Error::index(
            op,
            format!("an index is out of bounds for dimension {dim} with size {len}"),
        ));
    }
    Ok(offs)
}

/// A contiguous `t` viewed as `rows` rows of `len` elements (a view).
fn as_rows(t: &Tensor, rows: usize, len: usize) -> Result<Tensor> {
    as_shape(t, &[rows, len])
}

/// A contiguous `t` viewed with the same number of elements as `shape`.
fn as_shape(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let mut l = Layout::contiguous(shape);
    l.offset = t.offset();
    Tensor::from_parts(t.storage().clone(), l, t.dtype())
}

/// The name an arg-reduction reports in errors.
fn arg_name(aop: ArgOp) -> &'static str {
    if aop == ArgOp::Max {
        "argmax"
    } else {
        "argmin"
    }
}

/// `t` itself when contiguous, else a contiguous copy on the device.
fn dense(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    let out = Tensor::empty(t.shape(), t.dtype(), t.device())?;
    WgpuBackend.cast_copy(t, &out)?;
    Ok(out)
}

/// Refuse anything but float32 for `op`, naming the dtype.
pub(super) fn f32_only(op: &'static str, ts: &[&Tensor]) -> Result<()> {
    for t in ts {
        if !gpu_float(t.dtype()) {
            gty(op, t.dtype())?;
            return Err(Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", t.dtype()),
            ));
        }
    }
    Ok(())
}

/// A full reduction of a contiguous tensor larger than one storage binding
/// (or with more elements than an adapter's loop limit lets one workgroup
/// walk): each piece reduces into a partial (float32 for float sums and means), then
/// the partials reduce into `out` (a mean divides the sum by the count once).
/// Variance and logsumexp do not split; they raise the binding-limit error.
fn reduce_in_pieces(rop: ReduceOp, x: &Tensor, out: &Tensor) -> Result<()> {
    let op = rop.name();
    let g = get()?;
    let (piece_op, float_sum) = match rop {
        ReduceOp::Sum | ReduceOp::Mean => (ReduceOp::Sum, gpu_float(out.dtype())),
        ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min | ReduceOp::All | ReduceOp::Any => {
            (rop, false)
        }
        _ => {
            return Err(Error::runtime(
                op,
                format!(
                    "a tensor of {} bytes exceeds the adapter's largest storage binding ({} bytes, max_storage_buffer_binding_size), and {op} cannot split it; work on slices of the tensor",
                    x.numel() * elem_bytes(x.dtype()),
                    g.max_binding()
                ),
            ))
        }
    };
    let n = x.numel();
    check_items(op, n)?;
    let part_dtype = if float_sum { DType::F32 } else { out.dtype() };
    let eb = elem_bytes(x.dtype());
    let align = g.binding_align() as usize / eb;
    // A piece is at most one binding, and few enough elements per thread
    // for an adapter that stops long loops (see `Gpu::loop_limit`).
    let mut piece = g.piece_elems();
    if let Some(limit) = g.loop_limit {
        let per_thread = (limit.saturating_sub(64) / 3 / 2) as usize;
        piece = piece
            .min((per_thread * shaders::RED_WG as usize) / align.max(1) * align.max(1))
            .max(align.max(1));
    }
    let parts = Tensor::empty(&[n.div_ceil(piece)], part_dtype, x.device())?;
    let (tx, tp) = (gty(op, x.dtype())?, gty(op, part_dtype)?);
    let acc = if matches!(rop, ReduceOp::All | ReduceOp::Any) {
        GTy::U32
    } else {
        tp
    };
    let (bd, bufs) = bind(op, &[x, &parts])?;
    let src = shaders::reduce(&bd, piece_op, tx, acc, tp).ok_or_else(|| {
        Error::runtime(
            op,
            format!("not supported on the gpu device for dtype {}", x.dtype()),
        )
    })?;
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    for (k, s) in (0..n).step_by(piece).enumerate() {
        let e = n.min(s + piece);
        let start = (x.offset() + s) / align * align;
        let meta = [
            1,
            (e - s) as u32,
            0,
            0,
            1,
            (x.offset() + s - start) as u32,
            k as u32,
            (e - s) as u32,
            1,
        ];
        let ranges = [
            ((start * eb) as u64, ((x.offset() + e - start) * eb) as u64),
            (0, bufs[1].len),
        ];
        g.dispatch_ranges(op, &src, &refs, &ranges, &meta, 1)?;
    }
    let all = [true];
    if rop != ReduceOp::Mean {
        return WgpuBackend.reduce(piece_op, &parts, &all, out);
    }
    let total = Tensor::empty(&[], DType::F32, x.device())?;
    WgpuBackend.reduce(ReduceOp::Sum, &parts, &all, &total)?;
    let count = WgpuBackend.splat(op, Scalar::Float(n as f64), DType::F32, out.shape())?;
    let total = Tensor::from_parts(
        total.storage().clone(),
        total.layout().expand(op, out.shape())?,
        DType::F32,
    )?;
    WgpuBackend.binary(BinaryOp::Div, &total, &count, out)
}

impl WgpuBackend {
    /// A reduction whose rows are too long for one invocation's loops on an
    /// adapter that stops long loops (see `Gpu::loop_limit`): the longest
    /// reduced dim is cut into slices, each reduced into its own row of a
    /// `[slices, ...out]` partial result, and the partials are reduced over
    /// their first dim (sums and means add float32 partials). A slice still
    /// too long is cut again the same way.
    fn reduce_long_rows(
        &self,
        rop: ReduceOp,
        x: &Tensor,
        mask: &[bool],
        out: &Tensor,
    ) -> Result<()> {
        let op = rop.name();
        if let ReduceOp::Var { .. } | ReduceOp::LogSumExp = rop {
            // Its passes are reductions that split, and elementwise ops.
            return self.reduce_two_pass(rop, x, mask, out);
        }
        let float = gpu_float(out.dtype());
        let (piece_op, part_dtype) = match rop {
            ReduceOp::Sum | ReduceOp::Mean if float => (ReduceOp::Sum, DType::F32),
            ReduceOp::Sum => (ReduceOp::Sum, out.dtype()),
            ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min | ReduceOp::All | ReduceOp::Any => {
                (rop, out.dtype())
            }
            _ => {
                return Err(Error::runtime(
                    op,
                    "this reduction does not combine partial results (internal error)",
                ))
            }
        };
        let reduced: Vec<usize> = (0..x.ndim()).filter(|&d| mask[d]).collect();
        let nred: usize = reduced.iter().map(|&d| x.shape()[d]).product();
        let d = *reduced
            .iter()
            .max_by_key(|&&d| x.shape()[d])
            .ok_or_else(|| Error::runtime(op, "no reduced dims (internal error)"))?;
        let n = x.shape()[d];
        let len = slice_len(n, row_trips(1, nred, reduced.len()))?;
        let slices = n.div_ceil(len);
        let mut pshape = vec![slices];
        pshape.extend_from_slice(out.shape());
        let parts = Tensor::empty_for(op, &pshape, part_dtype, x.device())?;
        let per = out.numel();
        for j in 0..slices {
            let lo = j * len;
            let xs = x.with_layout(x.layout().slice(d, lo, len.min(n - lo), 1));
            let mut l = Layout::contiguous(out.shape());
            l.offset = parts.offset() + j * per;
            let pj = Tensor::from_parts(parts.storage().clone(), l, part_dtype)?;
            self.reduce(piece_op, &xs, mask, &pj)?;
        }
        let mut first = vec![false; pshape.len()];
        first[0] = true;
        if rop != ReduceOp::Mean {
            return self.reduce(piece_op, &parts, &first, out);
        }
        let total = Tensor::empty_for(op, out.shape(), DType::F32, x.device())?;
        self.reduce(ReduceOp::Sum, &parts, &first, &total)?;
        let count = self.splat(op, Scalar::Float(nred as f64), DType::F32, out.shape())?;
        self.binary(BinaryOp::Div, &total, &count, out)
    }
}

/// Refuse more than 2^31 items for the 32-bit kernels.
fn check_items(op: &'static str, n: usize) -> Result<()> {
    if n > i32::MAX as usize {
        return Err(Error::runtime(
            op,
            format!("{n} elements exceed the gpu kernels' 32-bit indexing"),
        ));
    }
    Ok(())
}

/// Run an item kernel over `n` items; operands `ts`, the ones at `written` are written.
fn run_items(
    op: &'static str,
    src_of: impl FnOnce(&Bindings) -> String,
    ts: &[&Tensor],
    written: &[usize],
    meta: &[u32],
    n: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    check_items(op, n)?;
    let (mut bd, bufs) = bind(op, ts)?;
    for &k in written {
        let j = bd.operand[k];
        bd.bufs[j].1 = true;
    }
    let src = src_of(&bd);
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    get()?.dispatch(
        op,
        &src,
        &refs,
        meta,
        (n as u64).div_ceil(shaders::WG as u64),
    )
}

/// Elementwise metadata from explicit (offset, strides) per operand.
fn raw_meta(
    op: &'static str,
    shape: &[usize],
    ops: &[(usize, Vec<isize>)],
    params: [u32; 8],
) -> Result<Vec<u32>> {
    let n: usize = shape.iter().product();
    check_items(op, n)?;
    let strides: Vec<&[isize]> = ops.iter().map(|(_, s)| s.as_slice()).collect();
    let (cs, cst) = Layout::coalesce(shape, &strides);
    let mut m = vec![n as u32, cs.len() as u32];
    m.extend_from_slice(&params);
    m.extend(cs.iter().map(|&d| d as u32));
    for ((o, _), s) in ops.iter().zip(&cst) {
        m.push(*o as u32);
        m.extend(words_of_strides(s));
    }
    Ok(m)
}

/// Check on the host, before anything is written, that every value of the
/// integer tensor `t` lies in `[0, len)` (values equal to `skip` pass);
/// `bad(v)` is the error for an offending value. A graph capture records
/// the check, so that every replay repeats it on that run's tensor.
fn check_indices(
    t: &Tensor,
    len: u64,
    skip: Option<i64>,
    bad: impl Fn(i64) -> Error + Send + Sync + 'static,
) -> Result<()> {
    let check = move |t: &Tensor| -> Result<()> {
        let h = download_raw(t)?;
        let h = if h.dtype() == DType::I64 {
            h
        } else {
            let o = Tensor::empty(h.shape(), DType::I64, Device::Cpu)?;
            super::backend(Device::Cpu).cast_copy(&h, &o)?;
            o
        };
        // SAFETY: a fresh contiguous int64 CPU tensor.
        let v = unsafe { h.as_slice::<i64>() };
        match v
            .iter()
            .find(|&&v| Some(v) != skip && (v < 0 || v as u64 >= len))
        {
            Some(&v) => Err(bad(v)),
            None => Ok(()),
        }
    };
    check(t)?;
    get()?.note_check(t, Arc::new(check));
    Ok(())
}

fn conv_meta(
    x: &[usize],
    w: &[usize],
    o: &[usize],
    p: &Conv2dParams,
    n: usize,
    offs: [usize; 3],
) -> Vec<u32> {
    let v = [
        n,
        x[0],
        x[1],
        x[2],
        x[3],
        w[0],
        o[2],
        o[3],
        w[2],
        w[3],
        p.stride[0],
        p.stride[1],
        p.pad[0],
        p.pad[2],
        p.dilation[0],
        p.dilation[1],
        p.groups,
        0,
        offs[0],
        offs[1],
        offs[2],
    ];
    v.iter().map(|&a| a as u32).collect()
}

/// The iteration axes of a convolution split across pieces (groups = 1):
/// images, output channels, input channels, then the input's, kernel's and
/// output's spatial dims (never split).
const CONV_N: usize = 0;
const CONV_O: usize = 1;
const CONV_C: usize = 2;
/// The axes each dim of the input, weight and output walks.
const CONV_X: [usize; 4] = [CONV_N, CONV_C, 3, 4];
const CONV_W: [usize; 4] = [CONV_O, CONV_C, 5, 6];
const CONV_Y: [usize; 4] = [CONV_N, CONV_O, 7, 8];

/// The convolution's iteration space over `ts` (with `axes` per operand),
/// from the input `x`, weight `w` and output `y` shapes.
fn conv_space<'a>(
    ts: &'a [&'a Tensor],
    axes: Vec<Vec<usize>>,
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
) -> split::Space<'a> {
    let (xs, ws, ys) = (x.shape(), w.shape(), y.shape());
    split::Space {
        ts,
        axes,
        sizes: vec![
            xs[0], ws[0], xs[1], xs[2], xs[3], ws[2], ws[3], ys[2], ys[3],
        ],
        splittable: (0..9).map(|a| a < 3).collect(),
    }
}

fn conv_check(op: &'static str, ts: &[&Tensor], p: &Conv2dParams) -> Result<()> {
    check_same_device(op, ts)?;
    f32_only(op, ts)?;
    for t in ts {
        if t.ndim() != 4 {
            return Err(Error::shape(
                op,
                format!(
                    "the gpu kernel expects 4-D operands, got shape {:?}",
                    t.shape()
                ),
            ));
        }
        check_items(op, t.numel())?;
    }
    if p.groups == 0 || p.stride.contains(&0) || p.dilation.contains(&0) {
        return Err(Error::value(op, format!("invalid parameters {p:?}")));
    }
    Ok(())
}

/// Rows `[lo, hi)` (dim 2) of a 4-D view, in the same storage.
fn rows_of(t: &Tensor, lo: usize, hi: usize) -> Result<Tensor> {
    let l = t.layout().slice(2, lo, hi - lo, 1);
    Tensor::from_parts(t.storage().clone(), l, t.dtype())
}

/// Whether one (H, W) plane of any of `ts` (4-D) reaches more than half a
/// storage binding: then channel and image pieces cannot fit a binding and
/// a convolution runs in bands of rows instead (see [`conv_bands`]).
fn plane_too_big(ts: &[&Tensor]) -> Result<bool> {
    let half = get()?.max_binding() / 2;
    Ok(ts.iter().any(|t| {
        let (s, st) = (t.shape(), t.strides());
        let reach =
            (s[2].max(1) - 1) * st[2].unsigned_abs() + (s[3].max(1) - 1) * st[3].unsigned_abs() + 1;
        reach as u64 * 4 > half
    }))
}

/// A row band of a convolution: `(oh0, oh1, lo, hi, top)` (see [`conv_bands`]).
type Band = (usize, usize, usize, usize, usize);

/// Bands of output rows for a convolution whose planes are too large for
/// one binding: each band `(oh0, oh1, lo, hi, top)` covers output rows
/// `[oh0, oh1)`, reads input rows `[lo, hi)` (all it needs, at least one)
/// and runs with top padding `top` (the original shifted to the band), with
/// both bands within half a binding. Input width `w`, height `h`; output
/// width `ow`, height `oh`; `(kernel height, stride, dilation, top
/// padding)` along the rows. A band whose rows read only the bottom
/// padding binds the last input row with a top padding that puts every
/// tap above it, so it reads nothing (its outputs are the bias alone).
fn conv_bands(
    op: &'static str,
    (h, w): (usize, usize),
    (oh, ow): (usize, usize),
    (kh, sh, dh, pt): (usize, usize, usize, usize),
) -> Result<Vec<Band>> {
    let max = get()?.max_binding();
    let budget = (max / 2 / 4) as usize;
    let reach = (kh - 1) * dh + 1;
    let (w, ow) = (w.max(1), ow.max(1));
    let by_out = budget / ow;
    let by_in = (budget / w).saturating_sub(reach) / sh + 1;
    if by_out == 0 || budget / w < reach || h == 0 {
        return Err(Error::runtime(
            op,
            format!(
                "one row band of the convolution ({reach} input rows of {w}, or a row of {ow} outputs) is over half the adapter's largest storage binding ({max} bytes, max_storage_buffer_binding_size); work on narrower images"
            ),
        ));
    }
    let rows = by_out.min(by_in).max(1);
    let mut bands = Vec::new();
    let mut oh0 = 0;
    while oh0 < oh {
        let oh1 = oh.min(oh0 + rows);
        let first = (oh0 * sh) as isize - pt as isize;
        let last = ((oh1 - 1) * sh + reach) as isize - pt as isize;
        if first >= h as isize {
            bands.push((oh0, oh1, h - 1, h, (oh1 - oh0 - 1) * sh + reach));
        } else {
            let lo = first.max(0) as usize;
            let hi = (last.clamp(0, h as isize) as usize).max(lo + 1);
            bands.push((oh0, oh1, lo, hi, pt + lo - oh0 * sh));
        }
        oh0 = oh1;
    }
    Ok(bands)
}

/// `p` with top padding `top`.
fn with_top(p: &Conv2dParams, top: usize) -> Conv2dParams {
    let mut q = *p;
    q.pad[0] = top;
    q
}

/// Average pooling (`p` given) or adaptive average pooling (`p` None) of 4-D `x` into `out`.
/// The iteration space of 2-D pooling over `ts` = (input, outputs...), all
/// 4-D: images and channels split, each pooled plane stays whole.
fn pool_space<'a>(ts: &'a [&'a Tensor]) -> split::Space<'a> {
    let (s, o) = (ts[0].shape(), ts[1].shape());
    split::Space {
        ts,
        axes: (0..ts.len())
            .map(|k| {
                if k == 0 {
                    vec![0, 1, 2, 3]
                } else {
                    vec![0, 1, 4, 5]
                }
            })
            .collect(),
        sizes: vec![s[0], s[1], s[2], s[3], o[2], o[3]],
        splittable: vec![true, true, false, false, false, false],
    }
}

fn avg_pool(
    op: &'static str,
    x: &Tensor,
    p: Option<&Pool2dParams>,
    mode: (u32, usize),
    out: &Tensor,
) -> Result<()> {
    check_same_device(op, &[x, out])?;
    f32_only(op, &[x, out])?;
    if x.ndim() != 4 || out.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "the gpu kernel expects 4-D input and output, got {:?} and {:?}",
                x.shape(),
                out.shape()
            ),
        ));
    }
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    if split::needed(op, &[x, out])? {
        return split::in_pieces(op, &pool_space(&[x, out]), &mut |v, _| {
            avg_pool(op, &v[0], p, mode, &v[1])
        });
    }
    check_items(op, x.numel().max(n))?;
    let xc = dense(x)?;
    let o = if out.is_contiguous() && out.offset() == 0 {
        out.clone()
    } else {
        Tensor::empty(out.shape(), out.dtype(), out.device())?
    };
    let (s, os) = (x.shape(), out.shape());
    let z = Pool2dParams {
        kernel: [0, 0],
        stride: [0, 0],
        pad: [0, 0],
        dilation: [1, 1],
        ceil_mode: false,
    };
    let q = p.unwrap_or(&z);
    let meta: Vec<u32> = [
        n,
        s[2],
        s[3],
        os[2],
        os[3],
        q.kernel[0],
        q.kernel[1],
        q.stride[0],
        q.stride[1],
        q.pad[0],
        q.pad[1],
        q.dilation[0],
        q.dilation[1],
        xc.offset(),
        mode.0 as usize,
        mode.1,
        p.is_none() as usize,
    ]
    .iter()
    .map(|&v| v as u32)
    .collect();
    run_items(op, shaders::avg_pool2d, &[&xc, &o], &[], &meta, n)?;
    if !o.shares_storage(out) {
        WgpuBackend.cast_copy(&o, out)?;
    }
    Ok(())
}

impl Backend for WgpuBackend {
    fn name(&self) -> String {
        "gpu".into()
    }

    // Random numbers are generated on the device from the CPU's
    // counter-based stream (see `random`): the same numbers on both devices.
    fn random_fill(&self, out: &Tensor, dist: RandomDist, s: PhiloxStream) -> Result<()> {
        gty("random", out.dtype())?;
        if random::fill(out, dist, s)?.is_some() {
            return Ok(());
        }
        // Integers a float32 cannot hold exactly: drawn on the host.
        let up = drawn(out.shape(), out.dtype(), out.device(), s, move |h, s| {
            super::backend(Device::Cpu).random_fill(h, dist, s)
        })?;
        self.cast_copy(&up, out)
    }

    // The probabilities are checked on the device (an invalid one raises
    // before anything is written, as on the CPU; only the verdict is read
    // back) and the draws made there.
    fn bernoulli_tensor(&self, p: &Tensor, out: &Tensor, s: PhiloxStream) -> Result<()> {
        check_same_device("bernoulli", &[p, out])?;
        gty("bernoulli", out.dtype())?;
        gty("bernoulli", p.dtype())?;
        random::bernoulli_tensor(p, out, s)
    }

    fn multinomial(
        &self,
        probs: &Tensor,
        out: &Tensor,
        replacement: bool,
        s: PhiloxStream,
    ) -> Result<()> {
        check_same_device("multinomial", &[probs, out])?;
        let hp = download(probs)?;
        via_host(out, |h| {
            super::backend(Device::Cpu).multinomial(&hp, h, replacement, s)
        })
    }

    fn randperm(&self, out: &Tensor, s: PhiloxStream) -> Result<()> {
        gty("randperm", out.dtype())?;
        if out.numel() > i32::MAX as usize {
            return Err(Error::value(
                "randperm",
                "n exceeds the gpu device's 32-bit integers",
            ));
        }
        let up = drawn(out.shape(), out.dtype(), out.device(), s, |h, s| {
            super::backend(Device::Cpu).randperm(h, s)
        })?;
        self.cast_copy(&up, out)
    }

    fn dropout(&self, x: &Tensor, out: &Tensor, p: f64, s: PhiloxStream) -> Result<()> {
        check_same_device("dropout", &[x, out])?;
        if !gpu_float(x.dtype()) {
            gty("dropout", x.dtype())?;
            return Err(Error::runtime(
                "dropout",
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            ));
        }
        random::dropout(x, out, p, s)
    }

    fn layer_norm(
        &self,
        x: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        rms: bool,
        out: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
    ) -> Result<()> {
        let op = if rms { "rms_norm" } else { "layer_norm" };
        let mut ts: Vec<&Tensor> = vec![x];
        ts.extend(weight);
        ts.extend(bias);
        ts.extend([out, mean, rstd]);
        check_same_device(op, &ts)?;
        for t in &ts {
            if !gpu_float(t.dtype()) {
                gty(op, t.dtype())?;
                return Err(Error::runtime(
                    op,
                    format!("not supported on the gpu device for dtype {}", t.dtype()),
                ));
            }
            if !t.is_contiguous() {
                return Err(Error::runtime(
                    op,
                    "expects contiguous tensors on the gpu device",
                ));
            }
        }
        // One statistic per row; rows span every normalised dim (not only
        // the last one when there is no weight to tell their number).
        let rows = mean.numel();
        let len = x.numel().checked_div(rows).unwrap_or(0);
        if rows == 0 {
            return Ok(());
        }
        if over_loop_limit(row_trips(3, len, 1))?
            || split::needed(op, &ts)? && len > get()?.piece_elems()
        {
            return self.layer_norm_long(x, weight, bias, eps, rms, out, mean, rstd);
        }
        if split::needed(op, &ts)? {
            let parts = [(x, len), (out, len), (mean, 1), (rstd, 1)];
            let shared: Vec<&Tensor> = weight.into_iter().chain(bias).collect();
            return row_blocks(op, rows, &parts, &shared, &mut |v, _| {
                let w = weight.map(|_| &v[4]);
                let b = bias.map(|_| &v[4 + weight.is_some() as usize]);
                self.layer_norm(&v[0], w, b, eps, rms, &v[1], &v[2], &v[3])
            });
        }
        let (mut bd, bufs) = bind(op, &ts)?;
        let n = ts.len();
        for k in n - 3..n {
            let j = bd.operand[k];
            bd.bufs[j].1 = true;
        }
        let meta = vec![
            rows as u32,
            len as u32,
            (eps as f32).to_bits(),
            1,
            1,
            x.offset() as u32,
            out.offset() as u32,
            rows as u32,
            len as u32,
            len as u32,
            1,
            mean.offset() as u32,
            rstd.offset() as u32,
            weight.map_or(0, |w| w.offset() as u32),
            bias.map_or(0, |b| b.offset() as u32),
        ];
        check_row_trips(op, 3, len)?;
        let src = shaders::layer_norm(&bd, weight.is_some(), bias.is_some(), rms);
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        get()?.dispatch(op, &src, &refs, &meta, rows as u64)
    }

    fn arg_reduce(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        check_same_device(op, &[x, indices])?;
        let ty = gty(op, x.dtype())?;
        if x.ndim() > 0 && over_loop_limit(row_trips(1, x.shape()[dim], 1))? {
            return self.arg_reduce_long(aop, x, dim, values, indices);
        }
        if x.ndim() > 0 && split::needed(op, &[x, indices])?
            || values.is_some_and(|v| split::needed(op, &[v]).unwrap_or(false))
        {
            return self.arg_reduce_split(aop, x, dim, values, indices);
        }
        let mut ts: Vec<&Tensor> = vec![x];
        if let Some(v) = values {
            ts.push(v);
        }
        ts.push(indices);
        let (mut bd, bufs) = bind(op, &ts)?;
        if values.is_some() {
            let j = bd.operand[1];
            bd.bufs[j].1 = true;
        }
        let (mut ks, mut kst) = (vec![], vec![]);
        for d in 0..x.ndim() {
            if d != dim {
                ks.push(x.shape()[d] as u32);
                kst.push(x.strides()[d] as i32 as u32);
            }
        }
        let nout: usize = ks.iter().map(|&v| v as usize).product();
        let len = if x.ndim() == 0 { 1 } else { x.shape()[dim] };
        if nout == 0 {
            return Ok(());
        }
        let xs = if x.ndim() == 0 { 0 } else { x.strides()[dim] };
        let mut meta = vec![
            nout as u32,
            len as u32,
            values.map_or(0, |v| v.offset() as u32),
            ks.len() as u32,
            1,
            x.offset() as u32,
            indices.offset() as u32,
        ];
        meta.extend(ks);
        meta.extend(kst);
        meta.push(len as u32);
        meta.push(xs as i32 as u32);
        check_row_trips(op, 1, len)?;
        let src = shaders::arg_reduce(&bd, ty, aop == ArgOp::Max, values.is_some());
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        get()?.dispatch(op, &src, &refs, &meta, nout as u64)
    }

    fn cast_copy(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        let op = "copy";
        match (src.device(), dst.device()) {
            (Device::Gpu(_), Device::Gpu(_)) => {}
            (Device::Cpu, Device::Gpu(_)) => {
                // Host values into a GPU tensor: upload, then copy on the device.
                let up = upload(src, dst.device())?;
                return self.cast_copy(&up, dst);
            }
            (a, b) => {
                return Err(Error::runtime(
                    op,
                    format!("expected all tensors to be on the same device, but found {b} and {a}"),
                ))
            }
        }
        let (from, to) = (gty(op, src.dtype())?, gty(op, dst.dtype())?);
        let src = if src.shares_storage(dst)
            && (from != to || is_half(src.dtype()) != is_half(dst.dtype()))
        {
            let tmp = Tensor::empty(src.shape(), src.dtype(), src.device())?;
            self.cast_copy(src, &tmp)?;
            tmp
        } else {
            src.clone()
        };
        let (b, bufs) = bind(op, &[&src, dst])?;
        run_ew(
            op,
            &shaders::cast(&b, from, to),
            &[&src, dst],
            &bufs,
            [0; 8],
        )
    }

    fn fill(&self, dst: &Tensor, value: Scalar) -> Result<()> {
        let op = "fill";
        let ty = gty(op, dst.dtype())?;
        let word = scalar_bits(op, value, dst.dtype(), ty)?;
        let (b, bufs) = bind(op, &[dst])?;
        run_ew(
            op,
            &shaders::fill(&b, ty),
            &[dst],
            &bufs,
            [word, 0, 0, 0, 0, 0, 0, 0],
        )
    }

    fn unary(&self, uop: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
        let op = uop.name();
        check_same_device(op, &[x, out])?;
        let (ti, to) = (gty(op, x.dtype())?, gty(op, out.dtype())?);
        let (b, bufs) = bind(op, &[x, out])?;
        let src = shaders::unary(&b, uop, ti, to).ok_or_else(|| {
            Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            )
        })?;
        let p = shaders::unary_params(uop);
        let params = match ti {
            GTy::F32 => [
                (p[0] as f32).to_bits(),
                (p[1] as f32).to_bits(),
                0,
                0,
                0,
                0,
                0,
                0,
            ],
            // Integer bounds (clamp's) beyond the 32 bits every stored value
            // fits in saturate: they clamp nothing, as on the CPU.
            _ => [sat_word(p[0]), sat_word(p[1]), 0, 0, 0, 0, 0, 0],
        };
        run_ew(op, &src, &[x, out], &bufs, params)
    }

    fn binary(&self, bop: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        let op = bop.name();
        check_same_device(op, &[a, b, out])?;
        let (ty, to) = (gty(op, a.dtype())?, gty(op, out.dtype())?);
        let v = unshare(op, &[a, b, out], 1)?;
        let (a, b) = (&v[0], &v[1]);
        let (bd, bufs) = bind(op, &[a, b, out])?;
        let src = shaders::binary(&bd, bop, ty, to).ok_or_else(|| {
            Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", a.dtype()),
            )
        })?;
        run_ew(op, &src, &[a, b, out], &bufs, [0; 8])
    }

    fn where_(&self, cond: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
        let op = "where";
        check_same_device(op, &[cond, a, b, out])?;
        let c = as_bool(cond)?;
        let v = unshare(op, &[&c, a, b, out], 1)?;
        let (c, a, b) = (&v[0], &v[1], &v[2]);
        let (bd, bufs) = bind(op, &[c, a, b, out])?;
        run_ew(
            op,
            &shaders::where_(&bd, GTy::U32),
            &[c, a, b, out],
            &bufs,
            [0; 8],
        )
    }

    fn reduce(&self, rop: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> Result<()> {
        let op = rop.name();
        check_same_device(op, &[x, out])?;
        let tx = gty(op, x.dtype())?;
        let to = gty(op, out.dtype())?;
        let nred_all: usize = x
            .shape()
            .iter()
            .zip(mask)
            .filter(|(_, &m)| m)
            .map(|(&n, _)| n)
            .product();
        let rdims = mask.iter().filter(|&&m| m).count();
        let passes = if matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp) {
            2
        } else {
            1
        };
        let over_loops = get()?
            .loop_limit
            .is_some_and(|lim| row_trips(passes, nred_all, rdims) >= lim);
        if (buffer(op, x)?.len > get()?.max_binding() || over_loops)
            && out.numel() == 1
            && x.is_contiguous()
            && !matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp)
        {
            return reduce_in_pieces(rop, x, out);
        }
        if over_loops
            && out.numel() == 1
            && !x.is_contiguous()
            && !matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp)
        {
            // A strided view reduced whole: a dense copy reduces in pieces.
            let dense = Tensor::empty(x.shape(), x.dtype(), x.device())?;
            self.cast_copy(x, &dense)?;
            return reduce_in_pieces(rop, &dense, out);
        }
        if over_loops {
            return self.reduce_long_rows(rop, x, mask, out);
        }
        check_loop_trips(
            op,
            row_trips(passes, nred_all, rdims),
            &|| {
                format!(
                    "reducing {nred_all} elements per output ({op} of shape {:?})",
                    x.shape()
                )
            },
            "reduce in steps (over some dims, then the rest of them) or over a reshaped view",
        )?;
        if split::needed(op, &[x, out])? {
            return self.reduce_split(rop, x, mask, out);
        }
        let acc = match rop {
            ReduceOp::Mean | ReduceOp::Var { .. } | ReduceOp::LogSumExp => GTy::F32,
            ReduceOp::All | ReduceOp::Any => GTy::U32,
            _ => to,
        };
        let (bd, bufs) = bind(op, &[x, out])?;
        let src = shaders::reduce(&bd, rop, tx, acc, to).ok_or_else(|| {
            Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            )
        })?;
        let (mut ks, mut kst, mut rs, mut rst) = (vec![], vec![], vec![], vec![]);
        for (d, &m) in mask.iter().enumerate() {
            if m {
                rs.push(x.shape()[d] as u32);
                rst.push(x.strides()[d] as i32 as u32);
            } else {
                ks.push(x.shape()[d] as u32);
                kst.push(x.strides()[d] as i32 as u32);
            }
        }
        let nout: usize = ks.iter().map(|&v| v as usize).product();
        let nred: usize = rs.iter().map(|&v| v as usize).product();
        if nout == 0 {
            return Ok(());
        }
        let corr = match rop {
            ReduceOp::Var { correction, .. } => correction as f32,
            _ => 0.0,
        };
        let mut meta = vec![
            nout as u32,
            nred as u32,
            corr.to_bits(),
            ks.len() as u32,
            rs.len() as u32,
            x.offset() as u32,
            out.offset() as u32,
        ];
        meta.extend(ks);
        meta.extend(kst);
        meta.extend(rs);
        meta.extend(rst);
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        get()?.dispatch(op, &src, &refs, &meta, nout as u64)
    }

    fn softmax(&self, x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
        let op = if log { "log_softmax" } else { "softmax" };
        check_same_device(op, &[x, out])?;
        if !gpu_float(x.dtype()) {
            gty(op, x.dtype())?;
            return Err(Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            ));
        }
        if x.ndim() > 0 && over_loop_limit(row_trips(3, x.shape()[dim], 1))? {
            return self.softmax_long(x, dim, log, out);
        }
        if x.ndim() > 0 && split::needed(op, &[x, out])? {
            if x.shape()[dim] > get()?.piece_elems() {
                return self.softmax_long(x, dim, log, out);
            }
            // Rows split; the softmax dim stays whole, so it is made the
            // innermost dim of both operands first (a row then spans only itself).
            if x.shape()[dim] > 1 && x.strides()[dim] != 1 {
                let xt = dim_last(op, x.shape(), dim, x.dtype())?;
                self.cast_copy(x, &xt)?;
                return self.softmax(&xt, dim, log, out);
            }
            if x.shape()[dim] > 1 && out.strides()[dim] != 1 {
                let ot = dim_last(op, out.shape(), dim, out.dtype())?;
                self.softmax(x, dim, log, &ot)?;
                return self.cast_copy(&ot, out);
            }
            let ts = [x, out];
            let space = split::Space::lines(&ts, dim);
            return split::in_pieces(op, &space, &mut |v, _| self.softmax(&v[0], dim, log, &v[1]));
        }
        let (bd, bufs) = bind(op, &[x, out])?;
        let (mut ks, mut kst, mut okst) = (vec![], vec![], vec![]);
        for d in 0..x.ndim() {
            if d != dim {
                ks.push(x.shape()[d] as u32);
                kst.push(x.strides()[d] as i32 as u32);
                okst.push(out.strides()[d] as i32 as u32);
            }
        }
        let nout: usize = ks.iter().map(|&v| v as usize).product();
        let len = if x.ndim() == 0 { 1 } else { x.shape()[dim] };
        if nout == 0 || len == 0 {
            return Ok(());
        }
        let (xs, os) = if x.ndim() == 0 {
            (0, 0)
        } else {
            (x.strides()[dim], out.strides()[dim])
        };
        let mut meta = vec![
            nout as u32,
            len as u32,
            log as u32,
            ks.len() as u32,
            1,
            x.offset() as u32,
            out.offset() as u32,
        ];
        meta.extend(ks);
        meta.extend(kst);
        meta.push(len as u32);
        meta.push(xs as i32 as u32);
        meta.extend(okst);
        meta.push(os as i32 as u32);
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        check_row_trips(op, 3, len)?;
        get()?.dispatch(op, &shaders::softmax(&bd), &refs, &meta, nout as u64)
    }

    fn layer_norm_grad(
        &self,
        x: &Tensor,
        g: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        rms: bool,
        dx: Option<&Tensor>,
        dw: Option<&Tensor>,
        db: Option<&Tensor>,
    ) -> Result<bool> {
        let op = if rms {
            "rms_norm_backward"
        } else {
            "layer_norm_backward"
        };
        let mut all: Vec<&Tensor> = vec![x, g, mean, rstd];
        all.extend(weight);
        all.extend(dx);
        all.extend(dw);
        all.extend(db);
        check_same_device(op, &all)?;
        if all.iter().any(|t| t.dtype() != DType::F32) {
            return Ok(false);
        }
        let rows = mean.numel();
        let len = x.numel().checked_div(rows).unwrap_or(0);
        if rows == 0 || len == 0 {
            for t in [dw, db].into_iter().flatten() {
                self.fill(t, Scalar::Float(0.0))?;
            }
            return Ok(true);
        }
        // The kernels index dense blocks of rows from each operand's offset.
        let flat = |t: &Tensor| -> Result<Tensor> {
            if t.is_contiguous() {
                Ok(t.clone())
            } else {
                let c = Tensor::empty(t.shape(), t.dtype(), t.device())?;
                self.cast_copy(t, &c)?;
                Ok(c)
            }
        };
        let (xc, gc, rc, mc) = (flat(x)?, flat(g)?, flat(rstd)?, flat(mean)?);
        let wc = weight.map(flat).transpose()?;
        if over_loop_limit(row_trips(3, len, 1))?
            || split::needed(op, &all)? && len > get()?.piece_elems()
        {
            self.layer_norm_grad_long(&xc, &gc, &mc, &rc, wc.as_ref(), rms, dx, dw, db)?;
            return Ok(true);
        }
        if split::needed(op, &all)? {
            // Blocks of whole rows, each within one binding per buffer; the
            // weight and bias gradients add up the blocks' sums.
            let inputs = [(&xc, len), (&gc, len), (&mc, 1), (&rc, 1)];
            if let Some(dx) = dx {
                into_dense(dx, |o| {
                    let mut parts = inputs.to_vec();
                    parts.push((o, len));
                    let shared: Vec<&Tensor> = wc.iter().collect();
                    row_blocks(op, rows, &parts, &shared, &mut |v, _| {
                        let (x, g, m, r) = (&v[0], &v[1], &v[2], &v[3]);
                        self.layer_norm_grad(x, g, m, r, v.get(5), rms, Some(&v[4]), None, None)
                            .map(|_| ())
                    })
                })?;
            }
            if dw.is_some() || db.is_some() {
                let shared: Vec<&Tensor> = dw.into_iter().chain(db).collect();
                row_blocks(op, rows, &inputs, &shared, &mut |v, (lo, _)| {
                    let (x, g, m, r) = (&v[0], &v[1], &v[2], &v[3]);
                    let (pw, pb) = (dw.map(|_| &v[4]), db.map(|_| &v[4 + dw.is_some() as usize]));
                    if lo == 0 {
                        return self
                            .layer_norm_grad(x, g, m, r, None, rms, None, pw, pb)
                            .map(|_| ());
                    }
                    let temp = |t: Option<&Tensor>| {
                        t.map(|t| Tensor::empty(t.shape(), DType::F32, t.device()))
                            .transpose()
                    };
                    let (tw, tb) = (temp(pw)?, temp(pb)?);
                    self.layer_norm_grad(x, g, m, r, None, rms, None, tw.as_ref(), tb.as_ref())?;
                    for (d, t) in [(pw, &tw), (pb, &tb)] {
                        if let (Some(d), Some(t)) = (d, t) {
                            self.binary(BinaryOp::Add, d, t, d)?;
                        }
                    }
                    Ok(())
                })?;
            }
            return Ok(true);
        }
        // RMS norm reads no mean: its operand slot repeats rstd, so the
        // kernel binds no buffer it leaves unused (wgpu refuses those).
        let mc = if rms { rc.clone() } else { mc };
        if let Some(dx) = dx {
            into_dense(dx, |o| {
                let mut ts = vec![&xc, &gc, &mc, &rc];
                ts.extend(wc.as_ref());
                ts.push(o);
                let (bd, bufs) = bind(op, &ts)?;
                let meta = vec![
                    rows as u32,
                    len as u32,
                    0,
                    1,
                    1,
                    xc.offset() as u32,
                    o.offset() as u32,
                    rows as u32,
                    len as u32,
                    len as u32,
                    1,
                    gc.offset() as u32,
                    mc.offset() as u32,
                    rc.offset() as u32,
                    wc.as_ref().map_or(0, |w| w.offset() as u32),
                ];
                check_row_trips(op, 3, len)?;
                let src = shaders::layer_norm_grad_input(&bd, wc.is_some(), rms);
                let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
                get()?.dispatch(op, &src, &refs, &meta, rows as u64)
            })?;
        }
        if dw.is_some() || db.is_some() {
            let target = |t: &Tensor| -> Result<Tensor> {
                if t.is_contiguous() {
                    Ok(t.clone())
                } else {
                    Tensor::empty(t.shape(), DType::F32, t.device())
                }
            };
            let dwc = dw.map(target).transpose()?;
            let dbc = db.map(target).transpose()?;
            let mut ts = vec![&xc, &gc, &mc, &rc];
            ts.extend(dwc.as_ref());
            ts.extend(dbc.as_ref());
            let outs = dwc.is_some() as usize + dbc.is_some() as usize;
            let (bd, bufs) = bind_written(op, &ts, outs)?;
            check_loop_trips(
                op,
                2 * rows as u64 + 64,
                &|| format!("summing the gradients of {rows} rows"),
                "work on fewer rows at a time and add the parameter gradients",
            )?;
            let src = shaders::layer_norm_grad_params(&bd, dwc.is_some(), dbc.is_some(), rms);
            let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
            let meta = [
                len as u32,
                rows as u32,
                xc.offset() as u32,
                gc.offset() as u32,
                mc.offset() as u32,
                rc.offset() as u32,
                dwc.as_ref().map_or(0, |t| t.offset() as u32),
                dbc.as_ref().map_or(0, |t| t.offset() as u32),
            ];
            get()?.dispatch(
                op,
                &src,
                &refs,
                &meta,
                (len as u64).div_ceil(shaders::WG as u64),
            )?;
            for (dst, src) in [(dw, &dwc), (db, &dbc)] {
                if let (Some(d), Some(s)) = (dst, src) {
                    if !s.shares_storage(d) {
                        self.cast_copy(s, d)?;
                    }
                }
            }
        }
        Ok(true)
    }

    fn softmax_grad(
        &self,
        y: &Tensor,
        g: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<bool> {
        let op = if log {
            "log_softmax_backward"
        } else {
            "softmax_backward"
        };
        check_same_device(op, &[y, g, out])?;
        // float16/bfloat16 compute in float32 here as well, rounded once on store.
        if !gpu_float(y.dtype()) || [g, out].iter().any(|t| t.dtype() != y.dtype()) {
            return Ok(false);
        }
        let nd = y.ndim();
        let len = if nd == 0 { 1 } else { y.shape()[dim] };
        let nout = y.numel() / len.max(1);
        if nout == 0 || len == 0 {
            return Ok(true);
        }
        if nd > 0
            && (over_loop_limit(row_trips(3, len, 1))?
                || split::needed(op, &[y, g, out])? && len > get()?.piece_elems())
        {
            self.softmax_grad_long(y, g, dim, log, out)?;
            return Ok(true);
        }
        if nd > 0 && split::needed(op, &[y, g, out])? {
            // Lines along `dim` stay whole (made innermost first, as for softmax).
            if len > 1 {
                for (k, t) in [y, g].into_iter().enumerate() {
                    if t.strides()[dim] != 1 {
                        let tt = dim_last(op, t.shape(), dim, t.dtype())?;
                        self.cast_copy(t, &tt)?;
                        let (y, g) = if k == 0 { (&tt, g) } else { (y, &tt) };
                        return self.softmax_grad(y, g, dim, log, out);
                    }
                }
                if out.strides()[dim] != 1 {
                    let ot = dim_last(op, out.shape(), dim, out.dtype())?;
                    self.softmax_grad(y, g, dim, log, &ot)?;
                    self.cast_copy(&ot, out)?;
                    return Ok(true);
                }
            }
            let ts = [y, g, out];
            let space = split::Space::lines(&ts, dim);
            split::in_pieces(op, &space, &mut |v, _| {
                self.softmax_grad(&v[0], &v[1], dim, log, &v[2]).map(|_| ())
            })?;
            return Ok(true);
        }
        let (bd, bufs) = bind(op, &[y, g, out])?;
        let keep: Vec<usize> = (0..nd).filter(|&d| d != dim).collect();
        let red = |t: &Tensor| {
            if nd == 0 {
                0
            } else {
                t.strides()[dim] as i32 as u32
            }
        };
        let mut meta = vec![
            nout as u32,
            len as u32,
            log as u32,
            keep.len() as u32,
            1,
            y.offset() as u32,
            g.offset() as u32,
        ];
        meta.extend(keep.iter().map(|&d| y.shape()[d] as u32));
        meta.extend(keep.iter().map(|&d| y.strides()[d] as i32 as u32));
        meta.push(len as u32);
        meta.push(red(y));
        meta.extend(keep.iter().map(|&d| g.strides()[d] as i32 as u32));
        meta.push(red(g));
        meta.push(out.offset() as u32);
        meta.extend(keep.iter().map(|&d| out.strides()[d] as i32 as u32));
        meta.push(red(out));
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        check_row_trips(op, 3, len)?;
        get()?.dispatch(op, &shaders::softmax_grad(&bd), &refs, &meta, nout as u64)?;
        Ok(true)
    }

    fn unary_grad(
        &self,
        uop: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        g: &Tensor,
        out: &Tensor,
    ) -> Result<bool> {
        let op = uop.name();
        check_same_device(op, &[x, y, g, out])?;
        // float16/bfloat16 compute in float32, rounded once on store (their
        // gradients written out of ops would round every intermediate).
        if !gpu_float(x.dtype()) || [y, g, out].iter().any(|t| t.dtype() != x.dtype()) {
            return Ok(false);
        }
        let (bd, bufs) = bind(op, &[x, y, g, out])?;
        let Some(src) = shaders::unary_grad(&bd, uop) else {
            return Ok(false);
        };
        let p = shaders::unary_params(uop);
        let mut params = [0u32; 8];
        params[0] = (p[0] as f32).to_bits();
        params[1] = (p[1] as f32).to_bits();
        run_ew(op, &src, &[x, y, g, out], &bufs, params)?;
        Ok(true)
    }

    fn cross_entropy(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        cfg: CeCfg,
        shape: &[usize],
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let mut ts: Vec<&Tensor> = vec![x, target];
        ts.extend(weight);
        ts.extend([loss, lse, wt]);
        check_same_device(op, &ts)?;
        let mut fl: Vec<&Tensor> = vec![x, loss, lse, wt];
        fl.extend(weight);
        f32_only(op, &fl)?;
        gty(op, target.dtype())?;
        let rows = target.numel();
        // Targets are checked on the host before anything is written (an index error, as on the CPU).
        let (c, shape_text) = (cfg.c, crate::tensor::layout::fmt_shape(shape));
        check_indices(target, c as u64, Some(cfg.ignore_index), move |bad| {
            Error::index(
                op,
                format!("target {bad} is out of bounds for {c} classes (input shape {shape_text})"),
            )
        })?;
        if rows == 0 {
            return Ok(());
        }
        if cfg.c == 0 {
            self.fill(loss, Scalar::Float(0.0))?;
            self.fill(wt, Scalar::Float(0.0))?;
            return self.fill(lse, Scalar::Float(f64::NEG_INFINITY));
        }
        check_items(op, rows * cfg.c)?;
        let (xc, tc) = (dense(x)?, dense(target)?);
        let wc = weight.map(dense).transpose()?;
        let (lc, sc, wtc) = (dense(loss)?, dense(lse)?, dense(wt)?);
        self.ce_rows(&xc, &tc, wc.as_ref(), cfg, &lc, &sc, &wtc)?;
        for (d, s) in [(loss, &lc), (lse, &sc), (wt, &wtc)] {
            if !d.shares_storage(s) {
                self.cast_copy(s, d)?;
            }
        }
        Ok(())
    }

    fn cross_entropy_grad(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let mut ts: Vec<&Tensor> = vec![x, target, lse, g, out];
        ts.extend(weight);
        check_same_device(op, &ts)?;
        let mut fl: Vec<&Tensor> = vec![x, lse, g, out];
        fl.extend(weight);
        f32_only(op, &fl)?;
        gty(op, target.dtype())?;
        let rows = target.numel();
        if rows == 0 || cfg.c == 0 {
            return Ok(());
        }
        check_items(op, rows * cfg.c)?;
        let (xc, tc, lc, gc) = (dense(x)?, dense(target)?, dense(lse)?, dense(g)?);
        let wc = weight.map(dense).transpose()?;
        into_dense(out, |o| {
            self.ce_grad_rows(&xc, &tc, wc.as_ref(), &lc, &gc, cfg, o)
        })
    }

    fn conv2d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        let op = "conv2d";
        // The implicit GEMM splits its sums for a loop limit itself.
        let mut gemm = conv_gemm::chosen(
            shaders::ConvGemm::Forward {
                bias: bias.is_some(),
            },
            w.shape(),
            p.groups,
        )?;
        if w.ndim() == 4 && !gemm {
            // Each output sums over its group's input channels and the
            // window: past the adapter's loop limit the implicit GEMM (which
            // splits its sums) runs instead, unless the direct kernel is forced.
            let (cg, kh, kw) = (
                w.shape()[1] as u64,
                w.shape()[2] as u64,
                w.shape()[3] as u64,
            );
            let trips = 2 * cg * (1 + kh * (1 + kw)) + 64;
            if conv_gemm::forced().is_none() && over_loop_limit(trips)? {
                gemm = true;
            } else {
                check_loop_trips(
                    op,
                    trips,
                    &|| format!("a convolution summing {cg} channels of {kh}x{kw} windows"),
                    "split the input channels (convolve groups of them and add)",
                )?;
            }
        }
        conv_check(op, &[x, w, out], p)?;
        if let Some(b) = bias {
            check_same_device(op, &[b, out])?;
            f32_only(op, &[b])?;
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        let mut ts: Vec<&Tensor> = vec![x, w];
        ts.extend(bias);
        ts.push(out);
        if split::needed(op, &ts)? {
            if plane_too_big(&[x, out])? {
                let (xs, os) = (x.shape(), out.shape());
                let kr = (w.shape()[2], p.stride[0], p.dilation[0], p.pad[0]);
                for (oh0, oh1, lo, hi, top) in conv_bands(op, (xs[2], xs[3]), (os[2], os[3]), kr)? {
                    let q = with_top(p, top);
                    self.conv2d(&rows_of(x, lo, hi)?, w, bias, &q, &rows_of(out, oh0, oh1)?)?;
                }
                return Ok(());
            }
            if p.groups == 1 {
                // Images, output and input channels split; a later piece
                // along the input channels adds its partial sums (the first
                // adds the bias).
                let mut axes = vec![CONV_X.to_vec(), CONV_W.to_vec()];
                axes.extend(bias.map(|_| vec![CONV_O]));
                axes.push(CONV_Y.to_vec());
                let space = conv_space(&ts, axes, x, w, out);
                return split::in_pieces(op, &space, &mut |v, r| {
                    let first = r[CONV_C].0 == 0;
                    let b = bias.filter(|_| first).map(|_| &v[2]);
                    self.write_or_add(&v[v.len() - 1], first, |o| {
                        self.conv2d(&v[0], &v[1], b, p, o)
                    })
                });
            }
            let batched: Vec<bool> = (0..ts.len()).map(|k| k == 0 || k == ts.len() - 1).collect();
            return split::by_batch(op, &ts, &batched, &mut |v, _| {
                let b = bias.is_some().then(|| &v[2]);
                self.conv2d(&v[0], &v[1], b, p, &v[v.len() - 1])
            });
        }
        dense_out(out, |o| {
            let (xc, wc) = (dense(x)?, dense(w)?);
            let bc = bias.map(dense).transpose()?;
            let mut meta = conv_meta(
                xc.shape(),
                wc.shape(),
                o.shape(),
                p,
                n,
                [
                    xc.offset(),
                    wc.offset(),
                    bc.as_ref().map_or(0, |b| b.offset()),
                ],
            );
            meta[17] = bias.is_some() as u32;
            let mut ts: Vec<&Tensor> = vec![&xc, &wc];
            ts.extend(bc.as_ref());
            ts.push(o);
            let hb = bias.is_some();
            if gemm {
                return conv_gemm::run(op, shaders::ConvGemm::Forward { bias: hb }, &ts, &meta);
            }
            run_items(op, |bd| shaders::conv2d(bd, hb), &ts, &[], &meta, n)?;
            Ok(())
        })
    }

    fn conv2d_input_grad(
        &self,
        g: &Tensor,
        w: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        let op = "conv2d_backward";
        let mut gemm = conv_gemm::chosen(shaders::ConvGemm::InputGrad, w.shape(), p.groups)?;
        if !gemm {
            // Past the adapter's loop limit the implicit GEMM runs instead
            // (as for the forward), unless the direct kernel is forced.
            if conv_gemm::forced().is_none()
                && over_loop_limit(conv_grad_trip_count(g, Some(w), p))?
            {
                gemm = true;
            } else {
                conv_grad_trips(op, g, Some(w), p)?;
            }
        }
        conv_check(op, &[g, w, out], p)?;
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if split::needed(op, &[g, w, out])? {
            if plane_too_big(&[g, out])? {
                // Bands of the input's rows, each with the gradient rows
                // that reach it (`g0` small enough that the shifted top
                // padding stays non-negative).
                let (is, gs) = (out.shape(), g.shape());
                let (sh, dh, pt) = (p.stride[0], p.dilation[0], p.pad[0]);
                let reach = (w.shape()[2] - 1) * dh;
                // A band of r input rows reads at most r + reach + 1 rows of
                // the gradient: budget them as a kernel of that height.
                let width = is[3].max(gs[3]);
                let kr = (reach + 2, 1, 1, 0);
                for (ih0, ih1, ..) in conv_bands(op, (is[2], width), (is[2], width), kr)? {
                    let g0 = ((ih0 + pt).saturating_sub(reach).div_ceil(sh))
                        .min((ih0 + pt) / sh)
                        .min(gs[2].saturating_sub(1));
                    let g1 = ((ih1 - 1 + pt) / sh + 1).clamp(g0 + 1, gs[2]);
                    let q = with_top(p, pt + ih0 - g0 * sh);
                    self.conv2d_input_grad(&rows_of(g, g0, g1)?, w, &q, &rows_of(out, ih0, ih1)?)?;
                }
                return Ok(());
            }
            if p.groups == 1 {
                // Images and channels split; a later piece along the output
                // channels adds its part of the sum over them.
                let ts = [g, w, out];
                let axes = vec![CONV_Y.to_vec(), CONV_W.to_vec(), CONV_X.to_vec()];
                let space = conv_space(&ts, axes, out, w, g);
                return split::in_pieces(op, &space, &mut |v, r| {
                    self.write_or_add(&v[2], r[CONV_O].0 == 0, |o| {
                        self.conv2d_input_grad(&v[0], &v[1], p, o)
                    })
                });
            }
            return split::by_batch(op, &[g, w, out], &[true, false, true], &mut |v, _| {
                self.conv2d_input_grad(&v[0], &v[1], p, &v[2])
            });
        }
        dense_out(out, |o| {
            let (gc, wc) = (dense(g)?, dense(w)?);
            let meta = conv_meta(
                o.shape(),
                wc.shape(),
                gc.shape(),
                p,
                n,
                [gc.offset(), wc.offset(), 0],
            );
            if gemm {
                return conv_gemm::run(op, shaders::ConvGemm::InputGrad, &[&gc, &wc, o], &meta);
            }
            run_items(
                op,
                shaders::conv2d_input_grad,
                &[&gc, &wc, o],
                &[],
                &meta,
                n,
            )?;
            Ok(())
        })
    }

    fn conv2d_weight_grad(
        &self,
        g: &Tensor,
        x: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        let op = "conv2d_backward";
        let gemm = conv_gemm::chosen(shaders::ConvGemm::WeightGrad, out.shape(), p.groups)?;
        // Every thread of the direct weight gradient walks all images and
        // output pixels: under a loop limit, fewer images at a time, their
        // gradients added (the implicit GEMM splits its sum itself).
        if let (Some(limit), 4, 4, false) = (get()?.loop_limit, g.ndim(), x.ndim(), gemm) {
            let (imgs, oh, ow) = (g.shape()[0], g.shape()[2] as u64, g.shape()[3] as u64);
            // Twice the plain count: the kernel's `continue`s (padding) cost
            // trips of their own (measured: 80 images of 28x28 outputs, 65,040
            // plain trips, came out wrong; 72 were right).
            let per = (limit.saturating_sub(64) / (2 * (1 + oh * (1 + ow)))).max(1) as usize;
            if imgs > per && g.shape()[0] == x.shape()[0] {
                let mut i0 = 0;
                while i0 < imgs {
                    let len = per.min(imgs - i0);
                    let gs = g.with_layout(g.layout().narrow(op, 0, i0 as isize, len)?);
                    let xs = x.with_layout(x.layout().narrow(op, 0, i0 as isize, len)?);
                    self.write_or_add(out, i0 == 0, |o| self.conv2d_weight_grad(&gs, &xs, p, o))?;
                    i0 += len;
                }
                return Ok(());
            }
        }
        if !gemm {
            conv_grad_trips(op, g, None, p)?;
        }
        conv_check(op, &[g, x, out], p)?;
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if split::needed(op, &[g, x, out])? {
            if plane_too_big(&[g, x])? {
                // Bands of the output rows; each band's part of the sum adds up.
                let (xs, gs) = (x.shape(), g.shape());
                let kr = (out.shape()[2], p.stride[0], p.dilation[0], p.pad[0]);
                let bands = conv_bands(op, (xs[2], xs[3]), (gs[2], gs[3]), kr)?;
                for (b, &(oh0, oh1, lo, hi, top)) in bands.iter().enumerate() {
                    let q = with_top(p, top);
                    let (gb, xb) = (rows_of(g, oh0, oh1)?, rows_of(x, lo, hi)?);
                    self.write_or_add(out, b == 0, |o| self.conv2d_weight_grad(&gb, &xb, &q, o))?;
                }
                return Ok(());
            }
            if p.groups == 1 {
                // Images and channels split; the weight's gradient sums over
                // the images, so a later piece along them adds its part.
                let ts = [g, x, out];
                let axes = vec![CONV_Y.to_vec(), CONV_X.to_vec(), CONV_W.to_vec()];
                let space = conv_space(&ts, axes, x, out, g);
                return split::in_pieces(op, &space, &mut |v, r| {
                    self.write_or_add(&v[2], r[CONV_N].0 == 0, |o| {
                        self.conv2d_weight_grad(&v[0], &v[1], p, o)
                    })
                });
            }
            // The weight's gradient sums over the batch: later pieces add theirs.
            return split::by_batch(op, &[g, x, out], &[true, true, false], &mut |v, r| {
                self.write_or_add(&v[2], r.0 == 0, |o| {
                    self.conv2d_weight_grad(&v[0], &v[1], p, o)
                })
            });
        }
        dense_out(out, |o| {
            let (gc, xc) = (dense(g)?, dense(x)?);
            let meta = conv_meta(
                xc.shape(),
                o.shape(),
                gc.shape(),
                p,
                n,
                [gc.offset(), xc.offset(), 0],
            );
            if gemm {
                return conv_gemm::run(op, shaders::ConvGemm::WeightGrad, &[&gc, &xc, o], &meta);
            }
            run_items(
                op,
                shaders::conv2d_weight_grad,
                &[&gc, &xc, o],
                &[],
                &meta,
                n,
            )?;
            Ok(())
        })
    }

    fn max_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        out: &Tensor,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        let op = "max_pool2d";
        let mut ts: Vec<&Tensor> = vec![x, out];
        ts.extend(indices);
        check_same_device(op, &ts)?;
        f32_only(op, &[x, out])?;
        if x.ndim() != 4 || out.ndim() != 4 {
            return Err(Error::shape(
                op,
                format!(
                    "the gpu kernel expects 4-D input and output, got {:?} and {:?}",
                    x.shape(),
                    out.shape()
                ),
            ));
        }
        if let Some(i) = indices {
            gty(op, i.dtype())?;
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if split::needed(op, &ts)? {
            return split::in_pieces(op, &pool_space(&ts), &mut |v, _| {
                self.max_pool2d(&v[0], p, &v[1], v.get(2))
            });
        }
        check_items(op, x.numel().max(n))?;
        let fresh = |t: &Tensor| -> Result<Tensor> {
            if t.is_contiguous() && t.offset() == 0 {
                Ok(t.clone())
            } else {
                Tensor::empty(t.shape(), t.dtype(), t.device())
            }
        };
        let xc = dense(x)?;
        let o = fresh(out)?;
        let ic = indices.map(fresh).transpose()?;
        let (s, os) = (x.shape(), out.shape());
        let meta: Vec<u32> = [
            n,
            s[2],
            s[3],
            os[2],
            os[3],
            p.kernel[0],
            p.kernel[1],
            p.stride[0],
            p.stride[1],
            p.pad[0],
            p.pad[1],
            p.dilation[0],
            p.dilation[1],
            xc.offset(),
        ]
        .iter()
        .map(|&v| v as u32)
        .collect();
        let mut ts: Vec<&Tensor> = vec![&xc, &o];
        ts.extend(ic.as_ref());
        let wi = ic.is_some();
        run_items(op, |bd| shaders::max_pool2d(bd, wi), &ts, &[1], &meta, n)?;
        if !o.shares_storage(out) {
            self.cast_copy(&o, out)?;
        }
        if let (Some(i), Some(c)) = (indices, &ic) {
            if !i.shares_storage(c) {
                self.cast_copy(c, i)?;
            }
        }
        Ok(())
    }

    fn avg_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        count_include_pad: bool,
        divisor_override: Option<usize>,
        out: &Tensor,
    ) -> Result<()> {
        let mode = match divisor_override {
            Some(d) => (2, d),
            None if count_include_pad => (0, 0),
            None => (1, 0),
        };
        avg_pool("avg_pool2d", x, Some(p), mode, out)
    }

    fn adaptive_avg_pool2d(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        avg_pool("adaptive_avg_pool2d", x, None, (0, 0), out)
    }

    fn gather(&self, src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
        let op = "gather";
        check_same_device(op, &[src, index, out])?;
        gty(op, src.dtype())?;
        gty(op, index.dtype())?;
        if index.numel() == 0 {
            return Ok(());
        }
        let len = src.shape()[dim];
        check_indices(index, len as u64, None, move |bad| {
            Error::index(
                op,
                format!("index {bad} is out of bounds for dimension {dim} with size {len}"),
            )
        })?;
        self.gather_run(src, dim, index, out)
    }

    fn index_gather(&self, a: &IndexArgs, src: &Tensor, out: &Tensor) -> Result<()> {
        let op = a.op;
        let mut ts = vec![src, out];
        ts.extend(a.indices.iter());
        check_same_device(op, &ts)?;
        let ty = gty(op, src.dtype())?;
        let k = out.ndim() - (src.ndim() - a.dims.len());
        let bshape = &out.shape()[..k];
        let nb: usize = bshape.iter().product();
        if nb == 0 {
            return Ok(());
        }
        let keep = (0..src.ndim()).filter(|d| !a.dims.contains(d));
        if split::needed(op, &[src])? && row_too_wide(row_span(src, keep))? {
            // What one position selects spans too much of the source: index
            // a copy laid out with the indexed dims outermost instead.
            let c = outer_first(op, src, a.dims)?;
            if !row_too_wide(row_span(&c, (0..c.ndim()).filter(|d| !a.dims.contains(d))))? {
                return self.index_gather(a, &c, out);
            }
        }
        let (offs, host) = offsets_for(a, src, nb, bshape)?;
        if out.numel() == 0 {
            return Ok(());
        }
        // Over out's shape B ++ R: src walks its other dims (stride 0 over B),
        // the offsets walk B (stride 0 over R); the gather kernel adds them.
        let rs: Vec<isize> = (0..src.ndim())
            .filter(|d| !a.dims.contains(d))
            .map(|d| src.strides()[d])
            .collect();
        let launch = |sb: &Tensor, src_off: usize, offs: &Tensor, o: &Tensor| -> Result<()> {
            let kb = offs.ndim();
            let mut ss = vec![0isize; kb];
            ss.extend(&rs);
            let mut os: Vec<isize> = offs.strides().to_vec();
            os.resize(o.ndim(), 0);
            let walks = [
                (sb, src_off, ss),
                (offs, offs.offset(), os),
                (o, o.offset(), o.strides().to_vec()),
            ];
            gather_kernel(op, ty, o.shape(), walks, 1)
        };
        // Offsets or a result larger than one binding: blocks of positions
        // of a dense result (made once, as the windows below share it).
        let blocks = split::needed(op, &[out])? || (nb * 4) as u64 > get()?.max_binding();
        let run = |sb: &Tensor, src_off: usize, offs: &Tensor, o: &Tensor| -> Result<()> {
            if !blocks {
                return launch(sb, src_off, offs, o);
            }
            let mut flat = vec![nb];
            flat.extend_from_slice(&o.shape()[k..]);
            let (f1, o1) = (as_shape(offs, &[nb])?, as_shape(o, &flat)?);
            split::by_batch(op, &[&f1, &o1], &[true, true], &mut |v, _| {
                launch(sb, src_off, &v[0], &v[1])
            })
        };
        let all = |o: &Tensor| -> Result<()> {
            if let Some(host) = &host {
                // A source larger than one binding: one pass per window of
                // it, each writing the positions whose rows lie there.
                let keep = (0..src.ndim()).filter(|d| !a.dims.contains(d));
                let rows = row_span(src, keep);
                for (w, offs) in offset_windows(op, src, host, rows, bshape)? {
                    run(&w, 0, &offs, o)?;
                }
                return Ok(());
            }
            run(src, src.offset(), &offs, o)
        };
        if blocks {
            into_dense(out, all)
        } else {
            all(out)
        }
    }

    fn index_put(
        &self,
        a: &IndexArgs,
        dst: &Tensor,
        values: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let op = a.op;
        let mut ts = vec![values, dst];
        ts.extend(a.indices.iter());
        check_same_device(op, &ts)?;
        let ty = gty(op, dst.dtype())?;
        let k = values.ndim() - (dst.ndim() - a.dims.len());
        let nb: usize = values.shape()[..k].iter().product();
        if nb == 0 {
            return Ok(());
        }
        let keep = (0..dst.ndim()).filter(|d| !a.dims.contains(d));
        if split::needed(op, &[dst])? && row_too_wide(row_span(dst, keep))? {
            // As in `index_gather`: write into a copy laid out with the
            // indexed dims outermost, then copy it back.
            let c = outer_first(op, dst, a.dims)?;
            if !row_too_wide(row_span(&c, (0..c.ndim()).filter(|d| !a.dims.contains(d))))? {
                self.index_put(a, &c, values, accumulate)?;
                return self.cast_copy(&c, dst);
            }
        }
        let (offs, host) = offsets_for(a, dst, nb, &[nb])?;
        if values.numel() == 0 {
            return Ok(());
        }
        // One thread per element of the other dims R walks the index
        // positions in order, so repeated targets combine as on the CPU.
        let v = dense(values)?;
        let rshape = &values.shape()[k..];
        let block: usize = rshape.iter().product();
        let drest: Vec<isize> = (0..dst.ndim())
            .filter(|d| !a.dims.contains(d))
            .map(|d| dst.strides()[d])
            .collect();
        let v2 = as_rows(&v, nb, block)?;
        let put = Put {
            op,
            ty,
            rshape,
            drest: &drest,
            accumulate,
        };
        let run = |o: &Tensor, d: &Tensor, dst_off: usize| put.blocks(&v2, o, d, dst_off);
        if let Some(host) = host {
            // A destination larger than one binding: one pass per window
            // of it, each writing the positions whose rows lie there.
            let keep = (0..dst.ndim()).filter(|d| !a.dims.contains(d));
            let rows = row_span(dst, keep);
            for (w, o) in offset_windows(op, dst, &host, rows, &[nb])? {
                run(&o, &w, 0)?;
            }
            return Ok(());
        }
        run(&offs, dst, dst.offset())
    }

    fn nonzero_count(&self, x: &Tensor) -> Result<usize> {
        // The output's shape depends on the data: the count is read on the host.
        super::backend(Device::Cpu).nonzero_count(&download(x)?)
    }

    fn nonzero_fill(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        let h = download(x)?;
        via_host(out, |o| super::backend(Device::Cpu).nonzero_fill(&h, o))
    }

    fn scatter(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        check_same_device(op, &[index, src, dst])?;
        gty(op, dst.dtype())?;
        gty(op, index.dtype())?;
        if index.numel() == 0 {
            return Ok(());
        }
        let len = dst.shape()[dim];
        // max_pool2d's gradient scatters the indices its own kernel produced (always in range).
        if op != "max_pool2d" {
            check_indices(index, len as u64, None, move |bad| {
                Error::index(
                    op,
                    format!("index {bad} is out of bounds for dimension {dim} with size {len}"),
                )
            })?;
        }
        self.scatter_run(op, dst, dim, index, src, accumulate)
    }

    fn cumulative(&self, cop: CumOp, x: &Tensor, dim: usize, out: &Tensor) -> Result<()> {
        let op = match cop {
            CumOp::Sum => "cumsum",
            CumOp::Prod => "cumprod",
        };
        check_same_device(op, &[x, out])?;
        let ty = gty(op, out.dtype())?;
        if ty == GTy::U32 {
            return super::unsupported(self, op);
        }
        let comb = match cop {
            CumOp::Sum => BinaryOp::Add,
            CumOp::Prod => BinaryOp::Mul,
        };
        if x.ndim() > 0 && over_loop_limit(x.shape()[dim] as u64 + 64)? {
            // One thread walks a line: past the adapter's loop limit the
            // line is scanned in slices, each combined with the last result
            // of the slices before it (`carry`).
            let len = x.shape()[dim];
            let piece = slice_len(len, len as u64 + 64)?;
            let kept: Vec<usize> = (0..x.ndim())
                .map(|d| if d == dim { 1 } else { x.shape()[d] })
                .collect();
            let carry = Tensor::empty_for(op, &kept, out.dtype(), out.device())?;
            for lo in (0..len).step_by(piece) {
                let hi = (lo + piece).min(len);
                let xs = x.with_layout(x.layout().slice(dim, lo, hi - lo, 1));
                let os = out.with_layout(out.layout().slice(dim, lo, hi - lo, 1));
                self.cumulative(cop, &xs, dim, &os)?;
                if lo > 0 {
                    self.binary(comb, &os, &self.spread(op, &carry, os.shape())?, &os)?;
                }
                if hi < len {
                    let last = os.with_layout(os.layout().slice(dim, hi - lo - 1, 1, 1));
                    self.cast_copy(&last, &carry)?;
                }
            }
            return Ok(());
        }
        if x.ndim() > 0 && split::needed(op, &[x, out])? {
            // Lines split, and so does a line longer than one binding: each
            // later piece along `dim` combines the previous piece's last
            // results (`carry`) into its own scan.
            let len = x.shape()[dim];
            let kept: Vec<usize> = (0..x.ndim())
                .map(|d| if d == dim { 1 } else { x.shape()[d] })
                .collect();
            let carry = Tensor::empty(&kept, out.dtype(), out.device())?;
            let axes: Vec<usize> = (0..x.ndim()).collect();
            let space = split::Space {
                ts: &[x, out, &carry],
                axes: vec![axes.clone(), axes.clone(), axes],
                sizes: x.shape().to_vec(),
                splittable: vec![true; x.ndim()],
            };
            return split::in_pieces(op, &space, &mut |v, r| {
                let (o, c) = (&v[1], &v[2]);
                self.cumulative(cop, &v[0], dim, o)?;
                let (lo, hi) = r[dim];
                if lo > 0 {
                    self.binary(comb, o, &self.spread(op, c, o.shape())?, o)?;
                }
                if hi < len {
                    let l = o.layout().slice(dim, hi - lo - 1, 1, 1);
                    self.cast_copy(&Tensor::from_parts(o.storage().clone(), l, o.dtype())?, c)?;
                }
                Ok(())
            });
        }
        // The input converted to the result's dtype, dense from offset 0.
        let xd = if x.dtype() == out.dtype() && x.is_contiguous() && x.offset() == 0 {
            x.clone()
        } else {
            let t = Tensor::empty(x.shape(), out.dtype(), out.device())?;
            self.cast_copy(x, &t)?;
            t
        };
        // A 0-d tensor scans one element.
        let shape = x.shape();
        let n = shape.get(dim).copied().unwrap_or(1);
        let inner: usize = shape.get(dim + 1..).map_or(1, |s| s.iter().product());
        let lines = x.numel() / n.max(1);
        if x.numel() == 0 {
            return Ok(());
        }
        check_loop_trips(
            op,
            n as u64 + 64,
            &|| format!("a running {op} along {n} elements"),
            "scan shorter pieces and carry each piece's last value into the next",
        )?;
        let mut meta = vec![lines as u32, 0, n as u32, inner as u32];
        meta.extend([0u32; 6]);
        dense_out(out, |o| {
            run_items(
                op,
                |bd| shaders::cumulative(bd, ty, cop == CumOp::Prod),
                &[&xd, o],
                &[1],
                &meta,
                lines,
            )
        })
    }

    fn tri(&self, x: &Tensor, out: &Tensor, k: i64, upper: bool) -> Result<()> {
        let op = if upper { "triu" } else { "tril" };
        check_same_device(op, &[x, out])?;
        let ty = gty(op, x.dtype())?;
        let nd = out.ndim();
        let (rows, cols) = (out.shape()[nd - 2], out.shape()[nd - 1]);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let k = k.clamp(-(rows as i64), cols as i64) as i32;
        let (b, bufs) = bind(op, &[x, out])?;
        let params = [rows as u32, cols as u32, k as u32, upper as u32, 0, 0, 0, 0];
        run_ew(op, &shaders::tri(&b, ty), &[x, out], &bufs, params)
    }

    fn fused(
        &self,
        k: &crate::graph::fused::FusedKernel,
        ins: &[Tensor],
        outs: &[Tensor],
    ) -> Result<()> {
        let op = "fused";
        let all: Vec<&Tensor> = ins.iter().chain(outs).collect();
        check_same_device(op, &all)?;
        if !k.reductions.is_empty() {
            // Reductions at the end of a program have no WGSL form (the
            // fusion pass forms them for CPU graphs only; this serves a
            // graph moved to the GPU afterwards).
            return crate::graph::fused::run_unfused(k, ins, outs);
        }
        if k.compute != DType::F32 {
            return Err(Error::dtype(
                op,
                format!(
                    "a fused kernel computing in {} cannot run on the gpu device",
                    k.compute
                ),
            ));
        }
        // Inputs broadcast to the kernel's shape (stride 0 where they repeat).
        let wide = ins
            .iter()
            .map(|t| {
                Tensor::from_parts(
                    t.storage().clone(),
                    t.layout().expand(op, &k.shape)?,
                    t.dtype(),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let ts: Vec<&Tensor> = wide.iter().chain(outs).collect();
        let (bd, bufs) = bind_written(op, &ts, outs.len())?;
        let max_bind = get()?.limits.max_storage_buffers_per_shader_stage as usize;
        let in_tys = wide
            .iter()
            .map(|t| gty(op, t.dtype()))
            .collect::<Result<Vec<_>>>()?;
        let src = match shaders::fused(&bd, k, &in_tys) {
            // One binding is the metadata.
            Some(src) if bufs.len() < max_bind => src,
            // More tensors than a kernel may bind (or an op without a WGSL
            // form): the program runs as one kernel per instruction.
            _ => return crate::graph::fused::run_unfused(k, ins, outs),
        };
        dispatch_ew(op, &src, &k.shape, &ts, &bufs, [0; 8])
    }

    fn matmul(&self, a: &Tensor, b: &Tensor, out: &Tensor, accumulate: bool) -> Result<()> {
        let op = "matmul";
        check_same_device(op, &[a, b, out])?;
        let ty = gty(op, a.dtype())?;
        if ty == GTy::U32 {
            return Err(Error::runtime(
                op,
                "not supported on the gpu device for dtype bool",
            ));
        }
        let nd = out.ndim();
        if nd < 2 || a.ndim() != nd || b.ndim() != nd {
            return Err(Error::shape(
                op,
                format!(
                    "gpu kernel expects equal-rank batched operands, got {:?} @ {:?} -> {:?}",
                    a.shape(),
                    b.shape(),
                    out.shape()
                ),
            ));
        }
        let (m, k, n) = (a.shape()[nd - 2], a.shape()[nd - 1], b.shape()[nd - 1]);
        let total = out.numel();
        if total == 0 {
            return Ok(());
        }
        if total > u32::MAX as usize {
            return Err(Error::runtime(
                op,
                format!("{total} outputs exceed the gpu kernels' 32-bit indexing"),
            ));
        }
        let nb = nd - 2;
        // An adapter that stops long loops (see `Gpu::loop_limit`): K in
        // pieces short enough for the kernel's loop over K, each piece after
        // the first adding its product to the earlier ones'.
        if let Some(limit) = get()?.loop_limit {
            let piece = (limit.saturating_sub(64 + 16 * nd as u64) / 2).max(1) as usize;
            if k > piece {
                let mut k0 = 0;
                while k0 < k {
                    let len = piece.min(k - k0);
                    let ap = a.with_layout(a.layout().narrow(op, -1, k0 as isize, len)?);
                    let bp = b.with_layout(b.layout().narrow(op, -2, k0 as isize, len)?);
                    self.matmul(&ap, &bp, out, accumulate || k0 > 0)?;
                    k0 += len;
                }
                return Ok(());
            }
        }
        if split::needed(op, &[a, b, out])? {
            // Axes: the batch dims, then M, N and K; a piece after the
            // first along K adds its product to the earlier ones'.
            let dims = |x: usize, y: usize| -> Vec<usize> { (0..nb).chain([x, y]).collect() };
            let axes = [dims(nb, nb + 2), dims(nb + 2, nb + 1), dims(nb, nb + 1)];
            let mut sizes = out.shape().to_vec();
            sizes.push(k);
            let space = split::Space {
                ts: &[a, b, out],
                axes: axes.to_vec(),
                sizes,
                splittable: vec![true; nb + 3],
            };
            return split::in_pieces(op, &space, &mut |v, r| {
                self.matmul(&v[0], &v[1], &v[2], accumulate || r[nb + 2].0 > 0)
            });
        }
        let (bd, bufs) = bind(op, &[a, b, out])?;
        let s = |t: &Tensor, d: usize| t.strides()[d] as i32 as u32;
        let mut meta = vec![
            total as u32,
            m as u32,
            n as u32,
            k as u32,
            nb as u32,
            accumulate as u32,
            a.offset() as u32,
            b.offset() as u32,
            out.offset() as u32,
            s(a, nd - 2),
            s(a, nd - 1),
            s(b, nd - 2),
            s(b, nd - 1),
            s(out, nd - 2),
            s(out, nd - 1),
        ];
        meta.extend(out.shape()[..nb].iter().map(|&v| v as u32));
        for t in [a, b, out] {
            meta.extend((0..nb).map(|d| s(t, d)));
        }
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        if ty == GTy::F32 && tiled_matmul()? {
            let t = shaders::MM_TILE as usize;
            let groups = (total / (m * n)) * m.div_ceil(t) * n.div_ceil(t);
            meta[0] = groups as u32;
            return get()?.dispatch(op, &shaders::matmul_tiled(&bd), &refs, &meta, groups as u64);
        }
        get()?.dispatch(
            op,
            &shaders::matmul(&bd, ty),
            &refs,
            &meta,
            (total as u64).div_ceil(shaders::WG as u64),
        )
    }
}

impl WgpuBackend {
    /// The gather kernel (indices already checked); lines of the index's
    /// dims other than `dim` split across pieces when an operand exceeds one
    /// binding, while `src` stays whole along `dim`.
    fn gather_run(&self, src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
        let op = "gather";
        let ty = gty(op, src.dtype())?;
        if split::needed(op, &[src, index, out])? {
            if src.shape()[dim] > get()?.piece_elems() {
                return self.gather_long(src, dim, index, out);
            }
            // Each line along `dim` stays whole: every operand gets `dim`
            // innermost first.
            let across = |t: &Tensor| t.shape()[dim] > 1 && t.strides()[dim] != 1;
            if across(out) {
                let c = dim_last(op, out.shape(), dim, out.dtype())?;
                self.gather_run(src, dim, index, &c)?;
                return self.cast_copy(&c, out);
            }
            for (k, t) in [src, index].into_iter().enumerate() {
                if across(t) {
                    let c = dim_last(op, t.shape(), dim, t.dtype())?;
                    self.cast_copy(t, &c)?;
                    let (s, i) = if k == 0 { (&c, index) } else { (src, &c) };
                    return self.gather_run(s, dim, i, out);
                }
            }
            let nd = index.ndim();
            let axes: Vec<usize> = (0..nd).collect();
            let space = split::Space {
                ts: &[src, index, out],
                axes: vec![axes.clone(), axes.clone(), axes],
                sizes: index.shape().to_vec(),
                splittable: (0..nd).map(|d| d != dim).collect(),
            };
            return split::in_pieces(op, &space, &mut |v, _| {
                self.gather_run(&v[0], dim, &v[1], &v[2])
            });
        }
        let mut ss: Vec<isize> = src.strides().to_vec();
        let sd = ss[dim];
        ss[dim] = 0;
        let walks = [
            (src, src.offset(), ss),
            (index, index.offset(), index.strides().to_vec()),
            (out, out.offset(), out.strides().to_vec()),
        ];
        gather_kernel(op, ty, index.shape(), walks, sd as i32 as u32)
    }

    /// Gather along lines longer than one binding: each position's source
    /// offset is computed on the host from the (checked) indices, and the
    /// kernel runs once per window of the source, as the index ops do.
    fn gather_long(&self, src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
        let op = "gather";
        let ty = gty(op, src.dtype())?;
        let offs = line_offsets(op, src, dim, index)?;
        let dense = crate::tensor::layout::contiguous_strides(index.shape()).to_vec();
        for (w, o) in offset_windows(op, src, &offs, (0, 1), index.shape())? {
            let walks = [
                (&w, 0, vec![0; index.ndim()]),
                (&o, 0, dense.clone()),
                (out, out.offset(), out.strides().to_vec()),
            ];
            gather_kernel(op, ty, index.shape(), walks, 1)?;
        }
        Ok(())
    }

    /// Scatter along destination lines longer than one binding: each
    /// position's destination offset is computed on the host from the
    /// (checked) indices, and the values are written window by window of
    /// the destination, in position order (as the index puts do).
    fn scatter_long(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let ty = gty(op, dst.dtype())?;
        let offs = line_offsets(op, dst, dim, index)?;
        // The values at the index's positions, dense in its row-major order.
        let mut l = src.layout().clone();
        for (d, &n) in index.shape().iter().enumerate() {
            l = l.slice(d, 0, n, 1);
        }
        let v = dense(&Tensor::from_parts(src.storage().clone(), l, src.dtype())?)?;
        let v2 = as_rows(&v, index.numel(), 1)?;
        let put = Put {
            op,
            ty,
            rshape: &[],
            drest: &[],
            accumulate,
        };
        for (w, o) in offset_windows(op, dst, &offs, (0, 1), &[index.numel()])? {
            put.blocks(&v2, &o, &w, 0)?;
        }
        Ok(())
    }

    /// The scatter kernel (indices already checked); lines (the dims other
    /// than `dim`) split across pieces when an operand exceeds one binding.
    fn scatter_run(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let ty = gty(op, dst.dtype())?;
        if split::needed(op, &[index, src, dst])? {
            if dst.shape()[dim] > get()?.piece_elems() {
                return self.scatter_long(op, dst, dim, index, src, accumulate);
            }
            // Lines split (the dims other than `dim`); each line stays whole,
            // so every operand gets `dim` innermost first.
            let across = |t: &Tensor| t.shape()[dim] > 1 && t.strides()[dim] != 1;
            if across(dst) {
                let c = dim_last(op, dst.shape(), dim, dst.dtype())?;
                self.cast_copy(dst, &c)?;
                self.scatter_run(op, &c, dim, index, src, accumulate)?;
                return self.cast_copy(&c, dst);
            }
            for (k, t) in [index, src].into_iter().enumerate() {
                if across(t) {
                    let c = dim_last(op, t.shape(), dim, t.dtype())?;
                    self.cast_copy(t, &c)?;
                    let (i, v) = if k == 0 { (&c, src) } else { (index, &c) };
                    return self.scatter_run(op, dst, dim, i, v, accumulate);
                }
            }
            let nd = index.ndim();
            let lines = |last: usize| -> Vec<usize> {
                (0..nd).map(|d| if d == dim { last } else { d }).collect()
            };
            let mut sizes = index.shape().to_vec();
            sizes[dim] = 1;
            sizes.extend([index.shape()[dim], dst.shape()[dim]]);
            let space = split::Space {
                ts: &[index, src, dst],
                axes: vec![lines(nd), lines(nd), lines(nd + 1)],
                sizes,
                splittable: (0..nd + 2).map(|d| d < nd && d != dim).collect(),
            };
            return split::in_pieces(op, &space, &mut |v, _| {
                self.scatter_run(op, &v[2], dim, &v[0], &v[1], accumulate)
            });
        }
        let mut lines: Vec<usize> = index.shape().to_vec();
        let klen = lines[dim];
        lines[dim] = 1;
        let meta = raw_meta(
            op,
            &lines,
            &[
                (index.offset(), index.strides().to_vec()),
                (src.offset(), src.strides().to_vec()),
                (dst.offset(), dst.strides().to_vec()),
            ],
            [
                klen as u32,
                index.strides()[dim] as i32 as u32,
                src.strides()[dim] as i32 as u32,
                dst.strides()[dim] as i32 as u32,
                accumulate as u32,
                0,
                0,
                0,
            ],
        )?;
        // One thread walks a whole line, in order.
        check_loop_trips(
            op,
            2 * klen as u64 + 64,
            &|| format!("scattering lines of {klen} indices"),
            "scatter fewer indices per line at a time",
        )?;
        let nl: usize = lines.iter().product();
        run_items(
            op,
            |bd| shaders::scatter(bd, ty),
            &[index, src, dst],
            &[],
            &meta,
            nl,
        )
    }

    /// The cross-entropy kernel over dense rows (targets already checked):
    /// logits `x` of `rows × c`, per-row targets, loss, logsumexp and target
    /// weight; blocks of rows when the operands exceed one binding.
    #[allow(clippy::too_many_arguments)]
    fn ce_rows(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        cfg: CeCfg,
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let rows = t.numel();
        // One thread per row walks the classes a few times: past the
        // adapter's loop limit, the rows are worked by ops that split.
        if over_loop_limit(4 * cfg.c as u64 + 64)? {
            return self.ce_long(x, t, w, cfg, loss, lse, wt);
        }
        let mut ts: Vec<&Tensor> = vec![x, t];
        ts.extend(w);
        ts.extend([loss, lse, wt]);
        if split::needed(op, &ts)? {
            if cfg.c > get()?.piece_elems() {
                return self.ce_long(x, t, w, cfg, loss, lse, wt);
            }
            let parts = [(x, cfg.c), (t, 1), (loss, 1), (lse, 1), (wt, 1)];
            return row_blocks(
                op,
                rows,
                &parts,
                &w.into_iter().collect::<Vec<_>>(),
                &mut |v, _| self.ce_rows(&v[0], &v[1], v.get(5), cfg, &v[2], &v[3], &v[4]),
            );
        }
        let meta = ce_meta(rows, cfg, [x, t, loss, lse, wt], w);
        let n = ts.len();
        run_items(
            op,
            |bd| shaders::cross_entropy(bd, w.is_some()),
            &ts,
            &[n - 3, n - 2, n - 1],
            &meta,
            rows,
        )
    }

    /// Cross-entropy pieces shared by the long-row forms: the targets with
    /// ignored ones replaced by 0 (`rows × 1`, int64), whether each row counts
    /// (`rows × 1`, float32 0/1), and each row's target weight (`rows × 1`).
    fn ce_targets(
        &self,
        t: &Tensor,
        w: Option<&Tensor>,
        cfg: CeCfg,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let op = "cross_entropy";
        let (rows, dev) = (t.numel(), t.device());
        let t2 = as_rows(t, rows, 1)?;
        let col = [rows, 1];
        let valid = Tensor::empty(&col, DType::F32, dev)?;
        let safe = Tensor::empty(&col, t.dtype(), dev)?;
        match i32::try_from(cfg.ignore_index) {
            Ok(ign) => {
                let keep = Tensor::empty(&col, DType::Bool, dev)?;
                let ign = self.splat(op, Scalar::Int(ign as i64), t.dtype(), &col)?;
                self.binary(BinaryOp::Ne, &t2, &ign, &keep)?;
                self.cast_copy(&keep, &valid)?;
                let zero = self.splat(op, Scalar::Int(0), t.dtype(), &col)?;
                self.where_(&keep, &t2, &zero, &safe)?;
            }
            // Targets fit i32 (checked), so none is ignored.
            Err(_) => {
                self.fill(&valid, Scalar::Float(1.0))?;
                self.cast_copy(&t2, &safe)?;
            }
        }
        let wt = Tensor::empty(&col, DType::F32, dev)?;
        match w {
            Some(w) => self.gather_run(&as_rows(w, cfg.c, 1)?, 0, &safe, &wt)?,
            None => self.fill(&wt, Scalar::Float(1.0))?,
        }
        self.binary(BinaryOp::Mul, &wt, &valid, &wt)?;
        Ok((safe, valid, wt))
    }

    /// The sum of the class weights (the class count without weights).
    fn ce_weight_sum(&self, w: Option<&Tensor>, cfg: CeCfg) -> Result<Tensor> {
        let s = Tensor::empty(&[1, 1], DType::F32, Device::Gpu(0))?;
        match w {
            Some(w) => self.reduce(ReduceOp::Sum, &as_rows(w, 1, cfg.c)?, &[false, true], &s)?,
            None => self.fill(&s, Scalar::Float(cfg.c as f64))?,
        }
        Ok(s)
    }

    /// Cross-entropy over more classes than one binding holds, from
    /// operations that split: `lse = logsumexp(x)`, the target logits
    /// gathered, `w_t·(lse - x_t)`, and with smoothing ε
    /// `(1 - ε)·w_t·(lse - x_t) + ε/C·(lse·Σw - Σ w_j x_j)`; ignored rows 0.
    #[allow(clippy::too_many_arguments)]
    fn ce_long(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        cfg: CeCfg,
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let (rows, dev, c) = (t.numel(), x.device(), cfg.c);
        let (x2, col) = (as_rows(x, rows, c)?, [rows, 1]);
        let l = Tensor::empty(&col, DType::F32, dev)?;
        self.reduce(ReduceOp::LogSumExp, &x2, &[false, true], &l)?;
        let (safe, valid, wt_r) = self.ce_targets(t, w, cfg)?;
        let xt = Tensor::empty(&col, DType::F32, dev)?;
        self.gather_run(&x2, 1, &safe, &xt)?;
        let v = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Sub, &l, &xt, &v)?;
        self.binary(BinaryOp::Mul, &v, &wt_r, &v)?;
        if cfg.smoothing > 0.0 {
            let eps = cfg.smoothing;
            let scalar = |v: f64| self.splat(op, Scalar::Float(v), DType::F32, &col);
            // Σ_j w_j·(l - x_j) = l·Σw - Σ w_j x_j
            let wx = Tensor::empty(&col, DType::F32, dev)?;
            match w {
                Some(w) => {
                    let p = Tensor::empty(&[rows, c], DType::F32, dev)?;
                    let wb = self.spread(op, &as_rows(w, 1, c)?, &[rows, c])?;
                    self.binary(BinaryOp::Mul, &x2, &wb, &p)?;
                    self.reduce(ReduceOp::Sum, &p, &[false, true], &wx)?;
                }
                None => self.reduce(ReduceOp::Sum, &x2, &[false, true], &wx)?,
            }
            let sm = Tensor::empty(&col, DType::F32, dev)?;
            let wsum = self.spread(op, &self.ce_weight_sum(w, cfg)?, &col)?;
            self.binary(BinaryOp::Mul, &l, &wsum, &sm)?;
            self.binary(BinaryOp::Sub, &sm, &wx, &sm)?;
            self.binary(BinaryOp::Mul, &sm, &scalar(eps / c as f64)?, &sm)?;
            self.binary(BinaryOp::Mul, &v, &scalar(1.0 - eps)?, &v)?;
            self.binary(BinaryOp::Add, &v, &sm, &v)?;
        }
        // Ignored rows lose nothing (whatever their logits hold).
        let keep = Tensor::empty(&col, DType::Bool, dev)?;
        self.cast_copy(&valid, &keep)?;
        let zero = self.splat(op, Scalar::Float(0.0), DType::F32, &col)?;
        self.where_(&keep, &v, &zero, &v)?;
        self.copy_dense_as(&v, loss)?;
        self.copy_dense_as(&l, lse)?;
        self.copy_dense_as(&wt_r, wt)
    }

    /// The cross-entropy gradient over more classes than one binding holds:
    /// `g·(a·exp(x - lse) - ε/C·w_j)` with `b = (1 - ε)·w_t`, `a = b + ε/C·Σw`,
    /// less `g·b` at each row's target; ignored rows 0.
    #[allow(clippy::too_many_arguments)]
    fn ce_grad_long(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let (rows, dev, c) = (t.numel(), x.device(), cfg.c);
        let (x2, o2, col, full) = (
            as_rows(x, rows, c)?,
            as_rows(out, rows, c)?,
            [rows, 1],
            [rows, c],
        );
        let (eps, ec) = (cfg.smoothing, cfg.smoothing / c as f64);
        let scalar = |v: f64| self.splat(op, Scalar::Float(v), DType::F32, &col);
        let (safe, valid, wt_r) = self.ce_targets(t, w, cfg)?;
        // g' = g·valid, b = (1 - ε)·w_t, a = b + ε/C·Σw
        let gv = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &as_rows(g, rows, 1)?, &valid, &gv)?;
        let b = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &wt_r, &scalar(1.0 - eps)?, &b)?;
        let a = Tensor::empty(&col, DType::F32, dev)?;
        let wsum = self.spread(op, &self.ce_weight_sum(w, cfg)?, &col)?;
        self.binary(BinaryOp::Mul, &wsum, &scalar(ec)?, &a)?;
        self.binary(BinaryOp::Add, &a, &b, &a)?;
        let e = Tensor::empty(&full, DType::F32, dev)?;
        self.binary(
            BinaryOp::Sub,
            &x2,
            &self.spread(op, &as_rows(lse, rows, 1)?, &full)?,
            &e,
        )?;
        self.unary(UnaryOp::Exp, &e, &e)?;
        self.binary(BinaryOp::Mul, &e, &self.spread(op, &a, &full)?, &e)?;
        if eps > 0.0 {
            let wj = Tensor::empty(&[1, c], DType::F32, dev)?;
            match w {
                Some(w) => self.cast_copy(&as_rows(w, 1, c)?, &wj)?,
                None => self.fill(&wj, Scalar::Float(1.0))?,
            }
            self.binary(
                BinaryOp::Mul,
                &wj,
                &self.splat(op, Scalar::Float(ec), DType::F32, &[1, c])?,
                &wj,
            )?;
            self.binary(BinaryOp::Sub, &e, &self.spread(op, &wj, &full)?, &e)?;
        }
        self.binary(BinaryOp::Mul, &e, &self.spread(op, &gv, &full)?, &e)?;
        // Less g'·b at each row's target (ignored rows add 0 at class 0).
        let at = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &gv, &b, &at)?;
        self.unary(UnaryOp::Neg, &at, &at)?;
        self.scatter_run("scatter_add", &e, 1, &safe, &at, true)?;
        self.cast_copy(&e, &o2)
    }

    /// The cross-entropy gradient kernel over dense rows into the dense
    /// `out` (`rows × c`); blocks of rows when the operands exceed one binding.
    #[allow(clippy::too_many_arguments)]
    fn ce_grad_rows(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let rows = t.numel();
        // One thread per row walks the classes a few times (see `ce_rows`).
        if over_loop_limit(4 * cfg.c as u64 + 64)? {
            return self.ce_grad_long(x, t, w, lse, g, cfg, out);
        }
        let mut ts: Vec<&Tensor> = vec![x, t];
        ts.extend(w);
        ts.extend([lse, g, out]);
        if split::needed(op, &ts)? {
            if cfg.c > get()?.piece_elems() {
                return self.ce_grad_long(x, t, w, lse, g, cfg, out);
            }
            let parts = [(x, cfg.c), (t, 1), (lse, 1), (g, 1), (out, cfg.c)];
            return row_blocks(
                op,
                rows,
                &parts,
                &w.into_iter().collect::<Vec<_>>(),
                &mut |v, _| self.ce_grad_rows(&v[0], &v[1], v.get(5), &v[2], &v[3], cfg, &v[4]),
            );
        }
        let meta = ce_meta(rows * cfg.c, cfg, [x, t, lse, g, out], w);
        run_items(
            op,
            |bd| shaders::cross_entropy_grad(bd, w.is_some()),
            &ts,
            &[],
            &meta,
            rows * cfg.c,
        )
    }

    /// [`Backend::reduce`] over operands larger than one storage binding.
    /// The kept dims split freely; the reduced dims split too for the
    /// reductions whose partial results combine (sum, mean, prod, max, min,
    /// all, any): the first piece along them writes the result, each later
    /// one reduces into a temporary that is then combined into it. Float16
    /// and bfloat16 results, and means, accumulate in float32.
    fn reduce_split(&self, rop: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> Result<()> {
        let op = rop.name();
        if matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp) {
            return self.reduce_two_pass(rop, x, mask, out);
        }
        let (piece_op, combine) = match rop {
            ReduceOp::Sum | ReduceOp::Mean => (ReduceOp::Sum, Some(BinaryOp::Add)),
            ReduceOp::Prod => (rop, Some(BinaryOp::Mul)),
            ReduceOp::Max => (rop, Some(BinaryOp::Maximum)),
            ReduceOp::Min => (rop, Some(BinaryOp::Minimum)),
            ReduceOp::All => (rop, Some(BinaryOp::LogicalAnd)),
            ReduceOp::Any => (rop, Some(BinaryOp::LogicalOr)),
            _ => (rop, None),
        };
        let narrow = matches!(out.dtype(), DType::F16 | DType::BF16);
        let acc = if narrow {
            Tensor::empty(out.shape(), DType::F32, out.device())?
        } else {
            out.clone()
        };
        let axes: Vec<usize> = (0..x.ndim()).collect();
        let out_axes: Vec<usize> = if out.ndim() == x.ndim() {
            axes.clone()
        } else {
            axes.iter().copied().filter(|&d| !mask[d]).collect()
        };
        let splittable: Vec<bool> = mask.iter().map(|&m| !m || combine.is_some()).collect();
        let space = split::Space {
            ts: &[x, &acc],
            axes: vec![axes, out_axes],
            sizes: x.shape().to_vec(),
            splittable,
        };
        split::in_pieces(op, &space, &mut |v, r| {
            let first = (0..mask.len()).all(|d| !mask[d] || r[d].0 == 0);
            match combine {
                Some(c) if !first => {
                    let t = Tensor::empty(v[1].shape(), v[1].dtype(), v[1].device())?;
                    self.reduce(piece_op, &v[0], mask, &t)?;
                    self.binary(c, &v[1], &t, &v[1])
                }
                _ => into_dense(&v[1], |o| self.reduce(piece_op, &v[0], mask, o)),
            }
        })?;
        if rop == ReduceOp::Mean {
            let count: usize = (0..mask.len())
                .filter(|&d| mask[d])
                .map(|d| x.shape()[d])
                .product();
            let c = self.splat(op, Scalar::Float(count as f64), DType::F32, acc.shape())?;
            self.binary(BinaryOp::Div, &acc, &c, &acc)?;
        }
        if narrow {
            self.cast_copy(&acc, out)?;
        }
        Ok(())
    }

    /// Run `f` into `dst` for the first piece along a summed axis; for a
    /// later piece, into a temporary that is then added to `dst`.
    fn write_or_add(
        &self,
        dst: &Tensor,
        first: bool,
        f: impl FnOnce(&Tensor) -> Result<()>,
    ) -> Result<()> {
        if first {
            return f(dst);
        }
        let t = Tensor::empty(dst.shape(), dst.dtype(), dst.device())?;
        f(&t)?;
        self.binary(BinaryOp::Add, dst, &t, dst)
    }

    /// `value` as a one-element device tensor broadcast (a view) to `shape`.
    fn splat(
        &self,
        op: &'static str,
        value: Scalar,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        let t = Tensor::empty(&[], dtype, Device::Gpu(0))?;
        self.fill(&t, value)?;
        let l = t.layout().expand(op, shape)?;
        Tensor::from_parts(t.storage().clone(), l, dtype)
    }

    /// The max of each line of `x` (dims `mask`) into the float32 `centre`
    /// (keepdim), with 0 where it is infinite: what softmax and logsumexp
    /// subtract, so that an all -inf line gives -inf (or 0 weights), not NaN.
    fn line_max(&self, op: &'static str, x: &Tensor, mask: &[bool], centre: &Tensor) -> Result<()> {
        self.reduce(ReduceOp::Max, x, mask, centre)?;
        let inf = Tensor::empty(centre.shape(), DType::Bool, centre.device())?;
        self.unary(UnaryOp::IsInf, centre, &inf)?;
        let zero = self.splat(op, Scalar::Float(0.0), DType::F32, centre.shape())?;
        self.where_(&inf, &zero, centre, centre)
    }

    /// `t` (keepdim per-line values) broadcast as a view to `shape`.
    fn spread(&self, op: &'static str, t: &Tensor, shape: &[usize]) -> Result<Tensor> {
        let l = t.layout().expand(op, shape)?;
        Tensor::from_parts(t.storage().clone(), l, t.dtype())
    }

    /// Softmax along a line longer than one binding, from operations that
    /// split: the line max, `e = exp(x - max)`, its sum, then `e / sum` (or
    /// `x - max - log sum`), in float32 with one full-size temporary.
    fn softmax_long(&self, x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
        let op = if log { "log_softmax" } else { "softmax" };
        let (dev, shape) = (x.device(), x.shape());
        let mask: Vec<bool> = (0..x.ndim()).map(|d| d == dim).collect();
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if d == dim { 1 } else { shape[d] })
            .collect();
        let m = Tensor::empty(&kept, DType::F32, dev)?;
        self.line_max(op, x, &mask, &m)?;
        let e = Tensor::empty(shape, DType::F32, dev)?;
        self.cast_copy(x, &e)?;
        self.binary(BinaryOp::Sub, &e, &self.spread(op, &m, shape)?, &e)?;
        let s = Tensor::empty(&kept, DType::F32, dev)?;
        if log {
            let t = Tensor::empty(shape, DType::F32, dev)?;
            self.unary(UnaryOp::Exp, &e, &t)?;
            self.reduce(ReduceOp::Sum, &t, &mask, &s)?;
            drop(t);
            self.unary(UnaryOp::Log, &s, &s)?;
            self.binary(BinaryOp::Sub, &e, &self.spread(op, &s, shape)?, &e)?;
        } else {
            self.unary(UnaryOp::Exp, &e, &e)?;
            self.reduce(ReduceOp::Sum, &e, &mask, &s)?;
            self.binary(BinaryOp::Div, &e, &self.spread(op, &s, shape)?, &e)?;
        }
        self.cast_copy(&e, out)
    }

    /// The softmax gradient along a line longer than one binding:
    /// `y·(g - Σ g·y / Σ y)`, or `g - exp(y)·Σ g` for log-softmax (float32).
    fn softmax_grad_long(
        &self,
        y: &Tensor,
        g: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<()> {
        let op = if log {
            "log_softmax_backward"
        } else {
            "softmax_backward"
        };
        let (dev, shape) = (y.device(), y.shape());
        let mask: Vec<bool> = (0..y.ndim()).map(|d| d == dim).collect();
        let kept: Vec<usize> = (0..y.ndim())
            .map(|d| if d == dim { 1 } else { shape[d] })
            .collect();
        let s = Tensor::empty(&kept, DType::F32, dev)?;
        let t = Tensor::empty(shape, DType::F32, dev)?;
        if log {
            self.reduce(ReduceOp::Sum, g, &mask, &s)?;
            self.unary(UnaryOp::Exp, y, &t)?;
            self.binary(BinaryOp::Mul, &t, &self.spread(op, &s, shape)?, &t)?;
            self.binary(BinaryOp::Sub, g, &t, out)
        } else {
            // Σ g·y / Σ y, as the one-pass kernel: rounded outputs do not sum to exactly 1.
            let sy = Tensor::empty(&kept, DType::F32, dev)?;
            self.reduce(ReduceOp::Sum, y, &mask, &sy)?;
            self.binary(BinaryOp::Mul, g, y, &t)?;
            self.reduce(ReduceOp::Sum, &t, &mask, &s)?;
            self.binary(BinaryOp::Div, &s, &sy, &s)?;
            self.binary(BinaryOp::Sub, g, &self.spread(op, &s, shape)?, &t)?;
            self.binary(BinaryOp::Mul, y, &t, out)
        }
    }

    /// The normalised rows `x̂ = (x - μ)·r` of a layer norm (μ = 0 for RMS
    /// norm) as a float32 `rows × len` tensor, from its `rows × 1` statistics.
    fn normalised(&self, op: &'static str, x2: &Tensor, mu: &Tensor, r: &Tensor) -> Result<Tensor> {
        let shape = x2.shape();
        let t = Tensor::empty(shape, DType::F32, x2.device())?;
        self.binary(BinaryOp::Sub, x2, &self.spread(op, mu, shape)?, &t)?;
        self.binary(BinaryOp::Mul, &t, &self.spread(op, r, shape)?, &t)?;
        Ok(t)
    }

    /// Layer norm (RMS norm) over rows longer than one binding, from
    /// operations that split: the row mean and (biased) variance, or the
    /// mean square, then `(x - μ)·r·w + b`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_long(
        &self,
        x: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        rms: bool,
        out: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
    ) -> Result<()> {
        let op = if rms { "rms_norm" } else { "layer_norm" };
        let (rows, dev) = (mean.numel(), x.device());
        let len = x.numel() / rows;
        let x2 = as_rows(x, rows, len)?;
        let mask = [false, true];
        let (mu, r) = (
            Tensor::empty(&[rows, 1], DType::F32, dev)?,
            Tensor::empty(&[rows, 1], DType::F32, dev)?,
        );
        if rms {
            self.fill(&mu, Scalar::Float(0.0))?;
            let sq = Tensor::empty(&[rows, len], DType::F32, dev)?;
            self.binary(BinaryOp::Mul, &x2, &x2, &sq)?;
            self.reduce(ReduceOp::Mean, &sq, &mask, &r)?;
        } else {
            self.reduce(ReduceOp::Mean, &x2, &mask, &mu)?;
            let var = ReduceOp::Var {
                correction: 0.0,
                std: false,
            };
            self.reduce(var, &x2, &mask, &r)?;
        }
        self.binary(
            BinaryOp::Add,
            &r,
            &self.splat(op, Scalar::Float(eps), DType::F32, &[rows, 1])?,
            &r,
        )?;
        self.unary(UnaryOp::Rsqrt, &r, &r)?;
        let t = self.normalised(op, &x2, &mu, &r)?;
        let shape = [rows, len];
        if let Some(w) = weight {
            self.binary(
                BinaryOp::Mul,
                &t,
                &self.spread(op, &as_shape(w, &[1, len])?, &shape)?,
                &t,
            )?;
        }
        if let Some(b) = bias {
            self.binary(
                BinaryOp::Add,
                &t,
                &self.spread(op, &as_shape(b, &[1, len])?, &shape)?,
                &t,
            )?;
        }
        self.copy_dense_as(&t, out)?;
        self.copy_dense_as(&mu, mean)?;
        self.copy_dense_as(&r, rstd)
    }

    /// Layer-norm (RMS-norm) gradients over rows longer than one binding
    /// (dense float32 operands): with `ĝ = g·w` and `x̂ = (x - μ)·r`,
    /// `dx = r·(ĝ - x̂·mean(ĝ·x̂) - mean(ĝ))` (no `mean(ĝ)` for RMS norm),
    /// `dw = Σ_rows g·x̂`, `db = Σ_rows g`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_grad_long(
        &self,
        x: &Tensor,
        g: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        rms: bool,
        dx: Option<&Tensor>,
        dw: Option<&Tensor>,
        db: Option<&Tensor>,
    ) -> Result<()> {
        let op = if rms {
            "rms_norm_backward"
        } else {
            "layer_norm_backward"
        };
        let (rows, dev) = (mean.numel(), x.device());
        let len = x.numel() / rows;
        let shape = [rows, len];
        let (x2, g2) = (as_rows(x, rows, len)?, as_rows(g, rows, len)?);
        let r = as_rows(rstd, rows, 1)?;
        let mu = if rms {
            self.splat(op, Scalar::Float(0.0), DType::F32, &[rows, 1])?
        } else {
            as_rows(mean, rows, 1)?
        };
        let xh = self.normalised(op, &x2, &mu, &r)?;
        if dw.is_some() || db.is_some() {
            let cols = [true, false];
            if let Some(dw) = dw {
                let t = Tensor::empty(&shape, DType::F32, dev)?;
                self.binary(BinaryOp::Mul, &g2, &xh, &t)?;
                let s = Tensor::empty(&[len], DType::F32, dev)?;
                self.reduce(ReduceOp::Sum, &t, &cols, &s)?;
                self.copy_dense_as(&s, dw)?;
            }
            if let Some(db) = db {
                let s = Tensor::empty(&[len], DType::F32, dev)?;
                self.reduce(ReduceOp::Sum, &g2, &cols, &s)?;
                self.copy_dense_as(&s, db)?;
            }
        }
        let Some(dx) = dx else {
            return Ok(());
        };
        let gh = Tensor::empty(&shape, DType::F32, dev)?;
        match weight {
            Some(w) => {
                let w = self.spread(op, &as_shape(w, &[1, len])?, &shape)?;
                self.binary(BinaryOp::Mul, &g2, &w, &gh)?
            }
            None => self.cast_copy(&g2, &gh)?,
        }
        let row_mean = |t: &Tensor| -> Result<Tensor> {
            let m = Tensor::empty(&[rows, 1], DType::F32, dev)?;
            self.reduce(ReduceOp::Mean, t, &[false, true], &m)?;
            Ok(m)
        };
        let m1 = if rms { None } else { Some(row_mean(&gh)?) };
        let t = Tensor::empty(&shape, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &gh, &xh, &t)?;
        let m2 = row_mean(&t)?;
        // t = r·(ĝ - x̂·m2 - m1)
        self.binary(BinaryOp::Mul, &xh, &self.spread(op, &m2, &shape)?, &t)?;
        self.binary(BinaryOp::Sub, &gh, &t, &t)?;
        if let Some(m1) = m1 {
            self.binary(BinaryOp::Sub, &t, &self.spread(op, &m1, &shape)?, &t)?;
        }
        self.binary(BinaryOp::Mul, &t, &self.spread(op, &r, &shape)?, &t)?;
        self.copy_dense_as(&t, dx)
    }

    /// Variance (or std) and logsumexp over operands larger than one binding,
    /// in two passes that both split: first the per-line mean (or max), then
    /// `Σ (x - mean)²` (or `Σ exp(x - max)`) summed piece by piece in float32.
    fn reduce_two_pass(
        &self,
        rop: ReduceOp,
        x: &Tensor,
        mask: &[bool],
        out: &Tensor,
    ) -> Result<()> {
        let op = rop.name();
        let dev = x.device();
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if mask[d] { 1 } else { x.shape()[d] })
            .collect();
        let count: usize = (0..x.ndim())
            .filter(|&d| mask[d])
            .map(|d| x.shape()[d])
            .product();
        let lse = rop == ReduceOp::LogSumExp;
        // The centre of each line: its mean, or its max (0 where the max is
        // infinite, so an all -inf line gives -inf and not NaN).
        let centre = Tensor::empty(&kept, DType::F32, dev)?;
        if lse {
            self.line_max(op, x, mask, &centre)?;
        } else {
            self.reduce(ReduceOp::Mean, x, mask, &centre)?;
        }
        let acc = Tensor::empty(&kept, DType::F32, dev)?;
        let axes: Vec<usize> = (0..x.ndim()).collect();
        let space = split::Space {
            ts: &[x, &centre, &acc],
            axes: vec![axes.clone(), axes.clone(), axes],
            sizes: x.shape().to_vec(),
            splittable: vec![true; x.ndim()],
        };
        split::in_pieces(op, &space, &mut |v, r| {
            let d = Tensor::empty(v[0].shape(), DType::F32, dev)?;
            self.cast_copy(&v[0], &d)?;
            // The backend's operands are already broadcast: expand the centre.
            let c = v[1].layout().expand(op, d.shape())?;
            let c = Tensor::from_parts(v[1].storage().clone(), c, DType::F32)?;
            self.binary(BinaryOp::Sub, &d, &c, &d)?;
            if lse {
                self.unary(UnaryOp::Exp, &d, &d)?;
            } else {
                self.binary(BinaryOp::Mul, &d, &d, &d)?;
            }
            let first = (0..mask.len()).all(|k| !mask[k] || r[k].0 == 0);
            if first {
                return into_dense(&v[2], |o| self.reduce(ReduceOp::Sum, &d, mask, o));
            }
            let t = Tensor::empty(v[2].shape(), DType::F32, dev)?;
            self.reduce(ReduceOp::Sum, &d, mask, &t)?;
            self.binary(BinaryOp::Add, &v[2], &t, &v[2])
        })?;
        let scalar = |v: f32| self.splat(op, Scalar::Float(v as f64), DType::F32, &kept);
        match rop {
            ReduceOp::Var { correction, std } => {
                let div = (count as f64 - correction).max(0.0) as f32;
                self.binary(BinaryOp::Div, &acc, &scalar(div)?, &acc)?;
                if std {
                    self.unary(UnaryOp::Sqrt, &acc, &acc)?;
                }
            }
            _ => {
                self.unary(UnaryOp::Log, &acc, &acc)?;
                self.binary(BinaryOp::Add, &acc, &centre, &acc)?;
            }
        }
        self.copy_dense_as(&acc, out)
    }

    /// Copy `t` (dense from offset 0) into `out`, which holds the same elements in the
    /// same order under another shape (reduced dims dropped or kept).
    fn copy_dense_as(&self, t: &Tensor, out: &Tensor) -> Result<()> {
        let flat = Tensor::from_parts(
            t.storage().clone(),
            Layout::contiguous(out.shape()),
            t.dtype(),
        )?;
        self.cast_copy(&flat, out)
    }

    /// [`Backend::arg_reduce`] with `dim` itself split across pieces: each
    /// later piece's best (value, index) replaces the running one only where
    /// it is strictly better (or NaN where the running one is not), so the
    /// first of equal extremes wins, as in one pass.
    fn arg_reduce_split(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        let dev = x.device();
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if d == dim { 1 } else { x.shape()[d] })
            .collect();
        let bv = Tensor::empty(&kept, x.dtype(), dev)?;
        let bi = Tensor::empty(&kept, indices.dtype(), dev)?;
        let axes: Vec<usize> = (0..x.ndim()).collect();
        let space = split::Space {
            ts: &[x, &bv, &bi],
            axes: vec![axes.clone(), axes.clone(), axes],
            sizes: x.shape().to_vec(),
            splittable: vec![true; x.ndim()],
        };
        split::in_pieces(op, &space, &mut |v, r| {
            let (lo, _) = r[dim];
            if lo == 0 {
                return into_dense(&v[2], |i| {
                    into_dense(&v[1], |val| self.arg_reduce(aop, &v[0], dim, Some(val), i))
                });
            }
            self.arg_merge(aop, &v[0], dim, lo, &v[1], &v[2])
        })?;
        self.copy_dense_as(&bi, indices)?;
        if let Some(vals) = values {
            self.copy_dense_as(&bv, vals)?;
        }
        Ok(())
    }

    /// Merge the arg-reduction of `x` along `dim`, whose first element is
    /// element `lo` of the whole line, into the best values `bv` and their
    /// indices `bi` found over the elements before it (an earlier element
    /// wins ties; NaN wins over numbers, as one pass over the line picks).
    fn arg_merge(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        lo: usize,
        bv: &Tensor,
        bi: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        let dev = x.device();
        let pv = Tensor::empty(bv.shape(), x.dtype(), dev)?;
        let pi = Tensor::empty(bi.shape(), bi.dtype(), dev)?;
        self.arg_reduce(aop, x, dim, Some(&pv), &pi)?;
        let shift = self.splat(op, Scalar::Int(lo as i64), bi.dtype(), pi.shape())?;
        self.binary(BinaryOp::Add, &pi, &shift, &pi)?;
        let better = Tensor::empty(pv.shape(), DType::Bool, dev)?;
        let cmp = if aop == ArgOp::Max {
            BinaryOp::Gt
        } else {
            BinaryOp::Lt
        };
        self.binary(cmp, &pv, bv, &better)?;
        if gpu_float(x.dtype()) {
            let nan = Tensor::empty(pv.shape(), DType::Bool, dev)?;
            let num = Tensor::empty(pv.shape(), DType::Bool, dev)?;
            self.unary(UnaryOp::IsNan, &pv, &nan)?;
            self.binary(BinaryOp::Eq, bv, bv, &num)?;
            self.binary(BinaryOp::LogicalAnd, &nan, &num, &nan)?;
            self.binary(BinaryOp::LogicalOr, &better, &nan, &better)?;
        }
        self.where_(&better, &pv, bv, bv)?;
        self.where_(&better, &pi, bi, bi)
    }

    /// An arg-reduction whose lines are too long for one invocation's loops
    /// (see `Gpu::loop_limit`): slices of each line in order, merged.
    fn arg_reduce_long(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        let dev = x.device();
        let n = x.shape()[dim];
        let len = slice_len(n, row_trips(1, n, 1))?;
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if d == dim { 1 } else { x.shape()[d] })
            .collect();
        let bv = Tensor::empty_for(op, &kept, x.dtype(), dev)?;
        let bi = Tensor::empty_for(op, &kept, indices.dtype(), dev)?;
        for lo in (0..n).step_by(len) {
            let xs = x.with_layout(x.layout().slice(dim, lo, len.min(n - lo), 1));
            if lo == 0 {
                self.arg_reduce(aop, &xs, dim, Some(&bv), &bi)?;
            } else {
                self.arg_merge(aop, &xs, dim, lo, &bv, &bi)?;
            }
        }
        self.copy_dense_as(&bi, indices)?;
        if let Some(vals) = values {
            self.copy_dense_as(&bv, vals)?;
        }
        Ok(())
    }
}
