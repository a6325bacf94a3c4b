//! CPU matrix products: batched strided GEMM on top of the `gemm` crate
//! (float32/float64), the packed AVX2 kernel of [`super::sgemm`] for float32
//! products that fill its tiles, the GEMV of [`super::gemv`] for float32
//! products of one to four rows times `W.T`, and a blocked loop for the
//! integer dtypes.
//! bfloat16 operands multiply with `vdpbf16ps` ([`super::bf16gemm`]) into a
//! float32 result where the CPU has AVX512_BF16 and the level in use is
//! AVX-512; elsewhere they are widened to float32 first.
//!
//! Operands arrive as `[..batch, M, K]`, `[..batch, K, N]` and an output
//! `[..batch, M, N]` with the same batch shape (broadcast batches are
//! stride-0 views). Matrices are handed to `gemm` by their strides; only
//! negative strides are copied away first. Threading: tiny products run on
//! the calling thread, many small matrices are split over the pool one
//! matrix per task, large matrices are threaded inside `gemm`.

use std::borrow::Cow;

use gemm::Parallelism;
use smallvec::SmallVec;

use super::math::Real;
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// A contiguous copy of `t` (same dtype and device), made with the CPU's own map kernel.
fn copied(t: &Tensor) -> Result<Tensor> {
    let out = Tensor::empty(t.shape(), t.dtype(), t.device())?;
    crate::with_dtype!(t.dtype(), T => {
        super::elementwise::run_map(t, &out, super::strided::PAR_MIN, |v: T| v)
    });
    Ok(out)
}

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
fn batch_offsets(batch: &[usize], strides: [&[isize]; 3]) -> SmallVec<[[isize; 3]; 1]> {
    let nb: usize = batch.iter().product();
    let mut out = SmallVec::with_capacity(nb);
    if nb == 0 {
        return out;
    }
    let mut idx: SmallVec<[usize; 4]> = smallvec::smallvec![0; batch.len()];
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
    if a.dtype() == DType::BF16
        && b.dtype() == DType::BF16
        && matches!(out.dtype(), DType::F32 | DType::BF16)
    {
        return matmul_bf16(a, b, out, accumulate);
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
    let Operands {
        a,
        b,
        ma,
        mb,
        mc,
        offs,
    } = operands(a, b, out)?;
    let dims = Dims { m, n, k };
    match out.dtype() {
        DType::F32 => run_float::<f32>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::F64 => run_float::<f64>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::I32 => run_int::<i32>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::I64 => run_int::<i64>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::I16 => run_int::<i16>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::I8 => run_int::<i8>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        DType::U8 => run_int::<u8>(&a, &b, out, ma, mb, mc, dims, &offs, accumulate),
        d => {
            return Err(Error::dtype(
                "matmul",
                format!("the CPU kernel has no {d} path (the op computes it in float32)"),
            ))
        }
    }
    Ok(())
}

/// `out (+)= a @ b` for bfloat16 operands and a float32 or bfloat16 output:
/// products summed in float32, a bfloat16 output rounded once at the end
/// (to nearest, ties to even), as widening both operands to float32 gives.
fn matmul_bf16(a: &Tensor, b: &Tensor, out: &Tensor, accumulate: bool) -> Result<()> {
    if out.dtype() == DType::BF16 {
        let tmp = Tensor::empty(out.shape(), DType::F32, out.device())?;
        if accumulate {
            super::elementwise::cast_copy(out, &tmp)?;
        }
        matmul_bf16(a, b, &tmp, accumulate)?;
        return super::elementwise::cast_copy(&tmp, out);
    }
    if !super::bf16gemm::available() {
        let widened = |t: &Tensor| -> Result<Tensor> {
            let w = Tensor::empty(t.shape(), DType::F32, t.device())?;
            super::elementwise::cast_copy(t, &w)?;
            Ok(w)
        };
        return matmul(&widened(a)?, &widened(b)?, out, accumulate);
    }
    let nd = out.ndim();
    let (m, n, k) = (out.shape()[nd - 2], out.shape()[nd - 1], a.shape()[nd - 1]);
    let Operands {
        a,
        b,
        ma,
        mb,
        mc,
        offs,
    } = operands(a, b, out)?;
    let (ap, bp, cp) = (
        SendPtr(a.data_ptr::<half::bf16>() as *mut u16),
        SendPtr(b.data_ptr::<half::bf16>() as *mut u16),
        SendPtr(out.data_ptr::<f32>()),
    );
    let one = |o: &[isize; 3], threads: usize| {
        // SAFETY: offsets and strides come from the layouts; `out` was
        // allocated by the op, so it overlaps neither input.
        unsafe {
            super::bf16gemm::gemm(
                m,
                n,
                k,
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
                threads,
            )
        }
    };
    over_batch(&offs, Dims { m, n, k }, one);
    Ok(())
}

/// A batched product's operands as the kernels take them: a view with a
/// negative matrix stride copied first (the kernels take any non-negative
/// strides), the three matrices' strides, and each batch element's offsets
/// into `a`, `b` and `out`.
struct Operands<'t> {
    a: Cow<'t, Tensor>,
    b: Cow<'t, Tensor>,
    ma: Mat,
    mb: Mat,
    mc: Mat,
    offs: SmallVec<[[isize; 3]; 1]>,
}

fn operands<'t>(a: &'t Tensor, b: &'t Tensor, out: &Tensor) -> Result<Operands<'t>> {
    let nd = out.ndim();
    let unflipped = |t: &'t Tensor| -> Result<Cow<'t, Tensor>> {
        Ok(if t.strides()[nd - 2..].iter().any(|&s| s < 0) {
            Cow::Owned(copied(t)?)
        } else {
            Cow::Borrowed(t)
        })
    };
    let (a, b) = (unflipped(a)?, unflipped(b)?);
    let mat = |t: &Tensor| Mat {
        rs: t.strides()[nd - 2],
        cs: t.strides()[nd - 1],
    };
    let offs = batch_offsets(
        &out.shape()[..nd - 2],
        [
            &a.strides()[..nd - 2],
            &b.strides()[..nd - 2],
            &out.strides()[..nd - 2],
        ],
    );
    Ok(Operands {
        ma: mat(&a),
        mb: mat(&b),
        mc: mat(out),
        a,
        b,
        offs,
    })
}

/// `one(offsets, threads)` for every batch element, spread as [`plan`] says.
fn over_batch(offs: &[[isize; 3]], d: Dims, one: impl Fn(&[isize; 3], usize) + Sync) {
    match plan(offs.len(), d) {
        Plan::Serial => offs.iter().for_each(|o| one(o, 1)),
        Plan::OverBatch => crate::par::for_each(offs.len(), |i| one(&offs[i], 1)),
        Plan::InsideGemm => {
            let t = crate::par::split();
            offs.iter().for_each(|o| one(o, t))
        }
    }
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

    /// Run a product with one to four rows in `a` and contiguous columns in
    /// `b` (`x @ W.T`) as a GEMV over the rows of `W` ([`super::gemv`]);
    /// `false` leaves it to the caller.
    ///
    /// # Safety
    /// As [`gemm_one`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemv(
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

    /// `dst[p*n + j] = b[p + j*b_cs]` (a `k×n` operand with contiguous
    /// columns copied to row-major order) with a vector kernel; `false` when
    /// there is none and the caller copies element by element.
    ///
    /// # Safety
    /// `b` valid for the strided range, `dst` for `k*n` elements.
    unsafe fn pack_transposed(
        _k: usize,
        _n: usize,
        _b: *const Self,
        _b_cs: isize,
        _dst: *mut Self,
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
        // The packed kernel computes 6×16 (AVX2) or 12×32 (AVX-512) tiles
        // and packs both operands. A product with 8 to 15 columns (a
        // 10-class output layer) still fills most of a tile's rows once
        // transposed (`Cᵀ = Bᵀ·Aᵀ`), so it runs here that way: measured 2×
        // faster than the gemm crate for 256×1024 by 1024×10. Other thin
        // products stay with the gemm crate, which does not pack the long
        // operand (with few rows, packing it costs more than it saves).
        if k < 8 || !fast_f32() {
            return false;
        }
        if m >= 16 && n >= 16 {
            super::sgemm::sgemm(
                m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, accumulate, threads,
            );
            return true;
        }
        if n < 8 || m < 64 {
            return false;
        }
        super::sgemm::sgemm(
            n, m, k, b, b_cs, b_rs, a, a_cs, a_rs, c, c_cs, c_rs, accumulate, threads,
        );
        true
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn gemv(
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
        #[cfg(target_arch = "x86_64")]
        if super::gemv::applies(m, k, b_rs, b_cs) {
            super::gemv::gemv_f32(
                m, n, k, a, a_rs, a_cs, b, b_cs, c, c_rs, c_cs, accumulate, threads,
            );
            return true;
        }
        let _ = (
            m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, accumulate, threads,
        );
        false
    }

    unsafe fn pack_transposed(
        k: usize,
        n: usize,
        b: *const f32,
        b_cs: isize,
        dst: *mut f32,
    ) -> bool {
        if !fast_f32() {
            return false;
        }
        super::sgemm::pack_transposed(k, n, b, b_cs, dst);
        true
    }
}

/// Whether the packed AVX2 float32 kernel is in use (not when `FG_CPU=scalar`).
pub(crate) fn fast_f32() -> bool {
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
    // Threads split the longer side of C into slabs, each a serial product
    // (the gemm crate's own threads are rayon's, whose hand-off costs more
    // than these products take).
    let along_m = m >= n;
    let len = if along_m { m } else { n };
    let parts = threads.min(len).max(1);
    let per = len.div_ceil(parts);
    let (ap, bp, cp) = (SendPtr(a as *mut T), SendPtr(b as *mut T), SendPtr(c));
    let slab = |i: usize| {
        let r0 = i * per;
        if r0 >= len {
            return;
        }
        let cnt = per.min(len - r0);
        let (mm, nn) = if along_m { (cnt, n) } else { (m, cnt) };
        // SAFETY: slab i of C (rows or columns r0..r0+cnt) and the matching
        // rows of A or columns of B, inside the caller's ranges.
        let (a2, b2, c2) = if along_m {
            (
                ap.get().wrapping_offset(r0 as isize * a_rs),
                bp.get(),
                cp.get().wrapping_offset(r0 as isize * c_rs),
            )
        } else {
            (
                ap.get(),
                bp.get().wrapping_offset(r0 as isize * b_cs),
                cp.get().wrapping_offset(r0 as isize * c_cs),
            )
        };
        // gemm computes dst = alpha*dst + beta*lhs*rhs.
        gemm::gemm(
            mm,
            nn,
            k,
            c2,
            c_cs,
            c_rs,
            accumulate,
            a2,
            a_cs,
            a_rs,
            b2,
            b_cs,
            b_rs,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            Parallelism::None,
        )
    };
    if parts == 1 {
        slab(0);
    } else {
        crate::par::for_each(parts, slab);
    }
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
            direct_any(d, pa, ma, pb, mb, pc, mc, accumulate, None);
        };
        if plan(offs.len(), d) == Plan::Serial {
            offs.iter().for_each(one);
        } else {
            crate::par::for_each(offs.len(), |i| one(&offs[i]));
        }
        return;
    }
    let one = |o: &[isize; 3], threads: usize| {
        let par = if threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        // SAFETY: offsets and strides come from the layouts; `out` was
        // allocated by the op, so it overlaps neither input.
        unsafe {
            if T::gemv(
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
                threads,
            ) {
                return;
            }
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
    over_batch(offs, d, one);
}

/// [`direct_mv`] for any `b` layout: one whose rows are strided (a
/// transposed view) is first copied to row-major order in this thread's
/// reused buffer.
#[allow(clippy::too_many_arguments)]
fn direct_any<T: GemmFloat>(
    d: Dims,
    a: SendPtr<T>,
    ma: Mat,
    b: SendPtr<T>,
    mb: Mat,
    c: SendPtr<T>,
    mc: Mat,
    accumulate: bool,
    init: Option<(SendPtr<T>, Mat)>,
) {
    if mb.cs == 1 || d.n == 1 {
        direct_mv(d, a, ma, b, mb, c, mc, accumulate, init);
    } else {
        with_row_major(d.k, d.n, b.get(), mb, |packed| {
            let row = Mat {
                rs: d.n as isize,
                cs: 1,
            };
            direct_mv(
                d,
                a,
                ma,
                SendPtr(packed as *mut T),
                row,
                c,
                mc,
                accumulate,
                init,
            );
        });
    }
}

/// `out = init + a @ b` through [`direct`] when the product is a small 2-D
/// float one (see [`DIRECT_MAX`]) with operands of out's dtype and no
/// negative strides; `false` (nothing written) otherwise. `init` has out's
/// shape (a broadcast view).
pub fn small_matmul_init(a: &Tensor, b: &Tensor, init: &Tensor, out: &Tensor) -> bool {
    let dt = out.dtype();
    if out.ndim() != 2
        || a.ndim() != 2
        || b.ndim() != 2
        || init.shape() != out.shape()
        || [a, b, init].iter().any(|t| t.dtype() != dt)
        || [a, b].iter().any(|t| t.strides().iter().any(|&s| s < 0))
    {
        return false;
    }
    let (m, n, k) = (out.shape()[0], out.shape()[1], a.shape()[1]);
    if m.saturating_mul(n).saturating_mul(k) > DIRECT_MAX || m == 0 || n == 0 {
        return false;
    }
    fn go<T: GemmFloat>(a: &Tensor, b: &Tensor, init: &Tensor, out: &Tensor, d: Dims) {
        let mat = |t: &Tensor| Mat {
            rs: t.strides()[0],
            cs: t.strides()[1],
        };
        direct_any(
            d,
            SendPtr(a.data_ptr::<T>()),
            mat(a),
            SendPtr(b.data_ptr::<T>()),
            mat(b),
            SendPtr(out.data_ptr::<T>()),
            mat(out),
            false,
            Some((SendPtr(init.data_ptr::<T>()), mat(init))),
        )
    }
    let d = Dims { m, n, k };
    match dt {
        DType::F32 => go::<f32>(a, b, init, out, d),
        DType::F64 => go::<f64>(a, b, init, out, d),
        _ => return false,
    }
    true
}

/// Products with at most this many multiply-adds run [`direct`]: packing
/// operands and dispatching into a blocked GEMM costs more than the product.
pub(crate) const DIRECT_MAX: usize = 1 << 15;

/// Output columns accumulated per register block of [`direct`].
const DIRECT_JB: usize = 32;

/// `acc[j] += av · b[j]` over a fixed-size block (kept in registers).
#[inline(always)]
fn axpy_block<T: Real>(acc: &mut [T; DIRECT_JB], av: T, b: &[T; DIRECT_JB]) {
    for (s, &bv) in acc.iter_mut().zip(b) {
        *s = av.mul_add(bv, *s);
    }
}

thread_local! {
    /// The calling thread's buffer for a row-major copy of a small product's
    /// `B` (f64 words: aligned for either float type).
    static ROW_MAJOR: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` on a row-major copy (`k×n`, row stride `n`) of the strided `b`.
fn with_row_major<T: GemmFloat>(
    k: usize,
    n: usize,
    b: *const T,
    mb: Mat,
    f: impl FnOnce(*const T),
) {
    let words = (k * n * std::mem::size_of::<T>()).div_ceil(8);
    let fill = |dst: *mut T| {
        // SAFETY: `dst` holds k*n elements; `b` is valid for its strided k×n range.
        unsafe {
            if mb.rs != 1 || !T::pack_transposed(k, n, b, mb.cs, dst) {
                for j in 0..n {
                    let col = b.offset(j as isize * mb.cs);
                    for p in 0..k {
                        *dst.add(p * n + j) = *col.offset(p as isize * mb.rs);
                    }
                }
            }
        }
    };
    ROW_MAJOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < words {
                v.resize(words, 0.0);
            }
            let dst = v.as_mut_ptr() as *mut T;
            fill(dst);
            f(dst)
        }
        // A nested product on this thread (not expected): its own buffer.
        Err(_) => {
            let mut v = vec![0.0f64; words];
            let dst = v.as_mut_ptr() as *mut T;
            fill(dst);
            f(dst)
        }
    })
}

/// `c (+)= a @ b` for small products whose `b` has contiguous rows (or one
/// column): rows of `c` are built two at a time, `DIRECT_JB` columns at a
/// time in registers, as `Σ_p a[i,p] · b[p,:]` with the inner loop over
/// contiguous columns of `b`. Products are summed in `p` order, each by one
/// fused multiply-add, so every SIMD level gives the same bits (the scalar
/// level calls the C library's `fma`).
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
    init: Option<(*const T, Mat)>,
) {
    let (m, n, k) = (d.m, d.n, d.k);
    debug_assert!(mb.cs == 1 || n == 1, "direct needs B's rows contiguous");
    let (bp, brs) = (b, mb.rs);
    let store = |i: usize, j0: usize, vals: &[T]| {
        let crow = c.offset(i as isize * mc.rs);
        let irow =
            init.map(|(ip, im)| (ip.offset(i as isize * im.rs + j0 as isize * im.cs), im.cs));
        if mc.cs == 1 && irow.is_none_or(|(_, s)| s == 1) {
            // Unit-stride rows (the usual case): loops the compiler vectorises.
            let out = std::slice::from_raw_parts_mut(crow.add(j0), vals.len());
            match irow {
                // `init + v`, as accumulating onto a copy of `init` adds.
                Some((ip, _)) => {
                    let src = std::slice::from_raw_parts(ip, vals.len());
                    for ((o, &v), &b) in out.iter_mut().zip(vals).zip(src) {
                        *o = b + v;
                    }
                }
                None if accumulate => {
                    for (o, &v) in out.iter_mut().zip(vals) {
                        *o = *o + v;
                    }
                }
                None => out.copy_from_slice(vals),
            }
            return;
        }
        for (j, &v) in vals.iter().enumerate() {
            let cp = crow.offset((j0 + j) as isize * mc.cs);
            *cp = match irow {
                Some((ip, s)) => *ip.offset(j as isize * s) + v,
                None if accumulate => *cp + v,
                None => v,
            };
        }
    };
    // Pairs of rows share each load of B (and give the adder two independent chains).
    let pairs = if n >= DIRECT_JB { m / 2 } else { 0 };
    for ip in 0..pairs {
        let i = 2 * ip;
        let (a0, a1) = (
            a.offset(i as isize * ma.rs),
            a.offset((i + 1) as isize * ma.rs),
        );
        let mut j0 = 0;
        while j0 + DIRECT_JB <= n {
            let (mut acc0, mut acc1) = ([T::ZERO; DIRECT_JB], [T::ZERO; DIRECT_JB]);
            for p in 0..k as isize {
                let bs = &*(bp.offset(p * brs + j0 as isize) as *const [T; DIRECT_JB]);
                axpy_block(&mut acc0, *a0.offset(p * ma.cs), bs);
                axpy_block(&mut acc1, *a1.offset(p * ma.cs), bs);
            }
            store(i, j0, &acc0);
            store(i + 1, j0, &acc1);
            j0 += DIRECT_JB;
        }
        if j0 < n {
            tail_row(i, j0, a0, ma, bp, brs, k, n, &store);
            tail_row(i + 1, j0, a1, ma, bp, brs, k, n, &store);
        }
    }
    for i in 2 * pairs..m {
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
            tail_row(i, j0, arow, ma, bp, brs, k, n, &store);
        }
    }
}

/// Columns `j0..n` (fewer than `DIRECT_JB`) of row `i` of [`direct`]'s product.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tail_row<T: Real>(
    i: usize,
    j0: usize,
    arow: *const T,
    ma: Mat,
    bp: *const T,
    brs: isize,
    k: usize,
    n: usize,
    store: &impl Fn(usize, usize, &[T]),
) {
    let jn = n - j0;
    let mut acc = [T::ZERO; DIRECT_JB];
    for p in 0..k as isize {
        let av = *arow.offset(p * ma.cs);
        let bs = std::slice::from_raw_parts(bp.offset(p * brs + j0 as isize), jn);
        for (s, &bv) in acc.iter_mut().zip(bs) {
            *s = av.mul_add(bv, *s);
        }
    }
    store(i, j0, &acc[..jn]);
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
        init: Option<(SendPtr<T>, Mat)>,
    ) {
        let init = init.map(|(p, m)| (p.get() as *const T, m));
        // SAFETY: the caller passes pointers valid for the described matrices.
        unsafe { direct(d, a.get(), ma, b.get(), mb, c.get(), mc, accumulate, init) }
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
macro_rules! small_int_elem {
    ($($t:ty),*) => {$(
        impl IntElem for $t {
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t {
                self.wrapping_add(a.wrapping_mul(b))
            }
        }
    )*};
}
// uint8 as raw bytes: wrapping arithmetic is the same bits as `crate::tensor::U8`'s.
small_int_elem!(i8, i16, u8);

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
        crate::par::for_each(offs.len() * per_batch, |t| {
            let (bi, r) = (t / per_batch, t % per_batch);
            let r0 = r * rows_per;
            task(bi, r0..(r0 + rows_per).min(d.m));
        });
    }
}
