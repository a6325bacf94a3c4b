//! Reductions: `sum`, `mean`, `prod`, `amax`/`amin`, `max`/`min` (with
//! indices), `argmax`/`argmin`, `var`/`std`, `logsumexp`, `all`/`any`,
//! `softmax`/`log_softmax` and the scans `cumsum`/`cumprod`.
//!
//! Shape rule: `dim` is one dim, a list of dims, or `None` (all dims; an
//! empty list also means all dims, as in PyTorch). Reduced dims are removed,
//! or kept with size 1 when `keepdim`. Dtype rule (PyTorch): `sum`/`prod` of
//! bool or integers give int64; `mean`/`var`/`std` need a floating dtype;
//! `max`/`min`/`amax`/`amin` keep the dtype; `all`/`any` give bool;
//! `logsumexp` of integers computes in float32. Half-precision inputs
//! accumulate in float32, float64 in float64, integers in int64.
//!
//! Kernels: the backend's `reduce`, `arg_reduce`, `softmax` and `cumulative`
//! primitives.
//!
//! Gradients (end of the file) are written with recorded ops, so they
//! differentiate again. Tie rules follow PyTorch: `amax`/`amin` and
//! `max()`/`min()` without a dim split the gradient evenly among the tied
//! extrema (in a slice holding NaN, among its NaNs); `max(dim)`/`min(dim)`
//! send it to the element whose index they return. `prod` and `cumprod`
//! handle zeros without dividing by them (first derivatives exact; second
//! derivatives exact with at most one zero per reduced slice).

use crate::autograd::{self as ag, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
pub use crate::kernel::params::{ArgOp, CumOp, ReduceOp};
use crate::ops::elementwise::{self, BinaryOp, UnaryOp};
use crate::ops::elementwise_grad::{div, for_vjp, mul, muls, sub};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::layout::{fmt_shape, norm_dim};
use crate::tensor::{DType, Layout, Scalar, Shape, Tensor};

/// Registry entries for this family.
pub const OPS: &[OpInfo] = &[
    OpInfo::prim("sum", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("mean", "reduce", DTypes::FLOAT).grad(),
    OpInfo::prim("prod", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("amax", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("amin", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("max", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("min", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("argmax", "reduce", DTypes::ALL),
    OpInfo::prim("argmin", "reduce", DTypes::ALL),
    OpInfo::prim("var", "reduce", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("std", "reduce", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("logsumexp", "reduce", DTypes::ALL)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("all", "reduce", DTypes::ALL),
    OpInfo::prim("any", "reduce", DTypes::ALL),
    OpInfo::prim("softmax", "reduce", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("log_softmax", "reduce", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("cumsum", "reduce", DTypes::ALL).grad(),
    OpInfo::prim("cumprod", "reduce", DTypes::ALL).grad(),
];

// ---------------------------------------------------------------------------
// Shape rules
// ---------------------------------------------------------------------------

/// Which dims a reduction reduces (inline up to 8 dims: no allocation per op).
pub type Mask = smallvec::SmallVec<[bool; 8]>;

/// Which dims of an `ndim`-d tensor a `dim` argument reduces (None or empty → all).
pub fn reduce_mask(op: &'static str, dims: Option<&[isize]>, ndim: usize) -> Result<Mask> {
    let mut mask: Mask = smallvec::smallvec![false; ndim];
    match dims {
        None | Some([]) => mask.iter_mut().for_each(|m| *m = true),
        Some(ds) => {
            for &d in ds {
                let k = norm_dim(op, d, ndim)?;
                if ndim == 0 {
                    continue;
                }
                if mask[k] {
                    return Err(Error::value(
                        op,
                        format!("dim {k} appears multiple times in the list of dims {ds:?}"),
                    ));
                }
                mask[k] = true;
            }
        }
    }
    Ok(mask)
}

/// Output shape of a reduction: reduced dims dropped, or kept as 1.
pub fn reduced_shape(shape: &[usize], mask: &[bool], keepdim: bool) -> Shape {
    shape
        .iter()
        .zip(mask)
        .filter_map(|(&d, &m)| match (m, keepdim) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

fn check_dtype(op: &'static str, ok: DTypes, d: DType) -> Result<()> {
    if ok.contains(d) {
        return Ok(());
    }
    let names: Vec<_> = ok.list().iter().map(|d| d.name()).collect();
    Err(Error::dtype(
        op,
        format!(
            "not implemented for dtype {d} (supported: {})",
            names.join(", ")
        ),
    ))
}

/// Error when a reduction without an identity meets a zero-size reduced dim.
fn check_nonempty(op: &'static str, x: &Tensor, mask: &[bool], dims_given: bool) -> Result<()> {
    for (k, (&n, &m)) in x.shape().iter().zip(mask).enumerate() {
        if m && n == 0 {
            return Err(if dims_given {
                Error::index(
                    op,
                    format!(
                        "cannot reduce over a zero-size dimension: dim {k} of the input of shape {} has size 0",
                        fmt_shape(x.shape())
                    ),
                )
            } else {
                Error::value(
                    op,
                    format!(
                        "cannot reduce over a zero-size dimension: the input of shape {} has no elements; specify a dim to reduce over a non-empty dimension",
                        fmt_shape(x.shape())
                    ),
                )
            });
        }
    }
    Ok(())
}

/// Allocate the output and run the backend's `reduce` primitive.
fn run_reduce(
    op: ReduceOp,
    x: &Tensor,
    mask: &[bool],
    keepdim: bool,
    out_dtype: DType,
) -> Result<Tensor> {
    let shape = reduced_shape(x.shape(), mask, keepdim);
    let out = Tensor::empty_for(op.name(), &shape, out_dtype, x.device())?;
    backend(x.device()).reduce(op, x, mask, &out)?;
    Ok(out)
}

/// `x` converted to `dtype` when one is requested.
fn cast_opt(x: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    match dtype {
        Some(d) => elementwise::to_dtype(x, d),
        None => Ok(x.clone()),
    }
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------

/// Sum over `dims`; bool and integers sum to int64 unless `dtype` is given.
pub fn sum(
    x: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Sum {
            dims: dims.map(|d| d.to_vec()),
            keepdim,
            dtype
        },
        [x],
        one
    );
    let out = {
        let _no = crate::autograd::GradMode::set(false);
        sum_like(ReduceOp::Sum, x, dims, keepdim, dtype)?
    };
    record_sum_mean(x, &out, dims, keepdim, false)?;
    Ok(out)
}

/// Record the backward of a sum or mean: broadcast the gradient back (scaled for a mean).
fn record_sum_mean(
    x: &Tensor,
    out: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
    mean: bool,
) -> Result<()> {
    if out.dtype().is_floating_point() && crate::autograd::needs_grad(&[x]) {
        let mask = reduce_mask("sum", dims, x.ndim())?;
        let count: usize = x
            .shape()
            .iter()
            .zip(&mask)
            .filter(|(_, &m)| m)
            .map(|(&d, _)| d)
            .product();
        let kept: Vec<isize> = x
            .shape()
            .iter()
            .zip(&mask)
            .map(|(&d, &m)| if m { 1 } else { d as isize })
            .collect();
        let bw = SumBackward {
            in_shape: x.shape().into(),
            in_dtype: x.dtype(),
            kept_shape: if keepdim { None } else { Some(kept) },
            // An integer divisor: a size, which a captured graph can make symbolic.
            divisor: mean.then_some(count.max(1)),
            mean,
        };
        crate::autograd::record(bw, &[x], &[out], &[]);
    }
    Ok(())
}

struct SumBackward {
    in_shape: Shape,
    in_dtype: DType,
    kept_shape: Option<Vec<isize>>,
    divisor: Option<usize>,
    mean: bool,
}

impl crate::autograd::Backward for SumBackward {
    fn name(&self) -> &'static str {
        if self.mean {
            "MeanBackward"
        } else {
            "SumBackward"
        }
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &g[0] else {
            return Ok(vec![None]);
        };
        let g = match &self.kept_shape {
            Some(k) => crate::ops::shape::reshape(g, k)?,
            None => g.clone(),
        };
        let g = match self.divisor {
            Some(n) => elementwise::binary_scalar(BinaryOp::Div, &g, Scalar::Int(n as i64), false)?,
            None => g,
        };
        let g = crate::ops::shape::broadcast_to(&g, &self.in_shape)?;
        Ok(vec![Some(elementwise::to_dtype(&g, self.in_dtype)?)])
    }
}

/// Product over `dims`, with the dtype rule of [`sum`].
pub fn prod(
    x: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    if let Some(d) = super::autocast::widen(&[x]) {
        return prod(&super::autocast::cast(x, d)?, dims, keepdim, dtype);
    }
    capture!(
        crate::ops::call::OpCall::Prod {
            dims: dims.map(|d| d.to_vec()),
            keepdim,
            dtype
        },
        [x],
        one
    );
    let out = {
        let _no = GradMode::set(false);
        sum_like(ReduceOp::Prod, x, dims, keepdim, dtype)?
    };
    if out.dtype().is_floating_point() && ag::needs_grad(&[x]) {
        let mask = reduce_mask("prod", dims, x.ndim())?;
        let bw = ProdBackward {
            r: ReduceGrad::new(x, &mask, keepdim),
        };
        ag::record(bw, &[x], &[&out], &[Save::Tensor(x), Save::Output(0)]);
    }
    Ok(out)
}

fn sum_like(
    op: ReduceOp,
    x: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let mask = reduce_mask(op.name(), dims, x.ndim())?;
    let x = cast_opt(x, dtype)?;
    if x.dtype().is_floating_point() {
        return run_reduce(op, &x, &mask, keepdim, x.dtype());
    }
    // Integers accumulate in int64; an explicit narrower dtype is a final cast.
    let r = run_reduce(op, &x, &mask, keepdim, DType::I64)?;
    match dtype {
        Some(d) if d != DType::I64 => elementwise::to_dtype(&r, d),
        _ => Ok(r),
    }
}

/// Mean over `dims`; integer inputs need `dtype=` (as in PyTorch).
pub fn mean(
    x: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Mean {
            dims: dims.map(|d| d.to_vec()),
            keepdim,
            dtype
        },
        [x],
        one
    );
    let mask = reduce_mask("mean", dims, x.ndim())?;
    let d = dtype.unwrap_or(x.dtype());
    if !d.is_floating_point() {
        return Err(Error::dtype(
            "mean",
            format!(
                "could not infer output dtype. Input dtype must be a floating point dtype, but got {}{}; use a floating point dtype (e.g. x.float().mean() or mean(dtype=float32))",
                x.dtype(),
                match dtype {
                    Some(d) => format!(" with dtype={d}"),
                    None => String::new(),
                }
            ),
        ));
    }
    let out = {
        let _no = crate::autograd::GradMode::set(false);
        let xc = cast_opt(&x.clone(), Some(d))?;
        run_reduce(ReduceOp::Mean, &xc, &mask, keepdim, d)?
    };
    record_sum_mean(x, &out, dims, keepdim, true)?;
    Ok(out)
}

/// NaN-propagating maximum (`Max`) or minimum (`Min`) over `dims`.
pub fn amax_amin(op: ArgOp, x: &Tensor, dims: Option<&[isize]>, keepdim: bool) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::AmaxAmin {
            op,
            dims: dims.map(|d| d.to_vec()),
            keepdim
        },
        [x],
        one
    );
    amax_named(
        op,
        if op == ArgOp::Max { "amax" } else { "amin" },
        x,
        dims,
        keepdim,
    )
}

fn amax_named(
    op: ArgOp,
    name: &'static str,
    x: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
) -> Result<Tensor> {
    let mask = reduce_mask(name, dims, x.ndim())?;
    check_nonempty(name, x, &mask, dims.is_some_and(|d| !d.is_empty()))?;
    let rop = if op == ArgOp::Max {
        ReduceOp::Max
    } else {
        ReduceOp::Min
    };
    let out = run_reduce(rop, x, &mask, keepdim, x.dtype())?;
    if out.dtype().is_floating_point() && ag::needs_grad(&[x]) {
        let bw = AmaxBackward {
            name: match (name, op) {
                ("amax", _) => "AmaxBackward",
                ("amin", _) => "AminBackward",
                (_, ArgOp::Max) => "MaxBackward",
                (_, ArgOp::Min) => "MinBackward",
            },
            r: ReduceGrad::new(x, &mask, keepdim),
        };
        ag::record(bw, &[x], &[&out], &[Save::Tensor(x), Save::Output(0)]);
    }
    Ok(out)
}

/// `max()` / `min()` with no dim: a 0-d tensor.
pub fn max_all(op: ArgOp, x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::MaxAll { op }, [x], one);
    let name = if op == ArgOp::Max { "max" } else { "min" };
    amax_named(op, name, x, None, false)
}

/// `max(dim)` / `min(dim)`: (values, int64 indices of the first extremum; NaN counts as extreme).
pub fn max_dim(op: ArgOp, x: &Tensor, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
    capture!(
        crate::ops::call::OpCall::MaxDim { op, dim, keepdim },
        [x],
        pair
    );
    let name = if op == ArgOp::Max { "max" } else { "min" };
    let d = norm_dim(name, dim, x.ndim())?;
    let mask = reduce_mask(name, Some(&[dim]), x.ndim())?;
    check_nonempty(name, x, &mask, true)?;
    let shape = reduced_shape(x.shape(), &mask, keepdim);
    let values = Tensor::empty(&shape, x.dtype(), x.device())?;
    let indices = Tensor::empty(&shape, DType::I64, x.device())?;
    if x.ndim() == 0 {
        let _no = GradMode::set(false);
        elementwise::copy_(&values, x)?;
        elementwise::fill_(&indices, Scalar::Int(0))?;
    } else {
        backend(x.device()).arg_reduce(op, x, d, Some(&values), &indices)?;
    }
    if values.dtype().is_floating_point() && ag::needs_grad(&[x]) {
        let bw = MaxDimBackward {
            name: if op == ArgOp::Max {
                "MaxBackward"
            } else {
                "MinBackward"
            },
            dim: d,
            r: ReduceGrad::new(x, &mask, keepdim),
        };
        let idx = indices.detach();
        ag::record(bw, &[x], &[&values, &indices], &[Save::Tensor(&idx)]);
    }
    Ok((values, indices))
}

/// `argmax` / `argmin` over `dim`, or over the flattened tensor when `dim` is None.
pub fn argmax_argmin(op: ArgOp, x: &Tensor, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::ArgMaxMin { op, dim, keepdim },
        [x],
        one
    );
    let name = if op == ArgOp::Max { "argmax" } else { "argmin" };
    match dim {
        Some(dim) => {
            let d = norm_dim(name, dim, x.ndim())?;
            let mask = reduce_mask(name, Some(&[dim]), x.ndim())?;
            check_nonempty(name, x, &mask, true)?;
            let shape = reduced_shape(x.shape(), &mask, keepdim);
            let indices = Tensor::empty(&shape, DType::I64, x.device())?;
            if x.ndim() == 0 {
                elementwise::fill_(&indices, Scalar::Int(0))?;
            } else {
                backend(x.device()).arg_reduce(op, x, d, None, &indices)?;
            }
            Ok(indices)
        }
        None => {
            let mask = vec![true; x.ndim()];
            check_nonempty(name, x, &mask, false)?;
            let shape = reduced_shape(x.shape(), &mask, keepdim);
            let flat = crate::ops::shape::reshape(x, &[-1])?;
            let indices = Tensor::empty(&[], DType::I64, x.device())?;
            backend(x.device()).arg_reduce(op, &flat, 0, None, &indices)?;
            Ok(indices.with_layout(Layout::contiguous(&shape)))
        }
    }
}

/// Variance (or standard deviation when `std`) over `dims` with `correction`
/// (1 = Bessel's correction), computed in two passes.
pub fn var(
    x: &Tensor,
    dims: Option<&[isize]>,
    correction: f64,
    keepdim: bool,
    std: bool,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Var {
            dims: dims.map(|d| d.to_vec()),
            correction,
            keepdim,
            std
        },
        [x],
        one
    );
    let name = if std { "std" } else { "var" };
    let mask = reduce_mask(name, dims, x.ndim())?;
    if !x.dtype().is_floating_point() {
        return Err(Error::dtype(
            name,
            format!(
                "std and var only support floating point dtypes, but got {}; convert with .float() first",
                x.dtype()
            ),
        ));
    }
    let out = run_reduce(
        ReduceOp::Var { correction, std },
        x,
        &mask,
        keepdim,
        x.dtype(),
    )?;
    if ag::needs_grad(&[x]) {
        let bw = VarBackward {
            r: ReduceGrad::new(x, &mask, keepdim),
            correction,
            std,
        };
        let save = if std {
            vec![Save::Tensor(x), Save::Output(0)]
        } else {
            vec![Save::Tensor(x)]
        };
        ag::record(bw, &[x], &[&out], &save);
    }
    Ok(out)
}

/// `log Σ exp(x)` over `dims`, shifted by the maximum for stability.
pub fn logsumexp(x: &Tensor, dims: Option<&[isize]>, keepdim: bool) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Logsumexp {
            dims: dims.map(|d| d.to_vec()),
            keepdim
        },
        [x],
        one
    );
    let mask = reduce_mask("logsumexp", dims, x.ndim())?;
    let xf = {
        let _no = GradMode::set(false);
        elementwise::to_dtype(x, x.dtype().to_float())?
    };
    let out = run_reduce(ReduceOp::LogSumExp, &xf, &mask, keepdim, xf.dtype())?;
    if ag::needs_grad(&[x]) {
        let bw = LogSumExpBackward {
            r: ReduceGrad::new(x, &mask, keepdim),
        };
        ag::record(bw, &[x], &[&out], &[Save::Tensor(x), Save::Output(0)]);
    }
    Ok(out)
}

/// `all` (`any` when `!all`): whether every (some) element is nonzero, as bool.
pub fn all_any(all: bool, x: &Tensor, dims: Option<&[isize]>, keepdim: bool) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::AllAny {
            all,
            dims: dims.map(|d| d.to_vec()),
            keepdim
        },
        [x],
        one
    );
    let op = if all { ReduceOp::All } else { ReduceOp::Any };
    let mask = reduce_mask(op.name(), dims, x.ndim())?;
    let b = if x.dtype() == DType::Bool {
        x.clone()
    } else {
        elementwise::binary_scalar(BinaryOp::Ne, x, Scalar::Int(0), false)?
    };
    run_reduce(op, &b, &mask, keepdim, DType::Bool)
}

/// `softmax` (or `log_softmax` when `log`) along `dim`, optionally computing in `dtype`.
pub fn softmax(x: &Tensor, dim: isize, log: bool, dtype: Option<DType>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Softmax { dim, log, dtype },
        [x],
        one
    );
    let name = if log { "log_softmax" } else { "softmax" };
    let d = norm_dim(name, dim, x.ndim())?;
    let xc = {
        let _no = GradMode::set(false);
        cast_opt(x, dtype)?
    };
    check_dtype(name, DTypes::FLOAT, xc.dtype())?;
    let out = Tensor::empty_for(
        if log { "log_softmax" } else { "softmax" },
        xc.shape(),
        xc.dtype(),
        xc.device(),
    )?;
    let d = if xc.ndim() == 0 { 0 } else { d };
    if xc.numel() > 0 {
        backend(xc.device()).softmax(&xc, d, log, &out)?;
    }
    if ag::needs_grad(&[x]) {
        let bw = SoftmaxBackward {
            dim: d as isize,
            log,
            in_dtype: x.dtype(),
        };
        ag::record(bw, &[x], &[&out], &[Save::Output(0)]);
    }
    Ok(out)
}

/// Inclusive scan along `dim`; bool and integers scan in int64 unless `dtype` is given.
pub fn cumulative(op: CumOp, x: &Tensor, dim: isize, dtype: Option<DType>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Cumulative { op, dim, dtype },
        [x],
        one
    );
    let name = match op {
        CumOp::Sum => "cumsum",
        CumOp::Prod => "cumprod",
    };
    let d = norm_dim(name, dim, x.ndim())?;
    let xc = {
        let _no = GradMode::set(false);
        cast_opt(x, dtype)?
    };
    let out_dt = if xc.dtype().is_floating_point() {
        xc.dtype()
    } else {
        DType::I64
    };
    let out = Tensor::empty_for(name, xc.shape(), out_dt, xc.device())?;
    let d = if xc.ndim() == 0 { 0 } else { d };
    if xc.numel() > 0 {
        backend(xc.device()).cumulative(op, &xc, d, &out)?;
    }
    if out_dt.is_floating_point() && ag::needs_grad(&[x]) {
        let bw = CumBackward {
            op,
            dim: d as isize,
            in_dtype: x.dtype(),
        };
        let save = match op {
            CumOp::Sum => vec![],
            CumOp::Prod => vec![Save::Tensor(x), Save::Output(0)],
        };
        ag::record(bw, &[x], &[&out], &save);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Gradients
// ---------------------------------------------------------------------------

/// What a reduction's VJP needs to restore the input's shape.
struct ReduceGrad {
    in_shape: Shape,
    in_dtype: DType,
    /// The reduced dims (non-negative).
    dims: Vec<isize>,
    /// The output shape with the reduced dims kept as 1, when the output dropped them.
    kept: Option<Vec<isize>>,
    /// Number of reduced elements per output element.
    count: usize,
}

impl ReduceGrad {
    fn new(x: &Tensor, mask: &[bool], keepdim: bool) -> ReduceGrad {
        let kept: Vec<isize> = x
            .shape()
            .iter()
            .zip(mask)
            .map(|(&d, &m)| if m { 1 } else { d as isize })
            .collect();
        ReduceGrad {
            in_shape: x.shape().into(),
            in_dtype: x.dtype(),
            dims: (0..x.ndim())
                .filter(|&d| mask[d])
                .map(|d| d as isize)
                .collect(),
            kept: (!keepdim && x.ndim() > 0).then_some(kept),
            count: x
                .shape()
                .iter()
                .zip(mask)
                .filter(|(_, &m)| m)
                .map(|(&d, _)| d)
                .product(),
        }
    }
    /// An output-shaped tensor with the reduced dims restored as size 1 (broadcastable to the input).
    fn keep(&self, t: &Tensor) -> Result<Tensor> {
        match &self.kept {
            Some(k) => crate::ops::shape::reshape(t, k),
            None => Ok(t.clone()),
        }
    }
    /// Sum of an input-shaped tensor over the reduced dims, keeping them.
    fn sum_keep(&self, t: &Tensor) -> Result<Tensor> {
        sum(t, Some(&self.dims), true, None)
    }
    fn done(&self, gx: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(elementwise::to_dtype(gx, self.in_dtype)?)])
    }
}

fn scalar_like(v: f64, t: &Tensor) -> Result<Tensor> {
    elementwise::scalar_tensor(Scalar::Float(v), t.dtype(), t.device())
}

fn cmp_s(op: BinaryOp, t: &Tensor, v: Scalar) -> Result<Tensor> {
    elementwise::binary_scalar(op, t, v, false)
}

/// Whether any element of a bool tensor is set.
fn any_set(b: &Tensor) -> Result<bool> {
    Ok(all_any(false, b, None, false)?.to_f64_vec()[0] != 0.0)
}

/// `amax`/`amin` and `max()`/`min()` without a dim: the gradient is split
/// evenly among the elements equal to the extremum (PyTorch's rule); in a
/// slice holding NaN (the result) it goes evenly to the NaN elements.
/// Saved: `[x, y]`.
struct AmaxBackward {
    name: &'static str,
    r: ReduceGrad,
}

impl Backward for AmaxBackward {
    fn name(&self) -> &'static str {
        self.name
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
        let (x, y) = (&saved[0], &saved[1]);
        let hit = elementwise::binary(BinaryOp::Eq, x, &self.r.keep(y)?)?;
        let nan = elementwise::unary(UnaryOp::IsNan, x)?;
        let hit = elementwise::binary(BinaryOp::LogicalOr, &hit, &nan)?;
        let m = elementwise::to_dtype(&hit, g.dtype())?;
        let share = div(&self.r.keep(g)?, &self.r.sum_keep(&m)?)?;
        self.r.done(&mul(&m, &share)?)
    }
}

/// `max(dim)`/`min(dim)`: the whole gradient goes to the element whose index
/// is returned (the first extremum), as in PyTorch. Saved: `[indices]`.
struct MaxDimBackward {
    name: &'static str,
    dim: usize,
    r: ReduceGrad,
}

impl Backward for MaxDimBackward {
    fn name(&self) -> &'static str {
        self.name
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
        if self.r.in_shape.is_empty() {
            return self.r.done(g);
        }
        let n = self.r.in_shape[self.dim];
        let mut spec = vec![1isize; self.r.in_shape.len()];
        spec[self.dim] = n as isize;
        let ar = crate::ops::creation::arange(
            Scalar::Int(0),
            Scalar::Int(n as i64),
            Scalar::Int(1),
            Some(DType::I64),
            g.device(),
        )?;
        let ar = crate::ops::shape::reshape(&ar, &spec)?;
        let hit = elementwise::binary(BinaryOp::Eq, &ar, &self.r.keep(&saved[0])?)?;
        let gx = elementwise::where_(&hit, &self.r.keep(g)?, &scalar_like(0.0, g)?)?;
        self.r.done(&gx)
    }
}

/// `prod`: `g * y / x` without zeros; with zeros, the gradient at a slice's
/// only zero is the product of the other elements (computed with that zero
/// replaced by one), and every other gradient in a slice with zeros is 0.
/// Saved: `[x, y]`.
struct ProdBackward {
    r: ReduceGrad,
}

impl Backward for ProdBackward {
    fn name(&self) -> &'static str {
        "ProdBackward"
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
        let x = elementwise::to_dtype(&saved[0], g.dtype())?;
        let (gk, yk) = (self.r.keep(g)?, self.r.keep(&saved[1])?);
        let zero = cmp_s(BinaryOp::Eq, &x, Scalar::Float(0.0))?;
        // (The fast path reads values: a captured graph takes the general one.)
        if x.device().has_data() && !any_set(&zero)? {
            return self.r.done(&div(&mul(&gk, &yk)?, &x)?);
        }
        let xs = elementwise::where_(&zero, &scalar_like(1.0, &x)?, &x)?;
        let nz = self.r.sum_keep(&elementwise::to_dtype(&zero, x.dtype())?)?;
        let others = prod(&xs, Some(&self.r.dims), true, None)?;
        let single = cmp_s(BinaryOp::Eq, &nz, Scalar::Float(1.0))?;
        let at_zero = elementwise::where_(&single, &others, &scalar_like(0.0, &x)?)?;
        let d = elementwise::where_(&zero, &at_zero, &div(&yk, &xs)?)?;
        self.r.done(&mul(&gk, &d)?)
    }
}

/// `var`/`std`: `g * 2 (x - mean) / (N - correction)`; for `std` the
/// gradient is first divided by `2 std` (0 where `std == 0`, as in PyTorch).
/// Saved: `[x]` (`[x, y]` for `std`).
struct VarBackward {
    r: ReduceGrad,
    correction: f64,
    std: bool,
}

impl Backward for VarBackward {
    fn name(&self) -> &'static str {
        if self.std {
            "StdBackward"
        } else {
            "VarBackward"
        }
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
        // float16/bfloat16 compute in float32 (rounded once, by `done`): in the
        // dtype itself the mean is rounded before x - mean, an error of u·|mean|
        // against values that may be much smaller than it.
        let x = &for_vjp(&saved[0])?;
        let mut gv = for_vjp(&self.r.keep(g)?)?;
        if self.std {
            let yk = for_vjp(&self.r.keep(&saved[1])?)?;
            let z = cmp_s(BinaryOp::Eq, &yk, Scalar::Float(0.0))?;
            let den = elementwise::where_(&z, &scalar_like(1.0, &yk)?, &muls(&yk, 2.0)?)?;
            gv = elementwise::where_(&z, &scalar_like(0.0, &yk)?, &div(&gv, &den)?)?;
        }
        // Centred twice (the corrected two-pass scheme): x - mean(x) is off by
        // the rounding of the mean, u·|mean|, the same in every element, which
        // std's gradient divides by std; the mean of the first residuals is
        // that offset, and taking it away leaves an error of u·|x - mean|. (The
        // second mean is 0 as a function of x: the derivatives do not change.)
        let xm = sub(x, &mean(x, Some(&self.r.dims), true, None)?)?;
        let xm = sub(&xm, &mean(&xm, Some(&self.r.dims), true, None)?)?;
        let denom = (self.r.count as f64 - self.correction).max(0.0);
        let scaled = if self.correction.fract() == 0.0 && denom > 0.0 {
            // An integer divisor: a size, which a captured graph can make symbolic.
            let d = Scalar::Int(self.r.count as i64 - self.correction as i64);
            elementwise::binary_scalar(BinaryOp::Div, &muls(&xm, 2.0)?, d, false)?
        } else {
            muls(&xm, 2.0 / denom)?
        };
        self.r.done(&mul(&scaled, &gv)?)
    }
}

/// `logsumexp`: `g * exp(x - y)`. Saved: `[x, y]`.
struct LogSumExpBackward {
    r: ReduceGrad,
}

impl Backward for LogSumExpBackward {
    fn name(&self) -> &'static str {
        "LogsumexpBackward"
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
        // float16/bfloat16 compute in float32 (rounded once, by `done`): x - y
        // rounded to the dtype would cost u·|x - y| of relative error in eˣ⁻ʸ.
        let (x, y) = (&for_vjp(&saved[0])?, &for_vjp(&saved[1])?);
        let p = elementwise::unary(UnaryOp::Exp, &sub(x, &self.r.keep(y)?)?)?;
        let g = for_vjp(&self.r.keep(g)?)?;
        self.r.done(&mul(&g, &p)?)
    }
}

/// `softmax`: `y * (g - Σ g y)`; `log_softmax`: `g - exp(y) Σ g` (sums along `dim`).
/// Saved: `[y]`.
struct SoftmaxBackward {
    dim: isize,
    log: bool,
    in_dtype: DType,
}

impl Backward for SoftmaxBackward {
    fn name(&self) -> &'static str {
        if self.log {
            "LogSoftmaxBackward"
        } else {
            "SoftmaxBackward"
        }
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
        let y = &saved[0];
        let fused = !(ag::is_grad_enabled() && (y.requires_grad() || g.requires_grad()))
            && g.dtype() == y.dtype()
            && g.shape() == y.shape()
            && g.device() == y.device();
        let gx = if fused {
            softmax_grad(y, g, self.dim as usize, self.log)?
        } else {
            composed_softmax_grad(y, g, self.dim, self.log)?
        };
        Ok(vec![Some(elementwise::to_dtype(&gx, self.in_dtype)?)])
    }
}

/// The softmax gradient composed of recorded ops (differentiable again).
fn composed_softmax_grad(y: &Tensor, g: &Tensor, dim: isize, log: bool) -> Result<Tensor> {
    let d = [dim];
    // float16/bfloat16 compute in float32 and round once at the end, as the
    // fused kernels do: rounded to the dtype, Σ g·y carries an error of
    // about u·|g|, and the dominant entry's g - Σ g·y is only (1 - y)·g.
    let (y, g) = (&for_vjp(y)?, &for_vjp(g)?);
    if log {
        let s = sum(g, Some(&d), true, None)?;
        sub(g, &mul(&elementwise::unary(UnaryOp::Exp, y)?, &s)?)
    } else {
        // Σ g·y / Σ y: rounded outputs do not sum to exactly 1 (Σ y is 1 as a
        // function of x, so the derivatives of this form are the same).
        let s = div(
            &sum(&mul(g, y)?, Some(&d), true, None)?,
            &sum(y, Some(&d), true, None)?,
        )?;
        mul(y, &sub(g, &s)?)
    }
}

/// The fused gradient of [`softmax`] (`log_softmax` when `log`) along `dim`
/// as an op of its own (internal; not differentiable), from the forward
/// output `y` and the output gradient `g` (one floating dtype, shape and
/// device): the device's fused kernel where it has one, else composed from
/// primitives — what the backward pass computes eagerly. Captured graphs
/// record it as one node.
pub fn softmax_grad(y: &Tensor, g: &Tensor, dim: usize, log: bool) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::SoftmaxGrad { dim, log },
        [y, g],
        one
    );
    let op = if log {
        "log_softmax_grad"
    } else {
        "softmax_grad"
    };
    if !y.dtype().is_floating_point()
        || g.dtype() != y.dtype()
        || g.shape() != y.shape()
        || g.device() != y.device()
        || dim >= y.ndim().max(1)
    {
        return Err(Error::value(
            op,
            format!(
                "needs y and g of one floating dtype, shape and device and a dim within them, got {} {:?} and {} {:?}, dim {dim}",
                y.dtype(),
                y.shape(),
                g.dtype(),
                g.shape()
            ),
        ));
    }
    let _no = GradMode::set(false);
    let out = Tensor::empty(y.shape(), y.dtype(), y.device())?;
    if backend(y.device()).softmax_grad(y, g, dim, log, &out)? {
        return Ok(out);
    }
    elementwise::to_dtype(&composed_softmax_grad(y, g, dim as isize, log)?, y.dtype())
}

/// `Σ_{j >= i} t_j` along `dim` (a cumsum of the flipped tensor, flipped back).
fn rev_cumsum(t: &Tensor, dim: isize) -> Result<Tensor> {
    let f = crate::ops::shape::flip(t, &[dim])?;
    let c = cumulative(CumOp::Sum, &f, dim, None)?;
    crate::ops::shape::flip(&c, &[dim])
}

/// `cumsum`: the reversed cumsum of `g`. `cumprod`: `revcumsum(g y) / x`
/// where `x != 0`; at the first zero of a slice, `revcumsum(g ỹ)` with `ỹ`
/// the cumprod of `x` with that zero replaced by one; 0 at later zeros.
/// First derivatives are exact with any zeros; second derivatives are exact
/// with at most one zero per slice. Saved: `[]` / `[x, y]`.
struct CumBackward {
    op: CumOp,
    dim: isize,
    in_dtype: DType,
}

impl Backward for CumBackward {
    fn name(&self) -> &'static str {
        match self.op {
            CumOp::Sum => "CumsumBackward",
            CumOp::Prod => "CumprodBackward",
        }
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
        let done = |gx: &Tensor| -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(elementwise::to_dtype(gx, self.in_dtype)?)])
        };
        if g.ndim() == 0 {
            return done(g);
        }
        let d = self.dim;
        if self.op == CumOp::Sum {
            return done(&rev_cumsum(g, d)?);
        }
        let x = elementwise::to_dtype(&saved[0], g.dtype())?;
        let y = &saved[1];
        let zero = cmp_s(BinaryOp::Eq, &x, Scalar::Float(0.0))?;
        let gy = rev_cumsum(&mul(g, y)?, d)?;
        if x.device().has_data() && !any_set(&zero)? {
            return done(&div(&gy, &x)?);
        }
        let one = scalar_like(1.0, &x)?;
        let xs = elementwise::where_(&zero, &one, &x)?;
        let away = div(&gy, &xs)?;
        let count = cumulative(CumOp::Sum, &zero, d, None)?;
        let first = elementwise::binary(
            BinaryOp::LogicalAnd,
            &zero,
            &cmp_s(BinaryOp::Eq, &count, Scalar::Int(1))?,
        )?;
        let yt = cumulative(
            CumOp::Prod,
            &elementwise::where_(&first, &one, &x)?,
            d,
            None,
        )?;
        let at_first = rev_cumsum(&mul(g, &yt)?, d)?;
        let at_zero = elementwise::where_(&first, &at_first, &scalar_like(0.0, &x)?)?;
        done(&elementwise::where_(&zero, &at_zero, &away)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: Vec<f32>, s: &[usize]) -> Tensor {
        Tensor::from_vec(v, s).unwrap()
    }

    #[test]
    fn masks() {
        assert_eq!(reduce_mask("sum", None, 3).unwrap().to_vec(), vec![true; 3]);
        assert_eq!(
            reduce_mask("sum", Some(&[-1, 0]), 3).unwrap().to_vec(),
            vec![true, false, true]
        );
        assert!(reduce_mask("sum", Some(&[3]), 3).is_err());
        assert!(reduce_mask("sum", Some(&[1, -2]), 3).is_err());
        assert_eq!(
            &reduced_shape(&[2, 3, 4], &[false, true, false], true)[..],
            &[2, 1, 4]
        );
    }

    #[test]
    fn sums_and_extrema() {
        let x = t((0..24).map(|v| v as f32).collect(), &[2, 3, 4]);
        let s = sum(&x, Some(&[1]), false, None).unwrap();
        assert_eq!(s.shape(), &[2, 4]);
        assert_eq!(s.to_f64_vec(), vec![12., 15., 18., 21., 48., 51., 54., 57.]);
        let s = sum(&x, Some(&[0, 2]), true, None).unwrap();
        assert_eq!(s.shape(), &[1, 3, 1]);
        assert_eq!(s.to_f64_vec(), vec![60., 92., 124.]);
        let m = amax_amin(ArgOp::Max, &x, Some(&[0]), false).unwrap();
        assert_eq!(
            m.to_f64_vec(),
            (12..24).map(|v| v as f64).collect::<Vec<_>>()
        );
        let (v, i) = max_dim(ArgOp::Min, &x, 2, false).unwrap();
        assert_eq!(v.to_f64_vec(), vec![0., 4., 8., 12., 16., 20.]);
        assert_eq!(i.to_f64_vec(), vec![0.; 6]);
        let a = argmax_argmin(ArgOp::Max, &x, None, false).unwrap();
        assert_eq!(a.to_f64_vec(), vec![23.]);
    }

    #[test]
    fn full_sum_large() {
        let n = 1 << 20;
        let x = t((0..n).map(|i| (i % 7) as f32 * 0.25).collect(), &[n]);
        let s = sum(&x, None, false, None).unwrap().to_f64_vec()[0];
        let exact: f64 = (0..n).map(|i| (i % 7) as f64 * 0.25).sum();
        assert!((s - exact).abs() / exact < 1e-6, "{s} vs {exact}");
    }

    #[test]
    fn softmax_rows_sum_to_one() {
        let x = t((0..12).map(|v| v as f32 * 0.3).collect(), &[3, 4]);
        for d in [0, 1] {
            let y = softmax(&x, d, false, None).unwrap();
            let s = sum(&y, Some(&[d]), false, None).unwrap().to_f64_vec();
            assert!(s.iter().all(|v| (v - 1.0).abs() < 1e-6), "{s:?}");
        }
    }

    #[test]
    fn empty_dims() {
        let x = t(vec![], &[0, 3]);
        assert_eq!(
            sum(&x, Some(&[0]), false, None).unwrap().to_f64_vec(),
            vec![0.; 3]
        );
        assert_eq!(
            prod(&x, Some(&[0]), false, None).unwrap().to_f64_vec(),
            vec![1.; 3]
        );
        assert!(mean(&x, Some(&[0]), false, None).unwrap().to_f64_vec()[0].is_nan());
        assert!(amax_amin(ArgOp::Max, &x, Some(&[0]), false).is_err());
        assert_eq!(
            amax_amin(ArgOp::Max, &x, Some(&[1]), false)
                .unwrap()
                .shape(),
            &[0]
        );
    }
}
