//! The sort family's kernel (`crate::kernel::sort`) on the device: every
//! row's `(key, index)` pairs are padded to a power of two and sorted by a
//! bitonic network in global memory (one dispatch per step over all rows;
//! see `shaders::sort_step`), then the first `k` indices are written out
//! and the values gathered from the input by them, so the values keep the
//! input's bits (float16 included). No data goes through the host.

use super::context::get;
use super::dispatch::{check_same_device, run_items};
use super::dtype::gty;
use super::limits::check_items;
use super::views::as_shape;
use super::{shaders, split, WgpuBackend};
use crate::error::{Error, Result};
use crate::kernel::general::Def;
use crate::kernel::sort::Sort;
use crate::tensor::{DType, Device, Tensor};

impl WgpuBackend {
    /// `values`, `indices` = the first `k` of each row of the contiguous
    /// `x` in the definition's order (shapes from its plan).
    pub(super) fn gpu_sort(
        &self,
        s: &Sort,
        x: &Tensor,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<()> {
        let op = s.name();
        check_same_device(op, &[x, values, indices])?;
        let ty = gty(op, x.dtype())?;
        let plan = s.plan(&[x.shape()], &[x.dtype()])?;
        let (outer, n, inner) = plan.rows;
        let k = plan.k;
        let rows = outer * inner;
        if k == 0 || rows == 0 {
            return Ok(());
        }
        let p = n.next_power_of_two().max(2);
        check_items(op, rows.saturating_mul(p))?;
        let key_dt = match ty {
            shaders::GTy::F32 => DType::F32,
            shaders::GTy::I32 => DType::I32,
            shaders::GTy::U32 => DType::Bool,
        };
        let keys = Tensor::empty(&[rows * p], key_dt, Device::Gpu(0))?;
        let idx = Tensor::empty(&[rows * p], DType::I32, Device::Gpu(0))?;
        if split::needed(op, &[x, &keys, &idx, indices])? {
            return Err(Error::runtime(
                op,
                format!(
                    "{rows} rows of {n} elements (padded to {p}) need buffers larger than this adapter binds at once ({} bytes); sort fewer or shorter rows at a time",
                    get()?.max_binding()
                ),
            ));
        }
        let off = |t: &Tensor| t.offset() as u32;
        let (p32, n32, in32) = (p as u32, n as u32, inner as u32);
        run_items(
            op,
            shaders::sort_init,
            &[x, &keys, &idx],
            &[1, 2],
            &[
                (rows * p) as u32,
                1,
                p32,
                n32,
                in32,
                off(x),
                off(&keys),
                off(&idx),
            ],
            rows * p,
        )?;
        let steps = rows * p / 2;
        let mut size = 2;
        while size <= p {
            let mut j = size / 2;
            while j >= 1 {
                run_items(
                    op,
                    |bd| shaders::sort_step(bd, ty),
                    &[&keys, &idx],
                    &[0, 1],
                    &[
                        steps as u32,
                        1,
                        p32,
                        n32,
                        j as u32,
                        size as u32,
                        s.descending as u32,
                        off(&keys),
                        off(&idx),
                    ],
                    steps,
                )?;
                j /= 2;
            }
            size *= 2;
        }
        let ind3 = as_shape(indices, &[outer, k, inner])?;
        run_items(
            op,
            shaders::sort_indices,
            &[&idx, &ind3],
            &[1],
            &[
                (rows * k) as u32,
                1,
                p32,
                k as u32,
                in32,
                off(&idx),
                off(&ind3),
            ],
            rows * k,
        )?;
        let x3 = as_shape(x, &[outer, n, inner])?;
        let v3 = as_shape(values, &[outer, k, inner])?;
        self.gather_run(&x3, 1, &ind3, &v3)
    }
}
