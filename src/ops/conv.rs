//! Convolution and pooling: `conv1d`, `conv2d`, `max_pool2d`, `avg_pool2d`,
//! `adaptive_avg_pool2d`, with PyTorch's argument conventions.
//!
//! Inputs are `(N, C, H, W)` or unbatched `(C, H, W)` (`(N, C, L)` / `(C, L)`
//! for `conv1d`). Floating dtypes only; float16 and bfloat16 compute in
//! float32. `conv2d` is a backend primitive (im2col + GEMM on the CPU);
//! `conv1d` is `conv2d` over a height-1 image.
//!
//! Gradients (end of the file): the input and weight gradients of a
//! convolution are the backend primitives `conv2d_input_grad` and
//! `conv2d_weight_grad`, recorded as internal (non-registry) ops whose own
//! VJPs are convolutions again, so double backward works. `max_pool2d` sends
//! each window's gradient to its argmax (the index it returns), average
//! pooling transposes the same window sums (with the forward's divisor rule).

use crate::autograd::{self as ag, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
pub use crate::kernel::params::{Conv2dParams, Pool2dParams};
use crate::ops::elementwise as ew;
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape;
use crate::tensor::layout::fmt_shape;
use crate::tensor::{DType, Scalar, Shape, Tensor};

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("conv1d", "conv", DTypes::FLOAT)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("conv2d", "conv", DTypes::FLOAT).grad(),
    OpInfo::prim("max_pool2d", "conv", DTypes::FLOAT).grad(),
    OpInfo::prim("avg_pool2d", "conv", DTypes::FLOAT).grad(),
    OpInfo::prim("adaptive_avg_pool2d", "conv", DTypes::FLOAT).grad(),
];

/// The `padding=` argument of a convolution.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Padding {
    /// Per spatial dim (one value is repeated for every dim).
    Explicit(Vec<usize>),
    /// Output size equals input size (stride 1 only); extra padding goes at the end.
    Same,
    /// No padding.
    Valid,
}

/// Expand a per-dim argument given as one value or `n` values.
pub fn expand_arg(op: &'static str, name: &str, v: &[usize], n: usize) -> Result<Vec<usize>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        _ => Err(Error::value(
            op,
            format!("{name} must be an int or a tuple of {n} ints, got {v:?}"),
        )),
    }
}

fn check_float(op: &'static str, what: &str, t: &Tensor) -> Result<()> {
    if t.dtype().is_floating_point() {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!(
                "not implemented for {what} of dtype {} (shape {}); use a floating dtype",
                t.dtype(),
                fmt_shape(t.shape())
            ),
        ))
    }
}

/// Whether a convolution of bfloat16 operands `a` and `b` runs on the CPU's
/// bfloat16 GEMM (bfloat16 operands, float32 sums) instead of widening both
/// to float32 first: on the CPU, with AVX512_BF16 at the SIMD level in use.
fn bf16_direct(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == DType::BF16
        && b.dtype() == DType::BF16
        && a.device() == crate::tensor::Device::Cpu
        && b.device() == crate::tensor::Device::Cpu
        && crate::backend::cpu::bf16gemm::available()
}

fn compute_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        _ => d,
    }
}

/// `conv2d(input, weight, bias, stride, padding, dilation, groups)`.
pub fn conv2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &Padding,
    dilation: &[usize],
    groups: usize,
) -> Result<Tensor> {
    if let Some((x, w, bias)) = super::autocast::lower_args(x, w, bias)? {
        return conv2d(&x, &w, bias.as_ref(), stride, padding, dilation, groups);
    }
    capture!(
        crate::ops::call::OpCall::Conv2d {
            stride: stride.to_vec(),
            padding: padding.clone(),
            dilation: dilation.to_vec(),
            groups,
            bias: bias.is_some()
        },
        [x, w] + bias.cloned(),
        one
    );
    let op = "conv2d";
    if x.ndim() != 3 && x.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "expected 3-D (unbatched) or 4-D (batched) input, but got input of shape {}",
                fmt_shape(x.shape())
            ),
        ));
    }
    if w.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "expected a 4-D weight (out_channels, in_channels/groups, kH, kW), got shape {}",
                fmt_shape(w.shape())
            ),
        ));
    }
    let stride = expand_arg(op, "stride", stride, 2)?;
    let dilation = expand_arg(op, "dilation", dilation, 2)?;
    let padding = match padding {
        Padding::Explicit(p) => Padding::Explicit(expand_arg(op, "padding", p, 2)?),
        p => p.clone(),
    };
    let (out, p) = {
        let _no = GradMode::set(false);
        conv_impl(op, x, w, bias, &stride, &padding, &dilation, groups, 2)?
    };
    let x4: [usize; 4] = match *x.shape() {
        [c, h, wd] => [1, c, h, wd],
        [n, c, h, wd] => [n, c, h, wd],
        _ => unreachable!("checked 3-D or 4-D"),
    };
    let ws = w.shape();
    record_conv(x, w, bias, p, &out, x4, [ws[0], ws[1], ws[2], ws[3]]);
    Ok(out)
}

/// `conv1d(input, weight, bias, stride, padding, dilation, groups)`.
pub fn conv1d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &Padding,
    dilation: &[usize],
    groups: usize,
) -> Result<Tensor> {
    if let Some((x, w, bias)) = super::autocast::lower_args(x, w, bias)? {
        return conv1d(&x, &w, bias.as_ref(), stride, padding, dilation, groups);
    }
    capture!(
        crate::ops::call::OpCall::Conv1d {
            stride: stride.to_vec(),
            padding: padding.clone(),
            dilation: dilation.to_vec(),
            groups,
            bias: bias.is_some()
        },
        [x, w] + bias.cloned(),
        one
    );
    let op = "conv1d";
    if x.ndim() != 2 && x.ndim() != 3 {
        return Err(Error::shape(
            op,
            format!(
                "expected 2-D (unbatched) or 3-D (batched) input, but got input of shape {}",
                fmt_shape(x.shape())
            ),
        ));
    }
    if w.ndim() != 3 {
        return Err(Error::shape(
            op,
            format!(
                "expected a 3-D weight (out_channels, in_channels/groups, kW), got shape {}",
                fmt_shape(w.shape())
            ),
        ));
    }
    let stride = expand_arg(op, "stride", stride, 1)?;
    let dilation = expand_arg(op, "dilation", dilation, 1)?;
    let padding = match padding {
        Padding::Explicit(p) => Padding::Explicit(vec![0, expand_arg(op, "padding", p, 1)?[0]]),
        p => p.clone(),
    };
    let (out, p) = {
        let _no = GradMode::set(false);
        let x2 = shape::unsqueeze(x, -2)?;
        let w2 = shape::unsqueeze(w, -2)?;
        let (y, p) = conv_impl(
            op,
            &x2,
            &w2,
            bias,
            &[1, stride[0]],
            &padding,
            &[1, dilation[0]],
            groups,
            1,
        )?;
        (shape::squeeze(&y, Some(&[-2]))?, p)
    };
    let x4: [usize; 4] = match *x.shape() {
        [c, l] => [1, c, 1, l],
        [n, c, l] => [n, c, 1, l],
        _ => unreachable!("checked 2-D or 3-D"),
    };
    let ws = w.shape();
    record_conv(x, w, bias, p, &out, x4, [ws[0], ws[1], 1, ws[2]]);
    Ok(out)
}

/// The shared convolution over a 2-D view (`spatial` is the caller's rank,
/// for messages); also returns the resolved geometry. Not recorded.
#[allow(clippy::too_many_arguments)]
fn conv_impl(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &Padding,
    dilation: &[usize],
    groups: usize,
    spatial: usize,
) -> Result<(Tensor, Conv2dParams)> {
    // Shapes in messages are the caller's (conv1d drops the added height dim).
    let show = |s: &[usize]| -> String {
        if spatial == 1 {
            let mut v = s.to_vec();
            v.remove(v.len() - 2);
            fmt_shape(&v)
        } else {
            fmt_shape(s)
        }
    };
    check_float(op, "input", x)?;
    check_float(op, "weight", w)?;
    if x.dtype() != w.dtype() {
        return Err(Error::dtype(
            op,
            format!(
                "input dtype {} and weight dtype {} must be the same",
                x.dtype(),
                w.dtype()
            ),
        ));
    }
    if let Some(b) = bias {
        if b.dtype() != x.dtype() {
            return Err(Error::dtype(
                op,
                format!(
                    "bias dtype {} must match the input dtype {}",
                    b.dtype(),
                    x.dtype()
                ),
            ));
        }
    }
    for t in [Some(w), bias].into_iter().flatten() {
        if t.device() != x.device() {
            return Err(Error::runtime(
                op,
                format!(
                    "expected all tensors to be on the same device, but found {} and {}",
                    x.device(),
                    t.device()
                ),
            ));
        }
    }
    if stride.contains(&0) {
        return Err(Error::value(
            op,
            format!("stride must be positive, got {:?}", &stride[2 - spatial..]),
        ));
    }
    if dilation.contains(&0) {
        return Err(Error::value(
            op,
            format!(
                "dilation must be positive, got {:?}",
                &dilation[2 - spatial..]
            ),
        ));
    }
    let unbatched = x.ndim() == 3;
    let x4 = if unbatched {
        shape::unsqueeze(x, 0)?
    } else {
        x.clone()
    };
    let (n, c, h, wd) = (x4.shape()[0], x4.shape()[1], x4.shape()[2], x4.shape()[3]);
    let (o, cg, kh, kw) = (w.shape()[0], w.shape()[1], w.shape()[2], w.shape()[3]);
    if groups == 0 {
        return Err(Error::value(op, "groups must be a positive integer"));
    }
    if c % groups != 0 || o % groups != 0 {
        return Err(Error::value(
            op,
            format!(
                "groups={groups} must divide both in_channels ({c}, input shape {}) and out_channels ({o}, weight shape {})",
                show(x.shape()),
                show(w.shape())
            ),
        ));
    }
    if cg * groups != c {
        return Err(Error::shape(
            op,
            format!(
                "given groups={groups} and weight of shape {}, expected input of shape {} to have {} in_channels, but got {c}",
                show(w.shape()),
                show(x.shape()),
                cg * groups
            ),
        ));
    }
    if let Some(b) = bias {
        if b.ndim() != 1 || b.shape()[0] != o {
            return Err(Error::shape(
                op,
                format!(
                    "bias of shape {} does not match out_channels {o} of weight shape {}",
                    fmt_shape(b.shape()),
                    show(w.shape())
                ),
            ));
        }
    }
    let pad: [usize; 4] = match padding {
        Padding::Valid => [0; 4],
        Padding::Explicit(p) => [p[0], p[0], p[1], p[1]],
        Padding::Same => {
            if stride.iter().any(|&s| s != 1) {
                return Err(Error::value(
                    op,
                    format!(
                        "padding='same' is not supported for strided convolutions (stride {:?})",
                        &stride[2 - spatial..]
                    ),
                ));
            }
            let th = dilation[0] * (kh.max(1) - 1);
            let tw = dilation[1] * (kw.max(1) - 1);
            [th / 2, th - th / 2, tw / 2, tw - tw / 2]
        }
    };
    if kh == 0 || kw == 0 {
        return Err(Error::shape(
            op,
            format!(
                "kernel size must be positive, weight shape {}",
                show(w.shape())
            ),
        ));
    }
    let eh = dilation[0] * (kh - 1) + 1;
    let ew_ = dilation[1] * (kw - 1) + 1;
    let (ph, pw) = (h + pad[0] + pad[1], wd + pad[2] + pad[3]);
    if ph < eh || pw < ew_ {
        let (ps, ks) = if spatial == 1 {
            (format!("({pw})"), format!("({ew_})"))
        } else {
            (format!("({ph} x {pw})"), format!("({eh} x {ew_})"))
        };
        return Err(Error::shape(
            op,
            format!(
                "output size is not positive: padded input size per channel {ps} is smaller than the dilated kernel size {ks} (input shape {}, weight shape {})",
                show(x.shape()),
                show(w.shape())
            ),
        ));
    }
    let _ = (n, o);
    let p = Conv2dParams {
        stride: [stride[0], stride[1]],
        pad,
        dilation: [dilation[0], dilation[1]],
        groups,
    };
    let out = conv_run(&x4, w, bias, &p)?;
    let out = if unbatched {
        shape::squeeze(&out, Some(&[0]))?
    } else {
        out
    };
    Ok((out, p))
}

/// The 4-D convolution for resolved geometry (no argument checks, not recorded).
fn conv_run(x4: &Tensor, w: &Tensor, bias: Option<&Tensor>, p: &Conv2dParams) -> Result<Tensor> {
    let (n, h, wd) = (x4.shape()[0], x4.shape()[2], x4.shape()[3]);
    let (o, kh, kw) = (w.shape()[0], w.shape()[2], w.shape()[3]);
    let eh = p.dilation[0] * (kh - 1) + 1;
    let ew_ = p.dilation[1] * (kw - 1) + 1;
    let oh = (h + p.pad[0] + p.pad[1] - eh) / p.stride[0] + 1;
    let ow = (wd + p.pad[2] + p.pad[3] - ew_) / p.stride[1] + 1;
    let dt = x4.dtype();
    if bf16_direct(x4, w) {
        // Bias added in float32 first; the float32 sums rounded once to bfloat16.
        let wc = ew::contiguous(w)?;
        let bc = bias.map(|b| ew::to_dtype(b, DType::F32)).transpose()?;
        let out = Tensor::empty_for("conv2d", &[n, o, oh, ow], DType::F32, x4.device())?;
        backend(x4.device()).conv2d(x4, &wc, bc.as_ref(), p, &out)?;
        return ew::to_dtype(&out, dt);
    }
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(x4, cd)?;
    let wc = ew::contiguous(&ew::to_dtype(w, cd)?)?;
    let bc = bias.map(|b| ew::to_dtype(b, cd)).transpose()?;
    let out = Tensor::empty_for("conv2d", &[n, o, oh, ow], cd, x4.device())?;
    backend(x4.device()).conv2d(&xc, &wc, bc.as_ref(), p, &out)?;
    if cd != dt {
        ew::to_dtype(&out, dt)
    } else {
        Ok(out)
    }
}

/// Output length of a pooling window sweep (`None` when not positive).
fn pool_out(size: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> Option<usize> {
    let num = (size + 2 * p) as isize - (d * (k - 1)) as isize - 1;
    if num < 0 {
        return None;
    }
    let num = num as usize;
    let mut o = if ceil { num.div_ceil(s) } else { num / s } + 1;
    // The last window must start inside the input or the left padding.
    if ceil && (o - 1) * s >= size + p {
        o -= 1;
    }
    (o > 0).then_some(o)
}

/// Validate a pooling input, returning it as 4-D and whether it was unbatched.
fn pool_input(op: &'static str, x: &Tensor) -> Result<(Tensor, bool)> {
    if x.ndim() != 3 && x.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "expected 3-D (unbatched) or 4-D (batched) input, but got input of shape {}",
                fmt_shape(x.shape())
            ),
        ));
    }
    check_float(op, "input", x)?;
    if x.ndim() == 3 {
        Ok((shape::unsqueeze(x, 0)?, true))
    } else {
        Ok((x.clone(), false))
    }
}

#[allow(clippy::too_many_arguments)]
fn pool_params(
    op: &'static str,
    x: &Tensor,
    kernel: &[usize],
    stride: Option<&[usize]>,
    padding: &[usize],
    dilation: &[usize],
    ceil_mode: bool,
) -> Result<(Pool2dParams, [usize; 2])> {
    let k = expand_arg(op, "kernel_size", kernel, 2)?;
    let s = match stride {
        Some(s) if !s.is_empty() => expand_arg(op, "stride", s, 2)?,
        _ => k.clone(),
    };
    let p = expand_arg(op, "padding", padding, 2)?;
    let d = expand_arg(op, "dilation", dilation, 2)?;
    if k.contains(&0) || s.contains(&0) || d.contains(&0) {
        return Err(Error::value(
            op,
            format!("kernel_size {k:?}, stride {s:?} and dilation {d:?} must be positive"),
        ));
    }
    for i in 0..2 {
        if p[i] > k[i] / 2 {
            return Err(Error::value(
                op,
                format!(
                    "padding should be at most half of the kernel size, but got padding {p:?} and kernel_size {k:?}"
                ),
            ));
        }
    }
    let nd = x.ndim();
    let (h, w) = (x.shape()[nd - 2], x.shape()[nd - 1]);
    let oh = pool_out(h, k[0], s[0], p[0], d[0], ceil_mode);
    let ow = pool_out(w, k[1], s[1], p[1], d[1], ceil_mode);
    match (oh, ow) {
        (Some(oh), Some(ow)) => Ok((
            Pool2dParams {
                kernel: [k[0], k[1]],
                stride: [s[0], s[1]],
                pad: [p[0], p[1]],
                dilation: [d[0], d[1]],
                ceil_mode,
            },
            [oh, ow],
        )),
        _ => Err(Error::shape(
            op,
            format!(
                "output size is not positive for input of shape {} with kernel_size {k:?}, stride {s:?}, padding {p:?}, dilation {d:?}",
                fmt_shape(x.shape())
            ),
        )),
    }
}

/// `max_pool2d`: the max over each window (padding counts as -inf); optional flat
/// indices (into each input plane's `H*W`) of the maxima.
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d(
    x: &Tensor,
    kernel: &[usize],
    stride: Option<&[usize]>,
    padding: &[usize],
    dilation: &[usize],
    ceil_mode: bool,
    return_indices: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    capture!(
        crate::ops::call::OpCall::MaxPool2d {
            kernel: kernel.to_vec(),
            stride: stride.map(|s| s.to_vec()),
            padding: padding.to_vec(),
            dilation: dilation.to_vec(),
            ceil_mode,
            return_indices
        },
        [x],
        one_and_optional
    );
    let op = "max_pool2d";
    let record = ag::needs_grad(&[x]);
    // Only the op-level node is recorded.
    let _no = GradMode::set(false);
    let (x4, unbatched) = pool_input(op, x)?;
    let (p, [oh, ow]) = pool_params(op, x, kernel, stride, padding, dilation, ceil_mode)?;
    let (n, c) = (x4.shape()[0], x4.shape()[1]);
    let dt = x.dtype();
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(&x4, cd)?;
    let out = Tensor::empty_for(op, &[n, c, oh, ow], cd, x.device())?;
    let idx = if return_indices || record || crate::ops::capture::aux_replay() {
        Some(Tensor::empty_for(
            op,
            &[n, c, oh, ow],
            DType::I64,
            x.device(),
        )?)
    } else {
        None
    };
    backend(x.device()).max_pool2d(&xc, &p, &out, idx.as_ref())?;
    let out = ew::to_dtype(&out, dt)?;
    let fix = |t: Tensor| -> Result<Tensor> {
        if unbatched {
            shape::squeeze(&t, Some(&[0]))
        } else {
            Ok(t)
        }
    };
    let out = fix(out)?;
    if let Some(i) = &idx {
        crate::ops::capture::push_aux(i, record);
    }
    if record {
        let i = idx.as_ref().expect("indices computed");
        let bw = MaxPoolBackward {
            x_shape: x.shape().into(),
        };
        ag::record(bw, &[x], &[&out], &[Save::Tensor(i)]);
    }
    let idx = if return_indices { idx } else { None };
    Ok((out, idx.map(fix).transpose()?))
}

/// `avg_pool2d`: the mean over each window.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d(
    x: &Tensor,
    kernel: &[usize],
    stride: Option<&[usize]>,
    padding: &[usize],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::AvgPool2d {
            kernel: kernel.to_vec(),
            stride: stride.map(|s| s.to_vec()),
            padding: padding.to_vec(),
            ceil_mode,
            count_include_pad,
            divisor_override
        },
        [x],
        one
    );
    let op = "avg_pool2d";
    let record = ag::needs_grad(&[x]);
    // Only the op-level node is recorded.
    let _no = GradMode::set(false);
    let (x4, unbatched) = pool_input(op, x)?;
    if divisor_override == Some(0) {
        return Err(Error::value(op, "divisor_override must be non-zero"));
    }
    let (p, [oh, ow]) = pool_params(op, x, kernel, stride, padding, &[1], ceil_mode)?;
    let (n, c) = (x4.shape()[0], x4.shape()[1]);
    let dt = x.dtype();
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(&x4, cd)?;
    let out = Tensor::empty_for(op, &[n, c, oh, ow], cd, x.device())?;
    backend(x.device()).avg_pool2d(&xc, &p, count_include_pad, divisor_override, &out)?;
    let out = ew::to_dtype(&out, dt)?;
    let out = if unbatched {
        shape::squeeze(&out, Some(&[0]))?
    } else {
        out
    };
    if record {
        let s = x4.shape();
        let bw = AvgPoolBackward {
            x_shape: x.shape().into(),
            x4: [s[0], s[1], s[2], s[3]],
            out4: [n, c, oh, ow],
            p,
            count_include_pad,
            divisor_override,
        };
        ag::record(bw, &[x], &[&out], &[]);
    }
    Ok(out)
}

/// `adaptive_avg_pool2d`: mean over windows `[floor(i*H/oH), ceil((i+1)*H/oH))`;
/// `None` in `output_size` keeps the input's size.
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: [Option<usize>; 2]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::AdaptiveAvgPool2d { output_size },
        [x],
        one
    );
    let op = "adaptive_avg_pool2d";
    let record = ag::needs_grad(&[x]);
    // Only the op-level node is recorded.
    let _no = GradMode::set(false);
    let (x4, unbatched) = pool_input(op, x)?;
    let (n, c, h, w) = (x4.shape()[0], x4.shape()[1], x4.shape()[2], x4.shape()[3]);
    let oh = output_size[0].unwrap_or(h);
    let ow = output_size[1].unwrap_or(w);
    if (h == 0 || w == 0) && oh * ow > 0 {
        return Err(Error::shape(
            op,
            format!(
                "expected input with non-zero spatial size, got shape {} (output size {:?})",
                fmt_shape(x.shape()),
                [oh, ow]
            ),
        ));
    }
    let dt = x.dtype();
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(&x4, cd)?;
    let out = Tensor::empty_for(op, &[n, c, oh, ow], cd, x.device())?;
    backend(x.device()).adaptive_avg_pool2d(&xc, &out)?;
    let out = ew::to_dtype(&out, dt)?;
    let out = if unbatched {
        shape::squeeze(&out, Some(&[0]))?
    } else {
        out
    };
    if record {
        let bw = AdaptiveAvgPoolBackward {
            x_shape: x.shape().into(),
            hw: [h, w],
            out_hw: [oh, ow],
        };
        ag::record(bw, &[x], &[&out], &[]);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Gradients
// ---------------------------------------------------------------------------
//
// Every VJP below is written with recorded ops, so double backward works.
// The input and weight gradients of a convolution are two backend primitives
// (a transposed convolution, and a Σ g·colsᵀ product), each recorded as an
// internal op whose own VJP is a forward convolution plus the other
// primitive. Pooling gradients use the transposed convolution with a ones
// kernel (average pooling), two small recorded gather/scatter helpers (max
// pooling) or two constant averaging matrices (adaptive average pooling).

/// Record [`ConvBackward`] for `out = conv(x, w, bias)` when an input needs grad.
/// `x4`/`w4` are the 4-D shapes the convolution ran on.
fn record_conv(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: Conv2dParams,
    out: &Tensor,
    x4: [usize; 4],
    w4: [usize; 4],
) {
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    if !ag::needs_grad(&inputs) {
        return;
    }
    let (nx, nw) = (x.requires_grad(), w.requires_grad());
    let mut save = vec![];
    if nw {
        save.push(Save::Tensor(x));
    }
    if nx {
        save.push(Save::Tensor(w));
    }
    let bw = ConvBackward {
        p,
        x_shape: x.shape().into(),
        w_shape: w.shape().into(),
        x4,
        w4,
        has_bias: bias.is_some(),
        saved_x: nw,
        saved_w: nx,
    };
    ag::record(bw, &inputs, &[out], &save);
}

/// A 4-D convolution with resolved geometry (possibly asymmetric padding), recorded.
pub fn conv2d_p(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, p: Conv2dParams) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Conv2dP {
            p,
            bias: bias.is_some()
        },
        [x, w] + bias.cloned(),
        one
    );
    let out = {
        let _no = GradMode::set(false);
        conv_run(x, w, bias, &p)?
    };
    let (xs, ws) = (x.shape(), w.shape());
    record_conv(
        x,
        w,
        bias,
        p,
        &out,
        [xs[0], xs[1], xs[2], xs[3]],
        [ws[0], ws[1], ws[2], ws[3]],
    );
    Ok(out)
}

/// A 4-D convolution with resolved geometry whose output goes through an
/// epilogue in the same kernel: `relu` and/or a 2×2 stride-2 `max_pool2d`
/// (inference graphs fuse `conv2d → relu → max_pool2d` into this; never
/// recorded for autograd). Equal element for element to the unfused ops.
/// Off the CPU, or for other dtypes, it runs as those ops.
pub fn conv2d_fused(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: Conv2dParams,
    relu: bool,
    pool2: bool,
) -> Result<Tensor> {
    let op = "conv2d";
    if x.ndim() != 4 || w.ndim() != 4 {
        return Err(Error::shape(
            op,
            format!(
                "fused convolution expects a 4-D input and weight, got input {} and weight {}",
                fmt_shape(x.shape()),
                fmt_shape(w.shape())
            ),
        ));
    }
    let _no = GradMode::set(false);
    let cpu = x.device() == crate::tensor::Device::Cpu;
    let float = matches!(x.dtype(), DType::F32 | DType::F64);
    let same = w.dtype() == x.dtype() && bias.is_none_or(|b| b.dtype() == x.dtype());
    let on_cpu = [Some(w), bias]
        .into_iter()
        .flatten()
        .all(|t| t.device() == x.device());
    if !(cpu && float && same && on_cpu) {
        let mut y = conv2d_p(x, w, bias, p)?;
        if relu {
            y = ew::unary(ew::UnaryOp::Relu, &y)?;
        }
        if pool2 {
            y = max_pool2d(&y, &[2], Some(&[2]), &[0], &[1], false, false)?.0;
        }
        return Ok(y);
    }
    let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (o, cg, kh, kw) = (w.shape()[0], w.shape()[1], w.shape()[2], w.shape()[3]);
    let eh = p.dilation[0] * (kh.max(1) - 1) + 1;
    let ew_ = p.dilation[1] * (kw.max(1) - 1) + 1;
    let (ph, pw) = (h + p.pad[0] + p.pad[1], wd + p.pad[2] + p.pad[3]);
    if kh == 0 || kw == 0 || cg * p.groups != c || ph < eh || pw < ew_ {
        return Err(Error::shape(
            op,
            format!(
                "input of shape {} does not fit weight of shape {} (groups {})",
                fmt_shape(x.shape()),
                fmt_shape(w.shape()),
                p.groups
            ),
        ));
    }
    let oh = (ph - eh) / p.stride[0] + 1;
    let ow = (pw - ew_) / p.stride[1] + 1;
    let shape = if pool2 {
        [n, o, oh / 2, ow / 2]
    } else {
        [n, o, oh, ow]
    };
    let wc = ew::contiguous(w)?;
    let out = Tensor::empty_for(op, &shape, x.dtype(), x.device())?;
    let epi = crate::backend::cpu::conv::Epilogue { relu, pool2 };
    crate::backend::cpu::conv::conv2d_epilogue(x, &wc, bias, &p, epi, &out)?;
    Ok(out)
}

fn spec(s: &[usize]) -> Vec<isize> {
    s.iter().map(|&d| d as isize).collect()
}

/// Gradient of a convolution's input `(N, C, H, W)` (`hw = [H, W]`) for the
/// output gradient `g` `(N, O, oH, oW)` and weight `w` `(O, C/groups, kH, kW)`:
/// the transposed convolution (backend primitive), recorded.
pub fn conv2d_input_grad(
    g: &Tensor,
    w: &Tensor,
    hw: [usize; 2],
    p: &Conv2dParams,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Conv2dInputGrad { hw, p: *p },
        [g, w],
        one
    );
    let out = {
        let _no = GradMode::set(false);
        let dt = DType::promote(g.dtype(), w.dtype());
        let cd = if bf16_direct(g, w) {
            DType::BF16
        } else {
            compute_dtype(dt)
        };
        let gc = ew::contiguous(&ew::to_dtype(g, cd)?)?;
        let wc = ew::contiguous(&ew::to_dtype(w, cd)?)?;
        let c = w.shape()[1] * p.groups;
        // bfloat16 operands sum into float32 (rounded once below).
        let od = if cd == DType::BF16 { DType::F32 } else { cd };
        let out = Tensor::empty(&[g.shape()[0], c, hw[0], hw[1]], od, g.device())?;
        backend(g.device()).conv2d_input_grad(&gc, &wc, p, &out)?;
        ew::to_dtype(&out, dt)?
    };
    if ag::needs_grad(&[g, w]) {
        let (ng, nw) = (g.requires_grad(), w.requires_grad());
        let mut save = vec![];
        if nw {
            save.push(Save::Tensor(g));
        }
        if ng {
            save.push(Save::Tensor(w));
        }
        let bw = ConvTransposeBackward {
            p: *p,
            k: [w.shape()[2], w.shape()[3]],
            saved_g: nw,
            saved_w: ng,
        };
        ag::record(bw, &[g, w], &[&out], &save);
    }
    Ok(out)
}

/// Gradient of a convolution's weight (`k = [kH, kW]`) for the output
/// gradient `g` `(N, O, oH, oW)` and input `x` `(N, C, H, W)` (backend
/// primitive), recorded.
pub fn conv2d_weight_grad(
    g: &Tensor,
    x: &Tensor,
    k: [usize; 2],
    p: &Conv2dParams,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Conv2dWeightGrad { k, p: *p },
        [g, x],
        one
    );
    let out = {
        let _no = GradMode::set(false);
        let dt = DType::promote(g.dtype(), x.dtype());
        let cd = if bf16_direct(g, x) {
            DType::BF16
        } else {
            compute_dtype(dt)
        };
        let gc = ew::contiguous(&ew::to_dtype(g, cd)?)?;
        let xc = ew::to_dtype(x, cd)?;
        let cg = x.shape()[1] / p.groups;
        // bfloat16 operands sum into float32 (rounded once below).
        let od = if cd == DType::BF16 { DType::F32 } else { cd };
        let out = Tensor::empty(&[g.shape()[1], cg, k[0], k[1]], od, g.device())?;
        backend(g.device()).conv2d_weight_grad(&gc, &xc, p, &out)?;
        ew::to_dtype(&out, dt)?
    };
    if ag::needs_grad(&[g, x]) {
        let (ng, nx) = (g.requires_grad(), x.requires_grad());
        let mut save = vec![];
        if nx {
            save.push(Save::Tensor(g));
        }
        if ng {
            save.push(Save::Tensor(x));
        }
        let bw = ConvWeightBackward {
            p: *p,
            hw: [x.shape()[2], x.shape()[3]],
            saved_g: nx,
            saved_x: ng,
        };
        ag::record(bw, &[g, x], &[&out], &save);
    }
    Ok(out)
}

/// Backward of [`conv2d_input_grad`] (linear in `g` and in `w`): the forward
/// convolution of the incoming gradient, and a weight gradient.
/// Saved: `g` when `w` needs a gradient, `w` when `g` does.
struct ConvTransposeBackward {
    p: Conv2dParams,
    k: [usize; 2],
    saved_g: bool,
    saved_w: bool,
}

impl Backward for ConvTransposeBackward {
    fn name(&self) -> &'static str {
        "ConvolutionBackwardBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(gg) = &grads[0] else {
            return Ok(vec![None, None]);
        };
        let mut it = saved.iter();
        let g = if self.saved_g { it.next() } else { None };
        let w = if self.saved_w { it.next() } else { None };
        let dg = if needs[0] {
            Some(conv2d_p(gg, w.expect("w saved"), None, self.p)?)
        } else {
            None
        };
        let dw = if needs[1] {
            Some(conv2d_weight_grad(
                g.expect("g saved"),
                gg,
                self.k,
                &self.p,
            )?)
        } else {
            None
        };
        Ok(vec![dg, dw])
    }
}

/// Backward of [`conv2d_weight_grad`] (linear in `g` and in `x`): a forward
/// convolution and a transposed one. Saved: `g` when `x` needs a gradient,
/// `x` when `g` does.
struct ConvWeightBackward {
    p: Conv2dParams,
    hw: [usize; 2],
    saved_g: bool,
    saved_x: bool,
}

impl Backward for ConvWeightBackward {
    fn name(&self) -> &'static str {
        "ConvolutionBackwardBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(ggw) = &grads[0] else {
            return Ok(vec![None, None]);
        };
        let mut it = saved.iter();
        let g = if self.saved_g { it.next() } else { None };
        let x = if self.saved_x { it.next() } else { None };
        let dg = if needs[0] {
            Some(conv2d_p(x.expect("x saved"), ggw, None, self.p)?)
        } else {
            None
        };
        let dx = if needs[1] {
            Some(conv2d_input_grad(
                g.expect("g saved"),
                ggw,
                self.hw,
                &self.p,
            )?)
        } else {
            None
        };
        Ok(vec![dg, dx])
    }
}

/// Backward of `conv1d`/`conv2d` (and the internal convolutions of these
/// VJPs). Saved: `x` when the weight needs a gradient, `w` when the input does.
struct ConvBackward {
    p: Conv2dParams,
    x_shape: Shape,
    w_shape: Shape,
    x4: [usize; 4],
    w4: [usize; 4],
    has_bias: bool,
    saved_x: bool,
    saved_w: bool,
}

impl Backward for ConvBackward {
    fn name(&self) -> &'static str {
        "ConvolutionBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let n = needs.len();
        let Some(g) = &grads[0] else {
            return Ok(vec![None; n]);
        };
        let mut it = saved.iter();
        let x = if self.saved_x { it.next() } else { None };
        let w = if self.saved_w { it.next() } else { None };
        // The output gradient as (N, O, oH, oW).
        let [nb, _, h, wd] = self.x4;
        let [o, _, kh, kw] = self.w4;
        let p = &self.p;
        let oh = (h + p.pad[0] + p.pad[1] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1;
        let ow = (wd + p.pad[2] + p.pad[3] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1;
        let g4 = shape::reshape(g, &spec(&[nb, o, oh, ow]))?;
        let mut out = vec![None; n];
        if needs[0] {
            let w4 = shape::reshape(w.expect("w saved"), &spec(&self.w4))?;
            let gx = conv2d_input_grad(&g4, &w4, [h, wd], &self.p)?;
            out[0] = Some(shape::reshape(&gx, &spec(&self.x_shape))?);
        }
        if needs[1] {
            let x4 = shape::reshape(x.expect("x saved"), &spec(&self.x4))?;
            let gw = conv2d_weight_grad(&g4, &x4, [self.w4[2], self.w4[3]], &self.p)?;
            out[1] = Some(shape::reshape(&gw, &spec(&self.w_shape))?);
        }
        if self.has_bias && needs[2] {
            out[2] = Some(crate::ops::reduce::sum(&g4, Some(&[0, 2, 3]), false, None)?);
        }
        Ok(out)
    }
}

/// `out[p, i] = x[p, idx[p, i]]` for a 2-D `x` and int64 `idx` (recorded).
pub fn plane_gather(x: &Tensor, idx: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::PlaneGather, [x, idx], one);
    let out = Tensor::empty(idx.shape(), x.dtype(), x.device())?;
    backend(x.device()).gather(x, 1, idx, &out)?;
    if ag::needs_grad(&[x]) {
        let bw = PlaneGatherBackward { len: x.shape()[1] };
        ag::record(bw, &[x], &[&out], &[Save::Tensor(idx)]);
    }
    Ok(out)
}

/// `out[p, idx[p, i]] += g[p, i]` into zeros `(P, len)` (recorded).
pub fn plane_scatter(g: &Tensor, idx: &Tensor, len: usize) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::PlaneScatter { len },
        [g, idx],
        one
    );
    let out = Tensor::zeros(&[g.shape()[0], len], g.dtype(), g.device())?;
    backend(g.device()).scatter("max_pool2d", &out, 1, idx, g, true)?;
    if ag::needs_grad(&[g]) {
        ag::record(PlaneScatterBackward, &[g], &[&out], &[Save::Tensor(idx)]);
    }
    Ok(out)
}

/// Backward of [`plane_gather`]: scatter-add. Saved: `[idx]`.
struct PlaneGatherBackward {
    len: usize,
}

impl Backward for PlaneGatherBackward {
    fn name(&self) -> &'static str {
        "MaxPool2DGatherBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| plane_scatter(g, &saved[0], self.len))
            .transpose()?])
    }
}

/// Backward of [`plane_scatter`]: gather. Saved: `[idx]`.
struct PlaneScatterBackward;

impl Backward for PlaneScatterBackward {
    fn name(&self) -> &'static str {
        "MaxPool2DWithIndicesBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| plane_gather(g, &saved[0]))
            .transpose()?])
    }
}

/// Backward of `max_pool2d`: each window's gradient goes to the position of
/// its maximum (the first maximum in the window's scan order, the index the
/// forward returns; windows over padding only pass nothing). Saved: the
/// `(N, C, oH, oW)` indices.
struct MaxPoolBackward {
    x_shape: Shape,
}

impl Backward for MaxPoolBackward {
    fn name(&self) -> &'static str {
        "MaxPool2DWithIndicesBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        let idx = &saved[0];
        let nd = self.x_shape.len();
        let len = self.x_shape[nd - 2] * self.x_shape[nd - 1];
        let planes = self.x_shape[..nd - 2].iter().product::<usize>();
        let l_out = idx.shape()[2] * idx.shape()[3];
        let idx2 = shape::reshape(idx, &spec(&[planes, l_out]))?;
        let dt = g.dtype();
        let cd = compute_dtype(dt);
        let mut g2 = shape::reshape(&ew::to_dtype(g, cd)?, &spec(&[planes, l_out]))?;
        // Windows entirely over padding have index -1: they pass nothing.
        let valid = ew::binary_scalar(
            crate::ops::elementwise::BinaryOp::Ge,
            &idx2,
            Scalar::Int(0),
            false,
        )?;
        // (Reading the mask is a shortcut only for real values; a captured
        // graph takes the general path.)
        let all_valid = idx2.device().has_data()
            && crate::ops::reduce::all_any(true, &valid, None, false)?.to_f64_vec()[0] != 0.0;
        let idx2 = if all_valid {
            idx2
        } else {
            let z = ew::scalar_tensor(Scalar::Float(0.0), cd, g.device())?;
            g2 = ew::where_(&valid, &g2, &z)?;
            let zi = ew::scalar_tensor(Scalar::Int(0), DType::I64, g.device())?;
            ew::where_(&valid, &idx2, &zi)?
        };
        let gx = plane_scatter(&g2, &idx2, len)?;
        let gx = ew::to_dtype(&gx, dt)?;
        Ok(vec![Some(shape::reshape(&gx, &spec(&self.x_shape))?)])
    }
}

/// Backward of `avg_pool2d`: the transposed convolution of `g / divisor`
/// with a ones kernel per channel (the divisor per window as the forward
/// computes it: `divisor_override`, or the window clipped to the padded
/// input with `count_include_pad`, or to the input without).
struct AvgPoolBackward {
    x_shape: Shape,
    x4: [usize; 4],
    out4: [usize; 4],
    p: Pool2dParams,
    count_include_pad: bool,
    divisor_override: Option<usize>,
}

impl Backward for AvgPoolBackward {
    fn name(&self) -> &'static str {
        "AvgPool2DBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        let [_, c, h, w] = self.x4;
        let [_, _, oh, ow] = self.out4;
        let [kh, kw] = self.p.kernel;
        let [sh, sw] = self.p.stride;
        let (ph, pw) = (self.p.pad[0], self.p.pad[1]);
        // 1 / divisor per window (0 for windows over nothing).
        let mut inv = Vec::with_capacity(oh * ow);
        for oy in 0..oh {
            let hs = (oy * sh) as isize - ph as isize;
            let he = (hs + kh as isize).min((h + ph) as isize);
            for ox in 0..ow {
                let ws = (ox * sw) as isize - pw as isize;
                let we = (ws + kw as isize).min((w + pw) as isize);
                let pool = (he - hs) * (we - ws);
                let (hs, he) = (hs.max(0), he.min(h as isize));
                let (ws, we) = (ws.max(0), we.min(w as isize));
                let div = match self.divisor_override {
                    Some(d) => d as isize,
                    None if self.count_include_pad => pool,
                    None => (he - hs).max(0) * (we - ws).max(0),
                };
                inv.push(if div > 0 { 1.0 / div as f64 } else { 0.0 });
            }
        }
        // (`run_device`: a captured gradient is on the device the graph runs on.)
        let inv = if matches!(
            crate::ops::capture::run_device(g),
            crate::tensor::Device::Gpu(_)
        ) {
            // The GPU holds no float64: build the factors in float32 there.
            let inv: Vec<f32> = inv.iter().map(|&v| v as f32).collect();
            Tensor::from_vec_on(inv, &[oh, ow], g.device())?
        } else {
            Tensor::from_vec_on(inv, &[oh, ow], g.device())?
        };
        let inv = ew::to_dtype(&inv, g.dtype())?;
        let g4 = shape::reshape(g, &spec(&self.out4))?;
        let gs = ew::binary(crate::ops::elementwise::BinaryOp::Mul, &g4, &inv)?;
        let ones =
            crate::ops::creation::full(&[c, 1, kh, kw], Scalar::Float(1.0), g.dtype(), g.device())?;
        // Bottom/right padding that makes every window (ceil_mode) fit.
        let pb = ph.max(((oh - 1) * sh + kh).saturating_sub(h + ph));
        let pr = pw.max(((ow - 1) * sw + kw).saturating_sub(w + pw));
        let q = Conv2dParams {
            stride: self.p.stride,
            pad: [ph, pb, pw, pr],
            dilation: [1, 1],
            groups: c,
        };
        let gx = conv2d_input_grad(&gs, &ones, [h, w], &q)?;
        Ok(vec![Some(shape::reshape(&gx, &spec(&self.x_shape))?)])
    }
}

/// `(out, size)` averaging matrix of adaptive pooling along one dim, on
/// `like`'s device in its dtype: row `i` is `1/len` over the window
/// `[floor(i*size/out), ceil((i+1)*size/out))`.
fn adaptive_matrix(out: usize, size: usize, like: &Tensor) -> Result<Tensor> {
    let mut m = vec![0.0f64; out * size];
    for i in 0..out {
        let s = i * size / out;
        let e = ((i + 1) * size).div_ceil(out);
        for j in s..e {
            m[i * size + j] = 1.0 / (e - s) as f64;
        }
    }
    // (`run_device`: a captured gradient is on the device the graph runs on;
    // made on `like`'s device, the matrix is then a constant of the graph.)
    let m = if matches!(
        crate::ops::capture::run_device(like),
        crate::tensor::Device::Gpu(_)
    ) {
        // The GPU holds no float64.
        let m: Vec<f32> = m.iter().map(|&v| v as f32).collect();
        Tensor::from_vec_on(m, &[out, size], like.device())?
    } else {
        Tensor::from_vec_on(m, &[out, size], like.device())?
    };
    ew::to_dtype(&m, like.dtype())
}

/// Backward of `adaptive_avg_pool2d`: the pooling is `Aₕ x Aᵥᵀ` per plane
/// with constant averaging matrices, so the gradient is `Aₕᵀ g Aᵥ` (two
/// recorded matmuls).
struct AdaptiveAvgPoolBackward {
    x_shape: Shape,
    hw: [usize; 2],
    out_hw: [usize; 2],
}

impl Backward for AdaptiveAvgPoolBackward {
    fn name(&self) -> &'static str {
        "AdaptiveAvgPool2DBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        if self.x_shape.contains(&0) || g.numel() == 0 {
            return Ok(vec![Some(Tensor::zeros(
                &self.x_shape,
                g.dtype(),
                g.device(),
            )?)]);
        }
        let ah = adaptive_matrix(self.out_hw[0], self.hw[0], g)?;
        let aw = adaptive_matrix(self.out_hw[1], self.hw[1], g)?;
        let t = crate::ops::linalg::matmul(&shape::transpose(&ah, 0, 1)?, g)?;
        Ok(vec![Some(crate::ops::linalg::matmul(&t, &aw)?)])
    }
}
