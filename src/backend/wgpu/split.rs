//! Kernels over tensors in buffers larger than one storage binding.
//!
//! A kernel may bind at most `max_storage_buffer_binding_size` bytes of a
//! buffer, though buffers may be larger. An op whose operands lie in such a
//! buffer runs here in pieces: its iteration space (the axes its operands'
//! dims walk) is halved along a splittable axis until, for every large
//! buffer, the bytes all its operands touch fit one binding; each piece then
//! runs the op's ordinary kernel on views re-based onto windows of the large
//! buffers (see [`GpuBuffer::window`]), so no kernel needs to know.

use std::sync::Arc;

use super::buffer;
use super::context::{get, GpuBuffer};
use crate::error::{Error, Result};
use crate::tensor::{Layout, Storage, Tensor};

/// A piece's work: the operands' views and each axis's `[start, end)`.
pub(super) type Piece<'a> = dyn FnMut(&[Tensor], &[(usize, usize)]) -> Result<()> + 'a;

/// A batch piece's work: the operands' views and the batch range.
pub(super) type BatchPiece<'a> = dyn FnMut(&[Tensor], (usize, usize)) -> Result<()> + 'a;

/// Whether any of `ts` lies in a buffer larger than one storage binding.
pub(super) fn needed(op: &'static str, ts: &[&Tensor]) -> Result<bool> {
    let max = get()?.max_binding();
    for t in ts {
        if buffer(op, t)?.len > max {
            return Ok(true);
        }
    }
    Ok(false)
}

/// How an op's operands walk its iteration space.
pub(super) struct Space<'a> {
    /// The operands (inputs and outputs).
    pub ts: &'a [&'a Tensor],
    /// For each operand, the iteration axis each of its dims walks, from
    /// the axis's start. A dim of size 1 is a broadcast and is never
    /// narrowed; a dim longer than its axis (a scatter's destination) is
    /// narrowed to the same coordinates.
    pub axes: Vec<Vec<usize>>,
    /// The length of each axis.
    pub sizes: Vec<usize>,
    /// Which axes a piece may cover in part. A reduction axis is splittable
    /// only when the op can add a piece's result to the previous pieces'.
    pub splittable: Vec<bool>,
}

impl<'a> Space<'a> {
    /// Operands of one shape (an input and its result) worked along lines
    /// of `dim`: every other dim splits, each line stays whole.
    pub fn lines(ts: &'a [&'a Tensor], dim: usize) -> Space<'a> {
        let nd = ts[0].ndim();
        Space {
            ts,
            axes: vec![(0..nd).collect(); ts.len()],
            sizes: ts[0].shape().to_vec(),
            splittable: (0..nd).map(|d| d != dim).collect(),
        }
    }
}

/// Run `run` once per piece of `s`'s iteration space, in order, passing
/// the operands as views (in the same order) that bind no more than one
/// storage binding each, and the `[start, end)` each axis covers. Each axis
/// is split into pieces in increasing order, so an op that accumulates over
/// a reduction axis sees its first piece first.
pub(super) fn in_pieces(op: &'static str, s: &Space<'_>, run: &mut Piece<'_>) -> Result<()> {
    let views: Vec<Tensor> = s.ts.iter().map(|t| (*t).clone()).collect();
    let ranges: Vec<(usize, usize)> = s.sizes.iter().map(|&n| (0, n)).collect();
    go(op, s, views, ranges, run)
}

/// The element range `[lo, hi)` a non-empty view touches.
fn span(t: &Tensor) -> (usize, usize) {
    let (lo, hi) = t.layout().span();
    (lo as usize, hi as usize)
}

fn go(
    op: &'static str,
    s: &Space<'_>,
    views: Vec<Tensor>,
    ranges: Vec<(usize, usize)>,
    run: &mut Piece<'_>,
) -> Result<()> {
    let g = get()?;
    let max = g.max_binding();
    let align = g.binding_align();
    let roots: Vec<Arc<GpuBuffer>> = views.iter().map(|t| buffer(op, t)).collect::<Result<_>>()?;
    // Each large buffer's window: (root id, byte base, bytes), or the
    // operands of a buffer whose views still span more than one binding.
    let mut windows: Vec<(usize, u64, u64)> = Vec::new();
    let mut too_big: Option<(Vec<usize>, u64)> = None;
    for (k, r) in roots.iter().enumerate() {
        if r.len <= max || windows.iter().any(|w| w.0 == r.id()) {
            continue;
        }
        // Empty views touch nothing (they are re-based onto any window).
        let group: Vec<usize> = (k..views.len())
            .filter(|&j| roots[j].id() == r.id() && views[j].numel() > 0)
            .collect();
        if group.is_empty() {
            windows.push((r.id(), 0, align.min(r.len)));
            continue;
        }
        let (lo, hi) = group
            .iter()
            .map(|&j| span(&views[j]))
            .fold((usize::MAX, 0), |(a, b), (x, y)| (a.min(x), b.max(y)));
        let eb = super::elem_bytes(views[group[0]].dtype()) as u64;
        let base = (lo as u64 * eb) / align * align;
        let bytes = hi as u64 * eb - base;
        if bytes > max {
            if too_big.as_ref().is_none_or(|t| bytes > t.1) {
                too_big = Some((group, bytes));
            }
        } else {
            windows.push((r.id(), base, bytes));
        }
    }
    if let Some((group, bytes)) = too_big {
        // Halve the splittable axis that contributes most to the span.
        let mut best: Option<(usize, usize)> = None;
        for &j in &group {
            let t = &views[j];
            for (d, &a) in s.axes[j].iter().enumerate() {
                let (n, st) = (t.shape()[d], t.strides()[d].unsigned_abs());
                let len = ranges[a].1 - ranges[a].0;
                if !s.splittable[a] || len < 2 || n < 2 || st == 0 {
                    continue;
                }
                let reach = st * (n - 1);
                if best.is_none_or(|b| reach > b.1) {
                    best = Some((a, reach));
                }
            }
        }
        let Some((a, _)) = best else {
            let t = &views[group[0]];
            return Err(Error::runtime(
                op,
                format!(
                    "an operand of shape {:?} (strides {:?}) reaches {bytes} bytes of its buffer, over the adapter's largest storage binding ({max} bytes, max_storage_buffer_binding_size), and {op} cannot split it further; work on slices of the tensor",
                    t.shape(),
                    t.strides()
                ),
            ));
        };
        let (lo, hi) = ranges[a];
        let mid = lo + (hi - lo) / 2;
        for (p0, p1) in [(lo, mid), (mid, hi)] {
            let mut part = Vec::with_capacity(views.len());
            for (j, t) in views.iter().enumerate() {
                let mut l = t.layout().clone();
                for (d, &ax) in s.axes[j].iter().enumerate() {
                    if ax == a && l.shape[d] > 1 {
                        l = l.slice(d, p0 - lo, p1 - p0, 1);
                    }
                }
                part.push(Tensor::from_parts(t.storage().clone(), l, t.dtype())?);
            }
            let mut r = ranges.clone();
            r[a] = (p0, p1);
            go(op, s, part, r, run)?;
        }
        return Ok(());
    }
    // Re-base every view of a large buffer onto one window of it (one per
    // buffer, so operands that share a buffer share a binding).
    let made: Vec<(usize, Arc<GpuBuffer>, u64)> = windows
        .iter()
        .map(|&(id, base, bytes)| {
            let r = roots.iter().find(|r| r.id() == id).expect("root");
            (id, r.window(base, bytes), base)
        })
        .collect();
    let mut rebased = Vec::with_capacity(views.len());
    for (j, t) in views.iter().enumerate() {
        let Some((_, w, base)) = made.iter().find(|m| m.0 == roots[j].id()) else {
            rebased.push(t.clone());
            continue;
        };
        let eb = super::elem_bytes(t.dtype());
        let elems = w.len as usize / eb;
        let storage = Arc::new(Storage::from_gpu(
            elems * t.dtype().itemsize(),
            t.device(),
            Box::new(w.clone()),
        ));
        let mut l: Layout = t.layout().clone();
        l.offset = if t.numel() == 0 {
            0
        } else {
            l.offset - *base as usize / eb
        };
        rebased.push(Tensor::from_parts(storage, l, t.dtype())?);
    }
    run(&rebased, &ranges)
}

/// [`in_pieces`] for ops whose only splittable axis is the leading (batch)
/// dim of the operands marked in `batched` (all of the same length); every
/// other dim stays whole. `run` gets the batch range of each piece.
pub(super) fn by_batch(
    op: &'static str,
    ts: &[&Tensor],
    batched: &[bool],
    run: &mut BatchPiece<'_>,
) -> Result<()> {
    let n = ts
        .iter()
        .zip(batched)
        .find(|(_, &b)| b)
        .map_or(1, |(t, _)| t.shape().first().copied().unwrap_or(1));
    let mut sizes = vec![n];
    let mut axes = Vec::with_capacity(ts.len());
    for (t, &b) in ts.iter().zip(batched) {
        let mut a = Vec::with_capacity(t.ndim());
        for (d, &len) in t.shape().iter().enumerate() {
            if d == 0 && b {
                a.push(0);
            } else {
                a.push(sizes.len());
                sizes.push(len);
            }
        }
        axes.push(a);
    }
    let mut splittable = vec![false; sizes.len()];
    splittable[0] = true;
    let space = Space {
        ts,
        axes,
        sizes,
        splittable,
    };
    in_pieces(op, &space, &mut |v, r| run(v, r[0]))
}
