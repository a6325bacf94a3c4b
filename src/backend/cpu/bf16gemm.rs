//! A bfloat16 GEMM for x86-64 CPUs with AVX512_BF16: `c (+)= a @ b` with
//! bfloat16 operands and a float32 result, on `vdpbf16ps`, which multiplies
//! pairs of bfloat16 values and adds both products into a float32 lane.
//!
//! Both operands are packed as pairs along K: a 32-bit word holds elements
//! `2p` (low half) and `2p + 1` (high half) of a row of `A` or a column of
//! `B`; an odd K is padded with a zero. `B` is packed into `KC2 × 32` column
//! panels (32 columns, two zmm registers per pair step), `A` into `12 × KC2`
//! row panels, and a 12×32 micro-kernel keeps 24 float32 accumulators in
//! registers, as the float32 AVX-512 kernel of [`super::sgemm`] does. The
//! products of two bfloat16 values are exact in float32; the instruction adds
//! them with round-to-nearest-even and treats subnormal inputs and results as
//! zero.
//!
//! Used only when the CPU has `avx512bf16` (detected once) and the SIMD level
//! in use is AVX-512 (so `FG_CPU=avx2` or `scalar` keep the float32 path).
//! Threads each take a slab of rows (or columns) of `C` and run the whole
//! blocked loop with their own packing buffers.

use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of C per micro-tile.
const MR: usize = 12;
/// Columns of C per micro-tile.
const NR: usize = 32;
/// K pairs per packed block (512 values of K).
const KC2: usize = 256;
/// Rows of A packed per block (a multiple of `MR`).
const MC: usize = 192;
/// Columns of B packed per block (a multiple of `NR`).
const NC: usize = 2048;
/// Below this many multiply-adds a product runs on one thread.
const PAR_MIN: usize = 1 << 20;

/// Whether the CPU has the instructions (detected once).
fn cpu_has() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx512bf16") && is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Whether [`gemm`] may run: the CPU has AVX512_BF16 and the SIMD level in
/// use is AVX-512 (`FG_CPU` / `set_cpu_level` lower it to keep the float32 path).
pub fn available() -> bool {
    cpu_has() && super::simd::level() >= super::simd::Level::Avx512
}

/// A 64-byte aligned scratch buffer of 32-bit words, grown on demand.
struct Buf {
    v: Vec<u32>,
}

impl Buf {
    const fn new() -> Buf {
        Buf { v: Vec::new() }
    }
    /// An aligned pointer to at least `n` words.
    fn get(&mut self, n: usize) -> *mut u32 {
        if self.v.len() < n + 16 {
            self.v = vec![0; n + 16];
        }
        let p = self.v.as_mut_ptr();
        let mis = (p as usize / 4) % 16;
        // SAFETY: at most 15 words of the 16 spare ones are skipped.
        unsafe { p.add((16 - mis) % 16) }
    }
}

thread_local! {
    /// Per-thread packing buffers for A and B.
    static PACK: RefCell<(Buf, Buf)> = const { RefCell::new((Buf::new(), Buf::new())) };
}

/// Raw strided matrix view (elements are bfloat16 bits or float32).
#[derive(Copy, Clone)]
struct M<T> {
    p: *mut T,
    rs: isize,
    cs: isize,
}
unsafe impl<T> Send for M<T> {}
unsafe impl<T> Sync for M<T> {}

/// `c (+)= a @ b` for bfloat16 `a` (`m×k`) and `b` (`k×n`), given as raw
/// bits, into float32 `c` (`m×n`), on up to `threads` threads.
///
/// # Safety
/// [`available`] must be true; pointers valid for the strided ranges; `c`
/// must not overlap `a` or `b` and its own elements must be distinct.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const u16,
    a_rs: isize,
    a_cs: isize,
    b: *const u16,
    b_rs: isize,
    b_cs: isize,
    c: *mut f32,
    c_rs: isize,
    c_cs: isize,
    accumulate: bool,
    threads: usize,
) {
    debug_assert!(available());
    if m == 0 || n == 0 {
        return;
    }
    let a = M {
        p: a as *mut u16,
        rs: a_rs,
        cs: a_cs,
    };
    let b = M {
        p: b as *mut u16,
        rs: b_rs,
        cs: b_cs,
    };
    let c = M {
        p: c,
        rs: c_rs,
        cs: c_cs,
    };
    let work = m.saturating_mul(n).saturating_mul(k);
    let t = threads.max(1);
    if t == 1 || work < PAR_MIN {
        return serial(m, n, k, a, b, c, accumulate);
    }
    // One slab of whole micro-tiles per thread, along the longer side of C.
    if m >= n || n < 2 * NR {
        let per = m.div_ceil(t).div_ceil(MR) * MR;
        crate::par::for_each(m.div_ceil(per), |i| {
            let (a, b, c) = (a, b, c);
            let r0 = i * per;
            let a2 = M {
                p: a.p.wrapping_offset(r0 as isize * a.rs),
                ..a
            };
            let c2 = M {
                p: c.p.wrapping_offset(r0 as isize * c.rs),
                ..c
            };
            serial(per.min(m - r0), n, k, a2, b, c2, accumulate)
        });
    } else {
        let per = n.div_ceil(t).div_ceil(NR) * NR;
        crate::par::for_each(n.div_ceil(per), |i| {
            let (a, b, c) = (a, b, c);
            let c0 = i * per;
            let b2 = M {
                p: b.p.wrapping_offset(c0 as isize * b.cs),
                ..b
            };
            let c2 = M {
                p: c.p.wrapping_offset(c0 as isize * c.cs),
                ..c
            };
            serial(m, per.min(n - c0), k, a, b2, c2, accumulate)
        });
    }
}

/// One thread's product.
fn serial(m: usize, n: usize, k: usize, a: M<u16>, b: M<u16>, c: M<f32>, accumulate: bool) {
    if k == 0 {
        if !accumulate {
            for i in 0..m as isize {
                for j in 0..n as isize {
                    // SAFETY: inside C.
                    unsafe { *c.p.offset(i * c.rs + j * c.cs) = 0.0 };
                }
            }
        }
        return;
    }
    let k2 = k.div_ceil(2);
    let kcb = k2.div_ceil(k2.div_ceil(KC2));
    PACK.with(|bufs| {
        let mut own = (Buf::new(), Buf::new());
        let mut guard = bufs.try_borrow_mut();
        let (ab, bb) = match guard.as_deref_mut() {
            Ok(v) => v,
            Err(_) => &mut own,
        };
        let ap = ab.get(MC * kcb);
        let bp = bb.get(kcb * NC.min(n.div_ceil(NR) * NR));
        let mut jc = 0;
        while jc < n {
            let nc = NC.min(n - jc);
            let mut pc = 0;
            while pc < k2 {
                let kc = kcb.min(k2 - pc);
                // SAFETY: buffers sized for the blocks; operand ranges from the caller.
                unsafe {
                    pack_b(
                        kc,
                        nc,
                        pc,
                        k,
                        b.p.offset(jc as isize * b.cs),
                        b.rs,
                        b.cs,
                        bp,
                    );
                }
                let add = accumulate || pc > 0;
                let mut ic = 0;
                while ic < m {
                    let mc = MC.min(m - ic);
                    // SAFETY: as above; C's block lies inside the caller's range.
                    unsafe {
                        pack_a(
                            mc,
                            kc,
                            pc,
                            k,
                            a.p.offset(ic as isize * a.rs),
                            a.rs,
                            a.cs,
                            ap,
                        );
                        macro_kernel(
                            mc,
                            nc,
                            kc,
                            ap,
                            bp,
                            c.p.offset(ic as isize * c.rs + jc as isize * c.cs),
                            c.rs,
                            c.cs,
                            add,
                        );
                    }
                    ic += mc;
                }
                pc += kc;
            }
            jc += nc;
        }
    })
}

/// The pair word of elements `kk` and `kk + 1` of a strided line (`st`
/// apart), the second zero when `kk + 1 == k`.
#[inline(always)]
unsafe fn pair(p: *const u16, kk: usize, k: usize, st: isize) -> u32 {
    let lo = *p.offset(kk as isize * st) as u32;
    let hi = if kk + 1 < k {
        *p.offset((kk + 1) as isize * st) as u32
    } else {
        0
    };
    lo | (hi << 16)
}

/// Pack pairs `p0..p0 + kc` of the `k × nc` block `b` into `NR`-column panels
/// (`dst[(panel * kc + p) * NR + j]`); columns past `nc` are zero.
///
/// # Safety
/// `b` valid for `k × nc` at its strides; `dst` for `kc × nc` rounded up to `NR` columns.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_b(
    kc: usize,
    nc: usize,
    p0: usize,
    k: usize,
    b: *const u16,
    rs: isize,
    cs: isize,
    dst: *mut u32,
) {
    for jp in 0..nc.div_ceil(NR) {
        let cols = NR.min(nc - jp * NR);
        let panel = dst.add(jp * kc * NR);
        for p in 0..kc {
            let kk = 2 * (p0 + p);
            let row = panel.add(p * NR);
            let (r0, r1) = (
                b.offset(kk as isize * rs + (jp * NR) as isize * cs),
                b.offset((kk + 1).min(k - 1) as isize * rs + (jp * NR) as isize * cs),
            );
            let second = kk + 1 < k;
            if rs == 1 && second {
                // Columns contiguous along K (a transposed view): both halves
                // of a pair are adjacent, one unaligned word each.
                for j in 0..cols {
                    *row.add(j) = (r0.offset(j as isize * cs) as *const u32).read_unaligned();
                }
                for j in cols..NR {
                    *row.add(j) = 0;
                }
                continue;
            }
            for j in 0..cols {
                let lo = *r0.offset(j as isize * cs) as u32;
                let hi = if second {
                    *r1.offset(j as isize * cs) as u32
                } else {
                    0
                };
                *row.add(j) = lo | (hi << 16);
            }
            for j in cols..NR {
                *row.add(j) = 0;
            }
        }
    }
}

/// Pack pairs `p0..p0 + kc` of the `mc × k` block `a` into `MR`-row panels
/// (`dst[(panel * kc + p) * MR + i]`); rows past `mc` are zero.
///
/// # Safety
/// `a` valid for `mc × k` at its strides; `dst` for `kc × mc` rounded up to `MR` rows.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_a(
    mc: usize,
    kc: usize,
    p0: usize,
    k: usize,
    a: *const u16,
    rs: isize,
    cs: isize,
    dst: *mut u32,
) {
    for ip in 0..mc.div_ceil(MR) {
        let rows = MR.min(mc - ip * MR);
        let panel = dst.add(ip * kc * MR);
        if cs != 1 {
            // Rows along the inner loop: a transposed view reads them from
            // one contiguous run per K index.
            let base = a.offset((ip * MR) as isize * rs);
            for p in 0..kc {
                let kk = 2 * (p0 + p);
                for i in 0..MR {
                    *panel.add(p * MR + i) = if i < rows {
                        pair(base.offset(i as isize * rs), kk, k, cs)
                    } else {
                        0
                    };
                }
            }
            continue;
        }
        for i in 0..MR {
            if i >= rows {
                for p in 0..kc {
                    *panel.add(p * MR + i) = 0;
                }
                continue;
            }
            // Both halves of a pair are adjacent: one unaligned word.
            let line = a.offset((ip * MR + i) as isize * rs);
            for p in 0..kc {
                let kk = 2 * (p0 + p);
                *panel.add(p * MR + i) = if kk + 1 < k {
                    (line.add(kk) as *const u32).read_unaligned()
                } else {
                    *line.add(kk) as u32
                };
            }
        }
    }
}

/// All micro-tiles of one packed `mc × nc` block.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel(
    mc: usize,
    nc: usize,
    kc: usize,
    ap: *const u32,
    bp: *const u32,
    c: *mut f32,
    rs: isize,
    cs: isize,
    add: bool,
) {
    let mut jr = 0;
    while jr < nc {
        let nr = NR.min(nc - jr);
        let mut ir = 0;
        while ir < mc {
            let mr = MR.min(mc - ir);
            kernel(
                kc,
                ap.add(ir * kc),
                bp.add(jr * kc),
                c.offset(ir as isize * rs + jr as isize * cs),
                rs,
                cs,
                add,
                mr,
                nr,
            );
            ir += MR;
        }
        jr += NR;
    }
}

/// The 12×32 micro-kernel, with fewer accumulator rows for short edge tiles.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    kc: usize,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    rs: isize,
    cs: isize,
    add: bool,
    mr: usize,
    nr: usize,
) {
    if mr > 8 {
        kernel_rx32::<12>(kc, a, b, c, rs, cs, add, mr, nr)
    } else if mr > 4 {
        kernel_rx32::<8>(kc, a, b, c, rs, cs, add, mr, nr)
    } else {
        kernel_rx32::<4>(kc, a, b, c, rs, cs, add, mr, nr)
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    _kc: usize,
    _a: *const u32,
    _b: *const u32,
    _c: *mut f32,
    _rs: isize,
    _cs: isize,
    _add: bool,
    _mr: usize,
    _nr: usize,
) {
    unreachable!("bf16gemm::available() is false off x86-64")
}

/// The first `R` rows of the 12×32 kernel (`mr <= R`): the packed A panel
/// keeps its 12-word steps.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512bf16,avx512f")]
unsafe fn kernel_rx32<const R: usize>(
    kc: usize,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    rs: isize,
    cs: isize,
    add: bool,
    mr: usize,
    nr: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let (mut a, mut b) = (a, b);
    macro_rules! step {
        () => {{
            let b0: __m512bh = std::mem::transmute(_mm512_load_si512(b as *const _));
            let b1: __m512bh = std::mem::transmute(_mm512_load_si512(b.add(16) as *const _));
            for (r, row) in acc.iter_mut().enumerate() {
                let x: __m512bh = std::mem::transmute(_mm512_set1_epi32(*a.add(r) as i32));
                row[0] = _mm512_dpbf16_ps(row[0], x, b0);
                row[1] = _mm512_dpbf16_ps(row[1], x, b1);
            }
            a = a.add(MR);
            b = b.add(NR);
        }};
    }
    let mut p = 0;
    while p + 4 <= kc {
        _mm_prefetch::<_MM_HINT_T0>(b.add(NR * 8) as *const i8);
        step!();
        step!();
        step!();
        step!();
        p += 4;
    }
    while p < kc {
        step!();
        p += 1;
    }
    if mr == R && nr == NR && cs == 1 {
        for (r, row) in acc.iter().enumerate() {
            let cp = c.offset(r as isize * rs);
            let (mut v0, mut v1) = (row[0], row[1]);
            if add {
                v0 = _mm512_add_ps(v0, _mm512_loadu_ps(cp));
                v1 = _mm512_add_ps(v1, _mm512_loadu_ps(cp.add(16)));
            }
            _mm512_storeu_ps(cp, v0);
            _mm512_storeu_ps(cp.add(16), v1);
        }
    } else {
        let mut tile = [0f32; MR * NR];
        for (r, row) in acc.iter().enumerate() {
            _mm512_storeu_ps(tile.as_mut_ptr().add(r * NR), row[0]);
            _mm512_storeu_ps(tile.as_mut_ptr().add(r * NR + 16), row[1]);
        }
        for r in 0..mr {
            for j in 0..nr {
                let cp = c.offset(r as isize * rs + j as isize * cs);
                let v = tile[r * NR + j];
                *cp = if add { *cp + v } else { v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// Deterministic values in [-2, 2) rounded to bfloat16.
    fn values(n: usize, seed: u64) -> Vec<bf16> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                bf16::from_f32(((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0)
            })
            .collect()
    }

    /// Checks `c (+)= a @ b` against a float64 sum of the same bfloat16
    /// values: the error bound is float32 accumulation over `k` terms,
    /// relative to `Σ|a||b|`.
    #[allow(clippy::too_many_arguments)]
    fn check(m: usize, n: usize, k: usize, a_t: bool, b_t: bool, acc: bool, threads: usize) {
        let a = values(m * k, (m * 31 + k) as u64);
        let b = values(k * n, (n * 17 + k + 5) as u64);
        // a stored row-major (m×k) or transposed (k×m); same for b.
        let (ars, acs) = if a_t {
            (1, m as isize)
        } else {
            (k as isize, 1)
        };
        let (brs, bcs) = if b_t {
            (1, k as isize)
        } else {
            (n as isize, 1)
        };
        // C column-strided with a gap, to exercise strided stores.
        let (crs, ccs) = (1isize, m as isize + 3);
        let mut c = vec![0.5f32; (m + 3) * n.max(1)];
        let c0 = c.clone();
        // SAFETY: buffers sized for the strided ranges above.
        unsafe {
            gemm(
                m,
                n,
                k,
                a.as_ptr() as *const u16,
                ars,
                acs,
                b.as_ptr() as *const u16,
                brs,
                bcs,
                c.as_mut_ptr(),
                crs,
                ccs,
                acc,
                threads,
            )
        };
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0f64, 0f64);
                for p in 0..k {
                    let x = a[(i as isize * ars + p as isize * acs) as usize].to_f64();
                    let y = b[(p as isize * brs + j as isize * bcs) as usize].to_f64();
                    s += x * y;
                    mag += (x * y).abs();
                }
                let idx = (i as isize * crs + j as isize * ccs) as usize;
                let base = if acc { c0[idx] as f64 } else { 0.0 };
                let want = base + s;
                let tol = (k as f64 + 2.0) * f32::EPSILON as f64 * (mag + base.abs()) + 1e-30;
                let got = c[idx] as f64;
                assert!(
                    (got - want).abs() <= tol,
                    "{m}x{k}@{k}x{n} (a_t={a_t} b_t={b_t} acc={acc}) [{i},{j}]: {got} vs {want}"
                );
            }
        }
        // Elements between C's columns are untouched.
        for j in 0..n {
            for g in m..m + 3 {
                assert_eq!(c[j * (m + 3) + g], 0.5);
            }
        }
    }

    #[test]
    fn matches_float64_sums() {
        if !available() {
            eprintln!("skipped: the CPU lacks avx512bf16 (or the SIMD level is below AVX-512)");
            return;
        }
        for &(m, n, k) in &[
            (1, 1, 1),
            (3, 5, 1),
            (12, 32, 2),
            (13, 33, 7),
            (25, 70, 513),
            (40, 9, 1030),
        ] {
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                check(m, n, k, a_t, b_t, false, 1);
            }
            check(m, n, k, false, false, true, 1);
        }
        // k = 0 writes zeros (or leaves C when accumulating).
        check(4, 4, 0, false, false, false, 1);
        check(4, 4, 0, false, false, true, 1);
        // Threaded: slabs of rows, then of columns.
        check(200, 64, 300, false, true, false, 4);
        check(24, 300, 200, true, false, true, 3);
    }
}
