//! Softmax and normalisation on the device: softmax and log-softmax, layer and RMS norm, and their
//! gradients (with forms for rows longer than one binding).

use std::sync::Arc;

use super::context::{get, GpuBuffer};
use super::dispatch::{bind, bind_written, check_same_device, row_blocks};
use super::dtype::{gpu_float, gty};
use super::limits::{check_loop_trips, check_row_trips, over_loop_limit, row_trips};
use super::views::{as_rows, as_shape, dim_last, into_dense};
use super::{shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::ReduceOp;
use crate::kernel::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Scalar, Tensor};

impl WgpuBackend {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gpu_layer_norm(
        &self,
        x: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        rms: bool,
        out: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
    ) -> Result<()> {
        let op = if rms { "rms_norm" } else { "layer_norm" };
        let mut ts: Vec<&Tensor> = vec![x];
        ts.extend(weight);
        ts.extend(bias);
        ts.extend([out, mean, rstd]);
        check_same_device(op, &ts)?;
        for t in &ts {
            if !gpu_float(t.dtype()) {
                gty(op, t.dtype())?;
                return Err(Error::runtime(
                    op,
                    format!("not supported on the gpu device for dtype {}", t.dtype()),
                ));
            }
            if !t.is_contiguous() {
                return Err(Error::runtime(
                    op,
                    "expects contiguous tensors on the gpu device",
                ));
            }
        }
        // One statistic per row; rows span every normalised dim (not only
        // the last one when there is no weight to tell their number).
        let rows = mean.numel();
        let len = x.numel().checked_div(rows).unwrap_or(0);
        if rows == 0 {
            return Ok(());
        }
        if over_loop_limit(row_trips(3, len, 1))?
            || split::needed(op, &ts)? && len > get()?.piece_elems()
        {
            return self.layer_norm_long(x, weight, bias, eps, rms, out, mean, rstd);
        }
        if split::needed(op, &ts)? {
            let parts = [(x, len), (out, len), (mean, 1), (rstd, 1)];
            let shared: Vec<&Tensor> = weight.into_iter().chain(bias).collect();
            return row_blocks(op, rows, &parts, &shared, &mut |v, _| {
                let w = weight.map(|_| &v[4]);
                let b = bias.map(|_| &v[4 + weight.is_some() as usize]);
                self.layer_norm(&v[0], w, b, eps, rms, &v[1], &v[2], &v[3])
            });
        }
        let (mut bd, bufs) = bind(op, &ts)?;
        let n = ts.len();
        for k in n - 3..n {
            let j = bd.operand[k];
            bd.bufs[j].1 = true;
        }
        let meta = vec![
            rows as u32,
            len as u32,
            (eps as f32).to_bits(),
            1,
            1,
            x.offset() as u32,
            out.offset() as u32,
            rows as u32,
            len as u32,
            len as u32,
            1,
            mean.offset() as u32,
            rstd.offset() as u32,
            weight.map_or(0, |w| w.offset() as u32),
            bias.map_or(0, |b| b.offset() as u32),
        ];
        check_row_trips(op, 3, len)?;
        let src = shaders::layer_norm(&bd, weight.is_some(), bias.is_some(), rms);
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        get()?.dispatch(op, &src, &refs, &meta, rows as u64)
    }

    pub(super) fn gpu_softmax(
        &self,
        x: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<()> {
        let op = if log { "log_softmax" } else { "softmax" };
        check_same_device(op, &[x, out])?;
        if !gpu_float(x.dtype()) {
            gty(op, x.dtype())?;
            return Err(Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            ));
        }
        if x.ndim() > 0 && over_loop_limit(row_trips(3, x.shape()[dim], 1))? {
            return self.softmax_long(x, dim, log, out);
        }
        if x.ndim() > 0 && split::needed(op, &[x, out])? {
            if x.shape()[dim] > get()?.piece_elems() {
                return self.softmax_long(x, dim, log, out);
            }
            // Rows split; the softmax dim stays whole, so it is made the
            // innermost dim of both operands first (a row then spans only itself).
            if x.shape()[dim] > 1 && x.strides()[dim] != 1 {
                let xt = dim_last(op, x.shape(), dim, x.dtype())?;
                self.cast_copy(x, &xt)?;
                return self.softmax(&xt, dim, log, out);
            }
            if x.shape()[dim] > 1 && out.strides()[dim] != 1 {
                let ot = dim_last(op, out.shape(), dim, out.dtype())?;
                self.softmax(x, dim, log, &ot)?;
                return self.cast_copy(&ot, out);
            }
            let ts = [x, out];
            let space = split::Space::lines(&ts, dim);
            return split::in_pieces(op, &space, &mut |v, _| self.softmax(&v[0], dim, log, &v[1]));
        }
        let (bd, bufs) = bind(op, &[x, out])?;
        let (mut ks, mut kst, mut okst) = (vec![], vec![], vec![]);
        for d in 0..x.ndim() {
            if d != dim {
                ks.push(x.shape()[d] as u32);
                kst.push(x.strides()[d] as i32 as u32);
                okst.push(out.strides()[d] as i32 as u32);
            }
        }
        let nout: usize = ks.iter().map(|&v| v as usize).product();
        let len = if x.ndim() == 0 { 1 } else { x.shape()[dim] };
        if nout == 0 || len == 0 {
            return Ok(());
        }
        let (xs, os) = if x.ndim() == 0 {
            (0, 0)
        } else {
            (x.strides()[dim], out.strides()[dim])
        };
        let mut meta = vec![
            nout as u32,
            len as u32,
            log as u32,
            ks.len() as u32,
            1,
            x.offset() as u32,
            out.offset() as u32,
        ];
        meta.extend(ks);
        meta.extend(kst);
        meta.push(len as u32);
        meta.push(xs as i32 as u32);
        meta.extend(okst);
        meta.push(os as i32 as u32);
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        check_row_trips(op, 3, len)?;
        get()?.dispatch(op, &shaders::softmax(&bd), &refs, &meta, nout as u64)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn gpu_layer_norm_grad(
        &self,
        x: &Tensor,
        g: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        rms: bool,
        dx: Option<&Tensor>,
        dw: Option<&Tensor>,
        db: Option<&Tensor>,
    ) -> Result<bool> {
        let op = if rms {
            "rms_norm_backward"
        } else {
            "layer_norm_backward"
        };
        let mut all: Vec<&Tensor> = vec![x, g, mean, rstd];
        all.extend(weight);
        all.extend(dx);
        all.extend(dw);
        all.extend(db);
        check_same_device(op, &all)?;
        if all.iter().any(|t| t.dtype() != DType::F32) {
            return Ok(false);
        }
        let rows = mean.numel();
        let len = x.numel().checked_div(rows).unwrap_or(0);
        if rows == 0 || len == 0 {
            for t in [dw, db].into_iter().flatten() {
                self.fill(t, Scalar::Float(0.0))?;
            }
            return Ok(true);
        }
        // The kernels index dense blocks of rows from each operand's offset.
        let flat = |t: &Tensor| -> Result<Tensor> {
            if t.is_contiguous() {
                Ok(t.clone())
            } else {
                let c = Tensor::empty(t.shape(), t.dtype(), t.device())?;
                self.cast_copy(t, &c)?;
                Ok(c)
            }
        };
        let (xc, gc, rc, mc) = (flat(x)?, flat(g)?, flat(rstd)?, flat(mean)?);
        let wc = weight.map(flat).transpose()?;
        if over_loop_limit(row_trips(3, len, 1))?
            || split::needed(op, &all)? && len > get()?.piece_elems()
        {
            self.layer_norm_grad_long(&xc, &gc, &mc, &rc, wc.as_ref(), rms, dx, dw, db)?;
            return Ok(true);
        }
        if split::needed(op, &all)? {
            // Blocks of whole rows, each within one binding per buffer; the
            // weight and bias gradients add up the blocks' sums.
            let inputs = [(&xc, len), (&gc, len), (&mc, 1), (&rc, 1)];
            if let Some(dx) = dx {
                into_dense(dx, |o| {
                    let mut parts = inputs.to_vec();
                    parts.push((o, len));
                    let shared: Vec<&Tensor> = wc.iter().collect();
                    row_blocks(op, rows, &parts, &shared, &mut |v, _| {
                        let (x, g, m, r) = (&v[0], &v[1], &v[2], &v[3]);
                        self.layer_norm_grad(x, g, m, r, v.get(5), rms, Some(&v[4]), None, None)
                            .map(|_| ())
                    })
                })?;
            }
            if dw.is_some() || db.is_some() {
                let shared: Vec<&Tensor> = dw.into_iter().chain(db).collect();
                row_blocks(op, rows, &inputs, &shared, &mut |v, (lo, _)| {
                    let (x, g, m, r) = (&v[0], &v[1], &v[2], &v[3]);
                    let (pw, pb) = (dw.map(|_| &v[4]), db.map(|_| &v[4 + dw.is_some() as usize]));
                    if lo == 0 {
                        return self
                            .layer_norm_grad(x, g, m, r, None, rms, None, pw, pb)
                            .map(|_| ());
                    }
                    let temp = |t: Option<&Tensor>| {
                        t.map(|t| Tensor::empty(t.shape(), DType::F32, t.device()))
                            .transpose()
                    };
                    let (tw, tb) = (temp(pw)?, temp(pb)?);
                    self.layer_norm_grad(x, g, m, r, None, rms, None, tw.as_ref(), tb.as_ref())?;
                    for (d, t) in [(pw, &tw), (pb, &tb)] {
                        if let (Some(d), Some(t)) = (d, t) {
                            self.binary(BinaryOp::Add, d, t, d)?;
                        }
                    }
                    Ok(())
                })?;
            }
            return Ok(true);
        }
        // RMS norm reads no mean: its operand slot repeats rstd, so the
        // kernel binds no buffer it leaves unused (wgpu refuses those).
        let mc = if rms { rc.clone() } else { mc };
        if let Some(dx) = dx {
            into_dense(dx, |o| {
                let mut ts = vec![&xc, &gc, &mc, &rc];
                ts.extend(wc.as_ref());
                ts.push(o);
                let (bd, bufs) = bind(op, &ts)?;
                let meta = vec![
                    rows as u32,
                    len as u32,
                    0,
                    1,
                    1,
                    xc.offset() as u32,
                    o.offset() as u32,
                    rows as u32,
                    len as u32,
                    len as u32,
                    1,
                    gc.offset() as u32,
                    mc.offset() as u32,
                    rc.offset() as u32,
                    wc.as_ref().map_or(0, |w| w.offset() as u32),
                ];
                check_row_trips(op, 3, len)?;
                let src = shaders::layer_norm_grad_input(&bd, wc.is_some(), rms);
                let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
                get()?.dispatch(op, &src, &refs, &meta, rows as u64)
            })?;
        }
        if dw.is_some() || db.is_some() {
            let target = |t: &Tensor| -> Result<Tensor> {
                if t.is_contiguous() {
                    Ok(t.clone())
                } else {
                    Tensor::empty(t.shape(), DType::F32, t.device())
                }
            };
            let dwc = dw.map(target).transpose()?;
            let dbc = db.map(target).transpose()?;
            let mut ts = vec![&xc, &gc, &mc, &rc];
            ts.extend(dwc.as_ref());
            ts.extend(dbc.as_ref());
            let outs = dwc.is_some() as usize + dbc.is_some() as usize;
            let (bd, bufs) = bind_written(op, &ts, outs)?;
            check_loop_trips(
                op,
                2 * rows as u64 + 64,
                &|| format!("summing the gradients of {rows} rows"),
                "work on fewer rows at a time and add the parameter gradients",
            )?;
            let src = shaders::layer_norm_grad_params(&bd, dwc.is_some(), dbc.is_some(), rms);
            let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
            let meta = [
                len as u32,
                rows as u32,
                xc.offset() as u32,
                gc.offset() as u32,
                mc.offset() as u32,
                rc.offset() as u32,
                dwc.as_ref().map_or(0, |t| t.offset() as u32),
                dbc.as_ref().map_or(0, |t| t.offset() as u32),
            ];
            get()?.dispatch(
                op,
                &src,
                &refs,
                &meta,
                (len as u64).div_ceil(shaders::WG as u64),
            )?;
            for (dst, src) in [(dw, &dwc), (db, &dbc)] {
                if let (Some(d), Some(s)) = (dst, src) {
                    if !s.shares_storage(d) {
                        self.cast_copy(s, d)?;
                    }
                }
            }
        }
        Ok(true)
    }

    pub(super) fn gpu_softmax_grad(
        &self,
        y: &Tensor,
        g: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<bool> {
        let op = if log {
            "log_softmax_backward"
        } else {
            "softmax_backward"
        };
        check_same_device(op, &[y, g, out])?;
        // float16/bfloat16 compute in float32 here as well, rounded once on store.
        if !gpu_float(y.dtype()) || [g, out].iter().any(|t| t.dtype() != y.dtype()) {
            return Ok(false);
        }
        let nd = y.ndim();
        let len = if nd == 0 { 1 } else { y.shape()[dim] };
        let nout = y.numel() / len.max(1);
        if nout == 0 || len == 0 {
            return Ok(true);
        }
        if nd > 0
            && (over_loop_limit(row_trips(3, len, 1))?
                || split::needed(op, &[y, g, out])? && len > get()?.piece_elems())
        {
            self.softmax_grad_long(y, g, dim, log, out)?;
            return Ok(true);
        }
        if nd > 0 && split::needed(op, &[y, g, out])? {
            // Lines along `dim` stay whole (made innermost first, as for softmax).
            if len > 1 {
                for (k, t) in [y, g].into_iter().enumerate() {
                    if t.strides()[dim] != 1 {
                        let tt = dim_last(op, t.shape(), dim, t.dtype())?;
                        self.cast_copy(t, &tt)?;
                        let (y, g) = if k == 0 { (&tt, g) } else { (y, &tt) };
                        return self.softmax_grad(y, g, dim, log, out);
                    }
                }
                if out.strides()[dim] != 1 {
                    let ot = dim_last(op, out.shape(), dim, out.dtype())?;
                    self.softmax_grad(y, g, dim, log, &ot)?;
                    self.cast_copy(&ot, out)?;
                    return Ok(true);
                }
            }
            let ts = [y, g, out];
            let space = split::Space::lines(&ts, dim);
            split::in_pieces(op, &space, &mut |v, _| {
                self.softmax_grad(&v[0], &v[1], dim, log, &v[2]).map(|_| ())
            })?;
            return Ok(true);
        }
        let (bd, bufs) = bind(op, &[y, g, out])?;
        let keep: Vec<usize> = (0..nd).filter(|&d| d != dim).collect();
        let red = |t: &Tensor| {
            if nd == 0 {
                0
            } else {
                t.strides()[dim] as i32 as u32
            }
        };
        let mut meta = vec![
            nout as u32,
            len as u32,
            log as u32,
            keep.len() as u32,
            1,
            y.offset() as u32,
            g.offset() as u32,
        ];
        meta.extend(keep.iter().map(|&d| y.shape()[d] as u32));
        meta.extend(keep.iter().map(|&d| y.strides()[d] as i32 as u32));
        meta.push(len as u32);
        meta.push(red(y));
        meta.extend(keep.iter().map(|&d| g.strides()[d] as i32 as u32));
        meta.push(red(g));
        meta.push(out.offset() as u32);
        meta.extend(keep.iter().map(|&d| out.strides()[d] as i32 as u32));
        meta.push(red(out));
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        check_row_trips(op, 3, len)?;
        get()?.dispatch(op, &shaders::softmax_grad(&bd), &refs, &meta, nout as u64)?;
        Ok(true)
    }

    /// Softmax along a line longer than one binding, from operations that
    /// split: the line max, `e = exp(x - max)`, its sum, then `e / sum` (or
    /// `x - max - log sum`), in float32 with one full-size temporary.
    fn softmax_long(&self, x: &Tensor, dim: usize, log: bool, out: &Tensor) -> Result<()> {
        let op = if log { "log_softmax" } else { "softmax" };
        let (dev, shape) = (x.device(), x.shape());
        let mask: Vec<bool> = (0..x.ndim()).map(|d| d == dim).collect();
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if d == dim { 1 } else { shape[d] })
            .collect();
        let m = Tensor::empty(&kept, DType::F32, dev)?;
        self.line_max(op, x, &mask, &m)?;
        let e = Tensor::empty(shape, DType::F32, dev)?;
        self.cast_copy(x, &e)?;
        self.binary(BinaryOp::Sub, &e, &self.spread(op, &m, shape)?, &e)?;
        let s = Tensor::empty(&kept, DType::F32, dev)?;
        if log {
            let t = Tensor::empty(shape, DType::F32, dev)?;
            self.unary(UnaryOp::Exp, &e, &t)?;
            self.reduce(ReduceOp::Sum, &t, &mask, &s)?;
            drop(t);
            self.unary(UnaryOp::Log, &s, &s)?;
            self.binary(BinaryOp::Sub, &e, &self.spread(op, &s, shape)?, &e)?;
        } else {
            self.unary(UnaryOp::Exp, &e, &e)?;
            self.reduce(ReduceOp::Sum, &e, &mask, &s)?;
            self.binary(BinaryOp::Div, &e, &self.spread(op, &s, shape)?, &e)?;
        }
        self.cast_copy(&e, out)
    }

    /// The softmax gradient along a line longer than one binding:
    /// `y·(g - Σ g·y / Σ y)`, or `g - exp(y)·Σ g` for log-softmax (float32).
    fn softmax_grad_long(
        &self,
        y: &Tensor,
        g: &Tensor,
        dim: usize,
        log: bool,
        out: &Tensor,
    ) -> Result<()> {
        let op = if log {
            "log_softmax_backward"
        } else {
            "softmax_backward"
        };
        let (dev, shape) = (y.device(), y.shape());
        let mask: Vec<bool> = (0..y.ndim()).map(|d| d == dim).collect();
        let kept: Vec<usize> = (0..y.ndim())
            .map(|d| if d == dim { 1 } else { shape[d] })
            .collect();
        let s = Tensor::empty(&kept, DType::F32, dev)?;
        let t = Tensor::empty(shape, DType::F32, dev)?;
        if log {
            self.reduce(ReduceOp::Sum, g, &mask, &s)?;
            self.unary(UnaryOp::Exp, y, &t)?;
            self.binary(BinaryOp::Mul, &t, &self.spread(op, &s, shape)?, &t)?;
            self.binary(BinaryOp::Sub, g, &t, out)
        } else {
            // Σ g·y / Σ y, as the one-pass kernel: rounded outputs do not sum to exactly 1.
            let sy = Tensor::empty(&kept, DType::F32, dev)?;
            self.reduce(ReduceOp::Sum, y, &mask, &sy)?;
            self.binary(BinaryOp::Mul, g, y, &t)?;
            self.reduce(ReduceOp::Sum, &t, &mask, &s)?;
            self.binary(BinaryOp::Div, &s, &sy, &s)?;
            self.binary(BinaryOp::Sub, g, &self.spread(op, &s, shape)?, &t)?;
            self.binary(BinaryOp::Mul, y, &t, out)
        }
    }

    /// The normalised rows `x̂ = (x - μ)·r` of a layer norm (μ = 0 for RMS
    /// norm) as a float32 `rows × len` tensor, from its `rows × 1` statistics.
    fn normalised(&self, op: &'static str, x2: &Tensor, mu: &Tensor, r: &Tensor) -> Result<Tensor> {
        let shape = x2.shape();
        let t = Tensor::empty(shape, DType::F32, x2.device())?;
        self.binary(BinaryOp::Sub, x2, &self.spread(op, mu, shape)?, &t)?;
        self.binary(BinaryOp::Mul, &t, &self.spread(op, r, shape)?, &t)?;
        Ok(t)
    }

    /// Layer norm (RMS norm) over rows longer than one binding, from
    /// operations that split: the row mean and (biased) variance, or the
    /// mean square, then `(x - μ)·r·w + b`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_long(
        &self,
        x: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        rms: bool,
        out: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
    ) -> Result<()> {
        let op = if rms { "rms_norm" } else { "layer_norm" };
        let (rows, dev) = (mean.numel(), x.device());
        let len = x.numel() / rows;
        let x2 = as_rows(x, rows, len)?;
        let mask = [false, true];
        let (mu, r) = (
            Tensor::empty(&[rows, 1], DType::F32, dev)?,
            Tensor::empty(&[rows, 1], DType::F32, dev)?,
        );
        if rms {
            self.fill(&mu, Scalar::Float(0.0))?;
            let sq = Tensor::empty(&[rows, len], DType::F32, dev)?;
            self.binary(BinaryOp::Mul, &x2, &x2, &sq)?;
            self.reduce(ReduceOp::Mean, &sq, &mask, &r)?;
        } else {
            self.reduce(ReduceOp::Mean, &x2, &mask, &mu)?;
            let var = ReduceOp::Var {
                correction: 0.0,
                std: false,
            };
            self.reduce(var, &x2, &mask, &r)?;
        }
        self.binary(
            BinaryOp::Add,
            &r,
            &self.splat(op, Scalar::Float(eps), DType::F32, &[rows, 1])?,
            &r,
        )?;
        self.unary(UnaryOp::Rsqrt, &r, &r)?;
        let t = self.normalised(op, &x2, &mu, &r)?;
        let shape = [rows, len];
        if let Some(w) = weight {
            self.binary(
                BinaryOp::Mul,
                &t,
                &self.spread(op, &as_shape(w, &[1, len])?, &shape)?,
                &t,
            )?;
        }
        if let Some(b) = bias {
            self.binary(
                BinaryOp::Add,
                &t,
                &self.spread(op, &as_shape(b, &[1, len])?, &shape)?,
                &t,
            )?;
        }
        self.copy_dense_as(&t, out)?;
        self.copy_dense_as(&mu, mean)?;
        self.copy_dense_as(&r, rstd)
    }

    /// Layer-norm (RMS-norm) gradients over rows longer than one binding
    /// (dense float32 operands): with `ĝ = g·w` and `x̂ = (x - μ)·r`,
    /// `dx = r·(ĝ - x̂·mean(ĝ·x̂) - mean(ĝ))` (no `mean(ĝ)` for RMS norm),
    /// `dw = Σ_rows g·x̂`, `db = Σ_rows g`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_grad_long(
        &self,
        x: &Tensor,
        g: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        rms: bool,
        dx: Option<&Tensor>,
        dw: Option<&Tensor>,
        db: Option<&Tensor>,
    ) -> Result<()> {
        let op = if rms {
            "rms_norm_backward"
        } else {
            "layer_norm_backward"
        };
        let (rows, dev) = (mean.numel(), x.device());
        let len = x.numel() / rows;
        let shape = [rows, len];
        let (x2, g2) = (as_rows(x, rows, len)?, as_rows(g, rows, len)?);
        let r = as_rows(rstd, rows, 1)?;
        let mu = if rms {
            self.splat(op, Scalar::Float(0.0), DType::F32, &[rows, 1])?
        } else {
            as_rows(mean, rows, 1)?
        };
        let xh = self.normalised(op, &x2, &mu, &r)?;
        if dw.is_some() || db.is_some() {
            let cols = [true, false];
            if let Some(dw) = dw {
                let t = Tensor::empty(&shape, DType::F32, dev)?;
                self.binary(BinaryOp::Mul, &g2, &xh, &t)?;
                let s = Tensor::empty(&[len], DType::F32, dev)?;
                self.reduce(ReduceOp::Sum, &t, &cols, &s)?;
                self.copy_dense_as(&s, dw)?;
            }
            if let Some(db) = db {
                let s = Tensor::empty(&[len], DType::F32, dev)?;
                self.reduce(ReduceOp::Sum, &g2, &cols, &s)?;
                self.copy_dense_as(&s, db)?;
            }
        }
        let Some(dx) = dx else {
            return Ok(());
        };
        let gh = Tensor::empty(&shape, DType::F32, dev)?;
        match weight {
            Some(w) => {
                let w = self.spread(op, &as_shape(w, &[1, len])?, &shape)?;
                self.binary(BinaryOp::Mul, &g2, &w, &gh)?
            }
            None => self.cast_copy(&g2, &gh)?,
        }
        let row_mean = |t: &Tensor| -> Result<Tensor> {
            let m = Tensor::empty(&[rows, 1], DType::F32, dev)?;
            self.reduce(ReduceOp::Mean, t, &[false, true], &m)?;
            Ok(m)
        };
        let m1 = if rms { None } else { Some(row_mean(&gh)?) };
        let t = Tensor::empty(&shape, DType::F32, dev)?;
        self.binary(BinaryOp::Mul, &gh, &xh, &t)?;
        let m2 = row_mean(&t)?;
        // t = r·(ĝ - x̂·m2 - m1)
        self.binary(BinaryOp::Mul, &xh, &self.spread(op, &m2, &shape)?, &t)?;
        self.binary(BinaryOp::Sub, &gh, &t, &t)?;
        if let Some(m1) = m1 {
            self.binary(BinaryOp::Sub, &t, &self.spread(op, &m1, &shape)?, &t)?;
        }
        self.binary(BinaryOp::Mul, &t, &self.spread(op, &r, &shape)?, &t)?;
        self.copy_dense_as(&t, dx)
    }
}
