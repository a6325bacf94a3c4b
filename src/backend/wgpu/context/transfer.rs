//! Host↔device copies: uploads into fresh buffers and downloads through a
//! staging buffer.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Gpu, GpuBuffer};
use crate::error::{Error, Result};

impl Gpu {
    /// Upload `data` (4-byte elements) into a fresh pool buffer.
    pub fn upload(&self, op: &'static str, data: &[u8]) -> Result<Arc<GpuBuffer>> {
        let b = self.alloc(op, data.len() as u64)?;
        if let Some(rec) = self
            .recording
            .lock()
            .as_mut()
            .and_then(|r| r.mine().then_some(r))
        {
            let i = rec.buffer_index(&b);
            rec.buffers[i].init = Some(data.to_vec());
            if !rec.execute {
                return Ok(b);
            }
        }
        if !data.is_empty() {
            self.queue.write_buffer(&b.buf, 0, data);
        }
        self.counters.uploads.fetch_add(1, Ordering::Relaxed);
        Ok(b)
    }

    /// Read `bytes` bytes at `offset` of `src`: submits the batch and waits.
    pub fn download(&self, src: &GpuBuffer, offset: u64, bytes: u64) -> Result<Vec<u8>> {
        let size = bytes.div_ceil(4) * 4;
        if size == 0 {
            return Ok(Vec::new());
        }
        if self.recording.lock().as_ref().is_some_and(|r| !r.execute) {
            return Err(Error::runtime(
                "export_webgpu",
                "reading GPU data back to the host is not possible while recording a WebGPU bundle: this op runs through the host or checks its data there, so a bundle cannot contain it",
            ));
        }
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut st = self.state.lock();
        let idx = self
            .submit_locked(&mut st, Some((src, offset, &staging, size)))?
            .expect("submitted");
        drop(st);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.wait(idx)?;
        let _ = self.device.poll(wgpu::PollType::Poll);
        let mapped = rx.recv().map_err(|_| {
            Error::runtime(
                "gpu",
                "reading GPU memory failed: the map callback never ran",
            )
        })?;
        mapped.map_err(|e| Error::runtime("gpu", format!("reading GPU memory failed: {e}")))?;
        let out = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::runtime("gpu", format!("reading GPU memory failed: {e}")))?;
            view[..bytes as usize].to_vec()
        };
        staging.unmap();
        self.counters.downloads.fetch_add(1, Ordering::Relaxed);
        Ok(out)
    }
}
