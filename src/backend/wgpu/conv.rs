//! Convolution and pooling on the device: 2-D convolution and its gradients (direct or implicit-
//! GEMM kernels, cut into pieces or row bands past one binding or the adapter's loop limit), max
//! and average pooling.

use super::context::get;
use super::dispatch::{check_same_device, run_items};
use super::dtype::{f32_only, gty};
use super::limits::{check_items, check_loop_trips, over_loop_limit};
use super::views::{dense, dense_out};
use super::{conv_gemm, shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::BinaryOp;
use crate::kernel::{Conv2dParams, Pool2dParams};
use crate::tensor::Tensor;

/// Loop trips per invocation of a direct convolution gradient (see
/// [`conv_grad_trips`]); 0 for operands that are not 4-d.
fn conv_grad_trip_count(g: &Tensor, w: Option<&Tensor>, p: &Conv2dParams) -> u64 {
    if g.ndim() != 4 {
        return 0;
    }
    let s = g.shape();
    let (n, o, oh, ow) = (s[0] as u64, s[1] as u64, s[2] as u64, s[3] as u64);
    match w.filter(|w| w.ndim() == 4) {
        Some(w) => {
            let og = o / (p.groups as u64).max(1);
            let (kh, kw) = (w.shape()[2] as u64, w.shape()[3] as u64);
            2 * og * (1 + kh * (1 + kw)) + 64
        }
        None => 2 * n * (1 + oh * (1 + ow)) + 64,
    }
}

/// Refuse a convolution gradient whose per-thread sums run past the
/// adapter's loop limit: the input's sums over the output channels of a
/// group and the window (`w` given), the weight's over all images and
/// output pixels (counted twice: skipped padding positions cost trips too).
fn conv_grad_trips(
    op: &'static str,
    g: &Tensor,
    w: Option<&Tensor>,
    p: &Conv2dParams,
) -> Result<()> {
    if g.ndim() != 4 {
        return Ok(());
    }
    let s = g.shape();
    let (n, o, oh, ow) = (s[0] as u64, s[1] as u64, s[2] as u64, s[3] as u64);
    let trips = conv_grad_trip_count(g, w, p);
    check_loop_trips(
        op,
        trips,
        &|| format!("a convolution gradient over {n} images of {oh}x{ow} outputs and {o} channels"),
        "run the backward pass on fewer images (or channels) at a time and add the gradients",
    )
}

fn conv_meta(
    x: &[usize],
    w: &[usize],
    o: &[usize],
    p: &Conv2dParams,
    n: usize,
    offs: [usize; 3],
) -> Vec<u32> {
    let v = [
        n,
        x[0],
        x[1],
        x[2],
        x[3],
        w[0],
        o[2],
        o[3],
        w[2],
        w[3],
        p.stride[0],
        p.stride[1],
        p.pad[0],
        p.pad[2],
        p.dilation[0],
        p.dilation[1],
        p.groups,
        0,
        offs[0],
        offs[1],
        offs[2],
    ];
    v.iter().map(|&a| a as u32).collect()
}

/// The iteration axes of a convolution split across pieces (groups = 1):
/// images, output channels, input channels, then the input's, kernel's and
/// output's spatial dims (never split).
const CONV_N: usize = 0;
const CONV_O: usize = 1;
const CONV_C: usize = 2;
/// The axes each dim of the input, weight and output walks.
const CONV_X: [usize; 4] = [CONV_N, CONV_C, 3, 4];
const CONV_W: [usize; 4] = [CONV_O, CONV_C, 5, 6];
const CONV_Y: [usize; 4] = [CONV_N, CONV_O, 7, 8];

/// The convolution's iteration space over `ts` (with `axes` per operand),
/// from the input `x`, weight `w` and output `y` shapes.
fn conv_space<'a>(
    ts: &'a [&'a Tensor],
    axes: Vec<Vec<usize>>,
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
) -> split::Space<'a> {
    let (xs, ws, ys) = (x.shape(), w.shape(), y.shape());
    split::Space {
        ts,
        axes,
        sizes: vec![
            xs[0], ws[0], xs[1], xs[2], xs[3], ws[2], ws[3], ys[2], ys[3],
        ],
        splittable: (0..9).map(|a| a < 3).collect(),
    }
}

fn conv_check(op: &'static str, ts: &[&Tensor], p: &Conv2dParams) -> Result<()> {
    check_same_device(op, ts)?;
    f32_only(op, ts)?;
    for t in ts {
        if t.ndim() != 4 {
            return Err(Error::shape(
                op,
                format!(
                    "the gpu kernel expects 4-D operands, got shape {:?}",
                    t.shape()
                ),
            ));
        }
        check_items(op, t.numel())?;
    }
    if p.groups == 0 || p.stride.contains(&0) || p.dilation.contains(&0) {
        return Err(Error::value(op, format!("invalid parameters {p:?}")));
    }
    Ok(())
}

/// Rows `[lo, hi)` (dim 2) of a 4-D view, in the same storage.
fn rows_of(t: &Tensor, lo: usize, hi: usize) -> Result<Tensor> {
    let l = t.layout().slice(2, lo, hi - lo, 1);
    Tensor::from_parts(t.storage().clone(), l, t.dtype())
}

/// Whether one (H, W) plane of any of `ts` (4-D) reaches more than half a
/// storage binding: then channel and image pieces cannot fit a binding and
/// a convolution runs in bands of rows instead (see [`conv_bands`]).
fn plane_too_big(ts: &[&Tensor]) -> Result<bool> {
    let half = get()?.max_binding() / 2;
    Ok(ts.iter().any(|t| {
        let (s, st) = (t.shape(), t.strides());
        let reach =
            (s[2].max(1) - 1) * st[2].unsigned_abs() + (s[3].max(1) - 1) * st[3].unsigned_abs() + 1;
        reach as u64 * 4 > half
    }))
}

/// A row band of a convolution: `(oh0, oh1, lo, hi, top)` (see [`conv_bands`]).
type Band = (usize, usize, usize, usize, usize);

/// Bands of output rows for a convolution whose planes are too large for
/// one binding: each band `(oh0, oh1, lo, hi, top)` covers output rows
/// `[oh0, oh1)`, reads input rows `[lo, hi)` (all it needs, at least one)
/// and runs with top padding `top` (the original shifted to the band), with
/// both bands within half a binding. Input width `w`, height `h`; output
/// width `ow`, height `oh`; `(kernel height, stride, dilation, top
/// padding)` along the rows. A band whose rows read only the bottom
/// padding binds the last input row with a top padding that puts every
/// tap above it, so it reads nothing (its outputs are the bias alone).
fn conv_bands(
    op: &'static str,
    (h, w): (usize, usize),
    (oh, ow): (usize, usize),
    (kh, sh, dh, pt): (usize, usize, usize, usize),
) -> Result<Vec<Band>> {
    let max = get()?.max_binding();
    let budget = (max / 2 / 4) as usize;
    let reach = (kh - 1) * dh + 1;
    let (w, ow) = (w.max(1), ow.max(1));
    let by_out = budget / ow;
    let by_in = (budget / w).saturating_sub(reach) / sh + 1;
    if by_out == 0 || budget / w < reach || h == 0 {
        return Err(Error::runtime(
            op,
            format!(
                "one row band of the convolution ({reach} input rows of {w}, or a row of {ow} outputs) is over half the adapter's largest storage binding ({max} bytes, max_storage_buffer_binding_size); work on narrower images"
            ),
        ));
    }
    let rows = by_out.min(by_in).max(1);
    let mut bands = Vec::new();
    let mut oh0 = 0;
    while oh0 < oh {
        let oh1 = oh.min(oh0 + rows);
        let first = (oh0 * sh) as isize - pt as isize;
        let last = ((oh1 - 1) * sh + reach) as isize - pt as isize;
        if first >= h as isize {
            bands.push((oh0, oh1, h - 1, h, (oh1 - oh0 - 1) * sh + reach));
        } else {
            let lo = first.max(0) as usize;
            let hi = (last.clamp(0, h as isize) as usize).max(lo + 1);
            bands.push((oh0, oh1, lo, hi, pt + lo - oh0 * sh));
        }
        oh0 = oh1;
    }
    Ok(bands)
}

/// `p` with top padding `top`.
fn with_top(p: &Conv2dParams, top: usize) -> Conv2dParams {
    let mut q = *p;
    q.pad[0] = top;
    q
}

/// The iteration space of 2-D pooling over `ts` = (input, outputs...), all
/// 4-D: images and channels split, each pooled plane stays whole.
fn pool_space<'a>(ts: &'a [&'a Tensor]) -> split::Space<'a> {
    let (s, o) = (ts[0].shape(), ts[1].shape());
    split::Space {
        ts,
        axes: (0..ts.len())
            .map(|k| {
                if k == 0 {
                    vec![0, 1, 2, 3]
                } else {
                    vec![0, 1, 4, 5]
                }
            })
            .collect(),
        sizes: vec![s[0], s[1], s[2], s[3], o[2], o[3]],
        splittable: vec![true, true, false, false, false, false],
    }
}

/// Average pooling (`p` given) or adaptive average pooling (`p` None) of 4-D `x` into `out`.
fn avg_pool(
    op: &'static str,
    x: &Tensor,
    p: Option<&Pool2dParams>,
    mode: (u32, usize),
    out: &Tensor,
) -> Result<()> {
    check_same_device(op, &[x, out])?;
    f32_only(op, &[x, out])?;
    if x.ndim() != 4 || out.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "the gpu kernel expects 4-D input and output, got {:?} and {:?}",
                x.shape(),
                out.shape()
            ),
        ));
    }
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    if split::needed(op, &[x, out])? {
        return split::in_pieces(op, &pool_space(&[x, out]), &mut |v, _| {
            avg_pool(op, &v[0], p, mode, &v[1])
        });
    }
    check_items(op, x.numel().max(n))?;
    let xc = dense(x)?;
    let o = if out.is_contiguous() && out.offset() == 0 {
        out.clone()
    } else {
        Tensor::empty(out.shape(), out.dtype(), out.device())?
    };
    let (s, os) = (x.shape(), out.shape());
    let z = Pool2dParams {
        kernel: [0, 0],
        stride: [0, 0],
        pad: [0, 0],
        dilation: [1, 1],
        ceil_mode: false,
    };
    let q = p.unwrap_or(&z);
    let meta: Vec<u32> = [
        n,
        s[2],
        s[3],
        os[2],
        os[3],
        q.kernel[0],
        q.kernel[1],
        q.stride[0],
        q.stride[1],
        q.pad[0],
        q.pad[1],
        q.dilation[0],
        q.dilation[1],
        xc.offset(),
        mode.0 as usize,
        mode.1,
        p.is_none() as usize,
    ]
    .iter()
    .map(|&v| v as u32)
    .collect();
    run_items(op, shaders::avg_pool2d, &[&xc, &o], &[], &meta, n)?;
    if !o.shares_storage(out) {
        WgpuBackend.cast_copy(&o, out)?;
    }
    Ok(())
}

impl WgpuBackend {
    pub(super) fn gpu_conv2d(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        let op = "conv2d";
        // The implicit GEMM splits its sums for a loop limit itself.
        let mut gemm = conv_gemm::chosen(
            shaders::ConvGemm::Forward {
                bias: bias.is_some(),
            },
            w.shape(),
            p.groups,
        )?;
        if w.ndim() == 4 && !gemm {
            // Each output sums over its group's input channels and the
            // window: past the adapter's loop limit the implicit GEMM (which
            // splits its sums) runs instead, unless the direct kernel is forced.
            let (cg, kh, kw) = (
                w.shape()[1] as u64,
                w.shape()[2] as u64,
                w.shape()[3] as u64,
            );
            let trips = 2 * cg * (1 + kh * (1 + kw)) + 64;
            if conv_gemm::forced().is_none() && over_loop_limit(trips)? {
                gemm = true;
            } else {
                check_loop_trips(
                    op,
                    trips,
                    &|| format!("a convolution summing {cg} channels of {kh}x{kw} windows"),
                    "split the input channels (convolve groups of them and add)",
                )?;
            }
        }
        conv_check(op, &[x, w, out], p)?;
        if let Some(b) = bias {
            check_same_device(op, &[b, out])?;
            f32_only(op, &[b])?;
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        let mut ts: Vec<&Tensor> = vec![x, w];
        ts.extend(bias);
        ts.push(out);
        if split::needed(op, &ts)? {
            if plane_too_big(&[x, out])? {
                let (xs, os) = (x.shape(), out.shape());
                let kr = (w.shape()[2], p.stride[0], p.dilation[0], p.pad[0]);
                for (oh0, oh1, lo, hi, top) in conv_bands(op, (xs[2], xs[3]), (os[2], os[3]), kr)? {
                    let q = with_top(p, top);
                    self.conv2d(&rows_of(x, lo, hi)?, w, bias, &q, &rows_of(out, oh0, oh1)?)?;
                }
                return Ok(());
            }
            if p.groups == 1 {
                // Images, output and input channels split; a later piece
                // along the input channels adds its partial sums (the first
                // adds the bias).
                let mut axes = vec![CONV_X.to_vec(), CONV_W.to_vec()];
                axes.extend(bias.map(|_| vec![CONV_O]));
                axes.push(CONV_Y.to_vec());
                let space = conv_space(&ts, axes, x, w, out);
                return split::in_pieces(op, &space, &mut |v, r| {
                    let first = r[CONV_C].0 == 0;
                    let b = bias.filter(|_| first).map(|_| &v[2]);
                    self.write_or_add(&v[v.len() - 1], first, |o| {
                        self.conv2d(&v[0], &v[1], b, p, o)
                    })
                });
            }
            let batched: Vec<bool> = (0..ts.len()).map(|k| k == 0 || k == ts.len() - 1).collect();
            return split::by_batch(op, &ts, &batched, &mut |v, _| {
                let b = bias.is_some().then(|| &v[2]);
                self.conv2d(&v[0], &v[1], b, p, &v[v.len() - 1])
            });
        }
        dense_out(out, |o| {
            let (xc, wc) = (dense(x)?, dense(w)?);
            let bc = bias.map(dense).transpose()?;
            let mut meta = conv_meta(
                xc.shape(),
                wc.shape(),
                o.shape(),
                p,
                n,
                [
                    xc.offset(),
                    wc.offset(),
                    bc.as_ref().map_or(0, |b| b.offset()),
                ],
            );
            meta[17] = bias.is_some() as u32;
            let mut ts: Vec<&Tensor> = vec![&xc, &wc];
            ts.extend(bc.as_ref());
            ts.push(o);
            let hb = bias.is_some();
            if gemm {
                return conv_gemm::run(op, shaders::ConvGemm::Forward { bias: hb }, &ts, &meta);
            }
            run_items(op, |bd| shaders::conv2d(bd, hb), &ts, &[], &meta, n)?;
            Ok(())
        })
    }

    pub(super) fn gpu_conv2d_input_grad(
        &self,
        g: &Tensor,
        w: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        let op = "conv2d_backward";
        let mut gemm = conv_gemm::chosen(shaders::ConvGemm::InputGrad, w.shape(), p.groups)?;
        if !gemm {
            // Past the adapter's loop limit the implicit GEMM runs instead
            // (as for the forward), unless the direct kernel is forced.
            if conv_gemm::forced().is_none()
                && over_loop_limit(conv_grad_trip_count(g, Some(w), p))?
            {
                gemm = true;
            } else {
                conv_grad_trips(op, g, Some(w), p)?;
            }
        }
        conv_check(op, &[g, w, out], p)?;
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if split::needed(op, &[g, w, out])? {
            if plane_too_big(&[g, out])? {
                // Bands of the input's rows, each with the gradient rows
                // that reach it (`g0` small enough that the shifted top
                // padding stays non-negative).
                let (is, gs) = (out.shape(), g.shape());
                let (sh, dh, pt) = (p.stride[0], p.dilation[0], p.pad[0]);
                let reach = (w.shape()[2] - 1) * dh;
                // A band of r input rows reads at most r + reach + 1 rows of
                // the gradient: budget them as a kernel of that height.
                let width = is[3].max(gs[3]);
                let kr = (reach + 2, 1, 1, 0);
                for (ih0, ih1, ..) in conv_bands(op, (is[2], width), (is[2], width), kr)? {
                    let g0 = ((ih0 + pt).saturating_sub(reach).div_ceil(sh))
                        .min((ih0 + pt) / sh)
                        .min(gs[2].saturating_sub(1));
                    let g1 = ((ih1 - 1 + pt) / sh + 1).clamp(g0 + 1, gs[2]);
                    let q = with_top(p, pt + ih0 - g0 * sh);
                    self.conv2d_input_grad(&rows_of(g, g0, g1)?, w, &q, &rows_of(out, ih0, ih1)?)?;
                }
                return Ok(());
            }
            if p.groups == 1 {
                // Images and channels split; a later piece along the output
                // channels adds its part of the sum over them.
                let ts = [g, w, out];
                let axes = vec![CONV_Y.to_vec(), CONV_W.to_vec(), CONV_X.to_vec()];
                let space = conv_space(&ts, axes, out, w, g);
                return split::in_pieces(op, &space, &mut |v, r| {
                    self.write_or_add(&v[2], r[CONV_O].0 == 0, |o| {
                        self.conv2d_input_grad(&v[0], &v[1], p, o)
                    })
                });
            }
            return split::by_batch(op, &[g, w, out], &[true, false, true], &mut |v, _| {
                self.conv2d_input_grad(&v[0], &v[1], p, &v[2])
            });
        }
        dense_out(out, |o| {
            let (gc, wc) = (dense(g)?, dense(w)?);
            let meta = conv_meta(
                o.shape(),
                wc.shape(),
                gc.shape(),
                p,
                n,
                [gc.offset(), wc.offset(), 0],
            );
            if gemm {
                return conv_gemm::run(op, shaders::ConvGemm::InputGrad, &[&gc, &wc, o], &meta);
            }
            run_items(
                op,
                shaders::conv2d_input_grad,
                &[&gc, &wc, o],
                &[],
                &meta,
                n,
            )?;
            Ok(())
        })
    }

    pub(super) fn gpu_conv2d_weight_grad(
        &self,
        g: &Tensor,
        x: &Tensor,
        p: &Conv2dParams,
        out: &Tensor,
    ) -> Result<()> {
        let op = "conv2d_backward";
        let gemm = conv_gemm::chosen(shaders::ConvGemm::WeightGrad, out.shape(), p.groups)?;
        // Every thread of the direct weight gradient walks all images and
        // output pixels: under a loop limit, fewer images at a time, their
        // gradients added (the implicit GEMM splits its sum itself).
        if let (Some(limit), 4, 4, false) = (get()?.loop_limit, g.ndim(), x.ndim(), gemm) {
            let (imgs, oh, ow) = (g.shape()[0], g.shape()[2] as u64, g.shape()[3] as u64);
            // Twice the plain count: the kernel's `continue`s (padding) cost
            // trips of their own (measured: 80 images of 28x28 outputs, 65,040
            // plain trips, came out wrong; 72 were right).
            let per = (limit.saturating_sub(64) / (2 * (1 + oh * (1 + ow)))).max(1) as usize;
            if imgs > per && g.shape()[0] == x.shape()[0] {
                let mut i0 = 0;
                while i0 < imgs {
                    let len = per.min(imgs - i0);
                    let gs = g.with_layout(g.layout().narrow(op, 0, i0 as isize, len)?);
                    let xs = x.with_layout(x.layout().narrow(op, 0, i0 as isize, len)?);
                    self.write_or_add(out, i0 == 0, |o| self.conv2d_weight_grad(&gs, &xs, p, o))?;
                    i0 += len;
                }
                return Ok(());
            }
        }
        if !gemm {
            conv_grad_trips(op, g, None, p)?;
        }
        conv_check(op, &[g, x, out], p)?;
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if split::needed(op, &[g, x, out])? {
            if plane_too_big(&[g, x])? {
                // Bands of the output rows; each band's part of the sum adds up.
                let (xs, gs) = (x.shape(), g.shape());
                let kr = (out.shape()[2], p.stride[0], p.dilation[0], p.pad[0]);
                let bands = conv_bands(op, (xs[2], xs[3]), (gs[2], gs[3]), kr)?;
                for (b, &(oh0, oh1, lo, hi, top)) in bands.iter().enumerate() {
                    let q = with_top(p, top);
                    let (gb, xb) = (rows_of(g, oh0, oh1)?, rows_of(x, lo, hi)?);
                    self.write_or_add(out, b == 0, |o| self.conv2d_weight_grad(&gb, &xb, &q, o))?;
                }
                return Ok(());
            }
            if p.groups == 1 {
                // Images and channels split; the weight's gradient sums over
                // the images, so a later piece along them adds its part.
                let ts = [g, x, out];
                let axes = vec![CONV_Y.to_vec(), CONV_X.to_vec(), CONV_W.to_vec()];
                let space = conv_space(&ts, axes, x, out, g);
                return split::in_pieces(op, &space, &mut |v, r| {
                    self.write_or_add(&v[2], r[CONV_N].0 == 0, |o| {
                        self.conv2d_weight_grad(&v[0], &v[1], p, o)
                    })
                });
            }
            // The weight's gradient sums over the batch: later pieces add theirs.
            return split::by_batch(op, &[g, x, out], &[true, true, false], &mut |v, r| {
                self.write_or_add(&v[2], r.0 == 0, |o| {
                    self.conv2d_weight_grad(&v[0], &v[1], p, o)
                })
            });
        }
        dense_out(out, |o| {
            let (gc, xc) = (dense(g)?, dense(x)?);
            let meta = conv_meta(
                xc.shape(),
                o.shape(),
                gc.shape(),
                p,
                n,
                [gc.offset(), xc.offset(), 0],
            );
            if gemm {
                return conv_gemm::run(op, shaders::ConvGemm::WeightGrad, &[&gc, &xc, o], &meta);
            }
            run_items(
                op,
                shaders::conv2d_weight_grad,
                &[&gc, &xc, o],
                &[],
                &meta,
                n,
            )?;
            Ok(())
        })
    }

    pub(super) fn gpu_max_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        out: &Tensor,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        let op = "max_pool2d";
        let mut ts: Vec<&Tensor> = vec![x, out];
        ts.extend(indices);
        check_same_device(op, &ts)?;
        f32_only(op, &[x, out])?;
        if x.ndim() != 4 || out.ndim() != 4 {
            return Err(Error::shape(
                op,
                format!(
                    "the gpu kernel expects 4-D input and output, got {:?} and {:?}",
                    x.shape(),
                    out.shape()
                ),
            ));
        }
        if let Some(i) = indices {
            gty(op, i.dtype())?;
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if split::needed(op, &ts)? {
            return split::in_pieces(op, &pool_space(&ts), &mut |v, _| {
                self.max_pool2d(&v[0], p, &v[1], v.get(2))
            });
        }
        check_items(op, x.numel().max(n))?;
        let fresh = |t: &Tensor| -> Result<Tensor> {
            if t.is_contiguous() && t.offset() == 0 {
                Ok(t.clone())
            } else {
                Tensor::empty(t.shape(), t.dtype(), t.device())
            }
        };
        let xc = dense(x)?;
        let o = fresh(out)?;
        let ic = indices.map(fresh).transpose()?;
        let (s, os) = (x.shape(), out.shape());
        let meta: Vec<u32> = [
            n,
            s[2],
            s[3],
            os[2],
            os[3],
            p.kernel[0],
            p.kernel[1],
            p.stride[0],
            p.stride[1],
            p.pad[0],
            p.pad[1],
            p.dilation[0],
            p.dilation[1],
            xc.offset(),
        ]
        .iter()
        .map(|&v| v as u32)
        .collect();
        let mut ts: Vec<&Tensor> = vec![&xc, &o];
        ts.extend(ic.as_ref());
        let wi = ic.is_some();
        run_items(op, |bd| shaders::max_pool2d(bd, wi), &ts, &[1], &meta, n)?;
        if !o.shares_storage(out) {
            self.cast_copy(&o, out)?;
        }
        if let (Some(i), Some(c)) = (indices, &ic) {
            if !i.shares_storage(c) {
                self.cast_copy(c, i)?;
            }
        }
        Ok(())
    }

    pub(super) fn gpu_avg_pool2d(
        &self,
        x: &Tensor,
        p: &Pool2dParams,
        count_include_pad: bool,
        divisor_override: Option<usize>,
        out: &Tensor,
    ) -> Result<()> {
        let mode = match divisor_override {
            Some(d) => (2, d),
            None if count_include_pad => (0, 0),
            None => (1, 0),
        };
        avg_pool("avg_pool2d", x, Some(p), mode, out)
    }

    pub(super) fn gpu_adaptive_avg_pool2d(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        avg_pool("adaptive_avg_pool2d", x, None, (0, 0), out)
    }

    /// Run `f` into `dst` for the first piece along a summed axis; for a
    /// later piece, into a temporary that is then added to `dst`.
    fn write_or_add(
        &self,
        dst: &Tensor,
        first: bool,
        f: impl FnOnce(&Tensor) -> Result<()>,
    ) -> Result<()> {
        if first {
            return f(dst);
        }
        let t = Tensor::empty(dst.shape(), dst.dtype(), dst.device())?;
        f(&t)?;
        self.binary(BinaryOp::Add, dst, &t, dst)
    }
}
