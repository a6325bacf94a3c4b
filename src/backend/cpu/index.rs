//! CPU kernels for indexing, gathering and scattering.
//!
//! Every kernel validates all indices before writing anything, so a failing
//! call leaves its destination untouched. Copies are plain element moves per
//! dtype; work is split over the thread pool only in ways that keep each
//! destination element owned by one task, so results are deterministic
//! (repeated indices: the last write in row-major index order wins).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::cpu::strided::{for_each_row, par_for_each_row, Plan, SendPtr, PAR_MIN};
use crate::error::{Error, Result};
use crate::kernel::IndexArgs;
use crate::tensor::{DType, Element, Tensor};
use crate::with_dtype;

/// Integer types an index tensor may hold.
trait IndexElem: Copy + Send + Sync {
    fn get(self) -> i64;
}
impl IndexElem for i32 {
    #[inline(always)]
    fn get(self) -> i64 {
        self as i64
    }
}
impl IndexElem for i64 {
    #[inline(always)]
    fn get(self) -> i64 {
        self
    }
}

/// Run `$body` with `$I` bound to the index tensor's element type.
macro_rules! with_index_dtype {
    ($dt:expr, $I:ident => $body:expr) => {
        match $dt {
            DType::I32 => {
                type $I = i32;
                $body
            }
            DType::I64 => {
                type $I = i64;
                $body
            }
            other => unreachable!("index tensor of dtype {other}"),
        }
    };
}

/// Addition used by accumulating scatters (bool: logical or).
pub trait Accumulate: Element {
    fn acc(self, v: Self) -> Self;
}
macro_rules! impl_acc {
    ($($t:ty),*) => {$(
        impl Accumulate for $t {
            #[inline(always)]
            fn acc(self, v: Self) -> Self {
                self + v
            }
        }
    )*};
}
impl_acc!(f32, f64, half::f16, half::bf16);
impl Accumulate for i32 {
    #[inline(always)]
    fn acc(self, v: Self) -> Self {
        self.wrapping_add(v)
    }
}
impl Accumulate for i64 {
    #[inline(always)]
    fn acc(self, v: Self) -> Self {
        self.wrapping_add(v)
    }
}
impl Accumulate for u8 {
    #[inline(always)]
    fn acc(self, v: Self) -> Self {
        ((self | v) != 0) as u8
    }
}
impl Accumulate for crate::tensor::U8 {
    #[inline(always)]
    fn acc(self, v: Self) -> Self {
        crate::tensor::U8(self.0.wrapping_add(v.0))
    }
}
impl Accumulate for i8 {
    #[inline(always)]
    fn acc(self, v: Self) -> Self {
        self.wrapping_add(v)
    }
}
impl Accumulate for i16 {
    #[inline(always)]
    fn acc(self, v: Self) -> Self {
        self.wrapping_add(v)
    }
}

/// The other combining steps of `scatter_reduce` (floats propagate NaN).
pub trait Combine: Accumulate {
    fn mul(self, v: Self) -> Self;
    fn max_nan(self, v: Self) -> Self;
    fn min_nan(self, v: Self) -> Self;
}
macro_rules! impl_combine_float {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline(always)]
            fn mul(self, v: Self) -> Self {
                self * v
            }
            #[inline(always)]
            fn max_nan(self, v: Self) -> Self {
                if self.is_nan() || v.is_nan() { if self.is_nan() { self } else { v } }
                else if v > self { v } else { self }
            }
            #[inline(always)]
            fn min_nan(self, v: Self) -> Self {
                if self.is_nan() || v.is_nan() { if self.is_nan() { self } else { v } }
                else if v < self { v } else { self }
            }
        }
    )*};
}
impl_combine_float!(f32, f64, half::f16, half::bf16);
macro_rules! impl_combine_int {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline(always)]
            fn mul(self, v: Self) -> Self {
                self.wrapping_mul(v)
            }
            #[inline(always)]
            fn max_nan(self, v: Self) -> Self {
                self.max(v)
            }
            #[inline(always)]
            fn min_nan(self, v: Self) -> Self {
                self.min(v)
            }
        }
    )*};
}
impl_combine_int!(i8, i16, i32, i64);
/// Bool (stored as 0/1): and, or, and.
impl Combine for u8 {
    #[inline(always)]
    fn mul(self, v: Self) -> Self {
        self & v
    }
    #[inline(always)]
    fn max_nan(self, v: Self) -> Self {
        self | v
    }
    #[inline(always)]
    fn min_nan(self, v: Self) -> Self {
        self & v
    }
}
impl Combine for crate::tensor::U8 {
    #[inline(always)]
    fn mul(self, v: Self) -> Self {
        crate::tensor::U8(self.0.wrapping_mul(v.0))
    }
    #[inline(always)]
    fn max_nan(self, v: Self) -> Self {
        self.max(v)
    }
    #[inline(always)]
    fn min_nan(self, v: Self) -> Self {
        self.min(v)
    }
}

fn threads() -> usize {
    crate::par::split().max(1)
}

/// Split `n` elements into contiguous ranges for the thread pool (one range for small work).
fn elem_tasks(n: usize) -> Vec<(usize, usize)> {
    let k = if n < 2 * PAR_MIN || threads() == 1 {
        1
    } else {
        (threads() * 4).min(n / PAR_MIN).max(1)
    };
    let per = n.div_ceil(k).max(1);
    (0..n.div_ceil(per))
        .map(|t| (t * per, ((t + 1) * per).min(n)))
        .collect()
}

/// Walk the elements `[e0, e1)` (row-major) of a plan: `f(offsets, len, strides)`
/// for each piece of a row.
fn run_elems<const N: usize>(
    plan: &Plan<N>,
    e0: usize,
    e1: usize,
    f: &mut impl FnMut([isize; N], usize, [isize; N]),
) {
    let inner = plan.inner;
    if e0 >= e1 || inner == 0 {
        return;
    }
    let (r0, r1) = (e0 / inner, (e1 - 1) / inner + 1);
    let mut r = r0;
    plan.run_rows(r0, r1, &mut |o, n, st| {
        let lo = if r == r0 { e0 - r0 * inner } else { 0 };
        let hi = if r == r1 - 1 { e1 - r * inner } else { n };
        let mut o2 = o;
        for k in 0..N {
            o2[k] += lo as isize * st[k];
        }
        f(o2, hi - lo, st);
        r += 1;
    });
}

/// `(position in row-major order, offending value)` of the first bad index.
type BadIndex = (usize, i64);

/// The first index of `idx` (row-major) outside `[0, size)`, after adding
/// `size` to negative ones when `wrap`.
fn first_bad_index(idx: &Tensor, size: usize, wrap: bool) -> Option<BadIndex> {
    let plan = Plan::new(idx.shape(), [idx.strides()]);
    let n = size as i64;
    with_index_dtype!(idx.dtype(), I => {
        let p = SendPtr(idx.data_ptr::<I>());
        let tasks = elem_tasks(idx.numel());
        crate::par::map(tasks.len(), |ti| {
                let (e0, e1) = tasks[ti];
                let mut bad = None;
                let mut pos = e0;
                run_elems(&plan, e0, e1, &mut |[o], len, [s]| {
                    if bad.is_some() {
                        return;
                    }
                    for i in 0..len {
                        // SAFETY: offsets come from the index tensor's layout.
                        let v = unsafe { *p.get().offset(o + i as isize * s) }.get();
                        let w = if v < 0 && wrap { v + n } else { v };
                        if w < 0 || w >= n {
                            bad = Some((pos + i, v));
                            return;
                        }
                    }
                    pos += len;
                });
                bad
            })
            .into_iter()
            .flatten()
            .next()
    })
}

fn out_of_bounds(op: &'static str, v: i64, dim: usize, size: usize) -> Error {
    Error::index(
        op,
        format!("index {v} is out of bounds for dimension {dim} with size {size}"),
    )
}

/// Error for the first out-of-range index of `a` (none: `Ok`).
fn check_indices(a: &IndexArgs, src: &Tensor) -> Result<()> {
    for (j, idx) in a.indices.iter().enumerate() {
        let size = src.shape()[a.dims[j]];
        if let Some((_, v)) = first_bad_index(idx, size, true) {
            return Err(out_of_bounds(a.op, v, a.dim_names[j], size));
        }
    }
    Ok(())
}

/// `offs[b] += wrap(idx[b]) * stride` over the row-major positions `b` of `idx`
/// (negative indices count from the end). Returns false on an out-of-range index.
pub(crate) fn add_offsets(idx: &Tensor, size: usize, stride: isize, offs: &mut [isize]) -> bool {
    let plan = Plan::new(idx.shape(), [idx.strides()]);
    let n = size as i64;
    let tasks = elem_tasks(offs.len());
    let per = tasks.first().map_or(1, |t| t.1 - t.0).max(1);
    with_index_dtype!(idx.dtype(), I => {
        let p = SendPtr(idx.data_ptr::<I>());
        let len = offs.len();
        let op = SendPtr(offs.as_mut_ptr());
        crate::par::map(len.div_ceil(per), |t| {
            // SAFETY: chunk t of `offs`; each task takes its own chunk.
            let chunk = unsafe {
                std::slice::from_raw_parts_mut(op.get().add(t * per), per.min(len - t * per))
            };
            let mut ok = true;
            let mut pos = 0usize;
            run_elems(&plan, t * per, t * per + chunk.len(), &mut |[o], len, [s]| {
                let (p, mut good) = (p.get(), true);
                for (i, c) in chunk[pos..pos + len].iter_mut().enumerate() {
                    // SAFETY: offsets come from the index tensor's layout.
                    let v = unsafe { *p.offset(o + i as isize * s) }.get();
                    let w = if v < 0 { v + n } else { v };
                    good &= (0..n).contains(&w);
                    *c += w as isize * stride;
                }
                ok &= good;
                pos += len;
            });
            ok
        })
        .into_iter()
        .all(|ok| ok)
    })
}

/// Validate the indices of `a` against `src` and return the element offset
/// (relative to `src`'s origin) selected by each position of the index shape.
/// Element offsets (relative to `src`'s own offset) of the index positions
/// `b` (validated: an out-of-range index is an `IndexError` naming the dim).
pub(crate) fn index_offsets(a: &IndexArgs, src: &Tensor, nb: usize) -> Result<Vec<isize>> {
    let mut offs = vec![0isize; nb];
    for (j, idx) in a.indices.iter().enumerate() {
        let d = a.dims[j];
        if !add_offsets(idx, src.shape()[d], src.strides()[d], &mut offs) {
            check_indices(a, src)?;
        }
    }
    Ok(offs)
}

/// Element offsets of the leading dims of a tensor, by row-major position.
enum Lead {
    /// `b * stride` (the leading dims coalesce into one).
    Uniform(isize),
    List(Vec<isize>),
}

impl Lead {
    fn new(t: &Tensor, k: usize) -> Lead {
        let shape = &t.shape()[..k];
        let strides = &t.strides()[..k];
        let (cs, cst) = crate::tensor::Layout::coalesce(shape, &[strides]);
        match cs.len() {
            0 => Lead::Uniform(0),
            1 => Lead::Uniform(cst[0][0]),
            _ => {
                let n: usize = shape.iter().product();
                let mut out = Vec::with_capacity(n);
                crate::backend::cpu::strided::for_each_offset(shape, strides, |o| out.push(o));
                Lead::List(out)
            }
        }
    }
    #[inline(always)]
    fn at(&self, b: usize) -> isize {
        match self {
            Lead::Uniform(s) => b as isize * s,
            Lead::List(v) => v[b],
        }
    }
}

/// The dims of `src` not listed in `dims`: (shape, strides).
fn rest_of(src: &Tensor, dims: &[usize]) -> (Vec<usize>, Vec<isize>) {
    let mut shape = vec![];
    let mut strides = vec![];
    for d in 0..src.ndim() {
        if !dims.contains(&d) {
            shape.push(src.shape()[d]);
            strides.push(src.strides()[d]);
        }
    }
    (shape, strides)
}

/// `out[b, r] = src[offs[b] + r]` where `out` has shape `B ++ R`.
pub fn index_gather(a: &IndexArgs, src: &Tensor, out: &Tensor) -> Result<()> {
    let k = out.ndim() - (src.ndim() - a.dims.len());
    if a.indices.len() == 1 {
        return gather_one(a, src, out, k);
    }
    let nb: usize = out.shape()[..k].iter().product();
    let offs = index_offsets(a, src, nb)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let lead = Lead::new(out, k);
    let (rshape, rstrides) = rest_of(src, a.dims);
    let plan = Plan::new(&rshape, [&rstrides, &out.strides()[k..]]);
    let block = rshape.iter().product::<usize>();
    let big = nb * block >= 2 * PAR_MIN && threads() > 1;
    with_dtype!(src.dtype(), T => {
        let sp = SendPtr(src.data_ptr::<T>());
        let op = SendPtr(out.data_ptr::<T>());
        if block == 1 {
            // One element per index position: a plain gather.
            let run = |b0: usize, b1: usize| {
                for (b, &so) in offs.iter().enumerate().take(b1).skip(b0) {
                    // SAFETY: validated offsets inside src; distinct b write distinct out elements.
                    unsafe { *op.get().offset(lead.at(b)) = *sp.get().offset(so) };
                }
            };
            if big {
                let per = nb.div_ceil(threads() * 4);
                crate::par::for_each(nb.div_ceil(per), |t| run(t * per, ((t + 1) * per).min(nb)));
            } else {
                run(0, nb);
            }
            return Ok(());
        }
        let copy_rows = |b: usize, r0: usize, r1: usize| {
            let (so, oo) = (offs[b], lead.at(b));
            plan.run_rows(r0, r1, &mut |[s, o], len, [ss, os]| {
                let (sp, op) = (sp.get().wrapping_offset(so + s), op.get().wrapping_offset(oo + o));
                for i in 0..len as isize {
                    // SAFETY: validated offsets inside src; out positions are disjoint per (b, row).
                    unsafe { *op.offset(i * os) = *sp.offset(i * ss) };
                }
            });
        };
        let rows = plan.rows();
        if !big {
            (0..nb).for_each(|b| copy_rows(b, 0, rows));
        } else if nb >= threads() * 4 || rows < threads() * 2 {
            let per = nb.div_ceil(threads() * 8).max(1);
            crate::par::for_each(nb.div_ceil(per), |t| {
                for b in t * per..((t + 1) * per).min(nb) {
                    copy_rows(b, 0, rows);
                }
            });
        } else {
            let per = rows.div_ceil(threads() * 4).max(1);
            for b in 0..nb {
                crate::par::for_each(rows.div_ceil(per), |t| {
                    copy_rows(b, t * per, ((t + 1) * per).min(rows));
                });
            }
        }
    });
    Ok(())
}

/// `index_gather` with one index tensor: offsets computed on the fly, bounds
/// checked as it goes (the output is fresh, so a failure just discards it).
fn gather_one(a: &IndexArgs, src: &Tensor, out: &Tensor, k: usize) -> Result<()> {
    if out.numel() == 0 {
        return check_indices(a, src);
    }
    let idx = &a.indices[0];
    let d = a.dims[0];
    let (n, sd) = (src.shape()[d] as i64, src.strides()[d]);
    let (rshape, rstrides) = rest_of(src, a.dims);
    let plan = Plan::new(&rshape, [&rstrides, &out.strides()[k..]]);
    let rows = plan.rows();
    let block: usize = rshape.iter().product();
    let bad = AtomicBool::new(false);
    with_dtype!(src.dtype(), T => with_index_dtype!(idx.dtype(), I => {
        let sp = SendPtr(src.data_ptr::<T>());
        let op = SendPtr(out.data_ptr::<T>());
        let ip = SendPtr(idx.data_ptr::<I>());
        let grain = (PAR_MIN / block).max(1);
        let strides = [idx.strides(), &out.strides()[..k]];
        if block == 1 {
            par_for_each_row(&out.shape()[..k], strides, grain, |[io, oo], len, [is, os]| {
                // Locals, so the stores below cannot force reloads.
                let (n, sd, ip, sp, op) = (n, sd, ip.get(), sp.get(), op.get());
                let mut ok = true;
                for i in 0..len as isize {
                    // SAFETY: out-of-range indices read element 0 instead (and
                    // fail the call); distinct positions write distinct outputs.
                    unsafe {
                        let v = (*ip.offset(io + i * is)).get();
                        let w = if v < 0 { v + n } else { v };
                        let good = (0..n).contains(&w);
                        ok &= good;
                        let so = if good { w as isize * sd } else { 0 };
                        *op.offset(oo + i * os) = *sp.offset(so);
                    }
                }
                if !ok {
                    bad.store(true, Ordering::Relaxed);
                }
            });
        } else {
            par_for_each_row(&out.shape()[..k], strides, grain, |[io, oo], len, [is, os]| {
                for i in 0..len as isize {
                    // SAFETY: the index is range-checked before use; distinct
                    // index positions write distinct output elements.
                    unsafe {
                        let v = (*ip.get().offset(io + i * is)).get();
                        let w = if v < 0 { v + n } else { v };
                        if w < 0 || w >= n {
                            bad.store(true, Ordering::Relaxed);
                            continue;
                        }
                        let (so, ob) = (w as isize * sd, oo + i * os);
                        plan.run_rows(0, rows, &mut |[s, o], l, [ss, osr]| {
                            let (sp, op) = (sp.get(), op.get());
                            for q in 0..l as isize {
                                *op.offset(ob + o + q * osr) = *sp.offset(so + s + q * ss);
                            }
                        });
                    }
                }
            });
        }
    }));
    if bad.load(Ordering::Relaxed) {
        check_indices(a, src)?;
    }
    Ok(())
}

/// `index_put` with one index tensor and one element per index position:
/// validate, then write serially in index order (repeated targets: last wins).
fn put_one(a: &IndexArgs, dst: &Tensor, values: &Tensor, k: usize, accumulate: bool) -> Result<()> {
    check_indices(a, dst)?;
    let idx = &a.indices[0];
    let d = a.dims[0];
    let (n, dd) = (dst.shape()[d] as i64, dst.strides()[d]);
    with_dtype!(dst.dtype(), T => with_index_dtype!(idx.dtype(), I => {
        let dp = dst.data_ptr::<T>();
        let vp = values.data_ptr::<T>();
        let ip = idx.data_ptr::<I>();
        for_each_row(
            &values.shape()[..k],
            [idx.strides(), &values.strides()[..k]],
            |[io, vo], len, [is, vs]| {
                let (n, dd, accumulate) = (n, dd, accumulate);
                for i in 0..len as isize {
                    // SAFETY: indices validated above; serial writes.
                    unsafe {
                        let v = (*ip.offset(io + i * is)).get();
                        let w = if v < 0 { v + n } else { v };
                        let x = *vp.offset(vo + i * vs);
                        let y = dp.offset(w as isize * dd);
                        *y = if accumulate { Accumulate::acc(*y, x) } else { x };
                    }
                }
            },
        );
    }));
    Ok(())
}

/// `dst[offs[b] + r] = values[b, r]` (or `+=` when `accumulate`); `values` has shape `B ++ R`.
///
/// Repeated positions: writes happen in row-major order of `B`, so the last
/// one wins (or all are summed). Work is split over the rest dims only, so a
/// destination element is never touched by two tasks.
pub fn index_put(a: &IndexArgs, dst: &Tensor, values: &Tensor, accumulate: bool) -> Result<()> {
    let k = values.ndim() - (dst.ndim() - a.dims.len());
    if a.indices.len() == 1 && values.shape()[k..].iter().product::<usize>() == 1 {
        return put_one(a, dst, values, k, accumulate);
    }
    let nb: usize = values.shape()[..k].iter().product();
    let offs = index_offsets(a, dst, nb)?;
    if values.numel() == 0 {
        return Ok(());
    }
    let lead = Lead::new(values, k);
    let (rshape, rstrides) = rest_of(dst, a.dims);
    let plan = Plan::new(&rshape, [&rstrides, &values.strides()[k..]]);
    let block = rshape.iter().product::<usize>();
    with_dtype!(dst.dtype(), T => {
        let dp = SendPtr(dst.data_ptr::<T>());
        let vp = SendPtr(values.data_ptr::<T>());
        if block == 1 {
            for (b, &d0) in offs.iter().enumerate() {
                // SAFETY: validated offsets; serial, so repeated targets are written in order.
                unsafe {
                    let x = *vp.get().offset(lead.at(b));
                    let y = dp.get().offset(d0);
                    *y = if accumulate { Accumulate::acc(*y, x) } else { x };
                }
            }
            return Ok(());
        }
        let put_rows = |r0: usize, r1: usize| {
            for (b, &d0) in offs.iter().enumerate() {
                let v0 = lead.at(b);
                plan.run_rows(r0, r1, &mut |[d, v], len, [ds, vs]| {
                    let (vp, dp) = (vp.get().wrapping_offset(v0 + v), dp.get().wrapping_offset(d0 + d));
                    for i in 0..len as isize {
                        // SAFETY: validated offsets; each task owns its rows of the rest dims.
                        unsafe {
                            let x = *vp.offset(i * vs);
                            let y = dp.offset(i * ds);
                            *y = if accumulate { Accumulate::acc(*y, x) } else { x };
                        }
                    }
                });
            }
        };
        let rows = plan.rows();
        if nb * block < 2 * PAR_MIN || threads() == 1 || rows < threads() * 2 {
            put_rows(0, rows);
        } else {
            let per = rows.div_ceil(threads() * 4).max(1);
            crate::par::for_each(rows.div_ceil(per), |t| put_rows(t * per, ((t + 1) * per).min(rows)));
        }
    });
    Ok(())
}

/// Check `0 <= index < size` everywhere (no wrapping, as torch's gather/scatter).
fn check_range(op: &'static str, index: &Tensor, dim: usize, size: usize) -> Result<()> {
    match first_bad_index(index, size, false) {
        Some((_, v)) => Err(out_of_bounds(op, v, dim, size)),
        None => Ok(()),
    }
}

/// `out[p] = src[p with p[dim] = index[p]]` over `index`'s shape.
pub fn gather(src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
    check_range("gather", index, dim, src.shape()[dim])?;
    let mut sst = src.strides().to_vec();
    let sd = sst[dim];
    sst[dim] = 0;
    with_dtype!(src.dtype(), T => with_index_dtype!(index.dtype(), I => {
        let sp = SendPtr(src.data_ptr::<T>());
        let ip = SendPtr(index.data_ptr::<I>());
        let op = SendPtr(out.data_ptr::<T>());
        par_for_each_row(
            index.shape(),
            [&sst, index.strides(), out.strides()],
            PAR_MIN,
            |[so, io, oo], n, [ss, is, os]| {
                let (sd, sp, ip, op) = (sd, sp.get(), ip.get(), op.get());
                for i in 0..n as isize {
                    // SAFETY: index values validated; out rows disjoint per task.
                    unsafe {
                        let j = (*ip.offset(io + i * is)).get() as isize;
                        *op.offset(oo + i * os) = *sp.offset(so + i * ss + j * sd);
                    }
                }
            },
        );
    }));
    Ok(())
}

/// `dst[p with p[dim] = index[p]] (+)= src[p]` over `index`'s shape.
pub fn scatter(
    op_name: &'static str,
    dst: &Tensor,
    dim: usize,
    index: &Tensor,
    src: &Tensor,
    accumulate: bool,
) -> Result<()> {
    with_dtype!(dst.dtype(), T => {
        if accumulate {
            walk_lines::<T>(op_name, dst, dim, index, src, Accumulate::acc)
        } else {
            walk_lines::<T>(op_name, dst, dim, index, src, |_, x| x)
        }
    })
}

/// `dst[p with p[dim] = index[p]] = reduce(dst[..], src[p])` over `index`'s
/// shape (`Sum`, `Prod`, `Amax`, `Amin`; `Mean` arrives as `Sum`).
pub fn scatter_reduce(
    op_name: &'static str,
    dst: &Tensor,
    dim: usize,
    index: &Tensor,
    src: &Tensor,
    reduce: crate::kernel::ScatterReduction,
) -> Result<()> {
    use crate::kernel::ScatterReduction as R;
    with_dtype!(dst.dtype(), T => match reduce {
        R::Sum | R::Mean => walk_lines::<T>(op_name, dst, dim, index, src, Accumulate::acc),
        R::Prod => walk_lines::<T>(op_name, dst, dim, index, src, Combine::mul),
        R::Amax => walk_lines::<T>(op_name, dst, dim, index, src, Combine::max_nan),
        R::Amin => walk_lines::<T>(op_name, dst, dim, index, src, Combine::min_nan),
    })
}

/// The walk of [`scatter`] and [`scatter_reduce`]: `y = combine(y, src[p])`
/// for the slot `y = dst[p with p[dim] = index[p]]` of every position `p` of
/// `index`, after checking every index (nothing is written when one is out
/// of range).
///
/// Positions of `index` that differ only along `dim` (a line, the only ones
/// that can reach the same slot) are walked in order by one task, so each
/// slot combines its values in row-major order of `index` and the result
/// does not depend on the thread count.
fn walk_lines<T: Element>(
    op_name: &'static str,
    dst: &Tensor,
    dim: usize,
    index: &Tensor,
    src: &Tensor,
    combine: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    check_range(op_name, index, dim, dst.shape()[dim])?;
    if index.numel() == 0 {
        return Ok(());
    }
    fn without<X: Copy>(v: &[X], dim: usize) -> Vec<X> {
        v.iter()
            .enumerate()
            .filter(|&(d, _)| d != dim)
            .map(|(_, &s)| s)
            .collect()
    }
    let drop = |v: &[isize]| without(v, dim);
    let lshape: Vec<usize> = without(index.shape(), dim);
    let (ist, sst, dst_st) = (
        drop(index.strides()),
        drop(src.strides()),
        drop(dst.strides()),
    );
    let (isd, ssd, dsd) = (index.strides()[dim], src.strides()[dim], dst.strides()[dim]);
    let klen = index.shape()[dim] as isize;
    let grain = (PAR_MIN / klen.max(1) as usize).max(1);
    with_index_dtype!(index.dtype(), I => {
        let dp = SendPtr(dst.data_ptr::<T>());
        let ip = SendPtr(index.data_ptr::<I>());
        let sp = SendPtr(src.data_ptr::<T>());
        par_for_each_row(
            &lshape,
            [&ist, &sst, &dst_st],
            grain,
            |[io, so, do_], n, [is, ss, ds]| {
                let (klen, isd, ssd, dsd) = (klen, isd, ssd, dsd);
                for i in 0..n as isize {
                    for k in 0..klen {
                        // SAFETY: validated indices; a task owns whole lines along `dim`.
                        unsafe {
                            let j = (*ip.get().offset(io + i * is + k * isd)).get() as isize;
                            let x = *sp.get().offset(so + i * ss + k * ssd);
                            let y = dp.get().offset(do_ + i * ds + j * dsd);
                            *y = combine(*y, x);
                        }
                    }
                }
            },
        );
    });
    Ok(())
}

/// Non-zero count of each element range of `tasks`.
fn nz_counts(x: &Tensor, plan: &Plan<1>, tasks: &[(usize, usize)]) -> Vec<usize> {
    with_dtype!(x.dtype(), T => {
        let p = SendPtr(x.data_ptr::<T>());
        let zero = T::zero();
        crate::par::map(tasks.len(), |ti| {
                let (e0, e1) = tasks[ti];
                let mut c = 0usize;
                run_elems(plan, e0, e1, &mut |[o], n, [s]| {
                    // SAFETY: offsets from the layout.
                    unsafe {
                        if s == 1 {
                            let row = std::slice::from_raw_parts(p.get().offset(o), n);
                            c += row.iter().filter(|&&v| v != zero).count();
                        } else {
                            let (p, mut cl) = (p.get(), 0usize);
                            for i in 0..n as isize {
                                cl += (*p.offset(o + i * s) != zero) as usize;
                            }
                            c += cl;
                        }
                    }
                });
                c
            })
    })
}

/// Number of non-zero elements of `x`.
pub fn nonzero_count(x: &Tensor) -> Result<usize> {
    let plan = Plan::new(x.shape(), [x.strides()]);
    Ok(nz_counts(x, &plan, &elem_tasks(x.numel())).iter().sum())
}

/// Write the coordinates of the non-zero elements of `x`, in row-major order,
/// into the contiguous int64 tensor `out` of shape `[count, ndim]`.
///
/// Each task counts its element range, then writes from its prefix-sum
/// position; coordinates are tracked incrementally (the last one moves every
/// element) and written without a data-dependent branch.
pub fn nonzero_fill(x: &Tensor, out: &Tensor) -> Result<()> {
    let plan = Plan::new(x.shape(), [x.strides()]);
    let tasks = elem_tasks(x.numel());
    let counts = nz_counts(x, &plan, &tasks);
    let total: usize = counts.iter().sum();
    if total != out.shape()[0] {
        return Err(Error::runtime(
            "nonzero",
            "the tensor changed while its non-zero elements were collected",
        ));
    }
    let nd = x.ndim();
    if total == 0 || nd == 0 {
        return Ok(());
    }
    let mut starts = Vec::with_capacity(counts.len());
    let mut acc = 0usize;
    for c in &counts {
        starts.push(acc);
        acc += c;
    }
    let shape = x.shape().to_vec();
    with_dtype!(x.dtype(), T => {
        let p = SendPtr(x.data_ptr::<T>());
        let q = SendPtr(out.data_ptr::<i64>());
        let zero = T::zero();
        crate::par::for_each(tasks.len(), |t| {
            let (e0, e1) = tasks[t];
            if counts[t] == 0 {
                return;
            }
            // Multi-index of the task's first element.
            let mut lin = e0;
            let mut idx = vec![0i64; nd];
            for d in (0..nd).rev() {
                idx[d] = (lin % shape[d]) as i64;
                lin /= shape[d];
            }
            let mut w = starts[t] * nd;
            let end = (starts[t] + counts[t]) * nd;
            let last = shape[nd - 1] as i64;
            let mut j = idx[nd - 1];
            run_elems(&plan, e0, e1, &mut |[o], n, [s]| {
                // Work on locals: stores through `q` must not force reloads.
                let (p, q) = (p.get(), q.get());
                let (mut wl, mut jl) = (w, j);
                if nd == 1 {
                    // 1-D: the coordinate is the running position (no wrap-around).
                    for i in 0..n as isize {
                        // SAFETY: as below.
                        unsafe {
                            let hit = (*p.offset(o + i * s) != zero) as usize;
                            if wl < end {
                                *q.add(wl) = jl;
                            }
                            wl += hit;
                        }
                        jl += 1;
                    }
                    w = wl;
                    j = jl;
                    return;
                }
                for i in 0..n as isize {
                    // SAFETY: offsets from the layout; a task writes only rows
                    // [starts[t], starts[t] + counts[t]) of `out`.
                    unsafe {
                        let hit = (*p.offset(o + i * s) != zero) as usize;
                        if wl < end {
                            let row = q.add(wl);
                            for (d, &v) in idx[..nd - 1].iter().enumerate() {
                                *row.add(d) = v;
                            }
                            *row.add(nd - 1) = jl;
                        }
                        wl += hit * nd;
                    }
                    jl += 1;
                    if jl == last {
                        jl = 0;
                        let mut d = nd - 1;
                        while d > 0 {
                            d -= 1;
                            idx[d] += 1;
                            if (idx[d] as usize) < shape[d] {
                                break;
                            }
                            idx[d] = 0;
                        }
                    }
                }
                w = wl;
                j = jl;
            });
        });
    });
    Ok(())
}

/// `out = x` on the kept triangle and 0 elsewhere, over the last two dims.
/// Kept: `j - i <= diagonal` (lower) or `j - i >= diagonal` (upper). `out` may be `x`.
pub fn tri(x: &Tensor, out: &Tensor, diagonal: i64, upper: bool) -> Result<()> {
    let nd = x.ndim();
    let (m, n) = (x.shape()[nd - 2], x.shape()[nd - 1]);
    // Iterate over (batch..., row) with the column handled inside.
    let lead = &x.shape()[..nd - 1];
    let (xs, os) = (&x.strides()[..nd - 1], &out.strides()[..nd - 1]);
    let (xc, oc) = (x.strides()[nd - 1], out.strides()[nd - 1]);
    let rows: usize = lead.iter().product();
    if rows == 0 || n == 0 {
        return Ok(());
    }
    with_dtype!(x.dtype(), T => {
        let xp = SendPtr(x.data_ptr::<T>());
        let op = SendPtr(out.data_ptr::<T>());
        let zero = T::zero();
        let row_job = |r: usize| {
            // Offsets of row r (row-major over the lead dims).
            let (mut rem, mut xo, mut oo) = (r, 0isize, 0isize);
            for d in (0..lead.len()).rev() {
                let i = (rem % lead[d]) as isize;
                rem /= lead[d];
                xo += i * xs[d];
                oo += i * os[d];
            }
            // Columns [0, cut) are kept for tril / zeroed for triu.
            let i = (r % m) as i64;
            let cut = if upper { i + diagonal } else { i + diagonal + 1 };
            let cut = cut.clamp(0, n as i64) as usize;
            let (xp, op, xc, oc) = (xp.get(), op.get(), xc, oc);
            let (keep, zero_cols) = if upper { (cut..n, 0..cut) } else { (0..cut, cut..n) };
            // SAFETY: offsets from the layouts; each row is written by one task.
            unsafe {
                for j in keep {
                    *op.offset(oo + j as isize * oc) = *xp.offset(xo + j as isize * xc);
                }
                for j in zero_cols {
                    *op.offset(oo + j as isize * oc) = zero;
                }
            }
        };
        if rows * n < 2 * PAR_MIN || threads() == 1 {
            (0..rows).for_each(row_job);
        } else {
            let per = (PAR_MIN / n).max(1);
            crate::par::for_each(rows.div_ceil(per), |b| (b * per..rows.min((b + 1) * per)).for_each(row_job));
        }
    });
    Ok(())
}
