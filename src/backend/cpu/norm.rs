//! CPU layer norm and RMS norm over the last dims, writing the normalised
//! output with the per-row mean and reciprocal standard deviation.

use super::elementwise::{cast_copy, stream_fence, stream_lines, stream_ok};
use super::math::{lane_sum, Real};
use super::reduce::{contiguous_as, par_ranges, threads, BLOCK, PAR_MIN};
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::multiversion;
use crate::tensor::{DType, Element, Tensor};

#[allow(clippy::too_many_arguments)]
pub fn layer_norm(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    rms: bool,
    out: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
) -> Result<()> {
    match x.dtype() {
        DType::F32 => layer_norm_real::<f32>(x, weight, bias, eps, rms, out, mean, rstd),
        DType::F64 => layer_norm_real::<f64>(x, weight, bias, eps, rms, out, mean, rstd),
        DType::F16 | DType::BF16 => {
            let f = |t: &Tensor| contiguous_as(t, DType::F32);
            let xf = f(x)?;
            let wf = weight.map(f).transpose()?;
            let bf = bias.map(f).transpose()?;
            let of = Tensor::empty(x.shape(), DType::F32, x.device())?;
            layer_norm_real::<f32>(&xf, wf.as_ref(), bf.as_ref(), eps, rms, &of, mean, rstd)?;
            cast_copy(&of, out)
        }
        d => Err(Error::dtype(
            if rms { "rms_norm" } else { "layer_norm" },
            format!("not implemented for dtype {d}"),
        )),
    }
}

/// Σ of `f(v)` over a row, with 16 accumulators per block and blocks combined in f64.
#[inline(always)]
fn row_sum<R: Real>(x: &[R], f: impl Fn(R) -> R) -> f64 {
    const L: usize = 16;
    let mut total = 0.0f64;
    for xb in x.chunks(BLOCK) {
        let mut acc = [R::ZERO; L];
        let mut it = xb.chunks_exact(L);
        for c in &mut it {
            let c: &[R; L] = c.try_into().unwrap();
            for (a, &v) in acc.iter_mut().zip(c) {
                *a = *a + f(v);
            }
        }
        for (a, &v) in acc.iter_mut().zip(it.remainder()) {
            *a = *a + f(v);
        }
        total += lane_sum(acc).as_f64();
    }
    total
}

/// Σ (v - mu)² over a row: the shifted values are formed in a lane-sized
/// array first so the loop vectorises like [`row_sum`]'s (written as one
/// closure the compiler only half-vectorised it).
#[inline(always)]
fn row_sq_dev<R: Real>(x: &[R], mu: R) -> f64 {
    const L: usize = 16;
    let mut total = 0.0f64;
    for xb in x.chunks(BLOCK) {
        let mut acc = [R::ZERO; L];
        let mut it = xb.chunks_exact(L);
        for c in &mut it {
            let c: &[R; L] = c.try_into().unwrap();
            let mut t = [R::ZERO; L];
            for (t, &v) in t.iter_mut().zip(c) {
                *t = v - mu;
            }
            for (a, &t) in acc.iter_mut().zip(&t) {
                *a = *a + t * t;
            }
        }
        for (a, &v) in acc.iter_mut().zip(it.remainder()) {
            *a = *a + (v - mu) * (v - mu);
        }
        total += lane_sum(acc).as_f64();
    }
    total
}

/// The per-call constants of [`norm_rows`].
struct NormCfg<'a, R> {
    w: Option<&'a [R]>,
    b: Option<&'a [R]>,
    d: usize,
    eps: f64,
    rms: bool,
    /// Write the output with streaming stores (a large, fresh output).
    stream: bool,
}

/// `yr[i] = (xr[i] - mu) * r * w[i] + b[i]` (missing `w`/`b` are 1/0), with
/// streaming stores when `stream` (the caller fences).
#[inline(always)]
fn norm_write<R: Real>(
    xr: &[R],
    w: Option<&[R]>,
    b: Option<&[R]>,
    mu: R,
    r: R,
    yr: &mut [R],
    stream: bool,
) {
    let d = yr.len();
    if stream {
        let (x, y) = (xr.as_ptr(), yr.as_mut_ptr());
        // SAFETY: `y` holds `d` elements; `x`, `w`, `b` at least `d` (checked
        // by the caller's chunking and the parameter shapes); index `i < d`.
        let done = unsafe {
            match (w, b) {
                (Some(w), Some(b)) => {
                    let (w, b) = (w.as_ptr(), b.as_ptr());
                    stream_lines(y, d, &|i| (*x.add(i) - mu) * r * *w.add(i) + *b.add(i))
                }
                (Some(w), None) => {
                    let w = w.as_ptr();
                    stream_lines(y, d, &|i| (*x.add(i) - mu) * r * *w.add(i))
                }
                (None, Some(b)) => {
                    let b = b.as_ptr();
                    stream_lines(y, d, &|i| (*x.add(i) - mu) * r + *b.add(i))
                }
                (None, None) => stream_lines(y, d, &|i| (*x.add(i) - mu) * r),
            }
        };
        if done {
            return;
        }
    }
    match (w, b) {
        (Some(w), Some(b)) => {
            for (((o, &v), &wi), &bi) in yr.iter_mut().zip(xr).zip(w).zip(b) {
                *o = (v - mu) * r * wi + bi;
            }
        }
        (Some(w), None) => {
            for ((o, &v), &wi) in yr.iter_mut().zip(xr).zip(w) {
                *o = (v - mu) * r * wi;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &bi) in yr.iter_mut().zip(xr).zip(b) {
                *o = (v - mu) * r + bi;
            }
        }
        (None, None) => {
            for (o, &v) in yr.iter_mut().zip(xr) {
                *o = (v - mu) * r;
            }
        }
    }
}

multiversion! {
    /// Normalise consecutive rows of length `d` of `x` into `y`, writing each row's mean and 1/std.
    fn norm_rows<R: Real>(x: &[R], cfg: &NormCfg<'_, R>, y: &mut [R], mean: &mut [R], rstd: &mut [R]) {
        let NormCfg { w, b, d, eps, rms, stream } = *cfg;
        let n = d as f64;
        for (((xr, yr), m), s) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)).zip(mean.iter_mut()).zip(rstd.iter_mut()) {
            let mu = if rms { R::ZERO } else { R::c(row_sum(xr, |v| v) / n) };
            let var = row_sq_dev(xr, mu) / n;
            let r = R::c(1.0 / (var + eps).sqrt());
            *m = mu;
            *s = r;
            norm_write(xr, w, b, mu, r, yr, stream);
        }
        if stream {
            stream_fence();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn layer_norm_real<R: Real + Element>(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    rms: bool,
    out: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
) -> Result<()> {
    let x = contiguous_as(x, R::DTYPE)?;
    let total = x.numel();
    let rows = mean.numel();
    if total == 0 || rows == 0 {
        return Ok(());
    }
    let d = total / rows;
    // SAFETY: weight and bias are contiguous with `d` elements of R, only read.
    let param = |t: Option<&Tensor>| {
        t.map(|t| unsafe { std::slice::from_raw_parts(t.data_ptr::<R>() as *const R, d) })
    };
    let cfg = NormCfg {
        w: param(weight),
        b: param(bias),
        d,
        eps,
        rms,
        stream: stream_ok(total * std::mem::size_of::<R>())
            && x.data_ptr::<u8>() != out.data_ptr::<u8>(),
    };
    let xp = SendPtr(x.data_ptr::<R>());
    let yp = SendPtr(out.data_ptr::<R>());
    let mp = SendPtr(mean.data_ptr::<R>());
    let sp = SendPtr(rstd.data_ptr::<R>());
    let tasks = if total < PAR_MIN / 4 {
        1
    } else {
        threads() * 4
    };
    par_ranges(rows, tasks, |a, c| {
        // SAFETY: rows a..c of the contiguous input and of the freshly
        // allocated outputs, disjoint between tasks.
        let (xs, ys, ms, ss) = unsafe {
            (
                std::slice::from_raw_parts(xp.get().add(a * d) as *const R, (c - a) * d),
                std::slice::from_raw_parts_mut(yp.get().add(a * d), (c - a) * d),
                std::slice::from_raw_parts_mut(mp.get().add(a), c - a),
                std::slice::from_raw_parts_mut(sp.get().add(a), c - a),
            )
        };
        norm_rows(xs, &cfg, ys, ms, ss);
    });
    Ok(())
}
