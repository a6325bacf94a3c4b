//! CPU arg reductions (argmax, argmin along one dim or over all elements),
//! NaN-propagating, first index on ties.

use half::{bf16, f16};

use super::reduce::*;
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::kernel::ArgOp;
use crate::multiversion;
use crate::tensor::layout::contiguous_strides;
use crate::tensor::{DType, Element, Layout, Tensor};

pub fn arg_reduce(
    op: ArgOp,
    x: &Tensor,
    dim: usize,
    values: Option<&Tensor>,
    indices: &Tensor,
) -> Result<()> {
    if let Some(v) = values {
        if v.dtype() != x.dtype() {
            return Err(Error::runtime(
                "max",
                format!(
                    "values dtype {} differs from input {}",
                    v.dtype(),
                    x.dtype()
                ),
            ));
        }
    }
    let max = op == ArgOp::Max;
    macro_rules! float {
        ($T:ty, $C:ty) => {
            if max {
                arg_typed::<$T, _>(MaxF::<$C>::new(), max, x, dim, values, indices)
            } else {
                arg_typed::<$T, _>(MinF::<$C>::new(), max, x, dim, values, indices)
            }
        };
    }
    macro_rules! int {
        ($T:ty) => {
            if max {
                arg_typed::<$T, _>(MaxI, max, x, dim, values, indices)
            } else {
                arg_typed::<$T, _>(MinI, max, x, dim, values, indices)
            }
        };
    }
    match x.dtype() {
        DType::F32 => float!(f32, f32),
        DType::F16 => float!(f16, f32),
        DType::BF16 => float!(bf16, f32),
        DType::F64 => float!(f64, f64),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        DType::Bool => int!(u8),
        DType::U8 => int!(crate::tensor::U8),
        DType::I8 => int!(i8),
        DType::I16 => int!(i16),
    }
    Ok(())
}

/// Compute types compared by the arg-reductions.
pub trait Lane: Copy + Send + Sync + Default + PartialOrd + 'static {
    fn isnan(self) -> bool;
}
impl Lane for f32 {
    #[inline(always)]
    fn isnan(self) -> bool {
        self.is_nan()
    }
}
impl Lane for f64 {
    #[inline(always)]
    fn isnan(self) -> bool {
        self.is_nan()
    }
}
impl Lane for i64 {
    #[inline(always)]
    fn isnan(self) -> bool {
        false
    }
}

/// Whether `v` beats the current best `b` (NaN beats everything but NaN; ties keep `b`).
#[inline(always)]
fn better<C: Lane>(max: bool, v: C, b: C) -> bool {
    let nan = v.isnan() & !b.isnan();
    if max {
        (v > b) | nan
    } else {
        (v < b) | nan
    }
}

multiversion! {
    /// First position holding `m` (NaN matches NaN).
    fn find_same<C: Lane>(xs: &[C], m: C) -> Option<usize> {
        let mnan = m.isnan();
        let same = |v: C| (v == m) | (v.isnan() & mnan);
        for (ci, c) in xs.chunks(64).enumerate() {
            if c.iter().fold(false, |h, &v| h | same(v)) {
                return c.iter().position(|&v| same(v)).map(|i| ci * 64 + i);
            }
        }
        None
    }
}

multiversion! {
    /// Column update: where `xs[j]` beats `best[j]`, take it with index `i`.
    fn arg_cols<C: Lane>(best: &mut [C], idx: &mut [i64], xs: &[C], i: i64, max: bool) {
        if max {
            for ((b, k), &v) in best.iter_mut().zip(idx.iter_mut()).zip(xs) {
                let t = better(true, v, *b);
                *b = if t { v } else { *b };
                *k = if t { i } else { *k };
            }
        } else {
            for ((b, k), &v) in best.iter_mut().zip(idx.iter_mut()).zip(xs) {
                let t = better(false, v, *b);
                *b = if t { v } else { *b };
                *k = if t { i } else { *k };
            }
        }
    }
}

/// The extreme value of `n` contiguous elements at `p` and its first position:
/// a vectorised fold finds the value, a vectorised scan its first occurrence.
///
/// # Safety
/// `p` valid for `n >= 1` reads.
unsafe fn arg_run<T, R>(r: R, p: *const T, n: usize, buf: &mut Vec<R::C>) -> (R::C, usize)
where
    T: Load<R::C>,
    R: Red<W = <R as Red>::C>,
    R::C: Lane,
{
    let m = fold_run(r, p, n, R::C::default(), buf);
    let mut base = 0;
    while base < n {
        let len = BLOCK.min(n - base);
        let xs = load_run(p.add(base), len, buf);
        if let Some(i) = find_same(xs, m) {
            return (m, base + i);
        }
        base += len;
    }
    (m, 0)
}

fn arg_typed<T, R>(
    r: R,
    max: bool,
    x: &Tensor,
    dim: usize,
    values: Option<&Tensor>,
    indices: &Tensor,
) where
    T: Load<R::C> + Element,
    R: Red<W = <R as Red>::C>,
    R::C: Lane,
{
    let n = x.shape()[dim];
    let sd = x.strides()[dim];
    let mut ks: Vec<usize> = x.shape().into();
    let mut kst: Vec<isize> = x.strides().into();
    ks.remove(dim);
    kst.remove(dim);
    let k: usize = ks.iter().product();
    if k == 0 || n == 0 {
        return;
    }
    let ko = contiguous_strides(&ks);
    let (kshape, mut kstrs) = Layout::coalesce(&ks, &[&kst, &ko]);
    let kstr = kstrs.swap_remove(0);
    let xp = SendPtr(x.data_ptr::<T>());
    let ip = SendPtr(indices.data_ptr::<i64>());
    let vp = values.map(|v| SendPtr(v.data_ptr::<T>()));
    let store = |kk: usize, koff: isize, i: usize| {
        // SAFETY: kk < k; each output is written by one task; i < n.
        unsafe {
            *ip.get().add(kk) = i as i64;
            if let Some(vp) = vp {
                *vp.get().add(kk) = *xp.get().offset(koff + i as isize * sd);
            }
        }
    };
    let nthreads = threads();
    let serial = k * n < PAR_MIN || nthreads == 1;
    let tasks = if serial { 1 } else { nthreads * 8 };
    if sd == 1 || n == 1 {
        // Row path: each output scans a contiguous run.
        let rows = |k0: usize, k1: usize| {
            let mut buf = Vec::new();
            let mut kk = k0;
            walk(&kshape, &kstr, k0, k1 - k0, |koff| {
                // SAFETY: a contiguous run of n elements.
                let (_, i) = unsafe { arg_run(r, xp.get().offset(koff), n, &mut buf) };
                store(kk, koff, i);
                kk += 1;
            });
        };
        if serial || k >= 2 * nthreads || n < 2 * CHUNK {
            par_ranges(k, tasks, rows);
        } else {
            // Few long rows: fold fixed segments in parallel, combine in order.
            let nseg = n.div_ceil(CHUNK);
            let mut koffs = Vec::with_capacity(k);
            walk(&kshape, &kstr, 0, k, |o| koffs.push(o));
            let parts: Vec<(R::C, usize)> = crate::par::map_init(k * nseg, Vec::new, |buf, gi| {
                let (kk, sg) = (gi / nseg, gi % nseg);
                let a = sg * CHUNK;
                let len = CHUNK.min(n - a);
                // SAFETY: inside row kk.
                let (m, i) =
                    unsafe { arg_run(r, xp.get().offset(koffs[kk] + a as isize), len, buf) };
                (m, a + i)
            });
            for kk in 0..k {
                let mut best = parts[kk * nseg];
                for &p in &parts[kk * nseg + 1..(kk + 1) * nseg] {
                    if better(max, p.0, best.0) {
                        best = p;
                    }
                }
                store(kk, koffs[kk], best.1);
            }
        }
    } else if kstr.last() == Some(&1) {
        // Column path: the innermost kept dim is contiguous; keep a vector of bests.
        let nk = kshape.len();
        let ki = kshape[nk - 1];
        let (ko_shape, ko_str) = (&kshape[..nk - 1], &kstr[..nk - 1]);
        let ko_count: usize = ko_shape.iter().product();
        let nj = ki.div_ceil(AJ);
        par_ranges(ko_count * nj, tasks, |t0, t1| {
            let mut buf = Vec::new();
            let mut best: Vec<R::C> = Vec::with_capacity(AJ);
            let mut idx: Vec<i64> = vec![0; AJ];
            for t in t0..t1 {
                let (o, jc) = (t / nj, t % nj);
                let j0 = jc * AJ;
                let len = AJ.min(ki - j0);
                let koff = offset_of(ko_shape, ko_str, o) + j0 as isize;
                // SAFETY: rows of `len` contiguous elements inside the input.
                unsafe {
                    best.clear();
                    best.extend_from_slice(load_run(xp.get().offset(koff), len, &mut buf));
                    let idx = &mut idx[..len];
                    idx.iter_mut().for_each(|v| *v = 0);
                    for i in 1..n {
                        let xs = load_run(xp.get().offset(koff + i as isize * sd), len, &mut buf);
                        arg_cols(&mut best, idx, xs, i as i64, max);
                    }
                    for (j, &i) in idx.iter().enumerate() {
                        store(o * ki + j0 + j, koff + j as isize, i as usize);
                    }
                }
            }
        });
    } else {
        // Anything else: a strided scan per output.
        par_ranges(k, tasks, |k0, k1| {
            let mut kk = k0;
            walk(&kshape, &kstr, k0, k1 - k0, |koff| {
                // SAFETY: offsets from the layout.
                let (mut best, mut bi) = (unsafe { *xp.get().offset(koff) }.lift(), 0);
                for i in 1..n {
                    let v = unsafe { *xp.get().offset(koff + i as isize * sd) }.lift();
                    if better(max, v, best) {
                        best = v;
                        bi = i;
                    }
                }
                store(kk, koff, bi);
                kk += 1;
            });
        });
    }
}
