//! View ops: metadata-only reshapes of a tensor that share its storage, plus
//! `reshape`/`contiguous`, which copy only when a view is impossible.

use std::sync::Arc;

use crate::autograd::{self as ag, sum_to, Backward, GradMode};
use crate::error::{Error, Result};
use crate::ops::elementwise;
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::layout::{fmt_shape, infer_shape, norm_dim};
use crate::tensor::Tensor;

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("view", "shape", DTypes::ALL).views(0).grad(),
    OpInfo::prim("reshape", "shape", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("permute", "shape", DTypes::ALL)
        .views(0)
        .grad(),
    OpInfo::prim("transpose", "shape", DTypes::ALL)
        .views(0)
        .grad(),
    OpInfo::prim("squeeze", "shape", DTypes::ALL)
        .views(0)
        .grad(),
    OpInfo::prim("unsqueeze", "shape", DTypes::ALL)
        .views(0)
        .grad(),
    OpInfo::prim("expand", "shape", DTypes::ALL).views(0).grad(),
    OpInfo::prim("broadcast_to", "shape", DTypes::ALL)
        .views(0)
        .grad(),
    OpInfo::prim("flatten", "shape", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("narrow", "shape", DTypes::ALL).views(0).grad(),
    OpInfo::prim("select", "shape", DTypes::ALL).views(0).grad(),
    OpInfo::prim("slice", "shape", DTypes::ALL).views(0).grad(),
    OpInfo::prim("flip", "shape", DTypes::ALL).views(0).grad(),
    OpInfo::prim("contiguous", "shape", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("clone", "shape", DTypes::ALL).grad(),
    OpInfo::prim("as_strided", "shape", DTypes::ALL).views(0),
];

/// `view`: a reshape that must not copy.
pub fn view(x: &Tensor, spec: &[isize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::View {
            spec: spec.to_vec()
        },
        [x],
        one
    );
    let shape = infer_shape("view", spec, x.numel(), x.shape())?;
    match x.layout().reshape_view(&shape) {
        Some(l) => Ok(finish(x, x.with_layout(l), || reshape_bw(x))),
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
    capture!(
        crate::ops::call::OpCall::Reshape {
            spec: spec.to_vec()
        },
        [x],
        one
    );
    let shape = infer_shape("reshape", spec, x.numel(), x.shape())?;
    let out = match x.layout().reshape_view(&shape) {
        Some(l) => x.with_layout(l),
        None => {
            let c = {
                let _no = GradMode::set(false);
                elementwise::clone(x)?
            };
            c.with_layout(crate::tensor::Layout::contiguous(&shape))
        }
    };
    Ok(finish(x, out, || reshape_bw(x)))
}

pub fn permute(x: &Tensor, dims: &[isize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Permute {
            dims: dims.to_vec()
        },
        [x],
        one
    );
    let out = x.with_layout(x.layout().permute("permute", dims)?);
    Ok(finish(x, out, || {
        let n = x.ndim().max(1);
        let mut inv = vec![0isize; dims.len()];
        for (i, &d) in dims.iter().enumerate() {
            let d = if d < 0 { d + n as isize } else { d } as usize;
            inv[d] = i as isize;
        }
        PermuteBackward { inv }
    }))
}

pub fn transpose(x: &Tensor, d0: isize, d1: isize) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Transpose { d0, d1 }, [x], one);
    let out = x.with_layout(x.layout().transpose("transpose", d0, d1)?);
    Ok(finish(x, out, || TransposeBackward { d0, d1 }))
}

/// `.T`: reverse all dims (PyTorch deprecates it beyond 2-D; we reverse like NumPy).
pub fn t_all(x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::TAll, [x], one);
    let dims: Vec<isize> = (0..x.ndim() as isize).rev().collect();
    permute(x, &dims)
}

/// `.mT`: swap the last two dims.
pub fn mt(x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::MT, [x], one);
    if x.ndim() < 2 {
        return Err(Error::shape(
            "mT",
            format!("tensor.mT is only supported on matrices or batches of matrices; got a {}-D tensor of shape {:?}", x.ndim(), x.shape()),
        ));
    }
    transpose(x, -2, -1)
}

pub fn squeeze(x: &Tensor, dims: Option<&[isize]>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Squeeze {
            dims: dims.map(|d| d.to_vec())
        },
        [x],
        one
    );
    let out = x.with_layout(x.layout().squeeze("squeeze", dims)?);
    Ok(finish(x, out, || reshape_bw(x)))
}

pub fn unsqueeze(x: &Tensor, dim: isize) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Unsqueeze { dim }, [x], one);
    let out = x.with_layout(x.layout().unsqueeze("unsqueeze", dim)?);
    Ok(finish(x, out, || reshape_bw(x)))
}

/// `expand(*sizes)`: `-1` keeps a dim.
pub fn expand(x: &Tensor, spec: &[isize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Expand {
            spec: spec.to_vec()
        },
        [x],
        one
    );
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
    broadcast_to(x, &shape)
}

pub fn broadcast_to(x: &Tensor, shape: &[usize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::BroadcastTo {
            shape: shape.to_vec()
        },
        [x],
        one
    );
    let out = x.with_layout(x.layout().expand("broadcast_to", shape)?);
    Ok(finish(x, out, || ExpandBackward {
        in_shape: x.shape().into(),
    }))
}

pub fn flatten(x: &Tensor, start: isize, end: isize) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Flatten { start, end }, [x], one);
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
    capture!(
        crate::ops::call::OpCall::Narrow { dim, start, length },
        [x],
        one
    );
    let out = x.with_layout(x.layout().narrow("narrow", dim, start, length)?);
    Ok(finish(x, out, || {
        slice_bw(x, "NarrowBackward", move |t| narrow(t, dim, start, length))
    }))
}

pub fn select(x: &Tensor, dim: isize, index: isize) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Select { dim, index }, [x], one);
    if x.ndim() == 0 {
        return Err(Error::index("select", "invalid index of a 0-dim tensor"));
    }
    let d = norm_dim("select", dim, x.ndim())?;
    let out = x.with_layout(x.layout().select("select", d, index)?);
    Ok(finish(x, out, || {
        slice_bw(x, "SelectBackward", move |t| select(t, dim, index))
    }))
}

/// Python-style slice `start:stop:step` along `dim` (clamped like Python; `step > 0`).
pub fn slice(
    x: &Tensor,
    dim: isize,
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Slice {
            dim,
            start,
            stop,
            step
        },
        [x],
        one
    );
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
    let out = x.with_layout(x.layout().slice(d, s as usize, len as usize, step));
    Ok(finish(x, out, || {
        slice_bw(x, "SliceBackward", move |t| {
            slice(t, dim, start, stop, step)
        })
    }))
}

/// Reverse the given dims (a view with negative strides, as NumPy's `flip`).
pub fn flip(x: &Tensor, dims: &[isize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Flip {
            dims: dims.to_vec()
        },
        [x],
        one
    );
    let mut l = x.layout().clone();
    // A 0-d tensor takes dim 0 / -1 (as a 1-element vector would) and is
    // its own flip.
    let mut seen = vec![false; x.ndim().max(1)];
    for &d in dims {
        let d = norm_dim("flip", d, x.ndim())?;
        if seen[d] {
            return Err(Error::value(
                "flip",
                format!("dim {d} appears multiple times in the list of dims"),
            ));
        }
        seen[d] = true;
        if x.ndim() == 0 {
            continue;
        }
        if l.shape[d] > 0 {
            l.offset = (l.offset as isize + (l.shape[d] as isize - 1) * l.strides[d]) as usize;
        }
        l.strides[d] = -l.strides[d];
    }
    let out = x.with_layout(l);
    let dims = dims.to_vec();
    Ok(finish(x, out, || {
        slice_bw(x, "FlipBackward", move |t| flip(t, &dims))
    }))
}

/// `as_strided(size, stride, offset)`: a checked raw view.
pub fn as_strided(x: &Tensor, size: &[usize], stride: &[isize], offset: usize) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::AsStrided {
            size: size.to_vec(),
            stride: stride.to_vec(),
            offset
        },
        [x],
        one
    );
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
    if ag::needs_grad(&[x]) {
        return Err(Error::runtime(
            "as_strided",
            "as_strided on a tensor that requires grad is not differentiable; detach() it first",
        ));
    }
    Tensor::from_parts(x.storage().clone(), l, x.dtype())
}

// ---------------------------------------------------------------------------
// Gradients of the view ops
// ---------------------------------------------------------------------------

/// Record `bw` for the view `out` of `x` when `x` needs grad.
fn finish<B: Backward + 'static>(x: &Tensor, out: Tensor, bw: impl FnOnce() -> B) -> Tensor {
    if ag::needs_grad(&[x]) {
        ag::record(bw(), &[x], &[&out], &[]);
    }
    out
}

fn reshape_bw(x: &Tensor) -> ReshapeBackward {
    ReshapeBackward {
        in_shape: x.shape().iter().map(|&d| d as isize).collect(),
    }
}

struct ReshapeBackward {
    in_shape: Vec<isize>,
}
impl Backward for ReshapeBackward {
    fn name(&self) -> &'static str {
        "ViewBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g[0]
            .as_ref()
            .map(|g| reshape(g, &self.in_shape))
            .transpose()?])
    }
}

struct PermuteBackward {
    inv: Vec<isize>,
}
impl Backward for PermuteBackward {
    fn name(&self) -> &'static str {
        "PermuteBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g[0]
            .as_ref()
            .map(|g| permute(g, &self.inv))
            .transpose()?])
    }
}

struct TransposeBackward {
    d0: isize,
    d1: isize,
}
impl Backward for TransposeBackward {
    fn name(&self) -> &'static str {
        "TransposeBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g[0]
            .as_ref()
            .map(|g| transpose(g, self.d0, self.d1))
            .transpose()?])
    }
}

struct ExpandBackward {
    in_shape: crate::tensor::Shape,
}
impl Backward for ExpandBackward {
    fn name(&self) -> &'static str {
        "ExpandBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g[0]
            .as_ref()
            .map(|g| sum_to(g, &self.in_shape))
            .transpose()?])
    }
}

/// Re-applies a view op (same arguments) to another tensor of the input's shape.
pub type Replay = Arc<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;

/// Backward of views that select part of the input (slices, select, narrow,
/// flip, basic indexing): scatter the gradient into zeros of the input's shape.
pub struct SliceBackward {
    pub name: &'static str,
    pub in_shape: crate::tensor::Shape,
    pub replay: Replay,
}

/// A [`SliceBackward`] for the view `f` of `x`.
pub fn slice_bw(
    x: &Tensor,
    name: &'static str,
    f: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static,
) -> SliceBackward {
    SliceBackward {
        name,
        in_shape: x.shape().into(),
        replay: Arc::new(f),
    }
}

impl Backward for SliceBackward {
    fn name(&self) -> &'static str {
        self.name
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g[0]
            .as_ref()
            .map(|g| view_scatter(g, &self.in_shape, &self.replay))
            .transpose()?])
    }
}

/// Zeros of `shape` with `g` written into the region `replay` selects.
pub fn view_scatter(g: &Tensor, shape: &[usize], replay: &Replay) -> Result<Tensor> {
    let z = Tensor::zeros(shape, g.dtype(), g.device())?;
    {
        let _no = GradMode::set(false);
        let v = replay(&z)?;
        crate::ops::elementwise::copy_data(&v, g)?;
    }
    if ag::needs_grad(&[g]) {
        ag::record(
            ScatterBackward {
                replay: replay.clone(),
            },
            &[g],
            &[&z],
            &[],
        );
    }
    Ok(z)
}

/// Backward of [`view_scatter`]: take the same view of the gradient.
struct ScatterBackward {
    replay: Replay,
}
impl Backward for ScatterBackward {
    fn name(&self) -> &'static str {
        "SliceScatterBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g[0].as_ref().map(|g| (self.replay)(g)).transpose()?])
    }
}
