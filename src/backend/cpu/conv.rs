//! CPU convolution (direct, or im2col + GEMM) and 2-D pooling kernels.
//!
//! Inputs are `(N, C, H, W)` with any strides; outputs are contiguous and
//! allocated by the op. Float32 stride-1 convolutions of one group with a
//! kernel larger than 1×1 run a direct AVX-512 kernel on CPUs that have it
//! (see [`direct_ok`]): blocks of 8 output channels × 48 pixels held in
//! registers, no unrolled matrix. Otherwise: for each sample and group the receptive
//! fields are unrolled into a `(C/g·kH·kW, oH·oW)` column matrix (skipped for
//! 1×1 stride-1 unpadded kernels, whose input already is that matrix) and
//! multiplied by the group's `(O/g, C/g·kH·kW)` weight matrix straight into
//! the output; a bias is written first and accumulated into. Samples are
//! spread over threads, or the GEMM is threaded when there are few samples.
//!
//! bfloat16 operands (on CPUs with AVX512_BF16 at the AVX-512 level) take
//! the same im2col route with a bfloat16 column matrix and the bfloat16 GEMM
//! ([`super::bf16gemm`]), into float32 results the op rounds once.
//!
//! Gradients: the input gradient forms `Wᵀ g` per sample and group by one GEMM
//! and adds the columns back into the image (`col2im`); the weight gradient
//! sums `g · colsᵀ` over samples (per-task accumulators when samples are
//! threaded).

use gemm::Parallelism;

use super::gemm::{gemm_one, gemm_parallelism, GemmFloat};
use super::math::Real;
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::kernel::{Conv2dParams, Pool2dParams};
use crate::tensor::{DType, Tensor};

/// Per-sample multiply-adds below which samples, not the GEMM, are threaded.
const SAMPLE_SMALL: usize = 1 << 24;
/// Planes per pooling task at least this many output elements.
const POOL_GRAIN: usize = 1 << 14;

fn float_only(op: &'static str, d: DType) -> Result<()> {
    Err(Error::dtype(
        op,
        format!("the CPU kernel computes float32/float64, got {d}"),
    ))
}

pub fn conv2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv2dParams,
    out: &Tensor,
) -> Result<()> {
    conv2d_epilogue(x, w, bias, p, Epilogue::default(), out)
}

/// What a convolution does to each sample's output block right after its
/// GEMM, while the block is still in cache (inference graphs fuse the
/// following nodes into the convolution this way).
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Epilogue {
    /// `relu` of every element (as the `relu` op: NaN passes through).
    pub relu: bool,
    /// A 2×2, stride-2, unpadded `max_pool2d` (floor mode): `out` has the
    /// pooled shape `(N, O, oH/2, oW/2)`.
    pub pool2: bool,
}

/// `conv2d` then the epilogue `epi`, into `out` (contiguous; pooled shape
/// when `epi.pool2`). Each element equals the unfused ops' result bit for bit.
pub fn conv2d_epilogue(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv2dParams,
    epi: Epilogue,
    out: &Tensor,
) -> Result<()> {
    if x.dtype() == DType::BF16 && out.dtype() == DType::F32 {
        if epi != Epilogue::default() {
            return Err(Error::dtype(
                "conv2d",
                "fused epilogues take float32/float64 inputs, got bfloat16".to_string(),
            ));
        }
        return conv2d_bf16(x, w, bias, p, out);
    }
    match out.dtype() {
        DType::F32 => conv2d_t::<f32>(x, w, bias, p, epi, out),
        DType::F64 => conv2d_t::<f64>(x, w, bias, p, epi, out),
        d => float_only("conv2d", d),
    }
}

/// The `relu` op's value of `v` (NaN passes through).
#[inline(always)]
fn relu_of<T: Real>(v: T) -> T {
    if v > T::ZERO || v.is_nan() {
        v
    } else {
        T::ZERO
    }
}

/// Apply `epi` to one sample's conv output `src` (`o` planes of `oh × ow`,
/// rows `rs` and planes `ps` floats apart), writing the result to `dst`
/// (contiguous; `src` itself when not pooling and `src` is contiguous).
///
/// # Safety
/// `src` holds `o` planes at its strides; `dst` `o*oh*ow` elements, or
/// `o*(oh/2)*(ow/2)` when pooling; `dst` is `src` or does not overlap it.
unsafe fn apply_epilogue<T: Real>(
    src: *mut T,
    dst: *mut T,
    (o, oh, ow): (usize, usize, usize),
    (rs, ps): (usize, usize),
    epi: Epilogue,
) {
    let act = |v: T| if epi.relu { relu_of(v) } else { v };
    if !epi.pool2 {
        if src == dst {
            debug_assert!(rs == ow && ps == oh * ow);
            if epi.relu {
                for v in std::slice::from_raw_parts_mut(src, o * oh * ow) {
                    *v = relu_of(*v);
                }
            }
            return;
        }
        for c in 0..o {
            for yy in 0..oh {
                let s = std::slice::from_raw_parts(src.add(c * ps + yy * rs), ow);
                let d = std::slice::from_raw_parts_mut(dst.add((c * oh + yy) * ow), ow);
                for (d, &v) in d.iter_mut().zip(s) {
                    *d = act(v);
                }
            }
        }
        return;
    }
    let (ph, pw) = (oh / 2, ow / 2);
    for c in 0..o {
        let plane = src.add(c * ps);
        let y = std::slice::from_raw_parts_mut(dst.add(c * ph * pw), ph * pw);
        for py in 0..ph {
            let r0 = plane.add(2 * py * rs);
            let r1 = r0.add(rs);
            for px in 0..pw {
                // Taps in max_pool2d's order: a larger value or a NaN takes over.
                let mut best = act(*r0.add(2 * px));
                for v in [*r0.add(2 * px + 1), *r1.add(2 * px), *r1.add(2 * px + 1)] {
                    let v = act(v);
                    if v > best || v.is_nan() {
                        best = v;
                    }
                }
                y[py * pw + px] = best;
            }
        }
    }
}

/// Geometry shared by the per-sample work.
#[derive(Copy, Clone)]
struct Geo {
    c: usize,
    h: usize,
    w: usize,
    /// input strides (n, c, h, w)
    xs: [isize; 4],
    o: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    groups: usize,
    p: Conv2dParams,
}

impl Geo {
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    fn kdim(&self) -> usize {
        self.cg() * self.kh * self.kw
    }
    fn npix(&self) -> usize {
        self.oh * self.ow
    }
    /// A 1×1, stride-1, unpadded kernel over rows that merge into one pixel axis.
    fn direct(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.p.stride == [1, 1]
            && self.p.pad == [0; 4]
            && self.xs[1] >= 0
            && self.xs[3] >= 0
            && (self.h <= 1 || self.xs[2] == self.xs[3] * self.w as isize)
    }
}

/// Group `c0..c0+cg`'s (`kdim × npix`) column matrix of the sample at `x`, as
/// (pointer, row stride, column stride): the sample itself where a 1×1
/// convolution reads it directly ([`Geo::direct`]), else `col` filled by
/// [`im2col`] (`zero` as there).
///
/// # Safety
/// As [`im2col`]; the pointer is valid while `col` is neither changed nor dropped.
unsafe fn columns<T: Copy + Send + Sync>(
    x: *const T,
    g: &Geo,
    c0: usize,
    col: &mut Vec<T>,
    parallel: bool,
    zero: T,
) -> (*const T, isize, isize) {
    if g.direct() {
        (x.offset(c0 as isize * g.xs[1]), g.xs[1], g.xs[3])
    } else {
        col.resize(g.kdim() * g.npix(), zero);
        im2col(x, g, c0, col, parallel, zero);
        (col.as_ptr(), g.npix() as isize, 1)
    }
}

/// Unroll channels `c0..c0+cg` of one sample into `col` (`kdim × npix`, row-major);
/// `zero` fills the padding (float zero; `0` for bfloat16 bits).
///
/// # Safety
/// `x` points at the sample's first element and is valid for the geometry.
unsafe fn im2col<T: Copy + Send + Sync>(
    x: *const T,
    g: &Geo,
    c0: usize,
    col: &mut [T],
    parallel: bool,
    zero: T,
) {
    let (kh, kw, oh, ow) = (g.kh, g.kw, g.oh, g.ow);
    let [sh, sw] = g.p.stride;
    let [dh, dw] = g.p.dilation;
    let (pt, pl) = (g.p.pad[0] as isize, g.p.pad[2] as isize);
    let npix = oh * ow;
    let xp = SendPtr(x as *mut T);
    let row = move |r: usize, dst: &mut [T]| {
        let ci = c0 + r / (kh * kw);
        let i = (r / kw) % kh;
        let j = r % kw;
        let xc = xp.get().offset(ci as isize * g.xs[1]);
        // Output columns whose input column lies inside the image.
        let off_w = (j * dw) as isize - pl;
        let lo = if off_w >= 0 {
            0
        } else {
            ((-off_w) as usize).div_ceil(sw)
        };
        let hi = if (g.w as isize) <= off_w {
            0
        } else {
            ((g.w as isize - off_w) as usize).div_ceil(sw).min(ow)
        };
        let lo = lo.min(hi);
        for oy in 0..oh {
            let d = &mut dst[oy * ow..(oy + 1) * ow];
            let iy = (oy * sh + i * dh) as isize - pt;
            if iy < 0 || iy >= g.h as isize {
                d.fill(zero);
                continue;
            }
            let src = xc.offset(iy * g.xs[2]);
            d[..lo].fill(zero);
            d[hi..].fill(zero);
            if sw == 1 && g.xs[3] == 1 {
                let s0 = src.offset(lo as isize + off_w);
                d[lo..hi].copy_from_slice(std::slice::from_raw_parts(s0, hi - lo));
            } else {
                for (ox, v) in d.iter_mut().enumerate().take(hi).skip(lo) {
                    let ix = (ox * sw) as isize + off_w;
                    *v = *src.offset(ix * g.xs[3]);
                }
            }
        }
    };
    if parallel {
        let rows = col.len() / npix.max(1);
        let cp = SendPtr(col.as_mut_ptr());
        crate::par::for_each(rows, |r| {
            // SAFETY: row r of `col`; each task writes its own row.
            let dst = unsafe { std::slice::from_raw_parts_mut(cp.get().add(r * npix), npix) };
            row(r, dst)
        });
    } else {
        col.chunks_mut(npix)
            .enumerate()
            .for_each(|(r, dst)| row(r, dst));
    }
}

/// Convolve one sample (all groups) into its output block.
///
/// # Safety
/// Pointers valid for the geometry; `y` is this sample's own output block.
#[allow(clippy::too_many_arguments)]
unsafe fn conv_sample<T: GemmFloat>(
    x: *const T,
    wt: *const T,
    bias: Option<*const T>,
    y: *mut T,
    g: &Geo,
    col: &mut Vec<T>,
    par: Parallelism,
) {
    let (og, kdim, npix) = (g.og(), g.kdim(), g.npix());
    if let Some(b) = bias {
        for oc in 0..g.o {
            std::slice::from_raw_parts_mut(y.add(oc * npix), npix).fill(*b.add(oc));
        }
    }
    let threaded = matches!(par, Parallelism::Rayon(_));
    for gi in 0..g.groups {
        let c0 = gi * g.cg();
        let (bp, b_rs, b_cs) = columns(x, g, c0, col, threaded, T::ZERO);
        gemm_one(
            og,
            npix,
            kdim,
            wt.add(gi * og * kdim),
            kdim as isize,
            1,
            bp,
            b_rs,
            b_cs,
            y.add(gi * og * npix),
            npix as isize,
            1,
            bias.is_some(),
            par,
        );
    }
}

fn conv2d_t<T: GemmFloat>(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv2dParams,
    epi: Epilogue,
    out: &Tensor,
) -> Result<()> {
    let xs = x.strides();
    // The convolution's own output size (`out` is pooled under `epi.pool2`).
    let (kh, kw) = (w.shape()[2], w.shape()[3]);
    let conv_oh =
        (x.shape()[2] + p.pad[0] + p.pad[1] - (p.dilation[0] * (kh - 1) + 1)) / p.stride[0] + 1;
    let conv_ow =
        (x.shape()[3] + p.pad[2] + p.pad[3] - (p.dilation[1] * (kw - 1) + 1)) / p.stride[1] + 1;
    let g = Geo {
        c: x.shape()[1],
        h: x.shape()[2],
        w: x.shape()[3],
        xs: [xs[0], xs[1], xs[2], xs[3]],
        o: w.shape()[0],
        kh: w.shape()[2],
        kw: w.shape()[3],
        oh: conv_oh,
        ow: conv_ow,
        groups: p.groups,
        p: *p,
    };
    debug_assert!(
        epi.pool2 || (out.shape()[2] == conv_oh && out.shape()[3] == conv_ow),
        "conv2d output shape"
    );
    let n = x.shape()[0];
    if n == 0 || g.o == 0 || g.npix() == 0 {
        return Ok(());
    }
    debug_assert!(w.is_contiguous() && out.is_contiguous());
    let xp = SendPtr(x.data_ptr::<T>());
    let wp = SendPtr(w.data_ptr::<T>());
    let bp = bias.map(|b| SendPtr(b.data_ptr::<T>()));
    // A strided bias is copied to a contiguous buffer.
    let bias_buf: Option<Vec<T>> = match bias {
        Some(b) if b.ndim() == 1 && b.strides()[0] != 1 && b.numel() > 1 => {
            let s = b.strides()[0];
            // SAFETY: offsets from the bias layout.
            Some(
                (0..g.o)
                    .map(|i| unsafe { *b.data_ptr::<T>().offset(i as isize * s) })
                    .collect(),
            )
        }
        _ => None,
    };
    let bp = match &bias_buf {
        Some(v) => Some(SendPtr(v.as_ptr() as *mut T)),
        None => bp,
    };
    let yp = SendPtr(out.data_ptr::<T>());
    let per_sample = g.o * g.npix() * g.kdim().max(1);
    let threads = crate::par::split();
    let conv_block = g.o * g.npix();
    let sample_block = if epi.pool2 {
        g.o * (g.oh / 2) * (g.ow / 2)
    } else {
        conv_block
    };
    let direct = direct_ok(&g, out.dtype());
    // `bufs`: the im2col matrix (the padded sample for the direct kernel),
    // and the conv output block when it is pooled or computed on wide rows.
    let run = |s: usize, bufs: &mut (Vec<T>, Vec<T>), par: Parallelism| {
        let (col, tmp) = bufs;
        // SAFETY: each sample writes only its own output block (and its
        // task's scratch block).
        unsafe {
            let y = yp.get().add(s * sample_block);
            #[cfg(target_arch = "x86_64")]
            if direct {
                // SAFETY: `direct` implies float32, so `T` is `f32`.
                let f = |p: *mut T| p as *mut f32;
                direct_sample(
                    f(xp.get()).offset(s as isize * g.xs[0]),
                    &g,
                    f(wp.get()),
                    bp.map(|b| f(b.get()) as *const f32),
                    f(y),
                    epi,
                    matches!(par, Parallelism::Rayon(_)),
                );
                return;
            }
            let c = if epi.pool2 {
                tmp.resize(conv_block, T::ZERO);
                tmp.as_mut_ptr()
            } else {
                y
            };
            conv_sample(
                xp.get().offset(s as isize * g.xs[0]),
                wp.get(),
                bp.map(|b| b.get() as *const T),
                c,
                &g,
                col,
                par,
            );
            apply_epilogue(c, y, (g.o, g.oh, g.ow), (g.ow, g.npix()), epi);
        }
    };
    let gemm_par = || {
        if !direct {
            gemm_parallelism(g.og(), g.npix(), g.kdim())
        } else if threads > 1 && per_sample >= DIRECT_SPLIT {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        }
    };
    over_samples(n, per_sample, gemm_par, run);
    crate::par::check("conv2d")
}

/// `one(sample)` for samples `0..n` in order on this thread, whose GEMMs
/// split over the threads when their `Parallelism` says so;
/// stops early when the work is interrupted (the caller then reports it).
fn each_sample(n: usize, mut one: impl FnMut(usize)) {
    for s in 0..n {
        if crate::par::cancelled() {
            break;
        }
        one(s);
    }
}

/// `run(sample, scratch, par)` for samples `0..n`: spread over the threads
/// (one scratch per task, each sample's GEMM single-threaded) when the samples
/// are many or small (`per_sample` multiply-adds), otherwise in order on this
/// thread with the GEMM split as `gemm_par()` says.
fn over_samples<S: Default>(
    n: usize,
    per_sample: usize,
    gemm_par: impl FnOnce() -> Parallelism,
    run: impl Fn(usize, &mut S, Parallelism) + Sync,
) {
    let threads = crate::par::split();
    if n > 1 && threads > 1 && (per_sample < SAMPLE_SMALL || n >= 4 * threads) {
        crate::par::for_each_init(n, S::default, |s, smp| run(smp, s, Parallelism::None));
    } else {
        let par = gemm_par();
        let mut s = S::default();
        each_sample(n, |smp| run(smp, &mut s, par));
    }
}

/// Sample chunks of the threaded weight gradient (each has its own accumulator).
const WGRAD_CHUNKS: usize = 8;

/// `dst = Σ_samples`, where `run(sample, scratch, acc, par)` adds one sample's
/// weight gradient into `acc`: with many or small samples, fixed chunks of
/// samples each fill their own accumulator and the chunks are added in chunk
/// order (the result does not depend on how the pool schedules them; a
/// work-stealing fold would group the samples differently from run to run);
/// otherwise the samples accumulate into `dst` in order with the GEMM split
/// as `gemm_par()` says.
fn wgrad_over_samples<A: Copy + Send + Sync + std::ops::Add<Output = A>, S: Default>(
    n: usize,
    per_sample: usize,
    dst: &mut [A],
    zero: A,
    gemm_par: impl FnOnce() -> Parallelism,
    run: impl Fn(usize, &mut S, *mut A, Parallelism) + Sync,
) {
    let threads = crate::par::split();
    if n > 1 && threads > 1 && (per_sample < SAMPLE_SMALL || n >= 4 * threads) {
        let per = n.div_ceil(n.min(WGRAD_CHUNKS));
        let total = dst.len();
        let parts: Vec<Vec<A>> = crate::par::map(n.div_ceil(per), |ci| {
            let mut acc = vec![zero; total];
            let mut s = S::default();
            for smp in ci * per..((ci + 1) * per).min(n) {
                run(smp, &mut s, acc.as_mut_ptr(), Parallelism::None);
            }
            acc
        });
        for part in &parts {
            dst.iter_mut().zip(part).for_each(|(x, &y)| *x = *x + y);
        }
    } else {
        let par = gemm_par();
        let acc = SendPtr(dst.as_mut_ptr());
        let mut s = S::default();
        each_sample(n, |smp| run(smp, &mut s, acc.get(), par));
    }
}

mod direct;
pub use direct::set_direct;
use direct::*;

// ---------------------------------------------------------------------------
// Convolution gradients
// ---------------------------------------------------------------------------

/// Add the columns of `col` (`kdim × npix`, row-major) back into the image
/// positions they were unrolled from (the adjoint of [`im2col`]), for
/// channels `c0..c0+cg` of one contiguous `(C, H, W)` sample at `dst`.
///
/// # Safety
/// `dst` points at the sample's first element, valid for the geometry.
unsafe fn col2im<T: Real>(col: &[T], g: &Geo, c0: usize, dst: *mut T, parallel: bool) {
    let (kh, kw, oh, ow) = (g.kh, g.kw, g.oh, g.ow);
    let [sh, sw] = g.p.stride;
    let [dh, dw] = g.p.dilation;
    let (pt, pl) = (g.p.pad[0] as isize, g.p.pad[2] as isize);
    let npix = oh * ow;
    let plane = g.h * g.w;
    let dp = SendPtr(dst);
    // Rows of one channel write the same plane: a channel is one task.
    let channel = move |cl: usize| {
        let dc = dp.get().add((c0 + cl) * plane);
        for r in cl * kh * kw..(cl + 1) * kh * kw {
            let i = (r / kw) % kh;
            let j = r % kw;
            let off_w = (j * dw) as isize - pl;
            let lo = if off_w >= 0 {
                0
            } else {
                ((-off_w) as usize).div_ceil(sw)
            };
            let hi = if (g.w as isize) <= off_w {
                0
            } else {
                ((g.w as isize - off_w) as usize).div_ceil(sw).min(ow)
            };
            let lo = lo.min(hi);
            for oy in 0..oh {
                let iy = (oy * sh + i * dh) as isize - pt;
                if iy < 0 || iy >= g.h as isize {
                    continue;
                }
                let row = dc.offset(iy * g.w as isize);
                let src = &col[r * npix + oy * ow..r * npix + (oy + 1) * ow];
                for (ox, &v) in src.iter().enumerate().take(hi).skip(lo) {
                    let d = row.offset((ox * sw) as isize + off_w);
                    *d = *d + v;
                }
            }
        }
    };
    if parallel {
        crate::par::for_each(g.cg(), channel);
    } else {
        (0..g.cg()).for_each(channel);
    }
}

/// Geometry of a convolution whose input is `(N, C, H, W)` with strides `xs`,
/// weight `(O, C/g, kH, kW)`, output `(oH, oW)`.
#[allow(clippy::too_many_arguments)]
fn geo(
    c: usize,
    h: usize,
    w: usize,
    xs: &[isize],
    o: usize,
    k: [usize; 2],
    out: [usize; 2],
    p: &Conv2dParams,
) -> Geo {
    Geo {
        c,
        h,
        w,
        xs: [xs[0], xs[1], xs[2], xs[3]],
        o,
        kh: k[0],
        kw: k[1],
        oh: out[0],
        ow: out[1],
        groups: p.groups,
        p: *p,
    }
}

/// Input gradient of a convolution (a transposed convolution): `out`
/// `(N, C, H, W)` from the output gradient `g` `(N, O, oH, oW)` and the
/// weight `w` `(O, C/g, kH, kW)`, all contiguous. Per sample and group the
/// columns `Wᵀ g` are formed by one GEMM and added back into the image.
pub fn conv2d_input_grad(g: &Tensor, w: &Tensor, p: &Conv2dParams, out: &Tensor) -> Result<()> {
    if g.dtype() == DType::BF16 && out.dtype() == DType::F32 {
        return conv_input_grad_bf16(g, w, p, out);
    }
    match out.dtype() {
        DType::F32 => conv_input_grad_t::<f32>(g, w, p, out),
        DType::F64 => conv_input_grad_t::<f64>(g, w, p, out),
        d => float_only("conv2d_backward", d),
    }
}

fn conv_input_grad_t<T: GemmFloat>(
    g: &Tensor,
    w: &Tensor,
    p: &Conv2dParams,
    out: &Tensor,
) -> Result<()> {
    debug_assert!(g.is_contiguous() && w.is_contiguous() && out.is_contiguous());
    let s = out.shape();
    let gm = geo(
        s[1],
        s[2],
        s[3],
        out.strides(),
        w.shape()[0],
        [w.shape()[2], w.shape()[3]],
        [g.shape()[2], g.shape()[3]],
        p,
    );
    let n = s[0];
    let sample_in = gm.c * gm.h * gm.w;
    // SAFETY: `out` is contiguous with `n * sample_in` elements.
    unsafe { std::slice::from_raw_parts_mut(out.data_ptr::<T>(), n * sample_in) }.fill(T::ZERO);
    if n == 0 || sample_in == 0 || gm.o == 0 || gm.npix() == 0 {
        return Ok(());
    }
    let (gp, wp, yp) = (
        SendPtr(g.data_ptr::<T>()),
        SendPtr(w.data_ptr::<T>()),
        SendPtr(out.data_ptr::<T>()),
    );
    let (og, kdim, npix) = (gm.og(), gm.kdim(), gm.npix());
    let run = |smp: usize, col: &mut Vec<T>, par: Parallelism| {
        let threaded = matches!(par, Parallelism::Rayon(_));
        // SAFETY: each sample writes only its own input-gradient block.
        unsafe {
            let gs = gp.get().add(smp * gm.o * npix);
            let ys = yp.get().add(smp * sample_in);
            for gi in 0..gm.groups {
                let c0 = gi * gm.cg();
                // (kdim × og) weight transpose times (og × npix) gradient.
                let a = wp.get().add(gi * og * kdim);
                let b = gs.add(gi * og * npix);
                if gm.direct() {
                    gemm_one(
                        kdim,
                        npix,
                        og,
                        a,
                        1,
                        kdim as isize,
                        b,
                        npix as isize,
                        1,
                        ys.add(c0 * npix),
                        npix as isize,
                        1,
                        false,
                        par,
                    );
                } else {
                    col.resize(kdim * npix, T::ZERO);
                    gemm_one(
                        kdim,
                        npix,
                        og,
                        a,
                        1,
                        kdim as isize,
                        b,
                        npix as isize,
                        1,
                        col.as_mut_ptr(),
                        npix as isize,
                        1,
                        false,
                        par,
                    );
                    col2im(col, &gm, c0, ys, threaded);
                }
            }
        }
    };
    over_samples(
        n,
        gm.o * npix * kdim.max(1),
        || gemm_parallelism(kdim, npix, og),
        run,
    );
    crate::par::check("conv2d_backward")
}

/// Weight gradient of a convolution: `out` `(O, C/g, kH, kW)` (contiguous)
/// `= Σ_samples g · colsᵀ` per group, from the contiguous output gradient `g`
/// `(N, O, oH, oW)` and the input `x` `(N, C, H, W)` (any strides), whose
/// receptive fields are unrolled as in the forward pass. Samples are spread
/// over threads with one accumulator per task, or the GEMM is threaded.
pub fn conv2d_weight_grad(g: &Tensor, x: &Tensor, p: &Conv2dParams, out: &Tensor) -> Result<()> {
    if g.dtype() == DType::BF16 && out.dtype() == DType::F32 {
        return conv_weight_grad_bf16(g, x, p, out);
    }
    match out.dtype() {
        DType::F32 => conv_weight_grad_t::<f32>(g, x, p, out),
        DType::F64 => conv_weight_grad_t::<f64>(g, x, p, out),
        d => float_only("conv2d_backward", d),
    }
}

fn conv_weight_grad_t<T: GemmFloat>(
    g: &Tensor,
    x: &Tensor,
    p: &Conv2dParams,
    out: &Tensor,
) -> Result<()> {
    debug_assert!(g.is_contiguous() && out.is_contiguous());
    let s = x.shape();
    let gm = geo(
        s[1],
        s[2],
        s[3],
        x.strides(),
        out.shape()[0],
        [out.shape()[2], out.shape()[3]],
        [g.shape()[2], g.shape()[3]],
        p,
    );
    let n = s[0];
    let (og, kdim, npix) = (gm.og(), gm.kdim(), gm.npix());
    let total = gm.o * kdim;
    // SAFETY: `out` is contiguous with `total` elements.
    let dst = unsafe { std::slice::from_raw_parts_mut(out.data_ptr::<T>(), total) };
    dst.fill(T::ZERO);
    if n == 0 || total == 0 || npix == 0 {
        return Ok(());
    }
    let (gp, xp) = (SendPtr(g.data_ptr::<T>()), SendPtr(x.data_ptr::<T>()));
    // acc (O × kdim) += g_sample (per group og × npix) @ colsᵀ (npix × kdim).
    let run = |smp: usize, col: &mut Vec<T>, acc: *mut T, par: Parallelism| {
        let threaded = matches!(par, Parallelism::Rayon(_));
        // SAFETY: pointers valid for the geometry; `acc` is the caller's own buffer.
        unsafe {
            let xs = xp.get().offset(smp as isize * gm.xs[0]);
            let gs = gp.get().add(smp * gm.o * npix);
            for gi in 0..gm.groups {
                let c0 = gi * gm.cg();
                let (bp, c_rs, c_cs) = columns(xs as *const T, &gm, c0, col, threaded, T::ZERO);
                gemm_one(
                    og,
                    kdim,
                    npix,
                    gs.add(gi * og * npix),
                    npix as isize,
                    1,
                    bp,
                    c_cs,
                    c_rs,
                    acc.add(gi * og * kdim),
                    kdim as isize,
                    1,
                    true,
                    par,
                );
            }
        }
    };
    let par = || gemm_parallelism(og, kdim, npix);
    wgrad_over_samples(n, gm.o * npix * kdim, dst, T::ZERO, par, run);
    crate::par::check("conv2d_backward")
}

// ---------------------------------------------------------------------------
// bfloat16 operands on the AVX512_BF16 GEMM (float32 results)
// ---------------------------------------------------------------------------

/// Check that the bfloat16 route may run: the operands are bfloat16, the
/// result float32, and the CPU has the bfloat16 GEMM at the level in use.
fn bf16_check(op: &'static str, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    if a.dtype() != DType::BF16 || b.dtype() != DType::BF16 || out.dtype() != DType::F32 {
        return Err(Error::dtype(
            op,
            format!(
                "the bfloat16 kernel takes bfloat16 operands and a float32 result, got {} and {} into {}",
                a.dtype(),
                b.dtype(),
                out.dtype()
            ),
        ));
    }
    if !super::bf16gemm::available() {
        return Err(Error::dtype(
            op,
            "bfloat16 operands need AVX512_BF16 at the AVX-512 level; widen them to float32"
                .to_string(),
        ));
    }
    Ok(())
}

/// Threads for one sample's GEMM under `par`.
fn gemm_threads(par: Parallelism) -> usize {
    match par {
        Parallelism::Rayon(t) => t.max(1),
        _ => 1,
    }
}

/// The forward convolution of bfloat16 `x` (any strides) and `w`
/// (contiguous) into float32 `out` (contiguous), with an optional float32
/// bias written first: the receptive fields are unrolled in bfloat16 and the
/// products summed in float32 by [`super::bf16gemm`].
fn conv2d_bf16(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv2dParams,
    out: &Tensor,
) -> Result<()> {
    bf16_check("conv2d", x, w, out)?;
    debug_assert!(w.is_contiguous() && out.is_contiguous());
    let s = x.shape();
    let g = geo(
        s[1],
        s[2],
        s[3],
        x.strides(),
        w.shape()[0],
        [w.shape()[2], w.shape()[3]],
        [out.shape()[2], out.shape()[3]],
        p,
    );
    let n = s[0];
    if n == 0 || g.o == 0 || g.npix() == 0 {
        return Ok(());
    }
    let bias: Option<Vec<f32>> = match bias {
        Some(b) if b.dtype() != DType::F32 => {
            return Err(Error::dtype(
                "conv2d",
                format!(
                    "the bfloat16 kernel takes a float32 bias, got {}",
                    b.dtype()
                ),
            ))
        }
        Some(b) => {
            let st = if b.numel() > 1 { b.strides()[0] } else { 0 };
            // SAFETY: offsets from the bias layout (`o` elements).
            Some(
                (0..g.o)
                    .map(|i| unsafe { *b.data_ptr::<f32>().offset(i as isize * st) })
                    .collect(),
            )
        }
        None => None,
    };
    let (og, kdim, npix) = (g.og(), g.kdim(), g.npix());
    let xp = SendPtr(x.data_ptr::<half::bf16>() as *mut u16);
    let wp = SendPtr(w.data_ptr::<half::bf16>() as *mut u16);
    let yp = SendPtr(out.data_ptr::<f32>());
    let bias = bias.as_deref();
    let run = |smp: usize, col: &mut Vec<u16>, par: Parallelism| {
        let threaded = matches!(par, Parallelism::Rayon(_));
        // SAFETY: each sample writes only its own output block; pointers
        // are valid for the geometry.
        unsafe {
            let xs = xp.get().offset(smp as isize * g.xs[0]);
            let y = yp.get().add(smp * g.o * npix);
            if let Some(b) = bias {
                for (oc, &v) in b.iter().enumerate() {
                    std::slice::from_raw_parts_mut(y.add(oc * npix), npix).fill(v);
                }
            }
            for gi in 0..g.groups {
                let c0 = gi * g.cg();
                let (bp, b_rs, b_cs) = columns(xs as *const u16, &g, c0, col, threaded, 0);
                super::bf16gemm::gemm(
                    og,
                    npix,
                    kdim,
                    wp.get().add(gi * og * kdim),
                    kdim as isize,
                    1,
                    bp,
                    b_rs,
                    b_cs,
                    y.add(gi * og * npix),
                    npix as isize,
                    1,
                    bias.is_some(),
                    gemm_threads(par),
                );
            }
        }
    };
    over_samples(
        n,
        g.o * npix * kdim.max(1),
        || gemm_parallelism(og, npix, kdim),
        run,
    );
    crate::par::check("conv2d")
}

/// [`conv2d_input_grad`] for bfloat16 `g` and `w` (contiguous) into float32
/// `out`: the columns `Wᵀ g` come out of the bfloat16 GEMM in float32 and are
/// added back into the image in float32.
fn conv_input_grad_bf16(g: &Tensor, w: &Tensor, p: &Conv2dParams, out: &Tensor) -> Result<()> {
    bf16_check("conv2d_backward", g, w, out)?;
    debug_assert!(g.is_contiguous() && w.is_contiguous() && out.is_contiguous());
    let s = out.shape();
    let gm = geo(
        s[1],
        s[2],
        s[3],
        out.strides(),
        w.shape()[0],
        [w.shape()[2], w.shape()[3]],
        [g.shape()[2], g.shape()[3]],
        p,
    );
    let n = s[0];
    let sample_in = gm.c * gm.h * gm.w;
    // SAFETY: `out` is contiguous with `n * sample_in` elements.
    unsafe { std::slice::from_raw_parts_mut(out.data_ptr::<f32>(), n * sample_in) }.fill(0.0);
    if n == 0 || sample_in == 0 || gm.o == 0 || gm.npix() == 0 {
        return Ok(());
    }
    let gp = SendPtr(g.data_ptr::<half::bf16>() as *mut u16);
    let wp = SendPtr(w.data_ptr::<half::bf16>() as *mut u16);
    let yp = SendPtr(out.data_ptr::<f32>());
    let (og, kdim, npix) = (gm.og(), gm.kdim(), gm.npix());
    let run = |smp: usize, col: &mut Vec<f32>, par: Parallelism| {
        let threaded = matches!(par, Parallelism::Rayon(_));
        // SAFETY: each sample writes only its own input-gradient block.
        unsafe {
            let gs = gp.get().add(smp * gm.o * npix);
            let ys = yp.get().add(smp * sample_in);
            for gi in 0..gm.groups {
                let c0 = gi * gm.cg();
                // (kdim × og) weight transpose times (og × npix) gradient.
                let a = wp.get().add(gi * og * kdim);
                let b = gs.add(gi * og * npix);
                let dst = if gm.direct() {
                    ys.add(c0 * npix)
                } else {
                    col.resize(kdim * npix, 0.0);
                    col.as_mut_ptr()
                };
                super::bf16gemm::gemm(
                    kdim,
                    npix,
                    og,
                    a,
                    1,
                    kdim as isize,
                    b,
                    npix as isize,
                    1,
                    dst,
                    npix as isize,
                    1,
                    false,
                    gemm_threads(par),
                );
                if !gm.direct() {
                    col2im(col, &gm, c0, ys, threaded);
                }
            }
        }
    };
    over_samples(
        n,
        gm.o * npix * kdim.max(1),
        || gemm_parallelism(kdim, npix, og),
        run,
    );
    crate::par::check("conv2d_backward")
}

/// [`conv2d_weight_grad`] for bfloat16 `g` (contiguous) and `x` (any
/// strides) into float32 `out`: the columns are unrolled in bfloat16 and
/// `g · colsᵀ` summed in float32 by the bfloat16 GEMM, over samples in
/// fixed chunks (as the float32 route does).
fn conv_weight_grad_bf16(g: &Tensor, x: &Tensor, p: &Conv2dParams, out: &Tensor) -> Result<()> {
    bf16_check("conv2d_backward", g, x, out)?;
    debug_assert!(g.is_contiguous() && out.is_contiguous());
    let s = x.shape();
    let gm = geo(
        s[1],
        s[2],
        s[3],
        x.strides(),
        out.shape()[0],
        [out.shape()[2], out.shape()[3]],
        [g.shape()[2], g.shape()[3]],
        p,
    );
    let n = s[0];
    let (og, kdim, npix) = (gm.og(), gm.kdim(), gm.npix());
    let total = gm.o * kdim;
    // SAFETY: `out` is contiguous with `total` elements.
    let dst = unsafe { std::slice::from_raw_parts_mut(out.data_ptr::<f32>(), total) };
    dst.fill(0.0);
    if n == 0 || total == 0 || npix == 0 {
        return Ok(());
    }
    let gp = SendPtr(g.data_ptr::<half::bf16>() as *mut u16);
    let xp = SendPtr(x.data_ptr::<half::bf16>() as *mut u16);
    let run = |smp: usize, col: &mut Vec<u16>, acc: *mut f32, par: Parallelism| {
        let threaded = matches!(par, Parallelism::Rayon(_));
        // SAFETY: pointers valid for the geometry; `acc` is the caller's own buffer.
        unsafe {
            let xs = xp.get().offset(smp as isize * gm.xs[0]);
            let gs = gp.get().add(smp * gm.o * npix);
            for gi in 0..gm.groups {
                let c0 = gi * gm.cg();
                let (bp, c_rs, c_cs) = columns(xs as *const u16, &gm, c0, col, threaded, 0);
                super::bf16gemm::gemm(
                    og,
                    kdim,
                    npix,
                    gs.add(gi * og * npix),
                    npix as isize,
                    1,
                    bp,
                    c_cs,
                    c_rs,
                    acc.add(gi * og * kdim),
                    kdim as isize,
                    1,
                    true,
                    gemm_threads(par),
                );
            }
        }
    };
    let par = || gemm_parallelism(og, kdim, npix);
    wgrad_over_samples(n, gm.o * npix * kdim, dst, 0.0f32, par, run);
    crate::par::check("conv2d_backward")
}

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

/// Run `f(plane, out_plane)` for every (n, c) plane, in parallel when large.
fn for_planes<T: Real>(x: &Tensor, out: &Tensor, f: impl Fn(*const T, &mut [T], usize) + Sync) {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let xs = x.strides();
    let (s0, s1) = (xs[0], xs[1]);
    let plane = out.shape()[2] * out.shape()[3];
    if plane == 0 || n * c == 0 {
        return;
    }
    let xp = SendPtr(x.data_ptr::<T>());
    // SAFETY: `out` is a fresh contiguous tensor of n*c planes.
    let ys = unsafe { std::slice::from_raw_parts_mut(out.data_ptr::<T>(), n * c * plane) };
    let body = |(pi, y): (usize, &mut [T])| {
        let (ni, ci) = (pi / c, pi % c);
        // SAFETY: offsets inside the input layout.
        let src = unsafe { xp.get().offset(ni as isize * s0 + ci as isize * s1) } as *const T;
        f(src, y, pi);
    };
    if n * c * plane >= POOL_GRAIN && n * c > 1 {
        let yp = SendPtr(ys.as_mut_ptr());
        crate::par::for_each(n * c, |pi| {
            // SAFETY: plane pi of `out`; each task writes its own plane.
            body((pi, unsafe {
                std::slice::from_raw_parts_mut(yp.get().add(pi * plane), plane)
            }))
        });
    } else {
        ys.chunks_mut(plane).enumerate().for_each(body);
    }
}

pub fn max_pool2d(
    x: &Tensor,
    p: &Pool2dParams,
    out: &Tensor,
    indices: Option<&Tensor>,
) -> Result<()> {
    match out.dtype() {
        DType::F32 => max_pool_t::<f32>(x, p, out, indices),
        DType::F64 => max_pool_t::<f64>(x, p, out, indices),
        d => return float_only("max_pool2d", d),
    }
    Ok(())
}

/// `if take { a } else { b }` for f32/f64 without a branch. LLVM turns a
/// scalar float select into a branch, which real data makes a coin flip;
/// on x86-64 the choice is made as a one-lane vector blend (SSE2 masks),
/// which never becomes a branch.
#[inline(always)]
fn pick<T: Real>(take: bool, a: T, b: T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        use std::mem::{size_of, transmute_copy};
        // SAFETY: SSE2 is part of x86-64; T is f32 or f64 (`Real`), copied
        // through the float type of its size.
        unsafe {
            if size_of::<T>() == 4 {
                let m = _mm_castsi128_ps(_mm_set1_epi32(-(take as i32)));
                let (x, y) = (
                    _mm_set_ss(transmute_copy::<T, f32>(&a)),
                    _mm_set_ss(transmute_copy::<T, f32>(&b)),
                );
                let r = _mm_cvtss_f32(_mm_or_ps(_mm_and_ps(m, x), _mm_andnot_ps(m, y)));
                return transmute_copy::<f32, T>(&r);
            }
            if size_of::<T>() == 8 {
                let m = _mm_castsi128_pd(_mm_set1_epi64x(-(take as i64)));
                let (x, y) = (
                    _mm_set_sd(transmute_copy::<T, f64>(&a)),
                    _mm_set_sd(transmute_copy::<T, f64>(&b)),
                );
                let r = _mm_cvtsd_f64(_mm_or_pd(_mm_and_pd(m, x), _mm_andnot_pd(m, y)));
                return transmute_copy::<f64, T>(&r);
            }
        }
    }
    if take {
        a
    } else {
        b
    }
}

fn max_pool_t<T: Real>(x: &Tensor, p: &Pool2dParams, out: &Tensor, indices: Option<&Tensor>) {
    let (h, w) = (x.shape()[2] as isize, x.shape()[3] as isize);
    let (sh, sw) = (x.strides()[2], x.strides()[3]);
    let (oh, ow) = (out.shape()[2], out.shape()[3]);
    let ip = indices.map(|t| SendPtr(t.data_ptr::<i64>()));
    let [kh, kw] = p.kernel;
    let (dh, dw) = (p.dilation[0] as isize, p.dilation[1] as isize);
    // Every window inside the plane (no padding, and ceil mode adding no
    // partial window): no bounds checks, the first tap starts the maximum.
    let inside = p.pad == [0, 0]
        && kh > 0
        && kw > 0
        && (oh == 0 || ((oh - 1) * p.stride[0]) as isize + (kh as isize - 1) * dh < h)
        && (ow == 0 || ((ow - 1) * p.stride[1]) as isize + (kw as isize - 1) * dw < w);
    if inside {
        let (s0, s1) = (p.stride[0] as isize, p.stride[1] as isize);
        for_planes::<T>(x, out, |src, y, pi| {
            for oy in 0..oh {
                let y0 = oy as isize * s0;
                for ox in 0..ow {
                    let x0 = ox as isize * s1;
                    // SAFETY: every tap of the window is inside the plane (checked above).
                    let (best, bi) = unsafe {
                        let mut best = *src.offset(y0 * sh + x0 * sw);
                        let mut bi = y0 * w + x0;
                        for i in 0..kh as isize {
                            let iy = y0 + i * dh;
                            let row = src.offset(iy * sh);
                            for j in 0..kw as isize {
                                if i == 0 && j == 0 {
                                    continue;
                                }
                                let ix = x0 + j * dw;
                                let v = *row.offset(ix * sw);
                                // Taps in the same order as the general loop:
                                // a larger value or a NaN takes over. Selects,
                                // not branches: on real data the comparison is
                                // a coin flip, and mispredictions cost more
                                // than all the rest of the window.
                                let take = (v > best) | v.is_nan();
                                best = pick(take, v, best);
                                bi = std::hint::select_unpredictable(take, iy * w + ix, bi);
                            }
                        }
                        (best, bi)
                    };
                    let k = oy * ow + ox;
                    y[k] = best;
                    if let Some(ip) = ip {
                        // SAFETY: the index tensor is contiguous with out's shape.
                        unsafe { *ip.get().add(pi * oh * ow + k) = bi as i64 };
                    }
                }
            }
        });
        return;
    }
    for_planes::<T>(x, out, |src, y, pi| {
        for oy in 0..oh {
            let y0 = (oy * p.stride[0]) as isize - p.pad[0] as isize;
            for ox in 0..ow {
                let x0 = (ox * p.stride[1]) as isize - p.pad[1] as isize;
                let mut best: Option<T> = None;
                let mut bi: i64 = -1;
                for i in 0..kh as isize {
                    let iy = y0 + i * dh;
                    if iy < 0 || iy >= h {
                        continue;
                    }
                    for j in 0..kw as isize {
                        let ix = x0 + j * dw;
                        if ix < 0 || ix >= w {
                            continue;
                        }
                        // SAFETY: (iy, ix) inside the plane.
                        let v = unsafe { *src.offset(iy * sh + ix * sw) };
                        let take = match best {
                            None => true,
                            Some(b) => v > b || v.is_nan(),
                        };
                        if take {
                            best = Some(v);
                            bi = (iy * w + ix) as i64;
                        }
                    }
                }
                let k = oy * ow + ox;
                y[k] = best.unwrap_or(T::c(f64::NEG_INFINITY));
                if let Some(ip) = ip {
                    // SAFETY: the index tensor is contiguous with out's shape.
                    unsafe { *ip.get().add(pi * oh * ow + k) = bi };
                }
            }
        }
    });
}

pub fn avg_pool2d(
    x: &Tensor,
    p: &Pool2dParams,
    count_include_pad: bool,
    divisor_override: Option<usize>,
    out: &Tensor,
) -> Result<()> {
    match out.dtype() {
        DType::F32 => avg_pool_t::<f32>(x, p, count_include_pad, divisor_override, out),
        DType::F64 => avg_pool_t::<f64>(x, p, count_include_pad, divisor_override, out),
        d => return float_only("avg_pool2d", d),
    }
    Ok(())
}

fn avg_pool_t<T: Real>(
    x: &Tensor,
    p: &Pool2dParams,
    count_include_pad: bool,
    divisor_override: Option<usize>,
    out: &Tensor,
) {
    let (h, w) = (x.shape()[2] as isize, x.shape()[3] as isize);
    let (sh, sw) = (x.strides()[2], x.strides()[3]);
    let (oh, ow) = (out.shape()[2], out.shape()[3]);
    let [kh, kw] = p.kernel;
    let (ph, pw) = (p.pad[0] as isize, p.pad[1] as isize);
    for_planes::<T>(x, out, |src, y, _| {
        for oy in 0..oh {
            let hs = (oy * p.stride[0]) as isize - ph;
            let he = (hs + kh as isize).min(h + ph);
            for ox in 0..ow {
                let ws = (ox * p.stride[1]) as isize - pw;
                let we = (ws + kw as isize).min(w + pw);
                let pool = (he - hs) * (we - ws);
                let (hs, he) = (hs.max(0), he.min(h));
                let (ws, we) = (ws.max(0), we.min(w));
                let mut acc = T::ZERO;
                for iy in hs..he {
                    for ix in ws..we {
                        // SAFETY: inside the plane.
                        acc = acc + unsafe { *src.offset(iy * sh + ix * sw) };
                    }
                }
                let div = match divisor_override {
                    Some(d) => d as isize,
                    None if count_include_pad => pool,
                    None => (he - hs).max(0) * (we - ws).max(0),
                };
                y[oy * ow + ox] = if div > 0 {
                    acc / T::c(div as f64)
                } else {
                    T::NAN
                };
            }
        }
    });
}

pub fn adaptive_avg_pool2d(x: &Tensor, out: &Tensor) -> Result<()> {
    match out.dtype() {
        DType::F32 => adaptive_t::<f32>(x, out),
        DType::F64 => adaptive_t::<f64>(x, out),
        d => return float_only("adaptive_avg_pool2d", d),
    }
    Ok(())
}

fn adaptive_t<T: Real>(x: &Tensor, out: &Tensor) {
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let (sh, sw) = (x.strides()[2], x.strides()[3]);
    let (oh, ow) = (out.shape()[2], out.shape()[3]);
    for_planes::<T>(x, out, |src, y, _| {
        for oy in 0..oh {
            let hs = oy * h / oh;
            let he = ((oy + 1) * h).div_ceil(oh);
            for ox in 0..ow {
                let ws = ox * w / ow;
                let we = ((ox + 1) * w).div_ceil(ow);
                let mut acc = T::ZERO;
                for iy in hs..he {
                    for ix in ws..we {
                        // SAFETY: inside the plane.
                        acc = acc + unsafe { *src.offset(iy as isize * sh + ix as isize * sw) };
                    }
                }
                y[oy * ow + ox] = acc / T::c(((he - hs) * (we - ws)) as f64);
            }
        }
    });
}
