//! The batch: dispatches recorded into one compute pass of one command encoder,
//! the float16/bfloat16 rounding pass after writes, and submission at a sync
//! point (or when the batch grows large).

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::capture::RecDispatch;
use super::device::caller_location;
use super::{
    Arena, Gpu, GpuBuffer, Narrow, State, ARENA_BYTES, BATCH_OPS_LISTED, MAX_BATCH_DEFERRED,
    MAX_BATCH_DISPATCHES,
};
use crate::error::{Error, Result};

impl Gpu {
    fn take_uncaptured(&self) -> Option<String> {
        self.uncaptured.lock().take()
    }

    /// Workgroup counts (x, y) covering `groups` workgroups within the per-dimension limit.
    pub fn grid(&self, op: &'static str, groups: u64) -> Result<(u32, u32)> {
        let max = self.limits.max_compute_workgroups_per_dimension as u64;
        if groups <= max {
            return Ok((groups.max(1) as u32, 1));
        }
        let y = groups.div_ceil(max);
        if y > max {
            return Err(Error::runtime(
                op,
                format!(
                    "{groups} workgroups exceed the adapter's limit of {max} x {max} (max_compute_workgroups_per_dimension)"
                ),
            ));
        }
        Ok((max as u32, y as u32))
    }

    /// Record one dispatch of the kernel `src` over `groups` workgroups,
    /// binding `meta` at 0 and `bufs` at 1.. . Nothing runs until the batch is
    /// submitted. A float16/bfloat16 buffer the kernel writes is rounded to
    /// its type right after (see [`GpuBuffer::set_narrow`]).
    pub fn dispatch(
        &self,
        op: &'static str,
        src: &str,
        bufs: &[&Arc<GpuBuffer>],
        meta: &[u32],
        groups: u64,
    ) -> Result<()> {
        self.dispatch_ranges(op, src, bufs, &[], meta, groups)
    }

    /// [`Gpu::dispatch`] binding `ranges[j]` = (byte offset, byte size) of
    /// `bufs[j]` instead of the whole buffer (all whole when `ranges` is
    /// empty): how kernels work through tensors larger than one binding may
    /// be, one piece at a time. Offsets must be multiples of [`Gpu::binding_align`].
    pub fn dispatch_ranges(
        &self,
        op: &'static str,
        src: &str,
        bufs: &[&Arc<GpuBuffer>],
        ranges: &[(u64, u64)],
        meta: &[u32],
        groups: u64,
    ) -> Result<()> {
        if groups == 0 {
            return Ok(());
        }
        let writable = self.dispatch_raw(op, src, bufs, ranges, meta, groups)?;
        for (j, b) in bufs.iter().enumerate() {
            if !writable.get(j + 1).copied().unwrap_or(true) {
                continue;
            }
            let Some((ty, n)) = *b.narrow.lock() else {
                continue;
            };
            if n == 0 || bufs[..j].iter().any(|c| Arc::ptr_eq(c, b)) {
                continue;
            }
            let (lo, hi) = match ranges.get(j) {
                Some(&(off, size)) => (off / 4, ((off + size) / 4).min(n)),
                None => (0, n),
            };
            self.round_narrow(op, b, ty, lo, hi)?;
        }
        if self.sync_each && !self.is_recording() {
            self.synchronize()?;
        }
        Ok(())
    }

    /// Round elements `lo..hi` of a float16/bfloat16 buffer to its type, in
    /// pieces no larger than one binding.
    fn round_narrow(
        &self,
        op: &'static str,
        b: &Arc<GpuBuffer>,
        ty: Narrow,
        lo: u64,
        hi: u64,
    ) -> Result<()> {
        static SRC: OnceLock<[String; 2]> = OnceLock::new();
        let src = &SRC.get_or_init(|| {
            [
                crate::backend::wgpu::shaders::round_narrow(true),
                crate::backend::wgpu::shaders::round_narrow(false),
            ]
        })[(ty != Narrow::F16) as usize];
        let align = self.storage_align / 4;
        let piece = self.piece_elems() as u64;
        let mut s = lo / align * align;
        while s < hi {
            let e = hi.min(s + piece);
            let words = (e - s) as u32;
            self.dispatch_raw(
                op,
                src,
                &[b],
                &[(s * 4, (e - s) * 4)],
                &[words],
                (e - s).div_ceil(crate::backend::wgpu::shaders::WG as u64),
            )?;
            s = e;
        }
        Ok(())
    }

    /// [`Gpu::dispatch`] without the rounding pass; returns which
    /// bindings the kernel writes.
    fn dispatch_raw(
        &self,
        op: &'static str,
        src: &str,
        bufs: &[&Arc<GpuBuffer>],
        ranges: &[(u64, u64)],
        meta: &[u32],
        groups: u64,
    ) -> Result<Arc<[bool]>> {
        // Binding sizes are multiples of 4 bytes: a range of float16
        // elements ending mid-word takes the rest of the word (buffers and
        // range offsets are 4-byte aligned, so it stays inside the buffer).
        let ranges: Vec<(u64, u64)> = ranges
            .iter()
            .map(|&(off, size)| (off, size.div_ceil(4) * 4))
            .collect();
        let ranges = &ranges[..];
        let max = self.max_binding();
        for (j, b) in bufs.iter().enumerate() {
            let size = ranges.get(j).map_or(b.len, |r| r.1);
            if size > max {
                return Err(Error::runtime(
                    op,
                    format!(
                        "a tensor of {size} bytes exceeds the adapter's largest storage binding ({max} bytes, max_storage_buffer_binding_size), and the {op} kernel cannot work through it in pieces; work on slices of the tensor"
                    ),
                ));
            }
        }
        let max_bind = self.limits.max_storage_buffers_per_shader_stage as usize;
        if bufs.len() + 1 > max_bind {
            return Err(Error::runtime(
                op,
                format!(
                    "the kernel needs {} storage buffers, over the adapter's limit of {max_bind} per shader stage",
                    bufs.len() + 1
                ),
            ));
        }
        let (gx, gy) = self.grid(op, groups)?;
        let (pipe, writable) = self.pipeline(op, src)?;
        // Binding j + 1 is bufs[j] (0 is the metadata).
        for (j, b) in bufs.iter().enumerate() {
            if writable.get(j + 1).copied().unwrap_or(true) {
                b.written();
            }
        }
        if let Some(rec) = self
            .recording
            .lock()
            .as_mut()
            .and_then(|r| r.mine().then_some(r))
        {
            let shader = match rec.shader_index.get(src) {
                Some(&k) => k,
                None => {
                    rec.shaders.push(src.to_string());
                    rec.shader_index
                        .insert(src.to_string(), rec.shaders.len() - 1);
                    rec.shaders.len() - 1
                }
            };
            if let (false, Some(why)) = (rec.execute, &rec.unreplayable) {
                return Err(Error::runtime(
                    op,
                    format!("this graph cannot be exported as a WebGPU bundle: {why}"),
                ));
            }
            // A window is recorded as the buffer it lies in, bound from its base.
            let recorded = bufs
                .iter()
                .enumerate()
                .map(|(j, b)| match (ranges.get(j), &b.parent) {
                    (Some(&(off, size)), _) => Some((b.base() + off, size)),
                    (None, Some(_)) => Some((b.base(), b.cap.min(max).max(b.len))),
                    (None, None) => None,
                })
                .collect();
            let buffers = bufs
                .iter()
                .map(|b| match &b.parent {
                    Some((root, _)) => rec.buffer_index(root),
                    None => rec.buffer_index(b),
                })
                .collect();
            rec.dispatches.push(RecDispatch {
                op,
                shader,
                buffers,
                ranges: recorded,
                meta: meta.to_vec(),
                groups: (gx, gy),
            });
            if !rec.execute {
                return Ok(writable);
            }
        }
        let mut st = self.state.lock();
        let batch = st.batch;
        // Metadata goes to the batch's arena (written just before submission).
        let words = meta.len().max(1);
        let bytes = (words * 4) as u64;
        let align_words = (self.storage_align / 4) as usize;
        let need_new = match st.arenas.last() {
            Some(a) => {
                (a.words.len().div_ceil(align_words) * align_words + words) * 4
                    > ARENA_BYTES as usize
            }
            None => true,
        };
        if need_new {
            let size = ARENA_BYTES.max(bytes);
            let buf = self.alloc_as(op, size, false)?;
            st.arenas.push(Arena {
                buf,
                words: Vec::with_capacity(1024),
            });
        }
        let arena = st.arenas.last_mut().expect("arena");
        let start = arena.words.len().div_ceil(align_words) * align_words;
        arena.words.resize(start, 0);
        arena.words.extend_from_slice(meta);
        if meta.is_empty() {
            arena.words.push(0);
        }
        arena.buf.last_use.store(batch, Ordering::Release);
        let arena_buf = arena.buf.clone();
        let mut entries = Vec::with_capacity(bufs.len() + 1);
        entries.push(wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &arena_buf.buf,
                offset: (start * 4) as u64,
                size: std::num::NonZeroU64::new(bytes),
            }),
        });
        for (j, b) in bufs.iter().enumerate() {
            b.used(batch);
            let (offset, size) = ranges
                .get(j)
                .copied()
                .unwrap_or((0, b.cap.min(max).max(b.len)));
            entries.push(wgpu::BindGroupEntry {
                binding: j as u32 + 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &b.buf,
                    offset: b.base() + offset,
                    size: std::num::NonZeroU64::new(size.max(4)),
                }),
            });
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipe.get_bind_group_layout(0),
            entries: &entries,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::runtime(op, format!("GPU binding failed: {e}")));
        }
        let pass = self.open_pass(&mut st);
        pass.set_pipeline(&pipe);
        pass.set_bind_group(0, &bg, &[]);
        pass.dispatch_workgroups(gx, gy, 1);
        st.dispatches += 1;
        if st.ops.len() < BATCH_OPS_LISTED && !st.ops.iter().any(|(o, _)| *o == op) {
            st.ops.push((op, caller_location()));
        }
        self.counters.dispatches.fetch_add(1, Ordering::Relaxed);
        let big = st.dispatches >= MAX_BATCH_DISPATCHES
            || self.pool.lock().deferred_in_batch >= MAX_BATCH_DEFERRED;
        if big {
            self.submit_locked(&mut st, None)?;
        }
        Ok(writable)
    }

    /// The batch's compute pass (its encoder and pass begun if need be).
    fn open_pass<'s>(&self, st: &'s mut State) -> &'s mut wgpu::ComputePass<'static> {
        let enc = st.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        });
        st.pass.get_or_insert_with(|| {
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: None,
            })
            .forget_lifetime()
        })
    }

    /// Submit the batch (plus a final copy to `readback` when given).
    pub(super) fn submit_locked(
        &self,
        st: &mut State,
        readback: Option<(&GpuBuffer, u64, &wgpu::Buffer, u64)>,
    ) -> Result<Option<wgpu::SubmissionIndex>> {
        if st.encoder.is_none() && readback.is_none() {
            return Ok(None);
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        st.pass = None; // ends the compute pass
        let mut enc = st.encoder.take().unwrap_or_else(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        });
        if let Some((src, off, dst, size)) = readback {
            src.used(st.batch);
            enc.copy_buffer_to_buffer(&src.buf, src.base() + off, dst, 0, size);
        }
        for a in &st.arenas {
            self.queue
                .write_buffer(&a.buf.buf, 0, bytemuck::cast_slice(&a.words));
        }
        let idx = self.queue.submit([enc.finish()]);
        let batch = st.batch;
        let done = self.completed.clone();
        self.queue.on_submitted_work_done(move || {
            done.fetch_max(batch, Ordering::AcqRel);
        });
        st.batch += 1;
        let n_dispatches = std::mem::take(&mut st.dispatches);
        let ops = std::mem::take(&mut st.ops);
        st.arenas.clear(); // back to the pool, reusable once this batch completes
        self.pool.lock().deferred_in_batch = 0;
        self.counters.submits.fetch_add(1, Ordering::Relaxed);
        let err = pollster::block_on(scope.pop());
        if let Some(e) = err
            .map(|e| e.to_string())
            .or_else(|| self.take_uncaptured())
        {
            let named = |(o, at): &(&'static str, Option<Arc<str>>)| match at {
                Some(at) => format!("{o} (queued at {at})"),
                None => o.to_string(),
            };
            let (op, list) = match ops.as_slice() {
                [one] => (one.0, named(one)),
                _ => {
                    let more = if ops.len() == BATCH_OPS_LISTED {
                        ", ..."
                    } else {
                        ""
                    };
                    let names: Vec<String> = ops.iter().map(named).collect();
                    (
                        "gpu",
                        format!("ops queued since the last sync: {}{more}", names.join(", ")),
                    )
                }
            };
            let hint = if self.sync_each {
                ""
            } else {
                "; run with FG_GPU_SYNC=1 to have each op wait for its kernels, so the op that fails raises at its own line"
            };
            return Err(Error::runtime(
                op,
                format!(
                    "a GPU command failed (the batch of {n_dispatches} queued dispatches was dropped; {list}): {e}{hint}"
                ),
            ));
        }
        Ok(Some(idx))
    }

    /// The ops queued since the last submit (each name once, at most a
    /// dozen), with the user's source line where the first was queued.
    pub fn pending_ops(&self) -> Vec<(&'static str, Option<Arc<str>>)> {
        self.state.lock().ops.clone()
    }

    /// Submit everything recorded so far and wait until the device is idle.
    pub fn synchronize(&self) -> Result<()> {
        let mut st = self.state.lock();
        let idx = self.submit_locked(&mut st, None)?;
        drop(st);
        if let Some(idx) = idx {
            self.wait(idx)?;
        }
        Ok(())
    }

    /// Block until submission `idx` completed. The wait is cut into slices
    /// of [`crate::par::POLL_EVERY`] and asks for interrupts in between, so
    /// Ctrl-C returns control (as `Interrupted`) during long GPU work. The
    /// submitted work itself cannot be recalled: it finishes on the device,
    /// and its buffers return to the pool only once it has (as always).
    pub(super) fn wait(&self, idx: wgpu::SubmissionIndex) -> Result<()> {
        self.counters.waits.fetch_add(1, Ordering::Relaxed);
        loop {
            match self.device.poll(wgpu::PollType::Wait {
                submission_index: Some(idx.clone()),
                timeout: Some(crate::par::POLL_EVERY),
            }) {
                Ok(_) => return Ok(()),
                Err(wgpu::PollError::Timeout) => crate::par::poll("gpu")?,
                Err(e) => {
                    return Err(Error::runtime(
                        "gpu",
                        format!("waiting for the GPU failed: {e}"),
                    ))
                }
            }
        }
    }

    /// Queue prepared dispatches `(op, pipeline, bind group, workgroups)`
    /// in order, in the batch being recorded, as one block (no other work
    /// lands between them). `uses` are every buffer they bind and
    /// `writes` those they write.
    pub fn queue_prepared(
        &self,
        items: &[(
            &'static str,
            &wgpu::ComputePipeline,
            &wgpu::BindGroup,
            (u32, u32),
        )],
        uses: &[&GpuBuffer],
        writes: &[&GpuBuffer],
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        for b in writes {
            b.written();
        }
        let mut st = self.state.lock();
        let batch = st.batch;
        for b in uses {
            b.used(batch);
        }
        let pass = self.open_pass(&mut st);
        for &(_, pipe, bg, (gx, gy)) in items {
            pass.set_pipeline(pipe);
            pass.set_bind_group(0, bg, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        for &(op, ..) in items {
            if st.ops.len() >= BATCH_OPS_LISTED {
                break;
            }
            if !st.ops.iter().any(|(o, _)| *o == op) {
                st.ops.push((op, caller_location()));
            }
        }
        st.dispatches += items.len();
        self.counters
            .dispatches
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        if st.dispatches >= MAX_BATCH_DISPATCHES
            || self.pool.lock().deferred_in_batch >= MAX_BATCH_DEFERRED
        {
            self.submit_locked(&mut st, None)?;
        }
        drop(st);
        if self.sync_each {
            self.synchronize()?;
        }
        Ok(())
    }
}
