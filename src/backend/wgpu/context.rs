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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};

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

    fn written(&self) {
        if self.has_shadow.load(Ordering::Acquire) {
            self.has_shadow.store(false, Ordering::Release);
            *self.shadow.lock() = None;
        }
        if let Some((p, _)) = &self.parent {
            p.written();
        }
    }

    /// Record that batch `batch` uses the buffer (the buffer it is a window of, too).
    fn used(&self, batch: u64) {
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

/// A check of a tensor's host values (an error for a bad value).
pub type HostCheck = Arc<dyn Fn(&crate::tensor::Tensor) -> Result<()> + Send + Sync>;

/// The device work of a stretch of code: every buffer it touched, every
/// kernel and every dispatch in order. Recorded instead of run for a WebGPU
/// bundle ([`Gpu::record`]: nothing is executed, so no tensor changes), or
/// while running for a compiled graph to replay ([`Gpu::capture`]).
#[derive(Default)]
pub struct Recording {
    pub shaders: Vec<String>,
    shader_index: HashMap<String, usize>,
    pub buffers: Vec<RecBuffer>,
    /// Pool buffer (by [`GpuBuffer::id`]) -> index; an allocation made while
    /// recording replaces an entry left by a dropped buffer at the same address.
    by_id: HashMap<usize, usize>,
    pub dispatches: Vec<RecDispatch>,
    /// Capturing: the work runs as well as being recorded.
    execute: bool,
    /// The capturing thread (work of other threads is not the captured run's).
    thread: Option<std::thread::ThreadId>,
    /// For buffers made while capturing (index-aligned with `buffers`):
    /// the op that made it, and whether it is still alive after the run.
    pub made: Vec<Option<(&'static str, std::sync::Weak<GpuBuffer>)>>,
    /// Why the captured work cannot be replayed (the first reason found).
    pub unreplayable: Option<String>,
    /// Host checks the run made (see [`RecCheck`]).
    pub checks: Vec<RecCheck>,
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
    pub redraw: super::Redraw,
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
    fn mine(&mut self) -> bool {
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

static GPU: OnceLock<std::result::Result<Gpu, String>> = OnceLock::new();

/// The device if it was created (never creates it).
pub fn initialised() -> Option<&'static std::result::Result<Gpu, String>> {
    GPU.get()
}

/// The device, created on first use. Errors (no adapter) are remembered.
pub fn get() -> Result<&'static Gpu> {
    match GPU.get_or_init(|| {
        std::panic::catch_unwind(init).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown error".into());
            Err(format!("initialising WebGPU failed: {msg}"))
        })
    }) {
        Ok(g) => Ok(g),
        Err(e) => Err(Error::runtime("gpu", e.clone())),
    }
}

/// The device if it has been created already (never creates it).
pub fn started() -> Option<&'static Gpu> {
    GPU.get().and_then(|r| r.as_ref().ok())
}

/// Whether a device could be (or has been) created.
pub fn is_available() -> bool {
    get().is_ok()
}

fn init() -> std::result::Result<Gpu, String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    desc.flags = wgpu::InstanceFlags::default().with_env();
    let instance = wgpu::Instance::new(desc);
    let adapter = match std::env::var("WGPU_ADAPTER_NAME") {
        Ok(name) if !name.is_empty() => {
            let want = name.to_lowercase();
            let all = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
            let names: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
            all.into_iter()
                .find(|a| a.get_info().name.to_lowercase().contains(&want))
                .ok_or_else(|| {
                    format!("no WebGPU adapter matches WGPU_ADAPTER_NAME={name:?} (found: {names:?})")
                })?
        }
        _ => pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::from_env()
                .unwrap_or(wgpu::PowerPreference::HighPerformance),
            force_fallback_adapter: false,
            compatible_surface: None,
            ..Default::default()
        }))
        .map_err(|e| format!("no WebGPU adapter found ({e}); install a Vulkan, Metal, DX12 or GL driver (on Linux without a GPU: Mesa's lavapipe, Debian package mesa-vulkan-drivers)"))?,
    };
    let info = adapter.get_info();
    let mut limits = adapter.limits();
    // A smaller storage-binding limit than the adapter's, as a device with
    // less room would have (how the splitting of large tensors is tested).
    if let Some(v) = std::env::var("FG_GPU_MAX_BINDING_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        let v = v.clamp(4096, u32::MAX as u64) as u32;
        limits.max_storage_buffer_binding_size =
            limits.max_storage_buffer_binding_size.min(v as u64);
    }
    // Fewer storage buffers per shader stage than the adapter allows (at
    // least WebGPU's default of 8): how kernels that group their operands
    // by that limit (the multi-tensor optimizer updates) are tested.
    if let Some(v) = std::env::var("FG_GPU_MAX_STORAGE_BUFFERS")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    {
        limits.max_storage_buffers_per_shader_stage =
            limits.max_storage_buffers_per_shader_stage.min(v.max(8));
    }
    let features = adapter.features();
    // float16 is stored natively (`array<f16>`) where the adapter has
    // `shader-f16`, unless FG_GPU_NO_F16 asks for the float32 storage of
    // adapters without it (how that path is tested on any machine).
    let no_f16 = std::env::var("FG_GPU_NO_F16").is_ok_and(|v| !matches!(v.trim(), "" | "0"));
    let device_features = if features.contains(wgpu::Features::SHADER_F16) && !no_f16 {
        wgpu::Features::SHADER_F16
    } else {
        wgpu::Features::empty()
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("ferrograd"),
        required_features: device_features,
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .map_err(|e| format!("the WebGPU adapter {:?} refused a device: {e}", info.name))?;
    let uncaptured: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let u2 = uncaptured.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        let mut g = u2.lock();
        if g.is_none() {
            *g = Some(e.to_string());
        }
    }));
    let storage_align = (limits.min_storage_buffer_offset_alignment as u64).max(4);
    let mut gpu = Gpu {
        info,
        limits,
        features,
        device_features,
        device,
        queue,
        state: Mutex::new(State {
            batch: 1,
            ..Default::default()
        }),
        pool: Mutex::new(Pool::default()),
        pipelines: Mutex::new(HashMap::new()),
        completed: Arc::new(AtomicU64::new(0)),
        uncaptured,
        counters: Counters::default(),
        storage_align,
        recording: Mutex::new(None),
        sync_each: std::env::var("FG_GPU_SYNC").is_ok_and(|v| !matches!(v.trim(), "" | "0")),
        loop_limit: None,
    };
    gpu.loop_limit = gpu.probe_loop_limit();
    // The probe's upload, dispatch, submit and read are the device's own.
    gpu.counters = Counters::default();
    Ok(gpu)
}

/// Where the user's code stands as an op is queued (`file:line`), when the
/// embedding front end can tell (see [`set_location_hook`]). It must not
/// block: it runs while the device's batch lock is held.
static LOCATION_HOOK: std::sync::OnceLock<fn() -> Option<Arc<str>>> = std::sync::OnceLock::new();

/// Install the function that names the user's source line for queued ops
/// (the Python module does, at import).
pub fn set_location_hook(f: fn() -> Option<Arc<str>>) {
    let _ = LOCATION_HOOK.set(f);
}

fn caller_location() -> Option<Arc<str>> {
    LOCATION_HOOK.get().and_then(|f| f())
}

/// Loop trips the probe asks one invocation for (more than any driver guard seen).
const LOOP_PROBE: u32 = 1 << 20;

impl Gpu {
    /// Run one invocation of a loop of [`LOOP_PROBE`] trips that counts
    /// them: fewer counted means the driver stops loops at that count.
    /// A failed probe (the device cannot even run it) reports no limit; the
    /// same failure will surface with the first real kernel.
    fn probe_loop_limit(&self) -> Option<u64> {
        let src = "@group(0) @binding(0) var<storage, read> md: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() {
    var c = 0u;
    for (var i = 0u; i < md[0]; i = i + 1u) { c = c + 1u; }
    out[0] = c;
}
";
        let out = self.alloc("loop_probe", 4).ok()?;
        self.dispatch("loop_probe", src, &[&out], &[LOOP_PROBE], 1)
            .ok()?;
        let bytes = self.download(&out, 0, 4).ok()?;
        let counted = u32::from_ne_bytes(bytes[..4].try_into().ok()?);
        (counted < LOOP_PROBE).then_some(counted as u64)
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
    pub buffers_cached: u64,
    pub bytes_cached: u64,
    pub pending_dispatches: u64,
}

impl Gpu {
    fn take_uncaptured(&self) -> Option<String> {
        self.uncaptured.lock().take()
    }

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
    fn alloc_as(&self, op: &'static str, bytes: u64, recorded: bool) -> Result<Arc<GpuBuffer>> {
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

    /// A compute pipeline for `src` (compiled once per distinct source).
    fn pipeline(&self, op: &'static str, src: &str) -> Result<Kernel> {
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

    /// Whether float16 tensors are stored as `f16` (2 bytes per element;
    /// the device has `shader-f16`) rather than as float32 words.
    pub fn half_native(&self) -> bool {
        self.device_features.contains(wgpu::Features::SHADER_F16)
    }

    /// The largest byte range one binding may cover (`max_storage_buffer_binding_size`).
    pub fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size
    }

    /// The alignment of a binding's byte offset (`min_storage_buffer_offset_alignment`).
    pub fn binding_align(&self) -> u64 {
        self.storage_align
    }

    /// The 4-byte elements one piece of a split kernel covers: a binding
    /// starting up to one alignment step before the piece still fits the limit.
    pub fn piece_elems(&self) -> usize {
        let align = (self.storage_align / 4) as usize;
        ((self.max_binding() / 4) as usize / align * align)
            .saturating_sub(align)
            .max(align)
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
                super::shaders::round_narrow(true),
                super::shaders::round_narrow(false),
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
                (e - s).div_ceil(super::shaders::WG as u64),
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
    fn submit_locked(
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

    /// Block until submission `idx` completed. The wait is cut into slices
    /// of [`crate::par::POLL_EVERY`] and asks for interrupts in between, so
    /// Ctrl-C returns control (as `Interrupted`) during long GPU work. The
    /// submitted work itself cannot be recalled: it finishes on the device,
    /// and its buffers return to the pool only once it has (as always).
    fn wait(&self, idx: wgpu::SubmissionIndex) -> Result<()> {
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
    pub fn note_stream(&self, dispatches: Vec<usize>, redraw: super::Redraw) {
        self.with_capture(|rec| {
            let after_derived = rec.derived.len();
            rec.streams.push(RecStream {
                redraw,
                dispatches,
                after_derived,
            });
        });
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
