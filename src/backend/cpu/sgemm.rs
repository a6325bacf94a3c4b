//! A float32 GEMM for x86-64 in the classic packed layout: `B` is packed
//! into `KC × NR` column panels, `A` into `MR × KC` row panels, and a
//! register-blocked micro-kernel updates `C`. Two micro-kernels share the
//! blocking code: 6×16 with AVX2+FMA (12 ymm accumulators) and 12×32 with
//! AVX-512 (24 zmm accumulators), picked by the CPU level in use. Several threads each take a slab of rows (or columns) of `C`
//! and run the whole blocked loop on it with their own packing buffers.
//!
//! Operands may have any strides (transposed views are packed directly);
//! `C` is written through its strides.

use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

const KC: usize = 256;
const NC: usize = 3072;

/// A register-blocked micro-kernel and the tile shape it computes.
trait Micro {
    /// Rows of C per tile (the A panel height).
    const MR: usize;
    /// Columns of C per tile (the B panel width; a multiple of 8).
    const NR: usize;
    /// Rows of A packed per block (a multiple of `MR`).
    const MC: usize;
    /// `C[0..mr, 0..nr] (+)= Ap · Bp` over `kc` steps.
    ///
    /// # Safety
    /// The CPU has the kernel's features; packed panels hold `kc` steps;
    /// C is valid for `mr × nr` elements at the given strides.
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        rs: isize,
        cs: isize,
        add: bool,
        mr: usize,
        nr: usize,
    );
}

/// The 6×16 AVX2+FMA kernel.
struct Avx2;
/// The 12×32 AVX-512 kernel.
struct Avx512;

impl Micro for Avx2 {
    const MR: usize = 6;
    const NR: usize = 16;
    const MC: usize = 144;
    unsafe fn kernel(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        rs: isize,
        cs: isize,
        add: bool,
        mr: usize,
        nr: usize,
    ) {
        kernel_6x16(kc, a, b, c, rs, cs, add, mr, nr)
    }
}

impl Micro for Avx512 {
    const MR: usize = 12;
    const NR: usize = 32;
    // A 432×256 block (432 KiB) sits well inside a 1–2 MiB L2 and re-reads
    // each packed B panel from L1 over 36 tiles (measured: 144 rows left
    // large squares ~20% slower).
    const MC: usize = 432;
    unsafe fn kernel(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        rs: isize,
        cs: isize,
        add: bool,
        mr: usize,
        nr: usize,
    ) {
        kernel_12x32(kc, a, b, c, rs, cs, add, mr, nr)
    }
}

/// Below this many multiply-adds a product runs on one thread.
const PAR_MIN: usize = 1 << 20;
/// From this many multiply-adds on, threads share each packed block of B.
const SHARED_MIN: usize = 1 << 24;

/// A 64-byte aligned scratch buffer of f32, grown on demand.
struct Buf {
    v: Vec<f32>,
}

impl Buf {
    const fn new() -> Buf {
        Buf { v: Vec::new() }
    }
    /// An aligned pointer to at least `n` floats.
    fn get(&mut self, n: usize) -> *mut f32 {
        if self.v.len() < n + 16 {
            self.v = vec![0.0; n + 16];
        }
        let p = self.v.as_mut_ptr();
        let mis = (p as usize / 4) % 16;
        // SAFETY: at most 15 floats of the 16 spare ones are skipped.
        unsafe { p.add((16 - mis) % 16) }
    }
}

thread_local! {
    /// Per-thread packing buffers for A and (single-threaded products) B.
    static PACK: RefCell<(Buf, Buf)> = const { RefCell::new((Buf::new(), Buf::new())) };
    /// The calling thread's buffer for a B block shared by all threads.
    static SHARED_B: RefCell<Buf> = const { RefCell::new(Buf::new()) };
}

/// Whether the kernel can run on this CPU.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Raw matrix view.
#[derive(Copy, Clone)]
struct M {
    p: *mut f32,
    rs: isize,
    cs: isize,
}
unsafe impl Send for M {}
unsafe impl Sync for M {}

/// `c (+)= a @ b` (`m×k` times `k×n`) on up to `threads` threads.
///
/// # Safety
/// [`available`] must be true; pointers valid for the strided ranges; `c`
/// must not overlap `a` or `b` and its own elements must be distinct.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm(
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
) {
    let args = (m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs);
    if avx512() {
        sgemm_k::<Avx512>(args, accumulate, threads)
    } else {
        sgemm_k::<Avx2>(args, accumulate, threads)
    }
}

/// Whether the AVX-512 kernel is usable and allowed by the CPU level in use.
fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::simd::level() >= super::simd::Level::Avx512 && is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Operands of one product: `(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs)`.
type Args = (
    usize,
    usize,
    usize,
    *const f32,
    isize,
    isize,
    *const f32,
    isize,
    isize,
    *mut f32,
    isize,
    isize,
);

/// [`sgemm`] with a given micro-kernel.
unsafe fn sgemm_k<K: Micro>(args: Args, accumulate: bool, threads: usize) {
    let (m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs) = args;
    sgemm_body::<K>(
        m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, accumulate, threads,
    )
}

#[allow(clippy::too_many_arguments)]
unsafe fn sgemm_body<K: Micro>(
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
) {
    let a = M {
        p: a as *mut f32,
        rs: a_rs,
        cs: a_cs,
    };
    let b = M {
        p: b as *mut f32,
        rs: b_rs,
        cs: b_cs,
    };
    let c = M {
        p: c,
        rs: c_rs,
        cs: c_cs,
    };
    if m == 0 || n == 0 {
        return;
    }
    let work = m.saturating_mul(n).saturating_mul(k);
    let t = threads.max(1);
    if t == 1 || work < PAR_MIN {
        return serial::<K>(m, n, k, a, b, c, accumulate);
    }
    // Split the longer side of C into one slab per thread (whole micro-tiles).
    if m >= n || n < 2 * K::NR {
        if k == 0 || work < SHARED_MIN {
            // Small: independent slabs, one fork-join in all.
            let per = m.div_ceil(t).div_ceil(K::MR) * K::MR;
            crate::par::for_each(m.div_ceil(per), |i| {
                // whole structs are captured (not their raw-pointer fields)
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
                serial::<K>(per.min(m - r0), n, k, a2, b, c2, accumulate)
            });
            return;
        }
        SHARED_B.with(|cell| {
            // A nested call on this thread (not expected) gets its own buffer.
            let mut own = Buf::new();
            let mut guard = cell.try_borrow_mut();
            let buf = match guard.as_deref_mut() {
                Ok(b) => b,
                Err(_) => &mut own,
            };
            let bp = buf.get(KC * NC.min(n.div_ceil(K::NR) * K::NR));
            rows_shared_b::<K>(
                m,
                n,
                k,
                a,
                b,
                c,
                accumulate,
                t,
                M {
                    p: bp,
                    rs: 0,
                    cs: 0,
                },
            );
        });
    } else {
        let per = n.div_ceil(t).div_ceil(K::NR) * K::NR;
        let slabs = n.div_ceil(per);
        crate::par::for_each(slabs, |i| {
            let (a, b, c) = (a, b, c);
            let c0 = i * per;
            let cols = per.min(n - c0);
            let b2 = M {
                p: b.p.wrapping_offset(c0 as isize * b.cs),
                ..b
            };
            let c2 = M {
                p: c.p.wrapping_offset(c0 as isize * c.cs),
                ..c
            };
            serial::<K>(m, cols, k, a, b2, c2, accumulate)
        });
    }
}

fn serial<K: Micro>(m: usize, n: usize, k: usize, a: M, b: M, c: M, accumulate: bool) {
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
    PACK.with(|bufs| {
        let mut own = (Buf::new(), Buf::new());
        let mut guard = bufs.try_borrow_mut();
        let (ab, bb) = match guard.as_deref_mut() {
            Ok(v) => v,
            Err(_) => &mut own,
        };
        let ap = ab.get(K::MC * KC + A_SLACK);
        let bp = bb.get(KC * NC.min(n.div_ceil(K::NR) * K::NR));
        // SAFETY: buffers sized for the blocks; operand ranges from the caller.
        unsafe { blocked::<K>(m, n, k, a, b, c, accumulate, ap, bp) }
    })
}

/// Threads take slabs of rows; each `KC × NC` block of B is packed once,
/// split over the threads, into the shared buffer `bp`.
#[allow(clippy::too_many_arguments)]
fn rows_shared_b<K: Micro>(
    m: usize,
    n: usize,
    k: usize,
    a: M,
    b: M,
    c: M,
    accumulate: bool,
    t: usize,
    bp: M,
) {
    let kcb = k.div_ceil(k.div_ceil(KC));
    let per = m.div_ceil(t).div_ceil(K::MR) * K::MR;
    let slabs = m.div_ceil(per);
    // One closure so that an interrupt can leave both loops at once.
    let blocks = || {
        let mut jc = 0;
        while jc < n {
            let nc = NC.min(n - jc);
            let panels = nc.div_ceil(K::NR);
            let pp = panels.div_ceil(t);
            let mut pc = 0;
            while pc < k {
                if crate::par::cancelled() {
                    return;
                }
                let kc = kcb.min(k - pc);
                crate::par::for_each(panels.div_ceil(pp), |i| {
                    let (b, bp) = (b, bp);
                    let c0 = i * pp * K::NR;
                    let cols = (pp * K::NR).min(nc - c0);
                    // SAFETY: disjoint panels of the shared buffer; B ranges from the caller.
                    unsafe {
                        pack_b::<K>(
                            kc,
                            cols,
                            b.p.offset(pc as isize * b.rs + (jc + c0) as isize * b.cs),
                            b.rs,
                            b.cs,
                            bp.p.add(c0 * kc),
                        )
                    }
                });
                let add = accumulate || pc > 0;
                crate::par::for_each(slabs, |i| {
                    let (a, c, bp) = (a, c, bp);
                    let r0 = i * per;
                    let rows = per.min(m - r0);
                    let mcb = rows.div_ceil(rows.div_ceil(K::MC)).div_ceil(K::MR) * K::MR;
                    PACK.with(|bufs| {
                        let mut own = Buf::new();
                        let mut guard = bufs.try_borrow_mut();
                        let ab = match guard.as_deref_mut() {
                            Ok((ab, _)) => ab,
                            Err(_) => &mut own,
                        };
                        let ap = ab.get(K::MC * KC + A_SLACK);
                        let mut ic = r0;
                        while ic < r0 + rows {
                            let mc = mcb.min(r0 + rows - ic);
                            // SAFETY: this slab's rows of A and C; packed B is complete.
                            unsafe {
                                pack_a::<K>(
                                    mc,
                                    kc,
                                    a.p.offset(ic as isize * a.rs + pc as isize * a.cs),
                                    a.rs,
                                    a.cs,
                                    ap,
                                );
                                macro_kernel::<K>(
                                    mc,
                                    nc,
                                    kc,
                                    ap,
                                    bp.p,
                                    c.p.offset(ic as isize * c.rs + jc as isize * c.cs),
                                    c.rs,
                                    c.cs,
                                    add,
                                );
                            }
                            ic += mcb;
                        }
                    });
                });
                pc += kcb;
            }
            jc += NC;
        }
    };
    blocks();
}

/// All micro-tiles of one packed `mc × kc` A block against one packed `kc × nc` B block.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn macro_kernel<K: Micro>(
    mc: usize,
    nc: usize,
    kc: usize,
    ap: *const f32,
    bp: *const f32,
    c: *mut f32,
    rs: isize,
    cs: isize,
    add: bool,
) {
    let mut jr = 0;
    while jr < nc {
        let nr = K::NR.min(nc - jr);
        let mut ir = 0;
        while ir < mc {
            let mr = K::MR.min(mc - ir);
            K::kernel(
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
            ir += K::MR;
        }
        jr += K::NR;
    }
}

#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn blocked<K: Micro>(
    m: usize,
    n: usize,
    k: usize,
    a: M,
    b: M,
    c: M,
    accumulate: bool,
    ap: *mut f32,
    bp: *mut f32,
) {
    // Even block sizes: no thin last block along k or m.
    let kcb = k.div_ceil(k.div_ceil(KC));
    let mcb = m.div_ceil(m.div_ceil(K::MC)).div_ceil(K::MR) * K::MR;
    let mut jc = 0;
    while jc < n {
        let nc = NC.min(n - jc);
        let mut pc = 0;
        while pc < k {
            let kc = kcb.min(k - pc);
            pack_b::<K>(
                kc,
                nc,
                b.p.offset(pc as isize * b.rs + jc as isize * b.cs),
                b.rs,
                b.cs,
                bp,
            );
            let add = accumulate || pc > 0;
            let mut ic = 0;
            while ic < m {
                let mc = mcb.min(m - ic);
                pack_a::<K>(
                    mc,
                    kc,
                    a.p.offset(ic as isize * a.rs + pc as isize * a.cs),
                    a.rs,
                    a.cs,
                    ap,
                );
                macro_kernel::<K>(
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
                ic += mcb;
            }
            pc += kcb;
        }
        jc += NC;
    }
}

/// A whole `k × n` B operand packed once into the kernel's panel layout
/// (see [`pack_whole`]): for every `k` block of the blocked loop, all of
/// its `NR`-column panels, so a product reads its B blocks from here
/// instead of packing them on every call. The arithmetic is the same as
/// [`sgemm`]'s: same `k` blocks, same micro-kernel, same order of sums.
pub struct PackedB {
    k: usize,
    n: usize,
    /// Columns rounded up to whole panels.
    n_pad: usize,
    /// Packed by (and for) the AVX-512 kernel, else the AVX2 one.
    avx512: bool,
    buf: Vec<f32>,
    start: usize,
}

impl PackedB {
    /// Rows (`k`) and columns (`n`) of the packed operand.
    pub fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.buf.len() * 4
    }
    fn base(&self) -> *const f32 {
        // SAFETY: `start` < 16 floats into a buffer at least that long.
        unsafe { self.buf.as_ptr().add(self.start) }
    }
}

/// Pack all of the `k × n` operand `b` (strides `b_rs`, `b_cs`) for
/// [`sgemm_packed`].
///
/// # Safety
/// [`available`] must be true; `b` valid for the strided range.
pub unsafe fn pack_whole(k: usize, n: usize, b: *const f32, b_rs: isize, b_cs: isize) -> PackedB {
    if avx512() {
        pack_whole_k::<Avx512>(k, n, b, b_rs, b_cs, true)
    } else {
        pack_whole_k::<Avx2>(k, n, b, b_rs, b_cs, false)
    }
}

unsafe fn pack_whole_k<K: Micro>(
    k: usize,
    n: usize,
    b: *const f32,
    b_rs: isize,
    b_cs: isize,
    avx512: bool,
) -> PackedB {
    let n_pad = n.div_ceil(K::NR) * K::NR;
    let mut buf = vec![0.0f32; k * n_pad + 16];
    let mis = (buf.as_ptr() as usize / 4) % 16;
    let start = (16 - mis) % 16;
    let base = buf.as_mut_ptr().add(start);
    if k > 0 {
        let kcb = k.div_ceil(k.div_ceil(KC));
        let mut pc = 0;
        while pc < k {
            let kc = kcb.min(k - pc);
            // Block `pc` holds `kc × n_pad` floats after the blocks before it.
            pack_b::<K>(
                kc,
                n,
                b.offset(pc as isize * b_rs),
                b_rs,
                b_cs,
                base.add(pc * n_pad),
            );
            pc += kcb;
        }
    }
    PackedB {
        k,
        n,
        n_pad,
        avx512,
        buf,
        start,
    }
}

/// The callback [`sgemm_packed`] calls on each finished block of C:
/// `(first row, rows, first column, columns)`; every block is reported
/// once, by the thread that computed it, right after its last `k` block.
pub type Epilogue<'a> = &'a (dyn Fn(usize, usize, usize, usize) + Sync);

/// `c (+)= a @ B` (`m×k` times the packed `k×n`) on up to `threads`
/// threads; with `init` (a row of `n` floats) C starts from that row
/// instead of zero (as copying it into C and accumulating would); `epi`
/// runs on every finished block of C while it is in cache. Each element
/// gets the same operations in the same order as from [`sgemm`].
///
/// # Safety
/// `b` was packed on this CPU; pointers valid for the strided ranges; `c`
/// must not overlap `a`, `init` or itself.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_packed(
    m: usize,
    a: *const f32,
    a_rs: isize,
    a_cs: isize,
    b: &PackedB,
    init: Option<*const f32>,
    c: *mut f32,
    c_rs: isize,
    c_cs: isize,
    threads: usize,
    epi: Epilogue,
) {
    let a = M {
        p: a as *mut f32,
        rs: a_rs,
        cs: a_cs,
    };
    let c = M {
        p: c,
        rs: c_rs,
        cs: c_cs,
    };
    let init = init.map(|p| M {
        p: p as *mut f32,
        rs: 0,
        cs: 1,
    });
    if b.avx512 {
        packed_k::<Avx512>(m, a, b, init, c, threads, epi)
    } else {
        packed_k::<Avx2>(m, a, b, init, c, threads, epi)
    }
}

/// [`sgemm_packed`] with a given micro-kernel.
unsafe fn packed_k<K: Micro>(
    m: usize,
    a: M,
    b: &PackedB,
    init: Option<M>,
    c: M,
    threads: usize,
    epi: Epilogue,
) {
    let (n, k) = (b.n, b.k);
    if m == 0 || n == 0 {
        return;
    }
    let work = m.saturating_mul(n).saturating_mul(k);
    let t = threads.max(1);
    let slab = |r0: usize, rows: usize, c0: usize, cols: usize| {
        let (a, c, init) = (a, c, init);
        // SAFETY: disjoint slabs of C; ranges from the caller.
        unsafe { packed_slab::<K>(a, b, init, c, r0, rows, c0, cols, epi) }
    };
    if t == 1 || work < PAR_MIN {
        slab(0, m, 0, n);
    } else if m >= n || n < 2 * K::NR {
        let per = m.div_ceil(t).div_ceil(K::MR) * K::MR;
        crate::par::for_each(m.div_ceil(per), |i| {
            let r0 = i * per;
            slab(r0, per.min(m - r0), 0, n)
        });
    } else {
        let per = n.div_ceil(t).div_ceil(K::NR) * K::NR;
        crate::par::for_each(n.div_ceil(per), |i| {
            let c0 = i * per;
            slab(0, m, c0, per.min(n - c0))
        });
    }
}

/// Rows `r0..r0+rows` by columns `c0..c0+cols` of C (`c0` a whole number
/// of panels) from the packed B, one `mc × nc` block of C at a time, all
/// `k` blocks in order, then the epilogue.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn packed_slab<K: Micro>(
    a: M,
    b: &PackedB,
    init: Option<M>,
    c: M,
    r0: usize,
    rows: usize,
    c0: usize,
    cols: usize,
    epi: Epilogue,
) {
    let k = b.k;
    let kcb = if k == 0 {
        1
    } else {
        k.div_ceil(k.div_ceil(KC))
    };
    let mcb = rows.div_ceil(rows.div_ceil(K::MC)).div_ceil(K::MR) * K::MR;
    PACK.with(|bufs| {
        let mut own = Buf::new();
        let mut guard = bufs.try_borrow_mut();
        let ab = match guard.as_deref_mut() {
            Ok((ab, _)) => ab,
            Err(_) => &mut own,
        };
        let ap = ab.get(K::MC * KC + A_SLACK);
        let mut jc = c0;
        while jc < c0 + cols {
            let nc = NC.min(c0 + cols - jc);
            let mut ic = r0;
            while ic < r0 + rows {
                let mc = mcb.min(r0 + rows - ic);
                let cb = c.p.offset(ic as isize * c.rs + jc as isize * c.cs);
                if let Some(init) = init {
                    for i in 0..mc as isize {
                        for j in 0..nc {
                            *cb.offset(i * c.rs + j as isize * c.cs) = *init.p.add(jc + j);
                        }
                    }
                } else if k == 0 {
                    for i in 0..mc as isize {
                        for j in 0..nc as isize {
                            *cb.offset(i * c.rs + j * c.cs) = 0.0;
                        }
                    }
                }
                let mut pc = 0;
                while pc < k {
                    let kc = kcb.min(k - pc);
                    pack_a::<K>(
                        mc,
                        kc,
                        a.p.offset(ic as isize * a.rs + pc as isize * a.cs),
                        a.rs,
                        a.cs,
                        ap,
                    );
                    macro_kernel::<K>(
                        mc,
                        nc,
                        kc,
                        ap,
                        b.base().add(pc * b.n_pad + jc * kc),
                        cb,
                        c.rs,
                        c.cs,
                        init.is_some() || pc > 0,
                    );
                    pc += kcb;
                }
                epi(ic, mc, jc, nc);
                ic += mcb;
            }
            jc += NC;
        }
    });
}

/// Floats after a packed A block that [`pack_a`] may scribble on.
const A_SLACK: usize = 8;

/// Pack an `mc × kc` block of A into `MR`-row panels (`[kc][MR]` each), zero-padded.
///
/// The destination needs [`A_SLACK`] floats of room after the block.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn pack_a<K: Micro>(
    mc: usize,
    kc: usize,
    a: *const f32,
    rs: isize,
    cs: isize,
    dst: *mut f32,
) {
    let mut r0 = 0;
    while r0 < mc {
        let rows = K::MR.min(mc - r0);
        let d = dst.add(r0 * kc);
        let src = a.offset(r0 as isize * rs);
        if rows == K::MR && cs == 1 {
            let mut k0 = 0;
            #[cfg(target_arch = "x86_64")]
            if K::MR == 6 {
                while k0 + 8 <= kc {
                    pack_a6_x8(src.add(k0), rs, d.add(k0 * 6));
                    k0 += 8;
                }
            } else if K::MR == 12 {
                while k0 + 8 <= kc {
                    pack_a12_x8(src.add(k0), rs, d.add(k0 * 12));
                    k0 += 8;
                }
            }
            for r in 0..K::MR {
                let s = src.offset(r as isize * rs);
                for kk in k0..kc {
                    *d.add(kk * K::MR + r) = *s.add(kk);
                }
            }
        } else if rows == K::MR && rs == 1 {
            for kk in 0..kc {
                let s = src.offset(kk as isize * cs);
                for r in 0..K::MR {
                    *d.add(kk * K::MR + r) = *s.add(r);
                }
            }
        } else {
            for kk in 0..kc {
                for r in 0..K::MR {
                    *d.add(kk * K::MR + r) = if r < rows {
                        *src.offset(r as isize * rs + kk as isize * cs)
                    } else {
                        0.0
                    };
                }
            }
        }
        r0 += K::MR;
    }
}

/// Pack a `kc × nc` block of B into `NR`-column panels (`[kc][NR]` each), zero-padded.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn pack_b<K: Micro>(
    kc: usize,
    nc: usize,
    b: *const f32,
    rs: isize,
    cs: isize,
    dst: *mut f32,
) {
    let mut c0 = 0;
    while c0 < nc {
        let cols = K::NR.min(nc - c0);
        let d = dst.add(c0 * kc);
        let src = b.offset(c0 as isize * cs);
        if cols == K::NR && cs == 1 {
            for kk in 0..kc {
                std::ptr::copy_nonoverlapping(
                    src.offset(kk as isize * rs),
                    d.add(kk * K::NR),
                    K::NR,
                );
            }
        } else if cols == K::NR && rs == 1 {
            // Columns are contiguous along k: transpose 8×8 blocks in registers.
            let mut kk = 0;
            #[cfg(target_arch = "x86_64")]
            while kk + 8 <= kc {
                for jb in (0..K::NR).step_by(8) {
                    transpose8(
                        src.offset(jb as isize * cs).add(kk),
                        cs,
                        d.add(kk * K::NR + jb),
                        K::NR,
                    );
                }
                kk += 8;
            }
            for j in 0..K::NR {
                let s = src.offset(j as isize * cs);
                for k2 in kk..kc {
                    *d.add(k2 * K::NR + j) = *s.add(k2);
                }
            }
        } else {
            for kk in 0..kc {
                for j in 0..K::NR {
                    *d.add(kk * K::NR + j) = if j < cols {
                        *src.offset(kk as isize * rs + j as isize * cs)
                    } else {
                        0.0
                    };
                }
            }
        }
        c0 += K::NR;
    }
}

/// `dst[p*n + j] = b[p + j*b_cs]` for `p < k`, `j < n`: a `k×n` operand
/// whose columns are contiguous (a transposed view such as `W.T`) copied to
/// row-major order, 8×8 blocks at a time in registers.
///
/// # Safety
/// [`available`] is true; `b` is valid for the strided range and `dst` for `k*n` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn pack_transposed(k: usize, n: usize, b: *const f32, b_cs: isize, dst: *mut f32) {
    let (k8, n8) = (k / 8 * 8, n / 8 * 8);
    for j0 in (0..n8).step_by(8) {
        let col = b.offset(j0 as isize * b_cs);
        for p0 in (0..k8).step_by(8) {
            transpose8(col.add(p0), b_cs, dst.add(p0 * n + j0), n);
        }
    }
    // The ragged edges, element by element.
    for j in 0..n {
        let col = b.offset(j as isize * b_cs);
        let from = if j < n8 { k8 } else { 0 };
        for p in from..k {
            *dst.add(p * n + j) = *col.add(p);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn pack_transposed(_k: usize, _n: usize, _b: *const f32, _b_cs: isize, _dst: *mut f32) {
    unreachable!("sgemm::available() is false off x86-64")
}

/// Transpose the 8×8 block whose row `j` starts at `src + j*ld_src` into
/// `dst + i*ld_dst` (row `i` of the result = element `i` of every source row).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transpose8(src: *const f32, ld_src: isize, dst: *mut f32, ld_dst: usize) {
    let r = |j: isize| _mm256_loadu_ps(src.offset(j * ld_src));
    let t = transpose8_regs([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
    for (i, v) in t.into_iter().enumerate() {
        _mm256_storeu_ps(dst.add(i * ld_dst), v);
    }
}

/// Pack 8 steps of a 6-row A panel whose rows (`src + r*rs`) are contiguous
/// along k: `dst[kk*6 + r] = src[r*rs + kk]` for `kk < 8`. Rows are
/// transposed in registers and stored as overlapping 8-float rows in
/// increasing `kk`, so each store's two extra lanes are overwritten by the
/// next; the last one writes 2 floats past `dst + 48` (the caller leaves
/// room, and anything there is written later).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_a6_x8(src: *const f32, rs: isize, dst: *mut f32) {
    let r = |j: isize| _mm256_loadu_ps(src.offset(j * rs));
    let r5 = r(5);
    let t = transpose8_regs([r(0), r(1), r(2), r(3), r(4), r5, r5, r5]);
    for (i, v) in t.into_iter().enumerate() {
        _mm256_storeu_ps(dst.add(i * 6), v);
    }
}

/// Pack 8 steps of a 12-row A panel whose rows (`src + r*rs`) are contiguous
/// along k: `dst[kk*12 + r] = src[r*rs + kk]` for `kk < 8`. Rows 0–7 are
/// transposed as one 8×8 block; rows 8–11 go through the same transpose
/// twice over, of which each output's low four lanes are the 4×8 transpose.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_a12_x8(src: *const f32, rs: isize, dst: *mut f32) {
    let r = |j: isize| _mm256_loadu_ps(src.offset(j * rs));
    let lo = transpose8_regs([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
    let (r8, r9, r10, r11) = (r(8), r(9), r(10), r(11));
    let hi = transpose8_regs([r8, r9, r10, r11, r8, r9, r10, r11]);
    for (i, (l, h)) in lo.into_iter().zip(hi).enumerate() {
        _mm256_storeu_ps(dst.add(i * 12), l);
        _mm_storeu_ps(dst.add(i * 12 + 8), _mm256_castps256_ps128(h));
    }
}

/// The 8×8 transpose of eight row registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transpose8_regs(r: [__m256; 8]) -> [__m256; 8] {
    let [r0, r1, r2, r3, r4, r5, r6, r7] = r;
    let t0 = _mm256_unpacklo_ps(r0, r1);
    let t1 = _mm256_unpackhi_ps(r0, r1);
    let t2 = _mm256_unpacklo_ps(r2, r3);
    let t3 = _mm256_unpackhi_ps(r2, r3);
    let t4 = _mm256_unpacklo_ps(r4, r5);
    let t5 = _mm256_unpackhi_ps(r4, r5);
    let t6 = _mm256_unpacklo_ps(r6, r7);
    let t7 = _mm256_unpackhi_ps(r6, r7);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// The 6×16 micro-kernel: `C[0..mr, 0..nr] (+)= Ap · Bp` over `kc` steps.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_6x16(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    rs: isize,
    cs: isize,
    add: bool,
    mr: usize,
    nr: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; 6];
    for r in 0..6.min(mr) {
        _mm_prefetch::<_MM_HINT_T0>(c.offset(r as isize * rs) as *const i8);
    }
    let (mut a, mut b) = (a, b);
    macro_rules! step {
        () => {{
            let b0 = _mm256_load_ps(b);
            let b1 = _mm256_load_ps(b.add(8));
            let x = _mm256_broadcast_ss(&*a);
            acc[0][0] = _mm256_fmadd_ps(x, b0, acc[0][0]);
            acc[0][1] = _mm256_fmadd_ps(x, b1, acc[0][1]);
            let x = _mm256_broadcast_ss(&*a.add(1));
            acc[1][0] = _mm256_fmadd_ps(x, b0, acc[1][0]);
            acc[1][1] = _mm256_fmadd_ps(x, b1, acc[1][1]);
            let x = _mm256_broadcast_ss(&*a.add(2));
            acc[2][0] = _mm256_fmadd_ps(x, b0, acc[2][0]);
            acc[2][1] = _mm256_fmadd_ps(x, b1, acc[2][1]);
            let x = _mm256_broadcast_ss(&*a.add(3));
            acc[3][0] = _mm256_fmadd_ps(x, b0, acc[3][0]);
            acc[3][1] = _mm256_fmadd_ps(x, b1, acc[3][1]);
            let x = _mm256_broadcast_ss(&*a.add(4));
            acc[4][0] = _mm256_fmadd_ps(x, b0, acc[4][0]);
            acc[4][1] = _mm256_fmadd_ps(x, b1, acc[4][1]);
            let x = _mm256_broadcast_ss(&*a.add(5));
            acc[5][0] = _mm256_fmadd_ps(x, b0, acc[5][0]);
            acc[5][1] = _mm256_fmadd_ps(x, b1, acc[5][1]);
            a = a.add(6);
            b = b.add(16);
        }};
    }
    let mut p = 0;
    while p + 4 <= kc {
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
    if mr == 6 && nr == 16 && cs == 1 {
        for (r, row) in acc.iter().enumerate() {
            let cp = c.offset(r as isize * rs);
            let (mut v0, mut v1) = (row[0], row[1]);
            if add {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cp));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cp.add(8)));
            }
            _mm256_storeu_ps(cp, v0);
            _mm256_storeu_ps(cp.add(8), v1);
        }
    } else {
        let mut tile = [0f32; 6 * 16];
        for (r, row) in acc.iter().enumerate() {
            _mm256_storeu_ps(tile.as_mut_ptr().add(r * 16), row[0]);
            _mm256_storeu_ps(tile.as_mut_ptr().add(r * 16 + 8), row[1]);
        }
        for r in 0..mr {
            for j in 0..nr {
                let cp = c.offset(r as isize * rs + j as isize * cs);
                let v = tile[r * 16 + j];
                *cp = if add { *cp + v } else { v };
            }
        }
    }
}

/// The 12×32 AVX-512 micro-kernel: `C[0..mr, 0..nr] (+)= Ap · Bp` over `kc` steps.
///
/// A last tile of at most 8 rows runs a kernel of 4 or 8 rows, so that a
/// block of 256 rows (21 tiles and 4 rows) does not pay for 264.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn kernel_12x32(
    kc: usize,
    a: *const f32,
    b: *const f32,
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

/// The first `R` rows of the 12×32 kernel (`mr <= R`): the packed A panel
/// keeps its 12-float steps.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn kernel_rx32<const R: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    rs: isize,
    cs: isize,
    add: bool,
    mr: usize,
    nr: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for r in 0..R.min(mr) {
        _mm_prefetch::<_MM_HINT_T0>(c.offset(r as isize * rs) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(c.offset(r as isize * rs + 16 * cs) as *const i8);
    }
    let (mut a, mut b) = (a, b);
    macro_rules! step {
        () => {{
            let b0 = _mm512_loadu_ps(b);
            let b1 = _mm512_loadu_ps(b.add(16));
            for (r, row) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*a.add(r));
                row[0] = _mm512_fmadd_ps(x, b0, row[0]);
                row[1] = _mm512_fmadd_ps(x, b1, row[1]);
            }
            a = a.add(12);
            b = b.add(32);
        }};
    }
    let mut p = 0;
    while p + 4 <= kc {
        _mm_prefetch::<_MM_HINT_T0>(b.add(32 * 8) as *const i8);
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
    if mr == R && nr == 32 && cs == 1 {
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
        let mut tile = [0f32; 12 * 32];
        for (r, row) in acc.iter().enumerate() {
            _mm512_storeu_ps(tile.as_mut_ptr().add(r * 32), row[0]);
            _mm512_storeu_ps(tile.as_mut_ptr().add(r * 32 + 16), row[1]);
        }
        for r in 0..mr {
            for j in 0..nr {
                let cp = c.offset(r as isize * rs + j as isize * cs);
                let v = tile[r * 32 + j];
                *cp = if add { *cp + v } else { v };
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_6x16(
    _kc: usize,
    _a: *const f32,
    _b: *const f32,
    _c: *mut f32,
    _rs: isize,
    _cs: isize,
    _add: bool,
    _mr: usize,
    _nr: usize,
) {
    unreachable!("sgemm::available() is false off x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_12x32(
    _kc: usize,
    _a: *const f32,
    _b: *const f32,
    _c: *mut f32,
    _rs: isize,
    _cs: isize,
    _add: bool,
    _mr: usize,
    _nr: usize,
) {
    unreachable!("sgemm::available() is false off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        ar: usize,
        ac: usize,
        b: &[f32],
        br: usize,
        bc: usize,
    ) -> Vec<f64> {
        let mut c = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * ar + p * ac] as f64 * b[p * br + j * bc] as f64)
                    .sum();
            }
        }
        c
    }

    /// Every (kernel, threads, accumulate) combination this CPU can run.
    fn kernels_threads_acc() -> Vec<(u32, usize, bool)> {
        let mut kernels = vec![256];
        if is_x86_feature_detected!("avx512f") {
            kernels.push(512);
        }
        let mut v = vec![];
        for kern in kernels {
            for threads in [1, 2] {
                for acc in [false, true] {
                    v.push((kern, threads, acc));
                }
            }
        }
        v
    }

    #[test]
    fn matches_naive_for_layouts_edges_and_threads() {
        if !available() {
            return;
        }
        let sizes = [
            (1, 1, 1),
            (6, 16, 8),
            (13, 37, 300),
            (150, 40, 513),
            (7, 3100, 20),
            (200, 300, 100),
            (301, 200, 400),
            (12, 32, 9),
            (25, 65, 257),
            (290, 700, 300),
            (0, 3, 4),
            (3, 4, 0),
        ];
        for &(m, n, k) in &sizes {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 7919 % 97) as f32 - 48.0) / 50.0)
                    .collect();
                let b: Vec<f32> = (0..k * n)
                    .map(|i| ((i * 104729 % 89) as f32 - 44.0) / 40.0)
                    .collect();
                let (ar, ac) = if ta { (1, m) } else { (k, 1) };
                let (br, bc) = if tb { (1, k) } else { (n, 1) };
                let want = naive(m, n, k, &a, ar, ac, &b, br, bc);
                for (kern, threads, acc) in kernels_threads_acc() {
                    {
                        let mut c = vec![1f32; m * n];
                        let args = (
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            ar as isize,
                            ac as isize,
                            b.as_ptr(),
                            br as isize,
                            bc as isize,
                            c.as_mut_ptr(),
                            n as isize,
                            1,
                        );
                        // SAFETY: buffers sized for the described matrices;
                        // the AVX-512 kernel only where the CPU has it.
                        unsafe {
                            if kern == 512 {
                                sgemm_k::<Avx512>(args, acc, threads)
                            } else {
                                sgemm_k::<Avx2>(args, acc, threads)
                            }
                        };
                        for (x, w) in c.iter().zip(&want) {
                            let w = w + if acc { 1.0 } else { 0.0 };
                            assert!(
                                (*x as f64 - w).abs() < 1e-3 * (1.0 + w.abs()),
                                "{m}x{n}x{k} kernel={kern} ta={ta} tb={tb} t={threads} acc={acc}: {x} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn writes_strided_output() {
        if !available() {
            return;
        }
        let (m, n, k) = (20, 33, 17);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 3) as f32 - 1.0).collect();
        let want = naive(m, n, k, &a, k, 1, &b, n, 1);
        // C stored transposed (column-major) inside a wider buffer
        let mut c = vec![f32::NAN; n * (m + 3)];
        // SAFETY: C at [i*1 + j*(m+3)] stays inside the buffer.
        unsafe {
            sgemm(
                m,
                n,
                k,
                a.as_ptr(),
                k as isize,
                1,
                b.as_ptr(),
                n as isize,
                1,
                c.as_mut_ptr(),
                1,
                (m + 3) as isize,
                false,
                1,
            )
        };
        for i in 0..m {
            for j in 0..n {
                assert_eq!(c[i + j * (m + 3)] as f64, want[i * n + j]);
            }
        }
    }

    #[test]
    fn pack_transposed_copies_every_element() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2+FMA, so the vector pack is never used");
            return;
        }
        // Full 8x8 blocks, ragged edges on either side, and a padded column stride.
        for (k, n, ld) in [
            (8, 8, 8),
            (17, 40, 17),
            (24, 33, 30),
            (5, 3, 5),
            (31, 36, 40),
        ] {
            let b: Vec<f32> = (0..n * ld).map(|v| v as f32).collect();
            let mut dst = vec![-1.0f32; k * n];
            // SAFETY: `b` holds n columns of stride `ld` >= k; `dst` holds k*n floats.
            unsafe { pack_transposed(k, n, b.as_ptr(), ld as isize, dst.as_mut_ptr()) };
            for p in 0..k {
                for j in 0..n {
                    assert_eq!(dst[p * n + j], b[j * ld + p], "k={k} n={n} p={p} j={j}");
                }
            }
        }
    }
}
