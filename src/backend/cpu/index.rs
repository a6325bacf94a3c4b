//! CPU kernels for indexing, gathering and scattering.
//!
//! Every kernel validates all indices before writing anything, so a failing
//! call leaves its destination untouched. Copies are plain element moves per
//! dtype; work is split over the thread pool only in ways that keep each
//! destination element owned by one task, so results are deterministic
//! (repeated indices: the last write in row-major index order wins).

use rayon::prelude::*;

use crate::backend::cpu::strided::{par_for_each_row, Plan, SendPtr, PAR_MIN};
use crate::error::{Error, Result};
use crate::ops::index::IndexArgs;
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

fn threads() -> usize {
    rayon::current_num_threads().max(1)
}

/// Rows of `plan` per parallel task (all rows in one task for small work).
fn rows_per_task<const N: usize>(plan: &Plan<N>, work: usize) -> usize {
    let rows = plan.rows().max(1);
    if work < 2 * PAR_MIN || threads() == 1 {
        rows
    } else {
        rows.div_ceil(threads() * 4).max(1)
    }
}

/// `(position in row-major order, offending value)` of the first bad index.
type BadIndex = (usize, i64);

fn first_bad(a: Option<BadIndex>, b: Option<BadIndex>) -> Option<BadIndex> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x.0 <= y.0 { x } else { y }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `offs[b] += wrap(idx[b]) * stride` over the row-major positions `b` of `idx`
/// (negative indices count from the end); returns the first out-of-range index.
fn add_offsets(idx: &Tensor, size: usize, stride: isize, offs: &mut [isize]) -> Option<BadIndex> {
    let plan = Plan::new(idx.shape(), [idx.strides()]);
    let inner = plan.inner;
    if inner == 0 || offs.is_empty() {
        return None;
    }
    let per = rows_per_task(&plan, offs.len());
    let n = size as i64;
    with_index_dtype!(idx.dtype(), I => {
        let p = SendPtr(idx.data_ptr::<I>());
        offs.par_chunks_mut(per * inner)
            .enumerate()
            .map(|(t, chunk)| {
                let r0 = t * per;
                let r1 = (r0 + per).min(plan.rows());
                let mut bad = None;
                let mut pos = 0usize;
                plan.run_rows(r0, r1, &mut |[o], len, [s]| {
                    for i in 0..len {
                        // SAFETY: offsets come from the index tensor's layout.
                        let v = unsafe { *p.get().offset(o + i as isize * s) }.get();
                        let w = if v < 0 { v + n } else { v };
                        if w < 0 || w >= n {
                            if bad.is_none() {
                                bad = Some((r0 * inner + pos + i, v));
                            }
                        } else {
                            chunk[pos + i] += w as isize * stride;
                        }
                    }
                    pos += len;
                });
                bad
            })
            .reduce(|| None, first_bad)
    })
}

/// Validate the indices of `a` against `src` and return the element offset
/// (relative to `src`'s origin) selected by each position of the index shape.
fn index_offsets(a: &IndexArgs, src: &Tensor, nb: usize) -> Result<Vec<isize>> {
    let mut offs = vec![0isize; nb];
    for (j, idx) in a.indices.iter().enumerate() {
        let d = a.dims[j];
        let size = src.shape()[d];
        if let Some((_, v)) = add_offsets(idx, size, src.strides()[d], &mut offs) {
            return Err(Error::index(
                a.op,
                format!(
                    "index {v} is out of bounds for dimension {} with size {size}",
                    a.dim_names[j]
                ),
            ));
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
                (0..nb.div_ceil(per))
                    .into_par_iter()
                    .for_each(|t| run(t * per, ((t + 1) * per).min(nb)));
            } else {
                run(0, nb);
            }
            return Ok(());
        }
        let copy_rows = |b: usize, r0: usize, r1: usize| {
            let (so, oo) = (offs[b], lead.at(b));
            plan.run_rows(r0, r1, &mut |[s, o], len, [ss, os]| {
                for i in 0..len as isize {
                    // SAFETY: validated offsets inside src; out positions are disjoint per (b, row).
                    unsafe {
                        *op.get().offset(oo + o + i * os) = *sp.get().offset(so + s + i * ss);
                    }
                }
            });
        };
        let rows = plan.rows();
        if !big {
            (0..nb).for_each(|b| copy_rows(b, 0, rows));
        } else if nb >= threads() * 4 || rows < threads() * 2 {
            let per = nb.div_ceil(threads() * 8).max(1);
            (0..nb.div_ceil(per)).into_par_iter().for_each(|t| {
                for b in t * per..((t + 1) * per).min(nb) {
                    copy_rows(b, 0, rows);
                }
            });
        } else {
            let per = rows.div_ceil(threads() * 4).max(1);
            for b in 0..nb {
                (0..rows.div_ceil(per)).into_par_iter().for_each(|t| {
                    copy_rows(b, t * per, ((t + 1) * per).min(rows));
                });
            }
        }
    });
    Ok(())
}

/// `dst[offs[b] + r] = values[b, r]` (or `+=` when `accumulate`); `values` has shape `B ++ R`.
///
/// Repeated positions: writes happen in row-major order of `B`, so the last
/// one wins (or all are summed). Work is split over the rest dims only, so a
/// destination element is never touched by two tasks.
pub fn index_put(a: &IndexArgs, dst: &Tensor, values: &Tensor, accumulate: bool) -> Result<()> {
    let k = values.ndim() - (dst.ndim() - a.dims.len());
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
                    for i in 0..len as isize {
                        // SAFETY: validated offsets; each task owns its rows of the rest dims.
                        unsafe {
                            let x = *vp.get().offset(v0 + v + i * vs);
                            let y = dp.get().offset(d0 + d + i * ds);
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
            (0..rows.div_ceil(per))
                .into_par_iter()
                .for_each(|t| put_rows(t * per, ((t + 1) * per).min(rows)));
        }
    });
    Ok(())
}

/// Check `0 <= index < size` everywhere (no wrapping, as torch's gather/scatter).
fn check_range(op: &'static str, index: &Tensor, dim: usize, size: usize) -> Result<()> {
    let plan = Plan::new(index.shape(), [index.strides()]);
    let rows = plan.rows();
    if plan.inner == 0 {
        return Ok(());
    }
    let per = rows_per_task(&plan, index.numel());
    let n = size as i64;
    let bad = with_index_dtype!(index.dtype(), I => {
        let p = SendPtr(index.data_ptr::<I>());
        (0..rows.div_ceil(per))
            .into_par_iter()
            .map(|t| {
                let mut bad: Option<i64> = None;
                plan.run_rows(t * per, ((t + 1) * per).min(rows), &mut |[o], len, [s]| {
                    if bad.is_some() {
                        return;
                    }
                    for i in 0..len as isize {
                        // SAFETY: offsets from the index tensor's layout.
                        let v = unsafe { *p.get().offset(o + i * s) }.get();
                        if v < 0 || v >= n {
                            bad = Some(v);
                            return;
                        }
                    }
                });
                bad.map(|v| (t, v))
            })
            .reduce(|| None, first_bad)
    });
    if let Some((_, v)) = bad {
        return Err(Error::index(
            op,
            format!("index {v} is out of bounds for dimension {dim} with size {size}"),
        ));
    }
    Ok(())
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
                for i in 0..n as isize {
                    // SAFETY: index values validated; out rows disjoint per task.
                    unsafe {
                        let j = (*ip.get().offset(io + i * is)).get() as isize;
                        *op.get().offset(oo + i * os) = *sp.get().offset(so + i * ss + j * sd);
                    }
                }
            },
        );
    }));
    Ok(())
}

/// `dst[p with p[dim] = index[p]] (+)= src[p]` over `index`'s shape.
///
/// Positions of `index` that differ only along `dim` are handled in order by
/// one task (they are the only ones that can hit the same destination).
pub fn scatter(
    op_name: &'static str,
    dst: &Tensor,
    dim: usize,
    index: &Tensor,
    src: &Tensor,
    accumulate: bool,
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
    with_dtype!(dst.dtype(), T => with_index_dtype!(index.dtype(), I => {
        let dp = SendPtr(dst.data_ptr::<T>());
        let ip = SendPtr(index.data_ptr::<I>());
        let sp = SendPtr(src.data_ptr::<T>());
        par_for_each_row(
            &lshape,
            [&ist, &sst, &dst_st],
            grain,
            |[io, so, do_], n, [is, ss, ds]| {
                for i in 0..n as isize {
                    for k in 0..klen {
                        // SAFETY: validated indices; a task owns whole lines along `dim`.
                        unsafe {
                            let j = (*ip.get().offset(io + i * is + k * isd)).get() as isize;
                            let x = *sp.get().offset(so + i * ss + k * ssd);
                            let y = dp.get().offset(do_ + i * ds + j * dsd);
                            *y = if accumulate { Accumulate::acc(*y, x) } else { x };
                        }
                    }
                }
            },
        );
    }));
    Ok(())
}

/// Per-task element ranges for the nonzero kernels: (plan, rows per task).
fn nz_plan(x: &Tensor) -> (Plan<1>, usize) {
    let plan = Plan::new(x.shape(), [x.strides()]);
    let per = rows_per_task(&plan, x.numel());
    (plan, per)
}

fn nz_counts(x: &Tensor, plan: &Plan<1>, per: usize) -> Vec<usize> {
    let rows = plan.rows();
    let tasks = if plan.inner == 0 {
        0
    } else {
        rows.div_ceil(per)
    };
    with_dtype!(x.dtype(), T => {
        let p = SendPtr(x.data_ptr::<T>());
        let zero = T::zero();
        (0..tasks)
            .into_par_iter()
            .map(|t| {
                let mut c = 0usize;
                plan.run_rows(t * per, ((t + 1) * per).min(rows), &mut |[o], n, [s]| {
                    for i in 0..n as isize {
                        // SAFETY: offsets from the layout.
                        c += (unsafe { *p.get().offset(o + i * s) } != zero) as usize;
                    }
                });
                c
            })
            .collect()
    })
}

/// Number of non-zero elements of `x`.
pub fn nonzero_count(x: &Tensor) -> Result<usize> {
    let (plan, per) = nz_plan(x);
    Ok(nz_counts(x, &plan, per).iter().sum())
}

/// Write the coordinates of the non-zero elements of `x`, in row-major order,
/// into the contiguous int64 tensor `out` of shape `[count, ndim]`.
pub fn nonzero_fill(x: &Tensor, out: &Tensor) -> Result<()> {
    let (plan, per) = nz_plan(x);
    let counts = nz_counts(x, &plan, per);
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
    let rows = plan.rows();
    let inner = plan.inner;
    let shape = x.shape().to_vec();
    with_dtype!(x.dtype(), T => {
        let p = SendPtr(x.data_ptr::<T>());
        let q = SendPtr(out.data_ptr::<i64>());
        let zero = T::zero();
        (0..counts.len()).into_par_iter().for_each(|t| {
            if counts[t] == 0 {
                return;
            }
            // Multi-index (in x's own dims) of the task's first element.
            let mut lin = t * per * inner;
            let mut idx = vec![0i64; nd];
            for d in (0..nd).rev() {
                idx[d] = (lin % shape[d]) as i64;
                lin /= shape[d];
            }
            let mut w = starts[t] * nd;
            // The last coordinate moves every element; the others only on wrap-around.
            let last = shape[nd - 1] as i64;
            let mut j = idx[nd - 1];
            plan.run_rows(t * per, ((t + 1) * per).min(rows), &mut |[o], n, [s]| {
                for i in 0..n as isize {
                    // SAFETY: offsets from the layout; each task writes its own output rows.
                    unsafe {
                        if *p.get().offset(o + i * s) != zero {
                            let row = q.get().add(w);
                            for (d, &v) in idx[..nd - 1].iter().enumerate() {
                                *row.add(d) = v;
                            }
                            *row.add(nd - 1) = j;
                            w += nd;
                        }
                    }
                    j += 1;
                    if j == last {
                        j = 0;
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
            let i = (r % m) as i64;
            for j in 0..n {
                let dj = j as i64 - i;
                let keep = if upper { dj >= diagonal } else { dj <= diagonal };
                // SAFETY: offsets from the layouts; each row is written by one task.
                unsafe {
                    let v = if keep { *xp.get().offset(xo + j as isize * xc) } else { zero };
                    *op.get().offset(oo + j as isize * oc) = v;
                }
            }
        };
        if rows * n < 2 * PAR_MIN || threads() == 1 {
            (0..rows).for_each(row_job);
        } else {
            (0..rows).into_par_iter().with_min_len((PAR_MIN / n).max(1)).for_each(row_job);
        }
    });
    Ok(())
}
