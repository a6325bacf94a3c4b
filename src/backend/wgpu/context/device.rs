//! Starting the device: adapter selection and device creation (once per
//! process), the adapter's limits as the backend uses them, and the source
//! location ops report.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{Counters, Gpu, Pool, State};
use crate::error::{Error, Result};

pub(super) static GPU: OnceLock<std::result::Result<Gpu, String>> = OnceLock::new();

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

pub(super) fn init() -> std::result::Result<Gpu, String> {
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

pub(super) fn caller_location() -> Option<Arc<str>> {
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
}
