//! Untyped, reference-counted, device-aware byte storage and the CPU caching allocator.
//!
//! A [`Storage`] is a block of bytes plus where it lives. Tensors reference it
//! through `Arc<Storage>` and describe their elements with a layout; only
//! kernels turn `(storage, offset, strides)` into addresses. Storage never
//! hands out `&mut [u8]` over shared memory: kernels write through raw
//! pointers into outputs they own (freshly allocated, or an in-place target the
//! op declared it mutates).

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout as AllocLayout};
use std::any::Any;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::defer;
use crate::error::{Error, Result};

/// Alignment of every owned CPU allocation (a cache line; enough for AVX-512).
pub const ALIGN: usize = 64;

/// Where a storage lives.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Device {
    #[default]
    Cpu,
    /// A WebGPU adapter, by index.
    Gpu(u32),
    /// Shape and dtype only, no memory: the values of a graph being captured.
    /// Kernels on this device do nothing; reading its data is an error.
    Meta,
}

impl Device {
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_string(),
            Device::Gpu(0) => "gpu".to_string(),
            Device::Gpu(i) => format!("gpu:{i}"),
            Device::Meta => "meta".to_string(),
        }
    }

    /// Whether tensors on this device hold readable values (false for `Meta`).
    #[inline]
    pub fn has_data(&self) -> bool {
        !matches!(self, Device::Meta)
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

enum Kind {
    /// Allocated by us, `cap` bytes (a size class), returned to the cache on drop.
    Owned { cap: usize },
    /// Borrowed memory (NumPy, DLPack); `owner` keeps it alive and is dropped with us.
    Foreign { owner: Box<dyn Any + Send + Sync> },
    /// No memory at all (the `Meta` device): `ptr` is dangling and never read.
    Meta,
    /// A GPU buffer owned by the device's backend (its pool takes it back
    /// when `handle` drops); `ptr` is dangling and never read on the host.
    Gpu { handle: Box<dyn Any + Send + Sync> },
}

/// A block of bytes on one device.
pub struct Storage {
    ptr: NonNull<u8>,
    nbytes: usize,
    kind: Kind,
    readonly: bool,
    version: AtomicU64,
    /// The rebinding epoch (see [`rebind_epoch`]) at which a tensor last
    /// stopped viewing this storage because its data was rebound
    /// (`t.data = u`); 0 when that never happened. Captured graphs that read
    /// this storage by reference were made for the tensor's old data.
    rebound: AtomicU64,
    device: Device,
    /// Deferred-evaluation flags ([`crate::tensor::defer`]): the bytes are
    /// not computed yet, a queued program reads them, or other code may
    /// write them behind our back.
    defer: AtomicU8,
}

// SAFETY: the bytes are plain data; concurrent access discipline is the
// kernels' job (outputs are never aliased with inputs except for declared
// in-place ops), exactly as for any tensor library.
unsafe impl Send for Storage {}
unsafe impl Sync for Storage {}

impl Storage {
    /// Allocate `nbytes` uninitialised bytes on the CPU (from the cache when possible).
    pub fn new_cpu(nbytes: usize) -> Result<Storage> {
        let (ptr, cap) = cpu_alloc(nbytes, false)?;
        Ok(Storage::from_owned(ptr, nbytes, cap))
    }

    /// Allocate `nbytes` zeroed bytes on the CPU.
    pub fn zeroed_cpu(nbytes: usize) -> Result<Storage> {
        let (ptr, cap) = cpu_alloc(nbytes, true)?;
        Ok(Storage::from_owned(ptr, nbytes, cap))
    }

    /// A storage of `nbytes` on the `Meta` device: size bookkeeping only.
    pub fn new_meta(nbytes: usize) -> Storage {
        Storage {
            ptr: NonNull::dangling(),
            nbytes,
            kind: Kind::Meta,
            readonly: false,
            version: AtomicU64::new(0),
            rebound: AtomicU64::new(0),
            device: Device::Meta,
            defer: AtomicU8::new(0),
        }
    }

    /// A storage of `nbytes` (logical bytes: elements × the dtype's
    /// itemsize) on GPU `device`, whose memory `handle` owns.
    pub fn from_gpu(nbytes: usize, device: Device, handle: Box<dyn Any + Send + Sync>) -> Storage {
        Storage {
            ptr: NonNull::dangling(),
            nbytes,
            kind: Kind::Gpu { handle },
            readonly: false,
            version: AtomicU64::new(0),
            rebound: AtomicU64::new(0),
            device,
            defer: AtomicU8::new(0),
        }
    }

    /// The backend's handle of a GPU storage (`None` on other devices).
    pub fn gpu_handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        match &self.kind {
            Kind::Gpu { handle } => Some(handle.as_ref()),
            _ => None,
        }
    }

    fn from_owned(ptr: NonNull<u8>, nbytes: usize, cap: usize) -> Storage {
        Storage {
            ptr,
            nbytes,
            kind: Kind::Owned { cap },
            readonly: false,
            version: AtomicU64::new(0),
            rebound: AtomicU64::new(0),
            device: Device::Cpu,
            defer: AtomicU8::new(0),
        }
    }

    /// Wrap foreign CPU memory. `owner` must keep `[ptr, ptr+nbytes)` valid while it lives.
    ///
    /// # Safety
    /// The caller guarantees the memory is valid for `nbytes` bytes for as long as `owner` lives.
    pub unsafe fn from_foreign(
        ptr: *mut u8,
        nbytes: usize,
        readonly: bool,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Storage {
        let ptr = NonNull::new(ptr).unwrap_or(NonNull::dangling());
        Storage {
            ptr,
            nbytes,
            kind: Kind::Foreign { owner },
            readonly,
            version: AtomicU64::new(0),
            rebound: AtomicU64::new(0),
            device: Device::Cpu,
            // Its owner may write it at any time: never read later.
            defer: AtomicU8::new(defer::SHARED),
        }
    }

    /// The address of the bytes. Panics for storage without memory (the
    /// `Meta` device): kernels and data readers never reach such storage,
    /// and a panic is caught at the Python boundary rather than reading
    /// through a dangling pointer.
    ///
    /// A result still being deferred, or an input a deferred result has
    /// yet to read, first has every deferred result computed (see
    /// [`crate::tensor::defer`]), so the bytes behind the pointer are final
    /// and may be written.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        if self.defer.load(Ordering::Acquire) & (defer::PENDING | defer::READ | defer::POISONED)
            != 0
        {
            defer::settle(self);
        }
        assert!(
            !matches!(self.kind, Kind::Meta),
            "the data of a symbolic (meta) tensor was read"
        );
        assert!(
            !matches!(self.kind, Kind::Gpu { .. }),
            "internal error: the memory of a GPU tensor was read on the host (copy it with .cpu() first)"
        );
        self.ptr.as_ptr()
    }
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }
    #[inline]
    pub fn device(&self) -> Device {
        self.device
    }
    #[inline]
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }
    pub fn is_foreign(&self) -> bool {
        matches!(self.kind, Kind::Foreign { .. })
    }
    /// What keeps borrowed memory alive (`None` for other storage).
    pub(crate) fn foreign_owner(&self) -> Option<&(dyn Any + Send + Sync)> {
        match &self.kind {
            Kind::Foreign { owner } => Some(owner.as_ref()),
            _ => None,
        }
    }
    /// Host memory this library allocated (from the CPU caching allocator).
    #[inline]
    pub(crate) fn is_owned(&self) -> bool {
        matches!(self.kind, Kind::Owned { .. })
    }
    /// The address of the bytes for code outside this library (NumPy,
    /// DLPack, `data_ptr`): from now on the storage may change behind our
    /// back, so no deferred result will ever read it.
    pub fn export_ptr(&self) -> *mut u8 {
        if self.defer_flags() & defer::SHARED == 0 {
            defer::mark_shared(self);
        }
        self.as_ptr()
    }
    /// The deferred-evaluation flags (`defer::PENDING | READ | SHARED`).
    #[inline]
    pub(crate) fn defer_flags(&self) -> u8 {
        self.defer.load(Ordering::Acquire)
    }
    pub(crate) fn set_defer_flags(&self, flags: u8) {
        self.defer.fetch_or(flags, Ordering::AcqRel);
    }
    pub(crate) fn clear_defer_flags(&self, flags: u8) {
        self.defer.fetch_and(!flags, Ordering::AcqRel);
    }
    /// The version counter: bumped by every in-place write.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
    #[inline]
    pub fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }
    /// Start the version counter of a storage that takes over another's
    /// data (a tensor moved to shared memory) at that storage's count.
    pub(crate) fn continue_version(&self, v: u64) {
        self.version.store(v, Ordering::Release);
    }
    /// Note that a tensor stopped viewing this storage because its data was
    /// rebound to other storage; returns the new [`rebind_epoch`].
    pub fn mark_rebound(&self) -> u64 {
        let e = REBIND_EPOCH.fetch_add(1, Ordering::AcqRel) + 1;
        self.rebound.fetch_max(e, Ordering::AcqRel);
        e
    }
    /// The [`rebind_epoch`] at which a tensor last stopped viewing this
    /// storage (0: never).
    #[inline]
    pub fn rebound_at(&self) -> u64 {
        self.rebound.load(Ordering::Acquire)
    }
}

/// Counts data rebindings (`t.data = u`) in this process.
static REBIND_EPOCH: AtomicU64 = AtomicU64::new(0);

/// The number of data rebindings so far: a captured graph made at epoch `e`
/// reads stale data when one of the storages it reads by reference has
/// [`Storage::rebound_at`] `> e`.
pub fn rebind_epoch() -> u64 {
    REBIND_EPOCH.load(Ordering::Acquire)
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Kind::Owned { cap } = self.kind {
            cpu_free(self.ptr, cap);
        }
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} bytes on {})", self.nbytes, self.device)
    }
}

// ---------------------------------------------------------------------------
// CPU caching allocator
// ---------------------------------------------------------------------------

/// Blocks at least this big are kept by size class (four per power of two).
const CACHE_MIN: usize = 1 << 16;
/// Smaller blocks (multiples of 64 bytes) are kept per exact size, at most
/// this many of each size and [`SMALL_MAX_BYTES`] in all: an aligned
/// `malloc`/`free` pair costs about as much as a small op's whole kernel.
const SMALL_PER_CLASS: usize = 64;
const SMALL_MAX_BYTES: usize = 16 << 20;

#[derive(Default)]
struct Cache {
    /// Blocks of at least [`CACHE_MIN`] bytes by size class.
    free: HashMap<usize, Vec<usize>>,
    /// Smaller blocks by size (index `cap / ALIGN - 1`).
    small: Vec<Vec<usize>>,
    /// Bytes held in `free` and `small`.
    cached_bytes: usize,
    /// Bytes held in `small`.
    small_bytes: usize,
    /// Bytes of blocks held by live storages, and the most at once. These
    /// and the counters below change under the cache's lock, which every
    /// allocation and free takes anyway: separate atomics cost several
    /// locked instructions per small op.
    in_use: usize,
    peak: usize,
    /// Allocations made, and how many of them the cache served.
    allocs: usize,
    hits: usize,
    /// Bytes of every block handed out since start (never decreases).
    allocated: usize,
}

impl Cache {
    /// A cached block of exactly `cap` bytes (a size class), if any.
    fn take(&mut self, cap: usize) -> Option<usize> {
        let p = if cap >= CACHE_MIN {
            self.free.get_mut(&cap).and_then(|v| v.pop())
        } else {
            let p = self.small.get_mut(cap / ALIGN - 1).and_then(|v| v.pop());
            if p.is_some() {
                self.small_bytes -= cap;
            }
            p
        };
        if p.is_some() {
            self.cached_bytes -= cap;
        }
        p
    }

    /// Count an allocation of `cap` bytes (`hit`: served from the cache).
    fn note_alloc(&mut self, cap: usize, hit: bool) {
        self.in_use += cap;
        self.peak = self.peak.max(self.in_use);
        self.allocs += 1;
        self.hits += usize::from(hit);
        self.allocated += cap;
    }

    /// Keep a freed block if the limits allow; `false` when it must go back to the system.
    fn keep(&mut self, p: usize, cap: usize) -> bool {
        if self.cached_bytes + cap > CACHE_CAP.load(Ordering::Relaxed) {
            return false;
        }
        if cap >= CACHE_MIN {
            self.free.entry(cap).or_default().push(p);
        } else {
            let i = cap / ALIGN - 1;
            if self.small_bytes + cap > SMALL_MAX_BYTES
                || self
                    .small
                    .get(i)
                    .is_some_and(|v| v.len() >= SMALL_PER_CLASS)
            {
                return false;
            }
            if self.small.len() <= i {
                self.small.resize_with(i + 1, Vec::new);
            }
            self.small[i].push(p);
            self.small_bytes += cap;
        }
        self.cached_bytes += cap;
        true
    }

    /// Every cached block as (pointer, size), leaving the cache empty.
    fn drain(&mut self) -> Vec<(usize, usize)> {
        self.cached_bytes = 0;
        self.small_bytes = 0;
        let mut out: Vec<(usize, usize)> = self
            .free
            .drain()
            .flat_map(|(cap, v)| v.into_iter().map(move |p| (p, cap)))
            .collect();
        for (i, v) in self.small.iter_mut().enumerate() {
            out.extend(v.drain(..).map(|p| (p, (i + 1) * ALIGN)));
        }
        out
    }
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
static CACHE_CAP: AtomicUsize = AtomicUsize::new(2 << 30);

fn with_cache<R>(f: impl FnOnce(&mut Cache) -> R) -> R {
    f(CACHE.lock().get_or_insert_with(Cache::default))
}

/// Round a request to its size class: multiples of 64 bytes below the cache
/// threshold, four classes per power of two above it (≤ 25% slack).
pub fn size_class(n: usize) -> usize {
    let n = n.max(1);
    if n < CACHE_MIN {
        return n.div_ceil(ALIGN) * ALIGN;
    }
    let p = usize::BITS - 1 - n.leading_zeros(); // floor(log2 n)
    let step = 1usize << (p - 2);
    n.div_ceil(step) * step
}

/// Blocks of at least this many bytes are aligned to [`HUGE_PAGE`] and, on
/// Linux, marked for transparent huge pages: streaming kernels over tens of
/// megabytes lose about a third of their bandwidth to TLB misses on 4 KiB
/// pages, and one fault per 2 MiB instead of 512 makes fresh outputs cheaper.
const HUGE_MIN: usize = 4 << 20;
/// The huge-page size (x86-64 and most aarch64 kernels).
const HUGE_PAGE: usize = 2 << 20;

/// The layout a block of `cap` bytes (a size class) is allocated with; `None`
/// when the size cannot be allocated at all.
fn block_layout(cap: usize) -> Option<AllocLayout> {
    let align = if cap >= HUGE_MIN { HUGE_PAGE } else { ALIGN };
    AllocLayout::from_size_align(cap, align).ok()
}

#[cfg(target_os = "linux")]
extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
}

/// Allocate a block with `layout`; large blocks are advised to use huge pages
/// before anything touches them (zeroing included).
fn raw_alloc(layout: AllocLayout, zeroed: bool) -> Option<NonNull<u8>> {
    if layout.align() < HUGE_PAGE {
        // SAFETY: layout has non-zero size.
        return NonNull::new(unsafe {
            if zeroed {
                alloc_zeroed(layout)
            } else {
                alloc(layout)
            }
        });
    }
    // SAFETY: layout has non-zero size.
    let p = NonNull::new(unsafe { alloc(layout) })?;
    #[cfg(target_os = "linux")]
    {
        const MADV_HUGEPAGE: i32 = 14;
        // SAFETY: the range is the block just allocated; the advice only
        // changes how the kernel backs it. Failure (THP disabled) is harmless.
        unsafe { madvise(p.as_ptr().cast(), layout.size(), MADV_HUGEPAGE) };
    }
    if zeroed {
        // SAFETY: the block is `layout.size()` bytes and exclusively ours.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0, layout.size()) };
    }
    Some(p)
}

fn cpu_alloc(nbytes: usize, zeroed: bool) -> Result<(NonNull<u8>, usize)> {
    let cap = size_class(nbytes);
    let hit = with_cache(|c| {
        let p = c.take(cap);
        if p.is_some() {
            c.note_alloc(cap, true);
        }
        p
    });
    if let Some(p) = hit {
        let ptr = NonNull::new(p as *mut u8).expect("cached pointer is non-null");
        if zeroed {
            // SAFETY: the block is `cap >= nbytes` bytes and exclusively ours.
            unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, nbytes) };
        }
        return Ok((ptr, cap));
    }
    let layout = block_layout(cap).ok_or(Error::Memory {
        op: "alloc",
        bytes: nbytes,
    })?;
    let p = match raw_alloc(layout, zeroed) {
        Some(p) => p,
        None => {
            // Give the cache back to the system and try once more.
            empty_cache();
            raw_alloc(layout, zeroed).ok_or(Error::Memory {
                op: "alloc",
                bytes: nbytes,
            })?
        }
    };
    with_cache(|c| c.note_alloc(cap, false));
    Ok((p, cap))
}

fn cpu_free(ptr: NonNull<u8>, cap: usize) {
    let kept = with_cache(|c| {
        c.in_use -= cap;
        c.keep(ptr.as_ptr() as usize, cap)
    });
    if kept {
        return;
    }
    // SAFETY: allocated by `cpu_alloc` with exactly this layout.
    unsafe {
        dealloc(
            ptr.as_ptr(),
            block_layout(cap).expect("layout of an allocated block"),
        )
    };
}

/// Return every cached block to the system.
pub fn empty_cache() {
    let blocks = with_cache(Cache::drain);
    for (p, cap) in blocks {
        // SAFETY: allocated by `cpu_alloc` with this layout and no longer referenced.
        unsafe {
            dealloc(
                p as *mut u8,
                block_layout(cap).expect("layout of an allocated block"),
            )
        };
    }
}

/// Statistics of the CPU allocator (bytes count whole size-class blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of blocks held by live storages.
    pub in_use: usize,
    /// Bytes of freed blocks kept for reuse.
    pub cached: usize,
    /// Most bytes in use at once since start or the last [`reset_peak`].
    pub peak: usize,
    /// The cache's limit in bytes.
    pub cache_limit: usize,
    /// Allocations made, and those served from the cache.
    pub allocations: usize,
    pub cache_hits: usize,
    /// Bytes of every block handed out since start (a running total, for
    /// measuring what a stretch of work allocates).
    pub allocated_total: usize,
}

/// Statistics of the CPU allocator.
pub fn memory_stats() -> MemoryStats {
    with_cache(|c| MemoryStats {
        in_use: c.in_use,
        cached: c.cached_bytes,
        peak: c.peak,
        cache_limit: CACHE_CAP.load(Ordering::Relaxed),
        allocations: c.allocs,
        cache_hits: c.hits,
        allocated_total: c.allocated,
    })
}

/// Restart peak tracking from the bytes in use now.
pub fn reset_peak() {
    with_cache(|c| c.peak = c.in_use);
}

/// Set the maximum number of bytes the cache may hold (excess frees go to the system).
pub fn set_cache_limit(bytes: usize) {
    CACHE_CAP.store(bytes, Ordering::Relaxed);
    let over = with_cache(|c| c.cached_bytes > bytes);
    if over {
        empty_cache();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_cover_request() {
        for n in [
            0usize,
            1,
            63,
            64,
            65,
            1000,
            65535,
            65536,
            70000,
            1 << 24,
            (1 << 24) + 1,
        ] {
            let c = size_class(n);
            assert!(c >= n.max(1));
            assert_eq!(c % ALIGN, 0);
            if n >= CACHE_MIN {
                assert!(c as f64 <= n as f64 * 1.25 + 1.0);
            }
        }
    }

    #[test]
    fn alloc_is_aligned_and_reused() {
        let s = Storage::new_cpu(1 << 20).unwrap();
        assert_eq!(s.as_ptr() as usize % ALIGN, 0);
        let p = s.as_ptr();
        drop(s);
        let s2 = Storage::new_cpu(1 << 20).unwrap();
        assert_eq!(s2.as_ptr(), p, "a freed large block is reused");
        let z = Storage::zeroed_cpu(1 << 20).unwrap();
        let bytes = unsafe { std::slice::from_raw_parts(z.as_ptr(), 1 << 20) };
        assert!(bytes.iter().all(|&b| b == 0));
    }

    #[test]
    fn reused_small_blocks_are_zeroed_on_request() {
        for n in [1usize, 64, 100, 4000] {
            let s = Storage::new_cpu(n).unwrap();
            assert_eq!(s.as_ptr() as usize % ALIGN, 0);
            // SAFETY: the block holds n bytes and is ours.
            unsafe { std::ptr::write_bytes(s.as_ptr(), 0xAB, n) };
            drop(s);
            let z = Storage::zeroed_cpu(n).unwrap();
            let bytes = unsafe { std::slice::from_raw_parts(z.as_ptr(), n) };
            assert!(bytes.iter().all(|&b| b == 0), "{n} bytes");
        }
    }

    #[test]
    fn huge_alloc_fails_cleanly() {
        assert!(Storage::new_cpu(usize::MAX / 2).is_err());
    }
}
