//! Reductions on the device: reductions over dims (with forms for long rows and for operands larger
//! than one binding), arg-reductions and cumulative scans.

use std::sync::Arc;

use super::context::{get, GpuBuffer};
use super::dispatch::{bind, check_same_device, run_items};
use super::dtype::{elem_bytes, gpu_float, gty};
use super::limits::{
    check_items, check_loop_trips, check_row_trips, over_loop_limit, row_trips, slice_len,
};
use super::shaders::GTy;
use super::storage::buffer;
use super::views::{dense_out, into_dense};
use super::{shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::{ArgOp, CumOp, ReduceOp};
use crate::kernel::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Layout, Scalar, Tensor};

/// The name an arg-reduction reports in errors.
fn arg_name(aop: ArgOp) -> &'static str {
    if aop == ArgOp::Max {
        "argmax"
    } else {
        "argmin"
    }
}

/// A full reduction of a contiguous tensor larger than one storage binding
/// (or with more elements than an adapter's loop limit lets one workgroup
/// walk): each piece reduces into a partial (float32 for float sums and means), then
/// the partials reduce into `out` (a mean divides the sum by the count once).
/// Variance and logsumexp do not split; they raise the binding-limit error.
fn reduce_in_pieces(rop: ReduceOp, x: &Tensor, out: &Tensor) -> Result<()> {
    let op = rop.name();
    let g = get()?;
    let (piece_op, float_sum) = match rop {
        ReduceOp::Sum | ReduceOp::Mean => (ReduceOp::Sum, gpu_float(out.dtype())),
        ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min | ReduceOp::All | ReduceOp::Any => {
            (rop, false)
        }
        _ => {
            return Err(Error::runtime(
                op,
                format!(
                    "a tensor of {} bytes exceeds the adapter's largest storage binding ({} bytes, max_storage_buffer_binding_size), and {op} cannot split it; work on slices of the tensor",
                    x.numel() * elem_bytes(x.dtype()),
                    g.max_binding()
                ),
            ))
        }
    };
    let n = x.numel();
    check_items(op, n)?;
    let part_dtype = if float_sum { DType::F32 } else { out.dtype() };
    let eb = elem_bytes(x.dtype());
    let align = g.binding_align() as usize / eb;
    // A piece is at most one binding, and few enough elements per thread
    // for an adapter that stops long loops (see `Gpu::loop_limit`).
    let mut piece = g.piece_elems();
    if let Some(limit) = g.loop_limit {
        let per_thread = (limit.saturating_sub(64) / 3 / 2) as usize;
        piece = piece
            .min((per_thread * shaders::RED_WG as usize) / align.max(1) * align.max(1))
            .max(align.max(1));
    }
    let parts = Tensor::empty(&[n.div_ceil(piece)], part_dtype, x.device())?;
    let (tx, tp) = (gty(op, x.dtype())?, gty(op, part_dtype)?);
    let acc = if matches!(rop, ReduceOp::All | ReduceOp::Any) {
        GTy::U32
    } else {
        tp
    };
    let (bd, bufs) = bind(op, &[x, &parts])?;
    let src = shaders::reduce(&bd, piece_op, tx, acc, tp).ok_or_else(|| {
        Error::runtime(
            op,
            format!("not supported on the gpu device for dtype {}", x.dtype()),
        )
    })?;
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    for (k, s) in (0..n).step_by(piece).enumerate() {
        let e = n.min(s + piece);
        let start = (x.offset() + s) / align * align;
        let meta = [
            1,
            (e - s) as u32,
            0,
            0,
            1,
            (x.offset() + s - start) as u32,
            k as u32,
            (e - s) as u32,
            1,
        ];
        let ranges = [
            ((start * eb) as u64, ((x.offset() + e - start) * eb) as u64),
            (0, bufs[1].len),
        ];
        g.dispatch_ranges(op, &src, &refs, &ranges, &meta, 1)?;
    }
    let all = [true];
    if rop != ReduceOp::Mean {
        return WgpuBackend.reduce(piece_op, &parts, &all, out);
    }
    let total = Tensor::empty(&[], DType::F32, x.device())?;
    WgpuBackend.reduce(ReduceOp::Sum, &parts, &all, &total)?;
    let count = WgpuBackend.splat(op, Scalar::Float(n as f64), DType::F32, out.shape())?;
    let total = Tensor::from_parts(
        total.storage().clone(),
        total.layout().expand(op, out.shape())?,
        DType::F32,
    )?;
    WgpuBackend.binary(BinaryOp::Div, &total, &count, out)
}

impl WgpuBackend {
    pub(super) fn gpu_arg_reduce(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        check_same_device(op, &[x, indices])?;
        let ty = gty(op, x.dtype())?;
        if x.ndim() > 0 && over_loop_limit(row_trips(1, x.shape()[dim], 1))? {
            return self.arg_reduce_long(aop, x, dim, values, indices);
        }
        if x.ndim() > 0 && split::needed(op, &[x, indices])?
            || values.is_some_and(|v| split::needed(op, &[v]).unwrap_or(false))
        {
            return self.arg_reduce_split(aop, x, dim, values, indices);
        }
        let mut ts: Vec<&Tensor> = vec![x];
        if let Some(v) = values {
            ts.push(v);
        }
        ts.push(indices);
        let (mut bd, bufs) = bind(op, &ts)?;
        if values.is_some() {
            let j = bd.operand[1];
            bd.bufs[j].1 = true;
        }
        let (mut ks, mut kst) = (vec![], vec![]);
        for d in 0..x.ndim() {
            if d != dim {
                ks.push(x.shape()[d] as u32);
                kst.push(x.strides()[d] as i32 as u32);
            }
        }
        let nout: usize = ks.iter().map(|&v| v as usize).product();
        let len = if x.ndim() == 0 { 1 } else { x.shape()[dim] };
        if nout == 0 {
            return Ok(());
        }
        let xs = if x.ndim() == 0 { 0 } else { x.strides()[dim] };
        let mut meta = vec![
            nout as u32,
            len as u32,
            values.map_or(0, |v| v.offset() as u32),
            ks.len() as u32,
            1,
            x.offset() as u32,
            indices.offset() as u32,
        ];
        meta.extend(ks);
        meta.extend(kst);
        meta.push(len as u32);
        meta.push(xs as i32 as u32);
        check_row_trips(op, 1, len)?;
        let src = shaders::arg_reduce(&bd, ty, aop == ArgOp::Max, values.is_some());
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        get()?.dispatch(op, &src, &refs, &meta, nout as u64)
    }

    pub(super) fn gpu_reduce(
        &self,
        rop: ReduceOp,
        x: &Tensor,
        mask: &[bool],
        out: &Tensor,
    ) -> Result<()> {
        let op = rop.name();
        check_same_device(op, &[x, out])?;
        let tx = gty(op, x.dtype())?;
        let to = gty(op, out.dtype())?;
        let nred_all: usize = x
            .shape()
            .iter()
            .zip(mask)
            .filter(|(_, &m)| m)
            .map(|(&n, _)| n)
            .product();
        let rdims = mask.iter().filter(|&&m| m).count();
        let passes = if matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp) {
            2
        } else {
            1
        };
        let over_loops = get()?
            .loop_limit
            .is_some_and(|lim| row_trips(passes, nred_all, rdims) >= lim);
        if (buffer(op, x)?.len > get()?.max_binding() || over_loops)
            && out.numel() == 1
            && x.is_contiguous()
            && !matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp)
        {
            return reduce_in_pieces(rop, x, out);
        }
        if over_loops
            && out.numel() == 1
            && !x.is_contiguous()
            && !matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp)
        {
            // A strided view reduced whole: a dense copy reduces in pieces.
            let dense = Tensor::empty(x.shape(), x.dtype(), x.device())?;
            self.cast_copy(x, &dense)?;
            return reduce_in_pieces(rop, &dense, out);
        }
        if over_loops {
            return self.reduce_long_rows(rop, x, mask, out);
        }
        check_loop_trips(
            op,
            row_trips(passes, nred_all, rdims),
            &|| {
                format!(
                    "reducing {nred_all} elements per output ({op} of shape {:?})",
                    x.shape()
                )
            },
            "reduce in steps (over some dims, then the rest of them) or over a reshaped view",
        )?;
        if split::needed(op, &[x, out])? {
            return self.reduce_split(rop, x, mask, out);
        }
        let acc = match rop {
            ReduceOp::Mean | ReduceOp::Var { .. } | ReduceOp::LogSumExp => GTy::F32,
            ReduceOp::All | ReduceOp::Any => GTy::U32,
            _ => to,
        };
        let (bd, bufs) = bind(op, &[x, out])?;
        let src = shaders::reduce(&bd, rop, tx, acc, to).ok_or_else(|| {
            Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            )
        })?;
        let (mut ks, mut kst, mut rs, mut rst) = (vec![], vec![], vec![], vec![]);
        for (d, &m) in mask.iter().enumerate() {
            if m {
                rs.push(x.shape()[d] as u32);
                rst.push(x.strides()[d] as i32 as u32);
            } else {
                ks.push(x.shape()[d] as u32);
                kst.push(x.strides()[d] as i32 as u32);
            }
        }
        let nout: usize = ks.iter().map(|&v| v as usize).product();
        let nred: usize = rs.iter().map(|&v| v as usize).product();
        if nout == 0 {
            return Ok(());
        }
        let corr = match rop {
            ReduceOp::Var { correction, .. } => correction as f32,
            _ => 0.0,
        };
        let mut meta = vec![
            nout as u32,
            nred as u32,
            corr.to_bits(),
            ks.len() as u32,
            rs.len() as u32,
            x.offset() as u32,
            out.offset() as u32,
        ];
        meta.extend(ks);
        meta.extend(kst);
        meta.extend(rs);
        meta.extend(rst);
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        get()?.dispatch(op, &src, &refs, &meta, nout as u64)
    }

    pub(super) fn gpu_cumulative(
        &self,
        cop: CumOp,
        x: &Tensor,
        dim: usize,
        out: &Tensor,
    ) -> Result<()> {
        let op = match cop {
            CumOp::Sum => "cumsum",
            CumOp::Prod => "cumprod",
        };
        check_same_device(op, &[x, out])?;
        let ty = gty(op, out.dtype())?;
        if ty == GTy::U32 {
            return crate::backend::unsupported(self, op);
        }
        let comb = match cop {
            CumOp::Sum => BinaryOp::Add,
            CumOp::Prod => BinaryOp::Mul,
        };
        if x.ndim() > 0 && over_loop_limit(x.shape()[dim] as u64 + 64)? {
            // One thread walks a line: past the adapter's loop limit the
            // line is scanned in slices, each combined with the last result
            // of the slices before it (`carry`).
            let len = x.shape()[dim];
            let piece = slice_len(len, len as u64 + 64)?;
            let kept: Vec<usize> = (0..x.ndim())
                .map(|d| if d == dim { 1 } else { x.shape()[d] })
                .collect();
            let carry = Tensor::empty_for(op, &kept, out.dtype(), out.device())?;
            for lo in (0..len).step_by(piece) {
                let hi = (lo + piece).min(len);
                let xs = x.with_layout(x.layout().slice(dim, lo, hi - lo, 1));
                let os = out.with_layout(out.layout().slice(dim, lo, hi - lo, 1));
                self.cumulative(cop, &xs, dim, &os)?;
                if lo > 0 {
                    self.binary(comb, &os, &self.spread(op, &carry, os.shape())?, &os)?;
                }
                if hi < len {
                    let last = os.with_layout(os.layout().slice(dim, hi - lo - 1, 1, 1));
                    self.cast_copy(&last, &carry)?;
                }
            }
            return Ok(());
        }
        if x.ndim() > 0 && split::needed(op, &[x, out])? {
            // Lines split, and so does a line longer than one binding: each
            // later piece along `dim` combines the previous piece's last
            // results (`carry`) into its own scan.
            let len = x.shape()[dim];
            let kept: Vec<usize> = (0..x.ndim())
                .map(|d| if d == dim { 1 } else { x.shape()[d] })
                .collect();
            let carry = Tensor::empty(&kept, out.dtype(), out.device())?;
            let axes: Vec<usize> = (0..x.ndim()).collect();
            let space = split::Space {
                ts: &[x, out, &carry],
                axes: vec![axes.clone(), axes.clone(), axes],
                sizes: x.shape().to_vec(),
                splittable: vec![true; x.ndim()],
            };
            return split::in_pieces(op, &space, &mut |v, r| {
                let (o, c) = (&v[1], &v[2]);
                self.cumulative(cop, &v[0], dim, o)?;
                let (lo, hi) = r[dim];
                if lo > 0 {
                    self.binary(comb, o, &self.spread(op, c, o.shape())?, o)?;
                }
                if hi < len {
                    let l = o.layout().slice(dim, hi - lo - 1, 1, 1);
                    self.cast_copy(&Tensor::from_parts(o.storage().clone(), l, o.dtype())?, c)?;
                }
                Ok(())
            });
        }
        // The input converted to the result's dtype, dense from offset 0.
        let xd = if x.dtype() == out.dtype() && x.is_contiguous() && x.offset() == 0 {
            x.clone()
        } else {
            let t = Tensor::empty(x.shape(), out.dtype(), out.device())?;
            self.cast_copy(x, &t)?;
            t
        };
        // A 0-d tensor scans one element.
        let shape = x.shape();
        let n = shape.get(dim).copied().unwrap_or(1);
        let inner: usize = shape.get(dim + 1..).map_or(1, |s| s.iter().product());
        let lines = x.numel() / n.max(1);
        if x.numel() == 0 {
            return Ok(());
        }
        check_loop_trips(
            op,
            n as u64 + 64,
            &|| format!("a running {op} along {n} elements"),
            "scan shorter pieces and carry each piece's last value into the next",
        )?;
        let mut meta = vec![lines as u32, 0, n as u32, inner as u32];
        meta.extend([0u32; 6]);
        dense_out(out, |o| {
            run_items(
                op,
                |bd| shaders::cumulative(bd, ty, cop == CumOp::Prod),
                &[&xd, o],
                &[1],
                &meta,
                lines,
            )
        })
    }

    /// A reduction whose rows are too long for one invocation's loops on an
    /// adapter that stops long loops (see `Gpu::loop_limit`): the longest
    /// reduced dim is cut into slices, each reduced into its own row of a
    /// `[slices, ...out]` partial result, and the partials are reduced over
    /// their first dim (sums and means add float32 partials). A slice still
    /// too long is cut again the same way.
    fn reduce_long_rows(
        &self,
        rop: ReduceOp,
        x: &Tensor,
        mask: &[bool],
        out: &Tensor,
    ) -> Result<()> {
        let op = rop.name();
        if let ReduceOp::Var { .. } | ReduceOp::LogSumExp = rop {
            // Its passes are reductions that split, and elementwise ops.
            return self.reduce_two_pass(rop, x, mask, out);
        }
        let float = gpu_float(out.dtype());
        let (piece_op, part_dtype) = match rop {
            ReduceOp::Sum | ReduceOp::Mean if float => (ReduceOp::Sum, DType::F32),
            ReduceOp::Sum => (ReduceOp::Sum, out.dtype()),
            ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min | ReduceOp::All | ReduceOp::Any => {
                (rop, out.dtype())
            }
            _ => {
                return Err(Error::runtime(
                    op,
                    "this reduction does not combine partial results (internal error)",
                ))
            }
        };
        let reduced: Vec<usize> = (0..x.ndim()).filter(|&d| mask[d]).collect();
        let nred: usize = reduced.iter().map(|&d| x.shape()[d]).product();
        let d = *reduced
            .iter()
            .max_by_key(|&&d| x.shape()[d])
            .ok_or_else(|| Error::runtime(op, "no reduced dims (internal error)"))?;
        let n = x.shape()[d];
        let len = slice_len(n, row_trips(1, nred, reduced.len()))?;
        let slices = n.div_ceil(len);
        let mut pshape = vec![slices];
        pshape.extend_from_slice(out.shape());
        let parts = Tensor::empty_for(op, &pshape, part_dtype, x.device())?;
        let per = out.numel();
        for j in 0..slices {
            let lo = j * len;
            let xs = x.with_layout(x.layout().slice(d, lo, len.min(n - lo), 1));
            let mut l = Layout::contiguous(out.shape());
            l.offset = parts.offset() + j * per;
            let pj = Tensor::from_parts(parts.storage().clone(), l, part_dtype)?;
            self.reduce(piece_op, &xs, mask, &pj)?;
        }
        let mut first = vec![false; pshape.len()];
        first[0] = true;
        if rop != ReduceOp::Mean {
            return self.reduce(piece_op, &parts, &first, out);
        }
        let total = Tensor::empty_for(op, out.shape(), DType::F32, x.device())?;
        self.reduce(ReduceOp::Sum, &parts, &first, &total)?;
        let count = self.splat(op, Scalar::Float(nred as f64), DType::F32, out.shape())?;
        self.binary(BinaryOp::Div, &total, &count, out)
    }

    /// [`Backend::reduce`] over operands larger than one storage binding.
    /// The kept dims split freely; the reduced dims split too for the
    /// reductions whose partial results combine (sum, mean, prod, max, min,
    /// all, any): the first piece along them writes the result, each later
    /// one reduces into a temporary that is then combined into it. Float16
    /// and bfloat16 results, and means, accumulate in float32.
    fn reduce_split(&self, rop: ReduceOp, x: &Tensor, mask: &[bool], out: &Tensor) -> Result<()> {
        let op = rop.name();
        if matches!(rop, ReduceOp::Var { .. } | ReduceOp::LogSumExp) {
            return self.reduce_two_pass(rop, x, mask, out);
        }
        let (piece_op, combine) = match rop {
            ReduceOp::Sum | ReduceOp::Mean => (ReduceOp::Sum, Some(BinaryOp::Add)),
            ReduceOp::Prod => (rop, Some(BinaryOp::Mul)),
            ReduceOp::Max => (rop, Some(BinaryOp::Maximum)),
            ReduceOp::Min => (rop, Some(BinaryOp::Minimum)),
            ReduceOp::All => (rop, Some(BinaryOp::LogicalAnd)),
            ReduceOp::Any => (rop, Some(BinaryOp::LogicalOr)),
            _ => (rop, None),
        };
        let narrow = matches!(out.dtype(), DType::F16 | DType::BF16);
        let acc = if narrow {
            Tensor::empty(out.shape(), DType::F32, out.device())?
        } else {
            out.clone()
        };
        let axes: Vec<usize> = (0..x.ndim()).collect();
        let out_axes: Vec<usize> = if out.ndim() == x.ndim() {
            axes.clone()
        } else {
            axes.iter().copied().filter(|&d| !mask[d]).collect()
        };
        let splittable: Vec<bool> = mask.iter().map(|&m| !m || combine.is_some()).collect();
        let space = split::Space {
            ts: &[x, &acc],
            axes: vec![axes, out_axes],
            sizes: x.shape().to_vec(),
            splittable,
        };
        split::in_pieces(op, &space, &mut |v, r| {
            let first = (0..mask.len()).all(|d| !mask[d] || r[d].0 == 0);
            match combine {
                Some(c) if !first => {
                    let t = Tensor::empty(v[1].shape(), v[1].dtype(), v[1].device())?;
                    self.reduce(piece_op, &v[0], mask, &t)?;
                    self.binary(c, &v[1], &t, &v[1])
                }
                _ => into_dense(&v[1], |o| self.reduce(piece_op, &v[0], mask, o)),
            }
        })?;
        if rop == ReduceOp::Mean {
            let count: usize = (0..mask.len())
                .filter(|&d| mask[d])
                .map(|d| x.shape()[d])
                .product();
            let c = self.splat(op, Scalar::Float(count as f64), DType::F32, acc.shape())?;
            self.binary(BinaryOp::Div, &acc, &c, &acc)?;
        }
        if narrow {
            self.cast_copy(&acc, out)?;
        }
        Ok(())
    }

    /// The max of each line of `x` (dims `mask`) into the float32 `centre`
    /// (keepdim), with 0 where it is infinite: what softmax and logsumexp
    /// subtract, so that an all -inf line gives -inf (or 0 weights), not NaN.
    pub(super) fn line_max(
        &self,
        op: &'static str,
        x: &Tensor,
        mask: &[bool],
        centre: &Tensor,
    ) -> Result<()> {
        self.reduce(ReduceOp::Max, x, mask, centre)?;
        let inf = Tensor::empty(centre.shape(), DType::Bool, centre.device())?;
        self.unary(UnaryOp::IsInf, centre, &inf)?;
        let zero = self.splat(op, Scalar::Float(0.0), DType::F32, centre.shape())?;
        self.where_(&inf, &zero, centre, centre)
    }

    /// Variance (or std) and logsumexp over operands larger than one binding,
    /// in two passes that both split: first the per-line mean (or max), then
    /// `Σ (x - mean)²` (or `Σ exp(x - max)`) summed piece by piece in float32.
    fn reduce_two_pass(
        &self,
        rop: ReduceOp,
        x: &Tensor,
        mask: &[bool],
        out: &Tensor,
    ) -> Result<()> {
        let op = rop.name();
        let dev = x.device();
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if mask[d] { 1 } else { x.shape()[d] })
            .collect();
        let count: usize = (0..x.ndim())
            .filter(|&d| mask[d])
            .map(|d| x.shape()[d])
            .product();
        let lse = rop == ReduceOp::LogSumExp;
        // The centre of each line: its mean, or its max (0 where the max is
        // infinite, so an all -inf line gives -inf and not NaN).
        let centre = Tensor::empty(&kept, DType::F32, dev)?;
        if lse {
            self.line_max(op, x, mask, &centre)?;
        } else {
            self.reduce(ReduceOp::Mean, x, mask, &centre)?;
        }
        let acc = Tensor::empty(&kept, DType::F32, dev)?;
        let axes: Vec<usize> = (0..x.ndim()).collect();
        let space = split::Space {
            ts: &[x, &centre, &acc],
            axes: vec![axes.clone(), axes.clone(), axes],
            sizes: x.shape().to_vec(),
            splittable: vec![true; x.ndim()],
        };
        split::in_pieces(op, &space, &mut |v, r| {
            let d = Tensor::empty(v[0].shape(), DType::F32, dev)?;
            self.cast_copy(&v[0], &d)?;
            // The backend's operands are already broadcast: expand the centre.
            let c = v[1].layout().expand(op, d.shape())?;
            let c = Tensor::from_parts(v[1].storage().clone(), c, DType::F32)?;
            self.binary(BinaryOp::Sub, &d, &c, &d)?;
            if lse {
                self.unary(UnaryOp::Exp, &d, &d)?;
            } else {
                self.binary(BinaryOp::Mul, &d, &d, &d)?;
            }
            let first = (0..mask.len()).all(|k| !mask[k] || r[k].0 == 0);
            if first {
                return into_dense(&v[2], |o| self.reduce(ReduceOp::Sum, &d, mask, o));
            }
            let t = Tensor::empty(v[2].shape(), DType::F32, dev)?;
            self.reduce(ReduceOp::Sum, &d, mask, &t)?;
            self.binary(BinaryOp::Add, &v[2], &t, &v[2])
        })?;
        let scalar = |v: f32| self.splat(op, Scalar::Float(v as f64), DType::F32, &kept);
        match rop {
            ReduceOp::Var { correction, std } => {
                let div = (count as f64 - correction).max(0.0) as f32;
                self.binary(BinaryOp::Div, &acc, &scalar(div)?, &acc)?;
                if std {
                    self.unary(UnaryOp::Sqrt, &acc, &acc)?;
                }
            }
            _ => {
                self.unary(UnaryOp::Log, &acc, &acc)?;
                self.binary(BinaryOp::Add, &acc, &centre, &acc)?;
            }
        }
        self.copy_dense_as(&acc, out)
    }

    /// [`Backend::arg_reduce`] with `dim` itself split across pieces: each
    /// later piece's best (value, index) replaces the running one only where
    /// it is strictly better (or NaN where the running one is not), so the
    /// first of equal extremes wins, as in one pass.
    fn arg_reduce_split(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        let dev = x.device();
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if d == dim { 1 } else { x.shape()[d] })
            .collect();
        let bv = Tensor::empty(&kept, x.dtype(), dev)?;
        let bi = Tensor::empty(&kept, indices.dtype(), dev)?;
        let axes: Vec<usize> = (0..x.ndim()).collect();
        let space = split::Space {
            ts: &[x, &bv, &bi],
            axes: vec![axes.clone(), axes.clone(), axes],
            sizes: x.shape().to_vec(),
            splittable: vec![true; x.ndim()],
        };
        split::in_pieces(op, &space, &mut |v, r| {
            let (lo, _) = r[dim];
            if lo == 0 {
                return into_dense(&v[2], |i| {
                    into_dense(&v[1], |val| self.arg_reduce(aop, &v[0], dim, Some(val), i))
                });
            }
            self.arg_merge(aop, &v[0], dim, lo, &v[1], &v[2])
        })?;
        self.copy_dense_as(&bi, indices)?;
        if let Some(vals) = values {
            self.copy_dense_as(&bv, vals)?;
        }
        Ok(())
    }

    /// Merge the arg-reduction of `x` along `dim`, whose first element is
    /// element `lo` of the whole line, into the best values `bv` and their
    /// indices `bi` found over the elements before it (an earlier element
    /// wins ties; NaN wins over numbers, as one pass over the line picks).
    fn arg_merge(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        lo: usize,
        bv: &Tensor,
        bi: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        let dev = x.device();
        let pv = Tensor::empty(bv.shape(), x.dtype(), dev)?;
        let pi = Tensor::empty(bi.shape(), bi.dtype(), dev)?;
        self.arg_reduce(aop, x, dim, Some(&pv), &pi)?;
        let shift = self.splat(op, Scalar::Int(lo as i64), bi.dtype(), pi.shape())?;
        self.binary(BinaryOp::Add, &pi, &shift, &pi)?;
        let better = Tensor::empty(pv.shape(), DType::Bool, dev)?;
        let cmp = if aop == ArgOp::Max {
            BinaryOp::Gt
        } else {
            BinaryOp::Lt
        };
        self.binary(cmp, &pv, bv, &better)?;
        if gpu_float(x.dtype()) {
            let nan = Tensor::empty(pv.shape(), DType::Bool, dev)?;
            let num = Tensor::empty(pv.shape(), DType::Bool, dev)?;
            self.unary(UnaryOp::IsNan, &pv, &nan)?;
            self.binary(BinaryOp::Eq, bv, bv, &num)?;
            self.binary(BinaryOp::LogicalAnd, &nan, &num, &nan)?;
            self.binary(BinaryOp::LogicalOr, &better, &nan, &better)?;
        }
        self.where_(&better, &pv, bv, bv)?;
        self.where_(&better, &pi, bi, bi)
    }

    /// An arg-reduction whose lines are too long for one invocation's loops
    /// (see `Gpu::loop_limit`): slices of each line in order, merged.
    fn arg_reduce_long(
        &self,
        aop: ArgOp,
        x: &Tensor,
        dim: usize,
        values: Option<&Tensor>,
        indices: &Tensor,
    ) -> Result<()> {
        let op = arg_name(aop);
        let dev = x.device();
        let n = x.shape()[dim];
        let len = slice_len(n, row_trips(1, n, 1))?;
        let kept: Vec<usize> = (0..x.ndim())
            .map(|d| if d == dim { 1 } else { x.shape()[d] })
            .collect();
        let bv = Tensor::empty_for(op, &kept, x.dtype(), dev)?;
        let bi = Tensor::empty_for(op, &kept, indices.dtype(), dev)?;
        for lo in (0..n).step_by(len) {
            let xs = x.with_layout(x.layout().slice(dim, lo, len.min(n - lo), 1));
            if lo == 0 {
                self.arg_reduce(aop, &xs, dim, Some(&bv), &bi)?;
            } else {
                self.arg_merge(aop, &xs, dim, lo, &bv, &bi)?;
            }
        }
        self.copy_dense_as(&bi, indices)?;
        if let Some(vals) = values {
            self.copy_dense_as(&bv, vals)?;
        }
        Ok(())
    }
}
