//! Convolutions as implicit GEMMs on the device (the kernels are
//! [`shaders::conv_gemm`]): which kernel family runs, and the dispatch of
//! one convolution whose operands fit their bindings (the callers in
//! `mod.rs` split images, channels and row bands first, as for the direct
//! kernels).

use std::sync::Arc;

use super::context::{get, GpuBuffer};
use super::dispatch::bind;
use super::limits::check_items;
use super::shaders::{self, ConvGemm, CONV_TILE};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Whether the convolution `kind` with weight shape `w` (O, C/groups, KH,
/// KW) runs as an implicit GEMM (else the direct kernel, one thread per
/// output). `FG_GPU_CONV=gemm|direct` chooses; by default the GEMMs run on
/// hardware adapters and the direct kernels on CPU-type (software)
/// adapters, where workgroup barriers are slow and the direct kernels
/// measured faster. A GEMM whose narrow side is under a quarter of a tile
/// (depthwise convolutions: one channel per group) would leave most of
/// each workgroup idle, so it too runs the direct kernel unless forced.
pub(super) fn chosen(kind: ConvGemm, w: &[usize], groups: usize) -> Result<bool> {
    if let Some(f) = forced() {
        return Ok(f);
    }
    let &[o, cg, kh, kw] = w else {
        return Ok(false);
    };
    let og = o / groups.max(1);
    let side = match kind {
        ConvGemm::Forward { .. } => og,
        ConvGemm::InputGrad => cg,
        ConvGemm::WeightGrad => og.min(cg * kh * kw),
    };
    Ok(side * 4 >= CONV_TILE as usize && get()?.info.device_type != wgpu::DeviceType::Cpu)
}

/// The family `FG_GPU_CONV` forces: `Some(true)` for the implicit GEMMs,
/// `Some(false)` for the direct kernels, `None` to choose per convolution.
pub(super) fn forced() -> Option<bool> {
    static CHOICE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *CHOICE.get_or_init(|| match std::env::var("FG_GPU_CONV") {
        Ok(v) if v.trim() == "gemm" => Some(true),
        Ok(v) if v.trim() == "direct" => Some(false),
        _ => None,
    })
}

/// The K elements one dispatch may sum where the adapter stops an
/// invocation's loops after `limit` trips in all: whole tiles, with a
/// margin of a fifth for the trips the loop structure itself costs.
fn k_piece(limit: Option<u64>) -> u64 {
    match limit {
        Some(limit) => {
            let tiles = limit.saturating_sub(256) / (1 + CONV_TILE as u64) * 4 / 5;
            (tiles.max(1) * CONV_TILE as u64).max(CONV_TILE as u64)
        }
        None => u64::MAX,
    }
}

/// Run the implicit GEMM `kind` over operands `ts` (inputs dense from their
/// offsets, the output last, dense from offset 0) with the direct kernels'
/// convolution metadata `meta` (see [`super::conv_meta`]). The sum over K
/// runs in pieces short enough for the adapter's loop limit, each later
/// piece adding to the output (the bias goes in with the first).
pub(super) fn run(op: &'static str, kind: ConvGemm, ts: &[&Tensor], meta: &[u32]) -> Result<()> {
    let u = |k: usize| meta[k] as u64;
    let (nn, c, h, w, o, oh, ow, kh, kw, g) =
        (u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(16));
    let (cg, og) = (c / g, o / g);
    let (rows, cols, k) = match kind {
        ConvGemm::Forward { .. } => (nn * oh * ow, og, cg * kh * kw),
        ConvGemm::InputGrad => (nn * h * w, cg, og * kh * kw),
        ConvGemm::WeightGrad => (og, cg * kh * kw, nn * oh * ow),
    };
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let t = CONV_TILE as u64;
    let groups = g * rows.div_ceil(t) * cols.div_ceil(t);
    check_items(op, groups as usize)?;
    let (bd, bufs) = bind(op, ts)?;
    let src = shaders::conv_gemm(&bd, kind);
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    let gpu = get()?;
    let piece = k_piece(gpu.loop_limit);
    if k > u32::MAX as u64 {
        return Err(Error::runtime(
            op,
            format!("a sum over {k} terms exceeds the gpu kernels' 32-bit indexing"),
        ));
    }
    let mut md = meta.to_vec();
    md.resize(24, 0);
    md[0] = groups as u32;
    let mut k0 = 0u64;
    loop {
        let k1 = k.min(k0.saturating_add(piece));
        md[21] = k0 as u32;
        md[22] = k1 as u32;
        md[23] = (k0 > 0) as u32;
        gpu.dispatch(op, &src, &refs, &md, groups)?;
        k0 = k1;
        if k0 >= k {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_pieces_stay_under_the_loop_limit() {
        assert_eq!(k_piece(None), u64::MAX);
        for limit in [100u64, 1000, 65_535, 1 << 20] {
            let k = k_piece(Some(limit));
            assert_eq!(k % CONV_TILE as u64, 0);
            if limit > 1000 {
                assert!(ConvGemm::trips(k) + 64 < limit, "{limit}: {k}");
            }
        }
    }
}
