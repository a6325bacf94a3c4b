//! CPU matrix products: batched strided GEMM on top of the `gemm` crate
//! (float32/float64), the packed AVX2 kernel of [`super::sgemm`] for float32
//! products that fill its tiles, and a blocked loop for the integer dtypes.
//!
//! Operands arrive as `[..batch, M, K]`, `[..batch, K, N]` and an output
//! `[..batch, M, N]` with the same batch shape (broadcast batches are
//! stride-0 views). Matrices are handed to `gemm` by their strides; only
//! negative strides are copied away first. Threading: tiny products run on
//! the calling thread, many small matrices are split over the pool one
//! matrix per task, large matrices are threaded inside `gemm`.

use gemm::Parallelism;
use rayon::prelude::*;

use super::math::Real;
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// Below this many multiply-adds in total everything runs on the calling thread.
const SERIAL_MAX: usize = 1 << 18;
/// Matrices with fewer multiply-adds than this are not threaded inside gemm;
/// batches of them are split over the pool instead.
const SMALL_MATRIX: usize = 1 << 22;

/// One operand matrix's row and column strides.
#[derive(Copy, Clone)]
struct Mat {
    rs: isize,
    cs: isize,
}

/// Offsets of every batch element for the three operands.
fn batch_offsets(batch: &[usize], strides: [&[isize]; 3]) -> Vec<[isize; 3]> {
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb);
    if nb == 0 {
        return out;
    }
    let mut idx = vec![0usize; batch.len()];
    let mut off = [0isize; 3];
    for _ in 0..nb {
        out.push(off);
        let mut d = batch.len();
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            for k in 0..3 {
                off[k] += strides[k][d];
            }
            if idx[d] < batch[d] {
                break;
            }
            for k in 0..3 {
                off[k] -= strides[k][d] * batch[d] as isize;
            }
            idx[d] = 0;
        }
    }
    out
}

/// `out (+)= a @ b` over matching batch dims (see the module docs).
pub fn matmul(a: &Tensor, b: &Tensor, out: &Tensor, accumulate: bool) -> Result<()> {
    let nd = out.ndim();
    debug_assert!(nd >= 2 && a.ndim() == nd && b.ndim() == nd);
    let (m, n, k) = (out.shape()[nd - 2], out.shape()[nd - 1], a.shape()[nd - 1]);
    let batch = &out.shape()[..nd - 2];
    let nb: usize = batch.iter().product();
    if nb == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    for t in [a, b] {
        if t.dtype() != out.dtype() {
            return Err(Error::dtype(
                "matmul",
                format!(
                    "kernel expects operands of the output dtype {}, got {}",
                    out.dtype(),
                    t.dtype()
                ),
            ));
        }
    }
    // gemm takes any non-negative strides; flipped views are copied first.
    let a = if a.strides()[nd - 2..].iter().any(|&s| s < 0) {
        crate::ops::elementwise::clone(a)?
    } else {
        a.clone()
    };
    let b = if b.strides()[nd - 2..].iter().any(|&s| s < 0) {
        crate::ops::elementwise::clone(b)?
    } else {
        b.clone()
    };
    let ma = Mat {
        rs: a.strides()[nd - 2],
        cs: a.strides()[nd - 1],
    };
    let mb = Mat {
        rs: b.strides()[nd - 2],
        cs: b.strides()[nd - 1],
    };
    let mc = Mat {
        rs: out.strides()[nd - 2],
        cs: out.strides()[nd - 1],
    };
    let offs = batch_offsets(
        batch,
        [
            &a.strides()[..nd - 2],
            &b.strides()[..nd - 2],
            &out.strides()[..nd - 2],
        ],
    );
    let dims = Dims { m, n, k };
    match out.dtype() {
        DType::F32 => run_float::<f32>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::F64 => run_float::<f64>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::I32 => run_int::<i32>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::I64 => run_int::<i64>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        d => {
            return Err(Error::dtype(
                "matmul",
                format!("the CPU kernel has no {d} path (the op computes it in float32)"),
            ))
        }
    }
    Ok(())
}

#[derive(Copy, Clone)]
struct Dims {
    m: usize,
    n: usize,
    k: usize,
}

/// How a batch of products is spread over threads.
#[derive(Copy, Clone, PartialEq)]
enum Plan {
    /// Everything on the calling thread.
    Serial,
    /// One task per matrix, each single-threaded.
    OverBatch,
    /// Matrices one after another, threaded inside gemm.
    InsideGemm,
}

fn plan(nb: usize, d: Dims) -> Plan {
    let per = d.m.saturating_mul(d.n).saturating_mul(d.k.max(1));
    let total = per.saturating_mul(nb);
    if total < SERIAL_MAX || crate::par::split() <= 1 {
        Plan::Serial
    } else if nb > 1 && per < SMALL_MATRIX {
        Plan::OverBatch
    } else {
        Plan::InsideGemm
    }
}

/// Element types the `gemm` crate multiplies.
pub trait GemmFloat: Real {
    /// Run the product with a faster kernel than the `gemm` crate's when one
    /// applies; `false` leaves it to the caller.
    ///
    /// # Safety
    /// As [`gemm_one`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn fast_gemm(
        _m: usize,
        _n: usize,
        _k: usize,
        _a: *const Self,
        _a_rs: isize,
        _a_cs: isize,
        _b: *const Self,
        _b_rs: isize,
        _b_cs: isize,
        _c: *mut Self,
        _c_rs: isize,
        _c_cs: isize,
        _accumulate: bool,
        _threads: usize,
    ) -> bool {
        false
    }
}

impl GemmFloat for f64 {}

impl GemmFloat for f32 {
    #[allow(clippy::too_many_arguments)]
    unsafe fn fast_gemm(
        m: usize,
        n: usize,
        k: usize,
        a: *const f32,
        a_rs: isize,
        a_cs: isize,
        b: *const f32,
        b_rs: isize,
        b_cs: isize,
        c: *mut f32,
        c_rs: isize,
        c_cs: isize,
        accumulate: bool,
        threads: usize,
    ) -> bool {
        // The packed kernel computes 6x16 tiles and packs both operands:
        // skinny products (few rows or columns) stay with the gemm crate,
        // which avoids packing the long operand.
        if m < 16 || n < 16 || k < 8 || !fast_f32() {
            return false;
        }
        super::sgemm::sgemm(
            m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, accumulate, threads,
        );
        true
    }
}

/// Whether the packed AVX2 float32 kernel is in use (not when `FG_CPU=scalar`).
fn fast_f32() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(super::sgemm::available) && super::simd::level() >= super::simd::Level::Avx2
}

/// One strided product `c (+)= a @ b` through `gemm`.
///
/// # Safety
/// Pointers must be valid for the strided `m×k`, `k×n`, `m×n` ranges, strides
/// non-negative, and `c` must not overlap `a`/`b` or itself.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_one<T: GemmFloat>(
    m: usize,
    n: usize,
    k: usize,
    a: *const T,
    a_rs: isize,
    a_cs: isize,
    b: *const T,
    b_rs: isize,
    b_cs: isize,
    c: *mut T,
    c_rs: isize,
    c_cs: isize,
    accumulate: bool,
    par: Parallelism,
) {
    let threads = match par {
        Parallelism::None => 1,
        Parallelism::Rayon(t) => t.max(1),
    };
    if T::fast_gemm(
        m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, accumulate, threads,
    ) {
        return;
    }
    // gemm computes dst = alpha*dst + beta*lhs*rhs.
    gemm::gemm(
        m,
        n,
        k,
        c,
        c_cs,
        c_rs,
        accumulate,
        a,
        a_cs,
        a_rs,
        b,
        b_cs,
        b_rs,
        T::ONE,
        T::ONE,
        false,
        false,
        false,
        par,
    );
}

/// The parallelism to hand gemm for one product of this size run on its own.
pub fn gemm_parallelism(m: usize, n: usize, k: usize) -> Parallelism {
    if m.saturating_mul(n).saturating_mul(k) < SERIAL_MAX || crate::par::split() <= 1 {
        Parallelism::None
    } else {
        Parallelism::Rayon(crate::par::split())
    }
}

#[allow(clippy::too_many_arguments)]
fn run_float<T: GemmFloat>(
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    ma: Mat,
    mb: Mat,
    mc: Mat,
    d: Dims,
    offs: &[[isize; 3]],
    accumulate: bool,
) {
    let (ap, bp, cp) = (
        SendPtr(a.data_ptr::<T>()),
        SendPtr(b.data_ptr::<T>()),
        SendPtr(out.data_ptr::<T>()),
    );
    if d.m.saturating_mul(d.n).saturating_mul(d.k) <= DIRECT_MAX {
        let one = |o: &[isize; 3]| {
            // SAFETY: as below.
            let (pa, pb, pc) = unsafe {
                (
                    SendPtr(ap.get().offset(o[0])),
                    SendPtr(bp.get().offset(o[1])),
                    SendPtr(cp.get().offset(o[2])),
                )
            };
            direct_mv(d, pa, ma, pb, mb, pc, mc, accumulate);
        };
        if plan(offs.len(), d) == Plan::Serial {
            offs.iter().for_each(one);
        } else {
            crate::par::install(|| offs.par_iter().for_each(one));
        }
        return;
    }
    let one = |o: &[isize; 3], par: Parallelism| {
        // SAFETY: offsets and strides come from the layouts; `out` was
        // allocated by the op, so it overlaps neither input.
        unsafe {
            gemm_one(
                d.m,
                d.n,
                d.k,
                ap.get().offset(o[0]),
                ma.rs,
                ma.cs,
                bp.get().offset(o[1]),
                mb.rs,
                mb.cs,
                cp.get().offset(o[2]),
                mc.rs,
                mc.cs,
                accumulate,
                par,
            )
        }
    };
    match plan(offs.len(), d) {
        Plan::Serial => offs.iter().for_each(|o| one(o, Parallelism::None)),
        Plan::OverBatch => {
            crate::par::install(|| offs.par_iter().for_each(|o| one(o, Parallelism::None)))
        }
        Plan::InsideGemm => {
            let par = Parallelism::Rayon(crate::par::split());
            crate::par::install(|| offs.iter().for_each(|o| one(o, par)))
        }
    }
}

/// Products with at most this many multiply-adds run [`direct`]: packing
/// operands and dispatching into a blocked GEMM costs more than the product.
const DIRECT_MAX: usize = 1 << 15;

/// Output columns accumulated per register block of [`direct`].
const DIRECT_JB: usize = 32;

/// `acc[j] += av · b[j]` over a fixed-size block (kept in registers).
#[inline(always)]
fn axpy_block<T: Real>(acc: &mut [T; DIRECT_JB], av: T, b: &[T; DIRECT_JB]) {
    for (s, &bv) in acc.iter_mut().zip(b) {
        *s = *s + av * bv;
    }
}

/// `c (+)= a @ b` for small products: each row of `c` is built `DIRECT_JB`
/// columns at a time in registers as `Σ_p a[i,p] · b[p,:]`, the inner loop
/// running over contiguous columns of `b` (copied to a row-major buffer first
/// unless its rows are contiguous). Products are summed in `p` order with
/// separate multiplies and adds, so every SIMD level gives the same bits.
///
/// # Safety
/// Pointers valid for the strided `m×k`, `k×n`, `m×n` ranges; `c` overlaps neither input.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn direct<T: Real>(
    d: Dims,
    a: *const T,
    ma: Mat,
    b: *const T,
    mb: Mat,
    c: *mut T,
    mc: Mat,
    accumulate: bool,
) {
    let (m, n, k) = (d.m, d.n, d.k);
    let packed: Vec<T>;
    let (bp, brs) = if mb.cs == 1 || n == 1 {
        (b, mb.rs)
    } else {
        let mut v = Vec::with_capacity(k * n);
        for p in 0..k as isize {
            let src = b.offset(p * mb.rs);
            v.extend((0..n as isize).map(|j| *src.offset(j * mb.cs)));
        }
        packed = v;
        (packed.as_ptr(), n as isize)
    };
    let store = |i: usize, j0: usize, vals: &[T]| {
        let crow = c.offset(i as isize * mc.rs);
        for (j, &v) in vals.iter().enumerate() {
            let cp = crow.offset((j0 + j) as isize * mc.cs);
            *cp = if accumulate { *cp + v } else { v };
        }
    };
    for i in 0..m {
        let arow = a.offset(i as isize * ma.rs);
        let mut j0 = 0;
        while j0 + DIRECT_JB <= n {
            let mut acc = [T::ZERO; DIRECT_JB];
            for p in 0..k as isize {
                let bs = &*(bp.offset(p * brs + j0 as isize) as *const [T; DIRECT_JB]);
                axpy_block(&mut acc, *arow.offset(p * ma.cs), bs);
            }
            store(i, j0, &acc);
            j0 += DIRECT_JB;
        }
        if j0 < n {
            let jn = n - j0;
            let mut acc = [T::ZERO; DIRECT_JB];
            for p in 0..k as isize {
                let av = *arow.offset(p * ma.cs);
                let bs = std::slice::from_raw_parts(bp.offset(p * brs + j0 as isize), jn);
                for (s, &bv) in acc.iter_mut().zip(bs) {
                    *s = *s + av * bv;
                }
            }
            store(i, j0, &acc[..jn]);
        }
    }
}

crate::multiversion! {
    #[allow(clippy::too_many_arguments)]
    fn direct_mv<T: Real>(
        d: Dims,
        a: SendPtr<T>,
        ma: Mat,
        b: SendPtr<T>,
        mb: Mat,
        c: SendPtr<T>,
        mc: Mat,
        accumulate: bool,
    ) {
        // SAFETY: the caller passes pointers valid for the described matrices.
        unsafe { direct(d, a.get(), ma, b.get(), mb, c.get(), mc, accumulate) }
    }
}

/// Integer element arithmetic (wrapping, as the integer matmul of other libraries).
trait IntElem: Copy + Send + Sync + Default + 'static {
    fn mul_add(self, a: Self, b: Self) -> Self;
}
impl IntElem for i32 {
    #[inline(always)]
    fn mul_add(self, a: i32, b: i32) -> i32 {
        self.wrapping_add(a.wrapping_mul(b))
    }
}
impl IntElem for i64 {
    #[inline(always)]
    fn mul_add(self, a: i64, b: i64) -> i64 {
        self.wrapping_add(a.wrapping_mul(b))
    }
}

/// Rows of `c` computed by one call: `acc[j] += a[i,p] * b[p,j]` over a
/// contiguous row buffer, so the inner loop is unit-stride when `b`'s rows are.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn int_rows<T: IntElem>(
    rows: std::ops::Range<usize>,
    d: Dims,
    a: *const T,
    ma: Mat,
    b: *const T,
    mb: Mat,
    c: *mut T,
    mc: Mat,
    accumulate: bool,
    acc: &mut [T],
) {
    const KB: usize = 256;
    for i in rows {
        let crow = c.offset(i as isize * mc.rs);
        for (j, v) in acc.iter_mut().enumerate() {
            *v = if accumulate {
                *crow.offset(j as isize * mc.cs)
            } else {
                T::default()
            };
        }
        let mut p0 = 0;
        while p0 < d.k {
            let p1 = (p0 + KB).min(d.k);
            for p in p0..p1 {
                let av = *a.offset(i as isize * ma.rs + p as isize * ma.cs);
                let brow = b.offset(p as isize * mb.rs);
                if mb.cs == 1 {
                    let bs = std::slice::from_raw_parts(brow, d.n);
                    for (v, &bv) in acc.iter_mut().zip(bs) {
                        *v = v.mul_add(av, bv);
                    }
                } else {
                    for (j, v) in acc.iter_mut().enumerate() {
                        *v = v.mul_add(av, *brow.offset(j as isize * mb.cs));
                    }
                }
            }
            p0 = p1;
        }
        for (j, &v) in acc.iter().enumerate() {
            *crow.offset(j as isize * mc.cs) = v;
        }
    }
}

crate::multiversion! {
    #[allow(clippy::too_many_arguments)]
    fn int_rows_mv<T: IntElem>(
        rows: std::ops::Range<usize>,
        d: Dims,
        a: SendPtr<T>,
        ma: Mat,
        b: SendPtr<T>,
        mb: Mat,
        c: SendPtr<T>,
        mc: Mat,
        accumulate: bool,
    ) {
        let mut acc = vec![T::default(); d.n];
        // SAFETY: the caller passes pointers valid for the described matrices.
        unsafe {
            int_rows(rows, d, a.get(), ma, b.get(), mb, c.get(), mc, accumulate, &mut acc)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_int<T: IntElem>(
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    ma: Mat,
    mb: Mat,
    mc: Mat,
    d: Dims,
    offs: &[[isize; 3]],
    accumulate: bool,
) {
    let (ap, bp, cp) = (
        SendPtr(a.data_ptr::<T>()),
        SendPtr(b.data_ptr::<T>()),
        SendPtr(out.data_ptr::<T>()),
    );
    let task = |bi: usize, rows: std::ops::Range<usize>| {
        let o = offs[bi];
        // SAFETY: offsets inside the operands' storage (from their layouts).
        let (pa, pb, pc) = unsafe {
            (
                SendPtr(ap.get().offset(o[0])),
                SendPtr(bp.get().offset(o[1])),
                SendPtr(cp.get().offset(o[2])),
            )
        };
        int_rows_mv(rows, d, pa, ma, pb, mb, pc, mc, accumulate);
    };
    let total = offs.len() * d.m * d.n * d.k.max(1);
    if total < SERIAL_MAX || crate::par::split() <= 1 {
        (0..offs.len()).for_each(|bi| task(bi, 0..d.m));
    } else {
        // Tasks of a few rows each, over all batches.
        let rows_per = (SERIAL_MAX / (d.n * d.k.max(1)).max(1)).clamp(1, d.m);
        let per_batch = d.m.div_ceil(rows_per);
        crate::par::install(|| {
            (0..offs.len() * per_batch).into_par_iter().for_each(|t| {
                let (bi, r) = (t / per_batch, t % per_batch);
                let r0 = r * rows_per;
                task(bi, r0..(r0 + rows_per).min(d.m));
            })
        });
    }
}
