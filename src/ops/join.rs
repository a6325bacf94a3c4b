//! Joining and splitting: `cat`, `stack`, `split`, `chunk`, `unbind`,
//! `repeat`, `pad`, `roll`, and the triangle/diagonal ops.
//!
//! Splits are views. Joins allocate the output and fill it with the backend's
//! strided copy (`cast_copy`) into views of it, so they need no kernels of
//! their own; `tril`/`triu` use the `tri` primitive.

use crate::autograd::{self as ag, Backward, GradMode};
use crate::backend::backend;
use crate::error::{Error, Result};
use crate::ops::elementwise as ew;
use crate::ops::index::{index_select, rename};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape;
use crate::tensor::layout::{fmt_shape, norm_dim};
use crate::tensor::{DType, Layout, Scalar, Shape, Strides, Tensor};

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("cat", "join", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("stack", "join", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("split", "join", DTypes::ALL).views(0).grad(),
    OpInfo::prim("chunk", "join", DTypes::ALL).views(0).grad(),
    OpInfo::prim("unbind", "join", DTypes::ALL).views(0).grad(),
    OpInfo::prim("diagonal", "join", DTypes::ALL)
        .views(0)
        .grad(),
    OpInfo::prim("diag", "join", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("repeat", "join", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("roll", "join", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("pad", "join", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("tril", "join", DTypes::ALL).grad(),
    OpInfo::prim("triu", "join", DTypes::ALL).grad(),
];

/// Record `bw` for the single-input op `x -> out` when `x` needs grad.
fn record1<B: Backward + 'static>(x: &Tensor, out: &Tensor, bw: impl FnOnce() -> B) {
    if ag::needs_grad(&[x]) {
        ag::record(bw(), &[x], &[out], &[]);
    }
}

/// Copy `src` into `dst` (same shape; `dst` is a view of a tensor the op allocated).
fn copy_into(src: &Tensor, dst: &Tensor) -> Result<()> {
    if dst.numel() == 0 {
        return Ok(());
    }
    backend(dst.device()).cast_copy(src, dst)
}

fn shapes_list(ts: &[Tensor]) -> String {
    ts.iter()
        .map(|t| fmt_shape(t.shape()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `cat(tensors, dim)`: join along an existing dim. The result dtype promotes
/// over all inputs; 1-D tensors of size 0 are skipped (as torch does).
pub fn cat(ts: &[Tensor], dim: isize) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Cat { dim },
        [] + ts.iter().cloned(),
        one
    );
    let op = "cat";
    let Some(first) = ts.first() else {
        return Err(Error::value(op, "expected a non-empty list of tensors"));
    };
    let dtype = ts
        .iter()
        .skip(1)
        .fold(first.dtype(), |d, t| DType::promote(d, t.dtype()));
    for (i, t) in ts.iter().enumerate() {
        if t.device() != first.device() {
            return Err(Error::runtime(
                op,
                format!(
                    "expected all tensors to be on the same device, but found {} and {} (tensor {i})",
                    first.device(),
                    t.device()
                ),
            ));
        }
        if t.ndim() == 0 {
            return Err(Error::shape(
                op,
                format!("zero-dimensional tensor (at position {i}) cannot be concatenated"),
            ));
        }
    }
    let used: Vec<(usize, &Tensor)> = ts
        .iter()
        .enumerate()
        .filter(|(_, t)| !(t.ndim() == 1 && t.shape()[0] == 0))
        .collect();
    let Some(&(i0, r)) = used.first() else {
        let out = Tensor::empty_for(op, &[0], dtype, first.device())?;
        record_cat(ts, 0, &out);
        return Ok(out);
    };
    let d = norm_dim(op, dim, r.ndim())?;
    let mut total = 0usize;
    for &(i, t) in &used {
        if t.ndim() != r.ndim() {
            return Err(Error::shape(
                op,
                format!(
                    "tensors must have the same number of dimensions: got {} (tensor {i0}) and {} (tensor {i}); shapes {}",
                    r.ndim(),
                    t.ndim(),
                    shapes_list(ts)
                ),
            ));
        }
        for k in 0..r.ndim() {
            if k != d && t.shape()[k] != r.shape()[k] {
                return Err(Error::shape(
                    op,
                    format!(
                        "sizes of tensors must match except in dimension {d}: expected size {} but got size {} for tensor number {i} in the list (shapes {})",
                        r.shape()[k],
                        t.shape()[k],
                        shapes_list(ts)
                    ),
                ));
            }
        }
        total += t.shape()[d];
    }
    let mut oshape = r.shape().to_vec();
    oshape[d] = total;
    let out = Tensor::empty_for("cat", &oshape, dtype, r.device())?;
    let mut off = 0usize;
    for &(_, t) in &used {
        let n = t.shape()[d];
        let dst = out.with_layout(out.layout().slice(d, off, n, 1));
        copy_into(t, &dst)?;
        off += n;
    }
    record_cat(ts, d, &out);
    Ok(out)
}

fn skipped(t: &Tensor) -> bool {
    t.ndim() == 1 && t.shape()[0] == 0
}

fn record_cat(ts: &[Tensor], d: usize, out: &Tensor) {
    let refs: Vec<&Tensor> = ts.iter().collect();
    if !(out.dtype().is_floating_point() && ag::needs_grad(&refs)) {
        return;
    }
    let mut off = 0usize;
    let parts = ts
        .iter()
        .map(|t| {
            let start = if skipped(t) {
                None
            } else {
                off += t.shape()[d];
                Some(off - t.shape()[d])
            };
            (start, Shape::from_slice(t.shape()), t.dtype())
        })
        .collect();
    ag::record(CatBackward { d, parts }, &refs, &[out], &[]);
}

/// Backward of `cat`: each input gets its slice of the gradient (converted
/// back to its dtype); skipped empty 1-D inputs get empty gradients.
struct CatBackward {
    d: usize,
    /// Per input: its start along `d` (None when skipped), shape and dtype.
    parts: Vec<(Option<usize>, Shape, DType)>,
}

impl Backward for CatBackward {
    fn name(&self) -> &'static str {
        "CatBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None; self.parts.len()]);
        };
        self.parts
            .iter()
            .zip(needs)
            .map(|((start, shp, dt), &need)| {
                if !need || !dt.is_floating_point() {
                    return Ok(None);
                }
                let gi = match start {
                    None => Tensor::zeros(shp, *dt, g.device())?,
                    Some(s) => shape::narrow(g, self.d as isize, *s as isize, shp[self.d])?,
                };
                Ok(Some(ew::to_dtype(&gi, *dt)?))
            })
            .collect()
    }
}

/// `stack(tensors, dim)`: join along a new dim; all shapes must be equal.
pub fn stack(ts: &[Tensor], dim: isize) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Stack { dim },
        [] + ts.iter().cloned(),
        one
    );
    let op = "stack";
    let Some(first) = ts.first() else {
        return Err(Error::value(op, "expected a non-empty list of tensors"));
    };
    for (i, t) in ts.iter().enumerate() {
        if t.shape() != first.shape() {
            return Err(Error::shape(
                op,
                format!(
                    "stack expects each tensor to be equal size, but got {} at entry 0 and {} at entry {i}",
                    fmt_shape(first.shape()),
                    fmt_shape(t.shape())
                ),
            ));
        }
    }
    let d = norm_dim(op, dim, first.ndim() + 1)?;
    let us: Vec<Tensor> = ts
        .iter()
        .map(|t| shape::unsqueeze(t, d as isize))
        .collect::<Result<_>>()?;
    cat(&us, d as isize).map_err(|e| rename(e, op))
}

/// The second argument of `split`.
#[derive(Clone, Debug)]
pub enum SplitArg {
    /// Pieces of this size (the last may be smaller).
    Size(isize),
    /// Pieces of exactly these sizes (must add up to the dim's size).
    Sections(Vec<isize>),
}

/// `split(x, split_size_or_sections, dim)`: views along `dim`.
pub fn split(x: &Tensor, arg: &SplitArg, dim: isize) -> Result<Vec<Tensor>> {
    capture!(
        crate::ops::call::OpCall::Split {
            sizes: crate::ops::call::SplitSpec::of(arg),
            dim
        },
        [x],
        all
    );
    let op = "split";
    if x.ndim() == 0 {
        return Err(Error::shape(op, "cannot split a 0-d tensor"));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    let n = x.shape()[d];
    let sizes: Vec<usize> = match arg {
        SplitArg::Size(s) => {
            if *s < 0 {
                return Err(Error::value(
                    op,
                    format!("split_size must be non-negative, got {s}"),
                ));
            }
            let s = *s as usize;
            if s == 0 {
                if n != 0 {
                    return Err(Error::value(
                        op,
                        format!(
                            "split_size can only be 0 if dimension size is 0, but got dimension size of {n} (shape {})",
                            fmt_shape(x.shape())
                        ),
                    ));
                }
                vec![0]
            } else {
                let k = n.div_ceil(s).max(1);
                (0..k).map(|i| s.min(n - (i * s).min(n))).collect()
            }
        }
        SplitArg::Sections(v) => {
            if v.iter().any(|&s| s < 0) || v.iter().sum::<isize>() != n as isize {
                return Err(Error::value(
                    op,
                    format!(
                        "split sizes {v:?} must be non-negative and sum exactly to the size {n} of dimension {d} (shape {})",
                        fmt_shape(x.shape())
                    ),
                ));
            }
            v.iter().map(|&s| s as usize).collect()
        }
    };
    let mut off = 0;
    let mut out = Vec::with_capacity(sizes.len());
    for &s in &sizes {
        out.push(x.with_layout(x.layout().slice(d, off, s, 1)));
        off += s;
    }
    if ag::needs_grad(&[x]) {
        let refs: Vec<&Tensor> = out.iter().collect();
        let bw = PiecesBackward {
            name: "SplitBackward",
            d,
            in_shape: x.shape().into(),
            sizes: Some(sizes),
        };
        ag::record(bw, &[x], &refs, &[]);
    }
    Ok(out)
}

/// Backward of `split`/`chunk` (pieces of `sizes` along `d`, joined with
/// `cat`) and `unbind` (`sizes: None`: slices joined with `stack`). Pieces
/// that received no gradient count as zeros.
struct PiecesBackward {
    name: &'static str,
    d: usize,
    in_shape: Shape,
    sizes: Option<Vec<usize>>,
}

impl Backward for PiecesBackward {
    fn name(&self) -> &'static str {
        self.name
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(any) = grads.iter().flatten().next() else {
            return Ok(vec![None]);
        };
        let (dt, dev) = (any.dtype(), any.device());
        let mut pieces = Vec::with_capacity(grads.len());
        for (i, g) in grads.iter().enumerate() {
            pieces.push(match g {
                Some(g) => g.clone(),
                None => {
                    let mut s = self.in_shape.to_vec();
                    match &self.sizes {
                        Some(sizes) => s[self.d] = sizes[i],
                        None => {
                            s.remove(self.d);
                        }
                    }
                    Tensor::zeros(&s, dt, dev)?
                }
            });
        }
        let gx = match &self.sizes {
            Some(_) => cat(&pieces, self.d as isize)?,
            None => stack(&pieces, self.d as isize)?,
        };
        Ok(vec![Some(gx)])
    }
}

/// `chunk(x, chunks, dim)`: at most `chunks` views of size `ceil(n / chunks)`.
pub fn chunk(x: &Tensor, chunks: isize, dim: isize) -> Result<Vec<Tensor>> {
    capture!(crate::ops::call::OpCall::Chunk { chunks, dim }, [x], all);
    let op = "chunk";
    if chunks <= 0 {
        return Err(Error::value(
            op,
            format!("chunk expects `chunks` to be greater than 0, got {chunks}"),
        ));
    }
    if x.ndim() == 0 {
        return Err(Error::shape(
            op,
            "chunk expects at least a 1-dimensional tensor",
        ));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    let n = x.shape()[d];
    let size = n.div_ceil(chunks as usize);
    let arg = if n == 0 {
        SplitArg::Sections(vec![0; chunks as usize])
    } else {
        SplitArg::Size(size as isize)
    };
    split(x, &arg, d as isize).map_err(|e| rename(e, op))
}

/// `unbind(x, dim)`: the slices along `dim`, as views with that dim removed.
pub fn unbind(x: &Tensor, dim: isize) -> Result<Vec<Tensor>> {
    capture!(crate::ops::call::OpCall::Unbind { dim }, [x], all);
    let op = "unbind";
    if x.ndim() == 0 {
        return Err(Error::shape(
            op,
            "dimension specified as 0 but tensor has no dimensions",
        ));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    let out: Vec<Tensor> = (0..x.shape()[d])
        .map(|i| Ok(x.with_layout(x.layout().select(op, d, i as isize)?)))
        .collect::<Result<_>>()?;
    if ag::needs_grad(&[x]) && !out.is_empty() {
        let refs: Vec<&Tensor> = out.iter().collect();
        let bw = PiecesBackward {
            name: "UnbindBackward",
            d,
            in_shape: x.shape().into(),
            sizes: None,
        };
        ag::record(bw, &[x], &refs, &[]);
    }
    Ok(out)
}

/// `diagonal(x, offset, dim1, dim2)`: a view of the diagonal of the planes
/// `(dim1, dim2)`, moved to the last dim. `offset > 0` is above the main diagonal.
pub fn diagonal(x: &Tensor, offset: isize, dim1: isize, dim2: isize) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Diagonal { offset, dim1, dim2 },
        [x],
        one
    );
    let op = "diagonal";
    if x.ndim() < 2 {
        return Err(Error::shape(
            op,
            format!(
                "diagonal requires a tensor with at least 2 dimensions, got shape {}",
                fmt_shape(x.shape())
            ),
        ));
    }
    let d1 = norm_dim(op, dim1, x.ndim())?;
    let d2 = norm_dim(op, dim2, x.ndim())?;
    if d1 == d2 {
        return Err(Error::value(
            op,
            format!("diagonal dimensions cannot be identical {dim1}, {dim2}"),
        ));
    }
    let l = x.layout();
    let (n1, n2) = (l.shape[d1] as isize, l.shape[d2] as isize);
    let len = if offset >= 0 {
        n1.min(n2 - offset)
    } else {
        (n1 + offset).min(n2)
    }
    .max(0) as usize;
    let mut new = Layout {
        shape: Shape::new(),
        strides: Strides::new(),
        offset: l.offset,
    };
    if len > 0 {
        let shift = if offset >= 0 {
            offset * l.strides[d2]
        } else {
            -offset * l.strides[d1]
        };
        new.offset = (l.offset as isize + shift) as usize;
    }
    for k in 0..x.ndim() {
        if k != d1 && k != d2 {
            new.shape.push(l.shape[k]);
            new.strides.push(l.strides[k]);
        }
    }
    new.shape.push(len);
    new.strides.push(l.strides[d1] + l.strides[d2]);
    let out = x.with_layout(new);
    record1(x, &out, || {
        shape::slice_bw(x, "DiagonalBackward", move |t| {
            diagonal(t, offset, dim1, dim2)
        })
    });
    Ok(out)
}

/// `diag(x, diagonal)`: a 1-D tensor becomes a square matrix with it on the
/// given diagonal; a 2-D tensor gives a copy of that diagonal.
pub fn diag(x: &Tensor, k: isize) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Diag { k }, [x], one);
    let op = "diag";
    match x.ndim() {
        1 => {
            let n = x.shape()[0] + k.unsigned_abs();
            let out = Tensor::zeros(&[n, n], x.dtype(), x.device())?;
            {
                let _no = GradMode::set(false);
                let dv = diagonal(&out, k, 0, 1)?;
                copy_into(x, &dv)?;
            }
            record1(x, &out, || DiagBackward { k });
            Ok(out)
        }
        // A copy of the diagonal view (both recorded).
        2 => ew::clone(&diagonal(x, k, 0, 1)?),
        _ => Err(Error::shape(
            op,
            format!(
                "expected a 1-D or 2-D tensor, got shape {}",
                fmt_shape(x.shape())
            ),
        )),
    }
}

/// Backward of `diag` of a vector: the diagonal of the gradient.
struct DiagBackward {
    k: isize,
}

impl Backward for DiagBackward {
    fn name(&self) -> &'static str {
        "DiagEmbedBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| diagonal(g, self.k, 0, 1))
            .transpose()?])
    }
}

/// `repeat(*sizes)`: tile `x` `sizes[i]` times along each dim (leading new dims allowed).
pub fn repeat(x: &Tensor, sizes: &[isize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Repeat {
            sizes: sizes.to_vec()
        },
        [x],
        one
    );
    let op = "repeat";
    if sizes.len() < x.ndim() {
        return Err(Error::shape(
            op,
            format!(
                "number of dimensions of repeat dims ({}) can not be smaller than number of dimensions of tensor ({}, shape {})",
                sizes.len(),
                x.ndim(),
                fmt_shape(x.shape())
            ),
        ));
    }
    if let Some(&s) = sizes.iter().find(|&&s| s < 0) {
        return Err(Error::value(
            op,
            format!("repeats can not be negative, got {s} in {sizes:?}"),
        ));
    }
    let lead = sizes.len() - x.ndim();
    // A composite of recorded view ops: interleave (repeat, size) pairs as
    // [1, s0, 1, s1, ...], expand to [r0, s0, r1, s1, ...] (stride 0 on the
    // repeats), and reshape (one copy) to [r0 * s0, r1 * s1, ...]. The gradient
    // sums over the repeats.
    let mut inter = Vec::with_capacity(2 * sizes.len());
    let mut big = Vec::with_capacity(2 * sizes.len());
    let mut fin = Vec::with_capacity(sizes.len());
    for (i, &r) in sizes.iter().enumerate() {
        let s = if i < lead { 1 } else { x.shape()[i - lead] };
        inter.extend([1, s as isize]);
        big.extend([r as usize, s]);
        fin.push(r * s as isize);
    }
    let xr = shape::reshape(x, &inter)?;
    let out = shape::reshape(&shape::broadcast_to(&xr, &big)?, &fin)?;
    if out.shares_storage(x) {
        return ew::clone(&out);
    }
    Ok(out)
}

/// `roll(x, shifts, dims)`: rotate elements along dims; with no dims, over the flattened tensor.
pub fn roll(x: &Tensor, shifts: &[isize], dims: &[isize]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Roll {
            shifts: shifts.to_vec(),
            dims: dims.to_vec()
        },
        [x],
        one
    );
    let op = "roll";
    if dims.is_empty() {
        if shifts.len() != 1 {
            return Err(Error::value(
                op,
                format!("without dims, shifts must be a single int, got {shifts:?}"),
            ));
        }
        let flat = shape::reshape(x, &[-1])?;
        let r = roll(&flat, shifts, &[0])?;
        let spec: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
        return shape::reshape(&r, &spec);
    }
    if shifts.len() != dims.len() {
        return Err(Error::value(
            op,
            format!(
                "shifts and dims must have the same length, got shifts {shifts:?} and dims {dims:?}"
            ),
        ));
    }
    let mut y = x.clone();
    for (&s, &dim) in shifts.iter().zip(dims) {
        let d = norm_dim(op, dim, x.ndim())?;
        let n = y.shape()[d] as isize;
        if n == 0 {
            continue;
        }
        let s = s.rem_euclid(n);
        if s == 0 {
            continue;
        }
        let tail = shape::narrow(&y, d as isize, n - s, s as usize)?;
        let head = shape::narrow(&y, d as isize, 0, (n - s) as usize)?;
        y = cat(&[tail, head], d as isize)?;
    }
    if y.shares_storage(x) {
        y = ew::clone(&y)?;
    }
    Ok(y)
}

/// Padding modes of [`pad`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PadMode {
    Constant,
    Reflect,
    Replicate,
    Circular,
}

impl PadMode {
    pub fn parse(s: &str) -> Result<PadMode> {
        Ok(match s {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "replicate" => PadMode::Replicate,
            "circular" => PadMode::Circular,
            _ => {
                return Err(Error::value(
                    "pad",
                    format!(
                        "unknown padding mode {s:?}; expected 'constant', 'reflect', 'replicate' or 'circular'"
                    ),
                ))
            }
        })
    }
}

/// `pad(x, pad, mode, value)` with torch's pad order: `(left, right)` of the
/// last dim first, then of the one before, ...; negative amounts crop.
pub fn pad(x: &Tensor, pads: &[isize], mode: PadMode, value: Scalar) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Pad {
            pads: pads.to_vec(),
            mode,
            value
        },
        [x],
        one
    );
    let op = "pad";
    if !pads.len().is_multiple_of(2) || pads.len() / 2 > x.ndim() {
        return Err(Error::value(
            op,
            format!(
                "padding length must be even and at most twice the number of dims; got {} values {pads:?} for shape {}",
                pads.len(),
                fmt_shape(x.shape())
            ),
        ));
    }
    let nd = x.ndim();
    // (dim, before, after)
    let per_dim: Vec<(usize, isize, isize)> = (0..pads.len() / 2)
        .map(|i| (nd - 1 - i, pads[2 * i], pads[2 * i + 1]))
        .collect();
    let mut oshape = x.shape().to_vec();
    for &(d, a, b) in &per_dim {
        let n = x.shape()[d] as isize + a + b;
        if n < 0 {
            return Err(Error::value(
                op,
                format!(
                    "the input size {} plus padding {a} and {b} of dimension {d} is negative (shape {}, pad {pads:?})",
                    x.shape()[d],
                    fmt_shape(x.shape())
                ),
            ));
        }
        oshape[d] = n as usize;
    }
    // Crop negative amounts first (recorded views).
    let crop = |t: &Tensor| -> Result<Tensor> {
        let mut src = t.clone();
        for &(d, a, b) in &per_dim {
            let n = src.shape()[d] as isize;
            let lo = (-a).max(0).min(n);
            let hi = (n - (-b).max(0)).max(lo);
            src = shape::narrow(&src, d as isize, lo, (hi - lo) as usize)?;
        }
        Ok(src)
    };
    if mode == PadMode::Constant {
        let src = {
            let _no = GradMode::set(false);
            crop(x)?
        };
        if matches!(value, Scalar::Float(_)) && !x.dtype().is_floating_point() {
            return Err(Error::dtype(
                op,
                format!(
                    "pad value {value:?} cannot be stored in a {} tensor",
                    x.dtype()
                ),
            ));
        }
        let out = Tensor::empty_for("pad", &oshape, x.dtype(), x.device())?;
        if out.numel() > 0 {
            backend(x.device()).fill(&out, value)?;
        }
        let mut l = out.layout().clone();
        for &(d, a, _) in &per_dim {
            l = l.slice(d, a.max(0) as usize, src.shape()[d], 1);
        }
        copy_into(&src, &out.with_layout(l))?;
        record1(x, &out, || PadBackward {
            pads: pads.to_vec(),
        });
        return Ok(out);
    }
    // Other modes: gather along each padded dim with an index pattern (a
    // composite of recorded ops: the gradient adds up over the copies).
    let mut y = crop(x)?;
    for &(d, a, b) in &per_dim {
        let (a, b) = (a.max(0), b.max(0));
        if a == 0 && b == 0 {
            continue;
        }
        let n = y.shape()[d] as isize;
        let limit_ok = match mode {
            PadMode::Reflect => a < n && b < n,
            PadMode::Replicate => n > 0,
            PadMode::Circular => a <= n && b <= n && n > 0,
            PadMode::Constant => true,
        };
        if !limit_ok {
            return Err(Error::value(
                op,
                format!(
                    "padding ({a}, {b}) of dimension {d} is too large for mode {mode:?} and size {n} (shape {})",
                    fmt_shape(x.shape())
                ),
            ));
        }
        let idx: Vec<i64> = (-a..n + b)
            .map(|i| {
                (match mode {
                    PadMode::Reflect => {
                        if i < 0 {
                            -i
                        } else if i >= n {
                            2 * (n - 1) - i
                        } else {
                            i
                        }
                    }
                    PadMode::Replicate => i.clamp(0, n - 1),
                    _ => i.rem_euclid(n),
                }) as i64
            })
            .collect();
        let len = idx.len();
        let it = Tensor::from_vec_on(idx, &[len], x.device())?;
        y = index_select(&y, d as isize, &it).map_err(|e| rename(e, op))?;
    }
    if y.shares_storage(x) {
        y = ew::clone(&y)?;
    }
    Ok(y)
}

/// Backward of constant padding: padding the gradient by the negated amounts
/// crops the padded border and puts zeros where the input was cropped.
struct PadBackward {
    pads: Vec<isize>,
}

impl Backward for PadBackward {
    fn name(&self) -> &'static str {
        "ConstantPadBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let neg: Vec<isize> = self.pads.iter().map(|&p| -p).collect();
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| pad(g, &neg, PadMode::Constant, Scalar::Int(0)))
            .transpose()?])
    }
}

fn tri(op: &'static str, x: &Tensor, k: i64, upper: bool) -> Result<Tensor> {
    if x.ndim() < 2 {
        return Err(Error::shape(
            op,
            format!(
                "input tensor must have at least 2 dimensions, got shape {}",
                fmt_shape(x.shape())
            ),
        ));
    }
    let out = Tensor::empty_for(op, x.shape(), x.dtype(), x.device())?;
    if out.numel() > 0 {
        backend(x.device()).tri(x, &out, k, upper)?;
    }
    record1(x, &out, || TriBackward { k, upper });
    Ok(out)
}

/// Backward of `tril`/`triu`: the same triangle of the gradient.
struct TriBackward {
    k: i64,
    upper: bool,
}

impl Backward for TriBackward {
    fn name(&self) -> &'static str {
        if self.upper {
            "TriuBackward"
        } else {
            "TrilBackward"
        }
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| {
                if self.upper {
                    triu(g, self.k)
                } else {
                    tril(g, self.k)
                }
            })
            .transpose()?])
    }
}

/// `tril(x, diagonal)`: the lower triangle of the last two dims (`j - i <= diagonal`), zeros elsewhere.
pub fn tril(x: &Tensor, diagonal: i64) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Tril { k: diagonal }, [x], one);
    tri("tril", x, diagonal, false)
}

/// `triu(x, diagonal)`: the upper triangle of the last two dims (`j - i >= diagonal`), zeros elsewhere.
pub fn triu(x: &Tensor, diagonal: i64) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Triu { k: diagonal }, [x], one);
    tri("triu", x, diagonal, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cat_promotes_and_skips_empty_1d() {
        let a = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).unwrap();
        let b = Tensor::from_vec(vec![0.5f32, 1.5], &[1, 2]).unwrap();
        let e = Tensor::from_vec(Vec::<f64>::new(), &[0]).unwrap();
        let c = cat(&[a, e, b], 0).unwrap();
        assert_eq!(c.dtype(), DType::F64);
        assert_eq!(c.shape(), &[3, 2]);
        assert_eq!(c.to_f64_vec(), vec![1., 2., 3., 4., 0.5, 1.5]);
    }

    #[test]
    fn split_sizes_and_repeat() {
        let x = Tensor::from_vec((0..10i64).collect::<Vec<_>>(), &[10]).unwrap();
        let parts = split(&x, &SplitArg::Size(4), 0).unwrap();
        let sizes: Vec<usize> = parts.iter().map(|p| p.shape()[0]).collect();
        assert_eq!(sizes, vec![4, 4, 2]);
        assert_eq!(chunk(&x, 3, 0).unwrap().len(), 3);
        let r = repeat(&parts[2], &[2, 2]).unwrap();
        assert_eq!(r.shape(), &[2, 4]);
        assert_eq!(r.to_f64_vec(), vec![8., 9., 8., 9., 8., 9., 8., 9.]);
    }
}
