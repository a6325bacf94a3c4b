//! The process-wide WebGPU device: adapter selection, the buffer pool, the
//! shared command encoder, the pipeline cache, statistics and the one
//! host↔device materialise path.
//!
//! Ordering model: dispatches are recorded into one compute pass of one
//! command encoder (the *batch*) and submitted only at a sync point (a
//! read) or when the batch grows large. Uploads use `Queue::write_buffer`,
//! which runs before the next submitted command buffer; they only ever
//! target buffers no recorded command uses (a fresh or fully retired pool
//! buffer), so this order is safe. A freed buffer returns to the pool's
//! free lists only after the last batch that used it has completed.
//!
//! The parts: `device` (starting the device, the adapter's limits), `pool`
//! (buffers and their pool, statistics), `pipeline` (the pipeline cache,
//! bind groups), `batch` (recording dispatches and submitting them),
//! `capture` (the recording a compiled graph replays) and `transfer`
//! (uploads and downloads). The types they share are defined here.

mod batch;
mod capture;
mod device;
mod pipeline;
mod pool;
mod transfer;

pub use capture::{
    DeriveFn, HostCheck, RecBuffer, RecCheck, RecDerived, RecDispatch, RecLive, RecStream,
    Recording,
};
pub use device::{get, initialised, is_available, set_location_hook, started};
pub use pipeline::Kernel;
pub use pool::{size_class, Stats};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::Mutex;

/// Submit the batch once it holds this many dispatches.
const MAX_BATCH_DISPATCHES: usize = 4096;
/// ... or once buffers freed during it (not reusable before it completes) hold this many bytes.
const MAX_BATCH_DEFERRED: u64 = 256 << 20;
/// Bytes of one metadata arena.
const ARENA_BYTES: u64 = 64 << 10;
/// Smallest pool buffer.
const MIN_BUF: u64 = 256;

/// Counters reported by `fg.gpu.stats()`.
#[derive(Default)]
pub struct Counters {
    pub uploads: AtomicU64,
    pub downloads: AtomicU64,
    pub submits: AtomicU64,
    pub waits: AtomicU64,
    pub dispatches: AtomicU64,
    pub pipelines: AtomicU64,
    pub buffers_created: AtomicU64,
}

/// A pooled device buffer. Dropping it returns it to the pool.
pub struct GpuBuffer {
    pub buf: wgpu::Buffer,
    pub cap: u64,
    /// The bytes asked for (at most `cap`): what a whole-buffer binding must reach.
    pub len: u64,
    /// The last batch that recorded a command using this buffer.
    last_use: AtomicU64,
    /// The host values this buffer was uploaded from, while no kernel has
    /// written it since (see [`GpuBuffer::set_shadow`]).
    shadow: Mutex<Option<crate::tensor::Tensor>>,
    has_shadow: AtomicBool,
    /// For a float16/bfloat16 tensor's buffer (stored as float32): the
    /// narrow type and the element count every write is rounded over.
    narrow: Mutex<Option<(Narrow, u64)>>,
    /// For a window (see [`GpuBuffer::window`]): the buffer it lies in and
    /// the byte offset where it starts there.
    parent: Option<(Arc<GpuBuffer>, u64)>,
}

/// The narrow float types the device stores as float32, rounded after every write.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Narrow {
    F16,
    BF16,
}

#[derive(Default)]
struct Pool {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    /// Freed while a batch that used them may still run: (batch, cap, buffer).
    deferred: Vec<(u64, u64, wgpu::Buffer)>,
    deferred_in_batch: u64,
    in_use_bytes: u64,
    /// Most bytes in use at once since the start (or the last peak reset).
    peak_bytes: u64,
    in_use_count: u64,
    cached_bytes: u64,
    cached_count: u64,
    /// Bytes of every buffer handed out since the start (never decreases).
    allocated_bytes: u64,
}

struct Arena {
    buf: Arc<GpuBuffer>,
    words: Vec<u32>,
}

#[derive(Default)]
struct State {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Id of the batch being recorded (submits so far + 1).
    batch: u64,
    dispatches: usize,
    arenas: Vec<Arena>,
    /// The ops with dispatches in this batch (the first few, each once):
    /// what an error found at submission names.
    /// The ops queued in the batch (each name once), with the user's source
    /// line where the first of them was queued when known.
    ops: Vec<(&'static str, Option<Arc<str>>)>,
}

/// How many distinct ops a batch's error message lists.
const BATCH_OPS_LISTED: usize = 12;

/// The device and everything shared by its kernels.
pub struct Gpu {
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// The adapter's features.
    pub features: wgpu::Features,
    /// The features the device was created with (`SHADER_F16` when float16
    /// is stored natively, see [`Gpu::half_native`]).
    pub device_features: wgpu::Features,
    /// Loop iterations one shader invocation may run in all, where the
    /// driver stops loops beyond a count (Mesa's llvmpipe/lavapipe ends
    /// every invocation's loops, all of them together, after 65,535
    /// iterations: a guard against endless loops that silently truncates
    /// long ones). Measured when the device is made; `None`: no such limit.
    pub loop_limit: Option<u64>,
    device: wgpu::Device,
    queue: wgpu::Queue,
    state: Mutex<State>,
    pool: Mutex<Pool>,
    /// Compiled kernels by source, with their writable bindings.
    pipelines: Mutex<HashMap<String, Kernel>>,
    completed: Arc<AtomicU64>,
    uncaptured: Arc<Mutex<Option<String>>>,
    pub counters: Counters,
    storage_align: u64,
    /// Set while a WebGPU bundle is recorded (see [`Gpu::record`]).
    recording: Mutex<Option<Recording>>,
    /// `FG_GPU_SYNC=1`: every kernel is submitted and waited for as it is
    /// queued, so a device error is raised by the op that caused it, at the
    /// user's line (slow; for debugging).
    sync_each: bool,
}
