//! CPU kernel of the sort family (`crate::kernel::sort`): rows in parallel
//! on the thread pool; each row is a full sort, or, when few elements are
//! kept (`Cost::SelectRows`), a selection of the first `k` followed by a
//! sort of those. The order is the definition's total order (NaN largest,
//! ties by index), so both paths give the same result.

use half::{bf16, f16};

use super::reduce::{par_ranges, threads, PAR_MIN};
use super::strided::SendPtr;
use crate::error::{Error, Result};
use crate::kernel::general::{Cost, Def, Plan};
use crate::kernel::sort::{float_less, row_order, Sort};
use crate::tensor::{DType, Element, Tensor, U8};

pub fn sort(s: &Sort, x: &Tensor, values: &Tensor, indices: &Tensor) -> Result<()> {
    let plan = s.plan(&[x.shape()], &[x.dtype()])?;
    if plan.rows.1 > u32::MAX as usize {
        return Err(Error::runtime(
            s.name(),
            format!("rows longer than {} elements are not supported", u32::MAX),
        ));
    }
    let d = s.descending;
    match x.dtype() {
        DType::F32 => rows::<f32, f32>(
            x,
            values,
            indices,
            &plan,
            d,
            |v| v,
            |a, b| float_less(a as f64, b as f64),
        ),
        DType::F64 => rows::<f64, f64>(x, values, indices, &plan, d, |v| v, float_less),
        DType::F16 => rows::<f16, f32>(x, values, indices, &plan, d, f16::to_f32, |a, b| {
            float_less(a as f64, b as f64)
        }),
        DType::BF16 => rows::<bf16, f32>(x, values, indices, &plan, d, bf16::to_f32, |a, b| {
            float_less(a as f64, b as f64)
        }),
        DType::I32 => rows::<i32, i32>(x, values, indices, &plan, d, |v| v, |a, b| a < b),
        DType::I64 => rows::<i64, i64>(x, values, indices, &plan, d, |v| v, |a, b| a < b),
        DType::Bool => rows::<u8, u8>(x, values, indices, &plan, d, |v| v, |a, b| a < b),
        DType::U8 => rows::<U8, u8>(x, values, indices, &plan, d, |v| v.0, |a, b| a < b),
        DType::I8 => rows::<i8, i8>(x, values, indices, &plan, d, |v| v, |a, b| a < b),
        DType::I16 => rows::<i16, i16>(x, values, indices, &plan, d, |v| v, |a, b| a < b),
    }
    Ok(())
}

/// Sort (or select) each `(outer, inner)` row of the contiguous `x` along
/// the middle dim of `plan.rows`, writing the first `k` values and indices.
fn rows<T: Element, K: Copy + Send + Sync>(
    x: &Tensor,
    values: &Tensor,
    indices: &Tensor,
    plan: &Plan,
    descending: bool,
    key: impl Fn(T) -> K + Sync,
    less: impl Fn(K, K) -> bool + Sync + Copy,
) {
    let (outer, n, inner) = plan.rows;
    let k = plan.k;
    if k == 0 || outer * inner == 0 {
        return;
    }
    let xp = SendPtr(x.data_ptr::<T>());
    let vp = SendPtr(values.data_ptr::<T>());
    let ip = SendPtr(indices.data_ptr::<i64>());
    let select = plan.cost == Cost::SelectRows;
    let nrows = outer * inner;
    let tasks = if nrows * n < PAR_MIN {
        1
    } else {
        (threads() * 4).min(nrows)
    };
    par_ranges(nrows, tasks, |a, b| {
        let ord = row_order(less, descending);
        let mut buf: Vec<(K, u32)> = Vec::with_capacity(n);
        for r in a..b {
            let (o, j) = (r / inner, r % inner);
            let src = o * n * inner + j;
            let dst = o * k * inner + j;
            buf.clear();
            // SAFETY: row r of the contiguous input, read only.
            buf.extend((0..n).map(|t| (key(unsafe { *xp.get().add(src + t * inner) }), t as u32)));
            if select && k < n {
                buf.select_nth_unstable_by(k - 1, &ord);
                buf[..k].sort_unstable_by(&ord);
            } else {
                buf.sort_unstable_by(&ord);
            }
            for (t, &(_, i)) in buf[..k].iter().enumerate() {
                // SAFETY: row r of the outputs is written by this task only;
                // the value is the input's element itself (bits kept).
                unsafe {
                    *vp.get().add(dst + t * inner) = *xp.get().add(src + i as usize * inner);
                    *ip.get().add(dst + t * inner) = i as i64;
                }
            }
        }
    });
}
