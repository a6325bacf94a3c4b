//! CPU kernels of the random ops.
//!
//! Every kernel maps Philox blocks to elements exactly as specified in
//! [`crate::kernel::philox`]: element `i` reads only its own block, so work is
//! split over threads in whole-block chunks and the output never depends on
//! the thread count. Outputs are contiguous tensors the op layer allocated
//! (or a contiguous in-place target); inputs arrive contiguous.

use half::{bf16, f16};
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::simd::{level, Level};
use super::strided::{SendPtr, PAR_MIN};
use crate::error::{Error, Result};
use crate::kernel::philox::{
    bernoulli_threshold, bounded, box_muller_f32, box_muller_f64, unit_bf16, unit_f16, unit_f32,
    unit_f64, unit_f64_open0, word64, PhiloxStream, PHILOX_M0, PHILOX_M1, PHILOX_W0, PHILOX_W1,
};
use crate::kernel::RandomDist;
use crate::tensor::{DType, Element, Tensor};
use crate::with_dtype;

/// Blocks per parallel task.
const CHUNK_BLOCKS: usize = 1 << 12;

/// Blocks computed together in SIMD lanes.
const LANES: usize = 8;

/// Blocks `b0 .. b0 + LANES` at once, as four arrays of words (structure of
/// arrays, so the rounds vectorise).
#[inline(always)]
fn philox_lanes(s: PhiloxStream, b0: u64) -> [[u32; LANES]; 4] {
    let [mut k0, mut k1] = s.key();
    let mut c0 = [0u32; LANES];
    let mut c1 = [0u32; LANES];
    let mut c2 = [0u32; LANES];
    let mut c3 = [0u32; LANES];
    for l in 0..LANES {
        let c = s.offset.wrapping_add(b0 + l as u64);
        c0[l] = c as u32;
        c1[l] = (c >> 32) as u32;
    }
    for r in 0..10 {
        if r > 0 {
            k0 = k0.wrapping_add(PHILOX_W0);
            k1 = k1.wrapping_add(PHILOX_W1);
        }
        for l in 0..LANES {
            let p0 = PHILOX_M0 as u64 * c0[l] as u64;
            let p1 = PHILOX_M1 as u64 * c2[l] as u64;
            c0[l] = ((p1 >> 32) as u32) ^ c1[l] ^ k0;
            c1[l] = p1 as u32;
            c2[l] = ((p0 >> 32) as u32) ^ c3[l] ^ k1;
            c3[l] = p0 as u32;
        }
    }
    [c0, c1, c2, c3]
}

/// Blocks `b0 .. b1`: `f` maps each block's words to its `K` elements.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn run_body<T: Copy, const K: usize, F: Fn(usize, [u32; 4]) -> [T; K]>(
    p: *mut T,
    n: usize,
    s: PhiloxStream,
    f: &F,
    b0: usize,
    b1: usize,
) {
    let put = |b: usize, x: [u32; 4]| {
        let base = b * K;
        let vals = f(base, x);
        let cnt = K.min(n - base);
        for (m, v) in vals.iter().enumerate().take(cnt) {
            // SAFETY: base + m < n, inside the output the caller owns;
            // blocks are disjoint, so no two tasks write one element.
            *p.add(base + m) = *v;
        }
    };
    let mut b = b0;
    while b + LANES <= b1 {
        let w = philox_lanes(s, b as u64);
        for l in 0..LANES {
            put(b + l, [w[0][l], w[1][l], w[2][l], w[3][l]]);
        }
        b += LANES;
    }
    while b < b1 {
        put(b, s.block(b as u64));
        b += 1;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn run_v4<T: Copy, const K: usize, F: Fn(usize, [u32; 4]) -> [T; K]>(
    p: *mut T,
    n: usize,
    s: PhiloxStream,
    f: &F,
    b0: usize,
    b1: usize,
) {
    run_body(p, n, s, f, b0, b1)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_v3<T: Copy, const K: usize, F: Fn(usize, [u32; 4]) -> [T; K]>(
    p: *mut T,
    n: usize,
    s: PhiloxStream,
    f: &F,
    b0: usize,
    b1: usize,
) {
    run_body(p, n, s, f, b0, b1)
}

/// Blocks `b0 .. b1` at the best SIMD level (integer work only, so every
/// level gives the same bits; no FMA contraction happens in Rust).
unsafe fn run_blocks<T: Copy, const K: usize, F: Fn(usize, [u32; 4]) -> [T; K]>(
    p: *mut T,
    n: usize,
    s: PhiloxStream,
    f: &F,
    b0: usize,
    b1: usize,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => return run_v4(p, n, s, f, b0, b1),
        Level::Avx2 => return run_v3(p, n, s, f, b0, b1),
        Level::Scalar => {}
    }
    run_body(p, n, s, f, b0, b1)
}

/// Write `n` elements at `out`, `K` per Philox block: block `b` produces
/// `f(b * K, words)` for elements `b*K .. b*K + K` (the tail block is cut at `n`).
///
/// `f` receives the index of the block's first element so kernels with an
/// input (dropout) can read it; it must not read past `n`.
fn fill_blocks<T: Copy + Send + Sync, const K: usize>(
    out: *mut T,
    n: usize,
    s: PhiloxStream,
    f: impl Fn(usize, [u32; 4]) -> [T; K] + Sync,
) {
    let nblocks = n.div_ceil(K);
    let outp = SendPtr(out);
    // SAFETY: `out` holds `n` elements the op owns; ranges of blocks are disjoint.
    let run = |b0: usize, b1: usize| unsafe { run_blocks(outp.get(), n, s, &f, b0, b1) };
    if n < PAR_MIN || crate::par::split() <= 1 {
        run(0, nblocks);
    } else {
        let chunks = nblocks.div_ceil(CHUNK_BLOCKS);
        crate::par::for_each(chunks, |c| {
            run(c * CHUNK_BLOCKS, ((c + 1) * CHUNK_BLOCKS).min(nblocks));
        });
    }
}

/// The largest f32 below `x` (finite `x`).
pub(crate) fn below_f32(x: f32) -> f32 {
    if x == 0.0 {
        -f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        f32::from_bits(x.to_bits() + 1)
    }
}

fn below_f64(x: f64) -> f64 {
    if x == 0.0 {
        -f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(x.to_bits() - 1)
    } else {
        f64::from_bits(x.to_bits() + 1)
    }
}

/// `v` kept strictly below `high` when rounding reached it (half-open ranges).
macro_rules! half_open {
    ($v:expr, $high:expr, $low:expr, $below:expr) => {{
        let v = $v;
        if v >= $high && $high > $low {
            $below($high)
        } else {
            v
        }
    }};
}

/// Largest value of a 16-bit float type below `h` (sign-magnitude bit step).
pub(crate) fn below_bits16(bits: u16) -> u16 {
    let neg = bits & 0x8000 != 0;
    let mag = bits & 0x7fff;
    if mag == 0 {
        0x8001
    } else if neg {
        bits + 1
    } else {
        bits - 1
    }
}

/// `[f(x[0]), f(x[1]), f(x[2]), f(x[3])]`, spelled out (`array::map` optimises worse here).
#[inline(always)]
fn map4<A: Copy, B>(x: [A; 4], f: impl Fn(A) -> B) -> [B; 4] {
    [f(x[0]), f(x[1]), f(x[2]), f(x[3])]
}

/// Four normals (as f32) from one block.
#[inline(always)]
fn normal4(x: [u32; 4], mean: f32, std: f32) -> [f32; 4] {
    let (a, b) = box_muller_f32(x[0], x[1]);
    let (c, d) = box_muller_f32(x[2], x[3]);
    [
        mean + std * a,
        mean + std * b,
        mean + std * c,
        mean + std * d,
    ]
}

/// `random_fill`: `out` contiguous.
pub fn fill(out: &Tensor, dist: RandomDist, s: PhiloxStream) -> Result<()> {
    debug_assert!(out.is_contiguous());
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let dt = out.dtype();
    match dist {
        RandomDist::Uniform { low, high } => match dt {
            DType::F32 => {
                let (a, span, hi) = (low as f32, (high - low) as f32, high as f32);
                fill_blocks::<f32, 4>(out.data_ptr(), n, s, |_, x| {
                    map4(x, |w| half_open!(a + span * unit_f32(w), hi, a, below_f32))
                });
            }
            DType::F64 => {
                let span = high - low;
                let one = |v: u64| half_open!(low + span * unit_f64(v), high, low, below_f64);
                fill_blocks::<f64, 2>(out.data_ptr(), n, s, |_, x| {
                    [one(word64(x, 0)), one(word64(x, 1))]
                });
            }
            DType::F16 => {
                let (a, span) = (low as f32, (high - low) as f32);
                let (hlo, hhi) = (f16::from_f32(a), f16::from_f32(high as f32));
                fill_blocks::<f16, 4>(out.data_ptr(), n, s, |_, x| {
                    map4(x, |w| {
                        let v = f16::from_f32(a + span * unit_f16(w));
                        if v >= hhi && hhi > hlo {
                            f16::from_bits(below_bits16(hhi.to_bits()))
                        } else {
                            v
                        }
                    })
                });
            }
            DType::BF16 => {
                let (a, span) = (low as f32, (high - low) as f32);
                let (hlo, hhi) = (bf16::from_f32(a), bf16::from_f32(high as f32));
                fill_blocks::<bf16, 4>(out.data_ptr(), n, s, |_, x| {
                    map4(x, |w| {
                        let v = bf16::from_f32(a + span * unit_bf16(w));
                        if v >= hhi && hhi > hlo {
                            bf16::from_bits(below_bits16(hhi.to_bits()))
                        } else {
                            v
                        }
                    })
                });
            }
            _ => return Err(float_only("uniform", dt)),
        },
        RandomDist::Normal { mean, std } => match dt {
            DType::F32 => {
                let (m, sd) = (mean as f32, std as f32);
                fill_blocks::<f32, 4>(out.data_ptr(), n, s, |_, x| normal4(x, m, sd));
            }
            DType::F16 => {
                let (m, sd) = (mean as f32, std as f32);
                fill_blocks::<f16, 4>(out.data_ptr(), n, s, |_, x| {
                    map4(normal4(x, m, sd), f16::from_f32)
                });
            }
            DType::BF16 => {
                let (m, sd) = (mean as f32, std as f32);
                fill_blocks::<bf16, 4>(out.data_ptr(), n, s, |_, x| {
                    map4(normal4(x, m, sd), bf16::from_f32)
                });
            }
            DType::F64 => {
                fill_blocks::<f64, 2>(out.data_ptr(), n, s, |_, x| {
                    let (a, b) = box_muller_f64(word64(x, 0), word64(x, 1));
                    [mean + std * a, mean + std * b]
                });
            }
            _ => return Err(float_only("normal", dt)),
        },
        RandomDist::Int { low, range } => {
            with_dtype!(dt, T => {
                let one = |v: u64| T::from_i64(low.wrapping_add(bounded(v, range) as i64));
                fill_blocks::<T, 2>(out.data_ptr(), n, s, |_, x| {
                    [one(word64(x, 0)), one(word64(x, 1))]
                });
            });
        }
        RandomDist::Bernoulli { p } => {
            let t = bernoulli_threshold(p);
            with_dtype!(dt, T => {
                fill_blocks::<T, 4>(out.data_ptr(), n, s, |_, x| {
                    map4(x, |w| if (w >> 8) < t { T::one() } else { T::zero() })
                });
            });
        }
    }
    Ok(())
}

fn float_only(op: &'static str, dt: DType) -> Error {
    Error::dtype(op, format!("expected a floating dtype, got {dt}"))
}

/// `bernoulli_tensor`: `p` contiguous floating probabilities, `out` contiguous, equal sizes.
pub fn bernoulli_tensor(p: &Tensor, out: &Tensor, s: PhiloxStream) -> Result<()> {
    debug_assert!(p.is_contiguous() && out.is_contiguous());
    debug_assert_eq!(p.numel(), out.numel());
    let n = out.numel();
    // Validate first: an in-place target must stay untouched on error.
    with_dtype!(p.dtype(), P => {
        // SAFETY: contiguous input of n elements, read only.
        let ps = unsafe { std::slice::from_raw_parts(p.data_ptr::<P>() as *const P, n) };
        if let Some(bad) = ps.iter().map(|v| v.to_f64()).find(|v| !(0.0..=1.0).contains(v)) {
            return Err(Error::value(
                "bernoulli",
                format!("every probability must be in [0, 1], found {bad}"),
            ));
        }
        let pp = SendPtr(p.data_ptr::<P>());
        with_dtype!(out.dtype(), T => {
            fill_blocks::<T, 4>(out.data_ptr(), n, s, |base, x| {
                let mut r = [T::zero(); 4];
                for (m, w) in x.iter().enumerate() {
                    if base + m < n {
                        // SAFETY: base + m < n, inside the probabilities.
                        let pv = unsafe { *pp.get().add(base + m) }.to_f64();
                        if (w >> 8) < bernoulli_threshold(pv) {
                            r[m] = T::one();
                        }
                    }
                }
                r
            });
        });
    });
    Ok(())
}

/// `dropout`: `x` and `out` contiguous with one floating dtype; `0 < p < 1`.
pub fn dropout(x: &Tensor, out: &Tensor, p: f64, s: PhiloxStream) -> Result<()> {
    debug_assert!(x.is_contiguous() && out.is_contiguous());
    let n = out.numel();
    let t = bernoulli_threshold(1.0 - p);
    let scale = 1.0 / (1.0 - p);
    macro_rules! run {
        ($T:ty, $C:ty, $load:expr, $store:expr) => {{
            let xp = SendPtr(x.data_ptr::<$T>());
            let sc = scale as $C;
            fill_blocks::<$T, 4>(out.data_ptr(), n, s, |base, w| {
                let mut r = [$store(0.0 as $C); 4];
                for m in 0..4 {
                    if base + m < n && (w[m] >> 8) < t {
                        // SAFETY: base + m < n, inside the input.
                        let v: $T = unsafe { *xp.get().add(base + m) };
                        r[m] = $store($load(v) * sc);
                    }
                }
                r
            });
        }};
    }
    match x.dtype() {
        DType::F32 => run!(f32, f32, |v: f32| v, |v: f32| v),
        DType::F64 => run!(f64, f64, |v: f64| v, |v: f64| v),
        DType::F16 => run!(f16, f32, |v: f16| v.to_f32(), f16::from_f32),
        DType::BF16 => run!(bf16, f32, |v: bf16| v.to_f32(), bf16::from_f32),
        dt => return Err(float_only("dropout", dt)),
    }
    Ok(())
}

/// `randperm`: sort `(key_i, i)` where `key_i` is element `i`'s 64-bit draw.
pub fn randperm(out: &Tensor, s: PhiloxStream) -> Result<()> {
    debug_assert!(out.is_contiguous());
    let n = out.numel();
    let mut keys: Vec<(u64, u64)> = vec![(0, 0); n];
    let fill_chunk = |c: usize, chunk: &mut [(u64, u64)]| {
        // Chunks start at even element indices, so blocks are whole.
        let first = c * 2 * CHUNK_BLOCKS;
        for (k, slot) in chunk.iter_mut().enumerate() {
            let i = first + k;
            let x = s.block((i / 2) as u64);
            *slot = (word64(x, i % 2), i as u64);
        }
    };
    let big = n >= PAR_MIN && crate::par::split() > 1;
    if big {
        crate::par::install(|| {
            keys.par_chunks_mut(2 * CHUNK_BLOCKS)
                .enumerate()
                .for_each(|(c, ch)| fill_chunk(c, ch))
        });
        crate::par::install(|| keys.par_sort_unstable());
    } else {
        keys.chunks_mut(2 * CHUNK_BLOCKS)
            .enumerate()
            .for_each(|(c, ch)| fill_chunk(c, ch));
        keys.sort_unstable();
    }
    with_dtype!(out.dtype(), T => {
        let p = out.data_ptr::<T>();
        for (i, &(_, idx)) in keys.iter().enumerate() {
            // SAFETY: i < n, the output the op allocated.
            unsafe { *p.add(i) = T::from_i64(idx as i64) };
        }
    });
    Ok(())
}

/// `multinomial`: `probs` contiguous `[rows, m]` (floating), `out` contiguous int64 `[rows, k]`.
pub fn multinomial(probs: &Tensor, out: &Tensor, replacement: bool, s: PhiloxStream) -> Result<()> {
    const OP: &str = "multinomial";
    let (rows, m) = (probs.shape()[0], probs.shape()[1]);
    let k = out.shape()[1];
    let mut p = Vec::with_capacity(rows * m);
    with_dtype!(probs.dtype(), P => {
        // SAFETY: contiguous input of rows * m elements, read only.
        let ps = unsafe { std::slice::from_raw_parts(probs.data_ptr::<P>() as *const P, rows * m) };
        p.extend(ps.iter().map(|v| v.to_f64()));
    });
    // Validate every row before drawing anything.
    let mut totals = Vec::with_capacity(rows);
    for r in 0..rows {
        let row = &p[r * m..(r + 1) * m];
        if let Some(bad) = row.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return Err(Error::value(
                OP,
                format!("probabilities must be finite and non-negative, found {bad} in row {r}"),
            ));
        }
        let total: f64 = row.iter().sum();
        if total <= 0.0 {
            return Err(Error::value(
                OP,
                format!("row {r} of the probabilities sums to 0"),
            ));
        }
        if !replacement {
            let nz = row.iter().filter(|v| **v > 0.0).count();
            if nz < k {
                return Err(Error::value(
                    OP,
                    format!(
                        "cannot draw {k} samples without replacement: row {r} has only {nz} non-zero probabilities"
                    ),
                ));
            }
        }
        totals.push(total);
    }
    let op = SendPtr(out.data_ptr::<i64>());
    let draw = |e: usize| word64(s.block((e / 2) as u64), e % 2);
    let do_row = |r: usize| {
        let row = &p[r * m..(r + 1) * m];
        let dst = op.get();
        if replacement {
            let mut cdf = Vec::with_capacity(m);
            let mut acc = 0.0;
            for &v in row {
                acc += v;
                cdf.push(acc);
            }
            let last = row.iter().rposition(|v| *v > 0.0).unwrap_or(m - 1);
            for j in 0..k {
                let target = unit_f64(draw(r * k + j)) * totals[r];
                let mut c = cdf.partition_point(|&x| x <= target);
                if c >= m {
                    c = last;
                }
                // SAFETY: r < rows, j < k: inside the output the op allocated.
                unsafe { *dst.add(r * k + j) = c as i64 };
            }
        } else {
            // Exponential race: category j's key is E_j / p_j with E_j ~ Exp(1);
            // the k smallest keys, ascending, are a draw without replacement.
            let mut keyed: Vec<(f64, usize)> = row
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0.0)
                .map(|(j, v)| (-unit_f64_open0(draw(r * m + j)).ln() / v, j))
                .collect();
            let cmp = |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            if k > 0 && k < keyed.len() {
                keyed.select_nth_unstable_by(k - 1, cmp);
            }
            keyed.truncate(k);
            keyed.sort_unstable_by(cmp);
            for (j, &(_, c)) in keyed.iter().enumerate() {
                // SAFETY: r < rows, j < k: inside the output the op allocated.
                unsafe { *dst.add(r * k + j) = c as i64 };
            }
        }
    };
    let work = rows * m.max(k);
    if rows > 1 && work >= PAR_MIN && crate::par::split() > 1 {
        crate::par::for_each(rows, do_row);
    } else {
        (0..rows).for_each(do_row);
    }
    Ok(())
}
