//! WebGPU bundles: a graph's GPU work written out as WGSL modules, a JSON
//! manifest (buffers, bindings, dispatch order, inputs and outputs) and one
//! data file (weights, constants, kernel metadata), so that any WebGPU
//! runtime can run the graph without this library.
//!
//! The bundle is made by running the graph's plan once with the device in
//! recording mode ([`Gpu::record`]): every kernel the executor would launch
//! is captured with its buffers and metadata instead of being run, so the
//! bundle holds exactly the dispatches a run does, and exporting changes no
//! tensor. Tensors that existed before the run (parameters, buffers,
//! optimizer state, graph constants) are read back and stored with their
//! current values; buffers made during the run are written before they are
//! read (scratch slots are shared, see `memory`). Dynamic scalar arguments are fixed at the values given.
//!
//! Manifest (version 1), every index zero-based:
//! - `shaders`: WGSL file names; each module's entry point is `entry_point`.
//! - `buffers`: `{"size", "role", "data"}`; `size` in bytes (a multiple of 4),
//!   `role` one of `input`, `weight` (state read by reference), `constant`
//!   (data the run uploads), `scratch` (made by the run), `meta` (kernel
//!   metadata); `data` is `[offset, length]` in the data file, or null.
//! - `dispatches`: in order, `{"op", "shader", "bindings", "workgroups"}`
//!   with `bindings` a list of `[binding, buffer, offset, size]` (group 0)
//!   and `workgroups` `[x, y, z]`.
//! - `inputs`/`outputs`: `{"name", "buffer", "dtype", "storage", "shape",
//!   "offset", "strides"}`: the tensor's dtype, the element type it is stored
//!   as on the device (`f32`, `f16`, `i32`, `u32`; int64 is stored as i32,
//!   bool as u32 0/1, bfloat16 as f32, float16 as f16 where the exporting
//!   device has `shader-f16` and as f32 otherwise), its shape, and its
//!   element offset and strides in that buffer.
//! - `checks`: `{"input", "min", "max", "op", "dim"}`: the index range
//!   checks the run would make on the host, on the inputs holding indices
//!   (a loader makes them; see `index_checks`).
//! - `features`: the WebGPU features the device running the bundle must be
//!   created with: `["shader-f16"]` when a shader stores float16 natively
//!   (it starts with `enable f16;`), else empty.
//! - `limits`: the device limits the bundle needs (storage buffers per
//!   stage, binding and buffer size, workgroups per dimension).
//! - `memory`: `scratch_bytes` (the shared scratch slots) and
//!   `scratch_bytes_unshared` (what the run's buffers would take apart).
//!   Buffers made and used up within a run share a slot when their
//!   lifetimes do not overlap, as the memory plan does.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::exec::Plan;
use crate::backend::wgpu::context::{get, GpuBuffer, Recording};
use crate::backend::wgpu::shaders::GTy;
use crate::backend::wgpu::{buffer, gty, is_half};
use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};

/// Alignment of each dispatch's metadata in the metadata buffer: WebGPU's
/// default (and largest allowed) `minStorageBufferOffsetAlignment`.
const META_ALIGN: usize = 256;

/// A graph's GPU work, ready to write (see the module docs).
pub struct Bundle {
    pub manifest: Value,
    pub shaders: Vec<String>,
    pub data: Vec<u8>,
}

fn storage_name(t: &Tensor) -> Result<&'static str> {
    if is_half(t.dtype()) {
        return Ok("f16");
    }
    Ok(match gty("export_webgpu", t.dtype())? {
        GTy::F32 => "f32",
        GTy::I32 => "i32",
        GTy::U32 => "u32",
    })
}

fn port(rec: &mut Recording, name: String, t: &Tensor, buf: &Arc<GpuBuffer>) -> Result<Value> {
    let l = t.layout();
    Ok(json!({
        "name": name,
        "buffer": rec.buffer_index(buf),
        "dtype": t.dtype().to_string(),
        "storage": storage_name(t)?,
        "shape": l.shape.to_vec(),
        "offset": l.offset,
        "strides": l.strides.to_vec(),
    }))
}

/// Record one run of `plan` on `args` (GPU tensors, one per argument
/// position, named by `names`) with the scalar slots `scalars`, as a bundle.
pub fn export(plan: &Plan, args: &[Tensor], scalars: &[f64], names: &[String]) -> Result<Bundle> {
    const OP: &str = "export_webgpu";
    for (k, a) in args.iter().enumerate() {
        if a.device() != Device::Gpu(0) {
            return Err(Error::runtime(
                OP,
                format!(
                    "argument {k} is on device {}; a WebGPU bundle records the graph running on the gpu device: capture and export it with GPU tensors (x.to(\"gpu\"))",
                    a.device()
                ),
            ));
        }
        if !a.is_contiguous() || a.layout().offset != 0 {
            return Err(Error::value(
                OP,
                format!("argument {k} must be a contiguous tensor of its own (call .contiguous())"),
            ));
        }
    }
    let g = get()?;
    let (outs, mut rec) = g.record(|| plan.run_with(args, scalars))?;

    let mut inputs = Vec::with_capacity(args.len());
    let mut input_bufs = HashSet::new();
    for (k, a) in args.iter().enumerate() {
        let buf = buffer(OP, a)?;
        let name = names.get(k).cloned().unwrap_or_else(|| format!("input{k}"));
        inputs.push(port(&mut rec, name, a, &buf)?);
        input_bufs.insert(rec.buffer_index(&buf));
    }
    let mut outputs = Vec::with_capacity(outs.len());
    for (k, o) in outs.iter().enumerate() {
        let buf = buffer(OP, o).map_err(|_| {
            Error::runtime(
                OP,
                format!(
                    "output {k} is on device {}; every output of a WebGPU bundle must be computed on the gpu device",
                    o.device()
                ),
            )
        })?;
        outputs.push(port(&mut rec, format!("output{k}"), o, &buf)?);
    }
    drop(outs);
    let checks = index_checks(&mut rec, &inputs)?;
    let output_bufs: HashSet<usize> = outputs
        .iter()
        .filter_map(|o| o["buffer"].as_u64().map(|b| b as usize))
        .collect();
    let (phys, slots) = share_scratch(&rec, &input_bufs, &output_bufs);

    // Buffers, with the data of those that start with contents.
    let mut data: Vec<u8> = Vec::new();
    let mut put = |bytes: &[u8]| -> Value {
        let off = data.len();
        data.extend_from_slice(bytes);
        data.resize(data.len().div_ceil(4) * 4, 0);
        json!([off, bytes.len()])
    };
    let mut buffers = Vec::with_capacity(rec.buffers.len() + 1);
    let mut max_buffer = 4u64;
    let mut unshared = 0u64;
    for (i, b) in rec.buffers.iter().enumerate() {
        max_buffer = max_buffer.max(b.size);
        if phys[i].1 {
            unshared += b.size;
            continue; // a shared scratch slot, listed below
        }
        let (role, init) = if input_bufs.contains(&i) {
            ("input", Value::Null)
        } else if let Some(ex) = &b.existing {
            ("weight", put(&g.download(ex, 0, b.size)?))
        } else if let Some(bytes) = &b.init {
            ("constant", put(bytes))
        } else {
            ("scratch", Value::Null)
        };
        debug_assert_eq!(phys[i].0, buffers.len());
        buffers.push(json!({"size": b.size, "role": role, "data": init}));
    }
    let shared: u64 = slots.iter().sum();
    for &size in &slots {
        buffers.push(json!({"size": size, "role": "scratch", "data": Value::Null}));
    }
    let own = buffers.len() - slots.len();
    let index = |i: usize| -> usize {
        match phys[i] {
            (k, true) => own + k,
            (k, false) => k,
        }
    };
    for p in inputs.iter_mut().chain(outputs.iter_mut()) {
        let b = p["buffer"].as_u64().unwrap_or(0) as usize;
        p["buffer"] = json!(index(b));
    }

    // One metadata buffer, each dispatch's words at an aligned offset.
    let meta_index = buffers.len();
    let mut meta: Vec<u8> = Vec::new();
    let mut dispatches = Vec::with_capacity(rec.dispatches.len());
    let (mut max_bind, mut max_groups, mut max_binding) = (1usize, 1u32, 4u64);
    for d in &rec.dispatches {
        let off = meta.len().div_ceil(META_ALIGN) * META_ALIGN;
        meta.resize(off, 0);
        if d.meta.is_empty() {
            meta.extend_from_slice(&[0; 4]);
        } else {
            meta.extend(d.meta.iter().flat_map(|w| w.to_le_bytes()));
        }
        max_binding = max_binding.max((meta.len() - off) as u64);
        let mut bindings = vec![json!([0, meta_index, off, meta.len() - off])];
        for (j, &b) in d.buffers.iter().enumerate() {
            // A kernel over part of a buffer larger than one binding binds a range of it.
            let (at, size) = d
                .ranges
                .get(j)
                .copied()
                .flatten()
                .unwrap_or((0, rec.buffers[b].size));
            max_binding = max_binding.max(size);
            bindings.push(json!([j + 1, index(b), at, size]));
        }
        max_bind = max_bind.max(bindings.len());
        max_groups = max_groups.max(d.groups.0).max(d.groups.1);
        dispatches.push(json!({
            "op": d.op,
            "shader": d.shader,
            "bindings": bindings,
            "workgroups": [d.groups.0, d.groups.1, 1],
        }));
    }
    let meta_size = (meta.len().max(4) as u64).div_ceil(4) * 4;
    max_buffer = max_buffer.max(meta_size);
    let meta_data = put(&meta);
    buffers.push(json!({"size": meta_size, "role": "meta", "data": meta_data}));

    let shader_files: Vec<String> = (0..rec.shaders.len())
        .map(|k| format!("shaders/{k:03}.wgsl"))
        .collect();
    let features: Vec<&str> = if rec.shaders.iter().any(|s| s.starts_with("enable f16;")) {
        vec!["shader-f16"]
    } else {
        vec![]
    };
    let manifest = json!({
        "format": "ferrograd-webgpu-bundle",
        "version": 1,
        "features": features,
        "entry_point": "main",
        "data": "data.bin",
        "shaders": shader_files,
        "buffers": buffers,
        "dispatches": dispatches,
        "inputs": inputs,
        "outputs": outputs,
        "checks": checks,
        "memory": {
            "scratch_bytes": shared,
            "scratch_bytes_unshared": unshared,
        },
        "limits": {
            "max_storage_buffers_per_shader_stage": max_bind,
            "max_storage_buffer_binding_size": max_binding,
            "max_buffer_size": max_buffer,
            "max_compute_workgroups_per_dimension": max_groups,
        },
    });
    Ok(Bundle {
        manifest,
        shaders: std::mem::take(&mut rec.shaders),
        data,
    })
}

/// The index range checks of the run (see `RecIndexRange`), which a run on
/// the device cannot make: on an input, a `checks` entry of the manifest
/// that the loader makes before uploading; on data the bundle stores
/// (constants, weights), checked here once; on indices the graph computes,
/// refused.
fn index_checks(rec: &mut Recording, inputs: &[Value]) -> Result<Vec<Value>> {
    const OP: &str = "export_webgpu";
    let g = get()?;
    let ranges = std::mem::take(&mut rec.index_ranges);
    let mut out: Vec<Value> = Vec::new();
    for r in ranges {
        let buf = buffer(OP, &r.tensor)?;
        let bi = rec.buffer_index(&buf);
        if let Some(port) = inputs
            .iter()
            .find(|p| p["buffer"].as_u64() == Some(bi as u64))
        {
            let c = json!({"input": port["name"], "min": 0, "max": r.len as i64 - 1, "op": r.op, "dim": r.dim});
            if !out.contains(&c) {
                out.push(c);
            }
            continue;
        }
        let b = &rec.buffers[bi];
        let bytes = if let Some(init) = &b.init {
            init.clone()
        } else if let Some(ex) = &b.existing {
            g.download(ex, 0, b.size)?
        } else {
            return Err(Error::runtime(
                OP,
                format!(
                    "the indices of {} (along dim {}) are computed by the graph, so no loader can check their range before the run; a bundle can hold {} only with indices that are graph inputs or stored tensors",
                    r.op, r.dim, r.op
                ),
            ));
        };
        let words: &[i32] = bytemuck::cast_slice(&bytes[..bytes.len() / 4 * 4]);
        let l = r.tensor.layout();
        let mut bad = None;
        crate::backend::cpu::strided::for_each_offset(&l.shape, &l.strides, |o| {
            let v = words[(l.offset as isize + o) as usize];
            if bad.is_none() && (v < 0 || v as u64 >= r.len) {
                bad = Some(v);
            }
        });
        if let Some(v) = bad {
            return Err(Error::index(
                r.op,
                format!(
                    "index {v} is out of bounds for dimension {} with size {}",
                    r.dim, r.len
                ),
            ));
        }
    }
    Ok(out)
}

/// Where each recorded buffer goes: `(k, false)` = the `k`-th buffer of its
/// own, `(k, true)` = shared scratch slot `k`; and the slots' sizes.
/// Buffers a run makes and only uses in between (no initial data, not an
/// output) share a slot when their lifetimes — first to last dispatch
/// binding them — do not overlap, as the memory plan reuses memory; the
/// run never reads such a buffer before writing it.
pub(crate) fn share_scratch(
    rec: &Recording,
    input_bufs: &HashSet<usize>,
    output_bufs: &HashSet<usize>,
) -> (Vec<(usize, bool)>, Vec<u64>) {
    let n = rec.buffers.len();
    let (mut first, mut last) = (vec![usize::MAX; n], vec![0usize; n]);
    for (j, d) in rec.dispatches.iter().enumerate() {
        for &b in &d.buffers {
            first[b] = first[b].min(j);
            last[b] = last[b].max(j);
        }
    }
    let shareable = |i: usize| {
        let b = &rec.buffers[i];
        b.existing.is_none()
            && b.init.is_none()
            && !input_bufs.contains(&i)
            && !output_bufs.contains(&i)
            && first[i] != usize::MAX
    };
    let mut order: Vec<usize> = (0..n).filter(|&i| shareable(i)).collect();
    order.sort_by_key(|&i| first[i]);
    // (size, last dispatch of its current tenant)
    let mut slots: Vec<(u64, usize)> = Vec::new();
    let mut slot_of = vec![None; n];
    for i in order {
        let size = rec.buffers[i].size;
        let free = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.0 >= size && s.1 < first[i])
            .min_by_key(|(_, s)| s.0)
            .map(|(k, _)| k);
        let k = free.unwrap_or_else(|| {
            slots.push((size, 0));
            slots.len() - 1
        });
        slots[k].1 = last[i];
        slot_of[i] = Some(k);
    }
    let mut own = 0;
    let phys = slot_of
        .iter()
        .map(|s| match s {
            Some(k) => (*k, true),
            None => {
                own += 1;
                (own - 1, false)
            }
        })
        .collect();
    (phys, slots.into_iter().map(|s| s.0).collect())
}

impl Bundle {
    /// Write `manifest.json`, `data.bin` and `shaders/*.wgsl` into `dir`
    /// (created if needed).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let io = |e: std::io::Error| {
            Error::runtime(
                "export_webgpu",
                format!("writing the bundle to {} failed: {e}", dir.display()),
            )
        };
        std::fs::create_dir_all(dir.join("shaders")).map_err(io)?;
        for (k, src) in self.shaders.iter().enumerate() {
            std::fs::write(dir.join(format!("shaders/{k:03}.wgsl")), src).map_err(io)?;
        }
        std::fs::write(dir.join("data.bin"), &self.data).map_err(io)?;
        let text = serde_json::to_string_pretty(&self.manifest).map_err(|e| {
            Error::runtime(
                "export_webgpu",
                format!("encoding the manifest failed: {e}"),
            )
        })?;
        std::fs::write(dir.join("manifest.json"), text).map_err(io)?;
        Ok(())
    }
}
