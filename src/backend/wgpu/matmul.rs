//! Matrix multiplication on the device: the batched tiled kernel, or one thread per output.

use std::sync::Arc;

use super::context::{get, GpuBuffer};
use super::dispatch::{bind, check_same_device};
use super::dtype::gty;
use super::shaders::GTy;
use super::{shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Whether float matmuls run the tiled kernel (workgroup-memory tiles, what
/// a GPU needs) rather than one thread per output with no shared loads
/// (faster on software adapters, where barriers are slow): tiled except on
/// a CPU-type adapter; `FG_GPU_MATMUL=tiled|naive` chooses.
fn tiled_matmul() -> Result<bool> {
    static CHOICE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let forced = *CHOICE.get_or_init(|| match std::env::var("FG_GPU_MATMUL") {
        Ok(v) if v.trim() == "tiled" => Some(true),
        Ok(v) if v.trim() == "naive" => Some(false),
        _ => None,
    });
    Ok(forced.unwrap_or(get()?.info.device_type != wgpu::DeviceType::Cpu))
}

impl WgpuBackend {
    pub(super) fn gpu_matmul(
        &self,
        a: &Tensor,
        b: &Tensor,
        out: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let op = "matmul";
        check_same_device(op, &[a, b, out])?;
        let ty = gty(op, a.dtype())?;
        if ty == GTy::U32 {
            return Err(Error::runtime(
                op,
                "not supported on the gpu device for dtype bool",
            ));
        }
        let nd = out.ndim();
        if nd < 2 || a.ndim() != nd || b.ndim() != nd {
            return Err(Error::shape(
                op,
                format!(
                    "gpu kernel expects equal-rank batched operands, got {:?} @ {:?} -> {:?}",
                    a.shape(),
                    b.shape(),
                    out.shape()
                ),
            ));
        }
        let (m, k, n) = (a.shape()[nd - 2], a.shape()[nd - 1], b.shape()[nd - 1]);
        let total = out.numel();
        if total == 0 {
            return Ok(());
        }
        if total > u32::MAX as usize {
            return Err(Error::runtime(
                op,
                format!("{total} outputs exceed the gpu kernels' 32-bit indexing"),
            ));
        }
        let nb = nd - 2;
        // An adapter that stops long loops (see `Gpu::loop_limit`): K in
        // pieces short enough for the kernel's loop over K, each piece after
        // the first adding its product to the earlier ones'.
        if let Some(limit) = get()?.loop_limit {
            let piece = (limit.saturating_sub(64 + 16 * nd as u64) / 2).max(1) as usize;
            if k > piece {
                let mut k0 = 0;
                while k0 < k {
                    let len = piece.min(k - k0);
                    let ap = a.with_layout(a.layout().narrow(op, -1, k0 as isize, len)?);
                    let bp = b.with_layout(b.layout().narrow(op, -2, k0 as isize, len)?);
                    self.matmul(&ap, &bp, out, accumulate || k0 > 0)?;
                    k0 += len;
                }
                return Ok(());
            }
        }
        if split::needed(op, &[a, b, out])? {
            // Axes: the batch dims, then M, N and K; a piece after the
            // first along K adds its product to the earlier ones'.
            let dims = |x: usize, y: usize| -> Vec<usize> { (0..nb).chain([x, y]).collect() };
            let axes = [dims(nb, nb + 2), dims(nb + 2, nb + 1), dims(nb, nb + 1)];
            let mut sizes = out.shape().to_vec();
            sizes.push(k);
            let space = split::Space {
                ts: &[a, b, out],
                axes: axes.to_vec(),
                sizes,
                splittable: vec![true; nb + 3],
            };
            return split::in_pieces(op, &space, &mut |v, r| {
                self.matmul(&v[0], &v[1], &v[2], accumulate || r[nb + 2].0 > 0)
            });
        }
        let (bd, bufs) = bind(op, &[a, b, out])?;
        let s = |t: &Tensor, d: usize| t.strides()[d] as i32 as u32;
        let mut meta = vec![
            total as u32,
            m as u32,
            n as u32,
            k as u32,
            nb as u32,
            accumulate as u32,
            a.offset() as u32,
            b.offset() as u32,
            out.offset() as u32,
            s(a, nd - 2),
            s(a, nd - 1),
            s(b, nd - 2),
            s(b, nd - 1),
            s(out, nd - 2),
            s(out, nd - 1),
        ];
        meta.extend(out.shape()[..nb].iter().map(|&v| v as u32));
        for t in [a, b, out] {
            meta.extend((0..nb).map(|d| s(t, d)));
        }
        let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
        if ty == GTy::F32 && tiled_matmul()? {
            let t = shaders::MM_TILE as usize;
            let groups = (total / (m * n)) * m.div_ceil(t) * n.div_ceil(t);
            meta[0] = groups as u32;
            return get()?.dispatch(op, &shaders::matmul_tiled(&bd), &refs, &meta, groups as u64);
        }
        get()?.dispatch(
            op,
            &shaders::matmul(&bd, ty),
            &refs,
            &meta,
            (total as u64).div_ceil(shaders::WG as u64),
        )
    }
}
