//! CPU reduction kernels: `reduce` (sum, mean, prod, max, min, all, any, var,
//! logsumexp), and the folds, loaders and geometry the arg-reductions
//! (`arg_reduce.rs`), softmax (`softmax.rs`), norms (`norm.rs`) and scans
//! (`scan.rs`) share.
//!
//! # Plan
//!
//! A reduction splits the input's dims into *kept* dims (the output, walked
//! in order) and *reduced* dims (folded into one value per output element).
//! Reduced dims are made non-negative (a flip changes nothing for a
//! commutative fold), sorted by stride and coalesced; kept dims are coalesced
//! together with the contiguous output. Then one of three paths runs:
//!
//! * **row**: the innermost reduced run has stride 1 (reducing the last
//!   dim(s) of a contiguous tensor). Each output element folds contiguous
//!   runs with a multiversioned block kernel holding [`LANES`] independent
//!   accumulators; blocks of [`BLOCK`] elements are combined in a wider type
//!   (f64 for float sums), so float32 sums stay accurate over millions of
//!   elements. Output elements are split over the thread pool; when there
//!   are too few of them, each reduction is cut into fixed-size units folded
//!   in parallel and combined in order (deterministic for a thread count).
//! * **column**: the innermost kept dim has stride 1 (reducing leading dims,
//!   e.g. the batch dim of an `(N, C)` tensor): input rows are accumulated
//!   into a vector of accumulators, vectorised over the kept dim.
//! * **general**: anything else is first copied to a contiguous buffer laid
//!   out as (kept dims, reduced dims), which is then a row reduction.
//!
//! Half-precision inputs are converted block-wise and accumulate in f32,
//! float64 in f64, integers and bool in i64.

use std::marker::PhantomData;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::elementwise::cast_copy;
use super::math::{lane_fold, Real};
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::kernel::ReduceOp;
use crate::multiversion;
use crate::tensor::layout::contiguous_strides;
use crate::tensor::{DType, Element, Layout, Shape, Strides, Tensor};

/// Independent accumulators per block (4 AVX2 / 2 AVX-512 vectors of f32).
const LANES: usize = 32;
/// Elements folded in the lane type before being combined in the wide type.
pub(super) const BLOCK: usize = 8192;
/// Runs shorter than this are folded with a scalar loop.
const SCALAR_MAX: usize = 64;
/// Contiguous runs at least this long align their blocks to 64 bytes.
const ALIGN_MIN: usize = 4096;
/// Work unit (elements) when one reduction is split over threads.
pub(super) const CHUNK: usize = 1 << 15;
/// Kept-dim chunk of the column path (whole rows of up to 4 KiB of f32 stream best).
const JC: usize = 1024;
/// Reduced rows folded in the lane type by the column path before widening.
const COL_FLUSH: usize = 64;
/// Below this many input elements a reduction runs on the calling thread.
pub(super) const PAR_MIN: usize = 1 << 15;

// ---------------------------------------------------------------------------
// Loading inputs into the compute type
// ---------------------------------------------------------------------------

/// An input element type readable as the compute (lane) type `C`.
pub trait Load<C>: Copy + Send + Sync + 'static {
    /// Convert `src` into `dst` (same length).
    fn load(src: &[Self], dst: &mut [C]);
    /// Convert one element.
    fn lift(self) -> C;
    /// `src` itself when the input already has the compute type.
    #[inline(always)]
    fn native(_src: &[Self]) -> Option<&[C]> {
        None
    }
}

macro_rules! load_native {
    ($t:ty) => {
        impl Load<$t> for $t {
            #[inline(always)]
            fn load(src: &[$t], dst: &mut [$t]) {
                dst.copy_from_slice(src);
            }
            #[inline(always)]
            fn lift(self) -> $t {
                self
            }
            #[inline(always)]
            fn native(src: &[$t]) -> Option<&[$t]> {
                Some(src)
            }
        }
    };
}
load_native!(f32);
load_native!(f64);
load_native!(i64);

impl Load<f32> for f16 {
    #[inline]
    fn load(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    #[inline(always)]
    fn lift(self) -> f32 {
        self.to_f32()
    }
}

#[inline(always)]
fn bf16_to_f32(v: bf16) -> f32 {
    f32::from_bits((v.to_bits() as u32) << 16)
}

impl Load<f32> for bf16 {
    #[inline]
    fn load(src: &[bf16], dst: &mut [f32]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = bf16_to_f32(s);
        }
    }
    #[inline(always)]
    fn lift(self) -> f32 {
        bf16_to_f32(self)
    }
}

macro_rules! load_int {
    ($t:ty) => {
        impl Load<i64> for $t {
            #[inline]
            fn load(src: &[$t], dst: &mut [i64]) {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = s as i64;
                }
            }
            #[inline(always)]
            fn lift(self) -> i64 {
                self as i64
            }
        }
    };
}
load_int!(i32);
load_int!(u8);
load_int!(i8);
load_int!(i16);

impl Load<i64> for crate::tensor::U8 {
    #[inline]
    fn load(src: &[Self], dst: &mut [i64]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s.0 as i64;
        }
    }
    #[inline(always)]
    fn lift(self) -> i64 {
        self.0 as i64
    }
}

/// `n` contiguous elements at `p` as the compute type (converted into `buf` if needed).
///
/// # Safety
/// `p` valid for `n` reads, not written while the slice lives.
#[inline]
pub(super) unsafe fn load_run<T: Load<C>, C: Copy + Default>(
    p: *const T,
    n: usize,
    buf: &mut Vec<C>,
) -> &[C] {
    let xs = std::slice::from_raw_parts(p, n);
    match T::native(xs) {
        Some(c) => c,
        None => {
            buf.resize(n, C::default());
            T::load(xs, buf);
            buf
        }
    }
}

/// Columns handled together by the column arg-reduction and scans.
pub(super) const AJ: usize = 1024;

// ---------------------------------------------------------------------------
// Folds
// ---------------------------------------------------------------------------

/// A commutative fold: lanes of type `C` combined into a wide type `W`.
///
/// `step(acc, x, shift)` folds one element (the shift is a per-output value
/// used by the two-pass reductions: the mean for `var`, the max for
/// `logsumexp`; others ignore it).
pub trait Red: Copy + Send + Sync {
    type C: Copy + Send + Sync + Default + 'static;
    type W: Copy + Send + Sync + 'static;
    fn id(self) -> Self::C;
    fn wid(self) -> Self::W;
    fn step(self, a: Self::C, x: Self::C, s: Self::C) -> Self::C;
    fn merge(self, a: Self::C, b: Self::C) -> Self::C;
    fn widen(self, a: Self::C) -> Self::W;
    fn wmerge(self, a: Self::W, b: Self::W) -> Self::W;
}

macro_rules! red_float {
    ($(#[$doc:meta])* $name:ident, W = $W:ty, id = $id:expr, wid = $wid:expr,
     step = |$a:ident, $x:ident, $s:ident| $step:expr,
     merge = |$p:ident, $q:ident| $merge:expr,
     widen = |$u:ident| $widen:expr,
     wmerge = |$v:ident, $w:ident| $wmerge:expr) => {
        $(#[$doc])*
        pub struct $name<F>(PhantomData<fn() -> F>);
        impl<F> Clone for $name<F> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<F> Copy for $name<F> {}
        impl<F> $name<F> {
            pub const fn new() -> Self {
                $name(PhantomData)
            }
        }
        impl<F> Default for $name<F> {
            fn default() -> Self {
                Self::new()
            }
        }
        impl<F: Real + Element> Red for $name<F> {
            type C = F;
            type W = $W;
            #[inline(always)]
            fn id(self) -> F {
                $id
            }
            #[inline(always)]
            fn wid(self) -> $W {
                $wid
            }
            #[inline(always)]
            #[allow(unused_variables)]
            fn step(self, $a: F, $x: F, $s: F) -> F {
                $step
            }
            #[inline(always)]
            fn merge(self, $p: F, $q: F) -> F {
                $merge
            }
            #[inline(always)]
            fn widen(self, $u: F) -> $W {
                $widen
            }
            #[inline(always)]
            fn wmerge(self, $v: $W, $w: $W) -> $W {
                $wmerge
            }
        }
    };
}

#[inline(always)]
pub(super) fn max_nan<F: Real>(a: F, x: F) -> F {
    if x > a || x.is_nan() {
        x
    } else {
        a
    }
}
#[inline(always)]
fn min_nan<F: Real>(a: F, x: F) -> F {
    if x < a || x.is_nan() {
        x
    } else {
        a
    }
}

red_float!(
    /// Sum, blocks combined in f64.
    SumF, W = f64, id = F::ZERO, wid = 0.0,
    step = |a, x, s| a + x,
    merge = |p, q| p + q,
    widen = |u| u.to_f64(),
    wmerge = |v, w| v + w
);
red_float!(
    /// Product.
    ProdF, W = F, id = F::ONE, wid = F::ONE,
    step = |a, x, s| a * x,
    merge = |p, q| p * q,
    widen = |u| u,
    wmerge = |v, w| v * w
);
red_float!(
    /// NaN-propagating maximum.
    MaxF, W = F, id = F::c(f64::NEG_INFINITY), wid = F::c(f64::NEG_INFINITY),
    step = |a, x, s| max_nan(a, x),
    merge = |p, q| max_nan(p, q),
    widen = |u| u,
    wmerge = |v, w| max_nan(v, w)
);
red_float!(
    /// NaN-propagating minimum.
    MinF, W = F, id = F::c(f64::INFINITY), wid = F::c(f64::INFINITY),
    step = |a, x, s| min_nan(a, x),
    merge = |p, q| min_nan(p, q),
    widen = |u| u,
    wmerge = |v, w| min_nan(v, w)
);
red_float!(
    /// Sum of squared deviations from the shift (the mean).
    SqDevF, W = f64, id = F::ZERO, wid = 0.0,
    step = |a, x, s| {
        let d = x - s;
        a + d * d
    },
    merge = |p, q| p + q,
    widen = |u| u.to_f64(),
    wmerge = |v, w| v + w
);
red_float!(
    /// Sum of `exp(x - shift)` (the shift is the max).
    SumExpF, W = f64, id = F::ZERO, wid = 0.0,
    step = |a, x, s| a + (x - s).exp(),
    merge = |p, q| p + q,
    widen = |u| u.to_f64(),
    wmerge = |v, w| v + w
);

macro_rules! red_int {
    ($(#[$doc:meta])* $name:ident, id = $id:expr,
     step = |$a:ident, $x:ident| $step:expr,
     merge = |$p:ident, $q:ident| $merge:expr) => {
        $(#[$doc])*
        #[derive(Copy, Clone)]
        pub struct $name;
        impl Red for $name {
            type C = i64;
            type W = i64;
            #[inline(always)]
            fn id(self) -> i64 {
                $id
            }
            #[inline(always)]
            fn wid(self) -> i64 {
                $id
            }
            #[inline(always)]
            fn step(self, $a: i64, $x: i64, _s: i64) -> i64 {
                $step
            }
            #[inline(always)]
            fn merge(self, $p: i64, $q: i64) -> i64 {
                $merge
            }
            #[inline(always)]
            fn widen(self, u: i64) -> i64 {
                u
            }
            #[inline(always)]
            fn wmerge(self, $p: i64, $q: i64) -> i64 {
                $merge
            }
        }
    };
}

red_int!(
    /// Wrapping integer sum.
    SumI, id = 0, step = |a, x| a.wrapping_add(x), merge = |p, q| p.wrapping_add(q)
);
red_int!(
    /// Wrapping integer product.
    ProdI, id = 1, step = |a, x| a.wrapping_mul(x), merge = |p, q| p.wrapping_mul(q)
);
red_int!(
    /// Integer maximum.
    MaxI, id = i64::MIN, step = |a, x| a.max(x), merge = |p, q| p.max(q)
);
red_int!(
    /// Integer minimum.
    MinI, id = i64::MAX, step = |a, x| a.min(x), merge = |p, q| p.min(q)
);
red_int!(
    /// Logical and (result 0 or 1).
    AllI, id = 1, step = |a, x| a & ((x != 0) as i64), merge = |p, q| p & q
);
red_int!(
    /// Logical or (result 0 or 1).
    AnyI, id = 0, step = |a, x| a | ((x != 0) as i64), merge = |p, q| p | q
);

multiversion! {
    /// Fold a contiguous block with [`LANES`] independent accumulators, then
    /// combine them pairwise.
    fn fold_block<R: Red>(r: R, xs: &[R::C], s: R::C) -> R::C {
        let mut acc = [r.id(); LANES];
        let mut it = xs.chunks_exact(LANES);
        for c in &mut it {
            let c: &[R::C; LANES] = c.try_into().unwrap();
            for (a, &x) in acc.iter_mut().zip(c) {
                *a = r.step(*a, x, s);
            }
        }
        for (a, &x) in acc.iter_mut().zip(it.remainder()) {
            *a = r.step(*a, x, s);
        }
        lane_fold(acc, |a, b| r.merge(a, b))
    }
}

multiversion! {
    /// `acc[j] = step(acc[j], xs[j], s[j])`, vectorised over `j`.
    fn fold_cols<R: Red>(r: R, acc: &mut [R::C], xs: &[R::C], s: &[R::C]) {
        for ((a, &x), &sv) in acc.iter_mut().zip(xs).zip(s) {
            *a = r.step(*a, x, sv);
        }
    }
}

/// Fold `n` contiguous elements at `p` into the wide type.
///
/// # Safety
/// `p` must be valid for `n` reads.
#[inline]
pub(super) unsafe fn fold_run<T: Load<R::C>, R: Red>(
    r: R,
    p: *const T,
    n: usize,
    s: R::C,
    buf: &mut Vec<R::C>,
) -> R::W {
    let xs = std::slice::from_raw_parts(p, n);
    if n < SCALAR_MAX {
        let mut a = r.id();
        for &v in xs {
            a = r.step(a, v.lift(), s);
        }
        return r.widen(a);
    }
    let mut w = r.wid();
    // Long native runs start their blocks on a 64-byte boundary: a vector
    // load that straddles two cache lines costs a few percent of a streaming
    // reduction's bandwidth (about 7% with AVX-512 on NumPy's 16-byte-aligned
    // buffers). The few leading elements are folded on their own, so the
    // result depends on the address's alignment, never on anything else.
    let mut xs = xs;
    let esize = std::mem::size_of::<T>();
    if n >= ALIGN_MIN && T::native(&xs[..0]).is_some() && (p as usize).is_multiple_of(esize) {
        let peel = ((64 - (p as usize) % 64) % 64 / esize).min(n);
        if peel > 0 {
            let mut a = r.id();
            for &v in &xs[..peel] {
                a = r.step(a, v.lift(), s);
            }
            w = r.wmerge(w, r.widen(a));
            xs = &xs[peel..];
        }
    }
    for chunk in xs.chunks(BLOCK) {
        let c: &[R::C] = match T::native(chunk) {
            Some(c) => c,
            None => {
                buf.resize(chunk.len(), r.id());
                T::load(chunk, buf);
                buf
            }
        };
        w = r.wmerge(w, r.widen(fold_block(r, c, s)));
    }
    w
}

// ---------------------------------------------------------------------------
// Geometry
// ---------------------------------------------------------------------------

pub(super) use crate::tensor::layout::walk_offsets as walk;

/// Offset of linear position `i` of `(shape, strides)`.
#[inline]
pub(super) fn offset_of(shape: &[usize], strides: &[isize], i: usize) -> isize {
    let mut o = 0;
    walk(shape, strides, i, 1, |off| o = off);
    o
}

/// Like [`walk`], but hands over runs along the innermost dim:
/// `f(offset of the run's first element, run length)`.
fn walk_runs(
    shape: &[usize],
    strides: &[isize],
    start: usize,
    count: usize,
    mut f: impl FnMut(isize, usize),
) {
    if count == 0 {
        return;
    }
    let nd = shape.len();
    if nd == 0 {
        f(0, 1);
        return;
    }
    let (inner, s) = (shape[nd - 1], strides[nd - 1]);
    let end = start + count;
    let (first, last) = (start / inner, (end - 1) / inner);
    let mut row = first;
    walk(
        &shape[..nd - 1],
        &strides[..nd - 1],
        first,
        last - first + 1,
        |o| {
            let a = if row == first { start % inner } else { 0 };
            let b = if row == last {
                (end - 1) % inner + 1
            } else {
                inner
            };
            f(o + a as isize * s, b - a);
            row += 1;
        },
    );
}

/// How a reduction walks its input.
enum Path {
    /// Contiguous runs of `rin` elements, at the offsets of the outer reduced dims.
    Row {
        rin: usize,
        ro_shape: Shape,
        ro_str: Strides,
    },
    /// The innermost kept dim (length `ki`) is contiguous.
    Col,
}

/// The input of a reduction split into kept and reduced dims.
struct Geo {
    /// The tensor read (the input, or a contiguous rearranged copy).
    x: Tensor,
    /// Element offset from `x.data_ptr()` to the first element read.
    base: isize,
    /// Kept dims (coalesced); the output index is the linear index over them.
    kshape: Shape,
    kstr: Strides,
    /// Reduced dims (non-negative strides, sorted, coalesced).
    rshape: Shape,
    rstr: Strides,
    /// Number of output elements.
    k: usize,
    /// Number of elements folded into each output.
    r: usize,
    path: Path,
}

fn coalesce1(shape: &[usize], strides: &[isize]) -> (Shape, Strides) {
    let (s, mut st) = Layout::coalesce(shape, &[strides]);
    (s, st.pop().unwrap())
}

impl Geo {
    fn new(x: &Tensor, mask: &[bool]) -> Result<Geo> {
        let (shape, strides) = (x.shape(), x.strides());
        let mut ks: Vec<usize> = vec![];
        let mut kst: Vec<isize> = vec![];
        let mut rdims: Vec<(usize, isize)> = vec![];
        let mut base = 0isize;
        for d in 0..shape.len() {
            if mask[d] {
                let (n, mut s) = (shape[d], strides[d]);
                if s < 0 && n > 0 {
                    base += (n as isize - 1) * s;
                    s = -s;
                }
                rdims.push((n, s));
            } else {
                ks.push(shape[d]);
                kst.push(strides[d]);
            }
        }
        let k: usize = ks.iter().product();
        let r: usize = rdims.iter().map(|d| d.0).product();
        // Broadcast (stride 0) dims outermost, then by decreasing stride.
        rdims.sort_by_key(|&(_, s)| if s == 0 { (0, 0) } else { (1, -s) });
        let rs: Vec<usize> = rdims.iter().map(|d| d.0).collect();
        let rst: Vec<isize> = rdims.iter().map(|d| d.1).collect();
        let (rshape, rstr) = coalesce1(&rs, &rst);
        let ko = contiguous_strides(&ks);
        let (kshape, mut kstrs) = Layout::coalesce(&ks, &[&kst, &ko]);
        let kstr = kstrs.swap_remove(0);

        let row_ok = rshape.is_empty() || rstr.last() == Some(&1);
        let col_ok = kstr.last() == Some(&1);
        let rin = rshape.last().copied().unwrap_or(1);
        let path = if row_ok && !(col_ok && rin < 16) {
            let nr = rshape.len().saturating_sub(1);
            Path::Row {
                rin,
                ro_shape: rshape[..nr].into(),
                ro_str: rstr[..nr].into(),
            }
        } else if col_ok {
            Path::Col
        } else if k == 0 || r == 0 {
            // Nothing is read; any path will do.
            Path::Row {
                rin: 0,
                ro_shape: Shape::new(),
                ro_str: Strides::new(),
            }
        } else {
            // Rearrange to (kept..., reduced...) contiguous and reduce rows.
            let mut order: Vec<usize> = (0..shape.len()).filter(|&d| !mask[d]).collect();
            order.extend((0..shape.len()).filter(|&d| mask[d]));
            let pshape: Shape = order.iter().map(|&d| shape[d]).collect();
            let pstr: Strides = order.iter().map(|&d| strides[d]).collect();
            let view = x.with_layout(Layout {
                shape: pshape.clone(),
                strides: pstr,
                offset: x.offset(),
            });
            let tmp = Tensor::empty(&pshape, x.dtype(), x.device())?;
            cast_copy(&view, &tmp)?;
            let nk = shape.len() - rdims.len();
            let pmask: Vec<bool> = (0..shape.len()).map(|d| d >= nk).collect();
            return Geo::new(&tmp, &pmask);
        };
        Ok(Geo {
            x: x.clone(),
            base,
            kshape,
            kstr,
            rshape,
            rstr,
            k,
            r,
            path,
        })
    }
}

pub(super) fn threads() -> usize {
    crate::par::split()
}

/// Split `0..n` into about `tasks` contiguous ranges and run them on the pool.
pub(super) fn par_ranges(n: usize, tasks: usize, f: impl Fn(usize, usize) + Sync) {
    let tasks = tasks.clamp(1, n.max(1));
    if tasks == 1 {
        f(0, n);
        return;
    }
    let per = n.div_ceil(tasks);
    crate::par::for_each(tasks, |t| {
        let a = t * per;
        let b = ((t + 1) * per).min(n);
        if a < b {
            f(a, b)
        }
    });
}

/// Run the fold `r` over `g`, writing `fin(w, k)` to `out[k]` for every output `k`.
///
/// `shifts[k]`, when given, is passed to every `step` of output `k`.
fn drive<T, R, O, F>(g: &Geo, r: R, shifts: Option<&[R::C]>, out: *mut O, fin: F)
where
    T: Load<R::C>,
    R: Red,
    O: Copy + Send + Sync,
    F: Fn(R::W, usize) -> O + Sync,
{
    let out = SendPtr(out);
    if g.k == 0 {
        return;
    }
    if g.r == 0 {
        for k in 0..g.k {
            // SAFETY: `out` holds `g.k` elements.
            unsafe { *out.get().add(k) = fin(r.wid(), k) };
        }
        return;
    }
    // SAFETY: `base` points at the lowest element read (see Geo::new).
    let xp = SendPtr(unsafe { g.x.data_ptr::<T>().offset(g.base) });
    let shift = |k: usize| shifts.map_or(R::C::default(), |s| s[k]);
    let work = g.k.saturating_mul(g.r);
    let nthreads = threads();
    let serial = work < PAR_MIN || nthreads == 1;
    match &g.path {
        Path::Row {
            rin,
            ro_shape,
            ro_str,
        } => {
            let rin = *rin;
            let ro_count: usize = ro_shape.iter().product();
            let rows = |k0: usize, k1: usize| {
                let mut buf = Vec::new();
                let mut k = k0;
                walk(&g.kshape, &g.kstr, k0, k1 - k0, |koff| {
                    let s = shift(k);
                    let mut w = r.wid();
                    walk(ro_shape, ro_str, 0, ro_count, |roff| {
                        // SAFETY: offsets come from the input's layout.
                        let v =
                            unsafe { fold_run(r, xp.get().offset(koff + roff), rin, s, &mut buf) };
                        w = r.wmerge(w, v);
                    });
                    // SAFETY: k < g.k; each k is written by one task.
                    unsafe { *out.get().add(k) = fin(w, k) };
                    k += 1;
                });
            };
            if serial {
                rows(0, g.k);
            } else if g.k >= 2 * nthreads {
                par_ranges(g.k, nthreads * 8, rows);
            } else {
                // Few outputs: cut each reduction into fixed-size units.
                let (nseg, rows_per, units) = if rin >= 2 * CHUNK {
                    let nseg = rin.div_ceil(CHUNK);
                    (nseg, 1, ro_count * nseg)
                } else {
                    let rows_per = CHUNK.div_ceil(rin).max(1);
                    (1, rows_per, ro_count.div_ceil(rows_per))
                };
                let koffs: Vec<isize> = {
                    let mut v = Vec::with_capacity(g.k);
                    walk(&g.kshape, &g.kstr, 0, g.k, |o| v.push(o));
                    v
                };
                // Contiguous blocks of units per thread; the partials (one
                // per unit, combined in order) do not depend on the blocks.
                let partial: Vec<R::W> =
                    crate::par::map_init_blocks(g.k * units, nthreads, Vec::new, |buf, gi| {
                        let (k, u) = (gi / units, gi % units);
                        let s = shift(k);
                        let mut w = r.wid();
                        if nseg > 1 {
                            let (ro, seg) = (u / nseg, u % nseg);
                            let roff = offset_of(ro_shape, ro_str, ro);
                            let start = seg * CHUNK;
                            let len = CHUNK.min(rin - start);
                            // SAFETY: inside the run of output k.
                            w = unsafe {
                                fold_run(
                                    r,
                                    xp.get().offset(koffs[k] + roff + start as isize),
                                    len,
                                    s,
                                    buf,
                                )
                            };
                        } else {
                            let a = u * rows_per;
                            let cnt = rows_per.min(ro_count - a);
                            walk(ro_shape, ro_str, a, cnt, |roff| {
                                // SAFETY: as above.
                                let v = unsafe {
                                    fold_run(r, xp.get().offset(koffs[k] + roff), rin, s, buf)
                                };
                                w = r.wmerge(w, v);
                            });
                        }
                        w
                    });
                for k in 0..g.k {
                    let w = partial[k * units..(k + 1) * units]
                        .iter()
                        .fold(r.wid(), |a, &b| r.wmerge(a, b));
                    // SAFETY: k < g.k.
                    unsafe { *out.get().add(k) = fin(w, k) };
                }
            }
        }
        Path::Col => {
            let nk = g.kshape.len();
            let ki = g.kshape[nk - 1];
            let ko_shape = &g.kshape[..nk - 1];
            let ko_str = &g.kstr[..nk - 1];
            let ko_count: usize = ko_shape.iter().product();
            let nj = ki.div_ceil(JC);
            let tasks = ko_count * nj;
            // Fold reduced positions [ra, ra + rn) of column chunk `t` into `wout`.
            let rs_inner = g.rstr.last().copied().unwrap_or(0);
            // Fold reduced positions [ra, ra + rn) of column chunk `t` into `wout`.
            let chunk = |t: usize, ra: usize, rn: usize, wout: &mut [R::W], buf: &mut Vec<R::C>| {
                let (ko, jc) = (t / nj, t % nj);
                let j0 = jc * JC;
                let len = JC.min(ki - j0);
                let koff = offset_of(ko_shape, ko_str, ko) + j0 as isize;
                let obase = ko * ki + j0;
                // Narrow rows that follow each other in memory are folded
                // `pack` at a time, lane l accumulating column l % len.
                // (no more lanes than there are rows: unused lanes would be
                // initialised and flushed for nothing)
                let pack = if rs_inner == len as isize {
                    (JC / len).min(rn).max(1)
                } else {
                    1
                };
                // (sized to the chunk: whole-JC stack arrays cost a large
                // memset per call on small reductions)
                let shp: Vec<R::C> = (0..pack * len)
                    .map(|i| shifts.map_or(R::C::default(), |s| s[obase + i % len]))
                    .collect();
                let mut lacc = vec![r.id(); pack * len];
                let lacc = &mut lacc[..];
                let mut cnt = 0;
                let flush = |lacc: &mut [R::C], wout: &mut [R::W]| {
                    for lanes in lacc.chunks_mut(len) {
                        for (w, v) in wout.iter_mut().zip(lanes) {
                            *w = r.wmerge(*w, r.widen(*v));
                            *v = r.id();
                        }
                    }
                };
                walk_runs(&g.rshape, &g.rstr, ra, rn, |off, run| {
                    let mut i = 0;
                    while i < run {
                        let m = pack.min(run - i);
                        // SAFETY: m rows of `len` contiguous elements (m > 1 only
                        // when the rows are adjacent in memory).
                        let xs = unsafe {
                            load_run(
                                xp.get().offset(koff + off + i as isize * rs_inner),
                                m * len,
                                buf,
                            )
                        };
                        fold_cols(r, &mut lacc[..m * len], xs, &shp[..m * len]);
                        i += m;
                        cnt += 1;
                        if cnt == COL_FLUSH {
                            flush(lacc, wout);
                            cnt = 0;
                        }
                    }
                });
                flush(lacc, wout);
            };
            let write = |t: usize, wout: &[R::W]| {
                let (ko, jc) = (t / nj, t % nj);
                let obase = ko * ki + jc * JC;
                for (j, &w) in wout.iter().enumerate() {
                    // SAFETY: each output index is written by one task.
                    unsafe { *out.get().add(obase + j) = fin(w, obase + j) };
                }
            };
            let len_of = |t: usize| JC.min(ki - (t % nj) * JC);
            let whole = |t0: usize, t1: usize| {
                let mut buf = Vec::new();
                let mut wout = vec![r.wid(); JC.min(ki)];
                for t in t0..t1 {
                    let w = &mut wout[..len_of(t)];
                    w.iter_mut().for_each(|v| *v = r.wid());
                    chunk(t, 0, g.r, w, &mut buf);
                    write(t, w);
                }
            };
            if serial {
                whole(0, tasks);
            } else if tasks >= 2 * nthreads || g.r < 2 * COL_FLUSH {
                par_ranges(tasks, nthreads * 8, whole);
            } else {
                // Few column chunks: also split the reduced positions.
                let rp = CHUNK.div_ceil(ki.min(JC)).max(COL_FLUSH);
                let parts = g.r.div_ceil(rp);
                let partial: Vec<Vec<R::W>> =
                    crate::par::map_init(tasks * parts, Vec::new, |buf, gi| {
                        let (t, p) = (gi / parts, gi % parts);
                        let mut w = vec![r.wid(); len_of(t)];
                        let ra = p * rp;
                        chunk(t, ra, rp.min(g.r - ra), &mut w, buf);
                        w
                    });
                for t in 0..tasks {
                    let mut w = vec![r.wid(); len_of(t)];
                    for p in &partial[t * parts..(t + 1) * parts] {
                        for (a, &b) in w.iter_mut().zip(p) {
                            *a = r.wmerge(*a, b);
                        }
                    }
                    write(t, &w);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// reduce
// ---------------------------------------------------------------------------

pub fn reduce(op: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> Result<()> {
    if out.numel() == 0 {
        return Ok(());
    }
    if small_sum(op, x, mask, out) {
        return Ok(());
    }
    let g = Geo::new(x, mask)?;
    debug_assert_eq!(g.k, out.numel());
    match x.dtype() {
        DType::F32 => float_reduce::<f32, f32>(op, &g, out),
        DType::F16 => float_reduce::<f16, f32>(op, &g, out),
        DType::BF16 => float_reduce::<bf16, f32>(op, &g, out),
        DType::F64 => float_reduce::<f64, f64>(op, &g, out),
        DType::I32 => int_reduce::<i32>(op, &g, out),
        DType::I64 => int_reduce::<i64>(op, &g, out),
        DType::Bool => int_reduce::<u8>(op, &g, out),
        DType::U8 => int_reduce::<crate::tensor::U8>(op, &g, out),
        DType::I8 => int_reduce::<i8>(op, &g, out),
        DType::I16 => int_reduce::<i16>(op, &g, out),
    }
}

/// Inputs up to this many elements take [`small_sum`]'s direct loops.
const SMALL_SUM: usize = 1 << 14;

multiversion! {
    /// `acc[j] += Σ_i x[i, j]` over the rows of `cols` elements of `x`, in f64.
    fn sum_cols<R: Real>(x: &[R], cols: usize, acc: &mut [f64]) {
        for row in x.chunks_exact(cols) {
            for (a, &v) in acc.iter_mut().zip(row) {
                *a += v.as_f64();
            }
        }
    }
}

/// Independent f64 accumulators of [`sum_row`] (four AVX2 vectors).
const ROW_LANES: usize = 16;

multiversion! {
    /// `Σ x` in f64 with [`ROW_LANES`] independent accumulators (a single
    /// running sum is bound by the add latency, several times slower).
    fn sum_row<R: Real>(x: &[R]) -> f64 {
        let mut acc = [0.0f64; ROW_LANES];
        let mut it = x.chunks_exact(ROW_LANES);
        for c in &mut it {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += v.as_f64();
            }
        }
        for (a, &v) in acc.iter_mut().zip(it.remainder()) {
            *a += v.as_f64();
        }
        lane_fold(acc, |a, b| a + b)
    }
}

/// Column sums `acc[j] += Σ_i x[i, j]` of rows of `k` elements; narrow rows
/// are summed several at a time into a wider accumulator row so that the
/// adds stay independent.
fn sum_leading<R: Real>(xs: &[R], k: usize, acc: &mut [f64]) {
    let group = ROW_LANES.div_ceil(k);
    if group > 1 && xs.len() >= 2 * group * k {
        let width = group * k;
        let main = xs.len() / width * width;
        let mut wide = vec![0.0f64; width];
        sum_cols(&xs[..main], width, &mut wide);
        for row in wide.chunks_exact(k) {
            for (a, &v) in acc.iter_mut().zip(row) {
                *a += v;
            }
        }
        sum_cols(&xs[main..], k, acc);
    } else {
        sum_cols(xs, k, acc);
    }
}

/// Sum or mean of a small dense float32/float64 tensor over its leading dims
/// (a column sum: the bias gradient of a linear layer) or its trailing dims,
/// with f64 accumulators; `false` (nothing written) for anything else.
/// Small reductions are dominated by the general planner's bookkeeping.
fn small_sum(op: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> bool {
    let n = x.numel();
    if !matches!(op, ReduceOp::Sum | ReduceOp::Mean)
        || !matches!(x.dtype(), DType::F32 | DType::F64)
        || out.dtype() != x.dtype()
        || n == 0
        || n > SMALL_SUM
        || !super::strided::is_dense(x.shape(), x.strides())
    {
        return false;
    }
    // Reduced dims must be a prefix or a suffix of the (size > 1) dims.
    let dims: smallvec::SmallVec<[(usize, bool); 8]> = x
        .shape()
        .iter()
        .zip(mask)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &m)| (d, m))
        .collect();
    let flips = dims.windows(2).filter(|w| w[0].1 != w[1].1).count();
    if flips > 1 {
        return false;
    }
    let r: usize = dims.iter().filter(|d| d.1).map(|d| d.0).product();
    let k = n / r;
    let leading = dims.first().is_some_and(|d| d.1);
    let scale = if op == ReduceOp::Mean {
        1.0 / r as f64
    } else {
        1.0
    };
    fn run<R: Real + Element>(
        x: &Tensor,
        out: &Tensor,
        r: usize,
        k: usize,
        leading: bool,
        scale: f64,
    ) {
        // SAFETY: `x` is dense with r·k elements of R; `out` is contiguous with k.
        let xs = unsafe { std::slice::from_raw_parts(x.data_ptr::<R>() as *const R, r * k) };
        let os = unsafe { std::slice::from_raw_parts_mut(out.data_ptr::<R>(), k) };
        let mut acc: smallvec::SmallVec<[f64; 64]> = smallvec::smallvec![0.0f64; k];
        if k == 1 {
            acc[0] = sum_row(xs);
        } else if leading {
            sum_leading(xs, k, &mut acc);
        } else {
            for (a, row) in acc.iter_mut().zip(xs.chunks_exact(r)) {
                *a = sum_row(row);
            }
        }
        for (o, &a) in os.iter_mut().zip(acc.iter()) {
            *o = R::c(a * scale);
        }
    }
    match x.dtype() {
        DType::F32 => run::<f32>(x, out, r, k, leading, scale),
        _ => run::<f64>(x, out, r, k, leading, scale),
    }
    true
}

fn bad_out(op: ReduceOp, x: DType, out: DType) -> Error {
    Error::runtime(
        op.name(),
        format!("the CPU kernel got input {x} with output {out}"),
    )
}

fn float_reduce<T, C>(op: ReduceOp, g: &Geo, out: &Tensor) -> Result<()>
where
    T: Load<C> + Element,
    C: Real + Element,
{
    if out.dtype() != T::DTYPE {
        return Err(bad_out(op, T::DTYPE, out.dtype()));
    }
    let op_ = out.data_ptr::<T>();
    let n = g.r as f64;
    match op {
        ReduceOp::Sum => drive::<T, _, _, _>(g, SumF::<C>::new(), None, op_, |w, _| T::from_f64(w)),
        ReduceOp::Mean => {
            drive::<T, _, _, _>(g, SumF::<C>::new(), None, op_, |w, _| T::from_f64(w / n))
        }
        ReduceOp::Prod => drive::<T, _, _, _>(g, ProdF::<C>::new(), None, op_, |w, _| {
            T::from_f64(w.to_f64())
        }),
        ReduceOp::Max => drive::<T, _, _, _>(g, MaxF::<C>::new(), None, op_, |w, _| {
            T::from_f64(w.to_f64())
        }),
        ReduceOp::Min => drive::<T, _, _, _>(g, MinF::<C>::new(), None, op_, |w, _| {
            T::from_f64(w.to_f64())
        }),
        ReduceOp::Var { correction, std } => {
            let mut mean = vec![C::ZERO; g.k];
            drive::<T, _, _, _>(g, SumF::<C>::new(), None, mean.as_mut_ptr(), |w, _| {
                C::from_f64(w / n)
            });
            let denom = (n - correction).max(0.0);
            drive::<T, _, _, _>(g, SqDevF::<C>::new(), Some(&mean), op_, |w, _| {
                let v = w / denom;
                T::from_f64(if std { v.sqrt() } else { v })
            });
        }
        ReduceOp::LogSumExp => {
            let mut mx = vec![C::ZERO; g.k];
            drive::<T, _, _, _>(g, MaxF::<C>::new(), None, mx.as_mut_ptr(), |w, _| {
                if w.is_finite() {
                    w
                } else {
                    C::ZERO
                }
            });
            let mxr = &mx;
            drive::<T, _, _, _>(g, SumExpF::<C>::new(), Some(mxr), op_, |w, k| {
                T::from_f64(w.ln() + mxr[k].to_f64())
            });
        }
        ReduceOp::All | ReduceOp::Any => {
            return Err(bad_out(op, T::DTYPE, out.dtype()));
        }
    }
    Ok(())
}

fn int_reduce<T>(op: ReduceOp, g: &Geo, out: &Tensor) -> Result<()>
where
    T: Load<i64> + Element,
{
    let od = out.dtype();
    let ok = match op {
        ReduceOp::Sum | ReduceOp::Prod => od == DType::I64,
        ReduceOp::Max | ReduceOp::Min => od == T::DTYPE,
        ReduceOp::All | ReduceOp::Any => od == DType::Bool && T::DTYPE == DType::Bool,
        _ => false,
    };
    if !ok {
        return Err(bad_out(op, T::DTYPE, od));
    }
    match op {
        ReduceOp::Sum => drive::<T, _, _, _>(g, SumI, None, out.data_ptr::<i64>(), |w, _| w),
        ReduceOp::Prod => drive::<T, _, _, _>(g, ProdI, None, out.data_ptr::<i64>(), |w, _| w),
        ReduceOp::Max => {
            drive::<T, _, _, _>(g, MaxI, None, out.data_ptr::<T>(), |w, _| T::from_i64(w))
        }
        ReduceOp::Min => {
            drive::<T, _, _, _>(g, MinI, None, out.data_ptr::<T>(), |w, _| T::from_i64(w))
        }
        ReduceOp::All => drive::<T, _, _, _>(g, AllI, None, out.data_ptr::<u8>(), |w, _| w as u8),
        ReduceOp::Any => drive::<T, _, _, _>(g, AnyI, None, out.data_ptr::<u8>(), |w, _| w as u8),
        _ => unreachable!(),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Helpers shared with the softmax, norm and scan kernels
// ---------------------------------------------------------------------------

/// A contiguous version of `x` (the tensor itself when already contiguous).
pub(super) fn contiguous_as(x: &Tensor, dtype: DType) -> Result<Tensor> {
    if x.is_contiguous() && x.dtype() == dtype {
        return Ok(x.clone());
    }
    let t = Tensor::empty(x.shape(), dtype, x.device())?;
    cast_copy(x, &t)?;
    Ok(t)
}

/// `(outer, n, inner)` of a contiguous shape around `dim`.
pub(super) fn split3(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    if shape.is_empty() {
        return (1, 1, 1);
    }
    (
        shape[..dim].iter().product(),
        shape[dim],
        shape[dim + 1..].iter().product(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce_f64(x: &Tensor, mask: &[bool], op: ReduceOp) -> Vec<f64> {
        let shape: Vec<usize> = x
            .shape()
            .iter()
            .zip(mask)
            .filter(|(_, &m)| !m)
            .map(|(&d, _)| d)
            .collect();
        let out = Tensor::empty(&shape, x.dtype(), x.device()).unwrap();
        reduce(op, x, mask, &out).unwrap();
        out.to_f64_vec()
    }

    /// Naive reference: sum over masked dims by walking every element.
    fn naive_sum(x: &Tensor, mask: &[bool]) -> Vec<f64> {
        let shape = x.shape();
        let kshape: Vec<usize> = shape
            .iter()
            .zip(mask)
            .filter(|(_, &m)| !m)
            .map(|(&d, _)| d)
            .collect();
        let kst = contiguous_strides(&kshape);
        let mut out = vec![0.0; kshape.iter().product()];
        let vals = x.to_f64_vec();
        let st = contiguous_strides(shape);
        for (lin, v) in vals.iter().enumerate() {
            let mut o = 0;
            let mut kd = 0;
            for d in 0..shape.len() {
                let i = (lin / st[d] as usize) % shape[d];
                if !mask[d] {
                    o += i * kst[kd] as usize;
                    kd += 1;
                }
            }
            out[o] += v;
        }
        out
    }

    #[test]
    fn paths_agree_with_naive() {
        let shape = [3usize, 5, 70, 2];
        let n: usize = shape.iter().product();
        let x = Tensor::from_vec((0..n).map(|i| (i % 13) as f64 - 6.0).collect(), &shape).unwrap();
        // Transposed and flipped views exercise the column and general paths.
        let views = [
            x.clone(),
            x.with_layout(x.layout().permute("t", &[2, 0, 3, 1]).unwrap()),
            x.with_layout(x.layout().slice(2, 69, 70, -1)),
        ];
        for v in &views {
            let nd = v.ndim();
            for bits in 0..(1u32 << nd) {
                let mask: Vec<bool> = (0..nd).map(|d| bits >> d & 1 == 1).collect();
                let got = reduce_f64(v, &mask, ReduceOp::Sum);
                let want = naive_sum(v, &mask);
                assert_eq!(got, want, "mask {mask:?} shape {:?}", v.shape());
            }
        }
    }

    #[test]
    fn long_rows_split_deterministically() {
        let n = 1 << 18;
        let x = Tensor::from_vec(
            (0..n).map(|i| ((i * 7) % 100) as f32 * 0.01).collect(),
            &[2, n / 2],
        )
        .unwrap();
        let want: Vec<f64> = (0..2)
            .map(|r| {
                (0..n / 2)
                    .map(|i| (((r * n / 2 + i) * 7) % 100) as f32 as f64 * 0.01)
                    .sum()
            })
            .collect();
        let got = reduce_f64(&x, &[false, true], ReduceOp::Sum);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() / w < 1e-6);
        }
        let again = reduce_f64(&x, &[false, true], ReduceOp::Sum);
        assert_eq!(got, again);
    }

    #[test]
    fn column_split_many_rows() {
        let (r, c) = (50_000usize, 3usize);
        let x =
            Tensor::from_vec((0..r * c).map(|i| (i % c) as f64 + 1.0).collect(), &[r, c]).unwrap();
        let got = reduce_f64(&x, &[true, false], ReduceOp::Sum);
        assert_eq!(got, vec![r as f64, 2.0 * r as f64, 3.0 * r as f64]);
        let m = reduce_f64(&x, &[true, false], ReduceOp::Max);
        assert_eq!(m, vec![1.0, 2.0, 3.0]);
    }
}
