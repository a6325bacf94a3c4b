//! Fused CPU kernels where a framework would fuse: the softmax / log-softmax
//! gradient, the layer-norm / RMS-norm gradient and cross entropy
//! (log-softmax + NLL) forward and backward. Each walks its rows once or
//! twice instead of running a chain of elementwise ops and reductions with a
//! temporary per step.
//!
//! Rows are contiguous (the op layer or the wrapper here makes them so);
//! float16/bfloat16 compute in float32. Row sums use 16 accumulators per
//! block, blocks combined in f64, as the reductions do. Sums over rows (the
//! norm's weight and bias gradients) are taken over fixed units of rows and
//! combined in order, so results do not depend on the thread count.

use super::math::{lane_sum, Real};
use super::reduce::{contiguous_as, par_ranges};
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::kernel::CeCfg;
use crate::multiversion;
use crate::tensor::layout::fmt_shape;
use crate::tensor::{DType, Element, Tensor};

/// Accumulators per block of a row sum.
const L: usize = 16;
/// Elements folded in the row type before being combined in f64.
const BLOCK: usize = 2048;
/// Below this many elements a kernel runs on the calling thread.
const PAR_MIN: usize = 1 << 14;

/// `Σ f(a_i, b_i)` over two rows of equal length.
#[inline(always)]
fn sum2<R: Real>(a: &[R], b: &[R], f: impl Fn(R, R) -> R) -> f64 {
    let mut total = 0.0f64;
    for (ab, bb) in a.chunks(BLOCK).zip(b.chunks(BLOCK)) {
        let mut acc = [R::ZERO; L];
        let mut ia = ab.chunks_exact(L);
        let mut ib = bb.chunks_exact(L);
        for (ca, cb) in (&mut ia).zip(&mut ib) {
            let ca: &[R; L] = ca.try_into().unwrap();
            let cb: &[R; L] = cb.try_into().unwrap();
            for k in 0..L {
                acc[k] = acc[k] + f(ca[k], cb[k]);
            }
        }
        for ((s, &x), &y) in acc.iter_mut().zip(ia.remainder()).zip(ib.remainder()) {
            *s = *s + f(x, y);
        }
        total += lane_sum(acc).as_f64();
    }
    total
}

/// Tasks for `total` elements of work: one below [`PAR_MIN`], else a few per thread.
fn tasks_for(total: usize) -> usize {
    if total < PAR_MIN {
        1
    } else {
        crate::par::split() * 4
    }
}

/// A contiguous float32 copy of a half-precision tensor, else `x` as it is
/// (made contiguous).
fn compute_copy(x: &Tensor) -> Result<Tensor> {
    match x.dtype() {
        DType::F16 | DType::BF16 => contiguous_as(x, DType::F32),
        d => contiguous_as(x, d),
    }
}

/// Run `f` with float32 stand-ins for half-precision outputs, then round
/// them into the real outputs.
fn with_f32_outputs(
    outs: &[Option<&Tensor>],
    f: impl FnOnce(&[Option<Tensor>]) -> Result<()>,
) -> Result<()> {
    let tmp: Vec<Option<Tensor>> = outs
        .iter()
        .map(|o| {
            o.map(|t| match t.dtype() {
                DType::F16 | DType::BF16 => Tensor::empty(t.shape(), DType::F32, t.device()),
                _ => Ok(t.clone()),
            })
            .transpose()
        })
        .collect::<Result<_>>()?;
    f(&tmp)?;
    for (o, t) in outs.iter().zip(&tmp) {
        if let (Some(o), Some(t)) = (o, t) {
            if o.dtype() != t.dtype() {
                super::elementwise::cast_copy(t, o)?;
            }
        }
    }
    Ok(())
}

/// Contiguous rows of a tensor with `rows * d` elements of `R`.
///
/// # Safety
/// `t` is contiguous with `rows * d` elements of `R`; the slice is only read.
unsafe fn rows_of<R: Element>(t: &Tensor, a: usize, b: usize, d: usize) -> &[R] {
    std::slice::from_raw_parts(t.data_ptr::<R>().add(a * d) as *const R, (b - a) * d)
}

// ---------------------------------------------------------------------------
// softmax / log_softmax gradient
// ---------------------------------------------------------------------------

multiversion! {
    /// Gradient rows of softmax (`y·(g - Σ g·y / Σ y)`) or log-softmax (`g - e^y·Σ g`).
    fn softmax_grad_rows<R: Real>(y: &[R], g: &[R], out: &mut [R], d: usize, log: bool) {
        for ((yr, gr), or) in y.chunks_exact(d).zip(g.chunks_exact(d)).zip(out.chunks_exact_mut(d)) {
            if log {
                let s = R::c(sum2(gr, gr, |a, _| a));
                for ((o, &yv), &gv) in or.iter_mut().zip(yr).zip(gr) {
                    *o = gv - yv.exp() * s;
                }
            } else {
                // Σ g·y over Σ y: the stored outputs are rounded and do not sum to
                // exactly 1, and for a dominant entry g - Σ g·y cancels to about
                // (1 - y)·g, which a sum off by n roundings of y would swamp.
                // (Each sum rounded to R, then divided: as the VJP composed of
                // ops computes it, so that a captured graph gives these bits.)
                let s = R::c(sum2(gr, yr, |a, b| a * b)) / R::c(sum2(yr, yr, |a, _| a));
                for ((o, &yv), &gv) in or.iter_mut().zip(yr).zip(gr) {
                    *o = yv * (gv - s);
                }
            }
        }
    }
}

fn softmax_grad_real<R: Real + Element>(y: &Tensor, g: &Tensor, d: usize, log: bool, out: &Tensor) {
    let rows = y.numel() / d;
    let op = SendPtr(out.data_ptr::<R>());
    par_ranges(rows, tasks_for(y.numel()), |a, b| {
        // SAFETY: contiguous operands of `rows * d` elements; rows a..b of the
        // freshly allocated output belong to this task only.
        unsafe {
            let o = std::slice::from_raw_parts_mut(op.get().add(a * d), (b - a) * d);
            softmax_grad_rows(
                rows_of::<R>(y, a, b, d),
                rows_of::<R>(g, a, b, d),
                o,
                d,
                log,
            );
        }
    });
}

/// Softmax (or log-softmax) gradient along the last dim: `out` from the
/// forward output `y` and the output gradient `g` (same shape and floating
/// dtype; `out` contiguous). `false` when `dim` is not the last dim.
pub fn softmax_grad(y: &Tensor, g: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<bool> {
    if y.ndim() > 0 && dim + 1 != y.ndim() {
        return Ok(false);
    }
    let d = y.shape().last().copied().unwrap_or(1);
    if y.numel() == 0 || d == 0 {
        return Ok(true);
    }
    let (yc, gc) = (compute_copy(y)?, compute_copy(g)?);
    with_f32_outputs(&[Some(out)], |o| {
        let o = o[0].as_ref().unwrap();
        match yc.dtype() {
            DType::F64 => softmax_grad_real::<f64>(&yc, &gc, d, log, o),
            _ => softmax_grad_real::<f32>(&yc, &gc, d, log, o),
        }
        Ok(())
    })?;
    Ok(true)
}

// ---------------------------------------------------------------------------
// layer norm / RMS norm gradient
// ---------------------------------------------------------------------------

/// Rows per unit of the weight/bias gradient sums (fixed, so the order of
/// the sums does not depend on the thread count).
fn norm_unit(rows: usize) -> usize {
    rows.div_ceil(64).max(8)
}

/// Per-call constants of [`norm_grad_rows`].
struct NormGradCfg<'a, R> {
    w: Option<&'a [R]>,
    d: usize,
    rms: bool,
}

multiversion! {
    /// Gradient of consecutive norm rows: `dx` (when given) and the
    /// unit's partial sums `Σ g·x̂` (into `pw`) and `Σ g` (into `pb`).
    #[allow(clippy::too_many_arguments)]
    fn norm_grad_rows<R: Real>(
        x: &[R],
        g: &[R],
        mean: &[R],
        rstd: &[R],
        cfg: &NormGradCfg<'_, R>,
        dx: Option<&mut [R]>,
        pw: Option<&mut [R]>,
        pb: Option<&mut [R]>,
    ) {
        let NormGradCfg { w, d, rms } = *cfg;
        let n = d as f64;
        let mut dx = dx;
        let mut pw = pw;
        let mut pb = pb;
        for (i, (xr, gr)) in x.chunks_exact(d).zip(g.chunks_exact(d)).enumerate() {
            let (mu, r) = (if rms { R::ZERO } else { mean[i] }, rstd[i]);
            if let Some(pw) = pw.as_deref_mut() {
                for ((p, &xv), &gv) in pw.iter_mut().zip(xr).zip(gr) {
                    *p = *p + gv * ((xv - mu) * r);
                }
            }
            if let Some(pb) = pb.as_deref_mut() {
                for (p, &gv) in pb.iter_mut().zip(gr) {
                    *p = *p + gv;
                }
            }
            if let Some(dx) = dx.as_deref_mut() {
                // dx = r·(ĝ - x̂·mean(ĝ·x̂) - mean(ĝ)), ĝ = g·w, x̂ = (x - μ)·r
                let or = &mut dx[i * d..(i + 1) * d];
                let ghx = |gh: R, xv: R| gh * ((xv - mu) * r);
                match w {
                    Some(w) => {
                        for ((o, &gv), &wv) in or.iter_mut().zip(gr).zip(w) {
                            *o = gv * wv;
                        }
                        let m1 = R::c(if rms { 0.0 } else { sum2(or, or, |a, _| a) / n });
                        let m2 = R::c(sum2(or, xr, ghx) / n);
                        for (o, &xv) in or.iter_mut().zip(xr) {
                            *o = r * (*o - ((xv - mu) * r) * m2 - m1);
                        }
                    }
                    None => {
                        let m1 = R::c(if rms { 0.0 } else { sum2(gr, gr, |a, _| a) / n });
                        let m2 = R::c(sum2(gr, xr, ghx) / n);
                        for ((o, &xv), &gv) in or.iter_mut().zip(xr).zip(gr) {
                            *o = r * (gv - ((xv - mu) * r) * m2 - m1);
                        }
                    }
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn norm_grad_real<R: Real + Element>(
    x: &Tensor,
    g: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    w: Option<&Tensor>,
    rms: bool,
    dx: Option<&Tensor>,
    dw: Option<&Tensor>,
    db: Option<&Tensor>,
) {
    let rows = mean.numel();
    let d = x.numel() / rows;
    // SAFETY: contiguous weight of `d` elements of R, only read.
    let wv = w.map(|t| unsafe { rows_of::<R>(t, 0, 1, d) });
    let cfg = NormGradCfg { w: wv, d, rms };
    let unit = norm_unit(rows);
    let units = rows.div_ceil(unit);
    let sums = dw.is_some() || db.is_some();
    // Partial weight/bias sums per unit, combined in order below.
    let mut pw = vec![R::ZERO; if dw.is_some() { units * d } else { 0 }];
    let mut pb = vec![R::ZERO; if db.is_some() { units * d } else { 0 }];
    let (pwp, pbp) = (SendPtr(pw.as_mut_ptr()), SendPtr(pb.as_mut_ptr()));
    let dxp = dx.map(|t| SendPtr(t.data_ptr::<R>()));
    let run_unit = |u: usize| {
        let (a, b) = (u * unit, ((u + 1) * unit).min(rows));
        // SAFETY: contiguous inputs; rows a..b of dx and unit u of the
        // partial sums are written by this call only.
        unsafe {
            let dxs = dxp.map(|p| std::slice::from_raw_parts_mut(p.get().add(a * d), (b - a) * d));
            let pws = dw.map(|_| std::slice::from_raw_parts_mut(pwp.get().add(u * d), d));
            let pbs = db.map(|_| std::slice::from_raw_parts_mut(pbp.get().add(u * d), d));
            norm_grad_rows(
                rows_of::<R>(x, a, b, d),
                rows_of::<R>(g, a, b, d),
                rows_of::<R>(mean, a, b, 1),
                rows_of::<R>(rstd, a, b, 1),
                &cfg,
                dxs,
                pws,
                pbs,
            );
        }
    };
    par_ranges(units, tasks_for(x.numel()), |a, b| {
        (a..b).for_each(run_unit)
    });
    if sums {
        for (t, p) in [(dw, &pw), (db, &pb)] {
            if let Some(t) = t {
                let o = t.data_ptr::<R>();
                for j in 0..d {
                    let s = (0..units).fold(0.0f64, |s, u| s + p[u * d + j].as_f64());
                    // SAFETY: `t` is contiguous with `d` elements.
                    unsafe { *o.add(j) = R::c(s) };
                }
            }
        }
    }
}

/// Layer-norm (RMS-norm when `rms`) gradient over rows of `d = x.numel() /
/// mean.numel()` elements: `dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂))` with
/// `x̂ = (x - μ)·r`, `ĝ = g·w` (RMS: no `mean(ĝ)`), `dw = Σ_rows g·x̂`,
/// `db = Σ_rows g`. `x`, `g` and `w` share a floating dtype; `mean`/`rstd`
/// hold the forward's statistics (float32 for half inputs); outputs are
/// contiguous, any of them may be skipped.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_grad(
    x: &Tensor,
    g: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    w: Option<&Tensor>,
    rms: bool,
    dx: Option<&Tensor>,
    dw: Option<&Tensor>,
    db: Option<&Tensor>,
) -> Result<bool> {
    let rows = mean.numel();
    if rows == 0 || x.numel() == 0 {
        for t in [dw, db].into_iter().flatten() {
            super::elementwise::fill(t, crate::tensor::Scalar::Float(0.0))?;
        }
        return Ok(true);
    }
    let (xc, gc) = (compute_copy(x)?, compute_copy(g)?);
    let wc = w.map(compute_copy).transpose()?;
    let (mc, rc) = (
        contiguous_as(mean, xc.dtype())?,
        contiguous_as(rstd, xc.dtype())?,
    );
    with_f32_outputs(&[dx, dw, db], |o| {
        let (dx, dw, db) = (o[0].as_ref(), o[1].as_ref(), o[2].as_ref());
        match xc.dtype() {
            DType::F64 => norm_grad_real::<f64>(&xc, &gc, &mc, &rc, wc.as_ref(), rms, dx, dw, db),
            _ => norm_grad_real::<f32>(&xc, &gc, &mc, &rc, wc.as_ref(), rms, dx, dw, db),
        }
        Ok(())
    })?;
    Ok(true)
}

// ---------------------------------------------------------------------------
// cross entropy: log_softmax + NLL (+ label smoothing)
// ---------------------------------------------------------------------------

/// The targets as int64 (a contiguous copy when given as int32 or strided).
fn targets_i64(t: &Tensor) -> Result<Tensor> {
    contiguous_as(t, DType::I64)
}

/// Check every target against the class count; the first bad one is an `IndexError`.
fn check_targets(op: &'static str, t: &[i64], cfg: CeCfg, shape: &[usize]) -> Result<()> {
    if let Some(&bad) = t
        .iter()
        .find(|&&v| v != cfg.ignore_index && (v < 0 || v as u64 >= cfg.c as u64))
    {
        return Err(Error::index(
            op,
            format!(
                "target {bad} is out of bounds for {} classes (input shape {})",
                cfg.c,
                fmt_shape(shape)
            ),
        ));
    }
    Ok(())
}

multiversion! {
    /// Loss rows: `loss = (1-ε)·w_t·(lse - x_t) + ε/C·Σ_c w_c·(lse - x_c)`
    /// (0 for ignored rows), `lse = log Σ e^x`, and `wt = w_t` (0 when ignored).
    #[allow(clippy::too_many_arguments)]
    fn ce_rows<R: Real>(x: &[R], t: &[i64], w: Option<&[R]>, cfg: CeCfg, loss: &mut [R], lse: &mut [R], wt: &mut [R]) {
        let c = cfg.c;
        let eps = R::c(cfg.smoothing);
        let ninf = R::c(f64::NEG_INFINITY);
        for (i, xr) in x.chunks_exact(c).enumerate() {
            let mut mx = [ninf; L];
            let mut it = xr.chunks_exact(L);
            for ch in &mut it {
                let ch: &[R; L] = ch.try_into().unwrap();
                for (m, &v) in mx.iter_mut().zip(ch) {
                    *m = if v > *m || v.is_nan() { v } else { *m };
                }
            }
            let mut m = mx.iter().fold(ninf, |a, &v| if v > a || v.is_nan() { v } else { a });
            for &v in it.remainder() {
                m = if v > m || v.is_nan() { v } else { m };
            }
            // A row of -inf (or no classes) has lse = -inf; keep x - m finite there.
            let ms = if m.is_finite() { m } else { R::ZERO };
            let s = sum2(xr, xr, |v, _| (v - ms).exp());
            let l = ms + R::c(s).ln();
            lse[i] = l;
            let ti = t[i];
            if ti == cfg.ignore_index {
                loss[i] = R::ZERO;
                wt[i] = R::ZERO;
                continue;
            }
            let ti = ti as usize;
            let w_t = w.map_or(R::ONE, |w| w[ti]);
            wt[i] = w_t;
            let mut v = w_t * (l - xr[ti]);
            if cfg.smoothing > 0.0 {
                let sm = match w {
                    Some(w) => sum2(xr, w, |xv, wv| wv * (l - xv)),
                    None => sum2(xr, xr, |xv, _| l - xv),
                };
                v = (R::ONE - eps) * v + eps / R::c(c as f64) * R::c(sm);
            }
            loss[i] = v;
        }
    }
}

multiversion! {
    /// Gradient rows: `g_r·(a·p_c - [c = t]·b - ε/C·w_c)` with `p = softmax(x)`,
    /// `a = (1-ε)·w_t + ε/C·Σw`, `b = (1-ε)·w_t`; 0 for ignored rows.
    #[allow(clippy::too_many_arguments)]
    fn ce_grad_rows<R: Real>(x: &[R], t: &[i64], w: Option<&[R]>, wsum: R, lse: &[R], g: &[R], cfg: CeCfg, out: &mut [R]) {
        let c = cfg.c;
        let eps = R::c(cfg.smoothing);
        let ec = eps / R::c(c as f64);
        for (i, (xr, or)) in x.chunks_exact(c).zip(out.chunks_exact_mut(c)).enumerate() {
            if t[i] == cfg.ignore_index {
                or.iter_mut().for_each(|o| *o = R::ZERO);
                continue;
            }
            let ti = t[i] as usize;
            let w_t = w.map_or(R::ONE, |w| w[ti]);
            let b = (R::ONE - eps) * w_t;
            let a = b + ec * wsum;
            let (gr, l) = (g[i], lse[i]);
            match w {
                Some(w) => {
                    for ((o, &xv), &wv) in or.iter_mut().zip(xr).zip(w) {
                        *o = gr * (a * (xv - l).exp() - ec * wv);
                    }
                }
                None => {
                    for (o, &xv) in or.iter_mut().zip(xr) {
                        *o = gr * (a * (xv - l).exp() - ec);
                    }
                }
            }
            or[ti] = or[ti] - gr * b;
        }
    }
}

fn ce_real<R: Real + Element>(
    x: &Tensor,
    t: &[i64],
    w: Option<&Tensor>,
    cfg: CeCfg,
    loss: &Tensor,
    lse: &Tensor,
    wt: &Tensor,
) {
    let rows = t.len();
    let c = cfg.c;
    // SAFETY: contiguous weight of `c` elements of R, only read.
    let wv = w.map(|w| unsafe { rows_of::<R>(w, 0, 1, c) });
    let (lp, sp, wp) = (
        SendPtr(loss.data_ptr::<R>()),
        SendPtr(lse.data_ptr::<R>()),
        SendPtr(wt.data_ptr::<R>()),
    );
    par_ranges(rows, tasks_for(rows * c), |a, b| {
        // SAFETY: rows a..b of the contiguous input and of the fresh outputs.
        unsafe {
            let part = |p: SendPtr<R>| std::slice::from_raw_parts_mut(p.get().add(a), b - a);
            ce_rows(
                rows_of::<R>(x, a, b, c),
                &t[a..b],
                wv,
                cfg,
                part(lp),
                part(sp),
                part(wp),
            );
        }
    });
}

/// Cross entropy of the contiguous `(rows, C)` logits `x` (float32/float64)
/// against class indices `t` (`rows` int32/int64 values; `ignore_index` rows
/// are skipped), with optional class weights `w` `(C,)`: per-row `loss`,
/// `lse = log Σ e^x` and the target weight `wt` (0 for ignored rows), all
/// contiguous `(rows,)` in `x`'s dtype. A target outside `[0, C)` is an
/// `IndexError` and nothing is written; `shape` names the user's input shape in it.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy(
    x: &Tensor,
    t: &Tensor,
    w: Option<&Tensor>,
    cfg: CeCfg,
    shape: &[usize],
    loss: &Tensor,
    lse: &Tensor,
    wt: &Tensor,
) -> Result<()> {
    let ti = targets_i64(t)?;
    // SAFETY: contiguous int64 tensor, only read.
    let tv = unsafe { rows_of::<i64>(&ti, 0, 1, ti.numel()) };
    check_targets("cross_entropy", tv, cfg, shape)?;
    if tv.is_empty() {
        return Ok(());
    }
    if cfg.c == 0 {
        // No classes: every target was ignored (checked above).
        use super::elementwise::fill;
        use crate::tensor::Scalar;
        fill(loss, Scalar::Float(0.0))?;
        fill(wt, Scalar::Float(0.0))?;
        return fill(lse, Scalar::Float(f64::NEG_INFINITY));
    }
    let xc = contiguous_as(x, x.dtype())?;
    let wc = w.map(|w| contiguous_as(w, x.dtype())).transpose()?;
    match x.dtype() {
        DType::F64 => ce_real::<f64>(&xc, tv, wc.as_ref(), cfg, loss, lse, wt),
        DType::F32 => ce_real::<f32>(&xc, tv, wc.as_ref(), cfg, loss, lse, wt),
        d => {
            return Err(Error::dtype(
                "cross_entropy",
                format!("the CPU kernel has no {d} path (the op computes it in float32)"),
            ))
        }
    }
    Ok(())
}

/// Gradient of [`cross_entropy`] with respect to the logits, into the
/// contiguous `out` `(rows, C)`, from the per-row output gradient `g`
/// (contiguous `(rows,)`) and the forward's `lse`.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_grad(
    x: &Tensor,
    t: &Tensor,
    w: Option<&Tensor>,
    lse: &Tensor,
    g: &Tensor,
    cfg: CeCfg,
    out: &Tensor,
) -> Result<()> {
    let ti = targets_i64(t)?;
    let rows = ti.numel();
    if rows == 0 || cfg.c == 0 {
        return Ok(());
    }
    let dt = x.dtype();
    let (xc, lc, gc) = (
        contiguous_as(x, dt)?,
        contiguous_as(lse, dt)?,
        contiguous_as(g, dt)?,
    );
    let wc = w.map(|w| contiguous_as(w, dt)).transpose()?;
    fn run<R: Real + Element>(
        xc: &Tensor,
        ti: &Tensor,
        wc: Option<&Tensor>,
        lc: &Tensor,
        gc: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) {
        let (rows, c) = (ti.numel(), cfg.c);
        // SAFETY: contiguous operands of the documented sizes, only read.
        let (tv, wv, lv, gv) = unsafe {
            (
                rows_of::<i64>(ti, 0, 1, rows),
                wc.map(|w| rows_of::<R>(w, 0, 1, c)),
                rows_of::<R>(lc, 0, 1, rows),
                rows_of::<R>(gc, 0, 1, rows),
            )
        };
        let wsum = R::c(wv.map_or(c as f64, |w| w.iter().fold(0.0, |s, v| s + v.as_f64())));
        let op = SendPtr(out.data_ptr::<R>());
        par_ranges(rows, tasks_for(rows * c), |a, b| {
            // SAFETY: rows a..b of the fresh output belong to this task.
            unsafe {
                let o = std::slice::from_raw_parts_mut(op.get().add(a * c), (b - a) * c);
                ce_grad_rows(
                    rows_of::<R>(xc, a, b, c),
                    &tv[a..b],
                    wv,
                    wsum,
                    &lv[a..b],
                    &gv[a..b],
                    cfg,
                    o,
                );
            }
        });
    }
    match dt {
        DType::F64 => run::<f64>(&xc, &ti, wc.as_ref(), &lc, &gc, cfg, out),
        DType::F32 => run::<f32>(&xc, &ti, wc.as_ref(), &lc, &gc, cfg, out),
        d => {
            return Err(Error::dtype(
                "cross_entropy",
                format!("the CPU kernel has no {d} path (the op computes it in float32)"),
            ))
        }
    }
    Ok(())
}
