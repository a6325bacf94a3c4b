//! CPU softmax and log-softmax along one dim: a row kernel (the dim is
//! innermost) and a column kernel (it is not), split over the thread pool.

use super::elementwise::cast_copy;
use super::math::{lane_sum, Real};
use super::reduce::{contiguous_as, max_nan, par_ranges, split3, threads, BLOCK, PAR_MIN};
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::multiversion;
use crate::tensor::{DType, Element, Tensor};

pub fn softmax(x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
    match x.dtype() {
        DType::F32 => softmax_real::<f32>(x, dim, log, out),
        DType::F64 => softmax_real::<f64>(x, dim, log, out),
        DType::F16 | DType::BF16 => {
            let xf = contiguous_as(x, DType::F32)?;
            let of = Tensor::empty(x.shape(), DType::F32, x.device())?;
            softmax_real::<f32>(&xf, dim, log, &of)?;
            cast_copy(&of, out)
        }
        d => Err(Error::dtype(
            if log { "log_softmax" } else { "softmax" },
            format!("not implemented for dtype {d}"),
        )),
    }
}

/// Most columns handled together by the column softmax.
const SJ: usize = 2048;

#[inline(always)]
fn softmax_row<R: Real>(x: &[R], y: &mut [R], log: bool) {
    const L: usize = 16;
    let ninf = R::c(f64::NEG_INFINITY);
    let mut mx = [ninf; L];
    let mut it = x.chunks_exact(L);
    for c in &mut it {
        let c: &[R; L] = c.try_into().unwrap();
        for (m, &v) in mx.iter_mut().zip(c) {
            *m = max_nan(*m, v);
        }
    }
    let mut m = mx.iter().fold(ninf, |a, &b| max_nan(a, b));
    for &v in it.remainder() {
        m = max_nan(m, v);
    }
    let mut total = R::ZERO;
    for (xb, yb) in x.chunks(BLOCK).zip(y.chunks_mut(BLOCK)) {
        let mut acc = [R::ZERO; L];
        let mut xi = xb.chunks_exact(L);
        let mut yi = yb.chunks_exact_mut(L);
        for (xc, yc) in (&mut xi).zip(&mut yi) {
            let xc: &[R; L] = xc.try_into().unwrap();
            let yc: &mut [R; L] = yc.try_into().unwrap();
            for ((a, &v), o) in acc.iter_mut().zip(xc).zip(yc.iter_mut()) {
                let e = (v - m).exp();
                *o = e;
                *a = *a + e;
            }
        }
        for ((a, &v), o) in acc.iter_mut().zip(xi.remainder()).zip(yi.into_remainder()) {
            let e = (v - m).exp();
            *o = e;
            *a = *a + e;
        }
        total = total + lane_sum(acc);
    }
    if log {
        // (x - max) is exact for the values that matter; subtract log Σ after.
        let ls = total.ln();
        for (o, &v) in y.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        let inv = R::ONE / total;
        for o in y.iter_mut() {
            *o = *o * inv;
        }
    }
}

multiversion! {
    /// Softmax of consecutive rows of length `d`.
    fn softmax_rows<R: Real>(x: &[R], y: &mut [R], d: usize, log: bool) {
        for (xr, yr) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)) {
            softmax_row(xr, yr, log);
        }
    }
}

multiversion! {
    /// Column softmax, first pass over rows `a..b` of a slab (rows of length
    /// `inner`, columns `j0..j0 + len`): the column maxima `m`, then the sums
    /// `s` of `exp(x - m)`.
    fn cols_max_sum<R: Real>(x: SendPtr<R>, inner: usize, a: usize, b: usize, j0: usize, m: &mut [R], s: &mut [R]) {
        let len = m.len();
        // SAFETY: the caller passes a slab holding rows a..b.
        let row = |i: usize| unsafe { std::slice::from_raw_parts(x.get().add(i * inner + j0) as *const R, len) };
        for i in a..b {
            for (mj, &v) in m.iter_mut().zip(row(i)) {
                *mj = max_nan(*mj, v);
            }
        }
        for i in a..b {
            for ((sj, &v), &mj) in s.iter_mut().zip(row(i)).zip(m.iter()) {
                *sj = *sj + (v - mj).exp();
            }
        }
    }
}

multiversion! {
    /// Column softmax, last pass over `rows` (`x` and `y` point at the first column): `y = exp(x - m) * t`, or
    /// `y = (x - m) - t` for log-softmax.
    fn cols_write<R: Real>(x: SendPtr<R>, y: SendPtr<R>, inner: usize, rows: std::ops::Range<usize>, m: &[R], t: &[R], log: bool) {
        let len = m.len();
        for i in rows {
            // SAFETY: rows of the slab; these `len` columns of y are
            // written by this call only.
            let (xr, yr) = unsafe {
                (
                    std::slice::from_raw_parts(x.get().add(i * inner) as *const R, len),
                    std::slice::from_raw_parts_mut(y.get().add(i * inner), len),
                )
            };
            if log {
                for (((o, &v), &mj), &tj) in yr.iter_mut().zip(xr).zip(m).zip(t) {
                    *o = (v - mj) - tj;
                }
            } else {
                for (((o, &v), &mj), &tj) in yr.iter_mut().zip(xr).zip(m).zip(t) {
                    *o = (v - mj).exp() * tj;
                }
            }
        }
    }
}

fn softmax_real<R: Real + Element>(x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
    let x = contiguous_as(x, R::DTYPE)?;
    let (outer, n, inner) = split3(x.shape(), dim);
    if outer * n * inner == 0 {
        return Ok(());
    }
    let xp = SendPtr(x.data_ptr::<R>());
    let yp = SendPtr(out.data_ptr::<R>());
    let nthreads = threads();
    let total = outer * n * inner;
    let tasks = if total < PAR_MIN / 4 { 1 } else { nthreads * 8 };
    if inner == 1 {
        par_ranges(outer, tasks, |a, b| {
            // SAFETY: rows a..b of the input and of the freshly allocated output,
            // disjoint between tasks.
            let (xs, ys) = unsafe {
                (
                    std::slice::from_raw_parts(xp.get().add(a * n) as *const R, (b - a) * n),
                    std::slice::from_raw_parts_mut(yp.get().add(a * n), (b - a) * n),
                )
            };
            softmax_rows(xs, ys, n, log);
        });
    } else {
        // Column chunks as wide as possible (whole rows stream best); for
        // parallelism the reduced rows are cut into parts whose partial
        // maxima and sums are combined: S = Σ_p s_p · exp(m_p - M).
        let nj = inner.div_ceil(SJ);
        let width = inner.div_ceil(nj);
        let slabs = outer * nj;
        let parts = if tasks == 1 {
            1
        } else {
            (2 * nthreads).div_ceil(slabs).min(n.div_ceil(16)).max(1)
        };
        let per = n.div_ceil(parts);
        let ninf = R::c(f64::NEG_INFINITY);
        let geom = |u: usize| {
            let (sl, p) = (u / parts, u % parts);
            let (o, jc) = (sl / nj, sl % nj);
            let j0 = jc * width;
            let len = width.min(inner - j0);
            let (ra, rb) = (p * per, ((p + 1) * per).min(n));
            (o, j0, len, ra, rb)
        };
        if parts == 1 {
            // Enough slab chunks for the threads: each one in a single sweep pair.
            par_ranges(slabs, tasks, |a, b| {
                let mut m = vec![ninf; width];
                let mut sm = vec![R::ZERO; width];
                for u in a..b {
                    let (o, j0, len, _, _) = geom(u);
                    let (m, sm) = (&mut m[..len], &mut sm[..len]);
                    m.iter_mut().for_each(|v| *v = ninf);
                    sm.iter_mut().for_each(|v| *v = R::ZERO);
                    // SAFETY: slab o of both tensors; columns j0..j0+len are this unit's.
                    let (xs, ys) = unsafe {
                        (
                            SendPtr(xp.get().add(o * n * inner)),
                            SendPtr(yp.get().add(o * n * inner)),
                        )
                    };
                    cols_max_sum(xs, inner, 0, n, j0, m, sm);
                    for tj in sm.iter_mut() {
                        *tj = if log { tj.ln() } else { R::ONE / *tj };
                    }
                    cols_write(
                        SendPtr(xs.get().wrapping_add(j0)),
                        SendPtr(ys.get().wrapping_add(j0)),
                        inner,
                        0..n,
                        m,
                        sm,
                        log,
                    );
                }
            });
            return Ok(());
        }
        let partial: Vec<(Vec<R>, Vec<R>)> = crate::par::map(slabs * parts, |u| {
            let (o, j0, len, ra, rb) = geom(u);
            let mut m = vec![ninf; len];
            let mut sm = vec![R::ZERO; len];
            // SAFETY: slab o of the input.
            let xs = SendPtr(unsafe { xp.get().add(o * n * inner) });
            cols_max_sum(xs, inner, ra, rb.max(ra), j0, &mut m, &mut sm);
            (m, sm)
        });
        // Combine the parts of each slab chunk.
        let combined: Vec<(Vec<R>, Vec<R>)> = (0..slabs)
            .map(|sl| {
                let ps = &partial[sl * parts..(sl + 1) * parts];
                let len = ps[0].0.len();
                let mut mm = vec![ninf; len];
                for (m, _) in ps {
                    for (a, &b) in mm.iter_mut().zip(m) {
                        *a = max_nan(*a, b);
                    }
                }
                let mut t = vec![R::ZERO; len];
                for (m, sm) in ps {
                    for (((tj, &mj), &sj), &mmj) in t.iter_mut().zip(m).zip(sm).zip(&mm) {
                        // A part holding only -inf adds nothing (its own sum is NaN).
                        if mj != ninf {
                            *tj = *tj + sj * (mj - mmj).exp();
                        }
                    }
                }
                for tj in t.iter_mut() {
                    *tj = if log { tj.ln() } else { R::ONE / *tj };
                }
                (mm, t)
            })
            .collect();
        crate::par::for_each(slabs * parts, |u| {
            let (o, j0, _len, ra, rb) = geom(u);
            let (m, t) = &combined[u / parts];
            // SAFETY: slab o of both tensors; each unit writes its own rows/columns.
            let (xs, ys) = unsafe {
                (
                    SendPtr(xp.get().add(o * n * inner)),
                    SendPtr(yp.get().add(o * n * inner)),
                )
            };
            cols_write(
                SendPtr(xs.get().wrapping_add(j0)),
                SendPtr(ys.get().wrapping_add(j0)),
                inner,
                ra..rb.max(ra),
                m,
                t,
                log,
            );
        });
    }
    Ok(())
}
