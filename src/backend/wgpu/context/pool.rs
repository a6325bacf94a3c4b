//! Device buffers and their pool: allocation in size classes, reuse once the
//! batches that used a buffer have completed, windows of a buffer, and the
//! memory statistics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::capture::RecBuffer;
use super::device::GPU;
use super::{Gpu, GpuBuffer, Narrow, Pool, MIN_BUF};
use crate::error::{Error, Result};

impl GpuBuffer {
    pub fn id(&self) -> usize {
        self as *const GpuBuffer as usize
    }

    /// Keep `host` (a contiguous CPU tensor of the buffer's elements, from
    /// element 0, owned by nobody else) as a copy of the buffer's contents.
    /// Every kernel that binds the buffer writable drops it, and kernels are
    /// the only way the device writes an existing buffer, so while it is
    /// there it equals the buffer: host reads of small uploaded tensors
    /// (class targets, indices) then need no download and no wait.
    pub fn set_shadow(&self, host: crate::tensor::Tensor) {
        *self.shadow.lock() = Some(host);
        self.has_shadow.store(true, Ordering::Release);
    }

    /// The host copy of the buffer's contents, if still valid.
    pub fn shadow(&self) -> Option<crate::tensor::Tensor> {
        if !self.has_shadow.load(Ordering::Acquire) {
            return None;
        }
        self.shadow.lock().clone()
    }

    /// Mark the buffer as holding `n` float16 or bfloat16 values: every
    /// kernel that writes it is followed by a rounding pass.
    pub fn set_narrow(&self, ty: Narrow, n: u64) {
        *self.narrow.lock() = Some((ty, n));
    }

    pub(super) fn written(&self) {
        if self.has_shadow.load(Ordering::Acquire) {
            self.has_shadow.store(false, Ordering::Release);
            *self.shadow.lock() = None;
        }
        if let Some((p, _)) = &self.parent {
            p.written();
        }
    }

    /// Record that batch `batch` uses the buffer (the buffer it is a window of, too).
    pub(super) fn used(&self, batch: u64) {
        self.last_use.store(batch, Ordering::Release);
        if let Some((p, _)) = &self.parent {
            p.used(batch);
        }
    }

    /// Where this buffer starts in the `wgpu` buffer it binds (0 unless a window).
    pub fn base(&self) -> u64 {
        self.parent.as_ref().map_or(0, |p| p.1)
    }

    /// A window of `len` bytes of this buffer from byte `base` (a multiple
    /// of the storage-offset alignment): kernels bind it as a buffer of its
    /// own, so one that works on a small view of a buffer larger than one
    /// storage binding binds only the bytes the view covers. Writes through
    /// the window count as writes of this buffer; it holds this buffer alive
    /// and returns nothing to the pool when dropped.
    pub fn window(self: &Arc<Self>, base: u64, len: u64) -> Arc<GpuBuffer> {
        let (root, base) = match &self.parent {
            Some((p, b)) => (p.clone(), b + base),
            None => (self.clone(), base),
        };
        // A binding's size is a multiple of 4 bytes (float16 windows may end mid-word).
        let len = len
            .div_ceil(4)
            .saturating_mul(4)
            .min(root.cap - base.min(root.cap));
        debug_assert!(base + len <= root.cap);
        let narrow =
            (*root.narrow.lock()).map(|(ty, n)| (ty, n.saturating_sub(base / 4).min(len / 4)));
        Arc::new(GpuBuffer {
            buf: root.buf.clone(),
            cap: len,
            len,
            last_use: AtomicU64::new(0),
            shadow: Mutex::new(None),
            has_shadow: AtomicBool::new(false),
            narrow: Mutex::new(narrow),
            parent: Some((root, base)),
        })
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if self.parent.is_some() {
            return;
        }
        if let Some(Ok(g)) = GPU.get() {
            g.release(
                self.buf.clone(),
                self.cap,
                self.last_use.load(Ordering::Acquire),
            );
        }
    }
}

/// Round a request to its pool size class (four classes per power of two).
pub fn size_class(n: u64) -> u64 {
    let n = n.max(MIN_BUF);
    if n <= 4096 {
        return n.next_power_of_two();
    }
    let p = 63 - n.leading_zeros() as u64;
    let step = 1u64 << (p - 2);
    n.div_ceil(step) * step
}

/// Snapshot of the device counters and pool.
pub struct Stats {
    pub uploads: u64,
    pub downloads: u64,
    pub submits: u64,
    pub waits: u64,
    pub dispatches: u64,
    pub pipelines: u64,
    pub buffers_created: u64,
    pub buffers_in_use: u64,
    pub bytes_in_use: u64,
    pub peak_bytes: u64,
    /// Bytes of every buffer handed out since the start (a running total).
    pub bytes_allocated_total: u64,
    pub buffers_cached: u64,
    pub bytes_cached: u64,
    pub pending_dispatches: u64,
}

impl Gpu {
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let pending = self.state.lock().dispatches as u64;
        let p = self.pool.lock();
        let deferred_bytes: u64 = p.deferred.iter().map(|d| d.1).sum();
        Stats {
            uploads: c.uploads.load(Ordering::Relaxed),
            downloads: c.downloads.load(Ordering::Relaxed),
            submits: c.submits.load(Ordering::Relaxed),
            waits: c.waits.load(Ordering::Relaxed),
            dispatches: c.dispatches.load(Ordering::Relaxed),
            pipelines: c.pipelines.load(Ordering::Relaxed),
            buffers_created: c.buffers_created.load(Ordering::Relaxed),
            buffers_in_use: p.in_use_count,
            bytes_in_use: p.in_use_bytes,
            peak_bytes: p.peak_bytes,
            bytes_allocated_total: p.allocated_bytes,
            buffers_cached: p.cached_count + p.deferred.len() as u64,
            bytes_cached: p.cached_bytes + deferred_bytes,
            pending_dispatches: pending,
        }
    }

    /// Restart the peak from the bytes in use now.
    pub fn reset_peak(&self) {
        let mut p = self.pool.lock();
        p.peak_bytes = p.in_use_bytes;
    }

    /// Drop every cached (free) buffer.
    pub fn empty_cache(&self) {
        let mut p = self.pool.lock();
        p.free.clear();
        p.cached_bytes = 0;
        p.cached_count = 0;
    }

    fn retire(&self, p: &mut Pool) {
        let done = self.completed.load(Ordering::Acquire);
        if p.deferred.iter().all(|d| d.0 > done) {
            return;
        }
        let mut keep = Vec::with_capacity(p.deferred.len());
        for (b, cap, buf) in std::mem::take(&mut p.deferred) {
            if b <= done {
                p.free.entry(cap).or_default().push(buf);
                p.cached_bytes += cap;
                p.cached_count += 1;
            } else {
                keep.push((b, cap, buf));
            }
        }
        p.deferred = keep;
    }

    /// A buffer of at least `bytes` bytes from the pool.
    pub fn alloc(&self, op: &'static str, bytes: u64) -> Result<Arc<GpuBuffer>> {
        self.alloc_as(op, bytes, true)
    }

    /// [`Gpu::alloc`]; `recorded`: whether a recording lists the buffer
    /// (not for the device's own metadata arenas).
    pub(super) fn alloc_as(
        &self,
        op: &'static str,
        bytes: u64,
        recorded: bool,
    ) -> Result<Arc<GpuBuffer>> {
        let mut cap = size_class(bytes);
        if cap > self.limits.max_buffer_size && bytes <= self.limits.max_buffer_size {
            cap = bytes.div_ceil(4) * 4;
        }
        if cap > self.limits.max_buffer_size {
            return Err(Error::runtime(
                op,
                format!(
                    "a GPU buffer of {bytes} bytes exceeds the adapter's limit of {} bytes (max_buffer_size)",
                    self.limits.max_buffer_size
                ),
            ));
        }
        let mut p = self.pool.lock();
        let mut hit = p.free.get_mut(&cap).and_then(|v| v.pop());
        if hit.is_none() && !p.deferred.is_empty() {
            let _ = self.device.poll(wgpu::PollType::Poll);
            self.retire(&mut p);
            hit = p.free.get_mut(&cap).and_then(|v| v.pop());
        }
        let buf = match hit {
            Some(b) => {
                p.cached_bytes -= cap;
                p.cached_count -= 1;
                b
            }
            None => {
                drop(p);
                let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: cap,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                if let Some(e) = pollster::block_on(scope.pop()) {
                    return Err(Error::runtime(
                        op,
                        format!("out of GPU memory allocating {bytes} bytes: {e}"),
                    ));
                }
                self.counters
                    .buffers_created
                    .fetch_add(1, Ordering::Relaxed);
                p = self.pool.lock();
                b
            }
        };
        p.in_use_bytes += cap;
        p.allocated_bytes += cap;
        p.peak_bytes = p.peak_bytes.max(p.in_use_bytes);
        p.in_use_count += 1;
        drop(p);
        let b = Arc::new(GpuBuffer {
            buf,
            cap,
            len: bytes,
            last_use: AtomicU64::new(0),
            shadow: Mutex::new(None),
            has_shadow: AtomicBool::new(false),
            narrow: Mutex::new(None),
            parent: None,
        });
        if let Some(rec) = self.recording.lock().as_mut().filter(|_| recorded) {
            if rec.mine() {
                rec.by_id.insert(b.id(), rec.buffers.len());
                rec.buffers.push(RecBuffer {
                    size: cap,
                    init: None,
                    existing: None,
                });
                rec.made.push(Some((op, Arc::downgrade(&b))));
            }
        }
        Ok(b)
    }

    fn release(&self, buf: wgpu::Buffer, cap: u64, last_use: u64) {
        let mut p = self.pool.lock();
        p.in_use_bytes -= cap;
        p.in_use_count -= 1;
        if last_use > self.completed.load(Ordering::Acquire) {
            p.deferred.push((last_use, cap, buf));
            p.deferred_in_batch += cap;
        } else {
            p.free.entry(cap).or_default().push(buf);
            p.cached_bytes += cap;
            p.cached_count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes() {
        for n in [0u64, 1, 255, 256, 257, 4096, 4097, 65536, 70000, 1 << 30] {
            let c = size_class(n);
            assert!(c >= n.max(256));
            assert_eq!(c % 4, 0);
            if n > 4096 {
                assert!(c as f64 <= n as f64 * 1.25 + 1.0);
            }
        }
    }
}
