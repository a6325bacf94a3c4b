//! The pipeline cache (one compute pipeline per WGSL source) and the bind
//! groups of a dispatch.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Gpu, GpuBuffer};
use crate::error::{Error, Result};

/// A compiled kernel and which of its bindings are writable.
pub type Kernel = (Arc<wgpu::ComputePipeline>, Arc<[bool]>);

/// Which bindings of a kernel are writable, from its WGSL declarations
/// (`@binding(j) var<storage, read_write>`), indexed by binding number.
fn writable_bindings(src: &str) -> Vec<bool> {
    let mut w: Vec<bool> = vec![];
    for line in src.lines() {
        let Some(rest) = line.split("@binding(").nth(1) else {
            continue;
        };
        if !line.contains("var<storage") {
            continue;
        }
        let Some(j) = rest
            .split(')')
            .next()
            .and_then(|d| d.trim().parse::<usize>().ok())
        else {
            continue;
        };
        if w.len() <= j {
            w.resize(j + 1, false);
        }
        w[j] = line.contains("read_write");
    }
    w
}

impl Gpu {
    /// A compute pipeline for `src` (compiled once per distinct source).
    pub(super) fn pipeline(&self, op: &'static str, src: &str) -> Result<Kernel> {
        if let Some(p) = self.pipelines.lock().get(src) {
            return Ok(p.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(op),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        let pipe = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(op),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::runtime(
                op,
                format!("the GPU kernel failed to compile: {e}"),
            ));
        }
        self.counters.pipelines.fetch_add(1, Ordering::Relaxed);
        let p = (Arc::new(pipe), Arc::from(writable_bindings(src)));
        self.pipelines.lock().insert(src.to_string(), p.clone());
        Ok(p)
    }

    /// The compiled kernel for `src` and which of its bindings are writable.
    pub fn kernel(&self, op: &'static str, src: &str) -> Result<Kernel> {
        self.pipeline(op, src)
    }

    /// The byte size a binding of the whole of `b` covers.
    pub fn whole_binding(&self, b: &GpuBuffer) -> u64 {
        b.cap.min(self.max_binding()).max(b.len)
    }

    /// A bind group for `pipe`: the metadata range `meta` = (buffer, offset,
    /// size) at binding 0, then `bufs[j]` = (buffer, offset, size) at j + 1.
    pub fn bind_group(
        &self,
        pipe: &wgpu::ComputePipeline,
        meta: (&GpuBuffer, u64, u64),
        bufs: &[(&GpuBuffer, u64, u64)],
    ) -> wgpu::BindGroup {
        fn entry<'a>(
            binding: u32,
            (b, off, size): (&'a GpuBuffer, u64, u64),
        ) -> wgpu::BindGroupEntry<'a> {
            wgpu::BindGroupEntry {
                binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &b.buf,
                    offset: b.base() + off,
                    size: std::num::NonZeroU64::new(size.max(4)),
                }),
            }
        }
        let mut entries = Vec::with_capacity(bufs.len() + 1);
        entries.push(entry(0, meta));
        entries.extend(
            bufs.iter()
                .enumerate()
                .map(|(j, &b)| entry(j as u32 + 1, b)),
        );
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipe.get_bind_group_layout(0),
            entries: &entries,
        })
    }
}
