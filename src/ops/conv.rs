//! Convolution and pooling: `conv1d`, `conv2d`, `max_pool2d`, `avg_pool2d`,
//! `adaptive_avg_pool2d`, with PyTorch's argument conventions.
//!
//! Inputs are `(N, C, H, W)` or unbatched `(C, H, W)` (`(N, C, L)` / `(C, L)`
//! for `conv1d`). Floating dtypes only; float16 and bfloat16 compute in
//! float32. `conv2d` is a backend primitive (im2col + GEMM on the CPU);
//! `conv1d` is `conv2d` over a height-1 image.

use crate::backend::backend;
use crate::error::{Error, Result};
use crate::ops::elementwise as ew;
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape;
use crate::tensor::layout::fmt_shape;
use crate::tensor::{DType, Tensor};

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("conv1d", "conv", DTypes::FLOAT).kind(OpKind::Composite),
    OpInfo::prim("conv2d", "conv", DTypes::FLOAT),
    OpInfo::prim("max_pool2d", "conv", DTypes::FLOAT),
    OpInfo::prim("avg_pool2d", "conv", DTypes::FLOAT),
    OpInfo::prim("adaptive_avg_pool2d", "conv", DTypes::FLOAT),
];

/// The `padding=` argument of a convolution.
#[derive(Clone, Debug, PartialEq)]
pub enum Padding {
    /// Per spatial dim (one value is repeated for every dim).
    Explicit(Vec<usize>),
    /// Output size equals input size (stride 1 only); extra padding goes at the end.
    Same,
    /// No padding.
    Valid,
}

/// Resolved 2-D convolution geometry.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Conv2dParams {
    pub stride: [usize; 2],
    /// Padding as (top, bottom, left, right).
    pub pad: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
}

/// Resolved 2-D pooling geometry.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Pool2dParams {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
    pub ceil_mode: bool,
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
    conv_impl(op, x, w, bias, &stride, &padding, &dilation, groups, 2)
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
    let x2 = shape::unsqueeze(x, -2)?;
    let w2 = shape::unsqueeze(w, -2)?;
    let y = conv_impl(
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
    shape::squeeze(&y, Some(&[-2]))
}

/// The shared convolution over a 2-D view (`spatial` is the caller's rank, for messages).
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
) -> Result<Tensor> {
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
    let oh = (ph - eh) / stride[0] + 1;
    let ow = (pw - ew_) / stride[1] + 1;

    let dt = x.dtype();
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(&x4, cd)?;
    let wc = ew::contiguous(&ew::to_dtype(w, cd)?)?;
    let bc = bias.map(|b| ew::to_dtype(b, cd)).transpose()?;
    let out = Tensor::empty(&[n, o, oh, ow], cd, x.device())?;
    let p = Conv2dParams {
        stride: [stride[0], stride[1]],
        pad,
        dilation: [dilation[0], dilation[1]],
        groups,
    };
    backend(x.device()).conv2d(&xc, &wc, bc.as_ref(), &p, &out)?;
    let out = if cd != dt {
        ew::to_dtype(&out, dt)?
    } else {
        out
    };
    if unbatched {
        shape::squeeze(&out, Some(&[0]))
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
    let op = "max_pool2d";
    let (x4, unbatched) = pool_input(op, x)?;
    let (p, [oh, ow]) = pool_params(op, x, kernel, stride, padding, dilation, ceil_mode)?;
    let (n, c) = (x4.shape()[0], x4.shape()[1]);
    let dt = x.dtype();
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(&x4, cd)?;
    let out = Tensor::empty(&[n, c, oh, ow], cd, x.device())?;
    let idx = if return_indices {
        Some(Tensor::empty(&[n, c, oh, ow], DType::I64, x.device())?)
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
    Ok((fix(out)?, idx.map(fix).transpose()?))
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
    let op = "avg_pool2d";
    let (x4, unbatched) = pool_input(op, x)?;
    if divisor_override == Some(0) {
        return Err(Error::value(op, "divisor_override must be non-zero"));
    }
    let (p, [oh, ow]) = pool_params(op, x, kernel, stride, padding, &[1], ceil_mode)?;
    let (n, c) = (x4.shape()[0], x4.shape()[1]);
    let dt = x.dtype();
    let cd = compute_dtype(dt);
    let xc = ew::to_dtype(&x4, cd)?;
    let out = Tensor::empty(&[n, c, oh, ow], cd, x.device())?;
    backend(x.device()).avg_pool2d(&xc, &p, count_include_pad, divisor_override, &out)?;
    let out = ew::to_dtype(&out, dt)?;
    if unbatched {
        shape::squeeze(&out, Some(&[0]))
    } else {
        Ok(out)
    }
}

/// `adaptive_avg_pool2d`: mean over windows `[floor(i*H/oH), ceil((i+1)*H/oH))`;
/// `None` in `output_size` keeps the input's size.
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: [Option<usize>; 2]) -> Result<Tensor> {
    let op = "adaptive_avg_pool2d";
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
    let out = Tensor::empty(&[n, c, oh, ow], cd, x.device())?;
    backend(x.device()).adaptive_avg_pool2d(&xc, &out)?;
    let out = ew::to_dtype(&out, dt)?;
    if unbatched {
        shape::squeeze(&out, Some(&[0]))
    } else {
        Ok(out)
    }
}
