//! Strided iteration: the one place that turns layouts into element offsets.
//!
//! Kernels describe their operands as (shape, strides) in elements; these
//! helpers coalesce dims, walk the outer dims and hand the innermost run
//! (`offsets`, `len`, `inner strides`) to the kernel, serially or split over
//! the thread pool.

use smallvec::SmallVec;

use crate::tensor::layout::is_row_major;
use crate::tensor::Layout;

type Dims = SmallVec<[usize; 6]>;
type Steps = SmallVec<[isize; 6]>;

/// A raw pointer that may cross threads. Kernels guarantee disjoint writes.
#[derive(Copy, Clone)]
pub struct SendPtr<T>(pub *mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    #[inline(always)]
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// Call `f(offset)` for every element of a layout in row-major order.
pub fn for_each_offset(shape: &[usize], strides: &[isize], mut f: impl FnMut(isize)) {
    for_each_row(shape, [strides], |[o], n, [s]| {
        for i in 0..n as isize {
            f(o + i * s);
        }
    });
}

/// Coalesced description of an N-operand iteration space.
pub struct Plan<const N: usize> {
    /// Outer dims (all but the innermost), coalesced.
    pub outer: Dims,
    pub outer_strides: [Steps; N],
    /// Length and strides of the innermost run.
    pub inner: usize,
    pub inner_strides: [isize; N],
}

impl<const N: usize> Plan<N> {
    pub fn new(shape: &[usize], strides: [&[isize]; N]) -> Plan<N> {
        let numel: usize = shape.iter().product();
        if numel > 0 && strides.iter().all(|s| is_row_major(shape, s)) {
            // Every operand dense in row-major order: one run, no coalescing.
            return Plan {
                outer: Dims::new(),
                outer_strides: std::array::from_fn(|_| Steps::new()),
                inner: numel,
                inner_strides: [1; N],
            };
        }
        let (cs, cst) = Layout::coalesce(shape, &strides);
        if cs.is_empty() {
            return Plan {
                outer: Dims::new(),
                outer_strides: std::array::from_fn(|_| Steps::new()),
                inner: if shape.contains(&0) { 0 } else { 1 },
                inner_strides: [0; N],
            };
        }
        let nd = cs.len();
        Plan {
            outer: Dims::from_slice(&cs[..nd - 1]),
            outer_strides: std::array::from_fn(|k| Steps::from_slice(&cst[k][..nd - 1])),
            inner: cs[nd - 1],
            inner_strides: std::array::from_fn(|k| cst[k][nd - 1]),
        }
    }

    pub fn rows(&self) -> usize {
        self.outer.iter().product()
    }

    /// Offsets of the first element of outer row `r`.
    fn unravel(&self, mut r: usize) -> ([isize; N], Dims) {
        let mut idx = Dims::from_elem(0, self.outer.len());
        let mut off = [0isize; N];
        for d in (0..self.outer.len()).rev() {
            let i = r % self.outer[d];
            r /= self.outer[d];
            idx[d] = i;
            for (k, o) in off.iter_mut().enumerate() {
                *o += i as isize * self.outer_strides[k][d];
            }
        }
        (off, idx)
    }

    /// Run rows `[start, end)` serially.
    pub fn run_rows(
        &self,
        start: usize,
        end: usize,
        f: &mut impl FnMut([isize; N], usize, [isize; N]),
    ) {
        if start >= end || self.inner == 0 {
            return;
        }
        let (mut off, mut idx) = self.unravel(start);
        for _ in start..end {
            f(off, self.inner, self.inner_strides);
            // increment the multi-index
            let mut d = self.outer.len();
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                for (k, o) in off.iter_mut().enumerate() {
                    *o += self.outer_strides[k][d];
                }
                if idx[d] < self.outer[d] {
                    break;
                }
                for (k, o) in off.iter_mut().enumerate() {
                    *o -= self.outer_strides[k][d] * self.outer[d] as isize;
                }
                idx[d] = 0;
            }
        }
    }
}

/// Walk every innermost run serially: `f(base offsets, len, inner strides)`.
pub fn for_each_row<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    mut f: impl FnMut([isize; N], usize, [isize; N]),
) {
    let plan = Plan::new(shape, strides);
    plan.run_rows(0, plan.rows(), &mut f);
}

/// True when `strides` are the row-major strides of `shape` (size-1 dims ignored).
#[inline]
pub fn is_dense(shape: &[usize], strides: &[isize]) -> bool {
    let mut expect = 1isize;
    for i in (0..shape.len()).rev() {
        let d = shape[i];
        if d != 1 {
            if strides[i] != expect {
                return false;
            }
            expect *= d as isize;
        }
    }
    true
}

/// Below this many elements work runs on the calling thread.
pub const PAR_MIN: usize = 1 << 15;
/// Innermost runs longer than this are split into segments for threading.
const SEG: usize = 1 << 14;

/// Like [`for_each_row`], but split over the thread pool when there are at
/// least `grain` elements. `f` must only write the elements it is given.
pub fn par_for_each_row<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    grain: usize,
    f: impl Fn([isize; N], usize, [isize; N]) + Sync,
) {
    // Fast path: every operand is dense row-major (the common eager case).
    let n: usize = shape.iter().product();
    if n < grain.max(1) * 2 && strides.iter().all(|s| is_dense(shape, s)) {
        if n > 0 {
            f([0; N], n, [1; N]);
        }
        return;
    }
    let plan = Plan::new(shape, strides);
    let rows = plan.rows();
    let total = rows * plan.inner;
    let threads = crate::par::split();
    if total < grain.max(1) * 2 || threads <= 1 {
        plan.run_rows(0, rows, &mut |o, n, s| f(o, n, s));
        return;
    }
    if rows >= threads * 4 || plan.inner <= SEG {
        // Split rows into ~4 tasks per thread.
        let tasks = (threads * 4).min(rows).max(1);
        let per = rows.div_ceil(tasks);
        crate::par::for_each(tasks, |t| {
            let s = t * per;
            let e = ((t + 1) * per).min(rows);
            plan.run_rows(s, e, &mut |o, n, st| f(o, n, st));
        });
    } else {
        // Few long rows: split each row into segments, about four per
        // thread in all (at least SEG elements: a task per 16 Ki elements
        // costs a measurable share of a memory-bound kernel's time).
        let seg = SEG.max((rows * plan.inner).div_ceil(threads * 4).div_ceil(SEG) * SEG);
        let nseg = plan.inner.div_ceil(seg);
        crate::par::for_each(rows * nseg, |u| {
            let (r, sg) = (u / nseg, u % nseg);
            let start = sg * seg;
            let len = seg.min(plan.inner - start);
            plan.run_rows(r, r + 1, &mut |o, _n, st| {
                let mut o2 = o;
                for k in 0..N {
                    o2[k] += start as isize * st[k];
                }
                f(o2, len, st)
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::layout::contiguous_strides;

    #[test]
    fn visits_transposed_in_order() {
        // shape [2,3] viewed transposed from a [3,2] buffer
        let mut seen = vec![];
        for_each_offset(&[2, 3], &[1, 2], |o| seen.push(o));
        assert_eq!(seen, vec![0, 2, 4, 1, 3, 5]);
        let mut seen = vec![];
        for_each_offset(&[], &[], |o| seen.push(o));
        assert_eq!(seen, vec![0]);
        let mut seen = vec![];
        for_each_offset(&[0, 3], &[3, 1], |o| seen.push(o));
        assert!(seen.is_empty());
    }

    #[test]
    fn negative_strides() {
        let mut seen = vec![];
        for_each_offset(&[4], &[-1], |o| seen.push(o + 3));
        assert_eq!(seen, vec![3, 2, 1, 0]);
    }

    #[test]
    fn parallel_covers_each_element_once() {
        use std::sync::atomic::{AtomicU32, Ordering};
        for shape in [
            vec![3, 70000],
            vec![100000],
            vec![7, 5, 4001],
            vec![1, 1 << 17],
        ] {
            let n: usize = shape.iter().product();
            let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
            let st = contiguous_strides(&shape);
            par_for_each_row(&shape, [&st], 1024, |[o], len, [s]| {
                for i in 0..len as isize {
                    hits[(o + i * s) as usize].fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }
}
