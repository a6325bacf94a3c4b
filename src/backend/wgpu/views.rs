//! Device tensors laid out as the kernels need them: dense copies and temporaries, re-laid-out
//! copies, row views, broadcast values and host round trips.

use super::WgpuBackend;
use crate::backend::Backend;
use crate::error::Result;
use crate::tensor::{DType, Device, Layout, Scalar, Tensor};

/// Run `f` on `out` when it is one dense block from offset 0 (what the
/// kernels write), else on a dense temporary that is then copied into `out`.
pub(super) fn dense_out(out: &Tensor, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    if out.is_contiguous() && out.offset() == 0 {
        return f(out);
    }
    let o = Tensor::empty(out.shape(), out.dtype(), out.device())?;
    f(&o)?;
    WgpuBackend.cast_copy(&o, out)
}

/// A new GPU tensor of `shape` laid out with `dim` innermost (the other
/// dims row-major around it).
pub(super) fn dim_last(
    op: &'static str,
    shape: &[usize],
    dim: usize,
    dtype: DType,
) -> Result<Tensor> {
    let order: Vec<usize> = (0..shape.len())
        .filter(|&d| d != dim)
        .chain([dim])
        .collect();
    laid_out(op, shape, &order, dtype)
}

/// A new GPU tensor of `shape` whose dims lie in memory in `order`
/// (outermost first), viewed with its dims in their logical order.
fn laid_out(op: &'static str, shape: &[usize], order: &[usize], dtype: DType) -> Result<Tensor> {
    let moved: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
    let t = Tensor::empty(&moved, dtype, Device::Gpu(0))?;
    let mut back = vec![0isize; shape.len()];
    for (k, &d) in order.iter().enumerate() {
        back[d] = k as isize;
    }
    let l = t.layout().permute(op, &back)?;
    Tensor::from_parts(t.storage().clone(), l, dtype)
}

/// A copy of `t` laid out with `dims` outermost (in their order), so that
/// what one index of them selects is one dense block.
pub(super) fn outer_first(op: &'static str, t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let order: Vec<usize> = dims
        .iter()
        .copied()
        .chain((0..t.ndim()).filter(|d| !dims.contains(d)))
        .collect();
    let c = laid_out(op, t.shape(), &order, t.dtype())?;
    WgpuBackend.cast_copy(t, &c)?;
    Ok(c)
}

/// Run `f` on `out` when it is contiguous (kernels that write their result
/// densely from its offset), else on a dense temporary then copied into `out`.
pub(super) fn into_dense(out: &Tensor, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    if out.is_contiguous() {
        return f(out);
    }
    dense_out(out, f)
}

/// Run `f` on a CPU tensor shaped like `out`, then upload the result into `out`.
pub(super) fn via_host(out: &Tensor, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    let h = Tensor::empty(out.shape(), out.dtype(), Device::Cpu)?;
    f(&h)?;
    WgpuBackend.cast_copy(&h, out)
}

/// A contiguous `t` viewed as `rows` rows of `len` elements (a view).
pub(super) fn as_rows(t: &Tensor, rows: usize, len: usize) -> Result<Tensor> {
    as_shape(t, &[rows, len])
}

/// A contiguous `t` viewed with the same number of elements as `shape`.
pub(super) fn as_shape(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let mut l = Layout::contiguous(shape);
    l.offset = t.offset();
    Tensor::from_parts(t.storage().clone(), l, t.dtype())
}

/// `t` itself when contiguous, else a contiguous copy on the device.
pub(super) fn dense(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    let out = Tensor::empty(t.shape(), t.dtype(), t.device())?;
    WgpuBackend.cast_copy(t, &out)?;
    Ok(out)
}

impl WgpuBackend {
    /// `value` as a one-element device tensor broadcast (a view) to `shape`.
    pub(super) fn splat(
        &self,
        op: &'static str,
        value: Scalar,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        let t = Tensor::empty(&[], dtype, Device::Gpu(0))?;
        self.fill(&t, value)?;
        let l = t.layout().expand(op, shape)?;
        Tensor::from_parts(t.storage().clone(), l, dtype)
    }

    /// `t` (keepdim per-line values) broadcast as a view to `shape`.
    pub(super) fn spread(&self, op: &'static str, t: &Tensor, shape: &[usize]) -> Result<Tensor> {
        let l = t.layout().expand(op, shape)?;
        Tensor::from_parts(t.storage().clone(), l, t.dtype())
    }

    /// Copy `t` (dense from offset 0) into `out`, which holds the same elements in the
    /// same order under another shape (reduced dims dropped or kept).
    pub(super) fn copy_dense_as(&self, t: &Tensor, out: &Tensor) -> Result<()> {
        let flat = Tensor::from_parts(
            t.storage().clone(),
            Layout::contiguous(out.shape()),
            t.dtype(),
        )?;
        self.cast_copy(&flat, out)
    }
}
