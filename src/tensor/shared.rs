//! Host memory shared between processes: what `Tensor.share_memory_()`
//! moves a tensor's storage into.
//!
//! A [`SharedRegion`] is an anonymous memory file (`memfd_create`) mapped
//! `MAP_SHARED` into this process. A child made by `fork()` inherits the
//! mapping, so its writes land in the same pages; another process (a
//! `spawn`ed child, the other end of a queue) receives a duplicate of the
//! file descriptor and maps the same file with [`SharedRegion::open`]. The
//! region keeps its descriptor open (it is what gets sent) and unmaps and
//! closes it when dropped; the kernel frees the memory when the last
//! descriptor and the last mapping, in every process, are gone. Nothing is
//! ever named in the file system, so nothing can be left behind in
//! `/dev/shm`.
//!
//! A storage over a region is [`Storage::from_foreign`] memory whose owner is
//! the region: every CPU kernel reads and writes it as it does an owned
//! buffer, and, as for any memory others may write, deferred evaluation
//! never reads it later than asked.

use std::sync::Arc;

use super::{Storage, Tensor};
use crate::error::{Error, Result};

/// The op name errors of this module carry.
const OP: &str = "share_memory_";

/// A `MAP_SHARED` mapping of an anonymous memory file, with its descriptor.
pub struct SharedRegion {
    ptr: *mut u8,
    /// Bytes mapped (at least 1: an empty tensor still gets a region).
    len: usize,
    fd: i32,
}

// SAFETY: the region is a plain block of bytes plus a descriptor; access
// discipline is the kernels', as for every storage.
unsafe impl Send for SharedRegion {}
unsafe impl Sync for SharedRegion {}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod sys {
    use std::ffi::{c_char, c_int, c_uint, c_void};

    pub const PROT_READ: c_int = 1;
    pub const PROT_WRITE: c_int = 2;
    pub const MAP_SHARED: c_int = 1;
    pub const MFD_CLOEXEC: c_uint = 1;
    pub const SEEK_END: c_int = 2;

    extern "C" {
        pub fn memfd_create(name: *const c_char, flags: c_uint) -> c_int;
        pub fn ftruncate(fd: c_int, length: i64) -> c_int;
        pub fn lseek(fd: c_int, offset: i64, whence: c_int) -> i64;
        pub fn mmap(
            addr: *mut c_void,
            length: usize,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            offset: i64,
        ) -> *mut c_void;
        pub fn munmap(addr: *mut c_void, length: usize) -> c_int;
        pub fn close(fd: c_int) -> c_int;
    }
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
impl SharedRegion {
    /// A new zero-filled region of `nbytes` bytes.
    pub fn create(nbytes: usize) -> Result<SharedRegion> {
        let len = nbytes.max(1);
        let size = i64::try_from(len).map_err(|_| Error::Memory {
            op: OP,
            bytes: nbytes,
        })?;
        // SAFETY: a NUL-terminated name; the flags are valid.
        let fd = unsafe { sys::memfd_create(c"ferrograd-shm".as_ptr(), sys::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_error("could not create a shared memory file"));
        }
        // SAFETY: `fd` is the descriptor just created.
        if unsafe { sys::ftruncate(fd, size) } != 0 {
            let e = os_error(&format!(
                "could not size a shared memory file to {len} bytes"
            ));
            // SAFETY: our descriptor, closed once.
            unsafe { sys::close(fd) };
            return Err(e);
        }
        SharedRegion::map(fd, len)
    }

    /// Map the region of descriptor `fd` (received from another process),
    /// which must hold at least `nbytes` bytes. The region takes `fd` over:
    /// it is closed when the region drops, or at once if mapping fails.
    pub fn open(fd: i32, nbytes: usize) -> Result<SharedRegion> {
        let len = nbytes.max(1);
        // SAFETY: seeking a descriptor has no effect on memory; a bad
        // descriptor gives -1.
        let size = unsafe { sys::lseek(fd, 0, sys::SEEK_END) };
        if size < 0 || (size as u64) < len as u64 {
            let e = if size < 0 {
                os_error(&format!("descriptor {fd} is not a shared memory file"))
            } else {
                Error::value(
                    OP,
                    format!("the shared memory file holds {size} bytes, fewer than the {len} bytes of the tensor it should hold"),
                )
            };
            if size >= 0 {
                // SAFETY: a valid descriptor we were given to own.
                unsafe { sys::close(fd) };
            }
            return Err(e);
        }
        SharedRegion::map(fd, len)
    }

    fn map(fd: i32, len: usize) -> Result<SharedRegion> {
        // SAFETY: a fresh mapping of `len` bytes of `fd` at an address the
        // kernel picks; nothing else is touched.
        let p = unsafe {
            sys::mmap(
                std::ptr::null_mut(),
                len,
                sys::PROT_READ | sys::PROT_WRITE,
                sys::MAP_SHARED,
                fd,
                0,
            )
        };
        if p as isize == -1 {
            let e = os_error(&format!("could not map {len} bytes of shared memory"));
            // SAFETY: our descriptor, closed once.
            unsafe { sys::close(fd) };
            return Err(e);
        }
        Ok(SharedRegion {
            ptr: p.cast(),
            len,
            fd,
        })
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
impl SharedRegion {
    /// Shared memory tensors need Linux (`memfd_create`).
    pub fn create(_nbytes: usize) -> Result<SharedRegion> {
        Err(unsupported())
    }
    /// Shared memory tensors need Linux (`memfd_create`).
    pub fn open(_fd: i32, _nbytes: usize) -> Result<SharedRegion> {
        Err(unsupported())
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn unsupported() -> Error {
    Error::runtime(
        OP,
        "shared memory tensors are supported on 64-bit Linux only (they live in memfd files)",
    )
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn os_error(what: &str) -> Error {
    Error::runtime(OP, format!("{what}: {}", std::io::Error::last_os_error()))
}

impl SharedRegion {
    /// The descriptor of the region's memory file (owned by the region: to
    /// send it, send a duplicate).
    pub fn fd(&self) -> i32 {
        self.fd
    }
    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never true: a region maps at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// The address of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        // SAFETY: the mapping and descriptor are ours and released once;
        // the storage that used the bytes is gone (it owns us).
        unsafe {
            sys::munmap(self.ptr.cast(), self.len);
            sys::close(self.fd);
        }
    }
}

impl std::fmt::Debug for SharedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedRegion({} bytes, fd {})", self.len, self.fd)
    }
}

impl Storage {
    /// A CPU storage of `nbytes` over `region` (which holds at least that many).
    fn over_region(region: SharedRegion, nbytes: usize) -> Storage {
        let p = region.as_ptr();
        debug_assert!(region.len() >= nbytes);
        // SAFETY: the region maps at least `nbytes` bytes and lives as long
        // as the storage that owns it.
        unsafe { Storage::from_foreign(p, nbytes, false, Box::new(region)) }
    }

    /// A zero-filled CPU storage of `nbytes` in a new shared region.
    pub fn shared_cpu(nbytes: usize) -> Result<Storage> {
        Ok(Storage::over_region(SharedRegion::create(nbytes)?, nbytes))
    }

    /// A CPU storage of `nbytes` over the shared memory file `fd` (taken over,
    /// as [`SharedRegion::open`] does).
    pub fn from_shared_fd(fd: i32, nbytes: usize) -> Result<Storage> {
        Ok(Storage::over_region(
            SharedRegion::open(fd, nbytes)?,
            nbytes,
        ))
    }

    /// The shared region this storage lives in, if any.
    pub fn shared_region(&self) -> Option<&SharedRegion> {
        self.foreign_owner()?.downcast_ref::<SharedRegion>()
    }
}

impl Tensor {
    /// Whether this tensor's data lives in shared memory.
    pub fn is_shared(&self) -> bool {
        self.storage().shared_region().is_some()
    }

    /// This tensor (same layout, dtype and autograd state) over a copy of its
    /// whole storage in a new shared region; the version counter carries
    /// over. Already shared: a clone. Only CPU tensors can be shared.
    pub fn share_memory(&self) -> Result<Tensor> {
        if self.is_shared() {
            return Ok(self.clone());
        }
        let old = self.storage();
        if old.device() != super::Device::Cpu {
            return Err(Error::runtime(
                OP,
                format!(
                    "only CPU tensors can be moved to shared memory; this tensor (shape {:?}, dtype {}) is on {} \
                     (copy it with .cpu() first)",
                    self.shape(),
                    self.dtype(),
                    self.device()
                ),
            ));
        }
        let n = old.nbytes();
        let new = Storage::shared_cpu(n)?;
        if n > 0 {
            // SAFETY: both blocks hold `n` bytes and are distinct; reading
            // `old` settles any deferred write to it first.
            unsafe { std::ptr::copy_nonoverlapping(old.as_ptr(), new.as_ptr(), n) };
        }
        new.continue_version(old.version());
        Ok(self.twin_with_storage(Arc::new(new)))
    }
}

#[cfg(all(test, target_os = "linux", target_pointer_width = "64"))]
mod tests {
    use super::*;
    use crate::tensor::{DType, Device, Layout};

    #[test]
    fn a_second_mapping_sees_writes() {
        let a = Storage::shared_cpu(64).unwrap();
        let fd = a.shared_region().unwrap().fd();
        // SAFETY: duplicating a valid descriptor.
        let dup = unsafe { libc_dup(fd) };
        assert!(dup >= 0);
        let b = Storage::from_shared_fd(dup, 64).unwrap();
        assert_ne!(a.as_ptr(), b.as_ptr());
        // SAFETY: both map the same 64 bytes.
        unsafe {
            *a.as_ptr().add(5) = 42;
            assert_eq!(*b.as_ptr().add(5), 42);
        }
    }

    #[test]
    fn tensors_keep_layout_and_version() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        t.storage().bump_version();
        let tt = t.with_layout(Layout {
            shape: [2usize, 2].as_slice().into(),
            strides: [1isize, 2].as_slice().into(),
            offset: 0,
        });
        let s = tt.share_memory().unwrap();
        assert!(s.is_shared() && !tt.is_shared());
        assert_eq!(s.strides(), &[1, 2]);
        assert_eq!(s.version(), 1);
        assert_eq!(s.dtype(), DType::F32);
        assert_eq!(s.device(), Device::Cpu);
        // SAFETY: both storages hold the 16 bytes of four f32.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(s.storage().as_ptr() as *const f32, 4),
                std::slice::from_raw_parts(tt.storage().as_ptr() as *const f32, 4),
            )
        };
        assert_eq!(a, b);
        assert!(s.share_memory().unwrap().shares_storage(&s));
    }

    #[test]
    fn a_short_file_is_refused() {
        let a = Storage::shared_cpu(8).unwrap();
        // SAFETY: duplicating a valid descriptor.
        let dup = unsafe { libc_dup(a.shared_region().unwrap().fd()) };
        assert!(Storage::from_shared_fd(dup, 1 << 20).is_err());
        assert!(Storage::from_shared_fd(-1, 8).is_err());
    }

    extern "C" {
        #[link_name = "dup"]
        fn libc_dup(fd: i32) -> i32;
    }
}
