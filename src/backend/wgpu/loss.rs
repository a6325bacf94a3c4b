//! Cross-entropy on the device: the loss and its gradient, as kernels over rows or, for more
//! classes than one binding holds, from operations that split.

use super::context::get;
use super::dispatch::{check_same_device, row_blocks, run_items};
use super::dtype::{f32_only, gty};
use super::index::check_indices;
use super::limits::{check_items, over_loop_limit};
use super::views::{as_rows, dense, into_dense};
use super::{shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::CeCfg;
use crate::kernel::ReduceOp;
use crate::kernel::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Device, Scalar, Tensor};

/// The cross-entropy kernels' metadata: items, classes, ignore index and
/// smoothing, then six operand offsets.
fn ce_meta(items: usize, cfg: CeCfg, offsets: [&Tensor; 5], w: Option<&Tensor>) -> [u32; 10] {
    // Every target fits i32 (checked first), so an ignore_index outside it never matches.
    let ign = i32::try_from(cfg.ignore_index).unwrap_or(-1) as u32;
    let o = offsets.map(|t| t.offset() as u32);
    [
        items as u32,
        cfg.c as u32,
        ign,
        (cfg.smoothing as f32).to_bits(),
        o[0],
        o[1],
        o[2],
        o[3],
        o[4],
        w.map_or(0, |w| w.offset() as u32),
    ]
}

impl WgpuBackend {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gpu_cross_entropy(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        cfg: CeCfg,
        shape: &[usize],
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let mut ts: Vec<&Tensor> = vec![x, target];
        ts.extend(weight);
        ts.extend([loss, lse, wt]);
        check_same_device(op, &ts)?;
        let mut fl: Vec<&Tensor> = vec![x, loss, lse, wt];
        fl.extend(weight);
        f32_only(op, &fl)?;
        gty(op, target.dtype())?;
        let rows = target.numel();
        // Targets are checked on the host before anything is written (an index error, as on the CPU).
        let (c, shape_text) = (cfg.c, crate::tensor::layout::fmt_shape(shape));
        check_indices(target, c as u64, Some(cfg.ignore_index), move |bad| {
            Error::index(
                op,
                format!("target {bad} is out of bounds for {c} classes (input shape {shape_text})"),
            )
        })?;
        if rows == 0 {
            return Ok(());
        }
        if cfg.c == 0 {
            self.fill(loss, Scalar::Float(0.0))?;
            self.fill(wt, Scalar::Float(0.0))?;
            return self.fill(lse, Scalar::Float(f64::NEG_INFINITY));
        }
        check_items(op, rows * cfg.c)?;
        let (xc, tc) = (dense(x)?, dense(target)?);
        let wc = weight.map(dense).transpose()?;
        let (lc, sc, wtc) = (dense(loss)?, dense(lse)?, dense(wt)?);
        self.ce_rows(&xc, &tc, wc.as_ref(), cfg, &lc, &sc, &wtc)?;
        for (d, s) in [(loss, &lc), (lse, &sc), (wt, &wtc)] {
            if !d.shares_storage(s) {
                self.cast_copy(s, d)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn gpu_cross_entropy_grad(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let mut ts: Vec<&Tensor> = vec![x, target, lse, g, out];
        ts.extend(weight);
        check_same_device(op, &ts)?;
        let mut fl: Vec<&Tensor> = vec![x, lse, g, out];
        fl.extend(weight);
        f32_only(op, &fl)?;
        gty(op, target.dtype())?;
        let rows = target.numel();
        if rows == 0 || cfg.c == 0 {
            return Ok(());
        }
        check_items(op, rows * cfg.c)?;
        let (xc, tc, lc, gc) = (dense(x)?, dense(target)?, dense(lse)?, dense(g)?);
        let wc = weight.map(dense).transpose()?;
        into_dense(out, |o| {
            self.ce_grad_rows(&xc, &tc, wc.as_ref(), &lc, &gc, cfg, o)
        })
    }

    /// The cross-entropy kernel over dense rows (targets already checked):
    /// logits `x` of `rows × c`, per-row targets, loss, logsumexp and target
    /// weight; blocks of rows when the operands exceed one binding.
    #[allow(clippy::too_many_arguments)]
    fn ce_rows(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        cfg: CeCfg,
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let rows = t.numel();
        // One thread per row walks the classes a few times: past the
        // adapter's loop limit, the rows are worked by ops that split.
        if over_loop_limit(4 * cfg.c as u64 + 64)? {
            return self.ce_long(x, t, w, cfg, loss, lse, wt);
        }
        let mut ts: Vec<&Tensor> = vec![x, t];
        ts.extend(w);
        ts.extend([loss, lse, wt]);
        if split::needed(op, &ts)? {
            if cfg.c > get()?.piece_elems() {
                return self.ce_long(x, t, w, cfg, loss, lse, wt);
            }
            let parts = [(x, cfg.c), (t, 1), (loss, 1), (lse, 1), (wt, 1)];
            return row_blocks(
                op,
                rows,
                &parts,
                &w.into_iter().collect::<Vec<_>>(),
                &mut |v, _| self.ce_rows(&v[0], &v[1], v.get(5), cfg, &v[2], &v[3], &v[4]),
            );
        }
        let meta = ce_meta(rows, cfg, [x, t, loss, lse, wt], w);
        let n = ts.len();
        run_items(
            op,
            |bd| shaders::cross_entropy(bd, w.is_some()),
            &ts,
            &[n - 3, n - 2, n - 1],
            &meta,
            rows,
        )
    }

    /// Cross-entropy pieces shared by the long-row forms: the targets with
    /// ignored ones replaced by 0 (`rows × 1`, int64), whether each row counts
    /// (`rows × 1`, float32 0/1), and each row's target weight (`rows × 1`).
    fn ce_targets(
        &self,
        t: &Tensor,
        w: Option<&Tensor>,
        cfg: CeCfg,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let op = "cross_entropy";
        let (rows, dev) = (t.numel(), t.device());
        let t2 = as_rows(t, rows, 1)?;
        let col = [rows, 1];
        let valid = Tensor::empty(&col, DType::F32, dev)?;
        let safe = Tensor::empty(&col, t.dtype(), dev)?;
        match i32::try_from(cfg.ignore_index) {
            Ok(ign) => {
                let keep = Tensor::empty(&col, DType::Bool, dev)?;
                let ign = self.splat(op, Scalar::Int(ign as i64), t.dtype(), &col)?;
                self.binary(BinaryOp::Ne, &t2, &ign, &keep)?;
                self.cast_copy(&keep, &valid)?;
                let zero = self.splat(op, Scalar::Int(0), t.dtype(), &col)?;
                self.where_(&keep, &t2, &zero, &safe)?;
            }
            // Targets fit i32 (checked), so none is ignored.
            Err(_) => {
                self.fill(&valid, Scalar::Float(1.0))?;
                self.cast_copy(&t2, &safe)?;
            }
        }
        let wt = Tensor::empty(&col, DType::F32, dev)?;
        match w {
            Some(w) => self.gather_run(&as_rows(w, cfg.c, 1)?, 0, &safe, &wt)?,
            None => self.fill(&wt, Scalar::Float(1.0))?,
        }
        self.binary(BinaryOp::Mul, &wt, &valid, &wt)?;
        Ok((safe, valid, wt))
    }

    /// The sum of the class weights (the class count without weights).
    fn ce_weight_sum(&self, w: Option<&Tensor>, cfg: CeCfg) -> Result<Tensor> {
        let s = Tensor::empty(&[1, 1], DType::F32, Device::Gpu(0))?;
        match w {
            Some(w) => self.reduce(ReduceOp::Sum, &as_rows(w, 1, cfg.c)?, &[false, true], &s)?,
            None => self.fill(&s, Scalar::Float(cfg.c as f64))?,
        }
        Ok(s)
    }

    /// Cross-entropy over more classes than one binding holds, from
    /// operations that split: `lse = logsumexp(x)`, the target logits
    /// gathered, `w_t·(lse - x_t)`, and with smoothing ε
    /// `(1 - ε)·w_t·(lse - x_t) + ε/C·(lse·Σw - Σ w_j x_j)`; ignored rows 0.
    #[allow(clippy::too_many_arguments)]
    fn ce_long(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        cfg: CeCfg,
        loss: &Tensor,
        lse: &Tensor,
        wt: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let (rows, dev, c) = (t.numel(), x.device(), cfg.c);
        let (x2, col) = (as_rows(x, rows, c)?, [rows, 1]);
        let l = Tensor::empty(&col, DType::F32, dev)?;
        self.reduce(ReduceOp::LogSumExp, &x2, &[false, true], &l)?;
        let (safe, valid, wt_r) = self.ce_targets(t, w, cfg)?;
        let xt = Tensor::empty(&col, DType::F32, dev)?;
        self.gather_run(&x2, 1, &safe, &xt)?;
        let v = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Sub, &l, &xt, &v)?;
        self.binary(BinaryOp::Mul, &v, &wt_r, &v)?;
        if cfg.smoothing > 0.0 {
            let eps = cfg.smoothing;
            let scalar = |v: f64| self.splat(op, Scalar::Float(v), DType::F32, &col);
            // Σ_j w_j·(l - x_j) = l·Σw - Σ w_j x_j
            let wx = Tensor::empty(&col, DType::F32, dev)?;
            match w {
                Some(w) => {
                    let p = Tensor::empty(&[rows, c], DType::F32, dev)?;
                    let wb = self.spread(op, &as_rows(w, 1, c)?, &[rows, c])?;
                    self.binary(BinaryOp::Mul, &x2, &wb, &p)?;
                    self.reduce(ReduceOp::Sum, &p, &[false, true], &wx)?;
                }
                None => self.reduce(ReduceOp::Sum, &x2, &[false, true], &wx)?,
            }
            let sm = Tensor::empty(&col, DType::F32, dev)?;
            let wsum = self.spread(op, &self.ce_weight_sum(w, cfg)?, &col)?;
            self.binary(BinaryOp::Mul, &l, &wsum, &sm)?;
            self.binary(BinaryOp::Sub, &sm, &wx, &sm)?;
            self.binary(BinaryOp::Mul, &sm, &scalar(eps / c as f64)?, &sm)?;
            self.binary(BinaryOp::Mul, &v, &scalar(1.0 - eps)?, &v)?;
            self.binary(BinaryOp::Add, &v, &sm, &v)?;
        }
        // Ignored rows lose nothing (whatever their logits hold).
        let keep = Tensor::empty(&col, DType::Bool, dev)?;
        self.cast_copy(&valid, &keep)?;
        let zero = self.splat(op, Scalar::Float(0.0), DType::F32, &col)?;
        self.where_(&keep, &v, &zero, &v)?;
        self.copy_dense_as(&v, loss)?;
        self.copy_dense_as(&l, lse)?;
        self.copy_dense_as(&wt_r, wt)
    }

    /// The cross-entropy gradient over more classes than one binding holds:
    /// `g·(a·exp(x - lse) - ε/C·w_j)` with `b = (1 - ε)·w_t`, `a = b + ε/C·Σw`,
    /// less `g·b` at each row's target; ignored rows 0.
    #[allow(clippy::too_many_arguments)]
    fn ce_grad_long(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let (rows, dev, c) = (t.numel(), x.device(), cfg.c);
        let (x2, o2, col, full) = (
            as_rows(x, rows, c)?,
            as_rows(out, rows, c)?,
            [rows, 1],
            [rows, c],
        );
        let (eps, ec) = (cfg.smoothing, cfg.smoothing / c as f64);
        let scalar = |v: f64| self.splat(op, Scalar::Float(v), DType::F32, &col);
        let (safe, valid, wt_r) = self.ce_targets(t, w, cfg)?;
        // g' = g·valid, b = (1 - ε)·w_t, a = b + ε/C·Σw
        let gv = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &as_rows(g, rows, 1)?, &valid, &gv)?;
        let b = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &wt_r, &scalar(1.0 - eps)?, &b)?;
        let a = Tensor::empty(&col, DType::F32, dev)?;
        let wsum = self.spread(op, &self.ce_weight_sum(w, cfg)?, &col)?;
        self.binary(BinaryOp::Mul, &wsum, &scalar(ec)?, &a)?;
        self.binary(BinaryOp::Add, &a, &b, &a)?;
        let e = Tensor::empty(&full, DType::F32, dev)?;
        self.binary(
            BinaryOp::Sub,
            &x2,
            &self.spread(op, &as_rows(lse, rows, 1)?, &full)?,
            &e,
        )?;
        self.unary(UnaryOp::Exp, &e, &e)?;
        self.binary(BinaryOp::Mul, &e, &self.spread(op, &a, &full)?, &e)?;
        if eps > 0.0 {
            let wj = Tensor::empty(&[1, c], DType::F32, dev)?;
            match w {
                Some(w) => self.cast_copy(&as_rows(w, 1, c)?, &wj)?,
                None => self.fill(&wj, Scalar::Float(1.0))?,
            }
            self.binary(
                BinaryOp::Mul,
                &wj,
                &self.splat(op, Scalar::Float(ec), DType::F32, &[1, c])?,
                &wj,
            )?;
            self.binary(BinaryOp::Sub, &e, &self.spread(op, &wj, &full)?, &e)?;
        }
        self.binary(BinaryOp::Mul, &e, &self.spread(op, &gv, &full)?, &e)?;
        // Less g'·b at each row's target (ignored rows add 0 at class 0).
        let at = Tensor::empty(&col, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &gv, &b, &at)?;
        self.unary(UnaryOp::Neg, &at, &at)?;
        self.scatter_run("scatter_add", &e, 1, &safe, &at, true)?;
        self.cast_copy(&e, &o2)
    }

    /// The cross-entropy gradient kernel over dense rows into the dense
    /// `out` (`rows × c`); blocks of rows when the operands exceed one binding.
    #[allow(clippy::too_many_arguments)]
    fn ce_grad_rows(
        &self,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        lse: &Tensor,
        g: &Tensor,
        cfg: CeCfg,
        out: &Tensor,
    ) -> Result<()> {
        let op = "cross_entropy";
        let rows = t.numel();
        // One thread per row walks the classes a few times (see `ce_rows`).
        if over_loop_limit(4 * cfg.c as u64 + 64)? {
            return self.ce_grad_long(x, t, w, lse, g, cfg, out);
        }
        let mut ts: Vec<&Tensor> = vec![x, t];
        ts.extend(w);
        ts.extend([lse, g, out]);
        if split::needed(op, &ts)? {
            if cfg.c > get()?.piece_elems() {
                return self.ce_grad_long(x, t, w, lse, g, cfg, out);
            }
            let parts = [(x, cfg.c), (t, 1), (lse, 1), (g, 1), (out, cfg.c)];
            return row_blocks(
                op,
                rows,
                &parts,
                &w.into_iter().collect::<Vec<_>>(),
                &mut |v, _| self.ce_grad_rows(&v[0], &v[1], v.get(5), &v[2], &v[3], cfg, &v[4]),
            );
        }
        let meta = ce_meta(rows * cfg.c, cfg, [x, t, lse, g, out], w);
        run_items(
            op,
            |bd| shaders::cross_entropy_grad(bd, w.is_some()),
            &ts,
            &[],
            &meta,
            rows * cfg.c,
        )
    }
}
