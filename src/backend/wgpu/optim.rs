//! Optimizer updates on the GPU as multi-tensor kernels.
//!
//! One dispatch updates several parameters: the parameter list is cut into
//! chunks whose distinct buffers (parameters, gradients and state; a buffer
//! several tensors share is bound once) fit the adapter's storage buffers
//! per shader stage, less the metadata's, and each chunk runs the kernel
//! [`shaders::optim_multi`] generated for its size and binding pattern. Its
//! metadata holds one elementwise block per parameter (element count,
//! shape, offsets and strides, parameter words) and a table of the
//! workgroups where each parameter starts, which a workgroup searches for
//! its parameter. Per-step values (learning rate, Adam's bias corrections,
//! SGD's first-step flags) are metadata words, so a step never compiles a
//! kernel the previous one did not.
//!
//! A parameter whose buffers (its own or any of its state's) are larger
//! than one storage binding is updated by the per-parameter kernel
//! ([`shaders::optim_single`]), which works through it in pieces.
//! `FG_GPU_OPTIM_PER_TENSOR=1` sends every parameter that way. On software
//! adapters large parameters get a dispatch of their own (see [`group_max`]).

use std::sync::Arc;

use super::context::{get, GpuBuffer};
use super::dispatch::{bind_written, check_same_device, run_ew};
use super::dtype::{f32_only, is_half};
use super::meta::ew_meta;
use super::shaders::{self, Bindings, OptimRule};
use super::storage::buffer;
use crate::backend::optim::{AdamHyper, OptimKernels, RmspropHyper, SgdHyper};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Parameters one multi-tensor kernel updates at most (bounds its source's size).
const MAX_TENSORS: usize = 32;

/// Optimizer updates on the GPU (see the module docs).
pub struct WgpuOptim;

fn f32s(v: [f64; 8]) -> [u32; 8] {
    v.map(|x| (x as f32).to_bits())
}

fn optim_check(op: &'static str, ts: &[&Tensor]) -> Result<()> {
    f32_only(op, ts)?;
    check_same_device(op, ts)
}

/// Bind operands deduplicated into buffers, every operand written but the
/// gradients (operand 1 of each group of `per` operands).
fn optim_bind(
    op: &'static str,
    ts: &[&Tensor],
    per: usize,
) -> Result<(Bindings, Vec<Arc<GpuBuffer>>)> {
    let (mut bd, bufs) = bind_written(op, ts, 0)?;
    for k in 0..ts.len() {
        if k % per != 1 {
            let j = bd.operand[k];
            bd.bufs[j].1 = true;
        }
    }
    Ok((bd, bufs))
}

/// One parameter's update: its operands (param, grad, state...) in the
/// rule's order, its eight parameter words, and SGD's first-step flag (the
/// per-parameter kernel fixes it in its source; the multi-tensor one reads
/// it from word 4).
struct Item<'a> {
    ts: Vec<&'a Tensor>,
    params: [u32; 8],
    first: bool,
}

/// Whether every parameter goes through the per-parameter kernel (`FG_GPU_OPTIM_PER_TENSOR=1`).
fn per_tensor_only() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| {
        std::env::var("FG_GPU_OPTIM_PER_TENSOR").is_ok_and(|v| !matches!(v.trim(), "" | "0"))
    })
}

/// Parameters with more elements than this get a dispatch of their own
/// (the multi-tensor kernel for one parameter, as fast as the per-parameter
/// one): `FG_GPU_OPTIM_GROUP_MAX=n`, else 1024 on CPU-type (software)
/// adapters and no bound elsewhere. A software driver runs a `switch` on
/// the workgroup's parameter under a mask, every case's loads and stores
/// included, so a chunk of K large parameters costs about K times the
/// memory traffic; measured on lavapipe, grouping wins below about a
/// thousand elements per parameter, where the cost of a dispatch dominates.
fn group_max(g: &super::context::Gpu) -> usize {
    static FORCED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let forced = *FORCED.get_or_init(|| {
        std::env::var("FG_GPU_OPTIM_GROUP_MAX")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
    });
    forced.unwrap_or(if g.info.device_type == wgpu::DeviceType::Cpu {
        1024
    } else {
        usize::MAX
    })
}

/// A chunk ready to dispatch: its kernel, buffers, metadata and workgroups.
struct Chunk {
    src: String,
    bufs: Vec<Arc<GpuBuffer>>,
    meta: Vec<u32>,
    groups: u64,
}

/// The metadata of a chunk (see [`shaders::optim_multi`]) and its workgroup count.
fn chunk_meta(op: &'static str, items: &[&Item<'_>]) -> Result<(Vec<u32>, u64)> {
    let k = items.len();
    let wg = shaders::WG as u64;
    let mut starts = Vec::with_capacity(k + 1);
    let mut w = 0u64;
    starts.push(0u32);
    let mut blocks = Vec::with_capacity(k);
    for it in items {
        let p = it.ts[0];
        blocks.push(ew_meta(op, p.shape(), &it.ts, it.params)?);
        w += (p.numel() as u64).div_ceil(wg);
        if w > u32::MAX as u64 {
            return Err(Error::runtime(
                op,
                format!("{w} workgroups exceed the gpu kernels' 32-bit indexing"),
            ));
        }
        starts.push(w as u32);
    }
    let head = 1 + (k + 1) + k;
    let mut meta = Vec::with_capacity(head + blocks.iter().map(Vec::len).sum::<usize>());
    meta.push(k as u32);
    meta.extend_from_slice(&starts);
    let mut at = head;
    for b in &blocks {
        meta.push(at as u32);
        at += b.len();
    }
    for b in blocks {
        meta.extend(b);
    }
    Ok((meta, w))
}

/// Cut `items` (all with buffers within one binding) into chunks whose
/// distinct buffers fit `budget` bindings, at most [`MAX_TENSORS`] each.
fn chunks<'i, 'a>(
    op: &'static str,
    items: &'i [&'i Item<'a>],
    budget: usize,
) -> Result<Vec<&'i [&'i Item<'a>]>> {
    let mut out = Vec::new();
    let mut ids: Vec<usize> = Vec::new();
    let mut start = 0;
    for (j, it) in items.iter().enumerate() {
        let mut mine: Vec<usize> = Vec::with_capacity(it.ts.len());
        for t in &it.ts {
            let id = buffer(op, t)?.id();
            if !mine.contains(&id) {
                mine.push(id);
            }
        }
        let new = mine.iter().filter(|id| !ids.contains(id)).count();
        if j > start && (ids.len() + new > budget || j - start == MAX_TENSORS) {
            out.push(&items[start..j]);
            start = j;
            ids.clear();
        }
        for id in mine {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    Ok(out)
}

/// Update every item under `rule`: checks first, then the multi-tensor
/// chunks are prepared (bindings and metadata, so a refused operand writes
/// nothing), then dispatched, then the per-parameter fallbacks.
fn run(op: &'static str, rule: OptimRule, items: &[Item<'_>]) -> Result<()> {
    for it in items {
        optim_check(op, &it.ts)?;
    }
    let g = get()?;
    let max = g.max_binding();
    let per = rule.operands();
    let mut multi: Vec<&Item<'_>> = Vec::with_capacity(items.len());
    let mut single: Vec<&Item<'_>> = Vec::new();
    for it in items {
        if it.ts[0].numel() == 0 {
            continue;
        }
        let mut fits = !per_tensor_only();
        for t in &it.ts {
            fits &= buffer(op, t)?.len <= max;
        }
        if fits {
            multi.push(it);
        } else {
            single.push(it);
        }
    }
    // Native float16 tensors after the others, so chunks of one kind share kernels.
    multi.sort_by_key(|it| is_half(it.ts[0].dtype()));
    let budget = (g.limits.max_storage_buffers_per_shader_stage as usize).saturating_sub(1);
    let gm = group_max(g);
    let (small, alone): (Vec<&Item<'_>>, Vec<&Item<'_>>) =
        multi.iter().partition(|it| it.ts[0].numel() <= gm);
    let mut parts = chunks(op, &small, budget)?;
    parts.extend(alone.chunks(1));
    let mut ready = Vec::new();
    for c in parts {
        let ts: Vec<&Tensor> = c.iter().flat_map(|it| it.ts.iter().copied()).collect();
        let (bd, bufs) = optim_bind(op, &ts, per)?;
        if bufs.len() > budget {
            // One parameter alone needs more bindings than the stage has.
            single.extend_from_slice(c);
            continue;
        }
        let (meta, groups) = chunk_meta(op, c)?;
        let src = shaders::optim_multi(&bd, rule, c.len());
        ready.push(Chunk {
            src,
            bufs,
            meta,
            groups,
        });
    }
    let mut prepared = Vec::with_capacity(single.len());
    for it in &single {
        let (bd, bufs) = optim_bind(op, &it.ts, per)?;
        prepared.push((shaders::optim_single(&bd, rule, it.first), bufs));
    }
    for c in &ready {
        let refs: Vec<&Arc<GpuBuffer>> = c.bufs.iter().collect();
        g.dispatch(op, &c.src, &refs, &c.meta, c.groups)?;
    }
    for (it, (src, bufs)) in single.iter().zip(&prepared) {
        run_ew(op, src, &it.ts, bufs, it.params)?;
    }
    Ok(())
}

impl OptimKernels for WgpuOptim {
    fn name(&self) -> String {
        "gpu".into()
    }

    fn sgd(
        &self,
        params: &[Tensor],
        grads: &[Tensor],
        bufs: &[Tensor],
        first: &[bool],
        h: &SgdHyper,
    ) -> Result<()> {
        let p = f32s([
            -h.lr,
            h.weight_decay,
            h.momentum,
            1.0 - h.dampening,
            0.0,
            0.0,
            0.0,
            0.0,
        ]);
        let items: Vec<Item<'_>> = params
            .iter()
            .zip(grads)
            .enumerate()
            .map(|(j, (x, g))| {
                let mut ts = vec![x, g];
                if let Some(b) = bufs.get(j) {
                    ts.push(b);
                }
                let first = first.get(j).copied().unwrap_or(false);
                // Word 4: the multi-tensor kernel's first-step flag.
                let mut params = p;
                params[4] = first as u32;
                Item { ts, params, first }
            })
            .collect();
        let rule = OptimRule::Sgd {
            with_buf: !bufs.is_empty(),
            nesterov: h.nesterov,
            maximize: h.maximize,
            wd: h.weight_decay != 0.0,
        };
        run("sgd_step", rule, &items)
    }

    fn adam(
        &self,
        params: &[Tensor],
        grads: &[Tensor],
        exp_avgs: &[Tensor],
        exp_avg_sqs: &[Tensor],
        max_sqs: &[Tensor],
        steps: &[u64],
        h: &AdamHyper,
    ) -> Result<()> {
        let items: Vec<Item<'_>> = params
            .iter()
            .zip(grads)
            .enumerate()
            .map(|(j, (x, g))| {
                let t = steps[j] as f64;
                let bc1 = 1.0 - h.beta1.powf(t);
                let bc2 = 1.0 - h.beta2.powf(t);
                let params = f32s([
                    -(h.lr / bc1),
                    bc2.sqrt(),
                    h.eps,
                    1.0 - h.beta1,
                    h.beta2,
                    1.0 - h.beta2,
                    h.weight_decay,
                    1.0 - h.lr * h.weight_decay,
                ]);
                let mut ts = vec![x, g, &exp_avgs[j], &exp_avg_sqs[j]];
                if let Some(m) = max_sqs.get(j) {
                    ts.push(m);
                }
                Item {
                    ts,
                    params,
                    first: false,
                }
            })
            .collect();
        let rule = OptimRule::Adam {
            amsgrad: !max_sqs.is_empty(),
            maximize: h.maximize,
            wd: h.weight_decay != 0.0,
            decoupled: h.decoupled,
            low: 1.0 - h.beta1 < 0.5,
        };
        run("adam_step", rule, &items)
    }

    fn rmsprop(
        &self,
        params: &[Tensor],
        grads: &[Tensor],
        square_avgs: &[Tensor],
        bufs: &[Tensor],
        grad_avgs: &[Tensor],
        h: &RmspropHyper,
    ) -> Result<()> {
        let p = f32s([
            -h.lr,
            h.weight_decay,
            h.alpha,
            1.0 - h.alpha,
            h.eps,
            h.momentum,
            0.0,
            0.0,
        ]);
        let items: Vec<Item<'_>> = params
            .iter()
            .zip(grads)
            .enumerate()
            .map(|(j, (x, g))| {
                let mut ts = vec![x, g, &square_avgs[j]];
                if let Some(b) = bufs.get(j) {
                    ts.push(b);
                }
                if let Some(a) = grad_avgs.get(j) {
                    ts.push(a);
                }
                Item {
                    ts,
                    params: p,
                    first: false,
                }
            })
            .collect();
        let rule = OptimRule::Rmsprop {
            with_buf: !bufs.is_empty(),
            centered: !grad_avgs.is_empty(),
            maximize: h.maximize,
            wd: h.weight_decay != 0.0,
            low: 1.0 - h.alpha < 0.5,
        };
        run("rmsprop_step", rule, &items)
    }
}
