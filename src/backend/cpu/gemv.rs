//! Float32 products with one to four rows on the left, `c (+)= x @ W.T`, for
//! a weight `W` whose rows are contiguous (the `[out, in]` weight of a
//! linear layer, seen through its transpose): a GEMV that streams each row
//! of `W` once.
//!
//! At batch 1 a linear layer is bound by reading its weight, so the work is
//! split over the OUTPUT features: each thread takes a run of whole rows of
//! `W` (at least [`MIN_ROWS`] rows and [`MIN_BYTES`] of weight, so a task
//! is worth a thread's wake-up) and reads them once, four rows at a time,
//! with one accumulator per (row of `W`, row of `x`) pair. Each output is
//! the dot product of its row of `W` with its row of `x`, summed in sixteen
//! lanes (lane `l` takes the terms with index `≡ l (mod 16)`, the last
//! partial vector masked) and the lanes added in `_mm512_reduce_add_ps`'s
//! tree, then added to `c` when accumulating (a bias copied there first).
//! That order does not depend on the thread count, so the result is the
//! same bit for bit on any number of threads.

use super::strided::SendPtr;

/// Fewest rows of `W` a task takes.
pub const MIN_ROWS: usize = 16;

/// Fewest bytes of `W` a task streams.
pub const MIN_BYTES: usize = 256 << 10;

/// Most rows of `x` the kernel takes.
pub const MAX_M: usize = 4;

/// Whether [`gemv_f32`] computes a product of this shape and layout: one to
/// [`MAX_M`] rows of `x`, at least 16 inner terms, `W` rows contiguous
/// (`b_rs == 1` for `B = W.T`) and AVX-512 in use.
pub fn applies(m: usize, k: usize, b_rs: isize, b_cs: isize) -> bool {
    (1..=MAX_M).contains(&m)
        && k >= 16
        && b_rs == 1
        && b_cs >= k as isize
        && super::gemm::fast_f32()
        && super::simd::level() >= super::simd::Level::Avx512
}

/// `c[i, j] (+)= Σ_p x[i, p] · w[j, p]` for `i < m`, `j < n`, `p < k`, where
/// `w[j, p]` is `w[j * w_rs + p]`, on up to `threads` threads.
///
/// # Safety
/// [`applies`] holds for `(m, k, 1, w_rs)`; `x` is valid for the strided
/// `m × k` range, `w` for `n` rows of `k` at stride `w_rs`, `c` for the
/// strided `m × n` range, which overlaps neither input.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemv_f32(
    m: usize,
    n: usize,
    k: usize,
    x: *const f32,
    x_rs: isize,
    x_cs: isize,
    w: *const f32,
    w_rs: isize,
    c: *mut f32,
    c_rs: isize,
    c_cs: isize,
    accumulate: bool,
    threads: usize,
) {
    if n == 0 {
        return;
    }
    // rows of x made contiguous when they are not
    let copy: Vec<f32>;
    let (xp, xrs) = if x_cs == 1 {
        (x, x_rs)
    } else {
        let mut v = Vec::with_capacity(m * k);
        for i in 0..m {
            for p in 0..k {
                v.push(*x.offset(i as isize * x_rs + p as isize * x_cs));
            }
        }
        copy = v;
        (copy.as_ptr(), k as isize)
    };
    let bytes = n.saturating_mul(k).saturating_mul(4);
    let parts = threads.min(n / MIN_ROWS).min(bytes / MIN_BYTES).max(1);
    let per = n.div_ceil(parts).next_multiple_of(4);
    let (xs, ws, cs) = (SendPtr(xp as *mut f32), SendPtr(w as *mut f32), SendPtr(c));
    let task = |t: usize| {
        let j0 = t * per;
        if j0 >= n {
            return;
        }
        let j1 = (j0 + per).min(n);
        // SAFETY: rows j0..j1 of W and columns j0..j1 of c, this task's only.
        unsafe {
            rows(
                m,
                k,
                xs.get(),
                xrs,
                ws.get(),
                w_rs,
                cs.get(),
                c_rs,
                c_cs,
                accumulate,
                j0,
                j1,
            )
        }
    };
    if parts == 1 {
        task(0);
    } else {
        crate::par::for_each(parts, task);
    }
}

/// Outputs `j0..j1` of every row of `x`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn rows(
    m: usize,
    k: usize,
    x: *const f32,
    x_rs: isize,
    w: *const f32,
    w_rs: isize,
    c: *mut f32,
    c_rs: isize,
    c_cs: isize,
    acc: bool,
    j0: usize,
    j1: usize,
) {
    macro_rules! go {
        ($m:literal) => {{
            let mut j = j0;
            while j + 4 <= j1 {
                block::<$m, 4>(k, x, x_rs, w, w_rs, c, c_rs, c_cs, acc, j);
                j += 4;
            }
            while j < j1 {
                block::<$m, 1>(k, x, x_rs, w, w_rs, c, c_rs, c_cs, acc, j);
                j += 1;
            }
        }};
    }
    match m {
        1 => go!(1),
        2 => go!(2),
        3 => go!(3),
        _ => go!(4),
    }
}

/// Outputs `j..j + R` of `M` rows of `x`: `R × M` accumulators.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn block<const M: usize, const R: usize>(
    k: usize,
    x: *const f32,
    x_rs: isize,
    w: *const f32,
    w_rs: isize,
    c: *mut f32,
    c_rs: isize,
    c_cs: isize,
    accumulate: bool,
    j: usize,
) {
    use std::arch::x86_64::*;
    let mut a = [[_mm512_setzero_ps(); M]; R];
    let wr: [*const f32; R] = std::array::from_fn(|r| w.offset((j + r) as isize * w_rs));
    let xr: [*const f32; M] = std::array::from_fn(|i| x.offset(i as isize * x_rs));
    let mut p = 0;
    while p + 16 <= k {
        let xv: [__m512; M] = std::array::from_fn(|i| _mm512_loadu_ps(xr[i].add(p)));
        for r in 0..R {
            let wv = _mm512_loadu_ps(wr[r].add(p));
            for i in 0..M {
                a[r][i] = _mm512_fmadd_ps(wv, xv[i], a[r][i]);
            }
        }
        p += 16;
    }
    if p < k {
        let mask: __mmask16 = (1u16 << (k - p)) - 1;
        let xv: [__m512; M] = std::array::from_fn(|i| _mm512_maskz_loadu_ps(mask, xr[i].add(p)));
        for r in 0..R {
            let wv = _mm512_maskz_loadu_ps(mask, wr[r].add(p));
            for i in 0..M {
                a[r][i] = _mm512_fmadd_ps(wv, xv[i], a[r][i]);
            }
        }
    }
    for (r, ar) in a.iter().enumerate() {
        for (i, &ai) in ar.iter().enumerate() {
            let s = _mm512_reduce_add_ps(ai);
            let o = c.offset(i as isize * c_rs + (j + r) as isize * c_cs);
            *o = if accumulate { *o + s } else { s };
        }
    }
}
