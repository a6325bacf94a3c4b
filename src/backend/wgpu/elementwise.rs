//! Elementwise ops on the device: copies and casts, fills, unary and binary ops, `where`, fused
//! unary gradients, triangles and fused elementwise programs.

use super::context::get;
use super::dispatch::{bind, bind_written, check_same_device, dispatch_ew, run_ew, unshare};
use super::dtype::{gpu_float, gty, is_half};
use super::meta::{sat_word, scalar_bits};
use super::shaders::GTy;
use super::storage::upload;
use super::{shaders, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Device, Scalar, Tensor};

/// A GPU copy of `t` converted to bool (for `where` conditions of other dtypes).
fn as_bool(t: &Tensor) -> Result<Tensor> {
    if t.dtype() == DType::Bool {
        return Ok(t.clone());
    }
    let out = Tensor::empty(t.shape(), DType::Bool, t.device())?;
    WgpuBackend.cast_copy(t, &out)?;
    Ok(out)
}

impl WgpuBackend {
    pub(super) fn gpu_cast_copy(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        let op = "copy";
        match (src.device(), dst.device()) {
            (Device::Gpu(_), Device::Gpu(_)) => {}
            (Device::Cpu, Device::Gpu(_)) => {
                // Host values into a GPU tensor: upload, then copy on the device.
                let up = upload(src, dst.device())?;
                return self.cast_copy(&up, dst);
            }
            (a, b) => {
                return Err(Error::runtime(
                    op,
                    format!("expected all tensors to be on the same device, but found {b} and {a}"),
                ))
            }
        }
        let (from, to) = (gty(op, src.dtype())?, gty(op, dst.dtype())?);
        let src = if src.shares_storage(dst)
            && (from != to || is_half(src.dtype()) != is_half(dst.dtype()))
        {
            let tmp = Tensor::empty(src.shape(), src.dtype(), src.device())?;
            self.cast_copy(src, &tmp)?;
            tmp
        } else {
            src.clone()
        };
        let (b, bufs) = bind(op, &[&src, dst])?;
        run_ew(
            op,
            &shaders::cast(&b, from, to),
            &[&src, dst],
            &bufs,
            [0; 8],
        )
    }

    pub(super) fn gpu_fill(&self, dst: &Tensor, value: Scalar) -> Result<()> {
        let op = "fill";
        let ty = gty(op, dst.dtype())?;
        let word = scalar_bits(op, value, dst.dtype(), ty)?;
        let (b, bufs) = bind(op, &[dst])?;
        run_ew(
            op,
            &shaders::fill(&b, ty),
            &[dst],
            &bufs,
            [word, 0, 0, 0, 0, 0, 0, 0],
        )
    }

    pub(super) fn gpu_unary(&self, uop: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
        let op = uop.name();
        check_same_device(op, &[x, out])?;
        let (ti, to) = (gty(op, x.dtype())?, gty(op, out.dtype())?);
        let (b, bufs) = bind(op, &[x, out])?;
        let src = shaders::unary(&b, uop, ti, to).ok_or_else(|| {
            Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            )
        })?;
        let p = shaders::unary_params(uop);
        let params = match ti {
            GTy::F32 => [
                (p[0] as f32).to_bits(),
                (p[1] as f32).to_bits(),
                0,
                0,
                0,
                0,
                0,
                0,
            ],
            // Integer bounds (clamp's) beyond the 32 bits every stored value
            // fits in saturate: they clamp nothing, as on the CPU.
            _ => [sat_word(p[0]), sat_word(p[1]), 0, 0, 0, 0, 0, 0],
        };
        run_ew(op, &src, &[x, out], &bufs, params)
    }

    pub(super) fn gpu_binary(
        &self,
        bop: BinaryOp,
        a: &Tensor,
        b: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let op = bop.name();
        check_same_device(op, &[a, b, out])?;
        let (ty, to) = (gty(op, a.dtype())?, gty(op, out.dtype())?);
        let v = unshare(op, &[a, b, out], 1)?;
        let (a, b) = (&v[0], &v[1]);
        let (bd, bufs) = bind(op, &[a, b, out])?;
        let src = shaders::binary(&bd, bop, ty, to).ok_or_else(|| {
            Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", a.dtype()),
            )
        })?;
        run_ew(op, &src, &[a, b, out], &bufs, [0; 8])
    }

    pub(super) fn gpu_where_(
        &self,
        cond: &Tensor,
        a: &Tensor,
        b: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let op = "where";
        check_same_device(op, &[cond, a, b, out])?;
        let c = as_bool(cond)?;
        let v = unshare(op, &[&c, a, b, out], 1)?;
        let (c, a, b) = (&v[0], &v[1], &v[2]);
        let (bd, bufs) = bind(op, &[c, a, b, out])?;
        run_ew(
            op,
            &shaders::where_(&bd, GTy::U32),
            &[c, a, b, out],
            &bufs,
            [0; 8],
        )
    }

    pub(super) fn gpu_unary_grad(
        &self,
        uop: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        g: &Tensor,
        out: &Tensor,
    ) -> Result<bool> {
        let op = uop.name();
        check_same_device(op, &[x, y, g, out])?;
        // float16/bfloat16 compute in float32, rounded once on store (their
        // gradients written out of ops would round every intermediate).
        if !gpu_float(x.dtype()) || [y, g, out].iter().any(|t| t.dtype() != x.dtype()) {
            return Ok(false);
        }
        let (bd, bufs) = bind(op, &[x, y, g, out])?;
        let Some(src) = shaders::unary_grad(&bd, uop) else {
            return Ok(false);
        };
        let p = shaders::unary_params(uop);
        let mut params = [0u32; 8];
        params[0] = (p[0] as f32).to_bits();
        params[1] = (p[1] as f32).to_bits();
        run_ew(op, &src, &[x, y, g, out], &bufs, params)?;
        Ok(true)
    }

    pub(super) fn gpu_tri(&self, x: &Tensor, out: &Tensor, k: i64, upper: bool) -> Result<()> {
        let op = if upper { "triu" } else { "tril" };
        check_same_device(op, &[x, out])?;
        let ty = gty(op, x.dtype())?;
        let nd = out.ndim();
        let (rows, cols) = (out.shape()[nd - 2], out.shape()[nd - 1]);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let k = k.clamp(-(rows as i64), cols as i64) as i32;
        let (b, bufs) = bind(op, &[x, out])?;
        let params = [rows as u32, cols as u32, k as u32, upper as u32, 0, 0, 0, 0];
        run_ew(op, &shaders::tri(&b, ty), &[x, out], &bufs, params)
    }

    pub(super) fn gpu_fused(
        &self,
        k: &crate::kernel::fused::FusedKernel,
        ins: &[Tensor],
        outs: &[Tensor],
    ) -> Result<bool> {
        let op = "fused";
        let all: Vec<&Tensor> = ins.iter().chain(outs).collect();
        check_same_device(op, &all)?;
        if !k.reductions.is_empty() {
            // Reductions at the end of a program have no WGSL form (the
            // fusion pass forms them for CPU graphs only; this serves a
            // graph moved to the GPU afterwards).
            return Ok(false);
        }
        if k.compute != DType::F32 {
            return Err(Error::dtype(
                op,
                format!(
                    "a fused kernel computing in {} cannot run on the gpu device",
                    k.compute
                ),
            ));
        }
        // Inputs broadcast to the kernel's shape (stride 0 where they repeat).
        let wide = ins
            .iter()
            .map(|t| {
                Tensor::from_parts(
                    t.storage().clone(),
                    t.layout().expand(op, &k.shape)?,
                    t.dtype(),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let ts: Vec<&Tensor> = wide.iter().chain(outs).collect();
        let (bd, bufs) = bind_written(op, &ts, outs.len())?;
        let max_bind = get()?.limits.max_storage_buffers_per_shader_stage as usize;
        let in_tys = wide
            .iter()
            .map(|t| gty(op, t.dtype()))
            .collect::<Result<Vec<_>>>()?;
        let src = match shaders::fused(&bd, k, &in_tys) {
            // One binding is the metadata.
            Some(src) if bufs.len() < max_bind => src,
            // More tensors than a kernel may bind (or an op without a WGSL
            // form): the program runs as one kernel per instruction.
            _ => return Ok(false),
        };
        dispatch_ew(op, &src, &k.shape, &ts, &bufs, [0; 8]).map(|()| true)
    }
}
