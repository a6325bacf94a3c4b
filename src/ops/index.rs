//! Indexing: `x[key]` and `x[key] = value`.
//!
//! Basic keys (ints, slices, `None`, `...`) produce views. A key holding
//! integer or boolean tensors is advanced indexing (NumPy semantics) and
//! produces a copy; boolean masks make the output shape depend on data.

use crate::error::{Error, Result};
use crate::ops::elementwise;
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::layout::fmt_shape;
use crate::tensor::{DType, Tensor};

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("getitem", "index", DTypes::ALL).kind(OpKind::Composite),
    OpInfo::prim("setitem", "index", DTypes::ALL)
        .mutates(0)
        .kind(OpKind::Composite),
    OpInfo::prim("nonzero", "index", DTypes::ALL).data_dependent(),
];

/// One element of an indexing key.
#[derive(Clone, Debug)]
pub enum IndexItem {
    Int(isize),
    /// Python slice; `step != 0`.
    Slice {
        start: Option<isize>,
        stop: Option<isize>,
        step: isize,
    },
    NewAxis,
    Ellipsis,
    /// Integer (int32/int64) or bool tensor.
    Tensor(Tensor),
}

/// Python's `slice.indices(n)` followed by the slice length.
pub fn slice_range(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    n: usize,
) -> (isize, usize) {
    let n = n as isize;
    let (lower, upper) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let norm = |v: Option<isize>, default: isize| -> isize {
        match v {
            None => default,
            Some(v) if v < 0 => (v + n).max(lower),
            Some(v) => v.min(upper),
        }
    };
    let s = norm(start, if step > 0 { lower } else { upper });
    let e = norm(stop, if step > 0 { upper } else { lower });
    let len = if step > 0 {
        if e > s {
            (e - s - 1) / step + 1
        } else {
            0
        }
    } else if s > e {
        (s - e - 1) / (-step) + 1
    } else {
        0
    };
    (s, len as usize)
}

/// Apply the basic (view) part of a key. Returns the view and, for each
/// advanced tensor item, the dim of the view it indexes.
pub fn basic_view(x: &Tensor, items: &[IndexItem]) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
    let consumed = items
        .iter()
        .map(|it| match it {
            IndexItem::Int(_) | IndexItem::Slice { .. } => 1,
            IndexItem::Tensor(t) if t.dtype() == DType::Bool => {
                t.ndim().max(if t.ndim() == 0 { 0 } else { 1 })
            }
            IndexItem::Tensor(_) => 1,
            IndexItem::NewAxis | IndexItem::Ellipsis => 0,
        })
        .sum::<usize>();
    let ellipses = items
        .iter()
        .filter(|i| matches!(i, IndexItem::Ellipsis))
        .count();
    if ellipses > 1 {
        return Err(Error::index(
            "getitem",
            "an index can only have a single ellipsis ('...')",
        ));
    }
    if consumed > x.ndim() {
        return Err(Error::index(
            "getitem",
            format!(
                "too many indices for tensor of dimension {} (shape {})",
                x.ndim(),
                fmt_shape(x.shape())
            ),
        ));
    }
    let mut layout = x.layout().clone();
    let mut d = 0usize; // current dim in the view
    let mut adv = vec![];
    for it in items {
        match it {
            IndexItem::Int(i) => {
                layout = layout.select("getitem", d, *i)?;
            }
            IndexItem::Slice { start, stop, step } => {
                let (s, len) = slice_range(*start, *stop, *step, layout.shape[d]);
                layout = layout.slice(d, s.max(0) as usize, len, *step);
                d += 1;
            }
            IndexItem::NewAxis => {
                layout = layout.unsqueeze("getitem", d as isize)?;
                d += 1;
            }
            IndexItem::Ellipsis => {
                d += x.ndim() - consumed;
            }
            IndexItem::Tensor(t) => {
                if t.dtype() != DType::Bool && !t.dtype().is_integer() {
                    return Err(Error::index(
                        "getitem",
                        format!(
                            "tensors used as indices must be long, int or bool tensors, got {}",
                            t.dtype()
                        ),
                    ));
                }
                adv.push((d, t.clone()));
                d += if t.dtype() == DType::Bool {
                    t.ndim()
                } else {
                    1
                };
            }
        }
    }
    Ok((x.with_layout(layout), adv))
}

/// `x[items]`.
pub fn index(x: &Tensor, items: &[IndexItem]) -> Result<Tensor> {
    let (v, adv) = basic_view(x, items)?;
    if adv.is_empty() {
        if crate::autograd::needs_grad(&[x]) {
            let key = items.to_vec();
            let bw = crate::ops::shape::slice_bw(x, "IndexBackward", move |t| {
                basic_view(t, &key).map(|(v, _)| v)
            });
            crate::autograd::record(bw, &[x], &[&v], &[]);
        }
        return Ok(v);
    }
    advanced_index(&v, &adv)
}

/// `x[items] = value` (value broadcast to the indexed shape, converted to x's dtype).
pub fn index_put_(x: &Tensor, items: &[IndexItem], value: &Tensor) -> Result<()> {
    x.check_writable("setitem")?;
    let (v, adv) = basic_view(x, items)?;
    if adv.is_empty() {
        return elementwise::copy_(&v, value).map_err(|e| match e {
            Error::Shape { msg, .. } => Error::Shape { op: "setitem", msg },
            other => other,
        });
    }
    advanced_put_(&v, &adv, value)
}

/// Gather along the advanced-indexed dims of a basic view (NumPy rules).
pub fn advanced_index(_v: &Tensor, _adv: &[(usize, Tensor)]) -> Result<Tensor> {
    Err(Error::runtime(
        "getitem",
        "advanced indexing is not available yet",
    ))
}

/// Scatter `value` into the advanced-indexed positions of a basic view.
pub fn advanced_put_(_v: &Tensor, _adv: &[(usize, Tensor)], _value: &Tensor) -> Result<()> {
    Err(Error::runtime(
        "setitem",
        "advanced index assignment is not available yet",
    ))
}

/// Indices of non-zero elements: an int64 tensor of shape `[n, ndim]`.
pub fn nonzero(x: &Tensor) -> Result<Tensor> {
    let vals = x.to_f64_vec();
    let nd = x.ndim();
    let mut out: Vec<i64> = vec![];
    let mut idx = vec![0usize; nd];
    for v in vals {
        if v != 0.0 {
            out.extend(idx.iter().map(|&i| i as i64));
        }
        for k in (0..nd).rev() {
            idx[k] += 1;
            if idx[k] < x.shape()[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    let n = out.len() / nd.max(1);
    Tensor::from_vec(out, &[n, nd])
}
