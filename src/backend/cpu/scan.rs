//! CPU cumulative scans (cumsum, cumprod, cummax/cummin where present)
//! along one dim.

use half::{bf16, f16};

use super::reduce::{contiguous_as, par_ranges, split3, threads, AJ, PAR_MIN};
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::kernel::CumOp;
use crate::tensor::{DType, Element, Tensor};

pub fn cumulative(op: CumOp, x: &Tensor, dim: usize, out: &Tensor) -> Result<()> {
    let od = out.dtype();
    let x = contiguous_as(x, od)?;
    let (outer, n, inner) = split3(x.shape(), dim);
    macro_rules! float {
        ($T:ty) => {
            match op {
                CumOp::Sum => scan::<$T, f64>(
                    &x,
                    out,
                    outer,
                    n,
                    inner,
                    0.0,
                    |a, v: $T| a + v.to_f64(),
                    <$T>::from_f64,
                ),
                CumOp::Prod => scan::<$T, f64>(
                    &x,
                    out,
                    outer,
                    n,
                    inner,
                    1.0,
                    |a, v: $T| a * v.to_f64(),
                    <$T>::from_f64,
                ),
            }
        };
    }
    match od {
        DType::F32 => float!(f32),
        DType::F64 => float!(f64),
        DType::F16 => float!(f16),
        DType::BF16 => float!(bf16),
        DType::I64 => match op {
            CumOp::Sum => {
                scan::<i64, i64>(&x, out, outer, n, inner, 0, |a, v| a.wrapping_add(v), |a| a)
            }
            CumOp::Prod => {
                scan::<i64, i64>(&x, out, outer, n, inner, 1, |a, v| a.wrapping_mul(v), |a| a)
            }
        },
        d => {
            return Err(Error::runtime(
                "cumsum",
                format!("the CPU kernel got output dtype {d}"),
            ))
        }
    }
    Ok(())
}

/// Inclusive scan of a contiguous `(outer, n, inner)` tensor along the middle dim.
#[allow(clippy::too_many_arguments)]
fn scan<T: Element, A: Copy + Send + Sync>(
    x: &Tensor,
    out: &Tensor,
    outer: usize,
    n: usize,
    inner: usize,
    init: A,
    step: impl Fn(A, T) -> A + Sync,
    store: impl Fn(A) -> T + Sync,
) {
    let xp = SendPtr(x.data_ptr::<T>());
    let yp = SendPtr(out.data_ptr::<T>());
    let total = outer * n * inner;
    let tasks = if total < PAR_MIN { 1 } else { threads() * 8 };
    if inner == 1 {
        par_ranges(outer, tasks, |a, b| {
            for o in a..b {
                let mut acc = init;
                for i in o * n..(o + 1) * n {
                    // SAFETY: row o, written by this task only.
                    unsafe {
                        acc = step(acc, *xp.get().add(i));
                        *yp.get().add(i) = store(acc);
                    }
                }
            }
        });
    } else {
        let nj = inner.div_ceil(AJ);
        par_ranges(outer * nj, tasks, |a, b| {
            let mut acc = [init; AJ];
            for t in a..b {
                let (o, jc) = (t / nj, t % nj);
                let j0 = jc * AJ;
                let len = AJ.min(inner - j0);
                let acc = &mut acc[..len];
                acc.iter_mut().for_each(|v| *v = init);
                for i in 0..n {
                    let base = o * n * inner + i * inner + j0;
                    // SAFETY: columns j0..j0+len of slab o, written by this task only.
                    let (xs, ys) = unsafe {
                        (
                            std::slice::from_raw_parts(xp.get().add(base) as *const T, len),
                            std::slice::from_raw_parts_mut(yp.get().add(base), len),
                        )
                    };
                    for ((a, &v), y) in acc.iter_mut().zip(xs).zip(ys.iter_mut()) {
                        *a = step(*a, v);
                        *y = store(*a);
                    }
                }
            }
        });
    }
}
