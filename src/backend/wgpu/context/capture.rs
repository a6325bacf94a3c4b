//! Graph capture on the device: the recording of what a run dispatched
//! (buffers, dispatches, host checks, derived uploads, random streams), which a
//! compiled graph replays.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Gpu, GpuBuffer};
use crate::error::{Error, Result};

/// One buffer of a [`Recording`].
pub struct RecBuffer {
    /// Size in bytes (a multiple of 4).
    pub size: u64,
    /// Bytes uploaded into it while recording.
    pub init: Option<Vec<u8>>,
    /// A buffer that existed before the recording began (an argument or a
    /// tensor read by reference), kept alive so its contents can be read.
    pub existing: Option<Arc<GpuBuffer>>,
}

/// One recorded dispatch.
pub struct RecDispatch {
    pub op: &'static str,
    /// Index into [`Recording::shaders`].
    pub shader: usize,
    /// Buffer indices bound at 1, 2, ... (binding 0 is the metadata).
    pub buffers: Vec<usize>,
    /// The byte range (offset, size) bound of each buffer, `None` (or
    /// missing) where it is bound whole.
    pub ranges: Vec<Option<(u64, u64)>>,
    /// The metadata words bound at 0.
    pub meta: Vec<u32>,
    pub groups: (u32, u32),
}

/// A check of host values a captured run made before its kernels (an
/// index range check): a replay repeats it on the tensor of the same layout
/// in that run's buffers.
pub struct RecCheck {
    pub tensor: crate::tensor::Tensor,
    pub check: HostCheck,
}

/// A range check a bundle's run cannot make on the host (see
/// [`Gpu::note_index_range`]): every value of `tensor` must lie in
/// `[0, len)`; the bundle's loader checks it on the inputs (`checks` in the
/// manifest), or the export checks the values it stores.
pub struct RecIndexRange {
    pub tensor: crate::tensor::Tensor,
    pub len: u64,
    pub op: &'static str,
    pub dim: usize,
}

/// A check of a tensor's host values (an error for a bad value).
pub type HostCheck = Arc<dyn Fn(&crate::tensor::Tensor) -> Result<()> + Send + Sync>;

/// The device work of a stretch of code: every buffer it touched, every
/// kernel and every dispatch in order. Recorded instead of run for a WebGPU
/// bundle ([`Gpu::record`]: nothing is executed, so no tensor changes), or
/// while running for a compiled graph to replay ([`Gpu::capture`]).
#[derive(Default)]
pub struct Recording {
    pub shaders: Vec<String>,
    pub(super) shader_index: HashMap<String, usize>,
    pub buffers: Vec<RecBuffer>,
    /// Pool buffer (by [`GpuBuffer::id`]) -> index; an allocation made while
    /// recording replaces an entry left by a dropped buffer at the same address.
    pub(super) by_id: HashMap<usize, usize>,
    pub dispatches: Vec<RecDispatch>,
    /// Capturing: the work runs as well as being recorded.
    pub(super) execute: bool,
    /// The capturing thread (work of other threads is not the captured run's).
    thread: Option<std::thread::ThreadId>,
    /// For buffers made while capturing (index-aligned with `buffers`):
    /// the op that made it, and whether it is still alive after the run.
    pub made: Vec<Option<(&'static str, std::sync::Weak<GpuBuffer>)>>,
    /// Why the captured work cannot be replayed (the first reason found).
    pub unreplayable: Option<String>,
    /// Host checks the run made (see [`RecCheck`]).
    pub checks: Vec<RecCheck>,
    /// Index ranges a bundle's run must hold to (see [`RecIndexRange`]).
    pub index_ranges: Vec<RecIndexRange>,
    /// Graph nodes run live on every replay (see [`RecLive`]).
    pub live: Vec<RecLive>,
    /// Uploads computed from the host values of tensors (see [`RecDerived`]).
    pub derived: Vec<RecDerived>,
    /// Streams of random kernels a replay reserves anew (see [`RecStream`]).
    pub streams: Vec<RecStream>,
}

/// The Philox stream of a random op run on the device: its dispatches'
/// metadata starts with the stream's four words, which a replay replaces
/// with a stream reserved anew, as the op would (so each replay draws new
/// numbers, the ones eager code would).
pub struct RecStream {
    /// How the op reserves its stream from its generator.
    pub redraw: crate::backend::wgpu::Redraw,
    /// The recorded dispatches reading it.
    pub dispatches: Vec<usize>,
    /// How many [`RecDerived`] uploads were recorded before it (host draws
    /// among them reserve from generators too: a replay keeps the order).
    pub after_derived: usize,
}

/// Data a captured run uploaded that it computed from the host values of
/// some tensors (the offsets of an index op, from its index tensors): a
/// replay computes it again from the tensors of the same layouts in its
/// own buffers, and uploads it in place of the recorded data.
pub struct RecDerived {
    pub sources: Vec<crate::tensor::Tensor>,
    /// The recorded buffer it was uploaded into.
    pub target: usize,
    pub make: DeriveFn,
}

/// How a [`RecDerived`] upload follows from its source tensors.
pub type DeriveFn = Arc<dyn Fn(&[crate::tensor::Tensor]) -> Result<Vec<u8>> + Send + Sync>;

/// A graph node of a captured run whose host work a replay repeats (an
/// optimizer step reading per-run scalars): its inputs, as recorded buffer
/// indices with the layout and dtype it read them in, the range of
/// dispatches it made, and how many tensors it returned.
pub struct RecLive {
    pub node: usize,
    pub inputs: Vec<(usize, crate::tensor::Layout, crate::tensor::DType)>,
    pub dispatches: std::ops::Range<usize>,
    pub outputs: Option<usize>,
}

impl Recording {
    /// The index of `b`, adding it as an existing buffer when unseen.
    pub fn buffer_index(&mut self, b: &Arc<GpuBuffer>) -> usize {
        if let Some(&i) = self.by_id.get(&b.id()) {
            return i;
        }
        let i = self.buffers.len();
        self.buffers.push(RecBuffer {
            size: b.cap,
            init: None,
            existing: Some(b.clone()),
        });
        self.made.push(None);
        self.by_id.insert(b.id(), i);
        i
    }

    /// Note that graph node `node` starts on `inputs` (their buffers, layouts and dtypes).
    pub fn live_begin(
        &mut self,
        node: usize,
        inputs: &[(Arc<GpuBuffer>, crate::tensor::Layout, crate::tensor::DType)],
    ) {
        let inputs = inputs
            .iter()
            .map(|(b, l, d)| (self.buffer_index(b), l.clone(), *d))
            .collect();
        let at = self.dispatches.len();
        self.live.push(RecLive {
            node,
            inputs,
            dispatches: at..at,
            outputs: None,
        });
    }

    /// Note that the node of the last [`Recording::live_begin`] returned `outputs` tensors.
    pub fn live_end(&mut self, outputs: usize) {
        let end = self.dispatches.len();
        if let Some(l) = self.live.last_mut() {
            l.dispatches.end = end;
            l.outputs = Some(outputs);
        }
    }

    /// The index of `b`, if the recorded work used or made it.
    pub fn index_of(&self, b: &GpuBuffer) -> Option<usize> {
        self.by_id.get(&b.id()).copied()
    }

    /// Note that the captured work cannot be replayed, and why (the first reason is kept).
    pub fn refuse(&mut self, why: impl Into<String>) {
        if self.unreplayable.is_none() {
            self.unreplayable = Some(why.into());
        }
    }

    /// Whether the current thread's work is this recording's (always for
    /// a bundle; a capture ignores other threads' work, marking itself unreplayable).
    pub(super) fn mine(&mut self) -> bool {
        if self.for_this_thread() {
            return true;
        }
        self.refuse("another thread used the GPU during the run");
        false
    }

    /// [`Recording::mine`] without marking.
    fn for_this_thread(&self) -> bool {
        !self.execute || self.thread == Some(std::thread::current().id())
    }
}

impl Gpu {
    /// Run `f` with the device's work recorded instead of executed (see
    /// [`Recording`]); returns `f`'s result and the recording. Work queued
    /// before is submitted first. Process-wide: GPU work of other threads
    /// meanwhile would be recorded too.
    pub fn record<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<(R, Recording)> {
        self.synchronize()?;
        {
            let mut r = self.recording.lock();
            if r.is_some() {
                return Err(Error::runtime(
                    "gpu",
                    "a WebGPU bundle is already being recorded",
                ));
            }
            *r = Some(Recording::default());
        }
        let out = f();
        let rec = self.recording.lock().take().unwrap_or_default();
        Ok((out?, rec))
    }

    /// Whether a WebGPU bundle is being recorded (see [`Gpu::record`]).
    pub fn is_recording(&self) -> bool {
        self.recording.lock().as_ref().is_some_and(|r| !r.execute)
    }

    /// Run `f` as usual while recording the device work it does on this
    /// thread, for a compiled graph to replay (see `graph::replay`); returns
    /// `f`'s result and the recording, or no recording when another is
    /// being made (a bundle export or a capture on another thread).
    pub fn capture<R>(&self, f: impl FnOnce() -> R) -> (R, Option<Recording>) {
        {
            let mut r = self.recording.lock();
            if r.is_some() {
                drop(r);
                return (f(), None);
            }
            *r = Some(Recording {
                execute: true,
                thread: Some(std::thread::current().id()),
                ..Default::default()
            });
        }
        let out = f();
        let rec = self.recording.lock().take();
        (out, rec)
    }

    /// Run `f` on the recording of the capture this thread is making, if any.
    pub fn with_capture<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> Option<R> {
        let mut r = self.recording.lock();
        let rec = r.as_mut().filter(|r| r.execute)?;
        rec.mine().then(|| f(rec))
    }

    /// Whether a WebGPU bundle is being recorded on the device (work is
    /// recorded, not run).
    pub fn bundling(&self) -> bool {
        self.recording.lock().as_ref().is_some_and(|r| !r.execute)
    }

    /// While a bundle is recorded: note that every value of the index tensor
    /// `t` of `op` (along `dim`, of size `len`) must lie in `[0, len)`, the
    /// check the run would make on the host; true if noted (a bundle is
    /// being recorded), false otherwise.
    pub fn note_index_range(
        &self,
        t: &crate::tensor::Tensor,
        len: u64,
        op: &'static str,
        dim: usize,
    ) -> bool {
        match self.recording.lock().as_mut().filter(|r| !r.execute) {
            Some(rec) => {
                rec.index_ranges.push(RecIndexRange {
                    tensor: t.clone(),
                    len,
                    op,
                    dim,
                });
                true
            }
            None => false,
        }
    }

    /// Note that the work being captured read device data on the host (its
    /// later work may depend on the values), so it cannot be replayed.
    pub fn note_host_read(&self) {
        if let Some(rec) = self.recording.lock().as_mut().filter(|r| r.execute) {
            rec.refuse("the run reads GPU data on the host (a data-dependent op)");
        }
    }

    /// Note a host check of `t`'s values the work being captured made
    /// (see [`RecCheck`]); returns whether a capture is listening.
    pub fn note_check(&self, t: &crate::tensor::Tensor, check: HostCheck) -> bool {
        match self.recording.lock().as_mut().filter(|r| r.execute) {
            Some(rec) => {
                if rec.mine() {
                    rec.checks.push(RecCheck {
                        tensor: t.clone(),
                        check,
                    });
                }
                true
            }
            None => false,
        }
    }

    /// Note that the work being captured uploaded into `target` data `make`
    /// computed from the host values of `sources` (see [`RecDerived`]).
    pub fn note_derived(
        &self,
        sources: &[crate::tensor::Tensor],
        target: &Arc<GpuBuffer>,
        make: DeriveFn,
    ) {
        self.with_capture(|rec| {
            let target = rec.buffer_index(target);
            rec.derived.push(RecDerived {
                sources: sources.to_vec(),
                target,
                make,
            });
        });
    }

    /// Note that the work being captured ran random kernels as
    /// `dispatches` (recorded indices) on a stream `redraw` reserves (see [`RecStream`]).
    pub fn note_stream(&self, dispatches: Vec<usize>, redraw: crate::backend::wgpu::Redraw) {
        self.with_capture(|rec| {
            let after_derived = rec.derived.len();
            rec.streams.push(RecStream {
                redraw,
                dispatches,
                after_derived,
            });
        });
    }
}
