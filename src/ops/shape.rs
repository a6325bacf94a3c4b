//! View ops: metadata-only reshapes of a tensor that share its storage, plus
//! `reshape`/`contiguous`, which copy only when a view is impossible.

use crate::error::{Error, Result};
use crate::ops::elementwise;
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::layout::{fmt_shape, infer_shape, norm_dim};
use crate::tensor::Tensor;

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("view", "shape", DTypes::ALL).views(0),
    OpInfo::prim("reshape", "shape", DTypes::ALL).kind(OpKind::Composite),
    OpInfo::prim("permute", "shape", DTypes::ALL).views(0),
    OpInfo::prim("transpose", "shape", DTypes::ALL).views(0),
    OpInfo::prim("squeeze", "shape", DTypes::ALL).views(0),
    OpInfo::prim("unsqueeze", "shape", DTypes::ALL).views(0),
    OpInfo::prim("expand", "shape", DTypes::ALL).views(0),
    OpInfo::prim("broadcast_to", "shape", DTypes::ALL).views(0),
    OpInfo::prim("flatten", "shape", DTypes::ALL).kind(OpKind::Composite),
    OpInfo::prim("narrow", "shape", DTypes::ALL).views(0),
    OpInfo::prim("select", "shape", DTypes::ALL).views(0),
    OpInfo::prim("slice", "shape", DTypes::ALL).views(0),
    OpInfo::prim("flip", "shape", DTypes::ALL).views(0),
    OpInfo::prim("contiguous", "shape", DTypes::ALL).kind(OpKind::Composite),
    OpInfo::prim("clone", "shape", DTypes::ALL),
    OpInfo::prim("as_strided", "shape", DTypes::ALL).views(0),
];

/// `view`: a reshape that must not copy.
pub fn view(x: &Tensor, spec: &[isize]) -> Result<Tensor> {
    let shape = infer_shape("view", spec, x.numel(), x.shape())?;
    match x.layout().reshape_view(&shape) {
        Some(l) => Ok(x.with_layout(l)),
        None => Err(Error::runtime(
            "view",
            format!(
                "view size {} is not compatible with input tensor's size and stride (shape {}, strides {:?}); use .reshape(...) instead",
                fmt_shape(&shape),
                fmt_shape(x.shape()),
                x.strides()
            ),
        )),
    }
}

/// `reshape`: a view when possible, else a copy.
pub fn reshape(x: &Tensor, spec: &[isize]) -> Result<Tensor> {
    let shape = infer_shape("reshape", spec, x.numel(), x.shape())?;
    match x.layout().reshape_view(&shape) {
        Some(l) => Ok(x.with_layout(l)),
        None => {
            let c = elementwise::clone(x)?;
            Ok(c.with_layout(crate::tensor::Layout::contiguous(&shape)))
        }
    }
}

pub fn permute(x: &Tensor, dims: &[isize]) -> Result<Tensor> {
    Ok(x.with_layout(x.layout().permute("permute", dims)?))
}

pub fn transpose(x: &Tensor, d0: isize, d1: isize) -> Result<Tensor> {
    Ok(x.with_layout(x.layout().transpose("transpose", d0, d1)?))
}

/// `.T`: reverse all dims (PyTorch deprecates it beyond 2-D; we reverse like NumPy).
pub fn t_all(x: &Tensor) -> Result<Tensor> {
    let dims: Vec<isize> = (0..x.ndim() as isize).rev().collect();
    permute(x, &dims)
}

/// `.mT`: swap the last two dims.
pub fn mt(x: &Tensor) -> Result<Tensor> {
    if x.ndim() < 2 {
        return Err(Error::shape(
            "mT",
            format!("tensor.mT is only supported on matrices or batches of matrices; got a {}-D tensor of shape {:?}", x.ndim(), x.shape()),
        ));
    }
    transpose(x, -2, -1)
}

pub fn squeeze(x: &Tensor, dims: Option<&[isize]>) -> Result<Tensor> {
    Ok(x.with_layout(x.layout().squeeze("squeeze", dims)?))
}

pub fn unsqueeze(x: &Tensor, dim: isize) -> Result<Tensor> {
    Ok(x.with_layout(x.layout().unsqueeze("unsqueeze", dim)?))
}

/// `expand(*sizes)`: `-1` keeps a dim.
pub fn expand(x: &Tensor, spec: &[isize]) -> Result<Tensor> {
    let n = spec.len();
    if n < x.ndim() {
        return Err(Error::shape(
            "expand",
            format!(
                "the number of sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({}) of shape {:?}",
                x.ndim(),
                x.shape()
            ),
        ));
    }
    let lead = n - x.ndim();
    let mut shape = Vec::with_capacity(n);
    for (i, &d) in spec.iter().enumerate() {
        if d == -1 {
            if i < lead {
                return Err(Error::value(
                    "expand",
                    "-1 is not allowed in a leading, non-existing dimension",
                ));
            }
            shape.push(x.shape()[i - lead]);
        } else if d < 0 {
            return Err(Error::value("expand", format!("invalid size {d}")));
        } else {
            shape.push(d as usize);
        }
    }
    Ok(x.with_layout(x.layout().expand("expand", &shape)?))
}

pub fn broadcast_to(x: &Tensor, shape: &[usize]) -> Result<Tensor> {
    Ok(x.with_layout(x.layout().expand("broadcast_to", shape)?))
}

pub fn flatten(x: &Tensor, start: isize, end: isize) -> Result<Tensor> {
    if x.ndim() == 0 {
        return reshape(x, &[1]);
    }
    let s = norm_dim("flatten", start, x.ndim())?;
    let e = norm_dim("flatten", end, x.ndim())?;
    if s > e {
        return Err(Error::value(
            "flatten",
            format!("start_dim ({start}) cannot come after end_dim ({end})"),
        ));
    }
    let mut spec: Vec<isize> = x.shape()[..s].iter().map(|&d| d as isize).collect();
    spec.push(x.shape()[s..=e].iter().product::<usize>() as isize);
    spec.extend(x.shape()[e + 1..].iter().map(|&d| d as isize));
    reshape(x, &spec)
}

pub fn narrow(x: &Tensor, dim: isize, start: isize, length: usize) -> Result<Tensor> {
    Ok(x.with_layout(x.layout().narrow("narrow", dim, start, length)?))
}

pub fn select(x: &Tensor, dim: isize, index: isize) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Err(Error::index("select", "invalid index of a 0-dim tensor"));
    }
    let d = norm_dim("select", dim, x.ndim())?;
    Ok(x.with_layout(x.layout().select("select", d, index)?))
}

/// Python-style slice `start:stop:step` along `dim` (clamped like Python; `step > 0`).
pub fn slice(
    x: &Tensor,
    dim: isize,
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
) -> Result<Tensor> {
    if step <= 0 {
        return Err(Error::value(
            "slice",
            format!("slice step must be positive, got {step} (use flip for reversal)"),
        ));
    }
    let d = norm_dim("slice", dim, x.ndim())?;
    let n = x.shape()[d] as isize;
    let clamp = |v: isize| -> isize {
        let v = if v < 0 { v + n } else { v };
        v.clamp(0, n)
    };
    let s = start.map_or(0, clamp);
    let e = stop.map_or(n, clamp);
    let len = if e > s {
        ((e - s) + step - 1) / step
    } else {
        0
    };
    Ok(x.with_layout(x.layout().slice(d, s as usize, len as usize, step)))
}

/// Reverse the given dims (a view with negative strides, as NumPy's `flip`).
pub fn flip(x: &Tensor, dims: &[isize]) -> Result<Tensor> {
    let mut l = x.layout().clone();
    let mut seen = vec![false; x.ndim()];
    for &d in dims {
        let d = norm_dim("flip", d, x.ndim())?;
        if seen[d] {
            return Err(Error::value(
                "flip",
                format!("dim {d} appears multiple times in the list of dims"),
            ));
        }
        seen[d] = true;
        if l.shape[d] > 0 {
            l.offset = (l.offset as isize + (l.shape[d] as isize - 1) * l.strides[d]) as usize;
        }
        l.strides[d] = -l.strides[d];
    }
    Ok(x.with_layout(l))
}

/// `as_strided(size, stride, offset)`: a checked raw view.
pub fn as_strided(x: &Tensor, size: &[usize], stride: &[isize], offset: usize) -> Result<Tensor> {
    if size.len() != stride.len() {
        return Err(Error::shape(
            "as_strided",
            format!("mismatch in length of size {size:?} and stride {stride:?}"),
        ));
    }
    let l = crate::tensor::Layout {
        shape: size.into(),
        strides: stride.into(),
        offset,
    };
    Tensor::from_parts(x.storage().clone(), l, x.dtype())
}
