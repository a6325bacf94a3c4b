//! Shapes, strides and view arithmetic.
//!
//! A [`Layout`] maps an N-d index to an element offset into storage:
//! `offset + Σ index[d] * strides[d]` (strides in elements, signed so that
//! `flip` can be a view). Every function here is a pure function of metadata;
//! shape rules take `&[usize]` dims and return `Result`, so they can later be
//! lifted to symbolic dimensions without changing their callers' structure.

use smallvec::SmallVec;

use crate::error::{Error, Result};

pub type Shape = SmallVec<[usize; 4]>;
pub type Strides = SmallVec<[isize; 4]>;

/// Format a shape like PyTorch (`[2, 3]`).
pub fn fmt_shape(s: &[usize]) -> String {
    format!("{s:?}")
}

/// Product of dims, checked for overflow.
pub fn numel_checked(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Row-major (C) strides for a shape.
/// True when `strides` lay `shape` out row-major with no gaps (the strides
/// of size-1 dims do not matter; a shape with a zero-size dim holds nothing
/// and counts as contiguous).
#[inline]
pub fn is_row_major(shape: &[usize], strides: &[isize]) -> bool {
    let mut expect: isize = 1;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d == 0 {
            return true;
        }
        if d != 1 {
            if s != expect {
                return false;
            }
            expect *= d as isize;
        }
    }
    true
}

pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut st: Strides = SmallVec::from_elem(0, shape.len());
    let mut acc: isize = 1;
    for i in (0..shape.len()).rev() {
        st[i] = acc;
        acc = acc.wrapping_mul(shape[i].max(1) as isize);
    }
    st
}

/// Normalise a possibly negative dim index against `ndim`.
pub fn norm_dim(op: &'static str, dim: isize, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as isize;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(Error::index(
            op,
            format!(
                "dimension out of range (expected to be in range of [{}, {}], but got {dim})",
                -n,
                n - 1
            ),
        ));
    }
    Ok(d as usize)
}

/// NumPy broadcasting of two shapes.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Shape> {
    let n = a.len().max(b.len());
    let mut out: Shape = SmallVec::from_elem(0, n);
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::shape(
                op,
                format!(
                    "shapes {} and {} cannot be broadcast together (dimension {i}: {da} vs {db})",
                    fmt_shape(a),
                    fmt_shape(b)
                ),
            ));
        };
    }
    Ok(out)
}

#[derive(Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    pub shape: Shape,
    pub strides: Strides,
    /// Offset of element `[0, 0, ...]` in elements.
    pub offset: usize,
}

impl Clone for Layout {
    /// Copies the dims as slices (SmallVec's own `clone` goes element by
    /// element through an iterator: several times slower on every op).
    #[inline]
    fn clone(&self) -> Layout {
        Layout {
            shape: Shape::from_slice(&self.shape),
            strides: Strides::from_slice(&self.strides),
            offset: self.offset,
        }
    }
}

impl Layout {
    /// A contiguous row-major layout.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: SmallVec::from_slice(shape),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    #[inline]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    #[inline]
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the elements are laid out row-major with no gaps.
    pub fn is_contiguous(&self) -> bool {
        is_row_major(&self.shape, &self.strides)
    }

    /// Range of element offsets `[lo, hi)` this layout touches (empty → `(offset, offset)`).
    pub fn span(&self) -> (isize, isize) {
        if self.shape.contains(&0) {
            return (self.offset as isize, self.offset as isize);
        }
        let mut lo = self.offset as isize;
        let mut hi = self.offset as isize;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let ext = (d as isize - 1) * s;
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (lo, hi + 1)
    }

    /// Reorder dims: `dims` must be a permutation of `0..ndim`.
    pub fn permute(&self, op: &'static str, dims: &[isize]) -> Result<Layout> {
        let n = self.ndim();
        if dims.len() != n {
            return Err(Error::shape(
                op,
                format!(
                    "number of dims don't match: permutation has {} dims, tensor of shape {} has {n}",
                    dims.len(),
                    fmt_shape(&self.shape)
                ),
            ));
        }
        let mut seen = [false; 64];
        let mut shape = Shape::new();
        let mut strides = Strides::new();
        for &d in dims {
            let d = norm_dim(op, d, n)?;
            if seen[d] {
                return Err(Error::value(
                    op,
                    format!("repeated dim {d} in permutation {dims:?}"),
                ));
            }
            seen[d] = true;
            shape.push(self.shape[d]);
            strides.push(self.strides[d]);
        }
        Ok(Layout {
            shape,
            strides,
            offset: self.offset,
        })
    }

    pub fn transpose(&self, op: &'static str, d0: isize, d1: isize) -> Result<Layout> {
        let n = self.ndim();
        if n == 0 {
            return Ok(self.clone());
        }
        let a = norm_dim(op, d0, n)?;
        let b = norm_dim(op, d1, n)?;
        let mut l = self.clone();
        l.shape.swap(a, b);
        l.strides.swap(a, b);
        Ok(l)
    }

    /// `len` elements along `dim` from index `start` every `step` (may be negative;
    /// the caller has normalised the range as Python's `slice.indices` does).
    pub fn slice(&self, dim: usize, start: usize, len: usize, step: isize) -> Layout {
        let mut l = self.clone();
        if len > 0 {
            l.offset = (self.offset as isize + start as isize * self.strides[dim]) as usize;
        }
        l.shape[dim] = len;
        l.strides[dim] = self.strides[dim] * step;
        l
    }

    /// `narrow(dim, start, length)`.
    pub fn narrow(
        &self,
        op: &'static str,
        dim: isize,
        start: isize,
        length: usize,
    ) -> Result<Layout> {
        let d = norm_dim(op, dim, self.ndim())?;
        let size = self.shape[d] as isize;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || s + length as isize > size {
            return Err(Error::index(
                op,
                format!(
                    "start ({start}) + length ({length}) exceeds dimension size ({size}) of dim {d} for shape {}",
                    fmt_shape(&self.shape)
                ),
            ));
        }
        Ok(self.slice(d, s as usize, length, 1))
    }

    /// Remove `dim` by selecting index `idx` along it.
    pub fn select(&self, op: &'static str, dim: usize, idx: isize) -> Result<Layout> {
        let size = self.shape[dim] as isize;
        let i = if idx < 0 { idx + size } else { idx };
        if i < 0 || i >= size {
            return Err(Error::index(
                op,
                format!(
                    "index {idx} is out of bounds for dimension {dim} with size {size} (shape {})",
                    fmt_shape(&self.shape)
                ),
            ));
        }
        let mut l = self.clone();
        l.offset = (self.offset as isize + i * self.strides[dim]) as usize;
        l.shape.remove(dim);
        l.strides.remove(dim);
        Ok(l)
    }

    pub fn unsqueeze(&self, op: &'static str, dim: isize) -> Result<Layout> {
        let d = norm_dim(op, dim, self.ndim() + 1)?;
        let mut l = self.clone();
        let st = if d < self.ndim() {
            self.strides[d] * self.shape[d] as isize
        } else {
            1
        };
        l.shape.insert(d, 1);
        l.strides.insert(d, st);
        Ok(l)
    }

    /// Drop size-1 dims (all of them, or the listed ones; listed dims of size ≠ 1 are kept, as PyTorch does).
    pub fn squeeze(&self, op: &'static str, dims: Option<&[isize]>) -> Result<Layout> {
        let n = self.ndim();
        let mut drop = vec![false; n];
        match dims {
            None => {
                for (i, &d) in self.shape.iter().enumerate() {
                    drop[i] = d == 1;
                }
            }
            Some(ds) => {
                for &d in ds {
                    if n == 0 {
                        norm_dim(op, d, 1)?;
                        continue;
                    }
                    let d = norm_dim(op, d, n)?;
                    drop[d] = self.shape[d] == 1;
                }
            }
        }
        let mut l = Layout {
            shape: Shape::new(),
            strides: Strides::new(),
            offset: self.offset,
        };
        for (i, &dropped) in drop.iter().enumerate() {
            if !dropped {
                l.shape.push(self.shape[i]);
                l.strides.push(self.strides[i]);
            }
        }
        Ok(l)
    }

    /// Broadcast to `shape` with stride-0 dims (`expand`); `-1`-style "keep" is resolved by the caller.
    pub fn expand(&self, op: &'static str, shape: &[usize]) -> Result<Layout> {
        let n = shape.len();
        if n < self.ndim() {
            return Err(Error::shape(
                op,
                format!(
                    "the number of sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({}) (shape {} to {})",
                    self.ndim(),
                    fmt_shape(&self.shape),
                    fmt_shape(shape)
                ),
            ));
        }
        let lead = n - self.ndim();
        let mut strides = Strides::from_elem(0, n);
        for i in 0..n {
            if i < lead {
                continue;
            }
            let d = self.shape[i - lead];
            if d == shape[i] {
                strides[i] = self.strides[i - lead];
            } else if d == 1 {
                strides[i] = 0;
            } else {
                return Err(Error::shape(
                    op,
                    format!(
                        "the expanded size of the tensor ({}) must match the existing size ({d}) at non-singleton dimension {i}; target shape {}, tensor shape {}",
                        shape[i],
                        fmt_shape(shape),
                        fmt_shape(&self.shape)
                    ),
                ));
            }
        }
        Ok(Layout {
            shape: SmallVec::from_slice(shape),
            strides,
            offset: self.offset,
        })
    }

    /// Try to express `shape` as a view of this layout (no copy). `None` when a copy is needed.
    pub fn reshape_view(&self, shape: &[usize]) -> Option<Layout> {
        if self.is_contiguous() {
            return Some(Layout {
                shape: SmallVec::from_slice(shape),
                strides: contiguous_strides(shape),
                offset: self.offset,
            });
        }
        // General case: match groups of old dims whose elements are evenly
        // strided against groups of new dims with the same product.
        let old: Vec<(usize, isize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&d, _)| d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let mut new_strides = Strides::from_elem(0, shape.len());
        let mut oi = 0;
        let mut ni = 0;
        while ni < shape.len() || oi < old.len() {
            // Skip unit new dims.
            if ni < shape.len() && shape[ni] == 1 {
                new_strides[ni] = 1;
                ni += 1;
                continue;
            }
            if oi >= old.len() || ni >= shape.len() {
                return None;
            }
            // Accumulate one chunk.
            let chunk_start_o = oi;
            let mut po = old[oi].0;
            oi += 1;
            let chunk_start_n = ni;
            let mut pn = shape[ni];
            ni += 1;
            while po != pn {
                if po < pn {
                    if oi >= old.len() {
                        return None;
                    }
                    po *= old[oi].0;
                    oi += 1;
                } else {
                    if ni >= shape.len() {
                        return None;
                    }
                    pn *= shape[ni];
                    ni += 1;
                }
            }
            // Old chunk must be contiguous within itself.
            for k in chunk_start_o..oi - 1 {
                if old[k].1 != old[k + 1].1 * old[k + 1].0 as isize {
                    return None;
                }
            }
            // Assign new strides from the innermost old stride.
            let mut st = old[oi - 1].1;
            for k in (chunk_start_n..ni).rev() {
                new_strides[k] = st;
                st *= shape[k] as isize;
            }
        }
        Some(Layout {
            shape: SmallVec::from_slice(shape),
            strides: new_strides,
            offset: self.offset,
        })
    }

    /// Merge adjacent dims that are contiguous with each other (for kernels' loops).
    /// Works jointly over several layouts of the same shape.
    pub fn coalesce(shape: &[usize], strides: &[&[isize]]) -> (Shape, Vec<Strides>) {
        let mut out_shape = Shape::new();
        let mut out_strides: Vec<Strides> = vec![Strides::new(); strides.len()];
        for d in 0..shape.len() {
            if shape[d] == 1 {
                continue;
            }
            if let Some(&last) = out_shape.last() {
                let mergeable = strides
                    .iter()
                    .enumerate()
                    .all(|(k, s)| *out_strides[k].last().unwrap() == s[d] * shape[d] as isize);
                if mergeable {
                    *out_shape.last_mut().unwrap() = last * shape[d];
                    for (k, s) in strides.iter().enumerate() {
                        *out_strides[k].last_mut().unwrap() = s[d];
                    }
                    continue;
                }
            }
            out_shape.push(shape[d]);
            for (k, s) in strides.iter().enumerate() {
                out_strides[k].push(s[d]);
            }
        }
        (out_shape, out_strides)
    }
}

/// Resolve a user shape that may contain one `-1` against `numel`.
pub fn infer_shape(
    op: &'static str,
    spec: &[isize],
    numel: usize,
    from: &[usize],
) -> Result<Shape> {
    let mut infer = None;
    let mut prod: usize = 1;
    for (i, &d) in spec.iter().enumerate() {
        if d == -1 {
            if infer.is_some() {
                return Err(Error::value(op, "only one dimension can be inferred (-1)"));
            }
            infer = Some(i);
        } else if d < 0 {
            return Err(Error::value(
                op,
                format!("invalid shape dimension {d} in {spec:?}"),
            ));
        } else {
            prod = prod.checked_mul(d as usize).ok_or(Error::Memory {
                op,
                bytes: usize::MAX,
            })?;
        }
    }
    let mut out: Shape = spec.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if prod == 0 || !numel.is_multiple_of(prod) {
            return Err(Error::shape(
                op,
                format!(
                    "shape {spec:?} is invalid for input of size {numel} (shape {})",
                    fmt_shape(from)
                ),
            ));
        }
        out[i] = numel / prod;
    } else if prod != numel {
        return Err(Error::shape(
            op,
            format!(
                "shape {spec:?} is invalid for input of size {numel} (shape {})",
                fmt_shape(from)
            ),
        ));
    }
    Ok(out)
}

/// Call `f(offset)` for `count` consecutive row-major positions of
/// `(shape, strides)` starting at linear index `start`.
#[inline]
pub fn walk_offsets(
    shape: &[usize],
    strides: &[isize],
    start: usize,
    count: usize,
    mut f: impl FnMut(isize),
) {
    if count == 0 {
        return;
    }
    let nd = shape.len();
    let mut idx: Shape = smallvec::smallvec![0; nd];
    let mut off = 0isize;
    let mut r = start;
    for d in (0..nd).rev() {
        let i = r % shape[d];
        r /= shape[d];
        idx[d] = i;
        off += i as isize * strides[d];
    }
    for c in 0..count {
        f(off);
        if c + 1 == count {
            break;
        }
        let mut d = nd;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            off -= strides[d] * shape[d] as isize;
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn offsets_walk_in_row_major_order() {
        let walk = |shape: &[usize], strides: &[isize]| {
            let mut v = vec![];
            let n = shape.iter().product();
            walk_offsets(shape, strides, 0, n, |o| v.push(o));
            v
        };
        // a (2, 3) row-major matrix's transpose, viewed (3, 2)
        assert_eq!(walk(&[3, 2], &[1, 3]), vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(walk(&[], &[]), vec![0]);
        assert!(walk(&[2, 0, 3], &[0, 3, 1]).is_empty());
        // a broadcast dim and a negative (flipped) stride
        assert_eq!(walk(&[2, 2], &[0, -1]), vec![0, -1, 0, -1]);
        // from a start, a count
        let mut v = vec![];
        walk_offsets(&[3, 2], &[1, 3], 3, 2, |o| v.push(o));
        assert_eq!(v, vec![4, 2]);
    }
    use super::*;

    #[test]
    fn strides_and_contiguity() {
        let l = Layout::contiguous(&[2, 3, 4]);
        assert_eq!(&l.strides[..], &[12, 4, 1]);
        assert!(l.is_contiguous());
        let t = l.transpose("t", 0, 2).unwrap();
        assert_eq!(&t.shape[..], &[4, 3, 2]);
        assert!(!t.is_contiguous());
        assert!(Layout::contiguous(&[0, 3]).is_contiguous());
    }

    #[test]
    fn broadcasting() {
        assert_eq!(&broadcast_shapes("b", &[3, 1], &[4]).unwrap()[..], &[3, 4]);
        assert_eq!(&broadcast_shapes("b", &[], &[2, 2]).unwrap()[..], &[2, 2]);
        assert_eq!(
            &broadcast_shapes("b", &[0, 1], &[1, 5]).unwrap()[..],
            &[0, 5]
        );
        let e = broadcast_shapes("add", &[3], &[4]).unwrap_err();
        assert!(e.to_string().contains("add") && e.to_string().contains("[3]"));
    }

    #[test]
    fn views() {
        let l = Layout::contiguous(&[4, 5]);
        let s = l.slice(1, 1, 2, 2);
        assert_eq!(s.offset, 1);
        assert_eq!(&s.strides[..], &[5, 2]);
        let sel = l.select("select", 0, -1).unwrap();
        assert_eq!(sel.offset, 15);
        assert_eq!(&sel.shape[..], &[5]);
        let u = l.unsqueeze("u", 1).unwrap();
        assert_eq!(&u.shape[..], &[4, 1, 5]);
        assert_eq!(&u.squeeze("s", None).unwrap().shape[..], &[4, 5]);
        let e = Layout::contiguous(&[3, 1])
            .expand("expand", &[2, 3, 4])
            .unwrap();
        assert_eq!(&e.strides[..], &[0, 1, 0]);
        assert!(Layout::contiguous(&[3, 2])
            .expand("expand", &[3, 4])
            .is_err());
        assert_eq!(l.span(), (0, 20));
    }

    #[test]
    fn reshape_views() {
        let l = Layout::contiguous(&[2, 3, 4]);
        let t = l.transpose("t", 1, 2).unwrap(); // [2,4,3] strides [12,1,4]
        assert!(t.reshape_view(&[8, 3]).is_none());
        assert!(t.reshape_view(&[2, 12]).is_none());
        let v = t.reshape_view(&[2, 1, 4, 3]).unwrap();
        assert_eq!(&v.strides[..], &[12, 1, 1, 4]);
        // Slicing rows keeps row groups mergeable.
        let s = Layout::contiguous(&[4, 6]).slice(1, 0, 3, 1); // [4,3] strides [6,1]
        assert!(s.reshape_view(&[12]).is_none());
        let v = s.reshape_view(&[2, 2, 3]).unwrap();
        assert_eq!(&v.strides[..], &[12, 6, 1]);
    }

    #[test]
    fn infer() {
        assert_eq!(
            &infer_shape("view", &[-1, 4], 12, &[12]).unwrap()[..],
            &[3, 4]
        );
        assert!(infer_shape("view", &[-1, 5], 12, &[12]).is_err());
        assert!(infer_shape("view", &[-1, -1], 12, &[12]).is_err());
        assert_eq!(
            &infer_shape("view", &[0, -1], 0, &[0])
                .unwrap_err()
                .to_string()[..4],
            "view"
        );
    }

    #[test]
    fn coalesce_dims() {
        let a = contiguous_strides(&[2, 3, 4]);
        let (s, st) = Layout::coalesce(&[2, 3, 4], &[&a, &a]);
        assert_eq!(&s[..], &[24]);
        assert_eq!(&st[0][..], &[1]);
        let b: Strides = SmallVec::from_slice(&[0, 4, 1]);
        let (s, st) = Layout::coalesce(&[2, 3, 4], &[&a, &b]);
        assert_eq!(&s[..], &[2, 12]);
        assert_eq!(&st[1][..], &[0, 1]);
    }
}
