//! Direct float32 convolution (stride 1, no dilation, one group; AVX-512):
//! the kernel that reads the padded planes as wide rows instead of unrolling
//! a column matrix. A child of `conv`, whose geometry and epilogue it shares.

use super::*;

/// Output channels per register block of the direct kernel.
pub(super) const DIRECT_R: usize = 8;
/// 16-lane pixel vectors per register block of the direct kernel.
pub(super) const DIRECT_V: usize = 3;
/// Per-sample multiply-adds from which one sample's direct convolution is
/// split over threads (by blocks of output channels).
pub(super) const DIRECT_SPLIT: usize = 1 << 20;

/// Whether the direct kernel may be used (on by default; `_core._direct_conv(False)`
/// switches it off, to measure or test the im2col + GEMM route at the same SIMD level).
pub(super) static DIRECT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Allow (`Some(true)`) or forbid the direct kernel; returns the previous setting.
pub fn set_direct(enabled: Option<bool>) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match enabled {
        Some(on) => DIRECT.swap(on, Relaxed),
        None => DIRECT.load(Relaxed),
    }
}

/// Whether the direct float32 kernel computes this convolution: stride 1, no
/// dilation, one group, a kernel larger than 1×1 (1×1 kernels need no
/// unrolling and stay on the GEMM), on a CPU with AVX-512.
///
/// The kernel reads each sample's planes as rows of `W' = W + pad` floats and
/// computes the output on the same wide rows (`oH × W'`, of which the first
/// `oW` columns are kept): output pixel `p` then reads input `p + i·W' + j`
/// for tap `(i, j)`, so the pixel axis is one run of 16-lane vectors with no
/// unrolled column matrix. Every output element sums its taps in the order
/// channel, row, column, from zero, then adds the bias: a fixed order that
/// does not depend on the thread count.
pub(super) fn direct_ok(g: &Geo, dtype: DType) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        dtype == DType::F32
            && DIRECT.load(std::sync::atomic::Ordering::Relaxed)
            && g.groups == 1
            && g.p.stride == [1, 1]
            && g.p.dilation == [1, 1]
            && g.kh * g.kw > 1
            && super::super::simd::level() == super::super::simd::Level::Avx512
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, dtype);
        false
    }
}

/// The padded input plane the direct kernel reads: `(rows, cols)`.
pub(super) fn direct_plane(g: &Geo) -> (usize, usize) {
    (g.h + g.p.pad[0] + g.p.pad[1], g.w + g.p.pad[2] + g.p.pad[3])
}

/// Whether a sample can be read in place (no padding, rows of `W` contiguous
/// floats): otherwise it is first copied into a zero-padded buffer.
pub(super) fn direct_in_place(g: &Geo) -> bool {
    g.p.pad == [0; 4]
        && g.xs[3] == 1
        && (g.h <= 1 || g.xs[2] == g.w as isize)
        && (g.c <= 1 || g.xs[1] >= (g.h * g.w) as isize)
}

/// Copy one sample into `buf` as `C` zero-padded planes of `rows × cols`.
///
/// # Safety
/// `x` points at the sample's first element and is valid for the geometry.
pub(super) unsafe fn direct_pad(x: *const f32, g: &Geo, buf: &mut Vec<f32>) {
    let (rows, cols) = direct_plane(g);
    buf.clear();
    buf.resize(g.c * rows * cols, 0.0);
    let (pt, pl) = (g.p.pad[0], g.p.pad[2]);
    for ci in 0..g.c {
        for iy in 0..g.h {
            let src = x.offset(ci as isize * g.xs[1] + iy as isize * g.xs[2]);
            let dst = &mut buf[(ci * rows + iy + pt) * cols + pl..][..g.w];
            for (ix, d) in dst.iter_mut().enumerate() {
                *d = *src.offset(ix as isize * g.xs[3]);
            }
        }
    }
}

/// One block of `R` output channels over pixels `p0 .. p0 + 16·V` (lanes at
/// or past `total` are neither read nor written).
///
/// `x`: the sample's first plane (planes `cs` floats apart, rows `cols`);
/// `wt`: the block's first weight row (rows `kdim` apart); `y`: the block's
/// first output plane (planes `ps` floats apart, rows `cols`).
///
/// # Safety
/// Pointers valid for the geometry; input lanes below `total` read at most
/// `total - 1 + (kh-1)·cols + kw-1`, inside the plane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
// Index loops over the register block keep its shape explicit.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub(super) unsafe fn direct_block<const R: usize, const V: usize>(
    x: *const f32,
    cs: usize,
    cols: usize,
    c: usize,
    kh: usize,
    kw: usize,
    wt: *const f32,
    kdim: usize,
    bias: Option<*const f32>,
    y: *mut f32,
    ps: usize,
    p0: usize,
    total: usize,
) {
    use std::arch::x86_64::*;
    let mut mask = [0u16; V];
    for (v, m) in mask.iter_mut().enumerate() {
        let left = total.saturating_sub(p0 + 16 * v).min(16);
        *m = ((1u32 << left) - 1) as u16;
    }
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for ci in 0..c {
        let xc = x.add(ci * cs + p0);
        let wc = wt.add(ci * kh * kw);
        for i in 0..kh {
            for j in 0..kw {
                let xs = xc.add(i * cols + j);
                let mut xv = [_mm512_setzero_ps(); V];
                for v in 0..V {
                    xv[v] = _mm512_maskz_loadu_ps(mask[v], xs.add(16 * v));
                }
                let t = i * kw + j;
                for r in 0..R {
                    let wv = _mm512_set1_ps(*wc.add(r * kdim + t));
                    for v in 0..V {
                        acc[r][v] = _mm512_fmadd_ps(wv, xv[v], acc[r][v]);
                    }
                }
            }
        }
    }
    for r in 0..R {
        let b = bias.map_or(_mm512_setzero_ps(), |b| _mm512_set1_ps(*b.add(r)));
        let yr = y.add(r * ps + p0);
        for v in 0..V {
            _mm512_mask_storeu_ps(yr.add(16 * v), mask[v], _mm512_add_ps(acc[r][v], b));
        }
    }
}

/// Output channels `o0 .. o0 + n` of one sample over all its pixels.
///
/// # Safety
/// As [`direct_block`]; `y` is the sample's wide output (`O` planes of
/// `oH × cols`).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn direct_channels(
    x: *const f32,
    cs: usize,
    cols: usize,
    g: &Geo,
    wt: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
    o0: usize,
    n: usize,
) {
    let kdim = g.kdim();
    let ps = g.oh * cols;
    let total = (g.oh - 1) * cols + g.ow;
    let step = 16 * DIRECT_V;
    let mut oc = o0;
    while oc < o0 + n {
        let rem = o0 + n - oc;
        let (w0, b0, y0) = (wt.add(oc * kdim), bias.map(|b| b.add(oc)), y.add(oc * ps));
        let mut p0 = 0;
        while p0 < total {
            let a = (
                x, cs, cols, g.c, g.kh, g.kw, w0, kdim, b0, y0, ps, p0, total,
            );
            if rem >= DIRECT_R {
                direct_block::<DIRECT_R, DIRECT_V>(
                    a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7, a.8, a.9, a.10, a.11, a.12,
                );
            } else if rem >= 4 {
                direct_block::<4, DIRECT_V>(
                    a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7, a.8, a.9, a.10, a.11, a.12,
                );
            } else {
                direct_block::<1, DIRECT_V>(
                    a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7, a.8, a.9, a.10, a.11, a.12,
                );
            }
            p0 += step;
        }
        oc += if rem >= DIRECT_R {
            DIRECT_R
        } else if rem >= 4 {
            4
        } else {
            1
        };
    }
}

/// Scratch capacity (floats) a thread keeps between direct convolutions.
pub(super) const DIRECT_KEEP: usize = 1 << 20;

thread_local! {
    /// The padded sample and the wide output of the direct kernel, kept
    /// between calls (up to [`DIRECT_KEEP`] floats each).
    static DIRECT_SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Convolve one sample with the direct kernel and apply `epi`, writing the
/// sample's output block `y` (pooled shape under `epi.pool2`). The output
/// channels are split over threads in blocks when `parallel`; each block is
/// computed on wide rows into this thread's scratch and goes through the
/// epilogue while it is still in cache.
///
/// # Safety
/// Pointers valid for the geometry; [`direct_ok`] holds; `y` is this
/// sample's own output block.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn direct_sample(
    x: *const f32,
    g: &Geo,
    wt: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
    epi: Epilogue,
    parallel: bool,
) {
    DIRECT_SCRATCH.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (pad, wide) = &mut *guard;
        let in_place = direct_in_place(g);
        let (rows, cols) = if in_place {
            (g.h, g.w)
        } else {
            direct_plane(g)
        };
        let (xp, cs) = if in_place {
            (
                x,
                if g.c > 1 {
                    g.xs[1] as usize
                } else {
                    rows * cols
                },
            )
        } else {
            direct_pad(x, g, pad);
            (pad.as_ptr(), rows * cols)
        };
        let ps = g.oh * cols;
        if wide.len() < g.o * ps {
            wide.resize(g.o * ps, 0.0);
        }
        let out_plane = if epi.pool2 {
            (g.oh / 2) * (g.ow / 2)
        } else {
            g.oh * g.ow
        };
        let (xs, ws, ys, wd) = (
            SendPtr(xp as *mut f32),
            SendPtr(wt as *mut f32),
            SendPtr(y),
            SendPtr(wide.as_mut_ptr()),
        );
        let bs = bias.map(|b| SendPtr(b as *mut f32));
        let block = |o0: usize, n: usize| {
            // SAFETY: channels `o0 .. o0 + n` of the scratch and of `y`
            // belong to this call alone.
            unsafe {
                let src = wd.get().add(o0 * ps);
                let b = bs.map(|b| b.get() as *const f32);
                direct_channels(xs.get(), cs, cols, g, ws.get(), b, wd.get(), o0, n);
                let dst = ys.get().add(o0 * out_plane);
                apply_epilogue(src, dst, (n, g.oh, g.ow), (cols, ps), epi);
            }
        };
        let blocks = g.o.div_ceil(DIRECT_R);
        if parallel && blocks > 1 {
            crate::par::for_each(blocks, |bi| {
                let o0 = bi * DIRECT_R;
                block(o0, DIRECT_R.min(g.o - o0))
            });
        } else {
            block(0, g.o);
        }
        for v in [pad, wide] {
            if v.capacity() > DIRECT_KEEP {
                *v = Vec::new();
            }
        }
    });
}
