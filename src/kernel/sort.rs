//! The sort family's one definition: [`Sort`] keeps the first `k` elements
//! of each row along `dim` in a total order, with their int64 indices.
//!
//! `sort` is `k = None` (the whole dim), `topk` is `k = Some(k)`; `argsort`,
//! `msort`, `kthvalue`, `median` and `nanmedian` are compositions of it (in
//! `ops::sort`). The order (shared by every backend, so results agree bit for
//! bit): floats compare by value with NaN above every number (as PyTorch
//! sorts), `-0.0 == 0.0`; equal keys keep their input order (lower index
//! first) whether or not `stable` was asked for, so a backend's indices are
//! deterministic and equal to every other backend's. `descending` reverses
//! the value order only (NaN first, ties still by index).
//!
//! Gradient: the values' gradient goes back to the input positions the
//! indices name (a scatter into zeros); indices carry none.

use super::general::{Cost, Def, GradOps, Plan, PySig};
use crate::error::{Error, Result};
use crate::tensor::layout::{fmt_shape, norm_dim};
use crate::tensor::{DType, Tensor};

/// Attributes of one application (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sort {
    pub dim: isize,
    /// `None`: sort the whole dim; `Some(k)`: keep the first `k` (topk).
    pub k: Option<usize>,
    pub descending: bool,
    pub stable: bool,
}

/// `a` before `b` in the ascending total order (NaN largest) of floats
/// (integers compare as themselves).
#[inline]
pub fn float_less(a: f64, b: f64) -> bool {
    a < b || (b.is_nan() && !a.is_nan())
}

/// Row order of two `(key, index)` pairs: by key in the asked direction,
/// then by index.
#[inline]
pub fn row_order<K: Copy>(
    less: impl Fn(K, K) -> bool,
    descending: bool,
) -> impl Fn(&(K, u32), &(K, u32)) -> std::cmp::Ordering {
    move |a, b| {
        let (x, y) = if descending { (b.0, a.0) } else { (a.0, b.0) };
        if less(x, y) {
            std::cmp::Ordering::Less
        } else if less(y, x) {
            std::cmp::Ordering::Greater
        } else {
            a.1.cmp(&b.1)
        }
    }
}

/// Rows at least this many times longer than `k` are selected, not sorted.
pub const SELECT_RATIO: usize = 8;

const fn mask(ds: &[DType]) -> u16 {
    let mut m = 0u16;
    let mut i = 0;
    while i < ds.len() {
        m |= 1 << ds[i] as u8;
        i += 1;
    }
    m
}

impl Def for Sort {
    fn name(&self) -> &'static str {
        if self.k.is_some() {
            "topk"
        } else {
            "sort"
        }
    }
    fn backward_name(&self) -> &'static str {
        if self.k.is_some() {
            "TopkBackward"
        } else {
            "SortBackward"
        }
    }
    const DTYPES: u16 = mask(&[
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ]);
    const PURE: bool = true;

    fn plan(&self, shapes: &[&[usize]], dtypes: &[DType]) -> Result<Plan> {
        let name = self.name();
        let (&[shape], &[dt]) = (shapes, dtypes) else {
            return Err(Error::runtime(name, "expects one input tensor"));
        };
        if Self::DTYPES & (1 << dt as u8) == 0 {
            return Err(Error::dtype(name, format!("does not support dtype {dt}")));
        }
        let d = norm_dim(name, self.dim, shape.len())?;
        let (outer, n, inner) = if shape.is_empty() {
            (1, 1, 1)
        } else {
            (
                shape[..d].iter().product(),
                shape[d],
                shape[d + 1..].iter().product(),
            )
        };
        let k = match self.k {
            None => n,
            Some(k) if k <= n => k,
            Some(k) => {
                return Err(Error::runtime(
                    name,
                    format!(
                        "k ({k}) is out of range: dim {} of the input of shape {} has size {n}",
                        self.dim,
                        fmt_shape(shape)
                    ),
                ))
            }
        };
        if shape.is_empty() && k != 1 {
            return Err(Error::runtime(
                name,
                format!("k ({k}) is out of range for a 0-d input (k must be 1)"),
            ));
        }
        let mut out = shape.to_vec();
        if !out.is_empty() {
            out[d] = k;
        }
        let cost = if k.saturating_mul(SELECT_RATIO) <= n {
            Cost::SelectRows
        } else {
            Cost::SortRows
        };
        Ok(Plan {
            outs: vec![(out.clone(), dt), (out, DType::I64)],
            rows: (outer, n, inner),
            k,
            cost,
        })
    }

    fn differentiable(&self, out: usize) -> bool {
        out == 0
    }
    fn saves(&self) -> &'static [usize] {
        &[1]
    }

    fn vjp(
        &self,
        ops: &dyn GradOps,
        x_shape: &[usize],
        saved: &[Tensor],
        g: &Tensor,
    ) -> Result<Tensor> {
        let idx = &saved[0];
        if x_shape.is_empty() {
            // A 0-d input sorts to itself (k is 1).
            return Ok(g.clone());
        }
        let zeros = ops.zeros(x_shape, g.dtype(), g)?;
        ops.scatter(&zeros, self.dim, idx, g)
    }

    const ONNX: &'static str = "TopK(x, k; axis=dim, largest=descending, sorted=1)";

    const PY: &'static [PySig] = &[
        PySig {
            name: "sort",
            signature: "(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False)",
            returns: "return_types.sort",
            doc: "Sort along `dim`: a named tuple (values, indices) with int64 indices. NaN sorts as the largest value; equal values keep their input order (every sort is stable).",
            method: true,
        },
        PySig {
            name: "argsort",
            signature: "(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False)",
            returns: "Tensor",
            doc: "The int64 indices that sort `input` along `dim` (see `sort`).",
            method: true,
        },
        PySig {
            name: "msort",
            signature: "(input: Tensor)",
            returns: "Tensor",
            doc: "`input` sorted along dim 0 (the values of `sort(input, 0)`).",
            method: true,
        },
        PySig {
            name: "topk",
            signature: "(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True)",
            returns: "return_types.topk",
            doc: "The `k` largest (or smallest) elements along `dim` as a named tuple (values, indices). The results are always sorted; equal values keep their input order.",
            method: true,
        },
        PySig {
            name: "kthvalue",
            signature: "(input: Tensor, k: int, dim: int = -1, keepdim: bool = False)",
            returns: "return_types.kthvalue",
            doc: "The `k`-th smallest element (1-based) along `dim` and its index, as a named tuple (values, indices).",
            method: true,
        },
        PySig {
            name: "median",
            signature: "(input: Tensor, dim: int | None = None, keepdim: bool = False)",
            returns: "Tensor | return_types.median",
            doc: "The lower median. Without `dim`: a 0-d tensor over all elements; with `dim`: a named tuple (values, indices). A slice holding NaN has median NaN (its first NaN).",
            method: true,
        },
        PySig {
            name: "nanmedian",
            signature: "(input: Tensor, dim: int | None = None, keepdim: bool = False)",
            returns: "Tensor | return_types.nanmedian",
            doc: "`median` ignoring NaN (NaN only where a slice is all NaN).",
            method: true,
        },
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sort(k: Option<usize>) -> Sort {
        Sort {
            dim: -1,
            k,
            descending: false,
            stable: false,
        }
    }

    #[test]
    fn plan_shapes_and_errors() {
        let p = sort(Some(2)).plan(&[&[3, 20]], &[DType::F32]).unwrap();
        assert_eq!(p.outs[0].0, vec![3, 2]);
        assert_eq!(p.outs[1], (vec![3, 2], DType::I64));
        assert_eq!((p.rows, p.k, p.cost), ((3, 20, 1), 2, Cost::SelectRows));
        let p = Sort {
            dim: 0,
            ..sort(None)
        }
        .plan(&[&[4, 5]], &[DType::I32])
        .unwrap();
        assert_eq!((p.rows, p.k, p.cost), ((1, 4, 5), 4, Cost::SortRows));
        let e = sort(Some(4)).plan(&[&[2, 3]], &[DType::F32]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("topk") && m.contains("[2, 3]") && m.contains("k (4)"),
            "{m}"
        );
        let p = sort(None).plan(&[&[]], &[DType::F64]).unwrap();
        assert_eq!(p.outs[0].0, Vec::<usize>::new());
    }

    #[test]
    fn order_puts_nan_last_and_ties_by_index() {
        let mut v = [
            (f64::NAN, 0u32),
            (1.0, 1),
            (-0.0, 2),
            (0.0, 3),
            (f64::NAN, 4),
        ];
        v.sort_by(row_order(float_less, false));
        let idx: Vec<u32> = v.iter().map(|p| p.1).collect();
        assert_eq!(idx, vec![2, 3, 1, 0, 4]);
        v.sort_by(row_order(float_less, true));
        let idx: Vec<u32> = v.iter().map(|p| p.1).collect();
        assert_eq!(idx, vec![0, 4, 1, 2, 3]);
    }
}
