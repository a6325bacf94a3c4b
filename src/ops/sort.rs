//! The sort family's Python-facing ops, built on the one definition
//! `crate::kernel::sort::Sort` (applied by `ops::general::run`): `sort`,
//! `argsort`, `msort`, `topk`, and the compositions `kthvalue`, `median`
//! and `nanmedian` (a sort, then a gather at the wanted position, so their
//! gradients are the sort's scatter through the gather's VJP).

use crate::error::{Error, Result};
use crate::kernel::general::{Def, GeneralOp};
use crate::kernel::sort::Sort;
use crate::ops::elementwise::{self, BinaryOp, UnaryOp};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::{creation, general, index, reduce, shape};
use crate::tensor::layout::{fmt_shape, norm_dim};
use crate::tensor::{Scalar, Tensor};

const D: DTypes = DTypes(<Sort as Def>::DTYPES);

/// Registry entries for this family.
pub const OPS: &[OpInfo] = &[
    OpInfo::prim("sort", "sort", D).grad(),
    OpInfo::prim("topk", "sort", D).grad(),
    OpInfo::prim("argsort", "sort", D).kind(OpKind::Composite),
    OpInfo::prim("msort", "sort", D)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("kthvalue", "sort", D)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("median", "sort", D)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("nanmedian", "sort", D)
        .kind(OpKind::Composite)
        .grad(),
];

fn apply(x: &Tensor, s: Sort) -> Result<(Tensor, Tensor)> {
    let mut o = general::run(&GeneralOp::Sort(s), &[x])?.into_iter();
    match (o.next(), o.next()) {
        (Some(v), Some(i)) => Ok((v, i)),
        _ => Err(Error::runtime(
            "sort",
            "internal error: expected two outputs",
        )),
    }
}

/// `(values, indices)` of `x` sorted along `dim` (see `kernel::sort`).
pub fn sort(x: &Tensor, dim: isize, descending: bool, stable: bool) -> Result<(Tensor, Tensor)> {
    apply(
        x,
        Sort {
            dim,
            k: None,
            descending,
            stable,
        },
    )
}

/// The indices that sort `x` along `dim`.
pub fn argsort(x: &Tensor, dim: isize, descending: bool, stable: bool) -> Result<Tensor> {
    Ok(sort(x, dim, descending, stable)?.1)
}

/// `x` sorted along dim 0.
pub fn msort(x: &Tensor) -> Result<Tensor> {
    Ok(sort(x, 0, false, false)?.0)
}

fn check_k(name: &'static str, k: i64) -> Result<usize> {
    usize::try_from(k).map_err(|_| Error::runtime(name, format!("k ({k}) must be non-negative")))
}

/// The `k` largest (`largest`) or smallest elements along `dim`, sorted
/// (also when `sorted` is false, which PyTorch leaves unspecified).
pub fn topk(
    x: &Tensor,
    k: i64,
    dim: isize,
    largest: bool,
    _sorted: bool,
) -> Result<(Tensor, Tensor)> {
    let k = check_k("topk", k)?;
    apply(
        x,
        Sort {
            dim,
            k: Some(k),
            descending: largest,
            stable: false,
        },
    )
}

/// Size of `dim` (1 for a 0-d tensor) after checking it.
fn dim_size(name: &'static str, x: &Tensor, dim: isize) -> Result<(usize, usize)> {
    let d = norm_dim(name, dim, x.ndim())?;
    Ok((d, if x.ndim() == 0 { 1 } else { x.shape()[d] }))
}

/// The `k`-th smallest element (1-based) along `dim` and its index.
pub fn kthvalue(x: &Tensor, k: i64, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (d, n) = dim_size("kthvalue", x, dim)?;
    if k < 1 || k as u64 > n as u64 {
        return Err(Error::runtime(
            "kthvalue",
            format!(
                "k ({k}) is out of range: dim {dim} of the input of shape {} has size {n}",
                fmt_shape(x.shape())
            ),
        ));
    }
    let (v, i) = apply(
        x,
        Sort {
            dim,
            k: Some(k as usize),
            descending: false,
            stable: true,
        },
    )?;
    if x.ndim() == 0 {
        return Ok((v, i));
    }
    let pick = |t: &Tensor| -> Result<Tensor> {
        let t = shape::narrow(t, d as isize, k as isize - 1, 1)?;
        if keepdim {
            Ok(t)
        } else {
            shape::squeeze(&t, Some(&[d as isize]))
        }
    };
    Ok((pick(&v)?, pick(&i)?))
}

/// The lower median along `dim` and its index; a slice holding NaN gives its
/// first NaN (`median`), or NaN is skipped (`nanmedian`, NaN only where the
/// whole slice is NaN).
pub fn median_dim(
    x: &Tensor,
    dim: isize,
    keepdim: bool,
    skip_nan: bool,
) -> Result<(Tensor, Tensor)> {
    let name = if skip_nan { "nanmedian" } else { "median" };
    let (d, n) = dim_size(name, x, dim)?;
    if n == 0 {
        return Err(Error::index(
            name,
            format!(
                "cannot take the median of an empty dim: dim {dim} of the input of shape {}",
                fmt_shape(x.shape())
            ),
        ));
    }
    let (v, i) = sort(x, dim, false, true)?;
    if x.ndim() == 0 {
        return Ok((v, i));
    }
    let di = d as isize;
    let pos = if x.dtype().is_floating_point() {
        // Per slice: the number of NaN (sorted last, in input order).
        let nan = elementwise::unary(UnaryOp::IsNan, x)?;
        let nan = reduce::sum(&nan, Some(&[di]), true, None)?;
        let kept = elementwise::binary_scalar(BinaryOp::Sub, &nan, Scalar::Int(n as i64), true)?;
        if skip_nan {
            let m = elementwise::binary_scalar(BinaryOp::Maximum, &kept, Scalar::Int(1), false)?;
            let m = elementwise::binary_scalar(BinaryOp::Sub, &m, Scalar::Int(1), false)?;
            elementwise::binary_scalar(BinaryOp::FloorDiv, &m, Scalar::Int(2), false)?
        } else {
            let any = elementwise::binary_scalar(BinaryOp::Gt, &nan, Scalar::Int(0), false)?;
            let mid = creation::full(
                &[1],
                Scalar::Int((n as i64 - 1) / 2),
                crate::tensor::DType::I64,
                x.device(),
            )?;
            elementwise::where_(&any, &kept, &mid)?
        }
    } else {
        let mut s = x.shape().to_vec();
        s[d] = 1;
        creation::full(
            &s,
            Scalar::Int((n as i64 - 1) / 2),
            crate::tensor::DType::I64,
            x.device(),
        )?
    };
    let pick = |t: &Tensor| -> Result<Tensor> {
        let t = index::gather(t, di, &pos)?;
        if keepdim {
            Ok(t)
        } else {
            shape::squeeze(&t, Some(&[di]))
        }
    };
    Ok((pick(&v)?, pick(&i)?))
}

/// The lower median of all elements (0-d); NaN for an empty float input.
pub fn median_all(x: &Tensor, skip_nan: bool) -> Result<Tensor> {
    let name = if skip_nan { "nanmedian" } else { "median" };
    if x.numel() == 0 {
        if !x.dtype().is_floating_point() {
            return Err(Error::index(
                name,
                format!("cannot take the median of an empty {} tensor", x.dtype()),
            ));
        }
        return creation::full(&[], Scalar::Float(f64::NAN), x.dtype(), x.device());
    }
    let flat = shape::reshape(x, &[-1])?;
    let (v, _) = median_dim(&flat, 0, false, skip_nan)?;
    Ok(v)
}
