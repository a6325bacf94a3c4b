//! Binding operands and dispatching the common kinds of kernel: elementwise kernels (in pieces past
//! one binding), one-thread-per-item kernels and blocks of whole rows.

use std::sync::Arc;

use super::context::{get, GpuBuffer};
use super::dtype::{elem_bytes, gty, is_half};
use super::limits::check_items;
use super::meta::ew_meta;
use super::shaders::Bindings;
use super::storage::buffer;
use super::views::as_rows;
use super::{shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};

/// Buffers of `ts` (the last one written) deduplicated into bindings.
pub(super) fn bind(op: &'static str, ts: &[&Tensor]) -> Result<(Bindings, Vec<Arc<GpuBuffer>>)> {
    bind_written(op, ts, 1)
}

/// Buffers of `ts` (the last `written` of them written) deduplicated into bindings.
pub(super) fn bind_written(
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
pub(super) fn unshare(op: &'static str, ts: &[&Tensor], written: usize) -> Result<Vec<Tensor>> {
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

pub(super) fn run_ew(
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
pub(super) fn dispatch_ew(
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

pub(super) fn check_same_device(op: &'static str, ts: &[&Tensor]) -> Result<()> {
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

/// Run `run` on blocks of whole rows: each of `parts` (contiguous, `rows`
/// rows of the given width) is cut into the same rows, each block within one
/// binding per buffer; the `shared` operands (weights) are passed whole
/// after them. `run` also gets the block's row range.
pub(super) fn row_blocks(
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

/// Run an item kernel over `n` items; operands `ts`, the ones at `written` are written.
pub(super) fn run_items(
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
